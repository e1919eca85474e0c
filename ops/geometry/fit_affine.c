/* The op `fit_affine`: the weighted least-squares affine between corresponding points,
 *   M = argmin sum_i w_i |source_i - (M[:, :n] target_i + M[:, n])|^2,   [..., n, n+1],
 * so that M maps target onto source (the pull-back convention of the JAX version: M resamples a
 * source image into target space through affine_grid). Normal equations (X^T W X) B = X^T W Y with
 * X = [target, 1] and Y = source, solved by nx_mat_solve (pivoted, matfun.h); M = B^T. weights
 * [..., m] (or [..., m, 1]; absent: all 1) should be >= 0 (not checked: data). Fewer than n + 1
 * points is an error; points that do not span the space (a singular X^T W X) give NaN (documented).
 * An IR graph: the gradients of source, target and weights. */
#include <math.h>
#include <string.h>

#include "ops/geometry/affine.h"

typedef struct fit_args {
    nx_backend backend;
} fit_args;

static nx_status check(const nx_op_args *c)
{
    nx_status st = nx_geo_check_float(c, 0, 2);
    if (st == NX_OK)
        st = nx_geo_check_float(c, 1, 2);
    if (st != NX_OK)
        return st;
    const nx_tensor *s = c->in[0], *t = c->in[1], *w = c->in[2];
    int nd = nx_tensor_ndim(s);
    const int64_t *ss = nx_tensor_shape(s);
    char b1[128], b2[128];
    if (nx_tensor_ndim(t) != nd || memcmp(ss, nx_tensor_shape(t), sizeof(int64_t) * nd) != 0)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: source is %s but target is %s; expected one shape [..., m, n]",
                           c->who, nx_shape_str(b1, sizeof b1, nd, ss),
                           nx_shape_str(b2, sizeof b2, nx_tensor_ndim(t), nx_tensor_shape(t)));
    int64_t m = ss[nd - 2], n = ss[nd - 1];
    if (n < 1 || n > NX_GEO_MAX_RANK)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: points of %lld coordinates; expected 1..%d",
                           c->who, (long long)n, NX_GEO_MAX_RANK);
    if (m < n + 1)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: %lld points in %lld dimensions; expected at least %lld (n + 1) "
                           "to determine an affine",
                           c->who, (long long)m, (long long)n, (long long)(n + 1));
    if (w) {
        if ((st = nx_geo_check_float(c, 2, 1)) != NX_OK)
            return st;
        int nw = nx_tensor_ndim(w);
        const int64_t *sw = nx_tensor_shape(w);
        bool ok = (nw == nd - 1 && memcmp(sw, ss, sizeof(int64_t) * (nd - 1)) == 0) ||
                  (nw == nd && memcmp(sw, ss, sizeof(int64_t) * (nd - 1)) == 0 && sw[nd - 1] == 1);
        if (!ok)
            return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                               "%s: weights is %s; expected %s's leading shape [..., m] (or "
                               "[..., m, 1])",
                               c->who, nx_shape_str(b1, sizeof b1, nw, sw), "source");
    }
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_tensor *st = c->in[0], *wt = c->in[2];
    nx_dtype dt = nx_tensor_dtype(st);
    int nd = nx_tensor_ndim(st);
    const int64_t *ss = nx_tensor_shape(st);
    nx_node y = nx_parameter(g, "source", dt, nd, ss);
    nx_node x = nx_parameter(g, "target", dt, nd, ss);
    int64_t s1[NX_MAX_DIMS] = {0};
    memcpy(s1, ss, sizeof(int64_t) * (size_t)nd);
    s1[nd - 1] = 1;
    nx_node parts[2] = {x, nx_broadcast(g, nx_scalar(g, dt, 1.0), nd, s1)};
    nx_node xh = nx_concat(g, 2, parts, nd - 1); /* [..., m, n+1] */
    nx_node xt = nx_mat_transpose(g, xh);         /* [..., n+1, m] */
    if (wt) {
        nx_node w = nx_parameter(g, "weights", dt, nx_tensor_ndim(wt), nx_tensor_shape(wt));
        s1[nd - 2] = 1;
        s1[nd - 1] = ss[nd - 2];
        xt = nx_mul(g, xt, nx_reshape(g, w, nd, s1));
    }
    nx_node sing = NX_NONE;
    nx_node b = nx_mat_solve(g, nx_matmul(g, xt, xh), nx_matmul(g, xt, y), &sing);
    memcpy(s1, ss, sizeof(int64_t) * (size_t)nd);
    s1[nd - 2] = 1;
    s1[nd - 1] = 1;
    sing = nx_reshape(g, sing, nd, s1);
    outs[0] = nx_select(g, sing, nx_scalar(g, dt, NAN), nx_mat_transpose(g, b));
    return nx_graph_status(g);
}

/* Against numpy.linalg.lstsq on sqrt(w)-scaled rows in float64 (the normal equations square
 * the condition number: 1e-7 as the JAX version's tests). */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-3, 1e-4},
    {NX_DTYPE_F64, NULL, NULL, 1e-9, 1e-9},
};

const nx_op_desc nx_op_fit_affine = {
    .opts_size = sizeof(fit_args),
    .backend_offset = offsetof(fit_args, backend),
    .check = check,
    .build = build,
    .golden = "geometry",
    .tols = tols,
    .ntols = 2,
};
