/* The index range check folded into the ELL programs (the entry points' path for device indices):
 * the range flag is one more output of the op's own program, read after the run. Run here on the
 * host backends through nx_sparse_ell_folded, which takes that path whatever device the indices
 * are on: good indices give the hand-computed results (and the unfolded call's), bad ones give
 * NX_ERR_INVALID_ARG naming the row and slot with no result, for matmul, its VJP, rmatvec and row
 * softmax, i32 and i64 indices; and allocation failures are clean.
 *
 * Under the fake CUDA driver (NX_TEST_FAKE_DRIVER=1: host memory posing as device memory, no
 * kernel runs) the device halves: the flag and the indices read back from device tensors, and
 * device operands given to a host backend refused by name. On a GPU machine the entry points on
 * device tensors: the hand result, and bad indices named with no result (skipped elsewhere). */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/sparse/sparse.h"
#include "sparse-test.h"

static bool fake_driver(void)
{
    const char *v = getenv("NX_TEST_FAKE_DRIVER");
    return v && strcmp(v, "1") == 0;
}

static void expect_error(nx_ctx *ctx, nx_status got, nx_status want, const char *needle)
{
    if (got != want)
        fail_msg("status %s, expected %s (%s)", nx_status_str(got), nx_status_str(want),
                 nx_ctx_last_error(ctx));
    if (!strstr(nx_ctx_last_error(ctx), needle))
        fail_msg("message \"%s\" lacks \"%s\"", nx_ctx_last_error(ctx), needle);
}

/* A = [[2, 0, 1], [0, 0, 0], [0, 3, 0]] (row 0 has a pad, row 1 is all pads), B = [[1, 2], [3, 4],
 * [5, 6]]: A B = [[7, 10], [0, 0], [9, 12]] under REAL. */
static const double HAND_V[9] = {2, 1, 0, 0, 0, 0, 3, 0, 0};
static const int64_t HAND_I[9] = {0, 2, 0, 0, 0, 0, 1, 0, 0};
static const double HAND_B[6] = {1, 2, 3, 4, 5, 6};

static void test_fold_matmul(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    nx_ell a = st_ell(ctx, 3, 3, 3, HAND_V, HAND_I, 0.0);
    nx_tensor *b = st_mat(ctx, 3, 2, HAND_B);
    const nx_semiring *real = nx_semiring_builtin(NX_SEMIRING_REAL);
    nx_backend bes[2] = {NX_BACKEND_REF, st_backend()};
    for (int k = 0; k < 2; k++) {
        nx_semiring_opts o = {.backend = bes[k]};
        nx_tensor *outs[2] = {NULL, NULL}, *plain = NULL;
        assert_int_equal(nx_sparse_ell_folded(ctx, "matmul", real, &a, b, NULL, &o, outs), NX_OK);
        st_expect_values("folded matmul", outs[0], (double[]){7, 10, 0, 0, 9, 12}, 6);
        assert_null(outs[1]);
        assert_int_equal(nx_semiring_ell_matmul(ctx, real, &a, b, &o, &plain), NX_OK);
        st_expect_close("folded = plain", bes[k], outs[0], plain, "real");
        nx_tensor_free(outs[0]), nx_tensor_free(plain);
    }
    /* LOG: C_ij = log sum_p exp(v_ip + B[idx_ip, j]) over the non-pad slots (pads -inf). */
    nx_ell_free(&a);
    const double ninf = -INFINITY;
    a = st_ell(ctx, 2, 2, 3, (double[]){0, ninf, 1, 2}, (int64_t[]){2, 0, 0, 1}, ninf);
    nx_semiring_opts o = {.backend = st_backend()};
    nx_tensor *outs[2] = {NULL, NULL};
    assert_int_equal(nx_sparse_ell_folded(ctx, "matmul", nx_semiring_builtin(NX_SEMIRING_LOG), &a,
                                          b, NULL, &o, outs),
                     NX_OK);
    const double want[4] = {5, 6, log(exp(1 + 1) + exp(2 + 3)), log(exp(1 + 2) + exp(2 + 4))};
    st_expect_values("folded log", outs[0], want, 4);
    nx_tensor_free(outs[0]);
    nx_tensor_free(b);
    nx_ell_free(&a);
    nx_ctx_free(ctx);
}

