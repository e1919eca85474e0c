/* The semiring and sparse rows of the op table: found by their spec names and their older CLI
 * names, called by name with text options (nx_op_call, nx_op_vjp), and checked against direct
 * loops; a user semiring's identity keys its programs (two user semirings of one name). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nitrix-ops.h"
#include "testutil.h"

static nx_ctx *ctx_new(void)
{
    static nx_test_alloc ta;
    memset(&ta, 0, sizeof ta);
    return nx_test_ctx(&ta);
}

static nx_tensor *mat(nx_ctx *ctx, nx_dtype dt, int64_t m, int64_t n, const double *v)
{
    int64_t s[2] = {m, n};
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, dt, 2, s, &t), NX_OK);
    for (int64_t i = 0; i < m * n; i++) {
        if (dt == NX_DTYPE_F64)
            ((double *)nx_tensor_data(t))[i] = v[i];
        else
            ((int64_t *)nx_tensor_data(t))[i] = (int64_t)v[i];
    }
    return t;
}

static double at(const nx_tensor *t, int64_t i)
{
    return ((const double *)nx_tensor_data(t))[i];
}

static void expect(const char *what, const nx_tensor *got, const double *want, int64_t n)
{
    assert_non_null(got);
    assert_int_equal(nx_tensor_numel(got), n);
    for (int64_t i = 0; i < n; i++)
        if (!nx_test_close(at(got, i), want[i], 1e-12, 1e-12))
            fail_msg("%s: element %lld is %.17g, expected %.17g", what, (long long)i, at(got, i),
                     want[i]);
}

static void test_rows(void **state)
{
    (void)state;
    static const char *const names[] = {"semiring_matmul",
                                        "semiring_conv",
                                        "pairwise_reduce",
                                        "semiring_ell_matmul",
                                        "semiring_ell_rmatvec",
                                        "semiring_ell_edge_aggregate",
                                        "ell_row_softmax",
                                        "sectioned_semiring_ell_matmul",
                                        "sectioned_semiring_ell_rmatvec",
                                        "grid_laplacian"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const nx_op_info *op = nx_op_find(names[i]);
        if (!op)
            fail_msg("no row %s", names[i]);
        assert_string_equal(op->name, names[i]);
    }
    /* the command line's older names, any case */
    static const char *const alias[][2] = {
        {"ell_matmul", "semiring_ell_matmul"},
        {"ELL_RMATVEC", "semiring_ell_rmatvec"},
        {"ell_edge_aggregate", "semiring_ell_edge_aggregate"},
        {"sectioned_ell_matmul", "sectioned_semiring_ell_matmul"}};
    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++) {
        const nx_op_info *op = nx_op_find(alias[i][0]);
        assert_non_null(op);
        assert_string_equal(op->name, alias[i][1]);
    }
    const nx_op_info *rmv = nx_op_find("semiring_ell_rmatvec");
    assert_string_equal(rmv->driver_site, "ell_rmatvec");
    assert_string_equal(rmv->family, "semiring");
    assert_string_equal(nx_op_find("grid_laplacian")->family, "sparse");
    assert_false(nx_op_find("semiring_ell_edge_aggregate")->differentiable);
}

