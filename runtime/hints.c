/* The backends' hints (hints.h), one row per backend. The numbers are measurements at 256^3 f32;
 * they move into each backend's registry entry with the program layer.
 *
 *   cpu   FIR as sums of shifted slices (up to NX_GAUSS_FIR_SLICE_TAPS = 65 taps) 2.0-2.6 ms per
 *         tap and axis (sigma 4 0.18-0.21 s CPU, sigma 8 0.50-0.52 s, load 11); beyond, window
 *         folds 5.8-7.0 ms per tap and axis (sigma 12: 1.70 s, sigma 16: 2.72 s), so a fold tap
 *         costs 2.5 slice taps; the recursive Gaussian on scan_iir 0.34-0.36 s (sigma 8) to 0.42 s
 *         (sigma 4) for three axes, ~55 slice taps per axis (was ~150 before scan_iir). So the
 *         Gaussian's auto is fir up to sigma 6 (49 taps at truncate 4), recursive from sigma 7 (57
 *         taps). The padded form: one fused program inlines the border rule into every tap's load,
 *         an i64 mod and a select per tap and lane along the contiguous axis; padded first, the
 *         loads are affine and vectorise.
 *   cuda  with the emitter's rows per thread (on by default since 4309970): FIR 17 taps 0.199 ms,
 *         the recursive Gaussian on scan_iir (sigma 8) 0.614 ms on the H200 (docs/PERF.md): ~52
 *         taps per axis, so fir up to sigma 6 (49 taps), recursive from sigma 7, assuming the FIR's
 *         time grows with its taps (measured at 17 taps only); window folds and slices cost the
 *         same per tap. Every pass as slices with the weights as immediates, the passes before the
 *         last materialised (docs/perf/cuda-fir.md): the passes are bound by load instructions and
 *         L1 wavefronts, and this form saves the weight loads and the weight-cast kernel.
 *   ref   the interpreter is the oracle, not a fast path: the CPU's costs, no padded form (its
 *         programs gain nothing from it). */
#include <string.h>

#include "hints.h"

static const nx_backend_hints cpu = {
    .fir_pad_first = true,
    .fir_slices_every_axis = false,
    .fir_fold_tap_cost = 2.5,
    .recursive_axis_taps = 55.0,
};

static const nx_backend_hints cuda = {
    .fir_pad_first = false,
    .fir_slices_every_axis = true,
    .fir_fold_tap_cost = 1.0,
    .recursive_axis_taps = 52.0,
};

static const nx_backend_hints ref = {
    .fir_pad_first = false,
    .fir_slices_every_axis = false,
    .fir_fold_tap_cost = 2.5,
    .recursive_axis_taps = 55.0,
};

void nx_backend_hints_get(const nx_ctx *ctx, nx_backend b, nx_backend_hints *out)
{
    (void)ctx;
    *out = b == NX_BACKEND_CUDA ? cuda : b == NX_BACKEND_REF ? ref : cpu;
}
