/* The CUDA emitter's shared pieces (emit.c) and its two specialised generators: register-tiled
 * contractions (emit-tile.c) and vectorised elementwise kernels (emit-vec.c). Not installed.
 *
 * Both generators keep nx_ptx_emit's calling convention (one pointer per buffer in buffer order,
 * then the point count) and launch shape NX_PTX_POINTS with NX_PTX_THREADS threads per block and
 * a 1-D grid. Their kernels hard-code the real shapes and read launch->points only as the number
 * of threads the grid should have (the runner launches ceil(points / NX_PTX_THREADS) blocks). */
#ifndef NX_CODEGEN_PTX_EMIT_TILE_H
#define NX_CODEGEN_PTX_EMIT_TILE_H

#include "codegen/ptx/emit.h"
#include "codegen/borders.h"

typedef nx_rt_text nx_ptx_text;

typedef struct nx_ptx_gen {
    const nx_kernel *k;
    nx_ptx_text t;
    uint32_t *mask; /* nx_kernel_loop_masks */
    int *scope;     /* per instruction: the REDUCE whose loop body holds it, -1: the point */
    int owner[NX_KERNEL_MAX_LOOPS];
    int block_r;    /* BLOCK_REDUCE: the top-level REDUCE folded across blocks, -1: none */
    int64_t blocks; /* BLOCK_REDUCE: blocks per point */
    int ind;
    /* The general form's refinements (emit.c), all NULL for the specialised generators. */
    const nx_kalias *alias; /* while a box interior is emitted: the aliases (codegen/borders.h) */
    const uint8_t *live;    /* while a box interior is emitted: the instructions it reads */
    const uint8_t *narrow;  /* i64 instructions computed as int (values proven within int32) */
    const uint8_t *mm;      /* float MIN/MAX networks: 1 inner node, 2 root (emit.c) */
    int32_t *mm_stack, *mm_seen; /* scratch of a root's cone walk, ninst entries each */
    int32_t mm_walk;             /* the walks so far (mm_seen marks) */
} nx_ptx_gen;

/* The general form's refinements in effect for ctx's options (nx_rt_cuda_codegen; docs/cuda.md
 * "Code generator options"): NX_PTX_SPLIT (the border/interior box split) unless split is off,
 * NX_PTX_NARROW (32-bit index arithmetic) unless narrow is off, NX_PTX_MINMAX (one NaN test per
 * leaf of a float MIN/MAX network) unless minmax is off, NX_PTX_ROWS (box threads take several
 * points along an outer axis; kernels without float MIN/MAX) unless rows is off, NX_PTX_ROWS_ALL
 * (rows for every box kernel) when rows is on, NX_PTX_STENCIL (window MIN/MAX networks through
 * shared-memory tiles, emit-stencil.c) unless stencil is off, NX_PTX_ILP (several points per
 * thread in large kernels without a box split or folds) unless ilp is off. The options are part
 * of the kernel cache key (nx_ptx_codegen_key). */
enum {
    NX_PTX_SPLIT = 1,
    NX_PTX_NARROW = 2,
    NX_PTX_MINMAX = 4,
    NX_PTX_ROWS = 8,
    NX_PTX_STENCIL = 16,
    NX_PTX_ROWS_ALL = 32,
    NX_PTX_ILP = 64,
};
NX_HIDDEN int nx_ptx_general_flags(const nx_ctx *ctx);

/* Text output: put appends; line appends one indented line (g->ind levels of 4 spaces). A failed
 * allocation sets t->failed and later calls do nothing. */
NX_HIDDEN void nx_ptx_put(nx_ptx_text *t, const char *fmt, ...) NX_PRINTF(2, 3);
NX_HIDDEN void nx_ptx_line(nx_ptx_gen *g, const char *fmt, ...) NX_PRINTF(2, 3);
/* The device helpers every kernel source starts with (the interpreter's scalar semantics). */
NX_HIDDEN extern const char nx_ptx_prelude[];
NX_HIDDEN const char *nx_ptx_ctype(int dtype);
/* 32-bit index arithmetic (the general form's NX_PTX_NARROW): nw[id] = 1 for the i64
 * instructions whose values lie within int32 (lo, hi: nx_kranges) and whose operation and i64
 * operands allow it, to be set as gen->narrow; only where nx_ptx_narrow_space(k) (every extent and
 * the point count fit an int). */
NX_HIDDEN void nx_ptx_find_narrow(const nx_kernel *k, const int64_t *lo, const int64_t *hi,
                                  uint8_t *nw);
