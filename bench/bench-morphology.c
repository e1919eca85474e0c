/* `nitrix bench` rows of the morphology family (bench.h): the CPU workloads on the
 * inputs bench/peers-morphology.py gives scipy.ndimage (same shapes, same densities). Each row
 * times the tensor entry point after one warm-up call (which compiles and caches the program),
 * so the figure is the steady-state cost of a call. Peers are run by hand in the same session:
 *     /usr/bin/python3 bench/peers-morphology.py
 * The floor of each row is the memory traffic it cannot avoid (one read of the input and one
 * write of the output) at this machine's memcpy rate, measured in the same run.
 *
 * Under NITRIX_BACKEND=cuda the graph rows (dilation, median, pool) are the H200 ones: each
 * uploads its input once with nx_tensor_to_device, warms up, and times the entry point on the
 * device tensor, whose output stays on the device; the plan run synchronises before it returns,
 * so the figure is the device work plus the launch, without host<->device copies. The label row
 * on a device mask runs the label-propagation driver there (its runs read one flag each); the
 * EDT row's device mask runs the fast driver's device chain (per-axis extern passes). GPU peers:
 *     python3 bench/peers-morphology.py --gpu     (PyTorch max_pool3d, on the device machine) */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "nitrix-ops.h"

typedef nx_status (*morph_call_fn)(nx_ctx *ctx, const nx_tensor *x, nx_tensor **out);

static nx_status call_dilate(nx_ctx *ctx, const nx_tensor *x, nx_tensor **out)
{
    nx_morph_opts o = {.size = {3, 3, 3}};
    return nx_morph(ctx, NX_MORPH_DILATE, x, &o, out);
}

/* The window-size rows: the extent of the cubic box, set by run_row before each call. */
static int64_t row_w = 3;

static nx_status call_dilate_w(nx_ctx *ctx, const nx_tensor *x, nx_tensor **out)
{
    nx_morph_opts o = {.size = {row_w, row_w, row_w}};
    return nx_dilate(ctx, x, &o, out);
}

static nx_status call_median_w(nx_ctx *ctx, const nx_tensor *x, nx_tensor **out)
{
    nx_morph_opts o = {.size = {row_w, row_w, row_w}};
    return nx_median_filter(ctx, x, &o, out);
}

static nx_status call_edt(nx_ctx *ctx, const nx_tensor *x, nx_tensor **out)
{
    nx_edt_opts o = {.driver = getenv("NITRIX_BENCH_EDT_DRIVER")};
    return nx_distance_transform_edt(ctx, x, &o, out);
}

static nx_status call_median(nx_ctx *ctx, const nx_tensor *x, nx_tensor **out)
{
    nx_morph_opts o = {.size = {3, 3, 3}};
    return nx_median_filter(ctx, x, &o, out);
}

static nx_status call_pool(nx_ctx *ctx, const nx_tensor *x, nx_tensor **out)
{
    nx_pool_opts o = {.nspatial = 3, .kernel = {2, 2, 2}};
    nx_tensor *idx = NULL;
    nx_status st = nx_max_pool_with_indices_nd(ctx, x, &o, out, &idx);
    nx_tensor_free(idx);
    return st;
}

static nx_status call_label(nx_ctx *ctx, const nx_tensor *x, nx_tensor **out)
{
    return nx_connected_components(ctx, x, 1, out, NULL);
}

/* A deterministic pseudo-random input: uniform values, or a mask that is 1 with probability p
 * (an LCG, so the bench needs no library RNG and the peer can use any seed of equal density). */
static nx_status make_input(nx_ctx *ctx, int n, int64_t c, double p_one, nx_tensor **out)
{
    int64_t shape[4] = {n, n, n, c};
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F32, c ? 4 : 3, shape, out);
    if (st != NX_OK)
        return st;
    float *d = nx_tensor_data(*out);
    uint64_t s = 20261129;
    for (int64_t i = 0; i < nx_tensor_numel(*out); i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        double u = (double)(s >> 11) / 9007199254740992.0;
        d[i] = p_one < 0 ? (float)u : (float)(u < p_one);
    }
    return NX_OK;
}

/* CPU seconds of the process (all threads): on a loaded machine the wall clock includes time
 * spent waiting for a core, this does not. */
static double process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct morph_row {
    const char *name, *shape, *peer;
    double peer_s; /* the scipy figure on this kind of machine (the in-session peer
                      is bench/peers-morphology.py's) */
    int n;
    int64_t c;
    double p_one; /* < 0: uniform values */
    morph_call_fn call;
    double out_bytes_per_voxel;
    bool device; /* a graph op: runs on device tensors under the cuda backend */
    int64_t w;   /* window rows: the box's extent (the note gives the first call's time) */
} morph_row;

