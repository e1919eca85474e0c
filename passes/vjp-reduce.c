/* Adjoint rules of the reductions. Every rule is an elementwise expression in x, the result and
 * dy broadcast back over the reduced axes (or a reduction over the other axes when the chain rule
 * reaches a broadcast operand), so for a contraction C = (+)_k A[i,k,1] (x) B[1,k,j] the gradient
 * of A is reduce_j(f(A, B, C, dC)) over [i,k,j]: a reduction whose producer expression fuses into
 * its loop, never a materialised M*K*N array.
 *
 *   sum        dx = dy
 *   max, min   dx = dy at the first winner (the argmax/argmin of the fold, ascending C order over
 *              the reduced axes), 0 elsewhere: ties are not split
 *   logsumexp  dx = dy exp(x - y), with y = -inf (an all -inf fold) read as 0 so the weight is 0
 *   prod       dx = dy (product of the others), from exclusive prefix and suffix products (scans),
 *              never a division, so zeros are exact
 *   custom     a one-component monoid whose lift and finalize are the identity and whose combine is
 *              a + b, a * b, max(a, b) or min(a, b) with that monoid's identity takes the built-in
 *              rule; other custom monoids are NX_ERR_UNSUPPORTED */
#include <math.h>
#include <string.h>

#include "passes/autodiff.h"

/* x's shape with 1 on the reduced axes. */
static void kept_shape(nx_graph *g, nx_node x, const int64_t *flags, int64_t *ks)
{
    nx_node_shape(g, x, ks);
    for (int i = 0; i < nx_node_ndim(g, x); i++) {
        if (flags[i])
            ks[i] = 1;
    }
}

/* The C-order flat position within the reduced block, i64 with x's rank (1 on the kept axes). */
static nx_node block_position(nx_graph *g, nx_node x, const int64_t *flags)
{
    int nd = nx_node_ndim(g, x);
    int64_t xs[NX_MAX_DIMS], bs[NX_MAX_DIMS], stride = 1;
    nx_node_shape(g, x, xs);
    for (int i = 0; i < nd; i++)
        bs[i] = flags[i] ? xs[i] : 1;
    nx_node flat = NX_NONE;
    for (int d = nd - 1; d >= 0; d--) {
        if (!flags[d])
            continue;
        nx_node t = nx_ir_ad_iota(g, nd, bs, d);
        if (stride != 1)
            t = nx_mul(g, t, nx_scalar(g, NX_DTYPE_I64, (double)stride));
        flat = flat ? nx_add(g, t, flat) : t;
        stride *= xs[d];
    }
    return flat;
}

/* x with the reduced axes moved last (in order) and merged into one; *perm receives the order. */
static nx_node merge_reduced(nx_graph *g, nx_node x, const int64_t *flags, int *perm, int *nkeep)
{
    int nd = nx_node_ndim(g, x), k = 0;
    int64_t xs[NX_MAX_DIMS], ms[NX_MAX_DIMS], r = 1;
    nx_node_shape(g, x, xs);
    for (int i = 0; i < nd; i++) {
        if (!flags[i])
            ms[k] = xs[i], perm[k++] = i;
    }
    *nkeep = k;
    for (int i = 0; i < nd; i++) {
        if (flags[i])
            perm[k++] = i, r *= xs[i];
    }
    ms[*nkeep] = r;
    return nx_reshape(g, nx_permute(g, x, perm), *nkeep + 1, ms);
}

static nx_node first_winner(nx_graph *g, nx_node x, const int64_t *flags, bool is_max)
{
    int perm[NX_MAX_DIMS], nkeep;
    nx_node m = merge_reduced(g, x, flags, perm, &nkeep);
    int axis = nkeep;
    nx_node arg = nx_reduce(g, m, 1, &axis, is_max ? NX_MONOID_ARGMAX : NX_MONOID_ARGMIN, false);
    int64_t ks[NX_MAX_DIMS];
    kept_shape(g, x, flags, ks);
    arg = nx_reshape(g, arg, nx_node_ndim(g, x), ks);
    return nx_eq(g, block_position(g, x, flags), arg);
}

static nx_node exclusive_products(nx_graph *g, nx_node x, const int64_t *flags)
{
    int perm[NX_MAX_DIMS], inv[NX_MAX_DIMS], nkeep, nd = nx_node_ndim(g, x);
    nx_node m = merge_reduced(g, x, flags, perm, &nkeep);
    int axis = nkeep;
    nx_node pre = nx_ir_ad_shift(g, nx_scan(g, m, axis, NX_MONOID_PROD, false), axis, false, 1.0);
    nx_node suf = nx_ir_ad_shift(g, nx_scan(g, m, axis, NX_MONOID_PROD, true), axis, true, 1.0);
    nx_node e = nx_mul(g, pre, suf);
    int64_t xs[NX_MAX_DIMS], ps[NX_MAX_DIMS];
    nx_node_shape(g, x, xs);
    for (int i = 0; i < nd; i++)
        ps[i] = xs[perm[i]], inv[perm[i]] = i;
    return nx_permute(g, nx_reshape(g, e, nd, ps), inv);
}

