/* Gaussian smoothing as separable 1-D graph fragments, scipy.ndimage.gaussian_filter's conventions.
 *
 * The FIR driver pads the line by the window's reach with the border mode, takes a window view
 * along the axis and folds it with the normalised Gaussian weights: one LOOP kernel per axis whose
 * reduction loop runs over the taps. With sigma as a graph node the weights are an IR expression
 * of it (exp(-(t + shift)^2 / (2 sigma^2)) / sum), so nx_graph_vjp gives d/dsigma; otherwise they
 * are computed here in double exactly as scipy computes them and become constants, so the kernel
 * loads them instead of recomputing an exp per tap and element.
 *
 * The recursive driver is in gaussian-recursive.c; the op (its descriptor and the tensor entry
 * points) in gaussian.c. */
#include <math.h>
#include <string.h>

#include "gaussian.h"
#include "ir/ir.h"
#include "nitrix-graph.h"

static const nx_pad_mode pad_of[NX_GAUSSIAN_MODE_COUNT] = {
    [NX_GAUSSIAN_REFLECT] = NX_PAD_REFLECT, [NX_GAUSSIAN_MIRROR] = NX_PAD_MIRROR,
    [NX_GAUSSIAN_NEAREST] = NX_PAD_NEAREST, [NX_GAUSSIAN_CONSTANT] = NX_PAD_CONSTANT,
    [NX_GAUSSIAN_WRAP] = NX_PAD_WRAP,
};

static nx_status check_scalars(nx_ctx *ctx, const char *who, const nx_gaussian_opts *o, int nsp)
{
    if (o->nsigma != 1 && o->nsigma != nsp)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: nsigma is %d; expected 1 or %d (one per spatial axis)", who,
                           o->nsigma, nsp);
    for (int i = 0; i < o->nsigma; i++)
        if (!(o->sigma[i] > 0) || !isfinite(o->sigma[i]))
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                               "%s: sigma[%d] is %g; expected a finite value > 0", who, i,
                               o->sigma[i]);
    if (o->truncate < 0 || !isfinite(o->truncate))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: truncate is %g; expected a finite value > 0 (0: scipy's 4.0)",
                           who, o->truncate);
    if ((unsigned)o->mode >= NX_GAUSSIAN_MODE_COUNT)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: mode %d is not an nx_gaussian_mode", who,
                           (int)o->mode);
    if (o->mode == NX_GAUSSIAN_CONSTANT && !isfinite(o->cval))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: cval is %g; expected a finite value", who,
                           o->cval);
    return NX_OK;
}

/* The window of spatial axis i: taps, shift and the truncate radius. */
static nx_status axis_window(nx_ctx *ctx, const char *who, const nx_gaussian_opts *o, int i,
                             int64_t extent, nx_gauss_plan *p)
{
    double truncate = o->truncate > 0 ? o->truncate : 4.0;
    double r = truncate * p->sigma[i] + 0.5;
    nx_rt_size z = {0};
    p->radius[i] = nx_rt_size_of_double(&z, r);
    if (z.overflow)
        return nx_rt_size_error(ctx, who, "truncate * sigma", "a window radius below 2^63");
    if (r > 1e9)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: truncate * sigma[%d] is %g; expected at most 1e9 taps", who, i,
                           r);
    int64_t k = o->kernel_size[i];
    if (k < 0)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: kernel_size[%d] is %lld; expected > 0 (0: from truncate)", who, i,
                           (long long)k);
    if (k == 0) {
        p->lo[i] = p->hi[i] = p->radius[i];
        p->shift[i] = 0;
        return NX_OK;
    }
    if (extent >= 0 && k > extent)
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "%s: kernel_size[%d] is %lld but spatial axis %d has %lld samples; "
                           "expected a window no longer than the axis",
                           who, i, (long long)k, i, (long long)extent);
    p->lo[i] = k / 2;
    p->hi[i] = k - 1 - k / 2;
    p->shift[i] = k % 2 ? 0.0 : 0.5;
    return NX_OK;
}

/* The op's one driver site. A sigma gradient exists only through the FIR weights, so auto picks
 * fir when one is wanted. */
