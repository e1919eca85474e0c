/* The joint-histogram family's shared pieces (ops/metrics/histogram.c): the options every
 * histogram op takes, their checks, the one driver site `metrics.joint_histogram`
 * (runtime/divergent.def) and the graph fragments: triangular (linear) Parzen soft binning and the
 * two accumulations of the (bins, bins) table.
 *
 * Binning (the JAX version's): with lo, hi the range (given, or the image's min and max),
 *     s = clip((x - lo) / max(hi - lo, 1e-12) * (bins - 1), 0, bins - 1)
 *     l = min(floor(s), bins - 2),  t = s - l
 * so bin centres sit at lo + k (hi - lo) / (bins - 1), a sample gives weight 1 - t to bin l and t
 * to bin l + 1, and values outside the range land in the edge bins with a zero derivative. The
 * joint table is H[a, b] = sum_i w_i beta_m,i(a) beta_f,i(b) (w: the mask, or 1), normalised to
 * P = H / sum(H) (an all-zero H, from an empty mask, stays 0). */
#ifndef NX_OPS_METRICS_HISTOGRAM_H
#define NX_OPS_METRICS_HISTOGRAM_H

#include "ops/metrics/metrics.h"

/* The histogram options, embedded first in each histogram op's option struct. */
typedef struct nx_hist_opts {
    nx_backend backend;
    int64_t bins;
    double range_moving[2];
    int nrange_moving; /* 0: moving's min..max; 2: lo, hi */
    double range_fixed[2];
    int nrange_fixed;
    int driver; /* nx_hist_driver */
} nx_hist_opts;

typedef enum nx_hist_driver {
    NX_HIST_AUTO,
    NX_HIST_ONEHOT,
    NX_HIST_SCATTER,
} nx_hist_driver;

/* Schema rows and fields of the histogram options (a struct whose first member is nx_hist_opts
 * named `h`). */
#define NX_HIST_BINS_OPT                                                                           \
    {"bins", NX_OPT_INT, "32", "2:", 1, "bins per image (at least 2)"}
#define NX_HIST_RANGE_OPTS                                                                         \
    {"range_moving", NX_OPT_FLOATS, "(min..max of moving)", NULL, 2,                               \
     "lo,hi of moving's bins, lo < hi (bin centres lo + k (hi - lo) / (bins - 1))"},               \
        {"range_fixed", NX_OPT_FLOATS, "(min..max of fixed)", NULL, 2,                             \
         "lo,hi of fixed's bins, lo < hi"}
#define NX_HIST_DRIVER_OPT                                                                         \
    {"driver", NX_OPT_ENUM, "auto", "auto|onehot|scatter", 1,                                      \
     "onehot: (N, bins) soft one-hot matrices and a matmul (canonical); scatter: scatter-add "    \
     "(fast); auto: the registry's choice (onehot when reproducible)"}
#define NX_HIST_BINS_FIELD(S)                                                                      \
    {offsetof(S, h.bins), NX_OP_NO_FIELD, sizeof(int64_t)}
#define NX_HIST_RANGE_FIELDS(S)                                                                    \
    {offsetof(S, h.range_moving), offsetof(S, h.nrange_moving), 2 * sizeof(double)},               \
        {offsetof(S, h.range_fixed), offsetof(S, h.nrange_fixed), 2 * sizeof(double)}
#define NX_HIST_DRIVER_FIELD(S)                                                                    \
    {offsetof(S, h.driver), NX_OP_NO_FIELD, sizeof(int)}

/* Most bins per image: the table is bins^2 elements. */
#define NX_HIST_MAX_BINS 4096

/* Checks moving and fixed (inputs 0 and 1: f32/f64, equal shapes, not empty), the mask (input
 * `mask_input`, or -1: none) and the options. */
NX_HIDDEN nx_status nx_hist_check(const nx_op_args *c, const nx_hist_opts *o, int mask_input);

/* The driver the registry picks for o->driver: true for scatter. The family's one driver site. */
NX_HIDDEN nx_status nx_hist_resolve(const nx_op_args *c, const nx_hist_opts *o, bool *scatter);

/* The cache-key field the schema cannot see: the resolved driver (reproducible mode changes it). */
NX_HIDDEN void nx_hist_key(nx_rt_cache_blob *b, const nx_op_args *c, const nx_hist_opts *o);

