/* The random family's shared graph fragments (random.h, docs/random.md). Everything here is IR
 * built from the u32/u64 bit rows, iota, select, casts and float arithmetic: no kernel of its
 * own, so the reference interpreter, the CPU JIT and the CUDA backend run the same bits, and each
 * output element is a function of (key, its index) alone (counter-based). */
#include <math.h>
#include <string.h>

#include "ops/random/random.h"

nx_status nx_rng_check_key(const nx_op_args *c, const nx_tensor *key, bool batch)
{
    nx_dtype dt = nx_tensor_dtype(key);
    int nd = nx_tensor_ndim(key);
    const int64_t *s = nx_tensor_shape(key);
    if (dt != NX_DTYPE_U32 || nd < 1 || s[nd - 1] != 2)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: key is %s of rank %d (last extent %lld); expected a u32 key of "
                           "shape [%s2] (jax.random.PRNGKey's raw uint32 key)",
                           c->who, nx_dtype_name(dt), nd, nd ? (long long)s[nd - 1] : -1LL,
                           batch ? "..., " : "");
    if (!batch && nd != 1)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: key has shape of rank %d; expected one key of shape [2] (this op "
                           "takes no batch of keys, as jax.random's)", c->who, nd);
    return NX_OK;
}

nx_status nx_rng_check_shape(const nx_op_args *c, const int64_t *shape, int n, int nbatch,
                             int bit_width, int64_t *numel)
{
    if (n + nbatch > NX_MAX_DIMS)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: shape has %d extents and the key batch %d; expected at most %d "
                           "together", c->who, n, nbatch, NX_MAX_DIMS);
    uint64_t total = 1;
    for (int i = 0; i < n; i++) {
        if (shape[i] < 1)
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: shape[%d] = %lld; expected extents >= 1 (empty samples are "
                               "not supported)", c->who, i, (long long)shape[i]);
        if (__builtin_mul_overflow(total, (uint64_t)shape[i], &total) || total > NX_RNG_MAX_WORDS)
            total = NX_RNG_MAX_WORDS + 1;
    }
    uint64_t words = bit_width == 64 ? 2 * total : bit_width == 8 ? (total + 3) / 4
                     : bit_width == 16 ? (total + 1) / 2 : total;
    if (total > NX_RNG_MAX_WORDS || words > NX_RNG_MAX_WORDS)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: the shape asks for more than 2^32 - 1 32-bit words per key; "
                           "expected fewer (jax splits larger draws into blocks; nitrix does not)",
                           c->who);
    *numel = (int64_t)total;
    return NX_OK;
}

nx_status nx_rng_check_float_dtype(const nx_op_args *c, int dtype, const char *name)
{
    if (dtype != NX_DTYPE_F32 && dtype != NX_DTYPE_F64)
        return nx_rt_error(c->ctx, NX_ERR_DTYPE, "%s: %s is %s; expected float32 or float64",
                           c->who, name, nx_dtype_name((nx_dtype)dtype));
    return NX_OK;
}

nx_node nx_rng_u32(nx_graph *g, uint32_t v)
{
    return nx_constant(g, NX_DTYPE_U32, 0, NULL, &v);
}

nx_node nx_rng_u64(nx_graph *g, uint64_t v)
{
    return nx_constant(g, NX_DTYPE_U64, 0, NULL, &v);
}

double nx_rng_round(nx_dtype dt, double v)
{
    return dt == NX_DTYPE_F32 ? (double)(float)v : v;
}

nx_rng_key nx_rng_key_input(nx_graph *g, const nx_tensor *key)
{
    nx_rng_key k = {0};
    int nd = nx_tensor_ndim(key);
    const int64_t *s = nx_tensor_shape(key);
    k.nbatch = nd - 1;
    k.b = 1;
    for (int i = 0; i < nd - 1; i++) {
        k.batch[i] = s[i];
        k.b *= s[i];
    }
    nx_node in = nx_input(g, "key", NX_DTYPE_U32, nd, s);
    nx_node flat = nx_reshape(g, in, 2, (int64_t[]){k.b, 2});
    k.k0 = nx_slice(g, flat, (int64_t[]){0, 0}, (int64_t[]){k.b, 1}, NULL);
    k.k1 = nx_slice(g, flat, (int64_t[]){0, 1}, (int64_t[]){k.b, 2}, NULL);
    return k;
}

