/* The op bilateral_gaussian (include/nitrix-bilateral.h): the bounded bilateral filter of
 * bilateral.c over a neighbourhood that is, as the spec's `neighbourhood`, either an index array
 * [n, kmax] (the `neighbourhood` option) or an int (the `k` option: the k nearest points by the
 * same metric, self included), or for the typed entry point an n x n ELL's structure. The older
 * name bilateral_gaussian_knn (the k form) is an alias: the two differed only in where the
 * neighbourhood came from, which is one keyword of one op in the spec, and every option of the
 * old k form (metric, k, n_iters) keeps its name here.
 *
 * The run resolves the neighbourhood to an index array and a bool mask (the k-NN computed, an
 * ELL's pads and the caller's mask folded into one mask) and runs one program on them, from
 * nx_op_program. The index and mask are program inputs, not constants: the program is keyed by
 * their dtype and shape only (the run keys a copy of the options without the tensors, whose
 * bytes the schema would key), so a new neighbourhood of the same shape reuses it. */
#include <string.h>

#include "bilateral.h"
#include "ops/op.h"
#include "ops/semiring/semiring.h"

typedef struct bil_args {
    nx_backend backend;
    int kind;                       /* nx_metric_kind of the metric input */
    const nx_tensor *neighbourhood; /* [n, kmax] i32/i64, or NULL */
    int64_t k;                      /* k-NN count when neither neighbourhood nor ell */
    const nx_tensor *mask;          /* [n, kmax], bool or integer, or NULL */
    int64_t n_iters;
    const nx_ell *ell; /* not in the schema: the typed entry point's ELL neighbourhood */
} bil_args;

static const nx_op_opt opts[] = {
    {"metric", NX_OPT_ENUM, "diagonal", NX_BIL_METRIC_NAMES, 1,
     "the metric input is sigma [d_f] (diagonal) or L [d_f, r] with M = L L^T (factor)"},
    {"neighbourhood", NX_OPT_TENSOR, "", NULL, 1,
     "index array [n, kmax] (i32/i64, entries in [0, n)); none: the k nearest points"},
    {"k", NX_OPT_INT, "0", "0:", 1,
     "the spec's int neighbourhood: the k nearest points by the metric, self included"},
    {"mask", NX_OPT_TENSOR, "", NULL, 1,
     "[n, kmax] bool or integer: zero drops the slot (none: every slot valid)"},
    {"n_iters", NX_OPT_INT, "1", "1:1024", 1,
     "rounds of the average with the same weights (mean field)"},
};

#define F(m) offsetof(bil_args, m), NX_OP_NO_FIELD, sizeof(((bil_args *)0)->m)
static const nx_op_field fields[] = {
    {F(kind)}, {F(neighbourhood)}, {F(k)}, {F(mask)}, {F(n_iters)},
};
#undef F

/* ---- checks -----------------------------------------------------------------------------------*/

/* The C-order position of the first entry outside [0, n), or -1; a plain loop over contiguous
 * storage, since grid neighbourhoods have millions of entries. */
static int64_t first_out_of_range(const nx_tensor *idx, int64_t n)
{
    int64_t kmax = nx_tensor_shape(idx)[1], count = nx_tensor_numel(idx);
    if (nx_tensor_is_contiguous(idx) && nx_tensor_dtype(idx) == NX_DTYPE_I64) {
        const int64_t *p = nx_tensor_data(idx);
        for (int64_t e = 0; e < count; e++)
            if (p[e] < 0 || p[e] >= n)
                return e;
        return -1;
    }
    if (nx_tensor_is_contiguous(idx) && nx_tensor_dtype(idx) == NX_DTYPE_I32) {
        const int32_t *p = nx_tensor_data(idx);
        for (int64_t e = 0; e < count; e++)
            if (p[e] < 0 || p[e] >= n)
                return e;
        return -1;
    }
    for (int64_t e = 0; e < count; e++) {
        double j = nx_bil_at(idx, (int64_t[]){e / kmax, e % kmax});
        if (j < 0 || j >= (double)n)
            return e;
    }
    return -1;
}

