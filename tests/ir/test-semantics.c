/* Hand-computed values for the interpreter's trickier semantics: logsumexp with infinities, NaN
 * through max/min and argmax, ties, NaN-last stable sort, every pad mode with pads wider than the
 * axis, gather clamping and scatter dropping, custom monoids, scans, f32 accumulation order,
 * integer division and wrap-around, casts, windows and the composed conveniences. The broad
 * per-primitive comparisons against NumPy fixtures live in tests/ir-values. Expected values are
 * worked out by hand or are NumPy's printed answers, noted where used. */
#include <float.h>
#include <stdlib.h>

#include "helpers.h"

static nx_test_alloc ta;
static nx_ctx *ctx;
static nx_graph *g;

static int setup(void **state)
{
    (void)state;
    memset(&ta, 0, sizeof ta);
    ctx = nx_test_ctx(&ta);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    nx_graph_free(g);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
    return 0;
}

/* Runs out over one input x of the given dtype/shape/data. */
static nx_tensor *eval1(nx_node out, nx_dtype dt, int ndim, const int64_t *shape, void *data)
{
    nx_tensor *t = wrap(ctx, dt, ndim, shape, data);
    nx_tensor *r = run1(g, out, 1, &t);
    nx_tensor_free(t);
    return r;
}

/* Runs out over inputs a and b. */
static nx_tensor *eval2(nx_node out, nx_tensor *a, nx_tensor *b)
{
    nx_tensor *ins[2] = {a, b};
    nx_tensor *r = run1(g, out, 2, ins);
    nx_tensor_free(a);
    nx_tensor_free(b);
    return r;
}

/* scan_linear on 3-D lines along axis 0 and 1, forward and reverse, with a broadcast three ways:
 * full, over the whole inner block (a [4, 1, 1]) and over one inner axis only (a [4, 1, 3], which
 * no plane walk covers), against a direct loop over each line. */
static void scan_linear_case(const int64_t *ashape, int axis, bool rev)
{
    int64_t ys[3] = {4, 2, 3}, na = ashape[0] * ashape[1] * ashape[2];
    double av[24], bv[24], want[24];
    for (int i = 0; i < 24; i++) {
        av[i] = 0.5 + 0.125 * (double)((i * 7) % 5) - (i % 3 == 0 ? 1.0 : 0.0);
        bv[i] = (double)((i * 5) % 11) - 4.0;
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 3; k++)
                want[(i * 2 + j) * 3 + k] = 0.0;
    int len = (int)ys[axis];
    for (int o = 0; o < 24; o++) { /* each line starts at the element whose axis index is 0 */
        int idx[3] = {o / 6, (o / 3) % 2, o % 3};
        if (idx[axis] != 0)
            continue;
        double y = 0.0;
        for (int step = 0; step < len; step++) {
            idx[axis] = rev ? len - 1 - step : step;
            int e = (idx[0] * 2 + idx[1]) * 3 + idx[2];
            int ea = (int)((idx[0] % ashape[0]) * ashape[1] * ashape[2] +
                           (idx[1] % ashape[1]) * ashape[2] + idx[2] % ashape[2]);
            y = av[ea] * y + bv[e];
            want[e] = y;
        }
    }
    nx_graph *lg = NULL; /* a graph per case: a program's inputs are all of its graph's */
    assert_int_equal(nx_graph_new(ctx, &lg), NX_OK);
    nx_node a = nx_input(lg, "a", NX_DTYPE_F64, 3, ashape);
    nx_node b = nx_input(lg, "b", NX_DTYPE_F64, 3, ys);
    nx_tensor *ins[2] = {wrap(ctx, NX_DTYPE_F64, 3, ashape, av), wrap(ctx, NX_DTYPE_F64, 3, ys, bv)};
    nx_tensor *r = run1(lg, nx_scan_linear(lg, a, b, axis, rev), 2, ins);
    nx_tensor_free(ins[0]);
    nx_tensor_free(ins[1]);
    nx_graph_free(lg);
    assert_non_null(r);
    assert_true(na <= 24);
    const double *got = nx_tensor_data(r);
    for (int i = 0; i < 24; i++)
        assert_true(got[i] == want[i]);
    nx_tensor_free(r);
}

static void test_scan_linear_broadcasts(void **state)
{
    (void)state;
    const int64_t full[3] = {4, 2, 3}, block[3] = {4, 1, 1}, partial[3] = {4, 1, 3};
    for (int rev = 0; rev < 2; rev++) {
        scan_linear_case(full, 0, rev);
        scan_linear_case(block, 0, rev);
        scan_linear_case(partial, 0, rev);
        scan_linear_case(full, 1, rev);
        scan_linear_case(partial, 1, rev);
    }
}

/* ---- reductions ----------------------------------------------------------------------------*/

static void lse_rows(nx_dtype dt, double rtol)
{
    nx_graph_free(g);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    const double I = INFINITY;
    double xd[8][3] = {{-I, -I, -I}, {-I, 0, -I}, {I, 1, 2},        {I, I, 0},
                       {NAN, 0, 1},  {0, 0, 0},   {1000, 1000, -I}, {-I, I, -I}};
    float xf[8][3];
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 3; j++)
            xf[i][j] = (float)xd[i][j];
    int64_t shape[2] = {8, 3};
    nx_node x = nx_input(g, "x", dt, 2, shape);
    int ax = 1;
    nx_node y = nx_reduce(g, x, 1, &ax, NX_MONOID_LOGSUMEXP, false);
    nx_tensor *r = eval1(y, dt, 2, shape, dt == NX_DTYPE_F32 ? (void *)xf : (void *)xd);
    double want[8] = {-I, 0, I, I, NAN, log(3.0), 1000 + log(2.0), I};
    expect_close(r, 8, want, rtol, "logsumexp rows");
}

static void test_logsumexp_infinities(void **state)
{
    (void)state;
    lse_rows(NX_DTYPE_F64, 1e-15);
    lse_rows(NX_DTYPE_F32, 1e-6);
}

