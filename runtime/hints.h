/* Backend hints: what a backend reports about the graph forms it runs fastest, so that an op picks
 * a form by reading data instead of naming a backend. An op asks for the hints of the backend its
 * call was placed on (nx_op_call.backend) and builds its graph from them; the op itself holds no
 * per-backend constant and includes no backend header.
 *
 * Today the table is here, keyed by the backend enum; when the program layer's backend registry
 * lands, each backend's entry reports its own hints and nx_backend_hints_get asks it. Every field
 * has a meaning on every backend (a backend that has no preference reports the neutral value), and
 * the hints never change results, only which of several equal graphs an op builds (the Gaussian's
 * FIR forms give the same values). A hint never picks a driver: a driver whose results
 * differ is the divergent-op registry's choice, and `auto` there is the canonical one unless the
 * fast one is within NX_DIVERGENT_AUTO_TOL of it. Not installed. */
#ifndef NX_RUNTIME_HINTS_H
#define NX_RUNTIME_HINTS_H

#include <stdbool.h>

#include "internal.h"

typedef struct nx_backend_hints {
    /* Separable FIR passes with constant weights (the Gaussian's). */
    /* Pad the image on every axis at once in a program of its own, then run every pass as a sum of
     * shifted slices over VALID windows: when the border rule inlined into each tap's load costs
     * more than a second program (the CPU backend: it makes each load a gather). */
    bool fir_pad_first;
    /* Every pass a sum of shifted slices, each pass before the last materialised as its own kernel
     * (instead of window folds for the passes before the last). */
    bool fir_slices_every_axis;
} nx_backend_hints;

/* The hints of backend b (cpu, cuda or ref; auto and out-of-range values get the CPU's, which are
 * also the reference interpreter's: it is the oracle, not a fast path). ctx may carry options that
 * change a backend's hints later; today none does. */
NX_HIDDEN void nx_backend_hints_get(const nx_ctx *ctx, nx_backend b, nx_backend_hints *out);

#endif /* NX_RUNTIME_HINTS_H */
