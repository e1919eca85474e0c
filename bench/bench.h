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

/* Runs the rows whose name (or former name) contains filter (NULL or "": all), runs timed
 * repetitions each, and prints one line per row to f: JSON lines when json, else a table. */
nx_status nx_bench_main(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f);

/* Helpers for the op-family rows (bench/bench-<family>.c). */
double nx_bench_now(void);             /* monotonic seconds */
double nx_bench_median(double *t, int n); /* sorts t */
double nx_bench_memcpy_rate(size_t bytes); /* best of 3 memcpy runs, bytes/s (0: no memory) */
void nx_bench_set_row(nx_bench_row *row, const char *name, const char *shape); /* cpu, f32 */
void nx_bench_print_row(const nx_bench_row *r, bool json, FILE *f);
bool nx_bench_wanted(const char *filter, const char *name);
/* Under a cuda context, replaces *x by its device copy (uploaded once, before the timed calls, so
 * a row times device tensors in and out); a no-op on the CPU. *x is freed either way on error. */
nx_status nx_bench_place_input(nx_ctx *ctx, nx_tensor **x);
#define NX_BENCH_H200_BYTES_PER_S 4.8e12 /* HBM3e, the H200's data sheet */

/* The op families' rows: each runs its rows whose names match filter (or their names before the
 * rename, bench.c) and prints them. Row names start with the op's table name (dilate_3x3x3,
 * semiring_ell_matmul_real_4096) where the row times one op. Their peers (scipy, NumPy) are bench/peers-<family>.py. */
nx_status nx_bench_semiring(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f);
nx_status nx_bench_morphology(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f);
nx_status nx_bench_sparse(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f);
nx_status nx_bench_smoothing(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f);
nx_status nx_bench_bilateral(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f);
nx_status nx_bench_overlap(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f);
nx_status nx_bench_metrics(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f);
nx_status nx_bench_metrics_mi(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f);
nx_status nx_bench_logits(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f);
nx_status nx_bench_geometry(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f);
nx_status nx_bench_geometry_sampling(nx_ctx *ctx, const char *filter, int runs, bool json,
                                     FILE *f);
nx_status nx_bench_signal(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f);
nx_status nx_bench_numerics(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f);
nx_status nx_bench_random(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f);
nx_status nx_bench_linalg(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f);

#endif
