/* REDUCE in the CPU emitter: a carry in allocas per fold, its step per monoid in the
 * interpreter's order and NaN rules, the loops it folds over (the parts of its operand that do
 * not depend on them emitted first), and the thread split of a 0-d fold. */
#include <math.h>

#include "codegen/x86/emit-priv.h"

/* ---- reductions ----------------------------------------------------------------------------*/

int nx_x86_identity(emitter *e, int m, int d)
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
int nx_x86_lse_sd(const emitter *e, int d)
{
    return d == NX_DTYPE_F32 && e->reassoc ? NX_DTYPE_F32 : NX_DTYPE_F64;
}

static carry carry_init(emitter *e, int m, int d)
{
    carry c = {nx_x86_alloca_of(e, rty(d)),
               nx_x86_alloca_of(e, rty(nx_x86_lse_sd(e, d))),
               nx_x86_alloca_of(e, "i64"),
               nx_x86_alloca_of(e, "i8"),
               nx_x86_alloca_of(e, "i64"),
               m,
               d};
    st(e, rty(d), nx_x86_identity(e, m, d), c.v);
    st(e, rty(nx_x86_lse_sd(e, d)), fconst(e, nx_x86_lse_sd(e, d), 0.0), c.s);
    st(e, "i64", constv(e, "i64", "0"), c.arg);
    st_flag(e, constv(e, "i1", "false"), c.nan);
    st(e, "i64", constv(e, "i64", "0"), c.pos);
    return c;
}

static void lse_step(emitter *e, const carry *c, int x)
{
    int d = c->d, sd = nx_x86_lse_sd(e, d);
    const char *t = rty(d), *u = rty(sd);
    int m = ld(e, t, c->v), s = ld(e, u, c->s);
    int xd = nx_x86_emit_cast(e, d, sd, x), md = nx_x86_emit_cast(e, d, sd, m);
    int isn = isnan_of(e, t, x);
    int ninf = op2(e, "fcmp oeq", t, x, fconst(e, d, -INFINITY));
    int skip = op2(e, "or", "i1", isn, ninf);
    int gt = op2(e, "fcmp ogt", t, x, m), eq = op2(e, "fcmp oeq", t, x, m);
    int arg = selv(e, u, gt, op2(e, "fsub", u, md, xd), op2(e, "fsub", u, xd, md));
    int ex = nx_x86_mathcall(e, "exp", sd, arg, -1);
    int one = fconst(e, sd, 1.0);
    int sgt = op2(e, "fadd", u, op2(e, "fmul", u, s, ex), one);
    int seq = op2(e, "fadd", u, s, one), slt = op2(e, "fadd", u, s, ex);
    int sn = selv(e, u, gt, sgt, selv(e, u, eq, seq, slt));
    if (d == NX_DTYPE_F32 && sd == NX_DTYPE_F64)
        sn = nx_x86_emit_cast(e, NX_DTYPE_F32, NX_DTYPE_F64,
                              nx_x86_emit_cast(e, NX_DTYPE_F64, NX_DTYPE_F32, sn));
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

void nx_x86_carry_step(emitter *e, const carry *c, int x)
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

int nx_x86_carry_finish(emitter *e, const carry *c)
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
        int sd = nx_x86_lse_sd(e, d);
        int md = nx_x86_emit_cast(e, d, sd, v);
        int lg = nx_x86_mathcall(e, "log", sd, ld(e, rty(sd), c->s), -1);
        int r = nx_x86_emit_cast(e, sd, d, op2(e, "fadd", rty(sd), md, lg));
        char fn[24];
        snprintf(fn, sizeof fn, "llvm.fabs.%s", d == NX_DTYPE_F32 ? "f32" : "f64");
        int inf = op2(e, "fcmp oeq", t, call1(e, fn, t, v), fconst(e, d, INFINITY));
        v = selv(e, t, inf, v, r);
    }
    return selv(e, t, nan, fconst(e, d, NAN), v);
}

/* Emits, before a REDUCE's loops open, the parts of its operand that do not depend on them. */
void nx_x86_hoist(emitter *e, int32_t id, uint32_t loops, uint8_t *seen)
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
            nx_x86_hoist(e, e->alias[id].to, loops, seen);
        return;
    }
    const nx_kinst *in = &e->k->inst[id];
    if (in->op == NX_KOP_LOAD)
        nx_x86_hoist(e, in->a[1], loops, seen);
    else if (in->op == NX_KOP_PRIM || in->op == NX_KOP_REDUCE)
        for (int j = 0; j < 3; j++)
            if (in->a[j] >= 0 && (in->op == NX_KOP_PRIM || j == 0))
                nx_x86_hoist(e, in->a[j], loops, seen);
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

int nx_x86_emit_reduce(emitter *e, int32_t id)
{
    const nx_kinst *in = &e->k->inst[id];
    uint32_t loops = (uint32_t)in->i;
    uint8_t *seen = nx_rt_calloc(e->ctx, (size_t)e->k->ninst, 1);
    e->nomem = e->nomem || !seen;
    if (seen) {
        nx_x86_hoist(e, in->a[0], loops, seen);
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
        ls[n] = nx_x86_loop_open(e, split ? "%begin" : "0", split ? "%end" : hi);
        e->loopvar[l] = ls[n].index;
        n++;
    }
    uint32_t outer = e->live;
    e->live |= loops;
    nx_x86_carry_step(e, &c, V(in->a[0]));
    e->live = outer;
    while (n > 0)
        nx_x86_loop_close(e, ls[--n]);
    return nx_x86_carry_finish(e, &c);
}
