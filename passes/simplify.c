/* Simplification: rebuilds the subgraph of some outputs in the same graph with local rewrites,
 * so that what compile copies (only the outputs' subgraph: that is the dead-node elimination) is
 * smaller. Every rebuilt node goes through nx_ir_make, so equal subexpressions become one node
 * (CSE through hash-consing); an unchanged node maps to itself.
 *
 * Rewrites, each exact under IEEE arithmetic (NaN, infinities and signed zeros included):
 *   x * 1, 1 * x, x / 1                     -> x    (floats and integers)
 *   x + (-0), (-0) + x, x - (+0)            -> x    (x + (+0) is NOT folded: it turns -0 into +0)
 *   integers only: x + 0, 0 + x, x - 0 -> x; x * 0, 0 * x -> 0 (floats: NaN * 0 and inf * 0 are
 *                                              NaN, so x * 0 stays)
 *   neg(neg(x)) -> x; reverse(reverse(x)) on the same axes -> x; select(c, x, x) -> x
 *   broadcast(broadcast(x)) -> broadcast(x); reshape(reshape(x)) -> reshape(x); a reshape or
 *   broadcast to the operand's own shape -> the operand; permute(permute(x)) -> one permute
 *   constant folding: an elementwise op, select or cast whose value operands are all constants
 *   and whose result has at most 64 elements becomes a constant, computed with the reference
 *   interpreter's scalar semantics (so the folded value is bit-identical to what `ref` computes)
 * A rewrite that would change the result's dtype or shape (x + 0 broadcasting x) is skipped. */
#include <math.h>
#include <string.h>

#include "passes/autodiff.h"
#include "passes/simplify.h"

#define FOLD_MAX 64

typedef struct simp {
    nx_graph *g;
    nx_node *map;
    uint8_t *live;
} simp;

static const nx_ir_node *node(const nx_graph *g, nx_node id)
{
    return nx_ir_node_at(&g->s, id);
}

/* Whether id is a constant (or a broadcast of one) all of whose elements equal v bit for bit in
 * sign (so -0 and +0 differ). */
static bool is_uniform(const nx_graph *g, nx_node id, double v)
{
    const nx_ir_node *n = node(g, id);
    if (n->op == NX_PRIM_BROADCAST || n->op == NX_PRIM_RESHAPE)
        return is_uniform(g, nx_ir_node_ops(&g->s, n)[0], v);
    if (n->op != NX_PRIM_CONSTANT)
        return false;
    nx_dtype dt = (nx_dtype)n->dtype;
    int64_t count = nx_ir_numel(n->ndim, n->shape);
    const uint8_t *blob = nx_ir_node_blob(&g->s, n);
    for (int64_t i = 0; i < count; i++) {
        double x = nx_ir_to_double(nx_ir_get(blob, dt, i), dt);
        if (x != v || signbit(x) != signbit(v))
            return false;
    }
    return count > 0;
}

static bool same_sig(const nx_graph *g, nx_node a, nx_node b)
{
    const nx_ir_node *x = node(g, a), *y = node(g, b);
    return x->dtype == y->dtype && x->ndim == y->ndim &&
           memcmp(x->shape, y->shape, (size_t)x->ndim * sizeof *x->shape) == 0;
}

/* The operand that a binary node with operands a, b reduces to, or NX_NONE. */
static nx_node fold_identity(const nx_graph *g, nx_node id, int op, nx_node a, nx_node b)
{
    bool fl = nx_ir_is_float((nx_dtype)node(g, a)->dtype);
    nx_node keep = NX_NONE;
    switch (op) {
    case NX_PRIM_MUL:
        keep = is_uniform(g, b, 1.0) ? a : is_uniform(g, a, 1.0) ? b : NX_NONE;
        break;
    case NX_PRIM_DIV:
        keep = is_uniform(g, b, 1.0) ? a : NX_NONE;
        break;
    case NX_PRIM_ADD: {
        double z = fl ? -0.0 : 0.0;
        keep = is_uniform(g, b, z) ? a : is_uniform(g, a, z) ? b : NX_NONE;
        break;
    }
    case NX_PRIM_SUB:
        keep = is_uniform(g, b, 0.0) ? a : NX_NONE;
        break;
    default:
        break;
    }
    return keep && same_sig(g, keep, id) ? keep : NX_NONE;
}

/* Integer x * 0: a zero of the result's shape. */
static nx_node fold_int_zero(nx_graph *g, nx_node id, int op, nx_node a, nx_node b)
{
    const nx_ir_node *n = node(g, id);
    if (op != NX_PRIM_MUL || !nx_ir_is_int((nx_dtype)n->dtype) ||
        !(is_uniform(g, a, 0.0) || is_uniform(g, b, 0.0)))
        return NX_NONE;
    int64_t shape[NX_MAX_DIMS];
    memcpy(shape, n->shape, sizeof shape);
    int nd = n->ndim;
    return nx_broadcast(g, nx_scalar(g, (nx_dtype)n->dtype, 0.0), nd, shape);
}

