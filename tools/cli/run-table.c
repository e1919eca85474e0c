/* `nitrix run OP ...` for the ops of the library's op table (include/nitrix-op.h): the inputs,
 * outputs and option schema come from nx_op_info, the options are checked by
 * nx_op_check_options before any file is read, and the op runs through nx_op_call. Nothing here
 * knows any op: a new row of ops/ops.def is a new `nitrix run` entry with its --help. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"
#include "nitrix-op.h"

#define MAX_FILES 16
#define MAX_OPTS 64

typedef struct table_args {
    const nx_op_info *op;
    char names[MAX_OPTS][64];
    const char *keys[MAX_OPTS], *values[MAX_OPTS];
    int nopt;
    const char *inputs[MAX_FILES], *outputs[MAX_FILES];
    int n_inputs, n_outputs;
    bool help;
} table_args;

/* A library message as one stderr line: a newline in a value the user gave stays on the line. */
static void error_line(const char *op, const char *msg)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", msg);
    for (char *p = buf; *p; p++)
        if (iscntrl((unsigned char)*p))
            *p = '?';
    cli_error("run %s: %s", op, buf);
}

/* How the value of an option is written, for --help. */
static const char *type_hint(const nx_op_opt *o)
{
    switch (o->type) {
    case NX_OPT_INT:
        return "int";
    case NX_OPT_INTS:
        return "ints";
    case NX_OPT_FLOAT:
        return "float";
    case NX_OPT_FLOATS:
        return "floats";
    case NX_OPT_BOOL:
        return "bool";
    case NX_OPT_ENUM:
        return o->allowed ? o->allowed : "name";
    case NX_OPT_BORDER:
        return "reflect|constant|nearest|mirror|wrap";
    case NX_OPT_DTYPE:
        return "dtype";
    case NX_OPT_SEMIRING:
        return "REAL|LOG|TROPICAL_MAX_PLUS|TROPICAL_MIN_PLUS|BOOLEAN|EUCLIDEAN";
    case NX_OPT_TENSOR:
        return "FILE.npy";
    default:
        return "text";
    }
}

static void print_opt(const char *name, const char *hint, const char *help, const char *def,
                      const char *range)
{
    char head[160];
    snprintf(head, sizeof head, "--%s=%s", name, hint);
    printf("  %-28s %s", head, help ? help : "");
    if (!def)
        printf(" (required)");
    else
        printf(" (default %s)", def);
    if (range)
        printf(" [range %s]", range);
    putchar('\n');
}

void cli_table_help(const nx_op_info *op)
{
    printf("usage: nitrix run %s [options]", op->name);
    for (int i = 0; i < op->ninputs; i++)
        printf(i < op->nrequired ? " %s.npy" : " [%s.npy]", op->inputs[i]);
    if (op->noutputs == 1)
        printf(" -o OUT.npy");
    for (int i = 0; op->noutputs > 1 && i < op->noutputs; i++)
        printf(" -o %s.npy", op->outputs[i]);
    printf("\n\n%s\n\nfamily: %s\ninputs:", op->summary, op->family);
    for (int i = 0; i < op->ninputs; i++)
        printf(i < op->nrequired ? " %s" : " [%s] (optional)", op->inputs[i]);
    printf("\noutputs:");
    for (int i = 0; i < op->noutputs; i++)
        printf(" %s", op->outputs[i]);
    printf("\ndifferentiable: %s\n", op->differentiable ? "yes" : "no");
    if (op->aliases && op->aliases[0]) {
        printf("aliases (deprecated):");
        for (const char *const *a = op->aliases; *a; a++)
            printf(" %s", *a);
        putchar('\n');
    }
    printf("options:\n");
    for (int i = 0; i < op->nopts; i++) {
        const nx_op_opt *o = &op->opts[i];
        bool numeric = o->type == NX_OPT_INT || o->type == NX_OPT_INTS ||
                       o->type == NX_OPT_FLOAT || o->type == NX_OPT_FLOATS;
        print_opt(o->name, type_hint(o), o->help, o->def, numeric ? o->allowed : NULL);
    }
    print_opt("backend", "auto|cpu|cuda|ref", "where to run", "$NITRIX_BACKEND, else auto", NULL);
}

static const nx_op_opt *find_opt(const nx_op_info *op, const char *name)
{
    for (int i = 0; i < op->nopts; i++) {
        const char *a = op->opts[i].name, *b = name;
        while (*a && *b && tolower((unsigned char)*a) ==
                               (*b == '-' ? '_' : tolower((unsigned char)*b))) {
            a++;
            b++;
        }
        if (!*a && !*b)
            return &op->opts[i];
    }
    return NULL;
}

static int add_file(const char **list, int *n, const char *path, const char *what, const char *op)
{
    if (*n == MAX_FILES) {
        cli_error("run %s: more than %d %s files", op, MAX_FILES, what);
        return CLI_EXIT_USAGE;
    }
    if (!*path) {
        cli_error("run %s: an empty %s file name", op, what);
        return CLI_EXIT_USAGE;
    }
    list[(*n)++] = path;
    return CLI_EXIT_OK;
}

