/* A benchmark, not a test (it is built but not registered): compile latency of the x86 JIT per
 * kernel, object loading (a cache hit), the max-plus kernel's throughput at L1/L2/DRAM sizes
 * against gcc -O3 loops, sum reductions, and the throughput of the math library inside vectorised
 * loops.
 * Run: build/tests/jit/bench-jit [--quick]. Medians of repeated runs after a warm-up. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen/x86/math.h"
#include "jit-kernels.h"

void peer_o3(float *restrict out, const float *restrict a, const float *restrict b, int64_t n);
void peer_native(float *restrict out, const float *restrict a, const float *restrict b, int64_t n);
float peer_sum_o3(const float *restrict a, int64_t n);
float peer_sum_native(const float *restrict a, int64_t n);

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void die(nx_ctx *ctx, const char *what)
{
    fprintf(stderr, "bench-jit: %s: %s\n", what, nx_ctx_last_error(ctx));
    exit(1);
}

/* ---------------------------------------------------------------------------------------------
 * Compile latency
 * -------------------------------------------------------------------------------------------*/

typedef enum { SRC_BUILDER, SRC_TEXT, SRC_MATH } src_kind;

/* A loop out[i] = exp(x[i]) in f32: the kind of kernel the math library makes heavy. */
static void build_exp_loop(nx_x86_module *m, const char *name)
{
    LLVMContextRef c = nx_x86_module_context(m);
    LLVMModuleRef mod = nx_x86_module_llvm(m);
    LLVMTypeRef f32 = LLVMFloatTypeInContext(c), i64 = LLVMInt64TypeInContext(c);
    LLVMTypeRef pf = LLVMPointerType(f32, 0);
    LLVMTypeRef params[] = {pf, pf, i64};
    LLVMValueRef f =
        LLVMAddFunction(mod, name, LLVMFunctionType(LLVMVoidTypeInContext(c), params, 3, 0));
    unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
    for (unsigned i = 1; i <= 2; i++)
        LLVMAddAttributeAtIndex(f, i, LLVMCreateEnumAttribute(c, noalias, 0));
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(c, f, "entry");
    LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(c, f, "loop");
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(c, f, "exit");
    LLVMBuilderRef b = LLVMCreateBuilderInContext(c);
    LLVMPositionBuilderAtEnd(b, entry);
    LLVMValueRef n = LLVMGetParam(f, 2), zero = LLVMConstInt(i64, 0, 0);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, n, zero, ""), loop, exit);
    LLVMPositionBuilderAtEnd(b, loop);
    LLVMValueRef i = LLVMBuildPhi(b, i64, "i");
    LLVMValueRef x =
        LLVMBuildLoad2(b, f32, LLVMBuildInBoundsGEP2(b, f32, LLVMGetParam(f, 1), &i, 1, ""), "");
    LLVMValueRef r = nx_x86_math_call(b, mod, NX_X86_MATH_EXP, x, NULL);
    LLVMBuildStore(b, r, LLVMBuildInBoundsGEP2(b, f32, LLVMGetParam(f, 0), &i, 1, ""));
    LLVMValueRef next = LLVMBuildNSWAdd(b, i, LLVMConstInt(i64, 1, 0), "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, next, n, ""), loop, exit);
    LLVMValueRef iv[] = {zero, next};
    LLVMBasicBlockRef ib[] = {entry, loop};
    LLVMAddIncoming(i, iv, ib, 2);
    LLVMPositionBuilderAtEnd(b, exit);
    LLVMBuildRetVoid(b);
    LLVMDisposeBuilder(b);
}

/* Seconds to build, optimise, compile and look up one kernel; the object's bytes are returned. */
static nx_x86_kernel_info last_info;

