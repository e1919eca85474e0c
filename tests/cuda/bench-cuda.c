/* CUDA backend benchmarks (issue rows): max-plus, sum-product and log-sum-exp contractions at
 * 4096^3 f32, elementwise and sum reduction against the device-to-device copy bandwidth measured
 * in the same run, first-call compile and load, cache hits and launch overhead. Prints one line
 * per row; exits 77 (skip) without a usable GPU. Not a test: run by tools/gpu-check.
 *
 *     bench-cuda [n=4096 [peer_ms]]   checks, then the rows (exit 1 when a check failed)
 *     bench-cuda --check              only the device checks
 *     bench-cuda --check-emit         no GPU needed: every check case's kernels emitted and
 *                                     compiled by NVRTC (compute_80 PTX, sm_90 cubin), with the
 *                                     generator each took, and an allocation-failure sweep of
 *                                     the emitters (exit 77 without NVRTC)
 *
 * The checks run the register-tiled contractions and vectorised elementwise kernels (codegen/ptx/
 * emit-tile.c, emit-vec.c) on awkward shapes, layouts and special values (NaN, +-inf, -0.0)
 * against the reference interpreter (NX_BACKEND_REF): MAX/MIN bit for bit, SUM and LOGSUMEXP
 * within 64 eps of the output's largest magnitude (the CPU JIT's tolerance), elementwise exactly.
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
#include "program/program.h"
#include "runtime/tensor.h"
#include "testutil.h"

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
            fprintf(stderr, "bench-cuda: %s: %s\n", #x, nx_ctx_last_error(ctx));                   \
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

/* The plan's single kernel with its CUDA C edited (from -> to), timed like the plan: what one
 * generator choice costs, measured in the same run (a variant is not kept). */
static void variant(nx_ctx *ctx, prog *p, nx_tensor **in, const char *label, const char *from,
                    const char *to)
{
    const nx_kernel *k = p->plan->kernels[0];
    char *src = NULL;
    size_t len = 0;
    nx_ptx_launch l;
    CHECK(nx_ptx_emit(k, "nx_kernel", true, &src, &len, &l));
    char *at = strstr(src, from);
    if (!at) {
        printf("  variant %-34s (source has no \"%s\")\n", label, from);
        nx_rt_free(ctx, src, len);
        return;
    }
    size_t n = strlen(src) + strlen(to) + 1;
    char *edit = malloc(n);
    snprintf(edit, n, "%.*s%s%s", (int)(at - src), src, to, at + strlen(from));
    nx_rt_free(ctx, src, len);
    static const char *const opts[] = {"-default-device", "--std=c++17"};
    nx_cu_module mod = NULL;
    nx_cu_function fn = NULL;
    nx_status st = nx_ptx_load(ctx, edit, "variant.cu", opts, 2, &mod);
    free(edit);
    if (st != NX_OK) {
        printf("  variant %-34s does not compile: %.200s\n", label, nx_ctx_last_error(ctx));
        return;
    }
    CHECK(nx_rt_cuda_module_function(ctx, mod, "nx_kernel", &fn));
    nx_tensor *out = NULL;
    const nx_kbuf *ob = &k->bufs[0];
    CHECK(nx_rt_cuda_tensor_new(ctx, ob->dtype, ob->ndim, ob->shape, &out));
    nx_cu_ptr vals[NX_KERNEL_MAX_BUFFERS];
    void *params[NX_KERNEL_MAX_BUFFERS + 1];
    for (int b = 0; b < k->nbufs; b++) {
        const nx_kslot *sl = &p->plan->slots[k->bufs[b].slot];
        const nx_tensor *t = k->bufs[b].role == NX_KBUF_OUT ? out : in[sl->arg];
        vals[b] = (nx_cu_ptr)(uintptr_t)t->storage->data;
        params[b] = &vals[b];
    }
    long long pts = (long long)l.points;
    params[k->nbufs] = &pts;
    nx_rt_cuda_dims d = {{(unsigned)((l.points + NX_PTX_THREADS - 1) / NX_PTX_THREADS), 1, 1},
                         {NX_PTX_THREADS, 1, 1},
                         0};
    double t[8];
    for (int r = -1; r < 7; r++) {
        CHECK(nx_rt_cuda_sync(ctx));
        double t0 = now();
        CHECK(nx_rt_cuda_launch(ctx, fn, &d, params));
        CHECK(nx_rt_cuda_sync(ctx));
        if (r >= 0)
            t[r] = now() - t0;
    }
    printf("  variant %-34s %9.3f ms\n", label, median(t, 7) * 1e3);
    nx_tensor_free(out);
    nx_rt_cuda_module_unload(ctx, mod);
}