static int add_option(table_args *a, const char *arg)
{
    const char *value = NULL;
    char *name = a->names[a->nopt];
    if (a->nopt == MAX_OPTS) {
        cli_error("run %s: more than %d options", a->op->name, MAX_OPTS);
        return CLI_EXIT_USAGE;
    }
    cli_split_long(arg, name, sizeof a->names[0], &value);
    if (strcmp(name, "help") == 0) {
        a->help = true;
        return CLI_EXIT_OK;
    }
    const nx_op_opt *o = find_opt(a->op, name);
    if (!value && o && o->type == NX_OPT_BOOL)
        value = "true"; /* --flag */
    if (!value) {
        cli_error("run %s: --%s needs a value (--%s=...)", a->op->name, name, name);
        return CLI_EXIT_USAGE;
    }
    a->keys[a->nopt] = name;
    a->values[a->nopt++] = value;
    return CLI_EXIT_OK;
}

static int parse_args(table_args *a, int argc, char **argv)
{
    bool only_files = false;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int rc = CLI_EXIT_OK;
        if (only_files || arg[0] != '-' || strcmp(arg, "-") == 0) {
            rc = add_file(a->inputs, &a->n_inputs, arg, "input", a->op->name);
        } else if (strcmp(arg, "--") == 0) {
            only_files = true;
        } else if (strcmp(arg, "-o") == 0) {
            if (i + 1 >= argc) {
                cli_error("run %s: -o needs a file name (-o OUT.npy)", a->op->name);
                return CLI_EXIT_USAGE;
            }
            rc = add_file(a->outputs, &a->n_outputs, argv[++i], "output", a->op->name);
        } else if (strncmp(arg, "--", 2) == 0 && arg[2] != '\0' && arg[2] != '=') {
            rc = add_option(a, arg);
        } else {
            cli_error("run %s: unknown option '%s' (options are --name=value; outputs are -o FILE)",
                      a->op->name, arg);
            rc = CLI_EXIT_USAGE;
        }
        if (rc != CLI_EXIT_OK)
            return rc;
    }
    return CLI_EXIT_OK;
}

/* Files are checked before any work, so a typo costs nothing and says exactly what is wrong. */
static int check_files(const table_args *a)
{
    const nx_op_info *op = a->op;
    if (a->n_inputs < op->nrequired || a->n_inputs > op->ninputs) {
        char names[256] = "";
        for (int i = 0; i < op->ninputs; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names),
                     i < op->nrequired ? "%s%s" : "%s[%s]", i ? " " : "", op->inputs[i]);
        if (op->nrequired == op->ninputs)
            cli_error("run %s: expected %d input file%s (%s), got %d", op->name, op->ninputs,
                      op->ninputs == 1 ? "" : "s", names, a->n_inputs);
        else
            cli_error("run %s: expected %d to %d input files (%s; the bracketed ones are "
                      "optional), got %d", op->name, op->nrequired, op->ninputs, names,
                      a->n_inputs);
        return CLI_EXIT_USAGE;
    }
    /* trailing outputs may be left out: they are not written (a 0-d one is printed) */
    if (a->n_outputs < 1 || a->n_outputs > op->noutputs) {
        if (op->noutputs == 1)
            cli_error("run %s: expected 1 output file (-o FILE), got %d", op->name,
                      a->n_outputs);
        else
            cli_error("run %s: expected 1 to %d output files (-o FILE each, in the order %s ...), "
                      "got %d",
                      op->name, op->noutputs, op->outputs[0], a->n_outputs);
        return CLI_EXIT_USAGE;
    }
    for (int i = 0; i < a->n_inputs; i++) {
        /* not opened here: opening a FIFO twice would lose its writer's data */
        if (access(a->inputs[i], R_OK) != 0) {
            cli_error("run %s: cannot open input '%s': %s", op->name, a->inputs[i],
                      strerror(errno));
            return CLI_EXIT_USAGE;
        }
    }
    for (int k = 0; k < a->nopt; k++) {
        const nx_op_opt *o = find_opt(op, a->keys[k]);
        const char *v = a->values[k];
        if (!o || o->type != NX_OPT_TENSOR || !*v || strcasecmp(v, "none") == 0)
            continue;
        if (access(v, R_OK) != 0) { /* a missing file is bad input, as for the inputs */
            cli_error("run %s: cannot open --%s file '%s': %s", op->name, o->name, v,
                      strerror(errno));
            return CLI_EXIT_USAGE;
        }
    }
    for (int i = 0; i < a->n_outputs; i++) {
        for (int j = 0; j < i; j++) {
            if (strcmp(a->outputs[i], a->outputs[j]) == 0) {
                cli_error("run %s: output '%s' is given twice", op->name, a->outputs[i]);
                return CLI_EXIT_USAGE;
            }
        }
        int rc = cli_check_output(op->name, a->outputs[i]);
        if (rc != CLI_EXIT_OK)
            return rc;
    }
    return CLI_EXIT_OK;
}

