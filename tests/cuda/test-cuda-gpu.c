/* The CUDA runtime layer on a GPU: host<->device round trips of every dtype and of strided views,
 * launches of NVRTC-compiled kernels checked against C loops, the caching allocator's reuse, and
 * clean failures (bad images, bad names, device out-of-memory). Every test skips, with the reason
 * printed, where no GPU of compute capability >= 8.0 answers.
 *
 * meson also runs it over the fake driver (fake-libcuda.c, NX_TEST_FAKE_DRIVER=1): everything but
 * kernels then runs in CI, with the fake checking that every copy stays inside its allocation and
 * that no device memory outlives its context. */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen/ptx/ptx.h"
#include "kernels.h"
#include "testutil.h"

static bool need_gpu(void)
{
    if (nx_rt_cuda_available(NULL) == NX_OK)
        return true;
    print_message("skipped: %s\n", nx_ctx_last_error(NULL));
    return false;
}

#define NEED_GPU()                                                                                 \
    do {                                                                                           \
        if (!need_gpu())                                                                           \
            skip();                                                                                \
    } while (0)

static bool fake_driver(void)
{
    const char *e = getenv("NX_TEST_FAKE_DRIVER");
    return e && strcmp(e, "1") == 0;
}

#define NEED_KERNELS()                                                                             \
    do {                                                                                           \
        NEED_GPU();                                                                                \
        if (fake_driver()) {                                                                       \
            print_message("skipped: the fake driver runs no kernels\n");                           \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* A counter exported by the fake driver; -1 on a real one. */
static int fake_counter(const char *name)
{
    const char *path = getenv("NITRIX_CUDA_DRIVER_PATH");
    if (!fake_driver() || !path)
        return -1;
    void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    void *sym = lib ? dlsym(lib, name) : NULL;
    int (*fn)(void) = NULL;
    memcpy(&fn, &sym, sizeof sym);
    int v = fn ? fn() : -1;
    if (lib)
        dlclose(lib);
    if (!fn)
        fail_msg("the fake driver at %s does not export %s", path, name);
    return v;
}

/* After a context is freed, the fake must hold no device memory and have seen no stray copy. */
static void check_fake_clean(void)
{
    if (!fake_driver())
        return;
    assert_int_equal(fake_counter("fake_cuda_live_allocs"), 0);
    assert_int_equal(fake_counter("fake_cuda_bad_copies"), 0);
    assert_int_equal(fake_counter("fake_cuda_live_host"), 0); /* the staging buffer went back */
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t next_u64(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    rng_state = x;
    return x;
}

/* Uniform in [lo, hi). */
static float uniform(float lo, float hi)
{
    return lo + (hi - lo) * (float)((next_u64() >> 40) * (1.0 / (1 << 24)));
}

static nx_cu_ptr dptr(const nx_tensor *t)
{
    return (nx_cu_ptr)(uintptr_t)nx_tensor_data(t);
}

static nx_tensor *to_dev(nx_ctx *ctx, const nx_tensor *h)
{
    nx_tensor *d = NULL;
    if (nx_tensor_to_device(h, NX_DEVICE_CUDA, &d) != NX_OK)
        fail_msg("to device: %s", nx_ctx_last_error(ctx));
    return d;
}

static nx_tensor *to_host(nx_ctx *ctx, const nx_tensor *d)
{
    nx_tensor *h = NULL;
    if (nx_tensor_to_device(d, NX_DEVICE_HOST, &h) != NX_OK)
        fail_msg("to host: %s", nx_ctx_last_error(ctx));
    return h;
}

static void test_device(void **state)
{
    (void)state;
    NEED_GPU();
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_rt_cuda *cu = NULL;
    assert_int_equal(nx_rt_cuda_get(ctx, &cu), NX_OK);
    const nx_gpu_info *g = nx_rt_cuda_device(cu);
    const nx_rt_nvrtc *n = nx_rt_nvrtc_get();
    print_message("device: %s, compute capability %d.%d, %d SMs, %.1f GiB; driver %d; NVRTC "
                  "%d.%d\n",
                  g->name, g->cc_major, g->cc_minor, g->sm_count,
                  (double)g->memory_bytes / (1 << 30), nx_rt_cuda_driver_get()->version, n->major,
                  n->minor);
    assert_true(g->cc_major >= 8);
    assert_non_null(nx_rt_cuda_stream(cu));
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void fill_random(nx_tensor *t)
{
    unsigned char *p = nx_tensor_data(t);
    size_t bytes = (size_t)nx_tensor_numel(t) * nx_dtype_size(nx_tensor_dtype(t));
    for (size_t i = 0; i < bytes; i++)
        p[i] = nx_tensor_dtype(t) == NX_DTYPE_BOOL ? (unsigned char)(next_u64() & 1)
                                                   : (unsigned char)next_u64();
}

static void round_trip(nx_ctx *ctx, nx_dtype dt, int ndim, const int64_t *shape)
{
    nx_tensor *h = NULL;
    assert_int_equal(nx_tensor_new(ctx, dt, ndim, shape, &h), NX_OK);
    if (nx_tensor_numel(h) > 0)
        fill_random(h);
    nx_tensor *d = to_dev(ctx, h);
    assert_int_equal(nx_tensor_device(d), NX_DEVICE_CUDA);
    assert_int_equal(nx_tensor_dtype(d), dt);
    assert_int_equal(nx_tensor_ndim(d), ndim);
    assert_true(nx_tensor_is_contiguous(d));
    if (ndim)
        assert_memory_equal(nx_tensor_shape(d), shape, (size_t)ndim * sizeof *shape);
    nx_tensor *back = to_host(ctx, d);
    assert_int_equal(nx_tensor_device(back), NX_DEVICE_HOST);
    size_t bytes = (size_t)nx_tensor_numel(h) * nx_dtype_size(dt);
    if (bytes)
        assert_memory_equal(nx_tensor_data(back), nx_tensor_data(h), bytes);
    nx_tensor_free(back);
    nx_tensor_free(d);
    nx_tensor_free(h);
}

static void test_round_trip_dtypes(void **state)
{
    (void)state;
    NEED_GPU();
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    const int64_t s3[3] = {3, 4, 5}, big[1] = {(1 << 20) + 7}, empty[2] = {0, 3};
    int host_before = fake_driver() ? fake_counter("fake_cuda_host_allocs") : 0;
    for (int dt = 0; dt < NX_DTYPE_COUNT; dt++) {
        round_trip(ctx, (nx_dtype)dt, 3, s3);
        round_trip(ctx, (nx_dtype)dt, 0, NULL);
        round_trip(ctx, (nx_dtype)dt, 1, big);
        round_trip(ctx, (nx_dtype)dt, 2, empty);
    }
    /* reads of up to 4 KiB went through one page-locked staging buffer for the whole context */
    if (fake_driver())
        assert_int_equal(fake_counter("fake_cuda_host_allocs") - host_before,
                         getenv("NX_FAKE_CUDA_NO_HOST") ? 0 : 1);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
    check_fake_clean();
}

/* Views of an 8x8 f64 array (512 bytes: exactly one allocator block, so the fake driver catches a
 * copy one element past either end): shape, strides and offset, in elements. */
typedef struct view {
    const char *name;
    int64_t shape[2], strides[2], offset;
} view;

static const view views[] = {
    {"transpose", {8, 6}, {1, 8}, 0},
    {"reversed", {6, 8}, {-8, -1}, 47},
    {"every other column of rows 1,3,5", {3, 4}, {16, 2}, 8},
    {"broadcast row", {4, 8}, {0, 1}, 0},
    {"column 7 reversed", {6, 1}, {-8, 1}, 47},
    {"all reversed", {8, 8}, {-8, -1}, 63},
    {"last column", {8, 1}, {8, 1}, 7},
    {"first column", {8, 1}, {8, 1}, 0},
};

static void check_view(const double *base, const view *v, const nx_tensor *h)
{
    const double *got = nx_tensor_data(h);
    assert_true(nx_tensor_is_contiguous(h));
    for (int64_t i = 0; i < v->shape[0]; i++) {
        for (int64_t j = 0; j < v->shape[1]; j++) {
            double want = base[v->offset + i * v->strides[0] + j * v->strides[1]];
            if (got[i * v->shape[1] + j] != want)
                fail_msg("view '%s' [%lld,%lld]: got %g, expected %g", v->name, (long long)i,
                         (long long)j, got[i * v->shape[1] + j], want);
        }
    }
}

static void test_strided_views(void **state)
{
    (void)state;
    NEED_GPU();
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    double base[64];
    for (int i = 0; i < 64; i++)
        base[i] = 100.0 + i;
    int64_t full[2] = {8, 8};
    nx_tensor *all = NULL;
    assert_int_equal(nx_tensor_wrap(ctx, base, NX_DTYPE_F64, 2, full, NULL, &all), NX_OK);
    nx_tensor *dall = to_dev(ctx, all);
    for (size_t k = 0; k < sizeof views / sizeof views[0]; k++) {
        const view *v = &views[k];
        /* a strided host view to the device */
        nx_tensor *hv = NULL;
        assert_int_equal(
            nx_tensor_wrap(ctx, base + v->offset, NX_DTYPE_F64, 2, v->shape, v->strides, &hv),
            NX_OK);
        nx_tensor *d = to_dev(ctx, hv);
        assert_true(nx_tensor_is_contiguous(d));
        nx_tensor *back = to_host(ctx, d);
        check_view(base, v, back);
        nx_tensor_free(back);
        nx_tensor_free(d);
        nx_tensor_free(hv);
        /* a strided view of a device tensor to the host */
        nx_tensor *dv = NULL;
        assert_int_equal(nx_rt_tensor_view(dall, 2, v->shape, v->strides, v->offset, &dv), NX_OK);
        nx_tensor *same = NULL;
        assert_int_equal(nx_tensor_to_device(dv, NX_DEVICE_CUDA, &same), NX_OK);
        assert_ptr_equal(nx_tensor_data(same), nx_tensor_data(dv)); /* no copy */
        back = to_host(ctx, same);
        check_view(base, v, back);
        nx_tensor_free(back);
        nx_tensor_free(same);
        nx_tensor_free(dv);
    }
    nx_tensor_free(dall);
    nx_tensor_free(all);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
    check_fake_clean();
}

static nx_tensor *random_f32(nx_ctx *ctx, int ndim, const int64_t *shape, float lo, float hi)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, ndim, shape, &t), NX_OK);
    float *x = nx_tensor_data(t);
    for (int64_t i = 0; i < nx_tensor_numel(t); i++)
        x[i] = uniform(lo, hi);
    return t;
}

/* NaN in every element, so an element the kernel skips cannot pass for a result. */
static nx_tensor *poisoned_f32(nx_ctx *ctx, int ndim, const int64_t *shape)
{
    nx_tensor *h = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, ndim, shape, &h), NX_OK);
    float *x = nx_tensor_data(h);
    for (int64_t i = 0; i < nx_tensor_numel(h); i++)
        x[i] = NAN;
    nx_tensor *d = to_dev(ctx, h);
    nx_tensor_free(h);
    return d;
}