/* C[i,j] = fold_k f(A[i,k], B[k,j]); f = add (max-plus, LSE) or mul (sum-product). */
static void contraction(nx_ctx *ctx, const char *name, nx_monoid m, bool mul, int64_t n,
                        double peer_ms)
{
    prog p = {0};
    CHECK(nx_graph_new(ctx, &p.g));
    int64_t sa[2] = {n, n}, ra[3] = {n, n, 1}, rb[3] = {1, n, n};
    nx_node a = nx_input(p.g, "a", NX_DTYPE_F32, 2, sa),
            b = nx_input(p.g, "b", NX_DTYPE_F32, 2, sa);
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
            double x =
                mul ? (double)A[i * n + k] * B[k * n + j] : (double)A[i * n + k] + B[k * n + j];
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
    if (getenv("NX_BENCH_VARIANTS")) {
        variant(ctx, &p, in, "as generated", "__launch_bounds__", "__launch_bounds__");
        variant(ctx, &p, in, "1 block/SM (255 registers)", "__launch_bounds__(256, 2)",
                "__launch_bounds__(256, 1)");
        if (m == NX_MONOID_LOGSUMEXP)
            variant(ctx, &p, in, "two k slices per trip", "__syncthreads();\n    for (int kt",
                    "__syncthreads();\n    _Pragma(\"unroll 2\") for (int kt");
        else
            variant(ctx, &p, in, "one k slice per trip", "#pragma unroll 2\n", "");
    }
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

/* ---- checks of the tiled and vectorised kernels ---------------------------------------------*/

typedef enum { F_ADD, F_MUL, F_SUB, F_AFFINE } ffn; /* AFFINE: a * 0.5 + b */

typedef struct ccase {
    const char *name;
    nx_monoid m;
    ffn f;
    int64_t bs, M, K, N;
    bool at, bt; /* A stored K x M, B stored N x K (read transposed) */
    int special; /* 0: uniform [-1, 1]; 1: +inf sprinkled; 2: NaN, +-inf, -0.0 sprinkled */
} ccase;

static const ccase cases[] = {
    {"max-plus aligned", NX_MONOID_MAX, F_ADD, 1, 64, 64, 64, false, false, 0},
    {"max-plus ragged", NX_MONOID_MAX, F_ADD, 1, 130, 67, 129, false, false, 0},
    {"min-plus +inf", NX_MONOID_MIN, F_ADD, 1, 200, 33, 72, false, false, 1},
    {"max-plus NaN inf -0", NX_MONOID_MAX, F_ADD, 1, 96, 40, 100, false, false, 2},
    {"min-plus NaN inf -0", NX_MONOID_MIN, F_ADD, 1, 64, 24, 64, false, false, 2},
    {"max-minus (exact step)", NX_MONOID_MAX, F_SUB, 1, 128, 16, 128, false, false, 2},
    {"max-plus batched", NX_MONOID_MAX, F_ADD, 2, 128, 64, 96, false, false, 0},
    {"max-plus A^T B^T", NX_MONOID_MAX, F_ADD, 1, 100, 36, 90, true, true, 0},
    {"sum-product aligned", NX_MONOID_SUM, F_MUL, 1, 256, 256, 256, false, false, 0},
    {"sum-product ragged", NX_MONOID_SUM, F_MUL, 1, 129, 31, 65, false, false, 0},
    {"sum-product A^T", NX_MONOID_SUM, F_MUL, 1, 100, 50, 120, true, false, 0},
    {"sum-product B^T", NX_MONOID_SUM, F_MUL, 1, 72, 24, 200, false, true, 0},
    {"sum a*0.5+b", NX_MONOID_SUM, F_AFFINE, 1, 64, 40, 68, false, false, 0},
    {"sum-product NaN inf", NX_MONOID_SUM, F_MUL, 1, 64, 16, 64, false, false, 2},
    {"log-sum-exp aligned", NX_MONOID_LOGSUMEXP, F_ADD, 1, 128, 128, 128, false, false, 0},
    {"log-sum-exp ragged", NX_MONOID_LOGSUMEXP, F_ADD, 1, 77, 45, 130, false, false, 0},
    {"log-sum-exp NaN inf -0", NX_MONOID_LOGSUMEXP, F_ADD, 1, 64, 48, 64, false, false, 2},
    {"log-sum-exp batched", NX_MONOID_LOGSUMEXP, F_ADD, 3, 64, 32, 64, false, false, 0},
    {"tiny 3x2x5", NX_MONOID_MAX, F_ADD, 1, 3, 2, 5, false, false, 0},
};

/* A and B inputs and the contraction output of case c. */
static nx_node case_graph(nx_graph *g, const ccase *c)
{
    bool b3 = c->bs > 1;
    int d = b3 ? 1 : 0;
    int64_t sa[3] = {c->bs}, sb[3] = {c->bs};
    sa[d] = c->at ? c->K : c->M, sa[d + 1] = c->at ? c->M : c->K;
    sb[d] = c->bt ? c->N : c->K, sb[d + 1] = c->bt ? c->K : c->N;
    nx_node a = nx_input(g, "a", NX_DTYPE_F32, 2 + d, sa);
    nx_node b = nx_input(g, "b", NX_DTYPE_F32, 2 + d, sb);
    int perm[3] = {0, 2, 1}, perm2[2] = {1, 0};
    if (c->at)
        a = nx_permute(g, a, b3 ? perm : perm2);
    if (c->bt)
        b = nx_permute(g, b, b3 ? perm : perm2);
    int64_t ra[4] = {c->bs}, rb[4] = {c->bs};
    ra[d] = c->M, ra[d + 1] = c->K, ra[d + 2] = 1;
    rb[d] = 1, rb[d + 1] = c->K, rb[d + 2] = c->N;
    a = nx_reshape(g, a, 3 + d, ra);
    b = nx_reshape(g, b, 3 + d, rb);
    nx_node e;
    switch (c->f) {
    case F_ADD:
        e = nx_add(g, a, b);
        break;
    case F_MUL:
        e = nx_mul(g, a, b);
        break;
    case F_SUB:
        e = nx_sub(g, a, b);
        break;
    default:
        e = nx_add(g, nx_mul(g, a, nx_scalar(g, NX_DTYPE_F32, 0.5)), b);
        break;
    }
    int axis = 1 + d;
    return nx_reduce(g, e, 1, &axis, c->m, false);
}

static void fill(float *p, int64_t n, uint64_t seed, int special)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    static const float sp1[] = {INFINITY};
    static const float sp2[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, -0.0f};
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        p[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2 - 1);
        if (special && (s >> 3) % 23 == 0)
            p[i] = special == 1 ? sp1[0] : sp2[(s >> 8) % 6];
    }
}

