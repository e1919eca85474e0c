/* pairwise_reduce, KeOps-style pairwise reductions: out_i = reduce_j F(x_i, y_j, b_j, p). F is
 * built on x_i [M, 1, D] and y_j [1, N, D], so the [M, N, E] values exist only as a graph node
 * that the backends stream (the reference interpreter materialises it). The spec has no name for
 * it (it is the engine under semiring_matmul's KeOps heritage), so the table keeps this one. The
 * descriptor, its checks, the two graphs (forward, vjp) and the typed entry points. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cache.h"
#include "ops/op.h"
#include "semiring.h"

#define WHO "nx_pairwise_reduce"

typedef struct pw_call {
    const nx_tensor *x, *y, *b, *p;
    const nx_pairwise_opts *o;
    const nx_sr_expr *e;
    int32_t root;
    const nx_tensor *dout;  /* vjp: the result's cotangent; NULL for the forward program */
    const nx_tensor *saved; /* vjp under LOGSUMEXP: the forward result, or NULL */
} pw_call;

static nx_node shaped(nx_graph *g, nx_node x, int64_t a, int64_t b, int64_t c)
{
    int64_t s[3] = {a, b, c};
    return nx_reshape(g, x, 3, s);
}

/* How F's leaves are laid out. The forward pass gives F x_i [M, 1, D] and y_j [1, N, D] and lets
 * the elementwise ops broadcast. The gradient passes give it x, y and b already broadcast over
 * the pairs and each parameter broadcast to one value per pair, so that the cotangent of every
 * leaf is a per-pair expression that one reduction sums, rather than a reduction of its own: PAIRS
 * lays the pairs out [M, N, .] for the pass over j, PAIRS_T [N, M, .] for the pass over i. The two
 * layouts also keep the passes' expressions apart (hash-consing would merge equal ones), so the
 * fusion pass recomputes F inside each pass instead of storing values shared by both. */
typedef enum pw_layout { PW_FORWARD, PW_PAIRS, PW_PAIRS_T } pw_layout;

/* v [rows, cols] placed per pair: its row is the pair's j when by_j, else its i. */
static nx_node per_pair(nx_graph *g, nx_node v, int64_t rows, int64_t cols, int64_t m, int64_t n,
                        bool by_j, pw_layout lay)
{
    if (lay == PW_FORWARD)
        return by_j ? shaped(g, v, 1, n, cols) : shaped(g, v, m, 1, cols);
    bool outer = (lay == PW_PAIRS) != by_j; /* the row index is the layout's first axis */
    nx_node r = outer ? shaped(g, v, rows, 1, cols) : shaped(g, v, 1, rows, cols);
    int64_t full[3] = {lay == PW_PAIRS ? m : n, lay == PW_PAIRS ? n : m, cols};
    return nx_broadcast(g, r, 3, full);
}

static nx_node build_f(nx_graph *g, const pw_call *c, const nx_node *ins, pw_layout lay,
                       nx_node *leaves)
{
    int64_t m = nx_tensor_shape(c->x)[0], n = nx_tensor_shape(c->y)[0];
    int64_t d = nx_tensor_shape(c->x)[1];
    nx_node xi = per_pair(g, ins[0], m, d, m, n, false, lay);
    nx_node yj = per_pair(g, ins[1], n, d, m, n, true, lay), bj = NX_NONE;
    if (c->b) {
        int64_t e = nx_tensor_ndim(c->b) == 2 ? nx_tensor_shape(c->b)[1] : 1;
        bj = per_pair(g, ins[2], n, e, m, n, true, lay);
    }
    if (leaves)
        leaves[0] = xi, leaves[1] = yj, leaves[2] = bj;
    if (c->o->expr)
        return c->o->expr(g, xi, yj, bj, ins[3], c->o->user);
    nx_node vars[NX_SR_NVARS] = {0};
    vars[NX_SR_VPX] = xi;
    vars[NX_SR_VPY] = yj;
    vars[NX_SR_VPB] = bj;
    int64_t np = c->p ? nx_tensor_shape(c->p)[0] : 0;
    for (int64_t k = 0; k < np && k < 8; k++) {
        int64_t start = k, stop = k + 1;
        nx_node pk = shaped(g, nx_slice(g, ins[3], &start, &stop, NULL), 1, 1, 1);
        if (lay != PW_FORWARD)
            pk = nx_broadcast(g, pk, 3,
                              (int64_t[]){lay == PW_PAIRS ? m : n, lay == PW_PAIRS ? n : m, 1});
        if (leaves)
            leaves[3 + k] = pk;
        vars[NX_SR_VP0 + k] = pk;
    }
    return nx_sr_build(g, c->e, c->root, nx_tensor_dtype(c->x), vars);
}

static void make_inputs(nx_graph *g, const pw_call *c, nx_node *ins)
{
    nx_dtype dt = nx_tensor_dtype(c->x);
    ins[0] = nx_input(g, "x", dt, 2, nx_tensor_shape(c->x));
    ins[1] = nx_input(g, "y", dt, 2, nx_tensor_shape(c->y));
    ins[2] = c->b ? nx_input(g, "b", dt, nx_tensor_ndim(c->b), nx_tensor_shape(c->b)) : 0;
    ins[3] = c->p ? nx_input(g, "p", dt, 1, nx_tensor_shape(c->p)) : 0;
}

