/* cast: y = x.astype(dtype), with nx_cast's rules (floats to integers truncate toward zero and
 * saturate; NaN gives 0; nonzero to bool is true). Differentiable between float dtypes. */
#include "ops/op.h"

typedef struct cast_opts {
    int dtype; /* nx_dtype */
    nx_backend backend;
} cast_opts;

static const nx_op_opt opts[] = {
    {"dtype", NX_OPT_DTYPE, NULL, NULL, 1, "the result's dtype (f32, float64, int32, bool, ...)"},
};
static const nx_op_field fields[] = {
    {offsetof(cast_opts, dtype), NX_OP_NO_FIELD, sizeof(int)},
};
static const char *const aliases[] = {"astype", NULL};

static nx_status check(const nx_op_args *c)
{
    const cast_opts *o = c->opts;
    if ((unsigned)o->dtype >= NX_DTYPE_COUNT)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: dtype %d is not an nx_dtype", c->who,
                           o->dtype);
    nx_dtype from = nx_tensor_dtype(c->in[0]);
    if (c->dy && (!nx_dtype_is_float(from) || !nx_dtype_is_float((nx_dtype)o->dtype)))
        return nx_rt_error(c->ctx, NX_ERR_DTYPE,
                           "%s: a cast from %s to %s has no gradient; expected float dtypes",
                           c->who, nx_dtype_name(from), nx_dtype_name((nx_dtype)o->dtype));
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const cast_opts *o = c->opts;
    const nx_tensor *x = c->in[0];
    nx_node (*leaf)(nx_graph *, const char *, nx_dtype, int, const int64_t *) =
        c->dy ? nx_parameter : nx_input;
    nx_node xn = leaf(g, "x", nx_tensor_dtype(x), nx_tensor_ndim(x), nx_tensor_shape(x));
    outs[0] = nx_cast(g, xn, (nx_dtype)o->dtype);
    return nx_graph_status(g);
}

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_cast = {
    .info = {.nopts = 1, .opts = opts, .aliases = aliases},
    .opts_size = sizeof(cast_opts),
    .fields = fields,
    .backend_offset = offsetof(cast_opts, backend),
    .check = check,
    .build = build,
    .golden = "core/cast",
    .tols = tols,
    .ntols = 2,
};
