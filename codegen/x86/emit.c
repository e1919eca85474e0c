/* Kernel IR -> LLVM IR, as text (docs/kernel-ir.md; the x86 JIT in jit.h parses it).
 *
 * Text rather than the builder API because LLVM 14's C API cannot set fast-math flags, and a
 * float sum that may be reassociated only vectorises with `fadd reassoc`. The text uses typed
 * pointers, which LLVM 14 and 19 both read.
 *
 * Each kernel is two functions:
 *     void @<name>(i8** %bufs, i64 %begin, i64 %end)      the entry: unpacks the buffers
 *     internal void @<name>.body(T0* noalias, ..., i64, i64)   the loops
 * The body's noalias parameters let the vectoriser skip runtime alias checks. The iteration
 * space's first loop runs over [begin, end) so the runner can split it across threads; the others
 * run over their extents. Values are emitted on demand at the innermost open loop, with a cache
 * scoped to the loops that are open (a value defined in a closed loop does not dominate); the
 * parts of a REDUCE's operand that do not depend on its loops are emitted before the loops open,
 * and LLVM's LICM hoists what else is invariant.
 *
 * This file is the emitter's core; reductions, the border split, contraction rows and register
 * tiles are in emit-reduce.c, emit-border.c, emit-rows.c and emit-tile.c (see emit-priv.h). */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/x86/emit-priv.h"
#include "codegen/x86/jit.h"

/* Part of every kernel cache key (memory and disk, emit-cache.c). Bump the number with every
 * change to the emitter's files (emit*.c, emit-priv.h) that can change the text it writes for
 * some kernel, or what that text computes: objects compiled by the older emitter are then never
 * served again. A constant rather than the build time, so a rebuild keeps the disk cache and
 * builds are reproducible. */
const char *nx_x86_emit_version(void)
{
    return "x86-emit-2";
}

/* ---- text ----------------------------------------------------------------------------------*/

static void text_free(text *t)
{
    nx_rt_free(t->ctx, t->p, t->cap);
    t->p = NULL;
    t->len = t->cap = 0;
}

/* ---- the emitter ---------------------------------------------------------------------------*/

static int open_scope(emitter *e)
{
    if (e->nscopes >= 4096) {
        e->failed = true;
        return e->cur;
    }
    int s = e->nscopes++;
    e->open[s] = true;
    e->parent[s] = e->cur;
    e->cur = s;
    return s;
}

static void close_scope(emitter *e)
{
    e->open[e->cur] = false;
    e->cur = e->parent[e->cur];
}

int nx_x86_alloca_of(emitter *e, const char *ty)
{
    int v = fresh(e);
    put(&e->allocas, "  %%v%d = alloca %s, align 64\n", v, ty);
    return v;
}

loop nx_x86_loop_open(emitter *e, const char *lo, const char *hi)
{
    loop l = {nx_x86_alloca_of(e, "i64"), 0, e->label++, e->label++, e->label++};
    put(&e->body, "  store i64 %s, i64* %%v%d\n  br label %%L%d\nL%d:\n", lo, l.counter, l.head,
        l.head);
    l.index = fresh(e);
    int c = fresh(e);
    put(&e->body, "  %%v%d = load i64, i64* %%v%d\n", l.index, l.counter);
    put(&e->body, "  %%v%d = icmp slt i64 %%v%d, %s\n", c, l.index, hi);
    put(&e->body, "  br i1 %%v%d, label %%L%d, label %%L%d\nL%d:\n", c, l.bodyl, l.exit, l.bodyl);
    open_scope(e);
    return l;
}

void nx_x86_loop_close(emitter *e, loop l)
{
    close_scope(e);
    int n = fresh(e);
    put(&e->body, "  %%v%d = add i64 %%v%d, 1\n  store i64 %%v%d, i64* %%v%d\n", n, l.index, n,
        l.counter);
    put(&e->body, "  br label %%L%d\nL%d:\n", l.head, l.exit);
}

/* loop_close for a loop the vectoriser and unroller should leave alone (a border of a split:
 * a few iterations of gathers, and vectorising them doubled the kernel's compile time). */
void nx_x86_loop_close_scalar(emitter *e, loop l)
{
    close_scope(e);
    int n = fresh(e), id = e->nmeta;
    e->nmeta += 2;
    put(&e->body, "  %%v%d = add i64 %%v%d, 1\n  store i64 %%v%d, i64* %%v%d\n", n, l.index, n,
        l.counter);
    put(&e->body, "  br label %%L%d, !llvm.loop !%d\nL%d:\n", l.head, id, l.exit);
    put(&e->meta, "!%d = distinct !{!%d, !%d}\n", id, id, id + 1);
    put(&e->meta, "!%d = !{!\"llvm.loop.vectorize.enable\", i1 false}\n", id + 1);
}

static int emit_const(emitter *e, const nx_kinst *in)
{
    int v = fresh(e);
    const char *t = rty(in->dtype);
    char lit[64];
    if (is_fl(in->dtype)) {
        double f = in->dtype == NX_DTYPE_F32 ? (double)(float)in->f : in->f;
        uint64_t b;
        memcpy(&b, &f, 8);
        snprintf(lit, sizeof lit, "0x%016llX", (unsigned long long)b);
    } else if (in->dtype == NX_DTYPE_BOOL) {
        snprintf(lit, sizeof lit, "%s", in->i ? "true" : "false");
    } else {
        snprintf(lit, sizeof lit, "%lld", (long long)in->i);
    }
    put(&e->body, "  %%v%d = select i1 true, %s %s, %s %s\n", v, t, lit, t, lit);
    return v;
}

static int emit_load(emitter *e, const nx_kinst *in)
{
    int off = V(in->a[1]);
    int b = in->a[0], p = fresh(e), v = fresh(e);
    const char *t = mty(in->dtype);
    put(&e->body, "  %%v%d = getelementptr inbounds %s, %s* %%b%d, i64 %%v%d\n", p, t, t, b, off);
    put(&e->body, "  %%v%d = load %s, %s* %%v%d\n", v, t, t, p);
    if (in->dtype == NX_DTYPE_BOOL) {
        int c = fresh(e);
        put(&e->body, "  %%v%d = icmp ne i8 %%v%d, 0\n", c, v);
        return c;
    }
    return v;
}