/* The VJP with the flag: d<dc, A B>/dvalues[i, p] = sum_j dc[i, j] B[idx[i, p], j] and
 * db[q, j] = sum_{(i, p): idx = q} values[i, p] dc[i, j], by hand for the ELL above. */
static void test_fold_vjp(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    nx_ell a = st_ell(ctx, 3, 3, 3, HAND_V, HAND_I, 0.0);
    nx_tensor *b = st_mat(ctx, 3, 2, HAND_B), *dc = st_mat(ctx, 3, 2, (double[]){1, 0, 0, 1, 1, 1});
    nx_semiring_opts o = {.backend = st_backend()};
    nx_tensor *outs[2] = {NULL, NULL};
    assert_int_equal(nx_sparse_ell_folded(ctx, "matmul", nx_semiring_builtin(NX_SEMIRING_REAL), &a,
                                          b, dc, &o, outs),
                     NX_OK);
    /* dvalues: row 0 (dc = [1, 0]): B rows 0, 2, 0 -> 1, 5, 1; row 1 (dc = [0, 1]): B rows 0, 0,
     * 0 -> 2, 2, 2; row 2 (dc = [1, 1]): B rows 1, 0, 0 -> 7, 3, 3. */
    st_expect_values("dvalues", outs[0], (double[]){1, 5, 1, 2, 2, 2, 7, 3, 3}, 9);
    /* db: row 0 gets 2 [1, 0] + 0 [1, 0] + 0 [0, 1] * 3 + 0 [1, 1] * 2 = [2, 0]; row 1 gets
     * 3 [1, 1] = [3, 3]; row 2 gets 1 [1, 0] = [1, 0]. */
    st_expect_values("db", outs[1], (double[]){2, 0, 3, 3, 1, 0}, 6);
    nx_tensor_free(outs[0]), nx_tensor_free(outs[1]);
    nx_tensor_free(b), nx_tensor_free(dc);
    nx_ell_free(&a);
    nx_ctx_free(ctx);
}

/* Bad indices through every folded op: INVALID_ARG naming the first bad row and slot (row-major
 * order, as the host check), and no result. */
static void expect_bad(nx_ctx *ctx, const nx_ell *a, const nx_tensor *b, const nx_tensor *dy,
                       const char *op, const char *needle)
{
    const nx_semiring *real = nx_semiring_builtin(NX_SEMIRING_REAL);
    nx_semiring_opts o = {.backend = st_backend(), .driver = "scatter"};
    nx_tensor *sentinel = (nx_tensor *)(uintptr_t)1;
    nx_tensor *outs[2] = {sentinel, sentinel};
    expect_error(ctx, nx_sparse_ell_folded(ctx, op, real, a, b, dy, &o, outs), NX_ERR_INVALID_ARG,
                 needle);
    assert_null(outs[0]);
    assert_null(outs[1]);
}

