/* The graph pipeline of `nitrix demo`: a 3x3x3 box mean with reflect boundaries (pad + window +
 * reduce) and the gradient magnitude of the result (central differences), compiled and run on each
 * backend and checked against direct C loops in double precision. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"

/* f32 sums of 27 terms of size ~1 are good to ~1e-6; 1e-4 leaves room and still catches any
 * wrong index or boundary (those are off by ~0.01 or more). */
#define DEMO_TOL 1e-4

/* scipy 'reflect' (half-sample symmetric) for a one-voxel border. */
static int64_t reflect1(int64_t i, int64_t n)
{
    return i < 0 ? -i - 1 : (i >= n ? 2 * n - i - 1 : i);
}

static int64_t at(int64_t i, int64_t j, int64_t k, int64_t n)
{
    return (reflect1(i, n) * n + reflect1(j, n)) * n + reflect1(k, n);
}

static void oracle_box_mean(const float *x, int64_t n, double *s)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++)
            for (int64_t k = 0; k < n; k++) {
                double sum = 0.0;
                for (int64_t a = -1; a <= 1; a++)
                    for (int64_t b = -1; b <= 1; b++)
                        for (int64_t c = -1; c <= 1; c++)
                            sum += x[at(i + a, j + b, k + c, n)];
                s[(i * n + j) * n + k] = sum / 27.0;
            }
}

static void oracle_grad_mag(const double *s, int64_t n, double *gm)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++)
            for (int64_t k = 0; k < n; k++) {
                double gx = 0.5 * (s[at(i + 1, j, k, n)] - s[at(i - 1, j, k, n)]);
                double gy = 0.5 * (s[at(i, j + 1, k, n)] - s[at(i, j - 1, k, n)]);
                double gz = 0.5 * (s[at(i, j, k + 1, n)] - s[at(i, j, k - 1, n)]);
                gm[(i * n + j) * n + k] = sqrt(gx * gx + gy * gy + gz * gz);
            }
}

/* Central difference of v along axis, from its reflect-padded copy pv: (v[i+1] - v[i-1]) / 2. */
static nx_node central_diff(nx_graph *g, nx_node pv, int axis, int64_t n)
{
    int64_t lo_p[3] = {1, 1, 1}, hi_p[3] = {n + 1, n + 1, n + 1};
    int64_t lo_m[3] = {1, 1, 1}, hi_m[3] = {n + 1, n + 1, n + 1};
    lo_p[axis] = 2;
    hi_p[axis] = n + 2;
    lo_m[axis] = 0;
    hi_m[axis] = n;
    nx_node d = nx_sub(g, nx_slice(g, pv, lo_p, hi_p, NULL), nx_slice(g, pv, lo_m, hi_m, NULL));
    return nx_mul(g, d, nx_scalar(g, NX_DTYPE_F32, 0.5));
}

/* Builds the pipeline; outs[0] = box mean, outs[1] = gradient magnitude. */
static nx_status build(nx_graph *g, int64_t n, nx_node outs[2])
{
    int64_t shape[3] = {n, n, n}, one[3] = {1, 1, 1}, win[3] = {3, 3, 3};
    int axes[3] = {3, 4, 5};
    nx_node x = nx_input(g, "phantom", NX_DTYPE_F32, 3, shape);
    nx_node w = nx_window(g, nx_pad(g, x, one, one, NX_PAD_REFLECT, 0.0), win, NULL, NULL);
    nx_node s = nx_mean(g, w, 3, axes, false);
    nx_node ps = nx_pad(g, s, one, one, NX_PAD_REFLECT, 0.0);
    nx_node sq = NX_NONE;
    for (int a = 0; a < 3; a++) {
        nx_node d = central_diff(g, ps, a, n);
        nx_node d2 = nx_mul(g, d, d);
        sq = a == 0 ? d2 : nx_add(g, sq, d2);
    }
    outs[0] = s;
    outs[1] = nx_sqrt(g, sq);
    return nx_graph_status(g);
}

static double max_abs_diff(const nx_tensor *t, const double *want, int64_t count)
{
    if (nx_tensor_dtype(t) != NX_DTYPE_F32 || nx_tensor_numel(t) != count ||
        !nx_tensor_is_contiguous(t))
        return INFINITY;
    const float *got = nx_tensor_data(t);
    double worst = 0.0;
    for (int64_t i = 0; i < count; i++) {
        double d = fabs((double)got[i] - want[i]);
        worst = isnan(d) ? INFINITY : fmax(worst, d);
    }
    return worst;
}

/* Background noise: the std of a corner cube well outside the phantom. */
static double corner_std_f32(const float *v, int64_t n)
{
    int64_t m = n / 8 > 1 ? n / 8 : 2;
    double sum = 0.0, sq = 0.0;
    for (int64_t i = 1; i <= m; i++)
        for (int64_t j = 1; j <= m; j++)
            for (int64_t k = 1; k <= m; k++) {
                double x = v[(i * n + j) * n + k];
                sum += x;
                sq += x * x;
            }
    double cnt = (double)(m * m * m), mean = sum / cnt;
    return sqrt(fmax(sq / cnt - mean * mean, 0.0));
}

