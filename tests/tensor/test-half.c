/* f16 and bf16 conversions against two independent oracles:
 *   - the compiler's _Float16 (gcc on x86-64 converts through libgcc's soft-fp, correctly
 *     rounded, directly from float or double), where available;
 *   - a nearest-value search in double over a table of every finite f16/bf16 value, built from
 *     the format's definition with ldexp (ties to the even bit pattern; 2^16 resp. 2^128 stand in
 *     for infinity, so the IEEE overflow threshold falls out of the same rule).
 * Widening is checked exhaustively; narrowing over every halfway case, windows of consecutive f32
 * patterns around the subnormal and overflow boundaries, a sweep across all f32 patterns and
 * random samples. */
#include <fenv.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

/* ---- the search oracle ---- */

typedef struct format {
    int frac_bits, bias;
    uint16_t inf;         /* bit pattern of +inf = one past the largest finite */
    double table[0x7f81]; /* value of each positive pattern 0..inf (inf as 2^(emax+1)) */
} format;

static format f16_fmt = {10, 15, 0x7c00, {0}};
static format bf16_fmt = {7, 127, 0x7f80, {0}};

static double decode(const format *f, unsigned bits)
{
    unsigned e = bits >> f->frac_bits, m = bits & ((1u << f->frac_bits) - 1);
    if (e == 0)
        return ldexp((double)m, 1 - f->bias - f->frac_bits);
    return ldexp((double)((1u << f->frac_bits) + m), (int)e - f->bias - f->frac_bits);
}

static void build_table(format *f)
{
    for (unsigned b = 0; b <= f->inf; b++)
        f->table[b] = decode(f, b); /* decode(inf) is 2^(emax+1): the virtual next value */
}

/* Nearest pattern to x (not NaN), ties to the even pattern. */
static uint16_t search(const format *f, double x)
{
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs(x);
    if (a >= f->table[f->inf])
        return sign | f->inf;
    unsigned lo = 0, hi = f->inf; /* table[lo] <= a < table[hi] */
    while (hi - lo > 1) {
        unsigned mid = (lo + hi) / 2;
        if (f->table[mid] <= a)
            lo = mid;
        else
            hi = mid;
    }
    double dlo = a - f->table[lo], dhi = f->table[hi] - a;
    unsigned pick = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
    return sign | (uint16_t)pick;
}

/* ---- helpers ---- */

