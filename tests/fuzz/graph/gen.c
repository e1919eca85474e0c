/* Random graphs for the graph IR fuzzer: see gen.h. Every node's dtype and shape is predicted
 * here from the header's rules and compared with what the builder reports, so the fuzzer also
 * checks shape rules, not only the absence of crashes. */
#include "gen.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h" /* node ops, to decide how closely the CPU backend must match */

#define POOL 96
#define MAX_INPUTS 24
#define MAX_NUMEL 1024
#define MAX_ND 6
#define MAX_OUTS 10
#define MAX_PAIRS 3

/* ------------------------------------------------------------------------------------------------
 * Randomness
 * ----------------------------------------------------------------------------------------------*/

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void fz_rng_seed(fz_rng *r, uint64_t seed)
{
    memset(r, 0, sizeof *r);
    r->state = seed;
}

void fz_rng_bytes(fz_rng *r, const uint8_t *data, size_t len)
{
    memset(r, 0, sizeof *r);
    r->data = data;
    r->len = len;
}

/* Uniform in [0, n). Fuzzer bytes are consumed one or two at a time so that short inputs still
 * reach every decision. */
static uint32_t below(fz_rng *r, uint32_t n)
{
    if (n <= 1)
        return 0;
    if (!r->data)
        return (uint32_t)(splitmix(&r->state) % n);
    uint32_t v = 0;
    for (int i = 0; i < (n <= 256 ? 1 : 2); i++)
        v = (v << 8) | (r->pos < r->len ? r->data[r->pos++] : 0);
    return v % n;
}

static int range(fz_rng *r, int lo, int hi)
{
    return lo + (int)below(r, (uint32_t)(hi - lo + 1));
}

static bool chance(fz_rng *r, int pct)
{
    return (int)below(r, 100) < pct;
}

static double unit(uint64_t *s)
{
    return (double)(splitmix(s) >> 11) * 0x1p-53;
}

/* ------------------------------------------------------------------------------------------------
 * State
 * ----------------------------------------------------------------------------------------------*/

/* K_HALF (f16, bf16) is kept out of K_ANY: only leaves and casts take those dtypes. */
enum { K_FLOAT = 1, K_INT = 2, K_BOOL = 4, K_ANY = 7, K_HALF = 8 };

typedef struct val {
    nx_node n;
    nx_dtype dt;
    int nd;
    int64_t sh[NX_MAX_DIMS];
    int64_t bound; /* > 0: every value is in [0, bound) (index outputs) */
} val;

typedef struct fz {
    bool cpu;              /* compare the CPU backend with the interpreter (fz_compare_cpu) */
    int cpu_cls;           /* compare_class of the graph */
    nx_program *cpu_prog;  /* the outputs compiled for the CPU backend */
    nx_ctx *ctx;
    nx_graph *g;
    fz_rng *r;
    uint64_t vs; /* values come from their own stream, so fuzzer bytes go to structure */
    fz_stats *st;
    val pool[POOL];
    int npool;
    val ins[MAX_INPUTS];
    int nin;
    const char *op;
    bool bad;
    bool sweep;       /* allocation-failure sweep: NX_ERR_NOMEM ends the graph quietly */
    nx_status status; /* why bad: NX_ERR_NOMEM in a sweep, else NX_ERR_INTERNAL */
    char *msg;
    size_t len;
    char text[8192]; /* the graph printed before it was freed early */
} fz;

static void failf(fz *f, const char *fmt, ...)
{
    if (f->bad)
        return;
    f->bad = true;
    f->status = NX_ERR_INTERNAL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->msg, f->len, fmt, ap);
    va_end(ap);
}

/* In a sweep, an out-of-memory status is the expected outcome: it ends the graph without a
 * failure. True when st was handled that way. */
static bool nomem(fz *f, nx_status st)
{
    if (!f->sweep || st != NX_ERR_NOMEM)
        return false;
    if (!f->bad) {
        f->bad = true;
        f->status = NX_ERR_NOMEM;
        snprintf(f->msg, f->len, "%s: out of memory", f->op);
    }
    return true;
}

static int kind(nx_dtype d)
{
    if (d == NX_DTYPE_F32 || d == NX_DTYPE_F64)
        return K_FLOAT;
    if (d == NX_DTYPE_F16 || d == NX_DTYPE_BF16)
        return K_HALF;
    return d == NX_DTYPE_BOOL ? K_BOOL : K_INT;
}

static int64_t numel(int nd, const int64_t *sh)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= sh[i];
    return n;
}

static void shape_text(char *buf, size_t len, nx_dtype dt, int nd, const int64_t *sh)
{
    int k = snprintf(buf, len, "%s[", nx_dtype_name(dt) ? nx_dtype_name(dt) : "?");
    for (int i = 0; i < nd && k < (int)len; i++)
        k += snprintf(buf + k, len - (size_t)k, i ? ",%lld" : "%lld", (long long)sh[i]);
    if (k < (int)len)
        snprintf(buf + k, len - (size_t)k, "]");
}

/* Records a built node after checking it against the predicted dtype and shape. */
static val *push(fz *f, nx_node n, nx_dtype dt, int nd, const int64_t *sh, int64_t bound)
{
    if (f->bad)
        return NULL;
    if (n == NX_NONE || nx_graph_status(f->g) != NX_OK) {
        if (nomem(f, nx_graph_status(f->g)))
            return NULL;
        char want[96];
        shape_text(want, sizeof want, dt, nd, sh);
        failf(f, "%s: builder refused a valid call (expected %s): %s: %s", f->op, want,
              nx_status_str(nx_graph_status(f->g)), nx_graph_error(f->g));
        return NULL;
    }
    int64_t got[NX_MAX_DIMS];
    int gnd = nx_node_ndim(f->g, n);
    bool same = nx_node_dtype(f->g, n) == dt && gnd == nd && nx_node_shape(f->g, n, got);
    for (int i = 0; same && i < nd; i++)
        same = got[i] == sh[i];
    if (!same) {
        char want[96], have[96];
        shape_text(want, sizeof want, dt, nd, sh);
        shape_text(have, sizeof have, nx_node_dtype(f->g, n), gnd < 0 ? 0 : gnd, got);
        failf(f, "%s: node %%%u is %s, expected %s", f->op, n, have, want);
        return NULL;
    }
    int slot = f->npool < POOL ? f->npool++ : (int)below(f->r, POOL);
    val *v = &f->pool[slot];
    v->n = n;
    v->dt = dt;
    v->nd = nd;
    memcpy(v->sh, sh, sizeof(int64_t) * (size_t)nd);
    v->bound = bound;
    return v;
}

static nx_dtype rand_dtype(fz *f, int kinds)
{
    static const nx_dtype floats[] = {NX_DTYPE_F32, NX_DTYPE_F64};
    static const nx_dtype ints[] = {NX_DTYPE_I32, NX_DTYPE_I64, NX_DTYPE_I32, NX_DTYPE_I64,
                                    NX_DTYPE_I8,  NX_DTYPE_I16, NX_DTYPE_U8};
    nx_dtype c[4];
    int n = 0;
    if ((kinds & K_HALF) && chance(f->r, 30))
        return chance(f->r, 50) ? NX_DTYPE_F16 : NX_DTYPE_BF16;
    if (kinds & K_FLOAT)
        c[n++] = floats[below(f->r, 2)];
    if (kinds & K_INT)
        c[n++] = ints[below(f->r, sizeof ints / sizeof *ints)];
    if (kinds & K_BOOL)
        c[n++] = NX_DTYPE_BOOL;
    /* floats are where most of the interpreter is: favour them */
    if ((kinds & K_FLOAT) && chance(f->r, 50))
        return c[0];
    return c[below(f->r, (uint32_t)n)];
}

/* Extents 1..6, and now and then 0: empty arrays are valid everywhere the header does not say
 * otherwise (window, arg reductions, top-k and gathers from an empty axis are kept away). */
static int rand_shape(fz *f, int nd, int64_t *sh)
{
    for (int i = 0; i < nd; i++)
        sh[i] = chance(f->r, 4) ? 0 : chance(f->r, 10) ? range(f->r, 5, 6) : range(f->r, 1, 4);
    while (numel(nd, sh) > 256) {
        for (int i = 0; i < nd; i++)
            sh[i] = sh[i] > 1 ? sh[i] - 1 : 1;
    }
    return nd;
}

static void fill(fz *f, nx_dtype dt, void *data, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        double u = unit(&f->vs);
        double x = 6.0 * u - 3.0;
        if (u < 0.03)
            x = NAN;
        else if (u < 0.05)
            x = u < 0.04 ? INFINITY : -INFINITY;
        else if (u < 0.08)
            x = 0.0;
        int64_t k = (int64_t)floor(11.0 * u) - 5; /* -5..5 */
        switch (dt) {
        case NX_DTYPE_F32:
            ((float *)data)[i] = (float)x;
            break;
        case NX_DTYPE_F64:
            ((double *)data)[i] = x;
            break;
        case NX_DTYPE_I8:
            ((int8_t *)data)[i] = (int8_t)k;
            break;
        case NX_DTYPE_I16:
            ((int16_t *)data)[i] = (int16_t)k;
            break;
        case NX_DTYPE_I32:
            ((int32_t *)data)[i] = (int32_t)k;
            break;
        case NX_DTYPE_I64:
            ((int64_t *)data)[i] = k;
            break;
        case NX_DTYPE_U8:
            ((uint8_t *)data)[i] = (uint8_t)(k + 5);
            break;
        case NX_DTYPE_F16:
        case NX_DTYPE_BF16:
            ((uint16_t *)data)[i] = (uint16_t)splitmix(&f->vs);
            break;
        default:
            ((uint8_t *)data)[i] = u < 0.5;
            break;
        }
    }
}

/* A new leaf: an input or parameter (values at run time), a constant, or a scalar. */
static val *leaf(fz *f, nx_dtype dt, int nd, const int64_t *sh)
{
    const char *saved = f->op;
    f->op = "leaf";
    nx_node n;
    if (f->nin < MAX_INPUTS && chance(f->r, 75)) {
        char name[16];
        snprintf(name, sizeof name, "in%d", f->nin);
        const char *nm = chance(f->r, 10) ? NULL : name; /* name may be NULL */
        n = chance(f->r, 20) ? nx_parameter(f->g, nm, dt, nd, sh) : nx_input(f->g, nm, dt, nd, sh);
        if (n != NX_NONE) {
            val *in = &f->ins[f->nin++];
            in->n = n;
            in->dt = dt;
            in->nd = nd;
            memcpy(in->sh, sh, sizeof(int64_t) * (size_t)nd);
        }
    } else if (nd == 0 && chance(f->r, 50)) {
        double x;
        fill(f, NX_DTYPE_F64, &x, 1);
        if (kind(dt) != K_FLOAT)
            x = floor(6.0 * unit(&f->vs) - 3.0);
        if (kind(dt) != K_FLOAT && dt == NX_DTYPE_U8)
            x = fabs(x); /* a negative value converted to u8 would be undefined */
        n = nx_scalar(f->g, dt, x);
    } else {
        int64_t cnt = numel(nd, sh);
        void *data = malloc((size_t)cnt * 8 + 8);
        if (!data) {
            failf(f, "test: out of memory");
            return NULL;
        }
        fill(f, dt, data, cnt);
        n = nx_constant(f->g, dt, nd, sh, data);
        free(data);
    }
    val *v = push(f, n, dt, nd, sh, 0);
    f->op = saved;
    return v;
}

static bool fits(const val *v, int kinds, int min_nd, int max_nd)
{
    return (kind(v->dt) & kinds) && v->nd >= min_nd && v->nd <= max_nd;
}

/* A random existing value of the wanted kind and rank, or a new leaf. */
static val *pick(fz *f, int kinds, int min_nd, int max_nd)
{
    if (f->npool > 0 && chance(f->r, 85)) {
        int start = (int)below(f->r, (uint32_t)f->npool);
        for (int i = 0; i < f->npool; i++) {
            val *v = &f->pool[(start + i) % f->npool];
            if (fits(v, kinds, min_nd, max_nd))
                return v;
        }
    }
    int64_t sh[NX_MAX_DIMS];
    int hi = max_nd < 4 ? max_nd : 4;
    int nd = range(f->r, min_nd, hi < min_nd ? min_nd : hi);
    rand_shape(f, nd, sh);
    return leaf(f, rand_dtype(f, kinds), nd, sh);
}

/* An existing value with exactly this dtype and shape, or a new leaf. */
static val *match(fz *f, nx_dtype dt, int nd, const int64_t *sh)
{
    if (chance(f->r, 50)) {
        for (int i = 0; i < f->npool; i++) {
            val *v = &f->pool[i];
            if (v->dt == dt && v->nd == nd && memcmp(v->sh, sh, sizeof(int64_t) * (size_t)nd) == 0)
                return v;
        }
    }
    return leaf(f, dt, nd, sh);
}

/* A shape that broadcasts against a's: some trailing dims of a, some set to 1, maybe one more
 * leading dim. */
static int variant(fz *f, const val *a, int64_t *sh, bool prepend)
{
    int nd = 0;
    int keep = chance(f->r, 60) ? a->nd : range(f->r, 0, a->nd);
    /* a new leading dim only lines up when every dim of a is kept */
    if (prepend && keep == a->nd && a->nd < 4 && chance(f->r, 20))
        sh[nd++] = range(f->r, 1, 3);
    for (int i = a->nd - keep; i < a->nd; i++)
        sh[nd++] = chance(f->r, 25) ? 1 : a->sh[i];
    return nd;
}

/* NumPy broadcasting; -1 when the shapes do not broadcast. */
static int bcast(int na, const int64_t *a, int nb, const int64_t *b, int64_t *out)
{
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int64_t x = i < n - na ? 1 : a[i - (n - na)];
        int64_t y = i < n - nb ? 1 : b[i - (n - nb)];
        if (x != y && x != 1 && y != 1)
            return -1;
        out[i] = x == 1 ? y : x;
    }
    return n;
}

