/* The geometry family's sampler (sample.h; docs/geometry.md "Sampling").
 *
 * Every method is one fused gather: along each axis a of rank nd the coordinate x_a gives T taps
 * at integer positions i = floor(x_a) + off + k (k = 0..T-1) with weights w_a(k) of the fraction
 * f = x_a - floor(x_a); the border mode folds each tap's position into [0, n_a) (constant mode
 * marks it outside instead); the flat index sum_a i_a stride_a (+ the batch offset) gathers from
 * the image viewed as [B * V, C]; the result is the sum over the T^nd taps of prod_a w_a times the
 * gathered value. The taps are reduction axes of one reduce, so the program is one loop kernel
 * with T^nd reduction steps per point; autodiff gives the deformation's gradient through the
 * weights (f's derivative is 1; floor has none) and the image's as the gather's adjoint, a
 * scatter-add at the same indices (docs/geometry.md says what each backend guarantees for it).
 *
 * Method taps (d = f - k + off distance from the tap, t = |d|):
 *   nearest        T = 1, position floor(x + 0.5) (scipy's order 0), weight 1
 *   linear         T = 2, off 0: 1 - t
 *   cubic_bspline  T = 4, off -1: 2/3 - t^2 + t^3/2 (t < 1), (2 - t)^3 / 6 (t >= 1)
 *   catmull_rom    T = 4, off -1: 3/2 t^3 - 5/2 t^2 + 1 (t < 1), -t^3/2 + 5/2 t^2 - 4t + 2
 *   lanczos(a)     T = 2a, off 1 - a: sinc(d) sinc(d / a), divided by its sum over the axis' taps
 *
 * The B-spline prefilter (nx_geo_prefilter) turns the samples into coefficients, scipy's
 * spline_filter(order=3, mode='mirror'): per axis the gain 6, a causal recursion
 * c+[i] = b[i] + z c+[i-1] from scipy's exact mirror start c+[0] = sum_i w_i b[i], an anticausal
 * one c[i] = z (c[i+1] - c+[i]) from c[n-1] = z / (z^2 - 1) (c+[n-1] + z c+[n-2]), z = sqrt(3) - 2.
 * The driver site geometry.bspline_prefilter picks how: `sequential` (canonical) runs the two
 * recursions as scan_iir; `fir` convolves the mirror-extended line with the filter's impulse
 * response sqrt(3) z^|k|, truncated where |z|^K is below the dtype's epsilon: the same infinite
 * sum, parallel over every point, within the registry's tolerance of the recursion. */
#include <math.h>
#include <string.h>

#include "ops/geometry/sample.h"

#define COORD_LIMIT 1099511627776.0 /* 2^40 */

static const char *const driver_names[] = {"auto", "sequential", "fir"};

int nx_geo_method_of(int method)
{
    static const int of[] = {NX_GEO_LINEAR,      NX_GEO_NEAREST,       NX_GEO_CUBIC_BSPLINE,
                             NX_GEO_LANCZOS,     NX_GEO_CATMULL_ROM,   NX_GEO_MULTILABEL,
                             NX_GEO_NEAREST,     NX_GEO_CUBIC_BSPLINE, NX_GEO_CATMULL_ROM};
    return method >= 0 && method < (int)(sizeof of / sizeof of[0]) ? of[method] : -1;
}

nx_status nx_geo_check_opts(const nx_op_args *c, const nx_geo_args *o)
{
    int m = nx_geo_method_of(o->method);
    if (m < 0)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: method %d is unknown; expected linear, nearest, cubic_bspline, "
                           "lanczos, catmull_rom or multilabel",
                           c->who, o->method);
    if ((unsigned)o->mode >= NX_BORDER_COUNT)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: mode %d is unknown; expected constant, nearest, wrap, mirror or "
                           "reflect",
                           c->who, o->mode);
    if (m == NX_GEO_LANCZOS && (o->order < 1 || o->order > 8))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: lanczos order %lld is out of range; expected 1..8", c->who,
                           (long long)o->order);
    if (m == NX_GEO_MULTILABEL && (o->nlabels < 1 || o->nlabels > NX_GEO_MAX_LABELS))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: multilabel needs labels (1..%d values, e.g. labels=0,1,2); got %d",
                           c->who, NX_GEO_MAX_LABELS, o->nlabels);
    if (m != NX_GEO_MULTILABEL && o->nlabels > 0)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: labels given with method %s; expected labels only with method "
                           "multilabel",
                           c->who, m == NX_GEO_LINEAR ? "linear" : "other than multilabel");
    if (m == NX_GEO_MULTILABEL && c->dy)
        return nx_rt_error(c->ctx, NX_ERR_UNSUPPORTED,
                           "%s: method multilabel is not differentiable (an argmax of the "
                           "resampled indicators); expected a differentiable method",
                           c->who);
    if ((unsigned)o->driver > 2)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: driver %d is unknown; expected auto, sequential or fir", c->who,
                           o->driver);
    bool fir;
    return nx_geo_prefilter_fir(c, o, &fir);
}

