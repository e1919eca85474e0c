/* The op `jacobian_det_displacement`: det(I + grad u) per grid point of a displacement
 * u [*lead, *spatial, d], d = 1, 2 or 3 (closed forms: a d - b c; the rule of Sarrus), from the
 * entries jacobian_displacement computes (same boundary_mode and spacing). det <= 0 marks
 * folding. An IR graph: the Jacobian is never stored, and autodiff gives the gradient of u. */
#include "ops/geometry/jacobian.h"

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_tensor *ut = c->in[0];
    int d = (int)nx_tensor_shape(ut)[nx_tensor_ndim(ut) - 1];
    nx_node e[9];
    nx_status st = nx_jac_entries(g, c, e);
    if (st != NX_OK)
        return st;
    if (d == 1) {
        outs[0] = e[0];
    } else if (d == 2) {
        outs[0] = nx_sub(g, nx_mul(g, e[0], e[3]), nx_mul(g, e[1], e[2]));
    } else {
        nx_node c0 = nx_sub(g, nx_mul(g, e[4], e[8]), nx_mul(g, e[5], e[7]));
        nx_node c1 = nx_sub(g, nx_mul(g, e[3], e[8]), nx_mul(g, e[5], e[6]));
        nx_node c2 = nx_sub(g, nx_mul(g, e[3], e[7]), nx_mul(g, e[4], e[6]));
        outs[0] = nx_add(g, nx_sub(g, nx_mul(g, e[0], c0), nx_mul(g, e[1], c1)),
                         nx_mul(g, e[2], c2));
    }
    return nx_graph_status(g);
}

const nx_op_desc nx_op_jacobian_det_displacement = {
    .info = {.nopts = 2, .opts = nx_jac_schema},
    .opts_size = sizeof(nx_jac_args),
    .fields = nx_jac_fields,
    .backend_offset = offsetof(nx_jac_args, backend),
    .check = nx_jac_check,
    .build = build,
    .golden = "geometry",
    .tols = nx_jac_tols,
    .ntols = 2,
};
