/* The numerics family's shared pieces (spec §4.12, api-a §9; docs/numerics.md): argument checks,
 * the "reduced axes" of the normalisers as lines [B, n], and numpy.percentile's linear method as
 * a graph fragment (with an optional mask, so the count of values per line is data). */
#ifndef NX_OPS_NUMERICS_H
#define NX_OPS_NUMERICS_H

#include "ops/op.h"

/* The `axis` option of the normalisers and sums: the axes a statistic spans. */
typedef struct nx_num_axes {
    int64_t axis[NX_MAX_DIMS];
    int naxis;
} nx_num_axes;

/* Input i is a float tensor (f32 or f64) with at least one element; `name` is the argument. */
NX_HIDDEN nx_status nx_num_check_float(const nx_op_args *c, int i, const char *name);

/* The axes of `a` for a tensor of rank nd, ascending and non-negative, into axes and *naxes. none
 * given: every axis when `all` is true. Out of range or repeated is NX_ERR_INVALID_ARG naming
 * `what` (the option) and the rank. */
NX_HIDDEN nx_status nx_num_resolve_axes(const nx_op_args *c, const nx_num_axes *a, int nd, bool all,
                                        const char *what, int *axes, int *naxes);

/* Input i, when given, has exactly the shape of input 0 (`name`: the argument) and a bool,
 * integer or float dtype. */
NX_HIDDEN nx_status nx_num_check_same_shape(const nx_op_args *c, int i, const char *name);

/* Input i, when given, broadcasts to input 0's shape (NumPy's rules, the result being input 0's
 * shape) and is bool, an integer dtype or float (`name`: the argument). */
NX_HIDDEN nx_status nx_num_check_broadcast(const nx_op_args *c, int i, const char *name);

/* Declares optional input i (NX_NONE when absent): a parameter when it has x's float dtype
 * (weights carry gradients), else an input; the value returned is cast to `dt`. */
NX_HIDDEN nx_node nx_num_weight_input(nx_graph *g, const nx_op_args *c, int i, const char *name,
                                      nx_dtype dt);

/* Input i declared as a parameter when float (gradients), else an input. */
NX_HIDDEN nx_node nx_num_declare(nx_graph *g, const nx_op_args *c, int i);

/* Input i is not f16/bf16 (the tensor utilities take any other dtype). */
NX_HIDDEN nx_status nx_num_check_storable(const nx_op_args *c, int i);

/* An axis option v of a tensor of rank nd, as 0..nd-1 (`what` names it in the error). */
NX_HIDDEN nx_status nx_num_axis(const nx_op_args *c, int64_t v, int nd, const char *what, int *k);
/* x (input 0) and a mask (input 1) of storable dtypes, x of rank >= 1, axis valid for x, and the
 * mask 1-d with x's extent along that axis (apply_mask, conform_mask). */
NX_HIDDEN nx_status nx_num_check_axis_mask(const nx_op_args *c, int64_t axis);

/* A percentile (in [0, 100], finite) option check: "%s: <what> is %g; expected ...". */
NX_HIDDEN nx_status nx_num_check_percentile(const nx_op_args *c, double q, const char *what);

/* x's `naxes` axes (ascending) moved last and joined: *lines is [B, n] (B the product of the
 * other extents, n of the reduced ones; a 0-d x is [1, 1]). nx_num_from_lines undoes it for a
 * [B, n] value: the same permutation and shape back. */
NX_HIDDEN nx_node nx_num_to_lines(nx_graph *g, nx_node x, int naxes, const int *axes);
NX_HIDDEN nx_node nx_num_from_lines(nx_graph *g, nx_node lines, int nd, const int64_t *shape,
                                    int naxes, const int *axes);

/* numpy.percentile(v, q) along the last axis of sorted lines [B, n] (ascending; entries past each
 * line's count may hold anything), method linear:
 *     h = q / 100 (k - 1),  p = s[floor h] + (h - floor h) (s[floor h + 1] - s[floor h]),
 * written as sum_j w_j s_j with w_j from the positions, so the value is differentiable in s and
 * the count k may be data: `count` [B, 1] f64 (NX_NONE: every line has n values). Lines with
 * k = 0 give 0. Result [B, 1] of s's dtype. The positions are computed in f64. */
NX_HIDDEN nx_node nx_num_percentile(nx_graph *g, nx_node sorted, nx_node count, double q);

/* Sorted lines of x [B, n] for percentiles under an optional mask m [B, n] (bool; NX_NONE: all
 * in): masked-out values sort last (they are replaced by +inf, then by 0 after the sort, so
 * nothing non-finite reaches a weighted sum). *count [B, 1] f64 (NX_NONE without a mask). */
NX_HIDDEN nx_node nx_num_sorted_lines(nx_graph *g, nx_node x, nx_node m, nx_node *count);

/* x / d where d != 0, 0 where d == 0 (a select on a safe denominator: finite gradients). */
NX_HIDDEN nx_node nx_num_safe_div(nx_graph *g, nx_node x, nx_node d);

/* The compensated sums (compensated.c): extern primitives over lines [B, n] -> [B], Kahan's and
 * Neumaier's sums of a, Ogita-Rump-Oishi's Dot2 of a and b (equal shapes), in left-to-right
 * order, with registered adjoints and device code. */
typedef enum nx_num_comp { NX_NUM_KAHAN, NX_NUM_NEUMAIER, NX_NUM_DOT2 } nx_num_comp;
NX_HIDDEN nx_node nx_num_compensated(nx_graph *g, nx_num_comp kind, nx_node a, nx_node b);

/* The ops' shared option struct, check, build and schema (`axis`, every axis by default). */
typedef struct nx_num_sum_args {
    nx_backend backend;
    nx_num_axes axis;
    int64_t block_size; /* pairwise_sum only */
} nx_num_sum_args;
NX_HIDDEN nx_status nx_num_comp_check(const nx_op_args *c, nx_num_comp kind);
NX_HIDDEN nx_status nx_num_comp_build(nx_graph *g, const nx_op_args *c, nx_num_comp kind,
                                      nx_node *outs);
NX_HIDDEN extern const nx_op_opt nx_num_comp_opts[1];

/* 1 / max(||x||_p, eps) along the axes, keepdims (p = 2: rsqrt(max(sum x^2, eps^2)), finite
 * gradient at 0). (lp_normalize.c) */
NX_HIDDEN nx_node nx_num_lp_scale(nx_graph *g, nx_node x, double p, int n, const int *axes,
                                  double eps);

#endif /* NX_OPS_NUMERICS_H */
