/* The op `winsorize` (spec §4.10, api-b §4.1): clips an image to its own quantiles,
 *     y = min(max(x, Q(lower)), Q(upper)),  Q = numpy.quantile over every element, method linear
 * (ANTs' --winsorize-image-intensities; default 0.005 and 0.995). The quantiles are order
 * statistics of nx_sort(x) gathered at positions computed on the host as numpy computes them
 * (histogram.c), so the graph is a sort, two gathers and a clip: both backends compile it, and
 * autodiff gives the gradient, through the sort, to the elements inside the range and to the order
 * statistics that set the bounds. */
#include <math.h>

#include "ops/metrics/histogram.h"

typedef struct wins_args {
    nx_backend backend;
    double lower, upper;
} wins_args;

static nx_status check(const nx_op_args *c)
{
    const wins_args *o = c->opts;
    const nx_tensor *x = c->in[0];
    nx_dtype dt = nx_tensor_dtype(x);
    if (dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: image is %s; expected f32 or f64",
                           c->who, nx_dtype_name(dt));
    if (nx_tensor_numel(x) == 0 || nx_tensor_numel(x) > INT32_MAX)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: image has %lld elements; expected 1 .. 2^31 - 1", c->who,
                           (long long)nx_tensor_numel(x));
    if (!(o->lower >= 0 && o->lower <= 1) || !(o->upper >= 0 && o->upper <= 1))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: lower %g and upper %g; expected quantiles in [0, 1]", c->who,
                           o->lower, o->upper);
    if (o->lower > o->upper)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: lower %g is above upper %g; expected lower <= upper", c->who,
                           o->lower, o->upper);
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const wins_args *o = c->opts;
    const nx_tensor *x = c->in[0];
    int nd = nx_tensor_ndim(x);
    int64_t n = nx_tensor_numel(x);
    nx_node in = nx_parameter(g, "image", nx_tensor_dtype(x), nd, nx_tensor_shape(x));
    nx_node v = nx_reshape(g, in, 1, &n);
    double q[2] = {o->lower, o->upper}, t[2];
    int32_t idx[2];
    bool side[2];
    nx_node b = nx_hist_quantiles(g, nx_sort(g, v, 0, false), n, q, 2, idx, t, side);
    int64_t z = 0, one = 1, two = 2;
    nx_node lo = nx_slice(g, b, &z, &one, NULL), hi = nx_slice(g, b, &one, &two, NULL);
    nx_node y = nx_minimum(g, nx_maximum(g, v, lo), hi);
    outs[0] = nx_reshape(g, y, nd, nx_tensor_shape(x));
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"lower", NX_OPT_FLOAT, "0.005", "0:1", 1, "lower quantile in [0, 1]"},
    {"upper", NX_OPT_FLOAT, "0.995", "0:1", 1, "upper quantile in [lower, 1]"},
};

static const nx_op_field fields[] = {
    {offsetof(wins_args, lower), NX_OP_NO_FIELD, sizeof(double)},
    {offsetof(wins_args, upper), NX_OP_NO_FIELD, sizeof(double)},
};

/* numpy.quantile + numpy.clip in f64; f32 bounds are an f32 lerp of two f32 order statistics */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-6, 1e-7},
    {NX_DTYPE_F64, NULL, NULL, 1e-14, 1e-15},
};

const nx_op_desc nx_op_winsorize = {
    .info = {.nopts = 2, .opts = opts},
    .opts_size = sizeof(wins_args),
    .fields = fields,
    .backend_offset = offsetof(wins_args, backend),
    .check = check,
    .build = build,
    .golden = "metrics",
    .tols = tols,
    .ntols = 2,
};
