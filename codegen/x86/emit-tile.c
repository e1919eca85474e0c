/* Register tiles of the CPU emitter: contractions whose operand is float arithmetic over
 * loads (see below). */
#include <math.h>

#include "codegen/x86/emit-priv.h"

/* ---- register tiles ------------------------------------------------------------------------*/

/* A contraction whose operand is plain float arithmetic over loads runs as register tiles: MR
 * rows (space loop il) x NR vectors of W columns (space loop jl, the innermost) of carries held
 * in registers through the whole reduction, each loaded value reused across the tile:
 *     for j0 (panels of NR*W columns): for i0 (blocks of MR rows):
 *         acc[MR][NR] = identity
 *         for k: acc[r][c] = step(acc[r][c], f(i0 + r, k, j0 + c*W + lane))
 *         y[i0 + r, j0 + c*W ...] = acc[r][c]
 * Panels outside row blocks keep the B panel in L2 while A streams. Each output still folds its
 * k in ascending order, one element at a time: the result is the canonical one for every monoid.
 * Column indices enter the operand only through loads at stride 1 (vector loads) or not at all
 * (broadcast scalars); anything else keeps the row strategy. */

enum { CLS_S, CLS_L, CLS_V, CLS_BAD }; /* scalar, j + lane (i64), vector, not tileable */

static bool vec_prim_ok(int prim); /* the vector code's table (below) has an entry */

static int classify_prim(const nx_kernel *k, const nx_kinst *in, const uint8_t *cls)
{
    int ar = nx_ir_prims[in->prim].arity;
    int c0 = cls[in->a[0]], c1 = ar > 1 ? cls[in->a[1]] : CLS_S;
    bool all_s = c0 == CLS_S && c1 == CLS_S && (ar < 3 || cls[in->a[2]] == CLS_S);
    if (all_s)
        return CLS_S;
    if (in->prim == NX_PRIM_SELECT) { /* one condition for the whole vector: a select of rows */
        int c2 = cls[in->a[2]];
        bool arms = (c1 == CLS_S || c1 == CLS_V) && (c2 == CLS_S || c2 == CLS_V);
        return c0 == CLS_S && arms && is_fl(in->dtype) ? CLS_V : CLS_BAD;
    }
    if (c0 == CLS_BAD || c1 == CLS_BAD || ar == 3)
        return CLS_BAD;
    if (in->dtype == NX_DTYPE_I64 && (c0 == CLS_L || c1 == CLS_L) && c0 != CLS_V && c1 != CLS_V) {
        const nx_kinst *b = ar > 1 ? &k->inst[in->a[1]] : NULL;
        if (in->prim == NX_PRIM_ADD && !(c0 == CLS_L && c1 == CLS_L))
            return CLS_L;
        if (in->prim == NX_PRIM_SUB && c0 == CLS_L && c1 == CLS_S)
            return CLS_L;
        if (in->prim == NX_PRIM_MUL && c0 == CLS_L && b->op == NX_KOP_CONST && b->i == 1)
            return CLS_L;
        return CLS_BAD;
    }
    if (is_fl(in->dtype) && vec_prim_ok(in->prim) && c0 != CLS_L && c1 != CLS_L)
        return CLS_V;
    return CLS_BAD;
}

/* cls[id] for every instruction, relative to column loop jl; al: the aliases of a border split's
 * interior, or NULL. */
static void classify(const nx_kernel *k, const nx_x86_alias *al, int jl, uint8_t *cls)
{
    for (int id = 0; id < k->ninst; id++) {
        const nx_kinst *in = &k->inst[id];
        if (al && al[id].kind != NX_X86_ALIAS_SELF) { /* j + lane + c is still j + lane */
            cls[id] = al[id].kind == NX_X86_ALIAS_TO ? cls[al[id].to] : CLS_S;
            continue;
        }
        switch (in->op) {
        case NX_KOP_CONST:
            cls[id] = CLS_S;
            break;
        case NX_KOP_IDX:
            cls[id] = in->a[0] == jl ? CLS_L : CLS_S;
            break;
        case NX_KOP_LOAD: {
            int c = cls[in->a[1]];
            cls[id] = c == CLS_S ? CLS_S : c == CLS_L && is_fl(in->dtype) ? CLS_V : CLS_BAD;
            break;
        }
        case NX_KOP_PRIM:
            cls[id] = (uint8_t)classify_prim(k, in, cls);
            break;
        default:
            cls[id] = CLS_BAD; /* a nested REDUCE keeps the row strategy */
            break;
        }
    }
}

