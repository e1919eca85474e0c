/* Timings of the runtime services (a benchmark, not a test): fork/join latency of an empty
 * parallel region, hot and from sleep, and kernel cache lookups in memory and on disk.
 * Threads: NITRIX_NUM_THREADS (default all cores). Usage: bench-pool [cache-dir] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "pool.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void empty(void *user, int64_t begin, int64_t end, int chunk)
{
    (void)user;
    (void)begin;
    (void)end;
    (void)chunk;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void bench_pool(nx_ctx *ctx)
{
    int t = nx_ctx_num_threads(ctx);
    int running = 0;
    nx_rt_pool_threads(ctx, &running);
    for (int i = 0; i < 1000; i++)
        nx_rt_parallel_for(ctx, t, 1, empty, NULL);
    enum { BATCH = 2000, BATCHES = 25 };
    double per[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
        double t0 = now();
        for (int i = 0; i < BATCH; i++)
            nx_rt_parallel_for(ctx, t, 1, empty, NULL);
        per[b] = (now() - t0) / BATCH;
    }
    qsort(per, BATCHES, sizeof *per, cmp_double);
    printf("pool: %d threads (%d running), back-to-back empty region: median %.2f us, best %.2f "
           "us (batches of %d)\n",
           t, running, 1e6 * per[BATCHES / 2], 1e6 * per[0], BATCH);
    enum { COLD = 100 };
    double cold[COLD];
    for (int i = 0; i < COLD; i++) {
        usleep(3000); /* long enough for the workers to stop polling and sleep */
        double t0 = now();
        nx_rt_parallel_for(ctx, t, 1, empty, NULL);
        cold[i] = now() - t0;
    }
    qsort(cold, COLD, sizeof *cold, cmp_double);
    printf("pool: empty region after 3 ms idle (workers asleep): median %.2f us, p90 %.2f us\n",
           1e6 * cold[COLD / 2], 1e6 * cold[COLD * 9 / 10]);
    double t0 = now();
    for (int i = 0; i < 100000; i++)
        nx_rt_parallel_for(ctx, 1, 1, empty, NULL);
    printf("pool: single-chunk call (inline): %.1f ns\n", 1e9 * (now() - t0) / 100000);
}

static void bench_cache(nx_ctx *ctx, const char *dir)
{
    nx_rt_cache *c = NULL;
    if (nx_rt_cache_open(ctx, dir, &c) != NX_OK)
        return;
    static char blob[1000][512];
    static int objs[1000];
    nx_rt_cache_key key;
    for (int k = 0; k < 1000; k++) {
        memset(blob[k], 'a' + k % 26, sizeof blob[k]);
        snprintf(blob[k], sizeof blob[k], "kernel %d", k);
        nx_rt_cache_key_init(&key, blob[k], sizeof blob[k]);
        void *w;
        nx_rt_cache_insert(c, &key, &objs[k], NULL, NULL, &w);
    }
    enum { N = 1000000 };
    double t0 = now();
    int hits = 0;
    for (int i = 0; i < N; i++) {
        nx_rt_cache_key_init(&key, blob[i % 1000], sizeof blob[0]);
        hits += nx_rt_cache_find(c, &key) != NULL;
    }
    printf("cache: hit in memory, hashing a 512-byte key blob + find: %.0f ns (%d hits)\n",
           1e9 * (now() - t0) / N, hits);
    if (dir) {
        enum { SIZE = 65536, LOADS = 2000 };
        char *payload = calloc(1, SIZE);
        nx_rt_cache_key_init(&key, blob[0], sizeof blob[0]);
        t0 = now();
        for (int i = 0; i < 50; i++)
            nx_rt_cache_store(c, &key, payload, SIZE);
        printf("cache: store of a 64 KiB entry: %.1f us\n", 1e6 * (now() - t0) / 50);
        t0 = now();
        for (int i = 0; i < LOADS; i++) {
            void *got;
            size_t len;
            bool found;
            nx_rt_cache_load(c, &key, &got, &len, &found);
            if (found)
                nx_rt_free(ctx, got, len);
        }
        printf("cache: load of a 64 KiB entry from disk (page cache): %.1f us\n",
               1e6 * (now() - t0) / LOADS);
        free(payload);
    }
    nx_rt_cache_close(c);
}

int main(int argc, char **argv)
{
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(NULL, &ctx) != NX_OK) {
        fprintf(stderr, "%s\n", nx_ctx_last_error(NULL));
        return 1;
    }
    bench_pool(ctx);
    bench_cache(ctx, argc > 1 ? argv[1] : NULL);
    nx_ctx_free(ctx);
    return 0;
}
