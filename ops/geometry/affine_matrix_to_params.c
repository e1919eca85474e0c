/* The op `affine_matrix_to_params`: the geometric parameters of an affine [..., d, d+1] (or
 * [..., d+1, d+1]), d = 2 or 3, the inverse of params_to_affine_matrix: the linear block
 * m = R diag(s) E is factored through the Cholesky factor L of m^T m = E^T diag(s)^2 E:
 * |s_i| = L_ii, E = diag(1 / L_ii) L^T (its strict upper triangle, row-major, is the shear),
 * the sign of det m goes to s_0 (a reflection is representable), and
 * R = m E^{-1} diag(1 / s) is a proper rotation, read as angles by rotation_matrix_to_angles'
 * rule. Output (translation, angles, scale, shear): d(d+1) entries. A singular block has no
 * factorisation: the result is then not finite. (The JAX version put the sign into s_0 before
 * forming E, which negates the first row's shears of a reflection; here E does not depend on
 * the sign, so a reflection round-trips.) Degrees by default. An IR graph. */
#include "ops/geometry/affine.h"

typedef struct to_params_args {
    nx_backend backend;
    bool deg;
} to_params_args;

static nx_status check(const nx_op_args *c)
{
    int d, rows;
    nx_status st = nx_geo_check_affine(c, 0, 3, &d, &rows);
    if (st != NX_OK)
        return st;
    if (d < 2)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: mat is of rank 1; expected an affine of rank 2 ([..., 2, 3]) or 3 "
                           "([..., 3, 4])",
                           c->who);
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const to_params_args *o = c->opts;
    const nx_tensor *mt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(mt);
    int nd = nx_tensor_ndim(mt);
    int d = (int)nx_tensor_shape(mt)[nd - 1] - 1, nr = d == 2 ? 1 : 3;
    nx_node mat = nx_parameter(g, "mat", dt, nd, nx_tensor_shape(mt));
    nx_node m = nx_mat_block(g, mat, 0, d, 0, d);
    nx_node gm = nx_matmul(g, nx_mat_transpose(g, m), m);
    /* Cholesky, unrolled: L_jj = sqrt(G_jj - sum_k<j L_jk^2), L_ij = (G_ij - ...) / L_jj. */
    nx_node l[9];
    for (int j = 0; j < d; j++) {
        nx_node acc = nx_mat_el(g, gm, j, j);
        for (int k = 0; k < j; k++)
            acc = nx_sub(g, acc, nx_mul(g, l[j * d + k], l[j * d + k]));
        l[j * d + j] = nx_sqrt(g, acc);
        for (int i = j + 1; i < d; i++) {
            nx_node a = nx_mat_el(g, gm, i, j);
            for (int k = 0; k < j; k++)
                a = nx_sub(g, a, nx_mul(g, l[i * d + k], l[j * d + k]));
            l[i * d + j] = nx_div(g, a, l[j * d + j]);
        }
    }
    nx_node one = nx_scalar(g, dt, 1.0);
    nx_node neg = nx_lt(g, nx_mat_det(g, m), nx_scalar(g, dt, 0.0));
    nx_node scale[3] = {0}, shear[3] = {0}, ee[9];
    for (int i = 0; i < d; i++)
        scale[i] = l[i * d + i];
    scale[0] = nx_select(g, neg, nx_neg(g, scale[0]), scale[0]);
    int k = 0;
    for (int i = 0; i < d; i++)
        for (int j = i + 1; j < d; j++)
            shear[k++] = nx_div(g, l[j * d + i], l[i * d + i]);
    /* E^{-1} of the unit upper E: 2-D [[1, -a], [0, 1]]; 3-D, E = [[1, a, b], [0, 1, c],
     * [0, 0, 1]]:
     * [[1, -a, a c - b], [0, 1, -c], [0, 0, 1]]. Columns then scaled by 1 / s. */
    nx_node inv_s[3];
    for (int i = 0; i < d; i++)
        inv_s[i] = nx_div(g, one, scale[i]);
    for (int i = 0; i < d * d; i++)
        ee[i] = NX_NONE;
    if (d == 2) {
        ee[0] = inv_s[0];
        ee[1] = nx_mul(g, nx_neg(g, shear[0]), inv_s[1]);
        ee[3] = inv_s[1];
    } else {
        ee[0] = inv_s[0];
        ee[1] = nx_mul(g, nx_neg(g, shear[0]), inv_s[1]);
        ee[2] = nx_mul(g, nx_sub(g, nx_mul(g, shear[0], shear[2]), shear[1]), inv_s[2]);
        ee[4] = inv_s[1];
        ee[5] = nx_mul(g, nx_neg(g, shear[2]), inv_s[2]);
        ee[8] = inv_s[2];
    }
    nx_node rot = nx_matmul(g, m, nx_mat_from(g, d, d, ee));
    nx_node ang[3];
    nx_geo_angles(g, rot, d, ang);
    nx_node out[12];
    int n = 0;
    for (int i = 0; i < d; i++)
        out[n++] = nx_mat_el(g, mat, i, d);
    for (int i = 0; i < nr; i++)
        out[n++] = o->deg ? nx_mul(g, ang[i], nx_scalar(g, dt, 180.0 / NX_GEO_PI)) : ang[i];
    for (int i = 0; i < d; i++)
        out[n++] = scale[i];
    for (int i = 0; i < nr; i++)
        out[n++] = shear[i];
    outs[0] = nx_geo_vec(g, n, out);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"deg", NX_OPT_BOOL, "true", NULL, 1, "rotation angles in degrees (false: radians)"},
};

static const nx_op_field fields[] = {
    {offsetof(to_params_args, deg), NX_OP_NO_FIELD, sizeof(bool)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-4, 1e-4},
    {NX_DTYPE_F64, NULL, NULL, 1e-11, 1e-12},
};

const nx_op_desc nx_op_affine_matrix_to_params = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(to_params_args),
    .fields = fields,
    .backend_offset = offsetof(to_params_args, backend),
    .check = check,
    .build = build,
    .golden = "geometry",
    .tols = tols,
    .ntols = 2,
};
