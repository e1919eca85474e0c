/* `nitrix bench`: the CPU backend's benchmark rows (issue 5 rows a-e), each the median of timed
 * runs after a warm-up, with its peer measured in the same run and its floor computed. Numbers
 * are reported, never asserted. */
#ifndef NX_BENCH_H
#define NX_BENCH_H

#include <stdio.h>

#include "nitrix.h"

typedef struct nx_bench_row {
    char name[40];
    char backend[8];
    char dtype[8];
    char shape[40];
    double median_s;
    int runs;
    char peer[48];
    double peer_median_s; /* 0: no peer in this run */
    double floor_s;       /* 0: no floor */
    double min_s, max_s;  /* spread of the timed runs */
    char note[160];
} nx_bench_row;

/* Runs the rows whose name contains filter (NULL or "": all), runs timed repetitions each, and
 * prints one line per row to f: JSON lines when json, else a table. */
nx_status nx_bench_main(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f);

#endif
