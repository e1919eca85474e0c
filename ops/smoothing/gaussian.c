/* The op `gaussian` (scipy.ndimage.gaussian_filter; the older name gaussian_filter stays an alias):
 * its descriptor and the typed entry points nx_gaussian_filter / nx_gaussian_filter_vjp, which are
 * short wrappers around nx_op_run. The fragments are in gaussian-fir.c and gaussian-recursive.c.
 *
 * The driver is resolved once per call (the op's one driver site, nx_gauss_resolve, through the
 * registry row "gaussian_filter"): `auto` is the canonical fir for every sigma, since the recursive
 * driver's contract (atol 0.07 for data in [0, 1]) is far beyond what an automatic choice may trade
 * (NX_DIVERGENT_AUTO_TOL); recursive runs only when asked for by name. The graph form is chosen
 * from the hints the backend reports (nx_program_backend_hints, program/program.h): one whole
 * program, or the padded FIR in two programs (fir_pad_first), or every pass as slices
 * (fir_slices_every_axis). Every program comes from nx_op_program, keyed by the runner (options,
 * inputs, backend, reproducible mode, stage) plus what the typed vjp asks for. */
#include <string.h>
#include <strings.h>

#include "gaussian.h"
#include "nitrix-graph.h"
#include "ops/op.h"
#include "program/program.h"

/* ---- options ------------------------------------------------------------------------------*/

/* mode's names: nx_border's order (so an index below NX_BORDER_COUNT is that border), then the
 * spec's "edge" (= nearest). Not NX_OPT_BORDER: that type also takes scipy's synonyms
 * (periodic, grid-wrap, ...), which this op's command line has always refused. */
#define MODE_NAMES "reflect|constant|nearest|mirror|wrap|edge"
#define MODE_EDGE NX_BORDER_COUNT

static const nx_op_opt opts[] = {
    {"sigma", NX_OPT_FLOATS, NULL, NULL, NX_GAUSSIAN_MAX_SPATIAL,
     "per spatial axis, or one value for all (each finite and > 0)"},
    {"truncate", NX_OPT_FLOAT, "4", "0:", 1,
     "window radius int(truncate * sigma + 0.5), as scipy (0: 4)"},
    {"kernel_size", NX_OPT_INTS, "0", "0:", NX_GAUSSIAN_MAX_SPATIAL,
     "explicit taps per spatial axis or one for all (0: from truncate; even: half-sample shift)"},
    {"mode", NX_OPT_ENUM, "reflect", MODE_NAMES, 1, "border rule (scipy's mode; edge = nearest)"},
    {"cval", NX_OPT_FLOAT, "0", NULL, 1, "value outside for mode=constant"},
    {"driver", NX_OPT_ENUM, "auto", "auto|fir|recursive", 1,
     "fir: equal to scipy; recursive: Young-van Vliet, O(N), within 0.07 x the data's range of "
     "fir; auto: fir (auto picks a faster variant only within 1e-3 x the data's range)"},
    {"spatial_rank", NX_OPT_INT, "0", "0:4", 1,
     "how many trailing axes are spatial (leading ones are batch); 0: all (ndim <= 4)"},
    {"nspatial", NX_OPT_INT, "0", "0:4", 1, "the older name of spatial_rank (kept one release)"},
};

#define F(m) offsetof(nx_gauss_args, m), NX_OP_NO_FIELD, sizeof(((nx_gauss_args *)0)->m)
#define FN(m, n) offsetof(nx_gauss_args, m), offsetof(nx_gauss_args, n), \
                 sizeof(((nx_gauss_args *)0)->m)
static const nx_op_field fields[] = {
    {FN(sigma, nsigma)}, {F(truncate)}, {FN(kernel_size, nkernel)}, {F(mode)},
    {F(cval)},           {F(driver)},   {F(spatial_rank)},          {F(nspatial)},
};
#undef F
#undef FN

static const char *const driver_names[] = {"auto", "fir", "recursive"};

