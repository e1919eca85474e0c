/* `nitrix bench` rows of the sparse family (bench.h): ELL matmul with m = 65536 rows, k_max = 32
 * slots and 32 columns (n_cols = 65536), f32, under REAL, LOG and TROPICAL_MAX_PLUS. Each row
 * times nx_semiring_ell_matmul after one warm-up call (which compiles and caches the program), so
 * the figure is the steady-state cost of a call, index validation included. The note gives events
 * per second (m * k_max * columns semiring (x)-(+) steps) and the bytes the kernel must move:
 * values and indices once (8 bytes a slot), one gathered B row per slot (128 bytes) and the output
 * once; the floor is those bytes at this machine's memcpy rate, measured in the same run. The
 * note also gives the process CPU time of the median call (all threads). The NumPy peer (gather
 * + reduce on the same shapes) is bench/peers-sparse.py, run by hand.
 *
 * Under NITRIX_BACKEND=cuda the rows are the H200 ones of issue 8: m = 4096, k_max = 32, 32
 * columns under REAL, max-plus and LOG (target <= 50 us each), and m = 10^6, k_max = 16, 64
 * columns under REAL (target <= 1.5 ms and >= 70 % of memory bandwidth counting the gathered
 * rows). Each uploads its inputs once with nx_tensor_to_device, warms up, and times
 * nx_semiring_ell_matmul on device tensors: the output stays on the device and the plan run
 * synchronises before it returns, so the figure is the device index check (one reduction and a
 * 4-byte copy back) plus the contraction and the launches, without host<->device copies of the
 * operands. Their GPU peers are `peers-sparse.py --gpu` (torch gather + sum/amax/logsumexp). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "nitrix-ops.h"

#define M 65536
#define K 32
#define C 32

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 11;
}

/* values uniform in [-1, 1), indices uniform over the m rows of B, B [m, c] uniform. */
static nx_status make_inputs(nx_ctx *ctx, int64_t m, int64_t k, int64_t c, nx_ell *a, nx_tensor **b)
{
    int64_t vs[2] = {m, k}, bs[2] = {m, c};
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F32, 2, vs, &a->values);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_I32, 2, vs, &a->indices);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F32, 2, bs, b);
    if (st != NX_OK)
        return st;
    a->n_cols = m;
    a->identity = NAN;
    uint64_t s = 20261129;
    float *v = nx_tensor_data(a->values), *bv = nx_tensor_data(*b);
    int32_t *ix = nx_tensor_data(a->indices);
    for (int64_t i = 0; i < m * k; i++) {
        v[i] = (float)((double)lcg(&s) / 4503599627370496.0 - 1.0);
        ix[i] = (int32_t)(lcg(&s) % (uint64_t)m);
    }
    for (int64_t i = 0; i < m * c; i++)
        bv[i] = (float)((double)lcg(&s) / 4503599627370496.0 - 1.0);
    return NX_OK;
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct sparse_row {
    const char *name;
    nx_semiring_kind kind;
} sparse_row;

static void fill_stats(nx_bench_row *row, double *t, int runs)
{
    row->runs = runs;
    row->min_s = row->max_s = t[0];
    for (int i = 1; i < runs; i++) {
        row->min_s = t[i] < row->min_s ? t[i] : row->min_s;
        row->max_s = t[i] > row->max_s ? t[i] : row->max_s;
    }
    row->median_s = nx_bench_median(t, runs);
}

/* Times runs calls after a warm-up (which compiles and caches): wall times into row, the
 * median CPU time into *cpu_s. */
static nx_status time_calls(nx_ctx *ctx, const nx_semiring *sr, const nx_ell *a, const nx_tensor *b,
                            const nx_semiring_opts *o, int runs, nx_bench_row *row, double *cpu_s)
{
    nx_tensor *y = NULL;
    nx_status st = nx_semiring_ell_matmul(ctx, sr, a, b, o, &y);
    nx_tensor_free(y);
    double *t = calloc((size_t)runs * 2, sizeof(double));
    if (!t)
        return NX_ERR_NOMEM;
    for (int i = 0; st == NX_OK && i < runs; i++) {
        double t0 = nx_bench_now(), c0 = cpu_now();
        y = NULL;
        st = nx_semiring_ell_matmul(ctx, sr, a, b, o, &y);
        t[i] = nx_bench_now() - t0;
        t[runs + i] = cpu_now() - c0;
        nx_tensor_free(y);
    }
    if (st == NX_OK) {
        fill_stats(row, t, runs);
        *cpu_s = nx_bench_median(t + runs, runs);
    }
    free(t);
    return st;
}

static nx_status run_row(nx_ctx *ctx, const sparse_row *r, const nx_ell *a, const nx_tensor *b,
                         int runs, bool json, FILE *f)
{
    nx_bench_row row;
    nx_bench_set_row(&row, r->name, "m=65536 k=32 c=32");
    nx_semiring_opts o = {.backend = NX_BACKEND_CPU};
    double cpu_s = 0;
    nx_status st = time_calls(ctx, nx_semiring_builtin(r->kind), a, b, &o, runs, &row, &cpu_s);
    if (st != NX_OK)
        return st;
    double events = (double)M * K * C;
    double bytes = (double)M * K * (4 + 4 + C * 4) + (double)M * C * 4;
    double bw = nx_bench_memcpy_rate((size_t)M * C * 4 * 8);
    row.floor_s = bw > 0 ? bytes / bw : 0;
    snprintf(row.peer, sizeof row.peer, "numpy gather+reduce (peers-sparse.py)");
    snprintf(row.note, sizeof row.note,
             "%.2f G events/s; %.1f MB, %.2f GB/s; floor at memcpy %.1f GB/s; cpu %.3f s (%d thr)",
             events / row.median_s / 1e9, bytes / 1e6, bytes / row.median_s / 1e9, bw / 1e9, cpu_s,
             nx_ctx_num_threads(ctx));
    nx_bench_print_row(&row, json, f);
    return NX_OK;
}

