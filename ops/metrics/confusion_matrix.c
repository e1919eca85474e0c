/* The op `confusion_matrix`: counts of (target, pred) class pairs, as scikit-learn's
 * confusion_matrix(y_true=target, y_pred=pred, labels=range(num_classes)):
 *   out[i, j] = #{ n : target[n] = i and pred[n] = j },   out: i64 [num_classes, num_classes]
 * (rows are the true class, columns the predicted one). pred and target are integer class
 * indices of one shape (any rank; every element is a sample). A scatter-add of ones at
 * target * C + pred into C^2 zeros: integer sums are exact in any order, so the result is the
 * same on every backend and in any mode. A label outside 0..num_classes-1 is an error naming it
 * (labels.c), not a silently dropped sample as in scikit-learn. Not differentiable. */
#include <string.h>

#include "ops/metrics/overlap.h"

typedef struct cm_args {
    nx_backend backend;
    int64_t num_classes;
} cm_args;

static nx_status check(const nx_op_args *c)
{
    const cm_args *o = c->opts;
    nx_status st;
    if ((st = nx_metric_check_int_labels(c, 0)) != NX_OK ||
        (st = nx_metric_check_int_labels(c, 1)) != NX_OK)
        return st;
    const nx_tensor *p = c->in[0], *t = c->in[1];
    int nd = nx_tensor_ndim(p);
    if (nd != nx_tensor_ndim(t) ||
        memcmp(nx_tensor_shape(p), nx_tensor_shape(t), (size_t)nd * sizeof(int64_t)) != 0) {
        char a[96], b[96];
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: pred has shape %s but target has shape %s; expected equal shapes",
                           c->who, nx_shape_str(a, sizeof a, nd, nx_tensor_shape(p)),
                           nx_shape_str(b, sizeof b, nx_tensor_ndim(t), nx_tensor_shape(t)));
    }
    /* C^2 i64 cells: 65536 classes is 32 GiB already */
    if (o->num_classes < 1 || o->num_classes > (1 << 16))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: num_classes is %lld; expected 1..%d",
                           c->who, (long long)o->num_classes, 1 << 16);
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, const void *user, int nout, nx_node *outs)
{
    (void)user;
    (void)nout;
    const cm_args *o = c->opts;
    const nx_tensor *p = c->in[0], *t = c->in[1];
    int nd = nx_tensor_ndim(p);
    int64_t n = nx_tensor_numel(p), C = o->num_classes;
    nx_node pi = nx_input(g, "pred", nx_tensor_dtype(p), nd, nx_tensor_shape(p));
    nx_node ti = nx_input(g, "target", nx_tensor_dtype(t), nd, nx_tensor_shape(t));
    nx_node pf = nx_reshape(g, nx_cast(g, pi, NX_DTYPE_I64), 1, &n);
    nx_node tf = nx_reshape(g, nx_cast(g, ti, NX_DTYPE_I64), 1, &n);
    nx_node idx = nx_add(g, nx_mul(g, tf, nx_scalar(g, NX_DTYPE_I64, (double)C)), pf);
    int64_t cells = C * C, shape2[2] = {C, C};
    nx_node zeros = nx_broadcast(g, nx_scalar(g, NX_DTYPE_I64, 0.0), 1, &cells);
    nx_node ones = nx_broadcast(g, nx_scalar(g, NX_DTYPE_I64, 1.0), 1, &n);
    nx_node counts = nx_scatter(g, zeros, idx, ones, 0, NX_MONOID_SUM);
    outs[0] = nx_reshape(g, counts, 2, shape2);
    nx_metric_label_bounds(g, pi, outs + 1);
    nx_metric_label_bounds(g, ti, outs + 3);
    return nx_graph_status(g);
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    const cm_args *o = c->opts;
    nx_metric_labels l = {
        .n = 2, .names = {"pred", "target"}, .nclasses = o->num_classes, .what = "num_classes"};
    return nx_metric_run_labels(c, build, NULL, 1, &l, outs);
}

static const nx_op_opt opts[] = {
    {"num_classes", NX_OPT_INT, NULL, "1:", 1, "the number of classes C (labels 0..C-1)"},
};

static const nx_op_field fields[] = {
    {offsetof(cm_args, num_classes), NX_OP_NO_FIELD, sizeof(int64_t)},
};

/* counts: exact */
static const nx_op_tol tols[] = {
    {NX_DTYPE_I64, NULL, NULL, 0, 0},
    {NX_DTYPE_I32, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_confusion_matrix = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(cm_args),
    .fields = fields,
    .backend_offset = offsetof(cm_args, backend),
    .check = check,
    .run = run,
    .golden = "metrics",
    .tols = tols,
    .ntols = 2,
};
