/* The affine/Lie ops and the grid differences of the geometry family beyond the golden replay
 * (which compares them with SciPy and NumPy): round trips in float64 (exp/log, parameters and
 * matrix, angles and rotation, invert and compose) to 1e-12; closed forms (the Padé exponential of
 * a skew generator against Rodrigues, det exp(A) = exp(tr A), the Jacobian determinant of a
 * quadratic displacement, exact for central differences); the documented results (a singular
 * affine's inverse is NaN, a generator past the squaring limit is NaN, an empty centre of mass is
 * na_value, gimbal lock); and every bad input with its message. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nitrix-op.h"
#include "testutil.h"

static nx_test_alloc g_ta;

static nx_ctx *ctx_new(void)
{
    memset(&g_ta, 0, sizeof g_ta);
    return nx_test_ctx(&g_ta);
}

static nx_tensor *make(nx_ctx *ctx, nx_dtype dt, int nd, const int64_t *shape, const double *v)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, dt, nd, shape, &t), NX_OK);
    int64_t n = nx_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double x = v ? v[i] : 0.0;
        if (dt == NX_DTYPE_F64)
            ((double *)nx_tensor_data(t))[i] = x;
        else if (dt == NX_DTYPE_F32)
            ((float *)nx_tensor_data(t))[i] = (float)x;
        else
            ((int32_t *)nx_tensor_data(t))[i] = (int32_t)x;
    }
    return t;
}

static double at(const nx_tensor *t, int64_t i)
{
    if (nx_tensor_dtype(t) == NX_DTYPE_F32)
        return ((const float *)nx_tensor_data(t))[i];
    return ((const double *)nx_tensor_data(t))[i];
}

/* op on nin inputs (NULL: an absent optional one) with options "k=v" (NULL-terminated). */
static nx_status call(nx_ctx *ctx, const char *op, int nin, const nx_tensor *const *in,
                      const char *const *kv, nx_tensor **out)
{
    const char *keys[8], *vals[8];
    char buf[8][96];
    int n = 0;
    for (; kv && kv[n]; n++) {
        snprintf(buf[n], sizeof buf[n], "%s", kv[n]);
        char *eq = strchr(buf[n], '=');
        assert_non_null(eq);
        *eq = '\0';
        keys[n] = buf[n];
        vals[n] = eq + 1;
    }
    *out = NULL;
    return nx_op_call(ctx, op, nin, in, n, keys, vals, 1, out);
}

static nx_tensor *run(nx_ctx *ctx, const char *op, int nin, const nx_tensor *const *in,
                      const char *const *kv)
{
    nx_tensor *y = NULL;
    nx_status st = call(ctx, op, nin, in, kv, &y);
    if (st != NX_OK)
        fail_msg("%s: %s", op, nx_ctx_last_error(ctx));
    return y;
}

static void expect_error(nx_ctx *ctx, const char *op, int nin, const nx_tensor *const *in,
                         const char *const *kv, nx_status want, const char *needle)
{
    nx_tensor *y = NULL;
    nx_status st = call(ctx, op, nin, in, kv, &y);
    if (st != want)
        fail_msg("%s: status %s, expected %s (%s)", op, nx_status_str(st), nx_status_str(want),
                 nx_ctx_last_error(ctx));
    assert_null(y);
    if (!strstr(nx_ctx_last_error(ctx), needle))
        fail_msg("%s: message '%s' lacks '%s'", op, nx_ctx_last_error(ctx), needle);
}

static void expect_close(const nx_tensor *got, const double *want, int64_t n, double tol,
                         const char *what)
{
    assert_true(nx_tensor_numel(got) >= n); /* the first n elements */
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(at(got, i) - want[i]) <= tol * (1.0 + fabs(want[i]))))
            fail_msg("%s[%lld]: %.17g, expected %.17g", what, (long long)i, at(got, i), want[i]);
}

