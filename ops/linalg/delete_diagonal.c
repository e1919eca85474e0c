/* The op `delete_diagonal` (api-b §1.1 `delete_diagonal(A)`): A with its main diagonal set to 0
 * (the JAX version's A * ~eye), square blocks. Elementwise with an index mask: one kernel. */
#include "ops/linalg/matrix.h"

typedef struct delete_diagonal_args {
    nx_backend backend;
} delete_diagonal_args;

static nx_status check(const nx_op_args *c)
{
    nx_status st = nx_la_check_float(c, 0, "A", 2);
    if (st != NX_OK)
        return st;
    int nd = nx_tensor_ndim(c->in[0]);
    const int64_t *s = nx_tensor_shape(c->in[0]);
    if (s[nd - 1] != s[nd - 2])
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: A is %lld x %lld; expected square",
                           c->who, (long long)s[nd - 2], (long long)s[nd - 1]);
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_tensor *a = c->in[0];
    int nd = nx_tensor_ndim(a);
    nx_dtype dt = nx_tensor_dtype(a);
    nx_node an = nx_parameter(g, "A", dt, nd, nx_tensor_shape(a));
    const int64_t *s = nx_tensor_shape(a);
    nx_node i = nx_iota(g, NX_DTYPE_I64, 2, s + nd - 2, 0);
    nx_node j = nx_iota(g, NX_DTYPE_I64, 2, s + nd - 2, 1);
    outs[0] = nx_select(g, nx_eq(g, i, j), nx_scalar(g, dt, 0), an);
    return nx_graph_status(g);
}

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_delete_diagonal = {
    .opts_size = sizeof(delete_diagonal_args),
    .backend_offset = offsetof(delete_diagonal_args, backend),
    .check = check,
    .build = build,
    .golden = "linalg",
    .tols = tols,
    .ntols = 2,
};
