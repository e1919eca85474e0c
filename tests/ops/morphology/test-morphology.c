/* Morphology: dilation, erosion, opening and closing against scipy.ndimage's grey_* and binary_*
 * golden data (tools/gen-morphology-golden.py), hand-computed VALID and first-winner cases,
 * finite-difference gradients through nx_graph_grad, bad input, the cache and allocation sweeps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nitrix-graph.h"
#include "nitrix-ops.h"
#include "testutil.h"

static nx_test_alloc g_ta;

static nx_ctx *ctx_new(void)
{
    memset(&g_ta, 0, sizeof g_ta);
    return nx_test_ctx(&g_ta);
}

/* golden/morphology/<name>/<key>.npy (tools/gen-morphology-golden.py). */
static nx_tensor *load(nx_ctx *ctx, const char *name, const char *key)
{
    return nx_test_golden_npy(ctx, "morphology", name, key);
}

/* Option opt of the case's manifest, or def when it has none. */
static const char *option(const char *name, const char *opt, char *buf, size_t len,
                          const char *def)
{
    return nx_test_golden_option("morphology", name, opt, buf, len) ? buf : def;
}

static double at(const nx_tensor *t, int64_t i)
{
    const void *d = nx_tensor_data(t);
    switch (nx_tensor_dtype(t)) {
    case NX_DTYPE_F32:
        return ((const float *)d)[i];
    case NX_DTYPE_F64:
        return ((const double *)d)[i];
    case NX_DTYPE_I8:
        return ((const int8_t *)d)[i];
    case NX_DTYPE_I16:
        return ((const int16_t *)d)[i];
    case NX_DTYPE_I32:
        return ((const int32_t *)d)[i];
    case NX_DTYPE_I64:
        return (double)((const int64_t *)d)[i]; /* the golden values are below 2^41 */
    case NX_DTYPE_U8:
    case NX_DTYPE_BOOL:
        return ((const uint8_t *)d)[i];
    default:
        fail_msg("unexpected dtype %s", nx_dtype_name(nx_tensor_dtype(t)));
        return 0;
    }
}

static nx_tensor *make(nx_ctx *ctx, nx_dtype dt, int ndim, const int64_t *shape, const double *v)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, dt, ndim, shape, &t), NX_OK);
    for (int64_t i = 0; i < nx_tensor_numel(t); i++) {
        if (dt == NX_DTYPE_F32)
            ((float *)nx_tensor_data(t))[i] = (float)v[i];
        else if (dt == NX_DTYPE_F64)
            ((double *)nx_tensor_data(t))[i] = v[i];
        else if (dt == NX_DTYPE_I32)
            ((int32_t *)nx_tensor_data(t))[i] = (int32_t)v[i];
        else
            ((uint8_t *)nx_tensor_data(t))[i] = v[i] != 0;
    }
    return t;
}

/* Every element equal, bit for bit in value (the results are maxima/minima of inputs, or of
 * input + element sums rounded once, so exact equality is the honest check). */
static void assert_equal_tensors(const nx_tensor *got, const nx_tensor *want, const char *name)
{
    assert_int_equal(nx_tensor_dtype(got), nx_tensor_dtype(want));
    assert_int_equal(nx_tensor_ndim(got), nx_tensor_ndim(want));
    assert_memory_equal(nx_tensor_shape(got), nx_tensor_shape(want),
                        (size_t)nx_tensor_ndim(want) * sizeof(int64_t));
    for (int64_t i = 0; i < nx_tensor_numel(want); i++)
        if (at(got, i) != at(want, i))
            fail_msg("%s: element %lld is %.17g; scipy gives %.17g", name, (long long)i, at(got, i),
                     at(want, i));
}

static nx_morph_op op_of(const char *s)
{
    if (!strcmp(s, "dilate"))
        return NX_MORPH_DILATE;
    if (!strcmp(s, "erode"))
        return NX_MORPH_ERODE;
    if (!strcmp(s, "open"))
        return NX_MORPH_OPEN;
    if (!strcmp(s, "close"))
        return NX_MORPH_CLOSE;
    if (!strcmp(s, "median_filter"))
        return NX_MORPH_OP_COUNT; /* nx_median_filter */
    fail_msg("bad op %s", s);
    return NX_MORPH_OP_COUNT;
}

static nx_morph_border border_of(const char *s)
{
    static const char *names[] = {"reflect", "constant", "nearest", "mirror", "wrap"};
    for (int i = 0; i < NX_MORPH_BORDER_COUNT; i++)
        if (!strcmp(s, names[i]))
            return (nx_morph_border)i;
    fail_msg("bad mode %s", s);
    return NX_MORPH_BORDER_COUNT;
}

/* One golden case: the manifest's op with its size or footprint/structuring_element files, mode and cval. */
static int run_case(nx_ctx *ctx, const char *name, nx_backend backend)
{
    char op[32], b1[64], b2[64], b3[64];
    assert_true(nx_test_golden_field("morphology", name, "op", op, sizeof op));
    nx_morph_opts o = {.backend = backend,
                       .border = border_of(option(name, "mode", b1, sizeof b1, "reflect")),
                       .cval = strtod(option(name, "cval", b2, sizeof b2, "0"), NULL)};
    char *p = (char *)option(name, "size", b3, sizeof b3, "");
    for (int i = 0; *p && i < NX_MORPH_MAX_SPATIAL; i++) {
        o.size[i] = strtoll(p, &p, 10);
        if (*p == ',')
            p++;
    }
    nx_tensor *x = load(ctx, name, "x"), *want = load(ctx, name, "out"), *fp = NULL, *se = NULL;
    if (option(name, "footprint", b1, sizeof b1, NULL))
        o.footprint = fp = load(ctx, name, "fp");
    if (option(name, "structuring_element", b1, sizeof b1, NULL))
        o.structure = se = load(ctx, name, "se");
    nx_tensor *got = NULL;
    nx_morph_op mop = op_of(op);
    nx_status st = mop == NX_MORPH_OP_COUNT ? nx_median_filter(ctx, x, &o, &got)
                                            : nx_morph(ctx, mop, x, &o, &got);
    if (st != NX_OK)
        fail_msg("%s: %s", name, nx_ctx_last_error(ctx));
    assert_equal_tensors(got, want, name);
    nx_tensor_free(got);
    nx_tensor_free(x);
    nx_tensor_free(want);
    nx_tensor_free(fp);
    nx_tensor_free(se);
    return 1;
}

