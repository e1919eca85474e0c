/*
 * nitrix graph IR: the builder API.
 *
 * Every op in nitrix is a small expression graph. A graph owns an arena of immutable, hash-consed
 * nodes; a value is a 32-bit handle (nx_node), 0 meaning none. Shapes and dtypes are static.
 * Elementwise binary builders broadcast with NumPy's rules; operands must share a dtype (use
 * nx_cast: there is no implicit promotion).
 *
 * Errors never abort. A builder that fails records the first error in the graph and returns 0;
 * every builder given a 0 operand returns 0 without a new message, so nested calls are safe:
 *
 *     nx_node y = nx_add(g, nx_mul(g, a, x), b);    // 0 if anything failed
 *     if (nx_graph_status(g) != NX_OK) puts(nx_graph_error(g));
 *
 * nx_graph_compile reports the recorded error too. A handle that is not a node of the graph (out of
 * range, garbage) is an error (NX_ERR_INVALID_ARG), never a crash; NX_NONE given to a builder when
 * no earlier builder failed is an error too.
 *
 * Conventions shared by every builder:
 *   - dtypes: f32 and f64 are the numeric core; integer dtypes take arithmetic (wrapping at their
 *     width), comparisons and indexing; bool takes and/or/not, comparisons and select. f16 and
 *     bf16 are storage types: only leaves and nx_cast accept them (NX_ERR_DTYPE elsewhere).
 *   - axes may be negative, counting from the end as numpy does; repeated axes are an error.
 *   - messages name the builder, say what was wrong and what was expected:
 *     "nx_add: shapes [2,3] and [4,3] disagree at dim 0 (2 vs 4) and neither is 1".
 *   - nodes are hash-consed: building the same expression twice returns the same handle. Inputs,
 *     parameters and placeholders are never merged; constants with equal dtype, shape and bytes
 *     are one node.
 *
 * Example — y = sum_j exp(x_ij) over a 2x3 input, run on the reference interpreter:
 *
 *     nx_graph *g = NULL;
 *     nx_graph_new(ctx, &g);
 *     int64_t shape[2] = {2, 3};
 *     nx_node x = nx_input(g, "x", NX_DTYPE_F64, 2, shape);
 *     int axis = 1;
 *     nx_node y = nx_reduce(g, nx_exp(g, x), 1, &axis, NX_MONOID_SUM, false);
 *     nx_compile_opts opts = {.backend = NX_BACKEND_REF, .n_outputs = 1, .outputs = &y};
 *     nx_program *p = NULL;
 *     if (nx_graph_compile(g, &opts, &p) == NX_OK) {
 *         nx_tensor *out = NULL;
 *         nx_program_run(p, (const nx_tensor *const[]){xt}, &out);   // out: shape (2,)
 *         ...
 *     }
 */
#ifndef NITRIX_GRAPH_H
#define NITRIX_GRAPH_H

#include <stdio.h>

#include "nitrix.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef uint32_t nx_node;
#define NX_NONE ((nx_node)0)

typedef struct nx_graph nx_graph;
typedef struct nx_program nx_program;

NX_API nx_status nx_graph_new(nx_ctx *ctx, nx_graph **out);
NX_API void nx_graph_free(nx_graph *g);
NX_API nx_ctx *nx_graph_ctx(const nx_graph *g);
/* The first error recorded by a builder (NX_OK if none), and its message ("" if none). */
NX_API nx_status nx_graph_status(const nx_graph *g);
NX_API const char *nx_graph_error(const nx_graph *g);

/* Node introspection. Out-of-range handles give NX_DTYPE_COUNT / -1 / false. */
NX_API nx_dtype nx_node_dtype(const nx_graph *g, nx_node n);
NX_API int nx_node_ndim(const nx_graph *g, nx_node n);
NX_API bool nx_node_shape(const nx_graph *g, nx_node n, int64_t shape[NX_MAX_DIMS]);
NX_API uint32_t nx_graph_num_nodes(const nx_graph *g); /* valid handles are 1..num_nodes */

/* Checks every node: handle ranges, arity, dtypes and shapes against each primitive's rules.
 * Graphs built through this API always verify; the verifier guards the passes. */
NX_API nx_status nx_graph_verify(nx_graph *g);
/* Stable, readable text: one node per line, "%7 = add %3, %5 : f32[2,3]". root == NX_NONE prints
 * the whole graph, otherwise only the nodes root depends on. */
NX_API nx_status nx_graph_print(const nx_graph *g, nx_node root, FILE *f);

