/* Contraction rows. When a store's value is a REDUCE at the top of a kernel of two or more
 * dimensions whose innermost space loop its operand reads, the kernel keeps one row of carries
 * over the innermost axis (an alloca'd array) and runs the reduction loops outside that axis:
 *     for i: row[:] = identity; for k: for j: row[j] = step(row[j], f(i, k, j)); y[i, :] = row
 * Each output still folds its k in ascending order, so the result is the canonical one, and the
 * j loop is a plain elementwise loop that vectorises (the K-loop with register accumulators of a
 * max-plus or log-sum-exp contraction). */
#include "codegen/x86/emit-priv.h"

/* ---- contraction rows ----------------------------------------------------------------------*/

#define ROW_MAX 4096

/* The REDUCE a single store writes, when the row strategy applies to it (see the top). */
int nx_x86_row_reduce(const emitter *e)
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
    return nx_x86_alloca_of(e, ty);
}

/* The carry of row element j: pointers into the row arrays. */
static carry row_carry(emitter *e, const row_arrays *ra, int m, int d, int j)
{
    carry c = {0, 0, 0, 0, 0, m, d};
    int *slots[5] = {&c.v, &c.s, &c.arg, &c.nan, &c.pos};
    const int arrs[5] = {ra->v, ra->s, ra->arg, ra->nan, ra->pos};
    const char *tys[5] = {rty(d), rty(nx_x86_lse_sd(e, d)), "i64", "i8", "i64"};
    for (int i = 0; i < 5; i++) {
        *slots[i] = fresh(e);
        put(&e->body, "  %%v%d = getelementptr inbounds [%d x %s], [%d x %s]* %%v%d, i64 0, i64 %%v%d\n",
            *slots[i], ra->len, tys[i], ra->len, tys[i], arrs[i], j);
    }
    return c;
}

static void row_identity(emitter *e, const carry *c)
{
    st(e, rty(c->d), nx_x86_identity(e, c->m, c->d), c->v);
    st(e, rty(nx_x86_lse_sd(e, c->d)), fconst(e, nx_x86_lse_sd(e, c->d), 0.0), c->s);
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
    loop l = nx_x86_loop_open(e, sp->slo, sp->shi);
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
            nx_x86_carry_step(e, &c, V(in->a[0]));
        }
        e->ordered = false;
        forget_loop(e, last);
        return;
    }
    bool merged = split && e->k->ndim >= 2 && nx_x86_region_used(e, 0) && nx_x86_region_used(e, 2);
    for (int part = merged ? 1 : 0; part < (split ? 3 : 1); part++) {
        if (split && !nx_x86_region_used(e, part) && !(merged && part == 2))
            continue;
        loop l = merged && part == 2 ? nx_x86_borders_open(e)
                 : split             ? nx_x86_region_open(e, part, sp->slo, sp->shi)
                                     : row_loop(e, sp);
        e->live |= 1u << last;
        carry c = row_carry(e, ra, in->prim, d, row_at(e, sp, e->loopvar[last]));
        nx_x86_carry_step(e, &c, V(in->a[0]));
        if (split)
            nx_x86_region_close(e, l);
        else
            nx_x86_loop_close(e, l);
    }
}

/* Columns [j_lo, j_hi) of the row strategy (see the top); split: the border split applies to
 * the row's loop. */
void nx_x86_emit_rows(emitter *e, int r, int lin_outer, int64_t j_lo, int64_t j_hi, bool split)
{
    const nx_kernel *k = e->k;
    const nx_kinst *in = &k->inst[r];
    int last = k->ndim - 1, d = k->inst[in->a[0]].dtype;
    int len = (int)(j_hi - j_lo);
    row_span sp = row_span_of(e, j_lo, j_hi);
    row_arrays ra = {row_array(e, len, rty(d)), row_array(e, len, rty(nx_x86_lse_sd(e, d))),
                     row_array(e, len, "i64"),  row_array(e, len, "i8"),
                     row_array(e, len, "i64"),  len};
    loop l = row_loop(e, &sp);
    carry c = row_carry(e, &ra, in->prim, d, row_at(e, &sp, l.index));
    row_identity(e, &c);
    nx_x86_loop_close(e, l);
    uint32_t loops = (uint32_t)in->i, outer = e->live;
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
    e->live |= loops;
    uint8_t *seen = nx_rt_calloc(e->ctx, (size_t)k->ninst, 1);
    e->nomem = e->nomem || !seen;
    if (seen) { /* what depends on the reduction loops but not on the row: before the row */
        nx_x86_hoist(e, in->a[0], loops, seen);
        nx_rt_free(e->ctx, seen, (size_t)k->ninst);
    }
    row_steps(e, &ra, &sp, r, split);
    e->live = outer;
    while (n > 0)
        nx_x86_loop_close(e, ls[--n]);
    l = row_loop(e, &sp);
    c = row_carry(e, &ra, in->prim, d, row_at(e, &sp, l.index));
    char ext[32];
    snprintf(ext, sizeof ext, "%lld", (long long)k->extent[last]);
    int lin = op2(e, "add", "i64", op2(e, "mul", "i64", lin_outer, constv(e, "i64", ext)),
                  l.index);
    int v = nx_x86_carry_finish(e, &c);
    e->val[r] = v;
    e->scope[r] = e->cur;
    nx_x86_emit_store(e, &k->stores[0], lin);
    nx_x86_loop_close(e, l);
}
