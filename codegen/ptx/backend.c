/* The CUDA backend object (nx_backend_ops, codegen/kernel.h).
 *
 * prepare compiles every kernel for the device: loop kernels through emit.c, library kernels
 * (scatter, sort/argsort, scan, scan_linear) through emit-lib.c. A plan with a kernel neither can
 * generate (extern, reduce_custom, sort lines longer than nx_ptx_sort_max, f16/bf16 loop kernels
 * until emit.c takes them) runs whole on the CPU backend instead: each such kernel is reported
 * through nx_ptx_fallback (one structured warning per op, shapes, dtype and backend per process;
 * silenced by NITRIX_SILENCE_FALLBACK, an NX_ERR_BACKEND under NITRIX_STRICT_BACKEND). Running
 * the whole plan on one side keeps every intermediate on one device; splitting a plan between
 * the GPU and the host is future work (docs/cuda.md). */
#include "codegen/ptx/emit-lib.h"
#include "codegen/x86/emit.h"

typedef struct ptx_state {
    nx_ptx_plan *cp;  /* the device plan, or NULL when the plan runs on the CPU */
    void *cpu;        /* the CPU backend's state for a plan that fell back */
} ptx_state;

static bool ptx_supports(const nx_kernel *k)
{
    return nx_ptx_kernel_unsupported(k) == NULL;
}

static nx_status ptx_prepare(nx_ctx *ctx, const nx_kplan *p, void **state)
{
    *state = NULL;
    ptx_state *s = nx_rt_calloc(ctx, 1, sizeof *s);
    if (!s)
        return nx_rt_nomem(ctx, "CUDA backend state", sizeof *s);
    nx_status st = NX_OK;
    bool fallback = false;
    for (int i = 0; st == NX_OK && i < p->nkernels; i++) {
        const nx_kernel *k = p->kernels[i];
        const char *why = nx_ptx_kernel_unsupported(k);
        if (!why)
            continue;
        /* a kernel fused for this backend (passes/prologue.c) has no CPU form: a check that
         * failed now but passed then can only be an allocation failure */
        if (k->has_prologue || k->has_epilogue)
            st = nx_rt_error(ctx, NX_ERR_NOMEM, "CUDA: kernel %s (fused for the device) cannot "
                                                 "be prepared: %s",
                             k->name, why);
        fallback = true;
        if (st == NX_OK)
            st = nx_ptx_fallback(ctx, k, NX_BACKEND_CUDA, NX_BACKEND_CPU, why);
    }
    if (st == NX_OK)
        st = fallback ? nx_x86_backend.prepare(ctx, p, &s->cpu) : nx_ptx_plan_compile(ctx, p, &s->cp);
    if (st != NX_OK) {
        nx_rt_free(ctx, s, sizeof *s);
        return st;
    }
    *state = s;
    return NX_OK;
}

static int plan_inputs(const nx_kplan *p)
{
    int n = 0;
    for (int i = 0; i < p->nslots; i++)
        if (p->slots[i].kind == NX_SLOT_INPUT && p->slots[i].arg + 1 > n)
            n = p->slots[i].arg + 1;
    return n;
}

/* A plan that fell back to the CPU given device inputs (the fallback already warned): they are
 * copied to the host, and when every input was on the device the outputs go back there, so the
 * caller sees the placement it would have had on the GPU. */
static nx_status run_fallback(nx_ctx *ctx, const nx_kplan *p, ptx_state *s,
                              const nx_tensor *const *inputs, nx_tensor **outputs)
{
    int n = plan_inputs(p), ndev = 0;
    nx_tensor **host = n ? nx_rt_calloc(ctx, (size_t)n, sizeof *host) : NULL;
    if (n && !host)
        return nx_rt_nomem(ctx, "CUDA fallback inputs", (size_t)n * sizeof *host);
    nx_status st = NX_OK;
    for (int i = 0; i < n && st == NX_OK; i++) {
        bool dev = inputs[i] && nx_tensor_device(inputs[i]) != NX_DEVICE_HOST;
        ndev += dev;
        if (dev)
            st = nx_tensor_to_device(inputs[i], NX_DEVICE_HOST, &host[i]);
    }
    const nx_tensor **bound = n ? nx_rt_calloc(ctx, (size_t)n, sizeof *bound) : NULL;
    if (n && !bound && st == NX_OK)
        st = nx_rt_nomem(ctx, "CUDA fallback inputs", (size_t)n * sizeof *bound);
    for (int i = 0; i < n && st == NX_OK; i++)
        bound[i] = host[i] ? host[i] : inputs[i];
    if (st == NX_OK)
        st = nx_x86_backend.run(ctx, p, s->cpu, bound, outputs);
    for (int o = 0; st == NX_OK && ndev == n && n > 0 && o < p->noutputs; o++) {
        nx_tensor *d = NULL;
        st = nx_tensor_to_device(outputs[o], NX_DEVICE_CUDA, &d);
        nx_tensor_free(outputs[o]);
        outputs[o] = d;
    }
    for (int i = 0; i < n; i++)
        nx_tensor_free(host[i]);
    nx_rt_free(ctx, host, (size_t)n * sizeof *host);
    nx_rt_free(ctx, (void *)bound, (size_t)n * sizeof *bound);
    return st;
}

static nx_status ptx_run(nx_ctx *ctx, const nx_kplan *p, void *state,
                         const nx_tensor *const *inputs, nx_tensor **outputs)
{
    ptx_state *s = state;
    if (s->cp)
        return nx_ptx_plan_run(ctx, p, s->cp, inputs, outputs);
    for (int i = 0; i < plan_inputs(p); i++)
        if (inputs[i] && nx_tensor_device(inputs[i]) != NX_DEVICE_HOST)
            return run_fallback(ctx, p, s, inputs, outputs);
    return nx_x86_backend.run(ctx, p, s->cpu, inputs, outputs);
}

static void ptx_release(nx_ctx *ctx, const nx_kplan *p, void *state)
{
    ptx_state *s = state;
    if (!s)
        return;
    if (s->cp)
        nx_ptx_plan_free(ctx, s->cp);
    else
        nx_x86_backend.release(ctx, p, s->cpu);
    nx_rt_free(ctx, s, sizeof *s);
}

const nx_backend_ops nx_ptx_backend = {
    .name = "cuda",
    .supports = ptx_supports,
    .prepare = ptx_prepare,
    .run = ptx_run,
    .release = ptx_release,
};
