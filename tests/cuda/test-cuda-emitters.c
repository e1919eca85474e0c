/* The CUDA emitter's per-primitive table (codegen/ptx/emit.c): a primitive without a row, or
 * whose operands are of a class its row does not take, is refused with a reason naming it, never
 * emitted as some default expression.
 *   - Every primitive in a loop kernel's PRIM instruction, over f32 and over i32 operands: the
 *     elementwise ones (the shape rules unary, binary, select and cast, read from the primitive
 *     table) are taken, except the float-only math over integers; every other primitive is
 *     refused with "cuda: primitive <name> has no emitter" by nx_ptx_unsupported, by the kernel
 *     check of every kind and by the backend's supports().
 *   - A library kernel of a primitive with no device routine: the same reason.
 *   - CAST between every pair of f32, f64, i8, i16, i32, i64, u8 and bool on the device: each
 *     kernel emitted and NVRTC-compiled (compute_80), i64 -> f32 through double as the
 *     interpreter rounds; on a GPU (a driver that runs kernels) each run against the reference
 *     interpreter on edge values (NaN, infinities, signed zeros, halves, the integer bounds and
 *     one past them, 2^60 + 2^36 + 1), bit for bit; u32 and u64 included.
 *   - The integer bit primitives over i8/i32/i64/u8/u32/u64 (mulhi: u32, u64) and the u64
 *     division, mod and power: the emitted source holds the intrinsic or helper the row writes
 *     (__umulhi, __umul64hi, __funnelshift_l, nx_udiv, ...), NVRTC compiles it where present, and
 *     on a GPU the result equals the interpreter's bit for bit. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "codegen/ptx/emit-lib.h"
#include "ir/ir.h"
#include "nitrix-graph.h"
#include "program/program.h"
#include "testutil.h"
#include "probe.h"

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

/* The integer bit primitives: no float form; mulhi takes u32/u64 only. */
static bool int_only(int p)
{
    static const int list[] = {NX_PRIM_BITNOT, NX_PRIM_BITAND, NX_PRIM_BITOR, NX_PRIM_BITXOR,
                               NX_PRIM_SHL,    NX_PRIM_SHR,    NX_PRIM_ROTL,  NX_PRIM_MULHI};
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
            bool want = elementwise(p) && !(dts[d] == NX_DTYPE_I32 && float_only(p)) &&
                        !(dts[d] == NX_DTYPE_F32 && int_only(p));
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

/* ---- CAST ----------------------------------------------------------------------------------*/

static const nx_dtype CAST_DTYPES[] = {NX_DTYPE_F32, NX_DTYPE_F64, NX_DTYPE_I8,  NX_DTYPE_I16,
                                       NX_DTYPE_I32, NX_DTYPE_I64, NX_DTYPE_U8,  NX_DTYPE_BOOL,
                                       NX_DTYPE_U32, NX_DTYPE_U64};
#define NCAST (sizeof CAST_DTYPES / sizeof CAST_DTYPES[0])

static const double FLOAT_EDGES[] = {
    NAN, INFINITY, -INFINITY, 0.0, -0.0, 0.5, -0.5, 0.99, -0.99, 1.5, -2.5, 127.0, 127.9, 128.0,
    -128.0, -128.9, -129.0, 255.0, 255.9, 256.0, 32767.5, 32768.0, -32769.0, 2147483647.0,
    2147483648.0, -2147483648.5, -2147483649.0, 9.2233720368547758e18, -9.2233720368547758e18,
    1e19, -1e19, 3.0e38, 1e-40, 16777217.0, 0.1,
};
static const int64_t INT_EDGES[] = {
    0, 1, -1, 2, 127, 128, -128, -129, 255, 256, 32767, 32768, -32769, 2147483647,
    -2147483648LL, 2147483648LL, 16777217, (1LL << 53) + 1, (1LL << 60) + (1LL << 36) + 1,
    INT64_MAX, INT64_MIN, 0x5555555555555555LL,
};
#define NFLOAT_EDGES (sizeof FLOAT_EDGES / sizeof FLOAT_EDGES[0])
#define NINT_EDGES (sizeof INT_EDGES / sizeof INT_EDGES[0])

/* The edge values of dtype d, as the interpreter stores them (nx_ir_put wraps and rounds). */
static nx_tensor *edges(nx_ctx *ctx, nx_dtype d)
{
    bool fl = d == NX_DTYPE_F32 || d == NX_DTYPE_F64;
    int64_t n = fl ? (int64_t)NFLOAT_EDGES : (int64_t)NINT_EDGES;
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, d, 1, &n, &t), NX_OK);
    for (int64_t i = 0; i < n; i++) {
        nx_ir_val v = {fl ? FLOAT_EDGES[i] : 0, fl ? 0 : INT_EDGES[i]};
        nx_ir_put(nx_tensor_data(t), d, i, nx_ir_fix(v, d));
    }
    return t;
}

