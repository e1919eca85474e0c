/* Externs with device code (nx_extern_device, codegen/ptx/emit-extern.c) and the distance
 * transform's device chain built on them (ops/morphology/edt.c).
 *
 * Everywhere: a tiny extern (y = 2x) lowers to a library kernel the CUDA backend supports, whose
 * source is the callback's text with the launch it names; plain externs, callbacks that decline
 * and callbacks that name no point count are refused with a reason; a device definition without a
 * source callback is a graph error; source that does not compile is NX_ERR_BACKEND with NVRTC's
 * log; the emitter is swept for allocation failures. The EDT chain's host references (each pass
 * on the CPU) equal the CPU fast driver: bit for bit with unit sampling (every value an exact
 * integer, then one correctly rounded square root), within 1e-5 (f32) / 1e-12 (f64) relative
 * with anisotropic sampling; every kernel of the chain's plan is supported by CUDA, and with
 * NVRTC every pass compiles for compute_80 and compute_90.
 *
 * Where a device answers (a GPU, or the fake driver: NX_TEST_FAKE_DRIVER=1): the compile of bad
 * source through the kernel cache names the extern and carries the log, and an extern that
 * shares name and shapes with one compiled before but not its code is compiled anew (its key is
 * its source: the bad one must fail to compile instead of loading the good one's image from
 * disk). The EDT entry point refuses a device mask on a host backend, naming the mask.
 *
 * On a GPU: the tiny extern runs on the device (host and device inputs; device inputs give a
 * device output); two definitions with the same source share one compiled kernel; the EDT on
 * the cuda backend (host mask, and device mask with a device result) equals the CPU fast driver
 * as above, over 1-, 2- and 3-D masks with sparse, dense, single-source and source-free lines. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen/ptx/emit-lib.h"
#include "nitrix-ops.h"
#include "ops/morphology/morph.h"
#include "program/program.h"
#include "testutil.h"
#include "probe.h"

static bool have_device(nx_ctx *ctx)
{
    return nx_rt_cuda_available(ctx) == NX_OK && nx_ptx_available(ctx) == NX_OK;
}

/* ---- a tiny extern: y = factor * x ---------------------------------------------------------*/

typedef struct scale_info {
    const char *factor; /* as CUDA C */
    double value;
    const char *extra;  /* appended to the source */
    int answer;         /* 0: the source; 1: decline (-1); 2: leave *points unset */
} scale_info;

static nx_status scale_shape(void *user, int n_in, const nx_dtype *dtypes, const int *ndims,
                             const int64_t *const *shapes, nx_dtype *out_dtype, int *out_ndim,
                             int64_t out_shape[NX_MAX_DIMS])
{
    (void)user;
    if (n_in != 1 || (dtypes[0] != NX_DTYPE_F32 && dtypes[0] != NX_DTYPE_F64))
        return NX_ERR_SHAPE;
    *out_dtype = dtypes[0];
    *out_ndim = ndims[0];
    memcpy(out_shape, shapes[0], (size_t)ndims[0] * sizeof(int64_t));
    return NX_OK;
}

static nx_status scale_ref(void *user, nx_ctx *ctx, int n_in, const nx_tensor *const *ins,
                           nx_tensor *out)
{
    (void)ctx, (void)n_in;
    const scale_info *si = user;
    int64_t n = nx_tensor_numel(ins[0]);
    for (int64_t i = 0; i < n; i++) {
        if (nx_tensor_dtype(out) == NX_DTYPE_F64)
            ((double *)nx_tensor_data(out))[i] =
                si->value * ((const double *)nx_tensor_data(ins[0]))[i];
        else
            ((float *)nx_tensor_data(out))[i] =
                (float)si->value * ((const float *)nx_tensor_data(ins[0]))[i];
    }
    return NX_OK;
}

static int scale_source(void *user, int n_in, const nx_dtype *dtypes, const int *ndims,
                        const int64_t *const *shapes, const char *kernel, char *buf, size_t cap,
                        int64_t *points)
{
    const scale_info *si = user;
    if (si->answer == 1 || n_in != 1)
        return -1;
    int64_t n = 1;
    for (int d = 0; d < ndims[0]; d++)
        n *= shapes[0][d];
    if (si->answer != 2)
        *points = n;
    const char *T = dtypes[0] == NX_DTYPE_F64 ? "double" : "float";
    return snprintf(buf, cap,
                    "extern \"C\" __global__ void %s(const %s *__restrict__ x, %s *__restrict__ "
                    "y, long long points)\n{\n"
                    "    for (long long p = (long long)blockIdx.x * 256 + threadIdx.x; p < points;"
                    "\n         p += (long long)gridDim.x * 256)\n"
                    "        y[p] = (%s)%s * x[p];\n}\n%s",
                    kernel, T, T, T, si->factor, si->extra);
}

