/* The linalg family (ops/linalg, docs/linalg.md) beyond the table's tests (the golden replay
 * against numpy/scipy/sklearn and the FD gradients): closed-form identities (the log-determinant's
 * gradient is the inverse; eigh reconstructs a and its vectors are orthonormal, also on a
 * degenerate spectrum, where its adjoint stays finite), the documented per-problem failures
 * (non-SPD, singular, NaN: NaN outputs and cholesky's info, never an abort), and bad input, each
 * with its status and the words of its message. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nitrix-op.h"
#include "nitrix.h"
#include "testutil.h"

static nx_tensor *f64(nx_ctx *ctx, int nd, const int64_t *shape, const double *v)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, nd, shape, &t), NX_OK);
    for (int64_t i = 0; v && i < nx_tensor_numel(t); i++)
        ((double *)nx_tensor_data(t))[i] = v[i];
    return t;
}

static const double *d(const nx_tensor *t)
{
    return nx_tensor_data(t);
}

/* One call by name with options; the outputs in out. */
static nx_status call(nx_ctx *ctx, const char *op, int nin, const nx_tensor *const *in, int nopt,
                      const char *const *k, const char *const *v, int nout, nx_tensor **out)
{
    return nx_op_call(ctx, op, nin, in, nopt, k, v, nout, out);
}

static void expect_error(nx_ctx *ctx, nx_status want, nx_status got, const char *words)
{
    assert_int_equal(got, want);
    const char *msg = nx_ctx_last_error(ctx);
    if (!strstr(msg, words))
        fail_msg("message '%s' lacks '%s'", msg, words);
}

/* A 3x3 SPD matrix and a batch of 4 of them, the second and fourth not SPD. */
static const double spd3[9] = {4, 1, 0.5, 1, 3, 0.2, 0.5, 0.2, 2};

static void test_cholesky_failures(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    double v[36];
    for (int b = 0; b < 4; b++)
        memcpy(v + 9 * b, spd3, sizeof spd3);
    v[9 + 4] = -3;   /* problem 1: minor of order 2 negative */
    v[27 + 0] = NAN; /* problem 3: NaN at the first pivot */
    int64_t shape[3] = {4, 3, 3};
    nx_tensor *a = f64(ctx, 3, shape, v), *out[2] = {0};
    assert_int_equal(call(ctx, "cholesky", 1, (const nx_tensor *[]){a}, 0, NULL, NULL, 2, out),
                     NX_OK);
    const int32_t *info = nx_tensor_data(out[1]);
    assert_int_equal(info[0], 0);
    assert_int_equal(info[1], 2);
    assert_int_equal(info[2], 0);
    assert_int_equal(info[3], 1);
    for (int b = 0; b < 4; b++)
        for (int i = 0; i < 9; i++)
            assert_true(isnan(d(out[0])[9 * b + i]) == (b == 1 || b == 3));
    /* the good problems: L L^T = a (lower triangle) */
    for (int i = 0; i < 3; i++)
        for (int j = 0; j <= i; j++) {
            double s = 0;
            for (int k = 0; k < 3; k++)
                s += d(out[0])[i * 3 + k] * d(out[0])[j * 3 + k];
            assert_true(nx_test_close(s, spd3[i * 3 + j], 1e-14, 1e-14));
        }
    nx_tensor_free(out[0]);
    nx_tensor_free(out[1]);
    nx_tensor_free(a);
    nx_ctx_free(ctx);
}

static void test_solve_singular_nan(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    /* two problems: a singular one (rank 1) and a regular one with a zero leading entry */
    double v[8] = {1, 2, 2, 4, 0, 1, 1, 0};
    double bv[4] = {1, 1, 3, 5};
    int64_t sa[3] = {2, 2, 2}, sb[2] = {2, 2};
    nx_tensor *a = f64(ctx, 3, sa, v), *b = f64(ctx, 2, sb, bv), *x = NULL;
    assert_int_equal(call(ctx, "solve", 2, (const nx_tensor *[]){a, b}, 0, NULL, NULL, 1, &x),
                     NX_OK);
    assert_true(isnan(d(x)[0]) && isnan(d(x)[1]));
    assert_true(nx_test_close(d(x)[2], 5, 1e-15, 0) && nx_test_close(d(x)[3], 3, 1e-15, 0));
    nx_tensor_free(x);
    /* inv_logdet, closed form at p = 2: det = 0 gives NaN in both outputs */
    nx_tensor *out[2] = {0};
    assert_int_equal(call(ctx, "inv_logdet", 1, (const nx_tensor *[]){a}, 0, NULL, NULL, 2, out),
                     NX_OK);
    assert_true(isnan(d(out[1])[0]) && isnan(d(out[0])[0]));
    assert_true(isnan(d(out[1])[1])); /* det of [[0,1],[1,0]] is -1: not positive */
    nx_tensor_free(out[0]);
    nx_tensor_free(out[1]);
    nx_tensor_free(a);
    nx_tensor_free(b);
    nx_ctx_free(ctx);
}

