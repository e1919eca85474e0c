/* Runs the formula fuzz property over the committed corpus (tests/fuzz/formula/corpus) in every
 * build. Seeds named seed-* are valid semiring formulas and must be accepted (and run); bad-* are
 * malformed by construction and must be rejected. */
#include "formula-fuzz.h"
#include "replay.h"
#include "testutil.h"

static nx_replay_result one(const uint8_t *buf, size_t len, char *why, size_t n)
{
    formula_fuzz_result r = formula_fuzz_one(buf, len, why, n);
    return r == FORMULA_FUZZ_ACCEPTED   ? NX_REPLAY_ACCEPTED
           : r == FORMULA_FUZZ_REJECTED ? NX_REPLAY_REJECTED
                                        : NX_REPLAY_BROKEN;
}

static void test_corpus(void **state)
{
    (void)state;
    nx_test_replay_corpus(NX_FORMULA_CORPUS, one, "a valid formula", 30);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_corpus)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
