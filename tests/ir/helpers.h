/* Small helpers shared by the ir suite: run a graph on the reference interpreter, wrap arrays,
 * compare values and error messages. */
#ifndef NX_TEST_IR_HELPERS_H
#define NX_TEST_IR_HELPERS_H

#include <math.h>
#include <string.h>

#include "testutil.h"

/* Fails the test unless the graph's first error has status st and contains text. */
static inline void expect_graph_error(const nx_graph *g, nx_status st, const char *text)
{
    if (nx_graph_status(g) != st || !strstr(nx_graph_error(g), text))
        fail_msg("expected %s containing \"%s\", got %s: \"%s\"", nx_status_str(st), text,
                 nx_status_str(nx_graph_status(g)), nx_graph_error(g));
}

static inline nx_tensor *wrap(nx_ctx *ctx, nx_dtype dt, int ndim, const int64_t *shape, void *data)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_wrap(ctx, data, dt, ndim, shape, NULL, &t), NX_OK);
    return t;
}

/* Compiles outputs on `ref` and runs them; fails the test on any error. */
static inline void run_graph(nx_graph *g, int nout, const nx_node *outs, int nin, nx_tensor **ins,
                             nx_tensor **res)
{
    nx_compile_opts o = {.backend = NX_BACKEND_REF, .n_outputs = nout, .outputs = outs};
    nx_program *p = NULL;
    nx_status st = nx_graph_compile(g, &o, &p);
    if (st != NX_OK)
        fail_msg("compile: %s: %s", nx_status_str(st), nx_ctx_last_error(nx_graph_ctx(g)));
    assert_int_equal(nx_program_num_inputs(p), nin);
    st = nx_program_run(p, (const nx_tensor *const *)ins, res);
    if (st != NX_OK)
        fail_msg("run: %s: %s", nx_status_str(st), nx_ctx_last_error(nx_graph_ctx(g)));
    nx_program_free(p);
}

static inline nx_tensor *run1(nx_graph *g, nx_node out, int nin, nx_tensor **ins)
{
    nx_tensor *r = NULL;
    run_graph(g, 1, &out, nin, ins, &r);
    return r;
}

/* Value i of t as double, whatever its dtype. */
static inline double value_at(const nx_tensor *t, int64_t i)
{
    const char *d = nx_tensor_data(t);
    switch (nx_tensor_dtype(t)) {
    case NX_DTYPE_F32:
        return ((const float *)d)[i];
    case NX_DTYPE_F64:
        return ((const double *)d)[i];
    case NX_DTYPE_I32:
        return ((const int32_t *)d)[i];
    case NX_DTYPE_I64:
        return (double)((const int64_t *)d)[i];
    case NX_DTYPE_I8:
        return ((const int8_t *)d)[i];
    case NX_DTYPE_U8:
    case NX_DTYPE_BOOL:
        return ((const uint8_t *)d)[i];
    case NX_DTYPE_I16:
        return ((const int16_t *)d)[i];
    default:
        fail_msg("value_at: dtype %s", nx_dtype_name(nx_tensor_dtype(t)));
        return 0;
    }
}

/* Exact comparison (NaN equals NaN, signed infinities equal themselves); frees t. */
static inline void expect_values(nx_tensor *t, int64_t n, const double *want, const char *what)
{
    if (nx_tensor_numel(t) != n)
        fail_msg("%s: %lld values, expected %lld", what, (long long)nx_tensor_numel(t),
                 (long long)n);
    for (int64_t i = 0; i < n; i++) {
        double got = value_at(t, i);
        bool same = (isnan(got) && isnan(want[i])) || got == want[i];
        if (!same)
            fail_msg("%s: value %lld is %.17g, expected %.17g", what, (long long)i, got, want[i]);
    }
    nx_tensor_free(t);
}

/* Closeness within rtol (scale-free); frees t. */
static inline void expect_close(nx_tensor *t, int64_t n, const double *want, double rtol,
                                const char *what)
{
    assert_int_equal(nx_tensor_numel(t), n);
    for (int64_t i = 0; i < n; i++) {
        if (!nx_test_close(value_at(t, i), want[i], rtol, 0))
            fail_msg("%s: value %lld is %.17g, expected %.17g (rtol %g)", what, (long long)i,
                     value_at(t, i), want[i], rtol);
    }
    nx_tensor_free(t);
}

static inline void expect_shape(const nx_tensor *t, int ndim, const int64_t *shape)
{
    assert_int_equal(nx_tensor_ndim(t), ndim);
    for (int i = 0; i < ndim; i++)
        assert_int_equal(nx_tensor_shape(t)[i], shape[i]);
}

#endif
