/* The op `linear_distance` (api-b §1.1; linalg/kernel.h, kernel.c): D = max(|x|_theta^2 +
 * |y|_theta^2 - 2 x^T theta y, 0), the squared (Mahalanobis) distance through the matmul identity,
 * clipped at 0 as the JAX version (an (n, m, d) difference is never formed).
 */
#include "ops/linalg/kernel.h"

static nx_status check(const nx_op_args *c)
{
    return nx_la_kernel_check(c);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    return nx_la_kernel_build(g, c, NX_LA_DISTANCE, outs);
}

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-10, 1e-12},
};

const nx_op_desc nx_op_linear_distance = {
    .info = {.nopts = 0, .opts = NULL},
    .opts_size = sizeof(nx_la_kernel_args),
    .fields = NULL,
    .backend_offset = offsetof(nx_la_kernel_args, backend),
    .check = check,
    .build = build,
    .golden = "linalg",
    .tols = tols,
    .ntols = 2,
};
