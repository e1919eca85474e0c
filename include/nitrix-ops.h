/*
 * nitrix ops: semirings and the contractions built on them. Not included by nitrix.h; include this
 * header yourself.
 *
 * A semiring is a monoid (+) folded over a carry (init, update, merge, finalize), a binary (x), an
 * identity (the (+)-identity, used to pad) and an annihilator, plus properties. Six are built in:
 *
 *   name               (+)                              (x)            identity  annihilator
 *   REAL               sum                              a*b            0         0
 *   LOG                logsumexp, online (m, s) carry   a+b            -inf      -inf
 *   TROPICAL_MAX_PLUS  max                              a+b            -inf      -inf
 *   TROPICAL_MIN_PLUS  min                              a+b            +inf      +inf
 *   BOOLEAN            or (max over 0/1)                (a!=0)&(b!=0)  0         0
 *   EUCLIDEAN          sum, finalized sqrt(max(acc,0))  (a-b)^2        0         none (relaxed)
 *
 * BOOLEAN works on f32/f64 values: nonzero is true, and results are 0 or 1.
 *
 * User semirings come from a formula ("plus = max(a, b); times = a + b; zero = -inf") or from IR
 * expressions over placeholders (nx_semiring_define). Definitions are checked when they are made:
 * parts that use the wrong variables or give the wrong dtype are rejected then, not at first use.
 *
 * Entry points build a small graph, compile it once per (op, semiring, options, shapes, dtypes,
 * backend) and keep the program in the context's cache: a second call with the same key costs a
 * hash lookup plus the run. Each returns NX_OK and a new tensor in *out, or an error with a
 * message from nx_ctx_last_error(ctx). docs/semiring.md has the full story and examples.
 */
#ifndef NITRIX_OPS_H
#define NITRIX_OPS_H

#include "nitrix.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nx_semiring nx_semiring;

typedef enum nx_semiring_kind {
    NX_SEMIRING_REAL,
    NX_SEMIRING_LOG,
    NX_SEMIRING_TROPICAL_MAX_PLUS,
    NX_SEMIRING_TROPICAL_MIN_PLUS,
    NX_SEMIRING_BOOLEAN,
    NX_SEMIRING_EUCLIDEAN,
    NX_SEMIRING_USER, /* defined by a formula or by IR expressions */
    NX_SEMIRING_KIND_COUNT
} nx_semiring_kind;

/* A built-in algebra: a static object, never freed (nx_semiring_free ignores it). NULL out of
 * range (NX_SEMIRING_USER included). */
NX_API const nx_semiring *nx_semiring_builtin(nx_semiring_kind kind);

/* Properties. */
#define NX_SEMIRING_COMMUTATIVE 0x1u /* (+) is commutative */
#define NX_SEMIRING_IDEMPOTENT 0x2u  /* a (+) a = a */
#define NX_SEMIRING_STRICT 0x4u      /* claimed associative and distributive (not verified) */
#define NX_SEMIRING_DIFFERENTIABLE 0x8u

typedef struct nx_semiring_info {
    nx_semiring_kind kind;
    const char *name; /* "real", "log", ..., or the user's name; borrowed from the semiring */
    unsigned props;   /* NX_SEMIRING_* flags */
    int ncarry;       /* components of the (+) carry: 2 for LOG, else 1 for built-ins */
    double identity;  /* the (+)-identity (padding value) */
    bool has_annihilator;
    double annihilator;
    bool builtin_plus; /* (+) is one of the IR's monoids sum/max/min/logsumexp */
    nx_monoid plus;    /* that monoid when builtin_plus */
} nx_semiring_info;
NX_API void nx_semiring_get_info(const nx_semiring *sr, nx_semiring_info *out);

/* A user semiring from a formula of `key = expression` statements separated by ';' or newlines;
 * '#' starts a comment to the end of the line. Keys:
 *   plus      (required) the (+) of two carries, over a and b
 *   times     (required) the (x), over a and b
 *   zero      (required) the (+)-identity: a constant expression (numbers, inf, -inf, nan)
 *   annihilator, one    (optional) constants
 *   finalize  (optional) the result from the carry, over a
 * Expressions: numbers, inf, nan, the names a and b, + - * / ^ (power), unary minus, comparisons
 * (< <= > >= == !=) and the calls exp log log1p expm1 sqrt rsqrt sin cos tanh erf abs floor ceil
 * round sign neg (one argument), max min pow atan2 mod logaddexp (two), select(c, x, y) and
 * where(c, x, y) (three). A plus of exactly a+b, max(a,b), min(a,b) or logaddexp(a,b) (either
 * order) is recognised as the IR monoid sum/max/min/logsumexp and the semiring is differentiable
 * through its times; any other plus is folded as a custom monoid and is forward-only.
 * name (may be NULL) is copied. On a parse error the result is NX_ERR_PARSE with
 * "semiring formula:LINE:COL: expected ..., found ..."; a definition error (a name that is not
 * allowed in its key, a key given twice or missing, a non-constant zero, a result that is not a
 * float) is NX_ERR_INVALID_ARG or NX_ERR_DTYPE. Free the result with nx_semiring_free. */
