/* The op `nmi_grad` (spec §4.10, api-b §4.1): the closed-form gradient of the normalised mutual
 * information NMI = (H_m + H_f) / H_mf (mutual_information with normalized=true) with respect to
 * each moving sample, moving's shape. Moving's soft weights move P[a, b] by
 * dP[a, b] / dm_i = beta_f,i(b) dbeta_m,i(a) / N with dbeta_m = -s_m at l_m and +s_m at l_m + 1,
 * which leaves p_f and so H_f unchanged, and
 *     dH_mf / dm_i = -s_m / N ((1 - t_f) E[l_m, l_f] + t_f E[l_m, l_f + 1]),
 *                    E[a, b] = log P[a + 1, b] - log P[a, b]
 *     dH_m / dm_i  = -s_m / N (log p_m[l_m + 1] - log p_m[l_m])
 *     g_i = (dH_m H_mf - (H_m + H_f) dH_mf) / H_mf^2
 * (the +1 of d(p log p) cancels as in mi_grad; logs of empty cells are 0). 0 where H_mf = 0 (the
 * op's NMI is 0 there) and for samples outside moving's range; the range is held fixed, and
 * sample_stride estimates P from every k-th sample, as mi_grad. Equal to autodiff of
 * mutual_information(normalized=true) under mi_grad's conditions. A graph. */
#include "ops/metrics/histogram.h"

typedef struct nmig_args {
    nx_hist_opts h;
    int64_t sample_stride;
} nmig_args;

static nx_status check(const nx_op_args *c)
{
    const nmig_args *o = c->opts;
    if (o->sample_stride < 1)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: sample_stride is %lld; expected at least 1", c->who,
                           (long long)o->sample_stride);
    return nx_hist_check(c, &o->h, -1);
}

static void key(nx_rt_cache_blob *b, const nx_op_args *c)
{
    const nmig_args *o = c->opts;
    nx_hist_key(b, c, &o->h);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nmig_args *o = c->opts;
    int64_t bins = o->h.bins;
    int nd = nx_tensor_ndim(c->in[0]);
    const int64_t *shape = nx_tensor_shape(c->in[0]);
    nx_dtype dt = nx_tensor_dtype(c->in[0]);
    nx_hist_side m, f;
    nx_node p = nx_hist_joint(g, c, &o->h, -1, o->sample_stride, &m, &f);
    int ax0 = 0, ax1 = 1;
    nx_node pm = nx_reduce(g, p, 1, &ax1, NX_MONOID_SUM, false);
    nx_node pf = nx_reduce(g, p, 1, &ax0, NX_MONOID_SUM, false);
    nx_node hm = nx_hist_entropy(g, pm), hf = nx_hist_entropy(g, pf);
    nx_node hmf = nx_hist_entropy(g, p);
    nx_node e = nx_hist_row_diff(g, nx_hist_safe_log(g, p));
    nx_node dhmf = nx_neg(g, nx_hist_force(g, nx_hist_gather_rows(g, e, &m, &f, bins), &m, bins,
                                           nd, shape));
    nx_node dl = nx_hist_row_diff(g, nx_hist_safe_log(g, pm));
    nx_node dhm = nx_neg(g, nx_hist_force(g, nx_gather(g, nx_hist_table_root(g, dl), m.lower, 0), &m, bins, nd, shape));
    nx_node zero = nx_scalar(g, dt, 0), one = nx_scalar(g, dt, 1);
    nx_node empty = nx_le(g, hmf, zero);
    nx_node den = nx_select(g, empty, one, nx_mul(g, hmf, hmf));
    nx_node num = nx_sub(g, nx_mul(g, dhm, hmf), nx_mul(g, nx_add(g, hm, hf), dhmf));
    outs[0] = nx_select(g, empty, zero, nx_div(g, num, den));
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    NX_HIST_BINS_OPT,
    NX_HIST_RANGE_OPTS,
    {"sample_stride", NX_OPT_INT, "1", "1:", 1,
     "estimate P from every k-th sample; the gradient is still given to every sample"},
    NX_HIST_DRIVER_OPT,
};

static const nx_op_field fields[] = {
    NX_HIST_BINS_FIELD(nmig_args),
    NX_HIST_RANGE_FIELDS(nmig_args),
    {offsetof(nmig_args, sample_stride), NX_OP_NO_FIELD, sizeof(int64_t)},
    NX_HIST_DRIVER_FIELD(nmig_args),
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-4, 1e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-10, 1e-14},
};

const nx_op_desc nx_op_nmi_grad = {
    .info = {.nopts = 5, .opts = opts},
    .opts_size = sizeof(nmig_args),
    .fields = fields,
    .backend_offset = offsetof(nmig_args, h.backend),
    .check = check,
    .key = key,
    .build = build,
    .golden = "metrics",
    .tols = tols,
    .ntols = 2,
};
