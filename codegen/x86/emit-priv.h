/* The CPU emitter's private pieces (not installed), shared by its files:
 *   emit.c         the core: text, types, supports, the scalar emitter, the space loops, the module
 *   emit-reduce.c  REDUCE: carries, their steps per monoid and the loops they fold over
 *   emit-border.c  the border/interior split of the innermost space loop (found by borders.c)
 *   emit-rows.c    contraction rows
 *   emit-tile.c    register tiles
 * The small helpers every part uses are static inline here. */
#ifndef NX_CODEGEN_X86_EMIT_PRIV_H
#define NX_CODEGEN_X86_EMIT_PRIV_H

#include <string.h>

#include "codegen/x86/emit.h"

/* ---- text ----------------------------------------------------------------------------------*/

typedef nx_rt_text text;

#define put nx_rt_text_put

/* ---- types ---------------------------------------------------------------------------------*/

/* Register type of a dtype (bool is i1 in registers, i8 in memory). */
static inline const char *rty(int d)
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
    case NX_DTYPE_U32:
        return "i32";
    case NX_DTYPE_I64:
    case NX_DTYPE_U64:
        return "i64";
    case NX_DTYPE_BOOL:
        return "i1";
    default:
        return NULL;
    }
}

static inline const char *mty(int d)
{
    return d == NX_DTYPE_BOOL ? "i8" : rty(d);
}

static inline bool is_fl(int d)
{
    return d == NX_DTYPE_F32 || d == NX_DTYPE_F64;
}

static inline bool is_unsigned(int d)
{
    return d == NX_DTYPE_U8 || d == NX_DTYPE_U32 || d == NX_DTYPE_U64 || d == NX_DTYPE_BOOL;
}

static inline int bits(int d)
{
    return d == NX_DTYPE_BOOL ? 1 : (int)nx_dtype_size((nx_dtype)d) * 8;
}

static inline const char *mathsuffix(int d)
{
    return d == NX_DTYPE_F32 ? "f32" : "f64";
}

/* ---- the emitter (emit.c) ------------------------------------------------------------------*/

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
    bool no_rule; /* an instruction with no code (a PRIM without a table entry) was reached */
} emitter;

static inline int fresh(emitter *e)
{
    return e->tmp++;
}

NX_HIDDEN int nx_x86_alloca_of(emitter *e, const char *ty);

/* A loop over [lo, hi) with an i64 counter; returns the SSA number of the index. */
typedef struct loop {
    int counter, index, head, bodyl, exit;
} loop;

NX_HIDDEN loop nx_x86_loop_open(emitter *e, const char *lo, const char *hi);
NX_HIDDEN void nx_x86_loop_close(emitter *e, loop l);
NX_HIDDEN void nx_x86_loop_close_scalar(emitter *e, loop l);

NX_HIDDEN int nx_x86_value(emitter *e, int32_t id);

/* "%vN" of an instruction's value. */
#define V(id) nx_x86_value(e, (id))

static inline int op2(emitter *e, const char *op, const char *t, int a, int b)
{
    int v = fresh(e);
    put(&e->body, "  %%v%d = %s %s %%v%d, %%v%d\n", v, op, t, a, b);
    return v;
}

static inline int selv(emitter *e, const char *t, int c, int a, int b)
{
    int v = fresh(e);
    put(&e->body, "  %%v%d = select i1 %%v%d, %s %%v%d, %s %%v%d\n", v, c, t, a, t, b);
    return v;
}

static inline int constv(emitter *e, const char *t, const char *lit)
{
    int v = fresh(e);
    put(&e->body, "  %%v%d = select i1 true, %s %s, %s %s\n", v, t, lit, t, lit);
    return v;
}

static inline int i64c(emitter *e, int64_t v)
{
    char lit[32];
    snprintf(lit, sizeof lit, "%lld", (long long)v);
    return constv(e, "i64", lit);
}

static inline int fconst(emitter *e, int d, double f)
{
    char lit[40];
    uint64_t b;
    memcpy(&b, &f, 8);
    snprintf(lit, sizeof lit, "0x%016llX", (unsigned long long)b);
    return constv(e, rty(d), lit);
}

static inline int call1(emitter *e, const char *fn, const char *t, int a)
{
    int v = fresh(e);
    put(&e->body, "  %%v%d = call %s @%s(%s %%v%d)\n", v, t, fn, t, a);
    return v;
}

