/* Window MIN/MAX stencils through shared-memory tiles (docs/cuda.md "Window stencils").
 *
 * The kernel: a 3-D POINTS kernel with a box split whose one stored value is, inside the box, a
 * float MAX (or MIN) network of compare-selects over loads of one buffer B at the point plus a
 * constant offset (grey dilation and erosion by a flat box: the separable passes fused into one
 * tree of 27 taps for 3^3). The general form evaluates the tree per point: 27 loads, 26
 * compare-selects and 27 NaN tests, about 150 instructions, whose issue time is above the HBM time.
 *
 * Exactness. A node v = b > a ? b : a (MIN: <) keeps its left operand on ties, so without NaN a
 * tree of them yields the first leaf, in the tree's left-to-right leaf order, whose value is the
 * maximum (by induction: each subtree yields its first maximal leaf, the node the left one unless
 * the right one is strictly larger). With a NaN leaf the network is NaN (nx_fmaxf at every node).
 * "The first maximal leaf" of a sequence is the first maximal of the first maximal leaves of any
 * split of the sequence into consecutive runs. When the leaf order is a product D0 x D1 x D2 of
 * per-axis offset lists, taken lexicographically (axis 0 slowest), the runs of equal d0 are
 * consecutive: out(p) = first-max over d0 in D0 of P(p0 + d0), where the plane partial
 * P(z) = first-max over (d1, d2) in D1 x D2, in that order, of B[z, p1 + d1, p2 + d2]. Each
 * partial is shared by |D0| outputs along axis 0. NaN: a partial is NaN when one of its leaves
 * is (a max.NaN chain), and the output NaN when one of its partials is; the value chains are the
 * bare compare-selects. So the results are bit-identical to the tree, signed zeros included.
 *
 * The generated kernel: each block takes a tile of 32 x 8 RY points (axes 2 and 1; a thread
 * computes RY rows: 2, or 4 on big grids) and marches along axis 0 over TZ = 16 outputs. Per plane
 * of B the block stages the tile plus its halo in shared memory (double-buffered, one barrier a
 * plane; the global loads run 3 planes ahead, 2 at RY 4) and each thread folds its plane partials
 * from there, keeping the last |D0| in registers (the plane loop is unrolled in the text, so the
 * window is renamed).
 * A staged value is F(q), the value every leaf reads at coordinate q: g0 && g1 && g2 ? B[t0 + t1
 * + t2] : c, through per-axis staging maps (term t_a and guard g_a of q_a, piecewise affine).
 * When the shell's leaves, as written, are one function of shifted coordinates (checked on the
 * host by evaluating the kernel's own instructions, see "the shell as written" below), the maps
 * are that function and the tiles cover the whole output: every border rule is evaluated once
 * per staged value instead of once per tap, and no point runs the general form. Otherwise the
 * maps are B's strides, the tiles cover the box, and the shell runs in blocks of its own (the
 * first ones), one point per thread as the general form computes it. */
#include <stdlib.h>
#include <string.h>

#include "codegen/ptx/emit-tile.h"

#define line nx_ptx_line

enum {
    ST_TX = 32, /* tile width along axis 2: one warp */
    ST_WARPS = NX_PTX_THREADS / ST_TX,
    ST_RY = 2,       /* rows a thread computes along axis 1 (option stencil_ry) */
    ST_RY_BIG = 4,   /* ... on grids of at least ST_BIG_TILES tiles of ST_RY_BIG rows */
    ST_BIG_TILES = 1024,
    ST_TZ = 16,      /* outputs a thread computes along axis 0 (option stencil_tz) */
    ST_DEPTH = 3,    /* planes its loads run ahead (option stencil_depth) */
    ST_DEPTH_BIG = 2, /* ... with ST_RY_BIG rows (registers: 64 instead of 80 at 3) */
    ST_PB = 1,       /* planes staged per barrier (option stencil_pb) */
    ST_SPAN = 9,     /* largest offset range per axis (hi - lo + 1) */
    ST_LEAVES = 729, /* ST_SPAN^3 */
    ST_RUNS = 16,    /* affine pieces of a staging map */
    ST_TERMS = 12,   /* index terms, and guards, of one leaf as written */
    ST_EVALS = 1 << 22, /* leaf evaluations the shell check may take (extents x leaves) */
};

/* The staging map of one axis: coordinate q -> (index term, guard), piecewise affine: run j
 * holds for r[j - 1].end <= q < r[j].end, the first for every smaller q, the last for every
 * larger one. A staged value is g0 && g1 && g2 ? B[t0 + t1 + t2] : c. */
typedef struct strun {
    int64_t end, a, b; /* term a q + b */
    bool g;
} strun;

typedef struct stmap {
    int n;
    strun r[ST_RUNS];
} stmap;

typedef struct stencil {
    int buf;                /* B */
    bool max;               /* MAX network, else MIN */
    int n[3];               /* offsets per axis, in fold order */
    int d[3][ST_SPAN];      /* the offsets (d[a][j] - lo[a] < ST_SPAN) */
    int lo[3], hi[3];       /* least and greatest offset per axis */
    int64_t stride[3];      /* B's C strides */
    int64_t numel;          /* B's elements */
    stmap map[3];           /* staging maps */
    bool guarded;           /* some map's guard fails somewhere: staged values may be c */
    uint32_t c;             /* that value (f32 bits) */
    bool whole;             /* the maps hold in the shell: tiles cover the whole output */
} stencil;

/* The instruction an instruction stands for in the box: TO aliases followed (for floats they
 * carry no offset: a select with a constant condition), -1 for a constant. */
static int resolve(const nx_kalias *al, int id)
{
    while (al[id].kind == NX_KALIAS_TO && al[id].c == 0)
        id = al[id].to;
    return al[id].kind == NX_KALIAS_SELF ? id : -1;
}

static bool affine_add(nx_ptx_affine *r, const nx_ptx_affine *a, const nx_ptx_affine *b, int64_t s)
{
    r->ok = a->ok && b->ok && !__builtin_mul_overflow(b->c, s, &r->c) &&
            !__builtin_add_overflow(a->c, r->c, &r->c);
    for (int l = 0; r->ok && l < NX_KERNEL_MAX_LOOPS; l++) {
        int64_t t;
        r->ok = !__builtin_mul_overflow(b->coef[l], s, &t) &&
                !__builtin_add_overflow(a->coef[l], t, &r->coef[l]);
    }
    return r->ok;
}

