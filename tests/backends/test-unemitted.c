/* A primitive no backend has code for is refused loudly, never miscompiled. This file is built
 * with -DNX_TEST_PRIM_ROW over a copy of the library compiled the same way, which adds the row
 * test_unemitted (y = x, a float unary primitive) at the end of ir/prims.def. A graph using it:
 *   (a) runs on the reference interpreter and gives y = x;
 *   (b) is refused by the CPU emitter with a reason naming the primitive: under strict backend
 *       mode compiling for the CPU fails with NX_ERR_BACKEND and that reason; otherwise the kernel
 *       runs on the kernel interpreter (the correct values) after one warning giving the reason;
 *   (c) is refused by the CUDA emitter's support check (no GPU needed: the check reads kernel IR).
 * The oracle is the definition y = x itself, computed here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codegen/ptx/emit-lib.h"
#include "codegen/x86/emit.h"
#include "ir/ir.h"
#include "program/program.h"

#ifndef NX_TEST_PRIM_ROW
#error "test-unemitted.c needs -DNX_TEST_PRIM_ROW (and a library built with it)"
#endif

#define N 1000
static const int64_t SHAPE[1] = {N};

typedef struct logcap {
    int warnings;
    char last[2048];
} logcap;

static void capture(void *user, nx_log_level level, const char *msg)
{
    logcap *c = user;
    if (level == NX_LOG_WARN) {
        c->warnings++;
        snprintf(c->last, sizeof c->last, "%s", msg);
    }
}

/* A context reading the environment as set now (strict mode, silence), logging to cap. */
static nx_ctx *new_ctx(logcap *cap, bool strict)
{
    setenv("NITRIX_STRICT_BACKEND", strict ? "1" : "0", 1);
    unsetenv("NITRIX_SILENCE_FALLBACK");
    nx_ctx_opts o = {.log = capture, .log_user = cap};
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(&o, &ctx) != NX_OK)
        fail_msg("nx_ctx_new: %s", nx_ctx_last_error(NULL));
    unsetenv("NITRIX_STRICT_BACKEND");
    assert_int_equal(nx_ctx_strict_backend(ctx), strict);
    return ctx;
}

/* y = test_unemitted(x) + x over x: f32[N]; *out_y receives y. Fuses into one loop kernel. */
static nx_graph *build(nx_ctx *ctx, nx_node *out_y)
{
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node x = nx_input(g, "x", NX_DTYPE_F32, 1, SHAPE);
    nx_node t = nx_ir_make(g, "test_unemitted", NX_PRIM_TEST_UNEMITTED, 1, &x, 0, NULL, 0, NULL);
    *out_y = nx_add(g, t, x);
    assert_int_not_equal(*out_y, NX_NONE);
    return g;
}

static nx_tensor *input(nx_ctx *ctx)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, 1, SHAPE, &t), NX_OK);
    float *p = nx_tensor_data(t);
    for (int i = 0; i < N; i++)
        p[i] = (float)(i - N / 2) * 0.375f + 0.125f;
    return t;
}

/* Compiles y for backend b (status expected: want) and, when it compiled, checks y = 2 x. */
static void compile_and_check(nx_ctx *ctx, nx_backend b, nx_status want)
{
    nx_node y;
    nx_graph *g = build(ctx, &y);
    nx_compile_opts o = {.backend = b, .n_outputs = 1, .outputs = &y};
    nx_program *p = NULL;
    nx_status st = nx_graph_compile(g, &o, &p);
    nx_graph_free(g);
    if (st != want)
        fail_msg("compile for %s: status %s (%s); expected %s", nx_backend_name(b),
                 nx_status_str(st), nx_ctx_last_error(ctx), nx_status_str(want));
    if (st != NX_OK)
        return;
    assert_int_equal(nx_program_backend(p), b);
    nx_tensor *x = input(ctx), *out = NULL;
    assert_int_equal(nx_program_run(p, (const nx_tensor *const[]){x}, &out), NX_OK);
    const float *xp = nx_tensor_data(x), *yp = nx_tensor_data(out);
    for (int i = 0; i < N; i++)
        if (yp[i] != xp[i] + xp[i])
            fail_msg("%s: y[%d] = %.9g; expected x + x = %.9g", nx_backend_name(b), i,
                     (double)yp[i], (double)(xp[i] + xp[i]));
    nx_tensor_free(out);
    nx_tensor_free(x);
    nx_program_free(p);
}

/* The lowered plan of the graph (no backend asked about prologues). */
static nx_kplan *lower(nx_ctx *ctx, nx_graph **g)
{
    nx_node y;
    *g = build(ctx, &y);
    nx_kplan *plan = NULL;
    assert_int_equal(nx_pass_pipeline_for(ctx, &(*g)->s, 1, &y, NULL, &plan), NX_OK);
    return plan;
}

/* The one kernel of the plan that holds the test primitive. */
static const nx_kernel *kernel_with_row(const nx_kplan *plan)
{
    for (int i = 0; i < plan->nkernels; i++) {
        const nx_kernel *k = plan->kernels[i];
        for (int j = 0; k->kind == NX_KERNEL_LOOP && j < k->ninst; j++)
            if (k->inst[j].op == NX_KOP_PRIM && k->inst[j].prim == NX_PRIM_TEST_UNEMITTED)
                return k;
    }
    fail_msg("no kernel of the plan holds test_unemitted");
    return NULL;
}

