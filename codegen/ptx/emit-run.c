/* Compiled CUDA kernels by cache key, and plans run over device memory.
 *
 * Slots become device buffers: device inputs are used in place (contiguous ones), host inputs
 * are uploaded once per run, constants once per compiled plan, intermediates are allocated from
 * the context's caching allocator when their kernel runs and returned after their last reader.
 * Nothing goes back to the host between kernels. */
#include <string.h>
#include <time.h>

#include "codegen/plan-run.h"
#include "codegen/ptx/emit-lib.h"
#include "codegen/ptx/emit-tile.h"
#include "runtime/cache.h"

/* Bumped whenever the emitted code changes for the same kernel IR. */
#define NX_PTX_EMITTER_VERSION "ptx-emit-13"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void kernel_destroy(void *user, void *obj)
{
    /* The module belongs to the device's primary context and goes with it; by the time the cache
     * closes, the context's CUDA state may already be released, so only host memory is freed. */
    nx_rt_free(user, obj, sizeof(nx_ptx_kernel));
}

static bool is_extern(const nx_kernel *k)
{
    return k->kind == NX_KERNEL_LIBRARY && k->lib_prim == NX_PRIM_EXTERN;
}

/* The kernel's identity, into b (initialised by the caller): its IR, and for an extern its
 * device source (src, emitted first) and point count in place of the definitions' addresses,
 * which the IR's attributes hold. Two externs that share name and shapes but not code then never
 * share a kernel, and an extern's kernel is found on disk again by the next process. */
static nx_status build_key(const nx_kernel *k, const char *src, int64_t points, bool reassoc,
                           nx_ptx_target t, nx_rt_cache_blob *b, nx_rt_cache_key *key)
{
    uint8_t *ir = NULL;
    size_t ir_len = 0;
    nx_status st;
    if (src) {
        nx_kernel anon = *k;
        anon.attrs[0] = 0;
        anon.attrs[1] = 0;
        st = nx_kernel_serialize(&anon, &ir, &ir_len);
    } else {
        st = nx_kernel_serialize(k, &ir, &ir_len);
    }
    if (st != NX_OK)
        return st;
    char tc[128], target[32];
    snprintf(target, sizeof target, "%s_%d", t.kind == NX_PTX_KIND_CUBIN ? "sm" : "compute",
             t.arch);
    nx_rt_cache_blob_str(b, "backend", "cuda");
    nx_rt_cache_blob_str(b, "emitter", NX_PTX_EMITTER_VERSION);
    nx_rt_cache_blob_bytes(b, "ir", ir, ir_len);
    if (src) {
        nx_rt_cache_blob_str(b, "extern_source", src);
        nx_rt_cache_blob_i64(b, "extern_points", points);
    }
    nx_rt_cache_blob_i64(b, "reassoc", reassoc);
    char cg[160];
    nx_rt_cache_blob_str(b, "codegen", nx_ptx_codegen_key(k->ctx, cg, sizeof cg));
    nx_rt_cache_blob_str(b, "target", target);
    nx_rt_cache_blob_str(b, "toolchain", nx_ptx_toolchain_key(tc, sizeof tc));
    nx_rt_free(k->ctx, ir, ir_len);
    return nx_rt_cache_blob_key(b, key);
}

static nx_status device_target(nx_ctx *ctx, nx_ptx_target *t)
{
    nx_rt_cuda *cu;
    nx_status st = nx_rt_cuda_get(ctx, &cu);
    if (st == NX_OK)
        st = nx_ptx_available(ctx);
    if (st != NX_OK)
        return st;
    const nx_rt_nvrtc *n = nx_rt_nvrtc_get();
    const nx_gpu_info *g = nx_rt_cuda_device(cu);
    *t = nx_ptx_choose_target(g->cc_major, g->cc_minor, n->major, n->archs, n->n_archs,
                              nx_rt_cuda_driver_get()->version);
    if (t->arch == 0)
        return nx_rt_error(ctx, NX_ERR_BACKEND,
                           "NVRTC %d.%d supports no architecture at or below the device's %d.%d",
                           n->major, n->minor, g->cc_major, g->cc_minor);
    return NX_OK;
}

