/* ELL values with leading batch dims ([..., m, k_max] over one index matrix) against dense
 * operands with matching or broadcast batch dims: forward results and VJPs of matmul (REAL, LOG,
 * max-plus) and rmatvec (both drivers) equal the float64 NumPy fixtures of gen-sparse-batch.py;
 * batches that do not broadcast are refused; and device tensors: on a machine without a GPU the
 * device copy fails with NX_ERR_BACKEND, with one the results on device tensors equal the host's.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sparse-test.h"

typedef struct batch_case {
    const char *name, *sr;
    bool rmatvec;
} batch_case;

static const batch_case CASES[] = {
    {"batch_mm_real", "real", false}, {"batch_mm_real_both", "real", false},
    {"batch_mm_log", "log", false},   {"batch_mm_max", "tropical_max_plus", false},
    {"batch_rmv", "real", true},      {"batch_rmv_both", "real", true},
};

static double identity_of(const char *sr)
{
    return !strcmp(sr, "real") ? 0.0 : -INFINITY;
}

static void run_case(nx_ctx *ctx, const batch_case *c, nx_backend be, const char *driver)
{
    nx_semiring *user = NULL;
    const nx_semiring *sr = st_semiring(ctx, c->sr, &user);
    nx_tensor *x = st_load(ctx, c->name, c->rmatvec ? "x" : "b");
    nx_tensor *out = st_load(ctx, c->name, "out"), *dc = st_load(ctx, c->name, "dc");
    nx_tensor *dvw = st_load(ctx, c->name, "dvalues"), *dbw = st_load(ctx, c->name, "db");
    nx_tensor *nc = c->rmatvec ? out : x;
    nx_ell a = {.values = st_load(ctx, c->name, "values"),
                .indices = st_load(ctx, c->name, "indices"),
                .n_cols = nx_tensor_shape(nc)[nx_tensor_ndim(nc) - 2],
                .identity = identity_of(c->sr)};
    nx_semiring_opts o = {.backend = be, .driver = driver};
    nx_tensor *y = NULL, *dv = NULL, *db = NULL;
    nx_status st = c->rmatvec ? nx_semiring_ell_rmatvec(ctx, sr, &a, x, &o, &y)
                              : nx_semiring_ell_matmul(ctx, sr, &a, x, &o, &y);
    if (st != NX_OK)
        fail_msg("%s: %s", c->name, nx_ctx_last_error(ctx));
    st_expect_close(c->name, be, y, out, c->sr);
    st = c->rmatvec ? nx_semiring_ell_rmatvec_vjp(ctx, sr, &a, x, dc, &o, &dv, &db)
                    : nx_semiring_ell_matmul_vjp(ctx, sr, &a, x, dc, &o, &dv, &db);
    if (st != NX_OK)
        fail_msg("%s vjp: %s", c->name, nx_ctx_last_error(ctx));
    /* Cotangents are sums (over columns, scattered rows and broadcast dims) under every
     * algebra, so they are compared to 1e-12, not exactly. */
    st_expect_close("dvalues", be, dv, dvw, NULL);
    st_expect_close("db", be, db, dbw, NULL);
    nx_tensor_free(y), nx_tensor_free(dv), nx_tensor_free(db);
    nx_tensor_free(x), nx_tensor_free(out), nx_tensor_free(dc);
    nx_tensor_free(dvw), nx_tensor_free(dbw);
    nx_ell_free(&a);
    nx_semiring_free(user);
}

static void test_batches(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    nx_backend bes[2] = {NX_BACKEND_REF, st_backend()};
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++)
        for (int b = 0; b < 2; b++)
            run_case(ctx, &CASES[i], bes[b], CASES[i].rmatvec ? "scatter" : NULL);
    nx_ctx_free(ctx);
}

/* The gather driver (A^T built on the host over the shared pattern) on batched values: the same
 * forward result as NumPy, with pads that differ between batches. */
