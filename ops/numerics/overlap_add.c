/* The op `overlap_add` (spec §4.12, api-a §9): the blend of sliding-window inference, the
 * accumulated weighted predictions divided by the accumulated weights,
 *     y = weighted_sum / max(weight, eps),
 * weight broadcast to weighted_sum's shape (a [spatial] weight map under [C, spatial] sums), so
 * an uncovered voxel (weight 0, sum 0) gives 0 and a covered one is divided exactly. Elementwise:
 * both backends compile it and autodiff gives the gradients of both inputs. */
#include <math.h>

#include "ops/numerics/numerics.h"

typedef struct oa_args {
    nx_backend backend;
    double eps;
} oa_args;

static nx_status check(const nx_op_args *c)
{
    const oa_args *o = c->opts;
    nx_status st = nx_num_check_float(c, 0, "weighted_sum");
    if (st == NX_OK)
        st = nx_num_check_broadcast(c, 1, "weight");
    if (st == NX_OK && nx_tensor_dtype(c->in[1]) != nx_tensor_dtype(c->in[0]))
        return nx_rt_error(c->ctx, NX_ERR_DTYPE,
                           "%s: weight is %s and weighted_sum %s; expected equal dtypes", c->who,
                           nx_dtype_name(nx_tensor_dtype(c->in[1])),
                           nx_dtype_name(nx_tensor_dtype(c->in[0])));
    if (st == NX_OK && !(o->eps > 0 && isfinite(o->eps)))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: eps is %g; expected a finite value > 0",
                           c->who, o->eps);
    return st;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const oa_args *o = c->opts;
    const nx_tensor *st = c->in[0], *wt = c->in[1];
    nx_dtype dt = nx_tensor_dtype(st);
    nx_node s = nx_parameter(g, "weighted_sum", dt, nx_tensor_ndim(st), nx_tensor_shape(st));
    nx_node w = nx_parameter(g, "weight", dt, nx_tensor_ndim(wt), nx_tensor_shape(wt));
    outs[0] = nx_div(g, s, nx_maximum(g, w, nx_scalar(g, dt, o->eps)));
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"eps", NX_OPT_FLOAT, "1e-8", "0:", 1, "the weight's floor (> 0)"},
};

static const nx_op_field fields[] = {
    {offsetof(oa_args, eps), NX_OP_NO_FIELD, sizeof(double)},
};

/* one division */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-6, 1e-7},
    {NX_DTYPE_F64, NULL, NULL, 1e-15, 1e-15},
};

const nx_op_desc nx_op_overlap_add = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(oa_args),
    .fields = fields,
    .backend_offset = offsetof(oa_args, backend),
    .check = check,
    .build = build,
    .golden = "numerics",
    .tols = tols,
    .ntols = 2,
};
