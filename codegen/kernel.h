/* Kernel IR: the contract between the passes (fusion and lowering) and the backends (x86 JIT,
 * CUDA C). docs/kernel-ir.md is the long form; changes after the first commit are recorded in
 * the notes file the project keeps for it.
 *
 * A program lowers to a plan: an ordered list of kernels over numbered slots (program values:
 * inputs, constants, intermediates, outputs). A kernel reads and writes whole slots through its
 * buffers. Buffers are C-contiguous with static shapes.
 *
 * There are two kinds of kernel.
 *
 * LOOP kernels are a loop nest written as values:
 *   - an iteration space: the output shape, loops 0 .. ndim-1, all parallel;
 *   - reduction loops ndim .. nloops-1, each with a static extent, each folded by exactly one
 *     REDUCE instruction;
 *   - a scalar SSA body: instructions whose operands are earlier instructions. IDX reads a loop
 *     index (i64), CONST is an immediate, LOAD reads buffer[b] at an i64 element offset computed
 *     in the body (affine or not: windows, pads, reverses, broadcasts, concats and gathers are all
 *     index arithmetic), PRIM applies an nx_prim elementwise code (unary, binary, comparison,
 *     select, cast) to values of any dtype including the i64 index arithmetic, REDUCE folds its
 *     operand over a set of reduction loops under a monoid;
 *   - stores: out buffer[b][linear C-order index of the iteration point] = value.
 * Semantics are by value, not by position: an instruction's value at an iteration point is its
 * expression with the loop indices bound; REDUCE r over loops L is the fold, in ascending C order
 * of L's indices, of its operand with those indices running and all others fixed. An instruction
 * may use a reduction loop's IDX only inside (under) the REDUCE of that loop. A backend places
 * each instruction in the innermost loop its value depends on (nx_kernel_loop_masks), which
 * hoists loop invariants; a nested REDUCE inside another REDUCE's operand is KeOps's pattern
 * (sum_j f(sum_d (x[i,d] - y[j,d])^2)). Every instruction is evaluated (select evaluates both
 * arms), so every LOAD offset must be in range at every point: lowering clamps where needed.
 *
 * LIBRARY kernels are one graph primitive that does not fit the loop nest (scatter: read-modify-
 * write of data-dependent places; sort/argsort: data-dependent permutation; scan and scan_linear:
 * a carried dependence along one axis; extern: user code; reduce_custom until its monoid lowers).
 * Each backend implements them natively (the CPU in plain C over host buffers, codegen/x86/lib-*.c)
 * with the graph node's own attributes, which the kernel carries verbatim (nx_kernel_validate
 * checks them; they enter the print and the identity), and the interpreter's semantics. Buffers
 * are the operands in order, then the result; attributes by primitive:
 *   scan          [axis, monoid (SUM..LOGSUMEXP), reverse]                  x -> y
 *   scan_linear   [axis, reverse]                                          a, b -> y (broadcast)
 *   scan_iir      [axis, reverse, order, the order coefficients' f64 bits] b -> y
 *   sort, argsort [axis, descending, k]                                    x -> y
 *   scatter       [axis, monoid (SUM, MAX or MIN)]                         x, idx, updates -> y
 *   extern        [def, dev?]; lib_ptr is the nx_extern_def whose host function it calls
 *   reduce_custom [ncarry, keepdims, axis flags]; its monoid's expressions are graph nodes the
 *                 kernel does not carry (lib_node binds them), so only a routine with the graph
 *                 can run it
 *
 * A LIBRARY kernel may carry a prologue (codegen/prologue.c, for backends that accept it): one of
 * its operands is not a slot but a value computed where the routine reads it, by the LOOP fields
 * (space = the operand's shape, no reduction loops, one store to the operand's buffer, whose role
 * is VALUE). The prologue's loads read the IN buffers after the library's own. Or an epilogue:
 * the routine's result is a VALUE buffer that the LOOP fields read as they compute a loop kernel's
 * output (appended after the library's buffers, then the epilogue's inputs), which the routine
 * stores instead of its own result.
 */
#ifndef NX_CODEGEN_KERNEL_H
#define NX_CODEGEN_KERNEL_H

#include <stdio.h>

