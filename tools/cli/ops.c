/* The op table of `nitrix run` (rows in ops.def) and the ops' run functions. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

const cli_op cli_ops[CLI_OP_COUNT] = {
#define NX_CLI_OP(name, inputs, n_outputs, summary)                                                \
    [CLI_OP_##name] = {#name, inputs, n_outputs, summary, cli_run_##name},
#define NX_CLI_OPT(op, name, type, def, allowed, help)
#include "ops.def"
#undef NX_CLI_OP
#undef NX_CLI_OPT
};

const cli_op_opt cli_op_opts[CLI_OPT_COUNT] = {
#define NX_CLI_OP(name, inputs, n_outputs, summary)
#define NX_CLI_OPT(op, name, type, def, allowed, help)                                             \
    [CLI_OPT_##op##_##name] = {CLI_OP_##op, {#name, CLI_##type, def, allowed, help}},
#include "ops.def"
#undef NX_CLI_OP
#undef NX_CLI_OPT
};

/* ------------------------------------------------------------------------------------------------
 * copy, cast: runtime operations on host tensors
 * ----------------------------------------------------------------------------------------------*/

/* --backend=cuda sends the array to the device and back, which exercises the device path; every
 * other backend copies on the host, where tensors live. */
nx_status cli_run_copy(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    (void)ctx;
    if (call->backend != NX_BACKEND_CUDA)
        return nx_tensor_copy(call->inputs[0], &outs[0]);
    nx_tensor *dev = NULL;
    nx_status st = nx_tensor_to_device(call->inputs[0], NX_DEVICE_CUDA, &dev);
    if (st == NX_OK)
        st = nx_tensor_to_device(dev, NX_DEVICE_HOST, &outs[0]);
    nx_tensor_free(dev);
    return st;
}

/* There is no device cast yet: a cuda request falls back to the host loudly, as the library's
 * backends do (a warning, silenced by NITRIX_SILENCE_FALLBACK, an error under
 * NITRIX_STRICT_BACKEND). */
nx_status cli_run_cast(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    if (call->backend == NX_BACKEND_CUDA) {
        if (nx_ctx_strict_backend(ctx)) {
            snprintf(call->err, call->errlen,
                     "cast: the cuda backend has no cast yet and strict backend mode "
                     "(NITRIX_STRICT_BACKEND) forbids running it on the host");
            return NX_ERR_UNSUPPORTED;
        }
        if (!nx_ctx_silence_fallback(ctx))
            nx_ctx_log(ctx, NX_LOG_WARN,
                       "cast: the cuda backend has no cast yet; casting on the host. "
                       "NITRIX_SILENCE_FALLBACK=1 silences this warning, NITRIX_STRICT_BACKEND=1 "
                       "makes it an error");
    }
    return nx_tensor_cast(call->inputs[0], call->values[CLI_OPT_cast_dtype].dtype, &outs[0]);
}
