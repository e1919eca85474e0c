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
 *   values  [..., m, k_max] f32 or f64 slot p of row i holds A[i, indices[i, p]]; leading dims
 *                                      are a batch of matrices over one pattern (entry points)
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
 * is only read; its tensors may be any tensors of the right dtypes and shapes.
 *
 * Batches. The entry points (matmul, rmatvec, their VJPs, row softmax, edge aggregation) take
 * values [..., m, k_max] whose leading dims broadcast with the dense operand's as NumPy does
 * (values [2, m, k] with B [n, c] or [2, n, c] or [3, 1, n, c]); results have the broadcast
 * batch, and the VJPs give dvalues of values' shape and db of b's (summed over the dims each was
 * broadcast along). The host builders (pad, from_dense, to_dense, mask, self loops, SectionedELL)
 * take one matrix, values [m, k_max].
 *
 * Device tensors. Entry points take CUDA device tensors (values, indices, dense operands) when
 * their program runs on the cuda backend (opts->backend cuda, or auto with a GPU); with every input
 * on the device the results stay there. Other backends refuse them with NX_ERR_UNSUPPORTED naming
 * the argument. Device indices are range-checked inside the op's own program (one more small
 * output, 4 bytes read back after the run; the kernels clamp or drop out-of-range indices, so
 * nothing is read out of bounds meanwhile); when one is out of range the results are freed, and
 * the indices are copied to the host, once, to name its row and slot. rmatvec's gather driver builds A^T on the host, so it takes host tensors only (use the
 * scatter driver for device tensors); the host builders take host tensors only.
 * ===============================================================================================*/

typedef struct nx_ell {
    nx_tensor *values;  /* [m, k_max] f32/f64 */
    nx_tensor *indices; /* [m, k_max] i32/i64 */
    int64_t n_cols;
    double identity;
} nx_ell;

/* Frees e's tensors and zeroes it (NULL and zeroed ELLs are fine). */
NX_API void nx_ell_free(nx_ell *e);

/* Checks e before any kernel runs: tensors present, values f32/f64 [..., m, k_max] and indices
 * i32/i64 [m, k_max], n_cols >= 0, and every index in [0, n_cols) (read on the host, or reduced
 * on the device for device indices). The first bad index is NX_ERR_INVALID_ARG naming its row and
 * slot. who prefixes the message. */
NX_API nx_status nx_ell_check(nx_ctx *ctx, const char *who, const nx_ell *e);

/* ---- graph builders (for larger graphs, e.g. bilateral filtering; differentiable) -----------*/

/* C = values (x) B[indices] folded over the slot axis under sr:
 *   values [..., m, k_max] f32/f64, indices [m, k_max] i32/i64, b [..., n_rows, c] of values'
 *   dtype -> [..., m, c] (the batch dims of values and b broadcast).
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

/* ---- entry points ----------------------------------------------------------------------------*/

/* C = A (x)-(+) B under sr (any algebra, built-in or user): b [..., n_cols, c] of A's value dtype,
 * leading dims of b (and of A's values) are a batch. Indices are validated first. opts may be
 * NULL. */
NX_API nx_status nx_semiring_ell_matmul(nx_ctx *ctx, const nx_semiring *sr, const nx_ell *a,
                                        const nx_tensor *b, const nx_semiring_opts *opts,
                                        nx_tensor **out);
/* Y = A^T X under REAL only (other algebras: NX_ERR_UNSUPPORTED): x [..., m, c] ->
 * [..., n_cols, c]. In reproducible mode it runs the canonical gather formulation (A^T built as
 * an ELL on the host, each output row folded in slot order), otherwise the scatter-add. */
/* Two drivers (opts->driver, runtime/divergent.def row ell_rmatvec): "gather", the canonical one,
 * folds each output row over a transposed ELL built on the host, in ascending (row, slot) order;
 * "scatter", the fast one, adds into the output with the IR's scatter (on a GPU in any order).
 * Auto picks gather under reproducible mode, scatter otherwise. */
NX_API nx_status nx_semiring_ell_rmatvec(nx_ctx *ctx, const nx_semiring *sr, const nx_ell *a,
                                         const nx_tensor *x, const nx_semiring_opts *opts,
                                         nx_tensor **out);

/* Cotangents of values and b for <dc, nx_semiring_ell_matmul(A, b)> under any differentiable
 * algebra (see nx_semiring_check_differentiable). dvalues has values' shape, db b's; either may
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

/* ---- edge aggregation ------------------------------------------------------------------------*/

