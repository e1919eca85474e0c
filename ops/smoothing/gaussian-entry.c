/* Tensor entry points of Gaussian smoothing: the driver is resolved once per call, then a program
 * is compiled once per key of everything that determines it (entry, resolved driver, options,
 * shapes, dtypes, backend) and kept in the context's cache. */
#include <string.h>

#include "cache.h"
#include "codegen/ptx/emit.h"
#include "gaussian.h"
#include "hints.h"
#include "nitrix-graph.h"

/* stage: the whole op in one program, the two programs of the padded FIR (see run_padded), or
 * the whole op in the FIR form of the CUDA backend (see device_fir). */
typedef enum gauss_stage { STAGE_WHOLE, STAGE_PAD, STAGE_FOLD, STAGE_DEVICE } gauss_stage;

typedef struct gauss_call {
    const nx_tensor *x, *dy;
    nx_gaussian_opts o; /* driver replaced by the resolved one */
    nx_gauss_plan plan; /* of the caller's x (STAGE_FOLD's x is the padded one) */
    bool want_dx, want_dsigma;
    gauss_stage stage;
    nx_backend be;          /* where the program runs */
    nx_backend_hints hints; /* that backend's */
} gauss_call;

static void key_opts(nx_rt_cache_blob *b, const gauss_call *c)
{
    const nx_gaussian_opts *o = &c->o;
    nx_rt_cache_blob_str(b, "op", c->dy ? "gaussian_filter_vjp" : "gaussian_filter");
    nx_rt_cache_blob_str(b, "driver", o->driver);
    int64_t geo[6] = {o->nspatial, o->nsigma, o->mode, c->want_dx, c->want_dsigma, c->stage};
    nx_rt_cache_blob_bytes(b, "geo", geo, sizeof geo);
    nx_rt_cache_blob_bytes(b, "sigma", o->sigma, sizeof o->sigma);
    nx_rt_cache_blob_bytes(b, "truncate", &o->truncate, sizeof o->truncate);
    nx_rt_cache_blob_bytes(b, "kernel_size", o->kernel_size, sizeof o->kernel_size);
    nx_rt_cache_blob_bytes(b, "cval", &o->cval, sizeof o->cval);
    nx_rt_cache_blob_tensor(b, "x", c->x);
    nx_rt_cache_blob_tensor(b, "dy", c->dy);
    nx_rt_cache_blob_i64(b, "backend", o->backend);
}

/* Forward: y from x. Vjp: outputs dx and/or dsigma from x, sigma (when wanted) and dy. */
static nx_status build(nx_graph *g, const gauss_call *c, nx_node *outs, int *nout)
{
    nx_dtype dt = nx_tensor_dtype(c->x);
    int nd = nx_tensor_ndim(c->x);
    const int64_t *shape = nx_tensor_shape(c->x);
    bool vjp = c->dy != NULL;
    nx_node x = vjp ? nx_parameter(g, "x", dt, nd, shape) : nx_input(g, "x", dt, nd, shape);
    nx_node xf = nx_dtype_is_float(dt) ? x : nx_cast(g, x, NX_DTYPE_F32);
    if (c->stage == STAGE_PAD) {
        outs[0] = nx_gauss_pad_all(g, xf, &c->plan);
        *nout = 1;
        return nx_graph_status(g);
    }
    if (c->stage == STAGE_FOLD) { /* the passes before the last are outputs: see fir_valid */
        outs[0] = nx_gauss_fir_valid(g, xf, &c->plan, outs + 1);
        *nout = c->plan.nsp;
        return nx_graph_status(g);
    }
    if (c->stage == STAGE_DEVICE) {
        outs[0] = nx_gauss_fir_device(g, xf, &c->plan);
        *nout = 1;
        return nx_graph_status(g);
    }
    int64_t ns = c->o.nsigma;
    nx_node sigma = c->want_dsigma ? nx_parameter(g, "sigma", dt, 1, &ns) : NX_NONE;
    nx_node y = nx_gaussian_node(g, xf, sigma, &c->o);
    *nout = 1;
    if (!vjp) {
        outs[0] = y;
        return nx_graph_status(g);
    }
    nx_node dy = nx_input(g, "dy", dt, nd, shape);
    if (nx_graph_status(g) != NX_OK)
        return nx_graph_status(g);
    nx_node wrt[2];
    int nw = 0;
    if (c->want_dx)
        wrt[nw++] = x;
    if (c->want_dsigma)
        wrt[nw++] = sigma;
    *nout = nw;
    return nx_graph_vjp(g, 1, &y, &dy, nw, wrt, outs);
}

