/* The op `max_unpool_nd` (PyTorch's max_unpool{1,2,3}d, channels-last): its descriptor and the
 * typed entry points nx_max_unpool_nd / nx_max_unpool_vjp. The schema is the pool's
 * (max_pool_with_indices_nd.c), the fragment nx_max_unpool_node (pool-node.c). */
#include <string.h>

#include "morph.h"
#include "nitrix-graph.h"
#include "nitrix-ops.h"

static nx_status check(const nx_op_args *c)
{
    const nx_tensor *x = c->in[0], *indices = c->in[1];
    nx_status st = nx_pool_check_counts(c, true);
    if (st == NX_OK)
        st = nx_pool_check_tensor(c->ctx, c->who, "x", x, false);
    if (st == NX_OK && c->dy)
        st = nx_pool_check_tensor(c->ctx, c->who, "dy", c->dy[0], false);
    if (st == NX_OK)
        st = nx_pool_check_tensor(c->ctx, c->who, "indices", indices, true);
    if (st == NX_OK && c->dy && nx_tensor_dtype(c->dy[0]) != nx_tensor_dtype(x))
        st = nx_rt_error(c->ctx, NX_ERR_DTYPE, "%s: dy is %s and x %s; expected one dtype",
                         c->who, nx_dtype_name(nx_tensor_dtype(c->dy[0])),
                         nx_dtype_name(nx_tensor_dtype(x)));
    if (st == NX_OK && (nx_tensor_ndim(x) != nx_tensor_ndim(indices) ||
                        memcmp(nx_tensor_shape(x), nx_tensor_shape(indices),
                               (size_t)nx_tensor_ndim(x) * sizeof(int64_t)) != 0))
        st = nx_rt_error(c->ctx, NX_ERR_SHAPE,
                         "%s: indices and x differ in shape; expected one shape (the pool's "
                         "outputs)",
                         c->who);
    if (st == NX_OK) {
        nx_pool_opts o;
        nx_pool_opts_of(c->opts, &o);
        st = nx_morph_pool_check_indices(c->ctx, c->who, x, indices, &o);
    }
    return st;
}

/* x is the parameter of a vjp (the gather dx = dy[indices]); the indices never are. */
static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_tensor *xt = c->in[0], *it = c->in[1];
    nx_pool_opts o;
    nx_pool_opts_of(c->opts, &o);
    o.backend = c->backend;
    nx_node x = (c->dy ? nx_parameter : nx_input)(g, "x", nx_tensor_dtype(xt), nx_tensor_ndim(xt),
                                                  nx_tensor_shape(xt));
    nx_node idx = nx_input(g, "indices", nx_tensor_dtype(it), nx_tensor_ndim(it),
                           nx_tensor_shape(it));
    outs[0] = nx_max_unpool_node(g, x, idx, &o);
    return nx_graph_status(g);
}

static const char *const aliases[] = {NULL};

const nx_op_desc nx_op_max_unpool_nd = {
    .info = {.nopts = NX_UNPOOL_NOPTS, .opts = nx_pool_schema, .aliases = aliases},
    .opts_size = sizeof(nx_pool_args),
    .fields = nx_pool_fields,
    .backend_offset = offsetof(nx_pool_args, backend),
    .check = check,
    .build = build,
    .golden = "morphology",
    .tols = nx_pool_tols,
    .ntols = 2,
    .fd_note = "a scatter whose repeated indices keep the last write: the FD test perturbs only "
               "values (tie-free after its jitter)",
};

static nx_status call(nx_ctx *ctx, const char *who, const nx_tensor *x, const nx_tensor *indices,
                      const nx_tensor *dy, const nx_pool_opts *opts, nx_tensor **out)
{
    if (out)
        *out = NULL;
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: ctx is NULL", who);
    if (!out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: an output pointer is NULL", who);
    if (!opts)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: opts is NULL (kernel and nspatial are required)", who);
    nx_pool_args a;
    nx_pool_args_of(opts, &a);
    const nx_tensor *const in[] = {x, indices};
    if (!dy)
        return nx_op_run_as(ctx, &nx_op_max_unpool_nd, who, in, &a, out);
    nx_tensor *grads[2] = {NULL, NULL};
    nx_status st = nx_op_run_vjp_as(ctx, &nx_op_max_unpool_nd, who, in, &a,
                                    (const nx_tensor *const[]){dy}, grads);
    *out = grads[0];
    nx_tensor_free(grads[1]);
    return st;
}

nx_status nx_max_unpool_nd(nx_ctx *ctx, const nx_tensor *x, const nx_tensor *indices,
                           const nx_pool_opts *opts, nx_tensor **out)
{
    return call(ctx, "nx_max_unpool_nd", x, indices, NULL, opts, out);
}

nx_status nx_max_unpool_vjp(nx_ctx *ctx, const nx_tensor *x, const nx_tensor *indices,
                            const nx_tensor *dy, const nx_pool_opts *opts, nx_tensor **dx)
{
    if (ctx && !dy) {
        if (dx)
            *dx = NULL;
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "nx_max_unpool_vjp: dy is NULL");
    }
    return call(ctx, "nx_max_unpool_vjp", x, indices, dy, opts, dx);
}
