/* What the semiring family's ops share: operand checks (host or CUDA device tensors; bool under
 * BOOLEAN), graph leaves, the cotangent checks of their vjps and the two-gradient vjp wrapper. The
 * ops themselves run through the op table's runner (ops/op.h); device placement is its. */
#include <string.h>

#include "cache.h"
#include "ops/op.h"
#include "program/program.h"
#include "semiring.h"

const nx_semiring *nx_sr_or_real(const nx_semiring *sr)
{
    return sr ? sr : nx_semiring_builtin(NX_SEMIRING_REAL);
}

nx_status nx_sr_check_call(nx_ctx *ctx, const char *who, const nx_semiring *sr, nx_tensor **out)
{
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: ctx is NULL", who);
    if (!out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: out is NULL", who);
    *out = NULL;
    if (!sr)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: semiring is NULL", who);
    return NX_OK;
}

nx_node nx_sr_operand(nx_graph *g, const char *name, const nx_tensor *t)
{
    nx_dtype d = nx_tensor_dtype(t);
    bool real = d == NX_DTYPE_F32 || d == NX_DTYPE_F64;
    return (real ? nx_parameter : nx_input)(g, name, d, nx_tensor_ndim(t), nx_tensor_shape(t));
}

nx_status nx_sr_check_cotangent(nx_ctx *ctx, const char *who, const nx_tensor *dy, nx_dtype dtype,
                                int ndim, const int64_t *shape)
{
    nx_status st = nx_sr_check_float_any(ctx, who, "the cotangent", dy);
    if (st != NX_OK)
        return st;
    if (nx_tensor_dtype(dy) != dtype)
        return nx_rt_error(ctx, NX_ERR_DTYPE, "%s: the cotangent is %s but the operands are %s",
                           who, nx_dtype_name(nx_tensor_dtype(dy)), nx_dtype_name(dtype));
    if (nx_tensor_ndim(dy) != ndim ||
        memcmp(nx_tensor_shape(dy), shape, (size_t)ndim * sizeof(int64_t))) {
        char a[96], b[96];
        nx_shape_str(a, sizeof a, nx_tensor_ndim(dy), nx_tensor_shape(dy));
        nx_shape_str(b, sizeof b, ndim, shape);
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "%s: the cotangent is %s; expected the result's shape %s", who, a, b);
    }
    return NX_OK;
}

nx_status nx_sr_check_result(nx_graph *g, const char *who, nx_node y, const nx_tensor *dy)
{
    int64_t ys[NX_MAX_DIMS];
    nx_node_shape(g, y, ys);
    return nx_sr_check_cotangent(nx_graph_ctx(g), who, dy, nx_node_dtype(g, y), nx_node_ndim(g, y),
                                 ys);
}

nx_status nx_sr_run_vjp2(nx_ctx *ctx, const char *who, const nx_op_desc *d, const nx_semiring *sr,
                         const nx_tensor *a, const nx_tensor *b, const nx_tensor *dy,
                         const void *opts, nx_tensor **da, nx_tensor **db)
{
    if (da)
        *da = NULL;
    if (db)
        *db = NULL;
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: ctx is NULL", who);
    if (!sr)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: semiring is NULL", who);
    nx_tensor *res[2] = {NULL, NULL};
    nx_status st = nx_op_run_vjp(ctx, d, (const nx_tensor *const[]){a, b}, opts,
                                 (const nx_tensor *const[]){dy}, res);
    if (st != NX_OK)
        return st;
    if (da)
        *da = res[0];
    else
        nx_tensor_free(res[0]);
    if (db)
        *db = res[1];
    else
        nx_tensor_free(res[1]);
    return NX_OK;
}

/* Kept for the smoothing family's entry points until they are rows of the op table. */
nx_status nx_sr_program(nx_ctx *ctx, nx_rt_cache_blob *key, nx_backend backend,
                        nx_sr_build_fn build, void *user, nx_program **out)
{
    return nx_program_graph_cached(ctx, key, "semiring: cache key", backend, build, user, out);
}

nx_status nx_sr_check_float(nx_ctx *ctx, const char *who, const char *what, const nx_tensor *t)
{
    if (t && nx_tensor_device(t) != NX_DEVICE_HOST)
        return nx_rt_error(ctx, NX_ERR_UNSUPPORTED, "%s: %s is a device tensor; expected host", who,
                           what);
    return nx_sr_check_float_any(ctx, who, what, t);
}

nx_status nx_sr_check_float_any(nx_ctx *ctx, const char *who, const char *what, const nx_tensor *t)
{
    if (!t)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %s is NULL", who, what);
    nx_dtype d = nx_tensor_dtype(t);
    if (d != NX_DTYPE_F32 && d != NX_DTYPE_F64)
        return nx_rt_error(ctx, NX_ERR_DTYPE, "%s: %s is %s; expected f32 or f64", who, what,
                           nx_dtype_name(d));
    return NX_OK;
}

nx_status nx_sr_check_operand(nx_ctx *ctx, const char *who, const char *what, const nx_tensor *t,
                              const nx_semiring *sr)
{
    if (t && sr && sr->kind == NX_SEMIRING_BOOLEAN && nx_tensor_dtype(t) == NX_DTYPE_BOOL)
        return NX_OK;
    nx_status st = nx_sr_check_float_any(ctx, who, what, t);
    if (st == NX_ERR_DTYPE && sr && sr->kind == NX_SEMIRING_BOOLEAN)
        return nx_rt_error(ctx, NX_ERR_DTYPE, "%s: %s is %s; expected f32, f64 or bool", who, what,
                           nx_dtype_name(nx_tensor_dtype(t)));
    return st;
}
