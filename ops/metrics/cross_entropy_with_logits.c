/* The op `cross_entropy_with_logits`: categorical cross-entropy from logits against integer class
 * targets (spec §4.10), unreduced by default,
 *   y[..] = logsumexp_c x[.., c, ..] - x[.., target[..], ..]     (= -log softmax(x)[target])
 * with the class axis `axis` of the logits (default 1: (batch, class, *spatial)) and target of
 * the logits' shape without that axis, i32 or i64. It is computed max-shifted, as
 *   y = (m - x_target) + log sum_c exp(x_c - m),   m = max_c x_c,
 * so logits of +-100, +-1000 or beyond neither overflow nor lose the result: exp sees only
 * x_c - m <= 0, and a small loss keeps its digits (logsumexp rounded at the magnitude of m, then
 * minus x_target, would keep only an ulp of m: 6e-5 at 1000 in f32). The target's logit is picked
 * by a compare-and-select summed over the class axis (a
 * one-hot contraction, not a materialised one-hot): it fuses with the log-sum-exp's loop over the
 * classes, and its adjoint stays elementwise (softmax - onehot), where a flat nx_gather's adjoint
 * would be a scatter over the whole logits tensor.
 *
 * Targets outside [0, C): host targets are checked before anything runs, and the op fails naming
 * the first bad element. Device targets (the cuda backend) are not read back; there the graph
 * gives NaN for each element whose target is out of range (its mask weight multiplies a NaN, so
 * a sum or mean over it is NaN too). Reduction and the optional mask (of the target's shape or
 * broadcastable to it) through the family's helper. Autodiff gives the gradients of the logits
 * and of a float mask. The JAX version defaulted to `mean`; this op defaults to `none`. */
#include <math.h>
#include <string.h>

#include "ops/metrics/metrics.h"

typedef struct ce_args {
    nx_backend backend;
    int64_t axis;
    int reduction; /* nx_metric_reduction */
} ce_args;

/* The first element of t (i32 or i64, host, any strides) outside [0, n), by C-order position;
 * false when there is none. */
static bool first_out_of_range(const nx_tensor *t, int64_t n, int64_t *pos, int64_t *value)
{
    int nd = nx_tensor_ndim(t);
    const int64_t *shape = nx_tensor_shape(t), *strides = nx_tensor_strides(t);
    int64_t total = nx_tensor_numel(t), idx[NX_MAX_DIMS] = {0};
    bool wide = nx_tensor_dtype(t) == NX_DTYPE_I64;
    const char *base = nx_tensor_data(t);
    size_t es = wide ? sizeof(int64_t) : sizeof(int32_t);
    for (int64_t k = 0; k < total; k++) {
        int64_t off = 0;
        for (int i = 0; i < nd; i++)
            off += idx[i] * strides[i];
        const char *p = base + off * (int64_t)es;
        int64_t v;
        if (wide) {
            int64_t w;
            memcpy(&w, p, sizeof w);
            v = w;
        } else {
            int32_t w;
            memcpy(&w, p, sizeof w);
            v = w;
        }
        if (v < 0 || v >= n) {
            *pos = k;
            *value = v;
            return true;
        }
        for (int i = nd - 1; i >= 0; i--) {
            if (++idx[i] < shape[i])
                break;
            idx[i] = 0;
        }
    }
    return false;
}

void nx_metric_lse_parts(nx_graph *g, nx_node x, int axis, nx_node *max, nx_node *logsum)
{
    nx_node m = nx_reduce(g, x, 1, &axis, NX_MONOID_MAX, true);
    *max = m;
    *logsum = nx_log(g, nx_reduce(g, nx_exp(g, nx_sub(g, x, m)), 1, &axis, NX_MONOID_SUM, true));
}

