/* Vectorisable math as LLVM IR (see math.h). Coefficients of exp, expm1, log, log1p, erf and the
 * sin/cos kernels are fdlibm's (Copyright (C) 1993 Sun Microsystems; "Permission to use, copy,
 * modify, and distribute this software is freely granted, provided that this notice is
 * preserved."); the f32 exp polynomial is Cephes's expf, the f32 log one FreeBSD's e_logf.c.
 *
 * Rules of this file: plain fadd/fmul where an exactness argument is made (Cody-Waite products,
 * two-sums, Dekker products: LLVM does not contract them without fast-math flags), fmuladd in
 * polynomials (the backend fuses it where the host has FMA), selects instead of branches. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <llvm/Config/llvm-config.h> /* LLVM_VERSION_MAJOR (a C header) */

#include "codegen/x86/math.h"

#define MAX_LANES 64

/* An emitter: a builder positioned in a function, and the float type being computed with. */
typedef struct em {
    LLVMBuilderRef b;
    LLVMModuleRef mod;
    LLVMContextRef c;
    LLVMTypeRef ft; /* float, double, or a vector of them */
    LLVMTypeRef it; /* the integer type of the same width and lanes */
    unsigned lanes; /* 0: scalar */
    bool f64;
} em;

static const char *const names[NX_X86_MATH_COUNT] = {
    "exp", "log", "log1p", "expm1", "sin", "cos", "tanh", "erf", "pow", "sqrt", "atan2",
};

/* Part of every kernel cache key (nx_x86_math_version in math.h). Bump the number with every
 * change to the code of a function here (its IR body, its accuracy, its special cases): kernels
 * compiled against the older bodies are then never served again. A constant rather than the
 * build time, so a rebuild keeps the disk cache and builds are reproducible. */
const char *nx_x86_math_version(void)
{
    return "x86-math-4";
}

const char *nx_x86_math_name(nx_x86_math_fn fn)
{
    return (unsigned)fn < NX_X86_MATH_COUNT ? names[fn] : NULL;
}

int nx_x86_math_arity(nx_x86_math_fn fn)
{
    return fn == NX_X86_MATH_POW || fn == NX_X86_MATH_ATAN2 ? 2 : 1;
}

/* ---------------------------------------------------------------------------------------------
 * Emitter helpers
 * -------------------------------------------------------------------------------------------*/

static LLVMValueRef splat(const em *e, LLVMValueRef s)
{
    if (!e->lanes)
        return s;
    LLVMValueRef v[MAX_LANES];
    for (unsigned i = 0; i < e->lanes; i++)
        v[i] = s;
    return LLVMConstVector(v, e->lanes);
}

static LLVMTypeRef scalar_f(const em *e)
{
    return e->f64 ? LLVMDoubleTypeInContext(e->c) : LLVMFloatTypeInContext(e->c);
}

static LLVMTypeRef scalar_i(const em *e)
{
    return e->f64 ? LLVMInt64TypeInContext(e->c) : LLVMInt32TypeInContext(e->c);
}

static LLVMValueRef K(const em *e, double v)
{
    return splat(e, LLVMConstReal(scalar_f(e), v));
}

static LLVMValueRef KI(const em *e, int64_t v)
{
    return splat(e, LLVMConstInt(scalar_i(e), (unsigned long long)v, 1));
}

static LLVMValueRef add(const em *e, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildFAdd(e->b, a, b, "");
}
static LLVMValueRef sub(const em *e, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildFSub(e->b, a, b, "");
}
static LLVMValueRef mul(const em *e, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildFMul(e->b, a, b, "");
}
static LLVMValueRef divf(const em *e, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildFDiv(e->b, a, b, "");
}
static LLVMValueRef neg(const em *e, LLVMValueRef a)
{
    return LLVMBuildFNeg(e->b, a, "");
}
static LLVMValueRef iadd(const em *e, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildAdd(e->b, a, b, "");
}
static LLVMValueRef isub(const em *e, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildSub(e->b, a, b, "");
}
static LLVMValueRef iand(const em *e, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildAnd(e->b, a, b, "");
}
static LLVMValueRef shl(const em *e, LLVMValueRef a, int n)
{
    return LLVMBuildShl(e->b, a, KI(e, n), "");
}
static LLVMValueRef ashr(const em *e, LLVMValueRef a, int n)
{
    return LLVMBuildAShr(e->b, a, KI(e, n), "");
}
static LLVMValueRef sel(const em *e, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildSelect(e->b, c, a, b, "");
}
static LLVMValueRef fcmp(const em *e, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildFCmp(e->b, p, a, b, "");
}
static LLVMValueRef icmp(const em *e, LLVMIntPredicate p, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildICmp(e->b, p, a, b, "");
}
static LLVMValueRef or1(const em *e, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildOr(e->b, a, b, "");
}
static LLVMValueRef and1(const em *e, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildAnd(e->b, a, b, "");
}
static LLVMValueRef to_int(const em *e, LLVMValueRef f)
{
    return LLVMBuildBitCast(e->b, f, e->it, "");
}
static LLVMValueRef to_float(const em *e, LLVMValueRef i)
{
    return LLVMBuildBitCast(e->b, i, e->ft, "");
}
static LLVMValueRef intrinsic(const em *e, const char *name, LLVMValueRef *args, unsigned n)
{
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMTypeRef ty = e->ft;
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(e->mod, id, &ty, 1);
    return LLVMBuildCall2(e->b, LLVMIntrinsicGetType(e->c, id, &ty, 1), fn, args, n, "");
}

static LLVMValueRef fabs_(const em *e, LLVMValueRef x)
{
    return intrinsic(e, "llvm.fabs", &x, 1);
}

static LLVMValueRef copysign_(const em *e, LLVMValueRef mag, LLVMValueRef sgn)
{
    LLVMValueRef a[] = {mag, sgn};
    return intrinsic(e, "llvm.copysign", a, 2);
}

static LLVMValueRef fmad(const em *e, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
    LLVMValueRef args[] = {a, b, c};
    return intrinsic(e, "llvm.fmuladd", args, 3);
}

/* c[0] + x (c[1] + x (c[2] + ...)), n coefficients, lowest first. */
static LLVMValueRef poly(const em *e, LLVMValueRef x, const double *c, int n)
{
    LLVMValueRef p = K(e, c[n - 1]);
    for (int i = n - 2; i >= 0; i--)
        p = fmad(e, p, x, K(e, c[i]));
    return p;
}

static LLVMValueRef is_nan(const em *e, LLVMValueRef x)
{
    return fcmp(e, LLVMRealUNO, x, x);
}

/* min(max(x, lo), hi) that lets NaN through. */
static LLVMValueRef clamp(const em *e, LLVMValueRef x, double lo, double hi)
{
    x = sel(e, fcmp(e, LLVMRealOGT, x, K(e, hi)), K(e, hi), x);
    return sel(e, fcmp(e, LLVMRealOLT, x, K(e, lo)), K(e, lo), x);
}

static int mant_bits(const em *e)
{
    return e->f64 ? 52 : 23;
}

/* round(v) for |v| < 2^(mant-1), as a float (*nf) and an integer (*ni): adding 1.5 * 2^mant puts
 * the rounded integer in the low bits. */
static void round_shift(const em *e, LLVMValueRef v, LLVMValueRef *nf, LLVMValueRef *ni)
{
    LLVMValueRef sh = K(e, e->f64 ? 0x1.8p52 : 0x1.8p23);
    LLVMValueRef t = add(e, v, sh);
    *ni = isub(e, to_int(e, t), to_int(e, sh));
    *nf = sub(e, t, sh);
}

/* A small integer (|k| < 2^(mant-1)) as a float, by the same trick in reverse. */
static LLVMValueRef int_to_float(const em *e, LLVMValueRef k)
{
    LLVMValueRef sh = K(e, e->f64 ? 0x1.8p52 : 0x1.8p23);
    return sub(e, to_float(e, iadd(e, to_int(e, sh), k)), sh);
}

/* 2^k for k within the normal exponent range. */
static LLVMValueRef pow2i(const em *e, LLVMValueRef k)
{
    int bias = e->f64 ? 1023 : 127;
    return to_float(e, shl(e, iadd(e, k, KI(e, bias)), mant_bits(e)));
}

/* y 2^k for k up to twice the exponent range: two factors, neither overflowing, so that a
 * subnormal result is rounded once (by the second product). */
static LLVMValueRef scale(const em *e, LLVMValueRef y, LLVMValueRef k)
{
    LLVMValueRef k1 = ashr(e, k, 1);
    LLVMValueRef k2 = isub(e, k, k1);
    return mul(e, mul(e, y, pow2i(e, k1)), pow2i(e, k2));
}

/* s + err = a + b exactly (Knuth's two-sum, no ordering needed). */
static void two_sum(const em *e, LLVMValueRef a, LLVMValueRef b, LLVMValueRef *s, LLVMValueRef *err)
{
    *s = add(e, a, b);
    LLVMValueRef bb = sub(e, *s, a);
    *err = add(e, sub(e, a, sub(e, *s, bb)), sub(e, b, bb));
}

/* hi + lo = a exactly with hi holding the upper half of the significand (Veltkamp). */
static void split(const em *e, LLVMValueRef a, LLVMValueRef *hi, LLVMValueRef *lo)
{
    LLVMValueRef t = mul(e, K(e, e->f64 ? 134217729.0 : 4097.0), a);
    *hi = sub(e, t, sub(e, t, a));
    *lo = sub(e, a, *hi);
}

/* p + err = a b exactly (Dekker), without relying on an FMA the host may not have. */
static void two_prod(const em *e, LLVMValueRef a, LLVMValueRef b, LLVMValueRef *p,
                     LLVMValueRef *err)
{
    LLVMValueRef ah, al, bh, bl;
    split(e, a, &ah, &al);
    split(e, b, &bh, &bl);
    *p = mul(e, a, b);
    LLVMValueRef t = sub(e, mul(e, ah, bh), *p);
    t = add(e, t, mul(e, ah, bl));
    t = add(e, t, mul(e, al, bh));
    *err = add(e, t, mul(e, al, bl));
}

/* ---------------------------------------------------------------------------------------------
 * exp
 * -------------------------------------------------------------------------------------------*/

static const double LN2_HI = 6.93147180369123816490e-01; /* 0x3fe62e42fee00000: n*LN2_HI exact */
static const double LN2_LO = 1.90821492927058770002e-10;
static const double INV_LN2 = 1.44269504088896338700e+00;

