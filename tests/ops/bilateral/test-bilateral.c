/* The bilateral family: hand-computed and closed-form cases (weights of a 3-point line, the
 * plain neighbourhood mean at huge sigma, the cube of a 3-voxel line, a block-diagonal factor),
 * k-NN ties and self handling, finite-difference checks of the vjp in f64 (values, features,
 * sigma, L; on ref and cpu), the fragment inside a caller's graph, bad input and allocation
 * sweeps. The NumPy/scipy golden cases run in the fidelity suite (golden/bilateral). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nitrix-graph.h"
#include "nitrix-ops.h"
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
    case NX_DTYPE_I32:
        return ((const int32_t *)d)[i];
    case NX_DTYPE_BOOL:
        return ((const uint8_t *)d)[i];
    default:
        fail_msg("unexpected dtype %s", nx_dtype_name(nx_tensor_dtype(t)));
        return 0;
    }
}

static nx_tensor *make(nx_ctx *ctx, nx_dtype dt, int ndim, const int64_t *shape, const double *v)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, dt, ndim, shape, &t), NX_OK);
    for (int64_t i = 0; v && i < nx_tensor_numel(t); i++) {
        void *d = nx_tensor_data(t);
        switch (dt) {
        case NX_DTYPE_F32:
            ((float *)d)[i] = (float)v[i];
            break;
        case NX_DTYPE_F64:
            ((double *)d)[i] = v[i];
            break;
        case NX_DTYPE_I64:
            ((int64_t *)d)[i] = (int64_t)v[i];
            break;
        case NX_DTYPE_I32:
            ((int32_t *)d)[i] = (int32_t)v[i];
            break;
        default:
            ((uint8_t *)d)[i] = v[i] != 0;
        }
    }
    return t;
}

static void expect_error(nx_ctx *ctx, nx_status got, nx_status want, const char *needle)
{
    if (got != want)
        fail_msg("status %s, expected %s (message: %s)", nx_status_str(got), nx_status_str(want),
                 nx_ctx_last_error(ctx));
    if (!strstr(nx_ctx_last_error(ctx), needle))
        fail_msg("message '%s' lacks '%s'", nx_ctx_last_error(ctx), needle);
}

/* A deterministic pseudo-random value in [-1, 1). */
static double rnd(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / 9007199254740992.0 * 2 - 1;
}

/* ---- closed forms -----------------------------------------------------------------------------*/

/* Three points on a line at 0, 1, 3 with sigma 2; every point sees all three. By hand:
 * w(d) = exp(-d^2 / 8): w(1) = e^-1/8, w(2) = e^-1/2, w(3) = e^-9/8. */
static void test_hand_line(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    double fv[3] = {0, 1, 3}, vv[3] = {1, 2, 4}, sv[1] = {2};
    double iv[9] = {0, 1, 2, 0, 1, 2, 0, 1, 2};
    nx_tensor *f = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){3, 1}, fv);
    nx_tensor *v = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){3, 1}, vv);
    nx_tensor *sigma = make(ctx, NX_DTYPE_F64, 1, (int64_t[]){1}, sv);
    nx_tensor *idx = make(ctx, NX_DTYPE_I64, 2, (int64_t[]){3, 3}, iv);
    double w1 = exp(-1.0 / 8), w2 = exp(-4.0 / 8), w3 = exp(-9.0 / 8);
    double want[3] = {(1 + 2 * w1 + 4 * w3) / (1 + w1 + w3), (w1 + 2 + 4 * w2) / (w1 + 1 + w2),
                      (w3 + 2 * w2 + 4) / (w3 + w2 + 1)};
    for (int b = 0; b < 2; b++) {
        nx_bilateral_opts o = {.backend = b ? NX_BACKEND_CPU : NX_BACKEND_REF,
                               .metric = {NX_METRIC_DIAGONAL, sigma},
                               .index = idx};
        nx_tensor *out = NULL;
        assert_int_equal(nx_bilateral_gaussian(ctx, v, f, &o, &out), NX_OK);
        for (int i = 0; i < 3; i++)
            if (!nx_test_close(at(out, i), want[i], 1e-14, 1e-14))
                fail_msg("backend %d: out[%d] = %.17g; by hand %.17g", b, i, at(out, i), want[i]);
        nx_tensor_free(out);
        /* Two rounds: the same weights applied to the first round's result. */
        o.n_iters = 2;
        assert_int_equal(nx_bilateral_gaussian(ctx, v, f, &o, &out), NX_OK);
        double w2nd[3] = {(want[0] + want[1] * w1 + want[2] * w3) / (1 + w1 + w3),
                          (want[0] * w1 + want[1] + want[2] * w2) / (w1 + 1 + w2),
                          (want[0] * w3 + want[1] * w2 + want[2]) / (w3 + w2 + 1)};
        for (int i = 0; i < 3; i++)
            if (!nx_test_close(at(out, i), w2nd[i], 1e-14, 1e-14))
                fail_msg("n_iters 2: out[%d] = %.17g; by hand %.17g", i, at(out, i), w2nd[i]);
        nx_tensor_free(out);
    }
    /* The same metric as a factor L = [[1/2]], and as the Cholesky factor of M = [[1/4]]. */
    nx_tensor *m = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){1, 1}, (double[]){0.25});
    nx_tensor *l = NULL;
    assert_int_equal(nx_metric_from_spd(ctx, m, &l), NX_OK);
    assert_true(at(l, 0) == 0.5);
    nx_bilateral_opts o = {.metric = {NX_METRIC_FACTOR, l}, .index = idx};
    nx_tensor *out = NULL;
    assert_int_equal(nx_bilateral_gaussian(ctx, v, f, &o, &out), NX_OK);
    for (int i = 0; i < 3; i++)
        assert_true(nx_test_close(at(out, i), want[i], 1e-14, 1e-14));
    nx_tensor *tensors[] = {f, v, sigma, idx, m, l, out};
    for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++)
        nx_tensor_free(tensors[i]);
    ctx_done(ctx);
}

