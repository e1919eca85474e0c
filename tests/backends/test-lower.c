/* Fusion, lowering and the CPU JIT: graphs run through the pass pipeline and the plan runner
 * against the reference interpreter, and the plans must have the promised shape: one kernel for a
 * max-plus contraction, no M x K x N buffer, a nested reduction inside one kernel.
 *
 * Modes (argv[1]):
 *   interp  kernels run on the kernel IR interpreter: every value equals the reference's bit for
 *           bit (same scalar semantics, same canonical fold order).
 *   jit     kernels JIT-compiled under NITRIX_REPRODUCIBLE=1 (canonical fold order): integer,
 *           bool, min/max and movement results are exact; float results of cases with
 *           transcendental functions are within TOL_ULPS * eps of the output's largest magnitude
 *           (the inline math library is within a few ulp of libm, docs in codegen/x86/math.h).
 *   fast    JIT-compiled with reassociation allowed: integer results exact, float results within
 *           the documented reassociation bound 4 * n * eps * sum|x_k| (docs/kernel-ir.md), which
 *           for these inputs (|x| <= 4, products <= 16, n <= 70) is at most 4*70*16*70*eps of
 *           magnitude; normalised by the output's largest magnitude as TOL_ULPS * eps. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/x86/emit.h"
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

static nx_tensor *random_tensor(nx_ctx *ctx, nx_dtype dt, int ndim, const int64_t *shape)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, dt, ndim, shape, &t), NX_OK);
    for (int64_t i = 0; i < nx_tensor_numel(t); i++) {
        double u = next_unit();
        nx_ir_val v = nx_ir_from_double(dt == NX_DTYPE_BOOL ? u < 0.5
                                        : nx_ir_is_float(dt) ? 8 * u - 4
                                                             : floor(20 * u - 10),
                                        dt);
        nx_ir_put(nx_tensor_data(t), dt, i, v);
    }
    return t;
}

typedef enum mode { MODE_INTERP, MODE_JIT, MODE_FAST } mode;
static mode run_mode = MODE_INTERP;

/* Tolerance of float outputs in JIT modes, in units of eps times the output's largest |value|. */
#define TOL_ULPS 64.0

static double max_abs(const nx_tensor *t)
{
    double m = 0;
    for (int64_t i = 0; i < nx_tensor_numel(t); i++) {
        double v = fabs(nx_ir_get(nx_tensor_data(t), t->dtype, i).f);
        m = isfinite(v) && v > m ? v : m;
    }
    return m;
}

/* Bitwise equality, NaNs of any payload equal; float outputs within the mode's tolerance unless
 * exact is asked for. */
static void assert_same(const nx_tensor *a, const nx_tensor *b, const char *what, bool exact)
{
    double tol = 0;
    if (run_mode != MODE_INTERP && nx_ir_is_float(b->dtype) && !exact) {
        double eps = b->dtype == NX_DTYPE_F32 ? 0x1p-23 : 0x1p-52;
        double scale = max_abs(b);
        tol = TOL_ULPS * eps * (scale > 1 ? scale : 1);
    }
    assert_int_equal(a->dtype, b->dtype);
    assert_int_equal(a->ndim, b->ndim);
    assert_memory_equal(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape);
    for (int64_t i = 0; i < nx_tensor_numel(a); i++) {
        nx_ir_val x = nx_ir_get(nx_tensor_data(a), a->dtype, i);
        nx_ir_val y = nx_ir_get(nx_tensor_data(b), b->dtype, i);
        bool same = nx_ir_is_float(a->dtype) ? (x.f == y.f && signbit(x.f) == signbit(y.f)) ||
                                                   (isnan(x.f) && isnan(y.f)) ||
                                                   (tol > 0 && fabs(x.f - y.f) <= tol)
                                             : x.i == y.i;
        if (!same)
            fail_msg("%s: element %lld: plan gives %.17g/%lld, reference %.17g/%lld", what,
                     (long long)i, x.f, (long long)x.i, y.f, (long long)y.i);
    }
}

/* Runs outs of g on the reference interpreter and through the pipeline; compares. */
static nx_kplan *check_graph_ex(nx_ctx *ctx, nx_graph *g, int nout, const nx_node *outs,
                                nx_tensor **in, const char *what, bool exact)
{
    nx_program *ref = NULL;
    nx_compile_opts o = {NX_BACKEND_REF, nout, outs};
    assert_int_equal(nx_graph_compile(g, &o, &ref), NX_OK);
    nx_tensor *want[16] = {0}, *got[16] = {0};
    assert_true(nout <= 16);
    assert_int_equal(nx_program_run(ref, (const nx_tensor *const *)in, want), NX_OK);
    nx_kplan *plan = NULL;
    nx_status st = nx_pass_pipeline(ctx, &g->s, nout, outs, &plan);
    if (st != NX_OK)
        fail_msg("%s: pipeline: %s", what, nx_ctx_last_error(ctx));
    nx_x86_loop_fn fns[64] = {0};
    assert_true(plan->nkernels <= 64);
    if (run_mode != MODE_INTERP && nx_x86_plan_compile(ctx, plan, fns) != NX_OK)
        fail_msg("%s: compile: %s", what, nx_ctx_last_error(ctx));
    st = nx_x86_plan_run(ctx, plan, run_mode == MODE_INTERP ? NULL : fns,
                         (const nx_tensor *const *)in, got);
    if (st != NX_OK)
        fail_msg("%s: run: %s", what, nx_ctx_last_error(ctx));
    for (int i = 0; i < nout; i++) {
        assert_same(got[i], want[i], what, exact);
        nx_tensor_free(got[i]);
        nx_tensor_free(want[i]);
    }
    nx_program_free(ref);
    return plan;
}

