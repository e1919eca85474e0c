/* Kernels shared by the JIT tests and the JIT benchmark: the elementwise max-plus update built with
 * the IR builder and as textual IR, and a reassociating sum reduction in textual IR. */
#ifndef NX_TEST_JIT_KERNELS_H
#define NX_TEST_JIT_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "codegen/x86/jit.h"

/* void name(float *out, const float *a, const float *b, int64_t n):
 *     out[i] = out[i] > a[i] + b[i] ? out[i] : a[i] + b[i]          (fcmp ogt + select) */
typedef void (*maxplus_fn)(float *out, const float *a, const float *b, int64_t n);
/* float name(const float *a, int64_t n): sum of a[0..n), reassociation allowed */
typedef float (*sum_fn)(const float *a, int64_t n);

/* Adds the max-plus function to m with the builder API. */
void jk_build_maxplus(nx_x86_module *m, const char *name);
/* The same function as textual IR (typed pointers), into buf. */
void jk_text_maxplus(char *buf, size_t len, const char *name);
/* The reduction as textual IR with `fadd reassoc`. */
void jk_text_sum(char *buf, size_t len, const char *name);

/* The sum reduction with the builder API and plain `fadd`; with reorder, the loop carries the
 * nx_x86_loop_allow_reorder hint. */
void jk_build_sum(nx_x86_module *m, const char *name, bool reorder);

/* The C reference of the max-plus update. */
void jk_ref_maxplus(float *out, const float *a, const float *b, int64_t n);

#endif
