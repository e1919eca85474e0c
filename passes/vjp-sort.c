/* Adjoint rules of sort and extern.
 *
 *   sort    dx = scatter-add of dy by the permutation (argsort with the same axis, order and k):
 *           element j of a sorted line came from position perm[j], so the flat offset of x it was
 *           read from is built from the other axes' coordinates and perm; top-k's dropped
 *           elements get 0
 *   extern  the definition's own vjp callback; NULL is NX_ERR_UNSUPPORTED (checked by the walk) */
#include "passes/autodiff.h"

nx_status nx_ir_vjp_sort(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    nx_node x = v.ops[0];
    int axis = (int)v.a[0], nd = v.n.ndim;
    nx_node perm = nx_ir_make(g, "nx_graph_vjp", NX_PRIM_ARGSORT, 1, &x, 3, v.a, 0, NULL);
    int64_t xs[NX_MAX_DIMS];
    nx_node_shape(g, x, xs);
    nx_node coords[NX_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        coords[d] = d == axis ? perm : nx_ir_ad_iota(g, nd, v.n.shape, d);
    dx[0] = nx_ir_ad_scatter_flat(g, x, nx_ir_ad_flat_index(g, nd, xs, coords), dy);
    return NX_OK;
}

nx_status nx_ir_vjp_extern(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    const nx_extern_def *def = (const nx_extern_def *)(intptr_t)v.a[0];
    nx_status st = def->vjp(def->user, g, (int)v.n.nops, v.ops, y, dy, dx);
    if (st != NX_OK && g->status == NX_OK)
        return nx_rt_error(nx_graph_ctx(g), st, "nx_graph_vjp: the vjp of extern %s failed: %s",
                           def->name ? def->name : "(unnamed)", nx_ctx_last_error(nx_graph_ctx(g)));
    return st;
}
