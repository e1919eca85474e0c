/* The semiring entry points and the CUDA emitter's pairwise kernels.
 *
 * Everywhere: the pairwise folds take the staged generator (codegen/ptx/emit-pair.c), with the
 * special-function exp outside reproducible mode and expf inside it; NVRTC compiles them where
 * NVRTC loads; the emitter handles every allocation failure; a device tensor request without a
 * GPU fails with NX_ERR_BACKEND. On a GPU machine: the entry points on device tensors against the
 * reference interpreter on host tensors (f32 tolerance of the descriptors' tolerances (once golden/tolerance.tsv)'s semiring rows:
 * 1e-5 + 1e-5 |ref|), outputs on the device when every input is, a host backend refusing device
 * tensors by name. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/ptx/emit-lib.h"
#include "nitrix-ops.h"
#include "ops/semiring/semiring.h"
#include "program/program.h"
#include "testutil.h"

typedef struct pcase {
    const char *formula;
    nx_pairwise_reduction red;
    bool with_b, with_p, has_exp;
} pcase;

static const pcase pcases[] = {
    {"exp(-sqdist(x, y)) * b", NX_PAIRWISE_SUM, true, false, true},
    {"-sqdist(x, y) / p0", NX_PAIRWISE_LOGSUMEXP, false, true, false},
    {"sqdist(x, y)", NX_PAIRWISE_MIN, false, false, false},
    {"exp(-sqdist(x, y) / p0) * b", NX_PAIRWISE_MAX, true, true, true},
};

static nx_status try_filled(nx_ctx *ctx, int nd, const int64_t *shape, uint64_t seed, double lo,
                            double hi, nx_tensor **out)
{
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F32, nd, shape, out);
    if (st != NX_OK)
        return st;
    float *d = nx_tensor_data(*out);
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t i = 0; i < nx_tensor_numel(*out); i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        d[i] = (float)(lo + (hi - lo) * ((double)(s >> 11) / 9007199254740992.0));
    }
    return NX_OK;
}

static nx_tensor *filled(nx_ctx *ctx, int nd, const int64_t *shape, uint64_t seed, double lo,
                         double hi)
{
    nx_tensor *t = NULL;
    assert_int_equal(try_filled(ctx, nd, shape, seed, lo, hi, &t), NX_OK);
    return t;
}

typedef struct pin {
    nx_tensor *x, *y, *b, *p;
} pin;

static nx_status try_inputs(nx_ctx *ctx, const pcase *c, int64_t m, int64_t n, pin *in)
{
    int64_t xs[2] = {m, 3}, ys[2] = {n, 3}, one = 1;
    *in = (pin){NULL, NULL, NULL, NULL};
    nx_status st = try_filled(ctx, 2, xs, 1, 0, 1, &in->x);
    if (st == NX_OK)
        st = try_filled(ctx, 2, ys, 2, 0, 1, &in->y);
    if (st == NX_OK && c->with_b)
        st = try_filled(ctx, 1, &n, 3, 0, 1, &in->b);
    if (st == NX_OK && c->with_p)
        st = try_filled(ctx, 1, &one, 4, 0.2, 0.5, &in->p);
    return st;
}

static pin make_inputs(nx_ctx *ctx, const pcase *c, int64_t m, int64_t n)
{
    pin in;
    assert_int_equal(try_inputs(ctx, c, m, n, &in), NX_OK);
    return in;
}

static void free_inputs(pin *in)
{
    nx_tensor_free(in->x);
    nx_tensor_free(in->y);
    nx_tensor_free(in->b);
    nx_tensor_free(in->p);
}

/* The pairwise kernel of case c through the emitter: the staged generator, its exp. */
static nx_status emit_case(nx_ctx *ctx, const pcase *c, bool reassoc, char **src, size_t *len)
{
    pin in;
    nx_pairwise_opts o = {.formula = c->formula, .reduction = c->red};
    nx_graph *g = NULL;
    nx_node outs[4];
    int nouts = 0;
    nx_kplan *plan = NULL;
    nx_status st = try_inputs(ctx, c, 300, 257, &in);
    if (st == NX_OK)
        st = nx_sr_pairwise_graph(ctx, in.x, in.y, in.b, in.p, &o, &g, outs, &nouts);
    if (st == NX_OK)
        st = nx_pass_pipeline(ctx, &g->s, nouts, outs, &plan);
    if (st == NX_OK && plan->nkernels != 1)
        st = NX_ERR_INTERNAL;
    nx_ptx_launch l;
    if (st == NX_OK)
        st = nx_ptx_emit(plan->kernels[0], "nx_pair", reassoc, src, len, &l);
    nx_kplan_free(plan);
    nx_graph_free(g);
    free_inputs(&in);
    return st;
}

