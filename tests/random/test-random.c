/* The random family (docs/random.md) beyond the golden replay (tests/fidelity): every bad input
 * named in the docs is a clear status with a message; normal's distance from jax 0.4.30 in ulp on
 * the large golden case (the figure docs/random.md states); the counter-based identities (a batch
 * of keys equals the keys one by one, the partitionable layout's prefix property, fold_in's
 * broadcasting); and distribution checks against closed forms (moments within 6 standard
 * errors, a permutation is a permutation, draws without replacement are distinct). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nitrix-op.h"
#include "nitrix.h"
#include "testutil.h"

#define GOLDEN NX_SOURCE_ROOT "/golden/random/"

static nx_tensor *key_of(nx_ctx *ctx, uint32_t k0, uint32_t k1)
{
    int64_t two = 2;
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_U32, 1, &two, &t), NX_OK);
    uint32_t *d = nx_tensor_data(t);
    d[0] = k0;
    d[1] = k1;
    return t;
}

/* Calls op with "k=v" options; returns the status, *out the result (or NULL). */
static nx_status call(nx_ctx *ctx, const char *op, int nin, const nx_tensor *const *in,
                      const char *backend, nx_tensor **out, int nopt, ...)
{
    const char *keys[16], *vals[16];
    char buf[16][128];
    va_list ap;
    va_start(ap, nopt);
    int n = 0;
    for (int i = 0; i < nopt; i++) {
        snprintf(buf[i], sizeof buf[i], "%s", va_arg(ap, const char *));
        char *eq = strchr(buf[i], '=');
        *eq = '\0';
        keys[n] = buf[i];
        vals[n++] = eq + 1;
    }
    va_end(ap);
    if (backend) {
        keys[n] = "backend";
        vals[n++] = backend;
    }
    *out = NULL;
    return nx_op_call(ctx, op, nin, in, n, keys, vals, 1, out);
}

static void expect_error(nx_ctx *ctx, nx_status want, const char *op, int nin,
                         const nx_tensor *const *in, int nopt, const char *o1, const char *o2,
                         const char *o3)
{
    nx_tensor *y = NULL;
    nx_status st = nopt == 1   ? call(ctx, op, nin, in, "ref", &y, 1, o1)
                   : nopt == 2 ? call(ctx, op, nin, in, "ref", &y, 2, o1, o2)
                   : nopt == 3 ? call(ctx, op, nin, in, "ref", &y, 3, o1, o2, o3)
                               : call(ctx, op, nin, in, "ref", &y, 0);
    if (st != want)
        fail_msg("%s %s %s %s: %s, expected %s (%s)", op, o1 ? o1 : "", o2 ? o2 : "",
                 o3 ? o3 : "", nx_status_str(st), nx_status_str(want), nx_ctx_last_error(ctx));
    assert_null(y);
    assert_true(strlen(nx_ctx_last_error(ctx)) > 20);
}

