/* Semirings: the six algebras and user semirings against float64 NumPy/scipy golden data
 * (tools/gen-semiring-golden.py), the formula parser's errors with line and column, definition-time
 * rejections, bad input, the program cache, and allocation-failure sweeps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "nitrix-ops.h"
#include "testutil.h"

/* The reference interpreter, named, so no fallback warning is logged. */
static const nx_semiring_opts REF = {.backend = NX_BACKEND_REF};

static nx_ctx *ctx_new(void)
{
    static nx_test_alloc ta;
    memset(&ta, 0, sizeof ta);
    return nx_test_ctx(&ta);
}

static nx_tensor *load(nx_ctx *ctx, const char *name, const char *key)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/semiring/%s_%s.npy", nx_test_data_dir(), name, key);
    nx_tensor *t = NULL;
    if (nx_npy_read(ctx, path, &t) != NX_OK)
        fail_msg("cannot read %s: %s", path, nx_ctx_last_error(ctx));
    return t;
}

static double at(const nx_tensor *t, int64_t i)
{
    const void *d = nx_tensor_data(t);
    switch (nx_tensor_dtype(t)) {
    case NX_DTYPE_F32:
        return ((const float *)d)[i];
    case NX_DTYPE_F64:
        return ((const double *)d)[i];
    case NX_DTYPE_I64:
        return (double)((const int64_t *)d)[i];
    default:
        fail_msg("unexpected dtype");
        return 0;
    }
}

static const nx_semiring *by_name(const char *name)
{
    for (int k = 0; k < NX_SEMIRING_USER; k++) {
        nx_semiring_info info;
        nx_semiring_get_info(nx_semiring_builtin(k), &info);
        if (!strcmp(info.name, name))
            return nx_semiring_builtin(k);
    }
    fail_msg("no semiring %s", name);
    return NULL;
}

/* Errors are scale-free; the tolerance depends only on dtype and algebra. */
static void expect_close(const char *what, const nx_tensor *got, const nx_tensor *want,
                         const char *sr)
{
    assert_int_equal(nx_tensor_ndim(got), nx_tensor_ndim(want));
    for (int i = 0; i < nx_tensor_ndim(got); i++)
        assert_int_equal(nx_tensor_shape(got)[i], nx_tensor_shape(want)[i]);
    bool f32 = nx_tensor_dtype(got) == NX_DTYPE_F32;
    bool exact = sr && (!strcmp(sr, "boolean") || (!f32 && strstr(sr, "tropical")));
    double tol = exact ? 0.0 : f32 ? 2e-5 : 1e-12;
    for (int64_t i = 0; i < nx_tensor_numel(want); i++)
        if (!nx_test_close(at(got, i), at(want, i), tol, tol))
            fail_msg("%s (%s, %s): element %lld is %.17g, expected %.17g", what, sr ? sr : "-",
                     nx_dtype_name(nx_tensor_dtype(got)), (long long)i, at(got, i), at(want, i));
}

static void parse_ints(const char *s, int64_t *v)
{
    for (int i = 0; *s && i < 3; i++) {
        v[i] = strtoll(s, (char **)&s, 10);
        if (*s == ',')
            s++;
    }
}

typedef void (*case_fn)(nx_ctx *ctx, char *const *f, int nf);

static int for_cases(const char *kind, case_fn fn)
{
    char path[1024], line[512];
    snprintf(path, sizeof path, "%s/semiring/manifest.txt", nx_test_data_dir());
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    int n = 0;
    nx_ctx *ctx = ctx_new();
    while (fgets(line, sizeof line, fp)) {
        char *f[10];
        int nf = 0;
        for (char *tok = strtok(line, " \n"); tok && nf < 10; tok = strtok(NULL, " \n"))
            f[nf++] = tok;
        if (nf == 0 || f[0][0] == '#' || strcmp(f[0], kind))
            continue;
        fn(ctx, f, nf);
        n++;
    }
    fclose(fp);
    nx_ctx_free(ctx);
    return n;
}

/* ---- golden ----------------------------------------------------------------------------------*/

static void matmul_case(nx_ctx *ctx, char *const *f, int nf)
{
    (void)nf;
    nx_tensor *a = load(ctx, f[1], "a"), *b = load(ctx, f[1], "b"), *want = load(ctx, f[1], "out");
    nx_tensor *got = NULL;
    nx_semiring_opts o = {.backend = NX_BACKEND_REF};
    if (nx_semiring_matmul(ctx, by_name(f[2]), a, b, &o, &got) != NX_OK)
        fail_msg("%s: %s", f[1], nx_ctx_last_error(ctx));
    expect_close(f[1], got, want, f[2]);
    nx_tensor_free(a), nx_tensor_free(b), nx_tensor_free(want), nx_tensor_free(got);
}

static void test_matmul_golden(void **state)
{
    (void)state;
    assert_int_equal(for_cases("matmul", matmul_case), 14);
}

static void conv_case(nx_ctx *ctx, char *const *f, int nf)
{
    assert_int_equal(nf, 8);
    nx_tensor *x = load(ctx, f[1], "x"), *k = load(ctx, f[1], "k"), *want = load(ctx, f[1], "out");
    nx_semiring_conv_opts o = {.backend = NX_BACKEND_REF};
    o.padding = !strcmp(f[3], "same")    ? NX_CONV_SAME
                : !strcmp(f[3], "valid") ? NX_CONV_VALID
                                         : NX_CONV_EXPLICIT;
    parse_ints(f[4], o.stride);
    parse_ints(f[5], o.dilation);
    if (o.padding == NX_CONV_EXPLICIT) {
        parse_ints(f[6], o.pad_lo);
        parse_ints(f[7], o.pad_hi);
    }
    nx_tensor *got = NULL;
    if (nx_semiring_conv(ctx, by_name(f[2]), x, k, &o, &got) != NX_OK)
        fail_msg("%s: %s", f[1], nx_ctx_last_error(ctx));
    expect_close(f[1], got, want, f[2]);
    nx_tensor_free(x), nx_tensor_free(k), nx_tensor_free(want), nx_tensor_free(got);
}

static void test_conv_golden(void **state)
{
    (void)state;
    assert_int_equal(for_cases("conv", conv_case), 31);
}

static void pairwise_case(nx_ctx *ctx, char *const *f, int nf)
{
    assert_int_equal(nf, 5);
    nx_tensor *x = load(ctx, f[1], "x"), *y = load(ctx, f[1], "y"), *want = load(ctx, f[1], "out");
    nx_tensor *b = strstr(f[4], "b") && !strstr(f[4], "abs") ? load(ctx, f[1], "b") : NULL;
    nx_tensor *p = strstr(f[4], "p0") ? load(ctx, f[1], "p") : NULL;
    static const char *names[] = {"sum", "max", "min", "logsumexp", "argmin", "argmax", "kmin"};
    nx_pairwise_opts o = {.backend = NX_BACKEND_REF, .formula = f[4], .k = atoll(f[3])};
    for (int i = 0; i < NX_PAIRWISE_REDUCTION_COUNT; i++)
        if (!strcmp(names[i], f[2]))
            o.reduction = i;
    nx_tensor *got = NULL, *idx = NULL;
    if (nx_pairwise_reduce(ctx, x, y, b, p, &o, &got, &idx) != NX_OK)
        fail_msg("%s: %s", f[1], nx_ctx_last_error(ctx));
    expect_close(f[1], got, want, NULL);
    if (o.reduction == NX_PAIRWISE_KMIN) {
        nx_tensor *wi = load(ctx, f[1], "idx");
        expect_close(f[1], idx, wi, "boolean"); /* indices: exact */
        nx_tensor_free(wi);
    }
    nx_tensor_free(x), nx_tensor_free(y), nx_tensor_free(want), nx_tensor_free(got);
    nx_tensor_free(b), nx_tensor_free(p), nx_tensor_free(idx);
}

static void test_pairwise_golden(void **state)
{
    (void)state;
    assert_int_equal(for_cases("pairwise", pairwise_case), 7);
}

static nx_node gauss_expr(nx_graph *g, nx_node xi, nx_node yj, nx_node bj, nx_node p, void *user)
{
    (void)p;
    (void)user;
    nx_node d = nx_sub(g, xi, yj);
    int axis = -1;
    nx_node d2 = nx_reduce(g, nx_mul(g, d, d), 1, &axis, NX_MONOID_SUM, true);
    return nx_mul(g, nx_exp(g, nx_neg(g, d2)), bj);
}

/* F as a C builder gives the Gaussian kernel sum of the golden data. */
static void test_pairwise_builder(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    nx_tensor *x = load(ctx, "pw_gauss", "x"), *y = load(ctx, "pw_gauss", "y");
    nx_tensor *b = load(ctx, "pw_gauss", "b"), *want = load(ctx, "pw_gauss", "out"), *got = NULL;
    nx_pairwise_opts o = {.backend = NX_BACKEND_REF,
                          .reduction = NX_PAIRWISE_SUM,
                          .expr = gauss_expr,
                          .expr_key = "gauss"};
    if (nx_pairwise_reduce(ctx, x, y, b, NULL, &o, &got, NULL) != NX_OK)
        fail_msg("%s", nx_ctx_last_error(ctx));
    expect_close("pairwise builder", got, want, NULL);
    o.formula = "sqdist(x, y)"; /* both F's: refused */
    nx_tensor *again = NULL;
    assert_int_equal(nx_pairwise_reduce(ctx, x, y, b, NULL, &o, &again, NULL), NX_ERR_INVALID_ARG);
    nx_tensor_free(x), nx_tensor_free(y), nx_tensor_free(b), nx_tensor_free(want);
    nx_tensor_free(got);
    nx_ctx_free(ctx);
}

