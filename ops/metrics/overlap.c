/* The soft-overlap sums shared by dice and jaccard (overlap.h): over the op's axes,
 *   I = sum(p t),  M = sum(p) + sum(t),
 * as one graph fragment, so that the coefficient, the family's reduction and autodiff fuse. */
#include <math.h>

#include "ops/metrics/overlap.h"

const nx_op_opt nx_overlap_schema[3] = {
    {"axis", NX_OPT_INTS, "(all axes)", NULL, NX_MAX_DIMS,
     "the axes one overlap region spans (summed); negative counts from the end; not given: "
     "every axis (one coefficient)"},
    {"smooth", NX_OPT_FLOAT, "1e-7", "0:", 1,
     "added to numerator and denominator (an empty pair scores 1; 0 gives NaN there)"},
    NX_METRIC_REDUCTION_OPT,
};

const nx_op_field nx_overlap_fields[3] = {
    {offsetof(nx_overlap_args, axis), offsetof(nx_overlap_args, naxis),
     sizeof(int64_t) * NX_MAX_DIMS},
    {offsetof(nx_overlap_args, smooth), NX_OP_NO_FIELD, sizeof(double)},
    {offsetof(nx_overlap_args, reduction), NX_OP_NO_FIELD, sizeof(int)},
};

/* The closed form against float64 NumPy: sums of up to a few thousand terms. */
const nx_op_tol nx_overlap_tols[2] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-14},
};

/* The axes to sum (every axis when none are given), as ascending non-negative ints. */
static nx_status overlap_axes(const nx_op_args *c, int *axes, int *naxes)
{
    const nx_overlap_args *o = c->opts;
    int nd = nx_tensor_ndim(c->in[0]);
    bool seen[NX_MAX_DIMS] = {false};
    if (o->naxis < 0 || o->naxis > NX_MAX_DIMS)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: %d axes given; expected 0..%d", c->who,
                           o->naxis, nd);
    for (int i = 0; i < o->naxis; i++) {
        int64_t a = o->axis[i];
        if (a < -nd || a >= nd)
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: axis %lld is out of range for pred of rank %d; expected "
                               "-%d..%d",
                               c->who, (long long)a, nd, nd, nd - 1);
        int k = (int)(a < 0 ? a + nd : a);
        if (seen[k])
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: axis %d is given twice; expected distinct axes", c->who, k);
        seen[k] = true;
    }
    *naxes = 0;
    for (int k = 0; k < nd; k++)
        if (seen[k] || o->naxis == 0)
            axes[(*naxes)++] = k;
    return NX_OK;
}

nx_status nx_overlap_check(const nx_op_args *c)
{
    const nx_overlap_args *o = c->opts;
    nx_status st = nx_metric_check_pair(c, 0, 1);
    if (st != NX_OK)
        return st;
    int axes[NX_MAX_DIMS], naxes;
    if ((st = overlap_axes(c, axes, &naxes)) != NX_OK)
        return st;
    if (!(o->smooth >= 0) || !isfinite(o->smooth))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: smooth is %g; expected a finite value >= 0", c->who, o->smooth);
    if ((unsigned)o->reduction > NX_METRIC_MEAN)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: reduction %d is out of range; expected none, sum or mean", c->who,
                           o->reduction);
    return NX_OK;
}

nx_status nx_overlap_sums(nx_graph *g, const nx_op_args *c, nx_node *inter, nx_node *magnitude)
{
    const nx_tensor *p = c->in[0];
    nx_dtype dt = nx_tensor_dtype(p);
    int nd = nx_tensor_ndim(p);
    int axes[NX_MAX_DIMS], naxes = 0;
    nx_status st = overlap_axes(c, axes, &naxes);
    if (st != NX_OK)
        return st;
    nx_node a = nx_parameter(g, "pred", dt, nd, nx_tensor_shape(p));
    nx_node b = nx_parameter(g, "target", dt, nd, nx_tensor_shape(p));
    /* A 0-d pair has no axis to sum: the region is the one element. */
    if (naxes == 0) {
        *inter = nx_mul(g, a, b);
        *magnitude = nx_add(g, a, b);
    } else {
        *inter = nx_reduce(g, nx_mul(g, a, b), naxes, axes, NX_MONOID_SUM, false);
        *magnitude = nx_add(g, nx_reduce(g, a, naxes, axes, NX_MONOID_SUM, false),
                            nx_reduce(g, b, naxes, axes, NX_MONOID_SUM, false));
    }
    return nx_graph_status(g);
}
