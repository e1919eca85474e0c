/* jacobian_displacement and jacobian_det_displacement share their options, check and the
 * Jacobian's columns (jacobian_displacement.c). */
#ifndef NX_OPS_GEOMETRY_JACOBIAN_H
#define NX_OPS_GEOMETRY_JACOBIAN_H

#include "ops/geometry/fd.h"
#include "ops/geometry/matfun.h"

typedef struct nx_jac_args {
    nx_backend backend;
    int boundary_mode; /* nx_border */
    double spacing[NX_MAX_DIMS];
    int nspacing;
} nx_jac_args;

NX_HIDDEN extern const nx_op_opt nx_jac_schema[2];
NX_HIDDEN extern const nx_op_field nx_jac_fields[2];
NX_HIDDEN extern const nx_op_tol nx_jac_tols[2];
NX_HIDDEN nx_status nx_jac_check(const nx_op_args *c);
/* The parameter u and the entries J[i][j] = delta_ij + d u_i / d x_j, each [*lead, *spatial]. */
NX_HIDDEN nx_status nx_jac_entries(nx_graph *g, const nx_op_args *c, nx_node *j);

#endif /* NX_OPS_GEOMETRY_JACOBIAN_H */
