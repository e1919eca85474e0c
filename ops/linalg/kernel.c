/* The linalg kernels (kernel.h): the JAX version's formulas, as batched matmuls and elementwise
 * IR (both backends compile them; autodiff gives the gradients of X0, X1 and theta). */
#include <math.h>
#include <string.h>

#include "ops/linalg/kernel.h"

static bool theta_is_matrix(const nx_tensor *t)
{
    int nd = nx_tensor_ndim(t);
    return nd >= 2 && nx_tensor_shape(t)[nd - 1] == nx_tensor_shape(t)[nd - 2];
}

static nx_status check_theta(const nx_op_args *c, int i, int64_t d)
{
    const nx_tensor *t = c->in[i];
    if (!t)
        return NX_OK;
    nx_status st = nx_la_check_float(c, i, "theta", 1);
    if (st != NX_OK)
        return st;
    int nd = nx_tensor_ndim(t);
    if (nx_tensor_shape(t)[nd - 1] != d)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: theta's last axis has %lld; expected d = %lld (a vector (..., d) "
                           "or a matrix (..., d, d))",
                           c->who, (long long)nx_tensor_shape(t)[nd - 1], (long long)d);
    return NX_OK;
}

nx_status nx_la_kernel_check(const nx_op_args *c)
{
    const nx_la_kernel_args *o = c->opts;
    nx_status st = nx_la_check_float(c, 0, "X0", 2);
    if (st == NX_OK && c->in[1])
        st = nx_la_check_float(c, 1, "X1", 2);
    if (st != NX_OK)
        return st;
    const nx_tensor *x0 = c->in[0], *x1 = c->in[1] ? c->in[1] : c->in[0];
    int64_t d = nx_tensor_shape(x0)[nx_tensor_ndim(x0) - 1];
    if (nx_tensor_shape(x1)[nx_tensor_ndim(x1) - 1] != d)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: X0 has %lld features and X1 %lld; expected equal (rows are "
                           "samples, the last axis features)",
                           c->who, (long long)d,
                           (long long)nx_tensor_shape(x1)[nx_tensor_ndim(x1) - 1]);
    if (d < 1)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: X0 has no features; expected d >= 1",
                           c->who);
    if (!isfinite(o->gamma) || !isfinite(o->sigma) || !isfinite(o->r) || o->order < 0)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: gamma %g, sigma %g, r %g, order %lld; expected finite values "
                           "and order >= 0",
                           c->who, o->gamma, o->sigma, o->r, (long long)o->order);
    return check_theta(c, 2, d);
}

nx_status nx_la_norm_check(const nx_op_args *c)
{
    nx_status st = nx_la_check_float(c, 0, "X", 2);
    if (st != NX_OK)
        return st;
    return check_theta(c, 1, nx_tensor_shape(c->in[0])[nx_tensor_ndim(c->in[0]) - 1]);
}

static nx_node input(nx_graph *g, const char *name, const nx_tensor *t)
{
    return t ? nx_parameter(g, name, nx_tensor_dtype(t), nx_tensor_ndim(t), nx_tensor_shape(t))
             : NX_NONE;
}

/* theta (..., d) as (..., 1, d), to scale the rows of X. */
static nx_node theta_rows(nx_graph *g, nx_node th)
{
    int64_t shape[NX_MAX_DIMS];
    int nd = nx_node_ndim(g, th);
    nx_node_shape(g, th, shape);
    shape[nd] = shape[nd - 1];
    shape[nd - 1] = 1;
    return nx_reshape(g, th, nd + 1, shape);
}

/* X0 theta X1^T. */
static nx_node linear(nx_graph *g, nx_node x0, nx_node x1, nx_node th, bool matrix)
{
    nx_node x1t = nx_la_swap_last(g, x1);
    if (!th)
        return nx_matmul(g, x0, x1t);
    if (!matrix)
        return nx_matmul(g, nx_mul(g, x0, theta_rows(g, th)), x1t);
    return nx_matmul(g, nx_matmul(g, x0, th), x1t);
}

/* x^T theta x per row, keepdims (..., n, 1). */
static nx_node row_norm_sq(nx_graph *g, nx_node x, nx_node th, bool matrix)
{
    int axis = nx_node_ndim(g, x) - 1;
    nx_node w = !th ? x : !matrix ? nx_mul(g, x, theta_rows(g, th)) : nx_matmul(g, x, th);
    return nx_reduce(g, nx_mul(g, x, w), 1, &axis, NX_MONOID_SUM, true);
}

