/* The similarity metrics beyond the golden replay (golden/metrics/sim_*, from
 * tools/golden-cases/metrics/similarity.py): the closed-form lncc_grad against autodiff (nx_op_vjp of
 * lncc with reduction=sum) in float64 on every border mode, windows wider than the image and
 * batch axes; constant images and empty masks (eps: 0, not NaN); bad input. */
#include <math.h>
#include <string.h>

#include "nitrix-op.h"
#include "testutil.h"

static uint64_t rng = 0x2545f4914f6cdd1du;

static double uniform(void) /* [0, 1) */
{
    rng = rng * 6364136223846793005u + 1442695040888963407u;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static nx_tensor *make(nx_ctx *ctx, nx_dtype dt, int nd, const int64_t *shape, double lo,
                       double hi)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, dt, nd, shape, &t), NX_OK);
    int64_t n = nx_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double v = lo + (hi - lo) * uniform();
        if (dt == NX_DTYPE_F64)
            ((double *)nx_tensor_data(t))[i] = v;
        else
            ((float *)nx_tensor_data(t))[i] = (float)v;
    }
    return t;
}

static double at(const nx_tensor *t, int64_t i)
{
    return nx_tensor_dtype(t) == NX_DTYPE_F64 ? ((const double *)nx_tensor_data(t))[i]
                                              : ((const float *)nx_tensor_data(t))[i];
}

/* fixed = sin(3 moving) + noise: locally related, so cc spans [0, 1] */
static nx_tensor *related(nx_ctx *ctx, const nx_tensor *m)
{
    nx_tensor *f = make(ctx, nx_tensor_dtype(m), nx_tensor_ndim(m), nx_tensor_shape(m), -0.3, 0.3);
    for (int64_t i = 0; i < nx_tensor_numel(m); i++) {
        double v = sin(3 * at(m, i)) + at(f, i);
        if (nx_tensor_dtype(m) == NX_DTYPE_F64)
            ((double *)nx_tensor_data(f))[i] = v;
        else
            ((float *)nx_tensor_data(f))[i] = (float)v;
    }
    return f;
}

static nx_status call(nx_ctx *ctx, const char *op, int nin, const nx_tensor *const *in, int nopt,
                      const char *const *keys, const char *const *vals, nx_tensor **out)
{
    return nx_op_call(ctx, op, nin, in, nopt, keys, vals, 1, out);
}

/* ---- lncc_grad against autodiff ------------------------------------------------------------ */

typedef struct grad_case {
    int nd;
    int64_t shape[4];
    const char *radius, *mode, *spatial_rank;
} grad_case;

static const grad_case grad_cases[] = {
    {3, {7, 6, 8}, "2", "reflect", "0"},     {3, {7, 6, 8}, "1,2,3", "mirror", "0"},
    {3, {5, 6, 4}, "2", "nearest", "0"},     {3, {5, 6, 4}, "2", "wrap", "0"},
    {3, {5, 6, 4}, "2", "constant", "0"},    {3, {3, 4, 2}, "5", "reflect", "0"},
    {3, {3, 4, 2}, "4", "mirror", "0"},      {3, {3, 4, 2}, "6", "wrap", "0"},
    {3, {3, 4, 2}, "3", "nearest", "0"},     {4, {2, 3, 6, 5}, "2,1", "reflect", "2"},
    {2, {9, 1}, "2", "mirror", "0"},         {3, {10, 9, 11}, "4", "reflect", "0"},
};

static void grad_vs_autodiff(const grad_case *gc, const char *backend)
{
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_tensor *m = make(ctx, NX_DTYPE_F64, gc->nd, gc->shape, 0, 1);
    nx_tensor *f = related(ctx, m);
    const nx_tensor *in[2] = {m, f}, *swapped[2] = {f, m};
    const char *keys[] = {"radius", "mode", "spatial_rank", "backend", "reduction"};
    const char *vals[] = {gc->radius, gc->mode, gc->spatial_rank, backend, "sum"};
    nx_tensor *g = NULL, *gf = NULL, *one = NULL, *dx[3] = {0};
    assert_int_equal(call(ctx, "lncc_grad", 2, in, 4, keys, vals, &g), NX_OK);
    assert_int_equal(call(ctx, "lncc_grad", 2, swapped, 4, keys, vals, &gf), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 0, NULL, &one), NX_OK);
    *(double *)nx_tensor_data(one) = 1.0;
    nx_status st = nx_op_vjp(ctx, "lncc", 2, in, 5, keys, vals, 1, (const nx_tensor *[]){one}, dx);
    if (st != NX_OK)
        fail_msg("lncc vjp (%s, %s): %s", gc->mode, backend, nx_ctx_last_error(ctx));
    double scale = 0;
    for (int64_t i = 0; i < nx_tensor_numel(g); i++)
        scale = fmax(scale, fabs(at(dx[0], i)));
    assert_true(scale > 0);
    for (int64_t i = 0; i < nx_tensor_numel(g); i++) {
        /* lncc is symmetric in its images: lncc_grad(f, m) is the fixed gradient */
        if (fabs(at(g, i) - at(dx[0], i)) > 1e-10 * scale ||
            fabs(at(gf, i) - at(dx[1], i)) > 1e-10 * scale)
            fail_msg("lncc_grad (%s, radius %s, %s) at %lld: closed form %.17g / %.17g, "
                     "autodiff %.17g / %.17g",
                     gc->mode, gc->radius, backend, (long long)i, at(g, i), at(gf, i),
                     at(dx[0], i), at(dx[1], i));
    }
    nx_tensor_free(m);
    nx_tensor_free(f);
    nx_tensor_free(g);
    nx_tensor_free(gf);
    nx_tensor_free(one);
    nx_tensor_free(dx[0]);
    nx_tensor_free(dx[1]);
    nx_ctx_free(ctx);
}