static bool same_bits(const nx_tensor *a, const nx_tensor *b, int64_t *at)
{
    size_t es = nx_dtype_size(a->dtype);
    for (int64_t i = 0; i < nx_tensor_numel(a); i++) {
        const char *pa = (const char *)nx_tensor_data(a) + i * es;
        const char *pb = (const char *)nx_tensor_data(b) + i * es;
        bool nan = (a->dtype == NX_DTYPE_F32 && isnan(*(const float *)pa) &&
                    isnan(*(const float *)pb)) ||
                   (a->dtype == NX_DTYPE_F64 && isnan(*(const double *)pa) &&
                    isnan(*(const double *)pb));
        if (!nan && memcmp(pa, pb, es) != 0) {
            *at = i;
            return false;
        }
    }
    return true;
}

static void cast_case(nx_ctx *ctx, nx_dtype from, nx_dtype to, bool gpu)
{
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    int64_t n = from == NX_DTYPE_F32 || from == NX_DTYPE_F64 ? (int64_t)NFLOAT_EDGES
                                                             : (int64_t)NINT_EDGES;
    nx_node y = nx_cast(g, nx_input(g, NULL, from, 1, &n), to);
    assert_int_equal(nx_graph_status(g), NX_OK);
    nx_kplan *plan = NULL;
    if (nx_pass_pipeline(ctx, &g->s, 1, &y, &plan) != NX_OK)
        fail_msg("pipeline: %s", nx_ctx_last_error(ctx));
    for (int i = 0; i < plan->nkernels; i++) {
        const nx_kernel *k = plan->kernels[i];
        const char *why = nx_ptx_kernel_unsupported(k);
        if (why)
            fail_msg("cast %s -> %s: refused: %s", nx_dtype_name(from), nx_dtype_name(to), why);
        char *src = NULL;
        size_t len = 0;
        nx_ptx_launch l;
        if (nx_ptx_kernel_emit(k, "k", false, &src, &len, &l) != NX_OK)
            fail_msg("emit: %s", nx_ctx_last_error(ctx));
        if (from == NX_DTYPE_I64 && to == NX_DTYPE_F32 && !strstr(src, "(float)(double)v"))
            fail_msg("i64 -> f32 not through double:\n%s", src);
        if (have_nvrtc(ctx)) {
            nx_ptx_image img;
            nx_ptx_target t = {80, NX_PTX_KIND_PTX};
            if (nx_ptx_compile(ctx, src, "cast.cu", t, NULL, 0, &img) != NX_OK)
                fail_msg("NVRTC: %s\n%s", nx_ctx_last_error(ctx), src);
            nx_ptx_image_free(ctx, &img);
        }
        nx_rt_free(ctx, src, len);
    }
    nx_kplan_free(plan);
    if (gpu) {
        nx_program *ref = NULL, *dev = NULL;
        nx_compile_opts ro = {NX_BACKEND_REF, 1, &y}, co = {NX_BACKEND_CUDA, 1, &y};
        if (nx_graph_compile(g, &ro, &ref) != NX_OK || nx_graph_compile(g, &co, &dev) != NX_OK)
            fail_msg("compile: %s", nx_ctx_last_error(ctx));
        nx_tensor *x = edges(ctx, from), *want = NULL, *got = NULL;
        assert_int_equal(nx_program_run(ref, (const nx_tensor *const *)&x, &want), NX_OK);
        if (nx_program_run(dev, (const nx_tensor *const *)&x, &got) != NX_OK)
            fail_msg("run: %s", nx_ctx_last_error(ctx));
        int64_t at = -1;
        if (!same_bits(got, want, &at))
            fail_msg("cast %s -> %s: element %lld differs from the interpreter",
                     nx_dtype_name(from), nx_dtype_name(to), (long long)at);
        nx_tensor_free(x);
        nx_tensor_free(want);
        nx_tensor_free(got);
        nx_program_free(ref);
        nx_program_free(dev);
    }
    nx_graph_free(g);
}

