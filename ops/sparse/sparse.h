/* Internals shared by the files of ops/sparse. Not installed. */
#ifndef NX_OPS_SPARSE_H
#define NX_OPS_SPARSE_H

#include "internal.h"
#include "nitrix-graph.h"
#include "nitrix-ops.h"
#include "ops/op.h"
#include "ops/semiring/semiring.h"

struct nx_rt_cache_blob;

/* Builds a program's graph: outputs[0..*n_outputs) (at most 4). */
typedef nx_status (*nx_sparse_build_fn)(nx_graph *g, void *user, nx_node *outputs, int *n_outputs);
/* The program keyed by key (+ backend), built and compiled on a miss through
 * nx_program_cached; key is freed. what names it in NX_ERR_NOMEM messages. Only for
 * nx_ell_check's device index check, which is no op of the table; the ops use nx_op_program. */
NX_HIDDEN nx_status nx_sparse_program(nx_ctx *ctx, struct nx_rt_cache_blob *key, const char *what,
                                      nx_backend backend, nx_sparse_build_fn build, void *user,
                                      nx_program **out);
/* Runs p on in[0..n_in) (NULL entries are absent optional inputs, skipped by the caller's
 * program); a device tensor given to a program that is not on the cuda backend is
 * NX_ERR_UNSUPPORTED naming it (names[i]). */
NX_HIDDEN nx_status nx_sparse_run(nx_ctx *ctx, const char *who, nx_program *p, int n_in,
                                  const nx_tensor *const *in, const char *const *names,
                                  nx_tensor **outs);
/* t non-NULL and f32/f64, on the host or a device. */
NX_HIDDEN nx_status nx_sparse_check_float(nx_ctx *ctx, const char *who, const char *what,
                                          const nx_tensor *t);
/* NX_ERR_UNSUPPORTED naming what when t (may be NULL) is a device tensor. */
NX_HIDDEN nx_status nx_sparse_check_host(nx_ctx *ctx, const char *who, const char *what,
                                         const nx_tensor *t);
/* nx_ell_check, plus host values and indices and 2-D values: the host builders' precondition. */
NX_HIDDEN nx_status nx_sparse_check_host_ell(nx_ctx *ctx, const char *who, const nx_ell *e);
/* Whether every device index is in [0, n_cols): a 0-d flag reduced on the device (cuda backend),
 * one 4-byte copy back. nx_ell_check's path for device indices. */
NX_HIDDEN nx_status nx_sparse_device_indices_ok(nx_ctx *ctx, const nx_tensor *indices,
                                                int64_t n_cols, bool *ok);
/* The range flag of idx ([m, k_max] integer node): a 0-d i32 that is > 0 exactly when some index
 * is outside [0, n_cols) (0 when all are in range; INT32_MIN for no index at all). */
NX_HIDDEN nx_node nx_sparse_range_flag_node(nx_graph *g, nx_node idx, int64_t n_cols);
/* *bad = flag > 0, reading the 0-d i32 flag where it is (a device flag: one 4-byte copy back). */
NX_HIDDEN nx_status nx_sparse_flag_bad(const nx_tensor *flag, bool *bad);
/* nx_ell_check without the index range check: what entry points that check the indices inside
 * their own program (the range flag) run first. */
NX_HIDDEN nx_status nx_sparse_check_ell_shapes(nx_ctx *ctx, const char *who, const nx_ell *e);
/* The NX_ERR_INVALID_ARG of the first out-of-range index of idx (host or device: a device tensor
 * is copied to the host once) naming its row and slot; used once a range flag said one is bad.
 * Should the copy show none (the indices changed while the call ran), still NX_ERR_INVALID_ARG,
 * saying so. */
NX_HIDDEN nx_status nx_sparse_index_error(nx_ctx *ctx, const char *who, const nx_tensor *idx,
                                          int64_t n_cols);

/* ---- the ELL ops (entry.c): semiring_ell_matmul, semiring_ell_rmatvec, ell_row_softmax -------*/

typedef enum nx_ell_op { NX_ELL_MATMUL, NX_ELL_RMATVEC, NX_ELL_SOFTMAX } nx_ell_op;

/* The three ops' option struct (ops/op.h): what nx_op_call parses into (the schema of each op
 * names the fields it has) and, after them, what only typed calls give. Their inputs are the
 * ELL's values and indices and the dense operand. */
typedef struct nx_ell_args {
    nx_backend backend;
    const nx_semiring *semiring; /* matmul, rmatvec; NULL: REAL */
    int64_t n_cols;              /* rmatvec: required; matmul: when given (n_cols_given) */
    int n_cols_given;            /* text options: how many n_cols values were given (0 or 1) */
    double identity;             /* the pad value (values == identity is a pad) */
    int driver;                  /* rmatvec's driver option: auto|gather|scatter */
    const char *driver_text;     /* a typed call's opts->driver (the option's text wins) */
    bool typed_call;
    bool fold; /* the range flag is in the program whatever the device (tests) */
} nx_ell_args;

/* The ELL the call's inputs and options describe. */
NX_HIDDEN nx_ell nx_ell_of_call(const nx_op_args *c, nx_ell_op op);
/* The ops' check: the ELL (indices range-checked on the host unless the program checks them),
 * the dense operand against it, the semiring, the cotangent of a vjp. */
NX_HIDDEN nx_status nx_ell_op_check(const nx_op_args *c, nx_ell_op op, const char *what);
/* The ops' run: the program (forward or vjp, with the range flag for device indices) through
 * nx_op_program, run, and with the flag set its results freed for the error naming the index.
 * outs: 1 result, or 2 (values' and the dense operand's cotangents) for a vjp (indices get none).
 */
