/* Reverse-mode autodiff as a source transformation: nx_graph_vjp walks the nodes between the
 * outputs and the wrt nodes in reverse topological order (the arena is topological, so that is
 * descending id) and asks each node's adjoint rule for its operands' cotangents, adding the
 * contributions of several users. The cotangents are ordinary nodes of the same graph, so they
 * compile and run like any value and can be differentiated again.
 *
 * Zero cotangents are NX_NONE and never become nodes: a node nobody differentiable reads costs
 * nothing, and the rules never see a zero. Nodes whose value is not float, and primitives flagged
 * non-differentiable (comparisons, floor, argsort, integer casts...), pass no cotangent on. */
#include <stdarg.h>
#include <string.h>

#include "passes/autodiff.h"

/* ---- the transformation --------------------------------------------------------------------*/

typedef struct walk {
    nx_graph *g;
    uint32_t n0;     /* nodes that existed before the walk */
    uint8_t *needed; /* on a path from a wrt node to an output */
    nx_node *ct;     /* accumulated cotangent per node, NX_NONE = zero */
} walk;

static bool shape_equal(const nx_graph *g, nx_node a, nx_node b)
{
    const nx_ir_node *x = nx_ir_node_at(&g->s, a), *y = nx_ir_node_at(&g->s, b);
    return x->dtype == y->dtype && x->ndim == y->ndim &&
           memcmp(x->shape, y->shape, (size_t)x->ndim * sizeof *x->shape) == 0;
}

static nx_status graph_status(nx_graph *g, const char *fn)
{
    if (g->status == NX_OK)
        return NX_OK;
    return nx_rt_error(g->s.ctx, g->status, "%s: %s", fn, g->msg);
}

/* Forward reach from the wrt nodes meets backward reach from the outputs. */
static void mark_needed(walk *w, int n_out, const nx_node *outs, int n_wrt, const nx_node *wrt)
{
    const nx_ir_store *s = &w->g->s;
    uint8_t *fwd = w->needed;
    uint32_t lo = w->n0 + 1;
    for (int i = 0; i < n_wrt; i++) {
        fwd[wrt[i]] |= 1;
        lo = wrt[i] < lo ? wrt[i] : lo;
    }
    for (uint32_t id = lo; id <= w->n0; id++) {
        const nx_ir_node *n = nx_ir_node_at(s, id);
        const nx_node *ops = nx_ir_node_ops(s, n);
        for (int k = 0; k < nx_ir_num_valops(n) && !(fwd[id] & 1); k++)
            fwd[id] |= fwd[ops[k]] & 1;
    }
    for (int i = 0; i < n_out; i++)
        fwd[outs[i]] |= 2;
    for (uint32_t id = w->n0; id >= 1; id--) {
        if (!(fwd[id] & 2))
            continue;
        const nx_ir_node *n = nx_ir_node_at(s, id);
        const nx_node *ops = nx_ir_node_ops(s, n);
        for (int k = 0; k < nx_ir_num_valops(n); k++)
            fwd[ops[k]] |= 2;
    }
    for (uint32_t id = 1; id <= w->n0; id++)
        fwd[id] = fwd[id] == 3;
}

static nx_status accumulate(walk *w, nx_node target, nx_node d, const char *who)
{
    nx_graph *g = w->g;
    if (!d || !w->needed[target] || !nx_ir_is_float(nx_node_dtype(g, target)))
        return NX_OK;
    if (!shape_equal(g, target, d)) {
        char a[160], b[160];
        const nx_ir_node *t = nx_ir_node_at(&g->s, target), *x = nx_ir_node_at(&g->s, d);
        return nx_rt_error(g->s.ctx, NX_ERR_INTERNAL,
                           "nx_graph_vjp: the adjoint of %s gave %s%s for an operand of %s%s",
                           who, nx_dtype_name((nx_dtype)x->dtype),
                           nx_shape_str(a, sizeof a, x->ndim, x->shape),
                           nx_dtype_name((nx_dtype)t->dtype),
                           nx_shape_str(b, sizeof b, t->ndim, t->shape));
    }
    w->ct[target] = w->ct[target] ? nx_add(g, w->ct[target], d) : d;
    return graph_status(g, "nx_graph_vjp");
}

/* Whether the cotangent stops at id by definition (flagged primitive, non-float value or
 * operand of a float-only row). Externs without a vjp and rows without a rule are errors. */
