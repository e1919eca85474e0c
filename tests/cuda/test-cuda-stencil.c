/* Stencil kernels through the CUDA emitter's general form: the box split, 32-bit index arithmetic,
 * the float MIN/MAX networks and rows per thread (codegen/ptx/emit.c, docs/cuda.md "Borders, 32-bit
 * index arithmetic, MIN/MAX networks"). Cases: grey dilation and erosion 3^3 and 2 x 3 x 4 (every
 * border mode), median 3^3, Gaussian FIR passes (reflect, constant, wrap), on volumes with short
 * axes (1, 2, 3) and long ones, inputs holding NaN, +-0 and +-inf.
 *   - Without a GPU: every kernel's CUDA C is emitted with the refinements on and off and compiled
 *     by NVRTC for compute_80 (skipped, with the reason printed, where NVRTC is missing), and the
 *     emitted form is checked where it must have changed: a dilation's kernel holds no 64-bit
 *     modulo (nx_imod) in its box region and declares its loop indices int.
 *   - The emission of a dilation under every failing allocation: NX_ERR_NOMEM, no leak.
 *   - With a GPU (NX_TEST_CUDA_RUN=1 and a device answering): each case runs on the device in
 *     reproducible mode and must equal the reference interpreter bit for bit (NaNs of any payload
 *     equal, signed zeros distinct), with the refinements on, and off (NITRIX_PTX_SPLIT=0 ...). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/ptx/emit-tile.h"
#include "nitrix-ops.h"
#include "program/program.h"
#include "testutil.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double next_unit(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* Random values with NaN, +-0 and +-inf sprinkled in (one in 16 each kind). zeros: mostly +0 and
 * -0 (49.25 % each; -1, +1 and NaN 0.5 % each), so that a window's maximum or minimum is often a
 * zero reached by taps of both signs, and which one is first in the fold decides the result's
 * sign. */
static nx_tensor *input(nx_ctx *ctx, const int64_t *shape, bool zeros)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, 3, shape, &t), NX_OK);
    float *p = nx_tensor_data(t);
    static const float special[4] = {NAN, 0.0f, -0.0f, INFINITY};
    for (int64_t i = 0; i < nx_tensor_numel(t); i++) {
        double u = next_unit();
        if (zeros) {
            p[i] = u < 0.4925  ? 0.0f
                   : u < 0.985 ? -0.0f
                   : u < 0.99  ? -1.0f
                   : u < 0.995 ? 1.0f
                               : NAN;
            continue;
        }
        int kind = (int)(next_unit() * 64);
        p[i] = kind < 4 ? special[kind] : kind == 4 ? -INFINITY : (float)(8 * u - 4);
        if (kind == 5)
            p[i] = (float)(int)(4 * u - 2); /* ties among the taps */
    }
    return t;
}

typedef enum { C_DILATE, C_ERODE, C_MEDIAN, C_GAUSS, C_KINDS } kind;

static nx_node build(nx_graph *g, kind kd, int mode, const int64_t *shape, const int64_t *size)
{
    nx_node x = nx_input(g, "x", NX_DTYPE_F32, 3, shape);
    if (kd == C_GAUSS) {
        static const nx_gaussian_mode gm[3] = {NX_GAUSSIAN_REFLECT, NX_GAUSSIAN_CONSTANT,
                                               NX_GAUSSIAN_WRAP};
        nx_gaussian_opts o = {.nsigma = 1, .sigma = {0.8}, .driver = "fir", .mode = gm[mode % 3]};
        return nx_gaussian_node(g, x, NX_NONE, &o);
    }
    nx_morph_opts o = {.nspatial = 3, .border = (nx_morph_border)(mode % NX_MORPH_BORDER_COUNT)};
    for (int a = 0; a < 3; a++)
        o.size[a] = size[a];
    if (kd == C_MEDIAN)
        return nx_median_node(g, x, &o);
    return nx_morph_node(g, kd == C_DILATE ? NX_MORPH_DILATE : NX_MORPH_ERODE, x, &o);
}

static bool nvrtc_ok(void)
{
    const nx_rt_nvrtc *n = nx_rt_nvrtc_get();
    if (!n->ok)
        print_message("skipped: %s\n", n->status);
    return n->ok;
}

