/* `nitrix run` rows of the morphology entry points, end to end: the command writes .npy files that
 * must equal scipy's (NumPy's, for pooling) golden outputs exactly (the EDT to 1e-10 relative in
 * f64), and bad options exit with status 2 or 1. */
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
        snprintf(in + n, sizeof in - n, " %s/morphology/%s/%s.npy", nx_test_golden_dir(), name, k);
        p = strstr(p, k) + strlen(k);
    }
    snprintf(cmd, sizeof cmd, "%s run %s%s --backend=ref %s -o %s/out.npy 2>/dev/null",
             NX_NITRIX_EXE, op, in, extra, tmpdir);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static double at(const nx_tensor *t, int64_t i)
{
    const void *d = nx_tensor_data(t);
    switch (nx_tensor_dtype(t)) {
    case NX_DTYPE_F32:
        return ((const float *)d)[i];
    case NX_DTYPE_I32:
        return ((const int32_t *)d)[i];
    case NX_DTYPE_I64:
        return (double)((const int64_t *)d)[i];
    case NX_DTYPE_BOOL:
        return ((const uint8_t *)d)[i];
    default:
        return ((const double *)d)[i];
    }
}

/* tmp/<file> against golden/morphology/<name>/<key>.npy to rtol (0: exactly). */
static void compare_file(const char *file, const char *name, const char *key, double rtol)
{
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    char path[1024];
    nx_tensor *got = NULL, *want = NULL;
    snprintf(path, sizeof path, "%s/%s", tmpdir, file);
    assert_int_equal(nx_npy_read(ctx, path, &got), NX_OK);
    snprintf(path, sizeof path, "%s/morphology/%s/%s.npy", nx_test_golden_dir(), name, key);
    assert_int_equal(nx_npy_read(ctx, path, &want), NX_OK);
    assert_int_equal(nx_tensor_dtype(got), nx_tensor_dtype(want));
    assert_int_equal(nx_tensor_numel(got), nx_tensor_numel(want));
    for (int64_t i = 0; i < nx_tensor_numel(want); i++)
        if (rtol ? !nx_test_close(at(got, i), at(want, i), rtol, 0) : at(got, i) != at(want, i))
            fail_msg("%s %s: element %lld is %.17g; the golden value is %.17g", name, key,
                     (long long)i, at(got, i), at(want, i));
    nx_tensor_free(got);
    nx_tensor_free(want);
    nx_ctx_free(ctx);
}

/* Runs `nitrix run <op> <inputs> <extra>` where extra names the outputs (-o tmp/FILE); returns
 * the exit status. */
