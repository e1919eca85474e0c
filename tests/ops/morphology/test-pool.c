/* Max pooling with indices and max unpooling against a NumPy float64 brute force
 * (tools/gen-morphology-golden.py: PyTorch's rules, first max in window order), on the interpreter
 * and the CPU backend; gradients against the golden indices (pool: dy scattered to the winner;
 * unpool: dy gathered at the index) and against finite differences; hand-checked all -inf and NaN
 * windows; bad input; the allocation sweep. */
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

/* golden/morphology/<name>/<key>.npy; the unpool's output is the out.npy of <name>_unpool. */
static nx_tensor *load(nx_ctx *ctx, const char *name, const char *key)
{
    if (strcmp(key, "unpool") == 0) {
        char unpool[80];
        snprintf(unpool, sizeof unpool, "%s_unpool", name);
        return nx_test_golden_npy(ctx, "morphology", unpool, "out");
    }
    return nx_test_golden_npy(ctx, "morphology", name, key);
}

static double at(const nx_tensor *t, int64_t i)
{
    const void *d = nx_tensor_data(t);
    switch (nx_tensor_dtype(t)) {
    case NX_DTYPE_F32:
        return ((const float *)d)[i];
    case NX_DTYPE_F64:
        return ((const double *)d)[i];
    case NX_DTYPE_I64:
        return (double)((const int64_t *)d)[i];
    default:
        fail_msg("unexpected dtype %s", nx_dtype_name(nx_tensor_dtype(t)));
        return 0;
    }
}

static void set(nx_tensor *t, int64_t i, double v)
{
    if (nx_tensor_dtype(t) == NX_DTYPE_F32)
        ((float *)nx_tensor_data(t))[i] = (float)v;
    else
        ((double *)nx_tensor_data(t))[i] = v;
}

static nx_tensor *make(nx_ctx *ctx, nx_dtype dt, int ndim, const int64_t *shape, const double *v)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, dt, ndim, shape, &t), NX_OK);
    for (int64_t i = 0; i < nx_tensor_numel(t); i++)
        set(t, i, v ? v[i] : 0);
    return t;
}

static void assert_same(const nx_tensor *got, const nx_tensor *want, const char *what)
{
    assert_int_equal(nx_tensor_dtype(got), nx_tensor_dtype(want));
    assert_int_equal(nx_tensor_ndim(got), nx_tensor_ndim(want));
    assert_memory_equal(nx_tensor_shape(got), nx_tensor_shape(want),
                        (size_t)nx_tensor_ndim(want) * sizeof(int64_t));
    for (int64_t i = 0; i < nx_tensor_numel(want); i++)
        if (at(got, i) != at(want, i) && !(isnan(at(got, i)) && isnan(at(want, i))))
            fail_msg("%s: element %lld is %.17g; NumPy gives %.17g", what, (long long)i,
                     at(got, i), at(want, i));
}

typedef struct pool_case {
    char name[64];
    nx_pool_opts o;
} pool_case;

/* The pooling cases of golden/morphology with their geometry (the manifests' options). */
static int read_cases(pool_case *cases, int max)
{
    char names[16][64];
    int n = nx_test_golden_cases("morphology", "max_pool_with_indices_nd", names, 16);
    assert_true(n <= max);
    for (int j = 0; j < n; j++) {
        char ns[8], k[32], s[32], p[32];
        pool_case *c = &cases[j];
        memset(c, 0, sizeof *c);
        snprintf(c->name, sizeof c->name, "%.63s", names[j]);
        assert_true(nx_test_golden_option("morphology", c->name, "nspatial", ns, sizeof ns));
        assert_true(nx_test_golden_option("morphology", c->name, "kernel", k, sizeof k));
        assert_true(nx_test_golden_option("morphology", c->name, "stride", s, sizeof s));
        assert_true(nx_test_golden_option("morphology", c->name, "padding", p, sizeof p));
        c->o.nspatial = atoi(ns);
        char *a = k, *b = s, *q = p;
        for (int i = 0; i < c->o.nspatial; i++) {
            c->o.kernel[i] = strtoll(a, &a, 10);
            c->o.stride[i] = strtoll(b, &b, 10);
            c->o.padding[i] = strtoll(q, &q, 10);
            a += *a == ',', b += *b == ',', q += *q == ',';
        }
    }
    return n;
}

