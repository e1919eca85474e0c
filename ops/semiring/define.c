/* User semirings: from a formula and from IR expressions. Every part is checked when the
 * semiring is defined (names, arity, constant identity, float results at f32 and f64), so a bad
 * definition never reaches an entry point. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "semiring.h"

#define MSG 512

static nx_status new_semiring(nx_ctx *ctx, const char *name, nx_semiring **out)
{
    nx_semiring *sr = nx_rt_calloc(ctx, 1, sizeof *sr);
    if (!sr)
        return nx_rt_nomem(ctx, "semiring", sizeof *sr);
    sr->ctx = ctx;
    sr->kind = NX_SEMIRING_USER;
    snprintf(sr->name, sizeof sr->name, "%s", name ? name : "user");
    sr->times = sr->finalize = sr->mfinal = -1;
    for (int i = 0; i < NX_MONOID_MAX_CARRY; i++)
        sr->lift[i] = sr->combine[i] = sr->ident[i] = -1;
    sr->ncarry = 1;
    *out = sr;
    return NX_OK;
}

/* Whether root is exactly f(a, b) or f(b, a). */
static bool is_ab(const nx_sr_expr *e, int32_t root, int32_t op)
{
    const nx_sr_node *n = &e->nodes[root];
    if (n->op != op || n->nops != 2)
        return false;
    const nx_sr_node *x = &e->nodes[n->ops[0]], *y = &e->nodes[n->ops[1]];
    if (x->op != NX_SR_VAR || y->op != NX_SR_VAR)
        return false;
    return (x->var == NX_SR_VA && y->var == NX_SR_VB) || (x->var == NX_SR_VB && y->var == NX_SR_VA);
}

static bool builtin_plus(const nx_sr_expr *e, int32_t root, nx_monoid *m, double *identity)
{
    static const struct {
        int32_t op;
        nx_monoid m;
        double id;
    } rows[] = {{NX_PRIM_ADD, NX_MONOID_SUM, 0.0},
                {NX_PRIM_MAX, NX_MONOID_MAX, -INFINITY},
                {NX_PRIM_MIN, NX_MONOID_MIN, INFINITY},
                {NX_SR_LOGADDEXP, NX_MONOID_LOGSUMEXP, -INFINITY}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (is_ab(e, root, rows[i].op)) {
            *m = rows[i].m;
            *identity = rows[i].id;
            return true;
        }
    }
    return false;
}

static bool same_double(double a, double b)
{
    return a == b || (isnan(a) && isnan(b));
}

/* A custom (+) must make a monoid nx_reduce_custom accepts (arity, carry dtypes, identity), and
 * the fold must give a scalar of the working dtype. */
static nx_status check_fold(nx_ctx *ctx, nx_graph *g, const nx_semiring *sr, nx_dtype dt,
                            const char *who)
{
    int64_t two = 2;
    int axis = 0;
    nx_node r = nx_semiring_reduce(g, sr, nx_input(g, "x", dt, 1, &two), 1, &axis);
    if (!r)
        return nx_rt_error(ctx, nx_graph_status(g), "%s: plus does not fold at %s: %s", who,
                           nx_dtype_name(dt), nx_graph_error(g));
    if (nx_node_dtype(g, r) != dt)
        return nx_rt_error(ctx, NX_ERR_DTYPE, "%s: the fold gives %s for %s elements", who,
                           nx_dtype_name(nx_node_dtype(g, r)), nx_dtype_name(dt));
    return NX_OK;
}