static bool stops(const nx_graph *g, nx_node id)
{
    const nx_ir_node *n = nx_ir_node_at(&g->s, id);
    const nx_ir_prim_info *r = &nx_ir_prims[n->op];
    if (r->adj == NX_ADJ_NONE || !nx_ir_is_float((nx_dtype)n->dtype))
        return true;
    if (r->adj == NX_ADJ_FLOAT && n->nops > 0)
        return !nx_ir_is_float(nx_node_dtype(g, nx_ir_node_ops(&g->s, n)[0]));
    return false;
}

static nx_status step(walk *w, nx_node id)
{
    nx_graph *g = w->g;
    const nx_ir_node *n = nx_ir_node_at(&g->s, id);
    int op = n->op, nv = nx_ir_num_valops(n);
    if (stops(g, id))
        return NX_OK;
    nx_ir_vjp_fn rule = nx_ir_prims[op].vjp;
    if (op == NX_PRIM_EXTERN) {
        const nx_extern_def *def = (const nx_extern_def *)(intptr_t)nx_ir_node_attrs(&g->s, n)[0];
        if (!def->vjp)
            return nx_ir_ad_unsupported(g,
                                        "nx_graph_vjp: extern %s (node %%%u) has no vjp; expected "
                                        "nx_extern_def.vjp set to differentiate through it",
                                        def->name ? def->name : "(unnamed)", (unsigned)id);
    }
    if (!rule)
        return nx_ir_ad_unsupported(g,
                                    "nx_graph_vjp: primitive %s (node %%%u) has no adjoint rule "
                                    "and is not flagged non-differentiable",
                                    nx_ir_prim_name(op), (unsigned)id);
    nx_node dx[NX_IR_AD_MAX_OPS] = {0};
    nx_node ops[NX_IR_AD_MAX_OPS];
    memcpy(ops, nx_ir_node_ops(&g->s, n), (size_t)nv * sizeof *ops);
    nx_status st = rule(g, id, w->ct[id], dx);
    if (st != NX_OK)
        return st;
    st = graph_status(g, "nx_graph_vjp");
    for (int k = 0; k < nv && st == NX_OK; k++)
        st = accumulate(w, ops[k], dx[k], nx_ir_prim_name(op));
    return st;
}

static nx_status run_walk(walk *w, int n_out, const nx_node *outs, const nx_node *cts, int n_wrt,
                          const nx_node *wrt, nx_node *grads)
{
    nx_graph *g = w->g;
    mark_needed(w, n_out, outs, n_wrt, wrt);
    nx_status st = NX_OK;
    for (int i = 0; i < n_out && st == NX_OK; i++)
        st = accumulate(w, outs[i], cts[i], "an output");
    for (uint32_t id = w->n0; id >= 1 && st == NX_OK; id--) {
        if (w->needed[id] && w->ct[id])
            st = step(w, id);
    }
    for (int i = 0; i < n_wrt && st == NX_OK; i++) {
        grads[i] = w->ct[wrt[i]] ? w->ct[wrt[i]] : nx_ir_ad_zeros(g, wrt[i]);
        st = graph_status(g, "nx_graph_vjp");
    }
    return st;
}

static nx_status check_handle(nx_graph *g, const char *fn, const char *what, int i, nx_node n,
                              bool float_only)
{
    if (n < 1 || n > g->s.n)
        return nx_rt_error(g->s.ctx, NX_ERR_INVALID_ARG,
                           "%s: %s %d is handle %u, but the graph has nodes 1..%u", fn, what, i,
                           (unsigned)n, (unsigned)g->s.n);
    nx_dtype d = nx_node_dtype(g, n);
    if (float_only && !nx_ir_is_float(d))
        return nx_rt_error(g->s.ctx, NX_ERR_DTYPE,
                           "%s: %s %d (node %%%u) is %s; expected a float node (integer and bool "
                           "values carry no gradient)",
                           fn, what, i, (unsigned)n, nx_dtype_name(d));
    return NX_OK;
}

