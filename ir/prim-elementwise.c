/* Elementwise primitives: unary math, binary arithmetic, comparisons and logic, select, cast.
 *
 * Binary operands broadcast as NumPy does and must share a dtype: there is no implicit promotion.
 * Floats compute in double and round to the dtype on store (f32 results are the correctly
 * rounded-ish single values an oracle should give). Integers wrap around at their width; integer
 * division floors (numpy's //) and x / 0 = x mod 0 = 0, so no input is undefined behaviour. */
#include <math.h>
#include <string.h>

#include "ir.h"
#include "ir/adjoint.h"

/* ---- dtype classes -------------------------------------------------------------------------*/

typedef enum accepts {
    FLOAT,      /* f32, f64 */
    NUMBER,     /* f32, f64 and integers */
    NUM_OR_INT, /* isnan: numbers, answer bool */
    BOOL_ONLY,
    ANY,      /* numbers and bool */
    INTEGER,  /* the integer dtypes (bit operations) */
    UNSIGNED, /* u32, u64 (mulhi) */
} accepts;

/* The bit operations of the integer dtypes (docs/numerics.md). */
static bool is_bitop(nx_prim op)
{
    switch (op) {
    case NX_PRIM_BITNOT:
    case NX_PRIM_BITAND:
    case NX_PRIM_BITOR:
    case NX_PRIM_BITXOR:
    case NX_PRIM_SHL:
    case NX_PRIM_SHR:
    case NX_PRIM_ROTL:
    case NX_PRIM_MULHI:
        return true;
    default:
        return false;
    }
}

static accepts unary_accepts(nx_prim op)
{
    switch (op) {
    case NX_PRIM_NEG:
    case NX_PRIM_ABS:
    case NX_PRIM_SIGN:
        return NUMBER;
    case NX_PRIM_ISNAN:
        return NUM_OR_INT;
    case NX_PRIM_NOT:
        return BOOL_ONLY;
    case NX_PRIM_BITNOT:
        return INTEGER;
    default:
        return FLOAT;
    }
}

static accepts binary_accepts(nx_prim op)
{
    if (op == NX_PRIM_ATAN2)
        return FLOAT;
    if (nx_ir_prim_class(op) == NX_PCLASS_COMPARE)
        return ANY;
    if (op == NX_PRIM_AND || op == NX_PRIM_OR)
        return BOOL_ONLY;
    if (op == NX_PRIM_MULHI)
        return UNSIGNED;
    if (is_bitop(op))
        return INTEGER;
    return NUMBER;
}

static bool is_comparison(nx_prim op)
{
    return nx_ir_prim_class(op) == NX_PCLASS_COMPARE;
}

static bool dtype_accepted(accepts a, nx_dtype d)
{
    switch (a) {
    case FLOAT:
        return nx_ir_is_core_float(d);
    case NUMBER:
    case NUM_OR_INT:
        return nx_ir_is_core_float(d) || nx_ir_is_int(d);
    case BOOL_ONLY:
        return d == NX_DTYPE_BOOL;
    case ANY:
        return nx_ir_dtype_ok(d) && !nx_ir_is_half(d);
    case INTEGER:
        return nx_ir_is_int(d);
    case UNSIGNED:
        return d == NX_DTYPE_U32 || d == NX_DTYPE_U64;
    }
    return false;
}

static const char *expected(accepts a)
{
    static const char *const text[] = {
        [FLOAT] = "f32 or f64",
        [NUMBER] = "f32, f64 or an integer dtype",
        [NUM_OR_INT] = "f32, f64 or an integer dtype",
        [BOOL_ONLY] = "bool",
        [ANY] = "f32, f64, an integer dtype or bool",
        [INTEGER] = "an integer dtype (i8, i16, i32, i64, u8, u32, u64)",
        [UNSIGNED] = "u32 or u64",
    };
    return text[a];
}

/* ---- scalar semantics: one case per row ----------------------------------------------------*/

