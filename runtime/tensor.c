/* Host tensors: refcounted storage plus a strided view (shape, strides in elements, offset). */
#include <string.h>

#include "tensor.h"

void nx_rt_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides)
{
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i] > 0 ? shape[i] : 1;
    }
}

static nx_status check_geometry(nx_ctx *ctx, const char *fn, nx_dtype dtype, int ndim,
                                const int64_t *shape, int64_t *bytes)
{
    if (nx_dtype_size(dtype) == 0)
        return nx_rt_error(ctx, NX_ERR_DTYPE, "%s: dtype %d is not a dtype", fn, (int)dtype);
    if (ndim < 0 || ndim > NX_MAX_DIMS)
        return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: ndim is %d; expected 0 to %d", fn, ndim,
                           NX_MAX_DIMS);
    if (ndim > 0 && !shape)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: shape is NULL with ndim %d", fn, ndim);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: extent %d is %lld; expected >= 0", fn, i,
                               (long long)shape[i]);
    }
    int64_t numel;
    if (!nx_shape_numel(ndim, shape, &numel) ||
        !nx_mul_i64(numel, (int64_t)nx_dtype_size(dtype), bytes) || *bytes > INT64_MAX / 2) {
        char buf[160];
        return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: shape %s of %s overflows the address space", fn,
                           nx_shape_str(buf, sizeof buf, ndim, shape), nx_dtype_name(dtype));
    }
    return NX_OK;
}

static nx_status new_handle(nx_ctx *ctx, nx_storage *s, nx_dtype dtype, int ndim,
                            const int64_t *shape, const int64_t *strides, int64_t offset,
                            nx_tensor **out)
{
    nx_tensor *t = nx_rt_alloc(ctx, sizeof *t);
    if (!t)
        return nx_rt_nomem(ctx, "tensor", sizeof *t);
    memset(t, 0, sizeof *t);
    t->storage = s;
    t->offset = offset;
    t->dtype = dtype;
    t->ndim = ndim;
    if (ndim) {
        memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
        if (strides)
            memcpy(t->strides, strides, (size_t)ndim * sizeof *strides);
        else
            nx_rt_contiguous_strides(ndim, shape, t->strides);
    }
    /* views of one storage may be made and freed on different threads */
    __atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
    *out = t;
    return NX_OK;
}

static nx_status tensor_alloc(nx_ctx *ctx, const char *fn, nx_dtype dtype, int ndim,
                              const int64_t *shape, bool zero, nx_tensor **out)
{
    if (!ctx || !out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: ctx and out must be non-NULL", fn);
    *out = NULL;
    int64_t bytes;
    nx_status st = check_geometry(ctx, fn, dtype, ndim, shape, &bytes);
    if (st != NX_OK)
        return st;
    nx_storage *s = nx_rt_alloc(ctx, sizeof *s);
    if (!s)
        return nx_rt_nomem(ctx, fn, sizeof *s);
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->bytes = (size_t)bytes;
    s->owned = true;
    s->device = NX_DEVICE_HOST;
    s->data = nx_rt_alloc_aligned(ctx, s->bytes, 64);
    if (!s->data) {
        nx_rt_free(ctx, s, sizeof *s);
        return nx_rt_nomem(ctx, fn, (size_t)bytes);
    }
    if (zero)
        memset(s->data, 0, s->bytes);
    st = new_handle(ctx, s, dtype, ndim, shape, NULL, 0, out);
    if (st != NX_OK) {
        nx_rt_free(ctx, s->data, s->bytes);
        nx_rt_free(ctx, s, sizeof *s);
    }
    return st;
}

nx_status nx_tensor_new(nx_ctx *ctx, nx_dtype dtype, int ndim, const int64_t *shape,
                        nx_tensor **out)
{
    return tensor_alloc(ctx, "nx_tensor_new", dtype, ndim, shape, true, out);
}

nx_status nx_rt_tensor_new_uninit(nx_ctx *ctx, nx_dtype dtype, int ndim, const int64_t *shape,
                                  nx_tensor **out)
{
    return tensor_alloc(ctx, "nx_tensor_new", dtype, ndim, shape, false, out);
}

nx_status nx_tensor_wrap(nx_ctx *ctx, void *data, nx_dtype dtype, int ndim, const int64_t *shape,
                         const int64_t *strides, nx_tensor **out)
{
    if (!ctx || !out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "nx_tensor_wrap: ctx and out must be non-NULL");
    *out = NULL;
    int64_t bytes;
    nx_status st = check_geometry(ctx, "nx_tensor_wrap", dtype, ndim, shape, &bytes);
    if (st != NX_OK)
        return st;
    if (!data && bytes > 0)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_tensor_wrap: data is NULL for a tensor of %lld bytes",
                           (long long)bytes);
    nx_storage *s = nx_rt_alloc(ctx, sizeof *s);
    if (!s)
        return nx_rt_nomem(ctx, "nx_tensor_wrap", sizeof *s);
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->data = data;
    s->bytes = (size_t)bytes;
    s->owned = false;
    s->device = NX_DEVICE_HOST;
    st = new_handle(ctx, s, dtype, ndim, shape, strides, 0, out);
    if (st != NX_OK)
        nx_rt_free(ctx, s, sizeof *s);
    return st;
}

