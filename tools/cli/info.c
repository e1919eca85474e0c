/* `nitrix info`: version, CPU, backends compiled in and found at run time, cache, settings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void print_info_help(void)
{
    puts("usage: nitrix info [--divergent]\n"
         "\n"
         "Prints the library version, the CPU and the features the OS enables, the LLVM the CPU\n"
         "backend was built against, what the CUDA probe found (driver, NVRTC, GPUs), which\n"
         "backends are compiled in and which run here (each is asked to compile and run a small\n"
         "graph), the kernel cache directory and its size, and the settings read from NITRIX_*\n"
         "variables.\n"
         "\n"
         "--divergent  lists the divergent-op registry instead (docs/fidelity.md): per op its\n"
         "             canonical and fast driver, the accepted driver= values, the tolerance\n"
         "             between them and why they differ; tab-separated, one op a line.");
}

/* The registry needs no context: it is a static table. */
static int print_divergent(void)
{
    size_t n;
    const nx_divergent_op *rows = nx_divergent_ops(&n);
    printf("op\tcanonical\tfast\tdrivers\trtol\tatol\treason\n");
    for (size_t i = 0; i < n; i++)
        printf("%s\t%s\t%s\t%s\t%g\t%g\t%s\n", rows[i].op, rows[i].canonical, rows[i].fast,
               rows[i].drivers, rows[i].rtol, rows[i].atol, rows[i].reason);
    if (n == 0)
        fprintf(stderr, "nitrix info: no divergent op is registered\n");
    return CLI_EXIT_OK;
}

