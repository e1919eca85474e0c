/* Float MIN/MAX on the CPU backend, bit for bit against the reference interpreter: the canonical
 * NaN (positive, quiet, no payload) when either side is NaN, whatever the inputs' NaN sign and
 * payload (quiet or signalling); ties keep the first operand, so max(+0, -0) is +0 and
 * max(-0, +0) is -0. The emitter hands a MIN/MAX tree's plain picks and "all leaves ordered"
 * flags from node to node and blends the NaN in where a value leaves the tree: chains, balanced
 * trees, mixed min/max networks, a node read both inside and outside its tree, scalar operands,
 * fused pads (the border/interior split) and a MAX fold over a max, in f32 and f64, on lengths
 * with vector bodies and scalar tails. The oracle is the interpreter (ir/prim-elementwise.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/x86/emit.h"
#include "program/program.h"
#include "testutil.h"

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint64_t next_u64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Special values (NaNs of both signs, a payload, a signalling NaN, signed zeros, infinities) and
 * a few small integers, so that ties are frequent. */
static void fill_f32(float *p, int64_t n)
{
    static const uint32_t special[] = {0x7fc00000u, 0xffc00000u, 0x7fc12345u, 0x7f800001u,
                                       0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u};
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = next_u64();
        if (r % 8 < 2) {
            memcpy(&p[i], &special[(r >> 8) % 8], 4);
        } else {
            p[i] = (float)((int)((r >> 8) % 7) - 3);
            if (p[i] == 0 && (r >> 16) % 2)
                p[i] = -0.0f;
        }
    }
}

static void fill_f64(double *p, int64_t n)
{
    static const uint64_t special[] = {
        0x7ff8000000000000ull, 0xfff8000000000000ull, 0x7ff8000000012345ull, 0x7ff0000000000001ull,
        0x0000000000000000ull, 0x8000000000000000ull, 0x7ff0000000000000ull, 0xfff0000000000000ull};
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = next_u64();
        if (r % 8 < 2) {
            memcpy(&p[i], &special[(r >> 8) % 8], 8);
        } else {
            p[i] = (double)((int)((r >> 8) % 7) - 3);
            if (p[i] == 0 && (r >> 16) % 2)
                p[i] = -0.0;
        }
    }
}

typedef struct fixture {
    nx_test_alloc ta;
    nx_ctx *ctx;
    nx_graph *g;
    nx_tensor *in[8];
    int nin;
    nx_dtype dt;
} fixture;

static nx_node input(fixture *f, int ndim, const int64_t *shape)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(f->ctx, f->dt, ndim, shape, &t), NX_OK);
    if (f->dt == NX_DTYPE_F32)
        fill_f32(nx_tensor_data(t), nx_tensor_numel(t));
    else
        fill_f64(nx_tensor_data(t), nx_tensor_numel(t));
    f->in[f->nin++] = t;
    return nx_input(f->g, NULL, f->dt, ndim, shape);
}

/* The first element whose bits differ, or -1. */
static int64_t first_difference(const nx_tensor *a, const nx_tensor *b)
{
    size_t es = a->dtype == NX_DTYPE_F64 || a->dtype == NX_DTYPE_I64 ? 8 : 4;
    const char *pa = nx_tensor_data(a), *pb = nx_tensor_data(b);
    for (int64_t i = 0; i < nx_tensor_numel(a); i++)
        if (memcmp(pa + (size_t)i * es, pb + (size_t)i * es, es) != 0)
            return i;
    return -1;
}

/* Runs outs on the interpreter and JIT-compiled through the pipeline (every kernel compiled: a
 * kernel the JIT refused would fail here); compares bits. */
static void check(fixture *f, int nout, const nx_node *outs, const char *what)
{
    nx_program *ref = NULL;
    nx_compile_opts o = {NX_BACKEND_REF, nout, outs};
    assert_int_equal(nx_graph_compile(f->g, &o, &ref), NX_OK);
    nx_tensor *want[8] = {0}, *got[8] = {0};
    assert_int_equal(nx_program_run(ref, (const nx_tensor *const *)f->in, want), NX_OK);
    nx_kplan *plan = NULL;
    if (nx_pass_pipeline(f->ctx, &f->g->s, nout, outs, &plan) != NX_OK)
        fail_msg("%s: pipeline: %s", what, nx_ctx_last_error(f->ctx));
    nx_x86_loop_fn fns[64] = {0};
    assert_true(plan->nkernels <= 64);
    if (nx_x86_plan_compile(f->ctx, plan, fns) != NX_OK)
        fail_msg("%s: compile: %s", what, nx_ctx_last_error(f->ctx));
    for (int i = 0; i < plan->nkernels; i++)
        if (plan->kernels[i]->kind == NX_KERNEL_LOOP && !fns[i])
            fail_msg("%s: kernel %d was not compiled", what, i);
    if (nx_x86_plan_run(f->ctx, plan, fns, (const nx_tensor *const *)f->in, got) != NX_OK)
        fail_msg("%s: run: %s", what, nx_ctx_last_error(f->ctx));
    for (int i = 0; i < nout; i++) {
        int64_t d = first_difference(got[i], want[i]);
        if (d >= 0) {
            uint64_t x = 0, y = 0;
            memcpy(&x, (char *)nx_tensor_data(got[i]) + d * (f->dt == NX_DTYPE_F64 ? 8 : 4),
                   f->dt == NX_DTYPE_F64 ? 8 : 4);
            memcpy(&y, (char *)nx_tensor_data(want[i]) + d * (f->dt == NX_DTYPE_F64 ? 8 : 4),
                   f->dt == NX_DTYPE_F64 ? 8 : 4);
            fail_msg("%s (%s), output %d, element %lld: bits %llx, interpreter %llx", what,
                     f->dt == NX_DTYPE_F64 ? "f64" : "f32", i, (long long)d, (unsigned long long)x,
                     (unsigned long long)y);
        }
        nx_tensor_free(got[i]);
        nx_tensor_free(want[i]);
    }
    nx_kplan_free(plan);
    nx_program_free(ref);
}

