/* The metrics family's shared pieces (spec §4.10, §5): score kernels return the unreduced tensor
 * by default and expose only the flat leaf reduction none|sum|mean and the domain-mask weighted
 * mean sum(w x) / sum(w). Every metric reduces through nx_metric_reduce; no op keeps its own copy.
 *
 * The mask is an optional input of the op's row ("moving fixed mask?"): absent, or a bool,
 * integer or float array of the values' shape (or broadcastable to it). Floats are weights and
 * are differentiable (the builder declares them with nx_parameter); bool and integer masks are
 * indicators (nonzero = 1). */
#ifndef NX_OPS_METRICS_H
#define NX_OPS_METRICS_H

#include "ops/op.h"

typedef enum nx_metric_reduction {
    NX_METRIC_NONE,
    NX_METRIC_SUM,
    NX_METRIC_MEAN,
} nx_metric_reduction;

/* The schema row of the `reduction` option; an op lists it in its own schema. */
#define NX_METRIC_REDUCTION_OPT                                                                    \
    {                                                                                              \
        "reduction", NX_OPT_ENUM, "none", "none|sum|mean", 1,                                      \
            "none: the unreduced values w_i x_i; sum: sum_i w_i x_i; mean: sum_i w_i x_i / "       \
            "sum_i w_i (w = the mask, or 1; an empty mask gives 0)"                                          \
    }

/* The reduction of `values` under `reduction`, weighted by `mask` (NX_NONE: none). none returns
 * w * values (values unchanged without a mask: masked-out elements are 0); sum and mean give a
 * 0-d result of values' dtype. mean with sum(w) = 0 is 0, not 0/0. The mask must broadcast to the
 * values' shape. */
NX_HIDDEN nx_node nx_metric_reduce(nx_graph *g, nx_node values, nx_node mask,
                                   nx_metric_reduction reduction);

/* Declares the op's optional mask input when present: nx_parameter for a float mask (weights
 * carry gradients), nx_input otherwise; NX_NONE when absent. */
NX_HIDDEN nx_node nx_metric_mask_input(nx_graph *g, const nx_tensor *mask);

/* Checks a mask against the values' shape (`shape`, `ndim`): absent is fine; a host or device
 * tensor of bool, integer or float dtype that broadcasts to the shape. */
NX_HIDDEN nx_status nx_metric_check_mask(const nx_op_args *c, const nx_tensor *mask, int ndim,
                                         const int64_t *shape);

/* The two float inputs of a comparison (`a`, `b`: their names): f32 or f64, equal dtypes and
 * shapes. */
NX_HIDDEN nx_status nx_metric_check_pair(const nx_op_args *c, int a, int b);

/* The weighted mean of `values` over `naxes` of its axes (dropped from the result):
 * sum(w x) / sum(w) along them, 0 where sum(w) = 0 (not 0/0). `w` (NX_NONE: 1) broadcasts to the
 * values' shape and is cast to their dtype. A per-sample domain-mask mean (ibot_cross_entropy's
 * mean over each sample's masked tokens) is this, before the flat reduction. */
NX_HIDDEN nx_node nx_metric_mean_axes(nx_graph *g, nx_node values, nx_node w, int naxes,
                                      const int *axes);

/* ---- fragments the logits and contrastive kernels share (defined in their op files) ---- */

/* Overflow-free pieces of a logit x (any float shape), from e = exp(-|x|) <= 1:
 *   relu = max(x, 0), log1pexp = log1p(e), so that softplus(x) = relu + log1pexp and
 *   softplus(-x) = relu - x + log1pexp; sig = sigmoid(x), sig_neg = sigmoid(-x) = 1 - sig
 *   (each from e without cancellation). |x| and relu branch on one select (x >= 0), so autodiff
 *   gives the smooth functions' derivatives at x = 0 as well. (bce_with_logits.c) */
typedef struct nx_metric_logit {
    nx_node relu, log1pexp, sig, sig_neg;
} nx_metric_logit;
NX_HIDDEN void nx_metric_logit_parts(nx_graph *g, nx_node x, nx_metric_logit *p);

/* The max-shifted log-sum-exp of x along `axis`, in two parts kept apart (both keepdims):
 * *max = max_axis x and *logsum = log sum_axis exp(x - max), so that logsumexp = max + logsum.
 * A log-softmax or a cross-entropy adds (max - x_k) + logsum, which keeps the digits of a small
 * result where the logits are large (max + logsum rounded first would keep an ulp of max).
 * (cross_entropy_with_logits.c) */
NX_HIDDEN void nx_metric_lse_parts(nx_graph *g, nx_node x, int axis, nx_node *max,
                                   nx_node *logsum);

/* The rows of z [.., d] (last axis) scaled to unit L2 norm as torch.nn.functional.normalize:
 * z / max(||z||, eps), computed as z / sqrt(max(sum z^2, eps^2)) so that a zero row has a finite
 * gradient. (info_nce.c) */
NX_HIDDEN nx_node nx_metric_l2_rows(nx_graph *g, nx_node z, double eps);
/* Its factor alone: 1 / max(||z||, eps) per row, keepdims [.., 1]. (info_nce.c) */
NX_HIDDEN nx_node nx_metric_l2_scale(nx_graph *g, nx_node z, double eps);

/* The DINO cross-entropy per row of the last (prototype) axis:
 *   -sum_k softmax((teacher - center) / teacher_temp)_k log_softmax(student / student_temp)_k
 * (student, teacher [.., k]; center broadcasts to teacher); the result drops the last axis.
 * (dino_cross_entropy.c) */
NX_HIDDEN nx_node nx_metric_distill_ce(nx_graph *g, nx_node student, nx_node teacher,
                                       nx_node center, double student_temp, double teacher_temp);

/* The checks dino_cross_entropy and ibot_cross_entropy share (inputs student, teacher, center):
 * student and teacher of one float dtype and shape, of rank `rank` (>= 1 when rank < 0), with a
 * nonempty prototype axis; center of their dtype, broadcastable to them; both temperatures finite
 * and > 0. (dino_cross_entropy.c) */
NX_HIDDEN nx_status nx_metric_check_distill(const nx_op_args *c, int rank, double student_temp,
                                            double teacher_temp);

/* Checks that `t` (named `name`) is f32 or f64 of dtype `dt` when dt is not NX_DTYPE_COUNT,
 * with rank `ndim` when ndim >= 0. */
NX_HIDDEN nx_status nx_metric_check_float(const nx_op_args *c, const nx_tensor *t,
                                          const char *name, nx_dtype dt, int ndim);

/* Checks a temperature-like option: finite and > 0. */
NX_HIDDEN nx_status nx_metric_check_positive(const nx_op_args *c, const char *name, double v);

#endif /* NX_OPS_METRICS_H */
