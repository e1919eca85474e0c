/* Semirings: the expression trees behind them, the six built-in algebras, user definitions from
 * formulas and from IR expressions, and the graph builders every entry point shares. */
#include <math.h>
#include <string.h>

#include "cache.h"
#include "semiring.h"

/* ---- expressions -----------------------------------------------------------------------------*/

int32_t nx_sr_push(nx_ctx *ctx, nx_sr_expr *e, const nx_sr_node *n)
{
    if (e->n == e->cap) {
        size_t cap = (size_t)e->cap;
        void *p = e->nodes;
        if (!nx_rt_grow(ctx, &p, &cap, (size_t)e->n + 1, sizeof(nx_sr_node)) || cap > INT32_MAX)
            return -1;
        e->nodes = p;
        e->cap = (int32_t)cap;
    }
    e->nodes[e->n] = *n;
    return e->n++;
}

void nx_sr_expr_free(nx_ctx *ctx, nx_sr_expr *e)
{
    if (e->nodes)
        nx_rt_free(ctx, e->nodes, (size_t)e->cap * sizeof(nx_sr_node));
    e->nodes = NULL;
    e->n = e->cap = 0;
}

static nx_node build_logaddexp(nx_graph *g, nx_dtype dt, nx_node a, nx_node b)
{
    /* Equal arguments (both infinite included) take a + log 2, so -inf stays -inf and no inf - inf
     * appears; otherwise the larger plus log1p(exp(-|a - b|)). */
    nx_node m = nx_maximum(g, a, b);
    nx_node d = nx_neg(g, nx_abs(g, nx_sub(g, a, b)));
    nx_node r = nx_add(g, m, nx_log1p(g, nx_exp(g, d)));
    nx_node same = nx_add(g, a, nx_scalar(g, dt, 0.69314718055994530942));
    return nx_select(g, nx_eq(g, a, b), same, r);
}

static nx_node build_node(nx_graph *g, const nx_sr_node *n, const nx_node *built, nx_dtype dt,
                          const nx_node *vars)
{
    nx_node o[3] = {0, 0, 0};
    for (int i = 0; i < n->nops; i++)
        o[i] = built[n->ops[i]];
    switch (n->op) {
    case NX_SR_CONST:
        return nx_scalar(g, n->dtype == NX_DTYPE_COUNT ? dt : (nx_dtype)n->dtype, n->value);
    case NX_SR_VAR:
        if (!vars[n->var])
            return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                     "semiring: an expression uses a variable not bound here");
        return vars[n->var];
    case NX_SR_LOGADDEXP:
        return build_logaddexp(g, dt, o[0], o[1]);
    case NX_SR_VSUM: {
        int axis = -1;
        return nx_reduce(g, o[0], 1, &axis, NX_MONOID_SUM, true);
    }
    case NX_PRIM_CAST:
        return nx_cast(g, o[0], n->dtype == NX_DTYPE_COUNT ? dt : (nx_dtype)n->dtype);
    default:
        if (!nx_ir_check_handles(g, "semiring", n->nops, o))
            return NX_NONE;
        return nx_ir_make(g, "semiring", (nx_prim)n->op, n->nops, o, 0, NULL, 0, NULL);
    }
}

nx_node nx_sr_build(nx_graph *g, const nx_sr_expr *e, int32_t root, nx_dtype dt,
                    const nx_node *vars)
{
    if (!g || root < 0 || root >= e->n)
        return NX_NONE;
    nx_ctx *ctx = nx_graph_ctx(g);
    /* Nodes come in topological order: mark what root reads walking down, then build walking
     * up, so parts sharing the array never touch each other's variables. */
    size_t n = (size_t)root + 1;
    nx_node *built = nx_rt_calloc(ctx, n, sizeof(nx_node) + 1);
    if (!built) {
        nx_ir_graph_fail(g, NX_ERR_NOMEM, "semiring: out of memory building an expression");
        return NX_NONE;
    }
    uint8_t *need = (uint8_t *)(built + n);
    need[root] = 1;
    for (int32_t i = root; i >= 0; i--)
        for (int k = 0; need[i] && k < e->nodes[i].nops; k++)
            need[e->nodes[i].ops[k]] = 1;
    for (int32_t i = 0; i <= root; i++) {
        if (!need[i])
            continue;
        built[i] = build_node(g, &e->nodes[i], built, dt, vars);
        if (!built[i])
            break;
    }
    nx_node r = built[root];
    nx_rt_free(ctx, built, n * (sizeof(nx_node) + 1));
    return r;
}

