/* `nitrix run OP [--key=value ...] IN.npy ... -o OUT.npy [-o ...] [--backend=...]`.
 *
 * An op of the library's op table (nx_op_find: spec names, aliases, any case) runs through
 * run-table.c, generated from its row and schema. LEGACY: the rest of this file is the CLI's own
 * table (ops-*.def with a run-*.c mapper per family), consulted only for names the op table does
 * not have, so families not yet converted keep their commands; it goes away with the last one. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "nitrix-op.h"

#define MAX_FILES 16

static const char *const reserved[] = {"backend", "help", "list", "output"};

/* Its default is the context's backend (NITRIX_BACKEND, else auto), so it is never parsed. */
static const cli_opt backend_opt = {"backend", CLI_ENUM, "$NITRIX_BACKEND, else auto",
                                    "auto|cpu|cuda|ref", "where to run"};

typedef struct run_args {
    cli_op_id id;
    const cli_op *op;
    cli_value values[CLI_OPT_COUNT];
    const char *inputs[MAX_FILES];
    int n_inputs;
    const char *outputs[MAX_FILES];
    int n_outputs;
    bool backend_set;
    nx_backend backend;
    bool help;
} run_args;

/* Number of space-separated words in s. */
static int count_words(const char *s)
{
    int n = 0;
    bool in = false;
    for (; *s; s++) {
        if (*s != ' ' && !in)
            n++;
        in = *s != ' ';
    }
    return n;
}

/* ------------------------------------------------------------------------------------------------
 * The table's self-check
 * ----------------------------------------------------------------------------------------------*/

static bool check_opt(const cli_op_opt *row, int index)
{
    const char *op = cli_ops[row->op].name;
    char err[256];
    cli_value v;
    for (size_t r = 0; r < sizeof reserved / sizeof reserved[0]; r++) {
        if (strcmp(row->opt.name, reserved[r]) == 0) {
            cli_error("internal error: op %s declares the reserved option --%s", op, row->opt.name);
            return false;
        }
    }
    for (int j = 0; j < index; j++) {
        if (cli_op_opts[j].op == row->op && strcmp(cli_op_opts[j].opt.name, row->opt.name) == 0) {
            cli_error("internal error: op %s declares --%s twice", op, row->opt.name);
            return false;
        }
    }
    if (row->opt.type == CLI_ENUM && !row->opt.allowed) {
        cli_error("internal error: op %s option --%s is an enum without values", op, row->opt.name);
        return false;
    }
    if (row->opt.def && !cli_parse_value(&row->opt, row->opt.def, &v, err, sizeof err)) {
        cli_error("internal error: op %s has a bad default: %s", op, err);
        return false;
    }
    return true;
}

bool cli_table_check(void)
{
    for (int i = 0; i < CLI_OP_COUNT; i++) {
        const cli_op *op = &cli_ops[i];
        int n_in = count_words(op->inputs);
        if (!op->run || n_in < 1 || n_in > MAX_FILES || op->n_outputs < 1 ||
            op->n_outputs > MAX_FILES) {
            cli_error("internal error: op %s: needs a run function, 1..%d inputs and outputs",
                      op->name, MAX_FILES);
            return false;
        }
        for (int j = 0; j < i; j++) {
            if (strcmp(cli_ops[j].name, op->name) == 0) {
                cli_error("internal error: op %s is in the table twice", op->name);
                return false;
            }
        }
    }
    for (int i = 0; i < CLI_OPT_COUNT; i++) {
        if (!check_opt(&cli_op_opts[i], i))
            return false;
    }
    return true;
}

/* ------------------------------------------------------------------------------------------------
 * Help
 * ----------------------------------------------------------------------------------------------*/

