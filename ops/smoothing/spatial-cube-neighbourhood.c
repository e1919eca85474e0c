/* The op spatial_cube_neighbourhood: the (2h+1)^d cube around each voxel of a C-order grid, as
 * an index array and its validity (include/nitrix-bilateral.h). A host op (NX_OP_HOST): plain
 * index arithmetic on the host, whatever backend is asked for. The grid is an input for its shape
 * only (its values are never read), so the typed entry point passes a zero-strided view of one
 * byte. */
#include <string.h>

#include "bilateral.h"
#include "ops/op.h"
#include "tensor.h"

#define MAX_HALF 1024

typedef struct cube_args {
    int64_t half;
} cube_args;

static const nx_op_opt opts[] = {
    {"half", NX_OPT_INT, "1", "0:1024", 1,
     "half-width h; outside offsets are clamped to the border and marked invalid"},
};

static const nx_op_field fields[] = {
    {offsetof(cube_args, half), NX_OP_NO_FIELD, sizeof(int64_t)},
};

/* The grid's voxel count and the slots per voxel, or an error naming what overflows. */
static nx_status cube_size(nx_ctx *ctx, const char *who, int ndim, const int64_t *shape,
                           int64_t half, int64_t *n, int64_t *slots)
{
    if (half < 0 || half > MAX_HALF)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: half %lld; expected 0..%d", who,
                           (long long)half, MAX_HALF);
    if (!nx_shape_numel(ndim, shape, n))
        return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: the grid's extents are negative or overflow",
                           who);
    *slots = 1;
    for (int a = 0; a < ndim; a++)
        if (!nx_mul_i64(*slots, 2 * half + 1, slots))
            return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: (2 * %lld + 1)^%d slots overflow", who,
                               (long long)half, ndim);
    int64_t total = 0;
    if (!nx_mul_i64(*n, *slots, &total) || !nx_mul_i64(total, 8, &total))
        return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: %lld voxels x %lld slots overflow", who,
                           (long long)*n, (long long)*slots);
    return NX_OK;
}

static nx_status check(const nx_op_args *c)
{
    const cube_args *a = c->opts;
    const nx_tensor *grid = c->in[0];
    int nd = nx_tensor_ndim(grid);
    if (nd < 1)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: ndim %d; expected 1..%d extents",
                           c->who, nd, NX_MAX_DIMS);
    int64_t n = 0, slots = 0;
    return cube_size(c->ctx, c->who, nd, nx_tensor_shape(grid), a->half, &n, &slots);
}

/* Fills one voxel's row: each offset's clamped neighbour and whether it stayed inside. */
static void cube_row(int ndim, const int64_t *shape, int64_t half, const int64_t *pos,
                     int64_t slots, int64_t *idx, uint8_t *valid)
{
    int64_t off[NX_MAX_DIMS];
    for (int a = 0; a < ndim; a++)
        off[a] = -half;
    for (int64_t s = 0; s < slots; s++) {
        int64_t lin = 0;
        bool inside = true;
        for (int a = 0; a < ndim; a++) {
            int64_t q = pos[a] + off[a];
            inside = inside && q >= 0 && q < shape[a];
            q = q < 0 ? 0 : q >= shape[a] ? shape[a] - 1 : q;
            lin = lin * shape[a] + q;
        }
        idx[s] = lin;
        if (valid)
            valid[s] = inside;
        for (int a = ndim - 1; a >= 0 && ++off[a] > half; a--)
            off[a] = -half;
    }
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    const cube_args *a = c->opts;
    int ndim = nx_tensor_ndim(c->in[0]);
    const int64_t *shape = nx_tensor_shape(c->in[0]);
    int64_t n = 0, slots = 0, half = a->half;
    nx_status st = cube_size(c->ctx, c->who, ndim, shape, half, &n, &slots);
    if (st == NX_OK)
        st = nx_rt_tensor_new_uninit(c->ctx, NX_DTYPE_I64, 2, (int64_t[]){n, slots}, &outs[0]);
    if (st == NX_OK)
        st = nx_rt_tensor_new_uninit(c->ctx, NX_DTYPE_BOOL, 2, (int64_t[]){n, slots}, &outs[1]);
    if (st != NX_OK)
        return st;
    int64_t pos[NX_MAX_DIMS] = {0};
    int64_t *ip = nx_tensor_data(outs[0]);
    uint8_t *vp = nx_tensor_data(outs[1]);
    for (int64_t v = 0; v < n; v++) {
        cube_row(ndim, shape, half, pos, slots, ip + v * slots, vp + v * slots);
        for (int ax = ndim - 1; ax >= 0 && ++pos[ax] == shape[ax]; ax--)
            pos[ax] = 0;
    }
    return NX_OK;
}

/* Index arithmetic: exact (golden/bilateral/cube_*, numpy's ravel_multi_index of clipped
 * offsets). */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_spatial_cube_neighbourhood = {
    .info = {.nopts = sizeof opts / sizeof opts[0], .opts = opts},
    .opts_size = sizeof(cube_args),
    .fields = fields,
    .backend_offset = NX_OP_NO_FIELD,
    .check = check,
    .run = run,
    .golden = "bilateral",
    .tols = tols,
    .ntols = sizeof tols / sizeof tols[0],
    .flags = NX_OP_HOST,
};

nx_status nx_spatial_cube_neighbourhood(nx_ctx *ctx, int ndim, const int64_t *shape, int64_t half,
                                        nx_tensor **index, nx_tensor **validity)
{
    static const char *who = "nx_spatial_cube_neighbourhood";
    if (!ctx || !index)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: ctx and index must not be NULL", who);
    *index = NULL;
    if (validity)
        *validity = NULL;
    if (ndim < 1 || ndim > NX_MAX_DIMS || !shape)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: ndim %d; expected 1..%d extents", who,
                           ndim, NX_MAX_DIMS);
    for (int ax = 0; ax < ndim; ax++)
        if (shape[ax] < 0)
            return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: the grid's extents are negative or overflow",
                               who);
    /* The grid's shape without its storage: every element is the one byte. */
    uint8_t byte = 0;
    int64_t strides[NX_MAX_DIMS] = {0};
    nx_tensor *grid = NULL, *res[2] = {NULL, NULL};
    nx_status st = nx_tensor_wrap(ctx, &byte, NX_DTYPE_U8, ndim, shape, strides, &grid);
    cube_args a = {.half = half};
    if (st == NX_OK)
        st = nx_op_run_as(ctx, &nx_op_spatial_cube_neighbourhood, who,
                          (const nx_tensor *const[]){grid}, &a, res);
    nx_tensor_free(grid);
    if (st != NX_OK)
        return st;
    *index = res[0];
    if (validity)
        *validity = res[1];
    else
        nx_tensor_free(res[1]);
    return NX_OK;
}
