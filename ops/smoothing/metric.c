/* Feature metrics of the bilateral family: M = L L^T applied as |L^T delta|^2 (or the diagonal
 * form) in the graph, so the metric's parameter is differentiated like any input; the checks the
 * family's op files share (bilateral.h); and the block-diagonal factor, a host constructor that
 * is not a row of the op table (it takes a list of (kind, param) pairs, not a fixed set of
 * tensors). The Cholesky factor of an SPD matrix is the op metric_from_spd (metric-from-spd.c). */
#include <math.h>
#include <string.h>

#include "bilateral.h"
#include "ops/semiring/semiring.h"

nx_node nx_metric_sqdist_node(nx_graph *g, nx_metric_kind kind, nx_node param, nx_node delta)
{
    int last = -1;
    nx_node proj = NX_NONE;
    if (kind == NX_METRIC_DIAGONAL) {
        proj = nx_div(g, delta, param);
    } else if (kind == NX_METRIC_FACTOR) {
        /* (L^T delta)_r = sum_c delta_c L_cr: delta [..., d_f, 1] against L [d_f, r], folded
         * over d_f, so the backends stream it with the rest of the row. */
        int nd = nx_node_ndim(g, delta);
        int64_t s[NX_MAX_DIMS];
        if (nd >= 1 && nd < NX_MAX_DIMS && nx_node_shape(g, delta, s)) {
            s[nd] = 1;
            int ax = -2;
            proj = nx_reduce(g, nx_mul(g, nx_reshape(g, delta, nd + 1, s), param), 1, &ax,
                             NX_MONOID_SUM, false);
        } else {
            proj = nx_reshape(g, delta, 0, NULL); /* records the bad operand */
        }
    } else {
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                 "nx_metric_sqdist_node: kind %d is not an nx_metric_kind",
                                 (int)kind);
    }
    return nx_reduce(g, nx_mul(g, proj, proj), 1, &last, NX_MONOID_SUM, false);
}

nx_status nx_bil_check_metric(nx_ctx *ctx, const char *who, const nx_feature_metric *m, nx_dtype dt,
                              int64_t d_f)
{
    if ((unsigned)m->kind >= NX_METRIC_KIND_COUNT)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: metric kind %d is not an nx_metric_kind",
                           who, (int)m->kind);
    nx_status st = nx_sr_check_float(ctx, who, "the metric's param", m->param);
    if (st != NX_OK)
        return st;
    const nx_tensor *p = m->param;
    if (dt != NX_DTYPE_COUNT && nx_tensor_dtype(p) != dt)
        return nx_rt_error(ctx, NX_ERR_DTYPE,
                           "%s: the metric's param is %s but the features are %s", who,
                           nx_dtype_name(nx_tensor_dtype(p)), nx_dtype_name(dt));
    bool diag = m->kind == NX_METRIC_DIAGONAL;
    int want_nd = diag ? 1 : 2;
    if (nx_tensor_ndim(p) != want_nd || (d_f >= 0 && nx_tensor_shape(p)[0] != d_f) ||
        (!diag && nx_tensor_shape(p)[1] < 1))
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "%s: the metric's param has %d dims (first extent %lld); expected %s "
                           "with d_f = %lld",
                           who, nx_tensor_ndim(p),
                           (long long)(nx_tensor_ndim(p) ? nx_tensor_shape(p)[0] : -1),
                           diag ? "sigma [d_f]" : "L [d_f, r], r >= 1", (long long)d_f);
    int64_t bad = -1;
    double v = 0;
    if (!nx_bil_all_finite(p, &bad, &v) || (diag && !nx_bil_all_positive(p, &bad, &v)))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: the metric's param element %lld is %g; expected %s", who,
                           (long long)bad, v, diag ? "finite sigma > 0" : "finite values");
    return NX_OK;
}

double nx_bil_at(const nx_tensor *t, const int64_t *idx)
{
    const char *base = nx_tensor_data(t);
    int64_t off = 0;
    for (int i = 0; i < nx_tensor_ndim(t); i++)
        off += idx[i] * nx_tensor_strides(t)[i];
    switch (nx_tensor_dtype(t)) {
    case NX_DTYPE_F32:
        return ((const float *)(const void *)base)[off];
    case NX_DTYPE_F64:
        return ((const double *)(const void *)base)[off];
    case NX_DTYPE_I32:
        return ((const int32_t *)(const void *)base)[off];
    case NX_DTYPE_I64:
        return (double)((const int64_t *)(const void *)base)[off];
    case NX_DTYPE_I16:
        return ((const int16_t *)(const void *)base)[off];
    case NX_DTYPE_I8:
        return ((const int8_t *)(const void *)base)[off];
    case NX_DTYPE_U8:
    case NX_DTYPE_BOOL:
        return ((const uint8_t *)(const void *)base)[off];
    default:
        return NAN;
    }
}

