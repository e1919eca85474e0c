/* The op susan_emulator (include/nitrix-bilateral.h): the bilateral filter on a grid, with the
 * spatial cube as the neighbourhood (centre and outside places masked out), features
 * (coordinates, intensity) under a diagonal metric (sigma_space per axis, sigma_intensity), and
 * the cube's median where no neighbour is alike. Leading batch axes become more points: each
 * batch item's cube indices are offset into its own block, so one gather serves them all. The
 * program comes from nx_op_program; the typed entry points are short wrappers around the runner.
 */
#include <math.h>
#include <string.h>

#include "bilateral.h"
#include "ops/op.h"
#include "ops/semiring/semiring.h"

/* Below this weight sum no neighbour is alike: the voxel is isolated noise. */
#define SUSAN_EMPTY 1e-4

typedef struct susan_args {
    nx_backend backend;
    double sigma_space, sigma_intensity, bthresh;
    bool use_median;
    int64_t half;
    int64_t spatial_rank, nspatial;
} susan_args;

static const nx_op_opt opts[] = {
    {"sigma_space", NX_OPT_FLOAT, NULL, "0:", 1, "spatial sigma in voxels (> 0)"},
    {"sigma_intensity", NX_OPT_FLOAT, "0", "0:", 1,
     "intensity sigma (> 0 unless bthresh is given)"},
    {"use_median", NX_OPT_BOOL, "true", NULL, 1,
     "the cube's median where no neighbour is alike (else the voxel keeps its value)"},
    {"bthresh", NX_OPT_FLOAT, "0", "0:", 1,
     "FSL's brightness threshold bt (> 0: sigma_intensity = bt / sqrt(2); 0: none)"},
    {"half", NX_OPT_INT, "1", "1:16", 1, "cube half-width h"},
    {"spatial_rank", NX_OPT_INT, "0", "0:4", 1,
     "how many trailing axes are spatial (leading ones are batch); 0: all (ndim <= 4)"},
    {"nspatial", NX_OPT_INT, "0", "0:4", 1, "the older name of spatial_rank (kept one release)"},
};

#define F(m) offsetof(susan_args, m), NX_OP_NO_FIELD, sizeof(((susan_args *)0)->m)
static const nx_op_field fields[] = {
    {F(sigma_space)}, {F(sigma_intensity)}, {F(use_median)}, {F(bthresh)},
    {F(half)},        {F(spatial_rank)},    {F(nspatial)},
};
#undef F

typedef struct susan_call {
    const nx_tensor *image, *index, *mask; /* image: the float image the program runs on */
    int nsp;
    int64_t batch, n, half;
    double sigma_space, sigma_intensity;
    bool median;
} susan_call;

/* sum_j w_ij, built exactly as nx_bilateral_node builds it, so hash-consing makes it the filter's
 * own denominator rather than a second copy. */
static nx_node weight_sum(nx_graph *g, nx_node f, nx_node sigma, nx_node idx, nx_node mask)
{
    int64_t fs[NX_MAX_DIMS];
    nx_node_shape(g, f, fs);
    nx_dtype dt = nx_node_dtype(g, f);
    nx_node fi = nx_reshape(g, f, 3, (int64_t[]){fs[0], 1, fs[1]});
    nx_node delta = nx_sub(g, fi, nx_gather(g, f, idx, 0));
    nx_node q = nx_metric_sqdist_node(g, NX_METRIC_DIAGONAL, sigma, delta);
    nx_node w = nx_exp(g, nx_mul(g, q, nx_scalar(g, dt, -0.5)));
    w = nx_select(g, mask, w, nx_scalar(g, dt, 0));
    int axis = 1;
    return nx_reduce(g, w, 1, &axis, NX_MONOID_SUM, true);
}

/* Features [batch * n, nsp + 1]: the voxel's coordinates, then its intensity. */
static nx_node features_of(nx_graph *g, const susan_call *c, nx_node vals, nx_dtype dt)
{
    const int64_t *shape = nx_tensor_shape(c->image);
    const int64_t *sp = shape + nx_tensor_ndim(c->image) - c->nsp;
    int64_t total = c->batch * c->n;
    nx_node cols[NX_MORPH_MAX_SPATIAL + 1];
    for (int a = 0; a < c->nsp; a++) {
        nx_node x = nx_reshape(g, nx_iota(g, dt, c->nsp, sp, a), 3, (int64_t[]){1, c->n, 1});
        x = nx_broadcast(g, x, 3, (int64_t[]){c->batch, c->n, 1});
        cols[a] = nx_reshape(g, x, 2, (int64_t[]){total, 1});
    }
    cols[c->nsp] = vals;
    return nx_concat(g, c->nsp + 1, cols, 1);
}