static void shuffle(fz *f, int *v, int n)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)below(f->r, (uint32_t)i + 1);
        int t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

/* A random subset of 0..nd-1 in random order; returns its size. */
static int subset(fz *f, int nd, int *axes, bool nonempty)
{
    int n = 0;
    for (int i = 0; i < nd; i++) {
        if (chance(f->r, 50))
            axes[n++] = i;
    }
    if (nonempty && n == 0 && nd > 0)
        axes[n++] = (int)below(f->r, (uint32_t)nd);
    shuffle(f, axes, n);
    return n;
}

/* Axes may be negative, counting from the end: pass some that way. */
static int neg(fz *f, int axis, int nd)
{
    return chance(f->r, 30) ? axis - nd : axis;
}

static void neg_all(fz *f, const int *axes, int n, int nd, int *out)
{
    for (int i = 0; i < n; i++)
        out[i] = neg(f, axes[i], nd);
}

/* ------------------------------------------------------------------------------------------------
 * Valid-mode ops
 * ----------------------------------------------------------------------------------------------*/

static const struct {
    const char *name;
    nx_node (*fn)(nx_graph *, nx_node);
    int kinds;
    bool to_bool;
} unaries[] = {
    {"neg", nx_neg, K_FLOAT | K_INT, false},   {"abs", nx_abs, K_FLOAT | K_INT, false},
    {"sign", nx_sign, K_FLOAT | K_INT, false}, {"exp", nx_exp, K_FLOAT, false},
    {"log", nx_log, K_FLOAT, false},           {"log1p", nx_log1p, K_FLOAT, false},
    {"expm1", nx_expm1, K_FLOAT, false},       {"sqrt", nx_sqrt, K_FLOAT, false},
    {"rsqrt", nx_rsqrt, K_FLOAT, false},       {"sin", nx_sin, K_FLOAT, false},
    {"cos", nx_cos, K_FLOAT, false},           {"tanh", nx_tanh, K_FLOAT, false},
    {"erf", nx_erf, K_FLOAT, false},           {"floor", nx_floor, K_FLOAT, false},
    {"ceil", nx_ceil, K_FLOAT, false},         {"round", nx_round, K_FLOAT, false},
    {"isnan", nx_isnan, K_FLOAT, true},        {"not", nx_not, K_BOOL, false},
};

static void op_unary(fz *f)
{
    int i = (int)below(f->r, sizeof unaries / sizeof *unaries);
    f->op = unaries[i].name;
    val *x = pick(f, unaries[i].kinds, 0, MAX_ND);
    if (!x)
        return;
    val a = *x;
    nx_dtype dt = unaries[i].to_bool ? NX_DTYPE_BOOL : a.dt;
    push(f, unaries[i].fn(f->g, a.n), dt, a.nd, a.sh, 0);
}

/* Integer arithmetic wraps and x/0 = x%0 = 0 by contract, so integers take every arithmetic
 * op here with any values: undefined behaviour inside the interpreter shows up under UBSan. */
static const struct {
    const char *name;
    nx_binary_builder fn;
    int kinds;
    bool to_bool;
} binaries[] = {
    {"add", nx_add, K_FLOAT | K_INT, false},
    {"sub", nx_sub, K_FLOAT | K_INT, false},
    {"mul", nx_mul, K_FLOAT | K_INT, false},
    {"div", nx_div, K_FLOAT | K_INT, false},
    {"pow", nx_pow, K_FLOAT | K_INT, false},
    {"minimum", nx_minimum, K_FLOAT | K_INT, false},
    {"maximum", nx_maximum, K_FLOAT | K_INT, false},
    {"atan2", nx_atan2, K_FLOAT, false},
    {"mod", nx_mod, K_FLOAT | K_INT, false},
    {"eq", nx_eq, K_ANY, true},
    {"ne", nx_ne, K_ANY, true},
    {"lt", nx_lt, K_FLOAT | K_INT, true},
    {"le", nx_le, K_FLOAT | K_INT, true},
    {"gt", nx_gt, K_FLOAT | K_INT, true},
    {"ge", nx_ge, K_FLOAT | K_INT, true},
    {"and", nx_and, K_BOOL, true},
    {"or", nx_or, K_BOOL, true},
};

static void op_binary(fz *f)
{
    int i = (int)below(f->r, sizeof binaries / sizeof *binaries);
    f->op = binaries[i].name;
    val *pa = pick(f, binaries[i].kinds, 0, MAX_ND);
    if (!pa)
        return;
    val a = *pa;
    int64_t sh[NX_MAX_DIMS], out[NX_MAX_DIMS];
    int nd = variant(f, &a, sh, true);
    val *pb = match(f, a.dt, nd, sh);
    if (!pb)
        return;
    val b = *pb;
    int ond = bcast(a.nd, a.sh, b.nd, b.sh, out);
    if (ond < 0) {
        failf(f, "generator bug: %s operands do not broadcast", f->op);
        return;
    }
    if (numel(ond, out) > MAX_NUMEL)
        return;
    bool swap = chance(f->r, 50);
    nx_node n = binaries[i].fn(f->g, swap ? b.n : a.n, swap ? a.n : b.n);
    push(f, n, binaries[i].to_bool ? NX_DTYPE_BOOL : a.dt, ond, out, 0);
}

static void op_select(fz *f)
{
    f->op = chance(f->r, 50) ? "select" : "where";
    val *pa = pick(f, K_ANY, 0, 4);
    if (!pa)
        return;
    val a = *pa;
    int64_t sb[NX_MAX_DIMS], sc[NX_MAX_DIMS], t[NX_MAX_DIMS], out[NX_MAX_DIMS];
    int nb = variant(f, &a, sb, false), nc = variant(f, &a, sc, true);
    /* copy each value out before the next call: a new leaf may reuse its pool slot */
    val *pb = match(f, a.dt, nb, sb);
    if (!pb)
        return;
    val b = *pb;
    val *pc = match(f, NX_DTYPE_BOOL, nc, sc);
    if (!pc)
        return;
    val c = *pc;
    int n1 = bcast(a.nd, a.sh, b.nd, b.sh, t);
    int ond = n1 < 0 ? -1 : bcast(n1, t, c.nd, c.sh, out);
    if (ond < 0) {
        failf(f, "generator bug: select operands do not broadcast");
        return;
    }
    nx_node n = f->op[0] == 's' ? nx_select(f->g, c.n, a.n, b.n) : nx_where(f->g, c.n, a.n, b.n);
    push(f, n, a.dt, ond, out, 0);
}

/* Casts between every dtype, f16 and bf16 included: those storage types exist only as cast
 * results and cast operands (no other builder takes them). Float-to-integer casts saturate and
 * send NaN to 0 by contract, so values are not clamped first. */
static void op_cast(fz *f)
{
    static const nx_dtype all[] = {NX_DTYPE_F32, NX_DTYPE_F64, NX_DTYPE_I8, NX_DTYPE_I16,
                                   NX_DTYPE_I32, NX_DTYPE_I64, NX_DTYPE_U8, NX_DTYPE_BOOL,
                                   NX_DTYPE_F16, NX_DTYPE_BF16};
    f->op = "cast";
    val *px = pick(f, K_ANY | K_HALF, 0, MAX_ND);
    if (!px)
        return;
    val x = *px;
    nx_dtype dst = all[below(f->r, sizeof all / sizeof *all)];
    /* a half value is cast straight back more often than not, so it re-enters the graph */
    if (kind(x.dt) == K_HALF && chance(f->r, 60))
        dst = chance(f->r, 50) ? NX_DTYPE_F32 : NX_DTYPE_F64;
    bool wide = dst == NX_DTYPE_I32 || dst == NX_DTYPE_I64;
    push(f, nx_cast(f->g, x.n, dst), dst, x.nd, x.sh, wide && kind(x.dt) == K_INT ? x.bound : 0);
}

static void op_reshape(fz *f)
{
    f->op = "reshape";
    val *px = pick(f, K_ANY, 0, MAX_ND);
    if (!px)
        return;
    val x = *px;
    int64_t rest = numel(x.nd, x.sh), sh[NX_MAX_DIMS], req[NX_MAX_DIMS];
    if (rest == 0) {
        /* any shape with a zero extent; no -1, which would be ambiguous */
        int nd = range(f->r, 1, 4);
        for (int i = 0; i < nd; i++)
            sh[i] = range(f->r, 0, 3);
        sh[below(f->r, (uint32_t)nd)] = 0;
        push(f, nx_reshape(f->g, x.n, nd, sh), x.dt, nd, sh, x.bound);
        return;
    }
    int nd = range(f->r, rest == 1 ? 0 : 1, 4);
    for (int i = 0; i < nd - 1; i++) {
        int64_t divs[64];
        int nds = 0;
        for (int64_t d = 1; d <= rest && nds < 64; d++) {
            if (rest % d == 0)
                divs[nds++] = d;
        }
        sh[i] = divs[below(f->r, (uint32_t)nds)];
        rest /= sh[i];
    }
    if (nd > 0)
        sh[nd - 1] = rest;
    memcpy(req, sh, sizeof sh);
    if (nd > 0 && chance(f->r, 30))
        req[below(f->r, (uint32_t)nd)] = -1;
    push(f, nx_reshape(f->g, x.n, nd, req), x.dt, nd, sh, x.bound);
}

static void op_permute(fz *f)
{
    f->op = "permute";
    val *px = pick(f, K_ANY, 0, MAX_ND);
    if (!px)
        return;
    val x = *px;
    int perm[NX_MAX_DIMS];
    int64_t sh[NX_MAX_DIMS];
    for (int i = 0; i < x.nd; i++)
        perm[i] = i;
    shuffle(f, perm, x.nd);
    for (int i = 0; i < x.nd; i++)
        sh[i] = x.sh[perm[i]];
    push(f, nx_permute(f->g, x.n, perm), x.dt, x.nd, sh, x.bound);
}

static void op_broadcast(fz *f)
{
    f->op = "broadcast";
    val *px = pick(f, K_ANY, 0, 4);
    if (!px)
        return;
    val x = *px;
    int64_t sh[NX_MAX_DIMS];
    int pre = range(f->r, 0, 2), nd = 0;
    for (int i = 0; i < pre; i++)
        sh[nd++] = range(f->r, 1, 3);
    for (int i = 0; i < x.nd; i++)
        sh[nd++] = x.sh[i] == 1 ? range(f->r, 1, 3) : x.sh[i];
    if (numel(nd, sh) > MAX_NUMEL)
        return;
    push(f, nx_broadcast(f->g, x.n, nd, sh), x.dt, nd, sh, x.bound);
}

static void op_slice(fz *f)
{
    f->op = "slice";
    val *px = pick(f, K_ANY, 0, MAX_ND);
    if (!px)
        return;
    val x = *px;
    int64_t start[NX_MAX_DIMS], stop[NX_MAX_DIMS], step[NX_MAX_DIMS], sh[NX_MAX_DIMS];
    bool unit_step = chance(f->r, 25);
    for (int i = 0; i < x.nd; i++) {
        start[i] = x.sh[i] ? range(f->r, 0, (int)x.sh[i] - 1) : 0;
        stop[i] = x.sh[i] ? range(f->r, (int)start[i] + 1, (int)x.sh[i]) : 0;
        step[i] = unit_step ? 1 : range(f->r, 1, 3);
        sh[i] = (stop[i] - start[i] + step[i] - 1) / step[i];
    }
    push(f, nx_slice(f->g, x.n, start, stop, unit_step ? NULL : step), x.dt, x.nd, sh, x.bound);
}

static void op_pad(fz *f)
{
    f->op = "pad";
    val *px = pick(f, K_ANY, 0, MAX_ND);
    if (!px)
        return;
    val x = *px;
    int64_t lo[NX_MAX_DIMS], hi[NX_MAX_DIMS], sh[NX_MAX_DIMS];
    for (int i = 0; i < x.nd; i++) {
        lo[i] = chance(f->r, 30) ? 0 : range(f->r, 0, (int)x.sh[i] + 2);
        hi[i] = chance(f->r, 30) ? 0 : range(f->r, 0, (int)x.sh[i] + 2);
        sh[i] = x.sh[i] + lo[i] + hi[i];
    }
    if (numel(x.nd, sh) > MAX_NUMEL)
        return;
    nx_pad_mode mode = (nx_pad_mode)below(f->r, NX_PAD_MODE_COUNT);
    if (numel(x.nd, x.sh) == 0)
        mode = NX_PAD_CONSTANT; /* the other modes have no values to repeat */
    double cval = kind(x.dt) == K_FLOAT ? 4.0 * unit(&f->vs) - 2.0 : range(f->r, 0, 1);
    bool keeps = mode != NX_PAD_CONSTANT; /* only x's values appear */
    push(f, nx_pad(f->g, x.n, lo, hi, mode, cval), x.dt, x.nd, sh, keeps ? x.bound : 0);
}

static void op_reverse(fz *f)
{
    f->op = "reverse";
    val *px = pick(f, K_ANY, 0, MAX_ND);
    if (!px)
        return;
    val x = *px;
    int axes[NX_MAX_DIMS];
    int n = subset(f, x.nd, axes, false);
    int given[NX_MAX_DIMS];
    neg_all(f, axes, n, x.nd, given);
    push(f, nx_reverse(f->g, x.n, n, given), x.dt, x.nd, x.sh, x.bound);
}