static void print_run_help(void)
{
    puts("usage: nitrix run OP [--key=value ...] IN.npy ... -o OUT.npy [-o OUT2.npy ...] "
         "[--backend=auto|cpu|cuda|ref]\n"
         "       nitrix run --list\n"
         "       nitrix run OP --help\n"
         "\n"
         "Runs one op on .npy arrays. Inputs are positional, in the op's argument order; options\n"
         "are --name=value; each output is one -o FILE, in order (trailing ones may be left\n"
         "out; a 0-d output is also printed). Outputs are written all or none: a regular file\n"
         "through a temporary name and a rename (its mode kept), a symbolic link to the file it\n"
         "names, /dev/null, /dev/stdout or a FIFO with a reader in place; a directory is refused.\n"
         "\n"
         "exit status: 0 done; 2 bad command line or bad input (an option, dtype, shape or value\n"
         "out of its domain, an input missing or not a valid .npy, a directory as output);\n"
         "1 a failure at run time (out of memory, an output that cannot be written, a backend).");
}

static void print_list(void)
{
    cli_table_list();
    for (int i = 0; i < CLI_OP_COUNT; i++)
        if (!nx_op_find(cli_ops[i].name))
            printf("%-28s %s  [legacy]\n", cli_ops[i].name, cli_ops[i].summary);
}

static void print_opt(const cli_opt *o)
{
    char head[96];
    snprintf(head, sizeof head, "--%s=%s", o->name, cli_type_hint(o));
    printf("  %-28s %s", head, o->help);
    if (!o->def)
        printf(" (required)");
    else
        printf(" (default %s)", o->def);
    if (o->allowed && o->type != CLI_ENUM)
        printf(" [range %s]", o->allowed);
    putchar('\n');
}

static void print_op_help(const cli_op *op, cli_op_id id)
{
    printf("usage: nitrix run %s [options]", op->name);
    const char *p = op->inputs;
    while (*p) {
        while (*p == ' ')
            p++;
        int n = (int)strcspn(p, " ");
        if (n > 0)
            printf(" %.*s.npy", n, p);
        p += n;
    }
    if (op->n_outputs == 1)
        printf(" -o OUT.npy");
    for (int i = 0; op->n_outputs > 1 && i < op->n_outputs; i++)
        printf(" -o OUT%d.npy", i + 1);
    printf("\n\n%s\n\ninputs: %s\noptions:\n", op->summary, op->inputs);
    for (int i = 0; i < CLI_OPT_COUNT; i++) {
        if (cli_op_opts[i].op == id)
            print_opt(&cli_op_opts[i].opt);
    }
    print_opt(&backend_opt);
}

/* ------------------------------------------------------------------------------------------------
 * Parsing
 * ----------------------------------------------------------------------------------------------*/

static int find_opt(cli_op_id id, const char *name)
{
    for (int i = 0; i < CLI_OPT_COUNT; i++) {
        if (cli_op_opts[i].op == id && strcmp(cli_op_opts[i].opt.name, name) == 0)
            return i;
    }
    return -1;
}

/* "--dtype, --backend": the op's options for an error message. */
static void opt_names(cli_op_id id, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int i = 0; i < CLI_OPT_COUNT; i++) {
        if (cli_op_opts[i].op == id) {
            size_t used = strlen(buf);
            snprintf(buf + used, len - used, "--%s, ", cli_op_opts[i].opt.name);
        }
    }
    size_t used = strlen(buf);
    snprintf(buf + used, len - used, "--backend, --help, -o");
}