/* exp(hi - lo) 2^k for |hi - lo| <= ~0.35 (fdlibm's rational form). */
static LLVMValueRef exp_core64(const em *e, LLVMValueRef hi, LLVMValueRef lo, LLVMValueRef k)
{
    static const double P[] = {1.66666666666666019037e-01, -2.77777777770155933842e-03,
                               6.61375632143793436117e-05, -1.65339022054652515390e-06,
                               4.13813679705723846039e-08};
    LLVMValueRef r = sub(e, hi, lo);
    LLVMValueRef t = mul(e, r, r);
    LLVMValueRef c = sub(e, r, mul(e, t, poly(e, t, P, 5)));
    LLVMValueRef q = divf(e, mul(e, r, c), sub(e, K(e, 2.0), c));
    LLVMValueRef y = sub(e, K(e, 1.0), sub(e, sub(e, lo, q), hi));
    return scale(e, y, k);
}

static LLVMValueRef exp64(const em *e, LLVMValueRef x)
{
    /* beyond these exp is 0 or inf; clamping keeps k in range */
    LLVMValueRef xc = clamp(e, x, -746.0, 710.0);
    LLVMValueRef kf, ki;
    round_shift(e, mul(e, xc, K(e, INV_LN2)), &kf, &ki);
    LLVMValueRef hi = sub(e, xc, mul(e, kf, K(e, LN2_HI)));
    LLVMValueRef lo = mul(e, kf, K(e, LN2_LO));
    return exp_core64(e, hi, lo, ki);
}

static LLVMValueRef exp32(const em *e, LLVMValueRef x)
{
    static const double P[] = {5.0000001201E-1, 1.6666665459E-1, 4.1665795894E-2,
                               8.3334519073E-3, 1.3981999507E-3, 1.9875691500E-4};
    LLVMValueRef xc = clamp(e, x, -104.0, 89.0);
    LLVMValueRef kf, ki;
    round_shift(e, mul(e, xc, K(e, 0x1.715476p+0)), &kf, &ki);
    /* ln2 = 0x1.62e4p-1 (16 bits, so kf times it is exact) + 0x1.7f7d1cp-20 */
    LLVMValueRef r = sub(e, xc, mul(e, kf, K(e, 0x1.62e4p-1)));
    r = sub(e, r, mul(e, kf, K(e, 0x1.7f7d1cp-20)));
    LLVMValueRef y = add(e, r, mul(e, mul(e, r, r), poly(e, r, P, 6)));
    return scale(e, add(e, K(e, 1.0), y), ki);
}

/* ---------------------------------------------------------------------------------------------
 * log, log1p
 * -------------------------------------------------------------------------------------------*/

/* x = 2^k m with m in [sqrt(1/2), sqrt(2)), for positive normal x: subtracting the bits of
 * sqrt(1/2) makes the exponent field carry k. */
static void decompose(const em *e, LLVMValueRef x, LLVMValueRef *k, LLVMValueRef *m)
{
    uint64_t off = e->f64 ? 0x3fe6a09e667f3bcdull : 0x3f3504f3ull;
    int64_t mask = e->f64 ? (int64_t)0xfff0000000000000ull : (int64_t)(int32_t)0xff800000u;
    LLVMValueRef ix = to_int(e, x);
    LLVMValueRef t = isub(e, ix, KI(e, (int64_t)off));
    *k = ashr(e, t, mant_bits(e));
    *m = to_float(e, isub(e, ix, iand(e, t, KI(e, mask))));
}

/* k ln2 + log(1 + f) (+ c, a small correction): fdlibm's s = f/(2+f) form. */
static LLVMValueRef log_core(const em *e, LLVMValueRef kf, LLVMValueRef f, LLVMValueRef c)
{
    static const double Lg[] = {6.666666666666735130e-01, 3.999999999940941908e-01,
                                2.857142874366239149e-01, 2.222219843214978396e-01,
                                1.818357216161805012e-01, 1.531383769920937332e-01,
                                1.479819860511658591e-01};
    static const double Lgf[] = {0xaaaaaa.0p-24, 0xccce13.0p-25, 0x91e9ee.0p-25, 0xf89e26.0p-26};
    double ln2_hi = e->f64 ? LN2_HI : 6.9313812256e-01; /* f32: 0x3f317180 */
    double ln2_lo = e->f64 ? LN2_LO : 9.0580006145e-06; /* f32: 0x3717f7d1 */
    LLVMValueRef s = divf(e, f, add(e, K(e, 2.0), f));
    LLVMValueRef z = mul(e, s, s);
    LLVMValueRef w = mul(e, z, z);
    LLVMValueRef t1, t2;
    if (e->f64) {
        const double odd[] = {Lg[0], Lg[2], Lg[4], Lg[6]}, even[] = {Lg[1], Lg[3], Lg[5]};
        t1 = mul(e, w, poly(e, w, even, 3));
        t2 = mul(e, z, poly(e, w, odd, 4));
    } else {
        const double odd[] = {Lgf[0], Lgf[2]}, even[] = {Lgf[1], Lgf[3]};
        t1 = mul(e, w, poly(e, w, even, 2));
        t2 = mul(e, z, poly(e, w, odd, 2));
    }
    LLVMValueRef R = add(e, t2, t1);
    LLVMValueRef hfsq = mul(e, mul(e, K(e, 0.5), f), f);
    LLVMValueRef lo = add(e, mul(e, kf, K(e, ln2_lo)), c);
    LLVMValueRef inner = sub(e, hfsq, add(e, mul(e, s, add(e, hfsq, R)), lo));
    return sub(e, mul(e, kf, K(e, ln2_hi)), sub(e, inner, f));
}

/* The C99 special values of log-like functions, where x0 is the argument of the logarithm. */
static LLVMValueRef log_specials(const em *e, LLVMValueRef x0, LLVMValueRef r)
{
    r = sel(e, fcmp(e, LLVMRealOEQ, x0, K(e, 0.0)), K(e, -INFINITY), r);
    r = sel(e, fcmp(e, LLVMRealOLT, x0, K(e, 0.0)), K(e, NAN), r);
    return sel(e, fcmp(e, LLVMRealOEQ, x0, K(e, INFINITY)), x0, r);
}

static LLVMValueRef m_log(const em *e, LLVMValueRef x)
{
    /* subnormals: scale into the normal range first */
    double min_normal = e->f64 ? 0x1p-1022 : 0x1p-126;
    int up = e->f64 ? 54 : 25;
    LLVMValueRef tiny = fcmp(e, LLVMRealOLT, x, K(e, min_normal));
    LLVMValueRef xs = sel(e, tiny, mul(e, x, K(e, e->f64 ? 0x1p54 : 0x1p25)), x);
    LLVMValueRef k, m;
    decompose(e, xs, &k, &m);
    k = sel(e, tiny, isub(e, k, KI(e, up)), k);
    LLVMValueRef r = log_core(e, int_to_float(e, k), sub(e, m, K(e, 1.0)), K(e, 0.0));
    r = log_specials(e, x, r);
    return sel(e, is_nan(e, x), x, r);
}

static LLVMValueRef log1p64(const em *e, LLVMValueRef x)
{
    /* 1 + x rounded is u; its rounding error is put back as c/u (fdlibm) */
    LLVMValueRef u = add(e, K(e, 1.0), x);
    LLVMValueRef k, m;
    decompose(e, u, &k, &m);
    /* both forms are exact on their side of u = 2 (Sterbenz) */
    LLVMValueRef pos = fcmp(e, LLVMRealOGE, u, K(e, 2.0));
    LLVMValueRef c = sel(e, pos, sub(e, K(e, 1.0), sub(e, u, x)), sub(e, x, sub(e, u, K(e, 1.0))));
    c = divf(e, c, u);
    /* where 1 + x lies in [sqrt(1/2), sqrt(2)), f = x exactly */
    LLVMValueRef near = and1(e, fcmp(e, LLVMRealOGT, x, K(e, -0.2928932188134524)),
                             fcmp(e, LLVMRealOLT, x, K(e, 0.41421356237309503)));
    LLVMValueRef kf = sel(e, near, K(e, 0.0), int_to_float(e, k));
    LLVMValueRef f = sel(e, near, x, sub(e, m, K(e, 1.0)));
    c = sel(e, near, K(e, 0.0), c);
    LLVMValueRef r = log_specials(e, u, log_core(e, kf, f, c));
    r = sel(e, fcmp(e, LLVMRealOEQ, x, K(e, 0.0)), x, r); /* keeps -0 */
    return sel(e, is_nan(e, x), x, r);
}

/* ---------------------------------------------------------------------------------------------
 * expm1, tanh
 * -------------------------------------------------------------------------------------------*/

static LLVMValueRef expm1_64(const em *e, LLVMValueRef x)
{
    static const double Q[] = {-3.33333333333331316428e-02, 1.58730158725481460165e-03,
                               -7.93650757867487942473e-05, 4.00821782732936239552e-06,
                               -2.01099218183624371326e-07};
    LLVMValueRef xc = clamp(e, x, -50.0, 710.0); /* expm1 is -1 below, inf above */
    LLVMValueRef kf, k;
    round_shift(e, mul(e, xc, K(e, INV_LN2)), &kf, &k);
    LLVMValueRef hi = sub(e, xc, mul(e, kf, K(e, LN2_HI)));
    LLVMValueRef lo = mul(e, kf, K(e, LN2_LO));
    LLVMValueRef r = sub(e, hi, lo);
    LLVMValueRef c = sub(e, sub(e, hi, r), lo);
    /* expm1(r) on |r| <= 0.35: fdlibm's rational form */
    LLVMValueRef hfx = mul(e, K(e, 0.5), r);
    LLVMValueRef hxs = mul(e, r, hfx);
    LLVMValueRef r1 = fmad(e, hxs, poly(e, hxs, Q, 5), K(e, 1.0));
    LLVMValueRef t = sub(e, K(e, 3.0), mul(e, r1, hfx));
    LLVMValueRef ee = mul(e, hxs, divf(e, sub(e, r1, t), sub(e, K(e, 6.0), mul(e, r, t))));
    LLVMValueRef y0 = sub(e, r, sub(e, mul(e, r, ee), hxs));
    /* expm1(r + c) = r - e2 */
    LLVMValueRef e2 = sub(e, sub(e, mul(e, r, sub(e, ee, c)), c), hxs);
    LLVMValueRef r_e2 = sub(e, r, e2);
    LLVMValueRef ym1 = sub(e, mul(e, K(e, 0.5), r_e2), K(e, 0.5));
    LLVMValueRef yp1 = sel(e, fcmp(e, LLVMRealOLT, r, K(e, -0.25)),
                           mul(e, K(e, -2.0), sub(e, e2, add(e, r, K(e, 0.5)))),
                           add(e, K(e, 1.0), mul(e, K(e, 2.0), r_e2)));
    LLVMValueRef yfar = sub(e, scale(e, add(e, r_e2, K(e, 1.0)), k), K(e, 1.0));
    /* 2^-k for the k in [2, 56] that use it (clamped so the bits stay a normal number) */
    LLVMValueRef kc = sel(e, icmp(e, LLVMIntSGT, k, KI(e, 60)), KI(e, 60), k);
    LLVMValueRef tmk = pow2i(e, isub(e, KI(e, 0), kc));
    LLVMValueRef ylt20 = scale(e, add(e, r_e2, sub(e, K(e, 1.0), tmk)), k);
    LLVMValueRef yge20 = scale(e, add(e, sub(e, r, add(e, e2, tmk)), K(e, 1.0)), k);
    LLVMValueRef far = or1(e, icmp(e, LLVMIntSLT, k, KI(e, 0)), icmp(e, LLVMIntSGT, k, KI(e, 56)));
    LLVMValueRef y = sel(e, icmp(e, LLVMIntSLT, k, KI(e, 20)), ylt20, yge20);
    y = sel(e, far, yfar, y);
    y = sel(e, icmp(e, LLVMIntEQ, k, KI(e, 1)), yp1, y);
    y = sel(e, icmp(e, LLVMIntEQ, k, KI(e, -1)), ym1, y);
    y = sel(e, icmp(e, LLVMIntEQ, k, KI(e, 0)), y0, y);
    y = sel(e, fcmp(e, LLVMRealOEQ, x, K(e, 0.0)), x, y); /* keeps -0 */
    return sel(e, is_nan(e, x), x, y);
}