/* Builds every part at f32 and f64 in a scratch graph: each must give a 0-d float of that dtype. */
static nx_status check_parts(nx_ctx *ctx, const nx_semiring *sr, const char *who)
{
    static const nx_dtype dts[2] = {NX_DTYPE_F32, NX_DTYPE_F64};
    for (int k = 0; k < 2; k++) {
        nx_graph *g = NULL;
        nx_status st = nx_graph_new(ctx, &g);
        if (st != NX_OK)
            return st;
        nx_node a = nx_placeholder(g, dts[k]), b = nx_placeholder(g, dts[k]);
        nx_node vars[NX_SR_NVARS] = {0};
        vars[NX_SR_VA] = a;
        vars[NX_SR_VB] = b;
        vars[NX_SR_VCA0] = a;
        vars[NX_SR_VCB0] = b;
        /* Custom monoids of several components are checked by nx_reduce_custom when used. */
        bool one = sr->ncarry == 1 || sr->builtin_plus;
        struct {
            const char *what;
            int32_t root;
        } parts[] = {{"times", sr->times},
                     {"plus", sr->builtin_plus || !one ? -1 : sr->combine[0]},
                     {"finalize", sr->builtin_plus ? sr->finalize
                                  : one            ? sr->mfinal
                                                   : -1}};
        for (size_t i = 0; i < 3 && st == NX_OK; i++) {
            if (parts[i].root < 0)
                continue;
            nx_node r = nx_sr_build(g, &sr->e, parts[i].root, dts[k], vars);
            if (!r) {
                st = nx_graph_status(g);
                nx_rt_error(ctx, st, "%s: %s does not build at %s: %s", who, parts[i].what,
                            nx_dtype_name(dts[k]), nx_graph_error(g));
            } else if (nx_node_dtype(g, r) != dts[k] || nx_node_ndim(g, r) != 0) {
                st = nx_rt_error(ctx, NX_ERR_DTYPE,
                                 "%s: %s gives %s for %s operands; expected a %s value (a "
                                 "comparison needs select(cond, x, y))",
                                 who, parts[i].what, nx_dtype_name(nx_node_dtype(g, r)),
                                 nx_dtype_name(dts[k]), nx_dtype_name(dts[k]));
            }
        }
        if (st == NX_OK && !sr->builtin_plus)
            st = check_fold(ctx, g, sr, dts[k], who);
        nx_graph_free(g);
        if (st != NX_OK)
            return st;
    }
    return NX_OK;
}

/* ---- formulas --------------------------------------------------------------------------------*/

typedef struct keys {
    int plus, times, zero, one, ann, finalize;
} keys;

static nx_status assign_keys(nx_ctx *ctx, const nx_sr_stmt *s, int n, keys *k)
{
    *k = (keys){-1, -1, -1, -1, -1, -1};
    for (int i = 0; i < n; i++) {
        int *slot = !strcmp(s[i].key, "plus")          ? &k->plus
                    : !strcmp(s[i].key, "times")       ? &k->times
                    : !strcmp(s[i].key, "zero")        ? &k->zero
                    : !strcmp(s[i].key, "one")         ? &k->one
                    : !strcmp(s[i].key, "annihilator") ? &k->ann
                    : !strcmp(s[i].key, "finalize")    ? &k->finalize
                                                       : NULL;
        if (!slot)
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                               "semiring formula:%d:%d: unknown key '%s' (expected plus, times, "
                               "zero, one, annihilator or finalize)",
                               s[i].line, s[i].col, s[i].key);
        if (*slot >= 0)
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                               "semiring formula:%d:%d: '%s' is given twice (first at %d:%d)",
                               s[i].line, s[i].col, s[i].key, s[*slot].line, s[*slot].col);
        *slot = i;
    }
    const char *missing = k->plus < 0 ? "plus" : k->times < 0 ? "times" : k->zero < 0 ? "zero" : 0;
    if (missing)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "semiring formula: '%s' is missing (plus, times and zero are required)",
                           missing);
    return NX_OK;
}

static nx_status check_vars(nx_ctx *ctx, const nx_sr_expr *e, const nx_sr_stmt *s, bool b_ok)
{
    int bad = 0;
    uint64_t allowed = (1u << NX_SR_VA) | (b_ok ? 1u << NX_SR_VB : 0);
    if (nx_sr_vars_ok(e, s->root, allowed, &bad))
        return NX_OK;
    return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                       "semiring formula:%d:%d: '%s' may use only %s, but uses b", s->line, s->col,
                       s->key, b_ok ? "a and b" : "a");
}

