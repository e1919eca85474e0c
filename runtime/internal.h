/* Runtime internals shared across the library: allocation through the context hook, error
 * recording, overflow-checked arithmetic. Not installed. */
#ifndef NX_RUNTIME_INTERNAL_H
#define NX_RUNTIME_INTERNAL_H

#include <stdarg.h>

#include "nitrix.h"

#if defined(__GNUC__)
#define NX_HIDDEN __attribute__((visibility("hidden")))
#define NX_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define NX_HIDDEN
#define NX_PRINTF(f, a)
#endif

#ifdef NX_DEBUG_ASSERTS
#include <stdlib.h>
#define NX_ASSERT(x)                                                                               \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            fprintf(stderr, "%s:%d: NX_ASSERT(%s) failed\n", __FILE__, __LINE__, #x);              \
            abort();                                                                               \
        }                                                                                          \
    } while (0)
#else
#define NX_ASSERT(x) ((void)0)
#endif

/* Host memory through the context's allocator. Sizes of 0 allocate 1 byte so NULL always means
 * failure. nx_rt_alloc does not record an error; callers report NX_ERR_NOMEM with context. */
NX_HIDDEN void *nx_rt_alloc(nx_ctx *ctx, size_t size);
NX_HIDDEN void *nx_rt_alloc_aligned(nx_ctx *ctx, size_t size, size_t align);
NX_HIDDEN void *nx_rt_calloc(nx_ctx *ctx, size_t n, size_t size);
NX_HIDDEN void nx_rt_free(nx_ctx *ctx, void *p, size_t size);
/* Grows *p (holding *cap elements of elem bytes) to at least need elements, doubling. On failure
 * *p and *cap are unchanged and false is returned. */
NX_HIDDEN bool nx_rt_grow(nx_ctx *ctx, void **p, size_t *cap, size_t need, size_t elem);
/* Whether NITRIX_DUMP, read when ctx was created (not with nx_ctx_opts.ignore_env), names what:
 * graph, fuse, kernel or llvm. The dumps go to stderr. */
NX_HIDDEN bool nx_rt_dump_requested(const nx_ctx *ctx, const char *what);
/* The CUDA code generator's options of ctx (nx_ctx_opts.cuda_codegen over NITRIX_PTX_*, checked
 * at creation; 0 in a field: the generator's choice). Borrowed from ctx; never NULL (all 0 for a
 * NULL ctx). */
NX_HIDDEN const nx_cuda_codegen_opts *nx_rt_cuda_codegen(const nx_ctx *ctx);
/* A growing text buffer from the context allocator (the emitters' output). put appends printf-
 * style; after a failed allocation or format, failed is set and further puts do nothing, so a
 * caller checks once at the end. Free p with nx_rt_free(ctx, p, cap). */
typedef struct nx_rt_text {
    nx_ctx *ctx;
    char *p;
    size_t len, cap;
    bool failed;
} nx_rt_text;
NX_HIDDEN void nx_rt_text_vput(nx_rt_text *t, const char *fmt, va_list ap);
NX_HIDDEN void nx_rt_text_put(nx_rt_text *t, const char *fmt, ...) NX_PRINTF(2, 3);
/* A copy of s from the context allocator (freed with nx_rt_free(ctx, p, strlen(p) + 1)). */
NX_HIDDEN char *nx_rt_strdup(nx_ctx *ctx, const char *s);

/* Records status and a formatted message on ctx (first argument may be NULL: the thread-local
 * context-less slot) and returns status, so `return nx_rt_error(ctx, NX_ERR_SHAPE, "...")`. */
NX_HIDDEN nx_status nx_rt_error(nx_ctx *ctx, nx_status status, const char *fmt, ...)
    NX_PRINTF(3, 4);
NX_HIDDEN nx_status nx_rt_verror(nx_ctx *ctx, nx_status status, const char *fmt, va_list ap);
/* NX_ERR_NOMEM with "what: out of memory (N bytes)". */
NX_HIDDEN nx_status nx_rt_nomem(nx_ctx *ctx, const char *what, size_t bytes);

