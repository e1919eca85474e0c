/*
 * nitrix ops: morphology (ops/morphology, docs/morphology.md). Included by nitrix-ops.h:
 * include that.
 */
#ifndef NITRIX_MORPHOLOGY_H
#define NITRIX_MORPHOLOGY_H

#include "nitrix-ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================================================
 * Morphology (ops/morphology, docs/morphology.md)
 *
 * Grey dilation and erosion as tropical window reductions: a max-plus (dilation) or min-plus
 * (erosion) fold over a window view of the padded image, so gradients come from autodiff of the
 * fragment and go to the first winner of each window. Conventions are scipy.ndimage's, exactly:
 *   dilate(x)[i] = max_j x[i + w/2 - j] + s[j]      (grey_dilation: s reflected, even w shifted)
 *   erode(x)[i]  = min_j x[i + j - w/2] - s[j]      (grey_erosion)
 * with w/2 rounded down, j over the footprint, s = 0 for a flat element. Open is dilate(erode(x)),
 * close is erode(dilate(x)). On 0/1 input with NX_MORPH_BORDER_CONSTANT and cval 0 these equal
 * binary_dilation and binary_erosion (border_value=0) with the footprint as structure.
 * ================================================================================================*/

#define NX_MORPH_MAX_SPATIAL 4

typedef enum nx_morph_op {
    NX_MORPH_DILATE,
    NX_MORPH_ERODE,
    NX_MORPH_OPEN,  /* dilate(erode(x)) */
    NX_MORPH_CLOSE, /* erode(dilate(x)) */
    NX_MORPH_OP_COUNT
} nx_morph_op;

/* Deprecated (kept for one release): the border is an nx_border (nitrix.h; reflect is scipy's
 * default). The old names are aliases of its constants. */
typedef nx_border nx_morph_border;
#define NX_MORPH_BORDER_REFLECT NX_BORDER_REFLECT
#define NX_MORPH_BORDER_CONSTANT NX_BORDER_CONSTANT
#define NX_MORPH_BORDER_NEAREST NX_BORDER_NEAREST
#define NX_MORPH_BORDER_MIRROR NX_BORDER_MIRROR
#define NX_MORPH_BORDER_WRAP NX_BORDER_WRAP
#define NX_MORPH_BORDER_COUNT NX_BORDER_COUNT

typedef enum nx_morph_padding {
    NX_MORPH_SAME,  /* output shape = input shape, border extended by `border` */
    NX_MORPH_VALID, /* only windows inside the image: out = in - w + 1 per spatial axis */
} nx_morph_padding;

/* The element is one of: a flat box of extents size[] (0 means 3), a flat footprint (nonzero =
 * in), or a non-flat structure (additive values; with a footprint too, only its nonzero places
 * count). footprint and structure are host tensors of nspatial dims; structure is f32 or f64. */
typedef struct nx_morph_opts {
    nx_backend backend;  /* NX_BACKEND_AUTO: the context's */
    int nspatial;        /* 1..4 trailing axes of x are spatial; 0: all of x's (x ndim <= 4) */
    int64_t size[NX_MORPH_MAX_SPATIAL];
    const nx_tensor *footprint;
    const nx_tensor *structure;
    nx_morph_padding padding;
    nx_border border;
    double cval;
} nx_morph_opts;

/* The fragment inside a caller's graph (x float). footprint/structure are read on the host and
 * become graph constants. NX_NONE with the graph's error on failure. */
NX_API nx_node nx_morph_node(nx_graph *g, nx_morph_op op, nx_node x, const nx_morph_opts *opts);

/* On tensors: x f32, f64, an integer or bool; the result has x's dtype, as scipy's does (integers
 * and bool are computed in a float dtype that holds their values: docs/morphology.md). The program is cached per (op, options, element, shapes,
 * dtypes, backend). opts may be NULL (3^n flat box, SAME, reflect). */
NX_API nx_status nx_morph(nx_ctx *ctx, nx_morph_op op, const nx_tensor *x,
                          const nx_morph_opts *opts, nx_tensor **out);
/* The spec's names for the four ops (the op table's dilate, erode, open, close; nx_morph with the
 * op is the older spelling): the same results, errors starting with the function's name. */
NX_API nx_status nx_dilate(nx_ctx *ctx, const nx_tensor *x, const nx_morph_opts *opts,
                           nx_tensor **out);
NX_API nx_status nx_erode(nx_ctx *ctx, const nx_tensor *x, const nx_morph_opts *opts,
                          nx_tensor **out);
NX_API nx_status nx_open(nx_ctx *ctx, const nx_tensor *x, const nx_morph_opts *opts,
                         nx_tensor **out);
NX_API nx_status nx_close(nx_ctx *ctx, const nx_tensor *x, const nx_morph_opts *opts,
                          nx_tensor **out);
