/* Kernel IR -> CUDA C (docs/cuda.md, docs/kernel-ir.md).
 *
 * A LOOP kernel becomes one __global__ function. Every instruction is placed in a scope: the top
 * scope (one iteration point) or the loop body of the REDUCE that owns the innermost reduction
 * loop its value depends on (nx_kernel_loop_masks). Scopes nest as REDUCEs nest, so loop
 * invariants sit outside the K-loop and a nested reduction's loops run inside its consumer's.
 *
 * Three specialised generators come first: register-tiled contractions (emit-tile.c), staged
 * pairwise folds (emit-pair.c) and vectorised elementwise kernels (emit-vec.c); a kernel none
 * takes gets the general form below. Within it, a box split whose value is one float MIN/MAX
 * network over a separable window (a flat-box dilation or erosion) becomes shared-memory plane
 * tiles (emit-stencil.c).
 *
 * Two launch shapes:
 *   POINTS        one thread per iteration point, grid-stride; each fold runs serially in the
 *                 canonical order (exact in reproducible mode).
 *   BLOCK_REDUCE  for a space of few points whose value is one large top-level fold: G blocks per
 *                 point, each thread folds a strided part of the block's chunk, a fixed shared-
 *                 memory tree combines the threads, and the last block of a point (a ticket
 *                 counter, the only atomic) combines the G partials in block order. The order
 *                 is fixed by the shapes, so the result is the same on every run; it is used for
 *                 MAX/MIN (exact in any order), integer SUM (wrapping, exact in any order) and,
 *                 when reassociation is allowed, float SUM.
 * Math follows ir/prim-elementwise.c: NaN-propagating min/max, rint (half to even), floor
 * division and modulo with x/0 = 0, wrapping integer arithmetic (done in 64 bits, then narrowed
 * as the interpreter narrows), saturating float->int casts with NaN -> 0. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/ptx/emit-tile.h"

typedef nx_ptx_text text;
typedef nx_ptx_gen gen;

#define put nx_rt_text_put

void nx_ptx_put(nx_ptx_text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nx_rt_text_vput(t, fmt, ap);
    va_end(ap);
}

/* ---- device helpers, the interpreter's scalar semantics ------------------------------------*/

const char nx_ptx_prelude[] =
    "typedef long long i64;\n"
    "typedef unsigned long long u64;\n"
    "#define NX_I64_MIN (-9223372036854775807LL - 1)\n"
    "#define NX_NANF __int_as_float(0x7fc00000)\n"
    "#define NX_NAN __longlong_as_double(0x7ff8000000000000LL)\n"
    "#define NX_INFF __int_as_float(0x7f800000)\n"
    "#define NX_INF __longlong_as_double(0x7ff0000000000000LL)\n"
    "static __device__ __forceinline__ i64 nx_add(i64 a, i64 b) { return (i64)((u64)a + (u64)b); }\n"
    "static __device__ __forceinline__ i64 nx_sub(i64 a, i64 b) { return (i64)((u64)a - (u64)b); }\n"
    "static __device__ __forceinline__ i64 nx_mul(i64 a, i64 b) { return (i64)((u64)a * (u64)b); }\n"
    "static __device__ __forceinline__ i64 nx_neg(i64 a) { return (i64)(0ULL - (u64)a); }\n"
    "static __device__ __forceinline__ i64 nx_iabs(i64 a) { return a < 0 ? nx_neg(a) : a; }\n"
    "static __device__ __forceinline__ i64 nx_idiv(i64 a, i64 b)\n"
    "{\n"
    "    if (b == 0) return 0;\n"
    "    if (a == NX_I64_MIN && b == -1) return NX_I64_MIN;\n"
    "    i64 q = a / b;\n"
    "    if (a % b != 0 && ((a < 0) != (b < 0))) q--;\n"
    "    return q;\n"
    "}\n"
    "static __device__ __forceinline__ i64 nx_imod(i64 a, i64 b)\n"
    "{\n"
    "    if (b == 0 || (a == NX_I64_MIN && b == -1)) return 0;\n"
    "    i64 r = a % b;\n"
    "    if (r != 0 && ((r < 0) != (b < 0))) r += b;\n"
    "    return r;\n"
    "}\n"
    "static __device__ __forceinline__ int nx_idiv32(int a, int b)\n"
    "{\n"
    "    if (b == 0 || (a == (-2147483647 - 1) && b == -1)) return b == 0 ? 0 : a;\n"
    "    int q = a / b;\n"
    "    if (a % b != 0 && ((a < 0) != (b < 0))) q--;\n"
    "    return q;\n"
    "}\n"
    "static __device__ __forceinline__ int nx_imod32(int a, int b)\n"
    "{\n"
    "    if (b == 0 || b == -1) return 0;\n"
    "    int r = a % b;\n"
    "    if (r != 0 && ((r < 0) != (b < 0))) r += b;\n"
    "    return r;\n"
    "}\n"
    "static __device__ __forceinline__ float nx_maxnanf(float a, float b)\n"
    "{ float r; asm(\"max.NaN.f32 %0, %1, %2;\" : \"=f\"(r) : \"f\"(a), \"f\"(b)); return r; }\n"
    "static __device__ __forceinline__ float nx_minnanf(float a, float b)\n"
    "{ float r; asm(\"min.NaN.f32 %0, %1, %2;\" : \"=f\"(r) : \"f\"(a), \"f\"(b)); return r; }\n"
    "static __device__ i64 nx_ipow(i64 a, i64 b)\n"
    "{\n"
    "    if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;\n"
    "    u64 r = 1, base = (u64)a;\n"
    "    while (b) { if (b & 1) r *= base; base *= base; b >>= 1; }\n"
    "    return (i64)r;\n"
    "}\n"
    "static __device__ __forceinline__ double nx_fmodd(double a, double b)\n"
    "{\n"
    "    double m = fmod(a, b);\n"
    "    if (m != m) return m;\n"
    "    if (m != 0) { if ((b < 0) != (m < 0)) m += b; } else m = copysign(0.0, b);\n"
    "    return m;\n"
    "}\n"
    "static __device__ __forceinline__ float nx_fmodf(float a, float b)\n"
    "{\n"
    "    return (float)nx_fmodd((double)a, (double)b);\n"
    "}\n"
    /* b > a ? b : a (b < a ? b : a) as written: NVVM turns the C form into min/max.f32 when
     * an operand is a constant, and those return -0 or +0 for a tie of zeros whichever came
     * first (a constant-border erosion's cval +0 against a -0 tap gave -0) */
    "static __device__ __forceinline__ float nx_gtselectf(float b, float a)\n"
    "{ float r; asm(\"{ .reg .pred p; setp.gt.f32 p, %1, %2; selp.f32 %0, %1, %2, p; }\"\n"
    "      : \"=f\"(r) : \"f\"(b), \"f\"(a)); return r; }\n"
    "static __device__ __forceinline__ float nx_ltselectf(float b, float a)\n"
    "{ float r; asm(\"{ .reg .pred p; setp.lt.f32 p, %1, %2; selp.f32 %0, %1, %2, p; }\"\n"
    "      : \"=f\"(r) : \"f\"(b), \"f\"(a)); return r; }\n"
    "static __device__ __forceinline__ double nx_gtselectd(double b, double a)\n"
    "{ double r; asm(\"{ .reg .pred p; setp.gt.f64 p, %1, %2; selp.f64 %0, %1, %2, p; }\"\n"
    "      : \"=d\"(r) : \"d\"(b), \"d\"(a)); return r; }\n"
    "static __device__ __forceinline__ double nx_ltselectd(double b, double a)\n"
    "{ double r; asm(\"{ .reg .pred p; setp.lt.f64 p, %1, %2; selp.f64 %0, %1, %2, p; }\"\n"
    "      : \"=d\"(r) : \"d\"(b), \"d\"(a)); return r; }\n"
    "static __device__ __forceinline__ float nx_fmaxf(float a, float b)\n"
    "{ return (a != a || b != b) ? NX_NANF : nx_gtselectf(b, a); }\n"
    "static __device__ __forceinline__ float nx_fminf(float a, float b)\n"
    "{ return (a != a || b != b) ? NX_NANF : nx_ltselectf(b, a); }\n"
    "static __device__ __forceinline__ double nx_fmaxd(double a, double b)\n"
    "{ return (a != a || b != b) ? NX_NAN : nx_gtselectd(b, a); }\n"
    "static __device__ __forceinline__ double nx_fmind(double a, double b)\n"
    "{ return (a != a || b != b) ? NX_NAN : nx_ltselectd(b, a); }\n"
    "static __device__ __forceinline__ i64 nx_sat(double x, i64 lo, i64 hi)\n"
    "{\n"
    "    if (x != x) return 0;\n"
    "    x = trunc(x);\n"
    "    if (x <= (double)lo) return lo;\n"
    "    if (x >= 9223372036854775808.0 || x >= (double)hi) return hi;\n"
    "    return (i64)x;\n"
    "}\n"
    /* u64 (docs/numerics.md): the interpreter's unsigned division, power and saturation */
    "static __device__ __forceinline__ u64 nx_udiv(u64 a, u64 b) { return b ? a / b : 0; }\n"
    "static __device__ __forceinline__ u64 nx_umod(u64 a, u64 b) { return b ? a % b : 0; }\n"
    "static __device__ __forceinline__ u64 nx_uabs(u64 a) { return a; }\n"
    "static __device__ u64 nx_upow(u64 a, u64 b)\n"
    "{\n"
    "    u64 r = 1;\n"
    "    while (b) { if (b & 1) r *= a; a *= a; b >>= 1; }\n"
    "    return r;\n"
    "}\n"
    "static __device__ __forceinline__ u64 nx_satu64(double x)\n"
    "{\n"
    "    if (x != x) return 0;\n"
    "    x = trunc(x);\n"
    "    if (x <= 0.0) return 0;\n"
    "    if (x >= 18446744073709551616.0) return ~0ULL;\n"
    "    return (u64)x;\n"
    "}\n"
    /* a rotated left by b mod w, on the w low bits of a */
    "static __device__ __forceinline__ u64 nx_rotl(u64 a, u64 b, int w)\n"
    "{\n"
    "    u64 m = w == 64 ? ~0ULL : (1ULL << w) - 1;\n"
    "    unsigned r = (unsigned)(b % (u64)w);\n"
    "    a &= m;\n"
    "    return r ? ((a << r) | (a >> (w - r))) & m : a;\n"
    "}\n";

