/* Where a program runs: backend resolution, the placement of its plan, and the one loud fallback
 * (DESIGN.md §5, docs/cuda.md).
 *
 * The policy, in the order it applies:
 *   1. the backend is the caller's, else NITRIX_BACKEND, else auto (nx_program_resolve_backend);
 *   2. a program the pipeline cannot lower for it runs on the reference interpreter;
 *   3. a CUDA plan with a kernel CUDA cannot run (why_not) runs whole on the CPU backend: one
 *      plan on one device keeps every intermediate there (splitting a plan is future work);
 *   4. a CPU loop kernel the JIT cannot compile runs on the CPU backend's kernel interpreter,
 *      and a library kernel without a CPU host routine (reduce_custom) on its reference routine;
 *      so does a loop kernel whose compile the JIT refuses only when it tries (IR that fails
 *      verification, or that LLVM's code generator could not lower: nx_program_kernel_refused).
 * Steps 2 to 4 are fallbacks: an error under NITRIX_STRICT_BACKEND, otherwise one warning per
 * identity per process unless NITRIX_SILENCE_FALLBACK. Backends never decide this themselves.
 *
 * The warning is deduplicated over a fixed table of 64-bit identities, so the check allocates
 * nothing; when the table is full the warning is simply repeated. */
#include <pthread.h>
#include <string.h>

#include "program/program.h"

/* ---- resolution ----------------------------------------------------------------------------*/