nx_status nx_geo_prefilter_fir(const nx_op_args *c, const nx_geo_args *o, bool *fir)
{
    const char *variant = NULL;
    *fir = false;
    if ((unsigned)o->driver > 2)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: driver %d is unknown", c->who,
                           o->driver);
    nx_status st = nx_driver_resolve(c->ctx, "geometry.bspline_prefilter",
                                     driver_names[o->driver], &variant);
    if (st != NX_OK)
        return st;
    *fir = strcmp(variant, "fir") == 0;
    /* auto's fast variant is the parallel one where lines are few for the device (cuda); on the
     * host the recursion is both the canonical variant and the faster one (the spec's fast
     * variant per platform: parallel on the GPU, sequential on the CPU). */
    if (o->driver == 0 && c->backend != NX_BACKEND_CUDA)
        *fir = false;
    return NX_OK;
}

void nx_geo_key(nx_rt_cache_blob *b, const nx_op_args *c)
{
    bool fir = false;
    if (nx_geo_prefilter_fir(c, c->opts, &fir) == NX_OK)
        nx_rt_cache_blob_i64(b, "bspline_fir", fir);
}

/* ---- prefilter ------------------------------------------------------------------------------*/

#define POLE (-0.267949192431122706472553658494127633) /* sqrt(3) - 2 */
#define INIT_TAPS 40 /* |z|^40 < 1e-22: the mirror start's later terms are below f64 rounding */

static nx_node slice_axis(nx_graph *g, nx_node x, int axis, int64_t lo, int64_t hi)
{
    int64_t s[NX_MAX_DIMS] = {0}, start[NX_MAX_DIMS] = {0};
    int nd = nx_node_ndim(g, x);
    nx_node_shape(g, x, s);
    start[axis] = lo;
    s[axis] = hi;
    (void)nd;
    return nx_slice(g, x, start, s, NULL);
}

