/* `nitrix info`: version, CPU, backends compiled in and found at run time, cache, settings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void print_info_help(void)
{
    puts("usage: nitrix info\n"
         "\n"
         "Prints the library version, the CPU and the features the OS enables, the LLVM the CPU\n"
         "backend was built against, what the CUDA probe found (driver, NVRTC, GPUs), the kernel\n"
         "cache directory and its size, and the settings read from NITRIX_* variables.");
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

/* ref and cpu are compiled into every build; cuda is compiled in too but found only at run time,
 * when a driver and a GPU of compute capability >= 8.0 answer. */
static void print_backends(const nx_system_info *s)
{
    bool gpu_ok = false;
    for (int i = 0; i < s->gpu_count && i < NX_MAX_GPUS; i++)
        gpu_ok = gpu_ok || s->gpus[i].cc_major >= 8;
    printf("backends   ref (reference interpreter): compiled in, available\n");
    printf("           cpu (LLVM %s JIT for this CPU): compiled in, available\n", s->llvm_version);
    printf("           cuda (NVRTC + driver, opened at run time): compiled in, %s\n",
           s->cuda_driver_found && s->nvrtc_found && gpu_ok ? "available" : "not available");
}

int cli_cmd_info(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_info_help();
            return CLI_EXIT_OK;
        }
        cli_error("info: unknown option '%s' (see nitrix info --help)", argv[i]);
        return CLI_EXIT_USAGE;
    }
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(NULL, &ctx) != NX_OK) {
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
    print_backends(s);
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
