/* LEGACY: the CLI's own op table (rows in ops.def), for ops not yet in the library's op table. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

const cli_op cli_ops[CLI_OP_COUNT] = {
#define NX_CLI_OP(name, inputs, n_outputs, summary)                                                \
    [CLI_OP_##name] = {#name, inputs, n_outputs, summary, cli_run_##name},
#define NX_CLI_OPT(op, name, type, def, allowed, help)
#include "ops.def"
#undef NX_CLI_OP
#undef NX_CLI_OPT
};

const cli_op_opt cli_op_opts[CLI_OPT_COUNT] = {
#define NX_CLI_OP(name, inputs, n_outputs, summary)
#define NX_CLI_OPT(op, name, type, def, allowed, help)                                             \
    [CLI_OPT_##op##_##name] = {CLI_OP_##op, {#name, CLI_##type, def, allowed, help}},
#include "ops.def"
#undef NX_CLI_OP
#undef NX_CLI_OPT
};
