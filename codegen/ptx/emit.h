/* The CUDA backend's code generator and plan runner: kernel IR -> CUDA C (emit.c), compiled
 * modules cached per context by key (emit-cache.c), plans run over device memory (emit-run.c),
 * the backend object (backend.c). Resolving the backend and the fallback are the program layer's
 * (program/placement.c). docs/cuda.md is the long form. */
#ifndef NX_CODEGEN_PTX_EMIT_H
#define NX_CODEGEN_PTX_EMIT_H

#include "codegen/kernel.h"
#include "codegen/ptx/ptx.h"

/* How a generated kernel is launched. */
typedef enum nx_ptx_shape {
    NX_PTX_POINTS, /* one thread per iteration point (grid-stride); folds run serially per thread */
    NX_PTX_BLOCK_REDUCE, /* one block per output point; a strided fold per thread, then a fixed
                            tree over the block in shared memory (no atomics) */
} nx_ptx_shape;

#define NX_PTX_THREADS 256 /* threads per block of every generated kernel */

typedef struct nx_ptx_launch {
    nx_ptx_shape shape;
    int64_t points;    /* iteration points of the space (1 for a 0-d space); the general form's
                          POINTS kernels with rows per thread: the work items (fewer) */
    int64_t fold_len;  /* BLOCK_REDUCE: elements each output folds */
    int64_t blocks_per_point; /* BLOCK_REDUCE: blocks folding one output; partials and tickets
                                 (zeroed once) sized points * blocks_per_point */
} nx_ptx_launch;

/* Whether the emitter can generate k: NULL when it can, else the reason (a static string).
 * Unsupported: library kernels (emit-lib.c has those), f16/bf16 values, and any primitive without
 * a row in emit.c's emitter table for its operands' class ("cuda: primitive <name> has no
 * emitter ..."). */
NX_HIDDEN const char *nx_ptx_unsupported(const nx_kernel *k);

/* "cuda: primitive <name> has no emitter": the refusal of a primitive that has no device
 * emitter (a static string; any int, out-of-table ones included). */
NX_HIDDEN const char *nx_ptx_no_emitter(int prim);

/* CUDA C for k defining extern "C" __global__ void <name>(b0, b1, ..., long long points): one
 * pointer parameter per buffer in buffer order (IN buffers const), then the point count.
 * reassoc: float SUM/PROD/LOGSUMEXP folds may be split across threads (a block tree); otherwise
 * every fold is in the canonical order, except MAX/MIN, exact in any order. *src is NUL-terminated
 * and freed with nx_rt_free(ctx, *src, *len). */
NX_HIDDEN nx_status nx_ptx_emit(const nx_kernel *k, const char *name, bool reassoc, char **src,
                                size_t *len, nx_ptx_launch *launch);

/* The code generator's options of ctx (nx_ctx_opts.cuda_codegen, NITRIX_PTX_*) as the kernel cache
 * key's part, e.g. "split=1 narrow=1 ... pair_rows=0": every option that changes the emitted
 * source is in it. Returns buf. */
NX_HIDDEN const char *nx_ptx_codegen_key(const nx_ctx *ctx, char *buf, size_t len);

/* ---- compiled kernels and plans (emit-run.c) -----------------------------------------------*/

/* A loaded kernel: from the context's kernel cache (memory, then disk: the PTX or cubin) or
 * emitted, compiled by NVRTC and stored there. Key: kernel IR bytes, reassociation, the target
 * (sm_XX and PTX or cubin), nx_ptx_toolchain_key (NVRTC and driver versions), nx_ptx_codegen_key
 * (the context's code generator options), the emitter's version and the library version.
 * Entries live until nx_ctx_free. */
typedef struct nx_ptx_kernel {
    nx_cu_module module;
    nx_cu_function fn;
    nx_ptx_launch launch;
} nx_ptx_kernel;

typedef struct nx_ptx_get_info {
    bool memory_hit, disk_hit;
    double seconds; /* the whole call: emit + NVRTC + load, or load, or the lookup */
} nx_ptx_get_info;

NX_HIDDEN nx_status nx_ptx_kernel_get(nx_ctx *ctx, const nx_kernel *k, bool reassoc,
                                      const nx_ptx_kernel **out, nx_ptx_get_info *info);

/* A plan compiled for the device: one kernel per plan kernel, the plan's constants uploaded once,
 * scratch for block reductions. */
typedef struct nx_ptx_plan nx_ptx_plan;

/* NULL when every kernel of p can run on CUDA; else the reason, and *which = the kernel. */
NX_HIDDEN const char *nx_ptx_plan_unsupported(const nx_kplan *p, int *which);
NX_HIDDEN nx_status nx_ptx_plan_compile(nx_ctx *ctx, const nx_kplan *p, nx_ptx_plan **out);
NX_HIDDEN void nx_ptx_plan_free(nx_ctx *ctx, nx_ptx_plan *cp);

/* Runs p: inputs are host or device tensors (device ones must be C-contiguous or are copied on
 * the device); intermediates stay on the device. Outputs are device tensors when every input is
 * a device tensor (and there is at least one), host tensors otherwise (one download each). Waits
 * for the device before returning, so launch failures come back as statuses here. */
NX_HIDDEN nx_status nx_ptx_plan_run(nx_ctx *ctx, const nx_kplan *p, nx_ptx_plan *cp,
                                    const nx_tensor *const *inputs, nx_tensor **outputs);

/* The CUDA backend object (backend.c). */
NX_HIDDEN extern const nx_backend_ops nx_ptx_backend;

#endif /* NX_CODEGEN_PTX_EMIT_H */
