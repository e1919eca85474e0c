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

/* ---- SectionedELL gradients ---------------------------------------------------------------------
 * A CSR matrix with degrees 1..8 (rows with no entry too, under REAL) as a SectionedELL and as a
 * flat ELL padded to the largest degree: the VJPs must agree (values' cotangents compared in CSR
 * order), and finite differences over the CSR values (the SectionedELL rebuilt each time) and the
 * dense operand confirm them. */

#define SN 10 /* rows */
#define SC 6  /* columns of A */
#define SJ 2  /* columns of B */

static const int64_t SDEG[SN] = {1, 3, 8, 2, 1, 5, 4, 2, 7, 3};
static const int64_t SDEG0[SN] = {1, 3, 8, 0, 1, 5, 0, 2, 7, 3}; /* with empty rows */

typedef struct sec_problem {
    const nx_semiring *sr;
    double identity;
    bool rmatvec, batch; /* batch: the dense operand and the result are [2, rows, cols] */
    const int64_t *deg;
    nx_tensor *off, *idx, *val, *x, *w;
    nx_semiring_opts o;
} sec_problem;

static void sec_setup(nx_ctx *ctx, sec_problem *p, unsigned seed)
{
    int64_t n1 = SN + 1, nnz = 0;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_I64, 1, &n1, &p->off), NX_OK);
    int64_t *o = nx_tensor_data(p->off);
    o[0] = 0;
    for (int i = 0; i < SN; i++)
        o[i + 1] = o[i] + p->deg[i];
    nnz = o[SN];
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_I32, 1, &nnz, &p->idx), NX_OK);
    for (int64_t e = 0; e < nnz; e++)
        ((int32_t *)nx_tensor_data(p->idx))[e] = (int32_t)((e * 5 + e / 3) % SC);
    p->val = randn(ctx, 1, &nnz, &seed);
    int64_t xs[3] = {2, p->rmatvec ? SN : SC, SJ}, ws[3] = {2, p->rmatvec ? SC : SN, SJ};
    int nd = p->batch ? 3 : 2;
    p->x = randn(ctx, nd, xs + 3 - nd, &seed);
    p->w = randn(ctx, nd, ws + 3 - nd, &seed);
}

static void sec_free(sec_problem *p)
{
    nx_tensor_free(p->off), nx_tensor_free(p->idx), nx_tensor_free(p->val);
    nx_tensor_free(p->x), nx_tensor_free(p->w);
}

static nx_sectioned_ell sec_build(nx_ctx *ctx, const sec_problem *p)
{
    nx_sectioned_ell s;
    if (nx_sectioned_ell_from_ragged(ctx, p->off, p->idx, p->val, SC, p->identity, &s) != NX_OK)
        fail_msg("from_ragged: %s", nx_ctx_last_error(ctx));
    return s;
}

/* The same matrix as one ELL padded with identity to the largest degree. */
static nx_ell sec_flat(nx_ctx *ctx, const sec_problem *p, int64_t *kmax)
{
    *kmax = 1;
    for (int i = 0; i < SN; i++)
        *kmax = p->deg[i] > *kmax ? p->deg[i] : *kmax;
    double v[SN * 8];
    int64_t ix[SN * 8];
    const int64_t *o = nx_tensor_data(p->off);
    for (int i = 0; i < SN; i++)
        for (int64_t q = 0; q < *kmax; q++) {
            bool real = q < p->deg[i];
            v[i * *kmax + q] = real ? ((double *)nx_tensor_data(p->val))[o[i] + q] : p->identity;
            ix[i * *kmax + q] = real ? ((int32_t *)nx_tensor_data(p->idx))[o[i] + q] : 0;
        }
    return st_ell(ctx, SN, *kmax, SC, v, ix, p->identity);
}