NX_API nx_status nx_semiring_parse(nx_ctx *ctx, const char *name, const char *formula,
                                   nx_semiring **out);

/* A user semiring from IR expressions built in a graph g of the caller (g is only read; the
 * expressions are copied, so g may be freed afterwards). Each expression is 0-d over the given
 * placeholders and constants, using elementwise ops, select and cast.
 *   times     over placeholders a and b (both of the dtype of a)
 *   plus      a built-in monoid (custom == NULL: SUM, MAX, MIN or LOGSUMEXP), or custom, a monoid
 *             of the graph (nx_monoid_def of nitrix-graph.h) whose x is the (x)'s result
 *   finalize  over placeholder fa (NX_NONE: none), applied after a built-in plus only
 *   identity  the (+)-identity (for a custom monoid it must match its identity expression)
 * Rejected at once: expressions using other placeholders or non-elementwise nodes, non-float
 * results, a custom monoid's combine that is not 1..4 components. */
typedef struct nx_semiring_def {
    const char *name;
    const nx_graph *g;
    nx_node a, b, times;
    nx_monoid plus;
    const nx_monoid_def *custom;
    nx_node fa, finalize;
    double identity;
    bool has_annihilator;
    double annihilator;
    unsigned props; /* COMMUTATIVE / IDEMPOTENT / STRICT claims */
} nx_semiring_def;
NX_API nx_status nx_semiring_define(nx_ctx *ctx, const nx_semiring_def *def, nx_semiring **out);

/* Frees a user semiring (NULL and built-ins are ignored). Programs cached for it stay valid. */
NX_API void nx_semiring_free(nx_semiring *sr);

/* ------------------------------------------------------------------------------------------------
 * Graph builders: the fragments the entry points compile, for use inside larger graphs (and so
 * under nx_graph_vjp when autodiff is available). NX_NONE with the graph's error on failure.
 * ----------------------------------------------------------------------------------------------*/

/* y = (+)_k sr.times(a[.., :, k, None], b[.., None, k, :]): a [..., m, k], b [..., k, n]. */
NX_API nx_node nx_semiring_times(nx_graph *g, const nx_semiring *sr, nx_node a, nx_node b);
/* Folds x over axes under sr's (+), then applies its finalize. */
NX_API nx_node nx_semiring_reduce(nx_graph *g, const nx_semiring *sr, nx_node x, int naxes,
                                  const int *axes);
NX_API nx_node nx_semiring_matmul_node(nx_graph *g, const nx_semiring *sr, nx_node a, nx_node b);

typedef enum nx_conv_padding {
    NX_CONV_SAME,     /* out = ceil(in / stride); lo = total / 2 as lax does */
    NX_CONV_VALID,    /* no padding */
    NX_CONV_EXPLICIT, /* pad_lo / pad_hi per spatial dim */
} nx_conv_padding;

#define NX_CONV_MAX_SPATIAL 3
typedef struct nx_semiring_conv_opts {
    nx_backend backend;                    /* NX_BACKEND_AUTO: the context's */
    int nspatial;                          /* 1..3; 0: kernel ndim - 2 */
    int64_t stride[NX_CONV_MAX_SPATIAL];   /* 0 means 1 */
    int64_t dilation[NX_CONV_MAX_SPATIAL]; /* 0 means 1 */
    nx_conv_padding padding;
    int64_t pad_lo[NX_CONV_MAX_SPATIAL], pad_hi[NX_CONV_MAX_SPATIAL];
} nx_semiring_conv_opts;

/* Channels-last cross-correlation under sr: x [..., s_1..s_d, c_in], k [w_1..w_d, c_in, c_out],
 *   y[.., o, co] = (+)_{t, ci} sr.times(xp[.., o*stride + t*dilation, ci], k[t, ci, co])
 * where xp is x padded with the (+)-identity. A window view, no im2col buffer. */
NX_API nx_node nx_semiring_conv_node(nx_graph *g, const nx_semiring *sr, nx_node x, nx_node k,
                                     const nx_semiring_conv_opts *opts);

/* ------------------------------------------------------------------------------------------------
 * Entry points on tensors
 * ----------------------------------------------------------------------------------------------*/