static bool same_bits(float a, float b)
{
    return (a != a && b != b) || memcmp(&a, &b, sizeof a) == 0;
}

/* Compares out with the reference: bitwise for MAX/MIN, else within 64 eps of max |ref|. */
static int compare(const ccase *c, const float *out, const float *ref, int64_t n, double *worst)
{
    double big = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(ref[i]) && fabs(ref[i]) > big)
            big = fabs(ref[i]);
    double tol = 64 * 1.1920928955078125e-07 * (big > 1 ? big : 1);
    int bad = 0;
    *worst = 0;
    for (int64_t i = 0; i < n; i++) {
        bool ok;
        if (c->m == NX_MONOID_MAX || c->m == NX_MONOID_MIN) {
            ok = same_bits(out[i], ref[i]);
        } else if (isnan(ref[i]) || isinf(ref[i])) {
            ok = same_bits(out[i], ref[i]);
        } else {
            double e = fabs((double)out[i] - ref[i]);
            *worst = e > *worst ? e : *worst;
            ok = e <= tol;
        }
        if (!ok && bad++ < 3)
            printf("    [%lld] got %.9g (0x%08x) want %.9g\n", (long long)i, out[i],
                   *(const uint32_t *)&out[i], ref[i]);
    }
    return bad;
}

/* Which generator the plan's kernels took (the source text names it). */
static const char *generator(nx_ctx *ctx, const nx_kplan *plan)
{
    const char *what = "plain";
    for (int i = 0; i < plan->nkernels; i++) {
        char *src = NULL;
        size_t len = 0;
        nx_ptx_launch l;
        if (nx_ptx_emit(plan->kernels[i], "nx_kernel", true, &src, &len, &l) != NX_OK)
            return "emit failed";
        if (strstr(src, "nx_main_fold"))
            what = "tiled";
        else if (strstr(src, "nx_point(") && strcmp(what, "tiled"))
            what = "vector";
        nx_rt_free(ctx, src, len);
    }
    return what;
}