nx_status nx_gauss_resolve(nx_ctx *ctx, const nx_gaussian_opts *o, bool sigma_grad,
                           bool *recursive)
{
    const char *want = o->driver;
    bool is_auto = !want || !*want || strcmp(want, "auto") == 0;
    if (sigma_grad && is_auto)
        want = "fir";
    const char *variant = NULL;
    nx_status st = nx_driver_resolve(ctx, "gaussian_filter", want, &variant);
    if (st != NX_OK)
        return st;
    *recursive = strcmp(variant, "recursive") == 0;
    if (*recursive && sigma_grad)
        return nx_rt_error(ctx, NX_ERR_UNSUPPORTED,
                           "gaussian_filter: the recursive driver has no gradient with respect "
                           "to sigma; expected driver fir (or auto)");
    return NX_OK;
}

nx_status nx_gauss_plan_make(nx_ctx *ctx, const char *who, const nx_gaussian_opts *o, int nd,
                             const int64_t *shape, nx_gauss_plan *p)
{
    memset(p, 0, sizeof *p);
    if (!o)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: opts is NULL; expected options with at least sigma", who);
    if (o->nspatial < 0 || o->nspatial > NX_GAUSSIAN_MAX_SPATIAL)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: nspatial is %d; expected 0..%d", who,
                           o->nspatial, NX_GAUSSIAN_MAX_SPATIAL);
    p->nd = nd;
    p->nsp = o->nspatial ? o->nspatial : nd;
    if (p->nsp < 1 || p->nsp > NX_GAUSSIAN_MAX_SPATIAL || p->nsp > nd)
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "%s: x has %d dims and %d are spatial; expected 1..%d spatial dims "
                           "within x's",
                           who, nd, p->nsp, NX_GAUSSIAN_MAX_SPATIAL);
    p->lead = nd - p->nsp;
    nx_status st = check_scalars(ctx, who, o, p->nsp);
    for (int i = 0; st == NX_OK && i < p->nsp; i++) {
        p->sigma[i] = o->sigma[o->nsigma == 1 ? 0 : i];
        st = axis_window(ctx, who, o, i, shape ? shape[p->lead + i] : -1, p);
    }
    p->pad = pad_of[o->mode < NX_GAUSSIAN_MODE_COUNT ? o->mode : 0];
    p->cval = o->cval;
    return st;
}

/* ---- FIR ---------------------------------------------------------------------------------- */

/* Weights of spatial axis i computed as scipy's _gaussian_kernel1d does, in double. */
static void host_weights(const nx_gauss_plan *p, int i, double *w)
{
    double s2 = p->sigma[i] * p->sigma[i], sum = 0;
    int64_t k = p->lo[i] + p->hi[i] + 1;
    for (int64_t j = 0; j < k; j++) {
        double t = (double)(j - p->lo[i]) + p->shift[i];
        w[j] = exp(-0.5 / s2 * t * t);
        sum += w[j];
    }
    for (int64_t j = 0; j < k; j++)
        w[j] /= sum;
}

/* sigma_i as a 0-d node: sigma itself when 0-d, else element i of it (element 0 of a [1]). */
static nx_node sigma_at(nx_graph *g, nx_node sigma, int i)
{
    int64_t n[NX_MAX_DIMS] = {1};
    if (nx_node_ndim(g, sigma) == 0)
        return sigma;
    if (nx_node_shape(g, sigma, n) && n[0] == 1)
        i = 0;
    int64_t start = i, stop = i + 1;
    return nx_reshape(g, nx_slice(g, sigma, &start, &stop, NULL), 0, NULL);
}

nx_node nx_gauss_constant(nx_graph *g, nx_dtype dt, int64_t k, const double *w, int nd,
                          const int64_t *shape)
{
    if (dt == NX_DTYPE_F64)
        return nx_constant(g, dt, nd, shape, w);
    if (dt != NX_DTYPE_F32)
        return nx_cast(g, nx_constant(g, NX_DTYPE_F64, nd, shape, w), dt);
    nx_ctx *ctx = nx_graph_ctx(g);
    float *f = nx_rt_alloc(ctx, (size_t)k * sizeof(float));
    if (!f)
        return nx_ir_graph_failf(g, NX_ERR_NOMEM, "gaussian: out of memory (%lld weights)",
                                 (long long)k);
    for (int64_t j = 0; j < k; j++)
        f[j] = (float)w[j];
    nx_node out = nx_constant(g, dt, nd, shape, f);
    nx_rt_free(ctx, f, (size_t)k * sizeof(float));
    return out;
}

