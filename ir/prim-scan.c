/* Scans along one axis.
 *
 *   scan         y[t] = x[0] (+) x[1] (+) ... (+) x[t]      (inclusive; reverse: x[t] .. x[n-1])
 *                under sum, prod, max, min or logsumexp, folded one element at a time with the
 *                same carry as reduce (ir/prim-reduce.c), so y[n-1] equals the reduction
 *   scan_linear  y[t] = a[t] * y[t-1] + b[t], y[-1] = 0     (reverse: y[t+1]; a, b broadcast)
 *                each step rounds the product, then the sum, as a sequential C loop would
 *   scan_iir     y[t] = b[t] + c_1 y[t-1] + ... + c_k y[t-k], k <= 4 constant coefficients, the
 *                states before the start 0; summed left to right, each product and sum rounded */
#include <math.h>
#include <string.h>

#include "ir.h"
#include "ir/adjoint.h"
#include "pool.h"

nx_status nx_ir_shape_scan(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p,
                           nx_ir_sig *out)
{
    (void)s;
    const nx_ir_sig *x = &p->ins[0];
    if (p->nattrs != 3)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "%d attributes; expected [axis, monoid, reverse]",
                          p->nattrs);
    int64_t axis = p->attrs[0], m = p->attrs[1];
    if (axis < 0 || axis >= x->ndim)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "axis %lld is out of range for %d dims",
                          (long long)axis, x->ndim);
    if (m < 0 || m > NX_MONOID_LOGSUMEXP)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG,
                          "monoid %s cannot scan; expected SUM, PROD, MAX, MIN or LOGSUMEXP",
                          nx_ir_monoid_name(m));
    if (p->attrs[2] != 0 && p->attrs[2] != 1)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "reverse is %lld; expected 0 or 1",
                          (long long)p->attrs[2]);
    nx_status st = nx_ir_monoid_dtype(ck, m, x->dtype);
    if (st == NX_OK)
        *out = *x;
    return st;
}

nx_node nx_scan(nx_graph *g, nx_node x, int axis, nx_monoid monoid, bool reverse)
{
    if (!g || !nx_ir_check_handles(g, "nx_scan", 1, &x))
        return NX_NONE;
    int nd = g->s.nodes[x].ndim, a;
    if (!nx_ir_axis(axis, nd, &a))
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                 "nx_scan: axis %d is out of range for %d dims; expected %d to %d",
                                 axis, nd, -nd, nd - 1);
    int64_t attrs[3] = {a, monoid, reverse};
    return nx_ir_make(g, "nx_scan", NX_PRIM_SCAN, 1, &x, 3, attrs, 0, NULL);
}

/* Line starts: every multi-index of shape with shape[axis] replaced by 1. */
static int64_t line_count(int nd, const int64_t *shape, int axis, int64_t *lshape)
{
    memcpy(lshape, shape, (size_t)nd * sizeof *shape);
    lshape[axis] = 1;
    return nx_ir_numel(nd, lshape);
}

nx_status nx_ir_ref_scan(const nx_ir_eval *ev, const nx_ir_node *n, const nx_tensor *const *ins,
                         nx_tensor *out)
{
    const int64_t *a = nx_ir_node_attrs(ev->s, n);
    int axis = (int)a[0];
    int64_t m = a[1];
    bool rev = a[2] != 0;
    const nx_tensor *x = ins[0];
    nx_dtype d = x->dtype;
    int64_t lshape[NX_MAX_DIMS], idx[NX_MAX_DIMS] = {0};
    int64_t lines = line_count(n->ndim, n->shape, axis, lshape), len = n->shape[axis];
    int64_t stride = x->strides[axis];
    const void *xd = nx_tensor_data(x);
    void *yd = nx_tensor_data(out);
    for (int64_t l = 0; l < lines && len > 0; l++) {
        int64_t base = 0;
        for (int dd = 0; dd < n->ndim; dd++)
            base += idx[dd] * x->strides[dd];
        nx_ir_carry c = nx_ir_monoid_init(m, d);
        for (int64_t k = 0; k < len; k++) {
            int64_t off = base + (rev ? len - 1 - k : k) * stride;
            nx_ir_monoid_step(&c, m, d, nx_ir_get(xd, d, off), k);
            nx_ir_put(yd, d, off, nx_ir_monoid_finish(&c, m, d));
        }
        nx_ir_next(n->ndim, lshape, idx);
    }
    return NX_OK;
}

void nx_ir_attrs_scan(FILE *f, const nx_ir_store *s, const nx_ir_node *n)
{
    const int64_t *a = nx_ir_node_attrs(s, n);
    fprintf(f, "[axis=%lld, monoid=%s, reverse=%lld]", (long long)a[0], nx_ir_monoid_name(a[1]),
            (long long)a[2]);
}

/* ---- scan_linear ---------------------------------------------------------------------------*/

