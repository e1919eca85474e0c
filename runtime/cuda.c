/* Placeholder: the CUDA driver and NVRTC loader is being written. */
#include <stdio.h>

#include "tensor.h"

void nx_rt_cuda_probe(nx_ctx *ctx, nx_system_info *info)
{
    (void)ctx;
    info->cuda_driver_found = false;
    info->nvrtc_found = false;
    snprintf(info->cuda_status, sizeof info->cuda_status, "CUDA support is not built yet");
}

nx_status nx_tensor_to_device(const nx_tensor *t, nx_device device, nx_tensor **out)
{
    (void)device;
    (void)out;
    return nx_rt_error(nx_tensor_ctx(t), NX_ERR_UNSUPPORTED, "nx_tensor_to_device: not built yet");
}
