/* Lowering: each ROOT of the fusion becomes a kernel (docs/kernel-ir.md).
 *
 * A loop kernel is built by expanding its root's expression at symbolic indices: expr(node, idx)
 * returns the instruction computing node's value at the index instructions idx. Movement nodes
 * only rewrite idx (index maps); elementwise nodes expand their operands at the broadcast indices;
 * a reduction adds loops for its reduced axes and a REDUCE over them; materialised nodes (slots)
 * are LOADs at the C-order offset of idx. Expansions are memoised on (node, idx), which is sound
 * because kernel IR values depend only on their operands: x * x, or a difference read twice,
 * becomes one instruction. */
#include <string.h>

#include "codegen/lower.h"

/* The memo is an open-addressed hash table on (node, idx), grown to keep at most half its slots
 * full: an op unrolled at graph-build time (a small matrix factorisation written out per entry)
 * expands tens of thousands of values in one kernel, each reused by many consumers. */
#define MEMO_INITIAL 4096
/* Small i64 constants are one instruction per kernel, so that equal indices built in different
 * places (a broadcast's 0, a unit piece of a concat) are the same instruction and the memo above
 * sees them as one point. */
#define SMALL_CONSTS 64

typedef struct memo_entry {
    nx_node node; /* 0: an empty slot */
    uint32_t gen; /* the kernel the entry belongs to: older generations are empty slots */
    int32_t idx[NX_MAX_DIMS];
    int32_t value;
} memo_entry;

typedef struct lowerer {
    nx_ctx *ctx;
    const nx_ir_store *s;
    const uint8_t *role;
    const int32_t *slot_of; /* by node: the slot of a LEAF or ROOT */
    nx_kplan *plan;
    nx_kernel *k;
    int bufs_of_slot[NX_KERNEL_MAX_BUFFERS][2]; /* (slot, buffer) pairs of this kernel */
    int nbound;
    memo_entry *memo;
    size_t memo_cap; /* a power of two */
    size_t nmemo;
    uint32_t gen; /* this kernel's memo generation (a new kernel empties the memo by gen++) */
    int32_t small[SMALL_CONSTS]; /* this kernel's i64 constants 0..SMALL_CONSTS-1, or -1 */
    nx_status st;
} lowerer;

static int32_t fail(lowerer *lw, nx_status st, const char *fmt, nx_node id)
{
    if (lw->st == NX_OK)
        lw->st = nx_rt_error(lw->ctx, st, fmt, nx_ir_prim_name(nx_ir_node_at(lw->s, id)->op),
                             (unsigned)id);
    return -1;
}

static int32_t chk(lowerer *lw, int32_t v)
{
    if (v < 0 && lw->st == NX_OK && lw->k->nomem)
        lw->st = nx_rt_nomem(lw->ctx, "lowering", sizeof(nx_kinst));
    else if (v < 0 && lw->st == NX_OK)
        lw->st = nx_rt_error(lw->ctx, NX_ERR_UNSUPPORTED,
                             "lowering: kernel %s outgrew a limit of kernel IR (buffers or loops)",
                             lw->k->name);
    return v;
}

/* ---- index helpers -------------------------------------------------------------------------*/

static int32_t ci(lowerer *lw, int64_t v)
{
    if (v < 0 || v >= SMALL_CONSTS)
        return chk(lw, nx_kernel_const_i(lw->k, NX_DTYPE_I64, v));
    if (lw->small[v] < 0)
        lw->small[v] = chk(lw, nx_kernel_const_i(lw->k, NX_DTYPE_I64, v));
    return lw->small[v];
}

/* Bounds of an i64 index instruction, as far as a shallow look can tell (loads: unbounded). */
static void irange(const nx_kernel *k, int32_t id, int depth, int64_t *lo, int64_t *hi)
{
    const nx_kinst *in = &k->inst[id];
    *lo = INT64_MIN / 4, *hi = INT64_MAX / 4;
    if (in->op == NX_KOP_CONST) {
        *lo = *hi = in->i;
        return;
    }
    if (in->op == NX_KOP_IDX) {
        *lo = 0, *hi = k->extent[in->a[0]] - 1;
        return;
    }
    if (in->op != NX_KOP_PRIM || depth > 12 || in->prim == NX_PRIM_CAST)
        return;
    int64_t al, ah, bl, bh;
    irange(k, in->a[0], depth + 1, &al, &ah);
    if (in->prim != NX_PRIM_SELECT)
        irange(k, in->a[1], depth + 1, &bl, &bh);
    bool small = al > -(1LL << 40) && ah < (1LL << 40) && bl > -(1LL << 40) && bh < (1LL << 40);
    switch (in->prim) {
    case NX_PRIM_ADD:
        if (small)
            *lo = al + bl, *hi = ah + bh;
        break;
    case NX_PRIM_SUB:
        if (small)
            *lo = al - bh, *hi = ah - bl;
        break;
    case NX_PRIM_MUL:
        if (small && al >= 0 && bl >= 0 && ah <= (1LL << 20) && bh <= (1LL << 20))
            *lo = al * bl, *hi = ah * bh;
        break;
    case NX_PRIM_MOD:
        if (bl == bh && bl > 0)
            *lo = 0, *hi = bl - 1;
        break;
    case NX_PRIM_DIV:
        if (bl == bh && bl > 0 && al >= 0)
            *lo = al / bl, *hi = ah / bl;
        break;
    case NX_PRIM_MIN:
        *lo = al < bl ? al : bl, *hi = ah < bh ? ah : bh;
        break;
    case NX_PRIM_MAX:
        *lo = al > bl ? al : bl, *hi = ah > bh ? ah : bh;
        break;
    default:
        break;
    }
}

