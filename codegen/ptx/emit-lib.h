/* Library kernels on the device (emit-lib.c): CUDA C for scatter, sort/argsort, scan and
 * scan_linear, with the interpreter's semantics (ir/prim-index.c, prim-sort.c, prim-scan.c), and
 * the one support test and source generator the CUDA backend uses for every kernel kind. */
#ifndef NX_CODEGEN_PTX_EMIT_LIB_H
#define NX_CODEGEN_PTX_EMIT_LIB_H

#include "codegen/ptx/emit.h"

/* Static shared memory a sort block uses at most: values and 16-bit positions of one line. */
#define NX_PTX_SORT_SMEM 49152

/* The longest sort line of dtype d the shared-memory bitonic sort takes (a power of two): 16384
 * 1-byte, 8192 2- and 4-byte, 4096 8-byte values. */
NX_HIDDEN int64_t nx_ptx_sort_max(nx_dtype d);

/* Whether the library kernel k has a device implementation: NULL when it has, else the reason (a
 * static string). */
NX_HIDDEN const char *nx_ptx_lib_unsupported(const nx_kernel *k);

/* CUDA C for the library kernel k with the calling convention of nx_ptx_emit (one pointer per
 * buffer in buffer order, then the point count; launched as NX_PTX_POINTS over launch->points
 * threads). reassoc: float scatter-adds may use atomics (any order). A scatter kernel expects
 * its output to hold a copy of x already (nx_ptx_lib_precopy). */
NX_HIDDEN nx_status nx_ptx_lib_emit(const nx_kernel *k, const char *name, bool reassoc,
                                    char **src, size_t *len, nx_ptx_launch *launch);

/* The input buffer whose bytes the runner copies into the output before the launch, or -1. */
NX_HIDDEN int nx_ptx_lib_precopy(const nx_kernel *k);

/* CUDA C helpers for f16/bf16 (emit-lib-half.c), bit-exact with runtime/half.c:
 *   float nx_h2f(unsigned short), nx_bf2f(unsigned short)   load: widen exactly
 *   unsigned short nx_f2h(float), nx_f2bf(float)            store: one round to nearest even
 *   unsigned short nx_d2h(double), nx_d2bf(double)          f64 narrowed directly
 *   float nx_rh(float), nx_rbf(float)                       a value rounded to its dtype
 * Needs no other prelude. */
NX_HIDDEN extern const char nx_ptx_half_prelude[];

/* Extern kernels on the device (emit-extern.c): NULL when the extern's definition carries a
 * device implementation, else the reason; and its CUDA C appended to t (after emit-lib.c's
 * prelude) with the launch it needs. */
NX_HIDDEN const char *nx_ptx_extern_unsupported(const nx_kernel *k);
NX_HIDDEN void nx_ptx_extern_emit(nx_rt_text *t, const nx_kernel *k, const char *name,
                                  nx_ptx_launch *launch);

/* Any kernel kind: LOOP kernels through emit.c, library kernels through emit-lib.c. */
NX_HIDDEN const char *nx_ptx_kernel_unsupported(const nx_kernel *k);
NX_HIDDEN nx_status nx_ptx_kernel_emit(const nx_kernel *k, const char *name, bool reassoc,
                                       char **src, size_t *len, nx_ptx_launch *launch);

#endif /* NX_CODEGEN_PTX_EMIT_LIB_H */
