/* The CPU backend's JIT: LLVM IR -> optimised -> native code in this process, through LLVM's C API
 * (the subset shared by LLVM 14 and 19) and ORC LLJIT.
 *
 *     nx_x86_jit_get(ctx)            one JIT per context, made on first use, freed by nx_ctx_free
 *       nx_x86_module_new / _parse   a module in its own LLVM context (builder API or textual IR)
 *       nx_x86_module_optimize       verify, then default<O3> with the host target machine
 *       nx_x86_module_compile        verify, codegen to an object, link it in -> nx_x86_kernel
 *       nx_x86_module_emit_object    the object bytes only (for the on-disk kernel cache)
 *     nx_x86_kernel_load             object bytes -> nx_x86_kernel (a cache hit)
 *     nx_x86_kernel_lookup           symbol -> function pointer
 *     nx_x86_kernel_free             the kernel's code and data leave the process
 *
 * Typical use (errors elided):
 *
 *     nx_x86_jit *jit;      nx_x86_jit_get(ctx, &jit);
 *     nx_x86_module *m;     nx_x86_module_new(jit, "k_3f2a...", &m);
 *     ... build @k_3f2a... with the builder API in nx_x86_module_context(m) ...
 *     nx_x86_module_optimize(m, NX_X86_OPT_O3);
 *     nx_x86_kernel *k;     void *obj; size_t len;
 *     nx_x86_module_compile(m, &k, &obj, &len);        (m is consumed; obj goes to the cache)
 *     void (*fn)(float *, int64_t);
 *     nx_x86_kernel_lookup(k, "k_3f2a...", (void **)&fn);
 *     ... later, another process: nx_x86_kernel_load(jit, obj, len, &k) and look it up ...
 *     nx_x86_kernel_free(k);
 *
 * Every path goes through an object buffer: the code that runs and the bytes a cache stores are
 * the same. Each module has its own LLVMContext, so threads build, optimise and compile modules
 * in parallel; target machines come from a pool and the JIT's symbol table is guarded by a mutex.
 *
 * Safety: invalid IR is rejected by the verifier before any pass or codegen sees it (LLVM aborts
 * on it otherwise), LLVM diagnostics are captured per module rather than ending the process, and
 * a fatal-error handler logs LLVM's reason to stderr. LLVM's fatal paths (report_fatal_error from
 * a codegen bug, an operation LLVM cannot lower such as a 256-bit division in LLVM 14, out of
 * memory inside LLVM) cannot be recovered: after the handler LLVM calls exit(1) or abort().
 * The handler is process-wide (LLVM has one slot): it replaces one the host program installed.
 * Memory that LLVM allocates for itself does not go through the context allocator.
 *
 * Kernel symbols share one namespace per JIT (ORC's main JITDylib): a name defined by a live
 * kernel cannot be defined again until that kernel is freed (NX_ERR_BACKEND "duplicate"). Name
 * kernels by their cache key. Helper functions should have internal linkage. */
#ifndef NX_CODEGEN_X86_JIT_H
#define NX_CODEGEN_X86_JIT_H

#include <llvm-c/Core.h>

#include "runtime/internal.h"

typedef struct nx_x86_jit nx_x86_jit;
typedef struct nx_x86_module nx_x86_module;
typedef struct nx_x86_kernel nx_x86_kernel;

/* The host as the JIT targets it; strings are owned by the JIT. For the kernel cache key. */
typedef struct nx_x86_target {
    const char *triple;       /* "x86_64-pc-linux-gnu" */
    const char *cpu;          /* LLVM's name for the host CPU: "znver3", "skylake-avx512" */
    const char *features;     /* LLVM's feature string: "+sse2,+avx2,-avx512f,..." */
    const char *data_layout;  /* of the target machine */
    const char *llvm_version; /* "14.0.6" */
    int vector_bits;          /* widest SIMD register the features allow: 128, 256 or 512 */
} nx_x86_target;

