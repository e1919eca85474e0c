/* The CLI's generic option parsing (every type `nitrix run` ops may declare) and the op table's
 * self-check. Built from tools/cli/ sources directly. */
#include <math.h>
#include <string.h>

#include "testutil.h"

#include "cli.h"
#include "nitrix-op.h"

static cli_value parse_ok(const cli_opt *o, const char *text)
{
    cli_value v;
    char err[256] = "";
    if (!cli_parse_value(o, text, &v, err, sizeof err))
        fail_msg("--%s=%s was rejected: %s", o->name, text ? text : "(none)", err);
    assert_true(v.set);
    return v;
}

/* Rejected, with a one-line message naming the option and saying what was expected. */
static void parse_bad(const cli_opt *o, const char *text, const char *expect_part)
{
    cli_value v;
    char err[256] = "";
    if (cli_parse_value(o, text, &v, err, sizeof err))
        fail_msg("--%s=%s was accepted", o->name, text ? text : "(none)");
    assert_non_null(strstr(err, o->name));
    assert_null(strchr(err, '\n'));
    if (!strstr(err, expect_part))
        fail_msg("message '%s' lacks '%s'", err, expect_part);
}

static void test_int(void **state)
{
    (void)state;
    cli_opt any = {"n", CLI_INT, NULL, NULL, ""};
    cli_opt ranged = {"size", CLI_INT, "3", "1:255", ""};
    cli_opt lower = {"k", CLI_INT, "1", "0:", ""};
    assert_int_equal(parse_ok(&any, "-42").i, -42);
    assert_int_equal(parse_ok(&any, "9223372036854775807").i, INT64_MAX);
    assert_int_equal(parse_ok(&ranged, "1").i, 1);
    assert_int_equal(parse_ok(&ranged, "255").i, 255);
    assert_int_equal(parse_ok(&lower, "1000000").i, 1000000);
    parse_bad(&any, "9223372036854775808", "an integer");
    parse_bad(&any, "3.5", "an integer");
    parse_bad(&any, "", "an integer");
    parse_bad(&any, " 3", "an integer");
    parse_bad(&any, "3x", "an integer");
    parse_bad(&any, NULL, "needs a value");
    parse_bad(&ranged, "0", "an integer in 1..255");
    parse_bad(&ranged, "256", "an integer in 1..255");
    parse_bad(&lower, "-1", "an integer >= 0");
}

static void test_float(void **state)
{
    (void)state;
    cli_opt sigma = {"sigma", CLI_FLOAT, "1", "0:", ""};
    cli_opt any = {"x", CLI_FLOAT, NULL, NULL, ""};
    assert_true(parse_ok(&sigma, "2.5").f == 2.5);
    assert_true(parse_ok(&sigma, "0").f == 0.0);
    assert_true(parse_ok(&any, "-1e-3").f == -1e-3);
    parse_bad(&sigma, "-0.5", "a number >= 0");
    parse_bad(&any, "nan", "a number");
    parse_bad(&any, "inf", "a number");
    parse_bad(&any, "1e999", "a number");
    parse_bad(&any, "two", "a number");
}

static void test_lists(void **state)
{
    (void)state;
    cli_opt ints = {"size", CLI_INTS, NULL, "1:", ""};
    cli_opt floats = {"sampling", CLI_FLOATS, NULL, NULL, ""};
    cli_value v = parse_ok(&ints, "1,1,2");
    assert_int_equal(v.n, 3);
    assert_int_equal(v.ints[0], 1);
    assert_int_equal(v.ints[2], 2);
    v = parse_ok(&ints, "7");
    assert_int_equal(v.n, 1);
    assert_int_equal(v.ints[0], 7);
    v = parse_ok(&floats, "0.5,1,-2e1");
    assert_int_equal(v.n, 3);
    assert_true(v.floats[0] == 0.5 && v.floats[1] == 1.0 && v.floats[2] == -20.0);
    parse_bad(&ints, "1,,2", "comma-separated");
    parse_bad(&ints, "1,2,", "comma-separated");
    parse_bad(&ints, "1,0", "each an integer >= 1");
    parse_bad(&ints, "", "comma-separated");
    parse_bad(&floats, "1,x", "comma-separated");
    /* CLI_MAX_LIST values fit, one more does not. */
    char buf[256] = "1";
    for (int i = 1; i < CLI_MAX_LIST; i++)
        strcat(buf, ",1");
    assert_int_equal(parse_ok(&ints, buf).n, CLI_MAX_LIST);
    strcat(buf, ",1");
    parse_bad(&ints, buf, "comma-separated");
}

