/* ELL graph builders and the checks every ELL entry point runs first.
 *
 * The contraction is a gather of B's rows by the index matrix (the IR's GATHER, which the
 * backends fuse into the fold's loop) followed by the semiring's (x) and (+) over the slot axis:
 *   C[.., i, j] = (+)_p values[i, p] (x) B[.., indices[i, p], j]
 * so every algebra the dense contractions take (built-in or user) works unchanged, and autodiff of
 * the fragment gives the values' and B's gradients (GATHER's adjoint is a scatter-add). */
#include <math.h>
#include <string.h>

#include "ir/ir.h"
#include "ops/sparse/sparse.h"

void nx_ell_free(nx_ell *e)
{
    if (!e)
        return;
    nx_tensor_free(e->values);
    nx_tensor_free(e->indices);
    memset(e, 0, sizeof *e);
}

/* ---- checks ----------------------------------------------------------------------------------*/

static bool is_index_dtype(nx_dtype d)
{
    return d == NX_DTYPE_I32 || d == NX_DTYPE_I64;
}

static nx_status check_shapes(nx_ctx *ctx, const char *who, const nx_ell *e)
{
    if (!e)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: the ELL is NULL", who);
    if (!e->values || !e->indices)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: the ELL's %s tensor is NULL", who,
                           e->values ? "indices" : "values");
    nx_status st = nx_sparse_check_float(ctx, who, "the ELL's values", e->values);
    if (st != NX_OK)
        return st;
    nx_dtype id = nx_tensor_dtype(e->indices);
    if (!is_index_dtype(id))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: the ELL's indices are %s; expected i32 or i64", who,
                           nx_dtype_name(id));
    int nv = nx_tensor_ndim(e->values);
    const int64_t *vs = nx_tensor_shape(e->values), *is = nx_tensor_shape(e->indices);
    if (nv < 2 || nx_tensor_ndim(e->indices) != 2 || vs[nv - 2] != is[0] || vs[nv - 1] != is[1]) {
        char a[96], b[96];
        nx_shape_str(a, sizeof a, nv, vs);
        nx_shape_str(b, sizeof b, nx_tensor_ndim(e->indices), is);
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "%s: the ELL's values are %s and indices %s; expected values "
                           "[..., m, k_max] and indices [m, k_max]",
                           who, a, b);
    }
    if (e->n_cols < 0)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: the ELL has n_cols %lld; expected >= 0",
                           who, (long long)e->n_cols);
    return NX_OK;
}

static int64_t index_at(const nx_tensor *t, int64_t i, int64_t p)
{
    const int64_t *st = nx_tensor_strides(t);
    int64_t off = i * st[0] + p * st[1];
    if (nx_tensor_dtype(t) == NX_DTYPE_I32)
        return ((const int32_t *)nx_tensor_data(t))[off];
    return ((const int64_t *)nx_tensor_data(t))[off];
}

/* Whether every index of a contiguous tensor is in [0, n_cols): a branch-free pass the compiler
 * vectorises, so the check of every call costs a read of the indices at memory speed. */
static bool all_in_range(const nx_tensor *idx, int64_t n_cols)
{
    int64_t n = nx_tensor_numel(idx);
    uint64_t lim = (uint64_t)n_cols;
    bool bad = false;
    if (nx_tensor_dtype(idx) == NX_DTYPE_I32) {
        const int32_t *q = nx_tensor_data(idx);
        for (int64_t i = 0; i < n; i++)
            bad |= (uint64_t)(int64_t)q[i] >= lim; /* negatives wrap above any limit */
    } else {
        const int64_t *q = nx_tensor_data(idx);
        for (int64_t i = 0; i < n; i++)
            bad |= (uint64_t)q[i] >= lim;
    }
    return !bad;
}

static nx_status check_host_indices(nx_ctx *ctx, const char *who, const nx_tensor *idx,
                                    int64_t n_cols)
{
    if (nx_tensor_is_contiguous(idx) && all_in_range(idx, n_cols))
        return NX_OK;
    const int64_t *s = nx_tensor_shape(idx);
    for (int64_t i = 0; i < s[0]; i++)
        for (int64_t p = 0; p < s[1]; p++) {
            int64_t q = index_at(idx, i, p);
            if (q < 0 || q >= n_cols)
                return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                                   "%s: index %lld at row %lld, slot %lld is %s; expected "
                                   "0 <= index < n_cols = %lld",
                                   who, (long long)q, (long long)i, (long long)p,
                                   q < 0 ? "negative" : "out of range", (long long)n_cols);
        }
    return NX_OK;
}

