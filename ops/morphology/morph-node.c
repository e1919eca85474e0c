/* Grey dilation and erosion as tropical window reductions: pad, take a window view, add the
 * structuring element's values (max-plus for dilation, min-plus for erosion) and fold the window
 * axes with MAX or MIN. Nothing here is differentiated by hand: autodiff of the MAX/MIN fold sends
 * each output's cotangent to its window's first winner. */
#include <math.h>
#include <string.h>

#include "cache.h"
#include "internal.h"
#include "ir/ir.h"
#include "morph.h"
#include "nitrix-graph.h"
#include "nitrix-ops.h"

/* The element resolved on the host: window extents and, per window place in C order, whether it
 * is in the footprint and the value added there (already reflected and signed for the op). */
typedef struct morph_elem {
    int nsp;
    int64_t w[NX_MORPH_MAX_SPATIAL];
    int64_t count;
    bool flat_box; /* every place in, no values: a plain window fold */
    bool has_values;
    double *values; /* count, or NULL */
    uint8_t *in;    /* count, or NULL */
} morph_elem;

static const nx_pad_mode border_pad[NX_MORPH_BORDER_COUNT] = {
    [NX_MORPH_BORDER_REFLECT] = NX_PAD_REFLECT, [NX_MORPH_BORDER_CONSTANT] = NX_PAD_CONSTANT,
    [NX_MORPH_BORDER_NEAREST] = NX_PAD_NEAREST, [NX_MORPH_BORDER_MIRROR] = NX_PAD_MIRROR,
    [NX_MORPH_BORDER_WRAP] = NX_PAD_WRAP,
};

static void elem_free(nx_ctx *ctx, morph_elem *e)
{
    nx_rt_free(ctx, e->values, (size_t)e->count * sizeof(double));
    nx_rt_free(ctx, e->in, (size_t)e->count);
    e->values = NULL;
    e->in = NULL;
}

/* A host tensor's values as f64 in C order (a new tensor; the caller frees it). */
static nx_status as_f64(nx_ctx *ctx, const char *who, const char *what, const nx_tensor *t, int nsp,
                        nx_tensor **out)
{
    if (nx_tensor_device(t) != NX_DEVICE_HOST)
        return nx_rt_error(ctx, NX_ERR_UNSUPPORTED,
                           "%s: %s is a device tensor; expected a host tensor (its values become "
                           "constants of the compiled program)",
                           who, what);
    if (nx_tensor_ndim(t) != nsp)
        return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: %s has %d dims; expected %d (the spatial dims)",
                           who, what, nx_tensor_ndim(t), nsp);
    nx_dtype d = nx_tensor_dtype(t);
    if (d == NX_DTYPE_F16 || d == NX_DTYPE_BF16)
        return nx_rt_error(ctx, NX_ERR_DTYPE, "%s: %s is %s; expected f32, f64, an integer or bool",
                           who, what, nx_dtype_name(d));
    return nx_tensor_cast(t, NX_DTYPE_F64, out);
}

static nx_status elem_shape(nx_ctx *ctx, const char *who, const nx_morph_opts *o, int nsp,
                            morph_elem *e)
{
    const nx_tensor *shape_of = o->footprint ? o->footprint : o->structure;
    if (shape_of && o->footprint && o->structure) {
        const int64_t *a = nx_tensor_shape(o->footprint), *b = nx_tensor_shape(o->structure);
        if (nx_tensor_ndim(o->footprint) != nx_tensor_ndim(o->structure) ||
            memcmp(a, b, (size_t)nx_tensor_ndim(o->footprint) * sizeof(int64_t)) != 0)
            return nx_rt_error(ctx, NX_ERR_SHAPE,
                               "%s: footprint and structure have different shapes; expected equal",
                               who);
    }
    e->count = 1;
    nx_rt_size z = {0};
    for (int i = 0; i < nsp; i++) {
        if (shape_of)
            e->w[i] = i < nx_tensor_ndim(shape_of) ? nx_tensor_shape(shape_of)[i] : 0;
        else
            e->w[i] = o->size[i] == 0 ? 3 : o->size[i];
        if (e->w[i] < 1)
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                               "%s: element extent %lld on spatial dim %d; expected >= 1", who,
                               (long long)e->w[i], i);
        e->count = nx_rt_size_mul(&z, e->count, e->w[i]);
        if (z.overflow)
            return nx_rt_size_error(ctx, who, shape_of ? "the element's shape" : "size",
                                    "a window whose places (the product of its extents) stay "
                                    "below 2^63");
    }
    return NX_OK;
}