NX_HIDDEN bool nx_ptx_narrow_space(const nx_kernel *k);
/* `const T v<id> = <expression>;` for a CONST, IDX, LOAD or PRIM instruction. */
NX_HIDDEN void nx_ptx_emit_inst(nx_ptx_gen *g, int id);
/* i<l> for every space loop from the linear C-order point index in variable p. */
NX_HIDDEN void nx_ptx_emit_point_index(nx_ptx_gen *g, const char *p);

/* A box split of the general form's POINTS loop (codegen/borders.h): the box's points first (in C
 * order, computed with the aliases), then the shell outside it in slabs (one per split axis a: the
 * box's ranges on the axes before a, the two border ranges of a, the whole of the axes after a),
 * computed as written. */
typedef struct nx_ptx_box_plan {
    const nx_kbox *b;
    int64_t w[NX_KERNEL_MAX_LOOPS]; /* the box's width on each axis */
    int64_t inner;                  /* the box's points */
    bool split[NX_KERNEL_MAX_LOOPS]; /* axes with a border */
    int axis, rows; /* rows > 1: each box thread takes `rows` consecutive points along `axis` */
} nx_ptx_box_plan;

/* Shell point number t (an unsigned variable of the emitted code, in [0, points - inner), consumed)
 * of bp: sets the declared i<l>, computes the kernel there as written and stores. */
NX_HIDDEN void nx_ptx_emit_shell(nx_ptx_gen *g, const nx_ptx_box_plan *bp);

/* The kernel body (after the signature) of a 3-D kernel whose box value is one float MIN or MAX
 * network over loads of one buffer at constant offsets forming a separable window (emit-stencil.c):
 * box tiles staged in shared memory, per-plane partial folds kept in registers, the shell as
 * nx_ptx_emit_shell. Sets launch->points to the threads it needs. Returns false, having emitted
 * nothing, when k is not such a kernel; true otherwise (allocation failures set g->t.failed). */
NX_HIDDEN bool nx_ptx_emit_stencil(nx_ptx_gen *g, const nx_ptx_box_plan *bp,
                                   nx_ptx_launch *launch);
/* The stencil's tile sizes come from ctx's options (stencil_tz, stencil_depth, stencil_ry,
 * stencil_pb, stencil_shell; 0: the generator's choice). */

/* An i64 instruction as an affine function of the loop indices: value = c + sum coef[l] * i_l. */
typedef struct nx_ptx_affine {
    bool ok;
    int64_t c;
    int64_t coef[NX_KERNEL_MAX_LOOPS];
} nx_ptx_affine;

/* aff[id] for every instruction (ok = false where the value is not an affine integer function of
 * the loops: loads, floats, division, clamps, overflow). aff has k->ninst entries. */
NX_HIDDEN void nx_ptx_affine_all(const nx_kernel *k, nx_ptx_affine *aff);

/* Emits the whole source (prelude included) of a register-tiled contraction when k is one (a
 * single f32 SUM/MAX/MIN/LOGSUMEXP REDUCE over one loop of f(A[.., i, .., k], B[.., k, .., j]),
 * see emit-tile.c) and returns true; returns false, having emitted nothing, otherwise. */
NX_HIDDEN bool nx_ptx_emit_tile(nx_ptx_gen *g, const nx_ptx_affine *aff, const char *name,
                                nx_ptx_launch *launch);

/* Likewise for a pairwise fold out_i = fold_j F(x_i, y_j) whose loop reads only loads indexed by
 * j (emit-pair.c): y tiles staged in shared memory, several points per thread. reassoc (outside
 * reproducible mode) lets exp run on the special-function unit (ex2.approx). */
NX_HIDDEN bool nx_ptx_emit_pair(nx_ptx_gen *g, const nx_ptx_affine *aff, const char *name,
                                bool reassoc, nx_ptx_launch *launch);
/* The pairwise kernels' points per thread come from ctx's options (pair_rows; 0: the
 * generator's choice). */

/* Likewise for an elementwise kernel (no REDUCE) whose loads read the point's own element or one
 * fixed element: 16-byte vector loads and stores when the pointers are aligned (emit-vec.c). */
NX_HIDDEN bool nx_ptx_emit_vec(nx_ptx_gen *g, const nx_ptx_affine *aff, const char *name,
                               nx_ptx_launch *launch);

#endif /* NX_CODEGEN_PTX_EMIT_TILE_H */
