/* The op `max_pool_with_indices_nd` (PyTorch's max_pool{1,2,3}d(return_indices=True),
 * channels-last): its descriptor, the pooling ops' shared schema and the typed entry points
 * nx_max_pool_with_indices_nd / nx_max_pool_vjp. The fragments are in pool-node.c. */
#include <string.h>

#include "morph.h"
#include "nitrix-graph.h"
#include "nitrix-ops.h"

const nx_op_opt nx_pool_schema[NX_UNPOOL_NOPTS] = {
    {"nspatial", NX_OPT_INT, NULL, "1:3", 1, "spatial axes before the channel axis (the last)"},
    {"kernel", NX_OPT_INTS, NULL, "1:", NX_POOL_MAX_SPATIAL, "per spatial dim, or one for all"},
    {"stride", NX_OPT_INTS, "0", "0:", NX_POOL_MAX_SPATIAL, "per spatial dim; 0: the kernel"},
    {"padding", NX_OPT_INTS, "0", "0:", NX_POOL_MAX_SPATIAL, "each side, <= kernel / 2"},
    {"output_size", NX_OPT_INTS, "0", "0:", NX_POOL_MAX_SPATIAL,
     "unpooled spatial extents; 0s: (o - 1) stride - 2 padding + kernel"},
    {"size", NX_OPT_INTS, "0", "0:", NX_POOL_MAX_SPATIAL,
     "the older name of output_size (kept one release)"},
};

#define FN(m, n)                                                                                   \
    offsetof(nx_pool_args, m), offsetof(nx_pool_args, n), sizeof(((nx_pool_args *)0)->m)
const nx_op_field nx_pool_fields[NX_UNPOOL_NOPTS] = {
    {offsetof(nx_pool_args, nspatial), NX_OP_NO_FIELD, sizeof(int64_t)},
    {FN(kernel, nkernel)},
    {FN(stride, nstride)},
    {FN(padding, npadding)},
    {FN(output_size, noutput_size)},
    {FN(size, nsize)},
};
#undef FN

/* A max selects one input, and the indices are integers: exact. */
const nx_op_tol nx_pool_tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
};

void nx_pool_opts_of(const nx_pool_args *a, nx_pool_opts *o)
{
    *o = (nx_pool_opts){
        .backend = a->backend,
        .nspatial = a->nspatial >= 0 && a->nspatial <= NX_POOL_MAX_SPATIAL ? (int)a->nspatial : -1};
    memcpy(o->kernel, a->kernel, sizeof o->kernel);
    memcpy(o->stride, a->stride, sizeof o->stride);
    memcpy(o->padding, a->padding, sizeof o->padding);
    bool given = false;
    for (int i = 0; i < NX_POOL_MAX_SPATIAL; i++)
        given = given || a->output_size[i] != 0;
    memcpy(o->output_size, given ? a->output_size : a->size, sizeof o->output_size);
}

nx_status nx_pool_check_counts(const nx_op_args *c, bool unpool)
{
    const nx_pool_args *a = c->opts;
    const char *names[] = {"kernel", "stride", "padding", "output_size", "size"};
    int counts[] = {a->nkernel, a->nstride, a->npadding, a->noutput_size, a->nsize};
    /* a typed call gives whole arrays (count 0); text gives 1 (for all) or one per axis */
    for (int i = 0; i < (unpool ? 5 : 3); i++)
        if (counts[i] > 1 && counts[i] != a->nspatial)
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: %s has %d values; expected 1 or %lld (one per spatial axis)",
                               c->who, names[i], counts[i], (long long)a->nspatial);
    return NX_OK;
}

void nx_pool_args_of(const nx_pool_opts *o, nx_pool_args *a)
{
    *a = (nx_pool_args){.backend = o->backend, .nspatial = o->nspatial};
    memcpy(a->kernel, o->kernel, sizeof a->kernel);
    memcpy(a->stride, o->stride, sizeof a->stride);
    memcpy(a->padding, o->padding, sizeof a->padding);
    memcpy(a->output_size, o->output_size, sizeof a->output_size);
}

nx_status nx_pool_check_tensor(nx_ctx *ctx, const char *who, const char *what, const nx_tensor *t,
                               bool integer)
{
    nx_dtype d = nx_tensor_dtype(t);
    if (integer ? d != NX_DTYPE_I64 && d != NX_DTYPE_I32 : d != NX_DTYPE_F32 && d != NX_DTYPE_F64)
        return nx_rt_error(ctx, NX_ERR_DTYPE, "%s: %s is %s; expected %s", who, what,
                           nx_dtype_name(d), integer ? "i64 or i32" : "f32 or f64");
    return NX_OK;
}

