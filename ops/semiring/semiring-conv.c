/* semiring_conv: channels-last cross-correlation under a semiring,
 *   y[.., o, co] = (+)_{t, ci} xp[.., o*stride + t*dilation, ci] (x) k[t, ci, co]
 * with xp x padded with the (+)-identity ('SAME', 'VALID' or explicit (lo, hi) per spatial dim).
 * The descriptor and the typed entry points; the geometry and the graph are in contract.c. */
#include <string.h>

#include "ops/op.h"
#include "semiring.h"

static const nx_sr_conv_args *args_of(const nx_op_args *c)
{
    return c->opts;
}

/* Text options give 1 value (all dims) or one per spatial dim; a typed call gives counts of 0. */
static nx_status check_counts(const nx_op_args *c)
{
    const nx_sr_conv_args *o = args_of(c);
    int d = o->conv.nspatial ? o->conv.nspatial : nx_tensor_ndim(c->in[1]) - 2;
    const struct {
        const char *name;
        int n;
    } given[4] = {{"stride", o->n_stride},
                  {"dilation", o->n_dilation},
                  {"pad_lo", o->n_pad_lo},
                  {"pad_hi", o->n_pad_hi}};
    for (int i = 0; i < 4; i++)
        if (given[i].n > 1 && given[i].n != d)
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: %s has %d values; expected 1 or %d (one per spatial dim)",
                               c->who, given[i].name, given[i].n, d);
    return NX_OK;
}

static nx_status check(const nx_op_args *c)
{
    const nx_semiring *sr = nx_sr_or_real(args_of(c)->semiring);
    const nx_tensor *x = c->in[0], *k = c->in[1];
    nx_status st = NX_OK;
    if (c->dy) {
        st = nx_semiring_check_differentiable(c->ctx, sr, c->who);
        if (st == NX_OK)
            st = nx_sr_check_float_any(c->ctx, c->who, "x", x);
        if (st == NX_OK)
            st = nx_sr_check_float_any(c->ctx, c->who, "kernel", k);
    }
    if (st == NX_OK)
        st = nx_sr_check_operand(c->ctx, c->who, "x", x, sr);
    if (st == NX_OK)
        st = nx_sr_check_operand(c->ctx, c->who, "kernel", k, sr);
    if (st == NX_OK && nx_tensor_dtype(x) != nx_tensor_dtype(k))
        st = nx_rt_error(c->ctx, NX_ERR_DTYPE, "%s: x is %s but kernel is %s; expected one dtype",
                         c->who, nx_dtype_name(nx_tensor_dtype(x)),
                         nx_dtype_name(nx_tensor_dtype(k)));
    if (st == NX_OK && c->dy)
        st = nx_sr_check_float_any(c->ctx, c->who, "the cotangent", c->dy[0]);
    if (st == NX_OK && c->dy && nx_tensor_dtype(c->dy[0]) != nx_tensor_dtype(x))
        st = nx_rt_error(c->ctx, NX_ERR_DTYPE, "%s: the cotangent is %s but the operands are %s",
                         c->who, nx_dtype_name(nx_tensor_dtype(c->dy[0])),
                         nx_dtype_name(nx_tensor_dtype(x)));
    return st == NX_OK ? check_counts(c) : st;
}

static void key(nx_rt_cache_blob *b, const nx_op_args *c)
{
    const nx_sr_conv_args *o = args_of(c);
    nx_sr_semiring_key(b, nx_sr_or_real(o->semiring));
    nx_sr_key_conv(b, &o->conv);
}

/* The geometry (channels, padding, window against the input) is checked as the graph is built,
 * where the window view's shapes are known; errors are the graph's. */
static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_sr_conv_args *o = args_of(c);
    nx_node x = nx_sr_operand(g, "x", c->in[0]), k = nx_sr_operand(g, "k", c->in[1]);
    outs[0] = nx_semiring_conv_node(g, nx_sr_or_real(o->semiring), x, k, &o->conv);
    if (outs[0] && c->dy)
        return nx_sr_check_result(g, c->who, outs[0], c->dy[0]);
    return nx_graph_status(g);
}

#define N_SP NX_CONV_MAX_SPATIAL
static const nx_op_opt opts[] = {
    {"semiring", NX_OPT_SEMIRING, "REAL", NULL, 1,
     "the algebra (built-in; user semirings through the C entry point)"},
    {"stride", NX_OPT_INTS, "1", "1:", N_SP, "per spatial dim, or one value for all"},
    {"padding", NX_OPT_ENUM, "SAME", "SAME|VALID|EXPLICIT", 1,
     "SAME: out = ceil(in / stride), lo = total / 2; VALID: none; EXPLICIT: pad_lo / pad_hi"},
    {"dilation", NX_OPT_INTS, "1", "1:", N_SP, "per spatial dim, or one value for all"},
    {"pad_lo", NX_OPT_INTS, "0", "0:", N_SP, "EXPLICIT padding before, per spatial dim"},
    {"pad_hi", NX_OPT_INTS, "0", "0:", N_SP, "EXPLICIT padding after, per spatial dim"},
};

#define F(field, count)                                                                            \
    {                                                                                              \
        offsetof(nx_sr_conv_args, field), count, sizeof(((nx_sr_conv_args *)0)->field)             \
    }
static const nx_op_field fields[] = {
    F(semiring, NX_OP_NO_FIELD),
    F(conv.stride, offsetof(nx_sr_conv_args, n_stride)),
    F(conv.padding, NX_OP_NO_FIELD),
    F(conv.dilation, offsetof(nx_sr_conv_args, n_dilation)),
    F(conv.pad_lo, offsetof(nx_sr_conv_args, n_pad_lo)),
    F(conv.pad_hi, offsetof(nx_sr_conv_args, n_pad_hi)),
};
#undef F

/* the (retired) golden/tolerance.tsv's rows */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-12},
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-5},
    {NX_DTYPE_BOOL, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_semiring_conv = {
    .info = {.nopts = 6, .opts = opts},
    .opts_size = sizeof(nx_sr_conv_args),
    .fields = fields,
    .backend_offset = offsetof(nx_sr_conv_args, conv.backend),
    .check = check,
    .key = key,
    .build = build,
    .golden = "semiring",
    .tols = tols,
    .ntols = 3,
};

/* ---- typed entry points ----------------------------------------------------------------------*/

static nx_sr_conv_args args(const nx_semiring *sr, const nx_semiring_conv_opts *opts)
{
    nx_sr_conv_args o = {.semiring = sr};
    if (opts)
        o.conv = *opts;
    return o;
}

nx_status nx_semiring_conv(nx_ctx *ctx, const nx_semiring *sr, const nx_tensor *x,
                           const nx_tensor *k, const nx_semiring_conv_opts *opts, nx_tensor **out)
{
    nx_status st = nx_sr_check_call(ctx, "nx_semiring_conv", sr, out);
    if (st != NX_OK)
        return st;
    nx_sr_conv_args o = args(sr, opts);
    return nx_op_run(ctx, &nx_op_semiring_conv, (const nx_tensor *const[]){x, k}, &o, out);
}

nx_status nx_semiring_conv_vjp(nx_ctx *ctx, const nx_semiring *sr, const nx_tensor *x,
                               const nx_tensor *k, const nx_tensor *dy,
                               const nx_semiring_conv_opts *opts, nx_tensor **dx, nx_tensor **dk)
{
    nx_sr_conv_args o = args(sr, opts);
    return nx_sr_run_vjp2(ctx, "nx_semiring_conv_vjp", &nx_op_semiring_conv, sr, x, k, dy, &o, dx,
                          dk);
}
