/* The one reduction of the metrics family (metrics.h): none | sum | mean, and the domain-mask
 * weighted mean sum(w x) / sum(w), as graph fragments, so that the reduction fuses with the
 * score it reduces and autodiff goes through it. */
#include <math.h>
#include <string.h>

#include "ops/metrics/metrics.h"

/* Every axis of x summed to a 0-d value; a 0-d x is its own sum. */
static nx_node sum_all(nx_graph *g, nx_node x)
{
    int nd = nx_node_ndim(g, x);
    if (nd == 0)
        return x;
    int axes[NX_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        axes[i] = i;
    return nx_reduce(g, x, nd, axes, NX_MONOID_SUM, false);
}

nx_node nx_metric_reduce(nx_graph *g, nx_node values, nx_node mask, nx_metric_reduction reduction)
{
    if (values == NX_NONE)
        return values;
    nx_dtype dt = nx_node_dtype(g, values);
    int nd = nx_node_ndim(g, values);
    int64_t shape[NX_MAX_DIMS] = {0};
    nx_node_shape(g, values, shape);
    nx_node w = NX_NONE;
    if (mask != NX_NONE) {
        w = nx_node_dtype(g, mask) == dt ? mask : nx_cast(g, mask, dt);
        /* The weights take the values' shape, so that sum(w) counts every element they weight. */
        w = nx_broadcast(g, w, nd, shape);
    }
    if (reduction == NX_METRIC_NONE)
        return w != NX_NONE ? nx_mul(g, values, w) : values;
    nx_node num = sum_all(g, w != NX_NONE ? nx_mul(g, values, w) : values);
    if (reduction == NX_METRIC_SUM)
        return num;
    nx_node den;
    if (w != NX_NONE) {
        den = sum_all(g, w);
    } else {
        int64_t n = 1;
        for (int i = 0; i < nd; i++)
            n *= shape[i];
        den = nx_scalar(g, dt, (double)n);
    }
    /* sum(w) = 0 (an empty mask, or no elements): the mean is 0, not 0/0. */
    nx_node zero = nx_scalar(g, dt, 0.0), one = nx_scalar(g, dt, 1.0);
    nx_node empty = nx_eq(g, den, zero);
    return nx_select(g, empty, zero, nx_div(g, num, nx_select(g, empty, one, den)));
}

nx_node nx_metric_mask_input(nx_graph *g, const nx_tensor *mask)
{
    if (!mask)
        return NX_NONE;
    nx_dtype dt = nx_tensor_dtype(mask);
    int nd = nx_tensor_ndim(mask);
    const int64_t *s = nx_tensor_shape(mask);
    if (nx_dtype_is_float(dt))
        return nx_parameter(g, "mask", dt, nd, s);
    nx_node m = nx_input(g, "mask", dt, nd, s);
    /* indicators: nonzero counts as 1 */
    return dt == NX_DTYPE_BOOL ? m : nx_ne(g, m, nx_scalar(g, dt, 0.0));
}

nx_status nx_metric_check_mask(const nx_op_args *c, const nx_tensor *mask, int ndim,
                               const int64_t *shape)
{
    if (!mask)
        return NX_OK;
    nx_dtype dt = nx_tensor_dtype(mask);
    if (dt != NX_DTYPE_BOOL && !nx_dtype_is_int(dt) && dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: mask is %s; expected bool, an integer type, f32 or f64",
                           c->who, nx_dtype_name(dt));
    int md = nx_tensor_ndim(mask);
    const int64_t *ms = nx_tensor_shape(mask);
    bool fits = md <= ndim;
    for (int i = 0; fits && i < md; i++) {
        int64_t m = ms[md - 1 - i], v = shape[ndim - 1 - i];
        fits = m == v || m == 1;
    }
    if (!fits)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: mask of rank %d does not broadcast to the values' shape (rank "
                           "%d); expected the values' shape or one broadcastable to it",
                           c->who, md, ndim);
    return NX_OK;
}

nx_status nx_metric_check_pair(const nx_op_args *c, int a, int b)
{
    const nx_tensor *x = c->in[a], *y = c->in[b];
    const char *na = c->info->inputs[a], *nb = c->info->inputs[b];
    nx_dtype dx = nx_tensor_dtype(x), dy = nx_tensor_dtype(y);
    if (dx != NX_DTYPE_F32 && dx != NX_DTYPE_F64)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: %s is %s; expected f32 or f64",
                           c->who, na, nx_dtype_name(dx));
    if (dy != dx)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: %s is %s but %s is %s; expected the same float dtype", c->who,
                           na, nx_dtype_name(dx), nb, nx_dtype_name(dy));
    int nd = nx_tensor_ndim(x);
    bool same = nd == nx_tensor_ndim(y) &&
                !memcmp(nx_tensor_shape(x), nx_tensor_shape(y), (size_t)nd * sizeof(int64_t));
    if (!same)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: %s and %s have different shapes (ranks %d and %d); expected "
                           "equal shapes",
                           c->who, na, nb, nd, nx_tensor_ndim(y));
    return NX_OK;
}

nx_node nx_metric_mean_axes(nx_graph *g, nx_node values, nx_node w, int naxes, const int *axes)
{
    if (values == NX_NONE)
        return values;
    nx_dtype dt = nx_node_dtype(g, values);
    int nd = nx_node_ndim(g, values);
    int64_t shape[NX_MAX_DIMS] = {0};
    nx_node_shape(g, values, shape);
    nx_node num, den;
    if (w != NX_NONE) {
        w = nx_broadcast(g, nx_node_dtype(g, w) == dt ? w : nx_cast(g, w, dt), nd, shape);
        num = nx_reduce(g, nx_mul(g, values, w), naxes, axes, NX_MONOID_SUM, false);
        den = nx_reduce(g, w, naxes, axes, NX_MONOID_SUM, false);
    } else {
        int64_t n = 1;
        for (int i = 0; i < naxes; i++)
            n *= shape[axes[i] < 0 ? axes[i] + nd : axes[i]];
        num = nx_reduce(g, values, naxes, axes, NX_MONOID_SUM, false);
        den = nx_scalar(g, dt, (double)n);
    }
    nx_node zero = nx_scalar(g, dt, 0.0), one = nx_scalar(g, dt, 1.0);
    nx_node empty = nx_eq(g, den, zero);
    return nx_select(g, empty, zero, nx_div(g, num, nx_select(g, empty, one, den)));
}

nx_status nx_metric_check_float(const nx_op_args *c, const nx_tensor *t, const char *name,
                                nx_dtype dt, int ndim)
{
    nx_dtype d = nx_tensor_dtype(t);
    if (d != NX_DTYPE_F32 && d != NX_DTYPE_F64)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: %s is %s; expected f32 or f64",
                           c->who, name, nx_dtype_name(d));
    if (dt != NX_DTYPE_COUNT && d != dt)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: %s is %s but %s is %s; expected the same float dtype", c->who,
                           name, nx_dtype_name(d), c->info->inputs[0], nx_dtype_name(dt));
    if (ndim >= 0 && nx_tensor_ndim(t) != ndim)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: %s has rank %d; expected rank %d",
                           c->who, name, nx_tensor_ndim(t), ndim);
    return NX_OK;
}

nx_status nx_metric_check_positive(const nx_op_args *c, const char *name, double v)
{
    if (!(v > 0) || !isfinite(v))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: %s is %g; expected a finite value > 0",
                           c->who, name, v);
    return NX_OK;
}
