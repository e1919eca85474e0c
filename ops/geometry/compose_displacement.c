/* The op `compose_displacement` (spec §4.8): the displacement of (id + outer) o (id + inner),
 *   u(x) = inner(x) + outer(x + inner(x)),
 * outer sampled by `method` (default linear) with the border `mode` (default nearest, as
 * integrate_velocity_field's). Both fields [*spatial, ndim] in index units, one shape. */
#include <string.h>

#include "ops/geometry/sample.h"

static nx_status check(const nx_op_args *c)
{
    const nx_geo_args *o = c->opts;
    nx_status st = nx_geo_check_opts(c, o);
    if (st == NX_OK)
        st = nx_geo_check_field(c, 0);
    if (st == NX_OK)
        st = nx_geo_check_field(c, 1);
    if (st != NX_OK)
        return st;
    if (nx_geo_method_of(o->method) == NX_GEO_MULTILABEL)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: method multilabel samples label maps; expected an interpolator "
                           "of fields (linear, nearest, cubic_bspline, lanczos, catmull_rom)",
                           c->who);
    const nx_tensor *a = c->in[0], *b = c->in[1];
    int r = nx_tensor_ndim(a);
    if (nx_tensor_ndim(b) != r ||
        memcmp(nx_tensor_shape(a), nx_tensor_shape(b), (size_t)r * sizeof(int64_t)) != 0)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: outer and inner differ in shape; expected one [*spatial, ndim]",
                           c->who);
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_geo_args *o = c->opts;
    const nx_tensor *a = c->in[0];
    nx_dtype dt = nx_tensor_dtype(a);
    int r = nx_tensor_ndim(a);
    const int64_t *s = nx_tensor_shape(a);
    nx_node outer = nx_parameter(g, "outer", dt, r, s);
    nx_node inner = nx_parameter(g, "inner", dt, r, s);
    bool fir = false;
    nx_status st = nx_geo_prefilter_fir(c, o, &fir);
    if (st != NX_OK)
        return st;
    outs[0] = nx_geo_compose(g, outer, inner, o, fir);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {NX_GEO_SAMPLE_OPTS("nearest")};
static const nx_op_field fields[] = {NX_GEO_SAMPLE_FIELDS};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 2e-5, 2e-5},
    {NX_DTYPE_F64, NULL, NULL, 1e-11, 1e-11},
};

const nx_op_desc nx_op_compose_displacement = {
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
