/* The autodiff pass (passes/autodiff.c: nx_graph_vjp and nx_graph_grad, public in
 * nitrix-graph.h). The adjoint rules it calls and the helpers they share are graph-IR facts and
 * live beside the primitives (ir/adjoint.h); this header is kept for the pass's users. */
#ifndef NX_PASSES_AUTODIFF_H
#define NX_PASSES_AUTODIFF_H

#include "ir/adjoint.h"

#endif /* NX_PASSES_AUTODIFF_H */
