/* The op `cholesky` (api-b §1.1 `spd_chol`): L with A = L L^T for a batch of SPD matrices,
 * numpy.linalg.cholesky's result, read from A's lower triangle only. The column-by-column
 * (Cholesky-Banachiewicz) recurrence is unrolled over p at graph-build time (linalg.h), so the op
 * is one fused kernel over the batch and autodiff gives the matrix-calculus adjoint of the
 * recurrence itself (FD-tested in float64).
 *
 * Failure is per problem: a matrix whose leading minor of order k is not positive (or holds NaN)
 * gets an all-NaN L and info = k (LAPACK potrf's convention); info = 0 for the others. */
#include "ops/linalg/linalg.h"

typedef struct chol_args {
    nx_backend backend;
} chol_args;

static nx_status check(const nx_op_args *c)
{
    return nx_la_check_square(c, 0, "a", NX_LA_MAX_P);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_tensor *a = c->in[0];
    nx_node x = nx_parameter(g, "a", nx_tensor_dtype(a), nx_tensor_ndim(a), nx_tensor_shape(a));
    nx_la_mat am, l;
    nx_la_entries(g, x, &am);
    nx_node ok = NX_NONE, info = NX_NONE;
    nx_la_cholesky(g, &am, 0, &l, &ok, &info);
    for (int i = 0; i < l.rows * l.cols; i++)
        l.e[i] = nx_la_poison(g, ok, l.e[i]);
    nx_node finfo = nx_cast(g, info, nx_tensor_dtype(a)), row = NX_NONE;
    nx_la_split_extra(g, nx_la_assemble_extra(g, &l, &finfo, 1), &outs[0], &row);
    int nd = nx_tensor_ndim(a);
    int64_t lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS];
    nx_node_shape(g, row, hi);
    hi[nd - 1] = 1;
    nx_node first = nx_slice(g, row, lo, hi, NULL);
    outs[1] = nx_reshape(g, nx_cast(g, first, NX_DTYPE_I32), nd - 2, nx_tensor_shape(a));
    return nx_graph_status(g);
}

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-4, 1e-5},
    {NX_DTYPE_F64, NULL, NULL, 1e-10, 1e-12},
};

const nx_op_desc nx_op_cholesky = {
    .opts_size = sizeof(chol_args),
    .backend_offset = offsetof(chol_args, backend),
    .check = check,
    .build = build,
    .golden = "linalg",
    .tols = tols,
    .ntols = 2,
};
