/* Driver situations no CI machine has, played by tests/cuda/fake-libcuda.c through
 * NITRIX_CUDA_DRIVER_PATH: no device (cuInit answers CUDA_ERROR_NO_DEVICE), a driver listing no
 * GPU, only a GPU below compute capability 8.0, and an old GPU beside a usable one. meson runs this
 * program once per situation; NX_TEST_FAKE_CASE names it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nitrix-graph.h"
#include "runtime/cuda.h"
#include "testutil.h"

static const char *fake_case(void)
{
    const char *c = getenv("NX_TEST_FAKE_CASE");
    return c ? c : "";
}

static void probe(nx_system_info *info)
{
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    memset(info, 0, sizeof *info);
    nx_rt_cuda_probe(ctx, info);
    nx_ctx_free(ctx);
}

/* nx_tensor_to_device must fail with NX_ERR_BACKEND and this reason in the message. */
static void expect_backend_error(const char *reason)
{
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t shape[1] = {4};
    nx_tensor *h = NULL, *d = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, 1, shape, &h), NX_OK);
    assert_int_equal(nx_tensor_to_device(h, NX_DEVICE_CUDA, &d), NX_ERR_BACKEND);
    assert_null(d);
    const char *msg = nx_ctx_last_error(ctx);
    if (!strstr(msg, reason))
        fail_msg("message '%s' lacks '%s'", msg, reason);
    nx_tensor_free(h);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void test_no_device(void **state)
{
    (void)state;
    if (strcmp(fake_case(), "no-device") != 0)
        skip();
    const nx_rt_cuda_driver *d = nx_rt_cuda_driver_get();
    assert_false(d->ok);
    assert_string_equal(d->status,
                        "cuInit failed: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is "
                        "detected");
    nx_system_info info;
    probe(&info);
    assert_false(info.cuda_driver_found);
    assert_int_equal(info.cuda_driver_version, 13000); /* read before cuInit */
    assert_int_equal(info.gpu_count, 0);
    expect_backend_error("CUDA_ERROR_NO_DEVICE (100)");
}

static void test_zero_devices(void **state)
{
    (void)state;
    if (strcmp(fake_case(), "zero-devices") != 0)
        skip();
    const nx_rt_cuda_driver *d = nx_rt_cuda_driver_get();
    assert_false(d->ok);
    assert_string_equal(d->status, "no CUDA device: the driver lists no GPU");
    expect_backend_error("the driver lists no GPU");
}

static void test_old_gpu(void **state)
{
    (void)state;
    if (strcmp(fake_case(), "old-gpu") != 0)
        skip();
    const nx_rt_cuda_driver *d = nx_rt_cuda_driver_get();
    assert_true(d->ok);
    assert_int_equal(d->first_usable, -1);
    assert_string_equal(d->status,
                        "no GPU of compute capability >= 8.0: GPU 0 "
                        "'Tesla V100-SXM2-16GB' is 7.0 (Ampere and newer are supported)");
    nx_system_info info;
    probe(&info);
    /* listed, with its numbers, though unusable */
    assert_true(info.cuda_driver_found);
    assert_int_equal(info.gpu_count, 1);
    assert_string_equal(info.gpus[0].name, "Tesla V100-SXM2-16GB");
    assert_int_equal(info.gpus[0].cc_major, 7);
    assert_int_equal(info.gpus[0].cc_minor, 0);
    assert_int_equal(info.gpus[0].sm_count, 80);
    assert_int_equal(info.gpus[0].memory_bytes, (int64_t)16 << 30);
    assert_string_equal(info.cuda_status, d->status);
    expect_backend_error("compute capability >= 8.0");
}

static void test_mixed(void **state)
{
    (void)state;
    if (strcmp(fake_case(), "mixed") != 0)
        skip();
    const nx_rt_cuda_driver *d = nx_rt_cuda_driver_get();
    assert_true(d->ok);
    assert_int_equal(d->gpu_count, 3);
    assert_false(d->usable[0]);
    assert_true(d->usable[1]);
    assert_true(d->usable[2]);
    assert_int_equal(d->first_usable, 1);
    assert_int_equal(d->ordinal[1], 1);
    assert_string_equal(d->status, "ok (GPU 0 'Tesla V100' is compute capability 7.0, below 8.0: "
                                   "not used)");
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_rt_cuda *cu = NULL;
    assert_int_equal(nx_rt_cuda_get(ctx, &cu), NX_OK);
    assert_string_equal(nx_rt_cuda_device(cu)->name, "Fake A100");
    assert_int_equal(nx_rt_cuda_device(cu)->sm_count, 108);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* A device tensor given to a program on a host backend is refused, naming the backend and how to
 * copy it; the upload itself works on the fake driver. */
static void test_device_input_to_host_program(void **state)
{
    (void)state;
    if (strcmp(fake_case(), "mixed") != 0)
        skip();
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t shape[1] = {4};
    nx_tensor *h = NULL, *d = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, 1, shape, &h), NX_OK);
    memset(nx_tensor_data(h), 0, 16);
    assert_int_equal(nx_tensor_to_device(h, NX_DEVICE_CUDA, &d), NX_OK);
    static const nx_backend backends[] = {NX_BACKEND_CPU, NX_BACKEND_REF};
    static const char *const names[] = {"'cpu' backend takes host tensors",
                                        "'ref' backend takes host tensors"};
    for (int b = 0; b < 2; b++) {
        nx_graph *g = NULL;
        assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
        nx_node x = nx_input(g, "x", NX_DTYPE_F32, 1, shape);
        nx_node y = nx_exp(g, x);
        nx_compile_opts co = {.backend = backends[b], .n_outputs = 1, .outputs = &y};
        nx_program *p = NULL;
        assert_int_equal(nx_graph_compile(g, &co, &p), NX_OK);
        nx_graph_free(g);
        nx_tensor *out = NULL;
        assert_int_equal(nx_program_run(p, (const nx_tensor *const[]){d}, &out),
                         NX_ERR_INVALID_ARG);
        assert_null(out);
        if (!strstr(nx_ctx_last_error(ctx), names[b]))
            fail_msg("message: %s", nx_ctx_last_error(ctx));
        nx_program_free(p);
    }
    nx_tensor_free(d);
    nx_tensor_free(h);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

int main(void)
{
    print_message("fake driver case: %s\n", fake_case());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_device),
        cmocka_unit_test(test_zero_devices),
        cmocka_unit_test(test_old_gpu),
        cmocka_unit_test(test_mixed),
        cmocka_unit_test(test_device_input_to_host_program),
    };
    return cmocka_run_group_tests_name("cuda-fake", tests, NULL, NULL);
}
