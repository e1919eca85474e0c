/* Reductions.
 *
 *   reduce         y[p] = (+)_{k ascending} x[p, k] under a built-in monoid:
 *                    sum 0 + x_0 + x_1 ...; prod; max/min (NaN wins, empty: -inf/+inf or the
 *                    dtype's limit); logsumexp m + log s with the online (m, s) carry;
 *                    argmax/argmin the first index of the winner, NaN counting as the winner
 *   reduce_custom  y[p] = finalize(combine(...combine(identity, lift(x_0))..., lift(x_{n-1})))
 *
 * The fold runs in ascending row-major order over the reduced axes (the canonical order), one
 * element at a time, and an f32 carry is rounded to f32 at every step: f32 sums accumulate in
 * f32 exactly as a sequential C loop over floats would. That is the reference every backend is
 * compared with; faster orders (pairwise, vectorised) differ within the tolerance tables. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "ir/adjoint.h"

/* ---- iteration plan shared by both reductions ----------------------------------------------*/

typedef struct plan {
    int nk, nr;
    int64_t kshape[NX_MAX_DIMS], kstride[NX_MAX_DIMS];
    int64_t rshape[NX_MAX_DIMS], rstride[NX_MAX_DIMS];
    int64_t nout, nred;
} plan;

static void make_plan(const nx_tensor *x, const int64_t *flags, plan *p)
{
    memset(p, 0, sizeof *p);
    for (int d = 0; d < x->ndim; d++) {
        if (flags[d]) {
            p->rshape[p->nr] = x->shape[d];
            p->rstride[p->nr++] = x->strides[d];
        } else {
            p->kshape[p->nk] = x->shape[d];
            p->kstride[p->nk++] = x->strides[d];
        }
    }
    p->nout = nx_ir_numel(p->nk, p->kshape);
    p->nred = nx_ir_numel(p->nr, p->rshape);
}

static int64_t dot(int n, const int64_t *idx, const int64_t *stride)
{
    int64_t off = 0;
    for (int d = 0; d < n; d++)
        off += idx[d] * stride[d];
    return off;
}

/* ---- shape rules ---------------------------------------------------------------------------*/

/* Output signature for reduced flags; checks the flag attributes. */
static nx_status reduced_sig(nx_ir_check *ck, const nx_ir_sig *x, const int64_t *flags,
                             int64_t keepdims, nx_ir_sig *out)
{
    if (keepdims != 0 && keepdims != 1)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "keepdims is %lld; expected 0 or 1",
                          (long long)keepdims);
    int k = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (flags[d] != 0 && flags[d] != 1)
            return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "axis flag %d is %lld; expected 0 or 1", d,
                              (long long)flags[d]);
        if (!flags[d])
            out->shape[k++] = x->shape[d];
        else if (keepdims)
            out->shape[k++] = 1;
    }
    out->ndim = k;
    out->dtype = x->dtype;
    return NX_OK;
}

nx_status nx_ir_monoid_dtype(nx_ir_check *ck, int64_t m, nx_dtype d)
{
    bool ok;
    const char *want;
    switch (m) {
    case NX_MONOID_LOGSUMEXP:
        ok = nx_ir_is_core_float(d);
        want = "f32 or f64";
        break;
    case NX_MONOID_SUM:
    case NX_MONOID_PROD:
        ok = nx_ir_is_core_float(d) || nx_ir_is_int(d);
        want = "f32, f64 or an integer dtype";
        break;
    default:
        ok = nx_ir_is_core_float(d) || nx_ir_is_int(d) || d == NX_DTYPE_BOOL;
        want = "f32, f64, an integer dtype or bool";
        break;
    }
    if (!ok)
        return nx_ir_fail(ck, NX_ERR_DTYPE, "x is %s; monoid %s expects %s", nx_dtype_name(d),
                          nx_ir_monoid_name(m), want);
    return NX_OK;
}

nx_status nx_ir_shape_reduce(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p,
                             nx_ir_sig *out)
{
    (void)s;
    const nx_ir_sig *x = &p->ins[0];
    if (p->nattrs != 2 + x->ndim)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "%d attributes; expected %d", p->nattrs,
                          2 + x->ndim);
    int64_t m = p->attrs[0];
    if (m < 0 || m >= NX_MONOID_COUNT)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG,
                          "monoid %lld is not a built-in monoid; expected NX_MONOID_SUM .. "
                          "NX_MONOID_ARGMIN (nx_reduce_custom for others)",
                          (long long)m);
    nx_status st = nx_ir_monoid_dtype(ck, m, x->dtype);
    if (st == NX_OK)
        st = reduced_sig(ck, x, p->attrs + 2, p->attrs[1], out);
    if (st != NX_OK || (m != NX_MONOID_ARGMAX && m != NX_MONOID_ARGMIN))
        return st;
    int naxes = 0, axis = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (p->attrs[2 + d]) {
            naxes++;
            axis = d;
        }
    }
    if (naxes != 1)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "%s takes exactly one axis; got %d",
                          nx_ir_monoid_name(m), naxes);
    if (x->shape[axis] == 0)
        return nx_ir_fail(ck, NX_ERR_SHAPE,
                          "%s over the empty axis %d has no answer; expected a nonempty axis",
                          nx_ir_monoid_name(m), axis);
    out->dtype = NX_DTYPE_I64;
    return NX_OK;
}

