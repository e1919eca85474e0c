/* `nitrix bench` rows of the smoothing family (bench.h): the Gaussian workloads, 256^3 f32,
 * on the input bench/peers-smoothing.py gives scipy.ndimage (uniform values in [0, 1)). Each row
 * times nx_gaussian_filter after one warm-up call (which compiles and caches the program). Peers
 * are run by hand in the same session:
 *     /usr/bin/python3 bench/peers-smoothing.py
 * The floor is the larger of two bounds: memory, the three separable passes each reading and
 * writing the volume once at this machine's memcpy rate measured in the same run; compute, one
 * FMA per tap and voxel per pass at 2 cores x 2 FMA pipes x 8 f32 lanes x 2.6 GHz (83 GFLOP/s).
 * The note gives the median process CPU time (all threads) next to the wall-clock median.
 *
 * Under NITRIX_BACKEND=cuda the same rows run on the device: the input is uploaded once with
 * nx_tensor_to_device, one warm-up call compiles, and each timed call takes and returns device
 * tensors (the program run synchronises before returning: codegen/ptx/emit-run.c), so the figure
 * excludes host-device copies. Their peers are `python3 bench/peers-smoothing.py --gpu` (PyTorch
 * on the device), their floors the H200's: 4.8 TB/s HBM for the three passes' reads and writes,
 * 132 SMs x 128 FP32 lanes x 1.98 GHz for the FMAs. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "nitrix-ops.h"

#define PEAK_FMA_PER_S (2.0 * 2.0 * 8.0 * 2.6e9)
#define H200_FMA_PER_S 3.345e13

typedef struct smooth_row {
    const char *name, *peer, *driver;
    double peer_s; /* the scipy figure; the in-session peer is peers-smoothing.py's */
    double sigma;
    const char *gpu_peer;
    double gpu_peer_s; /* the H200 figure */
} smooth_row;

static nx_status make_input(nx_ctx *ctx, int n, nx_tensor **out)
{
    int64_t shape[3] = {n, n, n};
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F32, 3, shape, out);
    if (st != NX_OK)
        return st;
    float *d = nx_tensor_data(*out);
    uint64_t s = 20261129;
    for (int64_t i = 0; i < nx_tensor_numel(*out); i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        d[i] = (float)((double)(s >> 11) / 9007199254740992.0);
    }
    return NX_OK;
}

static nx_status call(nx_ctx *ctx, const smooth_row *r, const nx_tensor *x, nx_tensor **y)
{
    nx_gaussian_opts o = {.nsigma = 1, .sigma = {r->sigma}, .driver = r->driver};
    return nx_gaussian_filter(ctx, x, &o, y);
}

/* CPU seconds of the process (all threads). */
static double process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* fir: 2 r + 1 taps per pass; recursive: 6 scans of 2 FMAs plus ~8 FMAs of combination. */
static double taps_of(const smooth_row *r)
{
    return strcmp(r->driver, "fir") ? 20.0 : 2.0 * (int)(4.0 * r->sigma + 0.5) + 1.0;
}

static void spread(nx_bench_row *row, double *t, int runs)
{
    row->runs = runs;
    row->min_s = row->max_s = t[0];
    for (int i = 1; i < runs; i++) {
        row->min_s = t[i] < row->min_s ? t[i] : row->min_s;
        row->max_s = t[i] > row->max_s ? t[i] : row->max_s;
    }
    row->median_s = nx_bench_median(t, runs);
}

static void finish_row(nx_bench_row *row, const smooth_row *r, double *t, double *cpu, int runs,
                       int64_t n)
{
    spread(row, t, runs);
    size_t bytes = (size_t)n * 4;
    double bw = nx_bench_memcpy_rate(bytes);
    double mem = bw > 0 ? 3.0 * 2.0 * (double)bytes / bw : 0;
    double flops = 3.0 * taps_of(r) * (double)n / PEAK_FMA_PER_S;
    row->floor_s = mem > flops ? mem : flops;
    snprintf(row->peer, sizeof row->peer, "%s", r->peer);
    row->peer_median_s = r->peer_s;
    snprintf(row->note, sizeof row->note,
             "driver %s; cpu time %.4f s; floor max(memory %.4f s at memcpy %.1f GB/s, compute "
             "%.4f s); peer: bench/peers-smoothing.py",
             r->driver, nx_bench_median(cpu, runs), mem, bw / 1e9, flops);
}

static void finish_gpu_row(nx_bench_row *row, const smooth_row *r, double *t, int runs, int64_t n)
{
    spread(row, t, runs);
    snprintf(row->backend, sizeof row->backend, "cuda");
    double mem = 3.0 * 2.0 * (double)n * 4 / NX_BENCH_H200_BYTES_PER_S;
    double flops = 3.0 * taps_of(r) * (double)n / H200_FMA_PER_S;
    row->floor_s = mem > flops ? mem : flops;
    snprintf(row->peer, sizeof row->peer, "%s", r->gpu_peer);
    row->peer_median_s = r->gpu_peer_s;
    snprintf(row->note, sizeof row->note,
             "driver %s; device tensors in and out, sync included, no copies; H200 floor "
             "max(HBM %.3f ms, FMA %.3f ms); peer: peers-smoothing.py --gpu",
             r->driver, mem * 1e3, flops * 1e3);
}

static nx_status run_row(nx_ctx *ctx, const smooth_row *r, int runs, bool json, FILE *f)
{
    nx_bench_row row;
    nx_bench_set_row(&row, r->name, "[256,256,256]");
    nx_tensor *x = NULL, *y = NULL;
    nx_status st = make_input(ctx, 256, &x);
    if (st == NX_OK)
        st = nx_bench_place_input(ctx, &x);
    if (st == NX_OK)
        st = call(ctx, r, x, &y); /* warm-up: compiles and caches */
    nx_tensor_free(y);
    double *t = calloc((size_t)runs * 2, sizeof(double)), *cpu = t ? t + runs : NULL;
    for (int i = 0; st == NX_OK && t && i < runs; i++) {
        double c0 = process_cpu_s(), t0 = nx_bench_now();
        y = NULL;
        st = call(ctx, r, x, &y);
        t[i] = nx_bench_now() - t0;
        cpu[i] = process_cpu_s() - c0;
        nx_tensor_free(y);
    }
    if (st == NX_OK && t) {
        if (nx_ctx_backend(ctx) == NX_BACKEND_CUDA)
            finish_gpu_row(&row, r, t, runs, nx_tensor_numel(x));
        else
            finish_row(&row, r, t, cpu, runs, nx_tensor_numel(x));
        nx_bench_print_row(&row, json, f);
    }
    free(t);
    nx_tensor_free(x);
    return st;
}

nx_status nx_bench_smoothing(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f)
{
    static const smooth_row rows[] = {
        {"gaussian_s2", "scipy gaussian_filter (issue)", "fir", 0.503, 2.0,
         "cupyx gaussian_filter (issue)", 1.59e-3},
        {"gaussian_recursive_s8", "scipy gaussian_filter s8 (peers)", "recursive", 0,
         8.0, "nitrix-JAX recursive s2 (issue)", 15.0e-3},
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
