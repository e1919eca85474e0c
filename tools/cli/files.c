/* What `nitrix run` shares between its two tables: the exit code of a library status, the checks
 * of output paths before any work, and the nearest op names for a typo. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "nitrix-op.h"

int cli_exit_code(nx_status st)
{
    switch (st) {
    case NX_OK:
        return CLI_EXIT_OK;
    case NX_ERR_INVALID_ARG: /* an option or input value out of its domain */
    case NX_ERR_SHAPE:
    case NX_ERR_DTYPE:
    case NX_ERR_PARSE: /* an input that is not a valid .npy */
        return CLI_EXIT_USAGE;
    default: /* NOMEM, IO, UNSUPPORTED, BACKEND, INTERNAL: the run failed, not the request */
        return CLI_EXIT_FAIL;
    }
}

int cli_check_output(const char *op, const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            cli_error("run %s: output '%s' is a directory; expected a file name (-o DIR/OUT.npy)",
                      op, path);
            return CLI_EXIT_USAGE;
        }
        return CLI_EXIT_OK; /* anything else: the writer decides (docs/user-guide.md) */
    }
    if (lstat(path, &st) == 0)
        return CLI_EXIT_OK; /* a dangling link: the writer creates the file it names */
    char dir[4096];
    const char *slash = strrchr(path, '/');
    int n = slash ? (int)(slash - path) : 1;
    snprintf(dir, sizeof dir, "%.*s", n == 0 ? 1 : n, slash ? path : ".");
    if (access(dir, W_OK | X_OK) != 0) {
        cli_error("run %s: cannot write output '%s': directory '%s': %s", op, path, dir,
                  strerror(errno));
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

/* Edit distance (insert, delete, substitute, swap of neighbours), case-insensitive; names
 * longer than 63 bytes are compared by their first 63. */
static int distance(const char *a, const char *b)
{
    enum { N = 64 };
    int la = (int)strnlen(a, N - 1), lb = (int)strnlen(b, N - 1);
    static int d[N][N];
    for (int i = 0; i <= la; i++)
        d[i][0] = i;
    for (int j = 0; j <= lb; j++)
        d[0][j] = j;
    for (int i = 1; i <= la; i++) {
        for (int j = 1; j <= lb; j++) {
            int ca = a[i - 1] | 0x20, cb = b[j - 1] | 0x20;
            int best = d[i - 1][j - 1] + (ca != cb);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && ca == (b[j - 2] | 0x20) && (a[i - 2] | 0x20) == cb &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[la][lb];
}

static void consider(const char *name, const char *cand, const char **best, int *score, int k)
{
    int s = distance(name, cand);
    /* a name the typo is part of (dilate for dilat) counts as close */
    if (strlen(name) >= 3 && strstr(cand, name))
        s = s < 2 ? s : 2;
    for (int i = 0; i < k; i++) {
        if (best[i] && strcmp(best[i], cand) == 0)
            return;
        if (!best[i] || s < score[i]) {
            for (int j = k - 1; j > i; j--) {
                best[j] = best[j - 1];
                score[j] = score[j - 1];
            }
            best[i] = cand;
            score[i] = s;
            return;
        }
    }
}

void cli_suggest_ops(const char *name, char *buf, size_t len)
{
    enum { K = 3 };
    const char *best[K] = {0};
    int score[K] = {0};
    size_t n = 0;
    const nx_op_info *const *ops = nx_ops(&n);
    for (size_t i = 0; i < n; i++) {
        consider(name, ops[i]->name, best, score, K);
        for (const char *const *a = ops[i]->aliases; a && *a; a++)
            consider(name, *a, best, score, K);
    }
    for (int i = 0; i < CLI_OP_COUNT; i++)
        consider(name, cli_ops[i].name, best, score, K);
    /* close: at most a third of the name's length wrong (at least 2 edits allowed) */
    int limit = (int)strlen(name) / 3 > 2 ? (int)strlen(name) / 3 : 2;
    buf[0] = '\0';
    for (int i = 0; i < K && best[i] && score[i] <= limit; i++) {
        size_t used = strlen(buf);
        snprintf(buf + used, len - used, "%s%s", i ? ", " : "", best[i]);
    }
}
