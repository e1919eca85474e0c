/* The op `apply_mask` (spec §4.12, api-a §9; hypercoil's and nitrix's _internal/util.py): the
 * entries of x along `axis` where the 1-d mask is nonzero, numpy's x.take(numpy.flatnonzero(mask),
 * axis) (x[..., mask] for the last axis), so the axis keeps count_nonzero(mask) entries. The
 * result's shape depends on the mask's values: the graph is a gather with the selected indices as
 * a constant, built from the mask on the host (it must be a host tensor, and its bytes are part
 * of the program's cache key). A mask selecting nothing is an error (an empty axis). Autodiff
 * gives x's gradient (the gather's adjoint scatters it back; unselected entries get 0). */
#include "ops/numerics/numerics.h"

typedef struct am_args {
    nx_backend backend;
    int64_t axis;
} am_args;

static int64_t selected(const nx_tensor *m, int64_t *idx)
{
    int64_t n = nx_tensor_numel(m), k = 0;
    nx_dtype dt = nx_tensor_dtype(m);
    const unsigned char *p = nx_tensor_data(m);
    size_t es = nx_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) {
        bool on = false;
        if (dt == NX_DTYPE_F32)
            on = ((const float *)(const void *)p)[i] != 0;
        else if (dt == NX_DTYPE_F64)
            on = ((const double *)(const void *)p)[i] != 0;
        else
            for (size_t b = 0; b < es; b++)
                on = on || p[(size_t)i * es + b] != 0;
        if (on) {
            if (idx)
                idx[k] = i;
            k++;
        }
    }
    return k;
}

static nx_status check(const nx_op_args *c)
{
    const am_args *o = c->opts;
    const nx_tensor *m = c->in[1];
    nx_status st = nx_num_check_axis_mask(c, o->axis);
    if (st != NX_OK)
        return st;
    if (nx_tensor_device(m) != NX_DEVICE_HOST)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: mask is on a device; expected a host tensor (its values decide "
                           "the result's shape)",
                           c->who);
    if (selected(m, NULL) == 0)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: mask selects nothing; expected at least one nonzero entry", c->who);
    return NX_OK;
}

static void key(nx_rt_cache_blob *b, const nx_op_args *c)
{
    nx_rt_cache_blob_tensor(b, "mask", c->in[1]);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const am_args *o = c->opts;
    const nx_tensor *xt = c->in[0], *mt = c->in[1];
    int k;
    nx_status st = nx_num_axis(c, o->axis, nx_tensor_ndim(xt), "axis", &k);
    if (st != NX_OK)
        return st;
    nx_node x = nx_num_declare(g, c, 0);
    (void)nx_num_declare(g, c, 1);
    int64_t n = nx_tensor_numel(mt);
    size_t bytes = (size_t)n * sizeof(int64_t);
    int64_t *idx = nx_rt_alloc(c->ctx, bytes);
    if (!idx)
        return nx_rt_nomem(c->ctx, "apply_mask: indices", bytes);
    int64_t cnt = selected(mt, idx);
    nx_node ix = nx_constant(g, NX_DTYPE_I64, 1, &cnt, idx);
    nx_rt_free(c->ctx, idx, bytes);
    outs[0] = nx_gather(g, x, ix, k);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"axis", NX_OPT_INT, "-1", NULL, 1, "the axis the mask runs along; negative from the end"},
};

static const nx_op_field fields[] = {
    {offsetof(am_args, axis), NX_OP_NO_FIELD, sizeof(int64_t)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
    {NX_DTYPE_I32, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_apply_mask = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(am_args),
    .fields = fields,
    .backend_offset = offsetof(am_args, backend),
    .check = check,
    .key = key,
    .build = build,
    .golden = "numerics",
    .tols = tols,
    .ntols = 3,
};