/* C = A (x) B by loops under max-plus: C_ij = max_k A_ik + B_kj. */
static void test_call_matmul(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    const double av[6] = {1, -2, 3, 0.5, 4, -1}, bv[6] = {2, 0, -1, 5, 3, 1};
    nx_tensor *a = mat(ctx, NX_DTYPE_F64, 2, 3, av), *b = mat(ctx, NX_DTYPE_F64, 3, 2, bv);
    double want[4];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            double m = -INFINITY;
            for (int k = 0; k < 3; k++)
                m = fmax(m, av[i * 3 + k] + bv[k * 2 + j]);
            want[i * 2 + j] = m;
        }
    const nx_tensor *in[2] = {a, b};
    static const char *const spell[] = {"TROPICAL_MAX_PLUS", "tropical_max_plus",
                                        "Tropical_Max_Plus"};
    for (int s = 0; s < 3; s++) {
        const char *keys[2] = {"semiring", "backend"}, *vals[2] = {spell[s], "ref"};
        nx_tensor *c = NULL;
        assert_int_equal(nx_op_call(ctx, "semiring_matmul", 2, in, 2, keys, vals, 1, &c), NX_OK);
        expect("tropical max-plus", c, want, 4);
        nx_tensor_free(c);
    }
    const char *keys[1] = {"semiring"}, *bad[1] = {"ring"};
    nx_tensor *c = NULL;
    assert_int_equal(nx_op_call(ctx, "semiring_matmul", 2, in, 1, keys, bad, 1, &c),
                     NX_ERR_INVALID_ARG);
    assert_null(c);
    /* inner dims differ: the op's own message, under the op's name */
    const nx_tensor *wrong[2] = {a, a};
    assert_int_equal(nx_op_call(ctx, "semiring_matmul", 2, wrong, 0, NULL, NULL, 1, &c),
                     NX_ERR_SHAPE);
    assert_string_equal(nx_ctx_last_error(ctx),
                        "semiring_matmul: A is 2x3 but B is 2x3 (inner dims differ)");
    /* the vjp by name under REAL: dA = dC B^T, dB = A^T dC */
    const double dv[4] = {1, 2, -1, 0.5};
    nx_tensor *dc = mat(ctx, NX_DTYPE_F64, 2, 2, dv), *dx[2] = {NULL, NULL};
    const nx_tensor *dys[1] = {dc};
    assert_int_equal(nx_op_vjp(ctx, "semiring_matmul", 2, in, 0, NULL, NULL, 1, dys, dx), NX_OK);
    double da[6], db[6];
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 3; k++) {
            da[i * 3 + k] = 0;
            for (int j = 0; j < 2; j++)
                da[i * 3 + k] += dv[i * 2 + j] * bv[k * 2 + j];
        }
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 2; j++) {
            db[k * 2 + j] = 0;
            for (int i = 0; i < 2; i++)
                db[k * 2 + j] += av[i * 3 + k] * dv[i * 2 + j];
        }
    expect("dA", dx[0], da, 6);
    expect("dB", dx[1], db, 6);
    nx_tensor_free(dx[0]), nx_tensor_free(dx[1]), nx_tensor_free(dc);
    nx_tensor_free(a), nx_tensor_free(b);
    nx_ctx_free(ctx);
}

/* Two user semirings with one name: a cache keyed by the name alone would give the second the
 * first one's program. */
static void test_user_semiring_key(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    nx_semiring *add = NULL, *mul = NULL;
    assert_int_equal(
        nx_semiring_parse(ctx, "u", "plus = max(a, b); times = a + b; zero = -inf", &add), NX_OK);
    assert_int_equal(
        nx_semiring_parse(ctx, "u", "plus = max(a, b); times = a * b; zero = -inf", &mul), NX_OK);
    const double av[4] = {1, 2, 3, 4}, bv[4] = {-1, 2, 0.5, 3};
    nx_tensor *a = mat(ctx, NX_DTYPE_F64, 2, 2, av), *b = mat(ctx, NX_DTYPE_F64, 2, 2, bv);
    nx_semiring_opts o = {.backend = NX_BACKEND_REF};
    nx_semiring *srs[2] = {add, mul};
    for (int s = 0; s < 2; s++) {
        double want[4];
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                double m = -INFINITY;
                for (int k = 0; k < 2; k++) {
                    double x = av[i * 2 + k], y = bv[k * 2 + j];
                    m = fmax(m, s == 0 ? x + y : x * y);
                }
                want[i * 2 + j] = m;
            }
        nx_tensor *c = NULL;
        assert_int_equal(nx_semiring_matmul(ctx, srs[s], a, b, &o, &c), NX_OK);
        expect(s == 0 ? "u = max-plus" : "u = max-times", c, want, 4);
        nx_tensor_free(c);
    }
    nx_semiring_free(add), nx_semiring_free(mul);
    nx_tensor_free(a), nx_tensor_free(b);
    nx_ctx_free(ctx);
}

