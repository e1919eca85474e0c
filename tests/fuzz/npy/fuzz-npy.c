/* libFuzzer target for the .npy reader and writer (built with -Dfuzz=true and CC=clang). */
#include <stdio.h>
#include <stdlib.h>

#include "npy-fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[1024];
    if (npy_fuzz_one(data, size, why, sizeof why) == NPY_FUZZ_BROKEN) {
        fprintf(stderr, "npy fuzz property broken: %s\n", why);
        abort();
    }
    return 0;
}
