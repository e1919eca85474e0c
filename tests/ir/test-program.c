/* Compile and run plumbing: recorded errors reach compile, input checks name the input that
 * disagrees, failed runs leave no outputs, backend fallback warns once (or fails under strict
 * mode), programs outlive their graph, only needed nodes run, NITRIX_DUMP=graph, and
 * allocation-failure sweeps over building, compiling and running. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "helpers.h"

typedef struct logcap {
    int warnings;
    char last[1024];
} logcap;

static void capture(void *user, nx_log_level level, const char *msg)
{
    logcap *c = user;
    if (level == NX_LOG_WARN) {
        c->warnings++;
        snprintf(c->last, sizeof c->last, "%s", msg);
    }
}

static nx_ctx *ctx_with_log(nx_test_alloc *ta, logcap *cap, bool ignore_env)
{
    nx_allocator a = nx_test_allocator(ta);
    nx_ctx_opts o = {.allocator = &a, .log = capture, .log_user = cap, .ignore_env = ignore_env};
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(&o, &ctx) != NX_OK)
        fail_msg("nx_ctx_new: %s", nx_ctx_last_error(NULL));
    return ctx;
}

static const int64_t S23[2] = {2, 3};

/* y = exp(x) + 1 over x: f64[2,3]. */
static nx_node small_graph(nx_graph *g)
{
    nx_node x = nx_input(g, "x", NX_DTYPE_F64, 2, S23);
    nx_node e = nx_exp(g, x); /* in order: the dump test expects these ids */
    nx_node one = nx_scalar(g, NX_DTYPE_F64, 1);
    return nx_add(g, e, one);
}

