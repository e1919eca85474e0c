/* `nitrix bench` rows of the overlap and classification-evaluation metrics (bench.h), called by
 * name through nx_op_call on the CPU backend, each the median of timed calls after a warm-up
 * call (which compiles and caches the programs). The inputs are the ones bench/peers-overlap.py
 * builds for its peers (SciPy's reimplementation of MONAI's surface algorithm, scikit-learn,
 * NumPy), run by hand in the same session:
 *     /work/venv/bin/python bench/peers-overlap.py
 *   hausdorff95_128, surface_dice_128   two balls in 128^3 (radius 40 at (64, 64, 64) and radius
 *                                       37 at (67, 62, 64)), bool, spacing 1 (tolerance 2)
 *   roc_auc_1m                          10^6 f64 scores (a fixed LCG), labels score-correlated
 *   dice_256                            256^3 f32 probabilities and a hard target, one coefficient
 * No floors: these rows have no issue target; they are recorded to compare with the peers. */
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "nitrix-op.h"

static double lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*s >> 11) / 9007199254740992.0;
}

static nx_status ball(nx_ctx *ctx, int n, double r, double cx, double cy, double cz,
                      nx_tensor **out)
{
    int64_t shape[3] = {n, n, n};
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_BOOL, 3, shape, out);
    if (st != NX_OK)
        return st;
    uint8_t *d = nx_tensor_data(*out);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++) {
                double x = i - cx, y = j - cy, z = k - cz;
                d[((int64_t)i * n + j) * n + k] = x * x + y * y + z * z <= r * r;
            }
    return NX_OK;
}

typedef struct ov_row {
    const char *name, *op, *shape, *dtype, *peer;
    int nopt;
    const char *keys[2], *vals[2];
} ov_row;

static nx_status inputs(nx_ctx *ctx, const ov_row *r, nx_tensor **in)
{
    if (strncmp(r->name, "roc_auc", 7) == 0) {
        int64_t n = 1000000;
        nx_status st = nx_tensor_new(ctx, NX_DTYPE_F64, 1, &n, &in[0]);
        if (st == NX_OK)
            st = nx_tensor_new(ctx, NX_DTYPE_I64, 1, &n, &in[1]);
        if (st != NX_OK)
            return st;
        double *s = nx_tensor_data(in[0]);
        int64_t *y = nx_tensor_data(in[1]);
        uint64_t seed = 20261207;
        for (int64_t i = 0; i < n; i++) {
            s[i] = lcg(&seed);
            y[i] = lcg(&seed) < s[i];
        }
        return NX_OK;
    }
    if (strncmp(r->name, "dice", 4) == 0) {
        int64_t shape[3] = {256, 256, 256};
        nx_status st = nx_tensor_new(ctx, NX_DTYPE_F32, 3, shape, &in[0]);
        if (st == NX_OK)
            st = nx_tensor_new(ctx, NX_DTYPE_F32, 3, shape, &in[1]);
        if (st != NX_OK)
            return st;
        float *p = nx_tensor_data(in[0]), *t = nx_tensor_data(in[1]);
        uint64_t seed = 20261207;
        for (int64_t i = 0; i < nx_tensor_numel(in[0]); i++) {
            p[i] = (float)lcg(&seed);
            t[i] = lcg(&seed) < 0.5 ? 0.0f : 1.0f;
        }
        return NX_OK;
    }
    nx_status st = ball(ctx, 128, 40, 64, 64, 64, &in[0]);
    return st == NX_OK ? ball(ctx, 128, 37, 67, 62, 64, &in[1]) : st;
}

static nx_status run_row(nx_ctx *ctx, const ov_row *r, int runs, bool json, FILE *f)
{
    nx_bench_row row;
    nx_bench_set_row(&row, r->name, r->shape);
    snprintf(row.dtype, sizeof row.dtype, "%s", r->dtype);
    nx_tensor *in[2] = {NULL, NULL}, *y = NULL;
    nx_status st = inputs(ctx, r, in);
    const nx_tensor *const *cin = (const nx_tensor *const *)in;
    if (st == NX_OK)
        st = nx_op_call(ctx, r->op, 2, cin, r->nopt, r->keys, r->vals, 1, &y); /* warm-up */
    nx_tensor_free(y);
    double *t = calloc((size_t)runs, sizeof(double));
    for (int i = 0; st == NX_OK && t && i < runs; i++) {
        double t0 = nx_bench_now();
        y = NULL;
        st = nx_op_call(ctx, r->op, 2, cin, r->nopt, r->keys, r->vals, 1, &y);
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
        snprintf(row.peer, sizeof row.peer, "%s", r->peer);
        snprintf(row.note, sizeof row.note, "nx_op_call %s; peer: bench/peers-overlap.py",
                 r->op);
        nx_bench_print_row(&row, json, f);
    }
    free(t);
    nx_tensor_free(in[0]);
    nx_tensor_free(in[1]);
    return st;
}

nx_status nx_bench_overlap(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f)
{
    static const ov_row rows[] = {
        {"hausdorff95_128", "hausdorff95", "[128,128,128]", "bool", "scipy MONAI (peers)", 0,
         {NULL}, {NULL}},
        {"surface_dice_128", "surface_dice", "[128,128,128]", "bool", "scipy MONAI (peers)", 1,
         {"tolerance"}, {"2"}},
        {"roc_auc_1m", "roc_auc", "[1000000]", "f64", "sklearn roc_auc_score (peers)", 0,
         {NULL}, {NULL}},
        {"dice_256", "dice", "[256,256,256]", "f32", "numpy (peers)", 0, {NULL}, {NULL}},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (!nx_bench_wanted(filter, rows[i].name))
            continue;
        nx_status st = run_row(ctx, &rows[i], runs, json, f);
        if (st != NX_OK)
            return st;
    }
    return NX_OK;
}