static bool tree_ok(const nx_kernel *k, const nx_x86_alias *al, int32_t id, const uint8_t *cls,
                    uint8_t *seen)
{
    if (seen[id])
        return true;
    seen[id] = 1;
    const nx_kinst *in = &k->inst[id];
    if (cls[id] == CLS_BAD)
        return false;
    if (al && al[id].kind != NX_X86_ALIAS_SELF)
        return al[id].kind == NX_X86_ALIAS_CONST || tree_ok(k, al, al[id].to, cls, seen);
    if (in->op == NX_KOP_LOAD)
        return tree_ok(k, al, in->a[1], cls, seen);
    if (in->op != NX_KOP_PRIM)
        return true;
    for (int j = 0; j < nx_ir_prims[in->prim].arity; j++)
        if (!tree_ok(k, al, in->a[j], cls, seen))
            return false;
    return true;
}

/* The REDUCE of a kernel that tiles, with t's fields set; -1 otherwise. */
int nx_x86_tile_reduce(emitter *e, tile *t)
{
    const nx_kernel *k = e->k;
    if (k->nstores != 1 || k->ndim < 2)
        return -1;
    int32_t r = k->stores[0].value;
    const nx_kinst *in = &k->inst[r];
    if (in->op != NX_KOP_REDUCE) /* only then is a[0] an operand: a store may read a load */
        return -1;
    int jl = k->ndim - 1, d = k->inst[in->a[0]].dtype;
    bool monoid = in->prim == NX_MONOID_SUM || in->prim == NX_MONOID_PROD ||
                  in->prim == NX_MONOID_MAX || in->prim == NX_MONOID_MIN ||
                  in->prim == NX_MONOID_LOGSUMEXP;
    if (!monoid || !is_fl(d) || !(e->mask[in->a[0]] >> jl & 1))
        return -1;
    uint8_t *seen = nx_rt_calloc(e->ctx, (size_t)k->ninst, 1);
    if (!seen) {
        e->nomem = true;
        return -1;
    }
    classify(k, e->alias, jl, t->cls);
    bool ok = tree_ok(k, e->alias, in->a[0], t->cls, seen);
    nx_rt_free(e->ctx, seen, (size_t)k->ninst);
    if (!ok)
        return -1;
    t->r = r;
    t->il = k->ndim - 2;
    t->jl = jl;
    t->d = d;
    /* a 64-byte vector, narrower when the axis is (8 output channels are one 8-lane vector
     * rather than 8 scalar columns) */
    t->w = d == NX_DTYPE_F32 ? 16 : 8;
    while (t->w > 4 && k->extent[jl] < t->w)
        t->w /= 2;
    t->mr = TILE_MR;
    t->nr = TILE_NR;
    if (in->prim == NX_MONOID_LOGSUMEXP) {
        /* a carry is (m, s, nan) and the step an exp, inlined once per carry and tile variant:
         * 2 x 2 keeps the kernel's compile time near 40 ms (4 x 2: 60 ms, 5% faster to run) */
        t->mr = 2;
        t->nr = 2;
    }
    return r;
}

static void vty(const tile *t, int w, char *buf, size_t n)
{
    if (w == 1)
        snprintf(buf, n, "%s", rty(t->d));
    else
        snprintf(buf, n, "<%d x %s>", w, rty(t->d));
}

/* w lanes of dtype d (w = 1: the scalar type); bool lanes are i1. */
static void vty_of(int d, int w, char *buf, size_t n)
{
    if (w == 1)
        snprintf(buf, n, "%s", rty(d));
    else
        snprintf(buf, n, "<%d x %s>", w, rty(d));
}

static int splat_of(emitter *e, int d, int w, int s)
{
    if (w == 1)
        return s;
    char vt[32];
    vty_of(d, w, vt, sizeof vt);
    int a = fresh(e), b = fresh(e);
    put(&e->body, "  %%v%d = insertelement %s undef, %s %%v%d, i32 0\n", a, vt, rty(d), s);
    put(&e->body, "  %%v%d = shufflevector %s %%v%d, %s undef, <%d x i32> zeroinitializer\n", b,
        vt, a, vt, w);
    return b;
}

static int splat(emitter *e, const tile *t, int w, int s)
{
    return splat_of(e, t->d, w, s);
}

