/* The op `surface_dice`: the normalised surface Dice at a tolerance (Nikolov et al. 2018;
 * MONAI's compute_surface_dice with use_subvoxels=False, the count form):
 *   NSD = (#{p in S_pred : d(p, S_target) <= tol} + #{q in S_target : d(q, S_pred) <= tol})
 *         / (|S_pred| + |S_target|),
 * S the surface voxels (mask AND NOT erode(mask), the cross structuring element, background
 * beyond the border; surface.c), d the exact Euclidean distance with `spacing`, tol in
 * spacing's units. Empty surfaces: both empty gives NaN (MONAI's value: the class is in neither
 * mask); one empty gives 0 (no voxel of the other is within reach). Masks: bool, integer, f32
 * or f64 of one dtype and shape, nonzero = foreground; the result is 0-d, f32 for f32 masks,
 * else f64 (counts are exact i64; the ratio one f64 division). Not differentiable. */
#include <math.h>

#include "ops/metrics/overlap.h"

static nx_node count_within(nx_graph *g, nx_node surf, nx_node d, double tol, nx_node *n)
{
    int nd = nx_node_ndim(g, surf), axes[NX_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        axes[i] = i;
    const nx_dtype F = NX_DTYPE_F64, I = NX_DTYPE_I64;
    nx_node near = nx_and(g, surf, nx_le(g, nx_cast(g, d, F), nx_scalar(g, F, tol)));
    *n = nx_reduce(g, nx_cast(g, surf, I), nd, axes, NX_MONOID_SUM, false);
    return nx_reduce(g, nx_cast(g, near, I), nd, axes, NX_MONOID_SUM, false);
}

static nx_node reduce(nx_graph *g, const nx_surface_args *a, nx_dtype dt, nx_node off_p,
                      nx_node off_g, nx_node d_to_g, nx_node d_to_p)
{
    const nx_dtype F = NX_DTYPE_F64, I = NX_DTYPE_I64;
    nx_node sp = nx_eq(g, off_p, nx_scalar(g, dt, 0.0));
    nx_node sg = nx_eq(g, off_g, nx_scalar(g, dt, 0.0));
    nx_node np_, ng;
    nx_node cp = count_within(g, sp, d_to_g, a->tolerance, &np_);
    nx_node cg = count_within(g, sg, d_to_p, a->tolerance, &ng);
    nx_node total = nx_add(g, np_, ng);
    nx_node empty = nx_eq(g, total, nx_scalar(g, I, 0.0));
    nx_node den = nx_select(g, empty, nx_scalar(g, I, 1.0), total);
    nx_node r = nx_div(g, nx_cast(g, nx_add(g, cp, cg), F), nx_cast(g, den, F));
    return nx_cast(g, nx_select(g, empty, nx_scalar(g, F, NAN), r), dt);
}

static nx_status check(const nx_op_args *c)
{
    return nx_surface_check(c, true);
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    return nx_surface_run(c, reduce, outs);
}

static const nx_op_opt opts[] = {
    {"spacing", NX_OPT_FLOATS, "1", NULL, NX_MAX_DIMS,
     "voxel size per axis, or one value for all (each finite and > 0)"},
    {"tolerance", NX_OPT_FLOAT, NULL, "0:", 1,
     "a surface voxel counts when the other surface is at most this far (spacing's units)"},
};

static const nx_op_field fields[] = {
    {offsetof(nx_surface_args, spacing), offsetof(nx_surface_args, nspacing),
     sizeof(double) * NX_MAX_DIMS},
    {offsetof(nx_surface_args, tolerance), NX_OP_NO_FIELD, sizeof(double)},
};

/* exact counts, one division (the golden cases keep every distance away from the tolerance) */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-7, 0},
    {NX_DTYPE_F64, NULL, NULL, 1e-15, 0},
};

const nx_op_desc nx_op_surface_dice = {
    .info = {.nopts = 2, .opts = opts},
    .opts_size = sizeof(nx_surface_args),
    .fields = fields,
    .backend_offset = offsetof(nx_surface_args, backend),
    .check = check,
    .run = run,
    .golden = "metrics",
    .tols = tols,
    .ntols = 2,
};
