/* The bounded bilateral filter as a graph fragment, nx_bilateral_node: affinities
 * w_ij = m_ij exp(-d_M(f_i, f_j)^2 / 2) over each point's kmax neighbour slots, normalised per
 * row, then n_iters rounds of one gather of the values and one weighted reduction with those
 * fixed weights (a mean field). Everything is graph, so gradients with respect to values,
 * features and the metric come from autodiff; the neighbourhood (indices, mask) is data and
 * carries none. The ops bilateral_gaussian and susan_emulator build on it. */
#include "bilateral.h"
#include "ops/semiring/semiring.h"

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