/* select on w lanes of type ty (a scalar condition when w = 1) */
static int vselt(emitter *e, const char *ty, int w, int c, int a, int b)
{
    int v = fresh(e);
    if (w == 1)
        put(&e->body, "  %%v%d = select i1 %%v%d, %s %%v%d, %s %%v%d\n", v, c, ty, a, ty, b);
    else
        put(&e->body, "  %%v%d = select <%d x i1> %%v%d, %s %%v%d, %s %%v%d\n", v, w, c, ty, a,
            ty, b);
    return v;
}

static int vcast(emitter *e, int from, int to, int w, int x)
{
    if (from == to)
        return x;
    char ft[32], tt[32];
    vty_of(from, w, ft, sizeof ft);
    vty_of(to, w, tt, sizeof tt);
    int v = fresh(e);
    put(&e->body, "  %%v%d = %s %s %%v%d to %s\n", v, from == NX_DTYPE_F32 ? "fpext" : "fptrunc",
        ft, x, tt);
    return v;
}

/* exp (fn 0) or log (fn 1) of w lanes: the math library's vector function, declared on use. */
static int vmath(emitter *e, int fn, int d, int w, int x)
{
    const char *name = fn ? "log" : "exp";
    if (w == 1)
        return nx_x86_mathcall(e, name, d, x, -1);
    e->vmath_used |= 1u << vmath_bit(fn, d, w);
    char vt[32];
    vty_of(d, w, vt, sizeof vt);
    int v = fresh(e);
    put(&e->body, "  %%v%d = call %s @nx.math.%s.v%d%s(%s %%v%d)\n", v, vt, name, w,
        mathsuffix(d), vt, x);
    return v;
}

static int vsel(emitter *e, const tile *t, int w, int c, int a, int b)
{
    char vt[32];
    vty(t, w, vt, sizeof vt);
    int v = fresh(e);
    if (w == 1)
        put(&e->body, "  %%v%d = select i1 %%v%d, %s %%v%d, %s %%v%d\n", v, c, vt, a, vt, b);
    else
        put(&e->body, "  %%v%d = select <%d x i1> %%v%d, %s %%v%d, %s %%v%d\n", v, w, c, vt, a,
            vt, b);
    return v;
}

static int vec(emitter *e, tile *t, int w, int c, int32_t id);

static int vec_load(emitter *e, const tile *t, int w, const nx_kinst *in)
{
    int off = V(in->a[1]); /* the offset at the column's first j */
    const char *st = mty(in->dtype);
    char vt[32];
    vty(t, w, vt, sizeof vt);
    int p = fresh(e), q = fresh(e), v = fresh(e);
    put(&e->body, "  %%v%d = getelementptr inbounds %s, %s* %%b%d, i64 %%v%d\n", p, st, st,
        in->a[0], off);
    put(&e->body, "  %%v%d = bitcast %s* %%v%d to %s*\n", q, st, p, vt);
    put(&e->body, "  %%v%d = load %s, %s* %%v%d, align 4\n", v, vt, vt, q);
    return v;
}

static int vec_minmax(emitter *e, const tile *t, int w, bool max, int a, int b)
{
    char vt[32];
    vty(t, w, vt, sizeof vt);
    int pick = op2(e, max ? "fcmp ogt" : "fcmp olt", vt, b, a);
    int r = vsel(e, t, w, pick, b, a);
    int nan = op2(e, "fcmp uno", vt, a, b);
    return vsel(e, t, w, nan, splat(e, t, w, fconst(e, t->d, NAN)), r);
}

/* The vector code of the primitives a tile computes on w float lanes, one function each (a
 * select's condition is one scalar for the whole vector: classify_prim). */
typedef int (*vec_fn)(emitter *e, tile *t, int w, int c, const nx_kinst *in);

static int vec_select(emitter *e, tile *t, int w, int c, const nx_kinst *in)
{
    char vt[32];
    vty(t, w, vt, sizeof vt);
    int cond = V(in->a[0]), x = vec(e, t, w, c, in->a[1]), y = vec(e, t, w, c, in->a[2]);
    return selv(e, vt, cond, x, y);
}

static int vec_neg(emitter *e, tile *t, int w, int c, const nx_kinst *in)
{
    char vt[32];
    vty(t, w, vt, sizeof vt);
    int a = vec(e, t, w, c, in->a[0]), v = fresh(e);
    put(&e->body, "  %%v%d = fneg %s %%v%d\n", v, vt, a);
    return v;
}

/* One LLVM instruction on the two operands' vectors. */
static int vec_op2(emitter *e, tile *t, int w, int c, const nx_kinst *in, const char *op)
{
    char vt[32];
    vty(t, w, vt, sizeof vt);
    int a = vec(e, t, w, c, in->a[0]), b = vec(e, t, w, c, in->a[1]);
    return op2(e, op, vt, a, b);
}

