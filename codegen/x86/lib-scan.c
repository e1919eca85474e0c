/* Scans on the host.
 *
 *   scan         y[t] = x[0] (+) ... (+) x[t] (reverse: x[t] (+) ... (+) x[n-1]) under SUM, PROD,
 *                MAX, MIN (a NaN makes every later output NaN; ties keep the first) or LOGSUMEXP
 *                (the online (m, s) carry in float64, s rounded to f32 each step for f32 data);
 *                attributes [axis, monoid, reverse]
 *   scan_linear  y[t] = a[t] * y[t-1] + b[t], y[-1] = 0 (reverse: y[t+1]); a and b broadcast to
 *                y's shape numpy's way; attributes [axis, reverse]
 *   scan_iir     y[t] = b[t] + c_1 y[t-1] + ... + c_k y[t-k], states before the start 0 and their
 *                terms still added (they decide the sign of a zero); attributes [axis, reverse,
 *                order, the coefficients' float64 bits], each rounded once to b's dtype
 *
 * Every product and every sum is rounded on its own, in the order written (the library is ISO C
 * without FMA contraction), so a line's outputs are those of the sequential loop whatever the
 * grouping. Lines are grouped two ways:
 *   inner > 1   the axis is not the last: a task is a block of adjacent columns of one outer
 *               index, advanced one step along the axis at a time (contiguous rows, vectorised)
 *   inner == 1  lines are contiguous: a task is LANES lines stepped together through a tile that
 *               holds STEPS samples of each, transposed so one vector operation advances all lanes */
#include <math.h>
#include <string.h>

#include "codegen/x86/lib.h"

#define COLS 1024  /* columns of a block task */
#define LANES 16   /* lines of a lane task */
#define STEPS 64   /* samples of each lane per tile */

/* ---- tiles ---------------------------------------------------------------------------------*/

/* tile[s][l] = src[off[l] + (t0 + s * dir) * stride] for the nl lanes and ns steps given; lanes
 * past nl keep what they hold (their results are never stored). */
#define TILE_IO(T)                                                                                 \
    static void tile_in_##T(T (*tile)[LANES], const T *src, const int64_t *off, int nl,            \
                            int64_t ns, int64_t t0, int64_t dir, int64_t stride)                   \
    {                                                                                              \
        for (int l = 0; l < nl; l++) {                                                             \
            const T *p = src + off[l] + t0 * stride;                                               \
            int64_t step = dir * stride;                                                           \
            for (int64_t s = 0; s < ns; s++)                                                       \
                tile[s][l] = p[s * step];                                                          \
        }                                                                                          \
    }                                                                                              \
    static void tile_out_##T(T (*tile)[LANES], T *dst, const int64_t *off, int nl, int64_t ns,     \
                             int64_t t0, int64_t dir)                                              \
    {                                                                                              \
        for (int l = 0; l < nl; l++) {                                                             \
            T *p = dst + off[l] + t0;                                                              \
            for (int64_t s = 0; s < ns; s++)                                                       \
                p[s * dir] = tile[s][l];                                                           \
        }                                                                                          \
    }
TILE_IO(float)
TILE_IO(double)

/* ---- scan_iir ------------------------------------------------------------------------------*/

typedef struct iir_job {
    const void *b;
    void *y;
    int order;
    bool rev;
    double c[NX_SCAN_IIR_MAX_ORDER];
    nx_x86_axis g;
    int64_t col_tasks; /* column blocks per outer index */
} iir_job;

/* One row step over n columns with ORDER terms: acc = b, then acc = acc + c_j * y_{t-1-j}. */
#define IIR_ROW(T, ORDER)                                                                          \
    static void iir_row_##T##_##ORDER(T *restrict y, const T *restrict b,                         \
                                      const T *const *prev, const T *c, int64_t n)                 \
    {                                                                                              \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T acc = b[i];                                                                          \
            for (int j = 0; j < ORDER; j++) {                                                      \
                T p = c[j] * prev[j][i];                                                           \
                acc = acc + p;                                                                     \
            }                                                                                      \
            y[i] = acc;                                                                            \
        }                                                                                          \
    }