static uint32_t fbits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}
static float ffrom(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}
static double dfrom(uint64_t u)
{
    double x;
    memcpy(&x, &u, 8);
    return x;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

#ifdef NX_HAVE_FLOAT16
static uint16_t f16_oracle_f(float x)
{
    _Float16 h = (_Float16)x;
    uint16_t b;
    memcpy(&b, &h, 2);
    return b;
}
static uint16_t f16_oracle_d(double x)
{
    _Float16 h = (_Float16)x;
    uint16_t b;
    memcpy(&b, &h, 2);
    return b;
}
#endif

static int64_t checked;

/* Narrowing result r of x (NaN or not) against the expectation e; quiet NaNs compare by class. */
static void expect_narrow(uint16_t r, uint16_t e, uint16_t inf, double x, const char *what)
{
    checked++;
    if (isnan(x)) {
        uint16_t quiet = (uint16_t)(inf | (inf == 0x7c00 ? 0x200 : 0x40));
        if ((r & quiet) != quiet || (r & 0x8000) != (signbit(x) ? 0x8000 : 0))
            fail_msg("%s(%a) = %#06x: expected a quiet NaN with the sign kept", what, x, r);
        return;
    }
    if (r != e)
        fail_msg("%s(%a) = %#06x, expected %#06x", what, x, r, e);
}

static void check_f32(float x)
{
    uint16_t r = nx_f32_to_f16(x);
    expect_narrow(r, search(&f16_fmt, x), 0x7c00, x, "nx_f32_to_f16/search");
#ifdef NX_HAVE_FLOAT16
    expect_narrow(r, f16_oracle_f(x), 0x7c00, x, "nx_f32_to_f16/_Float16");
#endif
    /* f32 values are exact in double, so the f64 entry point must agree */
    expect_narrow(nx_f64_to_f16(x), r, 0x7c00, x, "nx_f64_to_f16 vs nx_f32_to_f16");
    uint16_t b = nx_f32_to_bf16(x);
    expect_narrow(b, search(&bf16_fmt, x), 0x7f80, x, "nx_f32_to_bf16/search");
    expect_narrow(nx_f64_to_bf16(x), b, 0x7f80, x, "nx_f64_to_bf16 vs nx_f32_to_bf16");
}

static void check_f64(double x)
{
    uint16_t r = nx_f64_to_f16(x);
    expect_narrow(r, search(&f16_fmt, x), 0x7c00, x, "nx_f64_to_f16/search");
#ifdef NX_HAVE_FLOAT16
    expect_narrow(r, f16_oracle_d(x), 0x7c00, x, "nx_f64_to_f16/_Float16");
#endif
    expect_narrow(nx_f64_to_bf16(x), search(&bf16_fmt, x), 0x7f80, x, "nx_f64_to_bf16/search");
}

static int setup(void **state)
{
    (void)state;
    build_table(&f16_fmt);
    build_table(&bf16_fmt);
    return 0;
}

/* ---- widening: exhaustive ---- */

static void test_f16_to_f32_exhaustive(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float r = nx_f16_to_f32((uint16_t)h);
        unsigned e = (h >> 10) & 0x1f, m = h & 0x3ff;
        if (e == 0x1f && m != 0) {
            uint32_t u = fbits(r);
            assert_true(isnan(r));
            assert_int_equal(u >> 31, h >> 15);
            assert_true(u & 0x400000);                      /* quiet */
            assert_int_equal((u >> 13) & 0x1ff, m & 0x1ff); /* payload kept */
            continue;
        }
        double v = e == 0x1f ? INFINITY : decode(&f16_fmt, h & 0x7fff);
        if (h & 0x8000)
            v = -v;
        if (fbits(r) != fbits((float)v))
            fail_msg("nx_f16_to_f32(%#06x) = %a, expected %a", h, (double)r, v);
#ifdef NX_HAVE_FLOAT16
        _Float16 hv;
        uint16_t hb = (uint16_t)h;
        memcpy(&hv, &hb, 2);
        assert_int_equal(fbits(r), fbits((float)hv));
#endif
    }
}

static void test_bf16_to_f32_exhaustive(void **state)
{
    (void)state;
    for (uint32_t b = 0; b < 0x10000; b++) {
        float r = nx_bf16_to_f32((uint16_t)b);
        unsigned e = (b >> 7) & 0xff, m = b & 0x7f;
        if (e == 0xff && m != 0) {
            uint32_t u = fbits(r);
            assert_true(isnan(r));
            assert_int_equal(u >> 31, b >> 15);
            assert_true(u & 0x400000);
            assert_int_equal((u >> 16) & 0x3f, m & 0x3f);
            continue;
        }
        double v = e == 0xff ? INFINITY : decode(&bf16_fmt, b & 0x7fff);
        if (b & 0x8000)
            v = -v;
        if (fbits(r) != fbits((float)v))
            fail_msg("nx_bf16_to_f32(%#06x) = %a, expected %a", b, (double)r, v);
    }
}

/* Every non-NaN pattern survives widening and narrowing again, through both entry points. */
static void test_round_trips(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x10000; h++) {
        bool nan16 = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        bool nanb = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
        if (!nan16) {
            assert_int_equal(nx_f32_to_f16(nx_f16_to_f32((uint16_t)h)), h);
            assert_int_equal(nx_f64_to_f16(nx_f16_to_f32((uint16_t)h)), h);
        }
        if (!nanb) {
            assert_int_equal(nx_f32_to_bf16(nx_bf16_to_f32((uint16_t)h)), h);
            assert_int_equal(nx_f64_to_bf16(nx_bf16_to_f32((uint16_t)h)), h);
        }
    }
}

/* ---- narrowing from f32 ---- */