static void test_max_min_nan_and_empty(void **state)
{
    (void)state;
    double xd[3][3] = {{1, NAN, 3}, {-INFINITY, -INFINITY, -INFINITY}, {2, -7, 5}};
    int64_t s33[2] = {3, 3};
    nx_node x = nx_input(g, "x", NX_DTYPE_F64, 2, s33);
    int ax = 1;
    nx_node mx = nx_reduce(g, x, 1, &ax, NX_MONOID_MAX, false);
    nx_node mn = nx_reduce(g, x, 1, &ax, NX_MONOID_MIN, false);
    double wmax[3] = {NAN, -INFINITY, 5}, wmin[3] = {NAN, -INFINITY, -7};
    expect_values(eval1(mx, NX_DTYPE_F64, 2, s33, xd), 3, wmax, "max with NaN");
    expect_values(eval1(mn, NX_DTYPE_F64, 2, s33, xd), 3, wmin, "min with NaN");
    nx_node pair = nx_maximum(g, x, nx_scalar(g, NX_DTYPE_F64, 2));
    double wpair[9] = {2, NAN, 3, 2, 2, 2, 2, 2, 5};
    expect_values(eval1(pair, NX_DTYPE_F64, 2, s33, xd), 9, wpair, "maximum(x, 2)");

    /* folds over an empty axis give the identity */
    int64_t s20[2] = {2, 0};
    nx_node e = nx_input(g, "e", NX_DTYPE_F32, 2, s20);
    nx_node ei = nx_cast(g, e, NX_DTYPE_I32);
    nx_node outs[5] = {nx_reduce(g, e, 1, &ax, NX_MONOID_SUM, false),
                       nx_reduce(g, e, 1, &ax, NX_MONOID_PROD, false),
                       nx_reduce(g, e, 1, &ax, NX_MONOID_MAX, false),
                       nx_reduce(g, e, 1, &ax, NX_MONOID_MIN, false),
                       nx_reduce(g, ei, 1, &ax, NX_MONOID_MAX, false)};
    nx_tensor *ins[2] = {wrap(ctx, NX_DTYPE_F64, 2, s33, xd),
                         wrap(ctx, NX_DTYPE_F32, 2, s20, NULL)};
    nx_tensor *res[5];
    run_graph(g, 5, outs, 2, ins, res);
    double w0[2] = {0, 0}, w1[2] = {1, 1}, w2[2] = {-INFINITY, -INFINITY},
           w3[2] = {INFINITY, INFINITY}, w4[2] = {INT32_MIN, INT32_MIN};
    expect_values(res[0], 2, w0, "empty sum");
    expect_values(res[1], 2, w1, "empty prod");
    expect_values(res[2], 2, w2, "empty max");
    expect_values(res[3], 2, w3, "empty min");
    expect_values(res[4], 2, w4, "empty i32 max");
    nx_tensor_free(ins[0]);
    nx_tensor_free(ins[1]);
}

static void test_argmax_ties_and_nan(void **state)
{
    (void)state;
    /* numpy.argmax / argmin of these rows: [1 0 0 2 1] / [0 0 0 0 1] */
    double xd[5][4] = {{1, 3, 3, 2},
                       {NAN, 5, NAN, 1},
                       {2, 2, 2, 2},
                       {-INFINITY, -INFINITY, -1, -INFINITY},
                       {5, NAN, 7, 1}};
    int64_t s[2] = {5, 4};
    nx_node x = nx_input(g, "x", NX_DTYPE_F64, 2, s);
    int ax = -1;
    nx_node am = nx_reduce(g, x, 1, &ax, NX_MONOID_ARGMAX, false);
    nx_node an = nx_reduce(g, x, 1, &ax, NX_MONOID_ARGMIN, true);
    assert_int_equal(nx_node_dtype(g, am), NX_DTYPE_I64);
    double wmax[5] = {1, 0, 0, 2, 1}, wmin[5] = {0, 0, 0, 0, 1};
    expect_values(eval1(am, NX_DTYPE_F64, 2, s, xd), 5, wmax, "argmax");
    nx_tensor *r = eval1(an, NX_DTYPE_F64, 2, s, xd);
    expect_shape(r, 2, (int64_t[]){5, 1});
    expect_values(r, 5, wmin, "argmin");
    /* along axis 0, and over integers */
    int32_t xi[3][2] = {{4, -1}, {9, 7}, {9, 7}};
    int64_t s32[2] = {3, 2};
    nx_node xn = nx_input(g, "xi", NX_DTYPE_I32, 2, s32);
    int a0 = 0;
    double wi[2] = {1, 1};
    nx_tensor *t = wrap(ctx, NX_DTYPE_I32, 2, s32, xi);
    nx_tensor *d = wrap(ctx, NX_DTYPE_F64, 2, s, xd);
    expect_values(eval2(nx_reduce(g, xn, 1, &a0, NX_MONOID_ARGMAX, false), d, t), 2, wi,
                  "i32 argmax axis 0");
}

static void test_f32_accumulates_in_f32(void **state)
{
    (void)state;
    /* 2^24 + 1 rounds back to 2^24 in f32 at every step of the canonical sequential fold; a
     * double accumulator would give 2^24 + 4. */
    float xf[5] = {16777216.0f, 1, 1, 1, 1};
    double xd[5] = {16777216.0, 1, 1, 1, 1};
    int64_t s[1] = {5};
    int ax = 0;
    nx_node x = nx_input(g, "x", NX_DTYPE_F32, 1, s);
    double w32[1] = {16777216.0}, w64[1] = {16777220.0};
    expect_values(eval1(nx_reduce(g, x, 1, &ax, NX_MONOID_SUM, false), NX_DTYPE_F32, 1, s, xf), 1,
                  w32, "f32 sum");
    nx_graph_free(g);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    x = nx_input(g, "x", NX_DTYPE_F64, 1, s);
    expect_values(eval1(nx_reduce(g, x, 1, &ax, NX_MONOID_SUM, false), NX_DTYPE_F64, 1, s, xd), 1,
                  w64, "f64 sum");
    /* the order is ascending: 1 + 1 + 1 + 1 + 2^24 = 2^24 + 4 exactly in f32 */
    float rf[5] = {1, 1, 1, 1, 16777216.0f};
    nx_graph_free(g);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    x = nx_input(g, "x", NX_DTYPE_F32, 1, s);
    expect_values(eval1(nx_reduce(g, x, 1, &ax, NX_MONOID_SUM, false), NX_DTYPE_F32, 1, s, rf), 1,
                  w64, "f32 sum, small first");
}

static void test_multi_axis_reduce_order(void **state)
{
    (void)state;
    /* sum over axes (0, 2) of x[i,j,k] = 100 i + 10 j + k, shape [2,3,2] */
    double xd[12];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 2; k++)
                xd[i * 6 + j * 2 + k] = 100 * i + 10 * j + k;
    int64_t s[3] = {2, 3, 2};
    nx_node x = nx_input(g, "x", NX_DTYPE_F64, 3, s);
    nx_node y = nx_reduce(g, x, 2, (int[]){2, 0}, NX_MONOID_SUM, true);
    nx_tensor *r = eval1(y, NX_DTYPE_F64, 3, s, xd);
    expect_shape(r, 3, (int64_t[]){1, 3, 1});
    double want[3] = {0 + 1 + 100 + 101, 10 + 11 + 110 + 111, 20 + 21 + 120 + 121};
    expect_values(r, 3, want, "sum over axes 0 and 2");
}

