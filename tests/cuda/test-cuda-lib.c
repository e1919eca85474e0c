/* Library kernels on CUDA (codegen/ptx/emit-lib.c): sort/argsort/top-k, scan, scan_linear and
 * scatter against the reference interpreter.
 *
 * Each case builds a small graph around one library primitive (NaN, ties, signed zeros, -inf,
 * out-of-range indices, broadcasts, reversed and inner axes, every dtype the primitive takes),
 * lowers it to a plan and checks that the CUDA backend supports every kernel. Everywhere with
 * NVRTC, the CUDA C of each library kernel (reproducible and reassociating variants) compiles for
 * compute_80 and compute_90 (sm_90 cubin where NVRTC offers it). On a GPU the plan then runs on
 * the device in reproducible and in fast mode, and every output is compared with the
 * interpreter's: bit for bit (NaN matching NaN), except logsumexp scans (the device's exp/log,
 * 8 ulps of the output's magnitude) and float scatter-adds in fast mode (atomics in any order,
 * 64 ulps of the largest magnitude, as kernel-check.c). The kernels the device does not run
 * (extern, reduce_custom, sort lines longer than shared memory holds) must be refused with a
 * reason, and the emitter is swept for allocation failures. The f16/bf16 device conversions (emit-lib-half.c) compile
 * everywhere and, on a GPU, equal runtime/half.c on every 16-bit pattern and 2^20 wider values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/ptx/emit-lib.h"
#include "program/program.h"
#include "testutil.h"
#include "probe.h"

typedef enum tol_kind { EXACT, LSE_ULPS, FAST_SUM } tol_kind;

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t next_u64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static double uniform(double lo, double hi)
{
    return lo + (hi - lo) * (double)(next_u64() >> 11) * 0x1p-53;
}

/* Values with ties, signed zeros and a few NaN / infinities for floats; a small range (ties and
 * wrap-around) for integers; idx-like values in [lo, hi) when lo < hi. */
static nx_tensor *make_input(nx_ctx *ctx, nx_dtype dt, int ndim, const int64_t *shape, bool specials,
                             int64_t lo, int64_t hi)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, dt, ndim, shape, &t), NX_OK);
    int64_t n = nx_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        nx_ir_val v = {0, 0};
        uint64_t r = next_u64() % 16;
        if (dt == NX_DTYPE_F32 || dt == NX_DTYPE_F64) {
            v.f = r < 4 ? (double)(int)(next_u64() % 5) - 2 : uniform(-3, 3);
            if (dt == NX_DTYPE_F32)
                v.f = (float)v.f;
            if (specials && r == 4)
                v.f = NAN;
            else if (specials && r == 5)
                v.f = -0.0;
            else if (specials && r == 6)
                v.f = (next_u64() & 1) ? INFINITY : -INFINITY;
        } else if (lo < hi) {
            v.i = lo + (int64_t)(next_u64() % (uint64_t)(hi - lo));
        } else if (dt == NX_DTYPE_BOOL) {
            v.i = (int64_t)(next_u64() & 1);
        } else {
            v.i = (int64_t)(next_u64() % 200) - (dt == NX_DTYPE_U8 ? 0 : 100);
        }
        nx_ir_put(nx_tensor_data(t), dt, i, v);
    }
    return t;
}

/* ---- checking ------------------------------------------------------------------------------*/

static void nvrtc_compile(nx_ctx *ctx, const nx_kernel *k, bool reassoc)
{
    char *src = NULL;
    size_t len = 0;
    nx_ptx_launch l;
    assert_int_equal(nx_ptx_kernel_emit(k, "nx_kernel", reassoc, &src, &len, &l), NX_OK);
    assert_int_equal(l.shape, NX_PTX_POINTS);
    if (!have_nvrtc(ctx)) {
        nx_rt_free(ctx, src, len);
        return;
    }
    const nx_rt_nvrtc *n = nx_rt_nvrtc_get();
    bool has90 = false;
    for (int i = 0; i < n->n_archs; i++)
        has90 = has90 || n->archs[i] == 90;
    nx_ptx_target ts[2] = {{80, NX_PTX_KIND_PTX}, {90, has90 ? NX_PTX_KIND_CUBIN : NX_PTX_KIND_PTX}};
    static const char *const opts[] = {"-default-device", "--std=c++17"};
    for (int t = 0; t < 2; t++) {
        nx_ptx_image img;
        nx_status st = nx_ptx_compile(ctx, src, "test-cuda-lib.cu", ts[t], opts, 2, &img);
        if (st != NX_OK)
            print_message("%s\n--- CUDA C\n%s\n", nx_ctx_last_error(ctx), src);
        assert_int_equal(st, NX_OK);
        nx_ptx_image_free(ctx, &img);
    }
    nx_rt_free(ctx, src, len);
}

