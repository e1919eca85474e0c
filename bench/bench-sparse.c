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
 * synchronises before it returns, so the figure is the contraction with the index range flag
 * folded into its program, the launches and the flag's 4-byte read-back, without host<->device
 * copies of the operands. Their GPU peers are `peers-sparse.py --gpu` (torch gather +
 * sum/amax/logsumexp). The sparse_split_* rows then time the parts of a 4096-row call alone (see
 * split_rows); `nitrix bench sparse_split` runs them on a host backend too. */
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

/* ---- the H200 breakdown of a 4096-row call (rows sparse_split_*) ------------------------------
 * What a call of the m = 4096 rows is made of, each part timed alone on the same device tensors
 * through programs compiled here with the public graph API (cuda backend): an empty launch and
 * sync, a 4-byte read-back, the range check program with its read-back (what each call ran
 * before the check was folded), the contraction program alone (the kernel plus one launch and
 * sync), the contraction with the folded flag and its read-back (the entry point's program now),
 * the old sequence (check, read-back, contraction), and 8 contractions in one program, whose
 * extra time over one is 7 back-to-back kernels: the kernel's own time when that exceeds the
 * launch cost, else the launch cost. */

#define SPLIT_X 8

typedef struct split {
    nx_ctx *ctx;
    nx_ell a;
    nx_tensor *b, *one; /* B [m, c]; a 1-element f32 */
    nx_tensor *vals[SPLIT_X];
    nx_tensor *flag; /* a 0-d i32 on the device */
    nx_program *progs[8];
    int nprog;
} split;

typedef nx_status (*split_fn)(split *s, int which);

static nx_node split_flag(nx_graph *g, nx_node idx, int64_t n_cols)
{
    nx_node q = nx_cast(g, idx, NX_DTYPE_I64);
    nx_node bad = nx_or(g, nx_lt(g, q, nx_scalar(g, NX_DTYPE_I64, 0)),
                        nx_ge(g, q, nx_scalar(g, NX_DTYPE_I64, (double)n_cols)));
    int axes[2] = {0, 1};
    return nx_reduce(g, nx_cast(g, bad, NX_DTYPE_I32), 2, axes, NX_MONOID_MAX, false);
}

static nx_node in_like(nx_graph *g, const nx_tensor *t)
{
    return nx_input(g, NULL, nx_tensor_dtype(t), nx_tensor_ndim(t), nx_tensor_shape(t));
}

/* Program kinds: 0 x + 1 on one element; 1 the range flag; 2 the contraction; 3 contraction and
 * flag; 4 SPLIT_X contractions over SPLIT_X value tensors. Inputs in creation order. */
static nx_status split_compile(split *s, int kind, nx_semiring_kind sk, nx_program **out)
{
    nx_graph *g = NULL;
    nx_status st = nx_graph_new(s->ctx, &g);
    if (st != NX_OK)
        return st;
    nx_node outs[SPLIT_X];
    int n = 1;
    const nx_semiring *sr = nx_semiring_builtin(sk);
    if (kind == 0) {
        nx_node x = in_like(g, s->one);
        outs[0] = nx_add(g, x, nx_scalar(g, NX_DTYPE_F32, 1.0));
    } else if (kind == 1) {
        outs[0] = split_flag(g, in_like(g, s->a.indices), s->a.n_cols);
    } else if (kind <= 3) {
        nx_node v = in_like(g, s->a.values), idx = in_like(g, s->a.indices), b = in_like(g, s->b);
        outs[0] = nx_ell_matmul_node(g, sr, v, idx, b);
        if (kind == 3)
            outs[n++] = split_flag(g, idx, s->a.n_cols);
    } else {
        nx_node idx = in_like(g, s->a.indices), b = in_like(g, s->b);
        for (n = 0; n < SPLIT_X; n++)
            outs[n] = nx_ell_matmul_node(g, sr, in_like(g, s->vals[n]), idx, b);
    }
    nx_compile_opts o = {.backend = nx_ctx_backend(s->ctx), .n_outputs = n, .outputs = outs};
    st = nx_graph_status(g);
    if (st == NX_OK)
        st = nx_graph_compile(g, &o, out);
    nx_graph_free(g);
    return st;
}

static nx_status read_flag(const nx_tensor *flag, int32_t *v)
{
    nx_tensor *h = NULL;
    nx_status st = nx_tensor_to_device(flag, NX_DEVICE_HOST, &h);
    if (st == NX_OK)
        *v = *(const int32_t *)nx_tensor_data(h);
    nx_tensor_free(h);
    return st;
}

