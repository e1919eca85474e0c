/* The CUDA runtime layer (see cuda.h): dlopen of the driver and NVRTC, device detection, the
 * per-context device state with its caching allocator, copies, device tensors and launches.
 *
 * Both libraries are process-wide and opened once (pthread_once); what they report is kept in
 * static storage, so probing allocates nothing and never fails. Everything per context (primary
 * context, stream, free lists) lives in the NX_SLOT_CUDA slot and goes at nx_ctx_free. */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"

/* ---- symbol tables ---------------------------------------------------------------------------*/

typedef struct sym {
    const char *name;
    size_t offset;
} sym;

#define CU_SYM(f)                                                                                  \
    {                                                                                              \
#f, offsetof(nx_rt_cuda_api, f)                                                            \
    }
static const sym cuda_syms[] = {
    CU_SYM(cuInit),
    CU_SYM(cuDriverGetVersion),
    CU_SYM(cuGetErrorName),
    CU_SYM(cuGetErrorString),
    CU_SYM(cuDeviceGetCount),
    CU_SYM(cuDeviceGet),
    CU_SYM(cuDeviceGetName),
    CU_SYM(cuDeviceGetAttribute),
    CU_SYM(cuDeviceTotalMem_v2),
    CU_SYM(cuDevicePrimaryCtxRetain),
    CU_SYM(cuDevicePrimaryCtxRelease_v2),
    CU_SYM(cuCtxSetCurrent),
    CU_SYM(cuMemGetInfo_v2),
    CU_SYM(cuMemAlloc_v2),
    CU_SYM(cuMemFree_v2),
    CU_SYM(cuMemcpyHtoDAsync_v2),
    CU_SYM(cuMemcpyDtoHAsync_v2),
    CU_SYM(cuMemcpyDtoDAsync_v2),
    CU_SYM(cuModuleLoadDataEx),
    CU_SYM(cuModuleGetFunction),
    CU_SYM(cuModuleUnload),
    CU_SYM(cuFuncSetAttribute),
    CU_SYM(cuLaunchKernel),
    CU_SYM(cuStreamCreate),
    CU_SYM(cuStreamSynchronize),
    CU_SYM(cuStreamDestroy_v2),
};

/* Entry points the backend can do without: resolved when present, NULL otherwise. */
static const sym cuda_optional_syms[] = {
    CU_SYM(cuMemAllocHost_v2),
    CU_SYM(cuMemFreeHost),
};

#define NVRTC_SYM(f)                                                                               \
    {                                                                                              \
#f, offsetof(nx_rt_nvrtc_api, f)                                                           \
    }
static const sym nvrtc_syms[] = {
    NVRTC_SYM(nvrtcGetErrorString),
    NVRTC_SYM(nvrtcVersion),
    NVRTC_SYM(nvrtcGetNumSupportedArchs),
    NVRTC_SYM(nvrtcGetSupportedArchs),
    NVRTC_SYM(nvrtcCreateProgram),
    NVRTC_SYM(nvrtcDestroyProgram),
    NVRTC_SYM(nvrtcCompileProgram),
    NVRTC_SYM(nvrtcGetProgramLogSize),
    NVRTC_SYM(nvrtcGetProgramLog),
    NVRTC_SYM(nvrtcGetPTXSize),
    NVRTC_SYM(nvrtcGetPTX),
    NVRTC_SYM(nvrtcGetCUBINSize),
    NVRTC_SYM(nvrtcGetCUBIN),
};

/* Fills the function-pointer table at `table`; returns the first missing name, or NULL. The
 * pointer is copied as bytes because ISO C has no conversion from void * to a function pointer
 * (POSIX guarantees the representation is the same). */
static const char *resolve(void *lib, const sym *syms, size_t n, void *table)
{
    for (size_t i = 0; i < n; i++) {
        void *p = dlsym(lib, syms[i].name);
        if (!p)
            return syms[i].name;
        memcpy((char *)table + syms[i].offset, &p, sizeof p);
    }
    return NULL;
}

static const char *dl_reason(void)
{
    const char *e = dlerror();
    return e ? e : "unknown dlopen error";
}

/* ---- driver errors ---------------------------------------------------------------------------*/

typedef struct cu_err {
    int code;
    const char *name;
    const char *text;
} cu_err;