static bool is_const(const nx_kernel *k, int32_t id, int64_t *v)
{
    if (k->inst[id].op != NX_KOP_CONST)
        return false;
    *v = k->inst[id].i;
    return true;
}

/* x = a * c + b with b in [0, c): the quotient and remainder of x by c without dividing
 * (reshape of reshape, einsum's merged axes). */
static bool split_by(const nx_kernel *k, int32_t x, int64_t c, int32_t *q, int32_t *r)
{
    const nx_kinst *in = &k->inst[x];
    if (in->op != NX_KOP_PRIM || in->prim != NX_PRIM_ADD)
        return false;
    for (int side = 0; side < 2; side++) {
        int32_t m = in->a[side], b = in->a[1 - side];
        const nx_kinst *mi = &k->inst[m];
        int64_t cv, bl, bh, al, ah;
        if (mi->op != NX_KOP_PRIM || mi->prim != NX_PRIM_MUL || !is_const(k, mi->a[1], &cv) ||
            cv != c)
            continue;
        irange(k, b, 0, &bl, &bh);
        irange(k, mi->a[0], 0, &al, &ah);
        if (bl >= 0 && bh < c && al >= 0) {
            *q = mi->a[0];
            *r = b;
            return true;
        }
    }
    return false;
}

/* x as sum_i c[i] * t[i] + c0 through adds and multiplications by constants (the terms t are
 * the other instructions); false past AFF_MAX terms. */
#define AFF_MAX 8
typedef struct affine {
    int n;
    int32_t t[AFF_MAX];
    int64_t c[AFF_MAX];
    int64_t c0;
} affine;

static bool affine_of(const nx_kernel *k, int32_t x, int64_t scale, int depth, affine *f)
{
    const nx_kinst *in = &k->inst[x];
    int64_t v;
    if (is_const(k, x, &v)) {
        f->c0 += scale * v;
        return true;
    }
    if (depth < 16 && in->op == NX_KOP_PRIM && in->dtype == NX_DTYPE_I64) {
        if (in->prim == NX_PRIM_ADD)
            return affine_of(k, in->a[0], scale, depth + 1, f) &&
                   affine_of(k, in->a[1], scale, depth + 1, f);
        for (int side = 0; side < 2 && in->prim == NX_PRIM_MUL; side++)
            if (is_const(k, in->a[side], &v) && v > -(1LL << 31) && v < (1LL << 31))
                return affine_of(k, in->a[1 - side], scale * v, depth + 1, f);
    }
    if (f->n >= AFF_MAX || scale <= -(1LL << 40) || scale >= (1LL << 40))
        return false;
    f->t[f->n] = x;
    f->c[f->n++] = scale;
    return true;
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static int32_t iop(lowerer *lw, nx_prim op, int32_t a, int32_t b);

/* Rebuilds sum_i c[i] * t[i] / den + c0 over the terms i with keep[i]. */
static int32_t affine_build(lowerer *lw, const affine *f, const bool *keep, int64_t den,
                            int64_t c0)
{
    int32_t acc = -2;
    for (int i = 0; i < f->n; i++) {
        if (!keep[i])
            continue;
        int32_t term = iop(lw, NX_PRIM_MUL, f->t[i], ci(lw, f->c[i] / den));
        acc = acc == -2 ? term : iop(lw, NX_PRIM_ADD, acc, term);
    }
    return acc == -2 ? ci(lw, c0) : iop(lw, NX_PRIM_ADD, acc, ci(lw, c0));
}

/* x div m and x mod m (floor semantics) when x = m Q + R with R in [0, m) by the terms' ranges:
 * the terms whose coefficients m divides make Q, the rest R (a batch axis merged by einsum:
 * (b 102 + j 6 + k) mod 6 = k). -2 when the ranges do not show it. */
static int32_t divmod_affine(lowerer *lw, bool mod, int32_t x, int64_t m)
{
    const nx_kernel *k = lw->k;
    affine f = {0};
    if (!affine_of(k, x, 1, 0, &f))
        return -2;
    bool inq[AFF_MAX], inr[AFF_MAX];
    int64_t rlo = f.c0 - floor_div(f.c0, m) * m, rhi = rlo;
    for (int i = 0; i < f.n; i++) {
        inq[i] = f.c[i] % m == 0;
        inr[i] = !inq[i];
        if (inq[i])
            continue;
        int64_t lo, hi;
        irange(k, f.t[i], 0, &lo, &hi);
        if (lo < -(1LL << 20) || hi > (1LL << 20) || f.c[i] < -(1LL << 31) ||
            f.c[i] > (1LL << 31))
            return -2;
        rlo += f.c[i] > 0 ? f.c[i] * lo : f.c[i] * hi;
        rhi += f.c[i] > 0 ? f.c[i] * hi : f.c[i] * lo;
    }
    if (rlo < 0 || rhi >= m)
        return -2;
    return mod ? affine_build(lw, &f, inr, 1, f.c0 - floor_div(f.c0, m) * m)
               : affine_build(lw, &f, inq, m, floor_div(f.c0, m));
}

/* Index arithmetic with the identities that keep lowered index maps affine. */
static int32_t simplify(lowerer *lw, nx_prim op, int32_t a, int32_t b)
{
    const nx_kernel *k = lw->k;
    int64_t av, bv, al, ah;
    bool ac = is_const(k, a, &av), bc = is_const(k, b, &bv);
    if (ac && bc && (op == NX_PRIM_ADD || op == NX_PRIM_MUL || op == NX_PRIM_SUB))
        return nx_kernel_const_i(lw->k, NX_DTYPE_I64,
                                 op == NX_PRIM_ADD   ? av + bv
                                 : op == NX_PRIM_SUB ? av - bv
                                                     : av * bv);
    if ((op == NX_PRIM_ADD || op == NX_PRIM_SUB) && bc && bv == 0)
        return a;
    if (op == NX_PRIM_ADD && ac && av == 0)
        return b;
    if (op == NX_PRIM_MUL && bc && bv == 1)
        return a;
    if (op == NX_PRIM_MUL && ac && av == 1)
        return b;
    if ((op == NX_PRIM_MOD || op == NX_PRIM_DIV) && bc && bv > 0) {
        irange(k, a, 0, &al, &ah);
        if (al >= 0 && ah < bv)
            return op == NX_PRIM_MOD ? a : nx_kernel_const_i(lw->k, NX_DTYPE_I64, 0);
        int32_t q, r;
        if (split_by(k, a, bv, &q, &r))
            return op == NX_PRIM_MOD ? r : q;
        return divmod_affine(lw, op == NX_PRIM_MOD, a, bv);
    }
    return -2;
}

static int32_t iop(lowerer *lw, nx_prim op, int32_t a, int32_t b)
{
    if (a < 0 || b < 0)
        return -1;
    int32_t v = simplify(lw, op, a, b);
    if (v != -2)
        return chk(lw, v);
    return chk(lw, nx_kernel_prim(lw->k, op, NX_DTYPE_I64, a, b, -1));
}

static int32_t clamp(lowerer *lw, int32_t v, int64_t lo, int64_t hi)
{
    return iop(lw, NX_PRIM_MIN, iop(lw, NX_PRIM_MAX, v, ci(lw, lo)), ci(lw, hi));
}

static int32_t sel(lowerer *lw, nx_dtype d, int32_t c, int32_t a, int32_t b)
{
    if (c < 0 || a < 0 || b < 0)
        return -1;
    return chk(lw, nx_kernel_prim(lw->k, NX_PRIM_SELECT, d, c, a, b));
}

static int32_t cmp(lowerer *lw, nx_prim op, int32_t a, int32_t b)
{
    if (a < 0 || b < 0)
        return -1;
    return chk(lw, nx_kernel_prim(lw->k, op, NX_DTYPE_BOOL, a, b, -1));
}

/* C-order offset of idx in shape (extent-1 axes contribute nothing). */
static int32_t offset_of(lowerer *lw, int ndim, const int64_t *shape, const int32_t *idx)
{
    int32_t off = -1;
    int64_t stride = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        if (shape[d] != 1) {
            int32_t term = stride == 1 ? idx[d] : iop(lw, NX_PRIM_MUL, idx[d], ci(lw, stride));
            off = off < 0 ? term : iop(lw, NX_PRIM_ADD, term, off);
        }
        stride *= shape[d];
    }
    return off < 0 ? ci(lw, 0) : off;
}