/* Overflow-checked arithmetic: false on overflow, *out untouched. */
static inline bool nx_mul_i64(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool nx_add_i64(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}
/* Size arithmetic on values a caller gave (options, shapes, and sizes computed from them): the
 * one place where such sums and products are checked. Each step is checked with
 * __builtin_*_overflow; the first overflow is kept in the nx_rt_size and every later step gives 0,
 * so an expression is written once and tested once:
 *
 *     nx_rt_size z = {0};
 *     int64_t eff = nx_rt_size_add(&z, nx_rt_size_mul(&z, w - 1, dil), 1);
 *     if (z.overflow)
 *         return nx_rt_size_error(ctx, who, "dilation", "a dilated kernel extent below 2^63");
 *
 * nx_rt_size_of_double converts a size computed in floating point (a window radius from sigma):
 * NaN, infinities and values beyond int64 overflow instead of being undefined. */
typedef struct nx_rt_size {
    bool overflow;
} nx_rt_size;
static inline int64_t nx_rt_size_add(nx_rt_size *z, int64_t a, int64_t b)
{
    int64_t r = 0;
    if (z->overflow || __builtin_add_overflow(a, b, &r)) {
        z->overflow = true;
        return 0;
    }
    return r;
}
static inline int64_t nx_rt_size_sub(nx_rt_size *z, int64_t a, int64_t b)
{
    int64_t r = 0;
    if (z->overflow || __builtin_sub_overflow(a, b, &r)) {
        z->overflow = true;
        return 0;
    }
    return r;
}
static inline int64_t nx_rt_size_mul(nx_rt_size *z, int64_t a, int64_t b)
{
    int64_t r = 0;
    if (z->overflow || __builtin_mul_overflow(a, b, &r)) {
        z->overflow = true;
        return 0;
    }
    return r;
}
static inline int64_t nx_rt_size_of_double(nx_rt_size *z, double v)
{
    /* 2^63 is exact in a double; every double below it converts. */
    if (z->overflow || !(v > -9223372036854775808.0 && v < 9223372036854775808.0)) {
        z->overflow = true;
        return 0;
    }
    return (int64_t)v;
}
/* NX_ERR_INVALID_ARG with "who: option is too large: a size computed from it overflows int64;
 * expected <expected>". Returns the status. */
NX_HIDDEN nx_status nx_rt_size_error(nx_ctx *ctx, const char *who, const char *option,
                                     const char *expected);

/* Product of ndim extents (each must be >= 0), checked; false on a negative extent or overflow. */
NX_HIDDEN bool nx_shape_numel(int ndim, const int64_t *shape, int64_t *numel);
/* "[2,3,4]" into buf (always terminated). Returns buf. */
NX_HIDDEN const char *nx_shape_str(char *buf, size_t len, int ndim, const int64_t *shape);

/* Number of online CPUs (>= 1). */
NX_HIDDEN int nx_rt_cpu_count(void);

/* Per-context services created lazily (thread pool, kernel cache, JIT, CUDA), destroyed in reverse
 * slot order by nx_ctx_free. */
/* The cache comes last so it is destroyed first: the kernels it holds are released while the JIT
 * and the CUDA context that own their code are still alive. */
typedef enum nx_ctx_slot {
    NX_SLOT_POOL,
    NX_SLOT_JIT,
    NX_SLOT_CUDA,
    NX_SLOT_CACHE,
    NX_SLOT_COUNT
} nx_ctx_slot;
typedef void (*nx_slot_destroy)(nx_ctx *ctx, void *obj);
/* The object in slot, or NULL. */
NX_HIDDEN void *nx_rt_ctx_get(nx_ctx *ctx, nx_ctx_slot slot);
/* Installs obj unless the slot is already taken; returns the object now in the slot (obj, or the
 * one another thread installed first: the caller then destroys its own). Thread-safe. */
NX_HIDDEN void *nx_rt_ctx_install(nx_ctx *ctx, nx_ctx_slot slot, void *obj,
                                  nx_slot_destroy destroy);

/* CUDA probe for nx_system_info (runtime/cuda.c): fills the cuda_* and nvrtc_* fields, never fails. */
NX_HIDDEN void nx_rt_cuda_probe(nx_ctx *ctx, nx_system_info *info);

#endif /* NX_RUNTIME_INTERNAL_H */