/* image (a parameter for a vjp: nx_op_program differentiates it), index, mask. */
static nx_status build(nx_graph *g, const nx_op_args *oc, const void *user, int nout, nx_node *outs)
{
    (void)nout;
    const susan_call *c = user;
    nx_dtype dt = nx_tensor_dtype(c->image);
    int nd = nx_tensor_ndim(c->image);
    int64_t total = c->batch * c->n;
    nx_node x = (oc->dy ? nx_parameter : nx_input)(g, "image", dt, nd, nx_tensor_shape(c->image));
    nx_node idx = nx_input(g, "index", NX_DTYPE_I64, 2, nx_tensor_shape(c->index));
    nx_node mask = nx_input(g, "mask", NX_DTYPE_BOOL, 2, nx_tensor_shape(c->mask));
    nx_node vals = nx_reshape(g, x, 2, (int64_t[]){total, 1});
    double sig[NX_MORPH_MAX_SPATIAL + 1];
    for (int a = 0; a < c->nsp; a++)
        sig[a] = c->sigma_space;
    sig[c->nsp] = c->sigma_intensity;
    nx_node sigma = nx_cast(g, nx_constant(g, NX_DTYPE_F64, 1, (int64_t[]){c->nsp + 1}, sig), dt);
    nx_node f = features_of(g, c, vals, dt);
    nx_node y = nx_bilateral_node(g, vals, f, NX_METRIC_DIAGONAL, sigma, idx, mask, 1);
    nx_node fallback = vals;
    if (c->median) {
        nx_morph_opts mo = {.nspatial = c->nsp, .border = NX_MORPH_BORDER_NEAREST};
        for (int a = 0; a < c->nsp; a++)
            mo.size[a] = 2 * c->half + 1;
        fallback = nx_reshape(g, nx_median_node(g, x, &mo), 2, (int64_t[]){total, 1});
    }
    nx_node empty = nx_lt(g, weight_sum(g, f, sigma, idx, mask), nx_scalar(g, dt, SUSAN_EMPTY));
    y = nx_select(g, empty, fallback, y);
    outs[0] = nx_reshape(g, y, nd, nx_tensor_shape(c->image));
    return nx_graph_status(g);
}

/* The call's numbers from the options and the image's shape. */
static nx_status prepare(const nx_op_args *c, susan_call *s)
{
    const susan_args *o = c->opts;
    const nx_tensor *image = c->in[0];
    nx_dtype d = nx_tensor_dtype(image);
    if (nx_tensor_device(image) != NX_DEVICE_HOST || d == NX_DTYPE_F16 || d == NX_DTYPE_BF16)
        return nx_rt_error(c->ctx, NX_ERR_DTYPE,
                           "%s: image is a %s %s tensor; expected a host f32, f64, integer or "
                           "bool image",
                           c->who, nx_tensor_device(image) == NX_DEVICE_HOST ? "host" : "device",
                           nx_dtype_name(d));
    int nd = nx_tensor_ndim(image);
    int64_t rank = o->spatial_rank ? o->spatial_rank : o->nspatial;
    *s = (susan_call){.nsp = rank ? (int)rank : nd};
    if (rank < 0 || s->nsp < 1 || s->nsp > NX_MORPH_MAX_SPATIAL || s->nsp > nd)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: %d spatial axes of a %d-d image; expected 1..%d trailing axes",
                           c->who, s->nsp, nd, NX_MORPH_MAX_SPATIAL);
    if (!(isfinite(o->sigma_space) && o->sigma_space > 0))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: sigma_space is %g; expected finite and > 0", c->who,
                           o->sigma_space);
    s->sigma_intensity = o->bthresh > 0 ? o->bthresh / sqrt(2.0) : o->sigma_intensity;
    if (!(isfinite(o->bthresh) && o->bthresh >= 0) ||
        !(isfinite(s->sigma_intensity) && s->sigma_intensity > 0))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: sigma_intensity is %g and bthresh %g; expected a finite "
                           "sigma_intensity > 0 or bthresh > 0",
                           c->who, o->sigma_intensity, o->bthresh);
    if (o->half < 1 || o->half > 16)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: half is %lld; expected 1..16", c->who,
                           (long long)o->half);
    s->half = o->half;
    s->sigma_space = o->sigma_space;
    s->median = o->use_median;
    s->n = 1;
    for (int a = nd - s->nsp; a < nd; a++)
        s->n *= nx_tensor_shape(image)[a];
    s->batch = s->n ? nx_tensor_numel(image) / s->n : 0;
    return NX_OK;
}

static nx_status check(const nx_op_args *c)
{
    susan_call s;
    nx_status st = prepare(c, &s);
    if (st != NX_OK || !c->dy)
        return st;
    const nx_tensor *image = c->in[0], *dout = c->dy[0];
    st = nx_sr_check_float(c->ctx, c->who, "image", image);
    if (st == NX_OK)
        st = nx_sr_check_float(c->ctx, c->who, "dout", dout);
    if (st == NX_OK && (nx_tensor_dtype(dout) != nx_tensor_dtype(image) ||
                        nx_tensor_ndim(dout) != nx_tensor_ndim(image) ||
                        memcmp(nx_tensor_shape(dout), nx_tensor_shape(image),
                               (size_t)nx_tensor_ndim(image) * sizeof(int64_t))))
        st = nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: dout must have the image's dtype and shape",
                         c->who);
    return st;
}

/* The cube of one batch item, repeated with offsets b * n; the centre and outside places are
 * masked out. */
