/* The x86 JIT layer: builder and textual IR kernels against C loops, vector code in the optimised
 * IR, object round trip between contexts, invalid IR and bad objects rejected with messages,
 * kernel release, threads, allocation failures. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen/x86/emit.h"
#include "jit-kernels.h"
#include "testutil.h"

#define N_ELEM 1037 /* not a multiple of any vector width: the remainder loop runs too */

static void fill(float *x, int64_t n, unsigned seed)
{
    srand(seed);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(rand() % 20001 - 10000) / 128.0f;
}

static nx_x86_jit *jit_of(nx_ctx *ctx)
{
    nx_x86_jit *jit = NULL;
    nx_status st = nx_x86_jit_get(ctx, &jit);
    if (st != NX_OK)
        fail_msg("nx_x86_jit_get: %s", nx_ctx_last_error(ctx));
    return jit;
}

static void check_ok(nx_ctx *ctx, nx_status st, const char *what)
{
    if (st != NX_OK)
        fail_msg("%s: %s: %s", what, nx_status_str(st), nx_ctx_last_error(ctx));
}

/* Compiles the builder max-plus kernel named name at opt and returns the kernel and function. */
static nx_x86_kernel *compile_maxplus(nx_ctx *ctx, const char *name, nx_x86_opt opt, maxplus_fn *fn)
{
    nx_x86_jit *jit = jit_of(ctx);
    nx_x86_module *m = NULL;
    check_ok(ctx, nx_x86_module_new(jit, name, &m), "module_new");
    jk_build_maxplus(m, name);
    check_ok(ctx, nx_x86_module_optimize(m, opt), "optimize");
    nx_x86_kernel *k = NULL;
    check_ok(ctx, nx_x86_module_compile(m, &k, NULL, NULL), "compile");
    void *addr = NULL;
    check_ok(ctx, nx_x86_kernel_lookup(k, name, &addr), "lookup");
    *fn = (maxplus_fn)addr;
    return k;
}

static void check_maxplus(maxplus_fn fn, unsigned seed)
{
    float *a = malloc(N_ELEM * sizeof *a), *b = malloc(N_ELEM * sizeof *b);
    float *out = malloc(N_ELEM * sizeof *out), *ref = malloc(N_ELEM * sizeof *ref);
    fill(a, N_ELEM, seed);
    fill(b, N_ELEM, seed + 1);
    fill(out, N_ELEM, seed + 2);
    memcpy(ref, out, N_ELEM * sizeof *ref);
    fn(out, a, b, N_ELEM);
    jk_ref_maxplus(ref, a, b, N_ELEM);
    /* one rounding per element in both: the results are identical bits */
    assert_memory_equal(out, ref, N_ELEM * sizeof *out);
    fn(out, a, b, 0); /* n = 0 touches nothing */
    assert_memory_equal(out, ref, N_ELEM * sizeof *out);
    free(a);
    free(b);
    free(out);
    free(ref);
}

