/*
 * nitrix ops: bilateral filtering, neighbourhoods and k-NN (ops/smoothing, docs/bilateral.md).
 * Included by nitrix-ops.h: include that.
 *
 * The bounded bilateral filter over points i = 0..n-1 with values v_i (d_v of them) and features
 * f_i (d_f of them), each point averaging a neighbourhood N(i) of kmax slots:
 *
 *     q_ij = d_M(f_i, f_j)^2 = (f_i - f_j)^T M (f_i - f_j),      w_ij = m_ij exp(-q_ij / 2)
 *     v'_i = sum_{j in N(i)} w_ij v_j / sum_{j in N(i)} w_ij
 *
 * where m_ij is the validity mask (1 where none is given). There is no separate self weight: the
 * point itself counts exactly when it is one of its own slots (k-NN and cube neighbourhoods put it
 * there, with q_ii = 0 and so w_ii = m_ii). A row whose weights sum to 0 (every slot masked)
 * keeps its input value. n_iters > 1 repeats the average with the same weights (a fixed-affinity
 * mean field): one gather of the values plus one weighted reduction per iteration.
 *
 * The ops are rows of the op table (nitrix-op.h: nx_op_call, `nitrix run`): bilateral_gaussian
 * (alias bilateral_gaussian_knn; the index array and mask are its TENSOR options neighbourhood
 * and mask, the k-NN form its option k), brute_force_knn, spatial_cube_neighbourhood (host),
 * susan_emulator and metric_from_spd (host). nx_metric_block_diagonal is not a row (a list of
 * metrics, not a fixed set of tensors). The functions below are their typed entry points.
 */
#ifndef NITRIX_BILATERAL_H
#define NITRIX_BILATERAL_H

#include "nitrix-ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------------
 * Feature metrics: M = L L^T, applied as |L^T (f_i - f_j)|^2 inside the graph, so gradients reach
 * sigma or L.
 * ----------------------------------------------------------------------------------------------*/

typedef enum nx_metric_kind {
    NX_METRIC_DIAGONAL, /* sigma [d_f], finite, > 0: q = sum_c ((f_i - f_j)_c / sigma_c)^2 */
    NX_METRIC_FACTOR,   /* param L [d_f, r], finite: q = |L^T (f_i - f_j)|^2 (rank <= r < d_f ok) */
    NX_METRIC_KIND_COUNT
} nx_metric_kind;

/* A metric is its kind and its parameter tensor (borrowed; f32 or f64, the features' dtype). */
typedef struct nx_feature_metric {
    nx_metric_kind kind;
    const nx_tensor *param;
} nx_feature_metric;

/* The factor of the block-diagonal metric blockdiag(M_1, ..., M_B): L = blockdiag(L_1, ..., L_B)
 * [sum d_b, sum r_b], where a diagonal block contributes diag(1 / sigma). The blocks' dtypes must
 * agree; the result has it. *factor is new (nx_tensor_free). */
NX_API nx_status nx_metric_block_diagonal(nx_ctx *ctx, int n_blocks,
                                          const nx_feature_metric *blocks, nx_tensor **factor);
/* The lower Cholesky factor L of a symmetric positive definite M [d, d] (M = L L^T), computed in
 * f64 and returned in M's dtype. A matrix that is not square, not symmetric (|m_ij - m_ji| above
 * 1e-10 (f64) or 1e-5 (f32) of max |m|), not finite or not positive definite (a pivot <= 0) is
 * NX_ERR_INVALID_ARG saying which. */
NX_API nx_status nx_metric_from_spd(nx_ctx *ctx, const nx_tensor *spd, nx_tensor **factor);
/* q = d_M^2 of differences delta [..., d_f] -> [...], in a caller's graph. param is sigma [d_f]
 * or L [d_f, r] of delta's dtype. */
NX_API nx_node nx_metric_sqdist_node(nx_graph *g, nx_metric_kind kind, nx_node param,
                                     nx_node delta);

/* ------------------------------------------------------------------------------------------------
 * Neighbourhoods
 * ----------------------------------------------------------------------------------------------*/

typedef struct nx_knn_opts {
    nx_backend backend;
    const nx_feature_metric *metric; /* NULL: Euclidean (M = I) */
    bool exclude_self; /* false: slot 0 is the point itself, then its k-1 nearest others */
} nx_knn_opts;

/* The k nearest neighbours of each point by d_M, O(n^2) time and an [n, n] distance matrix:
 * i64 [n, k] in ascending distance, ties to the lower index. The point itself is slot 0 (even
 * when another point has the same features) unless exclude_self, when it never appears (then
 * k <= n - 1). Features must be finite (NaN or inf: NX_ERR_INVALID_ARG naming the point); n = 0
 * gives [0, k]; k < 1 or k > n is NX_ERR_INVALID_ARG. opts may be NULL. */
NX_API nx_status nx_brute_force_knn(nx_ctx *ctx, const nx_tensor *features, int64_t k,
                                    const nx_knn_opts *opts, nx_tensor **out);

/* The (2h+1)^d cube around each voxel of a C-order grid of ndim (1..NX_MAX_DIMS) extents: index
 * i64 [n, (2h+1)^d], n = prod(shape), slots in C order of the offsets (-h..h per axis, last axis
 * fastest), so the centre (the voxel itself) is slot ((2h+1)^d - 1) / 2. Boundary rule: an offset
 * that leaves the grid is clamped to the nearest voxel inside (scipy's 'nearest'), and validity
 * (optional, may be NULL) is bool [n, (2h+1)^d], false exactly there. Host op; h >= 0. */