static uint64_t rng = 0x2545f4914f6cdd1du;

static double uniform(double lo, double hi)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (hi - lo) * (double)(rng >> 11) / 9007199254740992.0;
}

/* rigid_log(rigid_exp(p)) = p (3-D with |w| < pi, and 2-D), to 1e-12. */
static void test_rigid_round_trip(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    double p[8 * 6];
    for (int b = 0; b < 8; b++) {
        double w[3] = {uniform(-1, 1), uniform(-1, 1), uniform(-1, 1)};
        double n = sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]);
        double th = b == 0 ? 0.0 : b == 1 ? 1e-9 : b == 2 ? 3.14159 : uniform(0.0, 3.1);
        for (int i = 0; i < 3; i++) {
            p[b * 6 + i] = w[i] / n * th;
            p[b * 6 + 3 + i] = uniform(-5, 5);
        }
    }
    nx_tensor *pt = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){8, 6}, p);
    nx_tensor *m = run(ctx, "rigid_exp", 1, (const nx_tensor *const[]){pt}, NULL);
    const int64_t *ms = nx_tensor_shape(m);
    assert_int_equal(ms[1], 4);
    assert_int_equal(ms[2], 4);
    /* R^T R = I and det R = 1 */
    for (int b = 0; b < 8; b++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                double s = 0;
                for (int k = 0; k < 3; k++)
                    s += at(m, b * 16 + k * 4 + i) * at(m, b * 16 + k * 4 + j);
                assert_true(fabs(s - (i == j)) < 1e-13);
            }
    nx_tensor *q = run(ctx, "rigid_log", 1, (const nx_tensor *const[]){m}, NULL);
    expect_close(q, p, 48, 1e-12, "rigid_log(rigid_exp(p))");
    nx_tensor_free(q);
    nx_tensor_free(m);
    nx_tensor_free(pt);
    double p2[3] = {2.5, -1.0, 4.0};
    pt = make(ctx, NX_DTYPE_F64, 1, (int64_t[]){3}, p2);
    m = run(ctx, "rigid_exp", 1, (const nx_tensor *const[]){pt}, (const char *[]){"ndim=2", 0});
    q = run(ctx, "rigid_log", 1, (const nx_tensor *const[]){m}, (const char *[]){"ndim=2", 0});
    expect_close(q, p2, 3, 1e-13, "2-D rigid round trip");
    nx_tensor_free(q);
    nx_tensor_free(m);
    nx_tensor_free(pt);
    nx_ctx_free(ctx);
}

/* affine_exp: a skew generator gives rigid_exp's Rodrigues rotation; det exp(A) = exp(tr A);
 * a diagonal A gives exp of the diagonal; a generator past the squaring limit gives NaN. */