/* d logdet / d a = a^-1, read through the lower triangle: 2 inv_ij below the diagonal. */
static void test_logdet_gradient_is_inverse(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t s[2] = {3, 3};
    nx_tensor *a = f64(ctx, 2, s, spd3), *out[2] = {0}, *dy[2], *dx[1] = {0};
    assert_int_equal(call(ctx, "inv_logdet", 1, (const nx_tensor *[]){a}, 0, NULL, NULL, 2, out),
                     NX_OK);
    double one = 1;
    dy[0] = f64(ctx, 2, s, (const double[9]){0});
    dy[1] = f64(ctx, 0, NULL, &one);
    assert_int_equal(nx_op_vjp(ctx, "inv_logdet", 1, (const nx_tensor *[]){a}, 0, NULL, NULL, 2,
                               (const nx_tensor *const *)dy, dx),
                     NX_OK);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            double want = i == j ? d(out[0])[i * 3 + j] : i > j ? 2 * d(out[0])[i * 3 + j] : 0;
            assert_true(nx_test_close(d(dx[0])[i * 3 + j], want, 1e-12, 1e-14));
        }
    /* and a a^-1 = I */
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            double acc = 0;
            for (int k = 0; k < 3; k++)
                acc += spd3[i * 3 + k] * d(out[0])[k * 3 + j];
            assert_true(nx_test_close(acc, i == j, 1e-14, 1e-14));
        }
    nx_tensor_free(dy[0]);
    nx_tensor_free(dy[1]);
    nx_tensor_free(dx[0]);
    nx_tensor_free(out[0]);
    nx_tensor_free(out[1]);
    nx_tensor_free(a);
    nx_ctx_free(ctx);
}

/* eigh on a degenerate spectrum (2, 2, 5): V diag(w) V^T = a, V^T V = I, w ascending, and the
 * closed-form adjoint is finite (the guard drops the degenerate pair's 1 / (w_j - w_i)). */
static void test_eigh_degenerate(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    /* a = 2 I + 3 u u^T, u = (1, 2, 2) / 3 */
    double u[3] = {1.0 / 3, 2.0 / 3, 2.0 / 3}, av[9];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            av[i * 3 + j] = 2 * (i == j) + 3 * u[i] * u[j];
    int64_t s[2] = {3, 3}, sw = 3;
    nx_tensor *a = f64(ctx, 2, s, av), *out[2] = {0};
    assert_int_equal(call(ctx, "eigh", 1, (const nx_tensor *[]){a}, 0, NULL, NULL, 2, out),
                     NX_OK);
    const double *w = d(out[0]), *v = d(out[1]);
    assert_true(nx_test_close(w[0], 2, 1e-14, 1e-14) && nx_test_close(w[1], 2, 1e-14, 1e-14));
    assert_true(nx_test_close(w[2], 5, 1e-14, 1e-14));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            double r = 0, o = 0;
            for (int k = 0; k < 3; k++) {
                r += v[i * 3 + k] * w[k] * v[j * 3 + k];
                o += v[k * 3 + i] * v[k * 3 + j];
            }
            assert_true(nx_test_close(r, av[i * 3 + j], 1e-13, 1e-13));
            assert_true(nx_test_close(o, i == j, 1e-13, 1e-13));
        }
    /* the top eigenvector is +-u; the op's sign rule makes its largest entry positive */
    for (int i = 0; i < 3; i++)
        assert_true(nx_test_close(v[i * 3 + 2], u[i], 1e-13, 1e-13));
    double dwv[3] = {0.3, -0.2, 1.0}, dvv[9];
    for (int i = 0; i < 9; i++)
        dvv[i] = 0.1 * (i % 4) - 0.15;
    nx_tensor *dy[2] = {f64(ctx, 1, &sw, dwv), f64(ctx, 2, s, dvv)}, *dx[1] = {0};
    assert_int_equal(nx_op_vjp(ctx, "eigh", 1, (const nx_tensor *[]){a}, 0, NULL, NULL, 2,
                               (const nx_tensor *const *)dy, dx),
                     NX_OK);
    for (int i = 0; i < 9; i++)
        assert_true(isfinite(d(dx[0])[i]));
    /* only the lower triangle is read: no gradient above the diagonal */
    assert_true(d(dx[0])[1] == 0 && d(dx[0])[2] == 0 && d(dx[0])[5] == 0);
    nx_tensor_free(dy[0]);
    nx_tensor_free(dy[1]);
    nx_tensor_free(dx[0]);
    nx_tensor_free(out[0]);
    nx_tensor_free(out[1]);
    nx_tensor_free(a);
    nx_ctx_free(ctx);
}

