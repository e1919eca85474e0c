/* Movement primitives: views that only move elements, no arithmetic.
 *
 *   reshape    y.flat = x.flat                            (C order, same count)
 *   permute    y[i_0..] = x[j] with j_{perm[k]} = i_k      (axis k of y is axis perm[k] of x)
 *   broadcast  y[.., i, ..] = x[.., i or 0, ..]            (numpy.broadcast_to)
 *   slice      y[i] = x[start + i * step]
 *   pad        y[i] = x[fold(i - lo)], or cval             (scipy.ndimage modes, any width)
 *   reverse    y[i] = x[n - 1 - i] on flagged axes
 *   concat     y = x_0 | x_1 | ... along axis
 *   window     y[o, k] = x[o * stride + k * dilation]      (VALID sliding windows) */
#include <math.h>
#include <string.h>

#include "ir.h"
#include "passes/autodiff.h"

static nx_status no_operand_attr_mismatch(nx_ir_check *ck, const nx_ir_proto *p, int want)
{
    if (p->nattrs != want)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "%d attributes; expected %d", p->nattrs, want);
    return NX_OK;
}

/* ---- reshape -------------------------------------------------------------------------------*/

nx_status nx_ir_shape_reshape(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p,
                              nx_ir_sig *out)
{
    (void)s;
    const nx_ir_sig *x = &p->ins[0];
    if (p->nattrs < 1 || p->attrs[0] < 0 || p->attrs[0] > NX_MAX_DIMS ||
        p->nattrs != 1 + p->attrs[0])
        return nx_ir_fail(ck, NX_ERR_SHAPE, "ndim is %lld; expected 0 to %d",
                          p->nattrs ? (long long)p->attrs[0] : -1LL, NX_MAX_DIMS);
    int nd = (int)p->attrs[0];
    const int64_t *shape = p->attrs + 1;
    int64_t numel;
    char sx[160], sy[160];
    if (!nx_shape_numel(nd, shape, &numel) || numel != nx_ir_numel(x->ndim, x->shape))
        return nx_ir_fail(ck, NX_ERR_SHAPE,
                          "x %s has %lld elements but shape %s has a different count; expected "
                          "the same number of elements",
                          nx_shape_str(sx, sizeof sx, x->ndim, x->shape),
                          (long long)nx_ir_numel(x->ndim, x->shape),
                          nx_shape_str(sy, sizeof sy, nd, shape));
    out->dtype = x->dtype;
    out->ndim = nd;
    memcpy(out->shape, shape, (size_t)nd * sizeof *shape);
    return NX_OK;
}

nx_node nx_reshape(nx_graph *g, nx_node x, int ndim, const int64_t *shape)
{
    if (!g || !nx_ir_check_handles(g, "nx_reshape", 1, &x))
        return NX_NONE;
    if (ndim < 0 || ndim > NX_MAX_DIMS || (ndim > 0 && !shape))
        return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                 "nx_reshape: ndim is %d with shape %s; expected 0 to %d extents",
                                 ndim, shape ? "given" : "NULL", NX_MAX_DIMS);
    int64_t attrs[1 + NX_MAX_DIMS];
    attrs[0] = ndim;
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < ndim; i++) {
        attrs[1 + i] = shape[i];
        if (shape[i] == -1 && infer < 0) {
            infer = i;
            continue;
        }
        if (shape[i] < 0)
            return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                     "nx_reshape: extent %d is %lld; expected >= 0 (or one -1)", i,
                                     (long long)shape[i]);
        if (!nx_mul_i64(known, shape[i], &known))
            return nx_ir_graph_failf(g, NX_ERR_SHAPE, "nx_reshape: the shape overflows");
    }
    if (infer >= 0) {
        const nx_ir_node *n = &g->s.nodes[x];
        int64_t total = nx_ir_numel(n->ndim, n->shape);
        if (known == 0 || total % known != 0) {
            char sx[160];
            return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                     "nx_reshape: cannot infer extent %d: x %s has %lld elements, "
                                     "not a multiple of %lld",
                                     infer, nx_shape_str(sx, sizeof sx, n->ndim, n->shape),
                                     (long long)total, (long long)known);
        }
        attrs[1 + infer] = total / known;
    }
    return nx_ir_make(g, "nx_reshape", NX_PRIM_RESHAPE, 1, &x, 1 + ndim, attrs, 0, NULL);
}

