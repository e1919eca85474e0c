/* ELL gradients against central finite differences in float64: L = sum(W * f(values, B)) for the
 * ELL matmul under every differentiable algebra (and a user semiring), rmatvec, and row softmax
 * through nx_graph_vjp; the forward-only refusals. Runs on the backend under test. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sparse-test.h"

#define H 1e-6

static void fill_random(nx_tensor *t, unsigned *seed)
{
    double *v = nx_tensor_data(t);
    for (int64_t i = 0; i < nx_tensor_numel(t); i++) {
        /* Box-Muller from a fixed LCG: reproducible, and ties have probability zero. */
        *seed = *seed * 1103515245u + 12345u;
        double u1 = ((*seed >> 8) + 1.0) / 16777217.0;
        *seed = *seed * 1103515245u + 12345u;
        double u2 = ((*seed >> 8) + 1.0) / 16777217.0;
        v[i] = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
    }
}

static nx_tensor *randn(nx_ctx *ctx, int nd, const int64_t *shape, unsigned *seed)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, nd, shape, &t), NX_OK);
    fill_random(t, seed);
    return t;
}

typedef struct problem {
    const nx_semiring *sr;
    bool rmatvec;
    nx_ell a;
    nx_tensor *x, *w;
    nx_semiring_opts o;
} problem;

static double loss(nx_ctx *ctx, const problem *p)
{
    nx_tensor *y = NULL;
    nx_status st = p->rmatvec ? nx_semiring_ell_rmatvec(ctx, p->sr, &p->a, p->x, &p->o, &y)
                              : nx_semiring_ell_matmul(ctx, p->sr, &p->a, p->x, &p->o, &y);
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
    nx_status st =
        p->rmatvec ? nx_semiring_ell_rmatvec_vjp(ctx, p->sr, &p->a, p->x, p->w, &p->o, &g[0], &g[1])
                   : nx_semiring_ell_matmul_vjp(ctx, p->sr, &p->a, p->x, p->w, &p->o, &g[0], &g[1]);
    if (st != NX_OK)
        fail_msg("%s: vjp: %s", name, nx_ctx_last_error(ctx));
    nx_tensor *ops[2] = {p->a.values, p->x};
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
                fail_msg("%s (%s): d%s[%lld] is %.12g, finite differences give %.12g", name,
                         nx_backend_name(p->o.backend), k ? "B" : "values", (long long)i, gv[i],
                         fd);
        }
    }
    nx_tensor_free(g[0]), nx_tensor_free(g[1]);
}

/* A 5 x 3 ELL over 4 columns with a repeated column in row 1 (the scatter adjoint must add). */
static const int64_t IDX[15] = {0, 2, 3, 1, 1, 0, 3, 2, 1, 0, 0, 0, 2, 3, 0};

static void matmul_fd(const char *name, const nx_semiring *sr, bool batch)
{
    nx_ctx *ctx = st_ctx();
    unsigned seed = 7;
    int64_t vs[2] = {5, 3}, bs[3] = {2, 4, 2}, ws[3] = {2, 5, 2};
    problem p = {.sr = sr, .o = {.backend = st_backend()}};
    p.a.values = randn(ctx, 2, vs, &seed);
    p.a.indices = st_index(ctx, 5, 3, IDX, NX_DTYPE_I32);
    p.a.n_cols = 4;
    p.a.identity = NAN; /* no slot is a pad: every slot is differentiated */
    p.x = randn(ctx, batch ? 3 : 2, batch ? bs : bs + 1, &seed);
    p.w = randn(ctx, batch ? 3 : 2, batch ? ws : ws + 1, &seed);
    fd_check(ctx, name, &p);
    nx_ell_free(&p.a);
    nx_tensor_free(p.x), nx_tensor_free(p.w);
    nx_ctx_free(ctx);
}

static void test_matmul_fd(void **state)
{
    (void)state;
    static const char *names[] = {"real", "log", "max-plus", "min-plus", "boolean", "euclidean"};
    for (int k = 0; k < NX_SEMIRING_USER; k++) {
        if (k == NX_SEMIRING_BOOLEAN)
            continue;
        matmul_fd(names[k], nx_semiring_builtin(k), k == NX_SEMIRING_REAL || k == NX_SEMIRING_LOG);
    }
    nx_ctx *ctx = st_ctx();
    nx_semiring *mt = NULL;
    assert_int_equal(
        nx_semiring_parse(ctx, "maxtimes", "plus = max(a, b); times = a * b; zero = -inf", &mt),
        NX_OK);
    matmul_fd("user max-times", mt, false);
    nx_semiring_free(mt);
    nx_ctx_free(ctx);
}

