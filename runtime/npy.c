/* .npy reader and writer (placeholder until implemented). */
#include "tensor.h"

nx_status nx_npy_read(nx_ctx *ctx, const char *path, nx_tensor **out) { (void)path; (void)out; return nx_rt_error(ctx, NX_ERR_UNSUPPORTED, "nx_npy_read: not implemented"); }
nx_status nx_npy_read_mem(nx_ctx *ctx, const void *b, size_t n, nx_tensor **out) { (void)b; (void)n; (void)out; return nx_rt_error(ctx, NX_ERR_UNSUPPORTED, "nx_npy_read_mem: not implemented"); }
nx_status nx_npy_write(nx_ctx *ctx, const char *path, const nx_tensor *t) { (void)path; (void)t; return nx_rt_error(ctx, NX_ERR_UNSUPPORTED, "nx_npy_write: not implemented"); }
nx_status nx_npy_write_mem(nx_ctx *ctx, const nx_tensor *t, void **b, size_t *n) { (void)t; (void)b; (void)n; return nx_rt_error(ctx, NX_ERR_UNSUPPORTED, "nx_npy_write_mem: not implemented"); }
