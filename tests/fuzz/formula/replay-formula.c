/* Runs the formula fuzz property over the committed corpus (tests/fuzz/formula/corpus) in every
 * build. Seeds named seed-* are valid semiring formulas and must be accepted; bad-* are malformed
 * by construction and must be rejected; anything else (inputs the fuzzer found) must only not
 * break the property. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "formula-fuzz.h"

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

static void test_corpus(void **state)
{
    (void)state;
    DIR *d = opendir(NX_FORMULA_CORPUS);
    if (!d)
        fail_msg("cannot open the corpus %s", NX_FORMULA_CORPUS);
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
        snprintf(path, sizeof path, "%s/%s", NX_FORMULA_CORPUS, names[i]);
        size_t len;
        uint8_t *buf = slurp(path, &len);
        char why[1024] = "";
        formula_fuzz_result r = formula_fuzz_one(buf, len, why, sizeof why);
        free(buf);
        if (r == FORMULA_FUZZ_BROKEN)
            fail_msg("%s: %s", names[i], why);
        if (strncmp(names[i], "seed-", 5) == 0 && r != FORMULA_FUZZ_ACCEPTED)
            fail_msg("%s: a valid formula was rejected", names[i]);
        if (strncmp(names[i], "bad-", 4) == 0 && r != FORMULA_FUZZ_REJECTED)
            fail_msg("%s: a malformed input was accepted", names[i]);
        accepted += r == FORMULA_FUZZ_ACCEPTED;
        rejected += r == FORMULA_FUZZ_REJECTED;
        free(names[i]);
    }
    free(names);
    assert_true(count >= 30);
    print_message("%zu corpus inputs: %zu accepted and run, %zu rejected\n", count, accepted,
                  rejected);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_corpus)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