static bool affine_scale(nx_ptx_affine *r, const nx_ptx_affine *a, int64_t s)
{
    nx_ptx_affine zero = {.ok = true};
    return affine_add(r, &zero, a, s);
}

/* aff[id]: the i64 instruction's value inside the box as an affine function of the space loops
 * (the aliases followed); operands and alias targets are earlier instructions. */
static void affine_box(const nx_kernel *k, const nx_kalias *al, nx_ptx_affine *aff)
{
    for (int id = 0; id < k->ninst; id++) {
        const nx_kinst *in = &k->inst[id];
        nx_ptx_affine *r = &aff[id];
        memset(r, 0, sizeof *r);
        if (in->dtype != NX_DTYPE_I64)
            continue;
        if (al[id].kind == NX_KALIAS_CONST) {
            *r = (nx_ptx_affine){.ok = true, .c = al[id].c};
        } else if (al[id].kind == NX_KALIAS_TO) {
            nx_ptx_affine c = {.ok = true, .c = al[id].c};
            affine_add(r, &aff[al[id].to], &c, 1);
        } else if (in->op == NX_KOP_CONST) {
            *r = (nx_ptx_affine){.ok = true, .c = in->i};
        } else if (in->op == NX_KOP_IDX && in->a[0] < k->ndim) {
            r->ok = true;
            r->coef[in->a[0]] = 1;
        } else if (in->op == NX_KOP_PRIM) {
            const nx_ptx_affine *a = &aff[in->a[0]], *b = &aff[in->a[1]];
            bool ca = a->ok, cb = b->ok; /* constants: every coefficient 0 */
            for (int l = 0; l < NX_KERNEL_MAX_LOOPS; l++)
                ca = ca && !a->coef[l], cb = cb && !b->coef[l];
            if (in->prim == NX_PRIM_ADD || in->prim == NX_PRIM_SUB)
                affine_add(r, a, b, in->prim == NX_PRIM_ADD ? 1 : -1);
            else if (in->prim == NX_PRIM_NEG)
                affine_scale(r, a, -1);
            else if (in->prim == NX_PRIM_MUL && cb)
                affine_scale(r, a, b->c);
            else if (in->prim == NX_PRIM_MUL && ca)
                affine_scale(r, b, a->c);
        }
    }
}

/* The leaves of the network rooted at root, left to right (operand 0's subtree first), as the
 * loads' index instructions; false when a leaf is not a load of one f32 IN buffer or there are
 * too many. */
static bool leaves(const nx_kernel *k, const nx_kalias *al, int root, int prim, int *leaf,
                   int *nleaf, int *buf, int *stack)
{
    int top = 0;
    *nleaf = 0;
    *buf = -1;
    stack[top++] = root;
    while (top > 0) {
        int id = resolve(al, stack[--top]);
        if (id < 0)
            return false;
        const nx_kinst *in = &k->inst[id];
        if (in->op == NX_KOP_PRIM && in->prim == prim && in->dtype == NX_DTYPE_F32) {
            if (top + 2 > 2 * ST_LEAVES)
                return false;
            stack[top++] = in->a[1];
            stack[top++] = in->a[0];
            continue;
        }
        if (in->op != NX_KOP_LOAD || in->dtype != NX_DTYPE_F32 || *nleaf == ST_LEAVES ||
            (*buf >= 0 && in->a[0] != *buf))
            return false;
        *buf = in->a[0];
        leaf[(*nleaf)++] = in->a[1];
    }
    return k->bufs[*buf].role == NX_KBUF_IN && k->bufs[*buf].ndim == 3;
}

static int64_t round_div(int64_t a, int64_t b)
{
    int64_t q = a / b, r = a % b;
    if (2 * r > b)
        q++;
    else if (2 * r < -b)
        q--;
    return q;
}

/* Each leaf's offset vector e (c = e . stride exactly) and the product structure of their order. */
static bool offsets(const nx_ptx_affine *aff, const int *leaf, int nleaf, stencil *st)
{
    int64_t e[ST_LEAVES][3];
    for (int j = 0; j < nleaf; j++) {
        const nx_ptx_affine *a = &aff[leaf[j]];
        if (!a->ok)
            return false;
        for (int l = 0; l < NX_KERNEL_MAX_LOOPS; l++)
            if (a->coef[l] != (l < 3 ? st->stride[l] : 0))
                return false;
        int64_t c = a->c;
        for (int l = 0; l < 3; l++) {
            e[j][l] = l < 2 ? round_div(c, st->stride[l]) : c;
            c -= e[j][l] * st->stride[l];
            if (e[j][l] < -ST_SPAN || e[j][l] > ST_SPAN)
                return false;
        }
    }
    int n2 = 1, n12 = 1;
    while (n2 < nleaf && e[n2][0] == e[0][0] && e[n2][1] == e[0][1])
        n2++;
    while (n12 < nleaf && e[n12][0] == e[0][0])
        n12++;
    if (n12 % n2 || nleaf % n12)
        return false;
    st->n[0] = nleaf / n12, st->n[1] = n12 / n2, st->n[2] = n2;
    for (int a = 0; a < 3; a++) {
        if (st->n[a] > ST_SPAN)
            return false;
        int step = a == 0 ? n12 : a == 1 ? n2 : 1;
        st->lo[a] = st->hi[a] = (int)e[0][a];
        for (int j = 0; j < st->n[a]; j++) {
            st->d[a][j] = (int)e[j * step][a];
            st->lo[a] = st->d[a][j] < st->lo[a] ? st->d[a][j] : st->lo[a];
            st->hi[a] = st->d[a][j] > st->hi[a] ? st->d[a][j] : st->hi[a];
        }
        if (st->hi[a] - st->lo[a] >= ST_SPAN)
            return false;
    }
    for (int j = 0; j < nleaf; j++)
        if (e[j][0] != st->d[0][j / n12] || e[j][1] != st->d[1][j % n12 / n2] ||
            e[j][2] != st->d[2][j % n2])
            return false;
    return true;
}

