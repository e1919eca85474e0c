/* Plumbing of the ELL entry points: their programs through the context's cache
 * (nx_program_cached), operand checks that accept CUDA device tensors, and the index range flag
 * of device indices, reduced on the device so the indices never cross the bus unless one is out
 * of range: an extra output of the entry points' own programs (entry.c), or, for nx_ell_check, a
 * small program of its own. */
#include <string.h>

#include "cache.h"
#include "program/program.h"
#include "ops/sparse/sparse.h"

nx_status nx_sparse_program(nx_ctx *ctx, nx_rt_cache_blob *key, const char *what,
                            nx_backend backend, nx_sparse_build_fn build, void *user,
                            nx_program **out)
{
    return nx_program_graph_cached(ctx, key, what, backend, build, user, out);
}

nx_status nx_sparse_check_float(nx_ctx *ctx, const char *who, const char *what, const nx_tensor *t)
{
    if (!t)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %s is NULL", who, what);
    nx_dtype d = nx_tensor_dtype(t);
    if (d != NX_DTYPE_F32 && d != NX_DTYPE_F64)
        return nx_rt_error(ctx, NX_ERR_DTYPE, "%s: %s is %s; expected f32 or f64", who, what,
                           nx_dtype_name(d));
    return NX_OK;
}

nx_status nx_sparse_check_host(nx_ctx *ctx, const char *who, const char *what, const nx_tensor *t)
{
    if (t && nx_tensor_device(t) != NX_DEVICE_HOST)
        return nx_rt_error(ctx, NX_ERR_UNSUPPORTED,
                           "%s: %s is a device tensor; this function reads it on the host, so it "
                           "expects a host tensor",
                           who, what);
    return NX_OK;
}

nx_status nx_sparse_run(nx_ctx *ctx, const char *who, nx_program *p, int n_in,
                        const nx_tensor *const *in, const char *const *names, nx_tensor **outs)
{
    if (nx_program_backend(p) != NX_BACKEND_CUDA)
        for (int i = 0; i < n_in; i++)
            if (in[i] && nx_tensor_device(in[i]) != NX_DEVICE_HOST)
                return nx_rt_error(ctx, NX_ERR_UNSUPPORTED,
                                   "%s: %s is a device tensor but the program runs on the '%s' "
                                   "backend; expected host tensors, or the cuda backend",
                                   who, names[i], nx_backend_name(nx_program_backend(p)));
    return nx_program_run(p, in, outs);
}

/* ---- device index check ------------------------------------------------------------------------
 * One 0-d i32 flag: the largest of (index < 0 || index >= n_cols) over all slots, so 1 when some
 * index is out of range, 0 when none is, and MAX's identity (INT32_MIN) when there are none. */

nx_node nx_sparse_range_flag_node(nx_graph *g, nx_node idx, int64_t n_cols)
{
    nx_node q = nx_cast(g, idx, NX_DTYPE_I64);
    nx_node lo = nx_lt(g, q, nx_scalar(g, NX_DTYPE_I64, 0));
    nx_node hi = nx_ge(g, q, nx_scalar(g, NX_DTYPE_I64, (double)n_cols));
    int axes[2] = {0, 1};
    return nx_reduce(g, nx_cast(g, nx_or(g, lo, hi), NX_DTYPE_I32), 2, axes, NX_MONOID_MAX, false);
}

nx_status nx_sparse_flag_bad(const nx_tensor *flag, bool *bad)
{
    *bad = false;
    nx_tensor *host = NULL;
    nx_status st = NX_OK;
    if (nx_tensor_device(flag) != NX_DEVICE_HOST)
        st = nx_tensor_to_device(flag, NX_DEVICE_HOST, &host);
    if (st == NX_OK)
        *bad = *(const int32_t *)nx_tensor_data(host ? host : flag) > 0;
    nx_tensor_free(host);
    return st;
}

typedef struct range_call {
    const nx_tensor *indices;
    int64_t n_cols;
} range_call;

static nx_status build_range(nx_graph *g, void *user, nx_node *outs, int *n)
{
    const range_call *c = user;
    nx_node idx = nx_input(g, "indices", nx_tensor_dtype(c->indices), nx_tensor_ndim(c->indices),
                           nx_tensor_shape(c->indices));
    outs[0] = nx_sparse_range_flag_node(g, idx, c->n_cols);
    *n = 1;
    return nx_graph_status(g);
}

nx_status nx_sparse_device_indices_ok(nx_ctx *ctx, const nx_tensor *indices, int64_t n_cols,
                                      bool *ok)
{
    *ok = true;
    if (nx_tensor_numel(indices) == 0)
        return NX_OK;
    nx_rt_cache_blob key;
    nx_rt_cache_blob_init(&key, ctx);
    nx_rt_cache_blob_str(&key, "op", "ell_index_range");
    nx_rt_cache_blob_tensor(&key, "indices", indices);
    nx_rt_cache_blob_i64(&key, "n_cols", n_cols);
    range_call c = {.indices = indices, .n_cols = n_cols};
    nx_program *p = NULL;
    nx_status st = nx_sparse_program(ctx, &key, "ELL index check: cache key", NX_BACKEND_CUDA,
                                     build_range, &c, &p);
    nx_tensor *flag = NULL;
    bool bad = false;
    if (st == NX_OK)
        st = nx_program_run(p, (const nx_tensor *const[]){indices}, &flag);
    if (st == NX_OK)
        st = nx_sparse_flag_bad(flag, &bad);
    *ok = !bad;
    nx_tensor_free(flag);
    return st;
}
