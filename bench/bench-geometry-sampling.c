/* `nitrix bench` rows of the geometry family's sampling (bench.h), the workloads:
 *   spatial_transform_linear_256        linear, 256^3 f32 image (one channel), mode constant;
 *   spatial_transform_linear_grad_256   the same call, then nx_op_vjp of it (the gradients of
 *                                       the image, a scatter-add, and of the deformation);
 *   spatial_transform_cubic_128         cubic_bspline, 128^3 f64, the mirror prefilter included
 *                                       (driver auto: sequential on the cpu);
 *   integrate_velocity_field_128        128^3 f32, 7 squarings, mode nearest (no peer here: the
 *                                       issue's peer is SimpleITK, not in the pinned venv).
 * The deformation is identity + a smooth random displacement, u_a(x) = A sum_j sin(2 pi k_aj.x / n
 * + phi_aj) over three low frequencies per axis (A = 1 voxel, about 3 voxels at most), the same
 * formula as bench/peers-geometry-sampling.py (scipy.ndimage.map_coordinates order 1 and 3 on the same
 * images, run by hand in the same session:  V/bin/python bench/peers-geometry-sampling.py).
 * Each row times calls through the op table after one warm-up call that compiles and caches.
 * The floor is memory traffic at this machine's memcpy rate measured in the same run: the image
 * and the deformation read once and the result written once (the cubic row: the prefilter's
 * passes read and write the volume twice per axis besides); the note gives the process CPU time.
 *
 * Under NITRIX_BACKEND=cuda the rows run on the device: inputs are uploaded once with
 * nx_tensor_to_device, one warm-up call compiles, and each timed call takes and returns device
 * tensors (the program run synchronises before returning), so the figures exclude host-device
 * copies; the floor is then the H200's 4.8 TB/s HBM for the same bytes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "nitrix-op.h"

#define H200_BYTES_PER_S 4.8e12

typedef struct geo_row {
    const char *name, *op, *method, *peer;
    int n;
    nx_dtype dt;
    int kind;       /* 0 value, 1 value + vjp, 2 integrate */
    double volumes; /* volumes of the image's dtype the floor moves */
} geo_row;

static double process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void put(nx_tensor *t, int64_t i, double v)
{
    if (nx_tensor_dtype(t) == NX_DTYPE_F64)
        ((double *)nx_tensor_data(t))[i] = v;
    else
        ((float *)nx_tensor_data(t))[i] = (float)v;
}

/* The smooth displacement of bench/peers-geometry-sampling.py: u_a(x) = sum_j sin(2 pi (k . x) / n + phi)
 * with k = (a + j + 1, 2 j + 1, 3 - j) rotated per axis and phi = 0.7 a + 1.3 j. */
static double disp(int a, const int64_t *x, int n)
{
    double s = 0;
    for (int j = 0; j < 3; j++) {
        double k[3] = {a + j + 1, 2 * j + 1, 3 - j};
        double arg = (k[a % 3] * (double)x[0] + k[(a + 1) % 3] * (double)x[1] +
                      k[(a + 2) % 3] * (double)x[2]) * 2.0 * M_PI / n;
        s += sin(arg + 0.7 * a + 1.3 * j);
    }
    return s;
}

/* image: uniform [0, 1) (LCG), deformation: identity + disp (kind 2: v = disp, the velocity). */
static nx_status make_inputs(nx_ctx *ctx, const geo_row *r, nx_tensor **img, nx_tensor **def)
{
    int n = r->n;
    int64_t is[4] = {n, n, n, 1}, ds[4] = {n, n, n, 3};
    nx_status st = r->kind == 2 ? NX_OK : nx_tensor_new(ctx, r->dt, 4, is, img);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, r->dt, 4, ds, def);
    if (st != NX_OK)
        return st;
    uint64_t s = 20261207;
    for (int64_t i = 0; r->kind != 2 && i < nx_tensor_numel(*img); i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        put(*img, i, (double)(s >> 11) / 9007199254740992.0);
    }
    int64_t x[3];
    for (x[0] = 0; x[0] < n; x[0]++)
        for (x[1] = 0; x[1] < n; x[1]++)
            for (x[2] = 0; x[2] < n; x[2]++) {
                int64_t p = ((x[0] * n) + x[1]) * n + x[2];
                for (int a = 0; a < 3; a++)
                    put(*def, 3 * p + a, (r->kind == 2 ? 0.0 : (double)x[a]) + disp(a, x, n));
            }
    return NX_OK;
}

static nx_status place(nx_ctx *ctx, nx_tensor **x)
{
    if (!*x || nx_ctx_backend(ctx) != NX_BACKEND_CUDA)
        return NX_OK;
    nx_tensor *d = NULL;
    nx_status st = nx_tensor_to_device(*x, NX_DEVICE_CUDA, &d);
    nx_tensor_free(*x);
    *x = d;
    return st;
}

