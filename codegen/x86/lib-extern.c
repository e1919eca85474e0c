/* Library kernels on the host: the dispatch over lib_prim, the helpers the routines share, and
 * the extern routine.
 *
 *   extern   y = def->reference(x_0, ..., x_{n-1}): the user's host function, reached through the
 *            definition the kernel records (lib_ptr), on the kernel's input tensors */
#include "codegen/x86/lib.h"
#include "runtime/pool.h"
#include "runtime/tensor.h"

nx_x86_axis nx_x86_axis_of(int ndim, const int64_t *shape, int axis)
{
    nx_x86_axis g = {1, shape[axis], 1};
    for (int d = 0; d < axis; d++)
        g.outer *= shape[d];
    for (int d = axis + 1; d < ndim; d++)
        g.inner *= shape[d];
    return g;
}

nx_status nx_x86_lib_parallel(nx_ctx *ctx, int64_t tasks, int64_t per_task,
                              void (*fn)(void *, int64_t, int64_t, int), void *user)
{
    if (tasks <= 0)
        return NX_OK;
    int64_t grain = per_task >= 65536 ? 1 : 65536 / (per_task > 0 ? per_task : 1);
    return nx_rt_parallel_for(ctx, tasks, grain, fn, user);
}

nx_status nx_x86_lib_extern(const nx_x86_lib_call *c)
{
    const nx_kernel *k = c->k;
    const nx_extern_def *def = k->lib_ptr;
    if (!def || !def->reference)
        return nx_rt_error(c->ctx, NX_ERR_INTERNAL,
                           "CPU backend: extern kernel %s records no definition with a host "
                           "function; expected the nx_extern_def it was built from",
                           k->name);
    const nx_tensor *ins[NX_KERNEL_MAX_BUFFERS];
    int nin = 0;
    for (int b = 0; b < k->nbufs; b++)
        if (k->bufs[b].role == NX_KBUF_IN)
            ins[nin++] = c->tens[b];
    nx_status st = def->reference(def->user, c->ctx, nin, ins, c->tens[k->nbufs - 1]);
    if (st != NX_OK)
        return nx_rt_error(c->ctx, st, "CPU backend: extern '%s' failed in its host function (%s)",
                           def->name, nx_status_str(st));
    return NX_OK;
}

bool nx_x86_lib_has(int prim)
{
    switch (prim) {
    case NX_PRIM_SCAN:
    case NX_PRIM_SCAN_LINEAR:
    case NX_PRIM_SCAN_IIR:
    case NX_PRIM_SORT:
    case NX_PRIM_ARGSORT:
    case NX_PRIM_SCATTER:
    case NX_PRIM_EXTERN:
        return true;
    default:
        return false;
    }
}

nx_status nx_x86_lib_run(const nx_x86_lib_call *c)
{
    switch (c->k->lib_prim) {
    case NX_PRIM_SCAN:
        return nx_x86_lib_scan(c);
    case NX_PRIM_SCAN_LINEAR:
        return nx_x86_lib_scan_linear(c);
    case NX_PRIM_SCAN_IIR:
        return nx_x86_lib_scan_iir(c);
    case NX_PRIM_SORT:
    case NX_PRIM_ARGSORT:
        return nx_x86_lib_sort(c);
    case NX_PRIM_SCATTER:
        return nx_x86_lib_scatter(c);
    case NX_PRIM_EXTERN:
        return nx_x86_lib_extern(c);
    default:
        return nx_rt_error(c->ctx, NX_ERR_INTERNAL,
                           "CPU backend: kernel %s is library primitive %s, which has no host "
                           "routine",
                           c->k->name, nx_ir_prim_name(c->k->lib_prim));
    }
}