static double compile_once(nx_ctx *ctx, src_kind src, nx_x86_opt opt, int id, void **obj,
                           size_t *len, char *name)
{
    nx_x86_jit *jit = NULL;
    if (nx_x86_jit_get(ctx, &jit) != NX_OK)
        die(ctx, "jit");
    snprintf(name, 32, "k%d_%d_%d", (int)src, (int)opt, id);
    double t0 = now();
    nx_x86_module *m = NULL;
    if (src == SRC_TEXT) {
        char ir[2048];
        jk_text_maxplus(ir, sizeof ir, name);
        if (nx_x86_module_parse(jit, name, ir, strlen(ir), &m) != NX_OK)
            die(ctx, "parse");
    } else {
        if (nx_x86_module_new(jit, name, &m) != NX_OK)
            die(ctx, "module");
        if (src == SRC_BUILDER)
            jk_build_maxplus(m, name);
        else
            build_exp_loop(m, name);
    }
    nx_x86_kernel *k = NULL;
    void *p = NULL;
    if (nx_x86_module_optimize(m, opt) != NX_OK ||
        nx_x86_module_compile(m, &k, obj, len) != NX_OK ||
        nx_x86_kernel_lookup(k, name, &p) != NX_OK)
        die(ctx, "compile");
    double t = now() - t0;
    last_info = nx_x86_kernel_info_get(k);
    nx_x86_kernel_free(k);
    return t;
}

static void bench_compile(int reps)
{
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(NULL, &ctx) != NX_OK)
        die(NULL, "ctx");
    static const char *src_names[] = {"builder max-plus", "text max-plus", "builder exp f32"};
    printf("compile latency per kernel (median of %d, ms): build/parse + verify + passes + codegen "
           "+ link + lookup\n",
           reps);
    nx_x86_jit *jit = NULL;
    if (nx_x86_jit_get(ctx, &jit) != NX_OK)
        die(ctx, "jit");
    char name[32];
    void *obj = NULL;
    size_t len = 0;
    int id = 0;
    for (int s = 0; s < 3; s++) {
        for (int o = 0; o < 3; o++) {
            double t[64], to[64], tc[64], tl2[64];
            compile_once(ctx, (src_kind)s, (nx_x86_opt)o, id++, &obj, &len, name); /* warm-up */
            nx_rt_free(ctx, obj, len);
            for (int r = 0; r < reps; r++) {
                t[r] = compile_once(ctx, (src_kind)s, (nx_x86_opt)o, id++, &obj, &len, name);
                to[r] = last_info.opt_seconds;
                tc[r] = last_info.codegen_seconds;
                tl2[r] = last_info.lookup_seconds;
                if (r + 1 < reps)
                    nx_rt_free(ctx, obj, len);
            }
            static const char *opt_names[] = {"none", "O3", "O3full"};
            printf("  %-18s %-6s %7.2f ms  (passes %.2f, codegen %.2f, link+lookup %.3f; object "
                   "%zu bytes)\n",
                   src_names[s], opt_names[o], 1e3 * median(t, reps), 1e3 * median(to, reps),
                   1e3 * median(tc, reps), 1e3 * median(tl2, reps), len);
            /* the cache-hit path: load the bytes, look the symbol up */
            if (s == 0 && o == 1) {
                double tl[64];
                for (int r = 0; r < reps; r++) {
                    double t0 = now();
                    nx_x86_kernel *k = NULL;
                    void *p = NULL;
                    if (nx_x86_kernel_load(jit, obj, len, &k) != NX_OK ||
                        nx_x86_kernel_lookup(k, name, &p) != NX_OK)
                        die(ctx, "load");
                    tl[r] = now() - t0;
                    nx_x86_kernel_free(k);
                }
                printf("  %-18s %-6s %7.3f ms  (load object + lookup)\n", "object load", "",
                       1e3 * median(tl, reps));
            }
            nx_rt_free(ctx, obj, len);
        }
    }
    nx_x86_jit_stats st;
    nx_x86_jit_stats_get(jit, &st);
    printf("  totals: %lld kernels, %.1f ms in passes, %.1f ms in codegen\n",
           (long long)st.kernels_total, 1e3 * st.opt_seconds, 1e3 * st.codegen_seconds);
    nx_ctx_free(ctx);
}

/* ---------------------------------------------------------------------------------------------
 * Throughput
 * -------------------------------------------------------------------------------------------*/

static double time_kernel(maxplus_fn fn, float *out, const float *a, const float *b, int64_t n,
                          int reps)
{
    double t[32];
    int64_t inner = n < 100000 ? 200000 / (n / 64 + 1) + 1 : 1;
    fn(out, a, b, n);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (int64_t k = 0; k < inner; k++)
            fn(out, a, b, n);
        t[r] = (now() - t0) / (double)inner;
    }
    return median(t, reps);
}

