/* grid_laplacian: the 2 ndim + 1 point Laplacian of a 1-4 D grid applied to it,
 *   y[v] = sum over axes of (x[v - e_a] - 2 x[v] + x[v + e_a]) / h^2
 * equal to scipy.ndimage.laplace (h = 1) in modes nearest, wrap and reflect; sign 'positive' flips
 * it (the positive semi-definite form). The descriptor: the operator is nx_grid_laplacian's ELL
 * (grid.c) over x's shape, applied by semiring_ell_matmul in f64.
 *
 * The spec's grid_laplacian, grid_stencil and grid_identity return an ELL; in C they are
 * nx_grid_laplacian, nx_grid_stencil and nx_grid_identity, host constructors filling an nx_ell
 * (its n_cols and identity are no tensors, so they are no rows of the table). This row is the
 * operator applied to a grid, as `nitrix run grid_laplacian` and the golden cases have it. */
#include "ops/op.h"
#include "ops/sparse/sparse.h"

typedef struct lap_args {
    nx_backend backend;
    int boundary;   /* the spec's: reflect|replicate|periodic */
    int mode;       /* scipy's: reflect|nearest|wrap (boundary wins when both are given) */
    double spacing; /* h; 1 unless given (n_spacing) */
    int n_spacing;
    int sign; /* negative|positive */
} lap_args;

static nx_grid_boundary boundary_of(const lap_args *o)
{
    static const nx_grid_boundary map[3] = {NX_GRID_REFLECT, NX_GRID_REPLICATE, NX_GRID_PERIODIC};
    int k = o->boundary > 0 && o->boundary < 3 ? o->boundary : o->mode;
    return map[k > 0 && k < 3 ? k : 0];
}

static nx_status check(const nx_op_args *c)
{
    return nx_sparse_check_float(c->ctx, c->who, "x", c->in[0]);
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    const lap_args *o = c->opts;
    const nx_tensor *x = c->in[0];
    int nd = nx_tensor_ndim(x);
    nx_ell a;
    nx_status st = nx_grid_laplacian(c->ctx, nd, nx_tensor_shape(x), boundary_of(o),
                                     o->n_spacing ? o->spacing : 1.0, o->sign == 0, &a);
    if (st != NX_OK)
        return st;
    nx_tensor *xf = NULL, *xc = NULL, *y = NULL, *ys = NULL;
    int64_t col[2] = {nx_tensor_numel(x), 1};
    /* The ELL is f64: f32 grids run as f64 and come back as f32. */
    st = nx_tensor_cast(x, NX_DTYPE_F64, &xf);
    if (st == NX_OK)
        st = nx_tensor_reshape(xf, 2, col, &xc);
    nx_ell_args args = {.backend = c->backend,
                        .semiring = nx_semiring_builtin(NX_SEMIRING_REAL),
                        .n_cols = a.n_cols,
                        .identity = a.identity,
                        .typed_call = true};
    if (st == NX_OK)
        st = nx_op_run(c->ctx, &nx_op_semiring_ell_matmul,
                       (const nx_tensor *const[]){a.values, a.indices, xc}, &args, &y);
    if (st == NX_OK)
        st = nx_tensor_reshape(y, nd, nx_tensor_shape(x), &ys);
    if (st == NX_OK)
        st = nx_tensor_cast(ys, nx_tensor_dtype(x), &outs[0]);
    nx_tensor_free(xf), nx_tensor_free(xc), nx_tensor_free(y), nx_tensor_free(ys);
    nx_ell_free(&a);
    return st;
}

static const nx_op_opt opts[] = {
    {"boundary", NX_OPT_ENUM, "reflect", "reflect|replicate|periodic", 1,
     "border rule: reflect (half-sample), replicate (clamp), periodic (wrap)"},
    {"mode", NX_OPT_ENUM, "reflect", "reflect|nearest|wrap", 1,
     "the border rule in scipy's names (boundary, when given, wins)"},
    /* a list of one value, whose count says whether it was given (the default is not zero) */
    {"spacing", NX_OPT_FLOATS, "1", "0:", 1, "grid spacing h (> 0): y / h^2"},
    {"sign", NX_OPT_ENUM, "negative", "negative|positive", 1,
     "negative: scipy's laplace; positive: its negation (positive semi-definite)"},
};

#define F(field, count)                                                                            \
    {                                                                                              \
        offsetof(lap_args, field), count, sizeof(((lap_args *)0)->field)                           \
    }
static const nx_op_field fields[] = {
    F(boundary, NX_OP_NO_FIELD),
    F(mode, NX_OP_NO_FIELD),
    F(spacing, offsetof(lap_args, n_spacing)),
    F(sign, NX_OP_NO_FIELD),
};
#undef F

/* the (retired) golden/tolerance.tsv's row */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F64, NULL, NULL, 1e-13, 1e-13},
};

const nx_op_desc nx_op_grid_laplacian = {
    .info = {.nopts = 4, .opts = opts},
    .opts_size = sizeof(lap_args),
    .fields = fields,
    .backend_offset = offsetof(lap_args, backend),
    .check = check,
    .run = run,
    .golden = "sparse",
    .tols = tols,
    .ntols = 1,
};
