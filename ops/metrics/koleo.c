/* The op `koleo`: the Kozachenko-Leonenko (KoLeo) spreading score of DINOv2 (spec §4.10), one
 * value per point and unreduced by default:
 *   u_i = z_i / max(||z_i||, eps),                     z (n, d), n >= 2
 *   j(i) = argmax_{j != i} <u_i, u_j>                  (the nearest neighbour on the sphere)
 *   y_i = -log(||u_i - u_j(i) + 1e-8|| + eps)
 * The spec names the op only; this follows DINOv2's KoLeoLoss (dinov2/loss/koleo_loss.py) term for
 * term: F.normalize(eps), the neighbour by the largest inner product with the diagonal excluded,
 * nn.PairwiseDistance(p=2, eps=1e-8) (torch adds its eps to the difference before the norm,
 * which also keeps the norm's gradient finite for duplicate points; DINOv2 fixes it at 1e-8),
 * and -log(distance + eps); its mean is `reduction=mean` here. The option eps is the forward's
 * (the normalisation floor and the log guard, default 1e-8 as DINOv2's). The diagonal is
 * excluded with -inf (DINOv2 writes -1, which ties with an antipodal point and can pick i itself
 * when n = 2); ties pick the lowest index (nx_reduce's ARGMAX).
 *
 * Graph: row normalisation, a matmul for the inner products, ARGMAX over each row, nx_gather of
 * the neighbours, then elementwise. Both backends. The neighbour index is piecewise constant and
 * passes no gradient; autodiff differentiates through the gathered neighbour and the point, as
 * torch does (exact wherever the nearest neighbour is unique). The JAX reference computed
 * sqrt(2 - 2 cos) instead of the difference, which loses the distance's digits for near
 * duplicates; this op keeps DINOv2's form. Defaults to `none` (spec §5). */
#include <math.h>

#include "ops/metrics/metrics.h"

#define PDIST_EPS 1e-8 /* DINOv2's nn.PairwiseDistance(2, eps=1e-8) */

typedef struct koleo_args {
    nx_backend backend;
    double eps;
    int reduction; /* nx_metric_reduction */
} koleo_args;

static nx_status check(const nx_op_args *c)
{
    const koleo_args *o = c->opts;
    const nx_tensor *z = c->in[0];
    nx_status st = nx_metric_check_float(c, z, "z", NX_DTYPE_COUNT, -1);
    if (st != NX_OK)
        return st;
    if (nx_tensor_ndim(z) != 2)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: z has rank %d; expected (n, d) embeddings", c->who,
                           nx_tensor_ndim(z));
    const int64_t *s = nx_tensor_shape(z);
    if (s[0] < 2 || s[1] < 1)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: z is %lldx%lld; expected n >= 2 points (each needs a nearest "
                           "neighbour) of d >= 1 features",
                           c->who, (long long)s[0], (long long)s[1]);
    return nx_metric_check_positive(c, "eps", o->eps);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const koleo_args *o = c->opts;
    const nx_tensor *zt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(zt);
    const int64_t *s = nx_tensor_shape(zt);
    nx_node z = nx_parameter(g, "z", dt, 2, s);
    nx_node u = nx_metric_l2_rows(g, z, o->eps);
    nx_node dots = nx_matmul(g, u, nx_permute(g, u, (const int[]){1, 0}));
    int64_t nn[2] = {s[0], s[0]};
    nx_node self = nx_eq(g, nx_iota(g, NX_DTYPE_I64, 2, nn, 0), nx_iota(g, NX_DTYPE_I64, 2, nn, 1));
    int ax1 = 1;
    nx_node nbr = nx_reduce(g, nx_select(g, self, nx_scalar(g, dt, -INFINITY), dots), 1, &ax1,
                            NX_MONOID_ARGMAX, false);
    nx_node diff = nx_add(g, nx_sub(g, u, nx_gather(g, u, nbr, 0)), nx_scalar(g, dt, PDIST_EPS));
    nx_node dist = nx_sqrt(g, nx_reduce(g, nx_mul(g, diff, diff), 1, &ax1, NX_MONOID_SUM, false));
    nx_node y = nx_neg(g, nx_log(g, nx_add(g, dist, nx_scalar(g, dt, o->eps))));
    outs[0] = nx_metric_reduce(g, y, NX_NONE, (nx_metric_reduction)o->reduction);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"eps", NX_OPT_FLOAT, "1e-8", "0:", 1,
     "normalisation floor max(||z||, eps) and log guard -log(d + eps), as DINOv2's (> 0)"},
    NX_METRIC_REDUCTION_OPT,
};

static const nx_op_field fields[] = {
    {offsetof(koleo_args, eps), NX_OP_NO_FIELD, sizeof(double)},
    {offsetof(koleo_args, reduction), NX_OP_NO_FIELD, sizeof(int)},
};

/* Measured on the family's golden cases, cpu and ref (2026-12-07): f32 within 2e-6 relative
 * (a koleo value of 0.06; most within 4e-7), f64 within 3e-15 relative; the rows leave room for
 * reduction order and the cuda backend's exp and log. */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-13},
};

const nx_op_desc nx_op_koleo = {
    .info = {.nopts = 2, .opts = opts},
    .opts_size = sizeof(koleo_args),
    .fields = fields,
    .backend_offset = offsetof(koleo_args, backend),
    .check = check,
    .build = build,
    .golden = "metrics",
    .tols = tols,
    .ntols = 2,
};
