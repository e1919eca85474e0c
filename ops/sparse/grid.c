/* Grid sparsity: stencils over a C-order grid as ELLs (one row per voxel, one slot per offset),
 * with scipy.ndimage's boundary rules, so a stencil matmul equals scipy's filters:
 *   replicate  clamp to the edge             (mode 'nearest')
 *   periodic   wrap                          (mode 'wrap')
 *   reflect    half-sample symmetric, d c b a | a b c d | d c b a  (mode 'reflect')
 * Repeated neighbours (a clamped offset landing on the voxel itself) stay separate slots, so the
 * sum is scipy's. */
#include <math.h>
#include <string.h>

#include "ops/sparse/sparse.h"

static int64_t map_coord(int64_t x, int64_t n, nx_grid_boundary b)
{
    if (x >= 0 && x < n)
        return x;
    switch (b) {
    case NX_GRID_REPLICATE:
        return x < 0 ? 0 : n - 1;
    case NX_GRID_PERIODIC: {
        int64_t r = x % n;
        return r < 0 ? r + n : r;
    }
    default: {
        /* Period 2n: x, then the mirror image -x - 1. */
        int64_t r = x % (2 * n);
        r = r < 0 ? r + 2 * n : r;
        return r < n ? r : 2 * n - 1 - r;
    }
    }
}

static nx_status check_grid(nx_ctx *ctx, const char *who, int ndim, const int64_t *shape,
                            nx_grid_boundary b, int64_t *numel)
{
    if (ndim < 1 || ndim > NX_GRID_MAX_DIMS)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: ndim %d; expected 1..%d", who, ndim,
                           NX_GRID_MAX_DIMS);
    if (!shape)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: grid_shape is NULL", who);
    /* Of the border modes, a stencil row maps every offset to a voxel: constant (cval outside)
     * and mirror have no mapping here. */
    if (b != NX_GRID_REPLICATE && b != NX_GRID_PERIODIC && b != NX_GRID_REFLECT)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: boundary %d (%s); expected replicate (nearest), periodic (wrap) or "
                           "reflect",
                           who, (int)b, nx_border_name(b) ? nx_border_name(b) : "not a border");
    for (int a = 0; a < ndim; a++)
        if (shape[a] < 1)
            return nx_rt_error(ctx, NX_ERR_SHAPE,
                               "%s: grid axis %d has extent %lld; expected "
                               ">= 1",
                               who, a, (long long)shape[a]);
    if (!nx_shape_numel(ndim, shape, numel))
        return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: the grid is too large", who);
    return NX_OK;
}

/* Fills row v of out from the offsets. */
static void stencil_row(int ndim, const int64_t *shape, int64_t v, int n_off,
                        const int64_t *offsets, const double *weights, nx_grid_boundary b,
                        nx_ell *out)
{
    int64_t c[NX_GRID_MAX_DIMS], r = v;
    for (int a = ndim - 1; a >= 0; a--) {
        c[a] = r % shape[a];
        r /= shape[a];
    }
    for (int s = 0; s < n_off; s++) {
        int64_t flat = 0;
        for (int a = 0; a < ndim; a++)
            flat = flat * shape[a] + map_coord(c[a] + offsets[s * ndim + a], shape[a], b);
        nx_sparse_set(out->values, v, s, weights[s]);
        nx_sparse_set_index(out->indices, v, s, flat);
    }
}

nx_status nx_grid_stencil(nx_ctx *ctx, int ndim, const int64_t *grid_shape, int n_offsets,
                          const int64_t *offsets, const double *weights, nx_grid_boundary boundary,
                          nx_ell *out)
{
    static const char *who = "nx_grid_stencil";
    if (!out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: out is NULL", who);
    memset(out, 0, sizeof *out);
    int64_t n = 0;
    nx_status st = check_grid(ctx, who, ndim, grid_shape, boundary, &n);
    if (st != NX_OK)
        return st;
    if (n_offsets < 0 || (n_offsets > 0 && (!offsets || !weights)))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: %d offsets with %s; expected n_offsets "
                           ">= 0 and both arrays",
                           who, n_offsets, offsets ? "no weights" : "no offsets");
    if ((st = nx_sparse_new2(ctx, NX_DTYPE_F64, n, n_offsets, &out->values)) == NX_OK)
        st = nx_sparse_new2(ctx, NX_DTYPE_I64, n, n_offsets, &out->indices);
    if (st != NX_OK) {
        nx_ell_free(out);
        return st;
    }
    out->n_cols = n;
    /* Stencil weights may be 0, so no value marks a pad. */
    out->identity = NAN;
    for (int64_t v = 0; v < n; v++)
        stencil_row(ndim, grid_shape, v, n_offsets, offsets, weights, boundary, out);
    return NX_OK;
}

nx_status nx_grid_laplacian(nx_ctx *ctx, int ndim, const int64_t *grid_shape,
                            nx_grid_boundary boundary, double spacing, bool negative, nx_ell *out)
{
    static const char *who = "nx_grid_laplacian";
    if (!out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: out is NULL", who);
    memset(out, 0, sizeof *out);
    if (ndim < 1 || ndim > NX_GRID_MAX_DIMS)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: ndim %d; expected 1..%d", who, ndim,
                           NX_GRID_MAX_DIMS);
    if (!(spacing > 0) || !isfinite(spacing))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: spacing %g; expected a finite value > 0",
                           who, spacing);
    int64_t off[(2 * NX_GRID_MAX_DIMS + 1) * NX_GRID_MAX_DIMS] = {0};
    double w[2 * NX_GRID_MAX_DIMS + 1];
    double s = (negative ? 1.0 : -1.0) / (spacing * spacing);
    w[0] = -2.0 * ndim * s;
    for (int a = 0; a < ndim; a++) {
        off[(1 + 2 * a) * ndim + a] = -1;
        off[(2 + 2 * a) * ndim + a] = 1;
        w[1 + 2 * a] = w[2 + 2 * a] = s;
    }
    return nx_grid_stencil(ctx, ndim, grid_shape, 2 * ndim + 1, off, w, boundary, out);
}

nx_status nx_grid_identity(nx_ctx *ctx, int ndim, const int64_t *grid_shape, nx_ell *out)
{
    int64_t off[NX_GRID_MAX_DIMS] = {0};
    double w = 1.0;
    return nx_grid_stencil(ctx, ndim, grid_shape, 1, off, &w, NX_GRID_REPLICATE, out);
}
