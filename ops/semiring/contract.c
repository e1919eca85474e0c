/* Dense contractions under a semiring: the channels-last convolution's geometry and graph builder
 * (the ops are semiring-matmul.c and semiring-conv.c; the matmul's builder is frontend/semiring.c).
 *
 * The convolution is a window view, no im2col buffer. nx_window keeps a window axis for every
 * input axis, so to stay within NX_MAX_DIMS with 3 spatial dims the batch dims are moved next to
 * the channels and merged with them ([s.., b*c]); the window then adds d + 1 axes, and the taps
 * (w.., c) are merged into one fold axis in the kernel's own C order. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cache.h"
#include "semiring.h"

/* ---- convolution: geometry -------------------------------------------------------------------*/

typedef struct conv_geom {
    int d, nb;     /* spatial dims, batch dims */
    int64_t batch; /* product of the batch dims */
    int64_t s[3], w[3], st[3], dil[3], lo[3], hi[3], o[3];
    int64_t cin, cout;
} conv_geom;

static nx_status conv_fail(nx_graph *g, nx_status st, const char *fmt, ...) NX_PRINTF(3, 4);

static nx_status conv_fail(nx_graph *g, nx_status st, const char *fmt, ...)
{
    char msg[NX_IR_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    nx_ir_graph_fail(g, st, msg);
    return st;
}

/* An option whose size overflows, through the one helper's message (nx_rt_size_error). */
static nx_status conv_size_fail(nx_graph *g, const char *option, int dim)
{
    char what[96];
    snprintf(what, sizeof what, "%s of spatial dim %d", option, dim);
    nx_status st = nx_rt_size_error(nx_graph_ctx(g), "nx_semiring_conv", what,
                                    "a padded extent and a dilated kernel span below 2^63");
    nx_ir_graph_fail(g, st, nx_ctx_last_error(nx_graph_ctx(g)));
    return st;
}

static nx_status conv_geometry(nx_graph *g, nx_node x, nx_node k, const nx_semiring_conv_opts *o,
                               conv_geom *cg)
{
    int nx_ = nx_node_ndim(g, x), nk = nx_node_ndim(g, k);
    int64_t xs[NX_MAX_DIMS], ks[NX_MAX_DIMS];
    nx_node_shape(g, x, xs);
    nx_node_shape(g, k, ks);
    memset(cg, 0, sizeof *cg);
    cg->d = o && o->nspatial ? o->nspatial : nk - 2;
    int d = cg->d;
    if (d < 1 || d > 3 || nk != d + 2)
        return conv_fail(g, NX_ERR_SHAPE,
                         "nx_semiring_conv: kernel has %d dims for %d spatial dims; expected "
                         "[w_1..w_d, c_in, c_out] with d = 1..3",
                         nk, d);
    if (nx_ < d + 1)
        return conv_fail(g, NX_ERR_SHAPE,
                         "nx_semiring_conv: x has %d dims; expected [..., s_1..s_%d, c_in]", nx_,
                         d);
    cg->nb = nx_ - d - 1;
    cg->cin = xs[nx_ - 1];
    cg->cout = ks[d + 1];
    if (ks[d] != cg->cin)
        return conv_fail(g, NX_ERR_SHAPE,
                         "nx_semiring_conv: x has %lld channels but the kernel expects %lld "
                         "(c_in differs)",
                         (long long)cg->cin, (long long)ks[d]);
    cg->batch = 1;
    for (int i = 0; i < cg->nb; i++)
        cg->batch *= xs[i];
    for (int i = 0; i < nx_; i++)
        if (xs[i] == 0)
            return conv_fail(g, NX_ERR_SHAPE,
                             "nx_semiring_conv: x has an empty axis (dim %d of %d); expected "
                             "nonempty batch, spatial and channel axes",
                             i, nx_);
    for (int i = 0; i < nk; i++)
        if (ks[i] == 0)
            return conv_fail(g, NX_ERR_SHAPE,
                             "nx_semiring_conv: kernel has an empty axis (dim %d of %d)", i, nk);
    for (int i = 0; i < d; i++) {
        cg->s[i] = xs[cg->nb + i];
        cg->w[i] = ks[i];
        cg->st[i] = o && o->stride[i] ? o->stride[i] : 1;
        cg->dil[i] = o && o->dilation[i] ? o->dilation[i] : 1;
        if (cg->st[i] < 1 || cg->dil[i] < 1)
            return conv_fail(g, NX_ERR_INVALID_ARG,
                             "nx_semiring_conv: spatial dim %d has stride %lld and dilation "
                             "%lld; expected >= 1 (0 means 1)",
                             i, (long long)cg->st[i], (long long)cg->dil[i]);
        /* Sizes from the options are checked (nx_rt_size): a huge stride, dilation or padding
         * is an error naming it, never a wrapped extent. */
        nx_rt_size z = {0};
        int64_t eff = nx_rt_size_add(&z, nx_rt_size_mul(&z, cg->w[i] - 1, cg->dil[i]), 1);
        if (z.overflow)
            return conv_size_fail(g, "dilation", i);
        nx_conv_padding pm = o ? o->padding : NX_CONV_SAME;
        if (pm == NX_CONV_SAME) {
            /* ceil(s / st) without s + st - 1, which overflows for a huge stride */
            int64_t out = cg->s[i] / cg->st[i] + (cg->s[i] % cg->st[i] != 0);
            int64_t total = nx_rt_size_sub(
                &z, nx_rt_size_add(&z, nx_rt_size_mul(&z, out - 1, cg->st[i]), eff), cg->s[i]);
            if (z.overflow)
                return conv_size_fail(g, "stride or dilation", i);
            total = total > 0 ? total : 0;
            cg->lo[i] = total / 2;
            cg->hi[i] = total - cg->lo[i];
        } else if (pm == NX_CONV_EXPLICIT) {
            cg->lo[i] = o->pad_lo[i];
            cg->hi[i] = o->pad_hi[i];
            if (cg->lo[i] < 0 || cg->hi[i] < 0)
                return conv_fail(g, NX_ERR_INVALID_ARG,
                                 "nx_semiring_conv: padding (%lld, %lld) on spatial dim %d; "
                                 "expected >= 0",
                                 (long long)cg->lo[i], (long long)cg->hi[i], i);
        } else if (pm != NX_CONV_VALID) {
            return conv_fail(g, NX_ERR_INVALID_ARG,
                             "nx_semiring_conv: padding mode %d; expected SAME, VALID or "
                             "EXPLICIT",
                             (int)pm);
        }
        int64_t padded = nx_rt_size_add(&z, nx_rt_size_add(&z, cg->s[i], cg->lo[i]), cg->hi[i]);
        if (z.overflow)
            return conv_size_fail(g, "pad_lo or pad_hi", i);
        if (padded < eff)
            return conv_fail(g, NX_ERR_SHAPE,
                             "nx_semiring_conv: spatial dim %d is %lld after padding but the "
                             "dilated kernel spans %lld",
                             i, (long long)padded, (long long)eff);
        cg->o[i] = (padded - eff) / cg->st[i] + 1;
    }
    return NX_OK;
}

/* ---- convolution: graph ----------------------------------------------------------------------*/

/* x [..., s.., c] -> [s.., b*c], padded with the identity. */
static nx_node conv_gather_batch(nx_graph *g, const nx_semiring *sr, nx_node x, const conv_geom *cg)
{
    int d = cg->d;
    int64_t shp[NX_MAX_DIMS];
    shp[0] = cg->batch;
    for (int i = 0; i < d; i++)
        shp[1 + i] = cg->s[i];
    shp[1 + d] = cg->cin;
    nx_node xb = nx_reshape(g, x, d + 2, shp);
    int perm[NX_MAX_DIMS];
    for (int i = 0; i < d; i++)
        perm[i] = 1 + i;
    perm[d] = 0;
    perm[d + 1] = d + 1;
    nx_node xp = nx_permute(g, xb, perm);
    for (int i = 0; i < d; i++)
        shp[i] = cg->s[i];
    shp[d] = cg->batch * cg->cin;
    nx_node xm = nx_reshape(g, xp, d + 1, shp);
    int64_t lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0};
    bool any = false;
    for (int i = 0; i < d; i++) {
        lo[i] = cg->lo[i];
        hi[i] = cg->hi[i];
        any = any || lo[i] || hi[i];
    }
    return any ? nx_pad(g, xm, lo, hi, NX_PAD_CONSTANT, sr->identity) : xm;
}