static int run_outs(const char *op, const char *name, const char *keys, const char *extra)
{
    char cmd[4096], in[1024] = "", k[32];
    const char *p = keys;
    while (sscanf(p, "%31s", k) == 1) {
        size_t n = strlen(in);
        snprintf(in + n, sizeof in - n, " %s/morphology/%s/%s.npy", nx_test_golden_dir(), name, k);
        p = strstr(p, k) + strlen(k);
    }
    snprintf(cmd, sizeof cmd, "cd %s && %s run %s%s --backend=cpu %s 2>/dev/null", tmpdir,
             NX_NITRIX_EXE, op, in, extra);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void compare(const char *name)
{
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    char path[1024];
    nx_tensor *got = NULL, *want = NULL;
    snprintf(path, sizeof path, "%s/out.npy", tmpdir);
    assert_int_equal(nx_npy_read(ctx, path, &got), NX_OK);
    snprintf(path, sizeof path, "%s/morphology/%s/out.npy", nx_test_golden_dir(), name);
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

static void test_new_rows(void **state)
{
    (void)state;
    assert_int_equal(
        run_outs("distance_transform_edt", "edt2_aniso", "mask", "--sampling=0.7,1.9 -o out.npy"),
        0);
    compare_file("out.npy", "edt2_aniso", "out", 1e-10);
    assert_int_equal(run_outs("distance_transform_edt", "edt3_aniso", "mask",
                              "--sampling=1.5,0.5,1 --driver=separable -o out.npy"),
                     0);
    compare_file("out.npy", "edt3_aniso", "out", 1e-10);
    assert_int_equal(run_outs("distance_transform_edt", "edt1", "mask",
                              "--driver=felzenszwalb -o out.npy"),
                     0);
    compare_file("out.npy", "edt1", "out", 1e-10);
    assert_int_equal(run_outs("median_filter", "m3_box3", "x", "-o out.npy"), 0);
    compare_file("out.npy", "m3_box3", "out", 0);
    assert_int_equal(run_outs("median_filter", "m1_wrap", "x", "--size=4 --mode=wrap -o out.npy"),
                     0);
    compare_file("out.npy", "m1_wrap", "out", 0);
    assert_int_equal(
        run_outs("connected_components", "cc3_c3", "mask", "--connectivity=3 -o out.npy"), 0);
    compare_file("out.npy", "cc3_c3", "out", 0);
    assert_int_equal(run_outs("max_pool_with_indices_nd", "pool2", "x",
                              "--nspatial=2 --kernel=3,2 --stride=2 --padding=1,0 -o v.npy "
                              "-o i.npy"),
                     0);
    compare_file("v.npy", "pool2", "values", 0);
    compare_file("i.npy", "pool2", "indices", 0);
    assert_int_equal(run_outs("max_unpool_nd", "pool3", "values indices",
                              "--nspatial=3 --kernel=2 --size=7,5 -o out.npy"),
                     2); /* --size has 2 values for 3 axes: a bad command line (exit 2) */
    assert_int_equal(run_outs("max_unpool_nd", "pool3", "values indices",
                              "--nspatial=3 --kernel=2 --size=6,7,5 -o out.npy"),
                     0);
    compare_file("out.npy", "pool3_unpool", "out", 0);
}

/* The largest component of a golden labelling, by hand from scipy's labels. */
static void test_largest(void **state)
{
    (void)state;
    assert_int_equal(run_outs("largest_connected_component", "cc2_c2", "mask",
                              "--connectivity=2 -o out.npy"),
                     0);
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    char path[1024];
    nx_tensor *got = NULL, *lab = NULL;
    snprintf(path, sizeof path, "%s/out.npy", tmpdir);
    assert_int_equal(nx_npy_read(ctx, path, &got), NX_OK);
    snprintf(path, sizeof path, "%s/morphology/cc2_c2/out.npy", nx_test_golden_dir());
    assert_int_equal(nx_npy_read(ctx, path, &lab), NX_OK);
    int64_t n = nx_tensor_numel(lab), count[1024] = {0};
    const int32_t *l = nx_tensor_data(lab);
    int32_t best = 0;
    for (int64_t i = 0; i < n; i++)
        count[l[i] < 1024 ? l[i] : 0]++;
    for (int32_t j = 1; j < 1024; j++) /* strictly more: ties keep the lower label */
        if (count[j] > (best ? count[best] : 0))
            best = j;
    assert_true(best > 0);
    assert_int_equal(nx_tensor_dtype(got), NX_DTYPE_BOOL);
    for (int64_t i = 0; i < n; i++)
        assert_int_equal(at(got, i), l[i] == best && best > 0);
    nx_tensor_free(got);
    nx_tensor_free(lab);
    nx_ctx_free(ctx);
}

/* Options out of their domain are a bad command line (exit 2), whether the schema or the op's
 * check against the input finds them (docs/user-guide.md, exit status). */
static void test_bad_options(void **state)
{
    (void)state;
    assert_int_equal(run("morph", "d2_box24", "x", "--op=thicken"), 2);
    assert_int_equal(run("morph", "d2_box24", "x", "--size=0"), 2);
    assert_int_equal(run("morph", "d2_box24", "x", "--size=2,3,4"), 2);
    assert_int_equal(run("morph", "d1_wide", "x", "--padding=valid --size=9"), 2);
    assert_int_equal(run("distance_transform", "cdt2_cb", "mask", "--metric=euclid"), 2);
    assert_int_equal(run_outs("distance_transform_edt", "edt1", "mask", "--driver=x -o o.npy"), 2);
    assert_int_equal(run_outs("distance_transform_edt", "edt1", "mask", "--sampling=0 -o o.npy"),
                     2);
    assert_int_equal(run_outs("connected_components", "cc1_c1", "mask", "--connectivity=2 "
                              "-o o.npy"), 2);
    assert_int_equal(run_outs("max_pool_with_indices_nd", "pool1", "x", "--kernel=3 -o v.npy "
                              "-o i.npy"), 2); /* --nspatial is required */
    assert_int_equal(run_outs("max_pool_with_indices_nd", "pool1", "x",
                              "--nspatial=1 --kernel=3 --padding=2 -o v.npy -o i.npy"), 2);
    assert_int_equal(run_outs("median_filter", "m2_box3", "x", "--size=0 -o o.npy"), 2);
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
    static const char *files[] = {"out.npy", "v.npy", "i.npy", "o.npy"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", tmpdir, files[i]);
        unlink(path);
    }
    return rmdir(tmpdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_new_rows),
        cmocka_unit_test(test_largest),
        cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