/* Index of the place mirrored through every axis (reflection of the element). */
static int64_t mirrored(const morph_elem *e, int64_t k)
{
    int64_t r = 0, stride = 1;
    for (int i = e->nsp - 1; i >= 0; i--) {
        int64_t c = k % e->w[i];
        k /= e->w[i];
        r += (e->w[i] - 1 - c) * stride;
        stride *= e->w[i];
    }
    return r;
}

static nx_status elem_fill(nx_ctx *ctx, const char *who, bool dilate, const double *fp,
                           const double *sv, morph_elem *e)
{
    if (!fp && !sv) { /* a flat box: nothing per place (its places may be too many to list) */
        e->flat_box = true;
        return NX_OK;
    }
    e->in = nx_rt_alloc(ctx, (size_t)e->count);
    e->values = nx_rt_calloc(ctx, (size_t)e->count, sizeof(double));
    if (!e->in || !e->values) {
        elem_free(ctx, e);
        return nx_rt_nomem(ctx, "morphology: structuring element", (size_t)e->count * 9);
    }
    e->has_values = sv != NULL;
    e->flat_box = !sv;
    for (int64_t k = 0; k < e->count; k++) {
        int64_t src = dilate ? mirrored(e, k) : k;
        if (fp && isnan(fp[src])) {
            elem_free(ctx, e);
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                               "%s: footprint element %lld is NaN; expected 0 or nonzero", who,
                               (long long)src);
        }
        e->in[k] = fp ? fp[src] != 0 : 1;
        if (!e->in[k])
            e->flat_box = false;
        if (sv) {
            if (e->in[k] && !isfinite(sv[src])) {
                elem_free(ctx, e);
                return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                                   "%s: structure element %lld is %g; expected a finite value "
                                   "(leave a place out with the footprint instead)",
                                   who, (long long)src, sv[src]);
            }
            e->values[k] = dilate ? sv[src] : -sv[src];
        }
    }
    int64_t n_in = 0;
    for (int64_t k = 0; k < e->count; k++)
        n_in += e->in[k];
    if (n_in == 0) {
        elem_free(ctx, e);
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: the footprint is all zero; expected at least one place in it "
                           "(scipy refuses it too)",
                           who);
    }
    return NX_OK;
}

/* Resolves the element of opts for an op (dilation reflects it, erosion does not). */
static nx_status elem_resolve(nx_ctx *ctx, const char *who, const nx_morph_opts *o, int nsp,
                              bool dilate, morph_elem *e)
{
    memset(e, 0, sizeof *e);
    e->nsp = nsp;
    nx_status st = elem_shape(ctx, who, o, nsp, e);
    if (st != NX_OK)
        return st;
    nx_tensor *fp = NULL, *sv = NULL;
    if (o->footprint)
        st = as_f64(ctx, who, "footprint", o->footprint, nsp, &fp);
    if (st == NX_OK && o->structure) {
        nx_dtype d = nx_tensor_dtype(o->structure);
        if (d != NX_DTYPE_F32 && d != NX_DTYPE_F64)
            st = nx_rt_error(ctx, NX_ERR_DTYPE, "%s: structure is %s; expected f32 or f64", who,
                             nx_dtype_name(d));
        else
            st = as_f64(ctx, who, "structure", o->structure, nsp, &sv);
    }
    if (st == NX_OK)
        st = elem_fill(ctx, who, dilate, fp ? nx_tensor_data(fp) : NULL,
                       sv ? nx_tensor_data(sv) : NULL, e);
    nx_tensor_free(fp);
    nx_tensor_free(sv);
    return st;
}