static void test_lncc_grad_autodiff(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof grad_cases / sizeof grad_cases[0]; k++) {
        grad_vs_autodiff(&grad_cases[k], "cpu");
        if (k < 4)
            grad_vs_autodiff(&grad_cases[k], "ref");
    }
}

/* ---- constant images, empty masks ----------------------------------------------------------- */

static void fill(nx_tensor *t, double v)
{
    for (int64_t i = 0; i < nx_tensor_numel(t); i++) {
        if (nx_tensor_dtype(t) == NX_DTYPE_F64)
            ((double *)nx_tensor_data(t))[i] = v;
        else
            ((float *)nx_tensor_data(t))[i] = (float)v;
    }
}

static void test_constant_images(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    const int64_t shape[3] = {6, 5, 7};
    nx_dtype dts[2] = {NX_DTYPE_F32, NX_DTYPE_F64};
    for (int k = 0; k < 2; k++) {
        nx_tensor *c = make(ctx, dts[k], 3, shape, 0, 1), *x = make(ctx, dts[k], 3, shape, 0, 1);
        fill(c, 0.3); /* 0.3 is not exact in binary: the means round */
        const nx_tensor *in[2] = {c, x};
        const char *ops[] = {"lncc", "ncc", "correlation_ratio", "lncc_grad", "lncc_grad_center"};
        for (int o = 0; o < 5; o++) {
            nx_tensor *y = NULL;
            assert_int_equal(call(ctx, ops[o], 2, in, 0, NULL, NULL, &y), NX_OK);
            for (int64_t i = 0; i < nx_tensor_numel(y); i++)
                if (!(fabs(at(y, i)) < 1e-6))
                    fail_msg("%s of a constant moving, %s: %g at %lld", ops[o],
                             nx_dtype_name(dts[k]), at(y, i), (long long)i);
            nx_tensor_free(y);
        }
        /* ncc's gradient at a constant image is finite */
        nx_tensor *dy = NULL, *dx[3] = {0};
        assert_int_equal(nx_tensor_new(ctx, dts[k], 0, NULL, &dy), NX_OK);
        fill(dy, 1.0);
        const nx_tensor *cc[2] = {c, c};
        assert_int_equal(nx_op_vjp(ctx, "ncc", 2, cc, 0, NULL, NULL, 1,
                                   (const nx_tensor *[]){dy}, dx),
                         NX_OK);
        for (int64_t i = 0; i < nx_tensor_numel(dx[0]); i++)
            assert_true(isfinite(at(dx[0], i)) && isfinite(at(dx[1], i)));
        nx_tensor *y = NULL;
        assert_int_equal(call(ctx, "ncc", 2, cc, 0, NULL, NULL, &y), NX_OK);
        assert_true(at(y, 0) == 0.0);
        nx_tensor_free(y);
        nx_tensor_free(dx[0]);
        nx_tensor_free(dx[1]);
        nx_tensor_free(dy);
        nx_tensor_free(c);
        nx_tensor_free(x);
    }
    nx_ctx_free(ctx);
}

static void test_empty_mask(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    const int64_t shape[3] = {4, 5, 6};
    nx_tensor *m = make(ctx, NX_DTYPE_F64, 3, shape, 0, 1), *f = related(ctx, m), *w = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_BOOL, 3, shape, &w), NX_OK);
    memset(nx_tensor_data(w), 0, (size_t)nx_tensor_numel(w));
    const nx_tensor *in[3] = {m, f, w};
    const char *keys[] = {"reduction"}, *vals[] = {"mean"};
    const char *ops[] = {"lncc", "ncc", "correlation_ratio"};
    for (int o = 0; o < 3; o++) {
        nx_tensor *y = NULL;
        assert_int_equal(call(ctx, ops[o], 3, in, o == 0, keys, vals, &y), NX_OK);
        if (at(y, 0) != 0.0)
            fail_msg("%s with an empty mask: %g, expected 0", ops[o], at(y, 0));
        nx_tensor_free(y);
    }
    nx_tensor_free(m);
    nx_tensor_free(f);
    nx_tensor_free(w);
    nx_ctx_free(ctx);
}

/* ---- bad input ------------------------------------------------------------------------------ */

