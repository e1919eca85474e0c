/* The CPU backend's JIT (see jit.h): LLVM C API + ORC LLJIT, object buffers all the way. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <llvm-c/Analysis.h>
#include <llvm/Config/llvm-config.h> /* LLVM_VERSION_MAJOR (a C header) */
#include <llvm-c/DebugInfo.h>
#include <llvm-c/Error.h>
#include <llvm-c/ErrorHandling.h>
#include <llvm-c/IRReader.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <llvm/Config/llvm-config.h>

#include "codegen/x86/jit.h"
#include "codegen/x86/math.h"

/* Target machines are not safe to share between threads that optimise or emit at the same time
 * (the subtarget cache is filled lazily), so each user takes one from a pool. */
#define TM_POOL 8
#define DIAG_LEN 512

struct nx_x86_jit {
    nx_ctx *ctx;
    pthread_mutex_t lock; /* the LLJIT's symbol table, the pool, the kernel list, the stats */
    LLVMOrcLLJITRef lljit;
    LLVMTargetRef target;
    nx_x86_target info; /* strings below are from the context allocator */
    char *triple, *cpu, *features, *data_layout;
    LLVMTargetMachineRef pool[TM_POOL];
    int pool_len;
    nx_x86_kernel *kernels; /* live kernels, freed with the JIT if the caller did not */
    nx_x86_jit_stats stats;
};

struct nx_x86_module {
    nx_x86_jit *jit;
    LLVMContextRef llctx;
    LLVMModuleRef mod;
    bool diag_error;     /* LLVM reported an error diagnostic in this context */
    char diag[DIAG_LEN]; /* its text */
    double opt_seconds, codegen_seconds;
};

struct nx_x86_kernel {
    nx_x86_jit *jit;
    LLVMOrcResourceTrackerRef rt;
    nx_x86_kernel_info info;
    nx_x86_kernel *prev, *next;
};

/* ---------------------------------------------------------------------------------------------
 * Process-wide LLVM set-up
 * -------------------------------------------------------------------------------------------*/

static pthread_once_t llvm_once = PTHREAD_ONCE_INIT;
static bool llvm_native_ok;

/* LLVM calls this, then exit(1) or abort(): there is no way back into the library from here.
 * Logging is all that can be done, so the reason is not lost. */
static void fatal_handler(const char *reason)
{
    fprintf(stderr, "nitrix: error: LLVM fatal error (unrecoverable, LLVM ends the process): %s\n",
            reason);
}

