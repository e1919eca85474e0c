/* Adjoint rules of the scans: each is a scan running the other way (a reverse scan, or a reverse
 * linear recurrence g_t = dy_t + c_t g_{t+1}), so the backward pass streams like the forward one.
 * A reverse scan is differentiated as the forward scan of the reversed line.
 *
 *   sum        dx = reverse cumulative sum of dy
 *   prod       dx_s = (x_0 ... x_{s-1}) g_s, g_s = dy_s + x_{s+1} g_{s+1}: no division, zeros exact
 *   max, min   the first winner of prefix t is its last strict record s (x_s beats y_{s-1});
 *              dx_s = [s is a record] g_s, g_s = dy_s + [s+1 is not a record] g_{s+1}
 *   logsumexp  dx_s = exp(x_s - y_s) g_s, g_s = dy_s + exp(y_s - y_{s+1}) g_{s+1}; the weights
 *              are at most 1 (y grows), and an all -inf prefix gives 0
 *   scan_linear  y_t = a_t y_{t-1} + b_t: g_t = dy_t + a_{t+1} g_{t+1}, db = g, da = g y_{t-1} */
#include <math.h>

#include "passes/autodiff.h"

static nx_node scan_forward_adjoint(nx_graph *g, nx_node x, nx_node y, nx_node dy, int axis,
                                    int64_t m)
{
    if (!x || !y || !dy) /* an earlier builder failed; the graph holds its error */
        return NX_NONE;
    nx_node zero = nx_ir_ad_scalar(g, x, 0.0), one = nx_ir_ad_scalar(g, x, 1.0);
    switch (m) {
    case NX_MONOID_SUM:
        return nx_scan(g, dy, axis, NX_MONOID_SUM, true);
    case NX_MONOID_PROD: {
        nx_node next_x = nx_ir_ad_shift(g, x, axis, true, 0.0);
        nx_node gs = nx_scan_linear(g, next_x, dy, axis, true);
        return nx_mul(g, nx_ir_ad_shift(g, y, axis, false, 1.0), gs);
    }
    case NX_MONOID_MAX:
    case NX_MONOID_MIN: {
        bool is_max = m == NX_MONOID_MAX;
        nx_node prev = nx_ir_ad_shift(g, y, axis, false, is_max ? -INFINITY : INFINITY);
        int64_t shape[NX_MAX_DIMS];
        nx_node_shape(g, x, shape);
        nx_node first = nx_eq(g, nx_ir_ad_iota(g, nx_node_ndim(g, x), shape, axis),
                              nx_scalar(g, NX_DTYPE_I64, 0.0));
        nx_node rec = nx_or(g, first, is_max ? nx_gt(g, x, prev) : nx_lt(g, x, prev));
        nx_node cont = nx_ir_ad_shift(g, nx_select(g, rec, zero, one), axis, true, 0.0);
        return nx_ir_ad_select0(g, rec, nx_scan_linear(g, cont, dy, axis, true));
    }
    case NX_MONOID_LOGSUMEXP: {
        nx_node ninf = nx_ir_ad_scalar(g, x, -INFINITY);
        nx_node next_y = nx_ir_ad_shift(g, y, axis, true, -INFINITY);
        nx_node safe_next = nx_select(g, nx_eq(g, next_y, ninf), zero, next_y);
        nx_node c = nx_select(g, nx_eq(g, next_y, ninf), zero,
                              nx_exp(g, nx_sub(g, y, safe_next)));
        nx_node gs = nx_scan_linear(g, c, dy, axis, true);
        nx_node safe_y = nx_select(g, nx_eq(g, y, ninf), zero, y);
        nx_node w = nx_select(g, nx_eq(g, y, ninf), zero, nx_exp(g, nx_sub(g, x, safe_y)));
        return nx_mul(g, w, gs);
    }
    default:
        return NX_NONE;
    }
}

nx_status nx_ir_vjp_scan(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    int axis = (int)v.a[0];
    int64_t m = v.a[1];
    if (m != NX_MONOID_SUM && m != NX_MONOID_PROD && m != NX_MONOID_MAX &&
        m != NX_MONOID_MIN && m != NX_MONOID_LOGSUMEXP)
        return nx_ir_ad_unsupported(g, "nx_graph_vjp: scan under monoid %s has no adjoint",
                                    nx_ir_monoid_name(m));
    nx_node x = v.ops[0];
    if (!v.a[2]) {
        dx[0] = scan_forward_adjoint(g, x, y, dy, axis, m);
        return NX_OK;
    }
    nx_node rx = nx_reverse(g, x, 1, &axis), ry = nx_reverse(g, y, 1, &axis);
    nx_node rd = nx_reverse(g, dy, 1, &axis);
    dx[0] = nx_reverse(g, scan_forward_adjoint(g, rx, ry, rd, axis, m), 1, &axis);
    return NX_OK;
}

nx_status nx_ir_vjp_scan_linear(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    int axis = (int)v.a[0];
    bool rev = v.a[1] != 0;
    int64_t shape[NX_MAX_DIMS];
    nx_node_shape(g, y, shape);
    nx_node a = nx_broadcast(g, v.ops[0], v.n.ndim, shape);
    /* The recurrence's next step reads a one place further along the scan's direction. */
    nx_node c = nx_ir_ad_shift(g, a, axis, !rev, 0.0);
    nx_node gs = nx_scan_linear(g, c, dy, axis, !rev);
    nx_node prev = nx_ir_ad_shift(g, y, axis, rev, 0.0);
    dx[0] = nx_ir_ad_unbroadcast(g, nx_mul(g, gs, prev), v.ops[0]);
    dx[1] = nx_ir_ad_unbroadcast(g, gs, v.ops[1]);
    return NX_OK;
}