static double max_abs(const nx_tensor *t)
{
    double m = 0;
    for (int64_t i = 0; i < nx_tensor_numel(t); i++) {
        double v = fabs(nx_ir_get(nx_tensor_data(t), t->dtype, i).f);
        m = isfinite(v) && v > m ? v : m;
    }
    return m;
}

static void compare(const char *name, const nx_tensor *got, const nx_tensor *want, tol_kind tk)
{
    assert_int_equal(got->dtype, want->dtype);
    assert_int_equal(nx_tensor_numel(got), nx_tensor_numel(want));
    nx_dtype dt = want->dtype;
    bool fl = dt == NX_DTYPE_F32 || dt == NX_DTYPE_F64;
    double eps = dt == NX_DTYPE_F32 ? 0x1p-23 : 0x1p-52, scale = max_abs(want);
    double tol = tk == FAST_SUM ? 64 * eps * (scale > 1 ? scale : 1) : 0;
    size_t es = nx_dtype_size(dt);
    for (int64_t i = 0; i < nx_tensor_numel(want); i++) {
        nx_ir_val x = nx_ir_get(nx_tensor_data(got), dt, i);
        nx_ir_val y = nx_ir_get(nx_tensor_data(want), dt, i);
        bool same;
        if (!fl)
            same = x.i == y.i;
        else if (isnan(y.f) || isnan(x.f))
            same = isnan(x.f) && isnan(y.f);
        else if (tk == EXACT)
            same = !memcmp((const char *)nx_tensor_data(got) + i * (int64_t)es,
                           (const char *)nx_tensor_data(want) + i * (int64_t)es, es);
        else if (tk == LSE_ULPS)
            same = x.f == y.f || fabs(x.f - y.f) <= 8 * eps * fabs(y.f);
        else
            same = x.f == y.f || fabs(x.f - y.f) <= tol;
        if (!same)
            fail_msg("%s: element %lld: CUDA %.17g (%lld), interpreter %.17g (%lld)", name,
                     (long long)i, x.f, (long long)x.i, y.f, (long long)y.i);
    }
}

static void run_device(nx_ctx *ctx, const char *name, const nx_kplan *plan,
                       const nx_tensor *const *ins, const nx_tensor *want, bool repro,
                       tol_kind tk)
{
    assert_int_equal(nx_ctx_reproducible_push(ctx, repro), NX_OK);
    nx_ptx_plan *cp = NULL;
    nx_status st = nx_ptx_plan_compile(ctx, plan, &cp);
    if (st != NX_OK)
        fail_msg("%s: compiling for the device: %s", name, nx_ctx_last_error(ctx));
    nx_tensor *got = NULL;
    st = nx_ptx_plan_run(ctx, plan, cp, ins, &got);
    if (st != NX_OK)
        fail_msg("%s: running on the device: %s", name, nx_ctx_last_error(ctx));
    compare(name, got, want, repro && tk == FAST_SUM ? EXACT : tk);
    nx_tensor_free(got);
    nx_ptx_plan_free(ctx, cp);
    assert_int_equal(nx_ctx_reproducible_pop(ctx), NX_OK);
}

