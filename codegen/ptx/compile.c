/* NVRTC compilation: CUDA C source -> PTX or cubin (see ptx.h). */
#include <stdio.h>
#include <string.h>

#include "codegen/ptx/ptx.h"

nx_status nx_ptx_available(nx_ctx *ctx)
{
    const nx_rt_nvrtc *n = nx_rt_nvrtc_get();
    if (n->ok)
        return NX_OK;
    return nx_rt_error(ctx, NX_ERR_BACKEND, "CUDA codegen unavailable: %s", n->status);
}

const char *nx_ptx_toolchain_key(char *buf, size_t len)
{
    const nx_rt_nvrtc *n = nx_rt_nvrtc_get();
    const nx_rt_cuda_driver *d = nx_rt_cuda_driver_get();
    if (n->ok)
        snprintf(buf, len, "nvrtc-%d.%d/driver-%d", n->major, n->minor, d->version);
    else
        snprintf(buf, len, "nvrtc-none/driver-%d", d->version);
    return buf;
}

nx_ptx_target nx_ptx_choose_target(int cc_major, int cc_minor, int nvrtc_major, const int *archs,
                                   int n_archs, int driver_version)
{
    int cc = cc_major * 10 + cc_minor;
    nx_ptx_target t = {0, NX_PTX_KIND_PTX};
    for (int i = 0; i < n_archs; i++) {
        if (archs[i] <= cc && archs[i] > t.arch)
            t.arch = archs[i];
    }
    /* Within one major version the driver runs cubins from any NVRTC of that version; across
     * versions only PTX older than the driver is safe, and the driver JITs it. */
    if (t.arch == cc && driver_version > 0 && driver_version / 1000 == nvrtc_major)
        t.kind = NX_PTX_KIND_CUBIN;
    return t;
}

/* The log with line breaks folded, trimmed to fit an error message. */
static void condense(char *dst, size_t len, const char *log)
{
    size_t j = 0;
    for (size_t i = 0; log[i] && j + 4 < len; i++) {
        char c = log[i];
        if (c == '\n') {
            if (log[i + 1] == '\0')
                break;
            if (j + 3 + 4 >= len)
                break;
            memcpy(dst + j, " | ", 3);
            j += 3;
        } else if (c != '\r') {
            dst[j++] = c;
        }
    }
    dst[j] = '\0';
}

static nx_status nvrtc_fail(nx_ctx *ctx, const nx_rt_nvrtc *n, nx_nvrtc_result r, const char *what,
                            const char *name)
{
    return nx_rt_error(ctx, NX_ERR_BACKEND, "NVRTC: %s for '%s' failed: %s (%d)", what, name,
                       n->api.nvrtcGetErrorString(r), (int)r);
}

/* Reads the program log into img->log (from the context allocator). */
static nx_status read_log(nx_ctx *ctx, const nx_rt_nvrtc *n, nx_nvrtc_program p, const char *name,
                          nx_ptx_image *img)
{
    size_t size = 0;
    nx_nvrtc_result r = n->api.nvrtcGetProgramLogSize(p, &size);
    if (r != NX_NVRTC_SUCCESS)
        return nvrtc_fail(ctx, n, r, "nvrtcGetProgramLogSize", name);
    if (size == 0)
        size = 1;
    img->log = nx_rt_alloc(ctx, size);
    if (!img->log)
        return nx_rt_nomem(ctx, "NVRTC log", size);
    img->log_size = size;
    img->log[0] = '\0';
    r = n->api.nvrtcGetProgramLog(p, img->log);
    if (r != NX_NVRTC_SUCCESS)
        return nvrtc_fail(ctx, n, r, "nvrtcGetProgramLog", name);
    img->log[size - 1] = '\0';
    return NX_OK;
}

static nx_status read_code(nx_ctx *ctx, const nx_rt_nvrtc *n, nx_nvrtc_program p, const char *name,
                           nx_ptx_image *img)
{
    bool cubin = img->target.kind == NX_PTX_KIND_CUBIN;
    size_t size = 0;
    nx_nvrtc_result r =
        cubin ? n->api.nvrtcGetCUBINSize(p, &size) : n->api.nvrtcGetPTXSize(p, &size);
    if (r != NX_NVRTC_SUCCESS)
        return nvrtc_fail(ctx, n, r, cubin ? "nvrtcGetCUBINSize" : "nvrtcGetPTXSize", name);
    if (size == 0)
        return nx_rt_error(ctx, NX_ERR_BACKEND, "NVRTC: empty %s for '%s'", cubin ? "cubin" : "PTX",
                           name);
    img->data = nx_rt_alloc(ctx, size);
    if (!img->data)
        return nx_rt_nomem(ctx, cubin ? "NVRTC cubin" : "NVRTC PTX", size);
    img->size = size;
    r = cubin ? n->api.nvrtcGetCUBIN(p, img->data) : n->api.nvrtcGetPTX(p, img->data);
    if (r != NX_NVRTC_SUCCESS)
        return nvrtc_fail(ctx, n, r, cubin ? "nvrtcGetCUBIN" : "nvrtcGetPTX", name);
    if (!cubin)
        img->data[size - 1] = '\0';
    return NX_OK;
}

