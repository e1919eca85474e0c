/* The op `affine_grid`: the absolute sample coordinates of an affine on a grid,
 *   out[*B, i, :] = L (i - c) + t + c  for every index i of spatial_shape,
 * for M [*B, d, d+1] or [*B, d+1, d+1] and the centre c [d] (absent: the grid centre
 * (shape - 1) / 2, the registration convention: rotate about the image centre). The coordinates
 * spatial_transform samples a moving image at. Output [*B, *spatial_shape, d]. An IR graph: the
 * gradients of M and center. */
#include <string.h>

#include "ops/geometry/affine.h"

typedef struct grid_args {
    nx_backend backend;
    int64_t shape[NX_MAX_DIMS];
    int nshape;
} grid_args;

static nx_status check(const nx_op_args *c)
{
    const grid_args *o = c->opts;
    int d, rows;
    nx_status st = nx_geo_check_affine(c, 0, NX_GEO_MAX_RANK, &d, &rows);
    if (st != NX_OK)
        return st;
    if (o->nshape != d)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: spatial_shape has %d extents but M is of rank %d; expected %d",
                           c->who, o->nshape, d, d);
    int nb = nx_tensor_ndim(c->in[0]) - 2;
    if (nb + d + 1 > NX_MAX_DIMS)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: the output would have rank %d; at most %d",
                           c->who, nb + d + 1, NX_MAX_DIMS);
    for (int i = 0; i < d; i++)
        if (o->shape[i] < 1)
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: spatial_shape[%d] is %lld; expected >= 1", c->who, i,
                               (long long)o->shape[i]);
    const nx_tensor *ctr = c->in[1];
    if (ctr) {
        if ((st = nx_geo_check_float(c, 1, 1)) != NX_OK)
            return st;
        if (nx_tensor_ndim(ctr) != 1 || nx_tensor_shape(ctr)[0] != d)
            return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                               "%s: center must be [%d]; expected one coordinate per axis",
                               c->who, d);
    }
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const grid_args *o = c->opts;
    const nx_tensor *mt = c->in[0], *ct = c->in[1];
    nx_dtype dt = nx_tensor_dtype(mt);
    int nm = nx_tensor_ndim(mt), nb = nm - 2, d = o->nshape;
    nx_node m = nx_parameter(g, "M", dt, nm, nx_tensor_shape(mt));
    nx_node ctr;
    if (ct) {
        ctr = nx_parameter(g, "center", dt, 1, nx_tensor_shape(ct));
    } else {
        double cv[NX_MAX_DIMS];
        for (int i = 0; i < d; i++)
            cv[i] = ((double)o->shape[i] - 1.0) / 2.0;
        int64_t n1 = d;
        ctr = nx_cast(g, nx_constant(g, NX_DTYPE_F64, 1, &n1, cv), dt);
    }
    /* The identity grid [*shape, d]: one iota per axis, stacked on a new last axis. */
    int64_t gs[NX_MAX_DIMS] = {0};
    memcpy(gs, o->shape, sizeof(int64_t) * (size_t)d);
    gs[d] = 1;
    nx_node cols[NX_MAX_DIMS];
    for (int i = 0; i < d; i++)
        cols[i] = nx_iota(g, dt, d + 1, gs, i);
    nx_node grid = nx_concat(g, d, cols, d);
    int64_t p2[2] = {-1, d};
    grid = nx_reshape(g, grid, 2, p2);
    nx_node y = nx_geo_apply(g, grid, m, ctr); /* [*B, P, d] */
    int64_t os[NX_MAX_DIMS] = {0};
    memcpy(os, nx_tensor_shape(mt), sizeof(int64_t) * (size_t)nb);
    memcpy(os + nb, o->shape, sizeof(int64_t) * (size_t)d);
    os[nb + d] = d;
    outs[0] = nx_reshape(g, y, nb + d + 1, os);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"spatial_shape", NX_OPT_INTS, NULL, "1:", NX_MAX_DIMS,
     "the output grid's extents, one per axis of M's rank"},
};

static const nx_op_field fields[] = {
    {offsetof(grid_args, shape), offsetof(grid_args, nshape), sizeof(int64_t) * NX_MAX_DIMS},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-5},
    {NX_DTYPE_F64, NULL, NULL, 1e-13, 1e-13},
};

const nx_op_desc nx_op_affine_grid = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(grid_args),
    .fields = fields,
    .backend_offset = offsetof(grid_args, backend),
    .check = check,
    .build = build,
    .golden = "geometry",
    .tols = tols,
    .ntols = 2,
};
