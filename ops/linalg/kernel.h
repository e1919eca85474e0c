/* The linalg kernels (api-b §1.1; the JAX version's linalg/kernel.py): pairwise kernels of the
 * rows of X0 (..., n, d) and X1 (..., m, d) (absent: X0) under an optional metric theta, None
 * (Euclidean), a vector (..., d) (diagonal Mahalanobis) or a matrix (..., d, d) (full), told
 * apart as the JAX version does: a matrix when theta has 2+ dims and its last two are equal. */
#ifndef NX_OPS_LINALG_KERNEL_H
#define NX_OPS_LINALG_KERNEL_H

#include "ops/linalg/matrix.h"

typedef enum nx_la_kernel_kind {
    NX_LA_LINEAR,
    NX_LA_DISTANCE,
    NX_LA_RBF,
    NX_LA_GAUSSIAN,
    NX_LA_POLYNOMIAL,
    NX_LA_SIGMOID,
    NX_LA_COSINE,
} nx_la_kernel_kind;

/* One option struct for every kernel; each op's schema fills the fields it has. */
typedef struct nx_la_kernel_args {
    nx_backend backend;
    double gamma; /* 0: 1 / d (scikit-learn's default) */
    double sigma; /* 0: gamma = 1 / d */
    int64_t order;
    double r;
    bool squared;
} nx_la_kernel_args;

/* Inputs X0 (0), X1 (1, optional), theta (2, optional). */
NX_HIDDEN nx_status nx_la_kernel_check(const nx_op_args *c);
NX_HIDDEN nx_status nx_la_kernel_build(nx_graph *g, const nx_op_args *c, nx_la_kernel_kind kind,
                                       nx_node *outs);
/* parameterised_norm: inputs X (0), theta (1, optional). */
NX_HIDDEN nx_status nx_la_norm_check(const nx_op_args *c);
NX_HIDDEN nx_status nx_la_norm_build(nx_graph *g, const nx_op_args *c, nx_node *outs);

#endif /* NX_OPS_LINALG_KERNEL_H */
