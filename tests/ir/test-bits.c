/* The unsigned dtypes and the integer bit primitives (docs/numerics.md) on the reference
 * interpreter and the CPU JIT, against expectations computed independently with Python's int
 * arithmetic (tools/gen-bits-expected.py -> bits-expected.h): bitand/bitor/bitxor/bitnot,
 * shl/shr/rotl by 0, 1, 7, 8, 31, 32, 33, 63, 64, 65 and the largest count, mulhi, and the u32/u64
 * arithmetic, min/max and comparisons on edge values (0, 1, 2^31, 2^32 - 1, 2^63, 2^64 - 1, ...).
 * Then casts to and from u32/u64, sum/max/min reductions, select, and the builders' errors.
 * The CPU runs under NITRIX_STRICT_BACKEND=1, so a kernel it cannot compile fails the test instead
 * of falling back to the interpreter. */
#include <stdio.h>
#include <stdlib.h>

#include "helpers.h"
#include "bits-expected.h"

static nx_node build(nx_graph *g, const char *prim, nx_node a, nx_node b)
{
    static const struct {
        const char *name;
        nx_node (*fn)(nx_graph *, nx_node, nx_node);
    } bin[] = {
        {"bitand", nx_bitand}, {"bitor", nx_bitor}, {"bitxor", nx_bitxor}, {"shl", nx_shl},
        {"shr", nx_shr},       {"rotl", nx_rotl},   {"mulhi", nx_mulhi},   {"add", nx_add},
        {"sub", nx_sub},       {"mul", nx_mul},     {"div", nx_div},       {"mod", nx_mod},
        {"min", nx_minimum},   {"max", nx_maximum}, {"lt", nx_lt},         {"le", nx_le},
        {"eq", nx_eq},         {"gt", nx_gt},
    };
    if (strcmp(prim, "bitnot") == 0)
        return nx_bitnot(g, a);
    for (size_t i = 0; i < sizeof bin / sizeof *bin; i++)
        if (strcmp(prim, bin[i].name) == 0)
            return bin[i].fn(g, a, b);
    fail_msg("no builder for %s", prim);
    return NX_NONE;
}

/* n values of dtype d from their w-bit patterns (little-endian host). */
static nx_tensor *from_bits(nx_ctx *ctx, nx_dtype d, int64_t n, const uint64_t *v)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, d, 1, &n, &t), NX_OK);
    size_t es = nx_dtype_size(d);
    for (int64_t i = 0; i < n; i++)
        memcpy((char *)nx_tensor_data(t) + (size_t)i * es, &v[i], es);
    return t;
}

static uint64_t bits_at(const nx_tensor *t, int64_t i)
{
    uint64_t v = 0;
    size_t es = nx_dtype_size(nx_tensor_dtype(t));
    memcpy(&v, (const char *)nx_tensor_data(t) + (size_t)i * es, es);
    return v;
}

static nx_tensor *run_on(nx_graph *g, nx_node y, nx_backend be, int nin, nx_tensor **ins)
{
    nx_compile_opts o = {.backend = be, .n_outputs = 1, .outputs = &y};
    nx_program *p = NULL;
    if (nx_graph_compile(g, &o, &p) != NX_OK)
        fail_msg("compile (%d): %s", (int)be, nx_ctx_last_error(nx_graph_ctx(g)));
    assert_int_equal(nx_program_num_inputs(p), nin);
    nx_tensor *r = NULL;
    if (nx_program_run(p, (const nx_tensor *const *)ins, &r) != NX_OK)
        fail_msg("run (%d): %s", (int)be, nx_ctx_last_error(nx_graph_ctx(g)));
    nx_program_free(p);
    return r;
}

