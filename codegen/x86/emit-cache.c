/* Compiled kernels by key: the context's kernel cache in memory, then on disk (runtime/cache.h),
 * then the JIT. A second process with the same cache directory links the stored objects and
 * compiles nothing. */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "codegen/x86/emit.h"
#include "codegen/x86/math.h"
#include "codegen/x86/jit.h"
#include "runtime/cache.h"

typedef struct cached_fn {
    nx_ctx *ctx;
    nx_x86_loop_fn fn;
} cached_fn;

/* The JIT frees its kernels itself; the cache only owns this record. */
static void destroy_cached(void *user, void *obj)
{
    (void)user;
    cached_fn *c = obj;
    nx_rt_free(c->ctx, c, sizeof *c);
}

/* Kernel symbols are named by key, and a name can be linked once per JIT: one compile at a time
 * keeps two threads from linking the same kernel. */
static pthread_mutex_t compile_lock = PTHREAD_MUTEX_INITIALIZER;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

nx_status nx_x86_kernel_key(nx_ctx *ctx, const nx_kernel *k, bool reassoc,
                            const nx_x86_target *t, nx_rt_cache_blob *b, nx_rt_cache_key *key)
{
    uint8_t *ir = NULL;
    size_t len = 0;
    nx_rt_cache_blob_init(b, ctx); /* the caller frees b whatever the outcome */
    nx_status st = nx_kernel_serialize(k, &ir, &len);
    if (st != NX_OK)
        return st;
    nx_rt_cache_blob_str(b, "backend", "cpu");
    nx_rt_cache_blob_str(b, "emit", nx_x86_emit_version());
    nx_rt_cache_blob_str(b, "math", nx_x86_math_version()); /* inline math's code (math.c) */
    nx_rt_cache_blob_str(b, "passes", nx_x86_kernel_pipeline());
    nx_rt_cache_blob_bytes(b, "kernel-ir", ir, len);
    nx_rt_cache_blob_i64(b, "reassoc", reassoc);
    nx_rt_cache_blob_str(b, "triple", t->triple);
    nx_rt_cache_blob_str(b, "cpu", t->cpu);
    nx_rt_cache_blob_str(b, "features", t->features);
    nx_rt_cache_blob_str(b, "llvm", t->llvm_version);
    nx_rt_free(ctx, ir, len ? len : 1);
    return nx_rt_cache_blob_key(b, key);
}

static nx_status link_object(nx_x86_jit *jit, const void *obj, size_t len, const char *name,
                             nx_x86_loop_fn *fn)
{
    nx_x86_kernel *kern = NULL;
    nx_status st = nx_x86_kernel_load(jit, obj, len, &kern);
    void *addr = NULL;
    if (st == NX_OK)
        st = nx_x86_kernel_lookup(kern, name, &addr);
    if (st != NX_OK) {
        nx_x86_kernel_free(kern);
        return st;
    }
    memcpy(fn, &addr, sizeof *fn);
    return NX_OK;
}

const char *volatile nx_x86_test_ir_suffix;

/* text (tlen bytes allocated) with nx_x86_test_ir_suffix appended, in place of text. */
static nx_status add_test_suffix(nx_ctx *ctx, char **text, size_t *tlen)
{
    const char *suffix = nx_x86_test_ir_suffix;
    if (!suffix)
        return NX_OK;
    size_t n = strlen(*text), m = strlen(suffix);
    char *t = nx_rt_alloc(ctx, n + m + 1);
    if (!t)
        return nx_rt_nomem(ctx, "x86 jit: kernel text", n + m + 1);
    memcpy(t, *text, n);
    memcpy(t + n, suffix, m + 1);
    nx_rt_free(ctx, *text, *tlen);
    *text = t;
    *tlen = n + m + 1;
    return NX_OK;
}

static nx_status compile(nx_x86_jit *jit, const nx_kernel *k, bool reassoc, const char *name,
                         void **obj, size_t *objlen, nx_x86_loop_fn *fn)
{
    nx_ctx *ctx = k->ctx;
    char *text = NULL;
    size_t tlen = 0;
    nx_status st = nx_x86_emit_text(k, name, reassoc, &text, &tlen);
    if (st == NX_OK)
        st = add_test_suffix(ctx, &text, &tlen);
    if (st != NX_OK) {
        nx_rt_free(ctx, text, tlen);
        return st;
    }
    if (nx_rt_dump_requested(ctx, "llvm"))
        fprintf(stderr, "nitrix: dump llvm: %s\n%s\n", k->name, text);
    nx_x86_module *m = NULL;
    st = nx_x86_module_parse(jit, name, text, strlen(text), &m);
    nx_rt_free(ctx, text, tlen);
    if (st == NX_OK)
        st = nx_x86_module_optimize(m, NX_X86_OPT_KERNEL);
    if (st != NX_OK) {
        nx_x86_module_free(m);
        return st;
    }
    nx_x86_kernel *kern = NULL;
    st = nx_x86_module_compile(m, &kern, obj, objlen); /* consumes m */
    void *addr = NULL;
    if (st == NX_OK)
        st = nx_x86_kernel_lookup(kern, name, &addr);
    if (st != NX_OK) {
        nx_x86_kernel_free(kern);
        return st;
    }
    memcpy(fn, &addr, sizeof *fn);
    return NX_OK;
}

