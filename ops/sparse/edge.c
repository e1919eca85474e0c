/* Edge aggregation over an ELL graph: a per-edge IR expression F(h_i, h_j, w, ij, e) built by the
 * caller over gathered neighbour features, folded over the slot axis by sum, max or min:
 *   out[.., i, :] = (+)_p F(h[.., i, :], h[.., indices[i, p], :], values[i, p], indices[i, p],
 *                          edge_attr[i, p, :])
 * The neighbour rows come from the IR's GATHER, so the backends fuse gather, F and the fold into
 * one loop over the slots, and gradients (to h, values and edge_attr) come from autodiff. */
#include <string.h>

#include "cache.h"
#include "ir/ir.h"
#include "ops/sparse/sparse.h"

static bool monoid_of(const nx_semiring *sr, nx_monoid *m)
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
    if (!monoid_of(sr, &m))
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

typedef struct edge_formula {
    nx_sr_expr e;
    int32_t root;
} edge_formula;

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

static nx_status parse_formula(nx_ctx *ctx, const char *who, const char *text, bool has_e,
                               edge_formula *f)
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

static nx_node formula_fn(nx_graph *g, nx_node hi, nx_node hj, nx_node w, nx_node ij, nx_node e,
                          void *user)
{
    const edge_formula *f = user;
    nx_node vars[NX_SR_NVARS] = {0};
    vars[NX_SR_VPX] = hi;
    vars[NX_SR_VPY] = hj;
    vars[NX_SR_VPB] = e;
    vars[NX_SR_VP0] = w;
    vars[NX_SR_VP0 + 1] = ij;
    return nx_sr_build(g, &f->e, f->root, nx_node_dtype(g, hi), vars);
}

/* ---- entry point -----------------------------------------------------------------------------*/

typedef struct edge_call {
    const nx_semiring *sr;
    const nx_ell *a;
    const nx_tensor *h, *e;
    const nx_edge_opts *o;
    edge_formula *f; /* the parsed formula, or NULL with o->expr */
} edge_call;

static nx_node input_of(nx_graph *g, const char *name, const nx_tensor *t)
{
    return nx_input(g, name, nx_tensor_dtype(t), nx_tensor_ndim(t), nx_tensor_shape(t));
}

static nx_status build(nx_graph *g, void *user, nx_node *outs, int *n)
{
    edge_call *c = user;
    nx_node v = input_of(g, "values", c->a->values);
    nx_node idx = input_of(g, "indices", c->a->indices);
    nx_node h = input_of(g, "h", c->h);
    nx_node e = c->e ? input_of(g, "edge_attr", c->e) : NX_NONE;
    outs[0] = c->f ? nx_ell_edge_aggregate_node(g, c->sr, v, idx, h, e, formula_fn, c->f)
                   : nx_ell_edge_aggregate_node(g, c->sr, v, idx, h, e, c->o->expr, c->o->user);
    *n = 1;
    return nx_graph_status(g);
}

static nx_status check(nx_ctx *ctx, const char *who, const edge_call *c)
{
    if (!c->sr)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: semiring is NULL", who);
    nx_monoid m;
    if (!monoid_of(c->sr, &m))
        return nx_rt_error(ctx, NX_ERR_UNSUPPORTED,
                           "%s: semiring '%s'; expected real, "
                           "tropical_max_plus or tropical_min_plus",
                           who, c->sr->name);
    if (!c->o || (!c->o->formula == !c->o->expr) || (c->o->expr && !c->o->expr_key))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: opts must give either a formula or expr with expr_key", who);
    nx_status st = nx_ell_check(ctx, who, c->a);
    if (st == NX_OK)
        st = nx_sparse_check_float(ctx, who, "h", c->h);
    if (st == NX_OK && c->e)
        st = nx_sparse_check_float(ctx, who, "edge_attr", c->e);
    if (st != NX_OK)
        return st;
    const int64_t *s = nx_tensor_shape(c->a->indices);
    if (s[0] != c->a->n_cols)
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "%s: the ELL is %lld x %lld; edges of a graph need "
                           "a square one",
                           who, (long long)s[0], (long long)c->a->n_cols);
    if (c->e && (nx_tensor_ndim(c->e) != 3 || nx_tensor_shape(c->e)[0] != s[0] ||
                 nx_tensor_shape(c->e)[1] != s[1]))
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "%s: edge_attr must be [m, k_max, d_e] = [%lld, "
                           "%lld, d_e]",
                           who, (long long)s[0], (long long)s[1]);
    return NX_OK;
}

static nx_status run_edge(nx_ctx *ctx, const char *who, edge_call *c, nx_tensor **out)
{
    static const char *const names[4] = {"the ELL's values", "the ELL's indices", "h", "edge_attr"};
    nx_rt_cache_blob key;
    nx_rt_cache_blob_init(&key, ctx);
    nx_rt_cache_blob_str(&key, "op", "ell_edge_aggregate");
    if (c->f)
        nx_sr_key(&key, "formula", &c->f->e, c->f->root);
    else
        nx_rt_cache_blob_str(&key, "expr", c->o->expr_key);
    nx_rt_cache_blob_i64(&key, "kind", c->sr->kind);
    nx_rt_cache_blob_tensor(&key, "values", c->a->values);
    nx_rt_cache_blob_tensor(&key, "indices", c->a->indices);
    nx_rt_cache_blob_tensor(&key, "h", c->h);
    nx_rt_cache_blob_tensor(&key, "e", c->e);
    nx_program *p = NULL;
    nx_status st =
        nx_sparse_program(ctx, &key, "edge aggregation: cache key", c->o->backend, build, c, &p);
    if (st != NX_OK)
        return st;
    const nx_tensor *in[4] = {c->a->values, c->a->indices, c->h, c->e};
    return nx_sparse_run(ctx, who, p, c->e ? 4 : 3, in, names, out);
}

nx_status nx_semiring_ell_edge_aggregate(nx_ctx *ctx, const nx_semiring *sr, const nx_ell *a,
                                         const nx_tensor *h, const nx_tensor *edge_attr,
                                         const nx_edge_opts *opts, nx_tensor **out)
{
    static const char *who = "nx_semiring_ell_edge_aggregate";
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: ctx is NULL", who);
    if (!out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: out is NULL", who);
    *out = NULL;
    edge_call c = {.sr = sr, .a = a, .h = h, .e = edge_attr, .o = opts};
    nx_status st = check(ctx, who, &c);
    if (st != NX_OK)
        return st;
    edge_formula f = {.root = -1};
    if (opts->formula) {
        st = parse_formula(ctx, who, opts->formula, edge_attr != NULL, &f);
        c.f = &f;
    }
    if (st == NX_OK)
        st = run_edge(ctx, who, &c, out);
    nx_sr_expr_free(ctx, &f.e);
    return st;
}
