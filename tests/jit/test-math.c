/* The vectorisable math library (codegen/x86/math.c), measured inside JIT-ed loops that the loop
 * vectoriser widened (checked on the optimised IR), against glibc's long double functions
 * (64-bit significands: an oracle ~2^11 times finer than f64's ulp).
 *
 * Errors are in ulps of the exact (long double) value, measured on dense sweeps, random samples
 * over the whole domain (random bit patterns) and near hard points (multiples of pi/2, x near 1 in
 * pow, overflow and underflow thresholds). sin and cos also over |x| from 1e-30 to the largest
 * finite value and at the numbers nearest a multiple of pi/2 for every exponent (trig-hard.h,
 * written by gen-trig-hard.py), in the loop and through the graph API against the interpreter.
 * Special values (zeros, infinities, NaN, subnormals, extremes) must match libm exactly in class
 * and sign. Set NX_MATH_REPORT=1 to print the maxima.
 *
 * The bounds below are the maxima measured on an AMD EPYC (AVX-512, FMA) with LLVM 14, plus 0.05
 * ulp for hosts where fmuladd is not fused, rounded up to a quarter ulp: they are what this code
 * achieves, not targets. f32 functions other than exp and log are computed in f64 and rounded
 * once, hence their 0.5. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>

#include "codegen/x86/jit.h"
#include "codegen/x86/math.h"
#include "nitrix-graph.h"
#include "testutil.h"
#include "trig-hard.h"

typedef struct fn_case {
    nx_x86_math_fn fn;
    long double (*ref1)(long double);
    long double (*ref2)(long double, long double);
    double bound_f32, bound_f64; /* max ulp error allowed (measured, see above) */
} fn_case;

static const fn_case cases[] = {
    /* measured max (f32, f64), NS = 150000: exp 0.956, 0.844; log 0.768, 0.794; log1p 0.500,
     * 0.773; expm1 0.500, 0.810; sin 0.500, 0.737; cos 0.500, 0.738; tanh 0.500, 1.257; erf
     * 0.500, 0.916; pow 0.500, 0.870; sqrt 0.500, 0.500; atan2 0.500, 1.369 */
    {NX_X86_MATH_EXP, expl, NULL, 1.0, 1.0},
    {NX_X86_MATH_LOG, logl, NULL, 1.0, 1.0},
    {NX_X86_MATH_LOG1P, log1pl, NULL, 0.75, 1.0},
    {NX_X86_MATH_EXPM1, expm1l, NULL, 0.75, 1.0},
    {NX_X86_MATH_SIN, sinl, NULL, 0.75, 1.0},
    {NX_X86_MATH_COS, cosl, NULL, 0.75, 1.0},
    {NX_X86_MATH_TANH, tanhl, NULL, 0.75, 1.5},
    {NX_X86_MATH_ERF, erfl, NULL, 0.75, 1.0},
    {NX_X86_MATH_POW, NULL, powl, 0.75, 1.0},
    {NX_X86_MATH_SQRT, sqrtl, NULL, 0.5, 0.5}, /* IEEE: correctly rounded */
    {NX_X86_MATH_ATAN2, NULL, atan2l, 0.75, 1.5},
};

typedef void (*kern_fn)(void *out, const void *x, const void *y, int64_t n);

/* ---------------------------------------------------------------------------------------------
 * The JIT-ed loop: out[i] = fn(x[i]) or fn(x[i], y[i])
 * -------------------------------------------------------------------------------------------*/

static void build_loop(nx_x86_module *m, nx_x86_math_fn fn, bool f64, const char *name)
{
    LLVMContextRef c = nx_x86_module_context(m);
    LLVMModuleRef mod = nx_x86_module_llvm(m);
    LLVMTypeRef t = f64 ? LLVMDoubleTypeInContext(c) : LLVMFloatTypeInContext(c);
    LLVMTypeRef i64 = LLVMInt64TypeInContext(c);
    LLVMTypeRef pt = LLVMPointerType(t, 0);
    LLVMTypeRef params[] = {pt, pt, pt, i64};
    LLVMValueRef f =
        LLVMAddFunction(mod, name, LLVMFunctionType(LLVMVoidTypeInContext(c), params, 4, 0));
    unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
    for (unsigned i = 1; i <= 3; i++)
        LLVMAddAttributeAtIndex(f, i, LLVMCreateEnumAttribute(c, noalias, 0));
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(c, f, "entry");
    LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(c, f, "loop");
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(c, f, "exit");
    LLVMBuilderRef b = LLVMCreateBuilderInContext(c);
    LLVMPositionBuilderAtEnd(b, entry);
    LLVMValueRef n = LLVMGetParam(f, 3), zero = LLVMConstInt(i64, 0, 0);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, n, zero, ""), loop, exit);
    LLVMPositionBuilderAtEnd(b, loop);
    LLVMValueRef i = LLVMBuildPhi(b, i64, "i");
    LLVMValueRef x =
        LLVMBuildLoad2(b, t, LLVMBuildInBoundsGEP2(b, t, LLVMGetParam(f, 1), &i, 1, ""), "x");
    LLVMValueRef y = NULL;
    if (nx_x86_math_arity(fn) == 2)
        y = LLVMBuildLoad2(b, t, LLVMBuildInBoundsGEP2(b, t, LLVMGetParam(f, 2), &i, 1, ""), "y");
    LLVMValueRef r = nx_x86_math_call(b, mod, fn, x, y);
    assert_non_null(r);
    LLVMBuildStore(b, r, LLVMBuildInBoundsGEP2(b, t, LLVMGetParam(f, 0), &i, 1, ""));
    LLVMValueRef next = LLVMBuildNSWAdd(b, i, LLVMConstInt(i64, 1, 0), "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, next, n, ""), loop, exit);
    LLVMValueRef iv[] = {zero, next};
    LLVMBasicBlockRef ib[] = {entry, loop};
    LLVMAddIncoming(i, iv, ib, 2);
    LLVMPositionBuilderAtEnd(b, exit);
    LLVMBuildRetVoid(b);
    LLVMDisposeBuilder(b);
}

