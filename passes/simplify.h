/* The simplification pass (passes/simplify.c): local rewrites, constant folding and CSE through
 * hash-consing over the subgraph of some outputs. */
#ifndef NX_PASSES_SIMPLIFY_H
#define NX_PASSES_SIMPLIFY_H

#include "ir/ir.h"
#include "nitrix-graph.h"

/* Rebuilds the outputs' subgraph of g with the rewrites listed in passes/simplify.c and replaces
 * outputs[i] with the simplified handles (same dtypes, shapes and values). Nodes are appended to
 * g; the old ones stay in the arena, and compile copies only what the outputs reach. On failure
 * (allocation) the graph records the error and outputs are left as they were. */
NX_HIDDEN nx_status nx_pass_simplify(nx_graph *g, int n, nx_node *outputs);
/* The number of nodes the outputs reach (what compile would copy), into *count. */
NX_HIDDEN nx_status nx_pass_count_live(nx_graph *g, int n, const nx_node *outputs,
                                       uint32_t *count);

#endif /* NX_PASSES_SIMPLIFY_H */
