/* The op `mutual_information` (spec §4.10, api-b §4.1): the mutual information of two images from
 * their soft joint histogram P (joint_histogram's, histogram.h), in nats, a 0-d value:
 *     MI = sum_{P[a,b] > 0} P[a,b] log(P[a,b] / (p_m[a] p_f[b])),  p_m = sum_b P, p_f = sum_a P
 * and with normalized=true Studholme's normalised mutual information
 *     NMI = (H_m + H_f) / H_mf,  H = -sum_{p > 0} p log p  (in [1, 2])
 * (the JAX version's definition; neither the spec nor api-b defines NMI otherwise). Empty cells
 * count 0 (0 log 0 = 0) and pass no gradient; a table with all its mass in one cell (H_mf = 0:
 * constant images) or none (an empty mask: P = 0) gives MI = 0 and NMI = 0. The JAX version
 * guarded its logs with eps = 1e-10 (log(P / (p_m p_f + eps)), (H_m + H_f) / (H_mf + eps)); this
 * op takes the populated cells exactly instead, which differs from it by about eps / (p_m p_f).
 * A graph over the histogram's: autodiff gives the gradient of moving, fixed and a float mask;
 * mi_grad and nmi_grad are the closed forms of the moving gradient. */
#include "ops/metrics/histogram.h"

typedef struct mi_args {
    nx_hist_opts h;
    bool normalized;
} mi_args;

static nx_status check(const nx_op_args *c)
{
    const mi_args *o = c->opts;
    return nx_hist_check(c, &o->h, 2);
}

static void key(nx_rt_cache_blob *b, const nx_op_args *c)
{
    const mi_args *o = c->opts;
    nx_hist_key(b, c, &o->h);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const mi_args *o = c->opts;
    nx_hist_side m, f;
    nx_node p = nx_hist_joint(g, c, &o->h, 2, 1, &m, &f);
    nx_dtype dt = nx_tensor_dtype(c->in[0]);
    int ax0 = 0, ax1 = 1;
    nx_node pm = nx_reduce(g, p, 1, &ax1, NX_MONOID_SUM, false);
    nx_node pf = nx_reduce(g, p, 1, &ax0, NX_MONOID_SUM, false);
    nx_node hm = nx_hist_entropy(g, pm), hf = nx_hist_entropy(g, pf);
    nx_node hmf = nx_hist_entropy(g, p);
    nx_node zero = nx_scalar(g, dt, 0), one = nx_scalar(g, dt, 1);
    if (o->normalized) {
        nx_node empty = nx_le(g, hmf, zero);
        outs[0] = nx_select(g, empty, zero,
                            nx_div(g, nx_add(g, hm, hf), nx_select(g, empty, one, hmf)));
    } else {
        /* sum_{P > 0} P (log P - log p_m - log p_f): p_m, p_f > 0 wherever P > 0 */
        int64_t col[2] = {o->h.bins, 1}, row[2] = {1, o->h.bins};
        nx_node lm = nx_reshape(g, nx_hist_safe_log(g, pm), 2, col);
        nx_node lf = nx_reshape(g, nx_hist_safe_log(g, pf), 2, row);
        nx_node w = nx_sub(g, nx_sub(g, nx_hist_safe_log(g, p), lm), lf);
        nx_node t = nx_select(g, nx_gt(g, p, zero), nx_mul(g, p, w), zero);
        int axes[2] = {0, 1};
        outs[0] = nx_reduce(g, t, 2, axes, NX_MONOID_SUM, false);
    }
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    NX_HIST_BINS_OPT,
    NX_HIST_RANGE_OPTS,
    {"normalized", NX_OPT_BOOL, "false", NULL, 1,
     "false: MI in nats; true: Studholme's NMI (H_m + H_f) / H_mf"},
    NX_HIST_DRIVER_OPT,
};

static const nx_op_field fields[] = {
    NX_HIST_BINS_FIELD(mi_args),
    NX_HIST_RANGE_FIELDS(mi_args),
    {offsetof(mi_args, normalized), NX_OP_NO_FIELD, sizeof(bool)},
    NX_HIST_DRIVER_FIELD(mi_args),
};

/* The f64 NumPy Parzen oracle (and scikit-learn's mutual_info_score on hard bins). */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 2e-5, 2e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-11, 1e-13},
};

const nx_op_desc nx_op_mutual_information = {
    .info = {.nopts = 5, .opts = opts},
    .opts_size = sizeof(mi_args),
    .fields = fields,
    .backend_offset = offsetof(mi_args, h.backend),
    .check = check,
    .key = key,
    .build = build,
    .golden = "metrics",
    .tols = tols,
    .ntols = 2,
};