/* For drivers that cannot name their own errors (the toolkit's stub answers 34 to everything). */
static const cu_err cu_errs[] = {
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {34, "CUDA_ERROR_STUB_LIBRARY",
     "the stub libcuda.so.1 of a CUDA toolkit was loaded instead of a real driver"},
    {35, "CUDA_ERROR_INSUFFICIENT_DRIVER", "the driver is older than the CUDA runtime"},
    {46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "the device is busy or unavailable"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for this device"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", "the PTX JIT compiler library was not found"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
     "the PTX was compiled by a toolchain newer than the driver"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {702, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "the kernel driver and libcuda differ in version"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const char *nx_rt_cuda_strerror(const nx_rt_cuda_driver *d, nx_cu_result r, char *buf, size_t len)
{
    const char *name = NULL, *text = NULL;
    if (d && d->api.cuGetErrorName && d->api.cuGetErrorName(r, &name) != NX_CU_SUCCESS)
        name = NULL;
    if (d && d->api.cuGetErrorString && d->api.cuGetErrorString(r, &text) != NX_CU_SUCCESS)
        text = NULL;
    for (size_t i = 0; i < sizeof cu_errs / sizeof cu_errs[0]; i++) {
        if (cu_errs[i].code == r) {
            name = name ? name : cu_errs[i].name;
            text = text ? text : cu_errs[i].text;
        }
    }
    snprintf(buf, len, "%s (%d): %s", name ? name : "CUDA_ERROR", (int)r,
             text ? text : "no description");
    return buf;
}

/* ---- driver ----------------------------------------------------------------------------------*/

static bool query_device(nx_rt_cuda_driver *d, int ordinal, nx_gpu_info *g)
{
    const nx_rt_cuda_api *a = &d->api;
    nx_cu_device dev;
    size_t mem = 0;
    memset(g, 0, sizeof *g);
    if (a->cuDeviceGet(&dev, ordinal) != NX_CU_SUCCESS ||
        a->cuDeviceGetName(g->name, (int)sizeof g->name - 1, dev) != NX_CU_SUCCESS ||
        a->cuDeviceGetAttribute(&g->cc_major, NX_CU_ATTR_CC_MAJOR, dev) != NX_CU_SUCCESS ||
        a->cuDeviceGetAttribute(&g->cc_minor, NX_CU_ATTR_CC_MINOR, dev) != NX_CU_SUCCESS ||
        a->cuDeviceGetAttribute(&g->sm_count, NX_CU_ATTR_SM_COUNT, dev) != NX_CU_SUCCESS ||
        a->cuDeviceTotalMem_v2(&mem, dev) != NX_CU_SUCCESS)
        return false;
    g->memory_bytes = (int64_t)mem;
    return true;
}

/* Lists the devices and picks the first of compute capability >= 8.0 (Ampere and newer). */
static void list_devices(nx_rt_cuda_driver *d, int count)
{
    int unusable = -1;
    for (int i = 0; i < count && d->gpu_count < NX_MAX_GPUS; i++) {
        nx_gpu_info *g = &d->gpus[d->gpu_count];
        if (!query_device(d, i, g))
            continue;
        bool ok = g->cc_major >= 8;
        d->usable[d->gpu_count] = ok;
        g->usable = ok;
        d->ordinal[d->gpu_count] = i;
        if (ok && d->first_usable < 0)
            d->first_usable = d->gpu_count;
        if (!ok && unusable < 0)
            unusable = d->gpu_count;
        d->gpu_count++;
    }
    if (d->first_usable >= 0 && unusable < 0) {
        snprintf(d->status, sizeof d->status, "ok");
    } else if (d->first_usable >= 0) {
        const nx_gpu_info *g = &d->gpus[unusable];
        snprintf(d->status, sizeof d->status,
                 "ok (GPU %d '%.60s' is compute capability %d.%d, below 8.0: not used)", unusable,
                 g->name, g->cc_major, g->cc_minor);
    } else if (unusable >= 0) {
        const nx_gpu_info *g = &d->gpus[unusable];
        snprintf(d->status, sizeof d->status,
                 "no GPU of compute capability >= 8.0: GPU %d '%.60s' is %d.%d (Ampere and "
                 "newer are supported)",
                 unusable, g->name, g->cc_major, g->cc_minor);
    } else {
        snprintf(d->status, sizeof d->status,
                 "no CUDA device: the driver lists %d but none could be queried", count);
    }
}

void nx_rt_cuda_driver_open(const char *path, nx_rt_cuda_driver *d)
{
    memset(d, 0, sizeof *d);
    d->first_usable = -1;
    const char *name = path ? path : "libcuda.so.1";
    dlerror();
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(d->status, sizeof d->status, "no CUDA driver: %s", dl_reason());
        return;
    }
    const char *missing = resolve(lib, cuda_syms, sizeof cuda_syms / sizeof cuda_syms[0], &d->api);
    if (missing) {
        snprintf(d->status, sizeof d->status,
                 "CUDA driver %.60s lacks %s (a driver for CUDA 12 or newer is needed)", name,
                 missing);
        memset(&d->api, 0, sizeof d->api);
        dlclose(lib);
        return;
    }
    d->lib = lib;
    for (size_t i = 0; i < sizeof cuda_optional_syms / sizeof cuda_optional_syms[0]; i++)
        (void)resolve(lib, &cuda_optional_syms[i], 1, &d->api);
    char err[160];
    /* The version is readable before cuInit, so `nitrix info` can show it even without a GPU. */
    if (d->api.cuDriverGetVersion(&d->version) != NX_CU_SUCCESS)
        d->version = 0;
    nx_cu_result r = d->api.cuInit(0);
    if (r != NX_CU_SUCCESS) {
        snprintf(d->status, sizeof d->status, "cuInit failed: %s",
                 nx_rt_cuda_strerror(d, r, err, sizeof err));
        return;
    }
    int count = 0;
    r = d->api.cuDeviceGetCount(&count);
    if (r != NX_CU_SUCCESS || count <= 0) {
        snprintf(d->status, sizeof d->status, "no CUDA device: %s",
                 r != NX_CU_SUCCESS ? nx_rt_cuda_strerror(d, r, err, sizeof err)
                                    : "the driver lists no GPU");
        return;
    }
    d->ok = true;
    list_devices(d, count);
}

void nx_rt_cuda_driver_close(nx_rt_cuda_driver *d)
{
    if (d->lib)
        dlclose(d->lib);
    memset(d, 0, sizeof *d);
    d->first_usable = -1;
}

static pthread_once_t driver_once = PTHREAD_ONCE_INIT;
static nx_rt_cuda_driver driver;

static void driver_init(void)
{
    const char *env = getenv("NITRIX_CUDA_DRIVER_PATH");
    nx_rt_cuda_driver_open(env && *env ? env : NULL, &driver);
}

const nx_rt_cuda_driver *nx_rt_cuda_driver_get(void)
{
    pthread_once(&driver_once, driver_init);
    return &driver;
}

/* ---- NVRTC -----------------------------------------------------------------------------------*/

static bool nvrtc_try(nx_rt_nvrtc *n, const char *name)
{
    dlerror();
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(n->status, sizeof n->status, "NVRTC not found: %s", dl_reason());
        return false;
    }
    snprintf(n->path, sizeof n->path, "%s", name);
    const char *missing =
        resolve(lib, nvrtc_syms, sizeof nvrtc_syms / sizeof nvrtc_syms[0], &n->api);
    if (missing) {
        snprintf(n->status, sizeof n->status, "NVRTC %.80s lacks %s (NVRTC 12 or newer needed)",
                 name, missing);
        memset(&n->api, 0, sizeof n->api);
        dlclose(lib);
        return false;
    }
    n->lib = lib;
    int count = 0;
    if (n->api.nvrtcVersion(&n->major, &n->minor) != NX_NVRTC_SUCCESS ||
        n->api.nvrtcGetNumSupportedArchs(&count) != NX_NVRTC_SUCCESS || count <= 0 ||
        count > NX_RT_MAX_ARCHS || n->api.nvrtcGetSupportedArchs(n->archs) != NX_NVRTC_SUCCESS) {
        snprintf(n->status, sizeof n->status, "NVRTC %.80s does not report its version or archs",
                 name);
        return false;
    }
    n->n_archs = count;
    n->ok = true;
    snprintf(n->status, sizeof n->status, "ok");
    return true;
}

void nx_rt_nvrtc_open(const char *path, nx_rt_nvrtc *n)
{
    memset(n, 0, sizeof *n);
    bool from_env = false;
    if (!path) {
        const char *env = getenv("NITRIX_NVRTC_PATH");
        path = env && *env ? env : NULL;
        from_env = path != NULL;
    }
    if (path) {
        if (!nvrtc_try(n, path) && from_env) {
            char why[NX_RT_STATUS_LEN];
            snprintf(why, sizeof why, "%s", n->status);
            snprintf(n->status, sizeof n->status, "%.120s (set by NITRIX_NVRTC_PATH)", why);
        }
        return;
    }
    static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (nvrtc_try(n, names[i]))
            return;
        if (n->lib)
            break; /* it opened but is unusable: the status says why */
    }
    if (!n->lib)
        snprintf(n->status, sizeof n->status,
                 "NVRTC not found: none of libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so opens "
                 "(set NITRIX_NVRTC_PATH)");
}