/* Runs out of g on the interpreter and, kernel by kernel, through the CUDA library emitter. */
static void check_graph(nx_ctx *ctx, const char *name, nx_graph *g, nx_node out,
                        const nx_tensor *const *ins, tol_kind tk)
{
    assert_int_equal(nx_graph_status(g), NX_OK);
    nx_compile_opts o = {.backend = NX_BACKEND_REF, .n_outputs = 1, .outputs = &out};
    nx_program *prog = NULL;
    assert_int_equal(nx_graph_compile(g, &o, &prog), NX_OK);
    nx_tensor *want = NULL;
    assert_int_equal(nx_program_run(prog, ins, &want), NX_OK);
    nx_kplan *plan = NULL;
    assert_int_equal(nx_pass_pipeline(ctx, &g->s, 1, &out, &plan), NX_OK);
    int nlib = 0;
    for (int i = 0; i < plan->nkernels; i++) {
        const nx_kernel *k = plan->kernels[i];
        const char *why = nx_ptx_kernel_unsupported(k);
        if (why)
            fail_msg("%s: kernel %s is not supported on CUDA: %s", name, k->name, why);
        assert_true(nx_ptx_backend.supports(k));
        if (k->kind != NX_KERNEL_LIBRARY)
            continue;
        nlib++;
        nvrtc_compile(ctx, k, false);
        nvrtc_compile(ctx, k, true);
    }
    assert_true(nlib >= 1);
    if (have_gpu(ctx)) {
        run_device(ctx, name, plan, ins, want, true, tk);
        run_device(ctx, name, plan, ins, want, false, tk);
    }
    nx_kplan_free(plan);
    nx_tensor_free(want);
    nx_program_free(prog);
}

typedef struct env {
    nx_test_alloc ta;
    nx_ctx *ctx;
    nx_graph *g;
    nx_tensor *in[3];
    int nin;
} env;

static void env_open(env *e)
{
    memset(e, 0, sizeof *e);
    e->ctx = nx_test_ctx(&e->ta);
    assert_int_equal(nx_graph_new(e->ctx, &e->g), NX_OK);
}

static nx_node env_input(env *e, nx_dtype dt, int ndim, const int64_t *shape, bool specials,
                         int64_t lo, int64_t hi)
{
    e->in[e->nin++] = make_input(e->ctx, dt, ndim, shape, specials, lo, hi);
    return nx_input(e->g, NULL, dt, ndim, shape);
}

static void env_check(env *e, const char *name, nx_node out, tol_kind tk)
{
    check_graph(e->ctx, name, e->g, out, (const nx_tensor *const *)e->in, tk);
    for (int i = 0; i < e->nin; i++)
        nx_tensor_free(e->in[i]);
    nx_graph_free(e->g);
    nx_ctx_free(e->ctx);
    assert_int_equal(e->ta.live, 0);
}

/* ---- sort ----------------------------------------------------------------------------------*/

static void sort_case(const char *name, nx_dtype dt, int ndim, const int64_t *shape, int axis,
                      bool desc, bool arg, int64_t k)
{
    env e;
    env_open(&e);
    nx_node x = env_input(&e, dt, ndim, shape, true, 0, 0), y = NX_NONE;
    if (k >= 0 && arg)
        nx_topk(e.g, x, k, axis, desc, NULL, &y);
    else if (k >= 0)
        nx_topk(e.g, x, k, axis, desc, &y, NULL);
    else
        y = arg ? nx_argsort(e.g, x, axis, desc) : nx_sort(e.g, x, axis, desc);
    env_check(&e, name, y, EXACT);
}

