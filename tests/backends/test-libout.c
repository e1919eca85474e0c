/* Library kernels on the CPU backend get an uninitialised output when their routine writes every
 * element (scan, scan_linear, sort, argsort, scatter, reduce_custom) and a zeroed one otherwise
 * (extern). The context's allocator here fills every fresh block with 0xFF bytes (NaN in floats,
 * -1 in integers), so an element a routine left unwritten shows up as a difference from the
 * interpreter, whose outputs the same routines fill; the comparison is bit for bit. The extern
 * case writes only the first half of its output: the rest must read as the zeros its contract
 * has always given it, on the CPU as on the interpreter. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/x86/emit.h"
#include "program/program.h"
#include "testutil.h"

typedef struct poison_alloc {
    nx_test_alloc ta;
    nx_allocator inner;
} poison_alloc;

static void *poison_alloc_fn(void *user, size_t size, size_t align)
{
    poison_alloc *pa = user;
    void *p = pa->inner.alloc(pa->inner.user, size, align);
    if (p)
        memset(p, 0xff, size);
    return p;
}

static void poison_free_fn(void *user, void *p, size_t size)
{
    poison_alloc *pa = user;
    pa->inner.free(pa->inner.user, p, size);
}

typedef struct fixture {
    poison_alloc pa;
    nx_ctx *ctx;
    nx_graph *g;
    nx_tensor *in[8];
    int nin;
} fixture;

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double next_unit(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static nx_node input(fixture *f, nx_dtype dt, int ndim, const int64_t *shape, double lo, double hi)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(f->ctx, dt, ndim, shape, &t), NX_OK);
    for (int64_t i = 0; i < nx_tensor_numel(t); i++) {
        double v = lo + (hi - lo) * next_unit();
        nx_ir_put(nx_tensor_data(t), dt, i,
                  nx_ir_from_double(nx_ir_is_float(dt) ? v : floor(v), dt));
    }
    f->in[f->nin++] = t;
    return nx_input(f->g, NULL, dt, ndim, shape);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->pa.inner = nx_test_allocator(&f->pa.ta);
    nx_allocator a = {.alloc = poison_alloc_fn, .free = poison_free_fn, .user = &f->pa};
    nx_ctx_opts o = {.allocator = &a, .cache_dir = getenv("NITRIX_CACHE_DIR")};
    assert_int_equal(nx_ctx_new(&o, &f->ctx), NX_OK);
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
    assert_int_equal(f->pa.ta.live, 0);
    free(f);
    return 0;
}

/* Runs outs on the interpreter and through the CPU plan (loop kernels JIT-compiled, library
 * kernels by their routine); every output is a library kernel's; compares bits. */
static void check(fixture *f, int nout, const nx_node *outs, const char *what)
{
    nx_program *ref = NULL;
    nx_compile_opts o = {NX_BACKEND_REF, nout, outs};
    if (nx_graph_compile(f->g, &o, &ref) != NX_OK)
        fail_msg("%s: compile: %s", what, nx_ctx_last_error(f->ctx));
    nx_tensor *want[8] = {0}, *got[8] = {0};
    if (nx_program_run(ref, (const nx_tensor *const *)f->in, want) != NX_OK)
        fail_msg("%s: interpreter: %s", what, nx_ctx_last_error(f->ctx));
    nx_kplan *plan = NULL;
    if (nx_pass_pipeline(f->ctx, &f->g->s, nout, outs, &plan) != NX_OK)
        fail_msg("%s: pipeline: %s", what, nx_ctx_last_error(f->ctx));
    int libs = 0;
    for (int i = 0; i < plan->nkernels; i++)
        libs += plan->kernels[i]->kind == NX_KERNEL_LIBRARY;
    assert_int_equal(libs, nout);
    nx_x86_loop_fn fns[64] = {0};
    assert_true(plan->nkernels <= 64);
    if (nx_x86_plan_compile(f->ctx, plan, fns) != NX_OK)
        fail_msg("%s: compile: %s", what, nx_ctx_last_error(f->ctx));
    if (nx_x86_plan_run(f->ctx, plan, fns, (const nx_tensor *const *)f->in, got) != NX_OK)
        fail_msg("%s: run: %s", what, nx_ctx_last_error(f->ctx));
    for (int i = 0; i < nout; i++) {
        size_t es = nx_dtype_size(want[i]->dtype);
        assert_int_equal(nx_tensor_numel(got[i]), nx_tensor_numel(want[i]));
        const char *pg = nx_tensor_data(got[i]), *pw = nx_tensor_data(want[i]);
        for (int64_t e = 0; e < nx_tensor_numel(want[i]); e++)
            if (memcmp(pg + (size_t)e * es, pw + (size_t)e * es, es) != 0)
                fail_msg("%s: output %d differs from the interpreter at element %lld", what, i,
                         (long long)e);
        nx_tensor_free(got[i]);
        nx_tensor_free(want[i]);
    }
    nx_kplan_free(plan);
    nx_program_free(ref);
}

