/* The recursive Gaussian of Young and van Vliet (Signal Processing 44, 1995): a causal and an
 * anti-causal third-order recursion whose cascade has the transfer function
 *   G(z) = B^2 / (D(z) D(1/z)),   D(z) = 1 - a1 z^-1 - a2 z^-2 - a3 z^-3,
 * with q(sigma), b0..b3 and B from the paper, run directly as that cascade on SCAN_IIR (order 3,
 * the coefficients a1..a3 as graph constants): per axis
 *   z = IIR_fwd(B xp)     v = IIR_bwd(z)     y = B v + start terms
 * over the padded line xp, both scans from zero states. The scale B rides in the loop kernel that
 * pads (and, after the first axis, also finishes the previous axis), and the start terms and the
 * crop in the loop kernel after the second scan: two scans and one loop kernel per axis, and the
 * gradient with respect to x comes from autodiff of SCAN_IIR (the opposite recursion).
 *
 * Boundary rule (documented in docs/smoothing.md): each line is extended by the FIR driver's radius
 * int(truncate sigma + 0.5) with the border mode, and beyond that by its end values: the result is
 * G applied to the padded line continued by its first sample to the left and its last to the
 * right, forever. Constant and nearest modes are therefore exact extensions; reflect, mirror and
 * wrap follow the mode for 4 sigma, which holds all but ~1e-4 of the filter's mass. A constant
 * image is returned unchanged (G(1) = 1).
 *
 * The starts (Triggs and Sdika, IEEE TSP 54, 2006, give the same matrix in closed form): the
 * causal recursion starts in the steady state of a constant xp[0] (every state xp[0]); its effect is
 * the homogeneous response hc[t] of unit states, times xp[0]. The anti-causal one starts where the
 * infinite right extension leaves it: with u = xp[n-1], its states y[n+i] = u + sum_j M[i][j]
 * (w[n-1-j] - u), M the response of the continued recursions to the last three causal outputs
 * (computed here by running both recursions in double until the poles have decayed). Every
 * start's effect on the output is linear in xp[0], xp[n-1] and z[n-1..n-3], with weights along the
 * line (F, U, E_j below) computed once per axis in double. */
#include <complex.h>
#include <math.h>
#include <string.h>

#include "gaussian.h"
#include "ir/ir.h"
#include "nitrix-graph.h"

/* a1..a3 = b1..b3 / b0 and B of the 1995 paper (eqs. 8c, 9). */
static void yvv_coefficients(double sigma, double a[3], double *b)
{
    double q = sigma >= 2.5 ? 0.98711 * sigma - 0.96330
                            : 3.97156 - 4.14554 * sqrt(1.0 - 0.26891 * sigma);
    double q2 = q * q, q3 = q2 * q;
    double b0 = 1.57825 + 2.44413 * q + 1.4281 * q2 + 0.422205 * q3;
    double b1 = 2.44413 * q + 2.85619 * q2 + 1.26661 * q3;
    double b2 = -(1.4281 * q2 + 1.26661 * q3);
    double b3 = 0.422205 * q3;
    a[0] = b1 / b0;
    a[1] = b2 / b0;
    a[2] = b3 / b0;
    *b = 1.0 - (a[0] + a[1] + a[2]);
}

/* The real root of z^3 - a1 z^2 - a2 z - a3 in (0, 1): the cubic is -a3 < 0 at 0 and B > 0 at 1. */
static double real_pole(const double a[3])
{
    double lo = 0.0, hi = 1.0;
    for (int it = 0; it < 200 && hi - lo > 1e-17; it++) {
        double m = 0.5 * (lo + hi);
        double f = ((m - a[0]) * m - a[1]) * m - a[2];
        if (f < 0)
            lo = m;
        else
            hi = m;
    }
    double z = 0.5 * (lo + hi);
    for (int it = 0; it < 3; it++) {
        double f = ((z - a[0]) * z - a[1]) * z - a[2];
        double df = (3.0 * z - 2.0 * a[0]) * z - a[1];
        if (df != 0)
            z -= f / df;
    }
    return z;
}

