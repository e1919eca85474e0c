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
 * BOOLEAN works on f32/f64 values (nonzero is true, results are 0 or 1 in that dtype) and on bool
 * operands (bool results: and, then or; an empty fold is false). Other algebras refuse bool.
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
    /* For the ops with two drivers (docs/fidelity.md; today nx_semiring_ell_rmatvec): NULL or
     * "auto" lets nx_driver_resolve choose (canonical under reproducible mode); others ignore it. */
    const char *driver;
} nx_semiring_opts;

/* C[..., i, j] = (+)_k A[..., i, k] (x) B[..., k, j]; leading dims broadcast (numpy). f32 or f64
 * (or bool under BOOLEAN), both the same. opts may be NULL. An empty k gives the identity (after
 * finalize). In reproducible mode the max/min algebras give bitwise the same result on every
 * backend, the others agree within the registry tolerance (docs/semiring.md says why). */
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
 * (a Sinkhorn step), "sqdist(x, y)" under ARGMIN or KMIN (nearest neighbours). In gradients a C
 * builder gets xi, yj and bj broadcast to every pair ([M, N, .]), so it must use broadcasting
 * elementwise ops. An empty y gives SUM 0, MAX -inf, MIN +inf, LOGSUMEXP -inf. */
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
    /* nx_pairwise_reduce_vjp under LOGSUMEXP only: the forward result [M, E] (the weights are
     * exp(F - out)), which saves the pass that recomputes it; NULL: recomputed. */
    const nx_tensor *saved_out;
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
 * NX_ERR_UNSUPPORTED). As KeOps: two streamed passes, one over j for x and p, one over i for y
 * and b, nothing M x N stored (scalar F); MAX and MIN, and LOGSUMEXP without opts->saved_out,
 * first run the forward pass for their weights. dout is [M, E]; a cotangent of another shape is
 * NX_ERR_SHAPE. */
NX_API nx_status nx_pairwise_reduce_vjp(nx_ctx *ctx, const nx_tensor *x, const nx_tensor *y,
                                        const nx_tensor *b, const nx_tensor *p,
                                        const nx_pairwise_opts *opts, const nx_tensor *dout,
                                        nx_tensor *grads[4]);

/* The op table (every op by name, nx_op_call) and the op families, each in its own header (all
 * included here). */
#include "nitrix-op.h"
#include "nitrix-morphology.h"
#include "nitrix-sparse.h"
#include "nitrix-smoothing.h"
#include "nitrix-bilateral.h"


#ifdef __cplusplus
}
#endif

#endif /* NITRIX_OPS_H */
