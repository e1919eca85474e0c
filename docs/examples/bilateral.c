/* Bilateral smoothing of a small 2-D image through the public API: the 3 x 3 cube around each
 * pixel as the neighbourhood (outside places masked), features (row, column, intensity) under a
 * diagonal metric, then the gradient of the sum of the result with respect to sigma. Built and
 * run by the test suite (tests/ops/bilateral). */
#include <math.h>
#include <stdio.h>

#include <nitrix-ops.h>

#define H 6
#define W 7

static int fail(nx_ctx *ctx, const char *what)
{
    fprintf(stderr, "bilateral example: %s: %s\n", what, nx_ctx_last_error(ctx));
    return 1;
}

int main(void)
{
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(NULL, &ctx) != NX_OK)
        return fail(NULL, "nx_ctx_new");
    int rc = 1;
    nx_tensor *values = NULL, *features = NULL, *sigma = NULL, *index = NULL, *valid = NULL;
    nx_tensor *out = NULL, *dsigma = NULL;
    int64_t n = H * W;
    if (nx_tensor_new(ctx, NX_DTYPE_F64, 2, (int64_t[]){n, 1}, &values) != NX_OK ||
        nx_tensor_new(ctx, NX_DTYPE_F64, 2, (int64_t[]){n, 3}, &features) != NX_OK ||
        nx_tensor_new(ctx, NX_DTYPE_F64, 1, (int64_t[]){3}, &sigma) != NX_OK ||
        nx_spatial_cube_neighbourhood(ctx, 2, (int64_t[]){H, W}, 1, &index, &valid) != NX_OK) {
        rc = fail(ctx, "inputs");
        goto done;
    }
    /* A step edge plus a ripple: the filter smooths the ripple and keeps the edge. */
    double *v = nx_tensor_data(values), *f = nx_tensor_data(features), *s = nx_tensor_data(sigma);
    for (int64_t i = 0; i < n; i++) {
        int64_t r = i / W, c = i % W;
        v[i] = (c < W / 2 ? 0.0 : 10.0) + 0.3 * sin((double)(3 * r + c));
        f[3 * i] = (double)r, f[3 * i + 1] = (double)c, f[3 * i + 2] = v[i];
    }
    s[0] = s[1] = 1.0; /* pixels */
    s[2] = 1.0;        /* intensity */
    nx_bilateral_opts o = {.metric = {NX_METRIC_DIAGONAL, sigma}, .index = index, .mask = valid};
    if (nx_bilateral_gaussian(ctx, values, features, &o, &out) != NX_OK) {
        rc = fail(ctx, "nx_bilateral_gaussian");
        goto done;
    }
    /* d sum(out) / d sigma: the cotangent of every output is 1. */
    nx_tensor *ones = NULL;
    if (nx_tensor_new(ctx, NX_DTYPE_F64, 2, (int64_t[]){n, 1}, &ones) != NX_OK) {
        rc = fail(ctx, "ones");
        goto done;
    }
    for (int64_t i = 0; i < n; i++)
        ((double *)nx_tensor_data(ones))[i] = 1;
    nx_status st = nx_bilateral_gaussian_vjp(ctx, values, features, &o, ones, NULL, NULL, &dsigma);
    nx_tensor_free(ones);
    if (st != NX_OK) {
        rc = fail(ctx, "nx_bilateral_gaussian_vjp");
        goto done;
    }
    const double *y = nx_tensor_data(out), *g = nx_tensor_data(dsigma);
    double jump = y[2 * W + W / 2] - y[2 * W + W / 2 - 1];
    printf("edge kept: out[2, %d] - out[2, %d] = %.3f (input %.3f)\n", W / 2, W / 2 - 1, jump,
           v[2 * W + W / 2] - v[2 * W + W / 2 - 1]);
    printf("d sum(out) / d sigma = [%.4g, %.4g, %.4g]\n", g[0], g[1], g[2]);
    rc = jump > 9 && isfinite(g[0]) && isfinite(g[1]) && isfinite(g[2]) ? 0 : 1;
done:
    nx_tensor_free(values);
    nx_tensor_free(features);
    nx_tensor_free(sigma);
    nx_tensor_free(index);
    nx_tensor_free(valid);
    nx_tensor_free(out);
    nx_tensor_free(dsigma);
    nx_ctx_free(ctx);
    return rc;
}
