/* Semiring gradients against central finite differences in float64: L = sum(W * f(A, B)) for
 * matmul and conv under every differentiable algebra and a user semiring, the EUCLIDEAN guard at
 * C = 0, and the forward-only refusals. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nitrix-ops.h"
#include "testutil.h"

#define H 1e-6

static const nx_semiring_opts REF = {.backend = NX_BACKEND_REF};

static nx_tensor *randn(nx_ctx *ctx, int nd, const int64_t *shape, unsigned *seed)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, nd, shape, &t), NX_OK);
    double *v = nx_tensor_data(t);
    for (int64_t i = 0; i < nx_tensor_numel(t); i++) {
        /* Box-Muller from a fixed LCG: reproducible, and ties have probability zero. */
        *seed = *seed * 1103515245u + 12345u;
        double u1 = ((*seed >> 8) + 1.0) / 16777217.0;
        *seed = *seed * 1103515245u + 12345u;
        double u2 = ((*seed >> 8) + 1.0) / 16777217.0;
        v[i] = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
    }
    return t;
}

typedef struct problem {
    const nx_semiring *sr;
    const nx_semiring_conv_opts *conv; /* NULL: matmul */
    nx_tensor *a, *b, *w;
} problem;

static double loss(nx_ctx *ctx, const problem *p)
{
    nx_tensor *y = NULL;
    nx_status st = p->conv ? nx_semiring_conv(ctx, p->sr, p->a, p->b, p->conv, &y)
                           : nx_semiring_matmul(ctx, p->sr, p->a, p->b, &REF, &y);
    if (st != NX_OK)
        fail_msg("forward: %s", nx_ctx_last_error(ctx));
    const double *yv = nx_tensor_data(y), *wv = nx_tensor_data(p->w);
    double l = 0;
    for (int64_t i = 0; i < nx_tensor_numel(y); i++)
        l += yv[i] * wv[i];
    nx_tensor_free(y);
    return l;
}

static void fd_check(nx_ctx *ctx, const char *name, problem *p)
{
    nx_tensor *g[2] = {NULL, NULL};
    nx_status st = p->conv
                       ? nx_semiring_conv_vjp(ctx, p->sr, p->a, p->b, p->w, p->conv, &g[0], &g[1])
                       : nx_semiring_matmul_vjp(ctx, p->sr, p->a, p->b, p->w, &REF, &g[0], &g[1]);
    if (st != NX_OK)
        fail_msg("%s: vjp: %s", name, nx_ctx_last_error(ctx));
    nx_tensor *ops[2] = {p->a, p->b};
    for (int k = 0; k < 2; k++) {
        double *v = nx_tensor_data(ops[k]);
        const double *gv = nx_tensor_data(g[k]);
        assert_int_equal(nx_tensor_numel(g[k]), nx_tensor_numel(ops[k]));
        for (int64_t i = 0; i < nx_tensor_numel(ops[k]); i++) {
            double keep = v[i];
            v[i] = keep + H;
            double lp = loss(ctx, p);
            v[i] = keep - H;
            double lm = loss(ctx, p);
            v[i] = keep;
            double fd = (lp - lm) / (2 * H);
            if (!nx_test_close(gv[i], fd, 1e-6, 1e-7))
                fail_msg("%s: d%s[%lld] is %.12g, finite differences give %.12g", name,
                         k ? "B" : "A", (long long)i, gv[i], fd);
        }
    }
    nx_tensor_free(g[0]), nx_tensor_free(g[1]);
}