static bool elementwise(int op)
{
    return nx_ir_prim_elementwise(op);
}

/* Evaluates a small elementwise node over constant operands into a constant. */
static nx_node fold_constant(nx_graph *g, nx_node id, const nx_node *ops, int nops)
{
    const nx_ir_node *n = node(g, id);
    int64_t count = nx_ir_numel(n->ndim, n->shape);
    if (!elementwise(n->op) || count > FOLD_MAX)
        return NX_NONE;
    for (int k = 0; k < nops; k++) {
        if (node(g, ops[k])->op != NX_PRIM_CONSTANT)
            return NX_NONE;
    }
    nx_ir_node self = *n;
    union {
        double d[FOLD_MAX];
        int64_t i[FOLD_MAX];
    } out;
    int64_t idx[NX_MAX_DIMS] = {0};
    for (int64_t e = 0; e < count; e++) {
        nx_ir_val v[3];
        nx_dtype dt[3];
        for (int k = 0; k < nops; k++) {
            const nx_ir_node *o = node(g, ops[k]);
            int64_t off = 0, stride = 1;
            for (int d = o->ndim - 1; d >= 0; d--) {
                int64_t at = idx[d + self.ndim - o->ndim];
                off += (o->shape[d] == 1 ? 0 : at) * stride;
                stride *= o->shape[d];
            }
            dt[k] = (nx_dtype)o->dtype;
            v[k] = nx_ir_get(nx_ir_node_blob(&g->s, o), dt[k], off);
        }
        nx_ir_val r;
        if (self.op == NX_PRIM_SELECT)
            r = v[0].i ? v[1] : v[2];
        else if (self.op == NX_PRIM_CAST)
            r = nx_ir_convert(v[0], dt[0], (nx_dtype)self.dtype);
        else if (nops == 1)
            r = nx_ir_scalar_unary((nx_prim)self.op, dt[0], (nx_dtype)self.dtype, v[0]);
        else
            r = nx_ir_scalar_binary((nx_prim)self.op, dt[0], (nx_dtype)self.dtype, v[0], v[1]);
        nx_ir_put(&out, (nx_dtype)self.dtype, e, r);
        nx_ir_next(self.ndim, self.shape, idx);
    }
    return nx_constant(g, (nx_dtype)self.dtype, self.ndim, self.shape, &out);
}

/* Movement of movement and the involutions. */
static nx_node fold_movement(nx_graph *g, nx_node id, nx_node x)
{
    const nx_ir_node *n = node(g, id), *o = node(g, x);
    int op = n->op;
    int64_t shape[NX_MAX_DIMS];
    memcpy(shape, n->shape, sizeof shape);
    int nd = n->ndim;
    if ((op == NX_PRIM_BROADCAST || op == NX_PRIM_RESHAPE) && same_sig(g, id, x))
        return x;
    nx_node inner = o->nops ? nx_ir_node_ops(&g->s, o)[0] : NX_NONE;
    if (op == NX_PRIM_BROADCAST && o->op == NX_PRIM_BROADCAST)
        return nx_broadcast(g, inner, nd, shape);
    if (op == NX_PRIM_RESHAPE && o->op == NX_PRIM_RESHAPE)
        return same_sig(g, id, inner) ? inner : nx_reshape(g, inner, nd, shape);
    if (op == NX_PRIM_NEG && o->op == NX_PRIM_NEG)
        return inner;
    if (op == NX_PRIM_REVERSE && o->op == NX_PRIM_REVERSE &&
        memcmp(nx_ir_node_attrs(&g->s, n), nx_ir_node_attrs(&g->s, o),
               (size_t)nd * sizeof(int64_t)) == 0)
        return inner;
    if (op == NX_PRIM_PERMUTE && o->op == NX_PRIM_PERMUTE) {
        const int64_t *outer = nx_ir_node_attrs(&g->s, n), *in = nx_ir_node_attrs(&g->s, o);
        int perm[NX_MAX_DIMS];
        bool ident = true;
        for (int i = 0; i < nd; i++) {
            perm[i] = (int)in[outer[i]];
            ident &= perm[i] == i;
        }
        return ident ? inner : nx_permute(g, inner, perm);
    }
    return NX_NONE;
}

