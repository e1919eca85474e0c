/*
 * nitrix op table: every public op, its inputs, outputs and options, and one generic way to call
 * it by name. The command line (`nitrix run`), the golden replay, the op matrix and the Python
 * bindings all read this table; nothing about an op is registered twice.
 *
 * The table is static (ops/ops.def, one row per op; each op's file holds the rest of its story),
 * complete as soon as the library is loaded. Names are the spec's function names ("dilate",
 * "gaussian", "semiring_matmul"); nx_op_find also accepts an op's aliases (older spellings kept for
 * one release) and ignores case.
 *
 *     const nx_op_info *op = nx_op_find("gaussian");
 *     const char *keys[] = {"sigma", "mode"}, *vals[] = {"2", "nearest"};
 *     nx_tensor *y = NULL;
 *     nx_status st = nx_op_call(ctx, "gaussian", 1, &x, 2, keys, vals, 1, &y);
 *
 * Option values are text in the option's own syntax (INTS and FLOATS: "1,1,2"; ENUM and BORDER:
 * one of the allowed names, any case; BOOL: true/false/1/0/yes/no; TENSOR: the path of a .npy
 * file, read for the call, or "none" (or "") for no tensor: an optional tensor option's default).
 * A missing option takes its
 * default; a required option has default NULL. Every error is an nx_status with a message from
 * nx_ctx_last_error(ctx) naming the op, the option and what was expected.
 */
#ifndef NITRIX_OP_H
#define NITRIX_OP_H

#include "nitrix.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Border modes: nx_border, nx_border_name and nx_border_parse are in nitrix.h (every family's
 * header and nitrix-graph.h use them); BORDER options parse with nx_border_parse. */

/* ------------------------------------------------------------------------------------------------
 * The table
 * ----------------------------------------------------------------------------------------------*/

typedef enum nx_opt_type {
    NX_OPT_INT,     /* int64 */
    NX_OPT_INTS,    /* up to max_count int64, "1,1,2"; one value stands for all when allowed */
    NX_OPT_FLOAT,   /* double */
    NX_OPT_FLOATS,  /* up to max_count doubles */
    NX_OPT_BOOL,
    NX_OPT_ENUM,    /* one of `allowed` ("a|b|c"), stored as its index */
    NX_OPT_BORDER,  /* an nx_border, parsed by nx_border_parse */
    NX_OPT_DTYPE,   /* an nx_dtype, numpy names accepted */
    NX_OPT_STRING,  /* free text (driver names are ENUM) */
    NX_OPT_SEMIRING, /* a built-in semiring name (REAL, LOG, TROPICAL_MAX_PLUS, ...; any case) */
    NX_OPT_TENSOR,  /* an optional tensor passed as an option (a structuring element) */
    NX_OPT_TYPE_COUNT
} nx_opt_type;

/* One option of an op: what `nitrix run OP --help` prints and the Python signature shows. */
typedef struct nx_op_opt {
    const char *name;    /* the spec's keyword, e.g. "size", "mode", "semiring" */
    nx_opt_type type;
    const char *def;     /* default in the option's own syntax; NULL: required; in
                            parentheses, a description of a default the op computes from its
                            inputs ("(B's rows)") */
    const char *allowed; /* ENUM: "a|b|c"; numbers: inclusive range "lo:hi" (a side may be
                            empty); NULL: anything of the type */
    int max_count;       /* INTS/FLOATS: most values taken; else 1 */
    const char *help;    /* one line */
} nx_op_opt;

/* One row of the table, with the option schema from the op's file. Borrowed, static. */
typedef struct nx_op_info {
    const char *name;         /* the spec's function name */
    const char *family;       /* "morphology", "smoothing", ... */
    const char *summary;      /* one line of math: "y[i] = max_{k in B} x[i+k]" */
    int ninputs;
    const char *const *inputs;  /* positional tensor inputs, in the spec's argument order */
    int nrequired;            /* inputs[0, nrequired) must be given; the rest are optional (a
                                 trailing `?` in ops.def: "moving fixed mask?"), passed as NULL
                                 or left out of nx_op_call's list when absent */
    int noutputs;
    const char *const *outputs;
    int nopts;
    const nx_op_opt *opts;
    bool differentiable;      /* a vjp exists (nx_op_vjp); false: the op is not differentiable */
    const char *driver_site;  /* the divergent-op registry row it resolves drivers through, or
                                 NULL */
    const char *const *aliases; /* NULL-terminated older names, or NULL */
} nx_op_info;

/* The rows, in table order; *count gets their number (count may be NULL). Never NULL. */
NX_API const nx_op_info *const *nx_ops(size_t *count);
/* By name or alias, any case; NULL when no op has it. */
NX_API const nx_op_info *nx_op_find(const char *name);

/* Calls op `name` on nin tensors with nopt options given as text, writing noutputs new tensors
 * (owned by the caller) to out. Options not given take their defaults; an unknown option, a bad
 * value, a wrong count of inputs or outputs is NX_ERR_INVALID_ARG. "backend" is accepted by every
 * op ("auto", "cpu", "cuda", "ref"). On error every out[i] is NULL. */
NX_API nx_status nx_op_call(nx_ctx *ctx, const char *name, int nin, const nx_tensor *const *in,
                            int nopt, const char *const *keys, const char *const *values,
                            int nout, nx_tensor **out);

/* Parses nopt text options of op `name` as nx_op_call does, without running anything or reading
 * any file (a TENSOR option's path is not opened): NX_OK, or the error
 * nx_op_call would give for them (NX_ERR_INVALID_ARG naming the option and what it expects). A
 * command line checks its arguments with it before any work. */
NX_API nx_status nx_op_check_options(nx_ctx *ctx, const char *name, int nopt,
                                     const char *const *keys, const char *const *values);

/* The vector-Jacobian product of a differentiable op: given the forward inputs and one cotangent
 * per output (dy, each of its output's shape and dtype), writes one gradient per input given to
 * dx (nin of them; NULL for an input that carries none: integer inputs, indices, an optional input
 * passed as NULL). A non-differentiable op is NX_ERR_UNSUPPORTED saying so. */
NX_API nx_status nx_op_vjp(nx_ctx *ctx, const char *name, int nin, const nx_tensor *const *in,
                           int nopt, const char *const *keys, const char *const *values,
                           int ndy, const nx_tensor *const *dy, nx_tensor **dx);

/* The tolerance op `name` (or an alias) promises against its independent oracle for results of
 * dtype (the golden corpus, docs/fidelity.md): |got - want| <= atol + rtol |want| elementwise.
 * backend ("cpu", "cuda", "ref") and driver (a driver= value) may be NULL for any; a row naming
 * them outranks a general one. false (rtol and atol untouched) when the op is unknown or states
 * no tolerance for dtype. Callers that compare results outside the library (the Python tests)
 * read the same bound as the C golden replay. */
NX_API bool nx_op_tolerance_get(const char *name, nx_dtype dtype, const char *backend,
                                const char *driver, double *rtol, double *atol);

#ifdef __cplusplus
}
#endif

#endif /* NITRIX_OP_H */