/* ---- sorting -------------------------------------------------------------------------------*/

static void test_sort_nan_stable(void **state)
{
    (void)state;
    double xd[7] = {3, NAN, 1, 3, -INFINITY, NAN, 1};
    int64_t s[1] = {7};
    nx_node x = nx_input(g, "x", NX_DTYPE_F64, 1, s);
    nx_node v3 = NX_NONE, i3 = NX_NONE, v2 = NX_NONE, i2 = NX_NONE;
    nx_topk(g, x, 3, 0, true, &v3, &i3);
    nx_topk(g, x, 2, 0, false, &v2, &i2);
    nx_node outs[8] = {nx_sort(g, x, 0, false),
                       nx_argsort(g, x, 0, false),
                       nx_sort(g, x, 0, true),
                       nx_argsort(g, x, 0, true),
                       v3,
                       i3,
                       v2,
                       i2};
    nx_tensor *in = wrap(ctx, NX_DTYPE_F64, 1, s, xd), *res[8];
    run_graph(g, 8, outs, 1, &in, res);
    nx_tensor_free(in);
    const double N = NAN, I = INFINITY;
    double w0[7] = {-I, 1, 1, 3, 3, N, N}, w1[7] = {4, 2, 6, 0, 3, 1, 5}; /* numpy stable */
    double w2[7] = {N, N, 3, 3, 1, 1, -I}, w3[7] = {1, 5, 0, 3, 2, 6, 4};
    double w4[3] = {N, N, 3}, w5[3] = {1, 5, 0}, w6[2] = {-I, 1}, w7[2] = {4, 2};
    expect_values(res[0], 7, w0, "sort ascending");
    expect_values(res[1], 7, w1, "argsort ascending");
    expect_values(res[2], 7, w2, "sort descending");
    expect_values(res[3], 7, w3, "argsort descending");
    expect_values(res[4], 3, w4, "top 3 values");
    expect_values(res[5], 3, w5, "top 3 indices");
    expect_values(res[6], 2, w6, "bottom 2 values");
    expect_values(res[7], 2, w7, "bottom 2 indices");
}

static void test_sort_axis0_ints(void **state)
{
    (void)state;
    int32_t xd[3][2] = {{5, -1}, {2, -1}, {9, -3}};
    int64_t s[2] = {3, 2};
    nx_node x = nx_input(g, "x", NX_DTYPE_I32, 2, s);
    double w[6] = {2, -3, 5, -1, 9, -1}, wi[6] = {1, 2, 0, 0, 2, 1};
    expect_values(eval1(nx_sort(g, x, 0, false), NX_DTYPE_I32, 2, s, xd), 6, w, "i32 sort");
    expect_values(eval1(nx_argsort(g, x, 0, false), NX_DTYPE_I32, 2, s, xd), 6, wi, "i32 argsort");
}

/* ---- padding -------------------------------------------------------------------------------*/

static void pad1(nx_pad_mode mode, double cval, const double *want, const char *what)
{
    double xd[3] = {1, 2, 3};
    int64_t s[1] = {3};
    nx_graph_free(g);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node x = nx_input(g, "x", NX_DTYPE_F64, 1, s);
    nx_node y = nx_pad(g, x, (int64_t[]){7}, (int64_t[]){7}, mode, cval);
    expect_values(eval1(y, NX_DTYPE_F64, 1, s, xd), 17, want, what);
}

static void test_pad_modes_wide(void **state)
{
    (void)state;
    /* numpy.pad([1,2,3], 7, mode) for symmetric, reflect and wrap; scipy's names differ */
    const double reflect[17] = {1, 1, 2, 3, 3, 2, 1, 1, 2, 3, 3, 2, 1, 1, 2, 3, 3};
    const double mirror[17] = {2, 3, 2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2};
    const double wrapv[17] = {3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1};
    const double nearest[17] = {1, 1, 1, 1, 1, 1, 1, 1, 2, 3, 3, 3, 3, 3, 3, 3, 3};
    const double constant[17] = {9, 9, 9, 9, 9, 9, 9, 1, 2, 3, 9, 9, 9, 9, 9, 9, 9};
    pad1(NX_PAD_REFLECT, 0, reflect, "reflect (numpy symmetric)");
    pad1(NX_PAD_MIRROR, 0, mirror, "mirror (numpy reflect)");
    pad1(NX_PAD_WRAP, 0, wrapv, "wrap");
    pad1(NX_PAD_NEAREST, 0, nearest, "nearest (numpy edge)");
    pad1(NX_PAD_CONSTANT, 9, constant, "constant");

    /* one element: every mode but constant repeats it */
    nx_graph_free(g);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    double one[1] = {5};
    int64_t s1[1] = {1};
    nx_node x = nx_input(g, "one", NX_DTYPE_F64, 1, s1);
    double fives[5] = {5, 5, 5, 5, 5};
    for (int m = 0; m < NX_PAD_MODE_COUNT; m++) {
        if (m == NX_PAD_CONSTANT)
            continue; /* every mode but constant repeats the one element */
        nx_node y = nx_pad(g, x, (int64_t[]){2}, (int64_t[]){2}, (nx_pad_mode)m, 0);
        expect_values(eval1(y, NX_DTYPE_F64, 1, s1, one), 5, fives, "pad of one element");
    }
}

static void test_pad_2d_per_axis(void **state)
{
    (void)state;
    int32_t xd[2][3] = {{1, 2, 3}, {4, 5, 6}};
    int64_t s[2] = {2, 3};
    nx_node x = nx_input(g, "x", NX_DTYPE_I32, 2, s);
    /* numpy.pad(x, ((1, 1), (4, 0)), 'reflect') */
    nx_node y = nx_pad(g, x, (int64_t[]){1, 4}, (int64_t[]){1, 0}, NX_PAD_MIRROR, 0);
    double want[28] = {4, 5, 6, 5, 4, 5, 6, 1, 2, 3, 2, 1, 2, 3,
                       4, 5, 6, 5, 4, 5, 6, 1, 2, 3, 2, 1, 2, 3};
    nx_tensor *r = eval1(y, NX_DTYPE_I32, 2, s, xd);
    expect_shape(r, 2, (int64_t[]){4, 7});
    expect_values(r, 28, want, "2-d mirror pad");
    /* constant cval converts to the dtype */
    nx_node c = nx_pad(g, x, (int64_t[]){0, 1}, (int64_t[]){0, 0}, NX_PAD_CONSTANT, -2.7);
    double wc[8] = {-2, 1, 2, 3, -2, 4, 5, 6};
    expect_values(eval1(c, NX_DTYPE_I32, 2, s, xd), 8, wc, "i32 constant pad");
}

