/* `nitrix bench` rows of the metrics family's mutual information (bench.h; issue 23): 32 bins on a
 * 256^3 f32 pair, on the CPU backend, through nx_op_call:
 *   mutual_information_32        the metric, driver auto (scatter outside reproducible mode)
 *   mutual_information_onehot_32 the canonical driver (what reproducible mode runs)
 *   mi_grad_32                   the closed-form Mattes gradient, driver auto
 * moving is uniform in [0, 1), fixed = 0.7 moving^2 + 0.3 u (u uniform), as
 * bench/peers-metrics-mi.py builds them. Each row is the median of the timed calls after one
 * warm-up call that compiles and caches the program. Peers run by hand in the same session:
 *     /work/venv/bin/python bench/peers-metrics-mi.py
 * (numpy.histogram2d + NumPy MI for the metric; NumPy's soft-binned histogram (numpy.bincount)
 * and the same closed form for mi_grad).
 * Floor: the larger of memory (reading both images once, and for mi_grad writing the gradient and
 * reading the images a second time for the gather pass, at memcpy's rate measured in the run) and
 * compute (about 24 flops of binning per sample and image at 2 cores x 2 FMA pipes x 8 f32 lanes
 * x 2.6 GHz, counting an FMA as one).
 * Under NITRIX_BACKEND=cuda the rows run on the device: both images uploaded once, device tensors
 * in and out, the floor the same passes at the H200's HBM rate; the peer is
 * `bench/peers-metrics-mi.py --gpu` (PyTorch on the device, same call). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "nitrix-op.h"

#define SIDE 256
#define PEAK_OPS_PER_S (2.0 * 2.0 * 8.0 * 2.6e9)

typedef struct mi_row {
    const char *name, *op, *driver, *peer;
    int passes; /* image-sized passes over memory the floor counts */
} mi_row;

static nx_status make_inputs(nx_ctx *ctx, nx_tensor **m, nx_tensor **f)
{
    int64_t shape[3] = {SIDE, SIDE, SIDE};
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F32, 3, shape, m);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F32, 3, shape, f);
    if (st != NX_OK)
        return st;
    float *a = nx_tensor_data(*m), *b = nx_tensor_data(*f);
    uint64_t s = 20261207;
    for (int64_t i = 0; i < nx_tensor_numel(*m); i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        double u = (double)(s >> 11) / 9007199254740992.0;
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        double v = (double)(s >> 11) / 9007199254740992.0;
        a[i] = (float)u;
        b[i] = (float)(0.7 * u * u + 0.3 * v);
    }
    return NX_OK;
}

static double process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static nx_status call(nx_ctx *ctx, const mi_row *r, const nx_tensor *m, const nx_tensor *f,
                      nx_tensor **y)
{
    const char *keys[2] = {"bins", "driver"}, *vals[2] = {"32", r->driver};
    return nx_op_call(ctx, r->op, 2, (const nx_tensor *const[]){m, f}, 2, keys, vals, 1, y);
}

static nx_status run_row(nx_ctx *ctx, const mi_row *r, const nx_tensor *m, const nx_tensor *f,
                         int runs, bool json, FILE *out)
{
    nx_bench_row row;
    nx_bench_set_row(&row, r->name, "[256,256,256] x2");
    nx_tensor *y = NULL;
    nx_status st = call(ctx, r, m, f, &y); /* warm-up: compiles and caches */
    nx_tensor_free(y);
    double *t = calloc((size_t)runs * 2, sizeof(double)), *cpu = t ? t + runs : NULL;
    if (!t)
        return NX_ERR_NOMEM;
    for (int i = 0; st == NX_OK && i < runs; i++) {
        double c0 = process_cpu_s(), t0 = nx_bench_now();
        y = NULL;
        st = call(ctx, r, m, f, &y);
        t[i] = nx_bench_now() - t0;
        cpu[i] = process_cpu_s() - c0;
        nx_tensor_free(y);
    }
    if (st == NX_OK) {
        row.runs = runs;
        row.min_s = row.max_s = t[0];
        for (int i = 1; i < runs; i++) {
            row.min_s = t[i] < row.min_s ? t[i] : row.min_s;
            row.max_s = t[i] > row.max_s ? t[i] : row.max_s;
        }
        row.median_s = nx_bench_median(t, runs);
        size_t bytes = (size_t)nx_tensor_numel(m) * sizeof(float);
        if (nx_ctx_backend(ctx) == NX_BACKEND_CUDA) {
            snprintf(row.backend, sizeof row.backend, "cuda");
            row.floor_s = (double)r->passes * (double)bytes / NX_BENCH_H200_BYTES_PER_S;
            snprintf(row.peer, sizeof row.peer, "torch soft histogram (peers --gpu)");
            snprintf(row.note, sizeof row.note,
                     "driver %s; device tensors in and out, sync included; floor %d passes at "
                     "the H200's 4.8 TB/s; peer: bench/peers-metrics-mi.py --gpu",
                     r->driver, r->passes);
            nx_bench_print_row(&row, json, out);
            free(t);
            return st;
        }
        double bw = nx_bench_memcpy_rate(bytes);
        double mem = bw > 0 ? (double)r->passes * (double)bytes / bw : 0;
        double ops = 2.0 * 24.0 * (double)nx_tensor_numel(m) / PEAK_OPS_PER_S;
        row.floor_s = mem > ops ? mem : ops;
        snprintf(row.peer, sizeof row.peer, "%s", r->peer);
        snprintf(row.note, sizeof row.note,
                 "driver %s; cpu time %.4f s; floor max(memory %.4f s at memcpy %.1f GB/s, "
                 "compute %.4f s); peer: bench/peers-metrics-mi.py",
                 r->driver, nx_bench_median(cpu, runs), mem, bw / 1e9, ops);
        nx_bench_print_row(&row, json, out);
    }
    free(t);
    return st;
}

nx_status nx_bench_metrics_mi(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f)
{
    static const mi_row rows[] = {
        {"mutual_information_32", "mutual_information", "auto",
         "numpy histogram2d + MI (peers)", 2},
        {"mutual_information_onehot_32", "mutual_information", "onehot",
         "numpy histogram2d + MI (peers)", 2},
        {"mi_grad_32", "mi_grad", "auto", "numpy soft histogram + Mattes (peers)", 5},
    };
    bool any = false;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        any = any || nx_bench_wanted(filter, rows[i].name);
    if (!any)
        return NX_OK;
    nx_tensor *m = NULL, *fx = NULL;
    nx_status st = make_inputs(ctx, &m, &fx);
    if (st == NX_OK)
        st = nx_bench_place_input(ctx, &m);
    if (st == NX_OK)
        st = nx_bench_place_input(ctx, &fx);
    for (size_t i = 0; st == NX_OK && i < sizeof rows / sizeof rows[0]; i++)
        if (nx_bench_wanted(filter, rows[i].name))
            st = run_row(ctx, &rows[i], m, fx, runs, json, f);
    nx_tensor_free(m);
    nx_tensor_free(fx);
    return st;
}
