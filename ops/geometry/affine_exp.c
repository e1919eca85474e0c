/* The op `affine_exp`: an affine transform from its Lie parameters, homogeneous [..., d+1, d+1]:
 * params = (A row-major, d^2 entries; t, d entries), linear block exp(A) (the exponential of the
 * gl(d) generator: invertible, det = exp(tr A) > 0), translation t taken as it is (the JAX
 * version's chart, not the exponential of the (d+1)x(d+1) generator [[A, t], [0, 0]]).
 * exp(A) is nx_mat_expm (matfun.h): scaling and squaring with the Padé approximant of degree 13
 * (f64) or 7 (f32), built in the graph, so autodiff differentiates it. */
#include <string.h>

#include "ops/geometry/affine.h"

typedef struct affine_exp_args {
    nx_backend backend;
    int64_t ndim; /* 0: from the parameter count */
} affine_exp_args;

static nx_status check(const nx_op_args *c)
{
    const affine_exp_args *o = c->opts;
    nx_status st = nx_geo_check_float(c, 0, 1);
    if (st != NX_OK)
        return st;
    const nx_tensor *p = c->in[0];
    int64_t n = nx_tensor_shape(p)[nx_tensor_ndim(p) - 1];
    if (o->ndim != 0 && o->ndim != 2 && o->ndim != 3)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: ndim is %lld; expected 2 or 3",
                           c->who, (long long)o->ndim);
    if ((o->ndim != 0 && n != o->ndim * o->ndim + o->ndim) || (o->ndim == 0 && n != 6 && n != 12))
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: params has %lld entries on its last axis; expected %s", c->who,
                           (long long)n,
                           o->ndim == 0   ? "6 (2-D: A 2x2, t) or 12 (3-D: A 3x3, t)"
                           : o->ndim == 2 ? "6 for ndim 2 (A 2x2 row-major, t)"
                                          : "12 for ndim 3 (A 3x3 row-major, t)");
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_tensor *pt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(pt);
    int nd = nx_tensor_ndim(pt);
    int64_t n = nx_tensor_shape(pt)[nd - 1];
    int d = n == 6 ? 2 : 3;
    nx_node p = nx_parameter(g, "params", dt, nd, nx_tensor_shape(pt));
    int64_t lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0};
    memcpy(hi, nx_tensor_shape(pt), sizeof(int64_t) * (size_t)nd);
    hi[nd - 1] = d * d;
    nx_node a = nx_slice(g, p, lo, hi, NULL);
    hi[nd - 1] = d;
    hi[nd] = d;
    a = nx_reshape(g, a, nd + 1, hi);
    memcpy(hi, nx_tensor_shape(pt), sizeof(int64_t) * (size_t)nd);
    lo[nd - 1] = d * d;
    nx_node t = nx_slice(g, p, lo, hi, NULL);
    outs[0] = nx_geo_square(g, nx_geo_affine_from(g, nx_mat_expm(g, a), t));
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"ndim", NX_OPT_INT, "(from the parameter count)", NULL, 1,
     "2 (params: A 2x2 row-major, t: 6) or 3 (A 3x3, t: 12); not given: from the count"},
};

static const nx_op_field fields[] = {
    {offsetof(affine_exp_args, ndim), NX_OP_NO_FIELD, sizeof(int64_t)},
};

/* Against scipy.linalg.expm in float64 (generators of 1-norm up to about 20: a few squarings). */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 2e-5, 2e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-13},
};

const nx_op_desc nx_op_affine_exp = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(affine_exp_args),
    .fields = fields,
    .backend_offset = offsetof(affine_exp_args, backend),
    .check = check,
    .build = build,
    .golden = "geometry",
    .tols = tols,
    .ntols = 2,
};