static void test_sort(void **state)
{
    (void)state;
    const int64_t s2[2] = {5, 37}, s3[3] = {300, 3, 2}, s1[1] = {1}, big[2] = {2, 4096};
    const int64_t b32[2] = {2, 8192}, b8[2] = {1, 16384};
    const int64_t odd[2] = {3, 1000}, e2[2] = {0, 5};
    sort_case("sort f32 ascending", NX_DTYPE_F32, 2, s2, 1, false, false, -1);
    sort_case("sort f32 descending", NX_DTYPE_F32, 2, s2, 1, true, false, -1);
    sort_case("argsort f32 ascending", NX_DTYPE_F32, 2, s2, 1, false, true, -1);
    sort_case("argsort f32 descending", NX_DTYPE_F32, 2, s2, 1, true, true, -1);
    sort_case("argsort f64 axis 0 (inner lines)", NX_DTYPE_F64, 3, s3, 0, false, true, -1);
    sort_case("sort f64 axis 1 descending", NX_DTYPE_F64, 3, s3, 1, true, false, -1);
    sort_case("topk f32 largest 4", NX_DTYPE_F32, 2, s2, 1, true, false, 4);
    sort_case("topk indices f32 smallest 6", NX_DTYPE_F32, 2, s2, 1, false, true, 6);
    sort_case("topk k = 0", NX_DTYPE_F32, 2, s2, 1, false, true, 0);
    sort_case("argsort i32 ties", NX_DTYPE_I32, 2, s2, 1, false, true, -1);
    sort_case("argsort i8 descending ties", NX_DTYPE_I8, 2, s2, 1, true, true, -1);
    sort_case("sort u8", NX_DTYPE_U8, 3, s3, 0, false, false, -1);
    sort_case("argsort bool", NX_DTYPE_BOOL, 2, s2, 1, false, true, -1);
    sort_case("sort i64 descending", NX_DTYPE_I64, 2, s2, 0, true, false, -1);
    sort_case("sort one element", NX_DTYPE_F32, 1, s1, 0, false, false, -1);
    sort_case("argsort f64 4096 (the longest 8-byte line)", NX_DTYPE_F64, 2, big, 1, true, true,
              -1);
    sort_case("argsort i64 4096", NX_DTYPE_I64, 2, big, 1, false, true, -1);
    sort_case("argsort f32 8192 (the longest 4-byte line)", NX_DTYPE_F32, 2, b32, 1, false, true,
              -1);
    sort_case("sort u8 16384 (the longest 1-byte line)", NX_DTYPE_U8, 2, b8, 1, true, false, -1);
    sort_case("sort f32 1000 (padded to 1024)", NX_DTYPE_F32, 2, odd, 1, false, false, -1);
    sort_case("sort empty lines", NX_DTYPE_F32, 2, e2, 1, false, false, -1);
}

/* ---- scans ---------------------------------------------------------------------------------*/

static void scan_case(const char *name, nx_dtype dt, int ndim, const int64_t *shape, int axis,
                      nx_monoid m, bool rev, tol_kind tk)
{
    env e;
    env_open(&e);
    nx_node x = env_input(&e, dt, ndim, shape, true, 0, 0);
    env_check(&e, name, nx_scan(e.g, x, axis, m, rev), tk);
}

static void test_scan(void **state)
{
    (void)state;
    const int64_t s2[2] = {4, 100}, s3[3] = {50, 3, 2}, w[2] = {3, 600};
    scan_case("scan sum f32", NX_DTYPE_F32, 2, s2, 1, NX_MONOID_SUM, false, EXACT);
    scan_case("scan sum f64 reverse axis 0", NX_DTYPE_F64, 3, s3, 0, NX_MONOID_SUM, true, EXACT);
    scan_case("scan prod f64 reverse", NX_DTYPE_F64, 2, s2, 1, NX_MONOID_PROD, true, EXACT);
    scan_case("scan max f32 axis 0", NX_DTYPE_F32, 3, s3, 0, NX_MONOID_MAX, false, EXACT);
    scan_case("scan min f64 axis 1", NX_DTYPE_F64, 3, s3, 1, NX_MONOID_MIN, false, EXACT);
    scan_case("scan min i32", NX_DTYPE_I32, 2, s2, 1, NX_MONOID_MIN, false, EXACT);
    scan_case("scan sum i8 (wraps)", NX_DTYPE_I8, 2, s2, 1, NX_MONOID_SUM, false, EXACT);
    scan_case("scan prod i64", NX_DTYPE_I64, 2, s2, 1, NX_MONOID_PROD, true, EXACT);
    scan_case("scan max bool", NX_DTYPE_BOOL, 2, s2, 1, NX_MONOID_MAX, false, EXACT);
    scan_case("scan max u8", NX_DTYPE_U8, 2, s2, 0, NX_MONOID_MAX, true, EXACT);
    scan_case("scan logsumexp f32", NX_DTYPE_F32, 2, w, 1, NX_MONOID_LOGSUMEXP, false, LSE_ULPS);
    scan_case("scan logsumexp f64 reverse", NX_DTYPE_F64, 3, s3, 0, NX_MONOID_LOGSUMEXP, true,
              LSE_ULPS);
}

