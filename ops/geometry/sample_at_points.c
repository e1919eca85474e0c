/* The op `sample_at_points` (spec §4.8): y[*n, :] = volume sampled at points[*n, :] (absolute
 * index coordinates, ndim = points' last extent, 1..3). volume is [*spatial] (y [*n]) or
 * [*spatial, channels] (y [*n, channels]). The sampler of spatial_transform (sample.c). */
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
    const nx_tensor *v = c->in[0], *p = c->in[1];
    int rv = nx_tensor_ndim(v), rp = nx_tensor_ndim(p);
    int64_t nd = rp > 0 ? nx_tensor_shape(p)[rp - 1] : 0;
    if (rp < 1 || nd < 1 || nd > NX_GEO_SPATIAL_MAX)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: points has %d dims, last extent %lld; expected [*n, ndim] with "
                           "ndim 1..3",
                           c->who, rp, (long long)nd);
    if (rv != nd && rv != nd + 1)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: volume has %d dims and points ndim = %lld; expected volume "
                           "[*spatial] or [*spatial, channels] with %lld spatial axes",
                           c->who, rv, (long long)nd, (long long)nd);
    if (nx_tensor_numel(v) == 0 || nx_tensor_numel(p) == 0)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: volume or points is empty; expected every extent >= 1", c->who);
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_geo_args *o = c->opts;
    const nx_tensor *v = c->in[0], *p = c->in[1];
    nx_dtype dt = nx_tensor_dtype(v);
    int rv = nx_tensor_ndim(v), rp = nx_tensor_ndim(p);
    const int64_t *vs = nx_tensor_shape(v), *ps = nx_tensor_shape(p);
    int nd = (int)ps[rp - 1];
    bool chan = rv == nd + 1;
    int64_t C = chan ? vs[rv - 1] : 1, P = 1, bs[NX_MAX_DIMS], out[NX_MAX_DIMS];
    nx_node a = nx_parameter(g, "volume", dt, rv, vs);
    nx_node q = nx_parameter(g, "points", dt, rp, ps);
    for (int k = 0; k < rp - 1; k++)
        P *= ps[k], out[k] = ps[k];
    bs[0] = 1;
    for (int k = 0; k < nd; k++)
        bs[1 + k] = vs[k];
    bs[1 + nd] = C;
    bool fir = false;
    nx_status st = nx_geo_prefilter_fir(c, o, &fir);
    if (st != NX_OK)
        return st;
    int64_t cs[3] = {1, P, nd};
    nx_node y = nx_geo_resample_points(g, nx_reshape(g, a, nd + 2, bs), nx_reshape(g, q, 3, cs),
                                       o, fir);
    int ro = rp - 1;
    if (chan)
        out[ro++] = C;
    outs[0] = nx_reshape(g, y, ro, out);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {NX_GEO_SAMPLE_OPTS("constant")};
static const nx_op_field fields[] = {NX_GEO_SAMPLE_FIELDS};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 2e-5, 2e-5},
    {NX_DTYPE_F64, NULL, NULL, 1e-11, 1e-11},
};

const nx_op_desc nx_op_sample_at_points = {
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
