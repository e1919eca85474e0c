/* Shared pieces of the linalg matrix utilities and kernels (matrix.h). */
#include <math.h>
#include <string.h>

#include "ir/ir.h"
#include "ops/linalg/matrix.h"

nx_node nx_la_take(nx_graph *g, nx_node x, int ntail, const int32_t *table, int64_t nt,
                   double fill, int nout, const int64_t *out_tail)
{
    int64_t shape[NX_MAX_DIMS], flat[NX_MAX_DIMS];
    int nd = nx_node_ndim(g, x), lead = nd - ntail;
    nx_node_shape(g, x, shape);
    int64_t len = 1;
    for (int d = lead; d < nd; d++)
        len *= shape[d];
    memcpy(flat, shape, sizeof flat);
    flat[lead] = len;
    nx_node xf = nx_reshape(g, x, lead + 1, flat);
    bool any_fill = false;
    for (int64_t i = 0; i < nt; i++)
        any_fill = any_fill || table[i] < 0;
    int32_t *idx = nx_rt_alloc(nx_graph_ctx(g), (size_t)(nt > 0 ? nt : 1) * sizeof *idx);
    if (!idx)
        return nx_ir_graph_failf(g, NX_ERR_NOMEM, "linalg: an index table of %lld entries",
                                 (long long)nt);
    for (int64_t i = 0; i < nt; i++)
        idx[i] = table[i] < 0 ? (int32_t)len : table[i];
    if (any_fill) {
        int64_t one[NX_MAX_DIMS];
        memcpy(one, flat, sizeof one);
        one[lead] = 1;
        nx_node pad = nx_broadcast(g, nx_scalar(g, nx_node_dtype(g, x), fill), lead + 1, one);
        nx_node parts[2] = {xf, pad};
        xf = nx_concat(g, 2, parts, lead);
    }
    nx_node it = nx_constant(g, NX_DTYPE_I32, 1, &nt, idx);
    nx_rt_free(nx_graph_ctx(g), idx, (size_t)(nt > 0 ? nt : 1) * sizeof *idx);
    nx_node y = nx_gather(g, xf, it, lead);
    int64_t out[NX_MAX_DIMS];
    memcpy(out, shape, sizeof out);
    for (int d = 0; d < nout; d++)
        out[lead + d] = out_tail[d];
    return nx_reshape(g, y, lead + nout, out);
}

nx_node nx_la_swap_last(nx_graph *g, nx_node x)
{
    int nd = nx_node_ndim(g, x), perm[NX_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        perm[d] = d;
    perm[nd - 2] = nd - 1;
    perm[nd - 1] = nd - 2;
    return nx_permute(g, x, perm);
}

nx_status nx_la_check_float(const nx_op_args *c, int i, const char *name, int min_ndim)
{
    const nx_tensor *t = c->in[i];
    nx_dtype dt = nx_tensor_dtype(t);
    if (dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64)
        return nx_rt_error(c->ctx, NX_ERR_DTYPE, "%s: %s is %s; expected float32 or float64",
                           c->who, name, nx_dtype_name(dt));
    if (nx_tensor_ndim(t) < min_ndim)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: %s has %d dims; expected at least %d",
                           c->who, name, nx_tensor_ndim(t), min_ndim);
    if (i > 0 && dt != nx_tensor_dtype(c->in[0]))
        return nx_rt_error(c->ctx, NX_ERR_DTYPE, "%s: %s is %s but %s is %s; expected one dtype",
                           c->who, name, nx_dtype_name(dt), c->info->inputs[0],
                           nx_dtype_name(nx_tensor_dtype(c->in[0])));
    return NX_OK;
}

int64_t nx_la_triu_count(int64_t rows, int64_t cols, int64_t offset)
{
    int64_t n = 0;
    for (int64_t i = 0; i < rows; i++) {
        int64_t j0 = i + offset < 0 ? 0 : i + offset;
        n += j0 < cols ? cols - j0 : 0;
    }
    return n;
}

nx_node nx_la_sym2vec(nx_graph *g, nx_node x, int64_t offset)
{
    int64_t shape[NX_MAX_DIMS];
    int nd = nx_node_ndim(g, x);
    nx_node_shape(g, x, shape);
    int64_t rows = shape[nd - 2], cols = shape[nd - 1];
    int64_t nt = nx_la_triu_count(rows, cols, offset), k = 0;
    int32_t *t = nx_rt_alloc(nx_graph_ctx(g), (size_t)(nt > 0 ? nt : 1) * sizeof *t);
    if (!t)
        return nx_ir_graph_failf(g, NX_ERR_NOMEM, "sym2vec: an index table of %lld entries",
                                 (long long)nt);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = i + offset < 0 ? 0 : i + offset; j < cols; j++)
            t[k++] = (int32_t)(i * cols + j);
    nx_node y = nx_la_take(g, x, 2, t, nt, 0, 1, &nt);
    nx_rt_free(nx_graph_ctx(g), t, (size_t)(nt > 0 ? nt : 1) * sizeof *t);
    return y;
}

