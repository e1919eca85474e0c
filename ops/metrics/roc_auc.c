/* The op `roc_auc`: the area under the ROC curve, as scikit-learn's roc_auc_score, by the rank
 * sum (Mann-Whitney) identity with tied scores given their average rank (the trapezoid of the
 * ROC curve, scikit-learn's treatment of ties):
 *   AUC = (R - P (P + 1) / 2) / (P N),   R = sum of the positives' average ranks,
 * P positives, N negatives. Three layouts, told apart by the shapes:
 *   scores [n],    labels [n]        binary: nonzero labels are positive; a 0-d AUC
 *   scores [n, C], labels [n, C]     multilabel: one AUC per column
 *   scores [n, C], labels [n] (int)  multiclass one-vs-rest: column c against labels == c
 *                                    (labels must be 0..C-1: an error naming a label outside)
 * and for the two-dimensional ones `average`: macro (the mean of the C AUCs; scikit-learn's
 * default), weighted (by each class's positive count), micro (one AUC of every (sample, class)
 * pair, scikit-learn's ravel), none (the C AUCs).
 *
 * A class with no positive or no negative sample has no AUC: it is NaN (scikit-learn raises),
 * and so is every average that includes it; so is a column with a NaN score. Ranks are computed
 * in exact integers: twice the average rank of a tie group spanning sorted positions f..l is
 * f + l + 2, so 2 U = sum over positives of (f + l + 2) - P (P + 1) is an exact i64, and the AUC
 * one division 2U / (2 P N) in float64, rounded once to the scores' dtype. One IR program: an
 * argsort per column, gathers, two scans for the tie groups' ends, sums. Not differentiable. */
#include <math.h>

#include "ops/metrics/overlap.h"

typedef enum auc_average { AUC_MACRO, AUC_WEIGHTED, AUC_MICRO, AUC_NONE } auc_average;

typedef struct auc_args {
    nx_backend backend;
    int average; /* auc_average */
} auc_args;

/* The layout of a call. */
typedef enum auc_layout { AUC_BINARY, AUC_MULTILABEL, AUC_MULTICLASS } auc_layout;

static auc_layout layout_of(const nx_op_args *c)
{
    if (nx_tensor_ndim(c->in[0]) == 1)
        return AUC_BINARY;
    return nx_tensor_ndim(c->in[1]) == 2 ? AUC_MULTILABEL : AUC_MULTICLASS;
}

static nx_status check(const nx_op_args *c)
{
    const auc_args *o = c->opts;
    const nx_tensor *s = c->in[0], *y = c->in[1];
    nx_dtype dt = nx_tensor_dtype(s), ly = nx_tensor_dtype(y);
    if (dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64)
        return nx_rt_error(c->ctx, NX_ERR_DTYPE, "%s: scores is %s; expected f32 or f64", c->who,
                           nx_dtype_name(dt));
    if (ly != NX_DTYPE_BOOL && !nx_dtype_is_int(ly) && ly != NX_DTYPE_F32 && ly != NX_DTYPE_F64)
        return nx_rt_error(c->ctx, NX_ERR_DTYPE,
                           "%s: labels is %s; expected bool, an integer dtype, f32 or f64", c->who,
                           nx_dtype_name(ly));
    int nd = nx_tensor_ndim(s), ny = nx_tensor_ndim(y);
    const int64_t *ss = nx_tensor_shape(s), *ys = nx_tensor_shape(y);
    bool ok = (nd == 1 && ny == 1 && ys[0] == ss[0]) ||
              (nd == 2 && ny == 2 && ys[0] == ss[0] && ys[1] == ss[1]) ||
              (nd == 2 && ny == 1 && ys[0] == ss[0]);
    if (!ok) {
        char a[96], b[96];
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: scores has shape %s and labels %s; expected scores [n] with "
                           "labels [n], or scores [n, C] with labels [n, C] (multilabel) or [n] "
                           "(class indices)",
                           c->who, nx_shape_str(a, sizeof a, nd, ss),
                           nx_shape_str(b, sizeof b, ny, ys));
    }
    if (ss[0] < 1 || (nd == 2 && ss[1] < 1))
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: scores has no %s; expected at least one sample and one class",
                           c->who, ss[0] < 1 ? "samples" : "classes");
    if (layout_of(c) == AUC_MULTICLASS && !nx_dtype_is_int(ly))
        return nx_rt_error(c->ctx, NX_ERR_DTYPE,
                           "%s: labels [n] with scores [n, C] are class indices but labels is "
                           "%s; expected an integer dtype",
                           c->who, nx_dtype_name(ly));
    if ((unsigned)o->average > AUC_NONE)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: average %d is out of range; expected macro, weighted, micro or "
                           "none",
                           c->who, o->average);
    return NX_OK;
}