static void scan_linear_case(const char *name, nx_dtype dt, int na, const int64_t *sa, int nb,
                             const int64_t *sb, int axis, bool rev)
{
    env e;
    env_open(&e);
    nx_node a = env_input(&e, dt, na, sa, false, 0, 0);
    nx_node b = env_input(&e, dt, nb, sb, true, 0, 0);
    env_check(&e, name, nx_scan_linear(e.g, a, b, axis, rev), EXACT);
}

static void test_scan_linear(void **state)
{
    (void)state;
    const int64_t a1[2] = {6, 1}, b1[2] = {6, 40}, a2[2] = {30, 4}, b2[1] = {4};
    const int64_t a3[3] = {2, 3, 70}, s1[1] = {1};
    scan_linear_case("scan_linear f32 (a broadcast along the axis)", NX_DTYPE_F32, 2, a1, 2, b1,
                     1, false);
    scan_linear_case("scan_linear f64 reverse axis 0 (b broadcast)", NX_DTYPE_F64, 2, a2, 1, b2,
                     0, true);
    scan_linear_case("scan_linear f32 3-D last axis reverse", NX_DTYPE_F32, 3, a3, 3, a3, 2, true);
    scan_linear_case("scan_linear f64 middle axis", NX_DTYPE_F64, 3, a3, 1, s1, 1, false);
}

/* ---- scatter -------------------------------------------------------------------------------*/

static void scatter_case(const char *name, nx_dtype dt, int nx, const int64_t *sx, nx_dtype it,
                         int ni, const int64_t *si, int axis, nx_monoid m, tol_kind tk)
{
    env e;
    env_open(&e);
    nx_node x = env_input(&e, dt, nx, sx, true, 0, 0);
    /* indices from -2 to ext + 1: some dropped on either side, many repeated */
    nx_node idx = env_input(&e, it, ni, si, false, -2, sx[axis] + 2);
    int64_t su[NX_MAX_DIMS];
    int nu = 0;
    for (int d = 0; d < axis; d++)
        su[nu++] = sx[d];
    for (int d = 0; d < ni; d++)
        su[nu++] = si[d];
    for (int d = axis + 1; d < nx; d++)
        su[nu++] = sx[d];
    nx_node u = env_input(&e, dt, nu, su, true, 0, 0);
    env_check(&e, name, nx_scatter(e.g, x, idx, u, axis, m), tk);
}

static void test_scatter(void **state)
{
    (void)state;
    const int64_t x1[1] = {10}, i1[1] = {25}, x2[2] = {3, 8}, i2[2] = {2, 5};
    const int64_t x3[2] = {7, 4}, i3[1] = {9}, big[1] = {300}, ib[1] = {5000};
    scatter_case("scatter-add f32 1-D", NX_DTYPE_F32, 1, x1, NX_DTYPE_I64, 1, i1, 0,
                 NX_MONOID_SUM, FAST_SUM);
    scatter_case("scatter-add f64 2-D idx axis 1", NX_DTYPE_F64, 2, x2, NX_DTYPE_I32, 2, i2, 1,
                 NX_MONOID_SUM, FAST_SUM);
    scatter_case("scatter-add f32 axis 0 inner 4", NX_DTYPE_F32, 2, x3, NX_DTYPE_I32, 1, i3, 0,
                 NX_MONOID_SUM, FAST_SUM);
    scatter_case("scatter-add f32 5000 updates", NX_DTYPE_F32, 1, big, NX_DTYPE_I64, 1, ib, 0,
                 NX_MONOID_SUM, FAST_SUM);
    scatter_case("scatter-max f32 NaN", NX_DTYPE_F32, 2, x2, NX_DTYPE_I64, 2, i2, 1,
                 NX_MONOID_MAX, EXACT);
    scatter_case("scatter-min f64", NX_DTYPE_F64, 2, x3, NX_DTYPE_I64, 1, i3, 0, NX_MONOID_MIN,
                 EXACT);
    scatter_case("scatter-add i32", NX_DTYPE_I32, 1, big, NX_DTYPE_I32, 1, ib, 0, NX_MONOID_SUM,
                 EXACT);
    scatter_case("scatter-add i64", NX_DTYPE_I64, 2, x2, NX_DTYPE_I64, 2, i2, 1, NX_MONOID_SUM,
                 EXACT);
    scatter_case("scatter-max i64", NX_DTYPE_I64, 2, x3, NX_DTYPE_I32, 1, i3, 0, NX_MONOID_MAX,
                 EXACT);
    scatter_case("scatter-min i32", NX_DTYPE_I32, 1, x1, NX_DTYPE_I64, 1, i1, 0, NX_MONOID_MIN,
                 EXACT);
    scatter_case("scatter-add i16 (serial, wraps)", NX_DTYPE_I16, 1, big, NX_DTYPE_I64, 1, ib, 0,
                 NX_MONOID_SUM, EXACT);
    scatter_case("scatter-min u8", NX_DTYPE_U8, 2, x2, NX_DTYPE_I32, 2, i2, 1, NX_MONOID_MIN,
                 EXACT);
}