/* ---- user semirings --------------------------------------------------------------------------*/

/* A formula spelling of max-plus is the IR's max monoid and gives the golden max-plus results. */
static void test_formula_equals_builtin(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    nx_semiring *sr = NULL;
    assert_int_equal(
        nx_semiring_parse(ctx, "mp", "plus = max(b, a)\ntimes = a + b; zero = -inf", &sr), NX_OK);
    nx_semiring_info info;
    nx_semiring_get_info(sr, &info);
    assert_true(info.builtin_plus);
    assert_int_equal(info.plus, NX_MONOID_MAX);
    assert_true(info.props & NX_SEMIRING_DIFFERENTIABLE);
    nx_tensor *a = load(ctx, "mm_tropical_max_plus_f64", "a");
    nx_tensor *b = load(ctx, "mm_tropical_max_plus_f64", "b");
    nx_tensor *want = load(ctx, "mm_tropical_max_plus_f64", "out"), *got = NULL;
    assert_int_equal(nx_semiring_matmul(ctx, sr, a, b, &REF, &got), NX_OK);
    expect_close("formula max-plus", got, want, "tropical_max_plus");
    nx_tensor_free(a), nx_tensor_free(b), nx_tensor_free(want), nx_tensor_free(got);
    nx_semiring_free(sr);
    nx_ctx_free(ctx);
}

static nx_tensor *mat(nx_ctx *ctx, int64_t r, int64_t c, const double *v)
{
    nx_tensor *t = NULL;
    int64_t s[2] = {r, c};
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 2, s, &t), NX_OK);
    memcpy(nx_tensor_data(t), v, (size_t)(r * c) * sizeof(double));
    return t;
}

/* A custom (+): a (+) b = a + b + ab = (1 + a)(1 + b) - 1, so C = prod_k (1 + A_ik B_kj) - 1. */
static void test_formula_custom_plus(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    nx_semiring *sr = NULL;
    assert_int_equal(nx_semiring_parse(ctx, NULL,
                                       "# a custom monoid\nplus = a + b + a * b;"
                                       " times = a * b; zero = 0",
                                       &sr),
                     NX_OK);
    nx_semiring_info info;
    nx_semiring_get_info(sr, &info);
    assert_false(info.builtin_plus);
    assert_false(info.props & NX_SEMIRING_DIFFERENTIABLE);
    double av[6] = {0.5, -0.25, 1.0, 2.0, 0.0, -1.5}, bv[6] = {1.0, 0.5, -2.0, 0.25, 3.0, 1.0};
    nx_tensor *a = mat(ctx, 2, 3, av), *b = mat(ctx, 3, 2, bv), *got = NULL;
    assert_int_equal(nx_semiring_matmul(ctx, sr, a, b, &REF, &got), NX_OK);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            double p = 1;
            for (int k = 0; k < 3; k++)
                p *= 1 + av[i * 3 + k] * bv[k * 2 + j];
            assert_true(nx_test_close(at(got, i * 2 + j), p - 1, 1e-14, 1e-14));
        }
    nx_tensor_free(a), nx_tensor_free(b), nx_tensor_free(got);
    nx_semiring_free(sr);
    nx_ctx_free(ctx);
}

/* ---- degenerate (x): a constant, or one operand ----------------------------------------------*/

static nx_tensor *tensor_of(nx_ctx *ctx, int nd, const int64_t *shape, const double *v)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, nd, shape, &t), NX_OK);
    memcpy(nx_tensor_data(t), v, (size_t)nx_tensor_numel(t) * sizeof(double));
    return t;
}

/* got has shape want_shape and element i equals want[i] (exactly: small integers and exact
 * binary fractions, whose sums and extremes are exact in f64). */
static void expect_exact(const char *what, const char *backend, const nx_tensor *got, int nd,
                         const int64_t *want_shape, const double *want)
{
    if (!got)
        fail_msg("%s on %s: no result", what, backend);
    assert_int_equal(nx_tensor_ndim(got), nd);
    for (int i = 0; i < nd; i++)
        assert_int_equal(nx_tensor_shape(got)[i], want_shape[i]);
    for (int64_t i = 0; i < nx_tensor_numel(got); i++)
        if (at(got, i) != want[i])
            fail_msg("%s on %s: element %lld is %.17g, expected %.17g", what, backend,
                     (long long)i, at(got, i), want[i]);
}

static nx_semiring *parse_ok(nx_ctx *ctx, const char *formula)
{
    nx_semiring *sr = NULL;
    if (nx_semiring_parse(ctx, NULL, formula, &sr) != NX_OK)
        fail_msg("'%s': %s", formula, nx_ctx_last_error(ctx));
    return sr;
}

/* A (x) that is a constant (times = 0, times = 1) or reads one operand (times = a, times = b) is a
 * degenerate semiring, and every contraction with it works: its (x) is broadcast over the pairs.
 * Expected values are closed forms computed here: sum_k 1 = K, max_k 0 = 0, sum_k A_ik, min_k
 * B_kj, the number of taps of a convolution, the ELL width, sums of gathered rows. Gradients of a
 * constant (x) are zero; of times = a under sum, dA_ik = sum_j dC_ij. */