static nx_status check_args(nx_graph *g, const char *fn, int n_out, const nx_node *outs,
                            const nx_node *cts, int n_wrt, const nx_node *wrt, nx_node *grads)
{
    if (!g)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: the graph is NULL", fn);
    if (g->status != NX_OK)
        return nx_rt_error(g->s.ctx, g->status, "%s: the graph holds an earlier error: %s", fn,
                           g->msg);
    if (n_out < 1 || !outs || !cts || n_wrt < 1 || !wrt || !grads)
        return nx_rt_error(g->s.ctx, NX_ERR_INVALID_ARG,
                           "%s: expected n_outputs >= 1, n_wrt >= 1 and non-NULL outputs, "
                           "cotangents, wrt and grads_out (got %d outputs, %d wrt)",
                           fn, n_out, n_wrt);
    for (int i = 0; i < n_wrt; i++) {
        nx_status st = check_handle(g, fn, "wrt", i, wrt[i], true);
        if (st != NX_OK)
            return st;
        grads[i] = NX_NONE;
    }
    for (int i = 0; i < n_out; i++) {
        nx_status st = check_handle(g, fn, "output", i, outs[i], false);
        if (st == NX_OK && cts[i])
            st = check_handle(g, fn, "cotangent", i, cts[i], true);
        if (st == NX_OK && cts[i] && !shape_equal(g, outs[i], cts[i]))
            st = nx_rt_error(g->s.ctx, NX_ERR_SHAPE,
                             "%s: cotangent %d (node %%%u) differs from output %d (node %%%u) in "
                             "dtype or shape; expected exactly the output's",
                             fn, i, (unsigned)cts[i], i, (unsigned)outs[i]);
        if (st != NX_OK)
            return st;
    }
    return NX_OK;
}

nx_status nx_graph_vjp(nx_graph *g, int n_outputs, const nx_node *outputs,
                       const nx_node *cotangents, int n_wrt, const nx_node *wrt,
                       nx_node *grads_out)
{
    nx_status st =
        check_args(g, "nx_graph_vjp", n_outputs, outputs, cotangents, n_wrt, wrt, grads_out);
    if (st != NX_OK)
        return st;
    walk w = {.g = g, .n0 = g->s.n};
    size_t n = (size_t)w.n0 + 1;
    w.needed = nx_rt_calloc(g->s.ctx, n, sizeof *w.needed);
    w.ct = w.needed ? nx_rt_calloc(g->s.ctx, n, sizeof *w.ct) : NULL;
    if (!w.ct)
        st = nx_rt_nomem(g->s.ctx, "nx_graph_vjp", n * (sizeof *w.ct + 1));
    else
        st = run_walk(&w, n_outputs, outputs, cotangents, n_wrt, wrt, grads_out);
    nx_rt_free(g->s.ctx, w.ct, w.ct ? n * sizeof *w.ct : 0);
    nx_rt_free(g->s.ctx, w.needed, w.needed ? n : 0);
    if (st != NX_OK) {
        for (int i = 0; i < n_wrt; i++)
            grads_out[i] = NX_NONE;
    }
    return st;
}

nx_status nx_graph_grad(nx_graph *g, nx_node scalar_output, int n_wrt, const nx_node *wrt,
                        nx_node *grads_out)
{
    const char *fn = "nx_graph_grad";
    if (!g)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: the graph is NULL", fn);
    nx_status st = g->status == NX_OK ? check_handle(g, fn, "output", 0, scalar_output, true)
                                      : nx_rt_error(g->s.ctx, g->status,
                                                    "%s: the graph holds an earlier error: %s",
                                                    fn, g->msg);
    if (st != NX_OK)
        return st;
    const nx_ir_node *n = nx_ir_node_at(&g->s, scalar_output);
    if (nx_ir_numel(n->ndim, n->shape) != 1) {
        char b[160];
        return nx_rt_error(g->s.ctx, NX_ERR_SHAPE,
                           "%s: the output (node %%%u) has shape %s; expected one element (use "
                           "nx_graph_vjp for other shapes)",
                           fn, (unsigned)scalar_output, nx_shape_str(b, sizeof b, n->ndim, n->shape));
    }
    int64_t shape[NX_MAX_DIMS];
    nx_node_shape(g, scalar_output, shape);
    nx_node one = nx_broadcast(g, nx_ir_ad_scalar(g, scalar_output, 1.0),
                               nx_node_ndim(g, scalar_output), shape);
    if (!one)
        return graph_status(g, fn);
    return nx_graph_vjp(g, 1, &scalar_output, &one, n_wrt, wrt, grads_out);
}
