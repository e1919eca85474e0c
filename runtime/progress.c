/* Progress of long calls (progress.h). One process-wide list of open records under one lock; a
 * monitor thread, started by the first record, sleeps until the earliest due line of any record
 * and sends it. A line is formatted under the lock and sent without it (a sink may be slow or call
 * the library); a record being sent is marked, and nx_rt_progress_end waits for the mark to clear,
 * so the monitor never touches a record after its call returned. After fork() the child has no
 * monitor and no open record of another thread: the list is emptied and the next record starts a
 * monitor of its own. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "progress.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER; /* the monitor: a record came or left */
static pthread_cond_t sent = PTHREAD_COND_INITIALIZER; /* nx_rt_progress_end: a line went out */
static nx_rt_progress *open_list;
static bool monitor_on = true, monitor_started;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static nx_rt_progress_clock_fn clock_fn;
static _Thread_local nx_rt_progress *tls_current;

static double monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now_s(void)
{
    nx_rt_progress_clock_fn f = clock_fn;
    return f ? f() : monotonic_s();
}

nx_rt_progress_clock_fn nx_rt_progress_set_clock(nx_rt_progress_clock_fn fn)
{
    pthread_mutex_lock(&lock);
    nx_rt_progress_clock_fn old = clock_fn;
    clock_fn = fn;
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&lock);
    return old;
}

void nx_rt_progress_set_monitor(bool on)
{
    pthread_mutex_lock(&lock);
    monitor_on = on;
    pthread_mutex_unlock(&lock);
}

/* When p's next line is due. */
static double due(const nx_rt_progress *p)
{
    return p->last > 0 ? p->last + NX_RT_PROGRESS_INTERVAL : p->start + NX_RT_PROGRESS_DELAY;
}

static void seconds(char *buf, size_t n, double s)
{
    if (s < 60)
        snprintf(buf, n, "%.1f s", s);
    else
        snprintf(buf, n, "%d min %02d s", (int)(s / 60), (int)fmod(s, 60));
}

/* The line of p at time t (lock held). */
static void format(const nx_rt_progress *p, double t, char *buf, size_t n)
{
    char el[32], left[32];
    double elapsed = t - p->start;
    seconds(el, sizeof el, elapsed);
    const char *stage = p->stage ? p->stage : "running";
    if (p->total > 0 && p->done > 0 && p->done <= p->total) {
        double f = (double)p->done / (double)p->total;
        seconds(left, sizeof left, elapsed * (1 - f) / f);
        snprintf(buf, n, "progress: %s: %s, %d%% (%lld of %lld), %s elapsed, about %s left",
                 p->what, stage, (int)(100 * f), (long long)p->done, (long long)p->total, el,
                 left);
    } else if (p->done > 0) {
        snprintf(buf, n, "progress: %s: %s, step %lld, %s elapsed", p->what, stage,
                 (long long)p->done, el);
    } else {
        snprintf(buf, n, "progress: %s: %s, %s elapsed", p->what, stage, el);
    }
}

/* Takes p's line if one is due at t (lock held): true with the text in buf. */
static bool take_line(nx_rt_progress *p, double t, char *buf, size_t n)
{
    if (t < due(p))
        return false;
    format(p, t, buf, n);
    p->last = t;
    return true;
}

static void *monitor_main(void *arg)
{
    (void)arg;
    char line[256];
    pthread_mutex_lock(&lock);
    for (;;) {
        double t = now_s(), next = INFINITY;
        nx_rt_progress *send = NULL;
        for (nx_rt_progress *p = open_list; p && !send; p = p->next) {
            if (take_line(p, t, line, sizeof line))
                send = p;
            else if (due(p) < next)
                next = due(p);
        }
        if (send) {
            send->emitting++;
            pthread_mutex_unlock(&lock);
            nx_ctx_log(send->ctx, NX_LOG_INFO, "%s", line);
            pthread_mutex_lock(&lock);
            send->emitting--;
            pthread_cond_broadcast(&sent);
            continue;
        }
        if (next == INFINITY || clock_fn) {
            /* Nothing open, or a test's clock that real time does not move: wait for a change
             * (with a test clock, poll at the interval). */
            if (next == INFINITY) {
                pthread_cond_wait(&wake, &lock);
                continue;
            }
            next = monotonic_s() + NX_RT_PROGRESS_INTERVAL;
        } else {
            next = monotonic_s() + (next - t);
        }
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        double wait = next - monotonic_s();
        wait = wait < 0.001 ? 0.001 : wait;
        until.tv_sec += (time_t)wait;
        until.tv_nsec += (long)((wait - floor(wait)) * 1e9);
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&wake, &lock, &until);
    }
    return NULL;
}

