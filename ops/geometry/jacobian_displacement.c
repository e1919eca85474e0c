/* The op `jacobian_displacement`: the Jacobian of the deformation phi = id + u of a displacement
 * u [*lead, *spatial, d] (d spatial axes before the last),
 *   J[..., i, j] = delta_ij + d u_i / d x_j,   [*lead, *spatial, d, d],
 * by central differences (u[x+1] - u[x-1]) / (2 h_j) with u extended by boundary_mode
 * (scipy.ndimage's meanings; nearest: the edge value, so the edge difference is half the
 * one-sided one, as the JAX version; constant: 0). Pad and slice in the graph (fd.c). */
#include <string.h>

#include "ops/geometry/jacobian.h"

const nx_op_opt nx_jac_schema[2] = {
    {"boundary_mode", NX_OPT_BORDER, "nearest", NULL, 1,
     "how u extends past the grid for the central differences"},
    {"spacing", NX_OPT_FLOATS, "1", NULL, NX_MAX_DIMS,
     "the grid step per spatial axis (in u's unit), or one value for all"},
};

const nx_op_field nx_jac_fields[2] = {
    {offsetof(nx_jac_args, boundary_mode), NX_OP_NO_FIELD, sizeof(int)},
    {offsetof(nx_jac_args, spacing), offsetof(nx_jac_args, nspacing),
     sizeof(double) * NX_MAX_DIMS},
};

/* Against closed-form Jacobians of polynomial fields (exact for the central difference). */
const nx_op_tol nx_jac_tols[2] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-5},
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-12},
};

nx_status nx_jac_check(const nx_op_args *c)
{
    const nx_jac_args *o = c->opts;
    const nx_tensor *u = c->in[0];
    nx_dtype dt = nx_tensor_dtype(u);
    int nd = nx_tensor_ndim(u);
    if (dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64)
        return nx_rt_error(c->ctx, NX_ERR_DTYPE, "%s: u is %s; expected float32 or float64",
                           c->who, nx_dtype_name(dt));
    int64_t d = nd > 0 ? nx_tensor_shape(u)[nd - 1] : 0;
    char buf[128];
    if (nd < 2 || d < 1 || d > 3 || d > nd - 1)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: u is %s; expected a displacement [*lead, *spatial, d] with d = 1, "
                           "2 or 3 spatial axes before its last axis of d components",
                           c->who, nx_shape_str(buf, sizeof buf, nd, nx_tensor_shape(u)));
    if (nd + 1 > NX_MAX_DIMS)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: u has rank %d; at most %d", c->who, nd,
                           NX_MAX_DIMS - 1);
    if ((unsigned)o->boundary_mode >= NX_BORDER_COUNT)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: boundary_mode out of range", c->who);
    double h[NX_MAX_DIMS];
    return nx_geo_spacing(c, o->spacing, o->nspacing, (int)d, h);
}

nx_status nx_jac_entries(nx_graph *g, const nx_op_args *c, nx_node *j)
{
    const nx_jac_args *o = c->opts;
    const nx_tensor *ut = c->in[0];
    nx_dtype dt = nx_tensor_dtype(ut);
    int nd = nx_tensor_ndim(ut);
    int d = (int)nx_tensor_shape(ut)[nd - 1];
    double h[NX_MAX_DIMS];
    nx_status st = nx_geo_spacing(c, o->spacing, o->nspacing, d, h);
    if (st != NX_OK)
        return st;
    nx_node u = nx_parameter(g, "u", dt, nd, nx_tensor_shape(ut));
    int64_t lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0};
    for (int col = 0; col < d; col++) {
        nx_node du = nx_geo_fd(g, u, nd - 1 - d, d, col, NX_GEO_CENTRAL,
                               (nx_border)o->boundary_mode, h[col]);
        for (int i = 0; i < d; i++) {
            memset(lo, 0, sizeof lo);
            memcpy(hi, nx_tensor_shape(ut), sizeof(int64_t) * (size_t)nd);
            lo[nd - 1] = i;
            hi[nd - 1] = i + 1;
            nx_node e = nx_reshape(g, nx_slice(g, du, lo, hi, NULL), nd - 1, hi);
            if (i == col)
                e = nx_add(g, e, nx_scalar(g, dt, 1.0));
            j[i * d + col] = e;
        }
    }
    return nx_graph_status(g);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_tensor *ut = c->in[0];
    int d = (int)nx_tensor_shape(ut)[nx_tensor_ndim(ut) - 1];
    nx_node j[9];
    nx_status st = nx_jac_entries(g, c, j);
    if (st != NX_OK)
        return st;
    outs[0] = nx_mat_from(g, d, d, j);
    return nx_graph_status(g);
}

const nx_op_desc nx_op_jacobian_displacement = {
    .info = {.nopts = 2, .opts = nx_jac_schema},
    .opts_size = sizeof(nx_jac_args),
    .fields = nx_jac_fields,
    .backend_offset = offsetof(nx_jac_args, backend),
    .check = nx_jac_check,
    .build = build,
    .golden = "geometry",
    .tols = nx_jac_tols,
    .ntols = 2,
};
