/* The device scan, scan_linear and scan_iir kernels (codegen/ptx/emit-lib.c) on shapes that reach every path
 * of the emitter: lines along the contiguous axis through shared-memory tiles (partial tiles,
 * partial column chunks, reversed, coefficients per line or per element, b broadcast along the
 * axis), lines along a strided axis one thread per line in register batches (lines shorter than
 * a batch, a tail after whole batches), integer scans of few long lines a block per line (several
 * chunks, the last partial, contiguous and strided, reversed), every scan monoid and the integer
 * dtypes.
 *
 * Everywhere: the emitter picks the path and the index width the shape calls for (32-bit offsets
 * below 2^31 elements, 64-bit above, checked on the source text of shapes too large to run) and
 * the grid it asks for; with NVRTC each kernel compiles for compute_80 and compute_90. On a GPU
 * each plan runs in reproducible and in fast mode and every output must equal the interpreter's
 * bit for bit (NaN matching NaN; logsumexp within 8 ulps of the output: the device's exp/log).
 * The emitter is swept for allocation failures.
 *
 * NX_TEST_SCAN_BENCH=1 on a GPU also times scan_linear and the order-3 scan_iir over the recursive
 * Gaussian's padded volume (320 x 256 x 256 f32) along each axis and an i32 cumulative sum of
 * 1449 x 1449 (label propagation's row scan) on device tensors, and prints the median of 20
 * calls and the bandwidth: a measurement, asserted by nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen/ptx/emit-lib.h"
#include "codegen/x86/emit.h"
#include "ops/smoothing/gaussian.h"
#include "program/program.h"
#include "testutil.h"
#include "probe.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_u64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Floats in [-1, 1) with a few NaN and signed zeros (specials), or coefficients in [0.8, 1) so
 * that long recurrences stay finite; integers in a small range (wrap-around in i8). */
static nx_tensor *make_input(nx_ctx *ctx, nx_dtype dt, int ndim, const int64_t *shape, bool coeff)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, dt, ndim, shape, &t), NX_OK);
    for (int64_t i = 0; i < nx_tensor_numel(t); i++) {
        nx_ir_val v = {0, 0};
        uint64_t r = next_u64() % 32;
        if (dt == NX_DTYPE_F32 || dt == NX_DTYPE_F64) {
            v.f = (double)(next_u64() % 2000) / 1000.0 - 1.0;
            if (coeff)
                v.f = 0.9 + 0.1 * v.f;
            else if (r == 4)
                v.f = NAN;
            else if (r == 5)
                v.f = -0.0;
            if (dt == NX_DTYPE_F32)
                v.f = (float)v.f;
        } else if (dt == NX_DTYPE_BOOL) {
            v.i = (int64_t)(next_u64() & 1);
        } else {
            v.i = (int64_t)(next_u64() % 200) - (dt == NX_DTYPE_U8 ? 0 : 100);
        }
        nx_ir_put(nx_tensor_data(t), dt, i, v);
    }
    return t;
}

/* What the emitter should make of a kernel. */
typedef enum path { STRIDED, TILED, BLOCK } path;
static const char *const path_name[] = {"a thread per line", "tiles", "a block per line"};

typedef struct want_path {
    path path;
    bool ix32;      /* 32-bit offsets */
    int64_t points; /* launch->points */
} want_path;

/* The source through NVRTC for compute_80 PTX and sm_90 cubin (PTX without sm_90), when NVRTC
 * loads. */
static void nvrtc_check(nx_ctx *ctx, const char *name, const char *src)
{
    if (!have_nvrtc(ctx))
        return;
    const nx_rt_nvrtc *n = nx_rt_nvrtc_get();
    bool has90 = false;
    for (int i = 0; i < n->n_archs; i++)
        has90 = has90 || n->archs[i] == 90;
    nx_ptx_target ts[2] = {{80, NX_PTX_KIND_PTX},
                           {90, has90 ? NX_PTX_KIND_CUBIN : NX_PTX_KIND_PTX}};
    static const char *const opts[] = {"-default-device", "--std=c++17"};
    for (int t = 0; t < 2; t++) {
        nx_ptx_image img;
        if (nx_ptx_compile(ctx, src, "test-cuda-scan.cu", ts[t], opts, 2, &img) != NX_OK)
            fail_msg("%s: NVRTC: %s\n%s", name, nx_ctx_last_error(ctx), src);
        nx_ptx_image_free(ctx, &img);
    }
}

static void check_emit(nx_ctx *ctx, const char *name, const nx_kernel *k, const want_path *w)
{
    for (int reassoc = 0; reassoc < 2; reassoc++) {
        char *src = NULL;
        size_t len = 0;
        nx_ptx_launch l;
        assert_int_equal(nx_ptx_kernel_emit(k, "nx_kernel", reassoc, &src, &len, &l), NX_OK);
        assert_int_equal(l.shape, NX_PTX_POINTS);
        path got = strstr(src, " part[") ? BLOCK : strstr(src, "__shared__") ? TILED : STRIDED;
        bool ix32 = strstr(src, "typedef int ix;") != NULL;
        if (got != w->path || ix32 != w->ix32 || l.points != w->points)
            fail_msg("%s: emitted %s, %s-bit offsets, %lld points; expected %s, %s-bit, %lld", name,
                     path_name[got], ix32 ? "32" : "64", (long long)l.points, path_name[w->path],
                     w->ix32 ? "32" : "64", (long long)w->points);
        nvrtc_check(ctx, name, src);
        nx_rt_free(ctx, src, len);
    }
}