nx_status nx_ir_ref_reshape(const nx_ir_eval *ev, const nx_ir_node *n, const nx_tensor *const *ins,
                            nx_tensor *out)
{
    (void)ev;
    (void)n;
    size_t bytes = (size_t)nx_tensor_numel(out) * nx_dtype_size(out->dtype);
    if (bytes)
        memcpy(nx_tensor_data(out), nx_tensor_data(ins[0]), bytes);
    return NX_OK;
}

/* ---- permute -------------------------------------------------------------------------------*/

nx_status nx_ir_shape_permute(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p,
                              nx_ir_sig *out)
{
    (void)s;
    const nx_ir_sig *x = &p->ins[0];
    nx_status st = no_operand_attr_mismatch(ck, p, x->ndim);
    if (st != NX_OK)
        return st;
    bool seen[NX_MAX_DIMS] = {false};
    for (int i = 0; i < x->ndim; i++) {
        int64_t a = p->attrs[i];
        if (a < 0 || a >= x->ndim || seen[a])
            return nx_ir_fail(ck, NX_ERR_INVALID_ARG,
                              "perm[%d] is %lld; expected a permutation of 0..%d", i, (long long)a,
                              x->ndim - 1);
        seen[a] = true;
        out->shape[i] = x->shape[a];
    }
    out->dtype = x->dtype;
    out->ndim = x->ndim;
    return NX_OK;
}

nx_node nx_permute(nx_graph *g, nx_node x, const int *perm)
{
    if (!g || !nx_ir_check_handles(g, "nx_permute", 1, &x))
        return NX_NONE;
    int nd = g->s.nodes[x].ndim;
    if (nd > 0 && !perm)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                 "nx_permute: perm is NULL; expected %d axes", nd);
    int64_t attrs[NX_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        attrs[i] = perm[i];
    return nx_ir_make(g, "nx_permute", NX_PRIM_PERMUTE, 1, &x, nd, attrs, 0, NULL);
}

nx_status nx_ir_ref_permute(const nx_ir_eval *ev, const nx_ir_node *n, const nx_tensor *const *ins,
                            nx_tensor *out)
{
    const int64_t *perm = nx_ir_node_attrs(ev->s, n);
    const nx_tensor *x = ins[0];
    size_t es = nx_dtype_size(x->dtype);
    int64_t idx[NX_MAX_DIMS] = {0}, numel = nx_tensor_numel(out);
    const char *xd = nx_tensor_data(x);
    char *yd = nx_tensor_data(out);
    for (int64_t i = 0; i < numel; i++) {
        int64_t off = 0;
        for (int d = 0; d < n->ndim; d++)
            off += idx[d] * x->strides[perm[d]];
        memcpy(yd + i * (int64_t)es, xd + off * (int64_t)es, es);
        nx_ir_next(n->ndim, n->shape, idx);
    }
    return NX_OK;
}

void nx_ir_attrs_permute(FILE *f, const nx_ir_store *s, const nx_ir_node *n)
{
    fputc('[', f);
    nx_ir_print_axes(f, "perm", (int)n->nattrs, nx_ir_node_attrs(s, n));
    fputc(']', f);
}

/* ---- broadcast -----------------------------------------------------------------------------*/