/* ---- types and values ----------------------------------------------------------------------*/

const char *nx_ptx_ctype(int d)
{
    switch (d) {
    case NX_DTYPE_F32:
        return "float";
    case NX_DTYPE_F64:
        return "double";
    case NX_DTYPE_I8:
        return "signed char";
    case NX_DTYPE_I16:
        return "short";
    case NX_DTYPE_I32:
        return "int";
    case NX_DTYPE_I64:
        return "i64";
    case NX_DTYPE_U32:
        return "unsigned int";
    case NX_DTYPE_U64:
        return "u64";
    default: /* u8, bool */
        return "unsigned char";
    }
}

static const char *ctype(int d)
{
    return nx_ptx_ctype(d);
}

static bool is_f(int d)
{
    return d == NX_DTYPE_F32 || d == NX_DTYPE_F64;
}

static void vline(gen *g, const char *fmt, va_list ap)
{
    char buf[1024];
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    if (n < 0 || (size_t)n >= sizeof buf) {
        g->t.failed = true;
        return;
    }
    put(&g->t, "%*s%s\n", 4 * g->ind, "", buf);
}

static void line(gen *g, const char *fmt, ...) NX_PRINTF(2, 3);

static void line(gen *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline(g, fmt, ap);
    va_end(ap);
}

void nx_ptx_line(nx_ptx_gen *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline(g, fmt, ap);
    va_end(ap);
}

static void const_text(const nx_kinst *in, char *buf, size_t len)
{
    if (in->dtype == NX_DTYPE_F32) {
        float f = (float)in->f;
        uint32_t u;
        memcpy(&u, &f, 4);
        snprintf(buf, len, "__int_as_float(0x%08x)", (unsigned)u);
    } else if (in->dtype == NX_DTYPE_F64) {
        uint64_t u;
        memcpy(&u, &in->f, 8);
        snprintf(buf, len, "__longlong_as_double(0x%016llxLL)", (unsigned long long)u);
    } else if (in->dtype == NX_DTYPE_BOOL) {
        snprintf(buf, len, "(unsigned char)%d", in->i != 0);
    } else if (in->i == INT64_MIN) {
        snprintf(buf, len, "(%s)NX_I64_MIN", ctype(in->dtype));
    } else {
        snprintf(buf, len, "(%s)%lldLL", ctype(in->dtype), (long long)in->i);
    }
}

/* The float->int saturation bounds of a dtype. */
static void int_bounds(int d, char *lo, char *hi, size_t len)
{
    switch (d) {
    case NX_DTYPE_I8:
        snprintf(lo, len, "-128LL"), snprintf(hi, len, "127LL");
        break;
    case NX_DTYPE_I16:
        snprintf(lo, len, "-32768LL"), snprintf(hi, len, "32767LL");
        break;
    case NX_DTYPE_I32:
        snprintf(lo, len, "-2147483648LL"), snprintf(hi, len, "2147483647LL");
        break;
    case NX_DTYPE_U8:
        snprintf(lo, len, "0LL"), snprintf(hi, len, "255LL");
        break;
    case NX_DTYPE_U32:
        snprintf(lo, len, "0LL"), snprintf(hi, len, "4294967295LL");
        break;
    default:
        snprintf(lo, len, "NX_I64_MIN"), snprintf(hi, len, "9223372036854775807LL");
        break;
    }
}

/* CAST as ir/value.c's nx_ir_convert: nonzero -> true (NaN included), floats to integers
 * truncated toward zero and saturated (NaN -> 0), integers wrapped to the width, integers to
 * floats through double. The last matters for i64 -> f32 only: (float)(double)x rounds twice, as
 * the interpreter does, and differs from (float)x where x needs more than 53 bits (2^60 + 2^36 + 1
 * gives 2^60 through double, 2^60 + 2^37 directly). */
static void cast_expr(int from, int to, int x, char *buf, size_t len)
{
    const char *t = ctype(to);
    if (to == NX_DTYPE_F32 && (from == NX_DTYPE_I64 || from == NX_DTYPE_U64)) {
        snprintf(buf, len, "(float)(double)v%d", x);
    } else if (to == NX_DTYPE_U64 && is_f(from)) {
        snprintf(buf, len, "nx_satu64((double)v%d)", x);
    } else if (to == NX_DTYPE_BOOL) {
        snprintf(buf, len, "(unsigned char)(v%d != 0)", x);
    } else if (is_f(from) && !is_f(to)) {
        char lo[32], hi[32];
        int_bounds(to, lo, hi, sizeof lo);
        snprintf(buf, len, "(%s)nx_sat((double)v%d, %s, %s)", t, x, lo, hi);
    } else if (!is_f(from) && !is_f(to)) {
        snprintf(buf, len, "(%s)(i64)v%d", t, x);
    } else {
        snprintf(buf, len, "(%s)v%d", t, x);
    }
}

/* ---- the elementwise emitters: one row per primitive ----------------------------------------
 *
 * Each row writes its primitive's expression for the operand classes it names; the names in f32,
 * f64 and i are the device function or C operator the row's writer puts in. A primitive without a
 * row, or whose operands are of a class its row does not take, has no emitter: nx_ptx_unsupported
 * refuses the kernel and names the primitive. Nothing is emitted by default. */

enum { ON_FLOAT = 1, ON_INT = 2 }; /* operand classes: f32 and f64; integers and bool */

typedef void expr_fn(const nx_kinst *in, int od, char *buf, size_t len);

typedef struct prim_emitter {
    expr_fn *expr;
    uint8_t on;                /* ON_FLOAT | ON_INT */
    const char *f32, *f64, *i; /* per operand class: the function or operator expr writes */
} prim_emitter;

/* The name a row writes for operands of dtype od. */
static const char *row_name(const prim_emitter *r, int od)
{
    static const char *const signed_[] = {"nx_idiv", "nx_imod", "nx_ipow", "nx_iabs"};
    static const char *const unsigned_[] = {"nx_udiv", "nx_umod", "nx_upow", "nx_uabs"};
    const char *n = od == NX_DTYPE_F32 ? r->f32 : od == NX_DTYPE_F64 ? r->f64 : r->i;
    if (od == NX_DTYPE_U64 && n) /* a u64 above 2^63 is no i64: the unsigned helpers */
        for (size_t k = 0; k < sizeof signed_ / sizeof *signed_; k++)
            if (strcmp(n, signed_[k]) == 0)
                return unsigned_[k];
    return n;
}

/* The unsigned C type of an integer dtype's width (the bits of its values). */
static const char *utype(int d)
{
    switch (nx_dtype_size((nx_dtype)d)) {
    case 1:
        return "unsigned char";
    case 2:
        return "unsigned short";
    case 4:
        return "unsigned int";
    default:
        return "u64";
    }
}

/* ---- integer bits (docs/numerics.md): the interpreter's semantics ----*/

static void e_bitnot(const nx_kinst *in, int od, char *buf, size_t len)
{
    (void)od;
    snprintf(buf, len, "(%s)(~(%s)v%d)", ctype(in->dtype), utype(in->dtype), in->a[0]);
}

static void e_bits2(const nx_kinst *in, int od, char *buf, size_t len);

/* the count read unsigned; from the width on 0 (shl, unsigned shr) or the sign (signed shr) */
static void e_shift(const nx_kinst *in, int od, char *buf, size_t len)
{
    (void)od;
    int a = in->a[0], b = in->a[1], d = in->dtype, w = (int)nx_dtype_size((nx_dtype)d) * 8;
    const char *t = ctype(d), *u = utype(d);
    bool un = d == NX_DTYPE_U8 || d == NX_DTYPE_U32 || d == NX_DTYPE_U64;
    if (in->prim == NX_PRIM_SHL)
        snprintf(buf, len, "(%s)((%s)v%d >= %d ? 0ULL : ((u64)(%s)v%d << (%s)v%d))", t, u, b, w,
                 u, a, u, b);
    else if (un)
        snprintf(buf, len, "(%s)((%s)v%d >= %d ? 0ULL : ((u64)(%s)v%d >> (%s)v%d))", t, u, b, w,
                 u, a, u, b);
    else
        snprintf(buf, len, "(%s)((i64)v%d >> ((%s)v%d >= %d ? %d : (%s)v%d))", t, a, u, b, w,
                 w - 1, u, b);
}

/* rotate: the funnel shift for 32 bits (its count is taken mod 32), else nx_rotl */
static void e_rotl(const nx_kinst *in, int od, char *buf, size_t len)
{
    (void)od;
    int a = in->a[0], b = in->a[1], d = in->dtype, w = (int)nx_dtype_size((nx_dtype)d) * 8;
    if (w == 32)
        snprintf(buf, len, "(%s)__funnelshift_l((unsigned)v%d, (unsigned)v%d, (unsigned)v%d)",
                 ctype(d), a, a, b);
    else
        snprintf(buf, len, "(%s)nx_rotl((u64)(%s)v%d, (u64)(%s)v%d, %d)", ctype(d), utype(d), a,
                 utype(d), b, w);
}

static void e_mulhi(const nx_kinst *in, int od, char *buf, size_t len)
{
    (void)od;
    if (in->dtype == NX_DTYPE_U32)
        snprintf(buf, len, "__umulhi(v%d, v%d)", in->a[0], in->a[1]);
    else
        snprintf(buf, len, "__umul64hi(v%d, v%d)", in->a[0], in->a[1]);
}

static void e_neg(const nx_kinst *in, int od, char *buf, size_t len)
{
    if (is_f(od))
        snprintf(buf, len, "-v%d", in->a[0]);
    else
        snprintf(buf, len, "(%s)nx_neg((i64)v%d)", ctype(in->dtype), in->a[0]);
}

