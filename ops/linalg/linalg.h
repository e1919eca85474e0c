/* The linalg family's shared pieces (spec §4.5, api-b §1; docs/linalg.md).
 *
 * The batched small-dense tier. A batch of p x p problems (leading axes: the batch) is written
 * out at graph-build time as one IR node per matrix entry: the entry (i, j) of every problem is
 * a node of shape batch + [1, 1] (a slice, kept two-dimensional), and a row of right-hand sides
 * one of shape batch + [1, k]. The factorisations (Cholesky, LU with partial pivoting, triangular
 * substitution, cyclic Jacobi) are then ordinary elementwise IR over those nodes, assembled back
 * into batch + [p, q] by concats of unit pieces: the whole op is one fused loop kernel. Lowering
 * reads every unit piece at the same index (codegen/lower.c), so the kernel computes each entry
 * of a problem once and each output point selects its entry; the per-problem work is
 * independent of the other problems (one problem per batch point on both backends; on the CPU
 * the work is invariant in the two matrix loops and hoisted out of them). Autodiff
 * differentiates the composition. Nothing calls a library per problem.
 *
 * Failure (a non-SPD matrix for Cholesky, an exact zero pivot for LU or a triangular diagonal)
 * is per problem: that problem's outputs are all NaN (nx_la_poison); cholesky also returns
 * LAPACK's info (0, or the 1-based order of the first leading minor that is not positive). */
#ifndef NX_OPS_LINALG_H
#define NX_OPS_LINALG_H

#include "ops/op.h"

/* The largest p of the unrolled tier (the graph grows as p^3). */
#define NX_LA_MAX_P 32
#define NX_LA_MAX_ENTRIES (NX_LA_MAX_P * NX_LA_MAX_P)

/* A batch of small matrices, one node per entry e[i * cols + j]. Matrix entries have the batch
 * shape + [1, 1] and broadcast against right-hand-side rows (batch + [1, k]). */
typedef struct nx_la_mat {
    int rows, cols;
    nx_node e[NX_LA_MAX_ENTRIES];
} nx_la_mat;

/* The entries of x (batch + [rows, cols]). */
NX_HIDDEN void nx_la_entries(nx_graph *g, nx_node x, nx_la_mat *m);
/* The rows of b (batch + [rows, k]) as nodes of batch + [1, k]. */
NX_HIDDEN void nx_la_rows(nx_graph *g, nx_node b, int rows, nx_node *out);
/* The inverse: rows[i] (batch + [1, w]) stacked into batch + [n, w]. */
NX_HIDDEN nx_node nx_la_stack_rows(nx_graph *g, const nx_node *rows, int n);
/* The matrix back as batch + [rows, cols]. */
NX_HIDDEN nx_node nx_la_assemble(nx_graph *g, const nx_la_mat *m);
/* Ops with several outputs pack them into one tensor so that the unrolled work is one kernel
 * (fusion materialises a value two outputs share, and two outputs read every entry):
 * batch + [rows + 1, cols], the matrix and then one row holding extra[0..nextra) and zeros
 * (nextra <= cols); nx_la_split_extra takes the matrix and that row (batch + [1, cols]) back. */
NX_HIDDEN nx_node nx_la_assemble_extra(nx_graph *g, const nx_la_mat *m, const nx_node *extra,
                                       int nextra);
NX_HIDDEN void nx_la_split_extra(nx_graph *g, nx_node packed, nx_node *mat, nx_node *extra);
/* An entry (batch + [1, 1]) as a tensor of the given shape (the batch shape: info, logdet). */
NX_HIDDEN nx_node nx_la_unit(nx_graph *g, nx_node e, int ndim, const int64_t *shape);
/* x where ok (batch + [1, 1], bool) holds, NaN elsewhere. */
NX_HIDDEN nx_node nx_la_poison(nx_graph *g, nx_node ok, nx_node x);

/* Cholesky A = L L^T from the lower triangle of a (entries above the diagonal are never read).
 * l receives L (zeros above the diagonal); *ok (bool, batch + [1, 1]) says every pivot was > 0;
 * *info (i32, batch + [1, 1]; may be NULL) is 0 or the 1-based index of the first pivot that is not
 * positive (or NaN). L's entries are not poisoned here. l2 is added to the diagonal. */
NX_HIDDEN void nx_la_cholesky(nx_graph *g, const nx_la_mat *a, double l2, nx_la_mat *l,
                              nx_node *ok, nx_node *info);
/* Substitution with a triangular matrix on rows of right-hand sides: solves M x = b where
 * M = t (trans false) or t^T (trans true), t lower or upper; unit: the diagonal is taken as 1.
 * *ok (may be NULL) is false where a diagonal entry used is 0. */
NX_HIDDEN void nx_la_trisolve(nx_graph *g, const nx_la_mat *t, bool lower, bool trans, bool unit,
                              const nx_node *b, int nb_rows, nx_node *x, nx_node *ok);

/* The batch + matrix shape of a (..., p, q) tensor input and b (..., p) or (..., p, k): checks
 * shared by the solves. vector says b was (..., p) (numpy.linalg.solve's rule: b.ndim ==
 * a.ndim - 1). */
NX_HIDDEN nx_status nx_la_check_square(const nx_op_args *c, int i, const char *name, int max_p);
NX_HIDDEN nx_status nx_la_check_rhs(const nx_op_args *c, int ia, int ib, bool *vector);
/* b as batch + [p, k] (a vector gets k = 1). */
NX_HIDDEN nx_node nx_la_rhs_matrix(nx_graph *g, nx_node b, bool vector);
NX_HIDDEN nx_node nx_la_rhs_restore(nx_graph *g, nx_node x, bool vector);

#endif /* NX_OPS_LINALG_H */