/* ------------------------------------------------------------------------------------------------
 * Leaves
 * ----------------------------------------------------------------------------------------------*/

/* Inputs and parameters are the program's positional arguments, in the order they were created.
 * A parameter is an input that gradients are taken with respect to by default. name may be NULL;
 * it is copied (up to 255 bytes) and used in messages and printing. */
NX_API nx_node nx_input(nx_graph *g, const char *name, nx_dtype dtype, int ndim,
                        const int64_t *shape);
NX_API nx_node nx_parameter(nx_graph *g, const char *name, nx_dtype dtype, int ndim,
                            const int64_t *shape);
/* A constant; data (C order, numel * dtype size bytes) is copied into the graph. */
NX_API nx_node nx_constant(nx_graph *g, nx_dtype dtype, int ndim, const int64_t *shape,
                           const void *data);
/* A 0-d constant holding value converted to dtype. */
NX_API nx_node nx_scalar(nx_graph *g, nx_dtype dtype, double value);
/* y[i_0, ..., i_{n-1}] = i_axis, converted to dtype (ndim >= 1; bool gives i_axis != 0). */
NX_API nx_node nx_iota(nx_graph *g, nx_dtype dtype, int ndim, const int64_t *shape, int axis);

/* ------------------------------------------------------------------------------------------------
 * Elementwise
 * ----------------------------------------------------------------------------------------------*/

NX_API nx_node nx_neg(nx_graph *g, nx_node x);
NX_API nx_node nx_abs(nx_graph *g, nx_node x);
NX_API nx_node nx_exp(nx_graph *g, nx_node x);
NX_API nx_node nx_log(nx_graph *g, nx_node x);
NX_API nx_node nx_log1p(nx_graph *g, nx_node x);
NX_API nx_node nx_expm1(nx_graph *g, nx_node x);
NX_API nx_node nx_sqrt(nx_graph *g, nx_node x);
NX_API nx_node nx_rsqrt(nx_graph *g, nx_node x);
NX_API nx_node nx_sin(nx_graph *g, nx_node x);
NX_API nx_node nx_cos(nx_graph *g, nx_node x);
NX_API nx_node nx_tanh(nx_graph *g, nx_node x);
NX_API nx_node nx_erf(nx_graph *g, nx_node x);
NX_API nx_node nx_floor(nx_graph *g, nx_node x);
NX_API nx_node nx_ceil(nx_graph *g, nx_node x);
NX_API nx_node nx_round(nx_graph *g, nx_node x); /* half to even, as numpy.round */
NX_API nx_node nx_sign(nx_graph *g, nx_node x);
NX_API nx_node nx_isnan(nx_graph *g, nx_node x); /* -> bool */
NX_API nx_node nx_not(nx_graph *g, nx_node x);   /* bool -> bool */

NX_API nx_node nx_add(nx_graph *g, nx_node a, nx_node b);
NX_API nx_node nx_sub(nx_graph *g, nx_node a, nx_node b);
NX_API nx_node nx_mul(nx_graph *g, nx_node a, nx_node b);
NX_API nx_node nx_div(nx_graph *g, nx_node a, nx_node b); /* integers: floor (numpy //), x/0 = 0 */
NX_API nx_node nx_pow(nx_graph *g, nx_node a, nx_node b);
NX_API nx_node nx_minimum(nx_graph *g, nx_node a, nx_node b); /* NaN-propagating, as numpy */
NX_API nx_node nx_maximum(nx_graph *g, nx_node a, nx_node b);
NX_API nx_node nx_atan2(nx_graph *g, nx_node a, nx_node b);
NX_API nx_node nx_mod(nx_graph *g, nx_node a, nx_node b); /* sign of b, numpy.mod; int x%0 = 0 */
NX_API nx_node nx_eq(nx_graph *g, nx_node a, nx_node b);  /* comparisons -> bool */
NX_API nx_node nx_ne(nx_graph *g, nx_node a, nx_node b);
NX_API nx_node nx_lt(nx_graph *g, nx_node a, nx_node b);
NX_API nx_node nx_le(nx_graph *g, nx_node a, nx_node b);
NX_API nx_node nx_gt(nx_graph *g, nx_node a, nx_node b);
NX_API nx_node nx_ge(nx_graph *g, nx_node a, nx_node b);
NX_API nx_node nx_and(nx_graph *g, nx_node a, nx_node b); /* bool */
NX_API nx_node nx_or(nx_graph *g, nx_node a, nx_node b);  /* bool */
/* Integer bits (any integer dtype; equal dtypes): ~x, a & b, a | b, a ^ b; a << b and a >> b
 * (logical for unsigned, arithmetic for signed; a count >= the width gives 0, or the sign);
 * a rotated left by b mod the width; mulhi: the high half of the double-width product (u32,
 * u64). docs/numerics.md. */