static nx_kplan *check_graph(nx_ctx *ctx, nx_graph *g, int nout, const nx_node *outs,
                             nx_tensor **in, const char *what)
{
    return check_graph_ex(ctx, g, nout, outs, in, what, false);
}

typedef struct fixture {
    nx_test_alloc ta;
    nx_ctx *ctx;
    nx_graph *g;
    nx_tensor *in[8];
    int nin;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (run_mode == MODE_INTERP) {
        f->ctx = nx_test_ctx(&f->ta);
    } else {
        /* the environment decides reproducibility; the suite's cache directory is kept */
        nx_allocator a = nx_test_allocator(&f->ta);
        nx_ctx_opts o = {.allocator = &a, .cache_dir = getenv("NITRIX_CACHE_DIR")};
        assert_int_equal(nx_ctx_new(&o, &f->ctx), NX_OK);
    }
    assert_int_equal(nx_graph_new(f->ctx, &f->g), NX_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    for (int i = 0; i < f->nin; i++)
        nx_tensor_free(f->in[i]);
    nx_graph_free(f->g);
    nx_ctx_free(f->ctx);
    assert_int_equal(f->ta.live, 0);
    free(f);
    return 0;
}

static nx_node input(fixture *f, nx_dtype dt, int ndim, const int64_t *shape)
{
    f->in[f->nin++] = random_tensor(f->ctx, dt, ndim, shape);
    return nx_input(f->g, NULL, dt, ndim, shape);
}

static void run_case_ex(fixture *f, int nout, const nx_node *outs, const char *what, int kernels,
                        bool exact)
{
    nx_kplan *p = check_graph_ex(f->ctx, f->g, nout, outs, f->in, what, exact);
    if (kernels >= 0 && p->nkernels != kernels) {
        nx_kplan_print(p, stderr);
        fail_msg("%s: %d kernels; expected %d", what, p->nkernels, kernels);
    }
    nx_kplan_free(p);
}

static void run_case(fixture *f, int nout, const nx_node *outs, const char *what, int kernels)
{
    run_case_ex(f, nout, outs, what, kernels, false);
}

/* No transcendental functions: exact in every mode under canonical order (interp, jit); the fast
 * mode reassociates the sum, so only its max, min and movement outputs stay exact there. */
static void test_exact_float(void **state)
{
    fixture *f = *state;
    nx_graph *g = f->g;
    int64_t sa[2] = {7, 33}, sb[2] = {33, 19}, s3[3] = {5, 6, 7};
    nx_node a = input(f, NX_DTYPE_F32, 2, sa), b = input(f, NX_DTYPE_F32, 2, sb);
    nx_node x = input(f, NX_DTYPE_F64, 3, s3);
    int64_t lo[3] = {1, 9, 0}, hi[3] = {2, 0, 8};
    int perm[3] = {2, 0, 1}, a2[1] = {2};
    nx_node outs[7] = {
        nx_einsum(g, "ik,kj->ij", a, b, NX_MONOID_MAX, nx_add),
        nx_einsum(g, "ik,kj->ij", a, b, NX_MONOID_MIN, nx_sub),
        nx_permute(g, nx_pad(g, x, lo, hi, NX_PAD_REFLECT, 0), perm),
        nx_pad(g, nx_mul(g, x, x), lo, hi, NX_PAD_MIRROR, 0),
        nx_reduce(g, nx_div(g, x, nx_scalar(g, NX_DTYPE_F64, 3)), 1, a2, NX_MONOID_ARGMIN, false),
        nx_mod(g, x, nx_scalar(g, NX_DTYPE_F64, -1.5)),
        nx_einsum(g, "ik,kj->ij", a, b, NX_MONOID_SUM, nx_mul),
    };
    run_case_ex(f, run_mode == MODE_FAST ? 6 : 7, outs, "exact", -1, true);
    if (run_mode == MODE_FAST)
        run_case(f, 1, outs + 6, "reassociated sum", -1);
}

static void test_integers(void **state)
{
    fixture *f = *state;
    nx_graph *g = f->g;
    int64_t s[2] = {6, 10};
    nx_node outs[12];
    int n = 0;
    nx_dtype dts[4] = {NX_DTYPE_I8, NX_DTYPE_I32, NX_DTYPE_I64, NX_DTYPE_U8};
    for (int i = 0; i < 4; i++) {
        nx_node a = input(f, dts[i], 2, s), b = input(f, dts[i], 2, s);
        int ax[1] = {1};
        outs[n++] = nx_sub(g, nx_div(g, a, b), nx_mod(g, a, b));
        outs[n++] = nx_reduce(g, nx_mul(g, nx_maximum(g, a, b), nx_abs(g, a)), 1, ax,
                              i == 3 ? NX_MONOID_MAX : NX_MONOID_SUM, false);
        outs[n++] = nx_cast(g, nx_select(g, nx_lt(g, a, b), nx_neg(g, a), nx_sign(g, b)),
                            NX_DTYPE_F32);
    }
    run_case(f, n, outs, "integers", -1);
}

static void test_casts(void **state)
{
    fixture *f = *state;
    nx_graph *g = f->g;
    int64_t s[1] = {64};
    nx_node x = input(f, NX_DTYPE_F64, 1, s);
    nx_node big = nx_mul(g, x, nx_scalar(g, NX_DTYPE_F64, 1e9)); /* saturates narrow ints */
    nx_node outs[7] = {
        nx_cast(g, big, NX_DTYPE_I8),  nx_cast(g, big, NX_DTYPE_U8),
        nx_cast(g, big, NX_DTYPE_I32), nx_cast(g, nx_round(g, x), NX_DTYPE_I16),
        nx_cast(g, nx_floor(g, x), NX_DTYPE_BOOL),
        nx_cast(g, nx_cast(g, x, NX_DTYPE_F32), NX_DTYPE_F64),
        nx_isnan(g, nx_div(g, x, nx_floor(g, x))),
    };
    run_case(f, 7, outs, "casts", -1);
}

static void test_elementwise(void **state)
{
    fixture *f = *state;
    nx_graph *g = f->g;
    int64_t s34[2] = {3, 4}, s4[1] = {4};
    nx_node a = input(f, NX_DTYPE_F32, 2, s34), b = input(f, NX_DTYPE_F32, 1, s4);
    nx_node y = nx_add(g, nx_mul(g, a, b), nx_scalar(g, NX_DTYPE_F32, 0.5));
    y = nx_select(g, nx_gt(g, y, nx_scalar(g, NX_DTYPE_F32, 0)), nx_exp(g, y), nx_tanh(g, y));
    nx_node c = nx_cast(g, nx_mul(g, y, nx_scalar(g, NX_DTYPE_F32, 3)), NX_DTYPE_I32);
    nx_node outs[2] = {y, nx_mod(g, c, nx_scalar(g, NX_DTYPE_I32, -4))};
    run_case(f, 2, outs, "elementwise", 2);
}

static void test_movement(void **state)
{
    fixture *f = *state;
    nx_graph *g = f->g;
    int64_t s[2] = {5, 6};
    nx_node x = input(f, NX_DTYPE_F64, 2, s);
    int perm[2] = {1, 0};
    nx_node t = nx_permute(g, x, perm);
    int64_t st[2] = {1, 0}, sp[2] = {6, 5}, step[2] = {2, 2};
    nx_node sl = nx_slice(g, t, st, sp, step);
    int ax[1] = {1};
    nx_node rv = nx_reverse(g, sl, 1, ax);
    int64_t rs[1] = {-1};
    nx_node r = nx_reshape(g, rv, 1, rs);
    int64_t lo[2] = {3, 7}, hi[2] = {6, 2};
    nx_node outs[8];
    for (int m = 0; m < NX_PAD_MODE_COUNT; m++)
        outs[m] = nx_pad(g, x, lo, hi, (nx_pad_mode)m, -2.5);
    nx_node parts[3] = {x, nx_neg(g, x), nx_exp(g, x)};
    outs[5] = nx_concat(g, 3, parts, 0);
    outs[6] = r;
    int64_t bs[3] = {2, 5, 6};
    outs[7] = nx_broadcast(g, nx_sqrt(g, nx_abs(g, x)), 3, bs);
    run_case(f, 8, outs, "movement", 8);
}

static void test_window_gather(void **state)
{
    fixture *f = *state;
    nx_graph *g = f->g;
    int64_t s[2] = {9, 8}, si[1] = {7}, w[2] = {3, 2}, str[2] = {2, 1}, dil[2] = {1, 2};
    nx_node x = input(f, NX_DTYPE_F32, 2, s);
    nx_node idx = input(f, NX_DTYPE_I32, 1, si); /* values in [-10, 9]: clamped */
    nx_node win = nx_window(g, x, w, str, dil);
    int axes[2] = {2, 3};
    nx_node conv = nx_reduce(g, nx_mul(g, win, nx_scalar(g, NX_DTYPE_F32, 0.25)), 2, axes,
                             NX_MONOID_SUM, false);
    nx_node outs[2] = {conv, nx_gather(g, nx_sin(g, x), idx, 1)};
    run_case(f, 2, outs, "window+gather", 2);
}

static void test_reductions(void **state)
{
    fixture *f = *state;
    nx_graph *g = f->g;
    int64_t s[3] = {4, 7, 5};
    nx_node x = input(f, NX_DTYPE_F32, 3, s), xi = input(f, NX_DTYPE_I64, 3, s);
    int a01[2] = {0, 2}, a1[1] = {1};
    nx_node outs[7] = {
        nx_reduce(g, x, 2, a01, NX_MONOID_SUM, false),
        nx_reduce(g, x, 1, a1, NX_MONOID_ARGMAX, true),
        nx_reduce(g, x, 1, a1, NX_MONOID_LOGSUMEXP, false),
        nx_reduce(g, xi, 2, a01, NX_MONOID_PROD, true),
        nx_reduce(g, x, 0, NULL, NX_MONOID_MAX, false),
        nx_reduce(g, nx_iota(g, NX_DTYPE_I32, 3, s, 1), 1, a1, NX_MONOID_MIN, false),
        nx_softmax(g, x, 1),
    };
    run_case(f, 7, outs, "reductions", -1);
}

static void test_contractions(void **state)
{
    fixture *f = *state;
    nx_graph *g = f->g;
    int64_t sa[2] = {6, 9}, sb[2] = {9, 5};
    nx_node a = input(f, NX_DTYPE_F32, 2, sa), b = input(f, NX_DTYPE_F32, 2, sb);
    nx_node outs[3] = {
        nx_einsum(g, "ik,kj->ij", a, b, NX_MONOID_MAX, nx_add),
        nx_einsum(g, "ik,kj->ij", a, b, NX_MONOID_LOGSUMEXP, nx_add),
        nx_matmul(g, a, b),
    };
    run_case(f, 3, outs, "contractions", 3);
}

/* Puts NaN, -0 and +0 at a few places of a float input (tiles must fold them canonically). */
static void poison(nx_tensor *t)
{
    int64_t n = nx_tensor_numel(t);
    const double vals[4] = {NAN, -0.0, 0.0, -0.0};
    for (int q = 0; q < 4; q++) {
        int64_t i = (n / 5) * (q + 1) + q;
        nx_ir_put(nx_tensor_data(t), t->dtype, i % n, nx_ir_from_double(vals[q], t->dtype));
    }
}

/* Whether the CPU backend emits k as vector register tiles. */
static bool emits_tiles(const nx_kernel *k)
{
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(nx_x86_emit_text(k, "t", false, &text, &len), NX_OK);
    bool tiled = strstr(text, " x float>") || strstr(text, " x double>");
    nx_rt_free(k->ctx, text, len);
    return tiled;
}

/* Register-tiled contractions: shapes that leave partial row blocks, column panels, single
 * vectors and scalar columns, batch axes, f32 and f64, NaN and signed zeros in the data. Max and
 * min folds are exact; sums are exact in canonical order (each output still folds k in
 * ascending order). */
static void test_tiles(void **state)
{
    fixture *f = *state;
    nx_graph *g = f->g;
    int64_t sa[2] = {13, 70}, sb[2] = {70, 83}, da[2] = {9, 20}, db[2] = {20, 37};
    int64_t ba[3] = {3, 5, 6}, bb[3] = {3, 6, 17};
    nx_node a = input(f, NX_DTYPE_F32, 2, sa), b = input(f, NX_DTYPE_F32, 2, sb);
    poison(f->in[0]);
    poison(f->in[1]);
    nx_node x = input(f, NX_DTYPE_F64, 2, da), y = input(f, NX_DTYPE_F64, 2, db);
    poison(f->in[3]);
    nx_node p = input(f, NX_DTYPE_F32, 3, ba), q = input(f, NX_DTYPE_F32, 3, bb);
    int64_t n8[2] = {70, 8}, n6[2] = {20, 6}; /* narrow column axes: 8- and 4-lane vectors */
    nx_node b8 = input(f, NX_DTYPE_F32, 2, n8), y6 = input(f, NX_DTYPE_F64, 2, n6);
    nx_node outs[8] = {
        nx_einsum(g, "ik,kj->ij", a, b, NX_MONOID_MAX, nx_add),
        nx_einsum(g, "ik,kj->ij", a, b, NX_MONOID_MIN, nx_sub),
        nx_einsum(g, "ik,kj->ij", x, y, NX_MONOID_MAX, nx_mul),
        nx_einsum(g, "bik,bkj->bij", p, q, NX_MONOID_MIN, nx_add),
        nx_einsum(g, "ik,kj->ij", a, b, NX_MONOID_SUM, nx_mul),
        nx_einsum(g, "ik,kj->ij", x, y, NX_MONOID_SUM, nx_sub),
        nx_einsum(g, "ik,kj->ij", a, b8, NX_MONOID_MAX, nx_add),
        nx_einsum(g, "ik,kj->ij", x, y6, NX_MONOID_MIN, nx_add),
    };
    for (int i = 0; i < 8; i++) { /* one at a time: shared operands would be materialised */
        bool sum = i == 4 || i == 5;
        nx_kplan *plan =
            check_graph_ex(f->ctx, g, 1, outs + i, f->in, "tiles", !sum || run_mode != MODE_FAST);
        assert_int_equal(plan->nkernels, 1);
        if (!emits_tiles(plan->kernels[0]))
            fail_msg("tiles: contraction %d is not register-tiled", i);
        nx_kplan_free(plan);
    }
}

/* Log-sum-exp contractions as register tiles (online step in canonical order; two passes, max
 * then the sum of exp(x - max), when reassociation is allowed): full and partial tiles, f32 and
 * f64, with NaN, -inf and +inf in the data and a row that is all -inf (its result is -inf). The
 * log-sum-exp is within the tolerance of the mode (the exp and log are the inline library's). */
static void test_lse_tiles(void **state)
{
    fixture *f = *state;
    nx_graph *g = f->g;
    int64_t sa[2] = {11, 37}, sb[2] = {37, 40}, da[2] = {7, 20}, db[2] = {20, 13};
    nx_node a = input(f, NX_DTYPE_F32, 2, sa), b = input(f, NX_DTYPE_F32, 2, sb);
    nx_node x = input(f, NX_DTYPE_F64, 2, da), y = input(f, NX_DTYPE_F64, 2, db);
    float *pa = nx_tensor_data(f->in[0]);
    for (int k = 0; k < 37; k++)
        pa[3 * 37 + k] = -INFINITY; /* row 3: every term -inf */
    pa[5 * 37 + 2] = INFINITY;
    pa[6 * 37 + 9] = NAN;
    ((float *)nx_tensor_data(f->in[1]))[17 * 40 + 33] = -INFINITY;
    ((double *)nx_tensor_data(f->in[2]))[2 * 20 + 19] = NAN;
    ((double *)nx_tensor_data(f->in[3]))[4 * 13 + 1] = INFINITY;
    nx_node outs[2] = {
        nx_einsum(g, "ik,kj->ij", a, b, NX_MONOID_LOGSUMEXP, nx_add),
        nx_einsum(g, "ik,kj->ij", x, y, NX_MONOID_LOGSUMEXP, nx_sub),
    };
    for (int i = 0; i < 2; i++) {
        nx_kplan *plan = check_graph_ex(f->ctx, g, 1, outs + i, f->in, "lse tiles", false);
        assert_int_equal(plan->nkernels, 1);
        if (!emits_tiles(plan->kernels[0]))
            fail_msg("lse tiles: contraction %d is not register-tiled", i);
        nx_kplan_free(plan);
    }
}

static int count_divmod(const nx_kernel *k)
{
    int n = 0;
    for (int i = 0; i < k->ninst; i++)
        n += k->inst[i].op == NX_KOP_PRIM &&
             (k->inst[i].prim == NX_PRIM_DIV || k->inst[i].prim == NX_PRIM_MOD);
    return n;
}

/* Reshapes lower by axis groups (runs of axes whose extents multiply to the same number): only a
 * group that merges or splits axes divides, a matching axis or a unit axis passes its index
 * through, also where index ranges are too wide or unknown to the affine simplification (an axis
 * over 2^20, a reflect pad's selects: unravelling the whole linear index there left a mod and a div
 * per axis and element). */
static void test_reshape_groups(void **state)
{
    fixture *f = *state;
    static const struct {
        int nin, nout;
        int64_t in[5], out[5];
        int divmod;
        bool pad; /* the reshape's indices come from a reflect pad (selects: no range) */
    } cases[] = {
        {4, 3, {2, 3, 4, 5}, {6, 4, 5}, 2, false},       /* merge {2, 3}: one div, one mod */
        {3, 4, {6, 4, 5}, {2, 3, 4, 5}, 0, false},       /* split: affine */
        {4, 2, {1, 5, 1, 7}, {5, 7}, 0, false},          /* unit axes dropped */
        {2, 5, {5, 7}, {1, 5, 1, 7, 1}, 0, false},       /* and added */
        {2, 2, {4, 6}, {3, 8}, 2, false},                /* one group of both axes */
        {3, 3, {2, 3, 4}, {3, 2, 4}, 2, false},          /* {2, 3} | {3, 2}, then 4 passes */
        {1, 0, {1}, {0}, 0, false},                      /* to a scalar */
        {3, 2, {2, 1, 1048578}, {2, 1048578}, 0, false}, /* wider than the affine analysis */
        {3, 2, {4, 1, 6}, {4, 6}, 2, true},              /* the pad's two mods only */
        {2, 3, {4, 6}, {2, 2, 6}, 3, true},              /* the pad's three mods only */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        nx_graph *g = NULL;
        assert_int_equal(nx_graph_new(f->ctx, &g), NX_OK);
        nx_tensor *x = random_tensor(f->ctx, NX_DTYPE_F32, cases[c].nin, cases[c].in);
        nx_node in = nx_input(g, NULL, NX_DTYPE_F32, cases[c].nin, cases[c].in);
        nx_node y = nx_neg(g, nx_reshape(g, in, cases[c].nout, cases[c].out));
        int64_t lo[5] = {1, 2, 1, 0, 0}, hi[5] = {2, 1, 3, 0, 0};
        if (cases[c].pad)
            y = nx_pad(g, y, lo, hi, NX_PAD_REFLECT, 0);
        nx_kplan *p = check_graph_ex(f->ctx, g, 1, &y, &x, "reshape groups", true);
        assert_int_equal(p->nkernels, 1);
        if (count_divmod(p->kernels[0]) != cases[c].divmod) {
            nx_kplan_print(p, stderr);
            fail_msg("reshape case %zu: %d div/mod; expected %d", c,
                     count_divmod(p->kernels[0]), cases[c].divmod);
        }
        nx_kplan_free(p);
        nx_tensor_free(x);
        nx_graph_free(g);
    }
}

/* Folds over rows of at most 8 columns whose operand is a concat along the columns (the
 * pairwise gradient's shape): the row is written out column by column (one carry per column,
 * the parts' shared subexpression computed once per k). Sums still fold k in order, also with
 * reassociation allowed: the pure-arithmetic case is exact in every mode. */
static void test_short_rows(void **state)
{
    fixture *f = *state;
    nx_graph *g = f->g;
    int64_t sx[3] = {9, 23, 1}, sy[3] = {1, 23, 1};
    nx_node x = input(f, NX_DTYPE_F32, 3, sx), y = input(f, NX_DTYPE_F32, 3, sy);
    nx_node d = nx_sub(g, x, y);
    nx_node parts[3] = {nx_mul(g, d, y), nx_select(g, nx_gt(g, x, y), x, y), d};
    nx_node e = nx_exp(g, nx_neg(g, nx_mul(g, d, d)));
    nx_node eparts[4] = {nx_mul(g, e, x), nx_mul(g, e, y), e, nx_mul(g, e, d)};
    int ax[1] = {1};
    nx_node outs[2] = {
        nx_reduce(g, nx_concat(g, 3, parts, 2), 1, ax, NX_MONOID_SUM, false),
        nx_reduce(g, nx_concat(g, 4, eparts, 2), 1, ax, NX_MONOID_SUM, false),
    };
    for (int i = 0; i < 2; i++) {
        nx_kplan *plan = check_graph_ex(f->ctx, g, 1, outs + i, f->in, "short rows", i == 0);
        assert_int_equal(plan->nkernels, 1);
        nx_kplan_free(plan);
    }
}

/* 0-d reductions large enough to be split across threads (per-chunk partials combined in chunk
 * order). Max, min and integer sums are exact whatever the split; the float sums add small
 * integers, whose partial sums are exact in any order, so they are exact too: a lost, doubled or
 * misplaced chunk changes them. */
static void test_split_reductions(void **state)
{
    fixture *f = *state;
    nx_graph *g = f->g;
    int64_t s1[1] = {300007}, s2[2] = {613, 509};
    nx_node x = input(f, NX_DTYPE_F32, 1, s1), y = input(f, NX_DTYPE_F64, 2, s2);
    nx_node xi = input(f, NX_DTYPE_I32, 1, s1), z = input(f, NX_DTYPE_F32, 1, s1);
    poison(f->in[3]);
    nx_node xint = nx_floor(g, nx_mul(g, x, nx_scalar(g, NX_DTYPE_F32, 2)));
    nx_node yint = nx_floor(g, y);
    int a1[1] = {0}, a2[2] = {0, 1};
    nx_node outs[6] = {
        nx_reduce(g, x, 1, a1, NX_MONOID_MAX, false),
        nx_reduce(g, y, 2, a2, NX_MONOID_MIN, false),
        nx_reduce(g, xi, 1, a1, NX_MONOID_SUM, false),
        nx_reduce(g, z, 1, a1, NX_MONOID_MAX, false),
        nx_reduce(g, xint, 1, a1, NX_MONOID_SUM, false),
        nx_reduce(g, nx_mul(g, yint, yint), 2, a2, NX_MONOID_SUM, false),
    };
    run_case_ex(f, 6, outs, "split reductions", -1, true);
}

/* Empty values lower to kernels that never read them; a concat of empty pieces (found by the
 * graph fuzzer: "slice gave no value") included. */
static void test_empty_values(void **state)
{
    fixture *f = *state;
    nx_graph *g = f->g;
    int64_t s[2] = {2, 0}, lo[1] = {0}, hi[1] = {0}, st[1] = {1};
    nx_node x = input(f, NX_DTYPE_BOOL, 1, s + 1), y = input(f, NX_DTYPE_F32, 2, s);
    nx_node parts[2] = {x, x}, ys[2] = {y, y};
    int ax = 1;
    nx_node outs[3] = {
        nx_slice(g, nx_concat(g, 2, parts, 0), lo, hi, st),
        nx_add(g, nx_concat(g, 2, ys, 1), nx_concat(g, 2, ys, 1)),
        nx_reduce(g, nx_concat(g, 2, ys, 1), 1, &ax, NX_MONOID_SUM, false),
    };
    run_case(f, 3, outs, "empty values", -1);
}

/* y_i = sum_j exp(-sum_d (x_id - z_jd)^2): KeOps's Gaussian kernel sum, one kernel. */
static void test_nested(void **state)
{
    fixture *f = *state;
    nx_graph *g = f->g;
    int64_t sx[2] = {7, 3}, sz[2] = {11, 3}, ex[3] = {7, 1, 3}, ez[3] = {1, 11, 3};
    nx_node x = input(f, NX_DTYPE_F64, 2, sx), z = input(f, NX_DTYPE_F64, 2, sz);
    nx_node d = nx_sub(g, nx_reshape(g, x, 3, ex), nx_reshape(g, z, 3, ez));
    int ad[1] = {2}, aj[1] = {1};
    nx_node d2 = nx_reduce(g, nx_mul(g, d, d), 1, ad, NX_MONOID_SUM, false);
    nx_node y = nx_reduce(g, nx_exp(g, nx_neg(g, d2)), 1, aj, NX_MONOID_SUM, false);
    nx_kplan *p = check_graph(f->ctx, g, 1, &y, f->in, "nested");
    assert_int_equal(p->nkernels, 1);
    int reduces = 0;
    for (int i = 0; i < p->kernels[0]->ninst; i++)
        reduces += p->kernels[0]->inst[i].op == NX_KOP_REDUCE;
    assert_int_equal(reduces, 2);
    nx_kplan_free(p);
}

static void test_library(void **state)
{
    fixture *f = *state;
    nx_graph *g = f->g;
    int64_t s[2] = {4, 6}, si[1] = {5}, su[2] = {4, 5};
    nx_node x = input(f, NX_DTYPE_F32, 2, s), idx = input(f, NX_DTYPE_I64, 1, si);
    nx_node u = input(f, NX_DTYPE_F32, 2, su);
    nx_node e = nx_exp(g, x);
    nx_node outs[4] = {
        nx_sort(g, e, 1, false),
        nx_scan(g, nx_mul(g, e, e), 1, NX_MONOID_SUM, false),
        nx_scatter(g, x, nx_mod(g, idx, nx_scalar(g, NX_DTYPE_I64, 6)), nx_neg(g, u), 1,
                   NX_MONOID_MAX),
        nx_add(g, nx_argsort(g, x, 0, true), nx_scalar(g, NX_DTYPE_I64, 1)),
    };
    run_case(f, 4, outs, "library", -1);
}

/* The max-plus 512^3 contraction is one kernel and no buffer holds M*K*N elements. */
static void test_maxplus_plan(void **state)
{
    fixture *f = *state;
    nx_graph *g = f->g;
    int64_t s[2] = {512, 512};
    nx_node a = nx_input(g, "a", NX_DTYPE_F32, 2, s), b = nx_input(g, "b", NX_DTYPE_F32, 2, s);
    nx_node c = nx_einsum(g, "ik,kj->ij", a, b, NX_MONOID_MAX, nx_add);
    nx_kplan *p = NULL;
    assert_int_equal(nx_pass_pipeline(f->ctx, &g->s, 1, &c, &p), NX_OK);
    assert_int_equal(p->nkernels, 1);
    const nx_kernel *k = p->kernels[0];
    assert_int_equal(k->nloops, 3);
    for (int i = 0; i < k->nbufs; i++)
        assert_true(nx_ir_numel(k->bufs[i].ndim, k->bufs[i].shape) <= 512 * 512);
    for (int i = 0; i < p->nslots; i++)
        assert_true(nx_ir_numel(p->slots[i].ndim, p->slots[i].shape) <= 512 * 512);
    nx_kplan_free(p);
}

/* A value read by two kernels is computed by one kernel and loaded by both. */
static void test_shared_value(void **state)
{
    fixture *f = *state;
    nx_graph *g = f->g;
    int64_t s[2] = {8, 8};
    nx_node x = input(f, NX_DTYPE_F32, 2, s);
    nx_node shared = nx_log1p(g, nx_abs(g, x));
    int a0[1] = {0}, a1[1] = {1};
    nx_node outs[2] = {nx_reduce(g, shared, 1, a0, NX_MONOID_SUM, false),
                       nx_reduce(g, shared, 1, a1, NX_MONOID_MIN, false)};
    run_case(f, 2, outs, "shared", 3);
}

/* Index arithmetic read by two kernels (a coordinate and a border test built from an iota) is
 * recomputed in each rather than given a kernel and a buffer of its own: two kernels, not four. */
static void test_shared_index(void **state)
{
    fixture *f = *state;
    nx_graph *g = f->g;
    int64_t s[2] = {6, 10};
    nx_node x = input(f, NX_DTYPE_F32, 2, s);
    nx_node col = nx_mod(g, nx_iota(g, NX_DTYPE_I32, 2, s, 1), nx_scalar(g, NX_DTYPE_I32, 4));
    nx_node inside = nx_ne(g, col, nx_scalar(g, NX_DTYPE_I32, 0));
    nx_node masked = nx_select(g, inside, x, nx_neg(g, x));
    nx_node scaled = nx_mul(g, x, nx_cast(g, col, NX_DTYPE_F32));
    int a0[1] = {0}, a1[1] = {1};
    nx_node outs[2] = {nx_reduce(g, masked, 1, a0, NX_MONOID_SUM, false),
                       nx_reduce(g, nx_add(g, scaled, nx_cast(g, inside, NX_DTYPE_F32)), 1, a1,
                                 NX_MONOID_MAX, false)};
    run_case(f, 2, outs, "shared index", 2);
}

/* A value read in full by one node and through small slices by others (a line's end samples) is
 * computed inside its full reader, and each small slice by a small kernel of its own: no slot of
 * the value's size is written. A large slice, or two full readers, keep it materialised. */
static void slice_case(fixture *f, int64_t rows_taken, bool second_full, bool materialised)
{
    nx_graph *g = f->g;
    int64_t s[2] = {64, 40}, lo[2] = {0, 0}, hi[2] = {rows_taken, 40}, pad_lo[2] = {2, 0},
            pad_hi[2] = {3, 0};
    nx_node x = input(f, NX_DTYPE_F32, 2, s);
    nx_node v = nx_mul(g, nx_pad(g, x, pad_lo, pad_hi, NX_PAD_REFLECT, 0),
                       nx_scalar(g, NX_DTYPE_F32, 0.5));
    nx_node ends = nx_reduce(g, nx_slice(g, v, lo, hi, NULL), 1, (int[]){0}, NX_MONOID_SUM, false);
    nx_node out = nx_add(g, nx_neg(g, v), nx_broadcast(g, ends, 2, (int64_t[]){69, 40}));
    if (second_full)
        out = nx_add(g, out, nx_exp(g, v));
    nx_kplan *p = check_graph_ex(f->ctx, f->g, 1, &out, f->in, "small slice readers", false);
    int full = 0; /* temporaries of v's size */
    for (int i = 0; i < p->nslots; i++)
        full += p->slots[i].kind == NX_SLOT_TEMP && (int)i != p->outputs[0] &&
                nx_ir_numel(p->slots[i].ndim, p->slots[i].shape) == 69 * 40;
    if (full != (materialised ? 1 : 0)) {
        nx_kplan_print(p, stderr);
        fail_msg("small slice readers (%lld rows, %s): %d temporaries of v's size; expected %d",
                 (long long)rows_taken, second_full ? "two full readers" : "one full reader", full,
                 materialised ? 1 : 0);
    }
    nx_kplan_free(p);
}

static void test_slice_readers(void **state)
{
    fixture *f = *state;
    slice_case(f, 2, false, false);
}

static void test_slice_readers_large(void **state)
{
    fixture *f = *state;
    slice_case(f, 40, false, true);
}

static void test_slice_readers_two_full(void **state)
{
    fixture *f = *state;
    slice_case(f, 2, true, true);
}

/* Every allocation of fusion, lowering and the plan runner may fail: the failure is reported as
 * NX_ERR_NOMEM and nothing leaks (kernels run interpreted: LLVM's own memory is not the
 * context's). */
static nx_status sweep_body(nx_ctx *ctx, void *user)
{
    (void)user;
    nx_graph *g = NULL;
    nx_status st = nx_graph_new(ctx, &g);
    if (st != NX_OK)
        return st;
    int64_t s[2] = {4, 70};
    nx_node x = nx_input(g, "x", NX_DTYPE_F32, 2, s);
    int ax = 1;
    nx_node parts[2] = {x, nx_neg(g, x)};
    nx_node y = nx_reduce(g, nx_mul(g, nx_exp(g, x), nx_scalar(g, NX_DTYPE_F32, 2)), 1, &ax,
                          NX_MONOID_SUM, false);
    nx_node outs[3] = {y, nx_sort(g, nx_concat(g, 2, parts, 1), 1, false),
                       nx_reduce(g, x, 1, &ax, NX_MONOID_ARGMAX, false)};
    nx_tensor *in = NULL, *got[3] = {0};
    nx_kplan *plan = NULL;
    st = g->status;
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F32, 2, s, &in);
    if (st == NX_OK)
        st = nx_pass_pipeline(ctx, &g->s, 3, outs, &plan);
    if (st == NX_OK)
        st = nx_x86_plan_run(ctx, plan, NULL, (const nx_tensor *const *)&in, got);
    for (int i = 0; i < 3; i++)
        nx_tensor_free(got[i]);
    nx_kplan_free(plan);
    nx_tensor_free(in);
    nx_graph_free(g);
    return st;
}