static void test_degenerate_times(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    const double av[6] = {0.5, -0.25, 1.0, 2.0, 0.0, -1.5};
    const double bv[12] = {1.0, 0.5, -2.0, 0.25, 3.0, 1.0, 0.75, -1.0, 4.0, -0.5, 2.5, 0.125};
    const int64_t as[2] = {2, 3}, bs[2] = {3, 4}, cs[2] = {2, 4}, ab[3] = {2, 2, 3};
    const double avb[12] = {0.5, -0.25, 1.0, 2.0, 0.0, -1.5, 1.5, 1.0, -1.0, 0.25, 0.5, 4.0};
    nx_tensor *a = tensor_of(ctx, 2, as, av), *b = tensor_of(ctx, 2, bs, bv);
    nx_tensor *abat = tensor_of(ctx, 3, ab, avb);
    nx_semiring *one = parse_ok(ctx, "plus = a + b; times = 1; zero = 0");
    nx_semiring *zero = parse_ok(ctx, "plus = max(a, b); times = 0; zero = -inf");
    nx_semiring *left = parse_ok(ctx, "plus = a + b; times = a; zero = 0");
    nx_semiring *right = parse_ok(ctx, "plus = min(a, b); times = b; zero = inf");
    nx_semiring *fin = parse_ok(ctx, "plus = a + b; times = a * b; zero = 0; finalize = 1");
    nx_semiring *custom = parse_ok(ctx, "plus = a + b + a * b; times = 1; zero = 0");
    double w_one[8], w_zero[8], w_left[8], w_right[8], w_fin[8], w_custom[8], w_bat[16];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) {
            double sa = 0, mb = INFINITY;
            for (int k = 0; k < 3; k++) {
                sa += av[i * 3 + k];
                mb = fmin(mb, bv[k * 4 + j]);
            }
            w_one[i * 4 + j] = 3;
            w_zero[i * 4 + j] = 0;
            w_left[i * 4 + j] = sa;
            w_right[i * 4 + j] = mb;
            w_fin[i * 4 + j] = 1;
            w_custom[i * 4 + j] = 7; /* (1 + 1)^3 - 1: a (+) b = (1 + a)(1 + b) - 1 */
        }
    for (int i = 0; i < 16; i++)
        w_bat[i] = 3;
    static const nx_backend backends[] = {NX_BACKEND_REF, NX_BACKEND_CPU};
    for (int bi = 0; bi < 2; bi++) {
        nx_semiring_opts o = {.backend = backends[bi]};
        const char *bn = bi ? "cpu" : "ref";
        struct {
            const char *what;
            const nx_semiring *sr;
            const nx_tensor *a;
            const double *want;
            int nd;
            const int64_t *shape;
        } mm[] = {
            {"matmul, times = 1", one, a, w_one, 2, cs},
            {"matmul, times = 0", zero, a, w_zero, 2, cs},
            {"matmul, times = a", left, a, w_left, 2, cs},
            {"matmul, times = b", right, a, w_right, 2, cs},
            {"matmul, finalize = 1", fin, a, w_fin, 2, cs},
            {"matmul, custom plus, times = 1", custom, a, w_custom, 2, cs},
            {"batched matmul, times = 1", one, abat, w_bat, 3, (const int64_t[]){2, 2, 4}},
        };
        for (size_t t = 0; t < sizeof mm / sizeof *mm; t++) {
            nx_tensor *got = NULL;
            nx_status st = nx_semiring_matmul(ctx, mm[t].sr, mm[t].a, b, &o, &got);
            if (st != NX_OK)
                fail_msg("%s on %s: %s", mm[t].what, bn, nx_ctx_last_error(ctx));
            expect_exact(mm[t].what, bn, got, mm[t].nd, mm[t].shape, mm[t].want);
            nx_tensor_free(got);
        }

        /* conv: x [5, 2], k [3, 2, 4], valid: 3 outputs, each a fold over 3 x 2 taps */
        double xv[10], kv[24], w_conv[12];
        for (int i = 0; i < 10; i++)
            xv[i] = 0.25 * i - 1;
        for (int i = 0; i < 24; i++)
            kv[i] = 0.5 * (i % 5) - 1;
        nx_tensor *x = tensor_of(ctx, 2, (const int64_t[]){5, 2}, xv);
        nx_tensor *k = tensor_of(ctx, 3, (const int64_t[]){3, 2, 4}, kv);
        nx_semiring_conv_opts co = {.backend = backends[bi], .padding = NX_CONV_VALID};
        for (int i = 0; i < 12; i++)
            w_conv[i] = 6;
        nx_tensor *got = NULL;
        if (nx_semiring_conv(ctx, one, x, k, &co, &got) != NX_OK)
            fail_msg("conv, times = 1 on %s: %s", bn, nx_ctx_last_error(ctx));
        expect_exact("conv, times = 1", bn, got, 2, (const int64_t[]){3, 4}, w_conv);
        nx_tensor_free(got);
        /* times = b: y[o, co] = sum_{t, ci} k[t, ci, co] */
        for (int o2 = 0; o2 < 3; o2++)
            for (int c = 0; c < 4; c++) {
                double sum = 0;
                for (int t = 0; t < 6; t++)
                    sum += kv[t * 4 + c];
                w_conv[o2 * 4 + c] = sum;
            }
        nx_semiring *kb = parse_ok(ctx, "plus = a + b; times = b; zero = 0");
        got = NULL;
        if (nx_semiring_conv(ctx, kb, x, k, &co, &got) != NX_OK)
            fail_msg("conv, times = b on %s: %s", bn, nx_ctx_last_error(ctx));
        expect_exact("conv, times = b", bn, got, 2, (const int64_t[]){3, 4}, w_conv);
        nx_tensor_free(got);
        nx_semiring_free(kb);
        nx_tensor_free(x), nx_tensor_free(k);

        /* ELL: values [3, 2], indices [3, 2] into B [4, 3] */
        const int64_t idx[6] = {0, 3, 2, 2, 1, 0};
        const double vals[6] = {2.0, -1.0, 0.5, 0.5, 3.0, -4.0};
        double bb[12], w_ell1[9], w_ellb[9];
        for (int i = 0; i < 12; i++)
            bb[i] = 0.125 * i - 0.5;
        nx_ell e = {.n_cols = 4};
        e.values = tensor_of(ctx, 2, (const int64_t[]){3, 2}, vals);
        assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_I64, 2, (const int64_t[]){3, 2}, &e.indices),
                         NX_OK);
        memcpy(nx_tensor_data(e.indices), idx, sizeof idx);
        nx_tensor *eb = tensor_of(ctx, 2, (const int64_t[]){4, 3}, bb);
        for (int i = 0; i < 3; i++)
            for (int c = 0; c < 3; c++) {
                w_ell1[i * 3 + c] = 2;
                w_ellb[i * 3 + c] = bb[idx[i * 2] * 3 + c] + bb[idx[i * 2 + 1] * 3 + c];
            }
        nx_semiring *eright = parse_ok(ctx, "plus = a + b; times = b; zero = 0");
        got = NULL;
        if (nx_semiring_ell_matmul(ctx, one, &e, eb, &o, &got) != NX_OK)
            fail_msg("ELL, times = 1 on %s: %s", bn, nx_ctx_last_error(ctx));
        expect_exact("ELL, times = 1", bn, got, 2, (const int64_t[]){3, 3}, w_ell1);
        nx_tensor_free(got);
        got = NULL;
        if (nx_semiring_ell_matmul(ctx, eright, &e, eb, &o, &got) != NX_OK)
            fail_msg("ELL, times = b on %s: %s", bn, nx_ctx_last_error(ctx));
        expect_exact("ELL, times = b", bn, got, 2, (const int64_t[]){3, 3}, w_ellb);
        nx_tensor_free(got);
        nx_semiring_free(eright);
        nx_tensor_free(eb);
        nx_ell_free(&e);

        /* gradients: a constant (x) has none; times = a under sum gives dA_ik = sum_j dC_ij */
        double dcv[8], w_da[6], zeros[12] = {0};
        for (int i = 0; i < 8; i++)
            dcv[i] = 0.5 * i - 1.5;
        for (int i = 0; i < 2; i++)
            for (int k2 = 0; k2 < 3; k2++)
                w_da[i * 3 + k2] = dcv[i * 4] + dcv[i * 4 + 1] + dcv[i * 4 + 2] + dcv[i * 4 + 3];
        nx_tensor *dc = tensor_of(ctx, 2, cs, dcv), *da = NULL, *db = NULL;
        if (nx_semiring_matmul_vjp(ctx, one, a, b, dc, &o, &da, &db) != NX_OK)
            fail_msg("vjp, times = 1 on %s: %s", bn, nx_ctx_last_error(ctx));
        expect_exact("dA, times = 1", bn, da, 2, as, zeros);
        expect_exact("dB, times = 1", bn, db, 2, bs, zeros);
        nx_tensor_free(da), nx_tensor_free(db);
        da = db = NULL;
        if (nx_semiring_matmul_vjp(ctx, left, a, b, dc, &o, &da, &db) != NX_OK)
            fail_msg("vjp, times = a on %s: %s", bn, nx_ctx_last_error(ctx));
        expect_exact("dA, times = a", bn, da, 2, as, w_da);
        expect_exact("dB, times = a", bn, db, 2, bs, zeros);
        nx_tensor_free(da), nx_tensor_free(db), nx_tensor_free(dc);
    }
    nx_semiring_free(one), nx_semiring_free(zero), nx_semiring_free(left);
    nx_semiring_free(right), nx_semiring_free(fin), nx_semiring_free(custom);
    nx_tensor_free(a), nx_tensor_free(b), nx_tensor_free(abat);
    nx_ctx_free(ctx);
}

/* From C: times = max(a, b) * 2 under min; C_ij = min_k 2 max(A_ik, B_kj), computed by hand. */
static void test_define_from_ir(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node a = nx_placeholder(g, NX_DTYPE_F32), b = nx_placeholder(g, NX_DTYPE_F32);
    nx_node t = nx_mul(g, nx_maximum(g, a, b), nx_scalar(g, NX_DTYPE_F32, 2.0));
    nx_semiring_def def = {.name = "minmax",
                           .g = g,
                           .a = a,
                           .b = b,
                           .times = t,
                           .plus = NX_MONOID_MIN,
                           .identity = INFINITY};
    nx_semiring *sr = NULL;
    assert_int_equal(nx_semiring_define(ctx, &def, &sr), NX_OK);
    nx_graph_free(g);
    double av[4] = {1, 5, -2, 0}, bv[4] = {3, -1, 4, 2};
    nx_tensor *A = mat(ctx, 2, 2, av), *B = mat(ctx, 2, 2, bv), *got = NULL;
    assert_int_equal(nx_semiring_matmul(ctx, sr, A, B, &REF, &got), NX_OK);
    /* C00 = min(2max(1,3), 2max(5,4)) = 6; C01 = min(2max(1,-1), 2max(5,2)) = 2;
     * C10 = min(2max(-2,3), 2max(0,4)) = 6; C11 = min(2max(-2,-1), 2max(0,2)) = -2. */
    double want[4] = {6, 2, 6, -2};
    for (int i = 0; i < 4; i++)
        assert_true(at(got, i) == want[i]);
    nx_tensor_free(A), nx_tensor_free(B), nx_tensor_free(got);
    nx_semiring_free(sr);
    nx_ctx_free(ctx);
}

/* A two-component custom (+) from C: (sum, count) finalized to sum / count, so
 * C_ij = mean_k A_ik B_kj, computed by hand. Forward-only. */
static void test_define_custom_monoid(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node a = nx_placeholder(g, NX_DTYPE_F64), b = nx_placeholder(g, NX_DTYPE_F64);
    nx_monoid_def m = {.ncarry = 2};
    m.x = nx_placeholder(g, NX_DTYPE_F64);
    for (int i = 0; i < 2; i++) {
        m.a[i] = nx_placeholder(g, NX_DTYPE_F64);
        m.b[i] = nx_placeholder(g, NX_DTYPE_F64);
        m.combine[i] = nx_add(g, m.a[i], m.b[i]);
        m.identity[i] = nx_scalar(g, NX_DTYPE_F64, 0.0);
    }
    m.lift[0] = m.x;
    m.lift[1] = nx_scalar(g, NX_DTYPE_F64, 1.0);
    m.finalize = nx_div(g, m.a[0], m.a[1]);
    nx_semiring_def def = {.name = "mean",
                           .g = g,
                           .a = a,
                           .b = b,
                           .times = nx_mul(g, a, b),
                           .custom = &m,
                           .identity = NAN};
    nx_semiring *sr = NULL;
    if (nx_semiring_define(ctx, &def, &sr) != NX_OK)
        fail_msg("%s", nx_ctx_last_error(ctx));
    /* a combine that reads a placeholder of another monoid part is refused */
    nx_monoid_def bad = m;
    bad.combine[1] = nx_add(g, m.a[1], m.x);
    def.custom = &bad;
    nx_semiring *sr2 = NULL;
    assert_int_equal(nx_semiring_define(ctx, &def, &sr2), NX_ERR_INVALID_ARG);
    nx_graph_free(g);
    nx_semiring_info info;
    nx_semiring_get_info(sr, &info);
    assert_int_equal(info.ncarry, 2);
    assert_false(info.props & NX_SEMIRING_DIFFERENTIABLE);
    double av[6] = {1, 2, 3, 4, 5, 6}, bv[6] = {1, -1, 2, 0, 0.5, 4};
    nx_tensor *A = mat(ctx, 2, 3, av), *B = mat(ctx, 3, 2, bv), *got = NULL;
    assert_int_equal(nx_semiring_matmul(ctx, sr, A, B, &REF, &got), NX_OK);
    /* C00 = (1 + 4 + 1.5) / 3, C01 = (-1 + 0 + 12) / 3, C10 = (4 + 10 + 3) / 3,
     * C11 = (-4 + 0 + 24) / 3 */
    double want[4] = {6.5 / 3, 11.0 / 3, 17.0 / 3, 20.0 / 3};
    for (int i = 0; i < 4; i++)
        assert_true(nx_test_close(at(got, i), want[i], 1e-15, 0));
    nx_tensor_free(A), nx_tensor_free(B), nx_tensor_free(got);
    nx_semiring_free(sr);
    nx_ctx_free(ctx);
}

