/* ELL contractions against float64 NumPy brute force (tools/gen-sparse-golden.py): matmul under
 * the six algebras and two user semirings (a built-in and a custom (+)), rmatvec (fast and
 * reproducible), row softmax; index validation naming row and slot; finite-difference gradients;
 * the program cache; allocation-failure sweeps. Each golden case runs on ref and on the backend
 * named by NX_TEST_BACKEND (cpu by default; cuda skips cleanly without a GPU). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "sparse-test.h"

/* ---- golden ----------------------------------------------------------------------------------*/

static nx_ell load_ell(nx_ctx *ctx, const char *name, const char *n_cols, const char *ident)
{
    nx_ell e = {.values = st_load(ctx, name, "values"), .indices = st_load(ctx, name, "indices")};
    e.n_cols = atoll(n_cols);
    e.identity = strtod(ident, NULL);
    return e;
}

static void matmul_case(nx_ctx *ctx, nx_backend be, char *const *f, int nf)
{
    assert_int_equal(nf, 5);
    nx_semiring *user = NULL;
    const nx_semiring *sr = st_semiring(ctx, f[2], &user);
    nx_ell a = load_ell(ctx, f[1], f[3], f[4]);
    nx_tensor *b = st_load(ctx, f[1], "b"), *want = st_load(ctx, f[1], "out"), *got = NULL;
    nx_semiring_opts o = {.backend = be};
    if (nx_semiring_ell_matmul(ctx, sr, &a, b, &o, &got) != NX_OK)
        fail_msg("%s on %s: %s", f[1], nx_backend_name(be), nx_ctx_last_error(ctx));
    st_expect_close(f[1], be, got, want, f[2]);
    nx_ell_free(&a);
    nx_tensor_free(b), nx_tensor_free(want), nx_tensor_free(got);
    nx_semiring_free(user);
}

static void test_matmul_golden(void **state)
{
    (void)state;
    assert_int_equal(st_for_cases("matmul", matmul_case), 16);
}

static void rmatvec_case(nx_ctx *ctx, nx_backend be, char *const *f, int nf)
{
    assert_int_equal(nf, 5);
    nx_ell a = load_ell(ctx, f[1], f[3], f[4]);
    nx_tensor *x = st_load(ctx, f[1], "x"), *want = st_load(ctx, f[1], "out");
    nx_semiring_opts o = {.backend = be};
    const nx_semiring *real = nx_semiring_builtin(NX_SEMIRING_REAL);
    for (int repro = 0; repro < 2; repro++) {
        nx_tensor *got = NULL;
        assert_int_equal(nx_ctx_reproducible_push(ctx, repro), NX_OK);
        nx_status st = nx_semiring_ell_rmatvec(ctx, real, &a, x, &o, &got);
        assert_int_equal(nx_ctx_reproducible_pop(ctx), NX_OK);
        if (st != NX_OK)
            fail_msg("%s on %s: %s", f[1], nx_backend_name(be), nx_ctx_last_error(ctx));
        st_expect_close(f[1], be, got, want, "real");
        nx_tensor_free(got);
    }
    nx_ell_free(&a);
    nx_tensor_free(x), nx_tensor_free(want);
}

static void test_rmatvec_golden(void **state)
{
    (void)state;
    assert_int_equal(st_for_cases("rmatvec", rmatvec_case), 4);
}

static void softmax_case(nx_ctx *ctx, nx_backend be, char *const *f, int nf)
{
    assert_int_equal(nf, 5);
    nx_ell a = load_ell(ctx, f[1], f[3], f[4]);
    nx_tensor *x = st_load(ctx, f[1], "x"), *want = st_load(ctx, f[1], "out"), *got = NULL;
    nx_semiring_opts o = {.backend = be};
    if (nx_ell_row_softmax(ctx, &a, x, &o, &got) != NX_OK)
        fail_msg("%s on %s: %s", f[1], nx_backend_name(be), nx_ctx_last_error(ctx));
    st_expect_close(f[1], be, got, want, NULL);
    nx_ell_free(&a);
    nx_tensor_free(x), nx_tensor_free(want), nx_tensor_free(got);
}

static void test_softmax_golden(void **state)
{
    (void)state;
    assert_int_equal(st_for_cases("softmax", softmax_case), 2);
}

