/* The op `info_nce`: the InfoNCE / NT-Xent score between two aligned view batches (spec §4.10),
 * layout-agnostic: za, zb are (n, d) and the positive of za[i] is zb[i]; every other row of the
 * other batch is a negative. As in the JAX reference (nitrix.metrics.info_nce), both batches are
 * L2-normalised inside (z / max(||z||, 1e-12), torch's F.normalize convention) and the score is
 * symmetric, the mean of the two directional cross-entropies:
 *   L = za_n zb_n^T / temperature,                         (n, n), cross-view only
 *   y_i = 1/2 (logsumexp_j L[i, j] - L[i, i]) + 1/2 (logsumexp_j L[j, i] - L[i, i]),
 * unreduced by default ((n,): one value per pair), `reduction` none|sum|mean through the family's
 * helper. There are no self-pairs to mask (the similarity is cross-view); a SimCLR-style stacked
 * 2n layout is the caller's arrangement of the views. Each half is computed max-shifted, as
 * (max_j L - L[i, i]) + log sum_j exp(L - max_j L) (no overflow at small temperatures, no rounding
 * at the scale of 1 / temperature); L[i, i] is its own row dot product (see build), equal to the
 * contraction's diagonal up to rounding. A graph of matmul, reduce and elementwise
 * primitives: both backends; autodiff gives the gradients of za and zb. The JAX version defaulted
 * to `mean`; this op defaults to `none` (spec §5). */
#include "ops/metrics/metrics.h"

#define NORM_EPS 1e-12 /* the reference's l2_normalize eps */

typedef struct info_nce_args {
    nx_backend backend;
    double temperature;
    int reduction; /* nx_metric_reduction */
} info_nce_args;

nx_node nx_metric_l2_scale(nx_graph *g, nx_node z, double eps)
{
    nx_dtype dt = nx_node_dtype(g, z);
    int last = nx_node_ndim(g, z) - 1;
    nx_node ss = nx_reduce(g, nx_mul(g, z, z), 1, &last, NX_MONOID_SUM, true);
    /* sqrt(max(s, eps^2)) = max(||z||, eps), without sqrt's infinite slope at a zero row */
    nx_node nrm = nx_sqrt(g, nx_maximum(g, ss, nx_scalar(g, dt, eps * eps)));
    return nx_div(g, nx_scalar(g, dt, 1.0), nrm);
}

nx_node nx_metric_l2_rows(nx_graph *g, nx_node z, double eps)
{
    return nx_mul(g, z, nx_metric_l2_scale(g, z, eps));
}

static nx_status check(const nx_op_args *c)
{
    const info_nce_args *o = c->opts;
    nx_status st = nx_metric_check_pair(c, 0, 1);
    if (st != NX_OK)
        return st;
    const nx_tensor *za = c->in[0];
    if (nx_tensor_ndim(za) != 2)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: za and zb have rank %d; expected (n, d) embeddings", c->who,
                           nx_tensor_ndim(za));
    const int64_t *s = nx_tensor_shape(za);
    if (s[0] < 1 || s[1] < 1)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: za and zb are %lldx%lld; expected n >= 1 pairs of d >= 1 "
                           "features",
                           c->who, (long long)s[0], (long long)s[1]);
    return nx_metric_check_positive(c, "temperature", o->temperature);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const info_nce_args *o = c->opts;
    const nx_tensor *za = c->in[0];
    nx_dtype dt = nx_tensor_dtype(za);
    const int64_t *s = nx_tensor_shape(za);
    nx_node a = nx_parameter(g, "za", dt, 2, s);
    nx_node b = nx_parameter(g, "zb", dt, 2, s);
    /* L = za_n zb_n^T / temperature. zb_n^T / temperature is one (d, n) value that both the
     * contraction and the diagonal read whole, so fusion stores it once, contiguous: the
     * contraction then reads it at stride 1 along j (the CPU's register tiles) instead of
     * striding through zb's rows. */
    nx_node an = nx_metric_l2_rows(g, a, NORM_EPS);
    const int t01[2] = {1, 0};
    nx_node bt = nx_div(g, nx_permute(g, nx_metric_l2_rows(g, b, NORM_EPS), t01),
                        nx_scalar(g, dt, o->temperature));
    nx_node l = nx_matmul(g, an, bt);
    int ax1 = 1;
    nx_node diag = nx_reduce(g, nx_mul(g, an, nx_permute(g, bt, t01)), 1, &ax1, NX_MONOID_SUM,
                             false);
    /* each direction as (max - L_ii) + log sum exp(L - max): no rounding at the max's scale */
    nx_node mr, lr, mc, lc;
    nx_metric_lse_parts(g, l, 1, &mr, &lr);
    nx_metric_lse_parts(g, l, 0, &mc, &lc);
    int64_t n1 = s[0];
    nx_node row = nx_add(g, nx_sub(g, nx_reshape(g, mr, 1, &n1), diag), nx_reshape(g, lr, 1, &n1));
    nx_node col = nx_add(g, nx_sub(g, nx_reshape(g, mc, 1, &n1), diag), nx_reshape(g, lc, 1, &n1));
    nx_node y = nx_mul(g, nx_scalar(g, dt, 0.5), nx_add(g, row, col));
    outs[0] = nx_metric_reduce(g, y, NX_NONE, (nx_metric_reduction)o->reduction);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"temperature", NX_OPT_FLOAT, "0.5", "0:", 1, "softmax temperature tau (> 0)"},
    NX_METRIC_REDUCTION_OPT,
};

static const nx_op_field fields[] = {
    {offsetof(info_nce_args, temperature), NX_OP_NO_FIELD, sizeof(double)},
    {offsetof(info_nce_args, reduction), NX_OP_NO_FIELD, sizeof(int)},
};

/* f32: the cosine similarities carry ~d ulp, scaled by 1/temperature into the log-sum-exps. */
/* Measured on the family's golden cases, cpu and ref (2026-12-07): f32 within 2e-6 relative
 * (a koleo value of 0.06; most within 4e-7), f64 within 3e-15 relative; the rows leave room for
 * reduction order and the cuda backend's exp and log. */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-13},
};

const nx_op_desc nx_op_info_nce = {
    .info = {.nopts = 2, .opts = opts},
    .opts_size = sizeof(info_nce_args),
    .fields = fields,
    .backend_offset = offsetof(info_nce_args, backend),
    .check = check,
    .build = build,
    .golden = "metrics",
    .tols = tols,
    .ntols = 2,
};