static void test_errors(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_tensor *k = key_of(ctx, 0, 42), *bad = NULL, *three = NULL, *batch = NULL, *fdata = NULL;
    int64_t two = 2, n3 = 3, s22[2] = {2, 2};
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, 1, &two, &bad), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_U32, 1, &n3, &three), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_U32, 2, s22, &batch), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 0, NULL, &fdata), NX_OK);
    const nx_tensor *in1[] = {k}, *inbad[] = {bad}, *in3[] = {three}, *inb[] = {batch};
    /* seeds: not finite, not an integer, outside int64 */
    expect_error(ctx, NX_ERR_INVALID_ARG, "key", 0, NULL, 1, "seed=nan", NULL, NULL);
    expect_error(ctx, NX_ERR_INVALID_ARG, "key", 0, NULL, 1, "seed=inf", NULL, NULL);
    expect_error(ctx, NX_ERR_INVALID_ARG, "key", 0, NULL, 1, "seed=1.5", NULL, NULL);
    expect_error(ctx, NX_ERR_INVALID_ARG, "key", 0, NULL, 1, "seed=9223372036854775808", NULL,
                 NULL);
    expect_error(ctx, NX_ERR_INVALID_ARG, "key", 0, NULL, 0, NULL, NULL, NULL); /* required */
    /* keys: not u32, not [..., 2], a batch where one key is taken */
    expect_error(ctx, NX_ERR_SHAPE, "random_bits", 1, inbad, 1, "shape=3", NULL, NULL);
    expect_error(ctx, NX_ERR_SHAPE, "normal", 1, in3, 1, "shape=3", NULL, NULL);
    expect_error(ctx, NX_ERR_SHAPE, "split", 1, inbad, 0, NULL, NULL, NULL);
    expect_error(ctx, NX_ERR_SHAPE, "permutation", 1, inb, 1, "n=5", NULL, NULL);
    expect_error(ctx, NX_ERR_SHAPE, "randint", 1, inb, 2, "minval=0", "maxval=3", NULL);
    /* counts and shapes */
    expect_error(ctx, NX_ERR_INVALID_ARG, "split", 1, in1, 1, "num=0", NULL, NULL);
    expect_error(ctx, NX_ERR_INVALID_ARG, "split", 1, in1, 1, "num=-2", NULL, NULL);
    expect_error(ctx, NX_ERR_INVALID_ARG, "uniform", 1, in1, 1, "shape=4,0", NULL, NULL);
    expect_error(ctx, NX_ERR_INVALID_ARG, "random_bits", 1, in1, 1, "shape=5000000000", NULL,
                 NULL);
    expect_error(ctx, NX_ERR_INVALID_ARG, "random_bits", 1, in1, 2, "shape=3", "bit_width=16",
                 NULL);
    /* bounds */
    expect_error(ctx, NX_ERR_INVALID_ARG, "uniform", 1, in1, 2, "minval=1", "maxval=1", NULL);
    expect_error(ctx, NX_ERR_INVALID_ARG, "uniform", 1, in1, 2, "minval=2", "maxval=1", NULL);
    expect_error(ctx, NX_ERR_INVALID_ARG, "uniform", 1, in1, 1, "minval=nan", NULL, NULL);
    expect_error(ctx, NX_ERR_INVALID_ARG, "uniform", 1, in1, 1, "maxval=inf", NULL, NULL);
    expect_error(ctx, NX_ERR_DTYPE, "uniform", 1, in1, 1, "dtype=int32", NULL, NULL);
    expect_error(ctx, NX_ERR_INVALID_ARG, "randint", 1, in1, 2, "minval=5", "maxval=5", NULL);
    expect_error(ctx, NX_ERR_INVALID_ARG, "randint", 1, in1, 3, "minval=0", "maxval=300",
                 "dtype=int8");
    expect_error(ctx, NX_ERR_DTYPE, "randint", 1, in1, 3, "minval=0", "maxval=3", "dtype=f32");
    expect_error(ctx, NX_ERR_INVALID_ARG, "truncated_normal", 1, in1, 2, "lower=1", "upper=-1",
                 NULL);
    expect_error(ctx, NX_ERR_INVALID_ARG, "truncated_normal", 1, in1, 2, "lower=nan", "upper=1",
                 NULL);
    /* probabilities */
    expect_error(ctx, NX_ERR_INVALID_ARG, "bernoulli", 1, in1, 1, "p=1.5", NULL, NULL);
    expect_error(ctx, NX_ERR_INVALID_ARG, "bernoulli", 1, in1, 1, "p=-0.1", NULL, NULL);
    expect_error(ctx, NX_ERR_INVALID_ARG, "bernoulli", 1, in1, 1, "p=nan", NULL, NULL);
    /* choice: more draws than entries without replacement; a and n together or neither */
    expect_error(ctx, NX_ERR_INVALID_ARG, "choice", 1, in1, 3, "n=10", "shape=11",
                 "replace=false");
    expect_error(ctx, NX_ERR_INVALID_ARG, "choice", 1, in1, 1, "shape=3", NULL, NULL);
    expect_error(ctx, NX_ERR_INVALID_ARG, "permutation", 1, in1, 0, NULL, NULL, NULL);
    /* p outside [0, 1], and of the wrong length */
    char path[256], path2[256];
    snprintf(path, sizeof path, "%s/p-bad.npy", getenv("NITRIX_CACHE_DIR") ? getenv(
                 "NITRIX_CACHE_DIR") : ".");
    snprintf(path2, sizeof path2, "%s/p-short.npy", getenv("NITRIX_CACHE_DIR") ? getenv(
                 "NITRIX_CACHE_DIR") : ".");
    nx_tensor *p = NULL;
    int64_t four = 4;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 1, &four, &p), NX_OK);
    double *pv = nx_tensor_data(p);
    pv[0] = 0.2, pv[1] = 1.5, pv[2] = 0.1, pv[3] = 0.2;
    assert_int_equal(nx_npy_write(ctx, path, p), NX_OK);
    assert_int_equal(nx_npy_write(ctx, path2, three), NX_OK);
    char po[300], po2[300];
    snprintf(po, sizeof po, "p=%s", path);
    snprintf(po2, sizeof po2, "p=%s", path2);
    expect_error(ctx, NX_ERR_INVALID_ARG, "choice", 1, in1, 3, "n=4", "shape=2", po);
    expect_error(ctx, NX_ERR_SHAPE, "choice", 1, in1, 3, "n=4", "shape=2", po2);
    /* fold_in: float data */
    const nx_tensor *inf[] = {k, fdata};
    expect_error(ctx, NX_ERR_DTYPE, "fold_in", 2, inf, 0, NULL, NULL, NULL);
    remove(path);
    remove(path2);
    nx_tensor *all[] = {k, bad, three, batch, fdata, p};
    for (int i = 0; i < 6; i++)
        nx_tensor_free(all[i]);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* ulp distance of two floats of one sign convention (ordered integer images) */
