/* Extern kernels on the device (docs/cuda.md "Library kernels").
 *
 * An extern's definition (nx_extern_def) names a host routine; none carries a device
 * implementation yet, so every extern kernel is unsupported here and the backend falls back to
 * the CPU loudly for its plan. */
#include "codegen/ptx/emit-lib.h"

const char *nx_ptx_extern_unsupported(const nx_kernel *k)
{
    (void)k;
    return "extern runs a host routine (user C code) and has no device implementation";
}

void nx_ptx_extern_emit(nx_rt_text *t, const nx_kernel *k, const char *name,
                        nx_ptx_launch *launch)
{
    (void)t;
    (void)k;
    (void)name;
    (void)launch;
}