/* Reproducible rmatvec folds each output in ascending (i, p) order on every backend: ref and the
 * backend under test agree bit for bit, and repeated runs do too. */
static void test_rmatvec_reproducible_bitwise(void **state)
{
    (void)state;
    nx_backend be = st_backend();
    nx_ctx *ctx = st_ctx();
    nx_ell a = load_ell(ctx, "rmv_1_float64", "6", "0.0");
    nx_tensor *x = st_load(ctx, "rmv_1_float64", "x"), *y[3] = {NULL, NULL, NULL};
    const nx_semiring *real = nx_semiring_builtin(NX_SEMIRING_REAL);
    nx_backend bes[3] = {NX_BACKEND_REF, be, be};
    assert_int_equal(nx_ctx_reproducible_push(ctx, true), NX_OK);
    for (int r = 0; r < 3; r++) {
        nx_semiring_opts o = {.backend = bes[r]};
        assert_int_equal(nx_semiring_ell_rmatvec(ctx, real, &a, x, &o, &y[r]), NX_OK);
    }
    assert_int_equal(nx_ctx_reproducible_pop(ctx), NX_OK);
    size_t bytes = (size_t)nx_tensor_numel(y[0]) * sizeof(double);
    assert_memory_equal(nx_tensor_data(y[0]), nx_tensor_data(y[1]), bytes);
    assert_memory_equal(nx_tensor_data(y[1]), nx_tensor_data(y[2]), bytes);
    for (int r = 0; r < 3; r++)
        nx_tensor_free(y[r]);
    nx_tensor_free(x);
    nx_ell_free(&a);
    nx_ctx_free(ctx);
}

/* ---- edge aggregation ------------------------------------------------------------------------*/

/* F = w * (hj - hi) + 0.1 * ij + e, as the generator's. */
static nx_node edge_fn(nx_graph *g, nx_node hi, nx_node hj, nx_node w, nx_node ij, nx_node e,
                       void *user)
{
    (void)user;
    nx_dtype dt = nx_node_dtype(g, hi);
    nx_node t = nx_add(g, nx_mul(g, w, nx_sub(g, hj, hi)), nx_mul(g, nx_scalar(g, dt, 0.1), ij));
    return nx_add(g, t, e);
}

static void edge_case(nx_ctx *ctx, nx_backend be, char *const *f, int nf)
{
    assert_int_equal(nf, 5);
    nx_semiring *user = NULL;
    const nx_semiring *sr = st_semiring(ctx, f[2], &user);
    nx_ell a = load_ell(ctx, f[1], f[3], f[4]);
    nx_tensor *h = st_load(ctx, f[1], "h"), *e = st_load(ctx, f[1], "e");
    nx_tensor *want = st_load(ctx, f[1], "out"), *got = NULL;
    nx_edge_opts o = {.backend = be, .expr = edge_fn, .expr_key = "test-edge"};
    if (nx_semiring_ell_edge_aggregate(ctx, sr, &a, h, e, &o, &got) != NX_OK)
        fail_msg("%s on %s: %s", f[1], nx_backend_name(be), nx_ctx_last_error(ctx));
    st_expect_close(f[1], be, got, want, "real");
    /* LOG has no edge fold; no builder is refused. */
    nx_tensor *bad = NULL;
    assert_int_equal(nx_semiring_ell_edge_aggregate(ctx, nx_semiring_builtin(NX_SEMIRING_LOG), &a,
                                                    h, e, &o, &bad),
                     NX_ERR_UNSUPPORTED);
    o.expr = NULL;
    assert_int_equal(nx_semiring_ell_edge_aggregate(ctx, sr, &a, h, e, &o, &bad),
                     NX_ERR_INVALID_ARG);
    assert_null(bad);
    /* The same F as a formula; pairwise names and e without attributes are refused. */
    o = (nx_edge_opts){.backend = be, .formula = "w * (hj - hi) + 0.1 * ij + e"};
    nx_tensor *again = NULL;
    if (nx_semiring_ell_edge_aggregate(ctx, sr, &a, h, e, &o, &again) != NX_OK)
        fail_msg("%s formula on %s: %s", f[1], nx_backend_name(be), nx_ctx_last_error(ctx));
    st_expect_close(f[1], be, again, want, "real");
    nx_tensor_free(again);
    o.formula = "w * x";
    assert_int_not_equal(nx_semiring_ell_edge_aggregate(ctx, sr, &a, h, e, &o, &bad), NX_OK);
    o.formula = "w * hj + e";
    assert_int_equal(nx_semiring_ell_edge_aggregate(ctx, sr, &a, h, NULL, &o, &bad),
                     NX_ERR_INVALID_ARG);
    assert_null(bad);
    nx_ell_free(&a);
    nx_tensor_free(h), nx_tensor_free(e), nx_tensor_free(want), nx_tensor_free(got);
    nx_semiring_free(user);
}

