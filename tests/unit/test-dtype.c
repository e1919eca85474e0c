/* dtype sizes and names. (Conversions to and from f16/bf16 are tested in tests/tensor.) */
#include <string.h>

#include "testutil.h"
#include "dtype-spellings.h"

static void test_sizes_names(void **state)
{
    (void)state;
    static const struct {
        nx_dtype d;
        size_t size;
        const char *name, *numpy;
    } rows[] = {
        {NX_DTYPE_F32, 4, "f32", "float32"}, {NX_DTYPE_F64, 8, "f64", "float64"},
        {NX_DTYPE_F16, 2, "f16", "float16"}, {NX_DTYPE_BF16, 2, "bf16", "bfloat16"},
        {NX_DTYPE_I8, 1, "i8", "int8"},      {NX_DTYPE_I16, 2, "i16", "int16"},
        {NX_DTYPE_I32, 4, "i32", "int32"},   {NX_DTYPE_I64, 8, "i64", "int64"},
        {NX_DTYPE_U8, 1, "u8", "uint8"},     {NX_DTYPE_BOOL, 1, "bool", "bool_"},
        {NX_DTYPE_U32, 4, "u32", "uint32"},  {NX_DTYPE_U64, 8, "u64", "uint64"},
    };
    assert_int_equal(sizeof rows / sizeof *rows, NX_DTYPE_COUNT);
    for (size_t i = 0; i < NX_DTYPE_COUNT; i++) {
        assert_int_equal(nx_dtype_size(rows[i].d), rows[i].size);
        assert_string_equal(nx_dtype_name(rows[i].d), rows[i].name);
        nx_dtype d = NX_DTYPE_COUNT;
        assert_true(nx_dtype_from_name(rows[i].name, &d));
        assert_int_equal(d, rows[i].d);
        d = NX_DTYPE_COUNT;
        assert_true(nx_dtype_from_name(rows[i].numpy, &d));
        assert_int_equal(d, rows[i].d);
    }
    nx_dtype d;
    assert_false(nx_dtype_from_name("float128", &d));
    assert_false(nx_dtype_from_name(NULL, &d));
    assert_int_equal(nx_dtype_size(NX_DTYPE_COUNT), 0);
    assert_null(nx_dtype_name((nx_dtype)-3));
    assert_true(nx_dtype_is_float(NX_DTYPE_BF16));
    assert_false(nx_dtype_is_float(NX_DTYPE_I32));
    assert_true(nx_dtype_is_int(NX_DTYPE_U8));
    assert_false(nx_dtype_is_int(NX_DTYPE_BOOL));
    assert_true(nx_dtype_is_int(NX_DTYPE_U32));
    assert_true(nx_dtype_is_int(NX_DTYPE_U64));
    /* the new dtypes come after the old ones: existing numbers keep their values */
    assert_int_equal(NX_DTYPE_BOOL, 9);
    assert_int_equal(NX_DTYPE_U32, 10);
    assert_int_equal(NX_DTYPE_U64, 11);
}

/* Every spelling in the list generated with NumPy (tools/gen-dtype-spellings.py): accepted as
 * the dtype NumPy gives it (nitrix's own names where they collide), refused otherwise. */
static void test_numpy_spellings(void **state)
{
    (void)state;
    size_t n = sizeof dtype_spellings / sizeof *dtype_spellings, accepted = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        nx_dtype d = NX_DTYPE_COUNT;
        bool ok = nx_dtype_from_name(dtype_spellings[i].text, &d);
        int got = ok ? (int)d : -1;
        if (got != dtype_spellings[i].dtype) {
            print_error("'%s': parsed as %d, expected %d (%s)\n", dtype_spellings[i].text, got,
                        dtype_spellings[i].dtype, dtype_spellings[i].why);
            failed++;
        }
        accepted += ok;
    }
    print_message("%zu spellings from NumPy %s, %zu accepted\n", n, DTYPE_SPELLINGS_NUMPY,
                  accepted);
    assert_int_equal(failed, 0);
    assert_true(accepted >= 100); /* the list is not empty or truncated */
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_sizes_names),
                                       cmocka_unit_test(test_numpy_spellings)};
    return cmocka_run_group_tests_name("dtype", tests, NULL, NULL);
}
