/* A stand-in for libcuda.so.1, loaded through NITRIX_CUDA_DRIVER_PATH, so the CUDA runtime layer
 * runs in CI without a GPU. "Device memory" is host memory; every copy is checked to lie inside
 * one live allocation (an out-of-bounds copy fails with CUDA_ERROR_INVALID_VALUE, and is counted),
 * so span and offset arithmetic is tested. Modules never load: no kernel runs here.
 *
 * Configured from the environment when cuInit is called:
 *   NX_FAKE_CUDA_INIT     the result of cuInit (default 0; 100 = CUDA_ERROR_NO_DEVICE)
 *   NX_FAKE_CUDA_DEVICES  "name:major.minor:sms:GiB,..." (default one "Fake A100" 8.0, 108 SMs, 40)
 *   NX_FAKE_CUDA_NO_HOST  set: cuMemAllocHost_v2 fails (the runtime must fall back to plain copies)
 * Test hooks (found with dlsym): fake_cuda_live_allocs, fake_cuda_bad_copies,
 * fake_cuda_live_host (page-locked blocks not yet freed), fake_cuda_host_allocs (all ever given). */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

#define MAX_DEV 8
#define MAX_ALLOCS 4096

typedef struct fake_dev {
    char name[64];
    int major, minor, sms;
    size_t mem;
} fake_dev;

static fake_dev devs[MAX_DEV];
static int ndev;
static int init_result;
static bool initialised;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    CUdeviceptr p;
    size_t n;
} allocs[MAX_ALLOCS];
static int live;
static int bad_copies;
static int live_host, host_allocs;
static int ctx_token; /* its address is the one context */
static int stream_token;

int fake_cuda_live_allocs(void)
{
    return live;
}

int fake_cuda_bad_copies(void)
{
    return bad_copies;
}

int fake_cuda_live_host(void)
{
    return live_host;
}

int fake_cuda_host_allocs(void)
{
    return host_allocs;
}

static void parse_devices(const char *spec)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok && ndev < MAX_DEV;
         tok = strtok_r(NULL, ",", &save)) {
        fake_dev *d = &devs[ndev];
        unsigned long gib = 0;
        char *colon = strchr(tok, ':');
        if (!colon)
            continue;
        *colon = '\0';
        snprintf(d->name, sizeof d->name, "%s", tok);
        if (sscanf(colon + 1, "%d.%d:%d:%lu", &d->major, &d->minor, &d->sms, &gib) != 4)
            continue;
        d->mem = (size_t)gib << 30;
        ndev++;
    }
}

CUresult cuInit(unsigned flags)
{
    (void)flags;
    const char *r = getenv("NX_FAKE_CUDA_INIT");
    init_result = r ? atoi(r) : 0;
    const char *spec = getenv("NX_FAKE_CUDA_DEVICES");
    ndev = 0;
    parse_devices(spec ? spec : "Fake A100:8.0:108:40");
    initialised = init_result == 0;
    return init_result;
}

#define NEED_INIT()                                                                                \
    do {                                                                                           \
        if (!initialised)                                                                          \
            return 3; /* CUDA_ERROR_NOT_INITIALIZED */                                             \
    } while (0)

CUresult cuDriverGetVersion(int *v)
{
    *v = 13000;
    return 0;
}

CUresult cuGetErrorName(CUresult e, const char **s)
{
    switch (e) {
    case 2:
        *s = "CUDA_ERROR_OUT_OF_MEMORY";
        return 0;
    case 100:
        *s = "CUDA_ERROR_NO_DEVICE";
        return 0;
    default:
        *s = NULL;
        return 1; /* the library's own table then names it */
    }
}

CUresult cuGetErrorString(CUresult e, const char **s)
{
    (void)e;
    *s = NULL;
    return 1;
}

CUresult cuDeviceGetCount(int *n)
{
    NEED_INIT();
    *n = ndev;
    return 0;
}

CUresult cuDeviceGet(int *dev, int ordinal)
{
    NEED_INIT();
    if (ordinal < 0 || ordinal >= ndev)
        return 101;
    *dev = ordinal;
    return 0;
}

CUresult cuDeviceGetName(char *name, int len, int dev)
{
    NEED_INIT();
    snprintf(name, (size_t)len, "%s", devs[dev].name);
    return 0;
}