nx_status nx_ir_shape_scan_linear(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p,
                                  nx_ir_sig *out)
{
    (void)s;
    const nx_ir_sig *a = &p->ins[0], *b = &p->ins[1];
    if (p->nattrs != 2)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "%d attributes; expected [axis, reverse]",
                          p->nattrs);
    if (a->dtype != b->dtype)
        return nx_ir_fail(ck, NX_ERR_DTYPE,
                          "dtypes %s and %s of a and b differ; expected equal dtypes (no "
                          "implicit promotion: nx_cast one operand)",
                          nx_dtype_name(a->dtype), nx_dtype_name(b->dtype));
    if (!nx_ir_is_core_float(a->dtype))
        return nx_ir_fail(ck, NX_ERR_DTYPE, "a and b are %s; expected f32 or f64",
                          nx_dtype_name(a->dtype));
    nx_status st = nx_ir_broadcast_shapes(ck, a, b, "a", "b", out);
    if (st != NX_OK)
        return st;
    out->dtype = a->dtype;
    if (p->attrs[0] < 0 || p->attrs[0] >= out->ndim)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "axis %lld is out of range for %d dims",
                          (long long)p->attrs[0], out->ndim);
    if (p->attrs[1] != 0 && p->attrs[1] != 1)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "reverse is %lld; expected 0 or 1",
                          (long long)p->attrs[1]);
    return NX_OK;
}

nx_node nx_scan_linear(nx_graph *g, nx_node a, nx_node b, int axis, bool reverse)
{
    nx_node ops[2] = {a, b};
    if (!g || !nx_ir_check_handles(g, "nx_scan_linear", 2, ops))
        return NX_NONE;
    int na = g->s.nodes[a].ndim, nb = g->s.nodes[b].ndim, nd = na > nb ? na : nb, ax;
    if (!nx_ir_axis(axis, nd, &ax))
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                 "nx_scan_linear: axis %d is out of range for %d dims; expected "
                                 "%d to %d",
                                 axis, nd, -nd, nd - 1);
    int64_t attrs[2] = {ax, reverse};
    return nx_ir_make(g, "nx_scan_linear", NX_PRIM_SCAN_LINEAR, 2, ops, 2, attrs, 0, NULL);
}

/* The inner axes (after axis) of a tensor with strides st: 1 when they are walked contiguously
 * (C order over shape), 0 when broadcast (every stride 0), -1 otherwise. */
static int inner_step(int nd, const int64_t *shape, const int64_t *st, int axis)
{
    bool zero = true, dense = true;
    int64_t want = 1;
    for (int k = nd - 1; k > axis; k--) {
        zero = zero && (st[k] == 0 || shape[k] == 1);
        dense = dense && (st[k] == want || shape[k] == 1);
        want *= shape[k];
    }
    return dense ? 1 : zero ? 0 : -1;
}

/* The typed scan_linear over contiguous (or broadcast) inner blocks, split into independent tasks
 * on the context's pool. Every line runs the same arithmetic as the generic loop, in the same
 * order: y_t = a_t * y_{t-1} rounded, then + b_t rounded (y_{-1} = 0, so the first step is
 * a * 0 + b, which keeps -0 and NaN as the sequential loop has them). The library is built as ISO
 * C without FMA instructions, so neither step is contracted; the result is bit-identical to the
 * sequential recurrence whatever the partition.
 *
 *   inner > 1   (the axis is not the last one): a task is a block of up to SL_COLS adjacent lines
 *               of one outer index; each step along the axis advances the whole block, walking
 *               memory contiguously, and the loop over the block vectorises.
 *   inner == 1  (lines contiguous along the axis): a task is a group of SL_LANES adjacent lines,
 *               stepped together SL_STEPS samples at a time through a transposed scratch tile, so
 *               the recurrence runs SL_LANES lines per vector operation instead of one latency
 *               chain per line. */
#define SL_COLS 1024
#define SL_LANES 16
#define SL_STEPS 64

typedef struct sl_job {
    const void *a, *b;
    void *y;
    const int64_t *shape, *sa, *sb, *sy;
    int nd, axis, ia, ib;
    bool rev, f64, a_scalar; /* a_scalar: every stride of a is 0 */
    int64_t len, inner, outer, tasks_per_outer;
} sl_job;

/* Offsets of a, b and y at outer index o (the multi-index over the axes before axis). */
static void sl_outer(const sl_job *j, int64_t o, int64_t *oa, int64_t *ob, int64_t *oy)
{
    *oa = *ob = *oy = 0;
    for (int k = j->axis - 1; k >= 0; k--) {
        int64_t i = o % j->shape[k];
        o /= j->shape[k];
        *oa += i * j->sa[k];
        *ob += i * j->sb[k];
        *oy += i * j->sy[k];
    }
}

/* A block of n lines advanced together: inner offsets j of a (times ia), b (times ib) and y. IA
 * and IB are literal 0 or 1 at each call site, so each copy's loop has fixed strides. */