static void test_target(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    const nx_x86_target *t = nx_x86_jit_target(jit_of(ctx));
    assert_true(strlen(t->cpu) > 0);
    assert_non_null(strstr(t->triple, "x86_64"));
    assert_non_null(strstr(t->features, "+sse2"));
    assert_true(strlen(t->data_layout) > 0);
    assert_true(t->llvm_version[0] >= '1');
    bool avx512 = __builtin_cpu_supports("avx512f"), avx2 = __builtin_cpu_supports("avx2");
    assert_int_equal(t->vector_bits, avx512 ? 512 : avx2 ? 256 : 128);
    /* the same JIT on the second call */
    assert_ptr_equal(jit_of(ctx), jit_of(ctx));
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void test_builder_kernel(void **state)
{
    (void)state;
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    maxplus_fn fn = NULL;
    nx_x86_kernel *k0 = compile_maxplus(ctx, "mp_none", NX_X86_OPT_NONE, &fn);
    check_maxplus(fn, 1);
    nx_x86_kernel *k3 = compile_maxplus(ctx, "mp_o3", NX_X86_OPT_O3, &fn);
    check_maxplus(fn, 7);
    nx_x86_kernel_info i0 = nx_x86_kernel_info_get(k0), i3 = nx_x86_kernel_info_get(k3);
    assert_true(i0.opt_seconds == 0 && i3.opt_seconds > 0);
    assert_true(i0.codegen_seconds > 0 && i3.codegen_seconds > 0 && i3.lookup_seconds > 0);
    assert_true(i0.object_bytes > 100 && i3.object_bytes > 100);
    nx_x86_kernel_free(k0);
    nx_x86_kernel_free(k3);
    nx_ctx_free(ctx);
}

/* The optimised module of the elementwise kernel holds vector operations of the host's width. */
static void test_vectorised(void **state)
{
    (void)state;
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    nx_x86_jit *jit = jit_of(ctx);
    const char *want = NULL;
    if (__builtin_cpu_supports("avx512f"))
        want = "<16 x float>";
    else if (__builtin_cpu_supports("avx2"))
        want = "<8 x float>";
    if (!want) {
        nx_ctx_free(ctx);
        skip();
    }
    nx_x86_module *m = NULL;
    check_ok(ctx, nx_x86_module_new(jit, "vec", &m), "module_new");
    jk_build_maxplus(m, "vec");
    char *text = NULL;
    check_ok(ctx, nx_x86_module_print(m, &text), "print");
    assert_null(strstr(text, " x float>")); /* scalar before the passes */
    nx_rt_free(ctx, text, strlen(text) + 1);
    check_ok(ctx, nx_x86_module_optimize(m, NX_X86_OPT_O3), "optimize");
    check_ok(ctx, nx_x86_module_print(m, &text), "print");
    if (!strstr(text, want) || !strstr(text, "fadd <"))
        fail_msg("optimised IR has no %s fadd:\n%s", want, text);
    bool avx512 = __builtin_cpu_supports("avx512f");
    assert_int_equal(avx512, strstr(text, "\"prefer-vector-width\"=\"512\"") != NULL);
    nx_rt_free(ctx, text, strlen(text) + 1);
    nx_x86_module_free(m);

    /* a function's own vector width preference is kept */
    check_ok(ctx, nx_x86_module_new(jit, "vec256", &m), "module_new");
    jk_build_maxplus(m, "vec256");
    LLVMAddTargetDependentFunctionAttr(LLVMGetNamedFunction(nx_x86_module_llvm(m), "vec256"),
                                       "prefer-vector-width", "256");
    check_ok(ctx, nx_x86_module_optimize(m, NX_X86_OPT_O3), "optimize");
    check_ok(ctx, nx_x86_module_print(m, &text), "print");
    if (!strstr(text, "<8 x float>") || strstr(text, "<16 x float>"))
        fail_msg("prefer-vector-width=256 was not kept:\n%s", text);
    nx_rt_free(ctx, text, strlen(text) + 1);
    nx_x86_module_free(m);

    /* the textual reduction vectorises too, thanks to `fadd reassoc` */
    char ir[2048];
    jk_text_sum(ir, sizeof ir, "vsum");
    check_ok(ctx, nx_x86_module_parse(jit, "vsum", ir, strlen(ir), &m), "parse");
    check_ok(ctx, nx_x86_module_optimize(m, NX_X86_OPT_O3), "optimize");
    check_ok(ctx, nx_x86_module_print(m, &text), "print");
    if (!strstr(text, want))
        fail_msg("optimised reduction has no %s:\n%s", want, text);
    nx_rt_free(ctx, text, strlen(text) + 1);
    nx_x86_module_free(m);
    nx_ctx_free(ctx);
}

static void test_text_kernels(void **state)
{
    (void)state;
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    nx_x86_jit *jit = jit_of(ctx);
    char ir[4096];
    jk_text_maxplus(ir, sizeof ir, "tmp");
    size_t len = strlen(ir);
    jk_text_sum(ir + len, sizeof ir - len, "tsum");
    nx_x86_module *m = NULL;
    check_ok(ctx, nx_x86_module_parse(jit, "text", ir, strlen(ir), &m), "parse");
    check_ok(ctx, nx_x86_module_optimize(m, NX_X86_OPT_O3), "optimize");
    nx_x86_kernel *k = NULL;
    check_ok(ctx, nx_x86_module_compile(m, &k, NULL, NULL), "compile");
    void *p = NULL;
    check_ok(ctx, nx_x86_kernel_lookup(k, "tmp", &p), "lookup tmp");
    check_maxplus((maxplus_fn)p, 11);
    check_ok(ctx, nx_x86_kernel_lookup(k, "tsum", &p), "lookup tsum");
    sum_fn sum = (sum_fn)p;

    enum { N = 100003 };
    float *a = malloc(N * sizeof *a);
    fill(a, N, 5);
    double exact = 0, mag = 0;
    for (int i = 0; i < N; i++) {
        exact += a[i];
        mag += fabs(a[i]);
    }
    /* any summation order: |error| <= (n-1) u sum|a| (Higham, 4.3), u = 2^-24; the double
     * reference is exact to 1e-16 relative here */
    float got = sum(a, N);
    double bound = (N - 1) * 0x1p-24 * mag;
    if (fabs(got - exact) > bound)
        fail_msg("sum %.9g, exact %.17g, bound %.3g", got, exact, bound);
    assert_true(sum(a, 0) == 0.0f);
    float one = 1.5f;
    assert_true(sum(&one, 1) == 1.5f);
    /* integers summed in any order are exact while partial sums stay below 2^24 */
    for (int i = 0; i < 4099; i++)
        a[i] = (float)(i % 7);
    double isum = 0;
    for (int i = 0; i < 4099; i++)
        isum += a[i];
    assert_true(sum(a, 4099) == (float)isum);
    free(a);
    nx_x86_kernel_free(k);
    nx_ctx_free(ctx);
}

/* Without reassoc flags a float sum stays scalar; the loop hint lets LLVM reorder it. */
static void test_reorder_hint(void **state)
{
    (void)state;
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    nx_x86_jit *jit = jit_of(ctx);
    enum { N = 100003 };
    float *a = malloc(N * sizeof *a);
    fill(a, N, 9);
    double exact = 0, mag = 0;
    for (int i = 0; i < N; i++) {
        exact += a[i];
        mag += fabs(a[i]);
    }
    for (int reorder = 0; reorder < 2; reorder++) {
        const char *name = reorder ? "sum_hint" : "sum_plain";
        nx_x86_module *m = NULL;
        check_ok(ctx, nx_x86_module_new(jit, name, &m), "module_new");
        jk_build_sum(m, name, reorder);
        check_ok(ctx, nx_x86_module_optimize(m, NX_X86_OPT_O3), "optimize");
        char *text = NULL;
        check_ok(ctx, nx_x86_module_print(m, &text), "print");
        bool vec = strstr(text, "x float>") != NULL;
        nx_rt_free(ctx, text, strlen(text) + 1);
        if (__builtin_cpu_supports("avx2"))
            assert_int_equal(vec, reorder); /* scalar exactly when the hint is absent */
        nx_x86_kernel *k = NULL;
        void *p = NULL;
        check_ok(ctx, nx_x86_module_compile(m, &k, NULL, NULL), "compile");
        check_ok(ctx, nx_x86_kernel_lookup(k, name, &p), "lookup");
        float got = ((sum_fn)p)(a, N);
        if (!reorder) { /* the canonical order: identical to the C loop */
            float c = 0;
            for (int i = 0; i < N; i++)
                c += a[i];
            assert_true(got == c);
        }
        double bound = (N - 1) * 0x1p-24 * mag;
        if (fabs(got - exact) > bound)
            fail_msg("%s: %.9g, exact %.17g, bound %.3g", name, got, exact, bound);
        nx_x86_kernel_free(k);
    }
    free(a);
    nx_ctx_free(ctx);
}

/* Compile once, store the bytes, load them in another context (as the disk cache does). */
static void test_object_round_trip(void **state)
{
    (void)state;
    nx_ctx *c1 = NULL, *c2 = NULL;
    assert_int_equal(nx_ctx_new(NULL, &c1), NX_OK);
    assert_int_equal(nx_ctx_new(NULL, &c2), NX_OK);
    nx_x86_module *m = NULL;
    check_ok(c1, nx_x86_module_new(jit_of(c1), "obj", &m), "module_new");
    jk_build_maxplus(m, "obj_mp");
    check_ok(c1, nx_x86_module_optimize(m, NX_X86_OPT_O3), "optimize");
    void *obj = NULL;
    size_t len = 0;
    check_ok(c1, nx_x86_module_emit_object(m, &obj, &len), "emit");
    assert_true(len > 64);
    assert_memory_equal(obj, "\177ELF", 4);
    nx_x86_module_free(m);
    /* compiling is deterministic: a second build of the kernel gives the same bytes */
    check_ok(c1, nx_x86_module_new(jit_of(c1), "obj", &m), "module_new");
    jk_build_maxplus(m, "obj_mp");
    check_ok(c1, nx_x86_module_optimize(m, NX_X86_OPT_O3), "optimize");
    nx_x86_kernel *k1 = NULL;
    void *obj1 = NULL;
    size_t len1 = 0;
    check_ok(c1, nx_x86_module_compile(m, &k1, &obj1, &len1), "compile");
    assert_int_equal(len1, len);
    assert_memory_equal(obj1, obj, len);
    nx_rt_free(c1, obj1, len1);

    void *copy = malloc(len);
    memcpy(copy, obj, len);
    nx_rt_free(c1, obj, len);
    nx_x86_kernel_free(k1);
    nx_ctx_free(c1);

    nx_x86_kernel *k2 = NULL;
    check_ok(c2, nx_x86_kernel_load(jit_of(c2), copy, len, &k2), "load");
    memset(copy, 0, len); /* the JIT holds its own copy */
    free(copy);
    void *p = NULL;
    check_ok(c2, nx_x86_kernel_lookup(k2, "obj_mp", &p), "lookup");
    check_maxplus((maxplus_fn)p, 21);
    nx_x86_kernel_free(k2);
    nx_ctx_free(c2);
}

static void expect_error(nx_ctx *ctx, nx_status st, nx_status want, const char *needle)
{
    assert_int_equal(st, want);
    const char *msg = nx_ctx_last_error(ctx);
    if (!strstr(msg, needle))
        fail_msg("error message '%s' lacks '%s'", msg, needle);
}

static void test_invalid_ir(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_x86_jit *jit = jit_of(ctx);

    /* builder: a block without a terminator, and a use that its definition does not dominate */
    nx_x86_module *m = NULL;
    check_ok(ctx, nx_x86_module_new(jit, "bad", &m), "module_new");
    LLVMContextRef c = nx_x86_module_context(m);
    LLVMTypeRef i32 = LLVMInt32TypeInContext(c);
    LLVMValueRef fn =
        LLVMAddFunction(nx_x86_module_llvm(m), "bad", LLVMFunctionType(i32, &i32, 1, 0));
    LLVMBasicBlockRef bb = LLVMAppendBasicBlockInContext(c, fn, "entry");
    LLVMBuilderRef b = LLVMCreateBuilderInContext(c);
    LLVMPositionBuilderAtEnd(b, bb);
    LLVMBuildAdd(b, LLVMGetParam(fn, 0), LLVMConstInt(i32, 1, 0), "x");
    expect_error(ctx, nx_x86_module_optimize(m, NX_X86_OPT_O3), NX_ERR_INTERNAL, "terminator");
    expect_error(ctx, nx_x86_module_emit_object(m, &(void *){NULL}, &(size_t){0}), NX_ERR_INTERNAL,
                 "not valid LLVM IR");
    nx_x86_kernel *k = NULL;
    expect_error(ctx, nx_x86_module_compile(m, &k, NULL, NULL), NX_ERR_INTERNAL, "terminator");
    assert_null(k);
    LLVMDisposeBuilder(b);

    /* text: a syntax error, a type error, and IR that parses but does not verify */
    const char *syntax = "define i32 @f(i32 %a) {\n  %x = addd i32 %a, 1\n  ret i32 %x\n}\n";
    expect_error(ctx, nx_x86_module_parse(jit, "syntax", syntax, strlen(syntax), &m),
                 NX_ERR_INTERNAL, "addd");
    const char *type = "define i32 @f(float %a) {\n  %x = add i32 %a, 1\n  ret i32 %x\n}\n";
    expect_error(ctx, nx_x86_module_parse(jit, "type", type, strlen(type), &m), NX_ERR_INTERNAL,
                 "does not parse");
    const char *dom = "define i32 @f(i32 %a) {\nentry:\n  br label %b2\nb1:\n"
                      "  %x = add i32 %a, 1\n  br label %b2\nb2:\n  ret i32 %x\n}\n";
    expect_error(ctx, nx_x86_module_parse(jit, "dom", dom, strlen(dom), &m), NX_ERR_INTERNAL,
                 "dominate");
    /* LLVM 14 has no opaque pointers: the notes' pitfall 3, reported, not fatal */
    const char *ptr = "define void @f(ptr %p) {\n  ret void\n}\n";
    nx_status st = nx_x86_module_parse(jit, "ptr", ptr, strlen(ptr), &m);
    if (st == NX_OK)
        nx_x86_module_free(m);
    else
        assert_int_equal(st, NX_ERR_INTERNAL);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void test_bad_object_and_symbols(void **state)
{
    (void)state;
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    nx_x86_jit *jit = jit_of(ctx);
    char junk[256];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (char)(i * 37 + 11);
    nx_x86_kernel *k = NULL;
    assert_int_equal(nx_x86_kernel_load(jit, junk, sizeof junk, &k), NX_ERR_BACKEND);
    assert_true(strlen(nx_ctx_last_error(ctx)) > 20);

    /* every truncation of a valid object is refused (a cut-short cache file) */
    nx_x86_module *mo = NULL;
    check_ok(ctx, nx_x86_module_new(jit, "trunc", &mo), "module_new");
    jk_build_maxplus(mo, "trunc");
    void *obj = NULL;
    size_t len = 0;
    check_ok(ctx, nx_x86_module_emit_object(mo, &obj, &len), "emit");
    nx_x86_module_free(mo);
    for (size_t cut = 0; cut < len; cut++) {
        k = NULL;
        nx_status st = nx_x86_kernel_load(jit, obj, cut, &k);
        if (st == NX_OK) {
            nx_x86_kernel_free(k);
            fail_msg("an object cut to %zu of %zu bytes was accepted", cut, len);
        }
        assert_int_equal(st, NX_ERR_BACKEND);
    }
    check_ok(ctx, nx_x86_kernel_load(jit, obj, len, &k), "load whole");
    nx_x86_kernel_free(k);
    nx_rt_free(ctx, obj, len);

    maxplus_fn fn = NULL;
    nx_x86_kernel *k1 = compile_maxplus(ctx, "dup", NX_X86_OPT_O3, &fn);
    void *p = NULL;
    expect_error(ctx, nx_x86_kernel_lookup(k1, "no_such_symbol", &p), NX_ERR_BACKEND,
                 "no_such_symbol");
    /* a second definition of a live name is refused; once the first is freed it is accepted */
    nx_x86_module *m = NULL;
    check_ok(ctx, nx_x86_module_new(jit, "dup2", &m), "module_new");
    jk_build_maxplus(m, "dup");
    nx_x86_kernel *k2 = NULL;
    expect_error(ctx, nx_x86_module_compile(m, &k2, NULL, NULL), NX_ERR_BACKEND, "dup");
    nx_x86_kernel_free(k1);
    nx_x86_kernel *k3 = compile_maxplus(ctx, "dup", NX_X86_OPT_O3, &fn);
    check_maxplus(fn, 3);
    nx_x86_kernel_free(k3);
    nx_x86_kernel_free(NULL);
    nx_ctx_free(ctx);
}

/* An error LLVM reports as a diagnostic (here from the inline assembler) would make LLVM print and
 * exit(1) without a handler; the JIT turns it into a status. */
static void test_diagnostic_captured(void **state)
{
    (void)state;
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    nx_x86_jit *jit = jit_of(ctx);
    const char *ir = "define void @g() {\n  call void asm sideeffect \"bogus_insn %eax\", \"\"()\n"
                     "  ret void\n}\n";
    nx_x86_module *m = NULL;
    check_ok(ctx, nx_x86_module_parse(jit, "asm", ir, strlen(ir), &m), "parse");
    nx_x86_kernel *k = NULL;
    expect_error(ctx, nx_x86_module_compile(m, &k, NULL, NULL), NX_ERR_BACKEND, "bogus_insn");
    /* the JIT still works afterwards */
    maxplus_fn fn = NULL;
    k = compile_maxplus(ctx, "after_diag", NX_X86_OPT_O3, &fn);
    check_maxplus(fn, 5);
    nx_x86_kernel_free(k);
    nx_ctx_free(ctx);
}

/* Valid IR that LLVM 14's x86 code generator cannot lower ends the process there
 * (report_fatal_error; the fatal-error handler can log, not return). Each construct below did so
 * when compiled without the check (an unchecked probe, in a child process); now each is refused
 * with NX_ERR_BACKEND before LLVM sees it. Every case runs in a child process, so a construct the
 * check missed ends the child, not the test, and is reported by name. Constructs of the same
 * families that LLVM does lower still compile. */
typedef struct lower_case {
    const char *name, *ir;
} lower_case;

static const lower_case fatal_cases[] = {
    {"sdiv i256", "define i256 @f(i256 %a, i256 %b) {\n %c = sdiv i256 %a, %b\n ret i256 %c\n}\n"},
    {"udiv i129", "define i129 @f(i129 %a, i129 %b) {\n %c = udiv i129 %a, %b\n ret i129 %c\n}\n"},
    {"urem i256 by a constant",
     "define i256 @f(i256 %a) {\n %c = urem i256 %a, 7\n ret i256 %c\n}\n"},
    {"sdiv <2 x i256>", "define <2 x i256> @f(<2 x i256> %a, <2 x i256> %b) {\n"
                        " %c = sdiv <2 x i256> %a, %b\n ret <2 x i256> %c\n}\n"},
    {"fptosi to i256", "define i256 @f(double %a) {\n %c = fptosi double %a to i256\n"
                       " ret i256 %c\n}\n"},
    {"uitofp from i200", "define float @f(i200 %a) {\n %c = uitofp i200 %a to float\n"
                         " ret float %c\n}\n"},
    {"fptosi.sat to i256", "declare i256 @llvm.fptosi.sat.i256.f64(double)\n"
                           "define i256 @f(double %a) {\n"
                           " %c = call i256 @llvm.fptosi.sat.i256.f64(double %a)\n"
                           " ret i256 %c\n}\n"},
    {"sdiv.fix i128", "declare i128 @llvm.sdiv.fix.i128(i128, i128, i32)\n"
                      "define i128 @f(i128 %a) {\n"
                      " %c = call i128 @llvm.sdiv.fix.i128(i128 %a, i128 %a, i32 3)\n"
                      " ret i128 %c\n}\n"},
    {"umul.fix i256", "declare i256 @llvm.umul.fix.i256(i256, i256, i32)\n"
                      "define i256 @f(i256 %a) {\n"
                      " %c = call i256 @llvm.umul.fix.i256(i256 %a, i256 %a, i32 3)\n"
                      " ret i256 %c\n}\n"},
    {"an NVVM intrinsic", "declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()\ndefine i32 @f() {\n"
                          " %c = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n ret i32 %c\n}\n"},
    {"an AArch64 intrinsic", "declare i64 @llvm.aarch64.get.fpcr()\ndefine i64 @f() {\n"
                             " %c = call i64 @llvm.aarch64.get.fpcr()\n ret i64 %c\n}\n"},
    {"an AMX intrinsic", "declare void @llvm.x86.tilerelease()\ndefine void @f() {\n"
                         " call void @llvm.x86.tilerelease()\n ret void\n}\n"},
    {"a matrix intrinsic",
     "declare <4 x float> @llvm.matrix.multiply.v4f32.v4f32.v4f32(<4 x float>, <4 x float>, "
     "i32, i32, i32)\ndefine <4 x float> @f(<4 x float> %a) {\n"
     " %c = call <4 x float> @llvm.matrix.multiply.v4f32.v4f32.v4f32(<4 x float> %a, "
     "<4 x float> %a, i32 2, i32 2, i32 2)\n ret <4 x float> %c\n}\n"},
    {"bfloat arithmetic", "define bfloat @f(bfloat %a) {\n %c = fadd bfloat %a, %a\n"
                          " ret bfloat %c\n}\n"},
    {"a bfloat argument", "define void @f(bfloat %a) {\n ret void\n}\n"},
    {"a scalable vector", "define <vscale x 4 x float> @f(<vscale x 4 x float> %a) {\n"
                          " %c = fadd <vscale x 4 x float> %a, %a\n"
                          " ret <vscale x 4 x float> %c\n}\n"},
    {"atomicrmw i256", "define void @f(i256* %p) {\n %c = atomicrmw add i256* %p, i256 1 seq_cst\n"
                       " ret void\n}\n"},
    {"cmpxchg i256", "define void @f(i256* %p) {\n"
                     " %c = cmpxchg i256* %p, i256 0, i256 1 seq_cst seq_cst\n ret void\n}\n"},
    {"atomic load i256", "define i256 @f(i256* %p) {\n"
                         " %c = load atomic i256, i256* %p seq_cst, align 32\n ret i256 %c\n}\n"},
    {"an unknown GC strategy", "define void @f() gc \"bogus\" {\n ret void\n}\n"},
};

static const lower_case fine_cases[] = {
    {"udiv i128", "define i128 @f(i128 %a, i128 %b) {\n %c = udiv i128 %a, %b\n ret i128 %c\n}\n"},
    {"mul i256", "define i256 @f(i256 %a, i256 %b) {\n %c = mul i256 %a, %b\n ret i256 %c\n}\n"},
    {"fptosi to i128", "define i128 @f(double %a) {\n %c = fptosi double %a to i128\n"
                       " ret i128 %c\n}\n"},
    {"an SSE intrinsic", "declare <4 x float> @llvm.x86.sse.rcp.ps(<4 x float>)\n"
                         "define <4 x float> @f(<4 x float> %a) {\n"
                         " %c = call <4 x float> @llvm.x86.sse.rcp.ps(<4 x float> %a)\n"
                         " ret <4 x float> %c\n}\n"},
    {"fp128 arithmetic", "define fp128 @f(fp128 %a) {\n %c = fadd fp128 %a, %a\n"
                         " ret fp128 %c\n}\n"},
};

/* In a child: parse and compile ir. Exit 0: refused with NX_ERR_BACKEND naming the construct;
 * 1: compiled; 2: another error; 3: set-up failed. */
static int compile_in_child(const char *name, const char *ir)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        nx_ctx *ctx = NULL;
        nx_x86_jit *jit = NULL;
        nx_x86_module *m = NULL;
        nx_x86_kernel *k = NULL;
        if (nx_ctx_new(NULL, &ctx) != NX_OK || nx_x86_jit_get(ctx, &jit) != NX_OK)
            _exit(3);
        nx_status st = nx_x86_module_parse(jit, name, ir, strlen(ir), &m);
        if (st == NX_OK)
            st = nx_x86_module_compile(m, &k, NULL, NULL);
        if (st == NX_OK)
            _exit(1);
        const char *msg = nx_ctx_last_error(ctx);
        if (st == NX_ERR_BACKEND && strstr(msg, "cannot lower") && strstr(msg, "function 'f'"))
            _exit(0);
        fprintf(stderr, "%s: status %d: %s\n", name, (int)st, msg);
        _exit(2);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status))
        fail_msg("%s: the process ended by signal %d (LLVM fatal error not refused)", name,
                 WIFSIGNALED(status) ? WTERMSIG(status) : -1);
    return WEXITSTATUS(status);
}

