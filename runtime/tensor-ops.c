/* Tensor copies, casts and views (placeholder until implemented). */
#include "tensor.h"

#define NOT_YET(fn) return nx_rt_error(nx_tensor_ctx(t), NX_ERR_UNSUPPORTED, fn ": not implemented")

nx_status nx_tensor_copy(const nx_tensor *t, nx_tensor **out) { (void)out; NOT_YET("nx_tensor_copy"); }
nx_status nx_tensor_contiguous(const nx_tensor *t, nx_tensor **out) { (void)out; NOT_YET("nx_tensor_contiguous"); }
nx_status nx_tensor_cast(const nx_tensor *t, nx_dtype d, nx_tensor **out) { (void)d; (void)out; NOT_YET("nx_tensor_cast"); }
nx_status nx_tensor_reshape(const nx_tensor *t, int n, const int64_t *s, nx_tensor **out) { (void)n; (void)s; (void)out; NOT_YET("nx_tensor_reshape"); }
nx_status nx_tensor_permute(const nx_tensor *t, const int *p, nx_tensor **out) { (void)p; (void)out; NOT_YET("nx_tensor_permute"); }
nx_status nx_tensor_slice(const nx_tensor *t, int a, int64_t b, int64_t e, int64_t s, nx_tensor **out) { (void)a; (void)b; (void)e; (void)s; (void)out; NOT_YET("nx_tensor_slice"); }
