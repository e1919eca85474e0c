/* The CUDA loader on any machine: what it reports about the driver and NVRTC, checked against the
 * test's own dlopen of the same libraries; the reasons it gives when they are missing, broken or
 * the toolkit's stub; device tensors failing cleanly without a GPU; allocation-failure sweeps.
 *
 * meson runs this program three times: as is, and with NITRIX_NVRTC_PATH naming a file that does
 * not exist and a file that is not a library (the test reads the variable to know which). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/ptx/ptx.h"
#include "kernels.h"
#include "testutil.h"

#define STUB "/usr/local/cuda/lib64/stubs/libcuda.so"

/* Whether a real driver is on this machine, judged by the test itself. */
static bool driver_present(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib)
        dlclose(lib);
    return lib != NULL;
}

static const char *nvrtc_env(void)
{
    const char *e = getenv("NITRIX_NVRTC_PATH");
    return e && *e ? e : NULL;
}

/* Set by meson for the runs where NITRIX_NVRTC_PATH names something unusable. */
static bool expect_nvrtc_missing(void)
{
    const char *e = getenv("NX_TEST_EXPECT_NVRTC_MISSING");
    return e && strcmp(e, "1") == 0;
}

/* Many threads race into the one-time loaders; all must see the same, complete result. This runs
 * first, before anything else in the process has loaded the libraries. */
static void *race(void *arg)
{
    const void **out = arg;
    out[0] = nx_rt_cuda_driver_get();
    out[1] = nx_rt_nvrtc_get();
    return NULL;
}