static const scale_info two = {"2", 2, "", 0}, three = {"3", 3, "", 0};
static const scale_info bad = {"3", 3, "int nx_bad = nx_undefined_identifier;\n", 0};
static const scale_info declines = {"2", 2, "", 1}, no_points = {"2", 2, "", 2};
#define SCALE_DEF(info) {"scale", scale_shape, scale_ref, NULL, (void *)&(info)}
static const nx_extern_def two_def = SCALE_DEF(two), three_def = SCALE_DEF(three);
static const nx_extern_def two_again_def = SCALE_DEF(two), bad_def = SCALE_DEF(bad);
static const nx_extern_def declines_def = SCALE_DEF(declines), no_points_def = SCALE_DEF(no_points);
#define SCALE_DEV(info) {scale_source, (void *)&(info)}
static const nx_extern_device_def two_dev = SCALE_DEV(two), three_dev = SCALE_DEV(three);
static const nx_extern_device_def bad_dev = SCALE_DEV(bad), declines_dev = SCALE_DEV(declines);
static const nx_extern_device_def no_points_dev = SCALE_DEV(no_points);

static const int64_t xshape[2] = {37, 29};

static nx_tensor *ramp(nx_ctx *ctx, nx_dtype dt)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, dt, 2, xshape, &t), NX_OK);
    for (int64_t i = 0; i < nx_tensor_numel(t); i++) {
        double v = 0.25 * (double)(i % 101) - 7.5;
        if (dt == NX_DTYPE_F64)
            ((double *)nx_tensor_data(t))[i] = v;
        else
            ((float *)nx_tensor_data(t))[i] = (float)v;
    }
    return t;
}

/* The plan of y = def(x) and its extern kernel. */
typedef struct lowered {
    nx_graph *g;
    nx_node y;
    nx_kplan *plan;
    const nx_kernel *k;
} lowered;

static nx_status lower_scale(nx_ctx *ctx, const nx_extern_def *def, const nx_extern_device_def *dev,
                             nx_dtype dt, lowered *out)
{
    memset(out, 0, sizeof *out);
    nx_status st = nx_graph_new(ctx, &out->g);
    if (st != NX_OK)
        return st;
    nx_node x = nx_input(out->g, "x", dt, 2, xshape);
    out->y = nx_extern_device(out->g, def, dev, 1, &x);
    if ((st = nx_graph_status(out->g)) != NX_OK)
        return st;
    st = nx_pass_pipeline(ctx, &out->g->s, 1, &out->y, &out->plan);
    if (st != NX_OK)
        return st;
    for (int i = 0; i < out->plan->nkernels; i++)
        if (out->plan->kernels[i]->kind == NX_KERNEL_LIBRARY)
            out->k = out->plan->kernels[i];
    return out->k ? NX_OK : NX_ERR_INTERNAL;
}

static void lowered_free(lowered *l)
{
    nx_kplan_free(l->plan);
    nx_graph_free(l->g);
}

static void nvrtc_compiles(nx_ctx *ctx, const char *src, const char *what)
{
    if (!have_nvrtc(ctx))
        return;
    const nx_rt_nvrtc *n = nx_rt_nvrtc_get();
    bool has90 = false;
    for (int i = 0; i < n->n_archs; i++)
        has90 = has90 || n->archs[i] == 90;
    nx_ptx_target ts[2] = {{80, NX_PTX_KIND_PTX},
                           {90, has90 ? NX_PTX_KIND_CUBIN : NX_PTX_KIND_PTX}};
    static const char *const opts[] = {"-default-device", "--std=c++17", "--fmad=false"};
    for (int t = 0; t < 2; t++) {
        nx_ptx_image img;
        nx_status st = nx_ptx_compile(ctx, src, "test-cuda-extern.cu", ts[t], opts, 3, &img);
        if (st != NX_OK)
            fail_msg("%s: %s\n--- CUDA C\n%s", what, nx_ctx_last_error(ctx), src);
        nx_ptx_image_free(ctx, &img);
    }
}

