/* KeOps-style pairwise reductions: out_i = reduce_j F(x_i, y_j, b_j, p). F is built on
 * x_i [M, 1, D] and y_j [1, N, D], so the [M, N, E] values exist only as a graph node that the
 * backends stream (the reference interpreter materialises it). */
#include <math.h>
#include <string.h>

#include "cache.h"
#include "passes/autodiff.h"
#include "semiring.h"

#define WHO "nx_pairwise_reduce"

typedef struct pw_call {
    const nx_tensor *x, *y, *b, *p;
    const nx_pairwise_opts *o;
    const nx_sr_expr *e;
    int32_t root;
    const nx_tensor *dout; /* vjp: the result's cotangent; NULL for the forward program */
} pw_call;

static nx_node shaped(nx_graph *g, nx_node x, int64_t a, int64_t b, int64_t c)
{
    int64_t s[3] = {a, b, c};
    return nx_reshape(g, x, 3, s);
}

static nx_node build_f(nx_graph *g, const pw_call *c, nx_node x, nx_node y, nx_node b, nx_node p)
{
    int64_t m = nx_tensor_shape(c->x)[0], n = nx_tensor_shape(c->y)[0];
    int64_t d = nx_tensor_shape(c->x)[1];
    nx_node xi = shaped(g, x, m, 1, d), yj = shaped(g, y, 1, n, d), bj = NX_NONE;
    if (b) {
        int64_t e = nx_tensor_ndim(c->b) == 2 ? nx_tensor_shape(c->b)[1] : 1;
        bj = shaped(g, b, 1, n, e);
    }
    if (c->o->expr)
        return c->o->expr(g, xi, yj, bj, p, c->o->user);
    nx_node vars[NX_SR_NVARS] = {0};
    vars[NX_SR_VPX] = xi;
    vars[NX_SR_VPY] = yj;
    vars[NX_SR_VPB] = bj;
    int64_t np = c->p ? nx_tensor_shape(c->p)[0] : 0;
    for (int64_t k = 0; k < np && k < 8; k++) {
        int64_t start = k, stop = k + 1;
        vars[NX_SR_VP0 + k] = shaped(g, nx_slice(g, p, &start, &stop, NULL), 1, 1, 1);
    }
    return nx_sr_build(g, c->e, c->root, nx_tensor_dtype(c->x), vars);
}

static nx_status build_reduce(nx_graph *g, pw_call *c, nx_node *ins, nx_node *outs, int *nouts);

/* The forward program, or with c->dout its vjp: the cotangents of x, y, then b and p if given,
 * by autodiff of the same fragment. */
static nx_status build_pairwise(nx_graph *g, void *user, nx_node *outs, int *nouts)
{
    pw_call *c = user;
    nx_node ins[4] = {0}, y = NX_NONE;
    int ny = 0;
    nx_status st = build_reduce(g, c, ins, c->dout ? &y : outs, c->dout ? &ny : nouts);
    if (st != NX_OK || !c->dout)
        return st;
    nx_node dy = nx_input(g, "dout", nx_tensor_dtype(c->dout), nx_tensor_ndim(c->dout),
                          nx_tensor_shape(c->dout));
    int64_t ys[NX_MAX_DIMS];
    nx_node_shape(g, y, ys);
    if (nx_node_ndim(g, y) != nx_tensor_ndim(c->dout) ||
        memcmp(ys, nx_tensor_shape(c->dout), (size_t)nx_node_ndim(g, y) * sizeof(int64_t)))
        return nx_rt_error(nx_graph_ctx(g), NX_ERR_SHAPE,
                           WHO "_vjp: the cotangent's shape is not the result's");
    nx_node wrt[4];
    int n = 0;
    for (int i = 0; i < 4; i++)
        if (ins[i])
            wrt[n++] = ins[i];
    *nouts = n;
    return nx_graph_vjp(g, 1, &y, &dy, n, wrt, outs);
}