/* Huge sigma: every weight is 1 to rounding, so each row is the plain mean of its valid slots;
 * a fully masked row keeps its value. */
static void test_flat_mean_and_mask(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    double vv[8] = {1, 10, 2, 20, 3, 30, 4, 40}, fv[4] = {0, 0.1, 0.2, 0.3};
    double iv[12] = {0, 1, 2, 1, 2, 3, 3, 3, 0, 2, 1, 0};
    double mv[12] = {1, 1, 1, 1, 0, 1, 0, 0, 0, 1, 1, 0};
    nx_tensor *v = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){4, 2}, vv);
    nx_tensor *f = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){4, 1}, fv);
    nx_tensor *s = make(ctx, NX_DTYPE_F64, 1, (int64_t[]){1}, (double[]){1e9});
    nx_tensor *idx = make(ctx, NX_DTYPE_I32, 2, (int64_t[]){4, 3}, iv);
    nx_tensor *mask = make(ctx, NX_DTYPE_U8, 2, (int64_t[]){4, 3}, mv);
    nx_bilateral_opts o = {.metric = {NX_METRIC_DIAGONAL, s}, .index = idx, .mask = mask};
    nx_tensor *out = NULL;
    assert_int_equal(nx_bilateral_gaussian(ctx, v, f, &o, &out), NX_OK);
    double want[8] = {2, 20, 3, 30, 3, 30, 2.5, 25};
    for (int i = 0; i < 8; i++)
        if (!nx_test_close(at(out, i), want[i], 1e-12, 1e-12))
            fail_msg("out[%d] = %.17g; the masked mean is %g", i, at(out, i), want[i]);
    /* The same neighbourhood as an ELL whose pads (value 0 = identity) are the masked slots;
     * its other values (here 7) are structure only. */
    double ev[12];
    for (int i = 0; i < 12; i++)
        ev[i] = mv[i] ? 7 : 0;
    nx_tensor *evals = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){4, 3}, ev);
    nx_ell ell = {.values = evals, .indices = idx, .n_cols = 4, .identity = 0};
    nx_bilateral_opts eo = {.metric = {NX_METRIC_DIAGONAL, s}, .ell = &ell};
    nx_tensor *out2 = NULL;
    assert_int_equal(nx_bilateral_gaussian(ctx, v, f, &eo, &out2), NX_OK);
    for (int i = 0; i < 8; i++)
        assert_true(at(out2, i) == at(out, i));
    nx_tensor_free(out2);
    ell.n_cols = 5;
    expect_error(ctx, nx_bilateral_gaussian(ctx, v, f, &eo, &out2), NX_ERR_SHAPE, "n x n");
    ell.n_cols = 4;
    eo.index = idx;
    expect_error(ctx, nx_bilateral_gaussian(ctx, v, f, &eo, &out2), NX_ERR_INVALID_ARG, "not both");
    nx_tensor *tensors[] = {v, f, s, idx, mask, out, evals};
    for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++)
        nx_tensor_free(tensors[i]);
    ctx_done(ctx);
}

/* ---- neighbourhoods ---------------------------------------------------------------------------*/

static void test_knn_hand(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    /* Points 0 and 2 coincide; 3 is as far from 1 as 0 and 2 are. */
    double fv[5] = {0, 1, 0, 2, 5};
    nx_tensor *f = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){5, 1}, fv);
    nx_tensor *idx = NULL;
    for (int b = 0; b < 2; b++) {
        nx_knn_opts o = {.backend = b ? NX_BACKEND_CPU : NX_BACKEND_REF};
        assert_int_equal(nx_brute_force_knn(ctx, f, 3, &o, &idx), NX_OK);
        assert_int_equal(nx_tensor_dtype(idx), NX_DTYPE_I64);
        /* self first; then ties to the lower index */
        int64_t want[15] = {0, 2, 1, 1, 0, 2, 2, 0, 1, 3, 1, 0, 4, 3, 1};
        for (int i = 0; i < 15; i++)
            if (at(idx, i) != want[i])
                fail_msg("backend %d: knn[%d][%d] = %g; by hand %lld", b, i / 3, i % 3, at(idx, i),
                         (long long)want[i]);
        nx_tensor_free(idx);
        o.exclude_self = true;
        assert_int_equal(nx_brute_force_knn(ctx, f, 2, &o, &idx), NX_OK);
        int64_t noself[10] = {2, 1, 0, 2, 0, 1, 1, 0, 3, 1};
        for (int i = 0; i < 10; i++)
            if (at(idx, i) != noself[i])
                fail_msg("exclude_self: knn[%d][%d] = %g; by hand %lld", i / 2, i % 2, at(idx, i),
                         (long long)noself[i]);
        nx_tensor_free(idx);
    }
    /* A diagonal metric rescales the axes: along x the neighbours swap with y's. */
    double gv[6] = {0, 0, 1, 0, 0, 3};
    nx_tensor *g = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){3, 2}, gv);
    nx_tensor *s = make(ctx, NX_DTYPE_F64, 1, (int64_t[]){2}, (double[]){0.1, 10});
    nx_feature_metric m = {NX_METRIC_DIAGONAL, s};
    nx_knn_opts o = {.metric = &m};
    assert_int_equal(nx_brute_force_knn(ctx, g, 3, &o, &idx), NX_OK);
    assert_true(at(idx, 0) == 0 && at(idx, 1) == 2 && at(idx, 2) == 1);
    nx_tensor_free(idx);
    /* Empty: [0, k]. */
    nx_tensor *e = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){0, 2}, NULL);
    assert_int_equal(nx_brute_force_knn(ctx, e, 2, NULL, &idx), NX_OK);
    assert_int_equal(nx_tensor_shape(idx)[0], 0);
    assert_int_equal(nx_tensor_shape(idx)[1], 2);
    nx_tensor_free(idx);
    nx_tensor *tensors[] = {f, g, s, e};
    for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++)
        nx_tensor_free(tensors[i]);
    ctx_done(ctx);
}