static const char *const math_names[] = {"exp", "log",  "log1p", "expm1", "sin", "cos",
                                          "tanh", "erf", "sqrt",  "pow",   "atan2"};
#define MATH_COUNT (int)(sizeof math_names / sizeof *math_names)

/* Records that the kernel calls name in dtype d: only those are declared, and so defined in the
 * module (a body LLVM would otherwise optimise, then delete, costs compile time). */
static void math_use(emitter *e, const char *name, int d)
{
    for (int i = 0; i < MATH_COUNT; i++)
        if (strcmp(math_names[i], name) == 0)
            e->math_used |= 1u << (2 * i + (d == NX_DTYPE_F64));
}

int nx_x86_mathcall(emitter *e, const char *name, int d, int a, int b)
{
    const char *t = rty(d);
    int v = fresh(e);
    math_use(e, name, d);
    if (b >= 0)
        put(&e->body, "  %%v%d = call %s @nx.math.%s.%s(%s %%v%d, %s %%v%d)\n", v, t, name,
            mathsuffix(d), t, a, t, b);
    else
        put(&e->body, "  %%v%d = call %s @nx.math.%s.%s(%s %%v%d)\n", v, t, name, mathsuffix(d), t,
            a);
    return v;
}

/* A side of a float MIN/MAX: a MIN/MAX node gives its plain pick and ordered flag, anything else
 * (a leaf of the tree) its value and no flag. */
static void minmax_side(emitter *e, int32_t id, int *pick, int *ord)
{
    int v = V(id);
    *pick = e->mm[2 * id] >= 0 ? e->mm[2 * id] : v;
    *ord = e->mm[2 * id] >= 0 ? e->mm[2 * id + 1] : -1;
}

/* Float MIN/MAX as the interpreter: the canonical NaN when a or b is NaN, else b > a ? b : a
 * (ties keep a: max(+0, -0) is +0, max(-0, +0) is -0). A tree of them is NaN exactly when one of
 * its leaves is, so each node hands its MIN/MAX users the plain pick (one maxps/minps, which has
 * the tie rule) and a flag "every leaf below is ordered" (one compare, masked by the children's
 * flags: vcmpordps k{k}); the NaN is blended in where a value leaves the tree, and the blends of
 * inner nodes are dead code. Per node that is 2 vector operations where a NaN test per node took
 * 3 (maxps, cmpunordps a b, blend): the 26 steps of a 3^3 dilation or the median network. */
static int float_minmax(emitter *e, int32_t id)
{
    const nx_kinst *in = &e->k->inst[id];
    int d = e->k->inst[in->a[0]].dtype;
    const char *t = rty(d);
    int a, oa, b, ob;
    minmax_side(e, in->a[0], &a, &oa);
    minmax_side(e, in->a[1], &b, &ob);
    int r = selv(e, t, op2(e, in->prim == NX_PRIM_MAX ? "fcmp ogt" : "fcmp olt", t, b, a), b, a);
    int ord;
    if (oa < 0 && ob < 0)
        ord = op2(e, "fcmp ord", t, a, b);
    else if (oa < 0)
        ord = op2(e, "and", "i1", ob, op2(e, "fcmp ord", t, a, a));
    else if (ob < 0)
        ord = op2(e, "and", "i1", oa, op2(e, "fcmp ord", t, b, b));
    else
        ord = op2(e, "and", "i1", oa, ob);
    e->mm[2 * id] = r;
    e->mm[2 * id + 1] = ord;
    return selv(e, t, ord, r, fconst(e, d, NAN));
}

static int float_mod(emitter *e, const char *t, int d, int a, int b)
{
    int m = op2(e, "frem", t, a, b), zero = fconst(e, d, 0.0);
    int mneg = op2(e, "fcmp olt", t, m, zero), bneg = op2(e, "fcmp olt", t, b, zero);
    int differ = op2(e, "xor", "i1", mneg, bneg);
    int nonzero = op2(e, "fcmp une", t, m, zero);
    int adj = selv(e, t, op2(e, "and", "i1", nonzero, differ), op2(e, "fadd", t, m, b), m);
    char fn[32];
    snprintf(fn, sizeof fn, "llvm.copysign.%s", d == NX_DTYPE_F32 ? "f32" : "f64");
    int sz = fresh(e);
    put(&e->body, "  %%v%d = call %s @%s(%s %%v%d, %s %%v%d)\n", sz, t, fn, t, zero, t, b);
    int r = selv(e, t, nonzero, adj, sz);
    return selv(e, t, isnan_of(e, t, m), m, r);
}

/* Floor division and numpy's mod with x / 0 = 0, x mod 0 = 0, MIN / -1 = MIN (wrapped). */
static int int_divmod(emitter *e, int d, bool div, int a, int b)
{
    const char *t = rty(d);
    int zero = constv(e, t, "0"), one = constv(e, t, "1");
    int bz = op2(e, "icmp eq", t, b, zero);
    if (is_unsigned(d)) {
        int safe = selv(e, t, bz, one, b);
        int r = op2(e, div ? "udiv" : "urem", t, a, safe);
        return selv(e, t, bz, zero, r);
    }
    char minlit[32];
    snprintf(minlit, sizeof minlit, "%lld",
             (long long)(d == NX_DTYPE_I64 ? INT64_MIN : -(1LL << (bits(d) - 1))));
    int ovf = op2(e, "and", "i1", op2(e, "icmp eq", t, a, constv(e, t, minlit)),
                  op2(e, "icmp eq", t, b, constv(e, t, "-1")));
    int bad = op2(e, "or", "i1", bz, ovf);
    int safe = selv(e, t, bad, one, b);
    int q = op2(e, "sdiv", t, a, safe), r = op2(e, "srem", t, a, safe);
    int differ =
        op2(e, "xor", "i1", op2(e, "icmp slt", t, r, zero), op2(e, "icmp slt", t, safe, zero));
    int fix = op2(e, "and", "i1", op2(e, "icmp ne", t, r, zero), differ);
    if (div) {
        int qa = selv(e, t, fix, op2(e, "sub", t, q, one), q);
        return selv(e, t, bz, zero, qa);
    }
    int ra = selv(e, t, fix, op2(e, "add", t, r, safe), r);
    return selv(e, t, bad, zero, ra);
}

