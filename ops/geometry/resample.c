/* The op `resample` (spec §4.8): image [*spatial, channels] resampled onto target_shape with
 * aligned corners: output index j along an axis of n_in -> n_out samples sits at the input
 * coordinate j (n_in - 1) / (n_out - 1) (0 when n_out = 1), sampled by `method` (sample.c). The
 * coordinates are iotas, so the program is one loop kernel with no coordinate array. */
#include "ops/geometry/sample.h"

static nx_status check(const nx_op_args *c)
{
    const nx_geo_args *o = c->opts;
    nx_status st = nx_geo_check_opts(c, o);
    if (st == NX_OK)
        st = nx_geo_check_float(c, 0, 0);
    if (st != NX_OK)
        return st;
    const nx_tensor *im = c->in[0];
    int r = nx_tensor_ndim(im);
    if (o->ntarget < 1 || o->ntarget > NX_GEO_SPATIAL_MAX || r != o->ntarget + 1)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: image has %d dims and target_shape %d extents; expected image "
                           "[*spatial, channels] with 1..3 spatial axes, one extent each",
                           c->who, r, o->ntarget);
    for (int a = 0; a < o->ntarget; a++)
        if (o->target_shape[a] < 1)
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: target_shape[%d] is %lld; expected >= 1", c->who, a,
                               (long long)o->target_shape[a]);
    if (nx_tensor_numel(im) == 0)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: image is empty; expected every extent >= 1",
                           c->who);
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_geo_args *o = c->opts;
    const nx_tensor *im = c->in[0];
    nx_dtype dt = nx_tensor_dtype(im);
    int r = nx_tensor_ndim(im), nd = r - 1;
    const int64_t *is = nx_tensor_shape(im);
    nx_node a = nx_parameter(g, "image", dt, r, is);
    int64_t ts[NX_MAX_DIMS], P = 1, out[NX_MAX_DIMS], bs[NX_MAX_DIMS];
    for (int k = 0; k < nd; k++)
        ts[k] = out[k] = o->target_shape[k], P *= ts[k];
    ts[nd] = 1;
    out[nd] = is[nd];
    nx_node axes[NX_GEO_SPATIAL_MAX];
    for (int k = 0; k < nd; k++) {
        double s = ts[k] > 1 ? (double)(is[k] - 1) / (double)(ts[k] - 1) : 0.0;
        axes[k] = nx_mul(g, nx_iota(g, dt, nd + 1, ts, k), nx_scalar(g, dt, s));
    }
    int64_t cs[3] = {1, P, nd};
    nx_node coords = nx_reshape(g, nx_concat(g, nd, axes, nd), 3, cs);
    bs[0] = 1;
    for (int k = 0; k < r; k++)
        bs[1 + k] = is[k];
    bool fir = false;
    nx_status st = nx_geo_prefilter_fir(c, o, &fir);
    if (st != NX_OK)
        return st;
    nx_node y = nx_geo_resample_points(g, nx_reshape(g, a, r + 1, bs), coords, o, fir);
    outs[0] = nx_reshape(g, y, r, out);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"target_shape", NX_OPT_INTS, NULL, "1:", NX_GEO_SPATIAL_MAX,
     "the output's spatial extents, one per spatial axis"},
    NX_GEO_SAMPLE_OPTS("constant"),
};
static const nx_op_field fields[] = {{NX_GEO_FN(target_shape, ntarget)}, NX_GEO_SAMPLE_FIELDS};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 2e-5, 2e-5},
    {NX_DTYPE_F64, NULL, NULL, 1e-11, 1e-11},
};

const nx_op_desc nx_op_resample = {
    .info = {.nopts = NX_GEO_SAMPLE_NOPTS + 1, .opts = opts},
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