static double float_unary(nx_prim op, double x)
{
    switch (op) {
    case NX_PRIM_NEG: /* y = -x */
        return -x;
    case NX_PRIM_ABS: /* y = |x| */
        return fabs(x);
    case NX_PRIM_EXP: /* y = e^x */
        return exp(x);
    case NX_PRIM_LOG: /* y = ln x */
        return log(x);
    case NX_PRIM_LOG1P: /* y = ln(1 + x) */
        return log1p(x);
    case NX_PRIM_EXPM1: /* y = e^x - 1 */
        return expm1(x);
    case NX_PRIM_SQRT: /* y = sqrt x */
        return sqrt(x);
    case NX_PRIM_RSQRT: /* y = 1 / sqrt x */
        return 1.0 / sqrt(x);
    case NX_PRIM_SIN: /* y = sin x */
        return sin(x);
    case NX_PRIM_COS: /* y = cos x */
        return cos(x);
    case NX_PRIM_TANH: /* y = tanh x */
        return tanh(x);
    case NX_PRIM_ERF: /* y = erf x */
        return erf(x);
    case NX_PRIM_FLOOR: /* y = floor x */
        return floor(x);
    case NX_PRIM_CEIL: /* y = ceil x */
        return ceil(x);
    case NX_PRIM_ROUND: /* y = x rounded half to even (numpy.round) */
        return nearbyint(x);
    case NX_PRIM_SIGN: /* y = -1, 0, 1; NaN stays NaN */
        return isnan(x) ? x : (x > 0) - (x < 0);
#ifdef NX_TEST_PRIM_ROW
    case NX_PRIM_TEST_UNEMITTED: /* y = x (the test build's row, ir/prims.def) */
        return x;
#endif
    default:
        return NAN;
    }
}

static int64_t int_unary(nx_prim op, nx_dtype d, int64_t x)
{
    uint64_t u = (uint64_t)x;
    bool un = nx_ir_is_unsigned(d);
    switch (op) {
    case NX_PRIM_NEG: /* y = -x, wrapping */
        return (int64_t)(0 - u);
    case NX_PRIM_ABS: /* y = |x|, wrapping at the minimum; unsigned: x */
        return !un && x < 0 ? (int64_t)(0 - u) : x;
    case NX_PRIM_SIGN: /* unsigned: 0 or 1 */
        return un ? u != 0 : (x > 0) - (x < 0);
    case NX_PRIM_BITNOT: /* y = ~x (narrowed to the width by the store) */
        return (int64_t)~u;
    case NX_PRIM_NOT: /* y = !x */
        return x == 0;
    default:
        return 0;
    }
}

nx_ir_val nx_ir_scalar_unary(nx_prim op, nx_dtype in, nx_dtype out, nx_ir_val x)
{
    nx_ir_val r = {0, 0};
    if (op == NX_PRIM_ISNAN) /* y = (x != x) */
        r.i = nx_ir_is_float(in) && isnan(x.f);
    else if (nx_ir_is_float(in))
        r.f = float_unary(op, x.f);
    else
        r.i = int_unary(op, in, x.i);
    return nx_ir_fix(r, out);
}

static double float_mod(double a, double b)
{
    double m = fmod(a, b);
    if (isnan(m))
        return m;
    if (m != 0) {
        if ((b < 0) != (m < 0))
            m += b;
    } else {
        m = copysign(0.0, b);
    }
    return m;
}

static double float_binary(nx_prim op, double a, double b)
{
    switch (op) {
    case NX_PRIM_ADD:
        return a + b;
    case NX_PRIM_SUB:
        return a - b;
    case NX_PRIM_MUL:
        return a * b;
    case NX_PRIM_DIV:
        return a / b;
    case NX_PRIM_POW:
        return pow(a, b);
    case NX_PRIM_MIN: /* NaN if either is NaN, as numpy.minimum */
        return isnan(a) || isnan(b) ? NAN : (b < a ? b : a);
    case NX_PRIM_MAX:
        return isnan(a) || isnan(b) ? NAN : (b > a ? b : a);
    case NX_PRIM_ATAN2:
        return atan2(a, b);
    case NX_PRIM_MOD: /* sign of b, as numpy.mod */
        return float_mod(a, b);
    default:
        return NAN;
    }
}

static int64_t int_pow(int64_t a, int64_t b)
{
    if (b < 0) /* only |a| == 1 has an integer answer; numpy raises, we give 0 */
        return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
    uint64_t r = 1, base = (uint64_t)a;
    while (b) {
        if (b & 1)
            r *= base;
        base *= base;
        b >>= 1;
    }
    return (int64_t)r;
}

static int64_t int_div(int64_t a, int64_t b)
{
    if (b == 0)
        return 0;
    if (a == INT64_MIN && b == -1)
        return INT64_MIN;
    int64_t q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0)))
        q--;
    return q;
}

static int64_t int_mod(int64_t a, int64_t b)
{
    if (b == 0 || (a == INT64_MIN && b == -1))
        return 0;
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0)))
        r += b;
    return r;
}

/* The bit operations on a w-bit integer dtype: a and b hold the dtype's values (signed ones
 * sign-extended, unsigned ones zero-extended, a u64 its bits); the store narrows the result. */
