/* `nitrix demo`: synthesises a 3-D phantom and runs a small pipeline through the library on each
 * available backend, printing results and timings. Later issues grow the pipeline.
 *
 * The demo must run anywhere (no GPU, no driver) in a few seconds: a backend that is not available
 * is reported and skipped; only a wrong answer or a failure of the always-present parts (host
 * tensors, .npy, the reference backend) makes it fail. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "demo.h"

static const cli_opt demo_opts[] = {
    {"size", CLI_INT, "64", "8:256", "edge of the cubic phantom, in voxels"},
    {"seed", CLI_INT, "1", "0:", "seed of the noise generator"},
};
enum { OPT_SIZE, OPT_SEED, N_OPTS };

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void print_demo_help(void)
{
    puts("usage: nitrix demo [--size=N] [--seed=N]\n"
         "\n"
         "Synthesises a noisy 3-D ellipsoid phantom (float32, N^3 voxels) and prints its\n"
         "statistics; round-trips it through the .npy writer and reader in memory and, when there\n"
         "is a GPU, through device memory; then runs a small graph pipeline (a 3x3x3 box mean\n"
         "with reflect boundaries, and the gradient magnitude of the smoothed volume) on each\n"
         "backend, checking each against a direct C loop and printing timings. Backends that are\n"
         "not available here are reported and skipped.\n"
         "\n"
         "options:");
    for (int i = 0; i < N_OPTS; i++)
        printf("  --%s=int    %s (default %s, range %s)\n", demo_opts[i].name, demo_opts[i].help,
               demo_opts[i].def, demo_opts[i].allowed);
}

/* ------------------------------------------------------------------------------------------------
 * The phantom
 * ----------------------------------------------------------------------------------------------*/

/* splitmix64: a fixed, portable generator, so every machine makes the same phantom. */
static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in (0, 1]: never 0, so the log below is finite. */
static double next_unit(uint64_t *s)
{
    return ((double)(next_u64(s) >> 11) + 1.0) * 0x1.0p-53;
}

/* Box-Muller: one standard normal deviate per call (the second is dropped for simplicity). */
static double next_normal(uint64_t *s)
{
    double u = next_unit(s), v = next_unit(s);
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

static bool inside(double x, double y, double z, double cx, double cy, double cz, double ax,
                   double ay, double az)
{
    double dx = (x - cx) / ax, dy = (y - cy) / ay, dz = (z - cz) / az;
    return dx * dx + dy * dy + dz * dz <= 1.0;
}

/* An outer ellipsoid of intensity 1 holding an inner one of 0.5, on 0, plus N(0, 0.05^2) noise.
 * Voxel centres map to [-1, 1]. */
static void fill_phantom(float *v, int64_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (int64_t i = 0; i < n; i++) {
        double x = (2.0 * (double)i + 1.0) / (double)n - 1.0;
        for (int64_t j = 0; j < n; j++) {
            double y = (2.0 * (double)j + 1.0) / (double)n - 1.0;
            for (int64_t k = 0; k < n; k++) {
                double z = (2.0 * (double)k + 1.0) / (double)n - 1.0;
                double val = 0.0;
                if (inside(x, y, z, 0.0, 0.0, 0.0, 0.8, 0.6, 0.7))
                    val = inside(x, y, z, 0.2, 0.0, 0.1, 0.25, 0.2, 0.3) ? 0.5 : 1.0;
                v[(i * n + j) * n + k] = (float)(val + 0.05 * next_normal(&s));
            }
        }
    }
}

static void print_stats(const char *what, const float *v, int64_t count)
{
    double sum = 0.0, sq = 0.0, lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < count; i++) {
        sum += v[i];
        sq += (double)v[i] * v[i];
        lo = fmin(lo, v[i]);
        hi = fmax(hi, v[i]);
    }
    double mean = sum / (double)count;
    double var = fmax(sq / (double)count - mean * mean, 0.0);
    printf("  %-22s mean %.5f  std %.5f  min %.5f  max %.5f\n", what, mean, sqrt(var), lo, hi);
}

/* ------------------------------------------------------------------------------------------------
 * .npy round trip in memory
 * ----------------------------------------------------------------------------------------------*/