nx_status nx_ir_ad_reduce(nx_graph *g, nx_node x, const int64_t *flags, int64_t monoid,
                          bool keepdims, nx_node out, nx_node dy, nx_node *dx)
{
    (void)keepdims;
    int nd = nx_node_ndim(g, x);
    int64_t xs[NX_MAX_DIMS], ks[NX_MAX_DIMS];
    nx_node_shape(g, x, xs);
    kept_shape(g, x, flags, ks);
    nx_node dyb = nx_broadcast(g, nx_reshape(g, dy, nd, ks), nd, xs);
    if (nx_ir_numel(nd, xs) == 0) {
        *dx = nx_ir_ad_zeros(g, x);
        return NX_OK;
    }
    bool any = false;
    for (int i = 0; i < nd; i++)
        any |= flags[i] != 0;
    if (!any) { /* every element folded alone: y = x under every monoid */
        *dx = dyb;
        return NX_OK;
    }
    switch (monoid) {
    case NX_MONOID_SUM:
        *dx = dyb;
        return NX_OK;
    case NX_MONOID_MAX:
    case NX_MONOID_MIN:
        *dx = nx_ir_ad_select0(g, first_winner(g, x, flags, monoid == NX_MONOID_MAX), dyb);
        return NX_OK;
    case NX_MONOID_LOGSUMEXP: {
        nx_node yk = nx_reshape(g, out, nd, ks);
        nx_node ninf = nx_ir_ad_scalar(g, out, -INFINITY);
        nx_node safe = nx_select(g, nx_eq(g, yk, ninf), nx_ir_ad_scalar(g, out, 0.0), yk);
        *dx = nx_mul(g, dyb, nx_exp(g, nx_sub(g, x, safe)));
        return NX_OK;
    }
    case NX_MONOID_PROD:
        *dx = nx_mul(g, dyb, exclusive_products(g, x, flags));
        return NX_OK;
    default:
        return nx_ir_ad_unsupported(g, "nx_graph_vjp: reduce under monoid %s has no adjoint",
                                    nx_ir_monoid_name(monoid));
    }
}

nx_status nx_ir_vjp_reduce(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    return nx_ir_ad_reduce(g, v.ops[0], v.a + 2, v.a[0], v.a[1] != 0, y, dy, dx);
}

/* The built-in monoid a one-component custom monoid is, or -1. */
static int64_t builtin_equivalent(const nx_graph *g, const nx_ir_ad_view *v)
{
    const nx_ir_store *s = &g->s;
    nx_node a = v->ops[NX_RC_A(1, 0)], b = v->ops[NX_RC_B(1, 0)];
    if (v->n.nops != NX_RC_NOPS(1) || v->ops[NX_RC_LIFT(1, 0)] != v->ops[NX_RC_PX] ||
        v->ops[NX_RC_FINALIZE(1)] != a)
        return -1;
    const nx_ir_node *c = nx_ir_node_at(s, v->ops[NX_RC_COMBINE(1, 0)]);
    const nx_node *cops = nx_ir_node_ops(s, c);
    if (c->nops != 2 || !((cops[0] == a && cops[1] == b) || (cops[0] == b && cops[1] == a)))
        return -1;
    int64_t m = c->op == NX_PRIM_ADD ? NX_MONOID_SUM
                : c->op == NX_PRIM_MUL ? NX_MONOID_PROD
                : c->op == NX_PRIM_MAX ? NX_MONOID_MAX
                : c->op == NX_PRIM_MIN ? NX_MONOID_MIN
                                       : -1;
    const nx_ir_node *id = nx_ir_node_at(s, v->ops[NX_RC_IDENTITY(1, 0)]);
    if (m < 0 || id->op != NX_PRIM_CONSTANT || !nx_ir_is_float((nx_dtype)id->dtype))
        return -1;
    double want = m == NX_MONOID_SUM    ? 0.0
                  : m == NX_MONOID_PROD ? 1.0
                  : m == NX_MONOID_MAX  ? -INFINITY
                                        : INFINITY;
    double got = nx_ir_to_double(nx_ir_get(nx_ir_node_blob(s, id), (nx_dtype)id->dtype, 0),
                                 (nx_dtype)id->dtype);
    return got == want ? m : -1;
}

nx_status nx_ir_vjp_reduce_custom(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    int64_t m = builtin_equivalent(g, &v);
    if (m < 0)
        return nx_ir_ad_unsupported(g,
                                    "nx_graph_vjp: reduce_custom (node %%%u) has no adjoint: its "
                                    "monoid is not a built-in one in disguise; expected one carry "
                                    "component, identity lift and finalize, and a combine of "
                                    "a + b, a * b, max(a, b) or min(a, b) with its identity",
                                    (unsigned)y);
    return nx_ir_ad_reduce(g, v.ops[0], v.a + 2, m, v.a[1] != 0, y, dy, dx);
}