int nx_x86_emit_cast(emitter *e, int from, int to, int x)
{
    const char *ft = rty(from), *tt = rty(to);
    int v = fresh(e);
    if (from == to)
        return x;
    if (to == NX_DTYPE_BOOL) {
        if (is_fl(from))
            return op2(e, "fcmp une", ft, x, fconst(e, from, 0.0));
        return op2(e, "icmp ne", ft, x, constv(e, ft, "0"));
    }
    if (is_fl(from) && is_fl(to)) {
        put(&e->body, "  %%v%d = %s %s %%v%d to %s\n", v,
            from == NX_DTYPE_F32 ? "fpext" : "fptrunc", ft, x, tt);
    } else if (is_fl(to)) {
        put(&e->body, "  %%v%d = %s %s %%v%d to %s\n", v, is_unsigned(from) ? "uitofp" : "sitofp",
            ft, x, tt);
    } else if (is_fl(from)) {
        put(&e->body, "  %%v%d = call %s @llvm.fpto%ci.sat.i%d.%s(%s %%v%d)\n", v, tt,
            is_unsigned(to) ? 'u' : 's', bits(to), from == NX_DTYPE_F32 ? "f32" : "f64", ft, x);
    } else if (bits(to) < bits(from)) {
        put(&e->body, "  %%v%d = trunc %s %%v%d to %s\n", v, ft, x, tt);
    } else if (bits(to) > bits(from)) {
        put(&e->body, "  %%v%d = %s %s %%v%d to %s\n", v, is_unsigned(from) ? "zext" : "sext", ft,
            x, tt);
    } else {
        return x; /* i8 <-> u8: same bits */
    }
    return v;
}

/* ---- primitives ----------------------------------------------------------------------------*/

/* The elementwise code, one function per primitive (table below). Operands are emitted first, in
 * operand order. */

static const nx_kinst *inst(const emitter *e, int32_t id)
{
    return &e->k->inst[id];
}

/* The dtype of an instruction's first operand (the one a primitive's code is chosen by). */
static int d0_of(const emitter *e, const nx_kinst *in)
{
    return e->k->inst[in->a[0]].dtype;
}

/* The integer zero of in's dtype (false for bool). */
static int int_zero(emitter *e, const nx_kinst *in)
{
    return constv(e, rty(in->dtype), in->dtype == NX_DTYPE_BOOL ? "false" : "0");
}

/* An LLVM intrinsic of one float operand: llvm.<name>.f32 or .f64. */
static int intrinsic1(emitter *e, const nx_kinst *in, const char *name)
{
    int x = V(in->a[0]);
    char fn[48];
    snprintf(fn, sizeof fn, "llvm.%s.%s", name, in->dtype == NX_DTYPE_F32 ? "f32" : "f64");
    return call1(e, fn, rty(in->dtype), x);
}

/* A function of the inline math library (math.c) on one float operand. */
static int math1(emitter *e, const nx_kinst *in, const char *name)
{
    int x = V(in->a[0]);
    return nx_x86_mathcall(e, name, in->dtype, x, -1);
}

/* One LLVM instruction on two operands of one dtype: fop for floats, sop for signed integers,
 * uop for unsigned ones and bool. */
static int binop(emitter *e, const nx_kinst *in, const char *fop, const char *sop,
                 const char *uop)
{
    int a = V(in->a[0]), b = V(in->a[1]), d = d0_of(e, in);
    return op2(e, is_fl(d) ? fop : is_unsigned(d) ? uop : sop, rty(d), a, b);
}

static int p_neg(emitter *e, int32_t id)
{
    const nx_kinst *in = inst(e, id);
    int x = V(in->a[0]);
    if (!is_fl(in->dtype))
        return op2(e, "sub", rty(in->dtype), int_zero(e, in), x);
    int v = fresh(e);
    put(&e->body, "  %%v%d = fneg %s %%v%d\n", v, rty(in->dtype), x);
    return v;
}

static int p_abs(emitter *e, int32_t id)
{
    const nx_kinst *in = inst(e, id);
    if (is_fl(in->dtype))
        return intrinsic1(e, in, "fabs");
    int x = V(in->a[0]);
    const char *t = rty(in->dtype);
    int z = int_zero(e, in);
    return selv(e, t, op2(e, "icmp slt", t, x, z), op2(e, "sub", t, z, x), x);
}

static int p_floor(emitter *e, int32_t id)
{
    return intrinsic1(e, inst(e, id), "floor");
}

static int p_ceil(emitter *e, int32_t id)
{
    return intrinsic1(e, inst(e, id), "ceil");
}

static int p_round(emitter *e, int32_t id)
{
    return intrinsic1(e, inst(e, id), "nearbyint"); /* half to even in the default mode */
}

static int p_exp(emitter *e, int32_t id)
{
    return math1(e, inst(e, id), "exp");
}

static int p_log(emitter *e, int32_t id)
{
    return math1(e, inst(e, id), "log");
}

static int p_log1p(emitter *e, int32_t id)
{
    return math1(e, inst(e, id), "log1p");
}

static int p_expm1(emitter *e, int32_t id)
{
    return math1(e, inst(e, id), "expm1");
}

static int p_sqrt(emitter *e, int32_t id)
{
    return math1(e, inst(e, id), "sqrt");
}

static int p_rsqrt(emitter *e, int32_t id)
{
    const nx_kinst *in = inst(e, id);
    int x = V(in->a[0]);
    return op2(e, "fdiv", rty(in->dtype), fconst(e, in->dtype, 1.0),
               nx_x86_mathcall(e, "sqrt", in->dtype, x, -1));
}

static int p_sin(emitter *e, int32_t id)
{
    return math1(e, inst(e, id), "sin");
}

static int p_cos(emitter *e, int32_t id)
{
    return math1(e, inst(e, id), "cos");
}

static int p_tanh(emitter *e, int32_t id)
{
    return math1(e, inst(e, id), "tanh");
}

static int p_erf(emitter *e, int32_t id)
{
    return math1(e, inst(e, id), "erf");
}

