/* The runtime thread pool (see pool.h for the contract).
 *
 * Hand-off: the caller publishes a job by bumping `ticket` (generation << 16 | active participants).
 * Workers poll the ticket for a short while and then sleep on work_cv; the caller counts finished
 * workers down in `remaining` and polls, then sleeps on done_cv. Polling first keeps the fork/join
 * latency of back-to-back regions at a few microseconds; sleeping afterwards keeps idle pools off
 * the CPU. The sleep/wake races are closed Dekker-style: the sleeper announces itself (sleepers,
 * caller_waiting) and then re-reads the condition, the waker changes the condition and then reads the
 * announcement, all sequentially consistent, so at least one of the two sees the other.
 *
 * Workers whose index is not below `active` only record the ticket: they never read the job, so the
 * caller need not wait for them and small regions only wake the threads they use. */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "pool.h"

#define SPIN_ITERS 2000  /* polls before sleeping: about 20-100 us of pause instructions */
#define ACTIVE_BITS 16   /* nx_ctx_num_threads is at most 1024 */
#define ACTIVE_MASK ((UINT64_C(1) << ACTIVE_BITS) - 1)

typedef struct job {
    nx_rt_pool_fn fn;
    void *user;
    int64_t n;
    int nchunks;
} job;

typedef struct nx_rt_pool nx_rt_pool;

typedef struct worker {
    nx_rt_pool *pool;
    int index; /* participant number: 1..nworkers (the caller is 0) */
    pthread_t thread;
} worker;

struct nx_rt_pool {
    nx_ctx *ctx;
    int nworkers; /* threads running; participants = nworkers + 1 */
    int wanted;   /* workers asked for (the size of workers[]) */
    int spin;     /* poll iterations before sleeping; 0 when threads outnumber cores */
    worker *workers;

    pthread_mutex_t call_lock; /* one parallel region at a time */
    pthread_mutex_t lock;      /* guards sleeping on the condition variables */
    pthread_cond_t work_cv;
    pthread_cond_t done_cv;

    const job *job; /* the current job; read by active workers only */
    _Atomic uint64_t ticket;
    _Atomic int remaining;
    _Atomic int sleepers;
    _Atomic int caller_waiting;
    _Atomic bool stop;
};

/* Depth of parallel chunks running on this thread; workers keep it at 1 for their whole life. */
static _Thread_local int tls_depth;

static _Atomic(nx_rt_pool_spawn_fn) spawn_hook;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* ---- partition -------------------------------------------------------------------------------*/

int nx_rt_pool_chunks(int64_t n, int64_t grain, int threads)
{
    if (n <= 0)
        return 0;
    if (grain < 1)
        grain = 1;
    if (threads < 1)
        threads = 1;
    int64_t by_grain = n / grain;
    if (by_grain < 1)
        by_grain = 1;
    return by_grain < threads ? (int)by_grain : threads;
}

void nx_rt_pool_chunk_range(int64_t n, int nchunks, int i, int64_t *begin, int64_t *end)
{
    /* base * i + min(i, rem) never overflows: it is at most n. */
    int64_t base = n / nchunks;
    int64_t rem = n % nchunks;
    int64_t b = base * i + (i < rem ? i : rem);
    *begin = b;
    *end = b + base + (i < rem ? 1 : 0);
}

/* Runs chunks part, part + stride, ... of j. */
static void run_share(const job *j, int part, int stride)
{
    for (int c = part; c < j->nchunks; c += stride) {
        int64_t b, e;
        nx_rt_pool_chunk_range(j->n, j->nchunks, c, &b, &e);
        j->fn(j->user, b, e, c);
    }
}

bool nx_rt_pool_in_region(void)
{
    return tls_depth > 0;
}

/* ---- workers ---------------------------------------------------------------------------------*/

static uint64_t wait_ticket(nx_rt_pool *p, uint64_t seen)
{
    for (int i = 0; i < p->spin; i++) {
        uint64_t t = atomic_load_explicit(&p->ticket, memory_order_acquire);
        if (t != seen)
            return t;
        cpu_relax();
    }
    uint64_t t;
    pthread_mutex_lock(&p->lock);
    atomic_fetch_add(&p->sleepers, 1);
    while ((t = atomic_load(&p->ticket)) == seen)
        pthread_cond_wait(&p->work_cv, &p->lock);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->lock);
    return t;
}