/* A 0-d output (connected_components' num_labels) is also printed on stdout, "name: value",
 * once the outputs named by -o are written, whether or not it was one of them. A device tensor
 * is not printed (the CLI's are on the host). */
static int report_outputs(const table_args *a, nx_tensor *const *out)
{
    for (int i = 0; i < a->op->noutputs; i++) {
        const nx_tensor *t = out[i];
        const void *p = nx_tensor_ndim(t) == 0 ? nx_tensor_data(t) : NULL;
        if (!p || nx_tensor_device(t) != NX_DEVICE_HOST)
            continue;
        nx_tensor *f = NULL;
        if (nx_dtype_is_float(nx_tensor_dtype(t))) {
            if (nx_tensor_cast(t, NX_DTYPE_F64, &f) != NX_OK)
                return CLI_EXIT_FAIL;
            printf("%s: %.17g\n", a->op->outputs[i], *(const double *)nx_tensor_data(f));
        } else {
            if (nx_tensor_cast(t, NX_DTYPE_I64, &f) != NX_OK)
                return CLI_EXIT_FAIL;
            printf("%s: %lld\n", a->op->outputs[i],
                   (long long)*(const int64_t *)nx_tensor_data(f));
        }
        nx_tensor_free(f);
    }
    return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

static int execute(nx_ctx *ctx, const table_args *a)
{
    const char *name = a->op->name;
    nx_tensor *in[MAX_FILES] = {0}, *out[MAX_FILES] = {0};
    int rc = CLI_EXIT_OK;
    for (int i = 0; i < a->n_inputs && rc == CLI_EXIT_OK; i++) {
        nx_status st = nx_npy_read(ctx, a->inputs[i], &in[i]);
        if (st != NX_OK) {
            cli_error("run %s: %s: %s", name, a->inputs[i], nx_ctx_last_error(ctx));
            rc = st == NX_ERR_IO ? CLI_EXIT_USAGE : cli_exit_code(st); /* unreadable: bad input */
        }
    }
    if (rc == CLI_EXIT_OK) {
        nx_status st = nx_op_call(ctx, name, a->n_inputs, (const nx_tensor *const *)in, a->nopt,
                                  a->keys, a->values, a->op->noutputs, out);
        if (st != NX_OK) {
            error_line(name, nx_ctx_last_error(ctx));
            rc = cli_exit_code(st);
        }
    }
    if (rc == CLI_EXIT_OK) {
        /* all outputs or none: a failing one leaves the others' paths as they were */
        nx_status st = nx_npy_write_many(ctx, a->n_outputs, a->outputs,
                                         (const nx_tensor *const *)out);
        if (st != NX_OK) {
            error_line(name, nx_ctx_last_error(ctx));
            rc = cli_exit_code(st);
        }
        if (rc == CLI_EXIT_OK)
            rc = report_outputs(a, out);
    }
    for (int i = 0; i < MAX_FILES; i++) {
        nx_tensor_free(in[i]);
        nx_tensor_free(out[i]);
    }
    return rc;
}

int cli_table_run(const nx_op_info *op, int argc, char **argv)
{
    table_args *a = calloc(1, sizeof *a);
    if (!a) {
        cli_error("run: out of memory");
        return CLI_EXIT_FAIL;
    }
    a->op = op;
    int rc = parse_args(a, argc, argv);
    if (rc == CLI_EXIT_OK && a->help) {
        cli_table_help(op);
    } else if (rc == CLI_EXIT_OK) {
        nx_ctx *ctx = NULL;
        nx_status cst = cli_ctx_new_run(&ctx);
        if (cst != NX_OK) { /* a bad NITRIX_* setting: 2 */
            error_line(op->name, nx_ctx_last_error(NULL));
            rc = cli_exit_code(cst);
        } else {
            /* A bad option is the command line's fault (exit 2), found before any file is read;
             * what the op refuses at run time is the library's (exit 1). */
            if (nx_op_check_options(ctx, op->name, a->nopt, a->keys, a->values) != NX_OK) {
                error_line(op->name, nx_ctx_last_error(ctx));
                rc = CLI_EXIT_USAGE;
            }
            if (rc == CLI_EXIT_OK)
                rc = check_files(a);
            if (rc == CLI_EXIT_OK)
                rc = execute(ctx, a);
            nx_ctx_free(ctx);
        }
    }
    free(a);
    return rc;
}

void cli_table_list(void)
{
    size_t n = 0;
    const nx_op_info *const *ops = nx_ops(&n);
    for (size_t i = 0; i < n; i++)
        printf("%-28s %s  [%s]\n", ops[i]->name, ops[i]->summary, ops[i]->family);
}
