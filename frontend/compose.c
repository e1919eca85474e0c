/* Conveniences composed from primitives only: matmul, semiring einsum, mean, var, softmax, where.
 * None of them is a primitive; the graph they leave is what the passes see (a contraction is a
 * reduce over a broadcast product, which the fusion pass streams). */
#include <string.h>

#include "ir/ir.h"

static bool usable(nx_graph *g, const char *fn, int n, const nx_node *xs)
{
    return g && nx_ir_check_handles(g, fn, n, xs);
}

/* ---- matmul --------------------------------------------------------------------------------*/

/* x with a 1 inserted at position pos of its shape. */
static nx_node insert_unit(nx_graph *g, nx_node x, int pos)
{
    const nx_ir_node *n = &g->s.nodes[x];
    int64_t shape[NX_MAX_DIMS];
    int k = 0;
    for (int d = 0; d <= n->ndim; d++) {
        if (d == pos)
            shape[k++] = 1;
        if (d < n->ndim)
            shape[k++] = n->shape[d];
    }
    return nx_reshape(g, x, n->ndim + 1, shape);
}

nx_node nx_matmul(nx_graph *g, nx_node a, nx_node b)
{
    nx_node ops[2] = {a, b};
    if (!usable(g, "nx_matmul", 2, ops))
        return NX_NONE;
    const nx_ir_node *na = &g->s.nodes[a], *nb = &g->s.nodes[b];
    char sa[160], sb[160];
    nx_shape_str(sa, sizeof sa, na->ndim, na->shape);
    nx_shape_str(sb, sizeof sb, nb->ndim, nb->shape);
    if (na->ndim < 2 || nb->ndim < 2 || na->ndim >= NX_MAX_DIMS || nb->ndim >= NX_MAX_DIMS)
        return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                 "nx_matmul: a is %s and b is %s; expected 2 to %d dims each "
                                 "(matrices over the last two axes)",
                                 sa, sb, NX_MAX_DIMS - 1);
    int64_t k = na->shape[na->ndim - 1], kb = nb->shape[nb->ndim - 2];
    if (k != kb)
        return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                 "nx_matmul: a is %s but b is %s; the inner dims differ (%lld vs "
                                 "%lld)",
                                 sa, sb, (long long)k, (long long)kb);
    /* a[..., m, k, 1] * b[..., 1, k, n] summed over k. Node pointers die when the arena grows,
     * so the dims are read before the first builder call. */
    int nda = na->ndim, ndb = nb->ndim;
    nx_node a3 = insert_unit(g, a, nda);
    nx_node b3 = insert_unit(g, b, ndb - 2);
    nx_node prod = nx_mul(g, a3, b3);
    int axis = -2;
    return nx_reduce(g, prod, 1, &axis, NX_MONOID_SUM, false);
}

/* ---- einsum --------------------------------------------------------------------------------*/

typedef struct spec {
    char in[2][NX_MAX_DIMS + 1];
    char out[NX_MAX_DIMS + 1];
    char all[2 * NX_MAX_DIMS + 1]; /* output letters, then summed letters */
    int nout, nall;
} spec;

static bool parse_term(const char **p, char *dst, char stop)
{
    int n = 0;
    for (; **p && **p != stop; (*p)++) {
        char c = **p;
        if (c < 'a' || c > 'z' || n == NX_MAX_DIMS || strchr(dst, c))
            return false;
        dst[n++] = c;
        dst[n] = '\0';
    }
    return true;
}