static void finish_one(nx_rt_pool *p)
{
    if (atomic_fetch_sub(&p->remaining, 1) == 1 && atomic_load(&p->caller_waiting)) {
        pthread_mutex_lock(&p->lock);
        pthread_cond_signal(&p->done_cv);
        pthread_mutex_unlock(&p->lock);
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    nx_rt_pool *p = w->pool;
    tls_depth = 1;
    uint64_t seen = 0;
    for (;;) {
        seen = wait_ticket(p, seen);
        if (atomic_load(&p->stop))
            break;
        int active = (int)(seen & ACTIVE_MASK);
        if (w->index >= active)
            continue;
        run_share(p->job, w->index, active);
        finish_one(p);
    }
    return NULL;
}

/* ---- the caller's side -----------------------------------------------------------------------*/

static void publish(nx_rt_pool *p, int active)
{
    uint64_t gen = (atomic_load_explicit(&p->ticket, memory_order_relaxed) >> ACTIVE_BITS) + 1;
    atomic_store(&p->ticket, gen << ACTIVE_BITS | (uint64_t)active);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->lock);
        pthread_cond_broadcast(&p->work_cv);
        pthread_mutex_unlock(&p->lock);
    }
}

static void wait_done(nx_rt_pool *p)
{
    for (int i = 0; i < p->spin; i++) {
        if (atomic_load_explicit(&p->remaining, memory_order_acquire) == 0)
            return;
        cpu_relax();
    }
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->caller_waiting, 1);
    while (atomic_load(&p->remaining) != 0)
        pthread_cond_wait(&p->done_cv, &p->lock);
    atomic_store(&p->caller_waiting, 0);
    pthread_mutex_unlock(&p->lock);
}

static void run_region(nx_rt_pool *p, const job *j)
{
    pthread_mutex_lock(&p->call_lock);
    int active = p->nworkers + 1 < j->nchunks ? p->nworkers + 1 : j->nchunks;
    tls_depth++;
    if (active > 1) {
        p->job = j;
        atomic_store(&p->remaining, active - 1);
        publish(p, active);
        run_share(j, 0, active);
        wait_done(p);
    } else {
        run_share(j, 0, 1);
    }
    tls_depth--;
    pthread_mutex_unlock(&p->call_lock);
}

/* ---- creation and teardown -------------------------------------------------------------------*/

static void stop_workers(nx_rt_pool *p)
{
    if (p->nworkers == 0)
        return;
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->stop, true);
    uint64_t gen = (atomic_load(&p->ticket) >> ACTIVE_BITS) + 1;
    atomic_store(&p->ticket, gen << ACTIVE_BITS);
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->nworkers; i++)
        pthread_join(p->workers[i].thread, NULL);
}

static void pool_free(nx_rt_pool *p)
{
    stop_workers(p);
    pthread_cond_destroy(&p->done_cv);
    pthread_cond_destroy(&p->work_cv);
    pthread_mutex_destroy(&p->lock);
    pthread_mutex_destroy(&p->call_lock);
    nx_rt_free(p->ctx, p->workers, (size_t)p->wanted * sizeof *p->workers);
    nx_rt_free(p->ctx, p, sizeof *p);
}

static void pool_free_slot(nx_ctx *ctx, void *obj)
{
    (void)ctx;
    pool_free(obj);
}

static bool init_sync(nx_rt_pool *p)
{
    if (pthread_mutex_init(&p->call_lock, NULL) != 0)
        return false;
    if (pthread_mutex_init(&p->lock, NULL) != 0)
        goto fail_lock;
    if (pthread_cond_init(&p->work_cv, NULL) != 0)
        goto fail_work;
    if (pthread_cond_init(&p->done_cv, NULL) != 0)
        goto fail_done;
    return true;
fail_done:
    pthread_cond_destroy(&p->work_cv);
fail_work:
    pthread_mutex_destroy(&p->lock);
fail_lock:
    pthread_mutex_destroy(&p->call_lock);
    return false;
}