/* F checked and broadcast to the layout's [M, N, E] or [N, M, E]; *e gets E. NX_NONE with the
 * error recorded. */
static nx_node make_f(nx_graph *g, const pw_call *c, const nx_node *ins, pw_layout lay,
                      nx_node *leaves, int64_t *e)
{
    nx_dtype dt = nx_tensor_dtype(c->x);
    nx_node f = build_f(g, c, ins, lay, leaves);
    if (!f)
        return nx_graph_status(g) == NX_OK
                   ? nx_ir_graph_failf(g, NX_ERR_INVALID_ARG, WHO ": F built nothing")
                   : NX_NONE;
    int64_t m = nx_tensor_shape(c->x)[0], n = nx_tensor_shape(c->y)[0];
    if (lay == PW_PAIRS_T) {
        int64_t t = m;
        m = n, n = t;
    }
    int64_t fs[NX_MAX_DIMS];
    int fd = nx_node_ndim(g, f);
    nx_node_shape(g, f, fs);
    if (fd > 3 || nx_node_dtype(g, f) != dt)
        return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                 WHO ": F has %d dims and dtype %s; expected [M, N, E] of %s", fd,
                                 nx_dtype_name(nx_node_dtype(g, f)), nx_dtype_name(dt));
    *e = fd == 3 ? fs[2] : 1;
    return nx_broadcast(
        g, fd == 3 ? f : shaped(g, f, fd >= 2 ? fs[fd - 2] : 1, fd >= 1 ? fs[fd - 1] : 1, 1), 3,
        (int64_t[]){m, n, *e});
}

/* The forward program: the reduction of F over j. */
static nx_status build_forward(nx_graph *g, void *user, nx_node *outs, int *nouts)
{
    pw_call *c = user;
    nx_node ins[4];
    make_inputs(g, c, ins);
    int64_t e = 1;
    nx_node f = make_f(g, c, ins, PW_FORWARD, NULL, &e);
    if (!f)
        return nx_graph_status(g);
    int64_t m = nx_tensor_shape(c->x)[0], n = nx_tensor_shape(c->y)[0];
    nx_pairwise_reduction r = c->o->reduction;
    int axis = 1;
    *nouts = 1;
    if (r <= NX_PAIRWISE_LOGSUMEXP) {
        static const nx_monoid mon[] = {NX_MONOID_SUM, NX_MONOID_MAX, NX_MONOID_MIN,
                                        NX_MONOID_LOGSUMEXP};
        outs[0] = nx_reduce(g, f, 1, &axis, mon[r], false);
        return nx_graph_status(g);
    }
    if (e != 1)
        return nx_rt_error(nx_graph_ctx(g), NX_ERR_SHAPE,
                           WHO ": argmin, argmax and kmin need a scalar F, but F gives %lld "
                               "values per pair",
                           (long long)e);
    nx_node f2 = nx_reshape(g, f, 2, (int64_t[]){m, n});
    if (r == NX_PAIRWISE_KMIN) {
        nx_topk(g, f2, c->o->k, 1, false, &outs[0], &outs[1]);
        *nouts = 2;
    } else {
        outs[0] = nx_reduce(g, f2, 1, &axis,
                            r == NX_PAIRWISE_ARGMIN ? NX_MONOID_ARGMIN : NX_MONOID_ARGMAX, false);
    }
    return nx_graph_status(g);
}

/* ---- gradients: two streamed passes ---------------------------------------------------------
 *
 * With W[i, j] = dout_i d out_i / d F_ij, the cotangent of every input is a sum over pairs of W
 * times a derivative of F at the pair, so all of them come from two reductions, as KeOps
 * computes them: one over j for what belongs to i (x, and the parameters, summed over i at the
 * end) and one over i for what belongs to j (y and b). The per-pair derivatives come from
 * autodiff of F with respect to its per-pair leaves (PW_PAIRS and PW_PAIRS_T), so they are
 * elementwise expressions; each side concatenates its own along the last axis and folds them with
 * one reduction, which the fusion pass turns into one K-loop kernel that recomputes F, with
 * nothing M x N stored. W is:
 *   SUM        dout_i
 *   LOGSUMEXP  dout_i exp(F_ij - out_i)   (0 where out_i = -inf: no pair contributes)
 *   MAX, MIN   dout_i [j == argmax/argmin_j F_ij]   (the first winner, as the IR's max adjoint)
 * so LOGSUMEXP, MAX and MIN first need the forward result: one pass over j before the two.
 * F from a C builder sees the per-pair leaves too, but its p is the [P] input, whose cotangent
 * autodiff sums on its own (one more pass when p is given). */