nx_status nx_ir_shape_broadcast(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p,
                                nx_ir_sig *out)
{
    (void)s;
    const nx_ir_sig *x = &p->ins[0];
    if (p->nattrs < 1 || p->attrs[0] < 0 || p->attrs[0] > NX_MAX_DIMS ||
        p->nattrs != 1 + p->attrs[0])
        return nx_ir_fail(ck, NX_ERR_SHAPE, "ndim is %lld; expected 0 to %d",
                          p->nattrs ? (long long)p->attrs[0] : -1LL, NX_MAX_DIMS);
    int nd = (int)p->attrs[0];
    const int64_t *shape = p->attrs + 1;
    char sx[160], sy[160];
    nx_shape_str(sx, sizeof sx, x->ndim, x->shape);
    nx_shape_str(sy, sizeof sy, nd, shape);
    if (x->ndim > nd)
        return nx_ir_fail(ck, NX_ERR_SHAPE, "x %s has more dims than the target %s", sx, sy);
    int64_t numel;
    if (!nx_shape_numel(nd, shape, &numel))
        return nx_ir_fail(ck, NX_ERR_SHAPE, "target %s has a negative extent or overflows", sy);
    for (int i = 0; i < x->ndim; i++) {
        int64_t e = x->shape[i], t = shape[i + nd - x->ndim];
        if (e != t && e != 1)
            return nx_ir_fail(ck, NX_ERR_SHAPE,
                              "x %s cannot broadcast to %s: its dim %d is %lld; expected 1 or "
                              "%lld",
                              sx, sy, i, (long long)e, (long long)t);
    }
    out->dtype = x->dtype;
    out->ndim = nd;
    memcpy(out->shape, shape, (size_t)nd * sizeof *shape);
    return NX_OK;
}

nx_node nx_broadcast(nx_graph *g, nx_node x, int ndim, const int64_t *shape)
{
    if (!g || !nx_ir_check_handles(g, "nx_broadcast", 1, &x))
        return NX_NONE;
    if (ndim < 0 || ndim > NX_MAX_DIMS || (ndim > 0 && !shape))
        return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                 "nx_broadcast: ndim is %d with shape %s; expected 0 to %d "
                                 "extents",
                                 ndim, shape ? "given" : "NULL", NX_MAX_DIMS);
    const nx_ir_node *n = &g->s.nodes[x];
    if (n->ndim == ndim && (ndim == 0 || memcmp(n->shape, shape, (size_t)ndim * 8) == 0))
        return x;
    int64_t attrs[1 + NX_MAX_DIMS];
    attrs[0] = ndim;
    for (int i = 0; i < ndim; i++)
        attrs[1 + i] = shape[i];
    return nx_ir_make(g, "nx_broadcast", NX_PRIM_BROADCAST, 1, &x, 1 + ndim, attrs, 0, NULL);
}

nx_status nx_ir_ref_broadcast(const nx_ir_eval *ev, const nx_ir_node *n,
                              const nx_tensor *const *ins, nx_tensor *out)
{
    (void)ev;
    const nx_tensor *x = ins[0];
    size_t es = nx_dtype_size(x->dtype);
    int64_t st[NX_MAX_DIMS], idx[NX_MAX_DIMS] = {0}, numel = nx_tensor_numel(out);
    nx_ir_bcast_strides(x, n->ndim, n->shape, st);
    const char *xd = nx_tensor_data(x);
    char *yd = nx_tensor_data(out);
    for (int64_t i = 0; i < numel; i++) {
        int64_t off = 0;
        for (int d = 0; d < n->ndim; d++)
            off += idx[d] * st[d];
        memcpy(yd + i * (int64_t)es, xd + off * (int64_t)es, es);
        nx_ir_next(n->ndim, n->shape, idx);
    }
    return NX_OK;
}

/* ---- slice ---------------------------------------------------------------------------------*/

nx_status nx_ir_shape_slice(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p,
                            nx_ir_sig *out)
{
    (void)s;
    const nx_ir_sig *x = &p->ins[0];
    int nd = x->ndim;
    nx_status st = no_operand_attr_mismatch(ck, p, 3 * nd);
    if (st != NX_OK)
        return st;
    const int64_t *start = p->attrs, *stop = p->attrs + nd, *step = p->attrs + 2 * nd;
    for (int i = 0; i < nd; i++) {
        if (start[i] < 0 || start[i] > stop[i] || stop[i] > x->shape[i] || step[i] < 1)
            return nx_ir_fail(ck, NX_ERR_SHAPE,
                              "axis %d: start %lld, stop %lld, step %lld over extent %lld; "
                              "expected 0 <= start <= stop <= extent and step >= 1",
                              i, (long long)start[i], (long long)stop[i], (long long)step[i],
                              (long long)x->shape[i]);
        out->shape[i] = stop[i] == start[i] ? 0 : (stop[i] - start[i] - 1) / step[i] + 1;
    }
    out->dtype = x->dtype;
    out->ndim = nd;
    return NX_OK;
}