static int64_t int_bits(nx_prim op, nx_dtype d, int64_t a, int64_t b)
{
    int w = (int)nx_dtype_size(d) * 8;
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    uint64_t mask = w == 64 ? ~UINT64_C(0) : (UINT64_C(1) << w) - 1;
    /* the shift count read as an unsigned value of the dtype */
    uint64_t sh = ub & mask;
    switch (op) {
    case NX_PRIM_BITAND:
        return (int64_t)(ua & ub);
    case NX_PRIM_BITOR:
        return (int64_t)(ua | ub);
    case NX_PRIM_BITXOR:
        return (int64_t)(ua ^ ub);
    case NX_PRIM_SHL: /* y = a << b, 0 once b >= w */
        return sh >= (uint64_t)w ? 0 : (int64_t)(ua << sh);
    case NX_PRIM_SHR: /* logical for unsigned (zero-extended a), arithmetic for signed */
        if (nx_ir_is_unsigned(d))
            return sh >= (uint64_t)w ? 0 : (int64_t)((ua & mask) >> sh);
        return sh >= (uint64_t)w ? (a < 0 ? -1 : 0) : (a < 0 ? ~(~a >> sh) : a >> sh);
    case NX_PRIM_ROTL: { /* y = a rotated left by b mod w */
        unsigned r = (unsigned)(sh % (uint64_t)w);
        uint64_t x = ua & mask;
        return r == 0 ? (int64_t)x : (int64_t)(((x << r) | (x >> (w - r))) & mask);
    }
    case NX_PRIM_MULHI: /* u32, u64: the high half of the 2w-bit product */
        if (w == 32)
            return (int64_t)(((ua & mask) * (ub & mask)) >> 32);
        return (int64_t)(uint64_t)(((unsigned __int128)ua * ub) >> 64);
    default:
        return 0;
    }
}

static int64_t uint_pow(uint64_t a, uint64_t b)
{
    uint64_t r = 1;
    while (b) {
        if (b & 1)
            r *= a;
        a *= a;
        b >>= 1;
    }
    return (int64_t)r;
}

static int64_t uint_div(uint64_t a, uint64_t b, bool div)
{
    if (b == 0)
        return 0;
    return (int64_t)(div ? a / b : a % b);
}

static int64_t int_binary(nx_prim op, nx_dtype d, int64_t a, int64_t b)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    if (is_bitop(op))
        return int_bits(op, d, a, b);
    if (d == NX_DTYPE_U64) { /* the bits of an int64 read as unsigned */
        switch (op) {
        case NX_PRIM_DIV:
            return uint_div(ua, ub, true);
        case NX_PRIM_MOD:
            return uint_div(ua, ub, false);
        case NX_PRIM_MIN:
            return (int64_t)(ub < ua ? ub : ua);
        case NX_PRIM_MAX:
            return (int64_t)(ub > ua ? ub : ua);
        case NX_PRIM_POW: /* the exponent is unsigned too */
            return uint_pow(ua, ub);
        default:
            break;
        }
    }
    switch (op) {
    case NX_PRIM_ADD:
        return (int64_t)(ua + ub);
    case NX_PRIM_SUB:
        return (int64_t)(ua - ub);
    case NX_PRIM_MUL:
        return (int64_t)(ua * ub);
    case NX_PRIM_DIV: /* floor division, x / 0 = 0 */
        return int_div(a, b);
    case NX_PRIM_POW:
        return int_pow(a, b);
    case NX_PRIM_MIN:
        return b < a ? b : a;
    case NX_PRIM_MAX:
        return b > a ? b : a;
    case NX_PRIM_MOD: /* sign of b, x mod 0 = 0 */
        return int_mod(a, b);
    case NX_PRIM_AND:
        return a && b;
    case NX_PRIM_OR:
        return a || b;
    default:
        return 0;
    }
}

static bool compare(nx_prim op, double a, double b)
{
    switch (op) {
    case NX_PRIM_EQ:
        return a == b;
    case NX_PRIM_NE:
        return a != b;
    case NX_PRIM_LT:
        return a < b;
    case NX_PRIM_LE:
        return a <= b;
    case NX_PRIM_GT:
        return a > b;
    default:
        return a >= b;
    }
}

static bool compare_int(nx_prim op, int64_t a, int64_t b)
{
    switch (op) {
    case NX_PRIM_EQ:
        return a == b;
    case NX_PRIM_NE:
        return a != b;
    case NX_PRIM_LT:
        return a < b;
    case NX_PRIM_LE:
        return a <= b;
    case NX_PRIM_GT:
        return a > b;
    default:
        return a >= b;
    }
}

static bool compare_uint(nx_prim op, uint64_t a, uint64_t b)
{
    switch (op) {
    case NX_PRIM_EQ:
        return a == b;
    case NX_PRIM_NE:
        return a != b;
    case NX_PRIM_LT:
        return a < b;
    case NX_PRIM_LE:
        return a <= b;
    case NX_PRIM_GT:
        return a > b;
    default:
        return a >= b;
    }
}