nx_status nx_program_resolve_backend(nx_ctx *ctx, nx_backend requested, nx_backend *out)
{
    nx_backend b = requested != NX_BACKEND_AUTO ? requested : nx_ctx_backend(ctx);
    *out = b;
    if (b == NX_BACKEND_CUDA) {
        if (nx_program_backend_available(ctx, NX_BACKEND_CUDA) != NX_OK)
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
    if (nx_program_backend_available(ctx, NX_BACKEND_CUDA) == NX_OK)
        *out = NX_BACKEND_CUDA;
    else
        nx_rt_error(ctx, NX_ERR_BACKEND, "%s", saved); /* "" when there was none */
    return NX_OK;
}

/* ---- the warn-once helper ------------------------------------------------------------------*/

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

#define FNV_BASIS 0xcbf29ce484222325ull

/* True the first time identity is seen in this process. */
static bool first_time(uint64_t identity)
{
    identity |= 1; /* 0 marks an empty slot */
    bool first = true;
    pthread_mutex_lock(&seen_lock);
    for (size_t i = 0; i < SEEN_SLOTS; i++) {
        uint64_t *s = &seen[(identity + i) % SEEN_SLOTS];
        if (*s == identity) {
            first = false;
            break;
        }
        if (*s == 0) {
            *s = identity;
            break;
        }
    }
    pthread_mutex_unlock(&seen_lock);
    return first;
}

nx_status nx_program_fallback(nx_ctx *ctx, uint64_t identity, const char *strict_msg,
                              const char *warn_msg)
{
    if (nx_ctx_strict_backend(ctx))
        return nx_rt_error(ctx, NX_ERR_BACKEND, "%s", strict_msg);
    if (!nx_ctx_silence_fallback(ctx) && first_time(identity))
        nx_ctx_log(ctx, NX_LOG_WARN, "%s", warn_msg);
    return NX_OK;
}

/* ---- describing a kernel -------------------------------------------------------------------*/

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

/* ---- the three fallbacks -------------------------------------------------------------------*/

/* Step 2: the pipeline could not lower the program (why: its message). */
static nx_status to_interpreter(nx_ctx *ctx, nx_backend backend, const char *why)
{
    const char *name = nx_backend_name(backend);
    char strict[NX_IR_MSG + 192], warn[NX_IR_MSG + 192];
    snprintf(strict, sizeof strict,
             "nx_graph_compile: backend '%s' cannot run this program (%s), and strict backend "
             "mode (NITRIX_STRICT_BACKEND) forbids falling back",
             name, why);
    snprintf(warn, sizeof warn,
             "nitrix fallback: backend=%s -> ref (slow): %s. NITRIX_SILENCE_FALLBACK=1 silences "
             "this, NITRIX_STRICT_BACKEND=1 makes it an error",
             name, why);
    uint64_t id = fnv(FNV_BASIS, "ref", 4);
    id = fnv(id, why, strlen(why) + 1);
    return nx_program_fallback(ctx, id, strict, warn);
}

/* Step 3: kernel k of a plan for `requested` runs on `resolved` instead (the whole plan does). */
static nx_status to_backend(nx_ctx *ctx, const nx_kernel *k, nx_backend requested,
                            nx_backend resolved, const char *why)
{
    char shapes[256], dtypes[128], line[768], strict[800];
    shapes_text(k, shapes, sizeof shapes);
    dtypes_text(k, dtypes, sizeof dtypes);
    const char *op = op_name(k);
    snprintf(line, sizeof line,
             "fallback: op=%s shapes=%s dtype=%s requested=%s resolved=%s reason=%s", op, shapes,
             dtypes, nx_backend_name(requested), nx_backend_name(resolved), why);
    snprintf(strict, sizeof strict, "%s (NITRIX_STRICT_BACKEND is set)", line);
    uint64_t id = fnv(FNV_BASIS, "plan", 5);
    id = fnv(id, op, strlen(op) + 1);
    id = fnv(id, shapes, strlen(shapes) + 1);
    id = fnv(id, dtypes, strlen(dtypes) + 1);
    int rb = (int)requested;
    id = fnv(id, &rb, sizeof rb);
    return nx_program_fallback(ctx, id, strict, line);
}

/* Step 4: kernel k runs on the CPU backend's kernel interpreter (a loop kernel) or on the
 * reference routine of its primitive (a library kernel without a host routine). */
static nx_status to_kernel_interpreter(nx_ctx *ctx, const nx_kernel *k, const char *why)
{
    const char *where = k->kind == NX_KERNEL_LOOP ? "kernel interpreter" : "reference routine";
    char shape[160], strict[512], warn[512];
    const nx_kbuf *out = &k->bufs[k->nbufs - 1];
    nx_shape_str(shape, sizeof shape, out->ndim, out->shape);
    snprintf(strict, sizeof strict,
             "nx_graph_compile: backend 'cpu' cannot compile kernel %s (%s%s: %s), and strict "
             "backend mode (NITRIX_STRICT_BACKEND) forbids running it on the %s",
             k->name, nx_dtype_name(out->dtype), shape, why,
             k->kind == NX_KERNEL_LOOP ? "interpreter" : where);
    snprintf(warn, sizeof warn,
             "nitrix fallback: op=%s shape=%s dtype=%s backend=cpu -> %s (slow): "
             "%s. NITRIX_SILENCE_FALLBACK=1 silences this, NITRIX_STRICT_BACKEND=1 makes it an "
             "error",
             k->name, shape, nx_dtype_name(out->dtype), where, why);
    uint64_t id = fnv(FNV_BASIS, "kernel", 7);
    uint64_t h = nx_kernel_hash(k);
    id = fnv(id, &h, sizeof h);
    return nx_program_fallback(ctx, id, strict, warn);
}

nx_status nx_program_kernel_refused(nx_ctx *ctx, const nx_kernel *k, const char *why)
{
    if (k->kind != NX_KERNEL_LOOP) /* only loop kernels have an interpreter to go to */
        return nx_rt_error(ctx, NX_ERR_BACKEND, "%s", why);
    return to_kernel_interpreter(ctx, k, why);
}

/* ---- placing a plan ------------------------------------------------------------------------*/

/* Step 3 over every kernel: *moved when the plan goes to the CPU. */
static nx_status place_cuda(nx_ctx *ctx, const nx_kplan *p, bool *moved)
{
    *moved = false;
    for (int i = 0; i < p->nkernels; i++) {
        const nx_kernel *k = p->kernels[i];
        const char *why = nx_program_why_not(NX_BACKEND_CUDA, k);
        if (!why)
            continue;
        /* a kernel fused for CUDA (codegen/prologue.c) has no CPU form: a check that failed now
         * but passed then can only be an allocation failure */
        if (k->has_prologue || k->has_epilogue)
            return nx_rt_error(ctx, NX_ERR_NOMEM,
                               "CUDA: kernel %s (fused for the device) cannot be prepared: %s",
                               k->name, why);
        *moved = true;
        nx_status st = to_backend(ctx, k, NX_BACKEND_CUDA, NX_BACKEND_CPU, why);
        if (st != NX_OK)
            return st;
    }
    return NX_OK;
}

/* Step 4 over every kernel. A kernel fused for another backend is left to the CPU backend's
 * prepare, which refuses it (it cannot come here but through a bug). */
static nx_status place_cpu(nx_ctx *ctx, const nx_kplan *p)
{
    for (int i = 0; i < p->nkernels; i++) {
        const nx_kernel *k = p->kernels[i];
        if (k->has_prologue || k->has_epilogue)
            continue;
        const char *why = nx_program_why_not(NX_BACKEND_CPU, k);
        nx_status st = why ? to_kernel_interpreter(ctx, k, why) : NX_OK;
        if (st != NX_OK)
            return st;
    }
    return NX_OK;
}

nx_status nx_program_place(nx_ctx *ctx, nx_backend backend, const nx_ir_store *s, int noutputs,
                           const nx_node *outputs, nx_placement *out)
{
    memset(out, 0, sizeof *out);
    const nx_backend_ops *ops = nx_program_backend_ops(backend);
    if (!ops)
        return NX_OK; /* ref: the interpreter, by request */
    nx_kplan *plan = NULL;
    nx_status st = nx_pass_pipeline_for(ctx, s, noutputs, outputs, ops->supports, &plan);
    if (st == NX_ERR_UNSUPPORTED) {
        char why[NX_IR_MSG];
        snprintf(why, sizeof why, "%s", nx_ctx_last_error(ctx));
        return to_interpreter(ctx, backend, why);
    }
    if (st != NX_OK)
        return st;
    bool moved = false;
    if (backend == NX_BACKEND_CUDA)
        st = place_cuda(ctx, plan, &moved);
    if (st == NX_OK && moved)
        ops = nx_program_backend_ops(NX_BACKEND_CPU);
    if (st == NX_OK && ops->id == NX_BACKEND_CPU)
        st = place_cpu(ctx, plan);
    if (st != NX_OK) {
        nx_kplan_free(plan);
        return st;
    }
    out->ops = ops;
    out->plan = plan;
    out->host_for_device = moved;
    return NX_OK;
}