static void test_cube_hand(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    nx_tensor *idx = NULL, *val = NULL;
    assert_int_equal(nx_spatial_cube_neighbourhood(ctx, 1, (int64_t[]){3}, 1, &idx, &val), NX_OK);
    double want[9] = {0, 0, 1, 0, 1, 2, 1, 2, 2}, wv[9] = {0, 1, 1, 1, 1, 1, 1, 1, 0};
    for (int i = 0; i < 9; i++) {
        assert_true(at(idx, i) == want[i]);
        assert_true(at(val, i) == wv[i]);
    }
    nx_tensor_free(idx);
    nx_tensor_free(val);
    /* 2 x 2, half 1: voxel (1, 1) = 3 sees (0,0) (0,1) (0,2->1) ... clamped, centre slot 4. */
    assert_int_equal(nx_spatial_cube_neighbourhood(ctx, 2, (int64_t[]){2, 2}, 1, &idx, NULL),
                     NX_OK);
    double row3[9] = {0, 1, 1, 2, 3, 3, 2, 3, 3};
    for (int s = 0; s < 9; s++)
        assert_true(at(idx, 3 * 9 + s) == row3[s]);
    for (int v = 0; v < 4; v++)
        assert_true(at(idx, v * 9 + 4) == v);
    nx_tensor_free(idx);
    /* half 0: each voxel alone. */
    assert_int_equal(nx_spatial_cube_neighbourhood(ctx, 2, (int64_t[]){2, 3}, 0, &idx, NULL),
                     NX_OK);
    assert_int_equal(nx_tensor_shape(idx)[1], 1);
    for (int v = 0; v < 6; v++)
        assert_true(at(idx, v) == v);
    nx_tensor_free(idx);
    expect_error(ctx, nx_spatial_cube_neighbourhood(ctx, 0, (int64_t[]){2}, 1, &idx, NULL),
                 NX_ERR_INVALID_ARG, "ndim 0");
    expect_error(ctx, nx_spatial_cube_neighbourhood(ctx, 1, (int64_t[]){2}, -1, &idx, NULL),
                 NX_ERR_INVALID_ARG, "half -1");
    expect_error(ctx, nx_spatial_cube_neighbourhood(ctx, 1, (int64_t[]){-2}, 1, &idx, NULL),
                 NX_ERR_SHAPE, "negative");
    ctx_done(ctx);
}

/* ---- metrics ----------------------------------------------------------------------------------*/

static void test_metrics(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    nx_tensor *s = make(ctx, NX_DTYPE_F64, 1, (int64_t[]){2}, (double[]){2, 4});
    nx_tensor *l = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){3, 1}, (double[]){1, 2, 3});
    nx_feature_metric blocks[2] = {{NX_METRIC_DIAGONAL, s}, {NX_METRIC_FACTOR, l}};
    nx_tensor *bd = NULL;
    assert_int_equal(nx_metric_block_diagonal(ctx, 2, blocks, &bd), NX_OK);
    assert_int_equal(nx_tensor_shape(bd)[0], 5);
    assert_int_equal(nx_tensor_shape(bd)[1], 3);
    double want[15] = {0.5, 0, 0, 0, 0.25, 0, 0, 0, 1, 0, 0, 2, 0, 0, 3};
    for (int i = 0; i < 15; i++)
        assert_true(at(bd, i) == want[i]);
    nx_tensor_free(bd);
    /* Cholesky of [[4, 2], [2, 5]] = [[2, 0], [1, 2]]. */
    nx_tensor *m = make(ctx, NX_DTYPE_F32, 2, (int64_t[]){2, 2}, (double[]){4, 2, 2, 5});
    nx_tensor *c = NULL;
    assert_int_equal(nx_metric_from_spd(ctx, m, &c), NX_OK);
    assert_int_equal(nx_tensor_dtype(c), NX_DTYPE_F32);
    double wc[4] = {2, 0, 1, 2};
    for (int i = 0; i < 4; i++)
        assert_true(at(c, i) == wc[i]);
    nx_tensor_free(c);
    nx_tensor_free(m);
    /* Refused: indefinite, asymmetric, non-finite, not square. */
    m = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){2, 2}, (double[]){1, 2, 2, 1});
    expect_error(ctx, nx_metric_from_spd(ctx, m, &c), NX_ERR_INVALID_ARG, "not positive definite");
    assert_null(c);
    nx_tensor_free(m);
    m = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){2, 2}, (double[]){1, 0.5, 0, 1});
    expect_error(ctx, nx_metric_from_spd(ctx, m, &c), NX_ERR_INVALID_ARG, "not symmetric");
    nx_tensor_free(m);
    m = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){2, 2}, (double[]){1, 0, 0, NAN});
    expect_error(ctx, nx_metric_from_spd(ctx, m, &c), NX_ERR_INVALID_ARG, "finite");
    nx_tensor_free(m);
    m = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){2, 3}, NULL);
    expect_error(ctx, nx_metric_from_spd(ctx, m, &c), NX_ERR_SHAPE, "square");
    nx_tensor_free(m);
    /* Block errors: none, a non-positive sigma, mixed dtypes. */
    expect_error(ctx, nx_metric_block_diagonal(ctx, 0, blocks, &bd), NX_ERR_INVALID_ARG,
                 "at least one");
    nx_tensor *z = make(ctx, NX_DTYPE_F64, 1, (int64_t[]){2}, (double[]){1, 0});
    nx_feature_metric bad[1] = {{NX_METRIC_DIAGONAL, z}};
    expect_error(ctx, nx_metric_block_diagonal(ctx, 1, bad, &bd), NX_ERR_INVALID_ARG, "sigma > 0");
    nx_tensor *l32 = make(ctx, NX_DTYPE_F32, 2, (int64_t[]){1, 1}, (double[]){1});
    nx_feature_metric mixed[2] = {{NX_METRIC_DIAGONAL, s}, {NX_METRIC_FACTOR, l32}};
    expect_error(ctx, nx_metric_block_diagonal(ctx, 2, mixed, &bd), NX_ERR_DTYPE, "f32");
    nx_tensor *tensors[] = {s, l, z, l32};
    for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++)
        nx_tensor_free(tensors[i]);
    ctx_done(ctx);
}

