/* `nitrix bench` rows of the semiring family (bench.h): the CPU workloads through the
 * tensor entry points, on the inputs bench/peers-semiring.py gives its NumPy/scipy peers (same
 * shapes, same value ranges). Each row times the entry point after one warm-up call (which
 * compiles and caches the program), so the figure is the steady-state cost of a call. Peers are
 * run by hand in the same session:
 *     /usr/bin/python3 bench/peers-semiring.py
 * The backend is the context's. Under NITRIX_BACKEND=cuda the rows are the H200 ones (the six
 * algebras at 4096^3, the 3-D conv 32^3 x 8 -> 16, the Gaussian sum at NX_BENCH_GAUSS_N): each
 * uploads its inputs once with nx_tensor_to_device, warms up, and times the entry point on device
 * tensors, whose outputs stay on the device; the plan run synchronises before it returns, so the
 * figure is the device work plus the launch, without host<->device copies. Their GPU peers are
 * `peers-semiring.py --gpu`. CPU floors are compute floors of this machine:
 * the arithmetic each workload cannot avoid at the clock /proc/cpuinfo reports, on every thread
 * of the context, 8 f32 lanes per pipe (Zen's 512-bit ops are double-pumped on 256-bit pipes) and
 * 2 FP pipes; the note of each row says what it counts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "nitrix-ops.h"

typedef struct sr_row {
    const char *name, *shape, *peer, *floor_note;
    nx_status (*setup)(nx_ctx *ctx, nx_tensor **in);
    nx_status (*call)(nx_ctx *ctx, nx_tensor *const *in, nx_tensor **out);
    double floor_ops; /* FP pipe operations the workload needs */
} sr_row;

/* Uniform values in [lo, hi) from an LCG: the bench needs no RNG library, and the peer draws
 * from the same distribution. */
static nx_status uniform(nx_ctx *ctx, int nd, const int64_t *shape, double lo, double hi,
                         uint64_t seed, nx_tensor **out)
{
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F32, nd, shape, out);
    if (st != NX_OK)
        return st;
    float *d = nx_tensor_data(*out);
    uint64_t s = seed;
    for (int64_t i = 0; i < nx_tensor_numel(*out); i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        d[i] = (float)(lo + (hi - lo) * ((double)(s >> 11) / 9007199254740992.0));
    }
    return NX_OK;
}

static nx_status setup_matmul(nx_ctx *ctx, nx_tensor **in)
{
    int64_t s[2] = {1024, 1024};
    nx_status st = uniform(ctx, 2, s, -1, 1, 1, &in[0]);
    return st == NX_OK ? uniform(ctx, 2, s, -1, 1, 2, &in[1]) : st;
}

static nx_status call_maxplus(nx_ctx *ctx, nx_tensor *const *in, nx_tensor **out)
{
    const nx_semiring *sr = nx_semiring_builtin(NX_SEMIRING_TROPICAL_MAX_PLUS);
    return nx_semiring_matmul(ctx, sr, in[0], in[1], NULL, out);
}

static nx_status call_log(nx_ctx *ctx, nx_tensor *const *in, nx_tensor **out)
{
    const nx_semiring *sr = nx_semiring_builtin(NX_SEMIRING_LOG);
    return nx_semiring_matmul(ctx, sr, in[0], in[1], NULL, out);
}

static nx_status setup_conv(nx_ctx *ctx, nx_tensor **in)
{
    int64_t xs[4] = {128, 128, 128, 8}, ks[5] = {3, 3, 3, 8, 8};
    nx_status st = uniform(ctx, 4, xs, 0, 1, 3, &in[0]);
    return st == NX_OK ? uniform(ctx, 5, ks, -1, 1, 4, &in[1]) : st;
}

static nx_status call_conv(nx_ctx *ctx, nx_tensor *const *in, nx_tensor **out)
{
    const nx_semiring *sr = nx_semiring_builtin(NX_SEMIRING_REAL);
    nx_semiring_conv_opts o = {.padding = NX_CONV_SAME};
    return nx_semiring_conv(ctx, sr, in[0], in[1], &o, out);
}

/* M = N of the Gaussian sum: 1e5 (the CPU row), or NX_BENCH_GAUSS_N (1e6 for the H200 row). */
static int64_t gauss_n(void)
{
    const char *v = getenv("NX_BENCH_GAUSS_N");
    long long n = v ? atoll(v) : 0;
    return n > 0 && n <= 100000000 ? (int64_t)n : 100000;
}

