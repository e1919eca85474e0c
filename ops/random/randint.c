/* The op `randint`: jax.random.randint(key, shape, minval, maxval, dtype), one key as jax takes.
 * jax's algorithm: k1, k2 = split(key); hi, lo = random_bits of the dtype's width from each;
 * span s = maxval - minval in the unsigned type of that width (one more when maxval is one past
 * the dtype's maximum, wrapping to 0 over the whole range); m = (2^(w/2) mod s)^2 mod s;
 * y = minval + ((hi mod s) m + lo mod s) mod s, every product and sum wrapping at w bits (and
 * mod 0 the identity, XLA's remainder). 8- and 16-bit arithmetic runs in u32, masked. s and m are
 * host constants: minval and maxval are options. */
#include "ops/random/random.h"

typedef struct randint_args {
    nx_backend backend;
    int64_t shape[NX_MAX_DIMS];
    int nshape;
    int64_t minval, maxval;
    int dtype;
    bool partitionable;
} randint_args;

static int width(nx_dtype dt)
{
    switch (dt) {
    case NX_DTYPE_I8:
    case NX_DTYPE_U8:
        return 8;
    case NX_DTYPE_I16:
        return 16;
    case NX_DTYPE_I32:
    case NX_DTYPE_U32:
        return 32;
    case NX_DTYPE_I64:
    case NX_DTYPE_U64:
        return 64;
    default:
        return 0;
    }
}

static bool is_unsigned(nx_dtype dt)
{
    return dt == NX_DTYPE_U8 || dt == NX_DTYPE_U32 || dt == NX_DTYPE_U64;
}

/* The dtype's range as int64 (u64's top is clipped to INT64_MAX: the options are int64). */
static void range(nx_dtype dt, int64_t *lo, int64_t *hi)
{
    int w = width(dt);
    if (is_unsigned(dt)) {
        *lo = 0;
        *hi = w == 64 ? INT64_MAX : (int64_t)((UINT64_C(1) << w) - 1);
    } else {
        *lo = w == 64 ? INT64_MIN : -(INT64_C(1) << (w - 1));
        *hi = w == 64 ? INT64_MAX : (INT64_C(1) << (w - 1)) - 1;
    }
}

static nx_status check(const nx_op_args *c)
{
    const randint_args *o = c->opts;
    nx_dtype dt = (nx_dtype)o->dtype;
    nx_status st = nx_rng_check_key(c, c->in[0], false);
    if (st != NX_OK)
        return st;
    if (!width(dt))
        return nx_rt_error(c->ctx, NX_ERR_DTYPE,
                           "%s: dtype is %s; expected an integer dtype (int8, int16, int32, "
                           "int64, uint8, uint32, uint64)", c->who, nx_dtype_name(dt));
    int64_t lo, hi;
    range(dt, &lo, &hi);
    if (o->minval >= o->maxval || o->minval < lo || o->minval > hi ||
        (o->maxval > hi && o->maxval - 1 > hi))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: minval = %lld, maxval = %lld; expected %lld <= minval < maxval "
                           "<= %lld + 1 (%s's range)", c->who, (long long)o->minval,
                           (long long)o->maxval, (long long)lo, (long long)hi, nx_dtype_name(dt));
    int64_t n;
    return nx_rng_check_shape(c, o->shape, o->nshape, nx_tensor_ndim(c->in[0]) - 1, width(dt),
                              &n);
}