static LLVMValueRef tanh64(const em *e, LLVMValueRef x)
{
    /* |x| < 0.625: Cephes's x + x^3 P(x^2)/Q(x^2); above, fdlibm's 1 - 2/(expm1(2a) + 2) */
    static const double P[] = {-1.61468768441708447952E3, -9.92877231001918586564E1,
                               -9.64399179425052238628E-1};
    static const double Q[] = {4.84406305325125486048E3, 2.23548839060100448583E3,
                               1.12811678491632931402E2, 1.0};
    LLVMValueRef a = clamp(e, fabs_(e, x), 0.0, 22.0);
    LLVMValueRef t = expm1_64(e, mul(e, K(e, 2.0), a));
    LLVMValueRef big = sub(e, K(e, 1.0), divf(e, K(e, 2.0), add(e, t, K(e, 2.0))));
    LLVMValueRef z = mul(e, x, x);
    LLVMValueRef small =
        add(e, x, mul(e, mul(e, x, z), divf(e, poly(e, z, P, 3), poly(e, z, Q, 4))));
    LLVMValueRef r = sel(e, fcmp(e, LLVMRealOLT, a, K(e, 0.625)), small, copysign_(e, big, x));
    r = sel(e, fcmp(e, LLVMRealOEQ, x, K(e, 0.0)), x, r); /* keeps -0 */
    return sel(e, is_nan(e, x), x, r);
}

/* ---------------------------------------------------------------------------------------------
 * erf
 * -------------------------------------------------------------------------------------------*/

static LLVMValueRef erf_small(const em *e, LLVMValueRef x)
{
    static const double pp[] = {1.28379167095512558561e-01, -3.25042107247001499370e-01,
                                -2.84817495755985104766e-02, -5.77027029648944159157e-03,
                                -2.37630166566501626084e-05};
    static const double qq[] = {1.0,
                                3.97917223959155352819e-01,
                                6.50222499887672944485e-02,
                                5.08130628187576562776e-03,
                                1.32494738004321644526e-04,
                                -3.96022827877536812320e-06};
    LLVMValueRef z = mul(e, x, x);
    LLVMValueRef y = divf(e, poly(e, z, pp, 5), poly(e, z, qq, 6));
    LLVMValueRef r = add(e, x, mul(e, x, y));
    /* |x| < 2^-28: x + efx x, scaled so that subnormal x do not lose bits to underflow */
    LLVMValueRef tiny = fcmp(e, LLVMRealOLT, fabs_(e, x), K(e, 0x1p-28));
    LLVMValueRef t = mul(e, K(e, 0.125),
                         add(e, mul(e, K(e, 8.0), x), mul(e, K(e, 1.02703333676410069053e+00), x)));
    return sel(e, tiny, t, r);
}

/* erf(a) - erx on a in [0.84375, 1.25), erx = (float)0.84506291151 */
static LLVMValueRef erf_mid(const em *e, LLVMValueRef a)
{
    static const double pa[] = {-2.36211856075265944077e-03, 4.14856118683748331666e-01,
                                -3.72207876035701323847e-01, 3.18346619901161753674e-01,
                                -1.10894694282396677476e-01, 3.54783043256182359371e-02,
                                -2.16637559486879084300e-03};
    static const double qa[] = {1.0,
                                1.06420880400844228286e-01,
                                5.40397917702171048937e-01,
                                7.18286544141962662868e-02,
                                1.26171219808761642112e-01,
                                1.36370839120290507362e-02,
                                1.19844998467991074170e-02};
    LLVMValueRef s = sub(e, a, K(e, 1.0));
    return divf(e, poly(e, s, pa, 7), poly(e, s, qa, 7));
}

/* 1 - erf(a) for a in [1.25, 6]: exp(-a^2 - 0.5625 + R/S) / a, two coefficient sets by range */
static LLVMValueRef erfc_big(const em *e, LLVMValueRef a)
{
    static const double ra[] = {-9.86494403484714822705e-03, -6.93858572707181764372e-01,
                                -1.05586262253232909814e+01, -6.23753324503260060396e+01,
                                -1.62396669462573470355e+02, -1.84605092906711035994e+02,
                                -8.12874355063065934246e+01, -9.81432934416914548592e+00};
    static const double sa[] = {1.0,
                                1.96512716674392571292e+01,
                                1.37657754143519042600e+02,
                                4.34565877475229228821e+02,
                                6.45387271733267880336e+02,
                                4.29008140027567833386e+02,
                                1.08635005541779435134e+02,
                                6.57024977031928170135e+00,
                                -6.04244152148580987438e-02};
    static const double rb[] = {-9.86494292470009928597e-03, -7.99283237680523006574e-01,
                                -1.77579549177547519889e+01, -1.60636384855821916062e+02,
                                -6.37566443368389627722e+02, -1.02509513161107724954e+03,
                                -4.83519191608651397019e+02, 0.0};
    static const double sb[] = {1.0,
                                3.03380607434824582924e+01,
                                3.25792512996573918826e+02,
                                1.53672958608443695994e+03,
                                3.19985821950859553908e+03,
                                2.55305040643316442583e+03,
                                4.74528541206955367215e+02,
                                -2.24409524465858183362e+01,
                                0.0};
    LLVMValueRef lo = fcmp(e, LLVMRealOLT, a, K(e, 1.0 / 0.35));
    LLVMValueRef s = divf(e, K(e, 1.0), mul(e, a, a));
    LLVMValueRef R = sel(e, lo, K(e, ra[7]), K(e, rb[7]));
    for (int i = 6; i >= 0; i--)
        R = fmad(e, R, s, sel(e, lo, K(e, ra[i]), K(e, rb[i])));
    LLVMValueRef S = sel(e, lo, K(e, sa[8]), K(e, sb[8]));
    for (int i = 7; i >= 0; i--)
        S = fmad(e, S, s, sel(e, lo, K(e, sa[i]), K(e, sb[i])));
    /* -a^2 = -z^2 + (z - a)(z + a) with z = a cut to 21 bits, so z^2 is exact */
    LLVMValueRef z = to_float(e, iand(e, to_int(e, a), KI(e, (int64_t)0xffffffff00000000ull)));
    LLVMValueRef e1 = exp64(e, sub(e, neg(e, mul(e, z, z)), K(e, 0.5625)));
    LLVMValueRef e2 = exp64(e, add(e, mul(e, sub(e, z, a), add(e, z, a)), divf(e, R, S)));
    return divf(e, mul(e, e1, e2), a);
}

static LLVMValueRef erf64(const em *e, LLVMValueRef x)
{
    LLVMValueRef a = fabs_(e, x);
    LLVMValueRef ac = clamp(e, a, 1.25, 6.0); /* erf is 1 to double precision beyond 6 */
    LLVMValueRef big = sub(e, K(e, 1.0), erfc_big(e, ac));
    LLVMValueRef mid = add(e, K(e, 8.45062911510467529297e-01), erf_mid(e, a));
    LLVMValueRef y = copysign_(e, sel(e, fcmp(e, LLVMRealOLT, a, K(e, 1.25)), mid, big), x);
    y = sel(e, fcmp(e, LLVMRealOLT, a, K(e, 0.84375)), erf_small(e, x), y);
    return sel(e, is_nan(e, x), x, y);
}

/* ---------------------------------------------------------------------------------------------
 * sin, cos
 * -------------------------------------------------------------------------------------------*/

/* x - n pi/2 = y0 + y1, n = round(x 2/pi). pi/2 is held as three 33-bit parts and a tail, so
 * n times each part is exact for |n| < 2^20; the subtractions are tracked with two-sums. */
static void rem_pio2(const em *e, LLVMValueRef x, LLVMValueRef *y0, LLVMValueRef *y1,
                     LLVMValueRef *n)
{
    LLVMValueRef fn;
    round_shift(e, mul(e, x, K(e, 6.36619772367581382433e-01)), &fn, n);
    LLVMValueRef a = sub(e, x, mul(e, fn, K(e, 1.57079632673412561417e+00)));
    LLVMValueRef b, e2, c, e3;
    two_sum(e, a, neg(e, mul(e, fn, K(e, 6.07710050630396597660e-11))), &b, &e2);
    two_sum(e, b, neg(e, mul(e, fn, K(e, 2.02226624871116645580e-21))), &c, &e3);
    LLVMValueRef tail = sub(e, add(e, e2, e3), mul(e, fn, K(e, 8.47842766036889956997e-32)));
    *y0 = add(e, c, tail);
    *y1 = sub(e, tail, sub(e, *y0, c));
}

static LLVMValueRef ksin(const em *e, LLVMValueRef x, LLVMValueRef y)
{
    static const double S[] = {8.33333333332248946124e-03, -1.98412698298579493134e-04,
                               2.75573137070700676789e-06};
    static const double S56[] = {-2.50507602534068634195e-08, 1.58969099521155010221e-10};
    LLVMValueRef z = mul(e, x, x);
    LLVMValueRef w = mul(e, z, z);
    LLVMValueRef r = add(e, poly(e, z, S, 3), mul(e, mul(e, z, w), poly(e, z, S56, 2)));
    LLVMValueRef v = mul(e, z, x);
    /* x - ((z (y/2 - v r) - y) - v S1) */
    LLVMValueRef t = sub(e, mul(e, K(e, 0.5), y), mul(e, v, r));
    t = sub(e, sub(e, mul(e, z, t), y), mul(e, v, K(e, -1.66666666666666324348e-01)));
    return sub(e, x, t);
}

