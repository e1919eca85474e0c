/* The CPU backend: kernel IR -> LLVM IR (emit.c), compiled kernels cached by key (emit-cache.c),
 * and plans run over host tensors with the thread pool (emit-run.c). */
#ifndef NX_CODEGEN_X86_EMIT_H
#define NX_CODEGEN_X86_EMIT_H

#include "codegen/kernel.h"

/* A compiled loop kernel: fn(bufs, begin, end) computes the iteration points whose outermost
 * split index lies in [begin, end) (see nx_x86_kernel_split). */
typedef void (*nx_x86_loop_fn)(void *const *bufs, int64_t begin, int64_t end);

/* Runs a plan: inputs are contiguous host tensors by program argument; outputs receive new
 * C-contiguous tensors. fns[i] is kernel i's compiled function, or NULL to run it with the
 * kernel IR interpreter (loop kernels) or the host routine (library kernels). */
NX_HIDDEN nx_status nx_x86_plan_run(nx_ctx *ctx, const nx_kplan *p, const nx_x86_loop_fn *fns,
                                    const nx_tensor *const *inputs, nx_tensor **outputs);

#endif /* NX_CODEGEN_X86_EMIT_H */