nx_ir_val nx_ir_scalar_binary(nx_prim op, nx_dtype in, nx_dtype out, nx_ir_val a, nx_ir_val b)
{
    nx_ir_val r = {0, 0};
    bool fl = nx_ir_is_float(in);
    if (is_comparison(op))
        r.i = fl                    ? compare(op, a.f, b.f)
              : in == NX_DTYPE_U64 ? compare_uint(op, (uint64_t)a.i, (uint64_t)b.i)
                                   : compare_int(op, a.i, b.i);
    else if (fl)
        r.f = float_binary(op, a.f, b.f);
    else
        r.i = int_binary(op, in, a.i, b.i);
    return nx_ir_fix(r, out);
}

/* ---- shape rules ---------------------------------------------------------------------------*/

nx_status nx_ir_shape_unary(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p,
                            nx_ir_sig *out)
{
    (void)s;
    accepts a = unary_accepts(p->op);
    nx_dtype d = p->ins[0].dtype;
    if (p->nattrs != 0)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "%d attributes; expected none", p->nattrs);
    if (!dtype_accepted(a, d))
        return nx_ir_fail(ck, NX_ERR_DTYPE, "x is %s; expected %s", nx_dtype_name(d), expected(a));
    *out = p->ins[0];
    if (p->op == NX_PRIM_ISNAN)
        out->dtype = NX_DTYPE_BOOL;
    return NX_OK;
}

nx_status nx_ir_shape_binary(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p,
                             nx_ir_sig *out)
{
    (void)s;
    accepts a = binary_accepts(p->op);
    nx_dtype da = p->ins[0].dtype, db = p->ins[1].dtype;
    if (p->nattrs != 0)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "%d attributes; expected none", p->nattrs);
    if (da != db)
        return nx_ir_fail(ck, NX_ERR_DTYPE,
                          "dtypes %s and %s differ; expected equal dtypes (no implicit "
                          "promotion: nx_cast one operand)",
                          nx_dtype_name(da), nx_dtype_name(db));
    if (!dtype_accepted(a, da))
        return nx_ir_fail(ck, NX_ERR_DTYPE, "operands are %s; expected %s", nx_dtype_name(da),
                          expected(a));
    nx_status st = nx_ir_broadcast_shapes(ck, &p->ins[0], &p->ins[1], NULL, NULL, out);
    if (st != NX_OK)
        return st;
    out->dtype = is_comparison(p->op) ? NX_DTYPE_BOOL : da;
    return NX_OK;
}

nx_status nx_ir_shape_select(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p,
                             nx_ir_sig *out)
{
    (void)s;
    const nx_ir_sig *c = &p->ins[0], *a = &p->ins[1], *b = &p->ins[2];
    if (p->nattrs != 0)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "%d attributes; expected none", p->nattrs);
    if (c->dtype != NX_DTYPE_BOOL)
        return nx_ir_fail(ck, NX_ERR_DTYPE, "cond is %s; expected bool (compare first)",
                          nx_dtype_name(c->dtype));
    if (a->dtype != b->dtype)
        return nx_ir_fail(ck, NX_ERR_DTYPE,
                          "dtypes %s and %s of a and b differ; expected equal dtypes (no "
                          "implicit promotion: nx_cast one operand)",
                          nx_dtype_name(a->dtype), nx_dtype_name(b->dtype));
    nx_ir_sig ab;
    nx_status st = nx_ir_broadcast_shapes(ck, a, b, "a", "b", &ab);
    if (st == NX_OK)
        st = nx_ir_broadcast_shapes(ck, c, &ab, "cond", "broadcast(a, b)", out);
    out->dtype = a->dtype;
    return st;
}

nx_status nx_ir_shape_cast(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p,
                           nx_ir_sig *out)
{
    (void)s;
    char buf[32];
    if (p->nattrs != 1 || !nx_ir_dtype_ok(p->attrs[0]))
        return nx_ir_fail(ck, NX_ERR_DTYPE, "target %s is not a dtype",
                          p->nattrs == 1 ? nx_ir_dtype_str(buf, sizeof buf, p->attrs[0]) : "?");
    *out = p->ins[0];
    out->dtype = (nx_dtype)p->attrs[0];
    return NX_OK;
}

/* ---- builders ------------------------------------------------------------------------------*/

static nx_node unary(nx_graph *g, const char *fn, nx_prim op, nx_node x)
{
    return nx_ir_make(g, fn, op, 1, &x, 0, NULL, 0, NULL);
}

static nx_node binary(nx_graph *g, const char *fn, nx_prim op, nx_node a, nx_node b)
{
    nx_node ops[2] = {a, b};
    return nx_ir_make(g, fn, op, 2, ops, 0, NULL, 0, NULL);
}

