/* Kernel IR on its own: hand-built kernels run by the reference kernel interpreter against values
 * computed by hand or by closed forms, and the validator's refusals. */
#include <math.h>
#include <string.h>

#include "codegen/kernel.h"
#include "testutil.h"

/* C[i, j] = max_k A[i, k] + B[k, j], A 2x3, B 3x2: the semiring contraction as one kernel. */
static nx_kernel *maxplus_kernel(nx_ctx *ctx)
{
    nx_kernel *k = NULL;
    assert_int_equal(nx_kernel_new(ctx, NX_KERNEL_LOOP, "maxplus", &k), NX_OK);
    int64_t sa[2] = {2, 3}, sb[2] = {3, 2}, sc[2] = {2, 2};
    int ba = nx_kernel_buffer(k, NX_KBUF_IN, NX_DTYPE_F32, 2, sa, 0);
    int bb = nx_kernel_buffer(k, NX_KBUF_IN, NX_DTYPE_F32, 2, sb, 1);
    int bc = nx_kernel_buffer(k, NX_KBUF_OUT, NX_DTYPE_F32, 2, sc, 2);
    nx_kernel_space(k, 2, sc);
    int lk = nx_kernel_loop(k, 3);
    int32_t i = nx_kernel_idx(k, 0), j = nx_kernel_idx(k, 1), kk = nx_kernel_idx(k, lk);
    int32_t c3 = nx_kernel_const_i(k, NX_DTYPE_I64, 3), c2 = nx_kernel_const_i(k, NX_DTYPE_I64, 2);
    int32_t oa = nx_kernel_prim(k, NX_PRIM_ADD, NX_DTYPE_I64,
                                nx_kernel_prim(k, NX_PRIM_MUL, NX_DTYPE_I64, i, c3, -1), kk, -1);
    int32_t ob = nx_kernel_prim(k, NX_PRIM_ADD, NX_DTYPE_I64,
                                nx_kernel_prim(k, NX_PRIM_MUL, NX_DTYPE_I64, kk, c2, -1), j, -1);
    int32_t s = nx_kernel_prim(k, NX_PRIM_ADD, NX_DTYPE_F32, nx_kernel_load(k, ba, oa),
                               nx_kernel_load(k, bb, ob), -1);
    int32_t r = nx_kernel_reduce(k, NX_MONOID_MAX, NX_DTYPE_F32, s, 1u << lk);
    assert_true(nx_kernel_store(k, bc, r));
    return k;
}