/* ---- gradients --------------------------------------------------------------------------------*/

typedef struct fd_case {
    int64_t n, k, dv, df, r;
    nx_metric_kind kind;
    int n_iters;
} fd_case;

static double loss(nx_ctx *ctx, nx_tensor *v, nx_tensor *f, const nx_bilateral_opts *o,
                   const nx_tensor *dout)
{
    nx_tensor *out = NULL;
    assert_int_equal(nx_bilateral_gaussian(ctx, v, f, o, &out), NX_OK);
    double l = 0;
    for (int64_t i = 0; i < nx_tensor_numel(out); i++)
        l += at(out, i) * at(dout, i);
    nx_tensor_free(out);
    return l;
}

/* Central differences of L = <dout, bilateral(v, f, metric)> in each element of t. */
static void fd_check(nx_ctx *ctx, const char *what, nx_tensor *t, const nx_tensor *grad,
                     nx_tensor *v, nx_tensor *f, const nx_bilateral_opts *o, const nx_tensor *dout)
{
    double *x = nx_tensor_data(t), h = 1e-6;
    for (int64_t i = 0; i < nx_tensor_numel(t); i++) {
        double keep = x[i];
        x[i] = keep + h;
        double lp = loss(ctx, v, f, o, dout);
        x[i] = keep - h;
        double lm = loss(ctx, v, f, o, dout);
        x[i] = keep;
        double fd = (lp - lm) / (2 * h);
        if (!nx_test_close(at(grad, i), fd, 1e-6, 1e-7))
            fail_msg("%s [%s]: dL/d%s[%lld] = %.12g; finite differences give %.12g",
                     o->metric.kind ? "factor" : "diagonal", nx_backend_name(o->backend), what,
                     (long long)i, at(grad, i), fd);
    }
}

static void run_fd(const fd_case *c, nx_backend be)
{
    nx_ctx *ctx = ctx_new();
    uint64_t seed = 12345 + (uint64_t)c->kind;
    double buf[512];
    for (int i = 0; i < 512; i++)
        buf[i] = rnd(&seed);
    nx_tensor *v = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){c->n, c->dv}, buf);
    nx_tensor *f = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){c->n, c->df}, buf + 100);
    nx_tensor *dout = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){c->n, c->dv}, buf + 200);
    nx_tensor *p;
    if (c->kind == NX_METRIC_DIAGONAL) {
        double sv[8];
        for (int i = 0; i < c->df; i++)
            sv[i] = 0.8 + 0.3 * (buf[300 + i] + 1);
        p = make(ctx, NX_DTYPE_F64, 1, (int64_t[]){c->df}, sv);
    } else {
        p = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){c->df, c->r}, buf + 300);
    }
    double iv[256], mv[256];
    for (int64_t i = 0; i < c->n * c->k; i++) {
        iv[i] = (double)((i * 7 + i / c->k * 3) % c->n);
        mv[i] = (i % 5) != 3;
    }
    nx_tensor *idx = make(ctx, NX_DTYPE_I64, 2, (int64_t[]){c->n, c->k}, iv);
    nx_tensor *mask = make(ctx, NX_DTYPE_BOOL, 2, (int64_t[]){c->n, c->k}, mv);
    nx_bilateral_opts o = {
        .backend = be, .metric = {c->kind, p}, .index = idx, .mask = mask, .n_iters = c->n_iters};
    nx_tensor *dv = NULL, *df = NULL, *dp = NULL;
    assert_int_equal(nx_bilateral_gaussian_vjp(ctx, v, f, &o, dout, &dv, &df, &dp), NX_OK);
    fd_check(ctx, "values", v, dv, v, f, &o, dout);
    fd_check(ctx, "features", f, df, v, f, &o, dout);
    fd_check(ctx, "metric", p, dp, v, f, &o, dout);
    /* Only some cotangents asked for: the others stay NULL-safe. */
    nx_tensor *dp2 = NULL;
    assert_int_equal(nx_bilateral_gaussian_vjp(ctx, v, f, &o, dout, NULL, NULL, &dp2), NX_OK);
    for (int64_t i = 0; i < nx_tensor_numel(dp); i++)
        assert_true(at(dp2, i) == at(dp, i));
    nx_tensor *tensors[] = {v, f, dout, p, idx, mask, dv, df, dp, dp2};
    for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++)
        nx_tensor_free(tensors[i]);
    ctx_done(ctx);
}

