/* Neighbourhoods of the bilateral family: brute-force k-NN by a feature metric (a graph: the
 * block of squared distances q[i, j] = d_M(f_i, f_j)^2, then the IR's top-k, smallest first and
 * first index on ties) and the spatial cube of a grid (a host constructor: plain index arrays). */
#include <math.h>
#include <string.h>

#include "cache.h"
#include "nitrix-ops.h"
#include "ops/semiring/semiring.h"
#include "tensor.h"

/* From metric.c. */
NX_HIDDEN nx_status nx_bil_check_metric(nx_ctx *ctx, const char *who, const nx_feature_metric *m,
                                        nx_dtype dt, int64_t d_f);
NX_HIDDEN bool nx_bil_all_finite(const nx_tensor *t, int64_t *bad, double *value);

#define WHO "nx_brute_force_knn"
/* Rows per program run: the [rows, n] distance block stays near 4 M elements. */
#define KNN_BLOCK_ELEMS (INT64_C(1) << 22)

typedef struct knn_call {
    const nx_tensor *features, *param;
    nx_metric_kind kind;
    int64_t rows, k;
    bool exclude_self;
} knn_call;

/* q [rows, n] between the block's points xi and all points y, with the block's own points set to
 * -inf (always first) or NaN (sorted after every number, so never among the k). */
static nx_status build_knn(nx_graph *g, void *user, nx_node *outs, int *nouts)
{
    const knn_call *c = user;
    nx_dtype dt = nx_tensor_dtype(c->features);
    int64_t n = nx_tensor_shape(c->features)[0], d = nx_tensor_shape(c->features)[1];
    int64_t b = c->rows;
    nx_node xi = nx_input(g, "block", dt, 2, (int64_t[]){b, d});
    nx_node y = nx_input(g, "features", dt, 2, (int64_t[]){n, d});
    nx_node off = nx_input(g, "first_row", NX_DTYPE_I64, 0, NULL);
    nx_node p = c->param
                    ? nx_input(g, "metric", dt, nx_tensor_ndim(c->param), nx_tensor_shape(c->param))
                    : NX_NONE;
    nx_node delta = nx_sub(g, nx_reshape(g, xi, 3, (int64_t[]){b, 1, d}),
                           nx_reshape(g, y, 3, (int64_t[]){1, n, d}));
    nx_node q;
    if (p) {
        q = nx_metric_sqdist_node(g, c->kind, p, delta);
    } else {
        int last = -1;
        q = nx_reduce(g, nx_mul(g, delta, delta), 1, &last, NX_MONOID_SUM, false);
    }
    int64_t bs[2] = {b, n};
    nx_node self = nx_eq(g, nx_add(g, nx_iota(g, NX_DTYPE_I64, 2, bs, 0), off),
                         nx_iota(g, NX_DTYPE_I64, 2, bs, 1));
    q = nx_select(g, self, nx_scalar(g, dt, c->exclude_self ? NAN : -INFINITY), q);
    nx_topk(g, q, c->k, 1, false, NULL, &outs[0]);
    *nouts = 1;
    return nx_graph_status(g);
}

static nx_status check_features(nx_ctx *ctx, const char *who, const nx_tensor *f)
{
    nx_status st = nx_sr_check_float(ctx, who, "features", f);
    if (st != NX_OK)
        return st;
    if (nx_tensor_ndim(f) != 2 || nx_tensor_shape(f)[1] < 1)
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "%s: features has %d dims; expected [n, d_f], "
                           "d_f >= 1",
                           who, nx_tensor_ndim(f));
    int64_t bad = -1;
    double v = 0;
    if (!nx_bil_all_finite(f, &bad, &v))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: features of point %lld (component %lld) is %g; features must "
                           "be finite",
                           who, (long long)(bad / nx_tensor_shape(f)[1]),
                           (long long)(bad % nx_tensor_shape(f)[1]), v);
    return NX_OK;
}