static void test_define_rejections(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node a = nx_placeholder(g, NX_DTYPE_F64), b = nx_placeholder(g, NX_DTYPE_F64);
    nx_node other = nx_placeholder(g, NX_DTYPE_F64);
    nx_semiring *sr = NULL;
    /* a placeholder that is not a or b */
    nx_semiring_def def = {
        .g = g, .a = a, .b = b, .times = nx_add(g, a, other), .plus = NX_MONOID_SUM};
    assert_int_equal(nx_semiring_define(ctx, &def, &sr), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "not one of its own"));
    /* a comparison is bool, not a float */
    def.times = nx_lt(g, a, b);
    assert_int_equal(nx_semiring_define(ctx, &def, &sr), NX_ERR_DTYPE);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "gives bool"));
    /* a non-elementwise node */
    int64_t s1 = 3;
    def.times = nx_input(g, "v", NX_DTYPE_F64, 1, &s1);
    assert_int_equal(nx_semiring_define(ctx, &def, &sr), NX_ERR_INVALID_ARG);
    /* a monoid that is not sum/max/min/logsumexp */
    def.times = nx_mul(g, a, b);
    def.plus = NX_MONOID_ARGMAX;
    assert_int_equal(nx_semiring_define(ctx, &def, &sr), NX_ERR_INVALID_ARG);
    assert_null(sr);
    nx_graph_free(g);
    nx_ctx_free(ctx);
}

typedef struct parse_case {
    const char *text;
    nx_status st;
    const char *msg; /* exact, or a substring when it starts with '~' */
} parse_case;

static void test_formula_errors(void **state)
{
    (void)state;
    /* Columns counted by hand, 1-based. */
    static const parse_case cases[] = {
        {"plus = max(a, b); times = a +; zero = -inf", NX_ERR_PARSE,
         "semiring formula:1:30: expected a number, a name or '(', found ';'"},
        {"plus = max(a, b)\ntimes = a * c\nzero = 0", NX_ERR_PARSE,
         "semiring formula:2:13: expected a, b, inf, nan or a number, found name 'c'"},
        {"plus = max(a)\ntimes = a\nzero = 0", NX_ERR_PARSE,
         "semiring formula:1:8: max takes 2 arguments, found 1"},
        {"plus = foo(a, b); times = a; zero = 0", NX_ERR_PARSE,
         "semiring formula:1:8: expected a function (exp, log, sqrt, max, min, pow, select, "
         "...), found name 'foo'"},
        {"plus = (a + b; times = a; zero = 0", NX_ERR_PARSE,
         "semiring formula:1:14: expected ')', found ';'"},
        {"plus a + b", NX_ERR_PARSE, "semiring formula:1:6: expected '=', found name 'a'"},
        {"plus = a + b times = a", NX_ERR_PARSE,
         "semiring formula:1:14: expected an operator, ';', a newline or end of input, found "
         "name 'times'"},
        {"", NX_ERR_PARSE,
         "semiring formula:1:1: expected a statement `key = expression`, found end of input"},
        {"plus = a $ b", NX_ERR_PARSE, "~found character '$'"},
        {"plus = a + b; times = a * b; zero = 0; zero = 1", NX_ERR_INVALID_ARG,
         "semiring formula:1:40: 'zero' is given twice (first at 1:30)"},
        {"plus = a + b; times = a * b", NX_ERR_INVALID_ARG,
         "semiring formula: 'zero' is missing (plus, times and zero are required)"},
        {"plus = a + b; times = a * b; zero = 0; unit = 1", NX_ERR_INVALID_ARG,
         "~unknown key 'unit'"},
        {"plus = a + b; times = a * b; zero = a", NX_ERR_INVALID_ARG,
         "semiring formula:1:30: 'zero' must be a number (or inf, -inf, nan), not an "
         "expression"},
        {"plus = max(a, b); times = a + b; zero = 0", NX_ERR_INVALID_ARG,
         "~whose identity is -inf"},
        {"plus = a + b; times = a < b; zero = 0", NX_ERR_DTYPE, "~times gives bool"},
        {"plus = a + b; times = a * b; zero = 0; finalize = sqrt(b)", NX_ERR_INVALID_ARG,
         "~'finalize' may use only a"},
        {"plus = -(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(a)))))))))"
         ")))))))))))))))))))))))))); times = a; zero = 0",
         NX_ERR_PARSE, "~nested more than 64 deep"},
    };
    nx_ctx *ctx = ctx_new();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nx_semiring *sr = (nx_semiring *)1;
        nx_status st = nx_semiring_parse(ctx, NULL, cases[i].text, &sr);
        const char *msg = nx_ctx_last_error(ctx);
        if (st != cases[i].st)
            fail_msg("case %zu: %s, expected %s (%s)", i, nx_status_str(st),
                     nx_status_str(cases[i].st), msg);
        assert_null(sr);
        bool ok = cases[i].msg[0] == '~' ? strstr(msg, cases[i].msg + 1) != NULL
                                         : strcmp(msg, cases[i].msg) == 0;
        if (!ok)
            fail_msg("case %zu: message\n  %s\nexpected\n  %s", i, msg, cases[i].msg);
    }
    nx_ctx_free(ctx);
}

/* ---- bad input and defined results -----------------------------------------------------------*/

static void test_bad_input(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    const nx_semiring *real = nx_semiring_builtin(NX_SEMIRING_REAL);
    double v[12] = {0};
    nx_tensor *a = mat(ctx, 3, 4, v), *b = mat(ctx, 5, 2, v), *out = NULL;
    assert_int_equal(nx_semiring_matmul(ctx, real, a, b, &REF, &out), NX_ERR_SHAPE);
    assert_string_equal(nx_ctx_last_error(ctx),
                        "nx_semiring_matmul: A is 3x4 but B is 5x2 (inner dims differ)");
    assert_null(out);
    assert_int_equal(nx_semiring_matmul(ctx, NULL, a, a, &REF, &out), NX_ERR_INVALID_ARG);
    nx_tensor *ai = NULL;
    assert_int_equal(nx_tensor_cast(a, NX_DTYPE_I32, &ai), NX_OK);
    assert_int_equal(nx_semiring_matmul(ctx, real, ai, b, &REF, &out), NX_ERR_DTYPE);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "is i32; expected f32 or f64"));
    assert_null(nx_semiring_builtin(NX_SEMIRING_USER));
    /* conv: channels disagree, window larger than a VALID input, empty axis */
    int64_t xs[3] = {1, 4, 2}, ks[3] = {3, 3, 1}, ks2[3] = {6, 2, 1}, xe[3] = {0, 4, 2};
    nx_tensor *x = NULL, *k = NULL, *k2 = NULL, *xe_t = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 3, xs, &x), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 3, ks, &k), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 3, ks2, &k2), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 3, xe, &xe_t), NX_OK);
    assert_int_equal(nx_semiring_conv(ctx, real, x, k,
                                      &(nx_semiring_conv_opts){.backend = NX_BACKEND_REF}, &out),
                     NX_ERR_SHAPE);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "c_in differs"));
    nx_semiring_conv_opts valid = {.backend = NX_BACKEND_REF, .padding = NX_CONV_VALID};
    assert_int_equal(nx_semiring_conv(ctx, real, x, k2, &valid, &out), NX_ERR_SHAPE);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "is 4 after padding but the dilated kernel"));
    assert_int_equal(nx_semiring_conv(ctx, real, xe_t, k2,
                                      &(nx_semiring_conv_opts){.backend = NX_BACKEND_REF}, &out),
                     NX_ERR_SHAPE);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "empty axis"));
    /* pairwise: non-finite parameter, unbound names, k out of range */
    nx_tensor *p = NULL;
    int64_t one = 1;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 1, &one, &p), NX_OK);
    ((double *)nx_tensor_data(p))[0] = NAN;
    nx_pairwise_opts po = {.backend = NX_BACKEND_REF,
                           .formula = "-sqdist(x, y) / p0",
                           .reduction = NX_PAIRWISE_LOGSUMEXP};
    assert_int_equal(nx_pairwise_reduce(ctx, a, a, NULL, p, &po, &out, NULL), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "parameter p0 is nan"));
    assert_int_equal(nx_pairwise_reduce(ctx, a, a, NULL, NULL, &po, &out, NULL),
                     NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "uses p0 but p has 0 values"));
    po.formula = "sqdist(x, y";
    assert_int_equal(nx_pairwise_reduce(ctx, a, a, NULL, NULL, &po, &out, NULL), NX_ERR_PARSE);
    assert_string_equal(nx_ctx_last_error(ctx),
                        "pairwise formula:1:12: expected ',' or ')', found end of input");
    po.formula = "sqdist(x, y)";
    po.reduction = NX_PAIRWISE_KMIN;
    po.k = 4;
    nx_tensor *idx = NULL;
    assert_int_equal(nx_pairwise_reduce(ctx, a, a, NULL, NULL, &po, &out, &idx),
                     NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "1 <= k <= N = 3"));
    assert_int_equal(nx_pairwise_reduce(ctx, a, b, NULL, NULL, &po, &out, &idx), NX_ERR_SHAPE);
    assert_null(out);
    nx_tensor_free(a), nx_tensor_free(b), nx_tensor_free(ai), nx_tensor_free(x);
    nx_tensor_free(k), nx_tensor_free(k2), nx_tensor_free(xe_t), nx_tensor_free(p);
    nx_ctx_free(ctx);
}

