/* The backend registry: one const object per backend (codegen/<name>/), one line here each.
 * `ref` is no backend object: it is the reference interpreter (ir/interp.c), which runs any
 * program and is always available. */
#include "codegen/ptx/emit.h"
#include "codegen/x86/emit.h"
#include "program/program.h"

static const nx_backend_ops *const registry[NX_BACKEND_COUNT] = {
    [NX_BACKEND_CPU] = &nx_x86_backend,
    [NX_BACKEND_CUDA] = &nx_ptx_backend,
};

/* The reference interpreter is the oracle, not a fast path: the CPU's costs, no padded form (its
 * programs gain nothing from it). */
static const nx_backend_hints ref_hints = {
    .fir_pad_first = false,
    .fir_slices_every_axis = false,
};

void nx_program_backend_hints(nx_backend b, nx_backend_hints *out)
{
    const nx_backend_ops *ops = nx_program_backend_ops(b);
    if (b == NX_BACKEND_REF || !ops)
        *out = b == NX_BACKEND_REF ? ref_hints : *nx_program_backend_ops(NX_BACKEND_CPU)->hints;
    else
        *out = *ops->hints;
}

const nx_backend_ops *nx_program_backend_ops(nx_backend b)
{
    return (unsigned)b < NX_BACKEND_COUNT ? registry[b] : NULL;
}

nx_status nx_program_backend_available(nx_ctx *ctx, nx_backend b)
{
    if (b == NX_BACKEND_REF)
        return NX_OK;
    const nx_backend_ops *ops = nx_program_backend_ops(b);
    if (!ops)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "backend %d is not a backend; expected NX_BACKEND_CPU, _CUDA or _REF",
                           (int)b);
    return ops->available(ctx);
}

const char *nx_program_why_not(nx_backend b, const nx_kernel *k)
{
    const nx_backend_ops *ops = nx_program_backend_ops(b);
    if (!ops)
        return "the reference interpreter runs graphs, not kernels";
    return ops->why_not(k);
}
