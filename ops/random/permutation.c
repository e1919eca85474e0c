/* The op `permutation`: jax.random.permutation(key, n or x, axis) (independent=False): jax's
 * _shuffle, ceil(3 ln(max(1, n)) / ln(2^32 - 1)) rounds (1 up to n = 1625, 2 up to about 2.6e6,
 * then 3) of: key, sub = split(key); perm = perm[argsort(random_bits(sub, 32, [n]))], a stable
 * sort, starting from arange(n). With x, y = take(x, perm, axis); without, y = perm as dtype
 * (int32, jax's default; int64 under x64). One key. */
#include <math.h>

#include "ops/random/random.h"

typedef struct perm_args {
    nx_backend backend;
    int64_t n[1];
    int nn;
    int64_t axis;
    int dtype;
    bool partitionable;
} perm_args;

static nx_status check(const nx_op_args *c)
{
    const perm_args *o = c->opts;
    nx_status st = nx_rng_check_key(c, c->in[0], false);
    if (st != NX_OK)
        return st;
    const nx_tensor *x = c->in[1];
    if (!x == !o->nn)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: %s; expected exactly one of the input x and the option n",
                           c->who, x ? "both x and n are given" : "neither x nor n is given");
    int64_t n;
    if (x) {
        int nd = nx_tensor_ndim(x);
        if (nd < 1 || o->axis < -nd || o->axis >= nd)
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: axis = %lld for x of rank %d; expected x of rank >= 1 and an "
                               "axis in [-%d, %d)", c->who, (long long)o->axis, nd, nd, nd);
        n = nx_tensor_shape(x)[o->axis < 0 ? o->axis + nd : o->axis];
    } else {
        if (o->dtype != NX_DTYPE_I32 && o->dtype != NX_DTYPE_I64)
            return nx_rt_error(c->ctx, NX_ERR_DTYPE, "%s: dtype is %s; expected int32 or int64",
                               c->who, nx_dtype_name((nx_dtype)o->dtype));
        if (o->axis != 0)
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: axis = %lld with n; expected axis 0 (arange(n) is 1-d)",
                               c->who, (long long)o->axis);
        n = o->n[0];
    }
    int64_t numel;
    return nx_rng_check_shape(c, &n, 1, 0, 32, &numel);
}

/* jax's round count, num_rounds = ceil(3 log(max(1, n)) / log(uint32 max)) */
static int rounds(int64_t n)
{
    return (int)ceil(3.0 * log((double)(n > 1 ? n : 1)) / log(4294967295.0));
}

nx_node nx_rng_permutation(nx_graph *g, const nx_rng_key *key, int64_t n, bool partitionable)
{
    nx_node perm = nx_iota(g, NX_DTYPE_I64, 1, &n, 0);
    nx_rng_key k = *key, sub;
    for (int r = 0; r < rounds(n); r++) {
        nx_rng_key next;
        nx_rng_split2(g, &k, partitionable, &next, &sub);
        k = next;
        nx_node bits = nx_reshape(g, nx_rng_bits(g, &sub, n, 32, partitionable), 1, &n);
        nx_node idx = nx_argsort(g, nx_cast(g, bits, NX_DTYPE_I64), 0, false);
        perm = nx_gather(g, perm, idx, 0);
    }
    return perm;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const perm_args *o = c->opts;
    const nx_tensor *x = c->in[1];
    nx_rng_key k = nx_rng_key_input(g, c->in[0]);
    if (!x) {
        nx_node p = nx_rng_permutation(g, &k, o->n[0], o->partitionable);
        outs[0] = nx_cast(g, p, (nx_dtype)o->dtype);
        return nx_graph_status(g);
    }
    int nd = nx_tensor_ndim(x), axis = (int)(o->axis < 0 ? o->axis + nd : o->axis);
    nx_node xn = nx_input(g, "x", nx_tensor_dtype(x), nd, nx_tensor_shape(x));
    nx_node p = nx_rng_permutation(g, &k, nx_tensor_shape(x)[axis], o->partitionable);
    outs[0] = nx_gather(g, xn, p, axis);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"n", NX_OPT_INTS, "(x's extent)", "1:", 1, "permute arange(n) (instead of an input x)"},
    {"axis", NX_OPT_INT, "0", NULL, 1, "the axis of x to permute"},
    {"dtype", NX_OPT_DTYPE, "int32", NULL, 1, "arange(n)'s dtype: int32 or int64"},
    NX_RNG_PARTITIONABLE_OPT,
};

static const nx_op_field fields[] = {
    {offsetof(perm_args, n), offsetof(perm_args, nn), sizeof(int64_t)},
    {offsetof(perm_args, axis), NX_OP_NO_FIELD, sizeof(int64_t)},
    {offsetof(perm_args, dtype), NX_OP_NO_FIELD, sizeof(int)},
    {offsetof(perm_args, partitionable), NX_OP_NO_FIELD, sizeof(bool)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_I32, NULL, NULL, 0, 0}, {NX_DTYPE_I64, NULL, NULL, 0, 0},
    {NX_DTYPE_F32, NULL, NULL, 0, 0}, {NX_DTYPE_F64, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_permutation = {
    .info = {.nopts = 4, .opts = opts},
    .opts_size = sizeof(perm_args),
    .fields = fields,
    .backend_offset = offsetof(perm_args, backend),
    .check = check,
    .build = build,
    .golden = "random",
    .tols = tols,
    .ntols = 4,
};
