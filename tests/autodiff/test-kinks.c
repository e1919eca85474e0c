/* Kinks get explicit escapes instead of a skipped check:
 *   - ties (max/min reductions, binary max, scans, scatter-max, sort): the gradient is routed to
 *     the FIRST winner (exact values, worked out by hand), and moving the whole tie group together
 *     (a direction along which the function is smooth) matches the central difference;
 *   - abs at 0: the vjp gives 0, the mean of the one-sided derivatives -1 and +1, which is exactly
 *     what the central difference measures there;
 *   - floor at an integer: the vjp gives 0, the one-sided derivative from the right (the left one
 *     is a jump);
 *   - logsumexp over an all -inf line: the gradient is 0, not NaN. */
#include <stdlib.h>

#include "checker.h"

/* Runs the case on the given values and cotangent; returns the gradient of parameter 0 as a
 * malloc'd array and, when dir is non-NULL, checks <grad, dir> against the central difference of
 * L along dir (scale-free, 1e-6). */
static double *grad_at(const ck_case *c, const double *x, const double *cot, const double *dir)
{
    ck_run r;
    const double *vals[1] = {x};
    ck_setup(&r, c, NX_BACKEND_REF, vals, cot);
    nx_tensor *ad[1] = {NULL};
    ck_gradients(&r, 1, ad);
    int64_t n = nx_tensor_numel(ad[0]);
    double *g = malloc((size_t)n * sizeof *g);
    memcpy(g, nx_tensor_data(ad[0]), (size_t)n * sizeof *g);
    if (dir) {
        double *d = nx_tensor_data(r.in[0]), h = 1e-5, dot = 0;
        for (int64_t k = 0; k < n; k++)
            d[k] = x[k] + h * dir[k], dot += g[k] * dir[k];
        double lp = ck_loss(&r);
        for (int64_t k = 0; k < n; k++)
            d[k] = x[k] - h * dir[k];
        double lm = ck_loss(&r);
        double fd = (lp - lm) / (2 * h);
        if (!(fabs(fd - dot) <= 1e-6 * fmax(fabs(fd), 1e-300)))
            fail_msg("%s: directional derivative %.12g, vjp gives %.12g", c->name, fd, dot);
    }
    nx_tensor_free(ad[0]);
    ck_teardown(&r);
    return g;
}

static void expect_grad(const char *what, const double *got, const double *want, int n)
{
    for (int i = 0; i < n; i++) {
        if (!(got[i] == want[i]))
            fail_msg("%s: gradient[%d] = %.17g, expected %.17g", what, i, got[i], want[i]);
    }
}

static nx_node b_rowmax(nx_graph *g, const nx_node *p)
{
    return nx_reduce(g, p[0], 1, (int[]){1}, NX_MONOID_MAX, false);
}
static nx_node b_allmin(nx_graph *g, const nx_node *p)
{
    return nx_reduce(g, p[0], 2, (int[]){0, 1}, NX_MONOID_MIN, false);
}

static void test_reduce_ties_first_winner(void **state)
{
    (void)state;
    ck_case c = {"reduce max ties", 1, {2}, {{2, 4}}, 0, 0, b_rowmax, false};
    const double x[8] = {1, 3, 3, 2, 5, 5, 5, 0}, cot[2] = {0.25, -2};
    const double dir[8] = {0, 1, 1, 0, 1, 1, 1, 0};
    double *g = grad_at(&c, x, cot, dir);
    expect_grad(c.name, g, (const double[]){0, 0.25, 0, 0, -2, 0, 0, 0}, 8);
    free(g);
    ck_case m = {"reduce min ties over 2 axes", 1, {2}, {{2, 3}}, 0, 0, b_allmin, false};
    const double y[6] = {4, -1, 2, -1, 7, -1}, cm[1] = {3}, dm[6] = {0, 1, 0, 1, 0, 1};
    g = grad_at(&m, y, cm, dm);
    expect_grad(m.name, g, (const double[]){0, 3, 0, 0, 0, 0}, 6);
    free(g);
}

