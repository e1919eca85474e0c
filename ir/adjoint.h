/* The adjoint rules' contract (nx_ir_vjp_fn, ir/ir.h; the rules live in ir/prim-*.c, named by
 * ir/prims.def's vjp column) and the helpers they share (ir/adjoint.c). The autodiff pass
 * (passes/autodiff.c) walks the graph and calls the rules; the rules sit beside the primitives, so
 * ir/ needs nothing from passes/.
 *
 * A rule receives a node y of the graph and the cotangent dy (same dtype and shape as y, never
 * zero) and writes one cotangent per value operand into dx (pre-filled with NX_NONE, which means
 * zero). Each dx[k] has exactly operand k's dtype and shape. Rules build their nodes with the
 * public builders, so everything they make is hash-consed and itself differentiable (gradients
 * of gradients); a builder failure is recorded in the graph and seen by the caller. A rule
 * returns NX_OK, or an error status (NX_ERR_UNSUPPORTED with a message through the context) when
 * the node has no adjoint in this configuration.
 *
 * Node pointers dangle once a builder grows the arena, so rules read their node through
 * nx_ir_ad_view, a copy taken before the first builder call. */
#ifndef NX_IR_ADJOINT_H
#define NX_IR_ADJOINT_H

#include "ir/ir.h"
#include "nitrix-graph.h"

#define NX_IR_AD_MAX_OPS 72
#define NX_IR_AD_MAX_ATTRS 40

/* A copy of one node: its header, operands and attributes (blob not copied). */
typedef struct nx_ir_ad_view {
    nx_ir_node n;
    nx_node ops[NX_IR_AD_MAX_OPS];
    int64_t a[NX_IR_AD_MAX_ATTRS];
} nx_ir_ad_view;

NX_HIDDEN void nx_ir_ad_view_of(const nx_graph *g, nx_node id, nx_ir_ad_view *v);

/* A 0-d constant of like's dtype. */
NX_HIDDEN nx_node nx_ir_ad_scalar(nx_graph *g, nx_node like, double v);
/* Zeros of like's dtype and shape (a broadcast 0-d constant). */
NX_HIDDEN nx_node nx_ir_ad_zeros(nx_graph *g, nx_node like);
/* Sums d (a cotangent of a broadcast result) back to target's shape: over the leading axes
 * target lacks and the axes where target has extent 1. */
NX_HIDDEN nx_node nx_ir_ad_unbroadcast(nx_graph *g, nx_node d, nx_node target);
/* select(cond, d, 0). */
NX_HIDDEN nx_node nx_ir_ad_select0(nx_graph *g, nx_node cond, nx_node d);
/* An i64 iota of shape like's along axis. */
NX_HIDDEN nx_node nx_ir_ad_iota(nx_graph *g, int ndim, const int64_t *shape, int axis);
/* The i64 flat (C order) offset into a tensor of shape xshape of every position of an index
 * space: positions[d] gives, per axis d of the tensor, an i64 node broadcastable to the index
 * space holding the coordinate. */
NX_HIDDEN nx_node nx_ir_ad_flat_index(nx_graph *g, int xndim, const int64_t *xshape,
                                      const nx_node *coords);
/* y = scatter-add of d (any shape) into zeros of x's shape at the flat offsets idx (same shape
 * as d, i64). */
NX_HIDDEN nx_node nx_ir_ad_scatter_flat(nx_graph *g, nx_node x, nx_node idx, nx_node d);
/* Shifts x by one along axis towards higher indices (toward lower when down), filling with v. */
NX_HIDDEN nx_node nx_ir_ad_shift(nx_graph *g, nx_node x, int axis, bool down, double v);
/* The message of an unsupported adjoint: records nothing in the graph. */
NX_HIDDEN nx_status nx_ir_ad_unsupported(nx_graph *g, const char *fmt, ...) NX_PRINTF(2, 3);

/* The adjoint of a built-in reduction (shared by reduce and built-in-equivalent custom monoids).
 * flags: 1 on reduced axes of x; out: the reduction's value (keepdims as given). */
NX_HIDDEN nx_status nx_ir_ad_reduce(nx_graph *g, nx_node x, const int64_t *flags, int64_t monoid,
                                    bool keepdims, nx_node out, nx_node dy, nx_node *dx);

#endif /* NX_IR_ADJOINT_H */