/* The unpool goes back to x's spatial shape. */
static void unpool_size(pool_case *c, const nx_tensor *x)
{
    int nd = nx_tensor_ndim(x);
    for (int i = 0; i < c->o.nspatial; i++)
        c->o.output_size[i] = nx_tensor_shape(x)[nd - 1 - c->o.nspatial + i];
}

static void golden_case(nx_ctx *ctx, pool_case *c, nx_backend be)
{
    nx_tensor *x = load(ctx, c->name, "x"), *wv = load(ctx, c->name, "values");
    nx_tensor *wi = load(ctx, c->name, "indices"), *wu = load(ctx, c->name, "unpool");
    nx_tensor *v = NULL, *idx = NULL, *u = NULL;
    c->o.backend = be;
    unpool_size(c, x);
    if (nx_max_pool_with_indices_nd(ctx, x, &c->o, &v, &idx) != NX_OK)
        fail_msg("%s: %s", c->name, nx_ctx_last_error(ctx));
    assert_same(v, wv, c->name);
    assert_same(idx, wi, c->name);
    if (nx_max_unpool_nd(ctx, v, idx, &c->o, &u) != NX_OK)
        fail_msg("%s unpool: %s", c->name, nx_ctx_last_error(ctx));
    assert_same(u, wu, c->name);
    nx_tensor_free(v);
    nx_tensor_free(idx);
    nx_tensor_free(u);
    nx_tensor_free(x);
    nx_tensor_free(wv);
    nx_tensor_free(wi);
    nx_tensor_free(wu);
}

