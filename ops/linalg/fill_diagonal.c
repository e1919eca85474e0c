/* The op `fill_diagonal` (api-b §1.1 `fill_diagonal(A, *, fill=0, offset=0)`): A with the cells
 * (i, i + offset) set to `fill` (A need not be square; cells outside it are ignored). An
 * elementwise select on an index mask: one kernel; those cells get no gradient. */
#include <math.h>

#include "ops/linalg/matrix.h"

typedef struct fill_diagonal_args {
    nx_backend backend;
    double fill;
    int64_t offset;
} fill_diagonal_args;

static nx_status check(const nx_op_args *c)
{
    return nx_la_check_float(c, 0, "A", 2);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const fill_diagonal_args *o = c->opts;
    const nx_tensor *a = c->in[0];
    int nd = nx_tensor_ndim(a);
    nx_dtype dt = nx_tensor_dtype(a);
    nx_node an = nx_parameter(g, "A", dt, nd, nx_tensor_shape(a));
    const int64_t *s = nx_tensor_shape(a);
    nx_node i = nx_iota(g, NX_DTYPE_I64, 2, s + nd - 2, 0);
    nx_node j = nx_iota(g, NX_DTYPE_I64, 2, s + nd - 2, 1);
    nx_node on = nx_eq(g, nx_sub(g, j, i), nx_scalar(g, NX_DTYPE_I64, (double)o->offset));
    outs[0] = nx_select(g, on, nx_scalar(g, dt, o->fill), an);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"fill", NX_OPT_FLOAT, "0", NULL, 1, "the value written into the diagonal's cells"},
    {"offset", NX_OPT_INT, "0", NULL, 1, "the diagonal: 0 main, > 0 above, < 0 below"},
};

static const nx_op_field fields[] = {
    {offsetof(fill_diagonal_args, fill), NX_OP_NO_FIELD, sizeof(double)},
    {offsetof(fill_diagonal_args, offset), NX_OP_NO_FIELD, sizeof(int64_t)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_fill_diagonal = {
    .info = {.nopts = 2, .opts = opts},
    .opts_size = sizeof(fill_diagonal_args),
    .fields = fields,
    .backend_offset = offsetof(fill_diagonal_args, backend),
    .check = check,
    .build = build,
    .golden = "linalg",
    .tols = tols,
    .ntols = 2,
};