static void test_compile_errors(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node y = small_graph(g);
    nx_program *p = (nx_program *)&ta; /* garbage: compile must clear it */
    nx_compile_opts o = {.backend = NX_BACKEND_REF, .n_outputs = 0, .outputs = &y};
    assert_int_equal(nx_graph_compile(g, &o, &p), NX_ERR_INVALID_ARG);
    assert_null(p);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "nx_graph_compile: 0 outputs"));
    nx_node bad[2] = {y, 99};
    o.n_outputs = 2;
    o.outputs = bad;
    assert_int_equal(nx_graph_compile(g, &o, &p), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "nx_graph_compile: output 1 is handle 99"));
    bad[1] = NX_NONE;
    assert_int_equal(nx_graph_compile(g, &o, &p), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_graph_compile(g, NULL, &p), NX_ERR_INVALID_ARG);
    o.n_outputs = 1;
    assert_int_equal(nx_graph_compile(g, &o, NULL), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_graph_compile(NULL, &o, &p), NX_ERR_INVALID_ARG);
    o.backend = (nx_backend)17;
    assert_int_equal(nx_graph_compile(g, &o, &p), NX_ERR_INVALID_ARG);

    /* the first builder error is what compile reports */
    nx_node z = nx_matmul(g, y, y);
    assert_int_equal(z, NX_NONE);
    o.backend = NX_BACKEND_REF;
    o.outputs = &y;
    assert_int_equal(nx_graph_compile(g, &o, &p), NX_ERR_SHAPE);
    assert_null(p);
    assert_string_equal(nx_ctx_last_error(ctx), nx_graph_error(g));
    assert_non_null(strstr(nx_ctx_last_error(ctx), "nx_matmul: a is [2,3] but b is [2,3]"));

    /* an output that reads a placeholder outside its monoid cannot run */
    nx_graph_free(g);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node ph = nx_exp(g, nx_placeholder(g, NX_DTYPE_F32));
    o.outputs = &ph;
    assert_int_equal(nx_graph_compile(g, &o, &p), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "depends on placeholder %1 outside a custom "
                                                   "monoid"));
    nx_graph_free(g);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void test_run_input_errors(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node y = small_graph(g);
    nx_node unused = nx_input(g, "u", NX_DTYPE_I32, 1, (int64_t[]){4});
    assert_int_not_equal(unused, NX_NONE);
    nx_compile_opts o = {.backend = NX_BACKEND_REF, .n_outputs = 1, .outputs = &y};
    nx_program *p = NULL;
    assert_int_equal(nx_graph_compile(g, &o, &p), NX_OK);
    assert_int_equal(nx_program_num_inputs(p), 2); /* every graph input, used or not */
    assert_int_equal(nx_program_num_outputs(p), 1);
    assert_int_equal(nx_program_backend(p), NX_BACKEND_REF);

    float xf[6] = {0};
    double xd[6] = {0};
    int32_t ud[4] = {0};
    nx_tensor *tf = wrap(ctx, NX_DTYPE_F32, 2, S23, xf);
    nx_tensor *tt = wrap(ctx, NX_DTYPE_F64, 2, (int64_t[]){3, 2}, xd);
    nx_tensor *td = wrap(ctx, NX_DTYPE_F64, 2, S23, xd);
    nx_tensor *tu = wrap(ctx, NX_DTYPE_I32, 1, (int64_t[]){4}, ud);
    nx_tensor *tu5 = wrap(ctx, NX_DTYPE_I32, 1, (int64_t[]){5}, ud);
    nx_tensor *out = (nx_tensor *)&ta; /* garbage: run must clear it */

    assert_int_equal(nx_program_run(p, (const nx_tensor *const[]){tf, tu}, &out), NX_ERR_DTYPE);
    assert_null(out);
    assert_string_equal(nx_ctx_last_error(ctx),
                        "nx_program_run: input 0 ('x') is f32[2,3]; expected f64[2,3]");
    assert_int_equal(nx_program_run(p, (const nx_tensor *const[]){tt, tu}, &out), NX_ERR_SHAPE);
    assert_string_equal(nx_ctx_last_error(ctx),
                        "nx_program_run: input 0 ('x') is f64[3,2]; expected f64[2,3]");
    assert_int_equal(nx_program_run(p, (const nx_tensor *const[]){td, tu5}, &out), NX_ERR_SHAPE);
    assert_string_equal(nx_ctx_last_error(ctx),
                        "nx_program_run: input 1 ('u') is i32[5]; expected i32[4]");
    assert_int_equal(nx_program_run(p, (const nx_tensor *const[]){td, NULL}, &out),
                     NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "input 1 ('u') is NULL"));
    assert_int_equal(nx_program_run(p, NULL, &out), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_program_run(p, (const nx_tensor *const[]){td, tu}, NULL),
                     NX_ERR_INVALID_ARG);
    assert_int_equal(nx_program_run(NULL, NULL, &out), NX_ERR_INVALID_ARG);

    assert_int_equal(nx_program_run(p, (const nx_tensor *const[]){td, tu}, &out), NX_OK);
    double want[6] = {2, 2, 2, 2, 2, 2};
    expect_values(out, 6, want, "exp(0) + 1");
    nx_tensor *ts[] = {tf, tt, td, tu, tu5};
    for (int i = 0; i < 5; i++)
        nx_tensor_free(ts[i]);
    nx_program_free(p);
    nx_graph_free(g);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* An extern whose reference fails, and one that counts its calls. */
static int calls;

static nx_status same_shape(void *user, int n_in, const nx_dtype *dtypes, const int *ndims,
                            const int64_t *const *shapes, nx_dtype *out_dtype, int *out_ndim,
                            int64_t out_shape[NX_MAX_DIMS])
{
    (void)user;
    (void)n_in;
    *out_dtype = dtypes[0];
    *out_ndim = ndims[0];
    memcpy(out_shape, shapes[0], (size_t)ndims[0] * sizeof(int64_t));
    return NX_OK;
}

static nx_status failing_ref(void *user, nx_ctx *ctx, int n_in, const nx_tensor *const *ins,
                             nx_tensor *out)
{
    (void)user;
    (void)ctx;
    (void)n_in;
    (void)ins;
    (void)out;
    return NX_ERR_UNSUPPORTED;
}

