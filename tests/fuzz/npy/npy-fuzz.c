/* One fuzz input: nx_npy_read_mem either rejects it with NX_ERR_PARSE and a message, or gives a
 * tensor that nx_npy_write_mem writes and nx_npy_read_mem reads back unchanged; writing that
 * again gives the same bytes; a reversed strided view of it survives the same trip. A counting
 * allocator catches leaks and mismatched free sizes within the input, whatever sanitizer is (or
 * is not) present. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nitrix.h"
#include "npy-fuzz.h"

typedef struct counted {
    int64_t live;
    int64_t size_errors;
} counted;

static void *counted_alloc(void *user, size_t size, size_t align)
{
    counted *c = user;
    void *base = NULL;
    if (align > 64 || posix_memalign(&base, 64, size + 64) != 0)
        return NULL; /* the library never asks for more than 64 */
    memcpy(base, &size, sizeof size);
    c->live++;
    return (char *)base + 64;
}

static void counted_free(void *user, void *ptr, size_t size)
{
    counted *c = user;
    if (!ptr)
        return;
    char *base = (char *)ptr - 64;
    size_t recorded;
    memcpy(&recorded, base, sizeof recorded);
    c->size_errors += recorded != size;
    c->live--;
    free(base);
}

static void quiet(void *user, nx_log_level level, const char *msg)
{
    (void)user;
    (void)level;
    (void)msg;
}

static npy_fuzz_result broken(char *why, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
    return NPY_FUZZ_BROKEN;
}

static bool same_tensor(const nx_tensor *a, const nx_tensor *b)
{
    if (nx_tensor_dtype(a) != nx_tensor_dtype(b) || nx_tensor_ndim(a) != nx_tensor_ndim(b))
        return false;
    for (int i = 0; i < nx_tensor_ndim(a); i++)
        if (nx_tensor_shape(a)[i] != nx_tensor_shape(b)[i])
            return false;
    size_t bytes = (size_t)nx_tensor_numel(a) * nx_dtype_size(nx_tensor_dtype(a));
    return bytes == 0 || memcmp(nx_tensor_data(a), nx_tensor_data(b), bytes) == 0;
}

static npy_fuzz_result round_trip(nx_ctx *ctx, const nx_tensor *t, char *why, size_t cap)
{
    void *buf = NULL, *again = NULL;
    size_t len = 0, again_len = 0;
    nx_tensor *u = NULL;
    npy_fuzz_result r = NPY_FUZZ_ACCEPTED;
    if (nx_npy_write_mem(ctx, t, &buf, &len) != NX_OK)
        r = broken(why, cap, "write_mem of an accepted input failed: %s", nx_ctx_last_error(ctx));
    else if (nx_npy_read_mem(ctx, buf, len, &u) != NX_OK)
        r = broken(why, cap, "re-reading the written bytes failed: %s", nx_ctx_last_error(ctx));
    else if (!same_tensor(t, u))
        r = broken(why, cap, "the re-read tensor differs from the first read");
    else if (nx_npy_write_mem(ctx, u, &again, &again_len) != NX_OK)
        r = broken(why, cap, "second write_mem failed: %s", nx_ctx_last_error(ctx));
    else if (again_len != len || memcmp(again, buf, len) != 0)
        r = broken(why, cap, "writing the re-read tensor gave different bytes");
    nx_ctx_buffer_free(ctx, again, again_len);
    nx_ctx_buffer_free(ctx, buf, len);
    nx_tensor_free(u);
    return r;
}

/* The view of t with its axes reversed and its new last axis walked backwards, written and read
 * back, must equal a naive element-by-element gather: this drives the writer's strided and tiled
 * copies with whatever shapes the fuzzer finds. */
