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

/* Nothing declared yet. */

#ifdef __cplusplus
}
#endif

#endif /* NITRIX_SPARSE_H */