/* -1, 0 or 1; a float NaN stays NaN. */
static int p_sign(emitter *e, int32_t id)
{
    const nx_kinst *in = inst(e, id);
    int x = V(in->a[0]), d = in->dtype;
    const char *t = rty(d);
    if (is_fl(d)) {
        int zero = fconst(e, d, 0.0);
        int pos = op2(e, "fcmp ogt", t, x, zero), neg = op2(e, "fcmp olt", t, x, zero);
        int s = selv(e, t, pos, fconst(e, d, 1.0), selv(e, t, neg, fconst(e, d, -1.0), zero));
        return selv(e, t, isnan_of(e, t, x), x, s);
    }
    int z = int_zero(e, in);
    int pos = op2(e, is_unsigned(d) ? "icmp ugt" : "icmp sgt", t, x, z);
    int neg = op2(e, "icmp slt", t, x, z);
    if (is_unsigned(d))
        neg = constv(e, "i1", "false");
    return selv(e, t, pos, constv(e, t, "1"), selv(e, t, neg, constv(e, t, "-1"), z));
}

static int p_isnan(emitter *e, int32_t id)
{
    const nx_kinst *in = inst(e, id);
    int x = V(in->a[0]), d = d0_of(e, in);
    return is_fl(d) ? isnan_of(e, rty(d), x) : constv(e, "i1", "false");
}

static int p_not(emitter *e, int32_t id)
{
    const nx_kinst *in = inst(e, id);
    int x = V(in->a[0]);
    return op2(e, "xor", "i1", x, constv(e, "i1", "true"));
}

static int p_add(emitter *e, int32_t id)
{
    return binop(e, inst(e, id), "fadd", "add", "add");
}

static int p_sub(emitter *e, int32_t id)
{
    return binop(e, inst(e, id), "fsub", "sub", "sub");
}

static int p_mul(emitter *e, int32_t id)
{
    return binop(e, inst(e, id), "fmul", "mul", "mul");
}

static int p_div(emitter *e, int32_t id)
{
    const nx_kinst *in = inst(e, id);
    int a = V(in->a[0]), b = V(in->a[1]), d = d0_of(e, in);
    return is_fl(d) ? op2(e, "fdiv", rty(d), a, b) : int_divmod(e, d, true, a, b);
}

static int p_mod(emitter *e, int32_t id)
{
    const nx_kinst *in = inst(e, id);
    int a = V(in->a[0]), b = V(in->a[1]), d = d0_of(e, in);
    return is_fl(d) ? float_mod(e, rty(d), d, a, b) : int_divmod(e, d, false, a, b);
}

static int p_pow(emitter *e, int32_t id)
{
    const nx_kinst *in = inst(e, id);
    int a = V(in->a[0]), b = V(in->a[1]);
    return nx_x86_mathcall(e, "pow", d0_of(e, in), a, b);
}

static int p_atan2(emitter *e, int32_t id)
{
    const nx_kinst *in = inst(e, id);
    return nx_x86_mathcall(e, "atan2", d0_of(e, in), V(in->a[0]), V(in->a[1]));
}

/* Floats: a node of a MIN/MAX tree (float_minmax); integers: b beats a strictly, else a. */
static int minmax(emitter *e, int32_t id, bool max)
{
    const nx_kinst *in = inst(e, id);
    int d = d0_of(e, in);
    if (is_fl(d))
        return float_minmax(e, id);
    int a = V(in->a[0]), b = V(in->a[1]);
    const char *t = rty(d), *cmp = max ? (is_unsigned(d) ? "icmp ugt" : "icmp sgt")
                                       : (is_unsigned(d) ? "icmp ult" : "icmp slt");
    return selv(e, t, op2(e, cmp, t, b, a), b, a);
}

static int p_min(emitter *e, int32_t id)
{
    return minmax(e, id, false);
}

static int p_max(emitter *e, int32_t id)
{
    return minmax(e, id, true);
}

static int p_eq(emitter *e, int32_t id)
{
    return binop(e, inst(e, id), "fcmp oeq", "icmp eq", "icmp eq");
}

static int p_ne(emitter *e, int32_t id)
{
    return binop(e, inst(e, id), "fcmp une", "icmp ne", "icmp ne");
}

static int p_lt(emitter *e, int32_t id)
{
    return binop(e, inst(e, id), "fcmp olt", "icmp slt", "icmp ult");
}

static int p_le(emitter *e, int32_t id)
{
    return binop(e, inst(e, id), "fcmp ole", "icmp sle", "icmp ule");
}

static int p_gt(emitter *e, int32_t id)
{
    return binop(e, inst(e, id), "fcmp ogt", "icmp sgt", "icmp ugt");
}

static int p_ge(emitter *e, int32_t id)
{
    return binop(e, inst(e, id), "fcmp oge", "icmp sge", "icmp uge");
}

static int p_and(emitter *e, int32_t id)
{
    return binop(e, inst(e, id), NULL, NULL, "and"); /* bool only */
}

static int p_or(emitter *e, int32_t id)
{
    return binop(e, inst(e, id), NULL, NULL, "or");
}

/* ---- integer bits (docs/numerics.md) ----*/

static int p_bitnot(emitter *e, int32_t id)
{
    const nx_kinst *in = inst(e, id);
    return op2(e, "xor", rty(in->dtype), V(in->a[0]), constv(e, rty(in->dtype), "-1"));
}

static int p_bitand(emitter *e, int32_t id)
{
    return binop(e, inst(e, id), NULL, "and", "and");
}

static int p_bitor(emitter *e, int32_t id)
{
    return binop(e, inst(e, id), NULL, "or", "or");
}

static int p_bitxor(emitter *e, int32_t id)
{
    return binop(e, inst(e, id), NULL, "xor", "xor");
}

/* a << b, a >> b: the count read unsigned; from the width on, 0 (shl, logical shr) or the sign
 * (arithmetic shr: a shift by the width - 1). LLVM's shifts are poison there, hence the select. */
static int shift(emitter *e, int32_t id, bool left)
{
    const nx_kinst *in = inst(e, id);
    int a = V(in->a[0]), b = V(in->a[1]), d = in->dtype;
    const char *t = rty(d);
    char wl[16], wm[16];
    snprintf(wl, sizeof wl, "%d", bits(d));
    snprintf(wm, sizeof wm, "%d", bits(d) - 1);
    int oob = op2(e, "icmp uge", t, b, constv(e, t, wl));
    if (!left && !is_unsigned(d))
        return op2(e, "ashr", t, a, selv(e, t, oob, constv(e, t, wm), b));
    int r = op2(e, left ? "shl" : "lshr", t, a, selv(e, t, oob, constv(e, t, "0"), b));
    return selv(e, t, oob, constv(e, t, "0"), r);
}

