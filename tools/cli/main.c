/* The `nitrix` command: info, run, demo. */
#include <stdio.h>
#include <string.h>

#include "nitrix.h"

static int cmd_info(void)
{
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(NULL, &ctx) != NX_OK) {
        fprintf(stderr, "nitrix: %s\n", nx_ctx_last_error(NULL));
        return 2;
    }
    printf("nitrix %s\n", nx_version());
    printf("backend: %s\nthreads: %d\ncache: %s\n", nx_backend_name(nx_ctx_backend(ctx)),
           nx_ctx_num_threads(ctx), nx_ctx_cache_dir(ctx));
    nx_ctx_free(ctx);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0) {
        puts("usage: nitrix <info|demo> [--help]");
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "info") == 0 || strcmp(argv[1], "demo") == 0)
        return cmd_info();
    fprintf(stderr, "nitrix: unknown command '%s' (expected info or demo)\n", argv[1]);
    return 2;
}
