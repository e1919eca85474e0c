/* CUDA backend benchmarks (issue rows): max-plus, sum-product and log-sum-exp contractions at
 * 4096^3 f32, elementwise and sum reduction against the device-to-device copy bandwidth measured
 * in the same run, first-call compile and load, cache hits and launch overhead. Prints one line
 * per row; exits 77 (skip) without a usable GPU. Not a test: run by tools/gpu-check.
 *
 *     bench-cuda [n=4096]
 *
 * Every timed region ends with a stream synchronisation; each row is the median of several runs
 * after one warm-up. Contraction results are spot-checked against a float64 host computation of a
 * few entries (a wrong fast kernel is not a result). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen/ptx/emit.h"
#include "passes/fuse.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        nx_status st_ = (x);                                                                       \
        if (st_ != NX_OK) {                                                                        \
            fprintf(stderr, "bench-cuda: %s: %s\n", #x, nx_ctx_last_error(ctx));                  \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static nx_tensor *random_device(nx_ctx *ctx, int ndim, const int64_t *shape, nx_tensor **host)
{
    nx_tensor *h = NULL, *d = NULL;
    CHECK(nx_tensor_new(ctx, NX_DTYPE_F32, ndim, shape, &h));
    float *p = nx_tensor_data(h);
    uint64_t s = 0x9e3779b97f4a7c15ull + (uint64_t)shape[0];
    for (int64_t i = 0; i < nx_tensor_numel(h); i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        p[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2 - 1);
    }
    CHECK(nx_tensor_to_device(h, NX_DEVICE_CUDA, &d));
    if (host)
        *host = h;
    else
        nx_tensor_free(h);
    return d;
}

typedef struct prog {
    nx_graph *g;
    nx_node out;
    nx_kplan *plan;
    nx_ptx_plan *cp;
    double compile_s;
} prog;

static void build(nx_ctx *ctx, prog *p)
{
    double t0 = now();
    CHECK(nx_pass_pipeline(ctx, &p->g->s, 1, &p->out, &p->plan));
    CHECK(nx_ptx_plan_compile(ctx, p->plan, &p->cp));
    p->compile_s = now() - t0;
}

/* Median seconds of one run (outputs freed), after a warm-up. */
static double time_runs(nx_ctx *ctx, prog *p, nx_tensor **in, int reps, nx_tensor **keep)
{
    double t[32];
    for (int r = -1; r < reps; r++) {
        nx_tensor *out = NULL;
        double t0 = now();
        CHECK(nx_ptx_plan_run(ctx, p->plan, p->cp, (const nx_tensor *const *)in, &out));
        double dt = now() - t0;
        if (r >= 0)
            t[r] = dt;
        if (keep && r == reps - 1)
            *keep = out;
        else
            nx_tensor_free(out);
    }
    return median(t, reps);
}

static void free_prog(nx_ctx *ctx, prog *p)
{
    nx_ptx_plan_free(ctx, p->cp);
    nx_kplan_free(p->plan);
    nx_graph_free(p->g);
}

