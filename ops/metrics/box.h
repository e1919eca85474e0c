/* Box sums over a (2r+1)^d window for the windowed similarity metrics (lncc and its forces): the
 * un-normalised scipy.ndimage.uniform_filter, B(x)[i] = sum_{|t_a| <= r_a} x[fold(i + t)], the
 * border by one nx_border with scipy's meanings (constant: cval 0), and its transpose B^T (the
 * adjoint: sum over the windows that contain a voxel, the padded samples folded back onto their
 * sources), as graph fragments. Not installed. */
#ifndef NX_OPS_METRICS_BOX_H
#define NX_OPS_METRICS_BOX_H

#include "ops/op.h"

/* Spatial axes: the trailing nsp axes of an nd-dimensional image; the leading ones are batch. */
typedef struct nx_metric_box {
    int nd, lead, nsp;
    int64_t radius[NX_MAX_DIMS]; /* per spatial axis */
    int64_t shape[NX_MAX_DIMS];  /* the image's */
    nx_border mode;
    double count; /* window elements: prod (2 r_a + 1) */
} nx_metric_box;

/* The plan for an image of rank nd and the given shape: spatial_rank 0 means min(nd, 3);
 * radius holds nradius values (1: every spatial axis; else one per spatial axis), each >= 0.
 * A window wider than an axis is allowed: the border rule repeats, as scipy.ndimage extends.
 * Errors name c->who and what was expected. */
NX_HIDDEN nx_status nx_metric_box_plan(const nx_op_args *c, int nd, const int64_t *shape,
                                       int64_t spatial_rank, const int64_t *radius, int nradius,
                                       int mode, nx_metric_box *b);

/* B(x): the box sum of x (float, the plan's shape). */
NX_HIDDEN nx_node nx_metric_box_sum(nx_graph *g, nx_node x, const nx_metric_box *b);

/* B^T(z): the transpose, <B^T z, x> = <z, B x> for every x. */
NX_HIDDEN nx_node nx_metric_box_sum_t(nx_graph *g, nx_node z, const nx_metric_box *b);

/* The option rows every windowed metric shares (radius, mode, spatial_rank). */
#define NX_METRIC_RADIUS_OPT                                                                       \
    {                                                                                              \
        "radius", NX_OPT_INTS, "4", "0:", NX_MAX_DIMS,                                             \
            "window half-width r per spatial axis, or one for all: a (2r+1)^d box"                 \
    }
#define NX_METRIC_MODE_OPT                                                                         \
    {                                                                                              \
        "mode", NX_OPT_BORDER, "reflect", NULL, 1,                                                 \
            "border of the box sums: reflect|mirror|nearest|wrap|constant (scipy's, cval 0)"       \
    }
#define NX_METRIC_SPATIAL_RANK_OPT                                                                 \
    {                                                                                              \
        "spatial_rank", NX_OPT_INT, "0", "0:8", 1,                                                 \
            "trailing axes that are spatial (leading ones are batch); 0: min(ndim, 3)"             \
    }

/* The option struct of lncc, lncc_grad and lncc_grad_center (the grads have no reduction). A
 * radius count of 0 (a zeroed struct) means the default 4; eps is taken as given. */
typedef struct nx_lncc_args {
    nx_backend backend;
    int64_t radius[NX_MAX_DIMS];
    int nradius;
    int mode; /* nx_border */
    double eps;
    int reduction; /* nx_metric_reduction (lncc only) */
    int64_t spatial_rank;
} nx_lncc_args;

/* The windowed sums of moving m and fixed f: S_m, S_f, S_mm, S_ff, S_mf. */
typedef struct nx_lncc_sums {
    nx_node sm, sf, smm, sff, smf;
} nx_lncc_sums;

/* Checks inputs 0 (moving) and 1 (fixed): f32 or f64, equal shapes; then the options; fills b. */
NX_HIDDEN nx_status nx_lncc_plan(const nx_op_args *c, nx_metric_box *b);
/* The sums of *m and *f after shifting each by its first spatial sample (per batch item), which
 * leaves every windowed statistic unchanged and keeps rounding from cancelling the images'
 * offsets (except under mode constant, whose zero padding is not shift-invariant); *m and *f are
 * replaced by the shifted images, for formulas that use them again. */
NX_HIDDEN void nx_lncc_sums_build(nx_graph *g, nx_node *m, nx_node *f, const nx_metric_box *b,
                                  nx_lncc_sums *s);

#endif /* NX_OPS_METRICS_BOX_H */
