/* Running a plan on the host, as hooks of the shared plan walk (codegen/plan-run.c): inputs are
 * borrowed, constants wrapped, temporaries allocated uninitialised where the kernel writes them
 * whole; loop kernels run compiled code split across the thread pool (or the kernel IR
 * interpreter), library kernels run the backend's host routines (lib-*.c) over the kernel IR. */
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "codegen/plan-run.h"
#include "codegen/x86/emit.h"
#include "codegen/x86/lib.h"
#include "runtime/pool.h"
#include "runtime/tensor.h"

typedef struct run_state {
    nx_ctx *ctx;
    bool reassoc; /* what the kernels were compiled with (nx_x86_kernel_split depends on it) */
    const nx_kplan *p;
    nx_tensor **slot; /* the walk's slot tensors (codegen/plan-run.c), set as kernels run */
    const nx_tensor *const *inputs;
    const nx_x86_loop_fn *fns; /* by kernel; NULL or a NULL entry: interpreted / host routine */
} run_state;

typedef struct loop_call {
    nx_x86_loop_fn fn;
    void *const *bufs;
} loop_call;

static void loop_chunk(void *user, int64_t begin, int64_t end, int chunk)
{
    (void)chunk;
    const loop_call *c = user;
    c->fn(c->bufs, begin, end);
}

/* Outer iterations: the first axis of the space, or one point for a 0-d space. */
static int64_t outer_extent(const nx_kernel *k)
{
    return k->ndim ? k->extent[0] : 1;
}

/* Iterations of the loops other than l; aim for chunks of at least ~64K scalar operations so
 * the fork costs little. */
static int64_t grain_of(const nx_kernel *k, int l)
{
    int64_t inner = 1;
    for (int q = 0; q < k->nloops; q++)
        if (q != l)
            inner *= k->extent[q] ? k->extent[q] : 1;
    return inner >= 65536 ? 1 : 65536 / inner;
}

typedef struct split_call {
    nx_x86_loop_fn fn;
    void **bufs; /* one row of buffer pointers per chunk: the output is the chunk's partial */
    int nbufs;
} split_call;

static void split_chunk(void *user, int64_t begin, int64_t end, int chunk)
{
    const split_call *c = user;
    c->fn(c->bufs + (size_t)chunk * (size_t)c->nbufs, begin, end);
}

/* A 0-d reduction split over its first loop (nx_x86_kernel_split): per-chunk partials, combined
 * in ascending chunk order with the interpreter's monoid step. The partition depends only on the
 * extent and the thread count, so the result does too. */
static nx_status run_split(run_state *rs, const nx_kernel *k, int l, nx_x86_loop_fn fn,
                           void **bufs)
{
    int64_t n = k->extent[l], grain = grain_of(k, l);
    int nch = nx_rt_pool_chunks(n, grain, nx_ctx_num_threads(rs->ctx));
    if (nch <= 1) {
        fn(bufs, 0, n);
        return NX_OK;
    }
    const nx_kstore *s = &k->stores[0];
    nx_dtype d = (nx_dtype)k->bufs[s->buf].dtype;
    size_t psize = (size_t)nch * nx_dtype_size(d), bsize = (size_t)nch * (size_t)k->nbufs * 8;
    void *partials = nx_rt_alloc(rs->ctx, psize);
    void **rows = nx_rt_alloc(rs->ctx, bsize);
    nx_status st = partials && rows ? NX_OK : nx_rt_nomem(rs->ctx, "nx_program_run", psize);
    for (int c = 0; st == NX_OK && c < nch; c++) {
        memcpy(rows + (size_t)c * (size_t)k->nbufs, bufs, (size_t)k->nbufs * sizeof *bufs);
        rows[(size_t)c * (size_t)k->nbufs + (size_t)s->buf] =
            (char *)partials + (size_t)c * nx_dtype_size(d);
    }
    split_call call = {fn, rows, k->nbufs};
    if (st == NX_OK)
        st = nx_rt_parallel_for(rs->ctx, n, grain, split_chunk, &call);
    if (st == NX_OK) {
        int64_t m = k->inst[s->value].prim;
        nx_ir_carry acc = nx_ir_monoid_init(m, d);
        for (int c = 0; c < nch; c++)
            nx_ir_monoid_step(&acc, m, d, nx_ir_get(partials, d, c), c);
        nx_ir_put(bufs[s->buf], d, 0, nx_ir_monoid_finish(&acc, m, d));
    }
    nx_rt_free(rs->ctx, partials, psize);
    nx_rt_free(rs->ctx, rows, bsize);
    return st;
}

static nx_status run_loop(run_state *rs, const nx_kernel *k, nx_x86_loop_fn fn, void **bufs)
{
    if (!fn)
        return nx_kernel_interpret(k, bufs);
    int split = nx_x86_kernel_split(k, rs->reassoc);
    if (k->ndim == 0 && split >= 0)
        return run_split(rs, k, split, fn, bufs);
    if (nx_ir_numel(k->ndim, k->extent) == 0)
        return NX_OK;
    loop_call c = {fn, bufs};
    return nx_rt_parallel_for(rs->ctx, outer_extent(k), k->ndim ? grain_of(k, 0) : 1, loop_chunk,
                              &c);
}