static const char *vector_type(bool f64)
{
    if (__builtin_cpu_supports("avx512f"))
        return f64 ? "<8 x double>" : "<16 x float>";
    if (__builtin_cpu_supports("avx2"))
        return f64 ? "<4 x double>" : "<8 x float>";
    return NULL;
}

static bool is_trig(nx_x86_math_fn fn)
{
    return fn == NX_X86_MATH_SIN || fn == NX_X86_MATH_COS;
}

/* JIT-compiles the loop, checking that it was vectorised and the function inlined; for sin and
 * cos, that the vectorised loop calls the big-argument check once per vector (the vector variant
 * of nx.trig.<fn>.f64), not once per lane. */
static nx_x86_kernel *compile_loop(nx_ctx *ctx, nx_x86_math_fn fn, bool f64, nx_x86_opt opt,
                                   kern_fn *out)
{
    nx_x86_jit *jit = NULL;
    assert_int_equal(nx_x86_jit_get(ctx, &jit), NX_OK);
    char name[64];
    snprintf(name, sizeof name, "loop_%s_%s_%d", nx_x86_math_name(fn), f64 ? "f64" : "f32",
             (int)opt);
    nx_x86_module *m = NULL;
    assert_int_equal(nx_x86_module_new(jit, name, &m), NX_OK);
    build_loop(m, fn, f64, name);
    nx_status st = nx_x86_module_optimize(m, opt);
    if (st != NX_OK)
        fail_msg("%s: %s", name, nx_ctx_last_error(ctx));
    char *text = NULL;
    assert_int_equal(nx_x86_module_print(m, &text), NX_OK);
    /* f32 functions computed in f64 vectorise at the f64 width: half as many lanes */
    const char *vt = vector_type(f64), *vt_half = f64 ? NULL : vector_type(true);
    char half[32] = "";
    if (vt_half)
        snprintf(half, sizeof half, "%.*s x float>", (int)(strchr(vt_half, ' ') - vt_half),
                 vt_half);
    if (vt && !strstr(text, vt) && !(half[0] && strstr(text, half)))
        fail_msg("%s was not vectorised (no %s in the optimised IR)", name, vt);
    if (strstr(text, "call double @nx.math") || strstr(text, "call float @nx.math"))
        fail_msg("%s: the math function was not inlined", name);
    if (vt && is_trig(fn)) {
        int w = atoi(vector_type(true) + 1); /* f32 sin and cos run at the f64 width */
        char call[64];
        snprintf(call, sizeof call, "call <%d x double> @nx.trig.%s.v%df64(", w,
                 nx_x86_math_name(fn), w);
        if (!strstr(text, call))
            fail_msg("%s: no per-vector big-argument check '%s' in the optimised IR", name, call);
    }
    nx_rt_free(ctx, text, strlen(text) + 1);
    nx_x86_kernel *k = NULL;
    st = nx_x86_module_compile(m, &k, NULL, NULL);
    if (st != NX_OK)
        fail_msg("%s: %s", name, nx_ctx_last_error(ctx));
    void *p = NULL;
    assert_int_equal(nx_x86_kernel_lookup(k, name, &p), NX_OK);
    *out = (kern_fn)p;
    return k;
}

/* ---------------------------------------------------------------------------------------------
 * Inputs
 * -------------------------------------------------------------------------------------------*/

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static double unif(double lo, double hi)
{
    return lo + (hi - lo) * ((double)(rnd() >> 11) * 0x1p-53);
}

/* A finite double with a random bit pattern (uniform over exponents), sign as asked. */
static double rnd_bits(bool negative_too)
{
    for (;;) {
        uint64_t u = rnd();
        if (!negative_too)
            u &= ~(1ull << 63);
        double d;
        memcpy(&d, &u, sizeof d);
        if (isfinite(d))
            return d;
    }
}

