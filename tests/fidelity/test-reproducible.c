/* Reproducible mode: NITRIX_REPRODUCIBLE, scoped nesting, a fast region inside a reproducible one,
 * per-thread scopes on a shared context, and driver= resolution. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

nx_status nx_rt_driver_resolve_row(nx_ctx *ctx, const nx_divergent_op *row,
                                   const char *driver, const char **out);

static nx_ctx *env_ctx(const char *value)
{
    setenv("NITRIX_REPRODUCIBLE", value, 1);
    nx_ctx *ctx = NULL;
    nx_ctx_opts o = {0};
    assert_int_equal(nx_ctx_new(&o, &ctx), NX_OK);
    unsetenv("NITRIX_REPRODUCIBLE");
    return ctx;
}

static void test_env_var(void **state)
{
    (void)state;
    const char *on[] = {"1", "true", "yes", "on"}, *off[] = {"0", "false", "no", "off"};
    for (int i = 0; i < 4; i++) {
        nx_ctx *a = env_ctx(on[i]), *b = env_ctx(off[i]);
        assert_true(nx_ctx_reproducible(a));
        assert_false(nx_ctx_reproducible(b));
        nx_ctx_free(a);
        nx_ctx_free(b);
    }
    setenv("NITRIX_REPRODUCIBLE", "maybe", 1);
    nx_ctx *ctx = NULL;
    nx_ctx_opts o = {0};
    assert_int_equal(nx_ctx_new(&o, &ctx), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(NULL), "NITRIX_REPRODUCIBLE"));
    /* ignore_env: the variable is not read */
    o.ignore_env = true;
    setenv("NITRIX_REPRODUCIBLE", "1", 1);
    assert_int_equal(nx_ctx_new(&o, &ctx), NX_OK);
    assert_false(nx_ctx_reproducible(ctx));
    nx_ctx_free(ctx);
    unsetenv("NITRIX_REPRODUCIBLE");
}

static void test_nesting(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    assert_false(nx_ctx_reproducible(ctx));
    assert_int_equal(nx_ctx_reproducible_push(ctx, true), NX_OK);
    assert_true(nx_ctx_reproducible(ctx));
    /* a fast region inside the reproducible one */
    assert_int_equal(nx_ctx_reproducible_push(ctx, false), NX_OK);
    assert_false(nx_ctx_reproducible(ctx));
    assert_int_equal(nx_ctx_reproducible_push(ctx, true), NX_OK);
    assert_true(nx_ctx_reproducible(ctx));
    assert_int_equal(nx_ctx_reproducible_pop(ctx), NX_OK);
    assert_false(nx_ctx_reproducible(ctx));
    assert_int_equal(nx_ctx_reproducible_pop(ctx), NX_OK);
    assert_true(nx_ctx_reproducible(ctx));
    assert_int_equal(nx_ctx_reproducible_pop(ctx), NX_OK);
    assert_false(nx_ctx_reproducible(ctx));
    assert_int_equal(nx_ctx_reproducible_pop(ctx), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "nx_ctx_reproducible_push"));
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void test_env_then_fast_region(void **state)
{
    (void)state;
    nx_ctx *ctx = env_ctx("1");
    assert_int_equal(nx_ctx_reproducible_push(ctx, false), NX_OK);
    assert_false(nx_ctx_reproducible(ctx));
    assert_int_equal(nx_ctx_reproducible_pop(ctx), NX_OK);
    assert_true(nx_ctx_reproducible(ctx));
    nx_ctx_free(ctx);
}

static void test_two_contexts(void **state)
{
    (void)state;
    nx_test_alloc ta = {0}, tb = {0};
    nx_ctx *a = nx_test_ctx(&ta), *b = nx_test_ctx(&tb);
    assert_int_equal(nx_ctx_reproducible_push(a, true), NX_OK);
    assert_int_equal(nx_ctx_reproducible_push(b, true), NX_OK);
    assert_int_equal(nx_ctx_reproducible_push(a, false), NX_OK);
    assert_false(nx_ctx_reproducible(a));
    assert_true(nx_ctx_reproducible(b));
    /* popping b's scope leaves both of a's, in order */
    assert_int_equal(nx_ctx_reproducible_pop(b), NX_OK);
    assert_false(nx_ctx_reproducible(b));
    assert_false(nx_ctx_reproducible(a));
    assert_int_equal(nx_ctx_reproducible_pop(a), NX_OK);
    assert_true(nx_ctx_reproducible(a));
    assert_int_equal(nx_ctx_reproducible_pop(a), NX_OK);
    assert_false(nx_ctx_reproducible(a));
    nx_ctx_free(a);
    nx_ctx_free(b);
}

static void test_depth_limit(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    for (int i = 0; i < NX_REPRODUCIBLE_MAX_DEPTH; i++)
        assert_int_equal(nx_ctx_reproducible_push(ctx, i % 2 == 0), NX_OK);
    assert_int_equal(nx_ctx_reproducible_push(ctx, true), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "NX_REPRODUCIBLE_MAX_DEPTH"));
    /* the last accepted push (index 63, odd) is in effect */
    assert_false(nx_ctx_reproducible(ctx));
    for (int i = 0; i < NX_REPRODUCIBLE_MAX_DEPTH; i++)
        assert_int_equal(nx_ctx_reproducible_pop(ctx), NX_OK);
    assert_int_equal(nx_ctx_reproducible_pop(ctx), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_ctx_reproducible_push(NULL, true), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_ctx_reproducible_pop(NULL), NX_ERR_INVALID_ARG);
    nx_ctx_free(ctx);
}

