/* Fusion: which values of a program get a kernel of their own (DESIGN.md §4.4).
 *
 * Elementwise and movement nodes are computed inside their consumer: movement becomes index
 * arithmetic, elementwise becomes scalar code, so a chain like exp(a * b + c)[::2].T is one loop.
 * A reduction absorbs its producer expression the same way, which is the semiring K-loop fusion:
 * reduce_max(broadcast(A)[:, :, None] + broadcast(B)[None], axis=1) lowers to one kernel whose
 * loop over k reads A and B directly, and the M x K x N operand never exists. Gathers become loads
 * at a loaded index. A reduction over at most NX_FUSE_NESTED_MAX elements whose single consumer
 * is elementwise of the same shape, or is another reduction, is inlined too: the nested
 * reduction of ||x_i - y_j||^2 over a small D inside the loop over j.
 *
 * A node is materialised (ROOT) when it is an output, when more than one node reads it (computed
 * once, read from memory by each consumer, rather than recomputed), when it is a reduction not
 * inlined as above, or when it is a library primitive (scatter, sort, scan, extern, custom
 * monoid) or an operand of one: library routines read whole buffers. Index arithmetic is the
 * exception to "more than one reader": a value made only of iotas and scalar constants through
 * elementwise and movement nodes (a coordinate, a border test) is recomputed in every kernel
 * that reads it, since a few integer operations cost less than a kernel, a buffer and a load.
 * So is an elementwise or movement value whose readers, all but one, take small slices of it
 * (at most 1/NX_FUSE_SLICE_RATIO of its elements; the boundary samples of a line, say): each
 * such slice becomes a small kernel of its own that computes the few elements it needs from the
 * value's operands, and the value is computed only inside its one full reader, instead of being
 * written out and read back whole. The slices are materialised (not recomputed by their own
 * readers) so that a chain of such values (each one's slices read by the next) costs one
 * evaluation per level, not one per level and reader; the value's expression is bounded too
 * (NX_FUSE_RECOMPUTE_MAX nodes, counted as a tree). Finally, an inlined value nests at most
 * NX_FUSE_DEPTH_MAX levels below its kernel's root; a deeper operand is materialised, which
 * bounds the recursion of lowering and emission whatever the depth of the graph. */
#include <string.h>

#include "passes/fuse.h"

bool nx_fuse_is_library(int prim)
{
    switch (prim) {
    case NX_PRIM_SCATTER:
    case NX_PRIM_SORT:
    case NX_PRIM_ARGSORT:
    case NX_PRIM_SCAN:
    case NX_PRIM_SCAN_LINEAR:
    case NX_PRIM_SCAN_IIR:
    case NX_PRIM_EXTERN:
    case NX_PRIM_REDUCE_CUSTOM:
        return true;
    default:
        return false;
    }
}

static bool is_leaf_tensor(const nx_ir_node *n)
{
    if (n->op == NX_PRIM_INPUT || n->op == NX_PRIM_PARAMETER)
        return true;
    return n->op == NX_PRIM_CONSTANT && nx_ir_numel(n->ndim, n->shape) > 1;
}

static int64_t reduced_size(const nx_ir_store *s, const nx_ir_node *n)
{
    const nx_ir_node *x = nx_ir_node_at(s, nx_ir_node_ops(s, n)[0]);
    const int64_t *flag = nx_ir_node_attrs(s, n) + 2;
    int64_t size = 1;
    for (int d = 0; d < x->ndim; d++)
        if (flag[d])
            size *= x->shape[d];
    return size;
}

static bool same_shape(const nx_ir_node *a, const nx_ir_node *b)
{
    return a->ndim == b->ndim && memcmp(a->shape, b->shape, a->ndim * sizeof *a->shape) == 0;
}

/* A small reduction read once, by a same-shaped elementwise node or by another reduction. */
static bool nested_reduce(const nx_ir_store *s, const nx_ir_node *n, const nx_ir_node *consumer)
{
    if (n->op != NX_PRIM_REDUCE || !consumer || reduced_size(s, n) > NX_FUSE_NESTED_MAX)
        return false;
    int64_t m = nx_ir_node_attrs(s, n)[0];
    if (m == NX_MONOID_ARGMAX || m == NX_MONOID_ARGMIN)
        return false;
    if (consumer->op == NX_PRIM_REDUCE)
        return true;
    bool elementwise = nx_ir_prim_elementwise(consumer->op);
    return elementwise && same_shape(n, consumer);
}

#define MULTI UINT32_MAX

typedef struct fuse_state {
    uint32_t *uses;     /* distinct live consumers */
    nx_node *consumer;  /* the last consumer seen */
    uint32_t *owner;    /* the root whose kernel computes the value, MULTI when several do */
    bool *feeds_reduce; /* the value is part of some reduction's operand expression */
    int64_t *base;      /* elements of the largest tensor the value is made from, before any
                         * broadcast or window expands it */
    bool *index_only;   /* made of iotas and scalar constants only (elementwise and movement) */
    uint32_t *sliced;   /* consumers that are small slices of the value */
    int64_t *tree;      /* nodes of the value's elementwise/movement expression, as a tree */
    bool *split;        /* inlined although shared: its small slices are materialised */
    uint32_t *depth;    /* levels below the kernel root, the deepest over its consumers */
} fuse_state;

