/* The op descriptor: everything about one public op, in the op's own file.
 *
 * An op is a row of ops/ops.def (name, family, inputs, outputs, differentiable, driver site,
 * summary) and one `const nx_op_desc nx_op_<name>` in ops/<family>/<name>.c holding the rest:
 * the option schema and where each option lands in the op's option struct, the shape and option
 * check (written once: the typed entry point, nx_op_call and nx_op_vjp all run it), extra key
 * fields, the graph builder, an optional host orchestration for ops that are not one program,
 * the golden family and the tolerances per dtype, backend and driver.
 *
 * One generic runner, nx_op_run, does for every op:
 *     argument checks -> desc->check -> placement (backend and device) -> key -> cache -> run
 * and a public entry point is a short wrapper around it:
 *
 *     nx_status nx_dilate(nx_ctx *ctx, const nx_tensor *x, const nx_morph_opts *o, nx_tensor **y)
 *     {
 *         return nx_op_run(ctx, &nx_op_dilate, (const nx_tensor *const[]){x}, o, y);
 *     }
 *
 * Option structs. The runner sees the op's own option struct. nx_op_call fills it from text:
 * each option given is parsed by the schema, and each option not given takes its default text,
 * parsed the same way, so a default need not be zero. A typed entry point passes a struct it
 * owns; where its public struct treats zero as "default" (opts == NULL is every default), the
 * wrapper converts it to the op's struct, or the op's struct is the public one and the op reads
 * zero as the default. INTS/FLOATS given one value fill every slot ("one value for all"); given k
 * values they fill k slots, and count_offset (when not NX_OP_NO_FIELD) receives k.
 *
 * Keys. The runner serialises into the cache key: the op's name, the stage, each option through
 * the schema (by value: numbers, enum indices, strings' text, tensor options' dtype, shape and
 * bytes), every input's dtype and shape, the resolved backend and whether this is a vjp. `key`
 * adds what the schema cannot see (a user semiring's identity, say); it is NULL for most ops.
 */
#ifndef NX_OPS_OP_H
#define NX_OPS_OP_H

#include <stddef.h>

#include "cache.h"
#include "internal.h"
#include "progress.h"
#include "nitrix-graph.h"
#include "nitrix-op.h"

#define NX_OP_NO_FIELD ((size_t)-1)
#define NX_OP_MAX_IO 8

typedef struct nx_op_desc nx_op_desc;

/* Where an option of the schema lands in the op's option struct. */
typedef struct nx_op_field {
    size_t offset;       /* of the value: int64_t (INT; int for ENUM/BORDER/DTYPE/BOOL as bool),
                            int64_t[] / double[] (INTS/FLOATS, max_count slots), double (FLOAT),
                            const char * (STRING), const nx_semiring * (SEMIRING),
                            const nx_tensor * (TENSOR) */
    size_t count_offset; /* INTS/FLOATS: an int receiving how many values were given, or
                            NX_OP_NO_FIELD */
    size_t size;         /* sizeof the field, checked against the type by the table self-check */
} nx_op_field;

/* |got - want| <= atol + rtol * |want| elementwise for golden cases and backend comparisons. The
 * most specific row wins (a named backend or driver beats NULL = any). */
typedef struct nx_op_tol {
    nx_dtype dtype;
    const char *backend; /* "cpu", "cuda", "ref" or NULL: any */
    const char *driver;  /* a driver value or NULL: any */
    double rtol, atol;
} nx_op_tol;

/* What an op's functions see. (Named nx_op_args: nx_op_call is the public call by name.) */
typedef struct nx_op_args {
    const nx_op_desc *desc;
    nx_ctx *ctx;
    const nx_tensor *const *in; /* desc->info.ninputs tensors, in the row's order */
    const void *opts;           /* the op's option struct (never NULL here) */
    nx_backend backend;         /* after placement: cpu, cuda or ref */
    const nx_tensor *const *dy; /* nx_op_vjp: one cotangent per output; else NULL */
    const char *who;            /* the name errors start with ("nx_dilate", "dilate") */
    const nx_op_info *info;     /* the op's public row: the ops.def fields and the schema */
    nx_rt_progress *progress;   /* the call's progress record (NULL in a nested op call) */
} nx_op_args;

/* The descriptor's info needs only nopts, opts and aliases: the name, family, summary, inputs,
 * outputs, differentiable flag and driver site come from the op's ops.def row (nx_ops() and
 * nx_op_args.info join the two). A field the op file does set must agree with the row; the
 * table self-check fails otherwise. */
