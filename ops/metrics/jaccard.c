/* The op `jaccard`: the soft Jaccard index (intersection over union, spec §4.10, api-b §4.1) of
 * probabilities pred and a target in [0, 1], per region
 *   jaccard = (sum(p t) + s) / (sum(p) + sum(t) - sum(p t) + s),   s = smooth,
 * summed over `axis` (every axis when not given), then the family's reduction (none by default;
 * the JAX version defaulted to mean: CHANGELOG.md). jaccard = dice / (2 - dice) at s = 0. An IR
 * graph, differentiable in pred and target. With smooth > 0 an empty pair scores 1; with
 * smooth = 0 it is NaN. */
#include "ops/metrics/overlap.h"

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_overlap_args *o = c->opts;
    nx_dtype dt = nx_tensor_dtype(c->in[0]);
    nx_node inter = NX_NONE, mag = NX_NONE;
    nx_status st = nx_overlap_sums(g, c, &inter, &mag);
    if (st != NX_OK)
        return st;
    nx_node s = nx_scalar(g, dt, o->smooth);
    nx_node uni = nx_sub(g, mag, inter);
    nx_node coeff = nx_div(g, nx_add(g, inter, s), nx_add(g, uni, s));
    outs[0] = nx_metric_reduce(g, coeff, NX_NONE, (nx_metric_reduction)o->reduction);
    return nx_graph_status(g);
}

const nx_op_desc nx_op_jaccard = {
    .info = {.nopts = 3, .opts = nx_overlap_schema},
    .opts_size = sizeof(nx_overlap_args),
    .fields = nx_overlap_fields,
    .backend_offset = offsetof(nx_overlap_args, backend),
    .check = nx_overlap_check,
    .build = build,
    .golden = "metrics",
    .tols = nx_overlap_tols,
    .ntols = 2,
};
