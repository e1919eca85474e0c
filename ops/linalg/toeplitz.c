/* The op `toeplitz` (api-b §1.1 `toeplitz(c, r, *, shape, fill_value=0)`): a batch of Toeplitz
 * matrices T[..., i, j] = c[..., i - j] (i >= j), r[..., j - i] (j > i), c[0] on the diagonal as
 * scipy.linalg.toeplitz (the JAX code put r[0] there, its docstring c[0]), fill_value beyond
 * either vector, shape (m, n) (default (len(c), len(r))); r absent: r = c. c and r share their
 * leading dims. A gather of a constant index table: autodiff scatters back. */
#include "ops/linalg/matrix.h"

static nx_status check(const nx_op_args *c)
{
    int64_t m, n;
    return nx_la_toeplitz_check(c, true, &m, &n);
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

const nx_op_desc nx_op_toeplitz = {
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
