/* Host helpers of the ELL module: element access on 2-D tensors of any strides, and the transpose
 * of an ELL (the canonical gather formulation of A^T X). */
#include <string.h>

#include "ops/sparse/sparse.h"

nx_status nx_sparse_new2(nx_ctx *ctx, nx_dtype dtype, int64_t m, int64_t k, nx_tensor **out)
{
    int64_t s[2] = {m, k};
    return nx_tensor_new(ctx, dtype, 2, s, out);
}

static int64_t offset_of(const nx_tensor *t, int64_t i, int64_t j)
{
    const int64_t *st = nx_tensor_strides(t);
    return i * st[0] + j * st[1];
}

double nx_sparse_get(const nx_tensor *t, int64_t i, int64_t j)
{
    int64_t o = offset_of(t, i, j);
    switch (nx_tensor_dtype(t)) {
    case NX_DTYPE_F32:
        return ((const float *)nx_tensor_data(t))[o];
    case NX_DTYPE_F64:
        return ((const double *)nx_tensor_data(t))[o];
    case NX_DTYPE_I32:
        return ((const int32_t *)nx_tensor_data(t))[o];
    case NX_DTYPE_I64:
        return (double)((const int64_t *)nx_tensor_data(t))[o];
    case NX_DTYPE_BOOL:
        return ((const bool *)nx_tensor_data(t))[o];
    default:
        return 0.0;
    }
}

int64_t nx_sparse_get_index(const nx_tensor *t, int64_t i, int64_t j)
{
    int64_t o = offset_of(t, i, j);
    if (nx_tensor_dtype(t) == NX_DTYPE_I32)
        return ((const int32_t *)nx_tensor_data(t))[o];
    return ((const int64_t *)nx_tensor_data(t))[o];
}

void nx_sparse_set(nx_tensor *t, int64_t i, int64_t j, double v)
{
    int64_t o = offset_of(t, i, j);
    if (nx_tensor_dtype(t) == NX_DTYPE_F32)
        ((float *)nx_tensor_data(t))[o] = (float)v;
    else
        ((double *)nx_tensor_data(t))[o] = v;
}

void nx_sparse_set_index(nx_tensor *t, int64_t i, int64_t j, int64_t v)
{
    int64_t o = offset_of(t, i, j);
    if (nx_tensor_dtype(t) == NX_DTYPE_I32)
        ((int32_t *)nx_tensor_data(t))[o] = (int32_t)v;
    else
        ((int64_t *)nx_tensor_data(t))[o] = v;
}

/* Element o of a contiguous f32/f64 tensor. */
double nx_sparse_flat_get(const nx_tensor *t, int64_t o)
{
    if (nx_tensor_dtype(t) == NX_DTYPE_F32)
        return ((const float *)nx_tensor_data(t))[o];
    return ((const double *)nx_tensor_data(t))[o];
}

void nx_sparse_flat_set(nx_tensor *t, int64_t o, double v)
{
    if (nx_tensor_dtype(t) == NX_DTYPE_F32)
        ((float *)nx_tensor_data(t))[o] = (float)v;
    else
        ((double *)nx_tensor_data(t))[o] = v;
}

typedef struct transpose_job {
    const nx_ell *a;
    nx_tensor *v;  /* a's values, contiguous */
    int64_t m, k;  /* a's slots per batch */
    int64_t batch; /* batches of values */
    bool *keep;    /* [m * k]: the slot is not a pad in some batch */
    int64_t *fill; /* [n_cols + 1] */
} transpose_job;

/* Marks the kept slots and counts them per column; the largest count goes to *kmax. */
static void column_counts(transpose_job *j, int64_t *kmax)
{
    *kmax = 0;
    for (int64_t s = 0; s < j->m * j->k; s++) {
        for (int64_t b = 0; b < j->batch && !j->keep[s]; b++)
            j->keep[s] = nx_sparse_flat_get(j->v, b * j->m * j->k + s) != j->a->identity;
        if (!j->keep[s])
            continue;
        int64_t q = nx_sparse_get_index(j->a->indices, s / j->k, s % j->k);
        if (++j->fill[q] > *kmax)
            *kmax = j->fill[q];
    }
}

static nx_status new_transposed(nx_ctx *ctx, const transpose_job *j, int64_t kmax, nx_ell *out)
{
    const nx_tensor *v = j->a->values;
    int nd = nx_tensor_ndim(v);
    int64_t shape[NX_MAX_DIMS];
    memcpy(shape, nx_tensor_shape(v), (size_t)nd * sizeof *shape);
    shape[nd - 2] = j->a->n_cols;
    shape[nd - 1] = kmax;
    /* Row indices of A become column indices of A^T: i64 unless m fits in i32. */
    nx_dtype tdt = j->m <= INT32_MAX ? nx_tensor_dtype(j->a->indices) : NX_DTYPE_I64;
    nx_status st = nx_tensor_new(ctx, nx_tensor_dtype(v), nd, shape, &out->values);
    if (st == NX_OK)
        st = nx_sparse_new2(ctx, tdt, j->a->n_cols, kmax, &out->indices);
    out->n_cols = j->m;
    out->identity = 0.0;
    return st;
}

nx_status nx_sparse_transpose(nx_ctx *ctx, const nx_ell *a, nx_ell *out)
{
    memset(out, 0, sizeof *out);
    int nd = nx_tensor_ndim(a->values);
    transpose_job j = {
        .a = a, .m = nx_tensor_shape(a->values)[nd - 2], .k = nx_tensor_shape(a->values)[nd - 1]};
    j.batch = j.m * j.k != 0 ? nx_tensor_numel(a->values) / (j.m * j.k) : 0;
    size_t fbytes = (size_t)(a->n_cols + 1) * sizeof(int64_t), kbytes = (size_t)(j.m * j.k + 1);
    nx_status st = nx_tensor_contiguous(a->values, &j.v);
    if (st == NX_OK && !(j.fill = nx_rt_calloc(ctx, (size_t)a->n_cols + 1, sizeof(int64_t))))
        st = nx_rt_nomem(ctx, "ELL transpose: column counts", fbytes);
    if (st == NX_OK && !(j.keep = nx_rt_calloc(ctx, kbytes, 1)))
        st = nx_rt_nomem(ctx, "ELL transpose: kept slots", kbytes);
    int64_t kmax = 0;
    if (st == NX_OK) {
        column_counts(&j, &kmax);
        st = new_transposed(ctx, &j, kmax, out);
    }
    if (st == NX_OK) {
        memset(j.fill, 0, fbytes);
        int64_t mt = a->n_cols * kmax;
        for (int64_t s = 0; s < j.m * j.k; s++) {
            if (!j.keep[s])
                continue;
            int64_t i = s / j.k, q = nx_sparse_get_index(a->indices, i, s % j.k);
            int64_t t = q * kmax + j.fill[q]++;
            nx_sparse_set_index(out->indices, q, t - q * kmax, i);
            for (int64_t b = 0; b < j.batch; b++) {
                double x = nx_sparse_flat_get(j.v, b * j.m * j.k + s);
                nx_sparse_flat_set(out->values, b * mt + t, x == a->identity ? 0.0 : x);
            }
        }
    }
    if (st != NX_OK)
        nx_ell_free(out);
    nx_rt_free(ctx, j.fill, fbytes);
    nx_rt_free(ctx, j.keep, kbytes);
    nx_tensor_free(j.v);
    return st;
}
