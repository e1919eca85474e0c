/* Fusion and the pass pipeline (passes/fuse.c, passes/pipeline.c): which program values become
 * kernels of their own, and the order the passes run in before lowering to kernel IR. */
#ifndef NX_PASSES_FUSE_H
#define NX_PASSES_FUSE_H

#include "codegen/kernel.h"

typedef enum nx_fuse_role {
    NX_FUSE_DEAD,   /* not needed by any output */
    NX_FUSE_INLINE, /* computed inside each consumer's kernel (index maps, elementwise, folds) */
    NX_FUSE_ROOT,   /* materialised once: a kernel of its own writes it to a slot */
    NX_FUSE_LEAF,   /* an input or a constant tensor: a slot bound at run time */
} nx_fuse_role;

/* A reduction inlined into its consumer (a nested reduction) folds at most this many elements. */
#define NX_FUSE_NESTED_MAX 64
/* A value whose other readers take at most 1/NX_FUSE_SLICE_RATIO of it is recomputed by them, if
 * its expression has at most NX_FUSE_RECOMPUTE_MAX nodes (passes/fuse.c). */
#define NX_FUSE_SLICE_RATIO 16
#define NX_FUSE_RECOMPUTE_MAX 512

/* Partitions the program: role[id] for every node of s (s->n + 1 entries, role[0] unused). */
NX_HIDDEN nx_status nx_pass_fuse(nx_ctx *ctx, const nx_ir_store *s, int noutputs,
                                 const nx_node *outputs, uint8_t *role);

/* Whether the primitive is a library kernel (docs/kernel-ir.md). */
NX_HIDDEN bool nx_fuse_is_library(int prim);

/* fuse -> lower -> validate each kernel, with NITRIX_DUMP=fuse,kernel dumps. NX_ERR_UNSUPPORTED
 * when some node cannot be lowered (the message names it): the caller falls back. */
NX_HIDDEN nx_status nx_pass_pipeline(nx_ctx *ctx, const nx_ir_store *s, int noutputs,
                                     const nx_node *outputs, nx_kplan **out);

/* The same for a backend: supports (NULL: none) is asked whether it takes a library kernel with
 * a prologue (nx_pass_prologue). */
NX_HIDDEN nx_status nx_pass_pipeline_for(nx_ctx *ctx, const nx_ir_store *s, int noutputs,
                                         const nx_node *outputs,
                                         bool (*supports)(const nx_kernel *), nx_kplan **out);

/* Prologue fusion (passes/prologue.c) on a validated plan, when supports accepts every kernel:
 * a loop kernel whose output only one library kernel reads moves into it where supports accepts
 * the result. supports NULL: nothing changes. */
NX_HIDDEN nx_status nx_pass_prologue(nx_kplan *p, bool (*supports)(const nx_kernel *));

/* Lowering (codegen/lower.c): one kernel per ROOT in id order. */
NX_HIDDEN nx_status nx_lower_plan(nx_ctx *ctx, const nx_ir_store *s, int noutputs,
                                  const nx_node *outputs, const uint8_t *role, nx_kplan **out);

#endif /* NX_PASSES_FUSE_H */