static nx_status compile(nx_ctx *ctx, const void *user, nx_program **out)
{
    const gauss_call *c = user;
    nx_graph *g = NULL;
    nx_status st = nx_graph_new(ctx, &g);
    if (st != NX_OK)
        return st;
    nx_node y[NX_GAUSSIAN_MAX_SPATIAL] = {NX_NONE};
    int n = 0;
    st = build(g, c, y, &n);
    if (st == NX_OK) {
        nx_compile_opts co = {.backend = c->o.backend, .n_outputs = n, .outputs = y};
        st = nx_graph_compile(g, &co, out);
    }
    nx_graph_free(g);
    return st;
}

static nx_status program(nx_ctx *ctx, const gauss_call *c, nx_program **out)
{
    nx_rt_cache_blob b;
    nx_rt_cache_blob_init(&b, ctx);
    key_opts(&b, c);
    return nx_rt_program_cached(ctx, &b, "gaussian_filter: cache key", compile, c, out);
}

static nx_status check_x(nx_ctx *ctx, const char *who, const nx_tensor *x, const char *what,
                         bool float_only)
{
    if (!x)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %s is NULL", who, what);
    nx_dtype d = nx_tensor_dtype(x);
    if (float_only && d != NX_DTYPE_F32 && d != NX_DTYPE_F64)
        return nx_rt_error(ctx, NX_ERR_DTYPE, "%s: %s is %s; expected f32 or f64", who, what,
                           nx_dtype_name(d));
    if (d == NX_DTYPE_F16 || d == NX_DTYPE_BF16)
        return nx_rt_error(ctx, NX_ERR_DTYPE,
                           "%s: %s is %s; expected f32, f64, an integer or bool (cast first)", who,
                           what, nx_dtype_name(d));
    return NX_OK;
}

/* *t moved to x's device (a host x leaves it where it is). */
static nx_status on_device_of(const nx_tensor *x, nx_tensor **t)
{
    if (nx_tensor_device(x) == NX_DEVICE_HOST)
        return NX_OK;
    nx_tensor *d = NULL;
    nx_status st = nx_tensor_to_device(*t, nx_tensor_device(x), &d);
    nx_tensor_free(*t);
    *t = d;
    return st;
}

/* ---- auto: a cost model from the backend's hints ---------------------------------------------
 *
 * Outside reproducible mode (and without a sigma gradient, which only the FIR has) `auto` takes the
 * driver whose passes cost less where the program runs. Per spatial axis, in units of one FIR tap
 * as a shifted slice over the image: the FIR costs its taps (lo + hi + 1), times the backend's
 * fold tap cost where the pass is a window fold (more than NX_GAUSS_FIR_SLICE_TAPS taps); the
 * recursive driver costs the backend's constant number of taps per axis whatever sigma is (an axis
 * with sigma < 0.5 takes the FIR in it too). The numbers and their measurements are in
 * runtime/hints.c.
 *
 * In a caller's graph (nx_gaussian_node) the backend is not known yet and auto keeps the
 * registry's rule (recursive outside reproducible mode). */
static bool is_auto(const char *driver)
{
    return !driver || !*driver || strcmp(driver, "auto") == 0;
}

