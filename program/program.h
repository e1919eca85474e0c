/* The program layer (program/): from a verified graph to something that runs, on one backend.
 *
 * It sits above the backends and below the ops (docs/architecture.md, "Layers"): it owns the
 * compile driver (nx_graph_compile, nx_program_run: compile.c), the pass pipeline (pipeline.c),
 * the backend registry (registry.c), the one placement and fallback policy with its warn-once
 * helper (placement.c), and the op program cache (cache.c). Ops reach backends only through
 * it. Not installed. */
#ifndef NX_PROGRAM_PROGRAM_H
#define NX_PROGRAM_PROGRAM_H

#include "cache.h"
#include "codegen/kernel.h"

/* ---- the pass pipeline (pipeline.c) --------------------------------------------------------*/

/* verify -> fuse -> lower -> validate each kernel, with NITRIX_DUMP=fuse,kernel dumps.
 * NX_ERR_UNSUPPORTED when some node cannot be lowered (the message names it): the caller falls
 * back. */
NX_HIDDEN nx_status nx_pass_pipeline(nx_ctx *ctx, const nx_ir_store *s, int noutputs,
                                     const nx_node *outputs, nx_kplan **out);
/* The same for a backend: supports (NULL: none) is asked whether it takes a library kernel with
 * a prologue or an epilogue (codegen/prologue.c). */
NX_HIDDEN nx_status nx_pass_pipeline_for(nx_ctx *ctx, const nx_ir_store *s, int noutputs,
                                         const nx_node *outputs,
                                         bool (*supports)(const nx_kernel *), nx_kplan **out);

/* ---- the backend registry (registry.c) -----------------------------------------------------*/

/* The backend object of b (cpu, cuda), or NULL for ref (the reference interpreter, ir/interp.c)
 * and for what is not a backend. */
NX_HIDDEN const nx_backend_ops *nx_program_backend_ops(nx_backend b);
/* NX_OK when backend b can run here (ref and cpu always can); otherwise its status, with the
 * reason as the context's last error. */
NX_HIDDEN nx_status nx_program_backend_available(nx_ctx *ctx, nx_backend b);
/* NULL when backend b runs kernel k natively; otherwise why not. ref runs no kernels. */
NX_HIDDEN const char *nx_program_why_not(nx_backend b, const nx_kernel *k);
/* The hints backend b's object reports (codegen/kernel.h): ref's are the interpreter's (the CPU's
 * costs, no padded form), auto and values that are no backend get the CPU's. An op reads them to
 * pick among graphs that compute the same values; it never names a backend for that. */
NX_HIDDEN void nx_program_backend_hints(nx_backend b, nx_backend_hints *out);

/* ---- placement and fallback (placement.c) --------------------------------------------------*/

/* The backend a compile runs on: requested (the explicit argument; AUTO: not given) ->
 * NITRIX_BACKEND (nx_ctx_backend) -> auto. Auto is CUDA when the CUDA backend is available (a
 * GPU of capability >= 8.0 answers and NVRTC loads), else the CPU; under reproducible mode auto
 * is the CPU, and probing leaves no error message behind. CUDA asked for (argument or variable)
 * where it is not available: NX_ERR_BACKEND saying why. Other backends are returned as asked. */
NX_HIDDEN nx_status nx_program_resolve_backend(nx_ctx *ctx, nx_backend requested, nx_backend *out);

/* The one loud fallback (DESIGN.md §5): every place where something runs other than where it was
 * asked to calls this. Under NITRIX_STRICT_BACKEND it returns NX_ERR_BACKEND with strict_msg;
 * otherwise it logs warn_msg at NX_LOG_WARN the first time identity is seen in this process
 * (unless NITRIX_SILENCE_FALLBACK) and returns NX_OK. The check allocates nothing; when its
 * table is full the warning is repeated. */
NX_HIDDEN nx_status nx_program_fallback(nx_ctx *ctx, uint64_t identity, const char *strict_msg,
                                        const char *warn_msg);

/* The fallback for a kernel the backend's prepare refused after why_not accepted it (the CPU
 * JIT refusing IR that fails verification or that LLVM could not lower): step 4, the kernel
 * interpreter, with the same warn-once and strict mode. */
NX_HIDDEN nx_status nx_program_kernel_refused(nx_ctx *ctx, const nx_kernel *k, const char *why);

/* Where a program's plan runs, as the placement policy decided. */
typedef struct nx_placement {
    const nx_backend_ops *ops; /* the backend object that runs the plan; NULL: the interpreter */
    nx_kplan *plan;            /* owned; NULL on the interpreter */
    /* The plan was made for a device backend but runs on the host: device inputs are copied to
     * the host, and when every input was on the device the outputs go back there. */
    bool host_for_device;
} nx_placement;

/* Runs the pipeline for backend (cpu or cuda) over the program's nodes and places the plan:
 * a program no backend can lower goes to the interpreter; a CUDA plan with a kernel CUDA cannot
 * run goes whole to the CPU backend (one plan on one device keeps every intermediate there); a
 * CPU loop kernel the JIT cannot compile runs on its kernel interpreter. Each is a fallback
 * (nx_program_fallback). */
NX_HIDDEN nx_status nx_program_place(nx_ctx *ctx, nx_backend backend, const nx_ir_store *s,
                                     int noutputs, const nx_node *outputs, nx_placement *out);

/* ---- compiling (compile.c) ----------------------------------------------------------------*/

/* nx_graph_compile for a backend taken as resolved: no request, variable or availability check
 * (for tests that place a device plan with a fake driver and no NVRTC). */
NX_HIDDEN nx_status nx_program_compile_on(nx_graph *g, const nx_compile_opts *opts,
                                          nx_backend backend, nx_program **out);

/* ---- compiled programs of op entry points (cache.c) ----------------------------------------*/

/* Builds and compiles an op's program on a cache miss (user: the entry point's call record). */
typedef nx_status (*nx_program_build_fn)(nx_ctx *ctx, const void *user, nx_program **out);

/* The program stored under the key of b (b finished by the caller's fields) in the context's
 * cache (runtime/cache.h, a key -> object store), compiled through build on a miss and inserted:
 * concurrent callers of one key share one program. *out is borrowed from the cache (valid until
 * nx_ctx_free). what names the op in NX_ERR_NOMEM messages. b is freed, whatever the result. */
NX_HIDDEN nx_status nx_program_cached(nx_ctx *ctx, nx_rt_cache_blob *b, const char *what,
                                      nx_program_build_fn build, const void *user,
                                      nx_program **out);
/* Builds an op's graph into g, setting outputs[0 .. *n_outputs), at most
 * NX_PROGRAM_GRAPH_OUTPUTS of them. */
#define NX_PROGRAM_GRAPH_OUTPUTS 16
typedef nx_status (*nx_program_graph_build_fn)(nx_graph *g, void *user, nx_node *outputs,
                                               int *n_outputs);
/* nx_program_cached for the common case: on a miss, build makes a graph that is compiled for
 * backend (added to b's key with the reproducible mode, which backends fix when they compile). A
 * builder's failure message is already on the context (graphs mirror their errors there). */
NX_HIDDEN nx_status nx_program_graph_cached(nx_ctx *ctx, nx_rt_cache_blob *b, const char *what,
                                            nx_backend backend, nx_program_graph_build_fn build,
                                            void *user, nx_program **out);

#endif /* NX_PROGRAM_PROGRAM_H */