#define SL_BLOCK(T)                                                                                \
    static inline void sl_block_##T(const sl_job *jb, const T *a, const T *b, T *y, int64_t n,     \
                                    int ia, int ib)                                                \
    {                                                                                              \
        int64_t len = jb->len, sa = jb->sa[jb->axis], sb = jb->sb[jb->axis];                      \
        int64_t sy = jb->sy[jb->axis];                                                             \
        const T *prev = NULL;                                                                      \
        for (int64_t k = 0; k < len; k++) {                                                        \
            int64_t t = jb->rev ? len - 1 - k : k;                                                 \
            const T *pa = a + t * sa, *pb = b + t * sb;                                            \
            T *py = y + t * sy;                                                                    \
            if (prev)                                                                              \
                for (int64_t j = 0; j < n; j++) {                                                  \
                    T p = pa[j * ia] * prev[j];                                                    \
                    py[j] = p + pb[j * ib];                                                        \
                }                                                                                  \
            else                                                                                   \
                for (int64_t j = 0; j < n; j++) {                                                  \
                    T p = pa[j * ia] * (T)0;                                                       \
                    py[j] = p + pb[j * ib];                                                        \
                }                                                                                  \
            prev = py;                                                                             \
        }                                                                                          \
    }                                                                                              \
    static void sl_cols_##T(const sl_job *jb, int64_t task)                                        \
    {                                                                                              \
        int64_t o = task / jb->tasks_per_outer, j0 = (task % jb->tasks_per_outer) * SL_COLS;       \
        int64_t n = jb->inner - j0 < SL_COLS ? jb->inner - j0 : SL_COLS, oa, ob, oy;               \
        sl_outer(jb, o, &oa, &ob, &oy);                                                            \
        const T *a = (const T *)jb->a + oa + j0 * jb->ia;                                          \
        const T *b = (const T *)jb->b + ob + j0 * jb->ib;                                          \
        T *y = (T *)jb->y + oy + j0;                                                               \
        if (jb->ia && jb->ib)                                                                      \
            sl_block_##T(jb, a, b, y, n, 1, 1);                                                    \
        else if (jb->ib)                                                                           \
            sl_block_##T(jb, a, b, y, n, 0, 1);                                                    \
        else if (jb->ia)                                                                           \
            sl_block_##T(jb, a, b, y, n, 1, 0);                                                    \
        else                                                                                       \
            sl_block_##T(jb, a, b, y, n, 0, 0);                                                    \
    }

/* The tile copies of full f32 tiles of unit-stride lines by 4 x 4 SSE transposes (baseline
 * x86-64); they move values only, so the results are the scalar copies' bit for bit. false: the
 * caller copies element by element. */
#if defined(__SSE__)
#include <xmmintrin.h>

static bool sl_tile_in_float(float (*tb)[SL_LANES], const float *b, const int64_t *off, int64_t nl,
                             int64_t ns, int64_t t0, int64_t dir, int64_t stride)
{
    if (nl != SL_LANES || ns % 4 != 0 || stride != 1)
        return false;
    for (int l4 = 0; l4 < SL_LANES; l4 += 4)
        for (int64_t s4 = 0; s4 < ns; s4 += 4) {
            __m128 r[4];
            for (int j = 0; j < 4; j++) {
                const float *p = b + off[l4 + j] + t0;
                r[j] = dir > 0 ? _mm_loadu_ps(p + s4) : _mm_loadu_ps(p - s4 - 3);
                if (dir < 0)
                    r[j] = _mm_shuffle_ps(r[j], r[j], _MM_SHUFFLE(0, 1, 2, 3));
            }
            _MM_TRANSPOSE4_PS(r[0], r[1], r[2], r[3]);
            for (int j = 0; j < 4; j++)
                _mm_storeu_ps(&tb[s4 + j][l4], r[j]);
        }
    return true;
}

static bool sl_tile_out_float(float (*tb)[SL_LANES], float *y, const int64_t *off, int64_t nl,
                              int64_t ns, int64_t t0, int64_t dir, int64_t stride)
{
    if (nl != SL_LANES || ns % 4 != 0 || stride != 1)
        return false;
    for (int l4 = 0; l4 < SL_LANES; l4 += 4)
        for (int64_t s4 = 0; s4 < ns; s4 += 4) {
            __m128 r[4];
            for (int j = 0; j < 4; j++)
                r[j] = _mm_loadu_ps(&tb[s4 + j][l4]);
            _MM_TRANSPOSE4_PS(r[0], r[1], r[2], r[3]);
            for (int j = 0; j < 4; j++) {
                float *p = y + off[l4 + j] + t0;
                if (dir > 0) {
                    _mm_storeu_ps(p + s4, r[j]);
                } else {
                    r[j] = _mm_shuffle_ps(r[j], r[j], _MM_SHUFFLE(0, 1, 2, 3));
                    _mm_storeu_ps(p - s4 - 3, r[j]);
                }
            }
        }
    return true;
}
#else
static bool sl_tile_in_float(float (*tb)[SL_LANES], const float *b, const int64_t *off, int64_t nl,
                             int64_t ns, int64_t t0, int64_t dir, int64_t stride)
{
    (void)tb, (void)b, (void)off, (void)nl, (void)ns, (void)t0, (void)dir, (void)stride;
    return false;
}

static bool sl_tile_out_float(float (*tb)[SL_LANES], float *y, const int64_t *off, int64_t nl,
                              int64_t ns, int64_t t0, int64_t dir, int64_t stride)
{
    (void)tb, (void)y, (void)off, (void)nl, (void)ns, (void)t0, (void)dir, (void)stride;
    return false;
}
#endif

static bool sl_tile_in_double(double (*tb)[SL_LANES], const double *b, const int64_t *off,
                              int64_t nl, int64_t ns, int64_t t0, int64_t dir, int64_t stride)
{
    (void)tb, (void)b, (void)off, (void)nl, (void)ns, (void)t0, (void)dir, (void)stride;
    return false;
}

