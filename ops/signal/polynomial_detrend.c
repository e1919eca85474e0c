/* The op `polynomial_detrend` (spec §4.7, api-b §3): x minus its least-squares fit by a polynomial
 * of degree `degree` in time, per series (numpy.polyfit then polyval, subtracted):
 *     y = x - Q Q^T x along the time axis,
 * Q the (n, degree + 1) orthonormal basis of the Vandermonde columns 1, t, .., t^degree on
 * t = linspace(-1, 1, n), computed on the host in double (modified Gram-Schmidt, twice) and applied
 * as two matrix products in the graph (the fit's span does not depend on how t is scaled, and the
 * orthonormal basis avoids the normal equations' squared conditioning). rowvar (the spec's
 * keyword): true, time along the last axis; false, along the second-to-last. Linear in x, so the
 * gradient is y's own map applied to dy (autodiff). */
#include <math.h>

#include "ops/signal/signal.h"

#define MAX_DEGREE 16

typedef struct detrend_args {
    nx_backend backend;
    int64_t degree;
    bool rowvar;
} detrend_args;

static int time_axis(const nx_op_args *c)
{
    const detrend_args *o = c->opts;
    return nx_tensor_ndim(c->in[0]) - (o->rowvar ? 1 : 2);
}

static nx_status check(const nx_op_args *c)
{
    const detrend_args *o = c->opts;
    const nx_tensor *x = c->in[0];
    nx_dtype dt = nx_tensor_dtype(x);
    if (dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: x is %s; expected float32 or float64",
                           c->who, nx_dtype_name(dt));
    int nd = nx_tensor_ndim(x);
    if (nd < (o->rowvar ? 1 : 2))
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: x has rank %d; expected at least %d (rowvar "
                           "%s: time along axis %d)", c->who, nd, o->rowvar ? 1 : 2,
                           o->rowvar ? "true" : "false", o->rowvar ? -1 : -2);
    for (int i = 0; i < nd; i++)
        if (nx_tensor_shape(x)[i] == 0)
            return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: x is empty (axis %d has extent 0)",
                               c->who, i);
    int64_t n = nx_tensor_shape(x)[time_axis(c)];
    if (o->degree < 0 || o->degree > MAX_DEGREE)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: degree is %lld; expected 0..%d",
                           c->who, (long long)o->degree, MAX_DEGREE);
    if (o->degree >= n)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: degree %lld needs more than %lld samples along the time axis "
                           "(it has %lld); expected degree < samples",
                           c->who, (long long)o->degree, (long long)o->degree, (long long)n);
    return NX_OK;
}

/* Q (n, p) row-major, orthonormal columns spanning 1, t, .., t^(p-1). */
static void basis(int64_t n, int p, double *q)
{
    for (int64_t i = 0; i < n; i++) {
        double t = n > 1 ? -1.0 + 2.0 * (double)i / (double)(n - 1) : 0.0, v = 1;
        for (int j = 0; j < p; j++, v *= t)
            q[i * p + j] = v;
    }
    for (int j = 0; j < p; j++) {
        for (int pass = 0; pass < 2; pass++)
            for (int k = 0; k < j; k++) {
                double dot = 0;
                for (int64_t i = 0; i < n; i++)
                    dot += q[i * p + k] * q[i * p + j];
                for (int64_t i = 0; i < n; i++)
                    q[i * p + j] -= dot * q[i * p + k];
            }
        double norm = 0;
        for (int64_t i = 0; i < n; i++)
            norm += q[i * p + j] * q[i * p + j];
        norm = sqrt(norm);
        for (int64_t i = 0; i < n; i++)
            q[i * p + j] /= norm;
    }
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const detrend_args *o = c->opts;
    const nx_tensor *x = c->in[0];
    nx_dtype dt = nx_tensor_dtype(x);
    int nd = nx_tensor_ndim(x), ax = time_axis(c), p = (int)o->degree + 1;
    const int64_t *sh = nx_tensor_shape(x);
    int64_t n = sh[ax], batch = nx_tensor_numel(x) / n;
    size_t bytes = (size_t)n * (size_t)p * sizeof(double);
    double *q = nx_rt_alloc(c->ctx, bytes);
    float *qf = dt == NX_DTYPE_F32 ? nx_rt_alloc(c->ctx, bytes / 2) : NULL;
    if (!q || (dt == NX_DTYPE_F32 && !qf)) {
        nx_rt_free(c->ctx, q, bytes);
        nx_rt_free(c->ctx, qf, bytes / 2);
        return nx_rt_nomem(c->ctx, c->who, bytes);
    }
    basis(n, p, q);
    if (qf)
        for (int64_t i = 0; i < n * p; i++)
            qf[i] = (float)q[i];
    nx_node qn = nx_constant(g, dt, 2, (int64_t[]){n, p}, qf ? (const void *)qf : q);
    nx_rt_free(c->ctx, q, bytes);
    nx_rt_free(c->ctx, qf, bytes / 2);
    nx_node xn = nx_parameter(g, "x", dt, nd, sh);
    /* time last, the rest one batch axis */
    int perm[NX_MAX_DIMS], inv[NX_MAX_DIMS], k = 0;
    for (int i = 0; i < nd; i++)
        if (i != ax)
            perm[k++] = i;
    perm[k] = ax;
    for (int i = 0; i < nd; i++)
        inv[perm[i]] = i;
    int64_t psh[NX_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        psh[i] = sh[perm[i]];
    nx_node xt = nx_reshape(g, nx_permute(g, xn, perm), 2, (int64_t[]){batch, n});
    nx_node coef = nx_matmul(g, xt, qn);                                   /* (batch, p) */
    int tp[2] = {1, 0};
    nx_node fit = nx_matmul(g, coef, nx_permute(g, qn, tp));              /* (batch, n) */
    nx_node r = nx_reshape(g, nx_sub(g, xt, fit), nd, psh);
    outs[0] = nx_permute(g, r, inv);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"degree", NX_OPT_INT, "1", "0:16", 1, "polynomial degree (0: remove the mean)"},
    {"rowvar", NX_OPT_BOOL, "true", NULL, 1,
     "true: time along the last axis (rows are series); false: along the second-to-last"},
};

#define F(m) offsetof(detrend_args, m), NX_OP_NO_FIELD, sizeof(((detrend_args *)0)->m)
static const nx_op_field fields[] = {{F(degree)}, {F(rowvar)}};
#undef F

/* numpy.polyfit + polyval in float64; f32 projects in f32. */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-5},
    {NX_DTYPE_F64, NULL, NULL, 1e-11, 1e-11},
};

const nx_op_desc nx_op_polynomial_detrend = {
    .info = {.nopts = 2, .opts = opts},
    .opts_size = sizeof(detrend_args),
    .fields = fields,
    .backend_offset = offsetof(detrend_args, backend),
    .check = check,
    .build = build,
    .golden = "signal",
    .tols = tols,
    .ntols = 2,
};