static nx_status check_index(nx_ctx *ctx, const char *who, const nx_tensor *idx, int64_t n)
{
    nx_dtype d = nx_tensor_dtype(idx);
    if (nx_tensor_device(idx) != NX_DEVICE_HOST || (d != NX_DTYPE_I32 && d != NX_DTYPE_I64))
        return nx_rt_error(ctx, NX_ERR_DTYPE, "%s: index is %s; expected a host i32 or i64 array",
                           who, nx_dtype_name(d));
    if (nx_tensor_ndim(idx) != 2 || nx_tensor_shape(idx)[0] != n || nx_tensor_shape(idx)[1] < 1)
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "%s: index has %d dims (first extent %lld); expected [n, kmax] with "
                           "n = %lld, kmax >= 1",
                           who, nx_tensor_ndim(idx),
                           (long long)(nx_tensor_ndim(idx) ? nx_tensor_shape(idx)[0] : -1),
                           (long long)n);
    int64_t bad = first_out_of_range(idx, n);
    if (bad >= 0) {
        int64_t kmax = nx_tensor_shape(idx)[1];
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: index[%lld, %lld] is %.0f; expected 0 <= j < n = %lld (mask out "
                           "padding slots instead)",
                           who, (long long)(bad / kmax), (long long)(bad % kmax),
                           nx_bil_at(idx, (int64_t[]){bad / kmax, bad % kmax}), (long long)n);
    }
    return NX_OK;
}

static nx_status check_mask(nx_ctx *ctx, const char *who, const nx_tensor *mask, int64_t n,
                            int64_t kmax)
{
    nx_dtype d = nx_tensor_dtype(mask);
    if (nx_tensor_device(mask) != NX_DEVICE_HOST || (d != NX_DTYPE_BOOL && !nx_dtype_is_int(d)))
        return nx_rt_error(ctx, NX_ERR_DTYPE,
                           "%s: mask is %s; expected a host bool or integer array", who,
                           nx_dtype_name(d));
    if (nx_tensor_ndim(mask) != 2 || nx_tensor_shape(mask)[0] != n ||
        nx_tensor_shape(mask)[1] != kmax)
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "%s: mask must have the neighbourhood's shape [%lld, %lld]", who,
                           (long long)n, (long long)kmax);
    return NX_OK;
}

static nx_status check_points(nx_ctx *ctx, const char *who, const nx_tensor *v, const nx_tensor *f)
{
    nx_status st = nx_sr_check_float(ctx, who, "values", v);
    if (st == NX_OK)
        st = nx_sr_check_float(ctx, who, "features", f);
    if (st != NX_OK)
        return st;
    if (nx_tensor_dtype(v) != nx_tensor_dtype(f))
        return nx_rt_error(ctx, NX_ERR_DTYPE, "%s: values are %s but features are %s", who,
                           nx_dtype_name(nx_tensor_dtype(v)), nx_dtype_name(nx_tensor_dtype(f)));
    if (nx_tensor_ndim(v) != 2 || nx_tensor_ndim(f) != 2 ||
        nx_tensor_shape(v)[0] != nx_tensor_shape(f)[0] || nx_tensor_shape(f)[1] < 1)
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "%s: values and features must be [n, d_v] and [n, d_f] (d_f >= 1) "
                           "with one n (they have %d and %d dims, n %lld and %lld)",
                           who, nx_tensor_ndim(v), nx_tensor_ndim(f),
                           (long long)(nx_tensor_ndim(v) ? nx_tensor_shape(v)[0] : -1),
                           (long long)(nx_tensor_ndim(f) ? nx_tensor_shape(f)[0] : -1));
    int64_t bad = -1, d = nx_tensor_shape(f)[1];
    double x = 0;
    if (!nx_bil_all_finite(f, &bad, &x))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: features of point %lld (component %lld) is %g; features must "
                           "be finite",
                           who, (long long)(bad / d), (long long)(bad % d), x);
    return NX_OK;
}

