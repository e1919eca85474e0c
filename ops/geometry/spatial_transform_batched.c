/* The op `spatial_transform_batched` (spec §4.8): spatial_transform over a batch axis that either
 * side may broadcast: image [B or 1, *spatial, channels], deformation [B or 1, *spatial_out,
 * ndim], y [B, *spatial_out, channels]. One image under B deformations samples it once at every
 * point of all of them; B images under one deformation broadcast it. */
#include "ops/geometry/sample.h"

static nx_status check(const nx_op_args *c)
{
    const nx_geo_args *o = c->opts;
    nx_status st = nx_geo_check_opts(c, o);
    if (st == NX_OK)
        st = nx_geo_check_float(c, 0, 0);
    if (st == NX_OK)
        st = nx_geo_check_float(c, 1, 0);
    if (st != NX_OK)
        return st;
    const nx_tensor *im = c->in[0], *df = c->in[1];
    int r = nx_tensor_ndim(im), rd = nx_tensor_ndim(df);
    const int64_t *is = nx_tensor_shape(im), *ds = nx_tensor_shape(df);
    int64_t nd = rd > 0 ? ds[rd - 1] : 0;
    if (nd < 1 || nd > NX_GEO_SPATIAL_MAX || rd != nd + 2 || r != nd + 2)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: image has %d dims, deformation %d with ndim = %lld; expected "
                           "image [batch, *spatial, channels] and deformation [batch, "
                           "*spatial_out, ndim], ndim 1..3 spatial axes each",
                           c->who, r, rd, (long long)nd);
    if (is[0] != ds[0] && is[0] != 1 && ds[0] != 1)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: batch is %lld in image and %lld in deformation; expected equal, "
                           "or 1 on one side (broadcast)",
                           c->who, (long long)is[0], (long long)ds[0]);
    if (nx_tensor_numel(im) == 0 || nx_tensor_numel(df) == 0)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: image or deformation is empty; expected every extent >= 1",
                           c->who);
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_geo_args *o = c->opts;
    const nx_tensor *im = c->in[0], *df = c->in[1];
    nx_dtype dt = nx_tensor_dtype(im);
    int r = nx_tensor_ndim(im);
    const int64_t *is = nx_tensor_shape(im), *ds = nx_tensor_shape(df);
    int nd = r - 2;
    nx_node a = nx_parameter(g, "image", dt, r, is);
    nx_node d = nx_parameter(g, "deformation", dt, r, ds);
    int64_t B = is[0] > ds[0] ? is[0] : ds[0], P = 1, out[NX_MAX_DIMS];
    for (int k = 1; k <= nd; k++)
        P *= ds[k];
    out[0] = B;
    for (int k = 1; k <= nd; k++)
        out[k] = ds[k];
    out[nd + 1] = is[nd + 1];
    bool fir = false;
    nx_status st = nx_geo_prefilter_fir(c, o, &fir);
    if (st != NX_OK)
        return st;
    nx_node y;
    if (is[0] == 1 && B > 1) { /* one image: every deformation's points in one batch */
        int64_t cs[3] = {1, B * P, nd};
        y = nx_geo_resample_points(g, a, nx_reshape(g, d, 3, cs), o, fir);
    } else {
        int64_t cs[3] = {ds[0], P, nd}, bs[3] = {B, P, nd};
        y = nx_geo_resample_points(g, a, nx_broadcast(g, nx_reshape(g, d, 3, cs), 3, bs), o,
                                   fir);
    }
    outs[0] = nx_reshape(g, y, r, out);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {NX_GEO_SAMPLE_OPTS("constant")};
static const nx_op_field fields[] = {NX_GEO_SAMPLE_FIELDS};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 2e-5, 2e-5},
    {NX_DTYPE_F64, NULL, NULL, 1e-11, 1e-11},
};

const nx_op_desc nx_op_spatial_transform_batched = {
    .info = {.nopts = NX_GEO_SAMPLE_NOPTS, .opts = opts},
    .opts_size = sizeof(nx_geo_args),
    .fields = fields,
    .backend_offset = offsetof(nx_geo_args, backend),
    .check = check,
    .key = nx_geo_key,
    .build = build,
    .golden = "geometry",
    .tols = tols,
    .ntols = 2,
};
