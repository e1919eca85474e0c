/* The numerics ops (docs/numerics.md) beyond the golden replay (NumPy, numpy.percentile,
 * math.fsum and fractions oracles) and the FD gradient test: every bad input the issue names
 * (a percentile outside [0, 100], lo >= hi, an axis out of range, multiple <= 0, a mask of the
 * wrong shape) and the others each op refuses, with their messages; the documented results (an
 * all-zero input's empty bounding box, an empty mask line); compensated sums that are exact where
 * a plain sum loses every small term, on the compiled CPU backend and the interpreter, in f32 and
 * f64; identities between the ops (pads undo, a full mask is no mask, the window's peak); the
 * closed-form gradients of the sums and of a pad with its integer output. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nitrix-op.h"
#include "testutil.h"

static nx_test_alloc g_ta;

static nx_ctx *ctx_new(void)
{
    memset(&g_ta, 0, sizeof g_ta);
    return nx_test_ctx(&g_ta);
}

static void ctx_done(nx_ctx *ctx)
{
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

static nx_tensor *make(nx_ctx *ctx, nx_dtype dt, int nd, const int64_t *shape, const double *v)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, dt, nd, shape, &t), NX_OK);
    int64_t n = nx_tensor_numel(t);
    void *d = nx_tensor_data(t);
    for (int64_t i = 0; i < n; i++) {
        double x = v ? v[i] : 0.0;
        switch (dt) {
        case NX_DTYPE_F64:
            ((double *)d)[i] = x;
            break;
        case NX_DTYPE_F32:
            ((float *)d)[i] = (float)x;
            break;
        case NX_DTYPE_I32:
            ((int32_t *)d)[i] = (int32_t)x;
            break;
        case NX_DTYPE_I64:
            ((int64_t *)d)[i] = (int64_t)x;
            break;
        case NX_DTYPE_BOOL:
            ((uint8_t *)d)[i] = x != 0;
            break;
        default:
            fail_msg("make: dtype %s", nx_dtype_name(dt));
        }
    }
    return t;
}

static double at(const nx_tensor *t, int64_t i)
{
    const void *d = nx_tensor_data(t);
    switch (nx_tensor_dtype(t)) {
    case NX_DTYPE_F64:
        return ((const double *)d)[i];
    case NX_DTYPE_F32:
        return ((const float *)d)[i];
    case NX_DTYPE_I64:
        return (double)((const int64_t *)d)[i];
    case NX_DTYPE_I32:
        return (double)((const int32_t *)d)[i];
    default:
        fail_msg("at: dtype %s", nx_dtype_name(nx_tensor_dtype(t)));
    }
    return NAN;
}

/* op on nin inputs with options "k=v" (NULL-terminated); nout outputs. */
static nx_status call(nx_ctx *ctx, const char *op, int nin, const nx_tensor *const *in,
                      const char *const *kv, int nout, nx_tensor **out)
{
    const char *keys[8], *vals[8];
    char buf[8][64];
    int n = 0;
    for (; kv && kv[n]; n++) {
        snprintf(buf[n], sizeof buf[n], "%s", kv[n]);
        char *eq = strchr(buf[n], '=');
        assert_non_null(eq);
        *eq = '\0';
        keys[n] = buf[n];
        vals[n] = eq + 1;
    }
    for (int i = 0; i < nout; i++)
        out[i] = NULL;
    return nx_op_call(ctx, op, nin, in, n, keys, vals, nout, out);
}

static nx_tensor *run1(nx_ctx *ctx, const char *op, int nin, const nx_tensor *const *in,
                       const char *const *kv)
{
    nx_tensor *y = NULL;
    if (call(ctx, op, nin, in, kv, 1, &y) != NX_OK)
        fail_msg("%s: %s", op, nx_ctx_last_error(ctx));
    return y;
}

