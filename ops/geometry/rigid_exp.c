/* The op `rigid_exp`: a rigid transform from its Lie parameters, homogeneous [..., d+1, d+1],
 *   2-D (theta, t_x, t_y):            R = [[cos, -sin], [sin, cos]],
 *   3-D (w_x, w_y, w_z, t_x, t_y, t_z): R = exp([w]_x) by Rodrigues' formula,
 *       R = I + a [w]_x + b (w w^T - theta^2 I), a = sin(theta) / theta,
 *       b = (1 - cos(theta)) / theta^2 = (sin(theta / 2) / (theta / 2))^2 / 2,
 * and the translation taken as it is (the chart of the JAX version: not the SE(3) exponential,
 * whose translation would be V t). Below theta = 1e-6 a and b are their Taylor polynomials, and
 * theta is never the square root of 0, so the gradient at w = 0 is finite. An IR graph. */
#include "ops/geometry/affine.h"

typedef struct rigid_exp_args {
    nx_backend backend;
    int64_t ndim; /* 0: from the parameter count */
} rigid_exp_args;

static nx_status check(const nx_op_args *c)
{
    const rigid_exp_args *o = c->opts;
    nx_status st = nx_geo_check_float(c, 0, 1);
    if (st != NX_OK)
        return st;
    const nx_tensor *p = c->in[0];
    int64_t n = nx_tensor_shape(p)[nx_tensor_ndim(p) - 1];
    if (o->ndim != 0 && o->ndim != 2 && o->ndim != 3)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: ndim is %lld; expected 2 or 3",
                           c->who, (long long)o->ndim);
    int64_t want = o->ndim == 2 ? 3 : 6;
    if ((o->ndim != 0 && n != want) || (o->ndim == 0 && n != 3 && n != 6))
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: params has %lld entries on its last axis; expected %s", c->who,
                           (long long)n,
                           o->ndim == 0   ? "3 (2-D: theta, t) or 6 (3-D: w, t)"
                           : o->ndim == 2 ? "3 for ndim 2 (theta, t_x, t_y)"
                                          : "6 for ndim 3 (w_x, w_y, w_z, t_x, t_y, t_z)");
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_tensor *pt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(pt);
    int nd = nx_tensor_ndim(pt);
    int64_t n = nx_tensor_shape(pt)[nd - 1];
    nx_node p = nx_parameter(g, "params", dt, nd, nx_tensor_shape(pt));
    nx_node rot, t;
    if (n == 3) {
        nx_node th = nx_geo_last(g, p, 0);
        rot = nx_geo_rotation(g, 1, &th);
        nx_node te[2] = {nx_geo_last(g, p, 1), nx_geo_last(g, p, 2)};
        t = nx_geo_vec(g, 2, te);
    } else {
        nx_node w[3], te[3];
        for (int i = 0; i < 3; i++) {
            w[i] = nx_geo_last(g, p, i);
            te[i] = nx_geo_last(g, p, 3 + i);
        }
        t = nx_geo_vec(g, 3, te);
        nx_node th2 = nx_add(g, nx_add(g, nx_mul(g, w[0], w[0]), nx_mul(g, w[1], w[1])),
                             nx_mul(g, w[2], w[2]));
        nx_node one = nx_scalar(g, dt, 1.0);
        nx_node small = nx_lt(g, th2, nx_scalar(g, dt, 1e-12));
        nx_node th = nx_sqrt(g, nx_select(g, small, one, th2));
        nx_node a = nx_select(g, small, nx_sub(g, one, nx_div(g, th2, nx_scalar(g, dt, 6.0))),
                              nx_div(g, nx_sin(g, th), th));
        nx_node half = nx_mul(g, th, nx_scalar(g, dt, 0.5));
        nx_node sh = nx_div(g, nx_sin(g, half), half);
        nx_node b = nx_select(g, small,
                              nx_sub(g, nx_scalar(g, dt, 0.5),
                                     nx_div(g, th2, nx_scalar(g, dt, 24.0))),
                              nx_mul(g, nx_scalar(g, dt, 0.5), nx_mul(g, sh, sh)));
        /* [w]_x = [[0, -wz, wy], [wz, 0, -wx], [-wy, wx, 0]] */
        nx_node k[9] = {NX_NONE,        nx_neg(g, w[2]), w[1], w[2], NX_NONE, nx_neg(g, w[0]),
                        nx_neg(g, w[1]), w[0],           NX_NONE};
        nx_node e[9];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                nx_node ww = nx_mul(g, w[i], w[j]);
                if (i == j)
                    ww = nx_sub(g, ww, th2);
                nx_node v = nx_mul(g, b, ww);
                if (k[i * 3 + j] != NX_NONE)
                    v = nx_add(g, v, nx_mul(g, a, k[i * 3 + j]));
                e[i * 3 + j] = i == j ? nx_add(g, v, one) : v;
            }
        rot = nx_mat_from(g, 3, 3, e);
    }
    outs[0] = nx_geo_square(g, nx_geo_affine_from(g, rot, t));
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"ndim", NX_OPT_INT, "(from the parameter count)", NULL, 1,
     "2 (params theta, t_x, t_y) or 3 (w_x, w_y, w_z, t_x, t_y, t_z); not given: 3 entries are "
     "2-D, 6 are 3-D"},
};

static const nx_op_field fields[] = {
    {offsetof(rigid_exp_args, ndim), NX_OP_NO_FIELD, sizeof(int64_t)},
};

/* Closed forms against scipy.spatial.transform.Rotation.from_rotvec in float64. */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-13, 1e-14},
};

const nx_op_desc nx_op_rigid_exp = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(rigid_exp_args),
    .fields = fields,
    .backend_offset = offsetof(rigid_exp_args, backend),
    .check = check,
    .build = build,
    .golden = "geometry",
    .tols = tols,
    .ntols = 2,
};