/* The normalised weights of spatial axis i as a node of dtype dt and the given shape (k elements:
 * the taps along one axis). */
static nx_node weights_node(nx_graph *g, const nx_gauss_plan *p, int i, nx_node sigma,
                            nx_dtype dt, int nd, const int64_t *shape)
{
    nx_ctx *ctx = nx_graph_ctx(g);
    int64_t k = p->lo[i] + p->hi[i] + 1;
    double *w = nx_rt_alloc(ctx, (size_t)k * sizeof(double));
    if (!w)
        return nx_ir_graph_failf(g, NX_ERR_NOMEM, "gaussian: out of memory (%lld weights)",
                                 (long long)k);
    nx_node out = NX_NONE;
    if (sigma == NX_NONE) {
        /* a constant of x's dtype and the final shape: a cast or a reshape of a constant would
         * be a kernel of its own on every run */
        host_weights(p, i, w);
        out = nx_gauss_constant(g, dt, k, w, nd, shape);
    } else {
        for (int64_t j = 0; j < k; j++) {
            double t = (double)(j - p->lo[i]) + p->shift[i];
            w[j] = -0.5 * t * t;
        }
        nx_node s = sigma_at(g, sigma, i);
        nx_node tt = nx_cast(g, nx_constant(g, NX_DTYPE_F64, 1, &k, w), dt);
        nx_node e = nx_exp(g, nx_div(g, tt, nx_mul(g, s, s)));
        int axis = 0;
        out = nx_reshape(g, nx_div(g, e, nx_reduce(g, e, 1, &axis, NX_MONOID_SUM, false)), nd,
                         shape);
    }
    nx_rt_free(ctx, w, (size_t)k * sizeof(double));
    return out;
}

/* sum_t w[t] xp[i + t] along absolute axis a as k shifted slices of xp times constants, added in
 * tap order (the window fold's order): one elementwise kernel whose loads are affine shifts of
 * each other along the contiguous axis, with the weights as immediates: 3.5x faster than the
 * window fold for the pass along the last axis at 256^3 (7.6 against 27 ms CPU, sigma 2). Only for
 * the last axis: an elementwise pass is inlined into whatever reads it, so a chain of such passes
 * would fuse into one kernel of k^3 loads per voxel; the window folds before it are materialised
 * and cut the chain. */
static nx_node fir_slices(nx_graph *g, nx_node xp, const nx_gauss_plan *p, int i)
{
    nx_ctx *ctx = nx_graph_ctx(g);
    int a = p->lead + i;
    int64_t k = p->lo[i] + p->hi[i] + 1, start[NX_MAX_DIMS] = {0}, stop[NX_MAX_DIMS];
    if (!nx_node_shape(g, xp, stop))
        return NX_NONE;
    int64_t n = stop[a] - k + 1;
    double *w = nx_rt_alloc(ctx, (size_t)k * sizeof(double));
    if (!w)
        return nx_ir_graph_failf(g, NX_ERR_NOMEM, "gaussian: out of memory (%lld weights)",
                                 (long long)k);
    host_weights(p, i, w);
    nx_dtype dt = nx_node_dtype(g, xp);
    nx_node y = NX_NONE;
    for (int64_t t = 0; t < k; t++) {
        start[a] = t;
        stop[a] = t + n;
        nx_node term = nx_mul(g, nx_slice(g, xp, start, stop, NULL), nx_scalar(g, dt, w[t]));
        y = t == 0 ? term : nx_add(g, y, term);
    }
    nx_rt_free(ctx, w, (size_t)k * sizeof(double));
    return y;
}

/* y[i] = sum_t w[t] x[i + t] along absolute axis a (spatial axis i). x is padded along a here
 * unless padded says it already holds the window's reach on both sides. */
typedef enum fir_form { FORM_SLICES_LAST, FORM_SLICES_ALL, FORM_FOLD } fir_form;