/* reduce_custom's monoid is graph expressions (lift, combine, identity, finalize) that the kernel
 * IR does not carry, so it has no host routine of its own yet: it runs the reference
 * interpreter's routine on its graph node. The placement policy (program/placement.c) has warned
 * once, or refused it under strict backend mode: nx_x86_why_not gives the reason. */
static nx_status run_reference(run_state *rs, const nx_kernel *k)
{
    const nx_ir_store *s = rs->p->store;
    const nx_ir_node *n = nx_ir_node_at(s, k->lib_node);
    const nx_tensor *ins[NX_KERNEL_MAX_BUFFERS];
    int nin = 0;
    for (int b = 0; b < k->nbufs; b++)
        if (k->bufs[b].role == NX_KBUF_IN)
            ins[nin++] = rs->slot[k->bufs[b].slot];
    nx_ir_eval ev = {rs->ctx, s, rs->inputs};
    return nx_ir_prims[n->op].ref(&ev, n, ins, rs->slot[k->bufs[k->nbufs - 1].slot]);
}

static nx_status run_library(run_state *rs, const nx_kernel *k, void *const *bufs)
{
    if (!nx_x86_lib_has(k->lib_prim)) {
        if (k->lib_prim != NX_PRIM_REDUCE_CUSTOM)
            return nx_rt_error(rs->ctx, NX_ERR_UNSUPPORTED,
                               "CPU backend: kernel %s is library primitive %s, which the CPU "
                               "backend has no routine for",
                               k->name, nx_ir_prim_name(k->lib_prim));
        return run_reference(rs, k);
    }
    nx_tensor *tens[NX_KERNEL_MAX_BUFFERS];
    for (int b = 0; b < k->nbufs; b++)
        tens[b] = rs->slot[k->bufs[b].slot];
    nx_x86_lib_call c = {rs->ctx, k, bufs, tens};
    return nx_x86_lib_run(&c);
}

/* Fresh output memory costs one page fault per 4 KiB on first touch, which for a 256 MiB result
 * outweighs the kernel itself; transparent huge pages (where the system lets a process ask for
 * them) cut the faults 512-fold. A hint only: failure changes nothing. */
static void advise_huge(void *data, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = 2u << 20;
    if (bytes < 4 * huge)
        return;
    uintptr_t lo = ((uintptr_t)data + huge - 1) & ~(huge - 1);
    uintptr_t hi = ((uintptr_t)data + bytes) & ~(huge - 1);
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)data;
    (void)bytes;
#endif
}

/* A loop kernel stores every element of its output, and so do the library routines (lib-*.c: the
 * scans write each line's every position, sort and argsort the k positions of each line that the
 * output has, scatter copies x in whole before it combines) and reduce_custom's reference (each
 * output point): their outputs need no zero fill, which is a pass over the output and its
 * first-touch page faults (18 scan_linear outputs of 80 MiB per recursive Gaussian at 256^3). An
 * extern's host function is user code and keeps the zeroed output it always had. */
static bool writes_whole_output(const nx_kernel *k)
{
    if (k->kind == NX_KERNEL_LOOP)
        return true;
    switch (k->lib_prim) {
    case NX_PRIM_SCAN:
    case NX_PRIM_SCAN_LINEAR:
    case NX_PRIM_SCAN_IIR:
    case NX_PRIM_SORT:
    case NX_PRIM_ARGSORT:
    case NX_PRIM_SCATTER:
    case NX_PRIM_REDUCE_CUSTOM:
        return true;
    default:
        return false;
    }
}

/* ---- the plan walk's hooks (codegen/plan-run.h) --------------------------------------------*/

static nx_status cpu_bind(void *be, int slot, const nx_kslot *sl, nx_tensor **out)
{
    run_state *rs = be;
    (void)slot;
    if (sl->kind != NX_SLOT_CONSTANT)
        return nx_rt_error(rs->ctx, NX_ERR_INTERNAL, "CPU backend: slot %d kind %d to bind", slot,
                           sl->kind);
    return nx_tensor_wrap(rs->ctx, (void *)sl->data, sl->dtype, sl->ndim, sl->shape, NULL, out);
}

static nx_status cpu_alloc(void *be, int ki, const nx_kernel *k, int b, nx_tensor **out)
{
    run_state *rs = be;
    (void)ki;
    const nx_kbuf *kb = &k->bufs[b];
    nx_status st = writes_whole_output(k)
                       ? nx_rt_tensor_new_uninit(rs->ctx, kb->dtype, kb->ndim, kb->shape, out)
                       : nx_tensor_new(rs->ctx, kb->dtype, kb->ndim, kb->shape, out);
    if (st == NX_OK)
        advise_huge(nx_tensor_data(*out),
                    (size_t)nx_ir_numel(kb->ndim, kb->shape) * nx_dtype_size(kb->dtype));
    return st;
}

