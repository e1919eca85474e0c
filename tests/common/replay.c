#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "testutil.h"

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    uint8_t *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 4096;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        if (r == 0)
            break;
        n += r;
    }
    fclose(f);
    *len = n;
    return buf;
}

void nx_test_replay_corpus(const char *dir, nx_replay_fn fn, const char *seed_what,
                           size_t min_count)
{
    DIR *d = opendir(dir);
    if (!d)
        fail_msg("cannot open the corpus %s", dir);
    char **names = NULL;
    size_t count = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        names = realloc(names, (count + 1) * sizeof *names);
        assert_non_null(names);
        names[count++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, count, sizeof *names, by_name);
    size_t accepted = 0, rejected = 0;
    for (size_t i = 0; i < count; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        size_t len;
        uint8_t *buf = slurp(path, &len);
        char why[1024] = "";
        nx_replay_result r = fn(buf, len, why, sizeof why);
        free(buf);
        if (r == NX_REPLAY_BROKEN)
            fail_msg("%s: %s", names[i], why);
        if (strncmp(names[i], "seed-", 5) == 0 && r != NX_REPLAY_ACCEPTED)
            fail_msg("%s: %s was rejected", names[i], seed_what);
        if (strncmp(names[i], "bad-", 4) == 0 && r != NX_REPLAY_REJECTED)
            fail_msg("%s: a malformed input was accepted", names[i]);
        accepted += r == NX_REPLAY_ACCEPTED;
        rejected += r == NX_REPLAY_REJECTED;
        free(names[i]);
    }
    free(names);
    if (count < min_count)
        fail_msg("the corpus %s holds %zu inputs; expected at least %zu", dir, count, min_count);
    print_message("%zu corpus inputs: %zu accepted, %zu rejected\n", count, accepted, rejected);
}