NX_API nx_node nx_bitnot(nx_graph *g, nx_node x);
NX_API nx_node nx_bitand(nx_graph *g, nx_node a, nx_node b);
NX_API nx_node nx_bitor(nx_graph *g, nx_node a, nx_node b);
NX_API nx_node nx_bitxor(nx_graph *g, nx_node a, nx_node b);
NX_API nx_node nx_shl(nx_graph *g, nx_node a, nx_node b);
NX_API nx_node nx_shr(nx_graph *g, nx_node a, nx_node b);
NX_API nx_node nx_rotl(nx_graph *g, nx_node a, nx_node b);
NX_API nx_node nx_mulhi(nx_graph *g, nx_node a, nx_node b);

/* cond ? a : b, broadcasting all three; cond is bool. */
NX_API nx_node nx_select(nx_graph *g, nx_node cond, nx_node a, nx_node b);
/* Any dtype to any dtype, as numpy's astype except where that is undefined: floats to integers
 * truncate toward zero and saturate at the integer's range, NaN gives 0; nonzero (and NaN) to bool
 * is true. Casting to x's own dtype returns x. */
NX_API nx_node nx_cast(nx_graph *g, nx_node x, nx_dtype dtype);

/* ------------------------------------------------------------------------------------------------
 * Movement (views; no arithmetic)
 * ----------------------------------------------------------------------------------------------*/

/* Deprecated (kept for one release): nx_pad takes an nx_border (nitrix.h). The old names are
 * aliases of its constants, so their values are nx_border's, not the old 0..4 order. */
typedef nx_border nx_pad_mode;
#define NX_PAD_CONSTANT NX_BORDER_CONSTANT
#define NX_PAD_REFLECT NX_BORDER_REFLECT
#define NX_PAD_MIRROR NX_BORDER_MIRROR
#define NX_PAD_NEAREST NX_BORDER_NEAREST
#define NX_PAD_WRAP NX_BORDER_WRAP
#define NX_PAD_MODE_COUNT NX_BORDER_COUNT

/* Same element count, C order; one extent may be -1. */
NX_API nx_node nx_reshape(nx_graph *g, nx_node x, int ndim, const int64_t *shape);
/* Axis i of the result is axis perm[i] of x. */
NX_API nx_node nx_permute(nx_graph *g, nx_node x, const int *perm);
/* numpy.broadcast_to (x itself when the shape is already x's). */
NX_API nx_node nx_broadcast(nx_graph *g, nx_node x, int ndim, const int64_t *shape);
/* Per axis: 0 <= start <= stop <= extent, step >= 1 (NULL step: all 1). */
NX_API nx_node nx_slice(nx_graph *g, nx_node x, const int64_t *start, const int64_t *stop,
                        const int64_t *step);
/* Per axis lo/hi >= 0 elements; padding wider than the axis repeats the mode's rule, as scipy.ndimage
 * extends. cval is used by NX_BORDER_CONSTANT only. */
NX_API nx_node nx_pad(nx_graph *g, nx_node x, const int64_t *lo, const int64_t *hi,
                      nx_border mode, double cval);
NX_API nx_node nx_reverse(nx_graph *g, nx_node x, int naxes, const int *axes);
/* Equal dtypes and extents except on axis; n == 1 returns xs[0]. */
NX_API nx_node nx_concat(nx_graph *g, int n, const nx_node *xs, int axis);
/* Sliding windows over every axis of x (window 1, stride 1 leaves an axis alone):
 *   y[o_0..o_{n-1}, k_0..k_{n-1}] = x[o_0*s_0 + k_0*d_0, ...]
 * shape [out_0..out_{n-1}, w_0..w_{n-1}], out_i = (x_i - d_i*(w_i-1) - 1) / s_i + 1 >= 1 (VALID;
 * pad first for SAME). NULL stride or dilation means all 1. */
NX_API nx_node nx_window(nx_graph *g, nx_node x, const int64_t *window, const int64_t *stride,
                         const int64_t *dilation);

/* ------------------------------------------------------------------------------------------------
 * Indexing
 * ----------------------------------------------------------------------------------------------*/

