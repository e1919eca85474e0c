/* The op `choice`: jax.random.choice(key, a or n, shape, replace, p, axis) with one key.
 * Without p: replace draws randint(key, shape, 0, n, dtype) (jax's int: int32, or int64 under
 * x64, which changes randint's bit width), no replacement takes the first prod(shape) entries
 * of permutation(key, n). With p: replace draws r = cumsum(p)[-1] (1 - uniform(key, shape)) and
 * takes searchsorted(cumsum(p), r) (side left: the count of cumulative sums below r; cumsum
 * sequential, as XLA's CPU reduce-window for short p); no replacement takes the first prod(shape)
 * of argsort(log(-log(u)) - log(p)), u = uniform(key, [n], minval = tiny) (the Gumbel top-k).
 * With a, y = take(a, indices, axis); without, the indices as dtype. */
#include <float.h>

#include "ops/random/random.h"

typedef struct choice_args {
    nx_backend backend;
    int64_t n[1];
    int nn;
    int64_t shape[NX_MAX_DIMS];
    int nshape;
    bool replace;
    int64_t axis;
    int dtype;
    bool partitionable;
    const nx_tensor *p;
} choice_args;

static int64_t population(const choice_args *o, const nx_tensor *a, int *axis)
{
    if (!a) {
        *axis = 0;
        return o->n[0];
    }
    int nd = nx_tensor_ndim(a);
    *axis = (int)(o->axis < 0 ? o->axis + nd : o->axis);
    return nx_tensor_shape(a)[*axis];
}

static nx_status check_p(const nx_op_args *c, const nx_tensor *p, int64_t n)
{
    nx_dtype dt = nx_tensor_dtype(p);
    if ((dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64) || nx_tensor_ndim(p) != 1 ||
        nx_tensor_shape(p)[0] != n)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: p is %s of rank %d; expected float32 or float64 of shape [%lld] "
                           "(one probability per entry of a)", c->who, nx_dtype_name(dt),
                           nx_tensor_ndim(p), (long long)n);
    if (nx_tensor_device(p) != NX_DEVICE_HOST)
        return NX_OK; /* a device p's values are not read back to be checked */
    nx_tensor *h = NULL;
    nx_status st = nx_tensor_contiguous(p, &h);
    if (st != NX_OK)
        return st;
    for (int64_t i = 0; i < n; i++) {
        double v = dt == NX_DTYPE_F32 ? ((const float *)nx_tensor_data(h))[i]
                                      : ((const double *)nx_tensor_data(h))[i];
        if (!(v >= 0 && v <= 1)) {
            nx_tensor_free(h);
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: p[%lld] = %g; expected probabilities in [0, 1]", c->who,
                               (long long)i, v);
        }
    }
    nx_tensor_free(h);
    return NX_OK;
}