/* Whether the box value of k is a stencil; fills st. */
static bool analyse(nx_ptx_gen *g, const nx_ptx_box_plan *bp, stencil *st)
{
    const nx_kernel *k = g->k;
    const nx_kalias *al = bp->b->alias;
    if (k->ndim != 3 || k->nloops != 3 || k->nstores != 1)
        return false;
    int root = resolve(al, k->stores[0].value);
    if (root < 0 || k->inst[root].op != NX_KOP_PRIM || k->inst[root].dtype != NX_DTYPE_F32 ||
        (k->inst[root].prim != NX_PRIM_MAX && k->inst[root].prim != NX_PRIM_MIN))
        return false;
    nx_ctx *ctx = k->ctx;
    size_t n = (size_t)k->ninst;
    nx_ptx_affine *aff = nx_rt_alloc(ctx, n * sizeof *aff);
    int *leaf = nx_rt_alloc(ctx, ST_LEAVES * sizeof *leaf);
    int *stack = nx_rt_alloc(ctx, 2 * ST_LEAVES * sizeof *stack);
    bool ok = false;
    if (!aff || !leaf || !stack) {
        g->t.failed = true;
    } else {
        int nleaf = 0;
        st->max = k->inst[root].prim == NX_PRIM_MAX;
        if (leaves(k, al, root, k->inst[root].prim, leaf, &nleaf, &st->buf, stack)) {
            const nx_kbuf *b = &k->bufs[st->buf];
            st->stride[2] = 1;
            st->stride[1] = b->shape[2];
            st->stride[0] = b->shape[1] * b->shape[2];
            st->numel = b->shape[0] * st->stride[0];
            affine_box(k, al, aff);
            ok = st->numel > 0 && offsets(aff, leaf, nleaf, st);
        }
    }
    nx_rt_free(ctx, aff, n * sizeof *aff);
    nx_rt_free(ctx, leaf, ST_LEAVES * sizeof *leaf);
    nx_rt_free(ctx, stack, 2 * ST_LEAVES * sizeof *stack);
    return ok;
}

/* ---- the shell as written: staging maps --------------------------------------------------------
 *
 * Outside the box the leaves are the network as written: loads through the pad's index rules,
 * under selects (a constant border: select(inside, subtree, cval)). A select whose other arm is
 * a constant c over a MAX/MIN subtree equals the subtree with every leaf under that select: when
 * the condition fails, every leaf is c and so is the subtree, bit for bit. So each leaf k is
 * V_k(p) = (every guard) ? B[index] : c. When the index is a sum of terms of one axis each and
 * every guard a conjunction of conditions of one axis each, V_k(p) = F(p + o_k) holds for one F
 * exactly when, on every axis a, the leaf's axis-a term and guard at p_a are one function of
 * p_a + d_a for all leaves. That is checked by evaluating the kernel's own instructions (the
 * interpreter's scalar semantics) at every coordinate of every axis; the tables found are the
 * staging maps, kept as affine runs. Then staging F(q) is exact everywhere, shell included, and
 * the tiles cover the whole output; otherwise the shell keeps its blocks (stencil.whole false). */

typedef struct stterm {
    int32_t id;
    int64_t s;
} stterm;

typedef struct sleaf {
    int nt, ng;
    stterm t[ST_TERMS];  /* load index = sum of s * value(id), each id of one axis or none */
    int32_t g[ST_TERMS]; /* bool instructions of one axis or none: the load when all hold */
} sleaf;

/* The kernel's i64/bool instructions at a point (loops 0..2), with the interpreter's semantics;
 * ok false at a load or a reduction. Values are memoised per stamp. */
typedef struct heval {
    const nx_kernel *k;
    nx_ir_val *val;
    uint32_t *stamp;
    uint32_t now;
    int64_t idx[3];
    bool ok;
} heval;

static nx_ir_val hval(heval *h, int32_t id, int depth)
{
    if (h->stamp[id] == h->now)
        return h->val[id];
    const nx_kinst *in = &h->k->inst[id];
    nx_ir_val v = {0, 0};
    if (depth > 256 || (in->op != NX_KOP_CONST && in->op != NX_KOP_IDX && in->op != NX_KOP_PRIM)) {
        h->ok = false;
    } else if (in->op == NX_KOP_CONST) {
        v = (nx_ir_val){in->f, in->i};
    } else if (in->op == NX_KOP_IDX) {
        v.i = in->a[0] < 3 ? h->idx[in->a[0]] : 0;
    } else {
        nx_dtype d0 = h->k->inst[in->a[0]].dtype;
        nx_ir_val x = hval(h, in->a[0], depth + 1);
        if (in->prim == NX_PRIM_SELECT)
            v = x.i ? hval(h, in->a[1], depth + 1) : hval(h, in->a[2], depth + 1);
        else if (in->prim == NX_PRIM_CAST)
            v = nx_ir_convert(x, d0, in->dtype);
        else if (nx_ir_prims[in->prim].arity == 1)
            v = nx_ir_scalar_unary(in->prim, d0, in->dtype, x);
        else
            v = nx_ir_scalar_binary(in->prim, d0, in->dtype, x, hval(h, in->a[1], depth + 1));
    }
    h->stamp[id] = h->now;
    h->val[id] = v;
    return v;
}

/* The axis an instruction depends on (0 when none), -1 when several. */
static int axis_of(uint32_t mask)
{
    mask &= 7;
    return mask == 0 ? 0 : (mask & (mask - 1)) ? -1 : __builtin_ctz(mask);
}

typedef struct swalk {
    const nx_kernel *k;
    const uint32_t *mask;
    heval *h;
    int buf, prim;
    sleaf *leaf;
    int n;
    int32_t g[ST_TERMS]; /* the guards on the path from the root */
    int ng;
    bool have_c;
    uint32_t c;
    bool ok;
} swalk;

static void guard_terms(swalk *w, int32_t id, int depth)
{
    const nx_kinst *in = &w->k->inst[id];
    if (in->dtype != NX_DTYPE_BOOL || depth > ST_TERMS)
        w->ok = false;
    else if (axis_of(w->mask[id]) >= 0 && w->ng < ST_TERMS)
        w->g[w->ng++] = id;
    else if (in->op == NX_KOP_PRIM && in->prim == NX_PRIM_AND)
        guard_terms(w, in->a[0], depth + 1), guard_terms(w, in->a[1], depth + 1);
    else
        w->ok = false;
}