/* ---- indexing ------------------------------------------------------------------------------*/

static void test_gather_clamps_scatter_drops(void **state)
{
    (void)state;
    double xd[2][3] = {{10, 11, 12}, {20, 21, 22}};
    int64_t s[2] = {2, 3};
    int64_t idx[4] = {2, -5, 7, 0};
    nx_node x = nx_input(g, "x", NX_DTYPE_F64, 2, s);
    nx_node ix = nx_input(g, "idx", NX_DTYPE_I64, 1, (int64_t[]){4});
    nx_node y = nx_gather(g, x, ix, 1);
    double want[8] = {12, 10, 12, 10, 22, 20, 22, 20};
    expect_values(eval2(y, wrap(ctx, NX_DTYPE_F64, 2, s, xd),
                        wrap(ctx, NX_DTYPE_I64, 1, (int64_t[]){4}, idx)),
                  8, want, "gather with clamping");

    nx_graph_free(g);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    int32_t sidx[4] = {1, 5, 1, -1};
    double upd[2][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}};
    nx_node z = nx_scalar(g, NX_DTYPE_F64, 0);
    nx_node base = nx_broadcast(g, z, 2, s);
    nx_node si = nx_input(g, "idx", NX_DTYPE_I32, 1, (int64_t[]){4});
    nx_node u = nx_input(g, "u", NX_DTYPE_F64, 2, (int64_t[]){2, 4});
    nx_node sc = nx_scatter(g, base, si, u, 1, NX_MONOID_SUM);
    double ws[6] = {0, 4, 0, 0, 12, 0};
    expect_values(eval2(sc, wrap(ctx, NX_DTYPE_I32, 1, (int64_t[]){4}, sidx),
                        wrap(ctx, NX_DTYPE_F64, 2, (int64_t[]){2, 4}, upd)),
                  6, ws, "scatter-add dropping out-of-range");

    nx_graph_free(g);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    double v[3] = {5, NAN, -1};
    int64_t mi[3] = {0, 0, 2};
    nx_node b3 = nx_broadcast(g, nx_scalar(g, NX_DTYPE_F64, 0), 1, (int64_t[]){3});
    nx_node mix = nx_input(g, "idx", NX_DTYPE_I64, 1, (int64_t[]){3});
    nx_node mu = nx_input(g, "u", NX_DTYPE_F64, 1, (int64_t[]){3});
    double wm[3] = {NAN, 0, 0}, wn[3] = {NAN, 0, -1};
    expect_values(eval2(nx_scatter(g, b3, mix, mu, 0, NX_MONOID_MAX),
                        wrap(ctx, NX_DTYPE_I64, 1, (int64_t[]){3}, mi),
                        wrap(ctx, NX_DTYPE_F64, 1, (int64_t[]){3}, v)),
                  3, wm, "scatter-max with NaN");
    expect_values(eval2(nx_scatter(g, b3, mix, mu, 0, NX_MONOID_MIN),
                        wrap(ctx, NX_DTYPE_I64, 1, (int64_t[]){3}, mi),
                        wrap(ctx, NX_DTYPE_F64, 1, (int64_t[]){3}, v)),
                  3, wn, "scatter-min with NaN");

    /* scattering into an empty axis drops every update: out = x */
    nx_graph_free(g);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    double e3[1] = {0};
    int64_t ei[2] = {0, 5};
    double eu[2][2] = {{1, 2}, {3, 4}};
    nx_node ex = nx_input(g, "x", NX_DTYPE_F64, 2, (int64_t[]){2, 0});
    nx_node eix = nx_input(g, "idx", NX_DTYPE_I64, 1, (int64_t[]){2});
    nx_node eup = nx_input(g, "u", NX_DTYPE_F64, 2, (int64_t[]){2, 2});
    nx_node es = nx_scatter(g, ex, eix, eup, 1, NX_MONOID_SUM);
    assert_int_not_equal(es, NX_NONE);
    nx_tensor *eins[3] = {wrap(ctx, NX_DTYPE_F64, 2, (int64_t[]){2, 0}, e3),
                          wrap(ctx, NX_DTYPE_I64, 1, (int64_t[]){2}, ei),
                          wrap(ctx, NX_DTYPE_F64, 2, (int64_t[]){2, 2}, eu)};
    nx_tensor *er = run1(g, es, 3, eins);
    expect_shape(er, 2, (int64_t[]){2, 0});
    expect_values(er, 0, NULL, "scatter into an empty axis");
    for (int i = 0; i < 3; i++)
        nx_tensor_free(eins[i]);

    /* a 2-d index on a 1-d x: y[i, j] = x[idx[i, j]] */
    nx_graph_free(g);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    double x1[3] = {1, 2, 3};
    int32_t i2[2][2] = {{0, 2}, {1, 1}};
    nx_node gx = nx_input(g, "x", NX_DTYPE_F64, 1, (int64_t[]){3});
    nx_node gi = nx_input(g, "i", NX_DTYPE_I32, 2, (int64_t[]){2, 2});
    double wg[4] = {1, 3, 2, 2};
    expect_values(eval2(nx_gather(g, gx, gi, 0), wrap(ctx, NX_DTYPE_F64, 1, (int64_t[]){3}, x1),
                        wrap(ctx, NX_DTYPE_I32, 2, (int64_t[]){2, 2}, i2)),
                  4, wg, "gather with a 2-d index");
}

/* ---- custom monoids ------------------------------------------------------------------------*/

