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

/* Verified IR can still hit one of LLVM's fatal paths (a 256-bit division has no lowering in
 * LLVM 14). That cannot be recovered; the handler makes sure the reason is logged. Run in a child
 * process, whose stderr is read back. */
static void test_fatal_error_logged(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        nx_ctx *ctx = NULL;
        nx_x86_jit *jit = NULL;
        nx_x86_module *m = NULL;
        nx_x86_kernel *k = NULL;
        const char *ir = "define i256 @f(i256 %a, i256 %b) {\n  %c = sdiv i256 %a, %b\n"
                         "  ret i256 %c\n}\n";
        if (nx_ctx_new(NULL, &ctx) != NX_OK || nx_x86_jit_get(ctx, &jit) != NX_OK ||
            nx_x86_module_parse(jit, "fatal", ir, strlen(ir), &m) != NX_OK)
            _exit(70);
        nx_x86_module_compile(m, &k, NULL, NULL);
        _exit(71); /* not reached if LLVM 14 still has no i256 division */
    }
    close(fds[1]);
    char buf[8192];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof buf - 1 && (r = read(fds[0], buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)r;
    buf[got] = '\0';
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 71)
        skip(); /* this LLVM lowers the division: nothing fatal to observe */
    /* LLVM ends the process with exit(1) or, for crash-diagnostic errors, abort() */
    assert_true((WIFEXITED(status) && WEXITSTATUS(status) != 70) ||
                (WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT));
    if (!strstr(buf, "nitrix: error: LLVM fatal error") || !strstr(buf, "library call"))
        fail_msg("child ended (status %#x) without the logged reason; stderr:\n%s", status, buf);
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
        cmocka_unit_test(test_fatal_error_logged),
        cmocka_unit_test(test_release_cycles),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_alloc_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