static void test_affine_exp_closed_forms(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    double w[3] = {0.7, -1.9, 1.3}, t[3] = {1, 2, 3};
    double pa[12] = {0, -w[2], w[1], w[2], 0, -w[0], -w[1], w[0], 0, t[0], t[1], t[2]};
    double pr[6] = {w[0], w[1], w[2], t[0], t[1], t[2]};
    nx_tensor *a = make(ctx, NX_DTYPE_F64, 1, (int64_t[]){12}, pa);
    nx_tensor *r = make(ctx, NX_DTYPE_F64, 1, (int64_t[]){6}, pr);
    nx_tensor *ea = run(ctx, "affine_exp", 1, (const nx_tensor *const[]){a}, NULL);
    nx_tensor *er = run(ctx, "rigid_exp", 1, (const nx_tensor *const[]){r}, NULL);
    double want[16];
    for (int i = 0; i < 16; i++)
        want[i] = at(er, i);
    expect_close(ea, want, 16, 1e-13, "expm(skew) vs Rodrigues");
    nx_tensor_free(ea);
    nx_tensor_free(er);
    nx_tensor_free(a);
    nx_tensor_free(r);
    /* det exp(A) = exp(tr A) for a general A of norm about 8 (three squarings) */
    double g[12];
    for (int i = 0; i < 12; i++)
        g[i] = uniform(-1.5, 1.5);
    a = make(ctx, NX_DTYPE_F64, 1, (int64_t[]){12}, g);
    ea = run(ctx, "affine_exp", 1, (const nx_tensor *const[]){a}, NULL);
    double e[9];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            e[i * 3 + j] = at(ea, i * 4 + j);
    double det = e[0] * (e[4] * e[8] - e[5] * e[7]) - e[1] * (e[3] * e[8] - e[5] * e[6]) +
                 e[2] * (e[3] * e[7] - e[4] * e[6]);
    double tr = g[0] + g[4] + g[8];
    assert_true(fabs(det - exp(tr)) <= 1e-12 * exp(tr));
    nx_tensor_free(ea);
    nx_tensor_free(a);
    /* diagonal, 2-D, and one past the limit (|A|_1 = 1e7): NaN */
    double pd[2 * 6] = {0.5, 0, 0, -2.0, 0.1, 0.2, 1e7, 0, 0, 1e7, 0, 0};
    a = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){2, 6}, pd);
    ea = run(ctx, "affine_exp", 1, (const nx_tensor *const[]){a}, NULL);
    double wd[9] = {exp(0.5), 0, 0.1, 0, exp(-2.0), 0.2, 0, 0, 1};
    expect_close(ea, wd, 9, 1e-14, "expm(diag)");
    for (int i = 0; i < 4; i++)
        assert_true(isnan(at(ea, 9 + (i / 2) * 3 + i % 2)));
    nx_tensor_free(ea);
    nx_tensor_free(a);
    nx_ctx_free(ctx);
}

/* params -> matrix -> params (a reflection included), angles -> rotation -> angles, gimbal lock. */
static void test_params_round_trip(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    double p[3 * 12];
    for (int b = 0; b < 3; b++) {
        double *q = p + b * 12;
        for (int i = 0; i < 3; i++) {
            q[i] = uniform(-10, 10);
            q[3 + i] = uniform(-170, 170);
            q[6 + i] = uniform(0.5, 2.0);
            q[9 + i] = uniform(-0.5, 0.5);
        }
        q[4] = uniform(-85, 85);
    }
    p[12 + 6] = -p[12 + 6]; /* a reflection */
    nx_tensor *pt = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){3, 12}, p);
    nx_tensor *m = run(ctx, "params_to_affine_matrix", 1, (const nx_tensor *const[]){pt}, NULL);
    nx_tensor *q = run(ctx, "affine_matrix_to_params", 1, (const nx_tensor *const[]){m}, NULL);
    expect_close(q, p, 36, 1e-12, "affine_matrix_to_params(params_to_affine_matrix(p))");
    nx_tensor_free(q);
    nx_tensor_free(m);
    nx_tensor_free(pt);
    /* gimbal lock: a2 = 90 degrees; a1 is 0 and the rotation comes back */
    double ang[3] = {25.0, 90.0, -40.0};
    nx_tensor *at3 = make(ctx, NX_DTYPE_F64, 1, (int64_t[]){3}, ang);
    nx_tensor *r = run(ctx, "angles_to_rotation_matrix", 1, (const nx_tensor *const[]){at3}, NULL);
    nx_tensor *back = run(ctx, "rotation_matrix_to_angles", 1, (const nx_tensor *const[]){r},
                          NULL);
    assert_true(fabs(at(back, 0)) < 1e-12);
    assert_true(fabs(at(back, 1) - 90.0) < 1e-6);
    nx_tensor *r2 = run(ctx, "angles_to_rotation_matrix", 1, (const nx_tensor *const[]){back},
                        NULL);
    double rw[9];
    for (int i = 0; i < 9; i++)
        rw[i] = at(r, i);
    expect_close(r2, rw, 9, 1e-12, "rotation at gimbal lock");
    nx_tensor_free(r2);
    nx_tensor_free(back);
    nx_tensor_free(r);
    nx_tensor_free(at3);
    nx_ctx_free(ctx);
}

