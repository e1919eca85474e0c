/* Edge aggregation over an ELL graph, the graph builder and the formula form (the op is
 * ops/semiring/semiring-ell-edge-aggregate.c): a per-edge IR expression F(h_i, h_j, w, ij, e)
 * built by the caller over gathered neighbour features, folded over the slot axis by sum, max or
 * min:
 *   out[.., i, :] = (+)_p F(h[.., i, :], h[.., indices[i, p], :], values[i, p], indices[i, p],
 *                          edge_attr[i, p, :])
 * The neighbour rows come from the IR's GATHER, so the backends fuse gather, F and the fold into
 * one loop over the slots, and gradients (to h, values and edge_attr) come from autodiff. */
#include <string.h>

#include "ir/ir.h"
#include "ops/sparse/sparse.h"

bool nx_sparse_edge_monoid(const nx_semiring *sr, nx_monoid *m)
{
    switch (sr->kind) {
    case NX_SEMIRING_REAL:
        *m = NX_MONOID_SUM;
        return true;
    case NX_SEMIRING_TROPICAL_MAX_PLUS:
        *m = NX_MONOID_MAX;
        return true;
    case NX_SEMIRING_TROPICAL_MIN_PLUS:
        *m = NX_MONOID_MIN;
        return true;
    default:
        return false;
    }
}

static nx_node expand_rows(nx_graph *g, nx_node h)
{
    int nd = nx_node_ndim(g, h);
    int64_t s[NX_MAX_DIMS];
    nx_node_shape(g, h, s);
    s[nd] = s[nd - 1];
    s[nd - 1] = 1; /* [.., n, 1, d] */
    return nx_reshape(g, h, nd + 1, s);
}

nx_node nx_ell_edge_aggregate_node(nx_graph *g, const nx_semiring *sr, nx_node values,
                                   nx_node indices, nx_node h, nx_node edge_attr, nx_edge_fn fn,
                                   void *user)
{
    static const char *who = "nx_ell_edge_aggregate";
    if (!g || !values || !indices || !h)
        return NX_NONE;
    nx_monoid m;
    if (!sr || !fn)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG, "%s: %s is NULL", who,
                                 sr ? "the edge function" : "semiring");
    if (!nx_sparse_edge_monoid(sr, &m))
        return nx_ir_graph_failf(g, NX_ERR_UNSUPPORTED,
                                 "%s: semiring '%s'; expected real, "
                                 "tropical_max_plus or tropical_min_plus",
                                 who, sr->name);
    int nd = nx_node_ndim(g, h), nv = nx_node_ndim(g, values);
    int64_t hs[NX_MAX_DIMS], vs[NX_MAX_DIMS + 1], is[NX_MAX_DIMS];
    nx_node_shape(g, h, hs);
    nx_node_shape(g, values, vs);
    nx_node_shape(g, indices, is);
    if (nv < 2 || nv >= NX_MAX_DIMS || nx_node_ndim(g, indices) != 2 || vs[nv - 2] != is[0] ||
        vs[nv - 1] != is[1])
        return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                 "%s: values must be [..., m, k_max] (at most %d dims) and "
                                 "indices [m, k_max]",
                                 who, NX_MAX_DIMS - 1);
    if (nd < 2 || nd >= NX_MAX_DIMS || hs[nd - 2] != is[0])
        return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                 "%s: h must be [..., n, d] with n = the ELL's "
                                 "m and at most %d dims",
                                 who, NX_MAX_DIMS - 1);
    nx_dtype dt = nx_node_dtype(g, h);
    if (nx_node_dtype(g, values) != dt)
        return nx_ir_graph_failf(g, NX_ERR_DTYPE, "%s: h is %s but values are %s", who,
                                 nx_dtype_name(dt), nx_dtype_name(nx_node_dtype(g, values)));
    vs[nv] = 1;
    int64_t w3[3] = {is[0], is[1], 1};
    nx_node w = nx_reshape(g, values, nv + 1, vs); /* [.., m, k, 1] */
    nx_node ij = nx_reshape(g, nx_cast(g, indices, dt), 3, w3);
    nx_node hi = expand_rows(g, h);
    nx_node hj = nx_gather(g, h, indices, nd - 2); /* [.., m, k, d] */
    nx_node f = fn(g, hi, hj, w, ij, edge_attr, user);
    if (!f)
        return nx_graph_status(g) != NX_OK
                   ? NX_NONE
                   : nx_ir_graph_failf(g, NX_ERR_INVALID_ARG, "%s: the edge function gave none",
                                       who);
    int fd = nx_node_ndim(g, f);
    int64_t fs[NX_MAX_DIMS];
    nx_node_shape(g, f, fs);
    if (fd < 3 || fs[fd - 3] != is[0] || fs[fd - 2] != is[1])
        return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                 "%s: the edge function's result has %d dims; "
                                 "expected [..., m, k_max, d_out] = [..., %lld, %lld, d_out]",
                                 who, fd, (long long)is[0], (long long)is[1]);
    int axis = -2;
    return nx_reduce(g, f, 1, &axis, m, false);
}