static inline int isnan_of(emitter *e, const char *t, int a)
{
    return op2(e, "fcmp uno", t, a, a);
}

NX_HIDDEN int nx_x86_mathcall(emitter *e, const char *name, int d, int a, int b);
NX_HIDDEN int nx_x86_emit_cast(emitter *e, int from, int to, int x);
NX_HIDDEN void nx_x86_emit_store(emitter *e, const nx_kstore *s, int lin);

/* ---- reductions (emit-reduce.c) ------------------------------------------------------------*/

/* The carry of one REDUCE in allocas: v (value or m), s (logsumexp, f64), arg, nan. */
typedef struct carry {
    int v, s, arg, nan, pos;
    int m, d; /* monoid, operand dtype */
} carry;

static inline int ld(emitter *e, const char *t, int slot)
{
    int v = fresh(e);
    put(&e->body, "  %%v%d = load %s, %s* %%v%d\n", v, t, t, slot);
    return v;
}

static inline void st(emitter *e, const char *t, int val, int slot)
{
    put(&e->body, "  store %s %%v%d, %s* %%v%d\n", t, val, t, slot);
}

/* The NaN flag lives in memory as i8: the vectoriser does not widen loads and stores of i1. */
static inline int ld_flag(emitter *e, int slot)
{
    int b = ld(e, "i8", slot), v = fresh(e);
    put(&e->body, "  %%v%d = trunc i8 %%v%d to i1\n", v, b);
    return v;
}

static inline void st_flag(emitter *e, int val, int slot)
{
    int v = fresh(e);
    put(&e->body, "  %%v%d = zext i1 %%v%d to i8\n", v, val);
    st(e, "i8", v, slot);
}

NX_HIDDEN int nx_x86_identity(emitter *e, int m, int d);
NX_HIDDEN int nx_x86_lse_sd(const emitter *e, int d);
NX_HIDDEN void nx_x86_carry_step(emitter *e, const carry *c, int x);
NX_HIDDEN int nx_x86_carry_finish(emitter *e, const carry *c);
NX_HIDDEN void nx_x86_hoist(emitter *e, int32_t id, uint32_t loops, uint8_t *seen);
NX_HIDDEN int nx_x86_emit_reduce(emitter *e, int32_t id);

/* ---- border/interior split (emit-border.c) -------------------------------------------------*/

NX_HIDDEN bool nx_x86_region_used(const emitter *e, int r);
NX_HIDDEN loop nx_x86_region_open(emitter *e, int r, const char *lo, const char *hi);
NX_HIDDEN void nx_x86_region_close(emitter *e, loop l);
NX_HIDDEN loop nx_x86_borders_open(emitter *e);
NX_HIDDEN void nx_x86_emit_split_stores(emitter *e, int lin_outer);

/* ---- contraction rows (emit-rows.c) --------------------------------------------------------*/

NX_HIDDEN int nx_x86_row_reduce(const emitter *e);
NX_HIDDEN void nx_x86_emit_rows(emitter *e, int r, int lin_outer, int64_t j_lo, int64_t j_hi,
                                bool split);

/* ---- register tiles (emit-tile.c) ----------------------------------------------------------*/

#define TILE_MR 6
#define TILE_NR 4

typedef struct tile {
    int r, il, jl, d, w; /* the REDUCE, row and column loops, operand dtype, lanes */
    int mr, nr;          /* rows and vectors of a full tile */
    uint8_t *cls;
    int *vc;       /* vector value of (instruction, column) in the current row, -1: none */
    int irow[TILE_MR], jcol[TILE_NR]; /* SSA of each row's i and column's first j */
} tile;

static inline int vmath_bit(int fn, int d, int w)
{
    return (fn * 2 + (d == NX_DTYPE_F64)) * 3 + (w == 4 ? 0 : w == 8 ? 1 : 2);
}

NX_HIDDEN int nx_x86_tile_reduce(emitter *e, tile *t);
NX_HIDDEN void nx_x86_emit_tiles(emitter *e, tile *t, const char *lo, const char *hi, int64_t j_lo,
                                 int64_t j_hi, int lin_outer);
NX_HIDDEN void nx_x86_emit_split_tiles(emitter *e, tile *t, const char *lo, const char *hi,
                                       int lin_outer);

#endif /* NX_CODEGEN_X86_EMIT_PRIV_H */