/* An empty inner axis gives each algebra's identity after finalize. */
static void test_empty_k(void **state)
{
    (void)state;
    static const double want[NX_SEMIRING_USER] = {0.0, -INFINITY, -INFINITY, INFINITY, 0.0, 0.0};
    nx_ctx *ctx = ctx_new();
    int64_t sa[2] = {2, 0}, sb[2] = {0, 3};
    nx_tensor *a = NULL, *b = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, 2, sa, &a), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, 2, sb, &b), NX_OK);
    for (int s = 0; s < NX_SEMIRING_USER; s++) {
        nx_tensor *out = NULL;
        if (nx_semiring_matmul(ctx, nx_semiring_builtin(s), a, b, &REF, &out) != NX_OK)
            fail_msg("algebra %d: %s", s, nx_ctx_last_error(ctx));
        assert_int_equal(nx_tensor_numel(out), 6);
        for (int i = 0; i < 6; i++)
            if (!(at(out, i) == want[s]))
                fail_msg("algebra %d: element %d is %g, expected %g", s, i, at(out, i), want[s]);
        nx_tensor_free(out);
    }
    nx_tensor_free(a), nx_tensor_free(b);
    nx_ctx_free(ctx);
}

/* LOG at magnitudes where exp overflows (f32: e^88) stays finite through the online carry:
 * log(e^{1000} + e^{1000}) = 1000 + log 2, and all -inf rows stay -inf. */
static void test_log_magnitudes(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    const nx_semiring *sr = nx_semiring_builtin(NX_SEMIRING_LOG);
    static const nx_dtype dts[2] = {NX_DTYPE_F32, NX_DTYPE_F64};
    for (int k = 0; k < 2; k++) {
        nx_tensor *a = NULL, *b = NULL,
                  *a64 = mat(ctx, 3, 2, (double[]){1000, 1000, -1000, -1000, -INFINITY, -INFINITY});
        nx_tensor *b64 = mat(ctx, 2, 1, (double[]){0, 0}), *out = NULL;
        assert_int_equal(nx_tensor_cast(a64, dts[k], &a), NX_OK);
        assert_int_equal(nx_tensor_cast(b64, dts[k], &b), NX_OK);
        assert_int_equal(nx_semiring_matmul(ctx, sr, a, b, &REF, &out), NX_OK);
        double tol = k == 0 ? 1e-6 : 1e-15;
        assert_true(nx_test_close(at(out, 0), 1000 + log(2.0), tol, 0));
        assert_true(nx_test_close(at(out, 1), -1000 + log(2.0), tol, 0));
        assert_true(at(out, 2) == -INFINITY);
        nx_tensor_free(a), nx_tensor_free(b), nx_tensor_free(a64), nx_tensor_free(b64);
        nx_tensor_free(out);
    }
    nx_ctx_free(ctx);
}

/* The second call with the same key finds its program in the context cache. */
static void test_cache_hit(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    double v[4] = {1, 2, 3, 4};
    nx_tensor *a = mat(ctx, 2, 2, v), *out = NULL;
    const nx_semiring *sr = nx_semiring_builtin(NX_SEMIRING_LOG);
    assert_int_equal(nx_semiring_matmul(ctx, sr, a, a, &REF, &out), NX_OK);
    nx_tensor_free(out);
    nx_rt_cache *cache = NULL;
    assert_int_equal(nx_rt_cache_of(ctx, &cache), NX_OK);
    nx_rt_cache_stats s0, s1;
    nx_rt_cache_get_stats(cache, &s0);
    assert_int_equal(nx_semiring_matmul(ctx, sr, a, a, &REF, &out), NX_OK);
    nx_rt_cache_get_stats(cache, &s1);
    assert_int_equal(s1.find_hits, s0.find_hits + 1);
    assert_int_equal(s1.inserts, s0.inserts);
    /* LOG of [[1,2],[3,4]] with itself: C00 = log(e^{1+1} + e^{2+3}) */
    assert_true(nx_test_close(at(out, 0), log(exp(2.0) + exp(5.0)), 1e-14, 0));
    nx_tensor_free(out);
    nx_tensor_free(a);
    nx_ctx_free(ctx);
}

/* ---- allocation failures ---------------------------------------------------------------------*/

static nx_status sweep_matmul(nx_ctx *ctx, void *user)
{
    (void)user;
    double v[6] = {1, 2, 3, 4, 5, 6};
    int64_t s[2] = {2, 3}, s2[2] = {3, 2};
    nx_tensor *a = NULL, *b = NULL, *out = NULL;
    nx_semiring *sr = NULL;
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F64, 2, s, &a);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F64, 2, s2, &b);
    if (st == NX_OK) {
        memcpy(nx_tensor_data(a), v, sizeof v);
        memcpy(nx_tensor_data(b), v, sizeof v);
        st = nx_semiring_parse(ctx, "u", "plus = a + b + a*b; times = a*b; zero = 0", &sr);
    }
    if (st == NX_OK)
        st = nx_semiring_matmul(ctx, sr, a, b, &REF, &out);
    nx_tensor_free(out);
    out = NULL;
    if (st == NX_OK)
        st = nx_semiring_matmul(ctx, nx_semiring_builtin(NX_SEMIRING_EUCLIDEAN), a, b, &REF, &out);
    nx_tensor *da = NULL, *db = NULL;
    if (st == NX_OK)
        st = nx_semiring_matmul_vjp(ctx, nx_semiring_builtin(NX_SEMIRING_LOG), a, b, out, &REF, &da,
                                    &db);
    nx_tensor_free(da), nx_tensor_free(db);
    nx_tensor_free(out);
    nx_semiring_free(sr);
    nx_tensor_free(a), nx_tensor_free(b);
    return st;
}

static nx_status sweep_conv_pairwise(nx_ctx *ctx, void *user)
{
    (void)user;
    int64_t xs[3] = {1, 5, 2}, ks[3] = {3, 2, 2}, ps[2] = {4, 2};
    nx_tensor *x = NULL, *k = NULL, *pts = NULL, *out = NULL, *idx = NULL;
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F32, 3, xs, &x);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F32, 3, ks, &k);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F32, 2, ps, &pts);
    if (st == NX_OK)
        st = nx_semiring_conv(ctx, nx_semiring_builtin(NX_SEMIRING_LOG), x, k,
                              &(nx_semiring_conv_opts){.backend = NX_BACKEND_REF}, &out);
    nx_tensor_free(out);
    out = NULL;
    nx_pairwise_opts po = {.backend = NX_BACKEND_REF,
                           .formula = "sqdist(x, y)",
                           .reduction = NX_PAIRWISE_KMIN,
                           .k = 2};
    if (st == NX_OK)
        st = nx_pairwise_reduce(ctx, pts, pts, NULL, NULL, &po, &out, &idx);
    nx_tensor_free(out), nx_tensor_free(idx);
    /* the two-pass gradient (LOGSUMEXP: forward pass, weights, two sides) and BOOLEAN on bool */
    nx_tensor *b = NULL, *p = NULL, *dout = NULL, *g[4] = {NULL}, *bl = NULL;
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F32, 1, (int64_t[]){4}, &b);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F32, 1, (int64_t[]){1}, &p);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F32, 2, (int64_t[]){4, 1}, &dout);
    if (st == NX_OK) {
        ((float *)nx_tensor_data(p))[0] = 1.0f;
        nx_pairwise_opts go = {.backend = NX_BACKEND_REF,
                               .formula = "-sqdist(x, y) / p0 + b",
                               .reduction = NX_PAIRWISE_LOGSUMEXP};
        st = nx_pairwise_reduce_vjp(ctx, pts, pts, b, p, &go, dout, g);
    }
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_BOOL, 2, (int64_t[]){3, 3}, &bl);
    out = NULL;
    if (st == NX_OK)
        st = nx_semiring_matmul(ctx, nx_semiring_builtin(NX_SEMIRING_BOOLEAN), bl, bl, &REF, &out);
    nx_tensor_free(out);
    for (int i = 0; i < 4; i++)
        nx_tensor_free(g[i]);
    nx_tensor_free(b), nx_tensor_free(p), nx_tensor_free(dout), nx_tensor_free(bl);
    nx_tensor_free(x), nx_tensor_free(k), nx_tensor_free(pts);
    return st;
}

