/* Host construction of ELLs: padding, top-k from a dense matrix (optionally symmetrized), back to
 * dense, masking to the annihilator and self loops. Data-dependent shapes, so these run on the
 * host in plain loops rather than as graphs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/sparse/sparse.h"

/* A new ELL of m x k slots, all pads (identity, index 0). */
static nx_status new_ell(nx_ctx *ctx, nx_dtype vdt, nx_dtype idt, int64_t m, int64_t k,
                         int64_t n_cols, double identity, nx_ell *out)
{
    memset(out, 0, sizeof *out);
    nx_status st = nx_sparse_new2(ctx, vdt, m, k, &out->values);
    if (st == NX_OK)
        st = nx_sparse_new2(ctx, idt, m, k, &out->indices);
    if (st != NX_OK) {
        nx_ell_free(out);
        return st;
    }
    out->n_cols = n_cols;
    out->identity = identity;
    for (int64_t i = 0; i < m; i++)
        for (int64_t p = 0; p < k; p++)
            nx_sparse_set(out->values, i, p, identity);
    return NX_OK;
}

static nx_dtype index_dtype_for(int64_t n)
{
    return n <= INT32_MAX ? NX_DTYPE_I32 : NX_DTYPE_I64;
}

static nx_status check_2d(nx_ctx *ctx, const char *who, const char *what, const nx_tensor *t)
{
    if (!t)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %s is NULL", who, what);
    if (nx_tensor_device(t) != NX_DEVICE_HOST)
        return nx_rt_error(ctx, NX_ERR_UNSUPPORTED, "%s: %s is a device tensor; expected host", who,
                           what);
    if (nx_tensor_ndim(t) != 2)
        return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: %s has %d dims; expected 2", who, what,
                           nx_tensor_ndim(t));
    return NX_OK;
}

/* ---- ell_pad ---------------------------------------------------------------------------------*/

nx_status nx_ell_pad(nx_ctx *ctx, const nx_tensor *values, const nx_tensor *indices, int64_t k_max,
                     int64_t n_cols, double identity, int64_t pad_index, nx_ell *out)
{
    static const char *who = "nx_ell_pad";
    if (!out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: out is NULL", who);
    memset(out, 0, sizeof *out);
    nx_status st = check_2d(ctx, who, "values", values);
    if (st == NX_OK)
        st = check_2d(ctx, who, "indices", indices);
    if (st == NX_OK)
        st = nx_sr_check_float(ctx, who, "values", values);
    if (st != NX_OK)
        return st;
    nx_dtype idt = nx_tensor_dtype(indices);
    if (idt != NX_DTYPE_I32 && idt != NX_DTYPE_I64)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: indices are %s; expected i32 or i64", who,
                           nx_dtype_name(idt));
    const int64_t *vs = nx_tensor_shape(values), *is = nx_tensor_shape(indices);
    if (vs[0] != is[0] || vs[1] != is[1])
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "%s: values are [%lld, %lld] but indices [%lld, "
                           "%lld]; expected one shape",
                           who, (long long)vs[0], (long long)vs[1], (long long)is[0],
                           (long long)is[1]);
    if (k_max < vs[1])
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: k_max %lld is below the %lld slots given",
                           who, (long long)k_max, (long long)vs[1]);
    if (pad_index < 0 || (n_cols > 0 && pad_index >= n_cols))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: pad_index %lld; expected 0 <= pad_index "
                           "< n_cols = %lld",
                           who, (long long)pad_index, (long long)n_cols);
    st = new_ell(ctx, nx_tensor_dtype(values), idt, vs[0], k_max, n_cols, identity, out);
    if (st != NX_OK)
        return st;
    for (int64_t i = 0; i < vs[0]; i++)
        for (int64_t p = 0; p < k_max; p++) {
            bool given = p < vs[1];
            nx_sparse_set(out->values, i, p, given ? nx_sparse_get(values, i, p) : identity);
            nx_sparse_set_index(out->indices, i, p,
                                given ? nx_sparse_get_index(indices, i, p) : pad_index);
        }
    st = nx_ell_check(ctx, who, out);
    if (st != NX_OK)
        nx_ell_free(out);
    return st;
}

