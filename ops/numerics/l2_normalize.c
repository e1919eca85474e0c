/* The op `l2_normalize` (spec §4.12, api-a §9): lp_normalize with p = 2,
 *     y = x / max(||x||_2, eps),
 * computed as x * rsqrt(max(sum x^2, eps^2)), so a zero slice stays 0 with a finite gradient.
 * Elementwise over one sum: both backends compile it and autodiff gives the gradient. */
#include <math.h>

#include "ops/numerics/numerics.h"

typedef struct l2_args {
    nx_backend backend;
    nx_num_axes axis;
    double eps;
} l2_args;

static nx_status check(const nx_op_args *c)
{
    const l2_args *o = c->opts;
    nx_status st = nx_num_check_float(c, 0, "x");
    int axes[NX_MAX_DIMS], n;
    if (st == NX_OK && !(o->eps >= 0 && isfinite(o->eps)))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: eps is %g; expected a finite value >= 0", c->who, o->eps);
    if (st == NX_OK)
        st = nx_num_resolve_axes(c, &o->axis, nx_tensor_ndim(c->in[0]), false, "axis", axes, &n);
    return st;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const l2_args *o = c->opts;
    const nx_tensor *xt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(xt);
    int nd = nx_tensor_ndim(xt), axes[NX_MAX_DIMS], n = 0;
    nx_status st = nx_num_resolve_axes(c, &o->axis, nd, false, "axis", axes, &n);
    if (st != NX_OK)
        return st;
    nx_node x = nx_parameter(g, "x", dt, nd, nx_tensor_shape(xt));
    outs[0] = nx_mul(g, x, nx_num_lp_scale(g, x, 2, n, axes, o->eps));
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"axis", NX_OPT_INTS, "-1", NULL, NX_MAX_DIMS,
     "the axes the norm spans; negative counts from the end"},
    {"eps", NX_OPT_FLOAT, "1e-12", "0:", 1, "the norm's floor (a zero slice stays 0)"},
};

static const nx_op_field fields[] = {
    {offsetof(l2_args, axis.axis), offsetof(l2_args, axis.naxis), sizeof(int64_t) * NX_MAX_DIMS},
    {offsetof(l2_args, eps), NX_OP_NO_FIELD, sizeof(double)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-13},
};

const nx_op_desc nx_op_l2_normalize = {
    .info = {.nopts = 2, .opts = opts},
    .opts_size = sizeof(l2_args),
    .fields = fields,
    .backend_offset = offsetof(l2_args, backend),
    .check = check,
    .build = build,
    .golden = "numerics",
    .tols = tols,
    .ntols = 2,
};