/* index = sum of s * terms, through add, sub, neg and products by loop-invariant values. */
static bool index_terms(swalk *w, sleaf *l, int32_t id, int64_t s, int depth)
{
    const nx_kinst *in = &w->k->inst[id];
    if (in->dtype != NX_DTYPE_I64 || depth > 32)
        return false;
    if (axis_of(w->mask[id]) >= 0) {
        if (l->nt == ST_TERMS)
            return false;
        l->t[l->nt++] = (stterm){id, s};
        return true;
    }
    if (in->op != NX_KOP_PRIM)
        return false;
    int32_t a = in->a[0], b = in->a[1];
    switch (in->prim) {
    case NX_PRIM_ADD:
        return index_terms(w, l, a, s, depth + 1) && index_terms(w, l, b, s, depth + 1);
    case NX_PRIM_SUB:
        return s != INT64_MIN && index_terms(w, l, a, s, depth + 1) &&
               index_terms(w, l, b, -s, depth + 1);
    case NX_PRIM_NEG:
        return s != INT64_MIN && index_terms(w, l, a, -s, depth + 1);
    case NX_PRIM_MUL: {
        int32_t c = (w->mask[a] & 7) == 0 ? a : (w->mask[b] & 7) == 0 ? b : -1;
        if (c < 0)
            return false;
        w->h->now++;
        int64_t v = hval(w->h, c, 0).i, t;
        return w->h->ok && !__builtin_mul_overflow(s, v, &t) &&
               index_terms(w, l, c == a ? b : a, t, depth + 1);
    }
    default:
        return false;
    }
}

/* The leaves of the network as written, left to right, with their guards and index terms. */
static void walk(swalk *w, int32_t id, int depth)
{
    const nx_kinst *in = &w->k->inst[id];
    if (!w->ok || depth > 64) {
        w->ok = false;
    } else if (in->op == NX_KOP_PRIM && in->prim == w->prim && in->dtype == NX_DTYPE_F32) {
        walk(w, in->a[0], depth + 1);
        walk(w, in->a[1], depth + 1);
    } else if (in->op == NX_KOP_PRIM && in->prim == NX_PRIM_SELECT &&
               in->dtype == NX_DTYPE_F32 && w->k->inst[in->a[2]].op == NX_KOP_CONST) {
        float f = (float)w->k->inst[in->a[2]].f;
        uint32_t c;
        memcpy(&c, &f, 4);
        w->ok = !w->have_c || c == w->c;
        w->have_c = true;
        w->c = c;
        int ng = w->ng;
        guard_terms(w, in->a[0], 0);
        walk(w, in->a[1], depth + 1);
        w->ng = ng;
    } else if (in->op == NX_KOP_LOAD && in->dtype == NX_DTYPE_F32 && in->a[0] == w->buf &&
               w->n < ST_LEAVES) {
        sleaf *l = &w->leaf[w->n++];
        l->nt = 0;
        l->ng = w->ng;
        memcpy(l->g, w->g, sizeof l->g);
        w->ok = index_terms(w, l, in->a[1], 1, 0);
    } else {
        w->ok = false;
    }
}

/* One axis's table: tab[q - lo] for q in [lo, n + hi), from every leaf at every p in [0, n):
 * false when two leaves disagree (the leaves are not one function of shifted coordinates). */
typedef struct stab {
    int64_t *t;
    uint8_t *g, *set;
} stab;

static bool fill_axis(swalk *w, const stencil *st, int a, stab *tab)
{
    const nx_kernel *k = w->k;
    int n12 = st->n[1] * st->n[2];
    for (int64_t p = 0; p < k->extent[a]; p++) {
        w->h->now++;
        w->h->idx[0] = w->h->idx[1] = w->h->idx[2] = 0;
        w->h->idx[a] = p;
        for (int j = 0; j < w->n; j++) {
            const sleaf *l = &w->leaf[j];
            int64_t t = 0, v;
            bool g = true;
            for (int i = 0; i < l->nt; i++)
                if (axis_of(w->mask[l->t[i].id]) == a &&
                    (__builtin_mul_overflow(l->t[i].s, hval(w->h, l->t[i].id, 0).i, &v) ||
                     __builtin_add_overflow(t, v, &t)))
                    return false;
            for (int i = 0; i < l->ng; i++)
                if (axis_of(w->mask[l->g[i]]) == a)
                    g = g && hval(w->h, l->g[i], 0).i != 0;
            int dj = a == 0 ? j / n12 : a == 1 ? j % n12 / st->n[2] : j % st->n[2];
            int64_t q = p + st->d[a][dj] - st->lo[a];
            t = g ? t : 0; /* the index does not matter where the guard fails */
            if (!w->h->ok || (tab->set[q] && (tab->t[q] != t || tab->g[q] != g)))
                return false;
            tab->set[q] = 1, tab->t[q] = t, tab->g[q] = g;
        }
    }
    return true;
}

/* Whether (q, t, g) extends run r (first: the run is empty); sets the run's affine form. */
static bool run_takes(strun *r, int *pts, int64_t *q1, int64_t *t1, int64_t q, int64_t t, bool g)
{
    int64_t d, x;
    if (*pts == 0) {
        *r = (strun){.a = 0, .b = g ? t : 0, .g = g};
        *pts = 1, *q1 = q, *t1 = t;
        return true;
    }
    if (g != r->g)
        return false;
    if (!g)
        return true;
    if (*pts == 1) {
        int64_t a, b;
        if (__builtin_sub_overflow(t, *t1, &d) || d % (q - *q1))
            return false;
        a = d / (q - *q1);
        if (__builtin_mul_overflow(a, *q1, &x) || __builtin_sub_overflow(*t1, x, &b))
            return false;
        r->a = a, r->b = b;
        *pts = 2;
        return true;
    }
    return !__builtin_mul_overflow(r->a, q, &x) && !__builtin_add_overflow(x, r->b, &x) &&
           x == t;
}

/* The table as affine runs (unset entries take any value); false past ST_RUNS. */
static bool compress(const stab *tab, int64_t lo, int64_t size, stmap *m)
{
    int pts = 0;
    int64_t q1 = 0, t1 = 0;
    m->n = 0;
    for (int64_t i = 0; i < size; i++) {
        if (!tab->set[i])
            continue;
        int64_t q = lo + i;
        if (m->n > 0 && run_takes(&m->r[m->n - 1], &pts, &q1, &t1, q, tab->t[i], tab->g[i]))
            continue;
        if (m->n == ST_RUNS)
            return false;
        if (m->n > 0)
            m->r[m->n - 1].end = q;
        pts = 0;
        run_takes(&m->r[m->n++], &pts, &q1, &t1, q, tab->t[i], tab->g[i]);
    }
    if (m->n == 0) /* no leaf reads this axis's coordinates: any map */
        m->r[m->n++] = (strun){.g = true};
    m->r[m->n - 1].end = INT64_MAX;
    return true;
}

