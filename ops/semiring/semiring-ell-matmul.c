/* semiring_ell_matmul: C[..., i, j] = (+)_p values[i, p] (x) B[..., indices[i, p], j] under any
 * semiring, the ELL given as its values and indices and n_cols (default: B's rows). The
 * descriptor and the typed entry points; the ELL ops' shared check and run are ops/sparse/entry.c,
 * the graph builder ops/sparse/ell.c. */
#include "ops/op.h"
#include "ops/sparse/sparse.h"

static nx_status check(const nx_op_args *c)
{
    return nx_ell_op_check(c, NX_ELL_MATMUL, "B");
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    return nx_ell_op_run(c, NX_ELL_MATMUL, outs);
}

static const nx_op_opt opts[] = {
    {"semiring", NX_OPT_SEMIRING, "REAL", NULL, 1,
     "the algebra (built-in; user semirings through the C entry point)"},
    /* INTS of one value: its count says whether it was given (the default is B's rows) */
    {"n_cols", NX_OPT_INTS, "(B's rows)", "0:", 1, "the matrix's column count"},
};

static const nx_op_field fields[] = {
    {offsetof(nx_ell_args, semiring), NX_OP_NO_FIELD, sizeof(const nx_semiring *)},
    {offsetof(nx_ell_args, n_cols), offsetof(nx_ell_args, n_cols_given), sizeof(int64_t)},
};

/* the (retired) golden/tolerance.tsv's ell_matmul rows */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-12},
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-5},
};

static const char *const aliases[] = {"ell_matmul", NULL};

const nx_op_desc nx_op_semiring_ell_matmul = {
    .info = {.nopts = 2, .opts = opts, .aliases = aliases},
    .opts_size = sizeof(nx_ell_args),
    .fields = fields,
    .backend_offset = offsetof(nx_ell_args, backend),
    .check = check,
    .run = run,
    .golden = "sparse",
    .tols = tols,
    .ntols = 2,
};

nx_status nx_semiring_ell_matmul(nx_ctx *ctx, const nx_semiring *sr, const nx_ell *a,
                                 const nx_tensor *b, const nx_semiring_opts *opts, nx_tensor **out)
{
    nx_status st = nx_sr_check_call(ctx, "nx_semiring_ell_matmul", sr, out);
    if (st != NX_OK)
        return st;
    nx_ell_args args = nx_ell_typed_args(sr, a, opts);
    return nx_ell_typed_run(ctx, &nx_op_semiring_ell_matmul, NULL, a, b, NULL, &args, out);
}

nx_status nx_semiring_ell_matmul_vjp(nx_ctx *ctx, const nx_semiring *sr, const nx_ell *a,
                                     const nx_tensor *b, const nx_tensor *dc,
                                     const nx_semiring_opts *opts, nx_tensor **dvalues,
                                     nx_tensor **db)
{
    return nx_ell_typed_vjp(ctx, &nx_op_semiring_ell_matmul, sr, a, b, dc, opts, dvalues, db);
}
