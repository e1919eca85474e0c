/* Tensor entry points of the morphology family: programs compiled once per key of everything that
 * determines them (op, options, the element's bytes, shapes, dtypes, backend) and kept in the
 * context's cache.
 *
 * Device tensors. x and dy may be CUDA device tensors when the program runs on the cuda backend
 * (the plan runner reads contiguous device inputs in place, and when every input is on the device
 * the result stays there); on any other backend they are NX_ERR_UNSUPPORTED, naming the tensor.
 * The structuring element and footprint are read on the host (they become graph constants). */
#include <math.h>
#include <string.h>

#include "cache.h"
#include "program/program.h"
#include "internal.h"
#include "nitrix-graph.h"
#include "nitrix-ops.h"

/* stage: the whole op in one program, or the two programs of a padded flat box (see
 * run_padded_box). */
typedef enum morph_stage { STAGE_WHOLE, STAGE_PAD, STAGE_FOLD } morph_stage;

typedef struct morph_call {
    nx_morph_op op;
    const nx_tensor *x, *dy;
    const nx_morph_opts *o;
    morph_stage stage;
} morph_call;

/* The element becomes graph constants, so its values are part of the key. */
static void key_elem(nx_rt_cache_blob *b, const char *field, const nx_tensor *t)
{
    nx_rt_cache_blob_tensor(b, field, t);
    if (!t)
        return;
    nx_tensor *c = NULL;
    if (nx_tensor_contiguous(t, &c) != NX_OK) {
        b->failed = true;
        return;
    }
    nx_rt_cache_blob_bytes(b, field, nx_tensor_data(c),
                           (size_t)nx_tensor_numel(c) * nx_dtype_size(nx_tensor_dtype(c)));
    nx_tensor_free(c);
}

static void key_opts(nx_rt_cache_blob *b, const morph_call *c, nx_backend backend)
{
    const nx_morph_opts *o = c->o;
    nx_rt_cache_blob_str(b, "op", c->dy ? "morph_vjp" : "morph");
    nx_rt_cache_blob_i64(b, "stage", c->stage);
    int64_t geo[4 + NX_MORPH_MAX_SPATIAL] = {c->op, o->nspatial, o->padding, o->border};
    memcpy(geo + 4, o->size, sizeof o->size);
    nx_rt_cache_blob_bytes(b, "geo", geo, sizeof geo);
    nx_rt_cache_blob_bytes(b, "cval", &o->cval, sizeof o->cval);
    nx_rt_cache_blob_tensor(b, "x", c->x);
    nx_rt_cache_blob_tensor(b, "dy", c->dy);
    key_elem(b, "footprint", o->footprint);
    key_elem(b, "structure", o->structure);
    nx_rt_cache_blob_i64(b, "backend", backend);
}

/* x padded on every spatial axis as a SAME dilation (erosion) of a flat box pads it: the first
 * program of run_padded_box. */
static nx_node pad_box(nx_graph *g, nx_node x, bool dilate, const nx_morph_opts *o)
{
    int nd = nx_node_ndim(g, x), nsp = o->nspatial ? o->nspatial : nd, lead = nd - nsp;
    int64_t lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0};
    for (int i = 0; i < nsp; i++) {
        int64_t w = o->size[i] ? o->size[i] : 3, half = w / 2, rest = w - 1 - half;
        lo[lead + i] = dilate ? rest : half;
        hi[lead + i] = dilate ? half : rest;
    }
    static const nx_pad_mode modes[NX_MORPH_BORDER_COUNT] = {
        [NX_MORPH_BORDER_REFLECT] = NX_PAD_REFLECT, [NX_MORPH_BORDER_CONSTANT] = NX_PAD_CONSTANT,
        [NX_MORPH_BORDER_NEAREST] = NX_PAD_NEAREST, [NX_MORPH_BORDER_MIRROR] = NX_PAD_MIRROR,
        [NX_MORPH_BORDER_WRAP] = NX_PAD_WRAP,
    };
    return nx_pad(g, x, lo, hi, modes[o->border], o->cval);
}