static void op_concat(fz *f)
{
    f->op = "concat";
    val *px = pick(f, K_ANY, 1, MAX_ND);
    if (!px)
        return;
    val x = *px;
    int axis = (int)below(f->r, (uint32_t)x.nd), n = range(f->r, 1, 3);
    nx_node xs[3];
    int64_t sh[NX_MAX_DIMS], total = 0;
    memcpy(sh, x.sh, sizeof sh);
    for (int k = 0; k < n; k++) {
        int how = (int)below(f->r, 3);
        if (how == 1 && x.sh[axis] == 0)
            how = 0;
        if (how == 0) {
            xs[k] = x.n;
            total += x.sh[axis];
        } else if (how == 1) {
            int64_t start[NX_MAX_DIMS] = {0}, stop[NX_MAX_DIMS];
            memcpy(stop, x.sh, sizeof stop);
            stop[axis] = range(f->r, 1, (int)x.sh[axis]);
            xs[k] = nx_slice(f->g, x.n, start, stop, NULL);
            total += stop[axis];
        } else {
            sh[axis] = range(f->r, 1, 3);
            val *p = match(f, x.dt, x.nd, sh);
            if (!p)
                return;
            xs[k] = p->n;
            total += sh[axis];
        }
    }
    sh[axis] = total;
    if (numel(x.nd, sh) > MAX_NUMEL)
        return;
    f->op = "concat";
    push(f, nx_concat(f->g, n, xs, neg(f, axis, x.nd)), x.dt, x.nd, sh, 0);
}

static void op_window(fz *f)
{
    f->op = "window";
    val *px = pick(f, K_ANY, 1, 3);
    if (!px)
        return;
    val x = *px;
    if (numel(x.nd, x.sh) == 0)
        return; /* every window axis needs at least one output */
    int64_t w[NX_MAX_DIMS], s[NX_MAX_DIMS], d[NX_MAX_DIMS], sh[NX_MAX_DIMS];
    bool ns = chance(f->r, 25), ndl = chance(f->r, 25);
    for (int i = 0; i < x.nd; i++) {
        w[i] = range(f->r, 1, (int)x.sh[i]);
        d[i] = ndl ? 1 : range(f->r, 1, 2);
        if (d[i] * (w[i] - 1) + 1 > x.sh[i])
            d[i] = 1;
        s[i] = ns ? 1 : range(f->r, 1, 3);
        sh[i] = (x.sh[i] - d[i] * (w[i] - 1) - 1) / s[i] + 1;
        sh[x.nd + i] = w[i];
    }
    if (ndl) {
        for (int i = 0; i < x.nd; i++)
            d[i] = 1;
    }
    if (numel(2 * x.nd, sh) > MAX_NUMEL)
        return;
    push(f, nx_window(f->g, x.n, w, ns ? NULL : s, ndl ? NULL : d), x.dt, 2 * x.nd, sh, x.bound);
}

/* An index operand: an existing i32/i64 value of rank <= 2, or a new one (values -5..5, so the
 * clamping or dropping of out-of-range indices is exercised). */
static val *index_operand(fz *f)
{
    if (chance(f->r, 40)) {
        int start = f->npool ? (int)below(f->r, (uint32_t)f->npool) : 0;
        for (int i = 0; i < f->npool; i++) {
            val *v = &f->pool[(start + i) % f->npool];
            if ((v->dt == NX_DTYPE_I32 || v->dt == NX_DTYPE_I64) && v->nd <= 2)
                return v;
        }
    }
    int64_t sh[NX_MAX_DIMS];
    int nd = range(f->r, 0, 2);
    for (int i = 0; i < nd; i++)
        sh[i] = range(f->r, 1, 3);
    return leaf(f, chance(f->r, 50) ? NX_DTYPE_I32 : NX_DTYPE_I64, nd, sh);
}

static int take_shape(const val *x, const val *idx, int axis, int64_t *sh)
{
    int nd = 0;
    for (int i = 0; i < axis; i++)
        sh[nd++] = x->sh[i];
    for (int i = 0; i < idx->nd; i++)
        sh[nd++] = idx->sh[i];
    for (int i = axis + 1; i < x->nd; i++)
        sh[nd++] = x->sh[i];
    return nd;
}

static void op_gather(fz *f)
{
    f->op = "gather";
    val *px = pick(f, K_ANY, 1, 4);
    if (!px)
        return;
    val x = *px; /* copied before index_operand, which may reuse px's pool slot */
    val *pi = index_operand(f);
    if (!pi)
        return;
    val idx = *pi;
    int axis = (int)below(f->r, (uint32_t)x.nd);
    if (x.sh[axis] == 0)
        return; /* nothing to clamp into */
    int64_t sh[NX_MAX_DIMS];
    int nd = take_shape(&x, &idx, axis, sh);
    if (nd > MAX_ND || numel(nd, sh) > MAX_NUMEL)
        return;
    f->op = "gather";
    push(f, nx_gather(f->g, x.n, idx.n, neg(f, axis, x.nd)), x.dt, nd, sh, x.bound);
}

static void op_scatter(fz *f)
{
    f->op = "scatter";
    val *px = pick(f, K_FLOAT | K_INT, 1, 4);
    if (!px)
        return;
    val x = *px; /* copied before index_operand, which may reuse px's pool slot */
    val *pi = index_operand(f);
    if (!pi)
        return;
    val idx = *pi;
    int axis = (int)below(f->r, (uint32_t)x.nd);
    int64_t sh[NX_MAX_DIMS];
    int nd = take_shape(&x, &idx, axis, sh);
    if (nd > MAX_ND || numel(nd, sh) > MAX_NUMEL)
        return;
    val *pu = match(f, x.dt, nd, sh);
    if (!pu)
        return;
    val u = *pu;
    static const nx_monoid ms[] = {NX_MONOID_SUM, NX_MONOID_MAX, NX_MONOID_MIN};
    nx_monoid m = ms[below(f->r, 3)];
    f->op = "scatter";
    push(f, nx_scatter(f->g, x.n, idx.n, u.n, neg(f, axis, x.nd), m), x.dt, x.nd, x.sh, 0);
}

static int reduced_shape(const val *x, const int *axes, int n, bool keep, int64_t *sh)
{
    bool r[NX_MAX_DIMS] = {false};
    for (int i = 0; i < n; i++)
        r[axes[i]] = true;
    int nd = 0;
    for (int i = 0; i < x->nd; i++) {
        if (!r[i])
            sh[nd++] = x->sh[i];
        else if (keep)
            sh[nd++] = 1;
    }
    return nd;
}

static void op_reduce(fz *f)
{
    f->op = "reduce";
    val *px = pick(f, K_FLOAT | K_INT, 0, MAX_ND);
    if (!px)
        return;
    val x = *px;
    nx_monoid m = (nx_monoid)below(f->r, NX_MONOID_COUNT);
    bool arg = m == NX_MONOID_ARGMAX || m == NX_MONOID_ARGMIN;
    if (kind(x.dt) == K_INT && m == NX_MONOID_LOGSUMEXP)
        m = NX_MONOID_MAX;
    if (arg && x.nd == 0)
        m = NX_MONOID_SUM, arg = false;
    int axes[NX_MAX_DIMS], n;
    if (arg) {
        axes[0] = (int)below(f->r, (uint32_t)x.nd);
        n = 1;
        if (x.sh[axes[0]] == 0)
            m = NX_MONOID_MIN, arg = false; /* ARGMAX/ARGMIN need a nonempty axis */
    } else {
        n = subset(f, x.nd, axes, false);
    }
    bool keep = chance(f->r, 40);
    int64_t sh[NX_MAX_DIMS];
    int nd = reduced_shape(&x, axes, n, keep, sh);
    int given[NX_MAX_DIMS];
    neg_all(f, axes, n, x.nd, given);
    nx_node r = nx_reduce(f->g, x.n, n, given, m, keep);
    if (arg)
        push(f, r, NX_DTYPE_I64, nd, sh, x.sh[axes[0]]);
    else
        push(f, r, x.dt, nd, sh, 0);
}

static void op_reduce_custom(fz *f)
{
    f->op = "reduce_custom";
    val *px = pick(f, K_FLOAT, 0, MAX_ND);
    if (!px)
        return;
    val x = *px;
    nx_graph *g = f->g;
    nx_monoid_def m = {0};
    m.x = nx_placeholder(g, x.dt);
    int which = (int)below(f->r, 2);
    m.ncarry = which == 0 ? 1 : 2;
    for (int i = 0; i < m.ncarry; i++) {
        m.a[i] = nx_placeholder(g, x.dt);
        m.b[i] = nx_placeholder(g, x.dt);
        m.identity[i] = nx_scalar(g, x.dt, 0.0);
    }
    if (which == 0) {
        /* sum of squares, finalize omitted */
        m.lift[0] = nx_mul(g, m.x, m.x);
        m.combine[0] = nx_add(g, m.a[0], m.b[0]);
    } else {
        /* (max, sum) carry, finalize max + sum: two components combined independently */
        m.lift[0] = m.x;
        m.lift[1] = chance(f->r, 50) ? m.x : NX_NONE;
        if (m.lift[1] == NX_NONE)
            m.lift[1] = nx_abs(g, m.x);
        m.identity[0] = nx_scalar(g, x.dt, -INFINITY);
        m.combine[0] = nx_maximum(g, m.a[0], m.b[0]);
        m.combine[1] = nx_add(g, m.a[1], m.b[1]);
        m.finalize = nx_add(g, m.a[0], m.a[1]);
    }
    int axes[NX_MAX_DIMS];
    int n = subset(f, x.nd, axes, false);
    bool keep = chance(f->r, 40);
    int64_t sh[NX_MAX_DIMS];
    int nd = reduced_shape(&x, axes, n, keep, sh);
    int given[NX_MAX_DIMS];
    neg_all(f, axes, n, x.nd, given);
    push(f, nx_reduce_custom(g, x.n, n, given, &m, keep), x.dt, nd, sh, 0);
}

static void op_scan(fz *f)
{
    f->op = "scan";
    val *px = pick(f, K_FLOAT | K_INT, 1, MAX_ND);
    if (!px)
        return;
    val x = *px;
    static const nx_monoid ms[] = {NX_MONOID_SUM, NX_MONOID_PROD, NX_MONOID_MAX, NX_MONOID_MIN,
                                   NX_MONOID_LOGSUMEXP};
    nx_monoid m = ms[below(f->r, kind(x.dt) == K_FLOAT ? 5 : 4)];
    int axis = (int)below(f->r, (uint32_t)x.nd);
    push(f, nx_scan(f->g, x.n, neg(f, axis, x.nd), m, chance(f->r, 50)), x.dt, x.nd, x.sh, 0);
}

static void op_scan_linear(fz *f)
{
    f->op = "scan_linear";
    val *pb = pick(f, K_FLOAT, 1, MAX_ND);
    if (!pb)
        return;
    val b = *pb;
    int64_t sh[NX_MAX_DIMS], out[NX_MAX_DIMS];
    int nd = variant(f, &b, sh, false);
    val *pa = match(f, b.dt, nd, sh);
    if (!pa)
        return;
    val a = *pa;
    int ond = bcast(a.nd, a.sh, b.nd, b.sh, out);
    if (ond < 1) {
        failf(f, "generator bug: scan_linear operands do not broadcast");
        return;
    }
    int axis = (int)below(f->r, (uint32_t)ond);
    push(f, nx_scan_linear(f->g, a.n, b.n, neg(f, axis, ond), chance(f->r, 50)), b.dt, ond, out, 0);
}

static void op_scan_iir(fz *f)
{
    f->op = "scan_iir";
    val *px = pick(f, K_FLOAT, 1, MAX_ND);
    if (!px)
        return;
    val x = *px;
    int order = 1 + (int)below(f->r, 4), axis = (int)below(f->r, (uint32_t)x.nd);
    double c[4];
    for (int j = 0; j < order; j++) /* |c| sums below 1: every pole inside the unit circle */
        c[j] = ((double)below(f->r, 2001) / 1000.0 - 1.0) * 0.9 / order;
    push(f, nx_scan_iir(f->g, x.n, neg(f, axis, x.nd), chance(f->r, 50), order, c), x.dt, x.nd,
         x.sh, 0);
}

static void op_sort(fz *f)
{
    bool arg = chance(f->r, 50);
    f->op = arg ? "argsort" : "sort";
    val *px = pick(f, K_FLOAT | K_INT, 1, MAX_ND);
    if (!px)
        return;
    val x = *px;
    int axis = (int)below(f->r, (uint32_t)x.nd);
    bool desc = chance(f->r, 50);
    if (arg)
        push(f, nx_argsort(f->g, x.n, neg(f, axis, x.nd), desc), NX_DTYPE_I64, x.nd, x.sh,
             x.sh[axis]);
    else
        push(f, nx_sort(f->g, x.n, neg(f, axis, x.nd), desc), x.dt, x.nd, x.sh, x.bound);
}

static void op_topk(fz *f)
{
    f->op = "topk";
    val *px = pick(f, K_FLOAT | K_INT, 1, MAX_ND);
    if (!px)
        return;
    val x = *px;
    int axis = (int)below(f->r, (uint32_t)x.nd);
    if (x.sh[axis] == 0)
        return;
    int64_t k = range(f->r, 1, (int)x.sh[axis]), sh[NX_MAX_DIMS];
    memcpy(sh, x.sh, sizeof sh);
    sh[axis] = k;
    int which = (int)below(f->r, 3); /* both, values only, indices only */
    nx_node v = NX_NONE, i = NX_NONE;
    nx_topk(f->g, x.n, k, neg(f, axis, x.nd), chance(f->r, 50), which == 2 ? NULL : &v,
            which == 1 ? NULL : &i);
    if (which != 2)
        push(f, v, x.dt, x.nd, sh, x.bound);
    if (which != 1)
        push(f, i, NX_DTYPE_I64, x.nd, sh, x.sh[axis]);
}

static void op_matmul(fz *f)
{
    f->op = "matmul";
    val *pa = pick(f, K_FLOAT, 2, 4);
    if (!pa)
        return;
    val a = *pa;
    int64_t sh[NX_MAX_DIMS], out[NX_MAX_DIMS];
    /* b: a broadcast-compatible batch, then (k, n) */
    val batch = a;
    batch.nd = a.nd - 2;
    int nd = variant(f, &batch, sh, true);
    sh[nd++] = a.sh[a.nd - 1];
    sh[nd++] = range(f->r, 1, 4);
    val *pb = match(f, a.dt, nd, sh);
    if (!pb)
        return;
    val b = *pb;
    int ond = bcast(a.nd - 2, a.sh, b.nd - 2, b.sh, out);
    if (ond < 0) {
        failf(f, "generator bug: matmul batch dims do not broadcast");
        return;
    }
    out[ond++] = a.sh[a.nd - 2];
    out[ond++] = b.sh[b.nd - 1];
    if (ond > MAX_ND || numel(ond, out) > MAX_NUMEL)
        return;
    push(f, nx_matmul(f->g, a.n, b.n), a.dt, ond, out, 0);
}