static void test_threaded_first_load(void **state)
{
    (void)state;
    enum { N = 8 };
    pthread_t th[N];
    const void *got[N][2];
    for (int i = 0; i < N; i++)
        assert_int_equal(pthread_create(&th[i], NULL, race, got[i]), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    for (int i = 1; i < N; i++) {
        assert_ptr_equal(got[i][0], got[0][0]);
        assert_ptr_equal(got[i][1], got[0][1]);
    }
    const nx_rt_cuda_driver *d = got[0][0];
    const nx_rt_nvrtc *n = got[0][1];
    assert_true(d->status[0] != '\0');
    assert_true(n->status[0] != '\0');
}

static void test_probe_driver(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_system_info info;
    memset(&info, 0x5a, sizeof info);
    nx_rt_cuda_probe(ctx, &info);
    assert_non_null(memchr(info.cuda_status, '\0', sizeof info.cuda_status));
    if (!driver_present()) {
        assert_false(info.cuda_driver_found);
        assert_int_equal(info.cuda_driver_version, 0);
        assert_int_equal(info.gpu_count, 0);
        assert_non_null(strstr(info.cuda_status, "no CUDA driver"));
        assert_non_null(strstr(info.cuda_status, "libcuda.so.1"));
    } else {
        print_message("driver: %s, version %d, %d GPU(s)\n", info.cuda_status,
                      info.cuda_driver_version, info.gpu_count);
        if (info.cuda_driver_found) {
            assert_true(info.cuda_driver_version >= 12000);
            assert_in_range(info.gpu_count, 1, NX_MAX_GPUS);
        }
        for (int i = 0; i < info.gpu_count; i++) {
            const nx_gpu_info *g = &info.gpus[i];
            print_message("GPU %d: %s, cc %d.%d, %d SMs, %lld bytes\n", i, g->name, g->cc_major,
                          g->cc_minor, g->sm_count, (long long)g->memory_bytes);
            assert_true(g->name[0] != '\0');
            assert_in_range(g->cc_major, 3, 20);
            assert_in_range(g->cc_minor, 0, 9);
            assert_true(g->sm_count > 0);
            assert_true(g->memory_bytes > ((int64_t)1 << 28));
        }
    }
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* The test's own look for NVRTC, along the documented search order. */
static void *find_nvrtc(const char **name)
{
    if (nvrtc_env()) {
        *name = nvrtc_env();
        return dlopen(*name, RTLD_NOW | RTLD_LOCAL);
    }
    static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
    for (size_t i = 0; i < 3; i++) {
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib) {
            *name = names[i];
            return lib;
        }
    }
    return NULL;
}

static void test_probe_nvrtc(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_system_info info;
    memset(&info, 0, sizeof info);
    nx_rt_cuda_probe(ctx, &info);
    const nx_rt_nvrtc *n = nx_rt_nvrtc_get();
    if (expect_nvrtc_missing()) {
        assert_non_null(nvrtc_env());
        /* both configured paths are unusable: NVRTC must be reported missing, with the path */
        assert_false(info.nvrtc_found);
        assert_false(n->ok);
        assert_non_null(strstr(n->status, "NITRIX_NVRTC_PATH"));
        assert_non_null(strstr(n->status, "NVRTC not found"));
        nx_ptx_image img;
        nx_ptx_target t = {90, NX_PTX_KIND_PTX};
        assert_int_equal(nx_ptx_compile(ctx, kernel_add_relu, "a.cu", t, NULL, 0, &img),
                         NX_ERR_BACKEND);
        assert_non_null(strstr(nx_ctx_last_error(ctx), "NITRIX_NVRTC_PATH"));
        assert_null(img.data);
    } else {
        const char *name = NULL;
        void *lib = find_nvrtc(&name);
        assert_int_equal(info.nvrtc_found, lib != NULL);
        if (lib) {
            int (*version)(int *, int *) = NULL;
            void *sym = dlsym(lib, "nvrtcVersion");
            assert_non_null(sym);
            memcpy(&version, &sym, sizeof sym);
            int major = -1, minor = -1;
            assert_int_equal(version(&major, &minor), 0);
            assert_int_equal(info.nvrtc_major, major);
            assert_int_equal(info.nvrtc_minor, minor);
            assert_string_equal(n->path, name);
            if (strcmp(name, "libnvrtc.so.13") == 0)
                assert_int_equal(info.nvrtc_major, 13);
            assert_string_equal(n->status, "ok");
            assert_true(n->n_archs > 0);
            for (int i = 1; i < n->n_archs; i++)
                assert_true(n->archs[i] > n->archs[i - 1]);
            dlclose(lib);
        } else {
            assert_non_null(strstr(n->status, "NVRTC not found"));
        }
    }
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void test_driver_paths(void **state)
{
    (void)state;
    nx_rt_cuda_driver d;
    nx_rt_cuda_driver_open("/nonexistent/dir/libcuda.so.1", &d);
    assert_false(d.ok);
    assert_null(d.lib);
    assert_int_equal(d.first_usable, -1);
    assert_non_null(strstr(d.status, "no CUDA driver"));
    assert_non_null(strstr(d.status, "/nonexistent/dir/libcuda.so.1"));
    nx_rt_cuda_driver_close(&d);

    /* a real library that is not a driver */
    nx_rt_cuda_driver_open("libm.so.6", &d);
    assert_false(d.ok);
    assert_null(d.lib);
    assert_non_null(strstr(d.status, "lacks cuInit"));
    nx_rt_cuda_driver_close(&d);
}

static void test_driver_stub(void **state)
{
    (void)state;
    if (access(STUB, R_OK) != 0) {
        print_message("skipped: no toolkit stub at %s\n", STUB);
        skip();
    }
    nx_rt_cuda_driver d;
    nx_rt_cuda_driver_open(STUB, &d);
    assert_false(d.ok);
    assert_int_equal(d.gpu_count, 0);
    assert_int_equal(d.first_usable, -1);
    assert_non_null(strstr(d.status, "cuInit failed"));
    assert_non_null(strstr(d.status, "CUDA_ERROR_STUB_LIBRARY (34)"));
    nx_rt_cuda_driver_close(&d);
}

static void test_nvrtc_paths(void **state)
{
    (void)state;
    nx_rt_nvrtc n;
    nx_rt_nvrtc_open("/nonexistent/dir/libnvrtc.so.13", &n);
    assert_false(n.ok);
    assert_null(n.lib);
    assert_non_null(strstr(n.status, "NVRTC not found"));
    assert_non_null(strstr(n.status, "/nonexistent/dir/libnvrtc.so.13"));
    nx_rt_nvrtc_close(&n);

    nx_rt_nvrtc_open(__FILE__, &n); /* a file that is not a library */
    assert_false(n.ok);
    assert_null(n.lib);
    assert_non_null(strstr(n.status, "NVRTC not found"));
    nx_rt_nvrtc_close(&n);

    nx_rt_nvrtc_open("libm.so.6", &n);
    assert_false(n.ok);
    assert_null(n.lib);
    assert_non_null(strstr(n.status, "lacks nvrtc"));
    nx_rt_nvrtc_close(&n);
}

static void test_error_names(void **state)
{
    (void)state;
    char buf[160];
    nx_rt_cuda_strerror(NULL, 100, buf, sizeof buf);
    assert_string_equal(buf, "CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected");
    nx_rt_cuda_strerror(NULL, 34, buf, sizeof buf);
    assert_non_null(strstr(buf, "CUDA_ERROR_STUB_LIBRARY (34)"));
    nx_rt_cuda_strerror(NULL, 12345, buf, sizeof buf);
    assert_string_equal(buf, "CUDA_ERROR (12345): no description");
}

static void fill_f32(nx_tensor *t)
{
    float *x = nx_tensor_data(t);
    for (int64_t i = 0; i < nx_tensor_numel(t); i++)
        x[i] = (float)i * 0.5f - 3.0f;
}

static void test_to_device_without_gpu(void **state)
{
    (void)state;
    if (nx_rt_cuda_available(NULL) == NX_OK) {
        print_message("skipped: a usable GPU is present (the GPU suite covers this)\n");
        skip();
    }
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t shape[2] = {3, 4};
    nx_tensor *h = NULL, *d = (nx_tensor *)&shape;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, 2, shape, &h), NX_OK);
    fill_f32(h);
    assert_int_equal(nx_tensor_to_device(h, NX_DEVICE_CUDA, &d), NX_ERR_BACKEND);
    assert_null(d);
    const char *msg = nx_ctx_last_error(ctx);
    assert_non_null(strstr(msg, "CUDA backend unavailable"));
    assert_non_null(strstr(msg, nx_rt_cuda_driver_get()->status));
    if (!driver_present())
        assert_non_null(strstr(msg, "libcuda.so.1"));
    /* the same for every other entry into the device layer */
    nx_rt_cuda *cu = NULL;
    nx_rt_cuda_block *b = NULL;
    nx_cu_module m = NULL;
    assert_int_equal(nx_rt_cuda_get(ctx, &cu), NX_ERR_BACKEND);
    assert_int_equal(nx_rt_cuda_malloc(ctx, 64, &b), NX_ERR_BACKEND);
    assert_null(b);
    assert_int_equal(nx_rt_cuda_module_load(ctx, "not ptx", &m), NX_ERR_BACKEND);
    assert_int_equal(nx_ptx_load(ctx, kernel_add_relu, "a.cu", NULL, 0, &m), NX_ERR_BACKEND);
    assert_null(m);
    assert_int_equal(nx_rt_cuda_sync(ctx), NX_ERR_BACKEND);
    nx_rt_cuda_stats stats;
    nx_rt_cuda_stats_get(ctx, &stats);
    assert_int_equal(stats.driver_allocs, 0);
    nx_tensor_free(h);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void test_to_device_args(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t shape[2] = {2, 3};
    nx_tensor *h = NULL, *v = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 2, shape, &h), NX_OK);
    assert_int_equal(nx_tensor_to_device(NULL, NX_DEVICE_CUDA, &v), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_tensor_to_device(h, NX_DEVICE_CUDA, NULL), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_tensor_to_device(h, (nx_device)7, &v), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "device 7"));
    assert_null(v);
    /* to the device it is already on: a new handle on the same storage, no copy */
    assert_int_equal(nx_tensor_to_device(h, NX_DEVICE_HOST, &v), NX_OK);
    assert_ptr_equal(nx_tensor_data(v), nx_tensor_data(h));
    assert_int_equal(nx_tensor_device(v), NX_DEVICE_HOST);
    assert_int_equal(nx_tensor_ndim(v), 2);
    assert_memory_equal(nx_tensor_shape(v), shape, sizeof shape);
    nx_tensor_free(h);
    ((double *)nx_tensor_data(v))[5] = 1.5; /* still alive through v */
    nx_tensor_free(v);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* host -> device -> host where a GPU answers; where none does, the expected NX_ERR_BACKEND. */
