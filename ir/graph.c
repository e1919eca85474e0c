/* The graph: its node arena, hash-consing, first-error recording, the primitive table and its
 * self-check, and node introspection. */
#include <pthread.h>
#include <stdarg.h>
#include <string.h>

#include "ir.h"

/* ---- the primitive table -------------------------------------------------------------------*/

const nx_ir_prim_info nx_ir_prims[NX_PRIM_COUNT] = {
#define NX_PRIM(ID, NAME, ARITY, VALOPS, RULE, REF, ATTRS, ADJ, VJP, SDOC, MDOC)                   \
    [NX_PRIM_##ID] = {.op = NX_PRIM_##ID,                                                          \
                      .name = NAME,                                                                \
                      .arity = ARITY,                                                              \
                      .valops = VALOPS,                                                            \
                      .shape = nx_ir_shape_##RULE,                                                 \
                      .ref = nx_ir_ref_##REF,                                                      \
                      .attrs = nx_ir_attrs_##ATTRS,                                                \
                      .adj = ADJ,                                                                  \
                      .vjp = VJP,                                                                  \
                      .shape_doc = SDOC,                                                           \
                      .math_doc = MDOC},
#include "prims.def"
#undef NX_PRIM
};

const char *nx_ir_prim_name(int op)
{
    if (op < 0 || op >= NX_PRIM_COUNT || !nx_ir_prims[op].name)
        return "?";
    return nx_ir_prims[op].name;
}

nx_status nx_ir_selfcheck(nx_ctx *ctx)
{
    for (int i = 0; i < NX_PRIM_COUNT; i++) {
        const nx_ir_prim_info *r = &nx_ir_prims[i];
        const char *name = r->name ? r->name : "(unnamed)";
        if ((int)r->op != i || !r->name)
            return nx_rt_error(ctx, NX_ERR_INTERNAL,
                               "nx_ir_selfcheck: row %d of ir/prims.def holds op %d (%s); "
                               "expected row i to be op i",
                               i, (int)r->op, name);
        if (!r->shape || !r->ref || !r->attrs)
            return nx_rt_error(ctx, NX_ERR_INTERNAL,
                               "nx_ir_selfcheck: primitive %s lacks a shape rule, reference "
                               "kernel or attribute printer",
                               name);
        bool flag_ok = r->adj == NX_ADJ_NONE || r->adj == NX_ADJ_SLOT || r->adj == NX_ADJ_FLOAT;
        if (!flag_ok || (r->adj == NX_ADJ_NONE) != (r->vjp == NULL))
            return nx_rt_error(ctx, NX_ERR_INTERNAL,
                               "nx_ir_selfcheck: primitive %s has neither an adjoint rule nor "
                               "the non-differentiable flag (or both)",
                               name);
        if (r->arity < -1 || r->valops < -1 || !r->shape_doc || !r->math_doc)
            return nx_rt_error(ctx, NX_ERR_INTERNAL,
                               "nx_ir_selfcheck: primitive %s has a malformed row", name);
    }
    return NX_OK;
}

int nx_ir_num_valops(const nx_ir_node *n)
{
    int v = nx_ir_prims[n->op].valops;
    return v < 0 || (uint32_t)v > n->nops ? (int)n->nops : v;
}

bool nx_ir_differentiable(const nx_ir_store *s, nx_node id)
{
    const nx_ir_node *n = nx_ir_node_at(s, id);
    const nx_ir_prim_info *r = &nx_ir_prims[n->op];
    if (r->adj == NX_ADJ_NONE || !nx_ir_is_float(n->dtype))
        return false;
    if (r->adj == NX_ADJ_FLOAT && n->nops > 0) {
        nx_dtype in = nx_ir_node_at(s, nx_ir_node_ops(s, n)[0])->dtype;
        if (!nx_ir_is_float(in))
            return false;
    }
    if (n->op == NX_PRIM_EXTERN) {
        const nx_extern_def *def = (const nx_extern_def *)(intptr_t)nx_ir_node_attrs(s, n)[0];
        return def->vjp != NULL;
    }
    return true;
}

/* ---- errors --------------------------------------------------------------------------------*/

nx_status nx_ir_fail(nx_ir_check *ck, nx_status st, const char *fmt, ...)
{
    int n = snprintf(ck->msg, sizeof ck->msg, "%s: ", ck->fn ? ck->fn : "nitrix");
    if (n < 0 || (size_t)n >= sizeof ck->msg)
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ck->msg + n, sizeof ck->msg - (size_t)n, fmt, ap);
    va_end(ap);
    ck->status = st;
    return st;
}

