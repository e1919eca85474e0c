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
    int nd = nx_node_ndim(g, h);
    int64_t hs[NX_MAX_DIMS], vs[NX_MAX_DIMS];
    nx_node_shape(g, h, hs);
    nx_node_shape(g, values, vs);
    if (nd < 2 || nd >= NX_MAX_DIMS || hs[nd - 2] != vs[0] || nx_node_ndim(g, values) != 2)
        return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                 "%s: h must be [..., n, d] with n = the ELL's "
                                 "m and at most %d dims",
                                 who, NX_MAX_DIMS - 1);
    nx_dtype dt = nx_node_dtype(g, h);
    if (nx_node_dtype(g, values) != dt)
        return nx_ir_graph_failf(g, NX_ERR_DTYPE, "%s: h is %s but values are %s", who,
                                 nx_dtype_name(dt), nx_dtype_name(nx_node_dtype(g, values)));
    int64_t w3[3] = {vs[0], vs[1], 1};
    nx_node w = nx_reshape(g, values, 3, w3);
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
    if (fd < 3 || fs[fd - 3] != vs[0] || fs[fd - 2] != vs[1])
        return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                 "%s: the edge function's result has %d dims; "
                                 "expected [..., m, k_max, d_out] = [..., %lld, %lld, d_out]",
                                 who, fd, (long long)vs[0], (long long)vs[1]);
    int axis = -2;
    return nx_reduce(g, f, 1, &axis, m, false);
}

/* ---- entry point -----------------------------------------------------------------------------*/

typedef struct edge_call {
    const nx_semiring *sr;
    const nx_ell *a;
    const nx_tensor *h, *e;
    const nx_edge_opts *o;
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
    outs[0] = nx_ell_edge_aggregate_node(g, c->sr, v, idx, h, e, c->o->expr, c->o->user);
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
    if (!c->o || !c->o->expr || !c->o->expr_key)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: opts must give expr and expr_key", who);
    nx_status st = nx_ell_check(ctx, who, c->a);
    if (st == NX_OK)
        st = nx_sr_check_float(ctx, who, "h", c->h);
    if (st == NX_OK && c->e)
        st = nx_sr_check_float(ctx, who, "edge_attr", c->e);
    if (st != NX_OK)
        return st;
    const int64_t *s = nx_tensor_shape(c->a->values);
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
    nx_rt_cache_blob key;
    nx_rt_cache_blob_init(&key, ctx);
    nx_rt_cache_blob_str(&key, "op", "ell_edge_aggregate");
    nx_rt_cache_blob_str(&key, "expr", opts->expr_key);
    nx_rt_cache_blob_i64(&key, "kind", sr->kind);
    nx_sr_key_tensor(&key, "values", a->values);
    nx_sr_key_tensor(&key, "indices", a->indices);
    nx_sr_key_tensor(&key, "h", h);
    nx_sr_key_tensor(&key, "e", edge_attr);
    nx_program *p = NULL;
    st = nx_sr_program(ctx, &key, opts->backend, build, &c, &p);
    nx_rt_cache_blob_free(&key);
    if (st != NX_OK)
        return st;
    const nx_tensor *in[4] = {a->values, a->indices, h, edge_attr};
    return nx_program_run(p, in, out);
}
