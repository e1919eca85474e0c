/* The `nitrix` command: info, run, demo, bench. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void print_usage(FILE *f)
{
    fputs("usage: nitrix COMMAND [--help]\n"
          "\n"
          "commands:\n"
          "  info    library version, CPU features, backends compiled in and found, cache\n"
          "  run     run one op on .npy arrays (nitrix run --list shows the ops)\n"
          "  demo    synthesise a 3-D phantom and run a small pipeline on each backend\n"
          "  bench   the CPU backend's benchmark rows (nitrix bench --help)\n"
          "\n"
          "nitrix COMMAND --help describes a command. Exit status: 0 done; 2 bad command line\n"
          "or bad input; 1 a failure at run time (out of memory included).\n",
          f);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        cli_error("missing command; expected info, run or demo (see nitrix --help)");
        return CLI_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        print_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("nitrix %s\n", nx_version());
        return CLI_EXIT_OK;
    }
    if (strcmp(cmd, "info") == 0)
        return cli_cmd_info(argc - 1, argv + 1);
    if (strcmp(cmd, "run") == 0)
        return cli_cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "demo") == 0)
        return cli_cmd_demo(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0)
        return cli_cmd_bench(argc - 1, argv + 1);
    cli_error("unknown command '%s'; expected info, run, demo or bench (see nitrix --help)", cmd);
    return CLI_EXIT_USAGE;
}