/* ---- what stays on the host ----------------------------------------------------------------*/

static void test_refused(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    const int64_t shape[2] = {2, 4097};
    nx_node y = nx_sort(g, nx_input(g, NULL, NX_DTYPE_F64, 2, shape), 1, false);
    nx_kplan *plan = NULL;
    assert_int_equal(nx_pass_pipeline(ctx, &g->s, 1, &y, &plan), NX_OK);
    const nx_kernel *k = plan->kernels[plan->nkernels - 1];
    const char *why = nx_ptx_kernel_unsupported(k);
    assert_non_null(why);
    assert_non_null(strstr(why, "4096 8-byte"));
    assert_false(nx_ptx_backend.supports(k));
    char *src = NULL;
    size_t len = 0;
    nx_ptx_launch l;
    assert_int_equal(nx_ptx_kernel_emit(k, "nx_kernel", false, &src, &len, &l),
                     NX_ERR_UNSUPPORTED);
    assert_null(src);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "4096 8-byte"));
    int which = -1;
    assert_non_null(nx_ptx_plan_unsupported(plan, &which));
    assert_int_equal(which, plan->nkernels - 1);
    /* extern and reduce_custom by the kernel's primitive: what the device refuses, and why */
    nx_kernel kk = *k;
    nx_kplan_free(plan);
    kk.lib_prim = NX_PRIM_EXTERN;
    assert_non_null(strstr(nx_ptx_lib_unsupported(&kk), "host routine"));
    kk.lib_prim = NX_PRIM_REDUCE_CUSTOM;
    assert_non_null(strstr(nx_ptx_lib_unsupported(&kk), "reduce_custom"));
    kk.lib_prim = NX_PRIM_SCATTER; /* one input where scatter has three */
    assert_non_null(nx_ptx_lib_unsupported(&kk));
    nx_graph_free(g);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* ---- f16 / bf16 conversions ---------------------------------------------------------------*/

static const char half_kernel[] =
    "extern \"C\" __global__ void halfconv(const unsigned *in32, const double *in64,\n"
    "    unsigned short *h, unsigned short *bf, unsigned short *dh, unsigned short *dbf,\n"
    "    float *wh, float *wbf, long long n)\n"
    "{\n"
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
    "         i += (long long)gridDim.x * blockDim.x) {\n"
    "        const float f = __uint_as_float(in32[i]);\n"
    "        h[i] = nx_f2h(f);\n"
    "        bf[i] = nx_f2bf(f);\n"
    "        dh[i] = nx_d2h(in64[i]);\n"
    "        dbf[i] = nx_d2bf(in64[i]);\n"
    "        if (i < 65536) {\n"
    "            wh[i] = nx_h2f((unsigned short)i);\n"
    "            wbf[i] = nx_bf2f((unsigned short)i);\n"
    "        }\n"
    "    }\n"
    "}\n";