static bool vars_walk(const nx_sr_expr *e, int32_t i, uint64_t allowed, int *bad)
{
    const nx_sr_node *n = &e->nodes[i];
    if (n->op == NX_SR_VAR && !((allowed >> n->var) & 1)) {
        *bad = n->var;
        return false;
    }
    for (int k = 0; k < n->nops; k++)
        if (!vars_walk(e, n->ops[k], allowed, bad))
            return false;
    return true;
}

bool nx_sr_vars_ok(const nx_sr_expr *e, int32_t root, uint64_t allowed, int *bad)
{
    return root < 0 || vars_walk(e, root, allowed, bad);
}

static void key_walk(nx_rt_cache_blob *b, const nx_sr_expr *e, int32_t i)
{
    const nx_sr_node *n = &e->nodes[i];
    int64_t head[4] = {n->op, n->nops, n->var, n->dtype};
    nx_rt_cache_blob_bytes(b, "n", head, sizeof head);
    if (n->op == NX_SR_CONST)
        nx_rt_cache_blob_bytes(b, "v", &n->value, sizeof n->value);
    for (int k = 0; k < n->nops; k++)
        key_walk(b, e, n->ops[k]);
}

void nx_sr_key(nx_rt_cache_blob *b, const char *field, const nx_sr_expr *e, int32_t root)
{
    nx_rt_cache_blob_i64(b, field, root < 0 ? -1 : 0);
    if (root >= 0)
        key_walk(b, e, root);
}

void nx_sr_semiring_key(nx_rt_cache_blob *b, const nx_semiring *sr)
{
    nx_rt_cache_blob_str(b, "semiring", sr->name);
    nx_rt_cache_blob_i64(b, "kind", sr->kind);
    nx_sr_key(b, "times", &sr->e, sr->times);
    nx_sr_key(b, "finalize", &sr->e, sr->finalize);
    nx_rt_cache_blob_i64(b, "plus", sr->builtin_plus ? (int64_t)sr->plus : -1);
    nx_rt_cache_blob_i64(b, "ncarry", sr->ncarry);
    if (!sr->builtin_plus) {
        for (int i = 0; i < sr->ncarry; i++) {
            nx_sr_key(b, "lift", &sr->e, sr->lift[i]);
            nx_sr_key(b, "combine", &sr->e, sr->combine[i]);
            nx_sr_key(b, "ident", &sr->e, sr->ident[i]);
        }
        nx_sr_key(b, "mfinal", &sr->e, sr->mfinal);
    }
    nx_rt_cache_blob_bytes(b, "identity", &sr->identity, sizeof sr->identity);
}

/* ---- built-ins -------------------------------------------------------------------------------*/

#define VAR(v)                                                                                     \
    {                                                                                              \
        .op = NX_SR_VAR, .var = (v), .ops = { 0 }                                                  \
    }
#define CONST(x)                                                                                   \
    {                                                                                              \
        .op = NX_SR_CONST, .dtype = NX_DTYPE_COUNT, .value = (x), .ops = { 0 }                     \
    }
#define BIN(p, i, j)                                                                               \
    {                                                                                              \
        .op = NX_PRIM_##p, .nops = 2, .ops = {(i), (j) }                                           \
    }
