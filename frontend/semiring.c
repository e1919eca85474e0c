/* Semirings: the expression trees behind them, the six built-in algebras, the graph builders
 * every entry point shares, and user semirings from formulas and from IR expressions. Every part
 * of a user definition is checked when it is made (names, arity, constant identity, float results
 * at f32 and f64, a foldable (+)), so a bad definition never reaches an entry point. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cache.h"
#include "frontend/semiring.h"

/* ---- the matmul shape rule (the entry point's check uses it too) ---------------------------*/

nx_status nx_sr_matmul_shape(int na, const int64_t *sa, int nb, const int64_t *sb, int *nout,
                             int64_t *out, char *msg, size_t msglen)
{
    if (na < 2 || nb < 2) {
        snprintf(msg, msglen, "A has %d dims and B %d; both need >= 2", na, nb);
        return NX_ERR_SHAPE;
    }
    if (sa[na - 1] != sb[nb - 2]) {
        snprintf(msg, msglen, "A is %lldx%lld but B is %lldx%lld (inner dims differ)",
                 (long long)sa[na - 2], (long long)sa[na - 1], (long long)sb[nb - 2],
                 (long long)sb[nb - 1]);
        return NX_ERR_SHAPE;
    }
    int n = na > nb ? na : nb;
    int64_t shape[NX_MAX_DIMS + 1];
    for (int i = 0; i < n - 2; i++) {
        int ia = i - (n - na), ib = i - (n - nb);
        int64_t p = ia >= 0 ? sa[ia] : 1, q = ib >= 0 ? sb[ib] : 1;
        if (p != q && p != 1 && q != 1) {
            char x[96], y[96];
            nx_shape_str(x, sizeof x, na, sa);
            nx_shape_str(y, sizeof y, nb, sb);
            snprintf(msg, msglen,
                     "A is %s and B is %s: their batch dims do not broadcast; expected equal "
                     "extents or 1",
                     x, y);
            return NX_ERR_SHAPE;
        }
        if (i < NX_MAX_DIMS)
            shape[i] = p == 1 ? q : p;
    }
    if (n > NX_MAX_DIMS) {
        snprintf(msg, msglen, "the result has %d dims; at most %d", n, NX_MAX_DIMS);
        return NX_ERR_SHAPE;
    }
    shape[n - 2] = sa[na - 2];
    shape[n - 1] = sb[nb - 1];
    if (nout)
        *nout = n;
    if (out)
        memcpy(out, shape, (size_t)n * sizeof *out);
    return NX_OK;
}

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

/* Pairwise formulas' sum over the vector axis. A short axis (D <= VSUM_UNROLL) is spelt out as
 * ((v_0 + v_1) + v_2) + ..., the fold's own order, so F stays elementwise: the fusion pass then
 * recomputes it inside each gradient pass instead of storing the [M, N] partial sums that a
 * nested reduction read by two passes would need. */
#define VSUM_UNROLL 16

