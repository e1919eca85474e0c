/* The op `correlation_ratio`: Roche's correlation ratio eta^2(moving | fixed) (spec §4.10), a
 * 0-d result: fixed is binned into `bins` groups by triangular (linear Parzen) soft binning and
 *   eta^2 = sum_k n_k (mu_k - mu)^2 / (sum_i w_i (m_i - mu)^2 + eps),
 *   n_k = sum_i w_i h_k(f_i),  mu_k = sum_i w_i h_k(f_i) m_i / (n_k + eps),
 *   mu  = sum_i w_i m_i / max(sum_i w_i, eps),
 * with w the mask (or 1) and h_k(f) = max(0, 1 - |s(f) - k|), s(f) = clip((f - lo) / max(hi - lo,
 * 1e-12) (bins - 1), 0, bins - 1): the weights (1 - frac, frac) of the two bins around s, as
 * joint_histogram's. lo, hi are range_fixed, or fixed's min and max. eta^2 is in [0, 1]: 1 when
 * moving is a function of fixed, 0 when unrelated; the FSL mcflirt cost is 1 - eta^2. moving is
 * shifted by its first element first (eta^2 is shift-invariant), so a constant moving gives
 * exactly 0. The histogram is a reduction over an (N, bins) hat expression, so it is
 * deterministic on every backend and differentiable through the weights (work N * bins).
 * Autodiff gives the gradients of moving, fixed (through the soft weights and a data range) and
 * a float mask. */
#include <math.h>

#include "ops/metrics/metrics.h"

typedef struct cr_args {
    nx_backend backend;
    int64_t bins;
    double range_fixed[2];
    int nrange;
    double eps;
} cr_args;

static nx_status check(const nx_op_args *c)
{
    nx_status st = nx_metric_check_pair(c, 0, 1);
    if (st != NX_OK)
        return st;
    const cr_args *o = c->opts;
    if (o->bins < 2 || o->bins > (1 << 20))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: bins is %lld; expected 2 <= bins <= 2^20", c->who,
                           (long long)o->bins);
    if (o->nrange != 0 && o->nrange != 2)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: range_fixed has %d values; expected two (lo, hi) or none (the "
                           "data's min and max)",
                           c->who, o->nrange);
    if (o->nrange == 2 && !(isfinite(o->range_fixed[0]) && isfinite(o->range_fixed[1]) &&
                            o->range_fixed[0] < o->range_fixed[1]))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: range_fixed is (%g, %g); expected finite lo < hi", c->who,
                           o->range_fixed[0], o->range_fixed[1]);
    if (!(o->eps >= 0) || !isfinite(o->eps))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: eps is %g; expected a finite value >= 0", c->who, o->eps);
    if (nx_tensor_numel(c->in[0]) == 0)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: the images have no elements; expected at least one", c->who);
    return nx_metric_check_mask(c, c->in[2], nx_tensor_ndim(c->in[0]), nx_tensor_shape(c->in[0]));
}