nx_node nx_neg(nx_graph *g, nx_node x)
{
    return unary(g, "nx_neg", NX_PRIM_NEG, x);
}

nx_node nx_abs(nx_graph *g, nx_node x)
{
    return unary(g, "nx_abs", NX_PRIM_ABS, x);
}

nx_node nx_exp(nx_graph *g, nx_node x)
{
    return unary(g, "nx_exp", NX_PRIM_EXP, x);
}

nx_node nx_log(nx_graph *g, nx_node x)
{
    return unary(g, "nx_log", NX_PRIM_LOG, x);
}

nx_node nx_log1p(nx_graph *g, nx_node x)
{
    return unary(g, "nx_log1p", NX_PRIM_LOG1P, x);
}

nx_node nx_expm1(nx_graph *g, nx_node x)
{
    return unary(g, "nx_expm1", NX_PRIM_EXPM1, x);
}

nx_node nx_sqrt(nx_graph *g, nx_node x)
{
    return unary(g, "nx_sqrt", NX_PRIM_SQRT, x);
}

nx_node nx_rsqrt(nx_graph *g, nx_node x)
{
    return unary(g, "nx_rsqrt", NX_PRIM_RSQRT, x);
}

nx_node nx_sin(nx_graph *g, nx_node x)
{
    return unary(g, "nx_sin", NX_PRIM_SIN, x);
}

nx_node nx_cos(nx_graph *g, nx_node x)
{
    return unary(g, "nx_cos", NX_PRIM_COS, x);
}

nx_node nx_tanh(nx_graph *g, nx_node x)
{
    return unary(g, "nx_tanh", NX_PRIM_TANH, x);
}

nx_node nx_erf(nx_graph *g, nx_node x)
{
    return unary(g, "nx_erf", NX_PRIM_ERF, x);
}

nx_node nx_floor(nx_graph *g, nx_node x)
{
    return unary(g, "nx_floor", NX_PRIM_FLOOR, x);
}

nx_node nx_ceil(nx_graph *g, nx_node x)
{
    return unary(g, "nx_ceil", NX_PRIM_CEIL, x);
}

nx_node nx_round(nx_graph *g, nx_node x)
{
    return unary(g, "nx_round", NX_PRIM_ROUND, x);
}

nx_node nx_sign(nx_graph *g, nx_node x)
{
    return unary(g, "nx_sign", NX_PRIM_SIGN, x);
}

nx_node nx_isnan(nx_graph *g, nx_node x)
{
    return unary(g, "nx_isnan", NX_PRIM_ISNAN, x);
}

nx_node nx_not(nx_graph *g, nx_node x)
{
    return unary(g, "nx_not", NX_PRIM_NOT, x);
}

nx_node nx_add(nx_graph *g, nx_node a, nx_node b)
{
    return binary(g, "nx_add", NX_PRIM_ADD, a, b);
}

nx_node nx_sub(nx_graph *g, nx_node a, nx_node b)
{
    return binary(g, "nx_sub", NX_PRIM_SUB, a, b);
}

nx_node nx_mul(nx_graph *g, nx_node a, nx_node b)
{
    return binary(g, "nx_mul", NX_PRIM_MUL, a, b);
}

nx_node nx_div(nx_graph *g, nx_node a, nx_node b)
{
    return binary(g, "nx_div", NX_PRIM_DIV, a, b);
}

nx_node nx_pow(nx_graph *g, nx_node a, nx_node b)
{
    return binary(g, "nx_pow", NX_PRIM_POW, a, b);
}

nx_node nx_minimum(nx_graph *g, nx_node a, nx_node b)
{
    return binary(g, "nx_minimum", NX_PRIM_MIN, a, b);
}

nx_node nx_maximum(nx_graph *g, nx_node a, nx_node b)
{
    return binary(g, "nx_maximum", NX_PRIM_MAX, a, b);
}

nx_node nx_atan2(nx_graph *g, nx_node a, nx_node b)
{
    return binary(g, "nx_atan2", NX_PRIM_ATAN2, a, b);
}

nx_node nx_mod(nx_graph *g, nx_node a, nx_node b)
{
    return binary(g, "nx_mod", NX_PRIM_MOD, a, b);
}

nx_node nx_eq(nx_graph *g, nx_node a, nx_node b)
{
    return binary(g, "nx_eq", NX_PRIM_EQ, a, b);
}

nx_node nx_ne(nx_graph *g, nx_node a, nx_node b)
{
    return binary(g, "nx_ne", NX_PRIM_NE, a, b);
}

nx_node nx_lt(nx_graph *g, nx_node a, nx_node b)
{
    return binary(g, "nx_lt", NX_PRIM_LT, a, b);
}