/* Visits every element of t in C order; stops at the first for which ok() is false. */
static bool all_of(const nx_tensor *t, bool (*ok)(double), int64_t *bad, double *value)
{
    int nd = nx_tensor_ndim(t);
    int64_t n = nx_tensor_numel(t), idx[NX_MAX_DIMS] = {0};
    for (int64_t e = 0; e < n; e++) {
        double v = nx_bil_at(t, idx);
        if (!ok(v)) {
            *bad = e;
            *value = v;
            return false;
        }
        for (int a = nd - 1; a >= 0 && ++idx[a] == nx_tensor_shape(t)[a]; a--)
            idx[a] = 0;
    }
    return true;
}

static bool finite_value(double v)
{
    return isfinite(v);
}

static bool positive(double v)
{
    return v > 0;
}

bool nx_bil_all_finite(const nx_tensor *t, int64_t *bad, double *value)
{
    return all_of(t, finite_value, bad, value);
}

bool nx_bil_all_positive(const nx_tensor *t, int64_t *bad, double *value)
{
    return all_of(t, positive, bad, value);
}

/* ---- factors on the host ----------------------------------------------------------------------*/

static void put(nx_tensor *t, int64_t i, double v)
{
    if (nx_tensor_dtype(t) == NX_DTYPE_F32)
        ((float *)nx_tensor_data(t))[i] = (float)v;
    else
        ((double *)nx_tensor_data(t))[i] = v;
}

nx_status nx_metric_block_diagonal(nx_ctx *ctx, int n_blocks, const nx_feature_metric *blocks,
                                   nx_tensor **factor)
{
    static const char *who = "nx_metric_block_diagonal";
    if (!ctx || !factor)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: ctx and factor must not be NULL", who);
    *factor = NULL;
    if (n_blocks < 1 || !blocks)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %d blocks; expected at least one", who,
                           n_blocks);
    int64_t rows = 0, cols = 0;
    nx_dtype dt = NX_DTYPE_COUNT;
    for (int b = 0; b < n_blocks; b++) {
        nx_status st = nx_bil_check_metric(ctx, who, &blocks[b], dt, -1);
        if (st != NX_OK)
            return st;
        const nx_tensor *p = blocks[b].param;
        dt = nx_tensor_dtype(p);
        rows += nx_tensor_shape(p)[0];
        cols +=
            blocks[b].kind == NX_METRIC_DIAGONAL ? nx_tensor_shape(p)[0] : nx_tensor_shape(p)[1];
    }
    nx_tensor *l = NULL;
    nx_status st = nx_tensor_new(ctx, dt, 2, (int64_t[]){rows, cols}, &l);
    if (st != NX_OK)
        return st;
    int64_t r0 = 0, c0 = 0;
    for (int b = 0; b < n_blocks; b++) {
        const nx_tensor *p = blocks[b].param;
        int64_t d = nx_tensor_shape(p)[0];
        if (blocks[b].kind == NX_METRIC_DIAGONAL) {
            for (int64_t i = 0; i < d; i++)
                put(l, (r0 + i) * cols + c0 + i, 1.0 / nx_bil_at(p, (int64_t[]){i}));
            c0 += d;
        } else {
            int64_t r = nx_tensor_shape(p)[1];
            for (int64_t i = 0; i < d; i++)
                for (int64_t j = 0; j < r; j++)
                    put(l, (r0 + i) * cols + c0 + j, nx_bil_at(p, (int64_t[]){i, j}));
            c0 += r;
        }
        r0 += d;
    }
    *factor = l;
    return NX_OK;
}

nx_status nx_bil_check_features(nx_ctx *ctx, const char *who, const nx_tensor *f)
{
    nx_status st = nx_sr_check_float(ctx, who, "features", f);
    if (st != NX_OK)
        return st;
    if (nx_tensor_ndim(f) != 2 || nx_tensor_shape(f)[1] < 1)
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "%s: features has %d dims; expected [n, d_f], d_f >= 1", who,
                           nx_tensor_ndim(f));
    int64_t bad = -1;
    double v = 0;
    if (!nx_bil_all_finite(f, &bad, &v))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: features of point %lld (component %lld) is %g; features must "
                           "be finite",
                           who, (long long)(bad / nx_tensor_shape(f)[1]),
                           (long long)(bad % nx_tensor_shape(f)[1]), v);
    return NX_OK;
}