static nx_status get_locked(nx_ctx *ctx, const nx_kernel *k, bool reassoc, nx_x86_loop_fn *fn,
                            nx_x86_get_info *info)
{
    nx_x86_jit *jit = NULL;
    nx_rt_cache *cache = NULL;
    nx_status st = nx_x86_jit_get(ctx, &jit);
    if (st == NX_OK)
        st = nx_rt_cache_of(ctx, &cache);
    if (st != NX_OK)
        return st;
    nx_rt_cache_blob b;
    nx_rt_cache_key key;
    st = nx_x86_kernel_key(ctx, k, reassoc, nx_x86_jit_target(jit), &b, &key);
    if (st != NX_OK) {
        nx_rt_cache_blob_free(&b);
        return st;
    }
    char hex[33], name[40];
    nx_rt_cache_key_hex(&key, hex);
    snprintf(name, sizeof name, "nxk_%s", hex);
    cached_fn *c = nx_rt_cache_find(cache, &key);
    if (c) {
        info->memory_hit = true;
        *fn = c->fn;
        nx_rt_cache_blob_free(&b);
        return NX_OK;
    }
    void *obj = NULL;
    size_t len = 0;
    bool found = false;
    st = nx_rt_cache_load(cache, &key, &obj, &len, &found);
    if (st == NX_OK && found) {
        /* A stored object that does not link (another JIT's, damaged in a way the checksum
         * missed) is compiled again and replaced. Running out of memory while linking it is not
         * a damaged object: it is the caller's error, not a reason to compile. */
        nx_status lst = link_object(jit, obj, len, name, fn);
        if (lst == NX_OK)
            info->disk_hit = true;
        else if (lst == NX_ERR_NOMEM)
            st = lst;
        nx_rt_free(ctx, obj, len);
        obj = NULL;
    }
    if (st == NX_OK && !info->disk_hit) {
        st = compile(jit, k, reassoc, name, &obj, &len, fn);
        if (st == NX_OK)
            nx_rt_cache_store(cache, &key, obj, len);
        nx_rt_free(ctx, obj, len);
    }
    if (st == NX_OK) {
        cached_fn *rec = nx_rt_alloc(ctx, sizeof *rec);
        void *winner = NULL;
        if (!rec) {
            st = nx_rt_nomem(ctx, "x86 kernel cache", sizeof *rec);
        } else {
            rec->ctx = ctx;
            rec->fn = *fn;
            st = nx_rt_cache_insert(cache, &key, rec, destroy_cached, NULL, &winner);
            if (st != NX_OK)
                nx_rt_free(ctx, rec, sizeof *rec);
        }
    }
    nx_rt_cache_blob_free(&b);
    return st;
}

nx_status nx_x86_kernel_get(nx_ctx *ctx, const nx_kernel *k, bool reassoc, nx_x86_loop_fn *fn,
                            nx_x86_get_info *info)
{
    nx_x86_get_info local;
    if (!info)
        info = &local;
    memset(info, 0, sizeof *info);
    double t0 = now();
    pthread_mutex_lock(&compile_lock);
    nx_status st = get_locked(ctx, k, reassoc, fn, info);
    pthread_mutex_unlock(&compile_lock);
    info->seconds = now() - t0;
    return st;
}

/* Kernels the JIT cannot compile run on the kernel IR interpreter; whether that is allowed, and
 * the warning, are the placement policy's (program/placement.c), which asks this first. */
const char *nx_x86_why_not(const nx_kernel *k)
{
    if (k->has_prologue || k->has_epilogue)
        return "the kernel carries a prologue or an epilogue, which only the backend it was fused "
               "for runs";
    if (k->kind == NX_KERNEL_LOOP)
        return nx_x86_kernel_unsupported(k); /* "cpu: primitive X has no emitter", ... */
    if (k->lib_prim == NX_PRIM_REDUCE_CUSTOM) /* codegen/x86/emit-run.c: run_reference */
        return "reduce_custom's monoid is graph expressions, which the CPU backend does not "
               "compile; the reference routine runs it";
    return NULL;
}

/* The JIT is part of the library: the CPU backend runs wherever the library does. */
nx_status nx_x86_available(nx_ctx *ctx)
{
    (void)ctx;
    return NX_OK;
}

/* Reassociating float folds is allowed unless the context asks for reproducible results. */
static bool may_reassociate(nx_ctx *ctx)
{
    return !nx_ctx_reproducible(ctx);
}

nx_status nx_x86_plan_compile(nx_ctx *ctx, const nx_kplan *p, nx_x86_loop_fn *fns)
{
    return nx_x86_plan_compile_ex(ctx, p, NULL, fns);
}

nx_status nx_x86_plan_compile_ex(nx_ctx *ctx, const nx_kplan *p, nx_kernel_refused_fn refused,
                                 nx_x86_loop_fn *fns)
{
    for (int i = 0; i < p->nkernels; i++) {
        const nx_kernel *k = p->kernels[i];
        fns[i] = NULL;
        if (k->has_prologue || k->has_epilogue) /* fused for another backend: no host routine */
            return nx_rt_error(ctx, NX_ERR_INTERNAL,
                               "CPU backend: kernel %s carries a prologue or an epilogue, which "
                               "only the backend it was fused for runs",
                               k->name);
        if (k->kind != NX_KERNEL_LOOP)
            continue;
        if (!nx_x86_supports(k))
            continue; /* the kernel interpreter runs it (the placement policy has warned) */
        nx_status st = nx_x86_kernel_get(ctx, k, may_reassociate(ctx), &fns[i], NULL);
        if (st != NX_OK && st != NX_ERR_NOMEM && refused) {
            char why[NX_IR_MSG];
            snprintf(why, sizeof why, "%s", nx_ctx_last_error(ctx));
            fns[i] = NULL;
            st = refused(ctx, k, why);
        }
        if (st != NX_OK)
            return st;
    }
    return NX_OK;
}
