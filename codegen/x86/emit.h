/* The CPU backend: kernel IR -> LLVM IR (emit.c and the parts emit-priv.h lists), compiled
 * kernels cached by key (emit-cache.c), and plans run over host tensors with the thread pool
 * (emit-run.c). */
#ifndef NX_CODEGEN_X86_EMIT_H
#define NX_CODEGEN_X86_EMIT_H

#include "codegen/kernel.h"

/* A compiled loop kernel: fn(bufs, begin, end) computes the iteration points whose outermost
 * split index lies in [begin, end) (see nx_x86_kernel_split). */
typedef void (*nx_x86_loop_fn)(void *const *bufs, int64_t begin, int64_t end);

/* The loop a compiled kernel's [begin, end) runs over: space loop 0, or for a 0-d space whose
 * one store is a reduction that may be split (max/min and integer folds always, float sums and
 * products when reassoc), that reduction's first loop: each chunk then stores the fold of its
 * part of the loop, and the runner combines the partials in chunk order with the same monoid.
 * -1: the kernel is one point and is not split. */
NX_HIDDEN int nx_x86_kernel_split(const nx_kernel *k, bool reassoc);

/* Runs a plan: inputs are contiguous host tensors by program argument; outputs receive new
 * C-contiguous tensors. fns[i] is kernel i's compiled function, or NULL to run it with the
 * kernel IR interpreter (loop kernels) or the host routine (library kernels). */
NX_HIDDEN nx_status nx_x86_plan_run(nx_ctx *ctx, const nx_kplan *p, const nx_x86_loop_fn *fns,
                                    const nx_tensor *const *inputs, nx_tensor **outputs);
/* The same with the reassociation choice the functions were compiled with (nx_x86_plan_run takes
 * the context's: not reproducible). */
NX_HIDDEN nx_status nx_x86_plan_run_ex(nx_ctx *ctx, const nx_kplan *p, const nx_x86_loop_fn *fns,
                                       bool reassoc, const nx_tensor *const *inputs,
                                       nx_tensor **outputs);

/* Why the JIT cannot compile kernel k ("cpu: primitive atan2 has no emitter", f16/bf16 values),
 * or NULL when it can (library kernels: when they carry no prologue or epilogue, they run host
 * code). A primitive has code only where the emitter's table has an entry (emit.c): one without
 * is refused here, never emitted by a default. The reason is in a per-thread buffer, valid until
 * the thread's next call. */
NX_HIDDEN const char *nx_x86_kernel_unsupported(const nx_kernel *k);
/* Loop kernels with more instructions than this are not compiled (the compile budget). */
#define NX_X86_MAX_INST 32768
/* nx_x86_kernel_unsupported(k) == NULL (the backend's supports). */
NX_HIDDEN bool nx_x86_supports(const nx_kernel *k);

/* Border/interior split of the innermost space loop (borders.c): the interval [lo, hi) of loop
 * `loop` on which index rules (pads, clamps, concat selects) have one answer, and what every
 * instruction is there. The emitter runs [0, lo) and [hi, n) as written and [lo, hi) with the
 * aliases, whose load offsets are then affine (vector loads); values are the same either way. */
#define NX_X86_BORDERS_MIN 8 /* the shortest interior worth a split */

enum { NX_X86_ALIAS_SELF, NX_X86_ALIAS_TO, NX_X86_ALIAS_CONST };

typedef struct nx_x86_alias {
    uint8_t kind; /* SELF: itself; TO: instruction `to` plus c (i64; c = 0 otherwise); CONST: c */
    int32_t to;
    int64_t c;
} nx_x86_alias;

typedef struct nx_x86_borders {
    int loop;       /* -1: no split */
    int64_t lo, hi; /* the interior */
    int ninst;
    nx_x86_alias *alias; /* ninst + 1 entries, valid in the interior; nx_x86_borders_free */
} nx_x86_borders;

/* Finds the split of k's innermost space loop (mask: nx_kernel_loop_masks); s->loop = -1 when
 * there is none worth making. Fails only for lack of memory. */
NX_HIDDEN nx_status nx_x86_borders_find(const nx_kernel *k, const uint32_t *mask,
                                        nx_x86_borders *s);
NX_HIDDEN void nx_x86_borders_free(nx_ctx *ctx, nx_x86_borders *s);

/* The kernel as LLVM textual IR defining `void @name(i8** bufs, i64 begin, i64 end)` (emit.c).
 * reassoc: float sums and products may be reassociated (vectorised); otherwise every fold is in
 * the canonical order. *out is freed with nx_rt_free(ctx, *out, *len). */
NX_HIDDEN nx_status nx_x86_emit_text(const nx_kernel *k, const char *name, bool reassoc, char **out,
                                     size_t *len);

/* The emitter's identity for cache keys: a constant bumped with each change to its output. */
NX_HIDDEN const char *nx_x86_emit_version(void);

/* How a kernel was obtained (emit-cache.c). */
typedef struct nx_x86_get_info {
    bool memory_hit, disk_hit;
    double seconds; /* emit + optimise + codegen + link, or load + link, or the lookup */
} nx_x86_get_info;

/* The compiled kernel for k, from the context's kernel cache (memory, then disk) or compiled
 * and stored there. The key: kernel IR bytes, target triple/CPU/features, LLVM version, library
 * version, the reassociation choice and the emitter's version. */
NX_HIDDEN nx_status nx_x86_kernel_get(nx_ctx *ctx, const nx_kernel *k, bool reassoc,
                                      nx_x86_loop_fn *fn, nx_x86_get_info *info);

/* The cache key of k for target t (b holds the blob the key borrows; free it after use). */
struct nx_x86_target;
struct nx_rt_cache_blob;
struct nx_rt_cache_key;
NX_HIDDEN nx_status nx_x86_kernel_key(nx_ctx *ctx, const nx_kernel *k, bool reassoc,
                                      const struct nx_x86_target *t, struct nx_rt_cache_blob *b,
                                      struct nx_rt_cache_key *key);

/* fns[i] for every kernel of p: compiled code, or NULL for library kernels and for loop kernels
 * the JIT does not support (those run interpreted; the placement policy, program/placement.c,
 * has warned about them or refused them under strict mode). */
NX_HIDDEN nx_status nx_x86_plan_compile(nx_ctx *ctx, const nx_kplan *p, nx_x86_loop_fn *fns);
/* The same, with refused (may be NULL) called for a loop kernel whose compile fails other than
 * by running out of memory: when it returns NX_OK the kernel's entry stays NULL (the kernel
 * interpreter runs it) and the plan goes on. */
NX_HIDDEN nx_status nx_x86_plan_compile_ex(nx_ctx *ctx, const nx_kplan *p,
                                           nx_kernel_refused_fn refused, nx_x86_loop_fn *fns);
/* Test builds: text appended to every kernel module's IR before it is parsed (NULL: none), so a
 * test can make the JIT meet IR that fails verification or cannot be lowered. Hidden, and set by
 * nothing in the library. */
NX_HIDDEN extern const char *volatile nx_x86_test_ir_suffix;

/* The CPU backend object (emit-run.c). */
NX_HIDDEN extern const nx_backend_ops nx_x86_backend;
/* The backend object's why_not and available (emit-cache.c): a kernel the JIT does not compile
 * (f16/bf16, atan2, integer pow) runs on the kernel interpreter; one fused for another backend
 * (a prologue or an epilogue) cannot run here at all. */
NX_HIDDEN const char *nx_x86_why_not(const nx_kernel *k);
NX_HIDDEN nx_status nx_x86_available(nx_ctx *ctx);

#endif /* NX_CODEGEN_X86_EMIT_H */