static int vec_add(emitter *e, tile *t, int w, int c, const nx_kinst *in)
{
    return vec_op2(e, t, w, c, in, "fadd");
}

static int vec_sub(emitter *e, tile *t, int w, int c, const nx_kinst *in)
{
    return vec_op2(e, t, w, c, in, "fsub");
}

static int vec_mul(emitter *e, tile *t, int w, int c, const nx_kinst *in)
{
    return vec_op2(e, t, w, c, in, "fmul");
}

static int vec_div(emitter *e, tile *t, int w, int c, const nx_kinst *in)
{
    return vec_op2(e, t, w, c, in, "fdiv");
}

static int vec_min(emitter *e, tile *t, int w, int c, const nx_kinst *in)
{
    int a = vec(e, t, w, c, in->a[0]), b = vec(e, t, w, c, in->a[1]);
    return vec_minmax(e, t, w, false, a, b);
}

static int vec_max(emitter *e, tile *t, int w, int c, const nx_kinst *in)
{
    int a = vec(e, t, w, c, in->a[0]), b = vec(e, t, w, c, in->a[1]);
    return vec_minmax(e, t, w, true, a, b);
}

/* A primitive without an entry keeps its kernel off the tiles (the row strategy computes it). */
static const vec_fn vec_rules[NX_PRIM_COUNT] = {
    [NX_PRIM_SELECT] = vec_select, [NX_PRIM_NEG] = vec_neg, [NX_PRIM_ADD] = vec_add,
    [NX_PRIM_SUB] = vec_sub,       [NX_PRIM_MUL] = vec_mul, [NX_PRIM_DIV] = vec_div,
    [NX_PRIM_MIN] = vec_min,       [NX_PRIM_MAX] = vec_max,
};

static bool vec_prim_ok(int prim)
{
    return prim >= 0 && prim < NX_PRIM_COUNT && vec_rules[prim];
}

static int vec_prim(emitter *e, tile *t, int w, int c, const nx_kinst *in)
{
    return vec_rules[in->prim](e, t, w, c, in); /* classify admitted only entries of the table */
}

/* The value of id at the current row and column c as w lanes (scalars splatted). */
static int vec(emitter *e, tile *t, int w, int c, int32_t id)
{
    int *slot = &t->vc[id * TILE_NR + c];
    if (*slot >= 0)
        return *slot;
    const nx_kinst *in = &e->k->inst[id];
    int v;
    if (t->cls[id] == CLS_S)
        v = splat(e, t, w, V(id));
    else if (e->alias && e->alias[id].kind == NX_X86_ALIAS_TO)
        v = vec(e, t, w, c, e->alias[id].to);
    else if (in->op == NX_KOP_LOAD)
        v = vec_load(e, t, w, in);
    else
        v = vec_prim(e, t, w, c, in);
    *slot = v;
    return v;
}

/* Forgets cached values that depend on the loops in `loops` (their index changed). */
static void tile_forget(emitter *e, tile *t, uint32_t loops, bool vectors)
{
    for (int id = 0; id < e->k->ninst; id++) {
        if (!(e->mask[id] & loops))
            continue;
        e->val[id] = -1;
        for (int c = 0; vectors && c < TILE_NR; c++)
            t->vc[id * TILE_NR + c] = -1;
    }
}

/* x > v ? x : v is one maxps (a NaN carry sticks); then a NaN x is taken, which makes the
 * canonical fold. freeze keeps LLVM from merging the two selects into two compares and an or. */
static void tile_max_step(emitter *e, const tile *t, int w, int acc, int m, int x)
{
    char vt[32];
    vty(t, w, vt, sizeof vt);
    int v = ld(e, vt, acc);
    int pick = op2(e, m == NX_MONOID_MAX ? "fcmp ogt" : "fcmp olt", vt, x, v);
    int mm = vsel(e, t, w, pick, x, v), fx = fresh(e);
    put(&e->body, "  %%v%d = freeze %s %%v%d\n", fx, vt, x);
    st(e, vt, vsel(e, t, w, op2(e, "fcmp uno", vt, x, x), fx, mm), acc);
}

/* A tile's carry: the value (or the log-sum-exp's m), and for log-sum-exp s and the NaN flag. */
typedef struct tacc {
    int v, s, nan;
} tacc;

