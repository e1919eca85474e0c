/* The op `fold_in`: jax.random.fold_in(key, data) = threefry2x32(key; (0, uint32(data))), the
 * key's words then the data's low 32 bits (any integer dtype; negative values by their two's
 * complement, as jnp.uint32). Keys [..., 2] and data [...] broadcast with NumPy's rules (jax takes
 * one key and one scalar; this is its jax.vmap). */
#include <string.h>

#include "ops/random/random.h"

typedef struct fold_in_args {
    nx_backend backend;
} fold_in_args;

static bool bshape(const nx_tensor *key, const nx_tensor *data, int *nd, int64_t *out)
{
    int ka = nx_tensor_ndim(key) - 1, da = nx_tensor_ndim(data);
    const int64_t *ks = nx_tensor_shape(key), *ds = nx_tensor_shape(data);
    *nd = ka > da ? ka : da;
    for (int i = 0; i < *nd; i++) {
        int64_t a = i - (*nd - ka) >= 0 ? ks[i - (*nd - ka)] : 1;
        int64_t b = i - (*nd - da) >= 0 ? ds[i - (*nd - da)] : 1;
        if (a != b && a != 1 && b != 1)
            return false;
        out[i] = a == 1 ? b : a;
    }
    return true;
}

static nx_status check(const nx_op_args *c)
{
    nx_status st = nx_rng_check_key(c, c->in[0], true);
    if (st != NX_OK)
        return st;
    nx_dtype dt = nx_tensor_dtype(c->in[1]);
    if (!nx_dtype_is_int(dt))
        return nx_rt_error(c->ctx, NX_ERR_DTYPE,
                           "%s: data is %s; expected an integer dtype (its low 32 bits are "
                           "folded in)", c->who, nx_dtype_name(dt));
    int nd = 0;
    int64_t s[NX_MAX_DIMS + 1];
    if (nx_tensor_ndim(c->in[1]) > NX_MAX_DIMS - 1 || !bshape(c->in[0], c->in[1], &nd, s) ||
        nd + 1 > NX_MAX_DIMS)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: the key batch (key's shape without its last 2) and data's shape "
                           "do not broadcast to a shape of rank < %d; expected NumPy-broadcastable "
                           "shapes", c->who, NX_MAX_DIMS);
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_tensor *key = c->in[0], *data = c->in[1];
    int kd = nx_tensor_ndim(key), nd = 0;
    int64_t s[NX_MAX_DIMS];
    bshape(key, data, &nd, s);
    nx_node k = nx_input(g, "key", NX_DTYPE_U32, kd, nx_tensor_shape(key));
    nx_node d = nx_input(g, "data", nx_tensor_dtype(data), nx_tensor_ndim(data),
                         nx_tensor_shape(data));
    int64_t lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS];
    memcpy(hi, nx_tensor_shape(key), (size_t)kd * sizeof(int64_t));
    nx_node w[2];
    for (int i = 0; i < 2; i++) {
        lo[kd - 1] = i;
        hi[kd - 1] = i + 1;
        w[i] = nx_reshape(g, nx_slice(g, k, lo, hi, NULL), kd - 1, nx_tensor_shape(key));
    }
    nx_node o0, o1;
    nx_rng_threefry(g, w[0], w[1], nx_rng_u32(g, 0), nx_cast(g, d, NX_DTYPE_U32), &o0, &o1);
    /* the threefry broadcast gives the joint shape s; both words as [s..., 1] */
    s[nd] = 1;
    nx_node parts[2] = {nx_reshape(g, nx_broadcast(g, o0, nd, s), nd + 1, s),
                        nx_reshape(g, nx_broadcast(g, o1, nd, s), nd + 1, s)};
    outs[0] = nx_concat(g, 2, parts, nd);
    return nx_graph_status(g);
}

static const nx_op_tol tols[] = {{NX_DTYPE_U32, NULL, NULL, 0, 0}};

const nx_op_desc nx_op_fold_in = {
    .opts_size = sizeof(fold_in_args),
    .backend_offset = offsetof(fold_in_args, backend),
    .check = check,
    .build = build,
    .golden = "random",
    .tols = tols,
    .ntols = 1,
};