/* name(x): float functions (expf, ...); integers through the i64 helper (nx_iabs). */
static void e_call1(const nx_kinst *in, int od, char *buf, size_t len);
/* name(a, b): float functions (powf, nx_fmodf, nx_fminf, ...); integers through the i64 helpers
 * (nx_add, nx_idiv, nx_ipow, ...), narrowed to the dtype as the interpreter narrows. */
static void e_call2(const nx_kinst *in, int od, char *buf, size_t len);

static void e_sign(const nx_kinst *in, int od, char *buf, size_t len)
{
    int x = in->a[0];
    const char *t = ctype(in->dtype);
    if (is_f(od))
        snprintf(buf, len, "(v%d != v%d ? v%d : (%s)((v%d > 0) - (v%d < 0)))", x, x, x, t, x, x);
    else
        snprintf(buf, len, "(%s)((v%d > 0) - (v%d < 0))", t, x, x);
}

static void e_isnan(const nx_kinst *in, int od, char *buf, size_t len)
{
    int x = in->a[0];
    snprintf(buf, len, is_f(od) ? "(unsigned char)(v%d != v%d)" : "(unsigned char)0", x, x);
}

static void e_not(const nx_kinst *in, int od, char *buf, size_t len)
{
    (void)od;
    snprintf(buf, len, "(unsigned char)(v%d == 0)", in->a[0]);
}

/* 1/sqrt rounded once, as the interpreter; rsqrtf is 2 ulp */
static void e_rsqrt(const nx_kinst *in, int od, char *buf, size_t len)
{
    (void)od;
    snprintf(buf, len, "(%s)(1.0 / sqrt((double)v%d))", ctype(in->dtype), in->a[0]);
}

static void e_cast(const nx_kinst *in, int od, char *buf, size_t len)
{
    cast_expr(od, in->dtype, in->a[0], buf, len);
}

/* a op b in C: float arithmetic; comparisons and logic of any class give a bool. */
static void e_infix(const nx_kinst *in, int od, char *buf, size_t len);

/* Integer MIN/MAX as a compare-select (exact); floats through nx_fminf/nx_fmaxf (NaN-propagating,
 * zeros as the interpreter orders them). */
static void e_minmax(const nx_kinst *in, int od, char *buf, size_t len);

static void e_select(const nx_kinst *in, int od, char *buf, size_t len)
{
    (void)od;
    snprintf(buf, len, "v%d ? v%d : v%d", in->a[0], in->a[1], in->a[2]);
}

#define BOTH (ON_FLOAT | ON_INT)
static const prim_emitter EMITTERS[NX_PRIM_COUNT] = {
    [NX_PRIM_NEG] = {e_neg, BOTH, NULL, NULL, NULL},
    [NX_PRIM_ABS] = {e_call1, BOTH, "fabsf", "fabs", "nx_iabs"},
    [NX_PRIM_EXP] = {e_call1, ON_FLOAT, "expf", "exp", NULL},
    [NX_PRIM_LOG] = {e_call1, ON_FLOAT, "logf", "log", NULL},
    [NX_PRIM_LOG1P] = {e_call1, ON_FLOAT, "log1pf", "log1p", NULL},
    [NX_PRIM_EXPM1] = {e_call1, ON_FLOAT, "expm1f", "expm1", NULL},
    [NX_PRIM_SQRT] = {e_call1, ON_FLOAT, "sqrtf", "sqrt", NULL},
    [NX_PRIM_RSQRT] = {e_rsqrt, BOTH, NULL, NULL, NULL},
    [NX_PRIM_SIN] = {e_call1, ON_FLOAT, "sinf", "sin", NULL},
    [NX_PRIM_COS] = {e_call1, ON_FLOAT, "cosf", "cos", NULL},
    [NX_PRIM_TANH] = {e_call1, ON_FLOAT, "tanhf", "tanh", NULL},
    [NX_PRIM_ERF] = {e_call1, ON_FLOAT, "erff", "erf", NULL},
    [NX_PRIM_FLOOR] = {e_call1, ON_FLOAT, "floorf", "floor", NULL},
    [NX_PRIM_CEIL] = {e_call1, ON_FLOAT, "ceilf", "ceil", NULL},
    [NX_PRIM_ROUND] = {e_call1, ON_FLOAT, "rintf", "rint", NULL}, /* half to even */
    [NX_PRIM_SIGN] = {e_sign, BOTH, NULL, NULL, NULL},
    [NX_PRIM_ISNAN] = {e_isnan, BOTH, NULL, NULL, NULL},
    [NX_PRIM_NOT] = {e_not, BOTH, NULL, NULL, NULL},
    [NX_PRIM_ADD] = {e_infix, BOTH, "+", "+", "nx_add"},
    [NX_PRIM_SUB] = {e_infix, BOTH, "-", "-", "nx_sub"},
    [NX_PRIM_MUL] = {e_infix, BOTH, "*", "*", "nx_mul"},
    [NX_PRIM_DIV] = {e_infix, BOTH, "/", "/", "nx_idiv"},
    [NX_PRIM_POW] = {e_call2, BOTH, "powf", "pow", "nx_ipow"},
    [NX_PRIM_MIN] = {e_minmax, BOTH, "nx_fminf", "nx_fmind", "<"},
    [NX_PRIM_MAX] = {e_minmax, BOTH, "nx_fmaxf", "nx_fmaxd", ">"},
    [NX_PRIM_ATAN2] = {e_call2, ON_FLOAT, "atan2f", "atan2", NULL},
    [NX_PRIM_MOD] = {e_call2, BOTH, "nx_fmodf", "nx_fmodd", "nx_imod"},
    [NX_PRIM_EQ] = {e_infix, BOTH, "==", "==", "=="},
    [NX_PRIM_NE] = {e_infix, BOTH, "!=", "!=", "!="},
    [NX_PRIM_LT] = {e_infix, BOTH, "<", "<", "<"},
    [NX_PRIM_LE] = {e_infix, BOTH, "<=", "<=", "<="},
    [NX_PRIM_GT] = {e_infix, BOTH, ">", ">", ">"},
    [NX_PRIM_GE] = {e_infix, BOTH, ">=", ">=", ">="},
    [NX_PRIM_AND] = {e_infix, BOTH, "&&", "&&", "&&"},
    [NX_PRIM_OR] = {e_infix, BOTH, "||", "||", "||"},
    [NX_PRIM_BITNOT] = {e_bitnot, ON_INT, NULL, NULL, NULL},
    [NX_PRIM_BITAND] = {e_bits2, ON_INT, NULL, NULL, "&"},
    [NX_PRIM_BITOR] = {e_bits2, ON_INT, NULL, NULL, "|"},
    [NX_PRIM_BITXOR] = {e_bits2, ON_INT, NULL, NULL, "^"},
    [NX_PRIM_SHL] = {e_shift, ON_INT, NULL, NULL, NULL},
    [NX_PRIM_SHR] = {e_shift, ON_INT, NULL, NULL, NULL},
    [NX_PRIM_ROTL] = {e_rotl, ON_INT, NULL, NULL, NULL},
    [NX_PRIM_MULHI] = {e_mulhi, ON_INT, NULL, NULL, NULL},
    [NX_PRIM_SELECT] = {e_select, BOTH, NULL, NULL, NULL},
    [NX_PRIM_CAST] = {e_cast, BOTH, NULL, NULL, NULL},
};
#undef BOTH

/* Whether the row's result is a bool that C's operator gives as int (comparisons and logic). */
static bool gives_bool(int prim)
{
    switch (prim) {
    case NX_PRIM_EQ:
    case NX_PRIM_NE:
    case NX_PRIM_LT:
    case NX_PRIM_LE:
    case NX_PRIM_GT:
    case NX_PRIM_GE:
    case NX_PRIM_AND:
    case NX_PRIM_OR:
        return true;
    default:
        return false;
    }
}

static void e_bits2(const nx_kinst *in, int od, char *buf, size_t len)
{
    snprintf(buf, len, "(%s)((%s)v%d %s (%s)v%d)", ctype(in->dtype), utype(in->dtype), in->a[0],
             row_name(&EMITTERS[in->prim], od), utype(in->dtype), in->a[1]);
}

static void e_call1(const nx_kinst *in, int od, char *buf, size_t len)
{
    const char *fn = row_name(&EMITTERS[in->prim], od);
    if (is_f(od))
        snprintf(buf, len, "%s(v%d)", fn, in->a[0]);
    else
        snprintf(buf, len, "(%s)%s((i64)v%d)", ctype(in->dtype), fn, in->a[0]);
}

static void e_call2(const nx_kinst *in, int od, char *buf, size_t len)
{
    const char *fn = row_name(&EMITTERS[in->prim], od);
    if (is_f(od))
        snprintf(buf, len, "%s(v%d, v%d)", fn, in->a[0], in->a[1]);
    else
        snprintf(buf, len, "(%s)%s((i64)v%d, (i64)v%d)", ctype(in->dtype), fn, in->a[0],
                 in->a[1]);
}

static void e_infix(const nx_kinst *in, int od, char *buf, size_t len)
{
    const char *op = row_name(&EMITTERS[in->prim], od);
    if (gives_bool(in->prim))
        snprintf(buf, len, "(unsigned char)(v%d %s v%d)", in->a[0], op, in->a[1]);
    else if (is_f(od))
        snprintf(buf, len, "v%d %s v%d", in->a[0], op, in->a[1]);
    else /* integer arithmetic wraps in 64 bits (the i column names the helper) */
        e_call2(in, od, buf, len);
}

static void e_minmax(const nx_kinst *in, int od, char *buf, size_t len)
{
    int a = in->a[0], b = in->a[1];
    if (is_f(od))
        e_call2(in, od, buf, len);
    else
        snprintf(buf, len, "(v%d %s v%d ? v%d : v%d)", b, row_name(&EMITTERS[in->prim], od), a,
                 b, a);
}

/* "cuda: primitive <name> has no emitter", one static string per primitive (a refusal is a
 * static string), from the primitive table's names. */
