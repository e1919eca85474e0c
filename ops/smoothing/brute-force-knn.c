/* The op brute_force_knn: the k nearest neighbours of each point by a feature metric, as a
 * graph (the block of squared distances q[i, j] = d_M(f_i, f_j)^2, then the IR's top-k, smallest
 * first and first index on ties), run over blocks of rows through nx_op_program. The typed entry
 * point nx_brute_force_knn is a short wrapper around the runner. */
#include <math.h>
#include <string.h>

#include "bilateral.h"
#include "ops/op.h"
#include "ops/semiring/semiring.h"

/* Rows per program run: the [rows, n] distance block stays near 4 M elements. */
#define KNN_BLOCK_ELEMS (INT64_C(1) << 22)

/* The op's options. euclidean is not in the schema: the typed entry point with no metric sets it,
 * and the metric input is then a placeholder that is never read. */
typedef struct knn_args {
    nx_backend backend;
    int kind;
    int64_t k;
    bool exclude_self;
    bool euclidean;
} knn_args;

static const nx_op_opt opts[] = {
    {"metric", NX_OPT_ENUM, "diagonal", NX_BIL_METRIC_NAMES, 1,
     "the metric input is sigma [d_f] (diagonal) or L [d_f, r] with M = L L^T (factor)"},
    {"k", NX_OPT_INT, NULL, "1:", 1, "neighbours per point (self included unless exclude_self)"},
    {"exclude_self", NX_OPT_BOOL, "false", NULL, 1,
     "leave each point out of its own list (k <= n - 1)"},
};

#define F(m) offsetof(knn_args, m), NX_OP_NO_FIELD, sizeof(((knn_args *)0)->m)
static const nx_op_field fields[] = {{F(kind)}, {F(k)}, {F(exclude_self)}};
#undef F

typedef struct knn_call {
    const nx_tensor *features, *param;
    nx_metric_kind kind;
    int64_t rows, k;
    bool exclude_self;
} knn_call;

/* q [rows, n] between the block's points xi and all points y, with the block's own points set to
 * -inf (always first) or NaN (sorted after every number, so never among the k). */
static nx_status build_knn(nx_graph *g, const nx_op_args *oc, const void *user, int nout,
                           nx_node *outs)
{
    (void)oc;
    (void)nout;
    const knn_call *c = user;
    nx_dtype dt = nx_tensor_dtype(c->features);
    int64_t n = nx_tensor_shape(c->features)[0], d = nx_tensor_shape(c->features)[1];
    int64_t b = c->rows;
    nx_node xi = nx_input(g, "block", dt, 2, (int64_t[]){b, d});
    nx_node y = nx_input(g, "features", dt, 2, (int64_t[]){n, d});
    nx_node off = nx_input(g, "first_row", NX_DTYPE_I64, 0, NULL);
    nx_node p = c->param
                    ? nx_input(g, "metric", dt, nx_tensor_ndim(c->param), nx_tensor_shape(c->param))
                    : NX_NONE;
    nx_node delta = nx_sub(g, nx_reshape(g, xi, 3, (int64_t[]){b, 1, d}),
                           nx_reshape(g, y, 3, (int64_t[]){1, n, d}));
    nx_node q;
    if (p) {
        q = nx_metric_sqdist_node(g, c->kind, p, delta);
    } else {
        int last = -1;
        q = nx_reduce(g, nx_mul(g, delta, delta), 1, &last, NX_MONOID_SUM, false);
    }
    int64_t bs[2] = {b, n};
    nx_node self = nx_eq(g, nx_add(g, nx_iota(g, NX_DTYPE_I64, 2, bs, 0), off),
                         nx_iota(g, NX_DTYPE_I64, 2, bs, 1));
    q = nx_select(g, self, nx_scalar(g, dt, c->exclude_self ? NAN : -INFINITY), q);
    nx_topk(g, q, c->k, 1, false, NULL, &outs[0]);
    return nx_graph_status(g);
}

static nx_status check(const nx_op_args *c)
{
    const knn_args *a = c->opts;
    const nx_tensor *f = c->in[0];
    nx_status st = nx_bil_check_features(c->ctx, c->who, f);
    if (st != NX_OK)
        return st;
    int64_t n = nx_tensor_shape(f)[0];
    nx_feature_metric m = {(nx_metric_kind)a->kind, c->in[1]};
    if (!a->euclidean && (st = nx_bil_check_metric(c->ctx, c->who, &m, nx_tensor_dtype(f),
                                                   nx_tensor_shape(f)[1])) != NX_OK)
        return st;
    int64_t kmax = a->exclude_self ? n - 1 : n;
    if (a->k < 1 || (n > 0 && a->k > kmax))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: k = %lld; expected 1 <= k <= %lld (n = %lld points%s)", c->who,
                           (long long)a->k, (long long)kmax, (long long)n,
                           a->exclude_self ? ", self excluded" : "");
    return NX_OK;
}