#define UN(p, i)                                                                                   \
    {                                                                                              \
        .op = NX_PRIM_##p, .nops = 1, .ops = {(i) }                                                \
    }

/* a*b, a+b at 2 and 3. */
static nx_sr_node ring_nodes[] = {VAR(NX_SR_VA), VAR(NX_SR_VB), BIN(MUL, 0, 1), BIN(ADD, 0, 1)};
/* (a-b)^2 at 3; sqrt(max(a, 0)) at 10, written m == 0 ? 0 : sqrt(m == 0 ? 1 : m) so the
 * gradient at C = 0 is 0 rather than dy / (2 * 0) (both selects are needed: the inner one keeps
 * the unused branch's derivative finite, the outer one zeroes the cotangent). */
static nx_sr_node eucl_nodes[] = {VAR(NX_SR_VA),
                                  VAR(NX_SR_VB),
                                  BIN(SUB, 0, 1),
                                  BIN(MUL, 2, 2),
                                  CONST(0.0),
                                  BIN(MAX, 0, 4),
                                  BIN(EQ, 5, 4),
                                  CONST(1.0),
                                  {.op = NX_PRIM_SELECT, .nops = 3, .ops = {6, 7, 5}},
                                  UN(SQRT, 8),
                                  {.op = NX_PRIM_SELECT, .nops = 3, .ops = {6, 4, 9}}};
/* (a != 0) & (b != 0) ? 1 : 0 at 7; max(a, 0) at 8, so an empty fold (max's -inf) is false. */
static nx_sr_node bool_nodes[] = {
    VAR(NX_SR_VA), VAR(NX_SR_VB),  CONST(0.0), BIN(NE, 0, 2),
    BIN(NE, 1, 2), BIN(AND, 3, 4), CONST(1.0), {.op = NX_PRIM_SELECT, .nops = 3, .ops = {5, 6, 2}},
    BIN(MAX, 0, 2)};

#define NODES(a)                                                                                   \
    {                                                                                              \
        .nodes = (a), .n = (int32_t)(sizeof(a) / sizeof((a)[0])), .cap = 0                         \
    }
#define COMMON .ctx = NULL, .builtin_plus = true, .mfinal = -1

static const nx_semiring builtins[NX_SEMIRING_USER] = {
    [NX_SEMIRING_REAL] = {COMMON, .kind = NX_SEMIRING_REAL, .name = "real",
                          .props = NX_SEMIRING_COMMUTATIVE | NX_SEMIRING_STRICT |
                                   NX_SEMIRING_DIFFERENTIABLE,
                          .e = NODES(ring_nodes), .times = 2, .plus = NX_MONOID_SUM,
                          .identity = 0.0, .has_ann = true, .ann = 0.0, .ncarry = 1,
                          .finalize = -1},
    [NX_SEMIRING_LOG] = {COMMON, .kind = NX_SEMIRING_LOG, .name = "log",
                         .props = NX_SEMIRING_COMMUTATIVE | NX_SEMIRING_STRICT |
                                  NX_SEMIRING_DIFFERENTIABLE,
                         .e = NODES(ring_nodes), .times = 3, .plus = NX_MONOID_LOGSUMEXP,
                         .identity = -INFINITY, .has_ann = true, .ann = -INFINITY, .ncarry = 2,
                         .finalize = -1},
    [NX_SEMIRING_TROPICAL_MAX_PLUS] = {COMMON, .kind = NX_SEMIRING_TROPICAL_MAX_PLUS,
                                       .name = "tropical_max_plus",
                                       .props = NX_SEMIRING_COMMUTATIVE | NX_SEMIRING_IDEMPOTENT |
                                                NX_SEMIRING_STRICT | NX_SEMIRING_DIFFERENTIABLE,
                                       .e = NODES(ring_nodes), .times = 3, .plus = NX_MONOID_MAX,
                                       .identity = -INFINITY, .has_ann = true, .ann = -INFINITY,
                                       .ncarry = 1, .finalize = -1},
    [NX_SEMIRING_TROPICAL_MIN_PLUS] = {COMMON, .kind = NX_SEMIRING_TROPICAL_MIN_PLUS,
                                       .name = "tropical_min_plus",
                                       .props = NX_SEMIRING_COMMUTATIVE | NX_SEMIRING_IDEMPOTENT |
                                                NX_SEMIRING_STRICT | NX_SEMIRING_DIFFERENTIABLE,
                                       .e = NODES(ring_nodes), .times = 3, .plus = NX_MONOID_MIN,
                                       .identity = INFINITY, .has_ann = true, .ann = INFINITY,
                                       .ncarry = 1, .finalize = -1},
    [NX_SEMIRING_BOOLEAN] = {COMMON, .kind = NX_SEMIRING_BOOLEAN, .name = "boolean",
                             .props = NX_SEMIRING_COMMUTATIVE | NX_SEMIRING_IDEMPOTENT |
                                      NX_SEMIRING_STRICT,
                             .e = NODES(bool_nodes), .times = 7, .plus = NX_MONOID_MAX,
                             .identity = 0.0, .has_ann = true, .ann = 0.0, .ncarry = 1,
                             .finalize = 8},
    [NX_SEMIRING_EUCLIDEAN] = {COMMON, .kind = NX_SEMIRING_EUCLIDEAN, .name = "euclidean",
                               .props = NX_SEMIRING_COMMUTATIVE | NX_SEMIRING_DIFFERENTIABLE,
                               .e = NODES(eucl_nodes), .times = 3, .finalize = 10,
                               .plus = NX_MONOID_SUM, .identity = 0.0, .has_ann = false,
                               .ncarry = 1},
};