static void run_golden(nx_backend backend)
{
    nx_ctx *ctx = ctx_new();
    static char names[160][64];
    int cases = nx_test_golden_cases("morphology", "dilate|erode|open|close|median_filter", names,
                                     160);
    int n = 0;
    for (int i = 0; i < cases; i++)
        n += run_case(ctx, names[i], backend);
    assert_int_equal(n, 110); /* every case of these ops found and checked */
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

static void test_golden_ref(void **state)
{
    (void)state;
    run_golden(NX_BACKEND_REF);
}

static void test_golden_cpu(void **state)
{
    (void)state;
    run_golden(NX_BACKEND_CPU);
}

/* VALID windows by hand: erode/dilate of [3 1 4 1 5] by 3 and by 2. */
static void test_valid(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t n = 5;
    nx_tensor *x = make(ctx, NX_DTYPE_F64, 1, &n, (double[]){3, 1, 4, 1, 5}), *y = NULL;
    nx_morph_opts o = {.backend = NX_BACKEND_REF, .padding = NX_MORPH_VALID, .size = {3}};
    struct {
        nx_morph_op op;
        int64_t w, n;
        double want[4];
    } cases[] = {{NX_MORPH_ERODE, 3, 3, {1, 1, 1}},
                 {NX_MORPH_DILATE, 3, 3, {4, 4, 5}},
                 {NX_MORPH_DILATE, 2, 4, {3, 4, 4, 5}},
                 {NX_MORPH_ERODE, 2, 4, {1, 1, 1, 1}},
                 {NX_MORPH_DILATE, 5, 1, {5}}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        o.size[0] = cases[c].w;
        assert_int_equal(nx_morph(ctx, cases[c].op, x, &o, &y), NX_OK);
        assert_int_equal(nx_tensor_shape(y)[0], cases[c].n);
        for (int64_t i = 0; i < cases[c].n; i++)
            assert_true(at(y, i) == cases[c].want[i]);
        nx_tensor_free(y);
    }
    o.size[0] = 6;
    assert_int_equal(nx_morph(ctx, NX_MORPH_DILATE, x, &o, &y), NX_ERR_SHAPE);
    assert_null(y);
    nx_tensor_free(x);
    nx_ctx_free(ctx);
}

/* Ties: each output's cotangent goes to the first winner of its window in padded-image order.
 * x = [0 2 2 0], dilation by 3 (reflect): windows over xp = [0 | 0 2 2 0 | 0] are
 * [0 0 2] [0 2 2] [2 2 0] [2 0 0]; first winners x1 x1 x1 x2, so dx = dy-weighted [0 3 1 0]
 * with dy = 1, and with dy = [1 2 4 8]: [0 7 8 0]. */
static void test_first_winner(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t n = 4;
    nx_tensor *x = make(ctx, NX_DTYPE_F64, 1, &n, (double[]){0, 2, 2, 0});
    nx_tensor *dy = make(ctx, NX_DTYPE_F64, 1, &n, (double[]){1, 2, 4, 8}), *dx = NULL;
    nx_morph_opts o = {.backend = NX_BACKEND_REF};
    assert_int_equal(nx_morph_vjp(ctx, NX_MORPH_DILATE, x, dy, &o, &dx), NX_OK);
    double want[] = {0, 7, 8, 0};
    for (int i = 0; i < 4; i++)
        assert_true(at(dx, i) == want[i]);
    nx_tensor_free(dx);
    /* Erosion of the same x: windows [0 0 2] [0 2 2] [2 2 0] [2 0 0] (lo pad 1 as well for odd
     * sizes): minima first at x0 x0 x3 x3 -> [1+2, 0, 0, 4+8]. */
    assert_int_equal(nx_morph_vjp(ctx, NX_MORPH_ERODE, x, dy, &o, &dx), NX_OK);
    double want_e[] = {3, 0, 0, 12};
    for (int i = 0; i < 4; i++)
        assert_true(at(dx, i) == want_e[i]);
    nx_tensor_free(dx);
    nx_tensor_free(x);
    nx_tensor_free(dy);
    nx_ctx_free(ctx);
}

/* L = sum(w * morph(x)) differentiated by nx_graph_grad on the fragment, against central
 * differences of nx_morph. x's values are distinct and at least 0.01 apart (and the element's
 * values keep sums apart too), so a step of 1e-6 changes no winner: L is linear there and the
 * difference quotient is exact up to rounding. */
static void check_grad(nx_ctx *ctx, nx_morph_op op, const nx_morph_opts *o, int nd,
                       const int64_t *shape)
{
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node x = nx_parameter(g, "x", NX_DTYPE_F64, nd, shape);
    nx_node y = op == NX_MORPH_OP_COUNT ? nx_median_node(g, x, o) : nx_morph_node(g, op, x, o);
    int64_t ys[NX_MAX_DIMS];
    assert_true(nx_node_shape(g, y, ys));
    int64_t ny = 1, nx = 1;
    for (int i = 0; i < nd; i++) {
        ny *= ys[i];
        nx *= shape[i];
    }
    double *wv = malloc((size_t)ny * sizeof *wv), *xv = malloc((size_t)nx * sizeof *xv);
    for (int64_t i = 0; i < ny; i++)
        wv[i] = 0.5 + (double)((i * 7) % 11) / 10;
    for (int64_t i = 0; i < nx; i++)
        xv[i] = (double)((i * 37) % nx) * 0.137;
    nx_node w = nx_constant(g, NX_DTYPE_F64, nd, ys, wv);
    int all[NX_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        all[i] = i;
    nx_node loss = nx_reduce(g, nx_mul(g, w, y), nd, all, NX_MONOID_SUM, false);
    nx_node dx = NX_NONE;
    assert_int_equal(nx_graph_grad(g, loss, 1, &x, &dx), NX_OK);
    nx_compile_opts co = {.backend = NX_BACKEND_REF, .n_outputs = 1, .outputs = &dx};
    nx_program *p = NULL;
    assert_int_equal(nx_graph_compile(g, &co, &p), NX_OK);
    nx_tensor *xt = make(ctx, NX_DTYPE_F64, nd, shape, xv), *gt = NULL;
    assert_int_equal(nx_program_run(p, (const nx_tensor *const[]){xt}, &gt), NX_OK);
    double h = 1e-6;
    for (int64_t i = 0; i < nx; i++) {
        double fd = 0;
        for (int s = -1; s <= 1; s += 2) {
            double *d = nx_tensor_data(xt);
            d[i] = xv[i] + s * h;
            nx_tensor *yt = NULL;
            assert_int_equal(op == NX_MORPH_OP_COUNT ? nx_median_filter(ctx, xt, o, &yt)
                                                     : nx_morph(ctx, op, xt, o, &yt),
                             NX_OK);
            double l = 0;
            for (int64_t j = 0; j < ny; j++)
                l += wv[j] * at(yt, j);
            fd += s * l / (2 * h);
            nx_tensor_free(yt);
            d[i] = xv[i];
        }
        if (!nx_test_close(at(gt, i), fd, 1e-6, 1e-6))
            fail_msg("op %d: dL/dx[%lld] is %.10g; finite differences give %.10g", (int)op,
                     (long long)i, at(gt, i), fd);
    }
    nx_tensor_free(gt);
    nx_tensor_free(xt);
    nx_program_free(p);
    nx_graph_free(g);
    free(wv);
    free(xv);
}

static void test_grad_fd(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t s2[2] = {5, 6}, s3[3] = {3, 4, 5}, s1 = 7;
    nx_morph_opts box = {.backend = NX_BACKEND_REF, .size = {3, 2}};
    for (int op = 0; op < NX_MORPH_OP_COUNT; op++)
        check_grad(ctx, (nx_morph_op)op, &box, 2, s2);
    double sev[6] = {0.003, -0.002, 0.001, 0.0, 0.004, -0.001};
    uint8_t fpv[6] = {1, 1, 0, 1, 0, 1};
    int64_t es[2] = {2, 3};
    nx_tensor *se = make(ctx, NX_DTYPE_F64, 2, es, sev), *fp = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_BOOL, 2, es, &fp), NX_OK);
    memcpy(nx_tensor_data(fp), fpv, 6);
    nx_morph_opts nonflat = {.backend = NX_BACKEND_REF,
                             .structure = se,
                             .footprint = fp,
                             .border = NX_MORPH_BORDER_NEAREST};
    for (int op = 0; op < NX_MORPH_OP_COUNT; op++)
        check_grad(ctx, (nx_morph_op)op, &nonflat, 2, s2);
    nx_morph_opts v3 = {.backend = NX_BACKEND_REF, .size = {2, 3, 2}, .padding = NX_MORPH_VALID};
    check_grad(ctx, NX_MORPH_DILATE, &v3, 3, s3);
    nx_morph_opts b1 = {.backend = NX_BACKEND_REF, .size = {4}, .border = NX_MORPH_BORDER_WRAP};
    check_grad(ctx, NX_MORPH_CLOSE, &b1, 1, &s1);
    /* The median's gradient goes through the sort to the element of the middle rank. */
    check_grad(ctx, NX_MORPH_OP_COUNT, &box, 2, s2);
    nx_morph_opts mfp = {.backend = NX_BACKEND_REF, .footprint = fp};
    check_grad(ctx, NX_MORPH_OP_COUNT, &mfp, 2, s2);
    nx_tensor_free(se);
    nx_tensor_free(fp);
    nx_ctx_free(ctx);
}

