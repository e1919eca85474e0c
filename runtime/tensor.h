/* The tensor object, shared by the runtime, the interpreter and the backends. Not installed. */
#ifndef NX_RUNTIME_TENSOR_H
#define NX_RUNTIME_TENSOR_H

#include "internal.h"

/* Refcounted storage. Owned storage came from the context allocator (64-byte aligned); borrowed
 * storage (nx_tensor_wrap) is never freed by the library. */
typedef struct nx_storage {
    nx_ctx *ctx;
    void *data;
    size_t bytes;
    int64_t refs;
    bool owned;
    nx_device device;
    /* Frees data for owned storage that did not come from the host allocator (device memory);
     * NULL: nx_rt_free(ctx, data, bytes). */
    void (*release)(struct nx_storage *s);
    void *release_user;
} nx_storage;

struct nx_tensor {
    nx_storage *storage;
    int64_t offset; /* in elements, from storage->data to element (0, ..., 0) */
    nx_dtype dtype;
    int ndim;
    int64_t shape[NX_MAX_DIMS];
    int64_t strides[NX_MAX_DIMS]; /* in elements */
};

/* A new handle viewing t's storage with the given geometry (one more storage reference). */
NX_HIDDEN nx_status nx_rt_tensor_view(const nx_tensor *t, int ndim, const int64_t *shape,
                                      const int64_t *strides, int64_t offset, nx_tensor **out);
/* nx_tensor_new without the zero fill, for results that overwrite every byte (copies, casts). */
NX_HIDDEN nx_status nx_rt_tensor_new_uninit(nx_ctx *ctx, nx_dtype dtype, int ndim,
                                            const int64_t *shape, nx_tensor **out);
/* C-order strides for shape. */
NX_HIDDEN void nx_rt_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);

#endif /* NX_RUNTIME_TENSOR_H */