static void test_pair_generator(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    bool nvrtc = nx_ptx_available(ctx) == NX_OK;
    static const char *const opts[] = {"-default-device", "--std=c++17"};
    for (size_t i = 0; i < sizeof pcases / sizeof pcases[0]; i++) {
        for (int fast = 0; fast < 2; fast++) {
            char *src = NULL;
            size_t len = 0;
            assert_int_equal(emit_case(ctx, &pcases[i], fast, &src, &len), NX_OK);
            if (getenv("NX_TEST_PRINT_SOURCE") && i == 0 && fast)
                printf("%s\n", src);
            if (!strstr(src, "__shared__ float4 sy"))
                fail_msg("%s: not the staged pairwise kernel", pcases[i].formula);
            const char *def = strstr(src, "nx_ex2f(float");
            bool ex2 = def && strstr(def + 1, "nx_ex2f(") != NULL;
            /* the Gaussian exponent takes the pre-scaled form: no multiply by log2 e per pair */
            bool scaled = strstr(src, "* NX_SQRT_LOG2E;") != NULL;
            if (scaled != (fast && i == 0))
                fail_msg("%s (reassoc %d): pre-scaled exponent %s", pcases[i].formula, fast,
                         scaled ? "used" : "missing");
            if (ex2 != (fast && (pcases[i].has_exp || pcases[i].red == NX_PAIRWISE_LOGSUMEXP)))
                fail_msg("%s (reassoc %d): special-function exp %s", pcases[i].formula, fast,
                         ex2 ? "used" : "missing");
            if (nvrtc) {
                nx_ptx_image img;
                nx_ptx_target t = {90, NX_PTX_KIND_PTX};
                if (nx_ptx_compile(ctx, src, "pair.cu", t, opts, 2, &img) != NX_OK)
                    fail_msg("%s: NVRTC: %s", pcases[i].formula, nx_ctx_last_error(ctx));
                nx_ptx_image_free(ctx, &img);
            }
            nx_rt_free(ctx, src, len);
        }
    }
    if (!nvrtc)
        printf("NVRTC not available: the pairwise kernels were emitted, not compiled\n");
    nx_ctx_free(ctx);
}

/* BOOLEAN on f32 takes the tiled kernel's 0/1 staging (emit-tile.c is_boolean), max-plus takes
 * the plain tiled step. */
static void test_boolean_tile(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    static const nx_semiring_kind kinds[2] = {NX_SEMIRING_BOOLEAN, NX_SEMIRING_TROPICAL_MAX_PLUS};
    for (int i = 0; i < 2; i++) {
        nx_graph *g = NULL;
        assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
        int64_t as[2] = {130, 67}, bs[2] = {67, 129};
        nx_node a = nx_input(g, "a", NX_DTYPE_F32, 2, as),
                b = nx_input(g, "b", NX_DTYPE_F32, 2, bs);
        nx_node c = nx_semiring_matmul_node(g, nx_semiring_builtin(kinds[i]), a, b);
        nx_kplan *plan = NULL;
        assert_int_equal(nx_pass_pipeline(ctx, &g->s, 1, &c, &plan), NX_OK);
        /* the fold's kernel (a plan may keep the finalize apart) */
        int tiled = 0, staged = 0;
        for (int kk = 0; kk < plan->nkernels; kk++) {
            char *src = NULL;
            size_t len = 0;
            nx_ptx_launch l;
            assert_int_equal(nx_ptx_emit(plan->kernels[kk], "nx_bool", true, &src, &len, &l),
                             NX_OK);
            tiled += strstr(src, "nx_main_fold") != NULL;
            staged += strstr(src, "#define NX_STAGE(x) ((x) != 0.0f ? 1.0f : 0.0f)") != NULL;
            if (nx_ptx_available(ctx) == NX_OK) {
                static const char *const opts[] = {"-default-device", "--std=c++17"};
                nx_ptx_image img;
                nx_ptx_target t = {90, NX_PTX_KIND_PTX};
                if (nx_ptx_compile(ctx, src, "bool.cu", t, opts, 2, &img) != NX_OK)
                    fail_msg("NVRTC: %s", nx_ctx_last_error(ctx));
                nx_ptx_image_free(ctx, &img);
            }
            nx_rt_free(ctx, src, len);
        }
        assert_int_equal(tiled, 1);
        assert_int_equal(staged, i == 0);
        nx_kplan_free(plan);
        nx_graph_free(g);
    }
    nx_ctx_free(ctx);
}