/* The image for k: from disk, or compiled (and stored). */
static nx_status image_of(nx_ctx *ctx, nx_rt_cache *cache, const nx_rt_cache_key *key,
                          const char *src, const char *name, nx_ptx_target t, bool reassoc,
                          void **img, size_t *len, bool *disk_hit)
{
    nx_status st = nx_rt_cache_load(cache, key, img, len, disk_hit);
    if (st != NX_OK || *disk_hit)
        return st;
    nx_ptx_image im;
    /* Without reassociation no a * b + c is contracted into one FMA either: the CPU backend and
     * the interpreter round the product and the sum apart, and a MAX/MIN fold of such terms is
     * then the same bit for bit on every backend. */
    static const char *const opts[] = {"-default-device", "--std=c++17", "--fmad=false"};
    st = nx_ptx_compile(ctx, src, name, t, opts, reassoc ? 2 : 3, &im);
    if (st != NX_OK)
        return st;
    nx_rt_cache_store(cache, key, im.data, im.size);
    *img = im.data;
    *len = im.size;
    im.data = NULL;
    im.size = 0;
    nx_ptx_image_free(ctx, &im);
    return NX_OK;
}

/* An extern's device source that NVRTC refused: the message names the extern (user code), then
 * NVRTC's own, which carries the log. */
static nx_status extern_failed(nx_ctx *ctx, const nx_kernel *k)
{
    char why[512];
    snprintf(why, sizeof why, "%s", nx_ctx_last_error(ctx));
    return nx_rt_error(ctx, NX_ERR_BACKEND,
                       "CUDA: the device source of extern '%s' (kernel %s) did not compile; "
                       "expected CUDA C that NVRTC accepts: %s",
                       ((const nx_extern_def *)k->lib_ptr)->name, k->name, why);
}

nx_status nx_ptx_kernel_get(nx_ctx *ctx, const nx_kernel *k, bool reassoc,
                            const nx_ptx_kernel **out, nx_ptx_get_info *info)
{
    double t0 = now();
    *out = NULL;
    nx_ptx_get_info inf = {0};
    nx_ptx_target t;
    nx_status st = device_target(ctx, &t);
    nx_rt_cache *cache = NULL;
    if (st == NX_OK)
        st = nx_rt_cache_of(ctx, &cache);
    if (st != NX_OK)
        return st;
    char *src = NULL;
    size_t src_len = 0;
    nx_ptx_launch launch;
    static const char name[] = "nx_kernel";
    bool ext = is_extern(k);
    if (ext)
        st = nx_ptx_kernel_emit(k, name, reassoc, &src, &src_len, &launch);
    nx_rt_cache_blob b;
    nx_rt_cache_key key;
    nx_rt_cache_blob_init(&b, ctx);
    if (st == NX_OK)
        st = build_key(k, src, ext ? launch.points : -1, reassoc, t, &b, &key);
    nx_ptx_kernel *pk = st == NX_OK ? nx_rt_cache_find(cache, &key) : NULL;
    if (pk) {
        nx_rt_free(ctx, src, src_len);
        inf.memory_hit = true;
        goto done;
    }
    if (st == NX_OK && !ext)
        st = nx_ptx_kernel_emit(k, name, reassoc, &src, &src_len, &launch);
    void *img = NULL;
    size_t img_len = 0;
    if (st == NX_OK)
        st = image_of(ctx, cache, &key, src, "nitrix-kernel.cu", t, reassoc, &img, &img_len,
                      &inf.disk_hit);
    if (st == NX_ERR_BACKEND && ext)
        st = extern_failed(ctx, k);
    nx_rt_free(ctx, src, src_len);
    nx_cu_module m = NULL;
    if (st == NX_OK)
        st = nx_rt_cuda_module_load(ctx, img, &m);
    nx_rt_free(ctx, img, img_len);
    nx_cu_function fn = NULL;
    if (st == NX_OK)
        st = nx_rt_cuda_module_function(ctx, m, name, &fn);
    if (st == NX_OK) {
        pk = nx_rt_alloc(ctx, sizeof *pk);
        if (!pk)
            st = nx_rt_nomem(ctx, "CUDA kernel", sizeof *pk);
    }
    if (st == NX_OK) {
        *pk = (nx_ptx_kernel){m, fn, launch};
        void *winner = NULL;
        st = nx_rt_cache_insert(cache, &key, pk, kernel_destroy, ctx, &winner);
        if (st != NX_OK)
            nx_rt_free(ctx, pk, sizeof *pk);
        pk = winner;
    }
    if (st != NX_OK && m)
        nx_rt_cuda_module_unload(ctx, m);
done:
    nx_rt_cache_blob_free(&b);
    if (st != NX_OK)
        return st;
    inf.seconds = now() - t0;
    if (info)
        *info = inf;
    *out = pk;
    return NX_OK;
}