static nx_status setup_gauss(nx_ctx *ctx, nx_tensor **in)
{
    int64_t n = gauss_n(), xs[2] = {n, 3}, bs = n;
    nx_status st = uniform(ctx, 2, xs, 0, 1, 5, &in[0]);
    if (st == NX_OK)
        st = uniform(ctx, 2, xs, 0, 1, 6, &in[1]);
    return st == NX_OK ? uniform(ctx, 1, &bs, 0, 1, 7, &in[2]) : st;
}

static nx_status call_gauss(nx_ctx *ctx, nx_tensor *const *in, nx_tensor **out)
{
    nx_pairwise_opts o = {.formula = "exp(-sqdist(x, y)) * b", .reduction = NX_PAIRWISE_SUM};
    return nx_pairwise_reduce(ctx, in[0], in[1], in[2], NULL, &o, out, NULL);
}

/* The gradient of sum_i w_i sum_j exp(-|x_i - y_j|^2) b_j with respect to x, y and b: two
 * streamed passes. N = M = 2e4 keeps the row short; the peer is NumPy chunked too. */
#define GRAD_N 20000

static nx_status setup_gauss_grad(nx_ctx *ctx, nx_tensor **in)
{
    int64_t xs[2] = {GRAD_N, 3}, bs = GRAD_N, ws[2] = {GRAD_N, 1};
    nx_status st = uniform(ctx, 2, xs, 0, 1, 5, &in[0]);
    if (st == NX_OK)
        st = uniform(ctx, 2, xs, 0, 1, 6, &in[1]);
    if (st == NX_OK)
        st = uniform(ctx, 1, &bs, 0, 1, 7, &in[2]);
    return st == NX_OK ? uniform(ctx, 2, ws, -1, 1, 8, &in[3]) : st;
}

static nx_status call_gauss_grad(nx_ctx *ctx, nx_tensor *const *in, nx_tensor **out)
{
    nx_pairwise_opts o = {.formula = "exp(-sqdist(x, y)) * b", .reduction = NX_PAIRWISE_SUM};
    nx_tensor *g[4] = {NULL};
    nx_status st = nx_pairwise_reduce_vjp(ctx, in[0], in[1], in[2], NULL, &o, in[3], g);
    *out = g[0];
    nx_tensor_free(g[1]);
    nx_tensor_free(g[2]);
    return st;
}

/* ---- the H200 rows (NITRIX_BACKEND=cuda) ---------------------------------------------------*/

#define GPU_N 4096

static nx_status setup_gpu_matmul(nx_ctx *ctx, nx_tensor **in)
{
    int64_t s[2] = {GPU_N, GPU_N};
    nx_status st = uniform(ctx, 2, s, -1, 1, 11, &in[0]);
    return st == NX_OK ? uniform(ctx, 2, s, -1, 1, 12, &in[1]) : st;
}

static nx_status call_algebra(nx_ctx *ctx, nx_semiring_kind kind, nx_tensor *const *in,
                              nx_tensor **out)
{
    return nx_semiring_matmul(ctx, nx_semiring_builtin(kind), in[0], in[1], NULL, out);
}

static nx_status call_real(nx_ctx *ctx, nx_tensor *const *in, nx_tensor **out)
{
    return call_algebra(ctx, NX_SEMIRING_REAL, in, out);
}

static nx_status call_log4k(nx_ctx *ctx, nx_tensor *const *in, nx_tensor **out)
{
    return call_algebra(ctx, NX_SEMIRING_LOG, in, out);
}

static nx_status call_maxplus4k(nx_ctx *ctx, nx_tensor *const *in, nx_tensor **out)
{
    return call_algebra(ctx, NX_SEMIRING_TROPICAL_MAX_PLUS, in, out);
}

static nx_status call_minplus(nx_ctx *ctx, nx_tensor *const *in, nx_tensor **out)
{
    return call_algebra(ctx, NX_SEMIRING_TROPICAL_MIN_PLUS, in, out);
}

static nx_status call_boolean(nx_ctx *ctx, nx_tensor *const *in, nx_tensor **out)
{
    return call_algebra(ctx, NX_SEMIRING_BOOLEAN, in, out);
}

static nx_status call_euclidean(nx_ctx *ctx, nx_tensor *const *in, nx_tensor **out)
{
    return call_algebra(ctx, NX_SEMIRING_EUCLIDEAN, in, out);
}