static bool maps_from_tables(swalk *w, stencil *st, stab *tab)
{
    bool ok = true;
    st->guarded = false;
    for (int a = 0; a < 3 && ok; a++) {
        int64_t size = w->k->extent[a] + st->hi[a] - st->lo[a];
        memset(tab->set, 0, (size_t)size);
        ok = fill_axis(w, st, a, tab) && compress(tab, st->lo[a], size, &st->map[a]);
        for (int j = 0; ok && j < st->map[a].n; j++)
            st->guarded = st->guarded || !st->map[a].r[j].g;
    }
    st->c = w->c;
    return ok && (w->have_c || !st->guarded);
}

/* Fills st's maps from the shell as written and sets st->whole; false only for lack of memory.
 * mask: nx_kernel_loop_masks. */
static bool shell_maps(const nx_kernel *k, const uint32_t *mask, stencil *st)
{
    st->whole = false;
    int64_t big = 0, evals = 0;
    for (int a = 0; a < 3; a++) {
        big = k->extent[a] > big ? k->extent[a] : big;
        evals += k->extent[a] * st->n[0] * st->n[1] * st->n[2];
    }
    if (evals > ST_EVALS)
        return true;
    nx_ctx *ctx = k->ctx;
    size_t n = (size_t)k->ninst, tn = (size_t)big + 2 * ST_SPAN;
    heval h = {.k = k, .ok = true};
    swalk w = {.k = k, .mask = mask, .h = &h, .buf = st->buf, .ok = true};
    stab tab;
    h.val = nx_rt_alloc(ctx, n * sizeof *h.val);
    h.stamp = nx_rt_calloc(ctx, n, sizeof *h.stamp);
    w.leaf = nx_rt_alloc(ctx, ST_LEAVES * sizeof *w.leaf);
    tab.t = nx_rt_alloc(ctx, tn * sizeof *tab.t);
    tab.g = nx_rt_alloc(ctx, tn);
    tab.set = nx_rt_alloc(ctx, tn);
    bool ok = h.val && h.stamp && w.leaf && tab.t && tab.g && tab.set;
    if (ok) {
        int root = k->stores[0].value;
        w.prim = st->max ? NX_PRIM_MAX : NX_PRIM_MIN;
        walk(&w, root, 0);
        st->whole = w.ok && h.ok && w.n == st->n[0] * st->n[1] * st->n[2] &&
                    maps_from_tables(&w, st, &tab);
    }
    nx_rt_free(ctx, h.val, n * sizeof *h.val);
    nx_rt_free(ctx, h.stamp, n * sizeof *h.stamp);
    nx_rt_free(ctx, w.leaf, ST_LEAVES * sizeof *w.leaf);
    nx_rt_free(ctx, tab.t, tn * sizeof *tab.t);
    nx_rt_free(ctx, tab.g, tn);
    nx_rt_free(ctx, tab.set, tn);
    return ok;
}

/* The box form's maps: B's own strides, no guard (the box reads B as the kernel's aliases do). */
static void box_maps(stencil *st)
{
    st->guarded = false;
    for (int a = 0; a < 3; a++) {
        st->map[a].n = 1;
        st->map[a].r[0] = (strun){.end = INT64_MAX, .a = st->stride[a], .b = 0, .g = true};
    }
}

/* ---- emission ------------------------------------------------------------------------------*/

typedef struct tile {
    int64_t org[3], cov[3]; /* the tiles cover [org, org + cov) on each axis */
    int64_t nb[3];  /* tiles per axis */
    int64_t nt;     /* tile blocks (after the shell's) */
    int sw, sh;     /* the staged plane: sh rows of sw values */
    int rounds;     /* staging loads per thread and plane */
    int64_t ns;     /* shell blocks (the first ones; none when the tiles cover the output) */
    int tz;         /* outputs per thread along axis 0 */
    int ry, ty;     /* rows per thread along axis 1, rows per tile (ry * 8) */
    int depth;      /* planes the global loads run ahead (at least pb) */
    int pb;         /* planes staged per barrier */
    int np;         /* planes per tile: tz + the axis-0 span - 1 */
    bool wide;      /* staging indices in 64 bits */
    bool clamp;     /* staging indices clamped to B (some staged coordinate maps off it) */
} tile;

static size_t term_text(char *e, size_t len, const strun *r, const char *q, bool wide)
{
    const char *ll = wide ? "LL" : "";
    if (r->a == 0)
        return (size_t)snprintf(e, len, "%lld%s", (long long)r->b, ll);
    if (r->b == 0)
        return (size_t)snprintf(e, len, "%lld%s * %s", (long long)r->a, ll, q);
    return (size_t)snprintf(e, len, "%lld%s * %s + %lld%s", (long long)r->a, ll, q,
                            (long long)r->b, ll);
}

/* Map m's term (guard: its guard, 0 or 1) at the int variable q: the runs as a select chain. */
static void map_expr(nx_ptx_gen *g, char *e, size_t len, const stmap *m, const char *q,
                     bool guard, bool wide)
{
    size_t n = 0;
    for (int j = 0; j < m->n && n < len; j++) {
        const strun *r = &m->r[j];
        if (j + 1 < m->n)
            n += (size_t)snprintf(e + n, len - n, "%s < %lld ? ", q, (long long)r->end);
        if (n >= len)
            break;
        n += guard ? (size_t)snprintf(e + n, len - n, "%d", r->g)
                   : term_text(e + n, len - n, r, q, wide);
        if (j + 1 < m->n && n < len)
            n += (size_t)snprintf(e + n, len - n, " : ");
    }
    if (n >= len)
        g->t.failed = true;
}

/* Loads of plane j (B coordinate q0 = z0 + lo0 + j) into registers s<j>_<r>: F at the staged
 * coordinates through the maps. The index is clamped to B: a staged value off B (a surplus slot,
 * or a coordinate no output reads) is never read by an output. */