static void begin(fixture *f, nx_dtype dt)
{
    for (int i = 0; i < f->nin; i++)
        nx_tensor_free(f->in[i]);
    f->nin = 0;
    nx_graph_free(f->g);
    f->g = NULL;
    assert_int_equal(nx_graph_new(f->ctx, &f->g), NX_OK);
    f->dt = dt;
}

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
    for (int i = 0; i < f->nin; i++)
        nx_tensor_free(f->in[i]);
    nx_graph_free(f->g);
    nx_ctx_free(f->ctx);
    assert_int_equal(f->ta.live, 0);
    free(f);
    return 0;
}

static const nx_dtype dtypes[2] = {NX_DTYPE_F32, NX_DTYPE_F64};
/* 16-lane bodies with 5- and 0-element tails, and a line shorter than a vector. */
static const int64_t lens[3] = {37, 32, 7};

static void test_pairs_and_chains(void **state)
{
    fixture *f = *state;
    for (int di = 0; di < 2; di++) {
        for (int li = 0; li < 3; li++) {
            begin(f, dtypes[di]);
            nx_graph *g = f->g;
            int64_t s[2] = {3, lens[li]};
            nx_node a = input(f, 2, s), b = input(f, 2, s), c = input(f, 2, s), d = input(f, 2, s);
            nx_node outs[8] = {
                nx_maximum(g, a, b),
                nx_minimum(g, a, b),
                nx_maximum(g, nx_maximum(g, nx_maximum(g, a, b), c), d),
                nx_minimum(g, d, nx_minimum(g, c, nx_minimum(g, b, a))),
                nx_maximum(g, nx_maximum(g, a, b), nx_maximum(g, c, d)),
                nx_maximum(g, a, a),
                nx_minimum(g, nx_maximum(g, a, b), nx_minimum(g, a, b)),
                nx_maximum(g, b, nx_minimum(g, a, nx_maximum(g, c, nx_minimum(g, d, a)))),
            };
            check(f, 8, outs, "pairs and chains");
        }
    }
}

/* A median of three (min/max network sharing its pairs), a node that is also read outside its
 * tree (through neg, which keeps a NaN's payload bits apart from the sign), scalar operands
 * (signed zeros). */
static void test_networks_and_scalars(void **state)
{
    fixture *f = *state;
    for (int di = 0; di < 2; di++) {
        for (int li = 0; li < 3; li++) {
            begin(f, dtypes[di]);
            nx_graph *g = f->g;
            nx_dtype dt = dtypes[di];
            int64_t s[2] = {2, lens[li]};
            nx_node a = input(f, 2, s), b = input(f, 2, s), c = input(f, 2, s);
            nx_node lo = nx_minimum(g, a, b), hi = nx_maximum(g, a, b);
            nx_node med = nx_maximum(g, lo, nx_minimum(g, hi, c));
            nx_node t = nx_maximum(g, a, b);
            nx_node outs[7] = {
                med,
                nx_maximum(g, t, c),
                nx_neg(g, t),
                nx_maximum(g, a, nx_scalar(g, dt, 0.0)),
                nx_maximum(g, nx_scalar(g, dt, -0.0), a),
                nx_minimum(g, nx_scalar(g, dt, NAN), a),
                nx_minimum(g, nx_add(g, nx_maximum(g, a, b), c), nx_neg(g, c)),
            };
            check(f, 7, outs, "networks and scalars");
        }
    }
}

/* The separable 3-tap dilation with the pad fused (border rows with the pad rule, the interior
 * without), and MAX/MIN folds whose operand is a max. */
static void test_windows_and_folds(void **state)
{
    fixture *f = *state;
    for (int di = 0; di < 2; di++) {
        for (int li = 0; li < 3; li++) {
            begin(f, dtypes[di]);
            nx_graph *g = f->g;
            int64_t s[2] = {4, lens[li]};
            nx_node x = input(f, 2, s), y = input(f, 2, s);
            int64_t lo[2] = {0, 1}, hi[2] = {0, 1};
            nx_node p = nx_pad(g, x, lo, hi, NX_PAD_REFLECT, 0);
            nx_node taps[3];
            for (int k = 0; k < 3; k++) {
                int64_t b0[2] = {0, k}, e0[2] = {4, k + lens[li]}, st[2] = {1, 1};
                taps[k] = nx_slice(g, p, b0, e0, st);
            }
            nx_node dil = nx_maximum(g, nx_maximum(g, taps[0], taps[1]), taps[2]);
            int ax[1] = {1};
            nx_node outs[3] = {
                dil,
                nx_reduce(g, nx_maximum(g, x, y), 1, ax, NX_MONOID_MAX, false),
                nx_reduce(g, nx_minimum(g, dil, y), 1, ax, NX_MONOID_MIN, false),
            };
            check(f, 3, outs, "windows and folds");
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pairs_and_chains, setup, teardown),
        cmocka_unit_test_setup_teardown(test_networks_and_scalars, setup, teardown),
        cmocka_unit_test_setup_teardown(test_windows_and_folds, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
