/* Indexing primitives.
 *
 *   gather   y[p, j, q] = x[p, clamp(idx[j], 0, n - 1), q]       (numpy.take along axis)
 *   scatter  y = x; y[p, idx[j], q] (+)= u[p, j, q], j ascending, out-of-range idx dropped
 *
 * Clamping (gather) and dropping (scatter) make every index tensor safe to run. */
#include <math.h>
#include <string.h>

#include "ir.h"
#include "ir/adjoint.h"

/* The gather result's signature. A gather needs a nonempty axis to clamp into; a scatter over an
 * empty axis (allow_empty) drops every update, as numpy's add.at does. */
static nx_status gather_shape(nx_ir_check *ck, const nx_ir_sig *x, const nx_ir_sig *idx,
                              int64_t axis, bool allow_empty, nx_ir_sig *out)
{
    if (axis < 0 || axis >= x->ndim)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "axis %lld is out of range for %d dims",
                          (long long)axis, x->ndim);
    if (idx->dtype != NX_DTYPE_I32 && idx->dtype != NX_DTYPE_I64)
        return nx_ir_fail(ck, NX_ERR_DTYPE, "idx is %s; expected i32 or i64",
                          nx_dtype_name(idx->dtype));
    int nd = x->ndim - 1 + idx->ndim;
    if (nd > NX_MAX_DIMS)
        return nx_ir_fail(ck, NX_ERR_SHAPE, "the result would have %d dims; expected at most %d",
                          nd, NX_MAX_DIMS);
    if (!allow_empty && x->shape[axis] == 0 && nx_ir_numel(idx->ndim, idx->shape) > 0)
        return nx_ir_fail(ck, NX_ERR_SHAPE,
                          "axis %lld of x is empty, so no index can be taken from it",
                          (long long)axis);
    int k = 0;
    for (int d = 0; d < axis; d++)
        out->shape[k++] = x->shape[d];
    for (int d = 0; d < idx->ndim; d++)
        out->shape[k++] = idx->shape[d];
    for (int d = (int)axis + 1; d < x->ndim; d++)
        out->shape[k++] = x->shape[d];
    out->ndim = nd;
    out->dtype = x->dtype;
    int64_t numel;
    if (!nx_shape_numel(nd, out->shape, &numel) || numel > INT64_MAX / 16)
        return nx_ir_fail(ck, NX_ERR_SHAPE, "the result's element count overflows");
    return NX_OK;
}

nx_status nx_ir_shape_gather(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p,
                             nx_ir_sig *out)
{
    (void)s;
    if (p->nattrs != 1)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "%d attributes; expected [axis]", p->nattrs);
    return gather_shape(ck, &p->ins[0], &p->ins[1], p->attrs[0], false, out);
}

nx_status nx_ir_shape_scatter(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p,
                              nx_ir_sig *out)
{
    (void)s;
    const nx_ir_sig *x = &p->ins[0], *u = &p->ins[2];
    if (p->nattrs != 2)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "%d attributes; expected [axis, monoid]",
                          p->nattrs);
    int64_t m = p->attrs[1];
    if (m != NX_MONOID_SUM && m != NX_MONOID_MAX && m != NX_MONOID_MIN)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "monoid %s; expected SUM, MAX or MIN",
                          nx_ir_monoid_name(m));
    if (!nx_ir_is_core_float(x->dtype) && !nx_ir_is_int(x->dtype))
        return nx_ir_fail(ck, NX_ERR_DTYPE, "x is %s; expected f32, f64 or an integer dtype",
                          nx_dtype_name(x->dtype));
    if (u->dtype != x->dtype)
        return nx_ir_fail(ck, NX_ERR_DTYPE, "updates are %s but x is %s; expected equal dtypes",
                          nx_dtype_name(u->dtype), nx_dtype_name(x->dtype));
    nx_ir_sig want;
    memset(&want, 0, sizeof want);
    nx_status st = gather_shape(ck, x, &p->ins[1], p->attrs[0], true, &want);
    if (st != NX_OK)
        return st;
    if (want.ndim != u->ndim ||
        memcmp(want.shape, u->shape, (size_t)u->ndim * sizeof *u->shape) != 0) {
        char a[160], b[160];
        return nx_ir_fail(ck, NX_ERR_SHAPE,
                          "updates have shape %s; expected %s (the shape nx_gather(x, idx, axis) "
                          "has)",
                          nx_shape_str(a, sizeof a, u->ndim, u->shape),
                          nx_shape_str(b, sizeof b, want.ndim, want.shape));
    }
    *out = *x;
    return NX_OK;
}