typedef struct nx_semiring_opts {
    nx_backend backend; /* NX_BACKEND_AUTO: the context's */
} nx_semiring_opts;

/* C[..., i, j] = (+)_k A[..., i, k] (x) B[..., k, j]; leading dims broadcast (numpy). f32 or f64,
 * both the same. opts may be NULL. An empty k gives the identity (after finalize). */
NX_API nx_status nx_semiring_matmul(nx_ctx *ctx, const nx_semiring *sr, const nx_tensor *a,
                                    const nx_tensor *b, const nx_semiring_opts *opts,
                                    nx_tensor **out);
NX_API nx_status nx_semiring_conv(nx_ctx *ctx, const nx_semiring *sr, const nx_tensor *x,
                                  const nx_tensor *k, const nx_semiring_conv_opts *opts,
                                  nx_tensor **out);

/* KeOps-style pairwise reductions: out_i = reduce_j F(x_i, y_j, b_j, p) over points x [M, D] and
 * y [N, D] (D small), optional per-j weights b [N] or [N, E], optional parameters p [P] (finite).
 * F is a formula over the names x, y (D-vectors), b, p0..p7, with the semiring formula's
 * operators and functions plus sum(v) (over the vector), dot(u, v), sqdist(u, v) = |u - v|^2 and
 * norm2(v) = |v|^2; or a C builder (expr) given xi [M, 1, D], yj [1, N, D], bj [1, N, E] (or 0)
 * and p [P] (or 0), returning [M, N, 1] or [M, N, E]. The reduction:
 *   SUM, MAX, MIN, LOGSUMEXP   out [M, E]
 *   ARGMIN, ARGMAX             out [M] i64 (F must be scalar)
 *   KMIN                       out [M, k] values and idx [M, k] i64 (F scalar), ascending, first
 *                              index on ties; k <= N
 * Examples: "exp(-sqdist(x, y)) * b" (Gaussian kernel sum), "-sqdist(x, y) / p0" under LOGSUMEXP
 * (a Sinkhorn step), "sqdist(x, y)" under ARGMIN or KMIN (nearest neighbours). */
typedef enum nx_pairwise_reduction {
    NX_PAIRWISE_SUM,
    NX_PAIRWISE_MAX,
    NX_PAIRWISE_MIN,
    NX_PAIRWISE_LOGSUMEXP,
    NX_PAIRWISE_ARGMIN,
    NX_PAIRWISE_ARGMAX,
    NX_PAIRWISE_KMIN,
    NX_PAIRWISE_REDUCTION_COUNT
} nx_pairwise_reduction;

typedef nx_node (*nx_pairwise_fn)(nx_graph *g, nx_node xi, nx_node yj, nx_node bj, nx_node p,
                                  void *user);

typedef struct nx_pairwise_opts {
    nx_backend backend;
    nx_pairwise_reduction reduction;
    int64_t k;           /* KMIN only */
    const char *formula; /* F as text, or NULL with expr */
    nx_pairwise_fn expr; /* F as a builder; expr_key names it in the program cache */
    void *user;
    const char *expr_key; /* required with expr: equal keys must mean equal builders */
} nx_pairwise_opts;

/* b and p may be NULL; idx (KMIN, ARGMIN, ARGMAX) may be NULL for the others. For ARGMIN/ARGMAX
 * the indices are *out. */
NX_API nx_status nx_pairwise_reduce(nx_ctx *ctx, const nx_tensor *x, const nx_tensor *y,
                                    const nx_tensor *b, const nx_tensor *p,
                                    const nx_pairwise_opts *opts, nx_tensor **out, nx_tensor **idx);

/* ------------------------------------------------------------------------------------------------
 * Gradients
 *
 * Through reverse-mode autodiff of the graph fragment (nx_graph_vjp), so nothing is written by
 * hand per algebra: REAL and EUCLIDEAN get their sums' adjoints, LOG the logsumexp adjoint
 * (softmax weights, safe at -inf), TROPICAL_* route the cotangent to the first winner (first k
 * on ties, as argmax), EUCLIDEAN is guarded at C = 0 (gradient 0 there, not NaN). User semirings
 * whose (+) is sum, max, min or logsumexp differentiate through their (x) expression. BOOLEAN
 * and user semirings with a custom (+) are forward-only: asking fails with NX_ERR_UNSUPPORTED
 * and says so. To differentiate inside a larger graph, build nx_semiring_matmul_node /
 * nx_semiring_conv_node there and call nx_graph_vjp on it.
 * ----------------------------------------------------------------------------------------------*/

/* Whether sr has gradients; if not and ctx is non-NULL, records why (NX_ERR_UNSUPPORTED). */
NX_API nx_status nx_semiring_check_differentiable(nx_ctx *ctx, const nx_semiring *sr,
                                                  const char *who);

