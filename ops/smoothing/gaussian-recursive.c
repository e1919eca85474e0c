/* The recursive Gaussian of Young and van Vliet (Signal Processing 44, 1995): a causal and an
 * anti-causal third-order recursion whose cascade has the transfer function
 *   G(z) = B^2 / (D(z) D(1/z)),   D(z) = 1 - a1 z^-1 - a2 z^-2 - a3 z^-3,
 * with q(sigma), b0..b3 and B from the paper. The IR's scan is first order (y_t = a y_{t-1} + b_t),
 * so G is evaluated in partial fractions instead of as a cascade: D has a real pole p1 and a
 * complex pair p, conj(p) (|p| = r, arg p = theta), and the two-sided impulse response is
 *   h[n] = A1 p1^|n| + 2 Re(A2 p^|n|),
 * so y = sum_k A_k (C_k x + R_k x - x) with C_k the causal and R_k the anti-causal first-order
 * recursion of pole p_k. The complex recursion z_t = p z_{t-1} + x_t is run as two real ones by
 * modulation: u_t = z_t e^{-i t theta} obeys u_t = r u_{t-1} + x_t e^{-i t theta}, whose real and
 * imaginary parts are real scans with coefficient r; z_t = u_t e^{i t theta} is elementwise. Six
 * real scans per axis (three each way), each O(N), over the padded line and its two modulated
 * copies (shared by both directions), and the gradient with respect to x comes from autodiff of
 * SCAN_LINEAR.
 *
 * Boundary rule (documented in docs/smoothing.md): each line is extended by the FIR driver's radius
 * int(truncate sigma + 0.5) with the border mode, and beyond that by its end values: every
 * recursion starts in the steady state of a constant input equal to the padded line's first (last)
 * sample (a start that decays through the scans, so it is added to their combined output, see
 * line_starts). Constant and nearest modes are therefore exact extensions; reflect, mirror and wrap
 * follow the mode for 4 sigma, which holds all but ~1e-4 of the filter's mass. A constant image
 * is returned unchanged (G(1) = 1). */
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

/* Per-sample constants along the padded line, as [n] f64 arrays: the modulations, the combination
 * weights of the complex section, and the steady-state start of each direction. */
typedef struct yvv_line {
    int64_t n;
    double *cos_t, *sin_t; /* cos(t theta), sin(t theta) */
    double *pc, *qc;       /* Re, Im of A2 e^{+i t theta}: causal output weights */
    double *pa, *qa;       /* Re, Im of A2 e^{-i t theta}: anti-causal output weights */
    double *start_c, *start_a; /* the start's share of each output, per unit of the end sample */
} yvv_line;

#define YVV_ARRAYS 8

static void line_free(nx_ctx *ctx, yvv_line *l)
{
    double **arr[YVV_ARRAYS] = {&l->cos_t, &l->sin_t, &l->pc, &l->qc,
                                &l->pa,    &l->qa,    &l->start_c, &l->start_a};
    for (int i = 0; i < YVV_ARRAYS; i++) {
        nx_rt_free(ctx, *arr[i], (size_t)l->n * sizeof(double));
        *arr[i] = NULL;
    }
}

/* The poles and residues of one axis, and the steady state of a constant input before each
 * direction's first sample. */
typedef struct yvv_poles {
    double p1, r, theta, a1;
    double complex a2;
} yvv_poles;

/* Each direction starts in the steady state of a constant input v equal to its first sample (in
 * scan order): the real section's state before it is v / (1 - p1), the modulated pair's
 * v e^{i theta} / (1 - r e^{i theta}) (causal) or v e^{i n theta} / (1 - r e^{i theta})
 * (anti-causal). A state s decays as pole^k over the k-th sample of the scan, so instead of
 * entering the scans it is added to the output: start[t] = A1 p1^(k+1) / (1 - p1) +
 * 2 Re(weight_t r^(k+1) u0) with k = t (causal) or n - 1 - t (anti-causal). */
static void line_starts(const yvv_poles *q, yvv_line *l)
{
    double complex e = cexp(I * q->theta);
    for (int dir = 0; dir < 2; dir++) {
        double complex u0 = (dir ? cexp(I * q->theta * (double)l->n) : e) / (1.0 - q->r * e);
        double *out = dir ? l->start_a : l->start_c;
        const double *pw = dir ? l->pa : l->pc, *qw = dir ? l->qa : l->qc;
        for (int64_t t = 0; t < l->n; t++) {
            double k = (double)(dir ? l->n - 1 - t : t);
            double s1 = pow(q->p1, k + 1.0) / (1.0 - q->p1);
            double complex u = pow(q->r, k + 1.0) * u0;
            out[t] = q->a1 * s1 + 2.0 * (pw[t] * creal(u) - qw[t] * cimag(u));
        }
    }
}

static bool line_make(nx_ctx *ctx, int64_t n, const yvv_poles *q, yvv_line *l)
{
    memset(l, 0, sizeof *l);
    l->n = n;
    double **arr[YVV_ARRAYS] = {&l->cos_t, &l->sin_t, &l->pc, &l->qc,
                                &l->pa,    &l->qa,    &l->start_c, &l->start_a};
    for (int i = 0; i < YVV_ARRAYS; i++) {
        *arr[i] = nx_rt_calloc(ctx, (size_t)n, sizeof(double));
        if (!*arr[i]) {
            line_free(ctx, l);
            return false;
        }
    }
    double complex a2 = q->a2;
    for (int64_t t = 0; t < n; t++) {
        double c = cos((double)t * q->theta), s = sin((double)t * q->theta);
        l->cos_t[t] = c;
        l->sin_t[t] = s;
        l->pc[t] = creal(a2) * c - cimag(a2) * s;
        l->qc[t] = creal(a2) * s + cimag(a2) * c;
        l->pa[t] = creal(a2) * c + cimag(a2) * s;
        l->qa[t] = cimag(a2) * c - creal(a2) * s;
    }
    line_starts(q, l);
    return true;
}