void nx_rt_nvrtc_close(nx_rt_nvrtc *n)
{
    if (n->lib)
        dlclose(n->lib);
    memset(n, 0, sizeof *n);
}

static pthread_once_t nvrtc_once = PTHREAD_ONCE_INIT;
static nx_rt_nvrtc nvrtc;

static void nvrtc_init(void)
{
    nx_rt_nvrtc_open(NULL, &nvrtc);
}

const nx_rt_nvrtc *nx_rt_nvrtc_get(void)
{
    pthread_once(&nvrtc_once, nvrtc_init);
    return &nvrtc;
}

/* ---- probe -----------------------------------------------------------------------------------*/

void nx_rt_cuda_probe(nx_ctx *ctx, nx_system_info *info)
{
    (void)ctx;
    const nx_rt_cuda_driver *d = nx_rt_cuda_driver_get();
    info->cuda_driver_found = d->ok;
    info->cuda_driver_version = d->version;
    snprintf(info->cuda_status, sizeof info->cuda_status, "%.159s", d->status);
    info->gpu_count = d->gpu_count;
    memcpy(info->gpus, d->gpus, sizeof info->gpus);
    const nx_rt_nvrtc *n = nx_rt_nvrtc_get();
    info->nvrtc_found = n->ok;
    info->nvrtc_major = n->ok ? n->major : 0;
    info->nvrtc_minor = n->ok ? n->minor : 0;
}

/* ---- per-context state -----------------------------------------------------------------------*/

/* Block sizes: powers of two from 512 B to 1 MiB (one free list each), then multiples of 2 MiB
 * in one list searched for an exact size. Rounding keeps reuse likely without first-fit
 * fragmentation. */
#define MIN_BLOCK 512
#define SMALL_CLASSES 12 /* 512 B << 11 = 1 MiB */
#define LARGE_QUANTUM ((size_t)2 << 20)

typedef struct block {
    nx_cu_ptr ptr;
    size_t size; /* rounded */
    struct block *next;
} block;

struct nx_rt_cuda {
    const nx_rt_cuda_driver *drv;
    int ordinal;
    nx_gpu_info info;
    nx_cu_device dev;
    nx_cu_context cuctx;
    nx_cu_stream stream;
    pthread_mutex_t lock; /* free lists and stats */
    block *small[SMALL_CLASSES];
    block *large;
    pthread_mutex_t staging_lock; /* held from a small read's copy to its memcpy */
    void *staging;     /* page-locked, STAGING_BYTES: small reads go through it */
    bool staging_none; /* the driver could not give one: small reads copy straight */
    size_t cache_limit;
    nx_rt_cuda_stats stats;
    bool warned; /* a failure on a path that cannot return one was logged */
};

static nx_status cu_fail(nx_ctx *ctx, const nx_rt_cuda_driver *d, nx_cu_result r, const char *fn,
                         const char *what)
{
    char err[160];
    nx_rt_cuda_strerror(d, r, err, sizeof err);
    if (r == NX_CU_ERROR_OUT_OF_MEMORY)
        return nx_rt_error(ctx, NX_ERR_NOMEM, "CUDA: %s failed %s: %s", fn, what, err);
    return nx_rt_error(ctx, NX_ERR_BACKEND, "CUDA: %s failed %s: %s", fn, what, err);
}

/* Frees and unloads cannot return a status; their failures (after a sticky launch error, say) go
 * to the log, once per context so that a broken device does not flood it. */
static void warn_failure(nx_ctx *ctx, nx_rt_cuda *cu, nx_cu_result r, const char *fn)
{
    if (r == NX_CU_SUCCESS || __atomic_exchange_n(&cu->warned, true, __ATOMIC_RELAXED))
        return;
    char err[160];
    nx_ctx_log(ctx, NX_LOG_WARN, "CUDA: %s failed while releasing resources: %s", fn,
               nx_rt_cuda_strerror(cu->drv, r, err, sizeof err));
}

