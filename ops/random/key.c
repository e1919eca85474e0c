/* The op `key`: jax.random.PRNGKey(seed) as a raw u32 key of shape [2]: the 64-bit seed's high
 * and low words (jax's threefry_seed; a negative seed is its two's-complement bits). jax in its
 * default 32-bit mode first makes the seed an int32, so seeds outside [0, 2^31) differ there
 * (docs/random.md). A graph of one constant, so the key lands where the backend puts outputs. */
#include "ops/random/random.h"

typedef struct key_args {
    nx_backend backend;
    int64_t seed;
} key_args;

static nx_status check(const nx_op_args *c)
{
    (void)c;
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const key_args *o = c->opts;
    uint64_t s = (uint64_t)o->seed;
    uint32_t words[2] = {(uint32_t)(s >> 32), (uint32_t)(s & 0xFFFFFFFFu)};
    outs[0] = nx_constant(g, NX_DTYPE_U32, 1, (int64_t[]){2}, words);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"seed", NX_OPT_INT, NULL, NULL, 1,
     "a 64-bit integer seed in [-2^63, 2^63) (jax.random.PRNGKey's seed)"},
};

static const nx_op_field fields[] = {
    {offsetof(key_args, seed), NX_OP_NO_FIELD, sizeof(int64_t)},
};

static const nx_op_tol tols[] = {{NX_DTYPE_U32, NULL, NULL, 0, 0}};

const nx_op_desc nx_op_key = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(key_args),
    .fields = fields,
    .backend_offset = offsetof(key_args, backend),
    .check = check,
    .build = build,
    .golden = "random",
    .tols = tols,
    .ntols = 1,
};
