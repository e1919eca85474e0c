/* The op `demean` (spec §4.12, api-a §9): x less its (weighted) mean over `axis`,
 *     y = x - sum_axis(w x) / sum_axis(w),   w = weights broadcast to x (or 1),
 * with 0 for the mean where sum(w) = 0. An elementwise graph over two sums: both backends compile
 * it, and autodiff gives the gradients of x and of float weights. */
#include "ops/numerics/numerics.h"

typedef struct demean_args {
    nx_backend backend;
    nx_num_axes axis;
} demean_args;

static nx_status check(const nx_op_args *c)
{
    const demean_args *o = c->opts;
    nx_status st = nx_num_check_float(c, 0, "x");
    if (st == NX_OK)
        st = nx_num_check_broadcast(c, 1, "weights");
    int axes[NX_MAX_DIMS], n;
    if (st == NX_OK)
        st = nx_num_resolve_axes(c, &o->axis, nx_tensor_ndim(c->in[0]), false, "axis", axes, &n);
    return st;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const demean_args *o = c->opts;
    const nx_tensor *xt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(xt);
    int nd = nx_tensor_ndim(xt), axes[NX_MAX_DIMS], n = 0;
    nx_status st = nx_num_resolve_axes(c, &o->axis, nd, false, "axis", axes, &n);
    if (st != NX_OK)
        return st;
    nx_node x = nx_parameter(g, "x", dt, nd, nx_tensor_shape(xt));
    nx_node w = nx_num_weight_input(g, c, 1, "weights", dt);
    nx_node mean;
    if (w == NX_NONE) {
        mean = nx_mean(g, x, n, axes, true);
    } else {
        nx_node wb = nx_broadcast(g, w, nd, nx_tensor_shape(xt));
        nx_node num = nx_reduce(g, nx_mul(g, wb, x), n, axes, NX_MONOID_SUM, true);
        mean = nx_num_safe_div(g, num, nx_reduce(g, wb, n, axes, NX_MONOID_SUM, true));
    }
    outs[0] = nx_sub(g, x, mean);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"axis", NX_OPT_INTS, "-1", NULL, NX_MAX_DIMS,
     "the axes the mean spans; negative counts from the end"},
};

static const nx_op_field fields[] = {
    {offsetof(demean_args, axis.axis), offsetof(demean_args, axis.naxis),
     sizeof(int64_t) * NX_MAX_DIMS},
};

/* a mean of up to a few hundred terms against float64 NumPy */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-13},
};

const nx_op_desc nx_op_demean = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(demean_args),
    .fields = fields,
    .backend_offset = offsetof(demean_args, backend),
    .check = check,
    .build = build,
    .golden = "numerics",
    .tols = tols,
    .ntols = 2,
};