nx_status nx_sparse_index_error(nx_ctx *ctx, const char *who, const nx_tensor *idx, int64_t n_cols)
{
    nx_tensor *host = NULL;
    nx_status st = NX_OK;
    if (nx_tensor_device(idx) != NX_DEVICE_HOST)
        st = nx_tensor_to_device(idx, NX_DEVICE_HOST, &host);
    if (st == NX_OK)
        st = check_host_indices(ctx, who, host ? host : idx, n_cols);
    nx_tensor_free(host);
    if (st != NX_OK)
        return st;
    return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                       "%s: the device found an index outside [0, n_cols = %lld) but the indices "
                       "read back afterwards hold none: they changed while the call ran; expected "
                       "indices left unchanged during a call",
                       who, (long long)n_cols);
}

/* Device indices are checked on the device; only when one is out of range do they come to the
 * host, once, so the message can name its row and slot. */
static nx_status check_device_indices(nx_ctx *ctx, const char *who, const nx_tensor *idx,
                                      int64_t n_cols)
{
    bool ok = true;
    nx_status st = nx_sparse_device_indices_ok(ctx, idx, n_cols, &ok);
    if (st != NX_OK || ok)
        return st;
    return nx_sparse_index_error(ctx, who, idx, n_cols);
}

nx_status nx_sparse_check_ell_shapes(nx_ctx *ctx, const char *who, const nx_ell *e)
{
    return check_shapes(ctx, who, e);
}

nx_status nx_ell_check(nx_ctx *ctx, const char *who, const nx_ell *e)
{
    if (!who)
        who = "nx_ell_check";
    nx_status st = check_shapes(ctx, who, e);
    if (st != NX_OK)
        return st;
    if (nx_tensor_device(e->indices) != NX_DEVICE_HOST)
        return check_device_indices(ctx, who, e->indices, e->n_cols);
    return check_host_indices(ctx, who, e->indices, e->n_cols);
}

nx_status nx_sparse_check_host_ell(nx_ctx *ctx, const char *who, const nx_ell *e)
{
    nx_status st = check_shapes(ctx, who, e);
    if (st == NX_OK)
        st = nx_sparse_check_host(ctx, who, "the ELL's values", e->values);
    if (st == NX_OK)
        st = nx_sparse_check_host(ctx, who, "the ELL's indices", e->indices);
    if (st == NX_OK && nx_tensor_ndim(e->values) != 2)
        st = nx_rt_error(ctx, NX_ERR_SHAPE,
                         "%s: the ELL's values have %d dims; this function takes one matrix, "
                         "values [m, k_max]",
                         who, nx_tensor_ndim(e->values));
    return st == NX_OK ? check_host_indices(ctx, who, e->indices, e->n_cols) : st;
}

/* ---- graph builders --------------------------------------------------------------------------*/

/* Shared operand checks: values [..., m, k] float, indices [m, k] integer, x of values' dtype
 * with at least 2 dims. Records the error in g and returns false. */
static bool check_nodes(nx_graph *g, const char *who, nx_node values, nx_node indices, nx_node x)
{
    int64_t vs[NX_MAX_DIMS], is[NX_MAX_DIMS];
    nx_node_shape(g, values, vs);
    nx_node_shape(g, indices, is);
    nx_dtype vd = nx_node_dtype(g, values), id = nx_node_dtype(g, indices);
    if (vd != NX_DTYPE_F32 && vd != NX_DTYPE_F64) {
        nx_ir_graph_failf(g, NX_ERR_DTYPE, "%s: values are %s; expected f32 or f64", who,
                          nx_dtype_name(vd));
        return false;
    }
    if (!is_index_dtype(id)) {
        nx_ir_graph_failf(g, NX_ERR_INVALID_ARG, "%s: indices are %s; expected i32 or i64", who,
                          nx_dtype_name(id));
        return false;
    }
    int nv = nx_node_ndim(g, values);
    if (nv < 2 || nx_node_ndim(g, indices) != 2 || vs[nv - 2] != is[0] || vs[nv - 1] != is[1]) {
        nx_ir_graph_failf(g, NX_ERR_SHAPE,
                          "%s: values must be [..., m, k_max] and indices [m, k_max]", who);
        return false;
    }
    if (nx_node_dtype(g, x) != vd) {
        nx_ir_graph_failf(g, NX_ERR_DTYPE, "%s: the dense operand is %s but values are %s", who,
                          nx_dtype_name(nx_node_dtype(g, x)), nx_dtype_name(vd));
        return false;
    }
    if (nx_node_ndim(g, x) < 2) {
        nx_ir_graph_failf(g, NX_ERR_SHAPE,
                          "%s: the dense operand has %d dims; expected [..., n, c]", who,
                          nx_node_ndim(g, x));
        return false;
    }
    return true;
}

/* values [..., m, k] as [..., m, k, 1], to broadcast over the columns. */
static nx_node values_column(nx_graph *g, nx_node values)
{
    int64_t s[NX_MAX_DIMS + 1];
    nx_node_shape(g, values, s);
    int nd = nx_node_ndim(g, values);
    if (nd >= NX_MAX_DIMS)
        return nx_ir_graph_failf(g, NX_ERR_SHAPE, "ELL: values have %d dims; at most %d", nd,
                                 NX_MAX_DIMS - 1);
    s[nd] = 1;
    return nx_reshape(g, values, nd + 1, s);
}