static tacc tile_acc(emitter *e, const tile *t, int w)
{
    const nx_kinst *in = &e->k->inst[t->r];
    char vt[32], ut[32], bt[32];
    int sd = nx_x86_lse_sd(e, t->d);
    vty(t, w, vt, sizeof vt);
    tacc a = {nx_x86_alloca_of(e, vt), -1, -1};
    st(e, vt, splat(e, t, w, nx_x86_identity(e, in->prim, t->d)), a.v);
    if (in->prim != NX_MONOID_LOGSUMEXP)
        return a;
    vty_of(sd, w, ut, sizeof ut);
    vty_of(NX_DTYPE_BOOL, w, bt, sizeof bt);
    a.s = nx_x86_alloca_of(e, ut);
    a.nan = nx_x86_alloca_of(e, bt);
    st(e, ut, splat_of(e, sd, w, fconst(e, sd, 0.0)), a.s);
    st(e, bt, splat_of(e, NX_DTYPE_BOOL, w, constv(e, "i1", "false")), a.nan);
    return a;
}

/* lse_step on w lanes: the same operations in the same order, so the same values. */
static void tile_lse_step(emitter *e, const tile *t, int w, const tacc *a, int x)
{
    int d = t->d, sd = nx_x86_lse_sd(e, d);
    char vt[32], ut[32], bt[32];
    vty(t, w, vt, sizeof vt);
    vty_of(sd, w, ut, sizeof ut);
    vty_of(NX_DTYPE_BOOL, w, bt, sizeof bt);
    int m = ld(e, vt, a->v), s = ld(e, ut, a->s);
    int xd = vcast(e, d, sd, w, x), md = vcast(e, d, sd, w, m);
    int isn = op2(e, "fcmp uno", vt, x, x);
    int ninf = op2(e, "fcmp oeq", vt, x, splat(e, t, w, fconst(e, d, -INFINITY)));
    int skip = op2(e, "or", bt, isn, ninf);
    int gt = op2(e, "fcmp ogt", vt, x, m), eq = op2(e, "fcmp oeq", vt, x, m);
    int arg = vselt(e, ut, w, gt, op2(e, "fsub", ut, md, xd), op2(e, "fsub", ut, xd, md));
    int ex = vmath(e, 0, sd, w, arg);
    int one = splat_of(e, sd, w, fconst(e, sd, 1.0));
    int sgt = op2(e, "fadd", ut, op2(e, "fmul", ut, s, ex), one);
    int seq = op2(e, "fadd", ut, s, one), slt = op2(e, "fadd", ut, s, ex);
    int sn = vselt(e, ut, w, gt, sgt, vselt(e, ut, w, eq, seq, slt));
    if (d == NX_DTYPE_F32 && sd == NX_DTYPE_F64)
        sn = vcast(e, NX_DTYPE_F32, NX_DTYPE_F64, w, vcast(e, NX_DTYPE_F64, NX_DTYPE_F32, w, sn));
    st(e, ut, vselt(e, ut, w, skip, s, sn), a->s);
    int keep = op2(e, "or", bt, skip, op2(e, "fcmp ule", vt, x, m)); /* ule: not ogt */
    st(e, vt, vselt(e, vt, w, keep, m, x), a->v);
    st(e, bt, op2(e, "or", bt, ld(e, bt, a->nan), isn), a->nan);
}

/* Whether a tile folds log-sum-exp in two passes over k: the max m, then the sum of exp(x - m).
 * The online step's exp sits on the carry's dependence chain (about 70 cycles a step, and the
 * loads of the next steps wait behind it: 6x the max-plus time on a gather-fold); in two passes
 * every exp is independent. Reassociation only: the sum is a different rounding of the same
 * value (within the tolerance of a reassociated fold); reproducible mode keeps the online step. */
static bool lse_two_pass(const emitter *e, const tile *t)
{
    return e->reassoc && e->k->inst[t->r].prim == NX_MONOID_LOGSUMEXP;
}

/* Pass 1: m = max(m, x), a NaN x taken and kept (the MAX monoid's step): m is then NaN, and so
 * are s and the result, as the online fold's NaN flag makes it; no flag (no mask registers). */

static int fcv(emitter *e, const tile *t, int w, double v)
{
    return splat(e, t, w, fconst(e, t->d, t->d == NX_DTYPE_F32 ? (double)(float)v : v));
}