#define IIR_TYPED(T)                                                                               \
    IIR_ROW(T, 1)                                                                                  \
    IIR_ROW(T, 2)                                                                                  \
    IIR_ROW(T, 3)                                                                                  \
    IIR_ROW(T, 4)                                                                                  \
    static void iir_cols_##T(const iir_job *jb, int64_t task)                                      \
    {                                                                                              \
        static const T zeros[COLS];                                                                \
        int64_t o = task / jb->col_tasks, j0 = (task % jb->col_tasks) * COLS;                      \
        int64_t inner = jb->g.inner, len = jb->g.len, n = inner - j0 < COLS ? inner - j0 : COLS;   \
        const T *b = (const T *)jb->b + o * len * inner + j0;                                      \
        T *y = (T *)jb->y + o * len * inner + j0;                                                  \
        T c[NX_SCAN_IIR_MAX_ORDER];                                                                \
        for (int j = 0; j < jb->order; j++)                                                        \
            c[j] = (T)jb->c[j];                                                                    \
        const T *prev[NX_SCAN_IIR_MAX_ORDER];                                                      \
        for (int j = 0; j < NX_SCAN_IIR_MAX_ORDER; j++)                                            \
            prev[j] = zeros;                                                                       \
        for (int64_t k = 0; k < len; k++) {                                                        \
            int64_t t = jb->rev ? len - 1 - k : k;                                                 \
            T *row = y + t * inner;                                                                \
            switch (jb->order) {                                                                   \
            case 1:                                                                                \
                iir_row_##T##_1(row, b + t * inner, prev, c, n);                                   \
                break;                                                                             \
            case 2:                                                                                \
                iir_row_##T##_2(row, b + t * inner, prev, c, n);                                   \
                break;                                                                             \
            case 3:                                                                                \
                iir_row_##T##_3(row, b + t * inner, prev, c, n);                                   \
                break;                                                                             \
            default:                                                                               \
                iir_row_##T##_4(row, b + t * inner, prev, c, n);                                   \
                break;                                                                             \
            }                                                                                      \
            for (int j = NX_SCAN_IIR_MAX_ORDER - 1; j > 0; j--)                                    \
                prev[j] = prev[j - 1];                                                             \
            prev[0] = row;                                                                         \
        }                                                                                          \
    }                                                                                              \
    static void iir_lanes_##T(const iir_job *jb, int64_t task)                                     \
    {                                                                                              \
        int64_t len = jb->g.len, l0 = task * LANES;                                                \
        int nl = (int)(jb->g.outer - l0 < LANES ? jb->g.outer - l0 : LANES), order = jb->order;    \
        int64_t off[LANES];                                                                        \
        for (int l = 0; l < nl; l++)                                                               \
            off[l] = (l0 + l) * len;                                                               \
        T tile[STEPS][LANES], st[NX_SCAN_IIR_MAX_ORDER][LANES], c[NX_SCAN_IIR_MAX_ORDER];          \
        memset(tile, 0, sizeof tile);                                                              \
        memset(st, 0, sizeof st);                                                                  \
        for (int j = 0; j < order; j++)                                                            \
            c[j] = (T)jb->c[j];                                                                    \
        int64_t dir = jb->rev ? -1 : 1, first = jb->rev ? len - 1 : 0;                             \
        for (int64_t k0 = 0; k0 < len; k0 += STEPS) {                                              \
            int64_t ns = len - k0 < STEPS ? len - k0 : STEPS, t0 = first + dir * k0;               \
            tile_in_##T(tile, jb->b, off, nl, ns, t0, dir, 1);                                     \
            for (int64_t s = 0; s < ns; s++) {                                                     \
                T acc[LANES];                                                                      \
                for (int l = 0; l < LANES; l++)                                                    \
                    acc[l] = tile[s][l];                                                           \
                for (int j = 0; j < order; j++)                                                    \
                    for (int l = 0; l < LANES; l++) {                                              \
                        T p = c[j] * st[j][l];                                                     \
                        acc[l] = acc[l] + p;                                                       \
                    }                                                                              \
                for (int j = order - 1; j > 0; j--)                                                \
                    memcpy(st[j], st[j - 1], sizeof st[j]);                                        \
                memcpy(st[0], acc, sizeof acc);                                                    \
                memcpy(tile[s], acc, sizeof acc);                                                  \
            }                                                                                      \
            tile_out_##T(tile, jb->y, off, nl, ns, t0, dir);                                       \
        }                                                                                          \
    }