/* Every midpoint between neighbouring values (halfway cases), and 1..3 f32 ulps either side. */
static void test_f32_halfway(void **state)
{
    (void)state;
    checked = 0;
    const format *fmts[2] = {&f16_fmt, &bf16_fmt};
    for (int k = 0; k < 2; k++) {
        const format *f = fmts[k];
        for (unsigned b = 0; b < f->inf; b++) {
            float mid = (float)((f->table[b] + f->table[b + 1]) / 2);
            assert_true((double)mid == (f->table[b] + f->table[b + 1]) / 2); /* exact in f32 */
            for (int d = -3; d <= 3; d++) {
                uint32_t u = fbits(mid) + (uint32_t)d;
                check_f32(ffrom(u));
                check_f32(-ffrom(u));
            }
        }
    }
    printf("halfway: %lld checks\n", (long long)checked);
}

/* 2^16 consecutive f32 patterns either side of each boundary. */
static void test_f32_windows(void **state)
{
    (void)state;
    static const uint32_t centres[] = {
        0x00000000, /* zero and f32 subnormals */
        0x33000000, /* 2^-25: half the smallest f16 subnormal */
        0x33800000, /* 2^-24: smallest f16 subnormal */
        0x38800000, /* 2^-14: smallest f16 normal */
        0x477fe000, /* 65504: largest f16 */
        0x477ff000, /* 65520: f16 overflow threshold */
        0x47800000, /* 65536 */
        0x00800000, /* 2^-126: smallest normal f32/bf16 */
        0x7f7f8000, /* bf16 overflow threshold */
        0x7f800000, /* inf, then NaNs */
        0x7fc00000, /* quiet NaNs */
    };
    checked = 0;
    for (size_t i = 0; i < sizeof centres / sizeof *centres; i++) {
        for (int64_t d = -65536; d < 65536; d++) {
            int64_t u = (int64_t)centres[i] + d;
            if (u < 0 || u > 0x7fffffff)
                continue;
            check_f32(ffrom((uint32_t)u));
            check_f32(ffrom((uint32_t)u | 0x80000000u));
        }
    }
    printf("windows: %lld checks\n", (long long)checked);
}

/* A sweep across all 2^32 patterns with a prime step, and random patterns and magnitudes. */
static void test_f32_sweep_random(void **state)
{
    (void)state;
    checked = 0;
    for (uint64_t u = 0; u < UINT64_C(0x100000000); u += 4093)
        check_f32(ffrom((uint32_t)u));
    for (int i = 0; i < 500000; i++) {
        uint64_t r = rng();
        check_f32(ffrom((uint32_t)r));
        /* |x| in [2^-27, 2^17): the range where f16 rounding happens */
        float x = ldexpf(1.0f + (float)(r >> 41) * 0x1p-23f, (int)((r >> 32) % 44) - 27);
        check_f32((r & 1) ? -x : x);
    }
    printf("sweep+random: %lld checks\n", (long long)checked);
}

/* ---- narrowing from f64 ---- */

/* Values a hair above or below a midpoint: rounding through f32 would land exactly on the
 * midpoint and then tie to even, which the direct conversion must not do. */
static void test_f64_double_rounding(void **state)
{
    (void)state;
    checked = 0;
    const format *fmts[2] = {&f16_fmt, &bf16_fmt};
    int64_t differ[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        const format *f = fmts[k];
        for (unsigned b = 0; b < f->inf; b++) {
            double lo = f->table[b], hi = f->table[b + 1];
            double mid = (lo + hi) / 2, tiny = (hi - lo) * 0x1p-30;
            double xs[4] = {mid + tiny, mid - tiny, -(mid + tiny), -(mid - tiny)};
            for (int j = 0; j < 4; j++) {
                double x = xs[j];
                uint16_t direct = k == 0 ? nx_f64_to_f16(x) : nx_f64_to_bf16(x);
                uint16_t via32 = k == 0 ? nx_f32_to_f16((float)x) : nx_f32_to_bf16((float)x);
                differ[k] += direct != via32;
                check_f64(x);
            }
        }
    }
    /* the inputs are meaningful: f32 can hold the midpoint but not the tiny offset, so for
     * about half of them (the odd-below/even-above side) the two routes disagree */
    printf("double rounding: %lld checks; via f32 differs in %lld (f16), %lld (bf16)\n",
           (long long)checked, (long long)differ[0], (long long)differ[1]);
    assert_true(differ[0] > 30000);
    assert_true(differ[1] > 30000);
}

