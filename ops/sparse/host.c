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

static bool is_pad(const nx_ell *a, int64_t i, int64_t p)
{
    return nx_sparse_get(a->values, i, p) == a->identity;
}

/* Entries per column of a, pads dropped; the largest goes to *kmax. */
static nx_status column_counts(nx_ctx *ctx, const nx_ell *a, int64_t **counts, int64_t *kmax)
{
    const int64_t *s = nx_tensor_shape(a->values);
    size_t bytes = (size_t)(a->n_cols + 1) * sizeof(int64_t);
    int64_t *c = nx_rt_calloc(ctx, (size_t)a->n_cols + 1, sizeof(int64_t));
    if (!c)
        return nx_rt_nomem(ctx, "ELL transpose: column counts", bytes);
    *kmax = 0;
    for (int64_t i = 0; i < s[0]; i++)
        for (int64_t p = 0; p < s[1]; p++) {
            if (is_pad(a, i, p))
                continue;
            int64_t q = nx_sparse_get_index(a->indices, i, p);
            if (++c[q] > *kmax)
                *kmax = c[q];
        }
    *counts = c;
    return NX_OK;
}

nx_status nx_sparse_transpose(nx_ctx *ctx, const nx_ell *a, nx_ell *out)
{
    memset(out, 0, sizeof *out);
    int64_t *fill = NULL, kmax = 0;
    nx_status st = column_counts(ctx, a, &fill, &kmax);
    if (st != NX_OK)
        return st;
    size_t bytes = (size_t)(a->n_cols + 1) * sizeof(int64_t);
    nx_dtype idt = nx_tensor_dtype(a->indices);
    const int64_t *s = nx_tensor_shape(a->values);
    /* Row indices of A become column indices of A^T: i64 unless m fits in i32. */
    nx_dtype tdt = s[0] <= INT32_MAX ? idt : NX_DTYPE_I64;
    st = nx_sparse_new2(ctx, nx_tensor_dtype(a->values), a->n_cols, kmax, &out->values);
    if (st == NX_OK)
        st = nx_sparse_new2(ctx, tdt, a->n_cols, kmax, &out->indices);
    if (st != NX_OK) {
        nx_rt_free(ctx, fill, bytes);
        nx_ell_free(out);
        return st;
    }
    out->n_cols = s[0];
    out->identity = a->identity;
    for (int64_t q = 0; q < a->n_cols; q++) {
        fill[q] = 0;
        for (int64_t p = 0; p < kmax; p++)
            nx_sparse_set(out->values, q, p, a->identity);
    }
    for (int64_t i = 0; i < s[0]; i++)
        for (int64_t p = 0; p < s[1]; p++) {
            if (is_pad(a, i, p))
                continue;
            int64_t q = nx_sparse_get_index(a->indices, i, p);
            nx_sparse_set(out->values, q, fill[q], nx_sparse_get(a->values, i, p));
            nx_sparse_set_index(out->indices, q, fill[q], i);
            fill[q]++;
        }
    nx_rt_free(ctx, fill, bytes);
    return NX_OK;
}
