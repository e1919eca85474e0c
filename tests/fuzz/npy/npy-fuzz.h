/* The .npy fuzz property, shared by the libFuzzer target and the corpus replay test. */
#ifndef NX_NPY_FUZZ_H
#define NX_NPY_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* Outcome of one input: rejected (a clean NX_ERR_PARSE), accepted (read, written, re-read, and the
 * two reads agree), or broken, with the reason in why. */
typedef enum npy_fuzz_result {
    NPY_FUZZ_REJECTED,
    NPY_FUZZ_ACCEPTED,
    NPY_FUZZ_BROKEN,
} npy_fuzz_result;

npy_fuzz_result npy_fuzz_one(const uint8_t *data, size_t size, char *why, size_t cap);

#endif