static nx_status check_ell(nx_ctx *ctx, const char *who, const nx_ell *e, int64_t n)
{
    nx_status st = nx_ell_check(ctx, who, e);
    if (st != NX_OK)
        return st;
    if (e->n_cols != n || nx_tensor_shape(e->indices)[0] != n)
        return nx_rt_error(
            ctx, NX_ERR_SHAPE, "%s: the ELL is %lld x %lld; expected n x n with n = %lld points",
            who, (long long)nx_tensor_shape(e->indices)[0], (long long)e->n_cols, (long long)n);
    return NX_OK;
}

static nx_status check_dout(const nx_op_args *c)
{
    const nx_tensor *v = c->in[0], *dout = c->dy[0];
    nx_status st = nx_sr_check_float(c->ctx, c->who, "dout", dout);
    if (st == NX_OK && (nx_tensor_dtype(dout) != nx_tensor_dtype(v) || nx_tensor_ndim(dout) != 2 ||
                        memcmp(nx_tensor_shape(dout), nx_tensor_shape(v), 2 * sizeof(int64_t))))
        st = nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: dout must have the values' dtype and shape",
                         c->who);
    return st;
}

/* Everything but the k-NN itself, which the run computes. */
static nx_status check(const nx_op_args *c)
{
    const bil_args *a = c->opts;
    const nx_tensor *v = c->in[0], *f = c->in[1];
    nx_status st = check_points(c->ctx, c->who, v, f);
    nx_feature_metric m = {(nx_metric_kind)a->kind, c->in[2]};
    if (st == NX_OK)
        st = nx_bil_check_metric(c->ctx, c->who, &m, nx_tensor_dtype(f), nx_tensor_shape(f)[1]);
    if (st != NX_OK)
        return st;
    if (a->n_iters < 1 || a->n_iters > NX_BILATERAL_MAX_ITERS)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: n_iters = %lld; expected 1..%d (0 in nx_bilateral_opts: 1)", c->who,
                           (long long)a->n_iters, NX_BILATERAL_MAX_ITERS);
    int64_t n = nx_tensor_shape(f)[0], kmax = a->k;
    if (a->ell && a->neighbourhood)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: give index or ell, not both", c->who);
    if (a->ell) {
        if ((st = check_ell(c->ctx, c->who, a->ell, n)) != NX_OK)
            return st;
        kmax = nx_tensor_shape(a->ell->indices)[1];
    } else if (a->neighbourhood) {
        if ((st = check_index(c->ctx, c->who, a->neighbourhood, n)) != NX_OK)
            return st;
        kmax = nx_tensor_shape(a->neighbourhood)[1];
    } else if (n > 0 && (a->k < 1 || a->k > n)) {
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: k = %lld; expected 1 <= k <= %lld (n = %lld points), or a "
                           "neighbourhood array",
                           c->who, (long long)a->k, (long long)n, (long long)n);
    }
    if (a->mask && (st = check_mask(c->ctx, c->who, a->mask, n, kmax)) != NX_OK)
        return st;
    return c->dy ? check_dout(c) : NX_OK;
}

/* ---- the neighbourhood ------------------------------------------------------------------------*/

/* The ELL's structure: its indices, and its pads (value == identity) masked out. */
static nx_status ell_neighbourhood(nx_ctx *ctx, const nx_ell *e, nx_tensor **index,
                                   nx_tensor **mask)
{
    int64_t n = nx_tensor_shape(e->indices)[0], kmax = nx_tensor_shape(e->indices)[1];
    nx_status st = nx_tensor_copy(e->indices, index);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_BOOL, 2, (int64_t[]){n, kmax}, mask);
    for (int64_t i = 0; st == NX_OK && i < n; i++)
        for (int64_t s = 0; s < kmax; s++)
            ((uint8_t *)nx_tensor_data(*mask))[i * kmax + s] =
                nx_bil_at(e->values, (int64_t[]){i, s}) != e->identity;
    return st;
}

