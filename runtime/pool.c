/* The runtime thread pool (see pool.h for the contract).
 *
 * Hand-off: the caller publishes a job by bumping `ticket` (generation << 16 | active participants)
 * and `wake_word`. Workers poll the ticket for up to SPIN_NS and then sleep on wake_word (a futex
 * on Linux); the caller counts finished workers down in `remaining`, polls it, then sleeps on it.
 * Polling first keeps the fork/join latency of back-to-back regions around a microsecond; sleeping
 * afterwards keeps idle pools off the CPU. A futex rather than a condition variable, because a
 * broadcast makes every woken worker queue for the mutex in turn (measured: 0.1-0.3 ms to wake 4-16
 * workers from sleep). The sleep/wake races are closed Dekker-style: the sleeper announces itself
 * (sleepers, caller_waiting) and then re-reads the condition, the waker changes the condition and
 * then reads the announcement, all sequentially consistent, so at least one of the two sees the
 * other; the futex itself re-checks the word against the value read before the condition.
 *
 * Workers whose index is not below `active` only record the ticket: they never read the job, so the
 * caller need not wait for them and small regions only wake the threads they use. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "pool.h"

#define SPIN_NS 50000  /* poll this long before sleeping */
#define ACTIVE_BITS 16 /* nx_ctx_num_threads is at most 1024 */
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
    int nworkers;    /* threads running; participants = nworkers + 1 */
    int wanted;      /* workers asked for (the size of workers[]) */
    int64_t spin_ns; /* polling time before sleeping; 0 when threads outnumber cores */
    worker *workers;

    pthread_mutex_t call_lock; /* one parallel region at a time */
    pthread_mutex_t lock;      /* word_wait/word_wake where there is no futex */
    pthread_cond_t cv;

    /* What the caller writes and the workers poll, on its own cache line... */
    _Alignas(64) _Atomic uint64_t ticket;
    const job *job;             /* the current job; read by active workers only */
    _Atomic uint32_t wake_word; /* bumped with every ticket; idle workers sleep on it */
    _Atomic int sleepers;
    _Atomic bool stop;
    /* ... apart from what the workers write and the caller polls. */
    _Alignas(64) _Atomic uint32_t remaining; /* active workers still running; caller sleeps on it */
    _Atomic int caller_waiting;
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

/* ---- sleeping and waking --------------------------------------------------------------------*/

/* Sleeps unless *word != val; may return spuriously. */
static void word_wait(nx_rt_pool *p, _Atomic uint32_t *word, uint32_t val)
{
#ifdef __linux__
    (void)p;
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
#else
    pthread_mutex_lock(&p->lock);
    while (atomic_load(word) == val)
        pthread_cond_wait(&p->cv, &p->lock);
    pthread_mutex_unlock(&p->lock);
#endif
}

/* Wakes every thread sleeping on word; call after changing it. */
static void word_wake(nx_rt_pool *p, _Atomic uint32_t *word)
{
#ifdef __linux__
    (void)p;
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)word;
    pthread_mutex_lock(&p->lock);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->lock);
#endif
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Polls until *word differs from val or p->spin_ns has passed; returns the last value read. */
static uint64_t poll_u64(const nx_rt_pool *p, _Atomic uint64_t *word, uint64_t val)
{
    int64_t until = 0;
    for (uint32_t i = 0;; i++) {
        uint64_t now = atomic_load_explicit(word, memory_order_acquire);
        if (now != val || p->spin_ns == 0)
            return now;
        if ((i & 63) == 0) { /* the clock is cheap, but not free */
            int64_t t = now_ns();
            if (until == 0)
                until = t + p->spin_ns;
            else if (t > until)
                return now;
        }
        cpu_relax();
    }
}