nx_status nx_rt_cuda_available(nx_ctx *ctx)
{
    const nx_rt_cuda_driver *d = nx_rt_cuda_driver_get();
    if (d->ok && d->first_usable >= 0)
        return NX_OK;
    return nx_rt_error(ctx, NX_ERR_BACKEND, "CUDA backend unavailable: %s", d->status);
}

static void flush_list(nx_ctx *ctx, nx_rt_cuda *cu, block **list)
{
    while (*list) {
        block *b = *list;
        *list = b->next;
        warn_failure(ctx, cu, cu->drv->api.cuMemFree_v2(b->ptr), "cuMemFree_v2");
        cu->stats.driver_frees++;
        cu->stats.cached_blocks--;
        cu->stats.cached_bytes -= b->size;
        nx_rt_free(ctx, b, sizeof *b);
    }
}

/* Caller holds cu->lock and has made the context current. */
static void flush_cache(nx_ctx *ctx, nx_rt_cuda *cu)
{
    for (int i = 0; i < SMALL_CLASSES; i++)
        flush_list(ctx, cu, &cu->small[i]);
    flush_list(ctx, cu, &cu->large);
}

static void cuda_destroy(nx_ctx *ctx, void *obj)
{
    nx_rt_cuda *cu = obj;
    const nx_rt_cuda_api *a = &cu->drv->api;
    a->cuCtxSetCurrent(cu->cuctx);
    pthread_mutex_lock(&cu->lock);
    flush_cache(ctx, cu);
    if (cu->stats.live_blocks > 0)
        nx_ctx_log(ctx, NX_LOG_WARN,
                   "CUDA: %lld device blocks are still in use at nx_ctx_free (device tensors not "
                   "freed); they stay allocated until the device's primary context is released",
                   (long long)cu->stats.live_blocks);
    pthread_mutex_unlock(&cu->lock);
    if (cu->stream) {
        warn_failure(ctx, cu, a->cuStreamSynchronize(cu->stream), "cuStreamSynchronize");
        if (cu->staging)
            warn_failure(ctx, cu, a->cuMemFreeHost(cu->staging), "cuMemFreeHost");
        warn_failure(ctx, cu, a->cuStreamDestroy_v2(cu->stream), "cuStreamDestroy_v2");
    }
    a->cuCtxSetCurrent(NULL);
    if (cu->cuctx)
        warn_failure(ctx, cu, a->cuDevicePrimaryCtxRelease_v2(cu->dev),
                     "cuDevicePrimaryCtxRelease_v2");
    pthread_mutex_destroy(&cu->staging_lock);
    pthread_mutex_destroy(&cu->lock);
    nx_rt_free(ctx, cu, sizeof *cu);
}

static nx_status cuda_init_device(nx_ctx *ctx, nx_rt_cuda *cu)
{
    const nx_rt_cuda_api *a = &cu->drv->api;
    nx_cu_result r = a->cuDeviceGet(&cu->dev, cu->ordinal);
    if (r != NX_CU_SUCCESS)
        return cu_fail(ctx, cu->drv, r, "cuDeviceGet", "for the first usable GPU");
    r = a->cuDevicePrimaryCtxRetain(&cu->cuctx, cu->dev);
    if (r != NX_CU_SUCCESS) {
        cu->cuctx = NULL;
        return cu_fail(ctx, cu->drv, r, "cuDevicePrimaryCtxRetain", "on the first usable GPU");
    }
    r = a->cuCtxSetCurrent(cu->cuctx);
    if (r != NX_CU_SUCCESS)
        return cu_fail(ctx, cu->drv, r, "cuCtxSetCurrent", "for the primary context");
    /* Non-blocking: nitrix's work must not serialise with other libraries' legacy stream. */
    r = a->cuStreamCreate(&cu->stream, NX_CU_STREAM_NON_BLOCKING);
    if (r != NX_CU_SUCCESS) {
        cu->stream = NULL;
        return cu_fail(ctx, cu->drv, r, "cuStreamCreate", "for the context's stream");
    }
    return NX_OK;
}

static nx_status cuda_create(nx_ctx *ctx, nx_rt_cuda **out)
{
    nx_status st = nx_rt_cuda_available(ctx);
    if (st != NX_OK)
        return st;
    const nx_rt_cuda_driver *d = nx_rt_cuda_driver_get();
    nx_rt_cuda *cu = nx_rt_alloc(ctx, sizeof *cu);
    if (!cu)
        return nx_rt_nomem(ctx, "CUDA context state", sizeof *cu);
    memset(cu, 0, sizeof *cu);
    cu->drv = d;
    cu->ordinal = d->ordinal[d->first_usable];
    cu->info = d->gpus[d->first_usable];
    /* A quarter of the device may sit in the free lists; beyond that, frees go to the driver. */
    cu->cache_limit = (size_t)(cu->info.memory_bytes / 4);
    if (pthread_mutex_init(&cu->lock, NULL) != 0) {
        nx_rt_free(ctx, cu, sizeof *cu);
        return nx_rt_error(ctx, NX_ERR_BACKEND, "CUDA: cannot create a mutex");
    }
    if (pthread_mutex_init(&cu->staging_lock, NULL) != 0) {
        pthread_mutex_destroy(&cu->lock);
        nx_rt_free(ctx, cu, sizeof *cu);
        return nx_rt_error(ctx, NX_ERR_BACKEND, "CUDA: cannot create a mutex");
    }
    st = cuda_init_device(ctx, cu);
    if (st != NX_OK) {
        cuda_destroy(ctx, cu);
        return st;
    }
    *out = cu;
    return NX_OK;
}

