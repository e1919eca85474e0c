/* `nitrix run` rows of the morphology entry points, end to end: the command writes .npy files that
 * must equal scipy's golden outputs exactly, and bad options exit with status 2 or 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nitrix.h"
#include "testutil.h"

static char tmpdir[256];

/* Runs `nitrix run <op> <inputs of case> <extra> -o tmp/out.npy`; returns the exit status. */
static int run(const char *op, const char *name, const char *keys, const char *extra)
{
    char cmd[4096], in[1024] = "", k[32];
    const char *p = keys;
    while (sscanf(p, "%31s", k) == 1) {
        size_t n = strlen(in);
        snprintf(in + n, sizeof in - n, " %s/morphology/%s_%s.npy", nx_test_data_dir(), name, k);
        p = strstr(p, k) + strlen(k);
    }
    snprintf(cmd, sizeof cmd, "%s run %s%s --backend=ref %s -o %s/out.npy 2>/dev/null",
             NX_NITRIX_EXE, op, in, extra, tmpdir);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static double at(const nx_tensor *t, int64_t i)
{
    if (nx_tensor_dtype(t) == NX_DTYPE_F32)
        return ((const float *)nx_tensor_data(t))[i];
    return ((const double *)nx_tensor_data(t))[i];
}

static void compare(const char *name)
{
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    char path[1024];
    nx_tensor *got = NULL, *want = NULL;
    snprintf(path, sizeof path, "%s/out.npy", tmpdir);
    assert_int_equal(nx_npy_read(ctx, path, &got), NX_OK);
    snprintf(path, sizeof path, "%s/morphology/%s_out.npy", nx_test_data_dir(), name);
    assert_int_equal(nx_npy_read(ctx, path, &want), NX_OK);
    assert_int_equal(nx_tensor_dtype(got), nx_tensor_dtype(want));
    assert_int_equal(nx_tensor_numel(got), nx_tensor_numel(want));
    for (int64_t i = 0; i < nx_tensor_numel(want); i++)
        if (at(got, i) != at(want, i))
            fail_msg("%s: element %lld is %.17g; scipy gives %.17g", name, (long long)i, at(got, i),
                     at(want, i));
    nx_tensor_free(got);
    nx_tensor_free(want);
    nx_ctx_free(ctx);
}

static void test_rows(void **state)
{
    (void)state;
    assert_int_equal(run("morph", "d2_box24", "x", "--size=2,4"), 0);
    compare("d2_box24");
    assert_int_equal(run("morph", "e3_box324", "x", "--op=erode --size=3,2,4"), 0);
    compare("e3_box324");
    assert_int_equal(run("morph", "e2_constant", "x", "--op=erode --mode=constant --cval=1.5"), 0);
    compare("e2_constant");
    assert_int_equal(run("morph", "c2_box3", "x", "--op=close"), 0);
    compare("c2_box3");
    assert_int_equal(run("morph_element", "o2_se", "x se", "--op=open"), 0);
    compare("o2_se");
    assert_int_equal(run("morph_element", "e2_asym", "x fp", "--op=erode --element=footprint"), 0);
    compare("e2_asym");
    assert_int_equal(run("distance_transform", "cdt3_tc", "mask", "--metric=taxicab"), 0);
    compare("cdt3_tc");
    assert_int_equal(run("distance_transform", "cdt2_cb", "mask", ""), 0);
    compare("cdt2_cb");
}

static void test_bad_options(void **state)
{
    (void)state;
    assert_int_equal(run("morph", "d2_box24", "x", "--op=thicken"), 2);
    assert_int_equal(run("morph", "d2_box24", "x", "--size=0"), 2);
    assert_int_equal(run("morph", "d2_box24", "x", "--size=2,3,4"), 1);
    assert_int_equal(run("morph", "d1_wide", "x", "--padding=valid --size=9"), 1);
    assert_int_equal(run("distance_transform", "cdt2_cb", "mask", "--metric=euclid"), 2);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/nx-morphology-cli-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/out.npy", tmpdir);
    unlink(path);
    return rmdir(tmpdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