static nx_node forward_stat(nx_graph *g, const pw_call *c, const nx_node *ins)
{
    nx_pairwise_reduction r = c->o->reduction;
    if (r == NX_PAIRWISE_SUM || nx_tensor_shape(c->y)[0] == 0)
        return NX_NONE; /* no weights needed, or no pairs to weigh */
    int64_t e = 1;
    nx_node f = make_f(g, c, ins, PW_FORWARD, NULL, &e);
    int axis = 1;
    nx_monoid mon = r == NX_PAIRWISE_LOGSUMEXP ? NX_MONOID_LOGSUMEXP
                    : r == NX_PAIRWISE_MAX     ? NX_MONOID_ARGMAX
                                               : NX_MONOID_ARGMIN;
    return f ? nx_reduce(g, f, 1, &axis, mon, false) : NX_NONE;
}

/* W in the layout of f; stat is forward_stat's [M, E]. */
static nx_node pair_weight(nx_graph *g, const pw_call *c, nx_node f, nx_node dout, nx_node stat,
                           pw_layout lay, int64_t e)
{
    int64_t m = nx_tensor_shape(c->x)[0], n = nx_tensor_shape(c->y)[0];
    bool t = lay == PW_PAIRS_T;
    int64_t full[3] = {t ? n : m, t ? m : n, e};
    nx_node d = nx_broadcast(g, t ? shaped(g, dout, 1, m, e) : shaped(g, dout, m, 1, e), 3, full);
    nx_pairwise_reduction r = c->o->reduction;
    if (!stat)
        return d;
    nx_dtype dt = nx_tensor_dtype(c->x);
    nx_node s = t ? shaped(g, stat, 1, m, e) : shaped(g, stat, m, 1, e);
    if (r == NX_PAIRWISE_LOGSUMEXP) {
        nx_node none = nx_eq(g, s, nx_scalar(g, dt, -INFINITY));
        nx_node w = nx_exp(g, nx_sub(g, f, s));
        return nx_mul(g, d, nx_select(g, none, nx_scalar(g, dt, 0.0), w));
    }
    nx_node j = nx_iota(g, NX_DTYPE_I64, 3, full, t ? 0 : 1);
    return nx_mul(g, d, nx_cast(g, nx_eq(g, j, s), dt));
}

/* One side: autodiff of F in layout lay with respect to its leaves, the cotangents wanted here
 * concatenated and summed over axis 1. which[k] picks leaf k (x, y, b, p0..p7); when p is the
 * builder's [P] input, *dp gets its cotangent. */
static nx_node side(nx_graph *g, const pw_call *c, const nx_node *ins, nx_node dout, nx_node stat,
                    pw_layout lay, const bool *which, nx_node *dp)
{
    nx_node leaves[3 + 8] = {0};
    int64_t e = 1;
    nx_node f = make_f(g, c, ins, lay, leaves, &e);
    if (!f)
        return NX_NONE;
    nx_node w = pair_weight(g, c, f, dout, stat, lay, e);
    nx_node wrt[3 + 8 + 1], grads[3 + 8 + 1] = {0};
    int nw = 0;
    for (int k = 0; k < 3 + 8; k++)
        if (which[k] && leaves[k])
            wrt[nw++] = leaves[k];
    int nparts = nw;
    if (dp)
        wrt[nw++] = ins[3];
    nx_status st = nx_graph_vjp(g, 1, &f, &w, nw, wrt, grads);
    if (st != NX_OK) {
        if (nx_graph_status(g) == NX_OK)
            nx_ir_graph_failf(g, st, "%s", nx_ctx_last_error(nx_graph_ctx(g)));
        return NX_NONE;
    }
    if (dp)
        *dp = grads[nparts];
    nx_node cat = nparts == 1 ? grads[0] : nx_concat(g, nparts, grads, 2);
    int axis = 1;
    return nx_reduce(g, cat, 1, &axis, NX_MONOID_SUM, false);
}

static nx_node columns(nx_graph *g, nx_node r, int64_t from, int64_t to)
{
    int64_t shape[NX_MAX_DIMS];
    nx_node_shape(g, r, shape);
    int64_t start[2] = {0, from}, stop[2] = {shape[0], to};
    return nx_slice(g, r, start, stop, NULL);
}

