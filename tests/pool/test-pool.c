/* The runtime thread pool: coverage, the static partition, determinism, nesting, many contexts,
 * concurrent callers, thread-creation failure, allocation failure. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "pool.h"

#define MAX_N 5000
#define MAX_CHUNKS 64

/* ---- helpers ---------------------------------------------------------------------------------*/

typedef struct log_count {
    _Atomic int warn, other;
    char last[512];
} log_count;

static void count_log(void *user, nx_log_level level, const char *msg)
{
    log_count *lc = user;
    if (level == NX_LOG_WARN) {
        lc->warn++;
        snprintf(lc->last, sizeof lc->last, "%s", msg);
    } else {
        lc->other++;
    }
}

/* A context with the given thread count (through NITRIX_NUM_THREADS, the only way to set it);
 * ta and lc may be NULL. Call from the main thread only: it touches the environment. */
static nx_ctx *ctx_threads(int threads, nx_test_alloc *ta, log_count *lc)
{
    char buf[16];
    snprintf(buf, sizeof buf, "%d", threads);
    setenv("NITRIX_NUM_THREADS", buf, 1);
    nx_allocator a;
    nx_ctx_opts opts = {0};
    if (ta) {
        a = nx_test_allocator(ta);
        opts.allocator = &a;
    }
    if (lc) {
        opts.log = count_log;
        opts.log_user = lc;
    }
    nx_ctx *ctx = NULL;
    nx_status st = nx_ctx_new(&opts, &ctx);
    unsetenv("NITRIX_NUM_THREADS");
    if (st != NX_OK)
        fail_msg("nx_ctx_new: %s", nx_ctx_last_error(NULL));
    assert_int_equal(nx_ctx_num_threads(ctx), threads);
    return ctx;
}

/* What one parallel_for did: per-index hits, per-chunk calls, ranges and threads. */
typedef struct record {
    int64_t n;
    _Atomic int hits[MAX_N];
    _Atomic int calls[MAX_CHUNKS];
    int64_t begin[MAX_CHUNKS], end[MAX_CHUNKS];
    pthread_t thread[MAX_CHUNKS];
    _Atomic int bad_chunk;
} record;

static void rec_reset(record *r, int64_t n)
{
    memset(r, 0, sizeof *r);
    r->n = n;
}

static void rec_body(void *user, int64_t begin, int64_t end, int chunk)
{
    record *r = user;
    if (chunk < 0 || chunk >= MAX_CHUNKS) {
        r->bad_chunk = 1;
        return;
    }
    r->calls[chunk]++;
    r->begin[chunk] = begin;
    r->end[chunk] = end;
    r->thread[chunk] = pthread_self();
    for (int64_t i = begin; i < end && i < MAX_N; i++)
        r->hits[i]++;
}

/* Every index once, every chunk once with the partition's range. */
static void rec_check(const record *r, int64_t grain, int threads)
{
    char what[96];
    snprintf(what, sizeof what, "n=%lld grain=%lld threads=%d", (long long)r->n, (long long)grain,
             threads);
    if (r->bad_chunk)
        fail_msg("%s: chunk index out of range", what);
    for (int64_t i = 0; i < r->n && i < MAX_N; i++) {
        if (r->hits[i] != 1)
            fail_msg("%s: index %lld ran %d times", what, (long long)i, r->hits[i]);
    }
    int nchunks = nx_rt_pool_chunks(r->n, grain, threads);
    for (int c = 0; c < MAX_CHUNKS; c++) {
        int want = c < nchunks ? 1 : 0;
        if (r->calls[c] != want)
            fail_msg("%s: chunk %d ran %d times, expected %d", what, c, r->calls[c], want);
        if (!want)
            continue;
        int64_t b, e;
        nx_rt_pool_chunk_range(r->n, nchunks, c, &b, &e);
        if (r->begin[c] != b || r->end[c] != e)
            fail_msg("%s: chunk %d was [%lld,%lld), partition says [%lld,%lld)", what, c,
                     (long long)r->begin[c], (long long)r->end[c], (long long)b, (long long)e);
    }
}

/* ---- the partition, checked against its specification -----------------------------------------*/

