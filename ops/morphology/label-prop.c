/* Connected components by label propagation with hooking and pointer jumping, as IR programs: the
 * driver that runs on the GPU (and on any backend), where the host's union-find (label-uf.c) cannot
 * go.
 *
 * The state is one flat i32 label per voxel: a foreground voxel starts with its own linear index,
 * background holds INT32_MAX throughout (so no separate mask travels between programs). A round:
 *
 *   M[i] = min(L[i], L[j] over the neighbours j)         (out of the volume: INT32_MAX)
 *   H    = L, then H[L[i]] = min(H[L[i]], M[i])          (a scatter-min: hooking, as in
 *                                                         Shiloach-Vishkin, where M[i] < L[i];
 *                                                         background and the rest dropped)
 *   L'[i] = min(M[i], H[H[..H[i]..]])                    (JUMPS chained gathers of one buffer)
 *
 * for foreground i. Every label is the index of a foreground voxel of the same component no
 * greater than the voxel's own, so hooks and jumps stay inside the component and labels only
 * decrease. L' <= M, so a component's minimum moves at least one step per round (the bound on
 * runs); the hooks let a whole tree take a lower root at once and the jumps shorten chains, so
 * the usual count is logarithmic (4 rounds on a 128^3 mask at 50 % density with 6 jumps, 5 with 4
 * jumps, in a NumPy model; 5 to 6 at 30-40 %). At a fixed point every voxel holds the first
 * voxel of its component in C order. The numbering counts the roots (voxels that are their own
 * label) by a cumulative sum in C order (two levels of scans, rows then row totals) and gathers
 * each voxel's number, which is exactly scipy.ndimage.label's numbering.
 *
 * Flat, so every kernel is cheap. The labels stay one flat axis in every kernel: a neighbour is
 * the flat index plus a constant offset (sum of delta_a * stride_a) in a copy of the labels padded
 * by the largest offset, valid when each inner axis the step moves along stays inside (one
 * comparison with the voxel's coordinate); the outermost axis needs no test, since with the
 * inner axes inside, the flat index leaves [0, n) exactly when that coordinate leaves its range.
 * The GPU emitter then gives the kernels an interior without any bounds test, where a neighbour
 * taken on the 3-D grid of a flat buffer paid a division, a modulo and a clamp per load (the
 * plan keeps the scatter's operands flat, so the grid view was one reshape per load).
 *
 * The first round needs no scatter: from L[i] = i the only hook into i is i's own, so H = M, and
 * the initial labels are read from the mask inside the neighbourhood minimum (no kernel of their
 * own). Kernels and runs: the first round is two kernels (M, then the chained gathers of M); a
 * later round is four (M, the hooks' targets, the scatter, the gathers; the scatter's copy of L
 * into H is a device copy, not a kernel). A program run does ROUNDS rounds, tests the fixed
 * point (not_fixed: one reduction) and numbers the labels as if it had been reached (six
 * kernels), so the usual mask is one program run of 21 kernels with one 4-byte read (the
 * status: the number of components, or -1 when the labels were not a fixed point yet; then the
 * host runs the round program on the labels the run left and discards its numbering). Four
 * rounds reach the fixed point on random 128^3 masks of 10-20 % and 50-90 % density, a ball, a
 * shell, a noisy ball, tubes and the full cube; 30-40 % (around the percolation threshold, the
 * most tortuous components) take 5 to 6, so two runs (NumPy model of the rounds). Inputs on the
 * device stay there: every program's inputs are device tensors then, so no label array crosses
 * the bus between runs. */
#include <string.h>

#include "morph.h"
#include "nitrix-ops.h"
#include "program/program.h"
#include "runtime/cache.h"

#define ROUNDS 4
#define JUMPS 6
#define MAX_NEIGHBOURS 80 /* 3^4 - 1 */
#define MAX_OUTPUTS NX_PROGRAM_GRAPH_OUTPUTS

enum { PROG_FIRST, PROG_ROUNDS };

typedef struct prop_call {
    int kind;
    int nd, connectivity;
    const int64_t *shape;
    nx_dtype mask_dtype;
    bool flat_mask; /* the mask comes as a flat view, else in its own shape (the graph reshapes) */
    nx_backend backend;
} prop_call;