typedef enum nx_monoid {
    NX_MONOID_SUM,
    NX_MONOID_PROD,
    NX_MONOID_MAX,       /* NaN propagates; -inf identity */
    NX_MONOID_MIN,
    NX_MONOID_LOGSUMEXP, /* online (m, s) carry; all -inf gives -inf */
    NX_MONOID_ARGMAX,    /* i64 index, first winner on ties; one axis */
    NX_MONOID_ARGMIN,
    NX_MONOID_COUNT
} nx_monoid;

/* numpy.take(x, idx, axis): shape x[:axis] + idx + x[axis+1:]. idx is i32 or i64; indices outside
 * [0, extent) are clamped into it. */
NX_API nx_node nx_gather(nx_graph *g, nx_node x, nx_node idx, int axis);
/* The adjoint of gather: out = x, then out[.., idx[j], ..] (+)= updates[.., j, ..] under monoid
 * SUM, MAX or MIN. updates has the shape nx_gather(x, idx, axis) would have. Out-of-range indices
 * are dropped (over an empty axis, all of them: out = x). */
NX_API nx_node nx_scatter(nx_graph *g, nx_node x, nx_node idx, nx_node updates, int axis,
                          nx_monoid monoid);

/* ------------------------------------------------------------------------------------------------
 * Reductions, scans, sorting
 * ----------------------------------------------------------------------------------------------*/

/* Folds over axes in ascending index order (the canonical order), one element at a time; an f32
 * fold accumulates in f32. naxes == 0 folds every element alone (sum(x) = x). Empty folds give
 * the identity: 0, 1, -inf (max; the dtype's minimum for integers), +inf (min), -inf (logsumexp).
 * ARGMAX/ARGMIN take exactly one nonempty axis and give i64; NaN counts as the winner. */
NX_API nx_node nx_reduce(nx_graph *g, nx_node x, int naxes, const int *axes, nx_monoid monoid,
                         bool keepdims);

/* A monoid written as IR expressions over a carry of 1..4 scalar components. Placeholders are
 * scalar leaves made with nx_placeholder; a monoid's expressions may use only its own
 * placeholders and constants.
 *   lift:     carry from one element x           (NX_NONE with ncarry == 1: the element itself)
 *   combine:  carry from carries a and b         (must be associative)
 *   identity: constants, the carry of no elements
 *   finalize: scalar result from carry a         (NX_NONE: a[0]) */
/* Each expression is 0-d, at most 256 nodes of constants, placeholders, elementwise ops, select
 * and cast. */
#define NX_MONOID_MAX_CARRY 4
typedef struct nx_monoid_def {
    int ncarry;
    nx_node x;
    nx_node a[NX_MONOID_MAX_CARRY];
    nx_node b[NX_MONOID_MAX_CARRY];
    nx_node lift[NX_MONOID_MAX_CARRY];
    nx_node combine[NX_MONOID_MAX_CARRY];
    nx_node identity[NX_MONOID_MAX_CARRY];
    nx_node finalize;
} nx_monoid_def;
NX_API nx_node nx_placeholder(nx_graph *g, nx_dtype dtype);
NX_API nx_node nx_reduce_custom(nx_graph *g, nx_node x, int naxes, const int *axes,
                                const nx_monoid_def *monoid, bool keepdims);

/* Inclusive scan along axis under SUM, PROD, MAX, MIN or LOGSUMEXP; reverse runs from the end. */
NX_API nx_node nx_scan(nx_graph *g, nx_node x, int axis, nx_monoid monoid, bool reverse);
/* First-order linear recurrence y_t = a_t * y_{t-1} + b_t with y_{-1} = 0 (broadcast a, b). */
NX_API nx_node nx_scan_linear(nx_graph *g, nx_node a, nx_node b, int axis, bool reverse);
/* Constant-coefficient recursion of order 1..4 (NX_SCAN_IIR_MAX_ORDER) along axis:
 * y[t] = b[t] + c[0] y[t-1] + ... + c[order-1] y[t-order], terms before the line's start 0
 * (reverse: y[t+1].. from the end). b is f32 or f64; the coefficients are finite doubles, stored
 * bit-exactly and rounded once to b's dtype; each step is (((b + c1 y1) + c2 y2) + ...) with every
 * product and sum rounded (never an fma). Differentiable in b only (no coefficient gradient). */
#define NX_SCAN_IIR_MAX_ORDER 4
NX_API nx_node nx_scan_iir(nx_graph *g, nx_node b, int axis, bool reverse, int order,
                           const double *coef);