/* *mask (NULL or bool) and-ed with the caller's mask. */
static nx_status and_mask(const nx_tensor *user, nx_tensor **mask)
{
    nx_tensor *b = NULL;
    nx_status st = nx_tensor_dtype(user) == NX_DTYPE_BOOL && !*mask
                       ? nx_tensor_contiguous(user, &b)
                       : nx_tensor_cast(user, NX_DTYPE_BOOL, &b);
    if (st != NX_OK || !*mask) {
        *mask = b;
        return st;
    }
    uint8_t *m = nx_tensor_data(*mask);
    const uint8_t *u = nx_tensor_data(b);
    for (int64_t i = 0; i < nx_tensor_numel(b); i++)
        m[i] = m[i] && u[i];
    nx_tensor_free(b);
    return NX_OK;
}

/* *index and *mask (NULL: none) as new references the caller frees: the k-NN computed here on the
 * backend the call was placed on, masks converted to bool. */
static nx_status resolve(const nx_op_args *c, nx_tensor **index, nx_tensor **mask)
{
    const bil_args *a = c->opts;
    nx_status st = NX_OK;
    if (a->ell) {
        st = ell_neighbourhood(c->ctx, a->ell, index, mask);
    } else if (a->neighbourhood) {
        st = nx_tensor_contiguous(a->neighbourhood, index);
    } else {
        nx_feature_metric m = {(nx_metric_kind)a->kind, c->in[2]};
        nx_knn_opts ko = {.backend = c->backend, .metric = &m};
        st = nx_brute_force_knn(c->ctx, c->in[1], a->k, &ko, index);
    }
    if (st == NX_OK && a->mask)
        st = and_mask(a->mask, mask);
    return st;
}

/* ---- the program ------------------------------------------------------------------------------*/

typedef struct bil_call {
    const nx_tensor *index, *mask;
    nx_metric_kind kind;
    int n_iters;
} bil_call;

static nx_node input_of(nx_graph *g, const char *name, const nx_tensor *t, bool param)
{
    if (!t)
        return NX_NONE;
    return (param ? nx_parameter : nx_input)(g, name, nx_tensor_dtype(t), nx_tensor_ndim(t),
                                             nx_tensor_shape(t));
}

/* values, features and the metric (parameters for a vjp: nx_op_program differentiates them, in
 * this order), then index and mask. */
static nx_status build(nx_graph *g, const nx_op_args *c, const void *user, int nout, nx_node *outs)
{
    (void)nout;
    const bil_call *b = user;
    bool grad = c->dy != NULL;
    nx_node v = input_of(g, "values", c->in[0], grad);
    nx_node f = input_of(g, "features", c->in[1], grad);
    nx_node p = input_of(g, "metric", c->in[2], grad);
    nx_node idx = input_of(g, "index", b->index, false);
    nx_node mask = input_of(g, "mask", b->mask, false);
    outs[0] = nx_bilateral_node(g, v, f, b->kind, p, idx, mask, b->n_iters);
    return nx_graph_status(g);
}

static void key_stage(nx_rt_cache_blob *b, const void *user)
{
    const bil_call *bc = user;
    nx_rt_cache_blob_tensor(b, "index", bc->index);
    nx_rt_cache_blob_tensor(b, "mask", bc->mask);
}

/* Zero results for n = 0 (nothing to average): the output, or one gradient per input. */
static nx_status empty(const nx_op_args *c, nx_tensor **outs)
{
    nx_status st = NX_OK;
    for (int i = 0; i < (c->dy ? 3 : 1) && st == NX_OK; i++)
        st = nx_tensor_new(c->ctx, nx_tensor_dtype(c->in[i]), nx_tensor_ndim(c->in[i]),
                           nx_tensor_shape(c->in[i]), &outs[i]);
    return st;
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    const bil_args *a = c->opts;
    if (nx_tensor_shape(c->in[0])[0] == 0)
        return empty(c, outs);
    nx_tensor *index = NULL, *mask = NULL;
    nx_status st = resolve(c, &index, &mask);
    bil_call b = {
        .index = index, .mask = mask, .kind = (nx_metric_kind)a->kind, .n_iters = (int)a->n_iters};
    /* The key sees the options without their tensors (see the top of the file). */
    bil_args keyed = *a;
    keyed.neighbourhood = keyed.mask = NULL;
    keyed.ell = NULL;
    keyed.k = 0;
    nx_op_args kc = *c;
    kc.opts = &keyed;
    nx_program *p = NULL;
    if (st == NX_OK)
        st = nx_op_program(&kc, "filter", key_stage, build, &b, 1, &p);
    if (st == NX_OK) {
        const nx_tensor *ins[6] = {c->in[0], c->in[1], c->in[2], index};
        int n = 4;
        if (mask)
            ins[n++] = mask;
        if (c->dy)
            ins[n++] = c->dy[0];
        st = nx_program_run(p, ins, outs);
    }
    nx_tensor_free(index);
    nx_tensor_free(mask);
    return st;
}

