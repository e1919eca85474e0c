/* Streaming stores on the CPU backend: a plain kernel whose output is at least 32 MiB, with rows a
 * multiple of 64 bytes and no border split, is emitted with the stream attribute, and after the
 * pipeline its 64-byte vector stores are aligned non-temporal stores followed by sfence; small
 * outputs, odd row lengths, border splits and 1-d kernels are emitted without it. The streamed
 * kernels' results are checked element by element against closed forms computed here in double
 * (exact for these inputs, then rounded once to float as the kernel's float arithmetic rounds). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/x86/emit.h"
#include "codegen/x86/jit.h"
#include "program/program.h"
#include "testutil.h"

typedef struct fixture {
    nx_test_alloc ta;
    nx_ctx *ctx;
    nx_graph *g;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    nx_allocator a = nx_test_allocator(&f->ta);
    nx_ctx_opts o = {.allocator = &a, .cache_dir = getenv("NITRIX_CACHE_DIR")};
    assert_int_equal(nx_ctx_new(&o, &f->ctx), NX_OK);
    assert_int_equal(nx_graph_new(f->ctx, &f->g), NX_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    nx_graph_free(f->g);
    nx_ctx_free(f->ctx);
    assert_int_equal(f->ta.live, 0);
    free(f);
    return 0;
}

/* The plan of outs (fails the test when lowering fails). */
static nx_kplan *plan_of(fixture *f, int nout, const nx_node *outs)
{
    nx_kplan *p = NULL;
    if (nx_pass_pipeline(f->ctx, &f->g->s, nout, outs, &p) != NX_OK)
        fail_msg("pipeline: %s", nx_ctx_last_error(f->ctx));
    return p;
}

/* Whether the emitted text of kernel ki asks for streaming stores. */
static bool emits_stream(fixture *f, const nx_kplan *p, int ki)
{
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(nx_x86_emit_text(p->kernels[ki], "k", true, &text, &len), NX_OK);
    bool s = strstr(text, "\"" NX_X86_STREAM_ATTR "\"") != NULL;
    nx_rt_free(f->ctx, text, len);
    return s;
}

/* The optimised IR of kernel ki contains every one of the words. */
static void check_optimised(fixture *f, const nx_kplan *p, int ki, int nwords, const char **words)
{
    nx_x86_jit *jit = NULL;
    assert_int_equal(nx_x86_jit_get(f->ctx, &jit), NX_OK);
    if (nx_x86_jit_target(jit)->vector_bits < 512) {
        print_message("no 512-bit vectors on this host: no 64-byte stores to stream\n");
        return;
    }
    char *text = NULL, *opt = NULL;
    size_t len = 0;
    nx_x86_module *m = NULL;
    assert_int_equal(nx_x86_emit_text(p->kernels[ki], "k", true, &text, &len), NX_OK);
    assert_int_equal(nx_x86_module_parse(jit, "k", text, strlen(text), &m), NX_OK);
    assert_int_equal(nx_x86_module_optimize(m, NX_X86_OPT_KERNEL), NX_OK);
    assert_int_equal(nx_x86_module_print(m, &opt), NX_OK);
    for (int i = 0; i < nwords; i++)
        if (!strstr(opt, words[i]))
            fail_msg("the optimised kernel has no '%s'", words[i]);
    nx_rt_free(f->ctx, opt, strlen(opt) + 1);
    nx_x86_module_free(m);
    nx_rt_free(f->ctx, text, len);
}

static nx_tensor *ramp(fixture *f, int ndim, const int64_t *shape)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(f->ctx, NX_DTYPE_F32, ndim, shape, &t), NX_OK);
    float *d = nx_tensor_data(t);
    for (int64_t i = 0; i < nx_tensor_numel(t); i++)
        d[i] = (float)((i * 7919) % 1000003) * 0.125f - 60000.0f;
    return t;
}

