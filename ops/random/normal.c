/* The op `normal`: jax.random.normal(key, shape, dtype) for each key of a leading batch:
 * sqrt(2) erfinv(u) with u = uniform(key, shape, dtype, nextafter(-1, 0), 1), erfinv in Giles'
 * form as XLA evaluates it (random.c). u is jax's bit for bit; the result differs from jax's
 * where erfinv's log1p (and XLA's fused multiply-adds) round differently: the measured maximum is
 * in docs/random.md. */
#include <math.h>

#include "ops/random/random.h"

typedef struct normal_args {
    nx_backend backend;
    int64_t shape[NX_MAX_DIMS];
    int nshape;
    int dtype;
    bool partitionable;
} normal_args;

static nx_status check(const nx_op_args *c)
{
    const normal_args *o = c->opts;
    nx_status st = nx_rng_check_key(c, c->in[0], true);
    if (st == NX_OK)
        st = nx_rng_check_float_dtype(c, o->dtype, "dtype");
    if (st != NX_OK)
        return st;
    int64_t n;
    return nx_rng_check_shape(c, o->shape, o->nshape, nx_tensor_ndim(c->in[0]) - 1,
                              o->dtype == NX_DTYPE_F64 ? 64 : 32, &n);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const normal_args *o = c->opts;
    nx_dtype dt = (nx_dtype)o->dtype;
    int64_t n = 1;
    for (int i = 0; i < o->nshape; i++)
        n *= o->shape[i];
    double lo = dt == NX_DTYPE_F32 ? (double)nextafterf(-1.0f, 0.0f) : nextafter(-1.0, 0.0);
    nx_rng_key k = nx_rng_key_input(g, c->in[0]);
    nx_node u = nx_rng_uniform(g, &k, n, dt, lo, 1.0, o->partitionable);
    nx_node y = nx_mul(g, nx_scalar(g, dt, nx_rng_round(dt, sqrt(2.0))), nx_rng_erfinv(g, u));
    outs[0] = nx_rng_out(g, y, &k, o->shape, o->nshape);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    NX_RNG_SHAPE_OPT("(scalar)"),
    {"dtype", NX_OPT_DTYPE, "float32", NULL, 1, "float32 or float64"},
    NX_RNG_PARTITIONABLE_OPT,
};

static const nx_op_field fields[] = {
    {offsetof(normal_args, shape), offsetof(normal_args, nshape), sizeof(int64_t) * NX_MAX_DIMS},
    {offsetof(normal_args, dtype), NX_OP_NO_FIELD, sizeof(int)},
    {offsetof(normal_args, partitionable), NX_OP_NO_FIELD, sizeof(bool)},
};

/* 4 ulp relative (f32; measured 3, docs/random.md); f64: jax 0.4.30's own float64 log1p is off
 * by up to 129 ulp, so its normal is reproduced to a few tens of ulp (measured 29). */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0x1p-21, 0},
    {NX_DTYPE_F64, NULL, NULL, 0x1p-46, 0},
};

const nx_op_desc nx_op_normal = {
    .info = {.nopts = 3, .opts = opts},
    .opts_size = sizeof(normal_args),
    .fields = fields,
    .backend_offset = offsetof(normal_args, backend),
    .check = check,
    .build = build,
    .golden = "random",
    .tols = tols,
    .ntols = 2,
};