void nx_ir_graph_fail(nx_graph *g, nx_status st, const char *msg)
{
    if (g->status != NX_OK)
        return;
    g->status = st;
    snprintf(g->msg, sizeof g->msg, "%s", msg);
    nx_rt_error(g->s.ctx, st, "%s", msg);
}

nx_node nx_ir_graph_failf(nx_graph *g, nx_status st, const char *fmt, ...)
{
    char buf[NX_IR_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    nx_ir_graph_fail(g, st, buf);
    return NX_NONE;
}

const char *nx_ir_dtype_str(char *buf, size_t len, int64_t d)
{
    if (nx_ir_dtype_ok(d))
        snprintf(buf, len, "%s", nx_dtype_name((nx_dtype)d));
    else
        snprintf(buf, len, "dtype(%lld)", (long long)d);
    return buf;
}

/* ---- the graph -----------------------------------------------------------------------------*/

static pthread_once_t selfcheck_once = PTHREAD_ONCE_INIT;
static nx_status selfcheck_status = NX_OK;

static void run_selfcheck(void)
{
    selfcheck_status = nx_ir_selfcheck(NULL);
}

nx_status nx_graph_new(nx_ctx *ctx, nx_graph **out)
{
    if (!out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "nx_graph_new: out is NULL");
    *out = NULL;
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "nx_graph_new: ctx is NULL");
    pthread_once(&selfcheck_once, run_selfcheck);
    if (selfcheck_status != NX_OK)
        return nx_rt_error(ctx, selfcheck_status, "nx_graph_new: %s", nx_ctx_last_error(NULL));
    nx_graph *g = nx_rt_calloc(ctx, 1, sizeof *g);
    if (!g)
        return nx_rt_nomem(ctx, "nx_graph_new", sizeof *g);
    g->s.ctx = ctx;
    g->s.n = 0;
    *out = g;
    return NX_OK;
}

void nx_ir_store_free(nx_ir_store *s)
{
    nx_ctx *ctx = s->ctx;
    nx_rt_free(ctx, s->nodes, s->nodes_cap * sizeof *s->nodes);
    nx_rt_free(ctx, s->operands, s->operands_cap * sizeof *s->operands);
    nx_rt_free(ctx, s->attrs, s->attrs_cap * sizeof *s->attrs);
    nx_rt_free(ctx, s->blob, s->blob_cap);
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
}

void nx_graph_free(nx_graph *g)
{
    if (!g)
        return;
    nx_ctx *ctx = g->s.ctx;
    nx_ir_store_free(&g->s);
    nx_rt_free(ctx, g->table, g->table_cap * sizeof *g->table);
    nx_rt_free(ctx, g->inputs, g->inputs_cap * sizeof *g->inputs);
    nx_rt_free(ctx, g, sizeof *g);
}

nx_ctx *nx_graph_ctx(const nx_graph *g)
{
    return g ? g->s.ctx : NULL;
}

nx_status nx_graph_status(const nx_graph *g)
{
    return g ? g->status : NX_ERR_INVALID_ARG;
}

const char *nx_graph_error(const nx_graph *g)
{
    return g ? g->msg : "nx_graph_error: the graph is NULL";
}

uint32_t nx_graph_num_nodes(const nx_graph *g)
{
    return g ? g->s.n : 0;
}

static bool valid(const nx_graph *g, nx_node n)
{
    return g && n >= 1 && n <= g->s.n;
}

nx_dtype nx_node_dtype(const nx_graph *g, nx_node n)
{
    return valid(g, n) ? (nx_dtype)g->s.nodes[n].dtype : NX_DTYPE_COUNT;
}

int nx_node_ndim(const nx_graph *g, nx_node n)
{
    return valid(g, n) ? g->s.nodes[n].ndim : -1;
}

bool nx_node_shape(const nx_graph *g, nx_node n, int64_t shape[NX_MAX_DIMS])
{
    if (!valid(g, n) || !shape)
        return false;
    memcpy(shape, g->s.nodes[n].shape, sizeof g->s.nodes[n].shape);
    return true;
}

