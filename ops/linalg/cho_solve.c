/* The op `cho_solve` (api-b §1.1 `cho_solve(a, b, *, l2=0)`): x with (a + l2 I) x = b for a
 * batch of SPD a, through the Cholesky factor of a + l2 I (read from its lower triangle) and two
 * triangular substitutions, all unrolled over p at graph-build time (linalg.h). b is (..., p) or
 * (..., p, k) with a's batch dims. A problem whose a + l2 I is not SPD gets an all-NaN x.
 * Oracle: numpy.linalg.solve. Autodiff differentiates the composition (a, b). */
#include <math.h>

#include "ops/linalg/linalg.h"

typedef struct cho_solve_args {
    nx_backend backend;
    double l2;
} cho_solve_args;

static nx_status check(const nx_op_args *c)
{
    const cho_solve_args *o = c->opts;
    if (!isfinite(o->l2))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: l2 is %g; expected a finite ridge",
                           c->who, o->l2);
    bool vector;
    nx_status st = nx_la_check_square(c, 0, "a", NX_LA_MAX_P);
    return st == NX_OK ? nx_la_check_rhs(c, 0, 1, &vector) : st;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const cho_solve_args *o = c->opts;
    const nx_tensor *a = c->in[0], *b = c->in[1];
    bool vector = nx_tensor_ndim(b) == nx_tensor_ndim(a) - 1;
    nx_dtype dt = nx_tensor_dtype(a);
    nx_node an = nx_parameter(g, "a", dt, nx_tensor_ndim(a), nx_tensor_shape(a));
    nx_node bn = nx_parameter(g, "b", dt, nx_tensor_ndim(b), nx_tensor_shape(b));
    nx_la_mat am, l;
    nx_la_entries(g, an, &am);
    nx_node ok = NX_NONE;
    nx_la_cholesky(g, &am, o->l2, &l, &ok, NULL);
    int p = am.rows;
    nx_node rows[NX_LA_MAX_P], y[NX_LA_MAX_P], x[NX_LA_MAX_P];
    nx_la_rows(g, nx_la_rhs_matrix(g, bn, vector), p, rows);
    nx_la_trisolve(g, &l, true, false, false, rows, p, y, NULL);
    nx_la_trisolve(g, &l, true, true, false, y, p, x, NULL);
    for (int i = 0; i < p; i++)
        x[i] = nx_la_poison(g, ok, x[i]);
    outs[0] = nx_la_rhs_restore(g, nx_la_stack_rows(g, x, p), vector);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"l2", NX_OPT_FLOAT, "0", NULL, 1, "ridge added to a's diagonal before the factorisation"},
};

static const nx_op_field fields[] = {
    {offsetof(cho_solve_args, l2), NX_OP_NO_FIELD, sizeof(double)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-4, 1e-5},
    {NX_DTYPE_F64, NULL, NULL, 1e-10, 1e-12},
};

const nx_op_desc nx_op_cho_solve = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(cho_solve_args),
    .fields = fields,
    .backend_offset = offsetof(cho_solve_args, backend),
    .check = check,
    .build = build,
    .golden = "linalg",
    .tols = tols,
    .ntols = 2,
};