typedef struct inputs {
    double *x, *y;
    int64_t n, cap;
} inputs;

static void push(inputs *in, double x, double y)
{
    if (in->n == in->cap) {
        in->cap = in->cap ? 2 * in->cap : 4096;
        in->x = realloc(in->x, (size_t)in->cap * sizeof *in->x);
        in->y = realloc(in->y, (size_t)in->cap * sizeof *in->y);
        assert_non_null(in->x);
        assert_non_null(in->y);
    }
    in->x[in->n] = x;
    in->y[in->n] = y;
    in->n++;
}

static void dense(inputs *in, double lo, double hi, int n)
{
    for (int i = 0; i <= n; i++)
        push(in, lo + (hi - lo) * i / n, 1.0);
}

/* Random finite values whose magnitude is uniform in exponent within [2^elo, 2^ehi]. */
static void logunif(inputs *in, int elo, int ehi, bool neg, int n)
{
    for (int i = 0; i < n; i++) {
        double v = ldexp(unif(1.0, 2.0), elo + (int)(rnd() % (uint64_t)(ehi - elo + 1)));
        push(in, neg && (rnd() & 1) ? -v : v, 1.0);
    }
}

#define NS 150000 /* samples per family */

/* sin and cos beyond the inline reduction: a log-spaced sweep of |x| from 1e-30 to the largest
 * finite value, both signs; random bit patterns; the numbers nearest multiples of pi/2 for every
 * exponent (trig-hard.h, with their neighbours); the classic cases and the edges of the Cody-Waite
 * range. */
static void trig_large_inputs(bool f64, inputs *in)
{
    double maxv = f64 ? DBL_MAX : FLT_MAX, top = log10(maxv);
    for (int i = 0; i <= NS; i++) {
        double v = fmin(pow(10.0, -30 + (top + 30) * i / NS), maxv);
        push(in, v, 1);
        push(in, -v, 1);
    }
    for (int i = 0; i < NS; i++) {
        if (f64) {
            push(in, rnd_bits(true), 1);
            continue;
        }
        uint32_t u = (uint32_t)rnd();
        float v;
        memcpy(&v, &u, sizeof v);
        if (isfinite(v))
            push(in, v, 1);
    }
    const nx_trig_hard *h = f64 ? trig_hard_f64 : trig_hard_f32;
    size_t nh = f64 ? sizeof trig_hard_f64 / sizeof *h : sizeof trig_hard_f32 / sizeof *h;
    for (size_t i = 0; i < nh; i++) {
        double v = ldexp((double)h[i].m, h[i].e);
        double up = f64 ? nextafter(v, INFINITY) : nextafterf((float)v, INFINITY);
        double down = f64 ? nextafter(v, 0) : nextafterf((float)v, 0);
        const double vs[] = {v, -v, up, -down};
        for (int j = 0; j < 4; j++)
            push(in, vs[j], 1);
    }
    const double classic[] = {1e22,
                              -1e22,
                              0x1.fffffep127,
                              -0x1.fffffep127,
                              DBL_MAX,
                              0x1p1023,
                              0x1p1000,
                              6381956970095103.0 * 0x1p797,
                              16367173.0 * 0x1p72,
                              1e300,
                              NX_X86_TRIG_FAST_MAX,
                              nextafter(NX_X86_TRIG_FAST_MAX, INFINITY),
                              nextafter(NX_X86_TRIG_FAST_MAX, 0),
                              nextafterf((float)NX_X86_TRIG_FAST_MAX, INFINITY),
                              nextafterf((float)NX_X86_TRIG_FAST_MAX, 0),
                              0x1p20,
                              0x1p21,
                              0x1p52,
                              0x1p53,
                              0x1p54,
                              0x1p64};
    for (size_t i = 0; i < sizeof classic / sizeof *classic; i++)
        if (fabs(classic[i]) <= maxv) {
            push(in, classic[i], 1);
            push(in, -classic[i], 1);
        }
}