static bool sl_tile_out_double(double (*tb)[SL_LANES], double *y, const int64_t *off, int64_t nl,
                               int64_t ns, int64_t t0, int64_t dir, int64_t stride)
{
    (void)tb, (void)y, (void)off, (void)nl, (void)ns, (void)t0, (void)dir, (void)stride;
    return false;
}

/* A group of up to SL_LANES contiguous lines: SL_STEPS samples of each are copied into a tile
 * with the lines side by side, the recurrence steps all lanes at once, and the tile goes back. */
#define SL_LINES(T)                                                                                \
    static void sl_lines_##T(const sl_job *jb, int64_t task)                                       \
    {                                                                                              \
        int64_t l0 = task * SL_LANES, nl = jb->outer - l0 < SL_LANES ? jb->outer - l0 : SL_LANES;  \
        int64_t offa[SL_LANES], offb[SL_LANES], offy[SL_LANES];                                    \
        for (int64_t l = 0; l < nl; l++)                                                           \
            sl_outer(jb, l0 + l, &offa[l], &offb[l], &offy[l]);                                    \
        const T *a = jb->a, *b = jb->b;                                                            \
        T *y = jb->y;                                                                              \
        int64_t len = jb->len, sa = jb->sa[jb->axis], sb = jb->sb[jb->axis];                       \
        int64_t sy = jb->sy[jb->axis];                                                             \
        T ta[SL_STEPS][SL_LANES], tb[SL_STEPS][SL_LANES], acc[SL_LANES];                           \
        memset(ta, 0, sizeof ta);                                                                  \
        memset(tb, 0, sizeof tb);                                                                  \
        for (int l = 0; l < SL_LANES; l++)                                                         \
            acc[l] = (T)0;                                                                         \
        int64_t dir = jb->rev ? -1 : 1, first = jb->rev ? len - 1 : 0;                             \
        for (int64_t k0 = 0; k0 < len; k0 += SL_STEPS) {                                           \
            int64_t ns = len - k0 < SL_STEPS ? len - k0 : SL_STEPS, t0 = first + dir * k0;         \
            if (!sl_tile_in_##T(tb, b, offb, nl, ns, t0, dir, sb))                                 \
                for (int64_t l = 0; l < nl; l++) {                                                 \
                    const T *pb = b + offb[l] + t0 * sb;                                           \
                    for (int64_t s = 0; s < ns; s++)                                               \
                        tb[s][l] = pb[s * dir * sb];                                               \
                }                                                                                  \
            if (jb->a_scalar) {                                                                    \
                T c = a[0];                                                                        \
                for (int64_t s = 0; s < ns; s++)                                                   \
                    for (int l = 0; l < SL_LANES; l++) {                                           \
                        T p = c * acc[l];                                                          \
                        acc[l] = p + tb[s][l];                                                     \
                        tb[s][l] = acc[l];                                                         \
                    }                                                                              \
            } else {                                                                               \
                for (int64_t l = 0; l < nl; l++) {                                                 \
                    const T *pa = a + offa[l] + t0 * sa;                                           \
                    for (int64_t s = 0; s < ns; s++)                                               \
                        ta[s][l] = pa[s * dir * sa];                                               \
                }                                                                                  \
                for (int64_t s = 0; s < ns; s++)                                                   \
                    for (int l = 0; l < SL_LANES; l++) {                                           \
                        T p = ta[s][l] * acc[l];                                                   \
                        acc[l] = p + tb[s][l];                                                     \
                        tb[s][l] = acc[l];                                                         \
                    }                                                                              \
            }                                                                                      \
            if (!sl_tile_out_##T(tb, y, offy, nl, ns, t0, dir, sy))                                \
                for (int64_t l = 0; l < nl; l++) {                                                 \
                    T *py = y + offy[l] + t0 * sy;                                                 \
                    for (int64_t s = 0; s < ns; s++)                                               \
                        py[s * dir * sy] = tb[s][l];                                               \
                }                                                                                  \
        }                                                                                          \
    }

SL_BLOCK(float)
SL_BLOCK(double)
SL_LINES(float)
SL_LINES(double)

static void sl_chunk(void *user, int64_t begin, int64_t end, int chunk)
{
    (void)chunk;
    const sl_job *jb = user;
    for (int64_t task = begin; task < end; task++) {
        if (jb->inner > 1 && jb->f64)
            sl_cols_double(jb, task);
        else if (jb->inner > 1)
            sl_cols_float(jb, task);
        else if (jb->f64)
            sl_lines_double(jb, task);
        else
            sl_lines_float(jb, task);
    }
}

/* Runs the typed scan over the pool: tasks of about SL_COLS or SL_LANES lines each, grouped into
 * chunks of at least ~64K elements so the fork costs little. */
static nx_status scan_linear_fast(nx_ctx *ctx, sl_job *jb)
{
    int64_t tasks, per_task;
    if (jb->inner > 1) {
        jb->tasks_per_outer = (jb->inner + SL_COLS - 1) / SL_COLS;
        tasks = jb->outer * jb->tasks_per_outer;
        per_task = jb->len * (jb->inner < SL_COLS ? jb->inner : SL_COLS);
    } else {
        tasks = (jb->outer + SL_LANES - 1) / SL_LANES;
        per_task = jb->len * SL_LANES;
    }
    int64_t grain = per_task >= 65536 ? 1 : 65536 / per_task;
    return nx_rt_parallel_for(ctx, tasks, grain, sl_chunk, jb);
}

nx_status nx_ir_ref_scan_linear(const nx_ir_eval *ev, const nx_ir_node *n,
                                const nx_tensor *const *ins, nx_tensor *out)
{
    const int64_t *at = nx_ir_node_attrs(ev->s, n);
    int axis = (int)at[0], nd = n->ndim;
    bool rev = at[1] != 0;
    nx_dtype d = out->dtype;
    int64_t sa[NX_MAX_DIMS], sb[NX_MAX_DIMS], lshape[NX_MAX_DIMS], idx[NX_MAX_DIMS] = {0};
    nx_ir_bcast_strides(ins[0], nd, n->shape, sa);
    nx_ir_bcast_strides(ins[1], nd, n->shape, sb);
    int ia = inner_step(nd, n->shape, sa, axis), ib = inner_step(nd, n->shape, sb, axis);
    if (ia >= 0 && ib >= 0 && inner_step(nd, n->shape, out->strides, axis) == 1 &&
        nx_ir_numel(nd, n->shape) > 0 && ev->ctx) {
        sl_job jb = {.a = nx_tensor_data(ins[0]), .b = nx_tensor_data(ins[1]),
                     .y = nx_tensor_data(out), .shape = n->shape, .sa = sa, .sb = sb,
                     .sy = out->strides, .nd = nd, .axis = axis, .ia = ia, .ib = ib, .rev = rev,
                     .f64 = d == NX_DTYPE_F64, .len = n->shape[axis],
                     .inner = nx_ir_numel(nd - axis - 1, n->shape + axis + 1),
                     .outer = nx_ir_numel(axis, n->shape)};
        jb.a_scalar = true;
        for (int k = 0; k < nd; k++)
            jb.a_scalar = jb.a_scalar && (sa[k] == 0 || n->shape[k] == 1);
        return scan_linear_fast(ev->ctx, &jb);
    }
    int64_t lines = line_count(nd, n->shape, axis, lshape), len = n->shape[axis];
    const void *ad = nx_tensor_data(ins[0]), *bd = nx_tensor_data(ins[1]);
    void *yd = nx_tensor_data(out);
    for (int64_t l = 0; l < lines && len > 0; l++) {
        int64_t oa = 0, ob = 0, oy = 0;
        for (int k = 0; k < nd; k++) {
            oa += idx[k] * sa[k];
            ob += idx[k] * sb[k];
            oy += idx[k] * out->strides[k];
        }
        nx_ir_val y = nx_ir_from_double(0, d);
        for (int64_t k = 0; k < len; k++) {
            int64_t t = rev ? len - 1 - k : k;
            nx_ir_val ay =
                nx_ir_scalar_binary(NX_PRIM_MUL, d, d, nx_ir_get(ad, d, oa + t * sa[axis]), y);
            y = nx_ir_scalar_binary(NX_PRIM_ADD, d, d, ay, nx_ir_get(bd, d, ob + t * sb[axis]));
            nx_ir_put(yd, d, oy + t * out->strides[axis], y);
        }
        nx_ir_next(nd, lshape, idx);
    }
    return NX_OK;
}

void nx_ir_attrs_scan_linear(FILE *f, const nx_ir_store *s, const nx_ir_node *n)
{
    const int64_t *a = nx_ir_node_attrs(s, n);
    fprintf(f, "[axis=%lld, reverse=%lld]", (long long)a[0], (long long)a[1]);
}

/* ---- scan_iir ------------------------------------------------------------------------------*/

/* The coefficients as stored: attributes 3 .. 3 + order hold the bits of each double. */
static double iir_coef(const int64_t *at, int j)
{
    double c;
    memcpy(&c, &at[3 + j], sizeof c);
    return c;
}

nx_status nx_ir_shape_scan_iir(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p,
                               nx_ir_sig *out)
{
    (void)s;
    const nx_ir_sig *b = &p->ins[0];
    if (p->nattrs < 4 || p->nattrs > 3 + NX_SCAN_IIR_MAX_ORDER || p->attrs[2] != p->nattrs - 3)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG,
                          "%d attributes; expected [axis, reverse, order, order coefficient bits] "
                          "with order 1 to %d",
                          p->nattrs, NX_SCAN_IIR_MAX_ORDER);
    if (!nx_ir_is_core_float(b->dtype))
        return nx_ir_fail(ck, NX_ERR_DTYPE, "b is %s; expected f32 or f64",
                          nx_dtype_name(b->dtype));
    if (p->attrs[0] < 0 || p->attrs[0] >= b->ndim)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "axis %lld is out of range for %d dims",
                          (long long)p->attrs[0], b->ndim);
    if (p->attrs[1] != 0 && p->attrs[1] != 1)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "reverse is %lld; expected 0 or 1",
                          (long long)p->attrs[1]);
    for (int j = 0; j < p->attrs[2]; j++) {
        double c = iir_coef(p->attrs, j);
        if (!isfinite(c))
            return nx_ir_fail(ck, NX_ERR_INVALID_ARG,
                              "coefficient c_%d is %g; expected a finite value", j + 1, c);
        /* the kernels round each coefficient once to b's dtype: an f32 inf would make every
         * output NaN (inf * 0 at the line's zero states) */
        if (b->dtype == NX_DTYPE_F32 && !isfinite((float)c))
            return nx_ir_fail(ck, NX_ERR_INVALID_ARG,
                              "coefficient c_%d is %g, which is not finite in f32; expected a "
                              "value finite in b's dtype",
                              j + 1, c);
    }
    *out = *b;
    return NX_OK;
}