static double sec_loss(nx_ctx *ctx, const sec_problem *p)
{
    nx_sectioned_ell s = sec_build(ctx, p);
    nx_tensor *y = NULL;
    nx_status st = p->rmatvec ? nx_sectioned_ell_rmatvec(ctx, p->sr, &s, p->x, &p->o, &y)
                              : nx_sectioned_ell_matmul(ctx, p->sr, &s, p->x, &p->o, &y);
    if (st != NX_OK)
        fail_msg("sectioned forward: %s", nx_ctx_last_error(ctx));
    double l = 0;
    for (int64_t i = 0; i < nx_tensor_numel(y); i++)
        l += st_at(y, i) * st_at(p->w, i);
    nx_tensor_free(y);
    nx_sectioned_ell_free(&s);
    return l;
}

static void sec_vjps(nx_ctx *ctx, const sec_problem *p, bool sectioned, nx_tensor **g)
{
    nx_status st;
    if (sectioned) {
        nx_sectioned_ell s = sec_build(ctx, p);
        st = p->rmatvec
                 ? nx_sectioned_ell_rmatvec_vjp(ctx, p->sr, &s, p->x, p->w, &p->o, &g[0], &g[1])
                 : nx_sectioned_ell_matmul_vjp(ctx, p->sr, &s, p->x, p->w, &p->o, &g[0], &g[1]);
        nx_sectioned_ell_free(&s);
    } else {
        int64_t kmax;
        nx_ell a = sec_flat(ctx, p, &kmax);
        st = p->rmatvec
                 ? nx_semiring_ell_rmatvec_vjp(ctx, p->sr, &a, p->x, p->w, &p->o, &g[0], &g[1])
                 : nx_semiring_ell_matmul_vjp(ctx, p->sr, &a, p->x, p->w, &p->o, &g[0], &g[1]);
        nx_ell_free(&a);
    }
    if (st != NX_OK)
        fail_msg("%s vjp: %s", sectioned ? "sectioned" : "flat", nx_ctx_last_error(ctx));
}

static void sec_check_batch(const char *name, const nx_semiring *sr, double identity, bool rmatvec,
                            const int64_t *deg, bool batch)
{
    nx_ctx *ctx = st_ctx();
    sec_problem p = {.sr = sr,
                     .identity = identity,
                     .rmatvec = rmatvec,
                     .batch = batch,
                     .deg = deg,
                     .o = {.backend = st_backend()}};
    sec_setup(ctx, &p, 23);
    nx_tensor *gs[2] = {NULL, NULL}, *gf[2] = {NULL, NULL};
    sec_vjps(ctx, &p, true, gs);
    sec_vjps(ctx, &p, false, gf);
    /* Forward both ways first (batched operands included). */
    {
        nx_sectioned_ell sa = sec_build(ctx, &p);
        int64_t kmax;
        nx_ell fa = sec_flat(ctx, &p, &kmax);
        nx_tensor *ys = NULL, *yf = NULL;
        nx_status s1 = rmatvec ? nx_sectioned_ell_rmatvec(ctx, sr, &sa, p.x, &p.o, &ys)
                               : nx_sectioned_ell_matmul(ctx, sr, &sa, p.x, &p.o, &ys);
        nx_status s2 = rmatvec ? nx_semiring_ell_rmatvec(ctx, sr, &fa, p.x, &p.o, &yf)
                               : nx_semiring_ell_matmul(ctx, sr, &fa, p.x, &p.o, &yf);
        assert_int_equal(s1, NX_OK), assert_int_equal(s2, NX_OK);
        st_expect_close(name, p.o.backend, ys, yf, NULL);
        nx_tensor_free(ys), nx_tensor_free(yf);
        nx_ell_free(&fa);
        nx_sectioned_ell_free(&sa);
    }
    /* Both ways: dvalues in CSR order against the flat [m, k_max] slots, then the operand. */
    int64_t kmax = nx_tensor_shape(gf[0])[1];
    const int64_t *o = nx_tensor_data(p.off);
    assert_int_equal(nx_tensor_numel(gs[0]), o[SN]);
    for (int i = 0; i < SN; i++)
        for (int64_t q = 0; q < deg[i]; q++)
            if (!nx_test_close(st_at(gs[0], o[i] + q), st_at(gf[0], i * kmax + q), 1e-12, 1e-12))
                fail_msg("%s: dvalues of row %d slot %lld: sectioned %.17g, flat %.17g", name, i,
                         (long long)q, st_at(gs[0], o[i] + q), st_at(gf[0], i * kmax + q));
    st_expect_close(name, p.o.backend, gs[1], gf[1], NULL);
    /* Finite differences over the CSR values and the dense operand. */
    nx_tensor *vars[2] = {p.val, p.x};
    for (int k = 0; k < 2; k++) {
        double *v = nx_tensor_data(vars[k]);
        for (int64_t i = 0; i < nx_tensor_numel(vars[k]); i++) {
            double keep = v[i];
            v[i] = keep + H;
            double lp = sec_loss(ctx, &p);
            v[i] = keep - H;
            double lm = sec_loss(ctx, &p);
            v[i] = keep;
            double fd = (lp - lm) / (2 * H);
            if (!nx_test_close(st_at(gs[k], i), fd, 1e-6, 1e-7))
                fail_msg("%s: d%s[%lld] is %.12g, finite differences give %.12g", name,
                         k ? "x" : "values", (long long)i, st_at(gs[k], i), fd);
        }
    }
    for (int k = 0; k < 2; k++)
        nx_tensor_free(gs[k]), nx_tensor_free(gf[k]);
    sec_free(&p);
    nx_ctx_free(ctx);
}

