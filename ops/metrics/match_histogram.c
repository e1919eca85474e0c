/* The op `match_histogram` (spec §4.10, api-b §4.1): maps moving's intensities onto reference's
 * distribution by quantile transport, the JAX version's algorithm (ANTs' --use-histogram-matching):
 *     q_k = k / (bins - 1), k = 0..bins-1 (numpy.linspace(0, 1, bins))
 *     xp = numpy.quantile(moving, q), fp = numpy.quantile(reference, q)   (method linear)
 *     y = numpy.interp(moving, xp, fp)
 * numpy.interp's rule: j = the last knot with xp[j] <= x; y = fp[j] + (fp[j+1] - fp[j]) /
 * (xp[j+1] - xp[j]) (x - xp[j]), and fp[bins - 1] from the last knot on. (skimage's
 * match_histograms maps through the exact CDFs of the unique values instead, a different
 * algorithm; it is not this op's oracle.) A graph: two sorts and gathers for the knots
 * (histogram.c's quantiles), a count of knots below each sample for j, and the interpolation;
 * autodiff differentiates it with respect to both images (j is piecewise constant). The count is
 * bins comparisons per sample. */
#include <math.h>

#include "ops/metrics/histogram.h"

typedef struct mh_args {
    nx_backend backend;
    int64_t bins;
} mh_args;

#define MH_MAX_BINS 65536

static nx_status check(const nx_op_args *c)
{
    const mh_args *o = c->opts;
    const nx_tensor *m = c->in[0], *r = c->in[1];
    nx_dtype dm = nx_tensor_dtype(m), dr = nx_tensor_dtype(r);
    if (dm != NX_DTYPE_F32 && dm != NX_DTYPE_F64)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: moving is %s; expected f32 or f64",
                           c->who, nx_dtype_name(dm));
    if (dr != dm)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: reference is %s but moving is %s; expected the same float dtype",
                           c->who, nx_dtype_name(dr), nx_dtype_name(dm));
    const nx_tensor *t[2] = {m, r};
    for (int i = 0; i < 2; i++)
        if (nx_tensor_numel(t[i]) == 0 || nx_tensor_numel(t[i]) > INT32_MAX)
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: %s has %lld elements; expected 1 .. 2^31 - 1", c->who,
                               c->info->inputs[i], (long long)nx_tensor_numel(t[i]));
    if (o->bins < 2 || o->bins > MH_MAX_BINS)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: bins is %lld; expected 2..%d quantile knots", c->who,
                           (long long)o->bins, MH_MAX_BINS);
    return NX_OK;
}

/* The quantiles of x's elements at q: (bins,). */
static nx_node knots(nx_graph *g, nx_node x, int64_t n, const double *q, int64_t bins,
                     int32_t *idx, double *t, bool *side)
{
    nx_node v = nx_reshape(g, x, 1, &n);
    return nx_hist_quantiles(g, nx_sort(g, v, 0, false), n, q, bins, idx, t, side);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const mh_args *o = c->opts;
    const nx_tensor *m = c->in[0], *r = c->in[1];
    nx_dtype dt = nx_tensor_dtype(m);
    int64_t bins = o->bins, n = nx_tensor_numel(m), nr = nx_tensor_numel(r);
    nx_node a = nx_parameter(g, "moving", dt, nx_tensor_ndim(m), nx_tensor_shape(m));
    nx_node b = nx_parameter(g, "reference", dt, nx_tensor_ndim(r), nx_tensor_shape(r));
    size_t bytes = (size_t)bins * (2 * sizeof(double) + sizeof(int32_t) + sizeof(bool));
    char *scratch = nx_rt_alloc(c->ctx, bytes);
    if (!scratch)
        return nx_rt_error(c->ctx, NX_ERR_NOMEM, "%s: out of memory for %lld knots", c->who,
                           (long long)bins);
    double *q = (double *)scratch, *t = q + bins;
    int32_t *idx = (int32_t *)(t + bins);
    bool *side = (bool *)(idx + bins);
    /* numpy.linspace(0, 1, bins): k * (1 / (bins - 1)), the last exactly 1 */
    double step = 1.0 / (double)(bins - 1);
    for (int64_t k = 0; k < bins; k++)
        q[k] = k == bins - 1 ? 1.0 : (double)k * step;
    nx_node xp = knots(g, a, n, q, bins, idx, t, side);
    nx_node fp = knots(g, b, nr, q, bins, idx, t, side);
    nx_rt_free(c->ctx, scratch, bytes);

    nx_node x = nx_reshape(g, a, 1, &n);
    int64_t col[2] = {n, 1}, row[2] = {1, bins};
    int ax1 = 1;
    nx_node below = nx_cast(g, nx_le(g, nx_reshape(g, xp, 2, row), nx_reshape(g, x, 2, col)),
                            NX_DTYPE_I32);
    nx_node j = nx_sub(g, nx_reduce(g, below, 1, &ax1, NX_MONOID_SUM, false),
                       nx_scalar(g, NX_DTYPE_I32, 1));
    nx_node top = nx_ge(g, j, nx_scalar(g, NX_DTYPE_I32, (double)(bins - 1)));
    nx_node j0 = nx_maximum(g, nx_minimum(g, j, nx_scalar(g, NX_DTYPE_I32, (double)(bins - 2))),
                            nx_scalar(g, NX_DTYPE_I32, 0));
    nx_node j1 = nx_add(g, j0, nx_scalar(g, NX_DTYPE_I32, 1));
    nx_node x0 = nx_gather(g, xp, j0, 0), x1 = nx_gather(g, xp, j1, 0);
    nx_node y0 = nx_gather(g, fp, j0, 0), y1 = nx_gather(g, fp, j1, 0);
    nx_node den = nx_sub(g, x1, x0), zero = nx_scalar(g, dt, 0);
    den = nx_select(g, nx_gt(g, den, zero), den, nx_scalar(g, dt, 1));
    nx_node slope = nx_div(g, nx_sub(g, y1, y0), den);
    nx_node y = nx_add(g, nx_mul(g, slope, nx_sub(g, x, x0)), y0);
    int64_t last = bins - 1, end = bins;
    nx_node ftop = nx_slice(g, fp, &last, &end, NULL);
    y = nx_select(g, top, nx_broadcast(g, ftop, 1, &n), y);
    outs[0] = nx_reshape(g, y, nx_tensor_ndim(m), nx_tensor_shape(m));
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"bins", NX_OPT_INT, "256", "2:", 1, "quantile knots of the transport map (at least 2)"},
};

static const nx_op_field fields[] = {
    {offsetof(mh_args, bins), NX_OP_NO_FIELD, sizeof(int64_t)},
};

/* numpy.quantile + numpy.interp in f64 */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-13},
};

const nx_op_desc nx_op_match_histogram = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(mh_args),
    .fields = fields,
    .backend_offset = offsetof(mh_args, backend),
    .check = check,
    .build = build,
    .golden = "metrics",
    .tols = tols,
    .ntols = 2,
};
