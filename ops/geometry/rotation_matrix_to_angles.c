/* The op `rotation_matrix_to_angles`: the Euler angles of a rotation, the inverse of
 * angles_to_rotation_matrix. 2-D [..., 2, 2] (or an affine [..., 2, 3]): atan2(R10, R00).
 * 3-D [..., 3, 3] (or an affine [..., 3, 4] / [..., 4, 4]; the leading 3x3 block is read):
 * R = X(a1) Y(a2) Z(a3), a2 = atan2(R02, sqrt(R00^2 + R01^2)) in [-90, 90],
 * a1 = atan2(-R12, R22), a3 = atan2(-R01, R00) (scipy's as_euler("XYZ") away from gimbal lock);
 * at gimbal lock (sqrt(R00^2 + R01^2) < 1e-6) a1 = 0 and a3 = atan2(R10, R11) (scipy sets the
 * third angle to 0 there instead; both give R back). Degrees by default. An IR graph; the
 * gradient is not defined at gimbal lock. */
#include "ops/geometry/affine.h"

typedef struct to_angles_args {
    nx_backend backend;
    bool deg;
} to_angles_args;

static nx_status check(const nx_op_args *c)
{
    nx_status st = nx_geo_check_float(c, 0, 2);
    if (st != NX_OK)
        return st;
    const nx_tensor *m = c->in[0];
    int nd = nx_tensor_ndim(m);
    const int64_t *s = nx_tensor_shape(m);
    int64_t r = s[nd - 2], k = s[nd - 1];
    bool ok = (r == 2 && (k == 2 || k == 3)) || (r == 3 && (k == 3 || k == 4)) ||
              (r == 4 && k == 4);
    char buf[128];
    if (!ok)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: mat is %s; expected a rotation [..., 2, 2] or [..., 3, 3] (or an "
                           "affine [..., 2, 3], [..., 3, 4], [..., 4, 4])",
                           c->who, nx_shape_str(buf, sizeof buf, nd, s));
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const to_angles_args *o = c->opts;
    const nx_tensor *mt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(mt);
    int nd = nx_tensor_ndim(mt);
    const int64_t *s = nx_tensor_shape(mt);
    int d = s[nd - 2] == 2 ? 2 : 3;
    nx_node m = nx_parameter(g, "mat", dt, nd, s);
    nx_node a[3];
    nx_geo_angles(g, m, d, a);
    nx_node v = nx_geo_vec(g, d == 2 ? 1 : 3, a);
    if (o->deg)
        v = nx_mul(g, v, nx_scalar(g, dt, 180.0 / NX_GEO_PI));
    outs[0] = v;
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"deg", NX_OPT_BOOL, "true", NULL, 1, "angles in degrees (false: radians)"},
};

static const nx_op_field fields[] = {
    {offsetof(to_angles_args, deg), NX_OP_NO_FIELD, sizeof(bool)},
};

/* Against scipy's as_euler("XYZ") in float64, away from gimbal lock. */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-4, 1e-4},
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-12},
};

const nx_op_desc nx_op_rotation_matrix_to_angles = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(to_angles_args),
    .fields = fields,
    .backend_offset = offsetof(to_angles_args, backend),
    .check = check,
    .build = build,
    .golden = "geometry",
    .tols = tols,
    .ntols = 2,
};
