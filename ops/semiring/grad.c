/* Gradients of the semiring entry points, by reverse-mode autodiff of the same graph fragment the
 * forward pass compiles (passes/autodiff.h), cached like the forward programs. */
#include <string.h>

#include "cache.h"
#include "passes/autodiff.h"
#include "semiring.h"

nx_status nx_semiring_check_differentiable(nx_ctx *ctx, const nx_semiring *sr, const char *who)
{
    if (!sr)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: semiring is NULL", who);
    if (sr->props & NX_SEMIRING_DIFFERENTIABLE)
        return NX_OK;
    if (sr->kind == NX_SEMIRING_BOOLEAN)
        return nx_rt_error(ctx, NX_ERR_UNSUPPORTED,
                           "%s: semiring 'boolean' is forward-only (its values are truth values, "
                           "with no derivative)",
                           who);
    return nx_rt_error(ctx, NX_ERR_UNSUPPORTED,
                       "%s: semiring '%s' is forward-only: its (+) is a custom monoid, and only "
                       "semirings whose (+) is sum, max, min or logsumexp are differentiable",
                       who, sr->name);
}

typedef struct vjp_call {
    const nx_semiring *sr;
    const nx_tensor *a, *b, *dy;
    const nx_semiring_conv_opts *conv; /* NULL: matmul */
} vjp_call;

static nx_status build_vjp(nx_graph *g, void *user, nx_node *outs, int *n)
{
    vjp_call *c = user;
    nx_node in[2];
    in[0] = nx_input(g, "a", nx_tensor_dtype(c->a), nx_tensor_ndim(c->a), nx_tensor_shape(c->a));
    in[1] = nx_input(g, "b", nx_tensor_dtype(c->b), nx_tensor_ndim(c->b), nx_tensor_shape(c->b));
    nx_node dy =
        nx_input(g, "dy", nx_tensor_dtype(c->dy), nx_tensor_ndim(c->dy), nx_tensor_shape(c->dy));
    nx_node y = c->conv ? nx_semiring_conv_node(g, c->sr, in[0], in[1], c->conv)
                        : nx_semiring_matmul_node(g, c->sr, in[0], in[1]);
    if (!y)
        return nx_graph_status(g);
    int64_t ys[NX_MAX_DIMS];
    nx_node_shape(g, y, ys);
    if (nx_node_ndim(g, y) != nx_tensor_ndim(c->dy) ||
        memcmp(ys, nx_tensor_shape(c->dy), (size_t)nx_node_ndim(g, y) * sizeof(int64_t)))
        return nx_rt_error(nx_graph_ctx(g), NX_ERR_SHAPE,
                           "semiring vjp: the cotangent's shape is not the result's");
    nx_status st = nx_graph_vjp(g, 1, &y, &dy, 2, in, outs);
    *n = 2;
    return st;
}

static nx_status run_vjp(nx_ctx *ctx, const char *who, vjp_call *c, nx_backend backend,
                         nx_tensor **da, nx_tensor **db)
{
    if (da)
        *da = NULL;
    if (db)
        *db = NULL;
    nx_status st = nx_semiring_check_differentiable(ctx, c->sr, who);
    if (st == NX_OK)
        st = nx_sr_check_float_any(ctx, who, "the cotangent", c->dy);
    if (st == NX_OK && nx_tensor_dtype(c->dy) != nx_tensor_dtype(c->a))
        st = nx_rt_error(ctx, NX_ERR_DTYPE, "%s: the cotangent is %s but the operands are %s", who,
                         nx_dtype_name(nx_tensor_dtype(c->dy)),
                         nx_dtype_name(nx_tensor_dtype(c->a)));
    if (st != NX_OK)
        return st;
    nx_rt_cache_blob key;
    nx_rt_cache_blob_init(&key, ctx);
    nx_rt_cache_blob_str(&key, "op", who);
    nx_sr_semiring_key(&key, c->sr);
    nx_rt_cache_blob_tensor(&key, "a", c->a);
    nx_rt_cache_blob_tensor(&key, "b", c->b);
    nx_rt_cache_blob_tensor(&key, "dy", c->dy);
    if (c->conv)
        nx_sr_key_conv(&key, c->conv);
    nx_tensor *res[2] = {NULL, NULL};
    nx_sr_run_args ra = {.who = who, .backend = backend, .build = build_vjp, .user = c,
                         .ninputs = 3, .noutputs = 2,
                         .inputs = (const nx_tensor *const[]){c->a, c->b, c->dy},
                         .names = (const char *const[]){"the first operand", "the second operand",
                                                        "the cotangent"},
                         .outputs = res};
    st = nx_sr_run(ctx, &key, &ra);
    if (st != NX_OK)
        return st;
    if (da)
        *da = res[0];
    else
        nx_tensor_free(res[0]);
    if (db)
        *db = res[1];
    else
        nx_tensor_free(res[1]);
    return NX_OK;
}

static nx_status check_operands(nx_ctx *ctx, const char *who, const nx_tensor *a,
                                const nx_tensor *b)
{
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: ctx is NULL", who);
    nx_status st = nx_sr_check_float_any(ctx, who, "the first operand", a);
    if (st == NX_OK)
        st = nx_sr_check_float_any(ctx, who, "the second operand", b);
    if (st == NX_OK && nx_tensor_dtype(a) != nx_tensor_dtype(b))
        st = nx_rt_error(ctx, NX_ERR_DTYPE, "%s: the operands are %s and %s; expected one dtype",
                         who, nx_dtype_name(nx_tensor_dtype(a)), nx_dtype_name(nx_tensor_dtype(b)));
    return st;
}

nx_status nx_semiring_matmul_vjp(nx_ctx *ctx, const nx_semiring *sr, const nx_tensor *a,
                                 const nx_tensor *b, const nx_tensor *dc,
                                 const nx_semiring_opts *opts, nx_tensor **da, nx_tensor **db)
{
    static const char *who = "nx_semiring_matmul_vjp";
    if (da)
        *da = NULL;
    if (db)
        *db = NULL;
    /* a forward-only algebra says so before any operand check (bool operands included) */
    nx_status st = ctx ? nx_semiring_check_differentiable(ctx, sr, who) : NX_OK;
    if (st == NX_OK)
        st = check_operands(ctx, who, a, b);
    if (st != NX_OK)
        return st;
    vjp_call c = {.sr = sr, .a = a, .b = b, .dy = dc};
    return run_vjp(ctx, who, &c, opts ? opts->backend : NX_BACKEND_AUTO, da, db);
}

nx_status nx_semiring_conv_vjp(nx_ctx *ctx, const nx_semiring *sr, const nx_tensor *x,
                               const nx_tensor *k, const nx_tensor *dy,
                               const nx_semiring_conv_opts *opts, nx_tensor **dx, nx_tensor **dk)
{
    static const char *who = "nx_semiring_conv_vjp";
    if (dx)
        *dx = NULL;
    if (dk)
        *dk = NULL;
    /* a forward-only algebra says so before any operand check (bool operands included) */
    nx_status st = ctx ? nx_semiring_check_differentiable(ctx, sr, who) : NX_OK;
    if (st == NX_OK)
        st = check_operands(ctx, who, x, k);
    if (st != NX_OK)
        return st;
    nx_semiring_conv_opts o = {0};
    if (opts)
        o = *opts;
    vjp_call c = {.sr = sr, .a = x, .b = k, .dy = dy, .conv = &o};
    return run_vjp(ctx, who, &c, opts ? opts->backend : NX_BACKEND_AUTO, dx, dk);
}