/* C[i,j] = fold_k f(A[i,k], B[k,j]); f = add (max-plus, LSE) or mul (sum-product). */
static void contraction(nx_ctx *ctx, const char *name, nx_monoid m, bool mul, int64_t n,
                        double peer_ms)
{
    prog p = {0};
    CHECK(nx_graph_new(ctx, &p.g));
    int64_t sa[2] = {n, n}, ra[3] = {n, n, 1}, rb[3] = {1, n, n};
    nx_node a = nx_input(p.g, "a", NX_DTYPE_F32, 2, sa), b = nx_input(p.g, "b", NX_DTYPE_F32, 2, sa);
    nx_node a3 = nx_reshape(p.g, a, 3, ra), b3 = nx_reshape(p.g, b, 3, rb);
    nx_node e = mul ? nx_mul(p.g, a3, b3) : nx_add(p.g, a3, b3);
    int axis = 1;
    p.out = nx_reduce(p.g, e, 1, &axis, m, false);
    build(ctx, &p);
    nx_tensor *ha = NULL, *hb = NULL, *in[2];
    in[0] = random_device(ctx, 2, sa, &ha);
    in[1] = random_device(ctx, 2, sa, &hb);
    nx_tensor *out = NULL;
    double s = time_runs(ctx, &p, in, 5, &out);
    nx_tensor *ho = NULL;
    CHECK(nx_tensor_to_device(out, NX_DEVICE_HOST, &ho));
    const float *A = nx_tensor_data(ha), *B = nx_tensor_data(hb), *C = nx_tensor_data(ho);
    double worst = 0;
    for (int t = 0; t < 8; t++) {
        int64_t i = (t * 977) % n, j = (t * 1511 + 3) % n;
        double acc = m == NX_MONOID_SUM ? 0 : -INFINITY, mx = -INFINITY;
        for (int64_t k = 0; k < n; k++) {
            double x = mul ? (double)A[i * n + k] * B[k * n + j] : (double)A[i * n + k] + B[k * n + j];
            mx = x > mx ? x : mx;
            acc = m == NX_MONOID_SUM ? acc + x : m == NX_MONOID_MAX ? (x > acc ? x : acc) : acc;
        }
        if (m == NX_MONOID_LOGSUMEXP) {
            double s2 = 0;
            for (int64_t k = 0; k < n; k++)
                s2 += exp((double)A[i * n + k] + B[k * n + j] - mx);
            acc = mx + log(s2);
        }
        double err = fabs(C[i * n + j] - acc);
        worst = err > worst ? err : worst;
    }
    printf("%-28s n=%lld  %9.3f ms  %8.1f GFLOP/s-equiv  first compile+load %.0f ms  "
           "max|err| vs f64 %.2e%s",
           name, (long long)n, s * 1e3, 2.0 * n * n * n / s * 1e-9, p.compile_s * 1e3, worst,
           peer_ms > 0 ? "" : "\n");
    if (peer_ms > 0)
        printf("  (peer %.3f ms)\n", peer_ms);
    nx_tensor_free(ho);
    nx_tensor_free(out);
    nx_tensor_free(ha);
    nx_tensor_free(hb);
    nx_tensor_free(in[0]);
    nx_tensor_free(in[1]);
    free_prog(ctx, &p);
}

static double copy_bandwidth(nx_ctx *ctx, int64_t n)
{
    nx_tensor *a = random_device(ctx, 1, &n, NULL), *b = NULL;
    CHECK(nx_rt_cuda_tensor_new(ctx, NX_DTYPE_F32, 1, &n, &b));
    double t[10];
    for (int r = -1; r < 10; r++) {
        double t0 = now();
        CHECK(nx_rt_cuda_copy(ctx, (nx_cu_ptr)(uintptr_t)b->storage->data,
                              (nx_cu_ptr)(uintptr_t)a->storage->data, (size_t)n * 4));
        CHECK(nx_rt_cuda_sync(ctx));
        if (r >= 0)
            t[r] = now() - t0;
    }
    double s = median(t, 10);
    double bw = 2.0 * (double)n * 4 / s;
    printf("%-28s %lld B  %9.3f ms  %7.1f GB/s (read + write)\n", "device-to-device copy",
           (long long)n * 4, s * 1e3, bw * 1e-9);
    nx_tensor_free(a);
    nx_tensor_free(b);
    return bw;
}

static void elementwise_and_sum(nx_ctx *ctx, int64_t n, double copy_bw)
{
    prog e = {0}, r = {0};
    CHECK(nx_graph_new(ctx, &e.g));
    nx_node x = nx_input(e.g, "x", NX_DTYPE_F32, 1, &n);
    e.out = nx_add(e.g, nx_mul(e.g, x, nx_scalar(e.g, NX_DTYPE_F32, 2.0)),
                   nx_scalar(e.g, NX_DTYPE_F32, 1.0));
    build(ctx, &e);
    nx_tensor *in = random_device(ctx, 1, &n, NULL);
    double s = time_runs(ctx, &e, &in, 10, NULL);
    double bw = 2.0 * (double)n * 4 / s;
    printf("%-28s n=%lld  %9.3f ms  %7.1f GB/s = %.0f%% of copy  first compile+load %.0f ms\n",
           "elementwise y = 2x + 1", (long long)n, s * 1e3, bw * 1e-9, 100 * bw / copy_bw,
           e.compile_s * 1e3);
    CHECK(nx_graph_new(ctx, &r.g));
    nx_node y = nx_input(r.g, "x", NX_DTYPE_F32, 1, &n);
    int axis = 0;
    r.out = nx_reduce(r.g, y, 1, &axis, NX_MONOID_SUM, false);
    build(ctx, &r);
    s = time_runs(ctx, &r, &in, 10, NULL);
    bw = (double)n * 4 / s;
    printf("%-28s n=%lld  %9.3f ms  %7.1f GB/s = %.0f%% of copy (read only)  launch shape %s\n",
           "sum reduction (reassoc)", (long long)n, s * 1e3, bw * 1e-9, 100 * bw / copy_bw,
           r.plan->nkernels == 1 ? "one kernel" : "several kernels");
    nx_tensor_free(in);
    free_prog(ctx, &e);
    free_prog(ctx, &r);
}

