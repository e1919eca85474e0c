/* The CUDA runtime layer: the driver (libcuda.so.1) and NVRTC, opened with dlopen at run time and
 * never linked, device detection, per-context device state (primary context, stream, caching
 * device allocator), host<->device copies and kernel launch. Not installed.
 *
 * The few Driver API and NVRTC types are declared here (values as in CUDA 13.0's cuda.h and
 * nvrtc.h), so the build never needs a CUDA toolkit. Entry points are resolved by their versioned
 * names (cuMemAlloc_v2, ...): a dlsym of a base name can return an older ABI. */
#ifndef NX_RUNTIME_CUDA_H
#define NX_RUNTIME_CUDA_H

#include "tensor.h"

/* ---- Driver API types ------------------------------------------------------------------------*/

typedef int nx_cu_result;
typedef int nx_cu_device;
typedef unsigned long long nx_cu_ptr; /* CUdeviceptr_v2 */
typedef struct nx_cu_ctx_st *nx_cu_context;
typedef struct nx_cu_mod_st *nx_cu_module;
typedef struct nx_cu_func_st *nx_cu_function;
typedef struct nx_cu_stream_st *nx_cu_stream;

enum {
    NX_CU_SUCCESS = 0,
    NX_CU_ERROR_INVALID_VALUE = 1,
    NX_CU_ERROR_OUT_OF_MEMORY = 2,
    NX_CU_ERROR_NOT_INITIALIZED = 3,
    NX_CU_ERROR_STUB_LIBRARY = 34,
    NX_CU_ERROR_INSUFFICIENT_DRIVER = 35,
    NX_CU_ERROR_NO_DEVICE = 100,
    NX_CU_ERROR_INVALID_PTX = 218,
    NX_CU_ERROR_UNSUPPORTED_PTX_VERSION = 222,
};

enum {
    NX_CU_ATTR_SM_COUNT = 16,     /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */
    NX_CU_ATTR_CC_MAJOR = 75,     /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
    NX_CU_ATTR_CC_MINOR = 76,     /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR */
    NX_CU_ATTR_SMEM_OPTIN = 97,   /* CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
    NX_CU_JIT_ERROR_LOG = 5,      /* CU_JIT_ERROR_LOG_BUFFER */
    NX_CU_JIT_ERROR_LOG_SIZE = 6, /* CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES */
    NX_CU_FUNC_MAX_DYN_SMEM = 8,  /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
    NX_CU_STREAM_NON_BLOCKING = 1,
};