/* dA, dB of <dC, semiring_matmul(A, B)>: dc has the result's shape. da or db may be NULL. */
NX_API nx_status nx_semiring_matmul_vjp(nx_ctx *ctx, const nx_semiring *sr, const nx_tensor *a,
                                        const nx_tensor *b, const nx_tensor *dc,
                                        const nx_semiring_opts *opts, nx_tensor **da,
                                        nx_tensor **db);
/* dx, dk of <dy, semiring_conv(x, k)>. */
NX_API nx_status nx_semiring_conv_vjp(nx_ctx *ctx, const nx_semiring *sr, const nx_tensor *x,
                                      const nx_tensor *k, const nx_tensor *dy,
                                      const nx_semiring_conv_opts *opts, nx_tensor **dx,
                                      nx_tensor **dk);

/* Cotangents of x, y, b and p (grads[0..3]; grads[2], grads[3] NULL when b, p are) for the
 * result cotangent dout, under SUM, MAX, MIN or LOGSUMEXP (the index reductions have none:
 * NX_ERR_UNSUPPORTED). By autodiff of the forward fragment: one pass per input for now, not
 * KeOps's two streamed passes. */
NX_API nx_status nx_pairwise_reduce_vjp(nx_ctx *ctx, const nx_tensor *x, const nx_tensor *y,
                                        const nx_tensor *b, const nx_tensor *p,
                                        const nx_pairwise_opts *opts, const nx_tensor *dout,
                                        nx_tensor *grads[4]);

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

typedef enum nx_morph_border {
    NX_MORPH_BORDER_REFLECT, /* scipy's default mode='reflect' (half-sample symmetric) */
    NX_MORPH_BORDER_CONSTANT, /* cval outside */
    NX_MORPH_BORDER_NEAREST,
    NX_MORPH_BORDER_MIRROR,
    NX_MORPH_BORDER_WRAP,
    NX_MORPH_BORDER_COUNT
} nx_morph_border;

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
    nx_morph_border border;
    double cval;
} nx_morph_opts;

/* The fragment inside a caller's graph (x float). footprint/structure are read on the host and
 * become graph constants. NX_NONE with the graph's error on failure. */
NX_API nx_node nx_morph_node(nx_graph *g, nx_morph_op op, nx_node x, const nx_morph_opts *opts);

/* On tensors: x f32 or f64 (integers and bool are converted to f32 first, as the spec has it);
 * the result has x's float dtype. The program is cached per (op, options, element, shapes,
 * dtypes, backend). opts may be NULL (3^n flat box, SAME, reflect). */
NX_API nx_status nx_morph(nx_ctx *ctx, nx_morph_op op, const nx_tensor *x,
                          const nx_morph_opts *opts, nx_tensor **out);
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

/* Exact Euclidean distance to the nearest zero of mask, with per-axis sampling (NULL: all 1;
 * each finite and > 0), as scipy.ndimage.distance_transform_edt; +inf where mask has no zero.
 * f64 for an f64 mask, else f32. Compiled per call for now (not cached). */
NX_API nx_status nx_distance_transform_edt(nx_ctx *ctx, const nx_tensor *mask,
                                           const double *sampling, nx_backend backend,
                                           nx_tensor **out);

/* scipy.ndimage.median_filter with size or footprint (opts->structure must be NULL), scipy's
 * border modes (reflect by default) and origin: the element of rank count / 2 of each window,
 * by the IR's sort along the flattened window axis. NaN sorts last (numpy's order). */
NX_API nx_node nx_median_node(nx_graph *g, nx_node x, const nx_morph_opts *opts);
NX_API nx_status nx_median_filter(nx_ctx *ctx, const nx_tensor *x, const nx_morph_opts *opts,
                                  nx_tensor **out);

/* scipy.ndimage.label: i32 labels 1..K numbered by first voxel in C order (0: background;
 * nonzero and NaN are foreground), neighbours at most `connectivity` (1..ndim) axes apart.
 * n_labels (may be NULL) receives K. Host op, not differentiable. */
NX_API nx_status nx_connected_components(nx_ctx *ctx, const nx_tensor *mask, int connectivity,
                                         nx_tensor **out, int32_t *n_labels);
/* Bool mask of the component with the most voxels (ties: the lowest label; none: all false). */
NX_API nx_status nx_largest_connected_component(nx_ctx *ctx, const nx_tensor *mask,
                                                int connectivity, nx_tensor **out);

/* ====================================== end of morphology ===================================== */

#ifdef __cplusplus
}
#endif

#endif /* NITRIX_OPS_H */