static nx_status counting_ref(void *user, nx_ctx *ctx, int n_in, const nx_tensor *const *ins,
                              nx_tensor *out)
{
    (void)user;
    (void)ctx;
    (void)n_in;
    calls++;
    memcpy(nx_tensor_data(out), nx_tensor_data(ins[0]),
           (size_t)nx_tensor_numel(out) * sizeof(double));
    return NX_OK;
}

static void test_failed_run_leaves_no_outputs(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    static const nx_extern_def broken = {"broken", same_shape, failing_ref, NULL, NULL};
    nx_node x = nx_input(g, "x", NX_DTYPE_F64, 2, S23);
    nx_node ok = nx_exp(g, x);
    nx_node bad = nx_neg(g, nx_extern(g, &broken, 1, &ok));
    nx_node outs[2] = {ok, bad};
    nx_compile_opts o = {.backend = NX_BACKEND_REF, .n_outputs = 2, .outputs = outs};
    nx_program *p = NULL;
    assert_int_equal(nx_graph_compile(g, &o, &p), NX_OK);
    double xd[6] = {0};
    nx_tensor *xt = wrap(ctx, NX_DTYPE_F64, 2, S23, xd);
    int64_t live = ta.live;
    nx_tensor *res[2] = {(nx_tensor *)&ta, (nx_tensor *)&ta};
    assert_int_equal(nx_program_run(p, (const nx_tensor *const[]){xt}, res), NX_ERR_UNSUPPORTED);
    assert_null(res[0]);
    assert_null(res[1]);
    assert_int_equal(ta.live, live);
    assert_string_equal(nx_ctx_last_error(ctx),
                        "interpreter: extern 'broken' failed in its reference "
                        "(NX_ERR_UNSUPPORTED)");
    nx_tensor_free(xt);
    nx_program_free(p);
    nx_graph_free(g);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void test_only_needed_nodes_run(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    static const nx_extern_def counter = {"counter", same_shape, counting_ref, NULL, NULL};
    nx_node x = nx_input(g, "x", NX_DTYPE_F64, 2, S23);
    nx_node side = nx_extern(g, &counter, 1, &x);
    nx_node y = nx_neg(g, x);
    assert_int_not_equal(side, NX_NONE);
    double xd[6] = {1, 2, 3, 4, 5, 6};
    nx_tensor *xt = wrap(ctx, NX_DTYPE_F64, 2, S23, xd);
    calls = 0;
    nx_tensor *r = run1(g, y, 1, &xt);
    assert_int_equal(calls, 0);
    double want[6] = {-1, -2, -3, -4, -5, -6};
    expect_values(r, 6, want, "neg");
    r = run1(g, nx_add(g, side, y), 1, &xt);
    assert_int_equal(calls, 1);
    double zero[6] = {0};
    expect_values(r, 6, zero, "x + -x through the extern");
    nx_tensor_free(xt);
    nx_graph_free(g);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void test_program_outlives_graph_and_strided_inputs(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node x = nx_input(g, "x", NX_DTYPE_F64, 2, S23);
    int ax = 1;
    nx_node y = nx_reduce(g, nx_mul(g, x, nx_iota(g, NX_DTYPE_F64, 2, S23, 1)), 1, &ax,
                          NX_MONOID_SUM, false);
    nx_compile_opts o = {.backend = NX_BACKEND_REF, .n_outputs = 1, .outputs = &y};
    nx_program *p = NULL;
    assert_int_equal(nx_graph_compile(g, &o, &p), NX_OK);
    nx_graph_free(g);
    /* x = [[1,2,3],[4,5,6]] read through a transposed view of [[1,4],[2,5],[3,6]] */
    double store[6] = {1, 4, 2, 5, 3, 6};
    nx_tensor *xt = NULL;
    assert_int_equal(nx_tensor_wrap(ctx, store, NX_DTYPE_F64, 2, S23, (int64_t[]){1, 2}, &xt),
                     NX_OK);
    nx_tensor *r = NULL;
    assert_int_equal(nx_program_run(p, (const nx_tensor *const[]){xt}, &r), NX_OK);
    assert_true(nx_tensor_is_contiguous(r));
    double want[2] = {0 * 1 + 1 * 2 + 2 * 3, 0 * 4 + 1 * 5 + 2 * 6};
    expect_values(r, 2, want, "sum_j j * x_ij");
    nx_tensor_free(xt);
    nx_program_free(p);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* A 40 000-node chain y <- 0.999 y + 0.001 (20 000 levels) and its gradient compile and run on
 * the reference and the CPU backend: fusion materialises every NX_FUSE_DEPTH_MAX levels, so the
 * lowering's recursion stays bounded (it overflowed the stack before). Closed forms: y = 1 +
 * (x - 1) 0.999^n and d(sum y)/dx = 0.999^n. */
static void test_deep_chain(void **state)
{
    (void)state;
    enum { LEVELS = 20000 };
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    for (int b = 0; b < 2; b++) {
        nx_graph *g = NULL;
        assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
        nx_node x = nx_input(g, "x", NX_DTYPE_F64, 2, S23);
        nx_node a = nx_scalar(g, NX_DTYPE_F64, 0.999), c = nx_scalar(g, NX_DTYPE_F64, 0.001);
        nx_node y = x;
        for (int i = 0; i < LEVELS; i++)
            y = nx_add(g, nx_mul(g, y, a), c);
        int axes[2] = {0, 1};
        nx_node total = nx_reduce(g, y, 2, axes, NX_MONOID_SUM, false), dx = NX_NONE;
        assert_int_equal(nx_graph_grad(g, total, 1, &x, &dx), NX_OK);
        nx_node outs[2] = {y, dx};
        nx_compile_opts o = {.backend = b ? NX_BACKEND_CPU : NX_BACKEND_REF, .n_outputs = 2,
                             .outputs = outs};
        nx_program *p = NULL;
        assert_int_equal(nx_graph_compile(g, &o, &p), NX_OK);
        double xd[6] = {-2, -1, 0, 1, 2, 3};
        nx_tensor *xt = wrap(ctx, NX_DTYPE_F64, 2, S23, xd), *r[2] = {NULL, NULL};
        assert_int_equal(nx_program_run(p, (const nx_tensor *const[]){xt}, r), NX_OK);
        double q = pow(0.999, LEVELS);
        for (int i = 0; i < 6; i++) {
            double want = 1 + (xd[i] - 1) * q;
            assert_true(fabs(value_at(r[0], i) - want) <= 1e-9 * (fabs(want) + 1e-300));
            assert_true(fabs(value_at(r[1], i) - q) <= 1e-9 * q);
        }
        nx_tensor_free(r[0]);
        nx_tensor_free(r[1]);
        nx_tensor_free(xt);
        nx_program_free(p);
        nx_graph_free(g);
    }
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* A graph of one input has no operand array at all (clang's UBSan checks NULL + 0 there). */
static void test_single_leaf_graph(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node x = nx_input(g, "x", NX_DTYPE_I16, 1, (int64_t[]){3});
    assert_int_equal(nx_graph_verify(g), NX_OK);
    FILE *f = tmpfile();
    assert_int_equal(nx_graph_print(g, x, f), NX_OK);
    fclose(f);
    int16_t xd[3] = {7, -8, 9};
    nx_tensor *xt = wrap(ctx, NX_DTYPE_I16, 1, (int64_t[]){3}, xd);
    double want[3] = {7, -8, 9};
    expect_values(run1(g, x, 1, &xt), 3, want, "identity program");
    nx_tensor_free(xt);
    nx_graph_free(g);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* ---- backend fallback ----------------------------------------------------------------------*/

static nx_status compile_on(nx_ctx *ctx, nx_backend b, nx_program **p)
{
    nx_graph *g = NULL;
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node y = small_graph(g);
    nx_compile_opts o = {.backend = b, .n_outputs = 1, .outputs = &y};
    nx_status st = nx_graph_compile(g, &o, p);
    nx_graph_free(g);
    return st;
}

static void clear_env(void)
{
    unsetenv("NITRIX_BACKEND");
    unsetenv("NITRIX_STRICT_BACKEND");
    unsetenv("NITRIX_SILENCE_FALLBACK");
}

static bool has_usable_gpu(nx_ctx *ctx)
{
    nx_system_info info;
    if (nx_system_info_get(ctx, &info) != NX_OK)
        return false;
    for (int i = 0; i < info.gpu_count; i++) {
        if (info.gpus[i].usable && info.nvrtc_found)
            return true;
    }
    return false;
}

static void test_fallback_warning(void **state)
{
    (void)state;
    clear_env();
    nx_test_alloc ta = {0};
    logcap cap = {0};
    nx_ctx *ctx = ctx_with_log(&ta, &cap, false);
    nx_program *p = NULL;
    /* cpu, and auto on a machine without a GPU, run on the CPU backend without a warning */
    assert_int_equal(compile_on(ctx, NX_BACKEND_CPU, &p), NX_OK);
    assert_int_equal(cap.warnings, 0);
    assert_int_equal(nx_program_backend(p), NX_BACKEND_CPU);
    double xd[6] = {0};
    nx_tensor *xt = wrap(ctx, NX_DTYPE_F64, 2, S23, xd);
    for (int i = 0; i < 2; i++) {
        nx_tensor *r = NULL;
        assert_int_equal(nx_program_run(p, (const nx_tensor *const[]){xt}, &r), NX_OK);
        nx_tensor_free(r);
    }
    assert_int_equal(cap.warnings, 0);
    nx_program_free(p);
    assert_int_equal(compile_on(ctx, NX_BACKEND_AUTO, &p), NX_OK); /* context default: auto */
    assert_int_equal(cap.warnings, 0);
    assert_int_equal(nx_program_backend(p), has_usable_gpu(ctx) ? NX_BACKEND_CUDA : NX_BACKEND_CPU);
    if (!has_usable_gpu(ctx)) /* auto's probe of CUDA leaves no error message behind */
        assert_string_equal(nx_ctx_last_error(ctx), "");
    nx_program_free(p);
    /* cuda asked for explicitly without a usable GPU is an error that says why (this suite runs
     * without one; on a GPU machine it compiles) */
    if (!has_usable_gpu(ctx)) {
        assert_int_equal(compile_on(ctx, NX_BACKEND_CUDA, &p), NX_ERR_BACKEND);
        assert_null(p);
        assert_non_null(strstr(nx_ctx_last_error(ctx), "cuda"));
    }
    assert_int_equal(compile_on(ctx, NX_BACKEND_REF, &p), NX_OK);
    assert_int_equal(cap.warnings, 0);
    assert_int_equal(nx_program_backend(p), NX_BACKEND_REF);
    nx_program_free(p);
    nx_tensor_free(xt);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);

    /* NITRIX_BACKEND=ref resolves an unspecified backend to the interpreter */
    setenv("NITRIX_BACKEND", "ref", 1);
    cap.warnings = 0;
    ctx = ctx_with_log(&ta, &cap, false);
    assert_int_equal(compile_on(ctx, NX_BACKEND_AUTO, &p), NX_OK);
    assert_int_equal(nx_program_backend(p), NX_BACKEND_REF);
    nx_program_free(p);
    /* ... but an explicit request wins over the context's */
    assert_int_equal(compile_on(ctx, NX_BACKEND_CPU, &p), NX_OK);
    assert_int_equal(nx_program_backend(p), NX_BACKEND_CPU);
    assert_int_equal(cap.warnings, 0);
    nx_program_free(p);
    nx_ctx_free(ctx);
    clear_env();

    clear_env();
    assert_int_equal(ta.live, 0);
}

static void test_strict_backend(void **state)
{
    (void)state;
    clear_env();
    setenv("NITRIX_STRICT_BACKEND", "1", 1);
    nx_test_alloc ta = {0};
    logcap cap = {0};
    nx_ctx *ctx = ctx_with_log(&ta, &cap, false);
    assert_true(nx_ctx_strict_backend(ctx));
    nx_program *p = (nx_program *)&ta;
    if (!has_usable_gpu(ctx)) {
        assert_int_equal(compile_on(ctx, NX_BACKEND_CUDA, &p), NX_ERR_BACKEND);
        assert_null(p);
        assert_non_null(strstr(nx_ctx_last_error(ctx), "cuda"));
    }
    assert_int_equal(cap.warnings, 0);
    assert_int_equal(compile_on(ctx, NX_BACKEND_CPU, &p), NX_OK);
    nx_program_free(p);
    assert_int_equal(compile_on(ctx, NX_BACKEND_AUTO, &p), NX_OK);
    nx_program_free(p);
    assert_int_equal(compile_on(ctx, NX_BACKEND_REF, &p), NX_OK);
    nx_program_free(p);
    nx_ctx_free(ctx);
    clear_env();
    assert_int_equal(ta.live, 0);
}

/* A context reading the environment (nx_test_ctx ignores it), with the test allocator. */
static nx_status env_ctx(nx_test_alloc *ta, bool ignore_env, nx_ctx **out)
{
    nx_allocator a = nx_test_allocator(ta);
    nx_ctx_opts o = {.allocator = &a, .ignore_env = ignore_env};
    return nx_ctx_new(&o, out);
}

/* The graph compiled under NITRIX_DUMP=dump in a context made after it was set, with what went
 * to stderr in buf. */
static void dump_run(const char *dump, bool ignore_env, char *buf, size_t len)
{
    nx_test_alloc ta = {0};
    setenv("NITRIX_DUMP", dump, 1);
    nx_ctx *ctx = NULL;
    nx_status cst = env_ctx(&ta, ignore_env, &ctx);
    unsetenv("NITRIX_DUMP");
    assert_int_equal(cst, NX_OK);
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    fflush(stderr);
    int saved = dup(fileno(stderr));
    dup2(fileno(tmp), fileno(stderr));
    nx_program *p = NULL;
    nx_status st = compile_on(ctx, NX_BACKEND_REF, &p);
    fflush(stderr);
    dup2(saved, fileno(stderr));
    close(saved);
    assert_int_equal(st, NX_OK);
    nx_program_free(p);
    memset(buf, 0, len);
    rewind(tmp);
    size_t n = fread(buf, 1, len - 1, tmp);
    (void)n;
    fclose(tmp);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void test_dump_graph(void **state)
{
    (void)state;
    char buf[2048];
    dump_run("kernel,graph", false, buf, sizeof buf);
    if (!strstr(buf, "nitrix: dump graph: program of 4 nodes, 1 inputs, 1 outputs\n"
                     "%1 = input[name=\"x\", index=0] : f64[2,3]\n"
                     "%2 = exp %1 : f64[2,3]\n"
                     "%3 = constant[1] : f64[]\n"
                     "%4 = add %2, %3 : f64[2,3]\n"
                     "output 0 = %4\n"))
        fail_msg("dump:\n%s", buf);
    /* read when the context is made, so ignore_env turns it off */
    dump_run("graph", true, buf, sizeof buf);
    assert_null(strstr(buf, "dump graph"));
    /* a word it does not know fails creation, naming the word and the known ones */
    nx_test_alloc ta = {0};
    nx_ctx *ctx = NULL;
    setenv("NITRIX_DUMP", "graph,jit", 1);
    nx_status st = env_ctx(&ta, false, &ctx);
    unsetenv("NITRIX_DUMP");
    assert_int_equal(st, NX_ERR_INVALID_ARG);
    assert_null(ctx);
    const char *msg = nx_ctx_last_error(NULL);
    if (!strstr(msg, "'jit'") || !strstr(msg, "graph, fuse, kernel and llvm"))
        fail_msg("message: %s", msg);
    assert_int_equal(ta.live, 0);
}

/* ---- allocation-failure sweeps -------------------------------------------------------------*/

static nx_status pos_shape(void *user, int n_in, const nx_dtype *dtypes, const int *ndims,
                           const int64_t *const *shapes, nx_dtype *out_dtype, int *out_ndim,
                           int64_t out_shape[NX_MAX_DIMS])
{
    return same_shape(user, n_in, dtypes, ndims, shapes, out_dtype, out_ndim, out_shape);
}

/* A graph touching every primitive family; outs receives 5 outputs. */
static void sample(nx_graph *g, nx_node *outs)
{
    static const nx_extern_def copy = {"copy", pos_shape, counting_ref, NULL, NULL};
    nx_node x = nx_input(g, "x", NX_DTYPE_F64, 2, (int64_t[]){4, 5});
    nx_node w = nx_parameter(g, "w", NX_DTYPE_F64, 2, (int64_t[]){5, 3});
    nx_node idx = nx_input(g, "idx", NX_DTYPE_I64, 1, (int64_t[]){3});
    nx_node sm = nx_softmax(g, nx_matmul(g, x, w), 1);
    nx_node p = nx_pad(g, x, (int64_t[]){1, 2}, (int64_t[]){0, 1}, NX_PAD_REFLECT, 0);
    nx_node win = nx_window(g, p, (int64_t[]){2, 3}, (int64_t[]){1, 2}, NULL);
    nx_node red = nx_reduce(g, win, 2, (int[]){2, 3}, NX_MONOID_MAX, false);
    nx_node px = nx_placeholder(g, NX_DTYPE_F64), a = nx_placeholder(g, NX_DTYPE_F64),
            b = nx_placeholder(g, NX_DTYPE_F64);
    nx_monoid_def m = {.ncarry = 1,
                       .x = px,
                       .a = {a},
                       .b = {b},
                       .lift = {nx_mul(g, px, px)},
                       .combine = {nx_add(g, a, b)},
                       .identity = {nx_scalar(g, NX_DTYPE_F64, 0)},
                       .finalize = nx_sqrt(g, a)};
    nx_node norm = nx_reduce_custom(g, x, 1, (int[]){1}, &m, false);
    nx_node gat = nx_gather(g, x, idx, 1);
    nx_node sc = nx_scatter(g, x, idx, gat, 1, NX_MONOID_SUM);
    nx_node vals = NX_NONE, inds = NX_NONE;
    nx_topk(g, x, 2, 1, true, &vals, &inds);
    nx_node cs = nx_scan(g, x, 0, NX_MONOID_LOGSUMEXP, false);
    nx_node sl = nx_scan_linear(g, nx_scalar(g, NX_DTYPE_F64, 0.5), x, 1, true);
    nx_node io = nx_iota(g, NX_DTYPE_F64, 2, (int64_t[]){4, 3}, 0);
    nx_node sel = nx_select(g, nx_gt(g, gat, io), gat, io);
    nx_node e = nx_extern(g, &copy, 1, &sel);
    nx_node v = nx_var(g, x, 1, (int[]){0}, 1, false);
    nx_node es = nx_einsum(g, "ij,jk->ik", x, w, NX_MONOID_MAX, nx_add);
    nx_node st = nx_sort(g, nx_concat(g, 2, (nx_node[]){sm, red}, 0), 0, true);
    outs[0] = nx_add(g, nx_add(g, sm, red), nx_add(g, e, es));
    outs[1] = nx_add(
        g, norm, nx_reduce(g, nx_cast(g, inds, NX_DTYPE_F64), 1, (int[]){1}, NX_MONOID_SUM, false));
    outs[2] = nx_add(g, nx_add(g, sc, cs), nx_reverse(g, sl, 1, (int[]){0}));
    outs[3] = nx_add(g, vals, nx_slice(g, v, (int64_t[]){0}, (int64_t[]){2}, NULL));
    outs[4] = nx_mean(g, st, 1, (int[]){1}, true);
}

static nx_status build_body(nx_ctx *ctx, void *user)
{
    (void)user;
    nx_graph *g = NULL;
    nx_status st = nx_graph_new(ctx, &g);
    if (st != NX_OK)
        return st;
    nx_node outs[5];
    sample(g, outs);
    st = nx_graph_status(g);
    nx_graph_free(g);
    return st;
}

static nx_status compile_body(nx_ctx *ctx, void *user)
{
    (void)user;
    nx_graph *g = NULL;
    nx_status st = nx_graph_new(ctx, &g);
    if (st != NX_OK)
        return st;
    nx_node outs[5];
    sample(g, outs);
    nx_compile_opts o = {.backend = NX_BACKEND_REF, .n_outputs = 5, .outputs = outs};
    nx_program *p = NULL;
    st = nx_graph_compile(g, &o, &p);
    nx_program_free(p);
    nx_graph_free(g);
    return st;
}

static nx_status run_body(nx_ctx *ctx, void *user)
{
    (void)user;
    nx_graph *g = NULL;
    nx_status st = nx_graph_new(ctx, &g);
    if (st != NX_OK)
        return st;
    nx_node outs[5];
    sample(g, outs);
    nx_compile_opts o = {.backend = NX_BACKEND_REF, .n_outputs = 5, .outputs = outs};
    nx_program *p = NULL;
    st = nx_graph_compile(g, &o, &p);
    nx_graph_free(g);
    if (st != NX_OK)
        return st;
    static double xd[20], wd[15];
    static int64_t id[3] = {4, -1, 2};
    for (int i = 0; i < 20; i++)
        xd[i] = (i * 7 % 11) - 5.0;
    for (int i = 0; i < 15; i++)
        wd[i] = (i % 4) * 0.25;
    nx_tensor *ins[3] = {NULL, NULL, NULL}, *res[5];
    st = nx_tensor_wrap(ctx, xd, NX_DTYPE_F64, 2, (int64_t[]){4, 5}, NULL, &ins[0]);
    if (st == NX_OK)
        st = nx_tensor_wrap(ctx, wd, NX_DTYPE_F64, 2, (int64_t[]){5, 3}, NULL, &ins[1]);
    if (st == NX_OK)
        st = nx_tensor_wrap(ctx, id, NX_DTYPE_I64, 1, (int64_t[]){3}, NULL, &ins[2]);
    if (st == NX_OK)
        st = nx_program_run(p, (const nx_tensor *const *)ins, res);
    for (int i = 0; st == NX_OK && i < 5; i++)
        nx_tensor_free(res[i]);
    for (int i = 0; i < 3; i++)
        nx_tensor_free(ins[i]);
    nx_program_free(p);
    return st;
}

static void test_alloc_sweeps(void **state)
{
    (void)state;
    int64_t nb = nx_test_alloc_sweep(build_body, NULL, 5000);
    int64_t nc = nx_test_alloc_sweep(compile_body, NULL, 5000);
    int64_t nr = nx_test_alloc_sweep(run_body, NULL, 20000);
    assert_true(nb > 10);
    assert_true(nc > nb);
    assert_true(nr > nc);
    printf("allocation sweeps: build %lld, compile %lld, run %lld allocations\n", (long long)nb,
           (long long)nc, (long long)nr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compile_errors),
        cmocka_unit_test(test_run_input_errors),
        cmocka_unit_test(test_failed_run_leaves_no_outputs),
        cmocka_unit_test(test_only_needed_nodes_run),
        cmocka_unit_test(test_program_outlives_graph_and_strided_inputs),
        cmocka_unit_test(test_single_leaf_graph),
        cmocka_unit_test(test_deep_chain),
        cmocka_unit_test(test_fallback_warning),
        cmocka_unit_test(test_strict_backend),
        cmocka_unit_test(test_dump_graph),
        cmocka_unit_test(test_alloc_sweeps),
    };
    return cmocka_run_group_tests_name("ir-program", tests, NULL, NULL);
}