static const char *const aliases[] = {"bilateral_gaussian_knn", NULL};

/* Golden replay against the NumPy N-body reference (golden/bilateral/bil_*), as
 * the (retired) golden/tolerance.tsv had them for bilateral_gaussian and bilateral_gaussian_knn. */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-12},
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-5},
};

const nx_op_desc nx_op_bilateral_gaussian = {
    .info = {.nopts = sizeof opts / sizeof opts[0], .opts = opts, .aliases = aliases},
    .opts_size = sizeof(bil_args),
    .fields = fields,
    .backend_offset = offsetof(bil_args, backend),
    .check = check,
    .run = run,
    .golden = "bilateral",
    .tols = tols,
    .ntols = sizeof tols / sizeof tols[0],
};

/* ---- the typed entry points -------------------------------------------------------------------*/

static nx_status args_from(nx_ctx *ctx, const char *who, const nx_bilateral_opts *o, bil_args *a)
{
    if (!o)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: opts is NULL; expected the metric and the neighbourhood", who);
    *a = (bil_args){.backend = o->backend,
                    .kind = (int)o->metric.kind,
                    .neighbourhood = o->index,
                    .k = o->k,
                    .mask = o->mask,
                    .n_iters = o->n_iters ? o->n_iters : 1,
                    .ell = o->ell};
    return NX_OK;
}

nx_status nx_bilateral_gaussian(nx_ctx *ctx, const nx_tensor *values, const nx_tensor *features,
                                const nx_bilateral_opts *opts, nx_tensor **out)
{
    static const char *who = "nx_bilateral_gaussian";
    bil_args a = {0};
    if (ctx && out) {
        nx_status st = args_from(ctx, who, opts, &a);
        if (st != NX_OK) {
            *out = NULL;
            return st;
        }
    }
    const nx_tensor *in[3] = {values, features, opts ? opts->metric.param : NULL};
    return nx_op_run_as(ctx, &nx_op_bilateral_gaussian, who, in, &a, out);
}

nx_status nx_bilateral_gaussian_vjp(nx_ctx *ctx, const nx_tensor *values, const nx_tensor *features,
                                    const nx_bilateral_opts *opts, const nx_tensor *dout,
                                    nx_tensor **d_values, nx_tensor **d_features,
                                    nx_tensor **d_metric)
{
    static const char *who = "nx_bilateral_gaussian_vjp";
    nx_tensor **dst[3] = {d_values, d_features, d_metric};
    for (int i = 0; i < 3; i++)
        if (dst[i])
            *dst[i] = NULL;
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: ctx is NULL", who);
    bil_args a = {0};
    nx_status st = args_from(ctx, who, opts, &a);
    if (st != NX_OK)
        return st;
    const nx_tensor *in[3] = {values, features, opts->metric.param};
    nx_tensor *res[3] = {NULL, NULL, NULL};
    st = nx_op_run_vjp_as(ctx, &nx_op_bilateral_gaussian, who, in, &a,
                          (const nx_tensor *const[]){dout}, res);
    for (int i = 0; i < 3; i++) {
        if (st == NX_OK && dst[i])
            *dst[i] = res[i];
        else
            nx_tensor_free(res[i]);
    }
    return st;
}