#include "ir/ir.h" /* nx_prim codes */
#include "nitrix-graph.h" /* nx_monoid */

#define NX_KERNEL_MAX_LOOPS 16   /* iteration space (<= NX_MAX_DIMS) + reduction loops */
#define NX_KERNEL_MAX_BUFFERS 64 /* input + output buffers of one kernel */
#define NX_KERNEL_MAX_ATTRS 64   /* attributes of a library kernel */

typedef enum nx_kernel_kind {
    NX_KERNEL_LOOP,
    NX_KERNEL_LIBRARY,
} nx_kernel_kind;

typedef enum nx_kbuf_role {
    NX_KBUF_IN,  /* read by LOAD */
    NX_KBUF_OUT, /* written by the stores (LOOP) or the library routine; shape = iteration space */
    NX_KBUF_VALUE, /* LIBRARY with a prologue: the operand the prologue computes (no memory) */
} nx_kbuf_role;

typedef struct nx_kbuf {
    uint8_t role;  /* nx_kbuf_role */
    uint8_t dtype; /* nx_dtype */
    uint8_t ndim;
    int64_t shape[NX_MAX_DIMS];
    uint32_t slot; /* the plan's slot the buffer is bound to (not part of the kernel's identity) */
} nx_kbuf;

typedef enum nx_kop {
    NX_KOP_CONST,  /* dtype; value in i (integers, bool) or f (floats) */
    NX_KOP_IDX,    /* i64; loop number in a[0] */
    NX_KOP_LOAD,   /* dtype of buffer a[0]; element offset = instruction a[1] (i64) */
    NX_KOP_PRIM,   /* prim (nx_prim code) over instructions a[0..arity); dtype = result */
    NX_KOP_REDUCE, /* monoid in prim (nx_monoid); operand a[0]; loops = mask in i; dtype result */
    NX_KOP_COUNT
} nx_kop;

/* One SSA instruction; its id is its index in the body. */
typedef struct nx_kinst {
    uint8_t op;    /* nx_kop */
    uint8_t dtype; /* nx_dtype of the value */
    uint16_t prim; /* nx_prim for PRIM (CAST converts to dtype), nx_monoid for REDUCE */
    int32_t a[3];  /* operands: instruction ids, or loop/buffer numbers as said above */
    int64_t i;     /* integer immediate; REDUCE: bit l set for each reduced loop l */
    double f;      /* float immediate */
} nx_kinst;

typedef struct nx_kstore {
    int32_t buf;   /* an OUT buffer */
    int32_t value; /* instruction id; its dtype equals the buffer's */
} nx_kstore;

typedef struct nx_kernel {
    nx_ctx *ctx;
    uint8_t kind; /* nx_kernel_kind */
    char name[48];
    int nbufs;
    nx_kbuf bufs[NX_KERNEL_MAX_BUFFERS];
    /* LOOP */
    int ndim;   /* iteration space: loops 0 .. ndim-1, extents = the OUT buffers' shape */
    int nloops; /* ndim + reduction loops */
    int64_t extent[NX_KERNEL_MAX_LOOPS];
    int ninst;
    size_t inst_cap;
    nx_kinst *inst;
    int nstores;
    nx_kstore stores[NX_KERNEL_MAX_BUFFERS];
    /* LIBRARY: the graph node's primitive, attributes and blob pointer (EXTERN's def) */
    uint16_t lib_prim;
    int nattrs;
    int64_t attrs[NX_KERNEL_MAX_ATTRS];
    const void *lib_ptr;
    uint32_t lib_node; /* the node in the plan's store (binding for a host routine, not identity) */
    bool nomem;        /* an append failed for lack of memory (builders then return -1) */
    /* LIBRARY with a prologue: operand buffer pro_operand (role VALUE) is computed by the LOOP
     * fields above at each element the routine reads. */
    bool has_prologue;
    int pro_operand;
    /* LIBRARY with an epilogue: the routine's result, buffer epi_source (role VALUE), is not
     * stored; the LOOP fields above read it (at the point, shifted along the routine's axis) and
     * store their own OUT buffer. At most one of prologue and epilogue. */
    bool has_epilogue;
    int epi_source;
} nx_kernel;

/* ---- building ------------------------------------------------------------------------------*/