static void test_custom_monoids(void **state)
{
    (void)state;
    double xd[2][3] = {{3, 4, 0}, {5, 12, 0}};
    int64_t s[2] = {2, 3};
    nx_node x = nx_input(g, "x", NX_DTYPE_F64, 2, s);
    nx_node px = nx_placeholder(g, NX_DTYPE_F64), a = nx_placeholder(g, NX_DTYPE_F64),
            b = nx_placeholder(g, NX_DTYPE_F64);
    nx_monoid_def l2 = {.ncarry = 1,
                        .x = px,
                        .a = {a},
                        .b = {b},
                        .lift = {nx_mul(g, px, px)},
                        .combine = {nx_add(g, a, b)},
                        .identity = {nx_scalar(g, NX_DTYPE_F64, 0)},
                        .finalize = nx_sqrt(g, a)};
    int ax = 1;
    double w[2] = {5, 13};
    expect_values(eval1(nx_reduce_custom(g, x, 1, &ax, &l2, false), NX_DTYPE_F64, 2, s, xd), 2, w,
                  "L2 norm per row");
    double wall[1] = {sqrt(9 + 16 + 25 + 144)};
    nx_tensor *r =
        eval1(nx_reduce_custom(g, x, 2, (int[]){0, 1}, &l2, true), NX_DTYPE_F64, 2, s, xd);
    expect_shape(r, 2, (int64_t[]){1, 1});
    expect_values(r, 1, wall, "L2 norm over everything");

    /* two components of different dtypes: (max, count of positives) -> max * count */
    nx_node a1 = nx_placeholder(g, NX_DTYPE_I64), b1 = nx_placeholder(g, NX_DTYPE_I64);
    nx_node zero = nx_scalar(g, NX_DTYPE_F64, 0);
    nx_monoid_def mc = {
        .ncarry = 2,
        .x = px,
        .a = {a, a1},
        .b = {b, b1},
        .lift = {px, nx_cast(g, nx_gt(g, px, zero), NX_DTYPE_I64)},
        .combine = {nx_maximum(g, a, b), nx_add(g, a1, b1)},
        .identity = {nx_scalar(g, NX_DTYPE_F64, -INFINITY), nx_scalar(g, NX_DTYPE_I64, 0)},
        .finalize = nx_mul(g, a, nx_cast(g, a1, NX_DTYPE_F64)),
    };
    double yd[2][3] = {{1, -2, 3}, {-1, -5, -3}};
    double wmc[2] = {6, 0};
    expect_values(eval1(nx_reduce_custom(g, x, 1, &ax, &mc, false), NX_DTYPE_F64, 2, s, yd), 2, wmc,
                  "(max, count) monoid");

    /* the empty fold is finalize(identity) */
    nx_graph_free(g);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    int64_t s0[2] = {2, 0};
    x = nx_input(g, "x", NX_DTYPE_F64, 2, s0);
    px = nx_placeholder(g, NX_DTYPE_F64);
    a = nx_placeholder(g, NX_DTYPE_F64);
    b = nx_placeholder(g, NX_DTYPE_F64);
    nx_monoid_def cnt = {.ncarry = 1,
                         .x = px,
                         .a = {a},
                         .b = {b},
                         .lift = {nx_scalar(g, NX_DTYPE_F64, 1)},
                         .combine = {nx_add(g, a, b)},
                         .identity = {nx_scalar(g, NX_DTYPE_F64, 7)}};
    double w7[2] = {7, 7};
    expect_values(eval1(nx_reduce_custom(g, x, 1, &ax, &cnt, false), NX_DTYPE_F64, 2, s0, NULL), 2,
                  w7, "empty custom fold");
}

static void test_custom_monoid_large_expressions(void **state)
{
    (void)state;
    /* two lifts whose closures (202 and 152 nodes) together exceed one expression's 256 */
    double xd[3] = {1, 5, -2};
    int64_t s[1] = {3};
    nx_node x = nx_input(g, "x", NX_DTYPE_F64, 1, s);
    nx_node px = nx_placeholder(g, NX_DTYPE_F64);
    nx_node a0 = nx_placeholder(g, NX_DTYPE_F64), a1 = nx_placeholder(g, NX_DTYPE_F64);
    nx_node b0 = nx_placeholder(g, NX_DTYPE_F64), b1 = nx_placeholder(g, NX_DTYPE_F64);
    nx_node one = nx_scalar(g, NX_DTYPE_F64, 1);
    nx_node up = px, down = px;
    for (int i = 0; i < 200; i++)
        up = nx_add(g, up, one);
    for (int i = 0; i < 150; i++)
        down = nx_sub(g, down, one);
    nx_monoid_def m = {.ncarry = 2,
                       .x = px,
                       .a = {a0, a1},
                       .b = {b0, b1},
                       .lift = {up, down},
                       .combine = {nx_add(g, a0, b0), nx_add(g, a1, b1)},
                       .identity = {nx_scalar(g, NX_DTYPE_F64, 0), nx_scalar(g, NX_DTYPE_F64, 0)},
                       .finalize = nx_sub(g, a0, a1)};
    /* sum(x + 200) - sum(x - 150) = 350 n */
    double want[1] = {1050};
    int ax = 0;
    expect_values(eval1(nx_reduce_custom(g, x, 1, &ax, &m, false), NX_DTYPE_F64, 1, s, xd), 1, want,
                  "large lift expressions");
}

/* ---- scans ---------------------------------------------------------------------------------*/

static void test_scans(void **state)
{
    (void)state;
    double xd[2][3] = {{1, 2, 3}, {4, 5, 6}};
    int64_t s[2] = {2, 3};
    nx_node x = nx_input(g, "x", NX_DTYPE_F64, 2, s);
    nx_node outs[5] = {
        nx_scan(g, x, 1, NX_MONOID_SUM, false), nx_scan(g, x, 1, NX_MONOID_SUM, true),
        nx_scan(g, x, 0, NX_MONOID_PROD, false), nx_scan(g, x, -1, NX_MONOID_MIN, true),
        nx_scan_linear(g, nx_scalar(g, NX_DTYPE_F64, 0.5), x, 1, false)};
    nx_tensor *in = wrap(ctx, NX_DTYPE_F64, 2, s, xd), *res[5];
    run_graph(g, 5, outs, 1, &in, res);
    nx_tensor_free(in);
    double w0[6] = {1, 3, 6, 4, 9, 15}, w1[6] = {6, 5, 3, 15, 11, 6}, w2[6] = {1, 2, 3, 4, 10, 18};
    double w3[6] = {1, 2, 3, 4, 5, 6};
    double w4[6] = {1, 2.5, 4.25, 4, 7, 9.5}; /* y = 0.5 y + x */
    expect_values(res[0], 6, w0, "cumsum");
    expect_values(res[1], 6, w1, "reverse cumsum");
    expect_values(res[2], 6, w2, "cumprod axis 0");
    expect_values(res[3], 6, w3, "reverse cummin");
    expect_values(res[4], 6, w4, "linear recurrence");

    nx_graph_free(g);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    double zd[4] = {0, 0, NAN, 0};
    int64_t s4[1] = {4};
    x = nx_input(g, "x", NX_DTYPE_F64, 1, s4);
    double wl[4] = {0, log(2.0), NAN, NAN}, wmx[4] = {0, 0, NAN, NAN};
    expect_close(eval1(nx_scan(g, x, 0, NX_MONOID_LOGSUMEXP, false), NX_DTYPE_F64, 1, s4, zd), 4,
                 wl, 1e-15, "cumulative logsumexp");
    expect_values(eval1(nx_scan(g, x, 0, NX_MONOID_MAX, false), NX_DTYPE_F64, 1, s4, zd), 4, wmx,
                  "cummax with NaN");

    /* a per-row decay broadcast against b, run backwards: y_t = a * y_{t+1} + b_t */
    nx_graph_free(g);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    double ad[2][1] = {{0.5}, {2}}, bd[3] = {1, 1, 1};
    nx_node av = nx_input(g, "a", NX_DTYPE_F64, 2, (int64_t[]){2, 1});
    nx_node bv = nx_input(g, "b", NX_DTYPE_F64, 1, (int64_t[]){3});
    double wr[6] = {1.75, 1.5, 1, 7, 3, 1};
    expect_values(eval2(nx_scan_linear(g, av, bv, 1, true),
                        wrap(ctx, NX_DTYPE_F64, 2, (int64_t[]){2, 1}, ad),
                        wrap(ctx, NX_DTYPE_F64, 1, (int64_t[]){3}, bd)),
                  6, wr, "reverse linear recurrence, broadcast");
}

