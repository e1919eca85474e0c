/* The op `sigmoid_kernel` (api-b §1.1; linalg/kernel.h, kernel.c): K = tanh(gamma X0 theta X1^T +
 * r) (not positive semidefinite in general).
 */
#include "ops/linalg/kernel.h"

static nx_status check(const nx_op_args *c)
{
    return nx_la_kernel_check(c);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    return nx_la_kernel_build(g, c, NX_LA_SIGMOID, outs);
}

static const nx_op_opt opts[] = {
    {"gamma", NX_OPT_FLOAT, "(1/d)", NULL, 1, "scale of the inner product or distance (0: 1 / d)"},
    {"r", NX_OPT_FLOAT, "0", NULL, 1, "offset added before the nonlinearity"},
};

static const nx_op_field fields[] = {
    {offsetof(nx_la_kernel_args, gamma), NX_OP_NO_FIELD, sizeof(double)},
    {offsetof(nx_la_kernel_args, r), NX_OP_NO_FIELD, sizeof(double)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-10, 1e-12},
};

const nx_op_desc nx_op_sigmoid_kernel = {
    .info = {.nopts = 2, .opts = opts},
    .opts_size = sizeof(nx_la_kernel_args),
    .fields = fields,
    .backend_offset = offsetof(nx_la_kernel_args, backend),
    .check = check,
    .build = build,
    .golden = "linalg",
    .tols = tols,
    .ntols = 2,
};