static void test_golden(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    pool_case cases[16];
    int n = read_cases(cases, 16);
    assert_int_equal(n, 5);
    for (int i = 0; i < n; i++) {
        golden_case(ctx, &cases[i], NX_BACKEND_REF);
        golden_case(ctx, &cases[i], NX_BACKEND_CPU);
    }
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

/* Cotangents against the golden indices, by loops here: the pool's dx is dy added at the flat
 * index of each output's winner (of its batch and channel); the unpool's dx is dy read there. */
static void grad_case(nx_ctx *ctx, pool_case *c)
{
    nx_tensor *x = load(ctx, c->name, "x"), *wv = load(ctx, c->name, "values");
    nx_tensor *wi = load(ctx, c->name, "indices");
    c->o.backend = NX_BACKEND_CPU;
    unpool_size(c, x);
    int nd = nx_tensor_ndim(x), d = c->o.nspatial;
    int64_t ch = nx_tensor_shape(x)[nd - 1], sp = 1, op = 1;
    for (int i = 0; i < d; i++) {
        sp *= nx_tensor_shape(x)[nd - 1 - d + i];
        op *= nx_tensor_shape(wv)[nd - 1 - d + i];
    }
    nx_dtype dt = nx_tensor_dtype(x);
    nx_tensor *dy = make(ctx, dt, nd, nx_tensor_shape(wv), NULL);
    nx_tensor *want = make(ctx, dt, nd, nx_tensor_shape(x), NULL), *dx = NULL;
    for (int64_t i = 0; i < nx_tensor_numel(dy); i++)
        set(dy, i, (double)(i % 7) - 2.5);
    for (int64_t i = 0; i < nx_tensor_numel(dy); i++) {
        int64_t b = i / (op * ch), c0 = i % ch;
        int64_t to = (b * sp + (int64_t)at(wi, i)) * ch + c0;
        set(want, to, at(want, to) + at(dy, i));
    }
    if (nx_max_pool_vjp(ctx, x, dy, &c->o, &dx) != NX_OK)
        fail_msg("%s vjp: %s", c->name, nx_ctx_last_error(ctx));
    assert_same(dx, want, c->name);
    nx_tensor_free(dx);
    /* unpool: a cotangent of x's shape, read at the indices */
    nx_tensor *du = NULL, *wdu = make(ctx, dt, nd, nx_tensor_shape(wv), NULL);
    for (int64_t i = 0; i < nx_tensor_numel(want); i++)
        set(want, i, (double)(i % 11) - 4.0);
    for (int64_t i = 0; i < nx_tensor_numel(wdu); i++) {
        int64_t b = i / (op * ch), c0 = i % ch;
        set(wdu, i, at(want, (b * sp + (int64_t)at(wi, i)) * ch + c0));
    }
    /* overlapping windows repeat indices: there only the last writer has the cotangent */
    bool repeats = false;
    for (int i = 0; i < d; i++)
        repeats = repeats || c->o.stride[i] < c->o.kernel[i];
    if (!repeats) {
        if (nx_max_unpool_vjp(ctx, wv, wi, want, &c->o, &du) != NX_OK)
            fail_msg("%s unpool vjp: %s", c->name, nx_ctx_last_error(ctx));
        assert_same(du, wdu, c->name);
    }
    nx_tensor_free(du);
    nx_tensor_free(wdu);
    nx_tensor_free(dy);
    nx_tensor_free(want);
    nx_tensor_free(x);
    nx_tensor_free(wv);
    nx_tensor_free(wi);
}

static void test_grad_indices(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    pool_case cases[16];
    int n = read_cases(cases, 16);
    for (int i = 0; i < n; i++)
        grad_case(ctx, &cases[i]);
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

/* Central differences in f64 on distinct values (no ties, so the max is smooth there). */
static void test_grad_fd(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t s[4] = {2, 5, 4, 2};
    nx_tensor *x = make(ctx, NX_DTYPE_F64, 4, s, NULL), *v = NULL, *idx = NULL;
    for (int64_t i = 0; i < nx_tensor_numel(x); i++)
        set(x, i, sin(1.7 * (double)i) * 3 + 0.01 * (double)i);
    nx_pool_opts o = {.backend = NX_BACKEND_CPU, .nspatial = 2, .kernel = {3, 2},
                      .stride = {2, 1}, .padding = {1, 1}};
    assert_int_equal(nx_max_pool_with_indices_nd(ctx, x, &o, &v, &idx), NX_OK);
    nx_tensor *dy = make(ctx, NX_DTYPE_F64, 4, nx_tensor_shape(v), NULL), *dx = NULL;
    for (int64_t i = 0; i < nx_tensor_numel(dy); i++)
        set(dy, i, cos((double)i));
    assert_int_equal(nx_max_pool_vjp(ctx, x, dy, &o, &dx), NX_OK);
    const double h = 1e-6;
    for (int64_t j = 0; j < nx_tensor_numel(x); j++) {
        double f[2];
        for (int k = 0; k < 2; k++) {
            double x0 = at(x, j);
            set(x, j, x0 + (k ? -h : h));
            nx_tensor *y = NULL, *yi = NULL;
            assert_int_equal(nx_max_pool_with_indices_nd(ctx, x, &o, &y, &yi), NX_OK);
            f[k] = 0;
            for (int64_t i = 0; i < nx_tensor_numel(y); i++)
                f[k] += at(y, i) * at(dy, i);
            set(x, j, x0);
            nx_tensor_free(y);
            nx_tensor_free(yi);
        }
        double fd = (f[0] - f[1]) / (2 * h);
        if (!nx_test_close(at(dx, j), fd, 1e-6, 1e-6))
            fail_msg("max_pool vjp f64 [2,5,4,2] cpu: dx[%lld] = %.10g, FD %.10g", (long long)j,
                     at(dx, j), fd);
    }
    nx_tensor_free(dx);
    nx_tensor_free(dy);
    nx_tensor_free(v);
    nx_tensor_free(idx);
    nx_tensor_free(x);
    nx_ctx_free(ctx);
}

/* By hand: windows of only -inf give -inf and the first in-image place (PyTorch's rule), padding
 * never wins; NaN wins (the first NaN). */
static void test_inf_nan(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t s[3] = {1, 4, 1};
    double vals[4] = {-INFINITY, -INFINITY, 5, -INFINITY};
    nx_tensor *x = make(ctx, NX_DTYPE_F32, 3, s, vals), *v = NULL, *idx = NULL;
    for (int be = 0; be < 2; be++) {
        nx_pool_opts o = {.backend = be ? NX_BACKEND_CPU : NX_BACKEND_REF, .nspatial = 1,
                          .kernel = {2}, .stride = {2}, .padding = {1}};
        assert_int_equal(nx_max_pool_with_indices_nd(ctx, x, &o, &v, &idx), NX_OK);
        assert_int_equal(nx_tensor_numel(v), 3);
        assert_true(at(v, 0) == -INFINITY && at(v, 1) == 5 && at(v, 2) == -INFINITY);
        assert_true(at(idx, 0) == 0 && at(idx, 1) == 2 && at(idx, 2) == 3);
        nx_tensor_free(v);
        nx_tensor_free(idx);
    }
    nx_tensor_free(x);
    double nan4[4] = {1, NAN, 3, NAN};
    x = make(ctx, NX_DTYPE_F64, 3, s, nan4);
    nx_pool_opts o = {.backend = NX_BACKEND_CPU, .nspatial = 1, .kernel = {4}};
    assert_int_equal(nx_max_pool_with_indices_nd(ctx, x, &o, &v, &idx), NX_OK);
    assert_true(isnan(at(v, 0)) && at(idx, 0) == 1);
    nx_tensor_free(v);
    nx_tensor_free(idx);
    nx_tensor_free(x);
    /* an empty batch gives empty results of the pooled shape */
    int64_t e[3] = {0, 6, 2};
    x = make(ctx, NX_DTYPE_F32, 3, e, NULL);
    o.kernel[0] = 2;
    assert_int_equal(nx_max_pool_with_indices_nd(ctx, x, &o, &v, &idx), NX_OK);
    assert_int_equal(nx_tensor_shape(v)[1], 3);
    assert_int_equal(nx_tensor_numel(idx), 0);
    nx_tensor_free(v);
    nx_tensor_free(idx);
    nx_tensor_free(x);
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

static void expect(nx_ctx *ctx, nx_status got, nx_status want, const char *needle)
{
    if (got != want)
        fail_msg("status %s, expected %s (%s)", nx_status_str(got), nx_status_str(want),
                 nx_ctx_last_error(ctx));
    if (!strstr(nx_ctx_last_error(ctx), needle))
        fail_msg("message '%s' lacks '%s'", nx_ctx_last_error(ctx), needle);
}

static void test_errors(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t s[3] = {1, 5, 2}, s2[2] = {5, 2}, si[3] = {1, 2, 2};
    nx_tensor *x = make(ctx, NX_DTYPE_F32, 3, s, NULL), *v = NULL, *idx = NULL;
    nx_tensor *h = NULL, *i64 = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F16, 3, s, &h), NX_OK);
    nx_pool_opts o = {.backend = NX_BACKEND_REF, .nspatial = 1, .kernel = {2}};
    expect(ctx, nx_max_pool_with_indices_nd(ctx, x, NULL, &v, &idx), NX_ERR_INVALID_ARG, "opts");
    expect(ctx, nx_max_pool_with_indices_nd(ctx, h, &o, &v, &idx), NX_ERR_DTYPE, "f16");
    expect(ctx, nx_max_pool_with_indices_nd(ctx, x, &o, &v, NULL), NX_ERR_INVALID_ARG, "NULL");
    assert_null(v);
    o.nspatial = 0;
    expect(ctx, nx_max_pool_with_indices_nd(ctx, x, &o, &v, &idx), NX_ERR_INVALID_ARG,
           "nspatial is 0");
    o.nspatial = 3; /* x has 3 dims: no room for the channel axis */
    expect(ctx, nx_max_pool_with_indices_nd(ctx, x, &o, &v, &idx), NX_ERR_SHAPE, "channels last");
    o.nspatial = 1;
    o.padding[0] = 2; /* more than half the kernel */
    expect(ctx, nx_max_pool_with_indices_nd(ctx, x, &o, &v, &idx), NX_ERR_INVALID_ARG,
           "padding 2");
    o.padding[0] = 0;
    o.kernel[0] = 6; /* larger than the image */
    expect(ctx, nx_max_pool_with_indices_nd(ctx, x, &o, &v, &idx), NX_ERR_SHAPE, "kernel is 6");
    o.kernel[0] = 0;
    expect(ctx, nx_max_pool_with_indices_nd(ctx, x, &o, &v, &idx), NX_ERR_INVALID_ARG,
           "kernel 0");
    assert_null(v);
    assert_null(idx);
    /* unpool: out-of-range and mistyped indices, shapes that differ */
    o.kernel[0] = 2;
    o.output_size[0] = 4;
    nx_tensor *p = make(ctx, NX_DTYPE_F32, 3, si, NULL), *u = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_I64, 3, si, &i64), NX_OK);
    int64_t *iv = nx_tensor_data(i64);
    iv[0] = 0, iv[1] = 1, iv[2] = 3, iv[3] = 4;
    expect(ctx, nx_max_unpool_nd(ctx, p, i64, &o, &u), NX_ERR_INVALID_ARG, "element 3 is 4");
    iv[3] = -1;
    expect(ctx, nx_max_unpool_nd(ctx, p, i64, &o, &u), NX_ERR_INVALID_ARG, "is -1");
    expect(ctx, nx_max_unpool_nd(ctx, p, p, &o, &u), NX_ERR_DTYPE, "indices");
    expect(ctx, nx_max_unpool_nd(ctx, x, i64, &o, &u), NX_ERR_SHAPE, "differ in shape");
    iv[3] = 2;
    assert_int_equal(nx_max_unpool_nd(ctx, p, i64, &o, &u), NX_OK);
    assert_int_equal(nx_tensor_shape(u)[1], 4);
    nx_tensor_free(u);
    nx_tensor *x2 = make(ctx, NX_DTYPE_F32, 2, s2, NULL);
    expect(ctx, nx_max_pool_vjp(ctx, x, NULL, &o, &u), NX_ERR_INVALID_ARG, "dy");
    expect(ctx, nx_max_pool_vjp(ctx, x, x2, &o, &u), NX_ERR_SHAPE, "");
    assert_null(u);
    nx_tensor_free(x2);
    nx_tensor_free(p);
    nx_tensor_free(i64);
    nx_tensor_free(h);
    nx_tensor_free(x);
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

