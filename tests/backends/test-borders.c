/* The border/interior split of padded loops (codegen/x86/borders.c): kernels whose innermost
 * loads go through a pad rule run [0, lo) and [hi, n) with the rule and [lo, hi) with the affine
 * index. Every case runs JIT-compiled in canonical fold order (NITRIX_REPRODUCIBLE=1) and must
 * equal the reference interpreter bit for bit: the split changes where values are computed,
 * never what they are. Cases: each pad mode, border widths 0..3 on each side, axis lengths from
 * 1 (shorter than the border) to 37, f32 and f64, as a copy (plain loop), a max of three taps
 * (several reads of one pad), a window sum (register tiles inside, rows on the borders) and a
 * window max of a select (the row strategy split), the split loop innermost of two axes or the
 * only one (split across threads). The interval chosen is checked against the pad's own.
 *
 * The box of every space axis (codegen/borders.c, the CUDA emitter's split) is checked without
 * the JIT: a grey dilation of 3-D volumes for each border mode, windows of extents 1..4 and 7
 * (border widths 0..3), axes of length 1, 2 and 3 among them, and the Gaussian FIR's three
 * passes; the box per axis against the window's own interior, and every alias against an
 * evaluator of the kernel's index arithmetic written here, at every point of the box. Value
 * intervals (nx_kranges) are checked at every point too, and against closed forms. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/x86/emit.h"
#include "nitrix-ops.h"
#include "codegen/borders.h"
#include "program/program.h"
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

/* ---- the box of every space axis (codegen/borders.c, used by the CUDA emitter) --------------*/

