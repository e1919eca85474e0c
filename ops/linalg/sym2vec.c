/* The op `sym2vec` (api-b §1.1 `sym2vec(sym, offset=1)`): the entries sym[..., i, j] with
 * j - i >= offset in row-major order (numpy.triu_indices), a gather of a constant index table;
 * autodiff scatters the cotangent into that triangle (the JAX version's custom vjp: the other
 * triangle gets none). */
#include "ops/linalg/matrix.h"

typedef struct sym2vec_args {
    nx_backend backend;
    int64_t offset;
} sym2vec_args;

static nx_status check(const nx_op_args *c)
{
    const sym2vec_args *o = c->opts;
    nx_status st = nx_la_check_float(c, 0, "sym", 2);
    if (st != NX_OK)
        return st;
    const int64_t *s = nx_tensor_shape(c->in[0]);
    int nd = nx_tensor_ndim(c->in[0]);
    if (s[nd - 1] != s[nd - 2])
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: sym is %lld x %lld; expected square",
                           c->who, (long long)s[nd - 2], (long long)s[nd - 1]);
    if (o->offset < 0 || o->offset > s[nd - 1] || s[nd - 1] * s[nd - 1] > INT32_MAX)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: offset %lld for %lld x %lld matrices; expected 0..%lld",
                           c->who, (long long)o->offset, (long long)s[nd - 1],
                           (long long)s[nd - 1], (long long)s[nd - 1]);
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const sym2vec_args *o = c->opts;
    const nx_tensor *x = c->in[0];
    nx_node xn = nx_parameter(g, "sym", nx_tensor_dtype(x), nx_tensor_ndim(x),
                              nx_tensor_shape(x));
    outs[0] = nx_la_sym2vec(g, xn, o->offset);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"offset", NX_OPT_INT, "1", "0:", 1, "the first diagonal kept (1: strictly above the main)"},
};

static const nx_op_field fields[] = {
    {offsetof(sym2vec_args, offset), NX_OP_NO_FIELD, sizeof(int64_t)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_sym2vec = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(sym2vec_args),
    .fields = fields,
    .backend_offset = offsetof(sym2vec_args, backend),
    .check = check,
    .build = build,
    .golden = "linalg",
    .tols = tols,
    .ntols = 2,
};
