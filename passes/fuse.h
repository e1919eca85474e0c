/* Fusion (passes/fuse.c): which program values become kernels of their own. It works on the graph
 * IR alone; lowering (codegen/lower.h) reads the roles it gives. */
#ifndef NX_PASSES_FUSE_H
#define NX_PASSES_FUSE_H

#include "ir/ir.h"

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
/* An inlined value nests at most this many levels below its kernel's root: a deeper operand is
 * materialised, so that a long chain (exp(exp(...)) 40 000 deep) becomes a sequence of kernels
 * whose lowering and emission recurse a bounded depth. */
#define NX_FUSE_DEPTH_MAX 256

/* Partitions the program: role[id] for every node of s (s->n + 1 entries, role[0] unused). */
NX_HIDDEN nx_status nx_pass_fuse(nx_ctx *ctx, const nx_ir_store *s, int noutputs,
                                 const nx_node *outputs, uint8_t *role);

/* Whether the primitive is a library kernel (docs/kernel-ir.md). */
NX_HIDDEN bool nx_fuse_is_library(int prim);

#endif /* NX_PASSES_FUSE_H */