static bool parse_spec(const char *text, spec *sp)
{
    memset(sp, 0, sizeof *sp);
    const char *p = text;
    if (!parse_term(&p, sp->in[0], ',') || *p++ != ',' || !parse_term(&p, sp->in[1], '-') ||
        p[0] != '-' || p[1] != '>')
        return false;
    p += 2;
    if (!parse_term(&p, sp->out, '\0'))
        return false;
    for (const char *c = sp->out; *c; c++) {
        if (!strchr(sp->in[0], *c) && !strchr(sp->in[1], *c))
            return false;
    }
    memcpy(sp->all, sp->out, strlen(sp->out) + 1);
    sp->nout = sp->nall = (int)strlen(sp->out);
    for (int t = 0; t < 2; t++) {
        for (const char *c = sp->in[t]; *c; c++) {
            if (!strchr(sp->all, *c)) {
                sp->all[sp->nall++] = *c;
                sp->all[sp->nall] = '\0';
            }
        }
    }
    return true;
}

/* x (labelled by its term) permuted into the order of sp->all and widened with unit axes. */
static nx_node align(nx_graph *g, nx_node x, const char *term, const spec *sp)
{
    int nd = (int)strlen(term), perm[NX_MAX_DIMS], k = 0;
    int64_t shape[2 * NX_MAX_DIMS];
    const nx_ir_node *n = &g->s.nodes[x];
    for (int i = 0; i < sp->nall; i++) {
        const char *hit = strchr(term, sp->all[i]);
        if (hit) {
            perm[k++] = (int)(hit - term);
            shape[i] = n->shape[hit - term];
        } else {
            shape[i] = 1;
        }
    }
    nx_node y = x;
    bool identity = true;
    for (int i = 0; i < nd; i++)
        identity &= perm[i] == i;
    if (!identity)
        y = nx_permute(g, x, perm);
    return nx_reshape(g, y, sp->nall, shape);
}

static nx_node check_einsum(nx_graph *g, const char *text, const spec *sp, nx_node a, nx_node b,
                            nx_monoid plus)
{
    const nx_ir_node *n[2] = {&g->s.nodes[a], &g->s.nodes[b]};
    for (int t = 0; t < 2; t++) {
        if ((int)strlen(sp->in[t]) != n[t]->ndim)
            return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                     "nx_einsum: \"%s\" labels operand %d with %d letters but it "
                                     "has %d dims",
                                     text, t, (int)strlen(sp->in[t]), n[t]->ndim);
    }
    for (const char *c = sp->in[0]; *c; c++) {
        const char *o = strchr(sp->in[1], *c);
        int64_t ea = n[0]->shape[c - sp->in[0]];
        if (o && n[1]->shape[o - sp->in[1]] != ea)
            return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                     "nx_einsum: letter '%c' is %lld in a but %lld in b; expected "
                                     "equal extents",
                                     *c, (long long)ea, (long long)n[1]->shape[o - sp->in[1]]);
    }
    if (sp->nall > NX_MAX_DIMS)
        return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                 "nx_einsum: \"%s\" has %d distinct letters; expected at most %d",
                                 text, sp->nall, NX_MAX_DIMS);
    if (plus != NX_MONOID_SUM && plus != NX_MONOID_PROD && plus != NX_MONOID_MAX &&
        plus != NX_MONOID_MIN && plus != NX_MONOID_LOGSUMEXP)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                 "nx_einsum: monoid %s cannot be a semiring's (+); expected SUM, "
                                 "PROD, MAX, MIN or LOGSUMEXP",
                                 nx_ir_monoid_name(plus));
    return 1;
}

nx_node nx_einsum(nx_graph *g, const char *text, nx_node a, nx_node b, nx_monoid plus,
                  nx_binary_builder times)
{
    nx_node ops[2] = {a, b};
    if (!usable(g, "nx_einsum", 2, ops))
        return NX_NONE;
    spec sp;
    if (!text || !times || !parse_spec(text, &sp))
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                 "nx_einsum: spec \"%s\"%s is not valid; expected \"ab,bc->ac\": "
                                 "lowercase letters, none repeated within a term, output letters "
                                 "taken from the inputs",
                                 text ? text : "(NULL)", times ? "" : " (or times is NULL)");
    if (!check_einsum(g, text, &sp, a, b, plus))
        return NX_NONE;
    nx_node prod = times(g, align(g, a, sp.in[0], &sp), align(g, b, sp.in[1], &sp));
    if (sp.nall == sp.nout)
        return prod;
    int axes[NX_MAX_DIMS];
    for (int i = sp.nout; i < sp.nall; i++)
        axes[i - sp.nout] = i;
    return nx_reduce(g, prod, sp.nall - sp.nout, axes, plus, false);
}