static void test_grad_fd(void **state)
{
    (void)state;
    const fd_case cases[] = {
        {.n = 7, .k = 4, .dv = 2, .df = 3, .kind = NX_METRIC_DIAGONAL, .n_iters = 1},
        {.n = 6, .k = 3, .dv = 1, .df = 3, .r = 2, .kind = NX_METRIC_FACTOR, .n_iters = 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        run_fd(&cases[i], NX_BACKEND_REF);
        run_fd(&cases[i], NX_BACKEND_CPU);
    }
}

/* The fragment in a caller's graph, differentiated there by nx_graph_grad. Two points 1 apart
 * with sigma s, both in both rows, w = exp(-1 / (2 s^2)): out_0 = (v0 + w v1) / (1 + w), so by
 * hand d out_0 / ds = (v1 - v0) / (1 + w)^2 * w / s^3. */
static void test_node_grad(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node v = nx_input(g, "v", NX_DTYPE_F64, 2, (int64_t[]){2, 1});
    nx_node f = nx_input(g, "f", NX_DTYPE_F64, 2, (int64_t[]){2, 1});
    nx_node s = nx_parameter(g, "sigma", NX_DTYPE_F64, 1, (int64_t[]){1});
    int64_t iv[4] = {0, 1, 0, 1};
    nx_node idx = nx_constant(g, NX_DTYPE_I64, 2, (int64_t[]){2, 2}, iv);
    nx_node y = nx_bilateral_node(g, v, f, NX_METRIC_DIAGONAL, s, idx, NX_NONE, 1);
    nx_node y0 = nx_slice(g, y, (int64_t[]){0, 0}, (int64_t[]){1, 1}, NULL);
    nx_node ds = NX_NONE;
    assert_int_equal(nx_graph_grad(g, y0, 1, &s, &ds), NX_OK);
    nx_program *p = NULL;
    nx_compile_opts co = {.backend = NX_BACKEND_CPU, .n_outputs = 1, .outputs = &ds};
    assert_int_equal(nx_graph_compile(g, &co, &p), NX_OK);
    nx_tensor *tv = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){2, 1}, (double[]){1, 3});
    nx_tensor *tf = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){2, 1}, (double[]){0, 1});
    nx_tensor *ts = make(ctx, NX_DTYPE_F64, 1, (int64_t[]){1}, (double[]){0.7});
    nx_tensor *out = NULL;
    assert_int_equal(nx_program_run(p, (const nx_tensor *const[]){tv, tf, ts}, &out), NX_OK);
    double sg = 0.7, w = exp(-1 / (2 * sg * sg));
    double want = (3.0 - 1.0) / ((1 + w) * (1 + w)) * w / (sg * sg * sg);
    if (!nx_test_close(at(out, 0), want, 1e-13, 1e-14))
        fail_msg("d out_0 / d sigma = %.17g; by hand %.17g", at(out, 0), want);
    /* Bad fragments record an error in the graph. */
    assert_int_equal(nx_bilateral_node(g, v, f, NX_METRIC_DIAGONAL, s, idx, NX_NONE, 0), NX_NONE);
    assert_int_equal(nx_graph_status(g), NX_ERR_SHAPE);
    assert_non_null(strstr(nx_graph_error(g), "n_iters"));
    nx_tensor_free(out);
    nx_tensor_free(tv);
    nx_tensor_free(tf);
    nx_tensor_free(ts);
    nx_program_free(p);
    nx_graph_free(g);
    ctx_done(ctx);
}

/* ---- bad input --------------------------------------------------------------------------------*/