IIR_TYPED(float)
IIR_TYPED(double)

typedef struct iir_run {
    iir_job job;
    bool f64;
} iir_run;

static void iir_chunk(void *user, int64_t begin, int64_t end, int chunk)
{
    (void)chunk;
    const iir_run *r = user;
    for (int64_t t = begin; t < end; t++) {
        if (r->job.g.inner > 1)
            r->f64 ? iir_cols_double(&r->job, t) : iir_cols_float(&r->job, t);
        else
            r->f64 ? iir_lanes_double(&r->job, t) : iir_lanes_float(&r->job, t);
    }
}

nx_status nx_x86_lib_scan_iir(const nx_x86_lib_call *c)
{
    const nx_kernel *k = c->k;
    const nx_kbuf *y = &k->bufs[k->nbufs - 1];
    iir_run r = {{.b = c->bufs[0], .y = c->bufs[k->nbufs - 1], .order = (int)k->attrs[2],
                  .rev = k->attrs[1] != 0,
                  .g = nx_x86_axis_of(y->ndim, y->shape, (int)k->attrs[0])},
                 y->dtype == NX_DTYPE_F64};
    for (int j = 0; j < r.job.order; j++)
        memcpy(&r.job.c[j], &k->attrs[3 + j], sizeof r.job.c[j]);
    nx_x86_axis g = r.job.g;
    if (g.outer == 0 || g.len == 0 || g.inner == 0)
        return NX_OK;
    if (g.inner > 1) {
        r.job.col_tasks = (g.inner + COLS - 1) / COLS;
        return nx_x86_lib_parallel(c->ctx, g.outer * r.job.col_tasks,
                                   g.len * (g.inner < COLS ? g.inner : COLS), iir_chunk, &r);
    }
    return nx_x86_lib_parallel(c->ctx, (g.outer + LANES - 1) / LANES, g.len * LANES, iir_chunk,
                               &r);
}

/* ---- scan_linear ---------------------------------------------------------------------------*/

/* Element strides of an operand broadcast to y's shape (0 along broadcast axes). */
static void bcast_strides(const nx_kbuf *a, int nd, const int64_t *shape, int64_t *st)
{
    int64_t s = 1;
    for (int d = nd - 1; d >= 0; d--) {
        int da = d - (nd - a->ndim);
        if (da < 0 || a->shape[da] == 1) {
            st[d] = 0;
        } else {
            st[d] = s;
            s *= a->shape[da];
        }
        (void)shape;
    }
}

/* The inner axes (after axis) of an operand: 1 when they run contiguously in y's order, 0 when
 * every one is broadcast, -1 otherwise. */
static int inner_kind(int nd, const int64_t *shape, const int64_t *st, int axis)
{
    bool zero = true, dense = true;
    int64_t want = 1;
    for (int d = nd - 1; d > axis; d--) {
        zero = zero && (st[d] == 0 || shape[d] == 1);
        dense = dense && (st[d] == want || shape[d] == 1);
        want *= shape[d];
    }
    return dense ? 1 : zero ? 0 : -1;
}

