/* The demo's graph pipeline until the graph IR (ir/) is built into the library. */
#include <stdio.h>

#include "demo.h"

int cli_demo_pipeline(nx_ctx *ctx, const nx_tensor *x)
{
    (void)ctx;
    (void)x;
    puts("pipeline: skipped (the graph IR is not built into this library yet)");
    return CLI_EXIT_OK;
}
