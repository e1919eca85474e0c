/* `nitrix bench` rows of the signal family (bench.h): the IIR workload, sosfiltfilt of an
 * order-4 Butterworth band-pass (butterworth_sos order 4, fs 1, 0.05..0.2: four sections) with
 * scipy's odd extension and default padlen (27), along the last axis of 1024 channels x 4096
 * samples, through the op table (nx_op_call) after one warm-up call that compiles and caches:
 *   sosfiltfilt_bp4_1024x4096   float64 on the CPU (the CPU row); under
 *                               NITRIX_BACKEND=cuda float32 on device tensors (the H200
 *                               row): x uploaded once, each timed call takes and returns device
 *                               tensors (the program run synchronises before returning), so the
 *                               figure excludes host-device copies.
 * The driver is auto (scan on the CPU, the registry's fast pick, associative, on cuda). The peer
 * is scipy.signal.sosfiltfilt on the same design and shape, run by hand in the same session:
 *     /work/venv/bin/python bench/peers-signal.py
 * The floor is memory traffic at this machine's memcpy rate measured in the same run: x read and
 * y written once. The note gives the median process CPU time. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "nitrix-op.h"

#define CHANNELS 1024
#define SAMPLES 4096

static double process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static nx_status make_input(nx_ctx *ctx, nx_dtype dt, nx_tensor **x)
{
    nx_status st = nx_tensor_new(ctx, dt, 2, (int64_t[]){CHANNELS, SAMPLES}, x);
    if (st != NX_OK)
        return st;
    uint64_t s = 20261207;
    for (int64_t i = 0; i < nx_tensor_numel(*x); i++) {
        double v = 0;
        for (int k = 0; k < 4; k++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            v += (double)(s >> 11) / 9007199254740992.0;
        }
        v = (v - 2.0) * 1.7;
        if (dt == NX_DTYPE_F64)
            ((double *)nx_tensor_data(*x))[i] = v;
        else
            ((float *)nx_tensor_data(*x))[i] = (float)v;
    }
    return NX_OK;
}

/* The design, written where nx_op_call's sos option can read it. */
static nx_status make_sos(nx_ctx *ctx, char *path, size_t cap)
{
    const char *k[] = {"order", "btype", "lo", "hi", "fs"};
    const char *v[] = {"4", "bandpass", "0.05", "0.2", "1"};
    nx_tensor *sos = NULL;
    nx_status st = nx_op_call(ctx, "butterworth_sos", 0, NULL, 5, k, v, 1, &sos);
    if (st != NX_OK)
        return st;
    snprintf(path, cap, "/tmp/nitrix-bench-sos-%ld.npy", (long)getpid());
    st = nx_npy_write(ctx, path, sos);
    nx_tensor_free(sos);
    return st;
}

static nx_status call(nx_ctx *ctx, const char *sos, const nx_tensor *x)
{
    nx_tensor *y = NULL;
    nx_status st = nx_op_call(ctx, "sosfiltfilt", 1, (const nx_tensor *const[]){x}, 1,
                              (const char *[]){"sos"}, (const char *[]){sos}, 1, &y);
    nx_tensor_free(y);
    return st;
}

nx_status nx_bench_signal(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f)
{
    const char *name = "sosfiltfilt_bp4_1024x4096";
    if (!nx_bench_wanted(filter, name))
        return NX_OK;
    bool gpu = nx_ctx_backend(ctx) == NX_BACKEND_CUDA;
    nx_dtype dt = gpu ? NX_DTYPE_F32 : NX_DTYPE_F64;
    char sos[96];
    nx_tensor *x = NULL;
    nx_status st = make_sos(ctx, sos, sizeof sos);
    if (st == NX_OK)
        st = make_input(ctx, dt, &x);
    if (st == NX_OK && gpu) {
        nx_tensor *d = NULL;
        st = nx_tensor_to_device(x, NX_DEVICE_CUDA, &d);
        nx_tensor_free(x);
        x = d;
    }
    if (st == NX_OK)
        st = call(ctx, sos, x); /* warm-up: compiles and caches */
    double *t = calloc((size_t)runs * 2, sizeof(double)), *cpu = t ? t + runs : NULL;
    for (int i = 0; st == NX_OK && t && i < runs; i++) {
        double c0 = process_cpu_s(), t0 = nx_bench_now();
        st = call(ctx, sos, x);
        t[i] = nx_bench_now() - t0;
        cpu[i] = process_cpu_s() - c0;
    }
    if (st == NX_OK && t) {
        nx_bench_row row;
        nx_bench_set_row(&row, name, "[1024,4096]");
        snprintf(row.dtype, sizeof row.dtype, "%s", gpu ? "f32" : "f64");
        if (gpu)
            snprintf(row.backend, sizeof row.backend, "cuda");
        row.runs = runs;
        row.min_s = row.max_s = t[0];
        for (int i = 1; i < runs; i++) {
            row.min_s = t[i] < row.min_s ? t[i] : row.min_s;
            row.max_s = t[i] > row.max_s ? t[i] : row.max_s;
        }
        row.median_s = nx_bench_median(t, runs);
        size_t bytes = (size_t)CHANNELS * SAMPLES * nx_dtype_size(dt);
        double bw = gpu ? 0 : nx_bench_memcpy_rate(bytes);
        row.floor_s = bw > 0 ? 2.0 * (double)bytes / (2.0 * bw) : 0;
        snprintf(row.peer, sizeof row.peer, "%s",
                 gpu ? "cupyx sosfiltfilt 9.44 ms (issue, H200)" : "scipy sosfiltfilt (peers)");
        snprintf(row.note, sizeof row.note,
                 "driver auto; cpu time %.4f s; floor x read + y written at memcpy %.1f GB/s; "
                 "peer: bench/peers-signal.py",
                 nx_bench_median(cpu, runs), bw / 1e9);
        nx_bench_print_row(&row, json, f);
    }
    free(t);
    nx_tensor_free(x);
    unlink(sos);
    return st;
}
