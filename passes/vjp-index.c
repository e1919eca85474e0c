/* Adjoint rules of gather and scatter.
 *
 *   gather        dx = scatter-add(0, clamp(idx), dy): gather clamps, so the clamped index is
 *                 where each element was read
 *   scatter SUM   dx = dy; du = gather(dy, idx) where idx is in range, 0 where it was dropped
 *   scatter MAX/MIN  routed to the winner of each target: x when it equals the result (x comes
 *                 first), else the first update in ascending flat order that equals it; the first
 *                 winner is found with a scatter-min of the candidates' flat positions */
#include <math.h>
#include <string.h>

#include "passes/autodiff.h"

static nx_node clamp_index(nx_graph *g, nx_node idx, int64_t ext)
{
    nx_dtype dt = nx_node_dtype(g, idx);
    nx_node lo = nx_scalar(g, dt, 0.0), hi = nx_scalar(g, dt, (double)(ext > 0 ? ext - 1 : 0));
    return nx_minimum(g, nx_maximum(g, idx, lo), hi);
}

nx_status nx_ir_vjp_gather(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    nx_node x = v.ops[0], idx = v.ops[1];
    int axis = (int)v.a[0];
    int64_t xs[NX_MAX_DIMS];
    nx_node_shape(g, x, xs);
    nx_node zero = nx_ir_ad_zeros(g, x);
    dx[0] = nx_scatter(g, zero, clamp_index(g, idx, xs[axis]), dy, axis, NX_MONOID_SUM);
    return NX_OK;
}

/* idx's in-range mask reshaped to broadcast against updates: [1]*axis + idx.shape + [1]*rest. */
static nx_node in_range(nx_graph *g, nx_node idx, int axis, int xndim, int64_t ext)
{
    nx_dtype dt = nx_node_dtype(g, idx);
    nx_node ok = nx_and(g, nx_ge(g, idx, nx_scalar(g, dt, 0.0)),
                        nx_lt(g, idx, nx_scalar(g, dt, (double)ext)));
    int ni = nx_node_ndim(g, idx), nd = 0;
    int64_t is[NX_MAX_DIMS], shape[NX_MAX_DIMS];
    nx_node_shape(g, idx, is);
    for (int i = 0; i < axis; i++)
        shape[nd++] = 1;
    for (int i = 0; i < ni; i++)
        shape[nd++] = is[i];
    for (int i = axis + 1; i < xndim; i++)
        shape[nd++] = 1;
    return nx_reshape(g, ok, nd, shape);
}

/* The flat C-order position of every element of u, as i64 of u's shape. */
static nx_node flat_positions(nx_graph *g, nx_node u)
{
    int nd = nx_node_ndim(g, u);
    int64_t us[NX_MAX_DIMS];
    nx_node_shape(g, u, us);
    nx_node coords[NX_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        coords[d] = nx_ir_ad_iota(g, nd, us, d);
    nx_node flat = nx_ir_ad_flat_index(g, nd, us, coords);
    return nd == 0 ? nx_broadcast(g, flat, 0, us) : flat;
}

static void scatter_minmax(nx_graph *g, const nx_ir_ad_view *v, nx_node y, nx_node dy, nx_node *dx)
{
    nx_node x = v->ops[0], idx = v->ops[1], u = v->ops[2];
    int axis = (int)v->a[0], xnd = nx_node_ndim(g, x);
    int64_t xs[NX_MAX_DIMS];
    nx_node_shape(g, x, xs);
    nx_node ok = in_range(g, idx, axis, xnd, xs[axis]);
    nx_node ic = clamp_index(g, idx, xs[axis]);
    nx_node x_wins = nx_eq(g, x, y);
    nx_node zero = nx_ir_ad_scalar(g, dy, 0.0);
    dx[0] = nx_select(g, x_wins, dy, zero);
    /* The first update (by flat position) equal to its target's result. */
    nx_node pos = flat_positions(g, u);
    double big = 9.0e18;
    nx_node cand = nx_select(g, nx_and(g, ok, nx_eq(g, u, nx_gather(g, y, ic, axis))), pos,
                             nx_scalar(g, NX_DTYPE_I64, big));
    nx_node none = nx_broadcast(g, nx_scalar(g, NX_DTYPE_I64, big), xnd, xs);
    nx_node first = nx_scatter(g, none, idx, cand, axis, NX_MONOID_MIN);
    nx_node won = nx_and(g, ok, nx_eq(g, nx_gather(g, first, ic, axis), pos));
    nx_node dy_left = nx_select(g, x_wins, zero, dy);
    dx[2] = nx_select(g, won, nx_gather(g, dy_left, ic, axis), zero);
}

nx_status nx_ir_vjp_scatter(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    if (v.a[1] != NX_MONOID_SUM) {
        scatter_minmax(g, &v, y, dy, dx);
        return NX_OK;
    }
    nx_node x = v.ops[0], idx = v.ops[1];
    int axis = (int)v.a[0];
    int64_t xs[NX_MAX_DIMS];
    nx_node_shape(g, x, xs);
    dx[0] = dy;
    nx_node got = nx_gather(g, dy, clamp_index(g, idx, xs[axis]), axis);
    nx_node ok = in_range(g, idx, axis, nx_node_ndim(g, x), xs[axis]);
    dx[2] = nx_select(g, ok, got, nx_ir_ad_scalar(g, dy, 0.0));
    return NX_OK;
}
