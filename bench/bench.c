/* The benchmark rows of the CPU backend (bench.h). Each workload is a graph compiled through the
 * pass pipeline and the CPU backend object, timed as the median of runs after one warm-up run.
 * Peers run in the same process: memcpy for the bandwidth rows, a naive triple loop for the
 * max-plus contraction (NumPy peers are measured by bench/peers.py). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "codegen/x86/emit.h"
#include "codegen/x86/jit.h"
#include "program/program.h"
#include "runtime/cache.h"

double nx_bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double nx_bench_memcpy_rate(size_t bytes)
{
    char *a = malloc(bytes), *b = malloc(bytes);
    double best = 0;
    if (a && b) {
        memset(a, 1, bytes);
        memset(b, 0, bytes);
        for (int r = 0; r < 3; r++) {
            double t0 = nx_bench_now();
            memcpy(b, a, bytes);
            double t = nx_bench_now() - t0;
            best = t > 0 && bytes / t > best ? bytes / t : best;
        }
    }
    free(a);
    free(b);
    return best;
}

double nx_bench_median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* ---- compiled workloads --------------------------------------------------------------------*/

typedef struct workload {
    nx_ctx *ctx;
    nx_graph *g;
    nx_node out;
    nx_kplan *plan;
    void *state;
    nx_tensor *in[4];
    int nin;
    double compile_s;
} workload;

static nx_status workload_prepare(workload *w)
{
    double t0 = nx_bench_now();
    nx_status st = nx_pass_pipeline(w->ctx, &w->g->s, 1, &w->out, &w->plan);
    if (st == NX_OK)
        st = nx_x86_backend.prepare(w->ctx, w->plan, NULL, &w->state);
    w->compile_s = nx_bench_now() - t0;
    return st;
}

static void workload_free(workload *w)
{
    if (w->plan)
        nx_x86_backend.release(w->ctx, w->plan, w->state);
    nx_kplan_free(w->plan);
    for (int i = 0; i < w->nin; i++)
        nx_tensor_free(w->in[i]);
    nx_graph_free(w->g);
}

static nx_status add_input(workload *w, int ndim, const int64_t *shape, double lo, double hi,
                           nx_node *node)
{
    nx_tensor *t = NULL;
    nx_status st = nx_tensor_new(w->ctx, NX_DTYPE_F32, ndim, shape, &t);
    if (st != NX_OK)
        return st;
    float *d = nx_tensor_data(t);
    uint64_t s = 0x9e3779b97f4a7c15ull + (uint64_t)w->nin;
    for (int64_t i = 0; i < nx_tensor_numel(t); i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        d[i] = (float)(lo + (hi - lo) * (double)(s >> 40) / 16777216.0);
    }
    w->in[w->nin++] = t;
    *node = nx_input(w->g, NULL, NX_DTYPE_F32, ndim, shape);
    return NX_OK;
}

static nx_status time_workload(workload *w, int runs, nx_bench_row *row)
{
    double *t = calloc((size_t)runs, sizeof *t);
    if (!t)
        return NX_ERR_NOMEM;
    nx_status st = NX_OK;
    for (int r = -1; r < runs && st == NX_OK; r++) { /* r = -1: the warm-up */
        nx_tensor *out = NULL;
        double t0 = nx_bench_now();
        st = nx_x86_backend.run(w->ctx, w->plan, w->state, (const nx_tensor *const *)w->in, &out);
        if (r >= 0)
            t[r] = nx_bench_now() - t0;
        nx_tensor_free(out);
    }
    row->median_s = st == NX_OK ? nx_bench_median(t, runs) : NAN;
    row->min_s = t[0];
    row->max_s = t[runs - 1];
    row->runs = runs;
    free(t);
    return st;
}

/* ---- peers ---------------------------------------------------------------------------------*/

/* memcpy of n bytes into a fresh allocation each run (read + write counted, median of runs):
 * the destination's first-touch page faults included, as a kernel writing a new output pays
 * them. */