/* Whether the recursive driver costs less than the FIR for plan on a backend with hints h. */
static bool recursive_cheaper(const nx_gauss_plan *p, const nx_backend_hints *h)
{
    double fir = 0, rec = 0;
    for (int i = 0; i < p->nsp; i++) {
        int64_t taps = p->lo[i] + p->hi[i] + 1;
        double t = (double)taps;
        if (taps > NX_GAUSS_FIR_SLICE_TAPS)
            t *= h->fir_fold_tap_cost;
        fir += t;
        rec += p->sigma[i] < 0.5 ? t : h->recursive_axis_taps;
    }
    return rec < fir;
}

/* The backend the call's program will run on: opts, then the context, then a GPU if one answers
 * (the compile's own rule). A backend that cannot run here fails the compile later, with its
 * message; the choice is moot then. */
static nx_backend run_backend(nx_ctx *ctx, const nx_gaussian_opts *o)
{
    nx_backend b = NX_BACKEND_CPU;
    if (nx_ptx_resolve_backend(ctx, o->backend, &b) != NX_OK)
        b = o->backend != NX_BACKEND_AUTO ? o->backend : nx_ctx_backend(ctx);
    return b;
}

/* Checks the options against x, resolves the driver and fills c->o with the resolved name. */
static nx_status prepare(nx_ctx *ctx, const char *who, const nx_gaussian_opts *opts, gauss_call *c)
{
    nx_gauss_plan *plan = &c->plan;
    nx_status st =
        nx_gauss_plan_make(ctx, who, opts, nx_tensor_ndim(c->x), nx_tensor_shape(c->x), plan);
    bool recursive = false;
    if (st == NX_OK)
        st = nx_gauss_resolve(ctx, opts, c->want_dsigma, &recursive);
    if (st != NX_OK)
        return st;
    c->be = run_backend(ctx, opts);
    nx_backend_hints_get(ctx, c->be, &c->hints);
    if (recursive && is_auto(opts->driver))
        recursive = recursive_cheaper(plan, &c->hints);
    c->o = *opts;
    c->o.driver = recursive ? "recursive" : "fir";
    plan->recursive = recursive;
    return NX_OK;
}

/* Whether the forward FIR may run as run_padded does: every axis takes the FIR passes, and the
 * padded image's border regions filter to what a per-axis pad would give (a constant border
 * other than 0 would become cval * sum(w), an ulp away from cval). */
static bool padded_fir(const gauss_call *c)
{
    const nx_gauss_plan *p = &c->plan;
    return c->hints.fir_pad_first && !c->dy && !p->recursive &&
           (p->pad != NX_PAD_CONSTANT || p->cval == 0) && nx_tensor_device(c->x) == NX_DEVICE_HOST;
}

/* The same result as the whole program, in two: x padded on every spatial axis at once, then the
 * passes over VALID windows of it. One fused program inlines the border rule into every tap's
 * load, and along the contiguous axis that rule makes each load a gather on the CPU backend (an
 * i64 mod and a select per tap and lane); padded first, the passes' loads are affine and
 * vectorise. Padding commutes with filtering along another axis for every mode whose border is a
 * copy of image samples (and for a zero constant). Every pass is then a sum of shifted slices,
 * the passes before the last materialised as extra outputs of the second program (freed here).
 * Only where the backend's hints ask for it (fir_pad_first) and the pad program runs there:
 * elsewhere (*done false) the caller runs the whole program. */