static nx_status const_of(nx_ctx *ctx, const nx_sr_expr *e, const nx_sr_stmt *s, double *v)
{
    const nx_sr_node *n = &e->nodes[s->root];
    if (n->op != NX_SR_CONST)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "semiring formula:%d:%d: '%s' must be a number (or inf, -inf, nan), "
                           "not an expression",
                           s->line, s->col, s->key);
    *v = n->value;
    return NX_OK;
}

static nx_status fill_from_stmts(nx_ctx *ctx, nx_semiring *sr, const nx_sr_stmt *s, int n)
{
    keys k;
    nx_status st = assign_keys(ctx, s, n, &k);
    if (st == NX_OK)
        st = check_vars(ctx, &sr->e, &s[k.plus], true);
    if (st == NX_OK)
        st = check_vars(ctx, &sr->e, &s[k.times], true);
    if (st == NX_OK && k.finalize >= 0)
        st = check_vars(ctx, &sr->e, &s[k.finalize], false);
    if (st == NX_OK)
        st = const_of(ctx, &sr->e, &s[k.zero], &sr->identity);
    if (st == NX_OK && k.ann >= 0) {
        st = const_of(ctx, &sr->e, &s[k.ann], &sr->ann);
        sr->has_ann = true;
    }
    double one;
    if (st == NX_OK && k.one >= 0)
        st = const_of(ctx, &sr->e, &s[k.one], &one);
    if (st != NX_OK)
        return st;
    sr->times = s[k.times].root;
    double want;
    if (builtin_plus(&sr->e, s[k.plus].root, &sr->plus, &want)) {
        if (!same_double(want, sr->identity))
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                               "semiring formula:%d:%d: zero is %g but plus is the %s monoid, "
                               "whose identity is %g",
                               s[k.zero].line, s[k.zero].col, sr->identity,
                               nx_ir_monoid_name(sr->plus), want);
        sr->builtin_plus = true;
        sr->finalize = k.finalize >= 0 ? s[k.finalize].root : -1;
        sr->props =
            NX_SEMIRING_COMMUTATIVE | NX_SEMIRING_DIFFERENTIABLE |
            (sr->plus == NX_MONOID_MAX || sr->plus == NX_MONOID_MIN ? NX_SEMIRING_IDEMPOTENT : 0);
        if (sr->plus == NX_MONOID_LOGSUMEXP)
            sr->ncarry = 2;
        return NX_OK;
    }
    sr->builtin_plus = false;
    sr->combine[0] = s[k.plus].root;
    sr->ident[0] = s[k.zero].root;
    sr->mfinal = k.finalize >= 0 ? s[k.finalize].root : -1;
    sr->props = 0;
    return NX_OK;
}