/* The text between the box region's start and the shell's ("t -= "), or NULL. */
static bool box_has(const char *src, const char *what)
{
    const char *a = strstr(src, "if (t < "), *b = a ? strstr(a, "t -= ") : NULL;
    if (!a || !b)
        return false;
    const char *w = strstr(a, what);
    return w && w < b;
}

/* A stencil kernel's launch. whole: tile blocks of 32 x 8 x 16 points covering the whole output
 * (no shell blocks, no more tiles than points). Otherwise NS shell blocks (the "blockIdx.x < NS"
 * test) of one thread per shell point (the "p < shell" bound), then tiles covering the box. */
static void check_stencil_launch(const nx_kernel *k, const char *src, const nx_ptx_launch *l,
                                 bool whole)
{
    const char *a = strstr(src, "if (blockIdx.x < "), *b = strstr(src, "if (p < ");
    int64_t numel = nx_ir_numel(k->ndim, k->extent);
    long long ns = 0, shell = 0, nt = l->points / NX_PTX_THREADS;
    if (whole && (a || b))
        fail_msg("%s: shell blocks where the tiles should cover the whole output:\n%s", k->name,
                 src);
    if (whole && (l->points % NX_PTX_THREADS || nt * 32 * 8 * 16 < numel || nt > numel))
        fail_msg("%s: launch of %lld threads for %lld points", k->name, (long long)l->points,
                 (long long)numel);
    if (whole)
        return;
    if (!a || !b || sscanf(a, "if (blockIdx.x < %lldU)", &ns) != 1 ||
        sscanf(b, "if (p < %lldLL)", &shell) != 1)
        fail_msg("%s: no shell block count or shell bound:\n%s", k->name, src);
    int64_t box = numel - shell;
    nt -= ns;
    if (l->points % NX_PTX_THREADS || shell < 1 || box < 1 ||
        ns != (shell + NX_PTX_THREADS - 1) / NX_PTX_THREADS || nt * 32 * 8 * 16 < box ||
        nt > box)
        fail_msg("%s: launch of %lld threads: %lld shell blocks for %lld points, %lld tiles for "
                 "%lld box points",
                 k->name, (long long)l->points, ns, shell, nt, (long long)box);
}