typedef struct thread_arg {
    nx_ctx *ctx;
    pthread_barrier_t *bar;
    bool before, inside, after;
} thread_arg;

static void *other_thread(void *p)
{
    thread_arg *t = p;
    t->before = nx_ctx_reproducible(t->ctx);
    pthread_barrier_wait(t->bar); /* main has pushed */
    t->inside = nx_ctx_reproducible(t->ctx);
    if (nx_ctx_reproducible_push(t->ctx, false) != NX_OK)
        t->inside = !t->inside; /* reported below as a mismatch */
    pthread_barrier_wait(t->bar); /* main checks it still sees its own scope */
    pthread_barrier_wait(t->bar);
    t->after = nx_ctx_reproducible(t->ctx);
    nx_ctx_reproducible_pop(t->ctx);
    return NULL;
}

/* Scopes are per thread: one thread's push is invisible to another sharing the context. */
static void test_threads(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    thread_arg t = {ctx, &bar, true, true, true};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, other_thread, &t), 0);
    assert_int_equal(nx_ctx_reproducible_push(ctx, true), NX_OK);
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
    bool main_sees = nx_ctx_reproducible(ctx);
    pthread_barrier_wait(&bar);
    pthread_join(th, NULL);
    pthread_barrier_destroy(&bar);
    assert_true(main_sees);
    assert_false(t.before);
    assert_false(t.inside); /* main's scope does not reach the other thread */
    assert_false(t.after);  /* its own fast scope */
    assert_int_equal(nx_ctx_reproducible_pop(ctx), NX_OK);
    nx_ctx_free(ctx);
}

static void test_resolve(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    const nx_divergent_op row = {"toy", "exact", "fast", "exact|fast|blocked", 1e-12, 0.0, "toy"};
    const char *v = NULL;
    assert_int_equal(nx_rt_driver_resolve_row(ctx, &row, NULL, &v), NX_OK);
    assert_string_equal(v, "fast");
    assert_int_equal(nx_rt_driver_resolve_row(ctx, &row, "auto", &v), NX_OK);
    assert_string_equal(v, "fast");
    assert_int_equal(nx_ctx_reproducible_push(ctx, true), NX_OK);
    assert_int_equal(nx_rt_driver_resolve_row(ctx, &row, "", &v), NX_OK);
    assert_string_equal(v, "exact");
    /* an explicit driver wins over the mode */
    assert_int_equal(nx_rt_driver_resolve_row(ctx, &row, "fast", &v), NX_OK);
    assert_string_equal(v, "fast");
    assert_int_equal(nx_rt_driver_resolve_row(ctx, &row, "blocked", &v), NX_OK);
    assert_string_equal(v, "blocked");
    assert_int_equal(nx_ctx_reproducible_push(ctx, false), NX_OK);
    assert_int_equal(nx_rt_driver_resolve_row(ctx, &row, NULL, &v), NX_OK);
    assert_string_equal(v, "fast");
    assert_int_equal(nx_rt_driver_resolve_row(ctx, &row, "exact", &v), NX_OK);
    assert_string_equal(v, "exact");
    assert_int_equal(nx_ctx_reproducible_pop(ctx), NX_OK);
    assert_int_equal(nx_ctx_reproducible_pop(ctx), NX_OK);
    /* prefixes and substrings of accepted values are not accepted */
    const char *bad[] = {"exac", "xact", "fast|exact", "block", "FAST"};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(nx_rt_driver_resolve_row(ctx, &row, bad[i], &v), NX_ERR_INVALID_ARG);
        assert_non_null(strstr(nx_ctx_last_error(ctx), "auto|exact|fast|blocked"));
    }
    /* auto picks a fast variant only within NX_DIVERGENT_AUTO_TOL of the canonical one (rtol and
     * atol): a wider contract leaves auto canonical, an explicit driver still wins */
    const nx_divergent_op wide_atol = {"toy", "exact", "fast", "exact|fast", 0.0, 2e-3, "toy"};
    const nx_divergent_op wide_rtol = {"toy", "exact", "fast", "exact|fast", 0.07, 0.0, "toy"};
    const nx_divergent_op edge = {"toy", "exact", "fast", "exact|fast", 1e-3, 1e-3, "toy"};
    assert_true(nx_divergent_auto_fast(&row));
    assert_true(nx_divergent_auto_fast(&edge));
    assert_false(nx_divergent_auto_fast(&wide_atol));
    assert_false(nx_divergent_auto_fast(&wide_rtol));
    assert_int_equal(nx_rt_driver_resolve_row(ctx, &edge, NULL, &v), NX_OK);
    assert_string_equal(v, "fast");
    const nx_divergent_op *wide[] = {&wide_atol, &wide_rtol};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(nx_rt_driver_resolve_row(ctx, wide[i], NULL, &v), NX_OK);
        assert_string_equal(v, "exact");
        assert_int_equal(nx_rt_driver_resolve_row(ctx, wide[i], "auto", &v), NX_OK);
        assert_string_equal(v, "exact");
        assert_int_equal(nx_rt_driver_resolve_row(ctx, wide[i], "fast", &v), NX_OK);
        assert_string_equal(v, "fast");
    }
    assert_int_equal(nx_driver_resolve(ctx, "no_such_op", NULL, &v), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "not in the divergent-op registry"));
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_var),   cmocka_unit_test(test_nesting),
        cmocka_unit_test(test_env_then_fast_region), cmocka_unit_test(test_two_contexts),
        cmocka_unit_test(test_depth_limit), cmocka_unit_test(test_threads),
        cmocka_unit_test(test_resolve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
