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

/* Part of every cache key: a rebuilt emitter never reuses objects of an older one. */
const char *nx_x86_emit_version(void)
{
    return "x86-emit-1 " __DATE__ " " __TIME__;
}

/* ---- text ----------------------------------------------------------------------------------*/

static void text_free(text *t)
{
    nx_rt_free(t->ctx, t->p, t->cap);
    t->p = NULL;
    t->len = t->cap = 0;
}

/* ---- supports ------------------------------------------------------------------------------*/

static bool prim_supported(const nx_kernel *k, const nx_kinst *in)
{
    int d0 = in->a[0] >= 0 ? k->inst[in->a[0]].dtype : in->dtype;
    switch (in->prim) {
    case NX_PRIM_ATAN2:
        return false; /* no inline atan2 in the math library */
    case NX_PRIM_POW:
        return is_fl(d0); /* integer powers loop */
    default:
        return true;
    }
}

bool nx_x86_supports(const nx_kernel *k)
{
    if (k->kind != NX_KERNEL_LOOP)
        return !k->has_prologue && !k->has_epilogue; /* their host routine, on slots only */
    for (int b = 0; b < k->nbufs; b++)
        if (!rty(k->bufs[b].dtype))
            return false;
    for (int i = 0; i < k->ninst; i++) {
        const nx_kinst *in = &k->inst[i];
        if (!rty(in->dtype))
            return false;
        if (in->op == NX_KOP_PRIM && !prim_supported(k, in))
            return false;
    }
    return true;
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

static const char *const math_names[] = {"exp", "log",  "log1p", "expm1", "sin",
                                          "cos", "tanh", "erf",   "sqrt",  "pow"};
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

static int float_unary(emitter *e, const nx_kinst *in, int x)
{
    const char *t = rty(in->dtype);
    char fn[48];
    switch (in->prim) {
    case NX_PRIM_NEG: {
        int v = fresh(e);
        put(&e->body, "  %%v%d = fneg %s %%v%d\n", v, t, x);
        return v;
    }
    case NX_PRIM_ABS:
    case NX_PRIM_FLOOR:
    case NX_PRIM_CEIL:
    case NX_PRIM_ROUND: {
        const char *n = in->prim == NX_PRIM_ABS     ? "fabs"
                        : in->prim == NX_PRIM_FLOOR ? "floor"
                        : in->prim == NX_PRIM_CEIL  ? "ceil"
                                                    : "nearbyint";
        snprintf(fn, sizeof fn, "llvm.%s.%s", n, in->dtype == NX_DTYPE_F32 ? "f32" : "f64");
        return call1(e, fn, t, x);
    }
    case NX_PRIM_EXP:
        return nx_x86_mathcall(e, "exp", in->dtype, x, -1);
    case NX_PRIM_LOG:
        return nx_x86_mathcall(e, "log", in->dtype, x, -1);
    case NX_PRIM_LOG1P:
        return nx_x86_mathcall(e, "log1p", in->dtype, x, -1);
    case NX_PRIM_EXPM1:
        return nx_x86_mathcall(e, "expm1", in->dtype, x, -1);
    case NX_PRIM_SQRT:
        return nx_x86_mathcall(e, "sqrt", in->dtype, x, -1);
    case NX_PRIM_RSQRT:
        return op2(e, "fdiv", t, fconst(e, in->dtype, 1.0),
                   nx_x86_mathcall(e, "sqrt", in->dtype, x, -1));
    case NX_PRIM_SIN:
        return nx_x86_mathcall(e, "sin", in->dtype, x, -1);
    case NX_PRIM_COS:
        return nx_x86_mathcall(e, "cos", in->dtype, x, -1);
    case NX_PRIM_TANH:
        return nx_x86_mathcall(e, "tanh", in->dtype, x, -1);
    case NX_PRIM_ERF:
        return nx_x86_mathcall(e, "erf", in->dtype, x, -1);
    default: { /* SIGN: -1, 0, 1, NaN stays */
        int zero = fconst(e, in->dtype, 0.0);
        int pos = op2(e, "fcmp ogt", t, x, zero), neg = op2(e, "fcmp olt", t, x, zero);
        int s = selv(e, t, pos, fconst(e, in->dtype, 1.0),
                     selv(e, t, neg, fconst(e, in->dtype, -1.0), zero));
        return selv(e, t, isnan_of(e, t, x), x, s);
    }
    }
}

static int int_unary(emitter *e, const nx_kinst *in, int x)
{
    const char *t = rty(in->dtype);
    char zero[8] = "0";
    int z = constv(e, t, in->dtype == NX_DTYPE_BOOL ? "false" : zero);
    switch (in->prim) {
    case NX_PRIM_NEG:
        return op2(e, "sub", t, z, x);
    case NX_PRIM_ABS:
        return selv(e, t, op2(e, "icmp slt", t, x, z), op2(e, "sub", t, z, x), x);
    case NX_PRIM_NOT:
        return op2(e, "xor", t, x, constv(e, t, "true"));
    default: { /* SIGN */
        int pos = op2(e, is_unsigned(in->dtype) ? "icmp ugt" : "icmp sgt", t, x, z);
        int neg = op2(e, "icmp slt", t, x, z);
        if (is_unsigned(in->dtype))
            neg = constv(e, "i1", "false");
        return selv(e, t, pos, constv(e, t, "1"), selv(e, t, neg, constv(e, t, "-1"), z));
    }
    }
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

static int float_binary(emitter *e, const nx_kinst *in, int a, int b)
{
    int d = e->k->inst[in->a[0]].dtype;
    const char *t = rty(d);
    switch (in->prim) {
    case NX_PRIM_ADD:
        return op2(e, "fadd", t, a, b);
    case NX_PRIM_SUB:
        return op2(e, "fsub", t, a, b);
    case NX_PRIM_MUL:
        return op2(e, "fmul", t, a, b);
    case NX_PRIM_DIV:
        return op2(e, "fdiv", t, a, b);
    case NX_PRIM_POW:
        return nx_x86_mathcall(e, "pow", d, a, b);
    case NX_PRIM_MOD:
        return float_mod(e, t, d, a, b);
    case NX_PRIM_EQ:
        return op2(e, "fcmp oeq", t, a, b);
    case NX_PRIM_NE:
        return op2(e, "fcmp une", t, a, b);
    case NX_PRIM_LT:
        return op2(e, "fcmp olt", t, a, b);
    case NX_PRIM_LE:
        return op2(e, "fcmp ole", t, a, b);
    case NX_PRIM_GT:
        return op2(e, "fcmp ogt", t, a, b);
    default:
        return op2(e, "fcmp oge", t, a, b);
    }
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

static int int_binary(emitter *e, const nx_kinst *in, int a, int b)
{
    int d = e->k->inst[in->a[0]].dtype;
    const char *t = rty(d);
    bool u = is_unsigned(d);
    switch (in->prim) {
    case NX_PRIM_ADD:
        return op2(e, "add", t, a, b);
    case NX_PRIM_SUB:
        return op2(e, "sub", t, a, b);
    case NX_PRIM_MUL:
        return op2(e, "mul", t, a, b);
    case NX_PRIM_DIV:
        return int_divmod(e, d, true, a, b);
    case NX_PRIM_MOD:
        return int_divmod(e, d, false, a, b);
    case NX_PRIM_MIN:
        return selv(e, t, op2(e, u ? "icmp ult" : "icmp slt", t, b, a), b, a);
    case NX_PRIM_MAX:
        return selv(e, t, op2(e, u ? "icmp ugt" : "icmp sgt", t, b, a), b, a);
    case NX_PRIM_AND:
        return op2(e, "and", t, a, b);
    case NX_PRIM_OR:
        return op2(e, "or", t, a, b);
    case NX_PRIM_EQ:
        return op2(e, "icmp eq", t, a, b);
    case NX_PRIM_NE:
        return op2(e, "icmp ne", t, a, b);
    case NX_PRIM_LT:
        return op2(e, u ? "icmp ult" : "icmp slt", t, a, b);
    case NX_PRIM_LE:
        return op2(e, u ? "icmp ule" : "icmp sle", t, a, b);
    case NX_PRIM_GT:
        return op2(e, u ? "icmp ugt" : "icmp sgt", t, a, b);
    default:
        return op2(e, u ? "icmp uge" : "icmp sge", t, a, b);
    }
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

static int emit_prim(emitter *e, const nx_kinst *in)
{
    int d0 = e->k->inst[in->a[0]].dtype;
    int a = V(in->a[0]);
    if (in->prim == NX_PRIM_SELECT) {
        int x = V(in->a[1]), y = V(in->a[2]);
        return selv(e, rty(in->dtype), a, x, y);
    }
    if (in->prim == NX_PRIM_CAST)
        return nx_x86_emit_cast(e, d0, in->dtype, a);
    if (in->prim == NX_PRIM_ISNAN)
        return is_fl(d0) ? isnan_of(e, rty(d0), a) : constv(e, "i1", "false");
    if (nx_ir_prims[in->prim].arity == 1)
        return is_fl(d0) ? float_unary(e, in, a) : int_unary(e, in, a);
    int b = V(in->a[1]);
    return is_fl(d0) ? float_binary(e, in, a, b) : int_binary(e, in, a, b);
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

static bool is_minmax(const emitter *e, const nx_kinst *in)
{
    return (in->prim == NX_PRIM_MIN || in->prim == NX_PRIM_MAX) &&
           is_fl(e->k->inst[in->a[0]].dtype);
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
        v = is_minmax(e, in) ? float_minmax(e, id) : emit_prim(e, in);
        break;
    default:
        v = nx_x86_emit_reduce(e, id);
        break;
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
            put(t, strcmp(math_names[i], "pow") == 0 ? ", %s)\n" : ")\n", ty);
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
    if (k->kind != NX_KERNEL_LOOP || !nx_x86_supports(k))
        return nx_rt_error(k->ctx, NX_ERR_UNSUPPORTED, "x86 emit: kernel %s is not supported",
                           k->name);
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