static void expect_error(nx_ctx *ctx, const char *op, int nin, const nx_tensor *const *in,
                         const char *const *kv, int nout, nx_status want, const char *needle)
{
    nx_tensor *y[2] = {NULL, NULL};
    nx_status st = call(ctx, op, nin, in, kv, nout, y);
    if (st != want)
        fail_msg("%s: status %s, expected %s (%s)", op, nx_status_str(st), nx_status_str(want),
                 nx_ctx_last_error(ctx));
    assert_null(y[0]);
    assert_null(y[1]);
    const char *msg = nx_ctx_last_error(ctx);
    if (!strstr(msg, needle))
        fail_msg("%s: message \"%s\" lacks \"%s\"", op, msg, needle);
}

#define KV(...) ((const char *const[]){__VA_ARGS__, NULL})
#define IN(...) ((const nx_tensor *const[]){__VA_ARGS__})

/* ---- bad input ---------------------------------------------------------------------------*/

static void test_percentiles_refused(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t s[2] = {3, 4};
    nx_tensor *x = make(ctx, NX_DTYPE_F64, 2, s, NULL);
    /* outside [0, 100]: the schema's range or the op's check, both name the option */
    expect_error(ctx, "percentile_rescale", 1, IN(x), KV("lo=-1"), 1, NX_ERR_INVALID_ARG, "lo");
    expect_error(ctx, "percentile_rescale", 1, IN(x), KV("hi=100.5"), 1, NX_ERR_INVALID_ARG, "hi");
    expect_error(ctx, "intensity_normalize", 1, IN(x), KV("high_percentile=101"), 1,
                 NX_ERR_INVALID_ARG, "high_percentile");
    expect_error(ctx, "intensity_normalize", 1, IN(x), KV("low_percentile=-0.1"), 1,
                 NX_ERR_INVALID_ARG, "low_percentile");
    expect_error(ctx, "percentile_rescale", 1, IN(x), KV("lo=nan"), 1, NX_ERR_INVALID_ARG, "lo");
    /* lo >= hi */
    expect_error(ctx, "percentile_rescale", 1, IN(x), KV("lo=50", "hi=50"), 1, NX_ERR_INVALID_ARG,
                 "expected lo < hi");
    expect_error(ctx, "percentile_rescale", 1, IN(x), KV("lo=90", "hi=10"), 1, NX_ERR_INVALID_ARG,
                 "expected lo < hi");
    expect_error(ctx, "intensity_normalize", 1, IN(x),
                 KV("low_percentile=60", "high_percentile=40"), 1, NX_ERR_INVALID_ARG,
                 "expected low_percentile < high_percentile");
    nx_tensor_free(x);
    ctx_done(ctx);
}

