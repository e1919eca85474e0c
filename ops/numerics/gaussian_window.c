/* The op `gaussian_window` (spec §4.12, api-a §9): the importance window of sliding-window
 * inference (nnU-Net's, MONAI's gaussian blending),
 *     w[i] = prod_d exp(-((i_d - c_d)^2 - r_d^2) / (2 sigma_d^2)),
 *     c_d = (s_d - 1) / 2,  sigma_d = sigma_scale s_d,  r_d = 0 (s_d odd) or 1/2 (s_d even),
 * so the window is symmetric (a tile and its mirror image weigh alike) and its largest value is
 * exactly 1 (r_d is the distance from the centre to the nearest sample). nnU-Net centres at
 * s // 2 and blurs a delta with scipy's truncated filter; this is the closed form the blur
 * approximates, centred. No inputs: `shape` and `dtype` are options. Not differentiable. */
#include <math.h>

#include "ops/numerics/numerics.h"

typedef struct gw_args {
    nx_backend backend;
    int64_t shape[NX_MAX_DIMS];
    int nshape;
    double sigma_scale;
    int dtype; /* nx_dtype */
} gw_args;

static nx_status check(const nx_op_args *c)
{
    const gw_args *o = c->opts;
    if (o->nshape < 1 || o->nshape > NX_MAX_DIMS)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: %d extents in shape; expected 1..%d",
                           c->who, o->nshape, NX_MAX_DIMS);
    int64_t numel = 1;
    for (int i = 0; i < o->nshape; i++) {
        if (o->shape[i] < 1 || o->shape[i] > INT32_MAX)
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: shape[%d] is %lld; expected 1 .. 2^31 - 1", c->who, i,
                               (long long)o->shape[i]);
        if (numel > INT64_MAX / o->shape[i])
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: the shape's size overflows",
                               c->who);
        numel *= o->shape[i];
    }
    if (!(o->sigma_scale > 0) || isinf(o->sigma_scale))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: sigma_scale is %g; expected a finite value > 0", c->who,
                           o->sigma_scale);
    if (o->dtype != NX_DTYPE_F32 && o->dtype != NX_DTYPE_F64)
        return nx_rt_error(c->ctx, NX_ERR_DTYPE, "%s: dtype %s; expected float32 or float64",
                           c->who, nx_dtype_name((nx_dtype)o->dtype));
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const gw_args *o = c->opts;
    int nd = o->nshape;
    nx_node w = NX_NONE;
    for (int d = 0; d < nd; d++) {
        int64_t s = o->shape[d];
        double ctr = (double)(s - 1) / 2, sigma = o->sigma_scale * (double)s;
        double r = s % 2 ? 0.0 : 0.5;
        int64_t vs[NX_MAX_DIMS];
        for (int k = 0; k < nd; k++)
            vs[k] = k == d ? s : 1;
        nx_node i = nx_iota(g, NX_DTYPE_F64, nd, vs, d);
        nx_node u = nx_sub(g, i, nx_scalar(g, NX_DTYPE_F64, ctr));
        nx_node e = nx_sub(g, nx_mul(g, u, u), nx_scalar(g, NX_DTYPE_F64, r * r));
        nx_node v = nx_exp(g, nx_mul(g, e, nx_scalar(g, NX_DTYPE_F64, -0.5 / (sigma * sigma))));
        w = w == NX_NONE ? v : nx_mul(g, w, v);
    }
    outs[0] = nx_cast(g, nx_broadcast(g, w, nd, o->shape), (nx_dtype)o->dtype);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"shape", NX_OPT_INTS, NULL, "1:", NX_MAX_DIMS, "the window's extents (the patch size)"},
    {"sigma_scale", NX_OPT_FLOAT, "0.125", "0:", 1, "sigma per axis as a fraction of its extent"},
    {"dtype", NX_OPT_DTYPE, "float32", NULL, 1, "float32 or float64"},
};

static const nx_op_field fields[] = {
    {offsetof(gw_args, shape), offsetof(gw_args, nshape), sizeof(int64_t) * NX_MAX_DIMS},
    {offsetof(gw_args, sigma_scale), NX_OP_NO_FIELD, sizeof(double)},
    {offsetof(gw_args, dtype), NX_OP_NO_FIELD, sizeof(int)},
};

/* exp of exactly computed arguments against the float64 closed form */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-6, 1e-7},
    {NX_DTYPE_F64, NULL, NULL, 1e-13, 1e-15},
};

const nx_op_desc nx_op_gaussian_window = {
    .info = {.nopts = 3, .opts = opts},
    .opts_size = sizeof(gw_args),
    .fields = fields,
    .backend_offset = offsetof(gw_args, backend),
    .check = check,
    .build = build,
    .golden = "numerics",
    .tols = tols,
    .ntols = 2,
};
