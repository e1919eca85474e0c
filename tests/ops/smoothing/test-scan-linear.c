/* scan_linear (ir/prim-scan.c), the routine the recursive Gaussian runs on the CPU backend, against
 * a direct sequential loop per line (y = a * y rounded, then + b rounded, from y = 0): bit for bit,
 * on the cpu and ref backends, with 1, 2 and 3 threads, in f32 and f64. The shapes reach every
 * piece of the partition: lines along the last axis in groups of 16 with a partial group and
 * lengths past one 64-step tile, column blocks of 1024 with a partial block, a trailing unit axis,
 * a scalar a, an a broadcast along the line or across lines, a partial broadcast that takes the
 * generic walk, reverse scans, and an infinite a at a line's first step (a * 0 is NaN there).
 *
 * scan_iir (the same file's constant-coefficient recursion of order 1..4, which the recursive
 * Gaussian runs on) against its own sequential loop per line: the coefficients rounded once to the
 * dtype, acc = b then acc + c_j y_{t-j} term by term from zero states, bit for bit on the same
 * shapes; its builder's errors; its allocation failures. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nitrix-graph.h"
#include "nitrix.h"
#include "testutil.h"

typedef struct sl_case {
    int nd;
    int64_t shape[3];  /* of b and y */
    int64_t ashape[3]; /* a's shape, broadcast to shape; ashape[0] == 0: a is 0-d */
    int axis;
} sl_case;

static const sl_case cases[] = {
    {2, {37, 45}, {37, 45}, 1},          /* lines along the last axis: 2 groups + 5 */
    {2, {37, 45}, {37, 45}, 0},          /* column block narrower than 1024 */
    {3, {3, 20, 1100}, {3, 20, 1100}, 1}, /* 2 column blocks, the second partial */
    {3, {3, 7, 150}, {3, 7, 150}, 2},    /* 21 lines of 150: 3 tiles, the last partial */
    {3, {3, 7, 150}, {0}, 2},            /* scalar a */
    {3, {3, 7, 150}, {0}, 0},
    {3, {3, 7, 150}, {1, 1, 150}, 2},    /* a along the line, shared by every line */
    {3, {3, 7, 150}, {3, 7, 1}, 2},      /* a per line, constant along it */
    {3, {5, 4, 1}, {5, 4, 1}, 1},        /* a trailing unit axis: lines of 4 */
    {3, {6, 5, 4}, {1, 5, 1}, 0},        /* a over the axis only: inner block broadcast */
    {3, {6, 5, 4}, {6, 1, 4}, 1},        /* partial inner broadcast: the generic walk */
    {1, {300}, {300}, 0},                /* one line */
};

static int64_t numel(int nd, const int64_t *s)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= s[i];
    return n;
}

/* Deterministic values in [lo, lo + span). */
static void fill(double *v, int64_t n, uint32_t seed, double lo, double span)
{
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = lo + span * (double)(seed >> 8) / 16777216.0;
    }
}

/* Element offset of multi-index idx in a broadcast to shape (C order over ashape). */
static int64_t a_offset(const sl_case *c, const int64_t *idx)
{
    if (c->ashape[0] == 0)
        return 0;
    int64_t off = 0;
    for (int k = 0; k < c->nd; k++)
        off = off * c->ashape[k] + (c->ashape[k] == 1 ? 0 : idx[k]);
    return off;
}

/* The oracle: every line walked on its own, in the dtype's arithmetic. */
#define ORACLE(T)                                                                                  \
    static void oracle_##T(const sl_case *c, bool rev, const T *a, const T *b, T *y)               \
    {                                                                                              \
        int64_t n = numel(c->nd, c->shape), len = c->shape[c->axis];                              \
        for (int64_t e = 0; e < n; e++) {                                                          \
            int64_t idx[3] = {0}, r = e;                                                           \
            for (int k = c->nd - 1; k >= 0; k--) {                                                 \
                idx[k] = r % c->shape[k];                                                          \
                r /= c->shape[k];                                                                  \
            }                                                                                      \
            if (idx[c->axis] != 0)                                                                 \
                continue;                                                                          \
            T acc = 0;                                                                             \
            for (int64_t s = 0; s < len; s++) {                                                    \
                idx[c->axis] = rev ? len - 1 - s : s;                                              \
                int64_t off = 0;                                                                   \
                for (int k = 0; k < c->nd; k++)                                                    \
                    off = off * c->shape[k] + idx[k];                                              \
                T p = a[a_offset(c, idx)] * acc;                                                   \
                acc = p + b[off];                                                                  \
                y[off] = acc;                                                                      \
            }                                                                                      \
        }                                                                                          \
    }
