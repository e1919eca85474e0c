/* The C peer of the JIT-ed max-plus kernel, built twice by meson.build: gcc -O3 (x86-64 baseline)
 * and gcc -O3 -march=native. PEER is the function's name. */
#include <stdint.h>

void PEER(float *restrict out, const float *restrict a, const float *restrict b, int64_t n);

void PEER(float *restrict out, const float *restrict a, const float *restrict b, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float s = a[i] + b[i];
        out[i] = out[i] > s ? out[i] : s;
    }
}