void nx_rng_threefry(nx_graph *g, nx_node k0, nx_node k1, nx_node x0, nx_node x1, nx_node *o0,
                     nx_node *o1)
{
    /* Salmon et al. 2011, threefry-2x32 with 20 rounds: the key schedule's third word is
     * k0 ^ k1 ^ 0x1BD11BDA; four rounds of (a += b, b = rotl(b, r) ^ a) between key injections,
     * the rotations alternating between the two sets below. */
    static const uint32_t rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
    nx_node ks[3] = {k0, k1, nx_bitxor(g, nx_bitxor(g, k0, k1), nx_rng_u32(g, 0x1BD11BDAu))};
    nx_node a = nx_add(g, x0, ks[0]), b = nx_add(g, x1, ks[1]);
    for (int grp = 0; grp < 5; grp++) {
        for (int r = 0; r < 4; r++) {
            a = nx_add(g, a, b);
            b = nx_bitxor(g, nx_rotl(g, b, nx_rng_u32(g, rot[grp % 2][r])), a);
        }
        a = nx_add(g, a, ks[(grp + 1) % 3]);
        b = nx_add(g, nx_add(g, b, ks[(grp + 2) % 3]), nx_rng_u32(g, (uint32_t)grp + 1));
    }
    *o0 = a;
    *o1 = b;
}

/* Word idx of jax's threefry_2x32(key, iota(nwords)) (the original layout): the counts are cut
 * into halves of m = ceil(nwords / 2) (an odd count padded with a 0), word i < m is the first
 * output of the pair (i, i + m) and word i >= m the second of (i - m, i). */
static nx_node word(nx_graph *g, const nx_rng_key *k, nx_node idx, uint64_t nwords)
{
    uint32_t m = (uint32_t)((nwords + 1) / 2);
    nx_node M = nx_rng_u32(g, m);
    nx_node hi = nx_ge(g, idx, M);
    nx_node p = nx_select(g, hi, nx_sub(g, idx, M), idx);
    nx_node x1 = nx_add(g, p, M);
    if (nwords % 2)
        x1 = nx_select(g, nx_eq(g, x1, nx_rng_u32(g, (uint32_t)nwords)), nx_rng_u32(g, 0), x1);
    nx_node o0, o1;
    nx_rng_threefry(g, k->k0, k->k1, p, x1, &o0, &o1);
    return nx_select(g, hi, o1, o0);
}

static nx_node iota_row(nx_graph *g, int64_t n)
{
    return nx_iota(g, NX_DTYPE_U32, 2, (int64_t[]){1, n}, 1);
}

static nx_node join64(nx_graph *g, nx_node hi, nx_node lo)
{
    return nx_bitor(g, nx_shl(g, nx_cast(g, hi, NX_DTYPE_U64), nx_rng_u64(g, 32)),
                    nx_cast(g, lo, NX_DTYPE_U64));
}

nx_node nx_rng_bits(nx_graph *g, const nx_rng_key *k, int64_t n, int bit_width,
                    bool partitionable)
{
    nx_node idx = iota_row(g, n), o0, o1;
    if (partitionable) {
        /* iota_2x32_shape: the 64-bit flat index as (high, low) words; high is 0 below 2^32 */
        nx_rng_threefry(g, k->k0, k->k1, nx_rng_u32(g, 0), idx, &o0, &o1);
        if (bit_width == 64)
            return join64(g, o0, o1);
        nx_node x = nx_bitxor(g, o0, o1);
        if (bit_width == 8)
            return nx_cast(g, x, NX_DTYPE_U8);
        return bit_width == 16 ? nx_bitand(g, x, nx_rng_u32(g, 0xFFFF)) : x;
    }
    if (bit_width == 32)
        return word(g, k, idx, (uint64_t)n);
    if (bit_width == 64) {
        /* 2n words: element i is word i (high half) and word i + n (low half), one pair */
        nx_rng_threefry(g, k->k0, k->k1, idx, nx_add(g, idx, nx_rng_u32(g, (uint32_t)n)), &o0,
                        &o1);
        return join64(g, o0, o1);
    }
    /* 8 and 16 bits: element i is byte (half-word) i % per of word i / per, lowest first */
    int per = 32 / bit_width, sh = bit_width == 8 ? 2 : 1;
    uint64_t nwords = ((uint64_t)n + (uint64_t)per - 1) / (uint64_t)per;
    nx_node w = word(g, k, nx_shr(g, idx, nx_rng_u32(g, (uint32_t)sh)), nwords);
    nx_node shift = nx_mul(g, nx_bitand(g, idx, nx_rng_u32(g, (uint32_t)per - 1)),
                           nx_rng_u32(g, (uint32_t)bit_width));
    nx_node x = nx_shr(g, w, shift);
    if (bit_width == 8)
        return nx_cast(g, x, NX_DTYPE_U8);
    return nx_bitand(g, x, nx_rng_u32(g, 0xFFFF));
}