/* The public options of an args struct (the form the fragments take). */
static nx_status to_opts(nx_ctx *ctx, const char *who, const nx_gauss_args *a, int nd,
                         nx_gaussian_opts *o)
{
    static const nx_gaussian_mode mode_of[NX_BORDER_COUNT + 1] = {
        [NX_BORDER_REFLECT] = NX_GAUSSIAN_REFLECT, [NX_BORDER_CONSTANT] = NX_GAUSSIAN_CONSTANT,
        [NX_BORDER_NEAREST] = NX_GAUSSIAN_NEAREST, [NX_BORDER_MIRROR] = NX_GAUSSIAN_MIRROR,
        [NX_BORDER_WRAP] = NX_GAUSSIAN_WRAP,       [MODE_EDGE] = NX_GAUSSIAN_NEAREST,
    };
    int64_t nsp = a->spatial_rank ? a->spatial_rank : a->nspatial;
    *o = (nx_gaussian_opts){.backend = a->backend,
                            .nspatial = nsp >= 0 && nsp <= NX_GAUSSIAN_MAX_SPATIAL ? (int)nsp : -1,
                            .nsigma = a->nsigma,
                            .truncate = a->truncate,
                            .cval = a->cval};
    if ((unsigned)a->mode > MODE_EDGE || (unsigned)a->driver >= 3)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: mode %d or driver %d is out of range",
                           who, a->mode, a->driver);
    o->mode = mode_of[a->mode];
    o->driver = driver_names[a->driver];
    memcpy(o->sigma, a->sigma, sizeof o->sigma);
    memcpy(o->kernel_size, a->kernel_size, sizeof o->kernel_size);
    int want = o->nspatial > 0 ? o->nspatial : nd;
    if (a->nkernel > 1 && a->nkernel != want)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: kernel_size has %d values; expected 1 or %d (one per spatial axis)",
                           who, a->nkernel, want);
    return NX_OK;
}

/* ---- one call -----------------------------------------------------------------------------*/

/* stage: the whole op in one program, the two programs of the padded FIR (see run_padded), or
 * the whole op with every pass as slices (see slices_fir). */
typedef enum gauss_stage { STAGE_WHOLE, STAGE_PAD, STAGE_FOLD, STAGE_SLICES } gauss_stage;

static const char *const stage_names[] = {"whole", "pad", "fold", "slices"};

typedef struct gauss_call {
    const nx_op_args *c;
    const nx_tensor *x, *dy;
    nx_gaussian_opts o; /* driver replaced by the resolved one */
    nx_gauss_plan plan; /* of the caller's x (STAGE_FOLD's x is the padded one) */
    bool want_dx, want_dsigma;
    gauss_stage stage;
    const nx_tensor *xp; /* STAGE_FOLD: the padded x */
    nx_backend_hints hints;
} gauss_call;

static const nx_gauss_args *args_of(const nx_op_args *c)
{
    return c->opts;
}

/* Forward: y from x, or the stage's part of it. Vjp: the same forward, with x (when dx is wanted)
 * and sigma (when dsigma is) declared as parameters: nx_op_program differentiates it. */
static nx_status build(nx_graph *g, const nx_op_args *oc, const void *user, int nout,
                       nx_node *outs)
{
    (void)oc;
    (void)nout;
    const gauss_call *c = user;
    const nx_tensor *xt = c->stage == STAGE_FOLD ? c->xp : c->x;
    nx_dtype dt = nx_tensor_dtype(xt);
    int nd = nx_tensor_ndim(xt);
    const int64_t *shape = nx_tensor_shape(xt);
    nx_node x = c->want_dx ? nx_parameter(g, "x", dt, nd, shape) : nx_input(g, "x", dt, nd, shape);
    nx_node xf = nx_dtype_is_float(dt) ? x : nx_cast(g, x, NX_DTYPE_F32);
    switch (c->stage) {
    case STAGE_PAD:
        outs[0] = nx_gauss_pad_all(g, xf, &c->plan);
        return nx_graph_status(g);
    case STAGE_FOLD: /* the passes before the last are outputs: see fir_valid */
        outs[0] = nx_gauss_fir_valid(g, xf, &c->plan, outs + 1);
        return nx_graph_status(g);
    case STAGE_SLICES:
        outs[0] = nx_gauss_fir_device(g, xf, &c->plan);
        return nx_graph_status(g);
    case STAGE_WHOLE:
        break;
    }
    int64_t ns = c->o.nsigma;
    nx_node sigma = c->want_dsigma ? nx_parameter(g, "sigma", dt, 1, &ns) : NX_NONE;
    outs[0] = nx_gaussian_node(g, xf, sigma, &c->o);
    return nx_graph_status(g);
}

static void key_stage(nx_rt_cache_blob *b, const void *user)
{
    const gauss_call *c = user;
    nx_rt_cache_blob_i64(b, "want", (int64_t)c->want_dx | (int64_t)c->want_dsigma << 1);
    nx_rt_cache_blob_str(b, "driver", c->o.driver);
}