/* The large-window paths (issue 27): per-axis window folds (a box beyond the unrolled passes'
 * budget), van Herk scans (extents from 32) and the selection median (more than 64 places) are
 * differentiable; their gradients match central differences (inputs without ties). */
static void test_grad_fd_large(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t s1 = 40, s2[2] = {9, 10};
    nx_morph_opts vh = {.backend = NX_BACKEND_REF, .size = {33}};
    check_grad(ctx, NX_MORPH_DILATE, &vh, 1, &s1);
    check_grad(ctx, NX_MORPH_CLOSE, &vh, 1, &s1);
    nx_morph_opts vhw = {.backend = NX_BACKEND_REF, .size = {35}, .border = NX_MORPH_BORDER_WRAP};
    check_grad(ctx, NX_MORPH_ERODE, &vhw, 1, &s1);
    nx_morph_opts fold = {.backend = NX_BACKEND_REF, .size = {12, 11}};
    check_grad(ctx, NX_MORPH_DILATE, &fold, 2, s2);
    nx_morph_opts med = {.backend = NX_BACKEND_REF, .size = {9, 9}};
    check_grad(ctx, NX_MORPH_OP_COUNT, &med, 2, s2);
    nx_morph_opts five = {.backend = NX_BACKEND_REF, .size = {5, 5}};
    check_grad(ctx, NX_MORPH_OPEN, &five, 2, s2);
    nx_ctx_free(ctx);
}

/* A window far larger than the image compiles in bounded time and covers the whole image under
 * reflect: dilation is the image's maximum everywhere, erosion its minimum (issue 27: size 1000
 * on 6^3 never finished compiling). On the CPU backend, as the issue ran it. */
static void test_huge_window(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t s[3] = {6, 6, 6};
    double v[216], hi = -1, lo = 1e9;
    for (int i = 0; i < 216; i++) {
        v[i] = (double)((i * 53) % 216) * 0.25 - 7;
        hi = v[i] > hi ? v[i] : hi;
        lo = v[i] < lo ? v[i] : lo;
    }
    nx_tensor *x = make(ctx, NX_DTYPE_F32, 3, s, v), *y = NULL;
    nx_morph_opts o = {.backend = NX_BACKEND_CPU, .size = {1000, 1000, 1000}};
    assert_int_equal(nx_dilate(ctx, x, &o, &y), NX_OK);
    for (int i = 0; i < 216; i++)
        assert_true(at(y, i) == hi);
    nx_tensor_free(y);
    assert_int_equal(nx_erode(ctx, x, &o, &y), NX_OK);
    for (int i = 0; i < 216; i++)
        assert_true(at(y, i) == lo);
    nx_tensor_free(y);
    nx_tensor_free(x);
    nx_ctx_free(ctx);
}

static int budget_lines;
static void budget_log(void *user, nx_log_level level, const char *msg)
{
    (void)user, (void)level;
    if (strstr(msg, "compile budget"))
        budget_lines++;
}

/* The CPU backend's compile budget (issue 27): a loop kernel above NX_X86_MAX_INST instructions
 * (here 12000 fused sines summed) is not handed to LLVM; it runs on the kernel interpreter after
 * one loud fallback line, and its values are the reference interpreter's. */
static void test_compile_budget(void **state)
{
    (void)state;
    nx_allocator a = nx_test_allocator(&g_ta);
    memset(&g_ta, 0, sizeof g_ta);
    nx_ctx_opts co = {.allocator = &a, .ignore_env = true, .log = budget_log,
                      .cache_dir = getenv("NITRIX_CACHE_DIR")};
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(&co, &ctx), NX_OK);
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    int64_t n = 8;
    nx_node x = nx_input(g, "x", NX_DTYPE_F64, 1, &n);
    /* A wide graph, summed as a balanced tree (a deep chain would only test recursion depth). */
    enum { TERMS = 12000 };
    static nx_node t[TERMS];
    for (int i = 0; i < TERMS; i++)
        t[i] = nx_sin(g, nx_add(g, x, nx_scalar(g, NX_DTYPE_F64, 1e-3 * i)));
    for (int m = TERMS; m > 1;) {
        int h = m / 2;
        for (int i = 0; i < h; i++)
            t[i] = nx_add(g, t[2 * i], t[2 * i + 1]);
        if (m % 2)
            t[h] = t[m - 1];
        m = h + m % 2;
    }
    nx_node y = t[0];
    double v[8] = {0.1, 0.5, 1, 1.5, 2, -1, -0.3, 3};
    nx_tensor *xt = make(ctx, NX_DTYPE_F64, 1, &n, v), *got = NULL, *want = NULL;
    nx_program *pc = NULL, *pr = NULL;
    budget_lines = 0;
    nx_compile_opts cc = {.backend = NX_BACKEND_CPU, .n_outputs = 1, .outputs = &y};
    assert_int_equal(nx_graph_compile(g, &cc, &pc), NX_OK);
    assert_int_equal(budget_lines, 1);
    nx_compile_opts cr = {.backend = NX_BACKEND_REF, .n_outputs = 1, .outputs = &y};
    assert_int_equal(nx_graph_compile(g, &cr, &pr), NX_OK);
    assert_int_equal(nx_program_run(pc, (const nx_tensor *const[]){xt}, &got), NX_OK);
    assert_int_equal(nx_program_run(pr, (const nx_tensor *const[]){xt}, &want), NX_OK);
    for (int i = 0; i < 8; i++)
        assert_true(nx_test_close(at(got, i), at(want, i), 1e-12, 1e-12));
    nx_tensor_free(got);
    nx_tensor_free(want);
    nx_tensor_free(xt);
    nx_program_free(pc);
    nx_program_free(pr);
    nx_graph_free(g);
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

/* Leading axes are batch axes when nspatial is set: each slice is dilated on its own. */
static void test_batch_and_dtypes(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t s[2] = {2, 4};
    double v[8] = {1, 0, 0, 5, 0, 3, 0, 0};
    nx_tensor *x = make(ctx, NX_DTYPE_F64, 2, s, v), *y = NULL;
    nx_morph_opts o = {.backend = NX_BACKEND_REF, .nspatial = 1};
    assert_int_equal(nx_morph(ctx, NX_MORPH_DILATE, x, &o, &y), NX_OK);
    double want[8] = {1, 1, 5, 5, 3, 3, 3, 0};
    for (int i = 0; i < 8; i++)
        assert_true(at(y, i) == want[i]);
    nx_tensor_free(y);
    nx_tensor_free(x);
    /* Integers and bool keep their dtype, as scipy's results do. */
    x = make(ctx, NX_DTYPE_I32, 2, s, v);
    assert_int_equal(nx_morph(ctx, NX_MORPH_DILATE, x, &o, &y), NX_OK);
    assert_int_equal(nx_tensor_dtype(y), NX_DTYPE_I32);
    for (int i = 0; i < 8; i++)
        assert_true(at(y, i) == want[i]);
    nx_tensor_free(y);
    nx_tensor_free(x);
    x = make(ctx, NX_DTYPE_BOOL, 2, s, v);
    assert_int_equal(nx_morph(ctx, NX_MORPH_ERODE, x, &o, &y), NX_OK);
    assert_int_equal(nx_tensor_dtype(y), NX_DTYPE_BOOL);
    for (int i = 0; i < 8; i++)
        assert_true(at(y, i) == 0);
    nx_tensor_free(y);
    nx_tensor_free(x);
    /* An empty image under SAME gives an empty result of its shape. */
    int64_t e[2] = {0, 5};
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, 2, e, &x), NX_OK);
    o.nspatial = 0;
    assert_int_equal(nx_morph(ctx, NX_MORPH_OPEN, x, &o, &y), NX_OK);
    assert_int_equal(nx_tensor_ndim(y), 2);
    assert_int_equal(nx_tensor_shape(y)[0], 0);
    assert_int_equal(nx_tensor_shape(y)[1], 5);
    nx_tensor_free(y);
    nx_tensor_free(x);
    nx_ctx_free(ctx);
}