/* Stable sort along axis; NaN sorts last ascending, first descending, as numpy does for sort. */
NX_API nx_node nx_sort(nx_graph *g, nx_node x, int axis, bool descending);
NX_API nx_node nx_argsort(nx_graph *g, nx_node x, int axis, bool descending); /* -> i64 */
/* The k largest (or smallest) along axis, in order, first index on ties; both outputs optional. */
NX_API void nx_topk(nx_graph *g, nx_node x, int64_t k, int axis, bool largest, nx_node *values,
                    nx_node *indices);

/* ------------------------------------------------------------------------------------------------
 * Extern: a library routine with a declared shape rule, a reference implementation and an adjoint
 * ----------------------------------------------------------------------------------------------*/

typedef struct nx_extern_def {
    const char *name;
    /* Output dtype and shape from the inputs'; NX_OK or an error (message via nx_ctx_log). */
    nx_status (*shape)(void *user, int n_in, const nx_dtype *dtypes, const int *ndims,
                       const int64_t *const *shapes, nx_dtype *out_dtype, int *out_ndim,
                       int64_t out_shape[NX_MAX_DIMS]);
    /* Fills out (allocated with the declared shape) from contiguous host inputs. */
    nx_status (*reference)(void *user, nx_ctx *ctx, int n_in, const nx_tensor *const *ins,
                           nx_tensor *out);
    /* Builds the input cotangents in g (NX_NONE where zero). NULL: non-differentiable. */
    nx_status (*vjp)(void *user, nx_graph *g, int n_in, const nx_node *ins, nx_node out,
                     nx_node cotangent, nx_node *in_cotangents);
    void *user;
} nx_extern_def;
/* def must outlive the graph and every program compiled from it. At most 64 inputs (f16/bf16 are
 * not accepted). Equal calls are one node, so reference must be a pure function. */
NX_API nx_node nx_extern(nx_graph *g, const nx_extern_def *def, int n_in, const nx_node *ins);

/* A device implementation of an extern (docs/cuda.md "Externs on the device"). source writes, as
 * snprintf does (at most cap bytes, NUL-terminated; buf is NULL when cap is 0), self-contained
 * CUDA C defining
 *     extern "C" __global__ void <kernel>(const T0 *b0, ..., const T<n-1> *b<n-1>, Tout *b<n>,
 *                                         long long points)
 * (the inputs, then the output: C-contiguous device buffers of the dtypes and shapes given; T is
 * float, double, signed char, short, int, long long, or unsigned char for u8 and bool), sets
 * *points, and returns the source's length, or -1 when it has no device code for these inputs
 * (the extern then runs on the host). The kernel is launched over `points` threads in blocks of
 * 256 on a capped grid, so it walks `for (p = blockIdx.x * 256 + threadIdx.x; p < points;
 * p += gridDim.x * 256)`, and must write every output element. source is called several times
 * per compile and must answer the same each time; the source text is part of the compiled
 * kernel's cache key. NVRTC errors in it fail the compile with NX_ERR_BACKEND and the log. */
typedef struct nx_extern_device_def {
    int (*source)(void *user, int n_in, const nx_dtype *dtypes, const int *ndims,
                  const int64_t *const *shapes, const char *kernel, char *buf, size_t cap,
                  int64_t *points);
    void *user;
} nx_extern_device_def;
/* nx_extern whose node the CUDA backend runs with dev's kernel (other backends call
 * def->reference, and equal results are the definition's promise). A plan whose externs all have
 * device code runs whole on the device; dev must outlive the graph and its programs, as def; dev
 * NULL is nx_extern. */
NX_API nx_node nx_extern_device(nx_graph *g, const nx_extern_def *def,
                                const nx_extern_device_def *dev, int n_in, const nx_node *ins);

/* ------------------------------------------------------------------------------------------------
 * Conveniences composed from primitives
 * ----------------------------------------------------------------------------------------------*/

typedef nx_node (*nx_binary_builder)(nx_graph *g, nx_node a, nx_node b);

/* Batched matrix product over the last two axes, leading axes broadcast. */
NX_API nx_node nx_matmul(nx_graph *g, nx_node a, nx_node b);
/* Einsum-style two-operand contraction under a semiring: out = (+)_{summed} a (x) b, where (+) is
 * monoid (SUM, MAX, MIN, LOGSUMEXP) and (x) an elementwise binary builder (nx_mul, nx_add, ...).
 * spec is "ij,jk->ik": lowercase letters, no ellipsis. */