static void test_axes_refused(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t s[2] = {3, 4};
    nx_tensor *x = make(ctx, NX_DTYPE_F64, 2, s, NULL);
    static const char *const ops[] = {"demean",
                                      "zscore_normalize",
                                      "psc_normalize",
                                      "robust_zscore_normalize",
                                      "intensity_normalize",
                                      "percentile_rescale",
                                      "lp_normalize",
                                      "l2_normalize",
                                      "instance_norm",
                                      "kahan_sum",
                                      "neumaier_sum",
                                      "pairwise_sum"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        const char *key = strcmp(ops[i], "instance_norm") == 0 ? "axes=2" : "axis=2";
        expect_error(ctx, ops[i], 1, IN(x), KV(key), 1, NX_ERR_INVALID_ARG,
                     "out of range for an input of rank 2");
        const char *neg = strcmp(ops[i], "instance_norm") == 0 ? "axes=-3" : "axis=-3";
        expect_error(ctx, ops[i], 1, IN(x), KV(neg), 1, NX_ERR_INVALID_ARG, "expected -2..1");
    }
    expect_error(ctx, "zscore_normalize", 1, IN(x), KV("axis=1,-1"), 1, NX_ERR_INVALID_ARG,
                 "given twice");
    expect_error(ctx, "compensated_dot", 2, IN(x, x), KV("axis=7"), 1, NX_ERR_INVALID_ARG,
                 "out of range");
    /* instance_norm's default axes need N, C and a spatial axis */
    expect_error(ctx, "instance_norm", 1, IN(x), NULL, 1, NX_ERR_SHAPE, "expected rank >= 3");
    int64_t m4 = 4;
    nx_tensor *m = make(ctx, NX_DTYPE_BOOL, 1, &m4, (const double[]){1, 0, 1, 1});
    expect_error(ctx, "apply_mask", 2, IN(x, m), KV("axis=2"), 1, NX_ERR_INVALID_ARG,
                 "out of range for rank 2");
    expect_error(ctx, "conform_mask", 2, IN(x, m), KV("axis=-3"), 1, NX_ERR_INVALID_ARG,
                 "out of range");
    expect_error(ctx, "fold_axis", 1, IN(x), KV("axis=2", "n=1"), 1, NX_ERR_INVALID_ARG,
                 "out of range");
    expect_error(ctx, "unfold_axes", 1, IN(x), KV("axes=0,2"), 1, NX_ERR_INVALID_ARG,
                 "out of range");
    expect_error(ctx, "orient_and_conform", 1, IN(x), KV("axis=0,3", "dim=3"), 1,
                 NX_ERR_INVALID_ARG, "out of range");
    expect_error(ctx, "broadcast_ignoring", 2, IN(x, x), KV("ignore_axes=2"), 2, NX_ERR_INVALID_ARG,
                 "out of range");
    nx_tensor_free(m);
    nx_tensor_free(x);
    ctx_done(ctx);
}

static void test_multiples_refused(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t s[2] = {5, 7};
    nx_tensor *x = make(ctx, NX_DTYPE_F32, 2, s, NULL);
    expect_error(ctx, "pad_to_multiple", 1, IN(x), KV("multiple=0"), 2, NX_ERR_INVALID_ARG,
                 "multiple");
    expect_error(ctx, "pad_to_multiple", 1, IN(x), KV("multiple=4,-2"), 2, NX_ERR_INVALID_ARG,
                 "multiple");
    expect_error(ctx, "crop_to_multiple", 1, IN(x), KV("multiple=0"), 1, NX_ERR_INVALID_ARG,
                 "multiple");
    expect_error(ctx, "pad_to_multiple", 1, IN(x), KV("multiple=2,2,2"), 2, NX_ERR_INVALID_ARG,
                 "expected 1 or 2");
    expect_error(ctx, "pad_to_multiple", 1, IN(x), KV("multiple=2", "spatial_rank=3"), 2,
                 NX_ERR_INVALID_ARG, "spatial_rank is 3");
    expect_error(ctx, "crop_to_multiple", 1, IN(x), KV("multiple=8"), 1, NX_ERR_SHAPE,
                 "below its multiple 8");
    expect_error(ctx, "pad_to_multiple", 1, IN(x), NULL, 2, NX_ERR_INVALID_ARG, "multiple");
    expect_error(ctx, "fold_axis", 1, IN(x), KV("axis=1", "n=3"), 1, NX_ERR_INVALID_ARG,
                 "dividing the extent");
    expect_error(ctx, "fold_axis", 1, IN(x), KV("axis=1", "n=0"), 1, NX_ERR_INVALID_ARG, "n");
    nx_tensor_free(x);
    ctx_done(ctx);
}