static nx_status sweep_emit(nx_ctx *ctx, void *user)
{
    (void)user;
    char *src = NULL;
    size_t len = 0;
    nx_status st = emit_case(ctx, &pcases[0], true, &src, &len);
    if (st == NX_OK)
        nx_rt_free(ctx, src, len);
    return st;
}

static void test_pair_generator_nomem(void **state)
{
    (void)state;
    assert_true(nx_test_alloc_sweep(sweep_emit, NULL, 100000) > 0);
}

/* Under the fake driver (tests/cuda/fake-libcuda.c) device tensors are host memory and no kernel
 * loads: the entry points' device paths run up to the module load, and their errors are tested. */
static bool fake_driver(void)
{
    const char *e = getenv("NX_TEST_FAKE_DRIVER");
    return e && strcmp(e, "1") == 0;
}

static nx_ctx *gpu_ctx(void)
{
    static nx_test_alloc ta;
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t one = 1;
    nx_tensor *h = NULL, *d = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, 1, &one, &h), NX_OK);
    nx_status st = nx_tensor_to_device(h, NX_DEVICE_CUDA, &d);
    nx_tensor_free(h);
    nx_tensor_free(d);
    if (st == NX_OK)
        return ctx;
    assert_int_equal(st, NX_ERR_BACKEND);
    assert_true(strlen(nx_ctx_last_error(ctx)) > 0);
    nx_ctx_free(ctx);
    return NULL;
}

/* Without a GPU this is the whole test: the request fails cleanly. */
static void test_device_request(void **state)
{
    (void)state;
    nx_ctx *ctx = gpu_ctx();
    if (!ctx)
        return;
    nx_ctx_free(ctx);
}

static nx_tensor *dev(nx_tensor *h)
{
    nx_tensor *d = NULL;
    if (!h)
        return NULL;
    assert_int_equal(nx_tensor_to_device(h, NX_DEVICE_CUDA, &d), NX_OK);
    return d;
}

static nx_tensor *host(nx_tensor *d)
{
    nx_tensor *h = NULL;
    assert_int_equal(nx_tensor_to_device(d, NX_DEVICE_HOST, &h), NX_OK);
    return h;
}

static void expect_close(const char *what, const nx_tensor *got, const nx_tensor *ref)
{
    assert_int_equal(nx_tensor_numel(got), nx_tensor_numel(ref));
    const float *g = nx_tensor_data(got), *r = nx_tensor_data(ref);
    double worst = 0;
    for (int64_t i = 0; i < nx_tensor_numel(ref); i++) {
        double e = fabs((double)g[i] - r[i]) / (1e-5 + 1e-5 * fabs(r[i]));
        if (!(e <= 1) && !(isnan(g[i]) && isnan(r[i])))
            fail_msg("%s: [%lld] got %.9g want %.9g", what, (long long)i, g[i], r[i]);
        worst = e > worst ? e : worst;
    }
    printf("%-40s %lld values, worst error %.3f of the tolerance\n", what,
           (long long)nx_tensor_numel(ref), worst);
}

/* Elements whose bits differ (NaN equal to NaN). */
static int64_t bit_diffs(const nx_tensor *got, const nx_tensor *ref)
{
    int64_t n = 0;
    for (int64_t i = 0; i < nx_tensor_numel(ref); i++) {
        float g = ((const float *)nx_tensor_data(got))[i],
              r = ((const float *)nx_tensor_data(ref))[i];
        n += !(isnan(g) && isnan(r)) && memcmp(&g, &r, sizeof g) != 0;
    }
    return n;
}

/* In reproducible mode the CUDA kernels fold in the canonical order and contract nothing into
 * FMAs, so MIN/MAX folds of products and sums equal the interpreter bit for bit. */
