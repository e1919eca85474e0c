/* The joint-histogram family (joint_histogram, mutual_information, mi_grad, nmi_grad) and the
 * intensity ops (winsorize, match_histogram), for what the table-generated tests cannot see: the
 * closed-form gradients against autodiff of the metric, the two histogram drivers against each
 * other on a larger input, reproducible mode's driver, documented results (constant images) and
 * every error path. The golden replay (golden/metrics/hist_*) checks the values against NumPy. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nitrix-op.h"
#include "testutil.h"

static uint64_t seed = 0x2545f4914f6cdd1du;

static double gauss(void) /* sum of 4 uniforms, centred: a rough normal */
{
    double s = 0;
    for (int k = 0; k < 4; k++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        s += (double)(seed >> 11) / 9007199254740992.0;
    }
    return (s - 2.0) * 1.7;
}

static nx_tensor *tensor(nx_ctx *ctx, nx_dtype dt, int nd, const int64_t *shape)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, dt, nd, shape, &t), NX_OK);
    return t;
}

static double at(const nx_tensor *t, int64_t i)
{
    return nx_tensor_dtype(t) == NX_DTYPE_F64 ? ((const double *)nx_tensor_data(t))[i]
                                              : ((const float *)nx_tensor_data(t))[i];
}

static void set(nx_tensor *t, int64_t i, double v)
{
    if (nx_tensor_dtype(t) == NX_DTYPE_F64)
        ((double *)nx_tensor_data(t))[i] = v;
    else
        ((float *)nx_tensor_data(t))[i] = (float)v;
}

/* A correlated pair: fixed = 0.6 moving + 0.3 moving^2 + noise. */
static void make_pair(nx_ctx *ctx, nx_dtype dt, int nd, const int64_t *shape, nx_tensor **m,
                      nx_tensor **f)
{
    *m = tensor(ctx, dt, nd, shape);
    *f = tensor(ctx, dt, nd, shape);
    for (int64_t i = 0; i < nx_tensor_numel(*m); i++) {
        double a = gauss();
        set(*m, i, a);
        set(*f, i, 0.6 * a + 0.3 * a * a + 0.8 * gauss());
    }
}

static nx_tensor *call(nx_ctx *ctx, const char *op, int nin, const nx_tensor *const *in, int nopt,
                       const char *const *keys, const char *const *vals)
{
    nx_tensor *y = NULL;
    nx_status st = nx_op_call(ctx, op, nin, in, nopt, keys, vals, 1, &y);
    if (st != NX_OK)
        printf("%s: %s\n", op, nx_ctx_last_error(ctx));
    assert_int_equal(st, NX_OK);
    return y;
}

/* d metric / d moving by nx_op_vjp with cotangent 1. */
static nx_tensor *autodiff(nx_ctx *ctx, const char *op, const nx_tensor *m, const nx_tensor *f,
                           int nopt, const char *const *keys, const char *const *vals)
{
    nx_tensor *one = tensor(ctx, nx_tensor_dtype(m), 0, NULL);
    set(one, 0, 1.0);
    nx_tensor *dx[3] = {0};
    nx_status st = nx_op_vjp(ctx, op, 2, (const nx_tensor *const[]){m, f}, nopt, keys, vals, 1,
                             (const nx_tensor *const[]){one}, dx);
    if (st != NX_OK)
        printf("%s vjp: %s\n", op, nx_ctx_last_error(ctx));
    assert_int_equal(st, NX_OK);
    nx_tensor_free(one);
    nx_tensor_free(dx[1]);
    nx_tensor_free(dx[2]);
    return dx[0];
}

/* max_i |a_i - b_i| / max_i |b_i| over the samples not in skip (-1: none). */
static double rel_diff(const nx_tensor *a, const nx_tensor *b, int64_t skip0, int64_t skip1)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < nx_tensor_numel(b); i++) {
        if (i == skip0 || i == skip1)
            continue;
        num = fmax(num, fabs(at(a, i) - at(b, i)));
        den = fmax(den, fabs(at(b, i)));
    }
    return num / den;
}