static nx_node distance(nx_graph *g, nx_node x0, nx_node x1, nx_node th, bool matrix)
{
    nx_node cross = linear(g, x0, x1, th, matrix);
    nx_node a = row_norm_sq(g, x0, th, matrix);
    nx_node b = nx_la_swap_last(g, row_norm_sq(g, x1, th, matrix));
    nx_dtype dt = nx_node_dtype(g, x0);
    nx_node d = nx_sub(g, nx_add(g, a, b), nx_mul(g, nx_scalar(g, dt, 2), cross));
    return nx_maximum(g, d, nx_scalar(g, dt, 0));
}

static nx_node normalise(nx_graph *g, nx_node x, nx_node th, bool matrix, bool squared)
{
    nx_dtype dt = nx_node_dtype(g, x);
    double eps = dt == NX_DTYPE_F32 ? 1.1920928955078125e-07 : 2.220446049250313e-16;
    nx_node n2 = row_norm_sq(g, x, th, matrix);
    nx_node den = squared ? n2 : nx_sqrt(g, n2);
    return nx_div(g, x, nx_add(g, den, nx_scalar(g, dt, eps)));
}

static nx_node power(nx_graph *g, nx_node x, int64_t order)
{
    nx_node y = NX_NONE, sq = x;
    if (order == 0)
        return nx_add(g, nx_mul(g, x, nx_scalar(g, nx_node_dtype(g, x), 0)),
                      nx_scalar(g, nx_node_dtype(g, x), 1));
    for (int64_t k = order; k > 0; k >>= 1) {
        if (k & 1)
            y = y ? nx_mul(g, y, sq) : sq;
        if (k > 1)
            sq = nx_mul(g, sq, sq);
    }
    return y;
}

nx_status nx_la_kernel_build(nx_graph *g, const nx_op_args *c, nx_la_kernel_kind kind,
                             nx_node *outs)
{
    const nx_la_kernel_args *o = c->opts;
    nx_node x0 = input(g, "X0", c->in[0]);
    nx_node x1 = c->in[1] ? input(g, "X1", c->in[1]) : x0;
    nx_node th = input(g, "theta", c->in[2]);
    bool matrix = c->in[2] && theta_is_matrix(c->in[2]);
    nx_dtype dt = nx_tensor_dtype(c->in[0]);
    int64_t d = nx_tensor_shape(c->in[0])[nx_tensor_ndim(c->in[0]) - 1];
    double gamma = o->gamma != 0 ? o->gamma : 1.0 / (double)d;
    if (kind == NX_LA_GAUSSIAN)
        gamma = o->sigma != 0 ? 1.0 / (2.0 * o->sigma * o->sigma) : 1.0 / (double)d;
    nx_node y = NX_NONE;
    switch (kind) {
    case NX_LA_LINEAR:
        y = linear(g, x0, x1, th, matrix);
        break;
    case NX_LA_DISTANCE:
        y = distance(g, x0, x1, th, matrix);
        break;
    case NX_LA_RBF:
    case NX_LA_GAUSSIAN:
        y = nx_exp(g, nx_mul(g, nx_scalar(g, dt, -gamma), distance(g, x0, x1, th, matrix)));
        break;
    case NX_LA_POLYNOMIAL:
        y = power(g, nx_add(g, nx_mul(g, nx_scalar(g, dt, gamma), linear(g, x0, x1, th, matrix)),
                            nx_scalar(g, dt, o->r)),
                  o->order);
        break;
    case NX_LA_SIGMOID:
        y = nx_tanh(g, nx_add(g, nx_mul(g, nx_scalar(g, dt, gamma), linear(g, x0, x1, th, matrix)),
                              nx_scalar(g, dt, o->r)));
        break;
    case NX_LA_COSINE: {
        nx_node n0 = normalise(g, x0, th, matrix, false);
        nx_node n1 = c->in[1] ? normalise(g, x1, th, matrix, false) : n0;
        y = linear(g, n0, n1, th, matrix);
        break;
    }
    }
    outs[0] = y;
    return nx_graph_status(g);
}

nx_status nx_la_norm_build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_la_kernel_args *o = c->opts;
    nx_node x = input(g, "X", c->in[0]);
    nx_node th = input(g, "theta", c->in[1]);
    outs[0] = normalise(g, x, th, c->in[1] && theta_is_matrix(c->in[1]), o->squared);
    return nx_graph_status(g);
}