static void test_matmul_fd(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    unsigned seed = 7;
    int64_t sa[3] = {2, 2, 3}, sb[3] = {1, 3, 2}, sc[3] = {2, 2, 2};
    static const nx_semiring_kind kinds[] = {NX_SEMIRING_REAL, NX_SEMIRING_LOG,
                                             NX_SEMIRING_TROPICAL_MAX_PLUS,
                                             NX_SEMIRING_TROPICAL_MIN_PLUS, NX_SEMIRING_EUCLIDEAN};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        problem p = {.sr = nx_semiring_builtin(kinds[i])};
        p.a = randn(ctx, 3, sa, &seed), p.b = randn(ctx, 3, sb, &seed);
        p.w = randn(ctx, 3, sc, &seed);
        nx_semiring_info info;
        nx_semiring_get_info(p.sr, &info);
        fd_check(ctx, info.name, &p);
        nx_tensor_free(p.a), nx_tensor_free(p.b), nx_tensor_free(p.w);
    }
    /* A user semiring whose (+) is logsumexp differentiates through its (x). */
    nx_semiring *user = NULL;
    assert_int_equal(nx_semiring_parse(ctx, "u",
                                       "plus = logaddexp(a, b); times = a * b - tanh(b);"
                                       " zero = -inf",
                                       &user),
                     NX_OK);
    problem p = {.sr = user};
    p.a = randn(ctx, 3, sa, &seed), p.b = randn(ctx, 3, sb, &seed), p.w = randn(ctx, 3, sc, &seed);
    fd_check(ctx, "user logaddexp", &p);
    nx_tensor_free(p.a), nx_tensor_free(p.b), nx_tensor_free(p.w);
    nx_semiring_free(user);
    nx_ctx_free(ctx);
}

static void test_conv_fd(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    unsigned seed = 11;
    int64_t sx[4] = {1, 5, 4, 2}, sk[4] = {3, 2, 2, 2}, sy[4] = {1, 3, 4, 2};
    nx_semiring_conv_opts o = {.backend = NX_BACKEND_REF, .stride = {2, 1}, .dilation = {1, 2}};
    static const nx_semiring_kind kinds[] = {NX_SEMIRING_REAL, NX_SEMIRING_LOG,
                                             NX_SEMIRING_TROPICAL_MAX_PLUS};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        problem p = {.sr = nx_semiring_builtin(kinds[i]), .conv = &o};
        p.a = randn(ctx, 4, sx, &seed), p.b = randn(ctx, 4, sk, &seed);
        p.w = randn(ctx, 4, sy, &seed);
        fd_check(ctx, "conv", &p);
        nx_tensor_free(p.a), nx_tensor_free(p.b), nx_tensor_free(p.w);
    }
    nx_ctx_free(ctx);
}

/* C[0,0] = 0 when row 0 of A equals column 0 of B: sqrt has no derivative there, so the
 * gradient is defined as 0 through it; every value stays finite. */
static void test_euclidean_guard(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t s[2] = {2, 2};
    nx_tensor *a = NULL, *b = NULL, *w = NULL, *da = NULL, *db = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 2, s, &a), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 2, s, &b), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 2, s, &w), NX_OK);
    double *av = nx_tensor_data(a), *bv = nx_tensor_data(b), *wv = nx_tensor_data(w);
    av[0] = 1, av[1] = 2, av[2] = 0, av[3] = 4; /* A row 0 = (1, 2) */
    bv[0] = 1, bv[1] = 3, bv[2] = 2, bv[3] = 5; /* B col 0 = (1, 2) */
    wv[0] = 1;                                  /* only C[0,0] in the loss */
    const nx_semiring *sr = nx_semiring_builtin(NX_SEMIRING_EUCLIDEAN);
    assert_int_equal(nx_semiring_matmul_vjp(ctx, sr, a, b, w, &REF, &da, &db), NX_OK);
    const double *g1 = nx_tensor_data(da), *g2 = nx_tensor_data(db);
    for (int i = 0; i < 4; i++) {
        assert_true(g1[i] == 0.0);
        assert_true(g2[i] == 0.0);
    }
    nx_tensor_free(a), nx_tensor_free(b), nx_tensor_free(w), nx_tensor_free(da);
    nx_tensor_free(db);
    nx_ctx_free(ctx);
}

static void test_forward_only(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t s[2] = {2, 2};
    nx_tensor *a = NULL, *da = (nx_tensor *)1;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 2, s, &a), NX_OK);
    const nx_semiring *boolean = nx_semiring_builtin(NX_SEMIRING_BOOLEAN);
    assert_int_equal(nx_semiring_matmul_vjp(ctx, boolean, a, a, a, &REF, &da, NULL),
                     NX_ERR_UNSUPPORTED);
    assert_null(da);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "'boolean' is forward-only"));
    nx_semiring *custom = NULL;
    assert_int_equal(
        nx_semiring_parse(ctx, "prodlike", "plus = a + b + a*b; times = a*b; zero = 0", &custom),
        NX_OK);
    assert_int_equal(nx_semiring_matmul_vjp(ctx, custom, a, a, a, &REF, &da, NULL),
                     NX_ERR_UNSUPPORTED);
    assert_string_equal(nx_ctx_last_error(ctx),
                        "nx_semiring_matmul_vjp: semiring 'prodlike' is forward-only: its (+) is "
                        "a custom monoid, and only semirings whose (+) is sum, max, min or "
                        "logsumexp are differentiable");
    nx_semiring_free(custom);
    nx_tensor_free(a);
    nx_ctx_free(ctx);
}