/* Per row of scores s [R, m] (f64) and positives pos [R, m] (i64 0/1): the AUC [R] (f64, NaN
 * where undefined) and the positive counts [R] (i64). */
static void auc_rows(nx_graph *g, nx_node s, nx_node pos, int64_t R, int64_t m, nx_node *auc,
                     nx_node *npos)
{
    const nx_dtype I = NX_DTYPE_I64, F = NX_DTYPE_F64;
    int64_t shape[2] = {R, m}, flat = R * m;
    int one = 1;
    nx_node perm = nx_argsort(g, s, 1, false);
    nx_node base = nx_mul(g, nx_iota(g, I, 2, shape, 0), nx_scalar(g, I, (double)m));
    nx_node fidx = nx_add(g, perm, base);
    nx_node v = nx_gather(g, nx_reshape(g, s, 1, &flat), fidx, 0);
    nx_node p = nx_gather(g, nx_reshape(g, pos, 1, &flat), fidx, 0);
    /* the neighbours of each sorted value (edge-padded; the ends are handled by position) */
    int64_t lo1[2] = {0, 1}, hi1[2] = {0, 1};
    nx_node padded = nx_pad(g, v, lo1, hi1, NX_BORDER_NEAREST, 0.0);
    int64_t a0[2] = {0, 0}, a1[2] = {R, m}, b0[2] = {0, 2}, b1[2] = {R, m + 2};
    nx_node prev = nx_slice(g, padded, a0, a1, NULL);
    nx_node next = nx_slice(g, padded, b0, b1, NULL);
    nx_node i = nx_iota(g, I, 2, shape, 1);
    nx_node starts = nx_or(g, nx_eq(g, i, nx_scalar(g, I, 0.0)), nx_ne(g, v, prev));
    nx_node ends = nx_or(g, nx_eq(g, i, nx_scalar(g, I, (double)(m - 1))), nx_ne(g, v, next));
    /* first[i]: the last group start at or before i; last[i]: the first group end at or after */
    nx_node first =
        nx_scan(g, nx_select(g, starts, i, nx_scalar(g, I, -1.0)), 1, NX_MONOID_MAX, false);
    nx_node last =
        nx_scan(g, nx_select(g, ends, i, nx_scalar(g, I, (double)m)), 1, NX_MONOID_MIN, true);
    nx_node rank2 = nx_add(g, nx_add(g, first, last), nx_scalar(g, I, 2.0));
    nx_node r2 = nx_reduce(g, nx_mul(g, rank2, p), 1, &one, NX_MONOID_SUM, false);
    nx_node np_ = nx_reduce(g, pos, 1, &one, NX_MONOID_SUM, false);
    nx_node nn = nx_sub(g, nx_scalar(g, I, (double)m), np_);
    nx_node u2 = nx_sub(g, r2, nx_mul(g, np_, nx_add(g, np_, nx_scalar(g, I, 1.0))));
    nx_node den = nx_mul(g, nx_mul(g, np_, nn), nx_scalar(g, I, 2.0));
    nx_node bad = nx_or(g, nx_eq(g, den, nx_scalar(g, I, 0.0)),
                        nx_reduce(g, nx_isnan(g, s), 1, &one, NX_MONOID_MAX, false));
    nx_node q =
        nx_div(g, nx_cast(g, u2, F), nx_cast(g, nx_select(g, bad, nx_scalar(g, I, 1.0), den), F));
    *auc = nx_select(g, bad, nx_scalar(g, F, NAN), q);
    *npos = np_;
}

