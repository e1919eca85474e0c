/* libFuzzer entry (built with -Dfuzz=true, CC=clang): the fuzzer's bytes drive the random graph
 * generator's decisions. The first byte picks valid graphs or invalid builder calls. A contract
 * violation aborts with the generator's message. */
#include <stdio.h>
#include <stdlib.h>

#include "gen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char msg[1 << 16];
    nx_ctx_opts opts = {.ignore_env = true};
    nx_ctx *ctx = NULL;
    if (size == 0 || nx_ctx_new(&opts, &ctx) != NX_OK)
        return 0;
    fz_rng r;
    fz_rng_bytes(&r, data + 1, size - 1);
    fz_stats st = {0};
    bool ok = (data[0] & 1) ? fz_invalid_call(ctx, &r, &st, msg, sizeof msg)
                            : fz_valid_graph(ctx, &r, &st, msg, sizeof msg);
    nx_ctx_free(ctx);
    if (!ok) {
        fprintf(stderr, "fuzz-graph: %s\n", msg);
        abort();
    }
    return 0;
}
