/* Finite differences on a grid (fd.h). */
#include <math.h>
#include <string.h>

#include "ops/geometry/fd.h"

/* x shifted along axis ax: the elements [o, o + n) of an axis padded by one per side. */
static nx_node shift(nx_graph *g, nx_node x, int ax, int64_t o, int64_t n)
{
    int64_t lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0};
    nx_node_shape(g, x, hi);
    lo[ax] = o;
    hi[ax] = o + n;
    return nx_slice(g, x, lo, hi, NULL);
}

nx_node nx_geo_fd(nx_graph *g, nx_node x, int first, int nsp, int k, nx_geo_scheme scheme,
                  nx_border mode, double h)
{
    if (x == NX_NONE)
        return NX_NONE;
    int64_t shape[NX_MAX_DIMS] = {0}, lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0};
    nx_node_shape(g, x, shape);
    nx_dtype dt = nx_node_dtype(g, x);
    for (int j = 0; j < nsp; j++)
        if (j == k || scheme != NX_GEO_CENTRAL)
            lo[first + j] = hi[first + j] = 1;
    nx_node p = nx_pad(g, x, lo, hi, mode, 0.0);
    int ax = first + k;
    nx_node d = nx_mul(g, nx_sub(g, shift(g, p, ax, 2, shape[ax]), shift(g, p, ax, 0, shape[ax])),
                       nx_scalar(g, dt, 0.5 / h));
    if (scheme == NX_GEO_CENTRAL)
        return d;
    double w0 = scheme == NX_GEO_SOBEL ? 0.25 : 3.0 / 16.0;
    double w1 = scheme == NX_GEO_SOBEL ? 0.5 : 10.0 / 16.0;
    for (int j = 0; j < nsp; j++) {
        if (j == k)
            continue;
        int a = first + j;
        nx_node side = nx_add(g, shift(g, d, a, 0, shape[a]), shift(g, d, a, 2, shape[a]));
        d = nx_add(g, nx_mul(g, nx_scalar(g, dt, w0), side),
                   nx_mul(g, nx_scalar(g, dt, w1), shift(g, d, a, 1, shape[a])));
    }
    return d;
}

nx_status nx_geo_spacing(const nx_op_args *c, const double *spacing, int count, int n, double *h)
{
    if (count > 1 && count != n)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: spacing has %d values for %d spatial axes; expected 1 or %d",
                           c->who, count, n, n);
    for (int i = 0; i < n; i++) {
        h[i] = count == 0 ? 1.0 : spacing[count == 1 ? 0 : i];
        if (!isfinite(h[i]) || !(h[i] > 0))
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: spacing[%d] is %g; expected a finite value > 0", c->who, i,
                               h[i]);
    }
    return NX_OK;
}
