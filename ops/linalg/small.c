/* The unrolled small-matrix tier shared by the linalg ops (linalg.h): entry extraction and
 * assembly, Cholesky, triangular substitution, and the operand checks. */
#include <math.h>
#include <string.h>

#include "ops/linalg/linalg.h"

static int batch_of(nx_graph *g, nx_node x, int64_t *shape)
{
    int nd = nx_node_ndim(g, x);
    nx_node_shape(g, x, shape);
    return nd - 2;
}

void nx_la_entries(nx_graph *g, nx_node x, nx_la_mat *m)
{
    int64_t shape[NX_MAX_DIMS], lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS];
    int nb = batch_of(g, x, shape);
    m->rows = (int)shape[nb];
    m->cols = (int)shape[nb + 1];
    memcpy(hi, shape, sizeof hi);
    for (int i = 0; i < m->rows; i++)
        for (int j = 0; j < m->cols; j++) {
            lo[nb] = i, hi[nb] = i + 1, lo[nb + 1] = j, hi[nb + 1] = j + 1;
            m->e[i * m->cols + j] = nx_slice(g, x, lo, hi, NULL);
        }
}

void nx_la_rows(nx_graph *g, nx_node b, int rows, nx_node *out)
{
    int64_t shape[NX_MAX_DIMS], lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS];
    int nb = batch_of(g, b, shape);
    memcpy(hi, shape, sizeof hi);
    for (int i = 0; i < rows; i++) {
        lo[nb] = i, hi[nb] = i + 1;
        out[i] = nx_slice(g, b, lo, hi, NULL);
    }
}

nx_node nx_la_stack_rows(nx_graph *g, const nx_node *rows, int n)
{
    return nx_concat(g, n, rows, nx_node_ndim(g, rows[0]) - 2);
}

nx_node nx_la_assemble(nx_graph *g, const nx_la_mat *m)
{
    nx_node rows[NX_LA_MAX_P];
    int nd = nx_node_ndim(g, m->e[0]);
    for (int i = 0; i < m->rows; i++)
        rows[i] = nx_concat(g, m->cols, m->e + i * m->cols, nd - 1);
    return nx_concat(g, m->rows, rows, nd - 2);
}

nx_node nx_la_unit(nx_graph *g, nx_node e, int ndim, const int64_t *shape)
{
    return nx_reshape(g, e, ndim, shape);
}

nx_node nx_la_poison(nx_graph *g, nx_node ok, nx_node x)
{
    return nx_select(g, ok, x, nx_scalar(g, nx_node_dtype(g, x), NAN));
}

static nx_node zero_like(nx_graph *g, nx_node e)
{
    int64_t shape[NX_MAX_DIMS];
    int nd = nx_node_ndim(g, e);
    nx_node_shape(g, e, shape);
    return nx_broadcast(g, nx_scalar(g, nx_node_dtype(g, e), 0), nd, shape);
}

void nx_la_cholesky(nx_graph *g, const nx_la_mat *a, double l2, nx_la_mat *l, nx_node *ok,
                    nx_node *info)
{
    int p = a->rows;
    nx_dtype dt = nx_node_dtype(g, a->e[0]);
    nx_node zero = zero_like(g, a->e[0]);
    nx_node szero = nx_scalar(g, dt, 0);
    nx_node inf = info ? nx_cast(g, zero, NX_DTYPE_I32) : NX_NONE;
    nx_node all = NX_NONE;
    l->rows = l->cols = p;
    for (int i = 0; i < p * p; i++)
        l->e[i] = zero;
    for (int j = 0; j < p; j++) {
        nx_node s = a->e[j * p + j];
        if (l2 != 0)
            s = nx_add(g, s, nx_scalar(g, dt, l2));
        for (int k = 0; k < j; k++)
            s = nx_sub(g, s, nx_mul(g, l->e[j * p + k], l->e[j * p + k]));
        nx_node okj = nx_gt(g, s, szero);
        all = all ? nx_and(g, all, okj) : okj;
        if (info) {
            nx_node first = nx_and(g, nx_eq(g, inf, nx_scalar(g, NX_DTYPE_I32, 0)),
                                   nx_not(g, okj));
            inf = nx_select(g, first, nx_scalar(g, NX_DTYPE_I32, j + 1), inf);
        }
        nx_node d = nx_sqrt(g, s);
        l->e[j * p + j] = d;
        for (int i = j + 1; i < p; i++) {
            nx_node t = a->e[i * p + j];
            for (int k = 0; k < j; k++)
                t = nx_sub(g, t, nx_mul(g, l->e[i * p + k], l->e[j * p + k]));
            l->e[i * p + j] = nx_div(g, t, d);
        }
    }
    *ok = all;
    if (info)
        *info = inf;
}

