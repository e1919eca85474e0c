/* Finite-difference checks of every differentiable primitive (and the flagged ones, whose gradient
 * must be zero), on random float64 inputs, through the reference interpreter. Cases cover
 * broadcasting, every pad mode with pads wider than the axis, every reduction monoid over one,
 * several and no axes, windows with strides and dilations, gather/scatter with duplicate and
 * out-of-range indices, scans in both directions, sort and top-k, concat, slice with steps,
 * select, casts between floats, pow/atan2/mod, contractions, and gradients of gradients. */
#include <stdlib.h>

#include "checker.h"

#define I64(...) ((const int64_t[]){__VA_ARGS__})
#define AX(...) ((const int[]){__VA_ARGS__})

static nx_node sc(nx_graph *g, double v)
{
    return nx_scalar(g, NX_DTYPE_F64, v);
}

/* ---- elementwise ---------------------------------------------------------------------------*/
#define UNARY(fn)                                                                                  \
    static nx_node b_##fn(nx_graph *g, const nx_node *p)                                          \
    {                                                                                              \
        return nx_##fn(g, p[0]);                                                                   \
    }
UNARY(neg)
UNARY(abs)
UNARY(exp)
UNARY(log)
UNARY(log1p)
UNARY(expm1)
UNARY(sqrt)
UNARY(rsqrt)
UNARY(sin)
UNARY(cos)
UNARY(tanh)
UNARY(erf)
UNARY(floor)
UNARY(ceil)
UNARY(round)
UNARY(sign)
#define BINARY(fn)                                                                                 \
    static nx_node b_##fn(nx_graph *g, const nx_node *p)                                          \
    {                                                                                              \
        return nx_##fn(g, p[0], p[1]);                                                             \
    }
BINARY(add)
BINARY(sub)
BINARY(mul)
BINARY(minimum)
BINARY(maximum)
BINARY(atan2)
static nx_node b_div(nx_graph *g, const nx_node *p)
{
    return nx_div(g, p[0], nx_add(g, p[1], sc(g, 3.0)));
}
static nx_node b_pow(nx_graph *g, const nx_node *p)
{
    return nx_pow(g, nx_exp(g, p[0]), p[1]);
}
static nx_node b_mod(nx_graph *g, const nx_node *p)
{
    return nx_mod(g, p[0], nx_add(g, p[1], sc(g, 3.0)));
}
static nx_node b_select(nx_graph *g, const nx_node *p)
{
    return nx_select(g, nx_gt(g, p[0], sc(g, 0.0)), nx_mul(g, p[0], p[0]), p[1]);
}
static nx_node b_cast(nx_graph *g, const nx_node *p)
{
    nx_node x = nx_cast(g, nx_cast(g, p[0], NX_DTYPE_F32), NX_DTYPE_F64);
    return nx_mul(g, x, x);
}
static nx_node b_cmp(nx_graph *g, const nx_node *p) /* comparisons carry no gradient */
{
    nx_node m = nx_cast(g, nx_lt(g, p[0], p[1]), NX_DTYPE_F64);
    return nx_add(g, nx_mul(g, m, sc(g, 2.0)), nx_cast(g, nx_cast(g, p[0], NX_DTYPE_I32),
                                                         NX_DTYPE_F64));
}