/* Emits and compiles every loop kernel of the case's plan (flags: the refinements wanted). */
static void emit_case(nx_ctx *ctx, kind kd, int mode, const int64_t *shape, const int64_t *size,
                      bool compile)
{
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node y = build(g, kd, mode, shape, size);
    assert_int_equal(nx_graph_status(g), NX_OK);
    nx_kplan *plan = NULL;
    if (nx_pass_pipeline(ctx, &g->s, 1, &y, &plan) != NX_OK)
        fail_msg("pipeline: %s", nx_ctx_last_error(ctx));
    for (int i = 0; i < plan->nkernels; i++) {
        const nx_kernel *k = plan->kernels[i];
        if (k->kind != NX_KERNEL_LOOP || nx_ptx_unsupported(k))
            continue;
        char *src = NULL;
        size_t len = 0;
        nx_ptx_launch l;
        if (nx_ptx_emit(k, "k", false, &src, &len, &l) != NX_OK)
            fail_msg("emit %s: %s", k->name, nx_ctx_last_error(ctx));
        int all = NX_PTX_SPLIT | NX_PTX_NARROW | NX_PTX_MINMAX | NX_PTX_ROWS | NX_PTX_STENCIL;
        bool on = (nx_ptx_general_flags(ctx) & all) == all; /* knobs (tile sizes) may be set */
        bool stencil = strstr(src, "__shared__ float sm[2]") != NULL;
        /* a flat box's fused passes: one MIN/MAX network over a separable window of taps (on
         * shorter axes the box may be empty: either form) */
        bool window = (kd == C_DILATE || kd == C_ERODE) && i == plan->nkernels - 1 &&
                      shape[0] >= 8 && shape[1] >= 8 && shape[2] >= 8;
        if ((window && on && !stencil) || (stencil && (!on || kd == C_MEDIAN || kd == C_GAUSS)))
            fail_msg("%s (case %d, shape %lld %lld %lld): stencil tiles %s:\n%s", k->name, kd,
                     (long long)shape[0], (long long)shape[1], (long long)shape[2],
                     stencil ? "used" : "not used", src);
        if (on && !stencil && kd == C_DILATE && shape[0] >= 8 && shape[1] >= 8 &&
            shape[2] >= 8 && i == plan->nkernels - 1) {
            if (!strstr(src, "if (t < ") || box_has(src, "nx_imod"))
                fail_msg("dilate %s: no box, or a 64-bit modulo inside it:\n%s", k->name, src);
            if (!strstr(src, "int i0;") || !strstr(src, "for (i64 p"))
                fail_msg("dilate %s: loop indices are not int:\n%s", k->name, src);
        }
        /* one thread per point, fewer where box threads take rows of points: never more (a
         * thread past the work would compute shell points again) */
        int64_t numel = nx_ir_numel(k->ndim, k->extent);
        bool rows = strstr(src, " ib = i") != NULL;
        /* every border mode's shell is the same function of shifted coordinates (the maps
         * hold): no shell blocks unless the stencil_shell option asks for them */
        if (stencil)
            check_stencil_launch(k, src, &l,
                                 nx_rt_cuda_codegen(ctx)->stencil_shell != NX_CUDA_ON);
        else if (rows ? l.points >= numel || l.points < numel / 8 : l.points != numel)
            fail_msg("%s: launch of %lld threads for %lld points%s", k->name, (long long)l.points,
                     (long long)numel, rows ? " (rows per thread)" : "");
        if (compile) {
            nx_ptx_image img;
            nx_ptx_target t = {80, NX_PTX_KIND_PTX};
            if (nx_ptx_compile(ctx, src, "stencil.cu", t, NULL, 0, &img) != NX_OK)
                fail_msg("NVRTC %s: %s\n%s", k->name, nx_ctx_last_error(ctx), src);
            /* min.f32/max.f32 pick +0 over -0 (or the reverse) whatever the order, where the
             * interpreter keeps the first: NVVM made them from `x < 0.0f ? x : 0.0f` in
             * constant-border erosions until the compare-selects became inline PTX */
            if (kd != C_GAUSS && (strstr(img.data, "min.f32") || strstr(img.data, "max.f32")))
                fail_msg("%s (case %d mode %d): min.f32/max.f32 in the PTX:\n%s", k->name, kd,
                         mode, img.data);
            nx_ptx_image_free(ctx, &img);
        }
        nx_rt_free(ctx, src, len);
    }
    nx_kplan_free(plan);
    nx_graph_free(g);
}

/* The 5th and 6th are long enough for rows per thread (an outer axis of 16 or more in the box);
 * the last two span several stencil tiles (32 x 8 x 16 points) on every axis, with windows of 5
 * and even extents. */
static const int64_t SHAPES[][3] = {{9, 10, 11}, {1, 7, 12},   {2, 3, 16},   {33, 5, 3},
                                    {20, 18, 40}, {40, 24, 9}, {37, 21, 70}, {35, 19, 67}};
static const int64_t SIZES[][3] = {{3, 3, 3}, {2, 3, 4}, {3, 3, 3}, {1, 4, 2},
                                   {3, 3, 3}, {3, 3, 3}, {5, 3, 4}, {3, 2, 5}};
#define NSHAPES 8

static void each_case(void (*fn)(nx_ctx *, kind, int, const int64_t *, const int64_t *, bool),
                      nx_ctx *ctx, bool arg)
{
    for (int kd = 0; kd < C_KINDS; kd++)
        for (int s = 0; s < NSHAPES; s++)
            for (int m = 0; m < (kd == C_MEDIAN ? 2 : 5); m++) {
                if (kd == C_GAUSS && m >= 3)
                    continue;
                if (kd == C_GAUSS && (SHAPES[s][0] < 4 || SHAPES[s][1] < 4 || SHAPES[s][2] < 4))
                    continue; /* the FIR's window must fit every axis */
                fn(ctx, (kind)kd, m + s, SHAPES[s], SIZES[s], arg);
            }
}