static void test_fatal_constructs_refused(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof fatal_cases / sizeof *fatal_cases; i++) {
        int rc = compile_in_child(fatal_cases[i].name, fatal_cases[i].ir);
        if (rc != 0)
            fail_msg("%s: expected a refusal, got %s", fatal_cases[i].name,
                     rc == 1 ? "a compiled kernel" : "another error");
    }
    for (size_t i = 0; i < sizeof fine_cases / sizeof *fine_cases; i++) {
        int rc = compile_in_child(fine_cases[i].name, fine_cases[i].ir);
        if (rc != 1)
            fail_msg("%s: LLVM lowers it, but it was not compiled (exit %d)", fine_cases[i].name,
                     rc);
    }
    /* in-process too: the refusal leaves the JIT working */
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    nx_x86_jit *jit = jit_of(ctx);
    nx_x86_module *m = NULL;
    expect_error(ctx, nx_x86_module_parse(jit, "wide", fatal_cases[0].ir,
                                          strlen(fatal_cases[0].ir), &m),
                 NX_ERR_BACKEND, "integer division or remainder wider than 128 bits");
    /* a module built through the C API reaches the check at emit time */
    check_ok(ctx, nx_x86_module_new(jit, "built", &m), "module_new");
    LLVMContextRef c = nx_x86_module_context(m);
    LLVMTypeRef i256 = LLVMIntTypeInContext(c, 256);
    LLVMTypeRef params[2] = {i256, i256};
    LLVMValueRef fn =
        LLVMAddFunction(nx_x86_module_llvm(m), "f", LLVMFunctionType(i256, params, 2, 0));
    LLVMBuilderRef b = LLVMCreateBuilderInContext(c);
    LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(c, fn, "entry"));
    LLVMBuildRet(b, LLVMBuildSRem(b, LLVMGetParam(fn, 0), LLVMGetParam(fn, 1), "r"));
    LLVMDisposeBuilder(b);
    expect_error(ctx, nx_x86_module_optimize(m, NX_X86_OPT_KERNEL), NX_ERR_BACKEND,
                 "cannot lower");
    expect_error(ctx, nx_x86_module_emit_object(m, &(void *){NULL}, &(size_t){0}),
                 NX_ERR_BACKEND, "cannot lower");
    nx_x86_kernel *k = NULL;
    expect_error(ctx, nx_x86_module_compile(m, &k, NULL, NULL), NX_ERR_BACKEND, "cannot lower");
    maxplus_fn mp = NULL;
    k = compile_maxplus(ctx, "after_refusal", NX_X86_OPT_O3, &mp);
    check_maxplus(mp, 4);
    nx_x86_kernel_free(k);
    nx_ctx_free(ctx);
}