static int64_t ulps(double a, double b, bool f64)
{
    int64_t x, y;
    if (f64) {
        memcpy(&x, &a, 8);
        memcpy(&y, &b, 8);
    } else {
        float fa = (float)a, fb = (float)b;
        int32_t i, j;
        memcpy(&i, &fa, 4);
        memcpy(&j, &fb, 4);
        x = i, y = j;
    }
    if (x < 0)
        x = INT64_MIN - x;
    if (y < 0)
        y = INT64_MIN - y;
    return x > y ? x - y : y - x;
}

static void ulp_case(nx_ctx *ctx, const char *name, const char *dtype, int64_t max_ulp,
                     double min_exact)
{
    char kp[512], op[512], shape[32];
    snprintf(kp, sizeof kp, GOLDEN "%s/key.npy", name);
    snprintf(op, sizeof op, GOLDEN "%s/out.npy", name);
    nx_tensor *key = NULL, *want = NULL;
    assert_int_equal(nx_npy_read(ctx, kp, &key), NX_OK);
    assert_int_equal(nx_npy_read(ctx, op, &want), NX_OK);
    int64_t n = nx_tensor_numel(want);
    bool f64 = nx_tensor_dtype(want) == NX_DTYPE_F64;
    snprintf(shape, sizeof shape, "shape=%lld", (long long)n);
    char dt[32];
    snprintf(dt, sizeof dt, "dtype=%s", dtype);
    const char *backends[] = {"ref", "cpu"};
    for (int b = 0; b < 2; b++) {
        nx_tensor *y = NULL;
        assert_int_equal(call(ctx, "normal", 1, (const nx_tensor *const[]){key}, backends[b], &y,
                              2, shape, dt),
                         NX_OK);
        int64_t worst = 0, exact = 0;
        for (int64_t i = 0; i < n; i++) {
            double g = f64 ? ((double *)nx_tensor_data(y))[i] : ((float *)nx_tensor_data(y))[i];
            double w = f64 ? ((double *)nx_tensor_data(want))[i]
                           : ((float *)nx_tensor_data(want))[i];
            int64_t u = ulps(g, w, f64);
            worst = u > worst ? u : worst;
            exact += u == 0;
        }
        printf("normal %s on %s vs jax 0.4.30: max %lld ulp, %.4f of %lld draws bit-identical\n",
               dtype, backends[b], (long long)worst, (double)exact / (double)n, (long long)n);
        assert_true(worst <= max_ulp);
        assert_true((double)exact / (double)n >= min_exact);
        nx_tensor_free(y);
    }
    nx_tensor_free(key);
    nx_tensor_free(want);
}