static nx_status program(const gauss_call *c, int nout, nx_program **out)
{
    return nx_op_program(c->c, stage_names[c->stage], key_stage, build, c, nout, out);
}

static nx_status check_x(nx_ctx *ctx, const char *who, const nx_tensor *x, const char *what,
                         bool float_only)
{
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

static bool is_auto(const char *driver)
{
    return !driver || !*driver || strcmp(driver, "auto") == 0;
}

/* Checks the call and resolves the driver: g->o gets the resolved name. g->hints are those of
 * the backend the call is placed on (before placement, check sees auto: the driver it resolves
 * there is only checked, never used). */
static nx_status prepare(const nx_op_args *c, gauss_call *g)
{
    const nx_gauss_args *a = args_of(c);
    *g = (gauss_call){.c = c, .x = c->in[0], .dy = c->dy ? c->dy[0] : NULL};
    g->want_dx = !c->dy || !a->skip_dx;
    g->want_dsigma = c->dy && a->dsigma;
    nx_status st = check_x(c->ctx, c->who, g->x, "x", c->dy != NULL);
    if (st == NX_OK && c->dy)
        st = check_dy(c->ctx, c->who, g->x, g->dy);
    nx_gaussian_opts o;
    if (st == NX_OK)
        st = to_opts(c->ctx, c->who, a, nx_tensor_ndim(g->x), &o);
    if (st == NX_OK)
        st = nx_gauss_plan_make(c->ctx, c->who, &o, nx_tensor_ndim(g->x), nx_tensor_shape(g->x),
                                &g->plan);
    bool recursive = false;
    if (st == NX_OK)
        st = nx_gauss_resolve(c->ctx, &o, g->want_dsigma, &recursive);
    if (st != NX_OK)
        return st;
    nx_program_backend_hints(c->backend, &g->hints);
    g->o = o;
    g->o.driver = recursive ? "recursive" : "fir";
    g->plan.recursive = recursive;
    return NX_OK;
}

static nx_status check(const nx_op_args *c)
{
    gauss_call g;
    return prepare(c, &g);
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

/* An empty result of x's float dtype and shape, on x's device. */
static nx_status empty_like(nx_ctx *ctx, const nx_tensor *x, nx_tensor **out)
{
    nx_dtype d = nx_tensor_dtype(x);
    nx_status st = nx_tensor_new(ctx, nx_dtype_is_float(d) ? d : NX_DTYPE_F32, nx_tensor_ndim(x),
                                 nx_tensor_shape(x), out);
    return st == NX_OK ? on_device_of(x, out) : st;
}

/* ---- the forward ----------------------------------------------------------------------------*/

/* Whether the forward FIR may run as run_padded does: the backend asks for it (fir_pad_first),
 * every axis takes the FIR passes, and the padded image's border regions filter to what a
 * per-axis pad would give (a constant border other than 0 would become cval * sum(w), an ulp away
 * from cval). */
static bool padded_fir(const gauss_call *g)
{
    const nx_gauss_plan *p = &g->plan;
    return g->hints.fir_pad_first && !p->recursive &&
           (p->pad != NX_PAD_CONSTANT || p->cval == 0) && nx_tensor_device(g->x) == NX_DEVICE_HOST;
}

/* The same result as the whole program, in two: x padded on every spatial axis at once, then the
 * passes over VALID windows of it. One fused program inlines the border rule into every tap's
 * load; padded first, the passes' loads are affine (the CPU backend's hints say where that pays).
 * Padding commutes with filtering along another axis for every mode whose border is a copy of
 * image samples (and for a zero constant). Every pass is then a sum of shifted slices, the passes
 * before the last materialised as extra outputs of the second program (freed here). Only where the
 * pad program runs on the backend the call was placed on: elsewhere (*done false) the caller runs
 * the whole program. */
static nx_status run_padded(const gauss_call *g, nx_tensor **out, bool *done)
{
    gauss_call pad = *g, fold = *g;
    pad.stage = STAGE_PAD;
    fold.stage = STAGE_FOLD;
    nx_program *pp = NULL, *pf = NULL;
    nx_tensor *xp = NULL, *outs[NX_GAUSSIAN_MAX_SPATIAL] = {NULL};
    *done = false;
    nx_status st = program(&pad, 1, &pp);
    if (st != NX_OK || nx_program_backend(pp) != g->c->backend)
        return st;
    *done = true;
    st = nx_program_run(pp, (const nx_tensor *const[]){g->x}, &xp);
    if (st == NX_OK) {
        fold.xp = xp;
        st = program(&fold, g->plan.nsp, &pf);
    }
    if (st == NX_OK)
        st = nx_program_run(pf, (const nx_tensor *const[]){xp}, outs);
    nx_tensor_free(xp);
    for (int i = 1; i < NX_GAUSSIAN_MAX_SPATIAL; i++)
        nx_tensor_free(outs[i]);
    *out = outs[0];
    return st;
}

/* Whether the forward FIR runs as nx_gauss_fir_device (every pass as slices): where the backend's
 * hints ask for it (fir_slices_every_axis), host or device tensors. */
static bool slices_fir(const gauss_call *g)
{
    return g->hints.fir_slices_every_axis && nx_gauss_fir_device_fits(&g->plan);
}

static nx_status forward(gauss_call *g, nx_tensor **out)
{
    if (nx_tensor_numel(g->x) == 0)
        return empty_like(g->c->ctx, g->x, out);
    bool done = false;
    nx_status st = NX_OK;
    if (slices_fir(g))
        g->stage = STAGE_SLICES;
    else if (padded_fir(g) && ((st = run_padded(g, out, &done)) != NX_OK || done))
        return st;
    nx_program *p = NULL;
    if ((st = program(g, 1, &p)) != NX_OK)
        return st;
    return nx_program_run(p, (const nx_tensor *const[]){g->x}, out);
}

/* ---- the vjp --------------------------------------------------------------------------------*/

/* Zero cotangents for an empty x (nothing flows through an empty image). */
static nx_status vjp_empty(const gauss_call *g, nx_tensor **dx, nx_tensor **dsigma)
{
    nx_ctx *ctx = g->c->ctx;
    nx_status st = NX_OK;
    if (g->want_dx)
        st = empty_like(ctx, g->x, dx);
    int64_t ns = g->o.nsigma;
    if (st == NX_OK && g->want_dsigma &&
        (st = nx_tensor_new(ctx, nx_tensor_dtype(g->x), 1, &ns, dsigma)) == NX_OK)
        st = on_device_of(g->x, dsigma);
    return st;
}

/* The gradients of the whole program's parameters, in declared order: dx, then dsigma. */
static nx_status vjp(const gauss_call *g, nx_tensor **dx, nx_tensor **dsigma)
{
    if (nx_tensor_numel(g->x) == 0)
        return vjp_empty(g, dx, dsigma);
    nx_program *p = NULL;
    nx_status st = program(g, 1, &p);
    nx_tensor *sig = NULL, *outs[2] = {NULL, NULL};
    int64_t ns = g->o.nsigma;
    if (st == NX_OK && g->want_dsigma &&
        (st = nx_tensor_new(g->c->ctx, NX_DTYPE_F64, 1, &ns, &sig)) == NX_OK) {
        memcpy(nx_tensor_data(sig), g->o.sigma, (size_t)ns * sizeof(double));
        nx_tensor *cast = NULL;
        st = nx_tensor_cast(sig, nx_tensor_dtype(g->x), &cast);
        nx_tensor_free(sig);
        sig = cast;
        if (st == NX_OK)
            st = on_device_of(g->x, &sig);
    }
    if (st == NX_OK) {
        const nx_tensor *ins[3] = {g->x, g->want_dsigma ? sig : g->dy, g->dy};
        st = nx_program_run(p, ins, outs);
    }
    nx_tensor_free(sig);
    if (st != NX_OK)
        return st;
    int k = 0;
    if (g->want_dx)
        *dx = outs[k++];
    if (g->want_dsigma)
        *dsigma = outs[k];
    return NX_OK;
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    gauss_call g;
    nx_status st = prepare(c, &g);
    if (st != NX_OK)
        return st;
    if (!c->dy)
        return forward(&g, outs);
    nx_tensor *dsigma = NULL;
    st = vjp(&g, &outs[0], &dsigma);
    if (st == NX_OK && g.want_dsigma)
        *args_of(c)->dsigma = dsigma;
    else
        nx_tensor_free(dsigma);
    return st;
}

static void key(nx_rt_cache_blob *b, const nx_op_args *c)
{
    const nx_gauss_args *a = args_of(c);
    nx_rt_cache_blob_i64(b, "vjp_wants", (int64_t)a->skip_dx | (int64_t)(a->dsigma != NULL) << 1);
}

static const char *const aliases[] = {"gaussian_filter", NULL};

/* Golden replay against scipy (the (retired) golden/tolerance.tsv's gaussian_filter rows, test-gaussian.c);
 * the recursive driver against scipy's FIR by the registry row's contract (runtime/divergent.def,
 * "gaussian_filter": atol 0.07 for data in [0, 1]). */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-12},
    {NX_DTYPE_F32, NULL, NULL, 1e-6, 0},
    {NX_DTYPE_F64, NULL, "recursive", 0, 0.07},
    {NX_DTYPE_F32, NULL, "recursive", 0, 0.07},
};

