/* The op `percentile_rescale` (spec §4.12, api-a §9): x rescaled by two of its percentiles,
 *     y = (x - p_lo) / (p_hi - p_lo + eps),   clipped to [0, 1] when `clip`,
 * p = numpy.percentile over `axis` (every axis when not given), linear method, of the elements
 * where `mask` is nonzero (all of them without a mask; a line whose mask is empty has p_lo = p_hi
 * = 0). Every element is rescaled, masked or not. The masked count per line is data, so the
 * percentile positions are computed in the graph (numerics.c): the masked-out values sort last
 * and the order statistics are weighted sums; both backends compile it and autodiff gives the
 * gradient through the sort (almost everywhere: not at ties). */
#include <math.h>

#include "ops/numerics/numerics.h"

typedef struct prs_args {
    nx_backend backend;
    double lo, hi;
    bool clip;
    nx_num_axes axis;
    double eps;
} prs_args;

static nx_status check(const nx_op_args *c)
{
    const prs_args *o = c->opts;
    nx_status st = nx_num_check_float(c, 0, "x");
    int axes[NX_MAX_DIMS], n;
    if (st == NX_OK)
        st = nx_num_check_same_shape(c, 1, "mask");
    if (st == NX_OK)
        st = nx_num_check_percentile(c, o->lo, "lo");
    if (st == NX_OK)
        st = nx_num_check_percentile(c, o->hi, "hi");
    if (st == NX_OK && !(o->lo < o->hi))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: lo %g is not below hi %g; expected lo < hi", c->who, o->lo, o->hi);
    if (st == NX_OK && !(o->eps >= 0 && isfinite(o->eps)))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: eps is %g; expected a finite value >= 0", c->who, o->eps);
    if (st == NX_OK)
        st = nx_num_resolve_axes(c, &o->axis, nx_tensor_ndim(c->in[0]), true, "axis", axes, &n);
    return st;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const prs_args *o = c->opts;
    const nx_tensor *xt = c->in[0], *mt = c->in[1];
    nx_dtype dt = nx_tensor_dtype(xt);
    int nd = nx_tensor_ndim(xt), axes[NX_MAX_DIMS], n = 0;
    nx_status st = nx_num_resolve_axes(c, &o->axis, nd, true, "axis", axes, &n);
    if (st != NX_OK)
        return st;
    nx_node x = nx_parameter(g, "x", dt, nd, nx_tensor_shape(xt));
    nx_node m = NX_NONE;
    if (mt) {
        nx_node mi = nx_input(g, "mask", nx_tensor_dtype(mt), nd, nx_tensor_shape(mt));
        m = nx_num_to_lines(g, nx_cast(g, mi, NX_DTYPE_BOOL), n, axes);
    }
    nx_node l = nx_num_to_lines(g, x, n, axes), count = NX_NONE;
    nx_node s = nx_num_sorted_lines(g, l, m, &count);
    nx_node lo = nx_num_percentile(g, s, count, o->lo);
    nx_node hi = nx_num_percentile(g, s, count, o->hi);
    nx_node y = nx_div(g, nx_sub(g, l, lo), nx_add(g, nx_sub(g, hi, lo), nx_scalar(g, dt, o->eps)));
    if (o->clip)
        y = nx_minimum(g, nx_maximum(g, y, nx_scalar(g, dt, 0)), nx_scalar(g, dt, 1));
    outs[0] = nx_num_from_lines(g, y, nd, nx_tensor_shape(xt), n, axes);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"lo", NX_OPT_FLOAT, "0", "0:100", 1, "the lower percentile, in [0, 100]"},
    {"hi", NX_OPT_FLOAT, "99", "0:100", 1, "the upper percentile, in (lo, 100]"},
    {"clip", NX_OPT_BOOL, "true", NULL, 1, "clip the result to [0, 1]"},
    {"axis", NX_OPT_INTS, "(all axes)", NULL, NX_MAX_DIMS,
     "the axes the percentiles span; negative counts from the end; not given: every axis"},
    {"eps", NX_OPT_FLOAT, "1e-8", "0:", 1, "added to p_hi - p_lo"},
};

static const nx_op_field fields[] = {
    {offsetof(prs_args, lo), NX_OP_NO_FIELD, sizeof(double)},
    {offsetof(prs_args, hi), NX_OP_NO_FIELD, sizeof(double)},
    {offsetof(prs_args, clip), NX_OP_NO_FIELD, sizeof(bool)},
    {offsetof(prs_args, axis.axis), offsetof(prs_args, axis.naxis), sizeof(int64_t) * NX_MAX_DIMS},
    {offsetof(prs_args, eps), NX_OP_NO_FIELD, sizeof(double)},
};

/* numpy.percentile (linear) in float64: the api's oracle tolerance is 1e-7 */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-10, 1e-12},
};

const nx_op_desc nx_op_percentile_rescale = {
    .info = {.nopts = 5, .opts = opts},
    .opts_size = sizeof(prs_args),
    .fields = fields,
    .backend_offset = offsetof(prs_args, backend),
    .check = check,
    .build = build,
    .golden = "numerics",
    .tols = tols,
    .ntols = 2,
    .fd_note = "the percentiles are order statistics and the clip has kinks: differentiable away "
               "from ties and from the window's edges",
};
