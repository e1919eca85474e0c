/* semiring_ell_rmatvec: Y = A^T X under REAL, x [..., m, c] -> [..., n_cols, c],
 *   Y[..., q, j] = sum_{(i, p): indices[i, p] == q} values[i, p] X[..., i, j]
 * with two drivers (runtime/divergent.def row ell_rmatvec): "gather", the canonical one, folds each
 * output row over a transposed ELL built on the host, in ascending (row, slot) order; "scatter",
 * the fast one, adds into the output with the IR's scatter. The descriptor, the driver choice and
 * the typed entry points; the scatter program is the ELL ops' shared run (ops/sparse/entry.c). */
#include <string.h>

#include "ops/op.h"
#include "ops/sparse/sparse.h"

static const char *const drivers[] = {"auto", "gather", "scatter"};

static nx_status check(const nx_op_args *c)
{
    return nx_ell_op_check(c, NX_ELL_RMATVEC, "X");
}

/* The canonical formulation: A^T as an ELL built on the host, then semiring_ell_matmul's
 * gather-fold in slot order, so each output element is summed in ascending (i, p) order whatever
 * the backend. */
static nx_status run_gather(const nx_op_args *c, nx_tensor **outs)
{
    static const char *who = "nx_semiring_ell_rmatvec (gather driver: A^T is built on the host)";
    nx_ell a = nx_ell_of_call(c, NX_ELL_RMATVEC);
    nx_status st = nx_sparse_check_host(c->ctx, who, "the ELL's values", a.values);
    if (st == NX_OK)
        st = nx_sparse_check_host(c->ctx, who, "the ELL's indices", a.indices);
    if (st != NX_OK)
        return st;
    nx_ell t;
    st = nx_sparse_transpose(c->ctx, &a, &t);
    if (st != NX_OK)
        return st;
    nx_ell_args args = {.backend = c->backend,
                        .semiring = nx_semiring_builtin(NX_SEMIRING_REAL),
                        .n_cols = t.n_cols,
                        .identity = t.identity,
                        .typed_call = true};
    st = nx_op_run(c->ctx, &nx_op_semiring_ell_matmul,
                   (const nx_tensor *const[]){t.values, t.indices, c->in[2]}, &args, outs);
    nx_ell_free(&t);
    return st;
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    const nx_ell_args *o = c->opts;
    if (c->dy || o->fold) /* the vjp (and the folded check's test path) are the scatter program */
        return nx_ell_op_run(c, NX_ELL_RMATVEC, outs);
    const char *asked =
        o->typed_call ? o->driver_text : drivers[o->driver >= 0 && o->driver < 3 ? o->driver : 0];
    const char *variant = NULL;
    nx_status st = nx_driver_resolve(c->ctx, "ell_rmatvec", asked, &variant);
    if (st != NX_OK)
        return st;
    if (strcmp(variant, "gather") == 0)
        return run_gather(c, outs);
    return nx_ell_op_run(c, NX_ELL_RMATVEC, outs);
}

static const nx_op_opt opts[] = {
    {"semiring", NX_OPT_SEMIRING, "REAL", NULL, 1, "the algebra: REAL only (A^T X)"},
    {"n_cols", NX_OPT_INT, NULL, "0:", 1, "the matrix's column count (Y's rows)"},
    {"identity", NX_OPT_FLOAT, "0", NULL, 1, "the pad value (pads contribute nothing)"},
    {"driver", NX_OPT_ENUM, "auto", "auto|gather|scatter", 1,
     "gather (canonical, fixed order) or scatter (fast); auto: gather when reproducible"},
};

static const nx_op_field fields[] = {
    {offsetof(nx_ell_args, semiring), NX_OP_NO_FIELD, sizeof(const nx_semiring *)},
    {offsetof(nx_ell_args, n_cols), NX_OP_NO_FIELD, sizeof(int64_t)},
    {offsetof(nx_ell_args, identity), NX_OP_NO_FIELD, sizeof(double)},
    {offsetof(nx_ell_args, driver), NX_OP_NO_FIELD, sizeof(int)},
};

/* the fixtures' (tests/ops/sparse: f32 2e-5, f64 1e-12); the drivers' contract is the registry's */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-12},
    {NX_DTYPE_F32, NULL, NULL, 2e-5, 2e-5},
};

static const char *const aliases[] = {"ell_rmatvec", NULL};

const nx_op_desc nx_op_semiring_ell_rmatvec = {
    .info = {.nopts = 4, .opts = opts, .aliases = aliases},
    .opts_size = sizeof(nx_ell_args),
    .fields = fields,
    .backend_offset = offsetof(nx_ell_args, backend),
    .check = check,
    .run = run,
    .golden = "sparse",
    .tols = tols,
    .ntols = 2,
};

nx_status nx_semiring_ell_rmatvec(nx_ctx *ctx, const nx_semiring *sr, const nx_ell *a,
                                  const nx_tensor *x, const nx_semiring_opts *opts, nx_tensor **out)
{
    nx_status st = nx_sr_check_call(ctx, "nx_semiring_ell_rmatvec", sr, out);
    if (st != NX_OK)
        return st;
    nx_ell_args args = nx_ell_typed_args(sr, a, opts);
    return nx_ell_typed_run(ctx, &nx_op_semiring_ell_rmatvec, NULL, a, x, NULL, &args, out);
}

nx_status nx_semiring_ell_rmatvec_vjp(nx_ctx *ctx, const nx_semiring *sr, const nx_ell *a,
                                      const nx_tensor *x, const nx_tensor *dy,
                                      const nx_semiring_opts *opts, nx_tensor **dvalues,
                                      nx_tensor **dx)
{
    return nx_ell_typed_vjp(ctx, &nx_op_semiring_ell_rmatvec, sr, a, x, dy, opts, dvalues, dx);
}