ORACLE(float)
ORACLE(double)

static nx_tensor *from_doubles(nx_ctx *ctx, nx_dtype dt, int nd, const int64_t *shape,
                               const double *v)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, dt, nd, shape, &t), NX_OK);
    int64_t n = numel(nd, shape);
    for (int64_t i = 0; i < n; i++) {
        if (dt == NX_DTYPE_F32)
            ((float *)nx_tensor_data(t))[i] = (float)v[i];
        else
            ((double *)nx_tensor_data(t))[i] = v[i];
    }
    return t;
}

static void run_case(nx_ctx *ctx, const sl_case *c, nx_dtype dt, bool rev, nx_backend be)
{
    int and_ = c->ashape[0] ? c->nd : 0;
    int64_t n = numel(c->nd, c->shape), na = numel(and_, c->ashape);
    double *av = malloc((size_t)na * sizeof(double)), *bv = malloc((size_t)n * sizeof(double));
    assert_non_null(av);
    assert_non_null(bv);
    fill(av, na, 7u + (uint32_t)c->axis, -1.05, 2.0);
    fill(bv, n, 11u, -4.0, 8.0);
    if (na == n) /* only the line through element 0 meets inf (inf * 0 on its forward first step) */
        av[0] = INFINITY;
    nx_tensor *a = from_doubles(ctx, dt, and_, c->ashape, av);
    nx_tensor *b = from_doubles(ctx, dt, c->nd, c->shape, bv);
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node an = nx_input(g, "a", dt, and_, c->ashape), bn = nx_input(g, "b", dt, c->nd, c->shape);
    nx_node y = nx_scan_linear(g, an, bn, c->axis, rev);
    nx_compile_opts co = {.backend = be, .n_outputs = 1, .outputs = &y};
    nx_program *p = NULL;
    if (nx_graph_compile(g, &co, &p) != NX_OK)
        fail_msg("compile: %s", nx_ctx_last_error(ctx));
    nx_tensor *got = NULL;
    if (nx_program_run(p, (const nx_tensor *const[]){a, b}, &got) != NX_OK)
        fail_msg("run: %s", nx_ctx_last_error(ctx));
    size_t es = dt == NX_DTYPE_F32 ? 4 : 8;
    void *want = malloc((size_t)n * es);
    assert_non_null(want);
    if (dt == NX_DTYPE_F32)
        oracle_float(c, rev, nx_tensor_data(a), nx_tensor_data(b), want);
    else
        oracle_double(c, rev, nx_tensor_data(a), nx_tensor_data(b), want);
    /* bit for bit: NaN payloads from inf * 0 are the same operation's */
    if (memcmp(nx_tensor_data(got), want, (size_t)n * es) != 0) {
        for (int64_t i = 0; i < n; i++) {
            double gv = dt == NX_DTYPE_F32 ? ((float *)nx_tensor_data(got))[i]
                                           : ((double *)nx_tensor_data(got))[i];
            double wv = dt == NX_DTYPE_F32 ? ((float *)want)[i] : ((double *)want)[i];
            if (memcmp((char *)nx_tensor_data(got) + (size_t)i * es, (char *)want + (size_t)i * es,
                       es) != 0)
                fail_msg("shape %lldx%lldx%lld axis %d rev %d %s [%s, %d threads]: element %lld "
                         "is %.17g; the sequential loop gives %.17g",
                         (long long)c->shape[0], (long long)c->shape[1],
                         (long long)(c->nd > 2 ? c->shape[2] : 1), c->axis, rev,
                         nx_dtype_name(dt), nx_backend_name(be), nx_ctx_num_threads(ctx),
                         (long long)i, gv, wv);
        }
    }
    free(want);
    nx_tensor_free(got);
    nx_program_free(p);
    nx_graph_free(g);
    nx_tensor_free(a);
    nx_tensor_free(b);
    free(av);
    free(bv);
}

static nx_ctx *ctx_threads(nx_test_alloc *ta, int threads)
{
    nx_allocator al = nx_test_allocator(ta);
    nx_ctx_opts o = {.allocator = &al, .ignore_env = true, .num_threads = threads,
                     .cache_dir = getenv("NITRIX_CACHE_DIR")};
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(&o, &ctx) != NX_OK)
        fail_msg("nx_ctx_new: %s", nx_ctx_last_error(NULL));
    return ctx;
}