/* The flat geometry of the labels: n voxels, C-order strides, and each neighbour's step. */
typedef struct flat_geo {
    int64_t n, pad;
    int64_t stride[NX_MORPH_MAX_SPATIAL];
    int nn;
    int delta[MAX_NEIGHBOURS][NX_MORPH_MAX_SPATIAL];
    int64_t off[MAX_NEIGHBOURS];
} flat_geo;

/* The neighbours' steps (per axis, -1..1) with at most connectivity nonzero components. */
static void geometry(const prop_call *c, flat_geo *f)
{
    int total = 1;
    f->n = 1;
    for (int i = c->nd - 1; i >= 0; i--) {
        f->stride[i] = f->n;
        f->n *= c->shape[i];
        total *= 3;
    }
    f->nn = 0;
    f->pad = 1;
    for (int k = 0; k < total; k++) {
        int t = k, nz = 0;
        int64_t off = 0;
        for (int i = c->nd - 1; i >= 0; i--) {
            f->delta[f->nn][i] = t % 3 - 1;
            t /= 3;
            nz += f->delta[f->nn][i] != 0;
            off += f->delta[f->nn][i] * f->stride[i];
        }
        if (nz == 0 || nz > c->connectivity)
            continue;
        f->off[f->nn++] = off;
        f->pad = off > f->pad ? off : -off > f->pad ? -off : f->pad;
    }
}

/* True where neighbour k of the flat voxel idx lies inside the volume along the inner axes it
 * steps on (the outer axis is the padding's job); NX_NONE when it steps on none. */
static nx_node neighbour_inside(nx_graph *g, const prop_call *c, const flat_geo *f, nx_node idx,
                                int k)
{
    nx_node ok = NX_NONE;
    for (int a = 1; a < c->nd; a++) {
        int d = f->delta[k][a];
        if (d == 0)
            continue;
        nx_node at = idx;
        if (f->stride[a] > 1)
            at = nx_div(g, at, nx_scalar(g, NX_DTYPE_I32, (double)f->stride[a]));
        at = nx_mod(g, at, nx_scalar(g, NX_DTYPE_I32, (double)c->shape[a]));
        double edge = d < 0 ? 0 : (double)(c->shape[a] - 1);
        nx_node in = nx_ne(g, at, nx_scalar(g, NX_DTYPE_I32, edge));
        ok = ok == NX_NONE ? in : nx_and(g, ok, in);
    }
    return ok;
}

/* M[i] = min(L[i], L[j] over the neighbours j) on the flat labels lab. The coordinate tests are
 * index arithmetic, which fusion recomputes in every kernel that reads them (passes/fuse.c). */
static nx_node neighbourhood_min(nx_graph *g, const prop_call *c, const flat_geo *f, nx_node lab)
{
    nx_node big = nx_scalar(g, NX_DTYPE_I32, (double)INT32_MAX);
    nx_node idx = nx_iota(g, NX_DTYPE_I32, 1, &f->n, 0);
    nx_node padded = nx_pad(g, lab, &f->pad, &f->pad, NX_PAD_CONSTANT, (double)INT32_MAX);
    nx_node m = lab;
    for (int k = 0; k < f->nn; k++) {
        int64_t start = f->pad + f->off[k], stop = start + f->n;
        nx_node v = nx_slice(g, padded, &start, &stop, NULL);
        nx_node in = neighbour_inside(g, c, f, idx, k);
        m = nx_minimum(g, m, in == NX_NONE ? v : nx_select(g, in, v, big));
    }
    return m;
}

/* L' = H[H[..H[i]..]] (JUMPS loads): every step is a voxel of the component no greater than the
 * one before, so the chain only lowers the label. */
static nx_node jumps(nx_graph *g, nx_node h)
{
    nx_node j = h;
    for (int s = 1; s < JUMPS; s++)
        j = nx_gather(g, h, j, 0);
    return j;
}

/* The first round, from the mask: L[i] = i on foreground. The only hook into i is i's own
 * (H[i] = min(i, M[i]) = M[i]), so the round is the neighbourhood minimum of the initial labels
 * and the jumps over it; the initial labels are computed where they are read. */