/* ---- compiled plans ------------------------------------------------------------------------*/

struct nx_ptx_plan {
    int nkernels, nslots;
    const nx_ptx_kernel **kernels;
    nx_tensor **constants; /* by slot: device copies of CONSTANT slots */
    nx_tensor **part;      /* by kernel: BLOCK_REDUCE partials, NULL otherwise */
    nx_tensor **ticket;    /* by kernel: BLOCK_REDUCE tickets (zeroed once) */
};

const char *nx_ptx_plan_unsupported(const nx_kplan *p, int *which)
{
    for (int i = 0; i < p->nkernels; i++) {
        const char *why = nx_ptx_kernel_unsupported(p->kernels[i]);
        if (why) {
            *which = i;
            return why;
        }
    }
    *which = -1;
    return NULL;
}

void nx_ptx_plan_free(nx_ctx *ctx, nx_ptx_plan *cp)
{
    if (!cp)
        return;
    for (int i = 0; cp->constants && i < cp->nslots; i++)
        nx_tensor_free(cp->constants[i]);
    for (int i = 0; cp->part && i < cp->nkernels; i++) {
        nx_tensor_free(cp->part[i]);
        nx_tensor_free(cp->ticket[i]);
    }
    /* the arrays hold at least one element (a plan may have no kernel: its output is an input
     * or a constant), so they are freed with the sizes they were allocated with */
    size_t nk = (size_t)(cp->nkernels ? cp->nkernels : 1);
    size_t ns = (size_t)(cp->nslots ? cp->nslots : 1);
    nx_rt_free(ctx, cp->kernels, nk * sizeof *cp->kernels);
    nx_rt_free(ctx, cp->part, nk * sizeof *cp->part);
    nx_rt_free(ctx, cp->ticket, nk * sizeof *cp->ticket);
    nx_rt_free(ctx, cp->constants, ns * sizeof *cp->constants);
    nx_rt_free(ctx, cp, sizeof *cp);
}

static nx_status upload_new(nx_ctx *ctx, nx_dtype dt, int ndim, const int64_t *shape,
                            const void *data, nx_tensor **out)
{
    nx_status st = nx_rt_cuda_tensor_new(ctx, dt, ndim, shape, out);
    if (st == NX_OK)
        st = nx_rt_cuda_upload(ctx, (nx_cu_ptr)(uintptr_t)(*out)->storage->data, data,
                               (*out)->storage->bytes);
    return st;
}

static nx_status scratch(nx_ctx *ctx, nx_ptx_plan *cp, int i, const nx_kernel *k)
{
    const nx_ptx_launch *l = &cp->kernels[i]->launch;
    if (l->shape != NX_PTX_BLOCK_REDUCE)
        return NX_OK;
    int64_t n = l->points * l->blocks_per_point;
    int r = -1;
    for (int id = 0; id < k->ninst; id++) /* the top-level fold: its carry type sizes partials */
        if (k->inst[id].op == NX_KOP_REDUCE)
            r = id;
    nx_status st = nx_rt_cuda_tensor_new(ctx, k->inst[r].dtype, 1, &n, &cp->part[i]);
    if (st != NX_OK)
        return st;
    size_t bytes = (size_t)n * sizeof(uint32_t);
    void *zeros = nx_rt_calloc(ctx, (size_t)n, sizeof(uint32_t));
    if (!zeros)
        return nx_rt_nomem(ctx, "CUDA tickets", bytes);
    st = upload_new(ctx, NX_DTYPE_I32, 1, &n, zeros, &cp->ticket[i]);
    nx_rt_free(ctx, zeros, bytes);
    return st;
}