/* ---- expansion -----------------------------------------------------------------------------*/

static int32_t expr(lowerer *lw, nx_node id, const int32_t *idx);

static int buffer_for(lowerer *lw, nx_node id)
{
    int32_t slot = lw->slot_of[id];
    for (int i = 0; i < lw->nbound; i++)
        if (lw->bufs_of_slot[i][0] == slot)
            return lw->bufs_of_slot[i][1];
    const nx_kslot *sl = &lw->plan->slots[slot];
    int b = nx_kernel_buffer(lw->k, NX_KBUF_IN, sl->dtype, sl->ndim, sl->shape, (uint32_t)slot);
    if (b < 0 || lw->nbound >= NX_KERNEL_MAX_BUFFERS)
        return chk(lw, -1);
    lw->bufs_of_slot[lw->nbound][0] = slot;
    lw->bufs_of_slot[lw->nbound][1] = b;
    lw->nbound++;
    return b;
}

static int32_t load_slot(lowerer *lw, nx_node id, const int32_t *idx)
{
    const nx_ir_node *n = nx_ir_node_at(lw->s, id);
    if (nx_ir_numel(n->ndim, n->shape) == 0)
        return chk(lw, nx_kernel_const_i(lw->k, n->dtype, 0)); /* never observed */
    int b = buffer_for(lw, id);
    if (b < 0)
        return -1;
    return chk(lw, nx_kernel_load(lw->k, b, offset_of(lw, n->ndim, n->shape, idx)));
}

static int32_t scalar_constant(lowerer *lw, const nx_ir_node *n)
{
    if (nx_ir_numel(n->ndim, n->shape) == 0)
        return chk(lw, nx_kernel_const_i(lw->k, n->dtype, 0));
    nx_ir_val v = nx_ir_get(nx_ir_node_blob(lw->s, n), n->dtype, 0);
    nx_kinst in = {.op = NX_KOP_CONST, .dtype = n->dtype, .a = {-1, -1, -1}, .i = v.i, .f = v.f};
    if (nx_ir_is_float(n->dtype))
        in.i = 0;
    else
        in.f = 0;
    return chk(lw, nx_kernel_emit(lw->k, in));
}