static double memcpy_fresh_bandwidth(size_t n, int runs)
{
    char *a = malloc(n);
    if (!a)
        return NAN;
    memset(a, 1, n);
    double t[64];
    runs = runs > 64 ? 64 : runs;
    for (int r = -1; r < runs; r++) {
        char *b = malloc(n);
        if (!b)
            break;
        double t0 = nx_bench_now();
        memcpy(b, a, n);
        if (r >= 0)
            t[r] = nx_bench_now() - t0;
        volatile char sink = b[n / 3];
        (void)sink;
        free(b);
    }
    free(a);
    return 2.0 * (double)n / nx_bench_median(t, runs);
}

/* Bytes moved per second by memcpy of n bytes (read + write counted), median of runs. */
static double memcpy_bandwidth(size_t n, int runs, double *median_s)
{
    char *a = malloc(n), *b = malloc(n);
    if (!a || !b) {
        free(a);
        free(b);
        return NAN;
    }
    memset(a, 1, n);
    memset(b, 2, n);
    double t[64];
    runs = runs > 64 ? 64 : runs;
    for (int r = -1; r < runs; r++) {
        double t0 = nx_bench_now();
        memcpy(b, a, n);
        if (r >= 0)
            t[r] = nx_bench_now() - t0;
    }
    volatile char sink = b[n / 2];
    (void)sink;
    free(a);
    free(b);
    *median_s = nx_bench_median(t, runs);
    return 2.0 * (double)n / *median_s;
}

/* The naive peer is compiled at -O3 whatever the build type, as the peer is. clang has no
 * per-function optimisation attribute; it builds this file at the build's level. */
#if defined(__GNUC__) && !defined(__clang__)
#define NX_BENCH_O3 __attribute__((optimize("O3")))
#else
#define NX_BENCH_O3
#endif

NX_BENCH_O3 static void naive_maxplus(const float *a, const float *b, float *c, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float m = -INFINITY;
            for (int k = 0; k < n; k++) {
                float v = a[i * n + k] + b[k * n + j];
                m = v > m ? v : m;
            }
            c[i * n + j] = m;
        }
}

/* ---- rows ----------------------------------------------------------------------------------*/

void nx_bench_set_row(nx_bench_row *row, const char *name, const char *shape)
{
    memset(row, 0, sizeof *row);
    snprintf(row->name, sizeof row->name, "%s", name);
    snprintf(row->backend, sizeof row->backend, "cpu");
    snprintf(row->dtype, sizeof row->dtype, "f32");
    snprintf(row->shape, sizeof row->shape, "%s", shape);
}

nx_status nx_bench_place_input(nx_ctx *ctx, nx_tensor **x)
{
    if (nx_ctx_backend(ctx) != NX_BACKEND_CUDA)
        return NX_OK;
    nx_tensor *d = NULL;
    nx_status st = nx_tensor_to_device(*x, NX_DEVICE_CUDA, &d);
    nx_tensor_free(*x);
    *x = d;
    return st;
}

#define N64M (64LL << 20)

static nx_status row_elementwise(nx_ctx *ctx, int runs, nx_bench_row *row, double *compile_s)
{
    nx_bench_set_row(row, "a_elementwise_fma", "[67108864]");
    workload w = {.ctx = ctx};
    int64_t n = N64M;
    nx_node a, b, c;
    nx_status st = nx_graph_new(ctx, &w.g);
    if (st == NX_OK)
        st = add_input(&w, 1, &n, -1, 1, &a);
    if (st == NX_OK)
        st = add_input(&w, 1, &n, -1, 1, &b);
    if (st == NX_OK)
        st = add_input(&w, 1, &n, -1, 1, &c);
    if (st == NX_OK) {
        w.out = nx_add(w.g, nx_mul(w.g, a, b), c);
        st = workload_prepare(&w);
    }
    if (st == NX_OK)
        st = time_workload(&w, runs, row);
    *compile_s = w.compile_s;
    workload_free(&w);
    double peer_s = 0;
    double bw = memcpy_bandwidth((size_t)N64M * 4, runs, &peer_s);
    snprintf(row->peer, sizeof row->peer, "memcpy 256 MiB");
    row->peer_median_s = peer_s;
    row->floor_s = 16.0 * (double)N64M / bw; /* 3 reads + 1 write of 4 bytes at memcpy speed */
    double fresh = memcpy_fresh_bandwidth((size_t)N64M * 4, runs);
    snprintf(row->note, sizeof row->note,
             "memcpy %.1f GB/s (into a fresh buffer %.1f GB/s); floor = 1 GiB moved at the "
             "first rate",
             bw / 1e9, fresh / 1e9);
    return st;
}