static void test_fold_bad_indices(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    nx_tensor *b = st_mat(ctx, 3, 1, (double[]){1, 2, 3});
    nx_tensor *x = st_mat(ctx, 2, 1, (double[]){1, 2});
    nx_tensor *s = st_mat(ctx, 2, 2, (double[]){0.5, 1, 2, 3});
    nx_tensor *dc = st_mat(ctx, 2, 1, (double[]){1, 1});
    nx_ell a = st_ell(ctx, 2, 2, 3, (double[]){1, 1, 1, 1}, (int64_t[]){0, 1, 2, 3}, 0.0);
    const char *over = "nx_sparse_ell_folded: index 3 at row 1, slot 1 is out of range; "
                       "expected 0 <= index < n_cols = 3";
    expect_bad(ctx, &a, b, NULL, "matmul", over);
    expect_bad(ctx, &a, b, dc, "matmul", over);
    expect_bad(ctx, &a, x, NULL, "rmatvec", over);
    expect_bad(ctx, &a, s, NULL, "softmax", over);
    nx_ell_free(&a);
    /* i32, a negative index, and a second bad one later: the first is named. */
    a = st_ell(ctx, 2, 2, 3, (double[]){1, 1, 1, 1}, (int64_t[]){0, 0, 0, 0}, 0.0);
    nx_tensor_free(a.indices);
    a.indices = st_index(ctx, 2, 2, (int64_t[]){0, -1, 7, 0}, NX_DTYPE_I32);
    expect_bad(ctx, &a, b, NULL, "matmul", "index -1 at row 0, slot 1 is negative");
    expect_bad(ctx, &a, x, b, "rmatvec", "index -1 at row 0, slot 1 is negative");
    /* n_cols = 0 makes every index bad; B then has no rows to gather from, so nothing may run. */
    nx_tensor_free(a.indices);
    a.indices = st_index(ctx, 2, 2, (int64_t[]){0, 0, 0, 0}, NX_DTYPE_I64);
    a.n_cols = 0;
    nx_tensor *b0 = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 2, (int64_t[]){0, 1}, &b0), NX_OK);
    expect_bad(ctx, &a, b0, NULL, "matmul", "index 0 at row 0, slot 0 is out of range");
    nx_tensor_free(b0), nx_tensor_free(b), nx_tensor_free(x), nx_tensor_free(s);
    nx_tensor_free(dc);
    nx_ell_free(&a);
    nx_ctx_free(ctx);
}

/* No index at all (k_max = 0): the flag is MAX's identity, not a bad index; every output is the
 * (+)-identity. */
static void test_fold_empty(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    nx_ell a = st_ell(ctx, 2, 0, 3, NULL, NULL, -INFINITY);
    nx_tensor *b = st_mat(ctx, 3, 1, (double[]){1, 2, 3});
    nx_semiring_opts o = {.backend = st_backend()};
    nx_tensor *outs[2] = {NULL, NULL};
    assert_int_equal(nx_sparse_ell_folded(ctx, "matmul", nx_semiring_builtin(NX_SEMIRING_LOG), &a,
                                          b, NULL, &o, outs),
                     NX_OK);
    st_expect_values("empty", outs[0], (double[]){-INFINITY, -INFINITY}, 2);
    nx_tensor_free(outs[0]), nx_tensor_free(b);
    nx_ell_free(&a);
    nx_ctx_free(ctx);
}

/* The flag reader on host flags: > 0 is bad; 0 and INT32_MIN (no index) are not. */
static void test_flag_values(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    nx_tensor *f = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_I32, 0, NULL, &f), NX_OK);
    const int32_t vals[3] = {1, 0, INT32_MIN};
    const bool want[3] = {true, false, false};
    for (int i = 0; i < 3; i++) {
        *(int32_t *)nx_tensor_data(f) = vals[i];
        bool bad = !want[i];
        assert_int_equal(nx_sparse_flag_bad(f, &bad), NX_OK);
        assert_int_equal(bad, want[i]);
    }
    nx_tensor_free(f);
    nx_ctx_free(ctx);
}