static void test_masks_refused(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t s[2] = {3, 4}, w[2] = {3, 3}, five = 5, four = 4;
    nx_tensor *x = make(ctx, NX_DTYPE_F64, 2, s, NULL);
    nx_tensor *m33 = make(ctx, NX_DTYPE_BOOL, 2, w, NULL);
    nx_tensor *m5 = make(ctx, NX_DTYPE_BOOL, 1, &five, NULL);
    nx_tensor *none = make(ctx, NX_DTYPE_BOOL, 1, &four, NULL);
    expect_error(ctx, "percentile_rescale", 2, IN(x, m33), NULL, 1, NX_ERR_SHAPE,
                 "mask has shape [3,3]; expected x's shape [3,4]");
    expect_error(ctx, "apply_mask", 2, IN(x, m5), NULL, 1, NX_ERR_SHAPE,
                 "expected a 1-d mask of x's extent along axis 1, [4]");
    expect_error(ctx, "apply_mask", 2, IN(x, m33), NULL, 1, NX_ERR_SHAPE, "expected a 1-d mask");
    expect_error(ctx, "conform_mask", 2, IN(x, m5), NULL, 1, NX_ERR_SHAPE, "[4]");
    expect_error(ctx, "apply_mask", 2, IN(x, none), NULL, 1, NX_ERR_INVALID_ARG,
                 "mask selects nothing");
    expect_error(ctx, "demean", 2, IN(x, m33), NULL, 1, NX_ERR_SHAPE, "broadcasts to x's [3,4]");
    expect_error(ctx, "overlap_add", 2, IN(x, m33), NULL, 1, NX_ERR_SHAPE, "weight has shape");
    expect_error(ctx, "compensated_dot", 2, IN(x, m33), NULL, 1, NX_ERR_SHAPE, "b has shape");
    nx_tensor_free(none);
    nx_tensor_free(m5);
    nx_tensor_free(m33);
    nx_tensor_free(x);
    ctx_done(ctx);
}

static void test_other_bad_input(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t s[2] = {3, 4}, s3[3] = {2, 2, 3};
    nx_tensor *x = make(ctx, NX_DTYPE_F64, 2, s, NULL);
    nx_tensor *xi = make(ctx, NX_DTYPE_I32, 2, s, NULL);
    nx_tensor *x3 = make(ctx, NX_DTYPE_F32, 3, s3, NULL);
    nx_tensor *x0 = make(ctx, NX_DTYPE_F64, 0, NULL, (const double[]){1});
    expect_error(ctx, "zscore_normalize", 1, IN(xi), NULL, 1, NX_ERR_DTYPE,
                 "x is i32; expected f32 or f64");
    expect_error(ctx, "kahan_sum", 1, IN(xi), NULL, 1, NX_ERR_DTYPE, "expected f32 or f64");
    expect_error(ctx, "zscore_normalize", 1, IN(x), KV("eps=-1"), 1, NX_ERR_INVALID_ARG, "eps");
    expect_error(ctx, "lp_normalize", 1, IN(x), KV("p=0"), 1, NX_ERR_INVALID_ARG, "p");
    expect_error(ctx, "robust_zscore_normalize", 1, IN(x), KV("scale=0"), 1, NX_ERR_INVALID_ARG,
                 "scale");
    expect_error(ctx, "overlap_add", 2, IN(x, x), KV("eps=0"), 1, NX_ERR_INVALID_ARG,
                 "expected a finite value > 0");
    expect_error(ctx, "overlap_add", 2, IN(x, xi), NULL, 1, NX_ERR_DTYPE, "equal dtypes");
    expect_error(ctx, "pairwise_sum", 1, IN(x), KV("block_size=0"), 1, NX_ERR_INVALID_ARG,
                 "block_size");
    expect_error(ctx, "gaussian_window", 0, NULL, KV("shape=4,0"), 1, NX_ERR_INVALID_ARG, "shape");
    expect_error(ctx, "gaussian_window", 0, NULL, KV("shape=4", "sigma_scale=0"), 1,
                 NX_ERR_INVALID_ARG, "sigma_scale");
    expect_error(ctx, "gaussian_window", 0, NULL, KV("shape=4", "dtype=int32"), 1, NX_ERR_DTYPE,
                 "expected float32 or float64");
    expect_error(ctx, "nonzero_bounding_box", 1, IN(x0), NULL, 2, NX_ERR_SHAPE, "0-d");
    expect_error(ctx, "nonzero_bounding_box", 1, IN(x), KV("threshold=-1"), 2, NX_ERR_INVALID_ARG,
                 "threshold");
    expect_error(ctx, "unfold_axes", 1, IN(x3), KV("axes=0,2"), 1, NX_ERR_INVALID_ARG,
                 "not consecutive");
    expect_error(ctx, "orient_and_conform", 1, IN(x), KV("axis=1,1", "dim=3"), 1,
                 NX_ERR_INVALID_ARG, "given twice");
    expect_error(ctx, "orient_and_conform", 1, IN(x), KV("axis=1", "dim=3"), 1, NX_ERR_INVALID_ARG,
                 "one per axis of x");
    expect_error(ctx, "orient_and_conform", 1, IN(x), KV("axis=0,1", "dim=1"), 1,
                 NX_ERR_INVALID_ARG, "dim is 1");
    expect_error(ctx, "promote_to_rank", 1, IN(x), KV("rank=9"), 1, NX_ERR_INVALID_ARG, "rank");
    expect_error(ctx, "broadcast_ignoring", 2, IN(x, x3), KV("ignore_axes=0"), 2, NX_ERR_SHAPE,
                 "disagree at axis 1");
    nx_tensor_free(x0);
    nx_tensor_free(x3);
    nx_tensor_free(xi);
    nx_tensor_free(x);
    ctx_done(ctx);
}