static void op_einsum(fz *f)
{
    static const char *specs[] = {"ij,jk->ik", "ij,ij->i", "ij,j->i", "ij,ik->jk", "ij,kj->ik"};
    static const nx_monoid plus[] = {NX_MONOID_SUM, NX_MONOID_MAX, NX_MONOID_MIN,
                                     NX_MONOID_LOGSUMEXP};
    static const nx_binary_builder times[] = {nx_mul, nx_add, nx_sub, nx_minimum, nx_maximum};
    f->op = "einsum";
    val *pa = pick(f, K_FLOAT, 2, 2);
    if (!pa)
        return;
    val a = *pa;
    int s = (int)below(f->r, 5);
    int64_t i = a.sh[0], j = a.sh[1], k = range(f->r, 1, 4);
    int64_t bs[2], out[2];
    int bnd = 2, ond = 2;
    switch (s) {
    case 0:
        bs[0] = j, bs[1] = k, out[0] = i, out[1] = k;
        break;
    case 1:
        bs[0] = i, bs[1] = j, out[0] = i, ond = 1;
        break;
    case 2:
        bs[0] = j, bnd = 1, out[0] = i, ond = 1;
        break;
    case 3:
        bs[0] = i, bs[1] = k, out[0] = j, out[1] = k;
        break;
    default:
        bs[0] = k, bs[1] = j, out[0] = i, out[1] = k;
        break;
    }
    val *pb = match(f, a.dt, bnd, bs);
    if (!pb)
        return;
    nx_node n = nx_einsum(f->g, specs[s], a.n, pb->n, plus[below(f->r, 4)], times[below(f->r, 5)]);
    push(f, n, a.dt, ond, out, 0);
}

static void op_stats(fz *f)
{
    int which = (int)below(f->r, 3);
    f->op = which == 0 ? "mean" : which == 1 ? "var" : "softmax";
    val *px = pick(f, K_FLOAT, which == 2 ? 1 : 0, MAX_ND);
    if (!px)
        return;
    val x = *px;
    if (which == 2) {
        int axis = neg(f, (int)below(f->r, (uint32_t)x.nd), x.nd);
        push(f, nx_softmax(f->g, x.n, axis), x.dt, x.nd, x.sh, 0);
        return;
    }
    int axes[NX_MAX_DIMS];
    int n = subset(f, x.nd, axes, false);
    bool keep = chance(f->r, 40);
    int64_t sh[NX_MAX_DIMS], cnt = 1;
    for (int i = 0; i < n; i++)
        cnt *= x.sh[axes[i]];
    int nd = reduced_shape(&x, axes, n, keep, sh);
    int given[NX_MAX_DIMS];
    neg_all(f, axes, n, x.nd, given);
    nx_node r = which == 0 ? nx_mean(f->g, x.n, n, given, keep)
                           : nx_var(f->g, x.n, n, given, cnt > 1 ? range(f->r, 0, 1) : 0, keep);
    push(f, r, x.dt, nd, sh, 0);
}

static void op_iota(fz *f)
{
    static const nx_dtype dts[] = {NX_DTYPE_F32, NX_DTYPE_F64, NX_DTYPE_I32, NX_DTYPE_I64};
    f->op = "iota";
    int64_t sh[NX_MAX_DIMS];
    int nd = rand_shape(f, range(f->r, 1, 3), sh);
    int axis = (int)below(f->r, (uint32_t)nd);
    nx_dtype dt = dts[below(f->r, 4)];
    push(f, nx_iota(f->g, dt, nd, sh, neg(f, axis, nd)), dt, nd, sh,
         kind(dt) == K_INT ? sh[axis] : 0);
}

static void op_leaf(fz *f)
{
    f->op = "leaf";
    int64_t sh[NX_MAX_DIMS];
    int nd = rand_shape(f, range(f->r, 0, 4), sh);
    leaf(f, rand_dtype(f, K_ANY), nd, sh);
}

static void op_extern(fz *f); /* with the extern definitions below */

static struct {
    const char *name;
    void (*fn)(fz *f);
    int weight;
} ops[] = {
    {"unary", op_unary, 10},
    {"binary", op_binary, 12},
    {"select", op_select, 3},
    {"cast", op_cast, 3},
    {"reshape", op_reshape, 4},
    {"permute", op_permute, 3},
    {"broadcast", op_broadcast, 3},
    {"slice", op_slice, 4},
    {"pad", op_pad, 4},
    {"reverse", op_reverse, 3},
    {"concat", op_concat, 3},
    {"window", op_window, 3},
    {"gather", op_gather, 3},
    {"scatter", op_scatter, 3},
    {"reduce", op_reduce, 6},
    {"reduce_custom", op_reduce_custom, 2},
    {"scan", op_scan, 3},
    {"scan_linear", op_scan_linear, 2},
    {"scan_iir", op_scan_iir, 1},
    {"sort", op_sort, 3},
    {"topk", op_topk, 2},
    {"matmul", op_matmul, 2},
    {"einsum", op_einsum, 2},
    {"stats", op_stats, 3},
    {"iota", op_iota, 1},
    {"leaf", op_leaf, 2},
    {"extern", op_extern, 2},
};
#define NOPS ((int)(sizeof ops / sizeof *ops))

const char *fz_op_name(int i)
{
    return i >= 0 && i < NOPS ? ops[i].name : NULL;
}

bool fz_disable_op(const char *name)
{
    for (int i = 0; i < NOPS; i++) {
        if (strcmp(ops[i].name, name) == 0) {
            ops[i].weight = 0;
            return true;
        }
    }
    return false;
}

