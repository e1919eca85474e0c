/* The op `squareform` (api-b §1.1 `squareform(X)`): between a symmetric matrix and the vector of
 * its strict upper triangle, as scipy.spatial.distance.squareform (checks off): X whose last two
 * axes are equal (a batch of square matrices) gives sym2vec(X, offset=1); any other X is a batch
 * of vectors and gives vec2sym(X, offset=1). The JAX version decided by a symmetry test of the
 * values (allclose(X, X^T)); a graph's shape cannot depend on values, so here the shape decides,
 * and a batch of vectors whose batch extent equals its length must go through vec2sym. */
#include "ops/linalg/matrix.h"

typedef struct squareform_args {
    nx_backend backend;
} squareform_args;

static bool is_square(const nx_tensor *x)
{
    int nd = nx_tensor_ndim(x);
    return nd >= 2 && nx_tensor_shape(x)[nd - 1] == nx_tensor_shape(x)[nd - 2];
}

static nx_status check(const nx_op_args *c)
{
    nx_status st = nx_la_check_float(c, 0, "X", 1);
    if (st != NX_OK || is_square(c->in[0]))
        return st;
    int nd = nx_tensor_ndim(c->in[0]);
    int64_t n = nx_tensor_shape(c->in[0])[nd - 1];
    if (nx_la_vec2sym_side(n, 1) < 1)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: X is not square and its last axis (%lld) is no strict triangle; "
                           "expected square matrices or vectors of side (side - 1) / 2 entries",
                           c->who, (long long)n);
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_tensor *x = c->in[0];
    int nd = nx_tensor_ndim(x);
    nx_node xn = nx_parameter(g, "X", nx_tensor_dtype(x), nd, nx_tensor_shape(x));
    if (is_square(x))
        outs[0] = nx_la_sym2vec(g, xn, 1);
    else
        outs[0] = nx_la_vec2sym(g, xn, nx_la_vec2sym_side(nx_tensor_shape(x)[nd - 1], 1), 1);
    return nx_graph_status(g);
}

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_squareform = {
    .opts_size = sizeof(squareform_args),
    .backend_offset = offsetof(squareform_args, backend),
    .check = check,
    .build = build,
    .golden = "linalg",
    .tols = tols,
    .ntols = 2,
};