nx_status nx_rt_cuda_get(nx_ctx *ctx, nx_rt_cuda **out)
{
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "CUDA: ctx is NULL");
    nx_rt_cuda *cu = nx_rt_ctx_get(ctx, NX_SLOT_CUDA);
    if (!cu) {
        nx_rt_cuda *mine = NULL;
        nx_status st = cuda_create(ctx, &mine);
        if (st != NX_OK)
            return st;
        cu = nx_rt_ctx_install(ctx, NX_SLOT_CUDA, mine, cuda_destroy);
        if (cu != mine)
            cuda_destroy(ctx, mine);
    }
    nx_cu_result r = cu->drv->api.cuCtxSetCurrent(cu->cuctx);
    if (r != NX_CU_SUCCESS)
        return cu_fail(ctx, cu->drv, r, "cuCtxSetCurrent", "for the primary context");
    *out = cu;
    return NX_OK;
}

const nx_gpu_info *nx_rt_cuda_device(const nx_rt_cuda *cu)
{
    return &cu->info;
}

nx_cu_stream nx_rt_cuda_stream(const nx_rt_cuda *cu)
{
    return cu->stream;
}

/* ---- caching allocator -----------------------------------------------------------------------*/

struct nx_rt_cuda_block {
    block b;
};

static size_t round_size(size_t bytes, int *cls)
{
    size_t s = MIN_BLOCK;
    for (int c = 0; c < SMALL_CLASSES; c++, s <<= 1) {
        if (bytes <= s) {
            *cls = c;
            return s;
        }
    }
    *cls = -1;
    if (bytes > SIZE_MAX - LARGE_QUANTUM)
        return 0;
    return (bytes + LARGE_QUANTUM - 1) / LARGE_QUANTUM * LARGE_QUANTUM;
}

/* Caller holds cu->lock. */
static block *take_cached(nx_rt_cuda *cu, size_t size, int cls)
{
    block **link = cls >= 0 ? &cu->small[cls] : &cu->large;
    while (*link && (*link)->size != size)
        link = &(*link)->next;
    block *b = *link;
    if (b) {
        *link = b->next;
        b->next = NULL;
        cu->stats.cached_blocks--;
        cu->stats.cached_bytes -= b->size;
    }
    return b;
}

static nx_status driver_alloc(nx_ctx *ctx, nx_rt_cuda *cu, size_t size, nx_cu_ptr *p)
{
    const nx_rt_cuda_api *a = &cu->drv->api;
    nx_cu_result r = a->cuMemAlloc_v2(p, size);
    if (r == NX_CU_ERROR_OUT_OF_MEMORY && cu->stats.cached_blocks > 0) {
        flush_cache(ctx, cu); /* cached blocks of other sizes may be what stands in the way */
        r = a->cuMemAlloc_v2(p, size);
    }
    if (r != NX_CU_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "allocating %zu bytes of device memory", size);
        return cu_fail(ctx, cu->drv, r, "cuMemAlloc_v2", what);
    }
    cu->stats.driver_allocs++;
    return NX_OK;
}

nx_status nx_rt_cuda_malloc(nx_ctx *ctx, size_t bytes, nx_rt_cuda_block **out)
{
    *out = NULL;
    nx_rt_cuda *cu;
    nx_status st = nx_rt_cuda_get(ctx, &cu);
    if (st != NX_OK)
        return st;
    int cls;
    size_t size = round_size(bytes, &cls);
    if (size == 0)
        return nx_rt_error(ctx, NX_ERR_NOMEM, "CUDA: %zu bytes of device memory is too large",
                           bytes);
    pthread_mutex_lock(&cu->lock);
    block *b = take_cached(cu, size, cls);
    if (b) {
        cu->stats.cache_hits++;
    } else {
        /* The host record is taken first, so a failure leaves no device memory behind. */
        b = nx_rt_alloc(ctx, sizeof *b);
        if (!b) {
            pthread_mutex_unlock(&cu->lock);
            return nx_rt_nomem(ctx, "CUDA block record", sizeof *b);
        }
        memset(b, 0, sizeof *b);
        b->size = size;
        st = driver_alloc(ctx, cu, size, &b->ptr);
        if (st != NX_OK) {
            nx_rt_free(ctx, b, sizeof *b);
            pthread_mutex_unlock(&cu->lock);
            return st;
        }
    }
    cu->stats.live_blocks++;
    pthread_mutex_unlock(&cu->lock);
    *out = (nx_rt_cuda_block *)b;
    return NX_OK;
}

nx_cu_ptr nx_rt_cuda_block_ptr(const nx_rt_cuda_block *b)
{
    return b->b.ptr;
}

size_t nx_rt_cuda_block_size(const nx_rt_cuda_block *b)
{
    return b->b.size;
}

void nx_rt_cuda_free(nx_ctx *ctx, nx_rt_cuda_block *blk)
{
    if (!blk)
        return;
    block *b = &blk->b;
    nx_rt_cuda *cu = nx_rt_ctx_get(ctx, NX_SLOT_CUDA);
    if (!cu)
        return; /* cannot happen: the block came from this context's state */
    pthread_mutex_lock(&cu->lock);
    cu->stats.live_blocks--;
    if (cu->stats.cached_bytes + b->size > cu->cache_limit) {
        cu->drv->api.cuCtxSetCurrent(cu->cuctx);
        warn_failure(ctx, cu, cu->drv->api.cuMemFree_v2(b->ptr), "cuMemFree_v2");
        cu->stats.driver_frees++;
        nx_rt_free(ctx, b, sizeof *b);
    } else {
        int cls;
        round_size(b->size, &cls);
        block **list = cls >= 0 ? &cu->small[cls] : &cu->large;
        b->next = *list;
        *list = b;
        cu->stats.cached_blocks++;
        cu->stats.cached_bytes += b->size;
    }
    pthread_mutex_unlock(&cu->lock);
}

void nx_rt_cuda_trim(nx_ctx *ctx)
{
    nx_rt_cuda *cu = nx_rt_ctx_get(ctx, NX_SLOT_CUDA);
    if (!cu)
        return;
    pthread_mutex_lock(&cu->lock);
    cu->drv->api.cuCtxSetCurrent(cu->cuctx);
    flush_cache(ctx, cu);
    pthread_mutex_unlock(&cu->lock);
}

