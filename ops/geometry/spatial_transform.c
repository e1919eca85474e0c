/* The op `spatial_transform` (spec §4.8): y[*lead, *q, :] = image[*lead, .., :] sampled at the
 * absolute index coordinates deformation[*lead, *q, :] (ndim = deformation's last extent = the
 * image's spatial rank, 1..3; channels last), by `method` with the border `mode` and `cval`
 * (sample.c). One program: the B-spline prefilter (cubic_bspline) and one fused gather; autodiff
 * gives the gradients of the image (a scatter-add) and of the deformation. */
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
    if (rd < 2 || nd < 1 || nd > NX_GEO_SPATIAL_MAX)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: deformation has %d dims, last extent %lld; expected [*lead, "
                           "*spatial_out, ndim] with ndim 1..3",
                           c->who, rd, (long long)nd);
    if (r != rd || r < nd + 1)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: image has %d dims and deformation %d with ndim = %lld; expected "
                           "image [*lead, *spatial, channels] and deformation [*lead, "
                           "*spatial_out, ndim] of one rank, with %lld spatial axes",
                           c->who, r, rd, (long long)nd, (long long)nd);
    int lead = r - (int)nd - 1;
    for (int d = 0; d < lead; d++)
        if (is[d] != ds[d])
            return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                               "%s: leading axis %d is %lld in image and %lld in deformation; "
                               "expected equal leading (batch) axes",
                               c->who, d, (long long)is[d], (long long)ds[d]);
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
    int nd = (int)ds[r - 1], lead = r - nd - 1;
    nx_node a = nx_parameter(g, "image", dt, r, is);
    nx_node d = nx_parameter(g, "deformation", dt, r, ds);
    int64_t B = 1, P = 1, bs[NX_MAX_DIMS], out[NX_MAX_DIMS];
    for (int k = 0; k < lead; k++)
        B *= is[k];
    for (int k = lead; k < r - 1; k++)
        P *= ds[k];
    bs[0] = B;
    for (int k = 0; k <= nd; k++)
        bs[1 + k] = is[lead + k];
    for (int k = 0; k < r - 1; k++)
        out[k] = ds[k];
    out[r - 1] = is[r - 1];
    bool fir = false;
    nx_status st = nx_geo_prefilter_fir(c, o, &fir);
    if (st != NX_OK)
        return st;
    int64_t cs[3] = {B, P, nd};
    nx_node y = nx_geo_resample_points(g, nx_reshape(g, a, nd + 2, bs), nx_reshape(g, d, 3, cs),
                                       o, fir);
    outs[0] = nx_reshape(g, y, r, out);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {NX_GEO_SAMPLE_OPTS("constant")};
static const nx_op_field fields[] = {NX_GEO_SAMPLE_FIELDS};

/* f64: map_coordinates' sums in another order (1e-12; cubic's prefilter 1e-11); f32: the taps'
 * weights and sums rounded to f32 against a float64 oracle (cubic: the prefilter's gain of
 * about 1.7 on rounding) */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 2e-5, 2e-5},
    {NX_DTYPE_F64, NULL, NULL, 1e-11, 1e-11},
};

const nx_op_desc nx_op_spatial_transform = {
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