static nx_node first_round(nx_graph *g, const prop_call *c, const flat_geo *f, nx_node mask,
                           nx_node *keep)
{
    nx_node big = nx_scalar(g, NX_DTYPE_I32, (double)INT32_MAX);
    nx_node idx = nx_iota(g, NX_DTYPE_I32, 1, &f->n, 0);
    nx_node lab = nx_select(g, nx_cast(g, mask, NX_DTYPE_BOOL), idx, big);
    nx_node m = neighbourhood_min(g, c, f, lab);
    /* read only by the gathers, M would be inlined into them and recomputed at every step of
     * the chain; as an output it is one kernel's */
    *keep = m;
    /* the same test as the cast, written differently: one shared node would be materialised */
    nx_node fg = nx_ne(g, mask, nx_scalar(g, c->mask_dtype, 0));
    return nx_select(g, fg, jumps(g, m), big);
}

/* A later round on the flat labels lab. */
static nx_node round_of(nx_graph *g, const prop_call *c, const flat_geo *f, nx_node lab)
{
    nx_node big = nx_scalar(g, NX_DTYPE_I32, (double)INT32_MAX);
    nx_node m = neighbourhood_min(g, c, f, lab);
    /* Only a voxel with a lower neighbour hooks: where M[i] = L[i], H[L[i]] starts at
     * L[L[i]] <= L[i] = M[i] and the hook changes nothing. Its index is then out of range, so
     * the scatter drops it, as it drops background's (INT32_MAX). Once most of a component holds
     * its root's label, every hook would hit that one address, and atomics on one address run
     * one after another: 116 us for the fourth round's scatter on the bench's 128^3 mask, 19 us
     * with the filter (a 7.7 us elementwise kernel; H200, ncu). */
    nx_node target = nx_select(g, nx_lt(g, m, lab), lab, big);
    nx_node h = nx_scatter(g, lab, target, m, 0, NX_MONOID_MIN);
    return nx_select(g, nx_ne(g, lab, big), nx_minimum(g, m, jumps(g, h)), big);
}

/* 1 when the labels lab are not a fixed point of a round, else 0 (0-d): some foreground voxel
 * has a neighbour with a lower label, or a label that is not a root. Where neither holds, labels
 * are constant on each component and name one of its voxels, whose own label is itself, so a
 * round changes nothing (M = L, the hooks write L[L[i]] = L[i], the gathers return L); and a
 * fixed point has both properties. Tested on the last round's result, this saves the round that
 * would only confirm the fixed point. */
static nx_node not_fixed(nx_graph *g, const prop_call *c, const flat_geo *f, nx_node lab)
{
    nx_node big = nx_scalar(g, NX_DTYPE_I32, (double)INT32_MAX);
    nx_node lower = nx_ne(g, neighbourhood_min(g, c, f, lab), lab);
    nx_node not_root = nx_ne(g, nx_gather(g, lab, lab, 0), lab);
    /* lab < big, not lab != big: the numbering reads that node, and a node two kernels read
     * is materialised */
    nx_node bad = nx_and(g, nx_lt(g, lab, big), nx_or(g, lower, not_root));
    return nx_reduce(g, nx_cast(g, bad, NX_DTYPE_I32), 1, (const int[]){0}, NX_MONOID_MAX, false);
}

/* The inclusive cumulative sum of the i32 vector x (n elements) as two levels of scans: x padded
 * to rows x cols (about sqrt(n) each), each row scanned, the rows' totals scanned, and each row
 * shifted by the totals before it. A scan runs one line per thread on the GPU, so one line of n
 * would be n serial steps; this is about 2 sqrt(n). *total is the sum of all (0-d). */
