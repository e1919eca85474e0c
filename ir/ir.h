/* Graph IR internals shared by ir/, frontend/ and the passes: node storage, the primitive table,
 * the builder plumbing and the reference interpreter's value helpers. Not installed.
 *
 * A node is immutable once made. Its operands, int64 attributes and byte blob live in three
 * growing arrays of its store; the node keeps offsets into them, so a store can be copied or grown
 * without fixing pointers. Node 0 is the none handle and is never stored.
 *
 * Attribute layouts, per primitive (n = ndim of the first operand unless said otherwise):
 *   INPUT, PARAMETER  [dtype, ndim, shape[ndim], index]   blob: the name, NUL-terminated
 *   CONSTANT          [dtype, ndim, shape[ndim]]          blob: the data, C order
 *   IOTA              [dtype, ndim, shape[ndim], axis]
 *   PLACEHOLDER       [dtype, serial]
 *   CAST              [dtype]
 *   RESHAPE, BROADCAST [ndim, shape[ndim]]
 *   PERMUTE           [perm[n]]
 *   SLICE             [start[n], stop[n], step[n]]
 *   PAD               [mode, bits of the double cval, lo[n], hi[n]]
 *   REVERSE           [flag[n]]                           1: the axis is reversed
 *   CONCAT            [axis]
 *   WINDOW            [window[n], stride[n], dilation[n]]
 *   GATHER            [axis]
 *   SCATTER           [axis, monoid]
 *   REDUCE            [monoid, keepdims, flag[n]]         1: the axis is reduced
 *   REDUCE_CUSTOM     [ncarry, keepdims, flag[n]]; operands x, then the monoid's expressions
 *                     (see NX_RC_* below)
 *   SCAN              [axis, monoid, reverse]
 *   SCAN_LINEAR       [axis, reverse]
 *   SCAN_IIR          [axis, reverse, order, bits of the double c_1 .. c_order]
 *   SORT, ARGSORT     [axis, descending, k]
 *   EXTERN            [the nx_extern_def pointer]
 */
#ifndef NX_IR_H
#define NX_IR_H

#include <stdio.h>

#include "internal.h"
#include "tensor.h"

typedef enum nx_prim {
#define NX_PRIM(ID, ...) NX_PRIM_##ID,
#include "prims.def"
#undef NX_PRIM
    NX_PRIM_COUNT
} nx_prim;

/* The kind of a primitive (the class column of ir/prims.def). Passes and backends that treat a
 * kind alike ask nx_ir_prim_class or nx_ir_prim_elementwise, never a range of enum values: rows
 * may be added anywhere in the table. */
typedef enum nx_ir_pclass {
    NX_PCLASS_NONE, /* not a primitive (an id out of range) */
    NX_PCLASS_LEAF,
    NX_PCLASS_UNARY,   /* one operand, same dtype (isnan: -> bool) */
    NX_PCLASS_BINARY,  /* two operands of one dtype, same dtype out */
    NX_PCLASS_COMPARE, /* two operands of one dtype, bool out */
    NX_PCLASS_LOGIC,   /* bool operands, bool out (not, and, or) */
    NX_PCLASS_SELECT,
    NX_PCLASS_CAST,
    NX_PCLASS_MOVEMENT, /* views: no arithmetic */
    NX_PCLASS_INDEX,    /* gather, scatter */
    NX_PCLASS_REDUCE,
    NX_PCLASS_SCAN,
    NX_PCLASS_SORT,
    NX_PCLASS_EXTERN,
} nx_ir_pclass;

typedef enum nx_ir_adj {
    NX_ADJ_NONE = 1, /* not differentiable */
    NX_ADJ_SLOT,     /* differentiable: the rule goes in the row's vjp slot */
    NX_ADJ_FLOAT,    /* differentiable between float dtypes only (casts to or from integers) */
} nx_ir_adj;

#define NX_IR_MSG 512

/* ---- storage -------------------------------------------------------------------------------*/

