/* ell_row_softmax: softmax of scores [..., m, k_max] over each row's slots that are not pads of the
 * ELL (values == identity); pads give 0, an all-pad row gives zeros. The descriptor and the typed
 * entry point; the ELL ops' shared check and run are ops/sparse/entry.c. The inputs keep the
 * command line's order (the ELL, then the scores) where the spec writes (scores, ell). */
#include "ops/op.h"
#include "ops/sparse/sparse.h"

static nx_status check(const nx_op_args *c)
{
    return nx_ell_op_check(c, NX_ELL_SOFTMAX, "the scores");
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    return nx_ell_op_run(c, NX_ELL_SOFTMAX, outs);
}

static const nx_op_opt opts[] = {
    {"identity", NX_OPT_FLOAT, "0", NULL, 1, "the pad value of values"},
};

static const nx_op_field fields[] = {
    {offsetof(nx_ell_args, identity), NX_OP_NO_FIELD, sizeof(double)},
};

/* the fixtures' (tests/ops/sparse: f32 2e-5, f64 1e-12) */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-12},
    {NX_DTYPE_F32, NULL, NULL, 2e-5, 2e-5},
};

const nx_op_desc nx_op_ell_row_softmax = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(nx_ell_args),
    .fields = fields,
    .backend_offset = offsetof(nx_ell_args, backend),
    .check = check,
    .run = run,
    .golden = "sparse",
    .tols = tols,
    .ntols = 2,
};

nx_status nx_ell_row_softmax(nx_ctx *ctx, const nx_ell *a, const nx_tensor *scores,
                             const nx_semiring_opts *opts, nx_tensor **out)
{
    static const char *who = "nx_ell_row_softmax";
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: ctx is NULL", who);
    if (!out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: out is NULL", who);
    *out = NULL;
    nx_ell_args args = nx_ell_typed_args(NULL, a, opts);
    return nx_ell_typed_run(ctx, &nx_op_ell_row_softmax, NULL, a, scores, NULL, &args, out);
}