static void test_scans(void **state)
{
    fixture *f = *state;
    nx_graph *g = f->g;
    int64_t s[3] = {5, 7, 37}, s1[3] = {1, 1, 37};
    nx_node x = input(f, NX_DTYPE_F32, 3, s, -2, 2), d = input(f, NX_DTYPE_F64, 3, s, -2, 2);
    nx_node a = input(f, NX_DTYPE_F64, 3, s1, 0.5, 0.9);
    nx_node outs[7] = {
        nx_scan(g, x, 0, NX_MONOID_SUM, false),
        nx_scan(g, x, 2, NX_MONOID_MAX, true),
        nx_scan(g, d, 1, NX_MONOID_LOGSUMEXP, false),
        nx_scan_linear(g, nx_cast(g, a, NX_DTYPE_F32), x, 2, false),
        nx_scan_linear(g, a, d, 0, true),
        nx_scan_linear(g, a, d, 1, false),
        nx_scan_linear(g, nx_scalar(g, NX_DTYPE_F32, 0.75f), x, 2, true),
    };
    check(f, 7, outs, "scans");
}

static void test_sort_scatter_custom(void **state)
{
    fixture *f = *state;
    nx_graph *g = f->g;
    int64_t s[2] = {6, 29}, si[1] = {11}, su[2] = {6, 11};
    nx_node x = input(f, NX_DTYPE_F32, 2, s, -3, 3);
    nx_node idx = input(f, NX_DTYPE_I64, 1, si, -2, 31); /* some out of range: dropped */
    nx_node u = input(f, NX_DTYPE_F32, 2, su, -3, 3);
    nx_node top = NX_NONE, topi = NX_NONE;
    nx_topk(g, x, 5, 1, true, &top, &topi);
    nx_node px = nx_placeholder(g, NX_DTYPE_F32), pa = nx_placeholder(g, NX_DTYPE_F32),
            pb = nx_placeholder(g, NX_DTYPE_F32);
    nx_monoid_def m = {.ncarry = 1,
                       .x = px,
                       .a = {pa},
                       .b = {pb},
                       .lift = {nx_mul(g, px, px)},
                       .combine = {nx_add(g, pa, pb)},
                       .identity = {nx_scalar(g, NX_DTYPE_F32, 0)},
                       .finalize = nx_sqrt(g, pa)};
    int ax[1] = {1};
    nx_node outs[6] = {
        nx_sort(g, x, 1, false),
        nx_argsort(g, x, 0, true),
        top,
        nx_scatter(g, x, idx, u, 1, NX_MONOID_SUM),
        nx_reduce_custom(g, x, 1, ax, &m, false),
        topi,
    };
    check(f, 6, outs, "sort, scatter, reduce_custom");
}

/* Copies the first half of x into out and leaves the rest alone. */
static nx_status half_shape(void *user, int n_in, const nx_dtype *dtypes, const int *ndims,
                            const int64_t *const *shapes, nx_dtype *out_dtype, int *out_ndim,
                            int64_t out_shape[NX_MAX_DIMS])
{
    (void)user;
    (void)n_in;
    *out_dtype = dtypes[0];
    *out_ndim = ndims[0];
    memcpy(out_shape, shapes[0], (size_t)ndims[0] * sizeof *out_shape);
    return NX_OK;
}

static nx_status half_reference(void *user, nx_ctx *ctx, int n_in, const nx_tensor *const *ins,
                                nx_tensor *out)
{
    (void)user;
    (void)ctx;
    (void)n_in;
    size_t bytes = (size_t)nx_tensor_numel(ins[0]) * nx_dtype_size(nx_tensor_dtype(ins[0]));
    memcpy(nx_tensor_data(out), nx_tensor_data(ins[0]), bytes / 2);
    return NX_OK;
}

static void test_extern_zeroed(void **state)
{
    fixture *f = *state;
    int64_t s[1] = {64};
    nx_node x = input(f, NX_DTYPE_F32, 1, s, -1, 1);
    static const nx_extern_def def = {"half", half_shape, half_reference, NULL, NULL};
    nx_node y = nx_extern(f->g, &def, 1, &x);
    check(f, 1, &y, "extern");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_scans, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sort_scatter_custom, setup, teardown),
        cmocka_unit_test_setup_teardown(test_extern_zeroed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
