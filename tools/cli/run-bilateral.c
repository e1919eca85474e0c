/* `nitrix run` functions of the bilateral family (rows in ops-bilateral.def): the bilateral
 * filter over an explicit neighbourhood or the k nearest points, k-NN, the spatial cube, the SUSAN
 * emulator and the Cholesky factor of a metric. */
#include <string.h>

#include "cli.h"
#include "nitrix-ops.h"

static nx_metric_kind metric_of(const char *s)
{
    return strcmp(s, "factor") == 0 ? NX_METRIC_FACTOR : NX_METRIC_DIAGONAL;
}

nx_status cli_run_bilateral_gaussian(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    const cli_value *v = call->values;
    nx_bilateral_opts o = {
        .backend = call->backend,
        .metric = {metric_of(v[CLI_OPT_bilateral_gaussian_metric].choice), call->inputs[2]},
        .index = call->inputs[3],
        .mask = call->inputs[4],
        .n_iters = (int)v[CLI_OPT_bilateral_gaussian_n_iters].i};
    return nx_bilateral_gaussian(ctx, call->inputs[0], call->inputs[1], &o, &outs[0]);
}

nx_status cli_run_bilateral_gaussian_knn(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    const cli_value *v = call->values;
    nx_bilateral_opts o = {
        .backend = call->backend,
        .metric = {metric_of(v[CLI_OPT_bilateral_gaussian_knn_metric].choice), call->inputs[2]},
        .k = v[CLI_OPT_bilateral_gaussian_knn_k].i,
        .n_iters = (int)v[CLI_OPT_bilateral_gaussian_knn_n_iters].i};
    return nx_bilateral_gaussian(ctx, call->inputs[0], call->inputs[1], &o, &outs[0]);
}

nx_status cli_run_brute_force_knn(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    const cli_value *v = call->values;
    nx_feature_metric m = {metric_of(v[CLI_OPT_brute_force_knn_metric].choice), call->inputs[1]};
    nx_knn_opts o = {.backend = call->backend,
                     .metric = &m,
                     .exclude_self = v[CLI_OPT_brute_force_knn_exclude_self].b};
    return nx_brute_force_knn(ctx, call->inputs[0], v[CLI_OPT_brute_force_knn_k].i, &o, &outs[0]);
}

nx_status cli_run_spatial_cube_neighbourhood(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    const nx_tensor *grid = call->inputs[0];
    return nx_spatial_cube_neighbourhood(ctx, nx_tensor_ndim(grid), nx_tensor_shape(grid),
                                         call->values[CLI_OPT_spatial_cube_neighbourhood_half].i,
                                         &outs[0], &outs[1]);
}

nx_status cli_run_susan_emulator(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    const cli_value *v = call->values;
    nx_susan_opts o = {.backend = call->backend,
                       .nspatial = (int)v[CLI_OPT_susan_emulator_nspatial].i,
                       .sigma_space = v[CLI_OPT_susan_emulator_sigma_space].f,
                       .sigma_intensity = v[CLI_OPT_susan_emulator_sigma_intensity].f,
                       .bthresh = v[CLI_OPT_susan_emulator_bthresh].f,
                       .skip_median = !v[CLI_OPT_susan_emulator_use_median].b,
                       .half = v[CLI_OPT_susan_emulator_half].i};
    return nx_susan_emulator(ctx, call->inputs[0], &o, &outs[0]);
}

nx_status cli_run_metric_from_spd(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    return nx_metric_from_spd(ctx, call->inputs[0], &outs[0]);
}