static nx_status sweep_body(nx_ctx *ctx, void *user)
{
    (void)user;
    int64_t s[3] = {2, 6, 3};
    nx_tensor *x = NULL, *v = NULL, *idx = NULL, *u = NULL, *dx = NULL;
    nx_pool_opts o = {.backend = NX_BACKEND_REF, .nspatial = 1, .kernel = {3}, .stride = {2},
                      .padding = {1}, .output_size = {6}};
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F64, 3, s, &x);
    if (st == NX_OK) {
        for (int64_t i = 0; i < 36; i++)
            ((double *)nx_tensor_data(x))[i] = (double)((i * 7) % 5);
        st = nx_max_pool_with_indices_nd(ctx, x, &o, &v, &idx);
    }
    if (st == NX_OK)
        st = nx_max_unpool_nd(ctx, v, idx, &o, &u);
    if (st == NX_OK)
        st = nx_max_unpool_vjp(ctx, v, idx, u, &o, &dx);
    nx_tensor_free(dx);
    dx = NULL;
    if (st == NX_OK)
        st = nx_max_pool_vjp(ctx, x, v, &o, &dx);
    nx_tensor_free(dx);
    nx_tensor_free(u);
    nx_tensor_free(v);
    nx_tensor_free(idx);
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
        cmocka_unit_test(test_golden),     cmocka_unit_test(test_grad_indices),
        cmocka_unit_test(test_grad_fd),    cmocka_unit_test(test_inf_nan),
        cmocka_unit_test(test_errors),     cmocka_unit_test(test_alloc_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