nx_node nx_reduce(nx_graph *g, nx_node x, int naxes, const int *axes, nx_monoid monoid,
                  bool keepdims)
{
    if (!g || !nx_ir_check_handles(g, "nx_reduce", 1, &x))
        return NX_NONE;
    int nd = g->s.nodes[x].ndim;
    int64_t attrs[2 + NX_MAX_DIMS] = {monoid, keepdims};
    if (!nx_ir_axes_flags(g, "nx_reduce", naxes, axes, nd, attrs + 2))
        return NX_NONE;
    return nx_ir_make(g, "nx_reduce", NX_PRIM_REDUCE, 1, &x, 2 + nd, attrs, 0, NULL);
}

/* ---- built-in monoids ----------------------------------------------------------------------*/

static nx_ir_val limit(nx_dtype d, bool lowest)
{
    static const int64_t lo[NX_DTYPE_COUNT] = {[NX_DTYPE_I8] = INT8_MIN,
                                               [NX_DTYPE_I16] = INT16_MIN,
                                               [NX_DTYPE_I32] = INT32_MIN,
                                               [NX_DTYPE_I64] = INT64_MIN};
    static const int64_t hi[NX_DTYPE_COUNT] = {
        [NX_DTYPE_I8] = INT8_MAX,   [NX_DTYPE_I16] = INT16_MAX, [NX_DTYPE_I32] = INT32_MAX,
        [NX_DTYPE_I64] = INT64_MAX, [NX_DTYPE_U8] = UINT8_MAX,  [NX_DTYPE_BOOL] = 1,
        [NX_DTYPE_U32] = UINT32_MAX, [NX_DTYPE_U64] = -1 /* 2^64 - 1's bits */};
    nx_ir_val v = {lowest ? -INFINITY : INFINITY, lowest ? lo[d] : hi[d]};
    return v;
}

nx_ir_carry nx_ir_monoid_init(int64_t m, nx_dtype d)
{
    nx_ir_carry c = {{0, 0}, 0, 0, false};
    if (m == NX_MONOID_PROD)
        c.v = nx_ir_from_double(1, d);
    else if (m == NX_MONOID_MAX || m == NX_MONOID_ARGMAX || m == NX_MONOID_LOGSUMEXP)
        c.v = limit(d, true);
    else if (m == NX_MONOID_MIN || m == NX_MONOID_ARGMIN)
        c.v = limit(d, false);
    return c;
}

/* One logsumexp step: a -inf element adds nothing; an element equal to m adds exp(0) = 1 (this
 * also keeps +inf + +inf away from inf - inf). */
static void lse_step(nx_ir_carry *c, double x, nx_dtype d)
{
    if (isnan(x)) {
        c->nan = true;
        return;
    }
    if (x == -INFINITY)
        return;
    if (x > c->v.f) {
        c->s = c->s * exp(c->v.f - x) + 1;
        c->v.f = x;
    } else if (x == c->v.f) {
        c->s += 1;
    } else {
        c->s += exp(x - c->v.f);
    }
    if (d == NX_DTYPE_F32)
        c->s = (float)c->s;
}

static bool beats(nx_ir_val x, nx_ir_val best, bool fl, bool want_max, nx_dtype d)
{
    if (fl)
        return want_max ? x.f > best.f : x.f < best.f;
    if (d == NX_DTYPE_U64) /* the bits read as unsigned */
        return want_max ? (uint64_t)x.i > (uint64_t)best.i : (uint64_t)x.i < (uint64_t)best.i;
    return want_max ? x.i > best.i : x.i < best.i;
}

void nx_ir_monoid_step(nx_ir_carry *c, int64_t m, nx_dtype d, nx_ir_val x, int64_t k)
{
    bool fl = nx_ir_is_float(d);
    switch (m) {
    case NX_MONOID_SUM: /* c = c + x */
        c->v = nx_ir_scalar_binary(NX_PRIM_ADD, d, d, c->v, x);
        break;
    case NX_MONOID_PROD: /* c = c * x */
        c->v = nx_ir_scalar_binary(NX_PRIM_MUL, d, d, c->v, x);
        break;
    case NX_MONOID_MAX: /* c = max(c, x), NaN sticks */
    case NX_MONOID_MIN:
        if (fl && isnan(x.f))
            c->nan = true;
        else if (beats(x, c->v, fl, m == NX_MONOID_MAX, d))
            c->v = x;
        break;
    case NX_MONOID_LOGSUMEXP:
        lse_step(c, x.f, d);
        break;
    default: /* argmax/argmin: strict improvement keeps the first winner; the first NaN wins */
        if (c->nan)
            break;
        if (k == 0 || (fl && isnan(x.f)) || beats(x, c->v, fl, m == NX_MONOID_ARGMAX, d)) {
            c->v = x;
            c->arg = k;
            c->nan = fl && isnan(x.f);
        }
        break;
    }
}

