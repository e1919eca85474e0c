/* libFuzzer target for the formula parser (built with -Dfuzz=true and CC=clang). */
#include <stdio.h>
#include <stdlib.h>

#include "formula-fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[1024];
    if (formula_fuzz_one(data, size, why, sizeof why) == FORMULA_FUZZ_BROKEN) {
        fprintf(stderr, "formula fuzz property broken: %s\n", why);
        abort();
    }
    return 0;
}