static nx_status row_sum(nx_ctx *ctx, int runs, nx_bench_row *row, double *compile_s)
{
    nx_bench_set_row(row, "d_sum", "[67108864]");
    workload w = {.ctx = ctx};
    int64_t n = N64M;
    nx_node x;
    nx_status st = nx_graph_new(ctx, &w.g);
    if (st == NX_OK)
        st = add_input(&w, 1, &n, -1, 1, &x);
    if (st == NX_OK) {
        int ax = 0;
        w.out = nx_reduce(w.g, x, 1, &ax, NX_MONOID_SUM, false);
        st = workload_prepare(&w);
    }
    if (st == NX_OK)
        st = time_workload(&w, runs, row);
    *compile_s = w.compile_s;
    workload_free(&w);
    double peer_s = 0;
    double bw = memcpy_bandwidth((size_t)N64M * 4, runs, &peer_s);
    snprintf(row->peer, sizeof row->peer, "memcpy 256 MiB");
    row->peer_median_s = peer_s;
    row->floor_s = 4.0 * (double)N64M / bw;
    snprintf(row->note, sizeof row->note, "%s; floor = 256 MiB read at memcpy's rate",
             nx_ctx_reproducible(ctx) ? "canonical order" : "reassociated");
    return st;
}

/* The core clock in GHz, measured: a chain of dependent integer adds retires one per cycle. The
 * clock /proc/cpuinfo states is the nominal one; this VM's cores run boosted (3.5-3.6 GHz against
 * 2.6 stated), and the peak must use the clock the kernels see. */
static double clock_ghz(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    uint64_t x = 0;
    const long reps = 20000000;
    double best = 0;
    for (int r = 0; r < 3; r++) { /* thread CPU time: other processes' share does not count */
        struct timespec a, b;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
        for (long i = 0; i < reps; i++)
            __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
                             "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0"
                             : "+r"(x));
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
        double dt = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
        double ghz = 8.0 * (double)reps / dt / 1e9;
        best = ghz > best ? ghz : best;
    }
    return best;
#else
    return 2.5;
#endif
}

/* Peak add+max pairs: cores x 8 f32 lane-pairs per cycle x clock. 8 per cycle is measured on
 * Zen 4 (docs/perf/cpu.md): a 512-bit add and a 512-bit max each take the two 256-bit FP
 * add-class pipes for a cycle, so one zmm pair (16 lanes) retires every 2 cycles; on hosts with
 * two full 512-bit FP pipes it would be 16. */
static double peak_pairs_per_s(int threads, double *ghz)
{
    *ghz = clock_ghz();
    return threads * 8.0 * *ghz * 1e9;
}

static nx_status row_contraction(nx_ctx *ctx, int runs, nx_monoid plus, nx_bench_row *row,
                                 double *compile_s)
{
    bool lse = plus == NX_MONOID_LOGSUMEXP;
    nx_bench_set_row(row, lse ? "c_lse_contraction" : "b_maxplus_contraction", "[1024,1024,1024]");
    workload w = {.ctx = ctx};
    int64_t s[2] = {1024, 1024};
    nx_node a, b;
    nx_status st = nx_graph_new(ctx, &w.g);
    if (st == NX_OK)
        st = add_input(&w, 2, s, -1, 1, &a);
    if (st == NX_OK)
        st = add_input(&w, 2, s, -1, 1, &b);
    if (st == NX_OK) {
        w.out = nx_einsum(w.g, "ik,kj->ij", a, b, plus, nx_add);
        st = workload_prepare(&w);
    }
    if (st == NX_OK)
        st = time_workload(&w, runs, row);
    *compile_s = w.compile_s;
    if (st == NX_OK && !lse) {
        float *c = malloc(1024 * 1024 * sizeof *c);
        double t0 = nx_bench_now();
        if (c)
            naive_maxplus(nx_tensor_data(w.in[0]), nx_tensor_data(w.in[1]), c, 1024);
        row->peer_median_s = c ? nx_bench_now() - t0 : 0;
        free(c);
        snprintf(row->peer, sizeof row->peer, "naive C triple loop (O3, 1 run)");
        int threads = nx_ctx_num_threads(ctx);
        double ghz = 0;
        row->floor_s = 1024.0 * 1024 * 1024 / peak_pairs_per_s(threads, &ghz);
        snprintf(row->note, sizeof row->note,
                 "floor: peak add+max pairs = %d cores x 8 lane-pairs/cycle x %.2f GHz (measured)",
                 threads, ghz);
    } else if (st == NX_OK) {
        snprintf(row->peer, sizeof row->peer, "numpy: bench/peers.py");
    }
    workload_free(&w);
    return st;
}