nx_ir_val nx_ir_monoid_finish(const nx_ir_carry *c, int64_t m, nx_dtype d)
{
    nx_ir_val r = c->v;
    if (m == NX_MONOID_ARGMAX || m == NX_MONOID_ARGMIN) {
        r.i = c->arg;
    } else if (c->nan) {
        r.f = NAN;
    } else if (m == NX_MONOID_LOGSUMEXP) {
        /* m = -inf: nothing but -inf was seen, s = 0, and the answer is -inf */
        r.f = isinf(c->v.f) ? c->v.f : c->v.f + log(c->s);
        r = nx_ir_fix(r, d);
    }
    return r;
}

nx_status nx_ir_ref_reduce(const nx_ir_eval *ev, const nx_ir_node *n, const nx_tensor *const *ins,
                           nx_tensor *out)
{
    const int64_t *a = nx_ir_node_attrs(ev->s, n);
    const nx_tensor *x = ins[0];
    int64_t m = a[0];
    nx_dtype d = x->dtype;
    plan pl;
    make_plan(x, a + 2, &pl);
    const void *xd = nx_tensor_data(x);
    void *yd = nx_tensor_data(out);
    int64_t kidx[NX_MAX_DIMS] = {0};
    for (int64_t o = 0; o < pl.nout; o++) {
        int64_t base = dot(pl.nk, kidx, pl.kstride);
        int64_t ridx[NX_MAX_DIMS] = {0};
        nx_ir_carry c = nx_ir_monoid_init(m, d);
        for (int64_t k = 0; k < pl.nred; k++) {
            nx_ir_monoid_step(&c, m, d, nx_ir_get(xd, d, base + dot(pl.nr, ridx, pl.rstride)), k);
            nx_ir_next(pl.nr, pl.rshape, ridx);
        }
        nx_ir_put(yd, out->dtype, o, nx_ir_monoid_finish(&c, m, d));
        nx_ir_next(pl.nk, pl.kshape, kidx);
    }
    return NX_OK;
}

void nx_ir_attrs_reduce(FILE *f, const nx_ir_store *s, const nx_ir_node *n)
{
    const int64_t *a = nx_ir_node_attrs(s, n);
    int nd = (int)n->nattrs - 2;
    fputc('[', f);
    nx_ir_print_flags(f, "axes", nd, a + 2);
    fprintf(f, ", monoid=%s, keepdims=%lld]", nx_ir_monoid_name(a[0]), (long long)a[1]);
}

/* ---- custom monoids ------------------------------------------------------------------------*/

#define EXPR_MAX 256 /* nodes in one expression's closure: plenty for a carry of 4 scalars */
/* The union of a phase's closures (lift[0..c), say) is at most c of them. */
#define PHASE_MAX (EXPR_MAX * NX_MONOID_MAX_CARRY)

static bool expr_op_ok(nx_prim op)
{
    return op == NX_PRIM_CONSTANT || op == NX_PRIM_PLACEHOLDER || nx_ir_prim_elementwise(op);
}

/* Collects root's closure (ascending ids) into list; checks every node is a scalar expression
 * node and every placeholder is one of allowed[]. */
static nx_status closure(nx_ir_check *ck, const nx_ir_store *s, nx_node root, const char *what,
                         const nx_node *allowed, int nallowed, nx_node *list, int *len)
{
    int n = 0;
    list[n++] = root;
    for (int i = 0; i < n; i++) {
        const nx_ir_node *nd = &s->nodes[list[i]];
        if (!expr_op_ok((nx_prim)nd->op) || nd->ndim != 0)
            return nx_ir_fail(ck, NX_ERR_INVALID_ARG,
                              "%s uses %%%u (%s, %d-d); expected 0-d constants, placeholders, "
                              "elementwise ops, select and cast only",
                              what, (unsigned)list[i], nx_ir_prim_name(nd->op), nd->ndim);
        if (nd->op == NX_PRIM_PLACEHOLDER) {
            bool ok = false;
            for (int k = 0; k < nallowed; k++)
                ok |= allowed[k] == list[i];
            if (!ok)
                return nx_ir_fail(ck, NX_ERR_INVALID_ARG,
                                  "%s uses placeholder %%%u, which is not one of its own "
                                  "placeholders",
                                  what, (unsigned)list[i]);
        }
        const nx_node *ops = nx_ir_node_ops(s, nd);
        for (uint32_t k = 0; k < nd->nops; k++) {
            bool seen = false;
            for (int j = 0; j < n && !seen; j++)
                seen = list[j] == ops[k];
            if (seen)
                continue;
            if (n == EXPR_MAX)
                return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "%s has more than %d nodes", what,
                                  EXPR_MAX);
            list[n++] = ops[k];
        }
    }
    *len = n;
    return NX_OK;
}

