/* `nitrix run` rows of the bilateral family, end to end: each row runs on a golden case
 * (golden/bilateral, NumPy/scipy float64) and its .npy output must match the reference within the
 * case's tolerance; bad options exit with status 2, refused input with status 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nitrix.h"
#include "testutil.h"

static char tmpdir[256];

/* `nitrix run <op> <case's files> <extra> -o tmp/out.npy [-o tmp/out2.npy]`: the exit status. */
static int run(const char *op, const char *name, const char *files, const char *extra, int nout)
{
    char cmd[4096], in[2048] = "", f[64];
    for (const char *p = files; sscanf(p, "%63s", f) == 1; p = strstr(p, f) + strlen(f)) {
        size_t n = strlen(in);
        snprintf(in + n, sizeof in - n, " %s/%s/%s.npy", NX_BIL_GOLDEN, name, f);
    }
    snprintf(cmd, sizeof cmd, "%s run %s%s --backend=ref %s -o %s/out.npy%s%s%s 2>/dev/null",
             NX_NITRIX_EXE, op, in, extra, tmpdir, nout > 1 ? " -o " : "", nout > 1 ? tmpdir : "",
             nout > 1 ? "/out2.npy" : "");
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static double at(const nx_tensor *t, int64_t i)
{
    const void *d = nx_tensor_data(t);
    switch (nx_tensor_dtype(t)) {
    case NX_DTYPE_F32:
        return ((const float *)d)[i];
    case NX_DTYPE_I64:
        return (double)((const int64_t *)d)[i];
    case NX_DTYPE_BOOL:
        return ((const uint8_t *)d)[i];
    default:
        return ((const double *)d)[i];
    }
}

/* The index array and mask of a bilateral case as the row's options (they are TENSOR options
 * neighbourhood and mask, no longer positional inputs), then `more`. */
static const char *neighbourhood(const char *name, const char *more)
{
    static char buf[2048];
    snprintf(buf, sizeof buf, "--neighbourhood=%s/%s/index.npy --mask=%s/%s/mask.npy %s",
             NX_BIL_GOLDEN, name, NX_BIL_GOLDEN, name, more);
    return buf;
}

/* tmp/<got> against the case's <want>: values within tol (indices and flags exactly). */
static void compare_file(const char *name, const char *got_file, const char *want_file, double tol)
{
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    char path[1024];
    nx_tensor *got = NULL, *want = NULL;
    snprintf(path, sizeof path, "%s/%s", tmpdir, got_file);
    assert_int_equal(nx_npy_read(ctx, path, &got), NX_OK);
    snprintf(path, sizeof path, "%s/%s/%s", NX_BIL_GOLDEN, name, want_file);
    assert_int_equal(nx_npy_read(ctx, path, &want), NX_OK);
    assert_int_equal(nx_tensor_numel(got), nx_tensor_numel(want));
    for (int64_t i = 0; i < nx_tensor_numel(want); i++)
        if (!nx_test_close(at(got, i), at(want, i), tol, tol))
            fail_msg("%s: element %lld is %.17g; the reference gives %.17g", name, (long long)i,
                     at(got, i), at(want, i));
    nx_tensor_free(got);
    nx_tensor_free(want);
    nx_ctx_free(ctx);
}

/* tmp/out.npy against the case's out.npy. */
static void compare(const char *name, double tol)
{
    compare_file(name, "out.npy", "out.npy", tol);
}

static void test_rows(void **state)
{
    (void)state;
    assert_int_equal(run("bilateral_gaussian", "bil_diag_mask_f64", "values features metric",
                         neighbourhood("bil_diag_mask_f64", "--n_iters=2"), 1),
                     0);
    compare("bil_diag_mask_f64", 1e-12);
    assert_int_equal(run("bilateral_gaussian", "bil_factor_lowrank_f32", "values features metric",
                         neighbourhood("bil_factor_lowrank_f32", "--metric=factor"), 1),
                     0);
    compare("bil_factor_lowrank_f32", 1e-5);
    assert_int_equal(run("bilateral_gaussian_knn", "bil_knn_factor_f64", "values features metric",
                         "--metric=factor --k=5 --n_iters=3", 1),
                     0);
    compare("bil_knn_factor_f64", 1e-12);
    assert_int_equal(run("brute_force_knn", "knn_factor_noself_f64", "features metric",
                         "--metric=factor --k=6 --exclude_self", 1),
                     0);
    compare("knn_factor_noself_f64", 0);
    assert_int_equal(run("spatial_cube_neighbourhood", "cube_3d_h1", "grid", "", 2), 0);
    compare("cube_3d_h1", 0);
    compare_file("cube_3d_h1", "out2.npy", "validity.npy", 0);
    assert_int_equal(run("susan_emulator", "susan_2d_batch_bt_f64", "image",
                         "--nspatial=2 --sigma_space=1.5 --bthresh=2 --half=2 --use_median=false",
                         1),
                     0);
    compare("susan_2d_batch_bt_f64", 1e-12);
    assert_int_equal(run("metric_from_spd", "spd_f64", "spd", "", 1), 0);
    compare("spd_f64", 1e-12);
}

static void test_bad_options(void **state)
{
    (void)state;
    /* the command line: exit 2 */
    assert_int_equal(run("bilateral_gaussian", "bil_diag_mask_f64", "values features metric",
                         neighbourhood("bil_diag_mask_f64", "--metric=full"), 1),
                     2);
    /* the index array and mask are options now: given as positional inputs they are too many */
    assert_int_equal(
        run("bilateral_gaussian", "bil_diag_mask_f64", "values features metric index mask", "", 1),
        2);
    assert_int_equal(run("brute_force_knn", "knn_diag_ties_f64", "features", "--k=2", 1), 2);
    assert_int_equal(run("susan_emulator", "susan_3d_f64", "image", "--sigma_space=1 --half=0", 1),
                     2);
    /* refused by the library as bad input: exit 2 (a diagonal metric given an L; k > n; no
     * intensity sigma; an asymmetric "spd") */
    assert_int_equal(
        run("bilateral_gaussian_knn", "bil_knn_factor_f64", "values features metric", "--k=5", 1),
        2);
    /* the k form without k: one row takes the index array or k, so neither is required by the
     * schema; the op refuses the call, which is a bad command line too (exit 2) */
    assert_int_equal(run("bilateral_gaussian_knn", "bil_knn_factor_f64", "values features metric",
                         "--metric=factor", 1),
                     2);
    assert_int_equal(run("brute_force_knn", "knn_diag_ties_f64", "features metric", "--k=31", 1),
                     2);
    assert_int_equal(run("susan_emulator", "susan_3d_f64", "image", "--sigma_space=1", 1), 2);
    assert_int_equal(run("metric_from_spd", "bil_factor_lowrank_f64", "metric", "", 1), 2);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/nx-bilateral-cli-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/out.npy", tmpdir);
    unlink(path);
    snprintf(path, sizeof path, "%s/out2.npy", tmpdir);
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