static void llvm_init(void)
{
    llvm_native_ok = !LLVMInitializeNativeTarget() && !LLVMInitializeNativeAsmPrinter() &&
                     !LLVMInitializeNativeAsmParser();
    LLVMInstallFatalErrorHandler(fatal_handler);
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Turns an LLVMErrorRef into a status with its message (consuming the error). */
static nx_status llvm_error(nx_ctx *ctx, nx_status st, const char *what, LLVMErrorRef err)
{
    char *msg = LLVMGetErrorMessage(err);
    nx_rt_error(ctx, st, "x86 jit: %s: %s", what, msg ? msg : "(no message)");
    LLVMDisposeErrorMessage(msg);
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * Target machines
 * -------------------------------------------------------------------------------------------*/

static LLVMTargetMachineRef tm_create(const nx_x86_jit *jit)
{
    return LLVMCreateTargetMachine(jit->target, jit->triple, jit->cpu, jit->features,
                                   LLVMCodeGenLevelAggressive, LLVMRelocDefault,
                                   LLVMCodeModelJITDefault);
}

static LLVMTargetMachineRef tm_take(nx_x86_jit *jit)
{
    LLVMTargetMachineRef tm = NULL;
    pthread_mutex_lock(&jit->lock);
    if (jit->pool_len > 0)
        tm = jit->pool[--jit->pool_len];
    pthread_mutex_unlock(&jit->lock);
    return tm ? tm : tm_create(jit);
}

static void tm_give(nx_x86_jit *jit, LLVMTargetMachineRef tm)
{
    pthread_mutex_lock(&jit->lock);
    if (jit->pool_len < TM_POOL) {
        jit->pool[jit->pool_len++] = tm;
        tm = NULL;
    }
    pthread_mutex_unlock(&jit->lock);
    if (tm)
        LLVMDisposeTargetMachine(tm);
}

/* ---------------------------------------------------------------------------------------------
 * The JIT
 * -------------------------------------------------------------------------------------------*/

static void str_free(nx_ctx *ctx, char *s)
{
    if (s)
        nx_rt_free(ctx, s, strlen(s) + 1);
}

/* A context-allocated copy of an LLVM message, which is disposed in every case. */
static char *take_message(nx_ctx *ctx, char *msg)
{
    char *copy = msg ? nx_rt_strdup(ctx, msg) : NULL;
    LLVMDisposeMessage(msg);
    return copy;
}

static int vector_bits_of(const char *features)
{
    if (strstr(features, "+avx512f"))
        return 512;
    if (strstr(features, "+avx,") || strstr(features, "+avx2"))
        return 256;
    return 128;
}

static void jit_destroy(nx_ctx *ctx, void *obj)
{
    nx_x86_jit *jit = obj;
    while (jit->kernels) {
        nx_x86_kernel *k = jit->kernels;
        jit->kernels = k->next;
        LLVMOrcReleaseResourceTracker(k->rt);
        nx_rt_free(ctx, k, sizeof *k);
    }
    if (jit->lljit) {
        LLVMErrorRef err = LLVMOrcDisposeLLJIT(jit->lljit);
        if (err) {
            char *msg = LLVMGetErrorMessage(err);
            nx_ctx_log(ctx, NX_LOG_WARN, "x86 jit: disposing the LLJIT: %s", msg);
            LLVMDisposeErrorMessage(msg);
        }
    }
    for (int i = 0; i < jit->pool_len; i++)
        LLVMDisposeTargetMachine(jit->pool[i]);
    str_free(ctx, jit->triple);
    str_free(ctx, jit->cpu);
    str_free(ctx, jit->features);
    str_free(ctx, jit->data_layout);
    pthread_mutex_destroy(&jit->lock);
    nx_rt_free(ctx, jit, sizeof *jit);
}

static void session_error(void *user, LLVMErrorRef err)
{
    char *msg = LLVMGetErrorMessage(err);
    nx_ctx_log(user, NX_LOG_ERROR, "x86 jit: ORC session error: %s", msg);
    LLVMDisposeErrorMessage(msg);
}

static nx_status host_describe(nx_x86_jit *jit)
{
    nx_ctx *ctx = jit->ctx;
    char *err = NULL;
    jit->triple = take_message(ctx, LLVMGetDefaultTargetTriple());
    jit->cpu = take_message(ctx, LLVMGetHostCPUName());
    jit->features = take_message(ctx, LLVMGetHostCPUFeatures());
    if (!jit->triple || !jit->cpu || !jit->features)
        return nx_rt_nomem(ctx, "x86 jit: host description", 256);
    if (LLVMGetTargetFromTriple(jit->triple, &jit->target, &err)) {
        nx_status st = nx_rt_error(ctx, NX_ERR_BACKEND, "x86 jit: LLVM has no target for '%s': %s",
                                   jit->triple, err ? err : "");
        LLVMDisposeMessage(err);
        return st;
    }
    LLVMTargetMachineRef tm = tm_create(jit);
    if (!tm)
        return nx_rt_error(ctx, NX_ERR_BACKEND, "x86 jit: no target machine for %s/%s", jit->triple,
                           jit->cpu);
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
    jit->data_layout = take_message(ctx, LLVMCopyStringRepOfTargetData(td));
    LLVMDisposeTargetData(td);
    jit->pool[jit->pool_len++] = tm;
    if (!jit->data_layout)
        return nx_rt_nomem(ctx, "x86 jit: data layout", 128);
    jit->info = (nx_x86_target){jit->triple,         jit->cpu,
                                jit->features,       jit->data_layout,
                                LLVM_VERSION_STRING, vector_bits_of(jit->features)};
    return NX_OK;
}

static nx_status lljit_create(nx_x86_jit *jit)
{
    LLVMErrorRef err = LLVMOrcCreateLLJIT(&jit->lljit, NULL);
    if (err) {
        jit->lljit = NULL;
        return llvm_error(jit->ctx, NX_ERR_BACKEND, "creating the LLJIT", err);
    }
    LLVMOrcExecutionSessionSetErrorReporter(LLVMOrcLLJITGetExecutionSession(jit->lljit),
                                            session_error, jit->ctx);
    /* Optimised loops may call memset/memcpy: resolve them from the process. */
    LLVMOrcDefinitionGeneratorRef gen = NULL;
    err = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
        &gen, LLVMOrcLLJITGetGlobalPrefix(jit->lljit), NULL, NULL);
    if (err)
        return llvm_error(jit->ctx, NX_ERR_BACKEND, "process symbol generator", err);
    LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(jit->lljit), gen);
    return NX_OK;
}

static nx_status jit_create(nx_ctx *ctx, nx_x86_jit **out)
{
    pthread_once(&llvm_once, llvm_init);
    if (!llvm_native_ok)
        return nx_rt_error(ctx, NX_ERR_BACKEND,
                           "x86 jit: LLVM's native target could not be initialised");
    nx_x86_jit *jit = nx_rt_calloc(ctx, 1, sizeof *jit);
    if (!jit)
        return nx_rt_nomem(ctx, "x86 jit", sizeof *jit);
    jit->ctx = ctx;
    if (pthread_mutex_init(&jit->lock, NULL) != 0) {
        nx_rt_free(ctx, jit, sizeof *jit);
        return nx_rt_error(ctx, NX_ERR_BACKEND, "x86 jit: pthread_mutex_init failed");
    }
    nx_status st = host_describe(jit);
    if (st == NX_OK)
        st = lljit_create(jit);
    if (st != NX_OK) {
        jit_destroy(ctx, jit);
        return st;
    }
    *out = jit;
    return NX_OK;
}