static void test_enum_dtype_bool(void **state)
{
    (void)state;
    cli_opt mode = {"mode", CLI_ENUM, "reflect", "reflect|mirror|nearest|wrap|constant", ""};
    cli_opt dtype = {"dtype", CLI_DTYPE, NULL, NULL, ""};
    cli_opt flag = {"keepdims", CLI_BOOL, "false", NULL, ""};
    assert_string_equal(parse_ok(&mode, "mirror").choice, "mirror");
    assert_string_equal(parse_ok(&mode, "constant").choice, "constant");
    parse_bad(&mode, "mirr", "one of reflect|mirror|nearest|wrap|constant");
    parse_bad(&mode, "reflect|mirror", "one of");
    parse_bad(&mode, "", "one of");
    assert_int_equal(parse_ok(&dtype, "f16").dtype, NX_DTYPE_F16);
    assert_int_equal(parse_ok(&dtype, "int64").dtype, NX_DTYPE_I64);
    parse_bad(&dtype, "f128", "a dtype");
    assert_true(parse_ok(&flag, NULL).b); /* a bare --keepdims */
    assert_true(parse_ok(&flag, "yes").b);
    assert_true(parse_ok(&flag, "1").b);
    assert_false(parse_ok(&flag, "off").b);
    assert_false(parse_ok(&flag, "false").b);
    parse_bad(&flag, "maybe", "true or false");
}

static void test_split_long(void **state)
{
    (void)state;
    char name[16];
    const char *value = NULL;
    assert_true(cli_split_long("--dtype=f32", name, sizeof name, &value));
    assert_string_equal(name, "dtype");
    assert_string_equal(value, "f32");
    assert_true(cli_split_long("--keepdims", name, sizeof name, &value));
    assert_string_equal(name, "keepdims");
    assert_null(value);
    assert_true(cli_split_long("--x=a=b", name, sizeof name, &value));
    assert_string_equal(value, "a=b");
    assert_false(cli_split_long("-o", name, sizeof name, &value));
    assert_false(cli_split_long("--", name, sizeof name, &value));
    assert_false(cli_split_long("--=3", name, sizeof name, &value));
    assert_false(cli_split_long("file.npy", name, sizeof name, &value));
    /* An over-long name is cut, and so matches no option. */
    assert_true(cli_split_long("--a-very-long-option-name=1", name, sizeof name, &value));
    assert_int_equal(strlen(name), sizeof name - 1);
}

static void test_op_table(void **state)
{
    (void)state;
    assert_true(cli_table_check());
    /* Row i of the legacy table is op i, and every option row belongs to an op in the table. */
    assert_string_equal(cli_ops[CLI_OP_morph].name, "morph");
    for (int i = 0; i < CLI_OPT_COUNT; i++)
        assert_true((unsigned)cli_op_opts[i].op < CLI_OP_COUNT);
    /* copy and cast moved to the library's op table, which `nitrix run` consults first. */
    const nx_op_info *cast = nx_op_find("cast");
    assert_non_null(cast);
    assert_non_null(nx_op_find("copy"));
    assert_int_equal(cast->nopts, 1);
    assert_string_equal(cast->opts[0].name, "dtype");
    assert_int_equal(cast->opts[0].type, NX_OPT_DTYPE);
    for (int i = 0; i < CLI_OP_COUNT; i++)
        assert_true(strcmp(cli_ops[i].name, "copy") != 0 && strcmp(cli_ops[i].name, "cast") != 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_int),        cmocka_unit_test(test_float),
        cmocka_unit_test(test_lists),      cmocka_unit_test(test_enum_dtype_bool),
        cmocka_unit_test(test_split_long), cmocka_unit_test(test_op_table),
    };
    return cmocka_run_group_tests_name("cli-opts", tests, NULL, NULL);
}
