/* Semiring gradients against central finite differences in float64: L = sum(W * f(A, B)) for
 * matmul and conv under every differentiable algebra and a user semiring, the EUCLIDEAN guard at
 * C = 0, and the forward-only refusals. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nitrix-ops.h"
#include "ops/semiring/semiring.h"
#include "program/program.h"
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

/* F as a C builder: a Gaussian with bandwidth p[0], weights b, spelt with broadcasting ops only. */
static nx_node gauss_builder(nx_graph *g, nx_node xi, nx_node yj, nx_node bj, nx_node p, void *u)
{
    (void)u;
    nx_node d = nx_sub(g, xi, yj);
    nx_node d2 = nx_mul(g, d, d);
    int64_t s[NX_MAX_DIMS];
    nx_node_shape(g, d2, s);
    nx_node acc = NX_NONE;
    for (int64_t k = 0; k < s[2]; k++) {
        nx_node t = nx_slice(g, d2, (int64_t[]){0, 0, k}, (int64_t[]){s[0], s[1], k + 1}, NULL);
        acc = acc ? nx_add(g, acc, t) : t;
    }
    nx_node bw = nx_reshape(g, nx_slice(g, p, (int64_t[]){0}, (int64_t[]){1}, NULL), 3,
                            (int64_t[]){1, 1, 1});
    return nx_mul(g, nx_exp(g, nx_div(g, nx_neg(g, acc), bw)), bj);
}

/* Every reduction, vector-valued F (b [N, 2]), two parameters and the C builder, against finite
 * differences of the forward pass, on the reference interpreter and on the CPU backend. */
static void test_pairwise_fd_backends(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    unsigned seed = 19;
    int64_t sx[2] = {5, 3}, sy[2] = {6, 3}, sb[2] = {6, 2}, sp = 2, so[2] = {5, 2};
    static const struct {
        const char *f;
        nx_pairwise_reduction r;
    } cases[] = {{"exp(-sqdist(x, y) / p0) * b * p1", NX_PAIRWISE_SUM},
                 {"-sqdist(x, y) / p0 + b * p1", NX_PAIRWISE_LOGSUMEXP},
                 {"sqdist(x, y) * p0 - b + p1 * dot(x, y)", NX_PAIRWISE_MIN},
                 {"tanh(dot(x, y) * p1) - b * p0", NX_PAIRWISE_MAX},
                 {NULL, NX_PAIRWISE_SUM}};
    static const nx_backend backends[] = {NX_BACKEND_REF, NX_BACKEND_CPU};
    for (size_t bk = 0; bk < 2; bk++) {
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            nx_tensor *t[4] = {randn(ctx, 2, sx, &seed), randn(ctx, 2, sy, &seed),
                               randn(ctx, 2, sb, &seed), randn(ctx, 1, &sp, &seed)};
            double *pv = nx_tensor_data(t[3]);
            pv[0] = 0.5 + fabs(pv[0]);
            nx_tensor *w = randn(ctx, 2, so, &seed), *g[4] = {NULL};
            nx_pairwise_opts o = {.backend = backends[bk], .formula = cases[c].f,
                                  .reduction = cases[c].r};
            if (!cases[c].f)
                o.expr = gauss_builder, o.expr_key = "test gauss_builder";
            const char *name = cases[c].f ? cases[c].f : "builder";
            if (nx_pairwise_reduce_vjp(ctx, t[0], t[1], t[2], t[3], &o, w, g) != NX_OK)
                fail_msg("%s (%s): vjp: %s", name, nx_backend_name(backends[bk]),
                         nx_ctx_last_error(ctx));
            for (int k = 0; k < 4; k++) {
                double *v = nx_tensor_data(t[k]);
                const double *gv = nx_tensor_data(g[k]);
                assert_int_equal(nx_tensor_ndim(g[k]), nx_tensor_ndim(t[k]));
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
                        fail_msg("%s (%s): gradient %d[%lld] is %.12g, finite differences give "
                                 "%.12g",
                                 name, nx_backend_name(backends[bk]), k, (long long)i, gv[i], fd);
                }
            }
            for (int k = 0; k < 4; k++)
                nx_tensor_free(g[k]), nx_tensor_free(t[k]);
            nx_tensor_free(w);
        }
    }
    nx_ctx_free(ctx);
}