static void compare(const char *name, const nx_tensor *got, const nx_tensor *want, bool lse)
{
    assert_int_equal(got->dtype, want->dtype);
    assert_int_equal(nx_tensor_numel(got), nx_tensor_numel(want));
    nx_dtype dt = want->dtype;
    bool fl = dt == NX_DTYPE_F32 || dt == NX_DTYPE_F64;
    double eps = dt == NX_DTYPE_F32 ? 0x1p-23 : 0x1p-52;
    size_t es = nx_dtype_size(dt);
    for (int64_t i = 0; i < nx_tensor_numel(want); i++) {
        nx_ir_val x = nx_ir_get(nx_tensor_data(got), dt, i);
        nx_ir_val y = nx_ir_get(nx_tensor_data(want), dt, i);
        bool same;
        if (!fl)
            same = x.i == y.i;
        else if (isnan(y.f) || isnan(x.f))
            same = isnan(x.f) && isnan(y.f);
        else if (lse)
            same = x.f == y.f || fabs(x.f - y.f) <= 8 * eps * fabs(y.f);
        else
            same = !memcmp((const char *)nx_tensor_data(got) + i * (int64_t)es,
                           (const char *)nx_tensor_data(want) + i * (int64_t)es, es);
        if (!same)
            fail_msg("%s: element %lld: CUDA %.17g (%lld), interpreter %.17g (%lld)", name,
                     (long long)i, x.f, (long long)x.i, y.f, (long long)y.i);
    }
}

static void run_device(nx_ctx *ctx, const char *name, const nx_kplan *plan,
                       const nx_tensor *const *ins, const nx_tensor *want, bool repro, bool lse)
{
    assert_int_equal(nx_ctx_reproducible_push(ctx, repro), NX_OK);
    nx_ptx_plan *cp = NULL;
    if (nx_ptx_plan_compile(ctx, plan, &cp) != NX_OK)
        fail_msg("%s: compiling for the device: %s", name, nx_ctx_last_error(ctx));
    nx_tensor *got = NULL;
    if (nx_ptx_plan_run(ctx, plan, cp, ins, &got) != NX_OK)
        fail_msg("%s: running on the device: %s", name, nx_ctx_last_error(ctx));
    compare(name, got, want, lse);
    nx_tensor_free(got);
    nx_ptx_plan_free(ctx, cp);
    assert_int_equal(nx_ctx_reproducible_pop(ctx), NX_OK);
}

typedef struct env {
    nx_test_alloc ta;
    nx_ctx *ctx;
    nx_graph *g;
    nx_tensor *in[4];
    int nin;
} env;

static void env_open(env *e)
{
    memset(e, 0, sizeof *e);
    e->ctx = nx_test_ctx(&e->ta);
    assert_int_equal(nx_graph_new(e->ctx, &e->g), NX_OK);
}

/* Frees the inputs, the graph and the context; nothing the context allocated is left. */
static void env_close(env *e)
{
    for (int i = 0; i < e->nin; i++)
        nx_tensor_free(e->in[i]);
    nx_graph_free(e->g);
    nx_ctx_free(e->ctx);
    assert_int_equal(e->ta.live, 0);
}

static nx_node env_input(env *e, nx_dtype dt, int ndim, const int64_t *shape, bool coeff)
{
    assert_true(e->nin < (int)(sizeof e->in / sizeof e->in[0]));
    e->in[e->nin++] = make_input(e->ctx, dt, ndim, shape, coeff);
    return nx_input(e->g, NULL, dt, ndim, shape);
}

/* out on the reference interpreter, over the environment's inputs. */
static nx_tensor *env_reference(env *e, nx_node out)
{
    assert_int_equal(nx_graph_status(e->g), NX_OK);
    nx_compile_opts o = {.backend = NX_BACKEND_REF, .n_outputs = 1, .outputs = &out};
    nx_program *prog = NULL;
    assert_int_equal(nx_graph_compile(e->g, &o, &prog), NX_OK);
    nx_tensor *want = NULL;
    assert_int_equal(nx_program_run(prog, (const nx_tensor *const *)e->in, &want), NX_OK);
    nx_program_free(prog);
    return want;
}

/* out on the interpreter against its one library kernel: emitted as w says, then on the device. */
static void env_check(env *e, const char *name, nx_node out, const want_path *w, bool lse)
{
    nx_tensor *want = env_reference(e, out);
    const nx_tensor *const *ins = (const nx_tensor *const *)e->in;
    nx_kplan *plan = NULL;
    assert_int_equal(nx_pass_pipeline(e->ctx, &e->g->s, 1, &out, &plan), NX_OK);
    assert_int_equal(plan->nkernels, 1);
    assert_int_equal(plan->kernels[0]->kind, NX_KERNEL_LIBRARY);
    check_emit(e->ctx, name, plan->kernels[0], w);
    if (have_gpu(e->ctx)) {
        run_device(e->ctx, name, plan, ins, want, true, lse);
        run_device(e->ctx, name, plan, ins, want, false, lse);
    }
    nx_kplan_free(plan);
    nx_tensor_free(want);
    env_close(e);
}