static void emit(const nx_kernel *k, char **src, size_t *len, nx_ptx_launch *l)
{
    nx_status st = nx_ptx_kernel_emit(k, "nx_kernel", false, src, len, l);
    if (st != NX_OK)
        fail_msg("emit: %s", nx_ctx_last_error(k->ctx));
}

/* Runs y = def(x) on the device from host and from device inputs against the interpreter. */
static void run_scale_on_gpu(const lowered *l, const nx_tensor *x)
{
    nx_compile_opts o = {.backend = NX_BACKEND_REF, .n_outputs = 1, .outputs = &l->y};
    nx_program *ref = NULL, *dev = NULL;
    assert_int_equal(nx_graph_compile(l->g, &o, &ref), NX_OK);
    o.backend = NX_BACKEND_CUDA;
    assert_int_equal(nx_graph_compile(l->g, &o, &dev), NX_OK);
    nx_tensor *want = NULL, *got = NULL, *xd = NULL, *gotd = NULL, *goth = NULL;
    assert_int_equal(nx_program_run(ref, (const nx_tensor *const[]){x}, &want), NX_OK);
    assert_int_equal(nx_program_run(dev, (const nx_tensor *const[]){x}, &got), NX_OK);
    assert_int_equal(nx_tensor_device(got), NX_DEVICE_HOST);
    size_t bytes = (size_t)nx_tensor_numel(want) * nx_dtype_size(nx_tensor_dtype(want));
    assert_memory_equal(nx_tensor_data(got), nx_tensor_data(want), bytes);
    assert_int_equal(nx_tensor_to_device(x, NX_DEVICE_CUDA, &xd), NX_OK);
    assert_int_equal(nx_program_run(dev, (const nx_tensor *const[]){xd}, &gotd), NX_OK);
    assert_int_equal(nx_tensor_device(gotd), NX_DEVICE_CUDA);
    assert_int_equal(nx_tensor_to_device(gotd, NX_DEVICE_HOST, &goth), NX_OK);
    assert_memory_equal(nx_tensor_data(goth), nx_tensor_data(want), bytes);
    nx_tensor_free(want);
    nx_tensor_free(got);
    nx_tensor_free(xd);
    nx_tensor_free(gotd);
    nx_tensor_free(goth);
    nx_program_free(ref);
    nx_program_free(dev);
}