const nx_semiring *nx_semiring_builtin(nx_semiring_kind kind)
{
    if ((int)kind < 0 || kind >= NX_SEMIRING_USER)
        return NULL;
    return &builtins[kind];
}

void nx_semiring_get_info(const nx_semiring *sr, nx_semiring_info *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (!sr)
        return;
    out->kind = sr->kind;
    out->name = sr->name;
    out->props = sr->props;
    out->ncarry = sr->ncarry;
    out->identity = sr->identity;
    out->has_annihilator = sr->has_ann;
    out->annihilator = sr->ann;
    out->builtin_plus = sr->builtin_plus;
    out->plus = sr->plus;
}

void nx_semiring_free(nx_semiring *sr)
{
    if (!sr || !sr->ctx)
        return;
    nx_ctx *ctx = sr->ctx;
    nx_sr_expr_free(ctx, &sr->e);
    nx_rt_free(ctx, sr, sizeof *sr);
}

/* ---- graph builders --------------------------------------------------------------------------*/

static nx_node build_custom_reduce(nx_graph *g, const nx_semiring *sr, nx_node x, nx_dtype dt,
                                   int naxes, const int *axes)
{
    nx_monoid_def m = {.ncarry = sr->ncarry};
    nx_node vars[NX_SR_NVARS] = {0};
    m.x = nx_placeholder(g, dt);
    vars[NX_SR_VX] = m.x;
    for (int i = 0; i < sr->ncarry; i++) {
        m.a[i] = nx_placeholder(g, dt);
        m.b[i] = nx_placeholder(g, dt);
        vars[NX_SR_VCA0 + i] = m.a[i];
        vars[NX_SR_VCB0 + i] = m.b[i];
    }
    vars[NX_SR_VA] = m.a[0];
    vars[NX_SR_VB] = m.b[0];
    for (int i = 0; i < sr->ncarry; i++) {
        m.lift[i] = sr->lift[i] < 0 ? NX_NONE : nx_sr_build(g, &sr->e, sr->lift[i], dt, vars);
        m.combine[i] = nx_sr_build(g, &sr->e, sr->combine[i], dt, vars);
        m.identity[i] = nx_sr_build(g, &sr->e, sr->ident[i], dt, vars);
    }
    m.finalize = sr->mfinal < 0 ? NX_NONE : nx_sr_build(g, &sr->e, sr->mfinal, dt, vars);
    return nx_reduce_custom(g, x, naxes, axes, &m, false);
}

