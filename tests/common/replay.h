/* Replays a fuzz target's committed corpus as an ordinary test. Inputs are visited in name order;
 * seed-* must be accepted, bad-* must be rejected, anything else (inputs a fuzzer found) must only
 * not break the property. */
#ifndef NX_TEST_REPLAY_H
#define NX_TEST_REPLAY_H

#include <stddef.h>
#include <stdint.h>

typedef enum nx_replay_result {
    NX_REPLAY_ACCEPTED,
    NX_REPLAY_REJECTED,
    NX_REPLAY_BROKEN, /* the property failed: why says how */
} nx_replay_result;

typedef nx_replay_result (*nx_replay_fn)(const uint8_t *buf, size_t len, char *why, size_t n);

/* Fails the test on a broken property, a rejected seed, an accepted bad input, or fewer than
 * min_count inputs. seed_what names the seeds in messages ("a NumPy-written file"). */
void nx_test_replay_corpus(const char *dir, nx_replay_fn fn, const char *seed_what,
                           size_t min_count);

#endif
