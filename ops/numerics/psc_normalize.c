/* The op `psc_normalize` (spec §4.12, api-a §9): percent signal change over `axis` (the time
 * axis, last by default),
 *     y = 100 (x - m) / m,   m = mean over axis,
 * and 0 where m = 0 (a voxel without signal has no percent change). Elementwise over one sum:
 * both backends compile it, and autodiff gives the gradient. */
#include "ops/numerics/numerics.h"

typedef struct psc_args {
    nx_backend backend;
    nx_num_axes axis;
} psc_args;

static nx_status check(const nx_op_args *c)
{
    const psc_args *o = c->opts;
    nx_status st = nx_num_check_float(c, 0, "x");
    int axes[NX_MAX_DIMS], n;
    if (st == NX_OK)
        st = nx_num_resolve_axes(c, &o->axis, nx_tensor_ndim(c->in[0]), false, "axis", axes, &n);
    return st;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const psc_args *o = c->opts;
    const nx_tensor *xt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(xt);
    int nd = nx_tensor_ndim(xt), axes[NX_MAX_DIMS], n = 0;
    nx_status st = nx_num_resolve_axes(c, &o->axis, nd, false, "axis", axes, &n);
    if (st != NX_OK)
        return st;
    nx_node x = nx_parameter(g, "x", dt, nd, nx_tensor_shape(xt));
    nx_node m = nx_mean(g, x, n, axes, true);
    nx_node d = nx_mul(g, nx_scalar(g, dt, 100), nx_sub(g, x, m));
    outs[0] = nx_num_safe_div(g, d, m);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"axis", NX_OPT_INTS, "-1", NULL, NX_MAX_DIMS,
     "the axes the baseline mean spans (time); negative counts from the end"},
};

static const nx_op_field fields[] = {
    {offsetof(psc_args, axis.axis), offsetof(psc_args, axis.naxis), sizeof(int64_t) * NX_MAX_DIMS},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-5},
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-12},
};

const nx_op_desc nx_op_psc_normalize = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(psc_args),
    .fields = fields,
    .backend_offset = offsetof(psc_args, backend),
    .check = check,
    .build = build,
    .golden = "numerics",
    .tols = tols,
    .ntols = 2,
};