static bool norm_axis(nx_graph *g, const char *fn, nx_node x, int axis, int64_t *out)
{
    int nd = g->s.nodes[x].ndim, a;
    if (!nx_ir_axis(axis, nd, &a)) {
        nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                          "%s: axis %d is out of range for %d dims; expected %d to %d", fn, axis,
                          nd, -nd, nd - 1);
        return false;
    }
    *out = a;
    return true;
}

nx_node nx_gather(nx_graph *g, nx_node x, nx_node idx, int axis)
{
    nx_node ops[2] = {x, idx};
    int64_t a;
    if (!g || !nx_ir_check_handles(g, "nx_gather", 2, ops) ||
        !norm_axis(g, "nx_gather", x, axis, &a))
        return NX_NONE;
    return nx_ir_make(g, "nx_gather", NX_PRIM_GATHER, 2, ops, 1, &a, 0, NULL);
}

nx_node nx_scatter(nx_graph *g, nx_node x, nx_node idx, nx_node updates, int axis, nx_monoid monoid)
{
    nx_node ops[3] = {x, idx, updates};
    int64_t attrs[2] = {0, monoid};
    if (!g || !nx_ir_check_handles(g, "nx_scatter", 3, ops) ||
        !norm_axis(g, "nx_scatter", x, axis, &attrs[0]))
        return NX_NONE;
    return nx_ir_make(g, "nx_scatter", NX_PRIM_SCATTER, 3, ops, 2, attrs, 0, NULL);
}

/* The position of the update/gather element at multi-index ui inside x (its index along axis
 * replaced by k), as an element offset. */
static int64_t x_offset(const nx_tensor *x, int axis, int idx_ndim, const int64_t *ui, int64_t k)
{
    int64_t off = 0;
    for (int d = 0; d < axis; d++)
        off += ui[d] * x->strides[d];
    off += k * x->strides[axis];
    for (int d = axis + 1; d < x->ndim; d++)
        off += ui[d - 1 + idx_ndim] * x->strides[d];
    return off;
}

static int64_t idx_offset(const nx_tensor *idx, int axis, const int64_t *ui)
{
    int64_t off = 0;
    for (int d = 0; d < idx->ndim; d++)
        off += ui[axis + d] * idx->strides[d];
    return off;
}

nx_status nx_ir_ref_gather(const nx_ir_eval *ev, const nx_ir_node *n, const nx_tensor *const *ins,
                           nx_tensor *out)
{
    int axis = (int)nx_ir_node_attrs(ev->s, n)[0];
    const nx_tensor *x = ins[0], *idx = ins[1];
    int64_t ext = x->shape[axis];
    size_t es = nx_dtype_size(x->dtype);
    int64_t ui[NX_MAX_DIMS] = {0}, numel = nx_tensor_numel(out);
    const char *xd = nx_tensor_data(x);
    const void *id = nx_tensor_data(idx);
    char *yd = nx_tensor_data(out);
    for (int64_t i = 0; i < numel; i++) {
        int64_t k = nx_ir_get(id, idx->dtype, idx_offset(idx, axis, ui)).i;
        k = k < 0 ? 0 : k >= ext ? ext - 1 : k;
        memcpy(yd + i * (int64_t)es, xd + x_offset(x, axis, idx->ndim, ui, k) * (int64_t)es, es);
        nx_ir_next(n->ndim, n->shape, ui);
    }
    return NX_OK;
}

