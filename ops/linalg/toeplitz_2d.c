/* The op `toeplitz_2d` (api-b §1.1): toeplitz for one column c and one row r (vectors); the
 * oracle is scipy.linalg.toeplitz (api-b §1.2, 1e-12). See toeplitz.c. */
#include "ops/linalg/matrix.h"

static nx_status check(const nx_op_args *c)
{
    int64_t m, n;
    return nx_la_toeplitz_check(c, false, &m, &n);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    return nx_la_toeplitz_build(g, c, outs);
}

static const nx_op_opt opts[] = {NX_LA_TOEPLITZ_OPTS};

static const nx_op_field fields[] = {
    {offsetof(nx_toeplitz_args, shape), offsetof(nx_toeplitz_args, nshape), sizeof(int64_t[2])},
    {offsetof(nx_toeplitz_args, fill_value), NX_OP_NO_FIELD, sizeof(double)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_toeplitz_2d = {
    .info = {.nopts = 2, .opts = opts},
    .opts_size = sizeof(nx_toeplitz_args),
    .fields = fields,
    .backend_offset = offsetof(nx_toeplitz_args, backend),
    .check = check,
    .build = build,
    .golden = "linalg",
    .tols = tols,
    .ntols = 2,
};