static void human_bytes(int64_t n, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double x = (double)n;
    int u = 0;
    while (x >= 1024.0 && u < 4) {
        x /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%lld B", (long long)n);
    else
        snprintf(buf, len, "%.1f %s", x, units[u]);
}

static const char *yes_no(bool b)
{
    return b ? "yes" : "no";
}

static void print_cuda(const nx_system_info *s)
{
    printf("cuda       %s\n", s->cuda_status);
    if (s->cuda_driver_found)
        printf("  driver   %d.%d\n", s->cuda_driver_version / 1000,
               (s->cuda_driver_version % 1000) / 10);
    else
        printf("  driver   not found\n");
    if (s->nvrtc_found)
        printf("  nvrtc    %d.%d\n", s->nvrtc_major, s->nvrtc_minor);
    else
        printf("  nvrtc    not found\n");
    for (int i = 0; i < s->gpu_count && i < NX_MAX_GPUS; i++) {
        char mem[32];
        human_bytes(s->gpus[i].memory_bytes, mem, sizeof mem);
        printf("  gpu %d    %s, compute capability %d.%d, %d SMs, %s\n", i, s->gpus[i].name,
               s->gpus[i].cc_major, s->gpus[i].cc_minor, s->gpus[i].sm_count, mem);
    }
}

/* Compiles and runs y = x + 1 on f32[4] for backend b. True when it ran there with the right
 * answer; otherwise why holds the reason (the library's error, or its fallback warning). */
static bool backend_works(nx_ctx *ctx, cli_log *log, nx_backend b, char *why, size_t len)
{
    int64_t n = 4;
    float xs[4] = {1, 2, 3, 4};
    nx_graph *g = NULL;
    nx_program *p = NULL;
    nx_tensor *x = NULL, *y = NULL;
    nx_status st = nx_graph_new(ctx, &g);
    if (st == NX_OK) {
        nx_node in = nx_input(g, "x", NX_DTYPE_F32, 1, &n);
        nx_node out = nx_add(g, in, nx_scalar(g, NX_DTYPE_F32, 1.0));
        nx_compile_opts opts = {.backend = b, .n_outputs = 1, .outputs = &out};
        cli_log_begin(log);
        st = nx_graph_compile(g, &opts, &p);
        cli_log_end(log);
    }
    bool ok = false;
    if (st != NX_OK) {
        snprintf(why, len, "%s", nx_ctx_last_error(ctx));
    } else if (nx_program_backend(p) != b) {
        snprintf(why, len, "%s", log->last[0] ? log->last : "graphs run on another backend");
    } else if ((st = nx_tensor_wrap(ctx, xs, NX_DTYPE_F32, 1, &n, NULL, &x)) != NX_OK ||
               (st = nx_program_run(p, (const nx_tensor *const[]){x}, &y)) != NX_OK) {
        snprintf(why, len, "%s", nx_ctx_last_error(ctx));
    } else {
        const float *r = nx_tensor_data(y);
        ok = r && r[0] == 2.0f && r[1] == 3.0f && r[2] == 4.0f && r[3] == 5.0f;
        snprintf(why, len, "%s", ok ? "" : "a test graph gave a wrong answer");
    }
    nx_tensor_free(y);
    nx_tensor_free(x);
    nx_program_free(p);
    nx_graph_free(g);
    return ok;
}

/* All three are compiled into every build (CUDA is opened with dlopen at run time); whether each
 * is found is asked of the library by compiling and running a small graph there. */
static void print_backends(nx_ctx *ctx, cli_log *log, const nx_system_info *s)
{
    static const struct {
        nx_backend b;
        const char *what;
    } rows[] = {
        {NX_BACKEND_REF, "reference interpreter"},
        {NX_BACKEND_CPU, "LLVM ORC JIT"},
        {NX_BACKEND_CUDA, "NVRTC + CUDA driver, opened at run time"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char why[600];
        bool ok = backend_works(ctx, log, rows[i].b, why, sizeof why);
        printf("%-10s %-5s compiled in (%s), ", i == 0 ? "backends" : "",
               nx_backend_name(rows[i].b), rows[i].what);
        if (ok)
            printf("available\n");
        else if (rows[i].b == NX_BACKEND_CUDA && strcmp(s->cuda_status, "ok") != 0)
            printf("not available: %s; %s\n", s->cuda_status, why);
        else
            printf("not available: %s\n", why);
    }
}

int cli_cmd_info(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_info_help();
            return CLI_EXIT_OK;
        }
        if (strcmp(argv[i], "--divergent") == 0) {
            if (argc == 2)
                return print_divergent();
            cli_error("info: --divergent takes no other argument (see nitrix info --help)");
            return CLI_EXIT_USAGE;
        }
        cli_error("info: unknown option '%s' (see nitrix info --help)", argv[i]);
        return CLI_EXIT_USAGE;
    }
    nx_ctx *ctx = NULL;
    cli_log log;
    if (cli_ctx_new_logged(&log, &ctx) != NX_OK) {
        cli_error("info: %s", nx_ctx_last_error(NULL));
        return CLI_EXIT_USAGE;
    }
    nx_system_info *s = malloc(sizeof *s);
    if (!s || nx_system_info_get(ctx, s) != NX_OK) {
        cli_error("info: %s", s ? nx_ctx_last_error(ctx) : "out of memory");
        free(s);
        nx_ctx_free(ctx);
        return CLI_EXIT_FAIL;
    }
    char size[32] = "not created yet";
    if (s->cache_bytes >= 0)
        human_bytes(s->cache_bytes, size, sizeof size);
    printf("nitrix     %s\n", s->version);
    printf("cpu        %s, %d logical CPUs\n", s->cpu_name, s->cpu_cores);
    printf("features   %s\n", s->cpu_features[0] ? s->cpu_features : "(none detected)");
    printf("llvm       %s\n", s->llvm_version);
    print_cuda(s);
    print_backends(ctx, &log, s);
    printf("cache      %s (%s)\n", s->cache_dir, size);
    printf("settings   backend=%s threads=%d reproducible=%s strict-backend=%s "
           "silence-fallback=%s\n",
           nx_backend_name(nx_ctx_backend(ctx)), nx_ctx_num_threads(ctx),
           yes_no(nx_ctx_reproducible(ctx)), yes_no(nx_ctx_strict_backend(ctx)),
           yes_no(nx_ctx_silence_fallback(ctx)));
    free(s);
    nx_ctx_free(ctx);
    return CLI_EXIT_OK;
}
