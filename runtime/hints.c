/* The backends' hints (hints.h), one row per backend; they move into each backend's registry
 * entry with the program layer.
 *
 *   cpu   the padded form: one fused program inlines the border rule into every tap's load, an
 *         i64 mod and a select per tap and lane along the contiguous axis; padded first, the loads
 *         are affine and vectorise.
 *   cuda  every pass as slices with the weights as immediates, the passes before the last
 *         materialised (docs/perf/cuda-fir.md): the passes are bound by load instructions and L1
 *         wavefronts, and this form saves the weight loads and the weight-cast kernel.
 *   ref   the interpreter is the oracle, not a fast path: no padded form (its programs gain
 *         nothing from it).
 *
 * No hint prices one driver against another: the recursive Gaussian is cheaper than the FIR from
 * sigma 7 (55 slice taps per axis on the CPU, 52 on CUDA, measured at 256^3 f32), but differs from
 * scipy by up to 0.07 of the data's range, so `auto` stays the FIR (docs/smoothing.md). */
#include <string.h>

#include "hints.h"

static const nx_backend_hints cpu = {
    .fir_pad_first = true,
    .fir_slices_every_axis = false,
};

static const nx_backend_hints cuda = {
    .fir_pad_first = false,
    .fir_slices_every_axis = true,
};

static const nx_backend_hints ref = {
    .fir_pad_first = false,
    .fir_slices_every_axis = false,
};

void nx_backend_hints_get(const nx_ctx *ctx, nx_backend b, nx_backend_hints *out)
{
    (void)ctx;
    *out = b == NX_BACKEND_CUDA ? cuda : b == NX_BACKEND_REF ? ref : cpu;
}
