/* sectioned_semiring_ell_matmul: C = A (x)-(+) B for A given as CSR rows (offsets i64 [n_rows + 1],
 * indices, values [nnz]), run as a SectionedELL: rows bucketed by degree into plain ELLs, one
 * semiring_ell_matmul per section. The descriptor; the SectionedELL and the loop are sectioned.c.
 * nx_sectioned_ell_matmul, which takes a SectionedELL already built, is that loop itself (a built
 * SectionedELL is no tensor input of the table). */
#include "ops/op.h"
#include "ops/sparse/sparse.h"

static nx_status check(const nx_op_args *c)
{
    const nx_sectioned_args *o = c->opts;
    if (c->dy)
        return nx_semiring_check_differentiable(c->ctx, nx_sr_or_real(o->semiring), c->who);
    return NX_OK; /* the CSR rows and B are checked as the SectionedELL is built and run */
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    return nx_sectioned_op_run(c, false, outs);
}

static const nx_op_opt opts[] = {
    {"semiring", NX_OPT_SEMIRING, "REAL", NULL, 1,
     "the algebra (built-in; user semirings through the C entry point)"},
    /* INTS of one value: its count says whether it was given (the default is B's rows) */
    {"n_cols", NX_OPT_INTS, "(B's rows)", "0:", 1, "the matrix's column count"},
};

static const nx_op_field fields[] = {
    {offsetof(nx_sectioned_args, semiring), NX_OP_NO_FIELD, sizeof(const nx_semiring *)},
    {offsetof(nx_sectioned_args, n_cols), offsetof(nx_sectioned_args, n_cols_given),
     sizeof(int64_t)},
};

/* the fixtures' (tests/ops/sparse: f32 2e-5, f64 1e-12) */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-12},
    {NX_DTYPE_F32, NULL, NULL, 2e-5, 2e-5},
};

static const char *const aliases[] = {"sectioned_ell_matmul", NULL};

const nx_op_desc nx_op_sectioned_semiring_ell_matmul = {
    .info = {.nopts = 2, .opts = opts, .aliases = aliases},
    .opts_size = sizeof(nx_sectioned_args),
    .fields = fields,
    .backend_offset = offsetof(nx_sectioned_args, backend),
    .check = check,
    .run = run,
    .golden = "sparse",
    .tols = tols,
    .ntols = 2,
};
