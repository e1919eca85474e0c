/* `nitrix run` for the semiring entry points: semiring_matmul, semiring_conv, pairwise_reduce. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "nitrix-ops.h"

static const char *const algebras[] = {
    "real", "log", "tropical_max_plus", "tropical_min_plus", "boolean", "euclidean"};

static const nx_semiring *algebra(const char *name)
{
    for (int i = 0; i < (int)(sizeof algebras / sizeof algebras[0]); i++)
        if (!strcmp(name, algebras[i]))
            return nx_semiring_builtin((nx_semiring_kind)i);
    return NULL;
}

nx_status cli_run_semiring_matmul(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    nx_semiring_opts o = {.backend = call->backend};
    const nx_semiring *sr = algebra(call->values[CLI_OPT_semiring_matmul_semiring].choice);
    return nx_semiring_matmul(ctx, sr, call->inputs[0], call->inputs[1], &o, &outs[0]);
}

/* One value applies to every spatial dim; otherwise one per dim. */
static bool spread(const cli_value *v, int d, int64_t *out, const char *name, const cli_call *call)
{
    if (v->n != 1 && v->n != d) {
        snprintf(call->err, call->errlen,
                 "--%s has %d values; expected 1 or %d (one per spatial dim)", name, v->n, d);
        return false;
    }
    for (int i = 0; i < d; i++)
        out[i] = v->ints[v->n == 1 ? 0 : i];
    return true;
}

nx_status cli_run_semiring_conv(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    const cli_value *v = call->values;
    int d = nx_tensor_ndim(call->inputs[1]) - 2;
    if (d < 1 || d > NX_CONV_MAX_SPATIAL) {
        snprintf(call->err, call->errlen,
                 "the kernel has %d dims; expected [w_1..w_d, c_in, c_out] with "
                 "d = 1..3",
                 d + 2);
        return NX_ERR_SHAPE;
    }
    nx_semiring_conv_opts o = {.backend = call->backend, .nspatial = d};
    const char *pad = v[CLI_OPT_semiring_conv_padding].choice;
    o.padding = !strcmp(pad, "same")    ? NX_CONV_SAME
                : !strcmp(pad, "valid") ? NX_CONV_VALID
                                        : NX_CONV_EXPLICIT;
    if (!spread(&v[CLI_OPT_semiring_conv_stride], d, o.stride, "stride", call) ||
        !spread(&v[CLI_OPT_semiring_conv_dilation], d, o.dilation, "dilation", call) ||
        !spread(&v[CLI_OPT_semiring_conv_pad_lo], d, o.pad_lo, "pad_lo", call) ||
        !spread(&v[CLI_OPT_semiring_conv_pad_hi], d, o.pad_hi, "pad_hi", call))
        return NX_ERR_INVALID_ARG;
    const nx_semiring *sr = algebra(v[CLI_OPT_semiring_conv_semiring].choice);
    return nx_semiring_conv(ctx, sr, call->inputs[0], call->inputs[1], &o, &outs[0]);
}

nx_status cli_run_pairwise_reduce(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    static const char *const reductions[] = {"sum",    "max",    "min", "logsumexp",
                                             "argmin", "argmax", "kmin"};
    const cli_value *v = call->values;
    const char *kernel = v[CLI_OPT_pairwise_reduce_kernel].choice;
    const char *red = v[CLI_OPT_pairwise_reduce_reduction].choice;
    nx_pairwise_opts o = {.backend = call->backend, .k = v[CLI_OPT_pairwise_reduce_k].i};
    o.formula = !strcmp(kernel, "gaussian")     ? "exp(-sqdist(x, y) / p0)"
                : !strcmp(kernel, "neg_sqdist") ? "-sqdist(x, y) / p0"
                                                : "sqdist(x, y)";
    for (int i = 0; i < NX_PAIRWISE_REDUCTION_COUNT; i++)
        if (!strcmp(red, reductions[i]))
            o.reduction = (nx_pairwise_reduction)i;
    bool uses_eps = strcmp(kernel, "sqdist") != 0;
    nx_dtype dt = nx_tensor_dtype(call->inputs[0]);
    int64_t one = 1;
    nx_tensor *p = NULL, *idx = NULL;
    nx_status st = NX_OK;
    if (uses_eps && (st = nx_tensor_new(ctx, dt, 1, &one, &p)) != NX_OK)
        return st;
    if (p && dt == NX_DTYPE_F32)
        *(float *)nx_tensor_data(p) = (float)v[CLI_OPT_pairwise_reduce_eps].f;
    else if (p && dt == NX_DTYPE_F64)
        *(double *)nx_tensor_data(p) = v[CLI_OPT_pairwise_reduce_eps].f;
    st = nx_pairwise_reduce(ctx, call->inputs[0], call->inputs[1], NULL, p, &o, &outs[0],
                            o.reduction == NX_PAIRWISE_KMIN ? &idx : NULL);
    nx_tensor_free(idx);
    nx_tensor_free(p);
    return st;
}
