/* The CUDA emitter's per-primitive table (codegen/ptx/emit.c): a primitive without a row, or
 * whose operands are of a class its row does not take, is refused with a reason naming it, never
 * emitted as some default expression.
 *   - Every primitive in a loop kernel's PRIM instruction, over f32 and over i32 operands: the
 *     elementwise ones (the shape rules unary, binary, select and cast, read from the primitive
 *     table) are taken, except the float-only math over integers; every other primitive is
 *     refused with "cuda: primitive <name> has no emitter" by nx_ptx_unsupported, by the kernel
 *     check of every kind and by the backend's supports().
 *   - A library kernel of a primitive with no device routine: the same reason. */
#include <stdio.h>
#include <string.h>

#include "codegen/ptx/emit-lib.h"
#include "ir/ir.h"
#include "testutil.h"

/* out[i] = x[i] (op) x[i] over 8 elements of dtype d; *prim is the PRIM instruction's id. */
static nx_kernel *one_prim(nx_ctx *ctx, nx_dtype d, int *prim)
{
    static const int64_t shape[1] = {8};
    nx_kernel *k = NULL;
    assert_int_equal(nx_kernel_new(ctx, NX_KERNEL_LOOP, "one_prim", &k), NX_OK);
    int out = nx_kernel_buffer(k, NX_KBUF_OUT, d, 1, shape, 1);
    int in = nx_kernel_buffer(k, NX_KBUF_IN, d, 1, shape, 0);
    nx_kernel_space(k, 1, shape);
    int32_t x = nx_kernel_load(k, in, nx_kernel_idx(k, 0));
    *prim = nx_kernel_prim(k, NX_PRIM_ADD, d, x, x, -1);
    assert_true(nx_kernel_store(k, out, *prim));
    assert_int_equal(nx_kernel_validate(k), NX_OK);
    return k;
}

static bool elementwise(int p)
{
    nx_ir_shape_fn fn = nx_ir_prims[p].shape;
    return fn == nx_ir_shape_unary || fn == nx_ir_shape_binary || fn == nx_ir_shape_select ||
           fn == nx_ir_shape_cast;
}

/* The shape rules' "(float)" primitives: math with no integer form. */
static bool float_only(int p)
{
    static const int list[] = {NX_PRIM_EXP,  NX_PRIM_LOG,   NX_PRIM_LOG1P, NX_PRIM_EXPM1,
                               NX_PRIM_SQRT, NX_PRIM_SIN,   NX_PRIM_COS,   NX_PRIM_TANH,
                               NX_PRIM_ERF,  NX_PRIM_FLOOR, NX_PRIM_CEIL,  NX_PRIM_ROUND,
                               NX_PRIM_ATAN2};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
        if (list[i] == p)
            return true;
    return false;
}

static void test_every_primitive(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    static const nx_dtype dts[] = {NX_DTYPE_F32, NX_DTYPE_I32};
    int taken = 0, refused = 0;
    for (size_t d = 0; d < 2; d++) {
        int id = -1;
        nx_kernel *k = one_prim(ctx, dts[d], &id);
        for (int p = 0; p < NX_PRIM_COUNT; p++) {
            k->inst[id].prim = (uint16_t)p;
            const char *why = nx_ptx_unsupported(k);
            bool want = elementwise(p) && !(dts[d] == NX_DTYPE_I32 && float_only(p));
            const char *name = nx_ir_prim_name(p);
            if (want && why)
                fail_msg("%s over %s: refused (%s)", name, nx_dtype_name(dts[d]), why);
            if (!want && !why)
                fail_msg("%s over %s: taken; no emitter was expected", name,
                         nx_dtype_name(dts[d]));
            if (!want) {
                char expect[96];
                snprintf(expect, sizeof expect, "cuda: primitive %s has no emitter", name);
                if (!strstr(why, expect))
                    fail_msg("%s over %s: reason \"%s\" lacks \"%s\"", name,
                             nx_dtype_name(dts[d]), why, expect);
                assert_ptr_equal(nx_ptx_kernel_unsupported(k), why);
                assert_false(nx_ptx_backend.supports(k));
                refused++;
            } else {
                taken++;
            }
        }
        nx_kernel_free(k);
    }
    /* both kinds occur: the loop above tested something */
    assert_true(taken > 40 && refused > 40);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* A primitive number past the table (a row added without an emitter would look the same to an
 * older table) is refused, not read out of bounds. */
static void test_out_of_table(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int id = -1;
    nx_kernel *k = one_prim(ctx, NX_DTYPE_F32, &id);
    k->inst[id].prim = NX_PRIM_COUNT;
    const char *why = nx_ptx_unsupported(k);
    assert_non_null(why);
    assert_non_null(strstr(why, "has no emitter"));
    nx_kernel_free(k);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* A library kernel whose primitive has no device routine (an elementwise primitive is never a
 * library kernel): refused by name, and nx_ptx_lib_emit emits nothing. */
static void test_library_without_routine(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int id = -1;
    nx_kernel *k = one_prim(ctx, NX_DTYPE_F32, &id);
    nx_kernel lib = *k;
    lib.kind = NX_KERNEL_LIBRARY;
    lib.lib_prim = NX_PRIM_WINDOW;
    const char *why = nx_ptx_kernel_unsupported(&lib);
    assert_non_null(why);
    assert_string_equal(why, "cuda: primitive window has no emitter");
    char *src = NULL;
    size_t len = 0;
    nx_ptx_launch l;
    assert_int_equal(nx_ptx_lib_emit(&lib, "k", false, &src, &len, &l), NX_ERR_UNSUPPORTED);
    assert_null(src);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "cuda: primitive window has no emitter"));
    nx_kernel_free(k);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_primitive),
        cmocka_unit_test(test_out_of_table),
        cmocka_unit_test(test_library_without_routine),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
