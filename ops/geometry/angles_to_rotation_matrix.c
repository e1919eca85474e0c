/* The op `angles_to_rotation_matrix`: Euler angles [..., 1] (2-D) or [..., 3] (3-D) to a rotation
 * [..., d, d]: 2-D [[cos, -sin], [sin, cos]]; 3-D R = X(a1) Y(a2) Z(a3), right-handed, intrinsic
 * x then y then z (scipy's Rotation.from_euler("XYZ", ang)). Degrees by default. An IR graph. */
#include <math.h>

#include "ops/geometry/affine.h"

typedef struct angles_args {
    nx_backend backend;
    bool deg;
} angles_args;

static nx_status check(const nx_op_args *c)
{
    nx_status st = nx_geo_check_float(c, 0, 1);
    if (st != NX_OK)
        return st;
    const nx_tensor *a = c->in[0];
    int64_t n = nx_tensor_shape(a)[nx_tensor_ndim(a) - 1];
    if (n != 1 && n != 3)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: ang has %lld entries on its last axis; expected 1 (2-D) or 3 "
                           "(3-D)",
                           c->who, (long long)n);
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const angles_args *o = c->opts;
    const nx_tensor *at = c->in[0];
    nx_dtype dt = nx_tensor_dtype(at);
    int nd = nx_tensor_ndim(at);
    int na = (int)nx_tensor_shape(at)[nd - 1];
    nx_node a = nx_parameter(g, "ang", dt, nd, nx_tensor_shape(at));
    if (o->deg)
        a = nx_mul(g, a, nx_scalar(g, dt, NX_GEO_PI / 180.0));
    nx_node e[3];
    for (int i = 0; i < na; i++)
        e[i] = nx_geo_last(g, a, i);
    outs[0] = nx_geo_rotation(g, na, e);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"deg", NX_OPT_BOOL, "true", NULL, 1, "angles in degrees (false: radians)"},
};

static const nx_op_field fields[] = {
    {offsetof(angles_args, deg), NX_OP_NO_FIELD, sizeof(bool)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-13, 1e-14},
};

const nx_op_desc nx_op_angles_to_rotation_matrix = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(angles_args),
    .fields = fields,
    .backend_offset = offsetof(angles_args, backend),
    .check = check,
    .build = build,
    .golden = "geometry",
    .tols = tols,
    .ntols = 2,
};