static nx_node two_level_cumsum(nx_graph *g, nx_node x, int64_t n, nx_node *total)
{
    int64_t cols = 1;
    while (cols * cols < n)
        cols++;
    int64_t rows = (n + cols - 1) / cols, lo = 0, hi = rows * cols - n;
    nx_node grid =
        nx_reshape(g, nx_pad(g, x, &lo, &hi, NX_PAD_CONSTANT, 0), 2, (const int64_t[]){rows, cols});
    nx_node in_row = nx_scan(g, grid, 1, NX_MONOID_SUM, false);
    nx_node last = nx_slice(g, in_row, (const int64_t[]){0, cols - 1},
                            (const int64_t[]){rows, cols}, NULL); /* [rows, 1] */
    nx_node upto = nx_scan(g, last, 0, NX_MONOID_SUM, false);
    nx_node all = nx_add(g, in_row, nx_sub(g, upto, last));
    *total = nx_reshape(
        g, nx_slice(g, upto, (const int64_t[]){rows - 1, 0}, (const int64_t[]){rows, 1}, NULL), 0,
        NULL);
    return nx_slice(g, nx_reshape(g, all, 1, (const int64_t[]){rows * cols}), (const int64_t[]){0},
                    &n, NULL);
}

/* Outputs: the numbered labels (flat), the status (0-d: the number of components, or -1 when lab
 * is not a fixed point yet and the numbering is void), and lab itself, to go on from (the first
 * program has a fourth, the first round's M). */
static void number(nx_graph *g, const flat_geo *f, nx_node lab, nx_node open, nx_node *outs)
{
    nx_node big = nx_scalar(g, NX_DTYPE_I32, (double)INT32_MAX);
    nx_node idx = nx_iota(g, NX_DTYPE_I32, 1, &f->n, 0);
    nx_node root = nx_eq(g, lab, idx); /* background (INT32_MAX) is no voxel's index */
    nx_node total = NX_NONE;
    nx_node rank = two_level_cumsum(g, nx_cast(g, root, NX_DTYPE_I32), f->n, &total);
    nx_node zero = nx_scalar(g, NX_DTYPE_I32, 0);
    outs[0] = nx_select(g, nx_ne(g, lab, big), nx_gather(g, rank, lab, 0), zero);
    outs[1] = nx_select(g, nx_ne(g, open, zero), nx_scalar(g, NX_DTYPE_I32, -1), total);
    outs[2] = lab;
}

static nx_status build(nx_graph *g, void *user, nx_node *outs, int *nout)
{
    const prop_call *c = user;
    flat_geo f;
    geometry(c, &f);
    nx_node lab = NX_NONE;
    int r = 0;
    if (c->kind == PROG_FIRST) {
        nx_node mask =
            c->flat_mask
                ? nx_input(g, "mask", c->mask_dtype, 1, &f.n)
                : nx_reshape(g, nx_input(g, "mask", c->mask_dtype, c->nd, c->shape), 1, &f.n);
        lab = first_round(g, c, &f, mask, &outs[3]);
        r = 1;
    } else {
        lab = nx_input(g, "labels", NX_DTYPE_I32, 1, &f.n);
    }
    for (; r < ROUNDS; r++)
        lab = round_of(g, c, &f, lab);
    number(g, &f, lab, not_fixed(g, c, &f, lab), outs);
    *nout = c->kind == PROG_FIRST ? 4 : 3;
    return nx_graph_status(g);
}

static nx_status program(nx_ctx *ctx, const prop_call *c, nx_program **out)
{
    nx_rt_cache_blob b;
    nx_rt_cache_blob_init(&b, ctx);
    int64_t geo[5] = {c->kind, c->nd, c->connectivity, c->mask_dtype, c->flat_mask};
    nx_rt_cache_blob_str(&b, "op", "label_propagation");
    nx_rt_cache_blob_bytes(&b, "geo", geo, sizeof geo);
    nx_rt_cache_blob_bytes(&b, "shape", c->shape, (size_t)c->nd * sizeof(int64_t));
    return nx_program_graph_cached(ctx, &b, "label propagation: cache key", c->backend, build,
                                      (void *)c, out);
}

/* The value of a 0-d i32 tensor that may live on the device. */
static nx_status scalar_of(const nx_tensor *t, int32_t *v)
{
    if (nx_tensor_device(t) == NX_DEVICE_HOST) {
        *v = *(const int32_t *)nx_tensor_data(t);
        return NX_OK;
    }
    nx_tensor *h = NULL;
    nx_status st = nx_tensor_to_device(t, NX_DEVICE_HOST, &h);
    if (st == NX_OK)
        *v = *(const int32_t *)nx_tensor_data(h);
    nx_tensor_free(h);
    return st;
}

