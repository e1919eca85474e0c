/* The op `parameterised_norm` (api-b §1.1; kernel.c): each row of X over its theta-norm,
 * X / (|x|_theta + eps) (squared: X / (|x|_theta^2 + eps)), eps the dtype's machine epsilon;
 * theta absent: L2 normalisation along the last axis. */
#include "ops/linalg/kernel.h"

static nx_status check(const nx_op_args *c)
{
    return nx_la_norm_check(c);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    return nx_la_norm_build(g, c, outs);
}

static const nx_op_opt opts[] = {
    {"squared", NX_OPT_BOOL, "false", NULL, 1, "divide by the squared norm"},
};

static const nx_op_field fields[] = {
    {offsetof(nx_la_kernel_args, squared), NX_OP_NO_FIELD, sizeof(bool)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-10, 1e-12},
};

const nx_op_desc nx_op_parameterised_norm = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(nx_la_kernel_args),
    .fields = fields,
    .backend_offset = offsetof(nx_la_kernel_args, backend),
    .check = check,
    .build = build,
    .golden = "linalg",
    .tols = tols,
    .ntols = 2,
};
