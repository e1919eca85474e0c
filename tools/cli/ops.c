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

/* --backend=cuda sends the array through the device and back, which exercises the device path;
 * every other backend copies on the host, where tensors live. */
nx_status cli_run_copy(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    (void)ctx;
    if (call->backend != NX_BACKEND_CUDA)
        return nx_tensor_copy(call->inputs[0], &outs[0]);
    nx_tensor *dev = NULL, *dev_copy = NULL;
    nx_status st = nx_tensor_to_device(call->inputs[0], NX_DEVICE_CUDA, &dev);
    if (st == NX_OK)
        st = nx_tensor_copy(dev, &dev_copy);
    if (st == NX_OK)
        st = nx_tensor_to_device(dev_copy, NX_DEVICE_HOST, &outs[0]);
    nx_tensor_free(dev_copy);
    nx_tensor_free(dev);
    return st;
}

nx_status cli_run_cast(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    (void)ctx;
    if (call->backend == NX_BACKEND_CUDA) {
        snprintf(call->err, call->errlen,
                 "cast: the cuda backend has no cast yet (casts run on host tensors); expected "
                 "--backend=auto, cpu or ref");
        return NX_ERR_UNSUPPORTED;
    }
    return nx_tensor_cast(call->inputs[0], call->values[CLI_OPT_cast_dtype].dtype, &outs[0]);
}