static void test_edge_golden(void **state)
{
    (void)state;
    assert_int_equal(st_for_cases("edge", edge_case), 3);
}

/* ---- hand-checked ----------------------------------------------------------------------------*/

/* A = [[2, 0, 1], [0, 0, 0], [0, 3, 0]] with a pad in row 0 and an all-pad row 1; B = I + 1. */
static void test_hand_matmul(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    nx_ell a = st_ell(ctx, 3, 3, 3, (double[]){2, 1, 0, 0, 0, 0, 3, 0, 0},
                      (int64_t[]){0, 2, 0, 0, 0, 0, 1, 0, 0}, 0.0);
    nx_tensor *b = st_mat(ctx, 3, 2, (double[]){1, 2, 3, 4, 5, 6}), *c = NULL;
    nx_semiring_opts o = {.backend = st_backend()};
    assert_int_equal(
        nx_semiring_ell_matmul(ctx, nx_semiring_builtin(NX_SEMIRING_REAL), &a, b, &o, &c), NX_OK);
    const double want[] = {2 * 1 + 5, 2 * 2 + 6, 0, 0, 9, 12};
    st_expect_values("hand matmul", c, want, 6);
    nx_tensor_free(c);
    /* Max-plus over the same slots: pads hold -inf there. */
    nx_ell_free(&a);
    a = st_ell(
        ctx, 3, 3, 3,
        (double[]){2, 1, -INFINITY, -INFINITY, -INFINITY, -INFINITY, 3, -INFINITY, -INFINITY},
        (int64_t[]){0, 2, 0, 0, 0, 0, 1, 0, 0}, -INFINITY);
    assert_int_equal(nx_semiring_ell_matmul(ctx, nx_semiring_builtin(NX_SEMIRING_TROPICAL_MAX_PLUS),
                                            &a, b, &o, &c),
                     NX_OK);
    const double want_mp[] = {6, 7, -INFINITY, -INFINITY, 6, 7};
    st_expect_values("hand max-plus", c, want_mp, 6);
    nx_tensor_free(c);
    nx_ell_free(&a);
    nx_tensor_free(b);
    nx_ctx_free(ctx);
}

/* k_max = 0: every output is the (+)-identity. */
static void test_empty_slots(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    nx_ell a = st_ell(ctx, 2, 0, 3, NULL, NULL, -INFINITY);
    nx_tensor *b = st_mat(ctx, 3, 1, (double[]){1, 2, 3}), *c = NULL;
    nx_semiring_opts o = {.backend = st_backend()};
    assert_int_equal(
        nx_semiring_ell_matmul(ctx, nx_semiring_builtin(NX_SEMIRING_LOG), &a, b, &o, &c), NX_OK);
    st_expect_values("empty slots", c, (double[]){-INFINITY, -INFINITY}, 2);
    nx_tensor_free(c), nx_tensor_free(b);
    nx_ell_free(&a);
    nx_ctx_free(ctx);
}

/* ---- bad input -------------------------------------------------------------------------------*/

static void expect_error(nx_ctx *ctx, nx_status got, nx_status want, const char *needle)
{
    if (got != want)
        fail_msg("status %s, expected %s (%s)", nx_status_str(got), nx_status_str(want),
                 nx_ctx_last_error(ctx));
    if (!strstr(nx_ctx_last_error(ctx), needle))
        fail_msg("message \"%s\" lacks \"%s\"", nx_ctx_last_error(ctx), needle);
}

