/* scan_linear (ir/prim-scan.c), the routine the recursive Gaussian runs on the CPU backend, against
 * a direct sequential loop per line (y = a * y rounded, then + b rounded, from y = 0): bit for bit,
 * on the cpu and ref backends, with 1, 2 and 3 threads, in f32 and f64. The shapes reach every
 * piece of the partition: lines along the last axis in groups of 16 with a partial group and
 * lengths past one 64-step tile, column blocks of 1024 with a partial block, a trailing unit axis,
 * a scalar a, an a broadcast along the line or across lines, a partial broadcast that takes the
 * generic walk, reverse scans, and an infinite a at a line's first step (a * 0 is NaN there). */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_loop),
        cmocka_unit_test(test_alloc_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