NX_HIDDEN nx_status nx_ell_op_run(const nx_op_args *c, nx_ell_op op, nx_tensor **outs);
/* The args of a typed call on a and opts. */
NX_HIDDEN nx_ell_args nx_ell_typed_args(const nx_semiring *sr, const nx_ell *a,
                                        const nx_semiring_opts *opts);
/* A typed entry point: a's tensors and x through d (who NULL: nx_<name>; nx_op_run, or
 * nx_op_run_vjp when dy is given: outs gets the values' and x's cotangents). */
NX_HIDDEN nx_status nx_ell_typed_run(nx_ctx *ctx, const nx_op_desc *d, const char *who,
                                     const nx_ell *a, const nx_tensor *x, const nx_tensor *dy,
                                     const nx_ell_args *args, nx_tensor **outs);

/* A typed vjp entry point: the values' and x's cotangents of <dy, d(a, x)> (either may be NULL). */
NX_HIDDEN nx_status nx_ell_typed_vjp(nx_ctx *ctx, const nx_op_desc *d, const nx_semiring *sr,
                                     const nx_ell *a, const nx_tensor *x, const nx_tensor *dy,
                                     const nx_semiring_opts *opts, nx_tensor **dvalues,
                                     nx_tensor **dx);

/* ---- edge aggregation (edge.c) --------------------------------------------------------------*/

/* The fold of semiring_ell_edge_aggregate under sr: sum (REAL), max, min (TROPICAL_*); false for
 * the others. */
NX_HIDDEN bool nx_sparse_edge_monoid(const nx_semiring *sr, nx_monoid *m);
/* An edge formula over hi, hj, w, ij and e (has_e: edge attributes given), parsed. */
typedef struct nx_sparse_edge_formula {
    nx_sr_expr e;
    int32_t root;
} nx_sparse_edge_formula;
NX_HIDDEN nx_status nx_sparse_edge_parse(nx_ctx *ctx, const char *who, const char *text, bool has_e,
                                         nx_sparse_edge_formula *f);
/* The nx_edge_fn of a parsed formula (user: the nx_sparse_edge_formula). */
NX_HIDDEN nx_node nx_sparse_edge_formula_fn(nx_graph *g, nx_node hi, nx_node hj, nx_node w,
                                            nx_node ij, nx_node e, void *user);

/* ---- SectionedELL ops (sectioned.c) --------------------------------------------------------*/

/* The option struct of sectioned_semiring_ell_matmul and _rmatvec. Their inputs are the CSR rows
 * (offsets, indices, values) and the dense operand; pads hold the semiring's identity. */
typedef struct nx_sectioned_args {
    nx_backend backend;
    const nx_semiring *semiring; /* NULL: REAL */
    int64_t n_cols;              /* rmatvec: required; matmul: when given (n_cols_given) */
    int n_cols_given;            /* matmul: 0: the dense operand's rows */
} nx_sectioned_args;
/* Both ops' run: the SectionedELL built from the inputs, then the per-section loop (or its vjp:
 * outs gets one gradient per input, the values' and the dense operand's). */
NX_HIDDEN nx_status nx_sectioned_op_run(const nx_op_args *c, bool rmatvec, nx_tensor **outs);

/* An ELL entry point (op "matmul", "rmatvec" (its scatter driver) or "softmax"; its VJP when dy
 * is given) with the index range check inside its program, as the entry points do for device
 * indices, whatever device the indices are on: so the folded path runs, and is tested, on the
 * host backends too. outs gets 1 result (2 for a VJP); none when an index is out of range. */
NX_HIDDEN nx_status nx_sparse_ell_folded(nx_ctx *ctx, const char *op, const nx_semiring *sr,
                                         const nx_ell *a, const nx_tensor *x, const nx_tensor *dy,
                                         const nx_semiring_opts *opts, nx_tensor **outs);

/* The transpose of a as an ELL (host): row q holds the (value, i) of every slot (i, p) of a with
 * indices[i, p] == q, in ascending (i, p) order, padded with 0 (REAL's identity, which the copy
 * takes) and index 0 to the largest column count. Batched values [..., m, k] give [..., n_cols,
 * kt] over one pattern: a slot is dropped when it is a pad (value == identity) in every batch,
 * and a pad kept for another batch's sake holds 0. a must be on the host and checked. */
NX_HIDDEN nx_status nx_sparse_transpose(nx_ctx *ctx, const nx_ell *a, nx_ell *out);

/* A new host tensor [m, k] of dtype. */
NX_HIDDEN nx_status nx_sparse_new2(nx_ctx *ctx, nx_dtype dtype, int64_t m, int64_t k,
                                   nx_tensor **out);
/* Element (i, j) of a 2-D tensor as double / int64 (any strides). */
NX_HIDDEN double nx_sparse_get(const nx_tensor *t, int64_t i, int64_t j);
NX_HIDDEN int64_t nx_sparse_get_index(const nx_tensor *t, int64_t i, int64_t j);
/* Stores v at (i, j) of a contiguous 2-D tensor (float or integer dtype). */
NX_HIDDEN void nx_sparse_set(nx_tensor *t, int64_t i, int64_t j, double v);
NX_HIDDEN void nx_sparse_set_index(nx_tensor *t, int64_t i, int64_t j, int64_t v);
/* Element o of a contiguous f32/f64 tensor, read as or written from a double. */
NX_HIDDEN double nx_sparse_flat_get(const nx_tensor *t, int64_t o);
NX_HIDDEN void nx_sparse_flat_set(nx_tensor *t, int64_t o, double v);

#endif /* NX_OPS_SPARSE_H */