static nx_tensor *dev_upload(nx_ctx *ctx, nx_dtype dt, int64_t n, const void *host)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_rt_cuda_tensor_new(ctx, dt, 1, &n, &t), NX_OK);
    if (host)
        assert_int_equal(nx_rt_cuda_upload(ctx, (nx_cu_ptr)(uintptr_t)t->storage->data, host,
                                           t->storage->bytes),
                         NX_OK);
    return t;
}

static void dev_download(nx_ctx *ctx, const nx_tensor *t, void *host)
{
    assert_int_equal(
        nx_rt_cuda_download(ctx, host, (nx_cu_ptr)(uintptr_t)t->storage->data, t->storage->bytes),
        NX_OK);
}

/* Every f16 and bf16 bit pattern widened, and 2^20 f32 patterns (all exponents, the rounding
 * boundaries of the low bits, NaN payloads) and f64 values narrowed, against runtime/half.c. */
static void test_half(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    size_t plen = strlen(nx_ptx_half_prelude) + strlen(half_kernel) + 1;
    char *src = malloc(plen);
    assert_non_null(src);
    snprintf(src, plen, "%s%s", nx_ptx_half_prelude, half_kernel);
    if (have_nvrtc(ctx)) {
        nx_ptx_target t = {80, NX_PTX_KIND_PTX};
        nx_ptx_image img;
        assert_int_equal(nx_ptx_compile(ctx, src, "half.cu", t, NULL, 0, &img), NX_OK);
        nx_ptx_image_free(ctx, &img);
    }
    if (!have_gpu(ctx)) {
        free(src);
        nx_ctx_free(ctx);
        return;
    }
    const int64_t n = 1 << 20;
    uint32_t *in32 = malloc((size_t)n * 4);
    double *in64 = malloc((size_t)n * 8);
    uint16_t *out[4];
    float *wide[2];
    assert_non_null(in32);
    assert_non_null(in64);
    for (int i = 0; i < 4; i++)
        assert_non_null(out[i] = malloc((size_t)n * 2));
    for (int i = 0; i < 2; i++)
        assert_non_null(wide[i] = malloc(65536 * 4));
    for (int64_t i = 0; i < n; i++) {
        /* half the patterns walk exponents and low bits in order, half are random */
        in32[i] = i < n / 2 ? (uint32_t)(i << 12) ^ (uint32_t)(i & 0xfff) : (uint32_t)next_u64();
        uint64_t r = next_u64();
        memcpy(&in64[i], &r, 8);
        if (i & 1) {
            float f;
            memcpy(&f, &in32[i], 4);
            in64[i] = (double)f * (1 + 0x1p-30 * (double)(i % 7));
        }
    }
    nx_cu_module m = NULL;
    nx_status st = nx_ptx_load(ctx, src, "half.cu", NULL, 0, &m);
    if (st != NX_OK)
        fail_msg("loading the conversion kernel: %s", nx_ctx_last_error(ctx));
    nx_cu_function f = NULL;
    assert_int_equal(nx_rt_cuda_module_function(ctx, m, "halfconv", &f), NX_OK);
    nx_tensor *d32 = dev_upload(ctx, NX_DTYPE_I32, n, in32);
    nx_tensor *d64 = dev_upload(ctx, NX_DTYPE_F64, n, in64);
    nx_tensor *dout[4], *dwide[2];
    for (int i = 0; i < 4; i++)
        dout[i] = dev_upload(ctx, NX_DTYPE_I16, n, NULL);
    for (int i = 0; i < 2; i++)
        dwide[i] = dev_upload(ctx, NX_DTYPE_F32, 65536, NULL);
    nx_cu_ptr p[8] = {(nx_cu_ptr)(uintptr_t)d32->storage->data,
                      (nx_cu_ptr)(uintptr_t)d64->storage->data};
    for (int i = 0; i < 4; i++)
        p[2 + i] = (nx_cu_ptr)(uintptr_t)dout[i]->storage->data;
    for (int i = 0; i < 2; i++)
        p[6 + i] = (nx_cu_ptr)(uintptr_t)dwide[i]->storage->data;
    long long nn = n;
    void *args[9] = {&p[0], &p[1], &p[2], &p[3], &p[4], &p[5], &p[6], &p[7], &nn};
    nx_rt_cuda_dims dims = {{1024, 1, 1}, {256, 1, 1}, 0};
    assert_int_equal(nx_rt_cuda_launch(ctx, f, &dims, args), NX_OK);
    for (int i = 0; i < 4; i++)
        dev_download(ctx, dout[i], out[i]);
    for (int i = 0; i < 2; i++)
        dev_download(ctx, dwide[i], wide[i]);
    int64_t bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float a = nx_f16_to_f32((uint16_t)h), b = nx_bf16_to_f32((uint16_t)h);
        bad += memcmp(&wide[0][h], &a, 4) != 0;
        bad += memcmp(&wide[1][h], &b, 4) != 0;
    }
    for (int64_t i = 0; i < n; i++) {
        float x;
        memcpy(&x, &in32[i], 4);
        bad += out[0][i] != nx_f32_to_f16(x);
        bad += out[1][i] != nx_f32_to_bf16(x);
        bad += out[2][i] != nx_f64_to_f16(in64[i]);
        bad += out[3][i] != nx_f64_to_bf16(in64[i]);
    }
    print_message("f16/bf16 device conversions: %lld of %lld differ from runtime/half.c\n",
                  (long long)bad, (long long)(4 * n + 2 * 65536));
    assert_int_equal(bad, 0);
    for (int i = 0; i < 4; i++) {
        nx_tensor_free(dout[i]);
        free(out[i]);
    }
    for (int i = 0; i < 2; i++) {
        nx_tensor_free(dwide[i]);
        free(wide[i]);
    }
    nx_tensor_free(d32);
    nx_tensor_free(d64);
    nx_rt_cuda_module_unload(ctx, m);
    free(in32);
    free(in64);
    free(src);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* ---- allocation failures -------------------------------------------------------------------*/