static int p_shl(emitter *e, int32_t id)
{
    return shift(e, id, true);
}

static int p_shr(emitter *e, int32_t id)
{
    return shift(e, id, false);
}

/* llvm.fshl(a, a, b) rotates left by b mod the width */
static int p_rotl(emitter *e, int32_t id)
{
    const nx_kinst *in = inst(e, id);
    int a = V(in->a[0]), b = V(in->a[1]), v = fresh(e);
    const char *t = rty(in->dtype);
    put(&e->body, "  %%v%d = call %s @llvm.fshl.%s(%s %%v%d, %s %%v%d, %s %%v%d)\n", v, t, t, t, a,
        t, a, t, b);
    return v;
}

/* the high half of the product in twice the width (u32 in i64, u64 in i128) */
static int p_mulhi(emitter *e, int32_t id)
{
    const nx_kinst *in = inst(e, id);
    int a = V(in->a[0]), b = V(in->a[1]), w = bits(in->dtype);
    const char *t = rty(in->dtype), *wt = w == 32 ? "i64" : "i128";
    int za = fresh(e), zb = fresh(e), r = fresh(e);
    put(&e->body, "  %%v%d = zext %s %%v%d to %s\n", za, t, a, wt);
    put(&e->body, "  %%v%d = zext %s %%v%d to %s\n", zb, t, b, wt);
    int p = op2(e, "mul", wt, za, zb);
    char wl[16];
    snprintf(wl, sizeof wl, "%d", w);
    int hi = op2(e, "lshr", wt, p, constv(e, wt, wl));
    put(&e->body, "  %%v%d = trunc %s %%v%d to %s\n", r, wt, hi, t);
    return r;
}

static int p_select(emitter *e, int32_t id)
{
    const nx_kinst *in = inst(e, id);
    int c = V(in->a[0]), x = V(in->a[1]), y = V(in->a[2]);
    return selv(e, rty(in->dtype), c, x, y);
}

static int p_cast(emitter *e, int32_t id)
{
    const nx_kinst *in = inst(e, id);
    int x = V(in->a[0]);
    return nx_x86_emit_cast(e, d0_of(e, in), in->dtype, x);
}

/* Operand classes a primitive's code handles: the dtype of its first operand (select: of its
 * arms) is a float (f32, f64), an integer or bool. */
enum { OPS_FLOAT = 1, OPS_INT = 2, OPS_BOOL = 4, OPS_NUMBER = 3, OPS_ANY = 7 };

/* How the scalar emitter computes each primitive: its function and the operand classes it
 * handles (those the primitive's shape rule admits, less what there is no code for: atan2, whose
 * inline math is not written, and integer pow, a loop). A primitive without an entry has no code
 * here, and nx_x86_kernel_unsupported refuses every kernel that holds it: the backend then falls
 * back loudly rather than miscompile a new row of ir/prims.def. */
typedef struct prim_rule {
    int (*emit)(emitter *e, int32_t id);
    uint8_t ops;
} prim_rule;

static const prim_rule prim_rules[NX_PRIM_COUNT] = {
    [NX_PRIM_NEG] = {p_neg, OPS_NUMBER},
    [NX_PRIM_ABS] = {p_abs, OPS_NUMBER},
    [NX_PRIM_EXP] = {p_exp, OPS_FLOAT},
    [NX_PRIM_LOG] = {p_log, OPS_FLOAT},
    [NX_PRIM_LOG1P] = {p_log1p, OPS_FLOAT},
    [NX_PRIM_EXPM1] = {p_expm1, OPS_FLOAT},
    [NX_PRIM_SQRT] = {p_sqrt, OPS_FLOAT},
    [NX_PRIM_RSQRT] = {p_rsqrt, OPS_FLOAT},
    [NX_PRIM_SIN] = {p_sin, OPS_FLOAT},
    [NX_PRIM_COS] = {p_cos, OPS_FLOAT},
    [NX_PRIM_TANH] = {p_tanh, OPS_FLOAT},
    [NX_PRIM_ERF] = {p_erf, OPS_FLOAT},
    [NX_PRIM_FLOOR] = {p_floor, OPS_FLOAT},
    [NX_PRIM_CEIL] = {p_ceil, OPS_FLOAT},
    [NX_PRIM_ROUND] = {p_round, OPS_FLOAT},
    [NX_PRIM_SIGN] = {p_sign, OPS_NUMBER},
    [NX_PRIM_ISNAN] = {p_isnan, OPS_NUMBER},
    [NX_PRIM_NOT] = {p_not, OPS_BOOL},
    [NX_PRIM_ADD] = {p_add, OPS_NUMBER},
    [NX_PRIM_SUB] = {p_sub, OPS_NUMBER},
    [NX_PRIM_MUL] = {p_mul, OPS_NUMBER},
    [NX_PRIM_DIV] = {p_div, OPS_NUMBER},
    [NX_PRIM_POW] = {p_pow, OPS_FLOAT},
    [NX_PRIM_ATAN2] = {p_atan2, OPS_FLOAT},
    [NX_PRIM_MIN] = {p_min, OPS_NUMBER},
    [NX_PRIM_MAX] = {p_max, OPS_NUMBER},
    [NX_PRIM_MOD] = {p_mod, OPS_NUMBER},
    [NX_PRIM_EQ] = {p_eq, OPS_ANY},
    [NX_PRIM_NE] = {p_ne, OPS_ANY},
    [NX_PRIM_LT] = {p_lt, OPS_ANY},
    [NX_PRIM_LE] = {p_le, OPS_ANY},
    [NX_PRIM_GT] = {p_gt, OPS_ANY},
    [NX_PRIM_GE] = {p_ge, OPS_ANY},
    [NX_PRIM_AND] = {p_and, OPS_BOOL},
    [NX_PRIM_OR] = {p_or, OPS_BOOL},
    [NX_PRIM_BITNOT] = {p_bitnot, OPS_INT},
    [NX_PRIM_BITAND] = {p_bitand, OPS_INT},
    [NX_PRIM_BITOR] = {p_bitor, OPS_INT},
    [NX_PRIM_BITXOR] = {p_bitxor, OPS_INT},
    [NX_PRIM_SHL] = {p_shl, OPS_INT},
    [NX_PRIM_SHR] = {p_shr, OPS_INT},
    [NX_PRIM_ROTL] = {p_rotl, OPS_INT},
    [NX_PRIM_MULHI] = {p_mulhi, OPS_INT},
    [NX_PRIM_SELECT] = {p_select, OPS_ANY},
    [NX_PRIM_CAST] = {p_cast, OPS_ANY},
};