static void test_errors(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    double buf[64];
    for (int i = 0; i < 64; i++)
        buf[i] = i * 0.1;
    nx_tensor *v = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){4, 2}, buf);
    nx_tensor *f = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){4, 3}, buf);
    nx_tensor *f32 = make(ctx, NX_DTYPE_F32, 2, (int64_t[]){4, 3}, buf);
    nx_tensor *s = make(ctx, NX_DTYPE_F64, 1, (int64_t[]){3}, (double[]){1, 1, 1});
    nx_tensor *s2 = make(ctx, NX_DTYPE_F64, 1, (int64_t[]){2}, (double[]){1, 1});
    nx_tensor *sneg = make(ctx, NX_DTYPE_F64, 1, (int64_t[]){3}, (double[]){1, -1, 1});
    nx_tensor *idx =
        make(ctx, NX_DTYPE_I64, 2, (int64_t[]){4, 2}, (double[]){0, 1, 1, 2, 2, 3, 3, 0});
    nx_tensor *idx_bad =
        make(ctx, NX_DTYPE_I64, 2, (int64_t[]){4, 2}, (double[]){0, 1, 1, 4, 2, 3, 3, 0});
    nx_tensor *idx_f = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){4, 2}, NULL);
    nx_tensor *mask3 = make(ctx, NX_DTYPE_BOOL, 2, (int64_t[]){4, 3}, NULL);
    nx_tensor *nanf = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){4, 3}, buf);
    ((double *)nx_tensor_data(nanf))[7] = NAN;
    nx_tensor *out = NULL;
    nx_bilateral_opts o = {.metric = {NX_METRIC_DIAGONAL, s}, .index = idx};

    expect_error(ctx, nx_bilateral_gaussian(ctx, v, f, NULL, &out), NX_ERR_INVALID_ARG,
                 "opts is NULL");
    expect_error(ctx, nx_bilateral_gaussian(ctx, v, f32, &o, &out), NX_ERR_DTYPE, "features are");
    expect_error(ctx, nx_bilateral_gaussian(ctx, v, nanf, &o, &out), NX_ERR_INVALID_ARG,
                 "point 2 (component 1)");
    o.metric.param = s2;
    expect_error(ctx, nx_bilateral_gaussian(ctx, v, f, &o, &out), NX_ERR_SHAPE, "d_f = 3");
    o.metric.param = sneg;
    expect_error(ctx, nx_bilateral_gaussian(ctx, v, f, &o, &out), NX_ERR_INVALID_ARG, "sigma > 0");
    o.metric.param = s;
    o.metric.kind = NX_METRIC_FACTOR;
    expect_error(ctx, nx_bilateral_gaussian(ctx, v, f, &o, &out), NX_ERR_SHAPE, "L [d_f, r]");
    o.metric.kind = (nx_metric_kind)7;
    expect_error(ctx, nx_bilateral_gaussian(ctx, v, f, &o, &out), NX_ERR_INVALID_ARG, "kind 7");
    o.metric.kind = NX_METRIC_DIAGONAL;
    o.index = idx_bad;
    expect_error(ctx, nx_bilateral_gaussian(ctx, v, f, &o, &out), NX_ERR_INVALID_ARG,
                 "index[1, 1] is 4");
    o.index = idx_f;
    expect_error(ctx, nx_bilateral_gaussian(ctx, v, f, &o, &out), NX_ERR_DTYPE, "i32 or i64");
    o.index = idx;
    o.mask = mask3;
    expect_error(ctx, nx_bilateral_gaussian(ctx, v, f, &o, &out), NX_ERR_SHAPE,
                 "neighbourhood's shape");
    o.mask = NULL;
    o.n_iters = -1;
    expect_error(ctx, nx_bilateral_gaussian(ctx, v, f, &o, &out), NX_ERR_INVALID_ARG, "n_iters");
    o.n_iters = 1;
    o.index = NULL;
    o.k = 5;
    expect_error(ctx, nx_bilateral_gaussian(ctx, v, f, &o, &out), NX_ERR_INVALID_ARG,
                 "1 <= k <= 4");
    o.k = 0;
    expect_error(ctx, nx_bilateral_gaussian(ctx, v, f, &o, &out), NX_ERR_INVALID_ARG, "k = 0");
    o.mask = mask3;
    o.k = 2;
    expect_error(ctx, nx_bilateral_gaussian(ctx, v, f, &o, &out), NX_ERR_SHAPE, "shape");
    o.mask = NULL;
    expect_error(ctx, nx_bilateral_gaussian(ctx, f, v, &o, &out), NX_ERR_SHAPE, "d_f = 2");
    assert_null(out);
    /* vjp: a cotangent of the wrong shape. */
    nx_tensor *dv = NULL;
    expect_error(ctx, nx_bilateral_gaussian_vjp(ctx, v, f, &o, f, &dv, NULL, NULL), NX_ERR_SHAPE,
                 "dout");
    assert_null(dv);
    /* knn */
    expect_error(ctx, nx_brute_force_knn(ctx, nanf, 2, NULL, &out), NX_ERR_INVALID_ARG, "finite");
    expect_error(ctx, nx_brute_force_knn(ctx, f, 5, NULL, &out), NX_ERR_INVALID_ARG, "k = 5");
    nx_knn_opts ko = {.exclude_self = true};
    expect_error(ctx, nx_brute_force_knn(ctx, f, 4, &ko, &out), NX_ERR_INVALID_ARG,
                 "self excluded");
    expect_error(ctx, nx_brute_force_knn(ctx, v, 2, NULL, NULL), NX_ERR_INVALID_ARG, "NULL");
    nx_tensor *tensors[] = {v, f, f32, s, s2, sneg, idx, idx_bad, idx_f, mask3, nanf};
    for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++)
        nx_tensor_free(tensors[i]);
    ctx_done(ctx);
}

static void test_empty(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    nx_tensor *v = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){0, 2}, NULL);
    nx_tensor *f = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){0, 3}, NULL);
    nx_tensor *s = make(ctx, NX_DTYPE_F64, 1, (int64_t[]){3}, (double[]){1, 1, 1});
    nx_bilateral_opts o = {.metric = {NX_METRIC_DIAGONAL, s}, .k = 3};
    nx_tensor *out = NULL, *dv = NULL, *ds = NULL;
    assert_int_equal(nx_bilateral_gaussian(ctx, v, f, &o, &out), NX_OK);
    assert_int_equal(nx_tensor_shape(out)[0], 0);
    assert_int_equal(nx_tensor_shape(out)[1], 2);
    assert_int_equal(nx_bilateral_gaussian_vjp(ctx, v, f, &o, v, &dv, NULL, &ds), NX_OK);
    assert_int_equal(nx_tensor_numel(dv), 0);
    assert_int_equal(nx_tensor_numel(ds), 3);
    nx_tensor *img = make(ctx, NX_DTYPE_F32, 3, (int64_t[]){0, 4, 4}, NULL);
    nx_tensor *so = NULL;
    nx_susan_opts su = {.sigma_space = 1, .sigma_intensity = 1};
    assert_int_equal(nx_susan_emulator(ctx, img, &su, &so), NX_OK);
    assert_int_equal(nx_tensor_numel(so), 0);
    nx_tensor *tensors[] = {v, f, s, out, dv, ds, img, so};
    for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++)
        nx_tensor_free(tensors[i]);
    ctx_done(ctx);
}