/* ---- ell_from_dense --------------------------------------------------------------------------*/

typedef struct cand {
    double mag;
    int64_t col;
} cand;

static int by_magnitude(const void *pa, const void *pb)
{
    const cand *a = pa, *b = pb;
    if (a->mag != b->mag)
        return a->mag > b->mag ? -1 : 1;
    return a->col < b->col ? -1 : a->col > b->col;
}

/* keep[i * n + j]: the k largest |dense[i, j]| > threshold of each row (k <= 0: all). */
static nx_status top_k(nx_ctx *ctx, const nx_tensor *d, int64_t k, double threshold, bool *keep)
{
    int64_t m = nx_tensor_shape(d)[0], n = nx_tensor_shape(d)[1];
    size_t bytes = (size_t)(n ? n : 1) * sizeof(cand);
    cand *c = nx_rt_alloc(ctx, bytes);
    if (!c)
        return nx_rt_nomem(ctx, "nx_ell_from_dense: row candidates", bytes);
    for (int64_t i = 0; i < m; i++) {
        int64_t nc = 0;
        for (int64_t j = 0; j < n; j++) {
            double v = fabs(nx_sparse_get(d, i, j));
            if (v > threshold)
                c[nc++] = (cand){v, j};
        }
        qsort(c, (size_t)nc, sizeof *c, by_magnitude);
        if (k > 0 && nc > k)
            nc = k;
        for (int64_t r = 0; r < nc; r++)
            keep[i * n + c[r].col] = true;
    }
    nx_rt_free(ctx, c, bytes);
    return NX_OK;
}

nx_status nx_ell_from_dense(nx_ctx *ctx, const nx_tensor *dense, const nx_ell_from_dense_opts *opts,
                            nx_ell *out)
{
    static const char *who = "nx_ell_from_dense";
    if (!out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: out is NULL", who);
    memset(out, 0, sizeof *out);
    nx_ell_from_dense_opts o = {0};
    if (opts)
        o = *opts;
    nx_status st = check_2d(ctx, who, "dense", dense);
    if (st == NX_OK)
        st = nx_sr_check_float(ctx, who, "dense", dense);
    if (st != NX_OK)
        return st;
    int64_t m = nx_tensor_shape(dense)[0], n = nx_tensor_shape(dense)[1];
    if (o.symmetrize && m != n)
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "%s: symmetrize needs a square matrix; dense is "
                           "[%lld, %lld]",
                           who, (long long)m, (long long)n);
    if (!(o.threshold >= 0))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: threshold %g; expected >= 0", who,
                           o.threshold);
    int64_t cells;
    if (!nx_mul_i64(m, n, &cells))
        return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: dense is too large", who);
    bool *keep = nx_rt_calloc(ctx, (size_t)(cells ? cells : 1), 1);
    if (!keep)
        return nx_rt_nomem(ctx, "nx_ell_from_dense: pattern", (size_t)cells);
    st = top_k(ctx, dense, o.k_max, o.threshold, keep);
    if (st == NX_OK && o.symmetrize)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < i; j++)
                keep[i * n + j] = keep[j * n + i] = keep[i * n + j] || keep[j * n + i];
    int64_t k = o.k_max > 0 && !o.symmetrize ? o.k_max : 0;
    for (int64_t i = 0; st == NX_OK && i < m; i++) {
        int64_t cnt = 0;
        for (int64_t j = 0; j < n; j++)
            cnt += keep[i * n + j];
        k = cnt > k ? cnt : k;
    }
    if (st == NX_OK)
        st = new_ell(ctx, nx_tensor_dtype(dense), index_dtype_for(n), m, k, n, o.identity, out);
    for (int64_t i = 0; st == NX_OK && i < m; i++) {
        int64_t p = 0;
        for (int64_t j = 0; j < n; j++)
            if (keep[i * n + j]) {
                nx_sparse_set(out->values, i, p, nx_sparse_get(dense, i, j));
                nx_sparse_set_index(out->indices, i, p++, j);
            }
    }
    nx_rt_free(ctx, keep, (size_t)(cells ? cells : 1));
    return st;
}

/* ---- ell_to_dense ----------------------------------------------------------------------------*/