static void test_alloc_sweeps(void **state)
{
    (void)state;
    assert_true(nx_test_alloc_sweep(sweep_matmul, NULL, 5000) > 0);
    assert_true(nx_test_alloc_sweep(sweep_conv_pairwise, NULL, 5000) > 0);
}

static nx_tensor *rand_tensor(nx_ctx *ctx, nx_dtype dt, int nd, const int64_t *shape,
                              unsigned *seed, double lo, double hi);

/* ---- conv against a direct loop ---------------------------------------------------------------*/

/* y[b, o, co] = (+)_{t, ci} x[b, o*st + t*dil - lo, ci] (x) k[t, ci, co] over d <= 3 spatial dims
 * (as flattened extents), max-plus or sum-product, padding outside with the identity. */
static double direct_conv_at(const double *x, const double *k, int d, const int64_t *s,
                             const int64_t *w, const int64_t *st, const int64_t *dil,
                             const int64_t *lo, int64_t cin, int64_t cout, const int64_t *o,
                             int64_t co, bool maxplus)
{
    double acc = maxplus ? -INFINITY : 0.0;
    int64_t t[3] = {0, 0, 0};
    int64_t taps = 1;
    for (int i = 0; i < d; i++)
        taps *= w[i];
    for (int64_t tt = 0; tt < taps; tt++) {
        int64_t r = tt, pos = 0, kpos = 0;
        bool inside = true;
        for (int i = d - 1; i >= 0; i--) {
            t[i] = r % w[i];
            r /= w[i];
        }
        for (int i = 0; i < d; i++) {
            int64_t p = o[i] * st[i] + t[i] * dil[i] - lo[i];
            inside = inside && p >= 0 && p < s[i];
            pos = pos * s[i] + p;
            kpos = kpos * w[i] + t[i];
        }
        for (int64_t ci = 0; ci < cin; ci++) {
            double xv = inside ? x[pos * cin + ci] : (maxplus ? -INFINITY : 0.0);
            double kv = k[(kpos * cin + ci) * cout + co];
            acc = maxplus ? fmax(acc, xv + kv) : acc + xv * kv;
        }
    }
    return acc;
}

/* The direct window form (with none, one and two batch dims) and the merged form (3-D with a
 * batch) against a direct loop, on ref and cpu, with stride, dilation and SAME padding. */
static void test_conv_direct_loop(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    static const struct {
        int nb, d;
        int64_t batch[2], s[3], w[3], st[3], dil[3], cin, cout;
    } cases[] = {
        {0, 2, {0}, {7, 6}, {3, 2}, {2, 1}, {1, 2}, 3, 2},
        {2, 1, {2, 3}, {9}, {3}, {2}, {2}, 2, 3},
        {1, 2, {2}, {5, 6}, {3, 3}, {1, 1}, {1, 1}, 2, 2},
        {1, 3, {2}, {5, 4, 6}, {3, 2, 3}, {1, 2, 1}, {2, 1, 1}, 2, 2},
        {0, 3, {0}, {5, 4, 6}, {3, 2, 3}, {1, 2, 1}, {1, 1, 2}, 2, 3},
    };
    unsigned seed = 41;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int nb = cases[c].nb, d = cases[c].d;
        int64_t xs[NX_MAX_DIMS], ks[NX_MAX_DIMS], batch = 1;
        for (int i = 0; i < nb; i++)
            xs[i] = cases[c].batch[i], batch *= xs[i];
        for (int i = 0; i < d; i++)
            xs[nb + i] = cases[c].s[i], ks[i] = cases[c].w[i];
        xs[nb + d] = cases[c].cin;
        ks[d] = cases[c].cin, ks[d + 1] = cases[c].cout;
        nx_tensor *x = rand_tensor(ctx, NX_DTYPE_F64, nb + d + 1, xs, &seed, -2, 2);
        nx_tensor *k = rand_tensor(ctx, NX_DTYPE_F64, d + 2, ks, &seed, -2, 2);
        nx_semiring_conv_opts o = {.padding = NX_CONV_SAME};
        int64_t out[3], lo[3], per_b = cases[c].cout;
        for (int i = 0; i < d; i++) {
            o.stride[i] = cases[c].st[i], o.dilation[i] = cases[c].dil[i];
            out[i] = (cases[c].s[i] + cases[c].st[i] - 1) / cases[c].st[i];
            int64_t eff = (cases[c].w[i] - 1) * cases[c].dil[i] + 1;
            int64_t total = (out[i] - 1) * cases[c].st[i] + eff - cases[c].s[i];
            lo[i] = (total > 0 ? total : 0) / 2;
            per_b *= out[i];
        }
        for (int alg = 0; alg < 2; alg++) {
            const nx_semiring *sr =
                nx_semiring_builtin(alg ? NX_SEMIRING_TROPICAL_MAX_PLUS : NX_SEMIRING_REAL);
            for (int bk = 0; bk < 2; bk++) {
                o.backend = bk ? NX_BACKEND_CPU : NX_BACKEND_REF;
                nx_tensor *y = NULL;
                if (nx_semiring_conv(ctx, sr, x, k, &o, &y) != NX_OK)
                    fail_msg("conv case %zu: %s", c, nx_ctx_last_error(ctx));
                assert_int_equal(nx_tensor_ndim(y), nb + d + 1);
                assert_int_equal(nx_tensor_numel(y), batch * per_b);
                const double *yv = nx_tensor_data(y), *xv = nx_tensor_data(x);
                int64_t sp = 1;
                for (int i = 0; i < d; i++)
                    sp *= cases[c].s[i];
                for (int64_t b = 0; b < batch; b++)
                    for (int64_t e = 0; e < per_b; e++) {
                        int64_t oi[3], r = e / cases[c].cout;
                        for (int i = d - 1; i >= 0; i--)
                            oi[i] = r % out[i], r /= out[i];
                        double want = direct_conv_at(
                            xv + b * sp * cases[c].cin, nx_tensor_data(k), d, cases[c].s,
                            cases[c].w, cases[c].st, cases[c].dil, lo, cases[c].cin,
                            cases[c].cout, oi, e % cases[c].cout, alg);
                        double got = yv[b * per_b + e];
                        if (!nx_test_close(got, want, 1e-12, 1e-12))
                            fail_msg("conv case %zu (%s, %s): y[%lld] is %.17g, the loop gives "
                                     "%.17g",
                                     c, alg ? "max-plus" : "real", nx_backend_name(o.backend),
                                     (long long)(b * per_b + e), got, want);
                    }
                nx_tensor_free(y);
            }
        }
        nx_tensor_free(x), nx_tensor_free(k);
    }
    nx_ctx_free(ctx);
}

/* ---- BOOLEAN on bool -------------------------------------------------------------------------*/

static nx_tensor *rand_tensor(nx_ctx *ctx, nx_dtype dt, int nd, const int64_t *shape,
                              unsigned *seed, double lo, double hi)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, dt, nd, shape, &t), NX_OK);
    for (int64_t i = 0; i < nx_tensor_numel(t); i++) {
        *seed = *seed * 1103515245u + 12345u;
        double u = lo + (hi - lo) * ((*seed >> 8) & 0xffff) / 65536.0;
        if (dt == NX_DTYPE_BOOL)
            ((uint8_t *)nx_tensor_data(t))[i] = u < 0.05; /* sparse: both results occur */
        else if (dt == NX_DTYPE_F32)
            ((float *)nx_tensor_data(t))[i] = (float)u;
        else
            ((double *)nx_tensor_data(t))[i] = u;
    }
    return t;
}

/* bool operands give a bool result, C[b, i, j] = OR_k A[b, i, k] AND B[k, j] (a direct loop here),
 * equal to the f32 0/1 form; the batch broadcasts, an empty k is false, and conv pads with false. */