static void sec_check(const char *name, const nx_semiring *sr, double identity, bool rmatvec,
                      const int64_t *deg)
{
    sec_check_batch(name, sr, identity, rmatvec, deg, false);
}

static void test_sectioned_vjp(void **state)
{
    (void)state;
    sec_check("sectioned real", nx_semiring_builtin(NX_SEMIRING_REAL), 0.0, false, SDEG0);
    sec_check("sectioned log", nx_semiring_builtin(NX_SEMIRING_LOG), -INFINITY, false, SDEG);
    sec_check("sectioned max-plus", nx_semiring_builtin(NX_SEMIRING_TROPICAL_MAX_PLUS), -INFINITY,
              false, SDEG);
    sec_check("sectioned min-plus", nx_semiring_builtin(NX_SEMIRING_TROPICAL_MIN_PLUS), INFINITY,
              false, SDEG);
    sec_check("sectioned rmatvec", nx_semiring_builtin(NX_SEMIRING_REAL), 0.0, true, SDEG0);
    nx_ctx *ctx = st_ctx();
    /* A user algebra whose -inf pads annihilate under its (x) (max-times has none: -inf * b is
     * +inf for b < 0, and its adjoint 0 * -inf is NaN). */
    nx_semiring *mt = NULL;
    assert_int_equal(
        nx_semiring_parse(ctx, "usermaxplus", "plus = max(a, b); times = a + b; zero = -inf", &mt),
        NX_OK);
    sec_check("sectioned user max-plus", mt, -INFINITY, false, SDEG);
    /* A batch over the dense operand's leading dim: the value cotangents sum over it. */
    sec_check_batch("sectioned batched real", nx_semiring_builtin(NX_SEMIRING_REAL), 0.0, false,
                    SDEG0, true);
    sec_check_batch("sectioned batched log", nx_semiring_builtin(NX_SEMIRING_LOG), -INFINITY, false,
                    SDEG, true);
    sec_check_batch("sectioned batched rmatvec", nx_semiring_builtin(NX_SEMIRING_REAL), 0.0, true,
                    SDEG0, true);
    nx_semiring_free(mt);
    nx_ctx_free(ctx);
}