/* A tiled kernel's points: 256 threads per tile of 64 lines (32 for 8-byte dtypes). */
static int64_t tiles(int64_t lines, nx_dtype dt)
{
    int64_t lpb = nx_dtype_size(dt) > 4 ? 32 : 64;
    return (lines + lpb - 1) / lpb * 256;
}

static void linear_case(const char *name, nx_dtype dt, int na, const int64_t *sa, int nb,
                        const int64_t *sb, int axis, bool rev, want_path w)
{
    env e;
    env_open(&e);
    nx_node a = env_input(&e, dt, na, sa, true);
    nx_node b = env_input(&e, dt, nb, sb, false);
    env_check(&e, name, nx_scan_linear(e.g, a, b, axis, rev), &w, false);
}

static const int64_t s3[3] = {5, 70, 77}, s3b[3] = {130, 3, 33};

static void test_scan_linear(void **state)
{
    (void)state;
    const nx_dtype F32 = NX_DTYPE_F32, F64 = NX_DTYPE_F64;
    const int64_t one[1] = {1}, per_line[3] = {1, 70, 1}, along[3] = {5, 1, 77};
    const int64_t b_const[3] = {5, 70, 1}, b_plane[2] = {70, 77}, v1[1] = {1000};
    const int64_t s2[2] = {67, 45}, a_batch[3] = {3, 1, 1}, s3c[3] = {3, 130, 33};
    /* contiguous axis: 350 lines of 77 (3 chunks, the last partial), 6 tiles, the last partial */
    linear_case("f32 last axis, scalar a", F32, 1, one, 3, s3, 2, false,
                (want_path){TILED, true, tiles(350, F32)});
    linear_case("f32 last axis reversed, a per element", F32, 3, s3, 3, s3, 2, true,
                (want_path){TILED, true, tiles(350, F32)});
    linear_case("f32 last axis, a per line", F32, 3, per_line, 3, s3, 2, false,
                (want_path){TILED, true, tiles(350, F32)});
    linear_case("f64 last axis reversed, a along the axis only", F64, 3, along, 3, s3, 2, true,
                (want_path){TILED, true, tiles(350, F64)});
    linear_case("f32 last axis, b constant along it", F32, 3, s3, 3, b_const, 2, false,
                (want_path){TILED, true, tiles(350, F32)});
    linear_case("f32 last axis reversed, a per batch [3,1,1]", F32, 3, a_batch, 3, s3c, 2, true,
                (want_path){TILED, true, tiles(390, F32)});
    linear_case("f32 1-D line of 1000, reversed", F32, 1, v1, 1, v1, 0, true,
                (want_path){TILED, true, 256});
    linear_case("f64 45-long rows", F64, 2, s2, 2, s2, 1, false,
                (want_path){TILED, true, tiles(67, F64)});
    /* strided axes: 70-long lines (4 batches of 16 and a tail of 6), 3-long lines (tail only) */
    linear_case("f64 axis 0", F64, 3, s3, 3, s3, 0, false, (want_path){STRIDED, true, 70 * 77});
    linear_case("f32 axis 1 reversed", F32, 3, s3, 3, s3, 1, true, (want_path){STRIDED, true, 385});
    linear_case("f32 axis 0 reversed, b broadcast along it", F32, 3, s3, 2, b_plane, 0, true,
                (want_path){STRIDED, true, 70 * 77});
    linear_case("f32 axis 1 of length 3", F32, 3, s3b, 3, s3b, 1, false,
                (want_path){STRIDED, true, 130 * 33});
}

/* Order 1..4, stable (poles inside the unit circle), a negative coefficient among them. */
static const double iir_c[4][4] = {
    {0.7}, {1.4, -0.64}, {1.848, -1.218, 0.2651}, {-0.49, 0.3, 0.12, -0.0147}};

static void iir_case(const char *name, nx_dtype dt, int nd, const int64_t *shape, int axis,
                     bool rev, int order, want_path w)
{
    env e;
    env_open(&e);
    nx_node b = env_input(&e, dt, nd, shape, false);
    env_check(&e, name, nx_scan_iir(e.g, b, axis, rev, order, iir_c[order - 1]), &w, false);
}

static void test_scan_iir(void **state)
{
    (void)state;
    const nx_dtype F32 = NX_DTYPE_F32, F64 = NX_DTYPE_F64;
    const int64_t s2[2] = {67, 45}, v1[1] = {1000};
    iir_case("iir3 f32 last axis", F32, 3, s3, 2, false, 3, (want_path){TILED, true, tiles(350, F32)});
    iir_case("iir4 f64 last axis reversed", F64, 3, s3, 2, true, 4,
             (want_path){TILED, true, tiles(350, F64)});
    iir_case("iir1 f32 1-D line of 1000", F32, 1, v1, 0, false, 1, (want_path){TILED, true, 256});
    iir_case("iir2 f64 45-long rows reversed", F64, 2, s2, 1, true, 2,
             (want_path){TILED, true, tiles(67, F64)});
    iir_case("iir3 f32 axis 0 reversed", F32, 3, s3, 0, true, 3, (want_path){STRIDED, true, 70 * 77});
    iir_case("iir4 f32 axis 1", F32, 3, s3, 1, false, 4, (want_path){STRIDED, true, 385});
    iir_case("iir2 f64 axis 1 of length 3", F64, 3, s3b, 1, false, 2,
             (want_path){STRIDED, true, 130 * 33});
}

