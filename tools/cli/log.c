/* Log sinks of the command line. One that can hold messages back: the demo and `nitrix info` ask
 * each backend in turn and report a fallback warning as that backend's status line instead of as a
 * stray stderr line. One for `nitrix run`: progress lines of a long op (NX_PROGRESS_PREFIX) as one
 * line rewritten in place when stderr is a terminal, and dropped when it is not. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char *level_name(nx_log_level level)
{
    switch (level) {
    case NX_LOG_DEBUG:
        return "debug";
    case NX_LOG_INFO:
        return "info";
    case NX_LOG_WARN:
        return "warning";
    default:
        return "error";
    }
}

static void sink(void *user, nx_log_level level, const char *msg)
{
    cli_log *log = user;
    if (log->capture && level >= NX_LOG_WARN && !log->last[0]) {
        snprintf(log->last, sizeof log->last, "%s", msg);
        return;
    }
    fprintf(stderr, "nitrix: %s: %s\n", level_name(level), msg);
}

nx_status cli_ctx_new_logged(cli_log *log, nx_ctx **out)
{
    log->capture = false;
    log->last[0] = '\0';
    /* like the default sink: debug lines only when NITRIX_LOG asks for them */
    const char *env = getenv("NITRIX_LOG");
    nx_ctx_opts opts = {.log = sink, .log_user = log, .log_level = env && *env ? NULL : "info"};
    return nx_ctx_new(&opts, out);
}

void cli_log_begin(cli_log *log)
{
    log->capture = true;
    log->last[0] = '\0';
}

void cli_log_end(cli_log *log)
{
    log->capture = false;
}

/* `nitrix run`'s sink. Progress lines may come from the library's monitor thread while the call
 * runs, hence the lock. */
static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;
static bool run_line_open; /* a progress line is on the terminal, without its newline */

static void run_sink(void *user, nx_log_level level, const char *msg)
{
    (void)user;
    bool progress = level == NX_LOG_INFO &&
                    strncmp(msg, NX_PROGRESS_PREFIX, strlen(NX_PROGRESS_PREFIX)) == 0;
    pthread_mutex_lock(&run_lock);
    if (progress) {
        if (isatty(STDERR_FILENO)) {
            bool done = strstr(msg, ": done in ") != NULL;
            /* \r and erase-line: one line rewritten in place; the last one ends it */
            fprintf(stderr, "\r\033[Knitrix: %s%s", msg + strlen(NX_PROGRESS_PREFIX),
                    done ? "\n" : "");
            fflush(stderr);
            run_line_open = !done;
        }
    } else {
        if (run_line_open)
            fputs("\r\033[K", stderr);
        run_line_open = false;
        fprintf(stderr, "nitrix: %s: %s\n", level_name(level), msg);
    }
    pthread_mutex_unlock(&run_lock);
}

nx_status cli_ctx_new_run(nx_ctx **out)
{
    /* like the default sink: debug lines only when NITRIX_LOG asks for them */
    const char *env = getenv("NITRIX_LOG");
    nx_ctx_opts opts = {.log = run_sink, .log_level = env && *env ? NULL : "info"};
    return nx_ctx_new(&opts, out);
}
