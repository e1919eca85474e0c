/* Max pooling with indices and max unpooling (PyTorch's max_pool{1,2,3}d with return_indices and
 * max_unpool{1,2,3}d), channels-last, as graph fragments:
 *
 *   pool    pad with -inf, a strided window view, a MAX and an ARGMAX fold over the flattened
 *           window; the window place becomes the flat spatial index with integer arithmetic.
 *           Autodiff of the MAX fold sends each cotangent to the ARGMAX winner, so the gradient
 *           goes exactly where the indices point.
 *   unpool  y[s] = x[w(s)] with w(s) the last source (in C order) whose index is s: a scatter-max
 *           of source positions, then a gather of x. The adjoint of the gather is the scatter of
 *           dy back to w(s): for distinct indices that is dx = dy[indices], PyTorch's gather.
 * The entry points take CUDA device tensors when the program runs on the cuda backend (results
 * stay on the device when every input is there), except the unpool's indices, whose range check
 * reads them on the host. */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "ir/ir.h"
#include "nitrix-graph.h"
#include "morph.h"
#include "nitrix-ops.h"

typedef struct pool_geo {
    int nd, nsp, lead; /* x's dims, spatial dims, first spatial axis */
    int64_t k[NX_POOL_MAX_SPATIAL], st[NX_POOL_MAX_SPATIAL], p[NX_POOL_MAX_SPATIAL];
    int64_t in[NX_POOL_MAX_SPATIAL], out[NX_POOL_MAX_SPATIAL];
    int64_t kk, ns; /* places of a window, of the unpooled spatial dims (products checked) */
} pool_geo;

static nx_status geo_overflow(nx_ctx *ctx, const char *who, const char *option, int i)
{
    char what[96];
    snprintf(what, sizeof what, "%s on spatial dim %d", option, i);
    return nx_rt_size_error(ctx, who, what,
                            "kernel, stride, padding and output_size whose sizes and products "
                            "stay below 2^63");
}

/* Checks opts against x's (pool) or the pooled x's (unpool) shape and fills the geometry. The
 * message goes to the context; the caller records it where it reports. */
static nx_status geo_of(nx_ctx *ctx, const char *who, const nx_pool_opts *o, int nd,
                        const int64_t *shape, bool unpool, pool_geo *g)
{
    memset(g, 0, sizeof *g);
    if (o->nspatial < 1 || o->nspatial > NX_POOL_MAX_SPATIAL)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: nspatial is %d; expected 1..%d", who,
                           o->nspatial, NX_POOL_MAX_SPATIAL);
    g->nd = nd;
    g->nsp = o->nspatial;
    g->lead = nd - 1 - g->nsp;
    if (g->lead < 0)
        return nx_rt_error(
            ctx, NX_ERR_SHAPE,
            "%s: x has %d dims; expected at least %d (%d spatial and a channel axis, "
            "channels last)",
            who, nd, g->nsp + 1, g->nsp);
    g->kk = g->ns = 1;
    for (int i = 0; i < g->nsp; i++) {
        nx_rt_size z = {0};
        int64_t k = o->kernel[i], st = o->stride[i] ? o->stride[i] : k, p = o->padding[i];
        if (k < 1 || st < 1)
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                               "%s: kernel %lld, stride %lld on spatial dim %d; expected kernel "
                               ">= 1 and stride >= 1 (0: the kernel)",
                               who, (long long)k, (long long)o->stride[i], i);
        if (p < 0 || p > k / 2)
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                               "%s: padding %lld on spatial dim %d; expected 0..%lld (at most "
                               "half the kernel, as PyTorch)",
                               who, (long long)p, i, (long long)(k / 2));
        g->k[i] = k, g->st[i] = st, g->p[i] = p;
        int64_t s = shape[g->lead + i];
        if (unpool) {
            g->out[i] = s;
            int64_t want = nx_rt_size_add(
                &z, nx_rt_size_sub(&z, nx_rt_size_mul(&z, s - 1, st), 2 * p), k);
            if (z.overflow && !o->output_size[i])
                return geo_overflow(ctx, who, "kernel or stride", i);
            g->in[i] = o->output_size[i] ? o->output_size[i] : want;
            if (g->in[i] < 1)
                return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                                   "%s: output size %lld on spatial dim %d; expected >= 1", who,
                                   (long long)g->in[i], i);
        } else {
            g->in[i] = s;
            int64_t padded = nx_rt_size_add(&z, s, 2 * p); /* 2 p <= k fits */
            if (z.overflow)
                return geo_overflow(ctx, who, "padding", i);
            if (padded < k)
                return nx_rt_error(ctx, NX_ERR_SHAPE,
                                   "%s: spatial dim %d is %lld (padded %lld) but the kernel is "
                                   "%lld; expected a kernel no larger than the padded input",
                                   who, i, (long long)s, (long long)padded, (long long)k);
            g->out[i] = (padded - k) / st + 1;
        }
        z.overflow = false;
        g->kk = nx_rt_size_mul(&z, g->kk, k);
        if (z.overflow)
            return geo_overflow(ctx, who, "kernel", i);
        g->ns = nx_rt_size_mul(&z, g->ns, g->in[i]);
        if (z.overflow)
            return geo_overflow(ctx, who, unpool ? "output_size" : "the input", i);
    }
    return NX_OK;
}