nx_node nx_rng_split(nx_graph *g, const nx_rng_key *k, int64_t num, bool partitionable)
{
    if (!partitionable) {
        /* threefry_2x32(key, iota(2 num)) reshaped to [num, 2] */
        nx_node w = word(g, k, iota_row(g, 2 * num), (uint64_t)(2 * num));
        return nx_reshape(g, w, 3, (int64_t[]){k->b, num, 2});
    }
    nx_node o0, o1;
    nx_rng_threefry(g, k->k0, k->k1, nx_rng_u32(g, 0), iota_row(g, num), &o0, &o1);
    int64_t s3[3] = {k->b, num, 1};
    nx_node parts[2] = {nx_reshape(g, o0, 3, s3), nx_reshape(g, o1, 3, s3)};
    return nx_concat(g, 2, parts, 2);
}

void nx_rng_split2(nx_graph *g, const nx_rng_key *k, bool partitionable, nx_rng_key *first,
                   nx_rng_key *second)
{
    /* The words of split(key, 2) one by one from their constant counters (no slice of a split
     * node: a slice of a large inlined expression is re-emitted per use by the CPU emitter, and
     * the consumers of these keys are threefry chains that use each word several times). */
    nx_rng_key *out[2] = {first, second};
    for (int i = 0; i < 2; i++) {
        *out[i] = *k;
        if (partitionable) {
            nx_rng_threefry(g, k->k0, k->k1, nx_rng_u32(g, 0), nx_rng_u32(g, (uint32_t)i),
                            &out[i]->k0, &out[i]->k1);
        } else {
            out[i]->k0 = word(g, k, nx_rng_u32(g, (uint32_t)(2 * i)), 4);
            out[i]->k1 = word(g, k, nx_rng_u32(g, (uint32_t)(2 * i + 1)), 4);
        }
    }
}

/* s + t as (sum, rounding error), Knuth's TwoSum (no fma, no reassociation on any backend) */
static void two_sum(nx_graph *g, nx_node a, nx_node b, nx_node *s, nx_node *err)
{
    *s = nx_add(g, a, b);
    nx_node bb = nx_sub(g, *s, a);
    *err = nx_add(g, nx_sub(g, a, nx_sub(g, *s, bb)), nx_sub(g, b, bb));
}

static bool power_of_two(double v)
{
    int e;
    return v > 0 && frexp(v, &e) == 0.5;
}