void nx_rt_cuda_stats_get(nx_ctx *ctx, nx_rt_cuda_stats *out)
{
    memset(out, 0, sizeof *out);
    nx_rt_cuda *cu = ctx ? nx_rt_ctx_get(ctx, NX_SLOT_CUDA) : NULL;
    if (!cu)
        return;
    pthread_mutex_lock(&cu->lock);
    *out = cu->stats;
    pthread_mutex_unlock(&cu->lock);
}

/* ---- copies ----------------------------------------------------------------------------------*/

static nx_status stream_sync(nx_ctx *ctx, nx_rt_cuda *cu, const char *what)
{
    nx_cu_result r = cu->drv->api.cuStreamSynchronize(cu->stream);
    return r == NX_CU_SUCCESS ? NX_OK : cu_fail(ctx, cu->drv, r, "cuStreamSynchronize", what);
}

nx_status nx_rt_cuda_upload(nx_ctx *ctx, nx_cu_ptr dst, const void *src, size_t bytes)
{
    nx_rt_cuda *cu;
    nx_status st = nx_rt_cuda_get(ctx, &cu);
    if (st != NX_OK || bytes == 0)
        return st;
    /* Async on the context's stream so the copy is ordered after earlier launches on it. */
    nx_cu_result r = cu->drv->api.cuMemcpyHtoDAsync_v2(dst, src, bytes, cu->stream);
    if (r != NX_CU_SUCCESS) {
        char what[64];
        snprintf(what, sizeof what, "copying %zu bytes to the device", bytes);
        return cu_fail(ctx, cu->drv, r, "cuMemcpyHtoDAsync_v2", what);
    }
    return stream_sync(ctx, cu, "after a copy to the device");
}

nx_status nx_rt_cuda_copy(nx_ctx *ctx, nx_cu_ptr dst, nx_cu_ptr src, size_t bytes)
{
    nx_rt_cuda *cu;
    nx_status st = nx_rt_cuda_get(ctx, &cu);
    if (st != NX_OK || bytes == 0)
        return st;
    nx_cu_result r = cu->drv->api.cuMemcpyDtoDAsync_v2(dst, src, bytes, cu->stream);
    if (r != NX_CU_SUCCESS) {
        char what[64];
        snprintf(what, sizeof what, "copying %zu bytes within the device", bytes);
        return cu_fail(ctx, cu->drv, r, "cuMemcpyDtoDAsync_v2", what);
    }
    return NX_OK;
}

/* A read from pageable memory makes the driver stage it through its own pinned buffer, a second
 * copy and a wait; reads of a few bytes (a flag, a count, a convergence test after each program
 * run) then cost several microseconds more than the copy itself. Reads up to STAGING_BYTES go
 * through one page-locked buffer of the context, allocated on the first such read. */
#define STAGING_BYTES 4096

static bool staging_ready(nx_rt_cuda *cu)
{
    if (cu->staging || cu->staging_none)
        return cu->staging != NULL;
    const nx_rt_cuda_api *a = &cu->drv->api;
    if (!a->cuMemAllocHost_v2 || !a->cuMemFreeHost ||
        a->cuMemAllocHost_v2(&cu->staging, STAGING_BYTES) != NX_CU_SUCCESS) {
        cu->staging = NULL;
        cu->staging_none = true; /* not an error: the plain copy below still works */
    }
    return cu->staging != NULL;
}

static nx_status download_failed(nx_ctx *ctx, nx_rt_cuda *cu, nx_cu_result r, size_t bytes)
{
    char what[64];
    snprintf(what, sizeof what, "copying %zu bytes from the device", bytes);
    return cu_fail(ctx, cu->drv, r, "cuMemcpyDtoHAsync_v2", what);
}

nx_status nx_rt_cuda_download(nx_ctx *ctx, void *dst, nx_cu_ptr src, size_t bytes)
{
    nx_rt_cuda *cu;
    nx_status st = nx_rt_cuda_get(ctx, &cu);
    if (st != NX_OK || bytes == 0)
        return st;
    if (bytes <= STAGING_BYTES) {
        pthread_mutex_lock(&cu->staging_lock);
        if (staging_ready(cu)) {
            nx_cu_result r = cu->drv->api.cuMemcpyDtoHAsync_v2(cu->staging, src, bytes, cu->stream);
            st = r != NX_CU_SUCCESS ? download_failed(ctx, cu, r, bytes)
                                    : stream_sync(ctx, cu, "after a copy from the device");
            if (st == NX_OK)
                memcpy(dst, cu->staging, bytes);
            pthread_mutex_unlock(&cu->staging_lock);
            return st;
        }
        pthread_mutex_unlock(&cu->staging_lock);
    }
    nx_cu_result r = cu->drv->api.cuMemcpyDtoHAsync_v2(dst, src, bytes, cu->stream);
    if (r != NX_CU_SUCCESS)
        return download_failed(ctx, cu, r, bytes);
    return stream_sync(ctx, cu, "after a copy from the device");
}

nx_status nx_rt_cuda_sync(nx_ctx *ctx)
{
    nx_rt_cuda *cu;
    nx_status st = nx_rt_cuda_get(ctx, &cu);
    if (st != NX_OK)
        return st;
    return stream_sync(ctx, cu, "waiting for the context's stream");
}

/* ---- modules and launches --------------------------------------------------------------------*/

