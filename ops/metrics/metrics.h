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

#endif /* NX_OPS_METRICS_H */