CUresult cuDeviceGetAttribute(int *v, int attr, int dev)
{
    NEED_INIT();
    switch (attr) {
    case 16:
        *v = devs[dev].sms;
        return 0;
    case 75:
        *v = devs[dev].major;
        return 0;
    case 76:
        *v = devs[dev].minor;
        return 0;
    default:
        return 1;
    }
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, int dev)
{
    NEED_INIT();
    *bytes = devs[dev].mem;
    return 0;
}

CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
    NEED_INIT();
    (void)dev;
    *ctx = &ctx_token;
    return 0;
}

CUresult cuDevicePrimaryCtxRelease_v2(int dev)
{
    (void)dev;
    return 0;
}

CUresult cuCtxSetCurrent(void *ctx)
{
    (void)ctx;
    return 0;
}

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    *free_bytes = *total = devs[0].mem;
    return 0;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    NEED_INIT();
    if (n == 0)
        return 1;
    if (n > ((size_t)64 << 30))
        return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    void *m = malloc(n);
    if (!m)
        return 2;
    pthread_mutex_lock(&lock);
    int i = 0;
    while (i < MAX_ALLOCS && allocs[i].p)
        i++;
    if (i == MAX_ALLOCS) {
        pthread_mutex_unlock(&lock);
        free(m);
        return 2;
    }
    allocs[i].p = (CUdeviceptr)(uintptr_t)m;
    allocs[i].n = n;
    live++;
    pthread_mutex_unlock(&lock);
    *p = allocs[i].p;
    return 0;
}

CUresult cuMemFree_v2(CUdeviceptr p)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_ALLOCS; i++) {
        if (allocs[i].p == p) {
            allocs[i].p = 0;
            live--;
            pthread_mutex_unlock(&lock);
            free((void *)(uintptr_t)p);
            return 0;
        }
    }
    pthread_mutex_unlock(&lock);
    return 1;
}

CUresult cuMemAllocHost_v2(void **p, size_t n)
{
    NEED_INIT();
    if (n == 0 || getenv("NX_FAKE_CUDA_NO_HOST"))
        return 2;
    *p = malloc(n);
    if (!*p)
        return 2;
    pthread_mutex_lock(&lock);
    live_host++;
    host_allocs++;
    pthread_mutex_unlock(&lock);
    return 0;
}

CUresult cuMemFreeHost(void *p)
{
    pthread_mutex_lock(&lock);
    live_host--;
    pthread_mutex_unlock(&lock);
    free(p);
    return 0;
}

/* Whether [p, p + n) lies inside one live allocation. */
static bool inside(CUdeviceptr p, size_t n)
{
    bool ok = false;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_ALLOCS && !ok; i++)
        ok = allocs[i].p && p >= allocs[i].p && p + n <= allocs[i].p + allocs[i].n;
    if (!ok)
        bad_copies++;
    pthread_mutex_unlock(&lock);
    return ok;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, void *s)
{
    (void)s;
    if (!inside(dst, n))
        return 1;
    memcpy((void *)(uintptr_t)dst, src, n);
    return 0;
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, void *s)
{
    (void)s;
    if (!inside(src, n))
        return 1;
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return 0;
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, void *s)
{
    (void)s;
    if (!inside(src, n) || !inside(dst, n))
        return 1;
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return 0;
}

CUresult cuModuleLoadDataEx(void **m, const void *image, unsigned n, int *opts, void **vals)
{
    (void)image;
    *m = NULL;
    for (unsigned i = 0; i < n; i++) {
        if (opts[i] == 5) /* CU_JIT_ERROR_LOG_BUFFER */
            snprintf(vals[i], 64, "the fake driver loads no modules");
    }
    return 200; /* CUDA_ERROR_INVALID_IMAGE */
}

CUresult cuModuleGetFunction(void **f, void *m, const char *name)
{
    (void)m;
    (void)name;
    *f = NULL;
    return 500;
}

CUresult cuModuleUnload(void *m)
{
    (void)m;
    return 0;
}

CUresult cuFuncSetAttribute(void *f, int attr, int v)
{
    (void)f;
    (void)attr;
    (void)v;
    return 0;
}

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned smem, void *s, void **params, void **extra)
{
    (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)smem, (void)s;
    (void)params, (void)extra;
    return 719;
}

CUresult cuStreamCreate(void **s, unsigned flags)
{
    (void)flags;
    *s = &stream_token;
    return 0;
}

CUresult cuStreamSynchronize(void *s)
{
    (void)s;
    return 0;
}

CUresult cuStreamDestroy_v2(void *s)
{
    (void)s;
    return 0;
}
