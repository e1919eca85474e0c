/* The context: settings from the environment, error messages, logging, allocator hook. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static void clear_env(void)
{
    static const char *const vars[] = {"NITRIX_BACKEND",        "NITRIX_NUM_THREADS",
                                       "NITRIX_CACHE_DIR",      "NITRIX_REPRODUCIBLE",
                                       "NITRIX_STRICT_BACKEND", "NITRIX_SILENCE_FALLBACK",
                                       "NITRIX_DUMP"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        unsetenv(vars[i]);
}

static void test_defaults(void **state)
{
    (void)state;
    clear_env();
    setenv("HOME", "/home/someone", 1);
    unsetenv("XDG_CACHE_HOME");
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    assert_int_equal(nx_ctx_backend(ctx), NX_BACKEND_AUTO);
    assert_true(nx_ctx_num_threads(ctx) >= 1);
    assert_string_equal(nx_ctx_cache_dir(ctx), "/home/someone/.cache/nitrix");
    assert_false(nx_ctx_reproducible(ctx));
    assert_false(nx_ctx_strict_backend(ctx));
    assert_false(nx_ctx_silence_fallback(ctx));
    assert_string_equal(nx_ctx_last_error(ctx), "");
    nx_ctx_free(ctx);
}

static void test_env_values(void **state)
{
    (void)state;
    clear_env();
    setenv("NITRIX_BACKEND", "ref", 1);
    setenv("NITRIX_NUM_THREADS", "3", 1);
    setenv("NITRIX_CACHE_DIR", "/tmp/nx-cache-test", 1);
    setenv("NITRIX_REPRODUCIBLE", "yes", 1);
    setenv("NITRIX_STRICT_BACKEND", "TRUE", 1);
    setenv("NITRIX_SILENCE_FALLBACK", "on", 1);
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    assert_int_equal(nx_ctx_backend(ctx), NX_BACKEND_REF);
    assert_int_equal(nx_ctx_num_threads(ctx), 3);
    assert_string_equal(nx_ctx_cache_dir(ctx), "/tmp/nx-cache-test");
    assert_true(nx_ctx_reproducible(ctx));
    assert_true(nx_ctx_strict_backend(ctx));
    assert_true(nx_ctx_silence_fallback(ctx));
    nx_ctx_free(ctx);

    /* explicit options win over the environment */
    nx_ctx_opts over = {.num_threads = 5, .cache_dir = "/tmp/nx-explicit"};
    assert_int_equal(nx_ctx_new(&over, &ctx), NX_OK);
    assert_int_equal(nx_ctx_num_threads(ctx), 5);
    assert_string_equal(nx_ctx_cache_dir(ctx), "/tmp/nx-explicit");
    assert_int_equal(nx_ctx_backend(ctx), NX_BACKEND_REF);
    nx_ctx_free(ctx);
    nx_ctx_opts bad = {.num_threads = 2000};
    assert_int_equal(nx_ctx_new(&bad, &ctx), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(NULL), "num_threads is 2000"));
    bad = (nx_ctx_opts){.cache_dir = ""};
    assert_int_equal(nx_ctx_new(&bad, &ctx), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(NULL), "cache_dir"));

    /* ignore_env keeps the defaults whatever the environment says */
    nx_ctx_opts opts = {.ignore_env = true};
    assert_int_equal(nx_ctx_new(&opts, &ctx), NX_OK);
    assert_int_equal(nx_ctx_backend(ctx), NX_BACKEND_AUTO);
    assert_false(nx_ctx_reproducible(ctx));
    nx_ctx_free(ctx);
    clear_env();
}

