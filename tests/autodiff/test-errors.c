/* Unsupported and invalid calls of nx_graph_vjp / nx_graph_grad, externs with and without an
 * adjoint, the gradient of nodes no path reaches, and allocation-failure sweeps over the vjp and
 * the simplification pass. */
#include <stdlib.h>

#include "checker.h"
#include "passes/simplify.h"

static nx_ctx *ctx;
static nx_graph *g;
static nx_test_alloc ta;

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

static void expect_error(nx_status got, nx_status want, const char *text)
{
    const char *msg = nx_ctx_last_error(ctx);
    if (got != want || !strstr(msg, text))
        fail_msg("expected %s containing \"%s\", got %s: \"%s\"", nx_status_str(want), text,
                 nx_status_str(got), msg);
}

/* ---- externs -------------------------------------------------------------------------------*/

static nx_status sq_shape(void *user, int n_in, const nx_dtype *dtypes, const int *ndims,
                          const int64_t *const *shapes, nx_dtype *out_dtype, int *out_ndim,
                          int64_t out_shape[NX_MAX_DIMS])
{
    (void)user, (void)n_in;
    *out_dtype = dtypes[0];
    *out_ndim = ndims[0];
    memcpy(out_shape, shapes[0], (size_t)ndims[0] * sizeof(int64_t));
    return NX_OK;
}

static nx_status sq_ref(void *user, nx_ctx *c, int n_in, const nx_tensor *const *ins,
                        nx_tensor *out)
{
    (void)user, (void)c, (void)n_in;
    const double *x = nx_tensor_data(ins[0]);
    double *y = nx_tensor_data(out);
    for (int64_t i = 0; i < nx_tensor_numel(out); i++)
        y[i] = x[i] * x[i] * x[i];
    return NX_OK;
}

static nx_status sq_vjp(void *user, nx_graph *gr, int n_in, const nx_node *ins, nx_node out,
                        nx_node cot, nx_node *in_cots)
{
    (void)user, (void)n_in, (void)out;
    nx_node three = nx_scalar(gr, NX_DTYPE_F64, 3.0);
    in_cots[0] = nx_mul(gr, cot, nx_mul(gr, three, nx_mul(gr, ins[0], ins[0])));
    return nx_graph_status(gr);
}

static const nx_extern_def cube = {"cube", sq_shape, sq_ref, sq_vjp, NULL};
static const nx_extern_def cube_novjp = {"cube_without_vjp", sq_shape, sq_ref, NULL, NULL};

static nx_node b_extern(nx_graph *gr, const nx_node *p)
{
    return nx_extern(gr, &cube, 1, p);
}

static void test_extern_vjp_matches_fd(void **state)
{
    (void)state;
    ck_case c = {"extern with vjp", 1, {2}, {{2, 3}}, -2, 2, b_extern, false};
    assert_true(ck_check(&c, NX_BACKEND_REF) <= 1e-6);
}

static void test_extern_without_vjp_is_unsupported(void **state)
{
    (void)state;
    nx_node x = nx_parameter(g, "x", NX_DTYPE_F64, 1, (int64_t[]){3});
    nx_node y = nx_reduce(g, nx_extern(g, &cube_novjp, 1, &x), 1, (int[]){0}, NX_MONOID_SUM,
                          false);
    nx_node d = 99;
    expect_error(nx_graph_grad(g, y, 1, &x, &d), NX_ERR_UNSUPPORTED, "cube_without_vjp");
    assert_int_equal(d, NX_NONE);
    assert_int_equal(nx_graph_status(g), NX_OK); /* the graph stays usable */
    /* Off the path, the extern costs nothing: the gradient of another output still works. */
    nx_node z = nx_reduce(g, nx_exp(g, x), 1, (int[]){0}, NX_MONOID_SUM, false);
    assert_int_equal(nx_graph_grad(g, z, 1, &x, &d), NX_OK);
}

static nx_node custom_reduce(nx_graph *gr, nx_node x, bool plain_sum)
{
    nx_monoid_def m = {.ncarry = 1};
    m.x = nx_placeholder(gr, NX_DTYPE_F64);
    m.a[0] = nx_placeholder(gr, NX_DTYPE_F64);
    m.b[0] = nx_placeholder(gr, NX_DTYPE_F64);
    nx_node s = nx_add(gr, m.a[0], m.b[0]);
    m.combine[0] = plain_sum ? s : nx_add(gr, s, nx_mul(gr, m.a[0], m.b[0]));
    m.identity[0] = nx_scalar(gr, NX_DTYPE_F64, 0.0);
    return nx_reduce_custom(gr, x, 1, (int[]){0}, &m, false);
}

