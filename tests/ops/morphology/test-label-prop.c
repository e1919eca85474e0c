/* Connected components by label propagation (ops/morphology/label-prop.c), the driver that runs
 * on the GPU, checked on the CPU and reference backends: scipy.ndimage.label's golden labels,
 * equality with the union-find driver on random masks, paths that defeat pointer jumping, empty
 * and all-background masks, bad options and allocation failures. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"
#include "nitrix-ops.h"

static nx_test_alloc g_ta;

static nx_ctx *ctx_new(void)
{
    memset(&g_ta, 0, sizeof g_ta);
    return nx_test_ctx(&g_ta);
}

static nx_tensor *load(nx_ctx *ctx, const char *name, const char *key)
{
    return nx_test_golden_npy(ctx, "morphology", name, key);
}

static nx_status propagate(nx_ctx *ctx, const nx_tensor *m, int conn, nx_backend be,
                           nx_tensor **out, int32_t *k)
{
    nx_label_opts o = {.connectivity = conn, .driver = "propagation", .backend = be};
    return nx_connected_components_opts(ctx, m, &o, out, k);
}

/* A host copy of the labels got (the result itself when it is on the host already). */
static nx_tensor *on_host(nx_tensor *got)
{
    if (nx_tensor_device(got) == NX_DEVICE_HOST)
        return got;
    nx_tensor *h = NULL;
    assert_int_equal(nx_tensor_to_device(got, NX_DEVICE_HOST, &h), NX_OK);
    nx_tensor_free(got);
    return h;
}

/* The mask on the device when device is set (NULL when there is no GPU to put it on). */
static nx_tensor *placed(nx_tensor *m, bool device)
{
    if (!device)
        return m;
    nx_tensor *d = NULL;
    nx_status st = nx_tensor_to_device(m, NX_DEVICE_CUDA, &d);
    nx_tensor_free(m);
    return st == NX_OK ? d : NULL;
}

/* Every scipy.ndimage.label case of golden/morphology on the backend (device: the mask on the
 * GPU). */
static void golden_on(nx_ctx *ctx, nx_backend be, bool device)
{
    char names[16][64], b1[16], b2[16];
    int cases = nx_test_golden_cases("morphology", "connected_components", names, 16), n = 0;
    for (int c = 0; c < cases; c++) {
        const char *name = names[c];
        assert_true(nx_test_golden_option("morphology", name, "connectivity", b1, sizeof b1));
        assert_true(nx_test_golden_field("morphology", name, "count", b2, sizeof b2));
        int conn = atoi(b1), k = atoi(b2);
        nx_tensor *m = placed(load(ctx, name, "mask"), device), *want = load(ctx, name, "out");
        nx_tensor *got = NULL;
        int32_t count = -1;
        assert_non_null(m);
        if (propagate(ctx, m, conn, be, &got, &count) != NX_OK)
            fail_msg("%s on backend %d: %s", name, (int)be, nx_ctx_last_error(ctx));
        assert_int_equal(count, k);
        assert_int_equal(nx_tensor_dtype(got), NX_DTYPE_I32);
        assert_int_equal(nx_tensor_ndim(got), nx_tensor_ndim(want));
        got = on_host(got);
        assert_memory_equal(nx_tensor_data(got), nx_tensor_data(want),
                            (size_t)nx_tensor_numel(want) * sizeof(int32_t));
        nx_tensor_free(got);
        nx_tensor_free(m);
        nx_tensor_free(want);
        n++;
    }
    assert_true(n >= 6); /* the corpus has grown; every case in it runs */
}

/* scipy.ndimage.label's labels exactly, on both backends. */
static void test_golden(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    golden_on(ctx, NX_BACKEND_REF, false);
    golden_on(ctx, NX_BACKEND_CPU, false);
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

static nx_tensor *random_mask(nx_ctx *ctx, int nd, const int64_t *shape, double density,
                              uint64_t seed)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_U8, nd, shape, &t), NX_OK);
    uint8_t *d = nx_tensor_data(t);
    for (int64_t i = 0; i < nx_tensor_numel(t); i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        d[i] = (double)(seed >> 11) / 9007199254740992.0 < density;
    }
    return t;
}

/* Equal to the union-find driver (itself checked against scipy) over ranks 1-4, every
 * connectivity and densities around the percolation threshold, where components are largest
 * and most tortuous; on the backend be (device: the masks on the GPU). */
