/* The op `unfold_axes` (spec §4.12, api-a §9; hypercoil's and nitrix's _internal/util.py): the
 * consecutive `axes` joined into one, C order,
 *     x.reshape(shape[:first] + (prod(shape[first:last + 1]),) + shape[last + 1:]),
 * the inverse of fold_axis. The axes must be consecutive (given in any order, negative counting
 * from the end). A reshape: autodiff gives the gradient. */
#include "ops/numerics/numerics.h"

typedef struct ua_args {
    nx_backend backend;
    nx_num_axes axes;
} ua_args;

static nx_status span(const nx_op_args *c, int *first, int *last)
{
    const ua_args *o = c->opts;
    int nd = nx_tensor_ndim(c->in[0]), axes[NX_MAX_DIMS], n = 0;
    if (o->axes.naxis < 1)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: no axes given; expected at least one",
                           c->who);
    nx_status st = nx_num_resolve_axes(c, &o->axes, nd, false, "axes", axes, &n);
    if (st != NX_OK)
        return st;
    if (axes[n - 1] - axes[0] != n - 1)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: axes %d..%d are not consecutive (%d of them); expected "
                           "consecutive axes",
                           c->who, axes[0], axes[n - 1], n);
    *first = axes[0];
    *last = axes[n - 1];
    return NX_OK;
}

static nx_status check(const nx_op_args *c)
{
    int a, b;
    nx_status st = nx_num_check_storable(c, 0);
    return st == NX_OK ? span(c, &a, &b) : st;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_tensor *xt = c->in[0];
    int nd = nx_tensor_ndim(xt), first, last;
    nx_status st = span(c, &first, &last);
    if (st != NX_OK)
        return st;
    int64_t ys[NX_MAX_DIMS];
    int j = 0;
    for (int i = 0; i < nd; i++) {
        if (i > first && i <= last)
            ys[j - 1] *= nx_tensor_shape(xt)[i];
        else
            ys[j++] = nx_tensor_shape(xt)[i];
    }
    outs[0] = nx_reshape(g, nx_num_declare(g, c, 0), j, ys);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"axes", NX_OPT_INTS, NULL, NULL, NX_MAX_DIMS,
     "the consecutive axes to join; negative counts from the end"},
};

static const nx_op_field fields[] = {
    {offsetof(ua_args, axes.axis), offsetof(ua_args, axes.naxis), sizeof(int64_t) * NX_MAX_DIMS},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_unfold_axes = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(ua_args),
    .fields = fields,
    .backend_offset = offsetof(ua_args, backend),
    .check = check,
    .build = build,
    .golden = "numerics",
    .tols = tols,
    .ntols = 2,
};
