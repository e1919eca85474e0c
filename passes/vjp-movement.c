/* Adjoint rules of the movement primitives: each sends every element of dy back to the position
 * of x it was read from, summing where several positions read one element.
 *
 *   reshape    dx = reshape(dy, x's shape)        permute  dx = permute(dy, perm^-1)
 *   broadcast  dx = dy summed over broadcast axes  reverse  dx = reverse(dy)
 *   slice      step 1: pad(dy) with zeros; step > 1: scatter-add at start + i * step
 *   pad        constant: slice(dy); other modes: scatter-add per axis at fold(i - lo)
 *   concat     dx_k = the slice of dy that x_k fills
 *   window     scatter-add of dy at the flat offsets o * s + k * d of x */
#include <string.h>

#include "passes/autodiff.h"

nx_status nx_ir_vjp_reshape(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    int64_t shape[NX_MAX_DIMS];
    nx_node_shape(g, v.ops[0], shape);
    dx[0] = nx_reshape(g, dy, nx_node_ndim(g, v.ops[0]), shape);
    return NX_OK;
}

nx_status nx_ir_vjp_permute(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    int inv[NX_MAX_DIMS];
    for (int i = 0; i < v.n.ndim; i++)
        inv[v.a[i]] = i;
    dx[0] = nx_permute(g, dy, inv);
    return NX_OK;
}

nx_status nx_ir_vjp_broadcast(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    dx[0] = nx_ir_ad_unbroadcast(g, dy, v.ops[0]);
    return NX_OK;
}

nx_status nx_ir_vjp_reverse(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    int axes[NX_MAX_DIMS], n = 0;
    for (int i = 0; i < v.n.ndim; i++) {
        if (v.a[i])
            axes[n++] = i;
    }
    dx[0] = nx_reverse(g, dy, n, axes);
    return NX_OK;
}

/* Scatter-adds d along axis into zeros whose axis has extent ext, at the constant positions
 * pos[0 .. d's extent) (negative or >= ext: dropped, as scatter drops them). */
static nx_node scatter_axis(nx_graph *g, nx_node d, int axis, int64_t ext, const int64_t *pos)
{
    if (!d) /* an earlier builder failed; the graph holds its error */
        return NX_NONE;
    int nd = nx_node_ndim(g, d);
    int64_t shape[NX_MAX_DIMS];
    nx_node_shape(g, d, shape);
    int64_t len = shape[axis];
    nx_node idx = nx_constant(g, NX_DTYPE_I64, 1, &len, pos);
    shape[axis] = ext;
    nx_node zero = nx_broadcast(g, nx_ir_ad_scalar(g, d, 0.0), nd, shape);
    return nx_scatter(g, zero, idx, d, axis, NX_MONOID_SUM);
}

/* Positions through a temporary array of the context (NX_NONE with the graph error on failure). */
static nx_node scatter_positions(nx_graph *g, nx_node d, int axis, int64_t ext, int64_t len,
                                 int64_t first, int64_t step, int64_t mode)
{
    nx_ctx *ctx = nx_graph_ctx(g);
    size_t bytes = (size_t)(len > 0 ? len : 1) * sizeof(int64_t);
    int64_t *pos = nx_rt_alloc(ctx, bytes);
    if (!pos)
        return nx_ir_graph_failf(g, NX_ERR_NOMEM, "nx_graph_vjp: out of memory (%zu bytes)",
                                 bytes);
    for (int64_t i = 0; i < len; i++)
        pos[i] = mode < 0 ? first + i * step : nx_ir_ad_pad_fold(i - first, ext, mode);
    nx_node r = scatter_axis(g, d, axis, ext, pos);
    nx_rt_free(ctx, pos, bytes);
    return r;
}

nx_status nx_ir_vjp_slice(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    int nd = v.n.ndim;
    const int64_t *start = v.a, *stop = v.a + nd, *step = v.a + 2 * nd;
    int64_t xs[NX_MAX_DIMS], lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0};
    nx_node_shape(g, v.ops[0], xs);
    bool any_pad = false;
    for (int i = 0; i < nd; i++) {
        if (step[i] == 1) {
            lo[i] = start[i], hi[i] = xs[i] - stop[i];
            any_pad |= lo[i] || hi[i];
        }
    }
    nx_node d = any_pad ? nx_pad(g, dy, lo, hi, NX_PAD_CONSTANT, 0.0) : dy;
    for (int i = 0; i < nd; i++) {
        if (step[i] != 1)
            d = scatter_positions(g, d, i, xs[i], v.n.shape[i], start[i], step[i], -1);
    }
    dx[0] = d;
    return NX_OK;
}

nx_status nx_ir_vjp_pad(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    int nd = v.n.ndim;
    int64_t mode = v.a[0];
    const int64_t *lo = v.a + 2;
    int64_t xs[NX_MAX_DIMS];
    nx_node_shape(g, v.ops[0], xs);
    if (mode == NX_PAD_CONSTANT) {
        int64_t start[NX_MAX_DIMS], stop[NX_MAX_DIMS];
        for (int i = 0; i < nd; i++)
            start[i] = lo[i], stop[i] = lo[i] + xs[i];
        dx[0] = nx_slice(g, dy, start, stop, NULL);
        return NX_OK;
    }
    nx_node d = dy;
    for (int i = 0; i < nd; i++) {
        if (v.n.shape[i] != xs[i] || lo[i] != 0)
            d = scatter_positions(g, d, i, xs[i], v.n.shape[i], lo[i], 0, mode);
    }
    dx[0] = d;
    return NX_OK;
}

nx_status nx_ir_vjp_concat(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    int nd = v.n.ndim, axis = (int)v.a[0];
    int64_t start[NX_MAX_DIMS] = {0}, stop[NX_MAX_DIMS];
    memcpy(stop, v.n.shape, sizeof stop);
    int64_t at = 0;
    for (uint32_t k = 0; k < v.n.nops; k++) {
        int64_t xs[NX_MAX_DIMS];
        nx_node_shape(g, v.ops[k], xs);
        start[axis] = at;
        stop[axis] = at + xs[axis];
        at += xs[axis];
        dx[k] = nx_slice(g, dy, start, stop, NULL);
    }
    (void)nd;
    return NX_OK;
}

nx_status nx_ir_vjp_window(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    nx_node x = v.ops[0];
    int n = nx_node_ndim(g, x), ny = v.n.ndim;
    const int64_t *stride = v.a + n, *dil = v.a + 2 * n;
    int64_t xs[NX_MAX_DIMS];
    nx_node_shape(g, x, xs);
    nx_node coords[NX_MAX_DIMS];
    for (int d = 0; d < n; d++) {
        nx_node o = nx_ir_ad_iota(g, ny, v.n.shape, d);
        nx_node k = nx_ir_ad_iota(g, ny, v.n.shape, n + d);
        o = stride[d] == 1 ? o : nx_mul(g, o, nx_scalar(g, NX_DTYPE_I64, (double)stride[d]));
        k = dil[d] == 1 ? k : nx_mul(g, k, nx_scalar(g, NX_DTYPE_I64, (double)dil[d]));
        coords[d] = nx_add(g, o, k);
    }
    nx_node idx = nx_ir_ad_flat_index(g, n, xs, coords);
    dx[0] = nx_ir_ad_scatter_flat(g, x, idx, dy);
    return NX_OK;
}