/* The context's JIT (borrowed; freed by nx_ctx_free, with any kernel still live). Created on
 * first call: NX_ERR_BACKEND when LLVM has no target for the host or the LLJIT cannot be built,
 * NX_ERR_NOMEM. Thread-safe. */
NX_HIDDEN nx_status nx_x86_jit_get(nx_ctx *ctx, nx_x86_jit **out);
NX_HIDDEN const nx_x86_target *nx_x86_jit_target(const nx_x86_jit *jit);
NX_HIDDEN nx_ctx *nx_x86_jit_ctx(const nx_x86_jit *jit);

/* A new empty module with the JIT's triple and data layout, in a new LLVMContext. Freed with
 * nx_x86_module_free. */
NX_HIDDEN nx_status nx_x86_module_new(nx_x86_jit *jit, const char *name, nx_x86_module **out);
/* A module from textual IR (typed-pointer syntax, e.g. `float*`, which LLVM 14 and 19 read). The
 * triple and data layout are set to the JIT's. Functions of the math library (math.h) that the
 * text declares, e.g. `declare float @nx.math.exp.f32(float)`, are defined. A parse error or
 * invalid IR is NX_ERR_INTERNAL with LLVM's message. */
NX_HIDDEN nx_status nx_x86_module_parse(nx_x86_jit *jit, const char *name, const char *text,
                                        size_t len, nx_x86_module **out);
NX_HIDDEN void nx_x86_module_free(nx_x86_module *m);
/* The module and its context, borrowed, for the builder API. */
NX_HIDDEN LLVMModuleRef nx_x86_module_llvm(const nx_x86_module *m);
NX_HIDDEN LLVMContextRef nx_x86_module_context(const nx_x86_module *m);

/* Marks the loop whose back edge is the branch `latch` with llvm.loop.vectorize.enable. Besides
 * asking for vectorisation, this lets LLVM reorder the loop's floating-point reductions without
 * `reassoc` flags, which LLVM 14's C API cannot set (the other way is `fadd reassoc` in textual
 * IR). Use it only where a reassociated reduction is acceptable: the sum's rounding then depends
 * on the vector width. */
NX_HIDDEN void nx_x86_loop_allow_reorder(LLVMValueRef latch);

/* LLVMVerifyModule: NX_ERR_INTERNAL with the verifier's message when the IR is invalid; then
 * nx_x86_module_check_lowerable. Every path to LLVM's optimiser and code generator (parse,
 * optimize, emit, compile) runs it first. */
NX_HIDDEN nx_status nx_x86_module_verify(nx_x86_module *m);
/* NX_ERR_BACKEND, naming the construct and the function, when valid IR holds something LLVM's x86
 * code generator has no lowering for and would end the process on (report_fatal_error): integer
 * division, remainder, float conversion or atomics wider than 128 bits, bfloat, scalable vectors,
 * x86_amx, intrinsics of other targets or beyond SSE2, matrix intrinsics, a GC strategy (jit.c
 * lists the rules and how they were found). */
NX_HIDDEN nx_status nx_x86_module_check_lowerable(nx_x86_module *m);

typedef enum nx_x86_opt {
    NX_X86_OPT_NONE,    /* no IR passes: codegen only (scalar code, for tests and timing) */
    NX_X86_OPT_O3,      /* default<O3> with the host TM, loop unrolling and interleaving off */
    NX_X86_OPT_O3_FULL, /* default<O3> as LLVM tunes it, unrolling and interleaving on: about
                         * twice the compile time, faster in-cache loops on some hosts */
    NX_X86_OPT_KERNEL,  /* the passes kernel IR's loops need (jit.c says which and why): the
                         * same code as O3 for emitted kernels at about half its compile time */
} nx_x86_opt;

/* The pass list of NX_X86_OPT_KERNEL (part of kernel cache keys). */
NX_HIDDEN const char *nx_x86_kernel_pipeline(void);