/* compose(M, invert(M)) = I; invert in both forms; a singular linear block gives NaN (the
 * documented result) without touching the other matrices of the batch. */
static void test_invert_compose(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    double m[3 * 12];
    for (int i = 0; i < 36; i++)
        m[i] = uniform(-1, 1) + ((i % 12) % 5 == 0 ? 2.0 : 0.0);
    /* matrix 1: rank 2 (rows 1 and 2 a multiple of row 0's pattern); matrix 2: zero block */
    double sing[12] = {1, 2, 3, 4, 4, 5, 6, 1, 7, 8, 9, -2};
    memcpy(m + 12, sing, sizeof sing);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            m[24 + i * 4 + j] = 0.0;
    nx_tensor *mt = make(ctx, NX_DTYPE_F64, 3, (int64_t[]){3, 3, 4}, m);
    nx_tensor *inv = run(ctx, "invert_affine", 1, (const nx_tensor *const[]){mt}, NULL);
    for (int i = 12; i < 36; i++)
        assert_true(isnan(at(inv, i)));
    nx_tensor *prod = run(ctx, "compose_affine", 2, (const nx_tensor *const[]){mt, inv}, NULL);
    double eye[12] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
    expect_close(prod, eye, 12, 1e-12, "M invert(M)");
    nx_tensor_free(prod);
    nx_tensor_free(inv);
    /* the square form of the regular one, composed the other way */
    int64_t s1[2] = {3, 4};
    nx_tensor *one = make(ctx, NX_DTYPE_F64, 2, s1, m);
    nx_tensor *sq = run(ctx, "make_square_affine", 1, (const nx_tensor *const[]){one}, NULL);
    nx_tensor *isq = run(ctx, "invert_affine", 1, (const nx_tensor *const[]){sq}, NULL);
    assert_int_equal(nx_tensor_shape(isq)[0], 4);
    prod = run(ctx, "compose_affine", 2, (const nx_tensor *const[]){isq, one}, NULL);
    double eye4[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
    expect_close(prod, eye4, 16, 1e-12, "invert(M) M");
    nx_tensor_free(prod);
    nx_tensor_free(isq);
    nx_tensor_free(sq);
    nx_tensor_free(one);
    nx_tensor_free(mt);
    nx_ctx_free(ctx);
}

/* fit_affine recovers an exact affine from noise-free points (1e-12); collinear points (a
 * singular normal matrix) give NaN. */
static void test_fit_affine(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    double a[12] = {1.2, 0.1, -0.3, 4, 0.2, 0.9, 0.1, -2, -0.1, 0.3, 1.1, 0.5};
    double tgt[10 * 3], src[10 * 3];
    for (int p = 0; p < 10; p++) {
        for (int k = 0; k < 3; k++)
            tgt[p * 3 + k] = uniform(-5, 5);
        for (int i = 0; i < 3; i++)
            src[p * 3 + i] = a[i * 4] * tgt[p * 3] + a[i * 4 + 1] * tgt[p * 3 + 1] +
                             a[i * 4 + 2] * tgt[p * 3 + 2] + a[i * 4 + 3];
    }
    int64_t s[2] = {10, 3};
    nx_tensor *st = make(ctx, NX_DTYPE_F64, 2, s, src), *tt = make(ctx, NX_DTYPE_F64, 2, s, tgt);
    nx_tensor *m = run(ctx, "fit_affine", 2, (const nx_tensor *const[]){st, tt}, NULL);
    expect_close(m, a, 12, 1e-12, "fit_affine of exact correspondences");
    nx_tensor_free(m);
    for (int p = 0; p < 10; p++)
        for (int k = 0; k < 3; k++)
            tgt[p * 3 + k] = (double)p * (k + 1.0);
    nx_tensor *line = make(ctx, NX_DTYPE_F64, 2, s, tgt);
    m = run(ctx, "fit_affine", 2, (const nx_tensor *const[]){st, line}, NULL);
    for (int i = 0; i < 12; i++)
        assert_true(isnan(at(m, i)));
    nx_tensor_free(m);
    nx_tensor_free(line);
    nx_tensor_free(st);
    nx_tensor_free(tt);
    nx_ctx_free(ctx);
}

/* det(I + grad u) of u = A x + (c0 x1 x2, c1 x0^2, c2 x0 x1) at the interior grid points, where
 * central differences are exact for a quadratic: against the closed form, 1e-12. */
static void test_jacobian_det_closed_form(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    const int n0 = 6, n1 = 7, n2 = 5;
    const double h[3] = {1.0, 0.5, 2.0}, A[9] = {0.05, -0.02, 0.01, 0.03, 0.04, -0.01,
                                                 -0.02, 0.01, 0.06};
    const double c[3] = {0.01, -0.015, 0.02};
    double *u = malloc(sizeof(double) * n0 * n1 * n2 * 3);
    assert_non_null(u);
    for (int i = 0; i < n0; i++)
        for (int j = 0; j < n1; j++)
            for (int k = 0; k < n2; k++) {
                double x[3] = {i * h[0], j * h[1], k * h[2]};
                double *v = u + ((i * n1 + j) * n2 + k) * 3;
                for (int r = 0; r < 3; r++)
                    v[r] = A[r * 3] * x[0] + A[r * 3 + 1] * x[1] + A[r * 3 + 2] * x[2];
                v[0] += c[0] * x[1] * x[2];
                v[1] += c[1] * x[0] * x[0];
                v[2] += c[2] * x[0] * x[1];
            }
    nx_tensor *ut = make(ctx, NX_DTYPE_F64, 4, (int64_t[]){n0, n1, n2, 3}, u);
    nx_tensor *det = run(ctx, "jacobian_det_displacement", 1, (const nx_tensor *const[]){ut},
                         (const char *[]){"spacing=1,0.5,2", 0});
    for (int i = 1; i < n0 - 1; i++)
        for (int j = 1; j < n1 - 1; j++)
            for (int k = 1; k < n2 - 1; k++) {
                double x[3] = {i * h[0], j * h[1], k * h[2]}, J[9];
                for (int r = 0; r < 9; r++)
                    J[r] = A[r] + (r % 4 == 0);
                J[1] += c[0] * x[2];
                J[2] += c[0] * x[1];
                J[3] += 2 * c[1] * x[0];
                J[6] += c[2] * x[1];
                J[7] += c[2] * x[0];
                double want = J[0] * (J[4] * J[8] - J[5] * J[7]) -
                              J[1] * (J[3] * J[8] - J[5] * J[6]) +
                              J[2] * (J[3] * J[7] - J[4] * J[6]);
                double got = at(det, (i * n1 + j) * n2 + k);
                if (fabs(got - want) > 1e-12)
                    fail_msg("det at (%d,%d,%d): %.17g, closed form %.17g", i, j, k, got, want);
            }
    nx_tensor_free(det);
    nx_tensor_free(ut);
    free(u);
    nx_ctx_free(ctx);
}

/* center_of_mass_grid: zero total weight gives na_value (NaN by default). */
static void test_center_of_mass_empty(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    double w[2 * 3] = {0, 0, 0, 1, 2, 3};
    nx_tensor *wt = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){2, 3}, w);
    nx_tensor *y = run(ctx, "center_of_mass_grid", 1, (const nx_tensor *const[]){wt},
                       (const char *[]){"axes=1", 0});
    assert_true(isnan(at(y, 0)));
    assert_true(fabs(at(y, 1) - 8.0 / 6.0) < 1e-15);
    nx_tensor_free(y);
    y = run(ctx, "center_of_mass_grid", 1, (const nx_tensor *const[]){wt},
            (const char *[]){"axes=1", "na_value=-7", 0});
    assert_true(at(y, 0) == -7.0);
    nx_tensor_free(y);
    nx_tensor_free(wt);
    nx_ctx_free(ctx);
}

