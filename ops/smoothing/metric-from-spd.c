/* The op metric_from_spd: the lower Cholesky factor L of a symmetric positive definite M (M =
 * L L^T), the FactorMetric of the spec. A host op (NX_OP_HOST): a d x d factorisation in f64 on
 * the host, whatever backend is asked for; its typed entry point nx_metric_from_spd is a short
 * wrapper around the runner. */
#include <math.h>
#include <string.h>

#include "bilateral.h"
#include "ops/op.h"
#include "ops/semiring/semiring.h"

static nx_status check_spd(nx_ctx *ctx, const char *who, const nx_tensor *m, const double *a,
                           int64_t d)
{
    double scale = 0;
    for (int64_t i = 0; i < d * d; i++) {
        if (!isfinite(a[i]))
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                               "%s: element (%lld, %lld) is %g; expected "
                               "a finite symmetric positive definite matrix",
                               who, (long long)(i / d), (long long)(i % d), a[i]);
        scale = fmax(scale, fabs(a[i]));
    }
    double tol = (nx_tensor_dtype(m) == NX_DTYPE_F32 ? 1e-5 : 1e-10) * scale;
    for (int64_t i = 0; i < d; i++)
        for (int64_t j = 0; j < i; j++)
            if (fabs(a[i * d + j] - a[j * d + i]) > tol)
                return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                                   "%s: the matrix is not symmetric: (%lld, %lld) is %g but "
                                   "(%lld, %lld) is %g",
                                   who, (long long)i, (long long)j, a[i * d + j], (long long)j,
                                   (long long)i, a[j * d + i]);
    return NX_OK;
}

/* In-place lower Cholesky of the d x d matrix a (upper triangle zeroed). */
static nx_status cholesky(nx_ctx *ctx, const char *who, double *a, int64_t d)
{
    for (int64_t j = 0; j < d; j++) {
        double s = a[j * d + j];
        for (int64_t k = 0; k < j; k++)
            s -= a[j * d + k] * a[j * d + k];
        if (!(s > 0))
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                               "%s: the matrix is not positive definite (pivot %lld is %g; "
                               "expected > 0)",
                               who, (long long)j, s);
        double ljj = sqrt(s);
        a[j * d + j] = ljj;
        for (int64_t i = j + 1; i < d; i++) {
            double t = a[i * d + j];
            for (int64_t k = 0; k < j; k++)
                t -= a[i * d + k] * a[j * d + k];
            a[i * d + j] = t / ljj;
        }
        for (int64_t i = 0; i < j; i++)
            a[i * d + j] = 0;
    }
    return NX_OK;
}

static nx_status check(const nx_op_args *c)
{
    const nx_tensor *spd = c->in[0];
    nx_status st = nx_sr_check_float(c->ctx, c->who, "spd", spd);
    if (st != NX_OK)
        return st;
    if (nx_tensor_device(spd) != NX_DEVICE_HOST)
        return nx_rt_error(c->ctx, NX_ERR_UNSUPPORTED,
                           "%s: spd is a device tensor; expected a host tensor (a host op)",
                           c->who);
    if (nx_tensor_ndim(spd) != 2 || nx_tensor_shape(spd)[0] != nx_tensor_shape(spd)[1] ||
        nx_tensor_shape(spd)[0] < 1)
        return nx_rt_error(
            c->ctx, NX_ERR_SHAPE, "%s: spd has %d dims%s; expected a square [d, d], d >= 1", c->who,
            nx_tensor_ndim(spd), nx_tensor_ndim(spd) == 2 ? " and is not square or empty" : "");
    return NX_OK;
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    const nx_tensor *spd = c->in[0];
    nx_tensor *a = NULL;
    nx_status st = nx_tensor_cast(spd, NX_DTYPE_F64, &a);
    if (st != NX_OK)
        return st;
    int64_t d = nx_tensor_shape(spd)[0];
    double *v = nx_tensor_data(a);
    st = check_spd(c->ctx, c->who, spd, v, d);
    if (st == NX_OK)
        st = cholesky(c->ctx, c->who, v, d);
    if (st == NX_OK && nx_tensor_dtype(spd) == NX_DTYPE_F32)
        st = nx_tensor_cast(a, NX_DTYPE_F32, &outs[0]);
    else if (st == NX_OK)
        outs[0] = a, a = NULL;
    nx_tensor_free(a);
    return st;
}

/* Golden replay against numpy.linalg.cholesky (golden/bilateral/spd_*). */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-12},
    {NX_DTYPE_F32, NULL, NULL, 1e-6, 1e-6},
};

const nx_op_desc nx_op_metric_from_spd = {
    .backend_offset = NX_OP_NO_FIELD,
    .check = check,
    .run = run,
    .golden = "bilateral",
    .tols = tols,
    .ntols = sizeof tols / sizeof tols[0],
    .flags = NX_OP_HOST,
};

nx_status nx_metric_from_spd(nx_ctx *ctx, const nx_tensor *spd, nx_tensor **factor)
{
    return nx_op_run_as(ctx, &nx_op_metric_from_spd, "nx_metric_from_spd",
                        (const nx_tensor *const[]){spd}, NULL, factor);
}