static void gen_inputs(nx_x86_math_fn fn, bool f64, inputs *in)
{
    double big = f64 ? 710 : 89, small = f64 ? -746 : -104;
    switch (fn) {
    case NX_X86_MATH_EXP:
        dense(in, small - 2, big + 1, NS);
        dense(in, -2, 2, NS);
        logunif(in, -60, 3, true, NS);
        break;
    case NX_X86_MATH_LOG:
    case NX_X86_MATH_SQRT:
        for (int i = 0; i < NS; i++)
            push(in, rnd_bits(false), 1);
        dense(in, 0.25, 4, NS);
        dense(in, 1 - 1e-6, 1 + 1e-6, NS);
        break;
    case NX_X86_MATH_LOG1P:
        dense(in, -1, 1, NS);
        logunif(in, -80, 10, true, NS);
        for (int i = 0; i < NS; i++)
            push(in, rnd_bits(false), 1);
        dense(in, -1, -0.999, NS / 4);
        break;
    case NX_X86_MATH_EXPM1:
        dense(in, -45, big + 1, NS);
        dense(in, -1.5, 1.5, NS);
        logunif(in, -80, 2, true, NS);
        break;
    case NX_X86_MATH_SIN:
    case NX_X86_MATH_COS:
        dense(in, -10, 10, NS);
        logunif(in, -60, 20, true, NS);
        for (int i = 0; i < NS; i++) /* near multiples of pi/2: the hard reductions */
            push(in,
                 nextafter((double)(rnd() % 1000000) * 1.5707963267948966, (rnd() & 1) ? 0 : 1e7),
                 1);
        trig_large_inputs(f64, in);
        break;
    case NX_X86_MATH_TANH:
        dense(in, -25, 25, NS);
        dense(in, -1, 1, NS);
        logunif(in, -80, 2, true, NS);
        break;
    case NX_X86_MATH_ERF:
        dense(in, -7, 7, NS);
        logunif(in, -80, 3, true, NS);
        break;
    case NX_X86_MATH_POW:
        for (int i = 0; i < 2 * NS; i++) {
            double x = rnd_bits(false);
            double lx = log(x);
            double lim = (f64 ? 720 : 95) / (lx == 0 ? 1 : fabs(lx));
            push(in, x, unif(-lim, lim));
        }
        for (int i = 0; i < NS; i++) /* x near 1, large y */
            push(in, 1 + unif(-1e-3, 1e-3), unif(-5e5, 5e5));
        for (int i = 0; i < NS; i++) /* negative x, integer y */
            push(in, -unif(0.01, 40), (double)((int)(rnd() % 201) - 100));
        for (int i = 0; i < NS; i++)
            push(in, unif(0, 10), unif(-30, 30));
        break;
    case NX_X86_MATH_ATAN2: /* (y, x) */
        /* every direction, radius over many decades */
        for (int i = 0; i < NS; i++) {
            double th = unif(-3.14159265358979, 3.14159265358979), rr = pow(10.0, unif(-30, 30));
            push(in, rr * sin(th), rr * cos(th));
        }
        for (int i = 0; i < NS; i++)
            push(in, rnd_bits(true), rnd_bits(true));
        /* ratios at the interval edges of the reduction: 7/16, 11/16, 19/16, 39/16 */
        for (int i = 0; i < NS; i++) {
            static const double edge[4] = {0.4375, 0.6875, 1.1875, 2.4375};
            double x = unif(-100, 100);
            push(in, x * edge[rnd() % 4] * (1 + unif(-1e-6, 1e-6)) * ((rnd() & 1) ? 1 : -1), x);
        }
        for (int i = 0; i < NS; i++) /* near the axes: tiny and huge ratios */
            push(in, unif(-1, 1) * pow(10.0, unif(-300, -10)), unif(-10, 10));
        break;
    default:
        break;
    }
}

/* ---------------------------------------------------------------------------------------------
 * Measuring
 * -------------------------------------------------------------------------------------------*/

typedef struct result {
    double max_ulp;
    double worst_x, worst_y, worst_got;
    long double worst_ref;
    int64_t mismatches; /* NaN/inf/zero-sign classes that differ */
    double mis_x, mis_y, mis_got;
    long double mis_ref;
} result;

/* Error of got against the exact ref in ulps of the target type; -1 for a class mismatch. */
static double ulp_error(long double got, long double ref, bool f64)
{
    int mant = f64 ? 52 : 23, emin = f64 ? -1022 : -126;
    long double rounded = f64 ? (long double)(double)ref : (long double)(float)ref;
    if (isnan(ref) || isnan(got))
        return isnan(ref) && isnan(got) ? 0 : -1;
    if (isinf(got))
        return got == rounded ? 0 : -1; /* inf only where the exact value rounds to it */
    if (ref == 0 || got == 0) {
        if (ref == 0 && got == 0)
            return signbit(ref) == signbit(got) ? 0 : -1;
    }
    if (isinf(ref))
        return -1;
    int e = ref == 0 ? emin : ilogbl(ref);
    if (e < emin)
        e = emin;
    return (double)(fabsl(got - ref) / ldexpl(1.0L, e - mant));
}

static long double reference(const fn_case *fc, double x, double y)
{
    return fc->ref2 ? fc->ref2(x, y) : fc->ref1(x);
}

