/* The `nitrix` command line: shared types of the subcommands and the op table of `nitrix run`.
 *
 * Exit codes: 0 success; 2 a bad command line or bad input (unknown command or option, an option
 * value out of its domain, a list of the wrong length, an input that is missing, unreadable, not
 * a valid .npy, or of a dtype or shape the op refuses, a directory as output); 1 a failure at run
 * time (out of memory, I/O while writing, a backend or JIT failure). cli_exit_code maps a
 * library status. Every error is one line on stderr starting with "nitrix".
 *
 * The CLI uses only the public API: it is the first consumer of <nitrix.h>. */
#ifndef NX_CLI_H
#define NX_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nitrix.h"

#if defined(__GNUC__)
#define CLI_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define CLI_PRINTF(f, a)
#endif

enum { CLI_EXIT_OK = 0, CLI_EXIT_FAIL = 1, CLI_EXIT_USAGE = 2 };

/* Prints "nitrix: <message>\n" on stderr. The message must be one line. */
void cli_error(const char *fmt, ...) CLI_PRINTF(1, 2);

/* The exit code of a library status (files.c): 2 for a bad request (NX_ERR_INVALID_ARG, _SHAPE,
 * _DTYPE, _PARSE: an option or input out of its domain, a wrong dtype or shape, a file that is
 * not a valid .npy, a directory as output); 1 for everything else, out of memory included. */
int cli_exit_code(nx_status st);
/* Checks an output path before any work (exit 2 with a message: a directory, a directory that
 * does not exist or cannot be written); returns CLI_EXIT_OK or CLI_EXIT_USAGE. */
int cli_check_output(const char *op, const char *path);
/* Up to three op names (either table, aliases included) close to a mistyped name, as
 * "dilate, erode"; "" when none is close. */
void cli_suggest_ops(const char *name, char *buf, size_t len);

/* A context log sink that holds back the first warning between cli_log_begin and cli_log_end (in
 * last) so it can be reported in place; everything else goes to stderr as the default sink does. */
typedef struct cli_log {
    bool capture;
    char last[512];
} cli_log;
nx_status cli_ctx_new_logged(cli_log *log, nx_ctx **out);
void cli_log_begin(cli_log *log);
void cli_log_end(cli_log *log);
/* The context of `nitrix run`: lines as the default sink prints them, except progress lines of a
 * long op (NX_PROGRESS_PREFIX), shown as one line rewritten in place when stderr is a terminal
 * and dropped when it is not. */
nx_status cli_ctx_new_run(nx_ctx **out);

/* ------------------------------------------------------------------------------------------------
 * Typed options
 * ----------------------------------------------------------------------------------------------*/

typedef enum cli_type {
    CLI_INT,
    CLI_FLOAT,
    CLI_INTS,
    CLI_FLOATS,
    CLI_ENUM,
    CLI_DTYPE,
    CLI_BOOL,
} cli_type;

/* Longest list an INTS/FLOATS option takes (one value per axis, and some slack). */
#define CLI_MAX_LIST 16

typedef struct cli_opt {
    const char *name;
    cli_type type;
    const char *def;     /* default, in the option's syntax; NULL: required */
    const char *allowed; /* see ops.def */
    const char *help;
} cli_opt;

typedef struct cli_value {
    bool set; /* given on the command line or by a default */
    int64_t i;
    double f;
    bool b;
    nx_dtype dtype;
    const char *choice; /* ENUM: the spelling given (points into argv or the table) */
    int n;              /* INTS/FLOATS: number of values */
    int64_t ints[CLI_MAX_LIST];
    double floats[CLI_MAX_LIST];
} cli_value;

/* Parses text as option o. On failure writes a one-line reason ("... ; expected ...") to err. */
bool cli_parse_value(const cli_opt *o, const char *text, cli_value *v, char *err, size_t errlen);
/* "int", "float", "ints", "floats", "a|b|c", "dtype", "bool": how the value is written. */
const char *cli_type_hint(const cli_opt *o);

