/* The op `truncated_normal`: jax.random.truncated_normal(key, lower, upper, shape, dtype) for each
 * key of a leading batch: u = uniform(key, shape, dtype, a, b) with a = erf(lower / sqrt 2),
 * b = erf(upper / sqrt 2) (on the host: lower and upper are options; libm's erf, where jax uses
 * XLA's, so a and b may differ from jax's by an ulp), then sqrt(2) erfinv(u) clipped into
 * [nextafter(lower, +inf), nextafter(upper, -inf)]. */
#include <math.h>

#include "ops/random/random.h"

typedef struct tn_args {
    nx_backend backend;
    double lower, upper;
    int64_t shape[NX_MAX_DIMS];
    int nshape;
    int dtype;
    bool partitionable;
} tn_args;

static nx_status check(const nx_op_args *c)
{
    const tn_args *o = c->opts;
    nx_status st = nx_rng_check_key(c, c->in[0], true);
    if (st == NX_OK)
        st = nx_rng_check_float_dtype(c, o->dtype, "dtype");
    if (st != NX_OK)
        return st;
    double lo = nx_rng_round((nx_dtype)o->dtype, o->lower);
    double hi = nx_rng_round((nx_dtype)o->dtype, o->upper);
    if (isnan(lo) || isnan(hi) || !(lo < hi))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: lower = %g, upper = %g (in %s); expected lower < upper (either "
                           "may be infinite)", c->who, o->lower, o->upper,
                           nx_dtype_name((nx_dtype)o->dtype));
    int64_t n;
    return nx_rng_check_shape(c, o->shape, o->nshape, nx_tensor_ndim(c->in[0]) - 1,
                              o->dtype == NX_DTYPE_F64 ? 64 : 32, &n);
}

/* erf(v / sqrt 2) with the division rounded in dtype, the erf in double, rounded to dtype */
static double bound(nx_dtype dt, double v)
{
    if (dt == NX_DTYPE_F32) {
        float t = (float)v / (float)sqrt(2.0);
        return (double)(float)erf((double)t);
    }
    return erf(v / sqrt(2.0));
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const tn_args *o = c->opts;
    nx_dtype dt = (nx_dtype)o->dtype;
    int64_t n = 1;
    for (int i = 0; i < o->nshape; i++)
        n *= o->shape[i];
    double lo = nx_rng_round(dt, o->lower), hi = nx_rng_round(dt, o->upper);
    double clo = dt == NX_DTYPE_F32 ? (double)nextafterf((float)lo, INFINITY)
                                    : nextafter(lo, INFINITY);
    double chi = dt == NX_DTYPE_F32 ? (double)nextafterf((float)hi, -INFINITY)
                                    : nextafter(hi, -INFINITY);
    nx_rng_key k = nx_rng_key_input(g, c->in[0]);
    nx_node u = nx_rng_uniform(g, &k, n, dt, bound(dt, lo), bound(dt, hi), o->partitionable);
    nx_node y = nx_mul(g, nx_scalar(g, dt, nx_rng_round(dt, sqrt(2.0))), nx_rng_erfinv(g, u));
    y = nx_minimum(g, nx_maximum(g, y, nx_scalar(g, dt, clo)), nx_scalar(g, dt, chi));
    outs[0] = nx_rng_out(g, y, &k, o->shape, o->nshape);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"lower", NX_OPT_FLOAT, NULL, NULL, 1, "the lower truncation bound (may be -inf)"},
    {"upper", NX_OPT_FLOAT, NULL, NULL, 1, "the upper truncation bound (may be inf)"},
    NX_RNG_SHAPE_OPT("(scalar)"),
    {"dtype", NX_OPT_DTYPE, "float32", NULL, 1, "float32 or float64"},
    NX_RNG_PARTITIONABLE_OPT,
};

static const nx_op_field fields[] = {
    {offsetof(tn_args, lower), NX_OP_NO_FIELD, sizeof(double)},
    {offsetof(tn_args, upper), NX_OP_NO_FIELD, sizeof(double)},
    {offsetof(tn_args, shape), offsetof(tn_args, nshape), sizeof(int64_t) * NX_MAX_DIMS},
    {offsetof(tn_args, dtype), NX_OP_NO_FIELD, sizeof(int)},
    {offsetof(tn_args, partitionable), NX_OP_NO_FIELD, sizeof(bool)},
};

/* the bounds' erf may differ from XLA's by an ulp, which erfinv's slope magnifies near the
 * bounds (docs/random.md has the measured figures) */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 2e-6, 0},
    {NX_DTYPE_F64, NULL, NULL, 1e-13, 0},
};

const nx_op_desc nx_op_truncated_normal = {
    .info = {.nopts = 5, .opts = opts},
    .opts_size = sizeof(tn_args),
    .fields = fields,
    .backend_offset = offsetof(tn_args, backend),
    .check = check,
    .build = build,
    .golden = "random",
    .tols = tols,
    .ntols = 2,
};
