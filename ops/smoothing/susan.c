/* SUSAN emulation: the bilateral filter on a grid, with the spatial cube as the neighbourhood
 * (centre and outside places masked out), features (coordinates, intensity) under a diagonal
 * metric (sigma_space per axis, sigma_intensity), and the cube's median where no neighbour is
 * alike. Leading batch axes become more points: each batch item's cube indices are offset into
 * its own block, so one gather serves them all. */
#include <math.h>
#include <string.h>

#include "cache.h"
#include "nitrix-ops.h"
#include "ops/semiring/semiring.h"

#define WHO "nx_susan_emulator"
/* Below this weight sum no neighbour is alike: the voxel is isolated noise. */
#define SUSAN_EMPTY 1e-4

typedef struct susan_call {
    const nx_tensor *image, *index, *mask;
    const nx_tensor *dout; /* vjp: the result's cotangent; NULL for the forward program */
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

static nx_status build_susan(nx_graph *g, void *user, nx_node *outs, int *nouts)
{
    const susan_call *c = user;
    nx_dtype dt = nx_tensor_dtype(c->image);
    int nd = nx_tensor_ndim(c->image);
    int64_t total = c->batch * c->n;
    nx_node x = (c->dout ? nx_parameter : nx_input)(g, "image", dt, nd, nx_tensor_shape(c->image));
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
    y = nx_reshape(g, y, nd, nx_tensor_shape(c->image));
    *nouts = 1;
    if (!c->dout) {
        outs[0] = y;
        return nx_graph_status(g);
    }
    nx_node dy = nx_input(g, "dout", dt, nd, nx_tensor_shape(c->dout));
    if (nx_graph_status(g) != NX_OK)
        return nx_graph_status(g);
    return nx_graph_vjp(g, 1, &y, &dy, 1, &x, outs);
}

static nx_status check_opts(nx_ctx *ctx, const nx_tensor *image, const nx_susan_opts *o,
                            susan_call *c)
{
    if (!o)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           WHO ": opts is NULL; expected sigma_space "
                               "and sigma_intensity (or bthresh)");
    int nd = nx_tensor_ndim(image);
    c->nsp = o->nspatial ? o->nspatial : nd;
    if (c->nsp < 1 || c->nsp > NX_MORPH_MAX_SPATIAL || c->nsp > nd)
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           WHO ": %d spatial axes of a %d-d image; expected "
                               "1..%d trailing axes",
                           c->nsp, nd, NX_MORPH_MAX_SPATIAL);
    if (!(isfinite(o->sigma_space) && o->sigma_space > 0))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           WHO ": sigma_space is %g; expected finite "
                               "and > 0",
                           o->sigma_space);
    c->sigma_intensity = o->bthresh > 0 ? o->bthresh / sqrt(2.0) : o->sigma_intensity;
    if (!(isfinite(o->bthresh) && o->bthresh >= 0) ||
        !(isfinite(c->sigma_intensity) && c->sigma_intensity > 0))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           WHO ": sigma_intensity is %g and bthresh "
                               "%g; expected a finite sigma_intensity > 0 or bthresh > 0",
                           o->sigma_intensity, o->bthresh);
    c->half = o->half ? o->half : 1;
    if (c->half < 1 || c->half > 16)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, WHO ": half is %lld; expected 1..16 (0: 1)",
                           (long long)o->half);
    c->sigma_space = o->sigma_space;
    c->median = !o->skip_median;
    c->n = 1;
    for (int a = nd - c->nsp; a < nd; a++)
        c->n *= nx_tensor_shape(image)[a];
    c->batch = c->n ? nx_tensor_numel(image) / c->n : 0;
    return NX_OK;
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