static nx_node b_binmax(nx_graph *g, const nx_node *p)
{
    nx_node a = nx_slice(g, p[0], (int64_t[]){0}, (int64_t[]){2}, NULL);
    nx_node b = nx_slice(g, p[0], (int64_t[]){2}, (int64_t[]){4}, NULL);
    return nx_maximum(g, a, b);
}

static void test_binary_max_tie(void **state)
{
    (void)state;
    ck_case c = {"maximum tie", 1, {1}, {{4}}, 0, 0, b_binmax, false};
    const double x[4] = {1.5, -2, 1.5, -2}, cot[2] = {2, 3}, dir[4] = {1, 1, 1, 1};
    double *g = grad_at(&c, x, cot, dir);
    expect_grad(c.name, g, (const double[]){2, 3, 0, 0}, 4); /* a is the first winner */
    free(g);
}

static nx_node b_scanmax(nx_graph *g, const nx_node *p)
{
    return nx_scan(g, p[0], 0, NX_MONOID_MAX, false);
}
static nx_node b_scanmin_r(nx_graph *g, const nx_node *p)
{
    return nx_scan(g, p[0], 0, NX_MONOID_MIN, true);
}

static void test_scan_ties(void **state)
{
    (void)state;
    /* y = [1, 3, 3, 3, 3]: prefix 0 is won by x0, every longer prefix by x1 (the first 3). */
    ck_case c = {"scan max ties", 1, {1}, {{5}}, 0, 0, b_scanmax, false};
    const double x[5] = {1, 3, 3, 2, 3}, cot[5] = {1, 2, 4, 8, 16};
    const double dir[5] = {0, 1, 1, 0, 1};
    double *g = grad_at(&c, x, cot, dir);
    expect_grad(c.name, g, (const double[]){1, 30, 0, 0, 0}, 5);
    free(g);
    /* Reverse: y_t = min(x_t..x_4) = [0, 0, 2, 2, 5]; the first winner of a suffix is the one
     * met first from the end: x3 for suffixes 3 and 2 (x2 = x3 = 2 ties, x3 comes first), x1 for
     * suffixes 1 and 0 (x0 = x1 = 0 ties). */
    ck_case r = {"reverse scan min ties", 1, {1}, {{5}}, 0, 0, b_scanmin_r, false};
    const double xr[5] = {0, 0, 2, 2, 5}, dr[5] = {1, 1, 1, 1, 0};
    g = grad_at(&r, xr, cot, dr);
    expect_grad(r.name, g, (const double[]){0, 3, 0, 12, 16}, 5);
    free(g);
}

static nx_node b_scatmax(nx_graph *g, const nx_node *p)
{
    nx_node x = nx_slice(g, p[0], (int64_t[]){0}, (int64_t[]){3}, NULL);
    nx_node u = nx_slice(g, p[0], (int64_t[]){3}, (int64_t[]){7}, NULL);
    static const int64_t idx[4] = {1, 2, 2, 0};
    nx_node i = nx_constant(g, NX_DTYPE_I64, 1, (int64_t[]){4}, idx);
    return nx_scatter(g, x, i, u, 0, NX_MONOID_MAX);
}

static void test_scatter_max_ties(void **state)
{
    (void)state;
    /* x = [5, 1, 0], u = [1, 4, 4, 5] at targets [1, 2, 2, 0]: target 0 ties x0 with u3 (x first
     * wins), target 1 ties x1 with u0 (x wins), target 2 ties u1 and u2 (u1 first wins). */
    ck_case c = {"scatter max ties", 1, {1}, {{7}}, 0, 0, b_scatmax, false};
    const double x[7] = {5, 1, 0, 1, 4, 4, 5}, cot[3] = {2, 3, 5};
    const double dir[7] = {1, 1, 0, 1, 1, 1, 1};
    double *g = grad_at(&c, x, cot, dir);
    expect_grad(c.name, g, (const double[]){2, 3, 0, 0, 5, 0, 0}, 7);
    free(g);
}

static nx_node b_sort(nx_graph *g, const nx_node *p)
{
    return nx_sort(g, p[0], 0, false);
}