static void test_rmatvec_fd(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    unsigned seed = 11;
    int64_t vs[2] = {5, 3}, xs[3] = {2, 5, 2}, ws[3] = {2, 4, 2};
    problem p = {.sr = nx_semiring_builtin(NX_SEMIRING_REAL),
                 .rmatvec = true,
                 .o = {.backend = st_backend()}};
    p.a.values = randn(ctx, 2, vs, &seed);
    p.a.indices = st_index(ctx, 5, 3, IDX, NX_DTYPE_I64);
    p.a.n_cols = 4;
    p.a.identity = NAN;
    p.x = randn(ctx, 3, xs, &seed);
    p.w = randn(ctx, 3, ws, &seed);
    fd_check(ctx, "rmatvec", &p);
    nx_ell_free(&p.a);
    nx_tensor_free(p.x), nx_tensor_free(p.w);
    nx_ctx_free(ctx);
}

/* Row softmax inside a graph: d/dscores of sum(W * softmax) by nx_graph_vjp against FD, with a
 * pad slot and an all-pad row (both get zero gradient). */
static void softmax_eval(nx_ctx *ctx, const double *s, const double *w, double *loss_out,
                         double *grad)
{
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    int64_t sh[2] = {3, 3};
    bool padv[9] = {false, true, false, true, true, true, false, false, false};
    nx_node x = nx_parameter(g, "s", NX_DTYPE_F64, 2, sh);
    nx_node pad = nx_constant(g, NX_DTYPE_BOOL, 2, sh, padv);
    nx_node wn = nx_constant(g, NX_DTYPE_F64, 2, sh, w);
    nx_node y = nx_ell_row_softmax_node(g, x, pad);
    int axes[2] = {0, 1};
    nx_node l = nx_reduce(g, nx_mul(g, y, wn), 2, axes, NX_MONOID_SUM, false);
    nx_node dx = NX_NONE;
    assert_int_equal(nx_graph_grad(g, l, 1, &x, &dx), NX_OK);
    nx_node outs[2] = {l, dx};
    nx_compile_opts co = {.backend = st_backend(), .n_outputs = 2, .outputs = outs};
    nx_program *p = NULL;
    if (nx_graph_compile(g, &co, &p) != NX_OK)
        fail_msg("%s", nx_ctx_last_error(ctx));
    nx_tensor *in = st_mat(ctx, 3, 3, s), *res[2] = {NULL, NULL};
    assert_int_equal(nx_program_run(p, (const nx_tensor *const[]){in}, res), NX_OK);
    *loss_out = st_at(res[0], 0);
    if (grad)
        memcpy(grad, nx_tensor_data(res[1]), 9 * sizeof(double));
    nx_tensor_free(in), nx_tensor_free(res[0]), nx_tensor_free(res[1]);
    nx_program_free(p);
    nx_graph_free(g);
}

static void test_softmax_fd(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    double s[9] = {0.3, 50, -1.2, 2, 3, 4, 0.1, 0.7, -0.4}, w[9] = {1, 2, -1, 3, 1, 1, 0.5, -2, 1};
    double l, grad[9];
    softmax_eval(ctx, s, w, &l, grad);
    for (int i = 0; i < 9; i++) {
        double keep = s[i], lp, lm;
        s[i] = keep + H;
        softmax_eval(ctx, s, w, &lp, NULL);
        s[i] = keep - H;
        softmax_eval(ctx, s, w, &lm, NULL);
        s[i] = keep;
        double fd = (lp - lm) / (2 * H);
        if (!nx_test_close(grad[i], fd, 1e-6, 1e-7) || !isfinite(grad[i]))
            fail_msg("softmax: dscores[%d] is %.12g, finite differences give %.12g", i, grad[i],
                     fd);
    }
    nx_ctx_free(ctx);
}

static void test_forward_only(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    nx_ell a = st_ell(ctx, 1, 1, 1, (double[]){1}, (int64_t[]){0}, 0.0);
    nx_tensor *b = st_mat(ctx, 1, 1, (double[]){2}), *dv = NULL, *db = NULL;
    nx_semiring_opts o = {.backend = st_backend()};
    assert_int_equal(nx_semiring_ell_matmul_vjp(ctx, nx_semiring_builtin(NX_SEMIRING_BOOLEAN), &a,
                                                b, b, &o, &dv, &db),
                     NX_ERR_UNSUPPORTED);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "forward-only"));
    assert_null(dv);
    nx_semiring *po = NULL;
    assert_int_equal(
        nx_semiring_parse(ctx, "probor", "plus = a + b - a * b; times = a * b; zero = 0", &po),
        NX_OK);
    assert_int_equal(nx_semiring_ell_matmul_vjp(ctx, po, &a, b, b, &o, &dv, &db),
                     NX_ERR_UNSUPPORTED);
    /* A cotangent of the wrong shape. */
    nx_tensor *bad = st_mat(ctx, 1, 2, (double[]){1, 1});
    assert_int_equal(nx_semiring_ell_matmul_vjp(ctx, nx_semiring_builtin(NX_SEMIRING_REAL), &a, b,
                                                bad, &o, &dv, &db),
                     NX_ERR_SHAPE);
    assert_null(dv), assert_null(db);
    nx_semiring_free(po);
    nx_tensor_free(b), nx_tensor_free(bad);
    nx_ell_free(&a);
    nx_ctx_free(ctx);
}