/* ---- integer bits (docs/numerics.md) -------------------------------------------------------*/

/* y = prim(a, b) over 16 values of dtype d: the emitted CUDA C holds each fragment of want (the
 * device intrinsic or helper the row writes); NVRTC compiles it where present; on a GPU it equals
 * the interpreter bit for bit on edge values and shift counts. */
static void bits_case(nx_ctx *ctx, nx_node (*fn)(nx_graph *, nx_node, nx_node), nx_dtype d,
                      const char *const *want, bool gpu)
{
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    int64_t n = 16;
    nx_node y = fn(g, nx_input(g, "a", d, 1, &n), nx_input(g, "b", d, 1, &n));
    if (nx_graph_status(g) != NX_OK)
        fail_msg("%s: %s", nx_dtype_name(d), nx_graph_error(g));
    nx_kplan *plan = NULL;
    if (nx_pass_pipeline(ctx, &g->s, 1, &y, &plan) != NX_OK)
        fail_msg("pipeline: %s", nx_ctx_last_error(ctx));
    assert_int_equal(plan->nkernels, 1);
    const nx_kernel *k = plan->kernels[0];
    const char *why = nx_ptx_kernel_unsupported(k);
    if (why)
        fail_msg("%s: refused: %s", nx_dtype_name(d), why);
    char *src = NULL;
    size_t len = 0;
    nx_ptx_launch l;
    if (nx_ptx_kernel_emit(k, "k", false, &src, &len, &l) != NX_OK)
        fail_msg("emit: %s", nx_ctx_last_error(ctx));
    for (int i = 0; want[i]; i++)
        if (!strstr(src, want[i]))
            fail_msg("%s: the source lacks \"%s\":\n%s", nx_dtype_name(d), want[i], src);
    if (have_nvrtc(ctx)) {
        nx_ptx_image img;
        nx_ptx_target t = {80, NX_PTX_KIND_PTX};
        if (nx_ptx_compile(ctx, src, "bits.cu", t, NULL, 0, &img) != NX_OK)
            fail_msg("NVRTC: %s\n%s", nx_ctx_last_error(ctx), src);
        nx_ptx_image_free(ctx, &img);
    }
    nx_rt_free(ctx, src, len);
    nx_kplan_free(plan);
    if (gpu) {
        static const int64_t A[16] = {0, 1, -1, 2, INT64_MIN, INT64_MAX, 0x5555555555555555LL,
                                      2147483647, -2147483648LL, 2147483648LL, 4294967295LL,
                                      4294967296LL, 127, 128, 255, -129};
        static const int64_t B[16] = {0, 1, 31, 32, 33, 63, 64, 65, -1, 7, 8, 2, 4294967295LL,
                                      INT64_MIN, 30, 3};
        nx_tensor *ins[2] = {NULL, NULL};
        for (int t = 0; t < 2; t++) {
            assert_int_equal(nx_tensor_new(ctx, d, 1, &n, &ins[t]), NX_OK);
            for (int64_t i = 0; i < n; i++) {
                nx_ir_val v = {0, t ? B[i] : A[i]};
                nx_ir_put(nx_tensor_data(ins[t]), d, i, nx_ir_fix(v, d));
            }
        }
        nx_program *ref = NULL, *dev = NULL;
        nx_compile_opts ro = {NX_BACKEND_REF, 1, &y}, co = {NX_BACKEND_CUDA, 1, &y};
        if (nx_graph_compile(g, &ro, &ref) != NX_OK || nx_graph_compile(g, &co, &dev) != NX_OK)
            fail_msg("compile: %s", nx_ctx_last_error(ctx));
        nx_tensor *wantv = NULL, *got = NULL;
        assert_int_equal(nx_program_run(ref, (const nx_tensor *const *)ins, &wantv), NX_OK);
        if (nx_program_run(dev, (const nx_tensor *const *)ins, &got) != NX_OK)
            fail_msg("run: %s", nx_ctx_last_error(ctx));
        int64_t at = -1;
        if (!same_bits(got, wantv, &at))
            fail_msg("%s: element %lld differs from the interpreter", nx_dtype_name(d),
                     (long long)at);
        nx_tensor_free(ins[0]);
        nx_tensor_free(ins[1]);
        nx_tensor_free(wantv);
        nx_tensor_free(got);
        nx_program_free(ref);
        nx_program_free(dev);
    }
    nx_graph_free(g);
}