/* Kernels of a plan that loop over all M x N pairs, and slots of at least M x N elements. */
static void plan_counts(const nx_kplan *p, int64_t pairs, int *kloops, int *big_slots)
{
    *kloops = *big_slots = 0;
    for (int k = 0; k < p->nkernels; k++) {
        const nx_kernel *kn = p->kernels[k];
        int64_t work = 1;
        for (int l = 0; kn->kind == NX_KERNEL_LOOP && l < kn->nloops; l++)
            work *= kn->extent[l];
        *kloops += kn->kind == NX_KERNEL_LOOP && work >= pairs;
    }
    for (int s = 0; s < p->nslots; s++) {
        int64_t n = 1;
        for (int d = 0; d < p->slots[s].ndim; d++)
            n *= p->slots[s].shape[d];
        *big_slots += n >= pairs;
    }
}

static nx_tensor *zeros(nx_ctx *ctx, int nd, const int64_t *shape)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, nd, shape, &t), NX_OK);
    return t;
}

/* The pairwise vjp is two K-loops (over j for x and the parameters, over i for y and b), plus
 * the forward pass for the reductions whose gradient needs the result, and nothing M x N is
 * stored (scalar F; docs/semiring.md says what a vector-valued F still stores). A control built the naive way (autodiff of the reduction, one cotangent per input)
 * fails the same count, so the check is not vacuous. */
static void test_pairwise_vjp_two_passes(void **state)
{
    (void)state;
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    enum { M = 300, N = 400, D = 3 };
    nx_tensor *x = zeros(ctx, 2, (int64_t[]){M, D}), *y = zeros(ctx, 2, (int64_t[]){N, D});
    nx_tensor *b = zeros(ctx, 1, (int64_t[]){N}), *p = zeros(ctx, 1, (int64_t[]){2});
    nx_tensor *dout = zeros(ctx, 2, (int64_t[]){M, 1});
    static const struct {
        const char *f;
        nx_pairwise_reduction r;
        int kloops;
    } cases[] = {{"exp(-sqdist(x, y) / p0) * b * p1", NX_PAIRWISE_SUM, 2},
                 {"-sqdist(x, y) / p0 + b * p1", NX_PAIRWISE_LOGSUMEXP, 3},
                 {"sqdist(x, y) * p0 - b + p1 * dot(x, y)", NX_PAIRWISE_MIN, 3},
                 {"norm2(x - y) * p0 - b", NX_PAIRWISE_MAX, 3}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        nx_pairwise_opts o = {.formula = cases[c].f, .reduction = cases[c].r};
        nx_graph *g = NULL;
        nx_node outs[4];
        int nout = 0;
        assert_int_equal(nx_sr_pairwise_vjp_graph(ctx, x, y, b, p, &o, dout, &g, outs, &nout),
                         NX_OK);
        assert_int_equal(nout, 4);
        nx_kplan *plan = NULL;
        assert_int_equal(nx_pass_pipeline(ctx, &g->s, nout, outs, &plan), NX_OK);
        int kloops, big;
        plan_counts(plan, (int64_t)M * N, &kloops, &big);
        print_message("%s: %d kernels, %d over all pairs, %d slots of M x N size\n", cases[c].f,
                      plan->nkernels, kloops, big);
        assert_int_equal(kloops, cases[c].kloops);
        assert_int_equal(big, 0);
        nx_kplan_free(plan);
        nx_graph_free(g);
    }
    /* Control: sum_j exp(-|x_i - y_j|^2) b_j differentiated the naive way. */
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node xn = nx_input(g, "x", NX_DTYPE_F32, 2, (int64_t[]){M, D});
    nx_node yn = nx_input(g, "y", NX_DTYPE_F32, 2, (int64_t[]){N, D});
    nx_node bn = nx_input(g, "b", NX_DTYPE_F32, 1, (int64_t[]){N});
    nx_node dn = nx_input(g, "dout", NX_DTYPE_F32, 1, (int64_t[]){M});
    nx_node d = nx_sub(g, nx_reshape(g, xn, 3, (int64_t[]){M, 1, D}),
                       nx_reshape(g, yn, 3, (int64_t[]){1, N, D}));
    nx_node d2 = nx_reduce(g, nx_mul(g, d, d), 1, (int[]){2}, NX_MONOID_SUM, false);
    nx_node f = nx_mul(g, nx_exp(g, nx_neg(g, d2)), nx_reshape(g, bn, 2, (int64_t[]){1, N}));
    nx_node out = nx_reduce(g, f, 1, (int[]){1}, NX_MONOID_SUM, false);
    nx_node wrt[3] = {xn, yn, bn}, grads[3];
    assert_int_equal(nx_graph_vjp(g, 1, &out, &dn, 3, wrt, grads), NX_OK);
    nx_kplan *plan = NULL;
    assert_int_equal(nx_pass_pipeline(ctx, &g->s, 3, grads, &plan), NX_OK);
    int kloops, big;
    plan_counts(plan, (int64_t)M * N, &kloops, &big);
    print_message("control: %d kernels, %d over all pairs, %d slots of M x N size\n",
                  plan->nkernels, kloops, big);
    assert_true(kloops > 2 || big > 0);
    nx_kplan_free(plan);
    nx_graph_free(g);
    nx_tensor_free(x), nx_tensor_free(y), nx_tensor_free(b), nx_tensor_free(p);
    nx_tensor_free(dout);
    nx_ctx_free(ctx);
}