/* Polls until the countdown *word reaches 0 or p->spin_ns has passed; returns the last value. */
static uint32_t poll_zero(const nx_rt_pool *p, _Atomic uint32_t *word)
{
    int64_t until = 0;
    for (uint32_t i = 0;; i++) {
        uint32_t now = atomic_load_explicit(word, memory_order_acquire);
        if (now == 0 || p->spin_ns == 0)
            return now;
        if ((i & 63) == 0) {
            int64_t t = now_ns();
            if (until == 0)
                until = t + p->spin_ns;
            else if (t > until)
                return now;
        }
        cpu_relax();
    }
}

/* ---- workers ---------------------------------------------------------------------------------*/

static uint64_t wait_ticket(nx_rt_pool *p, uint64_t seen)
{
    uint64_t t = poll_u64(p, &p->ticket, seen);
    if (t != seen)
        return t;
    atomic_fetch_add(&p->sleepers, 1);
    for (;;) {
        uint32_t w = atomic_load(&p->wake_word);
        if ((t = atomic_load(&p->ticket)) != seen)
            break;
        word_wait(p, &p->wake_word, w);
    }
    atomic_fetch_sub(&p->sleepers, 1);
    return t;
}

static void finish_one(nx_rt_pool *p)
{
    if (atomic_fetch_sub(&p->remaining, 1) == 1 && atomic_load(&p->caller_waiting))
        word_wake(p, &p->remaining);
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
    atomic_fetch_add(&p->wake_word, 1);
    if (atomic_load(&p->sleepers) > 0)
        word_wake(p, &p->wake_word);
}

static void wait_done(nx_rt_pool *p)
{
    if (poll_zero(p, &p->remaining) == 0)
        return;
    /* Only the worker that brings the count to 0 wakes us; intermediate values just make the
     * futex return early and the loop sleep again. */
    atomic_store(&p->caller_waiting, 1);
    uint32_t left;
    while ((left = atomic_load(&p->remaining)) != 0)
        word_wait(p, &p->remaining, left);
    atomic_store(&p->caller_waiting, 0);
}

static void run_region(nx_rt_pool *p, const job *j)
{
    pthread_mutex_lock(&p->call_lock);
    int active = p->nworkers + 1 < j->nchunks ? p->nworkers + 1 : j->nchunks;
    tls_depth++;
    if (active > 1) {
        p->job = j;
        atomic_store(&p->remaining, (uint32_t)(active - 1));
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
    atomic_store(&p->stop, true);
    uint64_t gen = (atomic_load(&p->ticket) >> ACTIVE_BITS) + 1;
    atomic_store(&p->ticket, gen << ACTIVE_BITS);
    atomic_fetch_add(&p->wake_word, 1);
    word_wake(p, &p->wake_word);
    for (int i = 0; i < p->nworkers; i++)
        pthread_join(p->workers[i].thread, NULL);
}

static void pool_free(nx_rt_pool *p)
{
    stop_workers(p);
    pthread_cond_destroy(&p->cv);
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
    if (pthread_cond_init(&p->cv, NULL) != 0)
        goto fail_cv;
    return true;
fail_cv:
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
        nx_ctx_log(
            p->ctx, NX_LOG_WARN,
            "thread pool: could not start worker thread %d of %d (%s); parallel loops run on "
            "%d thread(s) instead of %d",
            p->nworkers + 1, p->wanted, strerror(err), p->nworkers + 1, p->wanted + 1);
}

static nx_status pool_new(nx_ctx *ctx, int threads, nx_rt_pool **out)
{
    nx_rt_pool *p = nx_rt_alloc_aligned(ctx, sizeof *p, _Alignof(nx_rt_pool));
    if (!p)
        return nx_rt_nomem(ctx, "thread pool", sizeof *p);
    memset(p, 0, sizeof *p);
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
        return nx_rt_error(
            ctx, NX_ERR_INTERNAL,
            "thread pool: a pthread mutex or condition variable failed to initialise");
    }
    /* Polling only pays when every participant has a core to itself. */
    p->spin_ns = threads <= nx_rt_cpu_count() ? SPIN_NS : 0;
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
        return nx_rt_error(
            ctx, NX_ERR_INVALID_ARG,
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