nx_node nx_rng_uniform(nx_graph *g, const nx_rng_key *k, int64_t n, nx_dtype dt, double minval,
                       double maxval, bool partitionable)
{
    /* jax's _uniform: the top nmant bits as the mantissa of a float in [1, 2), minus 1. That
     * float is m 2^-nmant exactly, which is how it is formed here (no bitcast needed). */
    bool f64 = dt == NX_DTYPE_F64;
    nx_node bits = nx_rng_bits(g, k, n, f64 ? 64 : 32, partitionable);
    nx_node m = f64 ? nx_shr(g, bits, nx_rng_u64(g, 12)) : nx_shr(g, bits, nx_rng_u32(g, 9));
    nx_node f = nx_mul(g, nx_cast(g, m, dt), nx_scalar(g, dt, f64 ? 0x1p-52 : 0x1p-23));
    /* the span rounded in dtype, as jax subtracts */
    double span;
    if (f64) {
        span = maxval - minval;
    } else {
        volatile float hs = (float)maxval, ls = (float)minval;
        span = (double)(float)(hs - ls);
    }
    nx_node lo = nx_scalar(g, dt, minval), y;
    if (minval == 0 || power_of_two(span)) {
        /* f span is exact: one rounding, as XLA's fused multiply-add gives */
        y = nx_add(g, nx_mul(g, f, nx_scalar(g, dt, span)), lo);
    } else if (!f64) {
        /* XLA's CPU code computes f span + minval as one fma. f (24 bits) times span (24 bits)
         * is exact in f64, so the f64 sum rounds once before the rounding to f32: the fma's
         * value except where that double rounding lands on an f32 midpoint (about 2^-29 of
         * draws) */
        nx_node p = nx_mul(g, nx_cast(g, f, NX_DTYPE_F64), nx_scalar(g, NX_DTYPE_F64, span));
        y = nx_cast(g, nx_add(g, p, nx_scalar(g, NX_DTYPE_F64, minval)), NX_DTYPE_F32);
    } else {
        /* the f64 fma: f = m 2^-52 split into two 26-bit halves, span into Veltkamp halves of
         * 26 and 27 bits (host), four exact partial products, summed with the minimum by
         * TwoSum into a double-double and rounded once (correct except within 2^-100 of a
         * midpoint) */
        double c = 134217729.0 * span, bh = c - (c - span), bl = span - bh;
        nx_node ah = nx_mul(g, nx_cast(g, nx_shr(g, m, nx_rng_u64(g, 26)), dt),
                            nx_scalar(g, dt, 0x1p-26));
        nx_node al = nx_mul(g, nx_cast(g, nx_bitand(g, m, nx_rng_u64(g, 0x3FFFFFFu)), dt),
                            nx_scalar(g, dt, 0x1p-52));
        nx_node terms[4] = {nx_mul(g, al, nx_scalar(g, dt, bl)),
                            nx_mul(g, al, nx_scalar(g, dt, bh)),
                            nx_mul(g, ah, nx_scalar(g, dt, bl)), lo};
        nx_node s = nx_mul(g, ah, nx_scalar(g, dt, bh)), e = nx_scalar(g, dt, 0.0);
        for (int i = 0; i < 4; i++) {
            nx_node err;
            two_sum(g, s, terms[i], &s, &err);
            e = nx_add(g, e, err);
        }
        y = nx_add(g, s, e);
    }
    return nx_maximum(g, lo, y);
}

static const double erfinv_f32_lt5[9] = {
    2.81022636e-08,  3.43273939e-07,  -3.5233877e-06, -4.39150654e-06, 0.00021858087,
    -0.00125372503, -0.00417768164, 0.246640727,     1.50140941};
static const double erfinv_f32_ge5[9] = {
    -0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
    -0.0076224613,   0.00943887047,  1.00167406,    2.83297682};
static const double erfinv_f64_lt6_25[23] = {
    -3.6444120640178196996e-21, -1.685059138182016589e-19,  1.2858480715256400167e-18,
    1.115787767802518096e-17,   -1.333171662854620906e-16,  2.0972767875968561637e-17,
    6.6376381343583238325e-15,  -4.0545662729752068639e-14, -8.1519341976054721522e-14,
    2.6335093153082322977e-12,  -1.2975133253453532498e-11, -5.4154120542946279317e-11,
    1.051212273321532285e-09,   -4.1126339803469836976e-09, -2.9070369957882005086e-08,
    4.2347877827932403518e-07,  -1.3654692000834678645e-06, -1.3882523362786468719e-05,
    0.0001867342080340571352,   -0.00074070253416626697512, -0.0060336708714301490533,
    0.24015818242558961693,     1.6536545626831027356};
static const double erfinv_f64_lt16[19] = {
    2.2137376921775787049e-09,  9.0756561938885390979e-08,  -2.7517406297064545428e-07,
    1.8239629214389227755e-08,  1.5027403968909827627e-06,  -4.013867526981545969e-06,
    2.9234449089955446044e-06,  1.2475304481671778723e-05,  -4.7318229009055733981e-05,
    6.8284851459573175448e-05,  2.4031110387097893999e-05,  -0.0003550375203628474796,
    0.00095328937973738049703,  -0.0016882755560235047313,  0.0024914420961078508066,
    -0.0037512085075692412107,  0.005370914553590063617,    1.0052589676941592334,
    3.0838856104922207635};
