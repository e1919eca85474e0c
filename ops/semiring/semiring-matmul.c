/* semiring_matmul: C[..., i, j] = (+)_k A[..., i, k] (x) B[..., k, j] under any semiring, leading
 * dims broadcast (numpy). The op's descriptor and the typed entry points nx_semiring_matmul and
 * nx_semiring_matmul_vjp; the shape rule is the graph builder's (frontend/semiring.c). */
#include <stdio.h>
#include <string.h>

#include "ops/op.h"
#include "semiring.h"

/* ---- the descriptor --------------------------------------------------------------------------*/

static const nx_semiring *semiring_of(const nx_op_args *c)
{
    return nx_sr_or_real(((const nx_sr_matmul_args *)c->opts)->semiring);
}

static nx_status check(const nx_op_args *c)
{
    const nx_semiring *sr = semiring_of(c);
    const nx_tensor *a = c->in[0], *b = c->in[1];
    if (c->dy) { /* a forward-only algebra says so before any operand check */
        nx_status st = nx_semiring_check_differentiable(c->ctx, sr, c->who);
        if (st == NX_OK)
            st = nx_sr_check_float_any(c->ctx, c->who, "A", a);
        if (st == NX_OK)
            st = nx_sr_check_float_any(c->ctx, c->who, "B", b);
        if (st != NX_OK)
            return st;
    }
    nx_status st = nx_sr_check_operand(c->ctx, c->who, "A", a, sr);
    if (st == NX_OK)
        st = nx_sr_check_operand(c->ctx, c->who, "B", b, sr);
    if (st != NX_OK)
        return st;
    if (nx_tensor_dtype(a) != nx_tensor_dtype(b))
        return nx_rt_error(c->ctx, NX_ERR_DTYPE, "%s: A is %s but B is %s; expected one dtype",
                           c->who, nx_dtype_name(nx_tensor_dtype(a)),
                           nx_dtype_name(nx_tensor_dtype(b)));
    char msg[256];
    int n = 0;
    int64_t shape[NX_MAX_DIMS];
    st = nx_sr_matmul_shape(nx_tensor_ndim(a), nx_tensor_shape(a), nx_tensor_ndim(b),
                            nx_tensor_shape(b), &n, shape, msg, sizeof msg);
    if (st != NX_OK)
        return nx_rt_error(c->ctx, st, "%s: %s", c->who, msg);
    return c->dy ? nx_sr_check_cotangent(c->ctx, c->who, c->dy[0], nx_tensor_dtype(a), n, shape)
                 : NX_OK;
}

static void key(nx_rt_cache_blob *b, const nx_op_args *c)
{
    nx_sr_semiring_key(b, semiring_of(c));
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    nx_node a = nx_sr_operand(g, "A", c->in[0]), b = nx_sr_operand(g, "B", c->in[1]);
    outs[0] = nx_semiring_matmul_node(g, semiring_of(c), a, b);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"semiring", NX_OPT_SEMIRING, "REAL", NULL, 1,
     "the algebra (built-in; user semirings through the C entry point)"},
};

static const nx_op_field fields[] = {
    {offsetof(nx_sr_matmul_args, semiring), NX_OP_NO_FIELD, sizeof(const nx_semiring *)},
};

/* the (retired) golden/tolerance.tsv's rows, and the fixtures' (tests/ops/semiring: f32 2e-5 there) */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-12},
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-5},
    {NX_DTYPE_BOOL, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_semiring_matmul = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(nx_sr_matmul_args),
    .fields = fields,
    .backend_offset = offsetof(nx_sr_matmul_args, backend),
    .check = check,
    .key = key,
    .build = build,
    .golden = "semiring",
    .tols = tols,
    .ntols = 3,
};

/* ---- typed entry points ----------------------------------------------------------------------*/

nx_status nx_semiring_matmul(nx_ctx *ctx, const nx_semiring *sr, const nx_tensor *a,
                             const nx_tensor *b, const nx_semiring_opts *opts, nx_tensor **out)
{
    static const char *who = "nx_semiring_matmul";
    nx_status st = nx_sr_check_call(ctx, who, sr, out);
    if (st != NX_OK)
        return st;
    nx_sr_matmul_args o = {.backend = opts ? opts->backend : NX_BACKEND_AUTO, .semiring = sr};
    return nx_op_run(ctx, &nx_op_semiring_matmul, (const nx_tensor *const[]){a, b}, &o, out);
}

nx_status nx_semiring_matmul_vjp(nx_ctx *ctx, const nx_semiring *sr, const nx_tensor *a,
                                 const nx_tensor *b, const nx_tensor *dc,
                                 const nx_semiring_opts *opts, nx_tensor **da, nx_tensor **db)
{
    nx_sr_matmul_args o = {.backend = opts ? opts->backend : NX_BACKEND_AUTO, .semiring = sr};
    return nx_sr_run_vjp2(ctx, "nx_semiring_matmul_vjp", &nx_op_semiring_matmul, sr, a, b, dc, &o,
                          da, db);
}