/* ---- the formula form --------------------------------------------------------------------------
 * F as text over hi, hj, w, ij and e, parsed by the pairwise formula parser (its operators and
 * vector functions) after renaming the edge names to the pairwise ones: hi -> x, hj -> y, e -> b,
 * w -> p0, ij -> p1. The pairwise names themselves are renamed to ones no formula may use, so the
 * parser refuses them. */

static const char *rename_ident(const char *id, size_t n)
{
    static const char *const from[] = {"hi", "hj", "e", "w", "ij"};
    static const char *const to[] = {"x", "y", "b", "p0", "p1"};
    for (int i = 0; i < 5; i++)
        if (strlen(from[i]) == n && !strncmp(id, from[i], n))
            return to[i];
    static const char *const taken[] = {"x",  "y",  "b",  "p0", "p1", "p2",
                                        "p3", "p4", "p5", "p6", "p7"};
    for (int i = 0; i < 11; i++)
        if (strlen(taken[i]) == n && !strncmp(id, taken[i], n))
            return "not_an_edge_name";
    return NULL;
}

static bool ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Writes text with the edge names renamed into out (at least 17 * strlen(text) + 1 bytes). */
static void translate(const char *text, char *out)
{
    const char *p = text;
    char *o = out;
    while (*p) {
        if ((*p >= '0' && *p <= '9') || (*p == '.' && p[1] >= '0' && p[1] <= '9')) {
            /* A number, exponent included, so the e of 1e-3 stays. */
            while (ident_char(*p) || *p == '.' ||
                   ((*p == '-' || *p == '+') && (p[-1] == 'e' || p[-1] == 'E')))
                *o++ = *p++;
        } else if (ident_char(*p)) {
            const char *id = p;
            while (ident_char(*p))
                p++;
            const char *r = rename_ident(id, (size_t)(p - id));
            size_t n = r ? strlen(r) : (size_t)(p - id);
            memcpy(o, r ? r : id, n);
            o += n;
        } else {
            *o++ = *p++;
        }
    }
    *o = 0;
}

nx_status nx_sparse_edge_parse(nx_ctx *ctx, const char *who, const char *text, bool has_e,
                               nx_sparse_edge_formula *f)
{
    size_t len = strlen(text), bytes = 17 * len + 1;
    char *t = nx_rt_alloc(ctx, bytes), msg[512];
    if (!t)
        return nx_rt_nomem(ctx, "edge formula", bytes);
    translate(text, t);
    nx_status st = nx_sr_parse_expr(ctx, "edge formula", t, NX_SR_DIALECT_PAIRWISE, &f->e, &f->root,
                                    msg, sizeof msg);
    nx_rt_free(ctx, t, bytes);
    if (st != NX_OK)
        return nx_rt_error(ctx, st, "%s: %s (names: hi, hj, w, ij, e)", who, msg);
    uint64_t allowed = (1ull << NX_SR_VPX) | (1ull << NX_SR_VPY) | (1ull << NX_SR_VP0) |
                       (1ull << (NX_SR_VP0 + 1)) | (has_e ? 1ull << NX_SR_VPB : 0);
    int bad = 0;
    if (!nx_sr_vars_ok(&f->e, f->root, allowed, &bad))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: the formula uses e but edge_attr is NULL",
                           who);
    return NX_OK;
}

nx_node nx_sparse_edge_formula_fn(nx_graph *g, nx_node hi, nx_node hj, nx_node w, nx_node ij,
                                  nx_node e, void *user)
{
    const nx_sparse_edge_formula *f = user;
    nx_node vars[NX_SR_NVARS] = {0};
    vars[NX_SR_VPX] = hi;
    vars[NX_SR_VPY] = hj;
    vars[NX_SR_VPB] = e;
    vars[NX_SR_VP0] = w;
    vars[NX_SR_VP0 + 1] = ij;
    return nx_sr_build(g, &f->e, f->root, nx_node_dtype(g, hi), vars);
}