static nx_status cpu_run_kernel(void *be, int ki, const nx_kernel *k, nx_tensor *const *slot)
{
    run_state *rs = be;
    rs->slot = (nx_tensor **)slot;
    void *bufs[NX_KERNEL_MAX_BUFFERS];
    for (int b = 0; b < k->nbufs; b++)
        bufs[b] = nx_tensor_data(slot[k->bufs[b].slot]);
    if (k->kind == NX_KERNEL_LIBRARY)
        return run_library(rs, k, bufs);
    return run_loop(rs, k, rs->fns ? rs->fns[ki] : NULL, bufs);
}

static nx_status cpu_take(void *be, nx_tensor *t, bool movable, nx_tensor **out, bool *moved)
{
    run_state *rs = be;
    if (movable) {
        *out = t;
        *moved = true;
        return NX_OK;
    }
    return nx_ir_tensor_contiguous_copy(rs->ctx, t, out);
}

static const nx_plan_hooks cpu_hooks = {
    .borrow_inputs = true,
    .bind = cpu_bind,
    .alloc = cpu_alloc,
    .run = cpu_run_kernel,
    .take = cpu_take,
};

nx_status nx_x86_plan_run(nx_ctx *ctx, const nx_kplan *p, const nx_x86_loop_fn *fns,
                          const nx_tensor *const *inputs, nx_tensor **outputs)
{
    return nx_x86_plan_run_ex(ctx, p, fns, !nx_ctx_reproducible(ctx), inputs, outputs);
}

nx_status nx_x86_plan_run_ex(nx_ctx *ctx, const nx_kplan *p, const nx_x86_loop_fn *fns,
                             bool reassoc, const nx_tensor *const *inputs, nx_tensor **outputs)
{
    run_state rs = {ctx, reassoc, p, NULL, inputs, fns};
    return nx_plan_run(ctx, p, &cpu_hooks, &rs, inputs, outputs);
}

/* ---- the backend object --------------------------------------------------------------------*/

typedef struct cpu_state {
    int n;
    bool reassoc; /* the context's choice when the kernels were compiled */
    nx_x86_loop_fn *fns;
} cpu_state;

static nx_status cpu_prepare(nx_ctx *ctx, const nx_kplan *p, nx_kernel_refused_fn refused,
                             void **state)
{
    cpu_state *cs = nx_rt_calloc(ctx, 1, sizeof *cs);
    if (!cs)
        return nx_rt_nomem(ctx, "nx_graph_compile", sizeof *cs);
    cs->n = p->nkernels;
    cs->reassoc = !nx_ctx_reproducible(ctx); /* as nx_x86_plan_compile decides */
    cs->fns = nx_rt_calloc(ctx, (size_t)p->nkernels + 1, sizeof *cs->fns);
    nx_status st = cs->fns ? nx_x86_plan_compile_ex(ctx, p, refused, cs->fns)
                           : nx_rt_nomem(ctx, "nx_graph_compile", (size_t)p->nkernels * 8);
    if (st != NX_OK) {
        nx_rt_free(ctx, cs->fns, ((size_t)cs->n + 1) * sizeof *cs->fns);
        nx_rt_free(ctx, cs, sizeof *cs);
        return st;
    }
    *state = cs;
    return NX_OK;
}

static nx_status cpu_run(nx_ctx *ctx, const nx_kplan *p, void *state,
                         const nx_tensor *const *inputs, nx_tensor **outputs)
{
    const cpu_state *cs = state;
    return nx_x86_plan_run_ex(ctx, p, cs->fns, cs->reassoc, inputs, outputs);
}

static void cpu_release(nx_ctx *ctx, const nx_kplan *p, void *state)
{
    (void)p;
    cpu_state *cs = state;
    if (!cs)
        return;
    nx_rt_free(ctx, cs->fns, ((size_t)cs->n + 1) * sizeof *cs->fns);
    nx_rt_free(ctx, cs, sizeof *cs);
}

/* The padded FIR form (measured at 256^3 f32: sums of shifted slices cost 2.0-2.6 ms per tap and
 * axis): one fused program inlines the border rule into every tap's load, an i64 mod and a select
 * per tap and lane along the contiguous axis; padded first, the loads are affine and vectorise. */
static const nx_backend_hints cpu_hints = {
    .fir_pad_first = true,
    .fir_slices_every_axis = false,
};

const nx_backend_ops nx_x86_backend = {
    .name = "cpu",
    .id = NX_BACKEND_CPU,
    .available = nx_x86_available,
    .why_not = nx_x86_why_not,
    .supports = nx_x86_supports,
    .prepare = cpu_prepare,
    .run = cpu_run,
    .release = cpu_release,
    .hints = &cpu_hints,
};