static void random_on(nx_ctx *ctx, nx_backend be, bool device)
{
    static const int64_t shapes[4][4] = {{301}, {23, 29}, {11, 13, 17}, {5, 6, 7, 8}};
    static const double densities[] = {0.2, 0.35, 0.6, 0.9};
    int cases = 0;
    for (int nd = 1; nd <= 4; nd++)
        for (int conn = 1; conn <= nd; conn++)
            for (int di = 0; di < 4; di++) {
                nx_tensor *m = random_mask(ctx, nd, shapes[nd - 1], densities[di],
                                           (uint64_t)(nd * 100 + conn * 10 + di));
                nx_tensor *a = NULL, *b = NULL, *md = placed(m, device);
                int32_t ka = -1, kb = -2;
                assert_non_null(md);
                m = random_mask(ctx, nd, shapes[nd - 1], densities[di],
                                (uint64_t)(nd * 100 + conn * 10 + di));
                assert_int_equal(nx_connected_components(ctx, m, conn, &a, &ka), NX_OK);
                if (propagate(ctx, md, conn, be, &b, &kb) != NX_OK)
                    fail_msg("nd %d conn %d backend %d: %s", nd, conn, (int)be,
                             nx_ctx_last_error(ctx));
                assert_int_equal(ka, kb);
                b = on_host(b);
                assert_memory_equal(nx_tensor_data(a), nx_tensor_data(b),
                                    (size_t)nx_tensor_numel(m) * sizeof(int32_t));
                nx_tensor_free(a);
                nx_tensor_free(b);
                nx_tensor_free(m);
                nx_tensor_free(md);
                cases++;
            }
    assert_int_equal(cases, 4 * (1 + 2 + 3 + 4));
}

static void test_random_equals_union_find(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    random_on(ctx, NX_BACKEND_CPU, false);
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

/* A mask whose strides give no flat view (a permuted 3-D one) reaches the graph in its own shape
 * and is reshaped there: the labels of the permuted mask equal union-find's on its contiguous
 * copy. The permutation of a [9, 14, 11] mask, placed on the device first when device is set
 * (NULL where there is no GPU), or its contiguous copy on the host. */
static nx_tensor *permuted_mask(nx_ctx *ctx, bool contiguous, bool device)
{
    int64_t s[3] = {9, 14, 11};
    nx_tensor *m = placed(random_mask(ctx, 3, s, 0.45, 99), device), *p = NULL, *c = NULL;
    if (!m)
        return NULL;
    assert_int_equal(nx_tensor_permute(m, (const int[]){2, 0, 1}, &p), NX_OK);
    nx_tensor_free(m);
    if (!contiguous)
        return p;
    assert_int_equal(nx_tensor_contiguous(p, &c), NX_OK);
    nx_tensor_free(p);
    return c;
}

/* Labels of the strided mask p on backend be equal union-find's on c, its contiguous copy. */
static void strided_on(nx_ctx *ctx, const nx_tensor *p, const nx_tensor *c, nx_backend be)
{
    assert_false(nx_tensor_is_contiguous(p));
    for (int conn = 1; conn <= 3; conn++) {
        nx_tensor *a = NULL, *b = NULL;
        int32_t ka = -1, kb = -2;
        assert_int_equal(nx_connected_components(ctx, c, conn, &a, &ka), NX_OK);
        if (propagate(ctx, p, conn, be, &b, &kb) != NX_OK)
            fail_msg("strided mask, backend %d: %s", (int)be, nx_ctx_last_error(ctx));
        assert_int_equal(nx_tensor_device(b), nx_tensor_device(p));
        assert_int_equal(ka, kb);
        assert_true(conn > 1 || ka > 1); /* at 45 %, several components under 6-connectivity */
        assert_memory_equal(nx_tensor_shape(b), nx_tensor_shape(p), 3 * sizeof(int64_t));
        b = on_host(b);
        assert_memory_equal(nx_tensor_data(a), nx_tensor_data(b), 9 * 14 * 11 * sizeof(int32_t));
        nx_tensor_free(a);
        nx_tensor_free(b);
    }
}

static void test_strided_mask(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    nx_tensor *p = permuted_mask(ctx, false, false), *c = permuted_mask(ctx, true, false);
    strided_on(ctx, p, c, NX_BACKEND_CPU);
    nx_tensor_free(p);
    nx_tensor_free(c);
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

/* A serpentine path through a 2-D grid (rows joined alternately at the right and left ends) is
 * one component whose C-order first voxel is (0, 0), so every path voxel is labelled 1; walking
 * the path, indices rise and fall, which is the case pointer jumping does not shorten. The
 * complement (the walls between the rows) gives one component per wall. */
static void test_serpentine(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    enum { R = 31, C = 17 };
    int64_t shape[2] = {R, C};
    nx_tensor *m = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_U8, 2, shape, &m), NX_OK);
    uint8_t *d = nx_tensor_data(m);
    memset(d, 0, R * C);
    for (int r = 0; r < R; r += 2) {
        memset(d + r * C, 1, C);
        if (r + 1 < R)
            d[(r + 1) * C + ((r / 2) % 2 == 0 ? C - 1 : 0)] = 1;
    }
    nx_tensor *y = NULL;
    int32_t k = -1;
    assert_int_equal(propagate(ctx, m, 1, NX_BACKEND_CPU, &y, &k), NX_OK);
    assert_int_equal(k, 1);
    const int32_t *l = nx_tensor_data(y);
    for (int i = 0; i < R * C; i++)
        assert_int_equal(l[i], d[i] ? 1 : 0);
    nx_tensor_free(y);
    /* the walls: rows 1, 3, ..., each less its one gap, numbered from 1 in row order */
    for (int i = 0; i < R * C; i++)
        d[i] = !d[i];
    assert_int_equal(propagate(ctx, m, 1, NX_BACKEND_CPU, &y, &k), NX_OK);
    assert_int_equal(k, R / 2);
    l = nx_tensor_data(y);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++)
            assert_int_equal(l[r * C + c], d[r * C + c] ? r / 2 + 1 : 0);
    nx_tensor_free(y);
    nx_tensor_free(m);
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