static nx_node fail_from_ctx(nx_graph *g, nx_status st)
{
    nx_ir_graph_fail(g, st, nx_ctx_last_error(nx_graph_ctx(g)));
    return NX_NONE;
}

static nx_node i64(nx_graph *g, int64_t v)
{
    return nx_scalar(g, NX_DTYPE_I64, (double)v);
}

static bool empty_batch(const pool_geo *ge, const int64_t *xs)
{
    int64_t n = xs[ge->nd - 1];
    for (int i = 0; i < ge->lead; i++)
        n *= xs[i];
    return n == 0;
}

/* The flat spatial index of each winner from its place am in the flattened window, and the
 * first in-image place of each window (the index when every value is -inf). */
static void winner_index(nx_graph *g, const pool_geo *ge, nx_node am, const int64_t *oshape,
                         nx_node *flat, nx_node *first)
{
    nx_node f = i64(g, 0), f0 = i64(g, 0);
    int64_t k_after = 1, s_after = 1;
    for (int i = ge->nsp - 1; i >= 0; i--) {
        nx_node kd = nx_mod(g, nx_div(g, am, i64(g, k_after)), i64(g, ge->k[i]));
        nx_node od = nx_iota(g, NX_DTYPE_I64, ge->nd, oshape, ge->lead + i);
        nx_node start = nx_sub(g, nx_mul(g, od, i64(g, ge->st[i])), i64(g, ge->p[i]));
        f = nx_add(g, f, nx_mul(g, nx_add(g, start, kd), i64(g, s_after)));
        f0 = nx_add(g, f0, nx_mul(g, nx_maximum(g, start, i64(g, 0)), i64(g, s_after)));
        k_after *= ge->k[i];
        s_after *= ge->in[i];
    }
    *flat = f;
    *first = f0;
}

nx_node nx_max_pool_node(nx_graph *g, nx_node x, const nx_pool_opts *opts, nx_node *indices)
{
    static const char *who = "nx_max_pool_node";
    if (indices)
        *indices = NX_NONE;
    if (!g || !x || nx_graph_status(g) != NX_OK)
        return NX_NONE;
    if (!opts)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG, "%s: opts is NULL", who);
    nx_dtype dt = nx_node_dtype(g, x);
    if (dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64)
        return nx_ir_graph_failf(g, NX_ERR_DTYPE, "%s: x is %s; expected f32 or f64", who,
                                 nx_dtype_name(dt));
    int64_t xs[NX_MAX_DIMS];
    nx_node_shape(g, x, xs);
    pool_geo ge;
    nx_status st = geo_of(nx_graph_ctx(g), who, opts, nx_node_ndim(g, x), xs, false, &ge);
    if (st != NX_OK)
        return fail_from_ctx(g, st);
    int nd = ge.nd;
    int64_t lo[NX_MAX_DIMS] = {0}, win[NX_MAX_DIMS], stride[NX_MAX_DIMS], oshape[NX_MAX_DIMS + 1];
    for (int i = 0; i < nd; i++) {
        win[i] = stride[i] = 1;
        oshape[i] = xs[i];
    }
    int64_t kk = ge.kk;
    for (int i = 0; i < ge.nsp; i++) {
        lo[ge.lead + i] = ge.p[i];
        win[ge.lead + i] = ge.k[i];
        stride[ge.lead + i] = ge.st[i];
        oshape[ge.lead + i] = ge.out[i];
    }
    if (empty_batch(&ge, xs)) { /* no window to view: empty results of the pooled shape */
        if (indices)
            *indices = nx_broadcast(g, i64(g, 0), nd, oshape);
        return nx_broadcast(g, nx_scalar(g, dt, 0), nd, oshape);
    }
    nx_node xp = nx_pad(g, x, lo, lo, NX_PAD_CONSTANT, -INFINITY);
    nx_node v = nx_window(g, xp, win, stride, NULL);
    oshape[nd] = kk;
    v = nx_reshape(g, v, nd + 1, oshape);
    nx_node vals = nx_reduce(g, v, 1, &nd, NX_MONOID_MAX, false);
    if (indices) {
        nx_node am = nx_reduce(g, v, 1, &nd, NX_MONOID_ARGMAX, false), flat, first;
        winner_index(g, &ge, am, oshape, &flat, &first);
        nx_node none = nx_eq(g, vals, nx_scalar(g, dt, -INFINITY));
        *indices = nx_select(g, none, first, flat);
        if (nx_graph_status(g) != NX_OK)
            *indices = NX_NONE;
    }
    return vals;
}

