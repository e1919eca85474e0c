/* IEEE binary16 and bfloat16 conversions: integer bit manipulation only, so the result does not
 * depend on the floating-point environment (rounding mode, flush-to-zero). Every narrowing is a
 * single round to nearest, ties to even, from the exact source value: f64 is never rounded through
 * f32 first, which would round twice. */
#include <string.h>

#include "internal.h"

static uint32_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static uint64_t f64_bits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* m / 2^s rounded to nearest, ties to even (s <= 63). */
static uint64_t shift_rne(uint64_t m, unsigned s)
{
    if (s == 0)
        return m;
    uint64_t q = m >> s;
    uint64_t rem = m & ((UINT64_C(1) << s) - 1);
    uint64_t half = UINT64_C(1) << (s - 1);
    return q + (rem > half || (rem == half && (q & 1)));
}

/* Drops the low `drop` bits of a magnitude (exponent field above the kept mantissa) rounding to
 * nearest even; a carry out of the mantissa bumps the exponent, which is exactly IEEE rounding,
 * overflow to infinity included. */
static uint64_t drop_rne(uint64_t a, unsigned drop)
{
    uint64_t odd = (a >> drop) & 1;
    return (a + ((UINT64_C(1) << (drop - 1)) - 1) + odd) >> drop;
}

uint16_t nx_f32_to_f16(float x)
{
    uint32_t u = f32_bits(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffff;
    if (a > 0x7f800000) /* NaN: quiet, top payload bits kept */
        return sign | 0x7e00 | (uint16_t)((a >> 13) & 0x3ff);
    if (a >= 0x47800000) /* |x| >= 2^16 (or inf): beyond rounding range */
        return sign | 0x7c00;
    if (a >= 0x38800000) /* f16 normal: rebias the exponent (127 -> 15), round off 13 bits */
        return sign | (uint16_t)drop_rne(a - (UINT32_C(112) << 23), 13);
    /* f16 subnormal or zero: the result counts units of 2^-24 */
    uint32_t e = a >> 23;
    uint64_t m = (a & 0x7fffff) | (e ? 0x800000u : 0);
    unsigned s = e ? 126 - e : 63; /* value = m * 2^(e - 150) */
    return sign | (uint16_t)shift_rne(m, s > 63 ? 63 : s);
}

uint16_t nx_f64_to_f16(double x)
{
    uint64_t u = f64_bits(x);
    uint16_t sign = (uint16_t)((u >> 48) & 0x8000);
    uint64_t a = u & INT64_MAX;
    if (a > UINT64_C(0x7ff0000000000000))
        return sign | 0x7e00 | (uint16_t)((a >> 42) & 0x3ff);
    if (a >= (UINT64_C(1039) << 52)) /* |x| >= 2^16 */
        return sign | 0x7c00;
    if (a >= (UINT64_C(1009) << 52)) /* >= 2^-14: rebias 1023 -> 15, round off 42 bits */
        return sign | (uint16_t)drop_rne(a - (UINT64_C(1008) << 52), 42);
    uint64_t e = a >> 52;
    uint64_t m = (a & ((UINT64_C(1) << 52) - 1)) | (e ? UINT64_C(1) << 52 : 0);
    uint64_t s = e ? 1051 - e : 63; /* value = m * 2^(e - 1075), unit 2^-24 */
    return sign | (uint16_t)shift_rne(m, (unsigned)(s > 63 ? 63 : s));
}

float nx_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t e = (h >> 10) & 0x1f;
    uint32_t m = h & 0x3ff;
    if (e == 0x1f) /* inf, or NaN made quiet with its payload kept */
        return f32_from_bits(sign | 0x7f800000 | (m << 13) | (m ? 0x400000u : 0));
    if (e != 0)
        return f32_from_bits(sign | ((e + 112) << 23) | (m << 13));
    if (m == 0)
        return f32_from_bits(sign);
    /* subnormal: normalise so the leading one lands on the implicit bit (bit 10) */
    unsigned lead = 31 - (unsigned)__builtin_clz(m);
    unsigned sh = 10 - lead;
    return f32_from_bits(sign | ((113 - sh) << 23) | ((m << sh) & 0x3ff) << 13);
}

uint16_t nx_f32_to_bf16(float x)
{
    uint32_t u = f32_bits(x);
    if ((u & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((u >> 16) | 0x40);
    /* bf16 is the top half of f32, subnormals and all: one rounding of the low 16 bits */
    return (uint16_t)drop_rne(u, 16);
}

uint16_t nx_f64_to_bf16(double x)
{
    uint64_t u = f64_bits(x);
    uint16_t sign = (uint16_t)((u >> 48) & 0x8000);
    uint64_t a = u & INT64_MAX;
    if (a > UINT64_C(0x7ff0000000000000))
        return sign | 0x7fc0 | (uint16_t)((a >> 45) & 0x7f);
    if (a >= (UINT64_C(1151) << 52)) /* |x| >= 2^128 */
        return sign | 0x7f80;
    if (a >= (UINT64_C(897) << 52)) /* >= 2^-126: rebias 1023 -> 127, round off 45 bits */
        return sign | (uint16_t)drop_rne(a - (UINT64_C(896) << 52), 45);
    uint64_t e = a >> 52;
    uint64_t m = (a & ((UINT64_C(1) << 52) - 1)) | (e ? UINT64_C(1) << 52 : 0);
    uint64_t s = e ? 942 - e : 63; /* value = m * 2^(e - 1075), unit 2^-133 */
    return sign | (uint16_t)shift_rne(m, (unsigned)(s > 63 ? 63 : s));
}

float nx_bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    if ((u & 0x7fffffff) > 0x7f800000)
        u |= 0x400000;
    return f32_from_bits(u);
}