typedef struct nx_ir_node {
    uint16_t op; /* nx_prim */
    uint8_t dtype;
    uint8_t ndim;
    uint32_t nops, ops;     /* operands: store->operands[ops .. ops + nops) */
    uint32_t nattrs, attrs; /* store->attrs[attrs .. attrs + nattrs) */
    uint64_t blob, nblob;   /* store->blob[blob .. blob + nblob) */
    uint64_t hash;
    int64_t shape[NX_MAX_DIMS];
} nx_ir_node;

typedef struct nx_ir_store {
    nx_ctx *ctx;
    nx_ir_node *nodes; /* nodes[1 .. n]; nodes[0] is unused */
    size_t nodes_cap;
    uint32_t n;
    nx_node *operands;
    size_t operands_cap, noperands;
    int64_t *attrs;
    size_t attrs_cap, nattrs;
    uint8_t *blob;
    size_t blob_cap, nblob;
} nx_ir_store;

struct nx_graph {
    nx_ir_store s;
    uint32_t *table; /* open addressing over node ids, 0 = empty; capacity a power of two */
    size_t table_cap;
    nx_node *inputs; /* inputs and parameters, in creation order */
    size_t inputs_cap;
    uint32_t ninputs;
    uint32_t nplaceholders;
    nx_status status;
    char msg[NX_IR_MSG];
};

static inline const nx_ir_node *nx_ir_node_at(const nx_ir_store *s, nx_node id)
{
    return &s->nodes[id];
}
/* An array is NULL until its first element is stored, and NULL + 0 is undefined in C. */
static inline const nx_node *nx_ir_node_ops(const nx_ir_store *s, const nx_ir_node *n)
{
    return s->operands ? s->operands + n->ops : NULL;
}
static inline const int64_t *nx_ir_node_attrs(const nx_ir_store *s, const nx_ir_node *n)
{
    return s->attrs ? s->attrs + n->attrs : NULL;
}
static inline const uint8_t *nx_ir_node_blob(const nx_ir_store *s, const nx_ir_node *n)
{
    return s->blob ? s->blob + n->blob : NULL;
}

NX_HIDDEN void nx_ir_store_free(nx_ir_store *s);

/* ---- signatures, checks, protos ------------------------------------------------------------*/

typedef struct nx_ir_sig {
    nx_dtype dtype;
    int ndim;
    int64_t shape[NX_MAX_DIMS];
} nx_ir_sig;

/* Where a shape rule writes its complaint: "<fn>: <what was wrong and what was expected>". */
typedef struct nx_ir_check {
    const char *fn;
    nx_status status;
    char msg[NX_IR_MSG];
} nx_ir_check;

NX_HIDDEN nx_status nx_ir_fail(nx_ir_check *ck, nx_status st, const char *fmt, ...) NX_PRINTF(3, 4);

/* A node about to be made (or, in the verifier, being re-derived). */
typedef struct nx_ir_proto {
    nx_prim op;
    int nops;
    const nx_node *ops;
    const nx_ir_sig *ins; /* ins[k]: operand k's dtype and shape */
    int nattrs;
    const int64_t *attrs;
    size_t nblob;
    const void *blob;
} nx_ir_proto;

/* ---- the primitive table -------------------------------------------------------------------*/

typedef struct nx_ir_eval nx_ir_eval;

typedef nx_status (*nx_ir_shape_fn)(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p,
                                    nx_ir_sig *out);
/* ins: the value operands as contiguous host tensors; out: allocated with the node's signature,
 * C-contiguous, zero-filled. */
typedef nx_status (*nx_ir_ref_fn)(const nx_ir_eval *ev, const nx_ir_node *n,
                                  const nx_tensor *const *ins, nx_tensor *out);
typedef void (*nx_ir_attrs_fn)(FILE *f, const nx_ir_store *s, const nx_ir_node *n);
/* The adjoint rule of node y (ir/adjoint.h has the contract): dy is y's cotangent (same dtype
 * and shape, never zero); dx[k] receives operand k's cotangent, NX_NONE for zero. */
typedef nx_status (*nx_ir_vjp_fn)(nx_graph *g, nx_node y, nx_node dy, nx_node *dx);