nx_node nx_scan_iir(nx_graph *g, nx_node b, int axis, bool reverse, int order, const double *coef)
{
    if (!g || !nx_ir_check_handles(g, "nx_scan_iir", 1, &b))
        return NX_NONE;
    int nd = g->s.nodes[b].ndim, ax;
    if (!nx_ir_axis(axis, nd, &ax))
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                 "nx_scan_iir: axis %d is out of range for %d dims; expected "
                                 "%d to %d",
                                 axis, nd, -nd, nd - 1);
    if (order < 1 || order > NX_SCAN_IIR_MAX_ORDER)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                 "nx_scan_iir: order %d is out of range; expected 1 to %d", order,
                                 NX_SCAN_IIR_MAX_ORDER);
    if (!coef)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                 "nx_scan_iir: coef is NULL; expected %d coefficients", order);
    int64_t attrs[3 + NX_SCAN_IIR_MAX_ORDER] = {ax, reverse, order};
    for (int j = 0; j < order; j++) /* the shape rule checks the values against b's dtype */
        memcpy(&attrs[3 + j], &coef[j], sizeof coef[j]);
    return nx_ir_make(g, "nx_scan_iir", NX_PRIM_SCAN_IIR, 1, &b, 3 + order, attrs, 0, NULL);
}

