/* The CPU backend's library routines (codegen/x86/lib-*.c) against the reference interpreter
 * (ir/prim-*.c), two independent implementations, compared bit for bit: scan under every monoid,
 * scan_linear under every broadcast layout, scan_iir of every order, sort and argsort with ties,
 * NaNs and signed zeros, scatter under every monoid with duplicate and out-of-range indices. Each
 * runs in f32, f64 and integer dtypes where the primitive takes them, along every axis, forward
 * and reverse, on shapes that reach each code path (column blocks wider than one block, lane
 * groups with a ragged tail, lines longer than one tile or one insertion run). The context runs
 * three threads, so chunks split lines unevenly.
 *
 * Where arithmetic meets two NaNs, which one's sign and payload the result carries is the
 * compiler's choice of operand order (C and IEEE 754 leave it open), so computed NaNs compare as
 * NaN; sorts only move values, and their NaNs must keep every bit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "testutil.h"

typedef struct fixture {
    nx_ctx *ctx;
    nx_graph *g;
    nx_tensor *in[16];
    int nin;
    int cases;
} fixture;

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t next_u64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static double unit(void)
{
    return (double)(next_u64() >> 11) / 9007199254740992.0;
}

/* Values with ties (a coarse grid), signed zeros, NaNs and infinities among ordinary ones. */
static double special(bool fl, double lo, double hi)
{
    double r = unit();
    if (!fl)
        return floor(lo + (hi - lo) * unit());
    if (r < 0.04)
        return NAN;
    if (r < 0.07)
        return -0.0;
    if (r < 0.10)
        return 0.0;
    if (r < 0.12)
        return r < 0.11 ? INFINITY : -INFINITY;
    if (r < 0.40)
        return lo + (hi - lo) * floor(unit() * 8) / 8; /* ties */
    return lo + (hi - lo) * unit();
}

enum { PLAIN, SPECIALS };

static nx_node input(fixture *f, nx_dtype dt, int ndim, const int64_t *shape, double lo, double hi,
                     int kind)
{
    nx_tensor *t = NULL;
    assert_true(f->nin < 16);
    assert_int_equal(nx_tensor_new(f->ctx, dt, ndim, shape, &t), NX_OK);
    bool fl = dt == NX_DTYPE_F32 || dt == NX_DTYPE_F64;
    for (int64_t i = 0; i < nx_tensor_numel(t); i++) {
        double v = kind == SPECIALS ? special(fl, lo, hi) : lo + (hi - lo) * unit();
        if (!fl)
            v = floor(v);
        if (dt == NX_DTYPE_BOOL)
            v = v > (lo + hi) / 2;
        nx_ir_put(nx_tensor_data(t), dt, i, nx_ir_from_double(v, dt));
    }
    f->in[f->nin++] = t;
    return nx_input(f->g, NULL, dt, ndim, shape);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    nx_ctx_opts o = {.num_threads = 3, .cache_dir = getenv("NITRIX_CACHE_DIR")};
    assert_int_equal(nx_ctx_new(&o, &f->ctx), NX_OK);
    assert_int_equal(nx_graph_new(f->ctx, &f->g), NX_OK);
    *state = f;
    return 0;
}

static void reset(fixture *f)
{
    for (int i = 0; i < f->nin; i++)
        nx_tensor_free(f->in[i]);
    f->nin = 0;
    nx_graph_free(f->g);
    assert_int_equal(nx_graph_new(f->ctx, &f->g), NX_OK);
}

static int teardown(void **state)
{
    fixture *f = *state;
    for (int i = 0; i < f->nin; i++)
        nx_tensor_free(f->in[i]);
    nx_graph_free(f->g);
    nx_ctx_free(f->ctx);
    free(f);
    return 0;
}

static nx_status run_on(fixture *f, nx_backend be, int nout, const nx_node *outs, nx_tensor **res)
{
    nx_program *p = NULL;
    nx_compile_opts o = {be, nout, outs};
    nx_status st = nx_graph_compile(f->g, &o, &p);
    if (st == NX_OK)
        st = nx_program_run(p, (const nx_tensor *const *)f->in, res);
    nx_program_free(p);
    return st;
}

static bool same(const char *a, const char *b, nx_dtype dt, bool nan_bits)
{
    size_t es = nx_dtype_size(dt);
    if (memcmp(a, b, es) == 0)
        return true;
    if (nan_bits || (dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64))
        return false;
    double x = nx_ir_get(a, dt, 0).f, y = nx_ir_get(b, dt, 0).f;
    return isnan(x) && isnan(y);
}