/* ---- the H200 rows (NITRIX_BACKEND=cuda) ---------------------------------------------------*/

#define H200_BW 4.8e12 /* HBM3e bytes/s, the H200's datasheet figure */

typedef struct gpu_row {
    const char *name;
    nx_semiring_kind kind;
    int64_t m, k, c;
    double target_s;
} gpu_row;

/* Each tensor once to the device; the host copies go. */
static nx_status upload(nx_tensor **t)
{
    nx_tensor *d = NULL;
    nx_status st = nx_tensor_to_device(*t, NX_DEVICE_CUDA, &d);
    if (st != NX_OK)
        return st;
    nx_tensor_free(*t);
    *t = d;
    return NX_OK;
}

static nx_status run_gpu_row(nx_ctx *ctx, const gpu_row *r, int runs, bool json, FILE *f)
{
    nx_ell a = {0};
    nx_tensor *b = NULL;
    nx_status st = make_inputs(ctx, r->m, r->k, r->c, &a, &b);
    if (st == NX_OK)
        st = upload(&a.values);
    if (st == NX_OK)
        st = upload(&a.indices);
    if (st == NX_OK)
        st = upload(&b);
    nx_bench_row row;
    char shape[40];
    snprintf(shape, sizeof shape, "m=%lld k=%lld c=%lld", (long long)r->m, (long long)r->k,
             (long long)r->c);
    nx_bench_set_row(&row, r->name, shape);
    snprintf(row.backend, sizeof row.backend, "cuda");
    nx_semiring_opts o = {.backend = NX_BACKEND_CUDA};
    double cpu_s = 0;
    if (st == NX_OK)
        st = time_calls(ctx, nx_semiring_builtin(r->kind), &a, b, &o, runs, &row, &cpu_s);
    nx_ell_free(&a);
    nx_tensor_free(b);
    if (st != NX_OK)
        return st;
    /* Bytes the contraction must move: values and indices once, one gathered B row per slot,
     * the output once (the index check reads the indices a second time: not counted). */
    double events = (double)r->m * r->k * r->c;
    double bytes = (double)r->m * r->k * (8 + 4.0 * r->c) + 4.0 * r->m * r->c;
    row.floor_s = bytes / H200_BW;
    snprintf(row.peer, sizeof row.peer, "torch gather+reduce (peers-sparse.py --gpu)");
    snprintf(row.note, sizeof row.note,
             "device tensors, index check+sync incl.; %.1f G ev/s; %.1f MB, %.0f%% of 4.8 TB/s; "
             "target %.0f us",
             events / row.median_s / 1e9, bytes / 1e6, 100 * bytes / row.median_s / H200_BW,
             r->target_s * 1e6);
    nx_bench_print_row(&row, json, f);
    return NX_OK;
}

/* A call takes microseconds to a millisecond here, so the rows take at least 20 timed calls (as
 * the torch peers do) whatever --runs asks. */
static nx_status gpu_rows(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f)
{
    runs = runs < 20 ? 20 : runs;
    static const gpu_row rows[] = {
        {"sparse_ell_matmul_real_4096", NX_SEMIRING_REAL, 4096, 32, 32, 50e-6},
        {"sparse_ell_matmul_maxplus_4096", NX_SEMIRING_TROPICAL_MAX_PLUS, 4096, 32, 32, 50e-6},
        {"sparse_ell_matmul_log_4096", NX_SEMIRING_LOG, 4096, 32, 32, 50e-6},
        {"sparse_ell_matmul_real_1m", NX_SEMIRING_REAL, 1000000, 16, 64, 1.5e-3},
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

nx_status nx_bench_sparse(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f)
{
    static const sparse_row rows[] = {
        {"sparse_ell_matmul_real", NX_SEMIRING_REAL},
        {"sparse_ell_matmul_log", NX_SEMIRING_LOG},
        {"sparse_ell_matmul_tropical", NX_SEMIRING_TROPICAL_MAX_PLUS},
    };
    if (runs < 1)
        return NX_OK;
    if (nx_ctx_backend(ctx) == NX_BACKEND_CUDA)
        return gpu_rows(ctx, filter, runs, json, f);
    bool any = false;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        any = any || nx_bench_wanted(filter, rows[i].name);
    if (!any)
        return NX_OK;
    nx_ell a = {0};
    nx_tensor *b = NULL;
    nx_status st = make_inputs(ctx, M, K, C, &a, &b);
    for (size_t i = 0; st == NX_OK && i < sizeof rows / sizeof rows[0]; i++)
        if (nx_bench_wanted(filter, rows[i].name))
            st = run_row(ctx, &rows[i], &a, b, runs, json, f);
    nx_ell_free(&a);
    nx_tensor_free(b);
    return st;
}