/* The direct form, when the window view and the kernel fit in NX_MAX_DIMS without merging axes:
 * x [(b,) s.., c] padded, windowed to [(b,) o.., c, (1,) w.., 1], permuted to
 * [(b,) o.., (1,) w.., c, 1], times k [w.., c, c_out] (broadcast from the left), folded over
 * (w.., c) in the kernel's C order. Every index is affine in the loop indices: no reshape sits
 * between the loads and the loops, so lowering emits no div/mod chains, which the merged form
 * below costs per tap. Needs 2 (d + 1 + has_batch) <= NX_MAX_DIMS. */
static nx_node conv_direct(nx_graph *g, const nx_semiring *sr, nx_node x, nx_node k,
                           const conv_geom *cg)
{
    int d = cg->d, hb = cg->nb > 0, n = d + 1 + hb;
    int64_t shp[NX_MAX_DIMS];
    if (cg->nb > 1) {
        shp[0] = cg->batch;
        for (int i = 0; i < d; i++)
            shp[1 + i] = cg->s[i];
        shp[1 + d] = cg->cin;
        x = nx_reshape(g, x, d + 2, shp);
    }
    int64_t lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0};
    int64_t win[NX_MAX_DIMS], str[NX_MAX_DIMS], dil[NX_MAX_DIMS];
    bool any = false;
    for (int i = 0; i < n; i++)
        win[i] = str[i] = dil[i] = 1;
    for (int i = 0; i < d; i++) {
        lo[hb + i] = cg->lo[i];
        hi[hb + i] = cg->hi[i];
        any = any || cg->lo[i] || cg->hi[i];
        win[hb + i] = cg->w[i];
        str[hb + i] = cg->st[i];
        dil[hb + i] = cg->dil[i];
    }
    nx_node xp = any ? nx_pad(g, x, lo, hi, NX_PAD_CONSTANT, sr->identity) : x;
    nx_node v = nx_window(g, xp, win, str, dil); /* [(b,) o.., c, (1,) w.., 1] */
    int perm[NX_MAX_DIMS], axes[NX_MAX_DIMS], j = 0;
    for (int i = 0; i < hb + d; i++)
        perm[j++] = i; /* (b,) o.. */
    for (int i = 0; i < hb + d; i++)
        perm[j++] = n + i; /* (1,) w.. */
    perm[j++] = hb + d;    /* c */
    perm[j++] = 2 * n - 1; /* the channel's unit window axis, against c_out */
    v = nx_permute(g, v, perm);
    for (int i = 0; i <= d; i++)
        axes[i] = 2 * hb + d + i; /* w.., c */
    nx_node y = nx_semiring_reduce(g, sr, nx_semiring_times(g, sr, v, k), d + 1, axes);
    /* [(b,) o.., (1,) c_out] -> [(b,) o.., c_out] */
    int64_t out[NX_MAX_DIMS];
    int nb = 0;
    if (hb)
        out[nb++] = cg->batch;
    for (int i = 0; i < d; i++)
        out[nb + i] = cg->o[i];
    out[nb + d] = cg->cout;
    return hb ? nx_reshape(g, y, nb + d + 1, out) : y;
}

