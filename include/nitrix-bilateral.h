/*
 * nitrix ops: bilateral filtering, neighbourhoods and k-NN (ops/smoothing, docs/bilateral.md).
 * Included by nitrix-ops.h: include that.
 */
#ifndef NITRIX_BILATERAL_H
#define NITRIX_BILATERAL_H

#include "nitrix-ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Nothing declared yet. */

#ifdef __cplusplus
}
#endif

#endif /* NITRIX_BILATERAL_H */