static int fma_v(emitter *e, const tile *t, int w, int a, int b, int c)
{
    char vt[32];
    vty(t, w, vt, sizeof vt);
    int v = fresh(e);
    e->fmuladd_used |= 1u << (w == 1 ? 0 : w == 4 ? 1 : w == 8 ? 2 : 3);
    put(&e->body, "  %%v%d = call %s @llvm.fmuladd.%s%s(%s %%v%d, %s %%v%d, %s %%v%d)\n", v, vt,
        w == 1 ? "" : w == 4 ? "v4" : w == 8 ? "v8" : "v16", "f32", vt, a, vt, b, vt, c);
    return v;
}

/* exp(x) for f32 x <= 0 (or NaN) as the two-pass sum needs it: Cephes's expf reduction and
 * polynomial (about 1 ulp), with no overflow path and one scale factor; below ln 2^-126 it gives
 * 2^-126 instead of a subnormal or 0, which cannot change a sum that holds exp(0) = 1 (the max's
 * own term). 20 vector operations where the general exp takes about 30. */
static int exp_nonpos_f32(emitter *e, const tile *t, int w, int x)
{
    char vt[32], it[32];
    vty(t, w, vt, sizeof vt);
    vty_of(NX_DTYPE_I32, w, it, sizeof it);
    int lo = fcv(e, t, w, -87.33654475055310898657);
    x = vselt(e, vt, w, op2(e, "fcmp olt", vt, x, lo), lo, x);
    int shift = fcv(e, t, w, 12582912.0); /* 1.5 * 2^23: adding it rounds to an integer */
    int nr = op2(e, "fadd", vt, op2(e, "fmul", vt, x, fcv(e, t, w, 1.44269504088896341)), shift);
    int n = op2(e, "fsub", vt, nr, shift);
    int r = op2(e, "fsub", vt, x, op2(e, "fmul", vt, n, fcv(e, t, w, 0.693359375)));
    r = op2(e, "fadd", vt, r, op2(e, "fmul", vt, n, fcv(e, t, w, 2.12194440e-4)));
    static const double P[6] = {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3,
                                4.1665795894E-2, 1.6666665459E-1, 5.0000001201E-1};
    int p = fcv(e, t, w, P[0]);
    for (int i = 1; i < 6; i++)
        p = fma_v(e, t, w, p, r, fcv(e, t, w, P[i]));
    int y = fma_v(e, t, w, p, op2(e, "fmul", vt, r, r), r);
    y = op2(e, "fadd", vt, y, fcv(e, t, w, 1.0));
    /* 2^n: nr's bits are those of 1.5 * 2^23 plus n, so (bits - 0x4b400000 + 127) << 23 */
    int nb = fresh(e), sc = fresh(e);
    put(&e->body, "  %%v%d = bitcast %s %%v%d to %s\n", nb, vt, nr, it);
    int bias = splat_of(e, NX_DTYPE_I32, w, constv(e, "i32", "1262485377"));
    int sb = op2(e, "shl", it, op2(e, "sub", it, nb, bias),
                 splat_of(e, NX_DTYPE_I32, w, constv(e, "i32", "23")));
    put(&e->body, "  %%v%d = bitcast %s %%v%d to %s\n", sc, it, sb, vt);
    return op2(e, "fmul", vt, y, sc);
}

/* Pass 2: s += exp(x - m). Where m is infinite, s is not read (tile_lse_finish). */
static void tile_lse_sum(emitter *e, const tile *t, int w, const tacc *a, int x)
{
    char vt[32];
    vty(t, w, vt, sizeof vt);
    int arg = op2(e, "fsub", vt, x, ld(e, vt, a->v));
    int ex = t->d == NX_DTYPE_F32 ? exp_nonpos_f32(e, t, w, arg) : vmath(e, 0, t->d, w, arg);
    int r = fresh(e);
    put(&e->body, "  %%v%d = fadd reassoc %s %%v%d, %%v%d\n", r, vt, ld(e, vt, a->s), ex);
    st(e, vt, r, a->s);
}

/* carry_finish of log-sum-exp on w lanes. */
static int tile_lse_finish(emitter *e, const tile *t, int w, const tacc *a)
{
    int d = t->d, sd = nx_x86_lse_sd(e, d);
    char vt[32], ut[32], bt[32];
    vty(t, w, vt, sizeof vt);
    vty_of(sd, w, ut, sizeof ut);
    vty_of(NX_DTYPE_BOOL, w, bt, sizeof bt);
    int m = ld(e, vt, a->v);
    int lg = vmath(e, 1, sd, w, ld(e, ut, a->s));
    int r = vcast(e, sd, d, w, op2(e, "fadd", ut, vcast(e, d, sd, w, m), lg));
    int pinf = op2(e, "fcmp oeq", vt, m, splat(e, t, w, fconst(e, d, INFINITY)));
    int ninf = op2(e, "fcmp oeq", vt, m, splat(e, t, w, fconst(e, d, -INFINITY)));
    int v = vselt(e, vt, w, op2(e, "or", bt, pinf, ninf), m, r);
    return vselt(e, vt, w, ld(e, bt, a->nan), splat(e, t, w, fconst(e, d, NAN)), v);
}