static void test_against_loop(void **state)
{
    (void)state;
    static const nx_backend bes[] = {NX_BACKEND_CPU, NX_BACKEND_REF};
    for (int threads = 1; threads <= 3; threads++) {
        nx_test_alloc ta = {0};
        nx_ctx *ctx = ctx_threads(&ta, threads);
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
            for (int rev = 0; rev < 2; rev++)
                for (int be = 0; be < 2; be++) {
                    run_case(ctx, &cases[i], NX_DTYPE_F32, rev, bes[be]);
                    run_case(ctx, &cases[i], NX_DTYPE_F64, rev, bes[be]);
                }
        nx_ctx_free(ctx);
        assert_int_equal(ta.live, 0);
    }
}

/* The pool's allocations fail cleanly: every failure point returns a status and leaks nothing.
 * Both shapes split into two chunks where the context has two threads (lines along the last axis;
 * two column blocks). The ref backend, as the Gaussian sweeps: the JIT's own allocations are not
 * the context's. */
static nx_status sweep_scan(nx_ctx *ctx, int axis, int64_t n0, int64_t n1)
{
    int64_t shape[2] = {n0, n1};
    nx_graph *g = NULL;
    nx_status st = nx_graph_new(ctx, &g);
    if (st != NX_OK)
        return st;
    nx_node b = nx_input(g, "b", NX_DTYPE_F32, 2, shape);
    nx_node y = nx_scan_linear(g, nx_scalar(g, NX_DTYPE_F32, 0.5), b, axis, false);
    nx_compile_opts co = {.backend = NX_BACKEND_REF, .n_outputs = 1, .outputs = &y};
    nx_program *p = NULL;
    nx_tensor *bt = NULL, *out = NULL;
    st = nx_graph_compile(g, &co, &p);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F32, 2, shape, &bt);
    if (st == NX_OK)
        st = nx_program_run(p, (const nx_tensor *const[]){bt}, &out);
    nx_tensor_free(out);
    nx_tensor_free(bt);
    nx_program_free(p);
    nx_graph_free(g);
    return st;
}

static nx_status sweep_body(nx_ctx *ctx, void *user)
{
    (void)user;
    nx_status st = sweep_scan(ctx, 1, 64, 2048);
    return st == NX_OK ? sweep_scan(ctx, 0, 300, 1100) : st;
}

static void test_alloc_sweep(void **state)
{
    (void)state;
    assert_true(nx_test_alloc_sweep(sweep_body, NULL, 4000) > 0);
}

/* ---- scan_iir ------------------------------------------------------------------------------*/

/* Stable recursions of each order (poles inside the unit circle), one with a negative c_1. */
static const double iir_coefs[4][4] = {
    {0.7},
    {1.4040965, -0.64},
    {1.8483958452537217, -1.2180722467418186, 0.26512040347052905},
    {-0.49, 0.3, 0.12, -0.0147},
};

/* The partition's pieces for one operand (a's shapes do not apply): lines along the last axis in
 * groups of 16 with a partial group, fewer lines than one group, tiles of 64 steps with a partial
 * tile, column blocks of 1024 with a partial block, a trailing unit axis, lines of 1. */
static const sl_case iir_cases[] = {
    {2, {37, 45}, {0}, 1},   {2, {37, 45}, {0}, 0}, {3, {3, 20, 1100}, {0}, 1},
    {3, {3, 7, 150}, {0}, 2}, {3, {3, 7, 150}, {0}, 0}, {3, {2, 3, 70}, {0}, 2},
    {3, {5, 4, 1}, {0}, 1},  {3, {6, 5, 4}, {0}, 1}, {1, {300}, {0}, 0},
    {2, {9, 1}, {0}, 1},
};

#define IIR_ORACLE(T)                                                                              \
    static void iir_oracle_##T(const sl_case *c, bool rev, int order, const T *b, T *y)            \
    {                                                                                              \
        T cf[4];                                                                                   \
        for (int j = 0; j < order; j++)                                                            \
            cf[j] = (T)iir_coefs[order - 1][j];                                                    \
        int64_t n = numel(c->nd, c->shape), len = c->shape[c->axis];                              \
        for (int64_t e = 0; e < n; e++) {                                                          \
            int64_t idx[3] = {0}, r = e;                                                           \
            for (int k = c->nd - 1; k >= 0; k--) {                                                 \
                idx[k] = r % c->shape[k];                                                          \
                r /= c->shape[k];                                                                  \
            }                                                                                      \
            if (idx[c->axis] != 0)                                                                 \
                continue;                                                                          \
            T st[4] = {0, 0, 0, 0};                                                                \
            for (int64_t s = 0; s < len; s++) {                                                    \
                idx[c->axis] = rev ? len - 1 - s : s;                                              \
                int64_t off = 0;                                                                   \
                for (int k = 0; k < c->nd; k++)                                                    \
                    off = off * c->shape[k] + idx[k];                                              \
                T acc = b[off];                                                                    \
                for (int j = 0; j < order; j++) {                                                  \
                    T p = cf[j] * st[j];                                                           \
                    acc = acc + p;                                                                 \
                }                                                                                  \
                for (int j = 3; j > 0; j--)                                                        \
                    st[j] = st[j - 1];                                                             \
                st[0] = acc;                                                                       \
                y[off] = acc;                                                                      \
            }                                                                                      \
        }                                                                                          \
    }