/* The driver entry points nitrix uses; each field is named after the symbol it is loaded from. */
typedef struct nx_rt_cuda_api {
    nx_cu_result (*cuInit)(unsigned flags);
    nx_cu_result (*cuDriverGetVersion)(int *version);
    nx_cu_result (*cuGetErrorName)(nx_cu_result err, const char **name);
    nx_cu_result (*cuGetErrorString)(nx_cu_result err, const char **text);
    nx_cu_result (*cuDeviceGetCount)(int *count);
    nx_cu_result (*cuDeviceGet)(nx_cu_device *dev, int ordinal);
    nx_cu_result (*cuDeviceGetName)(char *name, int len, nx_cu_device dev);
    nx_cu_result (*cuDeviceGetAttribute)(int *value, int attr, nx_cu_device dev);
    nx_cu_result (*cuDeviceTotalMem_v2)(size_t *bytes, nx_cu_device dev);
    nx_cu_result (*cuDevicePrimaryCtxRetain)(nx_cu_context *pctx, nx_cu_device dev);
    nx_cu_result (*cuDevicePrimaryCtxRelease_v2)(nx_cu_device dev);
    nx_cu_result (*cuCtxSetCurrent)(nx_cu_context c);
    nx_cu_result (*cuMemGetInfo_v2)(size_t *free_bytes, size_t *total_bytes);
    nx_cu_result (*cuMemAlloc_v2)(nx_cu_ptr *p, size_t bytes);
    nx_cu_result (*cuMemFree_v2)(nx_cu_ptr p);
    nx_cu_result (*cuMemcpyHtoDAsync_v2)(nx_cu_ptr dst, const void *src, size_t n, nx_cu_stream s);
    nx_cu_result (*cuMemcpyDtoHAsync_v2)(void *dst, nx_cu_ptr src, size_t n, nx_cu_stream s);
    nx_cu_result (*cuMemcpyDtoDAsync_v2)(nx_cu_ptr dst, nx_cu_ptr src, size_t n, nx_cu_stream s);
    nx_cu_result (*cuModuleLoadDataEx)(nx_cu_module *m, const void *image, unsigned n_opts,
                                       int *opts, void **values);
    nx_cu_result (*cuModuleGetFunction)(nx_cu_function *f, nx_cu_module m, const char *name);
    nx_cu_result (*cuModuleUnload)(nx_cu_module m);
    nx_cu_result (*cuFuncSetAttribute)(nx_cu_function f, int attr, int value);
    nx_cu_result (*cuLaunchKernel)(nx_cu_function f, unsigned gx, unsigned gy, unsigned gz,
                                   unsigned bx, unsigned by, unsigned bz, unsigned smem,
                                   nx_cu_stream s, void **params, void **extra);
    nx_cu_result (*cuStreamCreate)(nx_cu_stream *s, unsigned flags);
    nx_cu_result (*cuStreamSynchronize)(nx_cu_stream s);
    nx_cu_result (*cuStreamDestroy_v2)(nx_cu_stream s);
    /* Optional (NULL when the driver lacks them): page-locked host memory for small reads. */
    nx_cu_result (*cuMemAllocHost_v2)(void **p, size_t bytes);
    nx_cu_result (*cuMemFreeHost)(void *p);
} nx_rt_cuda_api;

/* A driver: the library, its entry points and what it reported about the machine. */
#define NX_RT_STATUS_LEN 160
typedef struct nx_rt_cuda_driver {
    void *lib;
    nx_rt_cuda_api api;
    bool ok;     /* cuInit succeeded: the entry points may be called */
    int version; /* cuDriverGetVersion: 13000 for CUDA 13.0 */
    int gpu_count;
    nx_gpu_info gpus[NX_MAX_GPUS];
    bool usable[NX_MAX_GPUS];      /* compute capability >= 8.0 */
    int ordinal[NX_MAX_GPUS];      /* the driver's ordinal of each listed GPU */
    int first_usable;              /* index in gpus of the device the backend uses; -1: none */
    char status[NX_RT_STATUS_LEN]; /* "ok", or why the backend cannot run */
} nx_rt_cuda_driver;

/* Opens the driver at path (NULL: "libcuda.so.1"), resolves the table, calls cuInit and lists the
 * devices. Never fails: problems land in d->status and leave d->ok or first_usable unset. */
NX_HIDDEN void nx_rt_cuda_driver_open(const char *path, nx_rt_cuda_driver *d);
NX_HIDDEN void nx_rt_cuda_driver_close(nx_rt_cuda_driver *d);
/* The process-wide driver, opened once on first use (thread-safe) from $NITRIX_CUDA_DRIVER_PATH
 * if set (a specific driver library, or the tests' fake), else libcuda.so.1; never NULL. */
NX_HIDDEN const nx_rt_cuda_driver *nx_rt_cuda_driver_get(void);
/* "CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected" into buf; returns buf. Uses
 * the driver's own names when it has them and a built-in table otherwise. */
NX_HIDDEN const char *nx_rt_cuda_strerror(const nx_rt_cuda_driver *d, nx_cu_result r, char *buf,
                                          size_t len);

/* ---- NVRTC ---------------------------------------------------------------------------------*/