nx_node nx_le(nx_graph *g, nx_node a, nx_node b)
{
    return binary(g, "nx_le", NX_PRIM_LE, a, b);
}

nx_node nx_gt(nx_graph *g, nx_node a, nx_node b)
{
    return binary(g, "nx_gt", NX_PRIM_GT, a, b);
}

nx_node nx_ge(nx_graph *g, nx_node a, nx_node b)
{
    return binary(g, "nx_ge", NX_PRIM_GE, a, b);
}

nx_node nx_and(nx_graph *g, nx_node a, nx_node b)
{
    return binary(g, "nx_and", NX_PRIM_AND, a, b);
}

nx_node nx_or(nx_graph *g, nx_node a, nx_node b)
{
    return binary(g, "nx_or", NX_PRIM_OR, a, b);
}

nx_node nx_bitnot(nx_graph *g, nx_node x)
{
    return unary(g, "nx_bitnot", NX_PRIM_BITNOT, x);
}

nx_node nx_bitand(nx_graph *g, nx_node a, nx_node b)
{
    return binary(g, "nx_bitand", NX_PRIM_BITAND, a, b);
}

nx_node nx_bitor(nx_graph *g, nx_node a, nx_node b)
{
    return binary(g, "nx_bitor", NX_PRIM_BITOR, a, b);
}

nx_node nx_bitxor(nx_graph *g, nx_node a, nx_node b)
{
    return binary(g, "nx_bitxor", NX_PRIM_BITXOR, a, b);
}

nx_node nx_shl(nx_graph *g, nx_node a, nx_node b)
{
    return binary(g, "nx_shl", NX_PRIM_SHL, a, b);
}

nx_node nx_shr(nx_graph *g, nx_node a, nx_node b)
{
    return binary(g, "nx_shr", NX_PRIM_SHR, a, b);
}

nx_node nx_rotl(nx_graph *g, nx_node a, nx_node b)
{
    return binary(g, "nx_rotl", NX_PRIM_ROTL, a, b);
}

nx_node nx_mulhi(nx_graph *g, nx_node a, nx_node b)
{
    return binary(g, "nx_mulhi", NX_PRIM_MULHI, a, b);
}

nx_node nx_select(nx_graph *g, nx_node cond, nx_node a, nx_node b)
{
    nx_node ops[3] = {cond, a, b};
    return nx_ir_make(g, "nx_select", NX_PRIM_SELECT, 3, ops, 0, NULL, 0, NULL);
}

nx_node nx_cast(nx_graph *g, nx_node x, nx_dtype dtype)
{
    int64_t attr = dtype;
    if (g && x && x <= g->s.n && g->s.nodes[x].dtype == dtype)
        return x;
    return nx_ir_make(g, "nx_cast", NX_PRIM_CAST, 1, &x, 1, &attr, 0, NULL);
}

/* ---- reference kernels ---------------------------------------------------------------------*/

nx_status nx_ir_ref_unary(const nx_ir_eval *ev, const nx_ir_node *n, const nx_tensor *const *ins,
                          nx_tensor *out)
{
    (void)ev;
    const nx_tensor *x = ins[0];
    int64_t numel = nx_tensor_numel(out);
    const void *xd = nx_tensor_data(x);
    void *yd = nx_tensor_data(out);
    for (int64_t i = 0; i < numel; i++) {
        nx_ir_val v = nx_ir_get(xd, x->dtype, i);
        nx_ir_put(yd, out->dtype, i, nx_ir_scalar_unary(n->op, x->dtype, out->dtype, v));
    }
    return NX_OK;
}

nx_status nx_ir_ref_binary(const nx_ir_eval *ev, const nx_ir_node *n, const nx_tensor *const *ins,
                           nx_tensor *out)
{
    (void)ev;
    int nd = out->ndim;
    int64_t sa[NX_MAX_DIMS], sb[NX_MAX_DIMS], idx[NX_MAX_DIMS] = {0};
    nx_ir_bcast_strides(ins[0], nd, out->shape, sa);
    nx_ir_bcast_strides(ins[1], nd, out->shape, sb);
    const void *ad = nx_tensor_data(ins[0]), *bd = nx_tensor_data(ins[1]);
    void *yd = nx_tensor_data(out);
    nx_dtype in = ins[0]->dtype;
    int64_t numel = nx_tensor_numel(out);
    for (int64_t i = 0; i < numel; i++) {
        int64_t oa = 0, ob = 0;
        for (int d = 0; d < nd; d++) {
            oa += idx[d] * sa[d];
            ob += idx[d] * sb[d];
        }
        nx_ir_val r = nx_ir_scalar_binary(n->op, in, out->dtype, nx_ir_get(ad, in, oa),
                                          nx_ir_get(bd, in, ob));
        nx_ir_put(yd, out->dtype, i, r);
        nx_ir_next(nd, out->shape, idx);
    }
    return NX_OK;
}