/* The expected count, written independently of nx_rt_pool_chunks. */
static int64_t expect_chunks(int64_t n, int64_t grain, int threads)
{
    if (n == 0)
        return 0;
    int64_t g = grain < 1 ? 1 : grain;
    int64_t k = n / g;
    if (k < 1)
        k = 1;
    return k < threads ? k : threads;
}

/* Contiguous, covering [0, n), sizes non-increasing and within one of each other, each at least
 * min(grain, n): together these pin the partition down uniquely. */
static void check_partition(int64_t n, int64_t grain, int threads)
{
    int k = nx_rt_pool_chunks(n, grain, threads);
    if (k != expect_chunks(n, grain, threads))
        fail_msg("n=%lld grain=%lld threads=%d: %d chunks, expected %lld", (long long)n,
                 (long long)grain, threads, k, (long long)expect_chunks(n, grain, threads));
    int64_t at = 0, prev = INT64_MAX, smallest = INT64_MAX, largest = 0;
    int64_t g = grain < 1 ? 1 : grain;
    for (int c = 0; c < k; c++) {
        int64_t b, e;
        nx_rt_pool_chunk_range(n, k, c, &b, &e);
        int64_t size = e - b;
        if (b != at || size > prev || size < (g < n ? g : n))
            fail_msg("n=%lld grain=%lld threads=%d: chunk %d is [%lld,%lld)", (long long)n,
                     (long long)grain, threads, c, (long long)b, (long long)e);
        at = e;
        prev = size;
        smallest = size < smallest ? size : smallest;
        largest = size > largest ? size : largest;
    }
    assert_true(at == n);
    if (k > 0)
        assert_true(largest - smallest <= 1);
}

static void test_partition(void **state)
{
    (void)state;
    static const int64_t grains[] = {-5, 0, 1, 2, 3, 5, 8, 13, 64, 1000, INT64_MAX};
    for (int t = 1; t <= 17; t++) {
        for (size_t g = 0; g < sizeof grains / sizeof *grains; g++) {
            for (int64_t n = 0; n <= 300; n++)
                check_partition(n, grains[g], t);
            check_partition(INT64_MAX, grains[g], t);
            check_partition(INT64_MAX - 1, grains[g], t);
            check_partition((int64_t)1 << 40, grains[g], t);
        }
    }
    check_partition(INT64_MAX, 1, 1024);
    check_partition(1000, 1, 1024);
    /* hand-computed: 10 over 3 chunks is 4,3,3; 10 with grain 4 is two chunks of 5 */
    int64_t b, e;
    assert_int_equal(nx_rt_pool_chunks(10, 1, 3), 3);
    nx_rt_pool_chunk_range(10, 3, 0, &b, &e);
    assert_true(b == 0 && e == 4);
    nx_rt_pool_chunk_range(10, 3, 2, &b, &e);
    assert_true(b == 7 && e == 10);
    assert_int_equal(nx_rt_pool_chunks(10, 4, 8), 2);
    nx_rt_pool_chunk_range(10, 2, 1, &b, &e);
    assert_true(b == 5 && e == 10);
}

/* ---- running it ------------------------------------------------------------------------------*/

static const int64_t cover_n[] = {0, 1, 2, 3, 7, 8, 9, 63, 64, 65, 1000, 4097};
static const int64_t cover_grain[] = {-5, 0, 1, 2, 3, 7, 64, 1000, INT64_MAX};

static void test_cover(void **state)
{
    (void)state;
    static const int thread_counts[] = {1, 2, 3, 4, 7, 8};
    record *r = malloc(sizeof *r);
    for (size_t t = 0; t < sizeof thread_counts / sizeof *thread_counts; t++) {
        int threads = thread_counts[t];
        nx_ctx *ctx = ctx_threads(threads, NULL, NULL);
        for (size_t i = 0; i < sizeof cover_n / sizeof *cover_n; i++) {
            for (size_t g = 0; g < sizeof cover_grain / sizeof *cover_grain; g++) {
                rec_reset(r, cover_n[i]);
                assert_int_equal(nx_rt_parallel_for(ctx, cover_n[i], cover_grain[g], rec_body, r),
                                 NX_OK);
                rec_check(r, cover_grain[g], threads);
                /* the static assignment: chunk c runs on participant c mod threads, and chunk 0
                 * on the caller */
                int k = nx_rt_pool_chunks(cover_n[i], cover_grain[g], threads);
                for (int c = 0; c < k; c++) {
                    bool same = pthread_equal(r->thread[c], r->thread[c % threads]);
                    assert_true(same);
                    if (c > 0 && c < threads)
                        assert_false(pthread_equal(r->thread[c], r->thread[0]));
                }
                if (k > 0)
                    assert_true(pthread_equal(r->thread[0], pthread_self()));
            }
        }
        nx_ctx_free(ctx);
    }
    free(r);
}

