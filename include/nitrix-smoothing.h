/*
 * nitrix ops: Gaussian smoothing (ops/smoothing, docs/smoothing.md).
 * Included by nitrix-ops.h: include that.
 */
#ifndef NITRIX_SMOOTHING_H
#define NITRIX_SMOOTHING_H

#include "nitrix-ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Nothing declared yet. */

#ifdef __cplusplus
}
#endif

#endif /* NITRIX_SMOOTHING_H */
