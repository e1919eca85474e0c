/* A benchmark, not a test (built, not registered): sin and cos through the public graph API on
 * the CPU backend (the real kernel pipeline: fused, JIT-compiled, vectorised), over 16M elements
 * (from memory) and over 64K elements run 100 times per sample (in the L2 cache: the compute).
 * Workloads: small arguments (|x| <= 10, the common case: the Cody-Waite path alone), huge ones
 * (log-uniform 1e7 .. 1e38 or 1e300, every lane on the Payne-Hanek path) and mixed (small, with
 * one huge value per 4096 elements).
 * Run: build/tests/jit/bench-trig [--quick] [threads]. One thread unless asked; medians of
 * repeated runs after a warm-up, with min and max, wall and CPU time. A fresh cache directory
 * under /tmp, so that the kernels are compiled by this build. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nitrix-graph.h"
#include "nitrix.h"

enum { BIG_N = 1 << 24, CACHE_N = 1 << 16, CACHE_INNER = 100, MAX_REPS = 31 };

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die(nx_ctx *ctx, const char *what)
{
    fprintf(stderr, "bench-trig: %s: %s\n", what, nx_ctx_last_error(ctx));
    exit(1);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double unif01(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1p-53;
}

typedef enum { SMALL, HUGE_ARGS, MIXED } workload;

static double sample(workload w, int64_t i, double top)
{
    double s = unif01() < 0.5 ? -1 : 1;
    if (w == SMALL || (w == MIXED && i % 4096 != 7))
        return s * 10 * unif01();
    return s * pow(10.0, 7 + (top - 7) * unif01());
}

static void bench_one(nx_ctx *ctx, bool cosine, nx_dtype dt, workload w, int64_t n, int reps)
{
    int inner = n == CACHE_N ? CACHE_INNER : 1;
    bool f64 = dt == NX_DTYPE_F64;
    nx_graph *g = NULL;
    if (nx_graph_new(ctx, &g) != NX_OK)
        die(ctx, "graph");
    int64_t shape[1] = {n};
    nx_node x = nx_input(g, "x", dt, 1, shape);
    nx_node y = cosine ? nx_cos(g, x) : nx_sin(g, x);
    nx_compile_opts opts = {.backend = NX_BACKEND_CPU, .n_outputs = 1, .outputs = &y};
    nx_program *p = NULL;
    double t0 = clock_s(CLOCK_MONOTONIC);
    if (nx_graph_compile(g, &opts, &p) != NX_OK)
        die(ctx, "compile");
    double tc = clock_s(CLOCK_MONOTONIC) - t0;
    nx_graph_free(g);
    nx_tensor *xt = NULL;
    if (nx_tensor_new(ctx, dt, 1, shape, &xt) != NX_OK)
        die(ctx, "tensor");
    double top = f64 ? 300 : 38;
    for (int64_t i = 0; i < n; i++) {
        double v = sample(w, i, top);
        if (f64)
            ((double *)nx_tensor_data(xt))[i] = v;
        else
            ((float *)nx_tensor_data(xt))[i] = (float)v;
    }
    double wall[MAX_REPS], cpu[MAX_REPS];
    int64_t bad = 0;
    for (int r = -1; r < reps; r++) {
        double w0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        for (int k = 0; k < inner; k++) {
            nx_tensor *out = NULL;
            if (nx_program_run(p, (const nx_tensor *const[]){xt}, &out) != NX_OK)
                die(ctx, "run");
            if (r < 0 && k == 0)
                for (int64_t i = 0; i < n; i++) {
                    double v = f64 ? ((double *)nx_tensor_data(out))[i]
                                   : ((float *)nx_tensor_data(out))[i];
                    bad += !(fabs(v) <= 1);
                }
            nx_tensor_free(out);
        }
        double w1 = clock_s(CLOCK_MONOTONIC), c1 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        if (r >= 0) {
            wall[r] = (w1 - w0) / inner;
            cpu[r] = (c1 - c0) / inner;
        }
    }
    qsort(wall, (size_t)reps, sizeof *wall, cmp_double);
    qsort(cpu, (size_t)reps, sizeof *cpu, cmp_double);
    static const char *const wn[] = {"small", "huge", "mixed"};
    printf("  %-4s %-4s %-6s %9lld %8.3f %8.3f %8.3f %8.3f %8.2f %8.2f %8.1f %8lld\n",
           cosine ? "cos" : "sin", f64 ? "f64" : "f32", wn[w], (long long)n, 1e3 * wall[reps / 2],
           1e3 * wall[0], 1e3 * wall[reps - 1], 1e3 * cpu[reps / 2], 1e9 * wall[reps / 2] / n,
           1e9 * cpu[reps / 2] / n, 1e3 * tc, (long long)bad);
    nx_tensor_free(xt);
    nx_program_free(p);
}

int main(int argc, char **argv)
{
    bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    int reps = quick ? 5 : 11;
    char dir[] = "/tmp/nx-bench-trig-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    nx_ctx_opts o = {.ignore_env = true, .num_threads = threads, .cache_dir = dir};
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(&o, &ctx) != NX_OK)
        die(NULL, "ctx");
    printf("sin/cos on the cpu backend, %d thread(s), median of %d samples (ms per run; min, max); "
           "n = %d: one run per sample, n = %d: %d runs per sample; cpu = process CPU time; "
           "compile = first nx_graph_compile; bad = results outside [-1, 1] or NaN\n",
           threads, reps, BIG_N, CACHE_N, CACHE_INNER);
    printf("  %-4s %-4s %-6s %9s %8s %8s %8s %8s %8s %8s %8s %8s\n", "fn", "type", "args", "n",
           "wall", "min", "max", "cpu", "ns/elem", "cpu ns", "compile", "bad");
    for (int big = 1; big >= 0; big--) {
        int64_t n = big ? BIG_N : CACHE_N;
        bench_one(ctx, false, NX_DTYPE_F32, SMALL, n, reps);
        bench_one(ctx, true, NX_DTYPE_F32, SMALL, n, reps);
        bench_one(ctx, false, NX_DTYPE_F64, SMALL, n, reps);
        bench_one(ctx, true, NX_DTYPE_F64, SMALL, n, reps);
        bench_one(ctx, false, NX_DTYPE_F32, MIXED, n, reps);
        if (big) {
            bench_one(ctx, false, NX_DTYPE_F32, HUGE_ARGS, n, reps);
            bench_one(ctx, false, NX_DTYPE_F64, HUGE_ARGS, n, reps);
        }
    }
    nx_ctx_free(ctx);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : 1;
}
