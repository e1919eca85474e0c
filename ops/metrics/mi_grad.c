/* The op `mi_grad` (spec §4.10, api-b §4.3): the closed-form (Mattes 2003) gradient of
 * mutual_information (unnormalised) with respect to each moving sample, moving's shape:
 *     g_i = s_m / N * ((1 - t_f,i) D[l_m,i, l_f,i] + t_f,i D[l_m,i, l_f,i + 1])
 *     D[a, b] = W[a + 1, b] - W[a, b],  W = log P - log p_m  on populated cells (0 elsewhere)
 * with s_m = (bins - 1) / max(hi_m - lo_m, 1e-6), l, t the soft bins (histogram.h) and 0 for
 * samples outside moving's range. Differentiating MI through moving's soft weights only, the +1
 * and log p_f terms cancel because each sample's weights sum to one. The range is held fixed
 * (pin it with range_moving for a stationary objective); with a data-derived range this is the
 * derivative at every sample but the minimum and maximum, whose full derivative also moves the
 * range. Equal to autodiff of mutual_information wherever the cells next to a sample are
 * populated (every sample strictly between bin centres populates them itself); an empty
 * neighbour cell is where the masked log is not smooth (the JAX version's documented divergence).
 * sample_stride k estimates P from every k-th sample (flattened order; ITK's regular sampling)
 * and still applies the gradient to every sample with 1 / N of the full count, as the JAX
 * version does; k = 1 is the exact derivative. A graph: a histogram, a (bins - 1, bins) table and
 * two gathers per sample. */
#include "ops/metrics/histogram.h"

typedef struct mig_args {
    nx_hist_opts h;
    int64_t sample_stride;
} mig_args;

static nx_status check(const nx_op_args *c)
{
    const mig_args *o = c->opts;
    if (o->sample_stride < 1)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: sample_stride is %lld; expected at least 1", c->who,
                           (long long)o->sample_stride);
    return nx_hist_check(c, &o->h, -1);
}

static void key(nx_rt_cache_blob *b, const nx_op_args *c)
{
    const mig_args *o = c->opts;
    nx_hist_key(b, c, &o->h);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const mig_args *o = c->opts;
    int64_t bins = o->h.bins;
    nx_hist_side m, f;
    nx_node p = nx_hist_joint(g, c, &o->h, -1, o->sample_stride, &m, &f);
    int ax1 = 1;
    int64_t col[2] = {bins, 1};
    nx_node pm = nx_reduce(g, p, 1, &ax1, NX_MONOID_SUM, false);
    nx_node w = nx_sub(g, nx_hist_safe_log(g, p), nx_reshape(g, nx_hist_safe_log(g, pm), 2, col));
    nx_dtype dt = nx_tensor_dtype(c->in[0]);
    w = nx_select(g, nx_gt(g, p, nx_scalar(g, dt, 0)), w, nx_scalar(g, dt, 0));
    nx_node v = nx_hist_gather_rows(g, nx_hist_row_diff(g, w), &m, &f, bins);
    outs[0] = nx_hist_force(g, v, &m, bins, nx_tensor_ndim(c->in[0]), nx_tensor_shape(c->in[0]));
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
    NX_HIST_BINS_FIELD(mig_args),
    NX_HIST_RANGE_FIELDS(mig_args),
    {offsetof(mig_args, sample_stride), NX_OP_NO_FIELD, sizeof(int64_t)},
    NX_HIST_DRIVER_FIELD(mig_args),
};

/* The f64 NumPy closed form; f32 values are differences of f32 logs of counts. */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-4, 1e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-10, 1e-14},
};

const nx_op_desc nx_op_mi_grad = {
    .info = {.nopts = 5, .opts = opts},
    .opts_size = sizeof(mig_args),
    .fields = fields,
    .backend_offset = offsetof(mig_args, h.backend),
    .check = check,
    .key = key,
    .build = build,
    .golden = "metrics",
    .tols = tols,
    .ntols = 2,
};