NX_HIDDEN nx_status nx_kernel_new(nx_ctx *ctx, nx_kernel_kind kind, const char *name,
                                  nx_kernel **out);
NX_HIDDEN void nx_kernel_free(nx_kernel *k);
/* Appends a buffer; returns its number, or -1 when the kernel has NX_KERNEL_MAX_BUFFERS. */
NX_HIDDEN int nx_kernel_buffer(nx_kernel *k, nx_kbuf_role role, nx_dtype dtype, int ndim,
                               const int64_t *shape, uint32_t slot);
/* Sets the iteration space (ndim loops) and adds reduction loops with nx_kernel_loop. */
NX_HIDDEN void nx_kernel_space(nx_kernel *k, int ndim, const int64_t *shape);
/* A new reduction loop of extent n; its number, or -1 past NX_KERNEL_MAX_LOOPS. */
NX_HIDDEN int nx_kernel_loop(nx_kernel *k, int64_t n);
/* Appends an instruction; its id, or -1 on NX_ERR_NOMEM (recorded on the context). */
NX_HIDDEN int32_t nx_kernel_emit(nx_kernel *k, nx_kinst inst);
/* Conveniences over nx_kernel_emit. */
NX_HIDDEN int32_t nx_kernel_const_i(nx_kernel *k, nx_dtype dtype, int64_t v);
NX_HIDDEN int32_t nx_kernel_const_f(nx_kernel *k, nx_dtype dtype, double v);
NX_HIDDEN int32_t nx_kernel_idx(nx_kernel *k, int loop);
NX_HIDDEN int32_t nx_kernel_load(nx_kernel *k, int buf, int32_t offset);
NX_HIDDEN int32_t nx_kernel_prim(nx_kernel *k, int prim, nx_dtype dtype, int32_t a, int32_t b,
                                 int32_t c);
NX_HIDDEN int32_t nx_kernel_reduce(nx_kernel *k, int monoid, nx_dtype dtype, int32_t x,
                                   uint32_t loops);
NX_HIDDEN bool nx_kernel_store(nx_kernel *k, int buf, int32_t value);

/* ---- checking, printing, identity ----------------------------------------------------------*/

/* Structure, dtypes and scoping as the header states; NX_ERR_INTERNAL naming the kernel and the
 * instruction otherwise. Backends call it before emitting anything. */
NX_HIDDEN nx_status nx_kernel_validate(const nx_kernel *k);
/* mask[id]: bit l set when instruction id's value depends on loop l (REDUCE clears its loops).
 * mask has k->ninst entries. */
NX_HIDDEN void nx_kernel_loop_masks(const nx_kernel *k, uint32_t *mask);
/* Stable text (NITRIX_DUMP=kernel): the same kernel prints the same bytes. */
NX_HIDDEN void nx_kernel_print(const nx_kernel *k, FILE *f);
/* Canonical bytes of everything that determines compiled code (not the slots, not the name). */
NX_HIDDEN nx_status nx_kernel_serialize(const nx_kernel *k, uint8_t **buf, size_t *len);
NX_HIDDEN uint64_t nx_kernel_hash(const nx_kernel *k);

/* ---- the reference semantics ---------------------------------------------------------------*/

/* Runs a LOOP kernel with plain C loops in float64/int64 (rounded to each instruction's dtype):
 * bufs[b] is buffer b's data. Checks every load offset (NX_ERR_INTERNAL when out of range). */
NX_HIDDEN nx_status nx_kernel_interpret(const nx_kernel *k, void *const *bufs);

/* ---- plans ---------------------------------------------------------------------------------*/

typedef enum nx_slot_kind {
    NX_SLOT_INPUT,    /* program argument i = arg */
    NX_SLOT_CONSTANT, /* data borrowed from the program's graph store */
    NX_SLOT_TEMP,     /* written by one kernel, read by later ones */
} nx_slot_kind;

typedef struct nx_kslot {
    uint8_t kind;  /* nx_slot_kind */
    uint8_t dtype;
    uint8_t ndim;
    int64_t shape[NX_MAX_DIMS];
    int32_t arg;        /* INPUT */
    const void *data;   /* CONSTANT */
    int32_t last_use;   /* index of the last kernel that reads it; -1: a program output only */
} nx_kslot;