static LLVMValueRef kcos(const em *e, LLVMValueRef x, LLVMValueRef y)
{
    static const double C123[] = {4.16666666666666019037e-02, -1.38888888888741095749e-03,
                                  2.48015872894767294178e-05};
    static const double C456[] = {-2.75573143513906633035e-07, 2.08757232129817482790e-09,
                                  -1.13596475577881948265e-11};
    LLVMValueRef z = mul(e, x, x);
    LLVMValueRef w = mul(e, z, z);
    LLVMValueRef r =
        add(e, mul(e, z, poly(e, z, C123, 3)), mul(e, mul(e, w, w), poly(e, z, C456, 3)));
    LLVMValueRef hz = mul(e, K(e, 0.5), z);
    LLVMValueRef w1 = sub(e, K(e, 1.0), hz);
    LLVMValueRef corr =
        add(e, sub(e, sub(e, K(e, 1.0), w1), hz), sub(e, mul(e, z, r), mul(e, x, y)));
    return add(e, w1, corr);
}

/* sin or cos of y0 + y1 (|y0| <= pi/4) in quadrant n. */
static LLVMValueRef trig_quadrant(const em *e, LLVMValueRef y0, LLVMValueRef y1, LLVMValueRef n,
                                  bool cosine)
{
    LLVMValueRef s = ksin(e, y0, y1), c = kcos(e, y0, y1);
    /* cos x = sin(x + pi/2): one quadrant further */
    LLVMValueRef q = cosine ? iadd(e, n, KI(e, 1)) : n;
    LLVMValueRef odd = icmp(e, LLVMIntNE, iand(e, q, KI(e, 1)), KI(e, 0));
    LLVMValueRef flip = icmp(e, LLVMIntNE, iand(e, q, KI(e, 2)), KI(e, 0));
    LLVMValueRef r = sel(e, odd, c, s);
    return sel(e, flip, neg(e, r), r);
}

/* ---------------------------------------------------------------------------------------------
 * sin, cos beyond the Cody-Waite range: Payne-Hanek
 *
 * Lanes with NX_X86_TRIG_FAST_MAX < |x| < inf are rare in real data, so they take a slow path
 * that costs the common case one compare per vector: the inline fast path's result r is passed,
 * with x, to nx.trig.<sin|cos>.f64(x, r), which returns r unless |x| needs the exact reduction.
 * That function is not inlined; the call carries vector-function-abi-variant names, so the loop
 * vectoriser calls nx.trig.<fn>.v<N>f64(x, r) (N = 4, 8) once per vector instead: the variant
 * tests every lane with one vector compare and returns r at once when none is large (no stack
 * frame), else tail-calls nx.trig.<fn>.slow.v<N>f64, which runs the scalar function on each lane
 * (through nx.trig.<fn>.lanes). The vectoriser cannot branch on "any lane": inline, the
 * reduction's table loads and 128-bit products would run in every lane of every vector. The
 * variants are kept alive through llvm.compiler.used, as only an attribute names them before
 * vectorisation. What the common case still pays is the call: the loop's hoisted constants move
 * to stack slots around it (within noise in cache, docs/perf/trig.md).
 * -------------------------------------------------------------------------------------------*/

/* The bits of 2/pi after the binary point, 64 per word, preceded by one word of zeros so that the
 * window for |x| just above 2^20 starts inside the table: word w holds bits 64(w-1)+1 ..
 * 64w. 1216 bits cover the largest double. Computed as floor(2^1217 / pi) with integer arithmetic
 * (pi by Machin's formula, 64 guard bits) and checked against fdlibm's ipio2 table. */
static const uint64_t two_over_pi[20] = {
    0x0000000000000000ull, 0xa2f9836e4e441529ull, 0xfc2757d1f534ddc0ull, 0xdb6295993c439041ull,
    0xfe5163abdebbc561ull, 0xb7246e3a424dd2e0ull, 0x06492eea09d1921cull, 0xfe1deb1cb129a73eull,
    0xe88235f52ebb4484ull, 0xe99c7026b45f7e41ull, 0x3991d639835339f4ull, 0x9c845f8bbdf9283bull,
    0x1ff897ffde05980full, 0xef2f118b5a0a6d1full, 0x6d367ecf27cb09b7ull, 0x4f463f669e5fea2dull,
    0x7527bac7ebe5f17bull, 0x3d0739f78a5292eaull, 0x6bfb5fb11f8d5d08ull, 0x56033046fc7b6babull,
};

static LLVMValueRef table_2opi(const em *e)
{
    LLVMValueRef g = LLVMGetNamedGlobal(e->mod, "nx.trig.2overpi");
    if (g)
        return g;
    LLVMTypeRef i64 = LLVMInt64TypeInContext(e->c);
    LLVMValueRef w[20];
    for (int i = 0; i < 20; i++)
        w[i] = LLVMConstInt(i64, two_over_pi[i], 0);
    LLVMTypeRef at = LLVMArrayType(i64, 20);
    g = LLVMAddGlobal(e->mod, at, "nx.trig.2overpi");
    LLVMSetInitializer(g, LLVMConstArray(i64, w, 20));
    LLVMSetGlobalConstant(g, 1);
    LLVMSetLinkage(g, LLVMInternalLinkage);
    LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
    return g;
}

/* The i128 constant hi 2^64 + lo (no constant expressions: LLVM 19 dropped shl's). */
static LLVMValueRef i128c(const em *e, uint64_t hi, uint64_t lo)
{
    const uint64_t words[2] = {lo, hi};
    return LLVMConstIntOfArbitraryPrecision(LLVMInt128TypeInContext(e->c), 2, words);
}

/* 128-bit product of two 64-bit unsigned integers. */
static LLVMValueRef mul128(const em *e, LLVMValueRef a, LLVMValueRef b)
{
    LLVMTypeRef t = LLVMInt128TypeInContext(e->c);
    return LLVMBuildMul(e->b, LLVMBuildZExt(e->b, a, t, ""), LLVMBuildZExt(e->b, b, t, ""), "");
}

static LLVMValueRef fshl64(const em *e, LLVMValueRef hi, LLVMValueRef lo, LLVMValueRef sh)
{
    LLVMTypeRef t = LLVMInt64TypeInContext(e->c);
    unsigned id = LLVMLookupIntrinsicID("llvm.fshl", 9);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(e->mod, id, &t, 1);
    LLVMValueRef args[] = {hi, lo, sh};
    return LLVMBuildCall2(e->b, LLVMIntrinsicGetType(e->c, id, &t, 1), fn, args, 3, "");
}

/* Payne-Hanek, for finite scalar double x with |x| > 2^20 (e is scalar f64).
 *
 * |x| = m 2^E with m a 53-bit integer. Taking the table's 192 bits W from bit E - 2 on, so that
 * W 2^-192 = frac(2^(E-2) 2/pi) to 2^-192, |x| 2/pi = 4 m W 2^-192 modulo 4 (the bits before
 * the window add multiples of 4: whole turns). Of P = m W, bits 190-191 are the quadrant and bits
 * below 190 the fraction; bits 64..191 are kept (Z), an error under 2^-125 quarter turns, while
 * the closest double to a multiple of pi/2 is 2^-61 away from it. Z rounded to the nearest
 * quadrant leaves a signed fraction f, |f| <= 2^125, made a double-double (its top 106 bits)
 * and multiplied by pi/2. */

/* Z = bits 64..191 of P = m W: |x| 2/pi modulo 4 in units of 2^-126, to within one unit. */
static LLVMValueRef quarter_turns(const em *e, LLVMValueRef ix)
{
    LLVMBuilderRef b = e->b;
    LLVMTypeRef i64 = LLVMInt64TypeInContext(e->c), i128 = LLVMInt128TypeInContext(e->c);
    LLVMValueRef ex = iand(e, LLVMBuildLShr(b, ix, KI(e, 52), ""), KI(e, 0x7ff));
    LLVMValueRef m = LLVMBuildOr(b, iand(e, ix, KI(e, (1ll << 52) - 1)), KI(e, 1ll << 52), "");
    /* E = ex - 1075; the window starts at bit E - 2, 64 bits into the table */
    LLVMValueRef k = isub(e, ex, KI(e, 1075 + 2 - 64));
    LLVMValueRef q = LLVMBuildLShr(b, k, KI(e, 6), "");
    LLVMValueRef r = iand(e, k, KI(e, 63));
    LLVMValueRef tab = table_2opi(e), t[4];
    LLVMTypeRef at = LLVMArrayType(i64, 20);
    for (int i = 0; i < 4; i++) {
        LLVMValueRef idx[] = {KI(e, 0), iadd(e, q, KI(e, i))};
        LLVMValueRef p = LLVMBuildInBoundsGEP2(b, at, tab, idx, 2, "");
        t[i] = LLVMBuildLoad2(b, i64, p, "");
    }
    LLVMValueRef w2 = fshl64(e, t[0], t[1], r), w1 = fshl64(e, t[1], t[2], r);
    LLVMValueRef w0 = fshl64(e, t[2], t[3], r);
    /* (P >> 64) mod 2^128: of m w2 only the low 64 bits count */
    LLVMValueRef c64 = LLVMConstInt(i128, 64, 0);
    LLVMValueRef top =
        LLVMBuildShl(b, LLVMBuildZExt(b, LLVMBuildMul(b, m, w2, ""), i128, ""), c64, "");
    LLVMValueRef z = LLVMBuildAdd(b, top, mul128(e, m, w1), "");
    return LLVMBuildAdd(b, z, LLVMBuildLShr(b, mul128(e, m, w0), c64, ""), "");
}

/* th + tl = a 2^-126 for 0 < a < 2^126 (its top 106 bits). */
static void fraction_dd(const em *e, LLVMValueRef a, LLVMValueRef *th, LLVMValueRef *tl)
{
    LLVMBuilderRef b = e->b;
    LLVMTypeRef i64 = LLVMInt64TypeInContext(e->c), i128 = LLVMInt128TypeInContext(e->c);
    LLVMTypeRef f64 = LLVMDoubleTypeInContext(e->c);
    unsigned id = LLVMLookupIntrinsicID("llvm.ctlz", 9);
    LLVMValueRef ctlz = LLVMGetIntrinsicDeclaration(e->mod, id, &i128, 1);
    LLVMValueRef cargs[] = {a, LLVMConstInt(LLVMInt1TypeInContext(e->c), 0, 0)};
    LLVMValueRef lz =
        LLVMBuildCall2(b, LLVMIntrinsicGetType(e->c, id, &i128, 1), ctlz, cargs, 2, "");
    LLVMValueRef an = LLVMBuildShl(b, a, lz, "");
    /* bits 127..75 and 74..22 of the normalised fraction, each exact in a double */
    LLVMValueRef dh =
        LLVMBuildTrunc(b, LLVMBuildLShr(b, an, LLVMConstInt(i128, 75, 0), ""), i64, "");
    LLVMValueRef dl =
        LLVMBuildTrunc(b, LLVMBuildLShr(b, an, LLVMConstInt(i128, 22, 0), ""), i64, "");
    dl = iand(e, dl, KI(e, (1ll << 53) - 1));
    LLVMValueRef lz64 = LLVMBuildTrunc(b, lz, i64, "");
    /* a 2^-126 = dh 2^(75-126-lz) + dl 2^(22-126-lz) */
    *th = mul(e, LLVMBuildSIToFP(b, dh, f64, ""), pow2i(e, isub(e, KI(e, -51), lz64)));
    *tl = mul(e, LLVMBuildSIToFP(b, dl, f64, ""), pow2i(e, isub(e, KI(e, -104), lz64)));
}