/* dx of <dy, morph(x)>: the cotangent of each output goes to its window's first winner. */
NX_API nx_status nx_morph_vjp(nx_ctx *ctx, nx_morph_op op, const nx_tensor *x,
                              const nx_tensor *dy, const nx_morph_opts *opts, nx_tensor **dx);

/* Distance to the nearest zero of mask (nonzero and NaN count as foreground) under the
 * chessboard (L-inf) or taxicab (L1) metric: exactly scipy.ndimage.distance_transform_cdt, except
 * that the result is float (f64 for an f64 mask, else f32) and +inf where mask has no zero
 * (scipy: -1). Canonical driver: a separable per-axis contraction, min-max for chessboard and
 * min-plus for taxicab, against |q - p| (O(n^2) per line), so it is differentiable in the IR. */
typedef enum nx_distance_metric {
    NX_DISTANCE_CHESSBOARD,
    NX_DISTANCE_TAXICAB,
    NX_DISTANCE_METRIC_COUNT
} nx_distance_metric;

typedef struct nx_distance_opts {
    nx_backend backend;
    nx_distance_metric metric;
} nx_distance_opts;

/* The fragment from a float field g (0 at the sources, +inf elsewhere), every axis spatial. */
NX_API nx_node nx_distance_node(nx_graph *g, nx_node field, nx_distance_metric metric);
NX_API nx_status nx_distance_transform(nx_ctx *ctx, const nx_tensor *mask,
                                       const nx_distance_opts *opts, nx_tensor **out);

/* Exact Euclidean distance to the nearest zero of mask, with per-axis sampling, as
 * scipy.ndimage.distance_transform_edt (to 1e-10 relative in f64, 1e-4 in f32); +inf where mask
 * has no zero. f64 for an f64 mask, else f32. A divergent op (runtime/divergent.def), two drivers:
 *   "separable"    canonical: one min-plus pass per axis against (s (q - p))^2, an IR graph,
 *                  differentiable, O(n^2) per line;
 *   "felzenszwalb" fast: the lower envelope of parabolas per line, O(n) per line, an IR extern
 *                  without an adjoint (not differentiable).
 * driver NULL or "auto": the canonical one under nx_ctx_reproducible, else the fast one. The
 * program is cached per (driver, sampling, dtype, shape, backend). opts may be NULL.
 * On the cuda backend the fast driver runs on the device (one extern with CUDA code per axis): a
 * device mask is read in place and the result stays on the device. A device mask on a host
 * backend is NX_ERR_UNSUPPORTED naming it. */
typedef struct nx_edt_opts {
    nx_backend backend;
    const double *sampling; /* one per axis, each finite and > 0; NULL: all 1 */
    const char *driver;     /* NULL, "auto", "separable" or "felzenszwalb" */
} nx_edt_opts;

NX_API nx_status nx_distance_transform_edt(nx_ctx *ctx, const nx_tensor *mask,
                                           const nx_edt_opts *opts, nx_tensor **out);

/* scipy.ndimage.median_filter with size or footprint (opts->structure must be NULL), scipy's
 * border modes (reflect by default) and origin: the element of rank count / 2 of each window, by a
 * selection network (at most 64 places) or a selection per voxel (docs/morphology.md). NaN sorts
 * last (numpy's order). */
NX_API nx_node nx_median_node(nx_graph *g, nx_node x, const nx_morph_opts *opts);
NX_API nx_status nx_median_filter(nx_ctx *ctx, const nx_tensor *x, const nx_morph_opts *opts,
                                  nx_tensor **out);

/* scipy.ndimage.label: i32 labels 1..K numbered by first voxel in C order (0: background;
 * nonzero and NaN are foreground), neighbours at most `connectivity` (1..ndim) axes apart.
 * n_labels (may be NULL) receives K (the op table's connected_components, nx_op_call and
 * `nitrix run`, has K as a second output, num_labels, a 0-d i64). Not differentiable. A host
 * mask is labelled by union-find over runs on the CPU; a CUDA device mask by label propagation on the GPU (labels on the
 * device), as nx_connected_components_opts with the "auto" driver. */
NX_API nx_status nx_connected_components(nx_ctx *ctx, const nx_tensor *mask, int connectivity,
                                         nx_tensor **out, int32_t *n_labels);