/* Each bad value fails creation with a message naming the variable and what it accepts. */
static void test_env_errors(void **state)
{
    (void)state;
    static const struct {
        const char *var, *value, *expect1, *expect2;
    } cases[] = {
        {"NITRIX_BACKEND", "gpu", "NITRIX_BACKEND='gpu'", "auto, cpu, cuda or ref"},
        {"NITRIX_NUM_THREADS", "-1", "NITRIX_NUM_THREADS='-1'", "1 to 1024"},
        {"NITRIX_NUM_THREADS", "4x", "NITRIX_NUM_THREADS='4x'", "1 to 1024"},
        {"NITRIX_NUM_THREADS", "99999", "NITRIX_NUM_THREADS='99999'", "0 for all cores"},
        {"NITRIX_NUM_THREADS", "99999999999999999999", "NITRIX_NUM_THREADS", "1 to 1024"},
        {"NITRIX_CACHE_DIR", "", "NITRIX_CACHE_DIR is set but empty", "directory path"},
        {"NITRIX_REPRODUCIBLE", "maybe", "NITRIX_REPRODUCIBLE='maybe'", "false, true"},
        {"NITRIX_STRICT_BACKEND", "2", "NITRIX_STRICT_BACKEND='2'", "no, yes"},
        {"NITRIX_SILENCE_FALLBACK", "y", "NITRIX_SILENCE_FALLBACK='y'", "off or on"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        clear_env();
        setenv(cases[i].var, cases[i].value, 1);
        nx_ctx *ctx = (nx_ctx *)(uintptr_t)1;
        assert_int_equal(nx_ctx_new(NULL, &ctx), NX_ERR_INVALID_ARG);
        assert_null(ctx);
        const char *msg = nx_ctx_last_error(NULL);
        if (!strstr(msg, cases[i].expect1) || !strstr(msg, cases[i].expect2))
            fail_msg("%s=%s: message '%s' lacks '%s' or '%s'", cases[i].var, cases[i].value, msg,
                     cases[i].expect1, cases[i].expect2);
    }
    clear_env();
}

static void test_status_names(void **state)
{
    (void)state;
    assert_string_equal(nx_status_str(NX_OK), "NX_OK");
    assert_string_equal(nx_status_str(NX_ERR_NOMEM), "NX_ERR_NOMEM");
    assert_string_equal(nx_status_str(NX_ERR_INTERNAL), "NX_ERR_INTERNAL");
    assert_string_equal(nx_status_str((nx_status)999), "NX_ERR_UNKNOWN");
    assert_string_equal(nx_status_str((nx_status)-1), "NX_ERR_UNKNOWN");
    for (int s = 0; s < NX_STATUS_COUNT; s++)
        assert_non_null(strstr(nx_status_str((nx_status)s), "NX_"));
    assert_string_equal(nx_backend_name(NX_BACKEND_CUDA), "cuda");
    assert_null(nx_backend_name(NX_BACKEND_COUNT));
    assert_string_equal(nx_version(), "0.1.0");
}

struct log_capture {
    int calls;
    nx_log_level level;
    char last[256];
};

static void capture_log(void *user, nx_log_level level, const char *msg)
{
    struct log_capture *c = user;
    c->calls++;
    c->level = level;
    snprintf(c->last, sizeof c->last, "%s", msg);
}

static void test_log_and_errors(void **state)
{
    (void)state;
    struct log_capture cap = {0};
    nx_ctx_opts opts = {.log = capture_log, .log_user = &cap, .ignore_env = true};
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(&opts, &ctx), NX_OK);
    nx_ctx_log(ctx, NX_LOG_WARN, "fallback from %s to %s", "cuda", "cpu");
    assert_int_equal(cap.calls, 1);
    assert_int_equal(cap.level, NX_LOG_WARN);
    assert_string_equal(cap.last, "fallback from cuda to cpu");

    /* an error from a tensor call lands on this context */
    int64_t shape[2] = {2, -3};
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, 2, shape, &t), NX_ERR_SHAPE);
    assert_null(t);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "extent 1 is -3"));
    nx_ctx_free(ctx);
}