/* ---- compile latency and cache lookups -----------------------------------------------------*/

static void row_compile(nx_ctx *ctx, double *compiles, int ncomp, nx_bench_row *row)
{
    nx_bench_set_row(row, "e_compile_per_kernel", "rows a-d");
    row->median_s = ncomp ? nx_bench_median(compiles, ncomp) : NAN;
    row->runs = ncomp;
    nx_rt_cache *cache = NULL;
    nx_rt_cache_stats cs = {0};
    if (nx_rt_cache_of(ctx, &cache) == NX_OK)
        nx_rt_cache_get_stats(cache, &cs);
    nx_x86_jit *jit = NULL;
    nx_x86_jit_stats js = {0};
    if (nx_x86_jit_get(ctx, &jit) == NX_OK)
        nx_x86_jit_stats_get(jit, &js);
    snprintf(row->note, sizeof row->note,
             "pipeline+compile per workload; disk hits %lld of %lld loads, %lld kernels "
             "compiled (opt %.3f s, codegen %.3f s)",
             (long long)cs.load_hits, (long long)cs.loads,
             (long long)(js.kernels_total - cs.load_hits), js.opt_seconds, js.codegen_seconds);
}

static nx_status row_cache_hit(nx_ctx *ctx, int runs, nx_bench_row *row)
{
    nx_bench_set_row(row, "e_cache_hit", "[1024]");
    workload w = {.ctx = ctx};
    int64_t n = 1024;
    nx_node x;
    nx_status st = nx_graph_new(ctx, &w.g);
    if (st == NX_OK)
        st = add_input(&w, 1, &n, -1, 1, &x);
    if (st == NX_OK) {
        w.out = nx_exp(w.g, x);
        st = workload_prepare(&w);
    }
    int reps = runs * 200;
    double *t = calloc((size_t)reps, sizeof *t);
    for (int r = 0; st == NX_OK && t && r < reps; r++) {
        nx_x86_loop_fn fn;
        nx_x86_get_info info;
        st = nx_x86_kernel_get(ctx, w.plan->kernels[0], !nx_ctx_reproducible(ctx), &fn, &info);
        t[r] = info.seconds;
    }
    row->median_s = t ? nx_bench_median(t, reps) : NAN;
    row->runs = reps;
    snprintf(row->note, sizeof row->note, "key build + memory lookup of a compiled kernel");
    free(t);
    workload_free(&w);
    return st;
}

/* ---- output --------------------------------------------------------------------------------*/

void nx_bench_print_row(const nx_bench_row *r, bool json, FILE *f)
{
    if (json) {
        fprintf(f,
                "{\"name\": \"%s\", \"backend\": \"%s\", \"dtype\": \"%s\", \"shape\": \"%s\", "
                "\"median_s\": %.6g, \"runs\": %d, \"peer\": \"%s\", \"peer_median_s\": %.6g, "
                "\"floor_s\": %.6g, \"min_s\": %.6g, \"max_s\": %.6g, \"note\": \"%s\"}\n",
                r->name, r->backend, r->dtype, r->shape, r->median_s, r->runs, r->peer,
                r->peer_median_s, r->floor_s, r->min_s, r->max_s, r->note);
        return;
    }
    fprintf(f, "%-24s %-4s %-4s %-18s %11.6f s  x%-4d peer %-34s %10.6f s  floor %10.6f s  %s\n",
            r->name, r->backend, r->dtype, r->shape, r->median_s, r->runs, r->peer,
            r->peer_median_s, r->floor_s, r->note);
}

