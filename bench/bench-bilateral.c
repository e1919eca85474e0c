/* `nitrix bench` rows of the bilateral family (bench.h): the bilateral filter on a 64^3 grid with
 * the 27-voxel cube as neighbourhood (features: the three coordinates and the intensity, a
 * diagonal metric), f32 on the CPU backend. The NumPy peer is bench/peers-bilateral.py, run by
 * hand in the same session. The floor is the bytes the op must move (values, features, the
 * [n, 27] i64 index and bool mask, the result) at memcpy's rate, measured in the same run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "nitrix-ops.h"

#define SIDE 64
#define N ((int64_t)SIDE * SIDE * SIDE)

typedef struct bil_inputs {
    nx_tensor *values, *features, *sigma, *index, *mask;
} bil_inputs;

static void inputs_free(bil_inputs *in)
{
    nx_tensor_free(in->values);
    nx_tensor_free(in->features);
    nx_tensor_free(in->sigma);
    nx_tensor_free(in->index);
    nx_tensor_free(in->mask);
}

/* A smooth volume plus deterministic noise, as the peer builds it. */
static nx_status inputs_new(nx_ctx *ctx, bil_inputs *in)
{
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F32, 2, (int64_t[]){N, 1}, &in->values);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F32, 2, (int64_t[]){N, 4}, &in->features);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F32, 1, (int64_t[]){4}, &in->sigma);
    if (st == NX_OK)
        st = nx_spatial_cube_neighbourhood(ctx, 3, (int64_t[]){SIDE, SIDE, SIDE}, 1, &in->index,
                                           &in->mask);
    if (st != NX_OK)
        return st;
    float *v = nx_tensor_data(in->values), *f = nx_tensor_data(in->features);
    for (int64_t i = 0; i < N; i++) {
        int64_t x = i / (SIDE * SIDE), y = i / SIDE % SIDE, z = i % SIDE;
        double noise = 0.3 * (double)(i * 7919 % 101) / 101;
        v[i] = (float)(sin(0.1 * (double)x) + cos(0.07 * (double)y) + noise);
        f[4 * i] = (float)x, f[4 * i + 1] = (float)y, f[4 * i + 2] = (float)z;
        f[4 * i + 3] = v[i];
    }
    float *s = nx_tensor_data(in->sigma);
    s[0] = s[1] = s[2] = 1.5f;
    s[3] = 0.2f;
    return NX_OK;
}

static double memcpy_rate(size_t n)
{
    char *a = malloc(n), *b = malloc(n);
    double best = NAN;
    if (a && b) {
        memset(a, 1, n);
        double t[5];
        for (int r = 0; r < 5; r++) {
            double t0 = nx_bench_now();
            memcpy(b, a, n);
            t[r] = nx_bench_now() - t0;
        }
        best = 2.0 * (double)n / nx_bench_median(t, 5);
    }
    free(a);
    free(b);
    return best;
}

static nx_status row_bilateral(nx_ctx *ctx, int runs, nx_bench_row *row)
{
    nx_bench_set_row(row, "bilateral_gaussian_64c_27", "[262144,1] k=27");
    bil_inputs in = {0};
    nx_status st = inputs_new(ctx, &in);
    nx_bilateral_opts o = {.backend = NX_BACKEND_CPU,
                           .metric = {NX_METRIC_DIAGONAL, in.sigma},
                           .index = in.index,
                           .mask = in.mask};
    nx_tensor *out = NULL;
    double t0 = nx_bench_now();
    if (st == NX_OK) /* the warm-up compiles and caches the program */
        st = nx_bilateral_gaussian(ctx, in.values, in.features, &o, &out);
    double first_s = nx_bench_now() - t0;
    nx_tensor_free(out);
    double *t = calloc((size_t)runs, sizeof *t);
    for (int r = 0; st == NX_OK && t && r < runs; r++) {
        out = NULL;
        t0 = nx_bench_now();
        st = nx_bilateral_gaussian(ctx, in.values, in.features, &o, &out);
        t[r] = nx_bench_now() - t0;
        nx_tensor_free(out);
    }
    if (st == NX_OK && t) {
        row->median_s = nx_bench_median(t, runs);
        row->min_s = t[0];
        row->max_s = t[runs - 1];
        row->runs = runs;
    }
    free(t);
    inputs_free(&in);
    double bytes = (double)N * (4 + 16 + 27 * 8 + 27 + 4);
    double bw = memcpy_rate((size_t)64 << 20);
    row->floor_s = bytes / bw;
    snprintf(row->peer, sizeof row->peer, "numpy: bench/peers-bilateral.py");
    snprintf(row->note, sizeof row->note,
             "first call %.3f s (compile); floor: %.0f MB at memcpy %.1f GB/s", first_s,
             bytes / 1e6, bw / 1e9);
    return st;
}

nx_status nx_bench_bilateral(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f)
{
    if (!nx_bench_wanted(filter, "bilateral_gaussian_64c_27"))
        return NX_OK;
    nx_bench_row row;
    nx_status st = row_bilateral(ctx, runs, &row);
    if (st == NX_OK)
        nx_bench_print_row(&row, json, f);
    return st;
}
