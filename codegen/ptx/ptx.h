/* CUDA C -> NVRTC -> PTX or cubin -> module, for the CUDA backend. Not installed.
 *
 * NVRTC is opened at run time by runtime/cuda.c; compiling needs no GPU, loading does. */
#ifndef NX_CODEGEN_PTX_H
#define NX_CODEGEN_PTX_H

#include "runtime/cuda.h"

typedef enum nx_ptx_kind {
    NX_PTX_KIND_PTX,   /* virtual ISA text for compute_XX; the driver JITs it at load */
    NX_PTX_KIND_CUBIN, /* machine code for sm_XX; loads without a JIT */
} nx_ptx_kind;

typedef struct nx_ptx_target {
    int arch; /* 80 for compute_80 / sm_80; 0: the device is below what NVRTC supports */
    nx_ptx_kind kind;
} nx_ptx_target;

typedef struct nx_ptx_image {
    nx_ptx_target target;
    char *data;  /* PTX text with its terminating NUL, or the cubin's ELF bytes */
    size_t size; /* bytes in data, the NUL included */
    char *log;   /* NVRTC's log (warnings); "" when it said nothing */
    size_t log_size;
} nx_ptx_image;

/* NX_OK when NVRTC is loaded, else NX_ERR_BACKEND with the reason. */
NX_HIDDEN nx_status nx_ptx_available(nx_ctx *ctx);

/* The toolchain part of a kernel cache key, e.g. "nvrtc-13.0/driver-13000" ("nvrtc-none" when
 * NVRTC is missing, "driver-0" when the driver is). Returns buf. */
NX_HIDDEN const char *nx_ptx_toolchain_key(char *buf, size_t len);

/* What to compile for a device of capability cc_major.cc_minor: a cubin for sm_XX when NVRTC
 * lists that exact arch and NVRTC and the driver share a major version (the driver then runs
 * that NVRTC's cubins), else PTX for the highest compute_YY <= the device that NVRTC lists, which
 * the driver JITs. archs are NVRTC's, ascending; driver_version as cuDriverGetVersion gives it
 * (0: unknown). arch 0 in the result: NVRTC supports nothing this old. */
NX_HIDDEN nx_ptx_target nx_ptx_choose_target(int cc_major, int cc_minor, int nvrtc_major,
                                             const int *archs, int n_archs, int driver_version);

/* Compiles CUDA C source (kernels declared extern "C") for target. name labels the source in
 * the log ("elementwise.cu"); opts are extra NVRTC options. On a compile failure the status is
 * NX_ERR_BACKEND and the message holds the start of NVRTC's log. *out is freed with
 * nx_ptx_image_free. */
NX_HIDDEN nx_status nx_ptx_compile(nx_ctx *ctx, const char *src, const char *name,
                                   nx_ptx_target target, const char *const *opts, int n_opts,
                                   nx_ptx_image *out);
NX_HIDDEN void nx_ptx_image_free(nx_ctx *ctx, nx_ptx_image *img);

/* The whole path for the context's device: choose a target, compile, load the module. Unload it
 * with nx_rt_cuda_module_unload. */
NX_HIDDEN nx_status nx_ptx_load(nx_ctx *ctx, const char *src, const char *name,
                                const char *const *opts, int n_opts, nx_cu_module *out);

#endif /* NX_CODEGEN_PTX_H */