static nx_status run_row(nx_ctx *ctx, const morph_row *r, int runs, bool json, FILE *f)
{
    nx_bench_row row;
    nx_bench_set_row(&row, r->name, r->shape);
    nx_tensor *x = NULL, *y = NULL;
    bool cuda = nx_ctx_backend(ctx) == NX_BACKEND_CUDA, on_device = cuda && r->device;
    nx_status st = make_input(ctx, r->n, r->c, r->p_one, &x);
    if (st == NX_OK && on_device) {
        nx_tensor *d = NULL;
        st = nx_tensor_to_device(x, NX_DEVICE_CUDA, &d);
        nx_tensor_free(x);
        x = d;
    }
    row_w = r->w ? r->w : 3;
    double first_s = nx_bench_now();
    if (st == NX_OK)
        st = r->call(ctx, x, &y); /* warm-up: compiles and caches */
    first_s = nx_bench_now() - first_s;
    nx_tensor_free(y);
    double *t = calloc((size_t)runs * 2, sizeof(double)), *cpu = t ? t + runs : NULL;
    for (int i = 0; st == NX_OK && t && i < runs; i++) {
        double c0 = process_cpu_s(), t0 = nx_bench_now();
        y = NULL;
        st = r->call(ctx, x, &y);
        t[i] = nx_bench_now() - t0;
        cpu[i] = process_cpu_s() - c0;
        nx_tensor_free(y);
    }
    if (st == NX_OK && t) {
        row.runs = runs;
        row.min_s = row.max_s = t[0];
        for (int i = 1; i < runs; i++) {
            row.min_s = t[i] < row.min_s ? t[i] : row.min_s;
            row.max_s = t[i] > row.max_s ? t[i] : row.max_s;
        }
        row.median_s = nx_bench_median(t, runs);
        double cpu_s = nx_bench_median(cpu, runs);
        size_t in_bytes = (size_t)nx_tensor_numel(x) * 4;
        double moved = (double)in_bytes * (1.0 + r->out_bytes_per_voxel / 4.0);
        snprintf(row.peer, sizeof row.peer, "%s", r->peer);
        row.peer_median_s = r->peer_s;
        if (on_device) {
            /* H200 HBM3e: 4.8 TB/s nominal */
            row.floor_s = moved / 4.8e12;
            snprintf(row.backend, sizeof row.backend, "cuda");
            snprintf(row.note, sizeof row.note,
                     "device tensor in and out, sync included, no copies; host cpu %.4f s; "
                     "floor: in+out at 4.8 TB/s; GPU peer: peers-morphology.py --gpu",
                     cpu_s);
        } else {
            double bw = nx_bench_memcpy_rate(in_bytes);
            row.floor_s = bw > 0 ? moved / bw : 0;
            if (cuda)
                snprintf(row.note, sizeof row.note,
                         "host op (mask and result on the host; no device path); cpu time %.4f s "
                         "(all threads); floor: in+out at memcpy %.1f GB/s",
                         cpu_s, bw / 1e9);
            else if (r->w)
                snprintf(row.note, sizeof row.note,
                         "first call (compile + run; empty NITRIX_CACHE_DIR for a cold compile) "
                         "%.3f s; cpu time %.4f s; peer: bench/peers-morphology.py",
                         first_s, cpu_s);
            else
                snprintf(row.note, sizeof row.note,
                         "cpu time %.4f s (all threads); peer: the issue's figure, run "
                         "bench/peers-morphology.py; floor: in+out at memcpy %.1f GB/s",
                         cpu_s, bw / 1e9);
        }
        nx_bench_print_row(&row, json, f);
    }
    free(t);
    nx_tensor_free(x);
    return st;
}

/* Call overhead (issue 26): dilate (size 3) on an 8^3 f32 array, cache warm, through nx_op_call
 * by name with its options as text (the path the Python package takes) and through the typed
 * entry point. Each run times a batch of calls; the row gives the median time of one call. The
 * Python figure is bench/python-overhead.py's, run in the same session. */
#define OVERHEAD_BATCH 2000

static nx_status call_dilate_8_text(nx_ctx *ctx, const nx_tensor *x, nx_tensor **out)
{
    const char *keys[] = {"size"}, *vals[] = {"3"};
    return nx_op_call(ctx, "dilate", 1, (const nx_tensor *const[]){x}, 1, keys, vals, 1, out);
}

