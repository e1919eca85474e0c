/* Shared pieces of the overlap, surface and classification-evaluation metrics (docs/metrics.md):
 * the soft-overlap sums of dice and jaccard (overlap.c), the surface pipeline of hausdorff95 and
 * surface_dice (surface.c) and the class-label range check of roc_auc, confusion_matrix and
 * topk_accuracy (labels.c). */
#ifndef NX_OPS_METRICS_OVERLAP_H
#define NX_OPS_METRICS_OVERLAP_H

#include "ops/metrics/metrics.h"

/* ---- dice, jaccard (overlap.c) -------------------------------------------------------------*/

/* The option struct of dice and jaccard. axis: naxis 0 (not given) sums every axis. */
typedef struct nx_overlap_args {
    nx_backend backend;
    int64_t axis[NX_MAX_DIMS];
    int naxis;
    double smooth;
    int reduction; /* nx_metric_reduction */
} nx_overlap_args;

NX_HIDDEN extern const nx_op_opt nx_overlap_schema[3];
NX_HIDDEN extern const nx_op_field nx_overlap_fields[3];
NX_HIDDEN extern const nx_op_tol nx_overlap_tols[2];

/* pred and target: equal float dtypes and shapes; axis values in range, none repeated; smooth
 * finite and >= 0. */
NX_HIDDEN nx_status nx_overlap_check(const nx_op_args *c);

/* Declares pred and target (parameters) and gives, over the op's axes, the intersection
 * sum(p t) and the magnitude sum(p) + sum(t), of shape pred's without those axes. */
NX_HIDDEN nx_status nx_overlap_sums(nx_graph *g, const nx_op_args *c, nx_node *inter,
                                    nx_node *magnitude);

/* ---- hausdorff95, surface_dice (surface.c) ------------------------------------------------*/

/* The option struct of both surface metrics (hausdorff95 ignores tolerance). */
typedef struct nx_surface_args {
    nx_backend backend;
    double spacing[NX_MAX_DIMS];
    int nspacing;
    double tolerance;
} nx_surface_args;

/* The reduction stage of a surface metric: inputs are the two surface indicators (float, 0 on a
 * surface voxel, 1 elsewhere: pred's, target's) and the distances to the other surface (to
 * target's surface, to pred's surface); outs[0] the 0-d result of dtype `dt`. */
typedef nx_node (*nx_surface_reduce_fn)(nx_graph *g, const nx_surface_args *a, nx_dtype dt,
                                        nx_node off_p, nx_node off_g, nx_node d_to_g,
                                        nx_node d_to_p);

NX_HIDDEN nx_status nx_surface_check(const nx_op_args *c, bool tolerance);
/* Surfaces (mask AND NOT erode(mask), the cross structuring element, background beyond the
 * border), the exact EDT to each with spacing (the distance_transform_edt op), then `reduce`. */
NX_HIDDEN nx_status nx_surface_run(const nx_op_args *c, nx_surface_reduce_fn reduce,
                                   nx_tensor **outs);
/* The result dtype: f32 for f32 masks, else f64. */
NX_HIDDEN nx_dtype nx_surface_dtype(const nx_tensor *mask);

/* ---- class labels (labels.c) --------------------------------------------------------------*/

/* An op whose integer label inputs must lie in [0, nclasses): its program (built by `build`
 * from the op's inputs) has nout results and then, per checked label array, two i64 0-d
 * outputs: the array's minimum and maximum (nx_metric_label_bounds). After the run they are read
 * (from the device if need be); a label out of range frees the results and fails with a message
 * naming the array, the value and the range. */
typedef struct nx_metric_labels {
    int n;                /* label arrays checked (at most 2) */
    const char *names[2]; /* their input names, for messages */
    int64_t nclasses;
    const char *what; /* where nclasses comes from: "num_classes", "logits' last axis" */
} nx_metric_labels;

/* outs[0] = min(labels), outs[1] = max(labels), as i64 0-d nodes. */
NX_HIDDEN void nx_metric_label_bounds(nx_graph *g, nx_node labels, nx_node *outs);
NX_HIDDEN nx_status nx_metric_run_labels(const nx_op_args *c, nx_op_stage_fn build,
                                         const void *user, int nout, const nx_metric_labels *l,
                                         nx_tensor **outs);
/* An integer (not bool) label tensor; NX_ERR_DTYPE naming it otherwise. */
NX_HIDDEN nx_status nx_metric_check_int_labels(const nx_op_args *c, int input);

#endif /* NX_OPS_METRICS_OVERLAP_H */
