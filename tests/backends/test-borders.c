/* The border/interior split of padded loops (codegen/x86/borders.c): kernels whose innermost
 * loads go through a pad rule run [0, lo) and [hi, n) with the rule and [lo, hi) with the affine
 * index. Every case runs JIT-compiled in canonical fold order (NITRIX_REPRODUCIBLE=1) and must
 * equal the reference interpreter bit for bit: the split changes where values are computed,
 * never what they are. Cases: each pad mode, border widths 0..3 on each side, axis lengths from
 * 1 (shorter than the border) to 37, f32 and f64, as a copy (plain loop), a max of three taps
 * (several reads of one pad), a window sum (register tiles inside, rows on the borders) and a
 * window max of a select (the row strategy split), the split loop innermost of two axes or the
 * only one (split across threads). The interval chosen is checked against the pad's own. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/x86/emit.h"
#include "passes/fuse.h"
#include "testutil.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

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
    for (int64_t i = 0; i < nx_tensor_numel(t); i++)
        nx_ir_put(nx_tensor_data(t), dt, i, nx_ir_from_double(8 * next_unit() - 4, dt));
    return t;
}

/* Bitwise equality (NaNs of any payload equal, signed zeros distinct). */
static void assert_same(const nx_tensor *a, const nx_tensor *b, const char *what)
{
    assert_int_equal(a->dtype, b->dtype);
    assert_int_equal(nx_tensor_numel(a), nx_tensor_numel(b));
    for (int64_t i = 0; i < nx_tensor_numel(a); i++) {
        double x = nx_ir_get(nx_tensor_data(a), a->dtype, i).f;
        double y = nx_ir_get(nx_tensor_data(b), b->dtype, i).f;
        bool same = (x == y && signbit(x) == signbit(y)) || (isnan(x) && isnan(y));
        if (!same)
            fail_msg("%s: element %lld: jit %.17g, reference %.17g", what, (long long)i, x, y);
    }
}

