/* The helpers the adjoint rules share (ir/adjoint.h): small graph fragments built with the
 * public builders, so what they make is hash-consed and differentiable again. */
#include <stdarg.h>
#include <string.h>

#include "ir/adjoint.h"

/* ---- helpers shared by the rules -----------------------------------------------------------*/

void nx_ir_ad_view_of(const nx_graph *g, nx_node id, nx_ir_ad_view *v)
{
    const nx_ir_node *n = nx_ir_node_at(&g->s, id);
    v->n = *n;
    uint32_t nops = n->nops < NX_IR_AD_MAX_OPS ? n->nops : NX_IR_AD_MAX_OPS;
    uint32_t nattrs = n->nattrs < NX_IR_AD_MAX_ATTRS ? n->nattrs : NX_IR_AD_MAX_ATTRS;
    memcpy(v->ops, nx_ir_node_ops(&g->s, n), nops * sizeof *v->ops);
    memcpy(v->a, nx_ir_node_attrs(&g->s, n), nattrs * sizeof *v->a);
}

nx_node nx_ir_ad_scalar(nx_graph *g, nx_node like, double v)
{
    if (!like) /* an earlier builder failed; the graph holds its error */
        return NX_NONE;
    return nx_scalar(g, nx_node_dtype(g, like), v);
}

nx_node nx_ir_ad_zeros(nx_graph *g, nx_node like)
{
    if (!like)
        return NX_NONE;
    int64_t shape[NX_MAX_DIMS];
    nx_node_shape(g, like, shape);
    return nx_broadcast(g, nx_ir_ad_scalar(g, like, 0.0), nx_node_ndim(g, like), shape);
}

nx_node nx_ir_ad_unbroadcast(nx_graph *g, nx_node d, nx_node target)
{
    if (!d || !target)
        return NX_NONE;
    int nd = nx_node_ndim(g, d), nt = nx_node_ndim(g, target);
    int64_t ds[NX_MAX_DIMS], ts[NX_MAX_DIMS];
    nx_node_shape(g, d, ds);
    nx_node_shape(g, target, ts);
    int axes[NX_MAX_DIMS], naxes = 0;
    for (int i = 0; i < nd; i++) {
        int it = i - (nd - nt);
        if (it < 0 || (ts[it] == 1 && ds[i] != 1))
            axes[naxes++] = i;
    }
    if (naxes == 0 && nd == nt)
        return d;
    /* Same rank: keep the summed axes as 1, so the cotangent is the reduce itself and the fusion
     * pass can nest it in its consumer (a reshape after it would make it a stored value). */
    if (nd == nt)
        return nx_reduce(g, d, naxes, axes, NX_MONOID_SUM, true);
    nx_node r = naxes ? nx_reduce(g, d, naxes, axes, NX_MONOID_SUM, false) : d;
    int64_t rs[NX_MAX_DIMS];
    if (r && nx_node_ndim(g, r) == nt) {
        nx_node_shape(g, r, rs);
        if (!memcmp(rs, ts, (size_t)nt * sizeof *ts))
            return r;
    }
    return nx_reshape(g, r, nt, ts);
}

nx_node nx_ir_ad_select0(nx_graph *g, nx_node cond, nx_node d)
{
    return nx_select(g, cond, d, nx_ir_ad_scalar(g, d, 0.0));
}

nx_node nx_ir_ad_iota(nx_graph *g, int ndim, const int64_t *shape, int axis)
{
    return nx_iota(g, NX_DTYPE_I64, ndim, shape, axis);
}

nx_node nx_ir_ad_flat_index(nx_graph *g, int xndim, const int64_t *xshape, const nx_node *coords)
{
    nx_node flat = NX_NONE;
    int64_t stride = 1;
    for (int d = xndim - 1; d >= 0; d--) {
        nx_node term = coords[d];
        if (stride != 1)
            term = nx_mul(g, term, nx_scalar(g, NX_DTYPE_I64, (double)stride));
        flat = flat ? nx_add(g, term, flat) : term;
        stride *= xshape[d];
    }
    return flat ? flat : nx_scalar(g, NX_DTYPE_I64, 0.0);
}

nx_node nx_ir_ad_scatter_flat(nx_graph *g, nx_node x, nx_node idx, nx_node d)
{
    int64_t xs[NX_MAX_DIMS], n = 1;
    int nx = nx_node_ndim(g, x);
    nx_node_shape(g, x, xs);
    for (int i = 0; i < nx; i++)
        n *= xs[i];
    nx_node zero = nx_broadcast(g, nx_ir_ad_scalar(g, x, 0.0), 1, &n);
    nx_node flat = nx_scatter(g, zero, idx, d, 0, NX_MONOID_SUM);
    return nx_reshape(g, flat, nx, xs);
}

nx_node nx_ir_ad_shift(nx_graph *g, nx_node x, int axis, bool down, double v)
{
    int64_t shape[NX_MAX_DIMS], lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0};
    int64_t start[NX_MAX_DIMS] = {0};
    if (!x)
        return NX_NONE;
    nx_node_shape(g, x, shape);
    if (down)
        hi[axis] = 1;
    else
        lo[axis] = 1;
    nx_node p = nx_pad(g, x, lo, hi, NX_PAD_CONSTANT, v);
    int64_t stop[NX_MAX_DIMS];
    memcpy(stop, shape, sizeof stop);
    if (down) {
        start[axis] = 1;
        stop[axis] = shape[axis] + 1;
    }
    return nx_slice(g, p, start, stop, NULL);
}

nx_status nx_ir_ad_unsupported(nx_graph *g, const char *fmt, ...)
{
    char buf[NX_IR_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return nx_rt_error(g->s.ctx, NX_ERR_UNSUPPORTED, "%s", buf);
}