/* ---- documented results --------------------------------------------------------------------*/

static void test_bbox_all_zero(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t s[3] = {4, 5, 6};
    nx_tensor *z = make(ctx, NX_DTYPE_F32, 3, s, NULL);
    static const char *const be[] = {"ref", "cpu"};
    for (int b = 0; b < 2; b++) {
        char opt[32];
        snprintf(opt, sizeof opt, "backend=%s", be[b]);
        nx_tensor *y[2];
        assert_int_equal(call(ctx, "nonzero_bounding_box", 1, IN(z), KV(opt), 2, y), NX_OK);
        for (int k = 0; k < 3; k++) {
            assert_true(at(y[0], k) == 0);
            assert_true(at(y[1], k) == 0);
        }
        nx_tensor_free(y[0]);
        nx_tensor_free(y[1]);
    }
    /* one element: the box is that element */
    ((float *)nx_tensor_data(z))[1 * 30 + 2 * 6 + 5] = -3.0f;
    nx_tensor *y[2];
    assert_int_equal(call(ctx, "nonzero_bounding_box", 1, IN(z), KV("backend=cpu"), 2, y), NX_OK);
    const double lo[3] = {1, 2, 5};
    for (int k = 0; k < 3; k++) {
        assert_true(at(y[0], k) == lo[k]);
        assert_true(at(y[1], k) == lo[k] + 1);
    }
    nx_tensor_free(y[0]);
    nx_tensor_free(y[1]);
    nx_tensor_free(z);
    ctx_done(ctx);
}

/* A full mask is no mask; an empty mask's percentiles are 0, so y = x / eps. */
static void test_percentile_masks(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    enum { N = 37 };
    double v[N], ones[N];
    for (int i = 0; i < N; i++) {
        v[i] = sin(1.7 * i) * 10 + 0.01 * i;
        ones[i] = 1;
    }
    int64_t n = N;
    nx_tensor *x = make(ctx, NX_DTYPE_F64, 1, &n, v);
    nx_tensor *full = make(ctx, NX_DTYPE_BOOL, 1, &n, ones);
    nx_tensor *empty = make(ctx, NX_DTYPE_BOOL, 1, &n, NULL);
    nx_tensor *a = run1(ctx, "percentile_rescale", 1, IN(x), KV("lo=3", "hi=80", "clip=false"));
    nx_tensor *b =
        run1(ctx, "percentile_rescale", 2, IN(x, full), KV("lo=3", "hi=80", "clip=false"));
    nx_tensor *c = run1(ctx, "percentile_rescale", 2, IN(x, empty), KV("clip=false", "eps=0.5"));
    for (int i = 0; i < N; i++) {
        assert_true(nx_test_close(at(b, i), at(a, i), 1e-14, 1e-14));
        assert_true(nx_test_close(at(c, i), v[i] / 0.5, 1e-15, 0));
    }
    nx_tensor_free(a);
    nx_tensor_free(b);
    nx_tensor_free(c);
    nx_tensor_free(empty);
    nx_tensor_free(full);
    nx_tensor_free(x);
    ctx_done(ctx);
}