/* ---- elementwise ---------------------------------------------------------------------------*/

static void test_integer_arithmetic(void **state)
{
    (void)state;
    int32_t ad[6] = {-7, 7, -7, 7, 5, 3}, bd[6] = {2, 2, -2, -2, 0, 4};
    int64_t s[1] = {6};
    nx_node a = nx_input(g, "a", NX_DTYPE_I32, 1, s), b = nx_input(g, "b", NX_DTYPE_I32, 1, s);
    nx_node outs[3] = {nx_div(g, a, b), nx_mod(g, a, b),
                       nx_pow(g, b, nx_scalar(g, NX_DTYPE_I32, 3))};
    nx_tensor *ins[2] = {wrap(ctx, NX_DTYPE_I32, 1, s, ad), wrap(ctx, NX_DTYPE_I32, 1, s, bd)};
    nx_tensor *res[3];
    run_graph(g, 3, outs, 2, ins, res);
    nx_tensor_free(ins[0]);
    nx_tensor_free(ins[1]);
    /* numpy floor_divide / mod: [-4 3 3 -4] and [1 1 -1 -1]; x // 0 and x % 0 are 0 here */
    double wd[6] = {-4, 3, 3, -4, 0, 0}, wm[6] = {1, 1, -1, -1, 0, 3},
           wp[6] = {8, 8, -8, -8, 0, 64};
    expect_values(res[0], 6, wd, "i32 floor division");
    expect_values(res[1], 6, wm, "i32 mod");
    expect_values(res[2], 6, wp, "i32 pow");

    nx_graph_free(g);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    int8_t c8[3] = {127, -128, 100};
    nx_node x8 = nx_input(g, "x", NX_DTYPE_I8, 1, (int64_t[]){3});
    double w8[3] = {-128, -127, 101}, wn[3] = {-127, -128, -100}, wab[3] = {127, -128, 100};
    expect_values(
        eval1(nx_add(g, x8, nx_scalar(g, NX_DTYPE_I8, 1)), NX_DTYPE_I8, 1, (int64_t[]){3}, c8), 3,
        w8, "i8 wrap-around");
    expect_values(eval1(nx_neg(g, x8), NX_DTYPE_I8, 1, (int64_t[]){3}, c8), 3, wn, "i8 neg");
    expect_values(eval1(nx_abs(g, x8), NX_DTYPE_I8, 1, (int64_t[]){3}, c8), 3, wab, "i8 abs");
    nx_graph_free(g);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    uint8_t u[2] = {0, 255};
    nx_node xu = nx_input(g, "u", NX_DTYPE_U8, 1, (int64_t[]){2});
    double wu[2] = {255, 254};
    expect_values(
        eval1(nx_sub(g, xu, nx_scalar(g, NX_DTYPE_U8, 1)), NX_DTYPE_U8, 1, (int64_t[]){2}, u), 2,
        wu, "u8 wrap-around");
}

static void test_float_elementwise(void **state)
{
    (void)state;
    double ad[5] = {-7.5, 7.5, -7.5, 7.5, 0.5}, bd[5] = {2, 2, -2, -2, 0};
    int64_t s[1] = {5};
    nx_node a = nx_input(g, "a", NX_DTYPE_F64, 1, s), b = nx_input(g, "b", NX_DTYPE_F64, 1, s);
    nx_node outs[2] = {nx_mod(g, a, b), nx_atan2(g, b, a)};
    nx_tensor *ins[2] = {wrap(ctx, NX_DTYPE_F64, 1, s, ad), wrap(ctx, NX_DTYPE_F64, 1, s, bd)};
    nx_tensor *res[2];
    run_graph(g, 2, outs, 2, ins, res);
    nx_tensor_free(ins[0]);
    nx_tensor_free(ins[1]);
    double wm[5] = {0.5, 1.5, -1.5, -0.5, NAN}; /* numpy.mod */
    expect_values(res[0], 5, wm, "f64 mod");
    double wa[5] = {atan2(2, -7.5), atan2(2, 7.5), atan2(-2, -7.5), atan2(-2, 7.5), 0};
    expect_close(res[1], 5, wa, 1e-15, "atan2");

    nx_graph_free(g);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    float xf[7] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, NAN, 4};
    int64_t s7[1] = {7};
    nx_node x = nx_input(g, "x", NX_DTYPE_F32, 1, s7);
    double wr[7] = {0, 2, 2, -0.0, -2, NAN, 4}, ws[7] = {1, 1, 1, -1, -1, NAN, 1};
    double wq[7] = {sqrt(2.0), 1 / sqrt(1.5), 1 / sqrt(2.5), NAN, NAN, NAN, 0.5};
    double wi[7] = {0, 0, 0, 0, 0, 1, 0};
    expect_values(eval1(nx_round(g, x), NX_DTYPE_F32, 1, s7, xf), 7, wr, "round half to even");
    expect_values(eval1(nx_sign(g, x), NX_DTYPE_F32, 1, s7, xf), 7, ws, "sign");
    expect_close(eval1(nx_rsqrt(g, x), NX_DTYPE_F32, 1, s7, xf), 7, wq, 1e-7, "rsqrt");
    expect_values(eval1(nx_isnan(g, x), NX_DTYPE_F32, 1, s7, xf), 7, wi, "isnan");
    /* comparisons with NaN are false except ne */
    nx_node nan = nx_scalar(g, NX_DTYPE_F32, NAN);
    double wf[7] = {0}, wt[7] = {1, 1, 1, 1, 1, 1, 1};
    expect_values(eval1(nx_le(g, x, nan), NX_DTYPE_F32, 1, s7, xf), 7, wf, "x <= NaN");
    expect_values(eval1(nx_ne(g, x, nan), NX_DTYPE_F32, 1, s7, xf), 7, wt, "x != NaN");
}