static void scan_case(const char *name, nx_dtype dt, int nd, const int64_t *shape, int axis,
                      nx_monoid m, bool rev, want_path w)
{
    env e;
    env_open(&e);
    nx_node x = env_input(&e, dt, nd, shape, false);
    env_check(&e, name, nx_scan(e.g, x, axis, m, rev), &w, m == NX_MONOID_LOGSUMEXP);
}

static void test_scan(void **state)
{
    (void)state;
    const int64_t s2[2] = {67, 45}, v1[1] = {1000};
    scan_case("sum f32 last axis", NX_DTYPE_F32, 3, s3, 2, NX_MONOID_SUM, false,
              (want_path){TILED, true, tiles(350, NX_DTYPE_F32)});
    scan_case("sum f32 axis 0 reversed", NX_DTYPE_F32, 3, s3, 0, NX_MONOID_SUM, true,
              (want_path){STRIDED, true, 70 * 77});
    scan_case("max f64 last axis reversed", NX_DTYPE_F64, 3, s3, 2, NX_MONOID_MAX, true,
              (want_path){TILED, true, tiles(350, NX_DTYPE_F64)});
    scan_case("min f32 axis 1", NX_DTYPE_F32, 3, s3, 1, NX_MONOID_MIN, false,
              (want_path){STRIDED, true, 385});
    scan_case("prod f64 last axis", NX_DTYPE_F64, 2, s2, 1, NX_MONOID_PROD, false,
              (want_path){TILED, true, tiles(67, NX_DTYPE_F64)});
    scan_case("logsumexp f32 1-D", NX_DTYPE_F32, 1, v1, 0, NX_MONOID_LOGSUMEXP, false,
              (want_path){TILED, true, 256});
    scan_case("sum i8 last axis (wraps)", NX_DTYPE_I8, 3, s3, 2, NX_MONOID_SUM, false,
              (want_path){TILED, true, tiles(350, NX_DTYPE_I8)});
    scan_case("prod i64 axis 0 reversed", NX_DTYPE_I64, 2, s2, 0, NX_MONOID_PROD, true,
              (want_path){STRIDED, true, 45});
    scan_case("max bool last axis", NX_DTYPE_BOOL, 3, s3b, 2, NX_MONOID_MAX, false,
              (want_path){TILED, true, tiles(390, NX_DTYPE_BOOL)});
    scan_case("max u8 axis 0 reversed", NX_DTYPE_U8, 3, s3b, 0, NX_MONOID_MAX, true,
              (want_path){STRIDED, true, 99});
    scan_case("logsumexp f64 last axis", NX_DTYPE_F64, 2, s2, 1, NX_MONOID_LOGSUMEXP, false,
              (want_path){TILED, true, tiles(67, NX_DTYPE_F64)});
    scan_case("logsumexp f32 axis 0 reversed", NX_DTYPE_F32, 2, s2, 0, NX_MONOID_LOGSUMEXP, true,
              (want_path){STRIDED, true, 45});
    /* integer monoids on few long lines: a block per line, chunks of 1024 (the last partial) */
    const int64_t rows[2] = {37, 2100}, r8[2] = {5, 1300}, mid[3] = {3, 700, 2};
    const int64_t col[2] = {300, 4}, bits[1] = {600}, mid2[3] = {2, 1030, 3};
    scan_case("sum i32 1-D", NX_DTYPE_I32, 1, v1, 0, NX_MONOID_SUM, false,
              (want_path){BLOCK, true, 256});
    scan_case("sum i32 rows of 2100", NX_DTYPE_I32, 2, rows, 1, NX_MONOID_SUM, false,
              (want_path){BLOCK, true, 37 * 256});
    scan_case("sum i8 rows of 1300 reversed (wraps)", NX_DTYPE_I8, 2, r8, 1, NX_MONOID_SUM, true,
              (want_path){BLOCK, true, 5 * 256});
    scan_case("prod i64 middle axis of 700", NX_DTYPE_I64, 3, mid, 1, NX_MONOID_PROD, false,
              (want_path){BLOCK, true, 6 * 256});
    scan_case("max u8 axis 0 reversed", NX_DTYPE_U8, 2, col, 0, NX_MONOID_MAX, true,
              (want_path){BLOCK, true, 4 * 256});
    scan_case("max bool 1-D", NX_DTYPE_BOOL, 1, bits, 0, NX_MONOID_MAX, false,
              (want_path){BLOCK, true, 256});
    scan_case("min i16 middle axis of 1030", NX_DTYPE_I16, 3, mid2, 1, NX_MONOID_MIN, false,
              (want_path){BLOCK, true, 6 * 256});
    scan_case("min i32 middle axis of 1030 reversed", NX_DTYPE_I32, 3, mid2, 1, NX_MONOID_MIN, true,
              (want_path){BLOCK, true, 6 * 256});
}

