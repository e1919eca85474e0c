/* The op runner (ops/op.c) through the copy and cast rows: results against values written out
 * by hand, the table (names, aliases, any case, the public rows joined from ops.def and the
 * descriptors), text options, every argument error with its message, the vjp, the cache (a
 * second call compiles nothing), tolerances, border names, and the allocation-failure sweep. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cache.h"
#include "nitrix-op.h"
#include "ops/op.h"
#include "testutil.h"

static nx_test_alloc g_ta;

static nx_ctx *ctx_new(void)
{
    memset(&g_ta, 0, sizeof g_ta);
    return nx_test_ctx(&g_ta);
}

static nx_tensor *vec_f64(nx_ctx *ctx, int64_t n, const double *v)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 1, &n, &t), NX_OK);
    memcpy(nx_tensor_data(t), v, (size_t)n * sizeof(double));
    return t;
}

static void expect_error(nx_ctx *ctx, nx_status got, nx_status want, const char *needle)
{
    assert_int_equal(got, want);
    const char *msg = nx_ctx_last_error(ctx);
    if (!strstr(msg, needle))
        fail_msg("message \"%s\" lacks \"%s\"", msg, needle);
}

static void test_table(void **state)
{
    (void)state;
    size_t n = 0;
    const nx_op_info *const *ops = nx_ops(&n);
    assert_non_null(ops);
    assert_true(n >= 2);
    size_t nd = 0;
    const nx_op_desc *const *descs = nx_op_descs(&nd);
    assert_int_equal(nd, n);
    for (size_t i = 0; i < n; i++) {
        assert_ptr_equal(nx_op_desc_info(descs[i]), ops[i]);
        assert_ptr_equal(nx_op_find(ops[i]->name), ops[i]);
        assert_ptr_equal(nx_op_desc_find(ops[i]->name), descs[i]);
        assert_true(descs[i]->build || descs[i]->run);
        /* a constructor (random's key) takes no tensor input; every op has an output */
        assert_true(ops[i]->ninputs >= 0 && ops[i]->noutputs >= 1);
        assert_true(ops[i]->ninputs >= 1 || strcmp(ops[i]->family, "random") == 0);
        assert_non_null(ops[i]->summary);
        /* A field the descriptor sets agrees with its row. */
        if (descs[i]->info.name)
            assert_string_equal(descs[i]->info.name, ops[i]->name);
        for (int k = 0; k < ops[i]->nopts; k++)
            assert_non_null(ops[i]->opts[k].help);
    }
    const nx_op_info *copy = nx_op_find("copy");
    assert_non_null(copy);
    assert_string_equal(copy->family, "core");
    assert_int_equal(copy->ninputs, 1);
    assert_string_equal(copy->inputs[0], "x");
    assert_null(copy->inputs[1]);
    assert_string_equal(copy->outputs[0], "y");
    assert_true(copy->differentiable);
    assert_null(copy->driver_site);
    /* Any case; aliases. */
    assert_ptr_equal(nx_op_find("COPY"), copy);
    const nx_op_info *cast = nx_op_find("cast");
    assert_non_null(cast);
    assert_ptr_equal(nx_op_find("AsType"), cast);
    assert_int_equal(cast->nopts, 1);
    assert_string_equal(cast->opts[0].name, "dtype");
    assert_null(cast->opts[0].def);
    assert_null(nx_op_find("no_such_op"));
    assert_null(nx_op_find(NULL));
    assert_null(nx_op_desc_find("no_such_op"));
}