/* Row names use the op table's names (the spec's); each pair gives a new name's prefix and the
 * prefix the row had before, so a filter written for the old names (tools/gpu-rows of an older
 * tree, docs/perf/, CHANGELOG.md) still selects the same rows. Kept for one release, as the CLI's
 * op aliases are. */
static const struct {
    const char *now, *was;
} renamed[] = {
    {"dilate_", "morph_dilate_"},
    {"distance_transform_edt", "morph_edt"},
    {"median_filter_", "morph_median_"},
    {"connected_components", "morph_label"},
    {"max_pool_with_indices_nd_", "morph_max_pool_"},
    {"gaussian_", "smoothing_gaussian_"},
    {"semiring_matmul_", "semiring_"},
    {"pairwise_reduce_", "semiring_"},
    {"semiring_ell_matmul_", "sparse_ell_matmul_"},
    {"bilateral_gaussian_", "bilateral_"},
};

static bool contains_one(const char *filter, const char *name)
{
    while (*filter) {
        const char *end = strchr(filter, ',');
        size_t n = end ? (size_t)(end - filter) : strlen(filter);
        for (const char *p = name; n && *p; p++)
            if (strncmp(p, filter, n) == 0)
                return true;
        filter = end ? end + 1 : filter + n;
    }
    return false;
}

/* filter: comma-separated substrings; a row runs when its name, or the name it had before the
 * rename to the op table's names, contains one of them. */
bool nx_bench_wanted(const char *filter, const char *name)
{
    if (!filter || !*filter || contains_one(filter, name))
        return true;
    for (size_t i = 0; i < sizeof renamed / sizeof renamed[0]; i++) {
        size_t n = strlen(renamed[i].now);
        char old[160];
        if (strncmp(name, renamed[i].now, n) != 0)
            continue;
        snprintf(old, sizeof old, "%s%s", renamed[i].was, name + n);
        if (contains_one(filter, old))
            return true;
    }
    return false;
}

nx_status nx_bench_main(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f)
{
    nx_bench_row row;
    double compiles[8];
    int ncomp = 0;
    nx_status st = NX_OK;
    if (runs < 1)
        runs = 5;
    if (st == NX_OK && nx_bench_wanted(filter, "a_elementwise_fma")) {
        st = row_elementwise(ctx, runs, &row, &compiles[ncomp++]);
        nx_bench_print_row(&row, json, f);
    }
    if (st == NX_OK && nx_bench_wanted(filter, "b_maxplus_contraction")) {
        st = row_contraction(ctx, runs, NX_MONOID_MAX, &row, &compiles[ncomp++]);
        nx_bench_print_row(&row, json, f);
    }
    if (st == NX_OK && nx_bench_wanted(filter, "c_lse_contraction")) {
        st = row_contraction(ctx, runs, NX_MONOID_LOGSUMEXP, &row, &compiles[ncomp++]);
        nx_bench_print_row(&row, json, f);
    }
    if (st == NX_OK && nx_bench_wanted(filter, "d_sum")) {
        st = row_sum(ctx, runs, &row, &compiles[ncomp++]);
        nx_bench_print_row(&row, json, f);
    }
    if (st == NX_OK && nx_bench_wanted(filter, "e_compile")) {
        row_compile(ctx, compiles, ncomp, &row);
        nx_bench_print_row(&row, json, f);
    }
    if (st == NX_OK && nx_bench_wanted(filter, "e_cache_hit")) {
        st = row_cache_hit(ctx, runs, &row);
        nx_bench_print_row(&row, json, f);
    }
    nx_status (*const families[])(nx_ctx *, const char *, int, bool, FILE *) = {
        nx_bench_semiring, nx_bench_morphology, nx_bench_sparse, nx_bench_smoothing,
        nx_bench_bilateral, nx_bench_overlap, nx_bench_metrics, nx_bench_metrics_mi,
        nx_bench_logits,
        nx_bench_geometry,
        nx_bench_geometry_sampling,
        nx_bench_signal,
        nx_bench_numerics,
        nx_bench_random,
        nx_bench_linalg,
    };
    for (size_t i = 0; st == NX_OK && i < sizeof families / sizeof families[0]; i++)
        st = families[i](ctx, filter, runs, json, f);
    return st;
}