static void test_scale(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_dtype dts[2] = {NX_DTYPE_F32, NX_DTYPE_F64};
    for (int d = 0; d < 2; d++) {
        lowered l;
        assert_int_equal(lower_scale(ctx, &two_def, &two_dev, dts[d], &l), NX_OK);
        assert_int_equal(l.k->lib_prim, NX_PRIM_EXTERN);
        assert_null(nx_ptx_kernel_unsupported(l.k));
        int which = 0;
        assert_null(nx_ptx_plan_unsupported(l.plan, &which));
        assert_int_equal(which, -1);
        char *src = NULL;
        size_t len = 0;
        nx_ptx_launch launch;
        emit(l.k, &src, &len, &launch);
        assert_int_equal(launch.shape, NX_PTX_POINTS);
        assert_int_equal(launch.points, xshape[0] * xshape[1]);
        assert_non_null(strstr(src, "void nx_kernel("));
        assert_non_null(strstr(src, d ? "(double)2 * x[p]" : "(float)2 * x[p]"));
        nvrtc_compiles(ctx, src, "y = 2x");
        nx_rt_free(ctx, src, len);
        /* printing marks the device code */
        char text[4096] = {0};
        FILE *f = fmemopen(text, sizeof text - 1, "w");
        assert_int_equal(nx_graph_print(l.g, l.y, f), NX_OK);
        fclose(f);
        assert_non_null(strstr(text, "[name=scale, device]"));
        if (have_gpu(ctx)) {
            nx_tensor *x = ramp(ctx, dts[d]);
            run_scale_on_gpu(&l, x);
            nx_tensor_free(x);
        }
        lowered_free(&l);
    }
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* Definitions the device does not run, each with its reason; a device definition without a
 * source callback is the builder's error. */
static void test_refused(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    struct {
        const nx_extern_device_def *dev;
        const nx_extern_def *def;
        const char *why;
    } cases[] = {{NULL, &two_def, "host routine"},
                 {&declines_dev, &declines_def, "declined"},
                 {&no_points_dev, &no_points_def, "no point count"}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        lowered l;
        assert_int_equal(lower_scale(ctx, cases[c].def, cases[c].dev, NX_DTYPE_F32, &l), NX_OK);
        const char *why = nx_ptx_kernel_unsupported(l.k);
        assert_non_null(why);
        assert_non_null(strstr(why, cases[c].why));
        char *src = NULL;
        size_t len = 0;
        nx_ptx_launch launch;
        assert_int_equal(nx_ptx_kernel_emit(l.k, "nx_kernel", false, &src, &len, &launch),
                         NX_ERR_UNSUPPORTED);
        assert_null(src);
        lowered_free(&l);
    }
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node x = nx_input(g, "x", NX_DTYPE_F32, 2, xshape);
    static const nx_extern_device_def empty = {NULL, NULL};
    assert_int_equal(nx_extern_device(g, &two_def, &empty, 1, &x), NX_NONE);
    assert_int_equal(nx_graph_status(g), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_graph_error(g), "without a source callback"));
    nx_graph_free(g);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* Source NVRTC rejects: NX_ERR_BACKEND with the log, through nx_ptx_compile everywhere and through
 * the kernel cache (which names the extern) where a device answers. */
static void test_bad_source(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    lowered l;
    assert_int_equal(lower_scale(ctx, &bad_def, &bad_dev, NX_DTYPE_F32, &l), NX_OK);
    assert_null(nx_ptx_kernel_unsupported(l.k)); /* the callback answers; NVRTC decides */
    char *src = NULL;
    size_t len = 0;
    nx_ptx_launch launch;
    emit(l.k, &src, &len, &launch);
    if (have_nvrtc(ctx)) {
        nx_ptx_image img;
        static const char *const opts[] = {"-default-device"};
        assert_int_equal(nx_ptx_compile(ctx, src, "bad.cu", (nx_ptx_target){80, NX_PTX_KIND_PTX},
                                        opts, 1, &img),
                         NX_ERR_BACKEND);
        assert_non_null(strstr(nx_ctx_last_error(ctx), "nx_undefined_identifier"));
    }
    nx_rt_free(ctx, src, len);
    if (have_device(ctx)) {
        /* the same name and shapes as a good extern compiled first: its key is its source, so
         * it is compiled (and fails) rather than found on disk under the good one's key */
        lowered good;
        assert_int_equal(lower_scale(ctx, &three_def, &three_dev, NX_DTYPE_F32, &good), NX_OK);
        const nx_ptx_kernel *pk = NULL;
        nx_status st = nx_ptx_kernel_get(ctx, good.k, false, &pk, NULL);
        assert_true(st == NX_OK || !have_gpu(ctx)); /* the fake driver loads no module */
        assert_int_equal(nx_ptx_kernel_get(ctx, l.k, false, &pk, NULL), NX_ERR_BACKEND);
        const char *msg = nx_ctx_last_error(ctx);
        if (!strstr(msg, "extern 'scale'") || !strstr(msg, "nx_undefined_identifier"))
            fail_msg("bad extern source: %s", msg);
        lowered_free(&good);
    }
    lowered_free(&l);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* Two definitions with the same code share one compiled kernel; different code does not. */
static void test_key(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    if (!have_gpu(ctx)) {
        nx_ctx_free(ctx);
        skip();
    }
    lowered a, b, c;
    assert_int_equal(lower_scale(ctx, &two_def, &two_dev, NX_DTYPE_F32, &a), NX_OK);
    assert_int_equal(lower_scale(ctx, &two_again_def, &two_dev, NX_DTYPE_F32, &b), NX_OK);
    assert_int_equal(lower_scale(ctx, &three_def, &three_dev, NX_DTYPE_F32, &c), NX_OK);
    const nx_ptx_kernel *ka = NULL, *kb = NULL, *kc = NULL;
    nx_ptx_get_info info;
    assert_int_equal(nx_ptx_kernel_get(ctx, a.k, false, &ka, NULL), NX_OK);
    assert_int_equal(nx_ptx_kernel_get(ctx, b.k, false, &kb, &info), NX_OK);
    assert_true(info.memory_hit);
    assert_ptr_equal(ka, kb);
    assert_int_equal(nx_ptx_kernel_get(ctx, c.k, false, &kc, &info), NX_OK);
    assert_false(info.memory_hit);
    assert_ptr_not_equal(ka, kc);
    nx_tensor *x = ramp(ctx, NX_DTYPE_F32);
    run_scale_on_gpu(&a, x);
    run_scale_on_gpu(&c, x);
    nx_tensor_free(x);
    lowered_free(&a);
    lowered_free(&b);
    lowered_free(&c);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static nx_status sweep_body(nx_ctx *ctx, void *user)
{
    (void)user;
    lowered l;
    nx_status st = lower_scale(ctx, &two_def, &two_dev, NX_DTYPE_F64, &l);
    char *src = NULL;
    size_t len = 0;
    nx_ptx_launch launch;
    if (st == NX_OK)
        st = nx_ptx_kernel_emit(l.k, "nx_kernel", false, &src, &len, &launch);
    if (st == NX_OK && !strstr(src, "(double)2 * x[p]"))
        st = NX_ERR_INTERNAL;
    nx_rt_free(ctx, src, len);
    lowered_free(&l);
    return st;
}

static void test_alloc_sweep(void **state)
{
    (void)state;
    assert_true(nx_test_alloc_sweep(sweep_body, NULL, 20000) > 0);
}

/* ---- the EDT's device chain ----------------------------------------------------------------*/

typedef struct edt_case {
    int nd;
    int64_t shape[3];
    int kind; /* 0: ~8 % sources, 1: ~60 %, 2: one source, 3: sources on one plane only */
} edt_case;

static const edt_case edt_cases[] = {
    {1, {53}, 0},         {1, {40}, 2},          {2, {23, 31}, 0},      {2, {17, 64}, 1},
    {2, {33, 9}, 2},      {3, {9, 11, 13}, 0},   {3, {12, 7, 40}, 1},   {3, {10, 12, 14}, 2},
    {3, {16, 16, 16}, 3}, {3, {5, 1, 8}, 0},
};

static uint64_t rng = 0x853c49e6748fea9bull;

static uint64_t next_u64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static bool is_source(const edt_case *c, int64_t i, int64_t n)
{
    switch (c->kind) {
    case 0:
        return next_u64() % 100 < 8;
    case 1:
        return next_u64() % 100 < 60;
    case 2:
        return i == n / 3;
    default:
        return i / (c->shape[1] * c->shape[2]) == 3 && next_u64() % 4 == 0;
    }
}

/* A bool mask (true: background) for the entry point, and the field (0 at sources, +inf). */
static void edt_inputs(nx_ctx *ctx, const edt_case *c, nx_dtype dt, nx_tensor **mask,
                       nx_tensor **field)
{
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_BOOL, c->nd, c->shape, mask), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, dt, c->nd, c->shape, field), NX_OK);
    int64_t n = nx_tensor_numel(*mask);
    for (int64_t i = 0; i < n; i++) {
        bool src = is_source(c, i, n);
        ((uint8_t *)nx_tensor_data(*mask))[i] = !src;
        if (dt == NX_DTYPE_F64)
            ((double *)nx_tensor_data(*field))[i] = src ? 0 : INFINITY;
        else
            ((float *)nx_tensor_data(*field))[i] = src ? 0 : INFINITY;
    }
}

