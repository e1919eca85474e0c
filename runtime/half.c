/* f16/bf16 conversions (placeholder until implemented). */
#include "internal.h"

uint16_t nx_f32_to_f16(float x) { (void)x; return 0x7e00; }
uint16_t nx_f64_to_f16(double x) { (void)x; return 0x7e00; }
float nx_f16_to_f32(uint16_t h) { (void)h; return 0.0f; }
uint16_t nx_f32_to_bf16(float x) { (void)x; return 0x7fc0; }
uint16_t nx_f64_to_bf16(double x) { (void)x; return 0x7fc0; }
float nx_bf16_to_f32(uint16_t b) { (void)b; return 0.0f; }