nx_status nx_ptx_plan_compile(nx_ctx *ctx, const nx_kplan *p, nx_ptx_plan **out)
{
    *out = NULL;
    int which;
    const char *why = nx_ptx_plan_unsupported(p, &which);
    if (why)
        return nx_rt_error(ctx, NX_ERR_UNSUPPORTED, "CUDA: kernel %s: %s",
                           p->kernels[which]->name, why);
    nx_ptx_plan *cp = nx_rt_calloc(ctx, 1, sizeof *cp);
    if (!cp)
        return nx_rt_nomem(ctx, "CUDA plan", sizeof *cp);
    cp->nkernels = p->nkernels;
    cp->nslots = p->nslots;
    size_t nk = (size_t)(p->nkernels ? p->nkernels : 1);
    cp->kernels = nx_rt_calloc(ctx, nk, sizeof *cp->kernels);
    cp->part = nx_rt_calloc(ctx, nk, sizeof *cp->part);
    cp->ticket = nx_rt_calloc(ctx, nk, sizeof *cp->ticket);
    cp->constants = nx_rt_calloc(ctx, (size_t)(p->nslots ? p->nslots : 1), sizeof *cp->constants);
    nx_status st = cp->kernels && cp->part && cp->ticket && cp->constants
                       ? NX_OK
                       : nx_rt_nomem(ctx, "CUDA plan", nk * 3 * sizeof(void *));
    bool reassoc = !nx_ctx_reproducible(ctx);
    for (int i = 0; st == NX_OK && i < p->nkernels; i++) {
        st = nx_ptx_kernel_get(ctx, p->kernels[i], reassoc, &cp->kernels[i], NULL);
        if (st == NX_OK)
            st = scratch(ctx, cp, i, p->kernels[i]);
    }
    for (int s = 0; st == NX_OK && s < p->nslots; s++) {
        const nx_kslot *sl = &p->slots[s];
        if (sl->kind == NX_SLOT_CONSTANT)
            st = upload_new(ctx, sl->dtype, sl->ndim, sl->shape, sl->data, &cp->constants[s]);
    }
    if (st != NX_OK) {
        /* keep nkernels/nslots as allocated so the free sizes match */
        cp->nkernels = p->nkernels;
        nx_ptx_plan_free(ctx, cp);
        return st;
    }
    *out = cp;
    return NX_OK;
}

/* ---- running: hooks of the shared plan walk (codegen/plan-run.h) ---------------------------*/

typedef struct run_state {
    nx_ctx *ctx;
    const nx_kplan *p;
    nx_ptx_plan *cp;
    const nx_tensor *const *inputs;
    bool device_out;
    bool copied; /* take enqueued a device copy that the run must wait for */
} run_state;

static nx_cu_ptr dptr(const nx_tensor *t)
{
    return (nx_cu_ptr)(uintptr_t)t->storage->data +
           (nx_cu_ptr)(t->offset * (int64_t)nx_dtype_size(t->dtype));
}

/* A device tensor holding input t contiguously: t itself (one more reference) when it is a
 * contiguous device tensor, else a device copy. */
static nx_status bind_input(const nx_tensor *t, nx_tensor **out)
{
    if (t->storage->device == NX_DEVICE_CUDA && nx_tensor_is_contiguous(t))
        return nx_rt_tensor_view(t, t->ndim, t->shape, t->strides, t->offset, out);
    if (t->storage->device == NX_DEVICE_CUDA) { /* strided device input: through the host */
        nx_tensor *h = NULL;
        nx_status st = nx_tensor_to_device(t, NX_DEVICE_HOST, &h);
        if (st == NX_OK)
            st = nx_tensor_to_device(h, NX_DEVICE_CUDA, out);
        nx_tensor_free(h);
        return st;
    }
    return nx_tensor_to_device(t, NX_DEVICE_CUDA, out);
}

static nx_status cuda_bind(void *be, int slot, const nx_kslot *sl, nx_tensor **out)
{
    run_state *rs = be;
    if (sl->kind == NX_SLOT_INPUT)
        return bind_input(rs->inputs[sl->arg], out);
    return nx_rt_tensor_view(rs->cp->constants[slot], sl->ndim, sl->shape,
                             rs->cp->constants[slot]->strides, 0, out);
}

static nx_status cuda_alloc(void *be, int ki, const nx_kernel *k, int b, nx_tensor **out)
{
    run_state *rs = be;
    (void)ki;
    const nx_kbuf *kb = &k->bufs[b];
    return nx_rt_cuda_tensor_new(rs->ctx, kb->dtype, kb->ndim, kb->shape, out);
}

