/* The shared half of the grey ops' descriptors (dilate.c, erode.c, open.c, close.c,
 * median_filter.c): their option schema, the check, and the run, which is one program per key
 * (nx_op_program, keyed by the runner: options by value, the element's bytes, shapes, dtypes,
 * backend) except for two special paths: an empty SAME image (no windows to view: an empty result)
 * and the SAME box median on the host (two programs, see run_padded_box). The older entry points
 * nx_morph, nx_morph_vjp and nx_median_filter are short wrappers around the runner here.
 *
 * Device tensors. x and dy may be CUDA device tensors when the program runs on the cuda backend
 * (the runner's placement refuses them on any other, naming the tensor). The structuring element
 * and footprint are read on the host (they become graph constants). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "morph.h"
#include "nitrix-graph.h"
#include "nitrix-ops.h"

/* ---- the schema ----------------------------------------------------------------------------*/

#define SIZE_OPT                                                                                   \
    {                                                                                              \
        "size", NX_OPT_INTS, "3", "1:", NX_MORPH_MAX_SPATIAL,                                      \
            "flat box extents per spatial axis, or one for all (ignored with a footprint)"         \
    }
#define FOOTPRINT_OPT                                                                              \
    {                                                                                              \
        "footprint", NX_OPT_TENSOR, "none", NULL, 1,                                               \
            "flat footprint (.npy of the spatial dims; nonzero = in), or none"                     \
    }
#define TAIL_OPTS                                                                                  \
    {                                                                                              \
        "padding", NX_OPT_ENUM,                                                                    \
        "SAME",    "SAME|VALID",                                                                   \
        1,         "SAME: output of x's shape; VALID: only windows inside the image"},             \
        {"mode",    NX_OPT_BORDER,                                                                 \
         "reflect", NULL,                                                                          \
         1,         "border rule: reflect, constant, nearest, mirror or wrap (scipy's mode)"},     \
        {"cval", NX_OPT_FLOAT, "0", NULL, 1, "value outside for mode=constant"},                   \
    {                                                                                              \
        "nspatial", NX_OPT_INT, "0", "0:4", 1,                                                     \
            "how many trailing axes are spatial (leading ones are batch); 0: all (ndim <= 4)"      \
    }

const nx_op_opt nx_morph_opts_schema[NX_MORPH_NOPTS] = {
    SIZE_OPT,
    {"structuring_element", NX_OPT_TENSOR, "none", NULL, 1,
     "non-flat element (.npy, f32/f64, added to the window; with a footprint only its places "
     "count), or none"},
    FOOTPRINT_OPT,
    TAIL_OPTS,
};

const nx_op_opt nx_morph_median_schema[NX_MORPH_MEDIAN_NOPTS] = {SIZE_OPT, FOOTPRINT_OPT,
                                                                 TAIL_OPTS};

#define F(m) offsetof(nx_morph_args, m), NX_OP_NO_FIELD, sizeof(((nx_morph_args *)0)->m)
#define FN(m, n)                                                                                   \
    offsetof(nx_morph_args, m), offsetof(nx_morph_args, n), sizeof(((nx_morph_args *)0)->m)
const nx_op_field nx_morph_fields[] = {
    {FN(size, nsize)}, {F(structure)}, {F(footprint)}, {F(padding)},
    {F(mode)},         {F(cval)},      {F(nspatial)},
};
const nx_op_field nx_morph_median_fields[] = {
    {FN(size, nsize)}, {F(footprint)}, {F(padding)}, {F(mode)}, {F(cval)}, {F(nspatial)},
};
#undef F
#undef FN

/* Max and min select one input exactly, and the median one of its window: exact in every dtype
 * (tests/ops/morphology assert equality with scipy; integer and bool results keep x's dtype). */
