/* `nitrix bench` rows of the numerics normalisers (bench.h), called by name through nx_op_call on
 * the CPU backend, each the median of timed calls after a warm-up call (which compiles and caches
 * the program). Input: a 256^3 f32 volume, uniform in [0, 1) (a fixed LCG), as
 * bench/peers-numerics.py builds for its NumPy peers (same distribution, NumPy's generator), run
 * by hand in the same session:
 *     /work/venv/bin/python bench/peers-numerics.py
 *   zscore_normalize_256     (x - mean) / (std + 1e-12) over the whole volume
 *   percentile_rescale_256   clip((x - p0) / (p99 - p0 + 1e-8), 0, 1), numpy.percentile's method
 * No floors: the issue names no target for these rows; they are recorded against the peers. */
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "nitrix-op.h"

static double lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*s >> 11) / 9007199254740992.0;
}

static nx_status run_row(nx_ctx *ctx, const char *name, const char *op, const nx_tensor *x,
                         int runs, bool json, FILE *f)
{
    nx_bench_row row;
    nx_bench_set_row(&row, name, "[256,256,256]");
    nx_tensor *y = NULL;
    const nx_tensor *const in[1] = {x};
    nx_status st = nx_op_call(ctx, op, 1, in, 0, NULL, NULL, 1, &y); /* warm-up */
    nx_tensor_free(y);
    double *t = calloc((size_t)runs, sizeof(double));
    for (int i = 0; st == NX_OK && t && i < runs; i++) {
        double t0 = nx_bench_now();
        y = NULL;
        st = nx_op_call(ctx, op, 1, in, 0, NULL, NULL, 1, &y);
        t[i] = nx_bench_now() - t0;
        nx_tensor_free(y);
    }
    if (st == NX_OK && t) {
        row.runs = runs;
        row.min_s = row.max_s = t[0];
        for (int i = 1; i < runs; i++) {
            row.min_s = t[i] < row.min_s ? t[i] : row.min_s;
            row.max_s = t[i] > row.max_s ? t[i] : row.max_s;
        }
        row.median_s = nx_bench_median(t, runs);
        snprintf(row.peer, sizeof row.peer, "numpy (peers)");
        snprintf(row.note, sizeof row.note,
                 "nx_op_call %s, defaults; peer: "
                 "bench/peers-numerics.py",
                 op);
        nx_bench_print_row(&row, json, f);
    }
    free(t);
    return st;
}

nx_status nx_bench_numerics(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f)
{
    static const char *const rows[2][2] = {{"zscore_normalize_256", "zscore_normalize"},
                                           {"percentile_rescale_256", "percentile_rescale"}};
    bool any = false;
    for (int i = 0; i < 2; i++)
        any = any || nx_bench_wanted(filter, rows[i][0]);
    if (!any)
        return NX_OK;
    int64_t shape[3] = {256, 256, 256};
    nx_tensor *x = NULL;
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F32, 3, shape, &x);
    if (st != NX_OK)
        return st;
    float *d = nx_tensor_data(x);
    uint64_t seed = 20261207;
    for (int64_t i = 0; i < nx_tensor_numel(x); i++)
        d[i] = (float)lcg(&seed);
    for (int i = 0; st == NX_OK && i < 2; i++)
        if (nx_bench_wanted(filter, rows[i][0]))
            st = run_row(ctx, rows[i][0], rows[i][1], x, runs, json, f);
    nx_tensor_free(x);
    return st;
}