static void test_sectioned_vjp_errors(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    sec_problem p = {
        .sr = nx_semiring_builtin(NX_SEMIRING_REAL), .deg = SDEG, .o = {.backend = st_backend()}};
    sec_setup(ctx, &p, 5);
    nx_sectioned_ell s = sec_build(ctx, &p);
    nx_tensor *dv = NULL, *db = NULL;
    /* The cotangent must have the result's shape. */
    assert_int_equal(nx_sectioned_ell_matmul_vjp(ctx, p.sr, &s, p.x, p.x, &p.o, &dv, &db),
                     NX_ERR_SHAPE);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "the cotangent must be"));
    assert_null(dv), assert_null(db);
    assert_int_equal(nx_sectioned_ell_matmul_vjp(ctx, p.sr, &s, p.x, NULL, &p.o, &dv, &db),
                     NX_ERR_INVALID_ARG);
    /* Forward-only algebras and rmatvec outside REAL are refused. */
    assert_int_equal(nx_sectioned_ell_matmul_vjp(ctx, nx_semiring_builtin(NX_SEMIRING_BOOLEAN), &s,
                                                 p.x, p.w, &p.o, &dv, &db),
                     NX_ERR_UNSUPPORTED);
    assert_int_equal(nx_sectioned_ell_rmatvec_vjp(ctx, nx_semiring_builtin(NX_SEMIRING_LOG), &s,
                                                  p.w, p.x, &p.o, &dv, &db),
                     NX_ERR_UNSUPPORTED);
    /* One output may be left out. */
    assert_int_equal(nx_sectioned_ell_matmul_vjp(ctx, p.sr, &s, p.x, p.w, &p.o, NULL, &db), NX_OK);
    assert_non_null(db);
    nx_tensor_free(db);
    nx_sectioned_ell_free(&s);
    sec_free(&p);
    nx_ctx_free(ctx);
}

/* Every allocation of a SectionedELL VJP fails cleanly in turn. */
static nx_status sec_sweep_body(nx_ctx *ctx, void *user)
{
    (void)user;
    sec_problem p = {.sr = nx_semiring_builtin(NX_SEMIRING_LOG),
                     .identity = -INFINITY,
                     .deg = SDEG,
                     .o = {.backend = NX_BACKEND_REF}};
    nx_status st = NX_OK;
    int64_t n1 = SN + 1;
    if ((st = nx_tensor_new(ctx, NX_DTYPE_I64, 1, &n1, &p.off)) != NX_OK)
        return st;
    int64_t *o = nx_tensor_data(p.off);
    for (int i = 0; i < SN; i++)
        o[i + 1] = o[i] + SDEG[i];
    int64_t nnz = o[SN], xs[2] = {SC, SJ}, ws[2] = {SN, SJ};
    nx_sectioned_ell s = {0};
    nx_tensor *dv = NULL, *db = NULL;
    st = nx_tensor_new(ctx, NX_DTYPE_I32, 1, &nnz, &p.idx);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F64, 1, &nnz, &p.val);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F64, 2, xs, &p.x);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F64, 2, ws, &p.w);
    if (st == NX_OK)
        st = nx_sectioned_ell_from_ragged(ctx, p.off, p.idx, p.val, SC, -INFINITY, &s);
    if (st == NX_OK)
        st = nx_sectioned_ell_matmul_vjp(ctx, p.sr, &s, p.x, p.w, &p.o, &dv, &db);
    if (st == NX_OK && (!dv || !db))
        st = NX_ERR_INVALID_ARG;
    nx_tensor_free(dv), nx_tensor_free(db);
    nx_sectioned_ell_free(&s);
    sec_free(&p);
    return st;
}

static void test_sectioned_vjp_alloc(void **state)
{
    (void)state;
    assert_true(nx_test_alloc_sweep(sec_sweep_body, NULL, 20000) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_fd),
        cmocka_unit_test(test_rmatvec_fd),
        cmocka_unit_test(test_softmax_fd),
        cmocka_unit_test(test_edge_fd),
        cmocka_unit_test(test_forward_only),
        cmocka_unit_test(test_sectioned_vjp),
        cmocka_unit_test(test_sectioned_vjp_errors),
        cmocka_unit_test(test_sectioned_vjp_alloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