static const double erfinv_f64_ge16[17] = {
    -2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
    -3.7894654401267369937e-09, 7.6157012080783393804e-09,  -1.4960026627149240478e-08,
    2.9147953450901080826e-08,  -6.7711997758452339498e-08, 2.2900482228026654717e-07,
    -9.9298272942317002539e-07, 4.5260625972231537039e-06,  -1.9681778105531670567e-05,
    7.5995277030017761139e-05,  -0.00021503011930044477347, -0.00013871931833623122026,
    1.0103004648645343977,      4.8499064014085844221};

nx_node nx_rng_erfinv(nx_graph *g, nx_node x)
{
    /* Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011): polynomials in
     * w = -log(1 - x^2), in the form XLA evaluates them (one Horner chain whose coefficients are
     * selected per branch; each product and sum rounded). */
    nx_dtype dt = nx_node_dtype(g, x);
    bool f64 = dt == NX_DTYPE_F64;
    nx_node w = nx_neg(g, nx_log1p(g, nx_neg(g, nx_mul(g, x, x))));
    nx_node sw = nx_sqrt(g, w), p, ww;
    if (!f64) {
        nx_node lt = nx_lt(g, w, nx_scalar(g, dt, 5.0));
        ww = nx_select(g, lt, nx_sub(g, w, nx_scalar(g, dt, 2.5)),
                       nx_sub(g, sw, nx_scalar(g, dt, 3.0)));
        p = nx_select(g, lt, nx_scalar(g, dt, erfinv_f32_lt5[0]),
                      nx_scalar(g, dt, erfinv_f32_ge5[0]));
        /* XLA's CPU code contracts each step into an fma: p w (24 x 24 bits) is exact in f64,
         * so the f64 sum rounds once before the f32 rounding (the fma's value but for double
         * rounding at an f32 midpoint) */
        nx_node w64 = nx_cast(g, ww, NX_DTYPE_F64);
        for (int i = 1; i < 9; i++) {
            nx_node ci = nx_select(g, lt, nx_scalar(g, NX_DTYPE_F64, (float)erfinv_f32_lt5[i]),
                                   nx_scalar(g, NX_DTYPE_F64, (float)erfinv_f32_ge5[i]));
            p = nx_cast(g, nx_add(g, ci, nx_mul(g, nx_cast(g, p, NX_DTYPE_F64), w64)), dt);
        }
    } else {
        nx_node lt6 = nx_lt(g, w, nx_scalar(g, dt, 6.25));
        nx_node lt16 = nx_lt(g, w, nx_scalar(g, dt, 16.0));
        ww = nx_select(g, lt6, nx_sub(g, w, nx_scalar(g, dt, 3.125)),
                       nx_sub(g, sw, nx_select(g, lt16, nx_scalar(g, dt, 3.25),
                                                nx_scalar(g, dt, 5.0))));
        p = NX_NONE;
        for (int i = 0; i < 23; i++) {
            nx_node ci = nx_scalar(g, dt, erfinv_f64_lt6_25[i]);
            if (i < 19)
                ci = nx_select(g, lt6, ci, nx_scalar(g, dt, erfinv_f64_lt16[i]));
            if (i < 17)
                ci = nx_select(g, lt16, ci, nx_scalar(g, dt, erfinv_f64_ge16[i]));
            if (i == 0) {
                p = ci;
                continue;
            }
            nx_node next = nx_add(g, ci, nx_mul(g, p, ww));
            /* the shorter polynomials stop: the 16 one after 19 terms, the tail after 17 */
            p = i < 17 ? next : i < 19 ? nx_select(g, lt16, next, p) : nx_select(g, lt6, next, p);
        }
    }
    nx_node edge = nx_eq(g, nx_abs(g, x), nx_scalar(g, dt, 1.0));
    nx_node big = nx_mul(g, x, nx_scalar(g, dt, f64 ? 0x1.fffffffffffffp+1023 : 0x1.fffffep+127));
    return nx_select(g, edge, big, nx_mul(g, p, x));
}

nx_node nx_rng_out(nx_graph *g, nx_node x, const nx_rng_key *k, const int64_t *shape, int nshape)
{
    int64_t s[NX_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < k->nbatch; i++)
        s[nd++] = k->batch[i];
    for (int i = 0; i < nshape; i++)
        s[nd++] = shape[i];
    return nx_reshape(g, x, nd, s);
}
