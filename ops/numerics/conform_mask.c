/* The op `conform_mask` (spec §4.12, api-a §9; hypercoil's and nitrix's _internal/util.py): a 1-d
 * mask or weight along `axis` of x, broadcast to x's shape so it applies elementwise,
 *     y[..., i_axis, ...] = mask[i_axis],
 * of the mask's dtype (bool stays bool; float weights carry gradients: the broadcast's adjoint
 * sums them back). x gives only the shape (its gradient is 0). */
#include "ops/numerics/numerics.h"

typedef struct cm_args {
    nx_backend backend;
    int64_t axis;
} cm_args;

static nx_status check(const nx_op_args *c)
{
    const cm_args *o = c->opts;
    return nx_num_check_axis_mask(c, o->axis);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const cm_args *o = c->opts;
    const nx_tensor *xt = c->in[0];
    int nd = nx_tensor_ndim(xt), k;
    nx_status st = nx_num_axis(c, o->axis, nd, "axis", &k);
    if (st != NX_OK)
        return st;
    (void)nx_num_declare(g, c, 0); /* float x: a parameter whose gradient is 0 */
    nx_node m = nx_num_declare(g, c, 1);
    int64_t vs[NX_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        vs[i] = i == k ? nx_tensor_shape(xt)[k] : 1;
    outs[0] = nx_broadcast(g, nx_reshape(g, m, nd, vs), nd, nx_tensor_shape(xt));
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"axis", NX_OPT_INT, "-1", NULL, 1, "the axis of x the mask runs along; negative from the end"},
};

static const nx_op_field fields[] = {
    {offsetof(cm_args, axis), NX_OP_NO_FIELD, sizeof(int64_t)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
    {NX_DTYPE_BOOL, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_conform_mask = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(cm_args),
    .fields = fields,
    .backend_offset = offsetof(cm_args, backend),
    .check = check,
    .build = build,
    .golden = "numerics",
    .tols = tols,
    .ntols = 3,
};