/* x - n pi/2 = y0 + y1 (see above). */
static void rem_pio2_big(const em *e, LLVMValueRef x, LLVMValueRef *y0, LLVMValueRef *y1,
                         LLVMValueRef *n)
{
    LLVMBuilderRef b = e->b;
    LLVMTypeRef i64 = LLVMInt64TypeInContext(e->c), i128 = LLVMInt128TypeInContext(e->c);
    LLVMValueRef ix = to_int(e, x);
    /* to the nearest quadrant: f in [-2^125, 2^125) */
    LLVMValueRef z = LLVMBuildAdd(b, quarter_turns(e, ix), i128c(e, 1ull << 61, 0), "");
    LLVMValueRef quad =
        LLVMBuildTrunc(b, LLVMBuildLShr(b, z, LLVMConstInt(i128, 126, 0), ""), i64, "");
    LLVMValueRef f = LLVMBuildAnd(b, z, i128c(e, (1ull << 62) - 1, ~0ull), ""); /* mod 2^126 */
    f = LLVMBuildSub(b, f, i128c(e, 1ull << 61, 0), "");
    LLVMValueRef fneg = LLVMBuildICmp(b, LLVMIntSLT, f, LLVMConstInt(i128, 0, 0), "");
    LLVMValueRef a = LLVMBuildSelect(b, fneg, LLVMBuildNeg(b, f, ""), f, "");
    a = LLVMBuildOr(b, a, LLVMConstInt(i128, 1, 0), ""); /* never 0: ctlz stays below 128 */
    LLVMValueRef th, tl;
    fraction_dd(e, a, &th, &tl);
    /* (th + tl) pi/2, pi/2 = PIO2_HI + PIO2_LO */
    LLVMValueRef ph, pe;
    two_prod(e, th, K(e, 0x1.921fb54442d18p+0), &ph, &pe);
    LLVMValueRef pl = add(
        e, pe,
        add(e, mul(e, th, K(e, 0x1.1a62633145c07p-54)), mul(e, tl, K(e, 0x1.921fb54442d18p+0))));
    LLVMValueRef s0 = add(e, ph, pl);
    LLVMValueRef s1 = sub(e, pl, sub(e, s0, ph));
    /* the reduction was of |x|: odd symmetry for x < 0, and f's sign */
    LLVMValueRef xneg = icmp(e, LLVMIntSLT, ix, KI(e, 0));
    LLVMValueRef flip = LLVMBuildXor(b, xneg, fneg, "");
    *y0 = sel(e, flip, neg(e, s0), s0);
    *y1 = sel(e, flip, neg(e, s1), s1);
    *n = sel(e, xneg, isub(e, KI(e, 0), quad), quad);
}

/* Lanes that the fast reduction cannot do (inf and NaN it turns into NaN itself). */
static LLVMValueRef needs_big(const em *e, LLVMValueRef x)
{
    LLVMValueRef ax = fabs_(e, x);
    return and1(e, fcmp(e, LLVMRealOGT, ax, K(e, NX_X86_TRIG_FAST_MAX)),
                fcmp(e, LLVMRealOLT, ax, K(e, INFINITY)));
}

static void add_attr(LLVMContextRef c, LLVMValueRef fn, const char *name)
{
    unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
    if (kind)
        LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                                LLVMCreateEnumAttribute(c, kind, 0));
}

/* The slow path's functions: not inlined (inline, the vectoriser would widen them) and compiled
 * without optimisation (optnone): they run only for huge arguments, and optimising them more than
 * doubled the compile time of a sin kernel (51M -> 98M instructions of LLVM; 70M with optnone, on
 * the loop of tests/jit's bench-trig). */
static void slow_attrs(LLVMContextRef c, LLVMValueRef f)
{
    add_attr(c, f, "noinline");
    add_attr(c, f, "optnone");
    add_attr(c, f, "nounwind");
}

/* Pure: reads only the constant table. LLVM 16 replaced readnone on functions by memory(none)
 * (value 0 of the memory attribute); the vectoriser needs one of them to widen the call. */
static void add_readnone(LLVMContextRef c, LLVMValueRef fn_or_call, bool call)
{
#if LLVM_VERSION_MAJOR >= 16
    const char *name = "memory";
#else
    const char *name = "readnone";
#endif
    unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
    LLVMAttributeRef a = LLVMCreateEnumAttribute(c, kind, 0);
    if (call)
        LLVMAddCallSiteAttribute(fn_or_call, LLVMAttributeFunctionIndex, a);
    else
        LLVMAddAttributeAtIndex(fn_or_call, LLVMAttributeFunctionIndex, a);
}

static void big_name(char *buf, size_t len, bool cosine, unsigned lanes)
{
    if (lanes)
        snprintf(buf, len, "nx.trig.%s.v%uf64", cosine ? "cos" : "sin", lanes);
    else
        snprintf(buf, len, "nx.trig.%s.f64", cosine ? "cos" : "sin");
}

/* An em for the same context and module, of f64 with `lanes` lanes, with a builder at the end of
 * a new block of fn. */
static em em_in(const em *e, unsigned lanes, LLVMValueRef fn, LLVMBasicBlockRef *bb)
{
    em s = *e;
    s.lanes = lanes;
    s.f64 = true;
    LLVMTypeRef f = LLVMDoubleTypeInContext(e->c), i = LLVMInt64TypeInContext(e->c);
    s.ft = lanes ? LLVMVectorType(f, lanes) : f;
    s.it = lanes ? LLVMVectorType(i, lanes) : i;
    s.b = LLVMCreateBuilderInContext(e->c);
    *bb = LLVMAppendBasicBlockInContext(e->c, fn, "entry");
    LLVMPositionBuilderAtEnd(s.b, *bb);
    return s;
}

/* `double nx.trig.<fn>.big(double x)`: sin or cos of x for finite |x| > NX_X86_TRIG_FAST_MAX,
 * through rem_pio2_big (slow_attrs: not optimised). */
static LLVMValueRef big_reduce(const em *e, bool cosine)
{
    char name[40];
    snprintf(name, sizeof name, "nx.trig.%s.big", cosine ? "cos" : "sin");
    LLVMValueRef f = LLVMGetNamedFunction(e->mod, name);
    if (f)
        return f;
    LLVMTypeRef d = LLVMDoubleTypeInContext(e->c);
    f = LLVMAddFunction(e->mod, name, LLVMFunctionType(d, &d, 1, 0));
    LLVMSetLinkage(f, LLVMInternalLinkage);
    slow_attrs(e->c, f);
    add_attr(e->c, f, "willreturn");
    add_readnone(e->c, f, false);
    LLVMBasicBlockRef entry;
    em s = em_in(e, 0, f, &entry);
    LLVMValueRef y0, y1, n;
    rem_pio2_big(&s, LLVMGetParam(f, 0), &y0, &y1, &n);
    LLVMBuildRet(s.b, trig_quadrant(&s, y0, y1, n, cosine));
    LLVMDisposeBuilder(s.b);
    return f;
}

/* `double nx.trig.<fn>.f64(double x, double r)`: r, or for finite |x| > NX_X86_TRIG_FAST_MAX,
 * sin or cos of x. Optimised and small (a compare, a tail call): loops that stay scalar, such as
 * ordered folds, call it for every element. */
static LLVMValueRef big_scalar(const em *e, bool cosine)
{
    char name[40];
    big_name(name, sizeof name, cosine, 0);
    LLVMValueRef f = LLVMGetNamedFunction(e->mod, name);
    if (f)
        return f;
    LLVMValueRef big = big_reduce(e, cosine);
    LLVMTypeRef d = LLVMDoubleTypeInContext(e->c), params[] = {d, d};
    f = LLVMAddFunction(e->mod, name, LLVMFunctionType(d, params, 2, 0));
    LLVMSetLinkage(f, LLVMInternalLinkage);
    add_attr(e->c, f, "noinline");
    add_attr(e->c, f, "nounwind");
    add_attr(e->c, f, "willreturn");
    add_readnone(e->c, f, false);
    LLVMBasicBlockRef entry;
    em s = em_in(e, 0, f, &entry);
    LLVMValueRef x = LLVMGetParam(f, 0);
    LLVMBasicBlockRef slow = LLVMAppendBasicBlockInContext(e->c, f, "big");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->c, f, "small");
    LLVMBuildCondBr(s.b, needs_big(&s, x), slow, done);
    LLVMPositionBuilderAtEnd(s.b, done);
    LLVMBuildRet(s.b, LLVMGetParam(f, 1));
    LLVMPositionBuilderAtEnd(s.b, slow);
    LLVMValueRef c = LLVMBuildCall2(s.b, LLVMGlobalGetValueType(big), big, &x, 1, "");
    LLVMSetTailCall(c, 1);
    LLVMBuildRet(s.b, c);
    LLVMDisposeBuilder(s.b);
    return f;
}