/* Ranges only (no per-index work): n up to INT64_MAX must not overflow anywhere. */
static void range_body(void *user, int64_t begin, int64_t end, int chunk)
{
    int64_t(*ranges)[2] = user;
    ranges[chunk][0] = begin;
    ranges[chunk][1] = end;
}

static void test_huge(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_threads(8, NULL, NULL);
    int64_t ranges[8][2];
    static const int64_t grains[] = {1, INT64_MAX / 3, INT64_MAX / 2, INT64_MAX};
    for (size_t g = 0; g < 4; g++) {
        memset(ranges, 0xff, sizeof ranges);
        assert_int_equal(nx_rt_parallel_for(ctx, INT64_MAX, grains[g], range_body, ranges), NX_OK);
        int k = nx_rt_pool_chunks(INT64_MAX, grains[g], 8);
        assert_int_equal(k, (int)expect_chunks(INT64_MAX, grains[g], 8));
        int64_t at = 0;
        for (int c = 0; c < k; c++) {
            assert_true(ranges[c][0] == at);
            at = ranges[c][1];
        }
        assert_true(at == INT64_MAX);
    }
    nx_ctx_free(ctx);
}

/* ---- determinism -----------------------------------------------------------------------------*/

typedef struct sum_job {
    double partial[MAX_CHUNKS];
} sum_job;

/* A sum whose floating-point value depends on where the chunks split. */
static void sum_body(void *user, int64_t begin, int64_t end, int chunk)
{
    sum_job *s = user;
    double acc = 0;
    for (int64_t i = begin; i < end; i++)
        acc += 1.0 / (double)(i + 1) * (i % 3 ? 1.0 : -0.7);
    s->partial[chunk] = acc;
}

static double reduce(nx_ctx *ctx, int64_t n, int64_t grain)
{
    sum_job s;
    memset(&s, 0, sizeof s);
    assert_int_equal(nx_rt_parallel_for(ctx, n, grain, sum_body, &s), NX_OK);
    double total = 0;
    for (int c = 0; c < nx_rt_pool_chunks(n, grain, nx_ctx_num_threads(ctx)); c++)
        total += s.partial[c];
    return total;
}

static int fail_after_left;
static int spawn_fail_after(pthread_t *t, const pthread_attr_t *a, void *(*f)(void *), void *arg)
{
    if (fail_after_left-- <= 0)
        return EAGAIN;
    return pthread_create(t, a, f, arg);
}

static void test_determinism(void **state)
{
    (void)state;
    const int64_t n = 100003, grain = 1000;
    nx_ctx *a = ctx_threads(4, NULL, NULL);
    nx_ctx *b = ctx_threads(4, NULL, NULL);
    double first = reduce(a, n, grain);
    /* the same partition evaluated serially, in chunk order */
    sum_job serial;
    int k = nx_rt_pool_chunks(n, grain, 4);
    double expect = 0;
    for (int c = 0; c < k; c++) {
        int64_t lo, hi;
        nx_rt_pool_chunk_range(n, k, c, &lo, &hi);
        sum_body(&serial, lo, hi, c);
        expect += serial.partial[c];
    }
    for (int rep = 0; rep < 50; rep++) {
        double x = reduce(rep % 2 ? a : b, n, grain);
        assert_memory_equal(&x, &first, sizeof x);
    }
    assert_memory_equal(&expect, &first, sizeof expect);

    /* a pool that could start only one of its three workers computes the same bits */
    log_count lc = {0};
    fail_after_left = 1;
    nx_rt_pool_set_spawn(spawn_fail_after);
    nx_ctx *degraded = ctx_threads(4, NULL, &lc);
    double y = reduce(degraded, n, grain);
    nx_rt_pool_set_spawn(NULL);
    assert_memory_equal(&y, &first, sizeof y);
    nx_ctx_free(degraded);
    nx_ctx_free(b);
    nx_ctx_free(a);
}