static void test_bits(void **state)
{
    (void)state;
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    bool gpu = have_gpu(ctx);
    static const nx_dtype all[] = {NX_DTYPE_I8, NX_DTYPE_I32, NX_DTYPE_I64,
                                   NX_DTYPE_U8, NX_DTYPE_U32, NX_DTYPE_U64};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        nx_dtype d = all[i];
        bool u = d == NX_DTYPE_U8 || d == NX_DTYPE_U32 || d == NX_DTYPE_U64;
        int w = (int)nx_dtype_size(d) * 8;
        char width[16];
        snprintf(width, sizeof width, ">= %d ?", w);
        bits_case(ctx, nx_bitand, d, (const char *const[]){" & ", NULL}, gpu);
        bits_case(ctx, nx_bitor, d, (const char *const[]){" | ", NULL}, gpu);
        bits_case(ctx, nx_bitxor, d, (const char *const[]){" ^ ", NULL}, gpu);
        bits_case(ctx, nx_shl, d, (const char *const[]){" << ", width, NULL}, gpu);
        bits_case(ctx, nx_shr, d, (const char *const[]){" >> ", width, u ? "(u64)" : "(i64)", NULL},
                  gpu);
        bits_case(ctx, nx_rotl, d,
                  (const char *const[]){w == 32 ? "__funnelshift_l(" : "nx_rotl(", NULL}, gpu);
    }
    bits_case(ctx, nx_mulhi, NX_DTYPE_U32, (const char *const[]){"__umulhi(", NULL}, gpu);
    bits_case(ctx, nx_mulhi, NX_DTYPE_U64, (const char *const[]){"__umul64hi(", NULL}, gpu);
    /* u64 arithmetic that an i64 helper would get wrong above 2^63 */
    bits_case(ctx, nx_div, NX_DTYPE_U64, (const char *const[]){"nx_udiv(", NULL}, gpu);
    bits_case(ctx, nx_mod, NX_DTYPE_U64, (const char *const[]){"nx_umod(", NULL}, gpu);
    bits_case(ctx, nx_pow, NX_DTYPE_U64, (const char *const[]){"nx_upow(", NULL}, gpu);
    bits_case(ctx, nx_div, NX_DTYPE_U32, (const char *const[]){"nx_idiv", NULL}, gpu);
    bits_case(ctx, nx_maximum, NX_DTYPE_U64, (const char *const[]){"u64", NULL}, gpu);
    bits_case(ctx, nx_add, NX_DTYPE_U32, (const char *const[]){"unsigned int", NULL}, gpu);
    nx_ctx_free(ctx);
}

static void test_cast(void **state)
{
    (void)state;
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    bool gpu = have_gpu(ctx);
    for (size_t a = 0; a < NCAST; a++)
        for (size_t b = 0; b < NCAST; b++)
            if (a != b)
                cast_case(ctx, CAST_DTYPES[a], CAST_DTYPES[b], gpu);
    nx_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_primitive),
        cmocka_unit_test(test_out_of_table),
        cmocka_unit_test(test_library_without_routine),
        cmocka_unit_test(test_cast),
        cmocka_unit_test(test_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