static nx_status setup_conv32(nx_ctx *ctx, nx_tensor **in)
{
    int64_t xs[4] = {32, 32, 32, 8}, ks[5] = {3, 3, 3, 8, 16};
    nx_status st = uniform(ctx, 4, xs, 0, 1, 13, &in[0]);
    return st == NX_OK ? uniform(ctx, 5, ks, -1, 1, 14, &in[1]) : st;
}

/* Each input once to the device; the host copies go. */
static nx_status to_device(nx_tensor **in)
{
    for (int i = 0; i < 4 && in[i]; i++) {
        nx_tensor *d = NULL;
        nx_status st = nx_tensor_to_device(in[i], NX_DEVICE_CUDA, &d);
        if (st != NX_OK)
            return st;
        nx_tensor_free(in[i]);
        in[i] = d;
    }
    return NX_OK;
}

static double clock_hz(void)
{
    double mhz = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "cpu MHz : %lf", &mhz) == 1)
            break;
    if (f)
        fclose(f);
    return (mhz > 0 ? mhz : 2500) * 1e6;
}

static nx_status time_row(nx_ctx *ctx, const sr_row *r, int runs, bool device,
                          nx_bench_row *row)
{
    nx_tensor *in[4] = {NULL}, *y = NULL;
    nx_status st = r->setup(ctx, in);
    if (st == NX_OK && device)
        st = to_device(in);
    if (st == NX_OK)
        st = r->call(ctx, in, &y); /* warm-up: compiles and caches */
    nx_tensor_free(y);
    double *t = calloc((size_t)runs, sizeof(double));
    for (int i = 0; st == NX_OK && t && i < runs; i++) {
        double t0 = nx_bench_now();
        y = NULL;
        st = r->call(ctx, in, &y);
        t[i] = nx_bench_now() - t0;
        nx_tensor_free(y);
    }
    if (st == NX_OK && t) {
        row->runs = runs;
        row->min_s = row->max_s = t[0];
        for (int i = 1; i < runs; i++) {
            row->min_s = t[i] < row->min_s ? t[i] : row->min_s;
            row->max_s = t[i] > row->max_s ? t[i] : row->max_s;
        }
        row->median_s = nx_bench_median(t, runs);
    }
    free(t);
    for (int i = 0; i < 4; i++)
        nx_tensor_free(in[i]);
    return st;
}

/* H200 floors: 132 SMs x 1.98 GHz (docs/perf/cuda.md); the row's floor_ops are already seconds
 * there (see gpu_rows). */
static nx_status run_gpu_row(nx_ctx *ctx, const sr_row *r, int runs, bool json, FILE *f)
{
    nx_bench_row row;
    nx_bench_set_row(&row, r->name, r->shape);
    snprintf(row.backend, sizeof row.backend, "cuda");
    nx_status st = time_row(ctx, r, runs, true, &row);
    if (st != NX_OK)
        return st;
    row.floor_s = r->floor_ops;
    snprintf(row.peer, sizeof row.peer, "%s", r->peer);
    snprintf(row.note, sizeof row.note,
             "device tensors in and out, sync included, no copies; floor (H200, 132 SMs, "
             "1.98 GHz): %s",
             r->floor_note);
    nx_bench_print_row(&row, json, f);
    return NX_OK;
}

static nx_status run_row(nx_ctx *ctx, const sr_row *r, int runs, bool json, FILE *f)
{
    nx_bench_row row;
    nx_bench_set_row(&row, r->name, r->shape);
    snprintf(row.backend, sizeof row.backend, "%s", nx_backend_name(nx_ctx_backend(ctx)));
    nx_status st = time_row(ctx, r, runs, false, &row);
    if (st != NX_OK)
        return st;
    int threads = nx_ctx_num_threads(ctx);
    double ops_per_s = threads * 8.0 * 2.0 * clock_hz();
    row.floor_s = r->floor_ops / ops_per_s;
    snprintf(row.peer, sizeof row.peer, "%s", r->peer);
    snprintf(row.note, sizeof row.note,
             "peer: bench/peers-semiring.py in the session; floor: %s at %d threads x 8 lanes x 2 "
             "pipes x %.2f GHz",
             r->floor_note, threads, clock_hz() / 1e9);
    nx_bench_print_row(&row, json, f);
    return NX_OK;
}

/* The H200 rows. floor_ops holds the floor in seconds: 4096^3 = 6.87e10 terms; the FP32 pipe
 * does 132 x 128 lanes x 1.98 GHz = 3.345e13 lane-instructions/s (an FMA counts once), the
 * special-function unit 132 x 16 x 1.98 GHz = 4.18e12 ex2/s. */