static nx_status check_placeholders(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p,
                                    int nc)
{
    for (int k = NX_RC_PX; k < NX_RC_LIFT(nc, 0); k++) {
        if (s->nodes[p->ops[k]].op != NX_PRIM_PLACEHOLDER)
            return nx_ir_fail(ck, NX_ERR_INVALID_ARG,
                              "monoid.%s is %%%u, a %s; expected a placeholder (nx_placeholder)",
                              k == NX_RC_PX        ? "x"
                              : k < NX_RC_B(nc, 0) ? "a[i]"
                                                   : "b[i]",
                              (unsigned)p->ops[k], nx_ir_prim_name(s->nodes[p->ops[k]].op));
        for (int j = NX_RC_PX; j < k; j++) {
            if (p->ops[j] == p->ops[k])
                return nx_ir_fail(ck, NX_ERR_INVALID_ARG,
                                  "placeholder %%%u is used twice among x, a[] and b[]; expected "
                                  "distinct placeholders",
                                  (unsigned)p->ops[k]);
        }
    }
    return NX_OK;
}

static nx_status check_dtypes(nx_ir_check *ck, const nx_ir_proto *p, int nc)
{
    if (p->ins[NX_RC_PX].dtype != p->ins[0].dtype)
        return nx_ir_fail(ck, NX_ERR_DTYPE, "monoid.x is %s but x is %s; expected equal dtypes",
                          nx_dtype_name(p->ins[NX_RC_PX].dtype), nx_dtype_name(p->ins[0].dtype));
    for (int i = 0; i < nc; i++) {
        nx_dtype d = p->ins[NX_RC_A(nc, i)].dtype;
        int slots[4] = {NX_RC_B(nc, i), NX_RC_LIFT(nc, i), NX_RC_COMBINE(nc, i),
                        NX_RC_IDENTITY(nc, i)};
        static const char *const names[4] = {"b", "lift", "combine", "identity"};
        for (int k = 0; k < 4; k++) {
            if (p->ins[slots[k]].dtype != d)
                return nx_ir_fail(ck, NX_ERR_DTYPE,
                                  "monoid.%s[%d] is %s but a[%d] is %s; expected every part of "
                                  "carry component %d to share a dtype",
                                  names[k], i, nx_dtype_name(p->ins[slots[k]].dtype), i,
                                  nx_dtype_name(d), i);
        }
    }
    return NX_OK;
}

static nx_status check_exprs(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p, int nc)
{
    nx_node list[EXPR_MAX];
    int len;
    nx_node px = p->ops[NX_RC_PX];
    const nx_node *ab = p->ops + NX_RC_A(nc, 0);
    nx_status st = NX_OK;
    for (int i = 0; i < nc && st == NX_OK; i++) {
        st = closure(ck, s, p->ops[NX_RC_LIFT(nc, i)], "monoid.lift", &px, 1, list, &len);
        if (st == NX_OK)
            st = closure(ck, s, p->ops[NX_RC_COMBINE(nc, i)], "monoid.combine", ab, 2 * nc, list,
                         &len);
        if (st == NX_OK)
            st = closure(ck, s, p->ops[NX_RC_IDENTITY(nc, i)], "monoid.identity", NULL, 0, list,
                         &len);
    }
    if (st == NX_OK)
        st = closure(ck, s, p->ops[NX_RC_FINALIZE(nc)], "monoid.finalize", ab, nc, list, &len);
    return st;
}

nx_status nx_ir_shape_reduce_custom(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p,
                                    nx_ir_sig *out)
{
    const nx_ir_sig *x = &p->ins[0];
    if (p->nattrs < 1 || p->attrs[0] < 1 || p->attrs[0] > NX_MONOID_MAX_CARRY)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "ncarry is %lld; expected 1 to %d",
                          p->nattrs ? (long long)p->attrs[0] : -1LL, NX_MONOID_MAX_CARRY);
    int nc = (int)p->attrs[0];
    if (p->nattrs != 2 + x->ndim || p->nops != NX_RC_NOPS(nc))
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG,
                          "%d operands and %d attributes; expected %d and %d", p->nops, p->nattrs,
                          NX_RC_NOPS(nc), 2 + x->ndim);
    if (!nx_ir_is_core_float(x->dtype) && !nx_ir_is_int(x->dtype) && x->dtype != NX_DTYPE_BOOL)
        return nx_ir_fail(ck, NX_ERR_DTYPE, "x is %s; expected f32, f64, an integer or bool",
                          nx_dtype_name(x->dtype));
    nx_status st = check_placeholders(ck, s, p, nc);
    if (st == NX_OK)
        st = check_dtypes(ck, p, nc);
    if (st == NX_OK)
        st = check_exprs(ck, s, p, nc);
    if (st == NX_OK)
        st = reduced_sig(ck, x, p->attrs + 2, p->attrs[1], out);
    out->dtype = p->ins[NX_RC_FINALIZE(nc)].dtype;
    return st;
}

static nx_status missing(nx_graph *g, const char *field, int i)
{
    if (g->status == NX_OK)
        nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                          "nx_reduce_custom: monoid.%s[%d] is NX_NONE; expected a node", field, i);
    return NX_ERR_INVALID_ARG;
}