/* The refinements on or off through the environment, which a context reads when it is created. */
static void set_flags(bool on)
{
    const char *v = on ? "1" : "0";
    setenv("NITRIX_PTX_SPLIT", v, 1);
    setenv("NITRIX_PTX_NARROW", v, 1);
    setenv("NITRIX_PTX_MINMAX", v, 1);
    setenv("NITRIX_PTX_ROWS", v, 1);
    setenv("NITRIX_PTX_STENCIL", v, 1);
}

static void test_emit(void **state)
{
    (void)state;
    bool compile = nvrtc_ok();
    for (int on = 1; on >= 0; on--) {
        set_flags(on);
        nx_ctx *ctx = NULL;
        assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
        each_case(emit_case, ctx, compile);
        nx_ctx_free(ctx);
    }
    set_flags(true);
}

/* A 3 x 1 x 1 MAX window along axis 0 of a 10 x 9 x 40 volume, each tap through a clamp to
 * [0, 9] (the nearest border). Variants: 1, the +1 tap clamps to 8 instead: inside the box the
 * taps are plain loads either way, but the +1 tap at i0 = 8 reads plane 8 where the 0 tap at
 * i0 = 9 reads plane 9, so the leaves are not one function of shifted coordinates there; 2, each
 * tap is select(0 <= i0 + d < 10, tap, 0) (a constant border); 3, as 2 but the +1 tap's constant
 * is 1 (the taps differ where the guard fails). */
static nx_kernel *clamp_window(nx_ctx *ctx, int variant)
{
    static const int64_t shape[3] = {10, 9, 40};
    nx_kernel *k = NULL;
    assert_int_equal(nx_kernel_new(ctx, NX_KERNEL_LOOP, "clamp_window", &k), NX_OK);
    int out = nx_kernel_buffer(k, NX_KBUF_OUT, NX_DTYPE_F32, 3, shape, 1);
    int in = nx_kernel_buffer(k, NX_KBUF_IN, NX_DTYPE_F32, 3, shape, 0);
    nx_kernel_space(k, 3, shape);
    int32_t i0 = nx_kernel_idx(k, 0), i1 = nx_kernel_idx(k, 1), i2 = nx_kernel_idx(k, 2);
    int32_t row = nx_kernel_prim(k, NX_PRIM_ADD, NX_DTYPE_I64,
                                 nx_kernel_prim(k, NX_PRIM_MUL, NX_DTYPE_I64, i1,
                                                nx_kernel_const_i(k, NX_DTYPE_I64, 40), -1),
                                 i2, -1);
    int32_t acc = -1;
    for (int d = -1; d <= 1; d++) {
        int32_t p = nx_kernel_prim(k, NX_PRIM_ADD, NX_DTYPE_I64, i0,
                                   nx_kernel_const_i(k, NX_DTYPE_I64, d), -1);
        int32_t q = nx_kernel_prim(k, NX_PRIM_MAX, NX_DTYPE_I64, p,
                                   nx_kernel_const_i(k, NX_DTYPE_I64, 0), -1);
        q = nx_kernel_prim(k, NX_PRIM_MIN, NX_DTYPE_I64, q,
                           nx_kernel_const_i(k, NX_DTYPE_I64, variant == 1 && d == 1 ? 8 : 9),
                           -1);
        int32_t at = nx_kernel_prim(k, NX_PRIM_ADD, NX_DTYPE_I64,
                                    nx_kernel_prim(k, NX_PRIM_MUL, NX_DTYPE_I64, q,
                                                   nx_kernel_const_i(k, NX_DTYPE_I64, 360), -1),
                                    row, -1);
        int32_t leaf = nx_kernel_load(k, in, at);
        if (variant >= 2) {
            int32_t lo = nx_kernel_prim(k, NX_PRIM_GE, NX_DTYPE_BOOL, p,
                                        nx_kernel_const_i(k, NX_DTYPE_I64, 0), -1);
            int32_t hi = nx_kernel_prim(k, NX_PRIM_LT, NX_DTYPE_BOOL, p,
                                        nx_kernel_const_i(k, NX_DTYPE_I64, 10), -1);
            int32_t c = nx_kernel_const_f(k, NX_DTYPE_F32, variant == 3 && d == 1 ? 1.0 : 0.0);
            leaf = nx_kernel_prim(k, NX_PRIM_SELECT, NX_DTYPE_F32,
                                  nx_kernel_prim(k, NX_PRIM_AND, NX_DTYPE_BOOL, lo, hi, -1), leaf,
                                  c);
        }
        acc = acc < 0 ? leaf : nx_kernel_prim(k, NX_PRIM_MAX, NX_DTYPE_F32, acc, leaf, -1);
    }
    assert_true(nx_kernel_store(k, out, acc));
    assert_int_equal(nx_kernel_validate(k), NX_OK);
    return k;
}