static void test_table(void **state)
{
    (void)state;
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    int checked = 0;
    for (size_t c = 0; c < sizeof BITS_CASES / sizeof *BITS_CASES; c++) {
        const bits_case *bc = &BITS_CASES[c];
        nx_dtype d = (nx_dtype)bc->dtype;
        int64_t n = bc->n;
        nx_graph *g = NULL;
        assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
        nx_node a = nx_input(g, "a", d, 1, &n), b = nx_input(g, "b", d, 1, &n);
        nx_node y = build(g, bc->prim, a, b);
        if (nx_graph_status(g) != NX_OK)
            fail_msg("%s %s: %s", bc->prim, nx_dtype_name(d), nx_graph_error(g));
        nx_tensor *ins[2] = {from_bits(ctx, d, n, bc->a), from_bits(ctx, d, n, bc->b)};
        static const nx_backend bes[2] = {NX_BACKEND_REF, NX_BACKEND_CPU};
        for (int k = 0; k < 2; k++) {
            nx_tensor *r = run_on(g, y, bes[k], 2, ins);
            for (int64_t i = 0; i < n; i++)
                if (bits_at(r, i) != bc->y[i])
                    fail_msg("%s %s on %s: a = 0x%llx, b = 0x%llx gave 0x%llx, expected 0x%llx",
                             bc->prim, nx_dtype_name(d), k ? "cpu" : "ref",
                             (unsigned long long)bc->a[i], (unsigned long long)bc->b[i],
                             (unsigned long long)bits_at(r, i), (unsigned long long)bc->y[i]);
            checked += (int)n;
            nx_tensor_free(r);
        }
        nx_tensor_free(ins[0]);
        nx_tensor_free(ins[1]);
        nx_graph_free(g);
    }
    assert_true(checked > 10000);
    nx_ctx_free(ctx);
}

/* One cast of n values (bit patterns in, bit patterns expected) on ref and cpu. */
static void cast_case(nx_ctx *ctx, nx_dtype from, nx_dtype to, int64_t n, const uint64_t *x,
                      const uint64_t *want)
{
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node y = nx_cast(g, nx_input(g, "x", from, 1, &n), to);
    nx_tensor *in = from_bits(ctx, from, n, x);
    for (int k = 0; k < 2; k++) {
        nx_tensor *r = run_on(g, y, k ? NX_BACKEND_CPU : NX_BACKEND_REF, 1, &in);
        for (int64_t i = 0; i < n; i++)
            if (bits_at(r, i) != want[i])
                fail_msg("cast %s -> %s on %s: element %lld (0x%llx) gave 0x%llx, expected 0x%llx",
                         nx_dtype_name(from), nx_dtype_name(to), k ? "cpu" : "ref", (long long)i,
                         (unsigned long long)x[i], (unsigned long long)bits_at(r, i),
                         (unsigned long long)want[i]);
        nx_tensor_free(r);
    }
    nx_tensor_free(in);
    nx_graph_free(g);
}

static uint64_t f64b(double x)
{
    uint64_t b;
    memcpy(&b, &x, 8);
    return b;
}

static uint64_t f32b(float x)
{
    uint32_t b;
    memcpy(&b, &x, 4);
    return b;
}

/* numpy's astype on in-range values; out-of-range floats saturate and NaN gives 0 (the IR's cast
 * rule, docs/ir.md). */