typedef struct fixture {
    nx_test_alloc ta;
    nx_ctx *ctx;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    nx_allocator a = nx_test_allocator(&f->ta);
    nx_ctx_opts o = {.allocator = &a, .cache_dir = getenv("NITRIX_CACHE_DIR")};
    assert_int_equal(nx_ctx_new(&o, &f->ctx), NX_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    nx_ctx_free(f->ctx);
    assert_int_equal(f->ta.live, 0);
    free(f);
    return 0;
}

/* The split of the plan's last kernel (the output's). */
static nx_x86_borders borders_of(const nx_kplan *p)
{
    const nx_kernel *k = p->kernels[p->nkernels - 1];
    uint32_t *mask = calloc((size_t)k->ninst + 1, sizeof *mask);
    nx_kernel_loop_masks(k, mask);
    nx_x86_borders s;
    assert_int_equal(nx_x86_borders_find(k, mask, &s), NX_OK);
    free(mask);
    return s;
}

static bool emits_vectors(const nx_kernel *k)
{
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(nx_x86_emit_text(k, "t", false, &text, &len), NX_OK);
    bool v = strstr(text, " x float>") || strstr(text, " x double>");
    nx_rt_free(k->ctx, text, len);
    return v;
}

/* What a case expects of the split: the interior [lo, hi), or lo = -1 for none. */
typedef struct expect {
    int64_t lo, hi;
    bool tiles; /* the interior is register-tiled */
} expect;

/* Runs y (one output, one input x) through the reference and the JIT; checks the split. */
static void check(fixture *f, nx_graph *g, nx_node y, nx_tensor *x, expect ex, const char *what)
{
    nx_program *ref = NULL;
    nx_compile_opts o = {NX_BACKEND_REF, 1, &y};
    if (nx_graph_compile(g, &o, &ref) != NX_OK)
        fail_msg("%s: %s", what, nx_ctx_last_error(f->ctx));
    nx_tensor *want = NULL, *got = NULL;
    assert_int_equal(nx_program_run(ref, (const nx_tensor *const *)&x, &want), NX_OK);
    nx_kplan *plan = NULL;
    if (nx_pass_pipeline(f->ctx, &g->s, 1, &y, &plan) != NX_OK)
        fail_msg("%s: pipeline: %s", what, nx_ctx_last_error(f->ctx));
    nx_x86_loop_fn fns[8] = {0};
    assert_true(plan->nkernels <= 8);
    if (nx_x86_plan_compile(f->ctx, plan, fns) != NX_OK)
        fail_msg("%s: compile: %s", what, nx_ctx_last_error(f->ctx));
    if (nx_x86_plan_run(f->ctx, plan, fns, (const nx_tensor *const *)&x, &got) != NX_OK)
        fail_msg("%s: run: %s", what, nx_ctx_last_error(f->ctx));
    assert_same(got, want, what);
    nx_x86_borders s = borders_of(plan);
    if (ex.lo < 0 && s.loop >= 0)
        fail_msg("%s: split [%lld, %lld); expected none", what, (long long)s.lo, (long long)s.hi);
    if (ex.lo >= 0 && (s.loop < 0 || s.lo != ex.lo || s.hi != ex.hi))
        fail_msg("%s: split %d [%lld, %lld); expected [%lld, %lld)", what, s.loop, (long long)s.lo,
                 (long long)s.hi, (long long)ex.lo, (long long)ex.hi);
    if (ex.tiles && !emits_vectors(plan->kernels[plan->nkernels - 1]))
        fail_msg("%s: the interior is not register-tiled", what);
    nx_x86_borders_free(f->ctx, &s);
    nx_kplan_free(plan);
    nx_tensor_free(got);
    nx_tensor_free(want);
    nx_program_free(ref);
}

enum { OUT_COPY, OUT_TAPS, OUT_SUM, OUT_SELMAX, OUT_COUNT };

/* One case: x of shape [rows, n] (rows = 0: [n]) padded along its last axis by lo, hi (and the
 * first axis by 1, 2 when there is one), then read as out says. */
static void pad_case(fixture *f, nx_pad_mode mode, nx_dtype dt, int rows, int64_t n, int64_t lo,
                     int64_t hi, int out)
{
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(f->ctx, &g), NX_OK);
    int nd = rows ? 2 : 1;
    int64_t shape[2] = {rows, n}, plo[2] = {1, lo}, phi[2] = {2, hi};
    if (!rows)
        shape[0] = n, plo[0] = lo, phi[0] = hi;
    nx_tensor *x = random_tensor(f->ctx, dt, nd, shape);
    nx_node xp = nx_pad(g, nx_input(g, "x", dt, nd, shape), plo, phi, mode, -2.5);
    int64_t np = n + lo + hi, taps = out == OUT_COPY ? 1 : 3;
    if (np < taps) { /* no window fits */
        nx_tensor_free(x);
        nx_graph_free(g);
        return;
    }
    int64_t w[2] = {1, taps}, one[2] = {1, 1};
    if (!rows)
        w[0] = taps;
    nx_node y = xp;
    if (out == OUT_TAPS) {
        for (int t = 0; t < 3; t++) {
            int64_t start[2] = {0, t}, stop[2] = {rows + 3, np - 2 + t};
            if (!rows)
                start[0] = t, stop[0] = np - 2 + t;
            nx_node s = nx_slice(g, xp, start, stop, one);
            y = t ? nx_maximum(g, y, s) : s;
        }
    } else if (out != OUT_COPY) {
        nx_node win = nx_window(g, xp, w, one, one);
        int axes[2] = {nd, nd + 1};
        nx_node v = nx_mul(g, win, nx_scalar(g, dt, 0.25));
        if (out == OUT_SELMAX)
            v = nx_select(g, nx_gt(g, win, nx_scalar(g, dt, 0)), win, v);
        y = nx_reduce(g, v, nd, axes, out == OUT_SUM ? NX_MONOID_SUM : NX_MONOID_MAX, false);
    }
    assert_int_equal(nx_graph_status(g), NX_OK);
    /* the interior: every tap's j + t - lo inside [0, n) */
    expect ex = {lo, lo + n - (taps - 1), false};
    if (lo + hi == 0 || ex.hi - ex.lo < NX_X86_BORDERS_MIN)
        ex.lo = ex.hi = -1;
    ex.tiles = out == OUT_SUM && rows && ex.lo >= 0;
    char what[160];
    snprintf(what, sizeof what, "pad mode %d %s [%d, %lld] lo %lld hi %lld output %d", (int)mode,
             dt == NX_DTYPE_F32 ? "f32" : "f64", rows, (long long)n, (long long)lo, (long long)hi,
             out);
    check(f, g, y, x, ex, what);
    nx_tensor_free(x);
    nx_graph_free(g);
}

/* Every mode, widths 0..3 on each side, lengths 1..37 (1, 2 and 3 shorter than some borders). */
static void test_pad_modes(void **state)
{
    fixture *f = *state;
    static const int64_t lens[7] = {1, 2, 3, 9, 12, 20, 37};
    int c = 0;
    for (int m = 0; m < NX_PAD_MODE_COUNT; m++)
        for (int d = 0; d < 2; d++)
            for (int64_t lo = 0; lo <= 3; lo++)
                for (int64_t hi = 0; hi <= 3; hi++, c++) {
                    int64_t n = lens[c % 7];
                    if (n == 1 && m == NX_PAD_MIRROR)
                        n = 12; /* a mirror of one element is the constant index 0 */
                    pad_case(f, (nx_pad_mode)m, d ? NX_DTYPE_F64 : NX_DTYPE_F32, 4, n, lo, hi,
                             c % OUT_COUNT);
                }
}

