/* `nitrix bench` rows of the smoothing family (bench.h). */
#include "bench/bench.h"

nx_status nx_bench_smoothing(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f)
{
    (void)ctx, (void)filter, (void)runs, (void)json, (void)f;
    return NX_OK;
}