/* A function attribute: after the pipeline, the function's 64-byte vector stores become aligned
 * non-temporal stores and it ends with sfence. The emitter sets it only where every such store is
 * 64-byte aligned (codegen/x86/emit.c, stream_ok). */
#define NX_X86_STREAM_ATTR "nx-stream"

/* Verifies, runs the pipeline, verifies again. NX_ERR_INTERNAL on invalid IR or a pass error.
 * On AVX-512 hosts, functions without a "prefer-vector-width" attribute get "512" (LLVM's default
 * tuning for some of them is 256). Then NX_X86_STREAM_ATTR functions get streaming stores. */
NX_HIDDEN nx_status nx_x86_module_optimize(nx_x86_module *m, nx_x86_opt opt);
/* The module as text (for dumps and tests); free with nx_rt_free(ctx, s, strlen(s) + 1). */
NX_HIDDEN nx_status nx_x86_module_print(nx_x86_module *m, char **out);

/* Verifies and emits a relocatable object for the host into a buffer from the context allocator
 * (free with nx_rt_free(ctx, *buf, *len)). The module stays the caller's; codegen lowers parts of
 * its IR in place (still valid IR), so emit after the last change. Deterministic: the same IR
 * on the same target gives the same bytes. */
NX_HIDDEN nx_status nx_x86_module_emit_object(nx_x86_module *m, void **buf, size_t *len);
/* Verifies, emits and links the module as a new kernel with its own resource tracker. When buf is
 * not NULL the object bytes are returned too, as by nx_x86_module_emit_object. The module is
 * consumed (freed) in every case. */
NX_HIDDEN nx_status nx_x86_module_compile(nx_x86_module *m, nx_x86_kernel **out, void **buf,
                                          size_t *len);

/* Links object bytes (from nx_x86_module_emit_object of a JIT with the same target and LLVM) as a
 * new kernel. The bytes are copied. A malformed object or a duplicate symbol is NX_ERR_BACKEND;
 * every truncation of an object is refused (tested), but flipped bits in code or relocations can
 * load and then run wrong: check a checksum before loading bytes from disk. */
NX_HIDDEN nx_status nx_x86_kernel_load(nx_x86_jit *jit, const void *buf, size_t len,
                                       nx_x86_kernel **out);
/* The address of a function or global the kernel defines (resolving and relocating it on the
 * first lookup). NX_ERR_BACKEND when the symbol is not defined. Names are global to the JIT (see
 * above), so this finds a live symbol of another kernel too. */
NX_HIDDEN nx_status nx_x86_kernel_lookup(nx_x86_kernel *k, const char *symbol, void **addr);
/* Removes the kernel's code and data from the process; pointers looked up in it become invalid.
 * NULL is ignored. */
NX_HIDDEN void nx_x86_kernel_free(nx_x86_kernel *k);

/* Where one kernel's compile time went (the per-kernel latency `nitrix bench` reports). Loaded
 * kernels have no opt or codegen time. lookup_seconds includes linking, done on first lookup. */
typedef struct nx_x86_kernel_info {
    double opt_seconds;     /* nx_x86_module_optimize on its module */
    double codegen_seconds; /* object emission */
    double lookup_seconds;  /* all lookups so far (the first links the object) */
    size_t object_bytes;
} nx_x86_kernel_info;
NX_HIDDEN nx_x86_kernel_info nx_x86_kernel_info_get(const nx_x86_kernel *k);

/* Statistics since the JIT was created, for tests and `nitrix bench`. */
typedef struct nx_x86_jit_stats {
    int64_t kernels_live;   /* kernels added and not yet freed */
    int64_t kernels_total;  /* compiled or loaded */
    double opt_seconds;     /* in nx_x86_module_optimize */
    double codegen_seconds; /* in object emission */
} nx_x86_jit_stats;
NX_HIDDEN void nx_x86_jit_stats_get(nx_x86_jit *jit, nx_x86_jit_stats *out);

#endif /* NX_CODEGEN_X86_JIT_H */