#define NX_PRIM(ID, name, ...) "cuda: primitive " name " has no emitter",
static const char *const NO_EMITTER[] = {
#include "ir/prims.def"
};
#undef NX_PRIM
#define NX_PRIM(ID, name, ...) "cuda: primitive " name " has no emitter for float operands",
static const char *const NO_FLOAT_EMITTER[] = {
#include "ir/prims.def"
};
#undef NX_PRIM
#define NX_PRIM(ID, name, ...)                                                                     \
    "cuda: primitive " name " has no emitter for integer or bool operands",
static const char *const NO_INT_EMITTER[] = {
#include "ir/prims.def"
};
#undef NX_PRIM
_Static_assert(sizeof NO_EMITTER / sizeof NO_EMITTER[0] == NX_PRIM_COUNT,
               "one refusal per primitive");

const char *nx_ptx_no_emitter(int prim)
{
    return prim >= 0 && prim < NX_PRIM_COUNT ? NO_EMITTER[prim]
                                             : "cuda: a primitive outside the table has no emitter";
}

/* The elementwise emitter of an instruction with operand dtype od, or NULL with *why set. */
static const prim_emitter *emitter_of(const nx_kinst *in, int od, const char **why)
{
    int p = in->prim;
    if (p < 0 || p >= NX_PRIM_COUNT || !EMITTERS[p].expr) {
        *why = nx_ptx_no_emitter(p);
        return NULL;
    }
    int cls = is_f(od) ? ON_FLOAT : ON_INT;
    if (!(EMITTERS[p].on & cls)) {
        *why = cls == ON_FLOAT ? NO_FLOAT_EMITTER[p] : NO_INT_EMITTER[p];
        return NULL;
    }
    return &EMITTERS[p];
}

/* The dtype that selects a PRIM's emitter column: its (first value) operand's. */
static int operand_dtype(const nx_kernel *k, const nx_kinst *in)
{
    return k->inst[in->a[in->prim == NX_PRIM_SELECT ? 1 : 0]].dtype;
}

/* ---- support -------------------------------------------------------------------------------*/

const char *nx_ptx_unsupported(const nx_kernel *k)
{
    if (k->kind != NX_KERNEL_LOOP)
        return "library kernels (scatter, sort, scan, extern, custom monoids) have no device "
               "implementation yet";
    for (int b = 0; b < k->nbufs; b++)
        if (nx_ir_is_half(k->bufs[b].dtype))
            return "f16/bf16 buffers are not supported by the CUDA emitter";
    for (int i = 0; i < k->ninst; i++) {
        const nx_kinst *in = &k->inst[i];
        if (nx_ir_is_half(in->dtype))
            return "f16/bf16 values are not supported by the CUDA emitter";
        if (in->op == NX_KOP_PRIM) {
            if (in->prim >= NX_PRIM_COUNT)
                return nx_ptx_no_emitter(in->prim);
            int od = operand_dtype(k, in);
            if (nx_ir_is_half(od))
                return "f16/bf16 values are not supported by the CUDA emitter";
            const char *why = NULL;
            if (!emitter_of(in, od, &why))
                return why;
        }
        if (in->op == NX_KOP_REDUCE && in->prim >= NX_MONOID_COUNT)
            return "an unknown monoid";
    }
    return NULL;
}

/* ---- instructions --------------------------------------------------------------------------*/

/* An instruction's value inside a box split: its alias (codegen/borders.h). */
static void emit_alias(gen *g, int id, const char *t)
{
    const nx_kinst *in = &g->k->inst[id];
    const nx_kalias *al = &g->alias[id];
    if (al->kind == NX_KALIAS_CONST && in->dtype == NX_DTYPE_BOOL)
        line(g, "const %s v%d = (unsigned char)%d;", t, id, al->c != 0);
    else if (al->kind == NX_KALIAS_CONST)
        line(g, "const %s v%d = (%s)%lldLL;", t, id, t, (long long)al->c);
    else if (al->c == 0)
        line(g, "const %s v%d = v%d;", t, id, al->to);
    else
        line(g, "const %s v%d = (%s)((i64)v%d + %lldLL);", t, id, t, al->to, (long long)al->c);
}

/* The expression of an i64 PRIM computed as int: its value and its i64 operands' are proven to
 * lie within int32 (nx_kranges), so the int operations are exact (no wrap, no overflow). The
 * primitives it writes are those narrow_prim names; false for any other. */
static bool narrow_expr(const nx_kinst *in, char *e, size_t len)
{
    int a = in->a[0], b = in->a[1];
    switch (in->prim) {
    case NX_PRIM_ADD:
        snprintf(e, len, "v%d + v%d", a, b);
        return true;
    case NX_PRIM_SUB:
        snprintf(e, len, "v%d - v%d", a, b);
        return true;
    case NX_PRIM_MUL:
        snprintf(e, len, "v%d * v%d", a, b);
        return true;
    case NX_PRIM_NEG:
        snprintf(e, len, "-v%d", a);
        return true;
    case NX_PRIM_ABS:
        snprintf(e, len, "(v%d < 0 ? -v%d : v%d)", a, a, a);
        return true;
    case NX_PRIM_DIV:
        snprintf(e, len, "nx_idiv32(v%d, v%d)", a, b);
        return true;
    case NX_PRIM_MOD:
        snprintf(e, len, "nx_imod32(v%d, v%d)", a, b);
        return true;
    case NX_PRIM_MIN:
    case NX_PRIM_MAX:
        snprintf(e, len, "(v%d %s v%d ? v%d : v%d)", b, in->prim == NX_PRIM_MIN ? "<" : ">", a, b,
                 a);
        return true;
    case NX_PRIM_SELECT:
        snprintf(e, len, "v%d ? v%d : v%d", a, b, in->a[2]);
        return true;
    case NX_PRIM_CAST: /* from an integer (narrow_prim) */
        snprintf(e, len, "(int)v%d", a);
        return true;
    default:
        return false;
    }
}

/* Whether an i64 PRIM may be computed as int (narrow_expr writes it): the operations exact on
 * int32 values; a cast only from an integer (a float's value needs the saturating form). */
static bool narrow_prim(const nx_kernel *k, const nx_kinst *in)
{
    switch (in->prim) {
    case NX_PRIM_ADD:
    case NX_PRIM_SUB:
    case NX_PRIM_MUL:
    case NX_PRIM_NEG:
    case NX_PRIM_ABS:
    case NX_PRIM_DIV:
    case NX_PRIM_MOD:
    case NX_PRIM_MIN:
    case NX_PRIM_MAX:
    case NX_PRIM_SELECT:
        return true;
    case NX_PRIM_CAST:
        return !is_f(k->inst[in->a[0]].dtype);
    default:
        return false;
    }
}

/* Float MIN/MAX networks. nx_fmaxf/nx_fminf test both operands for NaN at every node; but a
 * network of NaN-propagating MIN/MAX is NaN exactly when some leaf of its cone is NaN (every node
 * on a path from that leaf propagates it), and otherwise every node is the bare compare-select
 * (b > a ? b : a, the helpers' non-NaN branch). So an inner node (every use a float MIN/MAX, not
 * stored) is the bare compare-select, and a root (any other use) is the bare compare-select,
 * then NaN when a leaf of its cone (the operands reached through inner nodes) is NaN: the same
 * value at half the instructions per node. The f32 leaf test is a chain of max.NaN (sm_80: NaN
 * when an operand is), one instruction a leaf; f64 ORs the leaves' x != x. */
enum { MM_NONE, MM_INNER, MM_ROOT };

static bool is_fminmax(const nx_kinst *in)
{
    return in->op == NX_KOP_PRIM && (in->prim == NX_PRIM_MIN || in->prim == NX_PRIM_MAX) &&
           is_f(in->dtype);
}

static void find_minmax(const nx_kernel *k, uint8_t *mm)
{
    for (int id = 0; id < k->ninst; id++)
        mm[id] = is_fminmax(&k->inst[id]) ? MM_INNER : MM_NONE;
    for (int s = 0; s < k->nstores; s++)
        if (mm[k->stores[s].value])
            mm[k->stores[s].value] = MM_ROOT;
    for (int id = 0; id < k->ninst; id++) {
        const nx_kinst *in = &k->inst[id];
        int n = in->op == NX_KOP_LOAD ? 1 : in->op == NX_KOP_REDUCE ? 1 : 0;
        const int32_t *ops = in->op == NX_KOP_LOAD ? &in->a[1] : in->a;
        if (in->op == NX_KOP_PRIM)
            n = in->prim == NX_PRIM_SELECT ? 3 : nx_ir_prims[in->prim].arity;
        for (int j = 0; j < n; j++)
            if (mm[ops[j]] && !is_fminmax(in))
                mm[ops[j]] = MM_ROOT;
    }
}

static void emit_minmax(gen *g, int id)
{
    const nx_kinst *in = &g->k->inst[id];
    const char *t = ctype(in->dtype);
    int a = in->a[0], b = in->a[1];
    bool f32 = in->dtype == NX_DTYPE_F32;
    char sel[16]; /* nx_gtselectf ...: the compare-select kept as written (see the prelude) */
    snprintf(sel, sizeof sel, "nx_%sselect%c", in->prim == NX_PRIM_MIN ? "lt" : "gt",
             f32 ? 'f' : 'd');
    if (g->mm[id] == MM_INNER) {
        line(g, "const %s v%d = %s(v%d, v%d);", t, id, sel, b, a);
        return;
    }
    if (f32)
        line(g, "float c%d = 0.0f;", id); /* a number: max.NaN keeps it unless a leaf is NaN */
    else
        line(g, "int c%d = 0;", id);
    int top = 0, walk = ++g->mm_walk; /* the root is emitted once per region: a new mark each */
    g->mm_stack[top++] = id;
    g->mm_seen[id] = walk;
    while (top > 0) {
        const nx_kinst *x = &g->k->inst[g->mm_stack[--top]];
        for (int j = 0; j < 2; j++) {
            int o = x->a[j];
            if (g->mm_seen[o] == walk)
                continue;
            g->mm_seen[o] = walk;
            if (g->mm[o] == MM_INNER)
                g->mm_stack[top++] = o;
            else if (f32)
                line(g, "c%d = nx_maxnanf(c%d, v%d);", id, id, o);
            else
                line(g, "c%d |= v%d != v%d;", id, o, o);
        }
    }
    if (f32)
        line(g, "const float v%d = c%d != c%d ? NX_NANF : %s(v%d, v%d);", id, id, id, sel, b, a);
    else
        line(g, "const double v%d = c%d ? NX_NAN : %s(v%d, v%d);", id, id, sel, b, a);
}