/* One program run on in: *num the numbered labels and *status as number() says, *lab the labels
 * reached (each NULL on failure). */
static nx_status run_once(nx_program *p, const nx_tensor *in, nx_tensor **num, int32_t *status,
                          nx_tensor **lab)
{
    nx_tensor *outs[MAX_OUTPUTS] = {NULL};
    nx_status st = nx_program_run(p, &in, outs);
    if (st == NX_OK)
        st = scalar_of(outs[1], status);
    nx_tensor_free(outs[1]);
    nx_tensor_free(outs[3]); /* a materialisation point */
    if (st != NX_OK) {
        nx_tensor_free(outs[0]);
        nx_tensor_free(outs[2]);
        outs[0] = outs[2] = NULL;
    }
    *num = outs[0];
    *lab = outs[2];
    return st;
}

/* Runs the first program on the flat (or shaped) mask, then the round program until the labels
 * are a fixed point; *num receives the flat numbered labels (NULL on failure), *k their count. */
static nx_status iterate(nx_ctx *ctx, prop_call *c, const nx_tensor *mask, nx_tensor **num,
                         int32_t *k)
{
    nx_program *p = NULL;
    c->kind = PROG_FIRST;
    nx_status st = program(ctx, c, &p);
    /* Each round moves a component's minimum at least one step along a path, so n / ROUNDS + 2
     * runs always reach the fixed point; hooking and jumping make the usual count logarithmic. */
    int64_t limit = nx_tensor_numel(mask) / ROUNDS + 2;
    int32_t status = -1;
    nx_tensor *lab = NULL;
    *num = NULL;
    for (int runs = 0; st == NX_OK && status < 0; runs++) {
        if (runs == limit) {
            st = nx_rt_error(ctx, NX_ERR_INTERNAL,
                             "connected components: label propagation had not reached a fixed "
                             "point after %d runs; expected one by then",
                             runs);
            break;
        }
        if (runs == 1) {
            c->kind = PROG_ROUNDS;
            st = program(ctx, c, &p);
        }
        nx_tensor *next = NULL;
        nx_tensor_free(*num);
        *num = NULL;
        if (st == NX_OK)
            st = run_once(p, runs == 0 ? mask : lab, num, &status, &next);
        nx_tensor_free(lab);
        lab = next;
        /* rounds until the fixed point: their count is not known in advance */
        nx_rt_progress_step(nx_rt_progress_current(), runs + 1, 0);
    }
    nx_tensor_free(lab);
    if (st != NX_OK) {
        nx_tensor_free(*num);
        *num = NULL;
    }
    *k = status;
    return st;
}

/* A flat view of t, or NULL when its strides cannot give one (the graph then reshapes). */
static nx_status flat_view(const nx_tensor *t, nx_tensor **out)
{
    int64_t n = nx_tensor_numel(t);
    *out = NULL;
    bool viewable = nx_tensor_is_contiguous(t) || nx_tensor_ndim(t) == 1;
    return viewable ? nx_tensor_reshape(t, 1, &n, out) : NX_OK;
}

static nx_status propagate(nx_ctx *ctx, const nx_tensor *mask, int connectivity, nx_backend backend,
                           nx_tensor **out, int32_t *n_labels)
{
    *out = NULL;
    prop_call c = {.kind = PROG_FIRST,
                   .nd = nx_tensor_ndim(mask),
                   .connectivity = connectivity,
                   .shape = nx_tensor_shape(mask),
                   .mask_dtype = nx_tensor_dtype(mask),
                   .backend = backend};
    int64_t n = nx_tensor_numel(mask);
    if (n > INT32_MAX - 1)
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "nx_connected_components: mask has %lld voxels; "
                           "expected at most %d (i32 labels)",
                           (long long)n, INT32_MAX - 1);
    if (n == 0) {
        if (n_labels)
            *n_labels = 0;
        return nx_tensor_new(ctx, NX_DTYPE_I32, c.nd, c.shape, out);
    }
    nx_tensor *flat = NULL, *num = NULL;
    int32_t k = 0;
    nx_status st = flat_view(mask, &flat);
    c.flat_mask = flat != NULL;
    if (st == NX_OK)
        st = iterate(ctx, &c, flat ? flat : mask, &num, &k);
    nx_tensor_free(flat);
    if (st == NX_OK)
        st = nx_tensor_reshape(num, c.nd, c.shape, out);
    nx_tensor_free(num);
    if (st == NX_OK && n_labels)
        *n_labels = k;
    return st;
}