static void test_bad_indices(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    const nx_semiring *real = nx_semiring_builtin(NX_SEMIRING_REAL);
    nx_tensor *b = st_mat(ctx, 3, 1, (double[]){1, 2, 3}), *c = NULL;
    nx_ell a = st_ell(ctx, 2, 2, 3, (double[]){1, 1, 1, 1}, (int64_t[]){0, 1, 2, 3}, 0.0);
    expect_error(ctx, nx_semiring_ell_matmul(ctx, real, &a, b, NULL, &c), NX_ERR_INVALID_ARG,
                 "index 3 at row 1, slot 1 is out of range");
    assert_null(c);
    nx_ell_free(&a);
    a = st_ell(ctx, 2, 2, 3, (double[]){1, 1, 1, 1}, (int64_t[]){0, -1, 2, 0}, 0.0);
    expect_error(ctx, nx_semiring_ell_matmul(ctx, real, &a, b, NULL, &c), NX_ERR_INVALID_ARG,
                 "index -1 at row 0, slot 1 is negative");
    expect_error(ctx, nx_semiring_ell_rmatvec(ctx, real, &a, b, NULL, &c), NX_ERR_INVALID_ARG,
                 "row 0, slot 1");
    /* Float indices. */
    nx_tensor_free(a.indices);
    a.indices = st_mat(ctx, 2, 2, (double[]){0, 1, 2, 0});
    expect_error(ctx, nx_semiring_ell_matmul(ctx, real, &a, b, NULL, &c), NX_ERR_INVALID_ARG,
                 "indices are f64; expected i32 or i64");
    nx_ell_free(&a);
    /* Shapes: values and indices disagree; B's rows are not n_cols; B's dtype. */
    a = st_ell(ctx, 2, 2, 3, (double[]){1, 1, 1, 1}, (int64_t[]){0, 1, 2, 0}, 0.0);
    nx_tensor *idx = a.indices;
    a.indices = st_index(ctx, 1, 4, (int64_t[]){0, 1, 2, 0}, NX_DTYPE_I32);
    expect_error(ctx, nx_semiring_ell_matmul(ctx, real, &a, b, NULL, &c), NX_ERR_SHAPE,
                 "indices [m, k_max]");
    nx_tensor_free(a.indices);
    a.indices = idx;
    nx_tensor *b4 = st_mat(ctx, 4, 1, (double[]){1, 2, 3, 4});
    expect_error(ctx, nx_semiring_ell_matmul(ctx, real, &a, b4, NULL, &c), NX_ERR_SHAPE,
                 "B has 4 rows; expected 3");
    nx_tensor *b32 = NULL;
    assert_int_equal(nx_tensor_cast(b, NX_DTYPE_F32, &b32), NX_OK);
    expect_error(ctx, nx_semiring_ell_matmul(ctx, real, &a, b32, NULL, &c), NX_ERR_DTYPE,
                 "expected one dtype");
    expect_error(ctx, nx_semiring_ell_matmul(ctx, NULL, &a, b, NULL, &c), NX_ERR_INVALID_ARG,
                 "semiring is NULL");
    expect_error(ctx, nx_semiring_ell_matmul(ctx, real, NULL, b, NULL, &c), NX_ERR_INVALID_ARG,
                 "the ELL is NULL");
    a.n_cols = -1;
    expect_error(ctx, nx_semiring_ell_matmul(ctx, real, &a, b, NULL, &c), NX_ERR_INVALID_ARG,
                 "n_cols -1");
    a.n_cols = 3;
    /* rmatvec is REAL only. */
    nx_tensor *x = st_mat(ctx, 2, 1, (double[]){1, 2});
    expect_error(
        ctx, nx_semiring_ell_rmatvec(ctx, nx_semiring_builtin(NX_SEMIRING_LOG), &a, x, NULL, &c),
        NX_ERR_UNSUPPORTED, "under 'real' only");
    nx_tensor_free(x), nx_tensor_free(b), nx_tensor_free(b4), nx_tensor_free(b32);
    nx_ell_free(&a);
    nx_ctx_free(ctx);
}

/* ---- cache -----------------------------------------------------------------------------------*/

