/* `nitrix bench` rows of the linalg family (bench.h): the batched small-dense workload,
 * 10^6 SPD 6 x 6 float64 problems (a = x x^T / 6 + I, x 6 x 8 uniform in [-1, 1)) and one
 * right-hand side each:
 *   cholesky_6x6_1e6    nx cholesky (L and info), against numpy.linalg.cholesky;
 *   cho_solve_6x6_1e6   nx cho_solve (factor and two substitutions, one kernel), against
 *                       numpy.linalg.solve;
 *   solve_6x6_1e6       nx solve (LU with partial pivoting), against numpy.linalg.solve;
 *   chol_solve_6x6_1e6  the row: cholesky then cho_solve, against numpy.linalg.cholesky
 *                       then numpy.linalg.solve.
 * Each row times calls through the op table after one warm-up call that compiles. The peers are
 * bench/peers-linalg.py, run by hand in the same session. The floor is memory traffic at this
 * machine's memcpy rate measured in the same run: a read once (288 MB), the outputs written once.
 * Under NITRIX_BACKEND=cuda the inputs are uploaded once (nx_tensor_to_device) and every call
 * takes and returns device tensors (the lead's GPU row against torch.linalg). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "nitrix-op.h"

#define LA_N 1000000
#define LA_P 6

typedef struct la_row {
    const char *name;
    int kind;       /* 0 cholesky, 1 cho_solve, 2 solve, 3 cholesky + cho_solve */
    double volumes; /* a-sized arrays moved (reads + writes) */
} la_row;

static double process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double uniform(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return 2.0 * ((double)(*s >> 11) / 9007199254740992.0) - 1.0;
}

static nx_status make_inputs(nx_ctx *ctx, nx_tensor **a, nx_tensor **b)
{
    int64_t sa[3] = {LA_N, LA_P, LA_P}, sb[2] = {LA_N, LA_P};
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F64, 3, sa, a);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F64, 2, sb, b);
    if (st != NX_OK)
        return st;
    double *av = nx_tensor_data(*a), *bv = nx_tensor_data(*b), x[LA_P][8];
    uint64_t s = 20261207;
    for (int64_t n = 0; n < LA_N; n++) {
        for (int i = 0; i < LA_P; i++)
            for (int k = 0; k < 8; k++)
                x[i][k] = uniform(&s);
        for (int i = 0; i < LA_P; i++) {
            for (int j = 0; j < LA_P; j++) {
                double acc = i == j ? 1.0 : 0.0;
                for (int k = 0; k < 8; k++)
                    acc += x[i][k] * x[j][k] / LA_P;
                av[(n * LA_P + i) * LA_P + j] = acc;
            }
            bv[n * LA_P + i] = uniform(&s);
        }
    }
    return NX_OK;
}

static nx_status place(nx_ctx *ctx, nx_tensor **x)
{
    if (nx_ctx_backend(ctx) != NX_BACKEND_CUDA)
        return NX_OK;
    nx_tensor *d = NULL;
    nx_status st = nx_tensor_to_device(*x, NX_DEVICE_CUDA, &d);
    nx_tensor_free(*x);
    *x = d;
    return st;
}

static nx_status call(nx_ctx *ctx, const la_row *r, nx_tensor *a, nx_tensor *b)
{
    nx_tensor *out[2] = {NULL, NULL};
    nx_status st = NX_OK;
    if (r->kind == 0 || r->kind == 3)
        st = nx_op_call(ctx, "cholesky", 1, (const nx_tensor *[]){a}, 0, NULL, NULL, 2, out);
    nx_tensor_free(out[0]);
    nx_tensor_free(out[1]);
    out[0] = out[1] = NULL;
    if (st == NX_OK && r->kind != 0)
        st = nx_op_call(ctx, r->kind == 2 ? "solve" : "cho_solve", 2,
                        (const nx_tensor *[]){a, b}, 0, NULL, NULL, 1, out);
    nx_tensor_free(out[0]);
    return st;
}

static nx_status run_row(nx_ctx *ctx, const la_row *r, nx_tensor *a, nx_tensor *b, int runs,
                         bool json, FILE *f)
{
    nx_bench_row row;
    nx_bench_set_row(&row, r->name, "[1000000,6,6]");
    snprintf(row.dtype, sizeof row.dtype, "f64");
    bool cuda = nx_ctx_backend(ctx) == NX_BACKEND_CUDA;
    if (cuda)
        snprintf(row.backend, sizeof row.backend, "cuda");
    nx_status st = call(ctx, r, a, b); /* warm-up: compiles and caches */
    double *t = calloc((size_t)runs * 2, sizeof(double)), *cpu = t ? t + runs : NULL;
    for (int i = 0; st == NX_OK && t && i < runs; i++) {
        double c0 = process_cpu_s(), t0 = nx_bench_now();
        st = call(ctx, r, a, b);
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
        size_t bytes = (size_t)LA_N * LA_P * LA_P * sizeof(double);
        double bw = cuda ? 0 : nx_bench_memcpy_rate(bytes);
        row.floor_s = bw > 0 ? r->volumes * (double)bytes / (2.0 * bw) : 0;
        snprintf(row.peer, sizeof row.peer, "numpy.linalg (peers-linalg.py)");
        snprintf(row.note, sizeof row.note,
                 "cpu time %.4f s; floor %.2f a-volumes at memcpy %.1f GB/s; peer: "
                 "bench/peers-linalg.py%s",
                 nx_bench_median(cpu, runs), r->volumes, bw / 1e9,
                 cuda ? "; device tensors in and out, sync included" : "");
        nx_bench_print_row(&row, json, f);
    }
    free(t);
    return st;
}

nx_status nx_bench_linalg(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f)
{
    /* volumes: a read (1) + L written (1) for cholesky; a read + x written (1/6) for the
     * solves; both for the pair */
    static const la_row rows[] = {
        {"cholesky_6x6_1e6", 0, 2.0},
        {"cho_solve_6x6_1e6", 1, 1.0 + 2.0 / LA_P},
        {"solve_6x6_1e6", 2, 1.0 + 2.0 / LA_P},
        {"chol_solve_6x6_1e6", 3, 3.0 + 2.0 / LA_P},
    };
    bool any = false;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        any = any || nx_bench_wanted(filter, rows[i].name);
    if (!any)
        return NX_OK;
    nx_tensor *a = NULL, *b = NULL;
    nx_status st = make_inputs(ctx, &a, &b);
    if (st == NX_OK)
        st = place(ctx, &a);
    if (st == NX_OK)
        st = place(ctx, &b);
    for (size_t i = 0; st == NX_OK && i < sizeof rows / sizeof rows[0]; i++)
        if (nx_bench_wanted(filter, rows[i].name))
            st = run_row(ctx, &rows[i], a, b, runs, json, f);
    nx_tensor_free(a);
    nx_tensor_free(b);
    return st;
}