void nx_ptx_emit_inst(nx_ptx_gen *g, int id)
{
    const nx_kinst *in = &g->k->inst[id];
    bool nw = g->narrow && g->narrow[id];
    const char *t = nw ? "int" : ctype(in->dtype);
    char e[512];
    if (g->alias && g->alias[id].kind != NX_KALIAS_SELF) {
        emit_alias(g, id, t);
        return;
    }
    if (g->mm && g->mm[id]) {
        emit_minmax(g, id);
        return;
    }
    if (nw && in->op == NX_KOP_PRIM && narrow_expr(in, e, sizeof e)) {
        line(g, "const int v%d = %s;", id, e);
        return;
    }
    switch (in->op) {
    case NX_KOP_CONST:
        if (nw)
            snprintf(e, sizeof e, "(int)%lldLL", (long long)in->i);
        else
            const_text(in, e, sizeof e);
        break;
    case NX_KOP_IDX:
        snprintf(e, sizeof e, nw ? "(int)i%d" : "i%d", in->a[0]);
        break;
    case NX_KOP_LOAD:
        snprintf(e, sizeof e, "b%d[v%d]", in->a[0], in->a[1]);
        break;
    default: { /* PRIM */
        const char *why = NULL;
        const prim_emitter *r = emitter_of(in, operand_dtype(g->k, in), &why);
        if (!r) { /* refused by nx_ptx_unsupported; should one get here, NVRTC fails loudly */
            line(g, "#error \"%s\"", why);
            return;
        }
        r->expr(in, operand_dtype(g->k, in), e, sizeof e);
        break;
    }
    }
    line(g, "const %s v%d = %s;", t, id, e);
}

/* The fold step of REDUCE r with accumulator names a<r> (value), n<r> (NaN seen), s<r> (LSE sum),
 * x the operand variable, kvar the position along the loop (ARGMAX/ARGMIN). */
static void emit_step(gen *g, int r, const char *kvar)
{
    const nx_kinst *in = &g->k->inst[r];
    int x = in->a[0], d = in->dtype;
    bool fl = is_f(d);
    const char *t = ctype(d);
    switch (in->prim) {
    case NX_MONOID_SUM:
    case NX_MONOID_PROD: {
        bool sum = in->prim == NX_MONOID_SUM;
        if (fl)
            line(g, "a%d = a%d %c v%d;", r, r, sum ? '+' : '*', x);
        else
            line(g, "a%d = (%s)%s((i64)a%d, (i64)v%d);", r, t, sum ? "nx_add" : "nx_mul", r, x);
        break;
    }
    case NX_MONOID_MAX:
    case NX_MONOID_MIN: {
        const char *op = in->prim == NX_MONOID_MAX ? ">" : "<";
        if (fl)
            line(g, "if (v%d != v%d) n%d = 1; else if (v%d %s a%d) a%d = v%d;", x, x, r, x, op, r,
                 r, x);
        else
            line(g, "if (v%d %s a%d) a%d = v%d;", x, op, r, r, x);
        break;
    }
    case NX_MONOID_LOGSUMEXP: {
        const char *ex = d == NX_DTYPE_F32 ? "expf" : "exp";
        line(g, "if (v%d != v%d) n%d = 1;", x, x, r);
        line(g, "else if (v%d != -%s) {", x, d == NX_DTYPE_F32 ? "NX_INFF" : "NX_INF");
        g->ind++;
        line(g, "if (v%d > a%d) { s%d = s%d * %s(a%d - v%d) + 1; a%d = v%d; }", x, r, r, r, ex, r,
             x, r, x);
        line(g, "else if (v%d == a%d) s%d += 1;", x, r, r);
        line(g, "else s%d += %s(v%d - a%d);", r, ex, x, r);
        g->ind--;
        line(g, "}");
        break;
    }
    default: { /* ARGMAX / ARGMIN: strict improvement keeps the first winner, the first NaN wins */
        const char *op = in->prim == NX_MONOID_ARGMAX ? ">" : "<";
        int od = g->k->inst[x].dtype;
        if (is_f(od))
            line(g, "if (!n%d && (%s == 0 || v%d != v%d || v%d %s a%d)) { a%d = v%d; m%d = %s; "
                    "n%d = v%d != v%d; }",
                 r, kvar, x, x, x, op, r, r, x, r, kvar, r, x, x);
        else
            line(g, "if (%s == 0 || v%d %s a%d) { a%d = v%d; m%d = %s; }", kvar, x, op, r, r, x, r,
                 kvar);
        break;
    }
    }
}

static void identity_text(int monoid, int d, char *buf, size_t len)
{
    bool lowest = monoid == NX_MONOID_MAX || monoid == NX_MONOID_ARGMAX ||
                  monoid == NX_MONOID_LOGSUMEXP;
    if (monoid == NX_MONOID_SUM) {
        snprintf(buf, len, "(%s)0", ctype(d));
    } else if (monoid == NX_MONOID_PROD) {
        snprintf(buf, len, "(%s)1", ctype(d));
    } else if (is_f(d)) {
        snprintf(buf, len, "%s%s", lowest ? "-" : "", d == NX_DTYPE_F32 ? "NX_INFF" : "NX_INF");
    } else if (d == NX_DTYPE_BOOL) {
        snprintf(buf, len, "(unsigned char)%d", lowest ? 0 : 1);
    } else {
        char lo[32], hi[32];
        int_bounds(d, lo, hi, sizeof lo);
        snprintf(buf, len, "(%s)%s", ctype(d), lowest ? lo : hi);
    }
}

static void emit_acc(gen *g, int r)
{
    const nx_kinst *in = &g->k->inst[r];
    int od = g->k->inst[in->a[0]].dtype; /* the carry has the operand's dtype */
    char id[64];
    identity_text(in->prim == NX_MONOID_ARGMAX || in->prim == NX_MONOID_ARGMIN ? in->prim
                                                                                 : in->prim,
                  od, id, sizeof id);
    line(g, "%s a%d = %s;", ctype(od), r, id);
    line(g, "int n%d = 0;", r);
    line(g, "(void)n%d;", r);
    if (in->prim == NX_MONOID_LOGSUMEXP)
        line(g, "%s s%d = 0;", ctype(od), r);
    if (in->prim == NX_MONOID_ARGMAX || in->prim == NX_MONOID_ARGMIN)
        line(g, "i64 m%d = 0;", r);
}

/* The value of REDUCE r from its carry, into variable f<r>. */
static void emit_finish(gen *g, int r)
{
    const nx_kinst *in = &g->k->inst[r];
    int d = in->dtype;
    const char *t = ctype(d);
    const char *nan = d == NX_DTYPE_F32 ? "NX_NANF" : "NX_NAN";
    switch (in->prim) {
    case NX_MONOID_ARGMAX:
    case NX_MONOID_ARGMIN:
        line(g, "const i64 v%d = m%d;", r, r);
        break;
    case NX_MONOID_LOGSUMEXP:
        line(g, "const %s v%d = n%d ? %s : (isinf(a%d) ? a%d : (%s)((double)a%d + log((double)s%d)));",
             t, r, r, nan, r, r, t, r, r);
        break;
    case NX_MONOID_MAX:
    case NX_MONOID_MIN:
        if (is_f(d)) {
            line(g, "const %s v%d = n%d ? %s : a%d;", t, r, r, nan, r);
            break;
        }
        /* fallthrough */
    default:
        line(g, "const %s v%d = a%d;", t, r, r);
        break;
    }
}

static void emit_scope(gen *g, int s, int limit);

static void emit_loops_open(gen *g, uint32_t loops)
{
    for (int l = 0; l < g->k->nloops; l++)
        if (loops & (1u << l)) {
            line(g, "for (%s i%d = 0; i%d < %lldLL; i%d++) {", g->narrow ? "int" : "i64", l, l,
                 (long long)g->k->extent[l], l);
            g->ind++;
        }
}

static void emit_reduce(gen *g, int r)
{
    const nx_kinst *in = &g->k->inst[r];
    uint32_t loops = (uint32_t)in->i;
    int first = -1;
    for (int l = 0; l < g->k->nloops && first < 0; l++)
        if (loops & (1u << l))
            first = l;
    emit_acc(g, r);
    emit_loops_open(g, loops);
    emit_scope(g, r, r);
    char kvar[16];
    snprintf(kvar, sizeof kvar, "i%d", first);
    emit_step(g, r, kvar);
    for (int l = 0; l < g->k->nloops; l++)
        if (loops & (1u << l)) {
            g->ind--;
            line(g, "}");
        }
    emit_finish(g, r);
}

/* ---- BLOCK_REDUCE --------------------------------------------------------------------------*/

static int64_t fold_length(const nx_kernel *k, uint32_t loops)
{
    int64_t n = 1;
    for (int l = 0; l < k->nloops; l++)
        if (loops & (1u << l))
            n *= k->extent[l];
    return n;
}

/* Combines the float MAX/MIN NaN flag into the carry's value, so partial carries combine with
 * NaN-propagating operations. */
static const char *combine_fn(const nx_kinst *in, int d)
{
    if (in->prim == NX_MONOID_SUM)
        return is_f(d) ? NULL : "nx_add";
    if (is_f(d))
        return in->prim == NX_MONOID_MAX ? (d == NX_DTYPE_F32 ? "nx_fmaxf" : "nx_fmaxd")
                                         : (d == NX_DTYPE_F32 ? "nx_fminf" : "nx_fmind");
    return in->prim == NX_MONOID_MAX ? "nx_imax" : "nx_imin";
}