void nx_ir_sig_of(const nx_ir_store *s, nx_node id, nx_ir_sig *out)
{
    const nx_ir_node *n = &s->nodes[id];
    memset(out, 0, sizeof *out);
    out->dtype = (nx_dtype)n->dtype;
    out->ndim = n->ndim;
    memcpy(out->shape, n->shape, sizeof n->shape);
}

/* ---- making nodes --------------------------------------------------------------------------*/

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t hash_node(const nx_ir_node *n, const nx_node *ops, const int64_t *attrs,
                          const uint8_t *blob)
{
    uint64_t h = mix(0x6a09e667f3bcc908ull, n->op);
    h = mix(h, n->dtype);
    h = mix(h, n->ndim);
    for (int i = 0; i < n->ndim; i++)
        h = mix(h, (uint64_t)n->shape[i]);
    h = mix(h, n->nops);
    for (uint32_t i = 0; i < n->nops; i++)
        h = mix(h, ops[i]);
    h = mix(h, n->nattrs);
    for (uint32_t i = 0; i < n->nattrs; i++)
        h = mix(h, (uint64_t)attrs[i]);
    h = mix(h, n->nblob);
    for (uint64_t i = 0; i < n->nblob; i++)
        h = (h ^ blob[i]) * 0x100000001b3ull;
    return h;
}

static bool same_node(const nx_ir_store *s, const nx_ir_node *a, const nx_ir_node *b,
                      const nx_node *ops, const int64_t *attrs, const uint8_t *blob)
{
    if (a->hash != b->hash || a->op != b->op || a->dtype != b->dtype || a->ndim != b->ndim ||
        a->nops != b->nops || a->nattrs != b->nattrs || a->nblob != b->nblob)
        return false;
    if (memcmp(a->shape, b->shape, sizeof a->shape) != 0)
        return false;
    if (a->nops && memcmp(s->operands + a->ops, ops, a->nops * sizeof *ops) != 0)
        return false;
    if (a->nattrs && memcmp(s->attrs + a->attrs, attrs, a->nattrs * sizeof *attrs) != 0)
        return false;
    return a->nblob == 0 || memcmp(s->blob + a->blob, blob, a->nblob) == 0;
}

static bool never_merged(nx_prim op)
{
    return op == NX_PRIM_INPUT || op == NX_PRIM_PARAMETER || op == NX_PRIM_PLACEHOLDER;
}

static nx_node table_find(const nx_graph *g, const nx_ir_node *key, const nx_node *ops,
                          const int64_t *attrs, const uint8_t *blob)
{
    if (!g->table_cap)
        return NX_NONE;
    size_t mask = g->table_cap - 1;
    for (size_t i = key->hash & mask;; i = (i + 1) & mask) {
        uint32_t id = g->table[i];
        if (id == 0)
            return NX_NONE;
        if (same_node(&g->s, &g->s.nodes[id], key, ops, attrs, blob))
            return id;
    }
}

static void table_put(nx_graph *g, nx_node id)
{
    size_t mask = g->table_cap - 1;
    size_t i = g->s.nodes[id].hash & mask;
    while (g->table[i] != 0)
        i = (i + 1) & mask;
    g->table[i] = id;
}

/* Keeps the table at most half full, so probes end and stay short. */
static bool table_reserve(nx_graph *g)
{
    size_t need = ((size_t)g->s.n + 1) * 2;
    if (need <= g->table_cap)
        return true;
    size_t cap = g->table_cap ? g->table_cap * 2 : 64;
    while (cap < need)
        cap *= 2;
    uint32_t *t = nx_rt_calloc(g->s.ctx, cap, sizeof *t);
    if (!t)
        return false;
    uint32_t *old = g->table;
    size_t old_cap = g->table_cap;
    g->table = t;
    g->table_cap = cap;
    for (size_t i = 0; i < old_cap; i++) {
        if (old[i])
            table_put(g, old[i]);
    }
    nx_rt_free(g->s.ctx, old, old_cap * sizeof *old);
    return true;
}

static bool store_reserve(nx_ir_store *s, size_t nops, size_t nattrs, size_t nblob)
{
    nx_ctx *ctx = s->ctx;
    return nx_rt_grow(ctx, (void **)&s->nodes, &s->nodes_cap, (size_t)s->n + 2, sizeof *s->nodes) &&
           nx_rt_grow(ctx, (void **)&s->operands, &s->operands_cap, s->noperands + nops,
                      sizeof *s->operands) &&
           nx_rt_grow(ctx, (void **)&s->attrs, &s->attrs_cap, s->nattrs + nattrs,
                      sizeof *s->attrs) &&
           nx_rt_grow(ctx, (void **)&s->blob, &s->blob_cap, s->nblob + nblob, 1);
}