/* y0 = x * 2 + 1 and y1 = x * 0.5 - 3, 32 MiB each, streamed. */
static void test_streamed_outputs(void **state)
{
    fixture *f = *state;
    nx_graph *g = f->g;
    int64_t s[3] = {64, 512, 256};
    nx_node x = nx_input(g, "x", NX_DTYPE_F32, 3, s);
    nx_node outs[2] = {
        nx_add(g, nx_mul(g, x, nx_scalar(g, NX_DTYPE_F32, 2)), nx_scalar(g, NX_DTYPE_F32, 1)),
        nx_sub(g, nx_mul(g, x, nx_scalar(g, NX_DTYPE_F32, 0.5)), nx_scalar(g, NX_DTYPE_F32, 3)),
    };
    nx_kplan *p = plan_of(f, 2, outs);
    assert_true(p->nkernels <= 2);
    const char *words[3] = {"!nontemporal", "align 64", "@llvm.x86.sse.sfence()"};
    for (int k = 0; k < p->nkernels; k++) {
        assert_true(emits_stream(f, p, k));
        check_optimised(f, p, k, 3, words);
    }
    nx_x86_loop_fn fns[2] = {0};
    assert_int_equal(nx_x86_plan_compile(f->ctx, p, fns), NX_OK);
    for (int k = 0; k < p->nkernels; k++)
        assert_non_null(fns[k]);
    nx_tensor *in = ramp(f, 3, s), *got[2] = {0};
    assert_int_equal(nx_x86_plan_run(f->ctx, p, fns, (const nx_tensor *const *)&in, got), NX_OK);
    const float *xd = nx_tensor_data(in), *y0 = nx_tensor_data(got[0]),
                *y1 = nx_tensor_data(got[1]);
    for (int64_t i = 0; i < nx_tensor_numel(in); i++) {
        float w0 = (float)((double)xd[i] * 2 + 1), w1 = (float)((double)xd[i] * 0.5 - 3);
        if (y0[i] != w0 || y1[i] != w1)
            fail_msg("element %lld: %g, %g; expected %g, %g", (long long)i, y0[i], y1[i], w0, w1);
    }
    nx_tensor_free(in);
    nx_tensor_free(got[0]);
    nx_tensor_free(got[1]);
    nx_kplan_free(p);
}

/* A 3-tap maximum along rows with the reflect pad fused: a border split, which is not streamed
 * (measured slower), with an interior of 254 columns run as 15 vectors and a remainder loop.
 * Checked against max(x[j-1], x[j], x[j+1]) with x[-1] = x[0] and x[n] = x[n-1] (scipy's
 * reflect). */
static void test_split_rows(void **state)
{
    fixture *f = *state;
    nx_graph *g = f->g;
    int64_t s[3] = {64, 512, 256}, lo[3] = {0, 0, 1}, hi[3] = {0, 0, 1};
    nx_node x = nx_input(g, "x", NX_DTYPE_F32, 3, s);
    nx_node p = nx_pad(g, x, lo, hi, NX_PAD_REFLECT, 0);
    nx_node taps[3];
    for (int k = 0; k < 3; k++) {
        int64_t b[3] = {0, 0, k}, e[3] = {64, 512, 256 + k}, st[3] = {1, 1, 1};
        taps[k] = nx_slice(g, p, b, e, st);
    }
    nx_node y = nx_maximum(g, nx_maximum(g, taps[0], taps[1]), taps[2]);
    nx_kplan *pl = plan_of(f, 1, &y);
    assert_int_equal(pl->nkernels, 1);
    assert_false(emits_stream(f, pl, 0));
    nx_x86_loop_fn fns[1] = {0};
    assert_int_equal(nx_x86_plan_compile(f->ctx, pl, fns), NX_OK);
    nx_tensor *in = ramp(f, 3, s), *got = NULL;
    assert_int_equal(nx_x86_plan_run(f->ctx, pl, fns, (const nx_tensor *const *)&in, &got), NX_OK);
    const float *xd = nx_tensor_data(in), *yd = nx_tensor_data(got);
    for (int64_t r = 0; r < 64 * 512; r++) {
        const float *row = xd + r * 256;
        for (int64_t j = 0; j < 256; j++) {
            float l = row[j > 0 ? j - 1 : 0], c = row[j], h = row[j < 255 ? j + 1 : 255];
            float w = l > c ? l : c;
            w = h > w ? h : w;
            if (yd[r * 256 + j] != w)
                fail_msg("row %lld, column %lld: %g; expected %g", (long long)r, (long long)j,
                         yd[r * 256 + j], w);
        }
    }
    nx_tensor_free(in);
    nx_tensor_free(got);
    nx_kplan_free(pl);
}

/* No stream attribute: an output under 32 MiB, rows of 257 floats, a 1-d space (its loop is the
 * one split across threads). */
static void test_not_streamed(void **state)
{
    fixture *f = *state;
    nx_graph *g = f->g;
    int64_t small[3] = {16, 512, 256}, odd[3] = {64, 512, 257}, flat[1] = {64 * 512 * 256};
    nx_node one = nx_scalar(g, NX_DTYPE_F32, 1);
    nx_node outs[3] = {
        nx_add(g, nx_input(g, "a", NX_DTYPE_F32, 3, small), one),
        nx_add(g, nx_input(g, "b", NX_DTYPE_F32, 3, odd), one),
        nx_add(g, nx_input(g, "d", NX_DTYPE_F32, 1, flat), one),
    };
    for (int i = 0; i < 3; i++) {
        nx_kplan *p = plan_of(f, 1, &outs[i]);
        assert_int_equal(p->nkernels, 1);
        if (emits_stream(f, p, 0))
            fail_msg("case %d: streaming stores where they should not be", i);
        nx_kplan_free(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_streamed_outputs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_split_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_streamed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