static int ops_class(int d)
{
    return is_fl(d) ? OPS_FLOAT : d == NX_DTYPE_BOOL ? OPS_BOOL : OPS_INT;
}

/* ---- supports ------------------------------------------------------------------------------*/

/* Why the scalar emitter has no code for PRIM instruction in (why: a buffer of n), or NULL. */
static const char *prim_unsupported(const nx_kernel *k, const nx_kinst *in, char *why, size_t n)
{
    const char *name = nx_ir_prim_name(in->prim);
    const prim_rule *r = in->prim < NX_PRIM_COUNT ? &prim_rules[in->prim] : NULL;
    if (!r || !r->emit) {
        snprintf(why, n, "cpu: primitive %s has no emitter", name);
        return why;
    }
    int od = in->prim == NX_PRIM_SELECT ? in->dtype : k->inst[in->a[0]].dtype;
    if (!(r->ops & ops_class(od))) {
        snprintf(why, n, "cpu: primitive %s has no emitter for %s operands", name,
                 nx_dtype_name((nx_dtype)od));
        return why;
    }
    return NULL;
}

const char *nx_x86_kernel_unsupported(const nx_kernel *k)
{
    static _Thread_local char why[160];
    if (k->kind != NX_KERNEL_LOOP) /* their host routine, on slots only */
        return k->has_prologue || k->has_epilogue
                   ? "cpu: a library kernel with a prologue or an epilogue (fused for another "
                     "backend)"
                   : NULL;
    /* The compile budget: LLVM's optimisation time grows faster than a kernel's size (a 15625-load
     * fused kernel sat in IndVarSimplify for minutes), so a kernel this large is never handed to
     * it; the kernel interpreter runs it, with the placement's loud fallback. Builders keep their
     * kernels far below (docs/morphology.md, "Window size"). */
    if (k->ninst > NX_X86_MAX_INST) {
        snprintf(why, sizeof why,
                 "cpu: %d instructions, above the JIT's compile budget of %d (compile time grows "
                 "faster than the kernel)",
                 k->ninst, NX_X86_MAX_INST);
        return why;
    }
    for (int b = 0; b < k->nbufs; b++)
        if (!rty(k->bufs[b].dtype)) {
            snprintf(why, sizeof why, "cpu: buffer %d is %s (f16/bf16 values are not emitted)", b,
                     nx_dtype_name((nx_dtype)k->bufs[b].dtype));
            return why;
        }
    for (int i = 0; i < k->ninst; i++) {
        const nx_kinst *in = &k->inst[i];
        if (!rty(in->dtype)) {
            snprintf(why, sizeof why, "cpu: %%%d is %s (f16/bf16 values are not emitted)", i,
                     nx_dtype_name((nx_dtype)in->dtype));
            return why;
        }
        if (in->op == NX_KOP_PRIM && prim_unsupported(k, in, why, sizeof why))
            return why;
    }
    return NULL;
}

bool nx_x86_supports(const nx_kernel *k)
{
    return nx_x86_kernel_unsupported(k) == NULL;
}

/* The code of PRIM instruction id, from its entry of prim_rules (nx_x86_emit_text refuses a
 * kernel with a primitive that has none before it emits anything). */
static int emit_prim(emitter *e, int32_t id)
{
    int p = e->k->inst[id].prim;
    if (p < 0 || p >= NX_PRIM_COUNT || !prim_rules[p].emit) {
        e->no_rule = true;
        return 0;
    }
    return prim_rules[p].emit(e, id);
}

/* An instruction's value in the interior of a border split (borders.c). */
static int alias_value(emitter *e, int32_t id, const nx_x86_alias *al)
{
    if (al->kind == NX_X86_ALIAS_TO)
        return al->c == 0 ? V(al->to) : op2(e, "add", "i64", V(al->to), i64c(e, al->c));
    if (e->k->inst[id].dtype == NX_DTYPE_BOOL)
        return constv(e, "i1", al->c ? "true" : "false");
    return i64c(e, al->c);
}

int nx_x86_value(emitter *e, int32_t id)
{
    if (e->val[id] >= 0 && e->open[e->scope[id]])
        return e->val[id];
    const nx_kinst *in = &e->k->inst[id];
    int v;
    e->mm[2 * id] = -1;
    if (e->alias && e->alias[id].kind != NX_X86_ALIAS_SELF) {
        v = alias_value(e, id, &e->alias[id]);
        e->val[id] = v;
        e->scope[id] = e->cur;
        return v;
    }
    switch (in->op) {
    case NX_KOP_CONST:
        v = emit_const(e, in);
        break;
    case NX_KOP_IDX:
        return e->loopvar[in->a[0]];
    case NX_KOP_LOAD:
        v = emit_load(e, in);
        break;
    case NX_KOP_PRIM:
        v = emit_prim(e, id);
        break;
    case NX_KOP_REDUCE:
        v = nx_x86_emit_reduce(e, id);
        break;
    default: /* nx_kernel_validate admits no other code */
        e->no_rule = true;
        return 0;
    }
    e->val[id] = v;
    e->scope[id] = e->cur;
    return v;
}

/* ---- kernels -------------------------------------------------------------------------------*/

void nx_x86_emit_store(emitter *e, const nx_kstore *s, int lin)
{
    const nx_kbuf *b = &e->k->bufs[s->buf];
    int v = V(s->value);
    const char *t = mty(b->dtype);
    if (b->dtype == NX_DTYPE_BOOL) {
        int z = fresh(e);
        put(&e->body, "  %%v%d = zext i1 %%v%d to i8\n", z, v);
        v = z;
    }
    int p = fresh(e);
    put(&e->body, "  %%v%d = getelementptr inbounds %s, %s* %%b%d, i64 %%v%d\n", p, t, t, s->buf,
        lin);
    put(&e->body, "  store %s %%v%d, %s* %%v%d\n", t, v, t, p);
}

