/* The surface pipeline of hausdorff95 and surface_dice (overlap.h), MONAI's algorithm
 * (monai.metrics compute_hausdorff_distance / compute_surface_dice with use_subvoxels=False):
 *
 *   1. surface voxels S = mask AND NOT erode(mask), the erosion by the cross (connectivity 1:
 *      the centre and its 2 d face neighbours; scipy.ndimage.binary_erosion's default structure)
 *      with background beyond the border (border_value 0), so a foreground voxel on the array's
 *      edge is a surface voxel: one program ("surface"), a pad and 2 d shifted slices;
 *   2. the exact Euclidean distance to each surface with the spacing: the distance_transform_edt
 *      op on "not a surface voxel" (its registry's driver; +inf everywhere for an empty surface);
 *   3. the metric's reduction over the surface voxels: one program ("reduce").
 *
 * Three programs joined by the host; each runs on the op's backend, and device inputs stay on
 * the device throughout (the EDT's device driver reads its mask in place). */
#include <math.h>
#include <string.h>

#include "nitrix-morphology.h"
#include "ops/metrics/overlap.h"

nx_dtype nx_surface_dtype(const nx_tensor *mask)
{
    return nx_tensor_dtype(mask) == NX_DTYPE_F32 ? NX_DTYPE_F32 : NX_DTYPE_F64;
}

static bool mask_dtype_ok(nx_dtype dt)
{
    return dt == NX_DTYPE_BOOL || nx_dtype_is_int(dt) || dt == NX_DTYPE_F32 || dt == NX_DTYPE_F64;
}

nx_status nx_surface_check(const nx_op_args *c, bool tolerance)
{
    const nx_surface_args *a = c->opts;
    const nx_tensor *p = c->in[0], *t = c->in[1];
    nx_dtype dp = nx_tensor_dtype(p), dtt = nx_tensor_dtype(t);
    if (!mask_dtype_ok(dp))
        return nx_rt_error(c->ctx, NX_ERR_DTYPE,
                           "%s: pred is %s; expected a bool, integer, f32 or f64 mask", c->who,
                           nx_dtype_name(dp));
    if (dtt != dp)
        return nx_rt_error(c->ctx, NX_ERR_DTYPE,
                           "%s: pred is %s but target is %s; expected masks of one dtype", c->who,
                           nx_dtype_name(dp), nx_dtype_name(dtt));
    int nd = nx_tensor_ndim(p);
    if (nd != nx_tensor_ndim(t) ||
        memcmp(nx_tensor_shape(p), nx_tensor_shape(t), (size_t)nd * sizeof(int64_t)) != 0) {
        char x[96], y[96];
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: pred has shape %s but target has shape %s; expected equal shapes",
                           c->who, nx_shape_str(x, sizeof x, nd, nx_tensor_shape(p)),
                           nx_shape_str(y, sizeof y, nx_tensor_ndim(t), nx_tensor_shape(t)));
    }
    if (nd < 1 || nd + 1 > NX_MAX_DIMS)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: pred has %d dims; expected 1..%d", c->who, nd,
                           NX_MAX_DIMS - 1);
    if (nx_tensor_numel(p) == 0)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: pred has no voxels; expected a nonempty (*spatial) mask", c->who);
    if (a->nspacing > 1 && a->nspacing != nd)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: spacing has %d values; expected 1 or %d (one per axis)", c->who,
                           a->nspacing, nd);
    for (int i = 0; i < a->nspacing; i++)
        if (!(a->spacing[i] > 0) || !isfinite(a->spacing[i]))
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: spacing[%d] is %g; expected a finite value > 0", c->who, i,
                               a->spacing[i]);
    if (tolerance && (!(a->tolerance >= 0) || !isfinite(a->tolerance)))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: tolerance is %g; expected a finite value >= 0", c->who,
                           a->tolerance);
    return NX_OK;
}