nx_node nx_slice(nx_graph *g, nx_node x, const int64_t *start, const int64_t *stop,
                 const int64_t *step)
{
    if (!g || !nx_ir_check_handles(g, "nx_slice", 1, &x))
        return NX_NONE;
    int nd = g->s.nodes[x].ndim;
    if (nd > 0 && (!start || !stop))
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                 "nx_slice: start and stop must be non-NULL; expected %d values "
                                 "each",
                                 nd);
    int64_t attrs[3 * NX_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        attrs[i] = start[i];
        attrs[nd + i] = stop[i];
        attrs[2 * nd + i] = step ? step[i] : 1;
    }
    return nx_ir_make(g, "nx_slice", NX_PRIM_SLICE, 1, &x, 3 * nd, attrs, 0, NULL);
}

nx_status nx_ir_ref_slice(const nx_ir_eval *ev, const nx_ir_node *n, const nx_tensor *const *ins,
                          nx_tensor *out)
{
    const int64_t *a = nx_ir_node_attrs(ev->s, n);
    const nx_tensor *x = ins[0];
    int nd = n->ndim;
    size_t es = nx_dtype_size(x->dtype);
    int64_t idx[NX_MAX_DIMS] = {0}, numel = nx_tensor_numel(out);
    const char *xd = nx_tensor_data(x);
    char *yd = nx_tensor_data(out);
    for (int64_t i = 0; i < numel; i++) {
        int64_t off = 0;
        for (int d = 0; d < nd; d++)
            off += (a[d] + idx[d] * a[2 * nd + d]) * x->strides[d];
        memcpy(yd + i * (int64_t)es, xd + off * (int64_t)es, es);
        nx_ir_next(nd, n->shape, idx);
    }
    return NX_OK;
}

void nx_ir_attrs_slice(FILE *f, const nx_ir_store *s, const nx_ir_node *n)
{
    const int64_t *a = nx_ir_node_attrs(s, n);
    int nd = n->ndim;
    fputc('[', f);
    nx_ir_print_axes(f, "start", nd, a);
    fputs(", ", f);
    nx_ir_print_axes(f, "stop", nd, a + nd);
    fputs(", ", f);
    nx_ir_print_axes(f, "step", nd, a + 2 * nd);
    fputc(']', f);
}

/* ---- pad -----------------------------------------------------------------------------------*/

nx_status nx_ir_shape_pad(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p,
                          nx_ir_sig *out)
{
    (void)s;
    const nx_ir_sig *x = &p->ins[0];
    int nd = x->ndim;
    nx_status st = no_operand_attr_mismatch(ck, p, 2 + 2 * nd);
    if (st != NX_OK)
        return st;
    int64_t mode = p->attrs[0];
    const int64_t *lo = p->attrs + 2, *hi = p->attrs + 2 + nd;
    if (mode < 0 || mode >= NX_PAD_MODE_COUNT)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG,
                          "mode %lld is not a pad mode; expected an nx_border (NX_BORDER_REFLECT, "
                          "_CONSTANT, _NEAREST, _MIRROR or _WRAP)",
                          (long long)mode);
    for (int i = 0; i < nd; i++) {
        int64_t e;
        if (lo[i] < 0 || hi[i] < 0)
            return nx_ir_fail(ck, NX_ERR_SHAPE, "axis %d: lo %lld, hi %lld; expected both >= 0", i,
                              (long long)lo[i], (long long)hi[i]);
        if (mode != NX_PAD_CONSTANT && x->shape[i] == 0 && lo[i] + hi[i] > 0)
            return nx_ir_fail(ck, NX_ERR_SHAPE,
                              "axis %d is empty; mode %s needs at least one element to extend", i,
                              nx_ir_pad_mode_name(mode));
        if (!nx_add_i64(x->shape[i], lo[i], &e) || !nx_add_i64(e, hi[i], &e))
            return nx_ir_fail(ck, NX_ERR_SHAPE, "axis %d: the padded extent overflows", i);
        out->shape[i] = e;
    }
    int64_t numel;
    if (!nx_shape_numel(nd, out->shape, &numel) || numel > INT64_MAX / 16)
        return nx_ir_fail(ck, NX_ERR_SHAPE, "the padded shape overflows");
    out->dtype = x->dtype;
    out->ndim = nd;
    return NX_OK;
}

