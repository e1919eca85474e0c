/* The C peers of the JIT-ed max-plus kernel and sum, built twice by meson.build: gcc -O3 (x86-64
 * baseline) and gcc -O3 -march=native. PEER and PEER_SUM are the functions' names. The sum keeps
 * C's order (no -ffast-math), so gcc does not vectorise it. */
#include <stdint.h>

void PEER(float *restrict out, const float *restrict a, const float *restrict b, int64_t n);

void PEER(float *restrict out, const float *restrict a, const float *restrict b, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float s = a[i] + b[i];
        out[i] = out[i] > s ? out[i] : s;
    }
}

float PEER_SUM(const float *restrict a, int64_t n);

float PEER_SUM(const float *restrict a, int64_t n)
{
    float s = 0;
    for (int64_t i = 0; i < n; i++)
        s += a[i];
    return s;
}