typedef struct nx_ir_prim_info {
    nx_prim op;
    const char *name;
    nx_ir_pclass cls;
    int arity;  /* -1: variadic */
    int valops; /* -1: all operands are values */
    nx_ir_shape_fn shape;
    nx_ir_ref_fn ref;
    nx_ir_attrs_fn attrs;
    nx_ir_adj adj;
    nx_ir_vjp_fn vjp; /* NULL exactly for NX_ADJ_NONE rows */
    const char *shape_doc;
    const char *math_doc;
} nx_ir_prim_info;

NX_HIDDEN extern const nx_ir_prim_info nx_ir_prims[NX_PRIM_COUNT];

/* The class of primitive op; NX_PCLASS_NONE for an id that is not a primitive (kernel IR is
 * validated with it). */
static inline nx_ir_pclass nx_ir_prim_class(int op)
{
    return op >= 0 && op < NX_PRIM_COUNT ? nx_ir_prims[op].cls : NX_PCLASS_NONE;
}

/* Whether op computes each element from the same element of its operands: the rows that fuse
 * into loops and lower to kernel-IR PRIM instructions. */
static inline bool nx_ir_prim_elementwise(int op)
{
    switch (nx_ir_prim_class(op)) {
    case NX_PCLASS_UNARY:
    case NX_PCLASS_BINARY:
    case NX_PCLASS_COMPARE:
    case NX_PCLASS_LOGIC:
    case NX_PCLASS_SELECT:
    case NX_PCLASS_CAST:
        return true;
    default:
        return false;
    }
}

#define NX_PRIM(ID, name, cls, arity, valops, rule, ref, attrs, ...)                               \
    NX_HIDDEN nx_status nx_ir_shape_##rule(nx_ir_check *ck, const nx_ir_store *s,                  \
                                           const nx_ir_proto *p, nx_ir_sig *out);                  \
    NX_HIDDEN nx_status nx_ir_ref_##ref(const nx_ir_eval *ev, const nx_ir_node *n,                 \
                                        const nx_tensor *const *ins, nx_tensor *out);              \
    NX_HIDDEN void nx_ir_attrs_##attrs(FILE *f, const nx_ir_store *s, const nx_ir_node *n);
#include "prims.def"
#undef NX_PRIM

/* The adjoint rules named in the vjp column, one per family (defined next to the shape rules). */
NX_HIDDEN nx_status nx_ir_vjp_unary(nx_graph *g, nx_node y, nx_node dy, nx_node *dx);
NX_HIDDEN nx_status nx_ir_vjp_binary(nx_graph *g, nx_node y, nx_node dy, nx_node *dx);
NX_HIDDEN nx_status nx_ir_vjp_select(nx_graph *g, nx_node y, nx_node dy, nx_node *dx);
NX_HIDDEN nx_status nx_ir_vjp_cast(nx_graph *g, nx_node y, nx_node dy, nx_node *dx);
NX_HIDDEN nx_status nx_ir_vjp_reshape(nx_graph *g, nx_node y, nx_node dy, nx_node *dx);
NX_HIDDEN nx_status nx_ir_vjp_permute(nx_graph *g, nx_node y, nx_node dy, nx_node *dx);
NX_HIDDEN nx_status nx_ir_vjp_broadcast(nx_graph *g, nx_node y, nx_node dy, nx_node *dx);
NX_HIDDEN nx_status nx_ir_vjp_slice(nx_graph *g, nx_node y, nx_node dy, nx_node *dx);
NX_HIDDEN nx_status nx_ir_vjp_pad(nx_graph *g, nx_node y, nx_node dy, nx_node *dx);
NX_HIDDEN nx_status nx_ir_vjp_reverse(nx_graph *g, nx_node y, nx_node dy, nx_node *dx);
NX_HIDDEN nx_status nx_ir_vjp_concat(nx_graph *g, nx_node y, nx_node dy, nx_node *dx);
NX_HIDDEN nx_status nx_ir_vjp_window(nx_graph *g, nx_node y, nx_node dy, nx_node *dx);
NX_HIDDEN nx_status nx_ir_vjp_gather(nx_graph *g, nx_node y, nx_node dy, nx_node *dx);
NX_HIDDEN nx_status nx_ir_vjp_scatter(nx_graph *g, nx_node y, nx_node dy, nx_node *dx);
NX_HIDDEN nx_status nx_ir_vjp_reduce(nx_graph *g, nx_node y, nx_node dy, nx_node *dx);
NX_HIDDEN nx_status nx_ir_vjp_reduce_custom(nx_graph *g, nx_node y, nx_node dy, nx_node *dx);
NX_HIDDEN nx_status nx_ir_vjp_scan(nx_graph *g, nx_node y, nx_node dy, nx_node *dx);
NX_HIDDEN nx_status nx_ir_vjp_scan_linear(nx_graph *g, nx_node y, nx_node dy, nx_node *dx);
NX_HIDDEN nx_status nx_ir_vjp_scan_iir(nx_graph *g, nx_node y, nx_node dy, nx_node *dx);
NX_HIDDEN nx_status nx_ir_vjp_sort(nx_graph *g, nx_node y, nx_node dy, nx_node *dx);
NX_HIDDEN nx_status nx_ir_vjp_extern(nx_graph *g, nx_node y, nx_node dy, nx_node *dx);