/* Long runs of a 1-D mask: hooking and jumping shorten a run of n voxels about five-fold per
 * round, so 30000 voxels take more rounds than one program run holds (8 on a run of 20000 in a
 * NumPy model of the rounds) and the host repeats the run until the labels are a fixed point.
 * Zeros at 10000 and 20001 leave three runs, numbered 1, 2, 3 (closed form). */
static void long_runs_on(nx_ctx *ctx, nx_backend be, bool device)
{
    enum { N = 30000 };
    int64_t n = N;
    nx_tensor *m = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_U8, 1, &n, &m), NX_OK);
    uint8_t *d = nx_tensor_data(m);
    memset(d, 1, N);
    d[10000] = d[20001] = 0;
    m = placed(m, device);
    assert_non_null(m);
    nx_tensor *y = NULL;
    int32_t k = -1;
    assert_int_equal(propagate(ctx, m, 1, be, &y, &k), NX_OK);
    assert_int_equal(k, 3);
    y = on_host(y);
    const int32_t *l = nx_tensor_data(y);
    for (int i = 0; i < N; i++)
        assert_int_equal(l[i], i < 10000    ? 1
                               : i == 10000 ? 0
                               : i < 20001  ? 2
                               : i == 20001 ? 0
                                            : 3);
    nx_tensor_free(y);
    nx_tensor_free(m);
}

static void test_long_runs(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    long_runs_on(ctx, NX_BACKEND_REF, false);
    long_runs_on(ctx, NX_BACKEND_CPU, false);
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

static void test_empty_and_background(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t zero[2] = {0, 5}, s[3] = {3, 4, 5};
    nx_tensor *z = NULL, *bg = NULL, *y = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, 2, zero, &z), NX_OK);
    int32_t k = -1;
    assert_int_equal(propagate(ctx, z, 2, NX_BACKEND_CPU, &y, &k), NX_OK);
    assert_int_equal(k, 0);
    assert_int_equal(nx_tensor_numel(y), 0);
    assert_int_equal(nx_tensor_ndim(y), 2);
    nx_tensor_free(y);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 3, s, &bg), NX_OK);
    memset(nx_tensor_data(bg), 0, 60 * sizeof(double));
    assert_int_equal(propagate(ctx, bg, 3, NX_BACKEND_CPU, &y, &k), NX_OK);
    assert_int_equal(k, 0);
    for (int i = 0; i < 60; i++)
        assert_int_equal(((int32_t *)nx_tensor_data(y))[i], 0);
    nx_tensor_free(y);
    nx_tensor_free(bg);
    nx_tensor_free(z);
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