/* Runs outs on the interpreter and on the CPU backend; every output must agree bit for bit (NaNs
 * as said above). */
static void diff_ex(fixture *f, int nout, const nx_node *outs, const char *what, bool nan_bits)
{
    nx_tensor *want[16] = {0}, *got[16] = {0};
    assert_true(nout <= 16);
    for (int i = 0; i < nout; i++)
        if (!outs[i])
            fail_msg("%s: output %d was not built: %s", what, i, nx_ctx_last_error(f->ctx));
    if (run_on(f, NX_BACKEND_REF, nout, outs, want) != NX_OK)
        fail_msg("%s: interpreter: %s", what, nx_ctx_last_error(f->ctx));
    if (run_on(f, NX_BACKEND_CPU, nout, outs, got) != NX_OK)
        fail_msg("%s: cpu: %s", what, nx_ctx_last_error(f->ctx));
    for (int i = 0; i < nout; i++) {
        nx_dtype dt = nx_tensor_dtype(want[i]);
        size_t es = nx_dtype_size(dt);
        assert_int_equal(nx_tensor_dtype(got[i]), dt);
        assert_int_equal(nx_tensor_numel(got[i]), nx_tensor_numel(want[i]));
        const char *pg = nx_tensor_data(got[i]), *pw = nx_tensor_data(want[i]);
        for (int64_t e = 0; e < nx_tensor_numel(want[i]); e++)
            if (!same(pg + (size_t)e * es, pw + (size_t)e * es, dt, nan_bits))
                fail_msg("%s: output %d (%s, %lld elements) differs from the interpreter at "
                         "element %lld: cpu %.17g, reference %.17g",
                         what, i, nx_dtype_name(dt), (long long)nx_tensor_numel(want[i]),
                         (long long)e, nx_ir_get(pg, dt, e).f + (double)nx_ir_get(pg, dt, e).i,
                         nx_ir_get(pw, dt, e).f + (double)nx_ir_get(pw, dt, e).i);
        nx_tensor_free(got[i]);
        nx_tensor_free(want[i]);
    }
    f->cases += nout;
}

static void diff(fixture *f, int nout, const nx_node *outs, const char *what)
{
    diff_ex(f, nout, outs, what, false);
}

static void test_scan_monoids(void **state)
{
    fixture *f = *state;
    static const nx_dtype dts[] = {NX_DTYPE_F32, NX_DTYPE_F64, NX_DTYPE_I32, NX_DTYPE_I8,
                                   NX_DTYPE_U8,  NX_DTYPE_I64, NX_DTYPE_I16, NX_DTYPE_BOOL};
    static const int64_t shapes[][3] = {{4, 5, 37}, {3, 2, 1100}, {40, 1, 33}};
    for (size_t si = 0; si < 3; si++)
        for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
            nx_dtype dt = dts[di];
            bool fl = dt == NX_DTYPE_F32 || dt == NX_DTYPE_F64;
            nx_node x = input(f, dt, 3, shapes[si], fl ? -2 : -4, fl ? 2 : 5, SPECIALS);
            nx_node outs[16];
            int n = 0;
            for (int m = NX_MONOID_SUM; m <= NX_MONOID_LOGSUMEXP; m++) {
                if (dt == NX_DTYPE_BOOL && m != NX_MONOID_MAX && m != NX_MONOID_MIN)
                    continue;
                if (!fl && m == NX_MONOID_LOGSUMEXP)
                    continue;
                int axis = (int)((m + si) % 3);
                outs[n++] = nx_scan(f->g, x, axis, (nx_monoid)m, false);
                outs[n++] = nx_scan(f->g, x, (axis + 1) % 3 - 3, (nx_monoid)m, true);
            }
            char what[96];
            snprintf(what, sizeof what, "scan %s shape %zu", nx_dtype_name(dt), si);
            diff(f, n, outs, what);
            reset(f);
        }
}