nx_node nx_max_unpool_node(nx_graph *g, nx_node x, nx_node indices, const nx_pool_opts *opts)
{
    static const char *who = "nx_max_unpool_node";
    if (!g || !x || !indices || nx_graph_status(g) != NX_OK)
        return NX_NONE;
    if (!opts)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG, "%s: opts is NULL", who);
    nx_dtype dt = nx_node_dtype(g, x), it = nx_node_dtype(g, indices);
    if (dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64)
        return nx_ir_graph_failf(g, NX_ERR_DTYPE, "%s: x is %s; expected f32 or f64", who,
                                 nx_dtype_name(dt));
    if (it != NX_DTYPE_I64 && it != NX_DTYPE_I32)
        return nx_ir_graph_failf(g, NX_ERR_DTYPE, "%s: indices are %s; expected i64 or i32", who,
                                 nx_dtype_name(it));
    int64_t xs[NX_MAX_DIMS], is[NX_MAX_DIMS];
    int nd = nx_node_ndim(g, x);
    nx_node_shape(g, x, xs);
    nx_node_shape(g, indices, is);
    if (nx_node_ndim(g, indices) != nd || memcmp(xs, is, (size_t)nd * sizeof(int64_t)) != 0)
        return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                 "%s: indices and x differ in shape; expected "
                                 "one shape (the pool's outputs)",
                                 who);
    pool_geo ge;
    nx_status st = geo_of(nx_graph_ctx(g), who, opts, nd, xs, true, &ge);
    if (st != NX_OK)
        return fail_from_ctx(g, st);
    /* nb, no and nc are x's (a product of its extents fits); ny is the output's, checked */
    int64_t nb = 1, no = 1, nc = xs[nd - 1], ns = ge.ns, yshape[NX_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        yshape[i] = xs[i];
    for (int i = 0; i < ge.lead; i++)
        nb *= xs[i];
    for (int i = 0; i < ge.nsp; i++) {
        no *= ge.out[i];
        yshape[ge.lead + i] = ge.in[i];
    }
    nx_rt_size z = {0};
    int64_t n = nb * no * nc, ny = nx_rt_size_mul(&z, nx_rt_size_mul(&z, nb, ns), nc);
    if (z.overflow) {
        nx_rt_size_error(nx_graph_ctx(g), who, "output_size",
                         "an output whose element count stays below 2^63");
        return fail_from_ctx(g, NX_ERR_INVALID_ARG);
    }
    if (n == 0 || ny == 0)
        return nx_broadcast(g, nx_scalar(g, dt, 0), nd, yshape);
    int64_t bsc[3] = {nb, no, nc};
    nx_node idx = nx_reshape(g, nx_cast(g, indices, NX_DTYPE_I64), 3, bsc);
    nx_node ok = nx_and(g, nx_ge(g, idx, i64(g, 0)), nx_lt(g, idx, i64(g, ns)));
    nx_node b = nx_iota(g, NX_DTYPE_I64, 3, bsc, 0), ch = nx_iota(g, NX_DTYPE_I64, 3, bsc, 2);
    nx_node target = nx_add(g, nx_mul(g, nx_add(g, nx_mul(g, b, i64(g, ns)), idx), i64(g, nc)), ch);
    target = nx_reshape(g, nx_select(g, ok, target, i64(g, -1)), 1, &n);
    /* w(s): the last source writing s (scatter-max of source positions over -1) */
    nx_node src = nx_iota(g, NX_DTYPE_I64, 1, &n, 0);
    nx_node w = nx_scatter(g, nx_broadcast(g, i64(g, -1), 1, &ny), target, src, 0, NX_MONOID_MAX);
    nx_node xf = nx_reshape(g, x, 1, &n);
    nx_node y = nx_gather(g, xf, nx_maximum(g, w, i64(g, 0)), 0);
    y = nx_select(g, nx_ge(g, w, i64(g, 0)), y, nx_scalar(g, dt, 0));
    return nx_reshape(g, y, nd, yshape);
}

/* Indices outside the unpooled plane are an error on tensors (the node drops them). The check
 * reads them on the host, so device indices are refused rather than copied behind the caller's
 * back. */
nx_status nx_morph_pool_check_indices(nx_ctx *ctx, const char *who, const nx_tensor *x,
                                      const nx_tensor *indices, const nx_pool_opts *o)
{
    if (nx_tensor_device(indices) != NX_DEVICE_HOST)
        return nx_rt_error(ctx, NX_ERR_UNSUPPORTED,
                           "%s: indices is a device tensor; the range check of the indices reads "
                           "them on the host: pass host indices",
                           who);
    pool_geo ge;
    nx_status st = geo_of(ctx, who, o, nx_tensor_ndim(x), nx_tensor_shape(x), true, &ge);
    if (st != NX_OK)
        return st;
    int64_t ns = ge.ns;
    nx_tensor *t = NULL;
    if ((st = nx_tensor_cast(indices, NX_DTYPE_I64, &t)) != NX_OK)
        return st;
    const int64_t *v = nx_tensor_data(t);
    for (int64_t i = 0; i < nx_tensor_numel(t) && st == NX_OK; i++)
        if (v[i] < 0 || v[i] >= ns)
            st =
                nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                            "%s: indices element %lld is %lld; expected 0..%lld (the flat index "
                            "into the %lld places of the output's spatial dims)",
                            who, (long long)i, (long long)v[i], (long long)(ns - 1), (long long)ns);
    nx_tensor_free(t);
    return st;
}
