/* The op `inv_logdet` (api-b §1.1 `small_inv_logdet(A, n)` -> (inv, logdet)): the inverse and the
 * log-determinant of a batch of SPD matrices in one pass. As the JAX version: a closed form for
 * p <= 2 (1/a and log a; the adjugate over det and log det), for p > 2 the Cholesky factor L of
 * a (read from its lower triangle), its inverse by forward substitution, inv = L^-T L^-1 and
 * logdet = 2 sum_i log L_ii, all unrolled over p at graph-build time (linalg.h). A problem that
 * is not SPD (p > 2), or whose determinant is not positive (p <= 2), gets NaN in both outputs.
 * Oracles: numpy.linalg.inv and slogdet. Autodiff differentiates the composition. */
#include "ops/linalg/linalg.h"

typedef struct inv_logdet_args {
    nx_backend backend;
} inv_logdet_args;

static nx_status check(const nx_op_args *c)
{
    return nx_la_check_square(c, 0, "a", NX_LA_MAX_P);
}

static void closed_form(nx_graph *g, const nx_la_mat *a, nx_la_mat *inv, nx_node *logdet,
                        nx_node *ok)
{
    nx_dtype dt = nx_node_dtype(g, a->e[0]);
    inv->rows = inv->cols = a->rows;
    if (a->rows == 1) {
        *ok = nx_gt(g, a->e[0], nx_scalar(g, dt, 0));
        inv->e[0] = nx_div(g, nx_scalar(g, dt, 1), a->e[0]);
        *logdet = nx_log(g, a->e[0]);
        return;
    }
    const nx_node *e = a->e;
    nx_node det = nx_sub(g, nx_mul(g, e[0], e[3]), nx_mul(g, e[1], e[2]));
    *ok = nx_gt(g, det, nx_scalar(g, dt, 0));
    inv->e[0] = nx_div(g, e[3], det);
    inv->e[1] = nx_div(g, nx_neg(g, e[1]), det);
    inv->e[2] = nx_div(g, nx_neg(g, e[2]), det);
    inv->e[3] = nx_div(g, e[0], det);
    *logdet = nx_log(g, det);
}

static void by_cholesky(nx_graph *g, const nx_la_mat *a, nx_la_mat *inv, nx_node *logdet,
                        nx_node *ok)
{
    int p = a->rows;
    nx_dtype dt = nx_node_dtype(g, a->e[0]);
    nx_la_mat l, li; /* li: L^-1, lower */
    nx_la_cholesky(g, a, 0, &l, ok, NULL);
    li.rows = li.cols = p;
    nx_node one = nx_scalar(g, dt, 1);
    for (int i = 0; i < p; i++) {
        li.e[i * p + i] = nx_div(g, one, l.e[i * p + i]);
        for (int j = 0; j < i; j++) {
            nx_node s = NX_NONE;
            for (int k = j; k < i; k++) {
                nx_node t = nx_mul(g, l.e[i * p + k], li.e[k * p + j]);
                s = s ? nx_add(g, s, t) : t;
            }
            li.e[i * p + j] = nx_neg(g, nx_div(g, s, l.e[i * p + i]));
        }
    }
    inv->rows = inv->cols = p;
    for (int i = 0; i < p; i++)
        for (int j = 0; j <= i; j++) {
            nx_node s = NX_NONE;
            for (int k = i; k < p; k++) {
                nx_node t = nx_mul(g, li.e[k * p + i], li.e[k * p + j]);
                s = s ? nx_add(g, s, t) : t;
            }
            inv->e[i * p + j] = inv->e[j * p + i] = s;
        }
    nx_node s = NX_NONE;
    for (int i = 0; i < p; i++) {
        nx_node t = nx_log(g, l.e[i * p + i]);
        s = s ? nx_add(g, s, t) : t;
    }
    *logdet = nx_mul(g, nx_scalar(g, dt, 2), s);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_tensor *a = c->in[0];
    nx_node an = nx_parameter(g, "a", nx_tensor_dtype(a), nx_tensor_ndim(a), nx_tensor_shape(a));
    nx_la_mat am, inv;
    nx_la_entries(g, an, &am);
    nx_node logdet = NX_NONE, ok = NX_NONE;
    if (am.rows <= 2)
        closed_form(g, &am, &inv, &logdet, &ok);
    else
        by_cholesky(g, &am, &inv, &logdet, &ok);
    for (int i = 0; i < inv.rows * inv.cols; i++)
        inv.e[i] = nx_la_poison(g, ok, inv.e[i]);
    nx_node ld = nx_la_poison(g, ok, logdet), row = NX_NONE;
    nx_la_split_extra(g, nx_la_assemble_extra(g, &inv, &ld, 1), &outs[0], &row);
    int nd = nx_tensor_ndim(a);
    int64_t lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS];
    nx_node_shape(g, row, hi);
    hi[nd - 1] = 1;
    outs[1] = nx_reshape(g, nx_slice(g, row, lo, hi, NULL), nd - 2, nx_tensor_shape(a));
    return nx_graph_status(g);
}

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-4, 1e-5},
    {NX_DTYPE_F64, NULL, NULL, 1e-10, 1e-12},
};

const nx_op_desc nx_op_inv_logdet = {
    .opts_size = sizeof(inv_logdet_args),
    .backend_offset = offsetof(inv_logdet_args, backend),
    .check = check,
    .build = build,
    .golden = "linalg",
    .tols = tols,
    .ntols = 2,
};