/* The vjp program: outputs dx, dy, then db and dp where given. */
static nx_status build_vjp(nx_graph *g, void *user, nx_node *outs, int *nouts)
{
    pw_call *c = user;
    nx_node ins[4];
    make_inputs(g, c, ins);
    nx_node dout = nx_input(g, "dout", nx_tensor_dtype(c->dout), nx_tensor_ndim(c->dout),
                            nx_tensor_shape(c->dout));
    int64_t m = nx_tensor_shape(c->x)[0], d = nx_tensor_shape(c->x)[1], e = 1;
    if (c->b && nx_tensor_ndim(c->b) == 2)
        e = nx_tensor_shape(c->b)[1];
    const int64_t *ds = nx_tensor_shape(c->dout);
    nx_node stat =
        c->saved ? nx_input(g, "saved_out", nx_tensor_dtype(c->saved), 2, nx_tensor_shape(c->saved))
                 : forward_stat(g, c, ins);
    if (nx_graph_status(g) != NX_OK)
        return nx_graph_status(g);
    int64_t eo = 1; /* the result's E: F's, which b need not fix (F may not read b) */
    int64_t os[NX_MAX_DIMS];
    if (stat && nx_node_shape(g, stat, os))
        eo = os[1];
    if (!stat) {
        nx_node f = make_f(g, c, ins, PW_FORWARD, NULL, &eo);
        if (!f)
            return nx_graph_status(g);
    }
    if (nx_tensor_ndim(c->dout) != 2 || ds[0] != m || ds[1] != eo)
        return nx_rt_error(nx_graph_ctx(g), NX_ERR_SHAPE,
                           WHO "_vjp: dout has %d dims; expected the result's shape [%lld, %lld]",
                           nx_tensor_ndim(c->dout), (long long)m, (long long)eo);
    int np = c->p ? (int)nx_tensor_shape(c->p)[0] : 0;
    bool expr = c->o->expr != NULL;
    bool xs[3 + 8] = {true}, ys[3 + 8] = {false, true, c->b != NULL};
    for (int k = 0; !expr && k < np; k++)
        xs[3 + k] = true;
    nx_node dp = NX_NONE;
    nx_node rx = side(g, c, ins, dout, stat, PW_PAIRS, xs, expr && c->p ? &dp : NULL);
    nx_node ry = side(g, c, ins, dout, stat, PW_PAIRS_T, ys, NULL);
    if (!rx || !ry)
        return nx_graph_status(g);
    int k = 0;
    outs[k++] = columns(g, rx, 0, d);
    outs[k++] = columns(g, ry, 0, d);
    if (c->b)
        outs[k++] =
            nx_reshape(g, columns(g, ry, d, d + e), nx_tensor_ndim(c->b), nx_tensor_shape(c->b));
    if (c->p && expr) {
        outs[k++] = dp;
    } else if (c->p) {
        int axis = 0;
        outs[k++] = nx_reduce(g, columns(g, rx, d, d + np), 1, &axis, NX_MONOID_SUM, false);
    }
    *nouts = k;
    return nx_graph_status(g);
}

static nx_status build_pairwise(nx_graph *g, void *user, nx_node *outs, int *nouts)
{
    pw_call *c = user;
    return c->dout ? build_vjp(g, user, outs, nouts) : build_forward(g, user, outs, nouts);
}

static nx_status check_points(nx_ctx *ctx, const nx_tensor *x, const nx_tensor *y,
                              const nx_tensor *b, const nx_tensor *p)
{
    nx_status st = nx_sr_check_float_any(ctx, WHO, "x", x);
    if (st == NX_OK)
        st = nx_sr_check_float_any(ctx, WHO, "y", y);
    if (st != NX_OK)
        return st;
    nx_dtype dt = nx_tensor_dtype(x);
    if (nx_tensor_ndim(x) != 2 || nx_tensor_ndim(y) != 2 ||
        nx_tensor_shape(x)[1] != nx_tensor_shape(y)[1])
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           WHO ": x and y must be [M, D] and [N, D] with one D (x has %d dims, "
                               "y %d; D %lld vs %lld)",
                           nx_tensor_ndim(x), nx_tensor_ndim(y),
                           (long long)(nx_tensor_ndim(x) == 2 ? nx_tensor_shape(x)[1] : -1),
                           (long long)(nx_tensor_ndim(y) == 2 ? nx_tensor_shape(y)[1] : -1));
    const struct {
        const nx_tensor *t;
        const char *name;
    } extra[2] = {{b, "b"}, {p, "p"}};
    for (int i = 0; i < 2; i++) {
        if (!extra[i].t)
            continue;
        if ((st = nx_sr_check_float_any(ctx, WHO, extra[i].name, extra[i].t)) != NX_OK)
            return st;
        if (nx_tensor_dtype(extra[i].t) != dt)
            return nx_rt_error(ctx, NX_ERR_DTYPE, WHO ": %s is %s but x is %s", extra[i].name,
                               nx_dtype_name(nx_tensor_dtype(extra[i].t)), nx_dtype_name(dt));
    }
    if (y && nx_tensor_dtype(y) != dt)
        return nx_rt_error(ctx, NX_ERR_DTYPE, WHO ": y is %s but x is %s",
                           nx_dtype_name(nx_tensor_dtype(y)), nx_dtype_name(dt));
    if (b && !((nx_tensor_ndim(b) == 1 || nx_tensor_ndim(b) == 2) &&
               nx_tensor_shape(b)[0] == nx_tensor_shape(y)[0]))
        return nx_rt_error(ctx, NX_ERR_SHAPE, WHO ": b must be [N] or [N, E] with N = %lld",
                           (long long)nx_tensor_shape(y)[0]);
    if (p && (nx_tensor_ndim(p) != 1 || nx_tensor_shape(p)[0] > 8))
        return nx_rt_error(ctx, NX_ERR_SHAPE, WHO ": p must be [P] with P <= 8");
    return NX_OK;
}

/* Parameters enter F as scale factors and bandwidths: a non-finite one poisons every output. A
 * device p (at most 8 values) is copied to the host once for this check. */
