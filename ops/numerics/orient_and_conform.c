/* The op `orient_and_conform` (spec §4.12, api-a §9; hypercoil's and nitrix's
 * _internal/util.py): x's axes placed at positions `axis` (one per axis of x, distinct,
 * negative counting from the end) of a tensor of rank `dim`, every other axis of extent 1:
 *     y.shape[axis[i]] = x.shape[i],  y.shape[j] = 1 elsewhere,
 * so a vector of per-channel values lines up with one axis of a larger tensor for broadcasting.
 * When the positions are not ascending, x is transposed to their order first. A permute and a
 * reshape: autodiff gives the gradient. */
#include "ops/numerics/numerics.h"

typedef struct oc_args {
    nx_backend backend;
    int64_t axis[NX_MAX_DIMS];
    int naxis;
    int64_t dim;
} oc_args;

static nx_status layout(const nx_op_args *c, int *pos)
{
    const oc_args *o = c->opts;
    int nd = nx_tensor_ndim(c->in[0]);
    if (o->dim < nd || o->dim > NX_MAX_DIMS)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: dim is %lld for x of rank %d; expected %d..%d", c->who,
                           (long long)o->dim, nd, nd, NX_MAX_DIMS);
    if (o->naxis != nd)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: %d values of axis for x of rank %d; expected one per axis of x",
                           c->who, o->naxis, nd);
    bool seen[NX_MAX_DIMS] = {false};
    for (int i = 0; i < nd; i++) {
        nx_status st = nx_num_axis(c, o->axis[i], (int)o->dim, "axis", &pos[i]);
        if (st != NX_OK)
            return st;
        if (seen[pos[i]])
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: position %d is given twice; expected distinct positions",
                               c->who, pos[i]);
        seen[pos[i]] = true;
    }
    return NX_OK;
}

static nx_status check(const nx_op_args *c)
{
    int pos[NX_MAX_DIMS];
    nx_status st = nx_num_check_storable(c, 0);
    return st == NX_OK ? layout(c, pos) : st;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const oc_args *o = c->opts;
    const nx_tensor *xt = c->in[0];
    int nd = nx_tensor_ndim(xt), pos[NX_MAX_DIMS], perm[NX_MAX_DIMS];
    nx_status st = layout(c, pos);
    if (st != NX_OK)
        return st;
    /* perm: x's axes in ascending order of their positions */
    for (int i = 0; i < nd; i++)
        perm[i] = i;
    for (int i = 1; i < nd; i++)
        for (int j = i; j > 0 && pos[perm[j - 1]] > pos[perm[j]]; j--) {
            int t = perm[j];
            perm[j] = perm[j - 1];
            perm[j - 1] = t;
        }
    nx_node x = nx_num_declare(g, c, 0);
    if (nd > 1)
        x = nx_permute(g, x, perm);
    int64_t ys[NX_MAX_DIMS];
    for (int k = 0; k < o->dim; k++)
        ys[k] = 1;
    for (int i = 0; i < nd; i++)
        ys[pos[i]] = nx_tensor_shape(xt)[i];
    outs[0] = nx_reshape(g, x, (int)o->dim, ys);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"axis", NX_OPT_INTS, NULL, NULL, NX_MAX_DIMS,
     "the position of each axis of x in the result; negative counts from the end of dim"},
    {"dim", NX_OPT_INT, NULL, "0:", 1, "the result's rank (>= x's)"},
};

static const nx_op_field fields[] = {
    {offsetof(oc_args, axis), offsetof(oc_args, naxis), sizeof(int64_t) * NX_MAX_DIMS},
    {offsetof(oc_args, dim), NX_OP_NO_FIELD, sizeof(int64_t)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_orient_and_conform = {
    .info = {.nopts = 2, .opts = opts},
    .opts_size = sizeof(oc_args),
    .fields = fields,
    .backend_offset = offsetof(oc_args, backend),
    .check = check,
    .build = build,
    .golden = "numerics",
    .tols = tols,
    .ntols = 2,
};
