/* A log sink that can hold messages back: the demo and `nitrix info` ask each backend in turn and
 * report a fallback warning as that backend's status line instead of as a stray stderr line. */
#include <stdio.h>
#include <stdlib.h>

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