static void fork_prepare(void)
{
    pthread_mutex_lock(&lock);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&lock);
}

static void init_wake(void)
{
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) == 0) {
        /* The monitor's deadlines are CLOCK_MONOTONIC; wall-clock jumps must not move them. */
        if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0)
            pthread_cond_init(&wake, &ca);
        pthread_condattr_destroy(&ca);
    }
}

static void fork_child(void)
{
    open_list = NULL;
    monitor_started = false;
    /* The parent's monitor may have been waiting on `wake` (and a caller on `sent`) when the fork
     * came: the child inherits those waiters in the condition variables' state, and a broadcast
     * would wait for them forever. Nobody waits in the child yet, so both start afresh. */
    init_wake();
    pthread_cond_init(&sent, NULL);
    pthread_mutex_unlock(&lock);
}

static void setup_once(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    init_wake();
}

/* Starts the monitor (lock held). A failure leaves the callers' own lines. */
static void start_monitor(void)
{
    monitor_started = true;
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0)
        return;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the monitor takes no signal */
    pthread_t th;
    pthread_create(&th, &attr, monitor_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
}

void nx_rt_progress_begin(nx_rt_progress *p, nx_ctx *ctx, const char *what)
{
    pthread_once(&atfork_once, setup_once);
    memset(p, 0, sizeof *p);
    p->ctx = ctx;
    snprintf(p->what, sizeof p->what, "%s", what ? what : "call");
    p->outer = tls_current;
    tls_current = p;
    pthread_mutex_lock(&lock);
    p->start = now_s();
    p->next = open_list;
    open_list = p;
    if (monitor_on && !monitor_started)
        start_monitor();
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&lock);
}

void nx_rt_progress_end(nx_rt_progress *p)
{
    char line[256];
    bool shown = false;
    pthread_mutex_lock(&lock);
    while (p->emitting)
        pthread_cond_wait(&sent, &lock);
    for (nx_rt_progress **q = &open_list; *q; q = &(*q)->next)
        if (*q == p) {
            *q = p->next;
            break;
        }
    if (p->last > 0) {
        char el[32];
        seconds(el, sizeof el, now_s() - p->start);
        snprintf(line, sizeof line, "progress: %s: done in %s", p->what, el);
        shown = true;
    }
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&lock);
    tls_current = p->outer;
    if (shown)
        nx_ctx_log(p->ctx, NX_LOG_INFO, "%s", line);
}

nx_rt_progress *nx_rt_progress_current(void)
{
    return tls_current;
}

void nx_rt_progress_stage(nx_rt_progress *p, const char *stage)
{
    if (!p)
        return;
    char line[256];
    pthread_mutex_lock(&lock);
    p->stage = stage;
    bool send = take_line(p, now_s(), line, sizeof line);
    pthread_mutex_unlock(&lock);
    if (send)
        nx_ctx_log(p->ctx, NX_LOG_INFO, "%s", line);
}

void nx_rt_progress_step(nx_rt_progress *p, int64_t done, int64_t total)
{
    if (!p)
        return;
    char line[256];
    pthread_mutex_lock(&lock);
    p->done = done;
    p->total = total > 0 ? total : 0;
    bool send = take_line(p, now_s(), line, sizeof line);
    pthread_mutex_unlock(&lock);
    if (send)
        nx_ctx_log(p->ctx, NX_LOG_INFO, "%s", line);
}

void nx_rt_progress_poll(void)
{
    char line[256];
    for (;;) {
        pthread_mutex_lock(&lock);
        double t = now_s();
        nx_rt_progress *send = NULL;
        for (nx_rt_progress *p = open_list; p && !send; p = p->next)
            if (take_line(p, t, line, sizeof line))
                send = p;
        if (send)
            send->emitting++;
        pthread_mutex_unlock(&lock);
        if (!send)
            return;
        nx_ctx_log(send->ctx, NX_LOG_INFO, "%s", line);
        pthread_mutex_lock(&lock);
        send->emitting--;
        pthread_cond_broadcast(&sent);
        pthread_mutex_unlock(&lock);
    }
}