static nx_status build(nx_graph *g, const morph_call *c, nx_node *out)
{
    nx_dtype dt = nx_tensor_dtype(c->x);
    nx_node x = c->dy ? nx_parameter(g, "x", dt, nx_tensor_ndim(c->x), nx_tensor_shape(c->x))
                      : nx_input(g, "x", dt, nx_tensor_ndim(c->x), nx_tensor_shape(c->x));
    nx_node xf = nx_dtype_is_float(dt) ? x : nx_cast(g, x, NX_DTYPE_F32);
    nx_node y;
    if (c->stage == STAGE_PAD) {
        y = pad_box(g, xf, c->op == NX_MORPH_DILATE, c->o);
    } else if (c->stage == STAGE_FOLD) {
        nx_morph_opts valid = *c->o;
        valid.padding = NX_MORPH_VALID;
        y = c->op == NX_MORPH_OP_COUNT ? nx_median_node(g, xf, &valid)
                                       : nx_morph_node(g, c->op, xf, &valid);
    } else {
        y = c->op == NX_MORPH_OP_COUNT ? nx_median_node(g, xf, c->o)
                                       : nx_morph_node(g, c->op, xf, c->o);
    }
    if (!c->dy) {
        *out = y;
        return nx_graph_status(g);
    }
    nx_node dy =
        nx_input(g, "dy", nx_tensor_dtype(c->dy), nx_tensor_ndim(c->dy), nx_tensor_shape(c->dy));
    if (nx_graph_status(g) != NX_OK)
        return nx_graph_status(g);
    return nx_graph_vjp(g, 1, &y, &dy, 1, &x, out);
}

static nx_status compile(nx_ctx *ctx, const void *user, nx_program **out)
{
    const morph_call *c = user;
    nx_graph *g = NULL;
    nx_status st = nx_graph_new(ctx, &g);
    if (st != NX_OK)
        return st;
    nx_node y = NX_NONE;
    st = build(g, c, &y);
    if (st == NX_OK) {
        nx_compile_opts co = {.backend = c->o->backend, .n_outputs = 1, .outputs = &y};
        st = nx_graph_compile(g, &co, out);
    }
    nx_graph_free(g);
    return st;
}

static nx_status program(nx_ctx *ctx, const morph_call *c, nx_program **out)
{
    nx_rt_cache_blob b;
    nx_rt_cache_blob_init(&b, ctx);
    key_opts(&b, c, c->o->backend);
    return nx_program_cached(ctx, &b, "morphology: cache key", compile, c, out);
}

static nx_status check_x(nx_ctx *ctx, const char *who, const nx_tensor *x, const char *what)
{
    if (!x)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %s is NULL", who, what);
    nx_dtype d = nx_tensor_dtype(x);
    if (d == NX_DTYPE_F16 || d == NX_DTYPE_BF16)
        return nx_rt_error(ctx, NX_ERR_DTYPE,
                           "%s: %s is %s; expected f32, f64, an integer or bool (cast first)", who,
                           what, nx_dtype_name(d));
    return NX_OK;
}

/* Device inputs need a program on the cuda backend. */
static nx_status check_device(nx_ctx *ctx, const char *who, const morph_call *c,
                              const nx_program *p)
{
    const char *what = nx_tensor_device(c->x) != NX_DEVICE_HOST             ? "x"
                       : c->dy && nx_tensor_device(c->dy) != NX_DEVICE_HOST ? "dy"
                                                                            : NULL;
    if (!what || nx_program_backend(p) == NX_BACKEND_CUDA)
        return NX_OK;
    return nx_rt_error(ctx, NX_ERR_UNSUPPORTED,
                       "%s: %s is a CUDA device tensor but the op runs on the %s backend; expected "
                       "host tensors, or the cuda backend",
                       who, what, nx_backend_name(nx_program_backend(p)));
}

/* An empty image has no windows to view; SAME gives an empty result of its shape. */
static bool empty_same(const nx_tensor *x, const nx_morph_opts *o)
{
    return nx_tensor_numel(x) == 0 && o->padding == NX_MORPH_SAME;
}

/* A SAME median over a box (size, no footprint) of a valid geometry on the host; anything else
 * compiles the whole op, so errors read as they always do. The median pads as the erosion does
 * (its window is not reflected). Dilation and erosion run as one program: since the CPU backend
 * splits padded loops into borders and an interior (codegen/x86/borders.c), the inlined pad costs
 * nothing in the interior, and the fused 3^3 box at 256^3 takes ~0.031 s of CPU time against
 * ~0.038 s padded first; the median's 27-slice network still runs faster on a padded copy
 * (~0.015 s against ~0.030 s at 128^3). On the device one program is one kernel. */
