/* NVRTC compilation without a GPU: CUDA C -> PTX (compute_80, compute_90) and cubin (sm_90),
 * checked by their text and ELF header and, where ptxas is installed, assembled by ptxas as an
 * independent validator. Skipped with a printed reason where NVRTC is missing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/ptx/ptx.h"
#include "kernels.h"
#include "testutil.h"

#define PTXAS "/usr/local/cuda/bin/ptxas"

static bool need_nvrtc(void)
{
    const nx_rt_nvrtc *n = nx_rt_nvrtc_get();
    if (!n->ok)
        print_message("skipped: %s\n", n->status);
    return n->ok;
}

static nx_ptx_target ptx(int arch)
{
    nx_ptx_target t = {arch, NX_PTX_KIND_PTX};
    return t;
}

/* Assembles PTX text with ptxas for sm_<arch>; returns false with ptxas's output on failure.
 * ptxas is an independent compiler of the PTX NVRTC produced. */
static bool ptxas_accepts(const char *text, int arch, char *why, size_t len)
{
    char in[] = "/tmp/nx-ptx-XXXXXX";
    int fd = mkstemp(in);
    if (fd < 0) {
        snprintf(why, len, "mkstemp failed");
        return false;
    }
    size_t n = strlen(text);
    bool wrote = write(fd, text, n) == (ssize_t)n;
    close(fd);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "%s -arch=sm_%d -o /dev/null %s 2>&1", PTXAS, arch, in);
    FILE *p = wrote ? popen(cmd, "r") : NULL;
    size_t got = p ? fread(why, 1, len - 1, p) : 0;
    why[got] = '\0';
    int rc = p ? pclose(p) : -1;
    unlink(in);
    return wrote && rc == 0;
}

static void check_with_ptxas(const char *text, int arch)
{
    if (access(PTXAS, X_OK) != 0) {
        print_message("note: %s not installed; PTX not assembled\n", PTXAS);
        return;
    }
    char why[1024];
    if (!ptxas_accepts(text, arch, why, sizeof why))
        fail_msg("ptxas -arch=sm_%d rejected the PTX: %s", arch, why);
}

static void compile_ok(nx_ctx *ctx, const char *src, const char *name, nx_ptx_target t,
                       nx_ptx_image *img)
{
    nx_status st = nx_ptx_compile(ctx, src, name, t, NULL, 0, img);
    if (st != NX_OK)
        fail_msg("compiling %s for arch %d: %s", name, t.arch, nx_ctx_last_error(ctx));
    assert_non_null(img->data);
    assert_non_null(img->log);
}

