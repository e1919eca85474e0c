/* The bounded bilateral filter: affinities w_ij = m_ij exp(-d_M(f_i, f_j)^2 / 2) over each
 * point's kmax neighbour slots, normalised per row, then n_iters rounds of one gather of the
 * values and one weighted reduction with those fixed weights (a mean field). Everything is graph,
 * so gradients with respect to values, features and the metric come from autodiff; the
 * neighbourhood (indices, mask) is data and carries none. */
#include <math.h>
#include <string.h>

#include "cache.h"
#include "nitrix-ops.h"
#include "ops/semiring/semiring.h"

/* From metric.c. */
NX_HIDDEN nx_status nx_bil_check_metric(nx_ctx *ctx, const char *who, const nx_feature_metric *m,
                                        nx_dtype dt, int64_t d_f);
NX_HIDDEN double nx_bil_at(const nx_tensor *t, const int64_t *idx);
NX_HIDDEN bool nx_bil_all_finite(const nx_tensor *t, int64_t *bad, double *value);

#define WHO "nx_bilateral_gaussian"

/* out_i = sum_k w[i, k] v[idx[i, k]]: the sparse family's ELL product under REAL, one gather
 * that the fusion pass turns into indexed loads inside the k fold. */
static nx_node ell_apply(nx_graph *g, nx_node w, nx_node idx, nx_node v)
{
    return nx_ell_matmul_node(g, nx_semiring_builtin(NX_SEMIRING_REAL), w, idx, v);
}

static bool node_shapes_ok(nx_graph *g, nx_node values, nx_node features, nx_node metric,
                           nx_node index, nx_node mask, int n_iters)
{
    int64_t vs[NX_MAX_DIMS], fs[NX_MAX_DIMS], is[NX_MAX_DIMS], ms[NX_MAX_DIMS];
    nx_node ops[5] = {values, features, metric, index, mask};
    if (!nx_ir_check_handles(g, "nx_bilateral_node", mask ? 5 : 4, ops))
        return false;
    nx_node_shape(g, values, vs);
    nx_node_shape(g, features, fs);
    nx_node_shape(g, index, is);
    if (mask)
        nx_node_shape(g, mask, ms);
    const char *bad = NULL;
    nx_dtype idt = nx_node_dtype(g, index);
    if (nx_node_ndim(g, values) != 2 || nx_node_ndim(g, features) != 2 || vs[0] != fs[0])
        bad = "values and features must be [n, d_v] and [n, d_f] with one n";
    else if (nx_node_ndim(g, index) != 2 || is[0] != vs[0] ||
             (idt != NX_DTYPE_I32 && idt != NX_DTYPE_I64))
        bad = "index must be [n, kmax] of i32 or i64";
    else if (mask && (nx_node_ndim(g, mask) != 2 || ms[0] != is[0] || ms[1] != is[1] ||
                      nx_node_dtype(g, mask) != NX_DTYPE_BOOL))
        bad = "mask must be bool [n, kmax], index's shape";
    else if (n_iters < 1 || n_iters > NX_BILATERAL_MAX_ITERS)
        bad = "n_iters must be 1..NX_BILATERAL_MAX_ITERS";
    if (bad)
        nx_ir_graph_failf(g, NX_ERR_SHAPE, "nx_bilateral_node: %s", bad);
    return !bad;
}

nx_node nx_bilateral_node(nx_graph *g, nx_node values, nx_node features, nx_metric_kind kind,
                          nx_node metric, nx_node index, nx_node mask, int n_iters)
{
    if (!node_shapes_ok(g, values, features, metric, index, mask, n_iters))
        return NX_NONE;
    int64_t fs[NX_MAX_DIMS];
    nx_node_shape(g, features, fs);
    nx_dtype dt = nx_node_dtype(g, features);
    nx_node fi = nx_reshape(g, features, 3, (int64_t[]){fs[0], 1, fs[1]});
    nx_node delta = nx_sub(g, fi, nx_gather(g, features, index, 0));
    nx_node q = nx_metric_sqdist_node(g, kind, metric, delta);
    nx_node w = nx_exp(g, nx_mul(g, q, nx_scalar(g, dt, -0.5)));
    nx_node zero = nx_scalar(g, dt, 0);
    if (mask)
        w = nx_select(g, mask, w, zero);
    int axis = 1;
    nx_node den = nx_reduce(g, w, 1, &axis, NX_MONOID_SUM, true);
    /* An empty row keeps its value; its safe denominator keeps 0/0 out of the adjoint too. */
    nx_node has = nx_gt(g, den, zero);
    w = nx_div(g, w, nx_select(g, has, den, nx_scalar(g, dt, 1)));
    nx_node v = values;
    for (int it = 0; it < n_iters; it++)
        v = nx_select(g, has, ell_apply(g, w, index, v), v);
    return v;
}