static bool padded_box(const morph_call *c)
{
    const nx_morph_opts *o = c->o;
    if (c->op != NX_MORPH_OP_COUNT || nx_tensor_device(c->x) != NX_DEVICE_HOST)
        return false;
    if (c->dy || o->footprint || o->structure || o->padding != NX_MORPH_SAME ||
        (unsigned)o->border >= NX_MORPH_BORDER_COUNT)
        return false;
    int nd = nx_tensor_ndim(c->x), nsp = o->nspatial ? o->nspatial : nd;
    if (o->nspatial < 0 || nsp < 1 || nsp > NX_MORPH_MAX_SPATIAL || nsp > nd)
        return false;
    for (int i = 0; i < nsp; i++)
        if (o->size[i] < 0)
            return false;
    return !(o->border == NX_MORPH_BORDER_CONSTANT && isnan(o->cval));
}

/* The same result as the whole program, in two: the image padded on every axis at once, then the
 * fold over VALID windows of it. */
static nx_status run_padded_box(nx_ctx *ctx, const morph_call *c, nx_tensor **out)
{
    morph_call pad = *c, fold = *c;
    pad.stage = STAGE_PAD;
    fold.stage = STAGE_FOLD;
    nx_program *pp = NULL, *pf = NULL;
    nx_tensor *xp = NULL;
    nx_status st = program(ctx, &pad, &pp);
    if (st == NX_OK)
        st = nx_program_run(pp, (const nx_tensor *const[]){c->x}, &xp);
    if (st == NX_OK) {
        fold.x = xp;
        st = program(ctx, &fold, &pf);
    }
    if (st == NX_OK)
        st = nx_program_run(pf, (const nx_tensor *const[]){xp}, out);
    nx_tensor_free(xp);
    return st;
}

static nx_status run(nx_ctx *ctx, const char *who, morph_call *c, nx_tensor **out)
{
    static const nx_morph_opts defaults = {0};
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: ctx is NULL", who);
    if (!out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: out is NULL", who);
    *out = NULL;
    if (!c->o)
        c->o = &defaults;
    nx_status st = check_x(ctx, who, c->x, "x");
    if (st == NX_OK && c->dy)
        st = check_x(ctx, who, c->dy, "dy");
    if (st != NX_OK)
        return st;
    if (empty_same(c->x, c->o)) {
        nx_dtype d = nx_tensor_dtype(c->x);
        return nx_tensor_new(ctx, nx_dtype_is_float(d) ? d : NX_DTYPE_F32, nx_tensor_ndim(c->x),
                             nx_tensor_shape(c->x), out);
    }
    if (padded_box(c))
        return run_padded_box(ctx, c, out);
    nx_program *p = NULL;
    if ((st = program(ctx, c, &p)) != NX_OK)
        return st;
    if ((st = check_device(ctx, who, c, p)) != NX_OK)
        return st;
    if (c->dy)
        return nx_program_run(p, (const nx_tensor *const[]){c->x, c->dy}, out);
    return nx_program_run(p, (const nx_tensor *const[]){c->x}, out);
}

nx_status nx_morph(nx_ctx *ctx, nx_morph_op op, const nx_tensor *x, const nx_morph_opts *opts,
                   nx_tensor **out)
{
    morph_call c = {.op = op, .x = x, .o = opts};
    if ((unsigned)op >= NX_MORPH_OP_COUNT) {
        if (out)
            *out = NULL;
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "nx_morph: op %d is not an nx_morph_op",
                           (int)op);
    }
    return run(ctx, "nx_morph", &c, out);
}

nx_status nx_morph_vjp(nx_ctx *ctx, nx_morph_op op, const nx_tensor *x, const nx_tensor *dy,
                       const nx_morph_opts *opts, nx_tensor **dx)
{
    morph_call c = {.op = op, .x = x, .dy = dy, .o = opts};
    if ((unsigned)op >= NX_MORPH_OP_COUNT)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "nx_morph_vjp: op %d is not an nx_morph_op",
                           (int)op);
    if (x && !nx_dtype_is_float(nx_tensor_dtype(x)))
        return nx_rt_error(ctx, NX_ERR_DTYPE, "nx_morph_vjp: x is %s; expected f32 or f64",
                           nx_dtype_name(nx_tensor_dtype(x)));
    return run(ctx, "nx_morph_vjp", &c, dx);
}

nx_status nx_median_filter(nx_ctx *ctx, const nx_tensor *x, const nx_morph_opts *opts,
                           nx_tensor **out)
{
    morph_call c = {.op = NX_MORPH_OP_COUNT, .x = x, .o = opts};
    return run(ctx, "nx_median_filter", &c, out);
}
