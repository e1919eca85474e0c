/* The op `robust_zscore_normalize` (spec §4.12, api-a §9): the robust standard score over `axis`
 * (every axis when not given), median and median absolute deviation in place of mean and std,
 *     y = (x - med) / (scale MAD + eps),   med = median(x),  MAD = median(|x - med|),
 * scale = 1.4826 by default (1 / Phi^-1(3/4): scale MAD estimates sigma for normal data, as
 * scipy.stats.median_abs_deviation(scale='normal') and Iglewicz-Hoaglin's modified z-score).
 * Medians are numpy.median (the linear percentile 50) of sorted lines; the graph is two sorts,
 * weighted gathers and elementwise arithmetic, so both backends compile it and autodiff gives the
 * gradient through the sorts (almost everywhere: not at ties). */
#include <math.h>

#include "ops/numerics/numerics.h"

typedef struct robust_args {
    nx_backend backend;
    nx_num_axes axis;
    double eps, scale;
} robust_args;

static nx_status check(const nx_op_args *c)
{
    const robust_args *o = c->opts;
    nx_status st = nx_num_check_float(c, 0, "x");
    int axes[NX_MAX_DIMS], n;
    if (st == NX_OK)
        st = nx_num_resolve_axes(c, &o->axis, nx_tensor_ndim(c->in[0]), true, "axis", axes, &n);
    if (st == NX_OK && !(o->eps >= 0 && isfinite(o->eps)))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: eps is %g; expected a finite value >= 0", c->who, o->eps);
    if (st == NX_OK && !(o->scale > 0 && isfinite(o->scale)))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: scale is %g; expected a finite value > 0", c->who, o->scale);
    return st;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const robust_args *o = c->opts;
    const nx_tensor *xt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(xt);
    int nd = nx_tensor_ndim(xt), axes[NX_MAX_DIMS], n = 0;
    nx_status st = nx_num_resolve_axes(c, &o->axis, nd, true, "axis", axes, &n);
    if (st != NX_OK)
        return st;
    nx_node x = nx_parameter(g, "x", dt, nd, nx_tensor_shape(xt));
    nx_node l = nx_num_to_lines(g, x, n, axes);
    nx_node med = nx_num_percentile(g, nx_sort(g, l, 1, false), NX_NONE, 50);
    nx_node d = nx_sub(g, l, med);
    nx_node mad = nx_num_percentile(g, nx_sort(g, nx_abs(g, d), 1, false), NX_NONE, 50);
    nx_node den = nx_add(g, nx_mul(g, nx_scalar(g, dt, o->scale), mad), nx_scalar(g, dt, o->eps));
    outs[0] = nx_num_from_lines(g, nx_div(g, d, den), nd, nx_tensor_shape(xt), n, axes);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"axis", NX_OPT_INTS, "(all axes)", NULL, NX_MAX_DIMS,
     "the axes the median and MAD span; negative counts from the end; not given: every axis"},
    {"eps", NX_OPT_FLOAT, "1e-12", "0:", 1, "added to scale * MAD"},
    {"scale", NX_OPT_FLOAT, "1.4826", "0:", 1,
     "the MAD's factor (1.4826: a consistent estimate of sigma for normal data; 1: the raw MAD)"},
};

static const nx_op_field fields[] = {
    {offsetof(robust_args, axis.axis), offsetof(robust_args, axis.naxis),
     sizeof(int64_t) * NX_MAX_DIMS},
    {offsetof(robust_args, eps), NX_OP_NO_FIELD, sizeof(double)},
    {offsetof(robust_args, scale), NX_OP_NO_FIELD, sizeof(double)},
};

/* order statistics and one lerp each against float64 numpy.median */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-13},
};

const nx_op_desc nx_op_robust_zscore_normalize = {
    .info = {.nopts = 3, .opts = opts},
    .opts_size = sizeof(robust_args),
    .fields = fields,
    .backend_offset = offsetof(robust_args, backend),
    .check = check,
    .build = build,
    .golden = "numerics",
    .tols = tols,
    .ntols = 2,
    .fd_note = "the medians are order statistics: differentiable away from ties",
};