nx_node nx_pad(nx_graph *g, nx_node x, const int64_t *lo, const int64_t *hi, nx_border mode,
               double cval)
{
    if (!g || !nx_ir_check_handles(g, "nx_pad", 1, &x))
        return NX_NONE;
    int nd = g->s.nodes[x].ndim;
    if (nd > 0 && (!lo || !hi))
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                 "nx_pad: lo and hi must be non-NULL; expected %d widths each", nd);
    int64_t attrs[2 + 2 * NX_MAX_DIMS];
    attrs[0] = mode;
    if (mode != NX_PAD_CONSTANT)
        cval = 0; /* unused: keep equal pads one node */
    memcpy(&attrs[1], &cval, sizeof cval);
    for (int i = 0; i < nd; i++) {
        attrs[2 + i] = lo[i];
        attrs[2 + nd + i] = hi[i];
    }
    return nx_ir_make(g, "nx_pad", NX_PRIM_PAD, 1, &x, 2 + 2 * nd, attrs, 0, NULL);
}

/* The source index of position j (may be outside [0, n)) under mode, or -1 for cval. Wide pads
 * repeat the rule periodically, which is how scipy.ndimage (and numpy.pad) extend. */
static int64_t fold(int64_t j, int64_t n, int64_t mode)
{
    if (j >= 0 && j < n)
        return j;
    switch (mode) {
    case NX_PAD_REFLECT: { /* d c b a | a b c d | d c b a: period 2n */
        int64_t m = ((j % (2 * n)) + 2 * n) % (2 * n);
        return m < n ? m : 2 * n - 1 - m;
    }
    case NX_PAD_MIRROR: { /* d c b | a b c d | c b a: period 2n - 2 */
        if (n == 1)
            return 0;
        int64_t per = 2 * n - 2;
        int64_t m = ((j % per) + per) % per;
        return m < n ? m : per - m;
    }
    case NX_PAD_NEAREST:
        return j < 0 ? 0 : n - 1;
    case NX_PAD_WRAP:
        return ((j % n) + n) % n;
    default:
        return -1;
    }
}

nx_status nx_ir_ref_pad(const nx_ir_eval *ev, const nx_ir_node *n, const nx_tensor *const *ins,
                        nx_tensor *out)
{
    const int64_t *a = nx_ir_node_attrs(ev->s, n);
    const nx_tensor *x = ins[0];
    int nd = n->ndim;
    double cval;
    memcpy(&cval, &a[1], sizeof cval);
    uint8_t cbytes[8];
    nx_ir_put(cbytes, x->dtype, 0, nx_ir_from_double(cval, x->dtype));
    size_t es = nx_dtype_size(x->dtype);
    int64_t idx[NX_MAX_DIMS] = {0}, numel = nx_tensor_numel(out);
    const char *xd = nx_tensor_data(x);
    char *yd = nx_tensor_data(out);
    for (int64_t i = 0; i < numel; i++) {
        int64_t off = 0;
        bool outside = false;
        for (int d = 0; d < nd && !outside; d++) {
            int64_t j = fold(idx[d] - a[2 + d], x->shape[d], a[0]);
            outside = j < 0;
            off += j * x->strides[d];
        }
        memcpy(yd + i * (int64_t)es, outside ? (const char *)cbytes : xd + off * (int64_t)es, es);
        nx_ir_next(nd, n->shape, idx);
    }
    return NX_OK;
}

void nx_ir_attrs_pad(FILE *f, const nx_ir_store *s, const nx_ir_node *n)
{
    const int64_t *a = nx_ir_node_attrs(s, n);
    int nd = n->ndim;
    fputc('[', f);
    nx_ir_print_axes(f, "lo", nd, a + 2);
    fputs(", ", f);
    nx_ir_print_axes(f, "hi", nd, a + 2 + nd);
    fprintf(f, ", mode=%s", nx_ir_pad_mode_name(a[0]));
    if (a[0] == NX_PAD_CONSTANT) {
        double cval;
        memcpy(&cval, &a[1], sizeof cval);
        fprintf(f, ", cval=%.9g", cval);
    }
    fputc(']', f);
}

/* ---- reverse -------------------------------------------------------------------------------*/