static nx_cu_module load_image(nx_ctx *ctx, const char *src, const char *name, nx_ptx_target t)
{
    nx_ptx_image img;
    if (nx_ptx_compile(ctx, src, name, t, NULL, 0, &img) != NX_OK)
        fail_msg("compile %s: %s", name, nx_ctx_last_error(ctx));
    nx_cu_module m = NULL;
    nx_status st = nx_rt_cuda_module_load(ctx, img.data, &m);
    nx_ptx_image_free(ctx, &img);
    if (st != NX_OK)
        fail_msg("load %s (%s_%d): %s", name, t.kind == NX_PTX_KIND_CUBIN ? "sm" : "compute",
                 t.arch, nx_ctx_last_error(ctx));
    return m;
}

static void run_add_relu(nx_ctx *ctx, nx_cu_module m, long long n)
{
    int64_t shape[1] = {n};
    nx_tensor *x = random_f32(ctx, 1, shape, -1.0f, 1.0f);
    nx_tensor *y = random_f32(ctx, 1, shape, -1.0f, 1.0f);
    nx_tensor *dx = to_dev(ctx, x), *dy = to_dev(ctx, y), *dout = poisoned_f32(ctx, 1, shape);
    nx_cu_function f = NULL;
    assert_int_equal(nx_rt_cuda_module_function(ctx, m, "add_relu", &f), NX_OK);
    nx_cu_ptr px = dptr(dx), py = dptr(dy), po = dptr(dout);
    void *args[] = {&px, &py, &po, &n};
    unsigned blocks = (unsigned)((n / 4 + 255) / 256);
    nx_rt_cuda_dims dims = {{blocks > 1024 ? 1024 : (blocks ? blocks : 1), 1, 1}, {256, 1, 1}, 0};
    assert_int_equal(nx_rt_cuda_launch(ctx, f, &dims, args), NX_OK);
    assert_int_equal(nx_rt_cuda_sync(ctx), NX_OK);
    nx_tensor *out = to_host(ctx, dout);
    const float *a = nx_tensor_data(x), *b = nx_tensor_data(y), *o = nx_tensor_data(out);
    for (long long i = 0; i < n; i++) {
        float want = fmaxf(a[i] + b[i], 0.0f);
        if (o[i] != want)
            fail_msg("add_relu n=%lld: out[%lld] = %.9g, expected %.9g", n, i, o[i], want);
    }
    nx_tensor_free(out);
    nx_tensor_free(dout);
    nx_tensor_free(dy);
    nx_tensor_free(dx);
    nx_tensor_free(y);
    nx_tensor_free(x);
}