static nx_status check(const nx_op_args *c)
{
    const ce_args *o = c->opts;
    const nx_tensor *x = c->in[0], *t = c->in[1];
    nx_status st = nx_metric_check_float(c, x, "logits", NX_DTYPE_COUNT, -1);
    if (st != NX_OK)
        return st;
    int nd = nx_tensor_ndim(x);
    if (nd < 1)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: logits is 0-d; expected at least one axis (the classes)", c->who);
    if (o->axis < -nd || o->axis >= nd)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: axis %lld is out of range for logits of rank %d; expected %d..%d",
                           c->who, (long long)o->axis, nd, -nd, nd - 1);
    int a = (int)(o->axis < 0 ? o->axis + nd : o->axis);
    nx_dtype td = nx_tensor_dtype(t);
    if (td != NX_DTYPE_I32 && td != NX_DTYPE_I64)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: target is %s; expected integer class indices (i32 or i64)",
                           c->who, nx_dtype_name(td));
    const int64_t *xs = nx_tensor_shape(x), *ts = nx_tensor_shape(t);
    bool same = nx_tensor_ndim(t) == nd - 1;
    for (int i = 0, j = 0; same && i < nd; i++)
        if (i != a)
            same = ts[j++] == xs[i];
    if (!same)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: target has rank %d and does not match logits (rank %d) without "
                           "its class axis %d; expected the logits' shape with axis %d removed",
                           c->who, nx_tensor_ndim(t), nd, a, a);
    if (xs[a] < 1)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: the class axis %d of logits is empty; expected at least one class",
                           c->who, a);
    if ((st = nx_metric_check_mask(c, c->in[2], nd - 1, ts)) != NX_OK)
        return st;
    int64_t pos, v;
    if (nx_tensor_device(t) == NX_DEVICE_HOST && first_out_of_range(t, xs[a], &pos, &v))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: target element %lld (C order) is %lld; expected a class index "
                           "in [0, %lld)",
                           c->who, (long long)pos, (long long)v, (long long)xs[a]);
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const ce_args *o = c->opts;
    const nx_tensor *xt = c->in[0], *tt = c->in[1];
    nx_dtype dt = nx_tensor_dtype(xt), td = nx_tensor_dtype(tt);
    int nd = nx_tensor_ndim(xt);
    int a = (int)(o->axis < 0 ? o->axis + nd : o->axis);
    const int64_t *xs = nx_tensor_shape(xt);
    nx_node x = nx_parameter(g, "logits", dt, nd, xs);
    nx_node t = nx_input(g, "target", td, nd - 1, nx_tensor_shape(tt));
    nx_node w = nx_metric_mask_input(g, c->in[2]);
    int64_t ks[NX_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        ks[i] = i == a ? 1 : xs[i];
    nx_node m, logsum;
    nx_metric_lse_parts(g, x, a, &m, &logsum);
    nx_node hit = nx_eq(g, nx_iota(g, td, nd, xs, a), nx_reshape(g, t, nd, ks));
    nx_node zero = nx_scalar(g, dt, 0.0);
    nx_node picked = nx_reduce(g, nx_select(g, hit, x, zero), 1, &a, NX_MONOID_SUM, true);
    nx_node ce = nx_reshape(g, nx_add(g, nx_sub(g, m, picked), logsum), nd - 1,
                            nx_tensor_shape(tt));
    nx_node valid = nx_and(g, nx_ge(g, t, nx_scalar(g, td, 0.0)),
                           nx_lt(g, t, nx_scalar(g, td, (double)xs[a])));
    nx_node y = nx_select(g, valid, ce, nx_scalar(g, dt, NAN));
    outs[0] = nx_metric_reduce(g, y, w, (nx_metric_reduction)o->reduction);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"axis", NX_OPT_INT, "1", NULL, 1,
     "the class axis of logits (negative counts from the end); target has the other axes"},
    NX_METRIC_REDUCTION_OPT,
};

static const nx_op_field fields[] = {
    {offsetof(ce_args, axis), NX_OP_NO_FIELD, sizeof(int64_t)},
    {offsetof(ce_args, reduction), NX_OP_NO_FIELD, sizeof(int)},
};

/* Measured on the family's golden cases, cpu and ref (2026-12-07): f32 within 2e-6 relative
 * (a koleo value of 0.06; most within 4e-7), f64 within 3e-15 relative; the rows leave room for
 * reduction order and the cuda backend's exp and log. */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-13},
};

const nx_op_desc nx_op_cross_entropy_with_logits = {
    .info = {.nopts = 2, .opts = opts},
    .opts_size = sizeof(ce_args),
    .fields = fields,
    .backend_offset = offsetof(ce_args, backend),
    .check = check,
    .build = build,
    .golden = "metrics",
    .tols = tols,
    .ntols = 2,
};