/* Fills the operand list; NX_NONE lift (one component) means the element itself, NX_NONE finalize
 * means a[0]. */
static nx_status gather_ops(nx_graph *g, nx_node x, const nx_monoid_def *m, nx_node *ops)
{
    int nc = m->ncarry;
    ops[0] = x;
    ops[NX_RC_PX] = m->x;
    if (!m->x)
        return missing(g, "x", 0);
    for (int i = 0; i < nc; i++) {
        ops[NX_RC_A(nc, i)] = m->a[i];
        ops[NX_RC_B(nc, i)] = m->b[i];
        ops[NX_RC_LIFT(nc, i)] = m->lift[i] ? m->lift[i] : nc == 1 ? m->x : NX_NONE;
        ops[NX_RC_COMBINE(nc, i)] = m->combine[i];
        ops[NX_RC_IDENTITY(nc, i)] = m->identity[i];
        if (!m->a[i])
            return missing(g, "a", i);
        if (!m->b[i])
            return missing(g, "b", i);
        if (!ops[NX_RC_LIFT(nc, i)])
            return missing(g, "lift", i);
        if (!m->combine[i])
            return missing(g, "combine", i);
        if (!m->identity[i])
            return missing(g, "identity", i);
    }
    ops[NX_RC_FINALIZE(nc)] = m->finalize ? m->finalize : m->a[0];
    return NX_OK;
}

nx_node nx_reduce_custom(nx_graph *g, nx_node x, int naxes, const int *axes,
                         const nx_monoid_def *monoid, bool keepdims)
{
    const char *fn = "nx_reduce_custom";
    if (!g || !nx_ir_check_handles(g, fn, 1, &x))
        return NX_NONE;
    if (!monoid || monoid->ncarry < 1 || monoid->ncarry > NX_MONOID_MAX_CARRY)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                 "nx_reduce_custom: monoid is NULL or its ncarry is out of range; "
                                 "expected 1 to %d carry components",
                                 NX_MONOID_MAX_CARRY);
    nx_node ops[NX_RC_NOPS(NX_MONOID_MAX_CARRY)];
    if (gather_ops(g, x, monoid, ops) != NX_OK)
        return NX_NONE;
    int nc = monoid->ncarry, nd = g->s.nodes[x].ndim;
    int64_t attrs[2 + NX_MAX_DIMS] = {nc, keepdims};
    if (!nx_ir_axes_flags(g, fn, naxes, axes, nd, attrs + 2))
        return NX_NONE;
    return nx_ir_make(g, fn, NX_PRIM_REDUCE_CUSTOM, NX_RC_NOPS(nc), ops, 2 + nd, attrs, 0, NULL);
}

/* ---- scalar evaluation of the expressions --------------------------------------------------*/

typedef struct sprog {
    nx_node list[4][PHASE_MAX]; /* lift, combine, identity, finalize closures, ascending ids */
    int len[4];
    nx_ir_val *vals; /* by node id */
} sprog;

static int cmp_node(const void *a, const void *b)
{
    nx_node x = *(const nx_node *)a, y = *(const nx_node *)b;
    return (x > y) - (x < y);
}

/* The union closure of roots, sorted (ids are topological, so ascending is evaluation order). */
static void collect(const nx_ir_store *s, const nx_node *roots, int nroots, nx_node *list, int *len)
{
    int n = 0;
    for (int r = 0; r < nroots; r++) {
        bool seen = false;
        for (int j = 0; j < n && !seen; j++)
            seen = list[j] == roots[r];
        if (!seen && n < PHASE_MAX)
            list[n++] = roots[r];
    }
    for (int i = 0; i < n; i++) {
        const nx_ir_node *nd = &s->nodes[list[i]];
        const nx_node *ops = nx_ir_node_ops(s, nd);
        for (uint32_t k = 0; k < nd->nops; k++) {
            bool seen = false;
            for (int j = 0; j < n && !seen; j++)
                seen = list[j] == ops[k];
            if (!seen && n < PHASE_MAX)
                list[n++] = ops[k];
        }
    }
    qsort(list, (size_t)n, sizeof *list, cmp_node);
    *len = n;
}

static void run_list(const nx_ir_store *s, const nx_node *list, int len, nx_ir_val *vals)
{
    for (int i = 0; i < len; i++) {
        nx_node id = list[i];
        const nx_ir_node *n = &s->nodes[id];
        const nx_node *ops = nx_ir_node_ops(s, n);
        nx_dtype d = (nx_dtype)n->dtype;
        if (n->op == NX_PRIM_CONSTANT)
            vals[id] = nx_ir_get(nx_ir_node_blob(s, n), d, 0);
        else if (n->op == NX_PRIM_SELECT)
            vals[id] = vals[ops[0]].i ? vals[ops[1]] : vals[ops[2]];
        else if (n->op == NX_PRIM_CAST)
            vals[id] = nx_ir_convert(vals[ops[0]], (nx_dtype)s->nodes[ops[0]].dtype, d);
        else if (n->nops == 1)
            vals[id] = nx_ir_scalar_unary((nx_prim)n->op, (nx_dtype)s->nodes[ops[0]].dtype, d,
                                          vals[ops[0]]);
        else if (n->nops == 2)
            vals[id] = nx_ir_scalar_binary((nx_prim)n->op, (nx_dtype)s->nodes[ops[0]].dtype, d,
                                           vals[ops[0]], vals[ops[1]]);
        /* placeholders hold what the fold bound to them */
    }
}

