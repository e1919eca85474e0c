/* The joint-histogram family's shared pieces (histogram.h): option checks, the driver site
 * `metrics.joint_histogram`, soft binning and the two accumulations, as IR fragments so that both
 * backends compile them and autodiff differentiates them.
 *
 * The two drivers compute the same sums H[a, b] = sum_i A[i, a] B[i, b] of the soft one-hot rows
 * A (moving's, times the mask weight) and B (fixed's):
 *   onehot  (canonical) A and B as (N, bins) matrices and a contraction over the samples, folded
 *           in ascending sample order (the IR's canonical reduction order): deterministic on every
 *           backend, bins^2 multiply-adds per sample.
 *   scatter (fast) the four nonzero products of each sample, interleaved per sample (so each cell
 *           still sees its samples in ascending order), scatter-added into the bins^2 table.
 * Each cell's nonzero terms are the same products in both, so they differ only by how a backend
 * orders or splits the sums (runtime/divergent.def's row).
 *
 * On the cpu backend the scatter driver is one extern, `hist_scatter` (below), and why: the IR's
 * scatter is a library kernel that applies updates one at a time on one thread and needs the 4N
 * cell indices and products materialised first (two arrays of 4N elements written and read back),
 * which made the 256^3 histogram cost ~0.8 CPU s. The extern reads the two binned images once and
 * accumulates per-chunk tables in double on the runtime pool (its fixed partition), summed in
 * ascending chunk order: deterministic for a given thread count. Its adjoint is IR (gathers of the
 * cotangent table), so autodiff goes through it. Elsewhere (ref, cuda) the scatter driver is the
 * IR scatter. */
#include <math.h>
#include <string.h>

#include "ops/metrics/histogram.h"
#include "pool.h"

static const char *const driver_names[] = {"auto", "onehot", "scatter"};

static nx_status check_range(const nx_op_args *c, const char *name, const double *r, int n)
{
    if (n == 0)
        return NX_OK;
    if (n != 2)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: %s has %d value%s; expected two, lo,hi (or none: the image's "
                           "min..max)",
                           c->who, name, n, n == 1 ? "" : "s");
    if (!isfinite(r[0]) || !isfinite(r[1]) || !(r[0] < r[1]))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: %s is %g,%g; expected finite lo < hi", c->who, name, r[0], r[1]);
    return NX_OK;
}

nx_status nx_hist_check(const nx_op_args *c, const nx_hist_opts *o, int mask_input)
{
    nx_status st = nx_metric_check_pair(c, 0, 1);
    if (st != NX_OK)
        return st;
    const nx_tensor *m = c->in[0];
    if (nx_tensor_numel(m) == 0)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: %s is empty; expected at least one sample", c->who,
                           c->info->inputs[0]);
    if (nx_tensor_numel(m) > INT32_MAX)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: %s has %lld samples; expected at most 2^31 - 1", c->who,
                           c->info->inputs[0], (long long)nx_tensor_numel(m));
    if (mask_input >= 0) {
        st = nx_metric_check_mask(c, c->in[mask_input], nx_tensor_ndim(m), nx_tensor_shape(m));
        if (st != NX_OK)
            return st;
    }
    if (o->bins < 2 || o->bins > NX_HIST_MAX_BINS)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: bins is %lld; expected 2..%d (two bins at least: each sample "
                           "spreads over two neighbouring bins)",
                           c->who, (long long)o->bins, NX_HIST_MAX_BINS);
    if ((st = check_range(c, "range_moving", o->range_moving, o->nrange_moving)) != NX_OK ||
        (st = check_range(c, "range_fixed", o->range_fixed, o->nrange_fixed)) != NX_OK)
        return st;
    bool scatter;
    return nx_hist_resolve(c, o, &scatter);
}

nx_status nx_hist_resolve(const nx_op_args *c, const nx_hist_opts *o, bool *scatter)
{
    if ((unsigned)o->driver > NX_HIST_SCATTER)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: driver %d is out of range; expected auto, onehot or scatter",
                           c->who, o->driver);
    const char *variant = NULL;
    nx_status st = nx_driver_resolve(c->ctx, "metrics.joint_histogram", driver_names[o->driver],
                                     &variant);
    if (st == NX_OK)
        *scatter = strcmp(variant, "scatter") == 0;
    return st;
}

