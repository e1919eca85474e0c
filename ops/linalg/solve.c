/* The op `solve` (api-b §1.1 `solve(a, b)`): x with a x = b for a batch of general square a,
 * numpy.linalg.solve's result. Gaussian elimination with partial pivoting (LAPACK getrf's
 * choice: the first row of largest |a_ik| in the column), unrolled over p at graph-build time
 * (linalg.h): the pivot search is a chain of compare-and-swap selects over the remaining rows,
 * which leaves the largest candidate in the pivot row (the other rows' order does not change the
 * solution), then elimination and back substitution. b is (..., p) or (..., p, k) with a's batch
 * dims. A problem that meets an exact zero pivot (numpy: LinAlgError "Singular matrix") gets an
 * all-NaN x; a nearly singular one gets what elimination gives, as numpy. Autodiff differentiates
 * the composition (the pivot choice is piecewise constant). */
#include <string.h>

#include "ops/linalg/linalg.h"

typedef struct solve_args {
    nx_backend backend;
} solve_args;

static nx_status check(const nx_op_args *c)
{
    bool vector;
    nx_status st = nx_la_check_square(c, 0, "a", NX_LA_MAX_P);
    return st == NX_OK ? nx_la_check_rhs(c, 0, 1, &vector) : st;
}

static void swap_if(nx_graph *g, nx_node cond, nx_node *u, nx_node *v)
{
    nx_node nu = nx_select(g, cond, *v, *u), nv = nx_select(g, cond, *u, *v);
    *u = nu;
    *v = nv;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_tensor *a = c->in[0], *b = c->in[1];
    bool vector = nx_tensor_ndim(b) == nx_tensor_ndim(a) - 1;
    nx_dtype dt = nx_tensor_dtype(a);
    nx_node an = nx_parameter(g, "a", dt, nx_tensor_ndim(a), nx_tensor_shape(a));
    nx_node bn = nx_parameter(g, "b", dt, nx_tensor_ndim(b), nx_tensor_shape(b));
    nx_la_mat m;
    nx_la_entries(g, an, &m);
    int p = m.rows;
    nx_node r[NX_LA_MAX_P], x[NX_LA_MAX_P], ok = NX_NONE, zero = nx_scalar(g, dt, 0);
    nx_la_rows(g, nx_la_rhs_matrix(g, bn, vector), p, r);
    nx_node *e = m.e;
    for (int k = 0; k < p; k++) {
        for (int i = k + 1; i < p; i++) {
            nx_node sw = nx_gt(g, nx_abs(g, e[i * p + k]), nx_abs(g, e[k * p + k]));
            for (int j = k; j < p; j++)
                swap_if(g, sw, &e[k * p + j], &e[i * p + j]);
            swap_if(g, sw, &r[k], &r[i]);
        }
        nx_node piv = e[k * p + k];
        nx_node okk = nx_ne(g, piv, zero);
        ok = ok ? nx_and(g, ok, okk) : okk;
        for (int i = k + 1; i < p; i++) {
            nx_node f = nx_div(g, e[i * p + k], piv);
            for (int j = k + 1; j < p; j++)
                e[i * p + j] = nx_sub(g, e[i * p + j], nx_mul(g, f, e[k * p + j]));
            r[i] = nx_sub(g, r[i], nx_mul(g, f, r[k]));
        }
    }
    nx_la_trisolve(g, &m, false, false, false, r, p, x, NULL);
    for (int i = 0; i < p; i++)
        x[i] = nx_la_poison(g, ok, x[i]);
    outs[0] = nx_la_rhs_restore(g, nx_la_stack_rows(g, x, p), vector);
    return nx_graph_status(g);
}

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-4, 1e-5},
    {NX_DTYPE_F64, NULL, NULL, 1e-10, 1e-12},
};

const nx_op_desc nx_op_solve = {
    .opts_size = sizeof(solve_args),
    .backend_offset = offsetof(solve_args, backend),
    .check = check,
    .build = build,
    .golden = "linalg",
    .tols = tols,
    .ntols = 2,
};