static nx_status check_opts(nx_ctx *ctx, const char *who, const nx_morph_opts *o, int ndim,
                            int *nsp)
{
    if (o->nspatial < 0 || o->nspatial > NX_MORPH_MAX_SPATIAL)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: nspatial is %d; expected 0..%d", who,
                           o->nspatial, NX_MORPH_MAX_SPATIAL);
    *nsp = o->nspatial ? o->nspatial : ndim;
    if (*nsp < 1 || *nsp > NX_MORPH_MAX_SPATIAL || *nsp > ndim)
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "%s: x has %d dims and %d are spatial; expected 1..%d spatial dims "
                           "within x's",
                           who, ndim, *nsp, NX_MORPH_MAX_SPATIAL);
    if ((unsigned)o->border >= NX_MORPH_BORDER_COUNT)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: border %d is not an nx_morph_border", who,
                           (int)o->border);
    if (o->padding != NX_MORPH_SAME && o->padding != NX_MORPH_VALID)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: padding %d; expected SAME or VALID", who,
                           (int)o->padding);
    if (o->border == NX_MORPH_BORDER_CONSTANT && isnan(o->cval))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: cval is NaN; expected a number", who);
    return NX_OK;
}

/* One 1-D pass of a flat box along axis: pad that axis alone, then the elementwise max (min) of
 * the w shifted slices, folded left to right so ties keep the first (maximum's adjoint sends a
 * tie to its left operand). Elementwise slices, not a window fold: the CPU backend fuses the
 * passes into one vectorised loop, where a window reduction per axis runs as a scalar loop. */
static nx_node box_pass(nx_graph *g, nx_node x, int axis, int64_t w, bool dilate,
                        const nx_morph_opts *o)
{
    int nd = nx_node_ndim(g, x);
    int64_t lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0}, shape[NX_MAX_DIMS];
    if (o->padding == NX_MORPH_SAME) {
        int64_t half = w / 2, rest = w - 1 - half;
        lo[axis] = dilate ? rest : half;
        hi[axis] = dilate ? half : rest;
        x = nx_pad(g, x, lo, hi, border_pad[o->border], o->cval);
    }
    if (!x || !nx_node_shape(g, x, shape))
        return NX_NONE;
    int64_t n = shape[axis] - w + 1;
    if (n < 1)
        return nx_ir_graph_failf(
            g, NX_ERR_SHAPE,
            "nx_morph_node: VALID with an element of extent %lld on an axis of "
            "%lld; expected an element no larger than the image",
            (long long)w, (long long)shape[axis]);
    nx_node y = NX_NONE;
    for (int64_t k = 0; k < w; k++) {
        int64_t start[NX_MAX_DIMS] = {0}, stop[NX_MAX_DIMS];
        memcpy(stop, shape, (size_t)nd * sizeof(int64_t));
        start[axis] = k;
        stop[axis] = k + n;
        nx_node s = nx_slice(g, x, start, stop, NULL);
        y = k == 0 ? s : dilate ? nx_maximum(g, y, s) : nx_minimum(g, y, s);
    }
    return y;
}

/* One 1-D pass of a flat box along axis as a window fold: the padded axis viewed as windows of
 * extent w and folded by MAX (MIN), a reduction loop whose kernel does not grow with w. The fold
 * is a kernel of its own (its consumer is the next pass's pad or slice), so the passes before it
 * are computed once, not once per window place. Ties keep the first winner (the fold's adjoint). */
static nx_node fold_pass(nx_graph *g, nx_node x, int axis, int64_t w, bool dilate,
                         const nx_morph_opts *o)
{
    int nd = nx_node_ndim(g, x);
    int64_t lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0}, win[NX_MAX_DIMS], shape[NX_MAX_DIMS];
    if (o->padding == NX_MORPH_SAME) {
        int64_t half = w / 2, rest = w - 1 - half;
        lo[axis] = dilate ? rest : half;
        hi[axis] = dilate ? half : rest;
        x = nx_pad(g, x, lo, hi, border_pad[o->border], o->cval);
    }
    if (!x || !nx_node_shape(g, x, shape))
        return NX_NONE;
    if (shape[axis] < w)
        return nx_ir_graph_failf(
            g, NX_ERR_SHAPE,
            "nx_morph_node: VALID with an element of extent %lld on an axis of "
            "%lld; expected an element no larger than the image",
            (long long)w, (long long)shape[axis]);
    int axes[NX_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        win[i] = i == axis ? w : 1;
        axes[i] = nd + i;
    }
    nx_node v = nx_window(g, x, win, NULL, NULL);
    return nx_reduce(g, v, nd, axes, dilate ? NX_MONOID_MAX : NX_MONOID_MIN, false);
}