/* Starts the workers with every signal blocked, so signals go to the application's threads. */
static void spawn_workers(nx_rt_pool *p)
{
    nx_rt_pool_spawn_fn spawn = atomic_load(&spawn_hook);
    if (!spawn)
        spawn = pthread_create;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = 0;
    for (int i = 0; i < p->wanted; i++) {
        p->workers[i].pool = p;
        p->workers[i].index = i + 1;
        err = spawn(&p->workers[i].thread, NULL, worker_main, &p->workers[i]);
        if (err != 0)
            break;
        p->nworkers++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0)
        nx_ctx_log(p->ctx, NX_LOG_WARN,
                   "thread pool: could not start worker thread %d of %d (%s); parallel loops run on "
                   "%d thread(s) instead of %d",
                   p->nworkers + 1, p->wanted, strerror(err), p->nworkers + 1, p->wanted + 1);
}

static nx_status pool_new(nx_ctx *ctx, int threads, nx_rt_pool **out)
{
    nx_rt_pool *p = nx_rt_calloc(ctx, 1, sizeof *p);
    if (!p)
        return nx_rt_nomem(ctx, "thread pool", sizeof *p);
    p->ctx = ctx;
    p->wanted = threads - 1;
    size_t bytes = (size_t)p->wanted * sizeof *p->workers;
    p->workers = nx_rt_calloc(ctx, 1, bytes);
    if (!p->workers) {
        nx_rt_free(ctx, p, sizeof *p);
        return nx_rt_nomem(ctx, "thread pool: worker table", bytes);
    }
    if (!init_sync(p)) {
        nx_rt_free(ctx, p->workers, bytes);
        nx_rt_free(ctx, p, sizeof *p);
        return nx_rt_error(ctx, NX_ERR_INTERNAL,
                           "thread pool: a pthread mutex or condition variable failed to initialise");
    }
    /* Polling only pays when every participant has a core to itself. */
    p->spin = threads <= nx_rt_cpu_count() ? SPIN_ITERS : 0;
    spawn_workers(p);
    *out = p;
    return NX_OK;
}

static nx_status pool_get(nx_ctx *ctx, nx_rt_pool **out)
{
    nx_rt_pool *p = nx_rt_ctx_get(ctx, NX_SLOT_POOL);
    if (p) {
        *out = p;
        return NX_OK;
    }
    nx_status st = pool_new(ctx, nx_ctx_num_threads(ctx), &p);
    if (st != NX_OK)
        return st;
    nx_rt_pool *now = nx_rt_ctx_install(ctx, NX_SLOT_POOL, p, pool_free_slot);
    if (now != p)
        pool_free(p);
    *out = now;
    return NX_OK;
}

/* ---- entry points ----------------------------------------------------------------------------*/

nx_status nx_rt_parallel_for(nx_ctx *ctx, int64_t n, int64_t grain, nx_rt_pool_fn fn, void *user)
{
    if (!ctx || !fn)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_rt_parallel_for: %s is NULL; expected a context and a chunk function",
                           ctx ? "fn" : "ctx");
    if (n < 0)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_rt_parallel_for: n is %lld; expected a count >= 0", (long long)n);
    job j = {fn, user, n, nx_rt_pool_chunks(n, grain, nx_ctx_num_threads(ctx))};
    if (j.nchunks == 0)
        return NX_OK;
    if (j.nchunks == 1) {
        fn(user, 0, n, 0);
        return NX_OK;
    }
    if (tls_depth > 0) {
        tls_depth++;
        run_share(&j, 0, 1);
        tls_depth--;
        return NX_OK;
    }
    nx_rt_pool *p = NULL;
    nx_status st = pool_get(ctx, &p);
    if (st != NX_OK)
        return st;
    run_region(p, &j);
    return NX_OK;
}

nx_status nx_rt_pool_threads(nx_ctx *ctx, int *out)
{
    if (nx_ctx_num_threads(ctx) == 1) {
        *out = 1;
        return NX_OK;
    }
    nx_rt_pool *p = NULL;
    nx_status st = pool_get(ctx, &p);
    if (st == NX_OK)
        *out = p->nworkers + 1;
    return st;
}

nx_rt_pool_spawn_fn nx_rt_pool_set_spawn(nx_rt_pool_spawn_fn fn)
{
    return atomic_exchange(&spawn_hook, fn);
}
