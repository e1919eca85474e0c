/* The op `nonzero_bounding_box` (spec §4.12, api-a §9): the smallest box holding every element
 * with |x| > threshold (threshold 0: every nonzero element, numpy.nonzero's),
 *     lo[k] = min index along axis k of such an element,  hi[k] = max index + 1,
 * both i64 [ndim], so x[lo[0]:hi[0], lo[1]:hi[1], ...] is the box (Python's half-open slices).
 * When no element passes, the box is empty: lo = hi = 0 on every axis (a documented result, not
 * an error). Per axis: an any-reduction over the other axes, then a min and a max of the indices
 * that pass; one graph, both backends compile it. Not differentiable (integer outputs). */
#include <math.h>

#include "ops/numerics/numerics.h"

typedef struct nzbb_args {
    nx_backend backend;
    double threshold;
} nzbb_args;

static nx_status check(const nx_op_args *c)
{
    const nzbb_args *o = c->opts;
    const nx_tensor *x = c->in[0];
    nx_dtype dt = nx_tensor_dtype(x);
    if (dt == NX_DTYPE_F16 || dt == NX_DTYPE_BF16)
        return nx_rt_error(c->ctx, NX_ERR_DTYPE,
                           "%s: x is %s; expected bool, an integer dtype, f32 or f64", c->who,
                           nx_dtype_name(dt));
    if (nx_tensor_ndim(x) < 1)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: x is 0-d; expected at least one axis",
                           c->who);
    if (!(o->threshold >= 0) || isinf(o->threshold))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: threshold is %g; expected a finite value >= 0", c->who,
                           o->threshold);
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nzbb_args *o = c->opts;
    const nx_tensor *xt = c->in[0];
    int nd = nx_tensor_ndim(xt);
    const int64_t *shape = nx_tensor_shape(xt);
    nx_node x = nx_input(g, "x", nx_tensor_dtype(xt), nd, shape);
    nx_node hit =
        nx_gt(g, nx_abs(g, nx_cast(g, x, NX_DTYPE_F64)), nx_scalar(g, NX_DTYPE_F64, o->threshold));
    nx_node hit64 = nx_cast(g, hit, NX_DTYPE_I64);
    int all[NX_MAX_DIMS];
    for (int k = 0; k < nd; k++)
        all[k] = k;
    nx_node any_at_all = nx_reduce(g, hit64, nd, all, NX_MONOID_MAX, false);
    nx_node none = nx_eq(g, any_at_all, nx_scalar(g, NX_DTYPE_I64, 0));
    nx_node zero = nx_scalar(g, NX_DTYPE_I64, 0), one = nx_scalar(g, NX_DTYPE_I64, 1);
    nx_node los[NX_MAX_DIMS], his[NX_MAX_DIMS];
    int64_t one_shape = 1;
    for (int k = 0; k < nd; k++) {
        int others[NX_MAX_DIMS], no = 0;
        for (int j = 0; j < nd; j++)
            if (j != k)
                others[no++] = j;
        nx_node any = no > 0 ? nx_reduce(g, hit64, no, others, NX_MONOID_MAX, false) : hit64;
        nx_node pass = nx_ne(g, any, zero);
        nx_node idx = nx_iota(g, NX_DTYPE_I64, 1, &shape[k], 0);
        int ax = 0;
        nx_node lo =
            nx_reduce(g, nx_select(g, pass, idx, nx_scalar(g, NX_DTYPE_I64, (double)shape[k])), 1,
                      &ax, NX_MONOID_MIN, false);
        nx_node hi = nx_reduce(g, nx_select(g, pass, nx_add(g, idx, one), zero), 1, &ax,
                               NX_MONOID_MAX, false);
        los[k] = nx_reshape(g, nx_select(g, none, zero, lo), 1, &one_shape);
        his[k] = nx_reshape(g, nx_select(g, none, zero, hi), 1, &one_shape);
    }
    outs[0] = nx_concat(g, nd, los, 0);
    outs[1] = nx_concat(g, nd, his, 0);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"threshold", NX_OPT_FLOAT, "0", "0:", 1,
     "an element is inside when |x| > threshold (0: every nonzero element)"},
};

static const nx_op_field fields[] = {
    {offsetof(nzbb_args, threshold), NX_OP_NO_FIELD, sizeof(double)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0}, {NX_DTYPE_F64, NULL, NULL, 0, 0},
    {NX_DTYPE_U8, NULL, NULL, 0, 0},  {NX_DTYPE_BOOL, NULL, NULL, 0, 0},
    {NX_DTYPE_I32, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_nonzero_bounding_box = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(nzbb_args),
    .fields = fields,
    .backend_offset = offsetof(nzbb_args, backend),
    .check = check,
    .build = build,
    .golden = "numerics",
    .tols = tols,
    .ntols = 5,
};