nx_node nx_semiring_reduce(nx_graph *g, const nx_semiring *sr, nx_node x, int naxes,
                           const int *axes)
{
    if (!g || !x)
        return NX_NONE;
    if (!sr)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG, "nx_semiring_reduce: semiring is NULL");
    nx_dtype dt = nx_node_dtype(g, x);
    if (!sr->builtin_plus)
        return build_custom_reduce(g, sr, x, dt, naxes, axes);
    nx_node y = nx_reduce(g, x, naxes, axes, sr->plus, false);
    if (sr->finalize < 0 || !y)
        return y;
    nx_node vars[NX_SR_NVARS] = {0};
    vars[NX_SR_VA] = y;
    return nx_sr_build(g, &sr->e, sr->finalize, dt, vars);
}

nx_node nx_semiring_times(nx_graph *g, const nx_semiring *sr, nx_node a, nx_node b)
{
    if (!g || !a || !b)
        return NX_NONE;
    if (!sr)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG, "nx_semiring_times: semiring is NULL");
    nx_node vars[NX_SR_NVARS] = {0};
    vars[NX_SR_VA] = a;
    vars[NX_SR_VB] = b;
    return nx_sr_build(g, &sr->e, sr->times, nx_node_dtype(g, a), vars);
}

static nx_node expand_at(nx_graph *g, nx_node x, int at)
{
    int64_t shape[NX_MAX_DIMS + 1];
    int nd = nx_node_ndim(g, x);
    nx_node_shape(g, x, shape);
    if (nd >= NX_MAX_DIMS)
        return nx_ir_graph_failf(g, NX_ERR_SHAPE, "nx_semiring_matmul: %d dims, at most %d", nd,
                                 NX_MAX_DIMS - 1);
    int pos = nd + at + 1;
    memmove(shape + pos + 1, shape + pos, (size_t)(nd - pos) * sizeof(int64_t));
    shape[pos] = 1;
    return nx_reshape(g, x, nd + 1, shape);
}

nx_node nx_semiring_matmul_node(nx_graph *g, const nx_semiring *sr, nx_node a, nx_node b)
{
    if (!g || !a || !b)
        return NX_NONE;
    int na = nx_node_ndim(g, a), nb = nx_node_ndim(g, b);
    int64_t sa[NX_MAX_DIMS], sb[NX_MAX_DIMS];
    if (na < 2 || nb < 2)
        return nx_ir_graph_failf(
            g, NX_ERR_SHAPE, "nx_semiring_matmul: A has %d dims and B %d; both need >= 2", na, nb);
    nx_node_shape(g, a, sa);
    nx_node_shape(g, b, sb);
    if (sa[na - 1] != sb[nb - 2])
        return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                 "nx_semiring_matmul: A is ...x%lldx%lld but B is ...x%lldx%lld "
                                 "(inner dims differ)",
                                 (long long)sa[na - 2], (long long)sa[na - 1],
                                 (long long)sb[nb - 2], (long long)sb[nb - 1]);
    if (nx_node_dtype(g, a) != nx_node_dtype(g, b))
        return nx_ir_graph_failf(g, NX_ERR_DTYPE, "nx_semiring_matmul: A is %s but B is %s",
                                 nx_dtype_name(nx_node_dtype(g, a)),
                                 nx_dtype_name(nx_node_dtype(g, b)));
    /* [..., m, k, 1] (x) [..., 1, k, n], folded over k. */
    nx_node t = nx_semiring_times(g, sr, expand_at(g, a, -1), expand_at(g, b, -3));
    int axis = -2;
    return nx_semiring_reduce(g, sr, t, 1, &axis);
}