static nx_node fir_pass(nx_graph *g, nx_node x, const nx_gauss_plan *p, int i, nx_node sigma,
                        bool padded, fir_form form)
{
    int nd = p->nd, a = p->lead + i;
    int64_t k = p->lo[i] + p->hi[i] + 1;
    int64_t lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0}, win[NX_MAX_DIMS];
    int64_t wshape[2 * NX_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        win[d] = d == a ? k : 1;
    for (int d = 0; d < 2 * nd; d++)
        wshape[d] = d == nd + a ? k : 1;
    lo[a] = p->lo[i];
    hi[a] = p->hi[i];
    nx_node xp = padded ? x : nx_pad(g, x, lo, hi, p->pad, p->cval);
    bool slices = form == FORM_SLICES_ALL || (form == FORM_SLICES_LAST && a == nd - 1);
    if (sigma == NX_NONE && k <= NX_GAUSS_FIR_SLICE_TAPS && slices)
        return fir_slices(g, xp, p, i);
    nx_node v = nx_window(g, xp, win, NULL, NULL);
    nx_node w = weights_node(g, p, i, sigma, nx_node_dtype(g, x), 2 * nd, wshape);
    /* Folding every window axis (the others have extent 1) leaves x's shape as the kernel's
     * iteration space, so its innermost loop runs along x's contiguous axis; a reshape dropping
     * the unit axes instead lowers to div/mod index arithmetic. */
    int axes[NX_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        axes[d] = nd + d;
    return nx_reduce(g, nx_mul(g, v, w), nd, axes, NX_MONOID_SUM, false);
}

/* ---- the builder -------------------------------------------------------------------------- */

static nx_node graph_fail(nx_graph *g, nx_status st)
{
    nx_ir_graph_fail(g, st, nx_ctx_last_error(nx_graph_ctx(g)));
    return NX_NONE;
}

static nx_status check_sigma_node(nx_graph *g, const char *who, nx_node s, nx_dtype dt, int nsp)
{
    nx_ctx *ctx = nx_graph_ctx(g);
    if (nx_node_dtype(g, s) != dt)
        return nx_rt_error(ctx, NX_ERR_DTYPE, "%s: sigma_node is %s; expected x's dtype %s", who,
                           nx_dtype_name(nx_node_dtype(g, s)), nx_dtype_name(dt));
    int64_t shape[NX_MAX_DIMS];
    int nd = nx_node_ndim(g, s);
    if (nd == 0 || (nd == 1 && nx_node_shape(g, s, shape) && (shape[0] == nsp || shape[0] == 1)))
        return NX_OK;
    return nx_rt_error(ctx, NX_ERR_SHAPE,
                       "%s: sigma_node has %d dims; expected shape [], [1] or [%d] (one per "
                       "spatial axis)",
                       who, nd, nsp);
}

nx_node nx_gaussian_node(nx_graph *g, nx_node x, nx_node sigma_node, const nx_gaussian_opts *opts)
{
    static const char *who = "nx_gaussian_node";
    if (!g || !x || nx_graph_status(g) != NX_OK)
        return NX_NONE;
    nx_ctx *ctx = nx_graph_ctx(g);
    nx_dtype dt = nx_node_dtype(g, x);
    if (dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64)
        return nx_ir_graph_failf(g, NX_ERR_DTYPE, "%s: x is %s; expected f32 or f64 (cast first)",
                                 who, nx_dtype_name(dt));
    int64_t shape[NX_MAX_DIMS];
    int nd = nx_node_ndim(g, x);
    if (!nx_node_shape(g, x, shape))
        return NX_NONE;
    nx_gauss_plan p;
    nx_status st = nx_gauss_plan_make(ctx, who, opts, nd, shape, &p);
    if (st == NX_OK && sigma_node != NX_NONE)
        st = check_sigma_node(g, who, sigma_node, dt, p.nsp);
    if (st == NX_OK)
        st = nx_gauss_resolve(ctx, opts, sigma_node != NX_NONE, &p.recursive);
    if (st != NX_OK)
        return graph_fail(g, st);
    for (int d = 0; d < nd; d++)
        if (shape[d] == 0)
            return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                     "%s: x has no elements (extent 0 on dim %d); expected a "
                                     "nonempty image (nx_gaussian_filter returns empty results)",
                                     who, d);
    nx_node y = x;
    for (int i = 0; i < p.nsp; i++) {
        if (p.recursive && p.sigma[i] < 0.5) {
            nx_ctx_log(ctx, NX_LOG_WARN,
                       "gaussian_filter: sigma %g on spatial axis %d is below the recursive "
                       "filter's range (>= 0.5); that axis uses the fir driver",
                       p.sigma[i], i);
        }
        if (p.recursive && p.sigma[i] >= 0.5)
            y = nx_gauss_recursive_pass(g, y, p.lead + i, p.sigma[i], p.radius[i], p.pad, p.cval);
        else
            y = fir_pass(g, y, &p, i, sigma_node, false, FORM_SLICES_LAST);
    }
    return y;
}