nx_status nx_ir_ref_select(const nx_ir_eval *ev, const nx_ir_node *n, const nx_tensor *const *ins,
                           nx_tensor *out)
{
    (void)ev;
    (void)n;
    int nd = out->ndim;
    int64_t st[3][NX_MAX_DIMS], idx[NX_MAX_DIMS] = {0};
    for (int k = 0; k < 3; k++)
        nx_ir_bcast_strides(ins[k], nd, out->shape, st[k]);
    const void *cd = nx_tensor_data(ins[0]), *ad = nx_tensor_data(ins[1]),
               *bd = nx_tensor_data(ins[2]);
    void *yd = nx_tensor_data(out);
    int64_t numel = nx_tensor_numel(out);
    for (int64_t i = 0; i < numel; i++) {
        int64_t o[3] = {0, 0, 0};
        for (int k = 0; k < 3; k++)
            for (int d = 0; d < nd; d++)
                o[k] += idx[d] * st[k][d];
        bool c = nx_ir_get(cd, NX_DTYPE_BOOL, o[0]).i != 0;
        nx_ir_put(yd, out->dtype, i,
                  c ? nx_ir_get(ad, out->dtype, o[1]) : nx_ir_get(bd, out->dtype, o[2]));
        nx_ir_next(nd, out->shape, idx);
    }
    return NX_OK;
}

nx_status nx_ir_ref_cast(const nx_ir_eval *ev, const nx_ir_node *n, const nx_tensor *const *ins,
                         nx_tensor *out)
{
    (void)ev;
    (void)n;
    const nx_tensor *x = ins[0];
    int64_t numel = nx_tensor_numel(out);
    const void *xd = nx_tensor_data(x);
    void *yd = nx_tensor_data(out);
    for (int64_t i = 0; i < numel; i++)
        nx_ir_put(yd, out->dtype, i,
                  nx_ir_convert(nx_ir_get(xd, x->dtype, i), x->dtype, out->dtype));
    return NX_OK;
}

/* ---- adjoints ---------------------------------------------------------------------------*/

/* Adjoint rules of the elementwise primitives, select and cast.
 *
 *   neg    dx = -dy                    abs    dx = dy sign(x)  (0 at x = 0: the subgradient 0)
 *   exp    dx = dy y                   log    dx = dy / x
 *   log1p  dx = dy / (1 + x)           expm1  dx = dy (y + 1)
 *   sqrt   dx = dy / (2 y)             rsqrt  dx = -dy y^3 / 2
 *   sin    dx = dy cos x               cos    dx = -dy sin x
 *   tanh   dx = dy (1 - y^2)           erf    dx = dy 2/sqrt(pi) exp(-x^2)
 *   add/sub  da = dy, db = +-dy        mul    da = dy b, db = dy a
 *   div    da = dy / b, db = -dy y / b
 *   pow    da = dy b a^(b-1) (0 where b = 0), db = dy y ln a (0 where a = 0)
 *   min/max  dy goes to a where a wins or ties (a is the first winner), else to b
 *   atan2  da = dy b / (a^2 + b^2), db = -dy a / (a^2 + b^2)
 *   mod    da = dy, db = -dy floor(a / b)
 *   select dcond none, da = select(c, dy, 0), db = select(c, 0, dy)
 *   cast   float to float: dx = cast(dy, x's dtype)
 * Binary cotangents are summed back over broadcast axes. */

static nx_node unary_rule(nx_graph *g, int op, nx_node x, nx_node y, nx_node dy)
{
    switch (op) {
    case NX_PRIM_NEG:
        return nx_neg(g, dy);
    case NX_PRIM_ABS:
        return nx_mul(g, dy, nx_sign(g, x));
    case NX_PRIM_EXP:
        return nx_mul(g, dy, y);
    case NX_PRIM_LOG:
        return nx_div(g, dy, x);
    case NX_PRIM_LOG1P:
        return nx_div(g, dy, nx_add(g, x, nx_ir_ad_scalar(g, x, 1.0)));
    case NX_PRIM_EXPM1:
        return nx_mul(g, dy, nx_add(g, y, nx_ir_ad_scalar(g, y, 1.0)));
    case NX_PRIM_SQRT:
        return nx_div(g, dy, nx_add(g, y, y));
    case NX_PRIM_RSQRT:
        return nx_mul(g, nx_mul(g, dy, nx_ir_ad_scalar(g, y, -0.5)),
                      nx_mul(g, y, nx_mul(g, y, y)));
    case NX_PRIM_SIN:
        return nx_mul(g, dy, nx_cos(g, x));
    case NX_PRIM_COS:
        return nx_neg(g, nx_mul(g, dy, nx_sin(g, x)));
    case NX_PRIM_TANH:
        return nx_mul(g, dy, nx_sub(g, nx_ir_ad_scalar(g, y, 1.0), nx_mul(g, y, y)));
    case NX_PRIM_ERF: {
        nx_node e = nx_exp(g, nx_neg(g, nx_mul(g, x, x)));
        return nx_mul(g, dy, nx_mul(g, e, nx_ir_ad_scalar(g, x, 2.0 / sqrt(M_PI))));
    }
    default:
        return NX_NONE;
    }
}