static nx_status call(nx_ctx *ctx, const geo_row *r, nx_tensor *img, nx_tensor *def,
                      nx_tensor *dy)
{
    nx_tensor *y = NULL, *dx[2] = {0};
    nx_status st;
    if (r->kind == 2) {
        const char *k[1] = {"n_steps"}, *v[1] = {"7"};
        st = nx_op_call(ctx, r->op, 1, (const nx_tensor *const[]){def}, 1, k, v, 1, &y);
    } else {
        const char *k[2] = {"method", "mode"}, *v[2] = {r->method, "constant"};
        const nx_tensor *in[2] = {img, def};
        st = nx_op_call(ctx, r->op, 2, in, 2, k, v, 1, &y);
        if (st == NX_OK && r->kind == 1)
            st = nx_op_vjp(ctx, r->op, 2, in, 2, k, v, 1, (const nx_tensor *const[]){dy}, dx);
    }
    nx_tensor_free(y);
    nx_tensor_free(dx[0]);
    nx_tensor_free(dx[1]);
    return st;
}

static nx_status run_row(nx_ctx *ctx, const geo_row *r, int runs, bool json, FILE *f)
{
    nx_bench_row row;
    char shape[40];
    snprintf(shape, sizeof shape, "[%d,%d,%d]", r->n, r->n, r->n);
    nx_bench_set_row(&row, r->name, shape);
    snprintf(row.dtype, sizeof row.dtype, "%s", r->dt == NX_DTYPE_F64 ? "f64" : "f32");
    nx_tensor *img = NULL, *def = NULL, *dy = NULL;
    nx_status st = make_inputs(ctx, r, &img, &def);
    if (st == NX_OK && r->kind == 1) {
        int64_t ys[4] = {r->n, r->n, r->n, 1};
        st = nx_tensor_new(ctx, r->dt, 4, ys, &dy);
        for (int64_t i = 0; st == NX_OK && i < nx_tensor_numel(dy); i++)
            put(dy, i, 1.0);
    }
    if (st == NX_OK)
        st = place(ctx, &img);
    if (st == NX_OK)
        st = place(ctx, &def);
    if (st == NX_OK)
        st = place(ctx, &dy);
    if (st == NX_OK)
        st = call(ctx, r, img, def, dy); /* warm-up: compiles and caches */
    double *t = calloc((size_t)runs * 2, sizeof(double)), *cpu = t ? t + runs : NULL;
    for (int i = 0; st == NX_OK && t && i < runs; i++) {
        double c0 = process_cpu_s(), t0 = nx_bench_now();
        st = call(ctx, r, img, def, dy);
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
        size_t vol = (size_t)r->n * r->n * r->n * (r->dt == NX_DTYPE_F64 ? 8 : 4);
        bool gpu = nx_ctx_backend(ctx) == NX_BACKEND_CUDA;
        if (gpu) {
            snprintf(row.backend, sizeof row.backend, "cuda");
            row.floor_s = r->volumes * (double)vol / H200_BYTES_PER_S;
            snprintf(row.peer, sizeof row.peer, "torch grid_sample (issue: 1.04 ms)");
            snprintf(row.note, sizeof row.note,
                     "device tensors in and out, sync included, no copies; H200 floor HBM "
                     "%.3f ms (%.0f volumes)",
                     row.floor_s * 1e3, r->volumes);
        } else {
            double bw = nx_bench_memcpy_rate(vol);
            row.floor_s = bw > 0 ? r->volumes * (double)vol / (2.0 * bw) : 0;
            snprintf(row.peer, sizeof row.peer, "%s", r->peer);
            snprintf(row.note, sizeof row.note,
                     "cpu time %.4f s; floor %.0f volumes at memcpy %.1f GB/s; peer: "
                     "bench/peers-geometry-sampling.py",
                     nx_bench_median(cpu, runs), r->volumes, bw / 1e9);
        }
        nx_bench_print_row(&row, json, f);
    }
    free(t);
    nx_tensor_free(img);
    nx_tensor_free(def);
    nx_tensor_free(dy);
    return st;
}

nx_status nx_bench_geometry_sampling(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f)
{
    /* floor volumes: image 1 + deformation 3 + output 1; the vjp adds dy 1, the image gradient
     * 1 and the deformation's 3 (and reads both inputs again: 4); cubic adds the prefilter's 3
     * axes x 2 passes x (read + write); integrate: 7 squarings of a 3-component field, each
     * reading it twice (as points and as the sampled field) and writing it once */
    static const geo_row rows[] = {
        {"spatial_transform_linear_256", "spatial_transform", "linear",
         "scipy map_coordinates order=1", 256, NX_DTYPE_F32, 0, 5.0},
        {"spatial_transform_linear_grad_256", "spatial_transform", "linear",
         "scipy map_coordinates order=1 (fwd)", 256, NX_DTYPE_F32, 1, 14.0},
        {"spatial_transform_cubic_128", "spatial_transform", "cubic_bspline",
         "scipy map_coordinates order=3", 128, NX_DTYPE_F64, 0, 17.0},
        {"integrate_velocity_field_128", "integrate_velocity_field", "linear",
         "SimpleITK (not run here)", 128, NX_DTYPE_F32, 2, 63.0},
    };
    nx_status st = NX_OK;
    for (size_t i = 0; st == NX_OK && i < sizeof rows / sizeof rows[0]; i++)
        if (nx_bench_wanted(filter, rows[i].name))
            st = run_row(ctx, &rows[i], runs, json, f);
    return st;
}