static void test_casts(void **state)
{
    (void)state;
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    const uint64_t M = UINT64_MAX, H = UINT64_C(1) << 63;
    const uint64_t u64[] = {0, 1, UINT32_MAX, UINT64_C(1) << 32, H, M};
    cast_case(ctx, NX_DTYPE_U64, NX_DTYPE_F64, 6, u64,
              (const uint64_t[]){f64b(0), f64b(1), f64b(4294967295.0), f64b(0x1p32), f64b(0x1p63),
                                 f64b(0x1p64)});
    cast_case(ctx, NX_DTYPE_U64, NX_DTYPE_F32, 6, u64,
              (const uint64_t[]){f32b(0), f32b(1), f32b(0x1p32f), f32b(0x1p32f), f32b(0x1p63f),
                                 f32b(0x1p64f)});
    cast_case(ctx, NX_DTYPE_U64, NX_DTYPE_I64, 6, u64, u64); /* the same bits */
    cast_case(ctx, NX_DTYPE_U64, NX_DTYPE_U32, 6, u64,
              (const uint64_t[]){0, 1, UINT32_MAX, 0, 0, UINT32_MAX});
    cast_case(ctx, NX_DTYPE_U64, NX_DTYPE_I32, 6, u64,
              (const uint64_t[]){0, 1, UINT32_MAX, 0, 0, UINT32_MAX}); /* -1 as 32 bits */
    cast_case(ctx, NX_DTYPE_U64, NX_DTYPE_U8, 6, u64, (const uint64_t[]){0, 1, 255, 0, 0, 255});
    cast_case(ctx, NX_DTYPE_U64, NX_DTYPE_BOOL, 6, u64, (const uint64_t[]){0, 1, 1, 1, 1, 1});
    const uint64_t u32[] = {0, 1, UINT32_C(1) << 31, UINT32_MAX};
    cast_case(ctx, NX_DTYPE_U32, NX_DTYPE_I64, 4, u32, u32); /* zero-extended */
    cast_case(ctx, NX_DTYPE_U32, NX_DTYPE_U64, 4, u32, u32);
    cast_case(ctx, NX_DTYPE_U32, NX_DTYPE_F64, 4, u32,
              (const uint64_t[]){f64b(0), f64b(1), f64b(0x1p31), f64b(4294967295.0)});
    cast_case(ctx, NX_DTYPE_U32, NX_DTYPE_F32, 4, u32,
              (const uint64_t[]){f32b(0), f32b(1), f32b(0x1p31f), f32b(0x1p32f)});
    cast_case(ctx, NX_DTYPE_U32, NX_DTYPE_I32, 4, u32, u32);
    const uint64_t i64[] = {0, 1, M /* -1 */, H /* INT64_MIN */, UINT32_MAX};
    cast_case(ctx, NX_DTYPE_I64, NX_DTYPE_U64, 5, i64, i64);
    cast_case(ctx, NX_DTYPE_I64, NX_DTYPE_U32, 5, i64,
              (const uint64_t[]){0, 1, UINT32_MAX, 0, UINT32_MAX});
    const uint64_t i32[] = {0, 1, UINT32_MAX /* -1 */, UINT32_C(1) << 31 /* INT32_MIN */};
    cast_case(ctx, NX_DTYPE_I32, NX_DTYPE_U64, 4, i32,
              (const uint64_t[]){0, 1, M, M - 0x7fffffff}); /* sign-extended */
    const uint64_t f64[] = {f64b(0.0),  f64b(1.9),          f64b(-1.0),  f64b(1e19),
                            f64b(0x1p64), f64b(4294967295.5), f64b(NAN), f64b(0x1p63)};
    cast_case(ctx, NX_DTYPE_F64, NX_DTYPE_U64, 8, f64,
              (const uint64_t[]){0, 1, 0, UINT64_C(10000000000000000000), M, 4294967295, 0, H});
    cast_case(ctx, NX_DTYPE_F64, NX_DTYPE_U32, 8, f64,
              (const uint64_t[]){0, 1, 0, UINT32_MAX, UINT32_MAX, UINT32_MAX, 0, UINT32_MAX});
    nx_ctx_free(ctx);
}

static uint64_t reduce_case(nx_ctx *ctx, nx_dtype d, nx_monoid m, int64_t n, const uint64_t *x,
                            nx_backend be)
{
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    int axis = 0;
    nx_node y = nx_reduce(g, nx_input(g, "x", d, 1, &n), 1, &axis, m, false);
    nx_tensor *in = from_bits(ctx, d, n, x);
    nx_tensor *r = run_on(g, y, be, 1, &in);
    uint64_t v = bits_at(r, 0);
    nx_tensor_free(r);
    nx_tensor_free(in);
    nx_graph_free(g);
    return v;
}

/* sum wraps modulo 2^w; max/min order unsigned values (2^63 is the largest of u64 below). */
static void test_reductions(void **state)
{
    (void)state;
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    const uint64_t a[] = {UINT64_MAX, 2, UINT64_C(1) << 63, 5, 1};
    const uint64_t b[] = {UINT32_MAX, 2, UINT32_C(1) << 31, 5, 1};
    for (int k = 0; k < 2; k++) {
        nx_backend be = k ? NX_BACKEND_CPU : NX_BACKEND_REF;
        /* 2^64 - 1 + 2 + 2^63 + 5 + 1 = 2^63 + 7 mod 2^64 */
        assert_true(reduce_case(ctx, NX_DTYPE_U64, NX_MONOID_SUM, 5, a, be) ==
                    (UINT64_C(1) << 63) + 7);
        assert_true(reduce_case(ctx, NX_DTYPE_U64, NX_MONOID_MAX, 5, a, be) == UINT64_MAX);
        assert_true(reduce_case(ctx, NX_DTYPE_U64, NX_MONOID_MAX, 4, a + 1, be) ==
                    UINT64_C(1) << 63);
        assert_true(reduce_case(ctx, NX_DTYPE_U64, NX_MONOID_MIN, 5, a, be) == 1);
        assert_true(reduce_case(ctx, NX_DTYPE_U64, NX_MONOID_MIN, 1, a, be) == UINT64_MAX);
        /* 2^32 - 1 + 2 + 2^31 + 5 + 1 = 2^31 + 7 mod 2^32 */
        assert_true(reduce_case(ctx, NX_DTYPE_U32, NX_MONOID_SUM, 5, b, be) ==
                    (UINT64_C(1) << 31) + 7);
        assert_true(reduce_case(ctx, NX_DTYPE_U32, NX_MONOID_MAX, 5, b, be) == UINT32_MAX);
        assert_true(reduce_case(ctx, NX_DTYPE_U32, NX_MONOID_MIN, 4, b, be) == 2);
        assert_true(reduce_case(ctx, NX_DTYPE_U32, NX_MONOID_ARGMAX, 5, b, be) == 0);
        assert_true(reduce_case(ctx, NX_DTYPE_U64, NX_MONOID_ARGMIN, 4, a, be) == 1);
    }
    nx_ctx_free(ctx);
}

