/* The op `uniform`: jax.random.uniform(key, shape, dtype, minval, maxval) for each key of a
 * leading batch: the top 23 (f32) or 52 (f64) bits of random_bits as a float m 2^-nmant in
 * [0, 1), then max(minval, f (maxval - minval) + minval), every step rounded in dtype as jax does.
 * Not differentiable (jax differentiates the affine part in minval and maxval; nitrix's are
 * options, docs/random.md). */
#include <math.h>

#include "ops/random/random.h"

typedef struct uniform_args {
    nx_backend backend;
    int64_t shape[NX_MAX_DIMS];
    int nshape;
    int dtype;
    double minval, maxval;
    bool partitionable;
} uniform_args;

static nx_status check(const nx_op_args *c)
{
    const uniform_args *o = c->opts;
    nx_status st = nx_rng_check_key(c, c->in[0], true);
    if (st == NX_OK)
        st = nx_rng_check_float_dtype(c, o->dtype, "dtype");
    if (st != NX_OK)
        return st;
    double lo = nx_rng_round((nx_dtype)o->dtype, o->minval);
    double hi = nx_rng_round((nx_dtype)o->dtype, o->maxval);
    if (!isfinite(lo) || !isfinite(hi) || !(lo < hi))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: minval = %g, maxval = %g (in %s); expected finite bounds with "
                           "minval < maxval", c->who, o->minval, o->maxval,
                           nx_dtype_name((nx_dtype)o->dtype));
    int64_t n;
    return nx_rng_check_shape(c, o->shape, o->nshape, nx_tensor_ndim(c->in[0]) - 1,
                              o->dtype == NX_DTYPE_F64 ? 64 : 32, &n);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const uniform_args *o = c->opts;
    nx_dtype dt = (nx_dtype)o->dtype;
    int64_t n = 1;
    for (int i = 0; i < o->nshape; i++)
        n *= o->shape[i];
    nx_rng_key k = nx_rng_key_input(g, c->in[0]);
    nx_node y = nx_rng_uniform(g, &k, n, dt, nx_rng_round(dt, o->minval),
                               nx_rng_round(dt, o->maxval), o->partitionable);
    outs[0] = nx_rng_out(g, y, &k, o->shape, o->nshape);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    NX_RNG_SHAPE_OPT("(scalar)"),
    {"dtype", NX_OPT_DTYPE, "float32", NULL, 1, "float32 or float64"},
    {"minval", NX_OPT_FLOAT, "0", NULL, 1, "the lower bound (inclusive)"},
    {"maxval", NX_OPT_FLOAT, "1", NULL, 1, "the upper bound (exclusive)"},
    NX_RNG_PARTITIONABLE_OPT,
};

static const nx_op_field fields[] = {
    {offsetof(uniform_args, shape), offsetof(uniform_args, nshape), sizeof(int64_t) * NX_MAX_DIMS},
    {offsetof(uniform_args, dtype), NX_OP_NO_FIELD, sizeof(int)},
    {offsetof(uniform_args, minval), NX_OP_NO_FIELD, sizeof(double)},
    {offsetof(uniform_args, maxval), NX_OP_NO_FIELD, sizeof(double)},
    {offsetof(uniform_args, partitionable), NX_OP_NO_FIELD, sizeof(bool)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_uniform = {
    .info = {.nopts = 5, .opts = opts},
    .opts_size = sizeof(uniform_args),
    .fields = fields,
    .backend_offset = offsetof(uniform_args, backend),
    .check = check,
    .build = build,
    .golden = "random",
    .tols = tols,
    .ntols = 2,
};