nx_status nx_ir_shape_reverse(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p,
                              nx_ir_sig *out)
{
    (void)s;
    nx_status st = no_operand_attr_mismatch(ck, p, p->ins[0].ndim);
    if (st != NX_OK)
        return st;
    for (int i = 0; i < p->nattrs; i++) {
        if (p->attrs[i] != 0 && p->attrs[i] != 1)
            return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "axis flag %d is %lld; expected 0 or 1", i,
                              (long long)p->attrs[i]);
    }
    *out = p->ins[0];
    return NX_OK;
}

bool nx_ir_axes_flags(nx_graph *g, const char *fn, int naxes, const int *axes, int ndim,
                      int64_t *flags)
{
    for (int i = 0; i < ndim; i++)
        flags[i] = 0;
    if (naxes < 0 || naxes > ndim || (naxes > 0 && !axes)) {
        nx_ir_graph_failf(g, NX_ERR_INVALID_ARG, "%s: %d axes%s for %d dims; expected 0 to %d", fn,
                          naxes, naxes > 0 && !axes ? " (NULL)" : "", ndim, ndim);
        return false;
    }
    for (int i = 0; i < naxes; i++) {
        int a;
        if (!nx_ir_axis(axes[i], ndim, &a)) {
            nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                              "%s: axis %d is out of range for %d dims; expected %d to %d", fn,
                              axes[i], ndim, -ndim, ndim - 1);
            return false;
        }
        if (flags[a]) {
            nx_ir_graph_failf(g, NX_ERR_INVALID_ARG, "%s: axis %d is given twice", fn, a);
            return false;
        }
        flags[a] = 1;
    }
    return true;
}

nx_node nx_reverse(nx_graph *g, nx_node x, int naxes, const int *axes)
{
    if (!g || !nx_ir_check_handles(g, "nx_reverse", 1, &x))
        return NX_NONE;
    int nd = g->s.nodes[x].ndim;
    int64_t flags[NX_MAX_DIMS];
    if (!nx_ir_axes_flags(g, "nx_reverse", naxes, axes, nd, flags))
        return NX_NONE;
    return nx_ir_make(g, "nx_reverse", NX_PRIM_REVERSE, 1, &x, nd, flags, 0, NULL);
}

nx_status nx_ir_ref_reverse(const nx_ir_eval *ev, const nx_ir_node *n, const nx_tensor *const *ins,
                            nx_tensor *out)
{
    const int64_t *flags = nx_ir_node_attrs(ev->s, n);
    const nx_tensor *x = ins[0];
    size_t es = nx_dtype_size(x->dtype);
    int64_t idx[NX_MAX_DIMS] = {0}, numel = nx_tensor_numel(out);
    const char *xd = nx_tensor_data(x);
    char *yd = nx_tensor_data(out);
    for (int64_t i = 0; i < numel; i++) {
        int64_t off = 0;
        for (int d = 0; d < n->ndim; d++)
            off += (flags[d] ? n->shape[d] - 1 - idx[d] : idx[d]) * x->strides[d];
        memcpy(yd + i * (int64_t)es, xd + off * (int64_t)es, es);
        nx_ir_next(n->ndim, n->shape, idx);
    }
    return NX_OK;
}

void nx_ir_attrs_reverse(FILE *f, const nx_ir_store *s, const nx_ir_node *n)
{
    fputc('[', f);
    nx_ir_print_flags(f, "axes", n->ndim, nx_ir_node_attrs(s, n));
    fputc(']', f);
}

/* ---- concat --------------------------------------------------------------------------------*/