/* Floor division and modulo with x / 0 = 0 (ir/prim-elementwise.c). */
static int64_t floordiv_i(int64_t a, int64_t b)
{
    if (b == 0)
        return 0;
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static int64_t fmod_i(int64_t a, int64_t b)
{
    return b == 0 ? 0 : a - floordiv_i(a, b) * b;
}

/* The integer and boolean values of k's instructions at one point of its loops (at[l]), with the
 * aliases in force where al is given; other values (floats, loads) are 0 and known[id] false. An
 * evaluator of its own, so the analysis is checked against the kernel's semantics, not itself. */
static void eval_point(const nx_kernel *k, const nx_kalias *al, const int64_t *at, int64_t *v,
                       bool *known)
{
    for (int id = 0; id < k->ninst; id++) {
        const nx_kinst *in = &k->inst[id];
        bool ok = in->dtype == NX_DTYPE_I64 || in->dtype == NX_DTYPE_BOOL;
        int64_t r = 0;
        if (al && al[id].kind == NX_KALIAS_CONST) {
            r = al[id].c;
        } else if (al && al[id].kind == NX_KALIAS_TO) {
            r = v[al[id].to] + al[id].c;
            ok = ok && known[al[id].to];
        } else if (in->op == NX_KOP_CONST) {
            r = in->i;
        } else if (in->op == NX_KOP_IDX) {
            r = at[in->a[0]];
        } else if (in->op == NX_KOP_PRIM && ok) {
            int ar = in->prim == NX_PRIM_SELECT ? 3 : nx_ir_prims[in->prim].arity;
            for (int j = 0; j < ar; j++)
                ok = ok && known[in->a[j]];
            int64_t x = v[in->a[0]], y = ar > 1 ? v[in->a[1]] : 0;
            switch (in->prim) {
            case NX_PRIM_ADD:
                r = x + y;
                break;
            case NX_PRIM_SUB:
                r = x - y;
                break;
            case NX_PRIM_MUL:
                r = x * y;
                break;
            case NX_PRIM_NEG:
                r = -x;
                break;
            case NX_PRIM_DIV:
                r = floordiv_i(x, y);
                break;
            case NX_PRIM_MOD:
                r = fmod_i(x, y);
                break;
            case NX_PRIM_MIN:
                r = y < x ? y : x;
                break;
            case NX_PRIM_MAX:
                r = y > x ? y : x;
                break;
            case NX_PRIM_SELECT:
                r = x ? y : v[in->a[2]];
                break;
            case NX_PRIM_LT:
                r = x < y;
                break;
            case NX_PRIM_LE:
                r = x <= y;
                break;
            case NX_PRIM_GT:
                r = x > y;
                break;
            case NX_PRIM_GE:
                r = x >= y;
                break;
            case NX_PRIM_EQ:
                r = x == y;
                break;
            case NX_PRIM_NE:
                r = x != y;
                break;
            case NX_PRIM_AND:
                r = x && y;
                break;
            case NX_PRIM_OR:
                r = x || y;
                break;
            case NX_PRIM_NOT:
                r = !x;
                break;
            default:
                ok = false;
                break;
            }
            /* comparisons of floats are not followed */
            if (ar > 1 && k->inst[in->a[0]].dtype != NX_DTYPE_I64 &&
                k->inst[in->a[0]].dtype != NX_DTYPE_BOOL)
                ok = false;
        } else {
            ok = false;
        }
        v[id] = r;
        known[id] = ok;
    }
}

/* Checks b against k at every point of its loops: inside the box every instruction the aliased
 * kernel reads has its alias's value (where both are integers); everywhere, every i64 value lies
 * in its nx_kranges interval. Returns the number of points checked inside the box. */
static int64_t check_box_values(const nx_kernel *k, const nx_kbox *b, const char *what)
{
    size_t n = (size_t)k->ninst + 1;
    int64_t *v = calloc(n, sizeof *v), *va = calloc(n, sizeof *va);
    int64_t *lo = calloc(n, sizeof *lo), *hi = calloc(n, sizeof *hi);
    bool *kn = calloc(n, 1), *kna = calloc(n, 1);
    uint8_t *live = calloc(n, 1);
    nx_kranges(k, lo, hi);
    if (b->alias)
        nx_kbox_live(k, b->alias, live);
    int64_t at[NX_KERNEL_MAX_LOOPS] = {0}, inside = 0;
    for (;;) {
        eval_point(k, NULL, at, v, kn);
        bool in_box = b->alias != NULL;
        for (int l = 0; l < k->ndim; l++)
            in_box = in_box && at[l] >= b->lo[l] && at[l] < b->hi[l];
        for (int id = 0; id < k->ninst; id++)
            if (kn[id] && k->inst[id].dtype == NX_DTYPE_I64 && (v[id] < lo[id] || v[id] > hi[id]))
                fail_msg("%s: %%%d = %lld outside its range [%lld, %lld]", what, id,
                         (long long)v[id], (long long)lo[id], (long long)hi[id]);
        if (in_box) {
            inside++;
            eval_point(k, b->alias, at, va, kna);
            for (int id = 0; id < k->ninst; id++)
                if (live[id] && kn[id] && kna[id] && v[id] != va[id])
                    fail_msg("%s: %%%d is %lld, its alias %lld, at point %lld %lld %lld", what, id,
                             (long long)v[id], (long long)va[id], (long long)at[0],
                             (long long)at[1], (long long)at[2]);
        }
        int l = k->nloops - 1;
        while (l >= 0 && ++at[l] == k->extent[l])
            at[l--] = 0;
        if (l < 0)
            break;
    }
    free(v), free(va), free(lo), free(hi), free(kn), free(kna), free(live);
    return inside;
}

static nx_kbox box_of(const nx_kernel *k)
{
    uint32_t *mask = calloc((size_t)k->ninst + 1, sizeof *mask);
    nx_kernel_loop_masks(k, mask);
    nx_kbox b;
    assert_int_equal(nx_kborders_box(k, mask, &b), NX_OK);
    free(mask);
    return b;
}

static const nx_morph_border BORDERS[5] = {NX_MORPH_BORDER_REFLECT, NX_MORPH_BORDER_CONSTANT,
                                           NX_MORPH_BORDER_NEAREST, NX_MORPH_BORDER_MIRROR,
                                           NX_MORPH_BORDER_WRAP};

/* A grey dilation of a [n0, n1, n2] volume by a flat box of extents size[] (border widths 0..3),
 * each border mode: the box must be, per axis, exactly where every tap is inside the volume
 * (taps i - (s - 1 - s / 2) .. i + s / 2) when that interval holds the axis's middle and the
 * axis has a rule, the whole axis otherwise; every alias must hold at every point of the box
 * and every i64 value lie in its range. */
static void dilate_box_case(nx_ctx *ctx, int border, const int64_t *shape, const int64_t *size)
{
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_morph_opts o = {.nspatial = 3, .border = BORDERS[border]};
    for (int a = 0; a < 3; a++)
        o.size[a] = size[a];
    nx_node y = nx_morph_node(g, NX_MORPH_DILATE, nx_input(g, "x", NX_DTYPE_F32, 3, shape), &o);
    char what[160];
    snprintf(what, sizeof what, "dilate border %d shape %lld %lld %lld size %lld %lld %lld", border,
             (long long)shape[0], (long long)shape[1], (long long)shape[2], (long long)size[0],
             (long long)size[1], (long long)size[2]);
    if (nx_graph_status(g) != NX_OK)
        fail_msg("%s: %s", what, nx_ctx_last_error(ctx));
    nx_kplan *plan = NULL;
    if (nx_pass_pipeline(ctx, &g->s, 1, &y, &plan) != NX_OK)
        fail_msg("%s: pipeline: %s", what, nx_ctx_last_error(ctx));
    const nx_kernel *k = plan->kernels[plan->nkernels - 1];
    assert_int_equal(k->ndim, 3);
    nx_kbox b = box_of(k);
    int64_t want_pts = 1;
    for (int a = 0; a < 3; a++) {
        int64_t n = shape[a], left = size[a] - 1 - size[a] / 2, right = size[a] / 2;
        int64_t lo = left, hi = n - right, mid = (n - 1) / 2;
        bool rule = size[a] > 1 && lo <= mid && mid < hi;
        if (!rule)
            lo = 0, hi = n;
        /* an axis shorter than its window: rules resolve around the middle; the values decide */
        if (size[a] > 1 && !rule && b.alias) {
            if (b.lo[a] > mid || b.hi[a] <= mid)
                fail_msg("%s: axis %d interior [%lld, %lld) misses the middle %lld", what, a,
                         (long long)b.lo[a], (long long)b.hi[a], (long long)mid);
            want_pts *= b.hi[a] - b.lo[a];
            continue;
        }
        if (b.alias && (b.lo[a] != lo || b.hi[a] != hi))
            fail_msg("%s: axis %d interior [%lld, %lld), expected [%lld, %lld)", what, a,
                     (long long)b.lo[a], (long long)b.hi[a], (long long)lo, (long long)hi);
        if (rule && !(b.axes >> a & 1))
            fail_msg("%s: axis %d has no interior; expected [%lld, %lld)", what, a, (long long)lo,
                     (long long)hi);
        want_pts *= hi - lo;
    }
    int64_t inside = check_box_values(k, &b, what);
    if (b.alias && inside != want_pts)
        fail_msg("%s: %lld points in the box, expected %lld", what, (long long)inside,
                 (long long)want_pts);
    nx_kbox_free(ctx, &b);
    nx_kplan_free(plan);
    nx_graph_free(g);
}

static void test_box_dilate(void **state)
{
    fixture *f = *state;
    static const int64_t shapes[][3] = {{9, 10, 11}, {1, 7, 12}, {2, 3, 16}, {5, 1, 3}, {13, 6, 2}};
    int c = 0;
    for (int m = 0; m < 5; m++)
        for (int s = 0; s < 5; s++, c++) {
            /* extents 1..4: border widths 0..2 on one side, 0..1 on the other; 7: 3 and 3 */
            int64_t size[3] = {1 + c % 4, 1 + (c / 4) % 4, s == 4 ? 7 : 1 + (c + 2) % 4};
            dilate_box_case(f->ctx, m, shapes[s], size);
        }
}

/* The Gaussian FIR's passes fold 2r + 1 taps over a reduction loop: the box of the pass along
 * axis a is [r, n - r) on that axis only; every i64 value of every kernel fits int32. */
static void test_box_gaussian(void **state)
{
    fixture *f = *state;
    static const int modes[3] = {NX_GAUSSIAN_REFLECT, NX_GAUSSIAN_CONSTANT, NX_GAUSSIAN_WRAP};
    for (int m = 0; m < 3; m++) {
        nx_graph *g = NULL;
        assert_int_equal(nx_graph_new(f->ctx, &g), NX_OK);
        int64_t shape[3] = {20, 18, 19};
        nx_gaussian_opts o = {
            .nsigma = 1, .sigma = {1.0}, .driver = "fir", .mode = (nx_gaussian_mode)modes[m]};
        nx_node y = nx_gaussian_node(g, nx_input(g, "x", NX_DTYPE_F32, 3, shape), NX_NONE, &o);
        nx_kplan *plan = NULL;
        if (nx_pass_pipeline(f->ctx, &g->s, 1, &y, &plan) != NX_OK)
            fail_msg("gaussian: %s", nx_ctx_last_error(f->ctx));
        int passes = 0;
        for (int i = 0; i < plan->nkernels; i++) {
            const nx_kernel *k = plan->kernels[i];
            if (k->kind != NX_KERNEL_LOOP || k->ndim != 3)
                continue;
            nx_kbox b = box_of(k);
            char what[96];
            snprintf(what, sizeof what, "gaussian mode %d kernel %d", modes[m], i);
            check_box_values(k, &b, what);
            int64_t *lo = calloc((size_t)k->ninst + 1, sizeof *lo);
            int64_t *hi = calloc((size_t)k->ninst + 1, sizeof *hi);
            nx_kranges(k, lo, hi);
            for (int id = 0; id < k->ninst; id++)
                if (k->inst[id].op == NX_KOP_LOAD &&
                    (lo[k->inst[id].a[1]] < 0 || hi[k->inst[id].a[1]] > INT32_MAX))
                    fail_msg("%s: load %%%d offset range [%lld, %lld]", what, id,
                             (long long)lo[k->inst[id].a[1]], (long long)hi[k->inst[id].a[1]]);
            free(lo), free(hi);
            int nsplit = 0, a = -1;
            for (int l = 0; l < 3; l++)
                if (b.alias && b.hi[l] - b.lo[l] < shape[l])
                    nsplit++, a = l;
            if (nsplit == 1) { /* one pass: radius 4 (truncate 4, sigma 1) on its axis */
                if (b.lo[a] != 4 || b.hi[a] != shape[a] - 4)
                    fail_msg("%s: axis %d interior [%lld, %lld), expected [4, %lld)", what, a,
                             (long long)b.lo[a], (long long)b.hi[a], (long long)shape[a] - 4);
                passes++;
            }
            nx_kbox_free(f->ctx, &b);
        }
        assert_int_equal(passes, 3);
        nx_kplan_free(plan);
        nx_graph_free(g);
    }
}

/* nx_kranges on hand-built index arithmetic: closed forms of each rule. */
static void test_ranges(void **state)
{
    fixture *f = *state;
    nx_kernel *k = NULL;
    assert_int_equal(nx_kernel_new(f->ctx, NX_KERNEL_LOOP, "ranges", &k), NX_OK);
    int64_t shape[2] = {7, 300};
    nx_kernel_buffer(k, NX_KBUF_OUT, NX_DTYPE_I64, 2, shape, 0);
    nx_kernel_space(k, 2, shape);
    int32_t i = nx_kernel_idx(k, 0), j = nx_kernel_idx(k, 1);
    int32_t c3 = nx_kernel_const_i(k, NX_DTYPE_I64, -3);
    int32_t c10 = nx_kernel_const_i(k, NX_DTYPE_I64, 10);
    int32_t s = nx_kernel_prim(k, NX_PRIM_SUB, NX_DTYPE_I64, j, c3, -1);   /* [3, 302] */
    int32_t md = nx_kernel_prim(k, NX_PRIM_MOD, NX_DTYPE_I64, s, c10, -1); /* [0, 9] */
    int32_t dv = nx_kernel_prim(k, NX_PRIM_DIV, NX_DTYPE_I64, s, c3, -1);  /* [-101, -1] */
    int32_t ml = nx_kernel_prim(k, NX_PRIM_MUL, NX_DTYPE_I64, i, dv, -1);  /* [-606, 0] */
    int32_t mx = nx_kernel_prim(k, NX_PRIM_MAX, NX_DTYPE_I64, ml, c3, -1); /* [-3, 0] */
    int32_t big = nx_kernel_const_i(k, NX_DTYPE_I64, (int64_t)1 << 40);
    int32_t wide = nx_kernel_prim(k, NX_PRIM_MUL, NX_DTYPE_I64, j, big, -1); /* [0, 299 2^40] */
    int32_t lt = nx_kernel_prim(k, NX_PRIM_LT, NX_DTYPE_BOOL, i, c10, -1);
    int32_t sel = nx_kernel_prim(k, NX_PRIM_SELECT, NX_DTYPE_I64, lt, md, mx); /* [-3, 9] */
    int32_t sum = nx_kernel_prim(k, NX_PRIM_ADD, NX_DTYPE_I64, sel, wide, -1);
    nx_kernel_store(k, 0, sum);
    int64_t lo[16], hi[16];
    assert_true(k->ninst <= 16);
    nx_kranges(k, lo, hi);
    const struct {
        int32_t id;
        int64_t lo, hi;
    } want[] = {{i, 0, 6},      {j, 0, 299},
                {s, 3, 302},    {md, 0, 9},
                {dv, -101, -1}, {ml, -606, 0},
                {mx, -3, 0},    {wide, 0, 299 * ((int64_t)1 << 40)},
                {sel, -3, 9},   {sum, -3, 9 + 299 * ((int64_t)1 << 40)}};
    for (size_t w = 0; w < sizeof want / sizeof want[0]; w++)
        if (lo[want[w].id] != want[w].lo || hi[want[w].id] != want[w].hi)
            fail_msg("%%%d: [%lld, %lld], expected [%lld, %lld]", want[w].id,
                     (long long)lo[want[w].id], (long long)hi[want[w].id], (long long)want[w].lo,
                     (long long)want[w].hi);
    nx_kernel_free(k);
}

/* The box under every failing allocation: NX_ERR_NOMEM, nothing leaked. */
static nx_status box_sweep_body(nx_ctx *ctx, void *user)
{
    (void)user;
    nx_graph *g = NULL;
    nx_status st = nx_graph_new(ctx, &g);
    if (st != NX_OK)
        return st;
    int64_t shape[3] = {6, 7, 8};
    nx_node y = nx_morph_node(g, NX_MORPH_DILATE, nx_input(g, "x", NX_DTYPE_F32, 3, shape), NULL);
    nx_kplan *plan = NULL;
    st = nx_graph_status(g);
    if (st == NX_OK)
        st = nx_pass_pipeline(ctx, &g->s, 1, &y, &plan);
    if (st == NX_OK) {
        const nx_kernel *k = plan->kernels[plan->nkernels - 1];
        uint32_t *mask = nx_rt_calloc(ctx, (size_t)k->ninst + 1, sizeof *mask);
        nx_kbox b;
        st = mask ? NX_OK : NX_ERR_NOMEM;
        if (st == NX_OK) {
            nx_kernel_loop_masks(k, mask);
            st = nx_kborders_box(k, mask, &b);
        }
        if (st == NX_OK)
            nx_kbox_free(ctx, &b);
        nx_rt_free(ctx, mask, ((size_t)k->ninst + 1) * sizeof *mask);
    }
    nx_kplan_free(plan);
    nx_graph_free(g);
    return st;
}

static void test_box_sweep(void **state)
{
    (void)state;
    assert_true(nx_test_alloc_sweep(box_sweep_body, NULL, 4000) > 5);
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
        cmocka_unit_test_setup_teardown(test_box_dilate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_box_gaussian, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ranges, setup, teardown),
        cmocka_unit_test(test_box_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