/* ---- statistics ----------------------------------------------------------------------------*/

/* Number of elements folded into each result of a reduction over axes; 0 with the error
 * recorded when x or the axes are unusable. */
static bool fold_count(nx_graph *g, const char *fn, nx_node x, int naxes, const int *axes,
                       double *count)
{
    const nx_ir_node *n = &g->s.nodes[x];
    if (!nx_ir_is_core_float((nx_dtype)n->dtype)) {
        nx_ir_graph_failf(g, NX_ERR_DTYPE, "%s: x is %s; expected f32 or f64", fn,
                          nx_dtype_name((nx_dtype)n->dtype));
        return false;
    }
    int64_t flags[NX_MAX_DIMS];
    if (!nx_ir_axes_flags(g, fn, naxes, axes, n->ndim, flags))
        return false;
    double c = 1;
    for (int d = 0; d < n->ndim; d++)
        c *= flags[d] ? (double)n->shape[d] : 1.0;
    *count = c;
    return true;
}

nx_node nx_mean(nx_graph *g, nx_node x, int naxes, const int *axes, bool keepdims)
{
    double count;
    if (!usable(g, "nx_mean", 1, &x) || !fold_count(g, "nx_mean", x, naxes, axes, &count))
        return NX_NONE;
    nx_dtype d = (nx_dtype)g->s.nodes[x].dtype;
    nx_node sum = nx_reduce(g, x, naxes, axes, NX_MONOID_SUM, keepdims);
    return nx_div(g, sum, nx_scalar(g, d, count));
}

nx_node nx_var(nx_graph *g, nx_node x, int naxes, const int *axes, int ddof, bool keepdims)
{
    double count;
    if (!usable(g, "nx_var", 1, &x) || !fold_count(g, "nx_var", x, naxes, axes, &count))
        return NX_NONE;
    if (ddof < 0)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG, "nx_var: ddof is %d; expected >= 0", ddof);
    nx_dtype d = (nx_dtype)g->s.nodes[x].dtype;
    nx_node dev = nx_sub(g, x, nx_mean(g, x, naxes, axes, true));
    nx_node ss = nx_reduce(g, nx_mul(g, dev, dev), naxes, axes, NX_MONOID_SUM, keepdims);
    double dof = count - ddof > 0 ? count - ddof : 0; /* numpy: 0 or fewer gives inf or nan */
    return nx_div(g, ss, nx_scalar(g, d, dof));
}

nx_node nx_softmax(nx_graph *g, nx_node x, int axis)
{
    if (!usable(g, "nx_softmax", 1, &x))
        return NX_NONE;
    nx_dtype d = (nx_dtype)g->s.nodes[x].dtype;
    if (!nx_ir_is_core_float(d))
        return nx_ir_graph_failf(g, NX_ERR_DTYPE, "nx_softmax: x is %s; expected f32 or f64",
                                 nx_dtype_name(d));
    /* exp(x - max) never overflows; the max element contributes exactly 1 to the sum */
    nx_node m = nx_reduce(g, x, 1, &axis, NX_MONOID_MAX, true);
    nx_node e = nx_exp(g, nx_sub(g, x, m));
    return nx_div(g, e, nx_reduce(g, e, 1, &axis, NX_MONOID_SUM, true));
}

nx_node nx_where(nx_graph *g, nx_node cond, nx_node a, nx_node b)
{
    return nx_select(g, cond, a, b);
}