/* Shapes too large to run: the emitter must switch to 64-bit offsets at 2^31 elements. */
static void emit_only(const char *name, int nd, const int64_t *shape, int axis, want_path w)
{
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node a = nx_scalar(g, NX_DTYPE_F32, 0.5);
    nx_node b = nx_input(g, NULL, NX_DTYPE_F32, nd, shape);
    nx_node y = nx_scan_linear(g, a, b, axis, false);
    nx_kplan *plan = NULL;
    assert_int_equal(nx_pass_pipeline(ctx, &g->s, 1, &y, &plan), NX_OK);
    const nx_kernel *k = plan->kernels[plan->nkernels - 1]; /* after the scalar's constant */
    assert_int_equal(k->kind, NX_KERNEL_LIBRARY);
    check_emit(ctx, name, k, &w);
    nx_kplan_free(plan);
    nx_graph_free(g);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void test_index_width(void **state)
{
    (void)state;
    const int64_t just[2] = {32767, 65535}, big[2] = {65536, 32769};
    emit_only("32767 x 65535 rows", 2, just, 1,
              (want_path){TILED, true, tiles(32767, NX_DTYPE_F32)});
    emit_only("65536 x 32769 rows", 2, big, 1,
              (want_path){TILED, false, tiles(65536, NX_DTYPE_F32)});
    emit_only("65536 x 32769 columns", 2, big, 0, (want_path){STRIDED, false, 32769});
}

static nx_status sweep_body(nx_ctx *ctx, void *user)
{
    (void)user;
    nx_graph *g = NULL;
    nx_status st = nx_graph_new(ctx, &g);
    if (st != NX_OK)
        return st;
    const int64_t sx[2] = {40, 90};
    nx_node x = nx_input(g, NULL, NX_DTYPE_F32, 2, sx);
    nx_node outs[3] = {nx_scan_linear(g, x, x, 1, true), nx_scan_linear(g, x, x, 0, false),
                       nx_scan(g, x, 1, NX_MONOID_LOGSUMEXP, true)};
    nx_kplan *plan = NULL;
    st = nx_graph_status(g);
    if (st == NX_OK)
        st = nx_pass_pipeline(ctx, &g->s, 3, outs, &plan);
    for (int ki = 0; st == NX_OK && plan && ki < plan->nkernels; ki++) {
        char *src = NULL;
        size_t len = 0;
        nx_ptx_launch l;
        st = nx_ptx_kernel_emit(plan->kernels[ki], "nx_kernel", false, &src, &len, &l);
        nx_rt_free(ctx, src, len);
    }
    nx_kplan_free(plan);
    nx_graph_free(g);
    return st;
}

static void test_alloc_sweep(void **state)
{
    (void)state;
    assert_true(nx_test_alloc_sweep(sweep_body, NULL, 400) >= 3);
}

/* ---- prologues: a scan over an expression computed where the scan loads it ----------------*/

static bool device_supports(const nx_kernel *k)
{
    return nx_ptx_kernel_unsupported(k) == NULL;
}

/* Every slot a kernel reads is an input, a constant or written by an earlier kernel, and is not
 * freed before that kernel (its last_use is at or after it): the order and lifetimes the runners
 * rely on, after the pass moved and merged kernels. */
static void check_plan_order(const nx_kplan *p, const char *name)
{
    for (int ki = 0; ki < p->nkernels; ki++) {
        const nx_kernel *k = p->kernels[ki];
        for (int b = 0; b < k->nbufs; b++) {
            uint32_t sl = k->bufs[b].slot;
            if (k->bufs[b].role != NX_KBUF_IN || p->slots[sl].kind != NX_SLOT_TEMP)
                continue;
            int w = -1;
            for (int j = 0; j < p->nkernels; j++)
                for (int c = 0; c < p->kernels[j]->nbufs; c++)
                    if (p->kernels[j]->bufs[c].role == NX_KBUF_OUT &&
                        p->kernels[j]->bufs[c].slot == sl)
                        w = j;
            if (w < 0 || w >= ki || p->slots[sl].last_use < ki) {
                nx_kplan_print(p, stderr);
                fail_msg("%s: kernel %d reads slot %u written by kernel %d, last used at %d", name,
                         ki, (unsigned)sl, w, p->slots[sl].last_use);
            }
        }
    }
}

/* out lowered for the device (prologue fusion on): `kernels` kernels of which `prologues` are
 * library kernels with a prologue; the one kernel emitted as w says when w is given, every kernel
 * through NVRTC; on a GPU the interpreter's bits, in reproducible mode (no contraction into fma)
 * and, when fast_exact (no product feeds a sum), in fast mode too. */
static void pro_check(env *e, const char *name, nx_node out, int kernels, int prologues,
                      int epilogues, const want_path *w, bool fast_exact)
{
    nx_tensor *want = env_reference(e, out);
    const nx_tensor *const *ins = (const nx_tensor *const *)e->in;
    nx_kplan *plan = NULL;
    assert_int_equal(nx_pass_pipeline_for(e->ctx, &e->g->s, 1, &out, device_supports, &plan),
                     NX_OK);
    check_plan_order(plan, name);
    int got = 0, gote = 0;
    for (int ki = 0; ki < plan->nkernels; ki++) {
        got += plan->kernels[ki]->has_prologue;
        gote += plan->kernels[ki]->has_epilogue;
    }
    if (plan->nkernels != kernels || got != prologues || gote != epilogues) {
        nx_kplan_print(plan, stderr);
        fail_msg("%s: %d kernels, %d with a prologue, %d with an epilogue; expected %d, %d, %d",
                 name, plan->nkernels, got, gote, kernels, prologues, epilogues);
    }
    if (w)
        check_emit(e->ctx, name, plan->kernels[0], w);
    for (int ki = 0; ki < plan->nkernels; ki++) {
        char *src = NULL;
        size_t len = 0;
        nx_ptx_launch l;
        assert_int_equal(nx_ptx_kernel_emit(plan->kernels[ki], "nx_kernel", false, &src, &len, &l),
                         NX_OK);
        nvrtc_check(e->ctx, name, src);
        nx_rt_free(e->ctx, src, len);
    }
    if (have_gpu(e->ctx)) {
        run_device(e->ctx, name, plan, ins, want, true, false);
        if (fast_exact)
            run_device(e->ctx, name, plan, ins, want, false, false);
    }
    nx_kplan_free(plan);
    nx_tensor_free(want);
    env_close(e);
}

/* scan_iir over c * pad(x) along axis (padded there by `pad` each side). */
static void pad_case(const char *name, nx_dtype dt, const int64_t *shape, int axis, int64_t pad,
                     nx_pad_mode mode, bool rev, int order, want_path w)
{
    env e;
    env_open(&e);
    nx_node x = env_input(&e, dt, 3, shape, false);
    int64_t lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};
    lo[axis] = hi[axis] = pad;
    nx_node b = nx_mul(e.g, nx_pad(e.g, x, lo, hi, mode, 0), nx_scalar(e.g, dt, 0.25));
    pro_check(&e, name, nx_scan_iir(e.g, b, axis, rev, order, iir_c[order - 1]), 1, 1, 0, &w,
              true);
}