static void test_copy_cast(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    const double v[4] = {1.5, -2.25, 3.0, -0.75};
    nx_tensor *x = vec_f64(ctx, 4, v);
    nx_tensor *y = NULL;
    assert_int_equal(nx_op_run(ctx, &nx_op_copy, (const nx_tensor *const[]){x}, NULL, &y), NX_OK);
    assert_int_equal(nx_tensor_dtype(y), NX_DTYPE_F64);
    assert_memory_equal(nx_tensor_data(y), v, sizeof v);
    nx_tensor_free(y);

    /* cast by name, options as text, the dtype in any case, numpy's names. */
    const char *keys[] = {"dtype"}, *vals[] = {"INT32"};
    y = NULL;
    assert_int_equal(nx_op_call(ctx, "cast", 1, (const nx_tensor *const[]){x}, 1, keys, vals, 1,
                                &y),
                     NX_OK);
    assert_int_equal(nx_tensor_dtype(y), NX_DTYPE_I32);
    const int32_t *yi = nx_tensor_data(y);
    const int32_t want[4] = {1, -2, 3, 0}; /* toward zero */
    assert_memory_equal(yi, want, sizeof want);
    nx_tensor_free(y);
    const char *keys2[] = {"DType", "backend"}, *vals2[] = {"float32", "REF"};
    y = NULL;
    assert_int_equal(nx_op_call(ctx, "astype", 1, (const nx_tensor *const[]){x}, 2, keys2, vals2,
                                1, &y),
                     NX_OK);
    assert_int_equal(nx_tensor_dtype(y), NX_DTYPE_F32);
    assert_true(((const float *)nx_tensor_data(y))[1] == -2.25f);
    nx_tensor_free(y);
    nx_tensor_free(x);
    nx_ctx_free(ctx);
}

static void test_errors(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    const double v[2] = {1, 2};
    nx_tensor *x = vec_f64(ctx, 2, v);
    const nx_tensor *in[] = {x};
    nx_tensor *y = (nx_tensor *)(uintptr_t)1, *y2[2];

    assert_int_equal(nx_op_run(NULL, &nx_op_copy, in, NULL, &y), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(NULL), "ctx is NULL"));
    expect_error(ctx, nx_op_run(ctx, &nx_op_copy, in, NULL, NULL), NX_ERR_INVALID_ARG,
                 "nx_copy: out is NULL");
    expect_error(ctx, nx_op_run(ctx, &nx_op_copy, NULL, NULL, &y), NX_ERR_INVALID_ARG,
                 "nx_copy: inputs is NULL");
    assert_null(y);
    expect_error(ctx, nx_op_run(ctx, &nx_op_copy, (const nx_tensor *const[]){NULL}, NULL, &y),
                 NX_ERR_INVALID_ARG, "nx_copy: x is NULL");
    expect_error(ctx, nx_op_run_as(ctx, &nx_op_copy, "nx_old", (const nx_tensor *const[]){NULL},
                                   NULL, &y),
                 NX_ERR_INVALID_ARG, "nx_old: x is NULL");

    assert_int_equal(nx_op_call(NULL, "copy", 1, in, 0, NULL, NULL, 1, &y), NX_ERR_INVALID_ARG);
    expect_error(ctx, nx_op_call(ctx, "copy", 1, in, 0, NULL, NULL, 1, NULL), NX_ERR_INVALID_ARG,
                 "out is NULL");
    y = (nx_tensor *)(uintptr_t)1;
    expect_error(ctx, nx_op_call(ctx, "nope", 1, in, 0, NULL, NULL, 1, &y), NX_ERR_INVALID_ARG,
                 "no op named 'nope'");
    assert_null(y);
    expect_error(ctx, nx_op_call(ctx, NULL, 1, in, 0, NULL, NULL, 1, &y), NX_ERR_INVALID_ARG,
                 "no op named");
    expect_error(ctx, nx_op_call(ctx, "copy", 2, (const nx_tensor *const[]){x, x}, 0, NULL, NULL,
                                 1, &y),
                 NX_ERR_INVALID_ARG, "copy: 2 inputs given; expected 1");
    expect_error(ctx, nx_op_call(ctx, "copy", 1, in, 0, NULL, NULL, 2, y2), NX_ERR_INVALID_ARG,
                 "copy: 2 outputs asked for; expected 1");
    const char *k1[] = {"sigma"}, *v1[] = {"2"};
    expect_error(ctx, nx_op_call(ctx, "copy", 1, in, 1, k1, v1, 1, &y), NX_ERR_INVALID_ARG,
                 "copy: no option named 'sigma'; expected one of backend");
    const char *k2[] = {"dtype"}, *v2[] = {"complex128"};
    expect_error(ctx, nx_op_call(ctx, "cast", 1, in, 1, k2, v2, 1, &y), NX_ERR_INVALID_ARG,
                 "cast: option dtype='complex128'; expected a dtype");
    const char *k3[] = {"backend"}, *v3[] = {"gpu"};
    expect_error(ctx, nx_op_call(ctx, "cast", 1, in, 1, k3, v3, 1, &y), NX_ERR_INVALID_ARG,
                 "cast: option backend='gpu'; expected auto, cpu, cuda or ref");
    expect_error(ctx, nx_op_call(ctx, "cast", 1, in, 0, NULL, NULL, 1, &y), NX_ERR_INVALID_ARG,
                 "cast: option dtype is required");
    const char *k4[] = {"dtype", "dtype"}, *v4[] = {"f32", "f64"};
    expect_error(ctx, nx_op_call(ctx, "cast", 1, in, 2, k4, v4, 1, &y), NX_ERR_INVALID_ARG,
                 "given twice");
    expect_error(ctx, nx_op_call(ctx, "cast", 1, in, 1, NULL, v4, 1, &y), NX_ERR_INVALID_ARG,
                 "non-NULL arrays");
    assert_null(y);

    /* The op's own check, through the typed path: an out-of-range dtype. */
    struct {
        int dtype;
        nx_backend backend;
    } bad = {NX_DTYPE_COUNT + 3, NX_BACKEND_AUTO};
    expect_error(ctx, nx_op_run(ctx, &nx_op_cast, in, &bad, &y), NX_ERR_INVALID_ARG,
                 "nx_cast: dtype");
    bad.dtype = NX_DTYPE_F32;
    bad.backend = (nx_backend)42;
    expect_error(ctx, nx_op_run(ctx, &nx_op_cast, in, &bad, &y), NX_ERR_INVALID_ARG,
                 "backend 42 is not a backend");
    assert_null(y);
    nx_tensor_free(x);
    nx_ctx_free(ctx);
}

