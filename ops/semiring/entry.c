/* Entry-point plumbing: compiled programs looked up in the context's cache by a key of
 * everything that determines them (program/program.h nx_program_cached), the run on host or
 * device tensors, and argument checks the entry points share.
 *
 * Device tensors. When an input is a CUDA device tensor the op's plan runs on the CUDA backend
 * (explicitly asked for, or auto on a machine with a usable GPU): contiguous device inputs are
 * read in place, and when every input is on the device the outputs stay there (no copies; the run
 * synchronises before returning); the program is compiled for the cuda backend and cached under
 * a key that says so. Asking a host
 * backend (cpu, ref, or auto without a GPU) to take device tensors is NX_ERR_UNSUPPORTED naming
 * the argument. */
#include <string.h>

#include "cache.h"
#include "program/program.h"
#include "semiring.h"

static int first_device(int n, const nx_tensor *const *ins)
{
    for (int i = 0; i < n; i++)
        if (ins[i] && nx_tensor_device(ins[i]) == NX_DEVICE_CUDA)
            return i;
    return -1;
}

/* ---- the entry -----------------------------------------------------------------------------*/

nx_status nx_sr_run(nx_ctx *ctx, nx_rt_cache_blob *key, const nx_sr_run_args *a)
{
    for (int i = 0; i < a->noutputs; i++)
        a->outputs[i] = NULL;
    nx_backend backend = a->backend;
    int dev = first_device(a->ninputs, a->inputs);
    if (dev >= 0) { /* device inputs: the program must be compiled for the cuda backend */
        nx_status st = nx_program_resolve_backend(ctx, a->backend, &backend);
        if (st == NX_OK && backend != NX_BACKEND_CUDA)
            st = nx_rt_error(ctx, NX_ERR_UNSUPPORTED,
                             "%s: %s is a CUDA device tensor but the op runs on the %s backend; "
                             "expected host tensors, or the cuda backend",
                             a->who, a->names[dev], nx_backend_name(backend));
        if (st != NX_OK) {
            nx_rt_cache_blob_free(key);
            return st;
        }
    }
    nx_program *p = NULL;
    nx_status st =
        nx_program_graph_cached(ctx, key, "semiring: cache key", backend, a->build, a->user, &p);
    if (st == NX_OK)
        st = nx_program_run(p, a->inputs, a->outputs);
    return st;
}

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