static void emit_stage_load(nx_ptx_gen *g, const stencil *st, const tile *tl, int j)
{
    const char *it = tl->wide ? "i64" : "int";
    char q[32], e[2048], c[48] = "";
    snprintf(q, sizeof q, "qz%d", j);
    line(g, "const int qz%d = z0 + %d;", j, st->lo[0] + j);
    map_expr(g, e, sizeof e, &st->map[0], q, false, tl->wide);
    line(g, "const %s t%d = %s;", it, j, e);
    if (st->guarded) {
        map_expr(g, e, sizeof e, &st->map[0], q, true, false);
        line(g, "const bool gz%d = %s;", j, e);
    }
    if (st->guarded)
        snprintf(c, sizeof c, " : __int_as_float(0x%08x)", (unsigned)st->c);
    if (!tl->clamp && !tl->wide)
        line(g, "const float *const pl%d = b%d + t%d;", j, st->buf, j);
    for (int r = 0; r < tl->rounds; r++) {
        const char *cond = st->guarded ? (snprintf(q, sizeof q, "gz%d && g%d ? ", j, r), q) : "";
        if (tl->clamp) {
            line(g, "const float s%d_%d = %sb%d[min(max(t%d + o%d, (%s)0), (%s)%lld)]%s;", j, r,
                 cond, st->buf, j, r, it, it, (long long)(st->numel - 1), c);
            continue;
        }
        if (tl->wide) {
            line(g, "const float s%d_%d = %sb%d[t%d + o%d]%s;", j, r, cond, st->buf, j, r, c);
            continue;
        }
        /* the plane's pointer is uniform: one mad.wide a load (the FMA pipe), written out so
         * that NVVM does not reassociate it into 64-bit adds and shifts on the ALU */
        line(g, "const float *a%d_%d;", j, r);
        line(g,
             "asm(\"mad.wide.s32 %%0, %%1, 4, %%2;\" : \"=l\"(a%d_%d) : \"r\"(o%d), \"l\"(pl%d));",
             j, r, r, j);
        line(g, "const float s%d_%d = %s__ldg(a%d_%d)%s;", j, r, cond, j, r, c);
    }
}

static void emit_stage_store(nx_ptx_gen *g, const tile *tl, int j)
{
    for (int r = 0; r < tl->rounds; r++)
        line(g, "sm[%d][threadIdx.x + %d] = s%d_%d;", j / tl->pb & 1,
             (j % tl->pb * tl->rounds + r) * NX_PTX_THREADS, j, r);
}

/* Plane j's partials p<j>_<r> (the thread's rows y + r, r < ry) over D1 x D2 from the staged
 * plane. Fast path: max.NaN (min.NaN) chains, sharing the row maxima of D2 between the rows: the
 * value of the first winner and NaN when a leaf is, except that a zero result does not tell which
 * zero came first. Then the compare-select chain over D1 x D2 in order (keeping the first of
 * equal values) decides. */
static void emit_partial(nx_ptx_gen *g, const stencil *st, const tile *tl, int j)
{
    const char *sel = st->max ? "nx_gtselectf" : "nx_ltselectf";
    const char *fn = st->max ? "nx_maxnanf" : "nx_minnanf";
    int span1 = st->hi[1] - st->lo[1] + 1, nrow = span1 + tl->ry - 1;
    line(g, "const float *sp%d = &sm[%d][%d + ty * %d + tx];", j, j / tl->pb & 1,
         j % tl->pb * tl->rounds * NX_PTX_THREADS, tl->ry * tl->sw);
    for (int row = 0; row < nrow; row++) { /* row maxima over D2 (unused ones are dropped) */
        line(g, "float q%d_%d = sp%d[%d];", j, row, j, row * tl->sw + st->d[2][0] - st->lo[2]);
        for (int b = 1; b < st->n[2]; b++)
            line(g, "q%d_%d = %s(q%d_%d, sp%d[%d]);", j, row, fn, j, row, j,
                 row * tl->sw + st->d[2][b] - st->lo[2]);
    }
    for (int r = 0; r < tl->ry; r++) {
        line(g, "float p%d_%d = q%d_%d;", j, r, j, r + st->d[1][0] - st->lo[1]);
        for (int a = 1; a < st->n[1]; a++)
            line(g, "p%d_%d = %s(p%d_%d, q%d_%d);", j, r, fn, j, r, j,
                 r + st->d[1][a] - st->lo[1]);
        line(g, "if (p%d_%d == 0.0f) {", j, r);
        g->ind++;
        bool first = true;
        for (int a = 0; a < st->n[1]; a++)
            for (int b = 0; b < st->n[2]; b++) {
                int off = (r + st->d[1][a] - st->lo[1]) * tl->sw + st->d[2][b] - st->lo[2];
                if (first)
                    line(g, "p%d_%d = sp%d[%d];", j, r, j, off);
                else
                    line(g, "p%d_%d = %s(sp%d[%d], p%d_%d);", j, r, sel, j, off, j, r);
                first = false;
            }
        g->ind--;
        line(g, "}");
    }
}

/* The tile block's coordinates and staging offsets (staged element e = threadIdx.x + 256 r: row
 * e / sw, column e % sw of the plane tile): o<r> = t1 + t2 of its coordinates, g<r> their
 * guards. */