static void test_scan_linear(void **state)
{
    fixture *f = *state;
    static const nx_dtype dts[] = {NX_DTYPE_F32, NX_DTYPE_F64};
    int64_t s[3] = {5, 7, 150}, wide[3] = {2, 3, 1030}, tall[2] = {37, 70};
    int64_t a_last[3] = {1, 1, 150}, a_mid[3] = {5, 7, 1}, a_row[2] = {7, 150};
    for (size_t di = 0; di < 2; di++) {
        nx_dtype dt = dts[di];
        nx_node b = input(f, dt, 3, s, -2, 2, SPECIALS);
        nx_node a = input(f, dt, 3, s, -1.1, 1.1, PLAIN);
        nx_node al = input(f, dt, 3, a_last, 0.5, 0.95, PLAIN);
        nx_node am = input(f, dt, 3, a_mid, -0.9, 0.9, PLAIN);
        nx_node ar = input(f, dt, 2, a_row, -0.9, 0.9, PLAIN);
        nx_node bw = input(f, dt, 3, wide, -2, 2, PLAIN);
        nx_node aw = input(f, dt, 3, wide, 0.2, 0.9, PLAIN);
        nx_node bt = input(f, dt, 2, tall, -2, 2, SPECIALS);
        nx_node at = input(f, dt, 2, tall, -0.99, 0.99, PLAIN);
        nx_node c = nx_scalar(f->g, dt, 0.625);
        nx_node outs[] = {
            nx_scan_linear(f->g, a, b, 0, false),  nx_scan_linear(f->g, a, b, 1, true),
            nx_scan_linear(f->g, a, b, 2, false),  nx_scan_linear(f->g, a, b, 2, true),
            nx_scan_linear(f->g, al, b, 0, true),  nx_scan_linear(f->g, al, b, 2, false),
            nx_scan_linear(f->g, am, b, 0, false), nx_scan_linear(f->g, am, b, 1, true),
            nx_scan_linear(f->g, am, b, 2, true),  nx_scan_linear(f->g, ar, b, 1, false),
            nx_scan_linear(f->g, c, b, 2, true),   nx_scan_linear(f->g, c, b, 0, false),
            nx_scan_linear(f->g, b, am, 1, false), nx_scan_linear(f->g, aw, bw, 1, true),
            nx_scan_linear(f->g, aw, bw, 2, false), nx_scan_linear(f->g, at, bt, 1, false),
        };
        char what[64];
        snprintf(what, sizeof what, "scan_linear %s", nx_dtype_name(dt));
        diff(f, (int)(sizeof outs / sizeof outs[0]), outs, what);
        reset(f);
    }
}

static void test_scan_iir(void **state)
{
    fixture *f = *state;
    static const nx_dtype dts[] = {NX_DTYPE_F32, NX_DTYPE_F64};
    static const double coef[4][4] = {
        {0.8}, {1.2, -0.4}, {1.6, -0.9, 0.2}, {0.5, 0.3, -0.2, 0.1}};
    int64_t s[3] = {6, 9, 131}, wide[3] = {2, 2, 1500}, tall[2] = {35, 200};
    for (size_t di = 0; di < 2; di++) {
        nx_dtype dt = dts[di];
        nx_node b = input(f, dt, 3, s, -3, 3, SPECIALS);
        nx_node bw = input(f, dt, 3, wide, -3, 3, PLAIN);
        nx_node bt = input(f, dt, 2, tall, -3, 3, PLAIN);
        nx_node outs[16];
        int n = 0;
        for (int order = 1; order <= 4; order++) {
            outs[n++] = nx_scan_iir(f->g, b, (order - 1) % 3, order % 2 == 0, order,
                                    coef[order - 1]);
            outs[n++] = nx_scan_iir(f->g, b, 2, order % 2 == 1, order, coef[order - 1]);
            outs[n++] = nx_scan_iir(f->g, order % 2 ? bw : bt, order % 2 ? 1 : 1, order > 2,
                                    order, coef[order - 1]);
        }
        outs[n++] = nx_scan_iir(f->g, bt, 0, true, 3, coef[2]);
        char what[64];
        snprintf(what, sizeof what, "scan_iir %s", nx_dtype_name(dt));
        diff(f, n, outs, what);
        reset(f);
    }
}