static void test_gather_driver(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    for (int i = 4; i < 6; i++) {
        nx_semiring *user = NULL;
        const batch_case *c = &CASES[i];
        const nx_semiring *sr = st_semiring(ctx, c->sr, &user);
        nx_tensor *x = st_load(ctx, c->name, "x"), *out = st_load(ctx, c->name, "out");
        nx_ell a = {.values = st_load(ctx, c->name, "values"),
                    .indices = st_load(ctx, c->name, "indices"),
                    .n_cols = nx_tensor_shape(out)[nx_tensor_ndim(out) - 2]};
        /* Knock one slot out in batch 0 only (value = identity): gather must keep the slot for
         * the other batches and contribute nothing in batch 0, as scatter does. */
        double *v = nx_tensor_data(a.values);
        v[1] = 0.0;
        nx_semiring_opts og = {.backend = st_backend(), .driver = "gather"};
        nx_semiring_opts os = {.backend = st_backend(), .driver = "scatter"};
        nx_tensor *yg = NULL, *ys = NULL;
        assert_int_equal(nx_semiring_ell_rmatvec(ctx, sr, &a, x, &og, &yg), NX_OK);
        assert_int_equal(nx_semiring_ell_rmatvec(ctx, sr, &a, x, &os, &ys), NX_OK);
        st_expect_close(c->name, st_backend(), yg, ys, "real");
        nx_tensor_free(yg), nx_tensor_free(ys), nx_tensor_free(x), nx_tensor_free(out);
        nx_ell_free(&a);
    }
    /* Unchanged values: gather equals the NumPy fixture. */
    const batch_case *c = &CASES[5];
    nx_tensor *x = st_load(ctx, c->name, "x"), *out = st_load(ctx, c->name, "out"), *y = NULL;
    nx_ell a = {.values = st_load(ctx, c->name, "values"),
                .indices = st_load(ctx, c->name, "indices"),
                .n_cols = nx_tensor_shape(out)[nx_tensor_ndim(out) - 2]};
    nx_semiring_opts og = {.backend = st_backend(), .driver = "gather"};
    assert_int_equal(
        nx_semiring_ell_rmatvec(ctx, nx_semiring_builtin(NX_SEMIRING_REAL), &a, x, &og, &y), NX_OK);
    st_expect_close("gather", st_backend(), y, out, "real");
    nx_tensor_free(y), nx_tensor_free(x), nx_tensor_free(out);
    nx_ell_free(&a);
    nx_ctx_free(ctx);
}

/* A^T X by gather on an ELL whose pad identity is NaN (a stencil: nothing is a pad) and whose
 * columns have unequal counts (replicate borders), so A^T has pads: they must add nothing, as in
 * the scatter driver, whatever the identity. */
static void test_gather_nan_identity(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    int64_t shape[1] = {6};
    nx_ell a;
    assert_int_equal(nx_grid_laplacian(ctx, 1, shape, NX_GRID_REPLICATE, 1.0, true, &a), NX_OK);
    nx_tensor *x = st_mat(ctx, 6, 1, (double[]){1, -2, 3, 0.5, 4, -1});
    nx_semiring_opts og = {.backend = st_backend(), .driver = "gather"};
    nx_semiring_opts os = {.backend = st_backend(), .driver = "scatter"};
    const nx_semiring *real = nx_semiring_builtin(NX_SEMIRING_REAL);
    nx_tensor *yg = NULL, *ys = NULL;
    assert_int_equal(nx_semiring_ell_rmatvec(ctx, real, &a, x, &og, &yg), NX_OK);
    assert_int_equal(nx_semiring_ell_rmatvec(ctx, real, &a, x, &os, &ys), NX_OK);
    /* The replicate Laplacian's transpose by hand: row 0 of A is x1 - x0 (the centre -2 and the
     * clamped left neighbour +1 on column 0), so column 0 of A holds -1 (row 0) and 1 (row 1). */
    double want0 = -1 * 1 + 1 * -2;
    assert_true(nx_test_close(st_at(yg, 0), want0, 1e-12, 1e-12));
    st_expect_close("gather vs scatter", st_backend(), yg, ys, "real");
    nx_tensor_free(yg), nx_tensor_free(ys), nx_tensor_free(x);
    nx_ell_free(&a);
    nx_ctx_free(ctx);
}

/* Row softmax and edge aggregation with batched values whose pads differ per batch (an all-pad
 * row in batch 1 only): each batch masks its own pads. */
static void test_softmax_edge_batches(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    nx_backend bes[2] = {NX_BACKEND_REF, st_backend()};
    for (int b = 0; b < 2; b++) {
        nx_ell a = {.values = st_load(ctx, "batch_smax", "values"),
                    .indices = st_load(ctx, "batch_smax", "indices"),
                    .n_cols = 5};
        nx_tensor *x = st_load(ctx, "batch_smax", "x"), *out = st_load(ctx, "batch_smax", "out");
        nx_tensor *y = NULL;
        nx_semiring_opts o = {.backend = bes[b]};
        assert_int_equal(nx_ell_row_softmax(ctx, &a, x, &o, &y), NX_OK);
        st_expect_close("batched row softmax", bes[b], y, out, NULL);
        nx_tensor_free(y), nx_tensor_free(x), nx_tensor_free(out);
        nx_ell_free(&a);
        nx_ell e = {.values = st_load(ctx, "batch_edge", "values"),
                    .indices = st_load(ctx, "batch_edge", "indices"),
                    .n_cols = 5};
        nx_tensor *h = st_load(ctx, "batch_edge", "h");
        out = st_load(ctx, "batch_edge", "out");
        nx_edge_opts eo = {.backend = bes[b], .formula = "w * (hj - hi)"};
        assert_int_equal(nx_semiring_ell_edge_aggregate(ctx, nx_semiring_builtin(NX_SEMIRING_REAL),
                                                        &e, h, NULL, &eo, &y),
                         NX_OK);
        st_expect_close("batched edge aggregation", bes[b], y, out, NULL);
        nx_tensor_free(y), nx_tensor_free(h), nx_tensor_free(out);
        nx_ell_free(&e);
    }
    nx_ctx_free(ctx);
}