/* Emitting LLVM text for a register-tiled contraction under every failing allocation: NOMEM,
 * never a kernel emitted without its tile tables (found by the bilateral sweep). */
static nx_status emit_sweep_body(nx_ctx *ctx, void *user)
{
    (void)user;
    nx_graph *g = NULL;
    nx_status st = nx_graph_new(ctx, &g);
    if (st != NX_OK)
        return st;
    int64_t s[2] = {8, 40};
    nx_node a = nx_input(g, "a", NX_DTYPE_F32, 2, s), b = nx_input(g, "b", NX_DTYPE_F32, 2, s);
    nx_node c = nx_einsum(g, "ik,jk->ij", a, nx_neg(g, b), NX_MONOID_MAX, nx_add);
    nx_node d = nx_einsum(g, "ik,kj->ij", nx_permute(g, a, (int[]){1, 0}), b, NX_MONOID_MAX,
                          nx_add);
    nx_kplan *plan = NULL;
    st = g->status;
    if (st == NX_OK)
        st = nx_pass_pipeline(ctx, &g->s, 1, &d, &plan);
    (void)c;
    for (int i = 0; st == NX_OK && i < plan->nkernels; i++) {
        char *text = NULL;
        size_t len = 0;
        st = nx_x86_emit_text(plan->kernels[i], "k", true, &text, &len);
        if (st == NX_OK)
            nx_rt_free(ctx, text, len);
    }
    nx_kplan_free(plan);
    nx_graph_free(g);
    return st;
}