/* One 1-D pass of a flat box along axis by van Herk / Gil-Werman: O(1) per place whatever w. The
 * padded axis (length L) is padded again with the fold's identity to a multiple of w and cut
 * into blocks of w; P is the running max (min) from each block's start, S from each block's end
 * (two scans). The window [i, i + w - 1] spans at most two blocks, so it is S[i] (its part in the
 * first) combined with P[i + w - 1] (its part in the second; the whole window when i starts a
 * block). Scans are library kernels: P and S are computed once, and the kernels around them do
 * not grow with w. Ties: the scans' adjoints send a tie within S to its last winner, within P
 * to its first, and a tie between S and P to S's (the earlier places). */
static nx_node line_pass(nx_graph *g, nx_node x, int axis, int64_t w, bool dilate,
                         const nx_morph_opts *o)
{
    int nd = nx_node_ndim(g, x);
    int64_t lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0}, shape[NX_MAX_DIMS];
    if (o->padding == NX_MORPH_SAME) {
        int64_t half = w / 2, rest = w - 1 - half;
        lo[axis] = dilate ? rest : half;
        hi[axis] = dilate ? half : rest;
        x = nx_pad(g, x, lo, hi, border_pad[o->border], o->cval);
    }
    if (!x || !nx_node_shape(g, x, shape))
        return NX_NONE;
    int64_t len = shape[axis], n = len - w + 1;
    if (n < 1)
        return nx_ir_graph_failf(
            g, NX_ERR_SHAPE,
            "nx_morph_node: VALID with an element of extent %lld on an axis of "
            "%lld; expected an element no larger than the image",
            (long long)w, (long long)len);
    int64_t nb = (len + w - 1) / w, extra = nb * w - len;
    if (extra > 0) {
        int64_t zero[NX_MAX_DIMS] = {0}, tail[NX_MAX_DIMS] = {0};
        tail[axis] = extra;
        x = nx_pad(g, x, zero, tail, NX_PAD_CONSTANT, dilate ? -INFINITY : INFINITY);
    }
    int64_t blocks[NX_MAX_DIMS + 1], full[NX_MAX_DIMS];
    for (int i = 0, j = 0; i < nd; i++) {
        full[i] = i == axis ? nb * w : shape[i];
        if (i == axis) {
            blocks[j++] = nb;
            blocks[j++] = w;
        } else {
            blocks[j++] = shape[i];
        }
    }
    nx_monoid m = dilate ? NX_MONOID_MAX : NX_MONOID_MIN;
    nx_node b = nx_reshape(g, x, nd + 1, blocks);
    nx_node p = nx_reshape(g, nx_scan(g, b, axis + 1, m, false), nd, full);
    nx_node s = nx_reshape(g, nx_scan(g, b, axis + 1, m, true), nd, full);
    int64_t start[NX_MAX_DIMS] = {0}, stop[NX_MAX_DIMS];
    memcpy(stop, shape, (size_t)nd * sizeof(int64_t));
    stop[axis] = n;
    nx_node ss = nx_slice(g, s, start, stop, NULL);
    start[axis] = w - 1;
    stop[axis] = w - 1 + n;
    nx_node pp = nx_slice(g, p, start, stop, NULL);
    return dilate ? nx_maximum(g, ss, pp) : nx_minimum(g, ss, pp);
}

/* How the passes of a flat box run. Unrolled passes (box_pass) fuse into their reader, which then
 * holds the product of their extents in loads: fine up to a 5^3 box (125 loads, one vectorised
 * loop on the CPU, the stencil tiles on CUDA), an explosion for larger ones or for open/close (the
 * second op reads the first's fused passes at each of its places: 5^3 * 5^3 loads for a 5^3
 * close, which LLVM does not finish compiling). So the
 * passes are unrolled only while the product over the whole chain (both ops of open/close) stays
 * within NX_MORPH_UNROLL_MAX; otherwise each pass is a kernel of its own: a window fold for
 * extents below NX_MORPH_LINE_MIN, van Herk from there on (measured crossovers: docs/morphology.md,
 * "Window size"). No kernel the compiler sees then grows with the element. */
