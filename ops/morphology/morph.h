/* Internal builders shared by the morphology files (ops/morphology). */
#ifndef NX_OPS_MORPH_H
#define NX_OPS_MORPH_H

#include "internal.h"
#include "nitrix-graph.h"

/* The squared-distance passes of the exact EDT from a field (0 at sources, +inf elsewhere) and a
 * square root: the separable min-plus driver (distance.c) and the lower-envelope extern (edt.c).
 * sampling NULL: all 1. */
NX_HIDDEN nx_node nx_morph_edt_separable_node(nx_graph *g, nx_node field, const double *sampling);
NX_HIDDEN nx_node nx_morph_edt_fast_node(nx_graph *g, nx_node field, const double *sampling);
/* The fast driver's device chain from a mask (0 at sources): a pass along axis 0, then a window
 * pass per later axis, each an extern with CUDA code (edt.c). */
NX_HIDDEN nx_node nx_morph_edt_device_node(nx_graph *g, nx_node mask, const double *sampling);

/* The element of the given rank (0-based, numpy's order: NaN last) of count same-shaped values,
 * elementwise, by a pruned sorting network of minimum/maximum (median-net.c). */
#define NX_MORPH_NET_MAX 64
NX_HIDDEN nx_node nx_morph_select_rank(nx_graph *g, int count, const nx_node *values, int rank);

#endif