nx_status nx_rt_cuda_module_load(nx_ctx *ctx, const void *image, nx_cu_module *out)
{
    *out = NULL;
    nx_rt_cuda *cu;
    nx_status st = nx_rt_cuda_get(ctx, &cu);
    if (st != NX_OK)
        return st;
    if (!image)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "CUDA: module image is NULL");
    char log[1024] = "";
    int opts[2] = {NX_CU_JIT_ERROR_LOG, NX_CU_JIT_ERROR_LOG_SIZE};
    void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
    nx_cu_result r = cu->drv->api.cuModuleLoadDataEx(out, image, 2, opts, vals);
    if (r == NX_CU_SUCCESS)
        return NX_OK;
    *out = NULL;
    char err[160];
    nx_rt_cuda_strerror(cu->drv, r, err, sizeof err);
    const nx_rt_nvrtc *n = nx_rt_nvrtc_get();
    return nx_rt_error(ctx, NX_ERR_BACKEND,
                       "CUDA: cuModuleLoadDataEx failed on %s (cc %d.%d, driver %d, NVRTC "
                       "%d.%d): %s; JIT log: %.200s",
                       cu->info.name, cu->info.cc_major, cu->info.cc_minor, cu->drv->version,
                       n->major, n->minor, err, log[0] ? log : "(empty)");
}

void nx_rt_cuda_module_unload(nx_ctx *ctx, nx_cu_module m)
{
    nx_rt_cuda *cu;
    if (!m || nx_rt_cuda_get(ctx, &cu) != NX_OK)
        return;
    warn_failure(ctx, cu, cu->drv->api.cuModuleUnload(m), "cuModuleUnload");
}

nx_status nx_rt_cuda_module_function(nx_ctx *ctx, nx_cu_module m, const char *name,
                                     nx_cu_function *out)
{
    *out = NULL;
    nx_rt_cuda *cu;
    nx_status st = nx_rt_cuda_get(ctx, &cu);
    if (st != NX_OK)
        return st;
    if (!m || !name)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "CUDA: module and name must be non-NULL");
    nx_cu_result r = cu->drv->api.cuModuleGetFunction(out, m, name);
    if (r != NX_CU_SUCCESS) {
        *out = NULL;
        char what[160];
        snprintf(what, sizeof what, "looking up kernel '%.100s' (declare it extern \"C\")", name);
        return cu_fail(ctx, cu->drv, r, "cuModuleGetFunction", what);
    }
    return NX_OK;
}

static bool dims_ok(const nx_rt_cuda_dims *d)
{
    for (int i = 0; i < 3; i++) {
        if (d->grid[i] == 0 || d->block[i] == 0)
            return false;
    }
    return true;
}

nx_status nx_rt_cuda_launch(nx_ctx *ctx, nx_cu_function f, const nx_rt_cuda_dims *dims,
                            void **params)
{
    nx_rt_cuda *cu;
    nx_status st = nx_rt_cuda_get(ctx, &cu);
    if (st != NX_OK)
        return st;
    if (!f || !dims || !dims_ok(dims))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "CUDA launch: function and dims must be set, every extent >= 1");
    const nx_rt_cuda_api *a = &cu->drv->api;
    nx_cu_result r;
    if (dims->smem_bytes > 48 * 1024) {
        r = a->cuFuncSetAttribute(f, NX_CU_FUNC_MAX_DYN_SMEM, (int)dims->smem_bytes);
        if (r != NX_CU_SUCCESS)
            return cu_fail(ctx, cu->drv, r, "cuFuncSetAttribute",
                           "opting into more than 48 KiB of shared memory");
    }
    r = a->cuLaunchKernel(f, dims->grid[0], dims->grid[1], dims->grid[2], dims->block[0],
                          dims->block[1], dims->block[2], dims->smem_bytes, cu->stream, params,
                          NULL);
    if (r != NX_CU_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "launching grid %ux%ux%u of blocks %ux%ux%u", dims->grid[0],
                 dims->grid[1], dims->grid[2], dims->block[0], dims->block[1], dims->block[2]);
        return cu_fail(ctx, cu->drv, r, "cuLaunchKernel", what);
    }
    return NX_OK;
}

/* ---- device tensors --------------------------------------------------------------------------*/

static void release_device(nx_storage *s)
{
    nx_rt_cuda_free(s->ctx, s->release_user);
}

static nx_status check_geometry(nx_ctx *ctx, nx_dtype dtype, int ndim, const int64_t *shape,
                                size_t *bytes)
{
    size_t esize = nx_dtype_size(dtype);
    if (esize == 0)
        return nx_rt_error(ctx, NX_ERR_DTYPE, "device tensor: dtype %d is not a dtype", (int)dtype);
    if (ndim < 0 || ndim > NX_MAX_DIMS || (ndim > 0 && !shape))
        return nx_rt_error(ctx, NX_ERR_SHAPE, "device tensor: ndim is %d; expected 0 to %d", ndim,
                           NX_MAX_DIMS);
    int64_t numel, b;
    if (!nx_shape_numel(ndim, shape, &numel) || !nx_mul_i64(numel, (int64_t)esize, &b)) {
        char buf[160];
        return nx_rt_error(ctx, NX_ERR_SHAPE, "device tensor: shape %s is negative or overflows",
                           nx_shape_str(buf, sizeof buf, ndim, shape));
    }
    *bytes = (size_t)b;
    return NX_OK;
}

nx_status nx_rt_cuda_tensor_new(nx_ctx *ctx, nx_dtype dtype, int ndim, const int64_t *shape,
                                nx_tensor **out)
{
    *out = NULL;
    size_t bytes = 0;
    nx_status st = check_geometry(ctx, dtype, ndim, shape, &bytes);
    if (st != NX_OK)
        return st;
    nx_storage *s = nx_rt_alloc(ctx, sizeof *s);
    nx_tensor *t = nx_rt_alloc(ctx, sizeof *t);
    if (!s || !t) {
        nx_rt_free(ctx, s, sizeof *s);
        nx_rt_free(ctx, t, sizeof *t);
        return nx_rt_nomem(ctx, "device tensor", sizeof *s + sizeof *t);
    }
    nx_rt_cuda_block *b = NULL;
    st = nx_rt_cuda_malloc(ctx, bytes, &b);
    if (st != NX_OK) {
        nx_rt_free(ctx, s, sizeof *s);
        nx_rt_free(ctx, t, sizeof *t);
        return st;
    }
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->data = (void *)(uintptr_t)nx_rt_cuda_block_ptr(b);
    s->bytes = bytes;
    s->refs = 1;
    s->owned = true;
    s->device = NX_DEVICE_CUDA;
    s->release = release_device;
    s->release_user = b;
    memset(t, 0, sizeof *t);
    t->storage = s;
    t->dtype = dtype;
    t->ndim = ndim;
    if (ndim)
        memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    nx_rt_contiguous_strides(ndim, t->shape, t->strides);
    *out = t;
    return NX_OK;
}

