/* The op `bernoulli`: jax.random.bernoulli(key, p, shape) for each key of a leading batch:
 * uniform(key, shape, dtype) < p, with p rounded to dtype (jax's dtype of p: float32 for its
 * default p, float64 for a Python float under x64), bool. */
#include <math.h>

#include "ops/random/random.h"

typedef struct bernoulli_args {
    nx_backend backend;
    double p;
    int64_t shape[NX_MAX_DIMS];
    int nshape;
    int dtype;
    bool partitionable;
} bernoulli_args;

static nx_status check(const nx_op_args *c)
{
    const bernoulli_args *o = c->opts;
    nx_status st = nx_rng_check_key(c, c->in[0], true);
    if (st == NX_OK)
        st = nx_rng_check_float_dtype(c, o->dtype, "dtype");
    if (st != NX_OK)
        return st;
    if (!(o->p >= 0 && o->p <= 1))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: p = %g; expected a probability in [0, 1]", c->who, o->p);
    int64_t n;
    return nx_rng_check_shape(c, o->shape, o->nshape, nx_tensor_ndim(c->in[0]) - 1,
                              o->dtype == NX_DTYPE_F64 ? 64 : 32, &n);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const bernoulli_args *o = c->opts;
    nx_dtype dt = (nx_dtype)o->dtype;
    int64_t n = 1;
    for (int i = 0; i < o->nshape; i++)
        n *= o->shape[i];
    nx_rng_key k = nx_rng_key_input(g, c->in[0]);
    nx_node u = nx_rng_uniform(g, &k, n, dt, 0.0, 1.0, o->partitionable);
    nx_node y = nx_lt(g, u, nx_scalar(g, dt, nx_rng_round(dt, o->p)));
    outs[0] = nx_rng_out(g, y, &k, o->shape, o->nshape);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"p", NX_OPT_FLOAT, "0.5", NULL, 1, "the probability of true, in [0, 1]"},
    NX_RNG_SHAPE_OPT("(scalar)"),
    {"dtype", NX_OPT_DTYPE, "float32", NULL, 1, "p's dtype: the uniform draw's (float32, float64)"},
    NX_RNG_PARTITIONABLE_OPT,
};

static const nx_op_field fields[] = {
    {offsetof(bernoulli_args, p), NX_OP_NO_FIELD, sizeof(double)},
    {offsetof(bernoulli_args, shape), offsetof(bernoulli_args, nshape),
     sizeof(int64_t) * NX_MAX_DIMS},
    {offsetof(bernoulli_args, dtype), NX_OP_NO_FIELD, sizeof(int)},
    {offsetof(bernoulli_args, partitionable), NX_OP_NO_FIELD, sizeof(bool)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_bernoulli = {
    .info = {.nopts = 4, .opts = opts},
    .opts_size = sizeof(bernoulli_args),
    .fields = fields,
    .backend_offset = offsetof(bernoulli_args, backend),
    .check = check,
    .build = build,
    .golden = "random",
    .tols = tols,
    .ntols = 2,
};