static void key_rows(nx_rt_cache_blob *b, const void *user)
{
    const knn_call *c = user;
    nx_rt_cache_blob_i64(b, "rows", c->rows);
}

/* Runs the block of rows [r0, r0 + c->rows) and copies its indices into out. */
static nx_status knn_block(const nx_op_args *oc, const knn_call *c, int64_t r0, nx_tensor *out)
{
    nx_program *p = NULL;
    nx_status st = nx_op_program(oc, "block", key_rows, build_knn, c, 1, &p);
    if (st != NX_OK)
        return st;
    nx_tensor *blk = NULL, *off = NULL, *res = NULL;
    st = nx_tensor_slice(c->features, 0, r0, r0 + c->rows, 1, &blk);
    if (st == NX_OK)
        st = nx_tensor_new(oc->ctx, NX_DTYPE_I64, 0, NULL, &off);
    if (st == NX_OK) {
        *(int64_t *)nx_tensor_data(off) = r0;
        const nx_tensor *ins[4] = {blk, c->features, off, c->param};
        st = nx_program_run(p, ins, &res);
    }
    if (st == NX_OK)
        memcpy((int64_t *)nx_tensor_data(out) + r0 * c->k, nx_tensor_data(res),
               (size_t)(c->rows * c->k) * sizeof(int64_t));
    nx_tensor_free(res);
    nx_tensor_free(off);
    nx_tensor_free(blk);
    return st;
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    const knn_args *a = c->opts;
    const nx_tensor *features = c->in[0];
    int64_t n = nx_tensor_shape(features)[0];
    nx_tensor *res = NULL;
    nx_status st = nx_tensor_new(c->ctx, NX_DTYPE_I64, 2, (int64_t[]){n, a->k}, &res);
    if (st != NX_OK)
        return st;
    knn_call kc = {.features = features,
                   .param = a->euclidean ? NULL : c->in[1],
                   .kind = (nx_metric_kind)a->kind,
                   .k = a->k,
                   .exclude_self = a->exclude_self};
    int64_t rows = n > 0 ? KNN_BLOCK_ELEMS / n : 1;
    rows = rows < 1 ? 1 : rows > n ? n : rows;
    for (int64_t r0 = 0; r0 < n && st == NX_OK; r0 += rows) {
        kc.rows = n - r0 < rows ? n - r0 : rows;
        st = knn_block(c, &kc, r0, res);
        nx_op_progress(c, r0 + kc.rows, n);
    }
    if (st != NX_OK) {
        nx_tensor_free(res);
        return st;
    }
    outs[0] = res;
    return NX_OK;
}

static void key(nx_rt_cache_blob *b, const nx_op_args *c)
{
    nx_rt_cache_blob_i64(b, "euclidean", ((const knn_args *)c->opts)->euclidean);
}

/* Indices: exact (golden/bilateral/knn_*, numpy's stable argsort of f64 distances). */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_brute_force_knn = {
    .info = {.nopts = sizeof opts / sizeof opts[0], .opts = opts},
    .opts_size = sizeof(knn_args),
    .fields = fields,
    .backend_offset = offsetof(knn_args, backend),
    .check = check,
    .key = key,
    .run = run,
    .golden = "bilateral",
    .tols = tols,
    .ntols = sizeof tols / sizeof tols[0],
};

nx_status nx_brute_force_knn(nx_ctx *ctx, const nx_tensor *features, int64_t k,
                             const nx_knn_opts *opts, nx_tensor **out)
{
    static const nx_knn_opts defaults = {0};
    const nx_knn_opts *o = opts ? opts : &defaults;
    knn_args a = {.backend = o->backend,
                  .kind = o->metric ? (int)o->metric->kind : 0,
                  .k = k,
                  .exclude_self = o->exclude_self,
                  .euclidean = !o->metric};
    /* Without a metric the features stand in for the metric input, which is then not read. */
    const nx_tensor *metric = o->metric ? o->metric->param : features;
    return nx_op_run_as(ctx, &nx_op_brute_force_knn, "nx_brute_force_knn",
                        (const nx_tensor *const[]){features, metric}, &a, out);
}