static void test_sort_ties(void **state)
{
    (void)state;
    /* x = [2, 1, 2]: sorted [1, 2, 2] with the stable permutation [1, 0, 2]. */
    ck_case c = {"sort ties", 1, {1}, {{3}}, 0, 0, b_sort, false};
    const double x[3] = {2, 1, 2}, cot[3] = {1, 10, 100}, dir[3] = {1, 0, 1};
    double *g = grad_at(&c, x, cot, dir);
    expect_grad(c.name, g, (const double[]){10, 1, 100}, 3);
    free(g);
}

static nx_node b_abs(nx_graph *g, const nx_node *p)
{
    return nx_abs(g, p[0]);
}
static nx_node b_floor(nx_graph *g, const nx_node *p)
{
    return nx_mul(g, nx_floor(g, p[0]), p[0]);
}

static void test_abs_and_floor_at_kinks(void **state)
{
    (void)state;
    ck_case c = {"abs at 0", 1, {1}, {{3}}, 0, 0, b_abs, false};
    const double x[3] = {0, -0.0, 1}, cot[3] = {1, 1, 1};
    /* Central differences at 0 give (|h| - |-h|) / 2h = 0: the mean of the one-sided -1, +1. */
    double *g = grad_at(&c, x, cot, (const double[]){1, 0, 0});
    expect_grad(c.name, g, (const double[]){0, 0, 1}, 3);
    free(g);
    /* floor(x) * x at x = 2: one-sided from the right, d/dx = floor(x) = 2 (floor's own
     * derivative is 0 there from the right; from the left floor jumps). */
    ck_case f = {"floor at an integer", 1, {1}, {{2}}, 0, 0, b_floor, false};
    const double xf[2] = {2, -1}, cf[2] = {1, 1};
    g = grad_at(&f, xf, cf, NULL);
    ck_run r;
    const double *vals[1] = {xf};
    ck_setup(&r, &f, NX_BACKEND_REF, vals, cf);
    double h = 1e-6, l0 = ck_loss(&r);
    double *d = nx_tensor_data(r.in[0]);
    for (int k = 0; k < 2; k++) {
        d[k] = xf[k] + h;
        double right = (ck_loss(&r) - l0) / h;
        d[k] = xf[k];
        if (!(fabs(right - g[k]) <= 1e-6 * fabs(right)))
            fail_msg("floor at %g: right derivative %.12g, vjp %.12g", xf[k], right, g[k]);
    }
    ck_teardown(&r);
    free(g);
}

static nx_node b_lse(nx_graph *g, const nx_node *p)
{
    return nx_reduce(g, p[0], 1, (int[]){1}, NX_MONOID_LOGSUMEXP, false);
}
static nx_node b_lse_scan(nx_graph *g, const nx_node *p)
{
    return nx_scan(g, p[0], 1, NX_MONOID_LOGSUMEXP, false);
}

static void test_logsumexp_all_minus_inf(void **state)
{
    (void)state;
    ck_case c = {"logsumexp of -inf", 1, {2}, {{2, 3}}, 0, 0, b_lse, false};
    const double x[6] = {-INFINITY, -INFINITY, -INFINITY, 0, -INFINITY, -INFINITY};
    double *g = grad_at(&c, x, (const double[]){1, 1}, NULL);
    expect_grad(c.name, g, (const double[]){0, 0, 0, 1, 0, 0}, 6);
    free(g);
    ck_case s = {"logsumexp scan from -inf", 1, {2}, {{1, 3}}, 0, 0, b_lse_scan, false};
    const double xs[3] = {-INFINITY, -INFINITY, 0};
    g = grad_at(&s, xs, (const double[]){1, 1, 1}, NULL);
    expect_grad(s.name, g, (const double[]){0, 0, 1}, 3);
    free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reduce_ties_first_winner),
        cmocka_unit_test(test_binary_max_tie),
        cmocka_unit_test(test_scan_ties),
        cmocka_unit_test(test_scatter_max_ties),
        cmocka_unit_test(test_sort_ties),
        cmocka_unit_test(test_abs_and_floor_at_kinks),
        cmocka_unit_test(test_logsumexp_all_minus_inf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