nx_node nx_gauss_pad_all(nx_graph *g, nx_node x, const nx_gauss_plan *p)
{
    int64_t lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0};
    for (int i = 0; i < p->nsp; i++) {
        lo[p->lead + i] = p->lo[i];
        hi[p->lead + i] = p->hi[i];
    }
    return nx_pad(g, x, lo, hi, p->pad, p->cval);
}

nx_node nx_gauss_fir_valid(nx_graph *g, nx_node xp, const nx_gauss_plan *p, nx_node *mids)
{
    nx_node y = xp;
    for (int i = 0; i < p->nsp; i++) {
        y = fir_pass(g, y, p, i, NX_NONE, true, mids ? FORM_SLICES_ALL : FORM_SLICES_LAST);
        if (mids && i + 1 < p->nsp)
            mids[i] = y;
    }
    return y;
}

/* ---- every pass as slices (hints.fir_slices_every_axis: the CUDA backend's form) -------------
 *
 * Here every pass is a sum of shifted slices with the weights as immediates (no weight
 * load beside each tap, no kernel casting a weight tensor), and each pass before the last is
 * materialised as a fold of one element per point: a reduction, hence a kernel of its own, whose
 * value is the pass's (0 + v: only a -0 becomes +0); unmaterialised, an elementwise pass would be
 * inlined into the next one (k^2 loads per point). Measured on the H200 (256^3 f32, sigma 2,
 * docs/perf/cuda-fir.md): the passes are bound by load instructions and L1 wavefronts, not by L2
 * or HBM traffic (ncu: 131-134 us per outer-axis pass at 1.0-1.3 GB of L2 and ~125 MB of DRAM;
 * an iteration order that shared the taps of 8 rows per thread block in L1 cut the L2 bytes 3.5x
 * and not the time, and its final copy made the row slower: 0.38 ms), so this form gains little
 * over window folds (0.330 -> 0.326 ms); the emitter's rows per thread take the outer-axis passes
 * to 52 us each (on by default; the row's figures are in docs/PERF.md and docs/perf/cuda-fir.md). */
/* Whether nx_gauss_fir_device takes plan p: the FIR driver, a rank with room for the fold axis. */
bool nx_gauss_fir_device_fits(const nx_gauss_plan *p)
{
    return !p->recursive && p->nd + 1 <= NX_MAX_DIMS;
}

/* y as a fold of one element per point (its own kernel; rank nd + 1 <= NX_MAX_DIMS). */
static nx_node materialise(nx_graph *g, nx_node y)
{
    int64_t shape[NX_MAX_DIMS + 1];
    int nd = nx_node_ndim(g, y);
    if (!nx_node_shape(g, y, shape))
        return NX_NONE;
    shape[nd] = 1;
    int axis = nd;
    return nx_reduce(g, nx_reshape(g, y, nd + 1, shape), 1, &axis, NX_MONOID_SUM, false);
}

/* The forward FIR with constant weights over x (float, nonempty) in the form above. */
nx_node nx_gauss_fir_device(nx_graph *g, nx_node x, const nx_gauss_plan *p)
{
    nx_node y = x;
    for (int i = 0; i < p->nsp; i++) {
        y = fir_pass(g, y, p, i, NX_NONE, false, FORM_SLICES_ALL);
        bool sliced = p->lo[i] + p->hi[i] + 1 <= NX_GAUSS_FIR_SLICE_TAPS; /* else a window fold */
        if (sliced && i + 1 < p->nsp)
            y = materialise(g, y);
    }
    return y;
}