/* LOGSUMEXP with the saved forward result: the same cotangents as without it, two K-loops in the
 * plan instead of three, and saved_out refused where it cannot serve. */
static void test_pairwise_saved_out(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    unsigned seed = 29;
    int64_t sx[2] = {6, 2}, sy[2] = {7, 2}, sb = 7, sp = 1, so[2] = {6, 1};
    nx_tensor *t[4] = {randn(ctx, 2, sx, &seed), randn(ctx, 2, sy, &seed),
                       randn(ctx, 1, &sb, &seed), randn(ctx, 1, &sp, &seed)};
    ((double *)nx_tensor_data(t[3]))[0] = 0.7;
    nx_tensor *w = randn(ctx, 2, so, &seed), *out = NULL, *g1[4] = {NULL}, *g2[4] = {NULL};
    nx_pairwise_opts o = {.backend = NX_BACKEND_CPU, .formula = "-sqdist(x, y) / p0 + b",
                          .reduction = NX_PAIRWISE_LOGSUMEXP};
    assert_int_equal(nx_pairwise_reduce(ctx, t[0], t[1], t[2], t[3], &o, &out, NULL), NX_OK);
    assert_int_equal(nx_pairwise_reduce_vjp(ctx, t[0], t[1], t[2], t[3], &o, w, g1), NX_OK);
    o.saved_out = out;
    if (nx_pairwise_reduce_vjp(ctx, t[0], t[1], t[2], t[3], &o, w, g2) != NX_OK)
        fail_msg("saved_out: %s", nx_ctx_last_error(ctx));
    for (int k = 0; k < 4; k++) {
        assert_int_equal(nx_tensor_numel(g1[k]), nx_tensor_numel(g2[k]));
        const double *a = nx_tensor_data(g1[k]), *b = nx_tensor_data(g2[k]);
        for (int64_t i = 0; i < nx_tensor_numel(g1[k]); i++)
            if (!nx_test_close(b[i], a[i], 1e-13, 1e-14))
                fail_msg("gradient %d[%lld]: %.17g with saved_out, %.17g without", k,
                         (long long)i, b[i], a[i]);
    }
    /* the plan: two K-loops */
    nx_graph *g = NULL;
    nx_node outs[4];
    int nout = 0;
    assert_int_equal(nx_sr_pairwise_vjp_graph(ctx, t[0], t[1], t[2], t[3], &o, w, &g, outs, &nout),
                     NX_OK);
    nx_kplan *plan = NULL;
    assert_int_equal(nx_pass_pipeline(ctx, &g->s, nout, outs, &plan), NX_OK);
    int kloops, big;
    plan_counts(plan, 6 * 7, &kloops, &big);
    assert_int_equal(kloops, 2);
    nx_kplan_free(plan);
    nx_graph_free(g);
    /* refusals */
    nx_tensor *gx[4];
    o.reduction = NX_PAIRWISE_MAX;
    assert_int_equal(nx_pairwise_reduce_vjp(ctx, t[0], t[1], t[2], t[3], &o, w, gx),
                     NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "saved_out is for LOGSUMEXP only"));
    o.reduction = NX_PAIRWISE_LOGSUMEXP;
    o.saved_out = t[3];
    assert_int_equal(nx_pairwise_reduce_vjp(ctx, t[0], t[1], t[2], t[3], &o, w, gx),
                     NX_ERR_SHAPE);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "saved_out must be the forward result"));
    for (int k = 0; k < 4; k++)
        nx_tensor_free(g1[k]), nx_tensor_free(g2[k]), nx_tensor_free(t[k]);
    nx_tensor_free(w), nx_tensor_free(out);
    nx_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_fd),    cmocka_unit_test(test_conv_fd),
        cmocka_unit_test(test_pairwise_fd),  cmocka_unit_test(test_euclidean_guard),
        cmocka_unit_test(test_pairwise_fd_backends), cmocka_unit_test(test_pairwise_vjp_two_passes),
        cmocka_unit_test(test_pairwise_saved_out),
        cmocka_unit_test(test_forward_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