/* ---- a refused kernel falls back to the kernel interpreter ----------------------------------*/

typedef struct fb_log {
    int warn;
    char last[1024];
} fb_log;

static void fb_log_fn(void *user, nx_log_level level, const char *msg)
{
    fb_log *l = user;
    if (level == NX_LOG_WARN) {
        l->warn++;
        snprintf(l->last, sizeof l->last, "%s", msg);
    }
}

/* Compiles y = x * x + c on the CPU backend in a fresh context over an empty cache directory and
 * runs it on x = 0..n-1. Returns the compile's status; on NX_OK checks y exactly. */
static nx_status run_square_plus(double c, const char *cache, fb_log *l, bool strict)
{
    if (strict)
        setenv("NITRIX_STRICT_BACKEND", "1", 1);
    nx_ctx_opts o = {.cache_dir = cache, .log = fb_log_fn, .log_user = l};
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(&o, &ctx), NX_OK);
    unsetenv("NITRIX_STRICT_BACKEND");
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    int64_t n = 37;
    nx_node x = nx_input(g, "x", NX_DTYPE_F32, 1, &n);
    nx_node y = nx_add(g, nx_mul(g, x, x), nx_scalar(g, NX_DTYPE_F32, c));
    nx_compile_opts co = {.backend = NX_BACKEND_CPU, .n_outputs = 1, .outputs = &y};
    nx_program *p = NULL;
    nx_status st = nx_graph_compile(g, &co, &p);
    if (st == NX_OK) {
        nx_tensor *xt = NULL, *yt = NULL;
        assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, 1, &n, &xt), NX_OK);
        float *xs = nx_tensor_data(xt);
        for (int i = 0; i < n; i++)
            xs[i] = (float)i;
        const nx_tensor *ins[1] = {xt};
        assert_int_equal(nx_program_run(p, ins, &yt), NX_OK);
        const float *ys = nx_tensor_data(yt);
        for (int i = 0; i < n; i++)
            if (ys[i] != (float)(i * i + c))
                fail_msg("y[%d] = %g, expected %g", i, (double)ys[i], (double)(i * i + c));
        nx_tensor_free(xt);
        nx_tensor_free(yt);
    } else {
        snprintf(l->last, sizeof l->last, "%s", nx_ctx_last_error(ctx));
    }
    nx_program_free(p);
    nx_graph_free(g);
    nx_ctx_free(ctx);
    return st;
}