static void test_allocator_hook(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    assert_true(ta.live >= 1); /* the context itself came from the hook */
    int64_t shape[1] = {100};
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 1, shape, &t), NX_OK);
    assert_true(ta.live_bytes >= 800);
    assert_int_equal(((uintptr_t)nx_tensor_data(t)) % 64, 0);
    nx_tensor_free(t);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
    assert_int_equal(ta.size_errors, 0);

    /* a failing context allocation is reported, not a crash */
    nx_test_alloc tf = {.fail_at = 1};
    nx_allocator a = nx_test_allocator(&tf);
    nx_ctx_opts opts = {.allocator = &a, .ignore_env = true};
    ctx = NULL;
    assert_int_equal(nx_ctx_new(&opts, &ctx), NX_ERR_NOMEM);
    assert_null(ctx);
    assert_non_null(strstr(nx_ctx_last_error(NULL), "out of memory"));

    nx_allocator half = {a.alloc, NULL, &tf};
    opts.allocator = &half;
    assert_int_equal(nx_ctx_new(&opts, &ctx), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_ctx_new(NULL, NULL), NX_ERR_INVALID_ARG);
}

/* The default allocator keeps freed blocks of >= 2 MiB for the next allocation of the same size;
 * other sizes, a full budget and a user allocator get none. */
static void test_kept_blocks(void **state)
{
    (void)state;
    nx_ctx *ctx = NULL;
    nx_ctx_opts o = {.ignore_env = true};
    assert_int_equal(nx_ctx_new(&o, &ctx), NX_OK);
    int64_t big[1] = {(int64_t)(3u << 20) / 4}, other[1] = {(int64_t)(4u << 20) / 4};
    nx_tensor *a = NULL, *b = NULL, *c = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, 1, big, &a), NX_OK);
    void *pa = nx_tensor_data(a);
    memset(pa, 1, (size_t)big[0] * 4);
    nx_tensor_free(a);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, 1, other, &b), NX_OK);
    assert_ptr_not_equal(nx_tensor_data(b), pa); /* another size: a fresh block */
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, 1, big, &c), NX_OK);
    assert_ptr_equal(nx_tensor_data(c), pa); /* the kept block */
    nx_tensor_free(c);
    nx_ctx_trim(ctx); /* released: the next one is whatever the system gives */
    nx_tensor_free(b);
    /* More 2 MiB blocks than the context has slots (32): the last is freed, not kept (the
     * sanitizer builds check that every block, kept or not, is released by nx_ctx_free) */
    int64_t two[1] = {(int64_t)(2u << 20) / 4};
    nx_tensor *t[33] = {NULL};
    for (int i = 0; i < 33; i++)
        assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, 1, two, &t[i]), NX_OK);
    for (int i = 0; i < 33; i++)
        nx_tensor_free(t[i]);
    /* 64 MiB blocks past the smallest budget (256 MiB) */
    int64_t huge[1] = {(int64_t)(64u << 20) / 4};
    nx_tensor *h[5] = {NULL};
    for (int i = 0; i < 5; i++)
        assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, 1, huge, &h[i]), NX_OK);
    for (int i = 0; i < 5; i++)
        nx_tensor_free(h[i]);
    nx_ctx_free(ctx); /* frees the kept ones (ASan's leak check would say otherwise) */

    nx_test_alloc ta = {0};
    ctx = nx_test_ctx(&ta);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, 1, big, &a), NX_OK);
    int64_t live = ta.live;
    nx_tensor_free(a);
    assert_true(ta.live < live); /* a user allocator gets its block back at once */
    nx_ctx_trim(ctx);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
    nx_ctx_trim(NULL);
}

static nx_status sweep_tensor_new(nx_ctx *ctx, void *user)
{
    (void)user;
    int64_t shape[3] = {4, 5, 6};
    nx_tensor *t = NULL;
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F32, 3, shape, &t);
    if (st != NX_OK)
        return st;
    nx_tensor_free(t);
    return NX_OK;
}

static void test_tensor_new_sweep(void **state)
{
    (void)state;
    int64_t n = nx_test_alloc_sweep(sweep_tensor_new, NULL, 100);
    assert_int_equal(n, 3); /* handle, storage, data */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),       cmocka_unit_test(test_env_values),
        cmocka_unit_test(test_env_errors),     cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_log_and_errors), cmocka_unit_test(test_allocator_hook),
        cmocka_unit_test(test_tensor_new_sweep), cmocka_unit_test(test_kept_blocks),
    };
    return cmocka_run_group_tests_name("ctx", tests, NULL, NULL);
}