static nx_status check(const nx_op_args *c)
{
    const nx_tensor *x = c->in[0];
    nx_status st = nx_pool_check_counts(c, false);
    if (st == NX_OK)
        st = nx_pool_check_tensor(c->ctx, c->who, "x", x, false);
    if (st == NX_OK && c->dy)
        st = nx_pool_check_tensor(c->ctx, c->who, "dy", c->dy[0], false);
    if (st == NX_OK && c->dy && nx_tensor_dtype(c->dy[0]) != nx_tensor_dtype(x))
        st = nx_rt_error(c->ctx, NX_ERR_DTYPE, "%s: dy is %s and x %s; expected one dtype", c->who,
                         nx_dtype_name(nx_tensor_dtype(c->dy[0])),
                         nx_dtype_name(nx_tensor_dtype(x)));
    return st;
}

/* Forward: values and indices. In a vjp the stage has the values alone (the indices carry no
 * cotangent), so the program differentiates only them. */
static nx_status build(nx_graph *g, const nx_op_args *c, const void *user, int nout, nx_node *outs)
{
    (void)user;
    const nx_tensor *xt = c->in[0];
    nx_pool_opts o;
    nx_pool_opts_of(c->opts, &o);
    o.backend = c->backend;
    nx_node x = (c->dy ? nx_parameter : nx_input)(g, "x", nx_tensor_dtype(xt), nx_tensor_ndim(xt),
                                                  nx_tensor_shape(xt));
    nx_node idx = NX_NONE;
    outs[0] = nx_max_pool_node(g, x, &o, nout > 1 ? &idx : NULL);
    if (nout > 1)
        outs[1] = idx;
    return nx_graph_status(g);
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    nx_program *p = NULL;
    nx_status st = nx_op_program(c, NULL, NULL, build, NULL, c->dy ? 1 : 2, &p);
    if (st != NX_OK)
        return st;
    if (c->dy)
        return nx_program_run(p, (const nx_tensor *const[]){c->in[0], c->dy[0]}, outs);
    return nx_program_run(p, (const nx_tensor *const[]){c->in[0]}, outs);
}

const nx_op_desc nx_op_max_pool_with_indices_nd = {
    .info = {.nopts = NX_POOL_NOPTS, .opts = nx_pool_schema, .aliases = NULL},
    .opts_size = sizeof(nx_pool_args),
    .fields = nx_pool_fields,
    .backend_offset = offsetof(nx_pool_args, backend),
    .check = check,
    .run = run,
    .golden = "morphology",
    .tols = nx_pool_tols,
    .ntols = 2,
    .fd_note = "the max is not differentiable where a window holds its maximum twice: the FD "
               "test jitters the golden inputs apart first",
};

static nx_status need_opts(nx_ctx *ctx, const char *who, const nx_pool_opts *opts)
{
    if (opts)
        return NX_OK;
    return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                       "%s: opts is NULL (kernel and nspatial are required)", who);
}

nx_status nx_max_pool_with_indices_nd(nx_ctx *ctx, const nx_tensor *x, const nx_pool_opts *opts,
                                      nx_tensor **values, nx_tensor **indices)
{
    static const char *who = "nx_max_pool_with_indices_nd";
    if (values)
        *values = NULL;
    if (indices)
        *indices = NULL;
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: ctx is NULL", who);
    if (!values || !indices)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: an output pointer is NULL", who);
    nx_status st = need_opts(ctx, who, opts);
    if (st != NX_OK)
        return st;
    nx_pool_args a;
    nx_pool_args_of(opts, &a);
    nx_tensor *res[2] = {NULL, NULL};
    st = nx_op_run_as(ctx, &nx_op_max_pool_with_indices_nd, who, (const nx_tensor *const[]){x}, &a,
                      res);
    *values = res[0];
    *indices = res[1];
    return st;
}

nx_status nx_max_pool_vjp(nx_ctx *ctx, const nx_tensor *x, const nx_tensor *dy,
                          const nx_pool_opts *opts, nx_tensor **dx)
{
    static const char *who = "nx_max_pool_vjp";
    if (dx)
        *dx = NULL;
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: ctx is NULL", who);
    if (!dy)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "nx_max_pool_vjp: dy is NULL");
    if (!dx)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: an output pointer is NULL", who);
    nx_status st = need_opts(ctx, who, opts);
    if (st != NX_OK)
        return st;
    nx_pool_args a;
    nx_pool_args_of(opts, &a);
    /* One cotangent per output: the indices' slot is not read (they carry none). */
    return nx_op_run_vjp_as(ctx, &nx_op_max_pool_with_indices_nd, who,
                            (const nx_tensor *const[]){x}, &a, (const nx_tensor *const[]){dy, dy},
                            dx);
}