/* ---- compensated sums: exact where a plain sum loses every small term ----------------------*/

/* x = [B, 1 (n times), -B] with B = 2^(p+1) (p: the mantissa's bits): B + 1 rounds back to B, so
 * a plain left-to-right sum is 0; the exact sum is n. */
static void check_lost_terms(nx_ctx *ctx, nx_dtype dt, const char *backend)
{
    enum { N = 1000 };
    double big = dt == NX_DTYPE_F64 ? 9007199254740992.0 : 16777216.0; /* 2^53, 2^24 */
    static double v[N + 2], a[N + 2], b[N + 2];
    v[0] = big;
    v[N + 1] = -big;
    a[0] = big, b[0] = 1;
    a[N + 1] = big, b[N + 1] = -1;
    for (int i = 1; i <= N; i++) {
        v[i] = 1;
        a[i] = 0.5;
        b[i] = 2;
    }
    int64_t n = N + 2;
    nx_tensor *x = make(ctx, dt, 1, &n, v), *ta = make(ctx, dt, 1, &n, a);
    nx_tensor *tb = make(ctx, dt, 1, &n, b);
    char opt[32];
    snprintf(opt, sizeof opt, "backend=%s", backend);
    static const char *const sums[] = {"kahan_sum", "neumaier_sum"};
    for (int k = 0; k < 2; k++) {
        nx_tensor *y = run1(ctx, sums[k], 1, IN(x), KV(opt));
        if (at(y, 0) != N)
            fail_msg("%s %s %s: %g, expected %d exactly", sums[k], nx_dtype_name(dt), backend,
                     at(y, 0), N);
        nx_tensor_free(y);
    }
    nx_tensor *y = run1(ctx, "compensated_dot", 2, IN(ta, tb), KV(opt));
    if (at(y, 0) != N)
        fail_msg("compensated_dot %s %s: %g, expected %d exactly", nx_dtype_name(dt), backend,
                 at(y, 0), N);
    nx_tensor_free(y);
    nx_tensor_free(tb);
    nx_tensor_free(ta);
    nx_tensor_free(x);
}

static void test_compensated_exact(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    check_lost_terms(ctx, NX_DTYPE_F64, "cpu");
    check_lost_terms(ctx, NX_DTYPE_F32, "cpu");
    check_lost_terms(ctx, NX_DTYPE_F64, "ref");
    check_lost_terms(ctx, NX_DTYPE_F32, "ref");
    ctx_done(ctx);
}

/* Neumaier keeps what Kahan cannot: [1, 1e100, 1, -1e100] sums to 2. */
static void test_neumaier_big_term(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t n = 4;
    nx_tensor *x = make(ctx, NX_DTYPE_F64, 1, &n, (const double[]){1, 1e100, 1, -1e100});
    nx_tensor *y = run1(ctx, "neumaier_sum", 1, IN(x), KV("backend=cpu"));
    assert_true(at(y, 0) == 2);
    nx_tensor_free(y);
    nx_tensor_free(x);
    ctx_done(ctx);
}

