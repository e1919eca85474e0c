/* cast: y = x.astype(dtype) as nx_tensor_cast does it on the host: a NaN, or a value outside the
 * integer dtype's range, cast to an integer is an error (NX_ERR_INVALID_ARG) rather than a silent
 * wrap. There is no device cast yet: a cuda request falls back to the host loudly, as the
 * library's backends do (a warning, silenced by NITRIX_SILENCE_FALLBACK; an error under
 * NITRIX_STRICT_BACKEND). The vjp (float to float: dx = dy cast back) is a program of nx_cast. */
#include "ops/op.h"

typedef struct cast_opts {
    int dtype; /* nx_dtype */
    nx_backend backend;
} cast_opts;

static const nx_op_opt opts[] = {
    {"dtype", NX_OPT_DTYPE, NULL, NULL, 1,
     "target dtype: f32 f64 f16 bf16 i8 i16 i32 i64 u8 bool (numpy names accepted)"},
};
static const nx_op_field fields[] = {
    {offsetof(cast_opts, dtype), NX_OP_NO_FIELD, sizeof(int)},
};
static const char *const aliases[] = {"astype", NULL};

static nx_status check(const nx_op_args *c)
{
    const cast_opts *o = c->opts;
    if ((unsigned)o->dtype >= NX_DTYPE_COUNT)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: dtype %d is not an nx_dtype", c->who,
                           o->dtype);
    nx_dtype from = nx_tensor_dtype(c->in[0]);
    if (c->dy && (!nx_dtype_is_float(from) || !nx_dtype_is_float((nx_dtype)o->dtype)))
        return nx_rt_error(c->ctx, NX_ERR_DTYPE,
                           "%s: a cast from %s to %s has no gradient; expected float dtypes",
                           c->who, nx_dtype_name(from), nx_dtype_name((nx_dtype)o->dtype));
    return NX_OK;
}

static nx_status stage(nx_graph *g, const nx_op_args *c, const void *user, int nout,
                       nx_node *outs)
{
    (void)user;
    (void)nout;
    const cast_opts *o = c->opts;
    const nx_tensor *x = c->in[0];
    nx_node xn = nx_parameter(g, "x", nx_tensor_dtype(x), nx_tensor_ndim(x), nx_tensor_shape(x));
    outs[0] = nx_cast(g, xn, (nx_dtype)o->dtype);
    return nx_graph_status(g);
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    const cast_opts *o = c->opts;
    if (c->dy) {
        nx_program *p = NULL;
        nx_status st = nx_op_program(c, "vjp", NULL, stage, NULL, 1, &p);
        if (st != NX_OK)
            return st;
        return nx_program_run(p, (const nx_tensor *const[]){c->in[0], c->dy[0]}, outs);
    }
    if (c->backend == NX_BACKEND_CUDA) {
        if (nx_ctx_strict_backend(c->ctx))
            return nx_rt_error(c->ctx, NX_ERR_UNSUPPORTED,
                               "%s: the cuda backend has no cast yet and strict backend mode "
                               "(NITRIX_STRICT_BACKEND) forbids running it on the host",
                               c->who);
        if (!nx_ctx_silence_fallback(c->ctx))
            nx_ctx_log(c->ctx, NX_LOG_WARN,
                       "%s: the cuda backend has no cast yet; casting on the host. "
                       "NITRIX_SILENCE_FALLBACK=1 silences this warning, NITRIX_STRICT_BACKEND=1 "
                       "makes it an error",
                       c->who);
    }
    return nx_tensor_cast(c->in[0], (nx_dtype)o->dtype, &outs[0]);
}

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_cast = {
    .info = {.nopts = 1, .opts = opts, .aliases = aliases},
    .opts_size = sizeof(cast_opts),
    .fields = fields,
    .backend_offset = offsetof(cast_opts, backend),
    .check = check,
    .run = run,
    .golden = "core/cast",
    .tols = tols,
    .ntols = 2,
    .flags = NX_OP_HOST,
};
