/* Runs the .npy fuzz property over the committed corpus (tests/fuzz/npy/corpus) in every build.
 * Seeds named seed-* are NumPy-written files and must be accepted (and round-trip); bad-* are
 * malformed by construction and must be rejected. */
#include "npy-fuzz.h"
#include "replay.h"
#include "testutil.h"

static nx_replay_result one(const uint8_t *buf, size_t len, char *why, size_t n)
{
    npy_fuzz_result r = npy_fuzz_one(buf, len, why, n);
    return r == NPY_FUZZ_ACCEPTED   ? NX_REPLAY_ACCEPTED
           : r == NPY_FUZZ_REJECTED ? NX_REPLAY_REJECTED
                                    : NX_REPLAY_BROKEN;
}

static void test_corpus(void **state)
{
    (void)state;
    nx_test_replay_corpus(NX_NPY_CORPUS, one, "a NumPy-written file", 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_corpus)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