static nx_status sweep_body(nx_ctx *ctx, void *user)
{
    (void)user;
    nx_graph *g = NULL;
    nx_status st = nx_graph_new(ctx, &g);
    if (st != NX_OK)
        return st;
    const int64_t sx[2] = {4, 9}, si[1] = {6}, su[2] = {4, 6};
    nx_node x = nx_input(g, NULL, NX_DTYPE_F32, 2, sx);
    nx_node i = nx_input(g, NULL, NX_DTYPE_I32, 1, si);
    nx_node u = nx_input(g, NULL, NX_DTYPE_F32, 2, su);
    nx_node outs[3] = {nx_scatter(g, x, i, u, 1, NX_MONOID_SUM), nx_argsort(g, x, 0, true),
                       nx_scan(g, x, 1, NX_MONOID_LOGSUMEXP, true)};
    nx_kplan *plan = NULL;
    st = nx_graph_status(g);
    if (st == NX_OK)
        st = nx_pass_pipeline(ctx, &g->s, 3, outs, &plan);
    for (int ki = 0; st == NX_OK && plan && ki < plan->nkernels; ki++) {
        char *src = NULL;
        size_t len = 0;
        nx_ptx_launch l;
        for (int r = 0; st == NX_OK && r < 2; r++) {
            st = nx_ptx_kernel_emit(plan->kernels[ki], "nx_kernel", r, &src, &len, &l);
            nx_rt_free(ctx, src, len);
            src = NULL;
        }
    }
    nx_kplan_free(plan);
    nx_graph_free(g);
    return st;
}

static void test_alloc_sweep(void **state)
{
    (void)state;
    assert_true(nx_test_alloc_sweep(sweep_body, NULL, 400) >= 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sort),        cmocka_unit_test(test_scan),
        cmocka_unit_test(test_scan_linear), cmocka_unit_test(test_scatter),
        cmocka_unit_test(test_refused),     cmocka_unit_test(test_half),
        cmocka_unit_test(test_alloc_sweep),
    };
    return cmocka_run_group_tests_name("cuda-lib", tests, NULL, NULL);
}
