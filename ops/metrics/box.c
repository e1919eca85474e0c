/* Box sums and their transpose as graph fragments (box.h).
 *
 * B is separable: one pass per spatial axis, each a pad by r with the border rule followed by
 * the sum of 2r + 1 shifted slices of the padded line (an elementwise expression whose loads are
 * affine shifts of each other, as the Gaussian FIR's last pass; above SLICE_TAPS taps a window
 * fold, whose node count does not grow with the radius). A pass before the last is materialised
 * by a fold over a trailing unit axis, so that the next pass reads it from memory instead of
 * inlining k taps per tap (k^d loads per voxel).
 *
 * B^T = P^T W^T per axis: W^T is the full correlation (zero-pad by 2r, sum of 2r + 1 slices),
 * P^T folds each padded sample back onto the sample it was read from. For reflect, mirror and
 * wrap the padded positions map onto the line in runs of slope +1 or -1 (three runs when r is
 * below the extent, more when the border rule repeats), so P^T is a sum of zero-padded slices,
 * reversed where the slope is -1; nearest adds the sums of the two overhangs to the end
 * samples; constant drops them. Everything stays elementwise and movement: no scatter. */
#include <string.h>

#include "ops/metrics/box.h"
#include "ops/metrics/metrics.h"

/* Taps up to which a pass is a sum of slices; wider windows fold a window view. */
#define SLICE_TAPS 33

nx_status nx_metric_box_plan(const nx_op_args *c, int nd, const int64_t *shape,
                             int64_t spatial_rank, const int64_t *radius, int nradius, int mode,
                             nx_metric_box *b)
{
    memset(b, 0, sizeof *b);
    int64_t nsp = spatial_rank ? spatial_rank : (nd < 3 ? nd : 3);
    if (nd < 1 || nsp < 1 || nsp > nd)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: the images have rank %d and spatial_rank is %lld; expected "
                           "1 <= spatial_rank <= rank (0: min(rank, 3))",
                           c->who, nd, (long long)spatial_rank);
    if ((unsigned)mode >= NX_BORDER_COUNT)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: mode %d is not an nx_border; expected reflect, constant, "
                           "nearest, mirror or wrap",
                           c->who, mode);
    if (nradius != 1 && nradius != nsp)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: radius has %d values; expected 1 or %lld (one per spatial axis)",
                           c->who, nradius, (long long)nsp);
    b->nd = nd;
    b->nsp = (int)nsp;
    b->lead = nd - (int)nsp;
    b->mode = (nx_border)mode;
    b->count = 1;
    memcpy(b->shape, shape, (size_t)nd * sizeof *shape);
    for (int i = 0; i < b->nsp; i++) {
        int64_t r = radius[nradius == 1 ? 0 : i];
        if (r < 0 || r > ((int64_t)1 << 30))
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: radius[%d] is %lld; expected 0 <= radius <= 2^30", c->who,
                               i, (long long)r);
        b->radius[i] = r;
        b->count *= (double)(2 * r + 1);
    }
    for (int d = 0; d < nd; d++)
        if (shape[d] == 0)
            return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                               "%s: the images have extent 0 on dim %d; expected at least one "
                               "element",
                               c->who, d);
    return NX_OK;
}

/* Sum of k slices of x along axis a, each `len` long, starting at 0, 1, .., k - 1. */
static nx_node slices_sum(nx_graph *g, nx_node x, int a, int64_t k, int64_t len)
{
    int64_t start[NX_MAX_DIMS] = {0}, stop[NX_MAX_DIMS];
    if (!nx_node_shape(g, x, stop))
        return NX_NONE;
    int nd = nx_node_ndim(g, x);
    if (k > SLICE_TAPS) {
        int64_t win[NX_MAX_DIMS];
        int axes[NX_MAX_DIMS];
        for (int d = 0; d < nd; d++) {
            win[d] = d == a ? k : 1;
            axes[d] = nd + d;
        }
        /* folding every window axis keeps x's layout as the iteration space */
        return nx_reduce(g, nx_window(g, x, win, NULL, NULL), nd, axes, NX_MONOID_SUM, false);
    }
    nx_node y = NX_NONE;
    for (int64_t t = 0; t < k; t++) {
        start[a] = t;
        stop[a] = t + len;
        nx_node s = nx_slice(g, x, start, stop, NULL);
        y = t == 0 ? s : nx_add(g, y, s);
    }
    return y;
}