static void test_select(void **state)
{
    (void)state;
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    int64_t n = 4;
    const uint64_t a[] = {UINT64_MAX, 0, UINT64_C(1) << 63, 7};
    const uint64_t b[] = {1, UINT64_MAX, 3, 7};
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node x = nx_input(g, "a", NX_DTYPE_U64, 1, &n), z = nx_input(g, "b", NX_DTYPE_U64, 1, &n);
    nx_node y = nx_select(g, nx_gt(g, x, z), x, nx_bitxor(g, x, z)); /* a > b ? a : a ^ b */
    nx_tensor *ins[2] = {from_bits(ctx, NX_DTYPE_U64, n, a), from_bits(ctx, NX_DTYPE_U64, n, b)};
    const uint64_t want[] = {UINT64_MAX, UINT64_MAX, UINT64_C(1) << 63, 0};
    for (int k = 0; k < 2; k++) {
        nx_tensor *r = run_on(g, y, k ? NX_BACKEND_CPU : NX_BACKEND_REF, 2, ins);
        for (int64_t i = 0; i < n; i++)
            assert_true(bits_at(r, i) == want[i]);
        nx_tensor_free(r);
    }
    nx_tensor_free(ins[0]);
    nx_tensor_free(ins[1]);
    nx_graph_free(g);
    nx_ctx_free(ctx);
}

static void test_errors(void **state)
{
    (void)state;
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    int64_t n = 3;
    struct {
        nx_dtype a, b;
        const char *prim, *text;
    } bad[] = {
        {NX_DTYPE_F32, NX_DTYPE_F32, "bitand", "expected an integer dtype"},
        {NX_DTYPE_BOOL, NX_DTYPE_BOOL, "bitxor", "expected an integer dtype"},
        {NX_DTYPE_F64, NX_DTYPE_F64, "bitnot", "expected an integer dtype"},
        {NX_DTYPE_F32, NX_DTYPE_F32, "shl", "expected an integer dtype"},
        {NX_DTYPE_I32, NX_DTYPE_I32, "mulhi", "expected u32 or u64"},
        {NX_DTYPE_U32, NX_DTYPE_U64, "rotl", "dtypes u32 and u64 differ"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        nx_graph *g = NULL;
        assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
        build(g, bad[i].prim, nx_input(g, "a", bad[i].a, 1, &n), nx_input(g, "b", bad[i].b, 1, &n));
        expect_graph_error(g, NX_ERR_DTYPE, bad[i].text);
        nx_graph_free(g);
    }
    nx_ctx_free(ctx);
}

/* .npy files NumPy 1.24.4 wrote ('<u4', '<u8'; tests/data/numerics/u4.npy, u8.npy, made with
 * np.save of the arrays below) read as u32/u64 with their values, and writing them back gives
 * NumPy's bytes. */
static void npy_case(nx_ctx *ctx, const char *file, nx_dtype d, const uint64_t *want)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/numerics/%s", nx_test_data_dir(), file);
    nx_tensor *t = NULL;
    if (nx_npy_read(ctx, path, &t) != NX_OK)
        fail_msg("%s: %s", file, nx_ctx_last_error(ctx));
    assert_int_equal(nx_tensor_dtype(t), d);
    assert_int_equal(nx_tensor_numel(t), 5);
    for (int64_t i = 0; i < 5; i++)
        assert_true(bits_at(t, i) == want[i]);
    void *buf = NULL;
    size_t len = 0;
    assert_int_equal(nx_npy_write_mem(ctx, t, &buf, &len), NX_OK);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char disk[512];
    size_t got = fread(disk, 1, sizeof disk, f);
    fclose(f);
    assert_int_equal(got, len);
    assert_memory_equal(disk, buf, len);
    nx_ctx_buffer_free(ctx, buf, len);
    nx_tensor_free(t);
}