static void expect_bitwise_reproducible(nx_ctx *ctx, const char *what,
                                        nx_status (*run)(nx_ctx *, void *, nx_backend,
                                                         nx_tensor **),
                                        void *user, bool must)
{
    assert_int_equal(nx_ctx_reproducible_push(ctx, true), NX_OK);
    nx_tensor *ref = NULL, *got = NULL, *h = NULL;
    assert_int_equal(run(ctx, user, NX_BACKEND_REF, &ref), NX_OK);
    assert_int_equal(run(ctx, user, NX_BACKEND_CUDA, &got), NX_OK);
    h = nx_tensor_device(got) == NX_DEVICE_CUDA ? host(got) : NULL;
    int64_t d = bit_diffs(h ? h : got, ref);
    printf("%-40s reproducible: %lld of %lld values differ in their bits from the interpreter\n",
           what, (long long)d, (long long)nx_tensor_numel(ref));
    if (must)
        assert_int_equal(d, 0);
    nx_tensor_free(h), nx_tensor_free(got), nx_tensor_free(ref);
    assert_int_equal(nx_ctx_reproducible_pop(ctx), NX_OK);
}

typedef struct pw_run {
    const pcase *c;
    pin *in, *d;
} pw_run;

static nx_status run_pairwise_case(nx_ctx *ctx, void *user, nx_backend be, nx_tensor **out)
{
    pw_run *r = user;
    nx_pairwise_opts o = {.formula = r->c->formula, .reduction = r->c->red, .backend = be};
    const pin *in = be == NX_BACKEND_CUDA ? r->d : r->in;
    return nx_pairwise_reduce(ctx, in->x, in->y, in->b, in->p, &o, out, NULL);
}

typedef struct mm_run {
    const nx_semiring *sr;
    nx_tensor *a, *b, *da, *db;
} mm_run;

static nx_status run_matmul_case(nx_ctx *ctx, void *user, nx_backend be, nx_tensor **out)
{
    mm_run *r = user;
    nx_semiring_opts o = {.backend = be};
    bool cu = be == NX_BACKEND_CUDA;
    return nx_semiring_matmul(ctx, r->sr, cu ? r->da : r->a, cu ? r->db : r->b, &o, out);
}

static void test_pairwise_on_device(void **state)
{
    (void)state;
    nx_ctx *ctx = fake_driver() ? NULL : gpu_ctx();
    if (!ctx)
        skip();
    static const int64_t sizes[][2] = {{1000, 777}, {3001, 1025}, {5, 3}};
    for (size_t i = 0; i < sizeof pcases / sizeof pcases[0]; i++) {
        for (size_t s = 0; s < 3; s++) {
            const pcase *c = &pcases[i];
            pin in = make_inputs(ctx, c, sizes[s][0], sizes[s][1]);
            nx_pairwise_opts ref_o = {
                .formula = c->formula, .reduction = c->red, .backend = NX_BACKEND_REF};
            nx_pairwise_opts o = ref_o;
            o.backend = NX_BACKEND_CUDA;
            nx_tensor *ref = NULL, *got = NULL, *h = NULL;
            assert_int_equal(nx_pairwise_reduce(ctx, in.x, in.y, in.b, in.p, &ref_o, &ref, NULL),
                             NX_OK);
            pin d = {dev(in.x), dev(in.y), dev(in.b), dev(in.p)};
            assert_int_equal(nx_pairwise_reduce(ctx, d.x, d.y, d.b, d.p, &o, &got, NULL), NX_OK);
            assert_int_equal(nx_tensor_device(got), NX_DEVICE_CUDA);
            h = host(got);
            char what[96];
            snprintf(what, sizeof what, "%s %lldx%lld", c->formula, (long long)sizes[s][0],
                     (long long)sizes[s][1]);
            expect_close(what, h, ref);
            nx_tensor_free(got);
            nx_tensor_free(h);
            /* host x with device y: host output, same values */
            assert_int_equal(nx_pairwise_reduce(ctx, in.x, d.y, d.b, d.p, &o, &got, NULL), NX_OK);
            assert_int_equal(nx_tensor_device(got), NX_DEVICE_HOST);
            expect_close(what, got, ref);
            nx_tensor_free(got);
            nx_tensor_free(ref);
            if (c->red == NX_PAIRWISE_MIN) { /* sqdist: products and sums, no exp */
                pw_run r = {c, &in, &d};
                expect_bitwise_reproducible(ctx, what, run_pairwise_case, &r, true);
            }
            free_inputs(&d);
            free_inputs(&in);
        }
    }
    nx_ctx_free(ctx);
}