/* A [n] f64 array as a node of dtype dt broadcastable along axis a of an nd-dim value. */
static nx_node along(nx_graph *g, const double *v, int64_t n, int nd, int a, nx_dtype dt)
{
    int64_t shape[NX_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        shape[d] = d == a ? n : 1;
    return nx_cast(g, nx_reshape(g, nx_constant(g, NX_DTYPE_F64, 1, &n, v), nd, shape), dt);
}

/* Sample 0 (or n - 1) of x along axis a, kept as extent 1. */
static nx_node end_sample(nx_graph *g, nx_node x, int a, bool last)
{
    int64_t start[NX_MAX_DIMS] = {0}, stop[NX_MAX_DIMS];
    if (!nx_node_shape(g, x, stop))
        return NX_NONE;
    start[a] = last ? stop[a] - 1 : 0;
    stop[a] = start[a] + 1;
    return nx_slice(g, x, start, stop, NULL);
}

typedef struct yvv_ctx {
    nx_graph *g;
    int nd, a;
    nx_dtype dt;
    const yvv_line *l;
} yvv_ctx;

static nx_node k_along(const yvv_ctx *c, const double *v)
{
    return along(c->g, v, c->l->n, c->nd, c->a, c->dt);
}

static nx_node k_scalar(const yvv_ctx *c, double v)
{
    return nx_scalar(c->g, c->dt, v);
}

/* The three scans of each direction read two modulated copies of xp shared by both directions
 * (the anti-causal imaginary input is +x sin, the causal one -x sin: a scan of -b is exactly the
 * negated scan of b) and xp itself:
 *   y = A1 (S1c + S1a) + 2 (pc Rc + qc Ic) + 2 (pa Ra - qa Ia) + start_c xp[0] + start_a xp[n-1]
 *       - (A1 + 2 Re A2) xp
 * where S1 scans xp with p1, R scans xp cos and I scans xp sin with r, c causal, a anti-causal. */
static nx_node combine(const yvv_ctx *c, nx_node xp, const yvv_poles *q)
{
    nx_graph *g = c->g;
    const yvv_line *l = c->l;
    nx_node p1 = k_scalar(c, q->p1), r = k_scalar(c, q->r);
    nx_node bc = nx_mul(g, xp, k_along(c, l->cos_t)), bs = nx_mul(g, xp, k_along(c, l->sin_t));
    nx_node s1 = nx_add(g, nx_scan_linear(g, p1, xp, c->a, false),
                        nx_scan_linear(g, p1, xp, c->a, true));
    nx_node causal = nx_add(g, nx_mul(g, k_along(c, l->pc), nx_scan_linear(g, r, bc, c->a, false)),
                            nx_mul(g, k_along(c, l->qc), nx_scan_linear(g, r, bs, c->a, false)));
    nx_node anti = nx_sub(g, nx_mul(g, k_along(c, l->pa), nx_scan_linear(g, r, bc, c->a, true)),
                          nx_mul(g, k_along(c, l->qa), nx_scan_linear(g, r, bs, c->a, true)));
    nx_node pair = nx_mul(g, nx_add(g, causal, anti), k_scalar(c, 2.0));
    nx_node starts = nx_add(g, nx_mul(g, end_sample(g, xp, c->a, false), k_along(c, l->start_c)),
                            nx_mul(g, end_sample(g, xp, c->a, true), k_along(c, l->start_a)));
    double total = q->a1 + 2.0 * creal(q->a2);
    nx_node y = nx_add(g, nx_add(g, nx_mul(g, s1, k_scalar(c, q->a1)), pair), starts);
    return nx_sub(g, y, nx_mul(g, xp, k_scalar(c, total)));
}

nx_node nx_gauss_recursive_pass(nx_graph *g, nx_node x, int a, double sigma, int64_t pad,
                                nx_pad_mode mode, double cval)
{
    double pr[3], pi[3], ar[3], ai[3];
    if (!nx_gauss_yvv_poles(sigma, pr, pi, ar, ai))
        return nx_ir_graph_failf(g, NX_ERR_INTERNAL,
                                 "gaussian_filter: no recursive decomposition for sigma %g", sigma);
    int nd = nx_node_ndim(g, x);
    int64_t shape[NX_MAX_DIMS], lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0};
    if (!nx_node_shape(g, x, shape))
        return NX_NONE;
    lo[a] = hi[a] = pad;
    nx_node xp = pad > 0 ? nx_pad(g, x, lo, hi, mode, cval) : x;
    int64_t n = shape[a] + 2 * pad;
    yvv_poles q = {.p1 = pr[0], .r = hypot(pr[1], pi[1]), .theta = atan2(pi[1], pr[1]),
                   .a1 = ar[0], .a2 = ar[1] + I * ai[1]};
    yvv_line l;
    if (!line_make(nx_graph_ctx(g), n, &q, &l))
        return nx_ir_graph_failf(g, NX_ERR_NOMEM, "gaussian_filter: out of memory (%lld samples)",
                                 (long long)n);
    yvv_ctx c = {.g = g, .nd = nd, .a = a, .dt = nx_node_dtype(g, x), .l = &l};
    nx_node y = combine(&c, xp, &q);
    line_free(nx_graph_ctx(g), &l);
    if (pad == 0 || y == NX_NONE)
        return y;
    int64_t start[NX_MAX_DIMS] = {0};
    start[a] = pad;
    shape[a] += pad;
    return nx_slice(g, y, start, shape, NULL);
}