/* Cache hit (memory) and launch overhead of a one-element kernel. */
static void overheads(nx_ctx *ctx)
{
    prog p = {0};
    CHECK(nx_graph_new(ctx, &p.g));
    int64_t one = 1;
    nx_node x = nx_input(p.g, "x", NX_DTYPE_F32, 1, &one);
    p.out = nx_exp(p.g, x);
    build(ctx, &p);
    double t[64];
    for (int r = 0; r < 64; r++) {
        const nx_ptx_kernel *k = NULL;
        double t0 = now();
        CHECK(nx_ptx_kernel_get(ctx, p.plan->kernels[0], true, &k, NULL));
        t[r] = now() - t0;
    }
    printf("%-28s %9.3f us (median of 64)\n", "cache hit (memory)", median(t, 64) * 1e6);
    const nx_ptx_kernel *k = NULL;
    CHECK(nx_ptx_kernel_get(ctx, p.plan->kernels[0], true, &k, NULL));
    nx_tensor *in = random_device(ctx, 1, &one, NULL), *out = NULL;
    CHECK(nx_rt_cuda_tensor_new(ctx, NX_DTYPE_F32, 1, &one, &out));
    nx_cu_ptr a = (nx_cu_ptr)(uintptr_t)in->storage->data,
              b = (nx_cu_ptr)(uintptr_t)out->storage->data;
    long long pts = 1;
    void *params[3] = {&b, &a, &pts};
    /* buffer order: the kernel's buffers (IN x then OUT, as the plan lists them) */
    if (p.plan->kernels[0]->bufs[0].role == NX_KBUF_IN) {
        params[0] = &a;
        params[1] = &b;
    }
    nx_rt_cuda_dims d = {{1, 1, 1}, {NX_PTX_THREADS, 1, 1}, 0};
    const int N = 2000;
    CHECK(nx_rt_cuda_sync(ctx));
    double t0 = now();
    for (int i = 0; i < N; i++)
        CHECK(nx_rt_cuda_launch(ctx, k->fn, &d, params));
    CHECK(nx_rt_cuda_sync(ctx));
    printf("%-28s %9.3f us per launch (%d back-to-back, then one sync)\n", "launch overhead",
           (now() - t0) / N * 1e6, N);
    for (int r = 0; r < 64; r++) {
        nx_tensor *o = NULL;
        double t1 = now();
        CHECK(nx_ptx_plan_run(ctx, p.plan, p.cp, (const nx_tensor *const *)&in, &o));
        t[r] = now() - t1;
        nx_tensor_free(o);
    }
    printf("%-28s %9.3f us (one-kernel program, device in/out, incl. sync)\n", "plan run overhead",
           median(t, 64) * 1e6);
    nx_tensor_free(in);
    nx_tensor_free(out);
    free_prog(ctx, &p);
}

int main(int argc, char **argv)
{
    int64_t n = argc > 1 ? atoll(argv[1]) : 4096;
    double peer = argc > 2 ? atof(argv[2]) : 0;
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(NULL, &ctx) != NX_OK)
        return 1;
    if (nx_rt_cuda_available(ctx) != NX_OK || nx_ptx_available(ctx) != NX_OK) {
        printf("bench-cuda: SKIP: %s\n", nx_ctx_last_error(ctx));
        nx_ctx_free(ctx);
        return 77;
    }
    nx_rt_cuda *cu = NULL;
    CHECK(nx_rt_cuda_get(ctx, &cu));
    const nx_gpu_info *g = nx_rt_cuda_device(cu);
    char tc[128];
    printf("device: %s (cc %d.%d, %d SMs), %s, reproducible=%d\n", g->name, g->cc_major,
           g->cc_minor, g->sm_count, nx_ptx_toolchain_key(tc, sizeof tc),
           nx_ctx_reproducible(ctx));
    double bw = copy_bandwidth(ctx, (int64_t)1 << 28);
    elementwise_and_sum(ctx, (int64_t)1 << 28, bw);
    overheads(ctx);
    contraction(ctx, "max-plus (MAX, +)", NX_MONOID_MAX, false, n, 0);
    contraction(ctx, "sum-product (SUM, *)", NX_MONOID_SUM, true, n, peer);
    contraction(ctx, "log-sum-exp (LSE, +)", NX_MONOID_LOGSUMEXP, false, n, 0);
    nx_ctx_free(ctx);
    return 0;
}