/* `void nx.trig.<fn>.lanes(double *x, double *r, i64 n)`: r[i] = nx.trig.<fn>.f64(x[i], r[i]). */
static LLVMValueRef big_lanes(const em *e, bool cosine)
{
    char name[40];
    snprintf(name, sizeof name, "nx.trig.%s.lanes", cosine ? "cos" : "sin");
    LLVMValueRef f = LLVMGetNamedFunction(e->mod, name);
    if (f)
        return f;
    LLVMValueRef scalar = big_scalar(e, cosine);
    LLVMTypeRef d = LLVMDoubleTypeInContext(e->c), dp = LLVMPointerType(d, 0);
    LLVMTypeRef i64 = LLVMInt64TypeInContext(e->c);
    LLVMTypeRef params[] = {dp, dp, i64};
    f = LLVMAddFunction(e->mod, name, LLVMFunctionType(LLVMVoidTypeInContext(e->c), params, 3, 0));
    LLVMSetLinkage(f, LLVMInternalLinkage);
    slow_attrs(e->c, f);
    LLVMBasicBlockRef entry;
    em s = em_in(e, 0, f, &entry);
    LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(e->c, f, "lane");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->c, f, "done");
    LLVMBuildBr(s.b, loop);
    LLVMPositionBuilderAtEnd(s.b, loop);
    LLVMValueRef i = LLVMBuildPhi(s.b, i64, "");
    LLVMValueRef xp = LLVMBuildInBoundsGEP2(s.b, d, LLVMGetParam(f, 0), &i, 1, "");
    LLVMValueRef rp = LLVMBuildInBoundsGEP2(s.b, d, LLVMGetParam(f, 1), &i, 1, "");
    LLVMValueRef args[] = {LLVMBuildLoad2(s.b, d, xp, ""), LLVMBuildLoad2(s.b, d, rp, "")};
    LLVMBuildStore(s.b, LLVMBuildCall2(s.b, LLVMGlobalGetValueType(scalar), scalar, args, 2, ""),
                   rp);
    LLVMValueRef next = LLVMBuildAdd(s.b, i, LLVMConstInt(i64, 1, 0), "");
    LLVMBuildCondBr(s.b, LLVMBuildICmp(s.b, LLVMIntULT, next, LLVMGetParam(f, 2), ""), loop, done);
    LLVMValueRef iv[] = {LLVMConstInt(i64, 0, 0), next};
    LLVMBasicBlockRef ib[] = {entry, loop};
    LLVMAddIncoming(i, iv, ib, 2);
    LLVMPositionBuilderAtEnd(s.b, done);
    LLVMBuildRetVoid(s.b);
    LLVMDisposeBuilder(s.b);
    return f;
}

/* Adds f to llvm.compiler.used (appending), so that globaldce keeps it. This file adds at most
 * one entry per vector variant (sin and cos, 1..MAX_LANES lanes); a list longer than that room
 * (entries of others) is left as it is: the variant may then be deleted, and the loop vectoriser,
 * finding no mapping, leaves the loop scalar (slower, still correct). */
static void keep_used(const em *e, LLVMValueRef f)
{
    LLVMTypeRef ptr = LLVMPointerType(LLVMInt8TypeInContext(e->c), 0);
    LLVMValueRef old = LLVMGetNamedGlobal(e->mod, "llvm.compiler.used");
    LLVMValueRef v[2 * MAX_LANES + 16];
    unsigned n = 0;
    if (old) {
        LLVMValueRef init = LLVMGetInitializer(old);
        unsigned k = init ? (unsigned)LLVMGetNumOperands(init) : 0;
        if (k >= sizeof v / sizeof *v)
            return;
        for (unsigned i = 0; i < k; i++)
            v[n++] = LLVMGetOperand(init, i);
        LLVMDeleteGlobal(old);
    }
    v[n++] = LLVMConstBitCast(f, ptr);
    LLVMValueRef g = LLVMAddGlobal(e->mod, LLVMArrayType(ptr, n), "llvm.compiler.used");
    LLVMSetInitializer(g, LLVMConstArray(ptr, v, n));
    LLVMSetLinkage(g, LLVMAppendingLinkage);
    LLVMSetSection(g, "llvm.metadata");
}

/* `<N x double> nx.trig.<fn>.slow.v<N>f64(x, r)`: the scalar function on each lane, through
 * memory, so that the variants of every width share one loop over lanes. */
static LLVMValueRef big_vector_slow(const em *e, bool cosine, unsigned lanes)
{
    char name[48];
    snprintf(name, sizeof name, "nx.trig.%s.slow.v%uf64", cosine ? "cos" : "sin", lanes);
    LLVMValueRef f = LLVMGetNamedFunction(e->mod, name);
    if (f)
        return f;
    LLVMTypeRef d = LLVMDoubleTypeInContext(e->c), vt = LLVMVectorType(d, lanes);
    LLVMTypeRef params[] = {vt, vt};
    f = LLVMAddFunction(e->mod, name, LLVMFunctionType(vt, params, 2, 0));
    LLVMSetLinkage(f, LLVMInternalLinkage);
    slow_attrs(e->c, f);
    LLVMBasicBlockRef entry;
    em s = em_in(e, lanes, f, &entry);
    LLVMValueRef xa = LLVMBuildAlloca(s.b, vt, ""), ra = LLVMBuildAlloca(s.b, vt, "");
    LLVMBuildStore(s.b, LLVMGetParam(f, 0), xa);
    LLVMBuildStore(s.b, LLVMGetParam(f, 1), ra);
    LLVMTypeRef dp = LLVMPointerType(d, 0);
    LLVMValueRef args[] = {LLVMBuildBitCast(s.b, xa, dp, ""), LLVMBuildBitCast(s.b, ra, dp, ""),
                           LLVMConstInt(LLVMInt64TypeInContext(e->c), lanes, 0)};
    LLVMValueRef each = big_lanes(e, cosine);
    LLVMBuildCall2(s.b, LLVMGlobalGetValueType(each), each, args, 3, "");
    LLVMBuildRet(s.b, LLVMBuildLoad2(s.b, vt, ra, ""));
    LLVMDisposeBuilder(s.b);
    return f;
}

/* `<N x double> nx.trig.<fn>.v<N>f64(x, r)`: r unless some lane needs the big reduction. It is
 * on the hot path, once per vector: one compare of all lanes, and no stack frame (the slow part
 * is a tail call). */
static LLVMValueRef big_vector(const em *e, bool cosine, unsigned lanes)
{
    char name[40];
    big_name(name, sizeof name, cosine, lanes);
    LLVMValueRef f = LLVMGetNamedFunction(e->mod, name);
    if (f)
        return f;
    LLVMValueRef slow_fn = big_vector_slow(e, cosine, lanes);
    LLVMTypeRef vt = LLVMVectorType(LLVMDoubleTypeInContext(e->c), lanes);
    LLVMTypeRef params[] = {vt, vt};
    f = LLVMAddFunction(e->mod, name, LLVMFunctionType(vt, params, 2, 0));
    LLVMSetLinkage(f, LLVMInternalLinkage);
    add_attr(e->c, f, "nounwind");
    add_attr(e->c, f, "willreturn");
    add_readnone(e->c, f, false);
    keep_used(e, f);
    LLVMBasicBlockRef entry;
    em s = em_in(e, lanes, f, &entry);
    LLVMValueRef x = LLVMGetParam(f, 0), r = LLVMGetParam(f, 1);
    /* infinities pass this test too: rare, and the scalar function leaves them as r (NaN) */
    LLVMValueRef big = fcmp(&s, LLVMRealOGT, fabs_(&s, x), K(&s, NX_X86_TRIG_FAST_MAX));
    LLVMValueRef mask = LLVMBuildBitCast(s.b, big, LLVMIntTypeInContext(e->c, lanes), "");
    LLVMValueRef any = LLVMBuildICmp(s.b, LLVMIntNE, mask, LLVMConstNull(LLVMTypeOf(mask)), "");
    LLVMBasicBlockRef slow = LLVMAppendBasicBlockInContext(e->c, f, "big");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->c, f, "small");
    LLVMBuildCondBr(s.b, any, slow, done);
    LLVMPositionBuilderAtEnd(s.b, done);
    LLVMBuildRet(s.b, r);
    LLVMPositionBuilderAtEnd(s.b, slow);
    LLVMValueRef args[] = {x, r};
    LLVMValueRef c = LLVMBuildCall2(s.b, LLVMGlobalGetValueType(slow_fn), slow_fn, args, 2, "");
    LLVMSetTailCall(c, 1);
    LLVMBuildRet(s.b, c);
    LLVMDisposeBuilder(s.b);
    return f;
}

/* The call that replaces r where x needs the big reduction (see the section comment). */
static LLVMValueRef big_fixup(const em *e, LLVMValueRef x, LLVMValueRef r, bool cosine)
{
    static const unsigned vfs[] = {4, 8};
    LLVMValueRef f;
    char attr[512] = "";
    if (e->lanes) {
        f = big_vector(e, cosine, e->lanes);
    } else {
        f = big_scalar(e, cosine);
        char scalar[40], vec[40];
        big_name(scalar, sizeof scalar, cosine, 0);
        size_t len = 0;
        for (size_t i = 0; i < sizeof vfs / sizeof *vfs; i++) {
            big_vector(e, cosine, vfs[i]);
            big_name(vec, sizeof vec, cosine, vfs[i]);
            len += (size_t)snprintf(attr + len, sizeof attr - len, "%s_ZGV_LLVM_N%uvv_%s(%s)",
                                    i ? "," : "", vfs[i], scalar, vec);
        }
    }
    LLVMValueRef args[] = {x, r};
    LLVMValueRef call = LLVMBuildCall2(e->b, LLVMGlobalGetValueType(f), f, args, 2, "");
    add_readnone(e->c, call, true);
    if (attr[0]) {
        static const char key[] = "vector-function-abi-variant";
        LLVMAddCallSiteAttribute(
            call, LLVMAttributeFunctionIndex,
            LLVMCreateStringAttribute(e->c, key, sizeof key - 1, attr, (unsigned)strlen(attr)));
    }
    return call;
}

static LLVMValueRef sincos64(const em *e, LLVMValueRef x, bool cosine)
{
    LLVMValueRef y0, y1, n;
    rem_pio2(e, x, &y0, &y1, &n);
    LLVMValueRef r = trig_quadrant(e, y0, y1, n, cosine);
    if (!cosine)
        r = sel(e, fcmp(e, LLVMRealOEQ, x, K(e, 0.0)), x, r); /* keeps -0 */
    return big_fixup(e, x, r, cosine);
}

/* ---------------------------------------------------------------------------------------------
 * pow
 * -------------------------------------------------------------------------------------------*/

/* log|x| as hi + lo to about 2^-70 relative, for finite x != 0. m is divided by the nearest of
 * c = 2^(j/8), j = -4..4 (selected, no table load), leaving s = (m-c)/(m+c) below 0.022, so that
 * the rounding of the s^3 tail stays below 2^-68 (pow multiplies it by |y|, up to ~2^13 for
 * results that do not overflow). log c is held as hi + lo. */
