/* Border/interior analysis of loop kernels (borders.h), for every backend.
 *
 * Along a space axis an index rule is usually affine inside an interval and different only near
 * the ends: a reflect pad's
 *     select(mod(j - lo, 2n) < n, mod(j - lo, 2n), 2n - 1 - mod(j - lo, 2n))
 * is j - lo for j in [lo, lo + n). This file finds the interval [A, B) of an axis L on which every
 * rule it can follow has one answer, and what each instruction is there (its alias: another
 * instruction, that plus a constant, or a constant). A backend runs the interval with the aliases
 * (affine loads, no mod) and the rest with the rules. An alias has the value of its instruction at
 * every point of [A, B), so the result is bit-identical.
 *
 * The analysis follows every i64 value as c * i + r, i being axis L's index and r ranging over
 * [lo, hi] as the other loops run over their whole extents. A rule resolves when the comparison
 * it hides has one answer for every r; the answer then holds on a half-line of i
 * (c * i + hi <= K). The interior is the intersection of the half-lines of the rules the aliased
 * kernel still depends on. A rule is resolved only when its half-line contains the middle of the
 * axis, so the intersection contains the middle and is never empty. Several pads or taps along the
 * axis thus give the union of their border widths.
 *
 * The box: since an axis's aliases hold whatever the other loops' indices are, the aliases of
 * every axis hold together in the product of the axes' intervals. Each instruction takes the alias
 * of one axis whose analysis counted it (its "live" set, which is closed under what the alias's
 * proof read: operands, conditions), so that axis's interval covers every half-line it needs. */
#include <string.h>

#include "codegen/borders.h"

#define BIG ((int64_t)1 << 50)  /* |values| at or beyond: unbounded */
#define CMAX ((int64_t)1 << 20) /* largest |c| followed */
#define NMAX ((int64_t)1 << 40) /* longest loop analysed */

enum { F_UNK, F_AFF, F_BOOL };

/* F_AFF: c * i + r, r in [lo, hi]. F_BOOL: the known truth value lo. F_UNK: not followed. */
typedef struct form {
    uint8_t kind;
    int64_t c, lo, hi;
} form;

typedef struct analysis {
    const nx_kernel *k;
    const uint32_t *mask;
    int loop;
    int64_t mid;
    form *f;
    int64_t *need; /* per instruction: interior [need[2 id], need[2 id + 1]] its alias needs */
    nx_kalias *al;
    int32_t cur; /* the instruction being analysed (where constraints are recorded) */
} analysis;

static int64_t sat(int64_t x)
{
    return x > BIG ? BIG : x < -BIG ? -BIG : x;
}