/* Each output form with wide borders on long axes, and the 1-D form whose split loop is also
 * the one split across threads. */
static void test_outputs(void **state)
{
    fixture *f = *state;
    for (int out = 0; out < OUT_COUNT; out++) {
        pad_case(f, NX_PAD_REFLECT, NX_DTYPE_F32, 7, 45, 3, 2, out);
        pad_case(f, NX_PAD_CONSTANT, NX_DTYPE_F64, 5, 40, 1, 3, out);
        pad_case(f, NX_PAD_WRAP, NX_DTYPE_F32, 0, 1001, 3, 3, out);
        pad_case(f, NX_PAD_NEAREST, NX_DTYPE_F64, 0, 777, 2, 0, out);
        pad_case(f, NX_PAD_MIRROR, NX_DTYPE_F32, 3, 64, 0, 3, out);
    }
}

/* A concat along the innermost axis: its select and clamps resolve on the part holding the
 * middle of the axis. */
static void test_concat(void **state)
{
    fixture *f = *state;
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(f->ctx, &g), NX_OK);
    int64_t shape[2] = {3, 30};
    nx_tensor *x = random_tensor(f->ctx, NX_DTYPE_F32, 2, shape);
    nx_node in = nx_input(g, "x", NX_DTYPE_F32, 2, shape);
    int64_t s0[2] = {0, 0}, e0[2] = {3, 4}, s1[2] = {0, 4}, e1[2] = {3, 30}, one[2] = {1, 1};
    nx_node parts[3] = {nx_abs(g, nx_slice(g, in, s0, e0, one)), nx_slice(g, in, s1, e1, one),
                        nx_neg(g, nx_slice(g, in, s0, e0, one))};
    nx_node y = nx_concat(g, 3, parts, 1); /* [3, 34]: 4 | 26 | 4 */
    expect ex = {4, 30, false};
    check(f, g, y, x, ex, "concat");
    nx_tensor_free(x);
    nx_graph_free(g);
}

/* Emits kernels that split (a padded copy, the rows and the interior tiles of a window sum, a
 * padded log-sum-exp fold) under every failing allocation: each must fail with NX_ERR_NOMEM and
 * leak nothing (the split's scratch arrays and aliases included). */
static nx_status emit_sweep_body(nx_ctx *ctx, void *user)
{
    (void)user;
    nx_graph *g = NULL;
    nx_status st = nx_graph_new(ctx, &g);
    if (st != NX_OK)
        return st;
    int64_t s[2] = {6, 40}, lo[2] = {1, 2}, hi[2] = {2, 3}, w[2] = {1, 3}, one[2] = {1, 1};
    nx_node xp = nx_pad(g, nx_input(g, "x", NX_DTYPE_F32, 2, s), lo, hi, NX_PAD_REFLECT, 0);
    nx_node win = nx_window(g, xp, w, one, one);
    int axes[2] = {2, 3};
    nx_node outs[3] = {
        xp,
        nx_reduce(g, nx_mul(g, win, nx_scalar(g, NX_DTYPE_F32, 0.5)), 2, axes, NX_MONOID_SUM,
                  false),
        nx_reduce(g, win, 2, axes, NX_MONOID_LOGSUMEXP, false),
    };
    for (int o = 0; o < 3 && st == NX_OK; o++) {
        nx_kplan *plan = NULL;
        st = g->status;
        if (st == NX_OK)
            st = nx_pass_pipeline(ctx, &g->s, 1, &outs[o], &plan);
        for (int i = 0; st == NX_OK && i < plan->nkernels; i++) {
            char *text = NULL;
            size_t len = 0;
            st = nx_x86_emit_text(plan->kernels[i], "k", o == 2, &text, &len);
            if (st == NX_OK)
                nx_rt_free(ctx, text, len);
        }
        nx_kplan_free(plan);
    }
    nx_graph_free(g);
    return st;
}

static void test_emit_sweep(void **state)
{
    (void)state;
    assert_true(nx_test_alloc_sweep(emit_sweep_body, NULL, 4000) > 10);
}

int main(void)
{
    setenv("NITRIX_NUM_THREADS", "3", 1); /* uneven chunks of the 1-D cases */
    setenv("NITRIX_REPRODUCIBLE", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pad_modes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_outputs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concat, setup, teardown),
        cmocka_unit_test(test_emit_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
