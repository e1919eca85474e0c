/* The op `spatial_gradient`: the gradient of an image over its last spatial_rank axes,
 * [*lead, *spatial] -> [*lead, *spatial, spatial_rank], component k the derivative along the
 * k-th spatial axis:
 *   central: (x[i+1] - x[i-1]) / (2 h_k)                      (numpy.gradient's interior)
 *   sobel:   central along k, [1, 2, 1] / 4 along every other spatial axis
 *            (= scipy.ndimage.sobel / (2 4^(r-1) h_k))
 *   scharr:  central along k, [3, 10, 3] / 16 along the others
 * with the image extended by one element per side by `mode` (scipy.ndimage's meanings; constant
 * extends with 0). A linear ramp's gradient is exact in every scheme. Pad and slice in the graph
 * (fd.c): both backends compile it and autodiff differentiates it. */
#include <string.h>

#include "ops/geometry/fd.h"

typedef struct grad_args {
    nx_backend backend;
    int64_t spatial_rank; /* 0: every axis */
    int scheme;           /* nx_geo_scheme */
    int mode;             /* nx_border */
    double spacing[NX_MAX_DIMS];
    int nspacing;
} grad_args;

static int rank_of(const nx_op_args *c)
{
    const grad_args *o = c->opts;
    return o->spatial_rank == 0 ? nx_tensor_ndim(c->in[0]) : (int)o->spatial_rank;
}

static nx_status check(const nx_op_args *c)
{
    const grad_args *o = c->opts;
    const nx_tensor *x = c->in[0];
    nx_dtype dt = nx_tensor_dtype(x);
    int nd = nx_tensor_ndim(x);
    if (dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64)
        return nx_rt_error(c->ctx, NX_ERR_DTYPE, "%s: image is %s; expected float32 or float64",
                           c->who, nx_dtype_name(dt));
    if (o->spatial_rank < 0 || o->spatial_rank > nd || nd == 0)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: spatial_rank is %lld for an image of rank %d; expected 1..%d",
                           c->who, (long long)o->spatial_rank, nd, nd);
    if (nd + 1 > NX_MAX_DIMS)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: image has rank %d; at most %d", c->who, nd,
                           NX_MAX_DIMS - 1);
    if ((unsigned)o->scheme > NX_GEO_SCHARR || (unsigned)o->mode >= NX_BORDER_COUNT)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: scheme or mode out of range",
                           c->who);
    double h[NX_MAX_DIMS];
    return nx_geo_spacing(c, o->spacing, o->nspacing, rank_of(c), h);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const grad_args *o = c->opts;
    const nx_tensor *xt = c->in[0];
    int nd = nx_tensor_ndim(xt), r = rank_of(c);
    double h[NX_MAX_DIMS];
    nx_status st = nx_geo_spacing(c, o->spacing, o->nspacing, r, h);
    if (st != NX_OK)
        return st;
    nx_node x = nx_parameter(g, "image", nx_tensor_dtype(xt), nd, nx_tensor_shape(xt));
    int64_t s1[NX_MAX_DIMS] = {0};
    memcpy(s1, nx_tensor_shape(xt), sizeof(int64_t) * (size_t)nd);
    s1[nd] = 1;
    nx_node comp[NX_MAX_DIMS];
    for (int k = 0; k < r; k++)
        comp[k] = nx_reshape(g, nx_geo_fd(g, x, nd - r, r, k, (nx_geo_scheme)o->scheme,
                                          (nx_border)o->mode, h[k]),
                             nd + 1, s1);
    outs[0] = nx_concat(g, r, comp, nd);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"spatial_rank", NX_OPT_INT, "(the image's rank)", NULL, 1,
     "how many trailing axes are spatial (the leading ones are batch axes)"},
    {"scheme", NX_OPT_ENUM, "central", "central|sobel|scharr", 1,
     "central differences, or with [1, 2, 1] / 4 (sobel) or [3, 10, 3] / 16 (scharr) smoothing "
     "across"},
    {"mode", NX_OPT_BORDER, "nearest", NULL, 1, "how the image extends past its edges"},
    {"spacing", NX_OPT_FLOATS, "1", NULL, NX_MAX_DIMS,
     "the grid step per spatial axis, or one value for all (each finite and > 0)"},
};

static const nx_op_field fields[] = {
    {offsetof(grad_args, spatial_rank), NX_OP_NO_FIELD, sizeof(int64_t)},
    {offsetof(grad_args, scheme), NX_OP_NO_FIELD, sizeof(int)},
    {offsetof(grad_args, mode), NX_OP_NO_FIELD, sizeof(int)},
    {offsetof(grad_args, spacing), offsetof(grad_args, nspacing), sizeof(double) * NX_MAX_DIMS},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-5},
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-12},
};

const nx_op_desc nx_op_spatial_gradient = {
    .info = {.nopts = 4, .opts = opts},
    .opts_size = sizeof(grad_args),
    .fields = fields,
    .backend_offset = offsetof(grad_args, backend),
    .check = check,
    .build = build,
    .golden = "geometry",
    .tols = tols,
    .ntols = 2,
};