static void emit_combine(gen *g, int d, const nx_kinst *in, const char *dst, const char *a,
                         const char *b)
{
    const char *fn = combine_fn(in, d);
    if (!fn)
        line(g, "%s = %s + %s;", dst, a, b);
    else if (!strcmp(fn, "nx_imax"))
        line(g, "%s = %s > %s ? %s : %s;", dst, b, a, b, a);
    else if (!strcmp(fn, "nx_imin"))
        line(g, "%s = %s < %s ? %s : %s;", dst, b, a, b, a);
    else if (!strcmp(fn, "nx_add"))
        line(g, "%s = (%s)nx_add((i64)%s, (i64)%s);", dst, ctype(d), a, b);
    else
        line(g, "%s = %s(%s, %s);", dst, fn, a, b);
}

static void emit_block_fold(gen *g, int r)
{
    const nx_kernel *k = g->k;
    const nx_kinst *in = &k->inst[r];
    uint32_t loops = (uint32_t)in->i;
    int d = in->dtype;
    const char *t = ctype(d);
    int64_t n = fold_length(k, loops);
    int64_t chunk = (n + g->blocks - 1) / g->blocks;
    emit_acc(g, r);
    line(g, "const i64 f0 = (i64)blk * %lldLL, f1 = min(f0 + %lldLL, %lldLL);", (long long)chunk,
         (long long)chunk, (long long)n);
    line(g, "for (i64 f = f0 + threadIdx.x; f < f1; f += %d) {", NX_PTX_THREADS);
    g->ind++;
    line(g, "i64 rem = f;");
    for (int l = k->nloops - 1; l >= 0; l--)
        if (loops & (1u << l)) {
            line(g, "const i64 i%d = rem %% %lldLL;", l, (long long)k->extent[l]);
            line(g, "rem /= %lldLL;", (long long)k->extent[l]);
        }
    line(g, "(void)rem;");
    emit_scope(g, r, r);
    emit_step(g, r, "f");
    g->ind--;
    line(g, "}");
    if (is_f(d) && in->prim != NX_MONOID_SUM)
        line(g, "if (n%d) a%d = %s;", r, r, d == NX_DTYPE_F32 ? "NX_NANF" : "NX_NAN");
    line(g, "__shared__ %s sh[%d];", t, NX_PTX_THREADS);
    line(g, "sh[threadIdx.x] = a%d;", r);
    line(g, "__syncthreads();");
    line(g, "for (int h = %d; h > 0; h >>= 1) {", NX_PTX_THREADS / 2);
    g->ind++;
    line(g, "if (threadIdx.x < h) {");
    g->ind++;
    emit_combine(g, d, in, "sh[threadIdx.x]", "sh[threadIdx.x]", "sh[threadIdx.x + h]");
    g->ind--;
    line(g, "}");
    line(g, "__syncthreads();");
    g->ind--;
    line(g, "}");
    /* The last block of this point to finish combines the partials in block order. */
    line(g, "__shared__ int last;");
    line(g, "if (threadIdx.x == 0) {");
    g->ind++;
    line(g, "part[p * %lldLL + blk] = sh[0];", (long long)g->blocks);
    line(g, "__threadfence();");
    line(g, "last = atomicAdd(&ticket[p], 1u) == %lldu;", (long long)g->blocks - 1);
    g->ind--;
    line(g, "}");
    line(g, "__syncthreads();");
    line(g, "if (!last) return;");
    line(g, "__threadfence();");
    line(g, "%s acc = ((volatile %s *)part)[p * %lldLL];", t, t, (long long)g->blocks);
    line(g, "for (i64 q = 1; q < %lldLL; q++) {", (long long)g->blocks);
    g->ind++;
    line(g, "const %s pq = ((volatile %s *)part)[p * %lldLL + q];", t, t, (long long)g->blocks);
    emit_combine(g, d, in, "acc", "acc", "pq");
    g->ind--;
    line(g, "}");
    line(g, "if (threadIdx.x == 0) ticket[p] = 0;");
    line(g, "const %s v%d = acc;", t, r);
}

/* Emits, in id order, the instructions whose scope is s (id < limit). */
static void emit_scope(gen *g, int s, int limit)
{
    for (int id = 0; id < limit; id++) {
        if (g->scope[id] != s || (g->live && !g->live[id]))
            continue;
        if (g->k->inst[id].op != NX_KOP_REDUCE)
            nx_ptx_emit_inst(g, id);
        else if (id == g->block_r)
            emit_block_fold(g, id);
        else
            emit_reduce(g, id);
    }
}

/* ---- placement and the launch shape --------------------------------------------------------*/

static void place(gen *g)
{
    const nx_kernel *k = g->k;
    for (int l = 0; l < NX_KERNEL_MAX_LOOPS; l++)
        g->owner[l] = -1;
    for (int id = 0; id < k->ninst; id++)
        if (k->inst[id].op == NX_KOP_REDUCE)
            for (int l = k->ndim; l < k->nloops; l++)
                if (k->inst[id].i & (1ll << l))
                    g->owner[l] = id;
    for (int id = 0; id < k->ninst; id++) {
        int s = -1;
        for (int l = k->ndim; l < k->nloops; l++)
            if ((g->mask[id] & (1u << l)) && g->owner[l] >= 0 && (s < 0 || g->owner[l] < s))
                s = g->owner[l];
        g->scope[id] = s;
    }
}

/* BLOCK_REDUCE when the space has few points and exactly one top-level fold whose order may
 * change: (see the file comment). */
static void choose_shape(gen *g, bool reassoc, nx_ptx_launch *launch)
{
    const nx_kernel *k = g->k;
    int64_t points = nx_ir_numel(k->ndim, k->extent);
    launch->shape = NX_PTX_POINTS;
    launch->points = points;
    launch->fold_len = 0;
    g->block_r = -1;
    g->blocks = 1;
    int top = -1, ntop = 0;
    for (int id = 0; id < k->ninst; id++)
        if (k->inst[id].op == NX_KOP_REDUCE && g->scope[id] < 0)
            top = id, ntop++;
    if (ntop != 1 || points > 65536 || points == 0)
        return;
    const nx_kinst *in = &k->inst[top];
    int d = k->inst[in->a[0]].dtype;
    bool ok = in->prim == NX_MONOID_MAX || in->prim == NX_MONOID_MIN ||
              (in->prim == NX_MONOID_SUM && (!is_f(d) || reassoc));
    int64_t n = fold_length(k, (uint32_t)in->i);
    if (!ok || d != in->dtype || n < 1024)
        return;
    int64_t blocks = 2048 / points;
    int64_t cap = n / 8192;
    blocks = blocks < cap ? blocks : cap;
    g->blocks = blocks < 1 ? 1 : blocks;
    g->block_r = top;
    launch->shape = NX_PTX_BLOCK_REDUCE;
    launch->fold_len = n;
}

static void emit_signature(gen *g, const char *name)
{
    const nx_kernel *k = g->k;
    put(&g->t, "extern \"C\" __global__ void __launch_bounds__(%d)\n%s(", NX_PTX_THREADS, name);
    for (int b = 0; b < k->nbufs; b++)
        put(&g->t, "%s%s *__restrict__ b%d, ", k->bufs[b].role == NX_KBUF_IN ? "const " : "",
            ctype(k->bufs[b].dtype), b);
    if (g->block_r >= 0)
        put(&g->t, "%s *part, unsigned *ticket, ", ctype(k->inst[g->block_r].dtype));
    put(&g->t, "i64 points)\n{\n");
}

void nx_ptx_emit_point_index(nx_ptx_gen *g, const char *p)
{
    line(g, "i64 rem = %s;", p);
    for (int l = g->k->ndim - 1; l >= 0; l--) { /* an empty space never runs: no % 0 */
        long long e = g->k->extent[l] ? (long long)g->k->extent[l] : 1;
        line(g, "const i64 i%d = rem %% %lldLL;", l, e);
        line(g, "rem /= %lldLL;", e);
    }
    line(g, "(void)rem;");
}

static void emit_stores(gen *g)
{
    for (int s = 0; s < g->k->nstores; s++)
        line(g, "b%d[p] = v%d;", g->k->stores[s].buf, g->k->stores[s].value);
}

/* ---- the border/interior split ------------------------------------------------------------*/

/* A box split (codegen/borders.h) over the space's points p in [0, points): the first ones are the
 * box's points in C order, computed with the aliases (no index rules); the rest are the shell
 * outside it, in slabs (one per split axis a: the box's ranges on the axes before a, the two
 * border ranges of a, the whole of the axes after a), computed as written. Consecutive threads
 * thus take consecutive points of the innermost axis inside one region, and a warp diverges only
 * where it straddles two regions. */
typedef nx_ptx_box_plan box_plan;

/* i<l> = lo[l] + (t in C order over w[]) on every axis; t is consumed. */
static void emit_box_point(gen *g, const box_plan *bp)
{
    for (int l = g->k->ndim - 1; l >= 0; l--) {
        long long w = (long long)bp->w[l], lo = (long long)bp->b->lo[l], r = 1;
        if (l == bp->axis)
            r = bp->rows, w /= r;
        if (w == 1) {
            line(g, "i%d = %lld;", l, lo);
            continue;
        }
        line(g, "i%d = %lld + (%s)(t %% %lldU) * %lld;", l, lo, g->narrow ? "int" : "i64", w, r);
        line(g, "t /= %lldU;", w);
    }
}

/* The points of slab a (t in [0, its size)), t is consumed. */
static void emit_slab_point(gen *g, const box_plan *bp, int a)
{
    const nx_kernel *k = g->k;
    const char *it = g->narrow ? "int" : "i64";
    for (int l = k->ndim - 1; l >= 0; l--) {
        long long n = (long long)k->extent[l], w = (long long)bp->w[l];
        long long lo = (long long)bp->b->lo[l];
        long long e = l < a ? w : l == a ? n - w : n;
        line(g, "i%d = (%s)(t %% %lldU);", l, it, e);
        line(g, "t /= %lldU;", e);
        if (l < a)
            line(g, "i%d += %lld;", l, lo);
        else if (l == a)
            line(g, "i%d += i%d < %lld ? 0 : %lld;", l, l, lo, w);
    }
}

static void emit_stores_at(gen *g, const char *q)
{
    for (int s = 0; s < g->k->nstores; s++)
        line(g, "b%d[%s] = v%d;", g->k->stores[s].buf, q, g->k->stores[s].value);
}