const nx_op_tol nx_morph_exact_tols[NX_MORPH_NTOLS] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0}, {NX_DTYPE_F64, NULL, NULL, 0, 0},
    {NX_DTYPE_U8, NULL, NULL, 0, 0},  {NX_DTYPE_BOOL, NULL, NULL, 0, 0},
    {NX_DTYPE_I8, NULL, NULL, 0, 0},  {NX_DTYPE_I16, NULL, NULL, 0, 0},
    {NX_DTYPE_I32, NULL, NULL, 0, 0}, {NX_DTYPE_I64, NULL, NULL, 0, 0},
};

/* ---- one call ------------------------------------------------------------------------------*/

/* stage: the whole op in one program, or the two programs of a padded flat box (see
 * run_padded_box). */
typedef enum morph_stage { STAGE_WHOLE, STAGE_PAD, STAGE_FOLD } morph_stage;
static const char *const stage_names[] = {"whole", "pad", "fold"};

typedef struct morph_call {
    int op; /* an nx_morph_op; NX_MORPH_OP_COUNT: the median */
    const nx_tensor *x;
    nx_morph_opts o;
    morph_stage stage;
    nx_dtype out_dtype; /* x's dtype: the result keeps it, as scipy's does */
} morph_call;

static void opts_of(const nx_morph_args *a, nx_morph_opts *o)
{
    *o = (nx_morph_opts){
        .backend = a->backend,
        .nspatial = a->nspatial >= 0 && a->nspatial <= NX_MORPH_MAX_SPATIAL ? (int)a->nspatial : -1,
        .footprint = a->footprint,
        .structure = a->structure,
        .padding = (nx_morph_padding)a->padding,
        .border = (nx_border)a->mode,
        .cval = a->cval};
    memcpy(o->size, a->size, sizeof o->size);
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

/* Integer and bool inputs are computed in a float dtype that holds each of their values exactly
 * (f32 up to 16 bits, f64 for i32 and i64; i64 values beyond 2^53 round). */
static nx_dtype compute_dtype(nx_dtype d)
{
    switch (d) {
    case NX_DTYPE_I32:
    case NX_DTYPE_I64:
        return NX_DTYPE_F64;
    default:
        return NX_DTYPE_F32;
    }
}

/* Forward of the stage; in a vjp, x is the parameter nx_op_program differentiates. */
static nx_status build(nx_graph *g, const nx_op_args *oc, const void *user, int nout, nx_node *outs)
{
    (void)nout;
    const morph_call *c = user;
    nx_dtype dt = nx_tensor_dtype(c->x);
    nx_node x = oc->dy ? nx_parameter(g, "x", dt, nx_tensor_ndim(c->x), nx_tensor_shape(c->x))
                       : nx_input(g, "x", dt, nx_tensor_ndim(c->x), nx_tensor_shape(c->x));
    nx_node xf = nx_dtype_is_float(dt) ? x : nx_cast(g, x, compute_dtype(dt));
    nx_morph_opts o = c->o;
    if (c->stage == STAGE_PAD) {
        outs[0] = pad_box(g, xf, c->op == NX_MORPH_DILATE, &o);
        return nx_graph_status(g);
    }
    if (c->stage == STAGE_FOLD)
        o.padding = NX_MORPH_VALID;
    nx_node y = c->op == NX_MORPH_OP_COUNT ? nx_median_node(g, xf, &o)
                                           : nx_morph_node(g, (nx_morph_op)c->op, xf, &o);
    /* Max, min and the median pick one of the window's values, exact in the compute dtype: the
     * cast back is exact (with a structure, the sum saturates to the dtype's range). */
    if (y && !oc->dy && c->out_dtype != nx_node_dtype(g, y))
        y = nx_cast(g, y, c->out_dtype);
    outs[0] = y;
    return nx_graph_status(g);
}

static nx_status program(const nx_op_args *oc, const morph_call *c, nx_program **out)
{
    /* The fold's input is the padded float image: the result's dtype joins its key. */
    char stage[32];
    snprintf(stage, sizeof stage, "%s-%s", stage_names[c->stage], nx_dtype_name(c->out_dtype));
    return nx_op_program(oc, stage, NULL, build, c, 1, out);
}

static nx_status check_x(nx_ctx *ctx, const char *who, const nx_tensor *x, const char *what)
{
    nx_dtype d = nx_tensor_dtype(x);
    if (d == NX_DTYPE_F16 || d == NX_DTYPE_BF16)
        return nx_rt_error(ctx, NX_ERR_DTYPE,
                           "%s: %s is %s; expected f32, f64, an integer or bool (cast first)", who,
                           what, nx_dtype_name(d));
    return NX_OK;
}

nx_status nx_morph_desc_check(const nx_op_args *c, int op)
{
    const nx_tensor *x = c->in[0];
    if (c->dy && op != NX_MORPH_OP_COUNT && !nx_dtype_is_float(nx_tensor_dtype(x)))
        return nx_rt_error(c->ctx, NX_ERR_DTYPE, "%s: x is %s; expected f32 or f64", c->who,
                           nx_dtype_name(nx_tensor_dtype(x)));
    nx_status st = check_x(c->ctx, c->who, x, "x");
    if (st == NX_OK && c->dy)
        st = check_x(c->ctx, c->who, c->dy[0], "dy");
    return st;
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
static bool padded_box(const nx_op_args *oc, const morph_call *c)
{
    const nx_morph_opts *o = &c->o;
    if (c->op != NX_MORPH_OP_COUNT || nx_tensor_device(c->x) != NX_DEVICE_HOST)
        return false;
    if (oc->dy || o->footprint || o->structure || o->padding != NX_MORPH_SAME ||
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
static nx_status run_padded_box(const nx_op_args *oc, const morph_call *c, nx_tensor **out)
{
    morph_call pad = *c, fold = *c;
    pad.stage = STAGE_PAD;
    fold.stage = STAGE_FOLD;
    nx_program *pp = NULL, *pf = NULL;
    nx_tensor *xp = NULL;
    nx_status st = program(oc, &pad, &pp);
    if (st == NX_OK)
        st = nx_program_run(pp, (const nx_tensor *const[]){c->x}, &xp);
    if (st == NX_OK) {
        fold.x = xp;
        /* The fold's program is keyed by the padded shape: a copy of the call with xp as x. */
        nx_op_args fc = *oc;
        fc.in = (const nx_tensor *const[]){xp};
        st = program(&fc, &fold, &pf);
    }
    if (st == NX_OK)
        st = nx_program_run(pf, (const nx_tensor *const[]){xp}, out);
    nx_tensor_free(xp);
    return st;
}

nx_status nx_morph_desc_run(const nx_op_args *c, int op, nx_tensor **outs)
{
    morph_call m = {
        .op = op, .x = c->in[0], .stage = STAGE_WHOLE, .out_dtype = nx_tensor_dtype(c->in[0])};
    opts_of(c->opts, &m.o);
    m.o.backend = c->backend;
    if (empty_same(m.x, &m.o))
        return nx_tensor_new(c->ctx, nx_tensor_dtype(m.x), nx_tensor_ndim(m.x),
                             nx_tensor_shape(m.x), outs);
    if (padded_box(c, &m))
        return run_padded_box(c, &m, outs);
    nx_program *p = NULL;
    nx_status st = program(c, &m, &p);
    if (st != NX_OK)
        return st;
    if (c->dy)
        return nx_program_run(p, (const nx_tensor *const[]){m.x, c->dy[0]}, outs);
    return nx_program_run(p, (const nx_tensor *const[]){m.x}, outs);
}

/* ---- the typed entry points ----------------------------------------------------------------*/

static const nx_op_desc *desc_of(int op)
{
    switch (op) {
    case NX_MORPH_DILATE:
        return &nx_op_dilate;
    case NX_MORPH_ERODE:
        return &nx_op_erode;
    case NX_MORPH_OPEN:
        return &nx_op_open;
    case NX_MORPH_CLOSE:
        return &nx_op_close;
    default:
        return &nx_op_median_filter;
    }
}

/* The op's struct of the public options; NULL opts: every default (the zeroed struct). */
static void args_from(const nx_morph_opts *o, nx_morph_args *a)
{
    static const nx_morph_opts defaults = {0};
    if (!o)
        o = &defaults;
    *a = (nx_morph_args){.backend = o->backend,
                         .nsize = NX_MORPH_MAX_SPATIAL,
                         .footprint = o->footprint,
                         .structure = o->structure,
                         .padding = (int)o->padding,
                         .mode = (int)o->border,
                         .cval = o->cval,
                         .nspatial = o->nspatial};
    memcpy(a->size, o->size, sizeof a->size);
}

static nx_status typed(nx_ctx *ctx, int op, const char *who, const nx_tensor *x,
                       const nx_morph_opts *opts, const nx_tensor *dy, nx_tensor **out)
{
    nx_morph_args a;
    args_from(opts, &a);
    /* The median's schema has no structure: the builder's message refuses one. */
    const nx_tensor *const in[] = {x};
    if (dy)
        return nx_op_run_vjp_as(ctx, desc_of(op), who, in, &a, (const nx_tensor *const[]){dy}, out);
    return nx_op_run_as(ctx, desc_of(op), who, in, &a, out);
}

nx_status nx_morph(nx_ctx *ctx, nx_morph_op op, const nx_tensor *x, const nx_morph_opts *opts,
                   nx_tensor **out)
{
    if ((unsigned)op >= NX_MORPH_OP_COUNT) {
        if (out)
            *out = NULL;
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "nx_morph: op %d is not an nx_morph_op",
                           (int)op);
    }
    return typed(ctx, (int)op, "nx_morph", x, opts, NULL, out);
}

nx_status nx_morph_vjp(nx_ctx *ctx, nx_morph_op op, const nx_tensor *x, const nx_tensor *dy,
                       const nx_morph_opts *opts, nx_tensor **dx)
{
    if ((unsigned)op >= NX_MORPH_OP_COUNT)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "nx_morph_vjp: op %d is not an nx_morph_op",
                           (int)op);
    if (!dy) /* a NULL cotangent has always meant the forward */
        return typed(ctx, (int)op, "nx_morph_vjp", x, opts, NULL, dx);
    return typed(ctx, (int)op, "nx_morph_vjp", x, opts, dy, dx);
}

nx_status nx_median_filter(nx_ctx *ctx, const nx_tensor *x, const nx_morph_opts *opts,
                           nx_tensor **out)
{
    return typed(ctx, NX_MORPH_OP_COUNT, "nx_median_filter", x, opts, NULL, out);
}

nx_status nx_dilate(nx_ctx *ctx, const nx_tensor *x, const nx_morph_opts *opts, nx_tensor **out)
{
    return typed(ctx, NX_MORPH_DILATE, "nx_dilate", x, opts, NULL, out);
}

nx_status nx_erode(nx_ctx *ctx, const nx_tensor *x, const nx_morph_opts *opts, nx_tensor **out)
{
    return typed(ctx, NX_MORPH_ERODE, "nx_erode", x, opts, NULL, out);
}

nx_status nx_open(nx_ctx *ctx, const nx_tensor *x, const nx_morph_opts *opts, nx_tensor **out)
{
    return typed(ctx, NX_MORPH_OPEN, "nx_open", x, opts, NULL, out);
}

nx_status nx_close(nx_ctx *ctx, const nx_tensor *x, const nx_morph_opts *opts, nx_tensor **out)
{
    return typed(ctx, NX_MORPH_CLOSE, "nx_close", x, opts, NULL, out);
}
