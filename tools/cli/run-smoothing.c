/* `nitrix run` functions of the smoothing family (rows in ops-smoothing.def): gaussian_filter. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "nitrix-ops.h"

/* A per-axis list given as one value for all or one per spatial axis. */
static bool per_axis(const cli_call *call, const cli_value *v, const char *name, int nsp)
{
    if (v->n == 1 || v->n == nsp)
        return true;
    snprintf(call->err, call->errlen, "--%s has %d values; expected 1 or %d (one per spatial axis)",
             name, v->n, nsp);
    return false;
}

nx_status cli_run_gaussian_filter(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    static const char *const modes[NX_GAUSSIAN_MODE_COUNT] = {
        [NX_GAUSSIAN_REFLECT] = "reflect", [NX_GAUSSIAN_MIRROR] = "mirror",
        [NX_GAUSSIAN_NEAREST] = "nearest", [NX_GAUSSIAN_CONSTANT] = "constant",
        [NX_GAUSSIAN_WRAP] = "wrap"};
    const cli_value *v = call->values;
    const cli_value *sigma = &v[CLI_OPT_gaussian_filter_sigma];
    const cli_value *ks = &v[CLI_OPT_gaussian_filter_kernel_size];
    int nd = nx_tensor_ndim(call->inputs[0]);
    int nsp = v[CLI_OPT_gaussian_filter_nspatial].i ? (int)v[CLI_OPT_gaussian_filter_nspatial].i
                                                    : nd;
    if (nsp < 1 || nsp > NX_GAUSSIAN_MAX_SPATIAL || nsp > nd) {
        snprintf(call->err, call->errlen, "x has %d dims and %d are spatial; expected 1..%d", nd,
                 nsp, NX_GAUSSIAN_MAX_SPATIAL);
        return NX_ERR_SHAPE;
    }
    if (!per_axis(call, sigma, "sigma", nsp) || !per_axis(call, ks, "kernel_size", nsp))
        return NX_ERR_INVALID_ARG;
    nx_gaussian_opts o = {.backend = call->backend,
                          .nspatial = nsp,
                          .nsigma = sigma->n,
                          .truncate = v[CLI_OPT_gaussian_filter_truncate].f,
                          .cval = v[CLI_OPT_gaussian_filter_cval].f,
                          .driver = v[CLI_OPT_gaussian_filter_driver].choice};
    for (int i = 0; i < sigma->n; i++)
        o.sigma[i] = sigma->floats[i];
    for (int i = 0; i < nsp; i++)
        o.kernel_size[i] = ks->ints[ks->n == 1 ? 0 : i];
    for (int m = 0; m < NX_GAUSSIAN_MODE_COUNT; m++)
        if (!strcmp(v[CLI_OPT_gaussian_filter_mode].choice, modes[m]))
            o.mode = (nx_gaussian_mode)m;
    return nx_gaussian_filter(ctx, call->inputs[0], &o, &outs[0]);
}