static npy_fuzz_result strided_view(nx_ctx *ctx, const nx_tensor *t, char *why, size_t cap)
{
    int n = nx_tensor_ndim(t);
    int64_t numel = nx_tensor_numel(t);
    if (n < 2 || numel == 0)
        return NPY_FUZZ_ACCEPTED;
    size_t es = nx_dtype_size(nx_tensor_dtype(t));
    int64_t shape[NX_MAX_DIMS], strides[NX_MAX_DIMS];
    for (int k = 0; k < n; k++) {
        shape[k] = nx_tensor_shape(t)[n - 1 - k];
        strides[k] = nx_tensor_strides(t)[n - 1 - k];
    }
    uint8_t *origin = nx_tensor_data(t);
    origin += (shape[n - 1] - 1) * strides[n - 1] * (int64_t)es;
    strides[n - 1] = -strides[n - 1];
    nx_tensor *v = NULL, *back = NULL;
    void *buf = NULL;
    size_t len = 0;
    npy_fuzz_result r = NPY_FUZZ_ACCEPTED;
    if (nx_tensor_wrap(ctx, origin, nx_tensor_dtype(t), n, shape, strides, &v) != NX_OK)
        r = broken(why, cap, "wrapping a view failed: %s", nx_ctx_last_error(ctx));
    else if (nx_npy_write_mem(ctx, v, &buf, &len) != NX_OK)
        r = broken(why, cap, "writing a strided view failed: %s", nx_ctx_last_error(ctx));
    else if (nx_npy_read_mem(ctx, buf, len, &back) != NX_OK)
        r = broken(why, cap, "re-reading a strided view failed: %s", nx_ctx_last_error(ctx));
    int64_t idx[NX_MAX_DIMS] = {0};
    const uint8_t *got = back ? nx_tensor_data(back) : NULL;
    for (int64_t i = 0; got && r == NPY_FUZZ_ACCEPTED && i < numel; i++) {
        int64_t off = 0;
        for (int k = 0; k < n; k++)
            off += idx[k] * strides[k];
        if (memcmp(got + i * (int64_t)es, origin + off * (int64_t)es, es) != 0)
            r = broken(why, cap, "strided view element %lld differs after the round trip",
                       (long long)i);
        for (int k = n - 1; k >= 0 && ++idx[k] == shape[k]; k--)
            idx[k] = 0;
    }
    nx_tensor_free(back);
    nx_ctx_buffer_free(ctx, buf, len);
    nx_tensor_free(v);
    return r;
}

npy_fuzz_result npy_fuzz_one(const uint8_t *data, size_t size, char *why, size_t cap)
{
    counted c = {0, 0};
    nx_allocator a = {counted_alloc, counted_free, &c};
    nx_ctx_opts opts = {.allocator = &a, .log = quiet, .ignore_env = true};
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(&opts, &ctx) != NX_OK)
        return broken(why, cap, "nx_ctx_new failed: %s", nx_ctx_last_error(NULL));
    nx_tensor *t = (nx_tensor *)&t; /* the reader must reset it */
    nx_status st = nx_npy_read_mem(ctx, data, size, &t);
    npy_fuzz_result r;
    if (st == NX_OK) {
        r = round_trip(ctx, t, why, cap);
        if (r == NPY_FUZZ_ACCEPTED)
            r = strided_view(ctx, t, why, cap);
    }
    else if (st != NX_ERR_PARSE)
        r = broken(why, cap, "rejected with %s, expected NX_ERR_PARSE: %s", nx_status_str(st),
                   nx_ctx_last_error(ctx));
    else if (t != NULL)
        r = broken(why, cap, "rejected but *out was not set to NULL");
    else if (nx_ctx_last_error(ctx)[0] == '\0')
        r = broken(why, cap, "rejected without a message");
    else
        r = NPY_FUZZ_REJECTED;
    if (st == NX_OK)
        nx_tensor_free(t);
    nx_ctx_free(ctx);
    if (r != NPY_FUZZ_BROKEN && (c.live != 0 || c.size_errors != 0))
        r = broken(why, cap, "%lld allocations leaked, %lld frees with the wrong size",
                   (long long)c.live, (long long)c.size_errors);
    return r;
}
