/* What the bilateral family's op files share (ops/smoothing): the metric check and the element
 * readers of metric.c. Private to the library. */
#ifndef NX_OPS_SMOOTHING_BILATERAL_H
#define NX_OPS_SMOOTHING_BILATERAL_H

#include "internal.h"
#include "nitrix-ops.h"

/* A metric of kind and param against the features' dtype dt (NX_DTYPE_COUNT: any) and d_f (< 0:
 * any): NX_OK or an error starting with who. */
NX_HIDDEN nx_status nx_bil_check_metric(nx_ctx *ctx, const char *who, const nx_feature_metric *m,
                                        nx_dtype dt, int64_t d_f);
/* Element idx of a host tensor of a real dtype, as a double. */
NX_HIDDEN double nx_bil_at(const nx_tensor *t, const int64_t *idx);
/* Whether every element is finite (positive); else false with the first bad one's C-order
 * position and value. */
NX_HIDDEN bool nx_bil_all_finite(const nx_tensor *t, int64_t *bad, double *value);
NX_HIDDEN bool nx_bil_all_positive(const nx_tensor *t, int64_t *bad, double *value);
/* features f32/f64 [n, d_f], d_f >= 1, finite. */
NX_HIDDEN nx_status nx_bil_check_features(nx_ctx *ctx, const char *who, const nx_tensor *f);

/* The metric kinds' names as ENUM options take them, in nx_metric_kind order. */
#define NX_BIL_METRIC_NAMES "diagonal|factor"

#endif /* NX_OPS_SMOOTHING_BILATERAL_H */