static void test_contractions_on_device(void **state)
{
    (void)state;
    nx_ctx *ctx = fake_driver() ? NULL : gpu_ctx();
    if (!ctx)
        skip();
    int64_t as[2] = {130, 67}, bs[2] = {67, 129}, xs[4] = {9, 10, 11, 8}, ks[5] = {3, 3, 3, 8, 16};
    nx_tensor *a = filled(ctx, 2, as, 5, -1, 1), *b = filled(ctx, 2, bs, 6, -1, 1);
    nx_tensor *x = filled(ctx, 4, xs, 7, 0, 1), *k = filled(ctx, 5, ks, 8, -1, 1);
    nx_tensor *da = dev(a), *db = dev(b), *dx = dev(x), *dk = dev(k);
    static const nx_semiring_kind kinds[] = {NX_SEMIRING_REAL,
                                             NX_SEMIRING_LOG,
                                             NX_SEMIRING_TROPICAL_MAX_PLUS,
                                             NX_SEMIRING_TROPICAL_MIN_PLUS,
                                             NX_SEMIRING_BOOLEAN,
                                             NX_SEMIRING_EUCLIDEAN};
    nx_semiring_opts ro = {.backend = NX_BACKEND_REF}, co = {.backend = NX_BACKEND_CUDA};
    /* BOOLEAN: mostly exact zeros (so about half the outputs are 0), and among the rest NaN, -0.0
     * and infinities, which the staging must classify as the interpreter does */
    nx_tensor *za = filled(ctx, 2, as, 9, 0, 1), *zb = filled(ctx, 2, bs, 10, 0, 1);
    static const float odd[] = {NAN, -0.0f, INFINITY, -INFINITY, 0.5f, -2.0f};
    nx_tensor *zs[2] = {za, zb};
    for (int t = 0; t < 2; t++) {
        float *v = nx_tensor_data(zs[t]);
        for (int64_t i = 0; i < nx_tensor_numel(zs[t]); i++)
            v[i] = v[i] < 0.9f ? 0.0f : odd[(i * 7) % 6];
    }
    nx_tensor *dza = dev(za), *dzb = dev(zb);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        const nx_semiring *sr = nx_semiring_builtin(kinds[i]);
        bool bl = kinds[i] == NX_SEMIRING_BOOLEAN;
        nx_tensor *ref = NULL, *got = NULL;
        assert_int_equal(nx_semiring_matmul(ctx, sr, bl ? za : a, bl ? zb : b, &ro, &ref), NX_OK);
        assert_int_equal(nx_semiring_matmul(ctx, sr, bl ? dza : da, bl ? dzb : db, &co, &got),
                         NX_OK);
        assert_int_equal(nx_tensor_device(got), NX_DEVICE_CUDA);
        nx_tensor *h = host(got);
        char what[64];
        static const char *const names[] = {"REAL",     "LOG",     "MAX_PLUS",
                                            "MIN_PLUS", "BOOLEAN", "EUCLIDEAN"};
        snprintf(what, sizeof what, "matmul %s 130x67x129", names[i]);
        expect_close(what, h, ref);
        if (bl) { /* bit for bit, and both values present */
            int64_t ones = 0;
            for (int64_t e = 0; e < nx_tensor_numel(ref); e++) {
                float x = ((float *)nx_tensor_data(h))[e], y = ((float *)nx_tensor_data(ref))[e];
                assert_memory_equal(&x, &y, sizeof x);
                ones += y == 1.0f;
            }
            printf("BOOLEAN: %lld of %lld outputs are 1\n", (long long)ones,
                   (long long)nx_tensor_numel(ref));
            assert_true(ones > 0 && ones < nx_tensor_numel(ref));
        }
        nx_tensor_free(h), nx_tensor_free(got), nx_tensor_free(ref);
        /* MAX/MIN algebras must be bitwise; REAL's ascending sum of rounded products is reported */
        bool mm = kinds[i] == NX_SEMIRING_TROPICAL_MAX_PLUS ||
                  kinds[i] == NX_SEMIRING_TROPICAL_MIN_PLUS || bl;
        if (mm || kinds[i] == NX_SEMIRING_REAL) {
            mm_run r = {sr, bl ? za : a, bl ? zb : b, bl ? dza : da, bl ? dzb : db};
            expect_bitwise_reproducible(ctx, what, run_matmul_case, &r, mm);
        }
    }
    const nx_semiring *real = nx_semiring_builtin(NX_SEMIRING_REAL);
    nx_semiring_conv_opts cr = {.padding = NX_CONV_SAME, .backend = NX_BACKEND_REF};
    nx_semiring_conv_opts cc = cr;
    cc.backend = NX_BACKEND_CUDA;
    nx_tensor *ref = NULL, *got = NULL;
    assert_int_equal(nx_semiring_conv(ctx, real, x, k, &cr, &ref), NX_OK);
    assert_int_equal(nx_semiring_conv(ctx, real, dx, dk, &cc, &got), NX_OK);
    assert_int_equal(nx_tensor_device(got), NX_DEVICE_CUDA);
    nx_tensor *h = host(got);
    expect_close("conv REAL 9x10x11x8 * 3^3x8x16", h, ref);
    nx_tensor_free(h), nx_tensor_free(got), nx_tensor_free(ref);
    /* a host backend refuses device tensors, naming the argument */
    nx_semiring_opts cpu = {.backend = NX_BACKEND_CPU};
    assert_int_equal(nx_semiring_matmul(ctx, real, da, b, &cpu, &got), NX_ERR_UNSUPPORTED);
    assert_null(got);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "A is a CUDA device tensor"));
    nx_tensor *list[] = {a, b, x, k, da, db, dx, dk, za, zb, dza, dzb};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
        nx_tensor_free(list[i]);
    nx_ctx_free(ctx);
}