static int tile_value(emitter *e, const tile *t, int w, const tacc *a)
{
    char vt[32];
    vty(t, w, vt, sizeof vt);
    if (e->k->inst[t->r].prim == NX_MONOID_LOGSUMEXP)
        return tile_lse_finish(e, t, w, a);
    return ld(e, vt, a->v);
}

static void tile_step(emitter *e, const tile *t, int w, const tacc *a, int x)
{
    char vt[32];
    vty(t, w, vt, sizeof vt);
    int acc = a->v;
    if (e->k->inst[t->r].prim == NX_MONOID_LOGSUMEXP) {
        tile_lse_step(e, t, w, a, x);
        return;
    }
    int m = e->k->inst[t->r].prim;
    if (m == NX_MONOID_MAX || m == NX_MONOID_MIN) {
        tile_max_step(e, t, w, acc, m, x);
        return;
    }
    int r = op2(e, m == NX_MONOID_SUM ? "fadd" : "fmul", vt, ld(e, vt, acc), x);
    st(e, vt, r, acc);
}

static void tile_store(emitter *e, const tile *t, int w, int lin, int val)
{
    char vt[32];
    vty(t, w, vt, sizeof vt);
    const char *s = rty(t->d);
    int p = fresh(e), q = fresh(e);
    put(&e->body, "  %%v%d = getelementptr inbounds %s, %s* %%b%d, i64 %%v%d\n", p, s, s,
        e->k->stores[0].buf, lin);
    put(&e->body, "  %%v%d = bitcast %s* %%v%d to %s*\n", q, s, p, vt);
    put(&e->body, "  store %s %%v%d, %s* %%v%d, align 4\n", vt, val, vt, q);
}

/* One tile: rows i0 .. i0+mr-1, columns j0 + c*w .. for c < nr, carries in allocas (SROA makes
 * them registers). */
static void emit_tile(emitter *e, tile *t, int i0, int mr, int j0, int nr, int w, int lin_outer)
{
    const nx_kernel *k = e->k;
    const nx_kinst *in = &k->inst[t->r];
    tacc acc[TILE_MR][TILE_NR];
    for (int r = 0; r < mr; r++)
        for (int c = 0; c < nr; c++)
            acc[r][c] = tile_acc(e, t, w);
    for (int r = 0; r < mr; r++)
        t->irow[r] = r ? op2(e, "add", "i64", i0, i64c(e, r)) : i0;
    for (int c = 0; c < nr; c++)
        t->jcol[c] = c ? op2(e, "add", "i64", j0, i64c(e, (int64_t)c * w)) : j0;
    uint32_t loops = (uint32_t)in->i, outer = e->live;
    bool two = lse_two_pass(e, t);
    for (int pass = 0; pass < (two ? 2 : 1); pass++) {
        loop ls[NX_KERNEL_MAX_LOOPS];
        int n = 0;
        for (int q = 0; q < k->nloops; q++) {
            if (!(loops >> q & 1))
                continue;
            char hi[32];
            snprintf(hi, sizeof hi, "%lld", (long long)k->extent[q]);
            ls[n] = nx_x86_loop_open(e, "0", hi);
            e->loopvar[q] = ls[n].index;
            n++;
        }
        e->live |= loops | 1u << t->il | 1u << t->jl;
        tile_forget(e, t, loops | 1u << t->il | 1u << t->jl, false);
        for (int i = 0; i < k->ninst * TILE_NR; i++) /* vectors of earlier loops do not dominate */
            t->vc[i] = -1;
        for (int r = 0; r < mr; r++) {
            e->loopvar[t->il] = t->irow[r];
            tile_forget(e, t, 1u << t->il, true);
            for (int c = 0; c < nr; c++) {
                e->loopvar[t->jl] = t->jcol[c];
                tile_forget(e, t, 1u << t->jl, false);
                int x = vec(e, t, w, c, in->a[0]);
                if (!two)
                    tile_step(e, t, w, &acc[r][c], x);
                else if (pass == 0)
                    tile_max_step(e, t, w, acc[r][c].v, NX_MONOID_MAX, x);
                else
                    tile_lse_sum(e, t, w, &acc[r][c], x);
            }
        }
        e->live = outer;
        while (n > 0)
            nx_x86_loop_close(e, ls[--n]);
    }
    int ni = i64c(e, k->extent[t->il]), nj = i64c(e, k->extent[t->jl]);
    for (int r = 0; r < mr; r++) {
        int row = op2(e, "add", "i64", op2(e, "mul", "i64", lin_outer, ni), t->irow[r]);
        int base = op2(e, "mul", "i64", row, nj);
        for (int c = 0; c < nr; c++)
            tile_store(e, t, w, op2(e, "add", "i64", base, t->jcol[c]),
                       tile_value(e, t, w, &acc[r][c]));
    }
    tile_forget(e, t, loops | 1u << t->il | 1u << t->jl, true);
}

