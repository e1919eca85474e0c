/* Internals shared by the files of ops/sparse. Not installed. */
#ifndef NX_OPS_SPARSE_H
#define NX_OPS_SPARSE_H

#include "internal.h"
#include "nitrix-graph.h"
#include "nitrix-ops.h"
#include "ops/semiring/semiring.h"

/* The transpose of a as an ELL (host): row q holds the (value, i) of every slot (i, p) of a with
 * indices[i, p] == q, in ascending (i, p) order, padded with identity and index 0 to the largest
 * column count. Pads of a (value == identity) are dropped. a must have passed nx_ell_check. */
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

#endif /* NX_OPS_SPARSE_H */