/* |got - ref| <= 1e-5 (1 + max |ref|): a gradient is a sum of terms of either sign, so its error
 * scales with the terms, not with the (possibly cancelling) result. */
static void expect_close_scaled(const char *what, const nx_tensor *got, const nx_tensor *ref)
{
    assert_int_equal(nx_tensor_numel(got), nx_tensor_numel(ref));
    const float *g = nx_tensor_data(got), *r = nx_tensor_data(ref);
    double big = 0, worst = 0;
    for (int64_t i = 0; i < nx_tensor_numel(ref); i++)
        big = fabs(r[i]) > big ? fabs(r[i]) : big;
    for (int64_t i = 0; i < nx_tensor_numel(ref); i++) {
        double e = fabs((double)g[i] - r[i]) / (1e-5 * (1 + big));
        if (!(e <= 1))
            fail_msg("%s: [%lld] got %.9g want %.9g", what, (long long)i, g[i], r[i]);
        worst = e > worst ? e : worst;
    }
    printf("%-40s %lld values, worst error %.3f of the tolerance\n", what,
           (long long)nx_tensor_numel(ref), worst);
}

/* The gradient entry points on device tensors: outputs on the device, the interpreter's values. */
static void test_vjp_on_device(void **state)
{
    (void)state;
    nx_ctx *ctx = fake_driver() ? NULL : gpu_ctx();
    if (!ctx)
        skip();
    pin in = make_inputs(ctx, &pcases[0], 300, 257);
    int64_t ds[2] = {300, 1};
    nx_tensor *dout = filled(ctx, 2, ds, 11, -1, 1);
    pin d = {dev(in.x), dev(in.y), dev(in.b), NULL};
    nx_tensor *ddout = dev(dout);
    nx_pairwise_opts ro = {
        .formula = pcases[0].formula, .reduction = NX_PAIRWISE_SUM, .backend = NX_BACKEND_REF};
    nx_pairwise_opts co = ro;
    co.backend = NX_BACKEND_CUDA;
    nx_tensor *rg[4] = {NULL}, *cg[4] = {NULL};
    assert_int_equal(nx_pairwise_reduce_vjp(ctx, in.x, in.y, in.b, NULL, &ro, dout, rg), NX_OK);
    assert_int_equal(nx_pairwise_reduce_vjp(ctx, d.x, d.y, d.b, NULL, &co, ddout, cg), NX_OK);
    static const char *const names[3] = {"pairwise vjp dx", "pairwise vjp dy", "pairwise vjp db"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(nx_tensor_device(cg[i]), NX_DEVICE_CUDA);
        nx_tensor *h = host(cg[i]);
        expect_close_scaled(names[i], h, rg[i]);
        nx_tensor_free(h);
    }
    for (int i = 0; i < 4; i++)
        nx_tensor_free(rg[i]), nx_tensor_free(cg[i]);
    int64_t as[2] = {70, 33}, bs[2] = {33, 45}, cs[2] = {70, 45};
    nx_tensor *a = filled(ctx, 2, as, 12, -1, 1), *b = filled(ctx, 2, bs, 13, -1, 1);
    nx_tensor *dc = filled(ctx, 2, cs, 14, -1, 1);
    nx_tensor *da = dev(a), *db = dev(b), *ddc = dev(dc);
    const nx_semiring *real = nx_semiring_builtin(NX_SEMIRING_REAL);
    nx_semiring_opts sr = {.backend = NX_BACKEND_REF}, sc = {.backend = NX_BACKEND_CUDA};
    nx_tensor *ra = NULL, *rb = NULL, *ga = NULL, *gb = NULL;
    assert_int_equal(nx_semiring_matmul_vjp(ctx, real, a, b, dc, &sr, &ra, &rb), NX_OK);
    assert_int_equal(nx_semiring_matmul_vjp(ctx, real, da, db, ddc, &sc, &ga, &gb), NX_OK);
    assert_int_equal(nx_tensor_device(ga), NX_DEVICE_CUDA);
    nx_tensor *ha = host(ga), *hb = host(gb);
    expect_close_scaled("matmul vjp REAL dA", ha, ra);
    expect_close_scaled("matmul vjp REAL dB", hb, rb);
    nx_tensor *list[] = {dout, ddout, a, b, dc, da, db, ddc, ra, rb, ga, gb, ha, hb};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
        nx_tensor_free(list[i]);
    free_inputs(&d);
    free_inputs(&in);
    nx_ctx_free(ctx);
}

