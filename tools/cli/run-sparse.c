/* `nitrix run` functions of the sparse family (rows in ops-sparse.def): the ELL is given as its two
 * tensors, n_cols from the dense operand where it determines it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "nitrix-ops.h"

static const nx_semiring *algebra(const char *name)
{
    static const char *const names[] = {
        "real", "log", "tropical_max_plus", "tropical_min_plus", "boolean", "euclidean"};
    for (int i = 0; i < 6; i++)
        if (!strcmp(name, names[i]))
            return nx_semiring_builtin((nx_semiring_kind)i);
    return nx_semiring_builtin(NX_SEMIRING_REAL);
}

static double identity_of(const nx_semiring *sr)
{
    nx_semiring_info info;
    nx_semiring_get_info(sr, &info);
    return info.identity;
}

/* Rows of the dense operand (its second-to-last axis), or -1 when it has fewer than 2 dims. */
static int64_t rows_of(const nx_tensor *t)
{
    int nd = nx_tensor_ndim(t);
    return nd >= 2 ? nx_tensor_shape(t)[nd - 2] : -1;
}

nx_status cli_run_ell_matmul(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    const nx_semiring *sr = algebra(call->values[CLI_OPT_ell_matmul_semiring].choice);
    nx_ell a = {.values = call->inputs[0],
                .indices = call->inputs[1],
                .n_cols = rows_of(call->inputs[2]),
                .identity = identity_of(sr)};
    if (a.n_cols < 0) {
        snprintf(call->err, call->errlen, "b has %d dims; expected [..., n_cols, c]",
                 nx_tensor_ndim(call->inputs[2]));
        return NX_ERR_SHAPE;
    }
    nx_semiring_opts o = {.backend = call->backend};
    return nx_semiring_ell_matmul(ctx, sr, &a, call->inputs[2], &o, &outs[0]);
}

nx_status cli_run_ell_rmatvec(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    const cli_value *v = call->values;
    nx_ell a = {.values = call->inputs[0],
                .indices = call->inputs[1],
                .n_cols = v[CLI_OPT_ell_rmatvec_n_cols].i,
                .identity = v[CLI_OPT_ell_rmatvec_identity].f};
    nx_semiring_opts o = {.backend = call->backend, .driver = v[CLI_OPT_ell_rmatvec_driver].choice};
    return nx_semiring_ell_rmatvec(ctx, nx_semiring_builtin(NX_SEMIRING_REAL), &a, call->inputs[2],
                                   &o, &outs[0]);
}

nx_status cli_run_ell_row_softmax(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    /* Softmax never reads the indices' targets, so any n_cols above them will do. */
    nx_ell a = {.values = call->inputs[0],
                .indices = call->inputs[1],
                .n_cols = INT64_MAX,
                .identity = call->values[CLI_OPT_ell_row_softmax_identity].f};
    nx_semiring_opts o = {.backend = call->backend};
    return nx_ell_row_softmax(ctx, &a, call->inputs[2], &o, &outs[0]);
}

nx_status cli_run_sectioned_ell_matmul(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    const cli_value *v = call->values;
    const nx_semiring *sr = algebra(v[CLI_OPT_sectioned_ell_matmul_semiring].choice);
    int64_t n_cols = rows_of(call->inputs[3]);
    if (n_cols < 0) {
        snprintf(call->err, call->errlen, "b has %d dims; expected [n_cols, c]",
                 nx_tensor_ndim(call->inputs[3]));
        return NX_ERR_SHAPE;
    }
    nx_sectioned_ell s;
    nx_status st = nx_sectioned_ell_from_ragged(ctx, call->inputs[0], call->inputs[1],
                                                call->inputs[2], n_cols, identity_of(sr), &s);
    if (st != NX_OK)
        return st;
    nx_semiring_opts o = {.backend = call->backend};
    st = nx_sectioned_ell_matmul(ctx, sr, &s, call->inputs[3], &o, &outs[0]);
    nx_sectioned_ell_free(&s);
    return st;
}

/* The built-in edge functions, as the library's edge formulas (ops-sparse.def names them). */
static const char *edge_formula(const char *name)
{
    static const char *const names[] = {"message", "diffusion", "gaussian", "relative"};
    static const char *const formulas[] = {"w * hj", "w * (hj - hi)", "w * exp(-sqdist(hi, hj))",
                                           "hj - hi"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, names[i]))
            return formulas[i];
    return formulas[0];
}

nx_status cli_run_ell_edge_aggregate(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    const cli_value *v = call->values;
    const nx_semiring *sr = algebra(v[CLI_OPT_ell_edge_aggregate_semiring].choice);
    const nx_tensor *idx = call->inputs[1];
    /* Edges of a graph: the ELL is square, its column count the row count of the indices. */
    nx_ell a = {.values = call->inputs[0],
                .indices = call->inputs[1],
                .n_cols = nx_tensor_ndim(idx) == 2 ? nx_tensor_shape(idx)[0] : 0,
                .identity = identity_of(sr)};
    nx_edge_opts o = {.backend = call->backend,
                      .formula = edge_formula(v[CLI_OPT_ell_edge_aggregate_edge].choice)};
    return nx_semiring_ell_edge_aggregate(ctx, sr, &a, call->inputs[2], NULL, &o, &outs[0]);
}

static nx_grid_boundary boundary_of(const char *mode)
{
    return !strcmp(mode, "nearest") ? NX_GRID_REPLICATE
           : !strcmp(mode, "wrap")  ? NX_GRID_PERIODIC
                                    : NX_GRID_REFLECT;
}

nx_status cli_run_grid_laplacian(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    const cli_value *v = call->values;
    const nx_tensor *x = call->inputs[0];
    int nd = nx_tensor_ndim(x);
    nx_ell a;
    nx_status st = nx_grid_laplacian(ctx, nd, nx_tensor_shape(x),
                                     boundary_of(v[CLI_OPT_grid_laplacian_mode].choice),
                                     v[CLI_OPT_grid_laplacian_spacing].f, true, &a);
    if (st != NX_OK)
        return st;
    nx_tensor *xf = NULL, *ac = NULL, *y = NULL;
    int64_t n = nx_tensor_numel(x), col[2] = {n, 1};
    /* The ELL is f64: f32 grids run as f64 and come back as f32. */
    st = nx_tensor_cast(x, NX_DTYPE_F64, &xf);
    nx_tensor *xc = NULL;
    if (st == NX_OK)
        st = nx_tensor_reshape(xf, 2, col, &xc);
    nx_semiring_opts o = {.backend = call->backend};
    if (st == NX_OK)
        st = nx_semiring_ell_matmul(ctx, nx_semiring_builtin(NX_SEMIRING_REAL), &a, xc, &o, &y);
    if (st == NX_OK)
        st = nx_tensor_reshape(y, nd, nx_tensor_shape(x), &ac);
    if (st == NX_OK)
        st = nx_tensor_cast(ac, nx_tensor_dtype(x), &outs[0]);
    nx_tensor_free(xf), nx_tensor_free(xc), nx_tensor_free(y), nx_tensor_free(ac);
    nx_ell_free(&a);
    return st;
}