/* The shell check: tiles over the whole output when the taps agree on shifted coordinates
 * (variants 0 and 2), shell blocks (the box form) when they do not (1 and 3), and for variant 0
 * again with the stencil_shell option on. Each source through NVRTC. */
static void test_shell_check(void **state)
{
    (void)state;
    set_flags(true);
    nx_ctx *plain = NULL, *shell = NULL;
    assert_int_equal(nx_ctx_new(NULL, &plain), NX_OK);
    nx_cuda_codegen_opts cg = {.stencil_shell = NX_CUDA_ON};
    assert_int_equal(nx_ctx_new(&(nx_ctx_opts){.cuda_codegen = &cg}, &shell), NX_OK);
    bool compile = nvrtc_ok();
    for (int v = 0; v < 5; v++) {
        nx_ctx *ctx = v == 4 ? shell : plain;
        nx_kernel *k = clamp_window(ctx, v % 4);
        char *src = NULL;
        size_t len = 0;
        nx_ptx_launch l;
        if (nx_ptx_emit(k, "k", false, &src, &len, &l) != NX_OK)
            fail_msg("emit: %s", nx_ctx_last_error(ctx));
        if (!strstr(src, "__shared__ float sm[2]"))
            fail_msg("variant %d: not a stencil kernel:\n%s", v, src);
        check_stencil_launch(k, src, &l, v == 0 || v == 2);
        /* the constant border's guard is staged (the whole form), not the tap's select */
        if (v == 2 && !strstr(src, "const bool gz0 = "))
            fail_msg("variant 2: no staged guard:\n%s", src);
        if (compile) {
            nx_ptx_image img;
            nx_ptx_target t = {80, NX_PTX_KIND_PTX};
            if (nx_ptx_compile(ctx, src, "stencil.cu", t, NULL, 0, &img) != NX_OK)
                fail_msg("NVRTC: %s\n%s", nx_ctx_last_error(ctx), src);
            nx_ptx_image_free(ctx, &img);
        }
        nx_rt_free(ctx, src, len);
        nx_kernel_free(k);
    }
    nx_ctx_free(plain);
    nx_ctx_free(shell);
}

static int64_t mismatches;

/* Runs the case on the device and on the reference interpreter; bitwise comparison. */
static void run_case(nx_ctx *ctx, kind kd, int mode, const int64_t *shape, const int64_t *size,
                     bool unused)
{
    (void)unused;
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node y = build(g, kd, mode, shape, size);
    nx_program *ref = NULL, *dev = NULL;
    nx_compile_opts ro = {NX_BACKEND_REF, 1, &y}, co = {NX_BACKEND_CUDA, 1, &y};
    if (nx_graph_compile(g, &ro, &ref) != NX_OK || nx_graph_compile(g, &co, &dev) != NX_OK)
        fail_msg("compile: %s", nx_ctx_last_error(ctx));
    /* the zero-heavy input for the MIN/MAX kinds, where the sign of a zero result is at stake */
    for (int zeros = 0; zeros < (kd == C_DILATE || kd == C_ERODE ? 2 : 1); zeros++) {
        nx_tensor *x = input(ctx, shape, zeros);
        nx_tensor *want = NULL, *got = NULL;
        assert_int_equal(nx_program_run(ref, (const nx_tensor *const *)&x, &want), NX_OK);
        if (nx_program_run(dev, (const nx_tensor *const *)&x, &got) != NX_OK)
            fail_msg("run: %s", nx_ctx_last_error(ctx));
        const float *a = nx_tensor_data(got), *b = nx_tensor_data(want);
        int64_t nzero = 0;
        for (int64_t i = 0; i < nx_tensor_numel(want); i++) {
            uint32_t ua, ub;
            memcpy(&ua, &a[i], 4);
            memcpy(&ub, &b[i], 4);
            nzero += b[i] == 0.0f;
            if (ua != ub && !(isnan(a[i]) && isnan(b[i]))) {
                if (mismatches++ < 8)
                    print_message("case %d mode %d shape %lld %lld %lld%s: element %lld: device "
                                  "%a, reference %a\n",
                                  kd, mode, (long long)shape[0], (long long)shape[1],
                                  (long long)shape[2], zeros ? " (zeros)" : "", (long long)i,
                                  a[i], b[i]);
                break;
            }
        }
        /* the zero-heavy input must produce zero results (else it tests nothing) */
        if (zeros && nzero * 8 < nx_tensor_numel(want))
            fail_msg("case %d shape %lld %lld %lld: %lld zero results of %lld", kd,
                     (long long)shape[0], (long long)shape[1], (long long)shape[2],
                     (long long)nzero, (long long)nx_tensor_numel(want));
        nx_tensor_free(got);
        nx_tensor_free(want);
        nx_tensor_free(x);
    }
    nx_program_free(dev);
    nx_program_free(ref);
    nx_graph_free(g);
}