void nx_hist_key(nx_rt_cache_blob *b, const nx_op_args *c, const nx_hist_opts *o)
{
    bool scatter = false;
    if (nx_hist_resolve(c, o, &scatter) == NX_OK)
        nx_rt_cache_blob_i64(b, "hist_scatter", scatter);
}

static nx_node flat(nx_graph *g, nx_node x)
{
    int64_t shape[NX_MAX_DIMS] = {0}, n = 1;
    int nd = nx_node_ndim(g, x);
    nx_node_shape(g, x, shape);
    for (int i = 0; i < nd; i++)
        n *= shape[i];
    return nx_reshape(g, x, 1, &n);
}

/* clip((x - lo) / max(hi - lo, 1e-12) * (bins - 1), 0, bins - 1), clipped by select so that the
 * gradient passes inside [0, bins - 1], ends included. The cpu extern computes the same in the
 * same order (hs_scaled). */
static nx_node scaled(nx_graph *g, nx_node x, nx_node lo, nx_node hi, int64_t bins)
{
    nx_dtype dt = nx_node_dtype(g, x);
    nx_node top = nx_scalar(g, dt, (double)(bins - 1)), zero = nx_scalar(g, dt, 0);
    nx_node span = nx_maximum(g, nx_sub(g, hi, lo), nx_scalar(g, dt, 1e-12));
    /* (x - lo) / span first, so the maximum lands exactly on bins - 1 */
    nx_node v = nx_mul(g, nx_div(g, nx_sub(g, x, lo), span), top);
    return nx_select(g, nx_lt(g, v, zero), zero, nx_select(g, nx_gt(g, v, top), top, v));
}