void nx_la_trisolve(nx_graph *g, const nx_la_mat *t, bool lower, bool trans, bool unit,
                    const nx_node *b, int n, nx_node *x, nx_node *ok)
{
    bool fwd = lower != trans;
    nx_node all = NX_NONE;
    nx_node szero = nx_scalar(g, nx_node_dtype(g, t->e[0]), 0);
    for (int s = 0; s < n; s++) {
        int i = fwd ? s : n - 1 - s;
        nx_node r = b[i];
        for (int q = 0; q < s; q++) {
            int j = fwd ? q : n - 1 - q;
            nx_node mij = trans ? t->e[j * t->cols + i] : t->e[i * t->cols + j];
            r = nx_sub(g, r, nx_mul(g, mij, x[j]));
        }
        if (!unit) {
            nx_node d = t->e[i * t->cols + i];
            nx_node okd = nx_ne(g, d, szero);
            all = all ? nx_and(g, all, okd) : okd;
            r = nx_div(g, r, d);
        }
        x[i] = r;
    }
    if (ok)
        *ok = all;
}

nx_status nx_la_check_square(const nx_op_args *c, int i, const char *name, int max_p)
{
    const nx_tensor *a = c->in[i];
    nx_dtype dt = nx_tensor_dtype(a);
    if (dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64)
        return nx_rt_error(c->ctx, NX_ERR_DTYPE, "%s: %s is %s; expected float32 or float64",
                           c->who, name, nx_dtype_name(dt));
    int nd = nx_tensor_ndim(a);
    const int64_t *s = nx_tensor_shape(a);
    if (nd < 2 || s[nd - 1] != s[nd - 2])
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: %s has %d dims%s; expected a batch of square matrices "
                           "(..., p, p)",
                           c->who, name, nd, nd >= 2 ? " and is not square" : "");
    if (s[nd - 1] < 1 || s[nd - 1] > max_p)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: %s is %lld x %lld; expected 1 <= p <= %d (the batched "
                           "small-matrix tier)",
                           c->who, name, (long long)s[nd - 1], (long long)s[nd - 1], max_p);
    return NX_OK;
}

nx_status nx_la_check_rhs(const nx_op_args *c, int ia, int ib, bool *vector)
{
    const nx_tensor *a = c->in[ia], *b = c->in[ib];
    if (nx_tensor_dtype(b) != nx_tensor_dtype(a))
        return nx_rt_error(c->ctx, NX_ERR_DTYPE, "%s: a is %s but b is %s; expected one dtype",
                           c->who, nx_dtype_name(nx_tensor_dtype(a)),
                           nx_dtype_name(nx_tensor_dtype(b)));
    int na = nx_tensor_ndim(a), nb = nx_tensor_ndim(b);
    const int64_t *sa = nx_tensor_shape(a), *sb = nx_tensor_shape(b);
    *vector = nb == na - 1;
    bool ok = *vector || nb == na;
    for (int d = 0; ok && d < na - 2; d++)
        ok = sa[d] == sb[d];
    ok = ok && sb[na - 2] == sa[na - 1];
    if (!ok)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: b's shape does not fit a's (%d dims, p = %lld); expected b of "
                           "(..., p) or (..., p, k) with a's batch dims (..., no broadcasting)",
                           c->who, na, (long long)sa[na - 1]);
    if (!*vector && sb[nb - 1] < 1)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: b has no columns; expected k >= 1",
                           c->who);
    return NX_OK;
}

nx_node nx_la_rhs_matrix(nx_graph *g, nx_node b, bool vector)
{
    if (!vector)
        return b;
    int64_t shape[NX_MAX_DIMS];
    int nd = nx_node_ndim(g, b);
    nx_node_shape(g, b, shape);
    shape[nd] = 1;
    return nx_reshape(g, b, nd + 1, shape);
}

nx_node nx_la_rhs_restore(nx_graph *g, nx_node x, bool vector)
{
    if (!vector)
        return x;
    int64_t shape[NX_MAX_DIMS];
    int nd = nx_node_ndim(g, x);
    nx_node_shape(g, x, shape);
    return nx_reshape(g, x, nd - 1, shape);
}

nx_node nx_la_assemble_extra(nx_graph *g, const nx_la_mat *m, const nx_node *extra, int nextra)
{
    nx_node rows[NX_LA_MAX_P + 1], row[NX_LA_MAX_P];
    int nd = nx_node_ndim(g, m->e[0]);
    nx_node zero = zero_like(g, m->e[0]);
    for (int i = 0; i < m->rows; i++)
        rows[i] = nx_concat(g, m->cols, m->e + i * m->cols, nd - 1);
    for (int j = 0; j < m->cols; j++)
        row[j] = j < nextra ? extra[j] : zero;
    rows[m->rows] = nx_concat(g, m->cols, row, nd - 1);
    return nx_concat(g, m->rows + 1, rows, nd - 2);
}

void nx_la_split_extra(nx_graph *g, nx_node packed, nx_node *mat, nx_node *extra)
{
    int64_t shape[NX_MAX_DIMS], lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS];
    int nb = batch_of(g, packed, shape);
    memcpy(hi, shape, sizeof hi);
    hi[nb] = shape[nb] - 1;
    *mat = nx_slice(g, packed, lo, hi, NULL);
    lo[nb] = shape[nb] - 1;
    hi[nb] = shape[nb];
    *extra = nx_slice(g, packed, lo, hi, NULL);
}
