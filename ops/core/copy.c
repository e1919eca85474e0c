/* copy: y = x, a new C-contiguous tensor of x's dtype, shape and values. A runtime operation on
 * the host; backend cuda sends the array to the device and back (which exercises the device
 * path). Its vjp (dx = dy) is a program, so the runner's vjp path is tested on the smallest op. */
#include "ops/op.h"

typedef struct copy_opts {
    nx_backend backend;
} copy_opts;

static nx_status check(const nx_op_args *c)
{
    nx_dtype d = nx_tensor_dtype(c->in[0]);
    if (c->dy && !nx_dtype_is_float(d))
        return nx_rt_error(c->ctx, NX_ERR_DTYPE, "%s: x is %s; a gradient needs a float x",
                           c->who, nx_dtype_name(d));
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_tensor *x = c->in[0];
    nx_node (*leaf)(nx_graph *, const char *, nx_dtype, int, const int64_t *) =
        c->dy ? nx_parameter : nx_input;
    outs[0] = leaf(g, "x", nx_tensor_dtype(x), nx_tensor_ndim(x), nx_tensor_shape(x));
    return nx_graph_status(g);
}

static nx_status stage(nx_graph *g, const nx_op_args *c, const void *user, int nout,
                       nx_node *outs)
{
    (void)user;
    (void)nout;
    return build(g, c, outs);
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    if (c->dy) {
        nx_program *p = NULL;
        nx_status st = nx_op_program(c, "vjp", NULL, stage, NULL, 1, &p);
        if (st != NX_OK)
            return st;
        return nx_program_run(p, (const nx_tensor *const[]){c->in[0], c->dy[0]}, outs);
    }
    if (c->backend != NX_BACKEND_CUDA)
        return nx_tensor_copy(c->in[0], &outs[0]);
    nx_tensor *dev = NULL;
    nx_status st = nx_tensor_to_device(c->in[0], NX_DEVICE_CUDA, &dev);
    if (st == NX_OK)
        st = nx_tensor_to_device(dev, NX_DEVICE_HOST, &outs[0]);
    nx_tensor_free(dev);
    return st;
}

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_copy = {
    .opts_size = sizeof(copy_opts),
    .backend_offset = offsetof(copy_opts, backend),
    .check = check,
    .build = build,
    .run = run,
    .golden = "core/copy",
    .tols = tols,
    .ntols = 2,
    .flags = NX_OP_HOST,
};