#define NX_MORPH_UNROLL_MAX 125
#define NX_MORPH_LINE_MIN 32

static int64_t box_product(const morph_elem *e)
{
    int64_t p = 1;
    for (int i = 0; i < e->nsp; i++)
        p = p > NX_MORPH_UNROLL_MAX ? p : p * e->w[i];
    return p;
}

/* A flat box is separable: the max (min) over a box is the max over its last axis, then over the
 * one before, and so on (w_1 + .. + w_d instead of w_1 * .. * w_d per voxel), exactly, for every
 * border rule (each pads axis by axis) and for VALID. Folding the last axis first keeps the
 * first winner in C order of the whole window: each pass keeps its first winner, and the final
 * pass over the first axis picks the first row holding the maximum, so gradients go where the
 * window fold would send them (van Herk passes excepted, see line_pass). */
static nx_node box_separable(nx_graph *g, nx_node x, bool dilate, const morph_elem *e,
                             const nx_morph_opts *o, bool unroll)
{
    int lead = nx_node_ndim(g, x) - e->nsp;
    for (int i = e->nsp - 1; i >= 0; i--) {
        if (e->w[i] <= 1)
            continue;
        if (unroll)
            x = box_pass(g, x, lead + i, e->w[i], dilate, o);
        else if (e->w[i] < NX_MORPH_LINE_MIN)
            x = fold_pass(g, x, lead + i, e->w[i], dilate, o);
        else
            x = line_pass(g, x, lead + i, e->w[i], dilate, o);
    }
    return x;
}

/* One dilation or erosion of x (float) by a resolved element. */
static nx_node morph_once(nx_graph *g, nx_node x, bool dilate, const morph_elem *e,
                          const nx_morph_opts *o, bool unroll)
{
    int nd = nx_node_ndim(g, x), lead = nd - e->nsp;
    if (x == NX_NONE || lead < 0)
        return NX_NONE; /* an earlier builder failed (out of memory): its error is recorded */
    if (e->flat_box && !e->has_values)
        return box_separable(g, x, dilate, e, o, unroll);
    int64_t lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0}, win[NX_MAX_DIMS], wshape[NX_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        win[i] = wshape[i] = i < lead ? 1 : e->w[i - lead];
    for (int i = 0; i < e->nsp && o->padding == NX_MORPH_SAME; i++) {
        int64_t half = e->w[i] / 2, rest = e->w[i] - 1 - half;
        lo[lead + i] = dilate ? rest : half;
        hi[lead + i] = dilate ? half : rest;
    }
    nx_node xp = x;
    if (o->padding == NX_MORPH_SAME)
        xp = nx_pad(g, x, lo, hi, border_pad[o->border], o->cval);
    nx_dtype dt = nx_node_dtype(g, x);
    nx_node v = nx_window(g, xp, win, NULL, NULL);
    /* scipy rounds the element to x's dtype and adds in that dtype (f32 input: f32 sums). */
    if (e->has_values)
        v = nx_add(g, v, nx_cast(g, nx_constant(g, NX_DTYPE_F64, nd, wshape, e->values), dt));
    if (!e->flat_box) {
        nx_node in = nx_constant(g, NX_DTYPE_BOOL, nd, wshape, e->in);
        v = nx_select(g, in, v, nx_scalar(g, dt, dilate ? -INFINITY : INFINITY));
    }
    int axes[NX_MAX_DIMS];
    for (int i = 0; i < e->nsp; i++)
        axes[i] = nd + lead + i;
    v = nx_reduce(g, v, e->nsp, axes, dilate ? NX_MONOID_MAX : NX_MONOID_MIN, false);
    if (lead > 0) {
        /* Leading window axes have extent 1: drop them. */
        int64_t shape[NX_MAX_DIMS];
        if (!nx_node_shape(g, v, shape))
            return NX_NONE;
        int64_t out[NX_MAX_DIMS];
        for (int i = 0; i < nd; i++)
            out[i] = shape[i];
        v = nx_reshape(g, v, nd, out);
    }
    return v;
}

static const nx_morph_opts default_opts = {0};