static int parse_option(run_args *a, const char *arg)
{
    char name[64], err[256];
    const char *value = NULL;
    cli_split_long(arg, name, sizeof name, &value);
    if (strcmp(name, "help") == 0) {
        a->help = true;
        return CLI_EXIT_OK;
    }
    if (strcmp(name, "backend") == 0) {
        cli_value v;
        if (a->backend_set) {
            cli_error("run %s: --backend is given twice", a->op->name);
            return CLI_EXIT_USAGE;
        }
        if (!cli_parse_value(&backend_opt, value, &v, err, sizeof err)) {
            cli_error("run %s: %s", a->op->name, err);
            return CLI_EXIT_USAGE;
        }
        for (int b = 0; b < NX_BACKEND_COUNT; b++) {
            if (strcmp(nx_backend_name((nx_backend)b), v.choice) == 0)
                a->backend = (nx_backend)b;
        }
        a->backend_set = true;
        return CLI_EXIT_OK;
    }
    int idx = find_opt(a->id, name);
    if (idx < 0) {
        char names[512];
        opt_names(a->id, names, sizeof names);
        cli_error("run %s: unknown option --%s; expected one of %s", a->op->name, name, names);
        return CLI_EXIT_USAGE;
    }
    if (a->values[idx].set) {
        cli_error("run %s: --%s is given twice", a->op->name, name);
        return CLI_EXIT_USAGE;
    }
    if (!cli_parse_value(&cli_op_opts[idx].opt, value, &a->values[idx], err, sizeof err)) {
        cli_error("run %s: %s", a->op->name, err);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
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

static int parse_args(run_args *a, int argc, char **argv)
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
            rc = parse_option(a, arg);
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

/* Defaults for options not given; a missing required option is an error. */
static int fill_defaults(run_args *a)
{
    char err[256];
    for (int i = 0; i < CLI_OPT_COUNT; i++) {
        const cli_opt *o = &cli_op_opts[i].opt;
        if (cli_op_opts[i].op != a->id || a->values[i].set)
            continue;
        if (!o->def) {
            cli_error("run %s: missing --%s=%s (%s)", a->op->name, o->name, cli_type_hint(o),
                      o->help);
            return CLI_EXIT_USAGE;
        }
        if (!cli_parse_value(o, o->def, &a->values[i], err, sizeof err)) {
            cli_error("internal error: run %s: bad default: %s", a->op->name, err);
            return CLI_EXIT_FAIL;
        }
    }
    return CLI_EXIT_OK;
}

/* Files are checked before any work, so a typo costs nothing and says exactly what is wrong. */
static int check_files(const run_args *a)
{
    const char *op = a->op->name;
    int want = count_words(a->op->inputs);
    if (a->n_inputs != want) {
        cli_error("run %s: expected %d input file%s (%s), got %d", op, want, want == 1 ? "" : "s",
                  a->op->inputs, a->n_inputs);
        return CLI_EXIT_USAGE;
    }
    if (a->n_outputs != a->op->n_outputs) {
        cli_error("run %s: expected %d output file%s (-o FILE), got %d", op, a->op->n_outputs,
                  a->op->n_outputs == 1 ? "" : "s", a->n_outputs);
        return CLI_EXIT_USAGE;
    }
    for (int i = 0; i < a->n_inputs; i++) {
        /* not opened here: opening a FIFO twice would lose its writer's data */
        if (access(a->inputs[i], R_OK) != 0) {
            cli_error("run %s: cannot open input '%s': %s", op, a->inputs[i],
                      strerror(errno));
            return CLI_EXIT_USAGE;
        }
    }
    for (int i = 0; i < a->n_outputs; i++) {
        for (int j = 0; j < i; j++) {
            if (strcmp(a->outputs[i], a->outputs[j]) == 0) {
                cli_error("run %s: output '%s' is given twice", op, a->outputs[i]);
                return CLI_EXIT_USAGE;
            }
        }
        int rc = cli_check_output(op, a->outputs[i]);
        if (rc != CLI_EXIT_OK)
            return rc;
    }
    return CLI_EXIT_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Execution
 * ----------------------------------------------------------------------------------------------*/

static int execute(nx_ctx *ctx, const run_args *a)
{
    nx_tensor *in[MAX_FILES] = {0}, *out[MAX_FILES] = {0};
    char err[512] = "";
    int rc = CLI_EXIT_OK;
    for (int i = 0; i < a->n_inputs && rc == CLI_EXIT_OK; i++) {
        nx_status st = nx_npy_read(ctx, a->inputs[i], &in[i]);
        if (st != NX_OK) {
            cli_error("run %s: %s: %s", a->op->name, a->inputs[i], nx_ctx_last_error(ctx));
            rc = st == NX_ERR_IO ? CLI_EXIT_USAGE : cli_exit_code(st); /* unreadable: bad input */
        }
    }
    if (rc == CLI_EXIT_OK) {
        /* NX_BACKEND_AUTO when --backend is not given: the context's (NITRIX_BACKEND) applies
         * and messages say it came from there, not from the caller */
        cli_call call = {.backend = a->backend_set ? a->backend : NX_BACKEND_AUTO,
                         .n_inputs = a->n_inputs,
                         .inputs = in,
                         .values = a->values,
                         .err = err,
                         .errlen = sizeof err};
        nx_status st = a->op->run(ctx, &call, out);
        if (st != NX_OK) {
            cli_error("run %s: %s", a->op->name, err[0] ? err : nx_ctx_last_error(ctx));
            rc = cli_exit_code(st);
        }
    }
    if (rc == CLI_EXIT_OK) {
        nx_status st = nx_npy_write_many(ctx, a->n_outputs, a->outputs,
                                         (const nx_tensor *const *)out);
        if (st != NX_OK) {
            cli_error("run %s: %s", a->op->name, nx_ctx_last_error(ctx));
            rc = cli_exit_code(st);
        }
    }
    for (int i = 0; i < MAX_FILES; i++) {
        nx_tensor_free(in[i]);
        nx_tensor_free(out[i]);
    }
    return rc;
}

static int find_op(const char *name)
{
    for (int i = 0; i < CLI_OP_COUNT; i++) {
        if (strcmp(cli_ops[i].name, name) == 0)
            return i;
    }
    return -1;
}

int cli_cmd_run(int argc, char **argv)
{
    if (!cli_table_check())
        return CLI_EXIT_FAIL;
    if (argc < 2) {
        cli_error("run: missing OP; expected 'nitrix run OP ...' (see nitrix run --list)");
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        print_run_help();
        return CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "--list") == 0) {
        print_list();
        return CLI_EXIT_OK;
    }
    const nx_op_info *table_op = nx_op_find(argv[1]);
    if (table_op)
        return cli_table_run(table_op, argc - 1, argv + 1);
    int id = find_op(argv[1]);
    if (id < 0) {
        char near[256];
        cli_suggest_ops(argv[1], near, sizeof near);
        if (near[0])
            cli_error("run: unknown op '%s'; did you mean %s? (see nitrix run --list)", argv[1],
                      near);
        else
            cli_error("run: unknown op '%s' (see nitrix run --list)", argv[1]);
        return CLI_EXIT_USAGE;
    }
    run_args *a = calloc(1, sizeof *a);
    if (!a) {
        cli_error("run: out of memory");
        return CLI_EXIT_FAIL;
    }
    a->id = (cli_op_id)id;
    a->op = &cli_ops[id];
    int rc = parse_args(a, argc - 1, argv + 1);
    if (rc == CLI_EXIT_OK && a->help) {
        print_op_help(a->op, a->id);
    } else if (rc == CLI_EXIT_OK && (rc = fill_defaults(a)) == CLI_EXIT_OK &&
               (rc = check_files(a)) == CLI_EXIT_OK) {
        nx_ctx *ctx = NULL;
        nx_status cst = cli_ctx_new_run(&ctx);
        if (cst != NX_OK) { /* a bad NITRIX_* setting: 2 */
            cli_error("run %s: %s", a->op->name, nx_ctx_last_error(NULL));
            rc = cli_exit_code(cst);
        } else {
            rc = execute(ctx, a);
            nx_ctx_free(ctx);
        }
    }
    free(a);
    return rc;
}