/* Operand idx for an operand of shape (ond, oshape) broadcast into a result of nd dims. */
static void bcast_idx(lowerer *lw, int nd, const int64_t *shape, const nx_ir_node *o,
                      const int32_t *idx, int32_t *oidx)
{
    int lead = nd - o->ndim;
    for (int d = 0; d < o->ndim; d++)
        oidx[d] = o->shape[d] == 1 && shape[lead + d] != 1 ? ci(lw, 0) : idx[lead + d];
}

static int32_t elementwise(lowerer *lw, const nx_ir_node *n, const int32_t *idx)
{
    const nx_node *ops = nx_ir_node_ops(lw->s, n);
    int32_t v[3] = {-1, -1, -1};
    for (uint32_t j = 0; j < n->nops; j++) {
        int32_t oidx[NX_MAX_DIMS];
        bcast_idx(lw, n->ndim, n->shape, nx_ir_node_at(lw->s, ops[j]), idx, oidx);
        v[j] = expr(lw, ops[j], oidx);
        if (v[j] < 0)
            return -1;
    }
    return chk(lw, nx_kernel_prim(lw->k, n->op, n->dtype, v[0], v[1], v[2]));
}

/* The input index of a group of axes: the output group's indices linearised, then unravelled
 * over the input group's axes (a group of one axis on each side passes its index through). */
static void reshape_group(lowerer *lw, const nx_ir_node *n, const nx_ir_node *x,
                          const int32_t *idx, int o0, int o1, int i0, int i1, int32_t *xi)
{
    if (o1 - o0 == 1 && i1 - i0 == 1) {
        xi[i0] = idx[o0];
        return;
    }
    int32_t lin = offset_of(lw, o1 - o0, n->shape + o0, idx + o0);
    for (int d = i1 - 1; d >= i0; d--) {
        if (x->shape[d] == 1) {
            xi[d] = ci(lw, 0);
            continue;
        }
        xi[d] = d == i0 ? lin : iop(lw, NX_PRIM_MOD, lin, ci(lw, x->shape[d]));
        if (d > i0)
            lin = iop(lw, NX_PRIM_DIV, lin, ci(lw, x->shape[d]));
    }
}

/* Axis groups: the shortest runs of output and input axes whose extents multiply to the same
 * number ([b, s1, s2, c] -> [b * s1, s2, c] is {b, s1} | {s2} | {c}); unit axes join the group
 * before them. Only a group's own indices are unravelled, so a reshape that merges or splits some
 * axes keeps the others' indices (no division by a whole row's length in a K-loop). */
static int32_t reshape(lowerer *lw, const nx_ir_node *n, const int32_t *idx)
{
    nx_node xid = nx_ir_node_ops(lw->s, n)[0];
    const nx_ir_node *x = nx_ir_node_at(lw->s, xid);
    int32_t xi[NX_MAX_DIMS];
    int o = 0, i = 0, no = n->ndim, ni = x->ndim;
    while (o < no || i < ni) {
        int o0 = o, i0 = i;
        int64_t po = o < no ? n->shape[o++] : 1, pi = i < ni ? x->shape[i++] : 1;
        while (po != pi) {
            if (po < pi && o < no)
                po *= n->shape[o++];
            else if (pi < po && i < ni)
                pi *= x->shape[i++];
            else /* no match (cannot happen for equal sizes): one group of the rest */
                o = no, i = ni, po = pi;
        }
        while (o < no && n->shape[o] == 1) /* unit axes join the group before them */
            o++;
        while (i < ni && x->shape[i] == 1)
            i++;
        if (i == i0) /* output axes of extent 1 only: nothing to index */
            continue;
        if (o == o0) {
            for (int d = i0; d < i; d++)
                xi[d] = ci(lw, 0);
            continue;
        }
        reshape_group(lw, n, x, idx, o0, o, i0, i, xi);
    }
    return expr(lw, xid, xi);
}

static int32_t pad_axis(lowerer *lw, int64_t mode, int32_t i, int64_t lo, int64_t n,
                        int32_t *inside)
{
    int32_t j = iop(lw, NX_PRIM_SUB, i, ci(lw, lo));
    switch (mode) {
    case NX_PAD_CONSTANT: {
        int32_t ge = cmp(lw, NX_PRIM_GE, j, ci(lw, 0)), lt = cmp(lw, NX_PRIM_LT, j, ci(lw, n));
        int32_t in = chk(lw, nx_kernel_prim(lw->k, NX_PRIM_AND, NX_DTYPE_BOOL, ge, lt, -1));
        *inside = *inside < 0 ? in
                              : chk(lw, nx_kernel_prim(lw->k, NX_PRIM_AND, NX_DTYPE_BOOL, *inside,
                                                       in, -1));
        return clamp(lw, j, 0, n - 1);
    }
    case NX_PAD_NEAREST:
        return clamp(lw, j, 0, n - 1);
    case NX_PAD_WRAP:
        return iop(lw, NX_PRIM_MOD, j, ci(lw, n)); /* sign of the divisor: in [0, n) */
    case NX_PAD_REFLECT: {
        int32_t m = iop(lw, NX_PRIM_MOD, j, ci(lw, 2 * n));
        int32_t back = iop(lw, NX_PRIM_SUB, ci(lw, 2 * n - 1), m);
        return sel(lw, NX_DTYPE_I64, cmp(lw, NX_PRIM_LT, m, ci(lw, n)), m, back);
    }
    default: { /* MIRROR */
        if (n == 1)
            return ci(lw, 0);
        int32_t m = iop(lw, NX_PRIM_MOD, j, ci(lw, 2 * n - 2));
        int32_t back = iop(lw, NX_PRIM_SUB, ci(lw, 2 * n - 2), m);
        return sel(lw, NX_DTYPE_I64, cmp(lw, NX_PRIM_LT, m, ci(lw, n)), m, back);
    }
    }
}