static void log_dd(const em *e, LLVMValueRef ax, LLVMValueRef *hi, LLVMValueRef *lo)
{
    static const double cj[9] = {
        0x1.6a09e667f3bcdp-1, 0x1.8ace5422aa0dbp-1, 0x1.ae89f995ad3adp-1, 0x1.d5818dcfba487p-1, 1.0,
        0x1.172b83c7d517bp+0, 0x1.306fe0a31b715p+0, 0x1.4bfdad5362a27p+0, 0x1.6a09e667f3bcdp+0};
    static const double lch[9] = {-0x1.62e42fefa39eep-2,
                                  -0x1.0a2b23f3bab74p-2,
                                  -0x1.62e42fefa39f1p-3,
                                  -0x1.62e42fefa39f0p-4,
                                  0.0,
                                  0x1.62e42fefa39f1p-4,
                                  0x1.62e42fefa39eep-3,
                                  0x1.0a2b23f3bab73p-2,
                                  0x1.62e42fefa39f0p-2};
    static const double lcl[9] = {0x1.716fdfdbc882ep-60,
                                  -0x1.5751ada176580p-56,
                                  0x1.1be94b9b38e2ep-60,
                                  -0x1.fec65b690debdp-58,
                                  0.0,
                                  0x1.c6dfce592b4bap-59,
                                  0x1.43cf36d08a40cp-64,
                                  0x1.baf64d5d7033bp-59,
                                  0x1.c2e0e1b1548c2p-56};
    static const double cut[8] = {0x1.7a11473eb0187p-1, 0x1.9c49182a3f090p-1, 0x1.c199bdd85529cp-1,
                                  0x1.ea4afa2a490dap-1, 0x1.0b5586cf9890fp+0, 0x1.2387a6e756238p+0,
                                  0x1.3dea64c123422p+0, 0x1.5ab07dd485429p+0};
    static const double Q[] = {2.0 / 3, 2.0 / 5, 2.0 / 7, 2.0 / 9, 2.0 / 11, 2.0 / 13};
    LLVMValueRef tiny = fcmp(e, LLVMRealOLT, ax, K(e, 0x1p-1022));
    LLVMValueRef xs = sel(e, tiny, mul(e, ax, K(e, 0x1p54)), ax);
    LLVMValueRef k, m;
    decompose(e, xs, &k, &m);
    k = sel(e, tiny, isub(e, k, KI(e, 54)), k);
    LLVMValueRef c = K(e, cj[0]), ch = K(e, lch[0]), cl = K(e, lcl[0]);
    for (int j = 1; j < 9; j++) {
        LLVMValueRef ge = fcmp(e, LLVMRealOGE, m, K(e, cut[j - 1]));
        c = sel(e, ge, K(e, cj[j]), c);
        ch = sel(e, ge, K(e, lch[j]), ch);
        cl = sel(e, ge, K(e, lcl[j]), cl);
    }
    /* s = u/d with u = m - c exact (Sterbenz), d = m + c as dh + dl */
    LLVMValueRef u = sub(e, m, c);
    LLVMValueRef dh, dl, p, pe;
    two_sum(e, m, c, &dh, &dl);
    LLVMValueRef sh = divf(e, u, dh);
    two_prod(e, sh, dh, &p, &pe);
    LLVMValueRef sl = divf(e, sub(e, sub(e, sub(e, u, p), pe), mul(e, sh, dl)), dh);
    /* log(m/c) = 2 atanh(s) = 2s + s^3 (2/3 + 2 s^2/5 + ...) */
    LLVMValueRef z = mul(e, sh, sh);
    LLVMValueRef T = mul(e, mul(e, z, sh), poly(e, z, Q, 6));
    LLVMValueRef kf = int_to_float(e, k);
    LLVMValueRef s1, e1, s2, e2;
    two_sum(e, mul(e, kf, K(e, LN2_HI)), ch, &s1, &e1);
    two_sum(e, s1, mul(e, K(e, 2.0), sh), &s2, &e2);
    LLVMValueRef rest = add(e, add(e, mul(e, kf, K(e, LN2_LO)), cl), mul(e, K(e, 2.0), sl));
    rest = add(e, add(e, add(e, e1, e2), rest), T);
    *hi = add(e, s2, rest);
    *lo = sub(e, rest, sub(e, *hi, s2));
}

/* Is y an integer, and an odd one? (Huge doubles are even integers; inf counts as even.) */
static void int_parity(const em *e, LLVMValueRef y, LLVMValueRef *is_int, LLVMValueRef *odd)
{
    LLVMValueRef t = y;
    LLVMValueRef tr = intrinsic(e, "llvm.trunc", &t, 1);
    *is_int = fcmp(e, LLVMRealOEQ, tr, y);
    LLVMValueRef h = mul(e, y, K(e, 0.5));
    LLVMValueRef htr = intrinsic(e, "llvm.trunc", &h, 1);
    *odd = and1(e, *is_int, fcmp(e, LLVMRealUNE, htr, h));
}

static LLVMValueRef pow64(const em *e, LLVMValueRef x, LLVMValueRef y)
{
    LLVMValueRef ax = fabs_(e, x);
    LLVMValueRef lh, ll;
    log_dd(e, ax, &lh, &ll);
    LLVMValueRef ax0 = fcmp(e, LLVMRealOEQ, ax, K(e, 0.0));
    LLVMValueRef axinf = fcmp(e, LLVMRealOEQ, ax, K(e, INFINITY));
    lh = sel(e, ax0, K(e, -INFINITY), sel(e, axinf, K(e, INFINITY), lh));
    ll = sel(e, or1(e, ax0, axinf), K(e, 0.0), ll);
    /* y log|x| as ph + pl */
    LLVMValueRef ph, pe;
    two_prod(e, y, lh, &ph, &pe);
    LLVMValueRef pl = add(e, pe, mul(e, y, ll));
    /* where the result over- or underflows anyway the low part may be NaN or inf: drop it */
    LLVMValueRef sane =
        and1(e, fcmp(e, LLVMRealOLT, fabs_(e, ph), K(e, 800.0)), fcmp(e, LLVMRealORD, pl, pl));
    pl = sel(e, sane, pl, K(e, 0.0));
    LLVMValueRef pc = clamp(e, ph, -1000.0, 1000.0); /* keeps k/2 a valid exponent */
    LLVMValueRef kf, ki;
    round_shift(e, mul(e, pc, K(e, INV_LN2)), &kf, &ki);
    LLVMValueRef hi = sub(e, pc, mul(e, kf, K(e, LN2_HI)));
    LLVMValueRef lo = sub(e, mul(e, kf, K(e, LN2_LO)), pl);
    LLVMValueRef r = exp_core64(e, hi, lo, ki);
    /* negative x: defined for integer y only, negative for odd y */
    LLVMValueRef yint, yodd;
    int_parity(e, y, &yint, &yodd);
    LLVMValueRef xneg = fcmp(e, LLVMRealOLT, copysign_(e, K(e, 1.0), x), K(e, 0.0));
    r = sel(e, and1(e, xneg, yodd), neg(e, r), r);
    /* (-0)^y and (-inf)^y are defined for every y */
    LLVMValueRef xneg_finite =
        and1(e, fcmp(e, LLVMRealOLT, x, K(e, 0.0)), LLVMBuildNot(e->b, axinf, ""));
    r = sel(e, and1(e, xneg_finite, LLVMBuildNot(e->b, yint, "")), K(e, NAN), r);
    /* |x| = 1 with y = +-inf is 1; x = 1 or y = 0 give 1 even with a NaN */
    LLVMValueRef ax1 = fcmp(e, LLVMRealOEQ, ax, K(e, 1.0));
    LLVMValueRef yinf = fcmp(e, LLVMRealOEQ, fabs_(e, y), K(e, INFINITY));
    r = sel(e, and1(e, ax1, yinf), K(e, 1.0), r);
    r = sel(e, or1(e, is_nan(e, x), is_nan(e, y)), add(e, x, y), r);
    LLVMValueRef one =
        or1(e, fcmp(e, LLVMRealOEQ, x, K(e, 1.0)), fcmp(e, LLVMRealOEQ, y, K(e, 0.0)));
    return sel(e, one, K(e, 1.0), r);
}

/* ---------------------------------------------------------------------------------------------
 * Dispatch and function bodies
 * -------------------------------------------------------------------------------------------*/

/* The f64 emitter with e's lanes, for f32 functions computed in f64. */
/* ---------------------------------------------------------------------------------------------
 * atan2 (f64): fdlibm's atan (four reduction intervals, each with atan(c) in two parts, and an
 * 11-term odd polynomial) on |y| / |x|, every interval computed and the right one selected, then
 * e_atan2's quadrant rule and its special cases (C99 Annex F) by selects.
 * -------------------------------------------------------------------------------------------*/

static const double ATAN_HI[4] = {4.63647609000806093515e-01, 7.85398163397448278999e-01,
                                  9.82793723247329054082e-01, 1.57079632679489655800e+00};
static const double ATAN_LO[4] = {2.26987774529616870924e-17, 3.06161699786838301793e-17,
                                  1.39033110312309984516e-17, 6.12323399573676603587e-17};
static const double ATAN_EVEN[6] = {3.33333333333329318027e-01,  1.42857142725034663711e-01,
                                    9.09088713343650656196e-02,  6.66107313738753120669e-02,
                                    4.97687799461593236017e-02,  1.62858201153657823623e-02};
static const double ATAN_ODD[5] = {-1.99999999998764832476e-01, -1.11111104054623557880e-01,
                                   -7.69187620504482999495e-02, -5.83357013379057348645e-02,
                                   -3.65315727442169155270e-02};
static const double PI_HI = 3.1415926535897931160e+00, PI_LO = 1.2246467991473531772e-16;

/* atan(r) for r >= 0 (inf gives pi/2; NaN stays NaN). */
static LLVMValueRef atan_pos(const em *e, LLVMValueRef r)
{
    /* the interval: r < 7/16, < 11/16, < 19/16, < 39/16, above */
    LLVMValueRef c0 = fcmp(e, LLVMRealOLT, r, K(e, 0.4375));
    LLVMValueRef c1 = fcmp(e, LLVMRealOLT, r, K(e, 0.6875));
    LLVMValueRef c2 = fcmp(e, LLVMRealOLT, r, K(e, 1.1875));
    LLVMValueRef c3 = fcmp(e, LLVMRealOLT, r, K(e, 2.4375));
    LLVMValueRef one = K(e, 1.0);
    LLVMValueRef t1 = divf(e, sub(e, mul(e, K(e, 2.0), r), one), add(e, K(e, 2.0), r));
    LLVMValueRef t2 = divf(e, sub(e, r, one), add(e, r, one));
    LLVMValueRef t3 = divf(e, sub(e, r, K(e, 1.5)), fmad(e, K(e, 1.5), r, one));
    LLVMValueRef t4 = divf(e, K(e, -1.0), r);
    LLVMValueRef t = sel(e, c0, r, sel(e, c1, t1, sel(e, c2, t2, sel(e, c3, t3, t4))));
    LLVMValueRef hi = sel(e, c1, K(e, ATAN_HI[0]),
                          sel(e, c2, K(e, ATAN_HI[1]), sel(e, c3, K(e, ATAN_HI[2]),
                                                           K(e, ATAN_HI[3]))));
    LLVMValueRef lo = sel(e, c1, K(e, ATAN_LO[0]),
                          sel(e, c2, K(e, ATAN_LO[1]), sel(e, c3, K(e, ATAN_LO[2]),
                                                           K(e, ATAN_LO[3]))));
    LLVMValueRef z = mul(e, t, t), w = mul(e, z, z);
    LLVMValueRef s1 = mul(e, z, poly(e, w, ATAN_EVEN, 6));
    LLVMValueRef s2 = mul(e, w, poly(e, w, ATAN_ODD, 5));
    LLVMValueRef ts = mul(e, t, add(e, s1, s2));
    LLVMValueRef small = sub(e, t, ts);
    LLVMValueRef reduced = sub(e, hi, sub(e, sub(e, ts, lo), t));
    return sel(e, c0, small, reduced);
}