static nx_node fold(nx_graph *g, nx_node x, int axis, nx_monoid monoid)
{
    return nx_reduce(g, x, 1, &axis, monoid, false);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const cr_args *o = c->opts;
    const nx_tensor *mt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(mt);
    int nd = nx_tensor_ndim(mt);
    const int64_t *shape = nx_tensor_shape(mt);
    int64_t n = nx_tensor_numel(mt), k = o->bins;
    nx_node m = nx_parameter(g, "moving", dt, nd, shape);
    nx_node f = nx_parameter(g, "fixed", dt, nd, shape);
    nx_node w = nx_metric_mask_input(g, c->in[2]);
    nx_node zero = nx_scalar(g, dt, 0.0), one = nx_scalar(g, dt, 1.0);
    nx_node eps = nx_scalar(g, dt, o->eps);
    m = nx_reshape(g, m, 1, &n);
    f = nx_reshape(g, f, 1, &n);
    int64_t first = 0, one_el = 1;
    m = nx_sub(g, m, nx_reshape(g, nx_slice(g, m, &first, &one_el, NULL), 0, NULL));
    if (w != NX_NONE) {
        w = nx_node_dtype(g, w) == dt ? w : nx_cast(g, w, dt);
        w = nx_reshape(g, nx_broadcast(g, w, nd, shape), 1, &n);
    } else {
        w = nx_broadcast(g, one, 1, &n);
    }
    nx_node lo, hi;
    if (o->nrange == 2) {
        lo = nx_scalar(g, dt, o->range_fixed[0]);
        hi = nx_scalar(g, dt, o->range_fixed[1]);
    } else {
        lo = fold(g, f, 0, NX_MONOID_MIN);
        hi = fold(g, f, 0, NX_MONOID_MAX);
    }
    nx_node top = nx_scalar(g, dt, (double)(k - 1));
    nx_node span = nx_maximum(g, nx_sub(g, hi, lo), nx_scalar(g, dt, 1e-12));
    nx_node s = nx_mul(g, nx_div(g, nx_sub(g, f, lo), span), top);
    s = nx_minimum(g, nx_maximum(g, s, zero), top);
    /* h[i, k] = max(0, 1 - |s_i - k|) over an (N, bins) expression folded over i */
    int64_t nk[2] = {n, k}, n1[2] = {n, 1};
    nx_node bin = nx_iota(g, dt, 2, nk, 1);
    nx_node h = nx_maximum(
        g, zero, nx_sub(g, one, nx_abs(g, nx_sub(g, nx_broadcast(g, nx_reshape(g, s, 2, n1), 2, nk),
                                                  bin))));
    nx_node wn = nx_broadcast(g, nx_reshape(g, w, 2, n1), 2, nk);
    nx_node wm = nx_broadcast(g, nx_reshape(g, nx_mul(g, w, m), 2, n1), 2, nk);
    nx_node n_k = fold(g, nx_mul(g, wn, h), 0, NX_MONOID_SUM);
    nx_node s_k = fold(g, nx_mul(g, wm, h), 0, NX_MONOID_SUM);
    nx_node sw = nx_maximum(g, fold(g, w, 0, NX_MONOID_SUM), eps);
    nx_node mu = nx_div(g, fold(g, nx_mul(g, w, m), 0, NX_MONOID_SUM), sw);
    nx_node dm = nx_sub(g, m, mu);
    nx_node total = fold(g, nx_mul(g, w, nx_mul(g, dm, dm)), 0, NX_MONOID_SUM);
    nx_node dk = nx_sub(g, nx_div(g, s_k, nx_add(g, n_k, eps)), mu);
    nx_node between = fold(g, nx_mul(g, n_k, nx_mul(g, dk, dk)), 0, NX_MONOID_SUM);
    outs[0] = nx_div(g, between, nx_add(g, total, eps));
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"bins", NX_OPT_INT, "32", "2:", 1, "soft bins of fixed (>= 2)"},
    {"range_fixed", NX_OPT_FLOATS, "(fixed's min and max)", NULL, 2,
     "lo,hi of fixed's binning (lo < hi); values outside go to the end bins"},
    {"eps", NX_OPT_FLOAT, "1e-10", "0:", 1,
     "added to n_k and to the total variance (a constant image gives 0)"},
};

static const nx_op_field fields[] = {
    {offsetof(cr_args, bins), NX_OP_NO_FIELD, sizeof(int64_t)},
    {offsetof(cr_args, range_fixed), offsetof(cr_args, nrange), sizeof(double[2])},
    {offsetof(cr_args, eps), NX_OP_NO_FIELD, sizeof(double)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-4, 1e-5},
    {NX_DTYPE_F64, NULL, NULL, 1e-11, 1e-12},
};

const nx_op_desc nx_op_correlation_ratio = {
    .info = {.nopts = sizeof opts / sizeof opts[0], .opts = opts},
    .opts_size = sizeof(cr_args),
    .fields = fields,
    .backend_offset = offsetof(cr_args, backend),
    .check = check,
    .build = build,
    .golden = "metrics",
    .tols = tols,
    .ntols = sizeof tols / sizeof tols[0],
};
