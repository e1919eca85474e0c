/* The op `split`: jax.random.split(key, num) for each key of a leading batch (jax.vmap's
 * result): num may be a shape (jax takes a tuple); keys has shape [..., num..., 2]. Original
 * layout: the 2 prod(num) words of threefry_2x32(key, iota); partitionable: key i is the pair
 * threefry2x32(key; (0, i)). */
#include "ops/random/random.h"

typedef struct split_args {
    nx_backend backend;
    int64_t num[NX_MAX_DIMS];
    int nnum;
    bool partitionable;
} split_args;

static nx_status check(const nx_op_args *c)
{
    const split_args *o = c->opts;
    nx_status st = nx_rng_check_key(c, c->in[0], true);
    if (st != NX_OK)
        return st;
    int nnum = o->nnum > 0 ? o->nnum : 1;
    for (int i = 0; i < nnum; i++)
        if (o->num[i] < 1)
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: num[%d] = %lld; expected a number of keys >= 1", c->who, i,
                               (long long)o->num[i]);
    /* rank: batch + num + the trailing 2; 2 prod(num) words */
    int64_t n = 0;
    st = nx_rng_check_shape(c, o->num, nnum, nx_tensor_ndim(c->in[0]), 64, &n);
    return st;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const split_args *o = c->opts;
    int nnum = o->nnum > 0 ? o->nnum : 1;
    int64_t total = 1, shape[NX_MAX_DIMS];
    for (int i = 0; i < nnum; i++) {
        total *= o->num[i];
        shape[i] = o->num[i];
    }
    shape[nnum] = 2;
    nx_rng_key k = nx_rng_key_input(g, c->in[0]);
    nx_node s = nx_rng_split(g, &k, total, o->partitionable);
    outs[0] = nx_rng_out(g, s, &k, shape, nnum + 1);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"num", NX_OPT_INTS, "2", "1:", NX_MAX_DIMS - 1,
     "the number of keys, or their shape (jax's tuple)"},
    NX_RNG_PARTITIONABLE_OPT,
};

static const nx_op_field fields[] = {
    {offsetof(split_args, num), offsetof(split_args, nnum), sizeof(int64_t) * (NX_MAX_DIMS - 1)},
    {offsetof(split_args, partitionable), NX_OP_NO_FIELD, sizeof(bool)},
};

static const nx_op_tol tols[] = {{NX_DTYPE_U32, NULL, NULL, 0, 0}};

const nx_op_desc nx_op_split = {
    .info = {.nopts = 2, .opts = opts},
    .opts_size = sizeof(split_args),
    .fields = fields,
    .backend_offset = offsetof(split_args, backend),
    .check = check,
    .build = build,
    .golden = "random",
    .tols = tols,
    .ntols = 1,
};