static nx_node prefilter_seq(nx_graph *g, nx_node x, int axis, int64_t n)
{
    nx_dtype dt = nx_node_dtype(g, x);
    int nd = nx_node_ndim(g, x);
    const double z = POLE;
    nx_node b = nx_mul(g, x, nx_scalar(g, dt, 6.0));
    /* scipy's _init_causal_mirror as weights of b[0..m) */
    int64_t m = n <= 2 * INIT_TAPS ? n : INIT_TAPS;
    double w[2 * INIT_TAPS] = {0};
    double zn1 = pow(z, (double)(n - 1)), den = 1.0 - zn1 * zn1, zi = z;
    w[0] = 1.0;
    if (n - 1 < m)
        w[n - 1] += zn1;
    for (int64_t i = 1; i < n - 1 && i < 2 * INIT_TAPS; i++) {
        if (i < m)
            w[i] += zi;
        if (n - 1 - i < m)
            w[n - 1 - i] += zi * zn1;
        zi *= z;
    }
    for (int64_t i = 0; i < m; i++)
        w[i] /= den;
    int64_t ws[NX_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        ws[d] = d == axis ? m : 1;
    nx_node wc;
    if (dt == NX_DTYPE_F64) {
        wc = nx_constant(g, dt, nd, ws, w);
    } else {
        float wf[2 * INIT_TAPS];
        for (int64_t i = 0; i < m; i++)
            wf[i] = (float)w[i];
        wc = nx_constant(g, dt, nd, ws, wf);
    }
    nx_node c0 = nx_reduce(g, nx_mul(g, slice_axis(g, b, axis, 0, m), wc), 1, &axis,
                           NX_MONOID_SUM, true);
    nx_node parts[2] = {c0, slice_axis(g, b, axis, 1, n)};
    nx_node cp = nx_scan_iir(g, nx_concat(g, 2, parts, axis), axis, false, 1, &z);
    nx_node last = slice_axis(g, cp, axis, n - 1, n), prev = slice_axis(g, cp, axis, n - 2, n - 1);
    nx_node cm = nx_mul(g, nx_add(g, nx_mul(g, prev, nx_scalar(g, dt, z)), last),
                        nx_scalar(g, dt, z / (z * z - 1.0)));
    nx_node q[2] = {nx_mul(g, slice_axis(g, cp, axis, 0, n - 1), nx_scalar(g, dt, -z)), cm};
    return nx_scan_iir(g, nx_concat(g, 2, q, axis), axis, true, 1, &z);
}

static nx_node prefilter_fir(nx_graph *g, nx_node x, int axis, int64_t n)
{
    nx_dtype dt = nx_node_dtype(g, x);
    int nd = nx_node_ndim(g, x);
    int64_t xs[NX_MAX_DIMS] = {0}, v[3] = {1, n, 1};
    nx_node_shape(g, x, xs);
    for (int d = 0; d < nd; d++) /* the line's axis between what comes before and after it */
        v[d < axis ? 0 : d > axis ? 2 : 1] *= d == axis ? 1 : xs[d];
    /* |z|^K below the dtype's epsilon times (1 - |z|) / (2 sqrt 3): the dropped tail of the
     * response sums to less than an ulp of the data's largest magnitude */
    int K = dt == NX_DTYPE_F64 ? 29 : 14, W = 2 * K + 1;
    int64_t lo[3] = {0, K, 0}, hi[3] = {0, K, 0}, win[3] = {1, W, 1}, hs[6] = {1, 1, 1, 1, W, 1};
    double h[2 * 29 + 1];
    float hf[2 * 29 + 1];
    for (int r = -K; r <= K; r++) {
        h[r + K] = sqrt(3.0) * pow(POLE, r < 0 ? -r : r);
        hf[r + K] = (float)h[r + K];
    }
    /* one window reduction per axis: y[i] = sum_r h[r] x_mirror[i + r] */
    nx_node p = nx_pad(g, nx_reshape(g, x, 3, v), lo, hi, NX_BORDER_MIRROR, 0.0);
    nx_node wv = nx_window(g, p, win, NULL, NULL);
    nx_node hc = nx_constant(g, dt, 6, hs, dt == NX_DTYPE_F64 ? (void *)h : (void *)hf);
    int axes[3] = {3, 4, 5};
    nx_node y = nx_reduce(g, nx_mul(g, wv, hc), 3, axes, NX_MONOID_SUM, false);
    return nx_reshape(g, y, nd, xs);
}

nx_node nx_geo_prefilter(nx_graph *g, nx_node x, int first, int nd, bool fir)
{
    int64_t s[NX_MAX_DIMS] = {0};
    nx_node_shape(g, x, s);
    for (int a = first; a < first + nd; a++) {
        if (s[a] < 2)
            continue; /* scipy leaves a line of one sample as it is */
        x = fir ? prefilter_fir(g, x, a, s[a]) : prefilter_seq(g, x, a, s[a]);
    }
    return x;
}

/* ---- taps -----------------------------------------------------------------------------------*/

static int taps_of(int m, int64_t order)
{
    switch (m) {
    case NX_GEO_NEAREST:
        return 1;
    case NX_GEO_LINEAR:
    case NX_GEO_MULTILABEL:
        return 2;
    case NX_GEO_LANCZOS:
        return (int)(2 * order);
    default:
        return 4;
    }
}

static int64_t offset_of(int m, int64_t order)
{
    switch (m) {
    case NX_GEO_CUBIC_BSPLINE:
    case NX_GEO_CATMULL_ROM:
        return -1;
    case NX_GEO_LANCZOS:
        return 1 - order;
    default:
        return 0;
    }
}

/* The position i folded into [0, n) by the border rule; constant mode: i itself (the gather clamps
 * it; the value is replaced by cval) and *inside = 0 <= i < n. */
static nx_node fold(nx_graph *g, nx_node i, int64_t n, nx_border mode, nx_node *inside)
{
    nx_dtype it = NX_DTYPE_I64;
    nx_node zero = nx_scalar(g, it, 0), nn = nx_scalar(g, it, (double)n);
    switch (mode) {
    case NX_BORDER_NEAREST:
        return nx_minimum(g, nx_maximum(g, i, zero), nx_scalar(g, it, (double)(n - 1)));
    case NX_BORDER_WRAP:
        return nx_mod(g, i, nn);
    case NX_BORDER_REFLECT: {
        nx_node r = nx_mod(g, i, nx_scalar(g, it, (double)(2 * n)));
        return nx_select(g, nx_lt(g, r, nn), r,
                         nx_sub(g, nx_scalar(g, it, (double)(2 * n - 1)), r));
    }
    case NX_BORDER_MIRROR: {
        /* period 2n - 2; n = 1 gives mod 0 = 0, the one sample */
        nx_node r = nx_mod(g, i, nx_scalar(g, it, (double)(2 * n - 2)));
        return nx_select(g, nx_lt(g, r, nn), r,
                         nx_sub(g, nx_scalar(g, it, (double)(2 * n - 2)), r));
    }
    default:
        *inside = nx_and(g, nx_ge(g, i, zero), nx_lt(g, i, nn));
        return i;
    }
}

/* sinc(d) sinc(d / a) = a sin(pi d) sin(pi d / a) / (pi d)^2, 1 at d = 0 (through a safe d so that
 * neither the value nor its gradient sees 0 / 0). */
static nx_node lanczos_kernel(nx_graph *g, nx_node d, int64_t a)
{
    nx_dtype dt = nx_node_dtype(g, d);
    nx_node one = nx_scalar(g, dt, 1.0);
    nx_node at0 = nx_eq(g, d, nx_scalar(g, dt, 0.0));
    nx_node ds = nx_select(g, at0, one, d);
    nx_node pd = nx_mul(g, ds, nx_scalar(g, dt, M_PI));
    nx_node num = nx_mul(g, nx_mul(g, nx_sin(g, pd), nx_sin(g, nx_div(g, pd, nx_scalar(g, dt,
                                                                                      (double)a)))),
                         nx_scalar(g, dt, (double)a));
    return nx_select(g, at0, one, nx_div(g, num, nx_mul(g, pd, pd)));
}

/* The weight of the tap at distance d = f + off' - k. */
static nx_node weight_of(nx_graph *g, int m, nx_node d, int64_t order)
{
    nx_dtype dt = nx_node_dtype(g, d);
#define C(v) nx_scalar(g, dt, (v))
    nx_node t = nx_abs(g, d);
    switch (m) {
    case NX_GEO_LINEAR:
    case NX_GEO_MULTILABEL:
        return nx_sub(g, C(1.0), t);
    case NX_GEO_CUBIC_BSPLINE: {
        nx_node t2 = nx_mul(g, t, t);
        nx_node in = nx_add(g, nx_sub(g, C(2.0 / 3.0), t2), nx_mul(g, nx_mul(g, t2, t), C(0.5)));
        nx_node u = nx_sub(g, C(2.0), t);
        nx_node out = nx_div(g, nx_mul(g, nx_mul(g, u, u), u), C(6.0));
        return nx_select(g, nx_lt(g, t, C(1.0)), in, out);
    }
    case NX_GEO_CATMULL_ROM: {
        nx_node t2 = nx_mul(g, t, t), t3 = nx_mul(g, t2, t);
        nx_node in = nx_add(g, nx_sub(g, nx_mul(g, t3, C(1.5)), nx_mul(g, t2, C(2.5))), C(1.0));
        nx_node out = nx_add(g, nx_sub(g, nx_add(g, nx_mul(g, t3, C(-0.5)), nx_mul(g, t2, C(2.5))),
                                       nx_mul(g, t, C(4.0))),
                             C(2.0));
        return nx_select(g, nx_lt(g, t, C(1.0)), in, out);
    }
    default:
        return lanczos_kernel(g, d, order);
    }
#undef C
}

#define UNROLL_MAX 64 /* taps per point written out one by one; more: a reduction over taps */

/* The sampler with its taps written out: per axis the T positions, folds and weights of each
 * point ([B, P]), then the sum over the T^nd combinations of weight times the gathered value. One
 * elementwise expression: the kernel reads each point's coordinates once and vectorises over the
 * points (a reduction over tap axes keeps the points' row of carries and sweeps it per tap). */
static nx_node sample_unrolled(nx_graph *g, nx_node img, nx_node coords, const nx_geo_args *o,
                               nx_node cval, nx_node *finite)
{
    int64_t is[NX_MAX_DIMS] = {0}, cs[NX_MAX_DIMS] = {0};
    int ind = nx_node_ndim(g, img);
    nx_node_shape(g, img, is);
    nx_node_shape(g, coords, cs);
    int nd = (int)cs[2];
    int64_t B = cs[0], P = cs[1], C = is[ind - 1];
    nx_dtype dt = nx_node_dtype(g, coords), it = NX_DTYPE_I64;
    int m = nx_geo_method_of(o->method);
    int T = taps_of(m, o->order);
    int64_t off = offset_of(m, o->order);
    nx_border mode = (nx_border)o->mode;
    int64_t stride[NX_GEO_SPATIAL_MAX], V = 1;
    for (int a = nd - 1; a >= 0; a--) {
        stride[a] = V;
        V *= is[1 + a];
    }
    int64_t bp[2] = {B, P}, bp1[3] = {B, P, 1};
    bool one = C == 1;
    nx_node zero = nx_scalar(g, dt, 0.0), fin_all = NX_NONE;
    nx_node jn[NX_GEO_SPATIAL_MAX][16], wn[NX_GEO_SPATIAL_MAX][16], inn[NX_GEO_SPATIAL_MAX][16];
    for (int a = 0; a < nd; a++) {
        int64_t start[3] = {0, 0, a}, stop[3] = {B, P, a + 1};
        nx_node x = nx_reshape(g, nx_slice(g, coords, start, stop, NULL), 2, bp);
        nx_node fin = nx_eq(g, nx_sub(g, x, x), zero);
        fin_all = fin_all == NX_NONE ? fin : nx_and(g, fin_all, fin);
        x = nx_select(g, fin, x, zero);
        x = nx_minimum(g, nx_maximum(g, x, nx_scalar(g, dt, -COORD_LIMIT)),
                       nx_scalar(g, dt, COORD_LIMIT));
        nx_node fl = nx_floor(g, m == NX_GEO_NEAREST ? nx_add(g, x, nx_scalar(g, dt, 0.5)) : x);
        nx_node base = nx_cast(g, fl, it), f = nx_sub(g, x, fl), sum = NX_NONE;
        for (int t = 0; t < T; t++) {
            nx_node i = off + t ? nx_add(g, base, nx_scalar(g, it, (double)(off + t))) : base;
            inn[a][t] = NX_NONE;
            jn[a][t] = fold(g, i, is[1 + a], mode, &inn[a][t]);
            if (stride[a] != 1)
                jn[a][t] = nx_mul(g, jn[a][t], nx_scalar(g, it, (double)stride[a]));
            wn[a][t] = NX_NONE;
            if (T > 1) {
                nx_node d = nx_sub(g, f, nx_scalar(g, dt, (double)(t + off)));
                wn[a][t] = weight_of(g, m, d, o->order);
                sum = sum == NX_NONE ? wn[a][t] : nx_add(g, sum, wn[a][t]);
            }
        }
        for (int t = 0; m == NX_GEO_LANCZOS && t < T; t++)
            wn[a][t] = nx_div(g, wn[a][t], sum);
    }
    nx_node boff = NX_NONE;
    if (B > 1) {
        int64_t bs[2] = {B, 1};
        boff = nx_mul(g, nx_iota(g, it, 2, bs, 0), nx_scalar(g, it, (double)V));
    }
    int64_t vs[2] = {B * V, C};
    nx_node src = nx_reshape(g, img, one ? 1 : 2, vs);
    nx_node cv = one ? nx_reshape(g, cval, 0, NULL) : cval;
    int64_t combos = 1;
    for (int a = 0; a < nd; a++)
        combos *= T;
    nx_node acc = NX_NONE;
    for (int64_t c = 0; c < combos; c++) {
        int tap[NX_GEO_SPATIAL_MAX];
        int64_t r = c;
        for (int a = nd - 1; a >= 0; a--) {
            tap[a] = (int)(r % T);
            r /= T;
        }
        nx_node flat = boff, w = NX_NONE, in = NX_NONE;
        for (int a = 0; a < nd; a++) {
            flat = flat == NX_NONE ? jn[a][tap[a]] : nx_add(g, flat, jn[a][tap[a]]);
            if (wn[a][tap[a]] != NX_NONE)
                w = w == NX_NONE ? wn[a][tap[a]] : nx_mul(g, w, wn[a][tap[a]]);
            if (inn[a][tap[a]] != NX_NONE)
                in = in == NX_NONE ? inn[a][tap[a]] : nx_and(g, in, inn[a][tap[a]]);
        }
        nx_node v = nx_gather(g, src, nx_broadcast(g, flat, 2, bp), 0);
        if (in != NX_NONE)
            v = nx_select(g, one ? in : nx_reshape(g, in, 3, bp1), v, cv);
        if (w != NX_NONE)
            v = nx_mul(g, v, one ? w : nx_reshape(g, w, 3, bp1));
        acc = acc == NX_NONE ? v : nx_add(g, acc, v);
    }
    *finite = one ? fin_all : nx_reshape(g, fin_all, 3, bp1);
    acc = nx_select(g, *finite, acc, nx_scalar(g, dt, NAN));
    int64_t os[3] = {B, P, C};
    return nx_reshape(g, acc, 3, os);
}

/* The sampled values [B, P, C]; *finite: all coordinates of the point finite ([B, P, 1, ..]). cval
 * broadcasts against [.., C] (a scalar, or one value per channel). */
static nx_node sample_core(nx_graph *g, nx_node img, nx_node coords, const nx_geo_args *o,
                           nx_node cval, nx_node *finite)
{
    {
        int64_t cs0[NX_MAX_DIMS] = {0}, combos = 1;
        nx_node_shape(g, coords, cs0);
        int mm = nx_geo_method_of(o->method);
        for (int a = 0; a < (int)cs0[2]; a++)
            combos *= taps_of(mm, o->order);
        if (combos <= UNROLL_MAX)
            return sample_unrolled(g, img, coords, o, cval, finite);
    }
    int64_t is[NX_MAX_DIMS] = {0}, cs[NX_MAX_DIMS] = {0};
    int ind = nx_node_ndim(g, img);
    nx_node_shape(g, img, is);
    nx_node_shape(g, coords, cs);
    int nd = (int)cs[2];
    int64_t B = cs[0], P = cs[1], C = is[ind - 1];
    nx_dtype dt = nx_node_dtype(g, coords);
    int m = nx_geo_method_of(o->method);
    int T = taps_of(m, o->order);
    int64_t off = offset_of(m, o->order);
    nx_border mode = (nx_border)o->mode;
    int64_t stride[NX_GEO_SPATIAL_MAX], V = 1;
    for (int a = nd - 1; a >= 0; a--) {
        stride[a] = V;
        V *= is[1 + a];
    }
    int tnd = 2 + nd;
    int64_t pt[NX_MAX_DIMS]; /* [B, P, 1, .., 1] */
    for (int d = 0; d < tnd; d++)
        pt[d] = d == 0 ? B : d == 1 ? P : 1;
    nx_node zero = nx_scalar(g, dt, 0.0);
    nx_node flat = NX_NONE, weight = NX_NONE, inside = NX_NONE, fin_all = NX_NONE;
    for (int a = 0; a < nd; a++) {
        int64_t start[3] = {0, 0, a}, stop[3] = {B, P, a + 1};
        nx_node x = nx_reshape(g, nx_slice(g, coords, start, stop, NULL), tnd, pt);
        nx_node fin = nx_eq(g, nx_sub(g, x, x), zero);
        fin_all = fin_all == NX_NONE ? fin : nx_and(g, fin_all, fin);
        x = nx_select(g, fin, x, zero);
        x = nx_minimum(g, nx_maximum(g, x, nx_scalar(g, dt, -COORD_LIMIT)),
                       nx_scalar(g, dt, COORD_LIMIT));
        nx_node fl = nx_floor(g, m == NX_GEO_NEAREST ? nx_add(g, x, nx_scalar(g, dt, 0.5)) : x);
        int64_t ts[NX_MAX_DIMS];
        memcpy(ts, pt, sizeof ts);
        ts[2 + a] = T;
        nx_node k = nx_iota(g, NX_DTYPE_I64, tnd, ts, 2 + a);
        nx_node i = nx_add(g, nx_cast(g, fl, NX_DTYPE_I64),
                           off ? nx_add(g, k, nx_scalar(g, NX_DTYPE_I64, (double)off)) : k);
        nx_node in = NX_NONE;
        nx_node j = fold(g, i, is[1 + a], mode, &in);
        if (in != NX_NONE)
            inside = inside == NX_NONE ? in : nx_and(g, inside, in);
        nx_node term = stride[a] == 1 ? j : nx_mul(g, j, nx_scalar(g, NX_DTYPE_I64,
                                                                   (double)stride[a]));
        flat = flat == NX_NONE ? term : nx_add(g, flat, term);
        if (T > 1) {
            /* distance from the tap: x - i = f - (k + off) */
            nx_node f = nx_sub(g, x, fl);
            nx_node kd = nx_cast(g, k, dt);
            nx_node d = nx_sub(g, nx_sub(g, f, kd), nx_scalar(g, dt, (double)off));
            nx_node w = weight_of(g, m, d, o->order);
            if (m == NX_GEO_LANCZOS) {
                int ax = 2 + a;
                w = nx_div(g, w, nx_reduce(g, w, 1, &ax, NX_MONOID_SUM, true));
            }
            weight = weight == NX_NONE ? w : nx_mul(g, weight, w);
        }
    }
    if (B > 1) {
        int64_t bs[NX_MAX_DIMS];
        for (int d = 0; d < tnd; d++)
            bs[d] = d == 0 ? B : 1;
        flat = nx_add(g, flat, nx_mul(g, nx_iota(g, NX_DTYPE_I64, tnd, bs, 0),
                                      nx_scalar(g, NX_DTYPE_I64, (double)V)));
    }
    int64_t fs[NX_MAX_DIMS] = {0}; /* [B, P, T, .., T] */
    for (int d = 0; d < tnd; d++)
        fs[d] = d == 0 ? B : d == 1 ? P : T;
    flat = nx_broadcast(g, flat, tnd, fs);
    bool one = C == 1;
    int64_t vs[2] = {B * V, C};
    nx_node src = nx_reshape(g, img, one ? 1 : 2, vs);
    nx_node vals = nx_gather(g, src, flat, 0); /* [B, P, T.., C] or [B, P, T..] */
    int64_t ex[NX_MAX_DIMS]; /* a tap tensor with the channel axis */
    memcpy(ex, fs, sizeof ex);
    ex[tnd] = 1;
    if (inside != NX_NONE) {
        nx_node cv = cval;
        if (!one) {
            inside = nx_reshape(g, nx_broadcast(g, inside, tnd, fs), tnd + 1, ex);
        } else {
            cv = nx_reshape(g, cval, 0, NULL);
        }
        vals = nx_select(g, inside, vals, cv);
    }
    if (weight != NX_NONE)
        vals = nx_mul(g, vals, one ? weight : nx_reshape(g, nx_broadcast(g, weight, tnd, fs),
                                                         tnd + 1, ex));
    /* a point with a non-finite coordinate is NaN; after the weights, so that its gradient is 0
     * (not 0 times a NaN weight) */
    int64_t fr[NX_MAX_DIMS]; /* [B, P, 1, .., 1] (and 1 for the channel) */
    for (int d = 0; d <= tnd; d++)
        fr[d] = d == 0 ? B : d == 1 ? P : 1;
    *finite = nx_reshape(g, fin_all, tnd + (one ? 0 : 1), fr);
    vals = nx_select(g, *finite, vals, nx_scalar(g, dt, NAN));
    int64_t os[3] = {B, P, C};
    if (T == 1)
        return nx_reshape(g, vals, 3, os);
    int axes[NX_GEO_SPATIAL_MAX];
    for (int a = 0; a < nd; a++)
        axes[a] = 2 + a;
    /* the points' axis innermost (a single channel folded away), and the reader of the reduction
     * is a reshape, never elementwise: fusion inlines a small reduction into a same-shaped
     * elementwise reader, which would nest the loops of chained samplings (the squarings of
     * integrate_velocity_field) */
    nx_node r = nx_reduce(g, vals, nd, axes, NX_MONOID_SUM, false);
    return nx_reshape(g, r, 3, os);
}

nx_node nx_geo_sample(nx_graph *g, nx_node img, nx_node coords, const nx_geo_args *o)
{
    nx_dtype dt = nx_node_dtype(g, coords);
    nx_node finite = NX_NONE;
    return sample_core(g, img, coords, o, nx_scalar(g, dt, o->cval), &finite);
}

/* multilabel: the indicators of each label (outside: of cval) sampled linearly, then the label of
 * the largest (the first on ties). */
static nx_node multilabel(nx_graph *g, nx_node img, nx_node coords, const nx_geo_args *o)
{
    nx_dtype dt = nx_node_dtype(g, img);
    int64_t s[NX_MAX_DIMS] = {0}, cs[NX_MAX_DIMS] = {0};
    int nd = nx_node_ndim(g, img);
    nx_node_shape(g, img, s);
    nx_node_shape(g, coords, cs);
    int64_t K = o->nlabels, C = s[nd - 1];
    double lab[NX_GEO_MAX_LABELS];
    float labf[NX_GEO_MAX_LABELS];
    double cv[NX_GEO_MAX_LABELS];
    float cvf[NX_GEO_MAX_LABELS];
    for (int64_t k = 0; k < K; k++) {
        lab[k] = o->labels[k];
        labf[k] = (float)o->labels[k];
        /* the comparison in the image's dtype, as the image's own values compare */
        cv[k] = dt == NX_DTYPE_F64 ? (double)(o->cval == lab[k])
                                   : (double)((float)o->cval == labf[k]);
        cvf[k] = (float)cv[k];
    }
    void *lp = dt == NX_DTYPE_F64 ? (void *)lab : (void *)labf;
    void *cp = dt == NX_DTYPE_F64 ? (void *)cv : (void *)cvf;
    int64_t ks[1] = {K};
    nx_node labels = nx_constant(g, dt, 1, ks, lp);
    int64_t xs[NX_MAX_DIMS];
    memcpy(xs, s, sizeof xs);
    xs[nd] = 1;
    nx_node ind = nx_cast(g, nx_eq(g, nx_reshape(g, img, nd + 1, xs), labels), dt);
    int64_t flat[NX_MAX_DIMS];
    memcpy(flat, s, sizeof flat);
    flat[nd - 1] = C * K;
    ind = nx_reshape(g, ind, nd, flat);
    int64_t cvs[1] = {K};
    nx_node cval = nx_constant(g, dt, 1, cvs, cp);
    int64_t ck[2] = {C, K}, ckf[1] = {C * K};
    cval = nx_reshape(g, nx_broadcast(g, cval, 2, ck), 1, ckf);
    nx_geo_args lin = *o;
    lin.method = NX_GEO_LINEAR;
    nx_node finite = NX_NONE;
    nx_node v = sample_core(g, ind, coords, &lin, cval, &finite); /* [B, P, C K] */
    int64_t v4[4] = {cs[0], cs[1], C, K};
    nx_node am = nx_reduce(g, nx_reshape(g, v, 4, v4), 1, (const int[]){3}, NX_MONOID_ARGMAX,
                           false);
    nx_node out = nx_gather(g, labels, am, 0); /* [B, P, C] */
    int64_t f3[3] = {cs[0], cs[1], 1};
    return nx_select(g, nx_reshape(g, finite, 3, f3), out, nx_scalar(g, dt, NAN));
}

nx_node nx_geo_resample_points(nx_graph *g, nx_node img, nx_node coords, const nx_geo_args *o,
                               bool fir)
{
    int64_t cs[NX_MAX_DIMS] = {0};
    nx_node_shape(g, coords, cs);
    int m = nx_geo_method_of(o->method);
    if (m == NX_GEO_MULTILABEL)
        return multilabel(g, img, coords, o);
    if (m == NX_GEO_CUBIC_BSPLINE)
        img = nx_geo_prefilter(g, img, 1, (int)cs[2], fir);
    return nx_geo_sample(g, img, coords, o);
}

/* ---- fields ---------------------------------------------------------------------------------*/

nx_node nx_geo_identity(nx_graph *g, nx_dtype dt, int nd, const int64_t *sp)
{
    int64_t s[NX_MAX_DIMS];
    memcpy(s, sp, (size_t)nd * sizeof *s);
    s[nd] = 1;
    nx_node axes[NX_GEO_SPATIAL_MAX];
    for (int a = 0; a < nd; a++)
        axes[a] = nx_iota(g, dt, nd + 1, s, a);
    return nx_concat(g, nd, axes, nd);
}

nx_node nx_geo_compose(nx_graph *g, nx_node outer, nx_node u, const nx_geo_args *o, bool fir)
{
    int64_t s[NX_MAX_DIMS] = {0};
    int r = nx_node_ndim(g, u);
    nx_node_shape(g, u, s);
    int nd = r - 1;
    int64_t P = 1;
    for (int a = 0; a < nd; a++)
        P *= s[a];
    nx_node pts = nx_add(g, nx_geo_identity(g, nx_node_dtype(g, u), nd, s), u);
    int64_t cs[3] = {1, P, nd}, is[NX_MAX_DIMS];
    is[0] = 1;
    memcpy(is + 1, s, (size_t)r * sizeof *s);
    nx_node v = nx_geo_resample_points(g, nx_reshape(g, outer, r + 1, is),
                                       nx_reshape(g, pts, 3, cs), o, fir);
    /* a kernel of its own: a fold over a unit axis read through a reshape is never inlined, so a
     * chain of compositions (the squarings) samples each step's stored field instead of
     * re-expanding every earlier step at each of its taps */
    int64_t c4[4] = {1, P, nd, 1};
    int unit = 3;
    v = nx_reduce(g, nx_reshape(g, v, 4, c4), 1, &unit, NX_MONOID_SUM, false);
    return nx_add(g, u, nx_reshape(g, v, r, s));
}

nx_status nx_geo_check_field(const nx_op_args *c, int input)
{
    nx_status st = nx_geo_check_float(c, input, 0);
    if (st != NX_OK)
        return st;
    const nx_tensor *t = c->in[input];
    int r = nx_tensor_ndim(t);
    const int64_t *s = nx_tensor_shape(t);
    if (r < 2 || r > NX_GEO_SPATIAL_MAX + 1 || s[r - 1] != r - 1)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: %s has %d dims with last extent %lld; expected a displacement "
                           "field [*spatial, ndim] with ndim = the spatial rank, 1..3",
                           c->who, c->info->inputs[input], r, r ? (long long)s[r - 1] : 0LL);
    if (nx_tensor_numel(t) == 0)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: %s is empty; expected every extent >= 1",
                           c->who, c->info->inputs[input]);
    return NX_OK;
}
