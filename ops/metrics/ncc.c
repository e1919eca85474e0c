/* The op `ncc`: global normalised cross-correlation, the signed Pearson correlation over every
 * element (spec §4.10), a 0-d result. With weights w (the mask, or 1):
 *   mx = sum w x / max(sum w, eps),  xd = x - mx  (and likewise y),
 *   r  = sum w xd yd / (sqrt(sum w xd^2 * sum w yd^2) + eps),
 * in [-1, 1]. The values are first shifted by their first element (x - x[0], y - y[0]; Pearson is
 * shift-invariant), so a constant image has xd = 0 exactly and r = 0 / eps = 0 instead of 0/0 or
 * a ratio of rounding noise; an empty mask gives 0 too. The square root's argument is guarded
 * so that the gradient at a constant image is finite. An IR graph of reductions: both backends
 * compile it; autodiff gives the gradients of x, y and a float mask. ITK's Correlation metric is
 * -r^2. */
#include <math.h>

#include "ops/metrics/metrics.h"

typedef struct ncc_args {
    nx_backend backend;
    double eps;
} ncc_args;

static nx_status check(const nx_op_args *c)
{
    nx_status st = nx_metric_check_pair(c, 0, 1);
    if (st != NX_OK)
        return st;
    const ncc_args *o = c->opts;
    if (!(o->eps >= 0) || !isfinite(o->eps))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: eps is %g; expected a finite value >= 0", c->who, o->eps);
    return nx_metric_check_mask(c, c->in[2], nx_tensor_ndim(c->in[0]), nx_tensor_shape(c->in[0]));
}

/* x minus its first element (x itself when empty). */
static nx_node shift_first(nx_graph *g, nx_node x, int nd)
{
    int64_t start[NX_MAX_DIMS] = {0}, stop[NX_MAX_DIMS], shape[NX_MAX_DIMS];
    nx_node_shape(g, x, shape);
    for (int d = 0; d < nd; d++) {
        if (shape[d] == 0)
            return x;
        stop[d] = 1;
    }
    nx_node first = nx_reshape(g, nx_slice(g, x, start, stop, NULL), 0, NULL);
    return nx_sub(g, x, first);
}

static nx_node sum_all(nx_graph *g, nx_node x, int nd)
{
    if (nd == 0)
        return x;
    int axes[NX_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        axes[i] = i;
    return nx_reduce(g, x, nd, axes, NX_MONOID_SUM, false);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const ncc_args *o = c->opts;
    const nx_tensor *xt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(xt);
    int nd = nx_tensor_ndim(xt);
    const int64_t *shape = nx_tensor_shape(xt);
    nx_node x = nx_parameter(g, "x", dt, nd, shape);
    nx_node y = nx_parameter(g, "y", dt, nd, shape);
    nx_node w = nx_metric_mask_input(g, c->in[2]);
    nx_node eps = nx_scalar(g, dt, o->eps), zero = nx_scalar(g, dt, 0.0);
    x = shift_first(g, x, nd);
    y = shift_first(g, y, nd);
    nx_node sw;
    if (w != NX_NONE) {
        w = nx_broadcast(g, nx_node_dtype(g, w) == dt ? w : nx_cast(g, w, dt), nd, shape);
        sw = nx_maximum(g, sum_all(g, w, nd), eps);
    } else {
        double n = 1;
        for (int d = 0; d < nd; d++)
            n *= (double)shape[d];
        sw = nx_scalar(g, dt, n > o->eps ? n : o->eps);
    }
#define W(e) (w != NX_NONE ? nx_mul(g, w, (e)) : (e))
    nx_node xd = nx_sub(g, x, nx_div(g, sum_all(g, W(x), nd), sw));
    nx_node yd = nx_sub(g, y, nx_div(g, sum_all(g, W(y), nd), sw));
    nx_node num = sum_all(g, W(nx_mul(g, xd, yd)), nd);
    nx_node vxy = nx_mul(g, sum_all(g, W(nx_mul(g, xd, xd)), nd),
                         sum_all(g, W(nx_mul(g, yd, yd)), nd));
#undef W
    /* sqrt(0) has an infinite derivative: 0 is taken from sqrt(1) * 0 by a select instead */
    nx_node pos = nx_gt(g, vxy, zero);
    nx_node den = nx_select(g, pos, nx_sqrt(g, nx_select(g, pos, vxy, nx_scalar(g, dt, 1.0))),
                            zero);
    outs[0] = nx_div(g, num, nx_add(g, den, eps));
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"eps", NX_OPT_FLOAT, "1e-8", "0:", 1,
     "floor of sum(w) and added to the denominator (a constant image gives 0)"},
};

static const nx_op_field fields[] = {
    {offsetof(ncc_args, eps), NX_OP_NO_FIELD, sizeof(double)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-5},
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-12},
};

const nx_op_desc nx_op_ncc = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(ncc_args),
    .fields = fields,
    .backend_offset = offsetof(ncc_args, backend),
    .check = check,
    .build = build,
    .golden = "metrics",
    .tols = tols,
    .ntols = 2,
};