static void fold_one(const nx_ir_store *s, const sprog *sp, const nx_node *ops, int nc,
                     const nx_tensor *x, int64_t off, nx_ir_val *c)
{
    nx_ir_val lifted[NX_MONOID_MAX_CARRY];
    sp->vals[ops[NX_RC_PX]] = nx_ir_get(nx_tensor_data(x), x->dtype, off);
    run_list(s, sp->list[0], sp->len[0], sp->vals);
    for (int i = 0; i < nc; i++)
        lifted[i] = sp->vals[ops[NX_RC_LIFT(nc, i)]];
    for (int i = 0; i < nc; i++) {
        sp->vals[ops[NX_RC_A(nc, i)]] = c[i];
        sp->vals[ops[NX_RC_B(nc, i)]] = lifted[i];
    }
    run_list(s, sp->list[1], sp->len[1], sp->vals);
    for (int i = 0; i < nc; i++)
        c[i] = sp->vals[ops[NX_RC_COMBINE(nc, i)]];
}

static void prepare(const nx_ir_store *s, const nx_node *ops, int nc, sprog *sp)
{
    nx_node roots[NX_MONOID_MAX_CARRY] = {0};
    for (int i = 0; i < nc; i++)
        roots[i] = ops[NX_RC_LIFT(nc, i)];
    collect(s, roots, nc, sp->list[0], &sp->len[0]);
    for (int i = 0; i < nc; i++)
        roots[i] = ops[NX_RC_COMBINE(nc, i)];
    collect(s, roots, nc, sp->list[1], &sp->len[1]);
    for (int i = 0; i < nc; i++)
        roots[i] = ops[NX_RC_IDENTITY(nc, i)];
    collect(s, roots, nc, sp->list[2], &sp->len[2]);
    collect(s, &ops[NX_RC_FINALIZE(nc)], 1, sp->list[3], &sp->len[3]);
}

nx_status nx_ir_ref_reduce_custom(const nx_ir_eval *ev, const nx_ir_node *n,
                                  const nx_tensor *const *ins, nx_tensor *out)
{
    const nx_ir_store *s = ev->s;
    const int64_t *a = nx_ir_node_attrs(s, n);
    const nx_node *ops = nx_ir_node_ops(s, n);
    int nc = (int)a[0];
    sprog *sp = nx_rt_calloc(ev->ctx, 1, sizeof *sp);
    size_t vbytes = ((size_t)s->n + 1) * sizeof(nx_ir_val);
    nx_ir_val *vals = nx_rt_calloc(ev->ctx, 1, vbytes);
    if (!sp || !vals) {
        nx_rt_free(ev->ctx, sp, sizeof *sp);
        nx_rt_free(ev->ctx, vals, vbytes);
        return nx_rt_nomem(ev->ctx, "interpreter: reduce_custom", vbytes);
    }
    sp->vals = vals;
    prepare(s, ops, nc, sp);
    run_list(s, sp->list[2], sp->len[2], vals);
    nx_ir_val init[NX_MONOID_MAX_CARRY];
    for (int i = 0; i < nc; i++)
        init[i] = vals[ops[NX_RC_IDENTITY(nc, i)]];
    plan pl;
    make_plan(ins[0], a + 2, &pl);
    int64_t kidx[NX_MAX_DIMS] = {0};
    for (int64_t o = 0; o < pl.nout; o++) {
        int64_t base = dot(pl.nk, kidx, pl.kstride), ridx[NX_MAX_DIMS] = {0};
        nx_ir_val c[NX_MONOID_MAX_CARRY];
        memcpy(c, init, sizeof c);
        for (int64_t k = 0; k < pl.nred; k++) {
            fold_one(s, sp, ops, nc, ins[0], base + dot(pl.nr, ridx, pl.rstride), c);
            nx_ir_next(pl.nr, pl.rshape, ridx);
        }
        for (int i = 0; i < nc; i++)
            vals[ops[NX_RC_A(nc, i)]] = c[i];
        run_list(s, sp->list[3], sp->len[3], vals);
        nx_ir_put(nx_tensor_data(out), out->dtype, o, vals[ops[NX_RC_FINALIZE(nc)]]);
        nx_ir_next(pl.nk, pl.kshape, kidx);
    }
    nx_rt_free(ev->ctx, sp, sizeof *sp);
    nx_rt_free(ev->ctx, vals, vbytes);
    return NX_OK;
}

void nx_ir_attrs_reduce_custom(FILE *f, const nx_ir_store *s, const nx_ir_node *n)
{
    const int64_t *a = nx_ir_node_attrs(s, n);
    fputc('[', f);
    nx_ir_print_flags(f, "axes", (int)n->nattrs - 2, a + 2);
    fprintf(f, ", ncarry=%lld, keepdims=%lld]", (long long)a[0], (long long)a[1]);
}

