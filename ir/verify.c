/* The verifier: re-derives every node's dtype and shape from its operands and attributes with the
 * primitive's own shape rule, and checks the store's structure (op range, arity, operand handles
 * pointing to earlier nodes, attribute and blob ranges). Builders only make verifiable nodes; the
 * verifier guards the passes, which build stores by other means. */
#include <string.h>

#include "ir.h"

static nx_status bad(nx_ctx *ctx, const char *who, nx_node id, const char *name, const char *what)
{
    return nx_rt_error(ctx, NX_ERR_INTERNAL, "%s: %%%u (%s): %s", who, (unsigned)id, name, what);
}

static nx_status check_structure(nx_ctx *ctx, const nx_ir_store *s, const char *who, nx_node id)
{
    const nx_ir_node *n = &s->nodes[id];
    char buf[160];
    if (n->op >= NX_PRIM_COUNT) {
        snprintf(buf, sizeof buf, "op %u is not a primitive", (unsigned)n->op);
        return bad(ctx, who, id, "?", buf);
    }
    const nx_ir_prim_info *row = &nx_ir_prims[n->op];
    if (row->arity >= 0 && n->nops != (uint32_t)row->arity) {
        snprintf(buf, sizeof buf, "%u operands; expected %d", (unsigned)n->nops, row->arity);
        return bad(ctx, who, id, row->name, buf);
    }
    if ((size_t)n->ops + n->nops > s->noperands || (size_t)n->attrs + n->nattrs > s->nattrs ||
        n->blob + n->nblob > s->nblob || n->blob + n->nblob < n->blob)
        return bad(ctx, who, id, row->name, "operand, attribute or blob range outside the store");
    if (n->ndim > NX_MAX_DIMS || n->dtype >= NX_DTYPE_COUNT)
        return bad(ctx, who, id, row->name, "ndim or dtype out of range");
    const nx_node *ops = nx_ir_node_ops(s, n);
    for (uint32_t k = 0; k < n->nops; k++) {
        if (ops[k] == NX_NONE || ops[k] >= id) {
            snprintf(buf, sizeof buf,
                     "operand %u is %%%u; expected an earlier node (the arena is topologically "
                     "ordered)",
                     (unsigned)k + 1, (unsigned)ops[k]);
            return bad(ctx, who, id, row->name, buf);
        }
    }
    return NX_OK;
}

static nx_status rederive(nx_ctx *ctx, const nx_ir_store *s, const char *who, nx_node id)
{
    const nx_ir_node *n = &s->nodes[id];
    const nx_ir_prim_info *row = &nx_ir_prims[n->op];
    size_t bytes = (size_t)n->nops * sizeof(nx_ir_sig);
    nx_ir_sig *ins = nx_rt_alloc(ctx, bytes);
    if (!ins)
        return nx_rt_nomem(ctx, who, bytes);
    const nx_node *ops = nx_ir_node_ops(s, n);
    for (uint32_t k = 0; k < n->nops; k++)
        nx_ir_sig_of(s, ops[k], &ins[k]);
    char fn[96];
    snprintf(fn, sizeof fn, "%s: %%%u (%s)", who, (unsigned)id, row->name);
    nx_ir_check ck = {.fn = fn};
    nx_ir_proto p = {(nx_prim)n->op, (int)n->nops,           ops,      ins,
                     (int)n->nattrs, nx_ir_node_attrs(s, n), n->nblob, nx_ir_node_blob(s, n)};
    nx_ir_sig out;
    memset(&out, 0, sizeof out);
    nx_status st = nx_ir_check_common(&ck, &p);
    if (st == NX_OK)
        st = row->shape(&ck, s, &p, &out);
    if (st == NX_OK)
        st = nx_ir_check_result(&ck, &out);
    nx_rt_free(ctx, ins, bytes);
    if (st != NX_OK)
        return nx_rt_error(ctx, st, "%s", ck.msg);
    nx_ir_sig have;
    nx_ir_sig_of(s, id, &have);
    if (out.dtype != have.dtype || out.ndim != have.ndim ||
        memcmp(out.shape, have.shape, (size_t)out.ndim * sizeof *out.shape) != 0) {
        char a[160], b[160];
        return nx_rt_error(
            ctx, NX_ERR_INTERNAL, "%s: the node says %s%s but its rule gives %s%s", fn,
            nx_dtype_name(have.dtype), nx_shape_str(a, sizeof a, have.ndim, have.shape),
            nx_dtype_name(out.dtype), nx_shape_str(b, sizeof b, out.ndim, out.shape));
    }
    return NX_OK;
}

nx_status nx_ir_verify_store(nx_ctx *ctx, const nx_ir_store *s, const char *who)
{
    for (nx_node id = 1; id <= s->n; id++) {
        nx_status st = check_structure(ctx, s, who, id);
        if (st == NX_OK)
            st = rederive(ctx, s, who, id);
        if (st != NX_OK)
            return st;
    }
    return NX_OK;
}

nx_status nx_graph_verify(nx_graph *g)
{
    if (!g)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "nx_graph_verify: the graph is NULL");
    return nx_ir_verify_store(g->s.ctx, &g->s, "nx_graph_verify");
}