static void test_vjp(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    const double v[3] = {1, 2, 3}, g[3] = {0.5, -1, 4};
    nx_tensor *x = vec_f64(ctx, 3, v), *dy = vec_f64(ctx, 3, g);
    nx_tensor *dx = NULL;
    /* d/dx of cast to f64 from f64 (identity): dx = dy. */
    const char *k[] = {"dtype"}, *vv[] = {"f64"};
    assert_int_equal(nx_op_vjp(ctx, "cast", 1, (const nx_tensor *const[]){x}, 1, k, vv, 1,
                               (const nx_tensor *const[]){dy}, &dx),
                     NX_OK);
    assert_memory_equal(nx_tensor_data(dx), g, sizeof g);
    nx_tensor_free(dx);
    dx = NULL;
    assert_int_equal(nx_op_run_vjp(ctx, &nx_op_copy, (const nx_tensor *const[]){x}, NULL,
                                   (const nx_tensor *const[]){dy}, &dx),
                     NX_OK);
    assert_memory_equal(nx_tensor_data(dx), g, sizeof g);
    nx_tensor_free(dx);
    /* Wrong cotangent count, a cast with no gradient, a cotangent of the wrong shape. */
    expect_error(ctx, nx_op_vjp(ctx, "copy", 1, (const nx_tensor *const[]){x}, 0, NULL, NULL, 2,
                                (const nx_tensor *const[]){dy, dy}, &dx),
                 NX_ERR_INVALID_ARG, "2 cotangents given; expected 1");
    const char *vi[] = {"i32"};
    expect_error(ctx, nx_op_vjp(ctx, "cast", 1, (const nx_tensor *const[]){x}, 1, k, vi, 1,
                                (const nx_tensor *const[]){dy}, &dx),
                 NX_ERR_DTYPE, "has no gradient");
    nx_tensor *dy2 = vec_f64(ctx, 2, g);
    assert_int_not_equal(nx_op_run_vjp(ctx, &nx_op_copy, (const nx_tensor *const[]){x}, NULL,
                                       (const nx_tensor *const[]){dy2}, &dx),
                         NX_OK);
    assert_null(dx);
    expect_error(ctx, nx_op_run_vjp(ctx, &nx_op_copy, (const nx_tensor *const[]){x}, NULL, NULL,
                                    &dx),
                 NX_ERR_INVALID_ARG, "dy is NULL");
    nx_tensor_free(dy2);
    nx_tensor_free(x);
    nx_tensor_free(dy);
    nx_ctx_free(ctx);
}