nx_status nx_ir_vjp_unary(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    dx[0] = unary_rule(g, v.n.op, v.ops[0], y, dy);
    return NX_OK;
}

/* dy routed to a where a wins (or ties, or is NaN), else to b. */
static void minmax_rule(nx_graph *g, bool is_max, nx_node a, nx_node b, nx_node dy, nx_node *d)
{
    nx_node b_wins = is_max ? nx_gt(g, b, a) : nx_lt(g, b, a);
    nx_node zero = nx_ir_ad_scalar(g, dy, 0.0);
    d[0] = nx_select(g, b_wins, zero, dy);
    d[1] = nx_select(g, b_wins, dy, zero);
}

/* pow's partials with the 0 * inf cases of a = 0 or b = 0 set to their limits. */
static void pow_rule(nx_graph *g, nx_node a, nx_node b, nx_node y, nx_node dy, nx_node *d)
{
    nx_node zero = nx_ir_ad_scalar(g, a, 0.0), one = nx_ir_ad_scalar(g, a, 1.0);
    nx_node da = nx_mul(g, b, nx_pow(g, a, nx_sub(g, b, one)));
    d[0] = nx_mul(g, dy, nx_select(g, nx_eq(g, b, zero), zero, da));
    nx_node a_safe = nx_select(g, nx_eq(g, a, zero), one, a);
    nx_node db = nx_mul(g, y, nx_log(g, a_safe));
    d[1] = nx_mul(g, dy, nx_select(g, nx_eq(g, a, zero), zero, db));
}

static void binary_rule(nx_graph *g, int op, nx_node a, nx_node b, nx_node y, nx_node dy,
                        nx_node *d)
{
    switch (op) {
    case NX_PRIM_ADD:
        d[0] = dy, d[1] = dy;
        break;
    case NX_PRIM_SUB:
        d[0] = dy, d[1] = nx_neg(g, dy);
        break;
    case NX_PRIM_MUL:
        d[0] = nx_mul(g, dy, b), d[1] = nx_mul(g, dy, a);
        break;
    case NX_PRIM_DIV:
        d[0] = nx_div(g, dy, b);
        d[1] = nx_neg(g, nx_div(g, nx_mul(g, dy, y), b));
        break;
    case NX_PRIM_POW:
        pow_rule(g, a, b, y, dy, d);
        break;
    case NX_PRIM_MIN:
    case NX_PRIM_MAX:
        minmax_rule(g, op == NX_PRIM_MAX, a, b, dy, d);
        break;
    case NX_PRIM_ATAN2: {
        nx_node r = nx_div(g, dy, nx_add(g, nx_mul(g, a, a), nx_mul(g, b, b)));
        d[0] = nx_mul(g, r, b), d[1] = nx_neg(g, nx_mul(g, r, a));
        break;
    }
    case NX_PRIM_MOD:
        d[0] = dy, d[1] = nx_neg(g, nx_mul(g, dy, nx_floor(g, nx_div(g, a, b))));
        break;
    default:
        break;
    }
}

nx_status nx_ir_vjp_binary(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    nx_node d[2] = {NX_NONE, NX_NONE};
    binary_rule(g, v.n.op, v.ops[0], v.ops[1], y, dy, d);
    dx[0] = nx_ir_ad_unbroadcast(g, d[0], v.ops[0]);
    dx[1] = nx_ir_ad_unbroadcast(g, d[1], v.ops[1]);
    return NX_OK;
}

nx_status nx_ir_vjp_select(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    nx_node zero = nx_ir_ad_scalar(g, dy, 0.0);
    dx[1] = nx_ir_ad_unbroadcast(g, nx_select(g, v.ops[0], dy, zero), v.ops[1]);
    dx[2] = nx_ir_ad_unbroadcast(g, nx_select(g, v.ops[0], zero, dy), v.ops[2]);
    return NX_OK;
}

nx_status nx_ir_vjp_cast(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    dx[0] = nx_cast(g, dy, nx_node_dtype(g, v.ops[0]));
    return NX_OK;
}