static int device_arch(nx_ctx *ctx)
{
    nx_rt_cuda *cu = NULL;
    assert_int_equal(nx_rt_cuda_get(ctx, &cu), NX_OK);
    return nx_rt_cuda_device(cu)->cc_major * 10 + nx_rt_cuda_device(cu)->cc_minor;
}

static bool nvrtc_has(int arch)
{
    const nx_rt_nvrtc *n = nx_rt_nvrtc_get();
    for (int i = 0; i < n->n_archs; i++) {
        if (n->archs[i] == arch)
            return true;
    }
    return false;
}

static void test_elementwise_launch(void **state)
{
    (void)state;
    NEED_KERNELS();
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int arch = device_arch(ctx);
    /* PTX through the driver's JIT, and a cubin where NVRTC knows the device's arch */
    nx_ptx_target ptx = {arch, NX_PTX_KIND_PTX}, cubin = {arch, NX_PTX_KIND_CUBIN};
    nx_cu_module m = load_image(ctx, kernel_add_relu, "add_relu.cu", ptx);
    run_add_relu(ctx, m, (1 << 20) + 3);
    run_add_relu(ctx, m, 3); /* the scalar tail alone */
    nx_rt_cuda_module_unload(ctx, m);
    if (nvrtc_has(arch)) {
        m = load_image(ctx, kernel_add_relu, "add_relu.cu", cubin);
        run_add_relu(ctx, m, 1000001);
        nx_rt_cuda_module_unload(ctx, m);
    }
    /* the automatic choice */
    assert_int_equal(nx_ptx_load(ctx, kernel_add_relu, "add_relu.cu", NULL, 0, &m), NX_OK);
    run_add_relu(ctx, m, 4096);
    nx_rt_cuda_module_unload(ctx, m);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void run_maxplus(nx_ctx *ctx, nx_cu_module m, int M, int N, int K)
{
    int64_t sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N};
    nx_tensor *a = random_f32(ctx, 2, sa, -50.0f, 50.0f);
    nx_tensor *b = random_f32(ctx, 2, sb, -50.0f, 50.0f);
    nx_tensor *da = to_dev(ctx, a), *db = to_dev(ctx, b), *dc = poisoned_f32(ctx, 2, sc);
    nx_cu_function f = NULL;
    assert_int_equal(nx_rt_cuda_module_function(ctx, m, "maxplus_matmul", &f), NX_OK);
    nx_cu_ptr pa = dptr(da), pb = dptr(db), pc = dptr(dc);
    void *args[] = {&pa, &pb, &pc, &M, &N, &K};
    nx_rt_cuda_dims dims = {{(unsigned)(N + 63) / 64, (unsigned)(M + 63) / 64, 1}, {256, 1, 1}, 0};
    assert_int_equal(nx_rt_cuda_launch(ctx, f, &dims, args), NX_OK);
    nx_tensor *c = to_host(ctx, dc);
    const float *A = nx_tensor_data(a), *B = nx_tensor_data(b), *C = nx_tensor_data(c);
    /* max and a rounded + are exact and order-free, so the result must match bit for bit */
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            float acc = -INFINITY;
            for (int k = 0; k < K; k++)
                acc = fmaxf(acc, A[(size_t)i * K + k] + B[(size_t)k * N + j]);
            if (C[(size_t)i * N + j] != acc)
                fail_msg("maxplus %dx%dx%d: C[%d,%d] = %.9g, expected %.9g", M, N, K, i, j,
                         C[(size_t)i * N + j], acc);
        }
    }
    nx_tensor_free(c);
    nx_tensor_free(dc);
    nx_tensor_free(db);
    nx_tensor_free(da);
    nx_tensor_free(b);
    nx_tensor_free(a);
}