static void test_device_values(void **state)
{
    (void)state;
    const char *run = getenv("NX_TEST_CUDA_RUN");
    if (!run || strcmp(run, "1") != 0) {
        print_message("skipped: NX_TEST_CUDA_RUN=1 is not set\n");
        skip();
    }
    if (nx_rt_cuda_available(NULL) != NX_OK) {
        print_message("skipped: %s\n", nx_ctx_last_error(NULL));
        skip();
    }
    /* NX_TEST_STENCIL_ON_ONLY=1: the refinements on only (a device call short of time) */
    const char *only = getenv("NX_TEST_STENCIL_ON_ONLY");
    for (int on = 1; on >= (only && !strcmp(only, "1") ? 1 : 0); on--) {
        set_flags(on);
        nx_ctx *ctx = NULL;
        assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
        mismatches = 0;
        each_case(run_case, ctx, false);
        nx_ctx_free(ctx);
        if (mismatches)
            fail_msg("%lld cases differ from the interpreter (refinements %s)",
                     (long long)mismatches, on ? "on" : "off");
    }
    set_flags(true);
}

/* Emits a dilation's kernels (box, 32-bit, MIN/MAX network and rows all on) under every failing
 * allocation: each must fail with NX_ERR_NOMEM and leak nothing (the analyses' scratch, the box's
 * aliases and the source text included). */
static nx_status emit_sweep_body(nx_ctx *ctx, void *user)
{
    (void)user;
    nx_graph *g = NULL;
    nx_status st = nx_graph_new(ctx, &g);
    if (st != NX_OK)
        return st;
    int64_t shape[3] = {20, 18, 12}, size[3] = {3, 3, 3};
    nx_node y = build(g, C_DILATE, 0, shape, size);
    nx_kplan *plan = NULL;
    st = nx_graph_status(g);
    if (st == NX_OK)
        st = nx_pass_pipeline(ctx, &g->s, 1, &y, &plan);
    for (int i = 0; st == NX_OK && i < plan->nkernels; i++) {
        char *src = NULL;
        size_t len = 0;
        nx_ptx_launch l;
        if (plan->kernels[i]->kind != NX_KERNEL_LOOP)
            continue;
        st = nx_ptx_emit(plan->kernels[i], "k", false, &src, &len, &l);
        if (st == NX_OK)
            nx_rt_free(ctx, src, len);
    }
    nx_kplan_free(plan);
    nx_graph_free(g);
    return st;
}

static void test_emit_sweep(void **state)
{
    (void)state;
    set_flags(true);
    assert_true(nx_test_alloc_sweep(emit_sweep_body, NULL, 4000) > 10);
}

int main(void)
{
    setenv("NITRIX_REPRODUCIBLE", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_emit),
        cmocka_unit_test(test_emit_sweep),
        cmocka_unit_test(test_shell_check),
        cmocka_unit_test(test_device_values),
    };
    /* NX_TEST_FILTER=<pattern>: only the tests it names (a device call short of time) */
    if (getenv("NX_TEST_FILTER"))
        cmocka_set_test_filter(getenv("NX_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
