/* The op `lncc`: local normalised cross-correlation, the ANTs form (spec §4.10), unreduced by
 * default. With box sums S over the (2r+1)^d window around each voxel (box.h: the border by
 * `mode`, scipy.ndimage's meanings, so every window counts n = prod(2 r_a + 1) samples),
 *   cross = S_mf - S_m S_f / n,  var_m = S_mm - S_m^2 / n,  var_f = S_ff - S_f^2 / n,
 *   cc    = cross^2 / (var_m var_f + eps),
 * the squared windowed correlation, in [0, 1] up to rounding (eps > 0 keeps a flat window at
 * 0 / eps = 0 instead of 0/0). The mask weights the reduction only (the family's one reduction,
 * metrics.h): the box sums of an in-mask voxel still read its out-of-mask neighbours, as in the
 * JAX version. Leading axes beyond spatial_rank (0: min(rank, 3)) are batch. An IR graph: both
 * backends compile it and autodiff gives the gradients of moving, fixed and a float mask; the
 * closed form of the moving gradient is lncc_grad. The JAX version defaulted to `mean`; the spec
 * (§5) and this op default to `none` (CHANGELOG.md). */
#include <math.h>

#include "ops/metrics/box.h"
#include "ops/metrics/metrics.h"

static nx_status check(const nx_op_args *c)
{
    nx_metric_box b;
    nx_status st = nx_lncc_plan(c, &b);
    if (st != NX_OK)
        return st;
    const nx_lncc_args *o = c->opts;
    if (!(o->eps >= 0) || !isfinite(o->eps))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: eps is %g; expected a finite value >= 0", c->who, o->eps);
    return nx_metric_check_mask(c, c->in[2], nx_tensor_ndim(c->in[0]), nx_tensor_shape(c->in[0]));
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_lncc_args *o = c->opts;
    nx_metric_box b;
    nx_status st = nx_lncc_plan(c, &b);
    if (st != NX_OK)
        return st;
    const nx_tensor *mt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(mt);
    int nd = nx_tensor_ndim(mt);
    nx_node m = nx_parameter(g, "moving", dt, nd, nx_tensor_shape(mt));
    nx_node f = nx_parameter(g, "fixed", dt, nd, nx_tensor_shape(mt));
    nx_node w = nx_metric_mask_input(g, c->in[2]);
    nx_lncc_sums s;
    nx_lncc_sums_build(g, &m, &f, &b, &s);
    nx_node n = nx_scalar(g, dt, b.count);
    nx_node cross = nx_sub(g, s.smf, nx_div(g, nx_mul(g, s.sm, s.sf), n));
    nx_node var_m = nx_sub(g, s.smm, nx_div(g, nx_mul(g, s.sm, s.sm), n));
    nx_node var_f = nx_sub(g, s.sff, nx_div(g, nx_mul(g, s.sf, s.sf), n));
    nx_node den = nx_add(g, nx_mul(g, var_m, var_f), nx_scalar(g, dt, o->eps));
    nx_node cc = nx_div(g, nx_mul(g, cross, cross), den);
    outs[0] = nx_metric_reduce(g, cc, w, (nx_metric_reduction)o->reduction);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    NX_METRIC_RADIUS_OPT,
    NX_METRIC_MODE_OPT,
    {"eps", NX_OPT_FLOAT, "1e-5", "0:", 1, "added to var_m var_f (a flat window gives 0, not 0/0)"},
    NX_METRIC_REDUCTION_OPT,
    NX_METRIC_SPATIAL_RANK_OPT,
};

#define F(m) offsetof(nx_lncc_args, m), NX_OP_NO_FIELD, sizeof(((nx_lncc_args *)0)->m)
static const nx_op_field fields[] = {
    {offsetof(nx_lncc_args, radius), offsetof(nx_lncc_args, nradius),
     sizeof(int64_t[NX_MAX_DIMS])},
    {F(mode)},
    {F(eps)},
    {F(reduction)},
    {F(spatial_rank)},
};
#undef F

/* f32: the windowed variances cancel (S_mm - S_m^2 / n), which rounding amplifies; measured
 * errors on the golden cases are in docs/metrics.md. */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 2e-4, 2e-5},
    {NX_DTYPE_F64, NULL, NULL, 1e-10, 1e-12},
};

const nx_op_desc nx_op_lncc = {
    .info = {.nopts = sizeof opts / sizeof opts[0], .opts = opts},
    .opts_size = sizeof(nx_lncc_args),
    .fields = fields,
    .backend_offset = offsetof(nx_lncc_args, backend),
    .check = check,
    .build = build,
    .golden = "metrics",
    .tols = tols,
    .ntols = sizeof tols / sizeof tols[0],
};