nx_node nx_semiring_conv_node(nx_graph *g, const nx_semiring *sr, nx_node x, nx_node k,
                              const nx_semiring_conv_opts *opts)
{
    if (!g || !x || !k)
        return NX_NONE;
    if (!sr)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG, "nx_semiring_conv: semiring is NULL");
    if (nx_node_dtype(g, x) != nx_node_dtype(g, k))
        return nx_ir_graph_failf(g, NX_ERR_DTYPE, "nx_semiring_conv: x is %s but kernel is %s",
                                 nx_dtype_name(nx_node_dtype(g, x)),
                                 nx_dtype_name(nx_node_dtype(g, k)));
    conv_geom cg;
    if (conv_geometry(g, x, k, opts, &cg) != NX_OK)
        return NX_NONE;
    int d = cg.d;
    if (2 * (d + 1 + (cg.nb > 0)) <= NX_MAX_DIMS) {
        nx_node y = conv_direct(g, sr, x, k, &cg);
        if (!y || cg.nb <= 1)
            return y;
        int64_t xs[NX_MAX_DIMS], out[NX_MAX_DIMS];
        nx_node_shape(g, x, xs);
        for (int i = 0; i < cg.nb; i++)
            out[i] = xs[i];
        for (int i = 0; i < d; i++)
            out[cg.nb + i] = cg.o[i];
        out[cg.nb + d] = cg.cout;
        return nx_reshape(g, y, cg.nb + d + 1, out);
    }
    nx_node xm = conv_gather_batch(g, sr, x, &cg);
    int64_t win[NX_MAX_DIMS], str[NX_MAX_DIMS], dil[NX_MAX_DIMS];
    for (int i = 0; i < d; i++) {
        win[i] = cg.w[i];
        str[i] = cg.st[i];
        dil[i] = cg.dil[i];
    }
    win[d] = str[d] = dil[d] = 1;
    nx_node v = nx_window(g, xm, win, str, dil); /* [o.., b*c, w.., 1] */
    int64_t shp[NX_MAX_DIMS];
    int64_t taps = cg.cin;
    for (int i = 0; i < d; i++) {
        shp[i] = cg.o[i];
        shp[d + 2 + i] = cg.w[i];
        taps *= cg.w[i];
    }
    shp[d] = cg.batch;
    shp[d + 1] = cg.cin;
    v = nx_reshape(g, v, 2 * d + 2, shp); /* [o.., b, c, w..] */
    int perm[NX_MAX_DIMS];
    perm[0] = d;
    for (int i = 0; i < d; i++) {
        perm[1 + i] = i;
        perm[1 + d + i] = d + 2 + i;
    }
    perm[2 * d + 1] = d + 1;
    v = nx_permute(g, v, perm); /* [b, o.., w.., c] */
    shp[0] = cg.batch;
    for (int i = 0; i < d; i++)
        shp[1 + i] = cg.o[i];
    shp[d + 1] = taps;
    shp[d + 2] = 1;
    v = nx_reshape(g, v, d + 3, shp);
    int64_t kshp[2] = {taps, cg.cout};
    nx_node km = nx_reshape(g, k, 2, kshp);
    int axis = -2;
    nx_node y = nx_semiring_reduce(g, sr, nx_semiring_times(g, sr, v, km), 1, &axis);
    /* [b, o.., cout] -> [batch dims.., o.., cout] */
    int64_t xs[NX_MAX_DIMS], out[NX_MAX_DIMS];
    nx_node_shape(g, x, xs);
    for (int i = 0; i < cg.nb; i++)
        out[i] = xs[i];
    for (int i = 0; i < d; i++)
        out[cg.nb + i] = cg.o[i];
    out[cg.nb + d] = cg.cout;
    return nx_reshape(g, y, cg.nb + d + 1, out);
}

void nx_sr_key_conv(nx_rt_cache_blob *b, const nx_semiring_conv_opts *o)
{
    /* Field by field: the struct has padding bytes, and ignored fields must not split keys. */
    int64_t geo[2 + 4 * NX_CONV_MAX_SPATIAL];
    bool ex = o->padding == NX_CONV_EXPLICIT;
    geo[0] = o->nspatial;
    geo[1] = o->padding;
    for (int i = 0; i < NX_CONV_MAX_SPATIAL; i++) {
        geo[2 + i] = o->stride[i] ? o->stride[i] : 1;
        geo[5 + i] = o->dilation[i] ? o->dilation[i] : 1;
        geo[8 + i] = ex ? o->pad_lo[i] : 0;
        geo[11 + i] = ex ? o->pad_hi[i] : 0;
    }
    nx_rt_cache_blob_bytes(b, "conv", geo, sizeof geo);
}