static void test_elementwise_ptx(void **state)
{
    (void)state;
    if (!need_nvrtc())
        skip();
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    static const int archs[] = {80, 90};
    for (int i = 0; i < 2; i++) {
        nx_ptx_image img;
        compile_ok(ctx, kernel_add_relu, "add_relu.cu", ptx(archs[i]), &img);
        char target[32];
        snprintf(target, sizeof target, ".target sm_%d", archs[i]);
        assert_non_null(strstr(img.data, target));
        assert_non_null(strstr(img.data, ".visible .entry add_relu("));
        /* float4 loads and stores: 16-byte vector accesses in the PTX */
        assert_true(strstr(img.data, "ld.global.nc.v4.f32") ||
                    strstr(img.data, "ld.global.v4.f32"));
        assert_non_null(strstr(img.data, "st.global.v4.f32"));
        assert_int_equal(strlen(img.data) + 1, img.size);
        assert_int_equal(img.target.arch, archs[i]);
        assert_int_equal(img.target.kind, NX_PTX_KIND_PTX);
        check_with_ptxas(img.data, archs[i]);
        nx_ptx_image_free(ctx, &img);
    }
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void test_maxplus_ptx(void **state)
{
    (void)state;
    if (!need_nvrtc())
        skip();
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    static const int archs[] = {80, 90};
    for (int i = 0; i < 2; i++) {
        nx_ptx_image img;
        compile_ok(ctx, kernel_maxplus, "maxplus.cu", ptx(archs[i]), &img);
        char target[32];
        snprintf(target, sizeof target, ".target sm_%d", archs[i]);
        assert_non_null(strstr(img.data, target));
        assert_non_null(strstr(img.data, ".visible .entry maxplus_matmul("));
        assert_non_null(strstr(img.data, ".shared"));      /* k-slices staged in shared memory */
        assert_non_null(strstr(img.data, "bar.sync"));     /* with barriers between stages */
        assert_non_null(strstr(img.data, "max.f32"));      /* the semiring's reduce */
        assert_non_null(strstr(img.data, ".maxntid 256")); /* __launch_bounds__(256) */
        check_with_ptxas(img.data, archs[i]);
        /* sm_80 PTX also runs on later GPUs through the driver's JIT */
        if (archs[i] == 80)
            check_with_ptxas(img.data, 90);
        nx_ptx_image_free(ctx, &img);
    }
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void test_cubin(void **state)
{
    (void)state;
    if (!need_nvrtc())
        skip();
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_ptx_image img;
    nx_ptx_target t = {90, NX_PTX_KIND_CUBIN};
    compile_ok(ctx, kernel_maxplus, "maxplus.cu", t, &img);
    const unsigned char *e = (const unsigned char *)img.data;
    assert_true(img.size > 64);
    assert_memory_equal(e, "\177ELF", 4);
    assert_int_equal(e[4], 2);                   /* ELFCLASS64 */
    assert_int_equal(e[18] | (e[19] << 8), 190); /* e_machine EM_CUDA */
    assert_int_equal(img.target.kind, NX_PTX_KIND_CUBIN);
    nx_ptx_image_free(ctx, &img);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void test_compile_error_log(void **state)
{
    (void)state;
    if (!need_nvrtc())
        skip();
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_ptx_image img;
    nx_status st = nx_ptx_compile(ctx, kernel_broken, "broken.cu", ptx(90), NULL, 0, &img);
    assert_int_equal(st, NX_ERR_BACKEND);
    const char *msg = nx_ctx_last_error(ctx);
    assert_non_null(strstr(msg, "broken.cu"));
    assert_non_null(strstr(msg, "compute_90"));
    assert_non_null(strstr(msg, "NVRTC_ERROR_COMPILATION"));
    assert_non_null(strstr(msg, "undeclared_value_xyz"));
    assert_null(img.data);
    assert_null(img.log);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void test_bad_options(void **state)
{
    (void)state;
    if (!need_nvrtc())
        skip();
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_ptx_image img;
    const char *bad[] = {"--no-such-option-anywhere"};
    assert_int_equal(nx_ptx_compile(ctx, kernel_add_relu, "a.cu", ptx(90), bad, 1, &img),
                     NX_ERR_BACKEND);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "NVRTC_ERROR_INVALID_OPTION"));
    /* CUDA 12 and later compile nothing below sm_50, CUDA 13 nothing below sm_75 */
    assert_int_equal(nx_ptx_compile(ctx, kernel_add_relu, "a.cu", ptx(30), NULL, 0, &img),
                     NX_ERR_BACKEND);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "compute_30"));
    assert_int_equal(nx_ptx_compile(ctx, kernel_add_relu, "a.cu", ptx(0), NULL, 0, &img),
                     NX_ERR_INVALID_ARG);
    assert_int_equal(nx_ptx_compile(ctx, NULL, "a.cu", ptx(90), NULL, 0, &img), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_ptx_compile(ctx, kernel_add_relu, "a.cu", ptx(90), NULL, -1, &img),
                     NX_ERR_INVALID_ARG);
    /* extra options that exist are passed through */
    const char *good[] = {"--fmad=false", "-DUNUSED=1"};
    assert_int_equal(nx_ptx_compile(ctx, kernel_add_relu, "a.cu", ptx(80), good, 2, &img), NX_OK);
    nx_ptx_image_free(ctx, &img);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void test_choose_target(void **state)
{
    (void)state;
    /* NVRTC 13.0's list (toolchain notes) and a shorter one */
    static const int a13[] = {75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121};
    static const int a_short[] = {75, 80, 90};
    nx_ptx_target t = nx_ptx_choose_target(9, 0, 13, a13, 12, 13000);
    assert_int_equal(t.arch, 90);
    assert_int_equal(t.kind, NX_PTX_KIND_CUBIN);
    t = nx_ptx_choose_target(9, 0, 13, a13, 12, 13020); /* newer minor driver: still cubin */
    assert_int_equal(t.kind, NX_PTX_KIND_CUBIN);
    t = nx_ptx_choose_target(9, 0, 13, a13, 12, 12080); /* driver older than NVRTC */
    assert_int_equal(t.arch, 90);
    assert_int_equal(t.kind, NX_PTX_KIND_PTX);
    t = nx_ptx_choose_target(9, 0, 12, a_short, 3, 13000); /* NVRTC older than the driver */
    assert_int_equal(t.kind, NX_PTX_KIND_PTX);
    t = nx_ptx_choose_target(9, 0, 13, a13, 12, 0); /* driver version unknown */
    assert_int_equal(t.kind, NX_PTX_KIND_PTX);
    t = nx_ptx_choose_target(8, 6, 13, a_short, 3, 13000); /* no sm_86 in the list */
    assert_int_equal(t.arch, 80);
    assert_int_equal(t.kind, NX_PTX_KIND_PTX);
    t = nx_ptx_choose_target(12, 1, 13, a_short, 3, 13000); /* a device newer than NVRTC */
    assert_int_equal(t.arch, 90);
    assert_int_equal(t.kind, NX_PTX_KIND_PTX);
    t = nx_ptx_choose_target(7, 0, 13, a13, 12, 13000); /* below CUDA 13's floor */
    assert_int_equal(t.arch, 0);
}

static void test_toolchain_key(void **state)
{
    (void)state;
    const nx_rt_nvrtc *n = nx_rt_nvrtc_get();
    char key[64], want[64];
    nx_ptx_toolchain_key(key, sizeof key);
    if (n->ok)
        snprintf(want, sizeof want, "nvrtc-%d.%d/driver-%d", n->major, n->minor,
                 nx_rt_cuda_driver_get()->version);
    else
        snprintf(want, sizeof want, "nvrtc-none/driver-%d", nx_rt_cuda_driver_get()->version);
    assert_string_equal(key, want);
    /* the soname fixes the major version independently of what NVRTC reports */
    if (n->ok && strcmp(n->path, "libnvrtc.so.13") == 0)
        assert_non_null(strstr(key, "nvrtc-13."));
}

static nx_status sweep_compile(nx_ctx *ctx, void *user)
{
    (void)user;
    nx_ptx_image img;
    nx_status st = nx_ptx_compile(ctx, kernel_add_relu, "add_relu.cu", ptx(80), NULL, 0, &img);
    if (st == NX_OK)
        nx_ptx_image_free(ctx, &img);
    return st;
}

static nx_status sweep_compile_error(nx_ctx *ctx, void *user)
{
    (void)user;
    nx_ptx_image img;
    nx_status st = nx_ptx_compile(ctx, kernel_broken, "broken.cu", ptx(80), NULL, 0, &img);
    return st == NX_ERR_BACKEND ? NX_OK : st;
}

static void test_alloc_sweep(void **state)
{
    (void)state;
    if (!need_nvrtc())
        skip();
    assert_true(nx_test_alloc_sweep(sweep_compile, NULL, 20) >= 2);
    assert_true(nx_test_alloc_sweep(sweep_compile_error, NULL, 20) >= 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_choose_target),
        cmocka_unit_test(test_toolchain_key),
        cmocka_unit_test(test_elementwise_ptx),
        cmocka_unit_test(test_maxplus_ptx),
        cmocka_unit_test(test_cubin),
        cmocka_unit_test(test_compile_error_log),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_alloc_sweep),
    };
    return cmocka_run_group_tests_name("cuda-nvrtc", tests, NULL, NULL);
}
