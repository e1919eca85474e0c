/* The op `triangular_solve`: x with op(a) x = b for a batch of triangular a, op(a) = a or a^T
 * (scipy.linalg.solve_triangular's lower, trans and unit_diagonal; only the named triangle of a
 * is read). b is (..., p) or (..., p, k) with a's batch dims (numpy.linalg.solve's rule). Forward
 * or back substitution unrolled over p at graph-build time (linalg.h); autodiff differentiates
 * it. A problem with a zero on the diagonal (scipy: LinAlgError "singular matrix") gets an
 * all-NaN x. */
#include "ops/linalg/linalg.h"

typedef struct trsolve_args {
    nx_backend backend;
    bool lower;
    int trans; /* 0 N, 1 T */
    bool unit_diagonal;
} trsolve_args;

static nx_status check(const nx_op_args *c)
{
    bool vector;
    nx_status st = nx_la_check_square(c, 0, "a", NX_LA_MAX_P);
    return st == NX_OK ? nx_la_check_rhs(c, 0, 1, &vector) : st;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const trsolve_args *o = c->opts;
    const nx_tensor *a = c->in[0], *b = c->in[1];
    bool vector = nx_tensor_ndim(b) == nx_tensor_ndim(a) - 1;
    nx_dtype dt = nx_tensor_dtype(a);
    nx_node an = nx_parameter(g, "a", dt, nx_tensor_ndim(a), nx_tensor_shape(a));
    nx_node bn = nx_parameter(g, "b", dt, nx_tensor_ndim(b), nx_tensor_shape(b));
    nx_la_mat t;
    nx_la_entries(g, an, &t);
    nx_node rows[NX_LA_MAX_P], x[NX_LA_MAX_P], ok = NX_NONE;
    nx_la_rows(g, nx_la_rhs_matrix(g, bn, vector), t.rows, rows);
    nx_la_trisolve(g, &t, o->lower, o->trans == 1, o->unit_diagonal, rows, t.rows, x, &ok);
    for (int i = 0; ok && i < t.rows; i++)
        x[i] = nx_la_poison(g, ok, x[i]);
    outs[0] = nx_la_rhs_restore(g, nx_la_stack_rows(g, x, t.rows), vector);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"lower", NX_OPT_BOOL, "false", NULL, 1,
     "use a's lower triangle (true) or its upper triangle (false), as scipy"},
    {"trans", NX_OPT_ENUM, "N", "N|T", 1, "N: solve a x = b; T: solve a^T x = b"},
    {"unit_diagonal", NX_OPT_BOOL, "false", NULL, 1,
     "take a's diagonal as ones (its stored diagonal is not read)"},
};

static const nx_op_field fields[] = {
    {offsetof(trsolve_args, lower), NX_OP_NO_FIELD, sizeof(bool)},
    {offsetof(trsolve_args, trans), NX_OP_NO_FIELD, sizeof(int)},
    {offsetof(trsolve_args, unit_diagonal), NX_OP_NO_FIELD, sizeof(bool)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-4, 1e-5},
    {NX_DTYPE_F64, NULL, NULL, 1e-10, 1e-12},
};

const nx_op_desc nx_op_triangular_solve = {
    .info = {.nopts = 3, .opts = opts},
    .opts_size = sizeof(trsolve_args),
    .fields = fields,
    .backend_offset = offsetof(trsolve_args, backend),
    .check = check,
    .build = build,
    .golden = "linalg",
    .tols = tols,
    .ntols = 2,
};