static bool is_elementwise(int op)
{
    return nx_ir_prim_elementwise(op);
}

static bool is_movement(int op)
{
    switch (op) {
    case NX_PRIM_RESHAPE:
    case NX_PRIM_PERMUTE:
    case NX_PRIM_BROADCAST:
    case NX_PRIM_SLICE:
    case NX_PRIM_PAD:
    case NX_PRIM_REVERSE:
    case NX_PRIM_CONCAT:
    case NX_PRIM_WINDOW:
        return true;
    default:
        return false;
    }
}

/* Several kernels need an inlined value. Recomputing it in each is what fusion must do when it
 * is an expanded reduction operand (broadcast(A) + broadcast(B) read by a max and a log-sum-exp
 * contraction would otherwise be materialised at M x K x N); anything else is materialised once. */
static bool small_sliced(const fuse_state *fs, nx_node id, const nx_ir_node *n)
{
    return fs->uses[id] > 1 && fs->uses[id] - fs->sliced[id] <= 1 &&
           fs->tree[id] <= NX_FUSE_RECOMPUTE_MAX && (is_elementwise(n->op) || is_movement(n->op));
}

static bool shared_root(const fuse_state *fs, nx_node id, const nx_ir_node *n)
{
    if (fs->uses[id] <= 1 || fs->owner[id] != MULTI)
        return false;
    if (small_sliced(fs, id, n))
        return false; /* computed in its full reader and in its small slices' kernels */
    bool expanded = fs->base[id] < nx_ir_numel(n->ndim, n->shape);
    return !(fs->feeds_reduce[id] && expanded && n->op != NX_PRIM_REDUCE);
}


static void compute_base(const nx_ir_store *s, int64_t *base, bool *index_only, int64_t *tree)
{
    for (nx_node id = 1; id <= s->n; id++) {
        const nx_ir_node *n = nx_ir_node_at(s, id);
        int64_t numel = nx_ir_numel(n->ndim, n->shape), b = 0;
        bool elementwise = is_elementwise(n->op);
        bool through = elementwise || n->op == NX_PRIM_BROADCAST || n->op == NX_PRIM_WINDOW ||
                       n->op == NX_PRIM_RESHAPE || n->op == NX_PRIM_PERMUTE;
        const nx_node *ops = nx_ir_node_ops(s, n);
        if (through)
            for (uint32_t k = 0; k < n->nops; k++)
                b = base[ops[k]] > b ? base[ops[k]] : b;
        base[id] = through ? b : numel;
        bool idx = n->op == NX_PRIM_IOTA || (n->op == NX_PRIM_CONSTANT && numel <= 1);
        if (elementwise || is_movement(n->op)) {
            idx = n->nops > 0;
            for (uint32_t k = 0; k < n->nops; k++)
                idx = idx && index_only[ops[k]];
        }
        index_only[id] = idx;
        int64_t t = 1;
        if (elementwise || is_movement(n->op))
            for (uint32_t k = 0; k < n->nops; k++)
                t += tree[ops[k]];
        tree[id] = t < INT32_MAX ? t : INT32_MAX;
    }
}

/* A slice taking at most 1/NX_FUSE_SLICE_RATIO of its operand. */
static bool small_slice(const nx_ir_store *s, const nx_ir_node *n)
{
    if (n->op != NX_PRIM_SLICE)
        return false;
    const nx_ir_node *o = nx_ir_node_at(s, nx_ir_node_ops(s, n)[0]);
    return nx_ir_numel(n->ndim, n->shape) * NX_FUSE_SLICE_RATIO <= nx_ir_numel(o->ndim, o->shape);
}

static void note_operands(const nx_ir_store *s, fuse_state *fs, nx_node id, uint8_t *role)
{
    const nx_ir_node *n = nx_ir_node_at(s, id);
    const nx_node *ops = nx_ir_node_ops(s, n);
    int nv = nx_ir_num_valops(n);
    bool lib = nx_fuse_is_library(n->op);
    uint32_t mine = role[id] == NX_FUSE_ROOT ? id : fs->owner[id];
    uint32_t below = role[id] == NX_FUSE_ROOT ? 1 : fs->depth[id] + 1;
    bool feeds = n->op == NX_PRIM_REDUCE || (role[id] == NX_FUSE_INLINE && fs->feeds_reduce[id]);
    for (int k = 0; k < nv; k++) {
        nx_node o = ops[k];
        bool repeat = false; /* x * x reads x in one place */
        for (int j = 0; j < k; j++)
            repeat = repeat || ops[j] == o;
        if (repeat)
            continue;
        fs->uses[o]++;
        fs->consumer[o] = id;
        fs->depth[o] = below > fs->depth[o] ? below : fs->depth[o];
        if (k == 0 && small_slice(s, n))
            fs->sliced[o]++;
        fs->owner[o] = fs->uses[o] == 1 || fs->owner[o] == mine ? mine : MULTI;
        fs->feeds_reduce[o] = fs->feeds_reduce[o] || feeds;
        if (lib && !is_leaf_tensor(nx_ir_node_at(s, o)))
            role[o] = NX_FUSE_ROOT;
        else if (role[o] == NX_FUSE_DEAD)
            role[o] = NX_FUSE_INLINE; /* provisional: decided when visited */
    }
}

