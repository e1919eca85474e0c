/* The op `joint_histogram` (spec §4.10, api-b §4.3): the differentiable joint intensity histogram
 * of two images by triangular (linear) Parzen soft binning, normalised to a joint probability
 * table P (bins, bins), rows moving's bins and columns fixed's:
 *     P[a, b] = sum_i w_i beta_m,i(a) beta_f,i(b) / sum_i w_i
 * where each sample gives weight 1 - t to its lower bin l and t to l + 1 in each image
 * (histogram.h has the binning), and w is the mask (absent: 1). An empty mask gives the all-zero
 * table. The divergent-op site `metrics.joint_histogram` (runtime/divergent.def): the onehot
 * driver (canonical: two (N, bins) soft one-hot matrices and a matmul folded in ascending sample
 * order) and the scatter driver (fast: scatter-add); reproducible mode forces onehot. A graph:
 * both backends compile it, autodiff differentiates it through the soft weights (and through a
 * data-derived range's min and max). */
#include "ops/metrics/histogram.h"

typedef struct jh_args {
    nx_hist_opts h;
} jh_args;

static nx_status check(const nx_op_args *c)
{
    const jh_args *o = c->opts;
    return nx_hist_check(c, &o->h, 2);
}

static void key(nx_rt_cache_blob *b, const nx_op_args *c)
{
    const jh_args *o = c->opts;
    nx_hist_key(b, c, &o->h);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const jh_args *o = c->opts;
    nx_hist_side m, f;
    outs[0] = nx_hist_joint(g, c, &o->h, 2, 1, &m, &f);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {NX_HIST_BINS_OPT, NX_HIST_RANGE_OPTS, NX_HIST_DRIVER_OPT};

static const nx_op_field fields[] = {
    NX_HIST_BINS_FIELD(jh_args),
    NX_HIST_RANGE_FIELDS(jh_args),
    NX_HIST_DRIVER_FIELD(jh_args),
};

/* The f64 NumPy Parzen oracle; f32 sums of up to a few thousand samples (the golden cases) and the
 * drivers' contract (runtime/divergent.def: f32 2e-4, f64 1e-10, api-b §0). */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-14},
};

const nx_op_desc nx_op_joint_histogram = {
    .info = {.nopts = 4, .opts = opts},
    .opts_size = sizeof(jh_args),
    .fields = fields,
    .backend_offset = offsetof(jh_args, h.backend),
    .check = check,
    .key = key,
    .build = build,
    .golden = "metrics",
    .tols = tols,
    .ntols = 2,
};