static void bench_throughput(int reps, bool quick)
{
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(NULL, &ctx) != NX_OK)
        die(NULL, "ctx");
    nx_x86_jit *jit = NULL;
    if (nx_x86_jit_get(ctx, &jit) != NX_OK)
        die(ctx, "jit");
    /* none, O3, O3 full, O3 with prefer-vector-width=256 on the kernel (LLVM's own choice for
     * some AVX-512 CPUs, which the JIT overrides) */
    maxplus_fn fns[4];
    nx_x86_kernel *ks[4];
    for (int o = 0; o < 4; o++) {
        char name[16];
        snprintf(name, sizeof name, "tp%d", o);
        nx_x86_module *m = NULL;
        void *p = NULL;
        if (nx_x86_module_new(jit, name, &m) != NX_OK)
            die(ctx, "module");
        jk_build_maxplus(m, name);
        if (o == 3)
            LLVMAddTargetDependentFunctionAttr(LLVMGetNamedFunction(nx_x86_module_llvm(m), name),
                                               "prefer-vector-width", "256");
        if (nx_x86_module_optimize(m, o == 3 ? NX_X86_OPT_O3 : (nx_x86_opt)o) != NX_OK ||
            nx_x86_module_compile(m, &ks[o], NULL, NULL) != NX_OK ||
            nx_x86_kernel_lookup(ks[o], name, &p) != NX_OK)
            die(ctx, "compile");
        fns[o] = (maxplus_fn)p;
    }
    const nx_x86_target *t = nx_x86_jit_target(jit);
    printf("\nmax-plus out[i] = max(out[i], a[i]+b[i]), GB/s at 16 bytes per element (median of "
           "%d); host %s, %d-bit vectors\n",
           reps, t->cpu, t->vector_bits);
    printf("  %-10s %9s %9s %9s %9s %9s %9s\n", "n", "JIT none", "JIT O3", "O3 full", "O3 pvw256",
           "gcc -O3", "-march=nat");
    const int64_t sizes[] = {2048, 32768, quick ? 1 << 22 : 1 << 24};
    const char *labels[] = {"L1", "L2", "DRAM"};
    for (int s = 0; s < 3; s++) {
        int64_t n = sizes[s];
        float *a = aligned_alloc(64, (size_t)n * 4), *b = aligned_alloc(64, (size_t)n * 4);
        float *out = aligned_alloc(64, (size_t)n * 4);
        for (int64_t i = 0; i < n; i++) {
            a[i] = (float)(i % 97);
            b[i] = (float)(i % 89);
            out[i] = (float)(i % 101);
        }
        maxplus_fn all[6] = {fns[0], fns[1], fns[2], fns[3], peer_o3, peer_native};
        double gbs[6];
        for (int f = 0; f < 6; f++)
            gbs[f] = 16.0 * (double)n / time_kernel(all[f], out, a, b, n, reps) / 1e9;
        printf("  %-4s %-8lld %6.1f %9.1f %9.1f %9.1f %9.1f %9.1f\n", labels[s], (long long)n,
               gbs[0], gbs[1], gbs[2], gbs[3], gbs[4], gbs[5]);
        free(a);
        free(b);
        free(out);
    }
    for (int o = 0; o < 4; o++)
        nx_x86_kernel_free(ks[o]);
    nx_ctx_free(ctx);
}

/* Sum reductions: textual `fadd reassoc`, the builder with the loop hint, plain builder (kept in
 * order, scalar), and gcc. GB/s at 4 bytes per element. */
static double time_sum(sum_fn fn, const float *a, int64_t n, int reps)
{
    double t[32];
    int64_t inner = n < 100000 ? 400000 / (n / 64 + 1) + 1 : 1;
    volatile float sink = fn(a, n);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (int64_t k = 0; k < inner; k++)
            sink = fn(a, n);
        t[r] = (now() - t0) / (double)inner;
    }
    (void)sink;
    return median(t, reps);
}