static void expect_error(nx_ctx *ctx, nx_status want, const char *fragment, nx_morph_op op,
                         const nx_tensor *x, const nx_morph_opts *o)
{
    nx_tensor *y = (nx_tensor *)0x1;
    assert_int_equal(nx_morph(ctx, op, x, o, &y), want);
    assert_null(y);
    if (!strstr(nx_ctx_last_error(ctx), fragment))
        fail_msg("message \"%s\" lacks \"%s\"", nx_ctx_last_error(ctx), fragment);
}

static void test_errors(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t s[2] = {4, 5}, es[2] = {2, 2}, e3[3] = {2, 2, 2};
    double v[20] = {0};
    nx_tensor *x = make(ctx, NX_DTYPE_F64, 2, s, v);
    nx_tensor *nanfp = make(ctx, NX_DTYPE_F64, 2, es, (double[]){1, NAN, 1, 1});
    nx_tensor *infse = make(ctx, NX_DTYPE_F64, 2, es, (double[]){0, INFINITY, 0, 0});
    nx_tensor *intse = make(ctx, NX_DTYPE_I32, 2, es, (double[]){0, 1, 0, 0});
    nx_tensor *fp3 = make(ctx, NX_DTYPE_F64, 3, e3, (double[]){1, 1, 1, 1, 1, 1, 1, 1});
    nx_tensor *h = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F16, 2, s, &h), NX_OK);
    nx_morph_opts o = {.backend = NX_BACKEND_REF};
    o.footprint = nanfp;
    expect_error(ctx, NX_ERR_INVALID_ARG, "NaN", NX_MORPH_DILATE, x, &o);
    nx_tensor *zero = make(ctx, NX_DTYPE_BOOL, 2, es, (double[]){0, 0, 0, 0});
    o.footprint = zero;
    expect_error(ctx, NX_ERR_INVALID_ARG, "all zero", NX_MORPH_DILATE, x, &o);
    nx_tensor_free(zero);
    o.footprint = NULL;
    o.structure = infse;
    expect_error(ctx, NX_ERR_INVALID_ARG, "finite", NX_MORPH_ERODE, x, &o);
    o.structure = intse;
    expect_error(ctx, NX_ERR_DTYPE, "structure is i32", NX_MORPH_ERODE, x, &o);
    o.structure = NULL;
    o.footprint = fp3;
    expect_error(ctx, NX_ERR_SHAPE, "footprint has 3 dims", NX_MORPH_OPEN, x, &o);
    o.footprint = nanfp;
    o.structure = fp3;
    expect_error(ctx, NX_ERR_SHAPE, "different shapes", NX_MORPH_OPEN, x, &o);
    o = (nx_morph_opts){.backend = NX_BACKEND_REF, .size = {3, -1}};
    expect_error(ctx, NX_ERR_INVALID_ARG, "extent -1", NX_MORPH_CLOSE, x, &o);
    o = (nx_morph_opts){.backend = NX_BACKEND_REF, .nspatial = 3};
    expect_error(ctx, NX_ERR_SHAPE, "spatial", NX_MORPH_DILATE, x, &o);
    o = (nx_morph_opts){.backend = NX_BACKEND_REF, .nspatial = 5};
    expect_error(ctx, NX_ERR_INVALID_ARG, "nspatial", NX_MORPH_DILATE, x, &o);
    o = (nx_morph_opts){.backend = NX_BACKEND_REF, .border = NX_MORPH_BORDER_COUNT};
    expect_error(ctx, NX_ERR_INVALID_ARG, "border", NX_MORPH_DILATE, x, &o);
    o = (nx_morph_opts){.border = NX_MORPH_BORDER_CONSTANT, .cval = NAN};
    expect_error(ctx, NX_ERR_INVALID_ARG, "cval", NX_MORPH_DILATE, x, &o);
    o = (nx_morph_opts){.backend = NX_BACKEND_REF};
    expect_error(ctx, NX_ERR_INVALID_ARG, "not an nx_morph_op", NX_MORPH_OP_COUNT, x, &o);
    expect_error(ctx, NX_ERR_DTYPE, "f16", NX_MORPH_DILATE, h, &o);
    expect_error(ctx, NX_ERR_INVALID_ARG, "x is NULL", NX_MORPH_DILATE, NULL, &o);
    assert_int_equal(nx_morph(ctx, NX_MORPH_DILATE, x, &o, NULL), NX_ERR_INVALID_ARG);
    /* Elements larger than the image are fine under SAME (the border rule repeats). */
    o.size[0] = 9;
    o.size[1] = 11;
    nx_tensor *y = NULL;
    assert_int_equal(nx_morph(ctx, NX_MORPH_DILATE, x, &o, &y), NX_OK);
    nx_tensor_free(y);
    /* The node builder reports through the graph. */
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node xi = nx_input(g, "x", NX_DTYPE_I32, 2, s);
    assert_int_equal(nx_morph_node(g, NX_MORPH_DILATE, xi, NULL), NX_NONE);
    assert_int_equal(nx_graph_status(g), NX_ERR_DTYPE);
    assert_non_null(strstr(nx_graph_error(g), "expected f32 or f64"));
    nx_graph_free(g);
    nx_tensor_free(x);
    nx_tensor_free(nanfp);
    nx_tensor_free(infse);
    nx_tensor_free(intse);
    nx_tensor_free(fp3);
    nx_tensor_free(h);
    nx_ctx_free(ctx);
}