const nx_op_desc nx_op_gaussian = {
    .info = {.nopts = sizeof opts / sizeof opts[0], .opts = opts, .aliases = aliases},
    .opts_size = sizeof(nx_gauss_args),
    .fields = fields,
    .backend_offset = offsetof(nx_gauss_args, backend),
    .check = check,
    .key = key,
    .run = run,
    .golden = "smoothing",
    .tols = tols,
    .ntols = sizeof tols / sizeof tols[0],
};

/* ---- the typed entry points ---------------------------------------------------------------*/

/* The args of public options: the driver by name (an unknown one gets the registry's message
 * from the op's driver site), the mode by name. */
static nx_status args_from(nx_ctx *ctx, const char *who, const nx_gaussian_opts *o,
                           nx_gauss_args *a)
{
    static const nx_border border_of[NX_GAUSSIAN_MODE_COUNT] = {
        [NX_GAUSSIAN_REFLECT] = NX_BORDER_REFLECT, [NX_GAUSSIAN_CONSTANT] = NX_BORDER_CONSTANT,
        [NX_GAUSSIAN_NEAREST] = NX_BORDER_NEAREST, [NX_GAUSSIAN_MIRROR] = NX_BORDER_MIRROR,
        [NX_GAUSSIAN_WRAP] = NX_BORDER_WRAP,
    };
    *a = (nx_gauss_args){0};
    if (!o)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: opts is NULL; expected options with at least sigma", who);
    if ((unsigned)o->mode >= NX_GAUSSIAN_MODE_COUNT)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: mode %d is not an nx_gaussian_mode", who,
                           (int)o->mode);
    int d = 0;
    while (d < 3 && !(is_auto(o->driver) ? d == 0 : strcmp(o->driver, driver_names[d]) == 0))
        d++;
    if (d == 3) {
        bool recursive = false; /* fails: the registry names the drivers it knows */
        nx_status st = nx_gauss_resolve(ctx, o, false, &recursive);
        return st != NX_OK ? st
                           : nx_rt_error(ctx, NX_ERR_INTERNAL, "%s: driver '%s'", who, o->driver);
    }
    a->backend = o->backend;
    memcpy(a->sigma, o->sigma, sizeof a->sigma);
    a->nsigma = o->nsigma;
    a->truncate = o->truncate;
    memcpy(a->kernel_size, o->kernel_size, sizeof a->kernel_size);
    a->mode = (int)border_of[o->mode];
    a->cval = o->cval;
    a->driver = d;
    a->nspatial = o->nspatial;
    if (o->nspatial < 0 || o->nspatial > NX_GAUSSIAN_MAX_SPATIAL)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: nspatial is %d; expected 0..%d", who,
                           o->nspatial, NX_GAUSSIAN_MAX_SPATIAL);
    return NX_OK;
}

nx_status nx_gaussian_filter(nx_ctx *ctx, const nx_tensor *x, const nx_gaussian_opts *opts,
                             nx_tensor **out)
{
    static const char *who = "nx_gaussian_filter";
    nx_gauss_args a = {0};
    if (ctx && out && x) {
        nx_status st = args_from(ctx, who, opts, &a);
        if (st != NX_OK) {
            *out = NULL;
            return st;
        }
    }
    return nx_op_run_as(ctx, &nx_op_gaussian, who, (const nx_tensor *const[]){x}, &a, out);
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
    nx_gauss_args a = {0};
    if (x && dy) {
        nx_status st = args_from(ctx, who, opts, &a);
        if (st != NX_OK)
            return st;
    }
    a.skip_dx = !dx;
    a.dsigma = dsigma;
    nx_tensor *g = NULL;
    nx_status st = nx_op_run_vjp_as(ctx, &nx_op_gaussian, who, (const nx_tensor *const[]){x}, &a,
                                    (const nx_tensor *const[]){dy}, &g);
    if (dx)
        *dx = g;
    else
        nx_tensor_free(g);
    return st;
}