/* y as a fold over a trailing unit axis: its own kernel, read from memory by the next pass. */
static nx_node materialise(nx_graph *g, nx_node y)
{
    int nd = nx_node_ndim(g, y);
    int64_t shape[NX_MAX_DIMS];
    if (nd + 1 > NX_MAX_DIMS || !nx_node_shape(g, y, shape))
        return y;
    shape[nd] = 1;
    int axis = nd;
    return nx_reduce(g, nx_reshape(g, y, nd + 1, shape), 1, &axis, NX_MONOID_SUM, false);
}

nx_node nx_metric_box_sum(nx_graph *g, nx_node x, const nx_metric_box *b)
{
    int last = -1;
    for (int i = 0; i < b->nsp; i++)
        if (b->radius[i] > 0)
            last = i;
    nx_node y = x;
    for (int i = 0; i <= last; i++) {
        int64_t r = b->radius[i];
        if (r == 0)
            continue;
        int a = b->lead + i;
        int64_t lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0};
        lo[a] = hi[a] = r;
        nx_node xp = nx_pad(g, y, lo, hi, b->mode, 0.0);
        y = slices_sum(g, xp, a, 2 * r + 1, b->shape[a]);
        if (i < last)
            y = materialise(g, y);
    }
    return y;
}

/* The padded position p (in [-r, n + r)) of a line of n samples reads sample src(p) (n >= 2 for
 * the periodic rules; the ir's fold). */
static int64_t src_of(int64_t p, int64_t n, nx_border mode)
{
    if (p >= 0 && p < n)
        return p;
    switch (mode) {
    case NX_BORDER_REFLECT: {
        int64_t m = ((p % (2 * n)) + 2 * n) % (2 * n);
        return m < n ? m : 2 * n - 1 - m;
    }
    case NX_BORDER_MIRROR: {
        int64_t per = 2 * n - 2, m = ((p % per) + per) % per;
        return m < n ? m : per - m;
    }
    case NX_BORDER_WRAP:
        return ((p % n) + n) % n;
    default: /* nearest */
        return p < 0 ? 0 : n - 1;
    }
}

/* piece (length len along axis a) placed at [at, at + len) of an n-sample axis, zeros elsewhere */
static nx_node place(nx_graph *g, nx_node piece, int a, int64_t at, int64_t len, int64_t n)
{
    int64_t lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0};
    lo[a] = at;
    hi[a] = n - at - len;
    if (at == 0 && len == n)
        return piece;
    return nx_pad(g, piece, lo, hi, NX_BORDER_CONSTANT, 0.0);
}

static nx_node slice_axis(nx_graph *g, nx_node u, int a, int64_t from, int64_t to)
{
    int64_t start[NX_MAX_DIMS] = {0}, stop[NX_MAX_DIMS];
    if (!nx_node_shape(g, u, stop))
        return NX_NONE;
    start[a] = from;
    stop[a] = to;
    return nx_slice(g, u, start, stop, NULL);
}