static int pick_op(fz *f)
{
    int total = 0;
    for (int i = 0; i < NOPS; i++)
        total += ops[i].weight;
    int r = (int)below(f->r, (uint32_t)total);
    for (int i = 0; i < NOPS; i++) {
        if (r < ops[i].weight)
            return i;
        r -= ops[i].weight;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------------
 * Extern ops: copy(x, others...) = x, with a reference that insists on what the header promises
 * (contiguous host inputs, an output of the declared dtype and shape); and externs whose shape
 * rule or reference fail, for the invalid modes.
 * ----------------------------------------------------------------------------------------------*/

static nx_status copy_shape(void *user, int n_in, const nx_dtype *dtypes, const int *ndims,
                            const int64_t *const *shapes, nx_dtype *out_dtype, int *out_ndim,
                            int64_t out_shape[NX_MAX_DIMS])
{
    if (user || n_in < 1)
        return NX_ERR_SHAPE; /* user != NULL: the failing variant */
    *out_dtype = dtypes[0];
    *out_ndim = ndims[0];
    memcpy(out_shape, shapes[0], sizeof(int64_t) * (size_t)ndims[0]);
    return NX_OK;
}

static nx_status copy_reference(void *user, nx_ctx *ctx, int n_in, const nx_tensor *const *ins,
                                nx_tensor *out)
{
    (void)ctx;
    if (user)
        return NX_ERR_UNSUPPORTED; /* the failing variant */
    for (int i = 0; i < n_in; i++) {
        if (!ins[i] || !nx_tensor_is_contiguous(ins[i]) ||
            nx_tensor_device(ins[i]) != NX_DEVICE_HOST)
            return NX_ERR_INVALID_ARG;
    }
    const nx_tensor *x = ins[0];
    if (!out || !nx_tensor_is_contiguous(out) || nx_tensor_dtype(out) != nx_tensor_dtype(x) ||
        nx_tensor_ndim(out) != nx_tensor_ndim(x) ||
        memcmp(nx_tensor_shape(out), nx_tensor_shape(x),
               sizeof(int64_t) * (size_t)nx_tensor_ndim(x)) != 0)
        return NX_ERR_INVALID_ARG;
    int64_t n = nx_tensor_numel(x);
    if (n > 0)
        memcpy(nx_tensor_data(out), nx_tensor_data(x),
               (size_t)n * nx_dtype_size(nx_tensor_dtype(x)));
    return NX_OK;
}

static int fail_marker;
static const nx_extern_def copy_def = {
    .name = "copy", .shape = copy_shape, .reference = copy_reference};
static const nx_extern_def bad_shape_def = {
    .name = "bad_shape", .shape = copy_shape, .reference = copy_reference, .user = &fail_marker};

/* copy with a reference that fails: the shape rule must pass, so user is checked only there */
static nx_status ok_shape(void *user, int n_in, const nx_dtype *dtypes, const int *ndims,
                          const int64_t *const *shapes, nx_dtype *out_dtype, int *out_ndim,
                          int64_t out_shape[NX_MAX_DIMS])
{
    (void)user;
    return copy_shape(NULL, n_in, dtypes, ndims, shapes, out_dtype, out_ndim, out_shape);
}
static const nx_extern_def bad_ref_def = {
    .name = "bad_reference", .shape = ok_shape, .reference = copy_reference, .user = &fail_marker};

static void op_extern(fz *f)
{
    f->op = "extern";
    val *px = pick(f, K_ANY, 0, MAX_ND);
    if (!px)
        return;
    val x = *px;
    nx_node ins[3] = {x.n};
    int n = range(f->r, 1, 3);
    for (int i = 1; i < n; i++) {
        val *o = pick(f, K_ANY, 0, MAX_ND);
        if (!o)
            return;
        ins[i] = o->n;
    }
    f->op = "extern";
    push(f, nx_extern(f->g, &copy_def, n, ins), x.dt, x.nd, x.sh, x.bound);
}

/* ------------------------------------------------------------------------------------------------
 * Identities: two ways to compute one value, checked for equality after the run. They give the
 * fuzzer value-level checks of movement, indexing and sorting on odd shapes and strides, with
 * no oracle but algebra.
 * ----------------------------------------------------------------------------------------------*/

typedef struct pair {
    val lhs, rhs;
    const char *rel;
} pair;

static void inverse_perm(const int *p, int n, int *inv)
{
    for (int i = 0; i < n; i++)
        inv[p[i]] = i;
}

/* Builds rhs, a value that must equal v, by relation r. False when r does not apply to v. */
static bool identity(fz *f, const val *v, int r, pair *out)
{
    nx_graph *g = f->g;
    int axes[NX_MAX_DIMS], perm[NX_MAX_DIMS], inv[NX_MAX_DIMS];
    int64_t lo[NX_MAX_DIMS], hi[NX_MAX_DIMS], stop[NX_MAX_DIMS], ones[NX_MAX_DIMS], sh[NX_MAX_DIMS];
    nx_node n = NX_NONE;
    out->lhs = *v;
    out->lhs.bound = 0; /* index bounds are checked on the fuzzed values, not on the pairs */
    for (int i = 0; i < NX_MAX_DIMS; i++)
        ones[i] = 1, lo[i] = 0;
    switch (r) {
    case 0: {
        out->rel = "reverse(reverse(v, A), A) == v";
        int k = subset(f, v->nd, axes, false);
        n = nx_reverse(g, nx_reverse(g, v->n, k, axes), k, axes);
        break;
    }
    case 1:
        out->rel = "permute(permute(v, p), p^-1) == v";
        for (int i = 0; i < v->nd; i++)
            perm[i] = i;
        shuffle(f, perm, v->nd);
        inverse_perm(perm, v->nd, inv);
        n = nx_permute(g, nx_permute(g, v->n, perm), inv);
        break;
    case 2: {
        out->rel = "slice(pad(v, lo, hi, mode), lo, lo + extent) == v";
        for (int i = 0; i < v->nd; i++) {
            lo[i] = range(f->r, 0, (int)v->sh[i] + 2);
            hi[i] = range(f->r, 0, 2);
            stop[i] = lo[i] + v->sh[i];
            sh[i] = v->sh[i] + lo[i] + hi[i];
        }
        if (numel(v->nd, sh) > MAX_NUMEL)
            return false;
        nx_pad_mode mode = (nx_pad_mode)below(f->r, NX_PAD_MODE_COUNT);
        if (numel(v->nd, v->sh) == 0)
            mode = NX_PAD_CONSTANT;
        n = nx_slice(g, nx_pad(g, v->n, lo, hi, mode, 0.25), lo, stop, NULL);
        break;
    }
    case 3: {
        out->rel = "reshape(reshape(v, [numel]), shape) == v";
        int64_t total = numel(v->nd, v->sh);
        n = nx_reshape(g, nx_reshape(g, v->n, 1, &total), v->nd, v->sh);
        break;
    }
    case 4: {
        if (v->nd == 0)
            return false;
        out->rel = "slice(concat(v, v, axis), 0, extent) == v";
        int axis = (int)below(f->r, (uint32_t)v->nd);
        memcpy(stop, v->sh, sizeof stop);
        n = nx_slice(g, nx_concat(g, 2, (nx_node[]){v->n, v->n}, axis), lo, stop, NULL);
        break;
    }
    case 5: {
        if (v->nd == 0)
            return false;
        out->rel = "gather(v, iota(extent), axis) == v";
        int axis = (int)below(f->r, (uint32_t)v->nd);
        nx_dtype it = chance(f->r, 50) ? NX_DTYPE_I32 : NX_DTYPE_I64;
        n = nx_gather(g, v->n, nx_iota(g, it, 1, &v->sh[axis], 0), axis);
        break;
    }
    case 6: {
        if (v->nd >= MAX_ND || numel(v->nd, v->sh) * 3 > MAX_NUMEL)
            return false;
        out->rel = "max over a broadcast leading axis == v";
        sh[0] = 3;
        memcpy(sh + 1, v->sh, sizeof(int64_t) * (size_t)v->nd);
        axes[0] = 0;
        if (kind(v->dt) == K_BOOL)
            return false;
        n = nx_reduce(g, nx_broadcast(g, v->n, v->nd + 1, sh), 1, axes, NX_MONOID_MAX, false);
        break;
    }
    case 7: {
        if (v->nd == 0 || v->nd > 3 || numel(v->nd, v->sh) == 0)
            return false;
        out->rel = "window(v, 1, 1, 1) == reshape(v, shape + [1...])";
        memcpy(sh, v->sh, sizeof(int64_t) * (size_t)v->nd);
        memcpy(sh + v->nd, ones, sizeof(int64_t) * (size_t)v->nd);
        out->lhs.n = nx_reshape(g, v->n, 2 * v->nd, sh);
        out->lhs.nd = 2 * v->nd;
        memcpy(out->lhs.sh, sh, sizeof sh);
        n = nx_window(g, v->n, ones, NULL, NULL);
        break;
    }
    case 8: {
        out->rel = "select(c, v, v) == v";
        int64_t csh[NX_MAX_DIMS];
        int cn = variant(f, v, csh, false);
        val *c = match(f, NX_DTYPE_BOOL, cn, csh);
        if (!c)
            return false;
        n = nx_select(g, c->n, v->n, v->n);
        break;
    }
    case 9:
        if (kind(v->dt) == K_BOOL)
            return false;
        out->rel = "maximum(v, v) == v and minimum(v, v) == v";
        n = nx_minimum(g, nx_maximum(g, v->n, v->n), v->n);
        break;
    case 10: {
        if (v->nd == 0 || kind(v->dt) == K_BOOL)
            return false;
        out->rel = "sort(reverse(v, axis), axis) == sort(v, axis) (values)";
        int axis = (int)below(f->r, (uint32_t)v->nd);
        bool desc = chance(f->r, 50);
        out->lhs.n = nx_sort(g, v->n, axis, desc);
        n = nx_sort(g, nx_reverse(g, v->n, 1, &axis), axis, desc);
        break;
    }
    case 11: {
        if (v->nd == 0 || kind(v->dt) == K_BOOL)
            return false;
        out->rel = "argmax(v, axis) == first of argsort(v, axis, descending)";
        int axis = (int)below(f->r, (uint32_t)v->nd);
        if (v->sh[axis] == 0)
            return false;
        memcpy(stop, v->sh, sizeof stop);
        stop[axis] = 1;
        nx_node first = nx_slice(g, nx_argsort(g, v->n, axis, true), lo, stop, NULL);
        out->lhs.n = nx_reduce(g, v->n, 1, &axis, NX_MONOID_ARGMAX, true);
        out->lhs.dt = NX_DTYPE_I64;
        memcpy(out->lhs.sh, stop, sizeof stop);
        n = first;
        break;
    }
    case 12: {
        if (v->nd == 0 || kind(v->dt) != K_INT)
            return false;
        out->rel = "topk(v, extent, axis) == (sort, argsort)(v, axis) on integers";
        int axis = (int)below(f->r, (uint32_t)v->nd);
        if (v->sh[axis] == 0)
            return false;
        bool largest = chance(f->r, 50);
        nx_node tv = NX_NONE, ti = NX_NONE;
        nx_topk(g, v->n, v->sh[axis], axis, largest, &tv, &ti);
        out->lhs.n = tv;
        n = nx_sort(g, v->n, axis, largest);
        pair *second = out + 1;
        second->rel = "topk indices == argsort on integers";
        second->lhs = *v;
        second->lhs.bound = 0;
        second->lhs.n = ti;
        second->lhs.dt = NX_DTYPE_I64;
        second->rhs = second->lhs;
        second->rhs.n = nx_argsort(g, v->n, axis, largest);
        break;
    }
    case 13:
        out->rel = "extern copy(v) == v";
        n = nx_extern(g, &copy_def, 1, &v->n);
        break;
    default:
        if (kind(v->dt) != K_INT)
            return false;
        out->rel = "cast(cast(v, i64), dtype) == v on integers";
        n = nx_cast(g, nx_cast(g, v->n, NX_DTYPE_I64), v->dt);
        break;
    }
    out->rhs = out->lhs;
    out->rhs.n = n;
    const char *saved = f->op;
    f->op = out->rel;
    bool ok = push(f, out->lhs.n, out->lhs.dt, out->lhs.nd, out->lhs.sh, 0) &&
              push(f, n, out->lhs.dt, out->lhs.nd, out->lhs.sh, 0);
    if (ok && r == 12)
        ok = push(f, out[1].lhs.n, NX_DTYPE_I64, v->nd, v->sh, 0) &&
             push(f, out[1].rhs.n, NX_DTYPE_I64, v->nd, v->sh, 0);
    f->op = saved;
    return ok;
}
#define NREL 15

/* Equal values: floats compare as numbers (so -0 == 0) with NaN equal to NaN. */
static bool equal_values(const nx_tensor *a, const nx_tensor *b, int64_t *where)
{
    nx_dtype d = nx_tensor_dtype(a);
    int64_t n = nx_tensor_numel(a);
    for (int64_t i = 0; i < n; i++) {
        bool eq;
        if (d == NX_DTYPE_F32 || d == NX_DTYPE_F64) {
            double x = d == NX_DTYPE_F32 ? ((const float *)nx_tensor_data(a))[i]
                                         : ((const double *)nx_tensor_data(a))[i];
            double y = d == NX_DTYPE_F32 ? ((const float *)nx_tensor_data(b))[i]
                                         : ((const double *)nx_tensor_data(b))[i];
            eq = x == y || (isnan(x) && isnan(y));
        } else {
            size_t es = nx_dtype_size(d);
            eq = memcmp((const char *)nx_tensor_data(a) + (size_t)i * es,
                        (const char *)nx_tensor_data(b) + (size_t)i * es, es) == 0;
        }
        if (!eq) {
            *where = i;
            return false;
        }
    }
    return true;
}

/* ------------------------------------------------------------------------------------------------
 * Running a built graph
 * ----------------------------------------------------------------------------------------------*/

/* A host tensor for input v: contiguous, or a strided view (reversed axis or every other element)
 * over a larger buffer that *buf owns. */
static nx_status make_input(fz *f, const val *v, nx_tensor **t, void **buf)
{
    size_t es = nx_dtype_size(v->dt);
    int64_t n = numel(v->nd, v->sh);
    *buf = NULL;
    if (v->nd == 0 || chance(f->r, 60)) {
        nx_status st = nx_tensor_new(f->ctx, v->dt, v->nd, v->sh, t);
        if (st == NX_OK && n > 0)
            fill(f, v->dt, nx_tensor_data(*t), n);
        return st;
    }
    int axis = (int)below(f->r, (uint32_t)v->nd);
    bool rev = chance(f->r, 50) && n > 0;
    int64_t strides[NX_MAX_DIMS], s = 1;
    for (int i = v->nd - 1; i >= 0; i--) {
        int64_t ext = i == axis && !rev ? 2 * v->sh[i] : v->sh[i];
        strides[i] = i == axis && !rev ? 2 * s : s;
        s *= ext;
    }
    *buf = malloc((size_t)s * es + 1);
    if (!*buf)
        return NX_ERR_NOMEM;
    fill(f, v->dt, *buf, s);
    char *base = *buf;
    if (rev) {
        base += (size_t)((v->sh[axis] - 1) * strides[axis]) * es;
        strides[axis] = -strides[axis];
    }
    return nx_tensor_wrap(f->ctx, base, v->dt, v->nd, v->sh, strides, t);
}

static bool same_values(const nx_tensor *a, const nx_tensor *b)
{
    size_t es = nx_dtype_size(nx_tensor_dtype(a));
    int64_t n = nx_tensor_numel(a);
    const unsigned char *x = nx_tensor_data(a), *y = nx_tensor_data(b);
    for (int64_t i = 0; i < n; i++) {
        if (memcmp(x + i * (int64_t)es, y + i * (int64_t)es, es) == 0)
            continue;
        if (nx_tensor_dtype(a) == NX_DTYPE_F64 && isnan(((const double *)x)[i]) &&
            isnan(((const double *)y)[i]))
            continue;
        if (nx_tensor_dtype(a) == NX_DTYPE_F32 && isnan(((const float *)x)[i]) &&
            isnan(((const float *)y)[i]))
            continue;
        return false;
    }
    return true;
}

static int64_t int_at(const nx_tensor *t, int64_t i)
{
    const void *p = nx_tensor_data(t);
    switch (nx_tensor_dtype(t)) {
    case NX_DTYPE_I8:
        return ((const int8_t *)p)[i];
    case NX_DTYPE_I16:
        return ((const int16_t *)p)[i];
    case NX_DTYPE_I32:
        return ((const int32_t *)p)[i];
    case NX_DTYPE_I64:
        return ((const int64_t *)p)[i];
    default:
        return ((const uint8_t *)p)[i];
    }
}

/* Output k against its prediction: dtype, shape, layout, bool bytes 0/1, index ranges. */
static void check_output(fz *f, const val *v, int k, const nx_tensor *t)
{
    char want[96], got[96];
    shape_text(want, sizeof want, v->dt, v->nd, v->sh);
    shape_text(got, sizeof got, nx_tensor_dtype(t), nx_tensor_ndim(t), nx_tensor_shape(t));
    if (strcmp(want, got) != 0) {
        failf(f, "output %d (node %%%u) is %s, expected %s", k, v->n, got, want);
        return;
    }
    if (!nx_tensor_is_contiguous(t) || nx_tensor_device(t) != NX_DEVICE_HOST) {
        failf(f, "output %d is not a contiguous host tensor", k);
        return;
    }
    int64_t n = nx_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        if (v->dt == NX_DTYPE_BOOL && ((const uint8_t *)nx_tensor_data(t))[i] > 1) {
            failf(f, "output %d (node %%%u): bool element %lld holds byte %u", k, v->n,
                  (long long)i, ((const uint8_t *)nx_tensor_data(t))[i]);
            return;
        }
        if (v->bound > 0 && kind(v->dt) == K_INT) {
            int64_t x = int_at(t, i);
            if (x < 0 || x >= v->bound) {
                failf(f, "output %d (node %%%u): index %lld at element %lld, outside [0, %lld)", k,
                      v->n, (long long)x, (long long)i, (long long)v->bound);
                return;
            }
        }
    }
}

static void check_pairs(fz *f, const val *outs, int nout, const pair *pairs, int npairs,
                        nx_tensor **o)
{
    /* pairs occupy the last 2 * npairs outputs */
    for (int q = 0; q < npairs && !f->bad; q++) {
        int k = nout - 2 * npairs + 2 * q;
        int64_t at = 0;
        if (!equal_values(o[k], o[k + 1], &at))
            failf(f, "identity %s fails: nodes %%%u and %%%u differ at element %lld", pairs[q].rel,
                  outs[k].n, outs[k + 1].n, (long long)at);
    }
}

/* ------------------------------------------------------------------------------------------------
 * The CPU backend against the interpreter
 * ----------------------------------------------------------------------------------------------*/

/* How closely the JIT must match the interpreter on a graph, run in reproducible mode (canonical
 * fold order), as the ir-values and backend tests hold it:
 *   CMP_EXACT   no transcendental function: +, -, *, /, sqrt-free arithmetic, min/max, casts,
 *               movement, folds in canonical order are correctly rounded in both: every value
 *               equal (NaN equals NaN);
 *   CMP_SMOOTH  transcendental functions (the inline math library is within about 1 ulp of libm,
 *               codegen/x86/math.h) and nothing that turns a last-bit difference into a different
 *               value: integers exact, floats within CPU_TOL_* of the output's largest magnitude;
 *   CMP_SKIP    transcendental functions feeding floor, comparisons, casts, selects, argmax,
 *               gathers...: a 1-ulp difference may legitimately flip a result; only run. */
enum { CMP_EXACT, CMP_SMOOTH, CMP_SKIP };
#define CPU_TOL_F32 0x1p-12 /* 2^11 ulps of the output's scale */
#define CPU_TOL_F64 0x1p-40

static int compare_class(const nx_graph *g)
{
    bool inexact = false, jumps = false;
    uint32_t n = nx_graph_num_nodes(g);
    for (uint32_t id = 1; id <= n; id++) {
        const nx_ir_node *nd = nx_ir_node_at(&g->s, id);
        switch (nd->op) {
        case NX_PRIM_EXP: case NX_PRIM_LOG: case NX_PRIM_LOG1P: case NX_PRIM_EXPM1:
        case NX_PRIM_SQRT: case NX_PRIM_RSQRT: case NX_PRIM_SIN: case NX_PRIM_COS:
        case NX_PRIM_TANH: case NX_PRIM_ERF: case NX_PRIM_POW: case NX_PRIM_ATAN2:
            inexact = true;
            break;
        case NX_PRIM_FLOOR: case NX_PRIM_CEIL: case NX_PRIM_ROUND: case NX_PRIM_SIGN:
        case NX_PRIM_ISNAN: case NX_PRIM_DIV: case NX_PRIM_MOD: case NX_PRIM_EQ: case NX_PRIM_NE:
        case NX_PRIM_LT: case NX_PRIM_LE: case NX_PRIM_GT: case NX_PRIM_GE: case NX_PRIM_SELECT:
        case NX_PRIM_CAST: case NX_PRIM_GATHER: case NX_PRIM_SCATTER: case NX_PRIM_ARGSORT:
        case NX_PRIM_REDUCE_CUSTOM: case NX_PRIM_EXTERN:
            jumps = true;
            break;
        case NX_PRIM_REDUCE: {
            int64_t m = nx_ir_node_attrs(&g->s, nd)[0];
            inexact = inexact || m == NX_MONOID_LOGSUMEXP;
            jumps = jumps || m == NX_MONOID_ARGMAX || m == NX_MONOID_ARGMIN;
            break;
        }
        default:
            break;
        }
    }
    return !inexact ? CMP_EXACT : jumps ? CMP_SKIP : CMP_SMOOTH;
}

static bool close_values(const nx_tensor *got, const nx_tensor *want, int64_t *where)
{
    nx_dtype d = nx_tensor_dtype(want);
    if (d != NX_DTYPE_F32 && d != NX_DTYPE_F64)
        return equal_values(got, want, where);
    int64_t n = nx_tensor_numel(want);
    double scale = 1;
    for (int64_t i = 0; i < n; i++) {
        double w = d == NX_DTYPE_F32 ? ((const float *)nx_tensor_data(want))[i]
                                     : ((const double *)nx_tensor_data(want))[i];
        scale = isfinite(w) && fabs(w) > scale ? fabs(w) : scale;
    }
    double tol = (d == NX_DTYPE_F32 ? CPU_TOL_F32 : CPU_TOL_F64) * scale;
    for (int64_t i = 0; i < n; i++) {
        double x = d == NX_DTYPE_F32 ? ((const float *)nx_tensor_data(got))[i]
                                     : ((const double *)nx_tensor_data(got))[i];
        double y = d == NX_DTYPE_F32 ? ((const float *)nx_tensor_data(want))[i]
                                     : ((const double *)nx_tensor_data(want))[i];
        bool ok = x == y || (isnan(x) && isnan(y)) || (isfinite(y) && fabs(x - y) <= tol);
        if (!ok) {
            *where = i;
            return false;
        }
    }
    return true;
}

/* The outputs compiled for the CPU backend in reproducible mode, while the graph exists (the
 * run and comparison come later, in run_program). NULL when the comparison is off. */
static nx_program *cpu_compile(fz *f, const nx_node *nodes, int nout)
{
    if (f->sweep || !f->cpu)
        return NULL;
    nx_compile_opts opts = {.backend = NX_BACKEND_CPU, .n_outputs = nout, .outputs = nodes};
    nx_program *p = NULL;
    bool scoped = nx_ctx_reproducible_push(f->ctx, true) == NX_OK;
    nx_status st = nx_graph_compile(f->g, &opts, &p);
    if (scoped)
        nx_ctx_reproducible_pop(f->ctx);
    if (st != NX_OK)
        failf(f, "nx_graph_compile for cpu: %s: %s", nx_status_str(st), nx_ctx_last_error(f->ctx));
    return p;
}

/* Runs the CPU program on ins and compares with the interpreter's outputs want. */
static void cpu_check(fz *f, nx_program *p, const val *outs, int nout, nx_tensor **ins,
                      nx_tensor **want)
{
    nx_tensor *got[MAX_OUTS] = {NULL};
    nx_status st = nx_program_run(p, (const nx_tensor *const *)ins, got);
    if (st != NX_OK)
        failf(f, "nx_program_run on cpu: %s: %s", nx_status_str(st), nx_ctx_last_error(f->ctx));
    for (int k = 0; k < nout && st == NX_OK && !f->bad && f->cpu_cls != CMP_SKIP; k++) {
        int64_t at = 0;
        bool ok = f->cpu_cls == CMP_EXACT ? equal_values(got[k], want[k], &at)
                                          : close_values(got[k], want[k], &at);
        nx_dtype d = nx_tensor_dtype(want[k]);
        nx_ir_val x = ok ? (nx_ir_val){0} : nx_ir_get(nx_tensor_data(got[k]), d, at);
        nx_ir_val y = ok ? (nx_ir_val){0} : nx_ir_get(nx_tensor_data(want[k]), d, at);
        if (!ok)
            failf(f, "cpu backend, output %d (node %%%u, %s): element %lld is %.17g/%lld on "
                  "cpu, %.17g/%lld on the interpreter",
                  k, outs[k].n, f->cpu_cls == CMP_EXACT ? "exact" : "within tolerance",
                  (long long)at, x.f, (long long)x.i, y.f, (long long)y.i);
    }
    f->st->cpu_runs++;
    f->st->cpu_checked += f->cpu_cls != CMP_SKIP;
    for (int k = 0; k < nout; k++)
        nx_tensor_free(got[k]);
}

/* Runs on inputs A, then on other inputs B, then on A again: the third run must repeat the
 * first (a program keeps no state between runs). Outputs and identities are checked on A and B. */
static void run_program(fz *f, nx_program *p, const val *outs, int nout, const pair *pairs,
                        int npairs)
{
    nx_tensor *ins[2][MAX_INPUTS + 1] = {{NULL}}, *o[3][MAX_OUTS] = {{NULL}};
    void *bufs[2][MAX_INPUTS] = {{NULL}};
    nx_status st = NX_OK;
    for (int set = 0; set < 2; set++) {
        for (int i = 0; i < f->nin && !f->bad; i++) {
            st = make_input(f, &f->ins[i], &ins[set][i], &bufs[set][i]);
            if (st != NX_OK && !nomem(f, st))
                failf(f, "test: input %d: %s", i, nx_ctx_last_error(f->ctx));
        }
    }
    for (int pass = 0; pass < 3 && !f->bad; pass++) {
        st = nx_program_run(p, (const nx_tensor *const *)ins[pass == 1], o[pass]);
        f->st->runs++;
        if (st != NX_OK) {
            /* "on failure no output is left allocated": nothing to free (leaks are counted) */
            memset(o[pass], 0, sizeof o[pass]);
            if (!nomem(f, st))
                failf(f, "nx_program_run (pass %d): %s: %s", pass + 1, nx_status_str(st),
                      nx_ctx_last_error(f->ctx));
        }
    }
    for (int k = 0; k < nout && !f->bad; k++) {
        if (!o[0][k] || !o[1][k] || !o[2][k]) {
            failf(f, "nx_program_run returned NX_OK without output %d", k);
            break;
        }
        check_output(f, &outs[k], k, o[0][k]);
        check_output(f, &outs[k], k, o[1][k]);
        if (!f->bad && !same_values(o[0][k], o[2][k]))
            failf(f,
                  "output %d (node %%%u) differs between two runs on the same inputs (another "
                  "run in between)",
                  k, outs[k].n);
    }
    if (!f->bad && f->cpu_prog)
        cpu_check(f, f->cpu_prog, outs, nout, ins[0], o[0]);
    if (!f->bad)
        check_pairs(f, outs, nout, pairs, npairs, o[0]);
    if (!f->bad)
        check_pairs(f, outs, nout, pairs, npairs, o[1]);
    for (int pass = 0; pass < 3; pass++) {
        for (int k = 0; k < nout; k++)
            nx_tensor_free(o[pass][k]);
    }
    for (int set = 0; set < 2; set++) {
        for (int i = 0; i < f->nin; i++) {
            nx_tensor_free(ins[set][i]);
            free(bufs[set][i]);
        }
    }
}

/* Keeps the printed graph for a failure message, before the graph is freed early. */
static void save_text(fz *f)
{
    f->text[0] = '\0';
    FILE *m = fmemopen(f->text, sizeof f->text, "w");
    if (!m)
        return;
    nx_graph_print(f->g, NX_NONE, m);
    fclose(m);
    f->text[sizeof f->text - 1] = '\0';
}

/* Compiles the outputs, maybe frees the graph ("g may be freed afterwards"), runs. */
static void compile_and_run(fz *f, const val *outs, int nout, const pair *pairs, int npairs)
{
    nx_node nodes[MAX_OUTS];
    for (int i = 0; i < nout; i++)
        nodes[i] = outs[i].n;
    nx_compile_opts opts = {.backend = NX_BACKEND_REF, .n_outputs = nout, .outputs = nodes};
    nx_program *p = NULL;
    nx_status st = nx_graph_compile(f->g, &opts, &p);
    if (st != NX_OK) {
        if (!nomem(f, st))
            failf(f, "nx_graph_compile: %s: %s", nx_status_str(st), nx_ctx_last_error(f->ctx));
        return;
    }
    if (nx_program_num_inputs(p) != f->nin || nx_program_num_outputs(p) != nout ||
        nx_program_backend(p) != NX_BACKEND_REF)
        failf(f, "program reports %d inputs, %d outputs, backend %d; expected %d, %d, ref",
              nx_program_num_inputs(p), nx_program_num_outputs(p), (int)nx_program_backend(p),
              f->nin, nout);
    f->cpu_cls = compare_class(f->g);
    f->cpu_prog = cpu_compile(f, nodes, nout);
    /* the program must not depend on the graph afterwards: free it, or grow its arena */
    int nin = f->nin, fate = (int)below(f->r, 3);
    if (fate == 0) {
        if (!f->sweep)
            save_text(f);
        nx_graph_free(f->g);
        f->g = NULL;
    } else if (fate == 1) {
        const char *saved = f->op;
        for (int k = range(f->r, 5, 40); k > 0 && !f->bad; k--)
            ops[pick_op(f)].fn(f);
        f->op = saved;
    }
    f->nin = nin; /* inputs made after compiling are not the program's */
    if (!f->bad)
        run_program(f, p, outs, nout, pairs, npairs);
    nx_program_free(p);
    nx_program_free(f->cpu_prog);
    f->cpu_prog = NULL;
}

/* Appends the printed graph to the failure message, for reproduction. */
static void append_graph(fz *f)
{
    size_t used = strlen(f->msg);
    if (used + 32 >= f->len)
        return;
    FILE *m = fmemopen(f->msg + used, f->len - used, "w");
    if (!m)
        return;
    if (f->g) {
        fprintf(m, "\ngraph:\n");
        nx_graph_print(f->g, NX_NONE, m);
    } else {
        fprintf(m, "\ngraph (freed after compile, before the run):\n%s", f->text);
    }
    fclose(m);
    f->msg[f->len - 1] = '\0';
}

/* Random ops, then outputs: the last value, up to three others (repeats allowed) and identity
 * pairs. */
static void build_random(fz *f, int max_steps, val *outs, int *nout, pair *pairs, int *npairs)
{
    int steps = range(f->r, 1, max_steps);
    for (int s = 0; s < steps && !f->bad; s++) {
        int i = pick_op(f);
        f->st->op_count[i]++;
        ops[i].fn(f);
    }
    if (f->npool == 0 && !f->bad)
        op_leaf(f);
    if (f->bad)
        return;
    *nout = 1;
    *npairs = 0;
    outs[0] = f->pool[f->npool - 1];
    int extra = range(f->r, 0, 3);
    for (int i = 0; i < extra; i++)
        outs[(*nout)++] = f->pool[below(f->r, (uint32_t)f->npool)];
    int want = range(f->r, 0, MAX_PAIRS);
    for (int i = 0; i < want && *npairs < MAX_PAIRS - 1 && !f->bad; i++) {
        val v = f->pool[below(f->r, (uint32_t)f->npool)];
        int rel = (int)below(f->r, NREL);
        if (kind(v.dt) != K_HALF && identity(f, &v, rel, &pairs[*npairs]))
            *npairs += rel == 12 ? 2 : 1;
    }
    for (int q = 0; q < *npairs; q++) {
        outs[(*nout)++] = pairs[q].lhs;
        outs[(*nout)++] = pairs[q].rhs;
    }
}

int fz_compare_cpu = 0;

/* Decided from the graph's seed without drawing from it, so a graph is the same graph whether or
 * not it is compared. */
static bool compare_this(const fz_rng *r)
{
    uint64_t t = r->state;
    return fz_compare_cpu == 1 ||
           (fz_compare_cpu > 1 && splitmix(&t) % (uint64_t)fz_compare_cpu == 0);
}

static nx_status valid_graph(nx_ctx *ctx, fz_rng *r, fz_stats *st, char *msg, size_t len,
                             bool sweep)
{
    fz *f = calloc(1, sizeof *f);
    if (!f) {
        snprintf(msg, len, "test: out of memory");
        return NX_ERR_INTERNAL;
    }
    *f = (fz){.ctx = ctx, .r = r, .st = st, .msg = msg, .len = len, .sweep = sweep,
              .cpu = compare_this(r)};
    f->vs = (uint64_t)below(r, 1u << 16) * 0x10001u + (uint64_t)below(r, 1u << 16);
    msg[0] = '\0';
    nx_status gs = nx_graph_new(ctx, &f->g);
    if (gs != NX_OK) {
        snprintf(msg, len, "nx_graph_new: %s", nx_ctx_last_error(ctx));
        free(f);
        return sweep && gs == NX_ERR_NOMEM ? gs : NX_ERR_INTERNAL;
    }
    val outs[MAX_OUTS];
    pair pairs[MAX_PAIRS + 1];
    int nout = 0, npairs = 0;
    build_random(f, sweep ? 8 : 30, outs, &nout, pairs, &npairs);
    st->graphs++;
    st->nodes += nx_graph_num_nodes(f->g);
    f->op = "verify";
    if (!f->bad) {
        nx_status vs = nx_graph_verify(f->g);
        if (vs != NX_OK && !nomem(f, vs))
            failf(f, "nx_graph_verify rejected a built graph: %s: %s", nx_status_str(vs),
                  nx_ctx_last_error(ctx));
    }
    FILE *null = sweep ? NULL : fopen("/dev/null", "w");
    if (!f->bad && null) {
        if (nx_graph_print(f->g, NX_NONE, null) != NX_OK ||
            nx_graph_print(f->g, outs[0].n, null) != NX_OK)
            failf(f, "nx_graph_print failed: %s", nx_ctx_last_error(ctx));
    }
    if (null)
        fclose(null);
    f->op = "run";
    if (!f->bad)
        compile_and_run(f, outs, nout, pairs, npairs);
    if (f->bad && f->status != NX_ERR_NOMEM)
        append_graph(f);
    nx_graph_free(f->g);
    nx_status result = f->bad ? f->status : NX_OK;
    free(f);
    return result;
}

bool fz_valid_graph(nx_ctx *ctx, fz_rng *r, fz_stats *st, char *msg, size_t len)
{
    return valid_graph(ctx, r, st, msg, len, false) == NX_OK;
}

nx_status fz_valid_graph_sweep(nx_ctx *ctx, fz_rng *r, fz_stats *st, char *msg, size_t len)
{
    return valid_graph(ctx, r, st, msg, len, true);
}

/* ------------------------------------------------------------------------------------------------
 * Invalid mode
 * ----------------------------------------------------------------------------------------------*/

int fz_force_template = -1;
#define NBAD_MAX 128
static bool template_off[NBAD_MAX];

bool fz_disable_template(int t)
{
    if (t < 0 || t >= (int)(sizeof template_off / sizeof *template_off))
        return false;
    template_off[t] = true;
    return true;
}

typedef struct bad_ctx {
    nx_graph *g;
    nx_node x, y, xi, xb, v; /* f64 [a,b,c], f64 [a,b,c+1], i32 like x, bool like x, f64 [c] */
    int64_t sh[3];
    nx_node garbage;
} bad_ctx;

static nx_node bad_call(fz_rng *r, bad_ctx *b, int t, const char **what)
{
    nx_graph *g = b->g;
    /* one more than NX_MAX_DIMS entries: calls claiming 9 dims must not read past the array */
    int64_t z[NX_MAX_DIMS + 1] = {0}, one[NX_MAX_DIMS + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    int64_t sh[NX_MAX_DIMS], big[NX_MAX_DIMS];
    int ax[NX_MAX_DIMS] = {0, 1, 2};
    memcpy(sh, b->sh, sizeof b->sh);
    for (int i = 0; i < 3; i++)
        big[i] = b->sh[i] + 1;
    nx_monoid_def md = {0};
    switch (t) {
    case 0:
        *what = "exp of a garbage handle";
        return nx_exp(g, b->garbage);
    case 1:
        *what = "add with a garbage handle";
        return nx_add(g, b->x, b->garbage);
    case 2:
        *what = "add of non-broadcastable shapes";
        return nx_add(g, b->x, b->y);
    case 3:
        *what = "add of f64 and i32";
        return nx_add(g, b->x, b->xi);
    case 4:
        *what = "not of i32";
        return nx_not(g, b->xi);
    case 5:
        *what = "not of f64";
        return nx_not(g, b->x);
    case 6:
        *what = "and of f64";
        return nx_and(g, b->x, b->x);
    case 7:
        *what = "select with an f64 condition";
        return nx_select(g, b->x, b->x, b->x);
    case 8:
        *what = "select of f64 and i32";
        return nx_select(g, b->xb, b->x, b->xi);
    case 9:
        *what = "cast to an invalid dtype";
        return nx_cast(g, b->x, NX_DTYPE_COUNT);
    case 10:
        *what = "reshape to a different count";
        return nx_reshape(g, b->x, 3, big);
    case 11:
        *what = "reshape with two -1";
        sh[0] = sh[1] = -1;
        return nx_reshape(g, b->x, 3, sh);
    case 12:
        *what = "reshape with a negative extent";
        sh[0] = -2;
        return nx_reshape(g, b->x, 3, sh);
    case 13:
        *what = "reshape with NULL shape";
        return nx_reshape(g, b->x, 3, NULL);
    case 14:
        *what = "reshape to more than NX_MAX_DIMS dims";
        return nx_reshape(g, b->x, 9, one);
    case 15:
        *what = "permute with a repeated axis";
        ax[1] = 0;
        return nx_permute(g, b->x, ax);
    case 16:
        *what = "permute with an axis out of range";
        ax[2] = 3 + (int)below(r, 100);
        return nx_permute(g, b->x, ax);
    case 17:
        *what = "permute with NULL perm";
        return nx_permute(g, b->x, NULL);
    case 18:
        *what = "broadcast to an incompatible shape";
        return nx_broadcast(g, b->x, 3, big);
    case 19:
        *what = "broadcast to fewer dims";
        return nx_broadcast(g, b->x, 2, sh + 1);
    case 20:
        *what = "slice with start > stop";
        sh[0] = 1;
        return nx_slice(g, b->x, b->sh, sh, NULL);
    case 21:
        *what = "slice with stop past the extent";
        return nx_slice(g, b->x, z, big, NULL);
    case 22:
        *what = "slice with step 0";
        return nx_slice(g, b->x, z, b->sh, z);
    case 23:
        *what = "slice with a negative start";
        z[1] = -1;
        return nx_slice(g, b->x, z, b->sh, NULL);
    case 24:
        *what = "slice with NULL start";
        return nx_slice(g, b->x, NULL, b->sh, NULL);
    case 25:
        *what = "pad with a negative width";
        sh[0] = -1;
        return nx_pad(g, b->x, sh, z, NX_PAD_REFLECT, 0);
    case 26:
        *what = "pad with an invalid mode";
        return nx_pad(g, b->x, one, one, NX_PAD_MODE_COUNT, 0);
    case 27:
        *what = "pad with NULL widths";
        return nx_pad(g, b->x, NULL, one, NX_PAD_WRAP, 0);
    case 28:
        *what = "reverse with an axis out of range";
        ax[0] = 3;
        return nx_reverse(g, b->x, 1, ax);
    case 29:
        *what = "reverse with negative naxes";
        return nx_reverse(g, b->x, -1, ax);
    case 30:
        *what = "reverse with NULL axes";
        return nx_reverse(g, b->x, 2, NULL);
    case 31:
        *what = "concat of no operands";
        return nx_concat(g, 0, &b->x, 0);
    case 32: {
        *what = "concat of different dtypes";
        nx_node xs[2] = {b->x, b->xi};
        return nx_concat(g, 2, xs, 0);
    }
    case 33: {
        *what = "concat with a different non-axis extent";
        nx_node xs[2] = {b->x, b->y};
        return nx_concat(g, 2, xs, 0);
    }
    case 34: {
        *what = "concat along an axis out of range";
        nx_node xs[2] = {b->x, b->x};
        return nx_concat(g, 2, xs, 3);
    }
    case 35:
        *what = "concat with NULL operands";
        return nx_concat(g, 2, NULL, 0);
    case 36:
        *what = "window larger than the axis";
        return nx_window(g, b->x, big, NULL, NULL);
    case 37:
        *what = "window of extent 0";
        return nx_window(g, b->x, z, NULL, NULL);
    case 38:
        *what = "window with stride 0";
        return nx_window(g, b->x, one, z, NULL);
    case 39:
        *what = "window with dilation 0";
        return nx_window(g, b->x, one, NULL, z);
    case 40:
        *what = "window whose dilated span exceeds the axis";
        sh[0] = 2, sh[1] = sh[2] = 1;
        big[0] = b->sh[0], big[1] = big[2] = 1;
        return nx_window(g, b->x, sh, NULL, big);
    case 41:
        *what = "window with NULL window";
        return nx_window(g, b->x, NULL, NULL, NULL);
    case 42:
        *what = "gather with f64 indices";
        return nx_gather(g, b->x, b->x, 0);
    case 43:
        *what = "gather with bool indices";
        return nx_gather(g, b->x, b->xb, 0);
    case 44:
        *what = "gather along an axis out of range";
        return nx_gather(g, b->x, b->xi, 3);
    case 45:
        *what = "scatter with updates of the wrong shape";
        return nx_scatter(g, b->x, b->xi, b->x, 0, NX_MONOID_SUM);
    case 46:
        *what = "scatter under PROD";
        return nx_scatter(g, b->v, b->xi, b->x, 0, NX_MONOID_PROD);
    case 47:
        *what = "scatter under ARGMAX";
        return nx_scatter(g, b->v, b->xi, b->x, 0, NX_MONOID_ARGMAX);
    case 48:
        *what = "reduce along an axis out of range";
        ax[0] = 3;
        return nx_reduce(g, b->x, 1, ax, NX_MONOID_SUM, false);
    case 49:
        *what = "reduce with a repeated axis";
        ax[1] = 0;
        return nx_reduce(g, b->x, 2, ax, NX_MONOID_MAX, false);
    case 50:
        *what = "argmax over two axes";
        return nx_reduce(g, b->x, 2, ax, NX_MONOID_ARGMAX, false);
    case 51:
        *what = "argmin over no axis";
        return nx_reduce(g, b->x, 0, ax, NX_MONOID_ARGMIN, false);
    case 52:
        *what = "reduce with an invalid monoid";
        return nx_reduce(g, b->x, 1, ax, NX_MONOID_COUNT, false);
    case 53:
        *what = "reduce with NULL axes";
        return nx_reduce(g, b->x, 2, NULL, NX_MONOID_SUM, false);
    case 54:
        *what = "reduce with negative naxes";
        return nx_reduce(g, b->x, -1, ax, NX_MONOID_SUM, false);
    case 55:
        *what = "scan under ARGMAX";
        return nx_scan(g, b->x, 0, NX_MONOID_ARGMAX, false);
    case 56:
        *what = "scan along an axis out of range";
        return nx_scan(g, b->x, 3, NX_MONOID_SUM, false);
    case 57:
        *what = "scan_linear of non-broadcastable shapes";
        return nx_scan_linear(g, b->x, b->y, 0, false);
    case 58:
        *what = "scan_linear of f64 and i32";
        return nx_scan_linear(g, b->x, b->xi, 0, false);
    case 59:
        *what = "sort along an axis out of range";
        return nx_sort(g, b->x, 3, false);
    case 60:
        *what = "argsort along a negative axis";
        return nx_argsort(g, b->x, -4, false);
    case 61: {
        *what = "topk with k < 0";
        nx_node v = 1, i = 1;
        nx_topk(g, b->x, -1, 0, true, &v, &i);
        return v != NX_NONE ? v : i;
    }
    case 62: {
        *what = "topk with k > extent";
        nx_node v = 1, i = 1;
        nx_topk(g, b->x, b->sh[2] + 1, 2, true, &v, &i);
        return v != NX_NONE ? v : i;
    }
    case 63: {
        *what = "matmul with different inner extents";
        int64_t ws[3] = {b->sh[0], b->sh[2] + 1, 2};
        return nx_matmul(g, b->x, nx_input(g, "w", NX_DTYPE_F64, 3, ws));
    }
    case 64:
        *what = "matmul of f64 and i32";
        return nx_matmul(g, b->x, b->xi);
    case 65:
        *what = "einsum with NULL spec";
        return nx_einsum(g, NULL, b->x, b->x, NX_MONOID_SUM, nx_mul);
    case 66:
        *what = "einsum spec with one operand";
        return nx_einsum(g, "ijk->i", b->x, b->x, NX_MONOID_SUM, nx_mul);
    case 67:
        *what = "einsum with a rank mismatch";
        return nx_einsum(g, "ij,jk->ik", b->x, b->x, NX_MONOID_SUM, nx_mul);
    case 68:
        *what = "einsum with an unknown output letter";
        return nx_einsum(g, "ijk,ijk->z", b->x, b->x, NX_MONOID_SUM, nx_mul);
    case 69:
        *what = "einsum with a size clash";
        return nx_einsum(g, "ijk,ijk->i", b->x, b->y, NX_MONOID_SUM, nx_mul);
    case 70:
        *what = "einsum with an uppercase letter";
        return nx_einsum(g, "iJk,iJk->i", b->x, b->x, NX_MONOID_SUM, nx_mul);
    case 71:
        *what = "einsum with NULL times";
        return nx_einsum(g, "ijk,ijk->i", b->x, b->x, NX_MONOID_SUM, NULL);
    case 72:
        *what = "einsum under ARGMAX";
        return nx_einsum(g, "ijk,ijk->i", b->x, b->x, NX_MONOID_ARGMAX, nx_mul);
    case 73:
        *what = "einsum with a malformed spec";
        return nx_einsum(g, "ijk,,ijk->i", b->x, b->x, NX_MONOID_SUM, nx_mul);
    case 74:
        *what = "mean along an axis out of range";
        ax[0] = 5;
        return nx_mean(g, b->x, 1, ax, false);
    case 75:
        *what = "softmax along an axis out of range";
        return nx_softmax(g, b->x, 3);
    case 76:
        *what = "input with more than NX_MAX_DIMS dims";
        return nx_input(g, "bad", NX_DTYPE_F32, 9, one);
    case 77:
        *what = "input with a negative extent";
        sh[1] = -3;
        return nx_input(g, "bad", NX_DTYPE_F32, 3, sh);
    case 78:
        *what = "input with an invalid dtype";
        return nx_input(g, "bad", NX_DTYPE_COUNT, 3, sh);
    case 79:
        *what = "input with NULL shape";
        return nx_input(g, "bad", NX_DTYPE_F64, 2, NULL);
    case 80:
        *what = "iota along an axis out of range";
        return nx_iota(g, NX_DTYPE_I32, 3, sh, 3);
    case 81:
        *what = "constant with NULL data";
        return nx_constant(g, NX_DTYPE_F64, 3, sh, NULL);
    case 82:
        *what = "scalar of an invalid dtype";
        return nx_scalar(g, (nx_dtype)-1, 1.0);
    case 83:
        *what = "placeholder of an invalid dtype";
        return nx_placeholder(g, NX_DTYPE_COUNT);
    case 84:
        *what = "reduce_custom with a NULL monoid";
        return nx_reduce_custom(g, b->x, 1, ax, NULL, false);
    case 85:
        *what = "reduce_custom with 5 carry components";
        md.ncarry = 5;
        return nx_reduce_custom(g, b->x, 1, ax, &md, false);
    case 86:
        *what = "reduce_custom with 0 carry components";
        md.ncarry = 0;
        return nx_reduce_custom(g, b->x, 1, ax, &md, false);
    case 87:
        *what = "reduce_custom whose combine uses a graph input";
        md.ncarry = 1;
        md.x = nx_placeholder(g, NX_DTYPE_F64);
        md.a[0] = nx_placeholder(g, NX_DTYPE_F64);
        md.b[0] = nx_placeholder(g, NX_DTYPE_F64);
        md.identity[0] = nx_scalar(g, NX_DTYPE_F64, 0);
        md.combine[0] = nx_add(g, md.a[0], b->v);
        return nx_reduce_custom(g, b->x, 1, ax, &md, false);
    case 88:
        *what = "reshape with negative ndim";
        return nx_reshape(g, b->x, -1, sh);
    case 89:
        *what = "window with a negative stride";
        sh[0] = -1, sh[1] = sh[2] = 1;
        return nx_window(g, b->x, one, sh, NULL);
    case 90:
        *what = "gather with an out-of-range handle as indices";
        return nx_gather(g, b->x, b->garbage, 0);
    case 91:
        *what = "exp of NX_NONE on a graph with no error";
        return nx_exp(g, NX_NONE);
    case 92:
        *what = "exp of an f16 value";
        return nx_exp(g, nx_cast(g, b->x, NX_DTYPE_F16));
    case 93:
        *what = "reverse of a bf16 value";
        return nx_reverse(g, nx_cast(g, b->x, NX_DTYPE_BF16), 1, ax);
    case 94:
        *what = "add of two f16 values";
        {
            nx_node h = nx_cast(g, b->x, NX_DTYPE_F16);
            return nx_add(g, h, h);
        }
    case 95:
        *what = "reduce with an axis given twice (0 and -3)";
        ax[1] = -3;
        return nx_reduce(g, b->x, 2, ax, NX_MONOID_SUM, false);
    case 96:
        *what = "reduce_custom whose combine contains a reduction";
        md.ncarry = 1;
        md.x = nx_placeholder(g, NX_DTYPE_F64);
        md.a[0] = nx_placeholder(g, NX_DTYPE_F64);
        md.b[0] = nx_placeholder(g, NX_DTYPE_F64);
        md.identity[0] = nx_scalar(g, NX_DTYPE_F64, 0);
        md.combine[0] = nx_add(g, md.a[0], nx_reduce(g, b->v, 1, ax, NX_MONOID_SUM, false));
        return nx_reduce_custom(g, b->x, 1, ax, &md, false);
    case 97: {
        *what = "argmax over an empty axis";
        int64_t es[2] = {2, 0};
        return nx_reduce(g, nx_input(g, "e", NX_DTYPE_F64, 2, es), 1, ax + 1, NX_MONOID_ARGMAX,
                         false);
    }
    case 98:
        *what = "extern whose shape rule fails";
        return nx_extern(g, &bad_shape_def, 1, &b->x);
    case 99:
        *what = "extern with NULL def";
        return nx_extern(g, NULL, 1, &b->x);
    case 100: {
        *what = "extern with an f16 input";
        nx_node h = nx_cast(g, b->x, NX_DTYPE_F16);
        return nx_extern(g, &copy_def, 1, &h);
    }
    case 101:
        *what = "extern with NULL inputs";
        return nx_extern(g, &copy_def, 1, NULL);
    default: {
        *what = "reduce_custom with a placeholder of another dtype";
        md.ncarry = 1;
        md.x = nx_placeholder(g, NX_DTYPE_F32);
        md.a[0] = nx_placeholder(g, NX_DTYPE_F64);
        md.b[0] = nx_placeholder(g, NX_DTYPE_F64);
        md.identity[0] = nx_scalar(g, NX_DTYPE_F64, 0);
        md.lift[0] = nx_cast(g, md.x, NX_DTYPE_F64);
        md.combine[0] = nx_add(g, md.a[0], md.b[0]);
        return nx_reduce_custom(g, b->x, 1, ax, &md, false);
    }
    }
}
#define NBAD 103

static bool invalid_builder(nx_ctx *ctx, fz_rng *r, fz_stats *st, int t, char *msg, size_t len)
{
    msg[0] = '\0';
    bad_ctx b = {0};
    if (nx_graph_new(ctx, &b.g) != NX_OK) {
        snprintf(msg, len, "nx_graph_new: %s", nx_ctx_last_error(ctx));
        return false;
    }
    for (int i = 0; i < 3; i++)
        b.sh[i] = range(r, 2, 4);
    int64_t sy[3] = {b.sh[0], b.sh[1], b.sh[2] + 1};
    b.x = nx_input(b.g, "x", NX_DTYPE_F64, 3, b.sh);
    b.y = nx_input(b.g, "y", NX_DTYPE_F64, 3, sy);
    b.xi = nx_input(b.g, "xi", NX_DTYPE_I32, 3, b.sh);
    b.xb = nx_input(b.g, "xb", NX_DTYPE_BOOL, 3, b.sh);
    b.v = nx_input(b.g, "v", NX_DTYPE_F64, 1, b.sh + 2);
    uint32_t nn = nx_graph_num_nodes(b.g);
    static const nx_node garbage[] = {0xffffffffu, 0x7fffffffu, 0x80000000u};
    b.garbage = chance(r, 50) ? nn + 1 + below(r, 1000) : garbage[below(r, 3)];
    bool ok = nx_graph_status(b.g) == NX_OK && b.x && b.y && b.xi && b.xb && b.v;
    if (!ok)
        snprintf(msg, len, "setting up the valid part failed: %s", nx_graph_error(b.g));
    /* introspection of bad handles never fails hard */
    int64_t shape[NX_MAX_DIMS];
    if (ok &&
        (nx_node_dtype(b.g, NX_NONE) != NX_DTYPE_COUNT || nx_node_ndim(b.g, NX_NONE) != -1 ||
         nx_node_shape(b.g, NX_NONE, shape) || nx_node_dtype(b.g, b.garbage) != NX_DTYPE_COUNT ||
         nx_node_ndim(b.g, b.garbage) != -1 || nx_node_shape(b.g, b.garbage, shape))) {
        snprintf(msg, len, "introspection of handle 0 or %u did not give COUNT / -1 / false",
                 b.garbage);
        ok = false;
    }
    const char *what = "?";
    nx_node res = ok ? bad_call(r, &b, t, &what) : NX_NONE;
    st->invalid_calls++;
    char first[512] = "";
    nx_status gs = nx_graph_status(b.g);
    if (ok && res != NX_NONE) {
        snprintf(msg, len, "invalid call #%d (%s) was accepted: node %%%u", t, what, res);
        ok = false;
    } else if (ok && (gs == NX_OK || nx_graph_error(b.g) == NULL || !nx_graph_error(b.g)[0])) {
        snprintf(msg, len, "invalid call #%d (%s) returned NX_NONE but recorded no error", t, what);
        ok = false;
    }
    if (ok) {
        snprintf(first, sizeof first, "%s", nx_graph_error(b.g));
        /* a none operand passes through silently; the first error is kept */
        nx_node again = nx_add(b.g, nx_exp(b.g, NX_NONE), b.x);
        nx_node worse = nx_add(b.g, b.x, b.y);
        if (again != NX_NONE || worse != NX_NONE || nx_graph_status(b.g) != gs ||
            strcmp(first, nx_graph_error(b.g)) != 0) {
            snprintf(msg, len,
                     "after invalid call #%d (%s): later calls changed the first error "
                     "or returned a node",
                     t, what);
            ok = false;
        }
    }
    if (ok) {
        nx_compile_opts opts = {.backend = NX_BACKEND_REF, .n_outputs = 1, .outputs = &b.x};
        nx_program *p = NULL;
        nx_status cs = nx_graph_compile(b.g, &opts, &p);
        if (cs == NX_OK) {
            snprintf(msg, len, "after invalid call #%d (%s): compile succeeded", t, what);
            ok = false;
        }
        nx_program_free(p);
    }
    nx_graph_free(b.g);
    return ok;
}

/* ------------------------------------------------------------------------------------------------
 * Invalid compile and run calls: refused with a status, nothing leaked, the program still usable
 * ----------------------------------------------------------------------------------------------*/

#define NRUN 15

static const char *run_what[NRUN] = {
    "run with an input of the wrong dtype",
    "run with an input of the wrong shape",
    "run with an input of the wrong rank",
    "run with NULL inputs",
    "run with a NULL input tensor",
    "run with NULL outputs",
    "compile a garbage output handle",
    "compile with NULL options",
    "compile for an invalid backend",
    "compile with a NULL program pointer",
    "compile with NULL outputs",
    "compile with a negative output count",
    "compile the none handle as output",
    "compile a placeholder as output",
    "run an extern whose reference fails",
};

static nx_status bad_compile(nx_graph *g, nx_node x, nx_node y, int t, nx_program **p)
{
    nx_node garbage = nx_graph_num_nodes(g) + 7, none = NX_NONE;
    nx_compile_opts o = {.backend = NX_BACKEND_REF, .n_outputs = 1, .outputs = &y};
    (void)x;
    switch (t) {
    case 6:
        o.outputs = &garbage;
        return nx_graph_compile(g, &o, p);
    case 7:
        return nx_graph_compile(g, NULL, p);
    case 8:
        o.backend = NX_BACKEND_COUNT;
        return nx_graph_compile(g, &o, p);
    case 9:
        return nx_graph_compile(g, &o, NULL);
    case 10:
        o.outputs = NULL;
        return nx_graph_compile(g, &o, p);
    case 11:
        o.n_outputs = -1;
        return nx_graph_compile(g, &o, p);
    case 12:
        o.outputs = &none;
        return nx_graph_compile(g, &o, p);
    default: {
        nx_node ph = nx_exp(g, nx_placeholder(g, NX_DTYPE_F64));
        o.outputs = &ph;
        return nx_graph_compile(g, &o, p);
    }
    }
}

static nx_status bad_run_call(nx_ctx *ctx, nx_program *p, const int64_t *sh, int t,
                              const nx_tensor *good, nx_tensor **out)
{
    nx_tensor *bad = NULL;
    int64_t wrong[3] = {sh[0], sh[1], sh[2] + 1};
    nx_status st = NX_OK;
    if (t == 0)
        st = nx_tensor_new(ctx, NX_DTYPE_F32, 3, sh, &bad);
    else if (t == 1)
        st = nx_tensor_new(ctx, NX_DTYPE_F64, 3, wrong, &bad);
    else if (t == 2)
        st = nx_tensor_new(ctx, NX_DTYPE_F64, 2, sh, &bad);
    if (st != NX_OK)
        return NX_OK; /* cannot make the bad input: nothing tested, report as refused */
    const nx_tensor *ins[1] = {t <= 2 ? bad : t == 4 ? NULL : good};
    if (t == 3)
        st = nx_program_run(p, NULL, out);
    else if (t == 5)
        st = nx_program_run(p, ins, NULL);
    else
        st = nx_program_run(p, ins, out);
    nx_tensor_free(bad);
    return st == NX_OK ? NX_OK : NX_ERR_INVALID_ARG;
}

static bool invalid_run(nx_ctx *ctx, fz_rng *r, int t, char *msg, size_t len)
{
    nx_graph *g = NULL;
    if (nx_graph_new(ctx, &g) != NX_OK) {
        snprintf(msg, len, "nx_graph_new: %s", nx_ctx_last_error(ctx));
        return false;
    }
    int64_t sh[3] = {range(r, 1, 4), range(r, 1, 4), range(r, 1, 4)};
    nx_node x = nx_input(g, "x", NX_DTYPE_F64, 3, sh);
    int axis = 1;
    nx_node y = nx_reduce(g, nx_exp(g, x), 1, &axis, NX_MONOID_SUM, false);
    nx_compile_opts o = {.backend = NX_BACKEND_REF, .n_outputs = 1, .outputs = &y};
    nx_program *p = NULL, *q = NULL;
    nx_tensor *in = NULL, *out[2] = {NULL, NULL};
    bool ok = nx_graph_compile(g, &o, &p) == NX_OK &&
              nx_tensor_new(ctx, NX_DTYPE_F64, 3, sh, &in) == NX_OK;
    if (!ok)
        snprintf(msg, len, "%s: setting up a valid program failed: %s", run_what[t],
                 nx_ctx_last_error(ctx));
    if (ok && t == 14) {
        nx_node z = nx_exp(g, nx_extern(g, &bad_ref_def, 1, &x));
        nx_compile_opts oz = {.backend = NX_BACKEND_REF, .n_outputs = 1, .outputs = &z};
        const nx_tensor *zin[1] = {in};
        nx_status st = nx_graph_compile(g, &oz, &q);
        if (st != NX_OK) {
            snprintf(msg, len, "%s: compile failed: %s", run_what[t], nx_ctx_last_error(ctx));
            ok = false;
        } else if (nx_program_run(q, zin, out) == NX_OK) {
            snprintf(msg, len, "%s: returned NX_OK", run_what[t]);
            ok = false;
            nx_tensor_free(out[0]);
        }
        nx_program_free(q);
    } else if (ok && t >= 6) {
        nx_status st = bad_compile(g, x, y, t, &q);
        if (st == NX_OK || q != NULL) {
            snprintf(msg, len, "%s: returned %s with program %p", run_what[t], nx_status_str(st),
                     (void *)q);
            ok = false;
        }
        nx_program_free(q);
    } else if (ok) {
        if (bad_run_call(ctx, p, sh, t, in, out) == NX_OK) {
            snprintf(msg, len, "%s: returned NX_OK", run_what[t]);
            ok = false;
            nx_tensor_free(out[0]);
        }
    }
    out[0] = NULL;
    /* the program still runs after a refused call */
    const nx_tensor *ins[1] = {in};
    if (ok && nx_program_run(p, ins, out) != NX_OK) {
        snprintf(msg, len, "after %s: a valid run failed: %s", run_what[t], nx_ctx_last_error(ctx));
        ok = false;
    }
    nx_tensor_free(out[0]);
    nx_tensor_free(in);
    nx_program_free(p);
    nx_graph_free(g);
    return ok;
}

bool fz_invalid_call(nx_ctx *ctx, fz_rng *r, fz_stats *st, char *msg, size_t len)
{
    int n = NBAD + NRUN;
    int t = (int)below(r, (uint32_t)n);
    for (int k = 0; k < n && template_off[t]; k++)
        t = (t + 1) % n;
    if (fz_force_template >= 0)
        t = fz_force_template % n;
    msg[0] = '\0';
    if (t < NBAD)
        return invalid_builder(ctx, r, st, t, msg, len);
    st->invalid_calls++;
    return invalid_run(ctx, r, t - NBAD, msg, len);
}