nx_status nx_ir_shape_concat(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p,
                             nx_ir_sig *out)
{
    (void)s;
    if (p->nops < 1)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "no inputs; expected at least one");
    nx_status st = no_operand_attr_mismatch(ck, p, 1);
    if (st != NX_OK)
        return st;
    const nx_ir_sig *x0 = &p->ins[0];
    int64_t axis = p->attrs[0];
    if (axis < 0 || axis >= x0->ndim)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "axis %lld is out of range for %d dims",
                          (long long)axis, x0->ndim);
    *out = *x0;
    int64_t total = 0;
    for (int k = 0; k < p->nops; k++) {
        const nx_ir_sig *xk = &p->ins[k];
        char a[160], b[160];
        if (xk->dtype != x0->dtype)
            return nx_ir_fail(ck, NX_ERR_DTYPE,
                              "input %d is %s but input 0 is %s; expected equal dtypes", k,
                              nx_dtype_name(xk->dtype), nx_dtype_name(x0->dtype));
        bool same = xk->ndim == x0->ndim;
        for (int d = 0; same && d < x0->ndim; d++)
            same = d == axis || xk->shape[d] == x0->shape[d];
        if (!same)
            return nx_ir_fail(ck, NX_ERR_SHAPE,
                              "input %d has shape %s but input 0 has %s; expected equal extents "
                              "except on axis %lld",
                              k, nx_shape_str(a, sizeof a, xk->ndim, xk->shape),
                              nx_shape_str(b, sizeof b, x0->ndim, x0->shape), (long long)axis);
        if (!nx_add_i64(total, xk->shape[axis], &total))
            return nx_ir_fail(ck, NX_ERR_SHAPE, "the concatenated extent overflows");
    }
    out->shape[axis] = total;
    return NX_OK;
}

nx_node nx_concat(nx_graph *g, int n, const nx_node *xs, int axis)
{
    if (!g)
        return NX_NONE;
    if (n < 1 || !xs)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                 "nx_concat: %d inputs%s; expected at least one", n,
                                 xs ? "" : " (NULL)");
    if (!nx_ir_check_handles(g, "nx_concat", n, xs))
        return NX_NONE;
    int nd = g->s.nodes[xs[0]].ndim, a;
    if (!nx_ir_axis(axis, nd, &a))
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                 "nx_concat: axis %d is out of range for %d dims; expected %d to "
                                 "%d",
                                 axis, nd, -nd, nd - 1);
    if (n == 1)
        return xs[0];
    int64_t attr = a;
    return nx_ir_make(g, "nx_concat", NX_PRIM_CONCAT, n, xs, 1, &attr, 0, NULL);
}

nx_status nx_ir_ref_concat(const nx_ir_eval *ev, const nx_ir_node *n, const nx_tensor *const *ins,
                           nx_tensor *out)
{
    int axis = (int)nx_ir_node_attrs(ev->s, n)[0];
    size_t es = nx_dtype_size(out->dtype);
    int64_t idx[NX_MAX_DIMS] = {0}, numel = nx_tensor_numel(out);
    char *yd = nx_tensor_data(out);
    for (int64_t i = 0; i < numel; i++) {
        int k = 0;
        int64_t j = idx[axis];
        while (j >= ins[k]->shape[axis]) {
            j -= ins[k]->shape[axis];
            k++;
        }
        int64_t off = 0;
        for (int d = 0; d < n->ndim; d++)
            off += (d == axis ? j : idx[d]) * ins[k]->strides[d];
        memcpy(yd + i * (int64_t)es, (const char *)nx_tensor_data(ins[k]) + off * (int64_t)es, es);
        nx_ir_next(n->ndim, n->shape, idx);
    }
    return NX_OK;
}

void nx_ir_attrs_concat(FILE *f, const nx_ir_store *s, const nx_ir_node *n)
{
    fprintf(f, "[axis=%lld]", (long long)nx_ir_node_attrs(s, n)[0]);
}

/* ---- window --------------------------------------------------------------------------------*/