/* ---- adjoints ---------------------------------------------------------------------------*/

/* Adjoint rules of the reductions. Every rule is an elementwise expression in x, the result and
 * dy broadcast back over the reduced axes (or a reduction over the other axes when the chain rule
 * reaches a broadcast operand), so for a contraction C = (+)_k A[i,k,1] (x) B[1,k,j] the gradient
 * of A is reduce_j(f(A, B, C, dC)) over [i,k,j]: a reduction whose producer expression fuses into
 * its loop, never a materialised M*K*N array.
 *
 *   sum        dx = dy
 *   max, min   dx = dy at the first winner (the argmax/argmin of the fold, ascending C order over
 *              the reduced axes), 0 elsewhere: ties are not split
 *   logsumexp  dx = dy exp(x - y), with y = -inf (an all -inf fold) read as 0 so the weight is 0
 *   prod       dx = dy (product of the others), from exclusive prefix and suffix products (scans),
 *              never a division, so zeros are exact
 *   custom     a one-component monoid whose lift and finalize are the identity and whose combine is
 *              a + b, a * b, max(a, b) or min(a, b) with that monoid's identity takes the built-in
 *              rule; other custom monoids are NX_ERR_UNSUPPORTED */

/* x's shape with 1 on the reduced axes. */
static void kept_shape(nx_graph *g, nx_node x, const int64_t *flags, int64_t *ks)
{
    nx_node_shape(g, x, ks);
    for (int i = 0; i < nx_node_ndim(g, x); i++) {
        if (flags[i])
            ks[i] = 1;
    }
}

/* The C-order flat position within the reduced block, i64 with x's rank (1 on the kept axes). */
static nx_node block_position(nx_graph *g, nx_node x, const int64_t *flags)
{
    int nd = nx_node_ndim(g, x);
    int64_t xs[NX_MAX_DIMS], bs[NX_MAX_DIMS], stride = 1;
    nx_node_shape(g, x, xs);
    for (int i = 0; i < nd; i++)
        bs[i] = flags[i] ? xs[i] : 1;
    nx_node flat = NX_NONE;
    for (int d = nd - 1; d >= 0; d--) {
        if (!flags[d])
            continue;
        nx_node t = nx_ir_ad_iota(g, nd, bs, d);
        if (stride != 1)
            t = nx_mul(g, t, nx_scalar(g, NX_DTYPE_I64, (double)stride));
        flat = flat ? nx_add(g, t, flat) : t;
        stride *= xs[d];
    }
    return flat;
}

/* x with the reduced axes moved last (in order) and merged into one; *perm receives the order. */
static nx_node merge_reduced(nx_graph *g, nx_node x, const int64_t *flags, int *perm, int *nkeep)
{
    int nd = nx_node_ndim(g, x), k = 0;
    int64_t xs[NX_MAX_DIMS], ms[NX_MAX_DIMS], r = 1;
    nx_node_shape(g, x, xs);
    for (int i = 0; i < nd; i++) {
        if (!flags[i])
            ms[k] = xs[i], perm[k++] = i;
    }
    *nkeep = k;
    for (int i = 0; i < nd; i++) {
        if (flags[i])
            perm[k++] = i, r *= xs[i];
    }
    ms[*nkeep] = r;
    return nx_reshape(g, nx_permute(g, x, perm), *nkeep + 1, ms);
}

static nx_node first_winner(nx_graph *g, nx_node x, const int64_t *flags, bool is_max)
{
    int perm[NX_MAX_DIMS], nkeep;
    nx_node m = merge_reduced(g, x, flags, perm, &nkeep);
    int axis = nkeep;
    nx_node arg = nx_reduce(g, m, 1, &axis, is_max ? NX_MONOID_ARGMAX : NX_MONOID_ARGMIN, false);
    int64_t ks[NX_MAX_DIMS];
    kept_shape(g, x, flags, ks);
    arg = nx_reshape(g, arg, nx_node_ndim(g, x), ks);
    return nx_eq(g, block_position(g, x, flags), arg);
}

static nx_node exclusive_products(nx_graph *g, nx_node x, const int64_t *flags)
{
    int perm[NX_MAX_DIMS], inv[NX_MAX_DIMS], nkeep, nd = nx_node_ndim(g, x);
    nx_node m = merge_reduced(g, x, flags, perm, &nkeep);
    int axis = nkeep;
    nx_node pre = nx_ir_ad_shift(g, nx_scan(g, m, axis, NX_MONOID_PROD, false), axis, false, 1.0);
    nx_node suf = nx_ir_ad_shift(g, nx_scan(g, m, axis, NX_MONOID_PROD, true), axis, true, 1.0);
    nx_node e = nx_mul(g, pre, suf);
    int64_t xs[NX_MAX_DIMS], ps[NX_MAX_DIMS];
    nx_node_shape(g, x, xs);
    for (int i = 0; i < nd; i++)
        ps[i] = xs[perm[i]], inv[perm[i]] = i;
    return nx_permute(g, nx_reshape(g, e, nd, ps), inv);
}