bool nx_gauss_yvv_poles(double sigma, double p_re[3], double p_im[3], double a_re[3],
                        double a_im[3])
{
    if (!(sigma >= 0.5) || !isfinite(sigma))
        return false;
    double a[3], b;
    yvv_coefficients(sigma, a, &b);
    double p1 = real_pole(a);
    /* deflate: z^3 - a1 z^2 - a2 z - a3 = (z - p1)(z^2 + c1 z + c0) */
    double c1 = p1 - a[0], c0 = p1 * c1 - a[1];
    double disc = c0 - 0.25 * c1 * c1;
    if (!(disc > 0))
        return false;
    double complex p[3] = {p1, -0.5 * c1 + I * sqrt(disc), -0.5 * c1 - I * sqrt(disc)};
    for (int k = 0; k < 3; k++) {
        double complex den = 1.0;
        for (int j = 0; j < 3; j++) {
            if (j != k)
                den *= 1.0 - p[j] / p[k];
            den *= 1.0 - p[j] * p[k];
        }
        double complex res = b * b / den;
        p_re[k] = creal(p[k]);
        p_im[k] = cimag(p[k]);
        a_re[k] = creal(res);
        a_im[k] = cimag(res);
    }
    return true;
}

/* Per-sample weights of the start terms over the cropped line (extent m = n - 2 pad), in units of
 * the scans' input xs = B xp:
 *   y[t] = B v[t] + F[t] xs[0] + U[t] xs[n-1] + sum_j E_j[t] z[n-1-j]
 * E_j is dropped (folded into F) where n - 1 - j < 0: there w[n-1-j] is a start state, xp[0]. */
typedef struct yvv_starts {
    int64_t n, m;
    double *f, *u, *e[3]; /* m each, in one block starting at f */
} yvv_starts;

static void starts_free(nx_ctx *ctx, yvv_starts *w)
{
    nx_rt_free(ctx, w->f, 5 * (size_t)w->m * sizeof(double));
    w->f = w->u = w->e[0] = w->e[1] = w->e[2] = NULL;
}

/* Samples until the slowest pole has decayed below 1e-20 of a unit start. */
static int64_t decay_length(const double a[3])
{
    double p1 = real_pole(a);
    double c1 = p1 - a[0], c0 = p1 * c1 - a[1];
    double r = sqrt(c0 > 0 ? c0 : 0), most = p1 > r ? p1 : r;
    if (!(most < 1.0))
        return 1 << 20;
    double len = ceil(log(1e-20) / log(most)) + 8.0;
    return len < (double)(1 << 20) ? (int64_t)len : 1 << 20;
}

/* M[i][j]: the anti-causal state y[n+i] per unit deviation of w[n-1-j] from the right extension's
 * steady state. The deviation continues through the causal recursion with zero input, the
 * anti-causal one runs back over it from beyond where it has decayed. */
static bool triggs_matrix(nx_ctx *ctx, const double a[3], double b, double m[3][3])
{
    int64_t len = decay_length(a);
    double *dw = nx_rt_calloc(ctx, (size_t)len + 6, sizeof(double));
    if (!dw)
        return false;
    for (int j = 0; j < 3; j++) {
        memset(dw, 0, ((size_t)len + 6) * sizeof(double));
        dw[2 - j] = 1.0; /* dw[0..2] = w[n-3..n-1] */
        for (int64_t t = 3; t < len + 3; t++)
            dw[t] = a[0] * dw[t - 1] + a[1] * dw[t - 2] + a[2] * dw[t - 3];
        double y1 = 0, y2 = 0, y3 = 0; /* y[t+1..t+3] */
        for (int64_t t = len + 2; t >= 3; t--) {
            double y = b * dw[t] + a[0] * y1 + a[1] * y2 + a[2] * y3;
            y3 = y2;
            y2 = y1;
            y1 = y;
            if (t <= 5)
                m[t - 3][j] = y;
        }
    }
    nx_rt_free(ctx, dw, ((size_t)len + 6) * sizeof(double));
    return true;
}