static void test_maxplus_launch(void **state)
{
    (void)state;
    NEED_KERNELS();
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_cu_module m = NULL;
    assert_int_equal(nx_ptx_load(ctx, kernel_maxplus, "maxplus.cu", NULL, 0, &m), NX_OK);
    run_maxplus(ctx, m, 130, 77, 333); /* ragged edges in all three dimensions */
    run_maxplus(ctx, m, 256, 256, 256);
    run_maxplus(ctx, m, 1, 1, 1);
    run_maxplus(ctx, m, 64, 200, 17);
    nx_rt_cuda_module_unload(ctx, m);
    m = load_image(ctx, kernel_maxplus, "maxplus.cu", (nx_ptx_target){80, NX_PTX_KIND_PTX});
    run_maxplus(ctx, m, 100, 90, 80); /* sm_80 PTX JIT-compiled for this device */
    nx_rt_cuda_module_unload(ctx, m);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* 64 KiB of dynamic shared memory: over the 48 KiB default, so the launch must opt in. */
static const char kernel_big_smem[] =
    "extern \"C\" __global__ void reverse_block(const float *in, float *out)\n"
    "{\n"
    "    extern __shared__ float s[];\n"
    "    const int n = 16384;\n"
    "    for (int i = threadIdx.x; i < n; i += blockDim.x)\n"
    "        s[n - 1 - i] = in[i];\n"
    "    __syncthreads();\n"
    "    for (int i = threadIdx.x; i < n; i += blockDim.x)\n"
    "        out[i] = s[i];\n"
    "}\n";

static void test_big_shared_memory(void **state)
{
    (void)state;
    NEED_KERNELS();
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_cu_module m = NULL;
    assert_int_equal(nx_ptx_load(ctx, kernel_big_smem, "smem.cu", NULL, 0, &m), NX_OK);
    nx_cu_function f = NULL;
    assert_int_equal(nx_rt_cuda_module_function(ctx, m, "reverse_block", &f), NX_OK);
    int64_t shape[1] = {16384};
    nx_tensor *x = random_f32(ctx, 1, shape, 0.0f, 1.0f);
    nx_tensor *dx = to_dev(ctx, x), *dy = poisoned_f32(ctx, 1, shape);
    nx_cu_ptr px = dptr(dx), py = dptr(dy);
    void *args[] = {&px, &py};
    nx_rt_cuda_dims dims = {{1, 1, 1}, {256, 1, 1}, 65536};
    assert_int_equal(nx_rt_cuda_launch(ctx, f, &dims, args), NX_OK);
    nx_tensor *y = to_host(ctx, dy);
    const float *a = nx_tensor_data(x), *b = nx_tensor_data(y);
    for (int i = 0; i < 16384; i++)
        assert_true(b[i] == a[16383 - i]);
    nx_tensor_free(y);
    nx_tensor_free(dy);
    nx_tensor_free(dx);
    nx_tensor_free(x);
    nx_rt_cuda_module_unload(ctx, m);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static nx_rt_cuda_block *must_malloc(nx_ctx *ctx, size_t bytes)
{
    nx_rt_cuda_block *b = NULL;
    if (nx_rt_cuda_malloc(ctx, bytes, &b) != NX_OK)
        fail_msg("malloc %zu: %s", bytes, nx_ctx_last_error(ctx));
    return b;
}

static void test_allocator_reuse(void **state)
{
    (void)state;
    NEED_GPU();
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_rt_cuda_stats s;
    nx_rt_cuda_block *b1 = must_malloc(ctx, 1000);
    nx_cu_ptr p1 = nx_rt_cuda_block_ptr(b1);
    assert_int_equal(nx_rt_cuda_block_size(b1), 1024);
    nx_rt_cuda_free(ctx, b1);
    nx_rt_cuda_stats_get(ctx, &s);
    assert_int_equal(s.driver_allocs, 1);
    assert_int_equal(s.cached_blocks, 1);
    assert_int_equal(s.cached_bytes, 1024);
    nx_rt_cuda_block *b2 = must_malloc(ctx, 900); /* same 1 KiB class: the same block */
    assert_true(nx_rt_cuda_block_ptr(b2) == p1);
    nx_rt_cuda_block *b3 = must_malloc(ctx, 5000); /* another class: a new block */
    assert_true(nx_rt_cuda_block_ptr(b3) != p1);
    nx_rt_cuda_stats_get(ctx, &s);
    assert_int_equal(s.driver_allocs, 2);
    assert_int_equal(s.cache_hits, 1);
    assert_int_equal(s.live_blocks, 2);
    nx_rt_cuda_free(ctx, b2);
    nx_rt_cuda_free(ctx, b3);
    /* large blocks round to 2 MiB: 3 MiB and 3 MiB + 12345 share a 4 MiB block */
    nx_rt_cuda_block *b4 = must_malloc(ctx, (size_t)3 << 20);
    nx_cu_ptr p4 = nx_rt_cuda_block_ptr(b4);
    assert_int_equal(nx_rt_cuda_block_size(b4), (size_t)4 << 20);
    nx_rt_cuda_free(ctx, b4);
    nx_rt_cuda_block *b5 = must_malloc(ctx, ((size_t)3 << 20) + 12345);
    assert_true(nx_rt_cuda_block_ptr(b5) == p4);
    nx_rt_cuda_free(ctx, b5);
    /* device tensors go through the same cache */
    int64_t s1[2] = {10, 10}, s2[2] = {8, 8};
    nx_tensor *t1 = NULL, *t2 = NULL;
    assert_int_equal(nx_rt_cuda_tensor_new(ctx, NX_DTYPE_F32, 2, s1, &t1), NX_OK);
    void *d1 = nx_tensor_data(t1);
    nx_tensor_free(t1);
    assert_int_equal(nx_rt_cuda_tensor_new(ctx, NX_DTYPE_F64, 2, s2, &t2), NX_OK);
    assert_ptr_equal(nx_tensor_data(t2), d1);
    nx_tensor_free(t2);
    nx_rt_cuda_stats_get(ctx, &s);
    assert_int_equal(s.driver_allocs, 4);
    assert_int_equal(s.live_blocks, 0);
    nx_rt_cuda_trim(ctx);
    nx_rt_cuda_stats_get(ctx, &s);
    assert_int_equal(s.cached_blocks, 0);
    assert_int_equal(s.cached_bytes, 0);
    assert_int_equal(s.driver_frees, 4);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
    check_fake_clean();
}

/* Threads sharing one context: the first use races to create the CUDA state, then allocations
 * and frees of mixed sizes interleave on the shared free lists. */
typedef struct worker {
    nx_ctx *ctx;
    nx_rt_cuda *cu;
    int seed;
    nx_status st;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    w->st = nx_rt_cuda_get(w->ctx, &w->cu);
    static const size_t sizes[] = {1, 700, 4096, 100000, (size_t)3 << 20};
    nx_rt_cuda_block *held[4] = {NULL};
    for (int i = 0; i < 400 && w->st == NX_OK; i++) {
        int slot = (i * 7 + w->seed) % 4;
        nx_rt_cuda_free(w->ctx, held[slot]);
        held[slot] = NULL;
        w->st = nx_rt_cuda_malloc(w->ctx, sizes[(i + w->seed) % 5], &held[slot]);
    }
    for (int k = 0; k < 4; k++)
        nx_rt_cuda_free(w->ctx, held[k]);
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    NEED_GPU();
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    enum { N = 8 };
    pthread_t th[N];
    worker w[N];
    for (int i = 0; i < N; i++) {
        w[i] = (worker){ctx, NULL, i, NX_OK};
        assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < N; i++) {
        if (w[i].st != NX_OK)
            fail_msg("thread %d: %s", i, nx_ctx_last_error(ctx));
        assert_ptr_equal(w[i].cu, w[0].cu); /* one state per context */
    }
    nx_rt_cuda_stats s;
    nx_rt_cuda_stats_get(ctx, &s);
    assert_int_equal(s.live_blocks, 0);
    assert_int_equal(s.driver_allocs, s.driver_frees + s.cached_blocks);
    assert_true(s.cache_hits > 0);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
    check_fake_clean();
}

static void test_failures_memory(void **state)
{
    (void)state;
    NEED_GPU();
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_cu_module m = NULL;
    assert_int_equal(nx_rt_cuda_module_load(ctx, "this is not PTX", &m), NX_ERR_BACKEND);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "cuModuleLoadDataEx"));
    assert_null(m);
    /* a petabyte: the device says no, the library says so */
    nx_rt_cuda_block *b = NULL;
    assert_int_equal(nx_rt_cuda_malloc(ctx, (size_t)1 << 50, &b), NX_ERR_NOMEM);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "CUDA_ERROR_OUT_OF_MEMORY"));
    assert_null(b);
    b = must_malloc(ctx, 4096); /* and the context still works */
    nx_rt_cuda_free(ctx, b);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
    check_fake_clean();
}