/* ---- entry points -----------------------------------------------------------------------------*/

typedef struct bil_call {
    const nx_tensor *values, *features, *param, *index, *mask, *dout;
    nx_metric_kind kind;
    int n_iters;
} bil_call;

static nx_node input_of(nx_graph *g, const char *name, const nx_tensor *t, bool param)
{
    if (!t)
        return NX_NONE;
    return (param ? nx_parameter : nx_input)(g, name, nx_tensor_dtype(t), nx_tensor_ndim(t),
                                             nx_tensor_shape(t));
}

static nx_status build_bilateral(nx_graph *g, void *user, nx_node *outs, int *nouts)
{
    const bil_call *c = user;
    bool grad = c->dout != NULL;
    nx_node v = input_of(g, "values", c->values, grad);
    nx_node f = input_of(g, "features", c->features, grad);
    nx_node p = input_of(g, "metric", c->param, grad);
    nx_node idx = input_of(g, "index", c->index, false);
    nx_node mask = input_of(g, "mask", c->mask, false);
    nx_node y = nx_bilateral_node(g, v, f, c->kind, p, idx, mask, c->n_iters);
    if (!grad) {
        outs[0] = y;
        *nouts = 1;
        return nx_graph_status(g);
    }
    nx_node dy = input_of(g, "dout", c->dout, false);
    if (nx_graph_status(g) != NX_OK)
        return nx_graph_status(g);
    *nouts = 3;
    return nx_graph_vjp(g, 1, &y, &dy, 3, (nx_node[]){v, f, p}, outs);
}

/* The C-order position of the first entry outside [0, n), or -1; a plain loop over contiguous
 * storage, since grid neighbourhoods have millions of entries. */
static int64_t first_out_of_range(const nx_tensor *idx, int64_t n)
{
    int64_t kmax = nx_tensor_shape(idx)[1], count = nx_tensor_numel(idx);
    if (nx_tensor_is_contiguous(idx) && nx_tensor_dtype(idx) == NX_DTYPE_I64) {
        const int64_t *p = nx_tensor_data(idx);
        for (int64_t e = 0; e < count; e++)
            if (p[e] < 0 || p[e] >= n)
                return e;
        return -1;
    }
    if (nx_tensor_is_contiguous(idx) && nx_tensor_dtype(idx) == NX_DTYPE_I32) {
        const int32_t *p = nx_tensor_data(idx);
        for (int64_t e = 0; e < count; e++)
            if (p[e] < 0 || p[e] >= n)
                return e;
        return -1;
    }
    for (int64_t e = 0; e < count; e++) {
        double j = nx_bil_at(idx, (int64_t[]){e / kmax, e % kmax});
        if (j < 0 || j >= (double)n)
            return e;
    }
    return -1;
}