/* Errors into res; those of sin and cos at |x| beyond the inline reduction into big as well. */
static void measure(const fn_case *fc, bool f64, kern_fn k, const double *x, const double *y,
                    int64_t n, result *res, result *big)
{
    void *xb = calloc((size_t)n, 8), *yb = calloc((size_t)n, 8), *ob = calloc((size_t)n, 8);
    assert_true(xb && yb && ob);
    for (int64_t i = 0; i < n; i++) {
        if (f64) {
            ((double *)xb)[i] = x[i];
            ((double *)yb)[i] = y[i];
        } else {
            ((float *)xb)[i] = (float)x[i];
            ((float *)yb)[i] = (float)y[i];
        }
    }
    k(ob, xb, yb, n);
    for (int64_t i = 0; i < n; i++) {
        double xi = f64 ? ((double *)xb)[i] : ((float *)xb)[i];
        double yi = f64 ? ((double *)yb)[i] : ((float *)yb)[i];
        double got = f64 ? ((double *)ob)[i] : ((float *)ob)[i];
        long double ref = reference(fc, xi, yi);
        if (big && is_trig(fc->fn) && fabs(xi) > NX_X86_TRIG_FAST_MAX && isfinite(xi)) {
            double err = ulp_error(got, ref, f64);
            if (err > big->max_ulp) {
                big->max_ulp = err;
                big->worst_x = xi;
                big->worst_got = got;
                big->worst_ref = ref;
            }
        }
        double err = ulp_error(got, ref, f64);
        if (err < 0) {
            if (res->mismatches++ == 0) {
                res->mis_x = xi;
                res->mis_y = yi;
                res->mis_got = got;
                res->mis_ref = ref;
            }
        } else if (err > res->max_ulp) {
            res->max_ulp = err;
            res->worst_x = xi;
            res->worst_y = yi;
            res->worst_got = got;
            res->worst_ref = ref;
        }
    }
    free(xb);
    free(yb);
    free(ob);
}

/* Zeros, infinities, NaN, subnormals and extremes, and all their pairs for pow and atan2. */
static void special_inputs(const fn_case *fc, bool f64, inputs *in)
{
    double tiny = f64 ? 0x1p-1074 : 0x1p-149, maxv = f64 ? DBL_MAX : FLT_MAX;
    double minn = f64 ? DBL_MIN : FLT_MIN;
    const double v[] = {0.0,
                        -0.0,
                        INFINITY,
                        -INFINITY,
                        NAN,
                        -NAN,
                        tiny,
                        -tiny,
                        minn,
                        -minn,
                        maxv,
                        -maxv,
                        1.0,
                        -1.0,
                        0.5,
                        -0.5,
                        2.0,
                        -2.0,
                        3.0,
                        -3.0,
                        2.5,
                        -2.5,
                        1e-300 * (f64 ? 1 : 0),
                        1e10,
                        -1e10,
                        1e300 * (f64 ? 1 : 0)};
    int nv = (int)(sizeof v / sizeof v[0]);
    for (int i = 0; i < nv; i++) {
        if (fc->fn == NX_X86_MATH_POW || fc->fn == NX_X86_MATH_ATAN2)
            for (int j = 0; j < nv; j++)
                push(in, v[i], v[j]);
        else
            push(in, v[i], 1.0);
    }
    /* over- and underflow thresholds */
    if (fc->fn == NX_X86_MATH_EXP || fc->fn == NX_X86_MATH_EXPM1) {
        double hi = f64 ? 709.782712893384 : 88.7228394;
        double lo = f64 ? -745.1332191019411 : -103.972084;
        for (int d = -3; d <= 3; d++) {
            push(in, hi + d * (f64 ? 1e-13 : 1e-5), 1);
            push(in, lo + d * (f64 ? 1e-13 : 1e-5), 1);
            push(in, (f64 ? -708.3964185322641 : -87.336544) + d * (f64 ? 1e-13 : 1e-5), 1);
        }
    }
}

static void run_case(const fn_case *fc, bool f64, nx_x86_opt opt, result *sweep, result *special,
                     result *big)
{
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    kern_fn k = NULL;
    nx_x86_kernel *kern = compile_loop(ctx, fc->fn, f64, opt, &k);
    inputs in = {0}, sp = {0};
    gen_inputs(fc->fn, f64, &in);
    special_inputs(fc, f64, &sp);
    measure(fc, f64, k, in.x, in.y, in.n, sweep, big);
    measure(fc, f64, k, sp.x, sp.y, sp.n, special, big);
    free(in.x);
    free(in.y);
    free(sp.x);
    free(sp.y);
    nx_x86_kernel_free(kern);
    nx_ctx_free(ctx);
}

static void check_case(const fn_case *fc, bool f64)
{
    result sweep = {0}, special = {0}, big = {0};
    run_case(fc, f64, NX_X86_OPT_O3, &sweep, &special, &big);
    /* sin and cos through the kernel pipeline too: its globaldce runs before vectorisation and
     * must keep the vector variants that only an attribute names */
    if (is_trig(fc->fn))
        run_case(fc, f64, NX_X86_OPT_KERNEL, &sweep, &special, &big);
    const char *name = nx_x86_math_name(fc->fn), *dt = f64 ? "f64" : "f32";
    double bound = f64 ? fc->bound_f64 : fc->bound_f32;
    double max = sweep.max_ulp > special.max_ulp ? sweep.max_ulp : special.max_ulp;
    const char *rep = getenv("NX_MATH_REPORT");
    if ((rep && *rep == '1') || max > bound)
        print_message("%-6s %s: max %.3f ulp (bound %.2f) at x=%.17g y=%.17g: got %.17g, "
                      "exact %.20Lg\n",
                      name, dt, max, bound, sweep.worst_x, sweep.worst_y, sweep.worst_got,
                      sweep.worst_ref);
    if (is_trig(fc->fn) && ((rep && *rep == '1') || big.max_ulp > bound))
        print_message("%-6s %s: |x| > %.7g: max %.3f ulp at x=%.17g: got %.17g, exact %.20Lg\n",
                      name, dt, NX_X86_TRIG_FAST_MAX, big.max_ulp, big.worst_x, big.worst_got,
                      big.worst_ref);
    if (sweep.mismatches || special.mismatches) {
        result *r = sweep.mismatches ? &sweep : &special;
        fail_msg("%s %s: %lld special-value mismatches, first at x=%.17g y=%.17g: got %.17g, "
                 "libm %.17Lg",
                 name, dt, (long long)(sweep.mismatches + special.mismatches), r->mis_x, r->mis_y,
                 r->mis_got, r->mis_ref);
    }
    if (max > bound)
        fail_msg("%s %s: %.3f ulp exceeds the measured bound %.2f", name, dt, max, bound);
}