typedef int nx_nvrtc_result;
typedef struct nx_nvrtc_prog_st *nx_nvrtc_program;
enum { NX_NVRTC_SUCCESS = 0, NX_NVRTC_ERROR_COMPILATION = 6 };

typedef struct nx_rt_nvrtc_api {
    const char *(*nvrtcGetErrorString)(nx_nvrtc_result r);
    nx_nvrtc_result (*nvrtcVersion)(int *major, int *minor);
    nx_nvrtc_result (*nvrtcGetNumSupportedArchs)(int *n);
    nx_nvrtc_result (*nvrtcGetSupportedArchs)(int *archs);
    nx_nvrtc_result (*nvrtcCreateProgram)(nx_nvrtc_program *p, const char *src, const char *name,
                                          int n_headers, const char *const *headers,
                                          const char *const *include_names);
    nx_nvrtc_result (*nvrtcDestroyProgram)(nx_nvrtc_program *p);
    nx_nvrtc_result (*nvrtcCompileProgram)(nx_nvrtc_program p, int n_opts, const char *const *opts);
    nx_nvrtc_result (*nvrtcGetProgramLogSize)(nx_nvrtc_program p, size_t *n);
    nx_nvrtc_result (*nvrtcGetProgramLog)(nx_nvrtc_program p, char *log);
    nx_nvrtc_result (*nvrtcGetPTXSize)(nx_nvrtc_program p, size_t *n);
    nx_nvrtc_result (*nvrtcGetPTX)(nx_nvrtc_program p, char *ptx);
    nx_nvrtc_result (*nvrtcGetCUBINSize)(nx_nvrtc_program p, size_t *n);
    nx_nvrtc_result (*nvrtcGetCUBIN)(nx_nvrtc_program p, char *cubin);
} nx_rt_nvrtc_api;

#define NX_RT_MAX_ARCHS 64
typedef struct nx_rt_nvrtc {
    void *lib;
    nx_rt_nvrtc_api api;
    bool ok;
    int major, minor;
    int n_archs;
    int archs[NX_RT_MAX_ARCHS]; /* ascending: 75, 80, 86, ... */
    char path[256];             /* the name or path that was opened */
    char status[NX_RT_STATUS_LEN];
} nx_rt_nvrtc;

/* Opens NVRTC from path, or (NULL) from $NITRIX_NVRTC_PATH if set, else libnvrtc.so.13, .so.12,
 * libnvrtc.so. Never fails: problems land in n->status with n->ok false. */
NX_HIDDEN void nx_rt_nvrtc_open(const char *path, nx_rt_nvrtc *n);
NX_HIDDEN void nx_rt_nvrtc_close(nx_rt_nvrtc *n);
/* The process-wide NVRTC, opened once on first use (thread-safe); never NULL. */
NX_HIDDEN const nx_rt_nvrtc *nx_rt_nvrtc_get(void);

/* ---- per-context device state ----------------------------------------------------------------*/

typedef struct nx_rt_cuda nx_rt_cuda;

/* The context's CUDA state (created on first use in the NX_SLOT_CUDA slot, released by
 * nx_ctx_free), with its primary context made current on the calling thread. NX_ERR_BACKEND with
 * the reason when no usable GPU answers. */
NX_HIDDEN nx_status nx_rt_cuda_get(nx_ctx *ctx, nx_rt_cuda **out);
/* NX_OK when the CUDA backend can run on this machine, else NX_ERR_BACKEND with the reason. */
NX_HIDDEN nx_status nx_rt_cuda_available(nx_ctx *ctx);
/* The device the context runs on (borrowed). */
NX_HIDDEN const nx_gpu_info *nx_rt_cuda_device(const nx_rt_cuda *cu);
NX_HIDDEN nx_cu_stream nx_rt_cuda_stream(const nx_rt_cuda *cu);