nx_status nx_ir_ref_scatter(const nx_ir_eval *ev, const nx_ir_node *n, const nx_tensor *const *ins,
                            nx_tensor *out)
{
    const int64_t *a = nx_ir_node_attrs(ev->s, n);
    int axis = (int)a[0];
    nx_prim combine = a[1] == NX_MONOID_SUM   ? NX_PRIM_ADD
                      : a[1] == NX_MONOID_MAX ? NX_PRIM_MAX
                                              : NX_PRIM_MIN;
    const nx_tensor *x = ins[0], *idx = ins[1], *u = ins[2];
    nx_dtype dt = x->dtype;
    size_t bytes = (size_t)nx_tensor_numel(x) * nx_dtype_size(dt);
    if (bytes)
        memcpy(nx_tensor_data(out), nx_tensor_data(x), bytes);
    int64_t ext = x->shape[axis];
    int64_t ui[NX_MAX_DIMS] = {0}, numel = nx_tensor_numel(u);
    const void *id = nx_tensor_data(idx), *ud = nx_tensor_data(u);
    void *yd = nx_tensor_data(out);
    for (int64_t i = 0; i < numel; i++) {
        int64_t k = nx_ir_get(id, idx->dtype, idx_offset(idx, axis, ui)).i;
        if (k >= 0 && k < ext) {
            int64_t t = x_offset(out, axis, idx->ndim, ui, k);
            nx_ir_val r =
                nx_ir_scalar_binary(combine, dt, dt, nx_ir_get(yd, dt, t), nx_ir_get(ud, dt, i));
            nx_ir_put(yd, dt, t, r);
        }
        nx_ir_next(u->ndim, u->shape, ui);
    }
    return NX_OK;
}

void nx_ir_attrs_gather(FILE *f, const nx_ir_store *s, const nx_ir_node *n)
{
    fprintf(f, "[axis=%lld]", (long long)nx_ir_node_attrs(s, n)[0]);
}

void nx_ir_attrs_scatter(FILE *f, const nx_ir_store *s, const nx_ir_node *n)
{
    const int64_t *a = nx_ir_node_attrs(s, n);
    fprintf(f, "[axis=%lld, monoid=%s]", (long long)a[0], nx_ir_monoid_name(a[1]));
}

/* ---- adjoints ---------------------------------------------------------------------------*/

/* Adjoint rules of gather and scatter.
 *
 *   gather        dx = scatter-add(0, clamp(idx), dy): gather clamps, so the clamped index is
 *                 where each element was read
 *   scatter SUM   dx = dy; du = gather(dy, idx) where idx is in range, 0 where it was dropped
 *   scatter MAX/MIN  routed to the winner of each target: x when it equals the result (x comes
 *                 first), else the first update in ascending flat order that equals it; the first
 *                 winner is found with a scatter-min of the candidates' flat positions */

static nx_node clamp_index(nx_graph *g, nx_node idx, int64_t ext)
{
    nx_dtype dt = nx_node_dtype(g, idx);
    nx_node lo = nx_scalar(g, dt, 0.0), hi = nx_scalar(g, dt, (double)(ext > 0 ? ext - 1 : 0));
    return nx_minimum(g, nx_maximum(g, idx, lo), hi);
}

nx_status nx_ir_vjp_gather(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    nx_node x = v.ops[0], idx = v.ops[1];
    int axis = (int)v.a[0];
    int64_t xs[NX_MAX_DIMS];
    nx_node_shape(g, x, xs);
    nx_node zero = nx_ir_ad_zeros(g, x);
    dx[0] = nx_scatter(g, zero, clamp_index(g, idx, xs[axis]), dy, axis, NX_MONOID_SUM);
    return NX_OK;
}