/* Verifies the table: row i is op i, every row has a name, a shape rule, a reference kernel, an
 * attribute printer, and exactly one of an adjoint rule and the non-differentiable flag.
 * NX_ERR_INTERNAL with the row named otherwise. */
NX_HIDDEN nx_status nx_ir_selfcheck(nx_ctx *ctx);
NX_HIDDEN const char *nx_ir_prim_name(int op);
/* Whether a cotangent flows through node id (row flag, dtypes, monoid, extern vjp). */
NX_HIDDEN bool nx_ir_differentiable(const nx_ir_store *s, nx_node id);
/* Number of operands of n that are tensor values (the rest are monoid expressions). */
NX_HIDDEN int nx_ir_num_valops(const nx_ir_node *n);

/* ---- building ------------------------------------------------------------------------------*/

/* Records the first error of g (later ones are dropped) and mirrors it on the context. */
NX_HIDDEN void nx_ir_graph_fail(nx_graph *g, nx_status st, const char *msg);
NX_HIDDEN nx_node nx_ir_graph_failf(nx_graph *g, nx_status st, const char *fmt, ...)
    NX_PRINTF(3, 4);
/* Checks operands (none propagates, out-of-range is an error), runs the primitive's shape rule
 * and returns the existing equal node or a new one; NX_NONE with the error recorded. */
NX_HIDDEN nx_node nx_ir_make(nx_graph *g, const char *fn, nx_prim op, int nops, const nx_node *ops,
                             int nattrs, const int64_t *attrs, size_t nblob, const void *blob);
/* Checks that operand handles are usable: true when all are valid nodes; otherwise records the
 * error (or propagates none silently) and returns false. */
NX_HIDDEN bool nx_ir_check_handles(nx_graph *g, const char *fn, int n, const nx_node *ops);
/* The signature of node id of s. */
NX_HIDDEN void nx_ir_sig_of(const nx_ir_store *s, nx_node id, nx_ir_sig *out);
/* The checks every non-leaf, non-cast node shares (no f16/bf16 operands). */
NX_HIDDEN nx_status nx_ir_check_common(nx_ir_check *ck, const nx_ir_proto *p);
/* A result signature every rule must satisfy: nonnegative extents, byte size within int64. */
NX_HIDDEN nx_status nx_ir_check_result(nx_ir_check *ck, const nx_ir_sig *out);
/* Appends a node copied from another store (operands already renumbered), no hash-consing. */
NX_HIDDEN nx_node nx_ir_store_append(nx_ir_store *s, const nx_ir_node *src, const nx_node *ops,
                                     const int64_t *attrs, const void *blob);

/* ---- dtypes, shapes, attributes ------------------------------------------------------------*/

static inline bool nx_ir_is_half(nx_dtype d)
{
    return d == NX_DTYPE_F16 || d == NX_DTYPE_BF16;
}
static inline bool nx_ir_is_core_float(nx_dtype d)
{
    return d == NX_DTYPE_F32 || d == NX_DTYPE_F64;
}
static inline bool nx_ir_is_float(nx_dtype d)
{
    return nx_ir_is_core_float(d) || nx_ir_is_half(d);
}
static inline bool nx_ir_is_int(nx_dtype d)
{
    return d == NX_DTYPE_I8 || d == NX_DTYPE_I16 || d == NX_DTYPE_I32 || d == NX_DTYPE_I64 ||
           d == NX_DTYPE_U8 || d == NX_DTYPE_U32 || d == NX_DTYPE_U64;
}
/* u8, u32, u64: integers whose values are read as unsigned (a u64 is carried in an int64's
 * bits). */