static nx_status check_params(nx_ctx *ctx, const nx_tensor *p)
{
    if (!p)
        return NX_OK;
    nx_tensor *h = NULL;
    if (nx_tensor_device(p) != NX_DEVICE_HOST) {
        nx_status st = nx_tensor_to_device(p, NX_DEVICE_HOST, &h);
        if (st != NX_OK)
            return st;
        p = h;
    }
    const char *base = nx_tensor_data(p);
    int64_t n = nx_tensor_shape(p)[0], s = nx_tensor_strides(p)[0];
    nx_status st = NX_OK;
    for (int64_t i = 0; i < n && st == NX_OK; i++) {
        double v = nx_tensor_dtype(p) == NX_DTYPE_F32 ? ((const float *)(const void *)base)[i * s]
                                                      : ((const double *)(const void *)base)[i * s];
        if (!isfinite(v))
            st = nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                             WHO ": parameter p%lld is %g; parameters must be finite", (long long)i,
                             v);
    }
    nx_tensor_free(h);
    return st;
}

static nx_status check_opts(nx_ctx *ctx, const nx_pairwise_opts *o, const nx_tensor *y,
                            nx_tensor **idx)
{
    if (!o || (!o->formula == !o->expr) || (o->expr && !o->expr_key))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           WHO ": opts must give exactly one of formula and expr (with expr_key)");
    if ((int)o->reduction < 0 || o->reduction >= NX_PAIRWISE_REDUCTION_COUNT)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, WHO ": reduction %d is not one of the enum",
                           (int)o->reduction);
    int64_t n = nx_tensor_shape(y)[0];
    if (o->reduction >= NX_PAIRWISE_ARGMIN && n == 0)
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           WHO ": argmin, argmax and kmin over an empty y (N = 0) have no winner");
    if (o->reduction == NX_PAIRWISE_KMIN && (o->k < 1 || o->k > n))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, WHO ": k = %lld; expected 1 <= k <= N = %lld",
                           (long long)o->k, (long long)n);
    if (o->reduction == NX_PAIRWISE_KMIN && !idx)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, WHO ": kmin needs idx for the indices");
    return NX_OK;
}

static nx_status check_formula_vars(nx_ctx *ctx, const pw_call *c)
{
    uint64_t allowed = (1ull << NX_SR_VPX) | (1ull << NX_SR_VPY);
    if (c->b)
        allowed |= 1ull << NX_SR_VPB;
    int64_t np = c->p ? nx_tensor_shape(c->p)[0] : 0;
    for (int64_t k = 0; k < np; k++)
        allowed |= 1ull << (NX_SR_VP0 + k);
    int bad = 0;
    if (nx_sr_vars_ok(c->e, c->root, allowed, &bad))
        return NX_OK;
    if (bad == NX_SR_VPB)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, WHO ": the formula uses b but b is NULL");
    return nx_rt_error(ctx, NX_ERR_INVALID_ARG, WHO ": the formula uses p%d but p has %lld values",
                       bad - NX_SR_VP0, (long long)np);
}

/* The index reductions have no gradient: said before anything else is looked at. */
static nx_status check_index_grad(nx_ctx *ctx, const nx_pairwise_opts *opts)
{
    if (opts && opts->reduction > NX_PAIRWISE_LOGSUMEXP &&
        opts->reduction < NX_PAIRWISE_REDUCTION_COUNT)
        return nx_rt_error(ctx, NX_ERR_UNSUPPORTED,
                           WHO "_vjp: argmin, argmax and kmin give indices, which have no "
                               "gradient; use min or max for the values");
    return NX_OK;
}

static nx_status check_vjp(nx_ctx *ctx, const nx_tensor *x, const nx_tensor *y, const nx_tensor *b,
                           const nx_tensor *p, const nx_pairwise_opts *opts, const nx_tensor *dout)
{
    if (check_index_grad(ctx, opts) != NX_OK)
        return NX_ERR_UNSUPPORTED;
    nx_status st = check_points(ctx, x, y, b, p);
    if (st == NX_OK)
        st = check_params(ctx, p);
    if (st == NX_OK)
        st = check_opts(ctx, opts, y, NULL);
    if (st == NX_OK)
        st = nx_sr_check_float_any(ctx, WHO "_vjp", "dout", dout);
    if (st == NX_OK && nx_tensor_dtype(dout) != nx_tensor_dtype(x))
        st = nx_rt_error(ctx, NX_ERR_DTYPE, WHO "_vjp: dout is %s but x is %s",
                         nx_dtype_name(nx_tensor_dtype(dout)), nx_dtype_name(nx_tensor_dtype(x)));
    const nx_tensor *s = opts ? opts->saved_out : NULL;
    if (st != NX_OK || !s)
        return st;
    if (opts->reduction != NX_PAIRWISE_LOGSUMEXP)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           WHO "_vjp: saved_out is for LOGSUMEXP only (MAX and MIN route to the "
                               "first winner, which the values alone do not give)");
    st = nx_sr_check_float_any(ctx, WHO "_vjp", "saved_out", s);
    if (st == NX_OK &&
        (nx_tensor_dtype(s) != nx_tensor_dtype(x) || nx_tensor_ndim(s) != nx_tensor_ndim(dout) ||
         memcmp(nx_tensor_shape(s), nx_tensor_shape(dout),
                (size_t)nx_tensor_ndim(s) * sizeof(int64_t))))
        st = nx_rt_error(ctx, NX_ERR_SHAPE,
                         WHO "_vjp: saved_out must be the forward result, of dout's shape and x's "
                             "dtype");
    return st;
}