static void test_casts(void **state)
{
    (void)state;
    double xd[6] = {1.9, -1.9, NAN, 1e10, -1e10, -0.0};
    int64_t s[1] = {6};
    nx_node x = nx_input(g, "x", NX_DTYPE_F64, 1, s);
    nx_node outs[4] = {nx_cast(g, x, NX_DTYPE_I32), nx_cast(g, x, NX_DTYPE_BOOL),
                       nx_cast(g, x, NX_DTYPE_U8),
                       nx_cast(g, nx_cast(g, x, NX_DTYPE_F16), NX_DTYPE_F64)};
    nx_tensor *in = wrap(ctx, NX_DTYPE_F64, 1, s, xd), *res[4];
    run_graph(g, 4, outs, 1, &in, res);
    nx_tensor_free(in);
    double wi[6] = {1, -1, 0, INT32_MAX, INT32_MIN, 0}, wb[6] = {1, 1, 1, 1, 1, 0};
    double wu[6] = {1, 0, 0, 255, 0, 0};
    /* binary16 nearest: 1.900390625, NaN, 1e10 overflows to inf */
    double wh[6] = {1.900390625, -1.900390625, NAN, INFINITY, -INFINITY, -0.0};
    expect_values(res[0], 6, wi, "f64 -> i32 truncates and saturates");
    expect_values(res[1], 6, wb, "f64 -> bool");
    expect_values(res[2], 6, wu, "f64 -> u8");
    expect_values(res[3], 6, wh, "f64 -> f16 -> f64");

    nx_graph_free(g);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    float third = 1.0f / 3.0f;
    nx_node h = nx_input(g, "h", NX_DTYPE_F32, 0, NULL);
    double wt[1] = {0.333251953125}; /* numpy.float16(1/3) */
    expect_values(
        eval1(nx_cast(g, nx_cast(g, h, NX_DTYPE_F16), NX_DTYPE_F32), NX_DTYPE_F32, 0, NULL, &third),
        1, wt, "f32 -> f16 -> f32");
}

static void test_select_broadcast(void **state)
{
    (void)state;
    uint8_t cd[2] = {1, 0};
    double ad[3] = {1, 2, 3};
    nx_node c = nx_input(g, "c", NX_DTYPE_BOOL, 2, (int64_t[]){2, 1});
    nx_node a = nx_input(g, "a", NX_DTYPE_F64, 1, (int64_t[]){3});
    nx_node y = nx_where(g, c, a, nx_scalar(g, NX_DTYPE_F64, 9));
    double want[6] = {1, 2, 3, 9, 9, 9};
    nx_tensor *r = eval2(y, wrap(ctx, NX_DTYPE_BOOL, 2, (int64_t[]){2, 1}, cd),
                         wrap(ctx, NX_DTYPE_F64, 1, (int64_t[]){3}, ad));
    expect_shape(r, 2, (int64_t[]){2, 3});
    expect_values(r, 6, want, "select");
    nx_graph_free(g);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    uint8_t bd[4] = {0, 1, 0, 1}, bd2[4] = {0, 0, 1, 1};
    nx_node p = nx_input(g, "p", NX_DTYPE_BOOL, 1, (int64_t[]){4});
    nx_node q = nx_input(g, "q", NX_DTYPE_BOOL, 1, (int64_t[]){4});
    double wand[4] = {0, 0, 0, 1}, wor[4] = {0, 1, 1, 1};
    expect_values(eval2(nx_and(g, p, q), wrap(ctx, NX_DTYPE_BOOL, 1, (int64_t[]){4}, bd),
                        wrap(ctx, NX_DTYPE_BOOL, 1, (int64_t[]){4}, bd2)),
                  4, wand, "and");
    expect_values(eval2(nx_not(g, nx_not(g, nx_or(g, p, q))),
                        wrap(ctx, NX_DTYPE_BOOL, 1, (int64_t[]){4}, bd),
                        wrap(ctx, NX_DTYPE_BOOL, 1, (int64_t[]){4}, bd2)),
                  4, wor, "or");
}

/* ---- movement ------------------------------------------------------------------------------*/

