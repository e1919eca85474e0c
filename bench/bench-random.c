/* `nitrix bench` row of the random family (bench.h): issue 20's `normal` workload, 2^26 float32
 * draws from one key (jax.random.normal's numbers, docs/random.md) through nx_op_call, after one
 * warm-up call that compiles and caches the program. The peer is NumPy's
 * Generator(PCG64).standard_normal(dtype=float32) (ziggurat, one thread), run by hand in the same
 * session:
 *     /work/venv/bin/python bench/peers-random.py
 * The floor is the output written once at this machine's memcpy rate measured in the same run
 * (memcpy moves each byte twice). Under NITRIX_BACKEND=cuda the row is the GPU one: 2^28 draws,
 * the key uploaded once with nx_tensor_to_device, each timed call returning a device tensor (the
 * plan run synchronises before it returns; no host copies); its peer is torch.randn on the device
 * (`peers-random.py --gpu`) and its floor the H200's write bandwidth. The note gives the median
 * process CPU time. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "nitrix-op.h"

static double process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static nx_status call(nx_ctx *ctx, const nx_tensor *key, const char *shape)
{
    const char *keys[] = {"shape"}, *vals[] = {shape};
    nx_tensor *y = NULL;
    nx_status st = nx_op_call(ctx, "normal", 1, (const nx_tensor *const[]){key}, 1, keys, vals,
                              1, &y);
    nx_tensor_free(y);
    return st;
}

nx_status nx_bench_random(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f)
{
    const char *name = "normal_f32";
    if (!nx_bench_wanted(filter, name))
        return NX_OK;
    bool cuda = nx_ctx_backend(ctx) == NX_BACKEND_CUDA;
    int64_t n = cuda ? INT64_C(1) << 28 : INT64_C(1) << 26, two = 2;
    char shape[32];
    snprintf(shape, sizeof shape, "%lld", (long long)n);
    nx_tensor *key = NULL, *dkey = NULL;
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_U32, 1, &two, &key);
    if (st == NX_OK) {
        uint32_t *k = nx_tensor_data(key);
        k[0] = 0;
        k[1] = 20261207;
        if (cuda)
            st = nx_tensor_to_device(key, NX_DEVICE_CUDA, &dkey);
    }
    const nx_tensor *use = dkey ? dkey : key;
    nx_bench_row row;
    nx_bench_set_row(&row, name, cuda ? "[2^28]" : "[2^26]");
    if (st == NX_OK)
        st = call(ctx, use, shape); /* warm-up: compiles and caches */
    double *t = calloc((size_t)runs * 2, sizeof(double)), *cpu = t ? t + runs : NULL;
    for (int i = 0; st == NX_OK && t && i < runs; i++) {
        double c0 = process_cpu_s(), t0 = nx_bench_now();
        st = call(ctx, use, shape);
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
        size_t bytes = (size_t)n * 4;
        if (cuda) {
            snprintf(row.backend, sizeof row.backend, "cuda");
            row.floor_s = (double)bytes / 4.8e12; /* H200 HBM3e, 4.8 TB/s */
            snprintf(row.peer, sizeof row.peer, "torch.randn (peers --gpu)");
            snprintf(row.note, sizeof row.note,
                     "device key in, device output, sync included; floor: 1 GiB written at "
                     "4.8 TB/s; host cpu %.4f s", nx_bench_median(cpu, runs));
        } else {
            double bw = nx_bench_memcpy_rate(bytes);
            row.floor_s = bw > 0 ? (double)bytes / (2.0 * bw) : 0;
            snprintf(row.peer, sizeof row.peer, "numpy PCG64 standard_normal (peers)");
            snprintf(row.note, sizeof row.note,
                     "cpu time %.4f s; floor: the output written once at memcpy %.1f GB/s; "
                     "peer: bench/peers-random.py", nx_bench_median(cpu, runs), bw / 1e9);
        }
        nx_bench_print_row(&row, json, f);
    }
    free(t);
    nx_tensor_free(key);
    nx_tensor_free(dkey);
    return st;
}