static void emit_linear(gen *g)
{
    const nx_kernel *k = g->k;
    char e[768];
    size_t n = 0;
    for (int l = 1; l < k->ndim && n < 64; l++)
        e[n++] = '(';
    n += (size_t)snprintf(e + n, sizeof e - n, "(i64)i0");
    for (int l = 1; l < k->ndim && n < sizeof e; l++)
        n += (size_t)snprintf(e + n, sizeof e - n, " * %lldLL + i%d)", (long long)k->extent[l], l);
    if (n >= sizeof e) {
        g->t.failed = true;
        return;
    }
    line(g, "const i64 q = %s;", e);
}

void nx_ptx_emit_shell(nx_ptx_gen *g, const nx_ptx_box_plan *bp)
{
    const nx_kernel *k = g->k;
    int last = -1;
    for (int a = 0; a < k->ndim; a++)
        last = bp->split[a] ? a : last;
    line(g, "do {");
    g->ind++;
    for (int a = 0; a <= last; a++) {
        if (!bp->split[a])
            continue;
        int64_t size = 1;
        for (int l = 0; l < k->ndim; l++)
            size *= l < a ? bp->w[l] : l == a ? k->extent[l] - bp->w[l] : k->extent[l];
        if (a < last) {
            line(g, "if (t < %lldU) {", (long long)size);
            g->ind++;
        }
        emit_slab_point(g, bp, a);
        if (a < last) {
            line(g, "break;");
            g->ind--;
            line(g, "}");
            line(g, "t -= %lldU;", (long long)size);
        }
    }
    g->ind--;
    line(g, "} while (0);");
    emit_linear(g);
    emit_scope(g, -1, k->ninst);
    emit_stores_at(g, "q");
}

static void emit_box_body(gen *g, const box_plan *bp, const uint8_t *live)
{
    const nx_kernel *k = g->k;
    const char *ut = g->narrow ? "unsigned" : "u64";
    line(g, "for (i64 p = (i64)blockIdx.x * %d + threadIdx.x; p < points;", NX_PTX_THREADS);
    line(g, "     p += (i64)gridDim.x * %d) {", NX_PTX_THREADS);
    g->ind++;
    line(g, "%s t = (%s)p;", ut, ut);
    for (int l = 0; l < k->ndim; l++)
        line(g, "%s i%d;", g->narrow ? "int" : "i64", l);
    line(g, "if (t < %lldU) {", (long long)(bp->inner / bp->rows));
    g->ind++;
    emit_box_point(g, bp);
    if (bp->rows > 1)
        line(g, "const %s ib = i%d;", g->narrow ? "int" : "i64", bp->axis);
    g->alias = bp->b->alias;
    g->live = live;
    for (int r = 0; r < bp->rows; r++) {
        if (bp->rows > 1) {
            line(g, "{");
            g->ind++;
            line(g, "const %s i%d = ib + %d;", g->narrow ? "int" : "i64", bp->axis, r);
        }
        emit_linear(g);
        emit_scope(g, -1, k->ninst);
        emit_stores_at(g, "q");
        if (bp->rows > 1) {
            g->ind--;
            line(g, "}");
        }
    }
    g->alias = NULL;
    g->live = NULL;
    line(g, "continue;");
    g->ind--;
    line(g, "}");
    line(g, "t -= %lldU;", (long long)(bp->inner / bp->rows));
    nx_ptx_emit_shell(g, bp);
    g->ind--;
    line(g, "}");
}

/* The box plan of b for k; false when the box is the whole space or empty (no split). */
/* Rows along an outer axis: points i and i + 1 along an axis with a wide border read mostly the
 * same taps, so a thread computing `rows` consecutive points there (the box's width on that axis cut
 * to a multiple of rows, the rest joining the shell) loads each shared tap once (the compiler
 * merges the loads of equal addresses: the buffers are __restrict__ and the taps unrolled). The
 * axis: the outer one with the widest border, at least 2. Off unless NITRIX_PTX_ROWS=1: measured
 * only with a bug since fixed (the launch kept one thread per point, the surplus threads computed
 * shell points again), not measured since (docs/perf/cuda-stencil.md). */
static void plan_rows(const nx_kernel *k, box_plan *bp)
{
    bp->axis = -1;
    bp->rows = 1;
    int64_t best = 1;
    for (int l = 0; l + 1 < k->ndim; l++) {
        int64_t border = k->extent[l] - bp->w[l];
        if (border > best && bp->w[l] >= 16)
            best = border, bp->axis = l;
    }
    if (bp->axis < 0)
        return;
    bp->rows = best >= 8 ? 8 : 4;
    bp->w[bp->axis] -= bp->w[bp->axis] % bp->rows;
}

static bool plan_box(const nx_kernel *k, const nx_kbox *b, bool rows, box_plan *bp)
{
    memset(bp, 0, sizeof *bp);
    bp->b = b;
    bp->inner = 1;
    bp->axis = -1;
    bp->rows = 1;
    for (int l = 0; l < k->ndim; l++)
        bp->w[l] = b->hi[l] - b->lo[l];
    if (rows && b->naxes > 0)
        plan_rows(k, bp);
    int nsplit = 0;
    for (int l = 0; l < k->ndim; l++) {
        bp->inner *= bp->w[l];
        bp->split[l] = bp->w[l] < k->extent[l];
        nsplit += bp->split[l];
    }
    return b->naxes > 0 && bp->inner > 0 && nsplit > 0;
}

/* One point of the general form at linear index p (declared by the caller): the point's
 * indices, the body (with the aliases of a box covering the space), the stores. */
static void emit_point(gen *g, const uint8_t *live)
{
    const nx_kalias *alias = g->alias;
    nx_ptx_emit_point_index(g, "p");
    g->live = alias ? live : NULL; /* a box covering the space: aliases everywhere */
    emit_scope(g, -1, g->k->ninst);
    g->alias = alias;
    g->live = NULL;
    emit_stores(g);
}

/* ilp points per thread, at p0 + j * T (T: the grid's threads) for j < ilp: consecutive threads
 * still take consecutive points, and a thread's ilp bodies, straight-line code over restrict
 * pointers, have their loads in flight together (one point per thread keeps only one element
 * per input in flight, a fraction of what the memory system needs to stream at full rate). The
 * last group of a short grid takes the guarded loop. */
static void emit_ilp(gen *g, const uint8_t *live, int ilp)
{
    long long np = (long long)nx_ir_numel(g->k->ndim, g->k->extent);
    line(g, "(void)points;");
    line(g, "const i64 T = (i64)gridDim.x * %d;", NX_PTX_THREADS);
    line(g, "for (i64 p0 = (i64)blockIdx.x * %d + threadIdx.x; p0 < %lldLL; p0 += T * %d) {",
         NX_PTX_THREADS, np, ilp);
    g->ind++;
    line(g, "if (p0 + T * %d < %lldLL) {", ilp - 1, np);
    g->ind++;
    for (int j = 0; j < ilp; j++) {
        line(g, "{");
        g->ind++;
        line(g, "const i64 p = p0 + T * %d;", j);
        emit_point(g, live);
        g->ind--;
        line(g, "}");
    }
    g->ind--;
    line(g, "} else {");
    g->ind++;
    line(g, "for (int j = 0; j < %d; j++) {", ilp);
    g->ind++;
    line(g, "const i64 p = p0 + T * j;");
    line(g, "if (p >= %lldLL) break;", np);
    emit_point(g, live);
    g->ind--;
    line(g, "}");
    g->ind--;
    line(g, "}");
    g->ind--;
    line(g, "}");
    g->alias = NULL;
}

static void emit_body(gen *g, const box_plan *bp, const uint8_t *live, int ilp)
{
    g->ind = 1;
    if (g->block_r < 0 && bp) {
        emit_box_body(g, bp, live);
    } else if (g->block_r < 0 && ilp > 1) {
        emit_ilp(g, live, ilp);
    } else if (g->block_r < 0) {
        line(g, "for (i64 p = (i64)blockIdx.x * %d + threadIdx.x; p < points;", NX_PTX_THREADS);
        line(g, "     p += (i64)gridDim.x * %d) {", NX_PTX_THREADS);
        g->ind++;
        nx_ptx_emit_point_index(g, "p");
        g->live = g->alias ? live : NULL; /* a box covering the space: aliases everywhere */
        emit_scope(g, -1, g->k->ninst);
        g->alias = NULL;
        g->live = NULL;
        emit_stores(g);
        g->ind--;
        line(g, "}");
    } else {
        line(g, "const i64 p = (i64)blockIdx.x / %lldLL, blk = (i64)blockIdx.x %% %lldLL;",
             (long long)g->blocks, (long long)g->blocks);
        line(g, "if (p >= points) return;");
        nx_ptx_emit_point_index(g, "p");
        emit_scope(g, -1, g->k->ninst);
        line(g, "if (threadIdx.x == 0) {");
        g->ind++;
        emit_stores(g);
        g->ind--;
        line(g, "}");
    }
    put(&g->t, "}\n");
}

int nx_ptx_general_flags(const nx_ctx *ctx)
{
    const nx_cuda_codegen_opts *o = nx_rt_cuda_codegen(ctx);
    int flags = 0;
    flags |= o->split != NX_CUDA_OFF ? NX_PTX_SPLIT : 0;
    flags |= o->narrow != NX_CUDA_OFF ? NX_PTX_NARROW : 0;
    flags |= o->minmax != NX_CUDA_OFF ? NX_PTX_MINMAX : 0;
    /* rows per thread: by default for kernels without float MIN/MAX (see emit_general); on takes
     * every box kernel */
    flags |= o->rows != NX_CUDA_OFF ? NX_PTX_ROWS : 0;
    flags |= o->rows == NX_CUDA_ON ? NX_PTX_ROWS_ALL : 0;
    flags |= o->stencil != NX_CUDA_OFF ? NX_PTX_STENCIL : 0;
    flags |= o->ilp != NX_CUDA_OFF ? NX_PTX_ILP : 0;
    return flags;
}