/* dst[i] = src[i] over a strided index space; strides in elements, esize bytes per element. */
static void copy_strided(char *dst, const int64_t *dst_strides, const char *src,
                         const int64_t *src_strides, int ndim, const int64_t *shape, size_t esize)
{
    if (ndim == 0) {
        memcpy(dst, src, esize);
        return;
    }
    int64_t idx[NX_MAX_DIMS] = {0};
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++)
        numel *= shape[i];
    int64_t so = 0, d_off = 0;
    for (int64_t n = 0; n < numel; n++) {
        memcpy(dst + d_off * (int64_t)esize, src + so * (int64_t)esize, esize);
        for (int ax = ndim - 1; ax >= 0; ax--) {
            if (++idx[ax] < shape[ax]) {
                so += src_strides[ax];
                d_off += dst_strides[ax];
                break;
            }
            so -= (shape[ax] - 1) * src_strides[ax];
            d_off -= (shape[ax] - 1) * dst_strides[ax];
            idx[ax] = 0;
        }
    }
}

/* Element range [lo, hi] of storage that t touches, relative to element (0, ..., 0). */
static void span(const nx_tensor *t, int64_t *lo, int64_t *hi)
{
    *lo = 0;
    *hi = 0;
    for (int i = 0; i < t->ndim; i++) {
        int64_t reach = (t->shape[i] - 1) * t->strides[i];
        if (reach < 0)
            *lo += reach;
        else
            *hi += reach;
    }
}

static nx_status host_to_cuda(const nx_tensor *t, nx_tensor **out)
{
    nx_ctx *ctx = t->storage->ctx;
    nx_tensor *d = NULL;
    nx_status st = nx_rt_cuda_tensor_new(ctx, t->dtype, t->ndim, t->shape, &d);
    if (st != NX_OK)
        return st;
    size_t bytes = d->storage->bytes;
    const void *src = nx_tensor_data(t);
    void *staging = NULL;
    if (bytes > 0 && !nx_tensor_is_contiguous(t)) {
        staging = nx_rt_alloc(ctx, bytes);
        if (!staging) {
            nx_tensor_free(d);
            return nx_rt_nomem(ctx, "nx_tensor_to_device (host staging)", bytes);
        }
        copy_strided(staging, d->strides, src, t->strides, t->ndim, t->shape,
                     nx_dtype_size(t->dtype));
        src = staging;
    }
    st = nx_rt_cuda_upload(ctx, (nx_cu_ptr)(uintptr_t)d->storage->data, src, bytes);
    nx_rt_free(ctx, staging, bytes);
    if (st != NX_OK) {
        nx_tensor_free(d);
        return st;
    }
    *out = d;
    return NX_OK;
}

static nx_status cuda_to_host(const nx_tensor *t, nx_tensor **out)
{
    nx_ctx *ctx = t->storage->ctx;
    nx_tensor *h = NULL;
    nx_status st = nx_tensor_new(ctx, t->dtype, t->ndim, t->shape, &h);
    if (st != NX_OK)
        return st;
    size_t esize = nx_dtype_size(t->dtype);
    nx_cu_ptr base =
        (nx_cu_ptr)(uintptr_t)t->storage->data + (nx_cu_ptr)(t->offset * (int64_t)esize);
    size_t bytes = h->storage->bytes;
    if (bytes == 0) {
        *out = h;
        return NX_OK;
    }
    if (nx_tensor_is_contiguous(t)) {
        st = nx_rt_cuda_download(ctx, h->storage->data, base, bytes);
    } else {
        /* One copy of the span the view touches, then a gather on the host. */
        int64_t lo, hi;
        span(t, &lo, &hi);
        size_t sbytes = (size_t)(hi - lo + 1) * esize;
        char *staging = nx_rt_alloc(ctx, sbytes);
        if (!staging) {
            nx_tensor_free(h);
            return nx_rt_nomem(ctx, "nx_tensor_to_device (host staging)", sbytes);
        }
        st = nx_rt_cuda_download(ctx, staging, base + (nx_cu_ptr)(lo * (int64_t)esize), sbytes);
        if (st == NX_OK)
            copy_strided(h->storage->data, h->strides, staging - lo * (int64_t)esize, t->strides,
                         t->ndim, t->shape, esize);
        nx_rt_free(ctx, staging, sbytes);
    }
    if (st != NX_OK) {
        nx_tensor_free(h);
        return st;
    }
    *out = h;
    return NX_OK;
}

nx_status nx_tensor_to_device(const nx_tensor *t, nx_device device, nx_tensor **out)
{
    nx_ctx *ctx = t ? t->storage->ctx : NULL;
    if (!t || !out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_tensor_to_device: t and out must be non-NULL");
    *out = NULL;
    if (device != NX_DEVICE_HOST && device != NX_DEVICE_CUDA)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_tensor_to_device: device %d is not NX_DEVICE_HOST or "
                           "NX_DEVICE_CUDA",
                           (int)device);
    if (device == t->storage->device)
        return nx_rt_tensor_view(t, t->ndim, t->shape, t->strides, t->offset, out);
    if (device == NX_DEVICE_CUDA)
        return host_to_cuda(t, out);
    return cuda_to_host(t, out);
}