nx_node nx_ir_store_append(nx_ir_store *s, const nx_ir_node *src, const nx_node *ops,
                           const int64_t *attrs, const void *blob)
{
    /* A constant's bytes are read in place as its dtype (by interpreters and externs), so each
     * payload starts on a 16-byte boundary of the blob (itself from the allocator, so aligned). */
    size_t pad = src->nblob ? (16u - (s->nblob & 15u)) & 15u : 0u;
    if (s->n >= UINT32_MAX - 2 || !store_reserve(s, src->nops, src->nattrs, pad + src->nblob))
        return NX_NONE;
    if (pad)
        memset(s->blob + s->nblob, 0, pad);
    s->nblob += pad;
    nx_ir_node *n = &s->nodes[++s->n];
    *n = *src;
    n->ops = (uint32_t)s->noperands;
    n->attrs = (uint32_t)s->nattrs;
    n->blob = s->nblob;
    if (src->nops)
        memcpy(s->operands + s->noperands, ops, src->nops * sizeof *ops);
    if (src->nattrs)
        memcpy(s->attrs + s->nattrs, attrs, src->nattrs * sizeof *attrs);
    if (src->nblob)
        memcpy(s->blob + s->nblob, blob, src->nblob);
    s->noperands += src->nops;
    s->nattrs += src->nattrs;
    s->nblob += src->nblob;
    return s->n;
}

bool nx_ir_check_handles(nx_graph *g, const char *fn, int n, const nx_node *ops)
{
    bool none = false;
    for (int i = 0; i < n; i++) {
        if (ops[i] > g->s.n) {
            nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                              "%s: operand %d is handle %u, but the graph has only %u nodes "
                              "(a handle from another graph, or garbage)",
                              fn, i + 1, (unsigned)ops[i], (unsigned)g->s.n);
            return false;
        }
        none |= ops[i] == NX_NONE;
    }
    if (none && g->status == NX_OK)
        nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                          "%s: an operand is NX_NONE, but no earlier builder failed", fn);
    return !none;
}

nx_status nx_ir_check_common(nx_ir_check *ck, const nx_ir_proto *p)
{
    if (p->op == NX_PRIM_CAST || nx_ir_prims[p->op].arity == 0)
        return NX_OK;
    for (int i = 0; i < p->nops; i++) {
        if (nx_ir_is_half(p->ins[i].dtype))
            return nx_ir_fail(ck, NX_ERR_DTYPE,
                              "operand %d is %s, a storage type; expected f32 or f64 (nx_cast "
                              "f16/bf16 first: only leaves and cast take them)",
                              i + 1, nx_dtype_name(p->ins[i].dtype));
    }
    return NX_OK;
}

static nx_node record(nx_graph *g, nx_ir_check *ck)
{
    nx_ir_graph_fail(g, ck->status, ck->msg);
    return NX_NONE;
}