/* ---- movement ------------------------------------------------------------------------------*/
static nx_node b_reshape(nx_graph *g, const nx_node *p)
{
    return nx_sin(g, nx_reshape(g, p[0], 3, I64(2, 2, 3)));
}
static nx_node b_permute(nx_graph *g, const nx_node *p)
{
    return nx_mul(g, nx_permute(g, p[0], AX(2, 0, 1)), p[1]);
}
static nx_node b_broadcast(nx_graph *g, const nx_node *p)
{
    return nx_exp(g, nx_broadcast(g, p[0], 3, I64(2, 4, 3)));
}
static nx_node b_slice(nx_graph *g, const nx_node *p)
{
    return nx_exp(g, nx_slice(g, p[0], I64(1, 0), I64(7, 5), I64(2, 1)));
}
static nx_node b_slice2(nx_graph *g, const nx_node *p)
{
    return nx_exp(g, nx_slice(g, p[0], I64(1, 1), I64(5, 5), I64(3, 2)));
}
#define PAD(mode)                                                                                  \
    static nx_node b_pad_##mode(nx_graph *g, const nx_node *p)                                    \
    {                                                                                              \
        nx_node y = nx_pad(g, p[0], I64(4, 1), I64(2, 5), NX_PAD_##mode, 0.5);                     \
        return nx_mul(g, y, y);                                                                    \
    }
PAD(CONSTANT)
PAD(REFLECT)
PAD(MIRROR)
PAD(NEAREST)
PAD(WRAP)
static nx_node b_reverse(nx_graph *g, const nx_node *p)
{
    return nx_mul(g, nx_reverse(g, p[0], 1, AX(-1)), p[1]);
}
static nx_node b_concat(nx_graph *g, const nx_node *p)
{
    nx_node xs[3] = {p[0], nx_exp(g, p[1]), p[0]};
    nx_node c = nx_concat(g, 3, xs, 1);
    return nx_mul(g, c, c);
}
static nx_node b_window(nx_graph *g, const nx_node *p)
{
    nx_node w = nx_window(g, p[0], I64(3, 2), I64(2, 1), I64(1, 2));
    return nx_mul(g, w, w);
}

/* ---- indexing ------------------------------------------------------------------------------*/
static nx_node idx_const(nx_graph *g)
{
    static const int64_t idx[6] = {3, -2, 0, 3, 9, 1}; /* duplicates, below and above range */
    return nx_constant(g, NX_DTYPE_I64, 1, I64(6), idx);
}
static nx_node b_gather(nx_graph *g, const nx_node *p)
{
    nx_node y = nx_gather(g, p[0], idx_const(g), 1);
    return nx_mul(g, y, y);
}
static nx_node b_scatter_sum(nx_graph *g, const nx_node *p)
{
    nx_node y = nx_scatter(g, p[0], idx_const(g), p[1], 1, NX_MONOID_SUM);
    return nx_mul(g, y, y);
}
static nx_node b_scatter_max(nx_graph *g, const nx_node *p)
{
    return nx_exp(g, nx_scatter(g, p[0], idx_const(g), p[1], 1, NX_MONOID_MAX));
}
static nx_node b_scatter_min(nx_graph *g, const nx_node *p)
{
    return nx_exp(g, nx_scatter(g, p[0], idx_const(g), p[1], 1, NX_MONOID_MIN));
}

/* ---- reductions ----------------------------------------------------------------------------*/
#define RED(tag, monoid, naxes, keep, ...)                                                        \
    static nx_node b_red_##tag(nx_graph *g, const nx_node *p)                                     \
    {                                                                                              \
        nx_node r = nx_reduce(g, p[0], naxes, AX(__VA_ARGS__), NX_MONOID_##monoid, keep);         \
        return nx_mul(g, r, r);                                                                    \
    }
RED(sum, SUM, 1, false, 1)
RED(sum2, SUM, 2, true, 0, 2)
RED(prod, PROD, 1, false, 1)
RED(prod2, PROD, 2, false, 0, 2)
RED(max, MAX, 1, false, 1)
RED(max2, MAX, 2, true, 2, 0)
RED(min, MIN, 1, false, 0)
RED(min2, MIN, 2, false, 0, 2)
RED(lse, LOGSUMEXP, 1, false, 1)
RED(lse2, LOGSUMEXP, 2, true, 0, 2)
RED(none, MAX, 0, false, 0)
static nx_node b_prod_zero(nx_graph *g, const nx_node *p)
{
    static const double mask[12] = {1, 0, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0};
    nx_node m = nx_constant(g, NX_DTYPE_F64, 2, I64(3, 4), mask);
    int axis = 1;
    return nx_reduce(g, nx_mul(g, p[0], m), 1, &axis, NX_MONOID_PROD, false);
}
static nx_node b_custom_sum(nx_graph *g, const nx_node *p)
{
    nx_monoid_def m = {.ncarry = 1};
    m.x = nx_placeholder(g, NX_DTYPE_F64);
    m.a[0] = nx_placeholder(g, NX_DTYPE_F64);
    m.b[0] = nx_placeholder(g, NX_DTYPE_F64);
    m.combine[0] = nx_maximum(g, m.b[0], m.a[0]);
    m.identity[0] = sc(g, -INFINITY);
    int axis = 1;
    return nx_exp(g, nx_reduce_custom(g, p[0], 1, &axis, &m, false));
}

/* ---- scans and sorting ---------------------------------------------------------------------*/
#define SCAN(tag, monoid, rev)                                                                     \
    static nx_node b_scan_##tag(nx_graph *g, const nx_node *p)                                    \
    {                                                                                              \
        nx_node y = nx_scan(g, p[0], 1, NX_MONOID_##monoid, rev);                                  \
        return nx_mul(g, y, y);                                                                    \
    }
SCAN(sum, SUM, false)
SCAN(sum_r, SUM, true)
SCAN(prod, PROD, false)
SCAN(prod_r, PROD, true)
SCAN(max, MAX, false)
SCAN(max_r, MAX, true)
SCAN(min, MIN, false)
SCAN(min_r, MIN, true)
SCAN(lse, LOGSUMEXP, false)
SCAN(lse_r, LOGSUMEXP, true)
static nx_node b_scan_linear(nx_graph *g, const nx_node *p)
{
    nx_node y = nx_scan_linear(g, p[0], p[1], 1, false);
    return nx_mul(g, y, y);
}
static nx_node b_scan_linear_r(nx_graph *g, const nx_node *p)
{
    nx_node y = nx_scan_linear(g, p[0], p[1], 0, true);
    return nx_mul(g, y, y);
}
/* scan_iir's adjoint is the recursion run the other way; the weight p[1] makes the cotangent of
 * y non-uniform, so a wrong direction or coefficient order shows. */
static nx_node b_scan_iir(nx_graph *g, const nx_node *p)
{
    static const double c[3] = {1.2, -0.6, 0.15};
    return nx_mul(g, nx_scan_iir(g, p[0], 1, false, 3, c), p[1]);
}
static nx_node b_scan_iir_r(nx_graph *g, const nx_node *p)
{
    static const double c[4] = {-0.4, 0.3, 0.1, -0.05};
    nx_node y = nx_scan_iir(g, p[0], 0, true, 4, c);
    return nx_mul(g, y, y);
}
static nx_node b_sort(nx_graph *g, const nx_node *p)
{
    return nx_mul(g, nx_sort(g, p[0], 1, false), p[1]);
}
static nx_node b_topk(nx_graph *g, const nx_node *p)
{
    nx_node v = NX_NONE;
    nx_topk(g, p[0], 3, 0, true, &v, NULL);
    return nx_mul(g, v, v);
}

/* ---- contractions and compositions ---------------------------------------------------------*/
static nx_node b_matmul(nx_graph *g, const nx_node *p)
{
    return nx_matmul(g, p[0], p[1]);
}
static nx_node b_maxplus(nx_graph *g, const nx_node *p)
{
    return nx_einsum(g, "ik,kj->ij", p[0], p[1], NX_MONOID_MAX, nx_add);
}
static nx_node b_lse_contraction(nx_graph *g, const nx_node *p)
{
    return nx_einsum(g, "ik,kj->ij", p[0], p[1], NX_MONOID_LOGSUMEXP, nx_add);
}
static nx_node softplus_sum(nx_graph *g, nx_node x)
{
    return nx_reduce(g, nx_log1p(g, nx_exp(g, x)), 1, AX(0), NX_MONOID_SUM, false);
}
static nx_node grad_of(nx_graph *g, nx_node f, nx_node wrt)
{
    nx_node d = NX_NONE;
    if (nx_graph_grad(g, f, 1, &wrt, &d) != NX_OK)
        fail_msg("nx_graph_grad: %s", nx_ctx_last_error(nx_graph_ctx(g)));
    return d;
}
static nx_node b_softplus2(nx_graph *g, const nx_node *p)
{
    return grad_of(g, softplus_sum(g, p[0]), p[0]);
}
static nx_node b_lse2nd(nx_graph *g, const nx_node *p)
{
    nx_node l = nx_reduce(g, p[0], 2, AX(0, 1), NX_MONOID_LOGSUMEXP, false);
    return grad_of(g, l, p[0]);
}
/* K_i = sum_j exp(-||x_i - y_j||^2) b_j, with x [3,2], y [4,2], b [4]. */
static nx_node gauss(nx_graph *g, const nx_node *p)
{
    nx_node x = nx_reshape(g, p[0], 3, I64(3, 1, 2)), y = nx_reshape(g, p[1], 3, I64(1, 4, 2));
    nx_node d = nx_sub(g, x, y);
    nx_node sq = nx_reduce(g, nx_mul(g, d, d), 1, AX(2), NX_MONOID_SUM, false);
    return nx_reduce(g, nx_mul(g, nx_exp(g, nx_neg(g, sq)), p[2]), 1, AX(1), NX_MONOID_SUM,
                     false);
}
static nx_node b_gauss(nx_graph *g, const nx_node *p)
{
    return gauss(g, p);
}
static nx_node b_gauss2(nx_graph *g, const nx_node *p)
{
    nx_node k = nx_reduce(g, nx_sin(g, gauss(g, p)), 1, AX(0), NX_MONOID_SUM, false);
    nx_node d[3];
    if (nx_graph_grad(g, k, 3, p, d) != NX_OK)
        fail_msg("nx_graph_grad: %s", nx_ctx_last_error(nx_graph_ctx(g)));
    nx_node dx = nx_reshape(g, d[0], 1, I64(6)), dy = nx_reshape(g, d[1], 1, I64(8));
    nx_node parts[3] = {dx, dy, d[2]};
    return nx_concat(g, 3, parts, 0);
}
static nx_node b_maxplus2(nx_graph *g, const nx_node *p)
{
    nx_node c = nx_einsum(g, "ik,kj->ij", p[0], p[1], NX_MONOID_LOGSUMEXP, nx_add);
    nx_node s = nx_reduce(g, nx_mul(g, c, c), 2, AX(0, 1), NX_MONOID_SUM, false);
    return grad_of(g, s, p[0]);
}

#define C1(name, b, nd, sh, lo, hi) {name, 1, {nd}, {sh}, lo, hi, b, false}
#define C2(name, b, nd0, sh0, nd1, sh1, lo, hi) {name, 2, {nd0, nd1}, {sh0, sh1}, lo, hi, b, false}
#define S(...) {__VA_ARGS__}

static const ck_case cases[] = {
    C1("neg", b_neg, 2, S(2, 3), -2, 2),
    C1("abs", b_abs, 2, S(2, 3), -2, 2),
    C1("exp", b_exp, 2, S(2, 3), -2, 2),
    C1("log", b_log, 2, S(2, 3), 0.3, 3),
    C1("log1p", b_log1p, 2, S(2, 3), -0.5, 3),
    C1("expm1", b_expm1, 2, S(2, 3), -2, 2),
    C1("sqrt", b_sqrt, 2, S(2, 3), 0.3, 3),
    C1("rsqrt", b_rsqrt, 2, S(2, 3), 0.3, 3),
    C1("sin", b_sin, 2, S(2, 3), -3, 3),
    C1("cos", b_cos, 2, S(2, 3), -3, 3),
    C1("tanh", b_tanh, 2, S(2, 3), -2, 2),
    C1("erf", b_erf, 2, S(2, 3), -2, 2),
    C1("floor (flagged: zero)", b_floor, 2, S(2, 3), -3, 3),
    C1("ceil (flagged: zero)", b_ceil, 2, S(2, 3), -3, 3),
    C1("round (flagged: zero)", b_round, 2, S(2, 3), -3, 3),
    C1("sign (flagged: zero)", b_sign, 2, S(2, 3), -3, 3),
    C2("add broadcast", b_add, 2, S(3, 4), 1, S(4), -2, 2),
    C2("sub broadcast", b_sub, 2, S(3, 1), 2, S(1, 4), -2, 2),
    C2("mul broadcast", b_mul, 3, S(2, 1, 3), 2, S(4, 1), -2, 2),
    C2("div", b_div, 2, S(3, 4), 2, S(3, 4), -1, 1),
    C2("pow", b_pow, 2, S(3, 4), 1, S(4), -1, 1),
    C2("minimum", b_minimum, 2, S(3, 4), 2, S(3, 4), -2, 2),
    C2("maximum broadcast", b_maximum, 2, S(3, 4), 0, S(0), -2, 2),
    C2("atan2", b_atan2, 2, S(3, 4), 2, S(3, 4), -2, 2),
    C2("mod", b_mod, 2, S(3, 4), 2, S(3, 4), -5, 5),
    C2("select", b_select, 2, S(3, 4), 1, S(4), -2, 2),
    {"cast f64 -> f32 -> f64", 1, {2}, {S(3, 4)}, -3, 3, b_cast, true},
    C2("comparison and integer cast (flagged: zero)", b_cmp, 2, S(3, 4), 2, S(3, 4), -3, 3),
    C1("reshape", b_reshape, 2, S(3, 4), -2, 2),
    C2("permute", b_permute, 3, S(2, 3, 4), 3, S(4, 2, 3), -2, 2),
    C1("broadcast", b_broadcast, 2, S(4, 1), -1, 1),
    C1("slice step 2", b_slice, 2, S(8, 5), -1, 1),
    C1("slice steps 3, 2", b_slice2, 2, S(6, 6), -1, 1),
    C1("pad constant", b_pad_CONSTANT, 2, S(3, 2), -2, 2),
    C1("pad reflect", b_pad_REFLECT, 2, S(3, 2), -2, 2),
    C1("pad mirror", b_pad_MIRROR, 2, S(3, 2), -2, 2),
    C1("pad nearest", b_pad_NEAREST, 2, S(3, 2), -2, 2),
    C1("pad wrap", b_pad_WRAP, 2, S(3, 2), -2, 2),
    C2("reverse", b_reverse, 2, S(3, 4), 2, S(3, 4), -2, 2),
    C2("concat", b_concat, 2, S(2, 3), 2, S(2, 2), -1, 1),
    C1("window strided dilated", b_window, 2, S(7, 6), -2, 2),
    C1("gather", b_gather, 2, S(3, 5), -2, 2),
    C2("scatter sum", b_scatter_sum, 2, S(3, 5), 2, S(3, 6), -2, 2),
    C2("scatter max", b_scatter_max, 2, S(3, 5), 2, S(3, 6), -2, 2),
    C2("scatter min", b_scatter_min, 2, S(3, 5), 2, S(3, 6), -2, 2),
    C1("reduce sum", b_red_sum, 2, S(3, 4), -2, 2),
    C1("reduce sum 2 axes keepdims", b_red_sum2, 3, S(3, 2, 4), -2, 2),
    C1("reduce prod", b_red_prod, 2, S(3, 4), -2, 2),
    C1("reduce prod 2 axes", b_red_prod2, 3, S(3, 2, 4), -2, 2),
    C1("reduce prod through zeros", b_prod_zero, 2, S(3, 4), -2, 2),
    C1("reduce max", b_red_max, 2, S(3, 4), -2, 2),
    C1("reduce max 2 axes keepdims", b_red_max2, 3, S(3, 2, 4), -2, 2),
    C1("reduce min", b_red_min, 2, S(3, 4), -2, 2),
    C1("reduce min 2 axes", b_red_min2, 3, S(3, 2, 4), -2, 2),
    C1("reduce logsumexp", b_red_lse, 2, S(3, 4), -2, 2),
    C1("reduce logsumexp 2 axes keepdims", b_red_lse2, 3, S(3, 2, 4), -2, 2),
    C1("reduce over no axes", b_red_none, 2, S(3, 4), -2, 2),
    C1("reduce_custom max in disguise", b_custom_sum, 2, S(3, 4), -2, 2),
    C1("scan sum", b_scan_sum, 2, S(3, 5), -2, 2),
    C1("scan sum reverse", b_scan_sum_r, 2, S(3, 5), -2, 2),
    C1("scan prod", b_scan_prod, 2, S(3, 5), -2, 2),
    C1("scan prod reverse", b_scan_prod_r, 2, S(3, 5), -2, 2),
    C1("scan max", b_scan_max, 2, S(3, 5), -2, 2),
    C1("scan max reverse", b_scan_max_r, 2, S(3, 5), -2, 2),
    C1("scan min", b_scan_min, 2, S(3, 5), -2, 2),
    C1("scan min reverse", b_scan_min_r, 2, S(3, 5), -2, 2),
    C1("scan logsumexp", b_scan_lse, 2, S(3, 5), -2, 2),
    C1("scan logsumexp reverse", b_scan_lse_r, 2, S(3, 5), -2, 2),
    C2("scan_linear broadcast a", b_scan_linear, 2, S(1, 5), 2, S(3, 5), -1, 1),
    C2("scan_linear reverse", b_scan_linear_r, 2, S(5, 3), 2, S(5, 1), -1, 1),
    C2("scan_iir order 3", b_scan_iir, 2, S(3, 6), 2, S(3, 6), -1, 1),
    C1("scan_iir order 4 reverse", b_scan_iir_r, 2, S(6, 2), -1, 1),
    C2("sort", b_sort, 2, S(3, 5), 2, S(3, 5), -2, 2),
    C1("top-k", b_topk, 2, S(6, 2), -2, 2),
    C2("matmul", b_matmul, 2, S(3, 4), 2, S(4, 2), -1, 1),
    C2("max-plus contraction", b_maxplus, 2, S(3, 4), 2, S(4, 2), -1, 1),
    C2("log-sum-exp contraction", b_lse_contraction, 2, S(3, 4), 2, S(4, 2), -1, 1),
    {"gaussian kernel sum", 3, {2, 2, 1}, {S(3, 2), S(4, 2), S(4)}, -1, 1, b_gauss, false},
    C1("second order: softplus", b_softplus2, 1, S(5), -2, 2),
    C1("second order: logsumexp", b_lse2nd, 2, S(2, 3), -2, 2),
    {"second order: gaussian kernel sum", 3, {2, 2, 1}, {S(3, 2), S(4, 2), S(4)}, -1, 1,
     b_gauss2, false},
    C2("second order: log-sum-exp contraction", b_maxplus2, 2, S(3, 4), 2, S(4, 2), -1, 1),
};

static void test_fd_all(void **state)
{
    (void)state;
    int failed = 0, n = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < n; i++) {
        double err = ck_check(&cases[i], NX_BACKEND_REF);
        failed += !(err <= 1e-6);
    }
    print_message("%d of %d finite-difference cases within 1e-6 (scale-free)\n", n - failed, n);
    assert_int_equal(failed, 0);
}

/* ---- random shapes: broadcasting binaries and reductions over random axes --------------------*/

static int rnd_op, rnd_monoid, rnd_naxes, rnd_axes[4];
static bool rnd_keep;

static nx_node b_rnd_binary(nx_graph *g, const nx_node *p)
{
    static nx_node (*const ops[])(nx_graph *, nx_node, nx_node) = {
        nx_add, nx_sub, nx_mul, nx_maximum, nx_minimum, nx_atan2};
    nx_node y = ops[rnd_op](g, p[0], p[1]);
    return nx_mul(g, y, nx_sin(g, y));
}

static nx_node b_rnd_reduce(nx_graph *g, const nx_node *p)
{
    nx_node r = nx_reduce(g, nx_sin(g, p[0]), rnd_naxes, rnd_axes, (nx_monoid)rnd_monoid, rnd_keep);
    return nx_mul(g, r, r);
}

static int rnd_int(int lo, int hi)
{
    return lo + (int)ck_uniform(0, hi - lo + 1 - 1e-9);
}

static void test_fd_random_shapes(void **state)
{
    (void)state;
    int failed = 0, n = 60;
    for (int it = 0; it < n; it++) {
        ck_case c = {"random broadcast binary", 2, {0}, {{0}}, -2, 2, b_rnd_binary, false};
        int nd = rnd_int(1, 3);
        for (int i = 0; i < 2; i++) {
            c.ndim[i] = nd - (i == 1 ? rnd_int(0, nd - 1) : 0);
        }
        for (int d = 0; d < nd; d++) {
            int64_t e = rnd_int(1, 4);
            c.shape[0][d] = ck_uniform(0, 1) < 0.3 ? 1 : e;
            int d1 = d - (nd - c.ndim[1]);
            if (d1 >= 0)
                c.shape[1][d1] = c.shape[0][d] == 1 || ck_uniform(0, 1) < 0.3 ? 1 : e;
        }
        rnd_op = rnd_int(0, 5);
        failed += !(ck_check(&c, NX_BACKEND_REF) <= 1e-6);

        ck_case r = {"random reduce", 1, {0}, {{0}}, -2, 2, b_rnd_reduce, false};
        r.ndim[0] = rnd_int(1, 4);
        for (int d = 0; d < r.ndim[0]; d++)
            r.shape[0][d] = rnd_int(1, 3);
        rnd_naxes = 0;
        for (int d = 0; d < r.ndim[0]; d++) {
            if (ck_uniform(0, 1) < 0.5)
                rnd_axes[rnd_naxes++] = ck_uniform(0, 1) < 0.5 ? d : d - r.ndim[0];
        }
        rnd_monoid = rnd_int(0, 4);
        rnd_keep = ck_uniform(0, 1) < 0.5;
        failed += !(ck_check(&r, NX_BACKEND_REF) <= 1e-6);
    }
    print_message("%d of %d random-shape cases within 1e-6 (scale-free)\n", 2 * n - failed,
                  2 * n);
    assert_int_equal(failed, 0);
}

/* The same cases on the CPU backend, in strict mode (no fallback): each case either runs there
 * and matches finite differences, or is refused at compile time (counted, not hidden). */
static void test_fd_cpu(void **state)
{
    (void)state;
    setenv("NITRIX_STRICT_BACKEND", "1", 1);
    ck_lenient = true;
    int failed = 0, refused = 0, n = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < n; i++) {
        double err = ck_check(&cases[i], NX_BACKEND_CPU);
        refused += isnan(err);
        failed += !isnan(err) && !(err <= 1e-6);
    }
    ck_lenient = false;
    unsetenv("NITRIX_STRICT_BACKEND");
    print_message("cpu backend: %d cases within 1e-6, %d failed, %d refused by the backend\n",
                  n - failed - refused, failed, refused);
    assert_int_equal(failed, 0);
    /* 2 of 80 are refused: a loop kernel the JIT hands to its kernel interpreter, and a
     * reduce_custom, whose reference routine the CPU backend runs (the placement policy's
     * fallback, which strict mode forbids). More refusals are a regression of the CPU backend. */
    assert_true(refused <= 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fd_all),
        cmocka_unit_test(test_fd_random_shapes),
        cmocka_unit_test(test_fd_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
