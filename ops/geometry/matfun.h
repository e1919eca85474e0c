/* Small batched matrices as IR fragments: element access and assembly, a pivoted linear solve,
 * closed-form determinants and the matrix exponential (scaling and squaring with a Padé
 * approximant). Every function builds graph nodes from primitives, so both backends compile the
 * result and autodiff differentiates it; nothing here runs on the host.
 *
 * Matrices are the last two axes of a node, [..., n, m], batched over the leading axes (which
 * broadcast where two matrices meet). "Scalars" of a batch are nodes of the batch shape [...]
 * (0-d for a single matrix). The geometry family (affine_exp, invert_affine, fit_affine, ...)
 * uses these; another family (linalg's matrix_exp / matrix_log) includes this header rather than
 * writing its own (docs/geometry.md, "Small matrices"). */
#ifndef NX_OPS_GEOMETRY_MATFUN_H
#define NX_OPS_GEOMETRY_MATFUN_H

#include "ops/op.h"

/* The scaling-and-squaring loop is unrolled this many times: a generator of 1-norm above
 * theta_m 2^NX_MAT_EXPM_MAX_SQUARINGS (theta_13 = 5.37 in f64, theta_7 = 3.93 in f32: about
 * 3.5e5 and 2.6e5) is out of range and its exponential is NaN (documented). */
#define NX_MAT_EXPM_MAX_SQUARINGS 16

/* x [..., n, m]: the element (i, j), of shape [...]. */
NX_HIDDEN nx_node nx_mat_el(nx_graph *g, nx_node x, int i, int j);
/* [..., n, m] from n*m nodes of one shape [...] (row-major: els[i*m + j] is (i, j)). A NX_NONE
 * element is 0; `like` (any of the elements that is not NX_NONE) gives the batch shape. */
NX_HIDDEN nx_node nx_mat_from(nx_graph *g, int n, int m, const nx_node *els);
/* The n x n identity, a constant [n, n] of dtype dt (it broadcasts against a batch). */
NX_HIDDEN nx_node nx_mat_eye(nx_graph *g, nx_dtype dt, int n);
/* x [..., n, m] -> [..., m, n]. */
NX_HIDDEN nx_node nx_mat_transpose(nx_graph *g, nx_node x);
/* Rows [r0, r1) and columns [c0, c1) of x [..., n, m]. */
NX_HIDDEN nx_node nx_mat_block(nx_graph *g, nx_node x, int r0, int r1, int c0, int c1);

/* x itself, materialised: a scan over a new axis of length 1 (a library primitive, whose operand
 * and result fusion always keeps in memory). Fusion inlines a value whose readers are all in one
 * kernel, so an unrolled chain of small matrix products (the squarings, the elimination steps)
 * would otherwise become one kernel with a loop per product, past the kernel IR's loop limit
 * (NX_KERNEL_MAX_LOOPS); the fragments below put one of these between steps. */
NX_HIDDEN nx_node nx_mat_barrier(nx_graph *g, nx_node x);

/* X = A^{-1} B for A [..., n, n] and B [..., n, k] (leading axes broadcast): Gauss-Jordan
 * elimination with partial pivoting (the row of largest |a| at or below the diagonal; ties: the
 * lowest row), unrolled over the n columns. When `singular` is not NULL it receives a bool [...]:
 * true where a pivot is at most n eps max|A| (eps of A's dtype), i.e. A is singular to working
 * precision; X is then not meaningful there (inf or NaN, or large). */
NX_HIDDEN nx_node nx_mat_solve(nx_graph *g, nx_node a, nx_node b, nx_node *singular);

/* det A for A [..., n, n], n = 1, 2 or 3 (closed forms: the rule of Sarrus for 3); [...]. Other n
 * record NX_ERR_UNSUPPORTED in the graph. */
NX_HIDDEN nx_node nx_mat_det(nx_graph *g, nx_node a);

/* exp(A) for A [..., n, n] of f32 or f64 (Higham 2005, "The scaling and squaring method for the
 * matrix exponential revisited"): s = max(0, ceil(log2(|A|_1 / theta_m))) per matrix, the
 * diagonal Padé approximant r_m(A / 2^s) (m = 13 for f64, 7 for f32) by one pivoted solve
 * (V - U) X = V + U, then s squarings, each a select so that every matrix of the batch takes its
 * own s. s only depends on the norm through ceil, so gradients flow through the polynomial, the
 * solve and the squarings, not through the choice of s. A matrix with s above
 * NX_MAT_EXPM_MAX_SQUARINGS gives NaN. */
NX_HIDDEN nx_node nx_mat_expm(nx_graph *g, nx_node a);

#endif /* NX_OPS_GEOMETRY_MATFUN_H */