/* The context's last message, recorded as the graph's error (builders report through the graph). */
static nx_node graph_fail(nx_graph *g, nx_status st)
{
    nx_ir_graph_fail(g, st, nx_ctx_last_error(nx_graph_ctx(g)));
    return NX_NONE;
}

nx_node nx_morph_node(nx_graph *g, nx_morph_op op, nx_node x, const nx_morph_opts *opts)
{
    static const char *who = "nx_morph_node";
    if (!g || !x || nx_graph_status(g) != NX_OK)
        return NX_NONE;
    nx_ctx *ctx = nx_graph_ctx(g);
    const nx_morph_opts *o = opts ? opts : &default_opts;
    if ((unsigned)op >= NX_MORPH_OP_COUNT)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG, "%s: op %d is not an nx_morph_op", who,
                                 (int)op);
    nx_dtype dt = nx_node_dtype(g, x);
    if (dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64)
        return nx_ir_graph_failf(g, NX_ERR_DTYPE, "%s: x is %s; expected f32 or f64 (cast first)",
                                 who, nx_dtype_name(dt));
    int nsp = 0;
    nx_status st = check_opts(ctx, who, o, nx_node_ndim(g, x), &nsp);
    if (st != NX_OK)
        return graph_fail(g, st);
    morph_elem dil, ero;
    if ((st = elem_resolve(ctx, who, o, nsp, true, &dil)) != NX_OK)
        return graph_fail(g, st);
    if ((st = elem_resolve(ctx, who, o, nsp, false, &ero)) != NX_OK) {
        elem_free(ctx, &dil);
        return graph_fail(g, st);
    }
    nx_node y = NX_NONE;
    int64_t chain = box_product(&dil);
    bool two = op == NX_MORPH_OPEN || op == NX_MORPH_CLOSE;
    bool unroll = two ? chain <= NX_MORPH_UNROLL_MAX / chain : chain <= NX_MORPH_UNROLL_MAX;
    switch (op) {
    case NX_MORPH_DILATE:
        y = morph_once(g, x, true, &dil, o, unroll);
        break;
    case NX_MORPH_ERODE:
        y = morph_once(g, x, false, &ero, o, unroll);
        break;
    case NX_MORPH_OPEN:
        y = morph_once(g, morph_once(g, x, false, &ero, o, unroll), true, &dil, o, unroll);
        break;
    default:
        y = morph_once(g, morph_once(g, x, true, &dil, o, unroll), false, &ero, o, unroll);
        break;
    }
    elem_free(ctx, &dil);
    elem_free(ctx, &ero);
    return y;
}

/* The median of a window of at most NX_MORPH_NET_MAX places: the slice of the padded image xp
 * at each place of the element (C order), and the middle rank of them by a selection network. */
static nx_node median_network(nx_graph *g, nx_node xp, const morph_elem *e, int lead, int n_in)
{
    int nd = nx_node_ndim(g, xp);
    int64_t shape[NX_MAX_DIMS], out[NX_MAX_DIMS];
    if (!xp || !nx_node_shape(g, xp, shape))
        return NX_NONE;
    for (int i = 0; i < nd; i++)
        out[i] = i < lead ? shape[i] : shape[i] - e->w[i - lead] + 1;
    for (int i = lead; i < nd; i++)
        if (out[i] < 1)
            return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                     "nx_median_node: VALID with an element of extent %lld on an "
                                     "axis of %lld; expected an element no larger than the image",
                                     (long long)e->w[i - lead], (long long)shape[i]);
    nx_node vals[NX_MORPH_NET_MAX];
    int k = 0;
    for (int64_t j = 0; j < e->count; j++) {
        if (e->in && !e->in[j])
            continue;
        int64_t start[NX_MAX_DIMS] = {0}, stop[NX_MAX_DIMS], r = j;
        for (int i = nd - 1; i >= lead; i--) {
            start[i] = r % e->w[i - lead];
            r /= e->w[i - lead];
        }
        for (int i = 0; i < nd; i++)
            stop[i] = start[i] + out[i];
        vals[k++] = nx_slice(g, xp, start, stop, NULL);
    }
    return nx_morph_select_rank(g, n_in, vals, n_in / 2);
}