/* The homogeneous responses over the padded line: hc (causal, unit states before t = 0), hc2
 * (the zero-state anti-causal recursion over hc) and ha_i (anti-causal, unit state y[n+i]). */
static bool starts_make(nx_ctx *ctx, int64_t n, int64_t pad, const double a[3], double b,
                        yvv_starts *w)
{
    memset(w, 0, sizeof *w);
    w->n = n;
    w->m = n - 2 * pad;
    double mat[3][3];
    if (!triggs_matrix(ctx, a, b, mat))
        return false;
    double *tmp = nx_rt_calloc(ctx, (size_t)n * 5, sizeof(double));
    if (!tmp)
        return false;
    w->f = nx_rt_calloc(ctx, 5 * (size_t)w->m, sizeof(double));
    if (!w->f) {
        nx_rt_free(ctx, tmp, (size_t)n * 5 * sizeof(double));
        return false;
    }
    w->u = w->f + w->m;
    for (int j = 0; j < 3; j++)
        w->e[j] = w->f + (2 + j) * w->m;
    double *hc = tmp, *hc2 = tmp + n, *ha[3] = {tmp + 2 * n, tmp + 3 * n, tmp + 4 * n};
    double s1 = 1, s2 = 1, s3 = 1;
    for (int64_t t = 0; t < n; t++) {
        hc[t] = a[0] * s1 + a[1] * s2 + a[2] * s3;
        s3 = s2;
        s2 = s1;
        s1 = hc[t];
    }
    s1 = s2 = s3 = 0;
    for (int64_t t = n - 1; t >= 0; t--) {
        hc2[t] = hc[t] + a[0] * s1 + a[1] * s2 + a[2] * s3;
        s3 = s2;
        s2 = s1;
        s1 = hc2[t];
    }
    for (int i = 0; i < 3; i++) {
        double st[3] = {0, 0, 0}; /* y[t+1..t+3] */
        st[i] = 1.0;
        for (int64_t t = n - 1; t >= 0; t--) {
            ha[i][t] = a[0] * st[0] + a[1] * st[1] + a[2] * st[2];
            st[2] = st[1];
            st[1] = st[0];
            st[0] = ha[i][t];
        }
    }
    for (int64_t k = 0; k < w->m; k++) {
        int64_t t = k + pad;
        double f = b * hc2[t], u = 0;
        for (int i = 0; i < 3; i++) {
            double rowsum = 0;
            for (int j = 0; j < 3; j++) {
                int64_t e = n - 1 - j;
                rowsum += mat[i][j];
                if (e >= 0) {
                    f += mat[i][j] * hc[e] * ha[i][t];
                    w->e[j][k] += mat[i][j] * ha[i][t];
                } else {
                    f += mat[i][j] * ha[i][t];
                }
            }
            u += (1.0 - rowsum) * ha[i][t];
        }
        w->f[k] = f / b;
        w->u[k] = u / b;
    }
    nx_rt_free(ctx, tmp, (size_t)n * 5 * sizeof(double));
    return true;
}

/* A [n] f64 array as a constant of dtype dt (rounded here, once, so kernels load dt values)
 * broadcastable along axis a of an nd-dim value. */