static void test_accuracy(void **state)
{
    const fn_case *fc = *state;
    check_case(fc, false);
    check_case(fc, true);
}

/* ---------------------------------------------------------------------------------------------
 * sin and cos through the graph API
 * -------------------------------------------------------------------------------------------*/

/* y = sin(x), cos(x) or (which = 2) sin(x) cos(x), one fused kernel, on backend be for the n
 * values of x (as doubles); the result as doubles. */
static void run_graph(nx_ctx *ctx, nx_backend be, bool f64, int which, const double *x, int64_t n,
                      double *y)
{
    nx_dtype dt = f64 ? NX_DTYPE_F64 : NX_DTYPE_F32;
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node in = nx_input(g, "x", dt, 1, &n);
    nx_node out = which == 0   ? nx_sin(g, in)
                  : which == 1 ? nx_cos(g, in)
                               : nx_mul(g, nx_sin(g, in), nx_cos(g, in));
    nx_compile_opts opts = {.backend = be, .n_outputs = 1, .outputs = &out};
    nx_program *p = NULL;
    if (nx_graph_compile(g, &opts, &p) != NX_OK)
        fail_msg("%s", nx_ctx_last_error(ctx));
    nx_graph_free(g);
    nx_tensor *xt = NULL, *yt = NULL;
    assert_int_equal(nx_tensor_new(ctx, dt, 1, &n, &xt), NX_OK);
    for (int64_t i = 0; i < n; i++) {
        if (f64)
            ((double *)nx_tensor_data(xt))[i] = x[i];
        else
            ((float *)nx_tensor_data(xt))[i] = (float)x[i];
    }
    if (nx_program_run(p, (const nx_tensor *const[]){xt}, &yt) != NX_OK)
        fail_msg("%s", nx_ctx_last_error(ctx));
    for (int64_t i = 0; i < n; i++)
        y[i] = f64 ? ((double *)nx_tensor_data(yt))[i] : ((float *)nx_tensor_data(yt))[i];
    nx_tensor_free(xt);
    nx_tensor_free(yt);
    nx_program_free(p);
}

/* The CPU backend (kernel emitter's text IR, kernel pipeline, a fresh kernel cache) against long
 * double libm and against the reference interpreter (double libm), over |x| from 1e-30 to the
 * largest finite value, the hardest reductions of every exponent and the classic cases. */
