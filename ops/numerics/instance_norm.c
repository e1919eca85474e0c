/* The op `instance_norm` (spec §4.12, §4.13, api-a §9): each instance normalised over `axes`,
 *     y = (x - mean) / sqrt(var + eps),   var biased (the mean of squared deviations),
 * without an affine part (torch.nn.functional.instance_norm without weight and bias). Default
 * axes: every axis after the first two (N, C, spatial..., PyTorch's channels-first layout; x of
 * rank >= 3). Elementwise over two sums: both backends compile it, autodiff gives the gradient. */
#include <math.h>

#include "ops/numerics/numerics.h"

typedef struct inst_args {
    nx_backend backend;
    nx_num_axes axes;
    double eps;
} inst_args;

static nx_status norm_axes(const nx_op_args *c, int *axes, int *n)
{
    const inst_args *o = c->opts;
    int nd = nx_tensor_ndim(c->in[0]);
    if (o->axes.naxis > 0)
        return nx_num_resolve_axes(c, &o->axes, nd, false, "axes", axes, n);
    if (nd < 3)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: x has rank %d and no axes are given; expected rank >= 3 (N, C, "
                           "spatial...) or the axes",
                           c->who, nd);
    *n = 0;
    for (int k = 2; k < nd; k++)
        axes[(*n)++] = k;
    return NX_OK;
}

static nx_status check(const nx_op_args *c)
{
    const inst_args *o = c->opts;
    nx_status st = nx_num_check_float(c, 0, "x");
    int axes[NX_MAX_DIMS], n;
    if (st == NX_OK && !(o->eps >= 0 && isfinite(o->eps)))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: eps is %g; expected a finite value >= 0", c->who, o->eps);
    if (st == NX_OK)
        st = norm_axes(c, axes, &n);
    return st;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const inst_args *o = c->opts;
    const nx_tensor *xt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(xt);
    int nd = nx_tensor_ndim(xt), axes[NX_MAX_DIMS], n = 0;
    nx_status st = norm_axes(c, axes, &n);
    if (st != NX_OK)
        return st;
    nx_node x = nx_parameter(g, "x", dt, nd, nx_tensor_shape(xt));
    nx_node d = nx_sub(g, x, nx_mean(g, x, n, axes, true));
    nx_node var = nx_mean(g, nx_mul(g, d, d), n, axes, true);
    outs[0] = nx_mul(g, d, nx_rsqrt(g, nx_add(g, var, nx_scalar(g, dt, o->eps))));
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"axes", NX_OPT_INTS, "(every axis after the first two)", NULL, NX_MAX_DIMS,
     "the axes one instance spans; negative counts from the end"},
    {"eps", NX_OPT_FLOAT, "1e-5", "0:", 1, "added to the variance"},
};

static const nx_op_field fields[] = {
    {offsetof(inst_args, axes.axis), offsetof(inst_args, axes.naxis),
     sizeof(int64_t) * NX_MAX_DIMS},
    {offsetof(inst_args, eps), NX_OP_NO_FIELD, sizeof(double)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 2e-5, 2e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-11, 1e-12},
};

const nx_op_desc nx_op_instance_norm = {
    .info = {.nopts = 2, .opts = opts},
    .opts_size = sizeof(inst_args),
    .fields = fields,
    .backend_offset = offsetof(inst_args, backend),
    .check = check,
    .build = build,
    .golden = "numerics",
    .tols = tols,
    .ntols = 2,
};
