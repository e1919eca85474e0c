/* `nitrix bench` rows of the sparse family (bench.h): ELL matmul with m = 65536 rows, k_max = 32
 * slots and 32 columns (n_cols = 65536), f32, under REAL, LOG and TROPICAL_MAX_PLUS. Each row
 * times nx_semiring_ell_matmul after one warm-up call (which compiles and caches the program), so
 * the figure is the steady-state cost of a call, index validation included. The note gives events
 * per second (m * k_max * columns semiring (x)-(+) steps) and the bytes the kernel must move:
 * values and indices once (8 bytes a slot), one gathered B row per slot (128 bytes) and the output
 * once; the floor is those bytes at this machine's memcpy rate, measured in the same run. The
 * NumPy peer (gather + reduce on the same shapes) is bench/peers-sparse.py, run by hand. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* values uniform in [-1, 1), indices uniform over the rows of B, B uniform. */
static nx_status make_inputs(nx_ctx *ctx, nx_ell *a, nx_tensor **b)
{
    int64_t vs[2] = {M, K}, bs[2] = {M, C};
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F32, 2, vs, &a->values);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_I32, 2, vs, &a->indices);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F32, 2, bs, b);
    if (st != NX_OK)
        return st;
    a->n_cols = M;
    a->identity = NAN;
    uint64_t s = 20261129;
    float *v = nx_tensor_data(a->values), *bv = nx_tensor_data(*b);
    int32_t *ix = nx_tensor_data(a->indices);
    for (int64_t i = 0; i < (int64_t)M * K; i++) {
        v[i] = (float)((double)lcg(&s) / 4503599627370496.0 - 1.0);
        ix[i] = (int32_t)(lcg(&s) % M);
    }
    for (int64_t i = 0; i < (int64_t)M * C; i++)
        bv[i] = (float)((double)lcg(&s) / 4503599627370496.0 - 1.0);
    return NX_OK;
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

static nx_status run_row(nx_ctx *ctx, const sparse_row *r, const nx_ell *a, const nx_tensor *b,
                         int runs, bool json, FILE *f)
{
    nx_bench_row row;
    nx_bench_set_row(&row, r->name, "m=65536 k=32 c=32");
    const nx_semiring *sr = nx_semiring_builtin(r->kind);
    nx_semiring_opts o = {.backend = NX_BACKEND_CPU};
    nx_tensor *y = NULL;
    nx_status st = nx_semiring_ell_matmul(ctx, sr, a, b, &o, &y);
    nx_tensor_free(y);
    double *t = calloc((size_t)runs, sizeof(double));
    if (!t)
        return NX_ERR_NOMEM;
    for (int i = 0; st == NX_OK && i < runs; i++) {
        double t0 = nx_bench_now();
        y = NULL;
        st = nx_semiring_ell_matmul(ctx, sr, a, b, &o, &y);
        t[i] = nx_bench_now() - t0;
        nx_tensor_free(y);
    }
    if (st == NX_OK) {
        fill_stats(&row, t, runs);
        double events = (double)M * K * C;
        double bytes = (double)M * K * (4 + 4 + C * 4) + (double)M * C * 4;
        double bw = nx_bench_memcpy_rate((size_t)M * C * 4 * 8);
        row.floor_s = bw > 0 ? bytes / bw : 0;
        snprintf(row.peer, sizeof row.peer, "numpy gather+reduce (peers-sparse.py)");
        snprintf(row.note, sizeof row.note,
                 "%.2f G events/s; %.1f MB moved, %.2f GB/s effective; floor at memcpy %.1f GB/s",
                 events / row.median_s / 1e9, bytes / 1e6, bytes / row.median_s / 1e9, bw / 1e9);
        nx_bench_print_row(&row, json, f);
    }
    free(t);
    return st;
}

nx_status nx_bench_sparse(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f)
{
    static const sparse_row rows[] = {
        {"sparse_ell_matmul_real", NX_SEMIRING_REAL},
        {"sparse_ell_matmul_log", NX_SEMIRING_LOG},
        {"sparse_ell_matmul_tropical", NX_SEMIRING_TROPICAL_MAX_PLUS},
    };
    bool any = false;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        any = any || nx_bench_wanted(filter, rows[i].name);
    if (!any || runs < 1)
        return NX_OK;
    nx_ell a = {0};
    nx_tensor *b = NULL;
    nx_status st = make_inputs(ctx, &a, &b);
    for (size_t i = 0; st == NX_OK && i < sizeof rows / sizeof rows[0]; i++)
        if (nx_bench_wanted(filter, rows[i].name))
            st = run_row(ctx, &rows[i], &a, b, runs, json, f);
    nx_ell_free(&a);
    nx_tensor_free(b);
    return st;
}
