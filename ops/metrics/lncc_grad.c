/* The op `lncc_grad`: the closed-form gradient of sum(lncc(moving, fixed)) with respect to
 * moving, the local cross-correlation force (spec §4.10). With the box sums and cc of lncc.c,
 * D = var_m var_f + eps, means mbar = S_m / n, fbar = S_f / n, and per window centre
 *   P = 2 cross / D,   Q = -2 cross^2 var_f / D^2,
 * every window hands its derivative back to all of its members:
 *   grad = f B^T(P) - B^T(P fbar) + m B^T(Q) - B^T(Q mbar),
 * B^T the transpose of the box sum (box.h), the padded samples folded back onto their sources
 * by the border rule, so this is the exact gradient everywhere, borders included (the JAX
 * version applied the forward box sum instead and matched autodiff in the interior only). It
 * agrees with nx_op_vjp of lncc with reduction=sum (tests/metrics/test-similarity.c). An IR
 * graph of nine box sums; not itself differentiated (a force, not a score). */
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
    nx_node n = nx_scalar(g, dt, b.count), two = nx_scalar(g, dt, 2.0);
    nx_node cross = nx_sub(g, s.smf, nx_div(g, nx_mul(g, s.sm, s.sf), n));
    nx_node var_m = nx_sub(g, s.smm, nx_div(g, nx_mul(g, s.sm, s.sm), n));
    nx_node var_f = nx_sub(g, s.sff, nx_div(g, nx_mul(g, s.sf, s.sf), n));
    nx_node den = nx_add(g, nx_mul(g, var_m, var_f), nx_scalar(g, dt, o->eps));
    nx_node p = nx_div(g, nx_mul(g, two, cross), den);
    nx_node q = nx_neg(g, nx_div(g, nx_mul(g, nx_mul(g, p, cross), var_f), den));
    nx_node mbar = nx_div(g, s.sm, n), fbar = nx_div(g, s.sf, n);
    nx_node bp = nx_metric_box_sum_t(g, p, &b), bq = nx_metric_box_sum_t(g, q, &b);
    nx_node bpf = nx_metric_box_sum_t(g, nx_mul(g, p, fbar), &b);
    nx_node bqm = nx_metric_box_sum_t(g, nx_mul(g, q, mbar), &b);
    outs[0] = nx_add(g, nx_sub(g, nx_mul(g, f, bp), bpf), nx_sub(g, nx_mul(g, m, bq), bqm));
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    NX_METRIC_RADIUS_OPT,
    NX_METRIC_MODE_OPT,
    {"eps", NX_OPT_FLOAT, "1e-5", "0:", 1, "added to var_m var_f, as lncc's"},
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
    {NX_DTYPE_F64, NULL, NULL, 1e-9, 1e-11},
};

const nx_op_desc nx_op_lncc_grad = {
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
