/* semiring_ell_edge_aggregate: out[.., i, :] = (+)_p F(h_i, h_j, w, ij[, e]) with
 * j = indices[i, p], w = values[i, p], folded by sum (REAL), max (TROPICAL_MAX_PLUS) or min
 * (TROPICAL_MIN_PLUS) over each row's slots, pads included, over a square ELL (n = m). F is a
 * formula (text), one of the named edge functions, or (typed calls) a C builder. The descriptor
 * and the typed entry point; the graph builder and the formula form are ops/sparse/edge.c. */
#include <stdint.h>

#include "cache.h"
#include "ops/op.h"
#include "ops/sparse/sparse.h"

/* The schema's fields, then what only a typed call gives. */
typedef struct edge_args {
    nx_backend backend;
    int fold; /* text options: REAL, TROPICAL_MAX_PLUS, TROPICAL_MIN_PLUS */
    int edge; /* the named edge function when formula is not given */
    const char *formula;
    bool typed_call;
    const nx_semiring *semiring; /* a typed call's */
    const nx_edge_opts *typed;   /* the builder (expr, user, expr_key) and formula; NULL refused */
    const nx_tensor *edge_attr;
    int64_t n_cols; /* the typed ELL's; text options: the indices' rows (a graph is square) */
} edge_args;

static const char *const edge_formulas[] = {"w * hj", "w * (hj - hi)", "w * exp(-sqdist(hi, hj))",
                                            "hj - hi"};

static const edge_args *args_of(const nx_op_args *c)
{
    return c->opts;
}

/* The fold is an ENUM of the three algebras it has, not a SEMIRING option, so that the command
 * line refuses the others as a bad option; a typed call gives any semiring and is refused by the
 * check. */
static const nx_semiring *semiring_of(const edge_args *o)
{
    static const nx_semiring_kind kinds[3] = {NX_SEMIRING_REAL, NX_SEMIRING_TROPICAL_MAX_PLUS,
                                              NX_SEMIRING_TROPICAL_MIN_PLUS};
    if (o->typed_call)
        return nx_sr_or_real(o->semiring);
    return nx_semiring_builtin(kinds[o->fold > 0 && o->fold < 3 ? o->fold : 0]);
}

static nx_ell ell_of(const nx_op_args *c)
{
    const edge_args *o = args_of(c);
    const nx_tensor *idx = c->in[1];
    int64_t n = o->typed_call                     ? o->n_cols
                : idx && nx_tensor_ndim(idx) == 2 ? nx_tensor_shape(idx)[0]
                                                  : 0;
    return (nx_ell){.values = (nx_tensor *)(uintptr_t)c->in[0],
                    .indices = (nx_tensor *)(uintptr_t)idx,
                    .n_cols = n};
}

static const char *formula_of(const edge_args *o)
{
    if (o->typed_call)
        return o->typed ? o->typed->formula : NULL;
    if (o->formula && *o->formula) /* "" (the default): the named edge function */
        return o->formula;
    return edge_formulas[o->edge >= 0 && o->edge < 4 ? o->edge : 0];
}

static nx_status check(const nx_op_args *c)
{
    const edge_args *o = args_of(c);
    const char *who = c->who;
    const nx_semiring *sr = semiring_of(o);
    nx_monoid m;
    if (!nx_sparse_edge_monoid(sr, &m))
        return nx_rt_error(c->ctx, NX_ERR_UNSUPPORTED,
                           "%s: semiring '%s'; expected real, tropical_max_plus or "
                           "tropical_min_plus",
                           who, sr->name);
    const nx_edge_opts *t = o->typed;
    if (o->typed_call && (!t || (!t->formula == !t->expr) || (t->expr && !t->expr_key)))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: opts must give either a formula or expr with expr_key", who);
    nx_ell a = ell_of(c);
    const nx_tensor *h = c->in[2], *e = o->edge_attr;
    nx_status st = nx_ell_check(c->ctx, who, &a);
    if (st == NX_OK)
        st = nx_sparse_check_float(c->ctx, who, "h", h);
    if (st == NX_OK && e)
        st = nx_sparse_check_float(c->ctx, who, "edge_attr", e);
    if (st != NX_OK)
        return st;
    const int64_t *s = nx_tensor_shape(a.indices);
    if (s[0] != a.n_cols)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: the ELL is %lld x %lld; edges of a graph need a square one", who,
                           (long long)s[0], (long long)a.n_cols);
    if (e &&
        (nx_tensor_ndim(e) != 3 || nx_tensor_shape(e)[0] != s[0] || nx_tensor_shape(e)[1] != s[1]))
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: edge_attr must be [m, k_max, d_e] = [%lld, %lld, d_e]", who,
                           (long long)s[0], (long long)s[1]);
    return NX_OK;
}

typedef struct stage {
    const nx_op_args *oc;
    const nx_sparse_edge_formula *f; /* the parsed formula, or NULL with the builder */
} stage;