/* A kernel module that fails verification, or that LLVM could not lower, is refused before it
 * reaches LLVM's optimiser or code generator; the program then runs the kernel on the kernel
 * interpreter with one loud warning naming the reason (the placement policy's fallback), or fails
 * cleanly under strict backend mode. The IR is made bad through the test-only hook
 * nx_x86_test_ir_suffix (one more function in the module). */
static void test_refused_module_falls_back(void **state)
{
    (void)state;
    char cache[] = "/tmp/nx-jit-refused-XXXXXX";
    assert_non_null(mkdtemp(cache));
    static const struct {
        const char *what, *ir, *needle;
    } cases[] = {
        {"fails verification",
         "define i32 @nx_test_bad(i32 %a) {\nentry:\n  br label %b2\nb1:\n  %x = add i32 %a, 1\n"
         "  br label %b2\nb2:\n  ret i32 %x\n}\n",
         "not valid LLVM IR"},
        {"cannot be lowered",
         "define i256 @nx_test_bad(i256 %a, i256 %b) {\n  %c = sdiv i256 %a, %b\n"
         "  ret i256 %c\n}\n",
         "cannot lower"},
    };
    for (int i = 0; i < 2; i++) {
        nx_x86_test_ir_suffix = cases[i].ir;
        fb_log l = {0};
        double c = 1 + i; /* distinct kernels: the warning is once per kernel per process */
        nx_status st = run_square_plus(c, cache, &l, false);
        if (st != NX_OK)
            fail_msg("a module that %s: compile failed: %s", cases[i].what, l.last);
        assert_int_equal(l.warn, 1);
        if (!strstr(l.last, "kernel interpreter") || !strstr(l.last, cases[i].needle))
            fail_msg("a module that %s: warning '%s'", cases[i].what, l.last);
        fb_log ls = {0};
        st = run_square_plus(c + 10, cache, &ls, true);
        assert_int_equal(st, NX_ERR_BACKEND);
        if (!strstr(ls.last, "NITRIX_STRICT_BACKEND") || !strstr(ls.last, cases[i].needle))
            fail_msg("strict mode, a module that %s: error '%s'", cases[i].what, ls.last);
    }
    nx_x86_test_ir_suffix = NULL;
    fb_log l = {0}; /* and without the hook the same program compiles, silently */
    assert_int_equal(run_square_plus(1, cache, &l, false), NX_OK);
    assert_int_equal(l.warn, 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache);
    assert_int_equal(system(cmd), 0);
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (!f)
        return -1;
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
        rss = -1;
    fclose(f);
    return rss < 0 ? -1 : rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* KiB of anonymous executable mappings: where the JIT's code lives. */
static long exec_kib(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    long total = 0;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8];
        int path_at = 0;
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms, &path_at) < 3)
            continue;
        bool anon = path_at == 0 || line[path_at] == '\0' || line[path_at] == '\n';
        if (perms[2] == 'x' && anon)
            total += (long)((hi - lo) / 1024);
    }
    fclose(f);
    return total;
}