static nx_status sweep_round_trip(nx_ctx *ctx, void *user)
{
    (void)user;
    int64_t shape[2] = {5, 7};
    nx_tensor *h = NULL, *d = NULL, *back = NULL;
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F32, 2, shape, &h);
    if (st != NX_OK)
        return st;
    fill_f32(h);
    st = nx_tensor_to_device(h, NX_DEVICE_CUDA, &d);
    if (st == NX_ERR_BACKEND && nx_rt_cuda_available(NULL) != NX_OK)
        st = NX_OK;
    else if (st == NX_OK)
        st = nx_tensor_to_device(d, NX_DEVICE_HOST, &back);
    if (st == NX_OK && back &&
        memcmp(nx_tensor_data(back), nx_tensor_data(h), 35 * sizeof(float)) != 0)
        st = NX_ERR_INTERNAL;
    nx_tensor_free(back);
    nx_tensor_free(d);
    nx_tensor_free(h);
    return st;
}

static nx_status sweep_same_device(nx_ctx *ctx, void *user)
{
    (void)user;
    int64_t shape[1] = {9};
    nx_tensor *h = NULL, *v = NULL;
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_I32, 1, shape, &h);
    if (st == NX_OK)
        st = nx_tensor_to_device(h, NX_DEVICE_HOST, &v);
    nx_tensor_free(v);
    nx_tensor_free(h);
    return st;
}

static void test_alloc_sweeps(void **state)
{
    (void)state;
    assert_true(nx_test_alloc_sweep(sweep_round_trip, NULL, 50) >= 2);
    assert_true(nx_test_alloc_sweep(sweep_same_device, NULL, 50) >= 4);
}

int main(void)
{
    const char *env = nvrtc_env();
    if (env)
        print_message("NITRIX_NVRTC_PATH=%s\n", env);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threaded_first_load),
        cmocka_unit_test(test_probe_driver),
        cmocka_unit_test(test_probe_nvrtc),
        cmocka_unit_test(test_driver_paths),
        cmocka_unit_test(test_driver_stub),
        cmocka_unit_test(test_nvrtc_paths),
        cmocka_unit_test(test_error_names),
        cmocka_unit_test(test_to_device_without_gpu),
        cmocka_unit_test(test_to_device_args),
        cmocka_unit_test(test_alloc_sweeps),
    };
    return cmocka_run_group_tests_name("cuda-loader", tests, NULL, NULL);
}
