/* The CUDA backend object (nx_backend_ops, codegen/kernel.h).
 *
 * prepare compiles every kernel for the device: loop kernels through emit.c, library kernels
 * (scatter, sort/argsort, scan, scan_linear) through emit-lib.c. A kernel neither can generate
 * (extern, reduce_custom, sort lines longer than nx_ptx_sort_max, f16/bf16 loop kernels until
 * emit.c takes them) is named by why_not; the placement policy (program/placement.c) asks first
 * and runs such a plan whole on the CPU backend, loudly. This backend only runs plans on the
 * device: it never runs another backend. */
#include "codegen/ptx/emit-lib.h"

/* A GPU of capability >= 8.0 answers and NVRTC loads; otherwise the reason is on the context. */
static nx_status ptx_available(nx_ctx *ctx)
{
    nx_status st = nx_rt_cuda_available(ctx);
    if (st == NX_OK)
        st = nx_ptx_available(ctx);
    return st;
}

static bool ptx_supports(const nx_kernel *k)
{
    return nx_ptx_kernel_unsupported(k) == NULL;
}

static nx_status ptx_prepare(nx_ctx *ctx, const nx_kplan *p, nx_kernel_refused_fn refused,
                             void **state)
{
    (void)refused; /* NVRTC's errors are the prepare's (a device plan has no host fallback here) */
    nx_ptx_plan *cp = NULL;
    *state = NULL;
    nx_status st = nx_ptx_plan_compile(ctx, p, &cp);
    if (st == NX_OK)
        *state = cp;
    return st;
}

static nx_status ptx_run(nx_ctx *ctx, const nx_kplan *p, void *state,
                         const nx_tensor *const *inputs, nx_tensor **outputs)
{
    return nx_ptx_plan_run(ctx, p, state, inputs, outputs);
}

static void ptx_release(nx_ctx *ctx, const nx_kplan *p, void *state)
{
    (void)p;
    if (state)
        nx_ptx_plan_free(ctx, state);
}

/* Every FIR pass as slices with the weights as immediates, the passes before the last
 * materialised (docs/perf/cuda-fir.md; FIR 17 taps 0.199 ms at 256^3 on the H200): the passes are
 * bound by load instructions and L1 wavefronts, and this form saves the weight loads and the
 * weight-cast kernel. */
static const nx_backend_hints ptx_hints = {
    .fir_pad_first = false,
    .fir_slices_every_axis = true,
};

const nx_backend_ops nx_ptx_backend = {
    .name = "cuda",
    .id = NX_BACKEND_CUDA,
    .available = ptx_available,
    .why_not = nx_ptx_kernel_unsupported,
    .supports = ptx_supports,
    .prepare = ptx_prepare,
    .run = ptx_run,
    .release = ptx_release,
    .hints = &ptx_hints,
};