static nx_status sweep_body(nx_ctx *ctx, void *user)
{
    (void)user;
    nx_status st = NX_OK;
    nx_ell a = {0};
    nx_tensor *b = NULL, *outs[2] = {NULL, NULL};
    int64_t s2[2] = {2, 2}, s3[2] = {3, 1};
    if ((st = nx_tensor_new(ctx, NX_DTYPE_F64, 2, s2, &a.values)) != NX_OK ||
        (st = nx_tensor_new(ctx, NX_DTYPE_I64, 2, s2, &a.indices)) != NX_OK ||
        (st = nx_tensor_new(ctx, NX_DTYPE_F64, 2, s3, &b)) != NX_OK)
        goto done;
    a.n_cols = 3;
    int64_t *ix = nx_tensor_data(a.indices);
    ix[0] = 2, ix[1] = 1, ix[2] = 0, ix[3] = 1;
    nx_semiring_opts o = {.backend = NX_BACKEND_REF};
    const nx_semiring *real = nx_semiring_builtin(NX_SEMIRING_REAL);
    if ((st = nx_sparse_ell_folded(ctx, "matmul", real, &a, b, NULL, &o, outs)) != NX_OK)
        goto done;
    nx_tensor_free(outs[0]);
    outs[0] = NULL;
    ix[3] = 5; /* the bad path: the error, or NX_ERR_NOMEM on its way */
    st = nx_sparse_ell_folded(ctx, "matmul", real, &a, b, NULL, &o, outs);
    if (st == NX_ERR_INVALID_ARG && !getenv("NX_SWEEP_GOOD_ONLY"))
        st = outs[0] ? NX_ERR_INTERNAL : NX_OK;
done:
    nx_tensor_free(outs[0]), nx_tensor_free(b);
    nx_ell_free(&a);
    return st;
}

static void test_alloc_sweep(void **state)
{
    (void)state;
    if (fake_driver())
        skip();
    assert_true(nx_test_alloc_sweep(sweep_body, NULL, 20000) > 0);
}

/* ---- the device halves, under the fake driver ------------------------------------------------*/

static nx_tensor *to_device(nx_ctx *ctx, nx_tensor *h)
{
    nx_tensor *d = NULL;
    if (nx_tensor_to_device(h, NX_DEVICE_CUDA, &d) != NX_OK)
        fail_msg("to device: %s", nx_ctx_last_error(ctx));
    nx_tensor_free(h);
    return d;
}

static void test_fake_device(void **state)
{
    (void)state;
    if (!fake_driver())
        skip();
    nx_ctx *ctx = st_ctx();
    /* A device flag reads back. */
    nx_tensor *f = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_I32, 0, NULL, &f), NX_OK);
    *(int32_t *)nx_tensor_data(f) = 1;
    f = to_device(ctx, f);
    bool bad = false;
    assert_int_equal(nx_sparse_flag_bad(f, &bad), NX_OK);
    assert_true(bad);
    nx_tensor_free(f);
    /* Device indices come to the host once to name the bad slot; in-range ones, which a flag
     * should not have called bad, give the "changed while the call ran" error. */
    nx_tensor *idx = to_device(ctx, st_index(ctx, 2, 2, (int64_t[]){0, 1, 4, 0}, NX_DTYPE_I32));
    expect_error(ctx, nx_sparse_index_error(ctx, "who", idx, 3), NX_ERR_INVALID_ARG,
                 "who: index 4 at row 1, slot 0 is out of range");
    expect_error(ctx, nx_sparse_index_error(ctx, "who", idx, 5), NX_ERR_INVALID_ARG,
                 "they changed while the call ran");
    /* The entry point with device operands on the cpu backend: refused by name, nothing run. */
    nx_ell a = {.values = to_device(ctx, st_mat(ctx, 2, 2, (double[]){1, 1, 1, 1})),
                .indices = idx,
                .n_cols = 3};
    nx_tensor *b = to_device(ctx, st_mat(ctx, 3, 1, (double[]){1, 2, 3})), *c = NULL;
    nx_semiring_opts o = {.backend = NX_BACKEND_REF};
    expect_error(ctx,
                 nx_semiring_ell_matmul(ctx, nx_semiring_builtin(NX_SEMIRING_REAL), &a, b, &o, &c),
                 NX_ERR_UNSUPPORTED, "the ELL's values is a device tensor");
    assert_null(c);
    nx_tensor_free(b);
    nx_ell_free(&a);
    nx_ctx_free(ctx);
}

/* ---- on a GPU: device tensors through the entry points ----------------------------------------*/

/* A device copy of h (h is freed), or NULL when no usable GPU answers. */
static nx_tensor *gpu_copy(nx_tensor *h)
{
    nx_tensor *d = NULL;
    nx_status st = nx_tensor_to_device(h, NX_DEVICE_CUDA, &d);
    nx_tensor_free(h);
    return st == NX_OK ? d : NULL;
}