static nx_status run_ref(nx_ctx *ctx, const ccase *c, nx_tensor **in, nx_tensor **out)
{
    nx_graph *g = NULL;
    nx_status st = nx_graph_new(ctx, &g);
    if (st != NX_OK)
        return st;
    nx_node o = case_graph(g, c);
    nx_compile_opts opts = {NX_BACKEND_REF, 1, &o};
    nx_program *p = NULL;
    st = nx_graph_compile(g, &opts, &p);
    if (st == NX_OK)
        st = nx_program_run(p, (const nx_tensor *const *)in, out);
    nx_program_free(p);
    nx_graph_free(g);
    return st;
}

static int check_case(nx_ctx *ctx, const ccase *c, int idx)
{
    prog p = {0};
    CHECK(nx_graph_new(ctx, &p.g));
    p.out = case_graph(p.g, c);
    build(ctx, &p);
    nx_tensor *in[2] = {NULL, NULL}, *ref = NULL, *got = NULL;
    for (int i = 0; i < 2; i++) {
        const nx_graph *gg = p.g;
        (void)gg;
        int64_t shape[3] = {c->bs};
        int d = c->bs > 1, nd = 2 + d;
        bool tr = i == 0 ? c->at : c->bt;
        int64_t r = i == 0 ? (tr ? c->K : c->M) : (tr ? c->N : c->K);
        int64_t q = i == 0 ? (tr ? c->M : c->K) : (tr ? c->K : c->N);
        shape[d] = r, shape[d + 1] = q;
        CHECK(nx_tensor_new(ctx, NX_DTYPE_F32, nd, shape, &in[i]));
        fill(nx_tensor_data(in[i]), nx_tensor_numel(in[i]), (uint64_t)(idx * 2 + i + 1),
             c->special);
    }
    CHECK(run_ref(ctx, c, in, &ref));
    CHECK(nx_ptx_plan_run(ctx, p.plan, p.cp, (const nx_tensor *const *)in, &got));
    double worst = 0;
    int bad = compare(c, nx_tensor_data(got), nx_tensor_data(ref), nx_tensor_numel(ref), &worst);
    printf("check %-26s %lldx%lldx%lldx%lld %-6s %s (%s, max|err| %.2e)\n", c->name,
           (long long)c->bs, (long long)c->M, (long long)c->K, (long long)c->N,
           generator(ctx, p.plan), bad ? "FAIL" : "ok",
           c->m == NX_MONOID_MAX || c->m == NX_MONOID_MIN ? "bitwise" : "64 eps", worst);
    nx_tensor_free(in[0]);
    nx_tensor_free(in[1]);
    nx_tensor_free(ref);
    nx_tensor_free(got);
    free_prog(ctx, &p);
    return bad != 0;
}

/* y = 2x + 1 (f32) and y = x * x - 3 (f64) on odd lengths; f32 also from a device view that is
 * 4 bytes off 16-byte alignment (the scalar path). Host arithmetic is the reference: 2x is
 * exact, so the f32 result is exact with or without FMA; the f64 one within 1 ulp. */