nx_status nx_x86_jit_get(nx_ctx *ctx, nx_x86_jit **out)
{
    *out = nx_rt_ctx_get(ctx, NX_SLOT_JIT);
    if (*out)
        return NX_OK;
    nx_x86_jit *jit = NULL;
    nx_status st = jit_create(ctx, &jit);
    if (st != NX_OK)
        return st;
    *out = nx_rt_ctx_install(ctx, NX_SLOT_JIT, jit, jit_destroy);
    if (*out != jit)
        jit_destroy(ctx, jit); /* another thread installed its JIT first */
    return NX_OK;
}

const nx_x86_target *nx_x86_jit_target(const nx_x86_jit *jit)
{
    return &jit->info;
}

nx_ctx *nx_x86_jit_ctx(const nx_x86_jit *jit)
{
    return jit->ctx;
}

void nx_x86_jit_stats_get(nx_x86_jit *jit, nx_x86_jit_stats *out)
{
    pthread_mutex_lock(&jit->lock);
    *out = jit->stats;
    pthread_mutex_unlock(&jit->lock);
}

/* ---------------------------------------------------------------------------------------------
 * Modules
 * -------------------------------------------------------------------------------------------*/

/* Without a handler, LLVMContext prints an error diagnostic and calls exit(1). */
static void diag_handler(LLVMDiagnosticInfoRef di, void *user)
{
    nx_x86_module *m = user;
    if (LLVMGetDiagInfoSeverity(di) != LLVMDSError || m->diag_error)
        return;
    char *desc = LLVMGetDiagInfoDescription(di);
    m->diag_error = true;
    snprintf(m->diag, sizeof m->diag, "%s", desc ? desc : "(no description)");
    LLVMDisposeMessage(desc);
}

static nx_status module_alloc(nx_x86_jit *jit, nx_x86_module **out)
{
    nx_x86_module *m = nx_rt_calloc(jit->ctx, 1, sizeof *m);
    if (!m)
        return nx_rt_nomem(jit->ctx, "x86 jit: module", sizeof *m);
    m->jit = jit;
    m->llctx = LLVMContextCreate();
    LLVMContextSetDiagnosticHandler(m->llctx, diag_handler, m);
    *out = m;
    return NX_OK;
}

static void module_set_target(nx_x86_module *m)
{
    LLVMSetTarget(m->mod, m->jit->triple);
    LLVMSetDataLayout(m->mod, m->jit->data_layout);
}

nx_status nx_x86_module_new(nx_x86_jit *jit, const char *name, nx_x86_module **out)
{
    nx_x86_module *m = NULL;
    nx_status st = module_alloc(jit, &m);
    if (st != NX_OK)
        return st;
    m->mod = LLVMModuleCreateWithNameInContext(name, m->llctx);
    module_set_target(m);
    *out = m;
    return NX_OK;
}

nx_status nx_x86_module_parse(nx_x86_jit *jit, const char *name, const char *text, size_t len,
                              nx_x86_module **out)
{
    nx_x86_module *m = NULL;
    nx_status st = module_alloc(jit, &m);
    if (st != NX_OK)
        return st;
    /* The copy is NUL-terminated, as the IR lexer requires; the parser takes ownership of it. */
    LLVMMemoryBufferRef mb = LLVMCreateMemoryBufferWithMemoryRangeCopy(text, len, name);
    char *msg = NULL;
    if (LLVMParseIRInContext(m->llctx, mb, &m->mod, &msg)) {
        m->mod = NULL;
        st =
            nx_rt_error(jit->ctx, NX_ERR_INTERNAL, "x86 jit: textual IR of '%s' does not parse: %s",
                        name, msg ? msg : "(no message)");
        LLVMDisposeMessage(msg);
        nx_x86_module_free(m);
        return st;
    }
    module_set_target(m);
    st = nx_x86_math_define_declared(jit->ctx, m->mod);
    if (st == NX_OK)
        st = nx_x86_module_verify(m);
    if (st != NX_OK) {
        nx_x86_module_free(m);
        return st;
    }
    *out = m;
    return NX_OK;
}

void nx_x86_module_free(nx_x86_module *m)
{
    if (!m)
        return;
    if (m->mod)
        LLVMDisposeModule(m->mod);
    LLVMContextDispose(m->llctx);
    nx_rt_free(m->jit->ctx, m, sizeof *m);
}

LLVMModuleRef nx_x86_module_llvm(const nx_x86_module *m)
{
    return m->mod;
}

LLVMContextRef nx_x86_module_context(const nx_x86_module *m)
{
    return m->llctx;
}

void nx_x86_loop_allow_reorder(LLVMValueRef latch)
{
    LLVMContextRef c = LLVMGetTypeContext(LLVMTypeOf(latch));
    static const char enable[] = "llvm.loop.vectorize.enable";
    LLVMMetadataRef hint[2] = {
        LLVMMDStringInContext2(c, enable, sizeof enable - 1),
        LLVMValueAsMetadata(LLVMConstInt(LLVMInt1TypeInContext(c), 1, 0)),
    };
    /* a loop ID is a node whose first operand is itself: built through a temporary */
    LLVMMetadataRef self = LLVMTemporaryMDNode(c, NULL, 0);
    LLVMMetadataRef ops[2] = {self, LLVMMDNodeInContext2(c, hint, 2)};
    LLVMMetadataRef id = LLVMMDNodeInContext2(c, ops, 2);
    LLVMMetadataReplaceAllUsesWith(self, id);
    static const char kind[] = "llvm.loop";
    LLVMSetMetadata(latch, LLVMGetMDKindIDInContext(c, kind, sizeof kind - 1),
                    LLVMMetadataAsValue(c, id));
}

