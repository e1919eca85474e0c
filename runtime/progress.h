/* Progress of long calls: a call that runs longer than NX_RT_PROGRESS_DELAY seconds reports
 * through its context's log sink, at NX_LOG_INFO, lines that start with "progress: " (the
 * NX_PROGRESS_PREFIX of nitrix.h), at most one per NX_RT_PROGRESS_INTERVAL seconds:
 *
 *     progress: connected_components: running, step 14, 3.5 s elapsed
 *     progress: brute_force_knn: running, 40% (4000 of 10000), 2.5 s elapsed, about 3.8 s left
 *     progress: susan_emulator: done in 61.2 s
 *
 * and, when it sent any, a last "done in" line when the call ends (a terminal showing one updating
 * line clears it there). A record lives on the caller's stack for the call (the op runner,
 * ops/op.c, opens one per outermost op call); the caller updates its stage and its done/total
 * counts, and a line goes out from the caller's thread when one is due. While the caller is inside
 * one long kernel or compile it updates nothing, so a monitor thread (one per process, started by
 * the first record) sends the due lines of every open record: a sink must therefore accept calls
 * from a thread other than the caller's while a call runs (docs/user-guide.md). Nothing is sent for
 * a call shorter than the delay.
 *
 * Not installed. */
#ifndef NX_RUNTIME_PROGRESS_H
#define NX_RUNTIME_PROGRESS_H

#include "internal.h"

#define NX_RT_PROGRESS_DELAY 2.0    /* seconds before the first line */
#define NX_RT_PROGRESS_INTERVAL 0.5 /* seconds between lines */

typedef struct nx_rt_progress nx_rt_progress;
struct nx_rt_progress {
    nx_ctx *ctx;
    char what[64];
    const char *stage;   /* static text ("compiling", "running") or NULL */
    int64_t done, total; /* total 0: unknown (done counts steps) */
    double start, last;  /* the clock at the start and at the last line sent (0: none yet) */
    int emitting;        /* lines of this record the monitor is sending now */
    nx_rt_progress *next;
    nx_rt_progress *outer; /* the thread's record before this one */
};

/* Opens p for a call of ctx named what (an op's name) and makes it the calling thread's current
 * record. */
NX_HIDDEN void nx_rt_progress_begin(nx_rt_progress *p, nx_ctx *ctx, const char *what);
/* Closes p (the thread's current record): waits for a line of it the monitor is sending, then
 * sends the "done in" line when any line went out. */
NX_HIDDEN void nx_rt_progress_end(nx_rt_progress *p);
/* The calling thread's current record, or NULL. */
NX_HIDDEN nx_rt_progress *nx_rt_progress_current(void);
/* Sets the stage text (static storage) and sends a line when one is due; p may be NULL. */
NX_HIDDEN void nx_rt_progress_stage(nx_rt_progress *p, const char *stage);
/* Records done of total steps (total 0: unknown) and sends a line when one is due; p may be NULL. */
NX_HIDDEN void nx_rt_progress_step(nx_rt_progress *p, int64_t done, int64_t total);

/* Test hooks. The clock (seconds, monotonic; NULL restores CLOCK_MONOTONIC); returns the previous
 * one. Set it only while no record is open. */
typedef double (*nx_rt_progress_clock_fn)(void);
NX_HIDDEN nx_rt_progress_clock_fn nx_rt_progress_set_clock(nx_rt_progress_clock_fn fn);
/* Whether a record may start the monitor thread (default true); with false, nx_rt_progress_poll
 * does one pass of its work on the calling thread: sends the due line of every open record. */
NX_HIDDEN void nx_rt_progress_set_monitor(bool on);
NX_HIDDEN void nx_rt_progress_poll(void);

#endif /* NX_RUNTIME_PROGRESS_H */