static void bench_sum(int reps, bool quick)
{
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(NULL, &ctx) != NX_OK)
        die(NULL, "ctx");
    nx_x86_jit *jit = NULL;
    if (nx_x86_jit_get(ctx, &jit) != NX_OK)
        die(ctx, "jit");
    sum_fn fns[3];
    nx_x86_kernel *ks[3];
    for (int v = 0; v < 3; v++) {
        const char *name = v == 0 ? "s_text" : v == 1 ? "s_hint" : "s_plain";
        nx_x86_module *m = NULL;
        void *p = NULL;
        if (v == 0) {
            char ir[2048];
            jk_text_sum(ir, sizeof ir, name);
            if (nx_x86_module_parse(jit, name, ir, strlen(ir), &m) != NX_OK)
                die(ctx, "parse");
        } else {
            if (nx_x86_module_new(jit, name, &m) != NX_OK)
                die(ctx, "module");
            jk_build_sum(m, name, v == 1);
        }
        if (nx_x86_module_optimize(m, NX_X86_OPT_O3) != NX_OK ||
            nx_x86_module_compile(m, &ks[v], NULL, NULL) != NX_OK ||
            nx_x86_kernel_lookup(ks[v], name, &p) != NX_OK)
            die(ctx, "compile");
        fns[v] = (sum_fn)p;
    }
    printf("\nsum of n floats, GB/s at 4 bytes per element (median of %d)\n", reps);
    printf("  %-13s %9s %9s %9s %9s %9s\n", "n", "reassoc", "hint", "in order", "gcc -O3",
           "-march=nat");
    const int64_t sizes[] = {4096, 65536, quick ? 1 << 23 : 1 << 26};
    const char *labels[] = {"L1", "L2", "DRAM"};
    for (int s = 0; s < 3; s++) {
        int64_t n = sizes[s];
        float *a = aligned_alloc(64, (size_t)n * 4);
        for (int64_t i = 0; i < n; i++)
            a[i] = (float)(i % 13) * 0.25f;
        sum_fn all[5] = {fns[0], fns[1], fns[2], peer_sum_o3, peer_sum_native};
        printf("  %-4s %-8lld", labels[s], (long long)n);
        for (int f = 0; f < 5; f++)
            printf(" %9.1f", 4.0 * (double)n / time_sum(all[f], a, n, reps) / 1e9);
        printf("\n");
        free(a);
    }
    for (int v = 0; v < 3; v++)
        nx_x86_kernel_free(ks[v]);
    nx_ctx_free(ctx);
}

/* ns per element of out[i] = fn(x[i]) over 4096 elements in L1. */
typedef void (*loop_fn)(void *out, const void *x, const void *y, int64_t n);