static void test_failures_launch(void **state)
{
    (void)state;
    NEED_KERNELS();
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_cu_module m = NULL;
    assert_int_equal(nx_ptx_load(ctx, kernel_add_relu, "add_relu.cu", NULL, 0, &m), NX_OK);
    nx_cu_function f = NULL;
    assert_int_equal(nx_rt_cuda_module_function(ctx, m, "no_such_kernel", &f), NX_ERR_BACKEND);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "no_such_kernel"));
    assert_int_equal(nx_rt_cuda_module_function(ctx, m, "add_relu", &f), NX_OK);
    nx_rt_cuda_dims zero = {{0, 1, 1}, {256, 1, 1}, 0};
    assert_int_equal(nx_rt_cuda_launch(ctx, f, &zero, NULL), NX_ERR_INVALID_ARG);
    nx_rt_cuda_dims huge_block = {{1, 1, 1}, {4096, 1, 1}, 0};
    long long n = 0;
    nx_cu_ptr p0 = 0;
    void *args[] = {&p0, &p0, &p0, &n};
    assert_int_equal(nx_rt_cuda_launch(ctx, f, &huge_block, args), NX_ERR_BACKEND);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "cuLaunchKernel"));
    nx_rt_cuda_module_unload(ctx, m);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* The whole path under allocation failures: upload, compile, load, launch, download. */