const char *nx_ptx_codegen_key(const nx_ctx *ctx, char *buf, size_t len)
{
    static const char *const sw[] = {"auto", "off", "on"};
    const nx_cuda_codegen_opts *o = nx_rt_cuda_codegen(ctx);
    int flags = nx_ptx_general_flags(ctx);
    /* the switches as they take effect (a default that is on and an explicit on are one form),
     * rows with its three states, the integers as given (0: the generator's choice) */
    snprintf(buf, len,
             "split=%d narrow=%d minmax=%d rows=%s stencil=%d ilp=%d shell=%d tz=%d depth=%d "
             "ry=%d pb=%d pair_rows=%d",
             !!(flags & NX_PTX_SPLIT), !!(flags & NX_PTX_NARROW), !!(flags & NX_PTX_MINMAX),
             (unsigned)o->rows < 3 ? sw[o->rows] : "?", !!(flags & NX_PTX_STENCIL),
             !!(flags & NX_PTX_ILP), o->stencil_shell == NX_CUDA_ON, o->stencil_tz,
             o->stencil_depth, o->stencil_ry, o->stencil_pb, o->pair_rows);
    return buf;
}

/* Which i64 instructions are computed as int: values within int32 (lo, hi: nx_kranges), of an
 * operation narrow_expr knows, every i64 operand itself narrow. Loop indices are ints only when
 * every extent and the point count fit, which the caller checks. */
void nx_ptx_find_narrow(const nx_kernel *k, const int64_t *lo, const int64_t *hi, uint8_t *nw)
{
    for (int id = 0; id < k->ninst; id++) {
        const nx_kinst *in = &k->inst[id];
        nw[id] = 0;
        if (in->dtype != NX_DTYPE_I64 || lo[id] < INT32_MIN || hi[id] > INT32_MAX)
            continue;
        if (in->op == NX_KOP_CONST || in->op == NX_KOP_IDX) {
            nw[id] = 1;
            continue;
        }
        if (in->op != NX_KOP_PRIM)
            continue;
        int p = in->prim;
        bool known = narrow_prim(k, in);
        int arity = p == NX_PRIM_SELECT ? 3 : nx_ir_prims[p].arity;
        for (int j = p == NX_PRIM_SELECT ? 1 : 0; known && j < arity; j++)
            known = k->inst[in->a[j]].dtype != NX_DTYPE_I64 || nw[in->a[j]];
        nw[id] = known;
    }
}

bool nx_ptx_narrow_space(const nx_kernel *k)
{
    for (int l = 0; l < k->nloops; l++)
        if (k->extent[l] > INT32_MAX)
            return false;
    return nx_ir_numel(k->ndim, k->extent) <= INT32_MAX;
}

/* Whether k computes a float MIN or MAX (a network or a fold): rows per thread are on by default
 * only for kernels without one. They pay for sums of shifted loads (the FIR's outer-axis passes:
 * the R points of a thread share 16 of each 17 rows; docs/perf/cuda-fir.md); MIN/MAX networks
 * (the median's) were measured only before the launch fix of ac4ecb0
 * (docs/perf/cuda-stencil.md), so they keep one point per thread unless the rows option is on. */
static bool has_float_minmax(const nx_kernel *k)
{
    for (int id = 0; id < k->ninst; id++) {
        const nx_kinst *in = &k->inst[id];
        bool f = is_f(in->dtype);
        if (f && in->op == NX_KOP_PRIM && (in->prim == NX_PRIM_MIN || in->prim == NX_PRIM_MAX))
            return true;
        if (f && in->op == NX_KOP_REDUCE && (in->prim == NX_MONOID_MIN || in->prim == NX_MONOID_MAX))
            return true;
    }
    return false;
}

/* Points per thread of an unsplit POINTS kernel (emit_ilp): 4 for a large space (>= 2^20
 * points) without folds and with a body small enough to repeat, else 1. */
static int ilp_of(const gen *g)
{
    const nx_kernel *k = g->k;
    if (g->block_r >= 0 || k->nloops != k->ndim || k->ninst > 512 ||
        nx_ir_numel(k->ndim, k->extent) < (1 << 20))
        return 1;
    return 4;
}

/* The general form, with the box split of its POINTS loop and 32-bit index arithmetic where the
 * analyses (codegen/borders.h) allow them and nx_ptx_general_flags has them on. */
static void emit_general(gen *g, nx_ptx_launch *launch)
{
    const nx_kernel *k = g->k;
    nx_ctx *ctx = k->ctx;
    int flags = nx_ptx_general_flags(ctx);
    size_t n = (size_t)k->ninst + 1;
    nx_kbox box = {0};
    box_plan bp;
    int64_t *lo = NULL, *hi = NULL;
    uint8_t *nw = NULL, *live = nx_rt_calloc(ctx, n, 1), *mm = nx_rt_calloc(ctx, n, 1);
    int32_t *stack = nx_rt_alloc(ctx, n * sizeof *stack);
    int32_t *seen = nx_rt_calloc(ctx, n, sizeof *seen);
    bool ok = live && mm && stack && seen;
    if (ok && (flags & NX_PTX_MINMAX)) {
        find_minmax(k, mm);
        g->mm = mm;
        g->mm_stack = stack;
        g->mm_seen = seen;
    }
    if (ok && (flags & NX_PTX_NARROW) && nx_ptx_narrow_space(k)) {
        lo = nx_rt_alloc(ctx, n * sizeof *lo);
        hi = nx_rt_alloc(ctx, n * sizeof *hi);
        nw = nx_rt_calloc(ctx, n, 1);
        ok = lo && hi && nw;
        if (ok) {
            nx_kranges(k, lo, hi);
            nx_ptx_find_narrow(k, lo, hi, nw);
            g->narrow = nw;
        }
    }
    if (ok && (flags & NX_PTX_SPLIT) && g->block_r < 0)
        ok = nx_kborders_box(k, g->mask, &box) == NX_OK;
    if (ok && box.naxes > 0)
        nx_kbox_live(k, box.alias, live);
    bool split = ok && plan_box(k, &box, false, &bp) && nx_ir_numel(k->ndim, k->extent) > 0;
    g->alias = ok && box.naxes > 0 && !split ? box.alias : NULL;
    /* window stencils first (rows per thread would only take their taps apart) */
    bool done = split && (flags & NX_PTX_STENCIL) && nx_ptx_emit_stencil(g, &bp, launch);
    bool rows = (flags & NX_PTX_ROWS_ALL) || ((flags & NX_PTX_ROWS) && !has_float_minmax(k));
    if (split && !done && rows)
        plan_box(k, &box, true, &bp);
    /* with rows, a box thread takes `rows` points: the launch has that many fewer threads (a
     * thread past them would fall into the last slab and compute its points again) */
    if (split && !done)
        launch->points -= bp.inner - bp.inner / bp.rows;
    int ilp = ok && !split && !done && (flags & NX_PTX_ILP) ? ilp_of(g) : 1;
    if (ilp > 1)
        launch->points = (launch->points + ilp - 1) / ilp;
    if (ok && !done)
        emit_body(g, split ? &bp : NULL, live, ilp);
    else if (!ok)
        g->t.failed = true;
    g->alias = NULL;
    g->narrow = NULL;
    g->mm = NULL;
    nx_kbox_free(ctx, &box);
    nx_rt_free(ctx, live, n);
    nx_rt_free(ctx, mm, n);
    nx_rt_free(ctx, stack, n * sizeof *stack);
    nx_rt_free(ctx, seen, n * sizeof *seen);
    nx_rt_free(ctx, nw, n);
    nx_rt_free(ctx, lo, n * sizeof *lo);
    nx_rt_free(ctx, hi, n * sizeof *hi);
}

nx_status nx_ptx_emit(const nx_kernel *k, const char *name, bool reassoc, char **src,
                      size_t *len, nx_ptx_launch *launch)
{
    *src = NULL;
    *len = 0;
    nx_ctx *ctx = k->ctx;
    nx_status st = nx_kernel_validate(k);
    if (st != NX_OK)
        return st;
    const char *why = nx_ptx_unsupported(k);
    if (why)
        return nx_rt_error(ctx, NX_ERR_UNSUPPORTED, "CUDA emitter: kernel %s: %s", k->name, why);
    size_t n = (size_t)(k->ninst ? k->ninst : 1);
    gen g = {.k = k, .t = {.ctx = ctx}};
    g.mask = nx_rt_calloc(ctx, n, sizeof *g.mask);
    g.scope = nx_rt_calloc(ctx, n, sizeof *g.scope);
    if (!g.mask || !g.scope) {
        nx_rt_free(ctx, g.mask, n * sizeof *g.mask);
        nx_rt_free(ctx, g.scope, n * sizeof *g.scope);
        return nx_rt_nomem(ctx, "CUDA emitter", 2 * n * sizeof *g.mask);
    }
    nx_kernel_loop_masks(k, g.mask);
    place(&g);
    put(&g.t, "// nitrix kernel %s\n%s\n", k->name, nx_ptx_prelude);
    nx_ptx_affine *aff = nx_rt_calloc(ctx, n, sizeof *aff);
    if (!aff)
        g.t.failed = true;
    else
        nx_ptx_affine_all(k, aff);
    /* Contractions and plain elementwise kernels have faster shapes; everything else (and these,
     * when they do not fit the special generators) the general loop nest below. */
    if (!aff || (!nx_ptx_emit_tile(&g, aff, name, launch) &&
                 !nx_ptx_emit_pair(&g, aff, name, reassoc, launch) &&
                 !nx_ptx_emit_vec(&g, aff, name, launch))) {
        choose_shape(&g, reassoc, launch);
        emit_signature(&g, name);
        emit_general(&g, launch);
    }
    nx_rt_free(ctx, aff, n * sizeof *aff);
    nx_rt_free(ctx, g.mask, n * sizeof *g.mask);
    nx_rt_free(ctx, g.scope, n * sizeof *g.scope);
    if (g.t.failed) {
        nx_rt_free(ctx, g.t.p, g.t.cap);
        return nx_rt_nomem(ctx, "CUDA emitter (source text)", g.t.cap * 2);
    }
    launch->blocks_per_point = g.blocks;
    *src = g.t.p;
    *len = g.t.cap;
    return NX_OK;
}
