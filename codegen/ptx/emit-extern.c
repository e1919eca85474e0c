/* Extern kernels on the device (docs/cuda.md "Externs on the device").
 *
 * An extern node made by nx_extern_device carries a second attribute, an nx_extern_device_def
 * whose source callback writes the CUDA C of one kernel for the node's input dtypes and shapes.
 * That kernel has the library kernels' calling convention (a pointer per buffer in buffer order,
 * inputs const, then the point count) and launch (NX_PTX_POINTS over the points the callback
 * names), so the runner treats it as any other library kernel: device inputs are read in place
 * and a plan whose externs all have device code runs whole on the device. Plain nx_extern nodes
 * name a host routine only and stay unsupported here (the backend falls back loudly).
 *
 * The callback's text is user code: it is asked twice (length, then text) and must answer the
 * same both times; a second answer that differs becomes an #error line, so NVRTC reports it as a
 * compile failure (NX_ERR_BACKEND with the log) rather than the library running half a kernel.
 * emit-run.c keys the compiled kernel on this text, not on the definitions' addresses. */
#include "codegen/ptx/emit-lib.h"

#define EXTERN_MAX_IN NX_KERNEL_MAX_BUFFERS

/* The device definition of an extern kernel, or NULL. lib_ptr is the node's def (lowering sets
 * it for externs only), attrs[1] the device definition when the node has one. */
static const nx_extern_device_def *device_of(const nx_kernel *k)
{
    if (k->lib_prim != NX_PRIM_EXTERN || !k->lib_ptr || k->nattrs != 2 || !k->attrs[1])
        return NULL;
    return (const nx_extern_device_def *)(intptr_t)k->attrs[1];
}

typedef struct extern_args {
    int n_in;
    nx_dtype dtypes[EXTERN_MAX_IN];
    int ndims[EXTERN_MAX_IN];
    const int64_t *shapes[EXTERN_MAX_IN];
} extern_args;

static void args_of(const nx_kernel *k, extern_args *a)
{
    a->n_in = k->nbufs - 1;
    for (int i = 0; i < a->n_in; i++) {
        a->dtypes[i] = (nx_dtype)k->bufs[i].dtype;
        a->ndims[i] = k->bufs[i].ndim;
        a->shapes[i] = k->bufs[i].shape;
    }
}

/* The callback's answer for k written into buf (cap bytes; NULL with 0 asks for the length). */
static int ask(const nx_kernel *k, const char *name, char *buf, size_t cap, int64_t *points)
{
    const nx_extern_device_def *dev = device_of(k);
    extern_args a;
    args_of(k, &a);
    *points = -1;
    return dev->source(dev->user, a.n_in, a.dtypes, a.ndims, a.shapes, name, buf, cap, points);
}

const char *nx_ptx_extern_unsupported(const nx_kernel *k)
{
    if (!device_of(k))
        return "extern runs a host routine (user C code) and has no device implementation "
               "(made with nx_extern, not nx_extern_device)";
    if (k->nbufs < 1 || k->bufs[k->nbufs - 1].role != NX_KBUF_OUT)
        return "an extern kernel without an output buffer";
    int64_t points;
    int len = ask(k, "nx_kernel", NULL, 0, &points);
    if (len < 0)
        return "the extern's device source callback declined these inputs (returned -1)";
    if (points < 0)
        return "the extern's device source callback set no point count (expected *points >= 0)";
    return NULL;
}

void nx_ptx_extern_emit(nx_rt_text *t, const nx_kernel *k, const char *name,
                        nx_ptx_launch *launch)
{
    const nx_extern_def *def = k->lib_ptr;
    int64_t points;
    int len = ask(k, name, NULL, 0, &points);
    size_t cap = (size_t)(len < 0 ? 0 : len) + 1;
    char *buf = nx_rt_alloc(k->ctx, cap);
    if (!buf) {
        t->failed = true; /* reported by the caller as NX_ERR_NOMEM */
        return;
    }
    int64_t again;
    int got = ask(k, name, buf, cap, &again);
    nx_rt_text_put(t, "// extern %s: device source from its nx_extern_device_def\n", def->name);
    if (len < 0 || got != len || again != points)
        nx_rt_text_put(t,
                       "#error \"extern %s: the device source callback answered differently "
                       "when asked again (length %d then %d, points %lld then %lld); it must be "
                       "a pure function\"\n",
                       def->name, len, got, (long long)points, (long long)again);
    else
        nx_rt_text_put(t, "%s\n", buf);
    nx_rt_free(k->ctx, buf, cap);
    launch->points = points;
}