static nx_status check_index(nx_ctx *ctx, const nx_tensor *idx, int64_t n)
{
    nx_dtype d = nx_tensor_dtype(idx);
    if (nx_tensor_device(idx) != NX_DEVICE_HOST || (d != NX_DTYPE_I32 && d != NX_DTYPE_I64))
        return nx_rt_error(ctx, NX_ERR_DTYPE, WHO ": index is %s; expected a host i32 or i64 array",
                           nx_dtype_name(d));
    if (nx_tensor_ndim(idx) != 2 || nx_tensor_shape(idx)[0] != n || nx_tensor_shape(idx)[1] < 1)
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           WHO ": index has %d dims (first extent %lld); "
                               "expected [n, kmax] with n = %lld, kmax >= 1",
                           nx_tensor_ndim(idx),
                           (long long)(nx_tensor_ndim(idx) ? nx_tensor_shape(idx)[0] : -1),
                           (long long)n);
    int64_t bad = first_out_of_range(idx, n);
    if (bad >= 0) {
        int64_t kmax = nx_tensor_shape(idx)[1];
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           WHO ": index[%lld, %lld] is %.0f; expected 0 <= j < n = %lld (mask out "
                               "padding slots instead)",
                           (long long)(bad / kmax), (long long)(bad % kmax),
                           nx_bil_at(idx, (int64_t[]){bad / kmax, bad % kmax}), (long long)n);
    }
    return NX_OK;
}

static nx_status check_mask(nx_ctx *ctx, const nx_tensor *mask, const nx_tensor *idx)
{
    nx_dtype d = nx_tensor_dtype(mask);
    if (nx_tensor_device(mask) != NX_DEVICE_HOST || (d != NX_DTYPE_BOOL && !nx_dtype_is_int(d)))
        return nx_rt_error(ctx, NX_ERR_DTYPE,
                           WHO ": mask is %s; expected a host bool or integer "
                               "array",
                           nx_dtype_name(d));
    if (nx_tensor_ndim(mask) != 2 || nx_tensor_shape(mask)[0] != nx_tensor_shape(idx)[0] ||
        nx_tensor_shape(mask)[1] != nx_tensor_shape(idx)[1])
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           WHO ": mask must have the neighbourhood's shape "
                               "[%lld, %lld]",
                           (long long)nx_tensor_shape(idx)[0], (long long)nx_tensor_shape(idx)[1]);
    return NX_OK;
}

static nx_status check_points(nx_ctx *ctx, const nx_tensor *v, const nx_tensor *f)
{
    nx_status st = nx_sr_check_float(ctx, WHO, "values", v);
    if (st == NX_OK)
        st = nx_sr_check_float(ctx, WHO, "features", f);
    if (st != NX_OK)
        return st;
    if (nx_tensor_dtype(v) != nx_tensor_dtype(f))
        return nx_rt_error(ctx, NX_ERR_DTYPE, WHO ": values are %s but features are %s",
                           nx_dtype_name(nx_tensor_dtype(v)), nx_dtype_name(nx_tensor_dtype(f)));
    if (nx_tensor_ndim(v) != 2 || nx_tensor_ndim(f) != 2 ||
        nx_tensor_shape(v)[0] != nx_tensor_shape(f)[0] || nx_tensor_shape(f)[1] < 1)
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           WHO ": values and features must be [n, d_v] and [n, d_f] (d_f >= 1) "
                               "with one n (they have %d and %d dims, n %lld and %lld)",
                           nx_tensor_ndim(v), nx_tensor_ndim(f),
                           (long long)(nx_tensor_ndim(v) ? nx_tensor_shape(v)[0] : -1),
                           (long long)(nx_tensor_ndim(f) ? nx_tensor_shape(f)[0] : -1));
    int64_t bad = -1, d = nx_tensor_shape(f)[1];
    double x = 0;
    if (!nx_bil_all_finite(f, &bad, &x))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           WHO ": features of point %lld (component %lld) is %g; features must "
                               "be finite",
                           (long long)(bad / d), (long long)(bad % d), x);
    return NX_OK;
}

/* The ELL's structure: its indices, and its pads (value == identity) masked out. */
static nx_status ell_neighbourhood(nx_ctx *ctx, const nx_ell *e, int64_t n, nx_tensor **index,
                                   nx_tensor **mask)
{
    nx_status st = nx_ell_check(ctx, WHO, e);
    if (st != NX_OK)
        return st;
    if (e->n_cols != n || nx_tensor_shape(e->indices)[0] != n)
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           WHO ": the ELL is %lld x %lld; expected n x n with "
                               "n = %lld points",
                           (long long)nx_tensor_shape(e->indices)[0], (long long)e->n_cols,
                           (long long)n);
    int64_t kmax = nx_tensor_shape(e->indices)[1];
    if ((st = nx_tensor_copy(e->indices, index)) == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_BOOL, 2, (int64_t[]){n, kmax}, mask);
    for (int64_t i = 0; st == NX_OK && i < n; i++)
        for (int64_t s = 0; s < kmax; s++)
            ((uint8_t *)nx_tensor_data(*mask))[i * kmax + s] =
                nx_bil_at(e->values, (int64_t[]){i, s}) != e->identity;
    return st;
}