static int32_t pad(lowerer *lw, nx_node id, const nx_ir_node *n, const int32_t *idx)
{
    const int64_t *a = nx_ir_node_attrs(lw->s, n);
    nx_node xid = nx_ir_node_ops(lw->s, n)[0];
    const nx_ir_node *x = nx_ir_node_at(lw->s, xid);
    int32_t xi[NX_MAX_DIMS] = {0}, inside = -1;
    for (int d = 0; d < n->ndim; d++) {
        if (x->shape[d] == 0 && a[0] != NX_PAD_CONSTANT)
            return fail(lw, NX_ERR_UNSUPPORTED, "lowering: %s %%%u pads an empty axis", id);
        if (a[2 + d] == 0 && a[2 + n->ndim + d] == 0)
            xi[d] = idx[d];
        else
            xi[d] = pad_axis(lw, a[0], idx[d], a[2 + d], x->shape[d], &inside);
    }
    double cval;
    memcpy(&cval, &a[1], sizeof cval);
    if (a[0] == NX_PAD_CONSTANT && nx_ir_numel(x->ndim, x->shape) == 0)
        return chk(lw, nx_kernel_const_f(lw->k, n->dtype, cval));
    int32_t v = expr(lw, xid, xi);
    if (inside < 0 || v < 0)
        return v;
    return sel(lw, n->dtype, inside, v, chk(lw, nx_kernel_const_f(lw->k, n->dtype, cval)));
}

static int32_t concat(lowerer *lw, const nx_ir_node *n, const int32_t *idx)
{
    int axis = (int)nx_ir_node_attrs(lw->s, n)[0];
    const nx_node *ops = nx_ir_node_ops(lw->s, n);
    int64_t off[65];
    int np = (int)n->nops;
    if (np > 64)
        return fail(lw, NX_ERR_UNSUPPORTED, "lowering: %s %%%u has over 64 pieces", ops[0]);
    off[0] = 0;
    for (int p = 0; p < np; p++)
        off[p + 1] = off[p] + nx_ir_node_at(lw->s, ops[p])->shape[axis];
    int32_t v = -1;
    for (int p = np - 1; p >= 0; p--) {
        int64_t len = off[p + 1] - off[p];
        if (len == 0)
            continue;
        int32_t pi[NX_MAX_DIMS];
        memcpy(pi, idx, sizeof pi);
        /* a unit piece is read at 0 whatever the point: one index, so pieces that share
         * operands (an unrolled small matrix assembled entry by entry) share their expansion */
        pi[axis] = len == 1 ? ci(lw, 0)
                            : clamp(lw, iop(lw, NX_PRIM_SUB, idx[axis], ci(lw, off[p])), 0,
                                    len - 1);
        int32_t piece = expr(lw, ops[p], pi);
        v = v < 0 ? piece
                  : sel(lw, n->dtype, cmp(lw, NX_PRIM_LT, idx[axis], ci(lw, off[p + 1])), piece,
                        v);
    }
    return v;
}

static int32_t gather(lowerer *lw, const nx_ir_node *n, const int32_t *idx)
{
    int axis = (int)nx_ir_node_attrs(lw->s, n)[0];
    const nx_node *ops = nx_ir_node_ops(lw->s, n);
    const nx_ir_node *x = nx_ir_node_at(lw->s, ops[0]), *ix = nx_ir_node_at(lw->s, ops[1]);
    int32_t k = expr(lw, ops[1], idx + axis);
    if (k < 0)
        return -1;
    if (ix->dtype != NX_DTYPE_I64)
        k = chk(lw, nx_kernel_prim(lw->k, NX_PRIM_CAST, NX_DTYPE_I64, k, -1, -1));
    int32_t xi[NX_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        xi[d] = d < axis ? idx[d] : d > axis ? idx[d - 1 + ix->ndim] : clamp(lw, k, 0,
                                                                              x->shape[axis] - 1);
    return expr(lw, ops[0], xi);
}

static int32_t reduce(lowerer *lw, nx_node id, const nx_ir_node *n, const int32_t *idx)
{
    const int64_t *a = nx_ir_node_attrs(lw->s, n);
    nx_node xid = nx_ir_node_ops(lw->s, n)[0];
    const nx_ir_node *x = nx_ir_node_at(lw->s, xid);
    bool keep = a[1] != 0;
    int32_t xi[NX_MAX_DIMS];
    uint32_t mask = 0;
    int o = 0, nred = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (!a[2 + d]) {
            xi[d] = idx[o++];
            continue;
        }
        int l = nx_kernel_loop(lw->k, x->shape[d]);
        if (l < 0)
            return fail(lw, NX_ERR_UNSUPPORTED, "lowering: %s %%%u needs too many loops", id);
        mask |= 1u << l;
        xi[d] = chk(lw, nx_kernel_idx(lw->k, l));
        o += keep;
        nred++;
    }
    if (nred == 0) { /* folding each element alone: a loop of one */
        int l = nx_kernel_loop(lw->k, 1);
        if (l < 0)
            return fail(lw, NX_ERR_UNSUPPORTED, "lowering: %s %%%u needs too many loops", id);
        mask |= 1u << l;
    }
    int32_t v = expr(lw, xid, xi);
    if (v < 0)
        return -1;
    return chk(lw, nx_kernel_reduce(lw->k, (int)a[0], n->dtype, v, mask));
}

