/* The op `params_to_affine_matrix`: an affine [..., d, d+1] from geometric parameters,
 *   M = T R S E:  par = (translation: d; rotation: 1 angle (2-D) or 3 (3-D, X Y Z as
 *   angles_to_rotation_matrix); scale: d; shear: d(d-1)/2, the strict upper triangle of the unit
 *   upper-triangular E, row-major),
 * so the linear block is R diag(scale) E and the last column the translation. A shorter par (1 to
 * d(d+1) entries) takes the identity's values for the rest (scale 1, the others 0); with
 * shift_scale, 1 is added to the scale entries (an all-zero par is the identity). Degrees by
 * default. An IR graph. */
#include <math.h>

#include "ops/geometry/affine.h"

typedef struct params_args {
    nx_backend backend;
    int64_t ndim;
    bool deg;
    bool shift_scale;
} params_args;

static int ndim_of(const params_args *o)
{
    return o->ndim == 0 ? 3 : (int)o->ndim;
}

static nx_status check(const nx_op_args *c)
{
    const params_args *o = c->opts;
    nx_status st = nx_geo_check_float(c, 0, 1);
    if (st != NX_OK)
        return st;
    if (o->ndim != 0 && o->ndim != 2 && o->ndim != 3)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: ndim is %lld; expected 2 or 3",
                           c->who, (long long)o->ndim);
    int d = ndim_of(o);
    const nx_tensor *p = c->in[0];
    int64_t n = nx_tensor_shape(p)[nx_tensor_ndim(p) - 1];
    if (n < 1 || n > d * (d + 1))
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: par has %lld entries on its last axis; expected 1 to %d for ndim "
                           "%d (translation %d, rotation %d, scale %d, shear %d)",
                           c->who, (long long)n, d * (d + 1), d, d, d == 2 ? 1 : 3, d,
                           d == 2 ? 1 : 3);
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const params_args *o = c->opts;
    const nx_tensor *pt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(pt);
    int nd = nx_tensor_ndim(pt);
    const int64_t *s = nx_tensor_shape(pt);
    int n = (int)s[nd - 1], d = ndim_of(o), nr = d == 2 ? 1 : 3;
    nx_node p = nx_parameter(g, "par", dt, nd, s);
    nx_node zero = nx_broadcast(g, nx_scalar(g, dt, 0.0), nd - 1, s);
    nx_node one = nx_broadcast(g, nx_scalar(g, dt, 1.0), nd - 1, s);
    nx_node e[12];
    for (int i = 0; i < d * (d + 1); i++) {
        bool is_scale = i >= d + nr && i < 2 * d + nr;
        if (i < n) {
            e[i] = nx_geo_last(g, p, i);
            if (is_scale && o->shift_scale)
                e[i] = nx_add(g, e[i], nx_scalar(g, dt, 1.0));
        } else {
            e[i] = is_scale && !o->shift_scale ? one : zero;
        }
    }
    nx_node ang[3];
    for (int i = 0; i < nr; i++)
        ang[i] = o->deg ? nx_mul(g, e[d + i], nx_scalar(g, dt, NX_GEO_PI / 180.0)) : e[d + i];
    nx_node rot = nx_geo_rotation(g, nr, ang);
    /* S E: row i is scale_i times E's row i. */
    nx_node se[9];
    const nx_node *sc = &e[d + nr], *sh = &e[2 * d + nr];
    int k = 0;
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++)
            se[i * d + j] = j < i ? NX_NONE : j == i ? sc[i] : nx_mul(g, sc[i], sh[k++]);
    nx_node lin = nx_matmul(g, rot, nx_mat_from(g, d, d, se));
    outs[0] = nx_geo_affine_from(g, lin, nx_geo_vec(g, d, e));
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"ndim", NX_OPT_INT, "3", "2:3", 1, "2 or 3 (a 6-vector is a full 2-D or a rigid 3-D set)"},
    {"deg", NX_OPT_BOOL, "true", NULL, 1, "rotation angles in degrees (false: radians)"},
    {"shift_scale", NX_OPT_BOOL, "false", NULL, 1,
     "add 1 to the scale entries (network outputs near 0 give the identity)"},
};

static const nx_op_field fields[] = {
    {offsetof(params_args, ndim), NX_OP_NO_FIELD, sizeof(int64_t)},
    {offsetof(params_args, deg), NX_OP_NO_FIELD, sizeof(bool)},
    {offsetof(params_args, shift_scale), NX_OP_NO_FIELD, sizeof(bool)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-13, 1e-14},
};

const nx_op_desc nx_op_params_to_affine_matrix = {
    .info = {.nopts = 3, .opts = opts},
    .opts_size = sizeof(params_args),
    .fields = fields,
    .backend_offset = offsetof(params_args, backend),
    .check = check,
    .build = build,
    .golden = "geometry",
    .tols = tols,
    .ntols = 2,
};