/* distance_transform_cdt golden cases, f64 and f32 masks; scipy's -1 (no zero) is +inf here. */
static void test_cdt_golden(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    char names[16][64], metric[32];
    int cases = nx_test_golden_cases("morphology", "distance_transform", names, 16), n = 0;
    for (int c = 0; c < cases; c++) {
        const char *name = names[c];
        assert_non_null(option(name, "metric", metric, sizeof metric, NULL));
        nx_distance_opts o = {.backend = NX_BACKEND_REF,
                              .metric = strcmp(metric, "taxicab") ? NX_DISTANCE_CHESSBOARD
                                                                  : NX_DISTANCE_TAXICAB};
        nx_tensor *m = load(ctx, name, "mask"), *want = load(ctx, name, "out"), *got = NULL;
        if (nx_distance_transform(ctx, m, &o, &got) != NX_OK)
            fail_msg("%s: %s", name, nx_ctx_last_error(ctx));
        assert_equal_tensors(got, want, name);
        nx_tensor_free(got);
        nx_tensor *m32 = NULL, *w32 = NULL;
        assert_int_equal(nx_tensor_cast(m, NX_DTYPE_F32, &m32), NX_OK);
        assert_int_equal(nx_tensor_cast(want, NX_DTYPE_F32, &w32), NX_OK);
        assert_int_equal(nx_distance_transform(ctx, m32, &o, &got), NX_OK);
        assert_equal_tensors(got, w32, name);
        nx_tensor_free(got);
        nx_tensor_free(m32);
        nx_tensor_free(w32);
        nx_tensor_free(m);
        nx_tensor_free(want);
        n++;
    }
    assert_int_equal(n, 7);
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

/* The per-axis contraction differentiated through nx_graph_grad against central differences of
 * the same fragment, on a finite field with distinct values (no ties within 1e-6). */
static void test_cdt_grad(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t s[2] = {4, 5};
    double xv[20];
    for (int i = 0; i < 20; i++)
        xv[i] = 0.05 + (double)((i * 7) % 20) * 0.313; /* never an integer: no tie with |q - p| */
    for (int metric = 0; metric < NX_DISTANCE_METRIC_COUNT; metric++) {
        nx_graph *g = NULL;
        assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
        nx_node x = nx_parameter(g, "f", NX_DTYPE_F64, 2, s);
        nx_node y = nx_distance_node(g, x, (nx_distance_metric)metric);
        double wv[20];
        for (int i = 0; i < 20; i++)
            wv[i] = 0.5 + (double)((i * 3) % 7) / 7;
        int all[2] = {0, 1};
        nx_node loss = nx_reduce(g, nx_mul(g, nx_constant(g, NX_DTYPE_F64, 2, s, wv), y), 2, all,
                                 NX_MONOID_SUM, false);
        nx_node dx = NX_NONE;
        assert_int_equal(nx_graph_grad(g, loss, 1, &x, &dx), NX_OK);
        nx_node outs[2] = {dx, loss};
        nx_compile_opts co = {.backend = NX_BACKEND_REF, .n_outputs = 2, .outputs = outs};
        nx_program *p = NULL;
        assert_int_equal(nx_graph_compile(g, &co, &p), NX_OK);
        nx_tensor *xt = make(ctx, NX_DTYPE_F64, 2, s, xv), *r[2] = {NULL, NULL};
        assert_int_equal(nx_program_run(p, (const nx_tensor *const[]){xt}, r), NX_OK);
        double *d = nx_tensor_data(xt), h = 1e-6;
        for (int i = 0; i < 20; i++) {
            double fd = 0;
            for (int sg = -1; sg <= 1; sg += 2) {
                nx_tensor *q[2] = {NULL, NULL};
                d[i] = xv[i] + sg * h;
                assert_int_equal(nx_program_run(p, (const nx_tensor *const[]){xt}, q), NX_OK);
                fd += sg * at(q[1], 0) / (2 * h);
                nx_tensor_free(q[0]);
                nx_tensor_free(q[1]);
                d[i] = xv[i];
            }
            if (!nx_test_close(at(r[0], i), fd, 1e-6, 1e-6))
                fail_msg("metric %d: dL/df[%d] is %.10g; finite differences give %.10g", metric, i,
                         at(r[0], i), fd);
        }
        nx_tensor_free(r[0]);
        nx_tensor_free(r[1]);
        nx_tensor_free(xt);
        nx_program_free(p);
        nx_graph_free(g);
    }
    nx_ctx_free(ctx);
}

/* Whether ctx reaches a GPU (a tensor goes to the device). */
static bool edt_gpu(nx_ctx *ctx)
{
    int64_t one = 1;
    nx_tensor *h = NULL, *d = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, 1, &one, &h), NX_OK);
    bool ok = nx_tensor_to_device(h, NX_DEVICE_CUDA, &d) == NX_OK;
    nx_tensor_free(d);
    nx_tensor_free(h);
    return ok;
}

/* The fast driver on the cuda backend (its device chain) from a host mask and from a device mask
 * (whose result stays on the device), against scipy. */
static void edt_golden_cuda(nx_ctx *ctx, const char *name, const nx_tensor *m, const double *s,
                            const nx_tensor *want, double rtol)
{
    nx_edt_opts o = {.backend = NX_BACKEND_CUDA, .sampling = s, .driver = "felzenszwalb"};
    nx_tensor *md = NULL, *got[2] = {NULL, NULL}, *gd = NULL;
    assert_int_equal(nx_tensor_to_device(m, NX_DEVICE_CUDA, &md), NX_OK);
    if (nx_distance_transform_edt(ctx, m, &o, &got[0]) != NX_OK ||
        nx_distance_transform_edt(ctx, md, &o, &gd) != NX_OK)
        fail_msg("%s on cuda: %s", name, nx_ctx_last_error(ctx));
    assert_int_equal(nx_tensor_device(got[0]), NX_DEVICE_HOST);
    assert_int_equal(nx_tensor_device(gd), NX_DEVICE_CUDA);
    assert_int_equal(nx_tensor_to_device(gd, NX_DEVICE_HOST, &got[1]), NX_OK);
    for (int j = 0; j < 2; j++)
        for (int64_t i = 0; i < nx_tensor_numel(want); i++)
            if (!nx_test_close(at(got[j], i), at(want, i), rtol, 0))
                fail_msg("%s (cuda, %s mask): element %lld is %.17g; scipy gives %.17g", name,
                         j ? "device" : "host", (long long)i, at(got[j], i), at(want, i));
    nx_tensor_free(got[0]);
    nx_tensor_free(got[1]);
    nx_tensor_free(gd);
    nx_tensor_free(md);
}

/* distance_transform_edt to 1e-10 relative in f64 and 1e-4 in f32, isotropic and anisotropic;
 * with a GPU, the fast driver on the cuda backend too. */
static void test_edt_golden(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    bool gpu = edt_gpu(ctx);
    char names[16][64], samp[128];
    int cases = nx_test_golden_cases("morphology", "distance_transform_edt", names, 16), n = 0;
    for (int c = 0; c < cases; c++) {
        const char *name = names[c];
        assert_non_null(option(name, "sampling", samp, sizeof samp, NULL));
        double sampling[NX_MAX_DIMS];
        char *p = samp;
        for (int i = 0; *p && i < NX_MAX_DIMS; i++) {
            sampling[i] = strtod(p, &p);
            if (*p == ',')
                p++;
        }
        nx_tensor *m = load(ctx, name, "mask"), *want = load(ctx, name, "out"), *got = NULL;
        nx_tensor *m32 = NULL, *m64 = NULL; /* the larger masks are stored as u8 */
        assert_int_equal(nx_tensor_cast(m, NX_DTYPE_F32, &m32), NX_OK);
        assert_int_equal(nx_tensor_cast(m, NX_DTYPE_F64, &m64), NX_OK);
        /* both drivers, both dtypes, on the interpreter and the CPU backend */
        static const char *drivers[] = {"separable", "felzenszwalb"};
        for (int c = 0; c < 8; c++) {
            int k = c & 1;
            nx_edt_opts o = {.backend = c & 4 ? NX_BACKEND_CPU : NX_BACKEND_REF,
                             .sampling = sampling,
                             .driver = drivers[(c >> 1) & 1]};
            if (nx_distance_transform_edt(ctx, k ? m32 : m64, &o, &got) != NX_OK)
                fail_msg("%s: %s", name, nx_ctx_last_error(ctx));
            double rtol = k ? 1e-4 : 1e-10;
            for (int64_t i = 0; i < nx_tensor_numel(want); i++)
                if (!nx_test_close(at(got, i), at(want, i), rtol, 0))
                    fail_msg("%s (%s, %s, %s): element %lld is %.17g; scipy gives %.17g", name,
                             k ? "f32" : "f64", o.driver, c & 4 ? "cpu" : "ref", (long long)i,
                             at(got, i), at(want, i));
            nx_tensor_free(got);
        }
        if (gpu) {
            edt_golden_cuda(ctx, name, m32, sampling, want, 1e-4);
            edt_golden_cuda(ctx, name, m64, sampling, want, 1e-10);
        }
        nx_tensor_free(m32);
        nx_tensor_free(m64);
        nx_tensor_free(m);
        nx_tensor_free(want);
        n++;
    }
    assert_int_equal(n, 9);
    /* Refused: a sampling that is not finite and positive. */
    int64_t s = 3;
    nx_tensor *m = make(ctx, NX_DTYPE_F64, 1, &s, (double[]){1, 0, 1}), *y = NULL;
    nx_edt_opts bad = {.backend = NX_BACKEND_REF, .sampling = (double[]){0.0}};
    assert_int_equal(nx_distance_transform_edt(ctx, m, &bad, &y), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "sampling[0]"));
    assert_null(y);
    nx_tensor_free(m);
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