static nx_status launch(run_state *rs, int ki, nx_tensor *const *slot)
{
    const nx_kernel *k = rs->p->kernels[ki];
    const nx_ptx_kernel *pk = rs->cp->kernels[ki];
    nx_cu_ptr vals[NX_KERNEL_MAX_BUFFERS + 2];
    void *params[NX_KERNEL_MAX_BUFFERS + 3];
    int np = 0;
    for (int b = 0; b < k->nbufs; b++) {
        /* a prologue's value has no memory: the kernel computes it where it reads it */
        vals[np] = k->bufs[b].role == NX_KBUF_VALUE ? 0 : dptr(slot[k->bufs[b].slot]);
        params[np] = &vals[np];
        np++;
    }
    int64_t points = pk->launch.points;
    nx_rt_cuda_dims d = {{1, 1, 1}, {NX_PTX_THREADS, 1, 1}, 0};
    if (pk->launch.shape == NX_PTX_BLOCK_REDUCE) {
        vals[np] = dptr(rs->cp->part[ki]);
        params[np] = &vals[np];
        np++;
        vals[np] = dptr(rs->cp->ticket[ki]);
        params[np] = &vals[np];
        np++;
        d.grid[0] = (unsigned)(points * pk->launch.blocks_per_point);
    } else {
        int64_t blocks = (points + NX_PTX_THREADS - 1) / NX_PTX_THREADS;
        d.grid[0] = (unsigned)(blocks < (1 << 24) ? blocks : (1 << 24));
    }
    long long pts = (long long)points;
    params[np++] = &pts;
    if (points == 0)
        return NX_OK;
    return nx_rt_cuda_launch(rs->ctx, pk->fn, &d, params);
}

/* A scatter starts from a copy of x in its output, ordered before the kernel on the stream. */
static nx_status precopy(run_state *rs, const nx_kernel *k, nx_tensor *const *slot)
{
    int b = nx_ptx_lib_precopy(k);
    if (b < 0)
        return NX_OK;
    const nx_tensor *src = slot[k->bufs[b].slot];
    nx_tensor *dst = slot[k->bufs[k->nbufs - 1].slot];
    size_t bytes = (size_t)nx_ir_numel(k->bufs[b].ndim, k->bufs[b].shape) *
                   nx_dtype_size(k->bufs[b].dtype);
    return nx_rt_cuda_copy(rs->ctx, dptr(dst), dptr(src), bytes);
}

/* Temporaries freed after their last reader return to the caching allocator; kernels on the
 * stream are ordered, so a later kernel that reuses a block runs after this one. */
static nx_status cuda_run_kernel(void *be, int ki, const nx_kernel *k, nx_tensor *const *slot)
{
    run_state *rs = be;
    nx_status st = precopy(rs, k, slot);
    return st == NX_OK ? launch(rs, ki, slot) : st;
}

static nx_status cuda_sync(void *be)
{
    run_state *rs = be;
    return nx_rt_cuda_sync(rs->ctx);
}

static nx_status cuda_take(void *be, nx_tensor *t, bool movable, nx_tensor **out, bool *moved)
{
    run_state *rs = be;
    if (!rs->device_out)
        return nx_tensor_to_device(t, NX_DEVICE_HOST, out);
    if (movable) {
        *out = t;
        *moved = true;
        return NX_OK;
    }
    nx_status st = nx_rt_cuda_tensor_new(rs->ctx, t->dtype, t->ndim, t->shape, out);
    if (st == NX_OK)
        st = nx_rt_cuda_copy(rs->ctx, dptr(*out), dptr(t), (*out)->storage->bytes);
    rs->copied = true;
    return st;
}

/* Downloads wait for themselves; only device-to-device copies are still in flight. */
static nx_status cuda_done(void *be)
{
    run_state *rs = be;
    return rs->copied ? nx_rt_cuda_sync(rs->ctx) : NX_OK;
}

static const nx_plan_hooks cuda_hooks = {
    .borrow_inputs = false,
    .bind = cuda_bind,
    .alloc = cuda_alloc,
    .run = cuda_run_kernel,
    .sync = cuda_sync,
    .take = cuda_take,
    .done = cuda_done,
};

nx_status nx_ptx_plan_run(nx_ctx *ctx, const nx_kplan *p, nx_ptx_plan *cp,
                          const nx_tensor *const *inputs, nx_tensor **outputs)
{
    int nin = 0, ndev = 0;
    for (int i = 0; i < p->nslots; i++)
        if (p->slots[i].kind == NX_SLOT_INPUT) {
            nin++;
            ndev += nx_tensor_device(inputs[p->slots[i].arg]) == NX_DEVICE_CUDA;
        }
    run_state rs = {ctx, p, cp, inputs, nin > 0 && ndev == nin, false};
    return nx_plan_run(ctx, p, &cuda_hooks, &rs, inputs, outputs);
}