/* The figures docs/random.md states (measured on the golden cases). */
static void test_normal_ulp(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    ulp_case(ctx, "rdraw_normal_f32_32768", "float32", 3, 0.99);
    ulp_case(ctx, "rdraw_normal_f64_4097", "float64", 32, 0.88);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static uint32_t u32_at(const nx_tensor *t, int64_t i)
{
    return ((const uint32_t *)nx_tensor_data(t))[i];
}

static void test_counter(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    /* a batch of 3 keys equals the 3 keys one by one, in both layouts and for split */
    int64_t s32[2] = {3, 2};
    nx_tensor *keys = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_U32, 2, s32, &keys), NX_OK);
    uint32_t words[6] = {1, 2, 0xdeadbeef, 7, 0xffffffff, 0};
    memcpy(nx_tensor_data(keys), words, sizeof words);
    for (int part = 0; part < 2; part++) {
        const char *po = part ? "partitionable=true" : "partitionable=false";
        nx_tensor *all = NULL, *sp = NULL;
        assert_int_equal(call(ctx, "random_bits", 1, (const nx_tensor *const[]){keys}, "cpu",
                              &all, 2, "shape=5", po), NX_OK);
        assert_int_equal(call(ctx, "split", 1, (const nx_tensor *const[]){keys}, "cpu", &sp, 2,
                              "num=3", po), NX_OK);
        for (int b = 0; b < 3; b++) {
            nx_tensor *k = key_of(ctx, words[2 * b], words[2 * b + 1]), *one = NULL, *s1 = NULL;
            assert_int_equal(call(ctx, "random_bits", 1, (const nx_tensor *const[]){k}, "ref",
                                  &one, 2, "shape=5", po), NX_OK);
            assert_int_equal(call(ctx, "split", 1, (const nx_tensor *const[]){k}, "ref", &s1, 2,
                                  "num=3", po), NX_OK);
            for (int i = 0; i < 5; i++)
                assert_int_equal(u32_at(all, 5 * b + i), u32_at(one, i));
            for (int i = 0; i < 6; i++)
                assert_int_equal(u32_at(sp, 6 * b + i), u32_at(s1, i));
            nx_tensor_free(k);
            nx_tensor_free(one);
            nx_tensor_free(s1);
        }
        nx_tensor_free(all);
        nx_tensor_free(sp);
    }
    /* partitionable: element i is a function of (key, i) alone, so a shorter draw is a prefix;
     * the original layout pairs word i with word i + ceil(n/2), so it is not */
    nx_tensor *k = key_of(ctx, 0, 99), *a = NULL, *b = NULL;
    assert_int_equal(call(ctx, "random_bits", 1, (const nx_tensor *const[]){k}, "cpu", &a, 2,
                          "shape=1000", "partitionable=true"), NX_OK);
    assert_int_equal(call(ctx, "random_bits", 1, (const nx_tensor *const[]){k}, "cpu", &b, 2,
                          "shape=10,10", "partitionable=true"), NX_OK);
    for (int i = 0; i < 100; i++)
        assert_int_equal(u32_at(a, i), u32_at(b, i));
    nx_tensor_free(a);
    nx_tensor_free(b);
    /* fold_in broadcasts: keys [3] x data [2, 1] -> [2, 3, 2], each the single fold */
    int64_t s21[2] = {2, 1};
    nx_tensor *data = NULL, *f = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_I32, 2, s21, &data), NX_OK);
    ((int32_t *)nx_tensor_data(data))[0] = -1;
    ((int32_t *)nx_tensor_data(data))[1] = 77;
    assert_int_equal(call(ctx, "fold_in", 2, (const nx_tensor *const[]){keys, data}, "cpu", &f,
                          0), NX_OK);
    assert_int_equal(nx_tensor_ndim(f), 3);
    for (int d = 0; d < 2; d++)
        for (int kk = 0; kk < 3; kk++) {
            nx_tensor *k1 = key_of(ctx, words[2 * kk], words[2 * kk + 1]), *d1 = NULL, *o = NULL;
            assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_I32, 0, NULL, &d1), NX_OK);
            *(int32_t *)nx_tensor_data(d1) = d ? 77 : -1;
            assert_int_equal(call(ctx, "fold_in", 2, (const nx_tensor *const[]){k1, d1}, "ref",
                                  &o, 0), NX_OK);
            assert_int_equal(u32_at(f, 6 * d + 2 * kk), u32_at(o, 0));
            assert_int_equal(u32_at(f, 6 * d + 2 * kk + 1), u32_at(o, 1));
            nx_tensor_free(k1);
            nx_tensor_free(d1);
            nx_tensor_free(o);
        }
    nx_tensor_free(data);
    nx_tensor_free(f);
    nx_tensor_free(k);
    nx_tensor_free(keys);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void moments(const nx_tensor *y, double *mean, double *var)
{
    int64_t n = nx_tensor_numel(y);
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = nx_tensor_dtype(y) == NX_DTYPE_F32 ? ((const float *)nx_tensor_data(y))[i]
                                                      : ((const double *)nx_tensor_data(y))[i];
        s += v;
        s2 += v * v;
    }
    *mean = s / (double)n;
    *var = s2 / (double)n - *mean * *mean;
}