static nx_status neighbourhood(nx_ctx *ctx, const susan_call *c, nx_tensor **index,
                               nx_tensor **mask)
{
    const int64_t *sp = nx_tensor_shape(c->image) + nx_tensor_ndim(c->image) - c->nsp;
    nx_tensor *idx = NULL, *val = NULL;
    nx_status st = nx_spatial_cube_neighbourhood(ctx, c->nsp, sp, c->half, &idx, &val);
    int64_t slots = idx ? nx_tensor_shape(idx)[1] : 0, per = c->n * slots;
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_I64, 2, (int64_t[]){c->batch * c->n, slots}, index);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_BOOL, 2, (int64_t[]){c->batch * c->n, slots}, mask);
    for (int64_t b = 0; st == NX_OK && b < c->batch; b++) {
        const int64_t *si = nx_tensor_data(idx);
        const uint8_t *sv = nx_tensor_data(val);
        int64_t *di = (int64_t *)nx_tensor_data(*index) + b * per;
        uint8_t *dv = (uint8_t *)nx_tensor_data(*mask) + b * per;
        for (int64_t e = 0; e < per; e++) {
            di[e] = si[e] + b * c->n;
            dv[e] = sv[e] && e % slots != (slots - 1) / 2;
        }
    }
    nx_tensor_free(idx);
    nx_tensor_free(val);
    return st;
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    susan_call s;
    nx_status st = prepare(c, &s);
    if (st != NX_OK)
        return st;
    const nx_tensor *image = c->in[0];
    nx_tensor *img = NULL, *index = NULL, *mask = NULL;
    if (nx_dtype_is_float(nx_tensor_dtype(image)))
        st = nx_tensor_contiguous(image, &img);
    else
        st = nx_tensor_cast(image, NX_DTYPE_F32, &img);
    if (st != NX_OK)
        return st;
    s.image = img;
    if (nx_tensor_numel(img) == 0) {
        st = nx_tensor_new(c->ctx, nx_tensor_dtype(img), nx_tensor_ndim(img), nx_tensor_shape(img),
                           &outs[0]);
        nx_tensor_free(img);
        return st;
    }
    nx_program *p = NULL;
    st = neighbourhood(c->ctx, &s, &index, &mask);
    if (st == NX_OK) {
        s.index = index;
        s.mask = mask;
        st = nx_op_program(c, "filter", NULL, build, &s, 1, &p);
    }
    if (st == NX_OK) {
        const nx_tensor *ins[4] = {img, index, mask, c->dy ? c->dy[0] : NULL};
        st = nx_program_run(p, ins, outs);
    }
    nx_tensor_free(index);
    nx_tensor_free(mask);
    nx_tensor_free(img);
    return st;
}

/* Golden replay against the NumPy loop and scipy's median_filter (golden/bilateral/susan_*), as
 * the (retired) golden/tolerance.tsv had them. */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-12},
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-5},
};

const nx_op_desc nx_op_susan_emulator = {
    .info = {.nopts = sizeof opts / sizeof opts[0], .opts = opts},
    .opts_size = sizeof(susan_args),
    .fields = fields,
    .backend_offset = offsetof(susan_args, backend),
    .check = check,
    .run = run,
    .golden = "bilateral",
    .tols = tols,
    .ntols = sizeof tols / sizeof tols[0],
};

/* ---- the typed entry points -------------------------------------------------------------------*/

static nx_status args_from(nx_ctx *ctx, const char *who, const nx_susan_opts *o, susan_args *a)
{
    if (!o)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: opts is NULL; expected sigma_space and sigma_intensity (or "
                           "bthresh)",
                           who);
    *a = (susan_args){.backend = o->backend,
                      .sigma_space = o->sigma_space,
                      .sigma_intensity = o->sigma_intensity,
                      .bthresh = o->bthresh,
                      .use_median = !o->skip_median,
                      .half = o->half ? o->half : 1,
                      .nspatial = o->nspatial};
    return NX_OK;
}

nx_status nx_susan_emulator(nx_ctx *ctx, const nx_tensor *image, const nx_susan_opts *opts,
                            nx_tensor **out)
{
    static const char *who = "nx_susan_emulator";
    susan_args a = {0};
    if (ctx && out) {
        nx_status st = args_from(ctx, who, opts, &a);
        if (st != NX_OK) {
            *out = NULL;
            return st;
        }
    }
    return nx_op_run_as(ctx, &nx_op_susan_emulator, who, (const nx_tensor *const[]){image}, &a,
                        out);
}

nx_status nx_susan_emulator_vjp(nx_ctx *ctx, const nx_tensor *image, const nx_susan_opts *opts,
                                const nx_tensor *dout, nx_tensor **dimage)
{
    static const char *who = "nx_susan_emulator_vjp";
    if (dimage)
        *dimage = NULL;
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: ctx is NULL", who);
    susan_args a = {0};
    nx_status st = args_from(ctx, who, opts, &a);
    if (st != NX_OK)
        return st;
    return nx_op_run_vjp_as(ctx, &nx_op_susan_emulator, who, (const nx_tensor *const[]){image}, &a,
                            (const nx_tensor *const[]){dout}, dimage);
}