static void test_maxplus(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_kernel *k = maxplus_kernel(ctx);
    assert_int_equal(nx_kernel_validate(k), NX_OK);
    float a[6] = {1, 5, 2, -1, 0, 7}, b[6] = {0, 1, -3, 2, 4, -4}, c[4] = {0};
    void *bufs[3] = {a, b, c};
    assert_int_equal(nx_kernel_interpret(k, bufs), NX_OK);
    /* by hand: c00 = max(1+0, 5-3, 2+4) = 6; c01 = max(1+1, 5+2, 2-4) = 7;
     * c10 = max(-1+0, 0-3, 7+4) = 11; c11 = max(-1+1, 0+2, 7-4) = 3 */
    float want[4] = {6, 7, 11, 3};
    assert_memory_equal(c, want, sizeof want);
    nx_kernel_free(k);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* y[i] = sum_j exp(-(sum_d (x[i,d] - z[j,d])^2)): a reduction nested in a reduction. */
static void test_nested(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_kernel *k = NULL;
    assert_int_equal(nx_kernel_new(ctx, NX_KERNEL_LOOP, "gauss", &k), NX_OK);
    int64_t sx[2] = {2, 2}, sz[2] = {3, 2}, sy[1] = {2};
    int bx = nx_kernel_buffer(k, NX_KBUF_IN, NX_DTYPE_F64, 2, sx, 0);
    int bz = nx_kernel_buffer(k, NX_KBUF_IN, NX_DTYPE_F64, 2, sz, 1);
    int by = nx_kernel_buffer(k, NX_KBUF_OUT, NX_DTYPE_F64, 1, sy, 2);
    nx_kernel_space(k, 1, sy);
    int lj = nx_kernel_loop(k, 3), ld = nx_kernel_loop(k, 2);
    int32_t i = nx_kernel_idx(k, 0), j = nx_kernel_idx(k, lj), d = nx_kernel_idx(k, ld);
    int32_t two = nx_kernel_const_i(k, NX_DTYPE_I64, 2);
    int32_t ox = nx_kernel_prim(k, NX_PRIM_ADD, NX_DTYPE_I64,
                                nx_kernel_prim(k, NX_PRIM_MUL, NX_DTYPE_I64, i, two, -1), d, -1);
    int32_t oz = nx_kernel_prim(k, NX_PRIM_ADD, NX_DTYPE_I64,
                                nx_kernel_prim(k, NX_PRIM_MUL, NX_DTYPE_I64, j, two, -1), d, -1);
    int32_t diff = nx_kernel_prim(k, NX_PRIM_SUB, NX_DTYPE_F64, nx_kernel_load(k, bx, ox),
                                  nx_kernel_load(k, bz, oz), -1);
    int32_t sq = nx_kernel_prim(k, NX_PRIM_MUL, NX_DTYPE_F64, diff, diff, -1);
    int32_t d2 = nx_kernel_reduce(k, NX_MONOID_SUM, NX_DTYPE_F64, sq, 1u << ld);
    int32_t e = nx_kernel_prim(k, NX_PRIM_EXP, NX_DTYPE_F64,
                               nx_kernel_prim(k, NX_PRIM_NEG, NX_DTYPE_F64, d2, -1, -1), -1, -1);
    int32_t y = nx_kernel_reduce(k, NX_MONOID_SUM, NX_DTYPE_F64, e, 1u << lj);
    assert_true(nx_kernel_store(k, by, y));
    double x[4] = {0, 0, 1, 2}, z[6] = {0, 1, 1, 1, 2, 2}, out[2] = {0};
    void *bufs[3] = {x, z, out};
    assert_int_equal(nx_kernel_interpret(k, bufs), NX_OK);
    /* row 0 = (0,0): distances^2 1, 2, 8; row 1 = (1,2): 2, 1, 1 */
    double w0 = exp(-1.0) + exp(-2.0) + exp(-8.0), w1 = exp(-2.0) + exp(-1.0) + exp(-1.0);
    assert_true(nx_test_close(out[0], w0, 1e-15, 0));
    assert_true(nx_test_close(out[1], w1, 1e-15, 0));
    nx_kernel_free(k);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void test_refusals(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_kernel *k = maxplus_kernel(ctx);
    /* the store reads the K-loop index outside its reduce */
    k->stores[0].value = 11; /* %11 = the add of the loads, still under k */
    assert_int_equal(nx_kernel_validate(k), NX_ERR_INTERNAL);
    nx_kernel_free(k);

    k = maxplus_kernel(ctx);
    k->inst[9].dtype = NX_DTYPE_F64; /* a load whose dtype is not its buffer's */
    assert_int_equal(nx_kernel_validate(k), NX_ERR_INTERNAL);
    nx_kernel_free(k);

    k = maxplus_kernel(ctx);
    k->inst[5].a[1] = 9; /* an operand that is not earlier */
    assert_int_equal(nx_kernel_validate(k), NX_ERR_INTERNAL);
    nx_kernel_free(k);

    k = maxplus_kernel(ctx);
    nx_kernel_loop(k, 4); /* a reduction loop nobody reduces */
    assert_int_equal(nx_kernel_validate(k), NX_ERR_INTERNAL);
    nx_kernel_free(k);

    k = maxplus_kernel(ctx);
    float a[6] = {0}, b[6] = {0}, c[4];
    k->inst[3].i = 4; /* A's row stride too large: loads leave the buffer */
    void *bufs[3] = {a, b, c};
    assert_int_equal(nx_kernel_interpret(k, bufs), NX_ERR_INTERNAL);
    nx_kernel_free(k);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void test_print_stable(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_kernel *k1 = maxplus_kernel(ctx), *k2 = maxplus_kernel(ctx);
    char b1[4096] = {0}, b2[4096] = {0};
    FILE *f1 = fmemopen(b1, sizeof b1 - 1, "w"), *f2 = fmemopen(b2, sizeof b2 - 1, "w");
    nx_kernel_print(k1, f1);
    k2->bufs[0].slot = 7; /* slots are printed but are not identity */
    nx_kernel_print(k2, f2);
    fclose(f1);
    fclose(f2);
    assert_non_null(strstr(b1, "reduce max %11 over {2} : f32"));
    assert_string_not_equal(b1, b2);
    assert_true(nx_kernel_hash(k1) == nx_kernel_hash(k2));
    k2->extent[2] = 4;
    assert_true(nx_kernel_hash(k1) != nx_kernel_hash(k2));
    nx_kernel_free(k1);
    nx_kernel_free(k2);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_maxplus),
        cmocka_unit_test(test_nested),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_print_stable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