/* Under ASan freed memory sits in its quarantine, so RSS says nothing. gcc defines
 * __SANITIZE_ADDRESS__; clang answers __has_feature(address_sanitizer). */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

/* Compiling and freeing the same kernel many times keeps memory bounded: freed code and data go. */
static void test_release_cycles(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_x86_jit *jit = jit_of(ctx);
    long rss0 = 0, exec0 = 0, exec_live = 0;
    enum { WARM = 40, CYCLES = 240, LIVE = 30 };
    for (int i = 0; i < CYCLES; i++) {
        if (i == WARM) {
            rss0 = rss_kib();
            exec0 = exec_kib();
        }
        maxplus_fn fn = NULL;
        nx_x86_kernel *k = compile_maxplus(ctx, "cycle", NX_X86_OPT_NONE, &fn);
        if (i % 50 == 0)
            check_maxplus(fn, (unsigned)i);
        nx_x86_kernel_free(k);
    }
    long rss1 = rss_kib(), exec1 = exec_kib();
    /* the probe works: LIVE kernels held at once do show up as executable memory */
    nx_x86_kernel *held[LIVE];
    for (int i = 0; i < LIVE; i++) {
        char name[16];
        snprintf(name, sizeof name, "held%d", i);
        maxplus_fn fn = NULL;
        held[i] = compile_maxplus(ctx, name, NX_X86_OPT_NONE, &fn);
    }
    exec_live = exec_kib();
    for (int i = 0; i < LIVE; i++)
        nx_x86_kernel_free(held[i]);
    nx_x86_jit_stats s;
    nx_x86_jit_stats_get(jit, &s);
    assert_int_equal(s.kernels_live, 0);
    assert_int_equal(s.kernels_total, CYCLES + LIVE);
    print_message("release cycles: exec %ld -> %ld KiB over %d cycles (%d live kernels: %ld KiB); "
                  "RSS %ld -> %ld KiB\n",
                  exec0, exec1, CYCLES - WARM, LIVE, exec_live, rss0, rss1);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
    /* each kernel maps at least one 4 KiB code page: 200 leaked kernels would add 800 KiB */
    assert_true(exec_live - exec1 >= 4 * LIVE);
    assert_true(exec1 - exec0 < 64);
    if (!UNDER_ASAN && rss0 > 0 && rss1 > 0)
        assert_true(rss1 - rss0 < 600);
}

