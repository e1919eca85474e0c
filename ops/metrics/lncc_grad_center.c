/* The op `lncc_grad_center`: the centre-only local cross-correlation force of ITK's
 * ANTSNeighborhoodCorrelation metric (the ANTs convention, spec §4.10): each window's derivative
 * is attributed to its centre voxel only, from the five box sums of lncc.c:
 *   s_ff = S_ff - S_f^2 / n,  s_mm = S_mm - S_m^2 / n,  s_fm = S_mf - S_m S_f / n,
 *   f_a  = f - S_f / n,       m_a  = m - S_m / n          (centre minus window mean),
 *   grad = 2 s_fm / (s_ff s_mm) (f_a - (s_fm / s_mm) m_a),
 * and 0 where s_ff <= eps or s_mm <= eps (ITK's guard against a flat window). A different and
 * cheaper force than lncc_grad (not the gradient of lncc: no second box-sum pass). The border is
 * `mode`'s (ITK trims windows at the image edge instead; the interior is ITK's formula). Not
 * differentiated (a force). */
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
    return NX_OK;
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
    nx_node m = nx_input(g, "moving", dt, nd, nx_tensor_shape(mt));
    nx_node f = nx_input(g, "fixed", dt, nd, nx_tensor_shape(mt));
    nx_lncc_sums s;
    nx_lncc_sums_build(g, &m, &f, &b, &s);
    nx_node n = nx_scalar(g, dt, b.count), eps = nx_scalar(g, dt, o->eps);
    nx_node one = nx_scalar(g, dt, 1.0), zero = nx_scalar(g, dt, 0.0);
    nx_node s_fm = nx_sub(g, s.smf, nx_div(g, nx_mul(g, s.sm, s.sf), n));
    nx_node s_mm = nx_sub(g, s.smm, nx_div(g, nx_mul(g, s.sm, s.sm), n));
    nx_node s_ff = nx_sub(g, s.sff, nx_div(g, nx_mul(g, s.sf, s.sf), n));
    nx_node f_a = nx_sub(g, f, nx_div(g, s.sf, n));
    nx_node m_a = nx_sub(g, m, nx_div(g, s.sm, n));
    nx_node safe = nx_and(g, nx_gt(g, s_ff, eps), nx_gt(g, s_mm, eps));
    /* the divisors of flat windows replaced by 1, so no 0/0 is formed even where discarded */
    nx_node den = nx_select(g, safe, nx_mul(g, s_ff, s_mm), one);
    nx_node smm = nx_select(g, safe, s_mm, one);
    nx_node ratio = nx_div(g, s_fm, smm);
    nx_node grad = nx_mul(g, nx_div(g, nx_mul(g, nx_scalar(g, dt, 2.0), s_fm), den),
                          nx_sub(g, f_a, nx_mul(g, ratio, m_a)));
    outs[0] = nx_select(g, safe, grad, zero);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    NX_METRIC_RADIUS_OPT,
    NX_METRIC_MODE_OPT,
    {"eps", NX_OPT_FLOAT, "1e-5", "0:", 1,
     "flat-window threshold: 0 where s_ff <= eps or s_mm <= eps"},
    NX_METRIC_SPATIAL_RANK_OPT,
};

#define F(m) offsetof(nx_lncc_args, m), NX_OP_NO_FIELD, sizeof(((nx_lncc_args *)0)->m)
static const nx_op_field fields[] = {
    {offsetof(nx_lncc_args, radius), offsetof(nx_lncc_args, nradius),
     sizeof(int64_t[NX_MAX_DIMS])},
    {F(mode)},
    {F(eps)},
    {F(spatial_rank)},
};
#undef F

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 2e-4, 2e-5},
    {NX_DTYPE_F64, NULL, NULL, 1e-10, 1e-11},
};

const nx_op_desc nx_op_lncc_grad_center = {
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
