/* Gaussian smoothing of a 3-D image with a leading batch axis: the fir driver (equal to
 * scipy.ndimage.gaussian_filter), the recursive one (O(N) whatever sigma is), and the gradient of
 * <dy, smooth(x)> with respect to x and sigma. Built and run by tests/ops/smoothing/meson.build. */
#include <math.h>
#include <stdio.h>

#include <nitrix-ops.h>

static int fail(nx_ctx *ctx, const char *what)
{
    fprintf(stderr, "smoothing example: %s: %s\n", what, nx_ctx_last_error(ctx));
    nx_ctx_free(ctx);
    return 1;
}

int main(void)
{
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(NULL, &ctx) != NX_OK)
        return fail(NULL, "context");
    /* 2 images of 16 x 20 x 24: an impulse in the middle of each */
    int64_t shape[4] = {2, 16, 20, 24};
    nx_tensor *x = NULL, *fir = NULL, *rec = NULL, *dx = NULL, *ds = NULL;
    if (nx_tensor_new(ctx, NX_DTYPE_F64, 4, shape, &x) != NX_OK)
        return fail(ctx, "tensor");
    double *v = nx_tensor_data(x);
    v[(8 * 20 + 10) * 24 + 12] = 1.0;
    v[16 * 20 * 24 + (8 * 20 + 10) * 24 + 12] = 2.0;

    nx_gaussian_opts o = {
        .nspatial = 3,           /* axis 0 is a batch axis */
        .nsigma = 3,
        .sigma = {1.0, 1.5, 2.0}, /* per spatial axis */
        .mode = NX_GAUSSIAN_REFLECT,
        .driver = "fir",
    };
    if (nx_gaussian_filter(ctx, x, &o, &fir) != NX_OK)
        return fail(ctx, "fir");
    o.driver = "recursive";
    if (nx_gaussian_filter(ctx, x, &o, &rec) != NX_OK)
        return fail(ctx, "recursive");
    /* the kernel has unit mass: each image keeps its total */
    const double *f = nx_tensor_data(fir), *r = nx_tensor_data(rec);
    double mass = 0, worst = 0;
    for (int64_t i = 0; i < 16 * 20 * 24; i++) {
        mass += f[i];
        worst = fmax(worst, fabs(f[i] - r[i]));
    }
    printf("fir mass %.12f, recursive vs fir max difference %.2e\n", mass, worst);

    /* gradients with respect to x and sigma of <y, gaussian(x)> (fir: sigma's gradient) */
    o.driver = "fir";
    if (nx_gaussian_filter_vjp(ctx, x, fir, &o, &dx, &ds) != NX_OK)
        return fail(ctx, "vjp");
    const double *g = nx_tensor_data(ds);
    printf("d<y, g(x)>/dsigma = %.6g %.6g %.6g\n", g[0], g[1], g[2]);
    int bad = fabs(mass - 1.0) > 1e-12 || worst > 0.07 || !(g[0] < 0 && g[1] < 0 && g[2] < 0);
    nx_tensor_free(x);
    nx_tensor_free(fir);
    nx_tensor_free(rec);
    nx_tensor_free(dx);
    nx_tensor_free(ds);
    nx_ctx_free(ctx);
    return bad;
}