/* Row blocks of mr over [lo, hi), then single rows, for one column panel. */
static void tile_rows(emitter *e, tile *t, const char *lo, const char *hi, int j0, int nr, int w,
                      int lin_outer)
{
    char slo[24], shi[24], snb[24];
    int lov = fresh(e), hiv = fresh(e);
    put(&e->body, "  %%v%d = add i64 %s, 0\n  %%v%d = add i64 %s, 0\n", lov, lo, hiv, hi);
    int nb = op2(e, "sdiv", "i64", op2(e, "sub", "i64", hiv, lov), i64c(e, t->mr));
    int rest = op2(e, "add", "i64", lov, op2(e, "mul", "i64", nb, i64c(e, t->mr)));
    snprintf(snb, sizeof snb, "%%v%d", nb);
    loop b = nx_x86_loop_open(e, "0", snb);
    int i0 = op2(e, "add", "i64", lov, op2(e, "mul", "i64", b.index, i64c(e, t->mr)));
    emit_tile(e, t, i0, t->mr, j0, nr, w, lin_outer);
    nx_x86_loop_close(e, b);
    snprintf(slo, sizeof slo, "%%v%d", rest);
    snprintf(shi, sizeof shi, "%%v%d", hiv);
    loop one = nx_x86_loop_open(e, slo, shi);
    emit_tile(e, t, one.index, 1, j0, nr, w, lin_outer);
    nx_x86_loop_close(e, one);
}

/* Column panels of nr*w over [j_lo, j_hi), then single vectors, then single columns; rows inside
 * each. */
void nx_x86_emit_tiles(emitter *e, tile *t, const char *lo, const char *hi, int64_t j_lo,
                       int64_t j_hi, int lin_outer)
{
    int64_t nj = j_hi, start = j_lo;
    const int nrs[3] = {t->nr, 1, 1}, ws[3] = {t->w, t->w, 1};
    for (int p = 0; p < 3; p++) {
        int64_t width = (int64_t)nrs[p] * ws[p], count = (nj - start) / width;
        if (count <= 0)
            continue;
        char sc[24];
        snprintf(sc, sizeof sc, "%lld", (long long)count);
        loop jp = nx_x86_loop_open(e, "0", sc);
        int j0 = op2(e, "add", "i64", i64c(e, start), op2(e, "mul", "i64", jp.index,
                                                            i64c(e, width)));
        tile_rows(e, t, lo, hi, j0, nrs[p], ws[p], lin_outer);
        nx_x86_loop_close(e, jp);
        start += count * width;
    }
}

/* Tiles over the interior of a border split, the row strategy over the borders. */
void nx_x86_emit_split_tiles(emitter *e, tile *t, const char *lo, const char *hi, int lin_outer)
{
    int64_t n = e->k->extent[t->jl];
    e->alias = e->bd.alias;
    nx_x86_emit_tiles(e, t, lo, hi, e->bd.lo, e->bd.hi, lin_outer);
    e->alias = NULL;
    loop li = nx_x86_loop_open(e, lo, hi);
    e->loopvar[t->il] = li.index;
    uint32_t outer = e->live;
    e->live |= 1u << t->il;
    int lin = op2(e, "add", "i64", op2(e, "mul", "i64", lin_outer,
                                       i64c(e, e->k->extent[t->il])), li.index);
    if (e->bd.lo > 0)
        nx_x86_emit_rows(e, t->r, lin, 0, e->bd.lo, false);
    if (e->bd.hi < n)
        nx_x86_emit_rows(e, t->r, lin, e->bd.hi, n, false);
    e->live = outer;
    nx_x86_loop_close(e, li);
}