static nx_status run_susan(nx_ctx *ctx, susan_call *c, nx_backend be, nx_tensor **out)
{
    nx_tensor *index = NULL, *mask = NULL;
    nx_status st = neighbourhood(ctx, c, &index, &mask);
    nx_program *p = NULL;
    if (st == NX_OK) {
        c->index = index;
        c->mask = mask;
        nx_rt_cache_blob key;
        nx_rt_cache_blob_init(&key, ctx);
        nx_rt_cache_blob_str(&key, "op", c->dout ? "susan_emulator_vjp" : "susan_emulator");
        double params[2] = {c->sigma_space, c->sigma_intensity};
        nx_rt_cache_blob_bytes(&key, "sigmas", params, sizeof params);
        nx_rt_cache_blob_i64(&key, "nspatial", c->nsp);
        nx_rt_cache_blob_i64(&key, "half", c->half);
        nx_rt_cache_blob_i64(&key, "median", c->median);
        nx_rt_cache_blob_tensor(&key, "image", c->image);
        st = nx_sr_program(ctx, &key, be, build_susan, c, &p);
        nx_rt_cache_blob_free(&key);
    }
    if (st == NX_OK)
        st = nx_program_run(p, (const nx_tensor *const[]){c->image, index, mask, c->dout}, out);
    nx_tensor_free(index);
    nx_tensor_free(mask);
    return st;
}

/* Checks, converts integer images to f32, and runs the forward program or (with dout) its vjp. */
static nx_status susan(nx_ctx *ctx, const char *who, const nx_tensor *image,
                       const nx_susan_opts *opts, const nx_tensor *dout, nx_tensor **out)
{
    if (!ctx || !out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: ctx and out must not be NULL", who);
    *out = NULL;
    if (!image)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: image is NULL", who);
    nx_dtype d = nx_tensor_dtype(image);
    if (nx_tensor_device(image) != NX_DEVICE_HOST || d == NX_DTYPE_F16 || d == NX_DTYPE_BF16)
        return nx_rt_error(ctx, NX_ERR_DTYPE,
                           "%s: image is a %s %s tensor; expected a host f32, f64, integer or "
                           "bool image",
                           who, nx_tensor_device(image) == NX_DEVICE_HOST ? "host" : "device",
                           nx_dtype_name(d));
    susan_call c = {.dout = dout};
    nx_status st = check_opts(ctx, image, opts, &c);
    if (st != NX_OK)
        return st;
    nx_tensor *img = NULL;
    if (nx_dtype_is_float(d))
        st = nx_tensor_contiguous(image, &img);
    else
        st = nx_tensor_cast(image, NX_DTYPE_F32, &img);
    if (st != NX_OK)
        return st;
    c.image = img;
    if (nx_tensor_numel(img) == 0)
        st = nx_tensor_new(ctx, nx_tensor_dtype(img), nx_tensor_ndim(img), nx_tensor_shape(img),
                           out);
    else
        st = run_susan(ctx, &c, opts->backend, out);
    nx_tensor_free(img);
    return st;
}

nx_status nx_susan_emulator(nx_ctx *ctx, const nx_tensor *image, const nx_susan_opts *opts,
                            nx_tensor **out)
{
    return susan(ctx, WHO, image, opts, NULL, out);
}

nx_status nx_susan_emulator_vjp(nx_ctx *ctx, const nx_tensor *image, const nx_susan_opts *opts,
                                const nx_tensor *dout, nx_tensor **dimage)
{
    if (dimage)
        *dimage = NULL;
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, WHO "_vjp: ctx is NULL");
    nx_status st = nx_sr_check_float(ctx, WHO "_vjp", "image", image);
    if (st == NX_OK)
        st = nx_sr_check_float(ctx, WHO "_vjp", "dout", dout);
    if (st == NX_OK && (nx_tensor_dtype(dout) != nx_tensor_dtype(image) ||
                        nx_tensor_ndim(dout) != nx_tensor_ndim(image) ||
                        memcmp(nx_tensor_shape(dout), nx_tensor_shape(image),
                               (size_t)nx_tensor_ndim(image) * sizeof(int64_t))))
        st = nx_rt_error(ctx, NX_ERR_SHAPE, WHO "_vjp: dout must have the image's dtype and shape");
    if (st != NX_OK)
        return st;
    return susan(ctx, WHO "_vjp", image, opts, dout, dimage);
}