/* out[..., i, :] = (+)_p F(h_i, h_j, w, ij[, e]) with j = indices[i, p], w = values[i, p], under
 * REAL (sum), TROPICAL_MAX_PLUS (max) or TROPICAL_MIN_PLUS (min) (others: NX_ERR_UNSUPPORTED).
 * h [..., n, d] with n = m (the ELL is square). F is a builder given
 *   hi [..., m, 1, d], hj [..., m, k_max, d], w [..., m, k_max, 1] (values' batch dims),
 *   ij [m, k_max, 1] (the column index
 *   in h's dtype) and e [m, k_max, d_e] (NX_NONE without edge attributes)
 * returning [..., m, k_max, d_out]; or F as a formula over the names hi, hj (d-vectors), w, ij and
 * e (a d_e-vector) with the pairwise formula's operators, functions and vector functions (sum, dot,
 * sqdist, norm2): "w * (hj - hi)", "exp(-sqdist(hi, hj)) * w". Pads are not skipped: multiply by
 * w or mask. Gradients to h, values and e through nx_graph_vjp of the builder. */
typedef nx_node (*nx_edge_fn)(nx_graph *g, nx_node hi, nx_node hj, nx_node w, nx_node ij, nx_node e,
                              void *user);
typedef struct nx_edge_opts {
    nx_backend backend;
    const char *formula; /* F as text, or NULL with expr */
    nx_edge_fn expr;
    void *user;
    const char *expr_key; /* required with expr: its cache name (equal keys mean equal F) */
} nx_edge_opts;
NX_API nx_node nx_ell_edge_aggregate_node(nx_graph *g, const nx_semiring *sr, nx_node values,
                                          nx_node indices, nx_node h, nx_node edge_attr,
                                          nx_edge_fn fn, void *user);
/* edge_attr may be NULL. */
NX_API nx_status nx_semiring_ell_edge_aggregate(nx_ctx *ctx, const nx_semiring *sr, const nx_ell *a,
                                                const nx_tensor *h, const nx_tensor *edge_attr,
                                                const nx_edge_opts *opts, nx_tensor **out);

/* ---- host construction -----------------------------------------------------------------------*/

/* values [m, k_act] and indices [m, k_act] padded to k_max >= k_act slots with identity and
 * pad_index. Indices are copied as given (i32 stays i32). */
NX_API nx_status nx_ell_pad(nx_ctx *ctx, const nx_tensor *values, const nx_tensor *indices,
                            int64_t k_max, int64_t n_cols, double identity, int64_t pad_index,
                            nx_ell *out);
/* From dense [m, n] f32/f64: each row keeps its entries with |v| > threshold, the k_max largest by
 * magnitude (first column on ties), in ascending column order; k_max <= 0 means the largest row
 * count. symmetrize: the kept pattern is made symmetric (an entry kept at (i, j) keeps (j, i) too,
 * with dense[j, i]; needs m == n; k_max grows to fit). Indices are i32 when n fits, else i64;
 * pads hold identity and index 0. */
typedef struct nx_ell_from_dense_opts {
    int64_t k_max;
    double threshold;
    double identity;
    bool symmetrize;
} nx_ell_from_dense_opts;
NX_API nx_status nx_ell_from_dense(nx_ctx *ctx, const nx_tensor *dense,
                                   const nx_ell_from_dense_opts *opts, nx_ell *out);
/* Dense [m, n_cols] of A's dtype: pads dropped, zero elsewhere, repeated indices summed. */
NX_API nx_status nx_ell_to_dense(nx_ctx *ctx, const nx_ell *a, nx_tensor **out);
/* A copy of a whose slots with valid[i, p] false (bool, [m, k_max]), and a's pads, hold sr's
 * annihilator, which becomes the copy's identity so they count as pads: masking equals dropping
 * those edges. EUCLIDEAN (no annihilator): NX_ERR_INVALID_ARG. */
NX_API nx_status nx_ell_mask(nx_ctx *ctx, const nx_ell *a, const nx_tensor *valid,
                             const nx_semiring *sr, nx_ell *out);

/* How the self slot's edge attributes are made (as PyG's add_self_loops fill_value). */
typedef enum nx_self_loop_fill {
    NX_SELF_LOOP_MEAN, /* the mean of the row's non-pad attributes (0 for an all-pad row) */
    NX_SELF_LOOP_ZERO, /* 0 */
    NX_SELF_LOOP_ADD,  /* their sum */
} nx_self_loop_fill;
/* A square a with a slot prepended to every row: (i, i) holding self_value (k_max + 1 slots; the
 * other slots keep their order). edge_attr [m, k_max, d] f32/f64 may be NULL; if given,
 * *attr_out gets [m, k_max + 1, d] with the self slot's attributes made by fill. */
NX_API nx_status nx_ell_add_self_loops(nx_ctx *ctx, const nx_ell *a, const nx_tensor *edge_attr,
                                       nx_self_loop_fill fill, double self_value, nx_ell *out,
                                       nx_tensor **attr_out);

/* ---- SectionedELL: rows bucketed by degree ---------------------------------------------------*/

/* Sections of rows with close degrees, each a plain ELL with k_max = 2^b, b = ceil(log2(max(degree,
 * 1))): no row carries more than twice its degree in pads. rows[s] (i64 [m_s]) are the original
 * row numbers of section s's rows; offsets is a copy of the CSR offsets it was built from (where
 * the values' gradients go). Host tensors only. Owned: free with nx_sectioned_ell_free. */