static nx_node build_vsum(nx_graph *g, nx_node v)
{
    int nd = nx_node_ndim(g, v);
    int64_t shape[NX_MAX_DIMS];
    if (!v || nd < 1 || !nx_node_shape(g, v, shape) || shape[nd - 1] < 1 ||
        shape[nd - 1] > VSUM_UNROLL) {
        int axis = -1;
        return nx_reduce(g, v, 1, &axis, NX_MONOID_SUM, true);
    }
    int64_t start[NX_MAX_DIMS] = {0}, stop[NX_MAX_DIMS];
    memcpy(stop, shape, (size_t)nd * sizeof(int64_t));
    nx_node acc = NX_NONE;
    for (int64_t k = 0; k < shape[nd - 1]; k++) {
        start[nd - 1] = k;
        stop[nd - 1] = k + 1;
        nx_node t = nx_slice(g, v, start, stop, NULL);
        acc = acc ? nx_add(g, acc, t) : t;
    }
    return acc;
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
    case NX_SR_VSUM:
        return build_vsum(g, o[0]);
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

/* The numpy broadcast shape of a and b in shape (NX_MAX_DIMS entries); its rank, or -1 when they
 * do not broadcast (the expression over them has then failed the graph already). */
static int broadcast_shape(nx_graph *g, nx_node a, nx_node b, int64_t *shape)
{
    int64_t sa[NX_MAX_DIMS], sb[NX_MAX_DIMS];
    int na = nx_node_ndim(g, a), nb = nx_node_ndim(g, b);
    if (na < 0 || nb < 0 || na > NX_MAX_DIMS || nb > NX_MAX_DIMS || !nx_node_shape(g, a, sa) ||
        !nx_node_shape(g, b, sb))
        return -1;
    int nd = na > nb ? na : nb;
    for (int i = 0; i < nd; i++) {
        int64_t da = i < nd - na ? 1 : sa[i - (nd - na)];
        int64_t db = i < nd - nb ? 1 : sb[i - (nd - nb)];
        if (da != db && da != 1 && db != 1)
            return -1;
        shape[i] = da == 1 ? db : da;
    }
    return nd;
}

/* t broadcast to shape when an expression gave fewer dims or unit extents (a constant, or one
 * operand of two); t itself when it already has that shape. */
static nx_node fit_shape(nx_graph *g, nx_node t, int nd, const int64_t *shape)
{
    int64_t st[NX_MAX_DIMS];
    int nt = t ? nx_node_ndim(g, t) : -1;
    if (nt < 0 || nt > nd || !nx_node_shape(g, t, st))
        return t;
    if (nt == nd && memcmp(st, shape, (size_t)nd * sizeof *shape) == 0)
        return t;
    return nx_broadcast(g, t, nd, shape);
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
    if (sr->kind == NX_SEMIRING_BOOLEAN && dt == NX_DTYPE_BOOL)
        return y; /* or as max over bool: an empty fold is false, no finalize needed */
    if (sr->finalize < 0 || !y)
        return y;
    nx_node vars[NX_SR_NVARS] = {0};
    vars[NX_SR_VA] = y;
    int64_t shape[NX_MAX_DIMS];
    int nd = nx_node_ndim(g, y);
    if (nd < 0 || nd > NX_MAX_DIMS || !nx_node_shape(g, y, shape))
        return NX_NONE;
    /* finalize = 1 (a constant) still gives one value per output */
    return fit_shape(g, nx_sr_build(g, &sr->e, sr->finalize, dt, vars), nd, shape);
}

nx_node nx_semiring_times(nx_graph *g, const nx_semiring *sr, nx_node a, nx_node b)
{
    if (!g || !a || !b)
        return NX_NONE;
    if (!sr)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG, "nx_semiring_times: semiring is NULL");
    if (sr->kind == NX_SEMIRING_BOOLEAN && nx_node_dtype(g, a) == NX_DTYPE_BOOL)
        return nx_and(g, a, b); /* bool in, bool out */
    nx_node vars[NX_SR_NVARS] = {0};
    vars[NX_SR_VA] = a;
    vars[NX_SR_VB] = b;
    nx_node t = nx_sr_build(g, &sr->e, sr->times, nx_node_dtype(g, a), vars);
    /* a (x) b has the broadcast shape of a and b whatever the expression reads: a times that is
     * a constant (times = 0) or reads one operand (times = a) is a degenerate semiring, not an
     * error, and the reduction after it needs the contracted axes */
    int64_t shape[NX_MAX_DIMS];
    int nd = broadcast_shape(g, a, b, shape);
    return nd < 0 ? t : fit_shape(g, t, nd, shape);
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
    nx_node_shape(g, a, sa);
    nx_node_shape(g, b, sb);
    char msg[256];
    nx_status st = nx_sr_matmul_shape(na, sa, nb, sb, NULL, NULL, msg, sizeof msg);
    if (st != NX_OK)
        return nx_ir_graph_failf(g, st, "nx_semiring_matmul: %s", msg);
    if (nx_node_dtype(g, a) != nx_node_dtype(g, b))
        return nx_ir_graph_failf(g, NX_ERR_DTYPE, "nx_semiring_matmul: A is %s but B is %s",
                                 nx_dtype_name(nx_node_dtype(g, a)),
                                 nx_dtype_name(nx_node_dtype(g, b)));
    /* [..., m, k, 1] (x) [..., 1, k, n], folded over k. */
    nx_node t = nx_semiring_times(g, sr, expand_at(g, a, -1), expand_at(g, b, -3));
    int axis = -2;
    return nx_semiring_reduce(g, sr, t, 1, &axis);
}

/* ---- user definitions ------------------------------------------------------------------------*/

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
    return nx_ir_prim_elementwise(op);
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