/* A second call with the same key compiles nothing: the cache holds one program per key (the
 * vjps are programs; the forward copy and cast are runtime operations). */
static void test_cache(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    const double v[2] = {1, 2};
    nx_tensor *x = vec_f64(ctx, 2, v), *dx = NULL;
    const nx_tensor *in[] = {x}, *dy[] = {x};
    const char *k[] = {"dtype"}, *f32[] = {"f32"}, *f64[] = {"f64"};
    nx_rt_cache *cache = NULL;
    assert_int_equal(nx_rt_cache_of(ctx, &cache), NX_OK);
    nx_rt_cache_stats s0, s1, s2;
    assert_int_equal(nx_op_vjp(ctx, "cast", 1, in, 1, k, f64, 1, dy, &dx), NX_OK);
    nx_tensor_free(dx);
    nx_rt_cache_get_stats(cache, &s0);
    assert_int_equal(nx_op_vjp(ctx, "cast", 1, in, 1, k, f64, 1, dy, &dx), NX_OK);
    nx_tensor_free(dx);
    nx_rt_cache_get_stats(cache, &s1);
    assert_int_equal(s1.inserts, s0.inserts);
    assert_true(s1.find_hits > s0.find_hits);
    /* Another option value is another key (a cast to f32 and back: dx = dy rounded to f32). */
    assert_int_equal(nx_op_vjp(ctx, "cast", 1, in, 1, k, f32, 1,
                               (const nx_tensor *const[]){NULL}, &dx),
                     NX_ERR_INVALID_ARG);
    nx_rt_cache_get_stats(cache, &s2);
    assert_int_equal(s2.inserts, s1.inserts);
    nx_tensor *y32 = NULL;
    assert_int_equal(nx_op_call(ctx, "cast", 1, in, 1, k, f32, 1, &y32), NX_OK);
    assert_int_equal(nx_op_vjp(ctx, "cast", 1, in, 1, k, f32, 1,
                               (const nx_tensor *const[]){y32}, &dx),
                     NX_OK);
    assert_int_equal(nx_tensor_dtype(dx), NX_DTYPE_F64);
    assert_memory_equal(nx_tensor_data(dx), v, sizeof v);
    nx_rt_cache_get_stats(cache, &s2);
    assert_true(s2.inserts > s1.inserts); /* the program, and kernels the backend caches */
    nx_tensor_free(dx);
    nx_tensor_free(y32);
    nx_tensor_free(x);
    nx_ctx_free(ctx);
}

/* Options are checked without running: what nx_op_call would refuse, and nothing else. */
static void test_check_options(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    const char *k[] = {"dtype", "backend"}, *ok[] = {"F32", "cpu"}, *bad[] = {"f99", "cpu"};
    assert_int_equal(nx_op_check_options(ctx, "cast", 2, k, ok), NX_OK);
    expect_error(ctx, nx_op_check_options(ctx, "cast", 2, k, bad), NX_ERR_INVALID_ARG,
                 "dtype='f99'");
    expect_error(ctx, nx_op_check_options(ctx, "cast", 0, NULL, NULL), NX_ERR_INVALID_ARG,
                 "required");
    expect_error(ctx, nx_op_check_options(ctx, "nope", 0, NULL, NULL), NX_ERR_INVALID_ARG,
                 "no op named 'nope'");
    nx_ctx_free(ctx);
}