typedef struct lin_job {
    const void *a, *b;
    void *y;
    int nd, axis, ia, ib;
    bool rev, a_const; /* a_const: a is one value (every stride 0) */
    int64_t shape[NX_MAX_DIMS], sa[NX_MAX_DIMS], sb[NX_MAX_DIMS];
    nx_x86_axis g;
    int64_t col_tasks;
} lin_job;

/* Offsets of a, b and y at outer index o (a multi-index over the axes before the axis). */
static void outer_offsets(const lin_job *j, int64_t o, int64_t *oa, int64_t *ob, int64_t *oy)
{
    *oa = *ob = 0;
    *oy = o * j->g.len * j->g.inner;
    for (int d = j->axis - 1; d >= 0; d--) {
        int64_t i = o % j->shape[d];
        o /= j->shape[d];
        *oa += i * j->sa[d];
        *ob += i * j->sb[d];
    }
}

#define LIN_TYPED(T)                                                                               \
    /* n adjacent lines, a and b stepping IA / IB (0 or 1) per column. */                          \
    static inline void lin_block_##T(const lin_job *jb, const T *a, const T *b, T *y, int64_t n,   \
                                     int ia, int ib)                                               \
    {                                                                                              \
        int64_t len = jb->g.len, inner = jb->g.inner, sa = jb->sa[jb->axis];                       \
        int64_t sb = jb->sb[jb->axis];                                                             \
        for (int64_t k = 0; k < len; k++) {                                                        \
            int64_t t = jb->rev ? len - 1 - k : k;                                                 \
            const T *pa = a + t * sa, *pb = b + t * sb;                                            \
            T *py = y + t * inner;                                                                 \
            if (k == 0) {                                                                          \
                for (int64_t i = 0; i < n; i++) {                                                  \
                    T p = pa[i * ia] * (T)0;                                                       \
                    py[i] = p + pb[i * ib];                                                        \
                }                                                                                  \
            } else {                                                                               \
                const T *prev = py + (jb->rev ? inner : -inner);                                   \
                for (int64_t i = 0; i < n; i++) {                                                  \
                    T p = pa[i * ia] * prev[i];                                                    \
                    py[i] = p + pb[i * ib];                                                        \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static void lin_cols_##T(const lin_job *jb, int64_t task)                                      \
    {                                                                                              \
        int64_t o = task / jb->col_tasks, j0 = (task % jb->col_tasks) * COLS, oa, ob, oy;          \
        int64_t n = jb->g.inner - j0 < COLS ? jb->g.inner - j0 : COLS;                             \
        outer_offsets(jb, o, &oa, &ob, &oy);                                                       \
        const T *a = (const T *)jb->a + oa + j0 * jb->ia, *b = (const T *)jb->b + ob + j0 * jb->ib; \
        T *y = (T *)jb->y + oy + j0;                                                               \
        if (jb->ia && jb->ib)                                                                      \
            lin_block_##T(jb, a, b, y, n, 1, 1);                                                   \
        else if (jb->ib)                                                                           \
            lin_block_##T(jb, a, b, y, n, 0, 1);                                                   \
        else if (jb->ia)                                                                           \
            lin_block_##T(jb, a, b, y, n, 1, 0);                                                   \
        else                                                                                       \
            lin_block_##T(jb, a, b, y, n, 0, 0);                                                   \
    }                                                                                              \
    static void lin_lanes_##T(const lin_job *jb, int64_t task)                                     \
    {                                                                                              \
        int64_t len = jb->g.len, l0 = task * LANES;                                                \
        int nl = (int)(jb->g.outer - l0 < LANES ? jb->g.outer - l0 : LANES);                       \
        int64_t offa[LANES], offb[LANES], offy[LANES];                                             \
        for (int l = 0; l < nl; l++)                                                               \
            outer_offsets(jb, l0 + l, &offa[l], &offb[l], &offy[l]);                               \
        T ta[STEPS][LANES], tb[STEPS][LANES], acc[LANES];                                          \
        memset(ta, 0, sizeof ta);                                                                  \
        memset(tb, 0, sizeof tb);                                                                  \
        for (int l = 0; l < LANES; l++)                                                            \
            acc[l] = (T)0;                                                                         \
        const T ac = *(const T *)jb->a;                                                            \
        int64_t dir = jb->rev ? -1 : 1, first = jb->rev ? len - 1 : 0;                             \
        for (int64_t k0 = 0; k0 < len; k0 += STEPS) {                                              \
            int64_t ns = len - k0 < STEPS ? len - k0 : STEPS, t0 = first + dir * k0;               \
            tile_in_##T(tb, jb->b, offb, nl, ns, t0, dir, jb->sb[jb->axis]);                       \
            if (jb->a_const) {                                                                     \
                for (int64_t s = 0; s < ns; s++)                                                   \
                    for (int l = 0; l < LANES; l++) {                                              \
                        T p = ac * acc[l];                                                         \
                        acc[l] = p + tb[s][l];                                                     \
                        tb[s][l] = acc[l];                                                         \
                    }                                                                              \
            } else {                                                                               \
                tile_in_##T(ta, jb->a, offa, nl, ns, t0, dir, jb->sa[jb->axis]);                   \
                for (int64_t s = 0; s < ns; s++)                                                   \
                    for (int l = 0; l < LANES; l++) {                                              \
                        T p = ta[s][l] * acc[l];                                                   \
                        acc[l] = p + tb[s][l];                                                     \
                        tb[s][l] = acc[l];                                                         \
                    }                                                                              \
            }                                                                                      \
            tile_out_##T(tb, jb->y, offy, nl, ns, t0, dir);                                        \
        }                                                                                          \
    }                                                                                              \
    /* Any broadcast: one line at a time, offsets from the line's multi-index. */                  \
    static void lin_line_##T(const lin_job *jb, int64_t line)                                      \
    {                                                                                              \
        int64_t o = line / jb->g.inner, i = line % jb->g.inner, oa, ob, oy;                        \
        outer_offsets(jb, o, &oa, &ob, &oy);                                                       \
        oy += i;                                                                                   \
        for (int d = jb->nd - 1; d > jb->axis; d--) {                                              \
            int64_t q = i % jb->shape[d];                                                          \
            i /= jb->shape[d];                                                                     \
            oa += q * jb->sa[d];                                                                   \
            ob += q * jb->sb[d];                                                                   \
        }                                                                                          \
        const T *a = (const T *)jb->a + oa, *b = (const T *)jb->b + ob;                            \
        T *y = (T *)jb->y + oy, prev = (T)0;                                                       \
        int64_t len = jb->g.len, sa = jb->sa[jb->axis], sb = jb->sb[jb->axis];                     \
        for (int64_t k = 0; k < len; k++) {                                                        \
            int64_t t = jb->rev ? len - 1 - k : k;                                                 \
            T p = a[t * sa] * prev;                                                                \
            prev = p + b[t * sb];                                                                  \
            y[t * jb->g.inner] = prev;                                                             \
        }                                                                                          \
    }
LIN_TYPED(float)
LIN_TYPED(double)

typedef struct lin_run {
    lin_job job;
    bool f64;
    int path; /* 0 column blocks, 1 lanes, 2 single lines */
} lin_run;

static void lin_chunk(void *user, int64_t begin, int64_t end, int chunk)
{
    (void)chunk;
    const lin_run *r = user;
    for (int64_t t = begin; t < end; t++) {
        if (r->path == 0)
            r->f64 ? lin_cols_double(&r->job, t) : lin_cols_float(&r->job, t);
        else if (r->path == 1)
            r->f64 ? lin_lanes_double(&r->job, t) : lin_lanes_float(&r->job, t);
        else
            r->f64 ? lin_line_double(&r->job, t) : lin_line_float(&r->job, t);
    }
}

nx_status nx_x86_lib_scan_linear(const nx_x86_lib_call *c)
{
    const nx_kernel *k = c->k;
    const nx_kbuf *y = &k->bufs[k->nbufs - 1];
    lin_run r = {{.a = c->bufs[0], .b = c->bufs[1], .y = c->bufs[k->nbufs - 1], .nd = y->ndim,
                  .axis = (int)k->attrs[0], .rev = k->attrs[1] != 0},
                 y->dtype == NX_DTYPE_F64, 2};
    lin_job *j = &r.job;
    memcpy(j->shape, y->shape, (size_t)y->ndim * sizeof *y->shape);
    bcast_strides(&k->bufs[0], j->nd, j->shape, j->sa);
    bcast_strides(&k->bufs[1], j->nd, j->shape, j->sb);
    j->g = nx_x86_axis_of(j->nd, j->shape, j->axis);
    if (j->g.outer == 0 || j->g.len == 0 || j->g.inner == 0)
        return NX_OK;
    j->ia = inner_kind(j->nd, j->shape, j->sa, j->axis);
    j->ib = inner_kind(j->nd, j->shape, j->sb, j->axis);
    j->a_const = true;
    for (int d = 0; d < j->nd; d++)
        j->a_const = j->a_const && j->sa[d] == 0;
    int64_t len = j->g.len;
    if (j->ia >= 0 && j->ib >= 0 && j->g.inner > 1) {
        r.path = 0;
        j->col_tasks = (j->g.inner + COLS - 1) / COLS;
        return nx_x86_lib_parallel(c->ctx, j->g.outer * j->col_tasks,
                                   len * (j->g.inner < COLS ? j->g.inner : COLS), lin_chunk, &r);
    }
    if (j->g.inner == 1) {
        r.path = 1;
        return nx_x86_lib_parallel(c->ctx, (j->g.outer + LANES - 1) / LANES, len * LANES,
                                   lin_chunk, &r);
    }
    return nx_x86_lib_parallel(c->ctx, j->g.outer * j->g.inner, len, lin_chunk, &r);
}

/* ---- scan under a monoid -------------------------------------------------------------------*/

typedef struct mono_job {
    const void *x;
    void *y;
    int64_t m;
    bool rev;
    nx_dtype dt;
    nx_x86_axis g;
    int64_t col_tasks;
} mono_job;

/* The floats' monoid steps; MAX/MIN: a NaN sticks (NaN compares false, so the carry test keeps
 * it), and a strict comparison keeps the first of equals (the sign of a zero). */
#define F_SUM(c, x) ((c) + (x))
#define F_PROD(c, x) ((c) * (x))
#define F_MAX(c, x) ((x) != (x) || (c) != (c) ? NAN : (x) > (c) ? (x) : (c))
#define F_MIN(c, x) ((x) != (x) || (c) != (c) ? NAN : (x) < (c) ? (x) : (c))
#define I_SUM(c, x) ((int64_t)((uint64_t)(c) + (uint64_t)(x)))
#define I_PROD(c, x) ((int64_t)((uint64_t)(c) * (uint64_t)(x)))
#define I_MAX(c, x) ((x) > (c) ? (x) : (c))
#define I_MIN(c, x) ((x) < (c) ? (x) : (c))

/* A block of n columns of one outer index, carries in CT, elements T; IDENT the start. */
#define MONO_BLOCK(NAME, T, CT, OP, IDENT)                                                         \
    static void NAME(const mono_job *jb, const T *x, T *y, int64_t n)                              \
    {                                                                                              \
        CT c[COLS];                                                                                \
        for (int64_t i = 0; i < n; i++)                                                            \
            c[i] = (IDENT);                                                                        \
        int64_t len = jb->g.len, inner = jb->g.inner;                                              \
        for (int64_t k = 0; k < len; k++) {                                                        \
            int64_t t = jb->rev ? len - 1 - k : k;                                                 \
            const T *px = x + t * inner;                                                           \
            T *py = y + t * inner;                                                                 \
            for (int64_t i = 0; i < n; i++) {                                                      \
                c[i] = (CT)OP(c[i], (CT)px[i]);                                                    \
                py[i] = (T)c[i];                                                                   \
            }                                                                                      \
        }                                                                                          \
    }

#define MONO_FLOAT(T)                                                                              \
    MONO_BLOCK(sum_##T, T, T, F_SUM, 0)                                                            \
    MONO_BLOCK(prod_##T, T, T, F_PROD, 1)                                                          \
    MONO_BLOCK(max_##T, T, T, F_MAX, -INFINITY)                                                    \
    MONO_BLOCK(min_##T, T, T, F_MIN, INFINITY)
MONO_FLOAT(float)
MONO_FLOAT(double)

/* Integers carry in int64: sums and products wrap modulo 2^64, which truncated to the dtype is
 * the dtype's own wrapped result; max/min start at the dtype's limits. */
#define MONO_INT(T, LO, HI)                                                                        \
    MONO_BLOCK(sum_##T, T, int64_t, I_SUM, 0)                                                      \
    MONO_BLOCK(prod_##T, T, int64_t, I_PROD, 1)                                                    \
    MONO_BLOCK(max_##T, T, int64_t, I_MAX, LO)                                                     \
    MONO_BLOCK(min_##T, T, int64_t, I_MIN, HI)
MONO_INT(int8_t, INT8_MIN, INT8_MAX)
MONO_INT(int16_t, INT16_MIN, INT16_MAX)
MONO_INT(int32_t, INT32_MIN, INT32_MAX)
MONO_INT(int64_t, INT64_MIN, INT64_MAX)
MONO_INT(uint8_t, 0, UINT8_MAX)
/* bool: max/min only (or/and of 0/1) */
MONO_BLOCK(max_bool, uint8_t, int64_t, I_MAX, 0)
MONO_BLOCK(min_bool, uint8_t, int64_t, I_MIN, 1)

/* logsumexp: the carry (m, s) in float64; an element below m adds exp(x - m), one above rescales
 * s, one equal adds 1 (so +inf twice never meets inf - inf), -inf adds nothing; f32 rounds s each
 * step. The output is m + log(s), or m itself when m is infinite, rounded to the dtype. */
#define MONO_LSE(T, F32)                                                                           \
    static void lse_##T(const mono_job *jb, const T *x, T *y, int64_t n)                           \
    {                                                                                              \
        double m[COLS], s[COLS];                                                                   \
        bool nan[COLS];                                                                            \
        for (int64_t i = 0; i < n; i++) {                                                          \
            m[i] = -INFINITY;                                                                      \
            s[i] = 0;                                                                              \
            nan[i] = false;                                                                        \
        }                                                                                          \
        int64_t len = jb->g.len, inner = jb->g.inner;                                              \
        for (int64_t k = 0; k < len; k++) {                                                        \
            int64_t t = jb->rev ? len - 1 - k : k;                                                 \
            const T *px = x + t * inner;                                                           \
            T *py = y + t * inner;                                                                 \
            for (int64_t i = 0; i < n; i++) {                                                      \
                double v = px[i];                                                                  \
                if (v != v) {                                                                      \
                    nan[i] = true;                                                                 \
                } else if (v != -INFINITY) {                                                       \
                    if (v > m[i]) {                                                                \
                        s[i] = s[i] * exp(m[i] - v) + 1;                                           \
                        m[i] = v;                                                                  \
                    } else if (v == m[i]) {                                                        \
                        s[i] += 1;                                                                 \
                    } else {                                                                       \
                        s[i] += exp(v - m[i]);                                                     \
                    }                                                                              \
                    if (F32)                                                                       \
                        s[i] = (float)s[i];                                                        \
                }                                                                                  \
                double r = nan[i] ? NAN : isinf(m[i]) ? m[i] : m[i] + log(s[i]);                   \
                py[i] = (T)r;                                                                      \
            }                                                                                      \
        }                                                                                          \
    }
MONO_LSE(float, true)
MONO_LSE(double, false)

typedef void (*mono_fn)(const mono_job *, const void *, void *, int64_t);

/* By dtype and monoid (SUM, PROD, MAX, MIN, LOGSUMEXP); NULL where the shape rule refuses. */
static mono_fn mono_for(nx_dtype d, int64_t m)
{
#define MROW(T, L)                                                                                 \
    {                                                                                              \
        (mono_fn)sum_##T, (mono_fn)prod_##T, (mono_fn)max_##T, (mono_fn)min_##T, L                 \
    }
    static const mono_fn table[NX_DTYPE_COUNT][5] = {
        [NX_DTYPE_F32] = MROW(float, (mono_fn)lse_float),
        [NX_DTYPE_F64] = MROW(double, (mono_fn)lse_double),
        [NX_DTYPE_I8] = MROW(int8_t, NULL),
        [NX_DTYPE_I16] = MROW(int16_t, NULL),
        [NX_DTYPE_I32] = MROW(int32_t, NULL),
        [NX_DTYPE_I64] = MROW(int64_t, NULL),
        [NX_DTYPE_U8] = MROW(uint8_t, NULL),
        [NX_DTYPE_BOOL] = {NULL, NULL, (mono_fn)max_bool, (mono_fn)min_bool, NULL},
    };
#undef MROW
    return d < NX_DTYPE_COUNT && m >= 0 && m <= NX_MONOID_LOGSUMEXP ? table[d][m] : NULL;
}

typedef struct mono_run {
    mono_job job;
    mono_fn fn;
    size_t esize;
} mono_run;

/* Tasks: column blocks (inner > 1) or single lines (inner == 1, a block of one column). */
static void mono_chunk(void *user, int64_t begin, int64_t end, int chunk)
{
    (void)chunk;
    const mono_run *r = user;
    const mono_job *jb = &r->job;
    for (int64_t t = begin; t < end; t++) {
        int64_t o = t / jb->col_tasks, j0 = (t % jb->col_tasks) * COLS;
        int64_t n = jb->g.inner - j0 < COLS ? jb->g.inner - j0 : COLS;
        size_t at = (size_t)(o * jb->g.len * jb->g.inner + j0) * r->esize;
        r->fn(jb, (const char *)jb->x + at, (char *)jb->y + at, n);
    }
}

nx_status nx_x86_lib_scan(const nx_x86_lib_call *c)
{
    const nx_kernel *k = c->k;
    const nx_kbuf *x = &k->bufs[0];
    mono_run r = {{.x = c->bufs[0], .y = c->bufs[k->nbufs - 1], .m = k->attrs[1],
                   .rev = k->attrs[2] != 0, .dt = (nx_dtype)x->dtype,
                   .g = nx_x86_axis_of(x->ndim, x->shape, (int)k->attrs[0])},
                  mono_for((nx_dtype)x->dtype, k->attrs[1]), nx_dtype_size(x->dtype)};
    if (!r.fn)
        return nx_rt_error(c->ctx, NX_ERR_INTERNAL,
                           "CPU backend: scan kernel %s has monoid %lld over %s, which the scan "
                           "shape rule refuses",
                           k->name, (long long)k->attrs[1], nx_dtype_name(x->dtype));
    nx_x86_axis g = r.job.g;
    if (g.outer == 0 || g.len == 0 || g.inner == 0)
        return NX_OK;
    r.job.col_tasks = (g.inner + COLS - 1) / COLS;
    return nx_x86_lib_parallel(c->ctx, g.outer * r.job.col_tasks,
                               g.len * (g.inner < COLS ? g.inner : COLS), mono_chunk, &r);
}
