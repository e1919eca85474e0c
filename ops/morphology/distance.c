/* Chamfer distance transforms (chessboard, taxicab) as separable per-axis contractions: along
 * each axis in turn, f[.., q] = min_p f[.., p] (x) |q - p| with (x) = max (chessboard: min over
 * sources of the largest per-axis offset) or + (taxicab: the sum of offsets). Each pass is a
 * broadcast against an n x n constant and a MIN fold, so autodiff differentiates it. O(n^2) per
 * line: the canonical driver, not a fast one. */
#include <math.h>
#include <string.h>

#include "cache.h"
#include "program/program.h"
#include "internal.h"
#include "ir/ir.h"
#include "morph.h"
#include "nitrix-graph.h"
#include "nitrix-ops.h"

/* metric NX_DISTANCE_METRIC_COUNT: squared Euclidean, cost (spacing * (q - p))^2 under +. */
static nx_node axis_pass(nx_graph *g, nx_node f, int axis, nx_distance_metric metric,
                         double spacing)
{
    int nd = nx_node_ndim(g, f);
    int64_t shape[NX_MAX_DIMS];
    if (!nx_node_shape(g, f, shape))
        return NX_NONE;
    int64_t n = shape[axis];
    int perm[NX_MAX_DIMS], inv[NX_MAX_DIMS], k = 0;
    for (int i = 0; i < nd; i++)
        if (i != axis)
            perm[k++] = i;
    perm[nd - 1] = axis;
    for (int i = 0; i < nd; i++)
        inv[perm[i]] = i;
    nx_dtype dt = nx_node_dtype(g, f);
    /* |q - p| from two iotas: [n, n], q along rows. */
    int64_t nn[2] = {n, n};
    nx_node cost = nx_abs(g, nx_sub(g, nx_iota(g, dt, 2, nn, 0), nx_iota(g, dt, 2, nn, 1)));
    if (metric == NX_DISTANCE_METRIC_COUNT) {
        cost = nx_mul(g, cost, nx_scalar(g, dt, spacing));
        cost = nx_mul(g, cost, cost);
    }
    nx_node t = nx_permute(g, f, perm);
    int64_t es[NX_MAX_DIMS];
    for (int i = 0; i < nd - 1; i++)
        es[i] = shape[perm[i]];
    es[nd - 1] = 1;
    es[nd] = n;
    t = nx_reshape(g, t, nd + 1, es); /* [..., 1, p] */
    nx_node v = metric == NX_DISTANCE_CHESSBOARD ? nx_maximum(g, t, cost) : nx_add(g, t, cost);
    int last = nd;
    v = nx_reduce(g, v, 1, &last, NX_MONOID_MIN, false); /* [..., q] */
    return nx_permute(g, v, inv);
}

nx_node nx_distance_node(nx_graph *g, nx_node field, nx_distance_metric metric)
{
    if (!g || !field || nx_graph_status(g) != NX_OK)
        return NX_NONE;
    if ((unsigned)metric >= NX_DISTANCE_METRIC_COUNT)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                 "nx_distance_node: metric %d; expected chessboard or taxicab",
                                 (int)metric);
    nx_dtype dt = nx_node_dtype(g, field);
    if (dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64)
        return nx_ir_graph_failf(g, NX_ERR_DTYPE,
                                 "nx_distance_node: field is %s; expected f32 or f64",
                                 nx_dtype_name(dt));
    int nd = nx_node_ndim(g, field);
    if (nd < 1 || nd + 1 > NX_MAX_DIMS)
        return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                 "nx_distance_node: field has %d dims; expected 1..%d", nd,
                                 NX_MAX_DIMS - 1);
    nx_node f = field;
    for (int a = 0; a < nd; a++)
        f = axis_pass(g, f, a, metric, 1.0);
    return f;
}

typedef struct distance_call {
    const nx_tensor *mask;
    nx_distance_metric metric;
    nx_backend backend;
} distance_call;