static nx_status call_dilate_8_typed(nx_ctx *ctx, const nx_tensor *x, nx_tensor **out)
{
    nx_morph_opts o = {.size = {3, 3, 3}};
    return nx_dilate(ctx, x, &o, out);
}

static nx_status overhead_row(nx_ctx *ctx, const char *name, morph_call_fn call, int runs,
                              bool json, FILE *f)
{
    nx_bench_row row;
    nx_bench_set_row(&row, name, "[8,8,8]");
    nx_tensor *x = NULL, *y = NULL;
    nx_status st = make_input(ctx, 8, 0, -1, &x);
    if (st == NX_OK)
        st = call(ctx, x, &y); /* warm-up: compiles and caches */
    nx_tensor_free(y);
    double *t = calloc((size_t)runs * 2, sizeof(double)), *cpu = t ? t + runs : NULL;
    for (int i = 0; st == NX_OK && t && i < runs; i++) {
        struct timespec c0, c1;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
        double t0 = nx_bench_now();
        for (int k = 0; st == NX_OK && k < OVERHEAD_BATCH; k++) {
            y = NULL;
            st = call(ctx, x, &y);
            nx_tensor_free(y);
        }
        t[i] = (nx_bench_now() - t0) / OVERHEAD_BATCH;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
        cpu[i] = ((double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec)) /
                 OVERHEAD_BATCH;
    }
    if (st == NX_OK && t) {
        row.runs = runs;
        row.min_s = row.max_s = t[0];
        for (int i = 1; i < runs; i++) {
            row.min_s = t[i] < row.min_s ? t[i] : row.min_s;
            row.max_s = t[i] > row.max_s ? t[i] : row.max_s;
        }
        row.median_s = nx_bench_median(t, runs);
        double cpu_s = nx_bench_median(cpu, runs);
        snprintf(row.note, sizeof row.note,
                 "one call, cache warm, mean of %d per run; calling thread's cpu %.2f us "
                 "(NITRIX_NUM_THREADS=1: all of it); Python: bench/python-overhead.py",
                 OVERHEAD_BATCH, cpu_s * 1e6);
        nx_bench_print_row(&row, json, f);
    }
    free(t);
    nx_tensor_free(x);
    return st;
}

nx_status nx_bench_morphology(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f)
{
    if (nx_bench_wanted(filter, "dilate_8x8x8_op_call")) {
        nx_status st = overhead_row(ctx, "dilate_8x8x8_op_call", call_dilate_8_text, runs, json,
                                    f);
        if (st == NX_OK)
            st = overhead_row(ctx, "dilate_8x8x8_entry", call_dilate_8_typed, runs, json, f);
        if (st != NX_OK)
            return st;
    }
    static const morph_row rows[] = {
        {"dilate_3x3x3", "[256,256,256]", "scipy grey_dilation (issue)", 0.645, 256, 0, -1,
         call_dilate, 4, true, 0},
        {"distance_transform_edt", "[256,256,256]", "scipy distance_transform_edt (issue)", 3.1,
         256, 0, 0.99, call_edt, 4, true, 0},
        {"median_filter_3x3x3", "[128,128,128]", "scipy median_filter (issue)", 0.79, 128, 0, -1,
         call_median, 4, true, 0},
        {"connected_components", "[128,128,128]", "scipy label (issue)", 0.019, 128, 0, 0.5,
         call_label, 4, true, 0},
        {"max_pool_with_indices_nd_2x2x2", "[128,128,128,4]", "", 0, 128, 4, -1, call_pool, 0.375,
         true, 0},
        /* Window sizes (issue 27): compile and run time against the box's extent. */
        {"dilate_w3", "[128,128,128]", "", 0, 128, 0, -1, call_dilate_w, 4, true, 3},
        {"dilate_w9", "[128,128,128]", "", 0, 128, 0, -1, call_dilate_w, 4, true, 9},
        {"dilate_w21", "[128,128,128]", "", 0, 128, 0, -1, call_dilate_w, 4, true, 21},
        {"dilate_w41", "[128,128,128]", "", 0, 128, 0, -1, call_dilate_w, 4, true, 41},
        {"median_filter_w3", "[128,128,128]", "", 0, 128, 0, -1, call_median_w, 4, true, 3},
        {"median_filter_w9", "[128,128,128]", "", 0, 128, 0, -1, call_median_w, 4, true, 9},
        {"median_filter_w21", "[128,128,128]", "", 0, 128, 0, -1, call_median_w, 4, true, 21},
        {"median_filter_w41", "[128,128,128]", "", 0, 128, 0, -1, call_median_w, 4, true, 41},
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
