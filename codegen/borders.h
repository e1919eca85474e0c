/* Border/interior analysis of loop kernels (codegen/borders.c), shared by the backends.
 *
 * Index rules (pad modes, clamps, a concat's selects) put a mod, a clamp or a select into a
 * kernel's load offsets. Along a space axis such a rule usually has one answer inside an interval
 * and differs only near the ends. nx_kborders_find gives, for one axis, the interval [lo, hi) on
 * which every rule it can follow has one answer and what each instruction is there (its alias);
 * nx_kborders_box does it for every space axis at once and gives the box (the product of the
 * intervals) in which all the aliases hold. An alias has its instruction's value at every point of
 * the interval or box, so code using the aliases there is bit-identical to the kernel.
 *
 * nx_kranges gives each i64 instruction an interval that holds at every point, so a backend can
 * compute index arithmetic in 32 bits where every value provably fits (docs/cuda.md). */
#ifndef NX_CODEGEN_BORDERS_H
#define NX_CODEGEN_BORDERS_H

#include "codegen/kernel.h"

enum { NX_KALIAS_SELF, NX_KALIAS_TO, NX_KALIAS_CONST };

typedef struct nx_kalias {
    uint8_t kind; /* SELF: itself; TO: instruction `to` plus c (i64; c = 0 otherwise); CONST: c */
    int32_t to;   /* TO: an operand of the instruction, so always an earlier one */
    int64_t c;
} nx_kalias;

typedef struct nx_kborders {
    int loop;       /* -1: no split */
    int64_t lo, hi; /* the interior */
    int ninst;
    nx_kalias *alias; /* ninst + 1 entries, valid in the interior; nx_kborders_free */
} nx_kborders;

/* The split of k's loop `loop` (mask: nx_kernel_loop_masks): s->loop = -1 when no rule that
 * varies along the loop resolves or the interior is shorter than min_len. Fails only for lack of
 * memory. */
NX_HIDDEN nx_status nx_kborders_find(const nx_kernel *k, const uint32_t *mask, int loop,
                                     int64_t min_len, nx_kborders *s);
NX_HIDDEN void nx_kborders_free(nx_ctx *ctx, nx_kborders *s);

typedef struct nx_kbox {
    int naxes;     /* space axes on which some rule resolves; 0: no box (alias NULL) */
    uint32_t axes; /* bit a set for each of them */
    int64_t lo[NX_KERNEL_MAX_LOOPS], hi[NX_KERNEL_MAX_LOOPS]; /* per space axis; [0, n) if none */
    int ninst;
    nx_kalias *alias; /* ninst + 1 entries, valid at every point of the box; nx_kbox_free */
} nx_kbox;

/* The box of every space axis of k: each axis analysed as nx_kborders_find does (interiors of any
 * length), an instruction taking the alias of an axis whose analysis needed it (a constant before
 * another instruction). Aliases point to earlier instructions, so chains of them end. */
NX_HIDDEN nx_status nx_kborders_box(const nx_kernel *k, const uint32_t *mask, nx_kbox *b);
NX_HIDDEN void nx_kbox_free(nx_ctx *ctx, nx_kbox *b);

/* Instructions a kernel reads at a point of a box, the aliases followed: live[id] = 1 for the
 * stores' values, an alias's target (TO), and the operands of an instruction that is itself
 * (SELF). live has k->ninst entries. */
NX_HIDDEN void nx_kbox_live(const nx_kernel *k, const nx_kalias *alias, uint8_t *live);

/* Value intervals of the kernel's i64 instructions at every point: [lo[id], hi[id]], computed by
 * interval arithmetic over idx, const, add, sub, neg, mul, div, mod, min, max, abs, select and
 * casts from narrower integers; anything else (loads, reductions, float casts) is unbounded
 * (INT64_MIN, INT64_MAX). Non-i64 instructions get the unbounded interval too. lo and hi have
 * k->ninst entries. */
NX_HIDDEN void nx_kranges(const nx_kernel *k, int64_t *lo, int64_t *hi);

#endif /* NX_CODEGEN_BORDERS_H */
