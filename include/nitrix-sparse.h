/*
 * nitrix ops: sparse semiring contractions (ops/sparse, docs/sparse.md).
 * Included by nitrix-ops.h: include that.
 */
#ifndef NITRIX_SPARSE_H
#define NITRIX_SPARSE_H

#include "nitrix-ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================================================
 * ELL: a sparse m x n_cols matrix stored as k_max slots per row.
 *
 *   values  [m, k_max] f32 or f64      slot p of row i holds A[i, indices[i, p]]
 *   indices [m, k_max] i32 or i64      in [0, n_cols); pads hold a valid index (0 by convention)
 *   n_cols  the matrix's column count  (the dense operand's row count)
 *   identity what pads hold in values  (the (+)-identity, or the annihilator after nx_ell_mask);
 *            a slot is a pad exactly when its value == identity (NaN never is)
 *
 * The contraction is a gather of B's rows (the IR's GATHER) folded under the semiring over the
 * slot axis: one fused K-loop on the backends, and autodiff of the fragment gives gradients for
 * values and B (indices, being integers, get none):
 *
 *   C[..., i, j] = (+)_p values[i, p] (x) B[..., indices[i, p], j]
 *
 * ELLs made by this library own their tensors (free with nx_ell_free). An ELL given to a function
 * is only read; its tensors may be any host tensors of the right dtypes and shapes.
 * ================================================================================================*/

typedef struct nx_ell {
    nx_tensor *values;  /* [m, k_max] f32/f64 */
    nx_tensor *indices; /* [m, k_max] i32/i64 */
    int64_t n_cols;
    double identity;
} nx_ell;

/* Frees e's tensors and zeroes it (NULL and zeroed ELLs are fine). */
NX_API void nx_ell_free(nx_ell *e);

/* Checks e before any kernel runs: tensors present and on the host, values f32/f64 and indices
 * i32/i64 of one [m, k_max] shape, n_cols >= 0, and every index in [0, n_cols). The first bad
 * index is NX_ERR_INVALID_ARG naming its row and slot. who prefixes the message. */
NX_API nx_status nx_ell_check(nx_ctx *ctx, const char *who, const nx_ell *e);

/* ---- graph builders (for larger graphs, e.g. bilateral filtering; differentiable) ------------ */

/* C = values (x) B[indices] folded over the slot axis under sr:
 *   values [m, k_max] f32/f64, indices [m, k_max] i32/i64, b [..., n_rows, c] of values' dtype
 *   -> [..., m, c].
 * Indices are not range-checked in the graph (the gather clamps them): check data with
 * nx_ell_check first. Gradients flow to values and b. */
NX_API nx_node nx_ell_matmul_node(nx_graph *g, const nx_semiring *sr, nx_node values,
                                  nx_node indices, nx_node b);

/* Y = A^T X under REAL: x [..., m, c] -> [..., n_cols, c],
 *   Y[..., q, j] = sum_{(i, p): indices[i, p] == q} values[i, p] * X[..., i, j]
 * by the IR's scatter-add. Differentiable in values and x. */
NX_API nx_node nx_ell_rmatvec_node(nx_graph *g, nx_node values, nx_node indices, nx_node x,
                                   int64_t n_cols);

/* Softmax of scores [..., m, k_max] along the slot axis over the slots that are not pads
 * (pad[i, p] true); pads get 0 and an all-pad row is all zeros. pad is bool [m, k_max]. */
NX_API nx_node nx_ell_row_softmax_node(nx_graph *g, nx_node scores, nx_node pad);

/* ---- entry points ------------------------------------------------------------------------------ */

/* C = A (x)-(+) B under sr (any algebra, built-in or user): b [..., n_cols, c] of A's value dtype,
 * leading dims of b are a batch. Indices are validated first. opts may be NULL. */
NX_API nx_status nx_semiring_ell_matmul(nx_ctx *ctx, const nx_semiring *sr, const nx_ell *a,
                                        const nx_tensor *b, const nx_semiring_opts *opts,
                                        nx_tensor **out);
/* Y = A^T X under REAL only (other algebras: NX_ERR_UNSUPPORTED): x [..., m, c] ->
 * [..., n_cols, c]. In reproducible mode it runs the canonical gather formulation (A^T built as
 * an ELL on the host, each output row folded in slot order), otherwise the scatter-add. */
NX_API nx_status nx_semiring_ell_rmatvec(nx_ctx *ctx, const nx_semiring *sr, const nx_ell *a,
                                         const nx_tensor *x, const nx_semiring_opts *opts,
                                         nx_tensor **out);

/* Cotangents of values and b for <dc, nx_semiring_ell_matmul(A, b)> under any differentiable
 * algebra (see nx_semiring_check_differentiable). dvalues [m, k_max], db b's shape; either may
 * be NULL. The indices get no cotangent. */
NX_API nx_status nx_semiring_ell_matmul_vjp(nx_ctx *ctx, const nx_semiring *sr, const nx_ell *a,
                                            const nx_tensor *b, const nx_tensor *dc,
                                            const nx_semiring_opts *opts, nx_tensor **dvalues,
                                            nx_tensor **db);
/* Cotangents of values and x for <dy, nx_semiring_ell_rmatvec(A, x)> (REAL). */
NX_API nx_status nx_semiring_ell_rmatvec_vjp(nx_ctx *ctx, const nx_semiring *sr, const nx_ell *a,
                                             const nx_tensor *x, const nx_tensor *dy,
                                             const nx_semiring_opts *opts, nx_tensor **dvalues,
                                             nx_tensor **dx);

/* Softmax of scores [..., m, k_max] over each row's non-pad slots of A (value != identity); pads
 * give 0, an all-pad row gives zeros. */
NX_API nx_status nx_ell_row_softmax(nx_ctx *ctx, const nx_ell *a, const nx_tensor *scores,
                                    const nx_semiring_opts *opts, nx_tensor **out);

#ifdef __cplusplus
}
#endif

#endif /* NITRIX_SPARSE_H */