/* The sums' gradient is the cotangent broadcast; Dot2's is dy b and dy a (closed forms). */
static void test_sum_gradients(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t s[2] = {3, 5}, r = 3;
    double xv[15], bv[15];
    for (int i = 0; i < 15; i++) {
        xv[i] = cos(0.9 * i);
        bv[i] = sin(1.3 * i) + 2;
    }
    nx_tensor *x = make(ctx, NX_DTYPE_F64, 2, s, xv), *b = make(ctx, NX_DTYPE_F64, 2, s, bv);
    nx_tensor *dy = make(ctx, NX_DTYPE_F64, 1, &r, (const double[]){0.5, -2, 3});
    const char *keys[2] = {"axis", "backend"}, *vals[2] = {"1", "cpu"};
    static const char *const sums[] = {"kahan_sum", "neumaier_sum", "pairwise_sum"};
    for (int k = 0; k < 3; k++) {
        nx_tensor *dx[1] = {NULL};
        assert_int_equal(nx_op_vjp(ctx, sums[k], 1, IN(x), 2, keys, vals, 1, IN(dy), dx), NX_OK);
        for (int i = 0; i < 15; i++)
            assert_true(at(dx[0], i) == at(dy, i / 5));
        nx_tensor_free(dx[0]);
    }
    nx_tensor *dx[2] = {NULL, NULL};
    assert_int_equal(nx_op_vjp(ctx, "compensated_dot", 2, IN(x, b), 2, keys, vals, 1, IN(dy), dx),
                     NX_OK);
    for (int i = 0; i < 15; i++) {
        assert_true(at(dx[0], i) == at(dy, i / 5) * bv[i]);
        assert_true(at(dx[1], i) == at(dy, i / 5) * xv[i]);
    }
    nx_tensor_free(dx[0]);
    nx_tensor_free(dx[1]);
    nx_tensor_free(dy);
    nx_tensor_free(b);
    nx_tensor_free(x);
    ctx_done(ctx);
}

/* ---- identities ----------------------------------------------------------------------------*/

/* pads slice the padded array back to x; the vjp of a constant pad (its i64 pads output carries
 * no gradient) is that slice of the cotangent. */
static void test_pad_roundtrip(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t s[3] = {2, 5, 7};
    double v[70];
    for (int i = 0; i < 70; i++)
        v[i] = i * 0.25 - 3;
    nx_tensor *x = make(ctx, NX_DTYPE_F64, 3, s, v);
    nx_tensor *y[2];
    assert_int_equal(call(ctx, "pad_to_multiple", 1, IN(x),
                          KV("multiple=4,8", "spatial_rank=2", "mode=wrap"), 2, y),
                     NX_OK);
    const int64_t *ys = nx_tensor_shape(y[0]);
    assert_int_equal(ys[0], 2);
    assert_int_equal(ys[1], 8);
    assert_int_equal(ys[2], 8);
    assert_int_equal(nx_tensor_dtype(y[1]), NX_DTYPE_I64);
    int64_t lo1 = (int64_t)at(y[1], 0), lo2 = (int64_t)at(y[1], 2);
    assert_int_equal(lo1, 1); /* total 3: 1 before, 2 after */
    assert_int_equal((int64_t)at(y[1], 1), 2);
    assert_int_equal(lo2, 0); /* total 1: 0 before, 1 after */
    assert_int_equal((int64_t)at(y[1], 3), 1);
    for (int a = 0; a < 2; a++)
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 7; j++)
                assert_true(at(y[0], (a * 8 + i + lo1) * 8 + j + lo2) == v[(a * 5 + i) * 7 + j]);
    /* the vjp: a constant pad's gradient is the cotangent's interior */
    double dv[128];
    for (int i = 0; i < 128; i++)
        dv[i] = i;
    nx_tensor *dy = make(ctx, NX_DTYPE_F64, 3, ys, dv);
    int64_t two[2] = {2, 2};
    nx_tensor *dp = make(ctx, NX_DTYPE_I64, 2, two, NULL);
    const char *keys[2] = {"multiple", "spatial_rank"}, *vals[2] = {"4,8", "2"};
    nx_tensor *dx[1] = {NULL};
    assert_int_equal(nx_op_vjp(ctx, "pad_to_multiple", 1, IN(x), 2, keys, vals, 2, IN(dy, dp), dx),
                     NX_OK);
    for (int a = 0; a < 2; a++)
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 7; j++)
                assert_true(at(dx[0], (a * 5 + i) * 7 + j) == dv[(a * 8 + i + lo1) * 8 + j + lo2]);
    /* crop_to_multiple of the padded array is the padded array */
    nx_tensor *c = run1(ctx, "crop_to_multiple", 1, IN(y[0]), KV("multiple=4,8", "spatial_rank=2"));
    for (int64_t i = 0; i < nx_tensor_numel(c); i++)
        assert_true(at(c, i) == at(y[0], i));
    nx_tensor_free(c);
    nx_tensor_free(dx[0]);
    nx_tensor_free(dp);
    nx_tensor_free(dy);
    nx_tensor_free(y[0]);
    nx_tensor_free(y[1]);
    nx_tensor_free(x);
    ctx_done(ctx);
}