/* scipy.ndimage.label: equal labels (raster numbering), not just the same partition. */
static void test_label_golden(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    char names[16][64], b1[16], b2[16];
    int cases = nx_test_golden_cases("morphology", "connected_components", names, 16), n = 0;
    for (int c = 0; c < cases; c++) {
        const char *name = names[c];
        assert_non_null(option(name, "connectivity", b1, sizeof b1, NULL));
        assert_true(nx_test_golden_field("morphology", name, "count", b2, sizeof b2));
        int conn = atoi(b1), k = atoi(b2);
        nx_tensor *m = load(ctx, name, "mask"), *want = load(ctx, name, "out"), *got = NULL;
        int32_t count = -1;
        if (nx_connected_components(ctx, m, conn, &got, &count) != NX_OK)
            fail_msg("%s: %s", name, nx_ctx_last_error(ctx));
        assert_int_equal(count, k);
        assert_int_equal(nx_tensor_dtype(got), NX_DTYPE_I32);
        assert_memory_equal(nx_tensor_data(got), nx_tensor_data(want),
                            (size_t)nx_tensor_numel(want) * sizeof(int32_t));
        nx_tensor_free(got);
        nx_tensor_free(m);
        nx_tensor_free(want);
        n++;
    }
    assert_int_equal(n, 11);
    int64_t s = 4, s7 = 7;
    nx_tensor *m = make(ctx, NX_DTYPE_F64, 1, &s, (double[]){1, 0, 1, 1}), *y = NULL;
    /* Largest component by hand: sizes 2, 2, 1 -> the first (lowest label) wins the tie. */
    nx_tensor *t = make(ctx, NX_DTYPE_F64, 1, &s7, (double[]){0, 1, 1, 0, 1, 1, 0});
    assert_int_equal(nx_largest_connected_component(ctx, t, 1, &y), NX_OK);
    uint8_t want_l[7] = {0, 1, 1, 0, 0, 0, 0};
    assert_memory_equal(nx_tensor_data(y), want_l, 7);
    nx_tensor_free(y);
    nx_tensor_free(t);
    t = make(ctx, NX_DTYPE_F64, 1, &s7, (double[]){0, 0, 0, 0, 0, 0, 0});
    assert_int_equal(nx_largest_connected_component(ctx, t, 1, &y), NX_OK);
    uint8_t none[7] = {0};
    assert_memory_equal(nx_tensor_data(y), none, 7);
    nx_tensor_free(y);
    nx_tensor_free(t);
    assert_int_equal(nx_connected_components(ctx, m, 2, &y, NULL), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "connectivity 2"));
    assert_int_equal(nx_connected_components(ctx, m, 0, &y, NULL), NX_ERR_INVALID_ARG);
    assert_null(y);
    nx_tensor_free(m);
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

static void test_cdt_errors(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t s[2] = {3, 3}, e[2] = {0, 3};
    nx_tensor *m = NULL, *h = NULL, *y = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F16, 2, s, &h), NX_OK);
    nx_distance_opts o = {.backend = NX_BACKEND_REF, .metric = NX_DISTANCE_METRIC_COUNT};
    double v[9] = {1, 1, 1, 1, NAN, 1, 1, 1, 0};
    m = make(ctx, NX_DTYPE_F64, 2, s, v);
    assert_int_equal(nx_distance_transform(ctx, m, &o, &y), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "metric"));
    o.metric = NX_DISTANCE_CHESSBOARD;
    assert_int_equal(nx_distance_transform(ctx, h, &o, &y), NX_ERR_DTYPE);
    assert_int_equal(nx_distance_transform(ctx, NULL, &o, &y), NX_ERR_INVALID_ARG);
    /* NaN counts as foreground: the centre is 1 from the zero in the corner (chessboard). */
    assert_int_equal(nx_distance_transform(ctx, m, &o, &y), NX_OK);
    assert_true(at(y, 4) == 1 && at(y, 0) == 2 && at(y, 8) == 0);
    nx_tensor_free(y);
    nx_tensor_free(m);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_BOOL, 2, e, &m), NX_OK);
    assert_int_equal(nx_distance_transform(ctx, m, &o, &y), NX_OK);
    assert_int_equal(nx_tensor_numel(y), 0);
    nx_tensor_free(y);
    nx_tensor_free(m);
    nx_tensor_free(h);
    nx_ctx_free(ctx);
}

static void assert_values(const nx_tensor *t, const double *want, int64_t n, const char *what)
{
    assert_int_equal(nx_tensor_numel(t), n);
    for (int64_t i = 0; i < n; i++)
        if (!(at(t, i) == want[i] || (isnan(at(t, i)) && isnan(want[i]))))
            fail_msg("%s: element %lld is %.17g; expected %.17g", what, (long long)i, at(t, i),
                     want[i]);
}

/* The bad input, each with a defined result or a clear error: non-finite values in masks
 * and images, empty arrays, even windows, elements larger than the image. Values by hand (and
 * equal to scipy 1.10 where scipy defines them). */