/* SUSAN: a constant image stays constant (every weight 1, every neighbour equal); an integer
 * image is smoothed as f32; bad options are refused. */
static void test_susan(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    double buf[60];
    for (int i = 0; i < 60; i++)
        buf[i] = 7;
    nx_tensor *c = make(ctx, NX_DTYPE_I32, 3, (int64_t[]){3, 4, 5}, buf);
    nx_susan_opts o = {.sigma_space = 1, .sigma_intensity = 2};
    nx_tensor *out = NULL;
    assert_int_equal(nx_susan_emulator(ctx, c, &o, &out), NX_OK);
    assert_int_equal(nx_tensor_dtype(out), NX_DTYPE_F32);
    for (int i = 0; i < 60; i++)
        assert_true(fabs(at(out, i) - 7) < 1e-6);
    nx_tensor_free(out);
    o.sigma_space = 0;
    expect_error(ctx, nx_susan_emulator(ctx, c, &o, &out), NX_ERR_INVALID_ARG, "sigma_space");
    o.sigma_space = 1;
    o.sigma_intensity = NAN;
    expect_error(ctx, nx_susan_emulator(ctx, c, &o, &out), NX_ERR_INVALID_ARG, "bthresh");
    o.bthresh = 3;
    assert_int_equal(nx_susan_emulator(ctx, c, &o, &out), NX_OK);
    nx_tensor_free(out);
    o.nspatial = 4;
    expect_error(ctx, nx_susan_emulator(ctx, c, &o, &out), NX_ERR_SHAPE, "4 spatial axes");
    o.nspatial = 0;
    o.half = 17;
    expect_error(ctx, nx_susan_emulator(ctx, c, &o, &out), NX_ERR_INVALID_ARG, "half");
    expect_error(ctx, nx_susan_emulator(ctx, c, NULL, &out), NX_ERR_INVALID_ARG, "opts");
    nx_tensor_free(c);
    ctx_done(ctx);
}

static double susan_loss(nx_ctx *ctx, const nx_tensor *img, const nx_susan_opts *o,
                         const nx_tensor *dout)
{
    nx_tensor *out = NULL;
    assert_int_equal(nx_susan_emulator(ctx, img, o, &out), NX_OK);
    double l = 0;
    for (int64_t i = 0; i < nx_tensor_numel(out); i++)
        l += at(out, i) * at(dout, i);
    nx_tensor_free(out);
    return l;
}

/* SUSAN's vjp against central differences in f64, with an outlier so both the bilateral and the
 * median branch carry gradient (distinct values: no median ties). */
static void test_susan_grad(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    uint64_t seed = 99;
    double xv[30], dv[30];
    for (int i = 0; i < 30; i++) {
        xv[i] = 5 + 0.4 * rnd(&seed) + 0.001 * i;
        dv[i] = rnd(&seed);
    }
    xv[14] = 20; /* no neighbour alike: the median */
    nx_tensor *img = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){5, 6}, xv);
    nx_tensor *dout = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){5, 6}, dv);
    for (int b = 0; b < 2; b++) {
        nx_susan_opts o = {.backend = b ? NX_BACKEND_CPU : NX_BACKEND_REF,
                           .sigma_space = 1.2,
                           .sigma_intensity = 0.5};
        nx_tensor *g = NULL;
        assert_int_equal(nx_susan_emulator_vjp(ctx, img, &o, dout, &g), NX_OK);
        double *x = nx_tensor_data(img), h = 1e-6;
        for (int i = 0; i < 30; i++) {
            double keep = x[i];
            x[i] = keep + h;
            double lp = susan_loss(ctx, img, &o, dout);
            x[i] = keep - h;
            double lm = susan_loss(ctx, img, &o, dout);
            x[i] = keep;
            double fd = (lp - lm) / (2 * h);
            if (!nx_test_close(at(g, i), fd, 1e-6, 1e-7))
                fail_msg("susan [%s]: dL/dx[%d] = %.12g; finite differences give %.12g",
                         nx_backend_name(o.backend), i, at(g, i), fd);
        }
        nx_tensor_free(g);
    }
    nx_susan_opts o = {.sigma_space = 1, .sigma_intensity = 1};
    nx_tensor *g = NULL;
    assert_int_equal(nx_susan_emulator_vjp(ctx, img, &o, img, &g), NX_OK);
    nx_tensor_free(g);
    nx_tensor *small = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){5, 5}, NULL);
    expect_error(ctx, nx_susan_emulator_vjp(ctx, img, &o, small, &g), NX_ERR_SHAPE, "dout");
    assert_null(g);
    nx_tensor_free(small);
    nx_tensor_free(img);
    nx_tensor_free(dout);
    ctx_done(ctx);
}

/* The cpu backend compiles every fragment of the family: under NITRIX_STRICT_BACKEND a fallback
 * to the interpreter would be an error. */