static void test_boolean_bool(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    const nx_semiring *sr = nx_semiring_builtin(NX_SEMIRING_BOOLEAN);
    unsigned seed = 3;
    int64_t sa[3] = {2, 7, 70}, sb[2] = {70, 9};
    nx_tensor *a = rand_tensor(ctx, NX_DTYPE_BOOL, 3, sa, &seed, 0, 1);
    nx_tensor *b = rand_tensor(ctx, NX_DTYPE_BOOL, 2, sb, &seed, 0, 1);
    nx_tensor *af = NULL, *bf = NULL, *cf = NULL;
    assert_int_equal(nx_tensor_cast(a, NX_DTYPE_F32, &af), NX_OK);
    assert_int_equal(nx_tensor_cast(b, NX_DTYPE_F32, &bf), NX_OK);
    const uint8_t *av = nx_tensor_data(a), *bv = nx_tensor_data(b);
    static const nx_backend backends[] = {NX_BACKEND_REF, NX_BACKEND_CPU};
    for (int bk = 0; bk < 2; bk++) {
        nx_semiring_opts o = {.backend = backends[bk]};
        nx_tensor *c = NULL;
        if (nx_semiring_matmul(ctx, sr, a, b, &o, &c) != NX_OK)
            fail_msg("%s: %s", nx_backend_name(backends[bk]), nx_ctx_last_error(ctx));
        assert_int_equal(nx_tensor_dtype(c), NX_DTYPE_BOOL);
        assert_int_equal(nx_tensor_numel(c), 2 * 7 * 9);
        assert_int_equal(nx_semiring_matmul(ctx, sr, af, bf, &o, &cf), NX_OK);
        const uint8_t *cv = nx_tensor_data(c);
        const float *fv = nx_tensor_data(cf);
        int trues = 0;
        for (int64_t n = 0; n < 2; n++)
            for (int64_t i = 0; i < 7; i++)
                for (int64_t j = 0; j < 9; j++) {
                    int want = 0;
                    for (int64_t k = 0; k < 70; k++)
                        want |= av[(n * 7 + i) * 70 + k] && bv[k * 9 + j];
                    int64_t at = (n * 7 + i) * 9 + j;
                    if (cv[at] != want || fv[at] != (float)want)
                        fail_msg("%s: C[%lld] is %d (f32 form %g), expected %d",
                                 nx_backend_name(backends[bk]), (long long)at, cv[at], fv[at],
                                 want);
                    trues += want;
                }
        assert_true(trues > 0 && trues < 2 * 7 * 9); /* both values occur */
        nx_tensor_free(c), nx_tensor_free(cf);
    }
    /* empty k: false */
    int64_t se[2] = {2, 0}, sf[2] = {0, 3};
    nx_tensor *e1 = NULL, *e2 = NULL, *c = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_BOOL, 2, se, &e1), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_BOOL, 2, sf, &e2), NX_OK);
    assert_int_equal(nx_semiring_matmul(ctx, sr, e1, e2, &REF, &c), NX_OK);
    for (int i = 0; i < 6; i++)
        assert_int_equal(((uint8_t *)nx_tensor_data(c))[i], 0);
    nx_tensor_free(c);
    /* conv on bool, SAME: a dilation by a 3-tap cross-correlation, padded with false */
    int64_t xs[2] = {6, 1}, ks[3] = {3, 1, 1};
    nx_tensor *x = NULL, *k = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_BOOL, 2, xs, &x), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_BOOL, 3, ks, &k), NX_OK);
    uint8_t *xv = nx_tensor_data(x), *kv = nx_tensor_data(k);
    xv[0] = 1, xv[4] = 1;        /* x = 1 0 0 0 1 0 */
    kv[0] = 1, kv[1] = 1;        /* y[o] = x[o-1] | x[o] */
    static const uint8_t want[6] = {1, 1, 0, 0, 1, 1};
    for (int bk = 0; bk < 2; bk++) {
        nx_semiring_conv_opts co = {.backend = backends[bk]};
        assert_int_equal(nx_semiring_conv(ctx, sr, x, k, &co, &c), NX_OK);
        assert_int_equal(nx_tensor_dtype(c), NX_DTYPE_BOOL);
        assert_memory_equal(nx_tensor_data(c), want, 6);
        nx_tensor_free(c);
    }
    /* bool is BOOLEAN's only: REAL refuses it, mixed dtypes are refused, and there is no gradient */
    const nx_semiring *real = nx_semiring_builtin(NX_SEMIRING_REAL);
    assert_int_equal(nx_semiring_matmul(ctx, real, a, b, &REF, &c), NX_ERR_DTYPE);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "is bool; expected f32 or f64"));
    assert_int_equal(nx_semiring_matmul(ctx, sr, a, bf, &REF, &c), NX_ERR_DTYPE);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "expected one dtype"));
    nx_tensor *ai = NULL;
    assert_int_equal(nx_tensor_cast(a, NX_DTYPE_I32, &ai), NX_OK);
    assert_int_equal(nx_semiring_matmul(ctx, sr, ai, ai, &REF, &c), NX_ERR_DTYPE);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "is i32; expected f32, f64 or bool"));
    nx_tensor *da = (nx_tensor *)1;
    assert_int_equal(nx_semiring_matmul_vjp(ctx, sr, a, b, a, &REF, &da, NULL),
                     NX_ERR_UNSUPPORTED);
    assert_null(da);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "'boolean' is forward-only"));
    nx_tensor_free(a), nx_tensor_free(b), nx_tensor_free(af), nx_tensor_free(bf);
    nx_tensor_free(e1), nx_tensor_free(e2), nx_tensor_free(x), nx_tensor_free(k);
    nx_tensor_free(ai);
    nx_ctx_free(ctx);
}

/* ---- reproducible mode -----------------------------------------------------------------------*/

static void expect_bits(const char *what, const nx_tensor *got, const nx_tensor *want)
{
    size_t bytes = (size_t)nx_tensor_numel(want) * nx_dtype_size(nx_tensor_dtype(want));
    assert_int_equal(nx_tensor_numel(got), nx_tensor_numel(want));
    if (memcmp(nx_tensor_data(got), nx_tensor_data(want), bytes) != 0)
        fail_msg("%s: the cpu result is not bitwise the interpreter's", what);
}

/* In reproducible mode the max and min algebras (TROPICAL_*, BOOLEAN, pairwise MAX/MIN) on the
 * CPU backend equal the reference interpreter bit for bit: a max or min of exactly computed a+b
 * is exact whatever the fold order, and the fold runs in ascending k anyway. REAL and LOG round
 * at every step, so they agree within the registry tolerance (the descriptors' tolerances (once golden/tolerance.tsv):
 * semiring_matmul f32 1e-5, f64 1e-12). Shapes with k = 203 and odd extents reach the vector
 * and remainder paths. */
static void test_reproducible(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    assert_int_equal(nx_ctx_reproducible_push(ctx, true), NX_OK);
    unsigned seed = 23;
    int64_t sa[3] = {3, 37, 203}, sb[3] = {1, 203, 41};
    static const nx_dtype dts[] = {NX_DTYPE_F32, NX_DTYPE_F64};
    static const nx_semiring_kind kinds[] = {
        NX_SEMIRING_TROPICAL_MAX_PLUS, NX_SEMIRING_TROPICAL_MIN_PLUS, NX_SEMIRING_BOOLEAN,
        NX_SEMIRING_REAL, NX_SEMIRING_LOG};
    nx_semiring_opts cpu = {.backend = NX_BACKEND_CPU};
    for (int d = 0; d < 2; d++) {
        nx_tensor *a = rand_tensor(ctx, dts[d], 3, sa, &seed, -4, 4);
        nx_tensor *b = rand_tensor(ctx, dts[d], 3, sb, &seed, -4, 4);
        for (size_t s = 0; s < sizeof kinds / sizeof kinds[0]; s++) {
            const nx_semiring *sr = nx_semiring_builtin(kinds[s]);
            nx_tensor *c1 = NULL, *c2 = NULL;
            assert_int_equal(nx_semiring_matmul(ctx, sr, a, b, &cpu, &c1), NX_OK);
            assert_int_equal(nx_semiring_matmul(ctx, sr, a, b, &REF, &c2), NX_OK);
            nx_semiring_info info;
            nx_semiring_get_info(sr, &info);
            if (info.props & NX_SEMIRING_IDEMPOTENT) {
                expect_bits(info.name, c1, c2);
            } else {
                double tol = dts[d] == NX_DTYPE_F32 ? 1e-5 : 1e-12;
                for (int64_t i = 0; i < nx_tensor_numel(c2); i++)
                    if (!nx_test_close(at(c1, i), at(c2, i), tol, tol))
                        fail_msg("%s %s: element %lld is %.17g on cpu, %.17g on ref", info.name,
                                 nx_dtype_name(dts[d]), (long long)i, at(c1, i), at(c2, i));
            }
            nx_tensor_free(c1), nx_tensor_free(c2);
        }
        /* max-plus conv and pairwise min/max */
        int64_t xs[4] = {1, 9, 11, 3}, ks[4] = {3, 3, 3, 2};
        nx_tensor *x = rand_tensor(ctx, dts[d], 4, xs, &seed, -2, 2);
        nx_tensor *k = rand_tensor(ctx, dts[d], 4, ks, &seed, -2, 2);
        nx_tensor *c1 = NULL, *c2 = NULL;
        const nx_semiring *mp = nx_semiring_builtin(NX_SEMIRING_TROPICAL_MAX_PLUS);
        nx_semiring_conv_opts co = {.backend = NX_BACKEND_CPU};
        assert_int_equal(nx_semiring_conv(ctx, mp, x, k, &co, &c1), NX_OK);
        co.backend = NX_BACKEND_REF;
        assert_int_equal(nx_semiring_conv(ctx, mp, x, k, &co, &c2), NX_OK);
        expect_bits("max-plus conv", c1, c2);
        nx_tensor_free(c1), nx_tensor_free(c2);
        int64_t px[2] = {57, 3}, py[2] = {131, 3};
        nx_tensor *pxt = rand_tensor(ctx, dts[d], 2, px, &seed, -1, 1);
        nx_tensor *pyt = rand_tensor(ctx, dts[d], 2, py, &seed, -1, 1);
        for (int r = NX_PAIRWISE_MAX; r <= NX_PAIRWISE_MIN; r++) {
            nx_pairwise_opts po = {.backend = NX_BACKEND_CPU, .formula = "sqdist(x, y) - dot(x, y)",
                                   .reduction = (nx_pairwise_reduction)r};
            assert_int_equal(nx_pairwise_reduce(ctx, pxt, pyt, NULL, NULL, &po, &c1, NULL), NX_OK);
            po.backend = NX_BACKEND_REF;
            assert_int_equal(nx_pairwise_reduce(ctx, pxt, pyt, NULL, NULL, &po, &c2, NULL), NX_OK);
            expect_bits(r == NX_PAIRWISE_MAX ? "pairwise max" : "pairwise min", c1, c2);
            nx_tensor_free(c1), nx_tensor_free(c2);
        }
        nx_tensor_free(a), nx_tensor_free(b), nx_tensor_free(x), nx_tensor_free(k);
        nx_tensor_free(pxt), nx_tensor_free(pyt);
    }
    assert_int_equal(nx_ctx_reproducible_pop(ctx), NX_OK);
    nx_ctx_free(ctx);
}