static const char *module_name(const nx_x86_module *m)
{
    size_t len = 0;
    const char *name = LLVMGetModuleIdentifier(m->mod, &len);
    return name ? name : "?";
}

/* ---- what LLVM's x86 code generator would end the process on ----------------------------------
 *
 * Valid IR is not always IR LLVM can compile: where instruction selection or type legalisation has
 * no way to lower something, LLVM calls report_fatal_error, which ends the process (a handler may
 * log, but cannot return). Each rule below is a construct found to end the process in LLVM 14's
 * x86 back end (a probe compiled each in a child process; the ones that compiled are not listed,
 * e.g. i256 mul, shifts, i128 division, fp128 arithmetic, x86 SSE intrinsics). The checks are
 * conservative for later LLVMs, which lower some of them. The emitter produces none of them; the
 * check keeps a bug there (or IR from elsewhere) an error instead of the end of the caller's
 * process. */

#define WIDE_BITS 128 /* division, remainder, int <-> float conversion and atomics stop here */

typedef struct lower_check {
    char what[224];
} lower_check;

static bool refuse(lower_check *lc, LLVMValueRef f, const char *fmt, const char *detail)
{
    size_t len = 0;
    const char *fn = LLVMGetValueName2(f, &len);
    char d[96];
    snprintf(d, sizeof d, fmt, detail);
    snprintf(lc->what, sizeof lc->what, "%s in function '%.*s'", d, (int)(len > 64 ? 64 : len),
             fn ? fn : "?");
    return false;
}

/* The integer width of t or of its elements; 0 for other types. */
static unsigned int_bits(LLVMTypeRef t)
{
    if (LLVMGetTypeKind(t) == LLVMVectorTypeKind ||
        LLVMGetTypeKind(t) == LLVMScalableVectorTypeKind)
        t = LLVMGetElementType(t);
    return LLVMGetTypeKind(t) == LLVMIntegerTypeKind ? LLVMGetIntTypeWidth(t) : 0;
}

/* A type LLVM 14's x86 back end has no lowering for at all, or NULL. */
static const char *bad_type(LLVMTypeRef t)
{
    switch (LLVMGetTypeKind(t)) {
    case LLVMBFloatTypeKind:
        return "the bfloat type";
    case LLVMScalableVectorTypeKind:
        return "a scalable vector type";
    case LLVMX86_AMXTypeKind:
        return "the x86_amx type";
    case LLVMVectorTypeKind:
    case LLVMArrayTypeKind:
        return bad_type(LLVMGetElementType(t));
    case LLVMStructTypeKind: {
        unsigned n = LLVMCountStructElementTypes(t);
        for (unsigned i = 0; i < n; i++) {
            const char *w = bad_type(LLVMStructGetTypeAtIndex(t, i));
            if (w)
                return w;
        }
        return NULL;
    }
    default:
        return NULL;
    }
}

static bool starts_with(const char *s, size_t len, const char *prefix)
{
    size_t n = strlen(prefix);
    return len >= n && memcmp(s, prefix, n) == 0;
}

/* Target-specific intrinsics of other targets have no x86 lowering; x86 ones depend on CPU
 * features (an AVX-512 intrinsic ends the process on a CPU without it), so only baseline x86-64
 * (SSE, SSE2) is allowed. Some generic families need passes the pipelines do not run. */
static const char *bad_intrinsic(const char *name, size_t len, unsigned max_bits)
{
    static const char *const foreign[] = {
        "llvm.aarch64.", "llvm.amdgcn.",    "llvm.arm.",  "llvm.bpf.",  "llvm.dx.",
        "llvm.hexagon.", "llvm.loongarch.", "llvm.mips.", "llvm.nvvm.", "llvm.ppc.",
        "llvm.r600.",    "llvm.riscv.",     "llvm.s390.", "llvm.spv.",  "llvm.ve.",
        "llvm.wasm.",    "llvm.xcore.",
    };
    for (size_t i = 0; i < sizeof foreign / sizeof *foreign; i++)
        if (starts_with(name, len, foreign[i]))
            return "an intrinsic of another target";
    if (starts_with(name, len, "llvm.x86.") && !starts_with(name, len, "llvm.x86.sse.") &&
        !starts_with(name, len, "llvm.x86.sse2."))
        return "an x86 intrinsic beyond SSE2 (it depends on CPU features)";
    if (starts_with(name, len, "llvm.matrix."))
        return "a matrix intrinsic (its lowering pass does not run)";
    if ((starts_with(name, len, "llvm.fptosi.sat.") ||
         starts_with(name, len, "llvm.fptoui.sat.")) &&
        max_bits > WIDE_BITS)
        return "a saturating float-to-integer conversion wider than 128 bits";
    if ((starts_with(name, len, "llvm.sdiv.fix") || starts_with(name, len, "llvm.udiv.fix")) &&
        max_bits > 64)
        return "a fixed-point division wider than 64 bits";
    if ((starts_with(name, len, "llvm.smul.fix") || starts_with(name, len, "llvm.umul.fix")) &&
        max_bits > WIDE_BITS)
        return "a fixed-point multiplication wider than 128 bits";
    return NULL;
}