static nx_status run_padded(nx_ctx *ctx, const gauss_call *c, nx_tensor **out, bool *done)
{
    gauss_call pad = *c, fold = *c;
    pad.stage = STAGE_PAD;
    fold.stage = STAGE_FOLD;
    nx_program *pp = NULL, *pf = NULL;
    nx_tensor *xp = NULL, *outs[NX_GAUSSIAN_MAX_SPATIAL] = {NULL};
    *done = false;
    nx_status st = program(ctx, &pad, &pp);
    if (st != NX_OK || nx_program_backend(pp) != c->be)
        return st;
    *done = true;
    st = nx_program_run(pp, (const nx_tensor *const[]){c->x}, &xp);
    if (st == NX_OK) {
        fold.x = xp;
        st = program(ctx, &fold, &pf);
    }
    if (st == NX_OK)
        st = nx_program_run(pf, (const nx_tensor *const[]){xp}, outs);
    nx_tensor_free(xp);
    for (int i = 1; i < NX_GAUSSIAN_MAX_SPATIAL; i++)
        nx_tensor_free(outs[i]);
    *out = outs[0];
    return st;
}

/* Whether the forward FIR runs as nx_gauss_fir_device (gaussian.c, every pass as slices): where
 * the backend's hints ask for it (fir_slices_every_axis), host or device tensors. */
static bool device_fir(const gauss_call *c)
{
    return c->hints.fir_slices_every_axis && !c->dy && nx_gauss_fir_device_fits(&c->plan);
}

/* An empty result of x's float dtype and shape, on x's device. */
static nx_status empty_like(nx_ctx *ctx, const nx_tensor *x, nx_tensor **out)
{
    nx_dtype d = nx_tensor_dtype(x);
    nx_status st = nx_tensor_new(ctx, nx_dtype_is_float(d) ? d : NX_DTYPE_F32, nx_tensor_ndim(x),
                                 nx_tensor_shape(x), out);
    return st == NX_OK ? on_device_of(x, out) : st;
}

/* Device tensors go in place to a program that runs whole on the CUDA backend (its outputs then
 * stay on the device); a program on any other backend reads host memory only. */
static nx_status check_device(nx_ctx *ctx, const char *who, const gauss_call *c, nx_program *p)
{
    bool dev = nx_tensor_device(c->x) != NX_DEVICE_HOST ||
               (c->dy && nx_tensor_device(c->dy) != NX_DEVICE_HOST);
    if (!dev || nx_program_backend(p) == NX_BACKEND_CUDA)
        return NX_OK;
    return nx_rt_error(ctx, NX_ERR_UNSUPPORTED,
                       "%s: %s is a device tensor but the program runs on the %s backend; "
                       "expected host tensors, or the cuda backend (opts.backend or "
                       "NITRIX_BACKEND)",
                       who, nx_tensor_device(c->x) != NX_DEVICE_HOST ? "x" : "dy",
                       nx_backend_name(nx_program_backend(p)));
}

nx_status nx_gaussian_filter(nx_ctx *ctx, const nx_tensor *x, const nx_gaussian_opts *opts,
                             nx_tensor **out)
{
    static const char *who = "nx_gaussian_filter";
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: ctx is NULL", who);
    if (!out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: out is NULL", who);
    *out = NULL;
    gauss_call c = {.x = x};
    nx_status st = check_x(ctx, who, x, "x", false);
    if (st == NX_OK)
        st = prepare(ctx, who, opts, &c);
    if (st != NX_OK)
        return st;
    if (nx_tensor_numel(x) == 0)
        return empty_like(ctx, x, out);
    bool done = false;
    if (device_fir(&c))
        c.stage = STAGE_DEVICE;
    else if (padded_fir(&c) && ((st = run_padded(ctx, &c, out, &done)) != NX_OK || done))
        return st;
    nx_program *p = NULL;
    if ((st = program(ctx, &c, &p)) != NX_OK || (st = check_device(ctx, who, &c, p)) != NX_OK)
        return st;
    return nx_program_run(p, (const nx_tensor *const[]){x}, out);
}

static nx_status check_dy(nx_ctx *ctx, const char *who, const nx_tensor *x, const nx_tensor *dy)
{
    nx_status st = check_x(ctx, who, dy, "dy", true);
    if (st != NX_OK)
        return st;
    int nd = nx_tensor_ndim(x);
    if (nx_tensor_dtype(dy) != nx_tensor_dtype(x) || nx_tensor_ndim(dy) != nd ||
        memcmp(nx_tensor_shape(dy), nx_tensor_shape(x), (size_t)nd * sizeof(int64_t)) != 0) {
        char a[128], b[128];
        return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: dy is %s%s; expected x's %s%s", who,
                           nx_dtype_name(nx_tensor_dtype(dy)),
                           nx_shape_str(a, sizeof a, nx_tensor_ndim(dy), nx_tensor_shape(dy)),
                           nx_dtype_name(nx_tensor_dtype(x)),
                           nx_shape_str(b, sizeof b, nd, nx_tensor_shape(x)));
    }
    return NX_OK;
}

