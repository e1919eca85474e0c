/* The op `pad_to_multiple` (spec §4.12, api-a §9): the last `spatial_rank` axes of x padded up to
 * the next multiple of `multiple` (one value for all of them, or one per axis), split as MONAI's
 * DivisiblePad does: lo = total // 2 before, hi = total - lo after, filled by `mode` (the border
 * enum: constant with cval, reflect, mirror, nearest, wrap; as numpy.pad's constant, symmetric,
 * reflect, edge, wrap). The second output, pads, is i64 [spatial_rank, 2] of (lo, hi) per axis,
 * what crop_to_multiple's inverse (a slice) needs. nx_pad in a graph: both backends compile it and
 * autodiff gives the gradient (the pad's adjoint folds the border back). */
#include "ops/numerics/numerics.h"

typedef struct ptm_args {
    nx_backend backend;
    int64_t multiple[NX_MAX_DIMS];
    int nmultiple;
    int64_t spatial_rank;
    int mode; /* nx_border */
    double cval;
} ptm_args;

/* The spatial axes' first index and each one's multiple. */
static nx_status layout(const nx_op_args *c, int *first, int64_t *mult)
{
    const ptm_args *o = c->opts;
    int nd = nx_tensor_ndim(c->in[0]);
    int64_t r = o->spatial_rank == 0 ? nd : o->spatial_rank;
    if (r < 0 || r > nd)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: spatial_rank is %lld for x of rank %d; expected 1..%d (0: every "
                           "axis)",
                           c->who, (long long)o->spatial_rank, nd, nd);
    if (r == 0)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: x is 0-d; expected at least one axis",
                           c->who);
    if (o->nmultiple != 1 && o->nmultiple != r)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: %d values of multiple for %lld spatial axes; expected 1 or %lld",
                           c->who, o->nmultiple, (long long)r, (long long)r);
    for (int i = 0; i < r; i++) {
        int64_t m = o->multiple[o->nmultiple == 1 ? 0 : i];
        if (m <= 0)
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: multiple %lld; expected every multiple >= 1", c->who,
                               (long long)m);
        mult[i] = m;
    }
    *first = nd - (int)r;
    return NX_OK;
}

static nx_status check(const nx_op_args *c)
{
    const ptm_args *o = c->opts;
    nx_dtype dt = nx_tensor_dtype(c->in[0]);
    if (dt == NX_DTYPE_F16 || dt == NX_DTYPE_BF16)
        return nx_rt_error(c->ctx, NX_ERR_DTYPE,
                           "%s: x is %s; expected a dtype other than f16/bf16", c->who,
                           nx_dtype_name(dt));
    if ((unsigned)o->mode >= NX_BORDER_COUNT)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: mode %d is not a border mode", c->who,
                           o->mode);
    int first;
    int64_t mult[NX_MAX_DIMS];
    nx_status st = layout(c, &first, mult);
    for (int k = first; st == NX_OK && k < nx_tensor_ndim(c->in[0]); k++) {
        int64_t s = nx_tensor_shape(c->in[0])[k];
        if (s == 0 && o->mode != NX_BORDER_CONSTANT)
            return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                               "%s: axis %d is empty; mode %s needs values to extend (expected "
                               "mode constant)",
                               c->who, k, nx_border_name((nx_border)o->mode));
        if (s > INT64_MAX - mult[k - first])
            return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: axis %d's padded extent overflows",
                               c->who, k);
    }
    return st;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const ptm_args *o = c->opts;
    const nx_tensor *xt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(xt);
    int nd = nx_tensor_ndim(xt), first;
    int64_t mult[NX_MAX_DIMS];
    nx_status st = layout(c, &first, mult);
    if (st != NX_OK)
        return st;
    bool fl = nx_dtype_is_float(dt);
    nx_node x = fl ? nx_parameter(g, "x", dt, nd, nx_tensor_shape(xt))
                   : nx_input(g, "x", dt, nd, nx_tensor_shape(xt));
    int64_t lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0}, pads[2 * NX_MAX_DIMS];
    for (int k = first; k < nd; k++) {
        int64_t s = nx_tensor_shape(xt)[k], m = mult[k - first];
        int64_t total = (m - s % m) % m;
        lo[k] = total / 2;
        hi[k] = total - lo[k];
        pads[2 * (k - first)] = lo[k];
        pads[2 * (k - first) + 1] = hi[k];
    }
    outs[0] = nx_pad(g, x, lo, hi, (nx_border)o->mode, o->cval);
    int64_t ps[2] = {nd - first, 2};
    outs[1] = nx_constant(g, NX_DTYPE_I64, 2, ps, pads);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"multiple", NX_OPT_INTS, NULL, "1:", NX_MAX_DIMS,
     "the multiple each spatial extent is padded up to (one value for all, or one per axis)"},
    {"spatial_rank", NX_OPT_INT, "(every axis)", "0:", 1,
     "how many trailing axes are spatial (padded); 0 or not given: every axis"},
    {"mode", NX_OPT_BORDER, "constant", NULL, 1,
     "the fill: constant (cval), reflect, mirror, nearest, wrap (numpy.pad's constant, "
     "symmetric, reflect, edge, wrap)"},
    {"cval", NX_OPT_FLOAT, "0", NULL, 1, "the constant mode's value"},
};

static const nx_op_field fields[] = {
    {offsetof(ptm_args, multiple), offsetof(ptm_args, nmultiple), sizeof(int64_t) * NX_MAX_DIMS},
    {offsetof(ptm_args, spatial_rank), NX_OP_NO_FIELD, sizeof(int64_t)},
    {offsetof(ptm_args, mode), NX_OP_NO_FIELD, sizeof(int)},
    {offsetof(ptm_args, cval), NX_OP_NO_FIELD, sizeof(double)},
};

/* a copy: exact */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
    {NX_DTYPE_I32, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_pad_to_multiple = {
    .info = {.nopts = 4, .opts = opts},
    .opts_size = sizeof(ptm_args),
    .fields = fields,
    .backend_offset = offsetof(ptm_args, backend),
    .check = check,
    .build = build,
    .golden = "numerics",
    .tols = tols,
    .ntols = 3,
};