static nx_tensor *host_copy(nx_ctx *ctx, const nx_tensor *d)
{
    nx_tensor *h = NULL;
    if (nx_tensor_to_device(d, NX_DEVICE_HOST, &h) != NX_OK)
        fail_msg("to host: %s", nx_ctx_last_error(ctx));
    return h;
}

/* The hand ELL on the device under the cuda backend: the result (left on the device) equals the
 * hand values; a bad index, i32 or i64, gives the row and slot and no result, for matmul, its VJP,
 * rmatvec and softmax. */
static void test_gpu_device(void **state)
{
    (void)state;
    if (fake_driver())
        skip();
    nx_ctx *ctx = st_ctx();
    nx_tensor *b = gpu_copy(st_mat(ctx, 3, 2, HAND_B));
    if (!b) {
        nx_ctx_free(ctx);
        skip(); /* no usable GPU here */
    }
    const nx_semiring *real = nx_semiring_builtin(NX_SEMIRING_REAL);
    nx_semiring_opts o = {.backend = NX_BACKEND_CUDA, .driver = "scatter"};
    nx_ell a = {.values = gpu_copy(st_mat(ctx, 3, 3, HAND_V)),
                .indices = gpu_copy(st_index(ctx, 3, 3, HAND_I, NX_DTYPE_I32)),
                .n_cols = 3};
    nx_tensor *c = NULL;
    assert_int_equal(nx_semiring_ell_matmul(ctx, real, &a, b, &o, &c), NX_OK);
    assert_int_equal(nx_tensor_device(c), NX_DEVICE_CUDA);
    nx_tensor *ch = host_copy(ctx, c);
    st_expect_values("device matmul", ch, (double[]){7, 10, 0, 0, 9, 12}, 6);
    nx_tensor_free(ch), nx_tensor_free(c);
    const nx_dtype dts[2] = {NX_DTYPE_I32, NX_DTYPE_I64};
    for (int t = 0; t < 2; t++) {
        nx_tensor_free(a.indices);
        a.indices = gpu_copy(st_index(ctx, 3, 3, (int64_t[]){0, 2, 0, 0, 0, 3, 1, -2, 0}, dts[t]));
        c = (nx_tensor *)(uintptr_t)1;
        expect_error(ctx, nx_semiring_ell_matmul(ctx, real, &a, b, &o, &c), NX_ERR_INVALID_ARG,
                     "nx_semiring_ell_matmul: index 3 at row 1, slot 2 is out of range");
        assert_null(c);
        nx_tensor *dc = gpu_copy(st_mat(ctx, 3, 2, HAND_B)), *dv = NULL, *db = NULL;
        expect_error(ctx, nx_semiring_ell_matmul_vjp(ctx, real, &a, b, dc, &o, &dv, &db),
                     NX_ERR_INVALID_ARG, "index 3 at row 1, slot 2");
        assert_null(dv);
        assert_null(db);
        c = NULL;
        expect_error(ctx, nx_semiring_ell_rmatvec(ctx, real, &a, dc, &o, &c), NX_ERR_INVALID_ARG,
                     "index 3 at row 1, slot 2");
        assert_null(c);
        nx_tensor *sc = gpu_copy(st_mat(ctx, 3, 3, HAND_V));
        expect_error(ctx, nx_ell_row_softmax(ctx, &a, sc, &o, &c), NX_ERR_INVALID_ARG,
                     "index 3 at row 1, slot 2");
        assert_null(c);
        nx_tensor_free(dc), nx_tensor_free(sc);
    }
    nx_tensor_free(b);
    nx_ell_free(&a);
    nx_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fold_matmul),      cmocka_unit_test(test_fold_vjp),
        cmocka_unit_test(test_fold_bad_indices), cmocka_unit_test(test_fold_empty),
        cmocka_unit_test(test_flag_values),      cmocka_unit_test(test_alloc_sweep),
        cmocka_unit_test(test_fake_device),      cmocka_unit_test(test_gpu_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