static void compare_edt(const char *what, const nx_tensor *got, const nx_tensor *want, bool exact)
{
    assert_int_equal(nx_tensor_dtype(got), nx_tensor_dtype(want));
    assert_int_equal(nx_tensor_numel(got), nx_tensor_numel(want));
    bool f64 = nx_tensor_dtype(want) == NX_DTYPE_F64;
    double rtol = exact ? 0 : f64 ? 1e-12 : 1e-5;
    for (int64_t i = 0; i < nx_tensor_numel(want); i++) {
        double a = f64 ? ((const double *)nx_tensor_data(got))[i]
                       : ((const float *)nx_tensor_data(got))[i];
        double b = f64 ? ((const double *)nx_tensor_data(want))[i]
                       : ((const float *)nx_tensor_data(want))[i];
        if (exact ? memcmp(&a, &b, sizeof a) != 0 : !nx_test_close(a, b, rtol, 0))
            fail_msg("%s: element %lld: %.17g, the CPU fast driver %.17g", what, (long long)i,
                     a, b);
    }
}

static const double aniso[3] = {1.5, 0.7, 2.25};

/* The chain's host references and the CPU fast driver on one field; the chain's kernels on CUDA. */
static void check_chain(nx_ctx *ctx, const edt_case *c, nx_dtype dt, const double *sampling)
{
    nx_tensor *mask = NULL, *field = NULL;
    edt_inputs(ctx, c, dt, &mask, &field);
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node f = nx_input(g, "field", dt, c->nd, c->shape);
    nx_node m = nx_input(g, "mask", NX_DTYPE_BOOL, c->nd, c->shape);
    /* the chain from the field, the fast driver, the chain from the bool mask (f32 out) */
    nx_node outs[3] = {nx_morph_edt_device_node(g, f, sampling),
                       nx_morph_edt_fast_node(g, f, sampling),
                       nx_morph_edt_device_node(g, m, sampling)};
    assert_int_equal(nx_graph_status(g), NX_OK);
    nx_compile_opts o = {.backend = NX_BACKEND_CPU, .n_outputs = 3, .outputs = outs};
    nx_program *p = NULL;
    assert_int_equal(nx_graph_compile(g, &o, &p), NX_OK);
    nx_tensor *ys[3] = {NULL, NULL, NULL};
    assert_int_equal(nx_program_run(p, (const nx_tensor *const[]){field, mask}, ys), NX_OK);
    char what[96];
    snprintf(what, sizeof what, "%dd %s kind %d%s (host chain)", c->nd, nx_dtype_name(dt),
             c->kind, sampling ? " anisotropic" : "");
    compare_edt(what, ys[0], ys[1], sampling == NULL);
    if (dt == NX_DTYPE_F32)
        compare_edt(what, ys[2], ys[1], sampling == NULL);
    nx_kplan *plan = NULL;
    assert_int_equal(nx_pass_pipeline(ctx, &g->s, 1, &outs[dt == NX_DTYPE_F32 ? 2 : 0], &plan),
                     NX_OK);
    int which = 0, nlib = 0;
    const char *why = nx_ptx_plan_unsupported(plan, &which);
    if (why)
        fail_msg("%s: kernel %d unsupported on CUDA: %s", what, which, why);
    for (int i = 0; i < plan->nkernels; i++) {
        if (plan->kernels[i]->kind != NX_KERNEL_LIBRARY)
            continue;
        nlib++;
        char *src = NULL;
        size_t len = 0;
        nx_ptx_launch launch;
        emit(plan->kernels[i], &src, &len, &launch);
        nvrtc_compiles(ctx, src, what);
        nx_rt_free(ctx, src, len);
    }
    assert_int_equal(nlib, c->nd);
    nx_kplan_free(plan);
    if (have_gpu(ctx)) {
        nx_edt_opts eo = {
            .sampling = sampling, .backend = NX_BACKEND_CUDA, .driver = "felzenszwalb"};
        nx_tensor *got = NULL, *md = NULL, *gotd = NULL, *goth = NULL;
        assert_int_equal(nx_distance_transform_edt(ctx, mask, &eo, &got), NX_OK);
        assert_int_equal(nx_tensor_device(got), NX_DEVICE_HOST);
        snprintf(what, sizeof what, "%dd %s kind %d%s (device)", c->nd, nx_dtype_name(dt),
                 c->kind, sampling ? " anisotropic" : "");
        if (dt == NX_DTYPE_F32) /* a bool mask gives f32 */
            compare_edt(what, got, ys[1], sampling == NULL);
        assert_int_equal(nx_tensor_to_device(mask, NX_DEVICE_CUDA, &md), NX_OK);
        assert_int_equal(nx_distance_transform_edt(ctx, md, &eo, &gotd), NX_OK);
        assert_int_equal(nx_tensor_device(gotd), NX_DEVICE_CUDA);
        assert_int_equal(nx_tensor_to_device(gotd, NX_DEVICE_HOST, &goth), NX_OK);
        if (dt == NX_DTYPE_F32)
            compare_edt(what, goth, ys[1], sampling == NULL);
        nx_tensor_free(got);
        nx_tensor_free(md);
        nx_tensor_free(gotd);
        nx_tensor_free(goth);
        /* f64: the chain itself on the device against the fast driver */
        o.backend = NX_BACKEND_CUDA;
        o.n_outputs = 1;
        nx_program *pd = NULL;
        nx_tensor *yd = NULL;
        assert_int_equal(nx_graph_compile(g, &o, &pd), NX_OK);
        assert_int_equal(nx_program_run(pd, (const nx_tensor *const[]){field, mask}, &yd), NX_OK);
        compare_edt(what, yd, ys[1], sampling == NULL);
        nx_tensor_free(yd);
        nx_program_free(pd);
    }
    nx_tensor_free(ys[0]);
    nx_tensor_free(ys[1]);
    nx_tensor_free(ys[2]);
    nx_program_free(p);
    nx_graph_free(g);
    nx_tensor_free(mask);
    nx_tensor_free(field);
}

