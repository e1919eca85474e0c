/* Chamfer distance transforms (chessboard, taxicab) as separable per-axis contractions: along
 * each axis in turn, f[.., q] = min_p f[.., p] (x) |q - p| with (x) = max (chessboard: min over
 * sources of the largest per-axis offset) or + (taxicab: the sum of offsets). Each pass is a
 * broadcast against an n x n constant and a MIN fold, so autodiff differentiates it. O(n^2) per
 * line: the canonical driver, not a fast one. */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "ir/ir.h"
#include "morph.h"
#include "nitrix-graph.h"
#include "nitrix-ops.h"

/* metric NX_DISTANCE_METRIC_COUNT: squared Euclidean, cost (spacing * (q - p))^2 under +. */
static nx_node axis_pass(nx_graph *g, nx_node f, int axis, nx_distance_metric metric,
                         double spacing)
{
    int nd = nx_node_ndim(g, f);
    int64_t shape[NX_MAX_DIMS];
    if (!nx_node_shape(g, f, shape))
        return NX_NONE;
    int64_t n = shape[axis];
    int perm[NX_MAX_DIMS], inv[NX_MAX_DIMS], k = 0;
    for (int i = 0; i < nd; i++)
        if (i != axis)
            perm[k++] = i;
    perm[nd - 1] = axis;
    for (int i = 0; i < nd; i++)
        inv[perm[i]] = i;
    nx_dtype dt = nx_node_dtype(g, f);
    /* |q - p| from two iotas: [n, n], q along rows. */
    int64_t nn[2] = {n, n};
    nx_node cost = nx_abs(g, nx_sub(g, nx_iota(g, dt, 2, nn, 0), nx_iota(g, dt, 2, nn, 1)));
    if (metric == NX_DISTANCE_METRIC_COUNT) {
        cost = nx_mul(g, cost, nx_scalar(g, dt, spacing));
        cost = nx_mul(g, cost, cost);
    }
    nx_node t = nx_permute(g, f, perm);
    int64_t es[NX_MAX_DIMS];
    for (int i = 0; i < nd - 1; i++)
        es[i] = shape[perm[i]];
    es[nd - 1] = 1;
    es[nd] = n;
    t = nx_reshape(g, t, nd + 1, es); /* [..., 1, p] */
    nx_node v = metric == NX_DISTANCE_CHESSBOARD ? nx_maximum(g, t, cost) : nx_add(g, t, cost);
    int last = nd;
    v = nx_reduce(g, v, 1, &last, NX_MONOID_MIN, false); /* [..., q] */
    return nx_permute(g, v, inv);
}

nx_node nx_distance_node(nx_graph *g, nx_node field, nx_distance_metric metric)
{
    if (!g || !field || nx_graph_status(g) != NX_OK)
        return NX_NONE;
    if ((unsigned)metric >= NX_DISTANCE_METRIC_COUNT)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                 "nx_distance_node: metric %d; expected chessboard or taxicab",
                                 (int)metric);
    nx_dtype dt = nx_node_dtype(g, field);
    if (dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64)
        return nx_ir_graph_failf(g, NX_ERR_DTYPE,
                                 "nx_distance_node: field is %s; expected f32 or f64",
                                 nx_dtype_name(dt));
    int nd = nx_node_ndim(g, field);
    if (nd < 1 || nd + 1 > NX_MAX_DIMS)
        return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                 "nx_distance_node: field has %d dims; expected 1..%d", nd,
                                 NX_MAX_DIMS - 1);
    nx_node f = field;
    for (int a = 0; a < nd; a++)
        f = axis_pass(g, f, a, metric, 1.0);
    return f;
}

/* Exact Euclidean distance: the squared distance is separable, min over sources of
 * sum_i (s_i (x_i - z_i))^2, so one min-plus pass per axis against (s (q - p))^2 and a square
 * root give it exactly (no lower envelope needed; O(n^2) per line, the canonical driver of
 * distance_transform_edt, distance_transform_edt.c). */
nx_node nx_morph_edt_separable_node(nx_graph *g, nx_node field, const double *sampling)
{
    int nd = nx_node_ndim(g, field);
    nx_node f = field;
    for (int a = 0; a < nd; a++)
        f = axis_pass(g, f, a, NX_DISTANCE_METRIC_COUNT, sampling ? sampling[a] : 1.0);
    return nx_sqrt(g, f);
}