static int npy_round_trip(nx_ctx *ctx, const nx_tensor *t)
{
    void *buf = NULL;
    size_t len = 0;
    nx_tensor *back = NULL;
    double t0 = cli_now();
    nx_status st = nx_npy_write_mem(ctx, t, &buf, &len);
    if (st == NX_OK)
        st = nx_npy_read_mem(ctx, buf, len, &back);
    double dt = cli_now() - t0;
    nx_ctx_buffer_free(ctx, buf, len);
    if (st != NX_OK) {
        cli_error("demo: .npy round trip: %s", nx_ctx_last_error(ctx));
        return CLI_EXIT_FAIL;
    }
    size_t bytes = (size_t)nx_tensor_numel(t) * nx_dtype_size(nx_tensor_dtype(t));
    bool same = nx_tensor_dtype(back) == nx_tensor_dtype(t) &&
                nx_tensor_ndim(back) == nx_tensor_ndim(t) &&
                memcmp(nx_tensor_shape(back), nx_tensor_shape(t),
                       sizeof(int64_t) * (size_t)nx_tensor_ndim(t)) == 0 &&
                memcmp(nx_tensor_data(back), nx_tensor_data(t), bytes) == 0;
    nx_tensor_free(back);
    printf(".npy round trip (in memory): %zu bytes, %s, %.1f ms\n", len,
           same ? "bit-identical" : "DIFFERENT", 1e3 * dt);
    if (!same) {
        cli_error("demo: the .npy round trip changed the array");
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

/* The phantom to the GPU and back, when there is one: the device path of the runtime, until the
 * CUDA backend compiles graphs. No GPU is not a failure. */
static int device_round_trip(nx_ctx *ctx, const nx_tensor *t)
{
    nx_tensor *dev = NULL, *back = NULL;
    double t0 = cli_now();
    nx_status st = nx_tensor_to_device(t, NX_DEVICE_CUDA, &dev);
    if (st == NX_OK)
        st = nx_tensor_to_device(dev, NX_DEVICE_HOST, &back);
    double dt = cli_now() - t0;
    int rc = CLI_EXIT_OK;
    if (st == NX_ERR_BACKEND || st == NX_ERR_UNSUPPORTED) {
        printf("cuda device round trip: not available: %s\n", nx_ctx_last_error(ctx));
    } else if (st != NX_OK) {
        cli_error("demo: cuda device round trip: %s", nx_ctx_last_error(ctx));
        rc = CLI_EXIT_FAIL;
    } else {
        size_t bytes = (size_t)nx_tensor_numel(t) * nx_dtype_size(nx_tensor_dtype(t));
        bool same = nx_tensor_numel(back) == nx_tensor_numel(t) &&
                    memcmp(nx_tensor_data(back), nx_tensor_data(t), bytes) == 0;
        printf("cuda device round trip: %zu bytes up and down, %s, %.1f ms (first use included)\n",
               bytes, same ? "bit-identical" : "DIFFERENT", 1e3 * dt);
        if (!same) {
            cli_error("demo: the device round trip changed the array");
            rc = CLI_EXIT_FAIL;
        }
    }
    nx_tensor_free(back);
    nx_tensor_free(dev);
    return rc;
}

/* ------------------------------------------------------------------------------------------------
 * Entry
 * ----------------------------------------------------------------------------------------------*/

static int parse_demo_args(int argc, char **argv, cli_value *vals)
{
    char err[256];
    for (int i = 0; i < N_OPTS; i++)
        cli_parse_value(&demo_opts[i], demo_opts[i].def, &vals[i], err, sizeof err);
    for (int i = 1; i < argc; i++) {
        char name[64];
        const char *value = NULL;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_demo_help();
            return -1;
        }
        int o = -1;
        if (cli_split_long(argv[i], name, sizeof name, &value)) {
            for (int j = 0; j < N_OPTS; j++)
                o = strcmp(name, demo_opts[j].name) == 0 ? j : o;
        }
        if (o < 0) {
            cli_error("demo: unknown option '%s'; expected --size=N, --seed=N or --help", argv[i]);
            return CLI_EXIT_USAGE;
        }
        if (!cli_parse_value(&demo_opts[o], value, &vals[o], err, sizeof err)) {
            cli_error("demo: %s", err);
            return CLI_EXIT_USAGE;
        }
    }
    return CLI_EXIT_OK;
}

int cli_cmd_demo(int argc, char **argv)
{
    cli_value vals[N_OPTS];
    int rc = parse_demo_args(argc, argv, vals);
    if (rc != CLI_EXIT_OK)
        return rc < 0 ? CLI_EXIT_OK : rc;
    nx_ctx *ctx = NULL;
    cli_log log;
    if (cli_ctx_new_logged(&log, &ctx) != NX_OK) {
        cli_error("demo: %s", nx_ctx_last_error(NULL));
        return CLI_EXIT_USAGE;
    }
    int64_t n = vals[OPT_SIZE].i;
    int64_t shape[3] = {n, n, n};
    nx_tensor *x = NULL;
    if (nx_tensor_new(ctx, NX_DTYPE_F32, 3, shape, &x) != NX_OK) {
        cli_error("demo: %s", nx_ctx_last_error(ctx));
        nx_ctx_free(ctx);
        return CLI_EXIT_FAIL;
    }
    printf("nitrix %s demo\n", nx_version());
    double t0 = cli_now();
    fill_phantom(nx_tensor_data(x), n, (uint64_t)vals[OPT_SEED].i);
    printf("phantom: f32[%lld,%lld,%lld], two nested ellipsoids (1.0, 0.5) + N(0, 0.05^2) noise, "
           "seed %lld, %.1f ms\n",
           (long long)n, (long long)n, (long long)n, (long long)vals[OPT_SEED].i,
           1e3 * (cli_now() - t0));
    print_stats("phantom", nx_tensor_data(x), nx_tensor_numel(x));
    rc = npy_round_trip(ctx, x);
    if (rc == CLI_EXIT_OK)
        rc = device_round_trip(ctx, x);
    if (rc == CLI_EXIT_OK)
        rc = cli_demo_pipeline(ctx, &log, x);
    nx_tensor_free(x);
    nx_ctx_free(ctx);
    if (rc == CLI_EXIT_OK)
        puts("demo: ok");
    return rc;
}

/* Shared with the pipeline. */
void cli_demo_stats(const char *what, const float *v, int64_t count)
{
    print_stats(what, v, count);
}
