/* Parts of `nitrix demo` shared between demo.c and the graph pipeline (demo-graph.c). */
#ifndef NX_CLI_DEMO_H
#define NX_CLI_DEMO_H

#include "cli.h"

/* Monotonic seconds. */
double cli_now(void);
/* Prints mean, std, min and max of count floats on one indented line. */
void cli_demo_stats(const char *what, const float *v, int64_t count);
/* Runs the graph pipeline on phantom x (f32[n,n,n]) on each backend; returns an exit code. log is
 * the context's sink (cli_ctx_new_logged), used to report fallbacks in place. */
int cli_demo_pipeline(nx_ctx *ctx, cli_log *log, const nx_tensor *x);

#endif /* NX_CLI_DEMO_H */