static void test_prologue(void **state)
{
    (void)state;
    const nx_dtype F32 = NX_DTYPE_F32, F64 = NX_DTYPE_F64;
    const int64_t sa[3] = {40, 33, 50}, sb[3] = {5, 70, 60}, sc[3] = {6, 9, 40};
    /* axis 0 padded to 54: one thread per line (33 x 50); axis 2 padded to 78: tiles */
    pad_case("iir3 f32 axis 0 over 0.25 pad reflect", F32, sa, 0, 7, NX_PAD_REFLECT, false, 3,
             (want_path){STRIDED, true, 33 * 50});
    pad_case("iir3 f32 axis 2 reversed over 0.25 pad mirror", F32, sb, 2, 9, NX_PAD_MIRROR, true, 3,
             (want_path){TILED, true, tiles(350, F32)});
    pad_case("iir2 f64 axis 1 over 0.25 pad wrap", F64, sc, 1, 4, NX_PAD_WRAP, false, 2,
             (want_path){STRIDED, true, 6 * 40});
    pad_case("iir1 f32 axis 1 reversed over 0.25 pad constant", F32, sc, 1, 3, NX_PAD_CONSTANT,
             true, 1, (want_path){STRIDED, true, 6 * 40});
    /* two inputs in the prologue, a product feeding a sum */
    env e;
    env_open(&e);
    nx_node x = env_input(&e, F64, 3, sb, false), y = env_input(&e, F64, 3, sb, false);
    nx_node b = nx_add(e.g, nx_mul(e.g, x, nx_scalar(e.g, F64, 1.5)), y);
    nx_node y4 = nx_scan_iir(e.g, b, 1, true, 4, iir_c[3]);
    pro_check(&e, "iir4 f64 axis 1 reversed over 1.5 x + y", y4, 1, 1, 0,
              &(want_path){STRIDED, true, 5 * 60}, false);
}

/* an epilogue: y = scan_iir(x) along axis, then w * y[crop along the axis] + z, where w varies
 * along the axis and z is another input of the cropped shape */
static void epi_case(const char *name, nx_dtype dt, const int64_t *shape, int axis, int64_t lo,
                     int64_t hi, bool rev, int order, want_path w)
{
    env e;
    env_open(&e);
    nx_node x = env_input(&e, dt, 3, shape, false);
    int64_t start[3] = {0, 0, 0}, stop[3] = {shape[0], shape[1], shape[2]}, cs[3], ws[3] = {1, 1, 1};
    start[axis] = lo;
    stop[axis] = shape[axis] - hi;
    for (int d = 0; d < 3; d++)
        cs[d] = stop[d] - start[d];
    ws[axis] = cs[axis];
    nx_node wgt = env_input(&e, dt, 3, ws, true), z = env_input(&e, dt, 3, cs, false);
    nx_node y = nx_scan_iir(e.g, x, axis, rev, order, iir_c[order - 1]);
    nx_node out = nx_add(e.g, nx_mul(e.g, nx_slice(e.g, y, start, stop, NULL), wgt), z);
    pro_check(&e, name, out, 1, 0, 1, &w, false);
}