IIR_ORACLE(float)
IIR_ORACLE(double)

static void run_iir(nx_ctx *ctx, const sl_case *c, nx_dtype dt, bool rev, int order,
                    nx_backend be)
{
    int64_t n = numel(c->nd, c->shape);
    double *bv = malloc((size_t)n * sizeof(double));
    assert_non_null(bv);
    fill(bv, n, 13u + (uint32_t)order, -4.0, 8.0);
    bv[n / 2] = -0.0; /* a signed zero input: acc = -0 + c * 0 follows the defined order */
    nx_tensor *b = from_doubles(ctx, dt, c->nd, c->shape, bv);
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node bn = nx_input(g, "b", dt, c->nd, c->shape);
    nx_node y = nx_scan_iir(g, bn, c->axis, rev, order, iir_coefs[order - 1]);
    nx_compile_opts co = {.backend = be, .n_outputs = 1, .outputs = &y};
    nx_program *p = NULL;
    if (nx_graph_compile(g, &co, &p) != NX_OK)
        fail_msg("compile: %s", nx_ctx_last_error(ctx));
    nx_tensor *got = NULL;
    if (nx_program_run(p, (const nx_tensor *const[]){b}, &got) != NX_OK)
        fail_msg("run: %s", nx_ctx_last_error(ctx));
    size_t es = dt == NX_DTYPE_F32 ? 4 : 8;
    void *want = malloc((size_t)n * es);
    assert_non_null(want);
    if (dt == NX_DTYPE_F32)
        iir_oracle_float(c, rev, order, nx_tensor_data(b), want);
    else
        iir_oracle_double(c, rev, order, nx_tensor_data(b), want);
    for (int64_t i = 0; i < n; i++)
        if (memcmp((char *)nx_tensor_data(got) + (size_t)i * es, (char *)want + (size_t)i * es,
                   es) != 0)
            fail_msg("scan_iir order %d shape %lldx%lldx%lld axis %d rev %d %s [%s, %d threads]: "
                     "element %lld is %.17g; the sequential loop gives %.17g",
                     order, (long long)c->shape[0], (long long)c->shape[1],
                     (long long)(c->nd > 2 ? c->shape[2] : 1), c->axis, rev, nx_dtype_name(dt),
                     nx_backend_name(be), nx_ctx_num_threads(ctx), (long long)i,
                     dt == NX_DTYPE_F32 ? ((float *)nx_tensor_data(got))[i]
                                        : ((double *)nx_tensor_data(got))[i],
                     dt == NX_DTYPE_F32 ? ((float *)want)[i] : ((double *)want)[i]);
    free(want);
    nx_tensor_free(got);
    nx_program_free(p);
    nx_graph_free(g);
    nx_tensor_free(b);
    free(bv);
}

static void test_iir_against_loop(void **state)
{
    (void)state;
    static const nx_backend bes[] = {NX_BACKEND_CPU, NX_BACKEND_REF};
    for (int threads = 1; threads <= 3; threads += 2) {
        nx_test_alloc ta = {0};
        nx_ctx *ctx = ctx_threads(&ta, threads);
        for (size_t i = 0; i < sizeof iir_cases / sizeof *iir_cases; i++)
            for (int order = 1; order <= 4; order++)
                for (int rev = 0; rev < 2; rev++)
                    for (int be = 0; be < 2; be++) {
                        run_iir(ctx, &iir_cases[i], NX_DTYPE_F32, rev, order, bes[be]);
                        run_iir(ctx, &iir_cases[i], NX_DTYPE_F64, rev, order, bes[be]);
                    }
        nx_ctx_free(ctx);
        assert_int_equal(ta.live, 0);
    }
}