static nx_status parse_formula(nx_ctx *ctx, pw_call *c, nx_sr_expr *e)
{
    if (!c->o->formula)
        return NX_OK;
    char msg[512];
    nx_status st = nx_sr_parse_expr(ctx, "pairwise formula", c->o->formula, NX_SR_DIALECT_PAIRWISE,
                                    e, &c->root, msg, sizeof msg);
    if (st != NX_OK)
        return nx_rt_error(ctx, st, "%s", msg);
    c->e = e;
    return check_formula_vars(ctx, c);
}

/* ---- the descriptor --------------------------------------------------------------------------*/

/* What nx_op_call parses into (the schema's fields) and, after them, what only the typed entry
 * points give: a C builder and a saved result (typed), the optional b and p, and where KMIN's
 * indices and b's and p's cotangents go. */
typedef struct pw_args {
    nx_backend backend;
    int reduction;       /* nx_pairwise_reduction */
    int64_t k;           /* KMIN only; text options: 1 unless given (n_k) */
    const char *formula; /* F as text; NULL: the kernel's */
    int kernel;          /* PW_GAUSSIAN..: F when formula is NULL */
    double eps;          /* the kernel's bandwidth (p0); 1 unless given (n_eps) */
    int n_k, n_eps;      /* how many values of k and eps the text options gave (0 or 1) */
    bool typed_call;
    const nx_pairwise_opts *typed; /* a typed call's options (NULL is refused) */
    const nx_tensor *b, *p;
    nx_tensor **idx;      /* KMIN's indices, or NULL */
    nx_tensor **grads_bp; /* vjp: b's and p's cotangents, or NULL */
} pw_args;

enum { PW_GAUSSIAN, PW_NEG_SQDIST, PW_SQDIST };
static const char *const kernel_formulas[] = {"exp(-sqdist(x, y) / p0)", "-sqdist(x, y) / p0",
                                              "sqdist(x, y)"};

/* The options as the typed entry point's; *uses_eps: F reads p0 = eps (text options). */
static bool resolve(const pw_args *a, nx_pairwise_opts *po, bool *uses_eps)
{
    *uses_eps = false;
    if (a->typed_call) {
        if (a->typed)
            *po = *a->typed;
        return a->typed != NULL;
    }
    bool given = a->formula && *a->formula; /* "" (the default): the kernel's */
    int kern = a->kernel >= PW_GAUSSIAN && a->kernel <= PW_SQDIST ? a->kernel : PW_GAUSSIAN;
    *po = (nx_pairwise_opts){.backend = a->backend,
                             .reduction = (nx_pairwise_reduction)a->reduction,
                             .k = a->n_k ? a->k : 1,
                             .formula = given ? a->formula : kernel_formulas[kern]};
    *uses_eps = !given && kern != PW_SQDIST;
    return true;
}

static nx_status check(const nx_op_args *c)
{
    const pw_args *a = c->opts;
    nx_pairwise_opts po;
    bool uses_eps = false;
    bool have = resolve(a, &po, &uses_eps);
    const nx_tensor *x = c->in[0], *y = c->in[1];
    if (c->dy)
        return check_vjp(c->ctx, x, y, a->b, a->p, have ? &po : NULL, c->dy[0]);
    nx_status st = check_points(c->ctx, x, y, a->b, a->p);
    if (st == NX_OK)
        st = check_params(c->ctx, a->p);
    double eps = a->n_eps ? a->eps : 1.0;
    if (st == NX_OK && uses_eps && !isfinite(eps))
        st = nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                         WHO ": parameter p0 (eps) is %g; parameters must be finite", eps);
    nx_tensor *dummy = NULL;
    if (st == NX_OK)
        st = check_opts(c->ctx, have ? &po : NULL, y, a->typed_call ? a->idx : &dummy);
    return st;
}

static void stage_key(nx_rt_cache_blob *b, const void *user)
{
    const pw_call *c = user;
    if (c->e)
        nx_sr_key(b, "formula", c->e, c->root);
    else
        nx_rt_cache_blob_str(b, "expr", c->o->expr_key);
    nx_rt_cache_blob_i64(b, "reduction", c->o->reduction);
    nx_rt_cache_blob_i64(b, "k", c->o->reduction == NX_PAIRWISE_KMIN ? c->o->k : 0);
    nx_rt_cache_blob_tensor(b, "b", c->b);
    nx_rt_cache_blob_tensor(b, "p", c->p);
    nx_rt_cache_blob_tensor(b, "dout", c->dout);
    nx_rt_cache_blob_tensor(b, "saved", c->saved);
}

static nx_status stage_build(nx_graph *g, const nx_op_args *oc, const void *user, int nout,
                             nx_node *outs)
{
    (void)oc;
    int n = 0;
    nx_status st = build_pairwise(g, (void *)(uintptr_t)user, outs, &n);
    if (st == NX_OK && n != nout)
        st = nx_rt_error(nx_graph_ctx(g), NX_ERR_INTERNAL, WHO ": %d outputs built, %d expected", n,
                         nout);
    return st;
}