/* The space loops, outermost over [begin, end); the stores at the innermost point. */
/* Streaming (non-temporal) stores: a store of a cache line the kernel does not read first costs
 * a read for ownership, so a kernel writing a large output moves 3 bytes for every 2 it means to;
 * vmovntps writes the line without reading it (a plain copy of 256^3 f32 here: 1.4x faster).
 * Worth it only for an output that cannot stay in the last-level cache for its reader (32 MiB on
 * the machines we measure; a kernel compiled here may run elsewhere, so a fixed size keeps the
 * code a function of the kernel alone). The JIT marks the body's 64-byte vector stores after
 * vectorisation (nx_x86_module_optimize) and ends the body with sfence, so it needs every such
 * store to be 64-byte aligned: the plain strategy with no border split stores row by row from
 * column 0 (the loop vectoriser does not peel), rows are a multiple of 64 bytes long, the
 * outputs' elements one size, the innermost loop not the one split across threads (ndim >= 2),
 * and outputs 64-byte aligned (codegen/x86/emit-run.c). Measured (docs/perf/cpu.md): a copy of
 * 256^3 f32 0.0069 -> 0.0047 CPU s, the three FIR passes of a Gaussian -6%; a 3^3 dilation with
 * its interior peeled to a 64-byte boundary was 35% slower streamed (27 loads per store), so
 * split kernels are not streamed. */
#define STREAM_MIN_BYTES (32ll << 20)

static bool stream_ok(const emitter *e)
{
    const nx_kernel *k = e->k;
    if (k->ndim < 2 || e->bd.loop >= 0)
        return false;
    for (int s = 0; s < k->nstores; s++) {
        const nx_kbuf *b = &k->bufs[k->stores[s].buf];
        int64_t es = (int64_t)nx_dtype_size(b->dtype);
        if (es != (int64_t)nx_dtype_size(k->bufs[k->stores[0].buf].dtype) ||
            nx_ir_numel(b->ndim, b->shape) * es < STREAM_MIN_BYTES ||
            k->extent[k->ndim - 1] * es % 64 != 0)
            return false;
    }
    return k->nstores > 0;
}

static void emit_space(emitter *e)
{
    const nx_kernel *k = e->k;
    loop ls[NX_MAX_DIMS];
    tile t = {.cls = e->tile_cls, .vc = e->tile_vc};
    bool split = e->bd.loop >= 0, split_tiles = false;
    int tr = nx_x86_tile_reduce(e, &t);
    if (tr < 0 && split && !e->nomem) { /* the interior may tile where the whole does not */
        e->alias = e->bd.alias;
        tr = nx_x86_tile_reduce(e, &t);
        e->alias = NULL;
        split_tiles = tr >= 0;
    }
    int r = tr >= 0 ? -1 : nx_x86_row_reduce(e);
    int nd = tr >= 0 ? k->ndim - 2 : r >= 0 || split ? k->ndim - 1 : k->ndim;
    int lin = constv(e, "i64", "0");
    for (int d = 0; d < nd; d++) {
        char hi[32];
        snprintf(hi, sizeof hi, "%lld", (long long)k->extent[d]);
        ls[d] = nx_x86_loop_open(e, d == 0 ? "%begin" : "0", d == 0 ? "%end" : hi);
        e->loopvar[d] = ls[d].index;
        e->live |= 1u << d;
        lin = op2(e, "add", "i64", op2(e, "mul", "i64", lin, constv(e, "i64", hi)), ls[d].index);
    }
    if (tr >= 0) {
        char hi[32];
        snprintf(hi, sizeof hi, "%lld", (long long)k->extent[t.il]);
        if (split_tiles)
            nx_x86_emit_split_tiles(e, &t, nd == 0 ? "%begin" : "0", nd == 0 ? "%end" : hi, lin);
        else
            nx_x86_emit_tiles(e, &t, nd == 0 ? "%begin" : "0", nd == 0 ? "%end" : hi, 0,
                              k->extent[t.jl], lin);
    } else if (r >= 0) {
        nx_x86_emit_rows(e, r, lin, 0, k->extent[k->ndim - 1], split);
    } else if (split) {
        nx_x86_emit_split_stores(e, lin);
    } else {
        e->stream = stream_ok(e);
        for (int s = 0; s < k->nstores; s++)
            nx_x86_emit_store(e, &k->stores[s], lin);
    }
    for (int d = nd - 1; d >= 0; d--)
        nx_x86_loop_close(e, ls[d]);
}

static void emit_declarations(const emitter *e, text *t)
{
    for (int i = 0; i < MATH_COUNT; i++)
        for (int f = 0; f < 2; f++) {
            if (!(e->math_used >> (2 * i + f) & 1))
                continue;
            const char *ty = f ? "double" : "float";
            put(t, "declare %s @nx.math.%s.%s(%s", ty, math_names[i], f ? "f64" : "f32", ty);
            bool two = strcmp(math_names[i], "pow") == 0 || strcmp(math_names[i], "atan2") == 0;
            put(t, two ? ", %s)\n" : ")\n", ty);
        }
    for (int fn = 0; fn < 2; fn++)
        for (int f = 0; f < 2; f++)
            for (int w = 4; w <= 16; w *= 2) {
                if (!(e->vmath_used >> vmath_bit(fn, f ? NX_DTYPE_F64 : NX_DTYPE_F32, w) & 1))
                    continue;
                const char *ty = f ? "double" : "float";
                put(t, "declare <%d x %s> @nx.math.%s.v%d%s(<%d x %s>)\n", w, ty,
                    fn ? "log" : "exp", w, f ? "f64" : "f32", w, ty);
            }
    for (int i = 0; i < 4; i++) {
        static const char *const ty[4] = {"float", "<4 x float>", "<8 x float>", "<16 x float>"};
        static const char *const sfx[4] = {"", "v4", "v8", "v16"};
        if (e->fmuladd_used >> i & 1)
            put(t, "declare %s @llvm.fmuladd.%sf32(%s, %s, %s)\n", ty[i], sfx[i], ty[i], ty[i],
                ty[i]);
    }
    static const char *const intr[] = {"fabs", "floor", "ceil", "nearbyint"};
    for (size_t i = 0; i < sizeof intr / sizeof *intr; i++) {
        put(t, "declare float @llvm.%s.f32(float)\n", intr[i]);
        put(t, "declare double @llvm.%s.f64(double)\n", intr[i]);
    }
    for (int i = 8; i <= 64; i *= 2)
        put(t, "declare i%d @llvm.fshl.i%d(i%d, i%d, i%d)\n", i, i, i, i, i);
    put(t, "declare float @llvm.copysign.f32(float, float)\n");
    put(t, "declare double @llvm.copysign.f64(double, double)\n");
    static const int ib[] = {8, 16, 32, 64};
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < 4; i++)
            for (int f = 0; f < 2; f++)
                put(t, "declare i%d @llvm.fpto%ci.sat.i%d.%s(%s)\n", ib[i], s ? 'u' : 's', ib[i],
                    f ? "f64" : "f32", f ? "double" : "float");
}