static nx_status sweep_launch(nx_ctx *ctx, void *user)
{
    (void)user;
    int64_t shape[1] = {1000};
    nx_tensor *x = NULL, *dx = NULL, *dy = NULL, *y = NULL;
    nx_cu_module m = NULL;
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F32, 1, shape, &x);
    if (st == NX_OK) {
        float *p = nx_tensor_data(x);
        for (int i = 0; i < 1000; i++)
            p[i] = (float)(i % 7) - 3.0f;
        st = nx_tensor_to_device(x, NX_DEVICE_CUDA, &dx);
    }
    if (st == NX_OK)
        st = nx_rt_cuda_tensor_new(ctx, NX_DTYPE_F32, 1, shape, &dy);
    if (st == NX_OK)
        st = nx_ptx_load(ctx, kernel_add_relu, "add_relu.cu", NULL, 0, &m);
    nx_cu_function f = NULL;
    if (st == NX_OK)
        st = nx_rt_cuda_module_function(ctx, m, "add_relu", &f);
    if (st == NX_OK) {
        nx_cu_ptr px = dptr(dx), py = dptr(dy);
        long long n = 1000;
        void *args[] = {&px, &px, &py, &n};
        nx_rt_cuda_dims dims = {{1, 1, 1}, {256, 1, 1}, 0};
        st = nx_rt_cuda_launch(ctx, f, &dims, args);
    }
    if (st == NX_OK)
        st = nx_tensor_to_device(dy, NX_DEVICE_HOST, &y);
    if (st == NX_OK) {
        const float *p = nx_tensor_data(y);
        for (int i = 0; i < 1000; i++) {
            if (p[i] != fmaxf(2.0f * ((float)(i % 7) - 3.0f), 0.0f))
                st = NX_ERR_INTERNAL;
        }
    }
    nx_rt_cuda_module_unload(ctx, m);
    nx_tensor_free(y);
    nx_tensor_free(dy);
    nx_tensor_free(dx);
    nx_tensor_free(x);
    return st;
}