nx_node nx_rng_randint(nx_graph *g, const nx_rng_key *key, int64_t n, int64_t minval,
                       int64_t maxval, nx_dtype dt, bool partitionable)
{
    int w = width(dt);
    int64_t dlo, dhi;
    range(dt, &dlo, &dhi);
    /* the span in w-bit unsigned arithmetic, and jax's multiplier 2^w mod span */
    uint64_t mask = w == 64 ? UINT64_MAX : (UINT64_C(1) << w) - 1;
    bool top = maxval > dhi;
    int64_t maxc = top ? dhi : maxval;
    uint64_t span = ((uint64_t)maxc - (uint64_t)minval + (top ? 1u : 0u)) & mask;
    uint64_t mult = 0;
    if (span) {
        uint64_t half = (UINT64_C(1) << (w / 2)) % span;
        mult = ((half * half) & mask) % span;
    }
    nx_rng_key k1, k2;
    nx_rng_split2(g, key, partitionable, &k1, &k2);
    nx_dtype ut = w == 64 ? NX_DTYPE_U64 : NX_DTYPE_U32;
    nx_node hi = nx_cast(g, nx_rng_bits(g, &k1, n, w, partitionable), ut);
    nx_node lo = nx_cast(g, nx_rng_bits(g, &k2, n, w, partitionable), ut);
    nx_node off;
    if (!span) {
        off = lo; /* the whole range: x mod 0 = x, and the multiplier wraps to 0 */
    } else {
        nx_node S = w == 64 ? nx_rng_u64(g, span) : nx_rng_u32(g, (uint32_t)span);
        nx_node M = w == 64 ? nx_rng_u64(g, mult) : nx_rng_u32(g, (uint32_t)mult);
        nx_node K = w == 64 ? nx_rng_u64(g, mask) : nx_rng_u32(g, (uint32_t)mask);
        nx_node prod = nx_mul(g, nx_mod(g, hi, S), M);
        if (w < 32)
            prod = nx_bitand(g, prod, K);
        nx_node sum = nx_add(g, prod, nx_mod(g, lo, S));
        if (w < 32)
            sum = nx_bitand(g, sum, K);
        off = nx_mod(g, sum, S);
    }
    /* minval + offset in dtype, wrapping (the offset's low bits as dtype) */
    nx_node y = nx_cast(g, off, dt);
    int64_t mv = minval;
    nx_node base = dt == NX_DTYPE_U64 ? nx_rng_u64(g, (uint64_t)mv)
                                      : nx_constant(g, NX_DTYPE_I64, 0, NULL, &mv);
    return nx_add(g, y, nx_cast(g, base, dt));
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const randint_args *o = c->opts;
    int64_t n = 1;
    for (int i = 0; i < o->nshape; i++)
        n *= o->shape[i];
    nx_rng_key k = nx_rng_key_input(g, c->in[0]);
    nx_node y = nx_rng_randint(g, &k, n, o->minval, o->maxval, (nx_dtype)o->dtype,
                               o->partitionable);
    outs[0] = nx_rng_out(g, y, &k, o->shape, o->nshape);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    NX_RNG_SHAPE_OPT("(scalar)"),
    {"minval", NX_OPT_INT, NULL, NULL, 1, "the lower bound (inclusive), in dtype's range"},
    {"maxval", NX_OPT_INT, NULL, NULL, 1, "the upper bound (exclusive), at most dtype's max + 1"},
    {"dtype", NX_OPT_DTYPE, "int32", NULL, 1, "int8, int16, int32, int64, uint8, uint32, uint64"},
    NX_RNG_PARTITIONABLE_OPT,
};

static const nx_op_field fields[] = {
    {offsetof(randint_args, shape), offsetof(randint_args, nshape), sizeof(int64_t) * NX_MAX_DIMS},
    {offsetof(randint_args, minval), NX_OP_NO_FIELD, sizeof(int64_t)},
    {offsetof(randint_args, maxval), NX_OP_NO_FIELD, sizeof(int64_t)},
    {offsetof(randint_args, dtype), NX_OP_NO_FIELD, sizeof(int)},
    {offsetof(randint_args, partitionable), NX_OP_NO_FIELD, sizeof(bool)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_I8, NULL, NULL, 0, 0},  {NX_DTYPE_I16, NULL, NULL, 0, 0},
    {NX_DTYPE_I32, NULL, NULL, 0, 0}, {NX_DTYPE_I64, NULL, NULL, 0, 0},
    {NX_DTYPE_U8, NULL, NULL, 0, 0},  {NX_DTYPE_U32, NULL, NULL, 0, 0},
    {NX_DTYPE_U64, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_randint = {
    .info = {.nopts = 5, .opts = opts},
    .opts_size = sizeof(randint_args),
    .fields = fields,
    .backend_offset = offsetof(randint_args, backend),
    .check = check,
    .build = build,
    .golden = "random",
    .tols = tols,
    .ntols = 7,
};