static void expect_iir_error(nx_ctx *ctx, nx_dtype dt, int axis, int order, const double *coef,
                             nx_status want, const char *msg)
{
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    int64_t shape[2] = {3, 4};
    nx_node x = nx_input(g, "x", dt, 2, shape);
    assert_int_equal(nx_scan_iir(g, x, axis, false, order, coef), NX_NONE);
    assert_int_equal(nx_graph_status(g), want);
    if (!strstr(nx_graph_error(g), msg))
        fail_msg("error \"%s\" does not contain \"%s\"", nx_graph_error(g), msg);
    nx_graph_free(g);
}

static void test_iir_errors(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = ctx_threads(&ta, 1);
    const double ok[4] = {0.5, 0.1, 0.1, 0.1}, bad[2] = {0.5, NAN}, inf[1] = {-INFINITY};
    expect_iir_error(ctx, NX_DTYPE_F32, 0, 0, ok, NX_ERR_INVALID_ARG,
                     "nx_scan_iir: order 0 is out of range; expected 1 to 4");
    expect_iir_error(ctx, NX_DTYPE_F32, 0, 5, ok, NX_ERR_INVALID_ARG,
                     "nx_scan_iir: order 5 is out of range; expected 1 to 4");
    expect_iir_error(ctx, NX_DTYPE_F32, 0, 2, NULL, NX_ERR_INVALID_ARG,
                     "nx_scan_iir: coef is NULL; expected 2 coefficients");
    expect_iir_error(ctx, NX_DTYPE_F64, 1, 2, bad, NX_ERR_INVALID_ARG,
                     "coefficient c_2 is nan; expected a finite value");
    expect_iir_error(ctx, NX_DTYPE_F64, 1, 1, inf, NX_ERR_INVALID_ARG,
                     "coefficient c_1 is -inf; expected a finite value");
    const double big[1] = {1e39}; /* finite as a double, inf once rounded to f32 */
    expect_iir_error(ctx, NX_DTYPE_F32, 0, 1, big, NX_ERR_INVALID_ARG,
                     "coefficient c_1 is 1e+39, which is not finite in f32; expected a value "
                     "finite in b's dtype");
    expect_iir_error(ctx, NX_DTYPE_I32, 0, 1, ok, NX_ERR_DTYPE,
                     "nx_scan_iir: b is i32; expected f32 or f64");
    expect_iir_error(ctx, NX_DTYPE_F32, 2, 1, ok, NX_ERR_INVALID_ARG,
                     "nx_scan_iir: axis 2 is out of range for 2 dims; expected -2 to 1");
    /* negative axes count from the end, as everywhere */
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node x = nx_input(g, "x", NX_DTYPE_F32, 2, (int64_t[]){3, 4});
    assert_int_not_equal(nx_scan_iir(g, x, -1, true, 4, ok), NX_NONE);
    nx_graph_free(g);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static nx_status sweep_iir(nx_ctx *ctx, int axis, int64_t n0, int64_t n1)
{
    int64_t shape[2] = {n0, n1};
    nx_graph *g = NULL;
    nx_status st = nx_graph_new(ctx, &g);
    if (st != NX_OK)
        return st;
    nx_node b = nx_input(g, "b", NX_DTYPE_F32, 2, shape);
    nx_node y = nx_scan_iir(g, b, axis, axis == 0, 3, iir_coefs[2]);
    nx_compile_opts co = {.backend = NX_BACKEND_REF, .n_outputs = 1, .outputs = &y};
    nx_program *p = NULL;
    nx_tensor *bt = NULL, *out = NULL;
    st = nx_graph_compile(g, &co, &p);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F32, 2, shape, &bt);
    if (st == NX_OK)
        st = nx_program_run(p, (const nx_tensor *const[]){bt}, &out);
    nx_tensor_free(out);
    nx_tensor_free(bt);
    nx_program_free(p);
    nx_graph_free(g);
    return st;
}

static nx_status sweep_iir_body(nx_ctx *ctx, void *user)
{
    (void)user;
    nx_status st = sweep_iir(ctx, 1, 64, 2048);
    return st == NX_OK ? sweep_iir(ctx, 0, 300, 1100) : st;
}

static void test_iir_alloc_sweep(void **state)
{
    (void)state;
    assert_true(nx_test_alloc_sweep(sweep_iir_body, NULL, 4000) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_loop),
        cmocka_unit_test(test_alloc_sweep),
        cmocka_unit_test(test_iir_against_loop),
        cmocka_unit_test(test_iir_errors),
        cmocka_unit_test(test_iir_alloc_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