typedef struct oracle {
    int64_t n, count;
    double *smooth, *grad;
} oracle;

/* Compiles and runs on one backend. Returns an exit code; a backend that is not available is
 * reported and is not a failure, and neither is a feature of this build that is not built yet. */
static int run_on(nx_ctx *ctx, cli_log *log, nx_backend backend, const nx_tensor *x,
                  const oracle *o)
{
    const char *bname = nx_backend_name(backend);
    nx_graph *g = NULL;
    nx_program *p = NULL;
    nx_tensor *outs[2] = {NULL, NULL};
    nx_node nodes[2];
    double t0 = cli_now(), t1 = t0, t2 = t0;
    nx_status st = nx_graph_new(ctx, &g);
    if (st == NX_OK && (st = build(g, o->n, nodes)) == NX_OK) {
        nx_compile_opts opts = {.backend = backend, .n_outputs = 2, .outputs = nodes};
        cli_log_begin(log);
        st = nx_graph_compile(g, &opts, &p);
        cli_log_end(log);
        t1 = cli_now();
    }
    if (st == NX_OK && nx_program_backend(p) != backend) {
        /* A loud fallback: the library would run this on another backend; timing that again
         * would say nothing about this one. */
        printf("  %-5s not available: %s\n", bname,
               log->last[0] ? log->last : "the library resolved it to another backend");
        nx_program_free(p);
        nx_graph_free(g);
        return CLI_EXIT_OK;
    }
    if (st == NX_OK) {
        st = nx_program_run(p, (const nx_tensor *const[]){x}, outs);
        t2 = cli_now();
    }
    int rc = CLI_EXIT_OK;
    if (st != NX_OK) {
        bool missing =
            st == NX_ERR_UNSUPPORTED || (backend != NX_BACKEND_REF && st == NX_ERR_BACKEND);
        printf("  %-5s not available: %s\n", bname,
               g && nx_graph_status(g) != NX_OK ? nx_graph_error(g) : nx_ctx_last_error(ctx));
        if (!missing) {
            cli_error("demo: the %s backend failed (%s)", bname, nx_status_str(st));
            rc = CLI_EXIT_FAIL;
        }
    } else {
        double e0 = max_abs_diff(outs[0], o->smooth, o->count);
        double e1 = max_abs_diff(outs[1], o->grad, o->count);
        printf("  %-5s compile %8.1f ms   run %8.1f ms   max |error| vs C loop: box mean %.2g, "
               "gradient %.2g\n",
               bname, 1e3 * (t1 - t0), 1e3 * (t2 - t1), e0, e1);
        if (backend == NX_BACKEND_REF) {
            cli_demo_stats("box mean 3x3x3", nx_tensor_data(outs[0]), o->count);
            cli_demo_stats("gradient magnitude", nx_tensor_data(outs[1]), o->count);
            printf("  background noise std: %.4f before, %.4f after the box mean "
                   "(independent noise: 0.05/sqrt(27) = %.4f)\n",
                   corner_std_f32(nx_tensor_data(x), o->n),
                   corner_std_f32(nx_tensor_data(outs[0]), o->n), 0.05 / sqrt(27.0));
        }
        if (!(e0 <= DEMO_TOL && e1 <= DEMO_TOL)) {
            cli_error("demo: the %s backend disagrees with the C loop (max error %.3g, %.3g; "
                      "expected <= %g)",
                      bname, e0, e1, DEMO_TOL);
            rc = CLI_EXIT_FAIL;
        }
    }
    nx_tensor_free(outs[0]);
    nx_tensor_free(outs[1]);
    nx_program_free(p);
    nx_graph_free(g);
    return rc;
}

int cli_demo_pipeline(nx_ctx *ctx, cli_log *log, const nx_tensor *x)
{
    oracle o = {.n = nx_tensor_shape(x)[0], .count = nx_tensor_numel(x)};
    o.smooth = malloc(sizeof(double) * (size_t)o.count);
    o.grad = malloc(sizeof(double) * (size_t)o.count);
    if (!o.smooth || !o.grad) {
        free(o.smooth);
        free(o.grad);
        cli_error("demo: out of memory");
        return CLI_EXIT_FAIL;
    }
    double t0 = cli_now();
    oracle_box_mean(nx_tensor_data(x), o.n, o.smooth);
    oracle_grad_mag(o.smooth, o.n, o.grad);
    printf("pipeline: box mean 3x3x3 (pad reflect + window + mean), then gradient magnitude\n"
           "  C loop (float64 oracle) %.1f ms\n",
           1e3 * (cli_now() - t0));
    static const nx_backend backends[] = {NX_BACKEND_REF, NX_BACKEND_CPU, NX_BACKEND_CUDA};
    int rc = CLI_EXIT_OK;
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
        int r = run_on(ctx, log, backends[i], x, &o);
        rc = rc == CLI_EXIT_OK ? r : rc;
    }
    free(o.smooth);
    free(o.grad);
    return rc;
}