/* idx's in-range mask reshaped to broadcast against updates: [1]*axis + idx.shape + [1]*rest. */
static nx_node in_range(nx_graph *g, nx_node idx, int axis, int xndim, int64_t ext)
{
    nx_dtype dt = nx_node_dtype(g, idx);
    nx_node ok = nx_and(g, nx_ge(g, idx, nx_scalar(g, dt, 0.0)),
                        nx_lt(g, idx, nx_scalar(g, dt, (double)ext)));
    int ni = nx_node_ndim(g, idx), nd = 0;
    int64_t is[NX_MAX_DIMS], shape[NX_MAX_DIMS];
    nx_node_shape(g, idx, is);
    for (int i = 0; i < axis; i++)
        shape[nd++] = 1;
    for (int i = 0; i < ni; i++)
        shape[nd++] = is[i];
    for (int i = axis + 1; i < xndim; i++)
        shape[nd++] = 1;
    return nx_reshape(g, ok, nd, shape);
}

/* The flat C-order position of every element of u, as i64 of u's shape. */
static nx_node flat_positions(nx_graph *g, nx_node u)
{
    int nd = nx_node_ndim(g, u);
    int64_t us[NX_MAX_DIMS];
    nx_node_shape(g, u, us);
    nx_node coords[NX_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        coords[d] = nx_ir_ad_iota(g, nd, us, d);
    nx_node flat = nx_ir_ad_flat_index(g, nd, us, coords);
    return nd == 0 ? nx_broadcast(g, flat, 0, us) : flat;
}

static void scatter_minmax(nx_graph *g, const nx_ir_ad_view *v, nx_node y, nx_node dy, nx_node *dx)
{
    nx_node x = v->ops[0], idx = v->ops[1], u = v->ops[2];
    int axis = (int)v->a[0], xnd = nx_node_ndim(g, x);
    int64_t xs[NX_MAX_DIMS];
    nx_node_shape(g, x, xs);
    nx_node ok = in_range(g, idx, axis, xnd, xs[axis]);
    nx_node ic = clamp_index(g, idx, xs[axis]);
    nx_node x_wins = nx_eq(g, x, y);
    nx_node zero = nx_ir_ad_scalar(g, dy, 0.0);
    dx[0] = nx_select(g, x_wins, dy, zero);
    /* The first update (by flat position) equal to its target's result. */
    nx_node pos = flat_positions(g, u);
    double big = 9.0e18;
    nx_node cand = nx_select(g, nx_and(g, ok, nx_eq(g, u, nx_gather(g, y, ic, axis))), pos,
                             nx_scalar(g, NX_DTYPE_I64, big));
    nx_node none = nx_broadcast(g, nx_scalar(g, NX_DTYPE_I64, big), xnd, xs);
    nx_node first = nx_scatter(g, none, idx, cand, axis, NX_MONOID_MIN);
    nx_node won = nx_and(g, ok, nx_eq(g, nx_gather(g, first, ic, axis), pos));
    nx_node dy_left = nx_select(g, x_wins, zero, dy);
    dx[2] = nx_select(g, won, nx_gather(g, dy_left, ic, axis), zero);
}

nx_status nx_ir_vjp_scatter(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    if (v.a[1] != NX_MONOID_SUM) {
        scatter_minmax(g, &v, y, dy, dx);
        return NX_OK;
    }
    nx_node x = v.ops[0], idx = v.ops[1];
    int axis = (int)v.a[0];
    int64_t xs[NX_MAX_DIMS];
    nx_node_shape(g, x, xs);
    dx[0] = dy;
    nx_node got = nx_gather(g, dy, clamp_index(g, idx, xs[axis]), axis);
    nx_node ok = in_range(g, idx, axis, nx_node_ndim(g, x), xs[axis]);
    dx[2] = nx_select(g, ok, got, nx_ir_ad_scalar(g, dy, 0.0));
    return NX_OK;
}
