/* The op `random_bits`: jax.random.bits(key, shape, dtype) for each key of a leading batch:
 * bit_width 32 (u32), 64 (u64) or 8 (u8). Original layout: threefry_2x32(key, iota(words)) with
 * jax's halves and (64) the high word i, low word i + n, (8) the bytes of each word lowest
 * first; partitionable: threefry2x32(key; (0, i)) folded by xor (32, 8) or joined (64). */
#include "ops/random/random.h"

typedef struct bits_args {
    nx_backend backend;
    int64_t shape[NX_MAX_DIMS];
    int nshape;
    int64_t bit_width;
    bool partitionable;
} bits_args;

static nx_status check(const nx_op_args *c)
{
    const bits_args *o = c->opts;
    nx_status st = nx_rng_check_key(c, c->in[0], true);
    if (st != NX_OK)
        return st;
    if (o->bit_width != 8 && o->bit_width != 32 && o->bit_width != 64)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: bit_width = %lld; expected 32, 64 or 8 (nitrix has no u16 for "
                           "16)", c->who, (long long)o->bit_width);
    int64_t n;
    return nx_rng_check_shape(c, o->shape, o->nshape, nx_tensor_ndim(c->in[0]) - 1,
                              (int)o->bit_width, &n);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const bits_args *o = c->opts;
    int64_t n = 1;
    for (int i = 0; i < o->nshape; i++)
        n *= o->shape[i];
    nx_rng_key k = nx_rng_key_input(g, c->in[0]);
    nx_node b = nx_rng_bits(g, &k, n, (int)o->bit_width, o->partitionable);
    outs[0] = nx_rng_out(g, b, &k, o->shape, o->nshape);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    NX_RNG_SHAPE_OPT("(scalar)"),
    {"bit_width", NX_OPT_INT, "32", NULL, 1, "32 (u32), 64 (u64) or 8 (u8)"},
    NX_RNG_PARTITIONABLE_OPT,
};

static const nx_op_field fields[] = {
    {offsetof(bits_args, shape), offsetof(bits_args, nshape), sizeof(int64_t) * NX_MAX_DIMS},
    {offsetof(bits_args, bit_width), NX_OP_NO_FIELD, sizeof(int64_t)},
    {offsetof(bits_args, partitionable), NX_OP_NO_FIELD, sizeof(bool)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_U32, NULL, NULL, 0, 0},
    {NX_DTYPE_U64, NULL, NULL, 0, 0},
    {NX_DTYPE_U8, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_random_bits = {
    .info = {.nopts = 3, .opts = opts},
    .opts_size = sizeof(bits_args),
    .fields = fields,
    .backend_offset = offsetof(bits_args, backend),
    .check = check,
    .build = build,
    .golden = "random",
    .tols = tols,
    .ntols = 3,
};