/* *mask (NULL or bool) and-ed with the caller's mask. */
static nx_status and_mask(nx_ctx *ctx, const nx_tensor *user, nx_tensor **mask)
{
    nx_tensor *b = NULL;
    nx_status st = nx_tensor_dtype(user) == NX_DTYPE_BOOL && !*mask
                       ? nx_tensor_contiguous(user, &b)
                       : nx_tensor_cast(user, NX_DTYPE_BOOL, &b);
    if (st != NX_OK || !*mask) {
        *mask = b;
        return st;
    }
    uint8_t *m = nx_tensor_data(*mask);
    const uint8_t *u = nx_tensor_data(b);
    for (int64_t i = 0; i < nx_tensor_numel(b); i++)
        m[i] = m[i] && u[i];
    nx_tensor_free(b);
    (void)ctx;
    return NX_OK;
}

/* Checks the arguments and resolves the neighbourhood: *index and *mask are new references
 * (k-NN computed here, masks converted to bool) that the caller frees. */
static nx_status prepare(nx_ctx *ctx, const nx_tensor *v, const nx_tensor *f,
                         const nx_bilateral_opts *o, bil_call *c, nx_tensor **index,
                         nx_tensor **mask)
{
    if (!o)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           WHO ": opts is NULL; expected the metric and "
                               "the neighbourhood");
    nx_status st = check_points(ctx, v, f);
    if (st == NX_OK)
        st = nx_bil_check_metric(ctx, WHO, &o->metric, nx_tensor_dtype(f), nx_tensor_shape(f)[1]);
    if (st != NX_OK)
        return st;
    if (o->n_iters < 0 || o->n_iters > NX_BILATERAL_MAX_ITERS)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, WHO ": n_iters = %d; expected 0 (one) .. %d",
                           o->n_iters, NX_BILATERAL_MAX_ITERS);
    int64_t n = nx_tensor_shape(f)[0];
    if (o->ell && o->index)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, WHO ": give index or ell, not both");
    if (o->ell) {
        st = ell_neighbourhood(ctx, o->ell, n, index, mask);
    } else if (o->index) {
        if ((st = check_index(ctx, o->index, n)) != NX_OK)
            return st;
        st = nx_tensor_contiguous(o->index, index);
    } else if (n > 0) {
        nx_knn_opts ko = {.backend = o->backend, .metric = &o->metric};
        st = nx_brute_force_knn(ctx, f, o->k, &ko, index);
    }
    if (st == NX_OK && o->mask && *index) {
        if ((st = check_mask(ctx, o->mask, *index)) == NX_OK)
            st = and_mask(ctx, o->mask, mask);
    } else if (st == NX_OK && o->mask) {
        st = nx_rt_error(ctx, NX_ERR_INVALID_ARG, WHO ": a mask needs an explicit index");
    }
    *c = (bil_call){.values = v,
                    .features = f,
                    .param = o->metric.param,
                    .index = *index,
                    .mask = *mask,
                    .kind = o->metric.kind,
                    .n_iters = o->n_iters ? o->n_iters : 1};
    return st;
}