/* Zero cotangents for an empty x (nothing flows through an empty image). */
static nx_status vjp_empty(nx_ctx *ctx, const gauss_call *c, nx_tensor **dx, nx_tensor **dsigma)
{
    nx_status st = NX_OK;
    if (dx)
        st = empty_like(ctx, c->x, dx);
    int64_t ns = c->o.nsigma;
    if (st == NX_OK && dsigma &&
        (st = nx_tensor_new(ctx, nx_tensor_dtype(c->x), 1, &ns, dsigma)) == NX_OK)
        st = on_device_of(c->x, dsigma);
    return st;
}

static nx_status vjp_run(nx_ctx *ctx, const gauss_call *c, nx_tensor **dx, nx_tensor **dsigma)
{
    nx_program *p = NULL;
    nx_status st = program(ctx, c, &p);
    if (st == NX_OK)
        st = check_device(ctx, "nx_gaussian_filter_vjp", c, p);
    nx_tensor *sig = NULL, *outs[2] = {NULL, NULL};
    int64_t ns = c->o.nsigma;
    if (st == NX_OK && c->want_dsigma &&
        (st = nx_tensor_new(ctx, NX_DTYPE_F64, 1, &ns, &sig)) == NX_OK) {
        memcpy(nx_tensor_data(sig), c->o.sigma, (size_t)ns * sizeof(double));
        nx_tensor *cast = NULL;
        st = nx_tensor_cast(sig, nx_tensor_dtype(c->x), &cast);
        nx_tensor_free(sig);
        sig = cast;
        if (st == NX_OK)
            st = on_device_of(c->x, &sig);
    }
    if (st == NX_OK) {
        const nx_tensor *ins[3] = {c->x, c->want_dsigma ? sig : c->dy, c->dy};
        st = nx_program_run(p, ins, outs);
    }
    nx_tensor_free(sig);
    if (st != NX_OK)
        return st;
    int k = 0;
    if (c->want_dx)
        *dx = outs[k++];
    if (c->want_dsigma)
        *dsigma = outs[k];
    return NX_OK;
}

nx_status nx_gaussian_filter_vjp(nx_ctx *ctx, const nx_tensor *x, const nx_tensor *dy,
                                 const nx_gaussian_opts *opts, nx_tensor **dx, nx_tensor **dsigma)
{
    static const char *who = "nx_gaussian_filter_vjp";
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: ctx is NULL", who);
    if (dx)
        *dx = NULL;
    if (dsigma)
        *dsigma = NULL;
    if (!dx && !dsigma)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: dx and dsigma are both NULL", who);
    gauss_call c = {.x = x, .dy = dy, .want_dx = dx != NULL, .want_dsigma = dsigma != NULL};
    nx_status st = check_x(ctx, who, x, "x", true);
    if (st == NX_OK)
        st = check_dy(ctx, who, x, dy);
    if (st == NX_OK)
        st = prepare(ctx, who, opts, &c);
    if (st != NX_OK)
        return st;
    if (nx_tensor_numel(x) == 0)
        st = vjp_empty(ctx, &c, dx, dsigma);
    else
        st = vjp_run(ctx, &c, dx, dsigma);
    if (st != NX_OK && dx) {
        nx_tensor_free(*dx);
        *dx = NULL;
    }
    return st;
}
