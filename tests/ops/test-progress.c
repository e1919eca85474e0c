/* Progress of long calls (runtime/progress.h, the op runner in ops/op.c): with a test clock, a
 * record sends nothing before 2 s, then at most one line per 0.5 s with the elapsed and the
 * remaining time, and a "done in" line at its end; an op called through nx_op_call whose clock
 * runs slow (each clock read advances it 1 s) reports through a capturing log sink, while the same
 * op on a still clock, and a fast op on the real clock, send nothing; the monitor thread sends a
 * heartbeat for a caller that updates nothing (inside one long kernel). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nitrix-op.h"
#include "progress.h"
#include "testutil.h"

#define MAX_LINES 64

typedef struct capture {
    pthread_mutex_t lock;
    int n;
    char lines[MAX_LINES][256];
    pthread_t from[MAX_LINES];
} capture;

static capture cap = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void sink(void *user, nx_log_level level, const char *msg)
{
    (void)user;
    if (level != NX_LOG_INFO || strncmp(msg, NX_PROGRESS_PREFIX, strlen(NX_PROGRESS_PREFIX)))
        return;
    pthread_mutex_lock(&cap.lock);
    if (cap.n < MAX_LINES) {
        snprintf(cap.lines[cap.n], sizeof cap.lines[cap.n], "%s", msg);
        cap.from[cap.n] = pthread_self();
        cap.n++;
    }
    pthread_mutex_unlock(&cap.lock);
}

static int captured(void)
{
    pthread_mutex_lock(&cap.lock);
    int n = cap.n;
    pthread_mutex_unlock(&cap.lock);
    return n;
}

static void reset(void)
{
    pthread_mutex_lock(&cap.lock);
    cap.n = 0;
    pthread_mutex_unlock(&cap.lock);
}

static nx_ctx *ctx_new(void)
{
    nx_ctx_opts o = {.log = sink, .ignore_env = true};
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(&o, &ctx) != NX_OK)
        fail_msg("%s", nx_ctx_last_error(NULL));
    return ctx;
}

static pthread_mutex_t clock_lock = PTHREAD_MUTEX_INITIALIZER;
static double fake_now, fake_step; /* each read returns fake_now, then adds fake_step */

static double fake_clock(void)
{
    pthread_mutex_lock(&clock_lock);
    double t = fake_now;
    fake_now += fake_step;
    pthread_mutex_unlock(&clock_lock);
    return t;
}

static void set_time(double t, double step)
{
    pthread_mutex_lock(&clock_lock);
    fake_now = t;
    fake_step = step;
    pthread_mutex_unlock(&clock_lock);
}

static int setup(void **state)
{
    (void)state;
    reset();
    set_time(100, 0);
    nx_rt_progress_set_monitor(false);
    nx_rt_progress_set_clock(fake_clock);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    nx_rt_progress_set_clock(NULL);
    nx_rt_progress_set_monitor(true);
    return 0;
}

/* The rate: nothing before 2 s, then one line per 0.5 s at most, the counts, the elapsed and the
 * remaining time (closed form: at 25% after 4 s, 12 s left), then "done in". */
static void test_rate_and_text(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    nx_rt_progress p;
    nx_rt_progress_begin(&p, ctx, "fake_op");
    assert_ptr_equal(nx_rt_progress_current(), &p);
    set_time(101.9, 0);
    nx_rt_progress_step(&p, 10, 100);
    nx_rt_progress_poll();
    assert_int_equal(captured(), 0);
    set_time(104, 0);
    nx_rt_progress_step(&p, 25, 100);
    assert_int_equal(captured(), 1);
    assert_string_equal(cap.lines[0], "progress: fake_op: running, 25% (25 of 100), 4.0 s "
                                      "elapsed, about 12.0 s left");
    set_time(104.4, 0);
    nx_rt_progress_step(&p, 30, 100);
    nx_rt_progress_poll();
    assert_int_equal(captured(), 1); /* within 0.5 s of the last line */
    set_time(104.5, 0);
    nx_rt_progress_stage(&p, "compiling");
    assert_int_equal(captured(), 2);
    assert_string_equal(cap.lines[1], "progress: fake_op: compiling, 30% (30 of 100), 4.5 s "
                                      "elapsed, about 10.5 s left");
    set_time(105.2, 0);
    nx_rt_progress_step(&p, 7, 0); /* total unknown */
    assert_int_equal(captured(), 3);
    assert_string_equal(cap.lines[2], "progress: fake_op: compiling, step 7, 5.2 s elapsed");
    set_time(190, 0);
    nx_rt_progress_end(&p);
    assert_null(nx_rt_progress_current());
    assert_int_equal(captured(), 4);
    assert_string_equal(cap.lines[3], "progress: fake_op: done in 1 min 30 s");
    nx_ctx_free(ctx);
}

/* A caller that updates nothing: the monitor's pass (here on this thread) sends the heartbeat. */
static void test_heartbeat(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    nx_rt_progress p;
    nx_rt_progress_begin(&p, ctx, "one_long_kernel");
    set_time(101.5, 0);
    nx_rt_progress_poll();
    assert_int_equal(captured(), 0);
    set_time(112, 0);
    nx_rt_progress_poll();
    nx_rt_progress_poll();
    assert_int_equal(captured(), 1);
    assert_string_equal(cap.lines[0], "progress: one_long_kernel: running, 12.0 s elapsed");
    nx_rt_progress_end(&p);
    assert_int_equal(captured(), 2);
    nx_ctx_free(ctx);
}