static void trig_graph_case(nx_ctx *ctx, bool f64, bool cosine)
{
    inputs in = {0};
    trig_large_inputs(f64, &in);
    int64_t n = in.n;
    double *got = malloc((size_t)n * sizeof *got), *ref = malloc((size_t)n * sizeof *ref);
    assert_true(got && ref);
    run_graph(ctx, NX_BACKEND_CPU, f64, cosine, in.x, n, got);
    run_graph(ctx, NX_BACKEND_REF, f64, cosine, in.x, n, ref);
    double max_exact = 0, max_interp = 0, max_libm = 0, wx = 0, wi = 0, wl = 0;
    int64_t libm_off = 0;
    for (int64_t i = 0; i < n; i++) {
        double xi = f64 ? in.x[i] : (float)in.x[i];
        long double exact = cosine ? cosl(xi) : sinl(xi);
        double e1 = ulp_error(got[i], exact, f64);
        double el = ulp_error(ref[i], exact, f64);
        double e2 = ulp_error(got[i], (long double)ref[i], f64); /* the backends' difference */
        if (e1 < 0 || el < 0)
            fail_msg("%s %s x=%.17g: cpu %.17g, interpreter %.17g, exact %.17Lg",
                     cosine ? "cos" : "sin", f64 ? "f64" : "f32", xi, got[i], ref[i], exact);
        if (e1 > max_exact)
            max_exact = e1, wx = xi;
        if (el > max_libm)
            max_libm = el, wl = xi;
        /* double libm's reduction is not exact at the hardest cases (glibc's sin(x) at
         * x = 0x1.4c96c11134d36p+578 is 1e5 ulp off, -4.97073257516e-18 for -4.97073257524e-18):
         * there the interpreter is not an oracle */
        if (el > 1) {
            libm_off++;
            /* and only there: near a multiple of pi/2, where the result is tiny */
            if (fabsl(exact) > 1e-6L)
                fail_msg("%s %s x=%.17g: the interpreter %.17g is %.3g ulp from %.17Lg",
                         cosine ? "cos" : "sin", f64 ? "f64" : "f32", xi, ref[i], el, exact);
            continue;
        }
        if (e2 > max_interp)
            max_interp = e2, wi = xi;
    }
    const char *rep = getenv("NX_MATH_REPORT");
    if (rep && *rep == '1')
        print_message("graph %s %s (%lld values): cpu vs exact max %.3f ulp (x=%.17g); cpu vs "
                      "interpreter max %.3f ulp (x=%.17g); interpreter (libm) vs exact max %.3g "
                      "ulp (x=%.17g), %lld values more than 1 ulp off\n",
                      cosine ? "cos" : "sin", f64 ? "f64" : "f32", (long long)n, max_exact, wx,
                      max_interp, wi, max_libm, wl, (long long)libm_off);
    /* the bounds of the loop test above; the interpreter is itself within ~0.5 ulp where kept */
    double bound = f64 ? 1.0 : 0.75;
    if (max_exact > bound)
        fail_msg("graph %s: %.3f ulp from the exact value at x=%.17g (bound %.2f)",
                 cosine ? "cos" : "sin", max_exact, wx, bound);
    if (max_interp > bound + 0.5)
        fail_msg("graph %s: %.3f ulp from the interpreter at x=%.17g (bound %.2f)",
                 cosine ? "cos" : "sin", max_interp, wi, bound + 0.5);
    free(got);
    free(ref);
    free(in.x);
    free(in.y);
}

/* sin(x) cos(x) in one kernel: both functions' slow paths in one module (they share the
 * table and llvm.compiler.used). Each factor is within 0.77 ulp, a relative error of up to
 * 0.77 2^-52, and a relative 2^-52 is up to 2 ulps of the product, which is then rounded:
 * (0.77 + 0.77) 2 + 0.5 = 3.58 ulp at worst (2.16 measured). */
static void trig_graph_fused(nx_ctx *ctx)
{
    inputs in = {0};
    trig_large_inputs(true, &in);
    double *got = malloc((size_t)in.n * sizeof *got);
    assert_non_null(got);
    run_graph(ctx, NX_BACKEND_CPU, true, 2, in.x, in.n, got);
    double max = 0, wx = 0;
    for (int64_t i = 0; i < in.n; i++) {
        long double exact = sinl(in.x[i]) * cosl(in.x[i]);
        double err = ulp_error(got[i], exact, true);
        if (err < 0)
            fail_msg("sin*cos x=%.17g: cpu %.17g, exact %.17Lg", in.x[i], got[i], exact);
        if (err > max)
            max = err, wx = in.x[i];
    }
    const char *rep = getenv("NX_MATH_REPORT");
    if (rep && *rep == '1')
        print_message("graph sin*cos f64: max %.3f ulp (x=%.17g)\n", max, wx);
    if (max > 3.6)
        fail_msg("graph sin*cos: %.3f ulp from the exact value at x=%.17g (bound 3.6)", max, wx);
    free(got);
    free(in.x);
    free(in.y);
}

static void test_trig_graph(void **state)
{
    (void)state;
    char dir[] = "/tmp/nx-test-trig-XXXXXX";
    assert_non_null(mkdtemp(dir));
    nx_test_alloc ta = {0};
    nx_allocator al = nx_test_allocator(&ta);
    nx_ctx_opts o = {.allocator = &al, .ignore_env = true, .cache_dir = dir};
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(&o, &ctx), NX_OK);
    for (int f64 = 0; f64 < 2; f64++)
        for (int cosine = 0; cosine < 2; cosine++)
            trig_graph_case(ctx, f64, cosine);
    trig_graph_fused(ctx);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---------------------------------------------------------------------------------------------
 * Other entry points
 * -------------------------------------------------------------------------------------------*/