/* ---- more bad input: each case has an error naming it or a defined result --------------------*/

static void test_bad_input_pairwise(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    double v[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    nx_tensor *x = mat(ctx, 4, 3, v), *y = mat(ctx, 2, 3, v), *y2 = mat(ctx, 3, 4, v);
    nx_tensor *out = NULL, *g[4];
    nx_pairwise_opts po = {.backend = NX_BACKEND_REF, .formula = "-sqdist(x, y) / p0",
                           .reduction = NX_PAIRWISE_SUM};
    /* inner dims (D) disagree */
    assert_int_equal(nx_pairwise_reduce(ctx, x, y2, NULL, NULL, &po, &out, NULL), NX_ERR_SHAPE);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "one D"));
    /* non-finite parameters: inf as well as nan, forward and gradient */
    nx_tensor *p = mat(ctx, 1, 1, (double[]){INFINITY}), *p1 = NULL;
    assert_int_equal(nx_tensor_reshape(p, 1, (int64_t[]){1}, &p1), NX_OK);
    assert_int_equal(nx_pairwise_reduce(ctx, x, y, NULL, p1, &po, &out, NULL),
                     NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "parameter p0 is inf; parameters must be"));
    nx_tensor *dout = mat(ctx, 4, 1, v);
    assert_int_equal(nx_pairwise_reduce_vjp(ctx, x, y, NULL, p1, &po, dout, g),
                     NX_ERR_INVALID_ARG);
    assert_null(g[0]);
    /* a cotangent of the wrong shape */
    ((double *)nx_tensor_data(p1))[0] = 2.0;
    nx_tensor *bad = mat(ctx, 3, 1, v);
    assert_int_equal(nx_pairwise_reduce_vjp(ctx, x, y, NULL, p1, &po, bad, g), NX_ERR_SHAPE);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "expected the result's shape [4, 1]"));
    /* empty y (N = 0): sum 0, max -inf, min +inf, logsumexp -inf; gradients all zero */
    nx_tensor *ye = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 2, (int64_t[]){0, 3}, &ye), NX_OK);
    static const double want[4] = {0.0, -INFINITY, INFINITY, -INFINITY};
    for (int r = 0; r < 4; r++) {
        po.reduction = (nx_pairwise_reduction)r;
        for (int bk = 0; bk < 2; bk++) {
            po.backend = bk ? NX_BACKEND_CPU : NX_BACKEND_REF;
            if (nx_pairwise_reduce(ctx, x, ye, NULL, p1, &po, &out, NULL) != NX_OK)
                fail_msg("empty y, reduction %d: %s", r, nx_ctx_last_error(ctx));
            for (int i = 0; i < 4; i++)
                assert_true(((double *)nx_tensor_data(out))[i] == want[r]);
            nx_tensor_free(out);
            if (nx_pairwise_reduce_vjp(ctx, x, ye, NULL, p1, &po, dout, g) != NX_OK)
                fail_msg("empty y, reduction %d, vjp: %s", r, nx_ctx_last_error(ctx));
            assert_int_equal(nx_tensor_numel(g[0]), 12);
            assert_int_equal(nx_tensor_numel(g[1]), 0);
            for (int i = 0; i < 12; i++)
                assert_true(((double *)nx_tensor_data(g[0]))[i] == 0.0);
            assert_true(((double *)nx_tensor_data(g[3]))[0] == 0.0);
            for (int k = 0; k < 4; k++)
                nx_tensor_free(g[k]);
        }
    }
    /* empty x (M = 0): an empty result */
    nx_tensor *xe = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 2, (int64_t[]){0, 3}, &xe), NX_OK);
    po.reduction = NX_PAIRWISE_SUM;
    assert_int_equal(nx_pairwise_reduce(ctx, xe, y, NULL, p1, &po, &out, NULL), NX_OK);
    assert_int_equal(nx_tensor_numel(out), 0);
    nx_tensor_free(out);
    /* D = 0: every squared distance is the empty sum 0, so the Gaussian sum is sum_j b_j */
    nx_tensor *x0 = NULL, *y0 = NULL, *b2 = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 2, (int64_t[]){3, 0}, &x0), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 2, (int64_t[]){2, 0}, &y0), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 1, (int64_t[]){2}, &b2), NX_OK);
    ((double *)nx_tensor_data(b2))[0] = 0.25, ((double *)nx_tensor_data(b2))[1] = 0.5;
    nx_pairwise_opts g0 = {.backend = NX_BACKEND_CPU, .formula = "exp(-sqdist(x, y)) * b"};
    assert_int_equal(nx_pairwise_reduce(ctx, x0, y0, b2, NULL, &g0, &out, NULL), NX_OK);
    for (int i = 0; i < 3; i++)
        assert_true(((double *)nx_tensor_data(out))[i] == 0.75);
    nx_tensor_free(out);
    /* matmul with M = 0 or N = 0: an empty result of the right shape */
    nx_tensor *m0 = NULL, *n0 = NULL, *k3 = mat(ctx, 3, 3, v);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 2, (int64_t[]){0, 3}, &m0), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 2, (int64_t[]){3, 0}, &n0), NX_OK);
    const nx_semiring *lg = nx_semiring_builtin(NX_SEMIRING_LOG);
    nx_semiring_opts cpu = {.backend = NX_BACKEND_CPU};
    assert_int_equal(nx_semiring_matmul(ctx, lg, m0, k3, &cpu, &out), NX_OK);
    assert_int_equal(nx_tensor_shape(out)[0], 0);
    assert_int_equal(nx_tensor_shape(out)[1], 3);
    nx_tensor_free(out);
    assert_int_equal(nx_semiring_matmul(ctx, lg, k3, n0, &cpu, &out), NX_OK);
    assert_int_equal(nx_tensor_shape(out)[0], 3);
    assert_int_equal(nx_tensor_shape(out)[1], 0);
    nx_tensor_free(out);
    nx_tensor_free(x0), nx_tensor_free(y0), nx_tensor_free(b2), nx_tensor_free(m0);
    nx_tensor_free(n0), nx_tensor_free(k3);
    /* b of the wrong length, and a gradient of an index reduction */
    nx_tensor *b3 = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 1, (int64_t[]){3}, &b3), NX_OK);
    po.formula = "b";
    assert_int_equal(nx_pairwise_reduce(ctx, x, y, b3, NULL, &po, &out, NULL), NX_ERR_SHAPE);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "b must be [N] or [N, E] with N = 2"));
    /* matmul: a 1-d operand; conv: negative padding */
    nx_tensor *v1 = NULL;
    assert_int_equal(nx_tensor_reshape(p1, 1, (int64_t[]){1}, &v1), NX_OK);
    const nx_semiring *real = nx_semiring_builtin(NX_SEMIRING_REAL);
    assert_int_equal(nx_semiring_matmul(ctx, real, v1, x, &REF, &out), NX_ERR_SHAPE);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "both need >= 2"));
    nx_tensor *cx = NULL, *ck = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 2, (int64_t[]){5, 1}, &cx), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 3, (int64_t[]){3, 1, 1}, &ck), NX_OK);
    nx_semiring_conv_opts co = {.backend = NX_BACKEND_REF, .padding = NX_CONV_EXPLICIT,
                                .pad_lo = {-1}};
    assert_int_equal(nx_semiring_conv(ctx, real, cx, ck, &co, &out), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "expected >= 0"));
    co = (nx_semiring_conv_opts){.backend = NX_BACKEND_REF, .stride = {-2}};
    assert_int_equal(nx_semiring_conv(ctx, real, cx, ck, &co, &out), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "expected >= 1"));
    nx_tensor_free(x), nx_tensor_free(y), nx_tensor_free(y2), nx_tensor_free(p);
    nx_tensor_free(p1), nx_tensor_free(dout), nx_tensor_free(bad), nx_tensor_free(ye);
    nx_tensor_free(xe), nx_tensor_free(b3), nx_tensor_free(v1), nx_tensor_free(cx);
    nx_tensor_free(ck);
    nx_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_golden),
        cmocka_unit_test(test_conv_golden),
        cmocka_unit_test(test_pairwise_golden),
        cmocka_unit_test(test_pairwise_builder),
        cmocka_unit_test(test_formula_equals_builtin),
        cmocka_unit_test(test_formula_custom_plus),
        cmocka_unit_test(test_define_from_ir),
        cmocka_unit_test(test_define_custom_monoid),
        cmocka_unit_test(test_define_rejections),
        cmocka_unit_test(test_formula_errors),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_empty_k),
        cmocka_unit_test(test_log_magnitudes),
        cmocka_unit_test(test_cache_hit),
        cmocka_unit_test(test_alloc_sweeps),
        cmocka_unit_test(test_boolean_bool),
        cmocka_unit_test(test_conv_direct_loop),
        cmocka_unit_test(test_reproducible),
        cmocka_unit_test(test_bad_input_pairwise),
        cmocka_unit_test(test_degenerate_times),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
