/* The op `cholesky` (api-b §1.1 `spd_chol`): L with A = L L^T for a batch of SPD matrices,
 * numpy.linalg.cholesky's result, read from A's lower triangle only. The column-by-column
 * (Cholesky-Banachiewicz) recurrence is unrolled over p at graph-build time (linalg.h), so the op
 * is one fused kernel over the batch and autodiff gives the matrix-calculus adjoint of the
 * recurrence itself (FD-tested in float64).
 *
 * Failure is per problem: a matrix whose leading minor of order k is not positive (or holds NaN)
 * gets an all-NaN L and info = k (LAPACK potrf's convention); info = 0 for the others.
 *
 * The two outputs are two kernels that share no intermediate value (fusion would materialise a
 * value both read, one batch-sized temporary per entry): info comes from the same recurrence
 * written with negated accumulators (M = -L) over a flat view of a, which the graph's
 * hash-consing and simplification keep apart from L's nodes. The pivots are equal to L's up to
 * rounding order, so info can differ from the poisoning of L only for a pivot within a rounding
 * of 0. */
#include <string.h>

#include "ops/linalg/linalg.h"

typedef struct chol_args {
    nx_backend backend;
} chol_args;

static nx_status check(const nx_op_args *c)
{
    return nx_la_check_square(c, 0, "a", NX_LA_MAX_P);
}

/* info: the first j (1-based) whose pivot a_jj - sum_k<j L_jk^2 is not > 0, through M = -L:
 * u_j = -a_jj + sum_k M_jk^2 = -pivot, M_ij = (sum_k M_ik M_jk - a_ij) / sqrt(-u_j). */
static nx_node info_of(nx_graph *g, nx_node x, int p)
{
    /* the entries read through a flat view of a: other nodes than L's slices, so that neither
     * output's kernel shares a value with the other's */
    int64_t shape[NX_MAX_DIMS], lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS];
    int nd = nx_node_ndim(g, x);
    nx_node_shape(g, x, shape);
    shape[nd - 2] = 1;
    shape[nd - 1] = (int64_t)p * p;
    nx_node flat = nx_reshape(g, x, nd, shape);
    memcpy(hi, shape, sizeof hi);
    nx_la_mat a;
    for (int i = 0; i < p * p; i++) {
        lo[nd - 1] = i, hi[nd - 1] = i + 1;
        a.e[i] = nx_slice(g, flat, lo, hi, NULL);
    }
    nx_dtype dt = nx_node_dtype(g, x);
    nx_node m[NX_LA_MAX_ENTRIES], zero = nx_scalar(g, dt, 0);
    nx_node info = nx_cast(g, nx_mul(g, a.e[0], zero), NX_DTYPE_I32);
    for (int j = 0; j < p; j++) {
        nx_node u = nx_neg(g, a.e[j * p + j]);
        for (int k = 0; k < j; k++)
            u = nx_add(g, u, nx_mul(g, m[j * p + k], m[j * p + k]));
        nx_node bad = nx_not(g, nx_lt(g, u, zero));
        nx_node first = nx_and(g, nx_eq(g, info, nx_scalar(g, NX_DTYPE_I32, 0)), bad);
        info = nx_select(g, first, nx_scalar(g, NX_DTYPE_I32, j + 1), info);
        nx_node d = nx_sqrt(g, nx_abs(g, u));
        for (int i = j + 1; i < p; i++) {
            nx_node t = nx_neg(g, a.e[i * p + j]);
            for (int k = 0; k < j; k++)
                t = nx_add(g, t, nx_mul(g, m[i * p + k], m[j * p + k]));
            m[i * p + j] = nx_div(g, t, d);
        }
    }
    return info;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_tensor *a = c->in[0];
    nx_node x = nx_parameter(g, "a", nx_tensor_dtype(a), nx_tensor_ndim(a), nx_tensor_shape(a));
    nx_la_mat am, l;
    nx_la_entries(g, x, &am);
    nx_node ok = NX_NONE;
    nx_la_cholesky(g, &am, 0, &l, &ok, NULL);
    for (int i = 0; i < l.rows * l.cols; i++)
        l.e[i] = nx_la_poison(g, ok, l.e[i]);
    outs[0] = nx_la_assemble(g, &l);
    outs[1] = nx_reshape(g, info_of(g, x, am.rows), nx_tensor_ndim(a) - 2, nx_tensor_shape(a));
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
