/* `nitrix bench` rows of the metrics family's similarity ops (bench.h): the lncc workload,
 * radius 4 (a 9^3 window), reflect borders, 256^3 f32, on the inputs bench/peers-metrics.py gives
 * its scipy.ndimage.uniform_filter implementation: images of the same distribution (moving
 * uniform in [0, 1), fixed = sin(3 moving) plus uniform noise in [-0.3, 0.3)). Each row times
 * calls through the op table (nx_op_call / nx_op_vjp) after one warm-up call that compiles and
 * caches the program:
 *   lncc_value_r4       the value, reduction mean (a registration cost);
 *   lncc_value_grad_r4  the value call, then nx_op_vjp of it (the gradients of moving and fixed:
 *                       autodiff of the graph);
 *   lncc_grad_r4        the closed-form force (the gradient of the sum with respect to moving).
 * Peers are run by hand in the same session:
 *     /work/venv/bin/python bench/peers-metrics.py
 * The floor is memory traffic at this machine's memcpy rate measured in the same run: the two
 * images read once and the result written once (the value: 2 volumes read; value + gradient and
 * the force: 2 read, 1 or 2 written). The note gives the median process CPU time.
 * Under NITRIX_BACKEND=cuda the rows run on the device: the images (and the seed gradient) are
 * uploaded once, each timed call takes and returns device tensors, and the floor is the same
 * volumes at the H200's HBM rate; the peers are `bench/peers-metrics.py --gpu` (PyTorch conv3d
 * box sums on the device, same call). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "nitrix-op.h"

typedef struct metric_row {
    const char *name;
    int kind; /* 0 value, 1 value + vjp, 2 lncc_grad */
    double volumes; /* volumes the floor moves */
} metric_row;

/* Inputs of the distribution bench/peers-metrics.py draws (not its bits: NumPy's generator). */
static nx_status make_inputs(nx_ctx *ctx, int n, nx_tensor **m, nx_tensor **f)
{
    int64_t shape[3] = {n, n, n};
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F32, 3, shape, m);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F32, 3, shape, f);
    if (st != NX_OK)
        return st;
    float *a = nx_tensor_data(*m), *b = nx_tensor_data(*f);
    uint64_t s = 20261207;
    for (int64_t i = 0; i < nx_tensor_numel(*m); i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        a[i] = (float)((double)(s >> 11) / 9007199254740992.0);
    }
    for (int64_t i = 0; i < nx_tensor_numel(*m); i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        double u = (double)(s >> 11) / 9007199254740992.0;
        b[i] = (float)(sin(3.0 * (double)a[i]) + 0.6 * u - 0.3);
    }
    return NX_OK;
}

static double process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static nx_status call(nx_ctx *ctx, const metric_row *r, nx_tensor *const *in, nx_tensor *dy)
{
    const nx_tensor *ins[2] = {in[0], in[1]};
    const char *keys[] = {"radius", "mode", "reduction"}, *vals[] = {"4", "reflect", "mean"};
    nx_tensor *y = NULL, *dx[3] = {0};
    bool force = r->kind == 2; /* lncc_grad has no reduction */
    nx_status st = nx_op_call(ctx, force ? "lncc_grad" : "lncc", 2, ins, force ? 2 : 3, keys, vals,
                              1, &y);
    nx_tensor_free(y);
    if (st == NX_OK && r->kind == 1)
        st = nx_op_vjp(ctx, "lncc", 2, ins, 3, keys, vals, 1, (const nx_tensor *[]){dy}, dx);
    nx_tensor_free(dx[0]);
    nx_tensor_free(dx[1]);
    return st;
}

static nx_status run_row(nx_ctx *ctx, const metric_row *r, nx_tensor *const *in, nx_tensor *dy,
                         int runs, bool json, FILE *f)
{
    nx_bench_row row;
    nx_bench_set_row(&row, r->name, "[256,256,256]");
    nx_status st = call(ctx, r, in, dy); /* warm-up: compiles and caches */
    bool gpu = nx_ctx_backend(ctx) == NX_BACKEND_CUDA;
    double *t = calloc((size_t)runs * 2, sizeof(double)), *cpu = t ? t + runs : NULL;
    for (int i = 0; st == NX_OK && t && i < runs; i++) {
        double c0 = process_cpu_s(), t0 = nx_bench_now();
        st = call(ctx, r, in, dy);
        t[i] = nx_bench_now() - t0;
        cpu[i] = process_cpu_s() - c0;
    }
    if (st == NX_OK && t) {
        row.runs = runs;
        row.min_s = row.max_s = t[0];
        for (int i = 1; i < runs; i++) {
            row.min_s = t[i] < row.min_s ? t[i] : row.min_s;
            row.max_s = t[i] > row.max_s ? t[i] : row.max_s;
        }
        row.median_s = nx_bench_median(t, runs);
        size_t bytes = (size_t)nx_tensor_numel(in[0]) * 4;
        if (gpu) {
            snprintf(row.backend, sizeof row.backend, "cuda");
            row.floor_s = r->volumes * (double)bytes / NX_BENCH_H200_BYTES_PER_S;
            snprintf(row.peer, sizeof row.peer, "torch conv3d box sums (peers --gpu)");
            snprintf(row.note, sizeof row.note,
                     "device tensors in and out, sync included; floor %.0f volumes at the "
                     "H200's 4.8 TB/s; peer: bench/peers-metrics.py --gpu", r->volumes);
        } else {
            double bw = nx_bench_memcpy_rate(bytes);
            /* memcpy moves each byte twice (read + write) */
            row.floor_s = bw > 0 ? r->volumes * (double)bytes / (2.0 * bw) : 0;
            snprintf(row.peer, sizeof row.peer, "scipy uniform_filter (peers)");
            snprintf(row.note, sizeof row.note,
                     "cpu time %.4f s; floor %.0f volumes at memcpy %.1f GB/s; peer: "
                     "bench/peers-metrics.py",
                     nx_bench_median(cpu, runs), r->volumes, bw / 1e9);
        }
        nx_bench_print_row(&row, json, f);
    }
    free(t);
    return st;
}

nx_status nx_bench_metrics(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f)
{
    static const metric_row rows[] = {
        {"lncc_value_r4", 0, 2.0},
        {"lncc_value_grad_r4", 1, 4.0},
        {"lncc_grad_r4", 2, 3.0},
    };
    bool any = false;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        any = any || nx_bench_wanted(filter, rows[i].name);
    if (!any)
        return NX_OK;
    nx_tensor *in[2] = {NULL, NULL}, *dy = NULL;
    nx_status st = make_inputs(ctx, 256, &in[0], &in[1]);
    if (st == NX_OK && (st = nx_tensor_new(ctx, NX_DTYPE_F32, 0, NULL, &dy)) == NX_OK)
        *(float *)nx_tensor_data(dy) = 1.0f;
    for (int k = 0; k < 2 && st == NX_OK; k++)
        st = nx_bench_place_input(ctx, &in[k]);
    if (st == NX_OK)
        st = nx_bench_place_input(ctx, &dy);
    for (size_t i = 0; st == NX_OK && i < sizeof rows / sizeof rows[0]; i++)
        if (nx_bench_wanted(filter, rows[i].name))
            st = run_row(ctx, &rows[i], in, dy, runs, json, f);
    nx_tensor_free(in[0]);
    nx_tensor_free(in[1]);
    nx_tensor_free(dy);
    return st;
}