/* A [1] tensor holding the kernel's eps in x's dtype. */
static nx_status eps_tensor(nx_ctx *ctx, const nx_tensor *x, double eps, nx_tensor **out)
{
    int64_t one = 1;
    nx_status st = nx_tensor_new(ctx, nx_tensor_dtype(x), 1, &one, out);
    if (st == NX_OK && nx_tensor_dtype(x) == NX_DTYPE_F32)
        *(float *)nx_tensor_data(*out) = (float)eps;
    else if (st == NX_OK)
        *(double *)nx_tensor_data(*out) = eps;
    return st;
}

static nx_status run_stage(const nx_op_args *oc, pw_call *c, nx_tensor **res, int *nres)
{
    int n;
    if (c->dout)
        n = 2 + (c->b != NULL) + (c->p != NULL);
    else
        n = c->o->reduction == NX_PAIRWISE_KMIN ? 2 : 1;
    /* The gradients' two streamed passes are built here, not by autodiff of the forward
     * stage, so the vjp stage is asked for as a forward one (its key has the cotangent). */
    nx_op_args fc = *oc;
    fc.dy = NULL;
    nx_program *prog = NULL;
    nx_status st =
        nx_op_program(&fc, c->dout ? "vjp" : "forward", stage_key, stage_build, c, n, &prog);
    if (st != NX_OK)
        return st;
    const nx_tensor *ins[6] = {c->x, c->y};
    int k = 2;
    if (c->b)
        ins[k++] = c->b;
    if (c->p)
        ins[k++] = c->p;
    if (c->dout)
        ins[k++] = c->dout;
    if (c->saved)
        ins[k++] = c->saved;
    *nres = n;
    return nx_program_run(prog, ins, res);
}

/* Forward: outs[0] (KMIN's indices to a->idx). Vjp: x's and y's cotangents in outs, b's and p's
 * to a->grads_bp. */
static nx_status run(const nx_op_args *oc, nx_tensor **outs)
{
    const pw_args *a = oc->opts;
    nx_pairwise_opts po;
    bool uses_eps = false;
    resolve(a, &po, &uses_eps);
    nx_tensor *p_eps = NULL;
    nx_status st =
        uses_eps ? eps_tensor(oc->ctx, oc->in[0], a->n_eps ? a->eps : 1.0, &p_eps) : NX_OK;
    if (st != NX_OK)
        return st;
    pw_call c = {.x = oc->in[0],
                 .y = oc->in[1],
                 .b = a->b,
                 .p = p_eps ? p_eps : a->p,
                 .o = &po,
                 .root = -1,
                 .dout = oc->dy ? oc->dy[0] : NULL,
                 .saved = oc->dy ? po.saved_out : NULL};
    nx_sr_expr e = {0};
    st = parse_formula(oc->ctx, &c, &e);
    nx_tensor *res[4] = {NULL, NULL, NULL, NULL};
    int n = 0;
    if (st == NX_OK)
        st = run_stage(oc, &c, res, &n);
    nx_sr_expr_free(oc->ctx, &e);
    nx_tensor_free(p_eps);
    if (st != NX_OK)
        return st;
    outs[0] = res[0];
    if (!oc->dy) {
        if (n == 2 && a->idx)
            *a->idx = res[1];
        else if (n == 2)
            nx_tensor_free(res[1]);
        return NX_OK;
    }
    /* x, y, then b and p where given */
    outs[1] = res[1];
    int k = 2;
    nx_tensor *gb = c.b ? res[k++] : NULL, *gp = c.p ? res[k++] : NULL;
    if (a->grads_bp) {
        a->grads_bp[0] = gb;
        a->grads_bp[1] = gp;
    } else {
        nx_tensor_free(gb);
        nx_tensor_free(gp);
    }
    return NX_OK;
}

static void key(nx_rt_cache_blob *b, const nx_op_args *c)
{
    /* What text options cannot give; the formula's tree, the builder's name and the optional
     * tensors are the stages' key (stage_key). */
    const pw_args *a = c->opts;
    nx_rt_cache_blob_i64(b, "typed", a->typed_call);
}

static const nx_op_opt opts[] = {
    {"reduction", NX_OPT_ENUM, "sum", "sum|max|min|logsumexp|argmin|argmax|kmin", 1,
     "the reduction over j (kmin writes the k smallest values)"},
    /* k and eps: lists of one value, whose counts say whether they were given (the defaults
     * are not zero) */
    {"k", NX_OPT_INTS, "1", "1:", 1, "kmin: how many"},
    {"formula", NX_OPT_STRING, "", NULL, 1,
     "F over x, y (D-vectors), b, p0..p7; when not given, the kernel's"},
    {"kernel", NX_OPT_ENUM, "gaussian", "gaussian|neg_sqdist|sqdist", 1,
     "F: exp(-|x-y|^2 / eps), -|x-y|^2 / eps, or |x-y|^2"},
    {"eps", NX_OPT_FLOATS, "1", "-1e300:1e300", 1, "the kernel's bandwidth eps (finite)"},
};

#define F(field, count)                                                                            \
    {                                                                                              \
        offsetof(pw_args, field), count, sizeof(((pw_args *)0)->field)                             \
    }
