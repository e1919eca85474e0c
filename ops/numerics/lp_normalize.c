/* The op `lp_normalize` (spec §4.12, api-a §9): x scaled to unit p-norm along `axis`, as
 * torch.nn.functional.normalize,
 *     y = x / max(||x||_p, eps),   ||x||_p = (sum |x|^p)^(1/p),  p > 0 (default 2),
 * so a zero slice stays 0. p = 2 is computed as l2_normalize does (sqrt of a sum of squares, with
 * a finite gradient at 0). Elementwise over one sum: both backends compile it and autodiff gives
 * the gradient. */
#include <math.h>

#include "ops/numerics/numerics.h"

typedef struct lp_args {
    nx_backend backend;
    double p;
    nx_num_axes axis;
    double eps;
} lp_args;

static nx_status check(const nx_op_args *c)
{
    const lp_args *o = c->opts;
    nx_status st = nx_num_check_float(c, 0, "x");
    int axes[NX_MAX_DIMS], n;
    if (st == NX_OK && !(o->p > 0 && isfinite(o->p)))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: p is %g; expected a finite p > 0",
                           c->who, o->p);
    if (st == NX_OK && !(o->eps >= 0 && isfinite(o->eps)))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: eps is %g; expected a finite value >= 0", c->who, o->eps);
    if (st == NX_OK)
        st = nx_num_resolve_axes(c, &o->axis, nx_tensor_ndim(c->in[0]), false, "axis", axes, &n);
    return st;
}

/* 1 / max(||x||_p, eps) along the axes, keepdims. */
nx_node nx_num_lp_scale(nx_graph *g, nx_node x, double p, int n, const int *axes, double eps)
{
    nx_dtype dt = nx_node_dtype(g, x);
    if (p == 2) {
        nx_node ss = nx_reduce(g, nx_mul(g, x, x), n, axes, NX_MONOID_SUM, true);
        return nx_rsqrt(g, nx_maximum(g, ss, nx_scalar(g, dt, eps * eps)));
    }
    nx_node a = nx_abs(g, x);
    nx_node ap = p == 1 ? a : nx_pow(g, a, nx_scalar(g, dt, p));
    nx_node s = nx_reduce(g, ap, n, axes, NX_MONOID_SUM, true);
    nx_node norm = p == 1 ? s : nx_pow(g, s, nx_scalar(g, dt, 1.0 / p));
    return nx_div(g, nx_scalar(g, dt, 1), nx_maximum(g, norm, nx_scalar(g, dt, eps)));
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const lp_args *o = c->opts;
    const nx_tensor *xt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(xt);
    int nd = nx_tensor_ndim(xt), axes[NX_MAX_DIMS], n = 0;
    nx_status st = nx_num_resolve_axes(c, &o->axis, nd, false, "axis", axes, &n);
    if (st != NX_OK)
        return st;
    nx_node x = nx_parameter(g, "x", dt, nd, nx_tensor_shape(xt));
    outs[0] = nx_mul(g, x, nx_num_lp_scale(g, x, o->p, n, axes, o->eps));
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"p", NX_OPT_FLOAT, "2", "0:", 1, "the norm's exponent, finite and > 0"},
    {"axis", NX_OPT_INTS, "-1", NULL, NX_MAX_DIMS,
     "the axes the norm spans; negative counts from the end"},
    {"eps", NX_OPT_FLOAT, "1e-12", "0:", 1, "the norm's floor (a zero slice stays 0)"},
};

static const nx_op_field fields[] = {
    {offsetof(lp_args, p), NX_OP_NO_FIELD, sizeof(double)},
    {offsetof(lp_args, axis.axis), offsetof(lp_args, axis.naxis), sizeof(int64_t) * NX_MAX_DIMS},
    {offsetof(lp_args, eps), NX_OP_NO_FIELD, sizeof(double)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-13},
};

const nx_op_desc nx_op_lp_normalize = {
    .info = {.nopts = 3, .opts = opts},
    .opts_size = sizeof(lp_args),
    .fields = fields,
    .backend_offset = offsetof(lp_args, backend),
    .check = check,
    .build = build,
    .golden = "numerics",
    .tols = tols,
    .ntols = 2,
};