static nx_tensor *zeros(nx_ctx *ctx, int nd, const int64_t *shape)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, nd, shape, &t), NX_OK);
    return t;
}

static void test_batch_errors(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    const nx_semiring *real = nx_semiring_builtin(NX_SEMIRING_REAL);
    int64_t vs[3] = {2, 3, 2}, bs[3] = {3, 4, 1}, is[2] = {3, 2};
    nx_ell a = {.values = zeros(ctx, 3, vs), .n_cols = 4};
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_I64, 2, is, &a.indices), NX_OK);
    nx_tensor *b = zeros(ctx, 3, bs), *y = NULL;
    nx_semiring_opts o = {.backend = st_backend()};
    /* values' batch 2 against b's 3. */
    assert_int_equal(nx_semiring_ell_matmul(ctx, real, &a, b, &o, &y), NX_ERR_SHAPE);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "do not broadcast"));
    assert_null(y);
    /* Indices with a batch are refused: one pattern is shared. */
    nx_tensor *bi = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_I64, 3, vs, &bi), NX_OK);
    nx_ell a3 = {.values = a.values, .indices = bi, .n_cols = 4};
    int64_t b2s[2] = {4, 1};
    nx_tensor *b2 = zeros(ctx, 2, b2s);
    assert_int_equal(nx_semiring_ell_matmul(ctx, real, &a3, b2, &o, &y), NX_ERR_SHAPE);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "indices [m, k_max]"));
    /* The host builders take one matrix. */
    nx_tensor *dense = NULL;
    assert_int_equal(nx_ell_to_dense(ctx, &a, &dense), NX_ERR_SHAPE);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "one matrix"));
    /* An index out of range still names its row and slot with batched values. */
    ((int64_t *)nx_tensor_data(a.indices))[3] = 9;
    assert_int_equal(nx_semiring_ell_matmul(ctx, real, &a, b2, &o, &y), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "row 1, slot 1"));
    nx_tensor_free(b), nx_tensor_free(b2), nx_tensor_free(bi);
    nx_ell_free(&a);
    nx_ctx_free(ctx);
}

/* Device tensors: without a GPU the copy to the device is refused (NX_ERR_BACKEND), so no device
 * tensor can reach the entry points; with one, matmul, its VJP, rmatvec (scatter), row softmax and
 * edge aggregation on device inputs equal the host results (batched values), the outputs stay on
 * the device, and an out-of-range device index is named by row and slot. */
static nx_tensor *to_dev(const nx_tensor *t)
{
    nx_tensor *d = NULL;
    assert_int_equal(nx_tensor_to_device(t, NX_DEVICE_CUDA, &d), NX_OK);
    return d;
}

static void expect_device_equal(const char *what, nx_tensor *dev, const nx_tensor *host)
{
    assert_int_equal(nx_tensor_device(dev), NX_DEVICE_CUDA);
    nx_tensor *back = NULL;
    assert_int_equal(nx_tensor_to_device(dev, NX_DEVICE_HOST, &back), NX_OK);
    st_expect_close(what, NX_BACKEND_CUDA, back, host, "real");
    nx_tensor_free(back), nx_tensor_free(dev);
}

