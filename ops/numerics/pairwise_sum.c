/* The op `pairwise_sum` (spec §4.12, api-a §9): cascade summation of x over `axis` (every axis
 * when not given): the line is cut into blocks of `block_size` (the last one zero-padded), each
 * block is summed by the backend's sum fold, and the block sums are added in a balanced binary
 * tree (zero-padded to a power of two: adding 0 is exact, so this is the halving recursion),
 *     |error| <= (block_size + ceil(log2(blocks))) eps sum|x_i|   (to first order),
 * numpy.sum's method (NumPy unrolls its 128-blocks eightfold; the CPU backend may vectorise a
 * block's fold too, which only lowers its error). Pure IR (pad, reshape, sum, slices and adds):
 * both backends compile it and fuse it with its neighbours, and autodiff gives the gradient (the
 * cotangent, broadcast). */
#include "ops/numerics/numerics.h"

static nx_status check(const nx_op_args *c)
{
    const nx_num_sum_args *o = c->opts;
    nx_status st = nx_num_check_float(c, 0, "x");
    int axes[NX_MAX_DIMS], n;
    if (st == NX_OK && o->block_size < 1)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: block_size is %lld; expected >= 1",
                           c->who, (long long)o->block_size);
    if (st == NX_OK)
        st = nx_num_resolve_axes(c, &o->axis, nx_tensor_ndim(c->in[0]), true, "axis", axes, &n);
    return st;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_num_sum_args *o = c->opts;
    const nx_tensor *xt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(xt);
    int nd = nx_tensor_ndim(xt), axes[NX_MAX_DIMS], n = 0;
    nx_status st = nx_num_resolve_axes(c, &o->axis, nd, true, "axis", axes, &n);
    if (st != NX_OK)
        return st;
    nx_node x = nx_parameter(g, "x", dt, nd, nx_tensor_shape(xt));
    nx_node l = nx_num_to_lines(g, x, n, axes);
    int64_t ls[NX_MAX_DIMS] = {0};
    nx_node_shape(g, l, ls);
    int64_t rows = ls[0], len = ls[1];
    int64_t bs = o->block_size < len ? o->block_size : len;
    int64_t nb = (len + bs - 1) / bs, m = 1;
    while (m < nb)
        m *= 2;
    int64_t lo[2] = {0, 0}, hi[2] = {0, nb * bs - len};
    if (hi[1] > 0)
        l = nx_pad(g, l, lo, hi, NX_BORDER_CONSTANT, 0);
    int64_t blocks[3] = {rows, nb, bs};
    int ax = 2;
    nx_node s = nx_reduce(g, nx_reshape(g, l, 3, blocks), 1, &ax, NX_MONOID_SUM, false);
    hi[1] = m - nb;
    if (hi[1] > 0)
        s = nx_pad(g, s, lo, hi, NX_BORDER_CONSTANT, 0);
    for (; m > 1; m /= 2) {
        int64_t pairs[3] = {rows, m / 2, 2}, half[2] = {rows, m / 2};
        int64_t a0[3] = {0, 0, 0}, a1[3] = {rows, m / 2, 1};
        int64_t b0[3] = {0, 0, 1}, b1[3] = {rows, m / 2, 2};
        nx_node p = nx_reshape(g, s, 3, pairs);
        s = nx_reshape(g, nx_add(g, nx_slice(g, p, a0, a1, NULL), nx_slice(g, p, b0, b1, NULL)), 2,
                       half);
    }
    int64_t kept[NX_MAX_DIMS];
    int nk = 0;
    bool red[NX_MAX_DIMS] = {false};
    for (int i = 0; i < n; i++)
        red[axes[i]] = true;
    for (int k = 0; k < nd; k++)
        if (!red[k])
            kept[nk++] = nx_tensor_shape(xt)[k];
    outs[0] = nx_reshape(g, s, nk, kept);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"axis", NX_OPT_INTS, "(all axes)", NULL, NX_MAX_DIMS,
     "the axes summed; negative counts from the end; not given: every axis (a 0-d result)"},
    {"block_size", NX_OPT_INT, "128", "1:", 1, "the length of the blocks summed by plain folds"},
};

static const nx_op_field fields[] = {
    {offsetof(nx_num_sum_args, axis.axis), offsetof(nx_num_sum_args, axis.naxis),
     sizeof(int64_t) * NX_MAX_DIMS},
    {offsetof(nx_num_sum_args, block_size), NX_OP_NO_FIELD, sizeof(int64_t)},
};

/* against math.fsum of well-conditioned data (positive terms): the cascade's bound with
 * block_size 128 and a few thousand terms is below 1e-13 relative in f64 */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 2e-6, 1e-7},
    {NX_DTYPE_F64, NULL, NULL, 1e-13, 0},
};

const nx_op_desc nx_op_pairwise_sum = {
    .info = {.nopts = 2, .opts = opts},
    .opts_size = sizeof(nx_num_sum_args),
    .fields = fields,
    .backend_offset = offsetof(nx_num_sum_args, backend),
    .check = check,
    .build = build,
    .golden = "numerics",
    .tols = tols,
    .ntols = 2,
};
