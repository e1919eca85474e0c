/* The op `identity_grid` (spec §4.8): the identity map of a grid in absolute index coordinates,
 * grid[i_0, .., i_{d-1}, a] = i_a, shape [*spatial_shape, d] (d = 1..3), float32 or float64: the
 * deformation under which spatial_transform returns its image. No inputs; iotas and a concat. */
#include "ops/geometry/sample.h"

static nx_status check(const nx_op_args *c)
{
    const nx_geo_args *o = c->opts;
    if (o->nspatial < 1 || o->nspatial > NX_GEO_SPATIAL_MAX)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: spatial_shape has %d extents; expected 1..3", c->who,
                           o->nspatial);
    for (int a = 0; a < o->nspatial; a++)
        if (o->spatial_shape[a] < 1)
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: spatial_shape[%d] is %lld; expected >= 1", c->who, a,
                               (long long)o->spatial_shape[a]);
    if (o->dtype != NX_DTYPE_F32 && o->dtype != NX_DTYPE_F64)
        return nx_rt_error(c->ctx, NX_ERR_DTYPE, "%s: dtype %s; expected float32 or float64",
                           c->who, (unsigned)o->dtype < NX_DTYPE_COUNT
                                       ? nx_dtype_name((nx_dtype)o->dtype) : "(unknown)");
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_geo_args *o = c->opts;
    outs[0] = nx_geo_identity(g, (nx_dtype)o->dtype, o->nspatial, o->spatial_shape);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"spatial_shape", NX_OPT_INTS, NULL, "1:", NX_GEO_SPATIAL_MAX,
     "the grid's extents, 1 to 3 of them"},
    {"dtype", NX_OPT_DTYPE, "float32", NULL, 1, "float32 or float64"},
};
static const nx_op_field fields[] = {
    {NX_GEO_FN(spatial_shape, nspatial)},
    {NX_GEO_F(dtype)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_identity_grid = {
    .info = {.nopts = 2, .opts = opts},
    .opts_size = sizeof(nx_geo_args),
    .fields = fields,
    .backend_offset = offsetof(nx_geo_args, backend),
    .check = check,
    .build = build,
    .golden = "geometry",
    .tols = tols,
    .ntols = 2,
};