/* One call of part `which` (an index into s->progs, or -1: the read-back alone). */
static nx_status split_call(split *s, int which)
{
    if (which < 0) {
        int32_t v;
        return read_flag(s->flag, &v);
    }
    nx_program *p = s->progs[which];
    int nin = nx_program_num_inputs(p), nout = nx_program_num_outputs(p);
    const nx_tensor *in[SPLIT_X + 2];
    if (nin == 1)
        in[0] = which == 0 ? s->one : s->a.indices;
    else if (nin == 3)
        in[0] = s->a.values, in[1] = s->a.indices, in[2] = s->b;
    else {
        in[0] = s->a.indices, in[1] = s->b;
        for (int i = 0; i < SPLIT_X; i++)
            in[2 + i] = s->vals[i];
    }
    nx_tensor *outs[SPLIT_X] = {NULL};
    nx_status st = nx_program_run(p, in, outs);
    int32_t v = 0;
    if (st == NX_OK && nout == 2)
        st = read_flag(outs[1], &v);
    if (st == NX_OK && nin == 1 && nout == 1 && nx_tensor_dtype(outs[0]) == NX_DTYPE_I32)
        st = read_flag(outs[0], &v);
    for (int i = 0; i < nout; i++)
        nx_tensor_free(outs[i]);
    return st == NX_OK && v > 0 ? NX_ERR_INTERNAL : st;
}

/* The old sequence: the check program and its read-back, then the contraction. */
static nx_status split_old(split *s, int which)
{
    nx_status st = split_call(s, 1);
    return st == NX_OK ? split_call(s, which) : st;
}

static nx_status split_time(split *s, split_fn fn, int which, int runs, double *med, double *lo,
                            double *hi)
{
    nx_status st = fn(s, which);
    double t[256];
    runs = runs > 256 ? 256 : runs;
    for (int i = 0; st == NX_OK && i < runs; i++) {
        double t0 = nx_bench_now();
        st = fn(s, which);
        t[i] = nx_bench_now() - t0;
    }
    if (st != NX_OK)
        return st;
    *med = nx_bench_median(t, runs); /* sorted: the spread is the ends */
    *lo = t[0], *hi = t[runs - 1];
    return NX_OK;
}

static void split_print(nx_ctx *ctx, const char *name, double med, double lo, double hi, int runs,
                        const char *note, bool json, FILE *f)
{
    nx_bench_row row;
    nx_bench_set_row(&row, name, "m=4096 k=32 c=32");
    snprintf(row.backend, sizeof row.backend, "%s", nx_backend_name(nx_ctx_backend(ctx)));
    row.median_s = med, row.min_s = lo, row.max_s = hi, row.runs = runs;
    snprintf(row.note, sizeof row.note, "%s", note);
    nx_bench_print_row(&row, json, f);
}

static void split_free(split *s)
{
    for (int i = 0; i < s->nprog; i++)
        nx_program_free(s->progs[i]);
    for (int i = 0; i < SPLIT_X; i++)
        nx_tensor_free(s->vals[i]);
    nx_tensor_free(s->one), nx_tensor_free(s->flag), nx_tensor_free(s->b);
    nx_ell_free(&s->a);
}

static nx_status split_setup(nx_ctx *ctx, split *s)
{
    *s = (split){.ctx = ctx};
    nx_status st = make_inputs(ctx, 4096, K, C, &s->a, &s->b);
    int64_t one = 1;
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F32, 1, &one, &s->one);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_I32, 0, NULL, &s->flag);
    for (int i = 0; st == NX_OK && i < SPLIT_X; i++)
        st = nx_tensor_to_device(
            s->a.values, nx_ctx_backend(ctx) == NX_BACKEND_CUDA ? NX_DEVICE_CUDA : NX_DEVICE_HOST,
            &s->vals[i]);
    nx_tensor **up[5] = {&s->a.values, &s->a.indices, &s->b, &s->one, &s->flag};
    for (int i = 0; st == NX_OK && nx_ctx_backend(ctx) == NX_BACKEND_CUDA && i < 5; i++)
        st = upload(up[i]);
    /* progs: 0 launch, 1 check, 2-4 contraction REAL/max-plus/LOG, 5 contraction+flag REAL,
     * 6 contraction+flag LOG, 7 eight contractions REAL */
    static const int kinds[8] = {0, 1, 2, 2, 2, 3, 3, 4};
    static const nx_semiring_kind sks[8] = {
        NX_SEMIRING_REAL, NX_SEMIRING_REAL, NX_SEMIRING_REAL, NX_SEMIRING_TROPICAL_MAX_PLUS,
        NX_SEMIRING_LOG,  NX_SEMIRING_REAL, NX_SEMIRING_LOG,  NX_SEMIRING_REAL};
    for (; st == NX_OK && s->nprog < 8; s->nprog++)
        st = split_compile(s, kinds[s->nprog], sks[s->nprog], &s->progs[s->nprog]);
    return st;
}