static inline bool nx_ir_is_unsigned(nx_dtype d)
{
    return d == NX_DTYPE_U8 || d == NX_DTYPE_U32 || d == NX_DTYPE_U64;
}
static inline bool nx_ir_dtype_ok(int64_t d)
{
    return d >= 0 && d < NX_DTYPE_COUNT;
}
/* "f32" or "dtype(17)" into a static-free buffer. */
NX_HIDDEN const char *nx_ir_dtype_str(char *buf, size_t len, int64_t d);

/* NumPy broadcasting of two shapes into out; false with a message naming fn and the dim. */
NX_HIDDEN nx_status nx_ir_broadcast_shapes(nx_ir_check *ck, const nx_ir_sig *a, const nx_ir_sig *b,
                                           const char *what_a, const char *what_b, nx_ir_sig *out);
/* Normalises axis (negative counts from the end) into [0, ndim); false if out of range. */
NX_HIDDEN bool nx_ir_axis(int axis, int ndim, int *out);
/* Normalises naxes axes (negative count from the end) of an ndim-d value into ndim 0/1 flags;
 * false with the graph error recorded (out of range, repeated, NULL). */
NX_HIDDEN bool nx_ir_axes_flags(nx_graph *g, const char *fn, int naxes, const int *axes, int ndim,
                                int64_t *flags);
NX_HIDDEN const char *nx_ir_monoid_name(int64_t m);
NX_HIDDEN const char *nx_ir_pad_mode_name(int64_t m);

/* ---- values (ir/value.c) -------------------------------------------------------------------*/

/* A scalar of some dtype: floats use f, integers and bool use i. */
typedef struct nx_ir_val {
    double f;
    int64_t i;
} nx_ir_val;

NX_HIDDEN nx_ir_val nx_ir_get(const void *base, nx_dtype dt, int64_t idx);
NX_HIDDEN void nx_ir_put(void *base, nx_dtype dt, int64_t idx, nx_ir_val v);
/* Rounds v to what dtype dt can hold (f32 rounding, integer wrap-around, bool 0/1). */
NX_HIDDEN nx_ir_val nx_ir_fix(nx_ir_val v, nx_dtype dt);
/* numpy astype semantics (floats to ints truncate and saturate, NaN -> 0). */
NX_HIDDEN nx_ir_val nx_ir_convert(nx_ir_val v, nx_dtype from, nx_dtype to);
NX_HIDDEN nx_ir_val nx_ir_from_double(double x, nx_dtype dt);
NX_HIDDEN double nx_ir_to_double(nx_ir_val v, nx_dtype dt);

/* Advances the C-order multi-index idx over shape; false after the last element. */
static inline bool nx_ir_next(int ndim, const int64_t *shape, int64_t *idx)
{
    for (int d = ndim - 1; d >= 0; d--) {
        if (++idx[d] < shape[d])
            return true;
        idx[d] = 0;
    }
    return false;
}
NX_HIDDEN int64_t nx_ir_numel(int ndim, const int64_t *shape);
/* Strides in elements that read x (contiguous) broadcast to out's shape: 0 where x has 1. */
NX_HIDDEN void nx_ir_bcast_strides(const nx_tensor *x, int ndim, const int64_t *shape,
                                   int64_t *strides);
NX_HIDDEN nx_status nx_ir_tensor_new(nx_ctx *ctx, const nx_ir_sig *sig, nx_tensor **out);
/* A C-contiguous host copy of t (any strides). */
NX_HIDDEN nx_status nx_ir_tensor_contiguous_copy(nx_ctx *ctx, const nx_tensor *t, nx_tensor **out);

/* ---- evaluation (ir/interp.c) --------------------------------------------------------------*/

struct nx_ir_eval {
    nx_ctx *ctx;
    const nx_ir_store *s;
    const nx_tensor *const *inputs; /* contiguous host tensors, by input index */
};