#define MAX_OPTS 32

static nx_status check_args(nx_ctx *ctx, const char *src, const char *name, nx_ptx_target target,
                            const char *const *opts, int n_opts, nx_ptx_image *out)
{
    if (!src || !name || !out || n_opts < 0 || n_opts > MAX_OPTS - 1 || (n_opts > 0 && !opts))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_ptx_compile: src, name and out must be non-NULL and opts at most "
                           "%d",
                           MAX_OPTS - 1);
    if (target.arch < 10 || target.arch > 999)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_ptx_compile: arch %d is not a compute capability such as 80 or 90",
                           target.arch);
    return NX_OK;
}

static nx_status compile_program(nx_ctx *ctx, const nx_rt_nvrtc *n, nx_nvrtc_program p,
                                 const char *name, const char *const *opts, int n_opts,
                                 nx_ptx_image *out)
{
    char arch[16], arch_opt[48];
    snprintf(arch, sizeof arch, "%s_%d", out->target.kind == NX_PTX_KIND_CUBIN ? "sm" : "compute",
             out->target.arch);
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", arch);
    const char *all[MAX_OPTS];
    all[0] = arch_opt;
    for (int i = 0; i < n_opts; i++)
        all[i + 1] = opts[i];
    nx_nvrtc_result r = n->api.nvrtcCompileProgram(p, n_opts + 1, all);
    nx_status st = read_log(ctx, n, p, name, out);
    if (st != NX_OK)
        return st;
    if (r != NX_NVRTC_SUCCESS) {
        char log[360];
        condense(log, sizeof log, out->log);
        return nx_rt_error(ctx, NX_ERR_BACKEND,
                           "NVRTC %d.%d: compiling '%s' for %s failed (%s): %s", n->major, n->minor,
                           name, arch, n->api.nvrtcGetErrorString(r), log[0] ? log : "(no log)");
    }
    return read_code(ctx, n, p, name, out);
}

nx_status nx_ptx_compile(nx_ctx *ctx, const char *src, const char *name, nx_ptx_target target,
                         const char *const *opts, int n_opts, nx_ptx_image *out)
{
    if (out)
        memset(out, 0, sizeof *out);
    nx_status st = check_args(ctx, src, name, target, opts, n_opts, out);
    if (st != NX_OK)
        return st;
    st = nx_ptx_available(ctx);
    if (st != NX_OK)
        return st;
    const nx_rt_nvrtc *n = nx_rt_nvrtc_get();
    out->target = target;
    nx_nvrtc_program p = NULL;
    nx_nvrtc_result r = n->api.nvrtcCreateProgram(&p, src, name, 0, NULL, NULL);
    if (r != NX_NVRTC_SUCCESS)
        return nvrtc_fail(ctx, n, r, "nvrtcCreateProgram", name);
    st = compile_program(ctx, n, p, name, opts, n_opts, out);
    n->api.nvrtcDestroyProgram(&p);
    if (st != NX_OK)
        nx_ptx_image_free(ctx, out);
    return st;
}

void nx_ptx_image_free(nx_ctx *ctx, nx_ptx_image *img)
{
    if (!img)
        return;
    nx_rt_free(ctx, img->data, img->size);
    nx_rt_free(ctx, img->log, img->log_size);
    memset(img, 0, sizeof *img);
}

nx_status nx_ptx_load(nx_ctx *ctx, const char *src, const char *name, const char *const *opts,
                      int n_opts, nx_cu_module *out)
{
    *out = NULL;
    nx_rt_cuda *cu;
    nx_status st = nx_rt_cuda_get(ctx, &cu);
    if (st != NX_OK)
        return st;
    st = nx_ptx_available(ctx);
    if (st != NX_OK)
        return st;
    const nx_rt_nvrtc *n = nx_rt_nvrtc_get();
    const nx_gpu_info *g = nx_rt_cuda_device(cu);
    nx_ptx_target t = nx_ptx_choose_target(g->cc_major, g->cc_minor, n->major, n->archs, n->n_archs,
                                           nx_rt_cuda_driver_get()->version);
    if (t.arch == 0)
        return nx_rt_error(ctx, NX_ERR_BACKEND,
                           "NVRTC %d.%d supports no architecture at or below the device's %d.%d",
                           n->major, n->minor, g->cc_major, g->cc_minor);
    nx_ptx_image img;
    st = nx_ptx_compile(ctx, src, name, t, opts, n_opts, &img);
    if (st != NX_OK)
        return st;
    st = nx_rt_cuda_module_load(ctx, img.data, out);
    nx_ptx_image_free(ctx, &img);
    return st;
}