/* Copies only: a strided host view up, a strided device view down. */
static nx_status sweep_copies(nx_ctx *ctx, void *user)
{
    (void)user;
    double base[48];
    for (int i = 0; i < 48; i++)
        base[i] = i;
    const view *v = &views[1];
    nx_tensor *hv = NULL, *d = NULL, *dv = NULL, *back = NULL;
    nx_status st =
        nx_tensor_wrap(ctx, base + v->offset, NX_DTYPE_F64, 2, v->shape, v->strides, &hv);
    if (st == NX_OK)
        st = nx_tensor_to_device(hv, NX_DEVICE_CUDA, &d);
    /* the transpose of the reversed copy: base[47 - i - 8 j] at [j][i] */
    int64_t shape[2] = {8, 6}, strides[2] = {1, 8};
    if (st == NX_OK)
        st = nx_rt_tensor_view(d, 2, shape, strides, 0, &dv);
    if (st == NX_OK)
        st = nx_tensor_to_device(dv, NX_DEVICE_HOST, &back);
    if (st == NX_OK) {
        const double *p = nx_tensor_data(back);
        for (int j = 0; j < 8; j++) {
            for (int i = 0; i < 6; i++) {
                if (p[j * 6 + i] != base[47 - 8 * i - j])
                    st = NX_ERR_INTERNAL;
            }
        }
    }
    nx_tensor_free(back);
    nx_tensor_free(dv);
    nx_tensor_free(d);
    nx_tensor_free(hv);
    return st;
}

