/* Internal builders shared by the morphology files (ops/morphology). */
#ifndef NX_OPS_MORPH_H
#define NX_OPS_MORPH_H

#include "internal.h"
#include "nitrix-graph.h"
#include "nitrix-ops.h"

/* The squared-distance passes of the exact EDT from a field (0 at sources, +inf elsewhere) and a
 * square root: the separable min-plus driver (distance-node.c) and the lower-envelope extern
 * (edt-host.c). sampling NULL: all 1. */
NX_HIDDEN nx_node nx_morph_edt_separable_node(nx_graph *g, nx_node field, const double *sampling);
NX_HIDDEN nx_node nx_morph_edt_fast_node(nx_graph *g, nx_node field, const double *sampling);
/* The fast driver's device chain from a mask (0 at sources): a pass along axis 0, then a window
 * pass per later axis, each an extern with CUDA code (edt-device.c). */
NX_HIDDEN nx_node nx_morph_edt_device_node(nx_graph *g, nx_node mask, const double *sampling);

/* Shared by edt-host.c and edt-device.c: the envelope over one axis of a contiguous f32/f64
 * array in place (root: square roots after), whether unit sampling keeps every sum exact in f32,
 * and the fast extern's shape rule. */
NX_HIDDEN nx_status nx_morph_edt_envelope_axis(nx_ctx *ctx, void *data, bool f64, int nd,
                                               const int64_t *shape, int axis, double spacing,
                                               bool root, bool lanes_f32);
NX_HIDDEN bool nx_morph_edt_window_exact_f32(int nd, const int64_t *shape, const double *s);
NX_HIDDEN nx_status nx_morph_edt_shape(void *user, int n_in, const nx_dtype *dtypes,
                                       const int *ndims, const int64_t *const *shapes,
                                       nx_dtype *out_dtype, int *out_ndim,
                                       int64_t out_shape[NX_MAX_DIMS]);

/* The element of the given rank (0-based, numpy's order: NaN last) of count same-shaped values,
 * elementwise, by a pruned sorting network of minimum/maximum (median-net.c). */
#define NX_MORPH_NET_MAX 64
NX_HIDDEN nx_node nx_morph_select_rank(nx_graph *g, int count, const nx_node *values, int rank);

/* The median of windows of any size (median-select.c): an extern picks, at each output place of
 * the VALID windows of xp (window extents w over its nsp trailing axes; in, the footprint in C
 * order, NULL: every place), the flat index of the element of rank count / 2, and xp is gathered
 * there. Compile cost does not depend on the window; run time is linear in it. */
NX_HIDDEN nx_node nx_morph_median_select(nx_graph *g, nx_node xp, int lead, int nsp,
                                         const int64_t *w, const uint8_t *in);

/* ---- the op-table side (morph-run.c, the descriptor files dilate.c ... median_filter.c) ----*/

#include "ops/op.h"

/* The option struct of dilate, erode, open, close and median_filter: the schema's fields (every
 * integer an int64, the border an nx_border), converted to nx_morph_opts for the builders. */
typedef struct nx_morph_args {
    nx_backend backend;
    int64_t size[NX_MORPH_MAX_SPATIAL];
    int nsize;
    const nx_tensor *footprint;
    const nx_tensor *structure;
    int padding; /* SAME | VALID */
    int mode;    /* an nx_border */
    double cval;
    int64_t nspatial;
} nx_morph_args;

/* The schema shared by the four grey ops (median_filter takes the first NX_MORPH_MEDIAN_NOPTS of
 * a schema without structure: nx_morph_median_opts). */
#define NX_MORPH_NOPTS 7
#define NX_MORPH_MEDIAN_NOPTS 6
NX_HIDDEN extern const nx_op_opt nx_morph_opts_schema[NX_MORPH_NOPTS];
NX_HIDDEN extern const nx_op_field nx_morph_fields[];
NX_HIDDEN extern const nx_op_opt nx_morph_median_schema[NX_MORPH_MEDIAN_NOPTS];
NX_HIDDEN extern const nx_op_field nx_morph_median_fields[];
#define NX_MORPH_NTOLS 8
NX_HIDDEN extern const nx_op_tol nx_morph_exact_tols[NX_MORPH_NTOLS];
/* op is an nx_morph_op, or NX_MORPH_OP_COUNT for the median. */
NX_HIDDEN nx_status nx_morph_desc_check(const nx_op_args *c, int op);
NX_HIDDEN nx_status nx_morph_desc_run(const nx_op_args *c, int op, nx_tensor **outs);

/* The unpool's range check of indices against x's pooled shape (pool-node.c). */
NX_HIDDEN nx_status nx_morph_pool_check_indices(nx_ctx *ctx, const char *who, const nx_tensor *x,
                                                const nx_tensor *indices, const nx_pool_opts *o);
/* The option struct of max_pool_with_indices_nd and max_unpool_nd (their schema is in
 * max_pool_with_indices_nd.c). */
typedef struct nx_pool_args {
    nx_backend backend;
    int64_t nspatial;
    int64_t kernel[NX_POOL_MAX_SPATIAL];
    int nkernel;
    int64_t stride[NX_POOL_MAX_SPATIAL];
    int nstride;
    int64_t padding[NX_POOL_MAX_SPATIAL];
    int npadding;
    int64_t output_size[NX_POOL_MAX_SPATIAL];
    int noutput_size;
    int64_t size[NX_POOL_MAX_SPATIAL]; /* unpool: the CLI's older name of output_size */
    int nsize;
} nx_pool_args;
/* The unpool's schema: the pool's four, output_size, and size (output_size's older name). */
#define NX_POOL_NOPTS 4
#define NX_UNPOOL_NOPTS 6
NX_HIDDEN extern const nx_op_opt nx_pool_schema[NX_UNPOOL_NOPTS];
NX_HIDDEN extern const nx_op_field nx_pool_fields[NX_UNPOOL_NOPTS];
/* Counts of kernel, stride, padding and output_size given as text: 1 or nspatial each. */
NX_HIDDEN nx_status nx_pool_check_counts(const nx_op_args *c, bool unpool);
NX_HIDDEN extern const nx_op_tol nx_pool_tols[];
NX_HIDDEN void nx_pool_opts_of(const nx_pool_args *a, nx_pool_opts *o);
NX_HIDDEN void nx_pool_args_of(const nx_pool_opts *o, nx_pool_args *a);
NX_HIDDEN nx_status nx_pool_check_tensor(nx_ctx *ctx, const char *who, const char *what,
                                         const nx_tensor *t, bool integer);

/* The label drivers behind connected_components (label-uf.c, label-prop.c): scipy's labels of
 * mask; *n_labels (may be NULL) receives their count. */
NX_HIDDEN nx_status nx_morph_label_union_find(nx_ctx *ctx, const nx_tensor *mask,
                                              int connectivity, nx_tensor **out,
                                              int32_t *n_labels);
NX_HIDDEN nx_status nx_morph_label_opts(nx_ctx *ctx, const nx_tensor *mask,
                                        const nx_label_opts *opts, nx_tensor **out,
                                        int32_t *n_labels);

#endif