/* last_use of a value read by no later node of the order: an output's. */
#define NX_IR_KEEP UINT32_MAX

/* last_use[id] (s->n + 1 entries): the position in order[0 .. norder) of the last node reading
 * value id, NX_IR_KEEP for the outputs. */
NX_HIDDEN void nx_ir_last_use(const nx_ir_store *s, uint32_t norder, const nx_node *order,
                              int noutputs, const nx_node *outputs, uint32_t *last_use);
/* The reference interpreter: evaluates order[0 .. norder) (value nodes of s, ascending ids) with
 * their primitives' reference kernels, freeing each value after its last_use, and sets
 * results[0 .. noutputs) to C-contiguous host copies of the outputs. inputs: contiguous host
 * tensors by input index. On failure the results already made are left for the caller to free. */
NX_HIDDEN nx_status nx_ir_interpret(nx_ctx *ctx, const nx_ir_store *s, uint32_t norder,
                                    const nx_node *order, const uint32_t *last_use, int noutputs,
                                    const nx_node *outputs, const nx_tensor *const *inputs,
                                    nx_tensor **results);

/* Scalar evaluation of a custom monoid's expressions: the nodes of a 0-d expression DAG over
 * placeholders, constants, elementwise ops, select and cast. */
NX_HIDDEN nx_ir_val nx_ir_scalar_unary(nx_prim op, nx_dtype in, nx_dtype out, nx_ir_val x);
NX_HIDDEN nx_ir_val nx_ir_scalar_binary(nx_prim op, nx_dtype in, nx_dtype out, nx_ir_val a,
                                        nx_ir_val b);

/* Operand layout of REDUCE_CUSTOM with c = ncarry:
 *   0 x | 1 placeholder x | 2.. a[c] | b[c] | lift[c] | combine[c] | identity[c] | finalize */
#define NX_RC_PX 1
#define NX_RC_A(c, i) (2 + (i))
#define NX_RC_B(c, i) (2 + (c) + (i))
#define NX_RC_LIFT(c, i) (2 + 2 * (c) + (i))
#define NX_RC_COMBINE(c, i) (2 + 3 * (c) + (i))
#define NX_RC_IDENTITY(c, i) (2 + 4 * (c) + (i))
#define NX_RC_FINALIZE(c) (2 + 5 * (c))
#define NX_RC_NOPS(c) (3 + 5 * (c))

/* Structure and re-derived signatures of every node; the message is "<who>: %id (op): ...". */
NX_HIDDEN nx_status nx_ir_verify_store(nx_ctx *ctx, const nx_ir_store *s, const char *who);

/* The built-in monoids' fold, shared by reduce and scan (ir/prim-reduce.c). */
typedef struct nx_ir_carry {
    nx_ir_val v; /* the running value (sum, prod, max, min), or m of logsumexp */
    double s;    /* logsumexp: sum of exp(x - m) */
    int64_t arg; /* argmax/argmin: index of the winner */
    bool nan;    /* a NaN has been seen */
} nx_ir_carry;
NX_HIDDEN nx_ir_carry nx_ir_monoid_init(int64_t m, nx_dtype d);
/* Folds element x, the k-th of its line (k counts from 0), into c. */
NX_HIDDEN void nx_ir_monoid_step(nx_ir_carry *c, int64_t m, nx_dtype d, nx_ir_val x, int64_t k);
NX_HIDDEN nx_ir_val nx_ir_monoid_finish(const nx_ir_carry *c, int64_t m, nx_dtype d);
/* Whether monoid m folds dtype d (message names both otherwise). */
NX_HIDDEN nx_status nx_ir_monoid_dtype(nx_ir_check *ck, int64_t m, nx_dtype d);

/* ---- printing ------------------------------------------------------------------------------*/

NX_HIDDEN void nx_ir_print_store(const nx_ir_store *s, nx_node root, FILE *f);
NX_HIDDEN void nx_ir_print_axes(FILE *f, const char *name, int n, const int64_t *v);
NX_HIDDEN void nx_ir_print_flags(FILE *f, const char *name, int n, const int64_t *flags);

#endif /* NX_IR_H */