/* A = [[2, 0, 1], [0, 0, 3]] as an ELL of 2 slots (row 1's first slot a pad), B 3 x 1. */
static void test_call_ell(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    nx_tensor *v = mat(ctx, NX_DTYPE_F64, 2, 2, (double[]){2, 1, 0, 3});
    nx_tensor *ix = mat(ctx, NX_DTYPE_I64, 2, 2, (double[]){0, 2, 0, 2});
    nx_tensor *b = mat(ctx, NX_DTYPE_F64, 3, 1, (double[]){1, 10, 100});
    nx_tensor *x = mat(ctx, NX_DTYPE_F64, 2, 1, (double[]){1, 2});
    const nx_tensor *in[3] = {v, ix, b};
    nx_tensor *y = NULL;
    /* n_cols defaults to B's rows */
    assert_int_equal(nx_op_call(ctx, "ell_matmul", 3, in, 0, NULL, NULL, 1, &y), NX_OK);
    expect("ell_matmul", y, (double[]){102, 300}, 2);
    nx_tensor_free(y);
    const char *nk[1] = {"n_cols"}, *two[1] = {"2"};
    assert_int_equal(nx_op_call(ctx, "semiring_ell_matmul", 3, in, 1, nk, two, 1, &y),
                     NX_ERR_INVALID_ARG); /* index 2 >= n_cols = 2 */
    assert_null(y);
    /* A^T x: [2, 0, 1 + 6], by either driver; n_cols is required */
    const nx_tensor *rin[3] = {v, ix, x};
    assert_int_equal(nx_op_call(ctx, "semiring_ell_rmatvec", 3, rin, 0, NULL, NULL, 1, &y),
                     NX_ERR_INVALID_ARG);
    static const char *const drivers[] = {"gather", "scatter", "auto"};
    for (int d = 0; d < 3; d++) {
        const char *keys[2] = {"n_cols", "driver"}, *vals[2] = {"3", drivers[d]};
        assert_int_equal(nx_op_call(ctx, "semiring_ell_rmatvec", 3, rin, 2, keys, vals, 1, &y),
                         NX_OK);
        expect(drivers[d], y, (double[]){2, 0, 7}, 3);
        nx_tensor_free(y);
    }
    /* the vjp by name: dvalues[i, p] = dC[i] B[idx[i, p]], the indices none, dB = A^T dC */
    nx_tensor *dc = mat(ctx, NX_DTYPE_F64, 2, 1, (double[]){1, -1});
    const nx_tensor *dys[1] = {dc};
    nx_tensor *dx[3] = {NULL, NULL, NULL};
    assert_int_equal(nx_op_vjp(ctx, "semiring_ell_matmul", 3, in, 0, NULL, NULL, 1, dys, dx),
                     NX_OK);
    expect("dvalues", dx[0], (double[]){1, 100, -1, -100}, 4);
    assert_null(dx[1]);
    expect("dB", dx[2], (double[]){2, 0, 1 - 3}, 3);
    nx_tensor_free(dx[0]), nx_tensor_free(dx[2]), nx_tensor_free(dc);
    nx_tensor_free(v), nx_tensor_free(ix), nx_tensor_free(b), nx_tensor_free(x);
    nx_ctx_free(ctx);
}

/* scipy.ndimage.laplace of [1, 4, 9, 16]: reflect [3, 2, 2, -7], wrap [18, 2, 2, -22]. */
static void test_call_laplacian(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t n = 4;
    nx_tensor *x = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 1, &n, &x), NX_OK);
    for (int i = 0; i < 4; i++)
        ((double *)nx_tensor_data(x))[i] = (i + 1) * (i + 1);
    const nx_tensor *in[1] = {x};
    nx_tensor *y = NULL;
    assert_int_equal(nx_op_call(ctx, "grid_laplacian", 1, in, 0, NULL, NULL, 1, &y), NX_OK);
    expect("reflect", y, (double[]){3, 2, 2, -7}, 4);
    nx_tensor_free(y);
    const char *k3[3] = {"boundary", "spacing", "sign"}, *v3[3] = {"periodic", "2", "positive"};
    assert_int_equal(nx_op_call(ctx, "grid_laplacian", 1, in, 3, k3, v3, 1, &y), NX_OK);
    expect("periodic, h = 2, positive", y, (double[]){-4.5, -0.5, -0.5, 5.5}, 4);
    nx_tensor_free(y);
    const char *km[1] = {"mode"}, *vm[1] = {"wrap"};
    assert_int_equal(nx_op_call(ctx, "grid_laplacian", 1, in, 1, km, vm, 1, &y), NX_OK);
    expect("wrap", y, (double[]){18, 2, 2, -22}, 4);
    nx_tensor_free(y);
    const char *ks[1] = {"spacing"}, *vs[1] = {"0"};
    assert_int_equal(nx_op_call(ctx, "grid_laplacian", 1, in, 1, ks, vs, 1, &y),
                     NX_ERR_INVALID_ARG);
    nx_tensor_free(x);
    nx_ctx_free(ctx);
}