/* Device tensors where they cannot run: a host backend refuses them by name, a device p is read
 * on the host for the finiteness check, a CUDA run that cannot load its module fails cleanly. */
static void test_device_errors(void **state)
{
    (void)state;
    if (!fake_driver())
        skip();
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t as[2] = {16, 8}, bs[2] = {8, 12}, xs[2] = {10, 3}, one = 1;
    nx_tensor *a = filled(ctx, 2, as, 1, -1, 1), *b = filled(ctx, 2, bs, 2, -1, 1);
    nx_tensor *x = filled(ctx, 2, xs, 3, 0, 1), *p = filled(ctx, 1, &one, 4, 1, 2);
    nx_tensor *da = dev(a), *db = dev(b), *dx = dev(x);
    const nx_semiring *real = nx_semiring_builtin(NX_SEMIRING_REAL);
    nx_tensor *out = NULL;
    static const nx_backend host[2] = {NX_BACKEND_CPU, NX_BACKEND_REF};
    for (int i = 0; i < 2; i++) {
        nx_semiring_opts o = {.backend = host[i]};
        assert_int_equal(nx_semiring_matmul(ctx, real, da, b, &o, &out), NX_ERR_UNSUPPORTED);
        assert_null(out);
        assert_non_null(strstr(nx_ctx_last_error(ctx), "A is a CUDA device tensor"));
        assert_int_equal(nx_semiring_matmul(ctx, real, a, db, &o, &out), NX_ERR_UNSUPPORTED);
        assert_non_null(strstr(nx_ctx_last_error(ctx), "B is a CUDA device tensor"));
    }
    /* a non-finite device parameter is found on the host copy */
    float nanv = NAN;
    ((float *)nx_tensor_data(p))[0] = nanv;
    nx_tensor *dp = dev(p);
    nx_pairwise_opts po = {.formula = "-sqdist(x, y) / p0",
                           .reduction = NX_PAIRWISE_LOGSUMEXP,
                           .backend = NX_BACKEND_CPU};
    assert_int_equal(nx_pairwise_reduce(ctx, x, x, NULL, dp, &po, &out, NULL), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "parameter p0"));
    assert_int_equal(nx_pairwise_reduce(ctx, dx, x, NULL, NULL,
                                        &(nx_pairwise_opts){.formula = "sqdist(x, y)",
                                                            .reduction = NX_PAIRWISE_MIN,
                                                            .backend = NX_BACKEND_CPU},
                                        &out, NULL),
                     NX_ERR_UNSUPPORTED);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "x is a CUDA device tensor"));
    /* the cuda backend compiles (where NVRTC loads), and the fake driver's module load fails:
     * a status and a message, no output, nothing leaked */
    nx_semiring_opts co = {.backend = NX_BACKEND_CUDA};
    nx_status st = nx_semiring_matmul(ctx, real, da, db, &co, &out);
    assert_int_not_equal(st, NX_OK);
    assert_null(out);
    assert_true(strlen(nx_ctx_last_error(ctx)) > 0);
    printf("cuda under the fake driver: %s: %s\n", nx_status_str(st), nx_ctx_last_error(ctx));
    nx_tensor *list[] = {a, b, x, p, da, db, dx, dp};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
        nx_tensor_free(list[i]);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* A CUDA plan that falls back to the CPU (an f16 loop kernel) given device inputs: the placement
 * policy moves it to the CPU backend with one warning, the inputs go to the host and the outputs
 * come back to the device (program/compile.c). The fake driver has no NVRTC, so the program is
 * compiled for CUDA as if it had been resolved. */