static void test_sort(void **state)
{
    fixture *f = *state;
    static const nx_dtype dts[] = {NX_DTYPE_F32, NX_DTYPE_F64, NX_DTYPE_I32, NX_DTYPE_I8,
                                   NX_DTYPE_U8,  NX_DTYPE_I64, NX_DTYPE_BOOL};
    static const int64_t shapes[][3] = {{3, 4, 27}, {2, 100, 3}, {5, 3, 250}};
    for (size_t si = 0; si < 3; si++)
        for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
            nx_dtype dt = dts[di];
            bool fl = dt == NX_DTYPE_F32 || dt == NX_DTYPE_F64;
            nx_node x = input(f, dt, 3, shapes[si], fl ? -2 : -3, fl ? 2 : 4, SPECIALS);
            nx_node outs[16];
            int n = 0;
            for (int axis = 0; axis < 3; axis++) {
                outs[n++] = nx_sort(f->g, x, axis, axis == 1);
                outs[n++] = nx_argsort(f->g, x, axis, axis != 1);
            }
            nx_node tv = NX_NONE, ti = NX_NONE;
            nx_topk(f->g, x, shapes[si][2] / 3, 2, true, &tv, &ti);
            outs[n++] = tv;
            outs[n++] = ti;
            nx_topk(f->g, x, 1, 1, false, &tv, &ti);
            outs[n++] = tv;
            outs[n++] = ti;
            char what[96];
            snprintf(what, sizeof what, "sort %s shape %zu", nx_dtype_name(dt), si);
            diff_ex(f, n, outs, what, true);
            reset(f);
        }
}

static void test_scatter(void **state)
{
    fixture *f = *state;
    static const nx_dtype dts[] = {NX_DTYPE_F32, NX_DTYPE_F64, NX_DTYPE_I32,
                                   NX_DTYPE_I8,  NX_DTYPE_U8,  NX_DTYPE_I64};
    static const nx_monoid ms[] = {NX_MONOID_SUM, NX_MONOID_MAX, NX_MONOID_MIN};
    int64_t xs[3] = {4, 9, 5}, wide[2] = {6, 5000};
    for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
        nx_dtype dt = dts[di];
        bool fl = dt == NX_DTYPE_F32 || dt == NX_DTYPE_F64;
        double lo = fl ? -3 : -100, hi = fl ? 3 : 120;
        nx_node x = input(f, dt, 3, xs, lo, hi, SPECIALS);
        /* indices along each axis with duplicates and some out of range (< 0 and >= n) */
        int64_t i0s[1] = {7}, i1s[2] = {3, 5}, i2s[1] = {12}, iws[1] = {9};
        nx_node i0 = input(f, NX_DTYPE_I64, 1, i0s, -2, 6, PLAIN);
        nx_node i1 = input(f, NX_DTYPE_I32, 2, i1s, -2, 11, PLAIN);
        nx_node i2 = input(f, NX_DTYPE_I64, 1, i2s, -1, 6, PLAIN);
        nx_node iw = input(f, NX_DTYPE_I32, 1, iws, -1, 7, PLAIN);
        int64_t u0s[3] = {7, 9, 5}, u1s[4] = {4, 3, 5, 5}, u2s[3] = {4, 9, 12}, uws[2] = {9, 5000};
        nx_node u0 = input(f, dt, 3, u0s, lo, hi, SPECIALS);
        nx_node u1 = input(f, dt, 4, u1s, lo, hi, SPECIALS);
        nx_node u2 = input(f, dt, 3, u2s, lo, hi, SPECIALS);
        nx_node xw = input(f, dt, 2, wide, lo, hi, PLAIN);
        nx_node uw = input(f, dt, 2, uws, lo, hi, PLAIN);
        nx_node outs[16];
        int n = 0;
        for (size_t mi = 0; mi < 3; mi++) {
            outs[n++] = nx_scatter(f->g, x, i0, u0, 0, ms[mi]);
            outs[n++] = nx_scatter(f->g, x, i1, u1, 1, ms[mi]);
            outs[n++] = nx_scatter(f->g, x, i2, u2, -1, ms[mi]);
            outs[n++] = nx_scatter(f->g, xw, iw, uw, 0, ms[mi]);
        }
        char what[64];
        snprintf(what, sizeof what, "scatter %s", nx_dtype_name(dt));
        diff(f, n, outs, what);
        reset(f);
    }
}

/* The cases must have run (an empty loop would pass). */
static void test_count(void **state)
{
    fixture *f = *state;
    print_message("%d library outputs matched the interpreter bit for bit\n", f->cases);
    assert_true(f->cases > 300);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan_monoids), cmocka_unit_test(test_scan_linear),
        cmocka_unit_test(test_scan_iir),     cmocka_unit_test(test_sort),
        cmocka_unit_test(test_scatter),      cmocka_unit_test(test_count),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