static void emit_functions(emitter *e, text *out, const char *name)
{
    const nx_kernel *k = e->k;
    put(out, "define internal void @%s.body(", name);
    for (int b = 0; b < k->nbufs; b++)
        put(out, "%s* noalias %%b%d, ", mty(k->bufs[b].dtype), b);
    put(out, "i64 %%begin, i64 %%end) noinline nounwind%s {\nentry:\n",
        e->stream ? " \"" NX_X86_STREAM_ATTR "\"" : "");
    put(out, "%s", e->allocas.p ? e->allocas.p : "");
    put(out, "%s  ret void\n}\n\n", e->body.p ? e->body.p : "");
    put(out, "define void @%s(i8** %%bufs, i64 %%begin, i64 %%end) nounwind {\nentry:\n", name);
    for (int b = 0; b < k->nbufs; b++) {
        const char *t = mty(k->bufs[b].dtype);
        put(out, "  %%p%d = getelementptr i8*, i8** %%bufs, i64 %d\n", b, b);
        put(out, "  %%r%d = load i8*, i8** %%p%d\n", b, b);
        put(out, "  %%c%d = bitcast i8* %%r%d to %s*\n", b, b, t);
    }
    put(out, "  call void @%s.body(", name);
    for (int b = 0; b < k->nbufs; b++)
        put(out, "%s* %%c%d, ", mty(k->bufs[b].dtype), b);
    put(out, "i64 %%begin, i64 %%end)\n  ret void\n}\n");
}

nx_status nx_x86_emit_text(const nx_kernel *k, const char *name, bool reassoc, char **out,
                           size_t *len)
{
    nx_status st = nx_kernel_validate(k);
    if (st != NX_OK)
        return st;
    const char *why = k->kind != NX_KERNEL_LOOP ? "cpu: a library kernel (run by its host routine)"
                                                : nx_x86_kernel_unsupported(k);
    if (why)
        return nx_rt_error(k->ctx, NX_ERR_UNSUPPORTED, "x86 emit: kernel %s: %s", k->name, why);
    size_t n = (size_t)k->ninst + 1;
    emitter e = {.ctx = k->ctx, .k = k, .reassoc = reassoc, .bd = {.loop = -1}};
    e.body.ctx = e.allocas.ctx = e.meta.ctx = k->ctx;
    e.val = nx_rt_alloc(k->ctx, n * sizeof *e.val);
    e.mm = nx_rt_alloc(k->ctx, 2 * n * sizeof *e.mm);
    e.scope = nx_rt_calloc(k->ctx, n, sizeof *e.scope);
    e.mask = nx_rt_calloc(k->ctx, n, sizeof *e.mask);
    e.tile_cls = nx_rt_calloc(k->ctx, n, 1);
    e.tile_vc = nx_rt_alloc(k->ctx, n * TILE_NR * sizeof *e.tile_vc);
    text t = {.ctx = k->ctx};
    if (e.val && e.mm && e.scope && e.mask && e.tile_cls && e.tile_vc) {
        for (size_t i = 0; i < n; i++)
            e.val[i] = e.mm[2 * i] = -1;
        nx_kernel_loop_masks(k, e.mask);
        e.split = nx_x86_kernel_split(k, reassoc);
        e.nomem = nx_x86_borders_find(k, e.mask, &e.bd) != NX_OK;
        e.open[0] = true;
        e.nscopes = 1;
        emit_space(&e);
        emit_declarations(&e, &t);
        emit_functions(&e, &t, name);
        put(&t, "%s", e.meta.p ? e.meta.p : "");
    }
    bool failed = !e.val || !e.mm || !e.scope || !e.mask || !e.tile_cls || !e.tile_vc || e.nomem ||
                  e.body.failed || e.allocas.failed || e.meta.failed || t.failed;
    nx_rt_free(k->ctx, e.val, n * sizeof *e.val);
    nx_rt_free(k->ctx, e.mm, 2 * n * sizeof *e.mm);
    nx_rt_free(k->ctx, e.scope, n * sizeof *e.scope);
    nx_rt_free(k->ctx, e.mask, n * sizeof *e.mask);
    nx_rt_free(k->ctx, e.tile_cls, n);
    nx_rt_free(k->ctx, e.tile_vc, n * TILE_NR * sizeof *e.tile_vc);
    text_free(&e.body);
    text_free(&e.allocas);
    text_free(&e.meta);
    nx_x86_borders_free(k->ctx, &e.bd);
    if (e.no_rule) { /* nx_x86_kernel_unsupported answered otherwise: a bug */
        text_free(&t);
        return nx_rt_error(k->ctx, NX_ERR_INTERNAL,
                           "x86 emit: kernel %s reached an instruction with no emitter", k->name);
    }
    if (failed || e.failed) {
        text_free(&t);
        return e.failed ? nx_rt_error(k->ctx, NX_ERR_UNSUPPORTED,
                                      "x86 emit: kernel %s has too many nested loops", k->name)
                        : nx_rt_nomem(k->ctx, "x86 emit", t.cap);
    }
    *out = t.p;
    *len = t.cap; /* the allocation's size: free with nx_rt_free(ctx, *out, *len) */
    return NX_OK;
}
