/* The affine and Lie half of the geometry family (docs/geometry.md, "Affine and Lie"): checks and
 * graph fragments its ops share.
 *
 * Conventions. An affine of rank d is [..., d, d+1] (the implied last row is 0 ... 0 1) or its
 * square homogeneous form [..., d+1, d+1]; it maps coordinates as y = M[:, :d] x + M[:, d].
 * Rotations: 2-D one angle, R = [[c, -s], [s, c]]; 3-D three angles, R = X(a1) Y(a2) Z(a3)
 * (right-handed, intrinsic x then y then z: scipy's Rotation.from_euler("XYZ")). Everything is
 * batched over the leading axes; f32 and f64. */
#ifndef NX_OPS_GEOMETRY_AFFINE_H
#define NX_OPS_GEOMETRY_AFFINE_H

#include "ops/geometry/matfun.h"

/* Affines of rank up to this are accepted by the shape helpers (make_square_affine,
 * invert_affine, compose_affine, fit_affine, apply_affine, affine_grid). */
#define NX_GEO_MAX_RANK 6

#define NX_GEO_PI 3.14159265358979323846

/* Input `i` is a float (f32 or f64) tensor of rank >= min_rank; its name from the row. */
NX_HIDDEN nx_status nx_geo_check_float(const nx_op_args *c, int i, int min_rank);
/* Input `i` is an affine [..., r, d+1] with r = d or d + 1 and 1 <= d <= max_d; *d and *rows
 * receive d and r. */
NX_HIDDEN nx_status nx_geo_check_affine(const nx_op_args *c, int i, int max_d, int *d,
                                        int *rows);
/* The leading (batch) shapes of inputs i and j (their first ni and nj axes) are equal. */
NX_HIDDEN nx_status nx_geo_check_batch(const nx_op_args *c, int i, int ni, int j, int nj);

/* x[..., k] as [...] (the last axis dropped). */
NX_HIDDEN nx_node nx_geo_last(nx_graph *g, nx_node x, int k);
/* [..., n] from n nodes of one shape [...]. */
NX_HIDDEN nx_node nx_geo_vec(nx_graph *g, int n, const nx_node *els);
/* An affine [..., r, d+1] in square form [..., d+1, d+1] (a square input is returned as is). */
NX_HIDDEN nx_node nx_geo_square(nx_graph *g, nx_node m);
/* [..., d, d+1] from a linear block [..., d, d] and a translation [..., d]. */
NX_HIDDEN nx_node nx_geo_affine_from(nx_graph *g, nx_node lin, nx_node t);

/* y = L (x - c) + t + c for points x [*B, P, d] (or [P, d]: one set for every matrix) and the
 * linear block L and translation t of m [*B, r, d+1]; ctr [d] or NX_NONE (the origin). */
NX_HIDDEN nx_node nx_geo_apply(nx_graph *g, nx_node x, nx_node m, nx_node ctr);

/* The rotation [..., d, d] of angles ang[0..na) (each [...], radians), na = 1 (2-D) or 3. */
NX_HIDDEN nx_node nx_geo_rotation(nx_graph *g, int na, const nx_node *ang);
/* The angles of a rotation R [..., >= d, >= d] (its leading d x d block), d = 2 or 3, radians,
 * into ang[0..d==2 ? 1 : 3). 3-D: a2 = atan2(R02, sqrt(R00^2 + R01^2)) in [-pi/2, pi/2],
 * a1 = atan2(-R12, R22), a3 = atan2(-R01, R00); at gimbal lock (sqrt(R00^2 + R01^2) < 1e-6)
 * a1 = 0 and a3 = atan2(R10, R11). */
NX_HIDDEN void nx_geo_angles(nx_graph *g, nx_node r, int d, nx_node *ang);

#endif /* NX_OPS_GEOMETRY_AFFINE_H */