NX_API nx_node nx_einsum(nx_graph *g, const char *spec, nx_node a, nx_node b, nx_monoid plus,
                         nx_binary_builder times);
NX_API nx_node nx_mean(nx_graph *g, nx_node x, int naxes, const int *axes, bool keepdims);
NX_API nx_node nx_var(nx_graph *g, nx_node x, int naxes, const int *axes, int ddof,
                      bool keepdims);
NX_API nx_node nx_softmax(nx_graph *g, nx_node x, int axis);
NX_API nx_node nx_where(nx_graph *g, nx_node cond, nx_node a, nx_node b); /* = nx_select */

/* ------------------------------------------------------------------------------------------------
 * Gradients (reverse mode, docs/autodiff.md)
 * ----------------------------------------------------------------------------------------------*/

/* Adds to g the cotangents of the wrt nodes for L = sum_i <outputs[i], cotangents[i]>, a source
 * transformation: grads_out[j] (wrt[j]'s dtype and shape; owned by the graph) is an ordinary node
 * that compiles and runs like any other and can be differentiated again. cotangents[i] has exactly
 * outputs[i]'s dtype and shape, or is NX_NONE (zero). wrt nodes are float nodes of g (parameters,
 * inputs or intermediate values); a wrt node joined to no output by a differentiable path gets
 * zeros. Comparisons, floor/ceil/round/sign, argsort, argmax and casts to or from integers pass no
 * gradient. Errors: NX_ERR_UNSUPPORTED naming the node when a cotangent must cross an extern
 * without a vjp or a custom monoid that is not a built-in one; NX_ERR_SHAPE / NX_ERR_DTYPE /
 * NX_ERR_INVALID_ARG for bad arguments (the graph stays usable); NX_ERR_NOMEM (recorded in the
 * graph, as builders do). On failure grads_out is all NX_NONE. */
NX_API nx_status nx_graph_vjp(nx_graph *g, int n_outputs, const nx_node *outputs,
                              const nx_node *cotangents, int n_wrt, const nx_node *wrt,
                              nx_node *grads_out);
/* nx_graph_vjp of a float output with one element (any rank), with cotangent 1. */
NX_API nx_status nx_graph_grad(nx_graph *g, nx_node scalar_output, int n_wrt, const nx_node *wrt,
                               nx_node *grads_out);

/* ------------------------------------------------------------------------------------------------
 * Compilation and execution
 * ----------------------------------------------------------------------------------------------*/

typedef struct nx_compile_opts {
    nx_backend backend; /* NX_BACKEND_AUTO: NITRIX_BACKEND, then auto resolution */
    int n_outputs;
    const nx_node *outputs;
} nx_compile_opts;

/* Verifies g, then compiles the outputs' subgraph. g may be freed afterwards. The backend is
 * opts->backend when not AUTO, else the context's NITRIX_BACKEND, else auto (the CPU when no
 * usable GPU answers). `cpu` fuses the graph into kernels JIT-compiled through LLVM and cached;
 * `cuda` does the same through NVRTC (asked for without a GPU of capability >= 8.0, it is
 * NX_ERR_BACKEND saying why); `ref` is the reference interpreter. What a backend cannot run falls
 * back loudly: one warning per
 * (program shape, backend) per process through the context's log (NITRIX_SILENCE_FALLBACK silences
 * it), or NX_ERR_BACKEND under NITRIX_STRICT_BACKEND. NITRIX_DUMP=graph prints each compiled
 * program to stderr; NITRIX_DUMP=fuse,kernel print the fusion plan and kernel IR. An
 * output that reads a placeholder outside its monoid is NX_ERR_INVALID_ARG. */
NX_API nx_status nx_graph_compile(nx_graph *g, const nx_compile_opts *opts, nx_program **out);
NX_API void nx_program_free(nx_program *p);
NX_API int nx_program_num_inputs(const nx_program *p);
NX_API int nx_program_num_outputs(const nx_program *p);
NX_API nx_backend nx_program_backend(const nx_program *p);
/* inputs: one host tensor per graph input, in creation order, with exactly the declared dtype and
 * shape (any strides). outputs: receives n_outputs new C-contiguous tensors. On failure no output
 * is left allocated. */
NX_API nx_status nx_program_run(nx_program *p, const nx_tensor *const *inputs,
                                nx_tensor **outputs);

#ifdef __cplusplus
}
#endif

#endif /* NITRIX_GRAPH_H */