static void test_f64_random_edges(void **state)
{
    (void)state;
    checked = 0;
    static const double edges[] = {0.0,      0x1p-25,  0x1p-24,    0x1.8p-25,  0x1p-14,
                                   65504.0,  65519.99, 65520.0,    65536.0,    0x1p-126,
                                   0x1p-133, 0x1p-134, 0x1.8p-134, 0x1.fep127, 0x1.ffp127,
                                   0x1p128,  1e300,    5e-324,     INFINITY,   NAN};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++) {
        for (int d = -64; d <= 64; d++) {
            uint64_t u;
            double e = edges[i];
            memcpy(&u, &e, 8);
            int64_t v = (int64_t)u + d;
            if (v < 0)
                continue;
            check_f64(dfrom((uint64_t)v));
            check_f64(-dfrom((uint64_t)v));
        }
    }
    for (int i = 0; i < 300000; i++) {
        uint64_t r = rng();
        check_f64(dfrom(r));
        double x = ldexp(1.0 + (double)(r >> 12) * 0x1p-52, (int)(rng() % 180) - 150);
        check_f64((r & 1) ? -x : x);
    }
    printf("f64 edges+random: %lld checks\n", (long long)checked);
}

static void test_nan_inf_signs(void **state)
{
    (void)state;
    for (int s = 0; s < 2; s++) {
        uint32_t sign = s ? 0x80000000u : 0;
        uint16_t hs = s ? 0x8000 : 0;
        assert_int_equal(nx_f32_to_f16(ffrom(sign | 0x7f800000)), hs | 0x7c00);
        assert_int_equal(nx_f32_to_bf16(ffrom(sign | 0x7f800000)), hs | 0x7f80);
        assert_int_equal(nx_f64_to_f16(s ? -INFINITY : INFINITY), hs | 0x7c00);
        assert_int_equal(nx_f64_to_bf16(s ? -INFINITY : INFINITY), hs | 0x7f80);
        assert_int_equal(nx_f32_to_f16(ffrom(sign)), hs);
        assert_int_equal(nx_f64_to_bf16(s ? -0.0 : 0.0), hs);
        /* signalling NaN with only low payload bits still comes out a NaN (never inf) */
        uint16_t h = nx_f32_to_f16(ffrom(sign | 0x7f800001));
        assert_int_equal(h, hs | 0x7e00);
        uint16_t b = nx_f32_to_bf16(ffrom(sign | 0x7f800001));
        assert_int_equal(b, hs | 0x7fc0);
        assert_int_equal(nx_f64_to_f16(dfrom((uint64_t)s << 63 | 0x7ff0000000000001u)),
                         hs | 0x7e00);
        assert_int_equal(nx_f64_to_bf16(dfrom((uint64_t)s << 63 | 0x7ff0000000000001u)),
                         hs | 0x7fc0);
        /* signalling f16/bf16 NaN widens to a quiet NaN */
        assert_true(fbits(nx_f16_to_f32(hs | 0x7c01)) & 0x400000);
        assert_true(fbits(nx_bf16_to_f32(hs | 0x7f81)) & 0x400000);
    }
}

/* Bit manipulation does not depend on the rounding mode in effect. */
static void test_rounding_mode_independent(void **state)
{
    (void)state;
    static const int modes[] = {FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(fesetround(modes[i]), 0);
        uint16_t a = nx_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f); /* above the midpoint */
        uint16_t b = nx_f32_to_f16(0x1.8p-25f);                 /* subnormal, rounds up */
        uint16_t c = nx_f64_to_f16(1.0 + 0x1p-11 + 0x1p-40);
        uint16_t d = nx_f32_to_bf16(1.0f + 0x1p-8f); /* tie, to even (down) */
        uint16_t e = nx_f64_to_bf16(-(1.0 + 0x1p-8 + 0x1p-40));
        fesetround(FE_TONEAREST);
        assert_int_equal(a, 0x3c01);
        assert_int_equal(b, 0x0001);
        assert_int_equal(c, 0x3c01);
        assert_int_equal(d, 0x3f80);
        assert_int_equal(e, 0xbf81);
    }
}