static const nx_op_field fields[] = {
    F(reduction, NX_OP_NO_FIELD), F(k, offsetof(pw_args, n_k)),     F(formula, NX_OP_NO_FIELD),
    F(kernel, NX_OP_NO_FIELD),    F(eps, offsetof(pw_args, n_eps)),
};
#undef F

/* the fixtures' (tests/ops/semiring: f32 2e-5, f64 1e-12) */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-12},
    {NX_DTYPE_F32, NULL, NULL, 2e-5, 2e-5},
};

const nx_op_desc nx_op_pairwise_reduce = {
    .info = {.nopts = 5, .opts = opts},
    .opts_size = sizeof(pw_args),
    .fields = fields,
    .backend_offset = offsetof(pw_args, backend),
    .check = check,
    .key = key,
    .run = run,
    .golden = "semiring",
    .tols = tols,
    .ntols = 2,
};

/* ---- typed entry points ----------------------------------------------------------------------*/

static pw_args typed_args(const nx_tensor *b, const nx_tensor *p, const nx_pairwise_opts *opts)
{
    pw_args a = {.typed_call = true, .typed = opts, .b = b, .p = p};
    if (opts) {
        a.backend = opts->backend;
        a.reduction = (int)opts->reduction;
        a.k = opts->reduction == NX_PAIRWISE_KMIN ? opts->k : 1;
        a.n_k = 1;
        a.formula = opts->formula;
    }
    return a;
}

nx_status nx_pairwise_reduce(nx_ctx *ctx, const nx_tensor *x, const nx_tensor *y,
                             const nx_tensor *b, const nx_tensor *p, const nx_pairwise_opts *opts,
                             nx_tensor **out, nx_tensor **idx)
{
    if (!ctx || !out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, WHO ": ctx and out must not be NULL");
    *out = NULL;
    if (idx)
        *idx = NULL;
    pw_args a = typed_args(b, p, opts);
    a.idx = idx;
    return nx_op_run(ctx, &nx_op_pairwise_reduce, (const nx_tensor *const[]){x, y}, &a, out);
}

nx_status nx_pairwise_reduce_vjp(nx_ctx *ctx, const nx_tensor *x, const nx_tensor *y,
                                 const nx_tensor *b, const nx_tensor *p,
                                 const nx_pairwise_opts *opts, const nx_tensor *dout,
                                 nx_tensor *grads[4])
{
    if (!ctx || !grads)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, WHO "_vjp: ctx and grads must not be NULL");
    for (int i = 0; i < 4; i++)
        grads[i] = NULL;
    nx_status st = check_index_grad(ctx, opts);
    if (st != NX_OK)
        return st;
    pw_args a = typed_args(b, p, opts);
    nx_tensor *bp[2] = {NULL, NULL};
    a.grads_bp = bp;
    st = nx_op_run_vjp(ctx, &nx_op_pairwise_reduce, (const nx_tensor *const[]){x, y}, &a,
                       (const nx_tensor *const[]){dout}, grads);
    if (st != NX_OK) {
        nx_tensor_free(bp[0]);
        nx_tensor_free(bp[1]);
        return st;
    }
    grads[2] = bp[0];
    grads[3] = bp[1];
    return NX_OK;
}

nx_status nx_sr_pairwise_vjp_graph(nx_ctx *ctx, const nx_tensor *x, const nx_tensor *y,
                                   const nx_tensor *b, const nx_tensor *p,
                                   const nx_pairwise_opts *opts, const nx_tensor *dout,
                                   nx_graph **g, nx_node *outs, int *nouts)
{
    *g = NULL;
    nx_status st = check_vjp(ctx, x, y, b, p, opts, dout);
    if (st != NX_OK)
        return st;
    pw_call c = {.x = x,
                 .y = y,
                 .b = b,
                 .p = p,
                 .o = opts,
                 .root = -1,
                 .dout = dout,
                 .saved = opts->saved_out};
    nx_sr_expr e = {0};
    st = parse_formula(ctx, &c, &e);
    if (st == NX_OK)
        st = nx_graph_new(ctx, g);
    if (st == NX_OK)
        st = build_vjp(*g, &c, outs, nouts);
    nx_sr_expr_free(ctx, &e);
    if (st != NX_OK) {
        nx_graph_free(*g);
        *g = NULL;
    }
    return st;
}

nx_status nx_sr_pairwise_graph(nx_ctx *ctx, const nx_tensor *x, const nx_tensor *y,
                               const nx_tensor *b, const nx_tensor *p, const nx_pairwise_opts *opts,
                               nx_graph **g, nx_node *outs, int *nouts)
{
    *g = NULL;
    nx_status st = check_points(ctx, x, y, b, p);
    if (st == NX_OK)
        st = check_opts(ctx, opts, y, NULL);
    if (st != NX_OK)
        return st;
    pw_call c = {.x = x, .y = y, .b = b, .p = p, .o = opts, .root = -1};
    nx_sr_expr e = {0};
    st = parse_formula(ctx, &c, &e);
    if (st == NX_OK)
        st = nx_graph_new(ctx, g);
    if (st == NX_OK)
        st = build_forward(*g, &c, outs, nouts);
    nx_sr_expr_free(ctx, &e);
    if (st != NX_OK) {
        nx_graph_free(*g);
        *g = NULL;
    }
    return st;
}