/* The drivers of nx_connected_components_opts, both giving scipy's labels exactly:
 *   "union_find"   runs over each line joined by union-find on the CPU (host masks only);
 *   "propagation"  IR programs on any backend: every foreground voxel starts as its own linear
 *                  index, each round takes the minimum over the neighbourhood and jumps twice
 *                  (L = L[L]), until a run of rounds changes nothing; the roots are then numbered
 *                  by a cumulative sum in C order. Runs on the GPU (the device driver).
 *   NULL, "auto"   propagation for a device mask or backend NX_BACKEND_CUDA, else union_find.
 * backend: propagation's backend (NX_BACKEND_AUTO: cuda for a device mask or a cuda context, else
 * the context's). A host mask labelled on the GPU is uploaded once and its labels come back once;
 * a device mask's labels stay on the device. */
typedef struct nx_label_opts {
    int connectivity; /* 1..ndim */
    const char *driver;
    nx_backend backend;
} nx_label_opts;
NX_API nx_status nx_connected_components_opts(nx_ctx *ctx, const nx_tensor *mask,
                                              const nx_label_opts *opts, nx_tensor **out,
                                              int32_t *n_labels);
/* Bool mask of the component with the most voxels (ties: the lowest label; none: all false). */
NX_API nx_status nx_largest_connected_component(nx_ctx *ctx, const nx_tensor *mask,
                                                int connectivity, nx_tensor **out);

/* Max pooling with indices and its inverse, channels-last as the semiring conv: x is
 * [..., s_1..s_d, c] with d = nspatial (1..3) spatial axes before the channel axis and any leading
 * (batch) axes. PyTorch's max_pool{1,2,3}d(return_indices=True) and max_unpool{1,2,3}d, with
 * ceil_mode false and dilation 1:
 *   out_i = floor((s_i + 2 p_i - k_i) / stride_i) + 1
 *   values[.., o, ch]  = max over the window of x padded with -inf (p_i each side)
 *   indices[.., o, ch] = the winner's flat spatial index into x's s_1..s_d of its batch and
 *                        channel (i64), the first max in the window's C order on ties; the first
 *                        in-image place when every value is -inf (as PyTorch). NaN wins (the
 *                        first NaN; PyTorch's CPU kernel keeps the last).
 * Gradients: the pool's go to the winner (indices); the unpool's are the gather dx = dy[indices]
 * (the adjoint of its scatter; where indices repeat, the last write wins both ways). */
#define NX_POOL_MAX_SPATIAL 3

typedef struct nx_pool_opts {
    nx_backend backend;
    int nspatial;                               /* 1..3 */
    int64_t kernel[NX_POOL_MAX_SPATIAL];        /* >= 1 */
    int64_t stride[NX_POOL_MAX_SPATIAL];        /* 0: the kernel (PyTorch's default) */
    int64_t padding[NX_POOL_MAX_SPATIAL];       /* each side, 0 <= p <= kernel / 2 (PyTorch's) */
    int64_t output_size[NX_POOL_MAX_SPATIAL];   /* unpool only; 0s: (o - 1) stride - 2 p + k */
} nx_pool_opts;

/* The pool's fragment: the values node, and the indices node through *indices (may be NULL). */
NX_API nx_node nx_max_pool_node(nx_graph *g, nx_node x, const nx_pool_opts *opts,
                                nx_node *indices);
/* y [..., S_1..S_d, c] zero except y[.., indices[.., o, ch], ch] = x[.., o, ch] (x and indices of
 * one shape, indices i32 or i64; out-of-range indices are dropped; repeats: the last in C order
 * wins). */
NX_API nx_node nx_max_unpool_node(nx_graph *g, nx_node x, nx_node indices,
                                  const nx_pool_opts *opts);

/* On tensors: x f32 or f64; values has x's dtype, indices i64. Cached per (options, shape,
 * dtype, backend). */
NX_API nx_status nx_max_pool_with_indices_nd(nx_ctx *ctx, const nx_tensor *x,
                                             const nx_pool_opts *opts, nx_tensor **values,
                                             nx_tensor **indices);
/* dx of <dy, values>: dy at each window's winner, summed where windows share one. */
NX_API nx_status nx_max_pool_vjp(nx_ctx *ctx, const nx_tensor *x, const nx_tensor *dy,
                                 const nx_pool_opts *opts, nx_tensor **dx);
/* Indices outside [0, S_1 * .. * S_d) are refused here (NX_ERR_INVALID_ARG), as PyTorch does. */
NX_API nx_status nx_max_unpool_nd(nx_ctx *ctx, const nx_tensor *x, const nx_tensor *indices,
                                  const nx_pool_opts *opts, nx_tensor **out);
/* dx of <dy, unpool(x)>: dy gathered at indices. */
NX_API nx_status nx_max_unpool_vjp(nx_ctx *ctx, const nx_tensor *x, const nx_tensor *indices,
                                   const nx_tensor *dy, const nx_pool_opts *opts, nx_tensor **dx);

/* ====================================== end of morphology ===================================== */

#ifdef __cplusplus
}
#endif

#endif /* NITRIX_MORPHOLOGY_H */