static void emit_tile_setup(nx_ptx_gen *g, const stencil *st, const tile *tl)
{
    const char *it = tl->wide ? "i64" : "int";
    char e1[2048], e2[2048], q1[16], q2[16];
    line(g, "__shared__ float sm[2][%d];", tl->pb * tl->rounds * NX_PTX_THREADS);
    line(g, "const int tx = (int)threadIdx.x %% %d, ty = (int)threadIdx.x / %d;", ST_TX, ST_TX);
    line(g, "unsigned bt = blockIdx.x - %lldU;", (long long)tl->ns);
    line(g, "const int x0 = %lld + (int)(bt %% %lldU) * %d;", (long long)tl->org[2],
         (long long)tl->nb[2], ST_TX);
    line(g, "bt /= %lldU;", (long long)tl->nb[2]);
    line(g, "const int y0 = %lld + (int)(bt %% %lldU) * %d;", (long long)tl->org[1],
         (long long)tl->nb[1], tl->ty);
    line(g, "const int z0 = %lld + (int)(bt / %lldU) * %d;", (long long)tl->org[0],
         (long long)tl->nb[1], tl->tz);
    line(g, "const int x = x0 + tx, y = y0 + ty * %d;", tl->ry);
    line(g, "float *const out = b%d + ((i64)z0 * %lldLL + y) * %lldLL + x;", g->k->stores[0].buf,
         (long long)g->k->extent[1], (long long)g->k->extent[2]);
    /* bounds only on axes the tiles overhang */
    for (int r = 0; r < tl->ry; r++) {
        char bx[48] = "true", by[48] = "true";
        if (tl->cov[2] % ST_TX)
            snprintf(bx, sizeof bx, "x < %lld", (long long)(tl->org[2] + tl->cov[2]));
        if (tl->cov[1] % tl->ty)
            snprintf(by, sizeof by, "y + %d < %lld", r, (long long)(tl->org[1] + tl->cov[1]));
        line(g, "const bool act%d = %s && %s;", r, bx, by);
    }
    for (int r = 0; r < tl->rounds; r++) {
        snprintf(q1, sizeof q1, "qy%d", r);
        snprintf(q2, sizeof q2, "qx%d", r);
        line(g, "const int e%d = (int)threadIdx.x + %d;", r, r * NX_PTX_THREADS);
        line(g, "const int qy%d = y0 + %d + e%d / %d, qx%d = x0 + %d + e%d %% %d;", r, st->lo[1],
             r, tl->sw, r, st->lo[2], r, tl->sw);
        map_expr(g, e1, sizeof e1, &st->map[1], q1, false, tl->wide);
        map_expr(g, e2, sizeof e2, &st->map[2], q2, false, tl->wide);
        line(g, "const %s o%d = (%s) + (%s);", it, r, e1, e2);
        if (!st->guarded)
            continue;
        map_expr(g, e1, sizeof e1, &st->map[1], q1, true, false);
        map_expr(g, e2, sizeof e2, &st->map[2], q2, true, false);
        line(g, "const bool g%d = (%s) && (%s);", r, e1, e2);
    }
}

/* Output plane z0 + base, row y + r, from the partials of its window: the same two paths over
 * D0 (the fast chain, the compare-select chain in D0's order for a zero). */
static void emit_output(nx_ptx_gen *g, const stencil *st, const tile *tl, int base, int r)
{
    const char *sel = st->max ? "nx_gtselectf" : "nx_ltselectf";
    const char *fn = st->max ? "nx_maxnanf" : "nx_minnanf";
    const int64_t *ext = g->k->extent;
    if (tl->cov[0] % tl->tz)
        line(g, "if (act%d && z0 + %d < %lld) {", r, base, (long long)(tl->org[0] + tl->cov[0]));
    else
        line(g, "if (act%d) {", r);
    g->ind++;
    int pj[ST_SPAN] = {0};
    for (int a = 0; a < st->n[0]; a++)
        pj[a] = base + st->d[0][a] - st->lo[0];
    line(g, "float a = p%d_%d;", pj[0], r);
    for (int a = 1; a < st->n[0]; a++)
        line(g, "a = %s(a, p%d_%d);", fn, pj[a], r);
    line(g, "if (a == 0.0f) {");
    g->ind++;
    line(g, "a = p%d_%d;", pj[0], r);
    for (int a = 1; a < st->n[0]; a++)
        line(g, "a = %s(p%d_%d, a);", sel, pj[a], r);
    g->ind--;
    line(g, "}");
    /* a NaN comes from the max.NaN chain: already the canonical NaN (0x7fffffff) */
    line(g, "out[%lldLL] = a;", (long long)((base * ext[1] + r) * ext[2]));
    g->ind--;
    line(g, "}");
}

/* The tile blocks: plane j's global loads are issued `depth` planes ahead (registers); planes
 * are staged pb at a time into the shared buffer (j / pb) & 1, one barrier per group: the next
 * group is stored after the current group's partials. */
static void emit_tiles(nx_ptx_gen *g, const stencil *st, const tile *tl)
{
    int span0 = st->hi[0] - st->lo[0] + 1;
    emit_tile_setup(g, st, tl);
    for (int j = 0; j < tl->depth && j < tl->np; j++)
        emit_stage_load(g, st, tl, j);
    for (int j = 0; j < tl->pb && j < tl->np; j++)
        emit_stage_store(g, tl, j);
    line(g, "__syncthreads();");
    for (int j = 0; j < tl->np; j++) {
        if (j + tl->depth < tl->np)
            emit_stage_load(g, st, tl, j + tl->depth);
        emit_partial(g, st, tl, j);
        if ((j + 1) % tl->pb == 0 && j + 1 < tl->np) {
            for (int i = j + 1; i < j + 1 + tl->pb && i < tl->np; i++)
                emit_stage_store(g, tl, i);
            line(g, "__syncthreads();");
        }
        for (int r = 0; r < tl->ry && j - span0 + 1 >= 0; r++)
            emit_output(g, st, tl, j - span0 + 1, r);
    }
}

/* The shell blocks (the first ns): one point per thread, as the general form computes it. */
static void emit_shell_blocks(nx_ptx_gen *g, const nx_ptx_box_plan *bp, const tile *tl)
{
    const nx_kernel *k = g->k;
    const char *ut = g->narrow ? "unsigned" : "u64";
    long long shell = (long long)(nx_ir_numel(k->ndim, k->extent) - bp->inner);
    line(g, "if (blockIdx.x < %lldU) {", (long long)tl->ns);
    g->ind++;
    line(g, "const i64 p = (i64)blockIdx.x * %d + threadIdx.x;", NX_PTX_THREADS);
    line(g, "if (p < %lldLL) {", shell);
    g->ind++;
    line(g, "%s t = (%s)p;", ut, ut);
    for (int l = 0; l < k->ndim; l++)
        line(g, "%s i%d;", g->narrow ? "int" : "i64", l);
    nx_ptx_emit_shell(g, bp);
    g->ind--;
    line(g, "}");
    line(g, "return;");
    g->ind--;
    line(g, "}");
    line(g, "(void)points;");
}

/* The least and greatest term of map m over q in [lo, hi], and the largest |a q| and |b| on the
 * way; false on overflow. */