static void test_npy(void **state)
{
    (void)state;
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    npy_case(ctx, "u4.npy", NX_DTYPE_U32,
             (const uint64_t[]){0, 1, UINT64_C(1) << 31, UINT32_MAX, 12345});
    npy_case(ctx, "u8.npy", NX_DTYPE_U64,
             (const uint64_t[]){0, 1, UINT64_C(1) << 32, UINT64_C(1) << 63, UINT64_MAX});
    nx_ctx_free(ctx);
}

/* threefry-2x32 with 20 rounds (Salmon et al. 2011; the generator jax.random uses) built from
 * the u32 rows add, rotl and bitxor, against the Random123 known-answer vectors (the values jax's
 * own tests check): the primitives compose into the generator on ref and cpu. */
static void threefry(nx_graph *g, nx_node k0, nx_node k1, nx_node *x0, nx_node *x1, nx_node c)
{
    static const int rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
    nx_node ks[3] = {k0, k1, nx_bitxor(g, nx_bitxor(g, k0, k1), c)};
    nx_node a = nx_add(g, *x0, ks[0]), b = nx_add(g, *x1, ks[1]);
    for (int grp = 0; grp < 5; grp++) {
        for (int r = 0; r < 4; r++) {
            uint32_t sh = (uint32_t)rot[grp % 2][r];
            a = nx_add(g, a, b);
            b = nx_bitxor(g, nx_rotl(g, b, nx_constant(g, NX_DTYPE_U32, 0, NULL, &sh)), a);
        }
        uint32_t inj = (uint32_t)grp + 1;
        a = nx_add(g, a, ks[(grp + 1) % 3]);
        b = nx_add(g, nx_add(g, b, ks[(grp + 2) % 3]),
                   nx_constant(g, NX_DTYPE_U32, 0, NULL, &inj));
    }
    *x0 = a, *x1 = b;
}

static void test_threefry_kat(void **state)
{
    (void)state;
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    /* key0 key1 ctr0 ctr1 -> out0 out1 */
    static const uint64_t kat[3][6] = {
        {0, 0, 0, 0, 0x6b200159, 0x99ba4efe},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x1cb996fc, 0xbb002be7},
        {0x13198a2e, 0x03707344, 0x243f6a88, 0x85a308d3, 0xc4923a9c, 0x483df7a0},
    };
    int64_t n = 3;
    uint64_t col[4][3];
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < 3; i++)
            col[j][i] = kat[i][j];
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node in[4];
    for (int j = 0; j < 4; j++)
        in[j] = nx_input(g, NULL, NX_DTYPE_U32, 1, &n);
    uint32_t c240 = 0x1BD11BDA;
    nx_node x0 = in[2], x1 = in[3];
    threefry(g, in[0], in[1], &x0, &x1, nx_constant(g, NX_DTYPE_U32, 0, NULL, &c240));
    nx_node y = nx_concat(g, 2, (nx_node[]){x0, x1}, 0);
    assert_int_equal(nx_graph_status(g), NX_OK);
    nx_tensor *ins[4];
    for (int j = 0; j < 4; j++)
        ins[j] = from_bits(ctx, NX_DTYPE_U32, n, col[j]);
    for (int k = 0; k < 2; k++) {
        nx_tensor *r = run_on(g, y, k ? NX_BACKEND_CPU : NX_BACKEND_REF, 4, ins);
        for (int64_t i = 0; i < 2 * n; i++)
            if (bits_at(r, i) != kat[i % n][4 + i / n])
                fail_msg("threefry on %s: vector %lld word %lld gave 0x%llx, expected 0x%llx",
                         k ? "cpu" : "ref", (long long)(i % n), (long long)(i / n),
                         (unsigned long long)bits_at(r, i),
                         (unsigned long long)kat[i % n][4 + i / n]);
        nx_tensor_free(r);
    }
    for (int j = 0; j < 4; j++)
        nx_tensor_free(ins[j]);
    nx_graph_free(g);
    nx_ctx_free(ctx);
}

int main(void)
{
    setenv("NITRIX_STRICT_BACKEND", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),      cmocka_unit_test(test_casts),
        cmocka_unit_test(test_reductions), cmocka_unit_test(test_select),
        cmocka_unit_test(test_errors),     cmocka_unit_test(test_npy),
        cmocka_unit_test(test_threefry_kat),
    };
    return cmocka_run_group_tests_name("bits", tests, NULL, NULL);
}