static int check_elementwise(nx_ctx *ctx)
{
    int fails = 0;
    for (int dt = 0; dt < 2; dt++) {
        nx_dtype t = dt ? NX_DTYPE_F64 : NX_DTYPE_F32;
        int64_t n = dt ? 999 : 1000003;
        prog e = {0};
        CHECK(nx_graph_new(ctx, &e.g));
        nx_node x = nx_input(e.g, "x", t, 1, &n);
        e.out = dt ? nx_sub(e.g, nx_mul(e.g, x, x), nx_scalar(e.g, t, 3.0))
                   : nx_add(e.g, nx_mul(e.g, x, nx_scalar(e.g, t, 2.0)), nx_scalar(e.g, t, 1.0));
        build(ctx, &e);
        int64_t n1 = n + 1;
        nx_tensor *h = NULL, *d = NULL, *view = NULL;
        CHECK(nx_tensor_new(ctx, t, 1, &n1, &h));
        for (int64_t i = 0; i < n1; i++) {
            double v = (double)((i * 7919) % 2001 - 1000) / 37.0;
            if (dt)
                ((double *)nx_tensor_data(h))[i] = v;
            else
                ((float *)nx_tensor_data(h))[i] = (float)v;
        }
        CHECK(nx_tensor_to_device(h, NX_DEVICE_CUDA, &d));
        for (int off = 0; off < 2 - dt; off++) {
            int64_t st = 1;
            CHECK(nx_rt_tensor_view(d, 1, &n, &st, off, &view));
            nx_tensor *o = NULL, *ho = NULL;
            CHECK(nx_ptx_plan_run(ctx, e.plan, e.cp, (const nx_tensor *const *)&view, &o));
            CHECK(nx_tensor_to_device(o, NX_DEVICE_HOST, &ho));
            int bad = 0;
            for (int64_t i = 0; i < n; i++) {
                if (dt) {
                    double xv = ((double *)nx_tensor_data(h))[i + off];
                    /* x * x - 3 may be one FMA (one rounding) or two roundings */
                    double want = xv * xv - 3, gotv = ((double *)nx_tensor_data(ho))[i];
                    bad += fabs(gotv - want) > 2.3e-16 * (xv * xv + 3);
                } else {
                    float xv = ((float *)nx_tensor_data(h))[i + off];
                    float want = xv * 2.0f + 1.0f, gotv = ((float *)nx_tensor_data(ho))[i];
                    bad += !same_bits(gotv, want);
                }
            }
            printf("check elementwise %-3s n=%-8lld offset %d %-6s %s\n", dt ? "f64" : "f32",
                   (long long)n, off, generator(ctx, e.plan), bad ? "FAIL" : "ok (exact)");
            fails += bad != 0;
            nx_tensor_free(o);
            nx_tensor_free(ho);
            nx_tensor_free(view);
        }
        nx_tensor_free(h);
        nx_tensor_free(d);
        free_prog(ctx, &e);
    }
    return fails;
}

static int run_checks(nx_ctx *ctx)
{
    int fails = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        fails += check_case(ctx, &cases[i], (int)i);
    fails += check_elementwise(ctx);
    printf("checks: %d failed of %zu\n", fails, sizeof cases / sizeof cases[0] + 3);
    return fails;
}

/* Builds case c (or, c NULL, the elementwise y = 2x + 1) down to its kernel plan. */
static nx_status plan_case(nx_ctx *ctx, const ccase *c, nx_graph **g, nx_kplan **plan)
{
    nx_status st = nx_graph_new(ctx, g);
    if (st != NX_OK)
        return st;
    int64_t n = 1000003;
    nx_node out = c ? case_graph(*g, c)
                    : nx_add(*g,
                             nx_mul(*g, nx_input(*g, "x", NX_DTYPE_F32, 1, &n),
                                    nx_scalar(*g, NX_DTYPE_F32, 2.0)),
                             nx_scalar(*g, NX_DTYPE_F32, 1.0));
    return nx_pass_pipeline(ctx, &(*g)->s, 1, &out, plan);
}

/* Fails allocation n = 1, 2, ... of the emitter (the plan is built first, without failures)
 * until a run completes: every failed run must say NX_ERR_NOMEM and free what it allocated, with
 * matching sizes. */
static int sweep_emit(const ccase *c)
{
    for (int64_t n = 1; n < 100000; n++) {
        nx_test_alloc ta = {0};
        nx_allocator a = nx_test_allocator(&ta);
        nx_ctx_opts opts = {.allocator = &a, .ignore_env = true};
        nx_ctx *ctx = NULL;
        nx_graph *g = NULL;
        nx_kplan *plan = NULL;
        if (nx_ctx_new(&opts, &ctx) != NX_OK || plan_case(ctx, c, &g, &plan) != NX_OK)
            return 1;
        ta.fail_at = ta.count + n;
        nx_status st = NX_OK;
        for (int i = 0; st == NX_OK && i < plan->nkernels; i++) {
            char *src = NULL;
            size_t len = 0;
            nx_ptx_launch l;
            st = nx_ptx_emit(plan->kernels[i], "nx_kernel", true, &src, &len, &l);
            if (st == NX_OK)
                nx_rt_free(ctx, src, len);
        }
        bool fired = ta.count >= ta.fail_at;
        ta.fail_at = 0;
        nx_kplan_free(plan);
        nx_graph_free(g);
        nx_ctx_free(ctx);
        if (ta.live || ta.size_errors || (fired && st != NX_ERR_NOMEM) || (!fired && st)) {
            printf("sweep %s: allocation %lld: status %s, %lld live, %lld size errors\n",
                   c ? c->name : "elementwise", (long long)n, nx_status_str(st), (long long)ta.live,
                   (long long)ta.size_errors);
            return 1;
        }
        if (!fired) {
            printf("sweep %-26s emitter: %lld allocations, each failure handled\n",
                   c ? c->name : "elementwise", (long long)n - 1);
            return 0;
        }
    }
    return 1;
}