nx_status nx_semiring_parse(nx_ctx *ctx, const char *name, const char *formula, nx_semiring **out)
{
    if (!ctx || !formula || !out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_semiring_parse: ctx, formula and out must not be NULL");
    *out = NULL;
    nx_semiring *sr = NULL;
    nx_status st = new_semiring(ctx, name, &sr);
    if (st != NX_OK)
        return st;
    nx_sr_stmt stmts[NX_SR_MAX_STMTS];
    int n = 0;
    char msg[MSG];
    st = nx_sr_parse_stmts(ctx, "semiring formula", formula, NX_SR_DIALECT_SEMIRING, &sr->e, stmts,
                           &n, msg, sizeof msg);
    if (st != NX_OK)
        nx_rt_error(ctx, st, "%s", msg);
    if (st == NX_OK)
        st = fill_from_stmts(ctx, sr, stmts, n);
    if (st == NX_OK)
        st = check_parts(ctx, sr, "semiring formula");
    if (st != NX_OK) {
        nx_semiring_free(sr);
        return st;
    }
    *out = sr;
    return NX_OK;
}

/* ---- IR expressions --------------------------------------------------------------------------*/

typedef struct importer {
    nx_ctx *ctx;
    const nx_graph *g;
    nx_sr_expr *e;
    int32_t *memo; /* graph node -> expression node + 1 */
    nx_node ph[NX_SR_NVARS];
    uint64_t allowed;
    const char *part;
    nx_status st;
} importer;

static bool elementwise(int op)
{
    return (op >= NX_PRIM_NEG && op <= NX_PRIM_SELECT) || op == NX_PRIM_CAST;
}

static int32_t import_node(importer *im, nx_node id);

static int32_t import_leaf(importer *im, nx_node id, const nx_ir_node *n)
{
    nx_sr_node out = {.dtype = NX_DTYPE_COUNT};
    if (n->op == NX_PRIM_PLACEHOLDER) {
        int v = -1;
        for (int i = 0; i < NX_SR_NVARS; i++)
            if (im->ph[i] == id && ((im->allowed >> i) & 1))
                v = i;
        if (v < 0) {
            im->st = nx_rt_error(im->ctx, NX_ERR_INVALID_ARG,
                                 "nx_semiring_define: %s uses placeholder %%%u, which is not one "
                                 "of its own",
                                 im->part, id);
            return -1;
        }
        out.op = NX_SR_VAR;
        out.var = v;
    } else {
        nx_dtype dt = (nx_dtype)n->dtype;
        nx_ir_val v = nx_ir_get(nx_ir_node_blob(&im->g->s, n), dt, 0);
        out.op = NX_SR_CONST;
        out.dtype = nx_ir_is_float(dt) ? NX_DTYPE_COUNT : dt;
        out.value = nx_ir_to_double(v, dt);
    }
    return nx_sr_push(im->ctx, im->e, &out);
}

static int32_t import_node(importer *im, nx_node id)
{
    if (im->st != NX_OK)
        return -1;
    if (id == NX_NONE || id > im->g->s.n) {
        im->st = nx_rt_error(im->ctx, NX_ERR_INVALID_ARG, "nx_semiring_define: %s is not a node",
                             im->part);
        return -1;
    }
    if (im->memo[id])
        return im->memo[id] - 1;
    const nx_ir_node *n = nx_ir_node_at(&im->g->s, id);
    int32_t r;
    if (n->op == NX_PRIM_PLACEHOLDER || (n->op == NX_PRIM_CONSTANT && n->ndim == 0)) {
        r = import_leaf(im, id, n);
    } else if (elementwise(n->op) && n->ndim == 0) {
        nx_sr_node out = {.op = n->op, .nops = (int32_t)n->nops, .dtype = NX_DTYPE_COUNT};
        const nx_node *ops = nx_ir_node_ops(&im->g->s, n);
        for (uint32_t k = 0; k < n->nops && k < 3; k++)
            if ((out.ops[k] = import_node(im, ops[k])) < 0)
                return -1;
        if (n->op == NX_PRIM_CAST && !nx_ir_is_float((nx_dtype)n->dtype))
            out.dtype = n->dtype;
        r = nx_sr_push(im->ctx, im->e, &out);
    } else {
        im->st = nx_rt_error(im->ctx, NX_ERR_INVALID_ARG,
                             "nx_semiring_define: %s uses %%%u (%s, %d-d); expected 0-d "
                             "constants, placeholders, elementwise ops, select and cast",
                             im->part, id, nx_ir_prim_name(n->op), n->ndim);
        return -1;
    }
    if (r < 0 && im->st == NX_OK)
        im->st = nx_rt_nomem(im->ctx, "nx_semiring_define", sizeof(nx_sr_node));
    if (r >= 0)
        im->memo[id] = r + 1;
    return r;
}

static int32_t import(importer *im, const char *part, nx_node root, uint64_t allowed)
{
    if (im->st != NX_OK)
        return -1;
    memset(im->memo, 0, ((size_t)im->g->s.n + 1) * sizeof(int32_t));
    im->part = part;
    im->allowed = allowed;
    return import_node(im, root);
}

static nx_status import_custom(importer *im, nx_semiring *sr, const nx_monoid_def *m)
{
    if (m->ncarry < 1 || m->ncarry > NX_MONOID_MAX_CARRY)
        return nx_rt_error(im->ctx, NX_ERR_INVALID_ARG,
                           "nx_semiring_define: custom monoid has %d carry components; expected "
                           "1..%d",
                           m->ncarry, NX_MONOID_MAX_CARRY);
    sr->ncarry = m->ncarry;
    uint64_t carries = 0;
    im->ph[NX_SR_VX] = m->x;
    for (int i = 0; i < m->ncarry; i++) {
        im->ph[NX_SR_VCA0 + i] = m->a[i];
        im->ph[NX_SR_VCB0 + i] = m->b[i];
        carries |= (1ull << (NX_SR_VCA0 + i)) | (1ull << (NX_SR_VCB0 + i));
    }
    for (int i = 0; i < m->ncarry; i++) {
        if (m->lift[i] || m->ncarry > 1)
            sr->lift[i] = import(im, "lift", m->lift[i], 1ull << NX_SR_VX);
        sr->combine[i] = import(im, "combine", m->combine[i], carries);
        sr->ident[i] = import(im, "identity", m->identity[i], 0);
    }
    uint64_t acarries = 0;
    for (int i = 0; i < m->ncarry; i++)
        acarries |= 1ull << (NX_SR_VCA0 + i);
    if (m->finalize)
        sr->mfinal = import(im, "finalize", m->finalize, acarries);
    return im->st;
}

static nx_status import_def(importer *im, nx_semiring *sr, const nx_semiring_def *def)
{
    im->ph[NX_SR_VA] = def->a;
    im->ph[NX_SR_VB] = def->b;
    sr->times = import(im, "times", def->times, (1u << NX_SR_VA) | (1u << NX_SR_VB));
    sr->identity = def->identity;
    sr->has_ann = def->has_annihilator;
    sr->ann = def->annihilator;
    sr->props =
        def->props & (NX_SEMIRING_COMMUTATIVE | NX_SEMIRING_IDEMPOTENT | NX_SEMIRING_STRICT);
    if (def->custom)
        return import_custom(im, sr, def->custom);
    if (def->plus != NX_MONOID_SUM && def->plus != NX_MONOID_MAX && def->plus != NX_MONOID_MIN &&
        def->plus != NX_MONOID_LOGSUMEXP)
        return nx_rt_error(im->ctx, NX_ERR_INVALID_ARG,
                           "nx_semiring_define: plus is %s; expected sum, max, min or logsumexp "
                           "(or a custom monoid)",
                           nx_ir_monoid_name(def->plus));
    sr->builtin_plus = true;
    sr->plus = def->plus;
    sr->ncarry = def->plus == NX_MONOID_LOGSUMEXP ? 2 : 1;
    sr->props |= NX_SEMIRING_DIFFERENTIABLE;
    im->ph[NX_SR_VA] = def->fa;
    if (def->finalize)
        sr->finalize = import(im, "finalize", def->finalize, 1u << NX_SR_VA);
    return im->st;
}

nx_status nx_semiring_define(nx_ctx *ctx, const nx_semiring_def *def, nx_semiring **out)
{
    if (!ctx || !def || !def->g || !out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_semiring_define: ctx, def, def->g and out must not be NULL");
    *out = NULL;
    nx_semiring *sr = NULL;
    nx_status st = new_semiring(ctx, def->name, &sr);
    if (st != NX_OK)
        return st;
    size_t memo_bytes = ((size_t)def->g->s.n + 1) * sizeof(int32_t);
    importer im = {.ctx = ctx, .g = def->g, .e = &sr->e, .st = NX_OK};
    im.memo = nx_rt_alloc(ctx, memo_bytes);
    if (!im.memo)
        st = nx_rt_nomem(ctx, "nx_semiring_define", memo_bytes);
    if (st == NX_OK)
        st = import_def(&im, sr, def);
    if (im.memo)
        nx_rt_free(ctx, im.memo, memo_bytes);
    if (st == NX_OK)
        st = check_parts(ctx, sr, "nx_semiring_define");
    if (st != NX_OK) {
        nx_semiring_free(sr);
        return st;
    }
    *out = sr;
    return NX_OK;
}
