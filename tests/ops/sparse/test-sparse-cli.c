/* `nitrix run` rows of the sparse family, end to end: the command's .npy output must equal the
 * generator's float64 NumPy/scipy outputs (tests/ops/sparse/data), on the backend under test; bad
 * options exit with status 2, bad data (an index out of range) with 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sparse-test.h"

static char tmpdir[256];

/* `nitrix run <op> <case's inputs> <extra> -o tmp/out.npy`; returns the exit status. */
static int run(const char *op, const char *name, const char *keys, const char *extra)
{
    char cmd[4096], in[2048] = "", k[32];
    const char *p = keys;
    while (sscanf(p, "%31s", k) == 1) {
        size_t n = strlen(in);
        snprintf(in + n, sizeof in - n, " %s/%s_%s.npy", NX_SPARSE_DATA_DIR, name, k);
        p = strstr(p, k) + strlen(k);
    }
    snprintf(cmd, sizeof cmd, "%s run %s%s --backend=%s %s -o %s/out.npy 2>/dev/null",
             NX_NITRIX_EXE, op, in, nx_backend_name(st_backend()), extra, tmpdir);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void compare(const char *name, const char *sr)
{
    nx_ctx *ctx = st_ctx();
    char path[512];
    snprintf(path, sizeof path, "%s/out.npy", tmpdir);
    nx_tensor *got = NULL, *want = st_load(ctx, name, "out");
    assert_int_equal(nx_npy_read(ctx, path, &got), NX_OK);
    st_expect_close(name, st_backend(), got, want, sr);
    nx_tensor_free(got), nx_tensor_free(want);
    nx_ctx_free(ctx);
}

static void test_rows(void **state)
{
    (void)state;
    assert_int_equal(run("ell_matmul", "mm_log_float64", "values indices b", "--semiring=log"), 0);
    compare("mm_log_float64", "log");
    assert_int_equal(run("ell_matmul", "mm_tropical_min_plus_float32", "values indices b",
                         "--semiring=tropical_min_plus"),
                     0);
    compare("mm_tropical_min_plus_float32", "tropical_min_plus");
    assert_int_equal(run("ell_rmatvec", "rmv_1_float64", "values indices x", "--n_cols=6"), 0);
    compare("rmv_1_float64", "real");
    assert_int_equal(run("ell_row_softmax", "smax_float32", "values indices x", ""), 0);
    compare("smax_float32", NULL);
    assert_int_equal(
        run("sectioned_ell_matmul", "sec_log", "offsets indices values b", "--semiring=log"), 0);
    compare("sec_log", "log");
    /* Batched values [2, 1, m, k] against b [3, n, c] (gen-sparse-batch.py). */
    assert_int_equal(run("ell_matmul", "batch_mm_log", "values indices b", "--semiring=log"), 0);
    compare("batch_mm_log", "log");
    assert_int_equal(run("grid_laplacian", "lap_3d_wrap", "x", "--mode=wrap"), 0);
    compare("lap_3d_wrap", "real");
    assert_int_equal(run("grid_laplacian", "lap_2d_reflect", "x", ""), 0);
    compare("lap_2d_reflect", "real");
}

/* The edge-aggregation row with each built-in edge function (fixtures: gen-sparse-batch.py). */
static void test_edge_rows(void **state)
{
    (void)state;
    static const char *const rows[4][2] = {{"message", "--semiring=real"},
                                           {"diffusion", "--semiring=real"},
                                           {"gaussian", "--semiring=tropical_max_plus"},
                                           {"relative", "--semiring=tropical_min_plus"}};
    for (int i = 0; i < 4; i++) {
        char name[64], extra[128];
        snprintf(name, sizeof name, "edgecli_%s", rows[i][0]);
        snprintf(extra, sizeof extra, "--edge=%s %s", rows[i][0], rows[i][1]);
        assert_int_equal(run("ell_edge_aggregate", name, "values indices h", extra), 0);
        compare(name, "real");
    }
    /* The default edge function is the message w * hj, folded by sum. */
    assert_int_equal(run("ell_edge_aggregate", "edgecli_message", "values indices h", ""), 0);
    compare("edgecli_message", "real");
    assert_int_equal(
        run("ell_edge_aggregate", "edgecli_message", "values indices h", "--edge=attention"), 2);
    assert_int_equal(
        run("ell_edge_aggregate", "edgecli_message", "values indices h", "--semiring=log"), 2);
    /* Integer features: the library refuses them, bad input (exit 2). */
    assert_int_equal(run("ell_edge_aggregate", "edgecli_message", "values indices indices", ""), 2);
}

static void test_bad_options(void **state)
{
    (void)state;
    assert_int_equal(run("ell_matmul", "mm_real_float64", "values indices b", "--semiring=ring"),
                     2);
    assert_int_equal(run("ell_rmatvec", "rmv_0_float64", "values indices x", ""), 2);
    /* n_cols below an index: the library refuses the data, bad input (exit 2). */
    assert_int_equal(run("ell_rmatvec", "rmv_0_float64", "values indices x", "--n_cols=2"), 2);
    assert_int_equal(run("grid_laplacian", "lap_1d_wrap", "x", "--mode=mirror"), 2);
    assert_int_equal(run("grid_laplacian", "lap_1d_wrap", "x", "--spacing=0"), 2);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/nx-sparse-cli-XXXXXX");
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
        cmocka_unit_test(test_edge_rows),
        cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
