/* The op `promote_to_rank` (spec §4.12, api-a §9; hypercoil's and nitrix's _internal/util.py):
 * leading axes of extent 1 prepended until x has rank `rank` (numpy's broadcasting view of a
 * shorter shape); x unchanged when its rank is already >= rank. A reshape: autodiff gives the
 * gradient. */
#include "ops/numerics/numerics.h"

typedef struct ptr_args {
    nx_backend backend;
    int64_t rank;
} ptr_args;

static nx_status check(const nx_op_args *c)
{
    const ptr_args *o = c->opts;
    nx_status st = nx_num_check_storable(c, 0);
    if (st == NX_OK && (o->rank < 0 || o->rank > NX_MAX_DIMS))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: rank is %lld; expected 0..%d", c->who,
                           (long long)o->rank, NX_MAX_DIMS);
    return st;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const ptr_args *o = c->opts;
    const nx_tensor *xt = c->in[0];
    int nd = nx_tensor_ndim(xt), r = o->rank > nd ? (int)o->rank : nd;
    int64_t ys[NX_MAX_DIMS];
    for (int k = 0; k < r; k++)
        ys[k] = k < r - nd ? 1 : nx_tensor_shape(xt)[k - (r - nd)];
    outs[0] = nx_reshape(g, nx_num_declare(g, c, 0), r, ys);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"rank", NX_OPT_INT, NULL, "0:", 1, "the rank to reach by prepending axes of extent 1"},
};

static const nx_op_field fields[] = {
    {offsetof(ptr_args, rank), NX_OP_NO_FIELD, sizeof(int64_t)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_promote_to_rank = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(ptr_args),
    .fields = fields,
    .backend_offset = offsetof(ptr_args, backend),
    .check = check,
    .build = build,
    .golden = "numerics",
    .tols = tols,
    .ntols = 2,
};