/* Device memory from the context's caching allocator: freed blocks are kept in size-bucketed free
 * lists and handed out again; all of it is returned to the driver by nx_ctx_free. Sizes are
 * rounded up (at least 512 bytes). Device out-of-memory (after flushing the cache) is
 * NX_ERR_NOMEM. A block is freed with nx_rt_cuda_free on the same context; freeing never fails
 * and never allocates. */
typedef struct nx_rt_cuda_block nx_rt_cuda_block;
NX_HIDDEN nx_status nx_rt_cuda_malloc(nx_ctx *ctx, size_t bytes, nx_rt_cuda_block **out);
NX_HIDDEN void nx_rt_cuda_free(nx_ctx *ctx, nx_rt_cuda_block *b);
NX_HIDDEN nx_cu_ptr nx_rt_cuda_block_ptr(const nx_rt_cuda_block *b);
NX_HIDDEN size_t nx_rt_cuda_block_size(const nx_rt_cuda_block *b); /* rounded */
/* Returns every cached block to the driver. */
NX_HIDDEN void nx_rt_cuda_trim(nx_ctx *ctx);

typedef struct nx_rt_cuda_stats {
    int64_t driver_allocs; /* cuMemAlloc calls that succeeded */
    int64_t driver_frees;
    int64_t cache_hits; /* requests served from the free lists */
    int64_t live_blocks;
    int64_t cached_blocks;
    size_t cached_bytes;
} nx_rt_cuda_stats;
/* Zeros when the context has no CUDA state. */
NX_HIDDEN void nx_rt_cuda_stats_get(nx_ctx *ctx, nx_rt_cuda_stats *out);

/* Copies on the context's stream; each returns when the copy is complete. */
NX_HIDDEN nx_status nx_rt_cuda_upload(nx_ctx *ctx, nx_cu_ptr dst, const void *src, size_t bytes);
NX_HIDDEN nx_status nx_rt_cuda_download(nx_ctx *ctx, void *dst, nx_cu_ptr src, size_t bytes);
/* Enqueues a device-to-device copy on the context's stream (returns without waiting). */
NX_HIDDEN nx_status nx_rt_cuda_copy(nx_ctx *ctx, nx_cu_ptr dst, nx_cu_ptr src, size_t bytes);
/* Waits for the context's stream; reports errors of earlier launches. */
NX_HIDDEN nx_status nx_rt_cuda_sync(nx_ctx *ctx);

/* A device tensor of the given geometry, C-contiguous, uninitialised. */
NX_HIDDEN nx_status nx_rt_cuda_tensor_new(nx_ctx *ctx, nx_dtype dtype, int ndim,
                                          const int64_t *shape, nx_tensor **out);

/* ---- modules and launches --------------------------------------------------------------------*/

/* Loads a PTX text (NUL-terminated) or a cubin into the context's device; on failure the
 * driver's JIT log is part of the message. Unload with nx_rt_cuda_module_unload. */
NX_HIDDEN nx_status nx_rt_cuda_module_load(nx_ctx *ctx, const void *image, nx_cu_module *out);
NX_HIDDEN void nx_rt_cuda_module_unload(nx_ctx *ctx, nx_cu_module m);
NX_HIDDEN nx_status nx_rt_cuda_module_function(nx_ctx *ctx, nx_cu_module m, const char *name,
                                               nx_cu_function *out);

typedef struct nx_rt_cuda_dims {
    unsigned grid[3];
    unsigned block[3];
    unsigned smem_bytes; /* dynamic shared memory; above 48 KiB it is opted into per function */
} nx_rt_cuda_dims;

/* Enqueues f on the context's stream with params (an array of pointers to each argument) and
 * returns without waiting; nx_rt_cuda_sync or a download waits. */
NX_HIDDEN nx_status nx_rt_cuda_launch(nx_ctx *ctx, nx_cu_function f, const nx_rt_cuda_dims *dims,
                                      void **params);

#endif /* NX_RUNTIME_CUDA_H */
