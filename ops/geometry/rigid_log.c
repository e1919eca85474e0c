/* The op `rigid_log`: the Lie parameters of a rigid transform, the inverse of rigid_exp,
 *   2-D: (atan2(R10, R00), t),   3-D: (w, t) with exp([w]_x) = R, |w| = theta in [0, pi].
 * 3-D: v = (R21 - R12, R02 - R20, R10 - R01) = 2 sin(theta) n and cos(theta) = (tr R - 1) / 2, so
 * theta = atan2(|v| / 2, cos(theta)) and w = theta v / |v| (1/2 where |v| < 1e-12). Near
 * theta = pi (cos(theta) < 0) v loses its digits, so there the axis comes from the symmetric part,
 * B = (R + R^T) / 2 - cos(theta) I = (1 - cos(theta)) n n^T: n is B's column of the largest
 * diagonal entry over sqrt(B_kk (1 - cos(theta))), its sign that of n.v (at theta = pi both signs
 * are the same rotation; + is returned). The rotation block must be a proper rotation (not
 * checked: it is data). The matrix may be [..., d, d+1] or [..., d+1, d+1]. An IR graph. */
#include "ops/geometry/affine.h"

typedef struct rigid_log_args {
    nx_backend backend;
    int64_t ndim; /* 0: from the matrix */
} rigid_log_args;

static nx_status check(const nx_op_args *c)
{
    const rigid_log_args *o = c->opts;
    int d, rows;
    nx_status st = nx_geo_check_affine(c, 0, 3, &d, &rows);
    if (st != NX_OK)
        return st;
    if (d < 2 || (o->ndim != 0 && o->ndim != d))
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: the matrix is of rank %d (%d columns); expected %s", c->who, d,
                           d + 1,
                           o->ndim == 2   ? "rank 2 ([..., 2, 3] or [..., 3, 3]) for ndim 2"
                           : o->ndim == 3 ? "rank 3 ([..., 3, 4] or [..., 4, 4]) for ndim 3"
                                          : "rank 2 or 3");
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_tensor *mt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(mt);
    int nd = nx_tensor_ndim(mt);
    int d = (int)nx_tensor_shape(mt)[nd - 1] - 1;
    nx_node m = nx_parameter(g, "matrix", dt, nd, nx_tensor_shape(mt));
    nx_node t[3];
    for (int i = 0; i < d; i++)
        t[i] = nx_mat_el(g, m, i, d);
    if (d == 2) {
        nx_node e[3] = {NX_NONE, t[0], t[1]};
        nx_geo_angles(g, m, 2, &e[0]);
        outs[0] = nx_geo_vec(g, 3, e);
        return nx_graph_status(g);
    }
    nx_node r[9];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            r[i * 3 + j] = nx_mat_el(g, m, i, j);
    nx_node one = nx_scalar(g, dt, 1.0), zero = nx_scalar(g, dt, 0.0);
    nx_node half = nx_scalar(g, dt, 0.5);
    nx_node v[3] = {nx_sub(g, r[7], r[5]), nx_sub(g, r[2], r[6]), nx_sub(g, r[3], r[1])};
    nx_node vv = nx_add(g, nx_add(g, nx_mul(g, v[0], v[0]), nx_mul(g, v[1], v[1])),
                        nx_mul(g, v[2], v[2]));
    nx_node cth = nx_mul(g, nx_sub(g, nx_add(g, nx_add(g, r[0], r[4]), r[8]), one), half);
    nx_node small = nx_lt(g, vv, nx_scalar(g, dt, 1e-24));
    nx_node nv = nx_sqrt(g, nx_select(g, small, one, vv));
    nx_node th = nx_atan2(g, nx_select(g, small, zero, nx_mul(g, nv, half)), cth);
    nx_node f = nx_select(g, small, half, nx_div(g, th, nx_select(g, small, one, nv)));
    /* Near pi: the axis from B's column k of the largest diagonal entry. */
    nx_node alt = nx_lt(g, cth, zero);
    nx_node bd[3], bcol[3][3];
    for (int i = 0; i < 3; i++)
        bd[i] = nx_sub(g, r[i * 4], cth);
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 3; k++)
            bcol[k][i] = i == k ? bd[i]
                                : nx_mul(g, half, nx_add(g, r[i * 3 + k], r[k * 3 + i]));
    nx_node k0 = nx_and(g, nx_ge(g, bd[0], bd[1]), nx_ge(g, bd[0], bd[2]));
    nx_node k1 = nx_ge(g, bd[1], bd[2]);
    nx_node bkk = nx_select(g, k0, bd[0], nx_select(g, k1, bd[1], bd[2]));
    nx_node den = nx_mul(g, bkk, nx_sub(g, one, cth));
    den = nx_sqrt(g, nx_select(g, alt, den, one));
    nx_node n[3];
    for (int i = 0; i < 3; i++)
        n[i] = nx_div(g, nx_select(g, k0, bcol[0][i], nx_select(g, k1, bcol[1][i], bcol[2][i])),
                      den);
    nx_node dot = nx_add(g, nx_add(g, nx_mul(g, n[0], v[0]), nx_mul(g, n[1], v[1])),
                         nx_mul(g, n[2], v[2]));
    nx_node sg = nx_select(g, nx_lt(g, dot, zero), nx_neg(g, one), one);
    nx_node e[6];
    for (int i = 0; i < 3; i++) {
        nx_node w_reg = nx_mul(g, f, v[i]);
        nx_node w_alt = nx_mul(g, nx_mul(g, th, sg), n[i]);
        e[i] = nx_select(g, alt, w_alt, w_reg);
        e[3 + i] = t[i];
    }
    outs[0] = nx_geo_vec(g, 6, e);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"ndim", NX_OPT_INT, "(from the matrix)", NULL, 1,
     "2 or 3; when given, the matrix's rank must be it"},
};

static const nx_op_field fields[] = {
    {offsetof(rigid_log_args, ndim), NX_OP_NO_FIELD, sizeof(int64_t)},
};

/* Against scipy.spatial.transform.Rotation.as_rotvec in float64 (rotations up to pi). */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-4, 1e-5},
    {NX_DTYPE_F64, NULL, NULL, 1e-11, 1e-12},
};

const nx_op_desc nx_op_rigid_log = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(rigid_log_args),
    .fields = fields,
    .backend_offset = offsetof(rigid_log_args, backend),
    .check = check,
    .build = build,
    .golden = "geometry",
    .tols = tols,
    .ntols = 2,
};