/* ---- nesting ---------------------------------------------------------------------------------*/

typedef struct nest {
    nx_ctx *ctx, *other;
    record inner[MAX_CHUNKS];
    pthread_t outer_thread[MAX_CHUNKS];
    _Atomic int failures;
    bool in_region[MAX_CHUNKS];
} nest;

static void inner_body(void *user, int64_t begin, int64_t end, int chunk)
{
    rec_body(user, begin, end, chunk);
}

static void outer_body(void *user, int64_t begin, int64_t end, int chunk)
{
    (void)begin;
    (void)end;
    nest *s = user;
    s->outer_thread[chunk] = pthread_self();
    s->in_region[chunk] = nx_rt_pool_in_region();
    record *r = &s->inner[chunk];
    /* the same context, then another one: both run inline on this thread */
    if (nx_rt_parallel_for(s->ctx, r->n, 1, inner_body, r) != NX_OK)
        s->failures++;
    record again;
    rec_reset(&again, r->n);
    if (nx_rt_parallel_for(s->other, r->n, 7, inner_body, &again) != NX_OK)
        s->failures++;
    for (int64_t i = 0; i < r->n; i++) {
        if (again.hits[i] != 1)
            s->failures++;
    }
}

static void test_nested(void **state)
{
    (void)state;
    nest *s = calloc(1, sizeof *s);
    s->ctx = ctx_threads(4, NULL, NULL);
    s->other = ctx_threads(3, NULL, NULL);
    for (int c = 0; c < MAX_CHUNKS; c++)
        rec_reset(&s->inner[c], 97 + c);
    assert_false(nx_rt_pool_in_region());
    assert_int_equal(nx_rt_parallel_for(s->ctx, 8, 1, outer_body, s), NX_OK);
    assert_false(nx_rt_pool_in_region());
    assert_int_equal(s->failures, 0);
    for (int c = 0; c < 4; c++) {
        assert_true(s->in_region[c]);
        record *r = &s->inner[c];
        rec_check(r, 1, 4);
        for (int k = 0; k < 4; k++)
            assert_true(pthread_equal(r->thread[k], s->outer_thread[c]));
    }
    /* a region whose only chunk runs on the caller is not a region: nesting may use the pool */
    rec_reset(&s->inner[0], 50);
    assert_int_equal(nx_rt_parallel_for(s->ctx, 1, 1, outer_body, s), NX_OK);
    assert_false(s->in_region[0]);
    rec_check(&s->inner[0], 1, 4);
    assert_false(pthread_equal(s->inner[0].thread[1], pthread_self()));
    nx_ctx_free(s->other);
    nx_ctx_free(s->ctx);
    free(s);
}

/* ---- many contexts, concurrent callers -------------------------------------------------------*/

typedef struct caller {
    nx_ctx *ctx;
    int threads;
    int reps;
    int seed;
    _Atomic int *failures;
} caller;

static void *caller_main(void *arg)
{
    caller *c = arg;
    record *r = malloc(sizeof *r);
    unsigned x = (unsigned)c->seed * 2654435761u + 1;
    for (int rep = 0; rep < c->reps; rep++) {
        x = x * 1103515245u + 12345u;
        int64_t n = (int64_t)(x >> 8) % 3000;
        int64_t grain = 1 + (int64_t)(x >> 20) % 50;
        rec_reset(r, n);
        if (nx_rt_parallel_for(c->ctx, n, grain, rec_body, r) != NX_OK) {
            (*c->failures)++;
            continue;
        }
        int k = nx_rt_pool_chunks(n, grain, c->threads);
        for (int64_t i = 0; i < n; i++) {
            if (r->hits[i] != 1) {
                (*c->failures)++;
                break;
            }
        }
        for (int ch = 0; ch < k; ch++) {
            if (r->calls[ch] != 1)
                (*c->failures)++;
        }
        if (k > 0 && !pthread_equal(r->thread[0], pthread_self()))
            (*c->failures)++;
    }
    free(r);
    return NULL;
}

