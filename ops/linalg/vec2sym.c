/* The op `vec2sym` (api-b §1.1 `vec2sym(vec, offset=1)`): the symmetric matrix whose upper
 * triangle at `offset` (row-major, sym2vec's order) is vec's last axis, mirrored below; entries
 * with |i - j| < offset are 0. The side is the JAX version's closed form
 * floor((sqrt(8 n + 1) + 1) / 2) + offset - 1, and n must be that side's triangle count. A gather
 * of a constant index table; autodiff sums each entry's two places. */
#include "ops/linalg/matrix.h"

typedef struct vec2sym_args {
    nx_backend backend;
    int64_t offset;
} vec2sym_args;

static nx_status check(const nx_op_args *c)
{
    const vec2sym_args *o = c->opts;
    nx_status st = nx_la_check_float(c, 0, "vec", 1);
    if (st != NX_OK)
        return st;
    int nd = nx_tensor_ndim(c->in[0]);
    int64_t n = nx_tensor_shape(c->in[0])[nd - 1];
    /* an offset past n + 1 leaves no triangle of n entries (and keeps the side's sum finite) */
    bool fits = o->offset >= 0 && o->offset <= n + 1;
    int64_t side = fits ? nx_la_vec2sym_side(n, o->offset) : -1;
    if (side < 1 || side * side > INT32_MAX)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: vec has %lld entries, which is no triangle at offset %lld; "
                           "expected side (side + 1 - 2 offset) / 2 entries for some side >= 1",
                           c->who, (long long)n, (long long)o->offset);
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const vec2sym_args *o = c->opts;
    const nx_tensor *x = c->in[0];
    int nd = nx_tensor_ndim(x);
    nx_node xn = nx_parameter(g, "vec", nx_tensor_dtype(x), nd, nx_tensor_shape(x));
    int64_t side = nx_la_vec2sym_side(nx_tensor_shape(x)[nd - 1], o->offset);
    outs[0] = nx_la_vec2sym(g, xn, side, o->offset);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"offset", NX_OPT_INT, "1", "0:", 1, "the diagonal vec starts at (1: strictly above)"},
};

static const nx_op_field fields[] = {
    {offsetof(vec2sym_args, offset), NX_OP_NO_FIELD, sizeof(int64_t)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_vec2sym = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(vec2sym_args),
    .fields = fields,
    .backend_offset = offsetof(vec2sym_args, backend),
    .check = check,
    .build = build,
    .golden = "linalg",
    .tols = tols,
    .ntols = 2,
};