static void test_bad_options(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t s = 8;
    nx_tensor *m = random_mask(ctx, 1, &s, 0.5, 7), *y = NULL;
    nx_label_opts o = {.connectivity = 1, .driver = "flood"};
    assert_int_equal(nx_connected_components_opts(ctx, m, &o, &y, NULL), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "propagation"));
    assert_null(y);
    o.driver = "propagation";
    o.connectivity = 2;
    assert_int_equal(nx_connected_components_opts(ctx, m, &o, &y, NULL), NX_ERR_INVALID_ARG);
    o.connectivity = 1;
    o.backend = (nx_backend)99;
    assert_int_equal(nx_connected_components_opts(ctx, m, &o, &y, NULL), NX_ERR_INVALID_ARG);
    assert_null(y);
    assert_int_equal(nx_connected_components_opts(ctx, m, NULL, &y, NULL), NX_ERR_INVALID_ARG);
    nx_tensor_free(m);
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

/* On the GPU (where one answers; else nx_tensor_to_device says why, NX_ERR_BACKEND, and there is
 * nothing more to run): the scipy cases with the mask on the device and on the host, the random
 * masks against union-find, a permuted (strided) device mask, and long runs that take several
 * program runs; the labels of a device mask stay on the device. */
static void test_device(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t one = 1;
    nx_tensor *probe = NULL, *pd = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_U8, 1, &one, &probe), NX_OK);
    nx_status st = nx_tensor_to_device(probe, NX_DEVICE_CUDA, &pd);
    nx_tensor_free(probe);
    if (st != NX_OK) {
        assert_int_equal(st, NX_ERR_BACKEND);
        assert_true(strlen(nx_ctx_last_error(ctx)) > 0);
        assert_null(pd);
        nx_ctx_free(ctx);
        assert_int_equal(g_ta.live, 0);
        return;
    }
    nx_tensor_free(pd);
    golden_on(ctx, NX_BACKEND_CUDA, true);
    golden_on(ctx, NX_BACKEND_CUDA, false);
    random_on(ctx, NX_BACKEND_CUDA, true);
    nx_tensor *p = permuted_mask(ctx, false, true), *c = permuted_mask(ctx, true, false);
    assert_non_null(p);
    strided_on(ctx, p, c, NX_BACKEND_CUDA);
    nx_tensor_free(p);
    nx_tensor_free(c);
    long_runs_on(ctx, NX_BACKEND_CUDA, true);
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

/* A 6 x 7 mask (one program run), or a run of 2000 ones in 1-D, which takes five rounds (NumPy
 * model), so two program runs: the round program is compiled and run on the first's labels. */
static nx_status sweep_body(nx_ctx *ctx, void *user)
{
    bool long_run = user != NULL;
    int64_t s[2] = {6, 7}, n = 2000;
    nx_tensor *m = NULL, *y = NULL;
    nx_status st = long_run ? nx_tensor_new(ctx, NX_DTYPE_U8, 1, &n, &m)
                            : nx_tensor_new(ctx, NX_DTYPE_U8, 2, s, &m);
    if (st == NX_OK) {
        uint8_t *d = nx_tensor_data(m);
        for (int i = 0; i < nx_tensor_numel(m); i++)
            d[i] = long_run || (i * 7 + i / 5) % 3 != 0;
    }
    int32_t k = 0;
    if (st == NX_OK)
        st = propagate(ctx, m, long_run ? 1 : 2, NX_BACKEND_REF, &y, &k);
    if (st == NX_OK && long_run && (k != 1 || ((const int32_t *)nx_tensor_data(y))[1999] != 1))
        st = NX_ERR_INTERNAL; /* one component, labelled 1 */
    nx_tensor_free(y);
    nx_tensor_free(m);
    return st;
}

static void test_alloc_sweep(void **state)
{
    (void)state;
    assert_true(nx_test_alloc_sweep(sweep_body, NULL, 200000) > 0);
    assert_true(nx_test_alloc_sweep(sweep_body, "long run", 200000) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_random_equals_union_find),
        cmocka_unit_test(test_strided_mask),
        cmocka_unit_test(test_serpentine),
        cmocka_unit_test(test_long_runs),
        cmocka_unit_test(test_empty_and_background),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_alloc_sweep),
        cmocka_unit_test(test_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