static void stage_key(nx_rt_cache_blob *b, const void *user)
{
    const stage *s = user;
    const edge_args *o = args_of(s->oc);
    if (s->f)
        nx_sr_key(b, "formula", &s->f->e, s->f->root);
    else
        nx_rt_cache_blob_str(b, "expr", o->typed->expr_key);
    nx_rt_cache_blob_i64(b, "kind", semiring_of(o)->kind);
    nx_rt_cache_blob_tensor(b, "e", o->edge_attr);
}

static nx_node input_of(nx_graph *g, const char *name, const nx_tensor *t)
{
    return nx_input(g, name, nx_tensor_dtype(t), nx_tensor_ndim(t), nx_tensor_shape(t));
}

static nx_status build(nx_graph *g, const nx_op_args *oc, const void *user, int nout, nx_node *outs)
{
    (void)nout;
    const stage *s = user;
    const edge_args *o = args_of(oc);
    const nx_semiring *sr = semiring_of(o);
    nx_node v = input_of(g, "values", oc->in[0]);
    nx_node idx = input_of(g, "indices", oc->in[1]);
    nx_node h = input_of(g, "h", oc->in[2]);
    nx_node e = o->edge_attr ? input_of(g, "edge_attr", o->edge_attr) : NX_NONE;
    if (s->f)
        outs[0] = nx_ell_edge_aggregate_node(g, sr, v, idx, h, e, nx_sparse_edge_formula_fn,
                                             (void *)(uintptr_t)s->f);
    else
        outs[0] = nx_ell_edge_aggregate_node(g, sr, v, idx, h, e, o->typed->expr, o->typed->user);
    return nx_graph_status(g);
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    static const char *const names[4] = {"the ELL's values", "the ELL's indices", "h", "edge_attr"};
    const edge_args *o = args_of(c);
    const char *text = formula_of(o);
    nx_sparse_edge_formula f = {.root = -1};
    stage s = {.oc = c};
    nx_status st = NX_OK;
    if (text) {
        st = nx_sparse_edge_parse(c->ctx, c->who, text, o->edge_attr != NULL, &f);
        s.f = &f;
    }
    nx_program *p = NULL;
    if (st == NX_OK)
        st = nx_op_program(c, "edge", stage_key, build, &s, 1, &p);
    const nx_tensor *in[4] = {c->in[0], c->in[1], c->in[2], o->edge_attr};
    if (st == NX_OK)
        st = nx_sparse_run(c->ctx, c->who, p, o->edge_attr ? 4 : 3, in, names, outs);
    nx_sr_expr_free(c->ctx, &f.e);
    return st;
}

static const nx_op_opt opts[] = {
    {"semiring", NX_OPT_ENUM, "REAL", "REAL|TROPICAL_MAX_PLUS|TROPICAL_MIN_PLUS", 1,
     "the fold: sum, max or min over each row's slots (pads included)"},
    {"edge", NX_OPT_ENUM, "message", "message|diffusion|gaussian|relative", 1,
     "F: w*hj | w*(hj-hi) | w*exp(-sqdist(hi,hj)) (one column) | hj-hi"},
    {"formula", NX_OPT_STRING, "", NULL, 1,
     "F over hi, hj (d-vectors), w, ij (and e); when given, edge is ignored"},
};

#define F(field)                                                                                   \
    {                                                                                              \
        offsetof(edge_args, field), NX_OP_NO_FIELD, sizeof(((edge_args *)0)->field)                \
    }
static const nx_op_field fields[] = {F(fold), F(edge), F(formula)};
#undef F

/* the (retired) golden/tolerance.tsv's ell_edge_aggregate rows */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-12},
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-5},
};

static const char *const aliases[] = {"ell_edge_aggregate", NULL};

const nx_op_desc nx_op_semiring_ell_edge_aggregate = {
    .info = {.nopts = 3, .opts = opts, .aliases = aliases},
    .opts_size = sizeof(edge_args),
    .fields = fields,
    .backend_offset = offsetof(edge_args, backend),
    .check = check,
    .run = run,
    .golden = "sparse",
    .tols = tols,
    .ntols = 2,
};

nx_status nx_semiring_ell_edge_aggregate(nx_ctx *ctx, const nx_semiring *sr, const nx_ell *a,
                                         const nx_tensor *h, const nx_tensor *edge_attr,
                                         const nx_edge_opts *opts, nx_tensor **out)
{
    static const char *who = "nx_semiring_ell_edge_aggregate";
    nx_status st = nx_sr_check_call(ctx, who, sr, out);
    if (st != NX_OK)
        return st;
    if (!a)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: the ELL is NULL", who);
    if (!a->values || !a->indices)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: the ELL's %s tensor is NULL", who,
                           a->values ? "indices" : "values");
    if (!h)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: h is NULL", who);
    edge_args o = {.backend = opts ? opts->backend : NX_BACKEND_AUTO,
                   .semiring = sr,
                   .formula = opts ? opts->formula : NULL,
                   .typed_call = true,
                   .typed = opts,
                   .edge_attr = edge_attr,
                   .n_cols = a->n_cols};
    return nx_op_run(ctx, &nx_op_semiring_ell_edge_aggregate,
                     (const nx_tensor *const[]){a->values, a->indices, h}, &o, out);
}