static bool map_range(const stmap *m, int64_t lo, int64_t hi, int64_t *tmin, int64_t *tmax,
                      int64_t *big)
{
    int64_t from = INT64_MIN;
    *tmin = INT64_MAX, *tmax = INT64_MIN, *big = 0;
    for (int j = 0; j < m->n; j++) {
        const strun *r = &m->r[j];
        int64_t a = from > lo ? from : lo, b = r->end - 1 < hi ? r->end - 1 : hi;
        from = r->end;
        if (a > b)
            continue;
        int64_t q[2] = {a, b};
        for (int i = 0; i < 2; i++) {
            int64_t x, y;
            if (__builtin_mul_overflow(r->a, q[i], &x) || __builtin_add_overflow(x, r->b, &y) ||
                x == INT64_MIN || r->b == INT64_MIN)
                return false;
            *tmin = y < *tmin ? y : *tmin, *tmax = y > *tmax ? y : *tmax;
            x = x < 0 ? -x : x;
            y = r->b < 0 ? -r->b : r->b;
            *big = x > *big ? x : *big, *big = y > *big ? y : *big;
        }
    }
    return *tmin <= *tmax;
}

/* The staging index arithmetic over every coordinate the tiles stage (surplus slots and tiles
 * past the covered range included): tl->wide when it needs 64 bits, tl->clamp unless every
 * index is on B. */
static void stage_range(const stencil *st, tile *tl)
{
    int64_t last[3] = {(tl->nb[0] - 1) * tl->tz + tl->np - 1,
                       (tl->nb[1] - 1) * tl->ty + (tl->rounds * NX_PTX_THREADS - 1) / tl->sw,
                       (tl->nb[2] - 1) * ST_TX + tl->sw - 1};
    int64_t lo = 0, hi = 0, big = st->numel;
    tl->wide = tl->clamp = true;
    for (int a = 0; a < 3; a++) {
        int64_t q = tl->org[a] + st->lo[a], mn, mx, b;
        if (!map_range(&st->map[a], q, q + last[a], &mn, &mx, &b) || b > INT32_MAX ||
            mn < INT32_MIN || mx > INT32_MAX || __builtin_add_overflow(big, b, &big))
            return;
        lo += mn, hi += mx; /* each within int32: no overflow */
        big += mn < 0 ? -mn : 0;
        big += mx > 0 ? mx : 0;
    }
    tl->wide = big > INT32_MAX;
    tl->clamp = lo < 0 || hi >= st->numel;
}

/* The tiles: over the whole output when the maps hold in the shell (whole), else over the box
 * with shell blocks first. */
static void plan_tiles(const nx_kernel *k, const nx_ptx_box_plan *bp, const stencil *st,
                       const nx_cuda_codegen_opts *o, tile *tl)
{
    memset(tl, 0, sizeof *tl);
    tl->sw = ST_TX + st->hi[2] - st->lo[2];
    tl->tz = o->stencil_tz ? o->stencil_tz : ST_TZ;
    for (int a = 0; a < 3; a++) {
        tl->org[a] = st->whole ? 0 : bp->b->lo[a];
        tl->cov[a] = st->whole ? k->extent[a] : bp->w[a];
    }
    tl->ry = o->stencil_ry ? o->stencil_ry : ST_RY;
    /* 4 rows a thread share more row maxima (fewer ALU instructions and shared loads a point)
     * but make 4x fewer tiles than 1 row: only on grids that still fill the device several
     * times (ST_BIG_TILES: the 256^3 row's 1024 tiles gained, docs/perf/cuda-stencil.md "tiles
     * over the whole output"; smaller grids unmeasured) */
    int64_t big = (tl->cov[2] + ST_TX - 1) / ST_TX *
                  ((tl->cov[1] + ST_WARPS * ST_RY_BIG - 1) / (ST_WARPS * ST_RY_BIG)) *
                  ((tl->cov[0] + tl->tz - 1) / tl->tz);
    if (!o->stencil_ry && big >= ST_BIG_TILES)
        tl->ry = ST_RY_BIG;
    tl->depth = o->stencil_depth ? o->stencil_depth : tl->ry >= ST_RY_BIG ? ST_DEPTH_BIG : ST_DEPTH;
    tl->pb = o->stencil_pb ? o->stencil_pb : ST_PB;
    tl->depth = tl->depth < tl->pb ? tl->pb : tl->depth;
    tl->ty = ST_WARPS * tl->ry;
    tl->sh = tl->ty + st->hi[1] - st->lo[1];
    tl->rounds = (tl->sw * tl->sh + NX_PTX_THREADS - 1) / NX_PTX_THREADS;
    tl->np = tl->tz + st->hi[0] - st->lo[0];
    tl->nb[2] = (tl->cov[2] + ST_TX - 1) / ST_TX;
    tl->nb[1] = (tl->cov[1] + tl->ty - 1) / tl->ty;
    tl->nb[0] = (tl->cov[0] + tl->tz - 1) / tl->tz;
    tl->nt = tl->nb[0] * tl->nb[1] * tl->nb[2];
    int64_t shell = nx_ir_numel(k->ndim, k->extent) - bp->inner;
    tl->ns = st->whole ? 0 : (shell + NX_PTX_THREADS - 1) / NX_PTX_THREADS;
    stage_range(st, tl);
}

bool nx_ptx_emit_stencil(nx_ptx_gen *g, const nx_ptx_box_plan *bp, nx_ptx_launch *launch)
{
    stencil st;
    memset(&st, 0, sizeof st);
    if (g->block_r >= 0 || bp->rows != 1 || !analyse(g, bp, &st))
        return g->t.failed;
    const nx_kernel *k = g->k;
    /* int tile coordinates */
    if (k->extent[0] > INT32_MAX / 2 || k->extent[1] > INT32_MAX / 2 ||
        k->extent[2] > INT32_MAX / 2)
        return false;
    const nx_cuda_codegen_opts *o = nx_rt_cuda_codegen(k->ctx);
    if (o->stencil_shell != NX_CUDA_ON && !shell_maps(k, g->mask, &st)) {
        g->t.failed = true;
        return true;
    }
    if (!st.whole)
        box_maps(&st);
    tile tl;
    plan_tiles(k, bp, &st, o, &tl);
    /* one block per shell chunk and tile within the runner's 2^24 */
    if (tl.nt + tl.ns >= (1 << 24))
        return false;
    g->ind = 1;
    if (tl.ns > 0)
        emit_shell_blocks(g, bp, &tl);
    else
        line(g, "(void)points;");
    emit_tiles(g, &st, &tl);
    nx_rt_text_put(&g->t, "}\n");
    launch->points = (tl.ns + tl.nt) * NX_PTX_THREADS;
    return true;
}
