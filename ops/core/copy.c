/* copy: y = x, a new C-contiguous tensor of x's dtype and shape (on x's device). The smallest op
 * of the table, and the runner's own test subject. */
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

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_copy = {
    .opts_size = sizeof(copy_opts),
    .backend_offset = offsetof(copy_opts, backend),
    .check = check,
    .build = build,
    .golden = "core/copy",
    .tols = tols,
    .ntols = 2,
};