nx_status nx_tensor_wrap_device(nx_ctx *ctx, void *data, nx_device device, nx_dtype dtype,
                                int ndim, const int64_t *shape, const int64_t *strides,
                                nx_tensor **out)
{
    if (!ctx || !out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_tensor_wrap_device: ctx and out must be non-NULL");
    *out = NULL;
    if (device != NX_DEVICE_HOST && device != NX_DEVICE_CUDA)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_tensor_wrap_device: device is %d; expected NX_DEVICE_HOST (0) or "
                           "NX_DEVICE_CUDA (1)",
                           (int)device);
    nx_tensor *t = NULL;
    nx_status st = nx_tensor_wrap(ctx, data, dtype, ndim, shape, strides, &t);
    if (st != NX_OK)
        return st;
    t->storage->device = device;
    *out = t;
    return NX_OK;
}

nx_status nx_rt_tensor_view(const nx_tensor *t, int ndim, const int64_t *shape,
                            const int64_t *strides, int64_t offset, nx_tensor **out)
{
    return new_handle(t->storage->ctx, t->storage, t->dtype, ndim, shape, strides, offset, out);
}

void nx_tensor_free(nx_tensor *t)
{
    if (!t)
        return;
    nx_storage *s = t->storage;
    nx_ctx *ctx = s->ctx;
    nx_rt_free(ctx, t, sizeof *t);
    if (__atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) > 0)
        return;
    if (s->owned && s->release)
        s->release(s);
    else if (s->owned)
        nx_rt_free(ctx, s->data, s->bytes);
    nx_rt_free(ctx, s, sizeof *s);
}

nx_ctx *nx_tensor_ctx(const nx_tensor *t)
{
    return t->storage->ctx;
}
nx_dtype nx_tensor_dtype(const nx_tensor *t)
{
    return t->dtype;
}
int nx_tensor_ndim(const nx_tensor *t)
{
    return t->ndim;
}
const int64_t *nx_tensor_shape(const nx_tensor *t)
{
    return t->shape;
}
const int64_t *nx_tensor_strides(const nx_tensor *t)
{
    return t->strides;
}
nx_device nx_tensor_device(const nx_tensor *t)
{
    return t->storage->device;
}

int64_t nx_tensor_numel(const nx_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

bool nx_tensor_is_contiguous(const nx_tensor *t)
{
    if (nx_tensor_numel(t) == 0)
        return true; /* no element is addressed, so any strides will do (as in NumPy) */
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != s)
            return false;
        s *= t->shape[i];
    }
    return true;
}

void *nx_tensor_data(const nx_tensor *t)
{
    if (nx_tensor_numel(t) == 0 || !t->storage->data)
        return NULL;
    return (char *)t->storage->data + t->offset * (int64_t)nx_dtype_size(t->dtype);
}