NX_API nx_status nx_spatial_cube_neighbourhood(nx_ctx *ctx, int ndim, const int64_t *shape,
                                               int64_t half, nx_tensor **index,
                                               nx_tensor **validity);

/* ------------------------------------------------------------------------------------------------
 * The bilateral filter
 * ----------------------------------------------------------------------------------------------*/

#define NX_BILATERAL_MAX_ITERS 1024

/* The neighbourhood is one of: index, an explicit [n, kmax] i32/i64 array with entries in [0, n);
 * ell, an n x n ELL (nitrix-sparse.h) whose indices are the neighbours and whose pads (value ==
 * identity) are dropped, its other values unused (the structure only); else the k nearest by the
 * same metric (nx_brute_force_knn, self included). mask (optional) is [n, kmax], bool or an
 * integer dtype: zero drops the slot (with an ELL, on top of its pads). */
typedef struct nx_bilateral_opts {
    nx_backend backend;
    nx_feature_metric metric;
    int64_t k;              /* k-NN count when index is NULL: 1..n */
    const nx_tensor *index; /* NULL: ell, else k-NN */
    const nx_ell *ell;      /* NULL: index or k-NN */
    const nx_tensor *mask;  /* NULL: every slot valid */
    int n_iters;            /* 0 means 1; at most NX_BILATERAL_MAX_ITERS */
} nx_bilateral_opts;

/* values [n, d_v] and features [n, d_f] of one float dtype (the metric's too); features finite
 * (NX_ERR_INVALID_ARG naming the point otherwise); NaN in values propagates to the rows that
 * average it. Result [n, d_v]. The program is cached per (metric kind, n_iters, shapes, dtypes,
 * whether a mask is given, backend). */
NX_API nx_status nx_bilateral_gaussian(nx_ctx *ctx, const nx_tensor *values,
                                       const nx_tensor *features, const nx_bilateral_opts *opts,
                                       nx_tensor **out);
/* Cotangents for the result's cotangent dout [n, d_v], by autodiff of the same fragment (the
 * neighbourhood is held fixed): d_values, d_features, d_metric (sigma's or L's shape). Each
 * output may be NULL when not wanted. */
NX_API nx_status nx_bilateral_gaussian_vjp(nx_ctx *ctx, const nx_tensor *values,
                                           const nx_tensor *features, const nx_bilateral_opts *opts,
                                           const nx_tensor *dout, nx_tensor **d_values,
                                           nx_tensor **d_features, nx_tensor **d_metric);
/* The fragment in a caller's graph: values [n, d_v], features [n, d_f], metric param as in
 * nx_metric_sqdist_node, index [n, kmax] i32/i64 (clamped into [0, n) as nx_gather does), mask
 * [n, kmax] bool or NX_NONE, n_iters >= 1. */
NX_API nx_node nx_bilateral_node(nx_graph *g, nx_node values, nx_node features, nx_metric_kind kind,
                                 nx_node metric, nx_node index, nx_node mask, int n_iters);

/* ------------------------------------------------------------------------------------------------
 * SUSAN emulation (docs/bilateral.md lists how it differs from FSL's susan)
 * ----------------------------------------------------------------------------------------------*/

/* Each voxel of the trailing nspatial axes (leading axes are a batch) becomes a point with value
 * its intensity I and features (x_1 / sigma_space, ..., x_d / sigma_space, I / sigma_intensity),
 * its neighbourhood the (2h+1)^d cube without the centre and without the places outside the image:
 *   w_ij = exp(-|x_i - x_j|^2 / (2 sigma_space^2) - (I_i - I_j)^2 / (2 sigma_intensity^2))
 *   out_i = sum_j w_ij I_j / sum_j w_ij
 * and where sum_j w_ij < 1e-4 (no neighbour is alike: an isolated noise voxel) the median of the
 * cube (scipy's median_filter, mode 'nearest') when use_median, else I_i. */
typedef struct nx_susan_opts {
    nx_backend backend;
    int nspatial;           /* 1..4 trailing axes; 0: all of the image's (ndim <= 4) */
    double sigma_space;     /* voxels, finite and > 0 */
    double sigma_intensity; /* finite and > 0; ignored when bthresh > 0 */
    double bthresh;         /* > 0: FSL's brightness threshold bt, sigma_intensity = bt / sqrt(2) */
    bool skip_median;       /* true: isolated voxels keep their value (use_median = False) */
    int64_t half;           /* cube half-width h: 0 means 1 */
} nx_susan_opts;

/* image f32 or f64 (integers are converted to f32); result of the image's float dtype. */
NX_API nx_status nx_susan_emulator(nx_ctx *ctx, const nx_tensor *image, const nx_susan_opts *opts,
                                   nx_tensor **out);
/* d image of <dout, susan_emulator(image)> by autodiff of the same fragment (image f32 or f64;
 * the median routes to its element; the switch to the median at the threshold is not smooth). */
NX_API nx_status nx_susan_emulator_vjp(nx_ctx *ctx, const nx_tensor *image,
                                       const nx_susan_opts *opts, const nx_tensor *dout,
                                       nx_tensor **dimage);

#ifdef __cplusplus
}
#endif

#endif /* NITRIX_BILATERAL_H */
