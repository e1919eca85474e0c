/* Backend resolution for CUDA and the loud fallback (DESIGN.md §5, docs/cuda.md).
 *
 * The fallback warning is deduplicated per process over a fixed table of 64-bit hashes of
 * (op, shapes, dtype, requested backend), so the check allocates nothing; when the table is full
 * the warning is simply repeated. */
#include <pthread.h>
#include <string.h>

#include "codegen/ptx/emit.h"

nx_status nx_ptx_resolve_backend(nx_ctx *ctx, nx_backend requested, nx_backend *out)
{
    nx_backend b = requested != NX_BACKEND_AUTO ? requested : nx_ctx_backend(ctx);
    *out = b;
    if (b == NX_BACKEND_CUDA) {
        nx_status st = nx_rt_cuda_available(ctx);
        if (st == NX_OK)
            st = nx_ptx_available(ctx);
        if (st != NX_OK)
            return nx_rt_error(ctx, NX_ERR_BACKEND,
                               "backend 'cuda' was requested (%s), but it cannot run here: %s",
                               requested == NX_BACKEND_CUDA ? "by the caller" : "by NITRIX_BACKEND",
                               nx_ctx_last_error(ctx));
        return NX_OK;
    }
    if (b != NX_BACKEND_AUTO)
        return NX_OK;
    *out = NX_BACKEND_CPU;
    if (nx_ctx_reproducible(ctx))
        return NX_OK; /* auto never picks the GPU under reproducible mode */
    /* Probing must not leave an error message behind: keep the caller's. */
    char saved[512];
    snprintf(saved, sizeof saved, "%s", nx_ctx_last_error(ctx));
    if (nx_rt_cuda_available(ctx) == NX_OK && nx_ptx_available(ctx) == NX_OK)
        *out = NX_BACKEND_CUDA;
    else
        nx_rt_error(ctx, NX_ERR_BACKEND, "%s", saved); /* "" when there was none */
    return NX_OK;
}

/* ---- fallback ------------------------------------------------------------------------------*/

#define SEEN_SLOTS 4096
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t seen[SEEN_SLOTS];

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

/* True the first time key is seen in this process. */
static bool first_time(uint64_t key)
{
    key |= 1; /* 0 marks an empty slot */
    bool first = true;
    pthread_mutex_lock(&seen_lock);
    for (size_t i = 0; i < SEEN_SLOTS; i++) {
        uint64_t *s = &seen[(key + i) % SEEN_SLOTS];
        if (*s == key) {
            first = false;
            break;
        }
        if (*s == 0) {
            *s = key;
            break;
        }
    }
    pthread_mutex_unlock(&seen_lock);
    return first;
}

static const char *op_name(const nx_kernel *k)
{
    if (k->kind == NX_KERNEL_LIBRARY)
        return nx_ir_prim_name(k->lib_prim);
    return k->name;
}

static void shapes_text(const nx_kernel *k, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = 0;
    for (int b = 0; b < k->nbufs && used + 1 < len; b++) {
        int n = snprintf(buf + used, len - used, "%s[", b ? "," : "");
        used += n > 0 ? (size_t)n : 0;
        for (int d = 0; d < k->bufs[b].ndim && used + 1 < len; d++) {
            n = snprintf(buf + used, len - used, "%s%lld", d ? "x" : "",
                         (long long)k->bufs[b].shape[d]);
            used += n > 0 ? (size_t)n : 0;
        }
        if (used + 1 < len) {
            n = snprintf(buf + used, len - used, "]");
            used += n > 0 ? (size_t)n : 0;
        }
    }
}

static void dtypes_text(const nx_kernel *k, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = 0;
    for (int b = 0; b < k->nbufs && used + 1 < len; b++) {
        char d[32];
        int n = snprintf(buf + used, len - used, "%s%s", b ? "," : "",
                         nx_ir_dtype_str(d, sizeof d, k->bufs[b].dtype));
        used += n > 0 ? (size_t)n : 0;
    }
}

nx_status nx_ptx_fallback(nx_ctx *ctx, const nx_kernel *k, nx_backend requested,
                          nx_backend resolved, const char *reason)
{
    char shapes[256], dtypes[128], line[768];
    shapes_text(k, shapes, sizeof shapes);
    dtypes_text(k, dtypes, sizeof dtypes);
    const char *op = op_name(k);
    snprintf(line, sizeof line,
             "fallback: op=%s shapes=%s dtype=%s requested=%s resolved=%s reason=%s", op, shapes,
             dtypes, nx_backend_name(requested), nx_backend_name(resolved), reason);
    if (nx_ctx_strict_backend(ctx))
        return nx_rt_error(ctx, NX_ERR_BACKEND, "%s (NITRIX_STRICT_BACKEND is set)", line);
    if (nx_ctx_silence_fallback(ctx))
        return NX_OK;
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv(h, op, strlen(op) + 1);
    h = fnv(h, shapes, strlen(shapes) + 1);
    h = fnv(h, dtypes, strlen(dtypes) + 1);
    int rb = (int)requested;
    h = fnv(h, &rb, sizeof rb);
    if (first_time(h))
        nx_ctx_log(ctx, NX_LOG_WARN, "%s", line);
    return NX_OK;
}