nx_node nx_la_vec2sym(nx_graph *g, nx_node v, int64_t side, int64_t offset)
{
    int64_t n2 = side * side;
    int32_t *t = nx_rt_alloc(nx_graph_ctx(g), (size_t)(n2 > 0 ? n2 : 1) * sizeof *t);
    if (!t)
        return nx_ir_graph_failf(g, NX_ERR_NOMEM, "vec2sym: an index table of %lld entries",
                                 (long long)n2);
    /* k(i, j) for i <= j: the row-major rank of (i, j) among the upper triangle at offset */
    for (int64_t i = 0; i < side; i++)
        for (int64_t j = 0; j < side; j++) {
            int64_t a = i < j ? i : j, b = i < j ? j : i;
            if (b - a < offset) {
                t[i * side + j] = -1;
                continue;
            }
            int64_t before = nx_la_triu_count(a, side, offset);
            t[i * side + j] = (int32_t)(before + (b - (a + offset)));
        }
    int64_t tail[2] = {side, side};
    nx_node y = nx_la_take(g, v, 1, t, n2, 0, 2, tail);
    nx_rt_free(nx_graph_ctx(g), t, (size_t)(n2 > 0 ? n2 : 1) * sizeof *t);
    return y;
}

int64_t nx_la_vec2sym_side(int64_t n, int64_t offset)
{
    int64_t s = (int64_t)(0.5 * (sqrt(8.0 * (double)n + 1.0) + 1.0)) + (offset - 1);
    return s >= 0 && nx_la_triu_count(s, s, offset) == n ? s : -1;
}

nx_node nx_la_toeplitz(nx_graph *g, nx_node c, nx_node r, int64_t m, int64_t n, double fill)
{
    int64_t sc[NX_MAX_DIMS], sr[NX_MAX_DIMS];
    int nd = nx_node_ndim(g, c);
    nx_node_shape(g, c, sc);
    nx_node_shape(g, r, sr);
    int64_t mc = sc[nd - 1], nr = sr[nd - 1], nt = m * n;
    nx_node parts[2] = {c, r};
    nx_node cr = nx_concat(g, 2, parts, nd - 1);
    int32_t *t = nx_rt_alloc(nx_graph_ctx(g), (size_t)(nt > 0 ? nt : 1) * sizeof *t);
    if (!t)
        return nx_ir_graph_failf(g, NX_ERR_NOMEM, "toeplitz: an index table of %lld entries",
                                 (long long)nt);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            int64_t k = i >= j ? (i - j < mc ? i - j : -1) : (j - i < nr ? mc + j - i : -1);
            t[i * n + j] = (int32_t)k;
        }
    int64_t tail[2] = {m, n};
    nx_node y = nx_la_take(g, cr, 1, t, nt, fill, 2, tail);
    nx_rt_free(nx_graph_ctx(g), t, (size_t)(nt > 0 ? nt : 1) * sizeof *t);
    return y;
}

nx_status nx_la_toeplitz_check(const nx_op_args *c, bool batched, int64_t *m, int64_t *n)
{
    const nx_toeplitz_args *o = c->opts;
    const nx_tensor *cc = c->in[0], *r = c->in[1] ? c->in[1] : c->in[0];
    nx_status st = nx_la_check_float(c, 0, "c", 1);
    if (st == NX_OK && c->in[1])
        st = nx_la_check_float(c, 1, "r", 1);
    if (st != NX_OK)
        return st;
    int nd = nx_tensor_ndim(cc);
    if (!batched && (nd != 1 || nx_tensor_ndim(r) != 1))
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: c has %d dims and r %d; expected vectors (toeplitz batches)",
                           c->who, nd, nx_tensor_ndim(r));
    bool same = nx_tensor_ndim(r) == nd;
    for (int d = 0; same && d < nd - 1; d++)
        same = nx_tensor_shape(r)[d] == nx_tensor_shape(cc)[d];
    if (!same)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: c and r have different leading (batch) dims; expected equal",
                           c->who);
    if (o->nshape != 0 && o->nshape != 2)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: shape has %d values; expected 2",
                           c->who, o->nshape);
    *m = o->nshape == 2 ? o->shape[0] : nx_tensor_shape(cc)[nd - 1];
    *n = o->nshape == 2 ? o->shape[1] : nx_tensor_shape(r)[nd - 1];
    if (*m < 1 || *n < 1 || *m > INT32_MAX || *n > INT32_MAX || *m * *n > INT32_MAX ||
        !isfinite(o->fill_value))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: shape (%lld, %lld), fill_value %g; expected a positive shape "
                           "and a finite fill",
                           c->who, (long long)*m, (long long)*n, o->fill_value);
    return NX_OK;
}

nx_status nx_la_toeplitz_build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_toeplitz_args *o = c->opts;
    const nx_tensor *cc = c->in[0], *r = c->in[1];
    nx_dtype dt = nx_tensor_dtype(cc);
    nx_node cn = nx_parameter(g, "c", dt, nx_tensor_ndim(cc), nx_tensor_shape(cc));
    nx_node rn = r ? nx_parameter(g, "r", dt, nx_tensor_ndim(r), nx_tensor_shape(r)) : cn;
    int nd = nx_tensor_ndim(cc);
    int64_t m = o->nshape == 2 ? o->shape[0] : nx_tensor_shape(cc)[nd - 1];
    int64_t n = o->nshape == 2 ? o->shape[1] : nx_tensor_shape(r ? r : cc)[nd - 1];
    outs[0] = nx_la_toeplitz(g, cn, rn, m, n, o->fill_value);
    return nx_graph_status(g);
}