static nx_status check(const nx_op_args *c)
{
    const choice_args *o = c->opts;
    const nx_tensor *a = c->in[1], *p = o->p;
    nx_status st = nx_rng_check_key(c, c->in[0], false);
    if (st != NX_OK)
        return st;
    if (!a == !o->nn)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: %s; expected exactly one of the input a and the option n",
                           c->who, a ? "both a and n are given" : "neither a nor n is given");
    if (o->dtype != NX_DTYPE_I32 && o->dtype != NX_DTYPE_I64)
        return nx_rt_error(c->ctx, NX_ERR_DTYPE,
                           "%s: dtype is %s; expected int32 or int64 (jax's int)", c->who,
                           nx_dtype_name((nx_dtype)o->dtype));
    int rest = 0;
    if (a) {
        int nd = nx_tensor_ndim(a);
        if (nd < 1 || o->axis < -nd || o->axis >= nd)
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: axis = %lld for a of rank %d; expected a of rank >= 1 and an "
                               "axis in [-%d, %d) (n for an integer a)", c->who,
                               (long long)o->axis, nd, nd, nd);
        rest = nd - 1;
    }
    int axis;
    int64_t n = population(o, a, &axis), draws;
    if (n < 1)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: the population has %lld entries; expected at least 1", c->who,
                           (long long)n);
    st = nx_rng_check_shape(c, o->shape, o->nshape, rest, o->dtype == NX_DTYPE_I64 ? 64 : 32,
                            &draws);
    if (st != NX_OK)
        return st;
    if (!o->replace && draws > n)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: %lld draws without replacement from %lld entries; expected at "
                           "most as many draws as entries (or replace=true)", c->who,
                           (long long)draws, (long long)n);
    int64_t numel;
    if ((st = nx_rng_check_shape(c, &n, 1, 0, 32, &numel)) != NX_OK)
        return st;
    return p ? check_p(c, p, n) : NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const choice_args *o = c->opts;
    const nx_tensor *a = c->in[1];
    int axis;
    int64_t n = population(o, a, &axis), d = 1;
    for (int i = 0; i < o->nshape; i++)
        d *= o->shape[i];
    nx_rng_key k = nx_rng_key_input(g, c->in[0]);
    nx_node an = a ? nx_input(g, "a", nx_tensor_dtype(a), nx_tensor_ndim(a), nx_tensor_shape(a))
                   : NX_NONE;
    nx_node ind;
    nx_tensor *p = NULL;
    if (o->p) {
        /* p's values become graph constants (the option is keyed by them) */
        nx_tensor *h = NULL;
        nx_status st = nx_tensor_device(o->p) != NX_DEVICE_HOST
                           ? nx_tensor_to_device(o->p, NX_DEVICE_HOST, &h)
                           : nx_tensor_copy(o->p, &h);
        if (st != NX_OK)
            return st;
        p = h;
    }
    if (!p) {
        if (o->replace)
            ind = nx_reshape(g, nx_rng_randint(g, &k, d, 0, n, (nx_dtype)o->dtype,
                                               o->partitionable), 1, &d);
        else
            ind = nx_slice(g, nx_rng_permutation(g, &k, n, o->partitionable), (int64_t[]){0},
                           &d, NULL);
    } else {
        nx_dtype pdt = nx_tensor_dtype(p);
        nx_node pn = nx_constant(g, pdt, 1, &n, nx_tensor_data(p));
        if (o->replace) {
            nx_node cs = nx_scan(g, pn, 0, NX_MONOID_SUM, false);
            nx_node total = nx_slice(g, cs, (int64_t[]){n - 1}, &n, NULL);
            nx_node u = nx_reshape(g, nx_rng_uniform(g, &k, d, pdt, 0, 1, o->partitionable), 1,
                                   &d);
            nx_node r = nx_mul(g, total, nx_sub(g, nx_scalar(g, pdt, 1.0), u));
            nx_node below = nx_lt(g, nx_reshape(g, cs, 2, (int64_t[]){1, n}),
                                  nx_reshape(g, r, 2, (int64_t[]){d, 1}));
            int ax = 1;
            ind = nx_reduce(g, nx_cast(g, below, NX_DTYPE_I64), 1, &ax, NX_MONOID_SUM, false);
        } else {
            double tiny = pdt == NX_DTYPE_F32 ? (double)FLT_MIN : DBL_MIN;
            nx_node u = nx_reshape(g, nx_rng_uniform(g, &k, n, pdt, tiny, 1, o->partitionable),
                                   1, &n);
            nx_node gv = nx_sub(g, nx_log(g, nx_neg(g, nx_log(g, u))), nx_log(g, pn));
            ind = nx_slice(g, nx_argsort(g, gv, 0, false), (int64_t[]){0}, &d, NULL);
        }
    }
    nx_tensor_free(p);
    int64_t s0 = 0;
    nx_node idx = nx_reshape(g, ind, o->nshape, o->nshape ? o->shape : &s0);
    outs[0] = a ? nx_gather(g, an, idx, axis) : nx_cast(g, idx, (nx_dtype)o->dtype);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"n", NX_OPT_INTS, "(a's extent)", "1:", 1, "draw from arange(n) (instead of an input a)"},
    NX_RNG_SHAPE_OPT("(scalar)"),
    {"replace", NX_OPT_BOOL, "true", NULL, 1, "draw with replacement"},
    {"axis", NX_OPT_INT, "0", NULL, 1, "the axis of a to draw along"},
    {"dtype", NX_OPT_DTYPE, "int32", NULL, 1,
     "jax's int: int32 (default) or int64 (x64); the indices' dtype and randint's width"},
    NX_RNG_PARTITIONABLE_OPT,
    {"p", NX_OPT_TENSOR, "none", NULL, 1,
     "the probabilities of a's entries (float32/float64 [n]); none: uniform"},
};

static const nx_op_field fields[] = {
    {offsetof(choice_args, n), offsetof(choice_args, nn), sizeof(int64_t)},
    {offsetof(choice_args, shape), offsetof(choice_args, nshape), sizeof(int64_t) * NX_MAX_DIMS},
    {offsetof(choice_args, replace), NX_OP_NO_FIELD, sizeof(bool)},
    {offsetof(choice_args, axis), NX_OP_NO_FIELD, sizeof(int64_t)},
    {offsetof(choice_args, dtype), NX_OP_NO_FIELD, sizeof(int)},
    {offsetof(choice_args, partitionable), NX_OP_NO_FIELD, sizeof(bool)},
    {offsetof(choice_args, p), NX_OP_NO_FIELD, sizeof(const nx_tensor *)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_I32, NULL, NULL, 0, 0}, {NX_DTYPE_I64, NULL, NULL, 0, 0},
    {NX_DTYPE_F32, NULL, NULL, 0, 0}, {NX_DTYPE_F64, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_choice = {
    .info = {.nopts = 7, .opts = opts},
    .opts_size = sizeof(choice_args),
    .fields = fields,
    .backend_offset = offsetof(choice_args, backend),
    .check = check,
    .build = build,
    .golden = "random",
    .tols = tols,
    .ntols = 4,
};