static LLVMValueRef sign_bit(const em *e, LLVMValueRef x)
{
    LLVMValueRef bits = LLVMBuildBitCast(e->b, x, e->it, "");
    return icmp(e, LLVMIntSLT, bits, splat(e, LLVMConstInt(scalar_i(e), 0, 0)));
}

static LLVMValueRef atan2_64(const em *e, LLVMValueRef y, LLVMValueRef x)
{
    LLVMValueRef ax = fabs_(e, x), ay = fabs_(e, y), inf = K(e, INFINITY), zero = K(e, 0.0);
    LLVMValueRef xneg = sign_bit(e, x);
    LLVMValueRef z = atan_pos(e, divf(e, ay, ax));
    /* x < 0 (or -0): pi - z, with pi's low part */
    LLVMValueRef r = sel(e, xneg, sub(e, K(e, PI_HI), sub(e, z, K(e, PI_LO))), z);
    /* special cases, the later ones winning: y = 0; x = 0; x infinite; y infinite (x finite) */
    LLVMValueRef y0 = fcmp(e, LLVMRealOEQ, y, zero), x0 = fcmp(e, LLVMRealOEQ, x, zero);
    LLVMValueRef xinf = fcmp(e, LLVMRealOEQ, ax, inf), yinf = fcmp(e, LLVMRealOEQ, ay, inf);
    r = sel(e, x0, K(e, PI_HI / 2), r);
    r = sel(e, xinf, sel(e, xneg, K(e, PI_HI), zero), r);
    r = sel(e, and1(e, xinf, yinf), sel(e, xneg, K(e, 3 * PI_HI / 4), K(e, PI_HI / 4)), r);
    r = sel(e, and1(e, yinf, LLVMBuildNot(e->b, xinf, "")), K(e, PI_HI / 2), r);
    r = sel(e, y0, sel(e, xneg, K(e, PI_HI), zero), r);
    r = copysign_(e, r, y);
    /* NaN in, NaN out */
    return sel(e, or1(e, is_nan(e, x), is_nan(e, y)), add(e, x, y), r);
}

static em widen(const em *e)
{
    em w = *e;
    w.f64 = true;
    LLVMTypeRef f = LLVMDoubleTypeInContext(e->c), i = LLVMInt64TypeInContext(e->c);
    w.ft = e->lanes ? LLVMVectorType(f, e->lanes) : f;
    w.it = e->lanes ? LLVMVectorType(i, e->lanes) : i;
    return w;
}

static LLVMValueRef eval64(const em *e, nx_x86_math_fn fn, LLVMValueRef x, LLVMValueRef y)
{
    switch (fn) {
    case NX_X86_MATH_EXP:
        return exp64(e, x);
    case NX_X86_MATH_LOG:
        return m_log(e, x);
    case NX_X86_MATH_LOG1P:
        return log1p64(e, x);
    case NX_X86_MATH_EXPM1:
        return expm1_64(e, x);
    case NX_X86_MATH_SIN:
        return sincos64(e, x, false);
    case NX_X86_MATH_COS:
        return sincos64(e, x, true);
    case NX_X86_MATH_TANH:
        return tanh64(e, x);
    case NX_X86_MATH_ERF:
        return erf64(e, x);
    case NX_X86_MATH_POW:
        return pow64(e, x, y);
    case NX_X86_MATH_SQRT:
        return intrinsic(e, "llvm.sqrt", &x, 1);
    case NX_X86_MATH_ATAN2:
        return atan2_64(e, x, y);
    default:
        return NULL;
    }
}

static LLVMValueRef eval(const em *e, nx_x86_math_fn fn, LLVMValueRef x, LLVMValueRef y)
{
    if (e->f64)
        return eval64(e, fn, x, y);
    switch (fn) {
    case NX_X86_MATH_EXP:
        return exp32(e, x);
    case NX_X86_MATH_LOG:
        return m_log(e, x);
    case NX_X86_MATH_SQRT:
        return intrinsic(e, "llvm.sqrt", &x, 1);
    default:
        break;
    }
    /* the rest in f64, rounded once: exact widening, then at most ~0.5 ulp + 2^-29 ulp */
    em w = widen(e);
    LLVMValueRef xd = LLVMBuildFPExt(e->b, x, w.ft, "");
    LLVMValueRef yd = y ? LLVMBuildFPExt(e->b, y, w.ft, "") : NULL;
    return LLVMBuildFPTrunc(e->b, eval64(&w, fn, xd, yd), e->ft, "");
}

/* Fills e's types from ty; false when ty is not float, double or a vector of them. */
static bool em_types(em *e, LLVMTypeRef ty)
{
    LLVMTypeRef s = ty;
    e->lanes = 0;
    if (LLVMGetTypeKind(ty) == LLVMVectorTypeKind) {
        e->lanes = LLVMGetVectorSize(ty);
        s = LLVMGetElementType(ty);
        if (e->lanes == 0 || e->lanes > MAX_LANES)
            return false;
    }
    LLVMTypeKind k = LLVMGetTypeKind(s);
    if (k != LLVMFloatTypeKind && k != LLVMDoubleTypeKind)
        return false;
    e->f64 = k == LLVMDoubleTypeKind;
    e->c = LLVMGetTypeContext(ty);
    e->ft = ty;
    LLVMTypeRef i = e->f64 ? LLVMInt64TypeInContext(e->c) : LLVMInt32TypeInContext(e->c);
    e->it = e->lanes ? LLVMVectorType(i, e->lanes) : i;
    return true;
}

static void type_suffix(const em *e, char *buf, size_t len)
{
    if (e->lanes)
        snprintf(buf, len, "v%u%s", e->lanes, e->f64 ? "f64" : "f32");
    else
        snprintf(buf, len, "%s", e->f64 ? "f64" : "f32");
}

static void add_fn_attr(LLVMContextRef c, LLVMValueRef fn, const char *name)
{
    unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
    if (kind)
        LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                                LLVMCreateEnumAttribute(c, kind, 0));
}

/* Gives the declared function fn its body. */
static void define_body(em *e, LLVMValueRef f, nx_x86_math_fn fn)
{
    LLVMSetLinkage(f, LLVMInternalLinkage);
    add_fn_attr(e->c, f, "alwaysinline");
    add_fn_attr(e->c, f, "nounwind");
    /* no readnone: LLVM 16 on accepts it on parameters only (memory(none) replaced it), and the
     * body is inlined anyway */
    add_fn_attr(e->c, f, "willreturn");
    e->b = LLVMCreateBuilderInContext(e->c);
    LLVMPositionBuilderAtEnd(e->b, LLVMAppendBasicBlockInContext(e->c, f, "entry"));
    LLVMValueRef y = nx_x86_math_arity(fn) == 2 ? LLVMGetParam(f, 1) : NULL;
    LLVMBuildRet(e->b, eval(e, fn, LLVMGetParam(f, 0), y));
    LLVMDisposeBuilder(e->b);
    e->b = NULL;
}

static LLVMTypeRef fn_type(const em *e, nx_x86_math_fn fn)
{
    LLVMTypeRef params[2] = {e->ft, e->ft};
    return LLVMFunctionType(e->ft, params, (unsigned)nx_x86_math_arity(fn), 0);
}

LLVMValueRef nx_x86_math_function(LLVMModuleRef mod, nx_x86_math_fn fn, LLVMTypeRef ty)
{
    em e = {.mod = mod};
    if ((unsigned)fn >= NX_X86_MATH_COUNT || !em_types(&e, ty))
        return NULL;
    char suffix[16], name[64];
    type_suffix(&e, suffix, sizeof suffix);
    snprintf(name, sizeof name, "nx.math.%s.%s", names[fn], suffix);
    LLVMValueRef f = LLVMGetNamedFunction(mod, name);
    if (f && LLVMGlobalGetValueType(f) != fn_type(&e, fn))
        return NULL;
    if (!f)
        f = LLVMAddFunction(mod, name, fn_type(&e, fn));
    if (LLVMCountBasicBlocks(f) == 0)
        define_body(&e, f, fn);
    return f;
}

LLVMValueRef nx_x86_math_call(LLVMBuilderRef b, LLVMModuleRef mod, nx_x86_math_fn fn,
                              LLVMValueRef x, LLVMValueRef y)
{
    LLVMTypeRef ty = LLVMTypeOf(x);
    LLVMValueRef f = nx_x86_math_function(mod, fn, ty);
    if (!f)
        return NULL;
    LLVMValueRef args[2] = {x, y};
    return LLVMBuildCall2(b, LLVMGlobalGetValueType(f), f, args, (unsigned)nx_x86_math_arity(fn),
                          "");
}

/* fn and the type named by "nx.math.<fn>.<suffix>"; false when name is not of this library. */
static bool parse_name(const char *name, nx_x86_math_fn *fn, const char **suffix)
{
    if (strncmp(name, "nx.math.", 8) != 0)
        return false;
    name += 8;
    for (int i = 0; i < NX_X86_MATH_COUNT; i++) {
        size_t n = strlen(names[i]);
        if (strncmp(name, names[i], n) == 0 && name[n] == '.') {
            *fn = (nx_x86_math_fn)i;
            *suffix = name + n + 1;
            return true;
        }
    }
    return false;
}

nx_status nx_x86_math_define_declared(nx_ctx *ctx, LLVMModuleRef mod)
{
    for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
        size_t len = 0;
        const char *name = LLVMGetValueName2(f, &len);
        nx_x86_math_fn fn;
        const char *suffix = NULL;
        if (LLVMCountBasicBlocks(f) != 0 || !parse_name(name, &fn, &suffix))
            continue;
        LLVMTypeRef fty = LLVMGlobalGetValueType(f);
        em e = {.mod = mod};
        char want[16];
        bool ok = LLVMCountParamTypes(fty) == (unsigned)nx_x86_math_arity(fn) &&
                  em_types(&e, LLVMGetReturnType(fty)) && fn_type(&e, fn) == fty;
        if (ok) {
            type_suffix(&e, want, sizeof want);
            ok = strcmp(want, suffix) == 0;
        }
        if (!ok)
            return nx_rt_error(ctx, NX_ERR_INTERNAL,
                               "x86 math: '%s' is declared with a type this library does not "
                               "provide; expected T %s(T%s) with T float, double or <N x float>, "
                               "<N x double> matching the suffix",
                               name, names[fn], nx_x86_math_arity(fn) == 2 ? ", T" : "");
        define_body(&e, f, fn);
    }
    return NX_OK;
}