/* P^T along axis a: u has n + 2r samples there (padded positions p = j - r); the result n. */
static nx_node fold_back(nx_graph *g, nx_node u, const nx_metric_box *b, int a, int64_t r)
{
    int64_t n = b->shape[a];
    if (b->mode == NX_BORDER_CONSTANT)
        return slice_axis(g, u, a, r, r + n);
    if (n == 1) /* every padded position reads the one sample */
        return nx_reduce(g, u, 1, &a, NX_MONOID_SUM, true);
    nx_node y = slice_axis(g, u, a, r, r + n);
    if (b->mode == NX_BORDER_NEAREST) {
        nx_node left = nx_reduce(g, slice_axis(g, u, a, 0, r), 1, &a, NX_MONOID_SUM, true);
        nx_node right = nx_reduce(g, slice_axis(g, u, a, n + r, n + 2 * r), 1, &a, NX_MONOID_SUM,
                                  true);
        y = nx_add(g, y, place(g, left, a, 0, 1, n));
        return nx_add(g, y, place(g, right, a, n - 1, 1, n));
    }
    /* runs of positions outside [0, n) whose sources step by +1 or -1 */
    for (int side = 0; side < 2; side++) {
        int64_t p = side == 0 ? -r : n, end = side == 0 ? 0 : n + r;
        while (p < end) {
            int64_t s0 = src_of(p, n, b->mode), len = 1, slope = 1;
            if (p + 1 < end) {
                slope = src_of(p + 1, n, b->mode) - s0;
                if (slope == 1 || slope == -1)
                    while (p + len < end && src_of(p + len, n, b->mode) == s0 + slope * len)
                        len++;
                else
                    slope = 1;
            }
            nx_node piece = slice_axis(g, u, a, p + r, p + r + len);
            int64_t at = s0;
            if (slope == -1) {
                piece = nx_reverse(g, piece, 1, &a);
                at = s0 - len + 1;
            }
            y = nx_add(g, y, place(g, piece, a, at, len, n));
            p += len;
        }
    }
    return y;
}

nx_node nx_metric_box_sum_t(nx_graph *g, nx_node z, const nx_metric_box *b)
{
    nx_node y = z;
    int last = -1;
    for (int i = 0; i < b->nsp; i++)
        if (b->radius[i] > 0)
            last = i;
    for (int i = 0; i <= last; i++) {
        int64_t r = b->radius[i];
        if (r == 0)
            continue;
        int a = b->lead + i;
        int64_t n = b->shape[a], lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0};
        lo[a] = hi[a] = 2 * r;
        nx_node zp = nx_pad(g, y, lo, hi, NX_BORDER_CONSTANT, 0.0);
        nx_node u = slices_sum(g, zp, a, 2 * r + 1, n + 2 * r);
        y = fold_back(g, u, b, a, r);
        if (i < last)
            y = materialise(g, y);
    }
    return y;
}

nx_status nx_lncc_plan(const nx_op_args *c, nx_metric_box *b)
{
    nx_status st = nx_metric_check_pair(c, 0, 1);
    if (st != NX_OK)
        return st;
    const nx_lncc_args *o = c->opts;
    const int64_t four = 4;
    const nx_tensor *m = c->in[0];
    return nx_metric_box_plan(c, nx_tensor_ndim(m), nx_tensor_shape(m), o->spatial_rank,
                              o->nradius ? o->radius : &four, o->nradius ? o->nradius : 1,
                              o->mode, b);
}

/* x minus its first spatial sample, per batch item: the windowed sums and everything built on
 * them are shift-invariant, and the shift keeps S_mm - S_m^2 / n from cancelling the image's
 * offset in rounding (a constant image gives exact zeros). Not for mode constant, whose padding
 * with 0 would not shift with the image. */
static nx_node shift_first(nx_graph *g, nx_node x, const nx_metric_box *b)
{
    if (b->mode == NX_BORDER_CONSTANT) /* the zeros outside do not shift with the image */
        return x;
    int64_t start[NX_MAX_DIMS] = {0}, stop[NX_MAX_DIMS];
    for (int d = 0; d < b->nd; d++)
        stop[d] = d < b->lead ? b->shape[d] : 1;
    return nx_sub(g, x, nx_slice(g, x, start, stop, NULL));
}

void nx_lncc_sums_build(nx_graph *g, nx_node *mp, nx_node *fp, const nx_metric_box *b,
                        nx_lncc_sums *s)
{
    nx_node m = *mp = shift_first(g, *mp, b), f = *fp = shift_first(g, *fp, b);
    s->sm = nx_metric_box_sum(g, m, b);
    s->sf = nx_metric_box_sum(g, f, b);
    s->smm = nx_metric_box_sum(g, nx_mul(g, m, m), b);
    s->sff = nx_metric_box_sum(g, nx_mul(g, f, f), b);
    s->smf = nx_metric_box_sum(g, nx_mul(g, m, f), b);
}