/* Without a GPU: every check case's kernels through the emitter and NVRTC. */
static int check_emit(nx_ctx *ctx)
{
    if (nx_ptx_available(ctx) != NX_OK) {
        printf("bench-cuda --check-emit: SKIP: %s\n", nx_ctx_last_error(ctx));
        return 77;
    }
    static const char *const opts[] = {"-default-device", "--std=c++17"};
    const nx_ptx_target ts[2] = {{80, NX_PTX_KIND_PTX}, {90, NX_PTX_KIND_CUBIN}};
    int fails = 0, tiled = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        prog p = {0};
        CHECK(nx_graph_new(ctx, &p.g));
        p.out = case_graph(p.g, &cases[i]);
        CHECK(nx_pass_pipeline(ctx, &p.g->s, 1, &p.out, &p.plan));
        const char *gen = generator(ctx, p.plan);
        tiled += !strcmp(gen, "tiled");
        double ms = 0;
        for (int k = 0; k < p.plan->nkernels; k++) {
            char *src = NULL;
            size_t len = 0;
            nx_ptx_launch l;
            CHECK(nx_ptx_emit(p.plan->kernels[k], "nx_kernel", true, &src, &len, &l));
            for (int t = 0; t < 2; t++) {
                nx_ptx_image img;
                double t0 = now();
                if (nx_ptx_compile(ctx, src, "check.cu", ts[t], opts, 2, &img) != NX_OK) {
                    printf("emit %s: NVRTC: %s\n", cases[i].name, nx_ctx_last_error(ctx));
                    fails++;
                    continue;
                }
                ms += (now() - t0) * 1e3;
                nx_ptx_image_free(ctx, &img);
            }
            nx_rt_free(ctx, src, len);
        }
        printf("emit %-26s %-6s NVRTC compute_80 + sm_90 %.0f ms\n", cases[i].name, gen, ms);
        nx_kplan_free(p.plan);
        nx_graph_free(p.g);
    }
    printf("check-emit: %d NVRTC failures, %d of %zu cases tiled\n", fails, tiled,
           sizeof cases / sizeof cases[0]);
    fails += sweep_emit(&cases[1]) + sweep_emit(&cases[14]) + sweep_emit(NULL);
    return fails || tiled + 1 < (int)(sizeof cases / sizeof cases[0]) ? 1 : 0;
}

int main(int argc, char **argv)
{
    bool only_check = argc > 1 && !strcmp(argv[1], "--check");
    bool emit_only = argc > 1 && !strcmp(argv[1], "--check-emit");
    int64_t n = argc > 1 && !only_check && !emit_only ? atoll(argv[1]) : 4096;
    double peer = argc > 2 ? atof(argv[2]) : 0;
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(NULL, &ctx) != NX_OK)
        return 1;
    if (emit_only) {
        int rc = check_emit(ctx);
        nx_ctx_free(ctx);
        return rc;
    }
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
           g->cc_minor, g->sm_count, nx_ptx_toolchain_key(tc, sizeof tc), nx_ctx_reproducible(ctx));
    int fails = run_checks(ctx);
    if (!only_check) {
        double bw = copy_bandwidth(ctx, (int64_t)1 << 28);
        elementwise_and_sum(ctx, (int64_t)1 << 28, bw);
        overheads(ctx);
        contraction(ctx, "max-plus (MAX, +)", NX_MONOID_MAX, false, n, 0);
        contraction(ctx, "sum-product (SUM, *)", NX_MONOID_SUM, true, n, peer);
        contraction(ctx, "log-sum-exp (LSE, +)", NX_MONOID_LOGSUMEXP, false, n, 0);
    }
    nx_ctx_free(ctx);
    return fails ? 1 : 0;
}