static void device_run(nx_ctx *ctx)
{
    const batch_case *c = &CASES[0];
    const nx_semiring *real = nx_semiring_builtin(NX_SEMIRING_REAL);
    nx_tensor *b = st_load(ctx, c->name, "b"), *out = st_load(ctx, c->name, "out");
    nx_ell a = {.values = st_load(ctx, c->name, "values"),
                .indices = st_load(ctx, c->name, "indices"),
                .n_cols = 4};
    nx_ell ad = {.values = to_dev(a.values), .indices = to_dev(a.indices), .n_cols = 4};
    nx_tensor *bd = to_dev(b), *y = NULL;
    nx_semiring_opts o = {.backend = NX_BACKEND_CUDA, .driver = "scatter"};
    assert_int_equal(nx_semiring_ell_matmul(ctx, real, &ad, bd, &o, &y), NX_OK);
    expect_device_equal("device matmul", y, out);
    /* A device tensor on the cpu backend is refused by name. */
    nx_semiring_opts oc = {.backend = NX_BACKEND_CPU};
    assert_int_equal(nx_semiring_ell_matmul(ctx, real, &ad, bd, &oc, &y), NX_ERR_UNSUPPORTED);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "device tensor"));
    /* rmatvec by scatter; the gather driver needs host tensors. */
    nx_tensor *yh = NULL;
    assert_int_equal(nx_semiring_ell_rmatvec(ctx, real, &a, out, &o, &yh), NX_OK);
    nx_tensor *outd = to_dev(out);
    assert_int_equal(nx_semiring_ell_rmatvec(ctx, real, &ad, outd, &o, &y), NX_OK);
    expect_device_equal("device rmatvec", y, yh);
    nx_semiring_opts og = {.backend = NX_BACKEND_CUDA, .driver = "gather"};
    assert_int_equal(nx_semiring_ell_rmatvec(ctx, real, &ad, outd, &og, &y), NX_ERR_UNSUPPORTED);
    nx_tensor_free(yh);
    /* The matmul VJP, row softmax and edge aggregation on device inputs equal the host's. */
    nx_tensor *g[2] = {NULL, NULL}, *gd[2] = {NULL, NULL};
    assert_int_equal(nx_semiring_ell_matmul_vjp(ctx, real, &a, b, out, &o, &g[0], &g[1]), NX_OK);
    assert_int_equal(nx_semiring_ell_matmul_vjp(ctx, real, &ad, bd, outd, &o, &gd[0], &gd[1]),
                     NX_OK);
    expect_device_equal("device dvalues", gd[0], g[0]);
    expect_device_equal("device db", gd[1], g[1]);
    nx_tensor_free(g[0]), nx_tensor_free(g[1]);
    nx_tensor *vd = to_dev(a.values);
    assert_int_equal(nx_ell_row_softmax(ctx, &a, a.values, &o, &yh), NX_OK);
    assert_int_equal(nx_ell_row_softmax(ctx, &ad, vd, &o, &y), NX_OK);
    expect_device_equal("device row softmax", y, yh);
    nx_tensor_free(yh), nx_tensor_free(vd);
    nx_ell sq = {.values = a.values, .indices = a.indices, .n_cols = 5};
    nx_ell sqd = {.values = ad.values, .indices = ad.indices, .n_cols = 5};
    nx_edge_opts eo = {.backend = NX_BACKEND_CUDA, .formula = "w * (hj - hi)"};
    assert_int_equal(nx_semiring_ell_edge_aggregate(ctx, real, &sq, out, NULL, &eo, &yh), NX_OK);
    assert_int_equal(nx_semiring_ell_edge_aggregate(ctx, real, &sqd, outd, NULL, &eo, &y), NX_OK);
    expect_device_equal("device edge aggregation", y, yh);
    nx_tensor_free(yh);
    /* An out-of-range device index: found on the device, named from the host copy. */
    ((int64_t *)nx_tensor_data(a.indices))[4] = -3;
    nx_tensor *bad = to_dev(a.indices);
    nx_ell abad = {.values = ad.values, .indices = bad, .n_cols = 4};
    assert_int_equal(nx_semiring_ell_matmul(ctx, real, &abad, bd, &o, &y), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "row 1, slot 1"));
    nx_tensor_free(bad), nx_tensor_free(bd), nx_tensor_free(outd);
    nx_tensor_free(b), nx_tensor_free(out);
    nx_ell_free(&ad), nx_ell_free(&a);
}

static void test_device(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    nx_tensor *t = st_mat(ctx, 1, 1, (double[]){1}), *d = NULL;
    nx_status st = nx_tensor_to_device(t, NX_DEVICE_CUDA, &d);
    if (st == NX_OK) {
        nx_tensor_free(d);
        device_run(ctx);
    } else {
        assert_int_equal(st, NX_ERR_BACKEND);
        assert_null(d);
        print_message("no usable GPU: the device copy is refused (%s)\n", nx_ctx_last_error(ctx));
    }
    nx_tensor_free(t);
    nx_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batches),
        cmocka_unit_test(test_gather_driver),
        cmocka_unit_test(test_gather_nan_identity),
        cmocka_unit_test(test_softmax_edge_batches),
        cmocka_unit_test(test_batch_errors),
        cmocka_unit_test(test_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