static void test_errors(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    nx_tensor *p5 = make(ctx, NX_DTYPE_F64, 1, (int64_t[]){5}, NULL);
    nx_tensor *p6 = make(ctx, NX_DTYPE_F64, 1, (int64_t[]){6}, NULL);
    nx_tensor *p13 = make(ctx, NX_DTYPE_F64, 1, (int64_t[]){13}, NULL);
    nx_tensor *i6 = make(ctx, NX_DTYPE_I32, 1, (int64_t[]){6}, NULL);
    const nx_tensor *const in5[] = {p5}, *const in6[] = {p6}, *const in13[] = {p13};
    /* parameter vectors of the wrong length for ndim */
    expect_error(ctx, "rigid_exp", 1, in5, NULL, NX_ERR_SHAPE, "3 (2-D: theta, t) or 6");
    expect_error(ctx, "rigid_exp", 1, in6, (const char *[]){"ndim=2", 0}, NX_ERR_SHAPE,
                 "3 for ndim 2");
    expect_error(ctx, "rigid_exp", 1, in6, (const char *[]){"ndim=4", 0}, NX_ERR_INVALID_ARG,
                 "expected 2 or 3");
    expect_error(ctx, "affine_exp", 1, in5, NULL, NX_ERR_SHAPE, "6 (2-D");
    expect_error(ctx, "affine_exp", 1, in6, (const char *[]){"ndim=3", 0}, NX_ERR_SHAPE,
                 "12 for ndim 3");
    expect_error(ctx, "params_to_affine_matrix", 1, in13, NULL, NX_ERR_SHAPE, "expected 1 to 12");
    expect_error(ctx, "params_to_affine_matrix", 1, in13, (const char *[]){"ndim=2", 0},
                 NX_ERR_SHAPE, "expected 1 to 6");
    expect_error(ctx, "angles_to_rotation_matrix", 1, in5, NULL, NX_ERR_SHAPE, "1 (2-D) or 3");
    expect_error(ctx, "rigid_exp", 1, (const nx_tensor *const[]){i6}, NULL, NX_ERR_DTYPE,
                 "expected float32 or float64");
    /* non-square or wrong-size matrices */
    nx_tensor *m35 = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){3, 5}, NULL);
    nx_tensor *m43 = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){4, 3}, NULL);
    nx_tensor *m34 = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){3, 4}, NULL);
    nx_tensor *m23 = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){2, 3}, NULL);
    nx_tensor *m32 = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){3, 2}, NULL);
    const char *aff = "expected an affine [..., d, d+1] or [..., d+1, d+1]";
    expect_error(ctx, "invert_affine", 1, (const nx_tensor *const[]){m35}, NULL, NX_ERR_SHAPE,
                 aff);
    expect_error(ctx, "invert_affine", 1, (const nx_tensor *const[]){m43}, NULL, NX_ERR_SHAPE,
                 aff);
    expect_error(ctx, "make_square_affine", 1, (const nx_tensor *const[]){m32}, NULL,
                 NX_ERR_SHAPE, aff);
    expect_error(ctx, "rigid_log", 1, (const nx_tensor *const[]){m23},
                 (const char *[]){"ndim=3", 0}, NX_ERR_SHAPE, "for ndim 3");
    expect_error(ctx, "compose_affine", 2, (const nx_tensor *const[]){m34, m23}, NULL,
                 NX_ERR_SHAPE, "expected one rank");
    expect_error(ctx, "rotation_matrix_to_angles", 1, (const nx_tensor *const[]){m32}, NULL,
                 NX_ERR_SHAPE, "expected a rotation");
    expect_error(ctx, "affine_grid", 1, (const nx_tensor *const[]){m34, NULL},
                 (const char *[]){"spatial_shape=4,5", 0}, NX_ERR_INVALID_ARG,
                 "spatial_shape has 2 extents but M is of rank 3");
    nx_tensor *x2 = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){5, 2}, NULL);
    expect_error(ctx, "apply_affine", 2, (const nx_tensor *const[]){x2, m34}, NULL, NX_ERR_SHAPE,
                 "coords has 2 entries on its last axis but M is of rank 3");
    /* fit_affine: too few points, mismatched shapes, weights of the wrong shape */
    nx_tensor *s33 = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){3, 3}, NULL);
    nx_tensor *s53 = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){5, 3}, NULL);
    nx_tensor *w4 = make(ctx, NX_DTYPE_F64, 1, (int64_t[]){4}, NULL);
    expect_error(ctx, "fit_affine", 2, (const nx_tensor *const[]){s33, s33}, NULL, NX_ERR_SHAPE,
                 "expected at least 4");
    expect_error(ctx, "fit_affine", 2, (const nx_tensor *const[]){s53, s33}, NULL, NX_ERR_SHAPE,
                 "expected one shape");
    expect_error(ctx, "fit_affine", 3, (const nx_tensor *const[]){s53, s53, w4}, NULL,
                 NX_ERR_SHAPE, "weights is [4]");
    /* grid differences: spacing of the wrong length, a bad spacing, a bad displacement */
    nx_tensor *u = make(ctx, NX_DTYPE_F64, 4, (int64_t[]){4, 4, 4, 3}, NULL);
    nx_tensor *u4 = make(ctx, NX_DTYPE_F64, 4, (int64_t[]){4, 4, 4, 4}, NULL);
    nx_tensor *img = make(ctx, NX_DTYPE_F64, 2, (int64_t[]){5, 6}, NULL);
    expect_error(ctx, "jacobian_displacement", 1, (const nx_tensor *const[]){u},
                 (const char *[]){"spacing=1,2", 0}, NX_ERR_INVALID_ARG,
                 "spacing has 2 values for 3 spatial axes");
    expect_error(ctx, "jacobian_det_displacement", 1, (const nx_tensor *const[]){u},
                 (const char *[]){"spacing=0", 0}, NX_ERR_INVALID_ARG, "expected a finite value");
    expect_error(ctx, "jacobian_det_displacement", 1, (const nx_tensor *const[]){u4}, NULL,
                 NX_ERR_SHAPE, "expected a displacement");
    expect_error(ctx, "spatial_gradient", 1, (const nx_tensor *const[]){img},
                 (const char *[]){"spacing=1,2,3", 0}, NX_ERR_INVALID_ARG,
                 "spacing has 3 values for 2 spatial axes");
    expect_error(ctx, "spatial_gradient", 1, (const nx_tensor *const[]){img},
                 (const char *[]){"spatial_rank=3", 0}, NX_ERR_INVALID_ARG, "expected 1..2");
    expect_error(ctx, "center_of_mass_grid", 1, (const nx_tensor *const[]){img},
                 (const char *[]){"axes=2", 0}, NX_ERR_INVALID_ARG, "out of range");
    nx_tensor *all[] = {p5, p6, p13, i6, m35, m43, m34, m23, m32, x2, s33, s53, w4, u, u4, img};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        nx_tensor_free(all[i]);
    nx_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rigid_round_trip),
        cmocka_unit_test(test_affine_exp_closed_forms),
        cmocka_unit_test(test_params_round_trip),
        cmocka_unit_test(test_invert_compose),
        cmocka_unit_test(test_fit_affine),
        cmocka_unit_test(test_jacobian_det_closed_form),
        cmocka_unit_test(test_center_of_mass_empty),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