/* The window peaks at exactly 1 (odd extents: the centre; even: the two middle samples) and is
 * symmetric under reversal of each axis. */
static void test_window_peak(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    nx_tensor *w = NULL;
    assert_int_equal(call(ctx, "gaussian_window", 0, NULL, KV("shape=5,6", "dtype=float64"), 1, &w),
                     NX_OK);
    double peak = 0;
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 6; j++) {
            double v = at(w, i * 6 + j);
            peak = fmax(peak, v);
            assert_true(nx_test_close(v, at(w, (4 - i) * 6 + (5 - j)), 1e-15, 0));
        }
    assert_true(peak == 1.0);
    assert_true(at(w, 2 * 6 + 2) == 1.0 && at(w, 2 * 6 + 3) == 1.0);
    nx_tensor_free(w);
    ctx_done(ctx);
}

/* fold_axis then unfold_axes is the identity; zscore of an affine image is zscore of the image. */
static void test_fold_unfold_and_affine(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t s[2] = {4, 6};
    double v[24], u[24];
    for (int i = 0; i < 24; i++) {
        v[i] = sin(0.7 * i) + 0.1 * i;
        u[i] = 3.5 * v[i] - 20;
    }
    nx_tensor *x = make(ctx, NX_DTYPE_F64, 2, s, v), *xa = make(ctx, NX_DTYPE_F64, 2, s, u);
    nx_tensor *f = run1(ctx, "fold_axis", 1, IN(x), KV("axis=1", "n=3"));
    assert_int_equal(nx_tensor_ndim(f), 3);
    nx_tensor *g = run1(ctx, "unfold_axes", 1, IN(f), KV("axes=1,2"));
    assert_int_equal(nx_tensor_ndim(g), 2);
    for (int i = 0; i < 24; i++)
        assert_true(at(g, i) == v[i]);
    nx_tensor *z = run1(ctx, "zscore_normalize", 1, IN(x), KV("eps=0"));
    nx_tensor *za = run1(ctx, "zscore_normalize", 1, IN(xa), KV("eps=0"));
    nx_tensor *r = run1(ctx, "robust_zscore_normalize", 1, IN(x), KV("eps=0"));
    nx_tensor *ra = run1(ctx, "robust_zscore_normalize", 1, IN(xa), KV("eps=0"));
    for (int i = 0; i < 24; i++) {
        assert_true(nx_test_close(at(za, i), at(z, i), 1e-13, 1e-13));
        assert_true(nx_test_close(at(ra, i), at(r, i), 1e-13, 1e-13));
    }
    nx_tensor_free(ra);
    nx_tensor_free(r);
    nx_tensor_free(za);
    nx_tensor_free(z);
    nx_tensor_free(g);
    nx_tensor_free(f);
    nx_tensor_free(xa);
    nx_tensor_free(x);
    ctx_done(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_percentiles_refused),    cmocka_unit_test(test_axes_refused),
        cmocka_unit_test(test_multiples_refused),      cmocka_unit_test(test_masks_refused),
        cmocka_unit_test(test_other_bad_input),        cmocka_unit_test(test_bbox_all_zero),
        cmocka_unit_test(test_percentile_masks),       cmocka_unit_test(test_compensated_exact),
        cmocka_unit_test(test_neumaier_big_term),      cmocka_unit_test(test_sum_gradients),
        cmocka_unit_test(test_pad_roundtrip),          cmocka_unit_test(test_window_peak),
        cmocka_unit_test(test_fold_unfold_and_affine),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
