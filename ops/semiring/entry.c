/* Entry-point plumbing: compiled programs looked up in the context's cache by a key of
 * everything that determines them, and argument checks the entry points share. */
#include <string.h>

#include "cache.h"
#include "semiring.h"

static void destroy_program(void *user, void *obj)
{
    (void)user;
    nx_program_free(obj);
}

static nx_status compile(nx_ctx *ctx, nx_backend backend, nx_sr_build_fn build, void *user,
                         nx_program **out)
{
    nx_graph *g = NULL;
    nx_status st = nx_graph_new(ctx, &g);
    if (st != NX_OK)
        return st;
    nx_node outs[4] = {0};
    int n = 0;
    /* A builder failure's message is already on the context (graphs mirror theirs there). */
    st = build(g, user, outs, &n);
    if (st == NX_OK && nx_graph_status(g) != NX_OK)
        st = nx_graph_status(g);
    if (st == NX_OK) {
        nx_compile_opts co = {.backend = backend, .n_outputs = n, .outputs = outs};
        st = nx_graph_compile(g, &co, out);
    }
    nx_graph_free(g);
    return st;
}

nx_status nx_sr_program(nx_ctx *ctx, nx_rt_cache_blob *key, nx_backend backend,
                        nx_sr_build_fn build, void *user, nx_program **out)
{
    nx_rt_cache_blob_i64(key, "backend", backend);
    nx_rt_cache_key k;
    nx_status st = nx_rt_cache_blob_key(key, &k);
    if (st != NX_OK)
        return nx_rt_nomem(ctx, "semiring: cache key", key->len);
    nx_rt_cache *cache = NULL;
    if ((st = nx_rt_cache_of(ctx, &cache)) != NX_OK)
        return st;
    nx_program *p = nx_rt_cache_find(cache, &k);
    if (p) {
        *out = p;
        return NX_OK;
    }
    if ((st = compile(ctx, backend, build, user, &p)) != NX_OK)
        return st;
    void *winner = NULL;
    st = nx_rt_cache_insert(cache, &k, p, destroy_program, NULL, &winner);
    if (st != NX_OK) {
        nx_program_free(p);
        return st;
    }
    *out = winner;
    return NX_OK;
}

nx_status nx_sr_check_float(nx_ctx *ctx, const char *who, const char *what, const nx_tensor *t)
{
    if (!t)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %s is NULL", who, what);
    if (nx_tensor_device(t) != NX_DEVICE_HOST)
        return nx_rt_error(ctx, NX_ERR_UNSUPPORTED, "%s: %s is a device tensor; expected host", who,
                           what);
    nx_dtype d = nx_tensor_dtype(t);
    if (d != NX_DTYPE_F32 && d != NX_DTYPE_F64)
        return nx_rt_error(ctx, NX_ERR_DTYPE, "%s: %s is %s; expected f32 or f64", who, what,
                           nx_dtype_name(d));
    return NX_OK;
}

nx_status nx_sr_check_operand(nx_ctx *ctx, const char *who, const char *what, const nx_tensor *t,
                             const nx_semiring *sr)
{
    if (t && sr && sr->kind == NX_SEMIRING_BOOLEAN && nx_tensor_dtype(t) == NX_DTYPE_BOOL &&
        nx_tensor_device(t) == NX_DEVICE_HOST)
        return NX_OK;
    nx_status st = nx_sr_check_float(ctx, who, what, t);
    if (st == NX_ERR_DTYPE && sr && sr->kind == NX_SEMIRING_BOOLEAN)
        return nx_rt_error(ctx, NX_ERR_DTYPE, "%s: %s is %s; expected f32, f64 or bool", who, what,
                           nx_dtype_name(nx_tensor_dtype(t)));
    return st;
}

void nx_sr_key_tensor(nx_rt_cache_blob *b, const char *field, const nx_tensor *t)
{
    int64_t sig[NX_MAX_DIMS + 2] = {0};
    if (t) {
        sig[0] = nx_tensor_dtype(t);
        sig[1] = nx_tensor_ndim(t);
        memcpy(sig + 2, nx_tensor_shape(t), (size_t)sig[1] * sizeof(int64_t));
    } else {
        sig[0] = -1;
    }
    nx_rt_cache_blob_bytes(b, field, sig, sizeof sig);
}