typedef struct {
    nx_ctx *ctx;
    int id;
    int ok;
} thread_arg;

static void *thread_body(void *p)
{
    thread_arg *t = p;
    for (int round = 0; round < 6; round++) {
        char name[32];
        snprintf(name, sizeof name, "t%d_r%d", t->id, round);
        nx_x86_jit *jit = NULL;
        nx_x86_module *m = NULL;
        nx_x86_kernel *k = NULL;
        void *fn = NULL;
        if (nx_x86_jit_get(t->ctx, &jit) != NX_OK || nx_x86_module_new(jit, name, &m) != NX_OK)
            return NULL;
        jk_build_maxplus(m, name);
        if (nx_x86_module_optimize(m, NX_X86_OPT_O3) != NX_OK ||
            nx_x86_module_compile(m, &k, NULL, NULL) != NX_OK ||
            nx_x86_kernel_lookup(k, name, &fn) != NX_OK)
            return NULL;
        float out[100], ref[100], a[100], b[100];
        fill(a, 100, (unsigned)round);
        fill(b, 100, (unsigned)t->id);
        fill(out, 100, 99);
        memcpy(ref, out, sizeof out);
        ((maxplus_fn)fn)(out, a, b, 100);
        jk_ref_maxplus(ref, a, b, 100);
        nx_x86_kernel_free(k);
        if (memcmp(out, ref, sizeof out) != 0)
            return NULL;
    }
    t->ok = 1;
    return NULL;
}

