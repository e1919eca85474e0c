/* FD gradients, generated from the op table: for every differentiable row, on its float64 golden
 * cases (inputs as float64), nx_op_vjp's gradient against central finite differences of
 * <dy, f(x)> for a random cotangent dy, at a sample of coordinates of every float input:
 *     |fd - vjp| <= FD_RTOL * max(|fd|, |vjp|, max |vjp| over the input)
 * (scale-free: relative to the gradient's size, so coordinates with a near-zero gradient do not
 * demand digits the difference cannot give). FD_RTOL is fixed.
 *
 * Ops that are differentiable almost everywhere but not at ties (max, min, median, pooling: the
 * descriptor's fd_note says why) are checked, not skipped: their golden inputs hold many equal
 * small integers, so the test first adds a deterministic jitter that makes every value of each
 * float input distinct (0.25 frac(k phi) for element k: distinct in [0, 0.25), and integer values
 * stay at least 0.75 apart), measures the smallest gap between the jittered values, and takes h
 * a thousand times below it, so no central difference straddles a tie. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus.h"
#include "testutil.h"

#define FD_RTOL 1e-6
#define FD_SAMPLES 8 /* coordinates per input */
#define FD_CASES 2   /* f64 cases per op */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static double uniform(void) /* [-1, 1) */
{
    rng_state = rng_state * 6364136223846793005u + 1442695040888963407u;
    return (double)(rng_state >> 11) / 4503599627370496.0 - 1.0;
}

/* <dy, f(x)> over every float output. */
static nx_status objective(nx_ctx *ctx, const gc_case *c, const nx_op_info *info,
                           const nx_tensor *const *in, nx_tensor *const *dy, double *out)
{
    nx_tensor *y[NX_OP_MAX_IO] = {0};
    nx_status st = gc_run(ctx, c, info, "cpu", NULL, in, y);
    double s = 0;
    for (int k = 0; st == NX_OK && k < info->noutputs; k++)
        for (int64_t i = 0; dy[k] && i < nx_tensor_numel(y[k]); i++)
            s += gc_at(dy[k], i) * gc_at(y[k], i);
    gc_free(info->noutputs, y);
    *out = s;
    return st;
}

/* Makes the values of t (f64) distinct by the jitter above; returns the smallest gap between two
 * of them afterwards (+inf for fewer than two finite values). */
static double jitter(nx_tensor *t)
{
    int64_t n = nx_tensor_numel(t);
    double *x = nx_tensor_data(t);
    for (int64_t k = 0; k < n; k++) {
        double f = (double)k * 0.6180339887498949;
        x[k] += 0.25 * (f - floor(f));
    }
    double *s = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    assert_non_null(s);
    memcpy(s, x, (size_t)n * sizeof(double));
    for (int64_t i = 1; i < n; i++) { /* insertion sort: golden inputs are small */
        double v = s[i];
        int64_t j = i;
        for (; j > 0 && s[j - 1] > v; j--)
            s[j] = s[j - 1];
        s[j] = v;
    }
    double gap = INFINITY;
    for (int64_t i = 1; i < n; i++)
        if (isfinite(s[i]) && isfinite(s[i - 1]))
            gap = fmin(gap, s[i] - s[i - 1]);
    free(s);
    return gap;
}

