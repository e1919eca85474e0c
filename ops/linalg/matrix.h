/* The linalg matrix utilities' and kernels' shared pieces (docs/linalg.md): index-table gathers
 * (sym2vec, vec2sym, squareform, toeplitz), the last-two-axes transpose, and float checks. */
#ifndef NX_OPS_LINALG_MATRIX_H
#define NX_OPS_LINALG_MATRIX_H

#include "ops/op.h"

/* y[..., t] = x[..., flat(table[t])] over x's last ntail axes flattened, or `fill` where
 * table[t] < 0; y's last axes are out_tail[0..nout). A gather of a constant table: autodiff
 * scatters the cotangent back. */
NX_HIDDEN nx_node nx_la_take(nx_graph *g, nx_node x, int ntail, const int32_t *table, int64_t nt,
                             double fill, int nout, const int64_t *out_tail);
/* x with its last two axes swapped. */
NX_HIDDEN nx_node nx_la_swap_last(nx_graph *g, nx_node x);
/* Input i is f32 or f64 (the dtype of input 0 when i > 0) with at least min_ndim dims. */
NX_HIDDEN nx_status nx_la_check_float(const nx_op_args *c, int i, const char *name,
                                      int min_ndim);

/* Entries (i, j) with j - i >= offset of a rows x cols matrix. */
NX_HIDDEN int64_t nx_la_triu_count(int64_t rows, int64_t cols, int64_t offset);
/* x[..., i, j] for j - i >= offset in row-major order (numpy.triu_indices(rows, offset, cols)). */
NX_HIDDEN nx_node nx_la_sym2vec(nx_graph *g, nx_node x, int64_t offset);
/* The symmetric side x side matrix whose upper triangle at offset is v's last axis (mirrored
 * below; entries with |i - j| < offset are 0). */
NX_HIDDEN nx_node nx_la_vec2sym(nx_graph *g, nx_node v, int64_t side, int64_t offset);
/* The side whose triangle at offset has n entries (the JAX version's closed form), or -1. */
NX_HIDDEN int64_t nx_la_vec2sym_side(int64_t n, int64_t offset);

/* The Toeplitz options shared by toeplitz and toeplitz_2d. */
typedef struct nx_toeplitz_args {
    nx_backend backend;
    int64_t shape[2];
    int nshape; /* 0: (c's length, r's length) */
    double fill_value;
} nx_toeplitz_args;
/* T[..., i, j] = c[..., i - j] for i >= j, r[..., j - i] for j > i (c[0] on the diagonal, as
 * scipy.linalg.toeplitz), fill beyond either vector; T is m x n. */
NX_HIDDEN nx_node nx_la_toeplitz(nx_graph *g, nx_node c, nx_node r, int64_t m, int64_t n,
                                 double fill);
/* The ops' check (batched: leading dims allowed) and build (inputs "c r?"). */
NX_HIDDEN nx_status nx_la_toeplitz_check(const nx_op_args *c, bool batched, int64_t *m,
                                         int64_t *n);
NX_HIDDEN nx_status nx_la_toeplitz_build(nx_graph *g, const nx_op_args *c, nx_node *outs);
/* The schema rows of both. */
#define NX_LA_TOEPLITZ_OPTS                                                                    \
    {"shape", NX_OPT_INTS, "(len(c), len(r))", "1:", 2, "the output's (m, n)"},                \
    {                                                                                          \
        "fill_value", NX_OPT_FLOAT, "0", NULL, 1, "cells beyond c and r"                       \
    }

#endif /* NX_OPS_LINALG_MATRIX_H */
