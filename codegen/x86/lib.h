/* The CPU backend's host routines for LIBRARY kernels (lib-*.c).
 *
 * Each routine reads only the kernel IR: the primitive (lib_prim), its attributes in the layout
 * codegen/kernel.h documents, the buffers' dtypes and shapes, and for an extern the definition
 * the kernel records (lib_ptr). None evaluates the graph node or calls the reference
 * interpreter's kernels, so the CPU-vs-reference tests compare two implementations.
 *
 * Buffers are C-contiguous (kernel IR). Work is split over independent lines on the context's
 * pool; every line's arithmetic is the sequential one, so results do not depend on the partition
 * or the thread count (reproducible mode changes nothing here). */
#ifndef NX_CODEGEN_X86_LIB_H
#define NX_CODEGEN_X86_LIB_H

#include "codegen/kernel.h"

/* What a routine runs on: bufs[b] is buffer b's data, tens[b] its tensor (externs hand tensors
 * to user code). The output is the last buffer and need not be initialised, except for an extern
 * (zeroed: user code may rely on it). */
typedef struct nx_x86_lib_call {
    nx_ctx *ctx;
    const nx_kernel *k;
    void *const *bufs;
    nx_tensor *const *tens;
} nx_x86_lib_call;

/* The geometry of a kernel along one axis of a shape: outer lines, their length, and the inner
 * extent (elements between two steps along the axis). */
typedef struct nx_x86_axis {
    int64_t outer, len, inner;
} nx_x86_axis;

NX_HIDDEN nx_x86_axis nx_x86_axis_of(int ndim, const int64_t *shape, int axis);

/* Whether the CPU backend has a host routine for library primitive prim. */
NX_HIDDEN bool nx_x86_lib_has(int prim);
/* Runs the library kernel c->k (a primitive nx_x86_lib_has answers true for). */
NX_HIDDEN nx_status nx_x86_lib_run(const nx_x86_lib_call *c);

NX_HIDDEN nx_status nx_x86_lib_scan(const nx_x86_lib_call *c);
NX_HIDDEN nx_status nx_x86_lib_scan_linear(const nx_x86_lib_call *c);
NX_HIDDEN nx_status nx_x86_lib_scan_iir(const nx_x86_lib_call *c);
NX_HIDDEN nx_status nx_x86_lib_sort(const nx_x86_lib_call *c); /* sort and argsort */
NX_HIDDEN nx_status nx_x86_lib_scatter(const nx_x86_lib_call *c);
NX_HIDDEN nx_status nx_x86_lib_extern(const nx_x86_lib_call *c);

/* Runs fn over [0, tasks) on the pool, grouping tasks so a chunk holds about 64K elements of
 * work (per_task elements each). */
NX_HIDDEN nx_status nx_x86_lib_parallel(nx_ctx *ctx, int64_t tasks, int64_t per_task,
                                        void (*fn)(void *, int64_t, int64_t, int), void *user);

#endif /* NX_CODEGEN_X86_LIB_H */