static nx_fuse_role decide(const nx_ir_store *s, fuse_state *fs, nx_node id)
{
    const nx_ir_node *n = nx_ir_node_at(s, id);
    if (n->op == NX_PRIM_CONSTANT || n->op == NX_PRIM_IOTA)
        return NX_FUSE_INLINE; /* a scalar or an index: cheaper to recompute than to load */
    if (fs->depth[id] > NX_FUSE_DEPTH_MAX)
        return NX_FUSE_ROOT; /* bounds the nesting of a kernel's expression */
    if (fs->index_only[id])
        return NX_FUSE_INLINE;
    bool root = nx_fuse_is_library(n->op) || shared_root(fs, id, n);
    fs->split[id] = !root && fs->owner[id] == MULTI && small_sliced(fs, id, n);
    if (n->op == NX_PRIM_REDUCE)
        root = root || fs->uses[id] > 1 ||
               !nested_reduce(s, n, fs->consumer[id] ? nx_ir_node_at(s, fs->consumer[id]) : NULL);
    return root ? NX_FUSE_ROOT : NX_FUSE_INLINE;
}

/* The small slices of a value inlined by small_sliced become kernels of their own. */
static void root_slices(const nx_ir_store *s, const fuse_state *fs, uint8_t *role)
{
    for (nx_node id = 1; id <= s->n; id++) {
        const nx_ir_node *n = nx_ir_node_at(s, id);
        if (role[id] == NX_FUSE_INLINE && n->op == NX_PRIM_SLICE &&
            fs->split[nx_ir_node_ops(s, n)[0]] && small_slice(s, n))
            role[id] = NX_FUSE_ROOT;
    }
}

nx_status nx_pass_fuse(nx_ctx *ctx, const nx_ir_store *s, int noutputs, const nx_node *outputs,
                       uint8_t *role)
{
    size_t slots = (size_t)s->n + 1;
    fuse_state fs = {
        nx_rt_calloc(ctx, slots, sizeof(uint32_t)),
        nx_rt_calloc(ctx, slots, sizeof(nx_node)),
        nx_rt_calloc(ctx, slots, sizeof(uint32_t)),
        nx_rt_calloc(ctx, slots, sizeof(bool)),
        nx_rt_calloc(ctx, slots, sizeof(int64_t)),
        nx_rt_calloc(ctx, slots, sizeof(bool)),
        nx_rt_calloc(ctx, slots, sizeof(uint32_t)),
        nx_rt_calloc(ctx, slots, sizeof(int64_t)),
        nx_rt_calloc(ctx, slots, sizeof(bool)),
        nx_rt_calloc(ctx, slots, sizeof(uint32_t)),
    };
    nx_status st = NX_OK;
    if (!fs.uses || !fs.consumer || !fs.owner || !fs.feeds_reduce || !fs.base || !fs.index_only ||
        !fs.sliced || !fs.tree || !fs.split || !fs.depth) {
        st = nx_rt_nomem(ctx, "fusion", slots * 39);
    } else {
        compute_base(s, fs.base, fs.index_only, fs.tree);
        memset(role, NX_FUSE_DEAD, slots);
        for (int i = 0; i < noutputs; i++)
            role[outputs[i]] = NX_FUSE_ROOT;
        /* Reverse id order visits every consumer before its operands (ids are topological). */
        for (nx_node id = s->n; id >= 1; id--) {
            if (role[id] == NX_FUSE_DEAD)
                continue;
            if (is_leaf_tensor(nx_ir_node_at(s, id))) {
                role[id] = NX_FUSE_LEAF;
                continue;
            }
            if (role[id] != NX_FUSE_ROOT)
                role[id] = (uint8_t)decide(s, &fs, id);
            note_operands(s, &fs, id, role);
        }
        root_slices(s, &fs, role);
    }
    nx_rt_free(ctx, fs.uses, slots * sizeof(uint32_t));
    nx_rt_free(ctx, fs.consumer, slots * sizeof(nx_node));
    nx_rt_free(ctx, fs.owner, slots * sizeof(uint32_t));
    nx_rt_free(ctx, fs.feeds_reduce, slots * sizeof(bool));
    nx_rt_free(ctx, fs.base, slots * sizeof(int64_t));
    nx_rt_free(ctx, fs.index_only, slots * sizeof(bool));
    nx_rt_free(ctx, fs.sliced, slots * sizeof(uint32_t));
    nx_rt_free(ctx, fs.tree, slots * sizeof(int64_t));
    nx_rt_free(ctx, fs.split, slots * sizeof(bool));
    nx_rt_free(ctx, fs.depth, slots * sizeof(uint32_t));
    return st;
}
