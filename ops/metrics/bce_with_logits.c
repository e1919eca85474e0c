/* The op `bce_with_logits`: binary cross-entropy from logits (spec §4.10), unreduced by default,
 *   y = max(x, 0) - x t + log1p(exp(-|x|))
 * = -(t log sigmoid(x) + (1 - t) log(1 - sigmoid(x))), in the overflow-free form: exp only ever
 * sees -|x| <= 0, so logits of +-100, +-1000 or beyond give no overflow and no log(0). With the
 * optional pos_weight p (torch.nn.BCEWithLogitsLoss's; broadcast to the logits' shape):
 *   y = p t softplus(-x) + (1 - t) softplus(x),   softplus(+-x) = max(+-x, 0) + log1p(exp(-|x|)),
 * the form above at p = 1, written as a sum of terms >= 0 so that nothing cancels (torch's
 * (1 - t) x + (1 + (p - 1) t) softplus(-x) loses the digits of a small loss at negative x). Targets are floats (soft or hard, in [0, 1]) of the logits'
 * shape and dtype. Reduction and the optional mask through the family's helper (metrics.h). An
 * elementwise graph: both backends compile it, and autodiff gives the gradients of the logits,
 * the targets, pos_weight and a float mask. The JAX version defaulted to `mean` and had no mask
 * or pos_weight; the spec (§5) and this op default to `none` (CHANGELOG.md). */
#include "ops/metrics/metrics.h"

typedef struct bce_args {
    nx_backend backend;
    int reduction; /* nx_metric_reduction */
} bce_args;

void nx_metric_logit_parts(nx_graph *g, nx_node x, nx_metric_logit *p)
{
    nx_dtype dt = nx_node_dtype(g, x);
    nx_node zero = nx_scalar(g, dt, 0.0), one = nx_scalar(g, dt, 1.0);
    /* One condition for both kinks: at x = 0 the derivatives of relu (1) and of log1p(exp(-|x|))
     * (-1/2) add up to softplus'(0) = 1/2. */
    nx_node pos = nx_ge(g, x, zero);
    nx_node absx = nx_select(g, pos, x, nx_neg(g, x));
    nx_node e = nx_exp(g, nx_neg(g, absx)); /* in (0, 1]: never overflows */
    nx_node big = nx_div(g, one, nx_add(g, one, e)); /* sigmoid(|x|) */
    nx_node small = nx_div(g, e, nx_add(g, one, e)); /* sigmoid(-|x|), no 1 - sigmoid(|x|) */
    p->relu = nx_select(g, pos, x, zero);
    p->log1pexp = nx_log1p(g, e);
    p->sig = nx_select(g, pos, big, small);
    p->sig_neg = nx_select(g, pos, small, big);
}

static nx_status check(const nx_op_args *c)
{
    nx_status st = nx_metric_check_pair(c, 0, 1);
    if (st != NX_OK)
        return st;
    const nx_tensor *x = c->in[0], *pw = c->in[3];
    int nd = nx_tensor_ndim(x);
    const int64_t *shape = nx_tensor_shape(x);
    if ((st = nx_metric_check_mask(c, c->in[2], nd, shape)) != NX_OK)
        return st;
    if (!pw)
        return NX_OK;
    if ((st = nx_metric_check_float(c, pw, "pos_weight", nx_tensor_dtype(x), -1)) != NX_OK)
        return st;
    int pd = nx_tensor_ndim(pw);
    const int64_t *ps = nx_tensor_shape(pw);
    bool fits = pd <= nd;
    for (int i = 0; fits && i < pd; i++)
        fits = ps[pd - 1 - i] == shape[nd - 1 - i] || ps[pd - 1 - i] == 1;
    if (!fits)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: pos_weight of rank %d does not broadcast to the logits' shape "
                           "(rank %d); expected a shape broadcastable to the logits' (one weight "
                           "per class on the last axis, say)",
                           c->who, pd, nd);
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const bce_args *o = c->opts;
    const nx_tensor *xt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(xt);
    int nd = nx_tensor_ndim(xt);
    const int64_t *shape = nx_tensor_shape(xt);
    nx_node x = nx_parameter(g, "logits", dt, nd, shape);
    nx_node t = nx_parameter(g, "target", dt, nd, shape);
    nx_node w = nx_metric_mask_input(g, c->in[2]);
    nx_metric_logit p;
    nx_metric_logit_parts(g, x, &p);
    nx_node y;
    if (!c->in[3]) {
        y = nx_add(g, nx_sub(g, p.relu, nx_mul(g, x, t)), p.log1pexp);
    } else {
        const nx_tensor *pwt = c->in[3];
        nx_node pw = nx_parameter(g, "pos_weight", dt, nx_tensor_ndim(pwt), nx_tensor_shape(pwt));
        /* p t softplus(-x) + (1 - t) softplus(x): a sum of terms >= 0, so no cancellation
         * (relu - x is exactly max(-x, 0)) */
        nx_node one = nx_scalar(g, dt, 1.0);
        nx_node sp_neg = nx_add(g, nx_sub(g, p.relu, x), p.log1pexp);
        nx_node sp = nx_add(g, p.relu, p.log1pexp);
        y = nx_add(g, nx_mul(g, nx_mul(g, pw, t), sp_neg), nx_mul(g, nx_sub(g, one, t), sp));
    }
    outs[0] = nx_metric_reduce(g, y, w, (nx_metric_reduction)o->reduction);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {NX_METRIC_REDUCTION_OPT};

static const nx_op_field fields[] = {
    {offsetof(bce_args, reduction), NX_OP_NO_FIELD, sizeof(int)},
};

/* f32: log1p, exp and the sums round to a few ulp of the loss; the sum/mean reductions of the
 * golden cases add a few ulp per term in f32 accumulation. */
/* Measured on the family's golden cases, cpu and ref (2026-12-07): f32 within 2e-6 relative
 * (a koleo value of 0.06; most within 4e-7), f64 within 3e-15 relative; the rows leave room for
 * reduction order and the cuda backend's exp and log. */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-13},
};

const nx_op_desc nx_op_bce_with_logits = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(bce_args),
    .fields = fields,
    .backend_offset = offsetof(bce_args, backend),
    .check = check,
    .build = build,
    .golden = "metrics",
    .tols = tols,
    .ntols = 2,
};