/* 0 on the surface voxels of mask m, 1 elsewhere, in dt. */
static nx_node off_surface(nx_graph *g, nx_node m, nx_dtype dt)
{
    int nd = nx_node_ndim(g, m);
    int64_t shape[NX_MAX_DIMS], one[NX_MAX_DIMS], start[NX_MAX_DIMS], stop[NX_MAX_DIMS];
    nx_node_shape(g, m, shape);
    nx_dtype md = nx_node_dtype(g, m);
    nx_node fg = md == NX_DTYPE_BOOL ? m : nx_ne(g, m, nx_scalar(g, md, 0.0));
    nx_node f = nx_cast(g, fg, dt);
    for (int k = 0; k < nd; k++)
        one[k] = 1;
    nx_node padded = nx_pad(g, f, one, one, NX_BORDER_CONSTANT, 0.0);
    nx_node eroded = f;
    for (int a = 0; a < nd; a++)
        for (int side = 0; side < 2; side++) {
            for (int k = 0; k < nd; k++) {
                start[k] = k == a ? 2 * side : 1;
                stop[k] = start[k] + shape[k];
            }
            eroded = nx_minimum(g, eroded, nx_slice(g, padded, start, stop, NULL));
        }
    nx_node surface = nx_and(g, fg, nx_eq(g, eroded, nx_scalar(g, dt, 0.0)));
    return nx_select(g, surface, nx_scalar(g, dt, 0.0), nx_scalar(g, dt, 1.0));
}

static nx_status surface_stage(nx_graph *g, const nx_op_args *c, const void *user, int nout,
                               nx_node *outs)
{
    (void)user;
    (void)nout;
    nx_dtype dt = nx_surface_dtype(c->in[0]);
    for (int k = 0; k < 2; k++) {
        const nx_tensor *t = c->in[k];
        nx_node m = nx_input(g, c->info->inputs[k], nx_tensor_dtype(t), nx_tensor_ndim(t),
                             nx_tensor_shape(t));
        outs[k] = off_surface(g, m, dt);
    }
    return nx_graph_status(g);
}

static nx_status reduce_stage(nx_graph *g, const nx_op_args *c, const void *user, int nout,
                              nx_node *outs)
{
    (void)nout;
    nx_surface_reduce_fn reduce = *(const nx_surface_reduce_fn *)user;
    nx_dtype dt = nx_surface_dtype(c->in[0]);
    int nd = nx_tensor_ndim(c->in[0]);
    const int64_t *s = nx_tensor_shape(c->in[0]);
    static const char *const names[4] = {"off_pred", "off_target", "to_target", "to_pred"};
    nx_node in[4];
    for (int k = 0; k < 4; k++)
        in[k] = nx_input(g, names[k], dt, nd, s);
    outs[0] = reduce(g, c->opts, dt, in[0], in[1], in[2], in[3]);
    return nx_graph_status(g);
}

nx_status nx_surface_run(const nx_op_args *c, nx_surface_reduce_fn reduce, nx_tensor **outs)
{
    const nx_surface_args *a = c->opts;
    int nd = nx_tensor_ndim(c->in[0]);
    double spacing[NX_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        spacing[i] = a->nspacing == 0 ? 1.0 : a->spacing[a->nspacing == 1 ? 0 : i];
    nx_program *p = NULL;
    nx_tensor *off[2] = {NULL, NULL}, *dist[2] = {NULL, NULL};
    nx_status st = nx_op_program(c, "surface", NULL, surface_stage, NULL, 2, &p);
    if (st == NX_OK)
        st = nx_program_run(p, c->in, off);
    nx_edt_opts eo = {.backend = c->backend, .sampling = spacing, .driver = NULL};
    /* dist[0]: distance to target's surface; dist[1]: to pred's */
    if (st == NX_OK)
        st = nx_distance_transform_edt(c->ctx, off[1], &eo, &dist[0]);
    if (st == NX_OK)
        st = nx_distance_transform_edt(c->ctx, off[0], &eo, &dist[1]);
    if (st == NX_OK)
        st = nx_op_program(c, "reduce", NULL, reduce_stage, &reduce, 1, &p);
    if (st == NX_OK)
        st = nx_program_run(p, (const nx_tensor *const[]){off[0], off[1], dist[0], dist[1]}, outs);
    for (int k = 0; k < 2; k++) {
        nx_tensor_free(off[k]);
        nx_tensor_free(dist[k]);
    }
    return st;
}