static void test_tolerance_border(void **state)
{
    (void)state;
    static const nx_op_tol tols[] = {
        {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-6},
        {NX_DTYPE_F32, "cuda", NULL, 1e-4, 1e-5},
        {NX_DTYPE_F32, NULL, "fast", 1e-3, 1e-4},
        {NX_DTYPE_F32, "cuda", "fast", 1e-2, 1e-3},
    };
    nx_op_desc d = {.tols = tols, .ntols = 4};
    double r = 0, a = 0;
    assert_true(nx_op_tolerance(&d, NX_DTYPE_F32, "cpu", NULL, &r, &a));
    assert_true(r == 1e-5 && a == 1e-6);
    assert_true(nx_op_tolerance(&d, NX_DTYPE_F32, "cuda", "canonical", &r, &a));
    assert_true(r == 1e-4 && a == 1e-5);
    assert_true(nx_op_tolerance(&d, NX_DTYPE_F32, "cpu", "fast", &r, &a));
    assert_true(r == 1e-3);
    assert_true(nx_op_tolerance(&d, NX_DTYPE_F32, "CUDA", "fast", &r, &a));
    assert_true(r == 1e-2);
    assert_false(nx_op_tolerance(&d, NX_DTYPE_F64, "cpu", NULL, &r, &a));

    for (int b = 0; b < NX_BORDER_COUNT; b++) {
        nx_border got = NX_BORDER_COUNT;
        assert_int_equal(nx_border_parse(NULL, nx_border_name((nx_border)b), &got), NX_OK);
        assert_int_equal(got, b);
    }
    assert_null(nx_border_name(NX_BORDER_COUNT));
    nx_border got = NX_BORDER_COUNT;
    assert_int_equal(nx_border_parse(NULL, "Replicate", &got), NX_OK);
    assert_int_equal(got, NX_BORDER_NEAREST);
    assert_int_equal(nx_border_parse(NULL, "PERIODIC", &got), NX_OK);
    assert_int_equal(got, NX_BORDER_WRAP);
    assert_int_equal(nx_border_parse(NULL, "grid-mirror", &got), NX_OK);
    assert_int_equal(got, NX_BORDER_REFLECT);
    assert_string_equal(nx_border_name(NX_BORDER_MIRROR), "mirror");
    assert_int_equal(nx_border_parse(NULL, "clamp", &got), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(NULL), "'clamp' is not known"));
}

static nx_status sweep_body(nx_ctx *ctx, void *user)
{
    (void)user;
    const double v[3] = {1, -2, 3};
    int64_t n = 3;
    nx_tensor *x = NULL, *y = NULL, *dx = NULL;
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F64, 1, &n, &x);
    if (st != NX_OK)
        return st;
    memcpy(nx_tensor_data(x), v, sizeof v);
    const char *k[] = {"dtype"}, *vals[] = {"f32"}, *same[] = {"f64"};
    st = nx_op_call(ctx, "cast", 1, (const nx_tensor *const[]){x}, 1, k, vals, 1, &y);
    if (st == NX_OK)
        st = nx_op_vjp(ctx, "cast", 1, (const nx_tensor *const[]){x}, 1, k, same, 1,
                       (const nx_tensor *const[]){x}, &dx);
    if (st == NX_OK && (!y || !dx))
        st = NX_ERR_INTERNAL;
    nx_tensor_free(dx);
    nx_tensor_free(y);
    nx_tensor_free(x);
    return st;
}

static void test_alloc_sweep(void **state)
{
    (void)state;
    assert_true(nx_test_alloc_sweep(sweep_body, NULL, 5000) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_copy_cast),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_vjp),
        cmocka_unit_test(test_cache),
        cmocka_unit_test(test_check_options),
        cmocka_unit_test(test_tolerance_border),
        cmocka_unit_test(test_alloc_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