static void test_epilogue(void **state)
{
    (void)state;
    const nx_dtype F32 = NX_DTYPE_F32, F64 = NX_DTYPE_F64;
    const int64_t sa[3] = {40, 33, 50}, sb[3] = {5, 70, 60}, sc[3] = {6, 9, 40};
    epi_case("iir3 f32 axis 2 (tiles), crop 7..53, epilogue w y + z", F32, sb, 2, 7, 7, false, 3,
             (want_path){TILED, true, tiles(350, F32)});
    epi_case("iir3 f32 axis 2 reversed (tiles), crop 0..51", F32, sb, 2, 0, 9, true, 3,
             (want_path){TILED, true, tiles(350, F32)});
    epi_case("iir3 f32 axis 0, crop 5..31", F32, sa, 0, 5, 9, false, 3,
             (want_path){STRIDED, true, 33 * 50});
    epi_case("iir2 f64 axis 1 reversed, crop 2..8", F64, sc, 1, 2, 1, true, 2,
             (want_path){STRIDED, true, 6 * 40});
}

/* The recursive Gaussian's three passes: each causal scan reads its padded, scaled line (the
 * previous pass's finish) through a prologue, the last anti-causal scan hands its results to the
 * last finish (an epilogue). 9 kernels: 6 scans (3 with a prologue, 1 with an epilogue) and the
 * two end samples of each padded line (a small kernel per axis); without them 4 of the 10 were
 * loop kernels over the whole volume. */
static void test_prologue_gaussian(void **state)
{
    (void)state;
    const int64_t s[3] = {24, 20, 28};
    for (int dt = 0; dt < 2; dt++) {
        env e;
        env_open(&e);
        nx_node y = env_input(&e, dt ? NX_DTYPE_F64 : NX_DTYPE_F32, 3, s, false);
        for (int a = 0; a < 3; a++)
            y = nx_gauss_recursive_pass(e.g, y, a, 3.0, 12, NX_PAD_REFLECT, 0);
        pro_check(&e, dt ? "recursive gaussian f64" : "recursive gaussian f32", y, 9, 3, 1,
                  NULL, false);
    }
}

/* A scan along lines of length 1 takes no prologue (its input would look broadcast along the
 * axis); an epilogue whose other input's writer cannot move up leaves the plan as it was, with
 * every slot still alive where it is read. */