static int32_t expand(lowerer *lw, nx_node id, const int32_t *idx)
{
    const nx_ir_node *n = nx_ir_node_at(lw->s, id);
    const int64_t *a = nx_ir_node_attrs(lw->s, n);
    const nx_node *ops = nx_ir_node_ops(lw->s, n);
    int32_t xi[NX_MAX_DIMS];
    /* An empty value is never read (its loops do not run): any value stands for it. A concat
     * of empty pieces, for one, has no piece to select from. */
    if (nx_ir_numel(n->ndim, n->shape) == 0)
        return chk(lw, nx_kernel_const_i(lw->k, n->dtype, 0));
    switch (n->op) {
    case NX_PRIM_CONSTANT:
        return scalar_constant(lw, n);
    case NX_PRIM_IOTA: {
        int32_t i = idx[a[2 + n->ndim]];
        return n->dtype == NX_DTYPE_I64
                   ? i
                   : chk(lw, nx_kernel_prim(lw->k, NX_PRIM_CAST, n->dtype, i, -1, -1));
    }
    case NX_PRIM_RESHAPE:
        return reshape(lw, n, idx);
    case NX_PRIM_PERMUTE:
        for (int d = 0; d < n->ndim; d++)
            xi[a[d]] = idx[d];
        return expr(lw, ops[0], xi);
    case NX_PRIM_BROADCAST:
        bcast_idx(lw, n->ndim, n->shape, nx_ir_node_at(lw->s, ops[0]), idx, xi);
        return expr(lw, ops[0], xi);
    case NX_PRIM_SLICE:
        for (int d = 0; d < n->ndim; d++) {
            int64_t start = a[d], step = a[2 * n->ndim + d];
            int32_t t = step == 1 ? idx[d] : iop(lw, NX_PRIM_MUL, idx[d], ci(lw, step));
            xi[d] = start == 0 ? t : iop(lw, NX_PRIM_ADD, t, ci(lw, start));
        }
        return expr(lw, ops[0], xi);
    case NX_PRIM_REVERSE:
        for (int d = 0; d < n->ndim; d++)
            xi[d] = a[d] ? iop(lw, NX_PRIM_SUB, ci(lw, n->shape[d] - 1), idx[d]) : idx[d];
        return expr(lw, ops[0], xi);
    case NX_PRIM_PAD:
        return pad(lw, id, n, idx);
    case NX_PRIM_CONCAT:
        return concat(lw, n, idx);
    case NX_PRIM_WINDOW: {
        int nd = n->ndim / 2;
        for (int d = 0; d < nd; d++)
            xi[d] = iop(lw, NX_PRIM_ADD, iop(lw, NX_PRIM_MUL, idx[d], ci(lw, a[nd + d])),
                        iop(lw, NX_PRIM_MUL, idx[nd + d], ci(lw, a[2 * nd + d])));
        return expr(lw, ops[0], xi);
    }
    case NX_PRIM_GATHER:
        return gather(lw, n, idx);
    case NX_PRIM_REDUCE:
        return reduce(lw, id, n, idx);
    default:
        if (nx_ir_prim_elementwise(n->op))
            return elementwise(lw, n, idx);
        return fail(lw, NX_ERR_UNSUPPORTED, "lowering: %s %%%u cannot be inlined", id);
    }
}

static size_t memo_hash(nx_node id, int ndim, const int32_t *idx)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ id;
    for (int d = 0; d < ndim; d++)
        h = (h ^ (uint32_t)idx[d]) * 0x100000001b3ull;
    return (size_t)(h ^ (h >> 29));
}

static memo_entry *memo_slot(memo_entry *memo, size_t cap, uint32_t gen, nx_node id, int ndim,
                             const int32_t *idx)
{
    size_t i = memo_hash(id, ndim, idx) & (cap - 1);
    while (memo[i].node != 0 && memo[i].gen == gen &&
           !(memo[i].node == id && memcmp(memo[i].idx, idx, ndim * sizeof *idx) == 0))
        i = (i + 1) & (cap - 1);
    return &memo[i];
}

/* Doubles the table; false when the allocation fails (the memo then stays as it is). */
static bool memo_grow(lowerer *lw)
{
    size_t cap = lw->memo_cap * 2;
    memo_entry *m = nx_rt_calloc(lw->ctx, cap, sizeof *m);
    if (!m)
        return false;
    for (size_t i = 0; i < lw->memo_cap; i++) {
        const memo_entry *e = &lw->memo[i];
        if (e->node != 0 && e->gen == lw->gen) {
            int nd = nx_ir_node_at(lw->s, e->node)->ndim;
            *memo_slot(m, cap, lw->gen, e->node, nd, e->idx) = *e;
        }
    }
    nx_rt_free(lw->ctx, lw->memo, lw->memo_cap * sizeof *lw->memo);
    lw->memo = m;
    lw->memo_cap = cap;
    return true;
}