static nx_node along(nx_graph *g, const double *v, int64_t n, int nd, int a, nx_dtype dt)
{
    int64_t shape[NX_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        shape[d] = d == a ? n : 1;
    return nx_gauss_constant(g, dt, n, v, nd, shape);
}

/* Samples [from, to) of x along axis a. */
static nx_node span(nx_graph *g, nx_node x, int a, int64_t from, int64_t to)
{
    int64_t start[NX_MAX_DIMS] = {0}, stop[NX_MAX_DIMS];
    if (!nx_node_shape(g, x, stop))
        return NX_NONE;
    start[a] = from;
    stop[a] = to;
    return nx_slice(g, x, start, stop, NULL);
}

/* Samples 0 and n - 1 of x along axis a (n >= 2): one slice with step n - 1. */
static nx_node line_ends(nx_graph *g, nx_node x, int a, int64_t n)
{
    int64_t start[NX_MAX_DIMS] = {0}, stop[NX_MAX_DIMS], step[NX_MAX_DIMS];
    int nd = nx_node_ndim(g, x);
    if (!nx_node_shape(g, x, stop))
        return NX_NONE;
    for (int d = 0; d < nd; d++)
        step[d] = d == a ? n - 1 : 1;
    return nx_slice(g, x, start, stop, step);
}

/* y over the cropped line from the padded line xp (the scans' input is xs = B xp), the causal
 * output z and the anti-causal v. The start terms read xs's two end samples as B times xp's, not
 * as slices of xs: xs then has one reader, the causal scan, and fusion computes it inside that
 * scan's loads where the backend can (codegen/prologue.c) instead of writing it out; the two ends
 * are one slice, which fusion makes one small kernel (passes/fuse.c). */
static nx_node finish(nx_graph *g, int a, int64_t pad, const yvv_starts *w, double b, nx_node xp,
                      nx_node z, nx_node v)
{
    int nd = nx_node_ndim(g, xp);
    nx_dtype dt = nx_node_dtype(g, xp);
    int64_t n = w->n;
    nx_node bs = nx_scalar(g, dt, b);
    nx_node y = nx_mul(g, span(g, v, a, pad, pad + w->m), bs);
    nx_node ends = n >= 2 ? line_ends(g, xp, a, n) : xp;
    nx_node x0 = nx_mul(g, span(g, ends, a, 0, 1), bs);
    nx_node xn = nx_mul(g, span(g, ends, a, n >= 2 ? 1 : 0, n >= 2 ? 2 : 1), bs);
    y = nx_add(g, y, nx_mul(g, x0, along(g, w->f, w->m, nd, a, dt)));
    y = nx_add(g, y, nx_mul(g, xn, along(g, w->u, w->m, nd, a, dt)));
    for (int j = 0; j < 3 && n - 1 - j >= 0; j++)
        y = nx_add(g, y, nx_mul(g, span(g, z, a, n - 1 - j, n - j),
                                along(g, w->e[j], w->m, nd, a, dt)));
    return y;
}

nx_node nx_gauss_recursive_pass(nx_graph *g, nx_node x, int a, double sigma, int64_t pad,
                                nx_pad_mode mode, double cval)
{
    if (!(sigma >= 0.5) || !isfinite(sigma))
        return nx_ir_graph_failf(g, NX_ERR_INTERNAL,
                                 "gaussian_filter: no recursive decomposition for sigma %g", sigma);
    int64_t shape[NX_MAX_DIMS], lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0};
    if (!nx_node_shape(g, x, shape))
        return NX_NONE;
    double coef[3], b;
    yvv_coefficients(sigma, coef, &b);
    lo[a] = hi[a] = pad;
    nx_node xp = pad > 0 ? nx_pad(g, x, lo, hi, mode, cval) : x;
    int64_t n = shape[a] + 2 * pad;
    yvv_starts w;
    if (!starts_make(nx_graph_ctx(g), n, pad, coef, b, &w))
        return nx_ir_graph_failf(g, NX_ERR_NOMEM, "gaussian_filter: out of memory (%lld samples)",
                                 (long long)n);
    nx_node xs = nx_mul(g, xp, nx_scalar(g, nx_node_dtype(g, x), b));
    nx_node z = nx_scan_iir(g, xs, a, false, 3, coef);
    nx_node v = nx_scan_iir(g, z, a, true, 3, coef);
    nx_node y = finish(g, a, pad, &w, b, xp, z, v);
    starts_free(nx_graph_ctx(g), &w);
    return y;
}