static int64_t mul_sat(int64_t x, int64_t m)
{
    if (x == 0 || m == 0)
        return 0;
    int64_t ax = x < 0 ? -x : x, am = m < 0 ? -m : m;
    if (ax >= BIG / am)
        return (x < 0) != (m < 0) ? -BIG : BIG;
    return x * m;
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static form unk(void)
{
    return (form){F_UNK, 0, 0, 0};
}

static form aff(int64_t c, int64_t lo, int64_t hi)
{
    if (c > CMAX || c < -CMAX)
        return unk();
    return (form){F_AFF, c, sat(lo), sat(hi)};
}

static form known(bool v)
{
    return (form){F_BOOL, 0, v, v};
}

static bool bounded(int64_t x)
{
    return x > -BIG && x < BIG;
}

/* Whether c * i + h <= K for every r at the middle of the loop; if so, records the half-line of
 * i on which it holds for the current instruction. */
static bool le(analysis *a, int64_t c, int64_t h, int64_t K)
{
    if (!bounded(h) || !bounded(K) || c * a->mid + h > K)
        return false;
    int64_t m = K - h, *need = &a->need[2 * a->cur];
    if (c > 0) {
        int64_t hi = floor_div(m, c);
        need[1] = hi < need[1] ? hi : need[1];
    } else if (c < 0) {
        int64_t lo = -floor_div(m, -c);
        need[0] = lo > need[0] ? lo : need[0];
    }
    return true;
}

/* c * i + l >= K, as le. */
static bool ge(analysis *a, int64_t c, int64_t l, int64_t K)
{
    return bounded(l) && bounded(K) && le(a, -c, -l, -K);
}

static void alias_to(analysis *a, int32_t to, int64_t c)
{
    a->al[a->cur] = (nx_kalias){NX_KALIAS_TO, to, c};
}

static form alias_const(analysis *a, int64_t v, bool boolean)
{
    a->al[a->cur] = (nx_kalias){NX_KALIAS_CONST, -1, v};
    return boolean ? known(v != 0) : aff(0, v, v);
}

static form pick(analysis *a, int32_t to)
{
    alias_to(a, to, 0);
    return a->f[to];
}

/* min/max of x and y: one of them on the half-line where x - y keeps its sign. */
static form minmax(analysis *a, const nx_kinst *in, bool max)
{
    form x = a->f[in->a[0]], y = a->f[in->a[1]];
    if (x.kind != F_AFF || y.kind != F_AFF)
        return unk();
    if (x.c == 0 && y.c == 0)
        return max ? aff(0, x.lo > y.lo ? x.lo : y.lo, x.hi > y.hi ? x.hi : y.hi)
                   : aff(0, x.lo < y.lo ? x.lo : y.lo, x.hi < y.hi ? x.hi : y.hi);
    int64_t dc = x.c - y.c, dlo = sat(x.lo - y.hi), dhi = sat(x.hi - y.lo);
    if (le(a, dc, dhi, 0)) /* x <= y */
        return pick(a, in->a[max ? 1 : 0]);
    if (ge(a, dc, dlo, 0)) /* x >= y */
        return pick(a, in->a[max ? 0 : 1]);
    return unk();
}

/* x div m and x mod m for a constant m > 0: x lies in one period [q m, q m + m). */
static form divmod(analysis *a, const nx_kinst *in, bool div)
{
    form x = a->f[in->a[0]], y = a->f[in->a[1]];
    if (x.kind != F_AFF || y.kind != F_AFF || y.c != 0 || y.lo != y.hi || y.lo <= 0)
        return unk();
    int64_t m = y.lo;
    if (!bounded(x.lo) || !bounded(x.hi) || (x.c == 0 && div))
        return x.c == 0 && !div ? aff(0, 0, m - 1) : unk();
    int64_t q = floor_div(x.c * a->mid + x.lo, m);
    if (floor_div(x.c * a->mid + x.hi, m) != q || !bounded(mul_sat(q, m)))
        return x.c == 0 ? aff(0, 0, m - 1) : unk();
    if (!ge(a, x.c, x.lo, q * m) || !le(a, x.c, x.hi, q * m + m - 1))
        return unk();
    if (div)
        return alias_const(a, q, false);
    alias_to(a, in->a[0], -q * m);
    return aff(x.c, x.lo - q * m, x.hi - q * m);
}

/* An i64 comparison with one answer on a half-line: d = x - y against 0. */
static form compare(analysis *a, const nx_kinst *in)
{
    form x = a->f[in->a[0]], y = a->f[in->a[1]];
    if (x.kind != F_AFF || y.kind != F_AFF)
        return unk();
    int64_t dc = x.c - y.c, dlo = sat(x.lo - y.hi), dhi = sat(x.hi - y.lo);
    int t = -1; /* the answer: 0, 1, or -1 for none */
    switch (in->prim) {
    case NX_PRIM_LT:
        t = le(a, dc, dhi, -1) ? 1 : ge(a, dc, dlo, 0) ? 0 : -1;
        break;
    case NX_PRIM_LE:
        t = le(a, dc, dhi, 0) ? 1 : ge(a, dc, dlo, 1) ? 0 : -1;
        break;
    case NX_PRIM_GT:
        t = ge(a, dc, dlo, 1) ? 1 : le(a, dc, dhi, 0) ? 0 : -1;
        break;
    case NX_PRIM_GE:
        t = ge(a, dc, dlo, 0) ? 1 : le(a, dc, dhi, -1) ? 0 : -1;
        break;
    default: { /* EQ, NE */
        bool eq = dc == 0 && dlo == 0 && dhi == 0;
        bool ne = !eq && (le(a, dc, dhi, -1) || ge(a, dc, dlo, 1));
        t = eq ? 1 : ne ? 0 : -1;
        if (t >= 0 && in->prim == NX_PRIM_NE)
            t = !t;
        break;
    }
    }
    return t < 0 ? unk() : alias_const(a, t, true);
}

static form logic(analysis *a, const nx_kinst *in)
{
    form x = a->f[in->a[0]];
    if (in->prim == NX_PRIM_NOT)
        return x.kind == F_BOOL ? alias_const(a, !x.lo, true) : unk();
    form y = a->f[in->a[1]];
    bool and = in->prim == NX_PRIM_AND;
    for (int side = 0; side < 2; side++) {
        form s = side ? y : x;
        if (s.kind != F_BOOL)
            continue;
        if (s.lo == !and) /* false and _, true or _ */
            return alias_const(a, !and, true);
        return pick(a, in->a[1 - side]); /* true and y = y, false or y = y */
    }
    return unk();
}

static form prim_form(analysis *a, const nx_kinst *in)
{
    const nx_kernel *k = a->k;
    bool i64 = in->dtype == NX_DTYPE_I64;
    form x = a->f[in->a[0]], y = nx_ir_prims[in->prim].arity > 1 ? a->f[in->a[1]] : unk();
    switch (in->prim) {
    case NX_PRIM_SELECT: {
        form c = a->f[in->a[0]];
        return c.kind == F_BOOL ? pick(a, in->a[c.lo ? 1 : 2]) : unk();
    }
    case NX_PRIM_AND:
    case NX_PRIM_OR:
    case NX_PRIM_NOT:
        return in->dtype == NX_DTYPE_BOOL ? logic(a, in) : unk();
    case NX_PRIM_LT:
    case NX_PRIM_LE:
    case NX_PRIM_GT:
    case NX_PRIM_GE:
    case NX_PRIM_EQ:
    case NX_PRIM_NE:
        return k->inst[in->a[0]].dtype == NX_DTYPE_I64 ? compare(a, in) : unk();
    default:
        break;
    }
    if (!i64 || x.kind != F_AFF || (nx_ir_prims[in->prim].arity > 1 && y.kind != F_AFF))
        return unk();
    switch (in->prim) {
    case NX_PRIM_NEG:
        return aff(-x.c, -x.hi, -x.lo);
    case NX_PRIM_ADD:
        return aff(x.c + y.c, x.lo + y.lo, x.hi + y.hi);
    case NX_PRIM_SUB:
        return aff(x.c - y.c, x.lo - y.hi, x.hi - y.lo);
    case NX_PRIM_MUL: {
        if (y.c != 0 || y.lo != y.hi) { /* a constant on the left */
            form t = x;
            x = y;
            y = t;
        }
        if (y.c == 0 && y.lo == y.hi) {
            int64_t m = y.lo, p = mul_sat(x.lo, m), q = mul_sat(x.hi, m);
            return aff(mul_sat(x.c, m), m < 0 ? q : p, m < 0 ? p : q);
        }
        if (x.c != 0 || y.c != 0)
            return unk();
        int64_t c[4] = {mul_sat(x.lo, y.lo), mul_sat(x.lo, y.hi), mul_sat(x.hi, y.lo),
                        mul_sat(x.hi, y.hi)};
        int64_t lo = c[0], hi = c[0];
        for (int j = 1; j < 4; j++)
            lo = c[j] < lo ? c[j] : lo, hi = c[j] > hi ? c[j] : hi;
        return aff(0, lo, hi);
    }
    case NX_PRIM_MIN:
    case NX_PRIM_MAX:
        return minmax(a, in, in->prim == NX_PRIM_MAX);
    case NX_PRIM_MOD:
    case NX_PRIM_DIV:
        return divmod(a, in, in->prim == NX_PRIM_DIV);
    default:
        return unk();
    }
}

static form visit(analysis *a, int32_t id)
{
    const nx_kinst *in = &a->k->inst[id];
    switch (in->op) {
    case NX_KOP_CONST:
        return in->dtype == NX_DTYPE_I64    ? aff(0, in->i, in->i)
               : in->dtype == NX_DTYPE_BOOL ? known(in->i != 0)
                                            : unk();
    case NX_KOP_IDX:
        return in->a[0] == a->loop ? aff(1, 0, 0) : aff(0, 0, a->k->extent[in->a[0]] - 1);
    case NX_KOP_PRIM:
        return prim_form(a, in);
    default:
        return unk();
    }
}

/* Marks what the kernel reads at an interior point: an alias's target and what decided it
 * (a select's condition, both sides of a comparison), otherwise the operands. */
static void mark_live(const analysis *a, uint8_t *live)
{
    const nx_kernel *k = a->k;
    for (int s = 0; s < k->nstores; s++)
        live[k->stores[s].value] = 1;
    for (int32_t id = k->ninst - 1; id >= 0; id--) {
        if (!live[id])
            continue;
        const nx_kinst *in = &k->inst[id];
        const nx_kalias *al = &a->al[id];
        if (al->kind == NX_KALIAS_TO)
            live[al->to] = 1;
        if (in->op == NX_KOP_LOAD) {
            live[in->a[1]] = 1;
        } else if (in->op == NX_KOP_REDUCE) {
            live[in->a[0]] = 1;
        } else if (in->op == NX_KOP_PRIM) {
            bool sel = in->prim == NX_PRIM_SELECT,
                 lg = in->prim == NX_PRIM_AND || in->prim == NX_PRIM_OR;
            for (int j = 0; j < nx_ir_prims[in->prim].arity; j++) {
                /* a resolved select needs its condition; a resolved and/or its known side */
                if (al->kind != NX_KALIAS_SELF && sel && j > 0)
                    continue;
                if (al->kind != NX_KALIAS_SELF && lg && a->f[in->a[j]].kind != F_BOOL)
                    continue;
                live[in->a[j]] = 1;
            }
        }
    }
}

/* The interior the live aliases need, and how many of them vary along the loop. */
static int interior(const analysis *a, const uint8_t *live, int64_t *lo_out, int64_t *hi_out)
{
    const nx_kernel *k = a->k;
    int64_t lo = 0, hi = k->extent[a->loop] - 1;
    int resolved = 0;
    for (int32_t id = 0; id < k->ninst; id++) {
        if (!live[id] || a->al[id].kind == NX_KALIAS_SELF)
            continue;
        lo = a->need[2 * id] > lo ? a->need[2 * id] : lo;
        hi = a->need[2 * id + 1] < hi ? a->need[2 * id + 1] : hi;
        resolved += a->mask[id] >> a->loop & 1;
    }
    *lo_out = lo;
    *hi_out = hi + 1;
    return resolved;
}

/* Scratch of one analysis, reused across axes. */
typedef struct scratch {
    size_t n;
    form *f;
    int64_t *need;
    nx_kalias *al;
    uint8_t *live;
} scratch;

static nx_status scratch_new(const nx_kernel *k, scratch *s)
{
    s->n = (size_t)k->ninst + 1;
    s->f = nx_rt_alloc(k->ctx, s->n * sizeof *s->f);
    s->need = nx_rt_alloc(k->ctx, 2 * s->n * sizeof *s->need);
    s->al = nx_rt_alloc(k->ctx, s->n * sizeof *s->al);
    s->live = nx_rt_alloc(k->ctx, s->n);
    if (!s->f || !s->need || !s->al || !s->live)
        return nx_rt_nomem(k->ctx, "kernel border analysis", s->n * sizeof *s->f);
    return NX_OK;
}

static void scratch_free(const nx_kernel *k, scratch *s)
{
    nx_rt_free(k->ctx, s->f, s->n * sizeof *s->f);
    nx_rt_free(k->ctx, s->need, 2 * s->n * sizeof *s->need);
    nx_rt_free(k->ctx, s->al, s->n * sizeof *s->al);
    nx_rt_free(k->ctx, s->live, s->n);
}

static bool axis_ok(const nx_kernel *k, int L)
{
    return k->kind == NX_KERNEL_LOOP && L >= 0 && L < k->ndim && k->extent[L] >= 1 &&
           k->extent[L] <= NMAX;
}

/* Analyses loop L into s (aliases, live set); the interior and the count of resolved rules that
 * vary along L. */
static int analyse(const nx_kernel *k, const uint32_t *mask, int L, scratch *s, int64_t *lo,
                   int64_t *hi)
{
    analysis a = {.k = k,
                  .mask = mask,
                  .loop = L,
                  .mid = (k->extent[L] - 1) / 2,
                  .f = s->f,
                  .need = s->need,
                  .al = s->al};
    for (int32_t id = 0; id < k->ninst; id++) {
        a.cur = id;
        a.al[id] = (nx_kalias){NX_KALIAS_SELF, -1, 0};
        a.need[2 * id] = INT64_MIN;
        a.need[2 * id + 1] = INT64_MAX;
        a.f[id] = visit(&a, id);
        /* a value that does not vary along the loop is c = 0 whatever it is */
        if (a.f[id].kind == F_UNK && k->inst[id].dtype == NX_DTYPE_I64 && !(mask[id] >> L & 1))
            a.f[id] = aff(0, -BIG, BIG);
    }
    memset(s->live, 0, s->n);
    mark_live(&a, s->live);
    return interior(&a, s->live, lo, hi);
}

nx_status nx_kborders_find(const nx_kernel *k, const uint32_t *mask, int loop, int64_t min_len,
                           nx_kborders *s)
{
    memset(s, 0, sizeof *s);
    s->loop = -1;
    if (!axis_ok(k, loop) || k->extent[loop] < min_len)
        return NX_OK;
    scratch sc = {0};
    nx_status st = scratch_new(k, &sc);
    if (st == NX_OK && analyse(k, mask, loop, &sc, &s->lo, &s->hi) > 0 &&
        s->hi - s->lo >= min_len) {
        s->loop = loop;
        s->alias = sc.al;
        s->ninst = k->ninst;
        sc.al = NULL;
    }
    scratch_free(k, &sc);
    return st;
}

void nx_kborders_free(nx_ctx *ctx, nx_kborders *s)
{
    nx_rt_free(ctx, s->alias, ((size_t)s->ninst + 1) * sizeof *s->alias);
    s->alias = NULL;
    s->loop = -1;
}

/* Takes axis L's aliases of the instructions its analysis counted; a constant wins over a link. */
static void merge(const nx_kernel *k, const scratch *sc, nx_kalias *out)
{
    for (int32_t id = 0; id < k->ninst; id++) {
        const nx_kalias *al = &sc->al[id];
        if (!sc->live[id] || al->kind == NX_KALIAS_SELF)
            continue;
        if (out[id].kind == NX_KALIAS_SELF ||
            (out[id].kind == NX_KALIAS_TO && al->kind == NX_KALIAS_CONST))
            out[id] = *al;
    }
}

nx_status nx_kborders_box(const nx_kernel *k, const uint32_t *mask, nx_kbox *b)
{
    memset(b, 0, sizeof *b);
    if (k->kind != NX_KERNEL_LOOP || k->ndim < 1)
        return NX_OK;
    for (int L = 0; L < k->ndim; L++)
        b->hi[L] = k->extent[L];
    size_t n = (size_t)k->ninst + 1;
    scratch sc = {0};
    nx_status st = scratch_new(k, &sc);
    nx_kalias *out = st == NX_OK ? nx_rt_alloc(k->ctx, n * sizeof *out) : NULL;
    if (st == NX_OK && !out)
        st = nx_rt_nomem(k->ctx, "kernel border box", n * sizeof *out);
    for (int32_t id = 0; st == NX_OK && id < k->ninst; id++)
        out[id] = (nx_kalias){NX_KALIAS_SELF, -1, 0};
    for (int L = 0; st == NX_OK && L < k->ndim; L++) {
        int64_t lo, hi;
        if (!axis_ok(k, L) || analyse(k, mask, L, &sc, &lo, &hi) == 0)
            continue;
        b->lo[L] = lo;
        b->hi[L] = hi;
        b->axes |= 1u << L;
        b->naxes++;
        merge(k, &sc, out);
    }
    if (st == NX_OK && b->naxes > 0) {
        b->alias = out;
        b->ninst = k->ninst;
        out = NULL;
    }
    nx_rt_free(k->ctx, out, n * sizeof *out);
    scratch_free(k, &sc);
    return st;
}

void nx_kbox_free(nx_ctx *ctx, nx_kbox *b)
{
    nx_rt_free(ctx, b->alias, ((size_t)b->ninst + 1) * sizeof *b->alias);
    b->alias = NULL;
    b->naxes = 0;
    b->axes = 0;
}

void nx_kbox_live(const nx_kernel *k, const nx_kalias *alias, uint8_t *live)
{
    memset(live, 0, (size_t)k->ninst);
    for (int s = 0; s < k->nstores; s++)
        live[k->stores[s].value] = 1;
    for (int32_t id = k->ninst - 1; id >= 0; id--) {
        if (!live[id])
            continue;
        const nx_kinst *in = &k->inst[id];
        const nx_kalias *al = alias ? &alias[id] : NULL;
        if (al && al->kind == NX_KALIAS_TO) {
            live[al->to] = 1;
        } else if (al && al->kind == NX_KALIAS_CONST) {
            continue;
        } else if (in->op == NX_KOP_LOAD) {
            live[in->a[1]] = 1;
        } else if (in->op == NX_KOP_REDUCE) {
            live[in->a[0]] = 1;
        } else if (in->op == NX_KOP_PRIM) {
            int arity = in->prim == NX_PRIM_SELECT ? 3 : nx_ir_prims[in->prim].arity;
            for (int j = 0; j < arity; j++)
                live[in->a[j]] = 1;
        }
    }
}

/* ---- value intervals -----------------------------------------------------------------------*/

typedef struct range {
    int64_t lo, hi;
} range;

static const range ANY = {INT64_MIN, INT64_MAX};

static bool finite(range r)
{
    return r.lo > -BIG && r.hi < BIG;
}

static range span(int64_t a, int64_t b, int64_t c, int64_t d)
{
    int64_t lo = a, hi = a;
    int64_t v[3] = {b, c, d};
    for (int j = 0; j < 3; j++)
        lo = v[j] < lo ? v[j] : lo, hi = v[j] > hi ? v[j] : hi;
    return (range){lo, hi};
}

/* floor(x / m) and x mod m (floor semantics, ir/prim-elementwise.c) for a constant m != 0. */
static range divmod_range(range x, range y, bool div)
{
    if (y.lo != y.hi || y.lo == 0 || !finite(x))
        return ANY;
    int64_t m = y.lo;
    if (div)
        return span(floor_div(x.lo, m), floor_div(x.hi, m), floor_div(x.lo, m), floor_div(x.hi, m));
    if (floor_div(x.lo, m) == floor_div(x.hi, m)) { /* one period: x - q m */
        int64_t q = floor_div(x.lo, m);
        return span(x.lo - q * m, x.hi - q * m, x.lo - q * m, x.hi - q * m);
    }
    return m > 0 ? (range){0, m - 1} : (range){m + 1, 0};
}

static range int_cast_range(int from)
{
    switch (from) {
    case NX_DTYPE_BOOL:
        return (range){0, 1};
    case NX_DTYPE_U8:
        return (range){0, 255};
    case NX_DTYPE_I8:
        return (range){-128, 127};
    case NX_DTYPE_I16:
        return (range){-32768, 32767};
    case NX_DTYPE_I32:
        return (range){INT32_MIN, INT32_MAX};
    default:
        return ANY;
    }
}

/* The range of an i64 PRIM from its operands' (lo, hi: earlier instructions' ranges). */
static range prim_range(const nx_kernel *k, const nx_kinst *in, const int64_t *lo,
                        const int64_t *hi)
{
#define R(id) ((range){lo[id], hi[id]})
    int from = k->inst[in->a[0]].dtype;
    if (in->prim == NX_PRIM_CAST)
        return from == NX_DTYPE_I64 ? R(in->a[0]) : int_cast_range(from);
    if (in->prim == NX_PRIM_SELECT) {
        range x = R(in->a[1]), y = R(in->a[2]);
        return (range){x.lo < y.lo ? x.lo : y.lo, x.hi > y.hi ? x.hi : y.hi};
    }
    range x = R(in->a[0]), y = nx_ir_prims[in->prim].arity > 1 ? R(in->a[1]) : ANY;
#undef R
    switch (in->prim) {
    case NX_PRIM_NEG:
        return finite(x) ? (range){-x.hi, -x.lo} : ANY;
    case NX_PRIM_ABS:
        if (!finite(x))
            return ANY;
        if (x.lo >= 0)
            return x;
        return x.hi <= 0 ? (range){-x.hi, -x.lo} : (range){0, -x.lo > x.hi ? -x.lo : x.hi};
    case NX_PRIM_MIN:
        return (range){x.lo < y.lo ? x.lo : y.lo, x.hi < y.hi ? x.hi : y.hi};
    case NX_PRIM_MAX:
        return (range){x.lo > y.lo ? x.lo : y.lo, x.hi > y.hi ? x.hi : y.hi};
    case NX_PRIM_DIV:
    case NX_PRIM_MOD:
        return divmod_range(x, y, in->prim == NX_PRIM_DIV);
    default:
        break;
    }
    if (!finite(x) || !finite(y))
        return ANY;
    switch (in->prim) {
    case NX_PRIM_ADD:
        return (range){x.lo + y.lo, x.hi + y.hi};
    case NX_PRIM_SUB:
        return (range){x.lo - y.hi, x.hi - y.lo};
    case NX_PRIM_MUL: {
        range p = span(mul_sat(x.lo, y.lo), mul_sat(x.lo, y.hi), mul_sat(x.hi, y.lo),
                       mul_sat(x.hi, y.hi));
        return finite(p) ? p : ANY;
    }
    default:
        return ANY;
    }
}

void nx_kranges(const nx_kernel *k, int64_t *lo, int64_t *hi)
{
    for (int32_t id = 0; id < k->ninst; id++) {
        const nx_kinst *in = &k->inst[id];
        range r = ANY;
        if (in->dtype == NX_DTYPE_I64) {
            if (in->op == NX_KOP_CONST)
                r = (range){in->i, in->i};
            else if (in->op == NX_KOP_IDX)
                r = (range){0, k->extent[in->a[0]] > 0 ? k->extent[in->a[0]] - 1 : 0};
            else if (in->op == NX_KOP_PRIM)
                r = prim_range(k, in, lo, hi);
        }
        lo[id] = r.lo;
        hi[id] = r.hi;
    }
}
