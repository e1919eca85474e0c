/* The runtime thread pool: a static, deterministic fork/join over an index range.
 *
 * nx_rt_parallel_for(ctx, n, grain, fn, user) splits [0, n) into nchunks contiguous chunks and
 * calls fn(user, begin, end, chunk) once per chunk, then returns when all are done. The partition
 * depends only on (n, grain, nx_ctx_num_threads(ctx)):
 *
 *     nchunks = min(threads, max(1, n / grain))      (grain < 1 counts as 1)
 *     chunk i has n / nchunks elements, plus one for i < n % nchunks, in ascending order
 *
 * so every chunk holds at least min(grain, n) elements and the same call always gives the same
 * chunks with the same indices, whichever thread runs them and even when fewer threads could be
 * started. Reproducible reductions (DESIGN.md §6) rely on this: a kernel keeps one partial per
 * chunk index and combines them in ascending chunk order.
 *
 * Threads: the caller runs chunk 0 (and every chunk congruent to 0 modulo the number of running
 * participants); threads-1 workers are created on the first parallel call of a context and joined
 * by nx_ctx_free. A call with a single chunk runs fn on the caller directly, without touching the
 * pool. A call made from inside fn (on any context) runs all its chunks inline, in ascending order,
 * on the thread that makes it: nesting never deadlocks and never oversubscribes. Concurrent calls
 * on one context from several threads are supported and serialised: one parallel region runs at a
 * time per context, the others wait their turn.
 *
 * After fork(), the child must not run parallel regions on a context whose pool the parent had
 * started (the child has none of its threads); contexts created in the child are fine.
 *
 * If a worker thread cannot be created the pool runs with the threads it has (one NX_LOG_WARN per
 * pool); the partition does not change. */
#ifndef NX_RUNTIME_POOL_H
#define NX_RUNTIME_POOL_H

#include <pthread.h>

#include "internal.h"

/* One chunk of a parallel loop: indices [begin, end), chunk number in [0, nchunks). Within a call,
 * chunk numbers are distinct, so chunk may index per-chunk scratch or partials. */
typedef void (*nx_rt_pool_fn)(void *user, int64_t begin, int64_t end, int chunk);

/* The number of chunks nx_rt_parallel_for uses for (n, grain, threads); 0 when n <= 0. */
NX_HIDDEN int nx_rt_pool_chunks(int64_t n, int64_t grain, int threads);
/* Bounds of chunk i of nchunks over [0, n). */
NX_HIDDEN void nx_rt_pool_chunk_range(int64_t n, int nchunks, int i, int64_t *begin, int64_t *end);

/* Runs fn over [0, n) as described above. NX_ERR_INVALID_ARG for n < 0 or a NULL ctx/fn;
 * NX_ERR_NOMEM when the pool cannot be allocated (fn has then not been called). */
NX_HIDDEN nx_status nx_rt_parallel_for(nx_ctx *ctx, int64_t n, int64_t grain, nx_rt_pool_fn fn,
                                       void *user);

/* Creates the context's pool if needed and stores the number of threads that run parallel regions
 * (the caller included): nx_ctx_num_threads(ctx), or fewer when thread creation failed. */
NX_HIDDEN nx_status nx_rt_pool_threads(nx_ctx *ctx, int *out);

/* True while the calling thread runs a chunk of a parallel region (nested calls run inline). */
NX_HIDDEN bool nx_rt_pool_in_region(void);

/* Test hook: the function that starts worker threads (pthread_create by default; NULL restores it).
 * Returns the previous one. Set it only while no pool is being created. */
typedef int (*nx_rt_pool_spawn_fn)(pthread_t *thread, const pthread_attr_t *attr,
                                   void *(*start)(void *), void *arg);
NX_HIDDEN nx_rt_pool_spawn_fn nx_rt_pool_set_spawn(nx_rt_pool_spawn_fn fn);

#endif /* NX_RUNTIME_POOL_H */