/* Several threads of one context create the JIT, compile, run and free kernels at once. */
static void test_threads(void **state)
{
    (void)state;
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    enum { T = 4 };
    pthread_t th[T];
    thread_arg args[T];
    for (int i = 0; i < T; i++) {
        args[i] = (thread_arg){ctx, i, 0};
        assert_int_equal(pthread_create(&th[i], NULL, thread_body, &args[i]), 0);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        if (!args[i].ok)
            fail_msg("thread %d failed: %s", i, nx_ctx_last_error(ctx));
    }
    nx_ctx_free(ctx);
}

/* Every allocation from the context allocator may fail: NX_ERR_NOMEM, nothing leaked. */
static nx_status sweep_body(nx_ctx *ctx, void *user)
{
    (void)user;
    nx_x86_jit *jit = NULL;
    nx_status st = nx_x86_jit_get(ctx, &jit);
    if (st != NX_OK)
        return st;
    nx_x86_module *m = NULL;
    if ((st = nx_x86_module_new(jit, "sweep", &m)) != NX_OK)
        return st;
    jk_build_maxplus(m, "sweep");
    void *obj = NULL;
    size_t len = 0;
    if ((st = nx_x86_module_optimize(m, NX_X86_OPT_O3)) != NX_OK ||
        (st = nx_x86_module_emit_object(m, &obj, &len)) != NX_OK) {
        nx_x86_module_free(m);
        return st;
    }
    char *text = NULL;
    if ((st = nx_x86_module_print(m, &text)) != NX_OK) {
        nx_rt_free(ctx, obj, len);
        nx_x86_module_free(m);
        return st;
    }
    nx_rt_free(ctx, text, strlen(text) + 1);
    nx_x86_kernel *k = NULL;
    void *obj2 = NULL;
    size_t len2 = 0;
    st = nx_x86_module_compile(m, &k, &obj2, &len2);
    if (st != NX_OK) {
        nx_rt_free(ctx, obj, len);
        return st;
    }
    nx_rt_free(ctx, obj2, len2);
    nx_x86_kernel_free(k);
    st = nx_x86_kernel_load(jit, obj, len, &k);
    nx_rt_free(ctx, obj, len);
    if (st != NX_OK)
        return st;
    void *fn = NULL;
    st = nx_x86_kernel_lookup(k, "sweep", &fn);
    if (st == NX_OK) {
        float out[3] = {1, 5, -2}, a[3] = {1, 2, 3}, b[3] = {1, 1, 1};
        ((maxplus_fn)fn)(out, a, b, 3);
        if (out[0] != 2 || out[1] != 5 || out[2] != 4)
            st = NX_ERR_INTERNAL;
    }
    nx_x86_kernel_free(k);
    /* textual IR that uses the math library (defined while parsing) */
    char ir[2048];
    jk_text_sum(ir, sizeof ir, "sweep_sum");
    size_t n = strlen(ir);
    snprintf(ir + n, sizeof ir - n,
             "declare float @nx.math.exp.f32(float)\n"
             "define float @sweep_exp(float %%x) {\n"
             "  %%e = call float @nx.math.exp.f32(float %%x)\n  ret float %%e\n}\n");
    if (st == NX_OK && (st = nx_x86_module_parse(jit, "s", ir, strlen(ir), &m)) == NX_OK)
        nx_x86_module_free(m);
    return st;
}

static void test_alloc_sweep(void **state)
{
    (void)state;
    int64_t n = nx_test_alloc_sweep(sweep_body, NULL, 200);
    assert_true(n > 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_target),
        cmocka_unit_test(test_builder_kernel),
        cmocka_unit_test(test_vectorised),
        cmocka_unit_test(test_text_kernels),
        cmocka_unit_test(test_reorder_hint),
        cmocka_unit_test(test_object_round_trip),
        cmocka_unit_test(test_invalid_ir),
        cmocka_unit_test(test_bad_object_and_symbols),
        cmocka_unit_test(test_diagnostic_captured),
        cmocka_unit_test(test_fatal_constructs_refused),
        cmocka_unit_test(test_refused_module_falls_back),
        cmocka_unit_test(test_release_cycles),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_alloc_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
