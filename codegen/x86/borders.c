/* Border/interior split of a kernel's innermost space loop (emit.h, nx_x86_borders_find).
 *
 * Index rules (pad modes, clamps, a concat's selects) put a mod, a clamp or a select into the
 * load offsets of the innermost loop; LLVM then loads lane by lane (scalar gathers), about 5x
 * slower than an affine, vectorised loop. Along that loop a rule is usually affine inside an
 * interval and different only near the ends: a reflect pad's
 *     select(mod(j - lo, 2n) < n, mod(j - lo, 2n), 2n - 1 - mod(j - lo, 2n))
 * is j - lo for j in [lo, lo + n). This file finds the interval [A, B) of loop L on which every
 * rule it can follow has one answer, and what each instruction is there (its alias: another
 * instruction, that plus a constant, or a constant). The emitter runs [0, A) and [B, n) with the
 * rules and [A, B) with the aliases, where the loads are then affine. An alias has the value of
 * its instruction at every point of [A, B), so the result is bit-identical.
 *
 * The analysis follows every i64 value as c * i + r, i being loop L's index and r ranging over
 * [lo, hi] as the other loops run over their extents. A rule resolves when the comparison it
 * hides has one answer for every r; the answer then holds on a half-line of i (c * i + hi <= K).
 * The interior is the intersection of the half-lines of the rules the aliased kernel still
 * depends on. A rule is resolved only when its half-line contains the middle of the loop, so the
 * intersection contains the middle and is never empty. Several pads or taps along the loop thus
 * give the union of their border widths. */
#include <string.h>

#include "codegen/x86/emit.h"

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
    nx_x86_alias *al;
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
    a->al[a->cur] = (nx_x86_alias){NX_X86_ALIAS_TO, to, c};
}

static form alias_const(analysis *a, int64_t v, bool boolean)
{
    a->al[a->cur] = (nx_x86_alias){NX_X86_ALIAS_CONST, -1, v};
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
        const nx_x86_alias *al = &a->al[id];
        if (al->kind == NX_X86_ALIAS_TO)
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
                if (al->kind != NX_X86_ALIAS_SELF && sel && j > 0)
                    continue;
                if (al->kind != NX_X86_ALIAS_SELF && lg && a->f[in->a[j]].kind != F_BOOL)
                    continue;
                live[in->a[j]] = 1;
            }
        }
    }
}

/* The interior the live aliases need; false when it is not worth a split. */
static bool interior(const analysis *a, const uint8_t *live, nx_x86_borders *s)
{
    const nx_kernel *k = a->k;
    int64_t lo = 0, hi = k->extent[a->loop] - 1;
    int resolved = 0;
    for (int32_t id = 0; id < k->ninst; id++) {
        if (!live[id] || a->al[id].kind == NX_X86_ALIAS_SELF)
            continue;
        lo = a->need[2 * id] > lo ? a->need[2 * id] : lo;
        hi = a->need[2 * id + 1] < hi ? a->need[2 * id + 1] : hi;
        resolved += a->mask[id] >> a->loop & 1;
    }
    s->lo = lo;
    s->hi = hi + 1;
    return resolved > 0 && s->hi - s->lo >= NX_X86_BORDERS_MIN;
}

nx_status nx_x86_borders_find(const nx_kernel *k, const uint32_t *mask, nx_x86_borders *s)
{
    memset(s, 0, sizeof *s);
    s->loop = -1;
    int L = k->ndim - 1;
    if (k->kind != NX_KERNEL_LOOP || L < 0 || k->extent[L] < NX_X86_BORDERS_MIN ||
        k->extent[L] > NMAX)
        return NX_OK;
    size_t n = (size_t)k->ninst + 1;
    analysis a = {.k = k, .mask = mask, .loop = L, .mid = (k->extent[L] - 1) / 2};
    a.f = nx_rt_alloc(k->ctx, n * sizeof *a.f);
    a.need = nx_rt_alloc(k->ctx, 2 * n * sizeof *a.need);
    a.al = nx_rt_alloc(k->ctx, n * sizeof *a.al);
    uint8_t *live = nx_rt_calloc(k->ctx, n, 1);
    nx_status st = NX_OK;
    if (!a.f || !a.need || !a.al || !live) {
        st = nx_rt_nomem(k->ctx, "x86 borders", n * sizeof *a.f);
    } else {
        for (int32_t id = 0; id < k->ninst; id++) {
            a.cur = id;
            a.al[id] = (nx_x86_alias){NX_X86_ALIAS_SELF, -1, 0};
            a.need[2 * id] = INT64_MIN;
            a.need[2 * id + 1] = INT64_MAX;
            a.f[id] = visit(&a, id);
            /* a value that does not vary along the loop is c = 0 whatever it is */
            if (a.f[id].kind == F_UNK && k->inst[id].dtype == NX_DTYPE_I64 && !(mask[id] >> L & 1))
                a.f[id] = aff(0, -BIG, BIG);
        }
        mark_live(&a, live);
        if (interior(&a, live, s)) {
            s->loop = L;
            s->alias = a.al;
            s->ninst = k->ninst;
            a.al = NULL;
        }
    }
    nx_rt_free(k->ctx, a.f, n * sizeof *a.f);
    nx_rt_free(k->ctx, a.need, 2 * n * sizeof *a.need);
    nx_rt_free(k->ctx, a.al, n * sizeof *a.al);
    nx_rt_free(k->ctx, live, n);
    return st;
}

void nx_x86_borders_free(nx_ctx *ctx, nx_x86_borders *s)
{
    nx_rt_free(ctx, s->alias, ((size_t)s->ninst + 1) * sizeof *s->alias);
    s->alias = NULL;
    s->loop = -1;
}