/* A short call sends nothing, not even "done". */
static void test_short_call_silent(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    nx_rt_progress p;
    nx_rt_progress_begin(&p, ctx, "quick");
    set_time(101.99, 0);
    nx_rt_progress_step(&p, 1, 2);
    nx_rt_progress_poll();
    nx_rt_progress_end(&p);
    assert_int_equal(captured(), 0);
    nx_ctx_free(ctx);
}

static nx_status call_copy(nx_ctx *ctx)
{
    int64_t n = 64;
    nx_tensor *x = NULL, *y = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 1, &n, &x), NX_OK);
    const char *keys[] = {"backend"}, *vals[] = {"cpu"};
    nx_status st = nx_op_call(ctx, "copy", 1, (const nx_tensor *const[]){x}, 1, keys, vals, 1, &y);
    nx_tensor_free(y);
    nx_tensor_free(x);
    return st;
}

static nx_status call_knn(nx_ctx *ctx, int64_t n)
{
    nx_tensor *f = NULL, *m = NULL, *idx = NULL;
    int64_t fs[2] = {n, 2}, ms[1] = {2};
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 2, fs, &f), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 1, ms, &m), NX_OK);
    double *fd = nx_tensor_data(f), *md = nx_tensor_data(m);
    for (int64_t i = 0; i < 2 * n; i++)
        fd[i] = (double)((i * 7919) % 1009);
    md[0] = md[1] = 1;
    const char *keys[] = {"k", "backend"}, *vals[] = {"2", "cpu"};
    nx_status st = nx_op_call(ctx, "brute_force_knn", 2, (const nx_tensor *const[]){f, m}, 2,
                              keys, vals, 1, &idx);
    nx_tensor_free(idx);
    nx_tensor_free(m);
    nx_tensor_free(f);
    return st;
}

/* Through the runner: a slow clock (1 s a read) makes an op call long, and it reports with its
 * name, its host loop's counts (the k-NN's row blocks: 2500 points make blocks of 1677 and 823
 * rows, 4 Mi distances a block) and the time left, then "done"; on a still clock the same call
 * sends nothing. */
static void test_runner_reports(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    set_time(100, 1.0);
    assert_int_equal(call_knn(ctx, 2500), NX_OK);
    int n = captured();
    bool counted = false;
    for (int i = 0; i < n; i++)
        counted = counted || (strstr(cap.lines[i], "progress: brute_force_knn: running, 67% "
                                                   "(1677 of 2500), ") &&
                              strstr(cap.lines[i], " left"));
    if (!counted)
        fail_msg("no line with counts among %d (first: %s)", n, n ? cap.lines[0] : "none");
    assert_non_null(strstr(cap.lines[n - 1], "progress: brute_force_knn: done in"));
    reset();
    set_time(100, 0);
    assert_int_equal(call_knn(ctx, 2500), NX_OK);
    assert_int_equal(captured(), 0);
    nx_ctx_free(ctx);
}

/* The real clock and the monitor thread: a fast op sends nothing. */
static void test_fast_op_real_clock(void **state)
{
    (void)state;
    nx_rt_progress_set_clock(NULL);
    nx_rt_progress_set_monitor(true);
    nx_ctx *ctx = ctx_new();
    assert_int_equal(call_copy(ctx), NX_OK); /* compiles: may be slow under sanitizers */
    reset();
    for (int i = 0; i < 3; i++)
        assert_int_equal(call_copy(ctx), NX_OK);
    assert_int_equal(captured(), 0);
    nx_ctx_free(ctx);
}

/* The monitor thread sends the heartbeat of a record whose caller is busy (here: waiting), from
 * its own thread, and the record's end waits for a line in flight. */
static void test_monitor_thread(void **state)
{
    (void)state;
    nx_rt_progress_set_monitor(true);
    nx_ctx *ctx = ctx_new();
    nx_rt_progress p;
    set_time(100, 0);
    nx_rt_progress_begin(&p, ctx, "busy");
    set_time(130, 0);
    struct timespec ms10 = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 500 && captured() == 0; i++) /* up to 5 s of real time */
        nanosleep(&ms10, NULL);
    nx_rt_progress_end(&p);
    assert_true(captured() >= 2);
    assert_string_equal(cap.lines[0], "progress: busy: running, 30.0 s elapsed");
    assert_false(pthread_equal(cap.from[0], pthread_self()));
    nx_ctx_free(ctx);
}

/* fork() right after a call, while the monitor thread is being woken by the call's end: the
 * child inherits that waiter in the condition variable's state, without the thread. The child's
 * calls must still begin and end (a broadcast to the phantom waiter used to block the child
 * forever). Each child reports through its exit status and has 60 s (alarm). */
static void test_fork_after_calls(void **state)
{
    (void)state;
    nx_rt_progress_set_clock(NULL);
    nx_rt_progress_set_monitor(true);
    nx_ctx *ctx = ctx_new();
    for (int round = 0; round < 20; round++) {
        assert_int_equal(call_copy(ctx), NX_OK); /* its end wakes the monitor */
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            alarm(60);
            nx_ctx *c = ctx_new(); /* the parent's pool threads are not here: a new context */
            _exit(call_copy(c) == NX_OK && call_copy(c) == NX_OK ? 0 : 1);
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    assert_int_equal(call_copy(ctx), NX_OK); /* and the parent goes on */
    nx_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rate_and_text, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heartbeat, setup, teardown),
        cmocka_unit_test_setup_teardown(test_short_call_silent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_runner_reports, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fast_op_real_clock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_monitor_thread, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork_after_calls, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