static int check_case(nx_ctx *ctx, const gc_case *c, const nx_op_info *info, int *points)
{
    const nx_op_desc *desc = gc_desc(c);
    double gap[NX_OP_MAX_IO];
    nx_tensor *raw[NX_OP_MAX_IO] = {0}, *in[NX_OP_MAX_IO] = {0}, *y[NX_OP_MAX_IO] = {0};
    nx_tensor *dy[NX_OP_MAX_IO] = {0}, *dx[NX_OP_MAX_IO] = {0};
    int bad = 0;
    if (gc_load(ctx, c, false, raw) != NX_OK)
        fail_msg("%s: %s", c->name, nx_ctx_last_error(ctx));
    /* float inputs as f64 (the FD needs the digits); others as they are */
    for (int i = 0; i < c->nin; i++) {
        gap[i] = INFINITY;
        if (nx_dtype_is_float(nx_tensor_dtype(raw[i]))) {
            assert_int_equal(nx_tensor_cast(raw[i], NX_DTYPE_F64, &in[i]), NX_OK);
            if (desc && desc->fd_note) {
                gap[i] = jitter(in[i]);
                if (!(gap[i] > 0)) {
                    printf("%s [%s]: input %s still has equal values after the jitter\n",
                           c->name, info->name, info->inputs[i]);
                    bad = 1;
                }
            }
        } else {
            assert_int_equal(nx_tensor_copy(raw[i], &in[i]), NX_OK);
        }
    }
    if (bad)
        goto done;
    const nx_tensor *const *cin = (const nx_tensor *const *)in;
    if (gc_run(ctx, c, info, "cpu", NULL, cin, y) != NX_OK) {
        printf("%s [%s]: forward fails: %s\n", c->name, info->name, nx_ctx_last_error(ctx));
        bad = 1;
        goto done;
    }
    for (int k = 0; k < info->noutputs; k++) {
        assert_int_equal(nx_tensor_new(ctx, nx_tensor_dtype(y[k]), nx_tensor_ndim(y[k]),
                                       nx_tensor_shape(y[k]), &dy[k]),
                         NX_OK);
        size_t bytes = (size_t)nx_tensor_numel(dy[k]) * nx_dtype_size(nx_tensor_dtype(dy[k]));
        memset(nx_tensor_data(dy[k]), 0, bytes); /* non-f64 outputs carry no cotangent */
        for (int64_t i = 0; nx_tensor_dtype(dy[k]) == NX_DTYPE_F64 && i < nx_tensor_numel(dy[k]);
             i++)
            ((double *)nx_tensor_data(dy[k]))[i] = uniform();
    }
    if (gc_vjp(ctx, c, info, "cpu", cin, (const nx_tensor *const *)dy, dx) != NX_OK) {
        printf("%s [%s]: nx_op_vjp fails: %s\n", c->name, info->name, nx_ctx_last_error(ctx));
        bad = 1;
        goto done;
    }
    for (int i = 0; i < c->nin && !bad; i++) {
        if (nx_tensor_dtype(in[i]) != NX_DTYPE_F64)
            continue;
        if (!dx[i]) {
            printf("%s [%s]: float input %s has no gradient\n", c->name, info->name,
                   info->inputs[i]);
            bad = 1;
            break;
        }
        int64_t n = nx_tensor_numel(in[i]);
        double scale = 0;
        for (int64_t j = 0; j < n; j++)
            scale = fmax(scale, fabs(gc_at(dx[i], j)));
        double *x = nx_tensor_data(in[i]);
        for (int s = 0; s < FD_SAMPLES && s < n && !bad; s++) {
            int64_t j = s == 0 ? 0 : (int64_t)((uniform() + 1) / 2 * (double)n) % n;
            double x0 = x[j], h = fmin(1e-6 * fmax(1.0, fabs(x0)), 1e-3 * gap[i]), fp = 0, fm = 0;
            x[j] = x0 + h;
            nx_status st = objective(ctx, c, info, cin, dy, &fp);
            x[j] = x0 - h;
            if (st == NX_OK)
                st = objective(ctx, c, info, cin, dy, &fm);
            x[j] = x0;
            double fd = (fp - fm) / (2 * h), an = gc_at(dx[i], j);
            double tol = FD_RTOL * fmax(fmax(fabs(fd), fabs(an)), scale);
            if (st != NX_OK || !(fabs(fd - an) <= tol)) {
                printf("%s [%s f64 cpu]: d<dy,f>/d%s[%lld] is %.12g by vjp, %.12g by central "
                       "differences (h %g; |diff| %.3g > %g)%s%s\n",
                       c->name, info->name, info->inputs[i], (long long)j, an, fd, h,
                       fabs(fd - an), tol, st != NX_OK ? ": " : "",
                       st != NX_OK ? nx_ctx_last_error(ctx) : "");
                bad = 1;
            }
            (*points)++;
        }
    }
done:
    gc_free(c->nin, raw);
    gc_free(c->nin, in);
    gc_free(info->noutputs, y);
    gc_free(info->noutputs, dy);
    gc_free(c->nin, dx);
    return bad;
}

/* A case the FD test can use: float64 by its manifest, at least one reference output float (an
 * integer output, the pool's indices, gets a zero cotangent), and no `fd = <why>` line (the
 * manifest says why the point has no finite-difference gradient). */
static bool fd_case(nx_ctx *ctx, const gc_case *c)
{
    nx_dtype dt;
    if (c->err[0] || c->no_fd[0] || !gc_dtype(c, &dt) || dt != NX_DTYPE_F64)
        return false;
    nx_tensor *want[NX_OP_MAX_IO] = {0};
    if (gc_load(ctx, c, true, want) != NX_OK)
        return false;
    bool ok = false;
    for (int k = 0; k < c->nout; k++)
        ok = ok || nx_dtype_is_float(nx_tensor_dtype(want[k]));
    gc_free(c->nout, want);
    return ok;
}

static void test_fd_all(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    size_t n = 0;
    const nx_op_info *const *ops = nx_ops(&n);
    gc_case *cases = NULL;
    int nc = gc_cases(&cases), bad = 0, points = 0, checked = 0;
    for (size_t i = 0; i < n; i++) {
        if (!ops[i]->differentiable)
            continue;
        const nx_op_desc *d = nx_op_desc_find(ops[i]->name);
        int used = 0;
        for (int c = 0; c < nc && used < FD_CASES; c++) {
            if (gc_desc(&cases[c]) != d || !fd_case(ctx, &cases[c]))
                continue;
            bad += check_case(ctx, &cases[c], ops[i], &points);
            used++;
        }
        if (!used) {
            printf("%s: differentiable but no float64 golden case to check its vjp on\n",
                   ops[i]->name);
            bad++;
        }
        checked += used > 0;
    }
    printf("fd: %d differentiable ops, %d points, %d failures\n", checked, points, bad);
    free(cases);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_fd_all)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