nx_status nx_ir_shape_window(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p,
                             nx_ir_sig *out)
{
    (void)s;
    const nx_ir_sig *x = &p->ins[0];
    int nd = x->ndim;
    nx_status st = no_operand_attr_mismatch(ck, p, 3 * nd);
    if (st != NX_OK)
        return st;
    if (2 * nd > NX_MAX_DIMS)
        return nx_ir_fail(ck, NX_ERR_SHAPE,
                          "windows over %d axes make a %d-d view; expected at most %d dims "
                          "(reshape to fewer axes first)",
                          nd, 2 * nd, NX_MAX_DIMS);
    const int64_t *w = p->attrs, *str = p->attrs + nd, *dil = p->attrs + 2 * nd;
    for (int i = 0; i < nd; i++) {
        if (w[i] < 1 || str[i] < 1 || dil[i] < 1)
            return nx_ir_fail(ck, NX_ERR_SHAPE,
                              "axis %d: window %lld, stride %lld, dilation %lld; expected all >= 1",
                              i, (long long)w[i], (long long)str[i], (long long)dil[i]);
        int64_t span;
        if (!nx_mul_i64(dil[i], w[i] - 1, &span) || span >= x->shape[i])
            return nx_ir_fail(ck, NX_ERR_SHAPE,
                              "axis %d has extent %lld, smaller than the dilated window "
                              "(window %lld, dilation %lld); expected extent >= dilation * "
                              "(window - 1) + 1 (pad first)",
                              i, (long long)x->shape[i], (long long)w[i], (long long)dil[i]);
        out->shape[i] = (x->shape[i] - span - 1) / str[i] + 1;
        out->shape[nd + i] = w[i];
    }
    int64_t numel;
    if (!nx_shape_numel(2 * nd, out->shape, &numel) || numel > INT64_MAX / 16)
        return nx_ir_fail(ck, NX_ERR_SHAPE, "the window view's element count overflows");
    out->dtype = x->dtype;
    out->ndim = 2 * nd;
    return NX_OK;
}

nx_node nx_window(nx_graph *g, nx_node x, const int64_t *window, const int64_t *stride,
                  const int64_t *dilation)
{
    if (!g || !nx_ir_check_handles(g, "nx_window", 1, &x))
        return NX_NONE;
    int nd = g->s.nodes[x].ndim;
    if (nd > 0 && !window)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                 "nx_window: window is NULL; expected %d extents", nd);
    int64_t attrs[3 * NX_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        attrs[i] = window[i];
        attrs[nd + i] = stride ? stride[i] : 1;
        attrs[2 * nd + i] = dilation ? dilation[i] : 1;
    }
    return nx_ir_make(g, "nx_window", NX_PRIM_WINDOW, 1, &x, 3 * nd, attrs, 0, NULL);
}

nx_status nx_ir_ref_window(const nx_ir_eval *ev, const nx_ir_node *n, const nx_tensor *const *ins,
                           nx_tensor *out)
{
    const int64_t *a = nx_ir_node_attrs(ev->s, n);
    const nx_tensor *x = ins[0];
    int nd = x->ndim;
    size_t es = nx_dtype_size(x->dtype);
    int64_t idx[NX_MAX_DIMS] = {0}, numel = nx_tensor_numel(out);
    const char *xd = nx_tensor_data(x);
    char *yd = nx_tensor_data(out);
    for (int64_t i = 0; i < numel; i++) {
        int64_t off = 0;
        for (int d = 0; d < nd; d++)
            off += (idx[d] * a[nd + d] + idx[nd + d] * a[2 * nd + d]) * x->strides[d];
        memcpy(yd + i * (int64_t)es, xd + off * (int64_t)es, es);
        nx_ir_next(n->ndim, n->shape, idx);
    }
    return NX_OK;
}

void nx_ir_attrs_window(FILE *f, const nx_ir_store *s, const nx_ir_node *n)
{
    const int64_t *a = nx_ir_node_attrs(s, n);
    int nd = n->ndim / 2;
    fputc('[', f);
    nx_ir_print_axes(f, "window", nd, a);
    fputs(", ", f);
    nx_ir_print_axes(f, "stride", nd, a + nd);
    fputs(", ", f);
    nx_ir_print_axes(f, "dilation", nd, a + 2 * nd);
    fputc(']', f);
}

/* ---- adjoints ---------------------------------------------------------------------------*/

/* Adjoint rules of the movement primitives: each sends every element of dy back to the position
 * of x it was read from, summing where several positions read one element.
 *
 *   reshape    dx = reshape(dy, x's shape)        permute  dx = permute(dy, perm^-1)
 *   broadcast  dx = dy summed over broadcast axes  reverse  dx = reverse(dy)
 *   slice      step 1: pad(dy) with zeros; step > 1: scatter-add at start + i * step
 *   pad        constant: slice(dy); other modes: scatter-add per axis at fold(i - lo)
 *   concat     dx_k = the slice of dy that x_k fills
 *   window     scatter-add of dy at the flat offsets o * s + k * d of x */

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
        pos[i] = mode < 0 ? first + i * step : fold(i - first, ext, mode);
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