static double pw_loss(nx_ctx *ctx, nx_tensor *const *t, const nx_pairwise_opts *o,
                      const nx_tensor *w)
{
    nx_tensor *out = NULL;
    if (nx_pairwise_reduce(ctx, t[0], t[1], t[2], t[3], o, &out, NULL) != NX_OK)
        fail_msg("pairwise: %s", nx_ctx_last_error(ctx));
    const double *ov = nx_tensor_data(out), *wv = nx_tensor_data(w);
    double l = 0;
    for (int64_t i = 0; i < nx_tensor_numel(out); i++)
        l += ov[i] * wv[i];
    nx_tensor_free(out);
    return l;
}

/* Gradients with respect to x, y, b and the parameter p0, for sum, logsumexp and min. */
static void test_pairwise_fd(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    unsigned seed = 5;
    int64_t sx[2] = {4, 3}, sy[2] = {5, 3}, sb = 5, sp = 1, so[2] = {4, 1};
    static const struct {
        const char *f;
        nx_pairwise_reduction r;
    } cases[] = {{"exp(-sqdist(x, y) / p0) * b", NX_PAIRWISE_SUM},
                 {"-sqdist(x, y) / p0 + b", NX_PAIRWISE_LOGSUMEXP},
                 {"sqdist(x, y) * p0 - b", NX_PAIRWISE_MIN}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        nx_tensor *t[4] = {randn(ctx, 2, sx, &seed), randn(ctx, 2, sy, &seed),
                           randn(ctx, 1, &sb, &seed), randn(ctx, 1, &sp, &seed)};
        double *pv = nx_tensor_data(t[3]);
        pv[0] = 0.5 + fabs(pv[0]); /* a bandwidth away from 0 */
        nx_tensor *w = randn(ctx, 2, so, &seed), *g[4] = {NULL};
        nx_pairwise_opts o = {
            .backend = NX_BACKEND_REF, .formula = cases[c].f, .reduction = cases[c].r};
        if (nx_pairwise_reduce_vjp(ctx, t[0], t[1], t[2], t[3], &o, w, g) != NX_OK)
            fail_msg("%s: vjp: %s", cases[c].f, nx_ctx_last_error(ctx));
        for (int k = 0; k < 4; k++) {
            double *v = nx_tensor_data(t[k]);
            const double *gv = nx_tensor_data(g[k]);
            assert_int_equal(nx_tensor_numel(g[k]), nx_tensor_numel(t[k]));
            for (int64_t i = 0; i < nx_tensor_numel(t[k]); i++) {
                double keep = v[i];
                v[i] = keep + H;
                double lp = pw_loss(ctx, t, &o, w);
                v[i] = keep - H;
                double lm = pw_loss(ctx, t, &o, w);
                v[i] = keep;
                double fd = (lp - lm) / (2 * H);
                if (!nx_test_close(gv[i], fd, 1e-6, 1e-7))
                    fail_msg("%s: gradient %d[%lld] is %.12g, finite differences give %.12g",
                             cases[c].f, k, (long long)i, gv[i], fd);
            }
        }
        for (int k = 0; k < 4; k++)
            nx_tensor_free(g[k]), nx_tensor_free(t[k]);
        nx_tensor_free(w);
    }
    nx_pairwise_opts o = {.formula = "sqdist(x, y)", .reduction = NX_PAIRWISE_ARGMIN};
    nx_tensor *g[4];
    assert_int_equal(nx_pairwise_reduce_vjp(ctx, NULL, NULL, NULL, NULL, &o, NULL, g),
                     NX_ERR_UNSUPPORTED);
    nx_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_fd),    cmocka_unit_test(test_conv_fd),
        cmocka_unit_test(test_pairwise_fd),  cmocka_unit_test(test_euclidean_guard),
        cmocka_unit_test(test_forward_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