nx_status nx_ell_to_dense(nx_ctx *ctx, const nx_ell *a, nx_tensor **out)
{
    static const char *who = "nx_ell_to_dense";
    if (!out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: out is NULL", who);
    *out = NULL;
    nx_status st = nx_sparse_check_host_ell(ctx, who, a);
    if (st != NX_OK)
        return st;
    const int64_t *s = nx_tensor_shape(a->values);
    nx_tensor *d = NULL;
    if ((st = nx_sparse_new2(ctx, nx_tensor_dtype(a->values), s[0], a->n_cols, &d)) != NX_OK)
        return st;
    for (int64_t i = 0; i < s[0]; i++)
        for (int64_t p = 0; p < s[1]; p++) {
            double v = nx_sparse_get(a->values, i, p);
            if (v == a->identity)
                continue;
            int64_t q = nx_sparse_get_index(a->indices, i, p);
            nx_sparse_set(d, i, q, nx_sparse_get(d, i, q) + v);
        }
    *out = d;
    return NX_OK;
}

/* ---- ell_mask --------------------------------------------------------------------------------*/

static nx_status copy_ell(const nx_ell *a, nx_ell *out)
{
    memset(out, 0, sizeof *out);
    nx_status st = nx_tensor_copy(a->values, &out->values);
    if (st == NX_OK)
        st = nx_tensor_copy(a->indices, &out->indices);
    if (st != NX_OK) {
        nx_ell_free(out);
        return st;
    }
    out->n_cols = a->n_cols;
    out->identity = a->identity;
    return NX_OK;
}

nx_status nx_ell_mask(nx_ctx *ctx, const nx_ell *a, const nx_tensor *valid, const nx_semiring *sr,
                      nx_ell *out)
{
    static const char *who = "nx_ell_mask";
    if (!out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: out is NULL", who);
    memset(out, 0, sizeof *out);
    if (!sr)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: semiring is NULL", who);
    nx_semiring_info info;
    nx_semiring_get_info(sr, &info);
    if (!info.has_annihilator)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: semiring '%s' has no annihilator, so a "
                           "masked slot cannot be made to contribute nothing; expected a "
                           "semiring with one (real, log, tropical, boolean)",
                           who, info.name);
    nx_status st = nx_sparse_check_host_ell(ctx, who, a);
    if (st == NX_OK)
        st = check_2d(ctx, who, "valid", valid);
    if (st != NX_OK)
        return st;
    const int64_t *s = nx_tensor_shape(a->values), *ms = nx_tensor_shape(valid);
    if (nx_tensor_dtype(valid) != NX_DTYPE_BOOL || ms[0] != s[0] || ms[1] != s[1])
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "%s: valid is %s [%lld, %lld]; expected bool "
                           "[%lld, %lld] (the ELL's slots)",
                           who, nx_dtype_name(nx_tensor_dtype(valid)), (long long)ms[0],
                           (long long)ms[1], (long long)s[0], (long long)s[1]);
    if ((st = copy_ell(a, out)) != NX_OK)
        return st;
    for (int64_t i = 0; i < s[0]; i++)
        for (int64_t p = 0; p < s[1]; p++) {
            bool pad = nx_sparse_get(a->values, i, p) == a->identity;
            if (pad || nx_sparse_get(valid, i, p) == 0)
                nx_sparse_set(out->values, i, p, info.annihilator);
        }
    out->identity = info.annihilator;
    return NX_OK;
}

/* ---- ell_add_self_loops ----------------------------------------------------------------------*/

static nx_status check_attr(nx_ctx *ctx, const char *who, const nx_ell *a, const nx_tensor *attr)
{
    if (!attr)
        return NX_OK;
    nx_status st = nx_sr_check_float(ctx, who, "edge_attr", attr);
    if (st != NX_OK)
        return st;
    const int64_t *s = nx_tensor_shape(a->values), *as = nx_tensor_shape(attr);
    if (nx_tensor_ndim(attr) != 3 || as[0] != s[0] || as[1] != s[1])
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "%s: edge_attr has %d dims; expected [m, k_max, d] "
                           "= [%lld, %lld, d]",
                           who, nx_tensor_ndim(attr), (long long)s[0], (long long)s[1]);
    return NX_OK;
}

