/* Adjoint rules of the elementwise primitives, select and cast.
 *
 *   neg    dx = -dy                    abs    dx = dy sign(x)  (0 at x = 0: the subgradient 0)
 *   exp    dx = dy y                   log    dx = dy / x
 *   log1p  dx = dy / (1 + x)           expm1  dx = dy (y + 1)
 *   sqrt   dx = dy / (2 y)             rsqrt  dx = -dy y^3 / 2
 *   sin    dx = dy cos x               cos    dx = -dy sin x
 *   tanh   dx = dy (1 - y^2)           erf    dx = dy 2/sqrt(pi) exp(-x^2)
 *   add/sub  da = dy, db = +-dy        mul    da = dy b, db = dy a
 *   div    da = dy / b, db = -dy y / b
 *   pow    da = dy b a^(b-1) (0 where b = 0), db = dy y ln a (0 where a = 0)
 *   min/max  dy goes to a where a wins or ties (a is the first winner), else to b
 *   atan2  da = dy b / (a^2 + b^2), db = -dy a / (a^2 + b^2)
 *   mod    da = dy, db = -dy floor(a / b)
 *   select dcond none, da = select(c, dy, 0), db = select(c, 0, dy)
 *   cast   float to float: dx = cast(dy, x's dtype)
 * Binary cotangents are summed back over broadcast axes. */
#include <math.h>

#include "passes/autodiff.h"

static nx_node unary_rule(nx_graph *g, int op, nx_node x, nx_node y, nx_node dy)
{
    switch (op) {
    case NX_PRIM_NEG:
        return nx_neg(g, dy);
    case NX_PRIM_ABS:
        return nx_mul(g, dy, nx_sign(g, x));
    case NX_PRIM_EXP:
        return nx_mul(g, dy, y);
    case NX_PRIM_LOG:
        return nx_div(g, dy, x);
    case NX_PRIM_LOG1P:
        return nx_div(g, dy, nx_add(g, x, nx_ir_ad_scalar(g, x, 1.0)));
    case NX_PRIM_EXPM1:
        return nx_mul(g, dy, nx_add(g, y, nx_ir_ad_scalar(g, y, 1.0)));
    case NX_PRIM_SQRT:
        return nx_div(g, dy, nx_add(g, y, y));
    case NX_PRIM_RSQRT:
        return nx_mul(g, nx_mul(g, dy, nx_ir_ad_scalar(g, y, -0.5)),
                      nx_mul(g, y, nx_mul(g, y, y)));
    case NX_PRIM_SIN:
        return nx_mul(g, dy, nx_cos(g, x));
    case NX_PRIM_COS:
        return nx_neg(g, nx_mul(g, dy, nx_sin(g, x)));
    case NX_PRIM_TANH:
        return nx_mul(g, dy, nx_sub(g, nx_ir_ad_scalar(g, y, 1.0), nx_mul(g, y, y)));
    case NX_PRIM_ERF: {
        nx_node e = nx_exp(g, nx_neg(g, nx_mul(g, x, x)));
        return nx_mul(g, dy, nx_mul(g, e, nx_ir_ad_scalar(g, x, 2.0 / sqrt(M_PI))));
    }
    default:
        return NX_NONE;
    }
}

nx_status nx_ir_vjp_unary(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    dx[0] = unary_rule(g, v.n.op, v.ops[0], y, dy);
    return NX_OK;
}

/* dy routed to a where a wins (or ties, or is NaN), else to b. */
static void minmax_rule(nx_graph *g, bool is_max, nx_node a, nx_node b, nx_node dy, nx_node *d)
{
    nx_node b_wins = is_max ? nx_gt(g, b, a) : nx_lt(g, b, a);
    nx_node zero = nx_ir_ad_scalar(g, dy, 0.0);
    d[0] = nx_select(g, b_wins, zero, dy);
    d[1] = nx_select(g, b_wins, dy, zero);
}

/* pow's partials with the 0 * inf cases of a = 0 or b = 0 set to their limits. */
static void pow_rule(nx_graph *g, nx_node a, nx_node b, nx_node y, nx_node dy, nx_node *d)
{
    nx_node zero = nx_ir_ad_scalar(g, a, 0.0), one = nx_ir_ad_scalar(g, a, 1.0);
    nx_node da = nx_mul(g, b, nx_pow(g, a, nx_sub(g, b, one)));
    d[0] = nx_mul(g, dy, nx_select(g, nx_eq(g, b, zero), zero, da));
    nx_node a_safe = nx_select(g, nx_eq(g, a, zero), one, a);
    nx_node db = nx_mul(g, y, nx_log(g, a_safe));
    d[1] = nx_mul(g, dy, nx_select(g, nx_eq(g, a, zero), zero, db));
}

static void binary_rule(nx_graph *g, int op, nx_node a, nx_node b, nx_node y, nx_node dy,
                        nx_node *d)
{
    switch (op) {
    case NX_PRIM_ADD:
        d[0] = dy, d[1] = dy;
        break;
    case NX_PRIM_SUB:
        d[0] = dy, d[1] = nx_neg(g, dy);
        break;
    case NX_PRIM_MUL:
        d[0] = nx_mul(g, dy, b), d[1] = nx_mul(g, dy, a);
        break;
    case NX_PRIM_DIV:
        d[0] = nx_div(g, dy, b);
        d[1] = nx_neg(g, nx_div(g, nx_mul(g, dy, y), b));
        break;
    case NX_PRIM_POW:
        pow_rule(g, a, b, y, dy, d);
        break;
    case NX_PRIM_MIN:
    case NX_PRIM_MAX:
        minmax_rule(g, op == NX_PRIM_MAX, a, b, dy, d);
        break;
    case NX_PRIM_ATAN2: {
        nx_node r = nx_div(g, dy, nx_add(g, nx_mul(g, a, a), nx_mul(g, b, b)));
        d[0] = nx_mul(g, r, b), d[1] = nx_neg(g, nx_mul(g, r, a));
        break;
    }
    case NX_PRIM_MOD:
        d[0] = dy, d[1] = nx_neg(g, nx_mul(g, dy, nx_floor(g, nx_div(g, a, b))));
        break;
    default:
        break;
    }
}

nx_status nx_ir_vjp_binary(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    nx_node d[2] = {NX_NONE, NX_NONE};
    binary_rule(g, v.n.op, v.ops[0], v.ops[1], y, dy, d);
    dx[0] = nx_ir_ad_unbroadcast(g, d[0], v.ops[0]);
    dx[1] = nx_ir_ad_unbroadcast(g, d[1], v.ops[1]);
    return NX_OK;
}

nx_status nx_ir_vjp_select(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    nx_node zero = nx_ir_ad_scalar(g, dy, 0.0);
    dx[1] = nx_ir_ad_unbroadcast(g, nx_select(g, v.ops[0], dy, zero), v.ops[1]);
    dx[2] = nx_ir_ad_unbroadcast(g, nx_select(g, v.ops[0], zero, dy), v.ops[2]);
    return NX_OK;
}

nx_status nx_ir_vjp_cast(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    dx[0] = nx_cast(g, dy, nx_node_dtype(g, v.ops[0]));
    return NX_OK;
}