static void test_edt_chain(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_dtype dts[2] = {NX_DTYPE_F32, NX_DTYPE_F64};
    for (size_t i = 0; i < sizeof edt_cases / sizeof *edt_cases; i++)
        for (int d = 0; d < 2; d++) {
            check_chain(ctx, &edt_cases[i], dts[d], NULL);
            check_chain(ctx, &edt_cases[i], dts[d], aniso);
        }
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* The chain takes the mask in any dtype the entry point accepts (0 is a source): each gives the
 * fast driver's distances on the CPU (the first pass's host reference reads every dtype), and
 * each first pass compiles through NVRTC. */
static void test_edt_mask_dtypes(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    static const nx_dtype dts[] = {NX_DTYPE_I8,  NX_DTYPE_I16, NX_DTYPE_I32, NX_DTYPE_I64,
                                   NX_DTYPE_U8,  NX_DTYPE_BOOL, NX_DTYPE_F32, NX_DTYPE_F64};
    const edt_case *c = &edt_cases[5];
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
        nx_tensor *mask = NULL, *field = NULL, *m = NULL;
        nx_dtype out = dts[d] == NX_DTYPE_F64 ? NX_DTYPE_F64 : NX_DTYPE_F32;
        edt_inputs(ctx, c, out, &mask, &field);
        /* background 1 (or -3 in signed dtypes: any nonzero), sources 0 */
        assert_int_equal(nx_tensor_cast(mask, dts[d], &m), NX_OK);
        for (int64_t i = 0; dts[d] == NX_DTYPE_I16 && i < nx_tensor_numel(m); i++)
            ((int16_t *)nx_tensor_data(m))[i] *= -3;
        nx_graph *g = NULL;
        assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
        nx_node f = nx_input(g, "field", out, c->nd, c->shape);
        nx_node mi = nx_input(g, "mask", dts[d], c->nd, c->shape);
        nx_node outs[2] = {nx_morph_edt_device_node(g, mi, aniso),
                           nx_morph_edt_fast_node(g, f, aniso)};
        assert_int_equal(nx_graph_status(g), NX_OK);
        assert_int_equal(nx_node_dtype(g, outs[0]), out);
        nx_compile_opts o = {.backend = NX_BACKEND_CPU, .n_outputs = 2, .outputs = outs};
        nx_program *p = NULL;
        assert_int_equal(nx_graph_compile(g, &o, &p), NX_OK);
        nx_tensor *ys[2] = {NULL, NULL};
        assert_int_equal(nx_program_run(p, (const nx_tensor *const[]){field, m}, ys), NX_OK);
        char what[64];
        snprintf(what, sizeof what, "chain from a %s mask", nx_dtype_name(dts[d]));
        compare_edt(what, ys[0], ys[1], false);
        nx_kplan *plan = NULL;
        assert_int_equal(nx_pass_pipeline(ctx, &g->s, 1, &outs[0], &plan), NX_OK);
        int which;
        assert_null(nx_ptx_plan_unsupported(plan, &which));
        char *src = NULL;
        size_t len = 0;
        nx_ptx_launch launch;
        emit(plan->kernels[0], &src, &len, &launch); /* the first pass reads the mask */
        assert_non_null(strstr(src, "edt_first_pass"));
        nvrtc_compiles(ctx, src, what);
        nx_rt_free(ctx, src, len);
        nx_kplan_free(plan);
        nx_tensor_free(ys[0]);
        nx_tensor_free(ys[1]);
        nx_program_free(p);
        nx_graph_free(g);
        nx_tensor_free(m);
        nx_tensor_free(mask);
        nx_tensor_free(field);
    }
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* Device masks: the cuda backend is required (a host backend is refused, naming the mask);
 * without a device, making one fails cleanly. */