/* Edge aggregation inside a graph: d/dh and d/dvalues of sum(W * aggregate) by nx_graph_grad
 * against FD, under sum and max (F = w * hj - hi * hi, so both the gathered and the own rows carry
 * gradient). */
static nx_node edge_fn(nx_graph *g, nx_node hi, nx_node hj, nx_node w, nx_node ij, nx_node e,
                       void *user)
{
    (void)ij, (void)e, (void)user;
    return nx_sub(g, nx_mul(g, w, hj), nx_mul(g, hi, hi));
}

typedef struct edge_problem {
    nx_semiring_kind kind;
    double h[10], v[15], w[10]; /* h [5, 2], values [5, 3], W [5, 2] */
} edge_problem;

static double edge_eval(nx_ctx *ctx, const edge_problem *p, double *dh, double *dv)
{
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    int64_t hs[2] = {5, 2}, vs[2] = {5, 3};
    nx_node h = nx_constant(g, NX_DTYPE_F64, 2, hs, p->h);
    nx_node v = nx_constant(g, NX_DTYPE_F64, 2, vs, p->v);
    nx_node idx = nx_constant(g, NX_DTYPE_I64, 2, vs, IDX);
    nx_node y = nx_ell_edge_aggregate_node(g, nx_semiring_builtin(p->kind), v, idx, h, NX_NONE,
                                           edge_fn, NULL);
    int axes[2] = {0, 1};
    nx_node l = nx_reduce(g, nx_mul(g, y, nx_constant(g, NX_DTYPE_F64, 2, hs, p->w)), 2, axes,
                          NX_MONOID_SUM, false);
    nx_node wrt[2] = {h, v}, grads[2] = {NX_NONE, NX_NONE};
    if (dh)
        assert_int_equal(nx_graph_grad(g, l, 2, wrt, grads), NX_OK);
    nx_node outs[3] = {l, grads[0], grads[1]};
    nx_compile_opts co = {.backend = st_backend(), .n_outputs = dh ? 3 : 1, .outputs = outs};
    nx_program *prog = NULL;
    if (nx_graph_compile(g, &co, &prog) != NX_OK)
        fail_msg("%s", nx_ctx_last_error(ctx));
    nx_tensor *res[3] = {NULL, NULL, NULL};
    assert_int_equal(nx_program_run(prog, NULL, res), NX_OK);
    double loss = st_at(res[0], 0);
    if (dh) {
        memcpy(dh, nx_tensor_data(res[1]), 10 * sizeof(double));
        memcpy(dv, nx_tensor_data(res[2]), 15 * sizeof(double));
    }
    for (int i = 0; i < 3; i++)
        nx_tensor_free(res[i]);
    nx_program_free(prog);
    nx_graph_free(g);
    return loss;
}

static void test_edge_fd(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    const nx_semiring_kind kinds[2] = {NX_SEMIRING_REAL, NX_SEMIRING_TROPICAL_MAX_PLUS};
    for (int k = 0; k < 2; k++) {
        edge_problem p = {.kind = kinds[k]};
        unsigned seed = 19 + (unsigned)k;
        int64_t n10 = 10, n15 = 15;
        nx_tensor *t = randn(ctx, 1, &n10, &seed), *u = randn(ctx, 1, &n15, &seed);
        nx_tensor *w = randn(ctx, 1, &n10, &seed);
        memcpy(p.h, nx_tensor_data(t), sizeof p.h);
        memcpy(p.v, nx_tensor_data(u), sizeof p.v);
        memcpy(p.w, nx_tensor_data(w), sizeof p.w);
        nx_tensor_free(t), nx_tensor_free(u), nx_tensor_free(w);
        double dh[10], dv[15];
        edge_eval(ctx, &p, dh, dv);
        double *vars[2] = {p.h, p.v}, *grads[2] = {dh, dv};
        int counts[2] = {10, 15};
        for (int q = 0; q < 2; q++)
            for (int i = 0; i < counts[q]; i++) {
                double keep = vars[q][i];
                vars[q][i] = keep + H;
                double lp = edge_eval(ctx, &p, NULL, NULL);
                vars[q][i] = keep - H;
                double lm = edge_eval(ctx, &p, NULL, NULL);
                vars[q][i] = keep;
                double fd = (lp - lm) / (2 * H);
                if (!nx_test_close(grads[q][i], fd, 1e-6, 1e-7))
                    fail_msg("edge %s: d%s[%d] is %.12g, finite differences give %.12g",
                             k ? "max" : "sum", q ? "values" : "h", i, grads[q][i], fd);
            }
    }
    nx_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_fd),    cmocka_unit_test(test_rmatvec_fd),
        cmocka_unit_test(test_softmax_fd),   cmocka_unit_test(test_edge_fd),
        cmocka_unit_test(test_forward_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