static void test_bad_input(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t s5 = 5, s7 = 7, s3 = 3, s4 = 4;
    /* NaN and +inf in a mask are foreground (nonzero), for both EDT drivers and the labels */
    nx_tensor *m = make(ctx, NX_DTYPE_F64, 1, &s5, (double[]){1, NAN, 0, INFINITY, 1}), *y = NULL;
    static const char *drivers[] = {"separable", "felzenszwalb"};
    for (int d = 0; d < 2; d++) {
        nx_edt_opts eo = {.backend = NX_BACKEND_CPU, .driver = drivers[d]};
        assert_int_equal(nx_distance_transform_edt(ctx, m, &eo, &y), NX_OK);
        assert_values(y, (double[]){2, 1, 0, 1, 2}, 5, drivers[d]);
        nx_tensor_free(y);
    }
    nx_tensor_free(m);
    m = make(ctx, NX_DTYPE_F32, 1, &s4, (double[]){NAN, 0, 1, INFINITY});
    int32_t k = 0;
    assert_int_equal(nx_connected_components(ctx, m, 1, &y, &k), NX_OK);
    assert_int_equal(k, 2);
    const int32_t *l = nx_tensor_data(y);
    assert_true(l[0] == 1 && l[1] == 0 && l[2] == 2 && l[3] == 2);
    nx_tensor_free(y);
    nx_tensor_free(m);
    /* NaN in a median's window sorts last: the middle rank is NaN only when NaN fills it */
    nx_tensor *x = make(ctx, NX_DTYPE_F64, 1, &s7, (double[]){1, NAN, 3, 2, NAN, NAN, 5});
    nx_morph_opts mo = {.backend = NX_BACKEND_CPU, .size = {3}, .border = NX_MORPH_BORDER_NEAREST};
    assert_int_equal(nx_median_filter(ctx, x, &mo, &y), NX_OK);
    assert_values(y, (double[]){1, 3, 3, 3, NAN, NAN, 5}, 7, "median with NaN");
    nx_tensor_free(y);
    nx_tensor_free(x);
    /* Elements larger than the image: SAME extends by the border rule, as scipy */
    x = make(ctx, NX_DTYPE_F64, 1, &s3, (double[]){3, 1, 2});
    mo = (nx_morph_opts){.backend = NX_BACKEND_CPU, .size = {5}};
    assert_int_equal(nx_median_filter(ctx, x, &mo, &y), NX_OK);
    assert_values(y, (double[]){2, 2, 2}, 3, "median 5 of 3, reflect");
    nx_tensor_free(y);
    mo.size[0] = 7;
    mo.border = NX_MORPH_BORDER_WRAP;
    assert_int_equal(nx_median_filter(ctx, x, &mo, &y), NX_OK);
    assert_values(y, (double[]){2, 2, 2}, 3, "median 7 of 3, wrap");
    nx_tensor_free(y);
    mo.border = NX_MORPH_BORDER_CONSTANT;
    mo.cval = -1;
    assert_int_equal(nx_morph(ctx, NX_MORPH_DILATE, x, &mo, &y), NX_OK);
    assert_values(y, (double[]){3, 3, 3}, 3, "dilate 7 of 3, constant");
    nx_tensor_free(y);
    /* ... and VALID has no window: a clear error, for the box, the footprint and the median */
    mo.padding = NX_MORPH_VALID;
    assert_int_equal(nx_morph(ctx, NX_MORPH_DILATE, x, &mo, &y), NX_ERR_SHAPE);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "no larger than the image"));
    assert_int_equal(nx_median_filter(ctx, x, &mo, &y), NX_ERR_SHAPE);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "no larger than the image"));
    assert_null(y);
    nx_tensor_free(x);
    /* Even windows: the centre is w / 2 (scipy's origin 0): median of 4 is the upper middle */
    x = make(ctx, NX_DTYPE_F64, 1, &s5, (double[]){5, 1, 4, 2, 3});
    mo = (nx_morph_opts){.backend = NX_BACKEND_CPU, .size = {4}, .border = NX_MORPH_BORDER_NEAREST};
    assert_int_equal(nx_median_filter(ctx, x, &mo, &y), NX_OK);
    /* windows x[i-2 .. i+1] with nearest: [5 5 5 1] [5 5 1 4] [5 1 4 2] [1 4 2 3] [4 2 3 3] */
    assert_values(y, (double[]){5, 5, 4, 3, 3}, 5, "median of 4");
    nx_tensor_free(y);
    assert_int_equal(nx_morph(ctx, NX_MORPH_ERODE, x, &mo, &y), NX_OK);
    assert_values(y, (double[]){1, 1, 1, 1, 2}, 5, "erode by 4");
    nx_tensor_free(y);
    nx_tensor_free(x);
    /* Empty arrays: empty results of the same shape, no labels */
    int64_t e[2] = {0, 4};
    nx_tensor *z = make(ctx, NX_DTYPE_F32, 2, e, NULL);
    mo = (nx_morph_opts){.backend = NX_BACKEND_CPU};
    assert_int_equal(nx_median_filter(ctx, z, &mo, &y), NX_OK);
    assert_int_equal(nx_tensor_numel(y), 0);
    nx_tensor_free(y);
    assert_int_equal(nx_distance_transform_edt(ctx, z, NULL, &y), NX_OK);
    assert_int_equal(nx_tensor_numel(y), 0);
    assert_int_equal(nx_tensor_ndim(y), 2);
    nx_tensor_free(y);
    k = -1;
    assert_int_equal(nx_connected_components(ctx, z, 2, &y, &k), NX_OK);
    assert_int_equal(k, 0);
    assert_int_equal(nx_tensor_numel(y), 0);
    nx_tensor_free(y);
    assert_int_equal(nx_largest_connected_component(ctx, z, 1, &y), NX_OK);
    assert_int_equal(nx_tensor_numel(y), 0);
    nx_tensor_free(y);
    nx_tensor_free(z);
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

/* Labels read the mask in its own dtype and through strided views: each dtype of one scipy case,
 * and the case as a view that skips the last three columns of a wider tensor, give scipy's
 * labels. */
static void test_label_dtypes_views(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    nx_tensor *m = load(ctx, "cc3_slabs_c2", "mask"), *want = load(ctx, "cc3_slabs_c2", "out");
    size_t bytes = (size_t)nx_tensor_numel(want) * sizeof(int32_t);
    static const nx_dtype dts[] = {NX_DTYPE_BOOL, NX_DTYPE_I8,  NX_DTYPE_I16, NX_DTYPE_I32,
                                   NX_DTYPE_I64,  NX_DTYPE_F32, NX_DTYPE_F64, NX_DTYPE_U8};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        nx_tensor *c = NULL, *got = NULL;
        assert_int_equal(nx_tensor_cast(m, dts[d], &c), NX_OK);
        assert_int_equal(nx_connected_components(ctx, c, 2, &got, NULL), NX_OK);
        if (memcmp(nx_tensor_data(got), nx_tensor_data(want), bytes) != 0)
            fail_msg("cc3_slabs_c2 as %s: labels differ from scipy's", nx_dtype_name(dts[d]));
        nx_tensor_free(got);
        nx_tensor_free(c);
    }
    const int64_t *sh = nx_tensor_shape(m);
    int64_t wide[3] = {sh[0], sh[1], sh[2] + 3};
    nx_tensor *w = NULL, *v = NULL, *got = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_U8, 3, wide, &w), NX_OK);
    uint8_t *wd = nx_tensor_data(w);
    const uint8_t *md = nx_tensor_data(m);
    for (int64_t i = 0; i < sh[0] * sh[1]; i++)
        for (int64_t k = 0; k < wide[2]; k++)
            wd[i * wide[2] + k] = k < sh[2] ? md[i * sh[2] + k] : 1; /* the skipped columns: 1 */
    assert_int_equal(nx_tensor_slice(w, 2, 0, sh[2], 1, &v), NX_OK);
    assert_false(nx_tensor_is_contiguous(v));
    assert_int_equal(nx_connected_components(ctx, v, 2, &got, NULL), NX_OK);
    assert_memory_equal(nx_tensor_data(got), nx_tensor_data(want), bytes);
    nx_tensor_free(got);
    nx_tensor_free(v);
    nx_tensor_free(w);
    nx_tensor_free(m);
    nx_tensor_free(want);
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

/* Device tensors: without a usable GPU, nx_tensor_to_device says why (NX_ERR_BACKEND) and there
 * is nothing more to run. With one, the graph ops on device inputs under the cuda backend equal
 * their host results and stay on the device, the same inputs under the cpu backend are refused
 * naming the tensor, the EDT's fast driver runs on the device (a host backend refuses its device
 * mask), and the host ops (chamfer, labels) refuse device masks. */