nx_hist_side nx_hist_bin(nx_graph *g, nx_node x, int64_t bins, const double *range, int nrange)
{
    nx_hist_side s = {0};
    nx_dtype dt = nx_node_dtype(g, x);
    s.img = x;
    s.x = flat(g, x);
    int nd = nx_node_ndim(g, x), axes[NX_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        axes[d] = d;
    if (nrange == 2) {
        s.lo = nx_scalar(g, dt, range[0]);
        s.hi = nx_scalar(g, dt, range[1]);
    } else {
        s.lo = nx_reduce(g, x, nd, axes, NX_MONOID_MIN, false);
        s.hi = nx_reduce(g, x, nd, axes, NX_MONOID_MAX, false);
    }
    nx_node v = scaled(g, s.x, s.lo, s.hi, bins);
    nx_node l = nx_minimum(g, nx_floor(g, v), nx_scalar(g, dt, (double)(bins - 2)));
    s.v = v;
    s.frac = nx_sub(g, v, l);
    s.lower = nx_cast(g, l, NX_DTYPE_I32);
    return s;
}

static nx_node strided(nx_graph *g, nx_node x, int64_t step)
{
    if (step <= 1)
        return x;
    int64_t n[NX_MAX_DIMS] = {0}, start = 0;
    nx_node_shape(g, x, n);
    return nx_slice(g, x, &start, n, &step);
}

/* (N, bins): 1 - t at column l, t at column l + 1. */
static nx_node onehot(nx_graph *g, nx_node lower, nx_node frac, int64_t bins)
{
    nx_dtype dt = nx_node_dtype(g, frac);
    int64_t n[NX_MAX_DIMS] = {0};
    nx_node_shape(g, lower, n);
    int64_t col[2] = {n[0], 1}, row[2] = {1, bins};
    nx_node k = nx_iota(g, NX_DTYPE_I32, 2, row, 1);
    nx_node l = nx_reshape(g, lower, 2, col), t = nx_reshape(g, frac, 2, col);
    nx_node l1 = nx_add(g, l, nx_scalar(g, NX_DTYPE_I32, 1));
    nx_node one = nx_scalar(g, dt, 1), zero = nx_scalar(g, dt, 0);
    return nx_select(g, nx_eq(g, l, k), nx_sub(g, one, t),
                     nx_select(g, nx_eq(g, l1, k), t, zero));
}

static nx_node host_table(nx_graph *g, const nx_hist_side *m, const nx_hist_side *f, nx_node w,
                          int64_t bins, int64_t step);

nx_node nx_hist_table(nx_graph *g, const nx_hist_side *m, const nx_hist_side *f, nx_node w,
                      int64_t bins, int64_t step, bool scatter, bool host)
{
    if (scatter && host)
        return host_table(g, m, f, w, bins, step);
    nx_dtype dt = nx_node_dtype(g, m->frac);
    nx_node lm = strided(g, m->lower, step), tm = strided(g, m->frac, step);
    nx_node lf = strided(g, f->lower, step), tf = strided(g, f->frac, step);
    nx_node ws = w != NX_NONE ? strided(g, w, step) : NX_NONE;
    int64_t n[NX_MAX_DIMS] = {0};
    nx_node_shape(g, lm, n);
    if (!scatter) {
        nx_node a = onehot(g, lm, tm, bins), b = onehot(g, lf, tf, bins);
        if (ws != NX_NONE) {
            int64_t col[2] = {n[0], 1};
            a = nx_mul(g, a, nx_reshape(g, ws, 2, col));
        }
        return nx_einsum(g, "na,nb->ab", a, b, NX_MONOID_SUM, nx_mul);
    }
    nx_node one = nx_scalar(g, dt, 1);
    nx_node um[2] = {nx_sub(g, one, tm), tm}, uf[2] = {nx_sub(g, one, tf), tf};
    if (ws != NX_NONE) {
        um[0] = nx_mul(g, um[0], ws);
        um[1] = nx_mul(g, um[1], ws);
    }
    nx_node base = nx_add(g, nx_mul(g, lm, nx_scalar(g, NX_DTYPE_I32, (double)bins)), lf);
    nx_node idx[4], upd[4];
    int64_t col[2] = {n[0], 1};
    for (int a = 0; a < 2; a++) {
        for (int b = 0; b < 2; b++) {
            nx_node k = nx_add(g, base, nx_scalar(g, NX_DTYPE_I32, (double)(a * bins + b)));
            idx[2 * a + b] = nx_reshape(g, k, 2, col);
            upd[2 * a + b] = nx_reshape(g, nx_mul(g, um[a], uf[b]), 2, col);
        }
    }
    /* (N, 4) flattened: each sample's four cells in turn, samples ascending */
    int64_t total = 4 * n[0], cells = bins * bins, sq[2] = {bins, bins};
    nx_node ix = nx_reshape(g, nx_concat(g, 4, idx, 1), 1, &total);
    nx_node up = nx_reshape(g, nx_concat(g, 4, upd, 1), 1, &total);
    nx_node zeros = nx_broadcast(g, nx_scalar(g, dt, 0), 1, &cells);
    return nx_reshape(g, nx_scatter(g, zeros, ix, up, 0, NX_MONOID_SUM), 2, sq);
}

nx_node nx_hist_normalise(nx_graph *g, nx_node h)
{
    nx_dtype dt = nx_node_dtype(g, h);
    int axes[2] = {0, 1};
    nx_node s = nx_reduce(g, h, 2, axes, NX_MONOID_SUM, false);
    nx_node zero = nx_scalar(g, dt, 0), one = nx_scalar(g, dt, 1);
    return nx_div(g, h, nx_select(g, nx_eq(g, s, zero), one, s));
}

nx_node nx_hist_joint(nx_graph *g, const nx_op_args *c, const nx_hist_opts *o, int mask_input,
                      int64_t step, nx_hist_side *m, nx_hist_side *f)
{
    const nx_tensor *mv = c->in[0];
    nx_dtype dt = nx_tensor_dtype(mv);
    int nd = nx_tensor_ndim(mv);
    const int64_t *shape = nx_tensor_shape(mv);
    nx_node a = nx_parameter(g, c->info->inputs[0], dt, nd, shape);
    nx_node b = nx_parameter(g, c->info->inputs[1], dt, nd, shape);
    nx_node w = mask_input >= 0 ? nx_metric_mask_input(g, c->in[mask_input]) : NX_NONE;
    if (w != NX_NONE) {
        if (nx_node_dtype(g, w) != dt)
            w = nx_cast(g, w, dt);
        w = flat(g, nx_broadcast(g, w, nd, shape));
    }
    bool scatter = false;
    if (nx_hist_resolve(c, o, &scatter) != NX_OK)
        return NX_NONE;
    *m = nx_hist_bin(g, a, o->bins, o->range_moving, o->nrange_moving);
    *f = nx_hist_bin(g, b, o->bins, o->range_fixed, o->nrange_fixed);
    bool host = c->backend == NX_BACKEND_CPU;
    return nx_hist_normalise(g, nx_hist_table(g, m, f, w, o->bins, step, scatter, host));
}

nx_node nx_hist_safe_log(nx_graph *g, nx_node p)
{
    nx_dtype dt = nx_node_dtype(g, p);
    nx_node zero = nx_scalar(g, dt, 0), one = nx_scalar(g, dt, 1);
    nx_node pos = nx_gt(g, p, zero);
    return nx_select(g, pos, nx_log(g, nx_select(g, pos, p, one)), zero);
}

nx_node nx_hist_entropy(nx_graph *g, nx_node p)
{
    int nd = nx_node_ndim(g, p);
    int axes[NX_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        axes[i] = i;
    nx_node s = nx_reduce(g, nx_mul(g, p, nx_hist_safe_log(g, p)), nd, axes, NX_MONOID_SUM, false);
    return nx_neg(g, s);
}

nx_node nx_hist_row_diff(nx_graph *g, nx_node t)
{
    int64_t shape[NX_MAX_DIMS] = {0}, lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0};
    nx_node_shape(g, t, shape);
    memcpy(hi, shape, sizeof hi);
    lo[0] = 1;
    nx_node up = nx_slice(g, t, lo, shape, NULL);
    lo[0] = 0;
    hi[0] = shape[0] - 1;
    return nx_sub(g, up, nx_slice(g, t, lo, hi, NULL));
}

nx_node nx_hist_table_root(nx_graph *g, nx_node t)
{
    int64_t n = 1, shape[NX_MAX_DIMS] = {0};
    int nd = nx_node_ndim(g, t);
    nx_node_shape(g, t, shape);
    for (int i = 0; i < nd; i++)
        n *= shape[i];
    nx_node flat_t = nx_reshape(g, t, 1, &n);
    nx_node zeros = nx_broadcast(g, nx_scalar(g, nx_node_dtype(g, t), 0), 1, &n);
    return nx_scatter(g, zeros, nx_iota(g, NX_DTYPE_I32, 1, &n, 0), flat_t, 0, NX_MONOID_SUM);
}

nx_node nx_hist_gather_rows(nx_graph *g, nx_node t, const nx_hist_side *m, const nx_hist_side *f,
                            int64_t bins)
{
    nx_dtype dt = nx_node_dtype(g, m->frac);
    nx_node tf = nx_hist_table_root(g, t);
    nx_node k = nx_add(g, nx_mul(g, m->lower, nx_scalar(g, NX_DTYPE_I32, (double)bins)),
                       f->lower);
    nx_node k1 = nx_add(g, k, nx_scalar(g, NX_DTYPE_I32, 1));
    nx_node one = nx_scalar(g, dt, 1);
    return nx_add(g, nx_mul(g, nx_sub(g, one, f->frac), nx_gather(g, tf, k, 0)),
                  nx_mul(g, f->frac, nx_gather(g, tf, k1, 0)));
}

nx_node nx_hist_force(nx_graph *g, nx_node v, const nx_hist_side *m, int64_t bins, int nd,
                      const int64_t *shape)
{
    nx_dtype dt = nx_node_dtype(g, v);
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= shape[i];
    /* the span floor bounds the force of a degenerate (near-constant) data range, as the JAX
     * version's; above it the scale is exactly the binning's */
    nx_node span = nx_maximum(g, nx_sub(g, m->hi, m->lo), nx_scalar(g, dt, 1e-6));
    nx_node scale = nx_div(g, nx_scalar(g, dt, (double)(bins - 1)), span);
    scale = nx_div(g, scale, nx_scalar(g, dt, (double)n));
    nx_node inside = nx_and(g, nx_ge(g, m->x, m->lo), nx_le(g, m->x, m->hi));
    nx_node out = nx_select(g, inside, nx_mul(g, v, scale), nx_scalar(g, dt, 0));
    return nx_reshape(g, out, nd, shape);
}

nx_node nx_hist_quantiles(nx_graph *g, nx_node sorted, int64_t n, const double *q, int64_t nq,
                          int32_t *idx, double *t, bool *hi_side)
{
    nx_dtype dt = nx_node_dtype(g, sorted);
    for (int64_t k = 0; k < nq; k++) {
        double v = (double)n * q[k] + (1.0 + q[k] * -1.0) - 1.0;
        double lo = floor(v);
        if (v >= (double)(n - 1)) {
            idx[k] = (int32_t)(n - 1);
            t[k] = 0;
        } else if (v < 0) {
            idx[k] = 0;
            t[k] = 0;
        } else {
            idx[k] = (int32_t)lo;
            t[k] = v - lo;
        }
        hi_side[k] = t[k] >= 0.5;
    }
    nx_node i0 = nx_constant(g, NX_DTYPE_I32, 1, &nq, idx);
    nx_node i1 = nx_minimum(g, nx_add(g, i0, nx_scalar(g, NX_DTYPE_I32, 1)),
                            nx_scalar(g, NX_DTYPE_I32, (double)(n - 1)));
    nx_node tt = nx_cast(g, nx_constant(g, NX_DTYPE_F64, 1, &nq, t), dt);
    nx_node side = nx_constant(g, NX_DTYPE_BOOL, 1, &nq, hi_side);
    nx_node a = nx_gather(g, sorted, i0, 0), b = nx_gather(g, sorted, i1, 0);
    nx_node d = nx_sub(g, b, a);
    nx_node one = nx_scalar(g, dt, 1);
    /* numpy's _lerp: a + (b - a) t, or b - (b - a) (1 - t) for t >= 1/2 */
    return nx_select(g, side, nx_sub(g, b, nx_mul(g, d, nx_sub(g, one, tt))),
                     nx_add(g, a, nx_mul(g, d, tt)));
}

/* ---- the cpu scatter driver: extern hist_scatter ------------------------------------------ */

/* ins: base (bins, bins), xm, xf, lo_m, hi_m, lo_f, hi_f (0-d), then optionally w: the images
 * (any shapes of N elements each, read in C order), their ranges and the weights. The extern bins each sample itself (the
 * scaling of histogram.h, in the images' dtype as the IR computes it), so the binned values are
 * never written out: one read of each image. out = base + H. */
enum { HS_BASE, HS_XM, HS_XF, HS_LOM, HS_HIM, HS_LOF, HS_HIF, HS_W, HS_MAX_IN };

static nx_status hs_shape(void *user, int n_in, const nx_dtype *dtypes, const int *ndims,
                          const int64_t *const *shapes, nx_dtype *out_dtype, int *out_ndim,
                          int64_t out_shape[NX_MAX_DIMS])
{
    (void)user;
    if (n_in < HS_W || n_in > HS_MAX_IN || ndims[HS_BASE] != 2 ||
        shapes[HS_BASE][0] != shapes[HS_BASE][1] || shapes[HS_BASE][0] < 2)
        return NX_ERR_SHAPE;
    int64_t numel[HS_MAX_IN];
    for (int i = 1; i < n_in; i++) {
        numel[i] = 1;
        for (int d = 0; d < ndims[i]; d++)
            numel[i] *= shapes[i][d];
        bool sample = i == HS_XM || i == HS_XF || i == HS_W;
        if (dtypes[i] != dtypes[HS_BASE] || (!sample && ndims[i] != 0) ||
            (sample && numel[i] != numel[HS_XM]))
            return NX_ERR_SHAPE;
    }
    *out_dtype = dtypes[HS_BASE];
    *out_ndim = 2;
    out_shape[0] = out_shape[1] = shapes[HS_BASE][0];
    return NX_OK;
}

typedef struct hs_job {
    const void *vm, *vf, *w;
    double lo[2], hi[2]; /* moving, fixed */
    bool f64;
    int64_t bins;
    double *part; /* bins^2 per chunk */
} hs_job;

/* scaled() of one sample, in the images' dtype: NaN stays NaN (and takes bin 0 below, as the
 * IR's cast does). */
static inline float hs_scaled_f32(float x, float lo, float hi, float top)
{
    float span = hi - lo > 1e-12f ? hi - lo : 1e-12f, v = (x - lo) / span * top;
    return v < 0 ? 0 : (v > top ? top : v);
}

static inline double hs_scaled_f64(double x, double lo, double hi, double top)
{
    double span = hi - lo > 1e-12 ? hi - lo : 1e-12, v = (x - lo) / span * top;
    return v < 0 ? 0 : (v > top ? top : v);
}

#define HS_ACCUMULATE(T, SCALED)                                                                   \
    do {                                                                                           \
        const T *a = j->vm, *b = j->vf, *w = j->w;                                                 \
        const T lom = (T)j->lo[0], him = (T)j->hi[0], lof = (T)j->lo[1], hif = (T)j->hi[1];        \
        const T vtop = (T)(n - 1);                                                                 \
        for (int64_t i = begin; i < end; i++) {                                                    \
            double x = SCALED(a[i], lom, him, vtop), y = SCALED(b[i], lof, hif, vtop);             \
            double wi = w ? (double)w[i] : 1.0;                                                    \
            /* x, y in [0, bins - 1]: truncation is floor; NaN takes bin 0 (the IR's cast) */     \
            int64_t l = x >= 1 ? (int64_t)x : 0, k = y >= 1 ? (int64_t)y : 0;                      \
            l = l > top ? top : l;                                                                 \
            k = k > top ? top : k;                                                                 \
            double t = x - (double)l, u = y - (double)k, wt = wi * t, w1 = wi - wt;                \
            double *r = h + l * n + k;                                                             \
            r[0] += w1 * (1.0 - u);                                                                \
            r[1] += w1 * u;                                                                        \
            r[n] += wt * (1.0 - u);                                                                \
            r[n + 1] += wt * u;                                                                    \
        }                                                                                          \
    } while (0)

static void hs_chunk(void *user, int64_t begin, int64_t end, int chunk)
{
    const hs_job *j = user;
    int64_t n = j->bins, top = n - 2;
    double *h = j->part + (size_t)chunk * (size_t)(n * n);
    memset(h, 0, (size_t)(n * n) * sizeof(double));
    if (j->f64)
        HS_ACCUMULATE(double, hs_scaled_f64);
    else
        HS_ACCUMULATE(float, hs_scaled_f32);
}

#define HS_GRAIN 65536

static nx_status hs_reference(void *user, nx_ctx *ctx, int n_in, const nx_tensor *const *ins,
                              nx_tensor *out)
{
    (void)user;
    int64_t bins = nx_tensor_shape(ins[HS_BASE])[0], cells = bins * bins;
    int64_t n = nx_tensor_numel(ins[HS_XM]);
    hs_job j = {.vm = nx_tensor_data(ins[HS_XM]),
                .vf = nx_tensor_data(ins[HS_XF]),
                .w = n_in > HS_W ? nx_tensor_data(ins[HS_W]) : NULL,
                .f64 = nx_tensor_dtype(ins[HS_BASE]) == NX_DTYPE_F64,
                .bins = bins};
    for (int k = 0; k < 4; k++) {
        const void *p = nx_tensor_data(ins[HS_LOM + k]);
        double v = j.f64 ? *(const double *)p : (double)*(const float *)p;
        if (k % 2)
            j.hi[k / 2] = v;
        else
            j.lo[k / 2] = v;
    }
    int threads = 1;
    nx_status st = nx_rt_pool_threads(ctx, &threads);
    if (st != NX_OK)
        return st;
    int nchunks = n > 0 ? nx_rt_pool_chunks(n, HS_GRAIN, threads) : 0;
    size_t bytes = (size_t)(nchunks > 0 ? nchunks : 1) * (size_t)cells * sizeof(double);
    j.part = nx_rt_alloc(ctx, bytes);
    if (!j.part)
        return nx_rt_nomem(ctx, "joint_histogram: per-chunk tables", bytes);
    if (nchunks > 0)
        st = nx_rt_parallel_for(ctx, n, HS_GRAIN, hs_chunk, &j);
    for (int64_t k = 0; st == NX_OK && k < cells; k++) {
        double acc = j.f64 ? ((const double *)nx_tensor_data(ins[0]))[k]
                           : (double)((const float *)nx_tensor_data(ins[0]))[k];
        for (int c = 0; c < nchunks; c++)
            acc += j.part[(size_t)c * (size_t)cells + (size_t)k];
        if (j.f64)
            ((double *)nx_tensor_data(out))[k] = acc;
        else
            ((float *)nx_tensor_data(out))[k] = (float)acc;
    }
    nx_rt_free(ctx, j.part, bytes);
    return st;
}

/* d scaled(x, lo, hi) against x, lo and hi, applied to the cotangent dv of the scaled values:
 * zero where the clip holds; dlo and dhi summed over the samples (the range is an image's min and
 * max, or constants whose cotangents are dropped). */
static void scaled_vjp(nx_graph *g, nx_node x, nx_node lo, nx_node hi, int64_t bins, nx_node dv,
                       nx_node *dx, nx_node *dlo, nx_node *dhi)
{
    nx_dtype dt = nx_node_dtype(g, x);
    nx_node top = nx_scalar(g, dt, (double)(bins - 1)), zero = nx_scalar(g, dt, 0);
    nx_node eps = nx_scalar(g, dt, 1e-12), width = nx_sub(g, hi, lo);
    nx_node span = nx_maximum(g, width, eps);
    nx_node r = nx_div(g, nx_sub(g, x, lo), span), v = nx_mul(g, r, top);
    nx_node pass = nx_select(g, nx_lt(g, v, zero), zero,
                             nx_select(g, nx_gt(g, v, top), zero, dv));
    nx_node gx = nx_div(g, nx_mul(g, pass, top), span); /* d/dx */
    /* d/dspan = -r top / span, and span moves with hi - lo unless eps holds it */
    nx_node gspan = nx_select(g, nx_gt(g, width, eps), nx_neg(g, nx_mul(g, gx, r)), zero);
    int nd = nx_node_ndim(g, x), axes[NX_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        axes[d] = d;
    nx_node sx = nx_reduce(g, gx, nd, axes, NX_MONOID_SUM, false);
    nx_node ss = nx_reduce(g, gspan, nd, axes, NX_MONOID_SUM, false);
    *dx = gx;
    *dlo = nx_neg(g, nx_add(g, sx, ss));
    *dhi = ss;
}

/* The cotangent table dH gathered at each sample's four cells: dv_m, dv_f and dw are the
 * derivatives of its four products (the bins are piecewise constant), then chained through the
 * scaling to the images and their ranges. */
static nx_status hs_vjp(void *user, nx_graph *g, int n_in, const nx_node *ins, nx_node out,
                        nx_node cot, nx_node *in_cot)
{
    (void)user, (void)out;
    nx_dtype dt = nx_node_dtype(g, ins[HS_XM]);
    int64_t shape[NX_MAX_DIMS] = {0};
    nx_node_shape(g, ins[HS_BASE], shape);
    int64_t bins = shape[0], cells = bins * bins;
    nx_node vm = scaled(g, ins[HS_XM], ins[HS_LOM], ins[HS_HIM], bins);
    nx_node vf = scaled(g, ins[HS_XF], ins[HS_LOF], ins[HS_HIF], bins);
    nx_node top = nx_scalar(g, dt, (double)(bins - 2)), one = nx_scalar(g, dt, 1);
    nx_node lm = nx_minimum(g, nx_floor(g, vm), top);
    nx_node lf = nx_minimum(g, nx_floor(g, vf), top);
    nx_node t = nx_sub(g, vm, lm), u = nx_sub(g, vf, lf);
    nx_node k = nx_add(g, nx_mul(g, nx_cast(g, lm, NX_DTYPE_I32),
                                 nx_scalar(g, NX_DTYPE_I32, (double)bins)),
                       nx_cast(g, lf, NX_DTYPE_I32));
    nx_node flat_cot = nx_reshape(g, cot, 1, &cells), c[4];
    const double off[4] = {0, 1, (double)bins, (double)bins + 1};
    for (int i = 0; i < 4; i++)
        c[i] = nx_gather(g, flat_cot, nx_add(g, k, nx_scalar(g, NX_DTYPE_I32, off[i])), 0);
    nx_node t1 = nx_sub(g, one, t), u1 = nx_sub(g, one, u);
    nx_node dvm = nx_add(g, nx_mul(g, u1, nx_sub(g, c[2], c[0])),
                         nx_mul(g, u, nx_sub(g, c[3], c[1])));
    nx_node dvf = nx_add(g, nx_mul(g, t1, nx_sub(g, c[1], c[0])),
                         nx_mul(g, t, nx_sub(g, c[3], c[2])));
    in_cot[HS_BASE] = cot;
    if (n_in > HS_W) {
        dvm = nx_mul(g, dvm, ins[HS_W]);
        dvf = nx_mul(g, dvf, ins[HS_W]);
        nx_node a = nx_add(g, nx_mul(g, u1, c[0]), nx_mul(g, u, c[1]));
        nx_node b = nx_add(g, nx_mul(g, u1, c[2]), nx_mul(g, u, c[3]));
        in_cot[HS_W] = nx_add(g, nx_mul(g, t1, a), nx_mul(g, t, b));
    }
    scaled_vjp(g, ins[HS_XM], ins[HS_LOM], ins[HS_HIM], bins, dvm, &in_cot[HS_XM],
               &in_cot[HS_LOM], &in_cot[HS_HIM]);
    scaled_vjp(g, ins[HS_XF], ins[HS_LOF], ins[HS_HIF], bins, dvf, &in_cot[HS_XF],
               &in_cot[HS_LOF], &in_cot[HS_HIF]);
    return nx_graph_status(g);
}

static const nx_extern_def hist_scatter_def = {
    .name = "hist_scatter",
    .shape = hs_shape,
    .reference = hs_reference,
    .vjp = hs_vjp,
};

static nx_node host_table(nx_graph *g, const nx_hist_side *m, const nx_hist_side *f, nx_node w,
                          int64_t bins, int64_t step)
{
    int64_t sq[2] = {bins, bins};
    nx_node base = nx_broadcast(g, nx_scalar(g, nx_node_dtype(g, m->x), 0), 2, sq);
    nx_node xm = step > 1 ? strided(g, m->x, step) : m->img;
    nx_node xf = step > 1 ? strided(g, f->x, step) : f->img;
    if (w != NX_NONE && step > 1) {
        w = strided(g, w, step);
    } else if (w != NX_NONE) { /* the images' shape, so that the adjoint's products line up */
        int64_t shape[NX_MAX_DIMS] = {0};
        nx_node_shape(g, m->img, shape);
        w = nx_reshape(g, w, nx_node_ndim(g, m->img), shape);
    }
    nx_node ins[HS_MAX_IN] = {base, xm, xf, m->lo, m->hi, f->lo, f->hi, w};
    return nx_extern(g, &hist_scatter_def, w != NX_NONE ? HS_MAX_IN : HS_W, ins);
}
