#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define HDR 64 /* keeps the user pointer 64-byte aligned */

static void *sweep_alloc_fn(void *user, size_t size, size_t align)
{
    nx_test_alloc *ta = user;
    ta->count++;
    if (ta->fail_at > 0 && ta->count == ta->fail_at)
        return NULL;
    if (align > HDR)
        return NULL; /* the library never asks for more than 64 */
    void *base = NULL;
    if (posix_memalign(&base, HDR, size + HDR) != 0)
        return NULL;
    memcpy(base, &size, sizeof size);
    ta->live++;
    ta->live_bytes += (int64_t)size;
    return (char *)base + HDR;
}

static void sweep_free_fn(void *user, void *ptr, size_t size)
{
    nx_test_alloc *ta = user;
    if (!ptr)
        return;
    char *base = (char *)ptr - HDR;
    size_t recorded;
    memcpy(&recorded, base, sizeof recorded);
    if (recorded != size)
        ta->size_errors++;
    ta->live--;
    ta->live_bytes -= (int64_t)recorded;
    free(base);
}

nx_allocator nx_test_allocator(nx_test_alloc *ta)
{
    nx_allocator a = {sweep_alloc_fn, sweep_free_fn, ta};
    return a;
}

nx_ctx *nx_test_ctx(nx_test_alloc *ta)
{
    nx_allocator a = nx_test_allocator(ta);
    /* The environment is ignored, but the suite's cache directory (test_env) is kept, so no test
     * writes into the user's ~/.cache. */
    nx_ctx_opts opts = {.allocator = &a, .ignore_env = true, .cache_dir = getenv("NITRIX_CACHE_DIR")};
    nx_ctx *ctx = NULL;
    nx_status st = nx_ctx_new(&opts, &ctx);
    if (st != NX_OK)
        fail_msg("nx_ctx_new failed: %s", nx_ctx_last_error(NULL));
    return ctx;
}

int64_t nx_test_alloc_sweep(nx_test_body body, void *user, int64_t max_n)
{
    for (int64_t n = 1; n <= max_n; n++) {
        nx_test_alloc ta = {0};
        nx_ctx *ctx = nx_test_ctx(&ta);
        int64_t before = ta.count;
        ta.fail_at = before + n;
        nx_status st = body(ctx, user);
        int64_t made = ta.count - before;
        bool fired = ta.count >= ta.fail_at;
        ta.fail_at = 0;
        nx_ctx_free(ctx);
        if (ta.live != 0 || ta.size_errors != 0)
            fail_msg("allocation sweep: failing allocation %lld leaked %lld allocations "
                     "(%lld bytes), %lld size mismatches",
                     (long long)n, (long long)ta.live, (long long)ta.live_bytes,
                     (long long)ta.size_errors);
        if (!fired) {
            if (st != NX_OK)
                fail_msg("allocation sweep: the unfailed run returned %s", nx_status_str(st));
            return made;
        }
        if (st != NX_ERR_NOMEM)
            fail_msg("allocation sweep: failing allocation %lld returned %s, expected "
                     "NX_ERR_NOMEM",
                     (long long)n, nx_status_str(st));
    }
    fail_msg("allocation sweep: body still allocating after %lld allocations", (long long)max_n);
    return -1;
}

int nx_test_close(double a, double b, double rtol, double atol)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b))
        return a == b;
    return fabs(a - b) <= atol + rtol * fabs(b);
}

const char *nx_test_data_dir(void)
{
#ifdef NX_TEST_DATA_DIR
    return NX_TEST_DATA_DIR;
#else
    return "tests/data";
#endif
}

nx_tensor *nx_test_load_npy(nx_ctx *ctx, const char *family, const char *name, const char *key)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/%s_%s.npy", nx_test_data_dir(), family, name, key);
    nx_tensor *t = NULL;
    if (nx_npy_read(ctx, path, &t) != NX_OK)
        fail_msg("cannot read %s: %s", path, nx_ctx_last_error(ctx));
    return t;
}

const char *nx_test_golden_dir(void)
{
#ifdef NX_TEST_GOLDEN_DIR
    return NX_TEST_GOLDEN_DIR;
#else
    return "golden";
#endif
}

nx_tensor *nx_test_golden_npy(nx_ctx *ctx, const char *family, const char *name, const char *key)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/%s/%s.npy", nx_test_golden_dir(), family, name, key);
    nx_tensor *t = NULL;
    if (nx_npy_read(ctx, path, &t) != NX_OK)
        fail_msg("cannot read %s: %s", path, nx_ctx_last_error(ctx));
    return t;
}

bool nx_test_golden_field(const char *family, const char *name, const char *key, char *buf,
                          size_t len)
{
    char path[1024], line[1024];
    snprintf(path, sizeof path, "%s/%s/%s/manifest.txt", nx_test_golden_dir(), family, name);
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot read %s", path);
    size_t n = strlen(key);
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, n) || strncmp(line + n, " = ", 3))
            continue;
        char *v = line + n + 3;
        v[strcspn(v, "\n")] = 0;
        snprintf(buf, len, "%s", v);
        found = true;
    }
    fclose(f);
    return found;
}

bool nx_test_golden_option(const char *family, const char *name, const char *opt, char *buf,
                           size_t len)
{
    char opts[1024];
    if (!nx_test_golden_field(family, name, "options", opts, sizeof opts))
        return false;
    size_t n = strlen(opt);
    for (const char *p = opts; *p; p += strcspn(p, " ")) {
        p += strspn(p, " ");
        if (strncmp(p, opt, n) == 0 && p[n] == '=') {
            snprintf(buf, len, "%.*s", (int)strcspn(p + n + 1, " "), p + n + 1);
            return true;
        }
    }
    return false;
}

static int by_name(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

/* Whether word is one of the '|'-separated names of list. */
static bool listed(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list;; p++) {
        size_t len = strcspn(p, "|");
        if (len == n && strncmp(p, word, n) == 0)
            return true;
        p += len;
        if (!*p)
            return false;
    }
}

int nx_test_golden_cases(const char *family, const char *ops, char (*names)[64], int max)
{
    char dir[1024], op[64];
    snprintf(dir, sizeof dir, "%s/%s", nx_test_golden_dir(), family);
    DIR *d = opendir(dir);
    if (!d)
        fail_msg("cannot open %s", dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= 64)
            continue;
        if (!nx_test_golden_field(family, e->d_name, "op", op, sizeof op) || !listed(ops, op))
            continue;
        if (n == max)
            fail_msg("%s: more than %d cases of %s", dir, max, ops);
        snprintf(names[n++], 64, "%.63s", e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, 64, by_name);
    return n;
}