static bool check_instruction(lower_check *lc, LLVMValueRef f, LLVMValueRef in)
{
    LLVMOpcode op = LLVMGetInstructionOpcode(in);
    unsigned bits = int_bits(LLVMTypeOf(in));
    int nops = LLVMGetNumOperands(in);
    unsigned max_bits = bits;
    const char *t = bad_type(LLVMTypeOf(in));
    for (int i = 0; i < nops && !t; i++) {
        LLVMTypeRef ot = LLVMTypeOf(LLVMGetOperand(in, (unsigned)i));
        unsigned ob = int_bits(ot);
        max_bits = ob > max_bits ? ob : max_bits;
        t = bad_type(ot);
    }
    if (t)
        return refuse(lc, f, "%s", t);
    switch (op) {
    case LLVMSDiv:
    case LLVMUDiv:
    case LLVMSRem:
    case LLVMURem:
        if (bits > WIDE_BITS)
            return refuse(lc, f, "%s", "an integer division or remainder wider than 128 bits");
        break;
    case LLVMFPToSI:
    case LLVMFPToUI:
    case LLVMSIToFP:
    case LLVMUIToFP:
        if (max_bits > WIDE_BITS)
            return refuse(lc, f, "%s",
                          "a conversion between float and an integer wider than 128 bits");
        break;
    case LLVMAtomicRMW:
    case LLVMAtomicCmpXchg:
        if (max_bits > WIDE_BITS)
            return refuse(lc, f, "%s", "an atomic operation wider than 128 bits");
        break;
    case LLVMLoad:
    case LLVMStore:
        if (LLVMGetOrdering(in) != LLVMAtomicOrderingNotAtomic && max_bits > WIDE_BITS)
            return refuse(lc, f, "%s", "an atomic load or store wider than 128 bits");
        break;
    case LLVMCall: {
        LLVMValueRef callee = LLVMGetCalledValue(in);
        size_t len = 0;
        const char *name = callee ? LLVMGetValueName2(callee, &len) : NULL;
        const char *why = name ? bad_intrinsic(name, len, max_bits) : NULL;
        if (why)
            return refuse(lc, f, "%s", why);
        break;
    }
    default:
        break;
    }
    return true;
}

static bool check_function(lower_check *lc, LLVMValueRef f)
{
    const char *gc = LLVMGetGC(f);
    if (gc && *gc)
        return refuse(lc, f, "the garbage collector strategy '%s'", gc);
    const char *t = bad_type(LLVMGetReturnType(LLVMGlobalGetValueType(f)));
    for (unsigned i = 0; !t && i < LLVMCountParams(f); i++)
        t = bad_type(LLVMTypeOf(LLVMGetParam(f, i)));
    if (t)
        return refuse(lc, f, "%s", t);
    for (LLVMBasicBlockRef b = LLVMGetFirstBasicBlock(f); b; b = LLVMGetNextBasicBlock(b))
        for (LLVMValueRef in = LLVMGetFirstInstruction(b); in; in = LLVMGetNextInstruction(in))
            if (!check_instruction(lc, f, in))
                return false;
    return true;
}

nx_status nx_x86_module_check_lowerable(nx_x86_module *m)
{
    lower_check lc = {{0}};
    for (LLVMValueRef f = LLVMGetFirstFunction(m->mod); f; f = LLVMGetNextFunction(f))
        if (!check_function(&lc, f))
            return nx_rt_error(m->jit->ctx, NX_ERR_BACKEND,
                               "x86 jit: module '%s' is refused: it holds %s, which LLVM's x86 "
                               "code generator cannot lower and would end the process on",
                               module_name(m), lc.what);
    return NX_OK;
}

nx_status nx_x86_module_verify(nx_x86_module *m)
{
    char *msg = NULL;
    bool broken = LLVMVerifyModule(m->mod, LLVMReturnStatusAction, &msg);
    nx_status st = NX_OK;
    if (broken)
        st = nx_rt_error(m->jit->ctx, NX_ERR_INTERNAL,
                         "x86 jit: module '%s' is not valid LLVM IR (rejected before LLVM sees "
                         "it): %s",
                         module_name(m), msg && *msg ? msg : "(no message)");
    LLVMDisposeMessage(msg);
    return st != NX_OK ? st : nx_x86_module_check_lowerable(m);
}

static nx_status diag_status(nx_x86_module *m, const char *stage)
{
    if (!m->diag_error)
        return NX_OK;
    return nx_rt_error(m->jit->ctx, NX_ERR_BACKEND, "x86 jit: LLVM error while %s '%s': %s", stage,
                       module_name(m), m->diag);
}

