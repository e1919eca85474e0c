/* Exact Euclidean distance transform (scipy.ndimage.distance_transform_edt), a divergent op with
 * two drivers (runtime/divergent.def, row "distance_transform_edt"):
 *
 *   separable     (canonical) one min-plus pass per axis against (s (q - p))^2, then a square root:
 *                 an IR graph (distance-node.c), differentiable, O(n^2) per line.
 *   felzenszwalb  (fast) the lower envelope of parabolas per line (Felzenszwalb & Huttenlocher
 *                 2012), O(n) per line, as one IR extern. Where a tile's
 *                 distances are short, a window minimum that stops as soon as no farther place
 *                 can win replaces the envelope (the same sums; see "small values").
 *                 On the cuda backend the same driver is a chain of per-axis extern passes
 *                 with CUDA C (nx_extern_device; "the device driver" below), so the whole
 *                 plan runs on the device: device masks are read in place and results stay there.
 *
 * Why an extern: the envelope is a sequential scan with a data-dependent stack (each parabola
 * pops the ones it hides, then a second sweep walks the envelope), which no IR primitive
 * expresses: scans take a fixed associative monoid, and the envelope's state is a variable-length
 * list. The extern has no adjoint: the fast driver is documented non-differentiable, and the
 * canonical driver stays the differentiable one (nx_distance_node-style graphs). Both compute the
 * same minimum over sources exactly in real arithmetic; they round differently (the envelope
 * works in f64 and compares intersections), hence the registry row's tolerance.
 *
 * This file is the op's descriptor and the typed entry point nx_distance_transform_edt; the host
 * kernel is edt-host.c, the device passes edt-device.c, the separable graph distance-node.c. */
#include <math.h>
#include <string.h>

#include "morph.h"
#include "nitrix-graph.h"
#include "nitrix-ops.h"

typedef struct edt_args {
    nx_backend backend;
    double sampling[NX_MAX_DIMS];
    int nsampling;
    int driver; /* auto | separable | felzenszwalb */
    const char *other_driver; /* a typed caller's name that is none of those: the registry's
                                 message refuses it (not an option) */
} edt_args;

static const char *const driver_names[] = {"auto", "separable", "felzenszwalb"};

static const nx_op_opt opts[] = {
    {"sampling", NX_OPT_FLOATS, "1", NULL, NX_MAX_DIMS,
     "grid spacing per axis, or one value for all (each finite and > 0)"},
    {"driver", NX_OPT_ENUM, "auto", "auto|separable|felzenszwalb", 1,
     "separable: canonical min-plus passes; felzenszwalb: per-line lower envelope; auto: the "
     "registry's choice"},
};
static const nx_op_field fields[] = {
    {offsetof(edt_args, sampling), offsetof(edt_args, nsampling), sizeof(double) * NX_MAX_DIMS},
    {offsetof(edt_args, driver), NX_OP_NO_FIELD, sizeof(int)},
};

/* The call resolved: sampling per axis and the driver the registry picks. */
typedef struct edt_call {
    double s[NX_MAX_DIMS];
    bool fast;
} edt_call;

static nx_status prepare(const nx_op_args *c, edt_call *e)
{
    const edt_args *a = c->opts;
    const nx_tensor *mask = c->in[0];
    nx_dtype md = nx_tensor_dtype(mask);
    if (md == NX_DTYPE_F16 || md == NX_DTYPE_BF16)
        return nx_rt_error(c->ctx, NX_ERR_DTYPE,
                           "%s: mask is %s; expected an f32, f64, integer or bool tensor", c->who,
                           nx_dtype_name(md));
    int nd = nx_tensor_ndim(mask);
    if (nd < 1 || nd + 1 > NX_MAX_DIMS)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: mask has %d dims; expected 1..%d", c->who,
                           nd, NX_MAX_DIMS - 1);
    /* zeroed (nsampling 0): all 1; one value: for every axis */
    if (a->nsampling > 1 && a->nsampling != nd)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: sampling has %d values; expected 1 or %d (one per axis)", c->who,
                           a->nsampling, nd);
    for (int i = 0; i < nd; i++) {
        e->s[i] = a->nsampling == 0 ? 1.0 : a->nsampling == 1 ? a->sampling[0] : a->sampling[i];
        if (!(e->s[i] > 0) || !isfinite(e->s[i]))
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: sampling[%d] is %g; expected a finite value > 0", c->who, i,
                               e->s[i]);
    }
    if ((unsigned)a->driver >= 3)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: driver %d is out of range", c->who,
                           a->driver);
    const char *variant = NULL;
    nx_status st = nx_driver_resolve(c->ctx, "distance_transform_edt",
                                     a->other_driver ? a->other_driver : driver_names[a->driver],
                                     &variant);
    if (st == NX_OK)
        e->fast = strcmp(variant, "felzenszwalb") == 0;
    return st;
}

static nx_status check(const nx_op_args *c)
{
    edt_call e;
    return prepare(c, &e);
}

