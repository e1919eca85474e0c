/* `nitrix bench` rows of the logits and contrastive metrics (bench.h): bce_with_logits over 256^3
 * f32, cross_entropy_with_logits over (4, 8, 64, 64, 64) f32 logits with i64 targets, info_nce
 * over (4096, 128) f32 pairs, each unreduced, through nx_op_call (the op table's runner) after one
 * warm-up call that compiles and caches the program. The inputs are the ones
 * bench/peers-logits.py builds for its NumPy/SciPy peers (run by hand in the same session:
 * `python3 bench/peers-logits.py`). The floor is memory: the bytes read and written
 * once at this machine's memcpy rate, measured in the same run (info_nce: its matmul's FMAs at
 * 2 cores x 2 FMA pipes x 8 f32 lanes x 2.6 GHz, when larger). */
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "nitrix-op.h"

#define PEAK_FMA_PER_S (2.0 * 2.0 * 8.0 * 2.6e9)

typedef struct logit_row {
    const char *name, *op, *shape;
    const char *const *keys, *const *vals;
    int nopt;
} logit_row;

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 11;
}

/* Uniform f32 in [lo, hi). */
static nx_status uniform(nx_ctx *ctx, int nd, const int64_t *shape, double lo, double hi,
                         uint64_t seed, nx_tensor **out)
{
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F32, nd, shape, out);
    if (st != NX_OK)
        return st;
    float *d = nx_tensor_data(*out);
    for (int64_t i = 0; i < nx_tensor_numel(*out); i++)
        d[i] = (float)(lo + (hi - lo) * (double)lcg(&seed) / 9007199254740992.0);
    return NX_OK;
}

/* The row's inputs and the bytes one call must move (inputs read, output written). */
static nx_status inputs(nx_ctx *ctx, const logit_row *r, nx_tensor **in, int *nin, double *bytes,
                        double *fma)
{
    nx_status st;
    *fma = 0;
    if (!strcmp(r->op, "bce_with_logits")) {
        int64_t s[3] = {256, 256, 256};
        *nin = 2;
        st = uniform(ctx, 3, s, -10, 10, 1, &in[0]);
        if (st == NX_OK)
            st = uniform(ctx, 3, s, 0, 1, 2, &in[1]);
        *bytes = 3.0 * 4.0 * 256 * 256 * 256;
        return st;
    }
    if (!strcmp(r->op, "cross_entropy_with_logits")) {
        int64_t s[5] = {4, 8, 64, 64, 64}, ts[4] = {4, 64, 64, 64};
        *nin = 2;
        st = uniform(ctx, 5, s, -10, 10, 3, &in[0]);
        if (st == NX_OK)
            st = nx_tensor_new(ctx, NX_DTYPE_I64, 4, ts, &in[1]);
        uint64_t seed = 4;
        for (int64_t i = 0; st == NX_OK && i < nx_tensor_numel(in[1]); i++)
            ((int64_t *)nx_tensor_data(in[1]))[i] = (int64_t)(lcg(&seed) % 8);
        double n = 4.0 * 64 * 64 * 64;
        *bytes = n * (8 * 4 + 8 + 4);
        return st;
    }
    int64_t s[2] = {4096, 128};
    *nin = 2;
    st = uniform(ctx, 2, s, -1, 1, 5, &in[0]);
    if (st == NX_OK)
        st = uniform(ctx, 2, s, -1, 1, 6, &in[1]);
    *bytes = 2.0 * 4096 * 128 * 4 + 4096 * 4;
    *fma = 4096.0 * 4096 * 128;
    return st;
}

static nx_status run_row(nx_ctx *ctx, const logit_row *r, int runs, bool json, FILE *f)
{
    nx_bench_row row;
    nx_bench_set_row(&row, r->name, r->shape);
    nx_tensor *in[2] = {0}, *y = NULL;
    int nin = 0;
    double bytes = 0, fma = 0;
    nx_status st = inputs(ctx, r, in, &nin, &bytes, &fma);
    const nx_tensor *const *cin = (const nx_tensor *const *)in;
    if (st == NX_OK) /* warm-up: compiles and caches */
        st = nx_op_call(ctx, r->op, nin, cin, r->nopt, r->keys, r->vals, 1, &y);
    nx_tensor_free(y);
    double *t = calloc((size_t)runs, sizeof(double));
    for (int i = 0; st == NX_OK && t && i < runs; i++) {
        double t0 = nx_bench_now();
        y = NULL;
        st = nx_op_call(ctx, r->op, nin, cin, r->nopt, r->keys, r->vals, 1, &y);
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
        double bw = nx_bench_memcpy_rate((size_t)bytes);
        double mem = bw > 0 ? bytes / bw : 0, flops = fma / PEAK_FMA_PER_S;
        row.floor_s = mem > flops ? mem : flops;
        snprintf(row.peer, sizeof row.peer, "NumPy/SciPy f32 (peers-logits.py)");
        snprintf(row.note, sizeof row.note,
                 "unreduced; floor max(memory %.4f s for %.0f MB at memcpy %.1f GB/s, FMA %.4f "
                 "s); peer: bench/peers-logits.py",
                 mem, bytes / 1e6, bw / 1e9, flops);
        nx_bench_print_row(&row, json, f);
    }
    free(t);
    nx_tensor_free(in[0]);
    nx_tensor_free(in[1]);
    return st;
}

nx_status nx_bench_logits(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f)
{
    static const char *const temp_k[] = {"temperature"}, *const temp_v[] = {"0.1"};
    static const logit_row rows[] = {
        {"bce_with_logits_256", "bce_with_logits", "[256,256,256]", NULL, NULL, 0},
        {"cross_entropy_with_logits_4x8x64", "cross_entropy_with_logits", "[4,8,64,64,64]",
         NULL, NULL, 0},
        {"info_nce_4096x128", "info_nce", "[4096,128]", temp_k, temp_v, 1},
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
