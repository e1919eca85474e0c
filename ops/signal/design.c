/* The Butterworth design on the host (signal.h): scipy.signal.butter(output='sos') of scipy 1.10,
 * step for step: buttap -> lp2lp/lp2hp/lp2bp/lp2bs (zpk) -> bilinear_zpk -> zpk2sos (pairing
 * 'nearest'), in double, with NumPy's complex arithmetic (products (ar br - ai bi, ar bi + ai br),
 * Smith's quotient as numpy's loops compute it, csqrt), so that the sections come out in scipy's
 * order and agree with it to rounding (tests: the golden cases, 1e-12). */
#include <complex.h>
#include <math.h>
#include <string.h>

#include "ops/signal/signal.h"

#define MAXR (4 * NX_SIG_MAX_ORDER + 4)

typedef struct cplx {
    double re, im;
} cplx;

typedef struct zpk {
    cplx z[MAXR], p[MAXR];
    int nz, np;
    double k;
} zpk;

static cplx mk(double re, double im)
{
    return (cplx){re, im};
}

static cplx cmul(cplx a, cplx b)
{
    return mk(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
}

/* numpy's complex division (Smith's method as its loops write it). */
static cplx cdiv(cplx a, cplx b)
{
    double br = fabs(b.re), bi = fabs(b.im);
    if (br >= bi) {
        double rat = b.im / b.re, scl = 1.0 / (b.re + b.im * rat);
        return mk((a.re + a.im * rat) * scl, (a.im - a.re * rat) * scl);
    }
    double rat = b.re / b.im, scl = 1.0 / (b.im + b.re * rat);
    return mk((a.re * rat + a.im) * scl, (a.im * rat - a.re) * scl);
}

static cplx cadd(cplx a, cplx b)
{
    return mk(a.re + b.re, a.im + b.im);
}

static cplx csub(cplx a, cplx b)
{
    return mk(a.re - b.re, a.im - b.im);
}

static cplx csq_root(cplx a)
{
    /* A complex has the layout of double[2] (C17 6.2.5p13); CMPLX is not in every libc/compiler
     * pair, and a.re + a.im * I loses the sign of a zero imaginary part (the branch cut). */
    double parts[2] = {a.re, a.im};
    double complex z;
    memcpy(&z, parts, sizeof z);
    double complex r = csqrt(z);
    return mk(creal(r), cimag(r));
}

static double cabs_(cplx a)
{
    return hypot(a.re, a.im);
}

/* prod(v) left to right, starting from 1 (numpy's multiply.reduce). */
static cplx cprod(const cplx *v, int n)
{
    cplx r = mk(1, 0);
    for (int i = 0; i < n; i++)
        r = i == 0 ? v[0] : cmul(r, v[i]);
    return r;
}

static void buttap(int n, zpk *f)
{
    f->nz = 0;
    f->np = n;
    f->k = 1;
    double inv = 1.0 / (double)(2 * n);
    for (int i = 0; i < n; i++) {
        double m = (double)(-n + 1 + 2 * i);
        double th = (M_PI * m) * inv;
        f->p[i] = mk(-cos(th), -sin(th));
    }
}

static void lp2lp(zpk *f, double wo)
{
    int degree = f->np - f->nz;
    for (int i = 0; i < f->nz; i++)
        f->z[i] = cmul(mk(wo, 0), f->z[i]);
    for (int i = 0; i < f->np; i++)
        f->p[i] = cmul(mk(wo, 0), f->p[i]);
    f->k = f->k * pow(wo, degree);
}

/* k * real(prod(-z) / prod(-p)) */
static double gain_ratio(const zpk *f)
{
    cplx nz[MAXR], np_[MAXR];
    for (int i = 0; i < f->nz; i++)
        nz[i] = mk(-f->z[i].re, -f->z[i].im);
    for (int i = 0; i < f->np; i++)
        np_[i] = mk(-f->p[i].re, -f->p[i].im);
    return cdiv(cprod(nz, f->nz), cprod(np_, f->np)).re;
}

static void lp2hp(zpk *f, double wo)
{
    int degree = f->np - f->nz;
    double k = f->k * gain_ratio(f);
    for (int i = 0; i < f->nz; i++)
        f->z[i] = cdiv(mk(wo, 0), f->z[i]);
    for (int i = 0; i < f->np; i++)
        f->p[i] = cdiv(mk(wo, 0), f->p[i]);
    for (int i = 0; i < degree; i++)
        f->z[f->nz++] = mk(0, 0);
    f->k = k;
}

/* The roots v +- sqrt(v^2 - wo^2) of each v, the + ones first (lp2bp / lp2bs). */
static int split_roots(const cplx *v, int n, double wo, cplx *out)
{
    for (int i = 0; i < n; i++) {
        cplx s = csq_root(csub(cmul(v[i], v[i]), mk(wo * wo, 0)));
        out[i] = cadd(v[i], s);
        out[n + i] = csub(v[i], s);
    }
    return 2 * n;
}

static void lp2bp(zpk *f, double wo, double bw)
{
    int degree = f->np - f->nz;
    cplx zl[MAXR] = {{0}}, pl[MAXR] = {{0}};
    for (int i = 0; i < f->nz; i++)
        zl[i] = cdiv(cmul(f->z[i], mk(bw, 0)), mk(2, 0));
    for (int i = 0; i < f->np; i++)
        pl[i] = cdiv(cmul(f->p[i], mk(bw, 0)), mk(2, 0));
    f->nz = split_roots(zl, f->nz, wo, f->z);
    f->np = split_roots(pl, f->np, wo, f->p);
    for (int i = 0; i < degree; i++)
        f->z[f->nz++] = mk(0, 0);
    f->k = f->k * pow(bw, degree);
}

static void lp2bs(zpk *f, double wo, double bw)
{
    int degree = f->np - f->nz;
    double k = f->k * gain_ratio(f);
    cplx zh[MAXR] = {{0}}, ph[MAXR] = {{0}};
    for (int i = 0; i < f->nz; i++)
        zh[i] = cdiv(mk(bw / 2, 0), f->z[i]);
    for (int i = 0; i < f->np; i++)
        ph[i] = cdiv(mk(bw / 2, 0), f->p[i]);
    f->nz = split_roots(zh, f->nz, wo, f->z);
    f->np = split_roots(ph, f->np, wo, f->p);
    for (int i = 0; i < degree; i++)
        f->z[f->nz++] = mk(0, wo);
    for (int i = 0; i < degree; i++)
        f->z[f->nz++] = mk(-0.0, -wo);
    f->k = k;
}

static void bilinear(zpk *f, double fs)
{
    int degree = f->np - f->nz;
    double fs2 = 2.0 * fs;
    cplx num[MAXR], den[MAXR];
    for (int i = 0; i < f->nz; i++)
        num[i] = csub(mk(fs2, 0), f->z[i]);
    for (int i = 0; i < f->np; i++)
        den[i] = csub(mk(fs2, 0), f->p[i]);
    double k = f->k * cdiv(cprod(num, f->nz), cprod(den, f->np)).re;
    for (int i = 0; i < f->nz; i++)
        f->z[i] = cdiv(cadd(mk(fs2, 0), f->z[i]), num[i]);
    for (int i = 0; i < f->np; i++)
        f->p[i] = cdiv(cadd(mk(fs2, 0), f->p[i]), den[i]);
    for (int i = 0; i < degree; i++)
        f->z[f->nz++] = mk(-1, 0);
    f->k = k;
}

/* ---- zpk2sos -------------------------------------------------------------------------------*/

/* Stable insertion sort of idx[0..n) by (key1, key2) ascending. */
static void sort_by(int *idx, int n, const double *key1, const double *key2)
{
    for (int i = 1; i < n; i++) {
        int v = idx[i], j = i;
        while (j > 0 && (key1[idx[j - 1]] > key1[v] ||
                         (key1[idx[j - 1]] == key1[v] && key2 && key2[idx[j - 1]] > key2[v]))) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = v;
    }
}

/* scipy's _cplxreal: the complex pairs (one each, positive imaginary part, averaged) sorted by
 * real part then |imag|, then the reals sorted; out gets them in that order (reals with imag 0).
 * False when a complex value has no conjugate. */
static bool cplxreal(const cplx *z, int n, cplx *out, int *nout)
{
    const double tol = 100 * 2.220446049250313e-16;
    int idx[MAXR];
    double re[MAXR] = {0}, aim[MAXR] = {0};
    for (int i = 0; i < n; i++) {
        idx[i] = i;
        re[i] = z[i].re;
        aim[i] = fabs(z[i].im);
    }
    sort_by(idx, n, re, aim);
    cplx zr[MAXR], zp[MAXR], zn[MAXR];
    int nr = 0, npos = 0, nneg = 0;
    for (int i = 0; i < n; i++) {
        cplx v = z[idx[i]];
        if (fabs(v.im) <= tol * cabs_(v))
            zr[nr++] = mk(v.re, 0);
        else if (v.im > 0)
            zp[npos++] = v;
        else
            zn[nneg++] = v;
    }
    if (npos != nneg)
        return false;
    /* Runs of (about) the same real part, each sorted by |imag|. */
    for (int s = 0; s < npos;) {
        int e = s + 1;
        while (e < npos && zp[e].re - zp[e - 1].re <= tol * cabs_(zp[e - 1]))
            e++;
        cplx *chunks[2] = {zp, zn};
        for (int c = 0; c < 2; c++) {
            int ci[MAXR];
            double key[MAXR];
            for (int i = s; i < e; i++) {
                ci[i - s] = i;
                key[i] = fabs(chunks[c][i].im);
            }
            sort_by(ci, e - s, key, NULL);
            cplx tmp[MAXR];
            for (int i = 0; i < e - s; i++)
                tmp[i] = chunks[c][ci[i]];
            memcpy(chunks[c] + s, tmp, (size_t)(e - s) * sizeof(cplx));
        }
        s = e;
    }
    int k = 0;
    for (int i = 0; i < npos; i++) {
        if (cabs_(csub(zp[i], mk(zn[i].re, -zn[i].im))) > tol * cabs_(zn[i]))
            return false;
        out[k++] = cdiv(cadd(zp[i], mk(zn[i].re, -zn[i].im)), mk(2, 0));
    }
    for (int i = 0; i < nr; i++)
        out[k++] = zr[i];
    *nout = k;
    return true;
}

static bool is_real(cplx v)
{
    return v.im == 0;
}

static void del(cplx *v, int *n, int i)
{
    memmove(v + i, v + i + 1, (size_t)(*n - i - 1) * sizeof(cplx));
    (*n)--;
}

/* argmin |1 - |p||, first on ties; among the real ones only when real_only. -1: none. */
static int idx_worst(const cplx *p, int n, bool real_only)
{
    int best = -1;
    double bv = 0;
    for (int i = 0; i < n; i++) {
        if (real_only && !is_real(p[i]))
            continue;
        double v = fabs(1 - cabs_(p[i]));
        if (best < 0 || v < bv) {
            best = i;
            bv = v;
        }
    }
    return best;
}

/* _nearest_real_complex_idx: the nearest element of z to p (0 any, 1 real, 2 complex), first
 * index on ties (a stable argsort). -1: none. */
static int nearest(const cplx *z, int n, cplx p, int which)
{
    int best = -1;
    double bv = 0;
    for (int i = 0; i < n; i++) {
        if ((which == 1 && !is_real(z[i])) || (which == 2 && is_real(z[i])))
            continue;
        double v = cabs_(csub(z[i], p));
        if (best < 0 || v < bv) {
            best = i;
            bv = v;
        }
    }
    return best;
}

/* The real coefficients of prod (x - r_i) for up to two roots, right-aligned in c[3]. */
static void poly3(const cplx *r, int n, double *c)
{
    c[0] = c[1] = c[2] = 0;
    if (n == 0) {
        c[2] = 1;
    } else if (n == 1) {
        c[1] = 1;
        c[2] = -r[0].re;
    } else {
        cplx a = mk(-r[0].re, -r[0].im), b = mk(-r[1].re, -r[1].im);
        c[0] = 1;
        c[1] = cadd(b, a).re;
        c[2] = cmul(a, b).re;
    }
}

static void single_sos(const cplx *z, int nz, const cplx *p, int np_, double *sos)
{
    poly3(z, nz, sos);
    poly3(p, np_, sos + 3);
}

static bool zpk2sos(zpk *f, nx_sig_sos *out)
{
    cplx z[MAXR], p[MAXR];
    int nz = f->nz, np_ = f->np;
    memcpy(z, f->z, (size_t)nz * sizeof(cplx));
    memcpy(p, f->p, (size_t)np_ * sizeof(cplx));
    while (np_ < nz)
        p[np_++] = mk(0, 0);
    while (nz < np_)
        z[nz++] = mk(0, 0);
    int nsec = (np_ + 1) / 2;
    if (np_ % 2 == 1) {
        p[np_++] = mk(0, 0);
        z[nz++] = mk(0, 0);
    }
    if (nsec > NX_SIG_MAX_SECTIONS)
        return false;
    cplx zc[MAXR], pc[MAXR];
    if (!cplxreal(z, nz, zc, &nz) || !cplxreal(p, np_, pc, &np_))
        return false;
    memcpy(z, zc, (size_t)nz * sizeof(cplx));
    memcpy(p, pc, (size_t)np_ * sizeof(cplx));
    memset(out, 0, sizeof *out);
    out->n = nsec;
    for (int si = nsec - 1; si >= 0; si--) {
        double *sos = out->s[si];
        int i1 = idx_worst(p, np_, false);
        if (i1 < 0)
            return false;
        cplx p1 = p[i1];
        del(p, &np_, i1);
        int nreal_p = 0, nreal_z = 0;
        for (int i = 0; i < np_; i++)
            nreal_p += is_real(p[i]);
        for (int i = 0; i < nz; i++)
            nreal_z += is_real(z[i]);
        if (is_real(p1) && nreal_p == 0) {
            int j = nearest(z, nz, p1, 1);
            if (j < 0)
                return false;
            cplx zz[2] = {z[j], mk(0, 0)}, pp[2] = {p1, mk(0, 0)};
            del(z, &nz, j);
            single_sos(zz, 2, pp, 2, sos);
        } else if (np_ + 1 == nz && !is_real(p1) && nreal_p == 1 && nreal_z == 1) {
            int j = nearest(z, nz, p1, 2);
            if (j < 0)
                return false;
            cplx zz[2] = {z[j], mk(z[j].re, -z[j].im)}, pp[2] = {p1, mk(p1.re, -p1.im)};
            del(z, &nz, j);
            single_sos(zz, 2, pp, 2, sos);
        } else {
            cplx p2;
            if (is_real(p1)) {
                int j = idx_worst(p, np_, true);
                if (j < 0)
                    return false;
                p2 = p[j];
                del(p, &np_, j);
            } else {
                p2 = mk(p1.re, -p1.im);
            }
            cplx pp[2] = {p1, p2};
            if (nz > 0) {
                int j = nearest(z, nz, p1, 0);
                cplx z1 = z[j];
                del(z, &nz, j);
                if (!is_real(z1)) {
                    cplx zz[2] = {z1, mk(z1.re, -z1.im)};
                    single_sos(zz, 2, pp, 2, sos);
                } else if (nz > 0) {
                    int j2 = nearest(z, nz, p1, 1);
                    if (j2 < 0)
                        return false;
                    cplx zz[2] = {z1, z[j2]};
                    del(z, &nz, j2);
                    single_sos(zz, 2, pp, 2, sos);
                } else {
                    single_sos(&z1, 1, pp, 2, sos);
                }
            } else {
                single_sos(NULL, 0, pp, 2, sos);
            }
        }
    }
    if (nz != 0 || np_ != 0)
        return false;
    for (int j = 0; j < 3; j++)
        out->s[0][j] *= f->k;
    return true;
}

static const char *const btype_names[] = {"lowpass", "highpass", "bandpass", "bandstop"};

nx_status nx_sig_butter(nx_ctx *ctx, const char *who, int64_t order, double fs, int btype,
                        double lo, double hi, nx_sig_sos *out)
{
    if (order < 1 || order > NX_SIG_MAX_ORDER)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: order is %lld; expected 1..%d", who,
                           (long long)order, NX_SIG_MAX_ORDER);
    if (!(isfinite(fs) && fs > 0))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: fs is %g; expected a finite sampling "
                           "frequency > 0", who, fs);
    if ((unsigned)btype > NX_SIG_BANDSTOP)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: btype %d is out of range; expected "
                           "lowpass, highpass, bandpass or bandstop", who, btype);
    const char *bn = btype_names[btype];
    bool band = btype >= NX_SIG_BANDPASS;
    double w[2];
    int nw = 0;
    if (btype == NX_SIG_LOWPASS || band) {
        if (btype == NX_SIG_LOWPASS && lo != 0)
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: lowpass takes its cut-off as hi; lo "
                               "is %g, expected it not given (0)", who, lo);
    }
    if (btype == NX_SIG_HIGHPASS && hi != 0)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: highpass takes its cut-off as lo; hi is "
                           "%g, expected it not given (0)", who, hi);
    if (btype != NX_SIG_LOWPASS)
        w[nw++] = lo;
    if (btype != NX_SIG_HIGHPASS)
        w[nw++] = hi;
    for (int i = 0; i < nw; i++) {
        const char *name = (btype == NX_SIG_HIGHPASS || (band && i == 0)) ? "lo" : "hi";
        if (!(isfinite(w[i]) && w[i] > 0 && w[i] < fs / 2))
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %s %s is %g; expected a cut-off "
                               "0 < %s < fs/2 = %g (given, finite)", who, bn, name, w[i], name,
                               fs / 2);
    }
    if (band && !(lo < hi))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %s needs lo < hi; lo is %g, hi %g", who,
                           bn, lo, hi);
    /* iirfilter: Wn = 2 W / fs, prewarped with fs = 2. */
    double warped[2];
    for (int i = 0; i < nw; i++) {
        double wn = 2 * w[i] / fs;
        if (!(wn > 0 && wn < 1))
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: the normalised cut-off 2 W / fs is "
                               "%g; expected 0 < 2 W / fs < 1", who, wn);
        warped[i] = 2 * 2.0 * tan(M_PI * wn / 2.0);
    }
    zpk f;
    buttap((int)order, &f);
    if (btype == NX_SIG_LOWPASS)
        lp2lp(&f, warped[0]);
    else if (btype == NX_SIG_HIGHPASS)
        lp2hp(&f, warped[0]);
    else {
        double bw = warped[1] - warped[0], wo = sqrt(warped[0] * warped[1]);
        if (btype == NX_SIG_BANDPASS)
            lp2bp(&f, wo, bw);
        else
            lp2bs(&f, wo, bw);
    }
    bilinear(&f, 2.0);
    if (!zpk2sos(&f, out))
        return nx_rt_error(ctx, NX_ERR_INTERNAL, "%s: the %s design of order %lld did not pair "
                           "into sections", who, bn, (long long)order);
    return NX_OK;
}
