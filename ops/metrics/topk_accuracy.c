/* The op `topk_accuracy`: whether each sample's label is among its k largest logits,
 *   hit[...] = 1 if labels[...] is one of top_k(logits[..., :]) else 0,
 * logits [*batch, C] (classes on the last axis), labels [*batch] integer class indices, then the
 * family's reduction (none by default, spec §5: the per-sample hits; mean is the accuracy).
 * Ties go to the lower class index (nx_topk's order: a stable sort, NaN largest), so with k = 1
 * and tied maxima only the first counts. k must be 1..C; a label outside 0..C-1 is an error
 * naming it (labels.c). One IR program (top-k, compare, reduce); not differentiable. */
#include "ops/metrics/overlap.h"

typedef struct topk_args {
    nx_backend backend;
    int64_t k;
    int reduction; /* nx_metric_reduction */
} topk_args;

static nx_status check(const nx_op_args *c)
{
    const topk_args *o = c->opts;
    const nx_tensor *x = c->in[0], *y = c->in[1];
    int64_t k = o->k ? o->k : 1; /* a zeroed struct: the default */
    nx_dtype dt = nx_tensor_dtype(x);
    if (dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64)
        return nx_rt_error(c->ctx, NX_ERR_DTYPE, "%s: logits is %s; expected f32 or f64", c->who,
                           nx_dtype_name(dt));
    nx_status st = nx_metric_check_int_labels(c, 1);
    if (st != NX_OK)
        return st;
    int nd = nx_tensor_ndim(x);
    const int64_t *xs = nx_tensor_shape(x), *ys = nx_tensor_shape(y);
    bool same = nd >= 1 && nx_tensor_ndim(y) == nd - 1;
    for (int i = 0; same && i < nd - 1; i++)
        same = xs[i] == ys[i];
    if (!same) {
        char a[96], b[96];
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: logits has shape %s and labels %s; expected logits [*batch, C] "
                           "and labels [*batch]",
                           c->who, nx_shape_str(a, sizeof a, nd, xs),
                           nx_shape_str(b, sizeof b, nx_tensor_ndim(y), ys));
    }
    if (k < 1 || k > xs[nd - 1])
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: k is %lld but logits has %lld classes; expected 1 <= k <= C",
                           c->who, (long long)k, (long long)xs[nd - 1]);
    if ((unsigned)o->reduction > NX_METRIC_MEAN)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: reduction %d is out of range; expected none, sum or mean", c->who,
                           o->reduction);
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, const void *user, int nout, nx_node *outs)
{
    (void)user;
    (void)nout;
    const topk_args *o = c->opts;
    const nx_tensor *x = c->in[0], *y = c->in[1];
    nx_dtype dt = nx_tensor_dtype(x);
    int nd = nx_tensor_ndim(x);
    int64_t ls[NX_MAX_DIMS];
    for (int i = 0; i < nd - 1; i++)
        ls[i] = nx_tensor_shape(x)[i];
    ls[nd - 1] = 1;
    nx_node xi = nx_input(g, "logits", dt, nd, nx_tensor_shape(x));
    nx_node yi = nx_input(g, "labels", nx_tensor_dtype(y), nd - 1, nx_tensor_shape(y));
    nx_node idx = NX_NONE;
    nx_topk(g, xi, o->k ? o->k : 1, nd - 1, true, NULL, &idx);
    /* labels as [*batch, 1] against the k indices [*batch, k] */
    nx_node lab = nx_reshape(g, nx_cast(g, yi, NX_DTYPE_I64), nd, ls);
    int last = nd - 1;
    nx_node hit = nx_reduce(g, nx_cast(g, nx_eq(g, idx, lab), dt), 1, &last, NX_MONOID_MAX, false);
    outs[0] = nx_metric_reduce(g, hit, NX_NONE, (nx_metric_reduction)o->reduction);
    nx_metric_label_bounds(g, yi, outs + 1);
    return nx_graph_status(g);
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    const nx_tensor *x = c->in[0];
    nx_metric_labels l = {.n = 1,
                          .names = {"labels"},
                          .nclasses = nx_tensor_shape(x)[nx_tensor_ndim(x) - 1],
                          .what = "the class count C, logits' last extent"};
    return nx_metric_run_labels(c, build, NULL, 1, &l, outs);
}

static const nx_op_opt opts[] = {
    {"k", NX_OPT_INT, "1", "1:", 1, "a hit when the label is among the k largest logits"},
    NX_METRIC_REDUCTION_OPT,
};

static const nx_op_field fields[] = {
    {offsetof(topk_args, k), NX_OP_NO_FIELD, sizeof(int64_t)},
    {offsetof(topk_args, reduction), NX_OP_NO_FIELD, sizeof(int)},
};

/* hits are 0 or 1; the mean of n of them is one rounding of an exact count */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-7, 0},
    {NX_DTYPE_F64, NULL, NULL, 1e-15, 0},
};

const nx_op_desc nx_op_topk_accuracy = {
    .info = {.nopts = 2, .opts = opts},
    .opts_size = sizeof(topk_args),
    .fields = fields,
    .backend_offset = offsetof(topk_args, backend),
    .check = check,
    .run = run,
    .golden = "metrics",
    .tols = tols,
    .ntols = 2,
};