static void run_callers(caller *cs, int count)
{
    pthread_t th[16];
    for (int i = 0; i < count; i++)
        assert_int_equal(pthread_create(&th[i], NULL, caller_main, &cs[i]), 0);
    for (int i = 0; i < count; i++)
        pthread_join(th[i], NULL);
}

static void test_many_contexts(void **state)
{
    (void)state;
    enum { NCTX = 24 };
    nx_ctx *ctx[NCTX];
    record *r = malloc(sizeof *r);
    for (int i = 0; i < NCTX; i++) {
        ctx[i] = ctx_threads(1 + i % 5, NULL, NULL);
        rec_reset(r, 1000);
        assert_int_equal(nx_rt_parallel_for(ctx[i], 1000, 10, rec_body, r), NX_OK);
        rec_check(r, 10, 1 + i % 5);
    }
    /* free every other one, then run the rest from their own threads at the same time */
    for (int i = 0; i < NCTX; i += 2)
        nx_ctx_free(ctx[i]);
    _Atomic int failures = 0;
    caller cs[NCTX / 2];
    for (int i = 0; i < NCTX / 2; i++)
        cs[i] = (caller){ctx[2 * i + 1], 1 + (2 * i + 1) % 5, 40, i, &failures};
    run_callers(cs, NCTX / 2);
    assert_int_equal(failures, 0);
    for (int i = NCTX - 1; i > 0; i -= 2)
        nx_ctx_free(ctx[i]);
    /* contexts that never ran a region free cleanly too */
    for (int i = 0; i < 8; i++)
        nx_ctx_free(ctx_threads(1 + i, NULL, NULL));
    free(r);
}

/* Concurrent callers on one context are supported: they take turns. */
static void test_concurrent_callers(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_threads(3, NULL, NULL);
    _Atomic int failures = 0;
    caller cs[6];
    for (int i = 0; i < 6; i++)
        cs[i] = (caller){ctx, 3, 150, 100 + i, &failures};
    run_callers(cs, 6);
    assert_int_equal(failures, 0);
    nx_ctx_free(ctx);
}

/* Chunks that take milliseconds, and idle gaps between regions, push the caller and the workers
 * past their polling into sleeping: a lost wake-up would hang here. */
typedef struct slow {
    record rec;
    int slow_chunk; /* -1: every chunk but 0 is slow */
} slow;

static void slow_body(void *user, int64_t begin, int64_t end, int chunk)
{
    slow *s = user;
    if (chunk == s->slow_chunk || (s->slow_chunk < 0 && chunk > 0))
        usleep(400);
    rec_body(&s->rec, begin, end, chunk);
}

static void test_sleep_paths(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_threads(4, NULL, NULL);
    slow *s = malloc(sizeof *s);
    for (int rep = 0; rep < 60; rep++) {
        rec_reset(&s->rec, 1000);
        s->slow_chunk = rep % 5 - 1; /* the caller's chunk slow, a worker's, or all workers' */
        assert_int_equal(nx_rt_parallel_for(ctx, 1000, 1, slow_body, s), NX_OK);
        rec_check(&s->rec, 1, 4);
        if (rep % 3 == 0)
            usleep(1000); /* the workers stop polling and sleep */
    }
    free(s);
    nx_ctx_free(ctx);
}

/* ---- degradation and failures ----------------------------------------------------------------*/

static void test_spawn_failure(void **state)
{
    (void)state;
    record *r = malloc(sizeof *r);
    for (int ok = 0; ok <= 3; ok++) {
        log_count lc = {0};
        fail_after_left = ok;
        nx_rt_pool_spawn_fn prev = nx_rt_pool_set_spawn(spawn_fail_after);
        assert_null(prev);
        nx_ctx *ctx = ctx_threads(4, NULL, &lc);
        int running = 0;
        assert_int_equal(nx_rt_pool_threads(ctx, &running), NX_OK);
        nx_rt_pool_set_spawn(NULL);
        assert_int_equal(running, ok + 1);
        assert_int_equal(lc.warn, ok < 3 ? 1 : 0);
        if (ok < 3)
            assert_non_null(strstr(lc.last, "parallel loops run on"));
        for (int rep = 0; rep < 3; rep++) {
            rec_reset(r, 4097);
            assert_int_equal(nx_rt_parallel_for(ctx, 4097, 3, rec_body, r), NX_OK);
            rec_check(r, 3, 4);
        }
        assert_int_equal(lc.warn, ok < 3 ? 1 : 0); /* one warning per pool, not per call */
        nx_ctx_free(ctx);
    }
    free(r);
}

