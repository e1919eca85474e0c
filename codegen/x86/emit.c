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
 * Contraction rows. When a store's value is a REDUCE at the top of a kernel of two or more
 * dimensions whose innermost space loop its operand reads, the kernel keeps one row of carries
 * over the innermost axis (an alloca'd array) and runs the reduction loops outside that axis:
 *     for i: row[:] = identity; for k: for j: row[j] = step(row[j], f(i, k, j)); y[i, :] = row
 * Each output still folds its k in ascending order, so the result is the canonical one, and the
 * j loop is a plain elementwise loop that vectorises (the K-loop with register accumulators of a
 * max-plus or log-sum-exp contraction). */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/x86/emit.h"
#include "codegen/x86/jit.h"

/* Part of every cache key: a rebuilt emitter never reuses objects of an older one. */
const char *nx_x86_emit_version(void)
{
    return "x86-emit-1 " __DATE__ " " __TIME__;
}

/* ---- text ----------------------------------------------------------------------------------*/

typedef nx_rt_text text;

#define put nx_rt_text_put


static void text_free(text *t)
{
    nx_rt_free(t->ctx, t->p, t->cap);
    t->p = NULL;
    t->len = t->cap = 0;
}

/* ---- types ---------------------------------------------------------------------------------*/

/* Register type of a dtype (bool is i1 in registers, i8 in memory). */
static const char *rty(int d)
{
    switch (d) {
    case NX_DTYPE_F32:
        return "float";
    case NX_DTYPE_F64:
        return "double";
    case NX_DTYPE_I8:
    case NX_DTYPE_U8:
        return "i8";
    case NX_DTYPE_I16:
        return "i16";
    case NX_DTYPE_I32:
        return "i32";
    case NX_DTYPE_I64:
        return "i64";
    case NX_DTYPE_BOOL:
        return "i1";
    default:
        return NULL;
    }
}

static const char *mty(int d)
{
    return d == NX_DTYPE_BOOL ? "i8" : rty(d);
}

static bool is_fl(int d)
{
    return d == NX_DTYPE_F32 || d == NX_DTYPE_F64;
}

static bool is_unsigned(int d)
{
    return d == NX_DTYPE_U8 || d == NX_DTYPE_BOOL;
}

static int bits(int d)
{
    return d == NX_DTYPE_BOOL ? 1 : (int)nx_dtype_size((nx_dtype)d) * 8;
}

static const char *mathsuffix(int d)
{
    return d == NX_DTYPE_F32 ? "f32" : "f64";
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

typedef struct emitter {
    nx_ctx *ctx;
    const nx_kernel *k;
    text body, allocas, meta; /* meta: loop metadata nodes, appended to the module */
    int nmeta;
    int tmp, label;
    int *val;   /* SSA number of each instruction's value, -1 when not available */
    int *mm;    /* float MIN/MAX nodes: plain pick and ordered flag (2 id, 2 id + 1), else -1 */
    int *scope; /* the scope each cached value was made in */
    bool open[4096];
    int nscopes, cur;
    int parent[4096];
    int loopvar[NX_KERNEL_MAX_LOOPS]; /* SSA number of each open loop's index */
    uint32_t *mask;
    uint32_t live; /* loops open at the current position */
    uint8_t *tile_cls; /* register tiles: class of each instruction, vector value cache */
    int *tile_vc;
    uint32_t math_used; /* bit 2 i + (f64): math_names[i] is called */
    uint32_t vmath_used; /* vector exp/log of the tiles: bit vmath_bit(fn, d, w) */
    uint32_t fmuladd_used; /* llvm.fmuladd on f32 x 1, 4, 8, 16 lanes: bits 0..3 */
    int split;          /* nx_x86_kernel_split */
    nx_x86_borders bd;  /* the border/interior split of the innermost space loop */
    const nx_x86_alias *alias; /* bd.alias while emitting the interior, else NULL */
    bool nomem;         /* a scratch allocation failed (the text may be degraded: refuse it) */
    bool reassoc;
    bool stream;        /* the body may stream its output (see stream_ok) */
    bool ordered;       /* fold sums in order even when reassoc (unrolled rows) */
    bool failed;
} emitter;

static int fresh(emitter *e)
{
    return e->tmp++;
}

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

static int alloca_of(emitter *e, const char *ty)
{
    int v = fresh(e);
    put(&e->allocas, "  %%v%d = alloca %s, align 64\n", v, ty);
    return v;
}

/* A loop over [lo, hi) with an i64 counter; returns the SSA number of the index. */
typedef struct loop {
    int counter, index, head, bodyl, exit;
} loop;

static loop loop_open(emitter *e, const char *lo, const char *hi)
{
    loop l = {alloca_of(e, "i64"), 0, e->label++, e->label++, e->label++};
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

static void loop_close(emitter *e, loop l)
{
    close_scope(e);
    int n = fresh(e);
    put(&e->body, "  %%v%d = add i64 %%v%d, 1\n  store i64 %%v%d, i64* %%v%d\n", n, l.index, n,
        l.counter);
    put(&e->body, "  br label %%L%d\nL%d:\n", l.head, l.exit);
}

/* loop_close for a loop the vectoriser and unroller should leave alone (a border of a split:
 * a few iterations of gathers, and vectorising them doubled the kernel's compile time). */
static void loop_close_scalar(emitter *e, loop l)
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

static int value(emitter *e, int32_t id);

/* "%vN" of an instruction's value. */
#define V(id) value(e, (id))

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

static int op2(emitter *e, const char *op, const char *t, int a, int b)
{
    int v = fresh(e);
    put(&e->body, "  %%v%d = %s %s %%v%d, %%v%d\n", v, op, t, a, b);
    return v;
}

static int selv(emitter *e, const char *t, int c, int a, int b)
{
    int v = fresh(e);
    put(&e->body, "  %%v%d = select i1 %%v%d, %s %%v%d, %s %%v%d\n", v, c, t, a, t, b);
    return v;
}

static int constv(emitter *e, const char *t, const char *lit)
{
    int v = fresh(e);
    put(&e->body, "  %%v%d = select i1 true, %s %s, %s %s\n", v, t, lit, t, lit);
    return v;
}

static int i64c(emitter *e, int64_t v)
{
    char lit[32];
    snprintf(lit, sizeof lit, "%lld", (long long)v);
    return constv(e, "i64", lit);
}

static int fconst(emitter *e, int d, double f)
{
    char lit[40];
    uint64_t b;
    memcpy(&b, &f, 8);
    snprintf(lit, sizeof lit, "0x%016llX", (unsigned long long)b);
    return constv(e, rty(d), lit);
}

static int call1(emitter *e, const char *fn, const char *t, int a)
{
    int v = fresh(e);
    put(&e->body, "  %%v%d = call %s @%s(%s %%v%d)\n", v, t, fn, t, a);
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

static int mathcall(emitter *e, const char *name, int d, int a, int b)
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

static int isnan_of(emitter *e, const char *t, int a)
{
    return op2(e, "fcmp uno", t, a, a);
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
        return mathcall(e, "exp", in->dtype, x, -1);
    case NX_PRIM_LOG:
        return mathcall(e, "log", in->dtype, x, -1);
    case NX_PRIM_LOG1P:
        return mathcall(e, "log1p", in->dtype, x, -1);
    case NX_PRIM_EXPM1:
        return mathcall(e, "expm1", in->dtype, x, -1);
    case NX_PRIM_SQRT:
        return mathcall(e, "sqrt", in->dtype, x, -1);
    case NX_PRIM_RSQRT:
        return op2(e, "fdiv", t, fconst(e, in->dtype, 1.0), mathcall(e, "sqrt", in->dtype, x, -1));
    case NX_PRIM_SIN:
        return mathcall(e, "sin", in->dtype, x, -1);
    case NX_PRIM_COS:
        return mathcall(e, "cos", in->dtype, x, -1);
    case NX_PRIM_TANH:
        return mathcall(e, "tanh", in->dtype, x, -1);
    case NX_PRIM_ERF:
        return mathcall(e, "erf", in->dtype, x, -1);
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
        return mathcall(e, "pow", d, a, b);
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

static int emit_cast(emitter *e, int from, int to, int x)
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
        return emit_cast(e, d0, in->dtype, a);
    if (in->prim == NX_PRIM_ISNAN)
        return is_fl(d0) ? isnan_of(e, rty(d0), a) : constv(e, "i1", "false");
    if (nx_ir_prims[in->prim].arity == 1)
        return is_fl(d0) ? float_unary(e, in, a) : int_unary(e, in, a);
    int b = V(in->a[1]);
    return is_fl(d0) ? float_binary(e, in, a, b) : int_binary(e, in, a, b);
}

/* ---- reductions ----------------------------------------------------------------------------*/

/* The carry of one REDUCE in allocas: v (value or m), s (logsumexp, f64), arg, nan. */
typedef struct carry {
    int v, s, arg, nan, pos;
    int m, d; /* monoid, operand dtype */
} carry;

static int ld(emitter *e, const char *t, int slot)
{
    int v = fresh(e);
    put(&e->body, "  %%v%d = load %s, %s* %%v%d\n", v, t, t, slot);
    return v;
}

static void st(emitter *e, const char *t, int val, int slot)
{
    put(&e->body, "  store %s %%v%d, %s* %%v%d\n", t, val, t, slot);
}

/* The NaN flag lives in memory as i8: the vectoriser does not widen loads and stores of i1. */
static int ld_flag(emitter *e, int slot)
{
    int b = ld(e, "i8", slot), v = fresh(e);
    put(&e->body, "  %%v%d = trunc i8 %%v%d to i1\n", v, b);
    return v;
}

static void st_flag(emitter *e, int val, int slot)
{
    int v = fresh(e);
    put(&e->body, "  %%v%d = zext i1 %%v%d to i8\n", v, val);
    st(e, "i8", v, slot);
}

static int identity(emitter *e, int m, int d)
{
    const char *t = rty(d);
    if (m == NX_MONOID_SUM)
        return is_fl(d) ? fconst(e, d, 0.0) : constv(e, t, d == NX_DTYPE_BOOL ? "false" : "0");
    if (m == NX_MONOID_PROD)
        return is_fl(d) ? fconst(e, d, 1.0) : constv(e, t, d == NX_DTYPE_BOOL ? "true" : "1");
    bool lowest = m == NX_MONOID_MAX || m == NX_MONOID_ARGMAX || m == NX_MONOID_LOGSUMEXP;
    if (is_fl(d))
        return fconst(e, d, lowest ? -INFINITY : INFINITY);
    nx_ir_carry c = nx_ir_monoid_init(lowest ? NX_MONOID_MAX : NX_MONOID_MIN, (nx_dtype)d);
    char lit[32];
    if (d == NX_DTYPE_BOOL)
        snprintf(lit, sizeof lit, "%s", c.v.i ? "true" : "false");
    else
        snprintf(lit, sizeof lit, "%lld", (long long)(d == NX_DTYPE_U8 ? (int8_t)c.v.i : c.v.i));
    return constv(e, t, lit);
}

/* The dtype of the log-sum-exp sum s and its update. f64 (with the f64 exp) rounds s to f32
 * after each step, as the interpreter does, and matches it within a few ulp; when folds may be
 * reassociated an f32 update with the inline f32 exp (0.96 ulp) is used instead: the sum of n
 * positive terms then has a relative error of about (n + 2) eps, inside the documented bound
 * 4 n eps sum|x| of a reassociated fold, and the update vectorises twice as wide. */
static int lse_sd(const emitter *e, int d)
{
    return d == NX_DTYPE_F32 && e->reassoc ? NX_DTYPE_F32 : NX_DTYPE_F64;
}

static carry carry_init(emitter *e, int m, int d)
{
    carry c = {alloca_of(e, rty(d)),
               alloca_of(e, rty(lse_sd(e, d))),
               alloca_of(e, "i64"),
               alloca_of(e, "i8"),
               alloca_of(e, "i64"),
               m,
               d};
    st(e, rty(d), identity(e, m, d), c.v);
    st(e, rty(lse_sd(e, d)), fconst(e, lse_sd(e, d), 0.0), c.s);
    st(e, "i64", constv(e, "i64", "0"), c.arg);
    st_flag(e, constv(e, "i1", "false"), c.nan);
    st(e, "i64", constv(e, "i64", "0"), c.pos);
    return c;
}

static void lse_step(emitter *e, const carry *c, int x)
{
    int d = c->d, sd = lse_sd(e, d);
    const char *t = rty(d), *u = rty(sd);
    int m = ld(e, t, c->v), s = ld(e, u, c->s);
    int xd = emit_cast(e, d, sd, x), md = emit_cast(e, d, sd, m);
    int isn = isnan_of(e, t, x);
    int ninf = op2(e, "fcmp oeq", t, x, fconst(e, d, -INFINITY));
    int skip = op2(e, "or", "i1", isn, ninf);
    int gt = op2(e, "fcmp ogt", t, x, m), eq = op2(e, "fcmp oeq", t, x, m);
    int arg = selv(e, u, gt, op2(e, "fsub", u, md, xd), op2(e, "fsub", u, xd, md));
    int ex = mathcall(e, "exp", sd, arg, -1);
    int one = fconst(e, sd, 1.0);
    int sgt = op2(e, "fadd", u, op2(e, "fmul", u, s, ex), one);
    int seq = op2(e, "fadd", u, s, one), slt = op2(e, "fadd", u, s, ex);
    int sn = selv(e, u, gt, sgt, selv(e, u, eq, seq, slt));
    if (d == NX_DTYPE_F32 && sd == NX_DTYPE_F64)
        sn = emit_cast(e, NX_DTYPE_F32, NX_DTYPE_F64, emit_cast(e, NX_DTYPE_F64, NX_DTYPE_F32, sn));
    st(e, u, selv(e, u, skip, s, sn), c->s);
    st(e, t,
       selv(e, t, op2(e, "or", "i1", skip, op2(e, "xor", "i1", gt, constv(e, "i1", "true"))), m, x),
       c->v);
    st_flag(e, op2(e, "or", "i1", ld_flag(e, c->nan), isn), c->nan);
}

static void arg_step(emitter *e, const carry *c, int x)
{
    int d = c->d;
    const char *t = rty(d);
    bool max = c->m == NX_MONOID_ARGMAX, u = is_unsigned(d);
    int v = ld(e, t, c->v), nan = ld_flag(e, c->nan), pos = ld(e, "i64", c->pos);
    int first = op2(e, "icmp eq", "i64", pos, constv(e, "i64", "0"));
    int better =
        is_fl(d)
            ? op2(e, max ? "fcmp ogt" : "fcmp olt", t, x, v)
            : op2(e, max ? (u ? "icmp ugt" : "icmp sgt") : (u ? "icmp ult" : "icmp slt"), t, x, v);
    int xnan = is_fl(d) ? isnan_of(e, t, x) : constv(e, "i1", "false");
    int take = op2(e, "or", "i1", op2(e, "or", "i1", first, xnan), better);
    take = op2(e, "and", "i1", take, op2(e, "xor", "i1", nan, constv(e, "i1", "true")));
    st(e, t, selv(e, t, take, x, v), c->v);
    st(e, "i64", selv(e, "i64", take, pos, ld(e, "i64", c->arg)), c->arg);
    st_flag(e, selv(e, "i1", take, xnan, nan), c->nan);
    st(e, "i64", op2(e, "add", "i64", pos, constv(e, "i64", "1")), c->pos);
}

static void carry_step(emitter *e, const carry *c, int x)
{
    int d = c->d;
    const char *t = rty(d);
    if (c->m == NX_MONOID_LOGSUMEXP) {
        lse_step(e, c, x);
        return;
    }
    if (c->m == NX_MONOID_ARGMAX || c->m == NX_MONOID_ARGMIN) {
        arg_step(e, c, x);
        return;
    }
    int v = ld(e, t, c->v), r;
    if (c->m == NX_MONOID_SUM || c->m == NX_MONOID_PROD) {
        bool sum = c->m == NX_MONOID_SUM;
        if (is_fl(d)) {
            r = fresh(e);
            put(&e->body, "  %%v%d = %s %s%s %%v%d, %%v%d\n", r, sum ? "fadd" : "fmul",
                e->reassoc && !e->ordered ? "reassoc " : "", t, v, x);
        } else if (d == NX_DTYPE_BOOL) {
            r = op2(e, sum ? "or" : "and", t, v, x); /* wraps to 0/1 as the interpreter's fix */
        } else {
            r = op2(e, sum ? "add" : "mul", t, v, x);
        }
    } else {
        bool max = c->m == NX_MONOID_MAX, u = is_unsigned(d);
        int better =
            is_fl(d) ? op2(e, max ? "fcmp ogt" : "fcmp olt", t, x, v)
                     : op2(e, max ? (u ? "icmp ugt" : "icmp sgt") : (u ? "icmp ult" : "icmp slt"),
                           t, x, v);
        /* A NaN is taken and then sticks (nothing beats it), so the carry needs no flag:
         * the result is NaN exactly when some element is, as the interpreter's. */
        if (is_fl(d))
            better = op2(e, "or", "i1", better, isnan_of(e, t, x));
        r = selv(e, t, better, x, v);
    }
    st(e, t, r, c->v);
}

static int carry_finish(emitter *e, const carry *c)
{
    int d = c->d;
    const char *t = rty(d);
    if (c->m == NX_MONOID_ARGMAX || c->m == NX_MONOID_ARGMIN)
        return ld(e, "i64", c->arg);
    int v = ld(e, t, c->v);
    if (!is_fl(d) || c->m == NX_MONOID_SUM || c->m == NX_MONOID_PROD)
        return v;
    int nan = ld_flag(e, c->nan);
    if (c->m == NX_MONOID_LOGSUMEXP) {
        int sd = lse_sd(e, d);
        int md = emit_cast(e, d, sd, v);
        int lg = mathcall(e, "log", sd, ld(e, rty(sd), c->s), -1);
        int r = emit_cast(e, sd, d, op2(e, "fadd", rty(sd), md, lg));
        char fn[24];
        snprintf(fn, sizeof fn, "llvm.fabs.%s", d == NX_DTYPE_F32 ? "f32" : "f64");
        int inf = op2(e, "fcmp oeq", t, call1(e, fn, t, v), fconst(e, d, INFINITY));
        v = selv(e, t, inf, v, r);
    }
    return selv(e, t, nan, fconst(e, d, NAN), v);
}

/* Emits, before a REDUCE's loops open, the parts of its operand that do not depend on them. */
static void hoist(emitter *e, int32_t id, uint32_t loops, uint8_t *seen)
{
    if (id < 0 || seen[id])
        return;
    seen[id] = 1;
    if ((e->mask[id] & ~e->live) == 0) {
        V(id);
        return;
    }
    if (e->alias && e->alias[id].kind != NX_X86_ALIAS_SELF) { /* only what the alias reads */
        if (e->alias[id].kind == NX_X86_ALIAS_TO)
            hoist(e, e->alias[id].to, loops, seen);
        return;
    }
    const nx_kinst *in = &e->k->inst[id];
    if (in->op == NX_KOP_LOAD)
        hoist(e, in->a[1], loops, seen);
    else if (in->op == NX_KOP_PRIM || in->op == NX_KOP_REDUCE)
        for (int j = 0; j < 3; j++)
            if (in->a[j] >= 0 && (in->op == NX_KOP_PRIM || j == 0))
                hoist(e, in->a[j], loops, seen);
}

int nx_x86_kernel_split(const nx_kernel *k, bool reassoc)
{
    if (k->kind != NX_KERNEL_LOOP)
        return -1;
    if (k->ndim > 0)
        return 0;
    if (k->nstores != 1 || k->stores[0].value < 0)
        return -1;
    const nx_kinst *in = &k->inst[k->stores[0].value];
    if (in->op != NX_KOP_REDUCE || in->i == 0)
        return -1;
    int m = in->prim, d = k->inst[in->a[0]].dtype;
    bool exact = m == NX_MONOID_MAX || m == NX_MONOID_MIN ||
                 (!is_fl(d) && (m == NX_MONOID_SUM || m == NX_MONOID_PROD));
    bool assoc = reassoc && is_fl(d) && (m == NX_MONOID_SUM || m == NX_MONOID_PROD);
    if (!exact && !assoc)
        return -1;
    for (int l = 0; l < k->nloops; l++)
        if ((uint64_t)in->i >> l & 1)
            return l;
    return -1;
}

static int emit_reduce(emitter *e, int32_t id)
{
    const nx_kinst *in = &e->k->inst[id];
    uint32_t loops = (uint32_t)in->i;
    uint8_t *seen = nx_rt_calloc(e->ctx, (size_t)e->k->ninst, 1);
    e->nomem = e->nomem || !seen;
    if (seen) {
        hoist(e, in->a[0], loops, seen);
        nx_rt_free(e->ctx, seen, (size_t)e->k->ninst);
    }
    carry c = carry_init(e, in->prim, e->k->inst[in->a[0]].dtype);
    loop ls[NX_KERNEL_MAX_LOOPS];
    int n = 0;
    for (int l = 0; l < e->k->nloops; l++) {
        if (!(loops >> l & 1))
            continue;
        char hi[32];
        snprintf(hi, sizeof hi, "%lld", (long long)e->k->extent[l]);
        bool split = l == e->split && e->k->ndim == 0;
        ls[n] = loop_open(e, split ? "%begin" : "0", split ? "%end" : hi);
        e->loopvar[l] = ls[n].index;
        n++;
    }
    uint32_t outer = e->live;
    e->live |= loops;
    carry_step(e, &c, V(in->a[0]));
    e->live = outer;
    while (n > 0)
        loop_close(e, ls[--n]);
    return carry_finish(e, &c);
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

static int value(emitter *e, int32_t id)
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
        v = emit_reduce(e, id);
        break;
    }
    e->val[id] = v;
    e->scope[id] = e->cur;
    return v;
}

/* ---- kernels -------------------------------------------------------------------------------*/

static void emit_store(emitter *e, const nx_kstore *s, int lin)
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

/* ---- border/interior split -----------------------------------------------------------------*/

/* max(x, cut) (or min) of a loop bound: a number when x is one, else a select. */
static void bound(emitter *e, const char *x, int64_t cut, bool max, char *out, size_t n)
{
    char *end;
    long long v = strtoll(x, &end, 10);
    if (cut == (max ? INT64_MIN : INT64_MAX)) {
        snprintf(out, n, "%s", x);
    } else if (*x != '%' && *end == '\0') {
        snprintf(out, n, "%lld", max ? (v > cut ? v : (long long)cut)
                                     : (v < cut ? v : (long long)cut));
    } else {
        int c = fresh(e), r = fresh(e);
        put(&e->body, "  %%v%d = icmp %s i64 %s, %lld\n", c, max ? "sgt" : "slt", x,
            (long long)cut);
        put(&e->body, "  %%v%d = select i1 %%v%d, i64 %s, i64 %lld\n", r, c, x, (long long)cut);
        snprintf(out, n, "%%v%d", r);
    }
}

/* Whether region r of the split (0: [0, lo), 1: [lo, hi), 2: [hi, n)) has points. */
static bool region_used(const emitter *e, int r)
{
    return r == 1 || (r == 0 ? e->bd.lo > 0 : e->bd.hi < e->k->extent[e->bd.loop]);
}

/* The split loop over region r intersected with [lo, hi); the interior runs with the aliases. */
static loop region_open(emitter *e, int r, const char *lo, const char *hi)
{
    int64_t cut_lo = r == 0 ? INT64_MIN : r == 1 ? e->bd.lo : e->bd.hi;
    int64_t cut_hi = r == 0 ? e->bd.lo : r == 1 ? e->bd.hi : INT64_MAX;
    char slo[32], shi[32];
    bound(e, lo, cut_lo, true, slo, sizeof slo);
    bound(e, hi, cut_hi, false, shi, sizeof shi);
    loop l = loop_open(e, slo, shi);
    e->loopvar[e->bd.loop] = l.index;
    e->alias = r == 1 ? e->bd.alias : NULL;
    return l;
}

static void region_close(emitter *e, loop l)
{
    bool border = !e->alias;
    e->alias = NULL;
    if (border)
        loop_close_scalar(e, l);
    else
        loop_close(e, l);
}

/* Both borders as one loop over b in [0, lo + n - hi): j = b below lo, b + hi - lo above (one
 * copy of the rules' code rather than two: compile time). Only where the loop's bounds are the
 * constant [0, n), not the thread split's [begin, end). */
static loop borders_open(emitter *e)
{
    char cnt[32];
    int64_t lo = e->bd.lo, n = e->k->extent[e->bd.loop];
    snprintf(cnt, sizeof cnt, "%lld", (long long)(lo + n - e->bd.hi));
    loop l = loop_open(e, "0", cnt);
    int below = op2(e, "icmp slt", "i64", l.index, i64c(e, lo));
    int j = selv(e, "i64", below, l.index, op2(e, "add", "i64", l.index, i64c(e, e->bd.hi - lo)));
    e->loopvar[e->bd.loop] = j;
    e->alias = NULL;
    return l;
}

static void split_part_stores(emitter *e, int lin_outer, const char *ext)
{
    const nx_kernel *k = e->k;
    int L = e->bd.loop;
    e->live |= 1u << L;
    int lin = op2(e, "add", "i64", op2(e, "mul", "i64", lin_outer, constv(e, "i64", ext)),
                  e->loopvar[L]);
    for (int s = 0; s < k->nstores; s++)
        emit_store(e, &k->stores[s], lin);
}

/* The interior of a split row as a whole number of vectors and a remainder loop of its own: the
 * loop vectoriser leaves a loop's remainder scalar (up to 15 of the interior's columns at 16
 * lanes, each costing what a vector step does), while a loop shorter than a vector it folds into
 * one masked step. 3^3 dilation at 256^3 (interior 254 = 15 * 16 + 14): 0.0248 -> 0.0212 CPU s. */
static void emit_interior_parts(emitter *e, int lin_outer, const char *ext)
{
    int64_t v = 64 / (int64_t)nx_dtype_size(e->k->bufs[e->k->stores[0].buf].dtype);
    int64_t lo = e->bd.lo, hi = e->bd.hi, cut[3] = {lo, lo + (hi - lo) / v * v, hi};
    for (int part = 0; part < 2; part++) {
        if (cut[part] >= cut[part + 1])
            continue;
        char plo[32], phi[32];
        snprintf(plo, sizeof plo, "%lld", (long long)cut[part]);
        snprintf(phi, sizeof phi, "%lld", (long long)cut[part + 1]);
        loop l = region_open(e, 1, plo, phi);
        split_part_stores(e, lin_outer, ext);
        region_close(e, l);
    }
}

/* Whether the interior gets a remainder loop: its bounds are constants (not the thread split's),
 * it is at least a vector long and not a whole number of vectors. */
static bool interior_parts(const emitter *e)
{
    const nx_kernel *k = e->k;
    if (e->bd.loop == 0 || k->nstores < 1)
        return false;
    int64_t v = 64 / (int64_t)nx_dtype_size(k->bufs[k->stores[0].buf].dtype);
    int64_t n = e->bd.hi - e->bd.lo;
    return n >= v && n % v != 0;
}

/* The innermost space loop split in three, the stores in each part. */
static void emit_split_stores(emitter *e, int lin_outer)
{
    const nx_kernel *k = e->k;
    int L = e->bd.loop;
    char ext[32];
    snprintf(ext, sizeof ext, "%lld", (long long)k->extent[L]);
    bool merged = L != 0 && region_used(e, 0) && region_used(e, 2);
    for (int r = merged ? 1 : 0; r < 3; r++) {
        if (!region_used(e, r) && !(merged && r == 2))
            continue;
        if (r == 1 && interior_parts(e)) {
            emit_interior_parts(e, lin_outer, ext);
            continue;
        }
        loop l = merged && r == 2 ? borders_open(e)
                                  : region_open(e, r, L == 0 ? "%begin" : "0", L == 0 ? "%end" : ext);
        split_part_stores(e, lin_outer, ext);
        region_close(e, l);
    }
}

/* ---- contraction rows ----------------------------------------------------------------------*/

#define ROW_MAX 4096

/* The REDUCE a single store writes, when the row strategy applies to it (see the top). */
static int row_reduce(const emitter *e)
{
    const nx_kernel *k = e->k;
    if (k->nstores != 1 || k->ndim < 1 || k->extent[k->ndim - 1] > ROW_MAX)
        return -1;
    int32_t r = k->stores[0].value;
    const nx_kinst *in = &k->inst[r];
    if (in->op != NX_KOP_REDUCE || !(e->mask[in->a[0]] >> (k->ndim - 1) & 1))
        return -1;
    return r;
}

typedef struct row_arrays {
    int v, s, arg, nan, pos; /* allocas of [ROW x T] */
    int len;
} row_arrays;

static int row_array(emitter *e, int len, const char *t)
{
    char ty[48];
    snprintf(ty, sizeof ty, "[%d x %s]", len, t);
    return alloca_of(e, ty);
}

/* The carry of row element j: pointers into the row arrays. */
static carry row_carry(emitter *e, const row_arrays *ra, int m, int d, int j)
{
    carry c = {0, 0, 0, 0, 0, m, d};
    int *slots[5] = {&c.v, &c.s, &c.arg, &c.nan, &c.pos};
    const int arrs[5] = {ra->v, ra->s, ra->arg, ra->nan, ra->pos};
    const char *tys[5] = {rty(d), rty(lse_sd(e, d)), "i64", "i8", "i64"};
    for (int i = 0; i < 5; i++) {
        *slots[i] = fresh(e);
        put(&e->body, "  %%v%d = getelementptr inbounds [%d x %s], [%d x %s]* %%v%d, i64 0, i64 %%v%d\n",
            *slots[i], ra->len, tys[i], ra->len, tys[i], arrs[i], j);
    }
    return c;
}

static void row_identity(emitter *e, const carry *c)
{
    st(e, rty(c->d), identity(e, c->m, c->d), c->v);
    st(e, rty(lse_sd(e, c->d)), fconst(e, lse_sd(e, c->d), 0.0), c->s);
    st(e, "i64", constv(e, "i64", "0"), c->arg);
    st_flag(e, constv(e, "i1", "false"), c->nan);
    st(e, "i64", constv(e, "i64", "0"), c->pos);
}

/* Columns [lo, hi) of the row; the strings are the loop bounds ([begin, end) when the row's loop
 * is also the outermost). Row arrays are indexed by j - lo. */
typedef struct row_span {
    int64_t lo, hi;
    char slo[32], shi[32];
} row_span;

static row_span row_span_of(const emitter *e, int64_t lo, int64_t hi)
{
    const nx_kernel *k = e->k;
    row_span sp = {lo, hi, "", ""};
    bool whole = k->ndim == 1 && lo == 0 && hi == k->extent[0];
    snprintf(sp.slo, sizeof sp.slo, whole ? "%%begin" : "%lld", (long long)lo);
    snprintf(sp.shi, sizeof sp.shi, whole ? "%%end" : "%lld", (long long)hi);
    return sp;
}

static loop row_loop(emitter *e, const row_span *sp)
{
    loop l = loop_open(e, sp->slo, sp->shi);
    e->loopvar[e->k->ndim - 1] = l.index;
    return l;
}

static int row_at(emitter *e, const row_span *sp, int j)
{
    return sp->lo == 0 ? j : op2(e, "sub", "i64", j, i64c(e, sp->lo));
}

#define ROW_UNROLL 8 /* rows this short are emitted column by column */

static void forget_loop(emitter *e, int l)
{
    for (int id = 0; id < e->k->ninst; id++)
        if (e->mask[id] >> l & 1)
            e->val[id] = -1;
}

/* The fold step over the row: one loop, or the three parts of a border split. A row of at most
 * ROW_UNROLL columns (not the thread-split loop) is written out column by column with j a
 * constant: index rules then fold, and what the columns share (a concat's parts all read F(i, j))
 * is computed once per j, with one carry per column in registers (a multi-output K-loop); each
 * column still folds j in ascending order. */
static void row_steps(emitter *e, const row_arrays *ra, const row_span *sp, int r, bool split)
{
    const nx_kinst *in = &e->k->inst[r];
    int last = e->k->ndim - 1, d = e->k->inst[in->a[0]].dtype;
    if (!split && e->k->ndim >= 2 && sp->hi - sp->lo <= ROW_UNROLL) {
        e->live |= 1u << last;
        e->ordered = true; /* the loop over k is now innermost: no partial sums across it */
        for (int64_t j = sp->lo; j < sp->hi; j++) {
            e->loopvar[last] = i64c(e, j);
            forget_loop(e, last);
            carry c = row_carry(e, ra, in->prim, d, i64c(e, j - sp->lo));
            carry_step(e, &c, V(in->a[0]));
        }
        e->ordered = false;
        forget_loop(e, last);
        return;
    }
    bool merged = split && e->k->ndim >= 2 && region_used(e, 0) && region_used(e, 2);
    for (int part = merged ? 1 : 0; part < (split ? 3 : 1); part++) {
        if (split && !region_used(e, part) && !(merged && part == 2))
            continue;
        loop l = merged && part == 2 ? borders_open(e)
                 : split             ? region_open(e, part, sp->slo, sp->shi)
                                     : row_loop(e, sp);
        e->live |= 1u << last;
        carry c = row_carry(e, ra, in->prim, d, row_at(e, sp, e->loopvar[last]));
        carry_step(e, &c, V(in->a[0]));
        if (split)
            region_close(e, l);
        else
            loop_close(e, l);
    }
}

/* Columns [j_lo, j_hi) of the row strategy (see the top); split: the border split applies to
 * the row's loop. */
static void emit_rows(emitter *e, int r, int lin_outer, int64_t j_lo, int64_t j_hi, bool split)
{
    const nx_kernel *k = e->k;
    const nx_kinst *in = &k->inst[r];
    int last = k->ndim - 1, d = k->inst[in->a[0]].dtype;
    int len = (int)(j_hi - j_lo);
    row_span sp = row_span_of(e, j_lo, j_hi);
    row_arrays ra = {row_array(e, len, rty(d)), row_array(e, len, rty(lse_sd(e, d))),
                     row_array(e, len, "i64"), row_array(e, len, "i8"),
                     row_array(e, len, "i64"), len};
    loop l = row_loop(e, &sp);
    carry c = row_carry(e, &ra, in->prim, d, row_at(e, &sp, l.index));
    row_identity(e, &c);
    loop_close(e, l);
    uint32_t loops = (uint32_t)in->i, outer = e->live;
    loop ls[NX_KERNEL_MAX_LOOPS];
    int n = 0;
    for (int q = 0; q < k->nloops; q++) {
        if (!(loops >> q & 1))
            continue;
        char hi[32];
        snprintf(hi, sizeof hi, "%lld", (long long)k->extent[q]);
        ls[n] = loop_open(e, "0", hi);
        e->loopvar[q] = ls[n].index;
        n++;
    }
    e->live |= loops;
    uint8_t *seen = nx_rt_calloc(e->ctx, (size_t)k->ninst, 1);
    e->nomem = e->nomem || !seen;
    if (seen) { /* what depends on the reduction loops but not on the row: before the row */
        hoist(e, in->a[0], loops, seen);
        nx_rt_free(e->ctx, seen, (size_t)k->ninst);
    }
    row_steps(e, &ra, &sp, r, split);
    e->live = outer;
    while (n > 0)
        loop_close(e, ls[--n]);
    l = row_loop(e, &sp);
    c = row_carry(e, &ra, in->prim, d, row_at(e, &sp, l.index));
    char ext[32];
    snprintf(ext, sizeof ext, "%lld", (long long)k->extent[last]);
    int lin = op2(e, "add", "i64", op2(e, "mul", "i64", lin_outer, constv(e, "i64", ext)),
                  l.index);
    int v = carry_finish(e, &c);
    e->val[r] = v;
    e->scope[r] = e->cur;
    emit_store(e, &k->stores[0], lin);
    loop_close(e, l);
}

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

#define TILE_MR 6
#define TILE_NR 4

static bool vec_float_prim(int prim)
{
    switch (prim) {
    case NX_PRIM_ADD:
    case NX_PRIM_SUB:
    case NX_PRIM_MUL:
    case NX_PRIM_DIV:
    case NX_PRIM_MIN:
    case NX_PRIM_MAX:
    case NX_PRIM_NEG:
        return true;
    default:
        return false;
    }
}

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
    if (is_fl(in->dtype) && vec_float_prim(in->prim) && c0 != CLS_L && c1 != CLS_L)
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

typedef struct tile {
    int r, il, jl, d, w; /* the REDUCE, row and column loops, operand dtype, lanes */
    int mr, nr;          /* rows and vectors of a full tile */
    uint8_t *cls;
    int *vc;       /* vector value of (instruction, column) in the current row, -1: none */
    int irow[TILE_MR], jcol[TILE_NR]; /* SSA of each row's i and column's first j */
} tile;

/* The REDUCE of a kernel that tiles, with t's fields set; -1 otherwise. */
static int tile_reduce(emitter *e, tile *t)
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

static int vmath_bit(int fn, int d, int w)
{
    return (fn * 2 + (d == NX_DTYPE_F64)) * 3 + (w == 4 ? 0 : w == 8 ? 1 : 2);
}

/* exp (fn 0) or log (fn 1) of w lanes: the math library's vector function, declared on use. */
static int vmath(emitter *e, int fn, int d, int w, int x)
{
    const char *name = fn ? "log" : "exp";
    if (w == 1)
        return mathcall(e, name, d, x, -1);
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

static int vec_prim(emitter *e, tile *t, int w, int c, const nx_kinst *in)
{
    char vt[32];
    vty(t, w, vt, sizeof vt);
    if (in->prim == NX_PRIM_SELECT) {
        int cond = V(in->a[0]), x = vec(e, t, w, c, in->a[1]), y = vec(e, t, w, c, in->a[2]);
        return selv(e, vt, cond, x, y);
    }
    int a = vec(e, t, w, c, in->a[0]);
    if (in->prim == NX_PRIM_NEG) {
        int v = fresh(e);
        put(&e->body, "  %%v%d = fneg %s %%v%d\n", v, vt, a);
        return v;
    }
    int b = vec(e, t, w, c, in->a[1]);
    switch (in->prim) {
    case NX_PRIM_ADD:
        return op2(e, "fadd", vt, a, b);
    case NX_PRIM_SUB:
        return op2(e, "fsub", vt, a, b);
    case NX_PRIM_MUL:
        return op2(e, "fmul", vt, a, b);
    case NX_PRIM_DIV:
        return op2(e, "fdiv", vt, a, b);
    default:
        return vec_minmax(e, t, w, in->prim == NX_PRIM_MAX, a, b);
    }
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
    int sd = lse_sd(e, t->d);
    vty(t, w, vt, sizeof vt);
    tacc a = {alloca_of(e, vt), -1, -1};
    st(e, vt, splat(e, t, w, identity(e, in->prim, t->d)), a.v);
    if (in->prim != NX_MONOID_LOGSUMEXP)
        return a;
    vty_of(sd, w, ut, sizeof ut);
    vty_of(NX_DTYPE_BOOL, w, bt, sizeof bt);
    a.s = alloca_of(e, ut);
    a.nan = alloca_of(e, bt);
    st(e, ut, splat_of(e, sd, w, fconst(e, sd, 0.0)), a.s);
    st(e, bt, splat_of(e, NX_DTYPE_BOOL, w, constv(e, "i1", "false")), a.nan);
    return a;
}

/* lse_step on w lanes: the same operations in the same order, so the same values. */
static void tile_lse_step(emitter *e, const tile *t, int w, const tacc *a, int x)
{
    int d = t->d, sd = lse_sd(e, d);
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
    int d = t->d, sd = lse_sd(e, d);
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
            ls[n] = loop_open(e, "0", hi);
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
            loop_close(e, ls[--n]);
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
    loop b = loop_open(e, "0", snb);
    int i0 = op2(e, "add", "i64", lov, op2(e, "mul", "i64", b.index, i64c(e, t->mr)));
    emit_tile(e, t, i0, t->mr, j0, nr, w, lin_outer);
    loop_close(e, b);
    snprintf(slo, sizeof slo, "%%v%d", rest);
    snprintf(shi, sizeof shi, "%%v%d", hiv);
    loop one = loop_open(e, slo, shi);
    emit_tile(e, t, one.index, 1, j0, nr, w, lin_outer);
    loop_close(e, one);
}

/* Column panels of nr*w over [j_lo, j_hi), then single vectors, then single columns; rows inside
 * each. */
static void emit_tiles(emitter *e, tile *t, const char *lo, const char *hi, int64_t j_lo,
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
        loop jp = loop_open(e, "0", sc);
        int j0 = op2(e, "add", "i64", i64c(e, start), op2(e, "mul", "i64", jp.index,
                                                            i64c(e, width)));
        tile_rows(e, t, lo, hi, j0, nrs[p], ws[p], lin_outer);
        loop_close(e, jp);
        start += count * width;
    }
}

/* Tiles over the interior of a border split, the row strategy over the borders. */
static void emit_split_tiles(emitter *e, tile *t, const char *lo, const char *hi, int lin_outer)
{
    int64_t n = e->k->extent[t->jl];
    e->alias = e->bd.alias;
    emit_tiles(e, t, lo, hi, e->bd.lo, e->bd.hi, lin_outer);
    e->alias = NULL;
    loop li = loop_open(e, lo, hi);
    e->loopvar[t->il] = li.index;
    uint32_t outer = e->live;
    e->live |= 1u << t->il;
    int lin = op2(e, "add", "i64", op2(e, "mul", "i64", lin_outer,
                                       i64c(e, e->k->extent[t->il])), li.index);
    if (e->bd.lo > 0)
        emit_rows(e, t->r, lin, 0, e->bd.lo, false);
    if (e->bd.hi < n)
        emit_rows(e, t->r, lin, e->bd.hi, n, false);
    e->live = outer;
    loop_close(e, li);
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
    int tr = tile_reduce(e, &t);
    if (tr < 0 && split && !e->nomem) { /* the interior may tile where the whole does not */
        e->alias = e->bd.alias;
        tr = tile_reduce(e, &t);
        e->alias = NULL;
        split_tiles = tr >= 0;
    }
    int r = tr >= 0 ? -1 : row_reduce(e);
    int nd = tr >= 0 ? k->ndim - 2 : r >= 0 || split ? k->ndim - 1 : k->ndim;
    int lin = constv(e, "i64", "0");
    for (int d = 0; d < nd; d++) {
        char hi[32];
        snprintf(hi, sizeof hi, "%lld", (long long)k->extent[d]);
        ls[d] = loop_open(e, d == 0 ? "%begin" : "0", d == 0 ? "%end" : hi);
        e->loopvar[d] = ls[d].index;
        e->live |= 1u << d;
        lin = op2(e, "add", "i64", op2(e, "mul", "i64", lin, constv(e, "i64", hi)), ls[d].index);
    }
    if (tr >= 0) {
        char hi[32];
        snprintf(hi, sizeof hi, "%lld", (long long)k->extent[t.il]);
        if (split_tiles)
            emit_split_tiles(e, &t, nd == 0 ? "%begin" : "0", nd == 0 ? "%end" : hi, lin);
        else
            emit_tiles(e, &t, nd == 0 ? "%begin" : "0", nd == 0 ? "%end" : hi, 0,
                       k->extent[t.jl], lin);
    } else if (r >= 0) {
        emit_rows(e, r, lin, 0, k->extent[k->ndim - 1], split);
    } else if (split) {
        emit_split_stores(e, lin);
    } else {
        e->stream = stream_ok(e);
        for (int s = 0; s < k->nstores; s++)
            emit_store(e, &k->stores[s], lin);
    }
    for (int d = nd - 1; d >= 0; d--)
        loop_close(e, ls[d]);
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