static void test_emit_sweep(void **state)
{
    (void)state;
    if (run_mode != MODE_INTERP)
        skip();
    assert_true(nx_test_alloc_sweep(emit_sweep_body, NULL, 4000) > 10);
}

static void test_alloc_sweep(void **state)
{
    (void)state;
    if (run_mode != MODE_INTERP)
        skip();
    assert_true(nx_test_alloc_sweep(sweep_body, NULL, 2000) > 10);
}

int main(int argc, char **argv)
{
    setenv("NITRIX_NUM_THREADS", "3", 1); /* uneven chunks for the split reductions */
    if (argc > 1 && strcmp(argv[1], "jit") == 0) {
        run_mode = MODE_JIT;
        setenv("NITRIX_REPRODUCIBLE", "1", 1);
    } else if (argc > 1 && strcmp(argv[1], "fast") == 0) {
        run_mode = MODE_FAST;
        setenv("NITRIX_REPRODUCIBLE", "0", 1);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_exact_float, setup, teardown),
        cmocka_unit_test_setup_teardown(test_integers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_casts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_elementwise, setup, teardown),
        cmocka_unit_test_setup_teardown(test_movement, setup, teardown),
        cmocka_unit_test_setup_teardown(test_window_gather, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reductions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_split_reductions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_contractions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tiles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lse_tiles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reshape_groups, setup, teardown),
        cmocka_unit_test_setup_teardown(test_short_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nested, setup, teardown),
        cmocka_unit_test_setup_teardown(test_library, setup, teardown),
        cmocka_unit_test_setup_teardown(test_maxplus_plan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_value, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_index, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slice_readers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slice_readers_large, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slice_readers_two_full, setup, teardown),
        cmocka_unit_test(test_alloc_sweep),
        cmocka_unit_test(test_emit_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