static nx_status run_bilateral(nx_ctx *ctx, const bil_call *c, nx_backend be, nx_tensor **res)
{
    nx_rt_cache_blob key;
    nx_rt_cache_blob_init(&key, ctx);
    nx_rt_cache_blob_str(&key, "op", c->dout ? "bilateral_gaussian_vjp" : "bilateral_gaussian");
    nx_rt_cache_blob_i64(&key, "kind", c->kind);
    nx_rt_cache_blob_i64(&key, "n_iters", c->n_iters);
    nx_rt_cache_blob_tensor(&key, "values", c->values);
    nx_rt_cache_blob_tensor(&key, "features", c->features);
    nx_rt_cache_blob_tensor(&key, "metric", c->param);
    nx_rt_cache_blob_tensor(&key, "index", c->index);
    nx_rt_cache_blob_tensor(&key, "mask", c->mask);
    nx_rt_cache_blob_tensor(&key, "dout", c->dout);
    nx_program *p = NULL;
    nx_status st = nx_sr_program(ctx, &key, be, build_bilateral, (void *)c, &p);
    nx_rt_cache_blob_free(&key);
    if (st != NX_OK)
        return st;
    const nx_tensor *ins[6] = {c->values, c->features, c->param, c->index};
    int n = 4;
    if (c->mask)
        ins[n++] = c->mask;
    if (c->dout)
        ins[n++] = c->dout;
    return nx_program_run(p, ins, res);
}

nx_status nx_bilateral_gaussian(nx_ctx *ctx, const nx_tensor *values, const nx_tensor *features,
                                const nx_bilateral_opts *opts, nx_tensor **out)
{
    if (!ctx || !out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, WHO ": ctx and out must not be NULL");
    *out = NULL;
    nx_tensor *index = NULL, *mask = NULL;
    bil_call c;
    nx_status st = prepare(ctx, values, features, opts, &c, &index, &mask);
    if (st == NX_OK && nx_tensor_shape(values)[0] == 0)
        st = nx_tensor_new(ctx, nx_tensor_dtype(values), 2, nx_tensor_shape(values), out);
    else if (st == NX_OK)
        st = run_bilateral(ctx, &c, opts->backend, out);
    nx_tensor_free(index);
    nx_tensor_free(mask);
    return st;
}

static void hand_over(nx_tensor *res, nx_tensor **dst)
{
    if (dst)
        *dst = res;
    else
        nx_tensor_free(res);
}

nx_status nx_bilateral_gaussian_vjp(nx_ctx *ctx, const nx_tensor *values, const nx_tensor *features,
                                    const nx_bilateral_opts *opts, const nx_tensor *dout,
                                    nx_tensor **d_values, nx_tensor **d_features,
                                    nx_tensor **d_metric)
{
    nx_tensor **dst[3] = {d_values, d_features, d_metric};
    for (int i = 0; i < 3; i++)
        if (dst[i])
            *dst[i] = NULL;
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, WHO "_vjp: ctx is NULL");
    nx_tensor *index = NULL, *mask = NULL, *res[3] = {NULL, NULL, NULL};
    bil_call c;
    nx_status st = prepare(ctx, values, features, opts, &c, &index, &mask);
    if (st == NX_OK)
        st = nx_sr_check_float(ctx, WHO "_vjp", "dout", dout);
    if (st == NX_OK &&
        (nx_tensor_dtype(dout) != nx_tensor_dtype(values) || nx_tensor_ndim(dout) != 2 ||
         memcmp(nx_tensor_shape(dout), nx_tensor_shape(values), 2 * sizeof(int64_t))))
        st = nx_rt_error(ctx, NX_ERR_SHAPE, WHO "_vjp: dout must have the values' dtype and shape");
    if (st == NX_OK && nx_tensor_shape(values)[0] == 0) {
        const nx_tensor *like[3] = {values, features, opts->metric.param};
        for (int i = 0; i < 3 && st == NX_OK; i++)
            st = nx_tensor_new(ctx, nx_tensor_dtype(like[i]), nx_tensor_ndim(like[i]),
                               nx_tensor_shape(like[i]), &res[i]);
    } else if (st == NX_OK) {
        c.dout = dout;
        st = run_bilateral(ctx, &c, opts->backend, res);
    }
    nx_tensor_free(index);
    nx_tensor_free(mask);
    for (int i = 0; i < 3; i++) {
        if (st == NX_OK)
            hand_over(res[i], dst[i]);
        else
            nx_tensor_free(res[i]);
    }
    return st;
}
