/* `nitrix run` rows of the semiring entry points, end to end: the command writes .npy files that
 * are compared with the float64 NumPy golden data, and bad options exit with status 2 or 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nitrix.h"
#include "testutil.h"

static char tmpdir[256];

static int sh(const char *fmt, const char *a, const char *b, const char *extra)
{
    char cmd[4096], out[512];
    snprintf(out, sizeof out, "%s/out.npy", tmpdir);
    snprintf(cmd, sizeof cmd, fmt, NX_NITRIX_EXE, a, b, extra, out);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void data(char *buf, size_t len, const char *name, const char *key)
{
    snprintf(buf, len, "%s/semiring/%s_%s.npy", nx_test_data_dir(), name, key);
}

static void compare(const char *name, double tol)
{
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    char path[512];
    nx_tensor *got = NULL, *want = NULL;
    snprintf(path, sizeof path, "%s/out.npy", tmpdir);
    assert_int_equal(nx_npy_read(ctx, path, &got), NX_OK);
    data(path, sizeof path, name, "out");
    assert_int_equal(nx_npy_read(ctx, path, &want), NX_OK);
    assert_int_equal(nx_tensor_numel(got), nx_tensor_numel(want));
    const double *g = nx_tensor_data(got), *w = nx_tensor_data(want);
    for (int64_t i = 0; i < nx_tensor_numel(want); i++)
        if (!nx_test_close(g[i], w[i], tol, tol))
            fail_msg("%s: element %lld is %.17g, expected %.17g", name, (long long)i, g[i], w[i]);
    nx_tensor_free(got), nx_tensor_free(want);
    nx_ctx_free(ctx);
}

static const char *run_fmt = "%s run semiring_matmul %s %s --backend=ref %s -o %s 2>/dev/null";

static void test_matmul(void **state)
{
    (void)state;
    char a[512], b[512];
    data(a, sizeof a, "mm_log_f64", "a");
    data(b, sizeof b, "mm_log_f64", "b");
    assert_int_equal(sh(run_fmt, a, b, "--semiring=log"), 0);
    compare("mm_log_f64", 1e-12);
    data(a, sizeof a, "mm_tropical_min_plus_f64", "a");
    data(b, sizeof b, "mm_tropical_min_plus_f64", "b");
    assert_int_equal(sh(run_fmt, a, b, "--semiring=tropical_min_plus"), 0);
    compare("mm_tropical_min_plus_f64", 0);
    assert_int_equal(sh(run_fmt, a, b, "--semiring=nope"), 2);
    assert_int_equal(sh(run_fmt, b, b, "--semiring=real"), 2); /* inner dims differ: bad input */
}

static void test_conv(void **state)
{
    (void)state;
    char x[512], k[512];
    data(x, sizeof x, "conv_2_tropical_max_plus", "x");
    data(k, sizeof k, "conv_2_tropical_max_plus", "k");
    assert_int_equal(sh("%s run semiring_conv %s %s --backend=ref %s -o %s 2>/dev/null", x, k,
                        "--semiring=tropical_max_plus --stride=2 --dilation=2,1"),
                     0);
    compare("conv_2_tropical_max_plus", 0);
    data(x, sizeof x, "conv_6_real", "x");
    data(k, sizeof k, "conv_6_real", "k");
    assert_int_equal(sh("%s run semiring_conv %s %s --backend=ref %s -o %s 2>/dev/null", x, k,
                        "--padding=explicit --stride=1,3 --pad_lo=0,2 --pad_hi=1,0"),
                     0);
    compare("conv_6_real", 1e-12);
    assert_int_equal(
        sh("%s run semiring_conv %s %s --backend=ref %s -o %s 2>/dev/null", x, k, "--stride=1,2,3"),
        2); /* 3 strides for 2 spatial axes: a bad command line */
}

static void test_pairwise(void **state)
{
    (void)state;
    char x[512], y[512];
    data(x, sizeof x, "pw_min", "x");
    data(y, sizeof y, "pw_min", "y");
    assert_int_equal(sh("%s run pairwise_reduce %s %s --backend=ref %s -o %s 2>/dev/null", x, y,
                        "--kernel=sqdist --reduction=min"),
                     0);
    compare("pw_min", 1e-12);
    assert_int_equal(sh("%s run pairwise_reduce %s %s --backend=ref %s -o %s 2>/dev/null", x, y,
                        "--kernel=gaussian --eps=nan"),
                     2); /* the command line refuses a non-finite number */
    assert_int_equal(sh("%s run pairwise_reduce %s %s --backend=ref %s -o %s 2>/dev/null", x, y,
                        "--reduction=kmin --k=10"),
                     2); /* k > N = 9: bad input (the library's refusal, exit 2) */
}

/* BOOLEAN on bool .npy operands gives a bool .npy, C = OR_k A AND B (a direct loop here). */
static void test_matmul_bool(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t sa[2] = {3, 4}, sb[2] = {4, 2};
    nx_tensor *a = NULL, *b = NULL, *got = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_BOOL, 2, sa, &a), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_BOOL, 2, sb, &b), NX_OK);
    uint8_t *av = nx_tensor_data(a), *bv = nx_tensor_data(b);
    static const uint8_t A[12] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0};
    static const uint8_t B[8] = {0, 1, 0, 0, 1, 0, 0, 0};
    memcpy(av, A, sizeof A);
    memcpy(bv, B, sizeof B);
    char pa[512], pb[512], po[512];
    snprintf(pa, sizeof pa, "%s/a.npy", tmpdir);
    snprintf(pb, sizeof pb, "%s/b.npy", tmpdir);
    snprintf(po, sizeof po, "%s/out.npy", tmpdir);
    assert_int_equal(nx_npy_write(ctx, pa, a), NX_OK);
    assert_int_equal(nx_npy_write(ctx, pb, b), NX_OK);
    assert_int_equal(sh(run_fmt, pa, pb, "--semiring=boolean"), 0);
    assert_int_equal(nx_npy_read(ctx, po, &got), NX_OK);
    assert_int_equal(nx_tensor_dtype(got), NX_DTYPE_BOOL);
    assert_int_equal(nx_tensor_numel(got), 6);
    const uint8_t *g = nx_tensor_data(got);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) {
            int want = 0;
            for (int k = 0; k < 4; k++)
                want |= A[i * 4 + k] && B[k * 2 + j];
            assert_int_equal(g[i * 2 + j], want);
        }
    assert_int_equal(sh(run_fmt, pa, pb, "--semiring=real"), 2); /* bool is BOOLEAN's only */
    unlink(pa);
    unlink(pb);
    nx_tensor_free(a), nx_tensor_free(b), nx_tensor_free(got);
    nx_ctx_free(ctx);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/nx-semiring-cli-XXXXXX");
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
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_conv),
        cmocka_unit_test(test_pairwise),
        cmocka_unit_test(test_matmul_bool),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