static void add_time(nx_x86_jit *jit, double *field, double seconds)
{
    pthread_mutex_lock(&jit->lock);
    *field += seconds;
    pthread_mutex_unlock(&jit->lock);
}

/* LLVM's tuning for several AVX-512 CPUs (Skylake-SP, Ice Lake) prefers 256-bit vectors to
 * avoid clock throttling. Array kernels are throughput code: with 512-bit vectors the max-plus
 * loop ran 1.9x faster in L1 on an Ice Lake (105 -> 200 GB/s). A function that states its own
 * preference keeps it. */
static void prefer_wide_vectors(nx_x86_module *m)
{
    if (m->jit->info.vector_bits < 512)
        return;
    static const char key[] = "prefer-vector-width";
    for (LLVMValueRef f = LLVMGetFirstFunction(m->mod); f; f = LLVMGetNextFunction(f)) {
        if (LLVMCountBasicBlocks(f) == 0 ||
            LLVMGetStringAttributeAtIndex(f, LLVMAttributeFunctionIndex, key, sizeof key - 1))
            continue;
        LLVMAddTargetDependentFunctionAttr(f, key, "512");
    }
}

/* The kernel emitter's IR is already shaped: loops with i64 counters in allocas, each value
 * placed in the innermost loop it depends on, contraction tiles written as vector code. What it
 * needs is: inline the math library and drop its bodies (always-inline, globaldce); allocas to
 * registers (sroa); duplicate index arithmetic and loads merged (early-cse, gvn); loads hoisted
 * out of reduction loops (licm); loops rotated with canonical induction variables so the loop
 * vectoriser accepts them (loop-rotate, indvars); then vectorisation without interleaving
 * (several accumulators did not make the memory-bound loops faster, and cost code size) and a
 * clean-up. O3's inliner, loop unswitching, jump threading and second simplification round find
 * nothing in such code and cost half of its compile time (docs/perf/cpu.md has the figures). */
/* LLVM 18 and later run instcombine once and, asked for by name, abort the process when that one
 * round leaves work (verify-fixpoint, on by default there); the next instcombine in the list
 * picks it up, as in LLVM's own pipelines. LLVM 14 has neither the option nor the check. */
#if LLVM_VERSION_MAJOR >= 18
#define NX_IC "instcombine<no-verify-fixpoint>"
#else
#define NX_IC "instcombine"
#endif
static const char kernel_pipeline[] =
    "always-inline,globaldce,function(sroa,early-cse,simplifycfg," NX_IC ",loop-mssa(licm),"
    "loop(loop-rotate,indvars),loop-mssa(licm),gvn," NX_IC ","
    "loop-vectorize<interleave-forced-only>," NX_IC ",simplifycfg)";

const char *nx_x86_kernel_pipeline(void)
{
    return kernel_pipeline;
}

static int stream_function(LLVMModuleRef mod, LLVMValueRef f)
{
    LLVMContextRef c = LLVMGetModuleContext(mod);
    LLVMTargetDataRef dl = LLVMGetModuleDataLayout(mod);
    LLVMMetadataRef one = LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(c), 1, 0));
    LLVMValueRef nt = LLVMMetadataAsValue(c, LLVMMDNodeInContext2(c, &one, 1));
    unsigned kind = LLVMGetMDKindIDInContext(c, "nontemporal", 11);
    int marked = 0;
    for (LLVMBasicBlockRef b = LLVMGetFirstBasicBlock(f); b; b = LLVMGetNextBasicBlock(b))
        for (LLVMValueRef i = LLVMGetFirstInstruction(b); i; i = LLVMGetNextInstruction(i)) {
            if (LLVMGetInstructionOpcode(i) != LLVMStore)
                continue;
            LLVMTypeRef t = LLVMTypeOf(LLVMGetOperand(i, 0));
            if (LLVMGetTypeKind(t) != LLVMVectorTypeKind || LLVMStoreSizeOfType(dl, t) != 64)
                continue;
            LLVMSetAlignment(i, 64);
            LLVMSetMetadata(i, kind, nt);
            marked++;
        }
    if (!marked)
        return 0;
    /* non-temporal stores are weakly ordered: fence them before the chunk reports done */
    LLVMTypeRef vt = LLVMFunctionType(LLVMVoidTypeInContext(c), NULL, 0, 0);
    LLVMValueRef fence = LLVMGetNamedFunction(mod, "llvm.x86.sse.sfence");
    if (!fence)
        fence = LLVMAddFunction(mod, "llvm.x86.sse.sfence", vt);
    LLVMBuilderRef bld = LLVMCreateBuilderInContext(c);
    for (LLVMBasicBlockRef b = LLVMGetFirstBasicBlock(f); b; b = LLVMGetNextBasicBlock(b)) {
        LLVMValueRef term = LLVMGetBasicBlockTerminator(b);
        if (term && LLVMGetInstructionOpcode(term) == LLVMRet) {
            LLVMPositionBuilderBefore(bld, term);
            LLVMBuildCall2(bld, vt, fence, NULL, 0, "");
        }
    }
    LLVMDisposeBuilder(bld);
    return marked;
}