/* out_i = min_j |x_i - y_j|^2 and the kmin default k = 1, by loops. */
static void test_call_pairwise(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    const double xv[4] = {0, 0, 1, 1}, yv[6] = {0, 1, 2, 2, 1, 1};
    nx_tensor *x = mat(ctx, NX_DTYPE_F64, 2, 2, xv), *y = mat(ctx, NX_DTYPE_F64, 3, 2, yv);
    double want[2];
    for (int i = 0; i < 2; i++) {
        want[i] = INFINITY;
        for (int j = 0; j < 3; j++) {
            double dx = xv[i * 2] - yv[j * 2], dy = xv[i * 2 + 1] - yv[j * 2 + 1];
            want[i] = fmin(want[i], dx * dx + dy * dy);
        }
    }
    const nx_tensor *in[2] = {x, y};
    static const char *const red[] = {"min", "KMIN"};
    for (int r = 0; r < 2; r++) {
        const char *keys[3] = {"kernel", "reduction", "backend"},
                   *vals[3] = {"sqdist", red[r], "ref"};
        nx_tensor *out = NULL;
        nx_status st = nx_op_call(ctx, "pairwise_reduce", 2, in, 3, keys, vals, 1, &out);
        if (st != NX_OK)
            fail_msg("%s: %s", red[r], nx_ctx_last_error(ctx));
        expect(red[r], out, want, 2);
        nx_tensor_free(out);
    }
    nx_tensor_free(x), nx_tensor_free(y);
    nx_ctx_free(ctx);
}

/* The SectionedELL rows on CSR rows equal the flat ELL of the same matrix, forward and vjp:
 * A = [[2, _, 1], [_, _, _], [_, 3, _]] (row 1 empty), B 3 x 2. */
static void test_call_sectioned(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t n4 = 4, n3 = 3;
    nx_tensor *off = NULL, *idx = NULL, *val = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_I64, 1, &n4, &off), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_I64, 1, &n3, &idx), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 1, &n3, &val), NX_OK);
    const int64_t ov[4] = {0, 2, 2, 3}, iv[3] = {0, 2, 1};
    const double vv[3] = {2, 1, 3};
    memcpy(nx_tensor_data(off), ov, sizeof ov);
    memcpy(nx_tensor_data(idx), iv, sizeof iv);
    memcpy(nx_tensor_data(val), vv, sizeof vv);
    const double bv[6] = {1, 2, 3, 4, 5, 6};
    nx_tensor *b = mat(ctx, NX_DTYPE_F64, 3, 2, bv), *c = NULL;
    const nx_tensor *in[4] = {off, idx, val, b};
    assert_int_equal(nx_op_call(ctx, "sectioned_ell_matmul", 4, in, 0, NULL, NULL, 1, &c), NX_OK);
    expect("sectioned matmul", c, (double[]){2 + 5, 4 + 6, 0, 0, 9, 12}, 6);
    nx_tensor_free(c);
    /* vjp: dvalues[e] = sum_j dC[row(e), j] B[col(e), j]; dB[q, j] = sum_e val[e] dC[row(e), j] */
    const double dv[6] = {1, -1, 5, 5, 2, 0.5};
    nx_tensor *dc = mat(ctx, NX_DTYPE_F64, 3, 2, dv), *dx[4] = {NULL, NULL, NULL, NULL};
    const nx_tensor *dys[1] = {dc};
    assert_int_equal(
        nx_op_vjp(ctx, "sectioned_semiring_ell_matmul", 4, in, 0, NULL, NULL, 1, dys, dx), NX_OK);
    assert_null(dx[0]);
    assert_null(dx[1]);
    expect("dvalues", dx[2], (double[]){1 * 1 - 1 * 2, 1 * 5 - 1 * 6, 2 * 3 + 0.5 * 4}, 3);
    expect("dB", dx[3], (double[]){2 * 1, 2 * -1, 3 * 2, 3 * 0.5, 1 * 1, 1 * -1}, 6);
    nx_tensor_free(dx[2]), nx_tensor_free(dx[3]), nx_tensor_free(dc);
    nx_tensor_free(off), nx_tensor_free(idx), nx_tensor_free(val), nx_tensor_free(b);
    nx_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_call_matmul),
        cmocka_unit_test(test_user_semiring_key),
        cmocka_unit_test(test_call_ell),
        cmocka_unit_test(test_call_laplacian),
        cmocka_unit_test(test_call_pairwise),
        cmocka_unit_test(test_call_sectioned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