/* The node id rebuilt over new operands, then rewritten. */
static nx_node rebuild(simp *sp, nx_node id)
{
    nx_graph *g = sp->g;
    const nx_ir_node *n = node(g, id);
    if (nx_ir_prims[n->op].arity == 0)
        return id;
    nx_ir_node self = *n;
    int nv = nx_ir_num_valops(n);
    nx_node ops[NX_IR_AD_MAX_OPS];
    int64_t attrs[NX_IR_AD_MAX_ATTRS];
    if (self.nops > NX_IR_AD_MAX_OPS || self.nattrs > NX_IR_AD_MAX_ATTRS || self.nblob > 0)
        return id; /* kept as is: no rewrite applies to such nodes */
    const nx_node *src = nx_ir_node_ops(&g->s, n);
    bool changed = false;
    for (uint32_t k = 0; k < self.nops; k++) {
        ops[k] = (int)k < nv ? sp->map[src[k]] : src[k];
        changed |= ops[k] != src[k];
    }
    memcpy(attrs, nx_ir_node_attrs(&g->s, n), self.nattrs * sizeof *attrs);
    nx_node cur = id;
    if (changed)
        cur = nx_ir_make(g, "nx_pass_simplify", (nx_prim)self.op, (int)self.nops, ops,
                         (int)self.nattrs, attrs, 0, NULL);
    if (!cur)
        return NX_NONE;
    nx_node r = NX_NONE;
    if (self.nops == 2 && nv == 2)
        r = fold_identity(g, cur, self.op, ops[0], ops[1]);
    if (!r && self.nops == 2 && nv == 2)
        r = fold_int_zero(g, cur, self.op, ops[0], ops[1]);
    if (!r && self.op == NX_PRIM_SELECT && ops[1] == ops[2] && same_sig(g, ops[1], cur))
        r = ops[1];
    if (!r && self.nops == 1)
        r = fold_movement(g, cur, ops[0]);
    if (!r && nv == (int)self.nops && self.nops <= 3)
        r = fold_constant(g, cur, ops, (int)self.nops);
    return r ? r : cur;
}

static void mark_live(const nx_graph *g, int n, const nx_node *outs, uint8_t *live, uint32_t top)
{
    for (int i = 0; i < n; i++)
        live[outs[i]] = 1;
    for (uint32_t id = top; id >= 1; id--) {
        if (!live[id])
            continue;
        const nx_ir_node *nd = node(g, id);
        const nx_node *ops = nx_ir_node_ops(&g->s, nd);
        for (uint32_t k = 0; k < nd->nops; k++)
            live[ops[k]] = 1;
    }
}

nx_status nx_pass_count_live(nx_graph *g, int n, const nx_node *outputs, uint32_t *count)
{
    size_t cap = (size_t)g->s.n + 1;
    uint8_t *live = nx_rt_calloc(g->s.ctx, cap, 1);
    if (!live)
        return nx_rt_nomem(g->s.ctx, "nx_pass_count_live", cap);
    mark_live(g, n, outputs, live, g->s.n);
    uint32_t c = 0;
    for (size_t i = 1; i < cap; i++)
        c += live[i];
    nx_rt_free(g->s.ctx, live, cap);
    *count = c;
    return NX_OK;
}

nx_status nx_pass_simplify(nx_graph *g, int n, nx_node *outputs)
{
    if (!g || n < 1 || !outputs)
        return nx_rt_error(g ? g->s.ctx : NULL, NX_ERR_INVALID_ARG,
                           "nx_pass_simplify: expected a graph and n >= 1 outputs");
    if (g->status != NX_OK)
        return nx_rt_error(g->s.ctx, g->status, "nx_pass_simplify: %s", g->msg);
    for (int i = 0; i < n; i++) {
        if (outputs[i] < 1 || outputs[i] > g->s.n)
            return nx_rt_error(g->s.ctx, NX_ERR_INVALID_ARG,
                               "nx_pass_simplify: output %d is handle %u; expected 1..%u", i,
                               (unsigned)outputs[i], (unsigned)g->s.n);
    }
    uint32_t top = g->s.n;
    size_t cap = (size_t)top + 1;
    simp sp = {.g = g};
    sp.live = nx_rt_calloc(g->s.ctx, cap, 1);
    sp.map = sp.live ? nx_rt_calloc(g->s.ctx, cap, sizeof *sp.map) : NULL;
    nx_status st = NX_OK;
    if (!sp.map) {
        st = nx_rt_nomem(g->s.ctx, "nx_pass_simplify", cap * (1 + sizeof *sp.map));
    } else {
        mark_live(g, n, outputs, sp.live, top);
        for (uint32_t id = 1; id <= top && st == NX_OK; id++) {
            sp.map[id] = id;
            if (sp.live[id] && !(sp.map[id] = rebuild(&sp, id)))
                st = nx_rt_error(g->s.ctx, g->status, "nx_pass_simplify: %s", g->msg);
        }
        for (int i = 0; i < n && st == NX_OK; i++)
            outputs[i] = sp.map[outputs[i]];
    }
    nx_rt_free(g->s.ctx, sp.map, sp.map ? cap * sizeof *sp.map : 0);
    nx_rt_free(g->s.ctx, sp.live, sp.live ? cap : 0);
    return st;
}
