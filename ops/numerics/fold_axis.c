/* The op `fold_axis` (spec §4.12, api-a §9; hypercoil's and nitrix's _internal/util.py): `axis`
 * of extent s split into two axes (s / n, n), C order,
 *     x.reshape(shape[:axis] + (s // n, n) + shape[axis + 1:]),
 * n >= 1 dividing s. A reshape: autodiff gives the gradient. unfold_axes undoes it. */
#include "ops/numerics/numerics.h"

typedef struct fa_args {
    nx_backend backend;
    int64_t axis, n;
} fa_args;

static nx_status check(const nx_op_args *c)
{
    const fa_args *o = c->opts;
    const nx_tensor *x = c->in[0];
    int nd = nx_tensor_ndim(x), k;
    nx_status st = nx_num_check_storable(c, 0);
    if (st == NX_OK && nd < 1)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: x is 0-d; expected at least one axis",
                           c->who);
    if (st == NX_OK && nd >= NX_MAX_DIMS)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: x has rank %d; expected at most %d", c->who,
                           nd, NX_MAX_DIMS - 1);
    if (st == NX_OK)
        st = nx_num_axis(c, o->axis, nd, "axis", &k);
    if (st != NX_OK)
        return st;
    int64_t s = nx_tensor_shape(x)[k];
    if (o->n < 1 || s % o->n != 0)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: n is %lld and axis %d has extent %lld; expected n >= 1 dividing "
                           "the extent",
                           c->who, (long long)o->n, k, (long long)s);
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const fa_args *o = c->opts;
    const nx_tensor *xt = c->in[0];
    int nd = nx_tensor_ndim(xt), k;
    nx_status st = nx_num_axis(c, o->axis, nd, "axis", &k);
    if (st != NX_OK)
        return st;
    int64_t ys[NX_MAX_DIMS];
    for (int i = 0, j = 0; i < nd; i++) {
        if (i == k) {
            ys[j++] = nx_tensor_shape(xt)[i] / o->n;
            ys[j++] = o->n;
        } else {
            ys[j++] = nx_tensor_shape(xt)[i];
        }
    }
    outs[0] = nx_reshape(g, nx_num_declare(g, c, 0), nd + 1, ys);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"axis", NX_OPT_INT, NULL, NULL, 1, "the axis to split; negative counts from the end"},
    {"n", NX_OPT_INT, NULL, "1:", 1, "the extent of the new inner axis (divides the axis)"},
};

static const nx_op_field fields[] = {
    {offsetof(fa_args, axis), NX_OP_NO_FIELD, sizeof(int64_t)},
    {offsetof(fa_args, n), NX_OP_NO_FIELD, sizeof(int64_t)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_fold_axis = {
    .info = {.nopts = 2, .opts = opts},
    .opts_size = sizeof(fa_args),
    .fields = fields,
    .backend_offset = offsetof(fa_args, backend),
    .check = check,
    .build = build,
    .golden = "numerics",
    .tols = tols,
    .ntols = 2,
};