static void bench_math(int reps)
{
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(NULL, &ctx) != NX_OK)
        die(NULL, "ctx");
    nx_x86_jit *jit = NULL;
    if (nx_x86_jit_get(ctx, &jit) != NX_OK)
        die(ctx, "jit");
    enum { N = 4096 };
    double *xd = aligned_alloc(64, N * 8), *yd = aligned_alloc(64, N * 8),
           *od = aligned_alloc(64, N * 8);
    float *xf = aligned_alloc(64, N * 4), *yf = aligned_alloc(64, N * 4),
          *of = aligned_alloc(64, N * 4);
    for (int i = 0; i < N; i++) {
        xd[i] = 0.001 + 3.0 * i / N;
        yd[i] = 1.5;
        xf[i] = (float)xd[i];
        yf[i] = 1.5f;
    }
    printf("\nmath in a vectorised loop, ns per element (n = %d, median of %d; libm: scalar "
           "glibc double call)\n",
           N, reps);
    printf("  %-6s %8s %8s %8s\n", "fn", "f32", "f64", "libm f64");
    for (int fn = 0; fn < NX_X86_MATH_COUNT; fn++) {
        double ns[2];
        for (int f64 = 0; f64 < 2; f64++) {
            char name[32];
            snprintf(name, sizeof name, "m_%s_%d", nx_x86_math_name((nx_x86_math_fn)fn), f64);
            nx_x86_module *m = NULL;
            if (nx_x86_module_new(jit, name, &m) != NX_OK)
                die(ctx, "module");
            LLVMContextRef c = nx_x86_module_context(m);
            LLVMModuleRef mod = nx_x86_module_llvm(m);
            LLVMTypeRef ty = f64 ? LLVMDoubleTypeInContext(c) : LLVMFloatTypeInContext(c);
            LLVMTypeRef i64 = LLVMInt64TypeInContext(c), pt = LLVMPointerType(ty, 0);
            LLVMTypeRef params[] = {pt, pt, pt, i64};
            LLVMValueRef f = LLVMAddFunction(
                mod, name, LLVMFunctionType(LLVMVoidTypeInContext(c), params, 4, 0));
            unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
            for (unsigned i = 1; i <= 3; i++)
                LLVMAddAttributeAtIndex(f, i, LLVMCreateEnumAttribute(c, noalias, 0));
            LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(c, f, "entry");
            LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(c, f, "loop");
            LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(c, f, "exit");
            LLVMBuilderRef b = LLVMCreateBuilderInContext(c);
            LLVMPositionBuilderAtEnd(b, entry);
            LLVMValueRef n = LLVMGetParam(f, 3), zero = LLVMConstInt(i64, 0, 0);
            LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, n, zero, ""), loop, exit);
            LLVMPositionBuilderAtEnd(b, loop);
            LLVMValueRef i = LLVMBuildPhi(b, i64, "i");
            LLVMValueRef x = LLVMBuildLoad2(
                b, ty, LLVMBuildInBoundsGEP2(b, ty, LLVMGetParam(f, 1), &i, 1, ""), "");
            LLVMValueRef y = LLVMBuildLoad2(
                b, ty, LLVMBuildInBoundsGEP2(b, ty, LLVMGetParam(f, 2), &i, 1, ""), "");
            LLVMValueRef r = nx_x86_math_call(b, mod, (nx_x86_math_fn)fn, x, y);
            LLVMBuildStore(b, r, LLVMBuildInBoundsGEP2(b, ty, LLVMGetParam(f, 0), &i, 1, ""));
            LLVMValueRef next = LLVMBuildNSWAdd(b, i, LLVMConstInt(i64, 1, 0), "");
            LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, next, n, ""), loop, exit);
            LLVMValueRef iv[] = {zero, next};
            LLVMBasicBlockRef ib[] = {entry, loop};
            LLVMAddIncoming(i, iv, ib, 2);
            LLVMPositionBuilderAtEnd(b, exit);
            LLVMBuildRetVoid(b);
            LLVMDisposeBuilder(b);
            nx_x86_kernel *k = NULL;
            void *p = NULL;
            if (nx_x86_module_optimize(m, NX_X86_OPT_O3) != NX_OK ||
                nx_x86_module_compile(m, &k, NULL, NULL) != NX_OK ||
                nx_x86_kernel_lookup(k, name, &p) != NX_OK)
                die(ctx, "compile");
            loop_fn lf = (loop_fn)p;
            double t[32];
            lf(f64 ? (void *)od : (void *)of, f64 ? (void *)xd : (void *)xf,
               f64 ? (void *)yd : (void *)yf, N);
            for (int r = 0; r < reps; r++) {
                double t0 = now();
                for (int k2 = 0; k2 < 50; k2++)
                    lf(f64 ? (void *)od : (void *)of, f64 ? (void *)xd : (void *)xf,
                       f64 ? (void *)yd : (void *)yf, N);
                t[r] = (now() - t0) / (50.0 * N);
            }
            ns[f64] = 1e9 * median(t, reps);
            nx_x86_kernel_free(k);
        }
        double t[32];
        for (int r = 0; r < reps; r++) {
            volatile double sink = 0;
            double t0 = now();
            for (int i = 0; i < N; i++) {
                double v = xd[i];
                switch (fn) {
                case NX_X86_MATH_EXP:
                    v = exp(v);
                    break;
                case NX_X86_MATH_LOG:
                    v = log(v);
                    break;
                case NX_X86_MATH_LOG1P:
                    v = log1p(v);
                    break;
                case NX_X86_MATH_EXPM1:
                    v = expm1(v);
                    break;
                case NX_X86_MATH_SIN:
                    v = sin(v);
                    break;
                case NX_X86_MATH_COS:
                    v = cos(v);
                    break;
                case NX_X86_MATH_TANH:
                    v = tanh(v);
                    break;
                case NX_X86_MATH_ERF:
                    v = erf(v);
                    break;
                case NX_X86_MATH_POW:
                    v = pow(v, yd[i]);
                    break;
                default:
                    v = sqrt(v);
                    break;
                }
                sink += v;
            }
            t[r] = (now() - t0) / N;
            (void)sink;
        }
        printf("  %-6s %8.2f %8.2f %8.2f\n", nx_x86_math_name((nx_x86_math_fn)fn), ns[0], ns[1],
               1e9 * median(t, reps));
    }
    free(xd);
    free(yd);
    free(od);
    free(xf);
    free(yf);
    free(of);
    nx_ctx_free(ctx);
}

int main(int argc, char **argv)
{
    bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    int reps = quick ? 5 : 11;
    bench_compile(reps);
    bench_throughput(reps, quick);
    bench_sum(reps, quick);
    bench_math(reps);
    return 0;
}