nx_status nx_ir_ad_reduce(nx_graph *g, nx_node x, const int64_t *flags, int64_t monoid,
                          bool keepdims, nx_node out, nx_node dy, nx_node *dx)
{
    (void)keepdims;
    int nd = nx_node_ndim(g, x);
    int64_t xs[NX_MAX_DIMS], ks[NX_MAX_DIMS];
    nx_node_shape(g, x, xs);
    kept_shape(g, x, flags, ks);
    nx_node dyb = nx_broadcast(g, nx_reshape(g, dy, nd, ks), nd, xs);
    if (nx_ir_numel(nd, xs) == 0) {
        *dx = nx_ir_ad_zeros(g, x);
        return NX_OK;
    }
    bool any = false;
    for (int i = 0; i < nd; i++)
        any |= flags[i] != 0;
    if (!any) { /* every element folded alone: y = x under every monoid */
        *dx = dyb;
        return NX_OK;
    }
    switch (monoid) {
    case NX_MONOID_SUM:
        *dx = dyb;
        return NX_OK;
    case NX_MONOID_MAX:
    case NX_MONOID_MIN:
        *dx = nx_ir_ad_select0(g, first_winner(g, x, flags, monoid == NX_MONOID_MAX), dyb);
        return NX_OK;
    case NX_MONOID_LOGSUMEXP: {
        nx_node yk = nx_reshape(g, out, nd, ks);
        nx_node ninf = nx_ir_ad_scalar(g, out, -INFINITY);
        nx_node safe = nx_select(g, nx_eq(g, yk, ninf), nx_ir_ad_scalar(g, out, 0.0), yk);
        *dx = nx_mul(g, dyb, nx_exp(g, nx_sub(g, x, safe)));
        return NX_OK;
    }
    case NX_MONOID_PROD:
        *dx = nx_mul(g, dyb, exclusive_products(g, x, flags));
        return NX_OK;
    default:
        return nx_ir_ad_unsupported(g, "nx_graph_vjp: reduce under monoid %s has no adjoint",
                                    nx_ir_monoid_name(monoid));
    }
}

nx_status nx_ir_vjp_reduce(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    return nx_ir_ad_reduce(g, v.ops[0], v.a + 2, v.a[0], v.a[1] != 0, y, dy, dx);
}

/* The built-in monoid a one-component custom monoid is, or -1. */
static int64_t builtin_equivalent(const nx_graph *g, const nx_ir_ad_view *v)
{
    const nx_ir_store *s = &g->s;
    nx_node a = v->ops[NX_RC_A(1, 0)], b = v->ops[NX_RC_B(1, 0)];
    if (v->n.nops != NX_RC_NOPS(1) || v->ops[NX_RC_LIFT(1, 0)] != v->ops[NX_RC_PX] ||
        v->ops[NX_RC_FINALIZE(1)] != a)
        return -1;
    const nx_ir_node *c = nx_ir_node_at(s, v->ops[NX_RC_COMBINE(1, 0)]);
    const nx_node *cops = nx_ir_node_ops(s, c);
    if (c->nops != 2 || !((cops[0] == a && cops[1] == b) || (cops[0] == b && cops[1] == a)))
        return -1;
    int64_t m = c->op == NX_PRIM_ADD ? NX_MONOID_SUM
                : c->op == NX_PRIM_MUL ? NX_MONOID_PROD
                : c->op == NX_PRIM_MAX ? NX_MONOID_MAX
                : c->op == NX_PRIM_MIN ? NX_MONOID_MIN
                                       : -1;
    const nx_ir_node *id = nx_ir_node_at(s, v->ops[NX_RC_IDENTITY(1, 0)]);
    if (m < 0 || id->op != NX_PRIM_CONSTANT || !nx_ir_is_float((nx_dtype)id->dtype))
        return -1;
    double want = m == NX_MONOID_SUM    ? 0.0
                  : m == NX_MONOID_PROD ? 1.0
                  : m == NX_MONOID_MAX  ? -INFINITY
                                        : INFINITY;
    double got = nx_ir_to_double(nx_ir_get(nx_ir_node_blob(s, id), (nx_dtype)id->dtype, 0),
                                 (nx_dtype)id->dtype);
    return got == want ? m : -1;
}

nx_status nx_ir_vjp_reduce_custom(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    int64_t m = builtin_equivalent(g, &v);
    if (m < 0)
        return nx_ir_ad_unsupported(g,
                                    "nx_graph_vjp: reduce_custom (node %%%u) has no adjoint: its "
                                    "monoid is not a built-in one in disguise; expected one carry "
                                    "component, identity lift and finalize, and a combine of "
                                    "a + b, a * b, max(a, b) or min(a, b) with its identity",
                                    (unsigned)y);
    return nx_ir_ad_reduce(g, v.ops[0], v.a + 2, m, v.a[1] != 0, y, dy, dx);
}