static void test_cpu_no_fallback(void **state)
{
    (void)state;
    setenv("NITRIX_STRICT_BACKEND", "1", 1);
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    unsetenv("NITRIX_STRICT_BACKEND");
    assert_true(nx_ctx_strict_backend(ctx));
    double buf[40];
    for (int i = 0; i < 40; i++)
        buf[i] = (i * 13 % 7) * 0.3;
    nx_tensor *v = make(ctx, NX_DTYPE_F32, 2, (int64_t[]){10, 2}, buf);
    nx_tensor *f = make(ctx, NX_DTYPE_F32, 2, (int64_t[]){10, 2}, buf + 20);
    nx_tensor *l = make(ctx, NX_DTYPE_F32, 2, (int64_t[]){2, 1}, (double[]){0.5, 2});
    nx_tensor *img = make(ctx, NX_DTYPE_F32, 2, (int64_t[]){5, 4}, buf);
    nx_bilateral_opts o = {
        .backend = NX_BACKEND_CPU, .metric = {NX_METRIC_FACTOR, l}, .k = 4, .n_iters = 2};
    nx_tensor *out = NULL, *dv = NULL, *df = NULL, *dl = NULL, *so = NULL;
    nx_status st = nx_bilateral_gaussian(ctx, v, f, &o, &out);
    if (st == NX_OK)
        st = nx_bilateral_gaussian_vjp(ctx, v, f, &o, out, &dv, &df, &dl);
    nx_susan_opts su = {.backend = NX_BACKEND_CPU, .sigma_space = 1, .sigma_intensity = 0.5};
    if (st == NX_OK)
        st = nx_susan_emulator(ctx, img, &su, &so);
    nx_tensor *dimg = NULL;
    if (st == NX_OK)
        st = nx_susan_emulator_vjp(ctx, img, &su, so, &dimg);
    nx_tensor_free(dimg);
    if (st != NX_OK)
        fail_msg("cpu backend: %s", nx_ctx_last_error(ctx));
    nx_tensor *tensors[] = {v, f, l, img, out, dv, df, dl, so};
    for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++)
        nx_tensor_free(tensors[i]);
    nx_ctx_free(ctx);
}

/* ---- allocation failures ----------------------------------------------------------------------*/

/* On the reference backend: the sweep is about this family's own error paths. */
static nx_status sweep_body(nx_ctx *ctx, void *user)
{
    (void)user;
    nx_tensor *t[12] = {0};
    int64_t s2[2] = {5, 2};
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F64, 2, s2, &t[0]); /* values and features */
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F64, 1, (int64_t[]){2}, &t[1]);
    if (st == NX_OK) {
        double *x = nx_tensor_data(t[0]), *s = nx_tensor_data(t[1]);
        for (int i = 0; i < 10; i++)
            x[i] = (i * 37 % 11) * 0.25;
        s[0] = 1, s[1] = 2;
        nx_bilateral_opts o = {
            .backend = NX_BACKEND_REF, .metric = {NX_METRIC_DIAGONAL, t[1]}, .k = 3, .n_iters = 2};
        st = nx_bilateral_gaussian(ctx, t[0], t[0], &o, &t[2]);
        if (st == NX_OK)
            st = nx_bilateral_gaussian_vjp(ctx, t[0], t[0], &o, t[2], &t[3], &t[4], &t[5]);
    }
    if (st == NX_OK)
        st = nx_spatial_cube_neighbourhood(ctx, 2, (int64_t[]){3, 2}, 1, &t[6], &t[7]);
    if (st == NX_OK) {
        nx_feature_metric blocks[2] = {{NX_METRIC_DIAGONAL, t[1]}, {NX_METRIC_DIAGONAL, t[1]}};
        st = nx_metric_block_diagonal(ctx, 2, blocks, &t[8]);
    }
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F64, 2, (int64_t[]){4, 5}, &t[9]);
    if (st == NX_OK) {
        double *x = nx_tensor_data(t[9]);
        for (int i = 0; i < 20; i++)
            x[i] = (i * 7 % 5) * 0.5;
        nx_susan_opts so = {.backend = NX_BACKEND_REF, .sigma_space = 1, .sigma_intensity = 0.5};
        st = nx_susan_emulator(ctx, t[9], &so, &t[10]);
    }
    if (st == NX_OK) {
        nx_tensor *m = NULL;
        st = nx_tensor_new(ctx, NX_DTYPE_F64, 2, (int64_t[]){2, 2}, &m);
        if (st == NX_OK) {
            double *x = nx_tensor_data(m);
            x[0] = 2, x[1] = 1, x[2] = 1, x[3] = 2;
            st = nx_metric_from_spd(ctx, m, &t[11]);
        }
        nx_tensor_free(m);
    }
    for (int i = 0; i < 12; i++)
        nx_tensor_free(t[i]);
    return st;
}

static void test_alloc_sweep(void **state)
{
    (void)state;
    assert_true(nx_test_alloc_sweep(sweep_body, NULL, 40000) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_line),   cmocka_unit_test(test_flat_mean_and_mask),
        cmocka_unit_test(test_knn_hand),    cmocka_unit_test(test_cube_hand),
        cmocka_unit_test(test_metrics),     cmocka_unit_test(test_grad_fd),
        cmocka_unit_test(test_node_grad),   cmocka_unit_test(test_errors),
        cmocka_unit_test(test_empty),       cmocka_unit_test(test_susan),
        cmocka_unit_test(test_susan_grad),  cmocka_unit_test(test_cpu_no_fallback),
        cmocka_unit_test(test_alloc_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