static void test_distributions(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_tensor *k = key_of(ctx, 0, 2026), *y = NULL;
    const nx_tensor *in[] = {k};
    double n = 65536, m, v;
    /* normal: mean 0 (se 1/sqrt n), variance 1 (se sqrt(2/n)) */
    assert_int_equal(call(ctx, "normal", 1, in, "cpu", &y, 1, "shape=65536"), NX_OK);
    moments(y, &m, &v);
    assert_true(fabs(m) < 6 / sqrt(n) && fabs(v - 1) < 6 * sqrt(2 / n));
    nx_tensor_free(y);
    /* uniform on [-2, 6): mean 2, variance 64/12 (se of the variance sqrt((m4 - v^2)/n)) */
    assert_int_equal(call(ctx, "uniform", 1, in, "cpu", &y, 4, "shape=65536", "dtype=float64",
                          "minval=-2", "maxval=6"), NX_OK);
    moments(y, &m, &v);
    assert_true(fabs(m - 2) < 6 * sqrt(64.0 / 12 / n));
    assert_true(fabs(v - 64.0 / 12) < 6 * sqrt((4096.0 / 80 - (64.0 / 12) * (64.0 / 12)) / n));
    for (int64_t i = 0; i < 65536; i++) {
        double e = ((double *)nx_tensor_data(y))[i];
        assert_true(e >= -2 && e < 6);
    }
    nx_tensor_free(y);
    /* truncated normal stays inside (lower, upper) */
    assert_int_equal(call(ctx, "truncated_normal", 1, in, "cpu", &y, 3, "lower=0.5",
                          "upper=0.75", "shape=4096"), NX_OK);
    for (int64_t i = 0; i < 4096; i++) {
        float e = ((float *)nx_tensor_data(y))[i];
        assert_true(e > 0.5f && e < 0.75f);
    }
    nx_tensor_free(y);
    /* bernoulli frequency: p = 0.25, se sqrt(p(1-p)/n) */
    assert_int_equal(call(ctx, "bernoulli", 1, in, "cpu", &y, 2, "p=0.25", "shape=65536"), NX_OK);
    int64_t ones = 0;
    for (int64_t i = 0; i < 65536; i++)
        ones += ((uint8_t *)nx_tensor_data(y))[i] != 0;
    assert_true(fabs((double)ones / n - 0.25) < 6 * sqrt(0.25 * 0.75 / n));
    nx_tensor_free(y);
    /* randint covers [minval, maxval) and nothing else */
    assert_int_equal(call(ctx, "randint", 1, in, "cpu", &y, 3, "minval=-3", "maxval=4",
                          "shape=4096"), NX_OK);
    int seen[7] = {0};
    for (int64_t i = 0; i < 4096; i++) {
        int32_t e = ((int32_t *)nx_tensor_data(y))[i];
        assert_true(e >= -3 && e < 4);
        seen[e + 3] = 1;
    }
    for (int i = 0; i < 7; i++)
        assert_true(seen[i]);
    nx_tensor_free(y);
    /* a permutation of 3000 (two rounds of sorting) holds each index once */
    assert_int_equal(call(ctx, "permutation", 1, in, "cpu", &y, 1, "n=3000"), NX_OK);
    char *hit = calloc(3000, 1);
    for (int64_t i = 0; i < 3000; i++) {
        int32_t e = ((int32_t *)nx_tensor_data(y))[i];
        assert_true(e >= 0 && e < 3000 && !hit[e]);
        hit[e] = 1;
    }
    free(hit);
    nx_tensor_free(y);
    /* choice without replacement: distinct */
    assert_int_equal(call(ctx, "choice", 1, in, "cpu", &y, 3, "n=50", "shape=50",
                          "replace=false"), NX_OK);
    int got[50] = {0};
    for (int64_t i = 0; i < 50; i++) {
        int32_t e = ((int32_t *)nx_tensor_data(y))[i];
        assert_true(e >= 0 && e < 50 && !got[e]);
        got[e] = 1;
    }
    nx_tensor_free(y);
    nx_tensor_free(k);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_normal_ulp),
        cmocka_unit_test(test_counter),
        cmocka_unit_test(test_distributions),
    };
    return cmocka_run_group_tests_name("random", tests, NULL, NULL);
}