/* Hand-computed values from the IEEE definition. */
static void test_known_values(void **state)
{
    (void)state;
    assert_int_equal(nx_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(nx_f32_to_f16(65519.996f), 0x7bff);
    assert_int_equal(nx_f32_to_f16(65520.0f), 0x7c00);
    assert_int_equal(nx_f32_to_f16(0x1p-24f), 0x0001);
    assert_int_equal(nx_f32_to_f16(0x1p-25f), 0x0000); /* tie to even: 0 */
    assert_int_equal(nx_f32_to_f16(0x1.000002p-25f), 0x0001);
    assert_int_equal(nx_f32_to_f16(0x1.8p-24f), 0x0002); /* 1.5 units: tie to even 2 */
    assert_int_equal(nx_f32_to_f16(0x1.ffcp-15f),
                     0x0400); /* 1023.5 units: tie, up to the min normal */
    assert_int_equal(nx_f32_to_f16(1.0f / 3.0f), 0x3555);
    assert_int_equal(nx_f32_to_f16(-2.5f), 0xc100);
    assert_int_equal(nx_f64_to_f16(1.0 + 0x1p-11 + 0x1p-40), 0x3c01);
    assert_int_equal(nx_f32_to_f16((float)(1.0 + 0x1p-11 + 0x1p-40)), 0x3c00);
    assert_int_equal(nx_f32_to_bf16(3.140625f), 0x4049);
    assert_int_equal(nx_f32_to_bf16(0x1.fefffep127f), 0x7f7f);
    assert_int_equal(nx_f32_to_bf16(0x1.ff0000p127f), 0x7f80);
    assert_int_equal(nx_f32_to_bf16(0x1p-133f), 0x0001);
    assert_int_equal(nx_f64_to_bf16(0x1p-134), 0x0000);
    assert_int_equal(nx_f64_to_bf16(0x1.0000001p-134), 0x0001);
    assert_int_equal(nx_f64_to_bf16(1e300), 0x7f80);
    assert_true(nx_f16_to_f32(0x0001) == 0x1p-24f);
    assert_true(nx_f16_to_f32(0x7bff) == 65504.0f);
    assert_true(nx_bf16_to_f32(0x0001) == 0x1p-133f);
#ifdef NX_HAVE_FLOAT16
    /* the compiler oracle itself rounds as IEEE says (ties to even, overflow, subnormals) */
    assert_int_equal(f16_oracle_f(65520.0f), 0x7c00);
    assert_int_equal(f16_oracle_f(65519.996f), 0x7bff);
    assert_int_equal(f16_oracle_f(0x1p-25f), 0x0000);
    assert_int_equal(f16_oracle_f(0x1.8p-24f), 0x0002);
    assert_int_equal(f16_oracle_d(1.0 + 0x1p-11 + 0x1p-40), 0x3c01);
    printf("oracles: _Float16 and the nearest-value search\n");
#else
    printf("oracles: the nearest-value search (no _Float16 in this compiler)\n");
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_to_f32_exhaustive),
        cmocka_unit_test(test_bf16_to_f32_exhaustive),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_f32_halfway),
        cmocka_unit_test(test_f32_windows),
        cmocka_unit_test(test_f32_sweep_random),
        cmocka_unit_test(test_f64_double_rounding),
        cmocka_unit_test(test_f64_random_edges),
        cmocka_unit_test(test_nan_inf_signs),
        cmocka_unit_test(test_rounding_mode_independent),
        cmocka_unit_test(test_known_values),
    };
    return cmocka_run_group_tests_name("half", tests, setup, NULL);
}