static void test_device_tensors(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t s[3] = {9, 8, 7};
    double v[504];
    for (int i = 0; i < 504; i++)
        v[i] = (double)((i * 37) % 11) - 5;
    nx_tensor *x = make(ctx, NX_DTYPE_F32, 3, s, v), *xd = NULL, *y = NULL, *yd = NULL, *yh = NULL;
    nx_status st = nx_tensor_to_device(x, NX_DEVICE_CUDA, &xd);
    if (st != NX_OK) {
        assert_int_equal(st, NX_ERR_BACKEND);
        assert_true(strlen(nx_ctx_last_error(ctx)) > 0);
        assert_null(xd);
        nx_tensor_free(x);
        nx_ctx_free(ctx);
        assert_int_equal(g_ta.live, 0);
        return;
    }
    for (int op = 0; op <= NX_MORPH_OP_COUNT; op++) {
        nx_morph_opts o = {.size = {3, 2, 3}, .backend = NX_BACKEND_CUDA}, h = o;
        h.backend = NX_BACKEND_CPU;
        bool med = op == NX_MORPH_OP_COUNT;
        st = med ? nx_median_filter(ctx, xd, &o, &yd) : nx_morph(ctx, op, xd, &o, &yd);
        if (st != NX_OK)
            fail_msg("op %d on the device: %s", op, nx_ctx_last_error(ctx));
        assert_int_equal(nx_tensor_device(yd), NX_DEVICE_CUDA);
        assert_int_equal(med ? nx_median_filter(ctx, x, &h, &y) : nx_morph(ctx, op, x, &h, &y),
                         NX_OK);
        assert_int_equal(nx_tensor_to_device(yd, NX_DEVICE_HOST, &yh), NX_OK);
        assert_memory_equal(nx_tensor_data(yh), nx_tensor_data(y), 504 * sizeof(float));
        nx_tensor_free(yh);
        nx_tensor_free(yd);
        nx_tensor_free(y);
        yh = yd = y = NULL;
        st = med ? nx_median_filter(ctx, xd, &h, &y) : nx_morph(ctx, op, xd, &h, &y);
        assert_int_equal(st, NX_ERR_UNSUPPORTED);
        assert_non_null(strstr(nx_ctx_last_error(ctx), "x is a CUDA device tensor"));
    }
    nx_pool_opts po = {.nspatial = 2, .kernel = {2, 2}, .backend = NX_BACKEND_CUDA};
    nx_tensor *idx = NULL;
    assert_int_equal(nx_max_pool_with_indices_nd(ctx, xd, &po, &yd, &idx), NX_OK);
    assert_int_equal(nx_tensor_device(yd), NX_DEVICE_CUDA);
    nx_tensor_free(idx);
    nx_tensor_free(yd);
    /* the EDT's fast driver runs on the device (its device chain); a host backend refuses */
    nx_edt_opts eo = {.backend = NX_BACKEND_CUDA, .driver = "felzenszwalb"};
    assert_int_equal(nx_distance_transform_edt(ctx, xd, &eo, &yd), NX_OK);
    assert_int_equal(nx_tensor_device(yd), NX_DEVICE_CUDA);
    eo.backend = NX_BACKEND_CPU;
    assert_int_equal(nx_distance_transform_edt(ctx, x, &eo, &y), NX_OK);
    assert_int_equal(nx_tensor_to_device(yd, NX_DEVICE_HOST, &yh), NX_OK);
    assert_memory_equal(nx_tensor_data(yh), nx_tensor_data(y), 504 * sizeof(float));
    nx_tensor_free(yh);
    nx_tensor_free(yd);
    nx_tensor_free(y);
    yh = yd = y = NULL;
    assert_int_equal(nx_distance_transform_edt(ctx, xd, &eo, &y), NX_ERR_UNSUPPORTED);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "mask is a CUDA device tensor"));
    nx_distance_opts dopt = {.metric = NX_DISTANCE_TAXICAB};
    assert_int_equal(nx_distance_transform(ctx, xd, &dopt, &y), NX_ERR_UNSUPPORTED);
    /* a device mask is labelled on the device (label propagation): scipy's labels, as the host's */
    int32_t kd = -1, kh = -2;
    assert_int_equal(nx_connected_components(ctx, xd, 1, &yd, &kd), NX_OK);
    assert_int_equal(nx_tensor_device(yd), NX_DEVICE_CUDA);
    assert_int_equal(nx_connected_components(ctx, x, 1, &y, &kh), NX_OK);
    assert_int_equal(kd, kh);
    assert_int_equal(nx_tensor_to_device(yd, NX_DEVICE_HOST, &yh), NX_OK);
    assert_memory_equal(nx_tensor_data(yh), nx_tensor_data(y), 504 * sizeof(int32_t));
    nx_tensor_free(yh);
    nx_tensor_free(yd);
    nx_tensor_free(y);
    y = NULL;
    nx_tensor_free(xd);
    nx_tensor_free(x);
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

static nx_status sweep_body(nx_ctx *ctx, void *user)
{
    (void)user;
    int64_t s[2] = {3, 4}, es[2] = {2, 3};
    nx_tensor *x = NULL, *se = NULL, *y = NULL, *dx = NULL;
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F64, 2, s, &x);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F64, 2, es, &se);
    if (st == NX_OK) {
        memset(nx_tensor_data(x), 0, 12 * sizeof(double));
        memset(nx_tensor_data(se), 0, 6 * sizeof(double));
        nx_morph_opts o = {.backend = NX_BACKEND_REF, .structure = se};
        st = nx_morph(ctx, NX_MORPH_CLOSE, x, &o, &y);
        if (st == NX_OK)
            st = nx_morph_vjp(ctx, NX_MORPH_OPEN, x, y, &o, &dx);
        nx_tensor_free(dx);
        dx = NULL;
        nx_distance_opts d = {.backend = NX_BACKEND_REF, .metric = NX_DISTANCE_TAXICAB};
        if (st == NX_OK)
            st = nx_distance_transform(ctx, x, &d, &dx);
        nx_tensor_free(dx);
        dx = NULL;
        double *xd = nx_tensor_data(x);
        xd[1] = xd[2] = xd[6] = xd[11] = 1; /* runs to join for the labels */
        if (st == NX_OK)
            st = nx_largest_connected_component(ctx, x, 2, &dx);
        memset(xd, 0, 12 * sizeof(double));
        nx_tensor_free(dx);
        dx = NULL;
        nx_edt_opts eo = {.backend = NX_BACKEND_REF, .driver = "felzenszwalb"};
        if (st == NX_OK)
            st = nx_distance_transform_edt(ctx, x, &eo, &dx);
        nx_tensor_free(dx);
        dx = NULL;
        eo.driver = "separable";
        if (st == NX_OK)
            st = nx_distance_transform_edt(ctx, x, &eo, &dx);
        nx_tensor_free(dx);
        dx = NULL;
        nx_morph_opts mo = {.backend = NX_BACKEND_REF};
        if (st == NX_OK)
            st = nx_median_filter(ctx, x, &mo, &dx);
    }
    nx_tensor_free(dx);
    nx_tensor_free(y);
    nx_tensor_free(se);
    nx_tensor_free(x);
    return st;
}

static void test_alloc_sweep(void **state)
{
    (void)state;
    assert_true(nx_test_alloc_sweep(sweep_body, NULL, 20000) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_ref),
        cmocka_unit_test(test_golden_cpu),
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_first_winner),
        cmocka_unit_test(test_grad_fd),
        cmocka_unit_test(test_grad_fd_large),
        cmocka_unit_test(test_huge_window),
        cmocka_unit_test(test_compile_budget),
        cmocka_unit_test(test_batch_and_dtypes),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_alloc_sweep),
        cmocka_unit_test(test_cdt_golden),
        cmocka_unit_test(test_cdt_grad),
        cmocka_unit_test(test_cdt_errors),
        cmocka_unit_test(test_edt_golden),
        cmocka_unit_test(test_label_golden),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_label_dtypes_views),
        cmocka_unit_test(test_device_tensors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
