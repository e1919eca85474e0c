/* The op `crop_to_multiple` (spec §4.12, api-a §9): the last `spatial_rank` axes of x cropped
 * down to the largest multiple of `multiple` (one value for all, or one per axis), the excess
 * split as pad_to_multiple splits its padding: lo = excess // 2 cut before, the rest after. An
 * axis shorter than its multiple is an error (nothing would remain). A slice in a graph: both
 * backends compile it and autodiff gives the gradient. */
#include "ops/numerics/numerics.h"

typedef struct ctm_args {
    nx_backend backend;
    int64_t multiple[NX_MAX_DIMS];
    int nmultiple;
    int64_t spatial_rank;
} ctm_args;

static nx_status bounds(const nx_op_args *c, int64_t *start, int64_t *stop)
{
    const ctm_args *o = c->opts;
    const nx_tensor *x = c->in[0];
    int nd = nx_tensor_ndim(x);
    int64_t r = o->spatial_rank == 0 ? nd : o->spatial_rank;
    if (r < 0 || r > nd)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: spatial_rank is %lld for x of rank %d; expected 1..%d (0: every "
                           "axis)",
                           c->who, (long long)o->spatial_rank, nd, nd);
    if (r == 0)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: x is 0-d; expected at least one axis",
                           c->who);
    if (o->nmultiple != 1 && o->nmultiple != r)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: %d values of multiple for %lld spatial axes; expected 1 or %lld",
                           c->who, o->nmultiple, (long long)r, (long long)r);
    int first = nd - (int)r;
    for (int k = 0; k < nd; k++) {
        int64_t s = nx_tensor_shape(x)[k];
        start[k] = 0;
        stop[k] = s;
        if (k < first)
            continue;
        int64_t m = o->multiple[o->nmultiple == 1 ? 0 : k - first];
        if (m <= 0)
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: multiple %lld; expected every multiple >= 1", c->who,
                               (long long)m);
        if (s < m)
            return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                               "%s: axis %d has extent %lld, below its multiple %lld; expected "
                               "an extent >= the multiple (nothing would remain)",
                               c->who, k, (long long)s, (long long)m);
        int64_t excess = s % m;
        start[k] = excess / 2;
        stop[k] = start[k] + (s - excess);
    }
    return NX_OK;
}

static nx_status check(const nx_op_args *c)
{
    nx_dtype dt = nx_tensor_dtype(c->in[0]);
    if (dt == NX_DTYPE_F16 || dt == NX_DTYPE_BF16)
        return nx_rt_error(c->ctx, NX_ERR_DTYPE,
                           "%s: x is %s; expected a dtype other than f16/bf16", c->who,
                           nx_dtype_name(dt));
    int64_t a[NX_MAX_DIMS], b[NX_MAX_DIMS];
    return bounds(c, a, b);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_tensor *xt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(xt);
    int64_t start[NX_MAX_DIMS], stop[NX_MAX_DIMS];
    nx_status st = bounds(c, start, stop);
    if (st != NX_OK)
        return st;
    int nd = nx_tensor_ndim(xt);
    nx_node x = nx_dtype_is_float(dt) ? nx_parameter(g, "x", dt, nd, nx_tensor_shape(xt))
                                      : nx_input(g, "x", dt, nd, nx_tensor_shape(xt));
    outs[0] = nx_slice(g, x, start, stop, NULL);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"multiple", NX_OPT_INTS, NULL, "1:", NX_MAX_DIMS,
     "the multiple each spatial extent is cropped down to (one value for all, or one per axis)"},
    {"spatial_rank", NX_OPT_INT, "(every axis)", "0:", 1,
     "how many trailing axes are spatial (cropped); 0 or not given: every axis"},
};

static const nx_op_field fields[] = {
    {offsetof(ctm_args, multiple), offsetof(ctm_args, nmultiple), sizeof(int64_t) * NX_MAX_DIMS},
    {offsetof(ctm_args, spatial_rank), NX_OP_NO_FIELD, sizeof(int64_t)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
    {NX_DTYPE_I32, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_crop_to_multiple = {
    .info = {.nopts = 2, .opts = opts},
    .opts_size = sizeof(ctm_args),
    .fields = fields,
    .backend_offset = offsetof(ctm_args, backend),
    .check = check,
    .build = build,
    .golden = "numerics",
    .tols = tols,
    .ntols = 2 + 1,
};