static void test_custom_monoid_unsupported(void **state)
{
    (void)state;
    nx_node x = nx_parameter(g, "x", NX_DTYPE_F64, 1, (int64_t[]){4});
    nx_node d = NX_NONE;
    expect_error(nx_graph_grad(g, custom_reduce(g, x, false), 1, &x, &d), NX_ERR_UNSUPPORTED,
                 "reduce_custom");
    assert_int_equal(nx_graph_grad(g, custom_reduce(g, x, true), 1, &x, &d), NX_OK);
}

/* ---- invalid calls and zero gradients ------------------------------------------------------*/

static void test_invalid_calls(void **state)
{
    (void)state;
    nx_node x = nx_parameter(g, "x", NX_DTYPE_F64, 1, (int64_t[]){3});
    nx_node i = nx_input(g, "i", NX_DTYPE_I32, 1, (int64_t[]){3});
    nx_node y = nx_exp(g, x), d = NX_NONE;
    nx_node bad_cot = nx_input(g, "c", NX_DTYPE_F64, 1, (int64_t[]){4});
    expect_error(nx_graph_vjp(g, 1, &y, &bad_cot, 1, &x, &d), NX_ERR_SHAPE, "cotangent 0");
    expect_error(nx_graph_vjp(g, 1, &y, &y, 1, &i, &d), NX_ERR_DTYPE, "float node");
    expect_error(nx_graph_grad(g, y, 1, &x, &d), NX_ERR_SHAPE, "one element");
    expect_error(nx_graph_vjp(g, 0, &y, &y, 1, &x, &d), NX_ERR_INVALID_ARG, "n_outputs");
    nx_node junk = 12345;
    expect_error(nx_graph_vjp(g, 1, &y, &y, 1, &junk, &d), NX_ERR_INVALID_ARG, "12345");
    assert_int_equal(nx_graph_vjp(NULL, 1, &y, &y, 1, &x, &d), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(NULL), "NULL"));
    assert_int_equal(nx_graph_status(g), NX_OK);
}

static void test_zero_gradients(void **state)
{
    (void)state;
    nx_node x = nx_parameter(g, "x", NX_DTYPE_F64, 2, (int64_t[]){2, 2});
    nx_node w = nx_parameter(g, "w", NX_DTYPE_F64, 1, (int64_t[]){2});
    /* Only through comparisons, argmax and an integer cast: no cotangent reaches x; w is not
     * used at all. Both gradients are zeros of the right shape. */
    nx_node am = nx_reduce(g, x, 1, (int[]){1}, NX_MONOID_ARGMAX, false);
    nx_node y = nx_add(g, nx_cast(g, am, NX_DTYPE_F64),
                       nx_cast(g, nx_cast(g, nx_reduce(g, x, 1, (int[]){1}, NX_MONOID_SUM, false),
                                          NX_DTYPE_I32),
                               NX_DTYPE_F64));
    nx_node s = nx_reduce(g, y, 1, (int[]){0}, NX_MONOID_SUM, false);
    nx_node wrt[2] = {x, w}, d[2];
    assert_int_equal(nx_graph_grad(g, s, 2, wrt, d), NX_OK);
    nx_program *p = ck_compile(g, 2, d, NX_BACKEND_REF);
    nx_tensor *in[2], *out[2];
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 2, (int64_t[]){2, 2}, &in[0]), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 1, (int64_t[]){2}, &in[1]), NX_OK);
    assert_int_equal(nx_program_run(p, (const nx_tensor *const *)in, out), NX_OK);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(nx_tensor_numel(out[k]), k ? 2 : 4);
        const double *v = nx_tensor_data(out[k]);
        for (int64_t e = 0; e < nx_tensor_numel(out[k]); e++)
            assert_true(v[e] == 0.0);
        nx_tensor_free(out[k]);
        nx_tensor_free(in[k]);
    }
    nx_program_free(p);
}

/* wrt may be an intermediate node; several outputs sum their contributions; an NX_NONE
 * cotangent is zero. y = exp(x), outputs (y * y, sin(x), y) with cotangents (c0, c1, none):
 * dL/dy = 2 y c0 (only through y * y; y itself has a zero cotangent), dL/dx = 2 y^2 c0 + cos(x) c1. */