static void test_alloc_sweep_copies(void **state)
{
    (void)state;
    NEED_GPU();
    assert_true(nx_test_alloc_sweep(sweep_copies, NULL, 100) >= 8);
    check_fake_clean();
}

static void test_alloc_sweep(void **state)
{
    (void)state;
    NEED_KERNELS();
    int64_t made = nx_test_alloc_sweep(sweep_launch, NULL, 100);
    print_message("the launch path makes %lld host allocations\n", (long long)made);
    assert_true(made >= 8);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Informational: first compile + load of each kernel, and a 2048^3 max-plus. Asserts only that
 * the calls succeed; the numbers go to the log for the report. */
static void test_timings(void **state)
{
    (void)state;
    NEED_KERNELS();
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_cu_module m1 = NULL, m2 = NULL;
    double t0 = now_ms();
    assert_int_equal(nx_ptx_load(ctx, kernel_add_relu, "add_relu.cu", NULL, 0, &m1), NX_OK);
    double t1 = now_ms();
    assert_int_equal(nx_ptx_load(ctx, kernel_maxplus, "maxplus.cu", NULL, 0, &m2), NX_OK);
    double t2 = now_ms();
    print_message("compile + load: elementwise %.1f ms, tiled max-plus %.1f ms\n", t1 - t0,
                  t2 - t1);
    int S = 2048;
    int64_t shape[2] = {S, S};
    nx_tensor *a = random_f32(ctx, 2, shape, -1.0f, 1.0f);
    nx_tensor *da = to_dev(ctx, a), *dc = NULL;
    assert_int_equal(nx_rt_cuda_tensor_new(ctx, NX_DTYPE_F32, 2, shape, &dc), NX_OK);
    nx_cu_function f = NULL;
    assert_int_equal(nx_rt_cuda_module_function(ctx, m2, "maxplus_matmul", &f), NX_OK);
    nx_cu_ptr pa = dptr(da), pc = dptr(dc);
    void *args[] = {&pa, &pa, &pc, &S, &S, &S};
    nx_rt_cuda_dims dims = {{(unsigned)S / 64, (unsigned)S / 64, 1}, {256, 1, 1}, 0};
    double ms[7];
    for (int r = -1; r < 7; r++) {
        double s0 = now_ms();
        assert_int_equal(nx_rt_cuda_launch(ctx, f, &dims, args), NX_OK);
        assert_int_equal(nx_rt_cuda_sync(ctx), NX_OK);
        if (r >= 0)
            ms[r] = now_ms() - s0;
    }
    qsort(ms, 7, sizeof ms[0], cmp_double);
    print_message("max-plus %d^3 f32 (test kernel): median %.3f ms, %.1f G(max,+)/s\n", S, ms[3],
                  (double)S * S * S / (ms[3] * 1e6));
    nx_tensor_free(dc);
    nx_tensor_free(da);
    nx_tensor_free(a);
    nx_rt_cuda_module_unload(ctx, m1);
    nx_rt_cuda_module_unload(ctx, m2);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device),
        cmocka_unit_test(test_round_trip_dtypes),
        cmocka_unit_test(test_strided_views),
        cmocka_unit_test(test_elementwise_launch),
        cmocka_unit_test(test_maxplus_launch),
        cmocka_unit_test(test_big_shared_memory),
        cmocka_unit_test(test_allocator_reuse),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_failures_memory),
        cmocka_unit_test(test_failures_launch),
        cmocka_unit_test(test_alloc_sweep_copies),
        cmocka_unit_test(test_alloc_sweep),
        cmocka_unit_test(test_timings),
    };
    return cmocka_run_group_tests_name("cuda-gpu", tests, NULL, NULL);
}