static nx_status split_rows(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f)
{
    static const struct {
        const char *name;
        split_fn fn;
        int which;
        const char *note;
    } parts[] = {
        {"sparse_split_launch_sync", split_call, 0, "one 1-element kernel: launch + sync floor"},
        {"sparse_split_read4", split_call, -1, "4-byte device->host read of a 0-d flag"},
        {"sparse_split_check", split_call, 1, "range check program + 4-byte read (old, per call)"},
        {"sparse_split_contract_real", split_call, 2, "contraction program alone, no check"},
        {"sparse_split_contract_maxplus", split_call, 3, "contraction program alone, no check"},
        {"sparse_split_contract_log", split_call, 4, "contraction program alone, no check"},
        {"sparse_split_fold_real", split_call, 5, "contraction + range flag, 4-byte read (new)"},
        {"sparse_split_fold_log", split_call, 6, "contraction + range flag, 4-byte read (new)"},
        {"sparse_split_old_real", split_old, 2, "check + read, then contraction (the old call)"},
        {"sparse_split_old_log", split_old, 4, "check + read, then contraction (the old call)"},
        {"sparse_split_x8_real", split_call, 7, "8 contractions in one program (8 kernels)"},
    };
    bool any = false;
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        any = any || nx_bench_wanted(filter, parts[i].name);
    if (!any)
        return NX_OK;
    split s;
    nx_status st = split_setup(ctx, &s);
    double one_real = 0;
    for (size_t i = 0; st == NX_OK && i < sizeof parts / sizeof *parts; i++) {
        double med, lo, hi;
        bool wanted = nx_bench_wanted(filter, parts[i].name);
        if (!wanted && !(parts[i].which == 2 && parts[i].fn == split_call)) /* x8 needs it */
            continue;
        st = split_time(&s, parts[i].fn, parts[i].which, runs, &med, &lo, &hi);
        if (st != NX_OK)
            break;
        char note[160];
        if (parts[i].which == 2 && parts[i].fn == split_call)
            one_real = med;
        if (parts[i].which == 7)
            snprintf(note, sizeof note, "%s; per extra kernel (T8 - T1) / 7 = %.2f us",
                     parts[i].note, (med - one_real) / 7 * 1e6);
        else
            snprintf(note, sizeof note, "%s", parts[i].note);
        if (wanted)
            split_print(ctx, parts[i].name, med, lo, hi, runs, note, json, f);
    }
    split_free(&s);
    return st;
}

/* A call takes microseconds to a millisecond here, so the rows take at least 20 timed calls (as
 * the torch peers do) whatever --runs asks. */
static nx_status gpu_rows(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f)
{
    runs = runs < 20 ? 20 : runs;
    static const gpu_row rows[] = {
        {"semiring_ell_matmul_real_4096", NX_SEMIRING_REAL, 4096, 32, 32, 50e-6},
        {"semiring_ell_matmul_maxplus_4096", NX_SEMIRING_TROPICAL_MAX_PLUS, 4096, 32, 32, 50e-6},
        {"semiring_ell_matmul_log_4096", NX_SEMIRING_LOG, 4096, 32, 32, 50e-6},
        {"semiring_ell_matmul_real_1m", NX_SEMIRING_REAL, 1000000, 16, 64, 1.5e-3},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (!nx_bench_wanted(filter, rows[i].name))
            continue;
        nx_status st = run_gpu_row(ctx, &rows[i], runs, json, f);
        if (st != NX_OK)
            return st;
    }
    return split_rows(ctx, filter, runs < 50 ? 50 : runs, json, f);
}

nx_status nx_bench_sparse(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f)
{
    static const sparse_row rows[] = {
        {"semiring_ell_matmul_real", NX_SEMIRING_REAL},
        {"semiring_ell_matmul_log", NX_SEMIRING_LOG},
        {"semiring_ell_matmul_tropical", NX_SEMIRING_TROPICAL_MAX_PLUS},
    };
    if (runs < 1)
        return NX_OK;
    if (nx_ctx_backend(ctx) == NX_BACKEND_CUDA)
        return gpu_rows(ctx, filter, runs, json, f);
    if (filter && strstr(filter, "sparse_split")) /* the breakdown on the host: asked by name */
        return split_rows(ctx, filter, runs, json, f);
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
