/* The op `symmetric` (api-b §1.1 `symmetric(X, *, skew=False, axes=(-2,-1))`): the symmetric part
 * (X + X^T) / 2 of the square block at `axes`, or the antisymmetric part (X - X^T) / 2 with skew.
 * A permute and an elementwise sum: one fused kernel; autodiff gives the (anti)symmetrised
 * cotangent. */
#include "ops/linalg/matrix.h"

typedef struct symmetric_args {
    nx_backend backend;
    bool skew;
    int64_t axes[2];
    int naxes;
} symmetric_args;

static void axes_of(const nx_op_args *c, int *a0, int *a1)
{
    const symmetric_args *o = c->opts;
    int nd = nx_tensor_ndim(c->in[0]);
    int64_t x = o->naxes == 2 ? o->axes[0] : -2, y = o->naxes == 2 ? o->axes[1] : -1;
    *a0 = (int)(x < 0 ? x + nd : x);
    *a1 = (int)(y < 0 ? y + nd : y);
}

static nx_status check(const nx_op_args *c)
{
    const symmetric_args *o = c->opts;
    nx_status st = nx_la_check_float(c, 0, "X", 2);
    if (st != NX_OK)
        return st;
    if (o->naxes != 0 && o->naxes != 2)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: axes has %d values; expected 2",
                           c->who, o->naxes);
    int nd = nx_tensor_ndim(c->in[0]), a0, a1;
    axes_of(c, &a0, &a1);
    if (a0 < 0 || a0 >= nd || a1 < 0 || a1 >= nd || a0 == a1)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: axes (%lld, %lld) for X of %d dims; expected two distinct axes",
                           c->who, (long long)o->axes[0], (long long)o->axes[1], nd);
    const int64_t *s = nx_tensor_shape(c->in[0]);
    if (s[a0] != s[a1])
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: X's axes %d and %d have %lld and %lld; expected a square block",
                           c->who, a0, a1, (long long)s[a0], (long long)s[a1]);
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const symmetric_args *o = c->opts;
    const nx_tensor *x = c->in[0];
    nx_node xn = nx_parameter(g, "X", nx_tensor_dtype(x), nx_tensor_ndim(x), nx_tensor_shape(x));
    int nd = nx_tensor_ndim(x), perm[NX_MAX_DIMS], a0, a1;
    axes_of(c, &a0, &a1);
    for (int d = 0; d < nd; d++)
        perm[d] = d;
    perm[a0] = a1;
    perm[a1] = a0;
    nx_node t = nx_permute(g, xn, perm);
    nx_node s = o->skew ? nx_sub(g, xn, t) : nx_add(g, xn, t);
    outs[0] = nx_mul(g, s, nx_scalar(g, nx_tensor_dtype(x), 0.5));
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"skew", NX_OPT_BOOL, "false", NULL, 1, "the antisymmetric part (X - X^T) / 2 instead"},
    {"axes", NX_OPT_INTS, "(-2,-1)", NULL, 2, "the two axes of the square block"},
};

static const nx_op_field fields[] = {
    {offsetof(symmetric_args, skew), NX_OP_NO_FIELD, sizeof(bool)},
    {offsetof(symmetric_args, axes), offsetof(symmetric_args, naxes), sizeof(int64_t[2])},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-6, 1e-7},
    {NX_DTYPE_F64, NULL, NULL, 1e-14, 1e-15},
};

const nx_op_desc nx_op_symmetric = {
    .info = {.nopts = 2, .opts = opts},
    .opts_size = sizeof(symmetric_args),
    .fields = fields,
    .backend_offset = offsetof(symmetric_args, backend),
    .check = check,
    .build = build,
    .golden = "linalg",
    .tols = tols,
    .ntols = 2,
};
