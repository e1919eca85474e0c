/* What the CUDA tests can do on this machine, asked once per test program: compile through NVRTC,
 * and run on a GPU (a driver answers and NX_TEST_FAKE_DRIVER is not 1: the fake driver runs no
 * kernels).
 * Include after testutil.h and the codegen/ptx and runtime headers the test uses. */
#ifndef NX_TEST_CUDA_PROBE_H
#define NX_TEST_CUDA_PROBE_H

#include <stdbool.h>
#include <stdlib.h>

static bool have_nvrtc(nx_ctx *ctx)
{
    static int known = -1;
    if (known < 0) {
        known = nx_ptx_available(ctx) == NX_OK;
        if (!known)
            print_message("NVRTC compiles skipped: %s\n", nx_ctx_last_error(ctx));
    }
    return known;
}

static bool have_gpu(nx_ctx *ctx)
{
    static int known = -1;
    if (known < 0) {
        const char *fake = getenv("NX_TEST_FAKE_DRIVER");
        known = nx_rt_cuda_available(ctx) == NX_OK && !(fake && fake[0] == '1');
        if (!known)
            print_message("device runs skipped: %s\n",
                          nx_ctx_last_error(ctx)[0] ? nx_ctx_last_error(ctx) : "fake driver");
    }
    return known;
}

#endif