/* The median by the IR's sort along one flattened window axis (the footprint's places picked
 * with a gather): the device form for large windows. It views every window at once (count values
 * per place). */
static nx_node median_sort(nx_graph *g, nx_node xp, const morph_elem *e, int nd,
                           const int64_t *win)
{
    nx_ctx *ctx = nx_graph_ctx(g);
    nx_node v = nx_window(g, xp, win, NULL, NULL);
    int64_t shape[NX_MAX_DIMS * 2];
    if (!v || !nx_node_shape(g, v, shape))
        return NX_NONE;
    shape[nd] = e->count;
    v = nx_reshape(g, v, nd + 1, shape);
    int64_t k = e->count;
    if (e->in && !e->flat_box) {
        int64_t *idx = nx_rt_alloc(ctx, (size_t)e->count * sizeof(int64_t));
        if (!idx)
            return nx_ir_graph_failf(g, NX_ERR_NOMEM, "nx_median_node: out of memory");
        k = 0;
        for (int64_t j = 0; j < e->count; j++)
            if (e->in[j])
                idx[k++] = j;
        v = nx_gather(g, v, nx_constant(g, NX_DTYPE_I64, 1, &k, idx), nd);
        nx_rt_free(ctx, idx, (size_t)e->count * sizeof(int64_t));
    }
    v = nx_sort(g, v, nd, false);
    int64_t start[NX_MAX_DIMS] = {0}, stop[NX_MAX_DIMS];
    memcpy(stop, shape, (size_t)nd * sizeof(int64_t));
    start[nd] = k / 2;
    stop[nd] = k / 2 + 1;
    return nx_reshape(g, nx_slice(g, v, start, stop, NULL), nd, shape);
}

/* The median over each window: the element of rank count / 2 (scipy's median_filter rank, the
 * upper median for even counts). Windows of at most NX_MORPH_NET_MAX places take a selection
 * network (one fused loop); larger ones the selection extern (median-select.c), linear in the
 * window, except on the cuda backend, which sorts each window with the IR's sort (the extern has
 * no device code). */
nx_node nx_median_node(nx_graph *g, nx_node x, const nx_morph_opts *opts)
{
    static const char *who = "nx_median_node";
    if (!g || !x || nx_graph_status(g) != NX_OK)
        return NX_NONE;
    nx_ctx *ctx = nx_graph_ctx(g);
    const nx_morph_opts *o = opts ? opts : &default_opts;
    nx_dtype dt = nx_node_dtype(g, x);
    if (dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64)
        return nx_ir_graph_failf(g, NX_ERR_DTYPE, "%s: x is %s; expected f32 or f64", who,
                                 nx_dtype_name(dt));
    if (o->structure)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                 "%s: a structure has no meaning for a median; give a footprint",
                                 who);
    int nsp = 0, nd = nx_node_ndim(g, x);
    nx_status st = check_opts(ctx, who, o, nd, &nsp);
    morph_elem e;
    if (st != NX_OK || (st = elem_resolve(ctx, who, o, nsp, false, &e)) != NX_OK)
        return graph_fail(g, st);
    int lead = nd - nsp;
    int64_t lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0}, win[NX_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        win[i] = i < lead ? 1 : e.w[i - lead];
    for (int i = 0; i < nsp && o->padding == NX_MORPH_SAME; i++) {
        lo[lead + i] = e.w[i] / 2;
        hi[lead + i] = e.w[i] - 1 - e.w[i] / 2;
    }
    nx_node xp =
        o->padding == NX_MORPH_SAME ? nx_pad(g, x, lo, hi, border_pad[o->border], o->cval) : x;
    int64_t n_in = e.count;
    if (e.in) {
        n_in = 0;
        for (int64_t j = 0; j < e.count; j++)
            n_in += e.in[j];
    }
    nx_node y = NX_NONE;
    if (n_in <= NX_MORPH_NET_MAX)
        y = median_network(g, xp, &e, lead, (int)n_in);
    else if (o->backend != NX_BACKEND_CUDA)
        y = nx_morph_median_select(g, xp, lead, nsp, e.w, e.in);
    else
        y = median_sort(g, xp, &e, nd, win);
    elem_free(ctx, &e);
    return y;
}
