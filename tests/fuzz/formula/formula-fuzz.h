/* The formula-parser fuzz property, shared by the libFuzzer target and the corpus replay test. */
#ifndef NX_FORMULA_FUZZ_H
#define NX_FORMULA_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* Outcome of one input: rejected (a clean parse or definition error with a well-formed message),
 * accepted (the semiring was defined and its matmul ran), or broken, with the reason in why. */
typedef enum formula_fuzz_result {
    FORMULA_FUZZ_REJECTED,
    FORMULA_FUZZ_ACCEPTED,
    FORMULA_FUZZ_BROKEN,
} formula_fuzz_result;

formula_fuzz_result formula_fuzz_one(const uint8_t *data, size_t size, char *why, size_t cap);

#endif