typedef struct nx_kplan {
    nx_ctx *ctx;
    const nx_ir_store *store; /* the program's nodes (borrowed): constants, library nodes */
    int nslots, slots_cap;
    nx_kslot *slots;
    int nkernels, kernels_cap;
    nx_kernel **kernels;
    int noutputs;
    int32_t *outputs; /* slot of each program output */
} nx_kplan;

NX_HIDDEN void nx_kplan_free(nx_kplan *p);
NX_HIDDEN void nx_kplan_print(const nx_kplan *p, FILE *f);

/* ---- backends ------------------------------------------------------------------------------*/

/* A backend (STYLE.md "Backends"): it sees only kernel IR. Each backend defines one const object
 * and the program layer's registry (program/registry.c) lists it. The program layer resolves a
 * program's backend (available), runs the pass pipeline to a plan, asks why_not of every kernel
 * and decides where a plan with a kernel the backend cannot run goes (program/placement.c: one
 * policy, one warning), then calls prepare() once (compile or load every kernel) and run() per
 * call. A backend never runs another backend. */
/* Backend hints: what a backend reports about the graph forms it runs fastest, so that an op picks
 * a form by reading data instead of naming a backend (nx_program_backend_hints). Every field has a
 * meaning on every backend (one with no preference reports the neutral value), and the hints never
 * change results, only which of several equal graphs an op builds (the Gaussian's FIR forms give
 * the same values). Each backend's values and the measurements behind them are in its own object
 * (codegen/x86/emit-run.c, codegen/ptx/backend.c; the interpreter's in program/registry.c). */
typedef struct nx_backend_hints {
    /* Separable FIR passes with constant weights (the Gaussian's). */
    /* Pad the image on every axis at once in a program of its own, then run every pass as a sum of
     * shifted slices over VALID windows: when the border rule inlined into each tap's load costs
     * more than a second program (the CPU backend: it makes each load a gather). */
    bool fir_pad_first;
    /* Every pass a sum of shifted slices, each pass before the last materialised as its own kernel
     * (instead of window folds for the passes before the last). */
    bool fir_slices_every_axis;
} nx_backend_hints;

/* The placement policy's answer to a kernel a backend refused at compile time (why: the reason). */
typedef nx_status (*nx_kernel_refused_fn)(nx_ctx *ctx, const nx_kernel *k, const char *why);

typedef struct nx_backend_ops {
    const char *name; /* "cpu", "cuda" */
    nx_backend id;
    /* NX_OK when the backend can run on this machine; otherwise an error status, with the reason
     * as the context's last error. */
    nx_status (*available)(nx_ctx *ctx);
    /* NULL when the backend runs k natively; otherwise why not (a static string). */
    const char *(*why_not)(const nx_kernel *k);
    /* why_not(k) == NULL, as a predicate (what prologue fusion asks of a fused kernel). */
    bool (*supports)(const nx_kernel *k);
    /* Compiles or loads every kernel it runs natively; the others were accepted by the placement
     * policy (the CPU backend runs them on its kernel interpreter, quietly). A kernel that
     * why_not accepted but whose compile is refused after all (the CPU JIT: IR that fails
     * verification, or that LLVM could not lower) goes to refused, the placement policy's
     * fallback (program/placement.c): NX_OK runs it as why_not's kernels run, an error fails the
     * prepare. refused NULL: such a refusal is the prepare's error. Running out of memory is
     * never a refusal. */
    nx_status (*prepare)(nx_ctx *ctx, const nx_kplan *p, nx_kernel_refused_fn refused,
                         void **state);
    /* inputs: one contiguous tensor per program argument, on the host (the CUDA backend takes
     * device tensors too); outputs: new C-contiguous tensors (none left allocated on failure). */
    nx_status (*run)(nx_ctx *ctx, const nx_kplan *p, void *state, const nx_tensor *const *inputs,
                     nx_tensor **outputs);
    void (*release)(nx_ctx *ctx, const nx_kplan *p, void *state);
    /* What graph forms run fastest here (never NULL). */
    const nx_backend_hints *hints;
} nx_backend_ops;

#endif /* NX_CODEGEN_KERNEL_H */