/* Textual IR declares the functions it calls; parsing defines them. */
static void test_text_ir(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_x86_jit *jit = NULL;
    assert_int_equal(nx_x86_jit_get(ctx, &jit), NX_OK);
    const char *ir =
        "declare float @nx.math.exp.f32(float)\n"
        "declare <4 x double> @nx.math.pow.v4f64(<4 x double>, <4 x double>)\n"
        "declare <4 x double> @nx.math.cos.v4f64(<4 x double>)\n"
        "define float @f(float %x) {\n"
        "  %e = call float @nx.math.exp.f32(float %x)\n  ret float %e\n}\n"
        "define void @g(<4 x double>* %p) {\n"
        "  %v = load <4 x double>, <4 x double>* %p\n"
        "  %r = call <4 x double> @nx.math.pow.v4f64(<4 x double> %v, <4 x double> %v)\n"
        "  store <4 x double> %r, <4 x double>* %p\n  ret void\n}\n"
        "define void @h(<4 x double>* %p) {\n"
        "  %v = load <4 x double>, <4 x double>* %p\n"
        "  %r = call <4 x double> @nx.math.cos.v4f64(<4 x double> %v)\n"
        "  store <4 x double> %r, <4 x double>* %p\n  ret void\n}\n";
    nx_x86_module *m = NULL;
    nx_status st = nx_x86_module_parse(jit, "text-math", ir, strlen(ir), &m);
    if (st != NX_OK)
        fail_msg("%s", nx_ctx_last_error(ctx));
    assert_int_equal(nx_x86_module_optimize(m, NX_X86_OPT_O3), NX_OK);
    nx_x86_kernel *k = NULL;
    assert_int_equal(nx_x86_module_compile(m, &k, NULL, NULL), NX_OK);
    void *p = NULL;
    assert_int_equal(nx_x86_kernel_lookup(k, "f", &p), NX_OK);
    float (*f)(float) = (float (*)(float))p;
    assert_true(f(0.0f) == 1.0f);
    assert_true(fabsf(f(1.0f) - 2.718281828f) <= 2 * FLT_EPSILON * 2.72f);
    assert_int_equal(nx_x86_kernel_lookup(k, "g", &p), NX_OK);
    double v[4] __attribute__((aligned(32))) = {2, 3, 0.5, 10};
    ((void (*)(double *))p)(v);
    assert_true(v[0] == 4.0 && v[1] == 27.0);
    assert_true(fabs(v[2] - sqrt(0.5)) <= DBL_EPSILON && fabs(v[3] - 1e10) <= 1e10 * DBL_EPSILON);
    /* explicit vectors: one lane of four beyond the inline reduction, then all, then none */
    assert_int_equal(nx_x86_kernel_lookup(k, "h", &p), NX_OK);
    const double cx[3][4] = {{0.5, 1e22, -3.0, 2.0},
                             {-1e300, 0x1.fffffep127, 6381956970095103.0 * 0x1p797, 1e7},
                             {0.0, -0.0, 1e-300, 1e6}};
    for (int r = 0; r < 3; r++) {
        double w[4] __attribute__((aligned(32)));
        memcpy(w, cx[r], sizeof w);
        ((void (*)(double *))p)(w);
        for (int i = 0; i < 4; i++) {
            double err = ulp_error(w[i], cosl(cx[r][i]), true);
            if (err < 0 || err > 1.0)
                fail_msg("cos.v4f64(%.17g) = %.17g, exact %.17Lg", cx[r][i], w[i], cosl(cx[r][i]));
        }
    }
    nx_x86_kernel_free(k);

    /* a library name with the wrong type is an error naming it */
    const char *bad = "declare double @nx.math.exp.f32(double)\n";
    assert_int_equal(nx_x86_module_parse(jit, "bad", bad, strlen(bad), &m), NX_ERR_INTERNAL);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "nx.math.exp.f32"));
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void test_function_types(void **state)
{
    (void)state;
    LLVMContextRef c = LLVMContextCreate();
    LLVMModuleRef mod = LLVMModuleCreateWithNameInContext("types", c);
    LLVMTypeRef f32 = LLVMFloatTypeInContext(c), i32 = LLVMInt32TypeInContext(c);
    LLVMValueRef a = nx_x86_math_function(mod, NX_X86_MATH_LOG, f32);
    assert_non_null(a);
    assert_ptr_equal(a, nx_x86_math_function(mod, NX_X86_MATH_LOG, f32)); /* defined once */
    assert_null(nx_x86_math_function(mod, NX_X86_MATH_LOG, i32));
    assert_null(nx_x86_math_function(mod, NX_X86_MATH_COUNT, f32));
    assert_non_null(nx_x86_math_function(mod, NX_X86_MATH_SIN, LLVMVectorType(f32, 16)));
    char *msg = NULL;
    assert_false(LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg));
    LLVMDisposeMessage(msg);
    assert_string_equal(nx_x86_math_name(NX_X86_MATH_ERF), "erf");
    assert_null(nx_x86_math_name(NX_X86_MATH_COUNT));
    LLVMDisposeModule(mod);
    LLVMContextDispose(c);
}

int main(void)
{
    struct CMUnitTest tests[NX_X86_MATH_COUNT + 3];
    char names[NX_X86_MATH_COUNT][32];
    int n = 0;
    for (int i = 0; i < NX_X86_MATH_COUNT; i++) {
        snprintf(names[i], sizeof names[i], "accuracy_%s", nx_x86_math_name(cases[i].fn));
        tests[n++] = (struct CMUnitTest){names[i], test_accuracy, NULL, NULL, (void *)&cases[i]};
    }
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_trig_graph);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_text_ir);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_function_types);
    return _cmocka_run_group_tests("math", tests, (size_t)n, NULL, NULL);
}
