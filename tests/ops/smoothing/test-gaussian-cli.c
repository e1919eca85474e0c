/* `nitrix run gaussian_filter` end to end: the command reads a golden case's x.npy, writes .npy
 * that must equal scipy's output (golden/smoothing) within 1e-12 (f64) or 1e-6 relative (f32), and
 * bad options exit with status 2 (command line) or 1 (the library refused). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nitrix.h"
#include "testutil.h"

#define GOLDEN NX_SOURCE_ROOT "/golden/smoothing"

static char tmpdir[256];

/* Runs `nitrix run gaussian_filter <case>/x.npy <extra> -o tmp/out.npy`; the exit status. */
static int run(const char *name, const char *extra)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s run gaussian_filter %s/%s/x.npy --backend=cpu %s -o %s/out.npy 2>/dev/null",
             NX_NITRIX_EXE, GOLDEN, name, extra, tmpdir);
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
    snprintf(path, sizeof path, "%s/%s/out.npy", GOLDEN, name);
    assert_int_equal(nx_npy_read(ctx, path, &want), NX_OK);
    assert_int_equal(nx_tensor_dtype(got), nx_tensor_dtype(want));
    assert_int_equal(nx_tensor_numel(got), nx_tensor_numel(want));
    bool f32 = nx_tensor_dtype(want) == NX_DTYPE_F32;
    for (int64_t i = 0; i < nx_tensor_numel(want); i++)
        if (!nx_test_close(at(got, i), at(want, i), f32 ? 1e-6 : 1e-12, f32 ? 0 : 1e-12))
            fail_msg("%s: element %lld is %.17g; scipy gives %.17g", name, (long long)i,
                     at(got, i), at(want, i));
    nx_tensor_free(got);
    nx_tensor_free(want);
    nx_ctx_free(ctx);
}

static void test_rows(void **state)
{
    (void)state;
    assert_int_equal(run("g2_aniso_f64", "--sigma=1.5,3.0 --driver=fir"), 0);
    compare("g2_aniso_f64");
    assert_int_equal(run("g3_constant_f64", "--sigma=1.2,0.8,2.0 --mode=constant --cval=0.7 "
                                            "--driver=fir"),
                     0);
    compare("g3_constant_f64");
    assert_int_equal(run("g2_wrap_f32", "--sigma=2 --mode=wrap --driver=fir"), 0);
    compare("g2_wrap_f32");
    assert_int_equal(run("g2_batch_f64", "--sigma=1.7,2.4 --nspatial=2 --driver=fir"), 0);
    compare("g2_batch_f64");
    assert_int_equal(run("g2_truncate_f64", "--sigma=2,1.3 --truncate=2.2 --driver=fir"), 0);
    compare("g2_truncate_f64");
    assert_int_equal(run("k2_even_f64", "--sigma=2,1.5 --kernel_size=4,6 --mode=nearest "
                                        "--driver=fir"),
                     0);
    compare("k2_even_f64");
    /* the recursive driver runs from the command line too (its accuracy: test-gaussian) */
    assert_int_equal(run("g2_aniso_f64", "--sigma=1.5,3.0 --driver=recursive"), 0);
}

static void test_bad_options(void **state)
{
    (void)state;
    assert_int_equal(run("g2_aniso_f64", ""), 2);                        /* sigma is required */
    assert_int_equal(run("g2_aniso_f64", "--sigma=1 --mode=periodic"), 2);
    assert_int_equal(run("g2_aniso_f64", "--sigma=1 --driver=iir"), 2);
    /* refused by the op against the input: still a bad command line (exit 2) */
    assert_int_equal(run("g2_aniso_f64", "--sigma=1,2,3"), 2);           /* 2 spatial axes */
    assert_int_equal(run("g2_aniso_f64", "--sigma=0"), 2);               /* sigma > 0 */
    assert_int_equal(run("g2_aniso_f64", "--sigma=-2"), 2);
    assert_int_equal(run("g2_aniso_f64", "--sigma=1 --kernel_size=99"), 2); /* longer than axis */
    assert_int_equal(run("g2_aniso_f64", "--sigma=1 --nspatial=3"), 2);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/nx-smoothing-cli-XXXXXX");
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