static void test_prologue_edges(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    const int64_t s1[2] = {64, 1}, s[2] = {64, 40};
    nx_node x1 = nx_input(g, NULL, NX_DTYPE_F32, 2, s1);
    nx_node one = nx_scan_iir(g, nx_mul(g, x1, nx_scalar(g, NX_DTYPE_F32, 2)), 1, false, 1,
                              iir_c[0]);
    nx_kplan *plan = NULL;
    assert_int_equal(nx_pass_pipeline_for(ctx, &g->s, 1, &one, device_supports, &plan), NX_OK);
    assert_int_equal(plan->nkernels, 2);
    assert_false(plan->kernels[1]->has_prologue);
    nx_kplan_free(plan);
    /* y = scan(exp x) read with A = sin(x2) and B = cos(scan(x3)) by e = y A + B: B's writer
     * reads an output scan written after y's, so e cannot become y's epilogue, though A's writer
     * could move up */
    nx_node x = nx_input(g, NULL, NX_DTYPE_F32, 2, s), x2 = nx_input(g, NULL, NX_DTYPE_F32, 2, s);
    nx_node x3 = nx_input(g, NULL, NX_DTYPE_F32, 2, s);
    nx_node t = nx_exp(g, x), y = nx_scan_iir(g, t, 1, false, 1, iir_c[0]);
    nx_node k2 = nx_mul(g, t, nx_scalar(g, NX_DTYPE_F32, 2)), a = nx_sin(g, x2);
    nx_node z = nx_scan_iir(g, x3, 1, false, 1, iir_c[0]), b = nx_cos(g, z);
    nx_node outs[5] = {nx_add(g, nx_mul(g, y, a), b), k2, a, b, z};
    assert_int_equal(nx_pass_pipeline_for(ctx, &g->s, 5, outs, device_supports, &plan), NX_OK);
    check_plan_order(plan, "blocked epilogue");
    for (int ki = 0; ki < plan->nkernels; ki++)
        assert_false(plan->kernels[ki]->has_epilogue);
    nx_kplan_free(plan);
    nx_graph_free(g);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* Kernels of scan_iir(2 x) and a sort of x along its rows, lowered for `supports`, and how many
 * of them carry a prologue. */
static void fallback_plan(int64_t row, bool (*supports)(const nx_kernel *), int *kernels,
                          int *prologues)
{
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    const int64_t s[2] = {30, row};
    nx_node x = nx_input(g, NULL, NX_DTYPE_F32, 2, s);
    nx_node b = nx_mul(g, x, nx_scalar(g, NX_DTYPE_F32, 2));
    nx_node outs[2] = {nx_scan_iir(g, b, 0, false, 1, iir_c[0]), nx_sort(g, x, 1, false)};
    nx_kplan *plan = NULL;
    assert_int_equal(nx_pass_pipeline_for(ctx, &g->s, 2, outs, supports, &plan), NX_OK);
    *kernels = plan->nkernels;
    *prologues = 0;
    for (int ki = 0; ki < plan->nkernels; ki++)
        *prologues += plan->kernels[ki]->has_prologue;
    nx_kplan_free(plan);
    nx_graph_free(g);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* Prologues only where the backend runs the whole plan: a plan that falls back whole to the CPU
 * (a sort line longer than the device's shared-memory sort) keeps its loop kernels, and the CPU
 * backend takes none. */
static void test_prologue_plan_fallback(void **state)
{
    (void)state;
    int n, pro;
    fallback_plan(20, device_supports, &n, &pro);
    assert_int_equal(n, 2);
    assert_int_equal(pro, 1);
    fallback_plan(nx_ptx_sort_max(NX_DTYPE_F32) + 1, device_supports, &n, &pro);
    assert_int_equal(n, 3);
    assert_int_equal(pro, 0);
    fallback_plan(20, nx_x86_supports, &n, &pro);
    assert_int_equal(n, 3);
    assert_int_equal(pro, 0);
}

/* ---- NX_TEST_SCAN_BENCH: device timings --------------------------------------------------*/

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of 20 calls of y = scan(x) on device tensors (after 3 warm-ups); bytes: x read once and
 * y written once. */
static void bench_one(nx_ctx *ctx, const char *what, nx_dtype dt, int nd, const int64_t *shape,
                      int axis, int linear)
{
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node x = nx_input(g, "x", dt, nd, shape);
    nx_node y = linear == 1   ? nx_scan_linear(g, nx_scalar(g, dt, 0.9), x, axis, false)
                : linear == 2 ? nx_scan_iir(g, x, axis, false, 3, iir_c[2])
                              : nx_scan(g, x, axis, NX_MONOID_SUM, false);
    nx_compile_opts o = {.backend = NX_BACKEND_CUDA, .n_outputs = 1, .outputs = &y};
    nx_program *prog = NULL;
    assert_int_equal(nx_graph_compile(g, &o, &prog), NX_OK);
    nx_tensor *h = NULL, *d = NULL;
    assert_int_equal(nx_tensor_new(ctx, dt, nd, shape, &h), NX_OK);
    memset(nx_tensor_data(h), 0, (size_t)nx_tensor_numel(h) * nx_dtype_size(dt));
    assert_int_equal(nx_tensor_to_device(h, NX_DEVICE_CUDA, &d), NX_OK);
    double t[20];
    for (int i = -3; i < 20; i++) {
        nx_tensor *out = NULL;
        double t0 = now_s();
        assert_int_equal(nx_program_run(prog, (const nx_tensor *const[]){d}, &out), NX_OK);
        if (i >= 0)
            t[i] = now_s() - t0;
        nx_tensor_free(out);
    }
    qsort(t, 20, sizeof t[0], cmp_double);
    double bytes = 2.0 * (double)nx_tensor_numel(h) * (double)nx_dtype_size(dt);
    printf("bench %s: median %.4f ms (%.4f..%.4f), %.0f GB/s, floor %.4f ms at 4.8 TB/s\n", what,
           t[10] * 1e3, t[0] * 1e3, t[19] * 1e3, bytes / t[10] / 1e9, bytes / 4.8e12 * 1e3);
    nx_tensor_free(d);
    nx_tensor_free(h);
    nx_program_free(prog);
    nx_graph_free(g);
}

static void test_bench(void **state)
{
    (void)state;
    const char *on = getenv("NX_TEST_SCAN_BENCH");
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    if (on && on[0] == '1' && have_gpu(ctx)) {
        const int64_t v[3] = {320, 256, 256}, v1[3] = {256, 320, 256}, v2[3] = {256, 256, 320};
        const int64_t rows[2] = {1449, 1449};
        bench_one(ctx, "scan_linear f32 320x256x256 axis 0", NX_DTYPE_F32, 3, v, 0, true);
        bench_one(ctx, "scan_linear f32 256x320x256 axis 1", NX_DTYPE_F32, 3, v1, 1, true);
        bench_one(ctx, "scan_linear f32 256x256x320 axis 2", NX_DTYPE_F32, 3, v2, 2, true);
        bench_one(ctx, "scan_iir order 3 f32 320x256x256 axis 0", NX_DTYPE_F32, 3, v, 0, 2);
        bench_one(ctx, "scan_iir order 3 f32 256x320x256 axis 1", NX_DTYPE_F32, 3, v1, 1, 2);
        bench_one(ctx, "scan_iir order 3 f32 256x256x320 axis 2", NX_DTYPE_F32, 3, v2, 2, 2);
        bench_one(ctx, "scan sum i32 1449x1449 axis 1", NX_DTYPE_I32, 2, rows, 1, false);
        bench_one(ctx, "scan sum i32 1449x1449 axis 0", NX_DTYPE_I32, 2, rows, 0, false);
    }
    nx_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan_linear), cmocka_unit_test(test_scan_iir),
        cmocka_unit_test(test_scan),
        cmocka_unit_test(test_prologue), cmocka_unit_test(test_epilogue),
        cmocka_unit_test(test_prologue_gaussian),
        cmocka_unit_test(test_prologue_plan_fallback), cmocka_unit_test(test_prologue_edges),
        cmocka_unit_test(test_index_width), cmocka_unit_test(test_alloc_sweep),
        cmocka_unit_test(test_bench),
    };
    return cmocka_run_group_tests_name("cuda-scan", tests, NULL, NULL);
}