static int fallback_warnings;
static void count_fallback(void *user, nx_log_level level, const char *msg)
{
    (void)user;
    if (level == NX_LOG_WARN && strstr(msg, "requested=cuda resolved=cpu"))
        fallback_warnings++;
}

static void test_fallback_device_inputs(void **state)
{
    (void)state;
    if (!fake_driver())
        skip();
    nx_test_alloc ta = {0};
    nx_allocator al = nx_test_allocator(&ta);
    nx_ctx_opts co = {.allocator = &al, .log = count_fallback, .ignore_env = true};
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(&co, &ctx), NX_OK);
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    int64_t n = 37;
    nx_node xin = nx_input(g, "x", NX_DTYPE_F16, 1, &n);
    nx_node xf = nx_cast(g, xin, NX_DTYPE_F32);
    nx_node y = nx_add(g, xf, xf); /* f16 in: a loop kernel the CUDA emitter refuses */
    assert_int_equal(nx_graph_status(g), NX_OK);
    nx_kplan *plan = NULL;
    assert_int_equal(nx_pass_pipeline(ctx, &g->s, 1, &y, &plan), NX_OK);
    assert_int_equal(plan->nkernels, 1);
    assert_non_null(nx_ptx_kernel_unsupported(plan->kernels[0]));
    assert_non_null(nx_program_why_not(NX_BACKEND_CUDA, plan->kernels[0]));
    nx_kplan_free(plan);
    nx_compile_opts o = {.backend = NX_BACKEND_CUDA, .n_outputs = 1, .outputs = &y};
    nx_program *p = NULL;
    fallback_warnings = 0;
    assert_int_equal(nx_program_compile_on(g, &o, NX_BACKEND_CUDA, &p), NX_OK);
    assert_int_equal(nx_program_backend(p), NX_BACKEND_CUDA);
    assert_int_equal(fallback_warnings, 1);
    nx_tensor *h = NULL, *hf = filled(ctx, 1, &n, 5, -4, 4), *d = NULL, *out = NULL, *back = NULL;
    assert_int_equal(nx_tensor_cast(hf, NX_DTYPE_F16, &h), NX_OK);
    assert_int_equal(nx_tensor_to_device(h, NX_DEVICE_CUDA, &d), NX_OK);
    assert_int_equal(nx_program_run(p, (const nx_tensor *const *)&d, &out), NX_OK);
    assert_int_equal(nx_tensor_device(out), NX_DEVICE_CUDA);
    assert_int_equal(nx_tensor_to_device(out, NX_DEVICE_HOST, &back), NX_OK);
    nx_tensor *want = NULL;
    assert_int_equal(nx_tensor_cast(h, NX_DTYPE_F32, &want), NX_OK);
    assert_int_equal(nx_tensor_dtype(back), NX_DTYPE_F32);
    for (int64_t i = 0; i < n; i++) /* x + x is exact */
        assert_true(((float *)nx_tensor_data(back))[i] == 2 * ((float *)nx_tensor_data(want))[i]);
    /* host inputs give host outputs */
    nx_tensor *hout = NULL;
    assert_int_equal(nx_program_run(p, (const nx_tensor *const *)&h, &hout), NX_OK);
    assert_int_equal(nx_tensor_device(hout), NX_DEVICE_HOST);
    assert_memory_equal(nx_tensor_data(hout), nx_tensor_data(back), (size_t)n * sizeof(float));
    nx_tensor *list[] = {h, hf, d, out, back, want, hout};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
        nx_tensor_free(list[i]);
    nx_program_free(p);
    /* once per kernel identity per process: compiling it again is quiet */
    assert_int_equal(nx_program_compile_on(g, &o, NX_BACKEND_CUDA, &p), NX_OK);
    nx_program_free(p);
    assert_int_equal(fallback_warnings, 1);
    nx_graph_free(g);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pair_generator),
        cmocka_unit_test(test_pair_generator_nomem),
        cmocka_unit_test(test_boolean_tile),
        cmocka_unit_test(test_device_request),
        cmocka_unit_test(test_pairwise_on_device),
        cmocka_unit_test(test_contractions_on_device),
        cmocka_unit_test(test_vjp_on_device),
        cmocka_unit_test(test_device_errors),
        cmocka_unit_test(test_fallback_device_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