static void test_inline_paths(void **state)
{
    (void)state;
    record *r = malloc(sizeof *r);
    nx_test_alloc ta = {0};
    /* one thread, or n <= grain: no pool, no allocation, everything on the caller */
    nx_ctx *one = ctx_threads(1, &ta, NULL);
    nx_ctx *four = ctx_threads(4, &ta, NULL);
    int64_t before = ta.count;
    rec_reset(r, 3000);
    assert_int_equal(nx_rt_parallel_for(one, 3000, 1, rec_body, r), NX_OK);
    rec_check(r, 1, 1);
    rec_reset(r, 64);
    assert_int_equal(nx_rt_parallel_for(four, 64, 64, rec_body, r), NX_OK);
    rec_check(r, 64, 4);
    assert_true(pthread_equal(r->thread[0], pthread_self()));
    rec_reset(r, 0);
    assert_int_equal(nx_rt_parallel_for(four, 0, 1, rec_body, r), NX_OK);
    rec_check(r, 1, 4);
    assert_true(ta.count == before);
    assert_null(nx_rt_ctx_get(one, NX_SLOT_POOL));
    assert_null(nx_rt_ctx_get(four, NX_SLOT_POOL));
    int running = 0;
    assert_int_equal(nx_rt_pool_threads(one, &running), NX_OK);
    assert_int_equal(running, 1);
    nx_ctx_free(four);
    nx_ctx_free(one);
    assert_true(ta.live == 0);
    free(r);
}

static void test_invalid(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_threads(2, NULL, NULL);
    record *r = malloc(sizeof *r);
    rec_reset(r, 0);
    assert_int_equal(nx_rt_parallel_for(ctx, -1, 1, rec_body, r), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "n is -1"));
    assert_int_equal(nx_rt_parallel_for(ctx, 10, 1, NULL, r), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "fn is NULL"));
    for (int c = 0; c < MAX_CHUNKS; c++)
        assert_int_equal(r->calls[c], 0);
    free(r);
    nx_ctx_free(ctx);
}

/* ---- allocation failure ----------------------------------------------------------------------*/

static nx_status sweep_body(nx_ctx *ctx, void *user)
{
    record *r = user;
    rec_reset(r, 2000);
    nx_status st = nx_rt_parallel_for(ctx, 2000, 1, rec_body, r);
    int64_t ran = 0;
    for (int64_t i = 0; i < 2000; i++)
        ran += r->hits[i];
    /* all or nothing: a failed call never ran a chunk */
    if ((st == NX_OK && ran != 2000) || (st != NX_OK && ran != 0))
        return NX_ERR_INTERNAL;
    return st;
}

static void test_alloc_sweep(void **state)
{
    (void)state;
    record *r = malloc(sizeof *r);
    /* the shared helper's contexts use all cores */
    nx_test_alloc_sweep(sweep_body, r, 50);
    /* and with four threads whatever the machine: the same sweep by hand */
    int64_t n;
    for (n = 1; n < 50; n++) {
        nx_test_alloc ta = {0};
        nx_ctx *ctx = ctx_threads(4, &ta, NULL);
        ta.fail_at = ta.count + n;
        nx_status st = sweep_body(ctx, r);
        bool fired = ta.count >= ta.fail_at;
        ta.fail_at = 0;
        nx_ctx_free(ctx);
        assert_true(ta.live == 0 && ta.size_errors == 0);
        if (!fired) {
            assert_int_equal(st, NX_OK);
            break;
        }
        assert_int_equal(st, NX_ERR_NOMEM);
    }
    assert_true(n > 2); /* the pool and its worker table were both failed once */
    free(r);
}

int main(void)
{
    unsetenv("NITRIX_NUM_THREADS");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partition),
        cmocka_unit_test(test_cover),
        cmocka_unit_test(test_huge),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_nested),
        cmocka_unit_test(test_many_contexts),
        cmocka_unit_test(test_concurrent_callers),
        cmocka_unit_test(test_sleep_paths),
        cmocka_unit_test(test_spawn_failure),
        cmocka_unit_test(test_inline_paths),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_alloc_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
