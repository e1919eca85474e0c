/* Finite differences on a grid, shared by spatial_gradient, jacobian_displacement and
 * jacobian_det_displacement (docs/geometry.md, "Jacobians"): graph fragments of pad and slice, so
 * both backends compile them and autodiff differentiates them. */
#ifndef NX_OPS_GEOMETRY_FD_H
#define NX_OPS_GEOMETRY_FD_H

#include "ops/op.h"

typedef enum nx_geo_scheme {
    NX_GEO_CENTRAL, /* (x[i+1] - x[i-1]) / 2h */
    NX_GEO_SOBEL,   /* central along the axis, [1, 2, 1] / 4 along every other spatial axis */
    NX_GEO_SCHARR,  /* central along the axis, [3, 10, 3] / 16 along every other spatial axis */
} nx_geo_scheme;

/* The derivative along spatial axis k of x, whose spatial axes are [first, first + nsp): the
 * scheme's stencil over x extended by one element per side by `mode` (scipy.ndimage's meanings;
 * constant extends with 0), divided by h. Same shape as x. */
NX_HIDDEN nx_node nx_geo_fd(nx_graph *g, nx_node x, int first, int nsp, int k,
                            nx_geo_scheme scheme, nx_border mode, double h);

/* The spacing option: count 0 or 1 is one value for all n axes, else count must be n; each value
 * finite and > 0. Fills h[0..n). */
NX_HIDDEN nx_status nx_geo_spacing(const nx_op_args *c, const double *spacing, int count, int n,
                                   double *h);

#endif /* NX_OPS_GEOMETRY_FD_H */