static int64_t arg_extreme(const nx_tensor *t, int sign)
{
    int64_t k = 0;
    for (int64_t i = 1; i < nx_tensor_numel(t); i++)
        if (sign * (at(t, i) - at(t, k)) > 0)
            k = i;
    return k;
}

/* mi_grad (nmi_grad) against autodiff of mutual_information (normalized), f64: with a pinned
 * moving range holding every sample, at every sample; with the data range, at every sample but
 * the minimum and maximum (whose full derivative also moves the range, which the closed form
 * holds fixed). Both drivers. */
static void closed_form_vs_autodiff(bool normalized, double tol)
{
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t shape[3] = {12, 13, 14};
    nx_tensor *m, *f;
    make_pair(ctx, NX_DTYPE_F64, 3, shape, &m, &f);
    const char *grad_op = normalized ? "nmi_grad" : "mi_grad";
    const char *norm = normalized ? "true" : "false";
    const char *drivers[2] = {"onehot", "scatter"};
    for (int d = 0; d < 2; d++) {
        for (int pinned = 0; pinned < 2; pinned++) {
            const char *keys[4] = {"bins", "driver", "normalized", "range_moving"};
            const char *vals[4] = {"16", drivers[d], norm, "-9,9.5"};
            int n = pinned ? 4 : 3;
            nx_tensor *auto_g = autodiff(ctx, "mutual_information", m, f, n, keys, vals);
            const char *gk[3] = {"bins", "driver", "range_moving"};
            const char *gv[3] = {"16", drivers[d], "-9,9.5"};
            nx_tensor *closed = call(ctx, grad_op, 2, (const nx_tensor *const[]){m, f},
                                     pinned ? 3 : 2, gk, gv);
            int64_t s0 = pinned ? -1 : arg_extreme(m, -1), s1 = pinned ? -1 : arg_extreme(m, 1);
            double r = rel_diff(closed, auto_g, s0, s1);
            printf("%s vs autodiff (%s driver, %s range): max rel %.3g\n", grad_op, drivers[d],
                   pinned ? "pinned" : "data", r);
            assert_true(r < tol);
            /* not vacuous: the gradient is not zero */
            assert_true(fabs(at(auto_g, 7)) > 0);
            nx_tensor_free(auto_g);
            nx_tensor_free(closed);
        }
    }
    nx_tensor_free(m);
    nx_tensor_free(f);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void test_mi_grad_autodiff(void **state)
{
    (void)state;
    closed_form_vs_autodiff(false, 1e-6);
}

static void test_nmi_grad_autodiff(void **state)
{
    (void)state;
    closed_form_vs_autodiff(true, 1e-7);
}

/* The registry's contract on an input larger than the golden cases: scatter against onehot within
 * api-b's tolerance (f32 2e-4, f64 1e-10) for the table and the metric. */
static void test_drivers_contract(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t shape[3] = {40, 40, 40};
    const nx_dtype dts[2] = {NX_DTYPE_F64, NX_DTYPE_F32};
    const double tols[2] = {1e-10, 2e-4};
    for (int k = 0; k < 2; k++) {
        nx_tensor *m, *f;
        make_pair(ctx, dts[k], 3, shape, &m, &f);
        const char *ops[2] = {"joint_histogram", "mutual_information"};
        for (int o = 0; o < 2; o++) {
            const char *keys[1] = {"driver"};
            const char *one[1] = {"onehot"}, *sc[1] = {"scatter"};
            nx_tensor *a = call(ctx, ops[o], 2, (const nx_tensor *const[]){m, f}, 1, keys, one);
            nx_tensor *b = call(ctx, ops[o], 2, (const nx_tensor *const[]){m, f}, 1, keys, sc);
            double worst = 0, total = 0;
            for (int64_t i = 0; i < nx_tensor_numel(a); i++) {
                assert_true(nx_test_close(at(b, i), at(a, i), tols[k], 1e-10));
                worst = fmax(worst, fabs(at(b, i) - at(a, i)));
                total += at(a, i);
            }
            printf("%s %s: scatter - onehot max %.3g\n", ops[o], nx_dtype_name(dts[k]), worst);
            if (o == 0)
                assert_true(fabs(total - 1) < 1e-4); /* a probability table */
            else
                assert_true(at(a, 0) > 0.1); /* correlated images share information */
            nx_tensor_free(a);
            nx_tensor_free(b);
        }
        nx_tensor_free(m);
        nx_tensor_free(f);
    }
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* Reproducible mode resolves auto to the canonical onehot driver, and the op's auto result is
 * then bit for bit the explicit onehot one. */
static void test_reproducible_driver(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    const char *variant = NULL;
    assert_int_equal(nx_ctx_reproducible_push(ctx, true), NX_OK);
    assert_int_equal(nx_driver_resolve(ctx, "metrics.joint_histogram", "auto", &variant), NX_OK);
    assert_string_equal(variant, "onehot");
    int64_t shape[2] = {50, 60};
    nx_tensor *m, *f;
    make_pair(ctx, NX_DTYPE_F32, 2, shape, &m, &f);
    const char *keys[1] = {"driver"}, *one[1] = {"onehot"};
    nx_tensor *a = call(ctx, "joint_histogram", 2, (const nx_tensor *const[]){m, f}, 0, NULL, NULL);
    nx_tensor *b = call(ctx, "joint_histogram", 2, (const nx_tensor *const[]){m, f}, 1, keys, one);
    assert_memory_equal(nx_tensor_data(a), nx_tensor_data(b), 32 * 32 * sizeof(float));
    nx_tensor_free(a);
    nx_tensor_free(b);
    assert_int_equal(nx_ctx_reproducible_pop(ctx), NX_OK);
    assert_int_equal(nx_driver_resolve(ctx, "metrics.joint_histogram", "auto", &variant), NX_OK);
    assert_string_equal(variant, "scatter");
    nx_tensor_free(m);
    nx_tensor_free(f);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* Constant images: all the mass in one cell; MI = 0 and NMI = 0 (documented), zero forces. */
static void test_constant_images(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t shape[1] = {50};
    nx_tensor *m = tensor(ctx, NX_DTYPE_F64, 1, shape), *f = tensor(ctx, NX_DTYPE_F64, 1, shape);
    for (int i = 0; i < 50; i++) {
        set(m, i, 3.0);
        set(f, i, gauss());
    }
    const nx_tensor *const in[2] = {m, f};
    nx_tensor *p = call(ctx, "joint_histogram", 2, in, 0, NULL, NULL);
    double row0 = 0;
    for (int b = 0; b < 32; b++)
        row0 += at(p, b);
    assert_true(fabs(row0 - 1) < 1e-12); /* every sample in moving's first bin */
    const char *keys[1] = {"normalized"}, *t[1] = {"true"}, *fl[1] = {"false"};
    nx_tensor *mi = call(ctx, "mutual_information", 2, in, 1, keys, fl);
    assert_true(fabs(at(mi, 0)) < 1e-15);
    const nx_tensor *const same[2] = {m, m};
    nx_tensor *nmi = call(ctx, "mutual_information", 2, same, 1, keys, t);
    assert_true(at(nmi, 0) == 0.0);
    nx_tensor *g = call(ctx, "nmi_grad", 2, same, 0, NULL, NULL);
    for (int i = 0; i < 50; i++)
        assert_true(at(g, i) == 0.0);
    nx_tensor_free(p);
    nx_tensor_free(mi);
    nx_tensor_free(nmi);
    nx_tensor_free(g);
    nx_tensor_free(m);
    nx_tensor_free(f);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* A call that must fail: its status and a message containing `want`. */
static void refuse(nx_ctx *ctx, const char *op, int nin, const nx_tensor *const *in, int nopt,
                   const char *const *keys, const char *const *vals, const char *want)
{
    nx_tensor *y = NULL;
    nx_status st = nx_op_call(ctx, op, nin, in, nopt, keys, vals, 1, &y);
    const char *msg = nx_ctx_last_error(ctx);
    printf("%s refused: %s\n", op, msg);
    assert_int_not_equal(st, NX_OK);
    assert_null(y);
    assert_non_null(strstr(msg, want));
}

static void test_errors(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t s1[2] = {4, 5}, s2[2] = {5, 4}, s0[1] = {0};
    nx_tensor *a = tensor(ctx, NX_DTYPE_F32, 2, s1), *b = tensor(ctx, NX_DTYPE_F32, 2, s2);
    nx_tensor *c = tensor(ctx, NX_DTYPE_F64, 2, s1), *e = tensor(ctx, NX_DTYPE_F32, 1, s0);
    nx_tensor *ok = tensor(ctx, NX_DTYPE_F32, 2, s1), *mask = tensor(ctx, NX_DTYPE_F32, 2, s2);
    nx_tensor *ints = tensor(ctx, NX_DTYPE_I32, 2, s1);
    for (int i = 0; i < 20; i++) {
        set(a, i, i);
        set(ok, i, 20 - i);
        set(b, i, 0.0);
    }
    const char *hist_ops[4] = {"joint_histogram", "mutual_information", "mi_grad", "nmi_grad"};
    for (int k = 0; k < 4; k++) {
        const char *op = hist_ops[k];
        refuse(ctx, op, 2, (const nx_tensor *const[]){a, b}, 0, NULL, NULL, "different shapes");
        refuse(ctx, op, 2, (const nx_tensor *const[]){a, c}, 0, NULL, NULL, "same float dtype");
        refuse(ctx, op, 2, (const nx_tensor *const[]){ints, ints}, 0, NULL, NULL, "f32 or f64");
        refuse(ctx, op, 2, (const nx_tensor *const[]){e, e}, 0, NULL, NULL, "empty");
        const char *bk[1] = {"bins"}, *b1[1] = {"1"}, *b0[1] = {"0"};
        refuse(ctx, op, 2, (const nx_tensor *const[]){a, ok}, 1, bk, b1, "bins");
        refuse(ctx, op, 2, (const nx_tensor *const[]){a, ok}, 1, bk, b0, "bins");
        const char *rk[1] = {"range_moving"}, *eq[1] = {"1,1"}, *rev[1] = {"2,1"},
                   *single[1] = {"1"}, *nan[1] = {"nan,1"};
        refuse(ctx, op, 2, (const nx_tensor *const[]){a, ok}, 1, rk, eq, "lo < hi");
        refuse(ctx, op, 2, (const nx_tensor *const[]){a, ok}, 1, rk, rev, "lo < hi");
        refuse(ctx, op, 2, (const nx_tensor *const[]){a, ok}, 1, rk, single, "two");
        refuse(ctx, op, 2, (const nx_tensor *const[]){a, ok}, 1, rk, nan, "finite");
        const char *fk[1] = {"range_fixed"};
        refuse(ctx, op, 2, (const nx_tensor *const[]){a, ok}, 1, fk, rev, "range_fixed");
        const char *dk[1] = {"driver"}, *dv[1] = {"atomic"};
        refuse(ctx, op, 2, (const nx_tensor *const[]){a, ok}, 1, dk, dv, "driver");
    }
    /* the mask: its shape must broadcast */
    refuse(ctx, "joint_histogram", 3, (const nx_tensor *const[]){a, ok, mask}, 0, NULL, NULL,
           "broadcast");
    refuse(ctx, "mutual_information", 3, (const nx_tensor *const[]){a, ok, mask}, 0, NULL, NULL,
           "broadcast");
    const char *sk[1] = {"sample_stride"}, *s0v[1] = {"0"};
    refuse(ctx, "mi_grad", 2, (const nx_tensor *const[]){a, ok}, 1, sk, s0v, "sample_stride");
    refuse(ctx, "nmi_grad", 2, (const nx_tensor *const[]){a, ok}, 1, sk, s0v, "sample_stride");

    /* winsorize */
    const char *wk[2] = {"lower", "upper"};
    const char *hi_lo[2] = {"0.9", "0.1"}, *neg[2] = {"-0.1", "0.5"}, *big[2] = {"0.1", "1.5"};
    refuse(ctx, "winsorize", 1, (const nx_tensor *const[]){a}, 2, wk, hi_lo, "lower");
    refuse(ctx, "winsorize", 1, (const nx_tensor *const[]){a}, 2, wk, neg, "lower");
    refuse(ctx, "winsorize", 1, (const nx_tensor *const[]){a}, 2, wk, big, "upper");
    refuse(ctx, "winsorize", 1, (const nx_tensor *const[]){e}, 0, NULL, NULL, "elements");
    refuse(ctx, "winsorize", 1, (const nx_tensor *const[]){ints}, 0, NULL, NULL, "f32 or f64");
    /* lower == upper is allowed: every element becomes that quantile (the median here) */
    const char *half[2] = {"0.5", "0.5"};
    nx_tensor *y = call(ctx, "winsorize", 1, (const nx_tensor *const[]){a}, 2, wk, half);
    for (int i = 0; i < 20; i++)
        assert_true(at(y, i) == 9.5);
    nx_tensor_free(y);

    /* match_histogram: shapes may differ, dtypes may not */
    const char *mk[1] = {"bins"}, *m1[1] = {"1"};
    refuse(ctx, "match_histogram", 2, (const nx_tensor *const[]){a, ok}, 1, mk, m1, "bins");
    refuse(ctx, "match_histogram", 2, (const nx_tensor *const[]){a, c}, 0, NULL, NULL,
           "same float dtype");
    refuse(ctx, "match_histogram", 2, (const nx_tensor *const[]){a, e}, 0, NULL, NULL,
           "elements");
    y = call(ctx, "match_histogram", 2, (const nx_tensor *const[]){a, b}, 0, NULL, NULL);
    /* b is all zeros: every quantile is 0 */
    for (int i = 0; i < 20; i++)
        assert_true(at(y, i) == 0.0);
    nx_tensor_free(y);

    nx_tensor *all[7] = {a, b, c, e, ok, mask, ints};
    for (int i = 0; i < 7; i++)
        nx_tensor_free(all[i]);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* match_histogram of an image onto itself is the identity (the knots are the same curve), and
 * onto an affine copy a*x + b the affine map, up to rounding. */
static void test_match_identities(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t shape[2] = {30, 31};
    nx_tensor *m = tensor(ctx, NX_DTYPE_F64, 2, shape), *r = tensor(ctx, NX_DTYPE_F64, 2, shape);
    for (int64_t i = 0; i < 930; i++) {
        set(m, i, gauss());
        set(r, i, 2.5 * at(m, i) - 1.0);
    }
    nx_tensor *same = call(ctx, "match_histogram", 2, (const nx_tensor *const[]){m, m}, 0, NULL,
                           NULL);
    nx_tensor *aff = call(ctx, "match_histogram", 2, (const nx_tensor *const[]){m, r}, 0, NULL,
                          NULL);
    for (int64_t i = 0; i < 930; i++) {
        assert_true(nx_test_close(at(same, i), at(m, i), 0, 1e-12));
        assert_true(nx_test_close(at(aff, i), at(r, i), 0, 1e-12));
    }
    nx_tensor_free(same);
    nx_tensor_free(aff);
    nx_tensor_free(m);
    nx_tensor_free(r);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mi_grad_autodiff),  cmocka_unit_test(test_nmi_grad_autodiff),
        cmocka_unit_test(test_drivers_contract),  cmocka_unit_test(test_reproducible_driver),
        cmocka_unit_test(test_constant_images),   cmocka_unit_test(test_errors),
        cmocka_unit_test(test_match_identities),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
