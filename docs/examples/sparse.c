/* A 1-D heat step on a 6-point ring as an ELL: y = x + 0.25 * L x with L the periodic grid
 * Laplacian, then the same neighbours under max-plus (a one-step grey dilation). Built and run by
 * tests/ops/sparse/meson.build (test sparse-example). */
#include <math.h>
#include <stdio.h>

#include "nitrix-ops.h"

static int fail(nx_ctx *ctx, const char *what)
{
    fprintf(stderr, "%s: %s\n", what, nx_ctx_last_error(ctx));
    nx_ctx_free(ctx);
    return 1;
}

int main(void)
{
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(NULL, &ctx) != NX_OK)
        return 1;
    int64_t grid[1] = {6}, col[2] = {6, 1};
    nx_ell lap;
    if (nx_grid_laplacian(ctx, 1, grid, NX_GRID_PERIODIC, 1.0, true, &lap) != NX_OK)
        return fail(ctx, "grid_laplacian");
    nx_tensor *x = NULL, *lx = NULL;
    nx_tensor_new(ctx, NX_DTYPE_F64, 2, col, &x);
    double *xv = nx_tensor_data(x);
    for (int i = 0; i < 6; i++)
        xv[i] = i == 2 ? 1.0 : 0.0;
    nx_semiring_opts cpu = {.backend = NX_BACKEND_CPU};
    if (nx_semiring_ell_matmul(ctx, nx_semiring_builtin(NX_SEMIRING_REAL), &lap, x, &cpu, &lx))
        return fail(ctx, "ell_matmul");
    const double *l = nx_tensor_data(lx);
    printf("heat step:");
    for (int i = 0; i < 6; i++)
        printf(" %.3f", xv[i] + 0.25 * l[i]);
    printf("\n");
    /* Max-plus over the same slots with 0 weights: y_i = max(x_{i-1}, x_i, x_{i+1}). */
    nx_tensor *zero = NULL, *dil = NULL;
    int64_t vs[2] = {6, 3};
    nx_tensor_new(ctx, NX_DTYPE_F64, 2, vs, &zero);
    nx_ell flat = {.values = zero, .indices = lap.indices, .n_cols = 6, .identity = -INFINITY};
    if (nx_semiring_ell_matmul(ctx, nx_semiring_builtin(NX_SEMIRING_TROPICAL_MAX_PLUS), &flat, x,
                               &cpu, &dil))
        return fail(ctx, "ell_matmul max-plus");
    printf("dilation: ");
    for (int i = 0; i < 6; i++)
        printf(" %.0f", ((const double *)nx_tensor_data(dil))[i]);
    printf("\n");
    nx_tensor_free(x), nx_tensor_free(lx), nx_tensor_free(zero), nx_tensor_free(dil);
    nx_ell_free(&lap);
    nx_ctx_free(ctx);
    return 0;
}