static nx_status check_opts(nx_ctx *ctx, const nx_tensor *mask, const nx_label_opts *o,
                            bool *propagation)
{
    static const char *who = "nx_connected_components_opts";
    if (!mask || !o)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %s is NULL", who, mask ? "opts" : "mask");
    int nd = nx_tensor_ndim(mask);
    if (nd < 1 || nd > NX_MORPH_MAX_SPATIAL)
        return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: mask has %d dims; expected 1..%d", who, nd,
                           NX_MORPH_MAX_SPATIAL);
    if (o->connectivity < 1 || o->connectivity > nd)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: connectivity %d; expected 1..%d", who,
                           o->connectivity, nd);
    if (o->backend < NX_BACKEND_AUTO || o->backend > NX_BACKEND_REF)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: backend %d; expected an nx_backend", who,
                           (int)o->backend);
    nx_dtype md = nx_tensor_dtype(mask);
    if (md == NX_DTYPE_F16 || md == NX_DTYPE_BF16)
        return nx_rt_error(ctx, NX_ERR_DTYPE,
                           "%s: mask is %s; expected bool, an integer, f32 or "
                           "f64",
                           who, nx_dtype_name(md));
    bool device = nx_tensor_device(mask) != NX_DEVICE_HOST;
    const char *d = o->driver;
    if (!d || !strcmp(d, "auto"))
        *propagation = device || o->backend == NX_BACKEND_CUDA;
    else if (!strcmp(d, "propagation"))
        *propagation = true;
    else if (!strcmp(d, "union_find"))
        *propagation = false;
    else
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: driver '%s'; expected \"auto\", "
                           "\"union_find\" or \"propagation\"",
                           who, d);
    if (!*propagation && device)
        return nx_rt_error(ctx, NX_ERR_UNSUPPORTED,
                           "%s: the union_find driver runs on the host; "
                           "the mask is a device tensor (use \"propagation\" or \"auto\")",
                           who);
    return NX_OK;
}

nx_status nx_morph_label_opts(nx_ctx *ctx, const nx_tensor *mask, const nx_label_opts *opts,
                              nx_tensor **out, int32_t *n_labels)
{
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "nx_connected_components_opts: ctx is NULL");
    if (!out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "nx_connected_components_opts: out is NULL");
    *out = NULL;
    bool propagation = false;
    nx_status st = check_opts(ctx, mask, opts, &propagation);
    if (st != NX_OK)
        return st;
    if (!propagation)
        return nx_morph_label_union_find(ctx, mask, opts->connectivity, out, n_labels);
    nx_backend be = opts->backend;
    if (be == NX_BACKEND_AUTO &&
        (nx_tensor_device(mask) == NX_DEVICE_CUDA || nx_ctx_backend(ctx) == NX_BACKEND_CUDA))
        be = NX_BACKEND_CUDA;
    /* A host mask labelled on the GPU goes up once and its labels come down once, rather than
     * crossing the bus with every round. */
    nx_tensor *dev = NULL;
    if (be == NX_BACKEND_CUDA && nx_tensor_device(mask) == NX_DEVICE_HOST) {
        st = nx_tensor_to_device(mask, NX_DEVICE_CUDA, &dev);
        nx_tensor *lab = NULL;
        if (st == NX_OK)
            st = propagate(ctx, dev, opts->connectivity, be, &lab, n_labels);
        if (st == NX_OK)
            st = nx_tensor_to_device(lab, NX_DEVICE_HOST, out);
        nx_tensor_free(lab);
        nx_tensor_free(dev);
        return st;
    }
    return propagate(ctx, mask, opts->connectivity, be, out, n_labels);
}