static int32_t expr(lowerer *lw, nx_node id, const int32_t *idx)
{
    if (lw->st != NX_OK)
        return -1;
    const nx_ir_node *n = nx_ir_node_at(lw->s, id);
    for (int d = 0; d < n->ndim; d++)
        if (idx[d] < 0)
            return -1;
    const memo_entry *hit = memo_slot(lw->memo, lw->memo_cap, lw->gen, id, n->ndim, idx);
    if (hit->node != 0 && hit->gen == lw->gen)
        return hit->value;
    int32_t v;
    if (lw->role[id] == NX_FUSE_LEAF || (lw->role[id] == NX_FUSE_ROOT && lw->slot_of[id] >= 0))
        v = load_slot(lw, id, idx);
    else
        v = expand(lw, id, idx);
    if (v < 0)
        return v;
    if (2 * (lw->nmemo + 1) > lw->memo_cap && !memo_grow(lw)) {
        lw->st = nx_rt_nomem(lw->ctx, "lowering: memo", 2 * lw->memo_cap * sizeof *lw->memo);
        return -1;
    }
    memo_entry *e = memo_slot(lw->memo, lw->memo_cap, lw->gen, id, n->ndim, idx);
    e->node = id;
    e->gen = lw->gen;
    memset(e->idx, 0, sizeof e->idx);
    memcpy(e->idx, idx, n->ndim * sizeof *idx);
    e->value = v;
    lw->nmemo++;
    return v;
}

/* ---- plans ---------------------------------------------------------------------------------*/

static int add_slot(nx_kplan *p, nx_slot_kind kind, const nx_ir_node *n)
{
    if (p->nslots == p->slots_cap) {
        int cap = p->slots_cap ? 2 * p->slots_cap : 16;
        nx_kslot *s = nx_rt_calloc(p->ctx, (size_t)cap, sizeof *s);
        if (!s)
            return -1;
        if (p->nslots)
            memcpy(s, p->slots, (size_t)p->nslots * sizeof *s);
        nx_rt_free(p->ctx, p->slots, (size_t)p->slots_cap * sizeof *p->slots);
        p->slots = s;
        p->slots_cap = cap;
    }
    nx_kslot *s = &p->slots[p->nslots];
    memset(s, 0, sizeof *s);
    s->kind = (uint8_t)kind;
    s->dtype = n->dtype;
    s->ndim = n->ndim;
    memcpy(s->shape, n->shape, sizeof s->shape);
    s->arg = -1;
    s->last_use = -1;
    return p->nslots++;
}

static nx_status add_kernel(nx_kplan *p, nx_kernel *k)
{
    if (p->nkernels == p->kernels_cap) {
        int cap = p->kernels_cap ? 2 * p->kernels_cap : 8;
        nx_kernel **ks = nx_rt_calloc(p->ctx, (size_t)cap, sizeof *ks);
        if (!ks)
            return nx_rt_nomem(p->ctx, "lowering", (size_t)cap * sizeof *ks);
        if (p->nkernels)
            memcpy(ks, p->kernels, (size_t)p->nkernels * sizeof *ks);
        nx_rt_free(p->ctx, p->kernels, (size_t)p->kernels_cap * sizeof *p->kernels);
        p->kernels = ks;
        p->kernels_cap = cap;
    }
    p->kernels[p->nkernels++] = k;
    return NX_OK;
}

static nx_status lower_library(lowerer *lw, nx_node id, int32_t out_slot)
{
    const nx_ir_node *n = nx_ir_node_at(lw->s, id);
    nx_kernel *k = lw->k;
    int nv = nx_ir_num_valops(n);
    const nx_node *ops = nx_ir_node_ops(lw->s, n);
    for (int j = 0; j < nv; j++) {
        const nx_kslot *sl = &lw->plan->slots[lw->slot_of[ops[j]]];
        if (nx_kernel_buffer(k, NX_KBUF_IN, sl->dtype, sl->ndim, sl->shape,
                             (uint32_t)lw->slot_of[ops[j]]) < 0)
            return nx_rt_error(lw->ctx, NX_ERR_UNSUPPORTED,
                               "lowering: %s %%%u has over %d operands", nx_ir_prim_name(n->op),
                               (unsigned)id, NX_KERNEL_MAX_BUFFERS - 1);
    }
    nx_kernel_buffer(k, NX_KBUF_OUT, n->dtype, n->ndim, n->shape, (uint32_t)out_slot);
    if (n->nattrs > NX_KERNEL_MAX_ATTRS)
        return nx_rt_error(lw->ctx, NX_ERR_UNSUPPORTED, "lowering: %s %%%u has %u attributes",
                           nx_ir_prim_name(n->op), (unsigned)id, (unsigned)n->nattrs);
    k->lib_prim = n->op;
    k->nattrs = (int)n->nattrs;
    memcpy(k->attrs, nx_ir_node_attrs(lw->s, n), n->nattrs * sizeof *k->attrs);
    if (n->op == NX_PRIM_EXTERN)
        memcpy(&k->lib_ptr, &k->attrs[0], sizeof k->lib_ptr);
    k->lib_node = id;
    return NX_OK;
}

static nx_status lower_loop(lowerer *lw, nx_node id, int32_t out_slot)
{
    const nx_ir_node *n = nx_ir_node_at(lw->s, id);
    nx_kernel *k = lw->k;
    nx_kernel_space(k, n->ndim, n->shape);
    int ob = nx_kernel_buffer(k, NX_KBUF_OUT, n->dtype, n->ndim, n->shape, (uint32_t)out_slot);
    int32_t idx[NX_MAX_DIMS];
    for (int d = 0; d < n->ndim; d++)
        idx[d] = chk(lw, nx_kernel_idx(k, d));
    int32_t v = lw->st == NX_OK ? expand(lw, id, idx) : -1;
    if (lw->st != NX_OK)
        return lw->st;
    if (v < 0 || !nx_kernel_store(k, ob, v))
        return nx_rt_error(lw->ctx, NX_ERR_INTERNAL, "lowering: %s %%%u gave no value",
                           nx_ir_prim_name(n->op), (unsigned)id);
    return NX_OK;
}

