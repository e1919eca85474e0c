/* The op `center_of_mass_grid`: the centre of mass of weights on the unit index grid,
 *   out[..., k] = sum_i i_{axes[k]} w[i] / sum_i w[i]   over the axes given (default: all),
 * per slice of the other axes: [*other axes, len(axes)], the components in the order the axes
 * are given. Where sum w = 0 the result is na_value (default NaN). An IR graph: the gradient of
 * the weights. */
#include <math.h>

#include "ops/op.h"

typedef struct com_args {
    nx_backend backend;
    int64_t axes[NX_MAX_DIMS];
    int naxes;
    double na_value;
} com_args;

/* The axes (as given, made non-negative); *n their count. */
static nx_status axes_of(const nx_op_args *c, int *ax, int *n)
{
    const com_args *o = c->opts;
    int nd = nx_tensor_ndim(c->in[0]);
    bool seen[NX_MAX_DIMS] = {false};
    *n = o->naxes == 0 ? nd : o->naxes;
    for (int i = 0; i < *n; i++) {
        int64_t a = o->naxes == 0 ? i : o->axes[i];
        if (a < -nd || a >= nd)
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: axis %lld is out of range for weight of rank %d; expected "
                               "-%d..%d",
                               c->who, (long long)a, nd, nd, nd - 1);
        ax[i] = (int)(a < 0 ? a + nd : a);
        if (seen[ax[i]])
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: axis %d is given twice; expected distinct axes", c->who,
                               ax[i]);
        seen[ax[i]] = true;
    }
    return NX_OK;
}

static nx_status check(const nx_op_args *c)
{
    const nx_tensor *w = c->in[0];
    nx_dtype dt = nx_tensor_dtype(w);
    if (dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64)
        return nx_rt_error(c->ctx, NX_ERR_DTYPE, "%s: weight is %s; expected float32 or float64",
                           c->who, nx_dtype_name(dt));
    if (nx_tensor_ndim(w) < 1)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: weight is 0-d; expected rank >= 1",
                           c->who);
    int ax[NX_MAX_DIMS], n;
    return axes_of(c, ax, &n);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const com_args *o = c->opts;
    const nx_tensor *wt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(wt);
    int nd = nx_tensor_ndim(wt);
    int ax[NX_MAX_DIMS], n;
    nx_status st = axes_of(c, ax, &n);
    if (st != NX_OK)
        return st;
    nx_node w = nx_parameter(g, "weight", dt, nd, nx_tensor_shape(wt));
    int sorted[NX_MAX_DIMS], ns = 0;
    for (int k = 0; k < nd; k++)
        for (int i = 0; i < n; i++)
            if (ax[i] == k)
                sorted[ns++] = k;
    nx_node den = nx_reduce(g, w, ns, sorted, NX_MONOID_SUM, false);
    nx_node empty = nx_eq(g, den, nx_scalar(g, dt, 0.0));
    nx_node safe = nx_select(g, empty, nx_scalar(g, dt, 1.0), den);
    int nr = nd - ns;
    int64_t rs[NX_MAX_DIMS] = {0};
    for (int k = 0, j = 0; k < nd; k++) {
        bool red = false;
        for (int i = 0; i < ns; i++)
            red = red || sorted[i] == k;
        if (!red)
            rs[j++] = nx_tensor_shape(wt)[k];
    }
    rs[nr] = 1;
    nx_node comp[NX_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        nx_node coord = nx_iota(g, dt, nd, nx_tensor_shape(wt), ax[i]);
        nx_node num = nx_reduce(g, nx_mul(g, coord, w), ns, sorted, NX_MONOID_SUM, false);
        nx_node cm = nx_select(g, empty, nx_scalar(g, dt, o->na_value), nx_div(g, num, safe));
        comp[i] = nx_reshape(g, cm, nr + 1, rs);
    }
    outs[0] = nx_concat(g, n, comp, nr);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"axes", NX_OPT_INTS, "(all axes)", NULL, NX_MAX_DIMS,
     "the axes to take the centre over (negative counts from the end); the output's last axis "
     "follows their order"},
    {"na_value", NX_OPT_FLOAT, "nan", NULL, 1, "the result where the weights sum to 0"},
};

static const nx_op_field fields[] = {
    {offsetof(com_args, axes), offsetof(com_args, naxes), sizeof(int64_t) * NX_MAX_DIMS},
    {offsetof(com_args, na_value), NX_OP_NO_FIELD, sizeof(double)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-5},
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-12},
};

const nx_op_desc nx_op_center_of_mass_grid = {
    .info = {.nopts = 2, .opts = opts},
    .opts_size = sizeof(com_args),
    .fields = fields,
    .backend_offset = offsetof(com_args, backend),
    .check = check,
    .build = build,
    .golden = "geometry",
    .tols = tols,
    .ntols = 2,
};