nx_node nx_ell_matmul_node(nx_graph *g, const nx_semiring *sr, nx_node values, nx_node indices,
                           nx_node b)
{
    static const char *who = "nx_ell_matmul";
    if (!g || !values || !indices || !b)
        return NX_NONE;
    if (!sr)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG, "%s: semiring is NULL", who);
    if (!check_nodes(g, who, values, indices, b))
        return NX_NONE;
    int nb = nx_node_ndim(g, b);
    nx_node rows = nx_gather(g, b, indices, nb - 2); /* [.., m, k, c] */
    nx_node t = nx_semiring_times(g, sr, values_column(g, values), rows);
    int axis = -2;
    return nx_semiring_reduce(g, sr, t, 1, &axis);
}

nx_node nx_ell_rmatvec_node(nx_graph *g, nx_node values, nx_node indices, nx_node x, int64_t n_cols)
{
    static const char *who = "nx_ell_rmatvec";
    if (!g || !values || !indices || !x)
        return NX_NONE;
    if (!check_nodes(g, who, values, indices, x))
        return NX_NONE;
    int64_t vs[NX_MAX_DIMS], xs[NX_MAX_DIMS + 1];
    nx_node_shape(g, values, vs);
    int nd = nx_node_ndim(g, x), nv = nx_node_ndim(g, values);
    int64_t m = vs[nv - 2];
    nx_node_shape(g, x, xs);
    if (xs[nd - 2] != m)
        return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                 "%s: X has %lld rows but the ELL has %lld (m differs)", who,
                                 (long long)xs[nd - 2], (long long)m);
    if (n_cols < 0)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG, "%s: n_cols %lld; expected >= 0", who,
                                 (long long)n_cols);
    if (nd >= NX_MAX_DIMS)
        return nx_ir_graph_failf(g, NX_ERR_SHAPE, "%s: X has %d dims; at most %d", who, nd,
                                 NX_MAX_DIMS - 1);
    xs[nd] = xs[nd - 1];
    xs[nd - 1] = 1; /* [.., m, 1, c] */
    nx_node xe = nx_reshape(g, x, nd + 1, xs);
    nx_node upd = nx_mul(g, values_column(g, values), xe); /* [B.., m, k, c], B broadcast */
    if (nx_graph_status(g) != NX_OK)
        return NX_NONE;
    int nu = nx_node_ndim(g, upd);
    int64_t os[NX_MAX_DIMS];
    nx_node_shape(g, upd, os);
    os[nu - 3] = n_cols;
    os[nu - 2] = os[nu - 1]; /* [B.., n_cols, c] */
    nx_node zero = nx_broadcast(g, nx_scalar(g, nx_node_dtype(g, x), 0.0), nu - 1, os);
    return nx_scatter(g, zero, indices, upd, nu - 3, NX_MONOID_SUM);
}

nx_node nx_ell_row_softmax_node(nx_graph *g, nx_node scores, nx_node pad)
{
    if (!g || !scores || !pad)
        return NX_NONE;
    nx_dtype dt = nx_node_dtype(g, scores);
    if (dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64)
        return nx_ir_graph_failf(g, NX_ERR_DTYPE,
                                 "nx_ell_row_softmax: scores are %s; expected "
                                 "f32 or f64",
                                 nx_dtype_name(dt));
    if (nx_node_dtype(g, pad) != NX_DTYPE_BOOL)
        return nx_ir_graph_failf(g, NX_ERR_DTYPE, "nx_ell_row_softmax: pad is %s; expected bool",
                                 nx_dtype_name(nx_node_dtype(g, pad)));
    int axis = -1;
    nx_node ninf = nx_scalar(g, dt, -INFINITY), zero = nx_scalar(g, dt, 0.0);
    nx_node mx = nx_reduce(g, nx_select(g, pad, ninf, scores), 1, &axis, NX_MONOID_MAX, true);
    /* An all-pad row has max -inf: shift by 0 there. Pads are shifted to exp(0) before the
     * select so no overflow's inf meets a zero cotangent. */
    nx_node shift = nx_select(g, nx_eq(g, mx, ninf), zero, mx);
    nx_node z = nx_select(g, pad, shift, scores);
    nx_node e = nx_select(g, pad, zero, nx_exp(g, nx_sub(g, z, shift)));
    nx_node s = nx_reduce(g, e, 1, &axis, NX_MONOID_SUM, true);
    nx_node one = nx_scalar(g, dt, 1.0);
    return nx_div(g, e, nx_select(g, nx_eq(g, s, zero), one, s));
}
