/* The op `apply_affine`: an affine applied to coordinates,
 *   y = L (x - c) + t + c,
 * for coords [*B, ..., d], M [*B, d, d+1] or [*B, d+1, d+1] (L its linear block, t its last
 * column; B, M's leading axes, equal to the leading axes of coords: one matrix per batch element)
 * and the optional centre c [d] (absent: the origin). An IR graph: the gradients of coords, M and
 * center. */
#include <string.h>

#include "ops/geometry/affine.h"

typedef struct apply_args {
    nx_backend backend;
} apply_args;

static nx_status check(const nx_op_args *c)
{
    int d, rows;
    nx_status st = nx_geo_check_affine(c, 1, NX_GEO_MAX_RANK, &d, &rows);
    if (st == NX_OK)
        st = nx_geo_check_float(c, 0, 1);
    if (st != NX_OK)
        return st;
    const nx_tensor *x = c->in[0], *m = c->in[1], *ctr = c->in[2];
    int nx = nx_tensor_ndim(x), nb = nx_tensor_ndim(m) - 2;
    if (nx_tensor_shape(x)[nx - 1] != d)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: coords has %lld entries on its last axis but M is of rank %d; "
                           "expected %d",
                           c->who, (long long)nx_tensor_shape(x)[nx - 1], d, d);
    if (nb > nx - 1)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: M has %d batch axes but coords only %d leading axes; expected "
                           "M's batch axes to lead coords'",
                           c->who, nb, nx - 1);
    if ((st = nx_geo_check_batch(c, 1, nb, 0, nb)) != NX_OK)
        return st;
    if (ctr) {
        if ((st = nx_geo_check_float(c, 2, 1)) != NX_OK)
            return st;
        if (nx_tensor_ndim(ctr) != 1 || nx_tensor_shape(ctr)[0] != d)
            return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: center must be [%d]; expected one "
                               "coordinate per axis", c->who, d);
    }
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_tensor *xt = c->in[0], *mt = c->in[1], *ct = c->in[2];
    nx_dtype dt = nx_tensor_dtype(xt);
    int nx = nx_tensor_ndim(xt), nb = nx_tensor_ndim(mt) - 2;
    const int64_t *sx = nx_tensor_shape(xt);
    int64_t d = sx[nx - 1];
    nx_node x = nx_parameter(g, "coords", dt, nx, sx);
    nx_node m = nx_parameter(g, "M", dt, nx_tensor_ndim(mt), nx_tensor_shape(mt));
    nx_node ctr = ct ? nx_parameter(g, "center", dt, 1, nx_tensor_shape(ct)) : NX_NONE;
    int64_t s3[NX_MAX_DIMS] = {0};
    memcpy(s3, sx, sizeof(int64_t) * (size_t)nb);
    s3[nb] = -1;
    s3[nb + 1] = d;
    nx_node y = nx_geo_apply(g, nx_reshape(g, x, nb + 2, s3), m, ctr);
    outs[0] = nx_reshape(g, y, nx, sx);
    return nx_graph_status(g);
}

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-5},
    {NX_DTYPE_F64, NULL, NULL, 1e-13, 1e-13},
};

const nx_op_desc nx_op_apply_affine = {
    .opts_size = sizeof(apply_args),
    .backend_offset = offsetof(apply_args, backend),
    .check = check,
    .build = build,
    .golden = "geometry",
    .tols = tols,
    .ntols = 2,
};