/* The routine behind the interpreter and the x86 backend's library kernel. Coefficients are rounded
 * to the dtype once; a step is acc = b, then acc = acc + c_j * y_{t-j} for j = 1 .. order, each
 * product and each sum rounded (the library is ISO C without FMA contraction), with the states
 * before the line's start 0 and their terms still computed. The partitions below change which
 * lines run together, never a line's arithmetic, so every path gives the same bits.
 *
 *   inner > 1   a task is a block of up to SL_COLS adjacent lines of one outer index; each step
 *               writes b's row into y's, then adds each term as one pass over the row, so the
 *               loops over the block vectorise (the row stays in L1 between the passes).
 *   inner == 1  a task is SL_LANES contiguous lines stepped together through a transposed tile of
 *               SL_STEPS samples, the states held per lane. */
typedef struct iir_job {
    const void *b;
    void *y;
    int order;
    bool rev, f64;
    double c[NX_SCAN_IIR_MAX_ORDER];
    int64_t len, inner, outer, tasks_per_outer;
} iir_job;

#define IIR_KERNELS(T)                                                                             \
    static void iir_cols_##T(const iir_job *jb, int64_t task)                                      \
    {                                                                                              \
        static const T zeros[SL_COLS];                                                             \
        int64_t o = task / jb->tasks_per_outer, j0 = (task % jb->tasks_per_outer) * SL_COLS;       \
        int64_t n = jb->inner - j0 < SL_COLS ? jb->inner - j0 : SL_COLS, len = jb->len;            \
        const T *b = (const T *)jb->b + o * len * jb->inner + j0;                                  \
        T *y = (T *)jb->y + o * len * jb->inner + j0;                                              \
        T c[NX_SCAN_IIR_MAX_ORDER];                                                                \
        for (int j = 0; j < jb->order; j++)                                                        \
            c[j] = (T)jb->c[j];                                                                    \
        for (int64_t k = 0; k < len; k++) {                                                        \
            int64_t t = jb->rev ? len - 1 - k : k;                                                 \
            const T *pb = b + t * jb->inner;                                                       \
            T *py = y + t * jb->inner;                                                             \
            for (int64_t i = 0; i < n; i++)                                                        \
                py[i] = pb[i];                                                                     \
            for (int j = 0; j < jb->order; j++) {                                                  \
                int64_t kp = k - 1 - j;                                                            \
                const T *prev = kp < 0 ? zeros                                                     \
                                       : y + (jb->rev ? len - 1 - kp : kp) * jb->inner;            \
                T cj = c[j];                                                                       \
                for (int64_t i = 0; i < n; i++) {                                                  \
                    T p = cj * prev[i];                                                            \
                    py[i] = py[i] + p;                                                             \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static void iir_lines_##T(const iir_job *jb, int64_t task)                                     \
    {                                                                                              \
        int64_t l0 = task * SL_LANES, nl = jb->outer - l0 < SL_LANES ? jb->outer - l0 : SL_LANES;  \
        int64_t off[SL_LANES], len = jb->len;                                                      \
        for (int64_t l = 0; l < nl; l++)                                                           \
            off[l] = (l0 + l) * len;                                                               \
        const T *b = jb->b;                                                                        \
        T *y = jb->y;                                                                              \
        T tb[SL_STEPS][SL_LANES], st[NX_SCAN_IIR_MAX_ORDER][SL_LANES], c[NX_SCAN_IIR_MAX_ORDER];   \
        memset(tb, 0, sizeof tb);                                                                  \
        memset(st, 0, sizeof st);                                                                  \
        int order = jb->order;                                                                     \
        for (int j = 0; j < order; j++)                                                            \
            c[j] = (T)jb->c[j];                                                                    \
        int64_t dir = jb->rev ? -1 : 1, first = jb->rev ? len - 1 : 0;                             \
        for (int64_t k0 = 0; k0 < len; k0 += SL_STEPS) {                                           \
            int64_t ns = len - k0 < SL_STEPS ? len - k0 : SL_STEPS, t0 = first + dir * k0;         \
            if (!sl_tile_in_##T(tb, b, off, nl, ns, t0, dir, 1))                                   \
                for (int64_t l = 0; l < nl; l++)                                                   \
                    for (int64_t s = 0; s < ns; s++)                                               \
                        tb[s][l] = b[off[l] + t0 + s * dir];                                       \
            for (int64_t s = 0; s < ns; s++) {                                                     \
                T acc[SL_LANES];                                                                   \
                for (int l = 0; l < SL_LANES; l++)                                                 \
                    acc[l] = tb[s][l];                                                             \
                for (int j = 0; j < order; j++)                                                    \
                    for (int l = 0; l < SL_LANES; l++) {                                           \
                        T p = c[j] * st[j][l];                                                     \
                        acc[l] = acc[l] + p;                                                       \
                    }                                                                              \
                for (int j = order - 1; j > 0; j--)                                                \
                    memcpy(st[j], st[j - 1], sizeof st[j]);                                        \
                memcpy(st[0], acc, sizeof acc);                                                    \
                memcpy(tb[s], acc, sizeof acc);                                                    \
            }                                                                                      \
            if (!sl_tile_out_##T(tb, y, off, nl, ns, t0, dir, 1))                                  \
                for (int64_t l = 0; l < nl; l++)                                                   \
                    for (int64_t s = 0; s < ns; s++)                                               \
                        y[off[l] + t0 + s * dir] = tb[s][l];                                       \
        }                                                                                          \
    }

IIR_KERNELS(float)
IIR_KERNELS(double)

static void iir_chunk(void *user, int64_t begin, int64_t end, int chunk)
{
    (void)chunk;
    const iir_job *jb = user;
    for (int64_t task = begin; task < end; task++) {
        if (jb->inner > 1 && jb->f64)
            iir_cols_double(jb, task);
        else if (jb->inner > 1)
            iir_cols_float(jb, task);
        else if (jb->f64)
            iir_lines_double(jb, task);
        else
            iir_lines_float(jb, task);
    }
}

nx_status nx_ir_ref_scan_iir(const nx_ir_eval *ev, const nx_ir_node *n,
                             const nx_tensor *const *ins, nx_tensor *out)
{
    const int64_t *at = nx_ir_node_attrs(ev->s, n);
    int axis = (int)at[0], nd = n->ndim;
    iir_job jb = {.b = nx_tensor_data(ins[0]), .y = nx_tensor_data(out), .order = (int)at[2],
                  .rev = at[1] != 0, .f64 = out->dtype == NX_DTYPE_F64, .len = n->shape[axis],
                  .inner = nx_ir_numel(nd - axis - 1, n->shape + axis + 1),
                  .outer = nx_ir_numel(axis, n->shape)};
    for (int j = 0; j < jb.order; j++)
        jb.c[j] = iir_coef(at, j);
    if (jb.len == 0 || jb.inner == 0 || jb.outer == 0)
        return NX_OK;
    int64_t tasks, per_task;
    if (jb.inner > 1) {
        jb.tasks_per_outer = (jb.inner + SL_COLS - 1) / SL_COLS;
        tasks = jb.outer * jb.tasks_per_outer;
        per_task = jb.len * (jb.inner < SL_COLS ? jb.inner : SL_COLS);
    } else {
        tasks = (jb.outer + SL_LANES - 1) / SL_LANES;
        per_task = jb.len * SL_LANES;
    }
    if (!ev->ctx) {
        iir_chunk(&jb, 0, tasks, 0);
        return NX_OK;
    }
    int64_t grain = per_task >= 65536 ? 1 : 65536 / per_task;
    return nx_rt_parallel_for(ev->ctx, tasks, grain, iir_chunk, &jb);
}

void nx_ir_attrs_scan_iir(FILE *f, const nx_ir_store *s, const nx_ir_node *n)
{
    const int64_t *a = nx_ir_node_attrs(s, n);
    fprintf(f, "[axis=%lld, reverse=%lld, coef=(", (long long)a[0], (long long)a[1]);
    for (int j = 0; j < a[2]; j++)
        fprintf(f, "%s%.17g", j ? ", " : "", iir_coef(a, j));
    fprintf(f, ")]");
}

/* ---- adjoints ---------------------------------------------------------------------------*/

/* Adjoint rules of the scans: each is a scan running the other way (a reverse scan, or a reverse
 * linear recurrence g_t = dy_t + c_t g_{t+1}), so the backward pass streams like the forward one.
 * A reverse scan is differentiated as the forward scan of the reversed line.
 *
 *   sum        dx = reverse cumulative sum of dy
 *   prod       dx_s = (x_0 ... x_{s-1}) g_s, g_s = dy_s + x_{s+1} g_{s+1}: no division, zeros exact
 *   max, min   the first winner of prefix t is its last strict record s (x_s beats y_{s-1});
 *              dx_s = [s is a record] g_s, g_s = dy_s + [s+1 is not a record] g_{s+1}
 *   logsumexp  dx_s = exp(x_s - y_s) g_s, g_s = dy_s + exp(y_s - y_{s+1}) g_{s+1}; the weights
 *              are at most 1 (y grows), and an all -inf prefix gives 0
 *   scan_linear  y_t = a_t y_{t-1} + b_t: g_t = dy_t + a_{t+1} g_{t+1}, db = g, da = g y_{t-1} */

static nx_node scan_forward_adjoint(nx_graph *g, nx_node x, nx_node y, nx_node dy, int axis,
                                    int64_t m)
{
    if (!x || !y || !dy) /* an earlier builder failed; the graph holds its error */
        return NX_NONE;
    nx_node zero = nx_ir_ad_scalar(g, x, 0.0), one = nx_ir_ad_scalar(g, x, 1.0);
    switch (m) {
    case NX_MONOID_SUM:
        return nx_scan(g, dy, axis, NX_MONOID_SUM, true);
    case NX_MONOID_PROD: {
        nx_node next_x = nx_ir_ad_shift(g, x, axis, true, 0.0);
        nx_node gs = nx_scan_linear(g, next_x, dy, axis, true);
        return nx_mul(g, nx_ir_ad_shift(g, y, axis, false, 1.0), gs);
    }
    case NX_MONOID_MAX:
    case NX_MONOID_MIN: {
        bool is_max = m == NX_MONOID_MAX;
        nx_node prev = nx_ir_ad_shift(g, y, axis, false, is_max ? -INFINITY : INFINITY);
        int64_t shape[NX_MAX_DIMS];
        nx_node_shape(g, x, shape);
        nx_node first = nx_eq(g, nx_ir_ad_iota(g, nx_node_ndim(g, x), shape, axis),
                              nx_scalar(g, NX_DTYPE_I64, 0.0));
        nx_node rec = nx_or(g, first, is_max ? nx_gt(g, x, prev) : nx_lt(g, x, prev));
        nx_node cont = nx_ir_ad_shift(g, nx_select(g, rec, zero, one), axis, true, 0.0);
        return nx_ir_ad_select0(g, rec, nx_scan_linear(g, cont, dy, axis, true));
    }
    case NX_MONOID_LOGSUMEXP: {
        nx_node ninf = nx_ir_ad_scalar(g, x, -INFINITY);
        nx_node next_y = nx_ir_ad_shift(g, y, axis, true, -INFINITY);
        nx_node safe_next = nx_select(g, nx_eq(g, next_y, ninf), zero, next_y);
        nx_node c = nx_select(g, nx_eq(g, next_y, ninf), zero,
                              nx_exp(g, nx_sub(g, y, safe_next)));
        nx_node gs = nx_scan_linear(g, c, dy, axis, true);
        nx_node safe_y = nx_select(g, nx_eq(g, y, ninf), zero, y);
        nx_node w = nx_select(g, nx_eq(g, y, ninf), zero, nx_exp(g, nx_sub(g, x, safe_y)));
        return nx_mul(g, w, gs);
    }
    default:
        return NX_NONE;
    }
}

nx_status nx_ir_vjp_scan(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    int axis = (int)v.a[0];
    int64_t m = v.a[1];
    if (m != NX_MONOID_SUM && m != NX_MONOID_PROD && m != NX_MONOID_MAX &&
        m != NX_MONOID_MIN && m != NX_MONOID_LOGSUMEXP)
        return nx_ir_ad_unsupported(g, "nx_graph_vjp: scan under monoid %s has no adjoint",
                                    nx_ir_monoid_name(m));
    nx_node x = v.ops[0];
    if (!v.a[2]) {
        dx[0] = scan_forward_adjoint(g, x, y, dy, axis, m);
        return NX_OK;
    }
    nx_node rx = nx_reverse(g, x, 1, &axis), ry = nx_reverse(g, y, 1, &axis);
    nx_node rd = nx_reverse(g, dy, 1, &axis);
    dx[0] = nx_reverse(g, scan_forward_adjoint(g, rx, ry, rd, axis, m), 1, &axis);
    return NX_OK;
}

nx_status nx_ir_vjp_scan_linear(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    int axis = (int)v.a[0];
    bool rev = v.a[1] != 0;
    int64_t shape[NX_MAX_DIMS];
    nx_node_shape(g, y, shape);
    nx_node a = nx_broadcast(g, v.ops[0], v.n.ndim, shape);
    /* The recurrence's next step reads a one place further along the scan's direction. */
    nx_node c = nx_ir_ad_shift(g, a, axis, !rev, 0.0);
    nx_node gs = nx_scan_linear(g, c, dy, axis, !rev);
    nx_node prev = nx_ir_ad_shift(g, y, axis, rev, 0.0);
    dx[0] = nx_ir_ad_unbroadcast(g, nx_mul(g, gs, prev), v.ops[0]);
    dx[1] = nx_ir_ad_unbroadcast(g, gs, v.ops[1]);
    return NX_OK;
}

/* y = L^-1 b with L unit lower triangular, banded and Toeplitz (-c_j on subdiagonal j), so
 * db = L^-T dy: the same recursion run the other way over dy. */
nx_status nx_ir_vjp_scan_iir(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    double c[NX_SCAN_IIR_MAX_ORDER];
    for (int j = 0; j < v.a[2]; j++)
        c[j] = iir_coef(v.a, j);
    dx[0] = nx_scan_iir(g, dy, (int)v.a[0], v.a[1] == 0, (int)v.a[2], c);
    return NX_OK;
}