static nx_status knn_program(nx_ctx *ctx, const knn_call *c, nx_backend be, nx_program **p)
{
    nx_rt_cache_blob key;
    nx_rt_cache_blob_init(&key, ctx);
    nx_rt_cache_blob_str(&key, "op", "brute_force_knn");
    nx_rt_cache_blob_i64(&key, "kind", c->param ? (int64_t)c->kind : -1);
    nx_rt_cache_blob_i64(&key, "rows", c->rows);
    nx_rt_cache_blob_i64(&key, "k", c->k);
    nx_rt_cache_blob_i64(&key, "exclude_self", c->exclude_self);
    nx_rt_cache_blob_tensor(&key, "features", c->features);
    nx_rt_cache_blob_tensor(&key, "metric", c->param);
    nx_status st = nx_sr_program(ctx, &key, be, build_knn, (void *)c, p);
    nx_rt_cache_blob_free(&key);
    return st;
}

/* Runs the block of rows [r0, r0 + c->rows) and copies its indices into out. */
static nx_status knn_block(nx_ctx *ctx, knn_call *c, nx_backend be, int64_t r0, nx_tensor *out)
{
    nx_program *p = NULL;
    nx_status st = knn_program(ctx, c, be, &p);
    if (st != NX_OK)
        return st;
    nx_tensor *blk = NULL, *off = NULL, *res = NULL;
    st = nx_tensor_slice(c->features, 0, r0, r0 + c->rows, 1, &blk);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_I64, 0, NULL, &off);
    if (st == NX_OK) {
        *(int64_t *)nx_tensor_data(off) = r0;
        const nx_tensor *ins[4] = {blk, c->features, off, c->param};
        st = nx_program_run(p, ins, &res);
    }
    if (st == NX_OK)
        memcpy((int64_t *)nx_tensor_data(out) + r0 * c->k, nx_tensor_data(res),
               (size_t)(c->rows * c->k) * sizeof(int64_t));
    nx_tensor_free(res);
    nx_tensor_free(off);
    nx_tensor_free(blk);
    return st;
}

nx_status nx_brute_force_knn(nx_ctx *ctx, const nx_tensor *features, int64_t k,
                             const nx_knn_opts *opts, nx_tensor **out)
{
    if (!ctx || !out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, WHO ": ctx and out must not be NULL");
    *out = NULL;
    static const nx_knn_opts defaults = {0};
    const nx_knn_opts *o = opts ? opts : &defaults;
    nx_status st = check_features(ctx, WHO, features);
    if (st != NX_OK)
        return st;
    int64_t n = nx_tensor_shape(features)[0];
    if (o->metric && (st = nx_bil_check_metric(ctx, WHO, o->metric, nx_tensor_dtype(features),
                                               nx_tensor_shape(features)[1])) != NX_OK)
        return st;
    int64_t kmax = o->exclude_self ? n - 1 : n;
    if (k < 1 || (n > 0 && k > kmax))
        return nx_rt_error(
            ctx, NX_ERR_INVALID_ARG, WHO ": k = %lld; expected 1 <= k <= %lld (n = %lld points%s)",
            (long long)k, (long long)kmax, (long long)n, o->exclude_self ? ", self excluded" : "");
    nx_tensor *res = NULL;
    if ((st = nx_tensor_new(ctx, NX_DTYPE_I64, 2, (int64_t[]){n, k}, &res)) != NX_OK)
        return st;
    knn_call c = {.features = features, .k = k, .exclude_self = o->exclude_self};
    if (o->metric) {
        c.kind = o->metric->kind;
        c.param = o->metric->param;
    }
    int64_t rows = n > 0 ? KNN_BLOCK_ELEMS / n : 1;
    rows = rows < 1 ? 1 : rows > n ? n : rows;
    for (int64_t r0 = 0; r0 < n && st == NX_OK; r0 += rows) {
        c.rows = n - r0 < rows ? n - r0 : rows;
        st = knn_block(ctx, &c, o->backend, r0, res);
    }
    if (st != NX_OK) {
        nx_tensor_free(res);
        return st;
    }
    *out = res;
    return NX_OK;
}