#define NX_SECTIONED_MAX 64
typedef struct nx_sectioned_ell {
    int n_sections;
    nx_ell sections[NX_SECTIONED_MAX];
    nx_tensor *rows[NX_SECTIONED_MAX];
    nx_tensor *offsets; /* i64 [n_rows + 1] */
    int64_t n_rows, n_cols, nnz;
    double identity;
} nx_sectioned_ell;

/* From ragged rows in CSR form: row i holds values[offsets[i] .. offsets[i + 1]) with the same
 * indices. offsets i64 [n_rows + 1] (from 0 to nnz, non-decreasing); values f32/f64 [nnz];
 * indices i32/i64 [nnz] in [0, n_cols) (checked, naming section row and slot). */
NX_API nx_status nx_sectioned_ell_from_ragged(nx_ctx *ctx, const nx_tensor *offsets,
                                              const nx_tensor *indices, const nx_tensor *values,
                                              int64_t n_cols, double identity,
                                              nx_sectioned_ell *out);
NX_API void nx_sectioned_ell_free(nx_sectioned_ell *s);
/* As the flat forms on the same matrix: matmul b [..., n_cols, c] -> [..., n_rows, c] under any
 * semiring; rmatvec (REAL) x [..., n_rows, c] -> [..., n_cols, c] (leading dims: a batch). One flat
 * call per section. */
NX_API nx_status nx_sectioned_ell_matmul(nx_ctx *ctx, const nx_semiring *sr,
                                         const nx_sectioned_ell *a, const nx_tensor *b,
                                         const nx_semiring_opts *opts, nx_tensor **out);
NX_API nx_status nx_sectioned_ell_rmatvec(nx_ctx *ctx, const nx_semiring *sr,
                                          const nx_sectioned_ell *a, const nx_tensor *x,
                                          const nx_semiring_opts *opts, nx_tensor **out);
/* Gradients, equal to the flat ELL's on the same matrix: the cotangents of the ragged values
 * (dvalues [nnz], in the CSR order and dtype the SectionedELL was built from) and of the dense
 * operand, for <dc, nx_sectioned_ell_matmul(A, b)> under any differentiable algebra, and for
 * <dy, nx_sectioned_ell_rmatvec(A, x)> under REAL. One flat VJP per section; either output may be
 * NULL. */
NX_API nx_status nx_sectioned_ell_matmul_vjp(nx_ctx *ctx, const nx_semiring *sr,
                                             const nx_sectioned_ell *a, const nx_tensor *b,
                                             const nx_tensor *dc, const nx_semiring_opts *opts,
                                             nx_tensor **dvalues, nx_tensor **db);
NX_API nx_status nx_sectioned_ell_rmatvec_vjp(nx_ctx *ctx, const nx_semiring *sr,
                                              const nx_sectioned_ell *a, const nx_tensor *x,
                                              const nx_tensor *dy, const nx_semiring_opts *opts,
                                              nx_tensor **dvalues, nx_tensor **dx);

/* ---- grid sparsity: stencils over a C-order grid as ELLs -------------------------------------*/

/* Deprecated (kept for one release): the boundary is an nx_border (nitrix.h): nearest (clamp to
 * the edge), wrap (periodic) or reflect (half-sample symmetric). The old names are aliases of
 * its constants, with nx_border's values. */
typedef nx_border nx_grid_boundary;
#define NX_GRID_REPLICATE NX_BORDER_NEAREST
#define NX_GRID_PERIODIC NX_BORDER_WRAP
#define NX_GRID_REFLECT NX_BORDER_REFLECT
#define NX_GRID_BOUNDARY_COUNT NX_BORDER_COUNT

#define NX_GRID_MAX_DIMS 4
/* Row v (a flat C-order voxel of grid_shape, 1..4 dims) gets one slot per offset: the voxel
 * v + offsets[s] (boundary-mapped) with weights[s]. offsets [n_offsets * ndim]; the ELL is f64
 * with i64 indices and identity NaN (stencil weights may be 0, so no slot is a pad). */
NX_API nx_status nx_grid_stencil(nx_ctx *ctx, int ndim, const int64_t *grid_shape, int n_offsets,
                                 const int64_t *offsets, const double *weights,
                                 nx_grid_boundary boundary, nx_ell *out);
/* The 2 ndim + 1 point Laplacian, sum over axes of (x[v - e_a] - 2 x[v] + x[v + e_a]) / h^2:
 * equal to scipy.ndimage.laplace (h = 1) in modes nearest, wrap and reflect. negative = false
 * flips the sign (the positive semi-definite form). Slot 0 is the centre. */
NX_API nx_status nx_grid_laplacian(nx_ctx *ctx, int ndim, const int64_t *grid_shape,
                                   nx_grid_boundary boundary, double spacing, bool negative,
                                   nx_ell *out);
/* The identity on the grid: one slot (v, v) of weight 1. */
NX_API nx_status nx_grid_identity(nx_ctx *ctx, int ndim, const int64_t *grid_shape, nx_ell *out);

#ifdef __cplusplus
}
#endif

#endif /* NITRIX_SPARSE_H */