static void test_edt_device_mask(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_tensor *mask = NULL, *field = NULL, *md = NULL, *out = NULL;
    edt_inputs(ctx, &edt_cases[2], NX_DTYPE_F32, &mask, &field);
    nx_status st = nx_tensor_to_device(mask, NX_DEVICE_CUDA, &md);
    if (!have_device(ctx)) {
        assert_int_equal(st, NX_ERR_BACKEND);
        nx_edt_opts eo = {.backend = NX_BACKEND_CUDA};
        assert_int_equal(nx_distance_transform_edt(ctx, mask, &eo, &out), NX_ERR_BACKEND);
        assert_null(out);
    } else {
        assert_int_equal(st, NX_OK);
        nx_edt_opts eo = {.backend = NX_BACKEND_CPU};
        assert_int_equal(nx_distance_transform_edt(ctx, md, &eo, &out), NX_ERR_UNSUPPORTED);
        assert_non_null(strstr(nx_ctx_last_error(ctx), "mask is a CUDA device tensor"));
        assert_null(out);
    }
    nx_tensor_free(md);
    nx_tensor_free(mask);
    nx_tensor_free(field);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* NX_TEST_EDT_BENCH=1 on a GPU: the median of 20 calls (after a warm-up) of the EDT at 256^3 f32
 * with 1 % sources, from a device mask through the entry point, and of the chain alone from a
 * device field; a measurement, asserted by nothing. */
static void test_edt_bench(void **state)
{
    (void)state;
    const char *b = getenv("NX_TEST_EDT_BENCH");
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    if (!b || b[0] != '1' || !have_gpu(ctx)) {
        nx_ctx_free(ctx);
        skip();
    }
    edt_case c = {3, {256, 256, 256}, 0};
    nx_tensor *mask = NULL, *field = NULL, *md = NULL, *fd = NULL;
    edt_inputs(ctx, &c, NX_DTYPE_F32, &mask, &field);
    for (int64_t i = 0; i < nx_tensor_numel(mask); i++) { /* 1 % sources */
        bool src = next_u64() % 100 == 0;
        ((uint8_t *)nx_tensor_data(mask))[i] = !src;
        ((float *)nx_tensor_data(field))[i] = src ? 0 : INFINITY;
    }
    assert_int_equal(nx_tensor_to_device(mask, NX_DEVICE_CUDA, &md), NX_OK);
    assert_int_equal(nx_tensor_to_device(field, NX_DEVICE_CUDA, &fd), NX_OK);
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node y = nx_morph_edt_device_node(g, nx_input(g, "f", NX_DTYPE_F32, 3, c.shape), NULL);
    nx_compile_opts o = {.backend = NX_BACKEND_CUDA, .n_outputs = 1, .outputs = &y};
    nx_program *p = NULL;
    assert_int_equal(nx_graph_compile(g, &o, &p), NX_OK);
    nx_edt_opts eo = {.backend = NX_BACKEND_CUDA, .driver = "felzenszwalb"};
    for (int what = 0; what < 2; what++) {
        double t[21];
        for (int r = 0; r < 21; r++) {
            nx_tensor *out = NULL;
            double t0 = now_s();
            nx_status st = what ? nx_program_run(p, (const nx_tensor *const[]){fd}, &out)
                                : nx_distance_transform_edt(ctx, md, &eo, &out);
            t[r] = now_s() - t0;
            assert_int_equal(st, NX_OK);
            nx_tensor_free(out);
        }
        qsort(t + 1, 20, sizeof *t, cmp_double);
        print_message("edt 256^3 f32 1%% sources, %s: median %.4f ms (min %.4f, max %.4f)\n",
                      what ? "chain from a device field" : "entry point, device mask",
                      1e3 * t[10], 1e3 * t[1], 1e3 * t[20]);
    }
    nx_program_free(p);
    nx_graph_free(g);
    nx_tensor_free(md);
    nx_tensor_free(fd);
    nx_tensor_free(mask);
    nx_tensor_free(field);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scale),       cmocka_unit_test(test_refused),
        cmocka_unit_test(test_bad_source),  cmocka_unit_test(test_key),
        cmocka_unit_test(test_alloc_sweep), cmocka_unit_test(test_edt_chain),
        cmocka_unit_test(test_edt_mask_dtypes), cmocka_unit_test(test_edt_device_mask),
        cmocka_unit_test(test_edt_bench),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