/* ---- the spatial cube -------------------------------------------------------------------------*/

static nx_status cube_check(nx_ctx *ctx, int ndim, const int64_t *shape, int64_t half, int64_t *n,
                            int64_t *slots)
{
    static const char *who = "nx_spatial_cube_neighbourhood";
    if (ndim < 1 || ndim > NX_MAX_DIMS || !shape)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: ndim %d; expected 1..%d extents", who,
                           ndim, NX_MAX_DIMS);
    if (half < 0 || half > 1024)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: half %lld; expected 0..1024", who,
                           (long long)half);
    if (!nx_shape_numel(ndim, shape, n))
        return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: the grid's extents are negative or overflow",
                           who);
    *slots = 1;
    for (int a = 0; a < ndim; a++)
        if (!nx_mul_i64(*slots, 2 * half + 1, slots))
            return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: (2 * %lld + 1)^%d slots overflow", who,
                               (long long)half, ndim);
    int64_t total = 0;
    if (!nx_mul_i64(*n, *slots, &total) || !nx_mul_i64(total, 8, &total))
        return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: %lld voxels x %lld slots overflow", who,
                           (long long)*n, (long long)*slots);
    return NX_OK;
}

/* Fills one voxel's row: each offset's clamped neighbour and whether it stayed inside. */
static void cube_row(int ndim, const int64_t *shape, int64_t half, const int64_t *pos,
                     int64_t slots, int64_t *idx, uint8_t *valid)
{
    int64_t off[NX_MAX_DIMS];
    for (int a = 0; a < ndim; a++)
        off[a] = -half;
    for (int64_t s = 0; s < slots; s++) {
        int64_t lin = 0;
        bool inside = true;
        for (int a = 0; a < ndim; a++) {
            int64_t q = pos[a] + off[a];
            inside = inside && q >= 0 && q < shape[a];
            q = q < 0 ? 0 : q >= shape[a] ? shape[a] - 1 : q;
            lin = lin * shape[a] + q;
        }
        idx[s] = lin;
        if (valid)
            valid[s] = inside;
        for (int a = ndim - 1; a >= 0 && ++off[a] > half; a--)
            off[a] = -half;
    }
}

nx_status nx_spatial_cube_neighbourhood(nx_ctx *ctx, int ndim, const int64_t *shape, int64_t half,
                                        nx_tensor **index, nx_tensor **validity)
{
    if (!ctx || !index)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_spatial_cube_neighbourhood: ctx and index must not be NULL");
    *index = NULL;
    if (validity)
        *validity = NULL;
    int64_t n = 0, slots = 0;
    nx_status st = cube_check(ctx, ndim, shape, half, &n, &slots);
    if (st != NX_OK)
        return st;
    nx_tensor *idx = NULL, *val = NULL;
    st = nx_rt_tensor_new_uninit(ctx, NX_DTYPE_I64, 2, (int64_t[]){n, slots}, &idx);
    if (st == NX_OK && validity)
        st = nx_rt_tensor_new_uninit(ctx, NX_DTYPE_BOOL, 2, (int64_t[]){n, slots}, &val);
    if (st != NX_OK) {
        nx_tensor_free(idx);
        return st;
    }
    int64_t pos[NX_MAX_DIMS] = {0};
    int64_t *ip = nx_tensor_data(idx);
    uint8_t *vp = val ? nx_tensor_data(val) : NULL;
    for (int64_t v = 0; v < n; v++) {
        cube_row(ndim, shape, half, pos, slots, ip + v * slots, vp ? vp + v * slots : NULL);
        for (int a = ndim - 1; a >= 0 && ++pos[a] == shape[a]; a--)
            pos[a] = 0;
    }
    *index = idx;
    if (validity)
        *validity = val;
    return NX_OK;
}
