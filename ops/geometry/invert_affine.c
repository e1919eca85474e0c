/* The op `invert_affine`: the inverse of an affine [..., d, d+1] (or square [..., d+1, d+1]),
 * in the same form: [L^{-1}, -L^{-1} t] from one pivoted solve L X = [I | t] (nx_mat_solve,
 * matfun.h). A singular linear block (a pivot at most d eps max|L|) gives NaN in every entry of
 * that matrix's result: a documented result, not an error, since the values are data (a batch
 * may hold both). An IR graph; the gradient is -M^{-T} dY M^{-T} through the solve. */
#include <math.h>
#include <string.h>

#include "ops/geometry/affine.h"

typedef struct invert_args {
    nx_backend backend;
} invert_args;

static nx_status check(const nx_op_args *c)
{
    int d, rows;
    return nx_geo_check_affine(c, 0, NX_GEO_MAX_RANK, &d, &rows);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_tensor *mt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(mt);
    int nd = nx_tensor_ndim(mt);
    const int64_t *s = nx_tensor_shape(mt);
    int d = (int)s[nd - 1] - 1;
    bool square = s[nd - 2] == s[nd - 1];
    nx_node m = nx_parameter(g, "mat", dt, nd, s);
    nx_node lin = nx_mat_block(g, m, 0, d, 0, d);
    nx_node t = nx_mat_block(g, m, 0, d, d, d + 1);
    int64_t bs[NX_MAX_DIMS] = {0};
    memcpy(bs, s, sizeof(int64_t) * (size_t)nd);
    bs[nd - 2] = d;
    bs[nd - 1] = d;
    nx_node rhs[2] = {nx_broadcast(g, nx_mat_eye(g, dt, d), nd, bs), t};
    nx_node sing = NX_NONE;
    nx_node x = nx_mat_solve(g, lin, nx_concat(g, 2, rhs, nd - 1), &sing);
    nx_node parts[2] = {nx_mat_block(g, x, 0, d, 0, d),
                        nx_neg(g, nx_mat_block(g, x, 0, d, d, d + 1))};
    nx_node inv = nx_concat(g, 2, parts, nd - 1);
    if (square)
        inv = nx_geo_square(g, inv);
    bs[nd - 2] = 1;
    bs[nd - 1] = 1;
    sing = nx_reshape(g, sing, nd, bs);
    outs[0] = nx_select(g, sing, nx_scalar(g, dt, NAN), inv);
    return nx_graph_status(g);
}

/* Against numpy.linalg.inv in float64 (well-conditioned random affines). */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-4, 1e-5},
    {NX_DTYPE_F64, NULL, NULL, 1e-11, 1e-12},
};

const nx_op_desc nx_op_invert_affine = {
    .opts_size = sizeof(invert_args),
    .backend_offset = offsetof(invert_args, backend),
    .check = check,
    .build = build,
    .golden = "geometry",
    .tols = tols,
    .ntols = 2,
};