struct nx_op_desc {
    nx_op_info info;            /* the ops.def row and the option schema (public part) */
    size_t opts_size;           /* sizeof the option struct; 0 when the op takes no options */
    const nx_op_field *fields;  /* one per info.opts entry */
    size_t backend_offset;      /* the struct's nx_backend field, or NX_OP_NO_FIELD */
    /* Shapes, dtypes and option values; a message naming the argument and what is expected. */
    nx_status (*check)(const nx_op_args *c);
    /* Key fields the schema cannot see; NULL: none. */
    void (*key)(nx_rt_cache_blob *b, const nx_op_args *c);
    /* The graph: one nx_input (nx_parameter for inputs a vjp differentiates) per input, in order,
     * then the outputs. NULL only when run is set. */
    nx_status (*build)(nx_graph *g, const nx_op_args *c, nx_node *outs);
    /* Host orchestration for an op that is not one program (data-dependent loops, a padded
     * two-stage run, host-side constructors); it gets its programs from nx_op_program. NULL: the
     * runner compiles build once per key and runs it. */
    nx_status (*run)(const nx_op_args *c, nx_tensor **outs);
    const char *golden;         /* folder under golden/ with this op's cases */
    const nx_op_tol *tols;
    int ntols;
    unsigned flags;             /* NX_OP_* below */
    /* Why the FD gradient test (tests/fidelity/test-gradients.c) perturbs a tie-free copy of the
     * golden inputs: set for an op that is differentiable almost everywhere but not at ties (max,
     * min, median, pooling), where a central difference across a tie measures neither side. The
     * test then adds a deterministic jitter that makes every value distinct and takes h far below
     * the smallest gap. NULL: the inputs are used as they are. */
    const char *fd_note;
};

/* The op runs on the host through the runtime (copy, cast), not as a compiled program: the runner
 * does not resolve a backend request (c->backend is the request, or the context's), so the op
 * honours or refuses it itself, and device inputs are the op's to handle. */
#define NX_OP_HOST 0x1u

/* The generic runner behind every entry point. opts may be NULL (every default). On error every
 * out[i] is NULL. */
NX_HIDDEN nx_status nx_op_run(nx_ctx *ctx, const nx_op_desc *d, const nx_tensor *const *in,
                              const void *opts, nx_tensor **out);
/* Its vjp: one cotangent per output, one gradient per input (NULL where none). */
NX_HIDDEN nx_status nx_op_run_vjp(nx_ctx *ctx, const nx_op_desc *d, const nx_tensor *const *in,
                                  const void *opts, const nx_tensor *const *dy, nx_tensor **dx);
/* The same, with errors starting with `who` (an older entry point's name, "nx_morph"), where
 * nx_op_run says "nx_<name>". who NULL: as nx_op_run. */
NX_HIDDEN nx_status nx_op_run_as(nx_ctx *ctx, const nx_op_desc *d, const char *who,
                                 const nx_tensor *const *in, const void *opts, nx_tensor **out);
NX_HIDDEN nx_status nx_op_run_vjp_as(nx_ctx *ctx, const nx_op_desc *d, const char *who,
                                     const nx_tensor *const *in, const void *opts,
                                     const nx_tensor *const *dy, nx_tensor **dx);

/* A compiled program for a stage of an op's own run: keyed as the runner keys (op, options,
 * inputs, backend, vjp) plus `stage` and whatever `key` adds; built by `build` with `user`, which
 * declares the program's inputs (nx_input / nx_parameter) and sets outs[0..nout). When c->dy is
 * set the program is the stage's vjp: its inputs are the stage's, then one cotangent per output
 * (of the outputs' dtypes and shapes), and its outputs the gradients of the stage's parameters, in
 * the order they were declared. (A run that wants a forward stage during a vjp passes a copy of c
 * with dy NULL.) *out is borrowed from the context's cache. */
typedef nx_status (*nx_op_stage_fn)(nx_graph *g, const nx_op_args *c, const void *user,
                                    int nout, nx_node *outs);
NX_HIDDEN nx_status nx_op_program(const nx_op_args *c, const char *stage,
                                  void (*key)(nx_rt_cache_blob *b, const void *user),
                                  nx_op_stage_fn build, const void *user, int nout,
                                  nx_program **out);

/* Progress of an op's own loop (a run's row blocks, rounds to a fixed point): done of total steps
 * (total 0: unknown). The runner opens the record and names the stage (compiling, running); a
 * line goes to the log sink only after 2 s, at most two a second, with the elapsed and remaining
 * time (runtime/progress.h). Cheap: call it once per step. */
NX_HIDDEN void nx_op_progress(const nx_op_args *c, int64_t done, int64_t total);

/* The table: the descriptors in ops.def order. */
NX_HIDDEN const nx_op_desc *const *nx_op_descs(size_t *count);
NX_HIDDEN const nx_op_desc *nx_op_desc_find(const char *name);
/* A descriptor's public row (the ops.def fields joined with its schema); NULL for a descriptor
 * that is not in the table. */
NX_HIDDEN const nx_op_info *nx_op_desc_info(const nx_op_desc *d);
/* The tolerance for (dtype, backend, driver) by the most-specific rule; false when no row matches.
 */
NX_HIDDEN bool nx_op_tolerance(const nx_op_desc *d, nx_dtype dtype, const char *backend,
                               const char *driver, double *rtol, double *atol);

#define NX_OP(name, family, inputs, outputs, diff, driver, summary)                                \
    extern const nx_op_desc nx_op_##name;
#include "ops.def"
#undef NX_OP

#endif /* NX_OPS_OP_H */