static nx_status compile(nx_ctx *ctx, const void *user, nx_program **out)
{
    const distance_call *c = user;
    const nx_tensor *mask = c->mask;
    nx_graph *g = NULL;
    nx_status st = nx_graph_new(ctx, &g);
    if (st != NX_OK)
        return st;
    nx_dtype md = nx_tensor_dtype(mask), dt = md == NX_DTYPE_F64 ? NX_DTYPE_F64 : NX_DTYPE_F32;
    nx_node m = nx_input(g, "mask", md, nx_tensor_ndim(mask), nx_tensor_shape(mask));
    nx_node fg = md == NX_DTYPE_BOOL ? m : nx_ne(g, m, nx_scalar(g, md, 0));
    nx_node field = nx_select(g, fg, nx_scalar(g, dt, INFINITY), nx_scalar(g, dt, 0));
    int64_t shape[NX_MAX_DIMS];
    memcpy(shape, nx_tensor_shape(mask), (size_t)nx_tensor_ndim(mask) * sizeof(int64_t));
    field = nx_broadcast(g, field, nx_tensor_ndim(mask), shape);
    nx_node y = nx_distance_node(g, field, c->metric);
    if ((st = nx_graph_status(g)) == NX_OK) {
        nx_compile_opts co = {.backend = c->backend, .n_outputs = 1, .outputs = &y};
        st = nx_graph_compile(g, &co, out);
    }
    nx_graph_free(g);
    return st;
}

nx_status nx_distance_transform(nx_ctx *ctx, const nx_tensor *mask, const nx_distance_opts *opts,
                                nx_tensor **out)
{
    static const char *who = "nx_distance_transform";
    static const nx_distance_opts defaults = {0};
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: ctx is NULL", who);
    if (!out || !mask)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %s is NULL", who, out ? "mask" : "out");
    *out = NULL;
    const nx_distance_opts *o = opts ? opts : &defaults;
    if ((unsigned)o->metric >= NX_DISTANCE_METRIC_COUNT)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: metric %d; expected chessboard or taxicab",
                           who, (int)o->metric);
    nx_dtype md = nx_tensor_dtype(mask);
    if (nx_tensor_device(mask) != NX_DEVICE_HOST)
        return nx_rt_error(ctx, NX_ERR_UNSUPPORTED,
                           "%s: mask is a device tensor; the chamfer transform runs on the host "
                           "(its O(n^2)-per-line passes are the canonical driver, not a device "
                           "path): copy the mask to the host",
                           who);
    if (md == NX_DTYPE_F16 || md == NX_DTYPE_BF16)
        return nx_rt_error(ctx, NX_ERR_DTYPE,
                           "%s: mask is %s; expected a host f32, f64, integer or bool tensor", who,
                           nx_dtype_name(md));
    int nd = nx_tensor_ndim(mask);
    if (nd < 1 || nd + 1 > NX_MAX_DIMS)
        return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: mask has %d dims; expected 1..%d", who, nd,
                           NX_MAX_DIMS - 1);
    if (nx_tensor_numel(mask) == 0)
        return nx_tensor_new(ctx, md == NX_DTYPE_F64 ? NX_DTYPE_F64 : NX_DTYPE_F32, nd,
                             nx_tensor_shape(mask), out);
    nx_rt_cache_blob b;
    nx_rt_cache_blob_init(&b, ctx);
    int64_t sig[NX_MAX_DIMS + 4] = {o->metric, o->backend, md, nd};
    memcpy(sig + 4, nx_tensor_shape(mask), (size_t)nd * sizeof(int64_t));
    nx_rt_cache_blob_str(&b, "op", "distance_transform");
    nx_rt_cache_blob_bytes(&b, "sig", sig, sizeof sig);
    distance_call c = {.mask = mask, .metric = o->metric, .backend = o->backend};
    nx_program *p = NULL;
    nx_status st = nx_program_cached(ctx, &b, "distance_transform: cache key", compile, &c, &p);
    if (st != NX_OK)
        return st;
    return nx_program_run(p, (const nx_tensor *const[]){mask}, out);
}

/* Exact Euclidean distance: the squared distance is separable, min over sources of
 * sum_i (s_i (x_i - z_i))^2, so one min-plus pass per axis against (s (q - p))^2 and a square
 * root give it exactly (no lower envelope needed; O(n^2) per line, the canonical driver of
 * distance_transform_edt, edt.c). */
nx_node nx_morph_edt_separable_node(nx_graph *g, nx_node field, const double *sampling)
{
    int nd = nx_node_ndim(g, field);
    nx_node f = field;
    for (int a = 0; a < nd; a++)
        f = axis_pass(g, f, a, NX_DISTANCE_METRIC_COUNT, sampling ? sampling[a] : 1.0);
    return nx_sqrt(g, f);
}
