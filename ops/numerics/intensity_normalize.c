/* The op `intensity_normalize` (spec §4.12, api-a §9): a percentile window mapped onto [0, 1],
 *     y = clip((x - p_lo) / (p_hi - p_lo), 0, 1),   p = numpy.percentile(x, q) over `axis`,
 * q = low_percentile, high_percentile (default 1 and 99; linear method), every axis when `axis`
 * is not given; where p_hi = p_lo the result is 0. The percentiles are order statistics of a
 * sort, taken as weighted sums (numerics.c), so both backends compile the graph and autodiff
 * gives the gradient through the sort (almost everywhere: not at ties). */
#include <math.h>

#include "ops/numerics/numerics.h"

typedef struct inorm_args {
    nx_backend backend;
    double low, high;
    nx_num_axes axis;
} inorm_args;

static nx_status check(const nx_op_args *c)
{
    const inorm_args *o = c->opts;
    nx_status st = nx_num_check_float(c, 0, "x");
    int axes[NX_MAX_DIMS], n;
    if (st == NX_OK)
        st = nx_num_check_percentile(c, o->low, "low_percentile");
    if (st == NX_OK)
        st = nx_num_check_percentile(c, o->high, "high_percentile");
    if (st == NX_OK && !(o->low < o->high))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: low_percentile %g is not below high_percentile %g; expected "
                           "low_percentile < high_percentile",
                           c->who, o->low, o->high);
    if (st == NX_OK)
        st = nx_num_resolve_axes(c, &o->axis, nx_tensor_ndim(c->in[0]), true, "axis", axes, &n);
    return st;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const inorm_args *o = c->opts;
    const nx_tensor *xt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(xt);
    int nd = nx_tensor_ndim(xt), axes[NX_MAX_DIMS], n = 0;
    nx_status st = nx_num_resolve_axes(c, &o->axis, nd, true, "axis", axes, &n);
    if (st != NX_OK)
        return st;
    nx_node x = nx_parameter(g, "x", dt, nd, nx_tensor_shape(xt));
    nx_node l = nx_num_to_lines(g, x, n, axes);
    nx_node s = nx_sort(g, l, 1, false);
    nx_node lo = nx_num_percentile(g, s, NX_NONE, o->low);
    nx_node hi = nx_num_percentile(g, s, NX_NONE, o->high);
    nx_node y = nx_num_safe_div(g, nx_sub(g, l, lo), nx_sub(g, hi, lo));
    y = nx_minimum(g, nx_maximum(g, y, nx_scalar(g, dt, 0)), nx_scalar(g, dt, 1));
    outs[0] = nx_num_from_lines(g, y, nd, nx_tensor_shape(xt), n, axes);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"low_percentile", NX_OPT_FLOAT, "1", "0:100", 1, "the percentile mapped to 0, in [0, 100]"},
    {"high_percentile", NX_OPT_FLOAT, "99", "0:100", 1,
     "the percentile mapped to 1, in (low_percentile, 100]"},
    {"axis", NX_OPT_INTS, "(all axes)", NULL, NX_MAX_DIMS,
     "the axes the percentiles span; negative counts from the end; not given: every axis"},
};

static const nx_op_field fields[] = {
    {offsetof(inorm_args, low), NX_OP_NO_FIELD, sizeof(double)},
    {offsetof(inorm_args, high), NX_OP_NO_FIELD, sizeof(double)},
    {offsetof(inorm_args, axis.axis), offsetof(inorm_args, axis.naxis),
     sizeof(int64_t) * NX_MAX_DIMS},
};

/* numpy.percentile (linear) in float64: 1e-7 by the api's oracle, tighter in f64 here */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-10, 1e-12},
};

const nx_op_desc nx_op_intensity_normalize = {
    .info = {.nopts = 3, .opts = opts},
    .opts_size = sizeof(inorm_args),
    .fields = fields,
    .backend_offset = offsetof(inorm_args, backend),
    .check = check,
    .build = build,
    .golden = "numerics",
    .tols = tols,
    .ntols = 2,
    .fd_note = "the percentiles are order statistics and the clip has kinks: differentiable away "
               "from ties and from the window's edges",
};
