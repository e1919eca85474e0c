/* The op `zscore_normalize` (spec §4.12, api-a §9): standard scores over `axis` (every axis when
 * not given),
 *     y = (x - mean) / (std + eps),   std = sqrt(sum (x - mean)^2 / (n - ddof)),
 * and with nonzero_mask the statistics are taken over the nonzero elements only and the zeros
 * stay 0 (nnU-Net's masked z-score: a background of exact zeros is not part of the intensity
 * distribution). A graph of sums and elementwise arithmetic: both backends compile it and
 * autodiff gives the gradient. Degenerate counts (no nonzero element, n <= ddof) give a mean or
 * variance of 0 rather than 0/0. */
#include <math.h>

#include "ops/numerics/numerics.h"

typedef struct zscore_args {
    nx_backend backend;
    nx_num_axes axis;
    double eps;
    bool nonzero_mask;
    int64_t ddof;
} zscore_args;

static nx_status check(const nx_op_args *c)
{
    const zscore_args *o = c->opts;
    nx_status st = nx_num_check_float(c, 0, "x");
    int axes[NX_MAX_DIMS], n;
    if (st == NX_OK)
        st = nx_num_resolve_axes(c, &o->axis, nx_tensor_ndim(c->in[0]), true, "axis", axes, &n);
    if (st == NX_OK && !(o->eps >= 0 && isfinite(o->eps)))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: eps is %g; expected a finite value >= 0", c->who, o->eps);
    if (st == NX_OK && o->ddof < 0)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: ddof is %lld; expected >= 0", c->who,
                           (long long)o->ddof);
    return st;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const zscore_args *o = c->opts;
    const nx_tensor *xt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(xt);
    int nd = nx_tensor_ndim(xt), axes[NX_MAX_DIMS], n = 0;
    nx_status st = nx_num_resolve_axes(c, &o->axis, nd, true, "axis", axes, &n);
    if (st != NX_OK)
        return st;
    nx_node x = nx_parameter(g, "x", dt, nd, nx_tensor_shape(xt));
    nx_node zero = nx_scalar(g, dt, 0);
    nx_node m = o->nonzero_mask ? nx_cast(g, nx_ne(g, x, zero), dt) : NX_NONE;
    nx_node cnt;
    if (m != NX_NONE) {
        cnt = nx_reduce(g, m, n, axes, NX_MONOID_SUM, true);
    } else {
        int64_t k = 1;
        for (int i = 0; i < n; i++)
            k *= nx_tensor_shape(xt)[axes[i]];
        cnt = nx_scalar(g, dt, (double)k);
    }
    nx_node xm = m != NX_NONE ? nx_mul(g, x, m) : x;
    nx_node mean = nx_num_safe_div(g, nx_reduce(g, xm, n, axes, NX_MONOID_SUM, true), cnt);
    nx_node d = nx_sub(g, x, mean);
    nx_node d2 = nx_mul(g, d, d);
    if (m != NX_NONE)
        d2 = nx_mul(g, d2, m);
    nx_node den = nx_maximum(g, nx_sub(g, cnt, nx_scalar(g, dt, (double)o->ddof)), zero);
    nx_node var = nx_num_safe_div(g, nx_reduce(g, d2, n, axes, NX_MONOID_SUM, true), den);
    nx_node y = nx_div(g, d, nx_add(g, nx_sqrt(g, var), nx_scalar(g, dt, o->eps)));
    outs[0] = m != NX_NONE ? nx_mul(g, y, m) : y;
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"axis", NX_OPT_INTS, "(all axes)", NULL, NX_MAX_DIMS,
     "the axes the statistics span; negative counts from the end; not given: every axis"},
    {"eps", NX_OPT_FLOAT, "1e-12", "0:", 1, "added to the standard deviation"},
    {"nonzero_mask", NX_OPT_BOOL, "false", NULL, 1,
     "statistics over the nonzero elements only; zeros stay 0"},
    {"ddof", NX_OPT_INT, "0", "0:", 1, "delta degrees of freedom of the variance (numpy.std's)"},
};

static const nx_op_field fields[] = {
    {offsetof(zscore_args, axis.axis), offsetof(zscore_args, axis.naxis),
     sizeof(int64_t) * NX_MAX_DIMS},
    {offsetof(zscore_args, eps), NX_OP_NO_FIELD, sizeof(double)},
    {offsetof(zscore_args, nonzero_mask), NX_OP_NO_FIELD, sizeof(bool)},
    {offsetof(zscore_args, ddof), NX_OP_NO_FIELD, sizeof(int64_t)},
};

/* two sums of up to a few thousand terms and a square root, against float64 NumPy */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 2e-5, 2e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-11, 1e-12},
};

const nx_op_desc nx_op_zscore_normalize = {
    .info = {.nopts = 4, .opts = opts},
    .opts_size = sizeof(zscore_args),
    .fields = fields,
    .backend_offset = offsetof(zscore_args, backend),
    .check = check,
    .build = build,
    .golden = "numerics",
    .tols = tols,
    .ntols = 2,
};