/* A second call with the same key is a cache hit and inserts nothing. */
static void test_cache_hit(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    nx_ell a = st_ell(ctx, 2, 2, 3, (double[]){1, 2, 3, 4}, (int64_t[]){0, 1, 2, 0}, 0.0);
    nx_tensor *b = st_mat(ctx, 3, 1, (double[]){1, 2, 3}), *c = NULL;
    nx_semiring_opts o = {.backend = NX_BACKEND_REF};
    const nx_semiring *real = nx_semiring_builtin(NX_SEMIRING_REAL);
    assert_int_equal(nx_semiring_ell_matmul(ctx, real, &a, b, &o, &c), NX_OK);
    nx_tensor_free(c);
    nx_rt_cache *cache = NULL;
    assert_int_equal(nx_rt_cache_of(ctx, &cache), NX_OK);
    nx_rt_cache_stats s0, s1;
    nx_rt_cache_get_stats(cache, &s0);
    assert_int_equal(nx_semiring_ell_matmul(ctx, real, &a, b, &o, &c), NX_OK);
    nx_rt_cache_get_stats(cache, &s1);
    assert_int_equal(s1.find_hits, s0.find_hits + 1);
    assert_int_equal(s1.inserts, s0.inserts);
    st_expect_values("cached", c, (double[]){1 * 1 + 2 * 2, 3 * 3 + 4 * 1}, 2);
    /* Another n_cols is another program. */
    a.n_cols = 4;
    nx_tensor *b4 = st_mat(ctx, 4, 1, (double[]){1, 2, 3, 4}), *c4 = NULL;
    assert_int_equal(nx_semiring_ell_matmul(ctx, real, &a, b4, &o, &c4), NX_OK);
    nx_rt_cache_get_stats(cache, &s0);
    assert_int_equal(s0.inserts, s1.inserts + 1);
    nx_tensor_free(c), nx_tensor_free(c4), nx_tensor_free(b4), nx_tensor_free(b);
    nx_ell_free(&a);
    nx_ctx_free(ctx);
}

/* ---- allocation sweeps -----------------------------------------------------------------------*/

static nx_status sweep_body(nx_ctx *ctx, void *user)
{
    (void)user;
    nx_status st = NX_OK;
    nx_tensor *vals = NULL, *idx = NULL, *b = NULL, *c = NULL, *d = NULL, *g[2] = {NULL, NULL};
    int64_t s[2] = {2, 2}, bs[2] = {3, 2};
    if ((st = nx_tensor_new(ctx, NX_DTYPE_F64, 2, s, &vals)) != NX_OK ||
        (st = nx_tensor_new(ctx, NX_DTYPE_I32, 2, s, &idx)) != NX_OK ||
        (st = nx_tensor_new(ctx, NX_DTYPE_F64, 2, bs, &b)) != NX_OK)
        goto done;
    ((double *)nx_tensor_data(vals))[0] = 1.5;
    ((int32_t *)nx_tensor_data(idx))[3] = 2;
    nx_ell a = {.values = vals, .indices = idx, .n_cols = 3, .identity = 0.0};
    nx_semiring_opts o = {.backend = NX_BACKEND_REF};
    const nx_semiring *real = nx_semiring_builtin(NX_SEMIRING_REAL);
    if ((st = nx_semiring_ell_matmul(ctx, real, &a, b, &o, &c)) != NX_OK)
        goto done;
    if ((st = nx_semiring_ell_matmul_vjp(ctx, real, &a, b, c, &o, &g[0], &g[1])) != NX_OK)
        goto done;
    nx_tensor_free(g[0]), nx_tensor_free(g[1]);
    g[0] = g[1] = NULL;
    if ((st = nx_ctx_reproducible_push(ctx, true)) != NX_OK)
        goto done;
    st = nx_semiring_ell_rmatvec(ctx, real, &a, c, &o, &d);
    nx_ctx_reproducible_pop(ctx);
    if (st != NX_OK)
        goto done;
    nx_tensor_free(d);
    d = NULL;
    st = nx_ell_row_softmax(ctx, &a, vals, &o, &d);
done:
    nx_tensor_free(vals), nx_tensor_free(idx), nx_tensor_free(b), nx_tensor_free(c);
    nx_tensor_free(d), nx_tensor_free(g[0]), nx_tensor_free(g[1]);
    return st;
}

static void test_alloc_sweep(void **state)
{
    (void)state;
    assert_true(nx_test_alloc_sweep(sweep_body, NULL, 20000) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_golden),
        cmocka_unit_test(test_rmatvec_golden),
        cmocka_unit_test(test_rmatvec_reproducible_bitwise),
        cmocka_unit_test(test_softmax_golden),
        cmocka_unit_test(test_edge_golden),
        cmocka_unit_test(test_hand_matmul),
        cmocka_unit_test(test_empty_slots),
        cmocka_unit_test(test_bad_indices),
        cmocka_unit_test(test_cache_hit),
        cmocka_unit_test(test_alloc_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