static double attr_at(const nx_tensor *t, int64_t i, int64_t p, int64_t c)
{
    const int64_t *st = nx_tensor_strides(t);
    int64_t o = i * st[0] + p * st[1] + c * st[2];
    if (nx_tensor_dtype(t) == NX_DTYPE_F32)
        return ((const float *)nx_tensor_data(t))[o];
    return ((const double *)nx_tensor_data(t))[o];
}

static void attr_set(nx_tensor *t, int64_t i, int64_t p, int64_t c, double v)
{
    int64_t d = nx_tensor_shape(t)[2], k = nx_tensor_shape(t)[1];
    int64_t o = (i * k + p) * d + c;
    if (nx_tensor_dtype(t) == NX_DTYPE_F32)
        ((float *)nx_tensor_data(t))[o] = (float)v;
    else
        ((double *)nx_tensor_data(t))[o] = v;
}

/* The self slot's attributes: the mean or sum of the row's non-pad attributes, or zero. */
static void fill_self_attr(const nx_ell *a, const nx_tensor *attr, nx_self_loop_fill fill,
                           nx_tensor *ao)
{
    const int64_t *s = nx_tensor_shape(attr);
    for (int64_t i = 0; i < s[0]; i++)
        for (int64_t c = 0; c < s[2]; c++) {
            double sum = 0;
            int64_t n = 0;
            for (int64_t p = 0; p < s[1]; p++) {
                attr_set(ao, i, p + 1, c, attr_at(attr, i, p, c));
                if (nx_sparse_get(a->values, i, p) == a->identity)
                    continue;
                sum += attr_at(attr, i, p, c);
                n++;
            }
            double v = fill == NX_SELF_LOOP_ZERO  ? 0.0
                       : fill == NX_SELF_LOOP_ADD ? sum
                                                  : (n ? sum / (double)n : 0.0);
            attr_set(ao, i, 0, c, v);
        }
}

nx_status nx_ell_add_self_loops(nx_ctx *ctx, const nx_ell *a, const nx_tensor *edge_attr,
                                nx_self_loop_fill fill, double self_value, nx_ell *out,
                                nx_tensor **attr_out)
{
    static const char *who = "nx_ell_add_self_loops";
    if (!out || (edge_attr && !attr_out))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %s is NULL", who,
                           out ? "attr_out (edge_attr given)" : "out");
    memset(out, 0, sizeof *out);
    if (attr_out)
        *attr_out = NULL;
    if ((int)fill < 0 || fill > NX_SELF_LOOP_ADD)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: fill %d; expected mean, zero or add", who,
                           (int)fill);
    nx_status st = nx_sparse_check_host_ell(ctx, who, a);
    if (st == NX_OK)
        st = check_attr(ctx, who, a, edge_attr);
    if (st != NX_OK)
        return st;
    const int64_t *s = nx_tensor_shape(a->values);
    if (s[0] != a->n_cols)
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "%s: the ELL is %lld x %lld; self loops need a "
                           "square matrix",
                           who, (long long)s[0], (long long)a->n_cols);
    st = new_ell(ctx, nx_tensor_dtype(a->values), nx_tensor_dtype(a->indices), s[0], s[1] + 1,
                 a->n_cols, a->identity, out);
    if (st != NX_OK)
        return st;
    for (int64_t i = 0; i < s[0]; i++) {
        nx_sparse_set(out->values, i, 0, self_value);
        nx_sparse_set_index(out->indices, i, 0, i);
        for (int64_t p = 0; p < s[1]; p++) {
            nx_sparse_set(out->values, i, p + 1, nx_sparse_get(a->values, i, p));
            nx_sparse_set_index(out->indices, i, p + 1, nx_sparse_get_index(a->indices, i, p));
        }
    }
    if (!edge_attr)
        return NX_OK;
    const int64_t *as = nx_tensor_shape(edge_attr);
    int64_t shp[3] = {as[0], as[1] + 1, as[2]};
    if ((st = nx_tensor_new(ctx, nx_tensor_dtype(edge_attr), 3, shp, attr_out)) != NX_OK) {
        nx_ell_free(out);
        return st;
    }
    fill_self_attr(a, edge_attr, fill, *attr_out);
    return NX_OK;
}