static void expect_error(nx_ctx *ctx, const char *op, int nin, const nx_tensor *const *in,
                         const char *key, const char *val, const char *words)
{
    nx_tensor *y = (nx_tensor *)1;
    const char *keys[] = {key}, *vals[] = {val};
    nx_status st = call(ctx, op, nin, in, key ? 1 : 0, keys, vals, &y);
    if (st == NX_OK)
        fail_msg("%s with %s=%s: accepted, expected an error", op, key ? key : "-",
                 val ? val : "-");
    assert_null(y);
    const char *msg = nx_ctx_last_error(ctx);
    if (!strstr(msg, words))
        fail_msg("%s with %s=%s: message '%s' does not say '%s'", op, key ? key : "-",
                 val ? val : "-", msg, words);
}

static void test_bad_input(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    const int64_t s1[3] = {4, 5, 6}, s2[3] = {4, 5, 7}, ms[2] = {3, 6};
    nx_tensor *a = make(ctx, NX_DTYPE_F64, 3, s1, 0, 1), *b = make(ctx, NX_DTYPE_F64, 3, s2, 0, 1);
    nx_tensor *c = make(ctx, NX_DTYPE_F32, 3, s1, 0, 1), *i = NULL, *bad_mask = NULL;
    nx_tensor *e = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_I32, 3, s1, &i), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_BOOL, 2, ms, &bad_mask), NX_OK);
    const int64_t es[3] = {4, 0, 6};
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 3, es, &e), NX_OK);
    const char *all[] = {"ncc", "lncc", "lncc_grad", "lncc_grad_center", "correlation_ratio"};
    for (int o = 0; o < 5; o++) {
        expect_error(ctx, all[o], 2, (const nx_tensor *[]){a, b}, NULL, NULL, "shape");
        expect_error(ctx, all[o], 2, (const nx_tensor *[]){a, c}, NULL, NULL, "dtype");
        expect_error(ctx, all[o], 2, (const nx_tensor *[]){i, i}, NULL, NULL, "f32 or f64");
        expect_error(ctx, all[o], 2, (const nx_tensor *[]){a, a}, "eps", "-1", "eps");
    }
    const char *box[] = {"lncc", "lncc_grad", "lncc_grad_center"};
    for (int o = 0; o < 3; o++) {
        const nx_tensor *aa[2] = {a, a};
        expect_error(ctx, box[o], 2, aa, "radius", "-1", "radius");
        expect_error(ctx, box[o], 2, aa, "radius", "1,2", "radius has 2 values");
        expect_error(ctx, box[o], 2, aa, "mode", "sideways", "mode");
        expect_error(ctx, box[o], 2, aa, "spatial_rank", "4", "spatial_rank");
        expect_error(ctx, box[o], 2, (const nx_tensor *[]){e, e}, NULL, NULL, "extent 0");
    }
    const nx_tensor *aa[2] = {a, a};
    expect_error(ctx, "correlation_ratio", 2, aa, "bins", "1", "bins");
    expect_error(ctx, "correlation_ratio", 2, aa, "range_fixed", "2,1", "lo < hi");
    expect_error(ctx, "correlation_ratio", 2, aa, "range_fixed", "1,1", "lo < hi");
    expect_error(ctx, "correlation_ratio", 2, aa, "range_fixed", "1", "two (lo, hi)");
    const char *masked[] = {"ncc", "lncc", "correlation_ratio"};
    for (int o = 0; o < 3; o++)
        expect_error(ctx, masked[o], 3, (const nx_tensor *[]){a, a, bad_mask}, NULL, NULL,
                     "broadcast");
    nx_tensor_free(a);
    nx_tensor_free(b);
    nx_tensor_free(c);
    nx_tensor_free(i);
    nx_tensor_free(e);
    nx_tensor_free(bad_mask);
    nx_ctx_free(ctx);
}

/* A window wider than the image is defined (the border rule repeats, as scipy extends): cc stays
 * in [0, 1] and, for wrap, every window holds the whole periodic line, so a 1-D wrap window of
 * 2 r + 1 = q n samples sees each sample q times and cc is the global squared correlation. */
static void test_wide_window(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    const int64_t n = 5;
    nx_tensor *m = make(ctx, NX_DTYPE_F64, 1, &n, 0, 1), *f = related(ctx, m), *y = NULL, *r = NULL;
    const nx_tensor *in[2] = {m, f};
    const char *keys[] = {"radius", "mode", "eps"}, *vals[] = {"7", "wrap", "0"};
    assert_int_equal(call(ctx, "lncc", 2, in, 3, keys, vals, &y), NX_OK);
    assert_int_equal(call(ctx, "ncc", 2, in, 1, keys + 2, vals + 2, &r), NX_OK);
    double r2 = at(r, 0) * at(r, 0);
    for (int64_t i = 0; i < n; i++)
        if (!nx_test_close(at(y, i), r2, 1e-12, 1e-14))
            fail_msg("lncc wrap radius 7 on 5 samples at %lld: %.17g, expected r^2 = %.17g",
                     (long long)i, at(y, i), r2);
    nx_tensor_free(y);
    nx_tensor_free(r);
    nx_tensor_free(m);
    nx_tensor_free(f);
    nx_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lncc_grad_autodiff), cmocka_unit_test(test_constant_images),
        cmocka_unit_test(test_empty_mask),         cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_wide_window),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
