/* The op `hausdorff95`: the 95th-percentile symmetric surface distance of two masks (MONAI's
 * compute_hausdorff_distance(percentile=95), api-b §4.3):
 *   HD95 = max(Q(d(S_pred -> S_target)), Q(d(S_target -> S_pred))),
 * S the surface voxels (mask AND NOT erode(mask), the cross structuring element, background
 * beyond the border; surface.c), d the exact Euclidean distance with `spacing` from each surface
 * voxel of one mask to the other's surface, Q the 95th percentile with linear interpolation
 * (numpy.percentile's and torch.quantile's default: h = (n - 1) 0.95 over the n sorted
 * distances, x[floor h] + (h - floor h)(x[floor h + 1] - x[floor h])). In spacing's units.
 *
 * Empty surfaces (an all-background mask): both empty gives NaN (nothing to compare, MONAI's
 * value); exactly one empty gives +inf (no finite distance reaches the missing surface).
 * Masks: bool, integer, f32 or f64 of one dtype and shape (*spatial), nonzero = foreground; the
 * result is 0-d, f32 for f32 masks, else f64 (the distances are computed in that dtype, the
 * percentile in f64). Not differentiable (a reporting metric). */
#include <math.h>

#include "ops/metrics/overlap.h"

/* The 95th percentile of d over the surface voxels surf (n of them, i64 0-d), in f64. */
static nx_node q95(nx_graph *g, nx_node surf, nx_node d, nx_node n)
{
    const nx_dtype F = NX_DTYPE_F64, I = NX_DTYPE_I64;
    int64_t shape[NX_MAX_DIMS], N = 1, one = 1;
    int nd = nx_node_ndim(g, d);
    nx_node_shape(g, d, shape);
    for (int i = 0; i < nd; i++)
        N *= shape[i];
    /* off-surface voxels sort after every surface distance */
    nx_node x = nx_select(g, surf, nx_cast(g, d, F), nx_scalar(g, F, INFINITY));
    nx_node sorted = nx_sort(g, nx_reshape(g, x, 1, &N), 0, false);
    nx_node h = nx_mul(g, nx_cast(g, nx_sub(g, n, nx_scalar(g, I, 1.0)), F), nx_scalar(g, F, 0.95));
    nx_node lo = nx_floor(g, h);
    nx_node gamma = nx_sub(g, h, lo);
    nx_node i0 = nx_cast(g, lo, I);
    nx_node i1 =
        nx_minimum(g, nx_add(g, i0, nx_scalar(g, I, 1.0)), nx_sub(g, n, nx_scalar(g, I, 1.0)));
    nx_node a = nx_gather(g, sorted, nx_reshape(g, i0, 1, &one), 0);
    nx_node b = nx_gather(g, sorted, nx_reshape(g, i1, 1, &one), 0);
    a = nx_reshape(g, a, 0, &one);
    b = nx_reshape(g, b, 0, &one);
    /* numpy's _lerp: a + (b - a) t below t = 0.5, b - (b - a)(1 - t) from it */
    nx_node diff = nx_sub(g, b, a);
    nx_node up = nx_sub(g, b, nx_mul(g, diff, nx_sub(g, nx_scalar(g, F, 1.0), gamma)));
    nx_node down = nx_add(g, a, nx_mul(g, diff, gamma));
    return nx_select(g, nx_ge(g, gamma, nx_scalar(g, F, 0.5)), up, down);
}

static nx_node count(nx_graph *g, nx_node surf)
{
    int nd = nx_node_ndim(g, surf), axes[NX_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        axes[i] = i;
    return nx_reduce(g, nx_cast(g, surf, NX_DTYPE_I64), nd, axes, NX_MONOID_SUM, false);
}

static nx_node reduce(nx_graph *g, const nx_surface_args *a, nx_dtype dt, nx_node off_p,
                      nx_node off_g, nx_node d_to_g, nx_node d_to_p)
{
    (void)a;
    const nx_dtype F = NX_DTYPE_F64, I = NX_DTYPE_I64;
    nx_node sp = nx_eq(g, off_p, nx_scalar(g, dt, 0.0));
    nx_node sg = nx_eq(g, off_g, nx_scalar(g, dt, 0.0));
    nx_node np_ = count(g, sp), ng = count(g, sg);
    nx_node hd = nx_maximum(g, q95(g, sp, d_to_g, np_), q95(g, sg, d_to_p, ng));
    nx_node zero = nx_scalar(g, I, 0.0);
    nx_node ep = nx_eq(g, np_, zero), eg = nx_eq(g, ng, zero);
    hd = nx_select(g, nx_or(g, ep, eg), nx_scalar(g, F, INFINITY), hd);
    hd = nx_select(g, nx_and(g, ep, eg), nx_scalar(g, F, NAN), hd);
    return nx_cast(g, hd, dt);
}

static nx_status check(const nx_op_args *c)
{
    return nx_surface_check(c, false);
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    return nx_surface_run(c, reduce, outs);
}

static const nx_op_opt opts[] = {
    {"spacing", NX_OPT_FLOATS, "1", NULL, NX_MAX_DIMS,
     "voxel size per axis, or one value for all (each finite and > 0); the result's unit"},
};

static const nx_op_field fields[] = {
    {offsetof(nx_surface_args, spacing), offsetof(nx_surface_args, nspacing),
     sizeof(double) * NX_MAX_DIMS},
};

/* The EDT's own bounds (scipy to 1e-10 in f64, 1e-4 in f32), then a lerp */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-4, 0},
    {NX_DTYPE_F64, NULL, NULL, 1e-10, 0},
};

const nx_op_desc nx_op_hausdorff95 = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(nx_surface_args),
    .fields = fields,
    .backend_offset = offsetof(nx_surface_args, backend),
    .check = check,
    .run = run,
    .golden = "metrics",
    .tols = tols,
    .ntols = 2,
};