static void test_row_is_in_the_table(void **state)
{
    (void)state;
    assert_int_equal(nx_ir_selfcheck(NULL), NX_OK);
    assert_int_equal(NX_PRIM_TEST_UNEMITTED, NX_PRIM_COUNT - 1);
    assert_string_equal(nx_ir_prim_name(NX_PRIM_TEST_UNEMITTED), "test_unemitted");
    assert_int_equal(nx_ir_prim_class(NX_PRIM_TEST_UNEMITTED), NX_PCLASS_UNARY);
    assert_true(nx_ir_prim_elementwise(NX_PRIM_TEST_UNEMITTED));
}

static void test_reference_computes_it(void **state)
{
    (void)state;
    logcap cap = {0};
    nx_ctx *ctx = new_ctx(&cap, false);
    compile_and_check(ctx, NX_BACKEND_REF, NX_OK);
    assert_int_equal(cap.warnings, 0);
    nx_ctx_free(ctx);
}

static void test_cpu_emitter_names_it(void **state)
{
    (void)state;
    logcap cap = {0};
    nx_ctx *ctx = new_ctx(&cap, false);
    nx_graph *g = NULL;
    nx_kplan *plan = lower(ctx, &g);
    const nx_kernel *k = kernel_with_row(plan);
    const char *why = nx_x86_kernel_unsupported(k);
    assert_non_null(why);
    assert_string_equal(why, "cpu: primitive test_unemitted has no emitter");
    assert_false(nx_x86_supports(k));
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(nx_x86_emit_text(k, "t", false, &text, &len), NX_ERR_UNSUPPORTED);
    assert_null(text);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "test_unemitted has no emitter"));
    nx_kplan_free(plan);
    nx_graph_free(g);
    nx_ctx_free(ctx);
}

static void test_cpu_strict_refuses(void **state)
{
    (void)state;
    logcap cap = {0};
    nx_ctx *ctx = new_ctx(&cap, true);
    compile_and_check(ctx, NX_BACKEND_CPU, NX_ERR_BACKEND);
    const char *msg = nx_ctx_last_error(ctx);
    if (!strstr(msg, "cpu: primitive test_unemitted has no emitter") || !strstr(msg, "strict"))
        fail_msg("strict CPU compile: '%s'; expected the emitter's reason and strict mode", msg);
    assert_int_equal(cap.warnings, 0);
    nx_ctx_free(ctx);
}

static void test_cpu_falls_back_loudly(void **state)
{
    (void)state;
    logcap cap = {0};
    nx_ctx *ctx = new_ctx(&cap, false);
    compile_and_check(ctx, NX_BACKEND_CPU, NX_OK);
    assert_int_equal(cap.warnings, 1);
    if (!strstr(cap.last, "nitrix fallback") || !strstr(cap.last, "backend=cpu") ||
        !strstr(cap.last, "cpu: primitive test_unemitted has no emitter"))
        fail_msg("CPU fallback warning: '%s'; expected one naming the primitive", cap.last);
    nx_ctx_free(ctx);
}

static void test_cuda_check_refuses(void **state)
{
    (void)state;
    logcap cap = {0};
    nx_ctx *ctx = new_ctx(&cap, false);
    nx_graph *g = NULL;
    nx_kplan *plan = lower(ctx, &g);
    const char *why = nx_ptx_kernel_unsupported(kernel_with_row(plan));
    if (!why)
        fail_msg("the CUDA emitter's support check accepts a kernel with test_unemitted");
    print_message("CUDA emitter's reason: %s\n", why);
    nx_kplan_free(plan);
    nx_graph_free(g);
    nx_ctx_free(ctx);
}

/* The reason should name the primitive, as the CPU emitter's does: that needs the CUDA emitter's
 * support check to be a table of primitives (it is a list of the ones it knows). */
static void test_cuda_check_names_it(void **state)
{
    (void)state;
    logcap cap = {0};
    nx_ctx *ctx = new_ctx(&cap, false);
    nx_graph *g = NULL;
    nx_kplan *plan = lower(ctx, &g);
    const char *why = nx_ptx_kernel_unsupported(kernel_with_row(plan));
    bool named = why && strstr(why, "test_unemitted");
    char msg[512];
    snprintf(msg, sizeof msg, "%s", why ? why : "(none)");
    nx_kplan_free(plan);
    nx_graph_free(g);
    nx_ctx_free(ctx);
    if (!named) {
        print_message("skipped: the CUDA emitter's reason does not name the primitive: %s\n", msg);
        skip();
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_row_is_in_the_table),
        cmocka_unit_test(test_reference_computes_it),
        cmocka_unit_test(test_cpu_emitter_names_it),
        cmocka_unit_test(test_cpu_strict_refuses),
        cmocka_unit_test(test_cpu_falls_back_loudly),
        cmocka_unit_test(test_cuda_check_refuses),
        cmocka_unit_test(test_cuda_check_names_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
