/* The op `make_square_affine`: an affine [..., d, d+1] in homogeneous square form [..., d+1, d+1]
 * (the row 0 ... 0 1 appended); a square input is returned unchanged. An IR graph. */
#include "ops/geometry/affine.h"

typedef struct square_args {
    nx_backend backend;
} square_args;

static nx_status check(const nx_op_args *c)
{
    int d, rows;
    return nx_geo_check_affine(c, 0, NX_GEO_MAX_RANK, &d, &rows);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_tensor *mt = c->in[0];
    nx_node m = nx_parameter(g, "mat", nx_tensor_dtype(mt), nx_tensor_ndim(mt),
                             nx_tensor_shape(mt));
    nx_node sq = nx_geo_square(g, m);
    /* A square input: an output distinct from the input node. */
    outs[0] = sq == m ? nx_add(g, m, nx_scalar(g, nx_tensor_dtype(mt), 0.0)) : sq;
    return nx_graph_status(g);
}

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_make_square_affine = {
    .opts_size = sizeof(square_args),
    .backend_offset = offsetof(square_args, backend),
    .check = check,
    .build = build,
    .golden = "geometry",
    .tols = tols,
    .ntols = 2,
};