static nx_status build_reduce(nx_graph *g, pw_call *c, nx_node *ins, nx_node *outs, int *nouts)
{
    nx_dtype dt = nx_tensor_dtype(c->x);
    nx_node x = nx_input(g, "x", dt, 2, nx_tensor_shape(c->x));
    nx_node y = nx_input(g, "y", dt, 2, nx_tensor_shape(c->y));
    nx_node b = c->b ? nx_input(g, "b", dt, nx_tensor_ndim(c->b), nx_tensor_shape(c->b)) : 0;
    nx_node p = c->p ? nx_input(g, "p", dt, 1, nx_tensor_shape(c->p)) : 0;
    ins[0] = x, ins[1] = y, ins[2] = b, ins[3] = p;
    nx_node f = build_f(g, c, x, y, b, p);
    if (!f)
        return nx_graph_status(g) != NX_OK
                   ? nx_graph_status(g)
                   : nx_rt_error(nx_graph_ctx(g), NX_ERR_INVALID_ARG, WHO ": F built nothing");
    int64_t m = nx_tensor_shape(c->x)[0], n = nx_tensor_shape(c->y)[0];
    int64_t fs[NX_MAX_DIMS];
    int fd = nx_node_ndim(g, f);
    nx_node_shape(g, f, fs);
    if (fd > 3 || nx_node_dtype(g, f) != dt)
        return nx_rt_error(nx_graph_ctx(g), NX_ERR_SHAPE,
                           WHO ": F has %d dims and dtype %s; expected [M, N, E] of %s", fd,
                           nx_dtype_name(nx_node_dtype(g, f)), nx_dtype_name(dt));
    int64_t e = fd == 3 ? fs[2] : 1;
    f = nx_broadcast(
        g, fd == 3 ? f : shaped(g, f, fd >= 2 ? fs[fd - 2] : 1, fd >= 1 ? fs[fd - 1] : 1, 1), 3,
        (int64_t[]){m, n, e});
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

static nx_status check_points(nx_ctx *ctx, const nx_tensor *x, const nx_tensor *y,
                              const nx_tensor *b, const nx_tensor *p)
{
    nx_status st = nx_sr_check_float(ctx, WHO, "x", x);
    if (st == NX_OK)
        st = nx_sr_check_float(ctx, WHO, "y", y);
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
        if ((st = nx_sr_check_float(ctx, WHO, extra[i].name, extra[i].t)) != NX_OK)
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

/* Parameters enter F as scale factors and bandwidths: a non-finite one poisons every output. */
static nx_status check_params(nx_ctx *ctx, const nx_tensor *p)
{
    if (!p)
        return NX_OK;
    const char *base = nx_tensor_data(p);
    int64_t n = nx_tensor_shape(p)[0], s = nx_tensor_strides(p)[0];
    for (int64_t i = 0; i < n; i++) {
        double v = nx_tensor_dtype(p) == NX_DTYPE_F32 ? ((const float *)(const void *)base)[i * s]
                                                      : ((const double *)(const void *)base)[i * s];
        if (!isfinite(v))
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                               WHO ": parameter p%lld is %g; parameters must be finite",
                               (long long)i, v);
    }
    return NX_OK;
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

static nx_status run_pairwise(nx_ctx *ctx, pw_call *c, nx_tensor **out, nx_tensor **idx)
{
    const nx_pairwise_opts *o = c->o;
    nx_rt_cache_blob key;
    nx_rt_cache_blob_init(&key, ctx);
    nx_rt_cache_blob_str(&key, "op", c->dout ? "pairwise_reduce_vjp" : "pairwise_reduce");
    nx_sr_key_tensor(&key, "dout", c->dout);
    if (o->formula)
        nx_sr_key(&key, "formula", c->e, c->root);
    else
        nx_rt_cache_blob_str(&key, "expr", o->expr_key);
    nx_rt_cache_blob_i64(&key, "reduction", o->reduction);
    nx_rt_cache_blob_i64(&key, "k", o->reduction == NX_PAIRWISE_KMIN ? o->k : 0);
    nx_sr_key_tensor(&key, "x", c->x);
    nx_sr_key_tensor(&key, "y", c->y);
    nx_sr_key_tensor(&key, "b", c->b);
    nx_sr_key_tensor(&key, "p", c->p);
    nx_program *prog = NULL;
    nx_status st = nx_sr_program(ctx, &key, o->backend, build_pairwise, c, &prog);
    nx_rt_cache_blob_free(&key);
    if (st != NX_OK)
        return st;
    const nx_tensor *ins[5] = {c->x, c->y};
    int n = 2;
    if (c->b)
        ins[n++] = c->b;
    if (c->p)
        ins[n++] = c->p;
    if (c->dout)
        ins[n++] = c->dout;
    nx_tensor *res[4] = {NULL, NULL, NULL, NULL};
    if ((st = nx_program_run(prog, ins, res)) != NX_OK)
        return st;
    out[0] = res[0];
    if (c->dout) {
        /* x, y, then b and p where given */
        int k = 1;
        out[1] = res[k++];
        out[2] = c->b ? res[k++] : NULL;
        out[3] = c->p ? res[k++] : NULL;
    } else if (idx) {
        *idx = res[1];
    }
    return NX_OK;
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
    nx_status st = check_points(ctx, x, y, b, p);
    if (st == NX_OK)
        st = check_params(ctx, p);
    if (st == NX_OK)
        st = check_opts(ctx, opts, y, idx);
    if (st != NX_OK)
        return st;
    pw_call c = {.x = x, .y = y, .b = b, .p = p, .o = opts, .root = -1};
    nx_sr_expr e = {0};
    if (opts->formula) {
        char msg[512];
        st = nx_sr_parse_expr(ctx, "pairwise formula", opts->formula, NX_SR_DIALECT_PAIRWISE, &e,
                              &c.root, msg, sizeof msg);
        if (st != NX_OK)
            nx_rt_error(ctx, st, "%s", msg);
        c.e = &e;
        if (st == NX_OK)
            st = check_formula_vars(ctx, &c);
    }
    if (st == NX_OK)
        st = run_pairwise(ctx, &c, out, idx);
    nx_sr_expr_free(ctx, &e);
    return st;
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
    if (opts && opts->reduction > NX_PAIRWISE_LOGSUMEXP &&
        opts->reduction < NX_PAIRWISE_REDUCTION_COUNT)
        return nx_rt_error(ctx, NX_ERR_UNSUPPORTED,
                           WHO "_vjp: argmin, argmax and kmin give indices, which have no "
                               "gradient; use min or max for the values");
    nx_status st = check_points(ctx, x, y, b, p);
    if (st == NX_OK)
        st = check_params(ctx, p);
    if (st == NX_OK)
        st = check_opts(ctx, opts, y, NULL);
    if (st == NX_OK)
        st = nx_sr_check_float(ctx, WHO "_vjp", "dout", dout);
    if (st == NX_OK && nx_tensor_dtype(dout) != nx_tensor_dtype(x))
        st = nx_rt_error(ctx, NX_ERR_DTYPE, WHO "_vjp: dout is %s but x is %s",
                         nx_dtype_name(nx_tensor_dtype(dout)), nx_dtype_name(nx_tensor_dtype(x)));
    if (st != NX_OK)
        return st;
    pw_call c = {.x = x, .y = y, .b = b, .p = p, .o = opts, .root = -1, .dout = dout};
    nx_sr_expr e = {0};
    if (opts->formula) {
        char msg[512];
        st = nx_sr_parse_expr(ctx, "pairwise formula", opts->formula, NX_SR_DIALECT_PAIRWISE, &e,
                              &c.root, msg, sizeof msg);
        if (st != NX_OK)
            nx_rt_error(ctx, st, "%s", msg);
        c.e = &e;
        if (st == NX_OK)
            st = check_formula_vars(ctx, &c);
    }
    nx_tensor *res[4] = {NULL, NULL, NULL, NULL};
    if (st == NX_OK)
        st = run_pairwise(ctx, &c, res, NULL);
    nx_sr_expr_free(ctx, &e);
    for (int i = 0; i < 4 && st == NX_OK; i++)
        grads[i] = res[i];
    return st;
}