/* The fast driver on the cuda backend is the device chain from the mask; elsewhere each driver
 * runs on the field (0 at sources, +inf elsewhere). */
static nx_status build(nx_graph *g, const nx_op_args *c, const void *user, int nout,
                       nx_node *outs)
{
    (void)nout;
    const edt_call *e = user;
    const nx_tensor *mask = c->in[0];
    int nd = nx_tensor_ndim(mask);
    nx_dtype md = nx_tensor_dtype(mask), dt = md == NX_DTYPE_F64 ? NX_DTYPE_F64 : NX_DTYPE_F32;
    nx_node m = nx_input(g, "mask", md, nd, nx_tensor_shape(mask));
    if (e->fast && c->backend == NX_BACKEND_CUDA) {
        outs[0] = nx_morph_edt_device_node(g, m, e->s);
        return nx_graph_status(g);
    }
    nx_node fg = md == NX_DTYPE_BOOL ? m : nx_ne(g, m, nx_scalar(g, md, 0));
    nx_node field = nx_select(g, fg, nx_scalar(g, dt, INFINITY), nx_scalar(g, dt, 0));
    field = nx_broadcast(g, field, nd, nx_tensor_shape(mask));
    outs[0] = e->fast ? nx_morph_edt_fast_node(g, field, e->s)
                      : nx_morph_edt_separable_node(g, field, e->s);
    return nx_graph_status(g);
}

static void key_stage(nx_rt_cache_blob *b, const void *user)
{
    const edt_call *e = user;
    nx_rt_cache_blob_i64(b, "fast", e->fast);
    nx_rt_cache_blob_bytes(b, "sampling", e->s, sizeof e->s);
}

/* An empty result, placed where the mask is. */
static nx_status empty_result(nx_ctx *ctx, const nx_tensor *mask, nx_tensor **out)
{
    nx_tensor *h = NULL;
    nx_status st = nx_tensor_new(ctx, nx_tensor_dtype(mask) == NX_DTYPE_F64 ? NX_DTYPE_F64
                                                                            : NX_DTYPE_F32,
                                 nx_tensor_ndim(mask), nx_tensor_shape(mask), &h);
    if (st != NX_OK || nx_tensor_device(mask) == NX_DEVICE_HOST) {
        *out = h;
        return st;
    }
    st = nx_tensor_to_device(h, nx_tensor_device(mask), out);
    nx_tensor_free(h);
    return st;
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    edt_call e = {0};
    nx_status st = prepare(c, &e);
    if (st != NX_OK)
        return st;
    const nx_tensor *mask = c->in[0];
    if (nx_tensor_numel(mask) == 0)
        return empty_result(c->ctx, mask, outs);
    nx_program *p = NULL;
    if ((st = nx_op_program(c, NULL, key_stage, build, &e, 1, &p)) != NX_OK)
        return st;
    return nx_program_run(p, (const nx_tensor *const[]){mask}, outs);
}

/* scipy to 1e-10 relative in f64 and 1e-4 in f32 (the header's promise, test-edt's bounds); the
 * fast driver against the canonical one by the registry row (runtime/divergent.def: rtol 2e-7). */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F64, NULL, NULL, 1e-10, 0},
    {NX_DTYPE_F32, NULL, NULL, 1e-4, 0},
    {NX_DTYPE_BOOL, NULL, NULL, 1e-4, 0},
    {NX_DTYPE_I32, NULL, NULL, 1e-4, 0},
    {NX_DTYPE_U8, NULL, NULL, 1e-4, 0},
};

const nx_op_desc nx_op_distance_transform_edt = {
    .info = {.nopts = 2, .opts = opts, .aliases = NULL},
    .opts_size = sizeof(edt_args),
    .fields = fields,
    .backend_offset = offsetof(edt_args, backend),
    .check = check,
    .run = run,
    .golden = "morphology",
    .tols = tols,
    .ntols = sizeof tols / sizeof tols[0],
};

nx_status nx_distance_transform_edt(nx_ctx *ctx, const nx_tensor *mask, const nx_edt_opts *opts,
                                    nx_tensor **out)
{
    static const char *who = "nx_distance_transform_edt";
    edt_args a = {0};
    if (opts && ctx && out && mask) {
        a.backend = opts->backend;
        int nd = nx_tensor_ndim(mask);
        if (opts->sampling && nd >= 1 && nd < NX_MAX_DIMS) {
            memcpy(a.sampling, opts->sampling, (size_t)nd * sizeof(double));
            a.nsampling = nd;
        }
        const char *d = opts->driver;
        int k = 0;
        while (k < 3 && !(d ? strcmp(d, driver_names[k]) == 0 : k == 0))
            k++;
        if (k == 3)
            a.other_driver = d;
        else
            a.driver = k;
    }
    return nx_op_run_as(ctx, &nx_op_distance_transform_edt, who, (const nx_tensor *const[]){mask},
                        &a, out);
}
