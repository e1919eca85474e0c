/* The op `gaussian_kernel` (api-b §1.1; linalg/kernel.h, kernel.c): K = exp(-D / (2 sigma^2)),
 * rbf_kernel with gamma = 1 / (2 sigma^2).
 */
#include "ops/linalg/kernel.h"

static nx_status check(const nx_op_args *c)
{
    return nx_la_kernel_check(c);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    return nx_la_kernel_build(g, c, NX_LA_GAUSSIAN, outs);
}

static const nx_op_opt opts[] = {
    {"sigma", NX_OPT_FLOAT, "(sqrt(d/2))", NULL, 1,
     "width: gamma = 1 / (2 sigma^2) (0: gamma = 1 / d)"},
};

static const nx_op_field fields[] = {
    {offsetof(nx_la_kernel_args, sigma), NX_OP_NO_FIELD, sizeof(double)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-10, 1e-12},
};

const nx_op_desc nx_op_gaussian_kernel = {
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