static nx_status gpu_rows(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f)
{
    const double terms = (double)GPU_N * GPU_N * GPU_N, lanes = 3.345e13, sfu = 4.18e12;
    const double pairs = (double)gauss_n() * (double)gauss_n();
    const double conv_fma = 32.0 * 32 * 32 * 16 * 27 * 8;
    char gauss_shape[40];
    snprintf(gauss_shape, sizeof gauss_shape, "M=N=%lld D=3", (long long)gauss_n());
    const sr_row rows[] = {
        {"semiring_matmul_real_4096", "[4096,4096]x[4096,4096]",
         "torch matmul (cuBLAS fp32, TF32 off)", "1 FMA per term", setup_gpu_matmul, call_real,
         terms / lanes},
        {"semiring_matmul_maxplus_4096", "[4096,4096]x[4096,4096]", "target 6 ms (CUDA issue)",
         "add + max.NaN per term", setup_gpu_matmul, call_maxplus4k, 2 * terms / lanes},
        {"semiring_matmul_minplus_4096", "[4096,4096]x[4096,4096]", "target 6 ms (as max-plus)",
         "add + min.NaN per term", setup_gpu_matmul, call_minplus, 2 * terms / lanes},
        {"semiring_matmul_boolean_4096", "[4096,4096]x[4096,4096]", "target 6 ms (as max-plus)",
         "multiply + max of the 0/1-staged operands per term", setup_gpu_matmul, call_boolean,
         2 * terms / lanes},
        {"semiring_matmul_euclidean_4096", "[4096,4096]x[4096,4096]",
         "target 3.5 ms (as sum-product)", "sub + FMA per term", setup_gpu_matmul, call_euclidean,
         2 * terms / lanes},
        {"semiring_matmul_log_4096", "[4096,4096]x[4096,4096]", "target 25 ms (CUDA issue)",
         "one ex2 per term on the SFU", setup_gpu_matmul, call_log4k, terms / sfu},
        {"semiring_conv3d_32", "[32^3,8]*[3^3,8,16]", "torch conv3d channels-last (cuDNN fp32)",
         "1 FMA per tap (3.8 GFMA)", setup_conv32, call_conv, conv_fma / lanes},
        {"pairwise_reduce_gauss_sum", gauss_shape, "torch chunked (exp(-d2) @ b)",
         "one ex2 per pair on the SFU", setup_gauss, call_gauss, pairs / sfu},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (!nx_bench_wanted(filter, rows[i].name))
            continue;
        nx_status st = run_gpu_row(ctx, &rows[i], runs, json, f);
        if (st != NX_OK)
            return st;
    }
    return NX_OK;
}

nx_status nx_bench_semiring(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f)
{
    if (nx_ctx_backend(ctx) == NX_BACKEND_CUDA)
        return gpu_rows(ctx, filter, runs, json, f);
    const double k3 = 1024.0 * 1024 * 1024, vox = 128.0 * 128 * 128;
    char gauss_shape[40];
    snprintf(gauss_shape, sizeof gauss_shape, "M=N=%lld D=3", (long long)gauss_n());
    const double pairs = (double)gauss_n() * (double)gauss_n(), gpairs = (double)GRAD_N * GRAD_N;
    const sr_row rows[] = {
        {"semiring_matmul_maxplus", "[1024,1024]x[1024,1024]", "numpy blocked broadcast max",
         "2 ops (add, max) per pair", setup_matmul, call_maxplus, 2 * k3},
        {"semiring_matmul_log", "[1024,1024]x[1024,1024]", "numpy blocked broadcast logsumexp",
         "14 ops per pair (add, max, sub, exp ~10, add)", setup_matmul, call_log, 14 * k3},
        {"semiring_conv_3x3x3", "[128^3,8]*[3^3,8,8]", "scipy correlate summed over channels",
         "1 FMA per tap", setup_conv, call_conv, 27.0 * 64 * vox},
        {"pairwise_reduce_gauss_sum", gauss_shape, "numpy chunked (1000-row chunks)",
         "17 ops per pair (3 sub, 3 fma, exp ~10, fma)", setup_gauss, call_gauss, 17 * pairs},
        {"pairwise_reduce_gauss_grad", "M=N=2e4 D=3", "numpy chunked (1000-row chunks)",
         "2 passes x 27 ops per pair", setup_gauss_grad, call_gauss_grad, 54 * gpairs},
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