static void test_intermediate_wrt_and_outputs(void **state)
{
    (void)state;
    nx_node x = nx_parameter(g, "x", NX_DTYPE_F64, 1, (int64_t[]){2});
    nx_node c0 = nx_input(g, "c0", NX_DTYPE_F64, 1, (int64_t[]){2});
    nx_node c1 = nx_input(g, "c1", NX_DTYPE_F64, 1, (int64_t[]){2});
    nx_node y = nx_exp(g, x);
    nx_node outs[3] = {nx_mul(g, y, y), nx_sin(g, x), y}, cots[3] = {c0, c1, NX_NONE};
    nx_node wrt[2] = {y, x}, d[2];
    assert_int_equal(nx_graph_vjp(g, 3, outs, cots, 2, wrt, d), NX_OK);
    nx_program *p = ck_compile(g, 2, d, NX_BACKEND_REF);
    double xv[2] = {0.5, -1.25}, c0v[2] = {2, -3}, c1v[2] = {0.5, 4};
    nx_tensor *in[3], *out[2];
    assert_int_equal(nx_tensor_wrap(ctx, xv, NX_DTYPE_F64, 1, (int64_t[]){2}, NULL, &in[0]), NX_OK);
    assert_int_equal(nx_tensor_wrap(ctx, c0v, NX_DTYPE_F64, 1, (int64_t[]){2}, NULL, &in[1]),
                     NX_OK);
    assert_int_equal(nx_tensor_wrap(ctx, c1v, NX_DTYPE_F64, 1, (int64_t[]){2}, NULL, &in[2]),
                     NX_OK);
    assert_int_equal(nx_program_run(p, (const nx_tensor *const *)in, out), NX_OK);
    const double *dy = nx_tensor_data(out[0]), *dx = nx_tensor_data(out[1]);
    for (int i = 0; i < 2; i++) {
        double e = exp(xv[i]);
        assert_true(nx_test_close(dy[i], 2 * e * c0v[i], 1e-15, 0));
        assert_true(nx_test_close(dx[i], 2 * e * e * c0v[i] + cos(xv[i]) * c1v[i], 1e-14, 0));
    }
    for (int i = 0; i < 3; i++)
        nx_tensor_free(in[i]);
    nx_tensor_free(out[0]);
    nx_tensor_free(out[1]);
    nx_program_free(p);
}

/* ---- allocation failures -------------------------------------------------------------------*/

static nx_status sweep_body(nx_ctx *c, void *user)
{
    (void)user;
    nx_graph *gr = NULL;
    nx_status st = nx_graph_new(c, &gr);
    if (st != NX_OK)
        return st;
    nx_node x = nx_parameter(gr, "x", NX_DTYPE_F64, 2, (int64_t[]){3, 4});
    nx_node b = nx_parameter(gr, "b", NX_DTYPE_F64, 2, (int64_t[]){4, 2});
    nx_node c1 = nx_einsum(gr, "ik,kj->ij", x, b, NX_MONOID_MAX, nx_add);
    nx_node c2 = nx_reduce(gr, nx_sort(gr, nx_pad(gr, x, (int64_t[]){1, 2}, (int64_t[]){0, 3},
                                                  NX_PAD_REFLECT, 0),
                                       1, false),
                           1, (int[]){1}, NX_MONOID_PROD, false);
    nx_node c3 = nx_scan(gr, nx_window(gr, x, (int64_t[]){2, 2}, NULL, NULL), 0,
                         NX_MONOID_LOGSUMEXP, false);
    nx_node s = nx_add(gr, nx_reduce(gr, c1, 2, (int[]){0, 1}, NX_MONOID_SUM, false),
                       nx_add(gr, nx_reduce(gr, c2, 1, (int[]){0}, NX_MONOID_SUM, false),
                              nx_reduce(gr, c3, 4, (int[]){0, 1, 2, 3}, NX_MONOID_MIN, false)));
    nx_node wrt[2] = {x, b}, d[2];
    st = nx_graph_grad(gr, s, 2, wrt, d);
    nx_node wrt2 = x, dd = NX_NONE;
    if (st == NX_OK) /* second order through everything above */
        st = nx_graph_grad(gr, nx_reduce(gr, d[0], 2, (int[]){0, 1}, NX_MONOID_SUM, false), 1,
                           &wrt2, &dd);
    if (st == NX_OK)
        st = nx_pass_simplify(gr, 2, d);
    nx_graph_free(gr);
    return st;
}

static void test_alloc_sweep(void **state)
{
    (void)state;
    int64_t n = nx_test_alloc_sweep(sweep_body, NULL, 20000);
    print_message("vjp + grad of grad + simplify: %lld allocations swept\n", (long long)n);
    assert_true(n > 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_extern_vjp_matches_fd),
        cmocka_unit_test_setup_teardown(test_extern_without_vjp_is_unsupported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_custom_monoid_unsupported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_calls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_zero_gradients, setup, teardown),
        cmocka_unit_test_setup_teardown(test_intermediate_wrt_and_outputs, setup, teardown),
        cmocka_unit_test(test_alloc_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