/* Streaming stores where the emitter asked for them (NX_X86_STREAM_ATTR): after vectorisation,
 * when the vector stores exist. */
static void stream_stores(nx_x86_module *m)
{
    static const char key[] = NX_X86_STREAM_ATTR;
    for (LLVMValueRef f = LLVMGetFirstFunction(m->mod); f; f = LLVMGetNextFunction(f))
        if (LLVMCountBasicBlocks(f) > 0 &&
            LLVMGetStringAttributeAtIndex(f, LLVMAttributeFunctionIndex, key, sizeof key - 1))
            stream_function(m->mod, f);
}

nx_status nx_x86_module_optimize(nx_x86_module *m, nx_x86_opt opt)
{
    nx_status st = nx_x86_module_verify(m);
    if (st != NX_OK || opt == NX_X86_OPT_NONE)
        return st;
    nx_x86_jit *jit = m->jit;
    prefer_wide_vectors(m);
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    /* Unrolling and interleaving triple the compile time for no measured speed (toolchain notes);
     * the vectorisers stay on. */
    bool full = opt == NX_X86_OPT_O3_FULL;
    LLVMPassBuilderOptionsSetLoopInterleaving(po, full);
    LLVMPassBuilderOptionsSetLoopUnrolling(po, full);
    LLVMPassBuilderOptionsSetLoopVectorization(po, 1);
    LLVMPassBuilderOptionsSetSLPVectorization(po, 1);
    LLVMTargetMachineRef tm = tm_take(jit);
    if (!tm) {
        LLVMDisposePassBuilderOptions(po);
        return nx_rt_error(jit->ctx, NX_ERR_BACKEND, "x86 jit: no target machine");
    }
    double t0 = now_seconds();
    const char *passes = opt == NX_X86_OPT_KERNEL ? kernel_pipeline : "default<O3>";
    LLVMErrorRef err = LLVMRunPasses(m->mod, passes, tm, po);
    m->opt_seconds += now_seconds() - t0;
    add_time(jit, &jit->stats.opt_seconds, now_seconds() - t0);
    tm_give(jit, tm);
    LLVMDisposePassBuilderOptions(po);
    if (err)
        return llvm_error(jit->ctx, NX_ERR_INTERNAL, "the pass pipeline failed", err);
    stream_stores(m);
    st = diag_status(m, "optimising");
    return st != NX_OK ? st : nx_x86_module_verify(m);
}

nx_status nx_x86_module_print(nx_x86_module *m, char **out)
{
    char *text = LLVMPrintModuleToString(m->mod);
    *out = take_message(m->jit->ctx, text);
    if (!*out)
        return nx_rt_nomem(m->jit->ctx, "x86 jit: module text", 4096);
    return NX_OK;
}

/* Verified module -> LLVM memory buffer holding a relocatable object. */
static nx_status emit(nx_x86_module *m, LLVMMemoryBufferRef *out)
{
    nx_x86_jit *jit = m->jit;
    nx_status st = nx_x86_module_verify(m);
    if (st != NX_OK)
        return st;
    LLVMTargetMachineRef tm = tm_take(jit);
    if (!tm)
        return nx_rt_error(jit->ctx, NX_ERR_BACKEND, "x86 jit: no target machine");
    char *msg = NULL;
    double t0 = now_seconds();
    *out = NULL;
    bool failed = LLVMTargetMachineEmitToMemoryBuffer(tm, m->mod, LLVMObjectFile, &msg, out);
    m->codegen_seconds += now_seconds() - t0;
    add_time(jit, &jit->stats.codegen_seconds, now_seconds() - t0);
    tm_give(jit, tm);
    if (failed) {
        st = nx_rt_error(jit->ctx, NX_ERR_BACKEND, "x86 jit: code generation for '%s' failed: %s",
                         module_name(m), msg ? msg : "(no message)");
        LLVMDisposeMessage(msg);
        *out = NULL;
        return st;
    }
    st = diag_status(m, "generating code for");
    if (st != NX_OK) {
        LLVMDisposeMemoryBuffer(*out);
        *out = NULL;
    }
    return st;
}

static nx_status copy_buffer(nx_ctx *ctx, LLVMMemoryBufferRef mb, void **buf, size_t *len)
{
    size_t n = LLVMGetBufferSize(mb);
    void *p = nx_rt_alloc(ctx, n);
    if (!p)
        return nx_rt_nomem(ctx, "x86 jit: object buffer", n);
    memcpy(p, LLVMGetBufferStart(mb), n);
    *buf = p;
    *len = n;
    return NX_OK;
}