static nx_status lower_root(lowerer *lw, nx_node id, int32_t *slot_of)
{
    const nx_ir_node *n = nx_ir_node_at(lw->s, id);
    int32_t out_slot = add_slot(lw->plan, NX_SLOT_TEMP, n);
    if (out_slot < 0)
        return nx_rt_nomem(lw->ctx, "lowering", sizeof(nx_kslot));
    char name[48];
    snprintf(name, sizeof name, "k%d_%s", lw->plan->nkernels, nx_ir_prim_name(n->op));
    bool lib = nx_fuse_is_library(n->op);
    nx_status st = nx_kernel_new(lw->ctx, lib ? NX_KERNEL_LIBRARY : NX_KERNEL_LOOP, name, &lw->k);
    if (st != NX_OK)
        return st;
    lw->nbound = 0;
    lw->nmemo = 0;
    for (int i = 0; i < SMALL_CONSTS; i++)
        lw->small[i] = -1;
    memset(lw->memo, 0, lw->memo_cap * sizeof *lw->memo);
    st = lib ? lower_library(lw, id, out_slot) : lower_loop(lw, id, out_slot);
    if (st == NX_OK)
        st = add_kernel(lw->plan, lw->k);
    if (st != NX_OK)
        nx_kernel_free(lw->k);
    lw->k = NULL;
    slot_of[id] = out_slot; /* set after lowering: inside its own kernel the root is expanded */
    return st;
}

static nx_status bind_leaf(lowerer *lw, nx_node id, int32_t *slot_of, int *argno)
{
    const nx_ir_node *n = nx_ir_node_at(lw->s, id);
    bool input = n->op != NX_PRIM_CONSTANT;
    int sl = add_slot(lw->plan, input ? NX_SLOT_INPUT : NX_SLOT_CONSTANT, n);
    if (sl < 0)
        return nx_rt_nomem(lw->ctx, "lowering", sizeof(nx_kslot));
    if (input)
        lw->plan->slots[sl].arg = (int32_t)nx_ir_node_attrs(lw->s, n)[2 + n->ndim];
    else
        lw->plan->slots[sl].data = nx_ir_node_blob(lw->s, n);
    (void)argno;
    slot_of[id] = sl;
    return NX_OK;
}

static void compute_last_use(nx_kplan *p)
{
    for (int ki = 0; ki < p->nkernels; ki++) {
        const nx_kernel *k = p->kernels[ki];
        for (int b = 0; b < k->nbufs; b++)
            if (k->bufs[b].role == NX_KBUF_IN)
                p->slots[k->bufs[b].slot].last_use = ki;
    }
}

static nx_status build(lowerer *lw, int noutputs, const nx_node *outputs, int32_t *slot_of)
{
    nx_kplan *p = lw->plan;
    nx_status st = NX_OK;
    int argno = 0;
    for (nx_node id = 1; st == NX_OK && id <= lw->s->n; id++) {
        if (lw->role[id] == NX_FUSE_LEAF)
            st = bind_leaf(lw, id, slot_of, &argno);
        else if (lw->role[id] == NX_FUSE_ROOT)
            st = lower_root(lw, id, slot_of);
    }
    if (st != NX_OK)
        return st;
    if (!(p->outputs = nx_rt_calloc(lw->ctx, (size_t)noutputs, sizeof *p->outputs)))
        return nx_rt_nomem(lw->ctx, "lowering", (size_t)noutputs * sizeof *p->outputs);
    p->noutputs = noutputs;
    for (int i = 0; i < noutputs; i++)
        p->outputs[i] = slot_of[outputs[i]];
    compute_last_use(p);
    return NX_OK;
}

nx_status nx_lower_plan(nx_ctx *ctx, const nx_ir_store *s, int noutputs, const nx_node *outputs,
                        const uint8_t *role, nx_kplan **out)
{
    *out = NULL;
    size_t slots = (size_t)s->n + 1;
    nx_kplan *p = nx_rt_calloc(ctx, 1, sizeof *p);
    if (p)
        p->ctx = ctx; /* before anything can fail: nx_kplan_free frees through it */
    int32_t *slot_of = nx_rt_alloc(ctx, slots * sizeof *slot_of);
    memo_entry *memo = nx_rt_calloc(ctx, MEMO_INITIAL, sizeof *memo);
    size_t memo_cap = MEMO_INITIAL;
    nx_status st = NX_OK;
    if (!p || !slot_of || !memo) {
        st = nx_rt_nomem(ctx, "lowering", slots * sizeof *slot_of);
    } else {
        p->ctx = ctx;
        p->store = s;
        for (size_t i = 0; i < slots; i++)
            slot_of[i] = -1;
        lowerer lw = {.ctx = ctx, .s = s, .role = role, .slot_of = slot_of, .plan = p,
                      .memo = memo, .memo_cap = MEMO_INITIAL};
        st = build(&lw, noutputs, outputs, slot_of);
        memo = lw.memo;
        memo_cap = lw.memo_cap;
    }
    nx_rt_free(ctx, slot_of, slots * sizeof *slot_of);
    nx_rt_free(ctx, memo, memo_cap * sizeof *memo);
    if (st != NX_OK) {
        if (p)
            nx_kplan_free(p);
        return st;
    }
    *out = p;
    return NX_OK;
}
