/* `nitrix bench [FILTER] [--json] [--runs N]`: the CPU backend's benchmark rows (bench/bench.h).
 * Medians after a warm-up; peers measured in the same run; floors computed. NumPy peers:
 * bench/peers.py. */
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "cli.h"

static void usage(FILE *f)
{
    fputs("usage: nitrix bench [FILTER[,FILTER...]] [--json] [--runs N]\n"
          "\n"
          "Runs the benchmark rows whose name contains FILTER (all by default): a elementwise\n"
          "a*b+c on 64M f32 vs memcpy, b max-plus contraction 1024^3 vs a naive C loop, c\n"
          "log-sum-exp contraction 1024^3, d sum of 64M f32 vs memcpy, e compile latency per\n"
          "kernel and cache-hit lookup; then the op families' rows, named after the op they time\n"
          "(dilate_3x3x3, gaussian_s2, semiring_ell_matmul_real_4096; a FILTER also matches the\n"
          "names they had before: morph_dilate_3x3x3, sparse_ell_matmul_real_4096, ...).\n"
          "Each row is the median of N runs (default 5) after one\n"
          "warm-up. --json prints one JSON object per row with the fields name, backend, dtype,\n"
          "shape, median_s, runs, peer, peer_median_s, floor_s. Uses the context's settings\n"
          "(NITRIX_NUM_THREADS, NITRIX_CACHE_DIR, NITRIX_REPRODUCIBLE).\n",
          f);
}

int cli_cmd_bench(int argc, char **argv)
{
    const char *filter = NULL;
    bool json = false;
    int runs = 5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return CLI_EXIT_OK;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
            char *end = NULL;
            long v = strtol(argv[++i], &end, 10);
            if (!end || *end || v < 1 || v > 1000) {
                cli_error("bench: --runs '%s'; expected an integer 1..1000", argv[i]);
                return CLI_EXIT_USAGE;
            }
            runs = (int)v;
        } else if (argv[i][0] == '-' || filter) {
            cli_error("bench: unexpected argument '%s' (see nitrix bench --help)", argv[i]);
            return CLI_EXIT_USAGE;
        } else {
            filter = argv[i];
        }
    }
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(NULL, &ctx) != NX_OK) {
        cli_error("bench: %s", nx_ctx_last_error(NULL));
        return CLI_EXIT_FAIL;
    }
    nx_status st = nx_bench_main(ctx, filter, runs, json, stdout);
    if (st != NX_OK)
        cli_error("bench: %s", nx_ctx_last_error(ctx));
    nx_ctx_free(ctx);
    return st == NX_OK ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