nx_status nx_x86_module_emit_object(nx_x86_module *m, void **buf, size_t *len)
{
    LLVMMemoryBufferRef mb = NULL;
    nx_status st = emit(m, &mb);
    if (st != NX_OK)
        return st;
    st = copy_buffer(m->jit->ctx, mb, buf, len);
    LLVMDisposeMemoryBuffer(mb);
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * Kernels
 * -------------------------------------------------------------------------------------------*/

/* Links mb (consumed) as the kernel k (allocated by the caller, freed here on failure). */
static nx_status kernel_add(nx_x86_jit *jit, nx_x86_kernel *k, LLVMMemoryBufferRef mb)
{
    pthread_mutex_lock(&jit->lock);
    LLVMOrcJITDylibRef jd = LLVMOrcLLJITGetMainJITDylib(jit->lljit);
    k->jit = jit;
    k->rt = LLVMOrcJITDylibCreateResourceTracker(jd);
    LLVMErrorRef err = LLVMOrcLLJITAddObjectFileWithRT(jit->lljit, k->rt, mb);
    if (err) {
        LLVMErrorRef rm = LLVMOrcResourceTrackerRemove(k->rt);
        if (rm)
            LLVMConsumeError(rm);
        LLVMOrcReleaseResourceTracker(k->rt);
        pthread_mutex_unlock(&jit->lock);
        nx_rt_free(jit->ctx, k, sizeof *k);
        return llvm_error(jit->ctx, NX_ERR_BACKEND, "linking a kernel object", err);
    }
    k->next = jit->kernels;
    if (jit->kernels)
        jit->kernels->prev = k;
    jit->kernels = k;
    jit->stats.kernels_live++;
    jit->stats.kernels_total++;
    pthread_mutex_unlock(&jit->lock);
    return NX_OK;
}

nx_status nx_x86_module_compile(nx_x86_module *m, nx_x86_kernel **out, void **buf, size_t *len)
{
    nx_x86_jit *jit = m->jit;
    nx_x86_kernel *k = nx_rt_calloc(jit->ctx, 1, sizeof *k);
    if (!k) {
        nx_x86_module_free(m);
        return nx_rt_nomem(jit->ctx, "x86 jit: kernel", sizeof *k);
    }
    LLVMMemoryBufferRef mb = NULL;
    nx_status st = emit(m, &mb);
    k->info.opt_seconds = m->opt_seconds;
    k->info.codegen_seconds = m->codegen_seconds;
    k->info.object_bytes = mb ? LLVMGetBufferSize(mb) : 0;
    nx_x86_module_free(m);
    if (st == NX_OK && buf)
        st = copy_buffer(jit->ctx, mb, buf, len);
    if (st != NX_OK) {
        if (mb)
            LLVMDisposeMemoryBuffer(mb);
        nx_rt_free(jit->ctx, k, sizeof *k);
        return st;
    }
    st = kernel_add(jit, k, mb);
    if (st != NX_OK && buf) {
        nx_rt_free(jit->ctx, *buf, *len);
        *buf = NULL;
        *len = 0;
    }
    if (st == NX_OK)
        *out = k;
    return st;
}

nx_status nx_x86_kernel_load(nx_x86_jit *jit, const void *buf, size_t len, nx_x86_kernel **out)
{
    nx_x86_kernel *k = nx_rt_calloc(jit->ctx, 1, sizeof *k);
    if (!k)
        return nx_rt_nomem(jit->ctx, "x86 jit: kernel", sizeof *k);
    LLVMMemoryBufferRef mb = LLVMCreateMemoryBufferWithMemoryRangeCopy(buf, len, "nx-object");
    k->info.object_bytes = len;
    nx_status st = kernel_add(jit, k, mb);
    if (st == NX_OK)
        *out = k;
    return st;
}

nx_status nx_x86_kernel_lookup(nx_x86_kernel *k, const char *symbol, void **addr)
{
    nx_x86_jit *jit = k->jit;
    LLVMOrcExecutorAddress a = 0;
    double t0 = now_seconds();
    pthread_mutex_lock(&jit->lock);
    LLVMErrorRef err = LLVMOrcLLJITLookup(jit->lljit, &a, symbol);
    k->info.lookup_seconds += now_seconds() - t0;
    pthread_mutex_unlock(&jit->lock);
    if (err) {
        char what[160];
        snprintf(what, sizeof what, "looking up '%s'", symbol);
        return llvm_error(jit->ctx, NX_ERR_BACKEND, what, err);
    }
    *addr = (void *)(uintptr_t)a;
    return NX_OK;
}

nx_x86_kernel_info nx_x86_kernel_info_get(const nx_x86_kernel *k)
{
    return k->info;
}

void nx_x86_kernel_free(nx_x86_kernel *k)
{
    if (!k)
        return;
    nx_x86_jit *jit = k->jit;
    pthread_mutex_lock(&jit->lock);
    LLVMErrorRef err = LLVMOrcResourceTrackerRemove(k->rt);
    LLVMOrcReleaseResourceTracker(k->rt);
    if (k->prev)
        k->prev->next = k->next;
    else
        jit->kernels = k->next;
    if (k->next)
        k->next->prev = k->prev;
    jit->stats.kernels_live--;
    pthread_mutex_unlock(&jit->lock);
    if (err) {
        char *msg = LLVMGetErrorMessage(err);
        nx_ctx_log(jit->ctx, NX_LOG_WARN, "x86 jit: removing a kernel: %s", msg);
        LLVMDisposeErrorMessage(msg);
    }
    nx_rt_free(jit->ctx, k, sizeof *k);
}