/* Splits "--name=value" / "--name" into name (copied into buf) and value (NULL when no '=').
 * Returns false when arg is not a long option. */
bool cli_split_long(const char *arg, char *buf, size_t buflen, const char **value);

/* ------------------------------------------------------------------------------------------------
 * `nitrix run` over the library's op table (run-table.c): the default path
 * ----------------------------------------------------------------------------------------------*/

struct nx_op_info;
/* Runs op (argv[0] is its name as given) and returns the exit code. */
int cli_table_run(const struct nx_op_info *op, int argc, char **argv);
void cli_table_help(const struct nx_op_info *op);
/* One line per row of the op table: name, summary, [family]. */
void cli_table_list(void);

/* ------------------------------------------------------------------------------------------------
 * LEGACY: the CLI's own op table (ops.def, ops-*.def, run-*.c), consulted only for names the
 * library's op table does not have. Families leave it as their descriptors land in ops/ops.def;
 * it goes away when the last one has.
 * ----------------------------------------------------------------------------------------------*/

typedef enum cli_op_id {
#define NX_CLI_OP(name, inputs, n_outputs, summary) CLI_OP_##name,
#define NX_CLI_OPT(op, name, type, def, allowed, help)
#include "ops.def"
#undef NX_CLI_OP
#undef NX_CLI_OPT
    CLI_OP_COUNT
} cli_op_id;

typedef enum cli_opt_id {
#define NX_CLI_OP(name, inputs, n_outputs, summary)
#define NX_CLI_OPT(op, name, type, def, allowed, help) CLI_OPT_##op##_##name,
#include "ops.def"
#undef NX_CLI_OP
#undef NX_CLI_OPT
    CLI_OPT_COUNT
} cli_opt_id;

/* One `nitrix run` invocation, as the op's run function sees it. */
typedef struct cli_call {
    nx_backend backend;       /* --backend, else NX_BACKEND_AUTO: the context's (NITRIX_BACKEND) */
    int n_inputs;             /* as many as the op declares */
    nx_tensor *const *inputs; /* read from the positional .npy files, borrowed */
    const cli_value *values;  /* indexed by cli_opt_id; the op's own options are set */
    char *err;                /* for failures that are not the library's (see below) */
    size_t errlen;
} cli_call;

/* Fills outs[0..n_outputs-1] with new tensors (the caller writes and frees them). On failure no
 * output is left allocated and the message is the library's (nx_ctx_last_error), unless the
 * function wrote its own into call->err. */
typedef nx_status (*cli_run_fn)(nx_ctx *ctx, const cli_call *call, nx_tensor **outs);

#define NX_CLI_OP(name, inputs, n_outputs, summary)                                                \
    nx_status cli_run_##name(nx_ctx *ctx, const cli_call *call, nx_tensor **outs);
#define NX_CLI_OPT(op, name, type, def, allowed, help)
#include "ops.def"
#undef NX_CLI_OP
#undef NX_CLI_OPT

typedef struct cli_op {
    const char *name;
    const char *inputs;
    int n_outputs;
    const char *summary;
    cli_run_fn run;
} cli_op;

typedef struct cli_op_opt {
    cli_op_id op;
    cli_opt opt;
} cli_op_opt;

extern const cli_op cli_ops[CLI_OP_COUNT];
extern const cli_op_opt cli_op_opts[CLI_OPT_COUNT];

/* Checks the table: unique op names, options unique per op and not reserved, defaults valid under
 * their own type and range, inputs named. On failure prints what is wrong and returns false. */
bool cli_table_check(void);

/* ------------------------------------------------------------------------------------------------
 * Subcommands: each takes the arguments after its name and returns the exit code.
 * ----------------------------------------------------------------------------------------------*/

int cli_cmd_info(int argc, char **argv);
int cli_cmd_run(int argc, char **argv);
int cli_cmd_demo(int argc, char **argv);
int cli_cmd_bench(int argc, char **argv);

#endif /* NX_CLI_H */
