/* The op `ssd`: the sum-of-squared-differences score kernel (spec §4.10), unreduced by default,
 *   y = (moving - fixed)^2 elementwise,
 * with the family's one reduction (metrics.h): sum_i w_i y_i, or the mask-weighted mean
 * sum_i w_i y_i / sum_i w_i. An elementwise graph: both backends compile it and autodiff gives
 * the gradients of moving, fixed and a float mask. The JAX version defaulted to `mean`; the spec
 * (§5) and this op default to `none` (CHANGELOG.md). */
#include "ops/metrics/metrics.h"

typedef struct ssd_args {
    nx_backend backend;
    int reduction; /* nx_metric_reduction */
} ssd_args;

static nx_status check(const nx_op_args *c)
{
    nx_status st = nx_metric_check_pair(c, 0, 1);
    if (st != NX_OK)
        return st;
    return nx_metric_check_mask(c, c->in[2], nx_tensor_ndim(c->in[0]), nx_tensor_shape(c->in[0]));
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const ssd_args *o = c->opts;
    const nx_tensor *m = c->in[0];
    nx_dtype dt = nx_tensor_dtype(m);
    int nd = nx_tensor_ndim(m);
    nx_node a = nx_parameter(g, "moving", dt, nd, nx_tensor_shape(m));
    nx_node b = nx_parameter(g, "fixed", dt, nd, nx_tensor_shape(m));
    nx_node w = nx_metric_mask_input(g, c->in[2]);
    nx_node d = nx_sub(g, a, b);
    outs[0] = nx_metric_reduce(g, nx_mul(g, d, d), w, (nx_metric_reduction)o->reduction);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {NX_METRIC_REDUCTION_OPT};

static const nx_op_field fields[] = {
    {offsetof(ssd_args, reduction), NX_OP_NO_FIELD, sizeof(int)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 2e-6, 1e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-13, 1e-13},
};

const nx_op_desc nx_op_ssd = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(ssd_args),
    .fields = fields,
    .backend_offset = offsetof(ssd_args, backend),
    .check = check,
    .build = build,
    .golden = "metrics",
    .tols = tols,
    .ntols = 2,
};