static nx_status build(nx_graph *g, const nx_op_args *c, const void *user, int nout, nx_node *outs)
{
    (void)user;
    (void)nout;
    const auc_args *o = c->opts;
    const nx_dtype I = NX_DTYPE_I64, F = NX_DTYPE_F64;
    const nx_tensor *st = c->in[0], *yt = c->in[1];
    nx_dtype dt = nx_tensor_dtype(st);
    auc_layout lay = layout_of(c);
    int nd = nx_tensor_ndim(st);
    const int64_t *ss = nx_tensor_shape(st);
    int64_t n = ss[0], C = nd == 2 ? ss[1] : 1, nc[2] = {n, C};
    nx_node s = nx_input(g, "scores", dt, nd, ss);
    nx_node y = nx_input(g, "labels", nx_tensor_dtype(yt), nx_tensor_ndim(yt), nx_tensor_shape(yt));
    nx_node pos;
    if (lay == AUC_MULTICLASS) {
        int64_t n1[2] = {n, 1};
        nx_node lab = nx_reshape(g, nx_cast(g, y, I), 2, n1);
        pos = nx_eq(g, lab, nx_iota(g, I, 2, nc, 1));
    } else {
        nx_node yz = nx_scalar(g, nx_tensor_dtype(yt), 0.0);
        pos = nx_tensor_dtype(yt) == NX_DTYPE_BOOL ? y : nx_ne(g, y, yz);
        pos = nx_reshape(g, pos, 2, nc);
    }
    nx_node sf = nx_cast(g, nx_reshape(g, s, 2, nc), F);
    pos = nx_cast(g, pos, I);
    nx_node auc, npos;
    int ax0 = 0;
    int64_t scalar_shape[1] = {1};
    if (lay == AUC_BINARY || o->average == AUC_MICRO) {
        int64_t one_row[2] = {1, n * C};
        auc_rows(g, nx_reshape(g, sf, 2, one_row), nx_reshape(g, pos, 2, one_row), 1, n * C, &auc,
                 &npos);
        auc = nx_reshape(g, auc, 0, scalar_shape);
    } else {
        int perm[2] = {1, 0};
        auc_rows(g, nx_permute(g, sf, perm), nx_permute(g, pos, perm), C, n, &auc, &npos);
        if (o->average == AUC_MACRO) {
            auc = nx_div(g, nx_reduce(g, auc, 1, &ax0, NX_MONOID_SUM, false),
                         nx_scalar(g, F, (double)C));
        } else if (o->average == AUC_WEIGHTED) {
            /* scikit-learn: weights = the positive counts, np.average; a zero total gives 0 */
            nx_node w = nx_cast(g, npos, F);
            nx_node tot = nx_reduce(g, w, 1, &ax0, NX_MONOID_SUM, false);
            nx_node num = nx_reduce(g, nx_mul(g, auc, w), 1, &ax0, NX_MONOID_SUM, false);
            nx_node empty = nx_eq(g, tot, nx_scalar(g, F, 0.0));
            auc = nx_select(g, empty, nx_scalar(g, F, 0.0),
                            nx_div(g, num, nx_select(g, empty, nx_scalar(g, F, 1.0), tot)));
        }
    }
    outs[0] = nx_cast(g, auc, dt);
    if (lay == AUC_MULTICLASS)
        nx_metric_label_bounds(g, y, outs + 1);
    return nx_graph_status(g);
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    nx_metric_labels l = {.n = layout_of(c) == AUC_MULTICLASS ? 1 : 0,
                          .names = {"labels"},
                          .nclasses =
                              nx_tensor_ndim(c->in[0]) == 2 ? nx_tensor_shape(c->in[0])[1] : 1,
                          .what = "the class count C, scores' last extent"};
    return nx_metric_run_labels(c, build, NULL, 1, &l, outs);
}

static const nx_op_opt opts[] = {
    {"average", NX_OPT_ENUM, "macro", "macro|weighted|micro|none", 1,
     "for scores [n, C]: macro: mean of the class AUCs; weighted: by positive counts; micro: "
     "one AUC of every (sample, class) pair; none: the C AUCs"},
};

static const nx_op_field fields[] = {
    {offsetof(auc_args, average), NX_OP_NO_FIELD, sizeof(int)},
};

/* One division of exact integers (then a mean of C of them): scikit-learn to 1e-12 */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 2e-7, 0},
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 0},
};

const nx_op_desc nx_op_roc_auc = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(auc_args),
    .fields = fields,
    .backend_offset = offsetof(auc_args, backend),
    .check = check,
    .run = run,
    .golden = "metrics",
    .tols = tols,
    .ntols = 2,
};