/* A soft-binned image: x flattened to (N,), its range and binning. */
typedef struct nx_hist_side {
    nx_node img;   /* x as given (any shape): what the range reductions and the cpu extern read,
                    * so that no kernel copies the image into its flattened form */
    nx_node x;     /* (N,) */
    nx_node lo, hi; /* 0-d */
    nx_node v;     /* (N,) the clipped scaled values, in [0, bins - 1] */
    nx_node lower; /* (N,) i32, 0..bins-2 */
    nx_node frac;  /* (N,) weight of bin lower + 1 */
} nx_hist_side;

/* Bins x (any shape; flattened) into `bins` bins over range (nrange 0: x's min and max, which
 * carry gradients as the values do). */
NX_HIDDEN nx_hist_side nx_hist_bin(nx_graph *g, nx_node x, int64_t bins, const double *range,
                                   int nrange);

/* The unnormalised table H (bins, bins) of the samples [0, n) with the given step of two binned
 * sides, weighted by w ((N,) of the values' dtype, or NX_NONE), accumulated by the driver; host:
 * the scatter driver is the cpu backend's extern (histogram.c says why). */
NX_HIDDEN nx_node nx_hist_table(nx_graph *g, const nx_hist_side *m, const nx_hist_side *f,
                                nx_node w, int64_t bins, int64_t step, bool scatter, bool host);

/* P = H / sum(H), 0 where sum(H) = 0. */
NX_HIDDEN nx_node nx_hist_normalise(nx_graph *g, nx_node h);

/* Declares moving and fixed (parameters) and the mask (or NX_NONE) and returns P, the normalised
 * joint table, with the sides through m and f. */
NX_HIDDEN nx_node nx_hist_joint(nx_graph *g, const nx_op_args *c, const nx_hist_opts *o,
                                int mask_input, int64_t step, nx_hist_side *m, nx_hist_side *f);

/* Entropies of a probability table (populated cells only: 0 log 0 = 0, with a gradient that stays
 * finite): -sum_{p > 0} p log p over every element of p, a 0-d node. */
NX_HIDDEN nx_node nx_hist_entropy(nx_graph *g, nx_node p);

/* log p where p > 0, else 0 (finite gradients), elementwise. */
NX_HIDDEN nx_node nx_hist_safe_log(nx_graph *g, nx_node p);



/* The closed-form moving gradients' pieces (mi_grad, nmi_grad). */
/* v_i = (1 - t_f,i) T[l_m,i, l_f,i] + t_f,i T[l_m,i, l_f,i + 1] for a table T (bins - 1, bins):
 * (N,). */
NX_HIDDEN nx_node nx_hist_gather_rows(nx_graph *g, nx_node t, const nx_hist_side *m,
                                      const nx_hist_side *f, int64_t bins);
/* v * (bins - 1) / max(hi_m - lo_m, 1e-6) / N, 0 where moving lies outside [lo_m, hi_m], in
 * moving's shape (nd, shape). */
NX_HIDDEN nx_node nx_hist_force(nx_graph *g, nx_node v, const nx_hist_side *m, int64_t bins,
                                int nd, const int64_t *shape);
/* A small table t flattened and materialised (an identity scatter: a library kernel's operand is
 * computed once), so that per-sample gathers load it: fusion would otherwise inline the table's
 * expression (logs) into the per-sample kernel, evaluating it at every sample. */
NX_HIDDEN nx_node nx_hist_table_root(nx_graph *g, nx_node t);
/* Rows 1.. minus rows ..-2 of a (bins, ...) table: (bins - 1, ...). */
NX_HIDDEN nx_node nx_hist_row_diff(nx_graph *g, nx_node t);

/* numpy.quantile(x, q) (method 'linear') of a flat (n,) node at the nq quantiles q (each in
 * [0, 1]): positions as numpy computes them in double (n q + (1 - q) - 1), the two neighbouring
 * order statistics gathered from nx_sort(x) and numpy's two-sided lerp. (nq,); the gradient goes
 * to the order statistics through the sort. idx, t and hi_side are the caller's scratch of nq
 * elements each. */
NX_HIDDEN nx_node nx_hist_quantiles(nx_graph *g, nx_node sorted, int64_t n, const double *q,
                                    int64_t nq, int32_t *idx, double *t, bool *hi_side);
#endif /* NX_OPS_METRICS_HISTOGRAM_H */