static void test_bad_input(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t rect[2] = {3, 4}, sq[2] = {3, 3}, big[2] = {33, 33}, vec[1] = {4}, b3[2] = {2, 3};
    nx_tensor *r = f64(ctx, 2, rect, NULL), *a = f64(ctx, 2, sq, spd3), *g = f64(ctx, 2, big, NULL);
    nx_tensor *v = f64(ctx, 1, vec, NULL), *bb = f64(ctx, 2, b3, NULL), *out[2] = {0};
    nx_tensor *ai = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_I32, 2, sq, &ai), NX_OK);
    memset(nx_tensor_data(ai), 0, 9 * sizeof(int32_t));
    expect_error(ctx, NX_ERR_SHAPE,
                 call(ctx, "cholesky", 1, (const nx_tensor *[]){r}, 0, NULL, NULL, 2, out),
                 "square");
    expect_error(ctx, NX_ERR_SHAPE,
                 call(ctx, "inv_logdet", 1, (const nx_tensor *[]){g}, 0, NULL, NULL, 2, out),
                 "p <= 32");
    expect_error(ctx, NX_ERR_SHAPE,
                 call(ctx, "eigh", 1, (const nx_tensor *[]){v}, 0, NULL, NULL, 2, out),
                 "square");
    expect_error(ctx, NX_ERR_DTYPE,
                 call(ctx, "cholesky", 1, (const nx_tensor *[]){ai}, 0, NULL, NULL, 2, out),
                 "float32 or float64");
    expect_error(ctx, NX_ERR_SHAPE,
                 call(ctx, "solve", 2, (const nx_tensor *[]){a, v}, 0, NULL, NULL, 1, out),
                 "does not fit");
    expect_error(ctx, NX_ERR_SHAPE,
                 call(ctx, "cho_solve", 2, (const nx_tensor *[]){a, bb}, 0, NULL, NULL, 1, out),
                 "does not fit");
    expect_error(ctx, NX_ERR_DTYPE,
                 call(ctx, "triangular_solve", 2, (const nx_tensor *[]){a, ai}, 0, NULL, NULL, 1,
                      out),
                 "one dtype");
    const char *ks[] = {"n_sweeps"}, *vs[] = {"65"};
    assert_int_not_equal(call(ctx, "eigh", 1, (const nx_tensor *[]){a}, 1, ks, vs, 2, out), NX_OK);
    const char *kl[] = {"l2"}, *vl[] = {"inf"};
    assert_int_not_equal(
        call(ctx, "cho_solve", 2, (const nx_tensor *[]){a, a}, 1, kl, vl, 1, out), NX_OK);
    expect_error(ctx, NX_ERR_SHAPE,
                 call(ctx, "vec2sym", 1, (const nx_tensor *[]){v}, 0, NULL, NULL, 1, out),
                 "no triangle");
    expect_error(ctx, NX_ERR_SHAPE,
                 call(ctx, "sym2vec", 1, (const nx_tensor *[]){r}, 0, NULL, NULL, 1, out),
                 "square");
    expect_error(ctx, NX_ERR_SHAPE,
                 call(ctx, "toeplitz", 2, (const nx_tensor *[]){a, bb}, 0, NULL, NULL, 1, out),
                 "leading");
    expect_error(ctx, NX_ERR_SHAPE,
                 call(ctx, "toeplitz_2d", 1, (const nx_tensor *[]){a}, 0, NULL, NULL, 1, out),
                 "vectors");
    expect_error(ctx, NX_ERR_SHAPE,
                 call(ctx, "rbf_kernel", 2, (const nx_tensor *[]){a, r}, 0, NULL, NULL, 1, out),
                 "features");
    expect_error(ctx, NX_ERR_SHAPE,
                 call(ctx, "linear_kernel", 3, (const nx_tensor *[]){a, a, v}, 0, NULL, NULL, 1,
                      out),
                 "theta");
    const char *ka[] = {"axes"}, *va[] = {"0,0"};
    expect_error(ctx, NX_ERR_INVALID_ARG,
                 call(ctx, "symmetric", 1, (const nx_tensor *[]){a}, 1, ka, va, 1, out),
                 "distinct");
    expect_error(ctx, NX_ERR_SHAPE,
                 call(ctx, "delete_diagonal", 1, (const nx_tensor *[]){r}, 0, NULL, NULL, 1, out),
                 "square");
    assert_null(out[0]);
    nx_tensor_free(r);
    nx_tensor_free(a);
    nx_tensor_free(g);
    nx_tensor_free(v);
    nx_tensor_free(bb);
    nx_tensor_free(ai);
    nx_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cholesky_failures),
        cmocka_unit_test(test_solve_singular_nan),
        cmocka_unit_test(test_logdet_gradient_is_inverse),
        cmocka_unit_test(test_eigh_degenerate),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