nx_node nx_ir_make(nx_graph *g, const char *fn, nx_prim op, int nops, const nx_node *ops,
                   int nattrs, const int64_t *attrs, size_t nblob, const void *blob)
{
    if (!g)
        return NX_NONE;
    if (!nx_ir_check_handles(g, fn, nops, ops))
        return NX_NONE;
    nx_ir_check ck = {.fn = fn};
    const nx_ir_prim_info *row = &nx_ir_prims[op];
    if (row->arity >= 0 && nops != row->arity) {
        nx_ir_fail(&ck, NX_ERR_INVALID_ARG, "%d operands; expected %d", nops, row->arity);
        return record(g, &ck);
    }
    nx_ir_sig *ins = NULL;
    nx_ir_sig small[4];
    size_t ins_bytes = (size_t)nops * sizeof *ins;
    if (nops <= 4) {
        ins = small;
    } else if (!(ins = nx_rt_alloc(g->s.ctx, ins_bytes))) {
        nx_ir_fail(&ck, NX_ERR_NOMEM, "out of memory (allocating %zu bytes)", ins_bytes);
        return record(g, &ck);
    }
    for (int i = 0; i < nops; i++)
        nx_ir_sig_of(&g->s, ops[i], &ins[i]);
    nx_ir_proto p = {op, nops, ops, ins, nattrs, attrs, nblob, blob};
    nx_ir_sig out;
    memset(&out, 0, sizeof out);
    nx_status st = nx_ir_check_common(&ck, &p);
    if (st == NX_OK)
        st = row->shape(&ck, &g->s, &p, &out);
    if (st == NX_OK)
        st = nx_ir_check_result(&ck, &out);
    if (ins != small)
        nx_rt_free(g->s.ctx, ins, ins_bytes);
    if (st != NX_OK)
        return record(g, &ck);

    nx_ir_node key;
    memset(&key, 0, sizeof key);
    key.op = (uint16_t)op;
    key.dtype = (uint8_t)out.dtype;
    key.ndim = (uint8_t)out.ndim;
    memcpy(key.shape, out.shape, sizeof key.shape);
    key.nops = (uint32_t)nops;
    key.nattrs = (uint32_t)nattrs;
    key.nblob = nblob;
    key.hash = hash_node(&key, ops, attrs, blob);
    if (!never_merged(op)) {
        nx_node found = table_find(g, &key, ops, attrs, blob);
        if (found)
            return found;
    }
    if (!table_reserve(g))
        return nx_ir_graph_failf(g, NX_ERR_NOMEM, "%s: out of memory growing the node table", fn);
    nx_node id = nx_ir_store_append(&g->s, &key, ops, attrs, blob);
    if (!id)
        return nx_ir_graph_failf(g, NX_ERR_NOMEM, "%s: out of memory growing the node arena", fn);
    if (!never_merged(op))
        table_put(g, id);
    return id;
}

nx_status nx_ir_check_result(nx_ir_check *ck, const nx_ir_sig *out)
{
    int64_t numel, bytes;
    if (!nx_shape_numel(out->ndim, out->shape, &numel) ||
        !nx_mul_i64(numel, (int64_t)nx_dtype_size(out->dtype), &bytes) || bytes > INT64_MAX / 2) {
        char sb[160];
        return nx_ir_fail(ck, NX_ERR_SHAPE,
                          "the result %s%s overflows the address space; expected a shape whose "
                          "byte size fits in int64",
                          nx_dtype_name(out->dtype),
                          nx_shape_str(sb, sizeof sb, out->ndim, out->shape));
    }
    return NX_OK;
}

/* ---- shared shape helpers ------------------------------------------------------------------*/

nx_status nx_ir_broadcast_shapes(nx_ir_check *ck, const nx_ir_sig *a, const nx_ir_sig *b,
                                 const char *what_a, const char *what_b, nx_ir_sig *out)
{
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    int64_t shape[NX_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        int ia = i - (nd - a->ndim), ib = i - (nd - b->ndim);
        int64_t ea = ia >= 0 ? a->shape[ia] : 1, eb = ib >= 0 ? b->shape[ib] : 1;
        if (ea != eb && ea != 1 && eb != 1) {
            char sa[160], sb[160];
            bool named = what_a && what_b;
            return nx_ir_fail(ck, NX_ERR_SHAPE,
                              "shapes %s and %s disagree at dim %d (%lld vs %lld) and neither is 1"
                              "%s%s%s%s%s",
                              nx_shape_str(sa, sizeof sa, a->ndim, a->shape),
                              nx_shape_str(sb, sizeof sb, b->ndim, b->shape), i, (long long)ea,
                              (long long)eb, named ? " (" : "", named ? what_a : "",
                              named ? " vs " : "", named ? what_b : "", named ? ")" : "");
        }
        shape[i] = ea == 1 ? eb : ea;
    }
    out->ndim = nd;
    memset(out->shape, 0, sizeof out->shape);
    memcpy(out->shape, shape, (size_t)nd * sizeof *shape);
    return NX_OK;
}

bool nx_ir_axis(int axis, int ndim, int *out)
{
    if (axis < -ndim || axis >= ndim)
        return false;
    *out = axis < 0 ? axis + ndim : axis;
    return true;
}

const char *nx_ir_monoid_name(int64_t m)
{
    static const char *const names[NX_MONOID_COUNT] = {"sum",       "prod",   "max",   "min",
                                                       "logsumexp", "argmax", "argmin"};
    return m >= 0 && m < NX_MONOID_COUNT ? names[m] : "?";
}

const char *nx_ir_pad_mode_name(int64_t m)
{
    return m >= 0 && m < NX_BORDER_COUNT ? nx_border_name((nx_border)m) : "?";
}
