/* The reference interpreter (backend `ref`): the program layer (program/compile.c) calls it for
 * programs compiled for `ref` and for those no backend can lower.
 *
 * It walks the value nodes of a store in the order given (ascending ids, which are topological),
 * computes each with its primitive's reference kernel over C-contiguous host tensors, and frees
 * every intermediate after its last reader. Nodes the outputs do not need are never evaluated. */
#include <string.h>

#include "ir.h"

void nx_ir_last_use(const nx_ir_store *s, uint32_t norder, const nx_node *order, int noutputs,
                    const nx_node *outputs, uint32_t *last_use)
{
    for (nx_node id = 0; id <= s->n; id++)
        last_use[id] = 0;
    for (uint32_t pos = 0; pos < norder; pos++) {
        const nx_ir_node *n = &s->nodes[order[pos]];
        const nx_node *ops = nx_ir_node_ops(s, n);
        int nv = nx_ir_num_valops(n);
        for (int k = 0; k < nv; k++)
            last_use[ops[k]] = pos;
    }
    for (int i = 0; i < noutputs; i++)
        last_use[outputs[i]] = NX_IR_KEEP;
}

static nx_status eval_node(const nx_ir_eval *ev, nx_node id, nx_tensor **vals)
{
    const nx_ir_store *s = ev->s;
    const nx_ir_node *n = &s->nodes[id];
    int nv = nx_ir_num_valops(n);
    const nx_tensor *small[8];
    const nx_tensor **ins = small;
    size_t bytes = (size_t)nv * sizeof *ins;
    if (nv > 8 && !(ins = nx_rt_alloc(ev->ctx, bytes)))
        return nx_rt_nomem(ev->ctx, "nx_program_run", bytes);
    const nx_node *ops = nx_ir_node_ops(s, n);
    for (int k = 0; k < nv; k++)
        ins[k] = vals[ops[k]];
    nx_ir_sig sig;
    nx_ir_sig_of(s, id, &sig);
    nx_tensor *out = NULL;
    nx_status st = nx_ir_tensor_new(ev->ctx, &sig, &out);
    if (st == NX_OK)
        st = nx_ir_prims[n->op].ref(ev, n, ins, out);
    if (ins != small)
        nx_rt_free(ev->ctx, (void *)ins, bytes);
    if (st != NX_OK) {
        nx_tensor_free(out);
        return st;
    }
    vals[id] = out;
    return NX_OK;
}

static void release_dead(const nx_ir_store *s, const nx_node *order, const uint32_t *last_use,
                         uint32_t pos, nx_tensor **vals)
{
    const nx_ir_node *n = &s->nodes[order[pos]];
    const nx_node *ops = nx_ir_node_ops(s, n);
    int nv = nx_ir_num_valops(n);
    for (int k = 0; k < nv; k++) {
        if (last_use[ops[k]] == pos && vals[ops[k]]) {
            nx_tensor_free(vals[ops[k]]);
            vals[ops[k]] = NULL;
        }
    }
}

nx_status nx_ir_interpret(nx_ctx *ctx, const nx_ir_store *s, uint32_t norder, const nx_node *order,
                          const uint32_t *last_use, int noutputs, const nx_node *outputs,
                          const nx_tensor *const *inputs, nx_tensor **results)
{
    size_t slots = (size_t)s->n + 1;
    nx_tensor **vals = nx_rt_calloc(ctx, slots, sizeof *vals);
    if (!vals)
        return nx_rt_nomem(ctx, "nx_program_run", slots * sizeof *vals);
    nx_ir_eval ev = {ctx, s, inputs};
    nx_status st = NX_OK;
    for (uint32_t pos = 0; st == NX_OK && pos < norder; pos++) {
        st = eval_node(&ev, order[pos], vals);
        if (st == NX_OK)
            release_dead(s, order, last_use, pos, vals);
    }
    for (int i = 0; st == NX_OK && i < noutputs; i++)
        st = nx_ir_tensor_contiguous_copy(ctx, vals[outputs[i]], &results[i]);
    for (size_t i = 0; i < slots; i++)
        nx_tensor_free(vals[i]);
    nx_rt_free(ctx, vals, slots * sizeof *vals);
    return st;
}