static void test_window_and_views(void **state)
{
    (void)state;
    double xd[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    int64_t s[1] = {10};
    nx_node x = nx_input(g, "x", NX_DTYPE_F64, 1, s);
    /* out = (10 - 2*2 - 1) / 3 + 1 = 2; y[o, k] = x[3o + 2k] */
    nx_node w = nx_window(g, x, (int64_t[]){3}, (int64_t[]){3}, (int64_t[]){2});
    double ww[6] = {0, 2, 4, 3, 5, 7};
    nx_tensor *r = eval1(w, NX_DTYPE_F64, 1, s, xd);
    expect_shape(r, 2, (int64_t[]){2, 3});
    expect_values(r, 6, ww, "strided dilated window");

    nx_node m = nx_reshape(g, x, 2, (int64_t[]){-1, 5}); /* [[0..4],[5..9]] */
    nx_node w2 = nx_window(g, m, (int64_t[]){2, 2}, NULL, NULL);
    nx_node sum = nx_reduce(g, w2, 2, (int[]){2, 3}, NX_MONOID_SUM, false);
    double ws[4] = {0 + 1 + 5 + 6, 1 + 2 + 6 + 7, 2 + 3 + 7 + 8, 3 + 4 + 8 + 9};
    expect_values(eval1(sum, NX_DTYPE_F64, 1, s, xd), 4, ws, "2x2 box sums");

    nx_node sl = nx_slice(g, m, (int64_t[]){1, 0}, (int64_t[]){2, 5}, (int64_t[]){1, 2});
    double wsl[3] = {5, 7, 9};
    expect_values(eval1(sl, NX_DTYPE_F64, 1, s, xd), 3, wsl, "strided slice");
    nx_node rv = nx_reverse(g, m, 2, (int[]){0, 1});
    double wrv[10] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
    expect_values(eval1(rv, NX_DTYPE_F64, 1, s, xd), 10, wrv, "reverse both axes");
    nx_node pt = nx_permute(g, m, (int[]){1, 0});
    double wpt[10] = {0, 5, 1, 6, 2, 7, 3, 8, 4, 9};
    expect_values(eval1(pt, NX_DTYPE_F64, 1, s, xd), 10, wpt, "transpose");
    nx_node sl1 = nx_reshape(g, sl, 1, (int64_t[]){3});
    nx_node cc = nx_concat(
        g, 3, (nx_node[]){sl1, sl1, nx_slice(g, x, (int64_t[]){9}, (int64_t[]){10}, NULL)}, 0);
    double wcc[7] = {5, 7, 9, 5, 7, 9, 9};
    expect_values(eval1(cc, NX_DTYPE_F64, 1, s, xd), 7, wcc, "concat");
    nx_node bc = nx_broadcast(g, nx_reshape(g, sl1, 2, (int64_t[]){3, 1}), 2, (int64_t[]){3, 2});
    double wbc[6] = {5, 5, 7, 7, 9, 9};
    expect_values(eval1(bc, NX_DTYPE_F64, 1, s, xd), 6, wbc, "broadcast");
    nx_node io = nx_iota(g, NX_DTYPE_I32, 2, (int64_t[]){2, 3}, 0);
    double wio[6] = {0, 0, 0, 1, 1, 1};
    expect_values(eval1(io, NX_DTYPE_F64, 1, s, xd), 6, wio, "iota");
}

/* ---- composed ------------------------------------------------------------------------------*/

static void test_compose(void **state)
{
    (void)state;
    double ad[2][3] = {{1, 2, 3}, {4, 5, 6}}, bd[3][2] = {{1, 0}, {0, 1}, {1, 1}};
    nx_node a = nx_input(g, "a", NX_DTYPE_F64, 2, (int64_t[]){2, 3});
    nx_node b = nx_input(g, "b", NX_DTYPE_F64, 2, (int64_t[]){3, 2});
    nx_node outs[4] = {nx_matmul(g, a, b), nx_einsum(g, "ij,jk->ik", a, b, NX_MONOID_MAX, nx_add),
                       nx_einsum(g, "ij,jk->ki", a, b, NX_MONOID_SUM, nx_mul),
                       nx_einsum(g, "ij,kj->ik", a, a, NX_MONOID_SUM, nx_mul)};
    nx_tensor *ins[2] = {wrap(ctx, NX_DTYPE_F64, 2, (int64_t[]){2, 3}, ad),
                         wrap(ctx, NX_DTYPE_F64, 2, (int64_t[]){3, 2}, bd)};
    nx_tensor *res[4];
    run_graph(g, 4, outs, 2, ins, res);
    nx_tensor_free(ins[0]);
    nx_tensor_free(ins[1]);
    double wmm[4] = {4, 5, 10, 11};
    double wmp[4] = {4, 4, 7, 7}; /* max_j a_ij + b_jk */
    double wt[4] = {4, 10, 5, 11};
    double wg[4] = {14, 32, 32, 77}; /* a a^T */
    expect_values(res[0], 4, wmm, "matmul");
    expect_values(res[1], 4, wmp, "max-plus einsum");
    expect_values(res[2], 4, wt, "einsum to a transposed output");
    expect_values(res[3], 4, wg, "a a^T");

    /* batched, with a broadcast batch axis */
    nx_graph_free(g);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    double bat[2][1][2] = {{{1, 2}}, {{3, 4}}}, m2[2][1] = {{10}, {1}};
    nx_node ba = nx_input(g, "a", NX_DTYPE_F64, 3, (int64_t[]){2, 1, 2});
    nx_node bm = nx_input(g, "b", NX_DTYPE_F64, 2, (int64_t[]){2, 1});
    double wb[2] = {12, 34};
    nx_tensor *r =
        eval2(nx_matmul(g, ba, bm), wrap(ctx, NX_DTYPE_F64, 3, (int64_t[]){2, 1, 2}, bat),
              wrap(ctx, NX_DTYPE_F64, 2, (int64_t[]){2, 1}, m2));
    expect_shape(r, 3, (int64_t[]){2, 1, 1});
    expect_values(r, 2, wb, "batched matmul");

    nx_graph_free(g);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    double vd[2][4] = {{1, 2, 3, 4}, {0, -INFINITY, log(2.0), log(3.0)}};
    nx_node v = nx_input(g, "v", NX_DTYPE_F64, 2, (int64_t[]){2, 4});
    nx_node r0 = nx_slice(g, v, (int64_t[]){0, 0}, (int64_t[]){1, 4}, NULL);
    nx_node outs2[3] = {nx_var(g, r0, 1, (int[]){1}, 1, false), nx_mean(g, v, 0, NULL, false),
                        nx_softmax(g, v, 1)};
    nx_tensor *vin = wrap(ctx, NX_DTYPE_F64, 2, (int64_t[]){2, 4}, vd), *res2[3];
    run_graph(g, 3, outs2, 1, &vin, res2);
    nx_tensor_free(vin);
    double wv[1] = {5.0 / 3.0}; /* numpy.var([1,2,3,4], ddof=1) */
    double e1 = exp(1), e2 = exp(2), e3 = exp(3), e4 = exp(4), z = e1 + e2 + e3 + e4;
    double wsm[8] = {e1 / z, e2 / z, e3 / z, e4 / z, 1.0 / 6, 0, 2.0 / 6, 3.0 / 6};
    expect_close(res2[0], 1, wv, 1e-15, "var ddof=1");
    /* mean over no axes is the identity fold */
    double wmean[8] = {1, 2, 3, 4, 0, -INFINITY, log(2.0), log(3.0)};
    expect_values(res2[1], 8, wmean, "mean over no axes");
    expect_close(res2[2], 8, wsm, 1e-15, "softmax");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_logsumexp_infinities, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_min_nan_and_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_argmax_ties_and_nan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_f32_accumulates_in_f32, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multi_axis_reduce_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sort_nan_stable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sort_axis0_ints, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pad_modes_wide, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pad_2d_per_axis, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gather_clamps_scatter_drops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_custom_monoids, setup, teardown),
        cmocka_unit_test_setup_teardown(test_custom_monoid_large_expressions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scans, setup, teardown),
        cmocka_unit_test_setup_teardown(test_integer_arithmetic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_float_elementwise, setup, teardown),
        cmocka_unit_test_setup_teardown(test_casts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_select_broadcast, setup, teardown),
        cmocka_unit_test_setup_teardown(test_window_and_views, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compose, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scan_linear_broadcasts, setup, teardown),
    };
    return cmocka_run_group_tests_name("ir-semantics", tests, NULL, NULL);
}
