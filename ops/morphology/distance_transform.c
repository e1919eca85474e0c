/* The op `distance_transform` (scipy.ndimage.distance_transform_cdt, +inf where mask has no
 * zero): its descriptor and the typed entry point nx_distance_transform. The fragment is
 * nx_distance_node (distance-node.c). */
#include <math.h>
#include <string.h>

#include "morph.h"
#include "nitrix-graph.h"
#include "nitrix-ops.h"

typedef struct cdt_args {
    nx_backend backend;
    int metric; /* chessboard | taxicab | chebyshev | city_block: index % 2 is the metric */
} cdt_args;

static const nx_op_opt opts[] = {
    {"metric", NX_OPT_ENUM, "chessboard", "chessboard|taxicab|chebyshev|city_block", 1,
     "L-inf (chessboard, chebyshev) or L1 (taxicab, city_block)"},
};
static const nx_op_field fields[] = {
    {offsetof(cdt_args, metric), NX_OP_NO_FIELD, sizeof(int)},
};

static nx_status check(const nx_op_args *c)
{
    const cdt_args *a = c->opts;
    const nx_tensor *mask = c->in[0];
    if ((unsigned)a->metric >= 4)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: metric %d; expected chessboard or taxicab", c->who, a->metric);
    nx_dtype md = nx_tensor_dtype(mask);
    if (nx_tensor_device(mask) != NX_DEVICE_HOST)
        return nx_rt_error(c->ctx, NX_ERR_UNSUPPORTED,
                           "%s: mask is a device tensor; the chamfer transform runs on the host "
                           "(its O(n^2)-per-line passes are the canonical driver, not a device "
                           "path): copy the mask to the host",
                           c->who);
    if (md == NX_DTYPE_F16 || md == NX_DTYPE_BF16)
        return nx_rt_error(c->ctx, NX_ERR_DTYPE,
                           "%s: mask is %s; expected a host f32, f64, integer or bool tensor",
                           c->who, nx_dtype_name(md));
    int nd = nx_tensor_ndim(mask);
    if (nd < 1 || nd + 1 > NX_MAX_DIMS)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: mask has %d dims; expected 1..%d", c->who,
                           nd, NX_MAX_DIMS - 1);
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    const nx_tensor *mask = c->in[0];
    const cdt_args *a = c->opts;
    nx_dtype md = nx_tensor_dtype(mask), dt = md == NX_DTYPE_F64 ? NX_DTYPE_F64 : NX_DTYPE_F32;
    nx_node m = nx_input(g, "mask", md, nx_tensor_ndim(mask), nx_tensor_shape(mask));
    nx_node fg = md == NX_DTYPE_BOOL ? m : nx_ne(g, m, nx_scalar(g, md, 0));
    nx_node field = nx_select(g, fg, nx_scalar(g, dt, INFINITY), nx_scalar(g, dt, 0));
    field = nx_broadcast(g, field, nx_tensor_ndim(mask), nx_tensor_shape(mask));
    outs[0] = nx_distance_node(g, field, (nx_distance_metric)(a->metric % 2));
    return nx_graph_status(g);
}

static nx_status stage(nx_graph *g, const nx_op_args *c, const void *user, int nout,
                       nx_node *outs)
{
    (void)user;
    (void)nout;
    return build(g, c, outs);
}

/* An empty mask has nothing to measure: an empty result of its shape. */
static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    const nx_tensor *mask = c->in[0];
    nx_dtype md = nx_tensor_dtype(mask);
    if (nx_tensor_numel(mask) == 0)
        return nx_tensor_new(c->ctx, md == NX_DTYPE_F64 ? NX_DTYPE_F64 : NX_DTYPE_F32,
                             nx_tensor_ndim(mask), nx_tensor_shape(mask), outs);
    nx_program *p = NULL;
    nx_status st = nx_op_program(c, NULL, NULL, stage, NULL, 1, &p);
    if (st != NX_OK)
        return st;
    return nx_program_run(p, (const nx_tensor *const[]){mask}, outs);
}

/* Integer distances in floats: exact. */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
    {NX_DTYPE_BOOL, NULL, NULL, 0, 0},
    {NX_DTYPE_I32, NULL, NULL, 0, 0},
    {NX_DTYPE_U8, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_distance_transform = {
    .info = {.nopts = 1, .opts = opts, .aliases = NULL},
    .opts_size = sizeof(cdt_args),
    .fields = fields,
    .backend_offset = offsetof(cdt_args, backend),
    .check = check,
    .build = build,
    .run = run,
    .golden = "morphology",
    .tols = tols,
    .ntols = sizeof tols / sizeof tols[0],
};

nx_status nx_distance_transform(nx_ctx *ctx, const nx_tensor *mask, const nx_distance_opts *opts,
                                nx_tensor **out)
{
    static const char *who = "nx_distance_transform";
    cdt_args a = {0};
    if (opts) {
        if ((unsigned)opts->metric >= NX_DISTANCE_METRIC_COUNT) {
            if (out)
                *out = NULL;
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                               "%s: metric %d; expected chessboard or taxicab", who,
                               (int)opts->metric);
        }
        a = (cdt_args){.backend = opts->backend, .metric = (int)opts->metric};
    }
    return nx_op_run_as(ctx, &nx_op_distance_transform, who, (const nx_tensor *const[]){mask}, &a,
                        out);
}
