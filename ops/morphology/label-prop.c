/* Connected components by label propagation with hooking and pointer jumping, as IR programs: the
 * driver that runs on the GPU (and on any backend), where the host's union-find (label.c) cannot
 * go.
 *
 * The state is one flat i32 label per voxel: a foreground voxel starts with its own linear index,
 * background holds INT32_MAX throughout (so no separate mask travels between programs). A round:
 *
 *   M[i] = min(L[i], L[j] over the neighbours j)         (padded with INT32_MAX)
 *   H    = L, then H[L[i]] = min(H[L[i]], M[i])          (a scatter-min: hooking, as in
 *                                                         Shiloach-Vishkin; background dropped)
 *   L'[i] = min(M[i], H[H[H[H[i]]]])                     (four chained gathers of one buffer)
 *
 * for foreground i. Every label is the index of a foreground voxel of the same component no
 * greater than the voxel's own, so hooks and jumps stay inside the component and labels only
 * decrease. L' <= M, so a component's minimum moves at least one step per round (the bound on
 * runs); the hooks let a whole tree take a lower root at once and the jumps shorten chains, so
 * the usual count is logarithmic (5 rounds on a 128^3 mask at 50 % density; 4 to 6 on random 3-D
 * masks of 30-70 % in a NumPy model). At a fixed point every voxel holds the first voxel of its
 * component in C order. The final program numbers the roots (voxels that are their own label) by
 * a cumulative sum in C order (two levels of scans, rows then row totals) and gathers each voxel's
 * number, which is exactly scipy.ndimage.label's numbering.
 *
 * Kernels and runs: a round is three kernels (the neighbourhood minimum, the scatter, the chained
 * gathers; the scatter's copy of L is a device copy, not a kernel). A program run does ROUNDS
 * rounds and one more kernel for the flag "the labels are not a fixed point yet" (not_fixed: it
 * tests the fixed point directly, so no round is spent confirming it), and the host reads that
 * 4-byte flag once per run (a synchronisation). The first run's program also makes the initial
 * labels from the mask (one more kernel), so the usual mask takes two program runs in all: that
 * one and the numbering. The four gathers read one materialised buffer, so they do the work of
 * two pointer-jumping kernels in one. Inputs on the device stay there: every program's inputs are
 * device tensors then, so no label array crosses the bus between runs. */
#include <string.h>

#include "morph.h"
#include "nitrix-ops.h"
#include "runtime/cache.h"

#define ROUNDS 5
#define JUMPS 4
#define MAX_NEIGHBOURS 80 /* 3^4 - 1 */
#define MAX_OUTPUTS NX_RT_GRAPH_OUTPUTS
_Static_assert(2 + 2 * ROUNDS <= MAX_OUTPUTS, "the rounds' outputs fit");

enum { PROG_FIRST, PROG_ROUNDS, PROG_FINAL };

typedef struct prop_call {
    int kind;
    int nd, connectivity;
    const int64_t *shape;
    nx_dtype mask_dtype;
    nx_backend backend;
} prop_call;

/* The neighbours' offsets (per axis, -1..1) with at most connectivity nonzero components. */
static int neighbours(int nd, int connectivity, int (*delta)[NX_MORPH_MAX_SPATIAL])
{
    int n = 0, total = 1;
    for (int i = 0; i < nd; i++)
        total *= 3;
    for (int c = 0; c < total; c++) {
        int t = c, nz = 0;
        for (int i = nd - 1; i >= 0; i--) {
            delta[n][i] = t % 3 - 1;
            t /= 3;
            nz += delta[n][i] != 0;
        }
        if (nz > 0 && nz <= connectivity)
            n++;
    }
    return n;
}

/* x flattened to one axis and back: gather works along one axis. */
static nx_node flat(nx_graph *g, nx_node x, int64_t n)
{
    return nx_reshape(g, x, 1, &n);
}

/* M[i] = min(L[i], L[j] over the neighbours j) on the flat labels lab (padded with INT32_MAX). */
static nx_node neighbourhood_min(nx_graph *g, const prop_call *c, nx_node lab, int64_t n)
{
    int delta[MAX_NEIGHBOURS][NX_MORPH_MAX_SPATIAL];
    int nn = neighbours(c->nd, c->connectivity, delta);
    int64_t one[NX_MORPH_MAX_SPATIAL], start[NX_MORPH_MAX_SPATIAL] = {0};
    int64_t stop[NX_MORPH_MAX_SPATIAL] = {0};
    for (int i = 0; i < NX_MORPH_MAX_SPATIAL; i++)
        one[i] = 1;
    nx_node grid = nx_reshape(g, lab, c->nd, c->shape);
    nx_node padded = nx_pad(g, grid, one, one, NX_PAD_CONSTANT, (double)INT32_MAX);
    nx_node m = grid;
    for (int k = 0; k < nn; k++) {
        for (int i = 0; i < c->nd; i++) {
            start[i] = 1 + delta[k][i];
            stop[i] = start[i] + c->shape[i];
        }
        m = nx_minimum(g, m, nx_slice(g, padded, start, stop, NULL));
    }
    return flat(g, m, n);
}

/* One round on the flat labels lab (n voxels). H is appended to keep[] (the caller keeps each
 * round's result too): fusion recomputes an inlined value at every place a kernel reads it, and
 * H and the round's result are read at several index maps (neighbours, gathers), so without these
 * materialisation points the rounds would nest into exponentially large kernels. M needs no entry:
 * as the scatter's updates it is a library kernel's input, which the plan materialises. */
static nx_node round_of(nx_graph *g, const prop_call *c, nx_node lab, int64_t n, nx_node *keep,
                        int *nkeep)
{
    nx_node big = nx_scalar(g, NX_DTYPE_I32, (double)INT32_MAX);
    /* background's M goes nowhere: its scatter index is out of range (dropped), its result is
     * masked below */
    nx_node m = neighbourhood_min(g, c, lab, n);
    nx_node h = nx_scatter(g, lab, lab, m, 0, NX_MONOID_MIN);
    keep[(*nkeep)++] = h;
    nx_node jump = h;
    for (int j = 1; j < JUMPS; j++)
        jump = nx_gather(g, h, jump, 0);
    return nx_select(g, nx_ne(g, lab, big), nx_minimum(g, m, jump), big);
}

/* 1 when the labels lab are not a fixed point of a round, else 0 (0-d): some foreground voxel
 * has a neighbour with a lower label, or a label that is not a root. Where neither holds, labels
 * are constant on each component and name one of its voxels, whose own label is itself, so a
 * round changes nothing (M = L, the hooks write L[L[i]] = L[i], the gathers return L); and a
 * fixed point has both properties. Tested on the last round's result, this saves the round that
 * would only confirm the fixed point. */
static nx_node not_fixed(nx_graph *g, const prop_call *c, nx_node lab, int64_t n)
{
    nx_node big = nx_scalar(g, NX_DTYPE_I32, (double)INT32_MAX);
    nx_node lower = nx_ne(g, neighbourhood_min(g, c, lab, n), lab);
    nx_node not_root = nx_ne(g, nx_gather(g, lab, lab, 0), lab);
    nx_node bad = nx_and(g, nx_ne(g, lab, big), nx_or(g, lower, not_root));
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

static nx_status build(nx_graph *g, void *user, nx_node *outs, int *nout)
{
    const prop_call *c = user;
    int64_t n = 1;
    for (int i = 0; i < c->nd; i++)
        n *= c->shape[i];
    nx_node big = nx_scalar(g, NX_DTYPE_I32, (double)INT32_MAX);
    nx_node idx = nx_iota(g, NX_DTYPE_I32, 1, &n, 0);
    nx_node lab = NX_NONE;
    *nout = 2;
    if (c->kind == PROG_FIRST) { /* the initial labels, then the rounds */
        nx_node mask = nx_input(g, "mask", c->mask_dtype, c->nd, c->shape);
        lab = nx_select(g, flat(g, nx_cast(g, mask, NX_DTYPE_BOOL), n), idx, big);
        outs[(*nout)++] = lab;
    } else {
        lab = nx_input(g, "labels", NX_DTYPE_I32, 1, &n);
    }
    if (c->kind != PROG_FINAL) {
        nx_node l = lab;
        for (int r = 0; r < ROUNDS; r++) {
            if (r > 0)
                outs[(*nout)++] = l;
            l = round_of(g, c, l, n, outs, nout);
        }
        outs[0] = l;
        outs[1] = not_fixed(g, c, l, n);
        return nx_graph_status(g);
    }
    nx_node root = nx_eq(g, lab, idx); /* background (INT32_MAX) is no voxel's index */
    nx_node total = NX_NONE;
    nx_node rank = two_level_cumsum(g, nx_cast(g, root, NX_DTYPE_I32), n, &total);
    nx_node grid = nx_reshape(g, lab, c->nd, c->shape);
    nx_node zero = nx_scalar(g, NX_DTYPE_I32, 0);
    outs[0] = nx_select(g, nx_ne(g, grid, big), nx_gather(g, rank, grid, 0), zero);
    outs[1] = total;
    *nout = 2;
    return nx_graph_status(g);
}

static nx_status program(nx_ctx *ctx, const prop_call *c, nx_program **out)
{
    nx_rt_cache_blob b;
    nx_rt_cache_blob_init(&b, ctx);
    int64_t geo[4] = {c->kind, c->nd, c->connectivity, c->mask_dtype};
    nx_rt_cache_blob_str(&b, "op", "label_propagation");
    nx_rt_cache_blob_bytes(&b, "geo", geo, sizeof geo);
    nx_rt_cache_blob_bytes(&b, "shape", c->shape, (size_t)c->nd * sizeof(int64_t));
    return nx_rt_graph_program_cached(ctx, &b, "label propagation: cache key", c->backend, build,
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

/* Runs p and keeps its first two outputs (the others are materialisation points). */
static nx_status run2(nx_program *p, const nx_tensor *const *in, nx_tensor **o0, nx_tensor **o1)
{
    nx_tensor *outs[MAX_OUTPUTS] = {NULL};
    nx_status st = nx_program_run(p, in, outs);
    *o0 = outs[0];
    *o1 = outs[1];
    for (int i = 2; i < nx_program_num_outputs(p); i++)
        nx_tensor_free(outs[i]);
    return st;
}

/* Runs the first program on the mask (the initial labels and ROUNDS rounds), then the round
 * program until the labels are a fixed point; *lab receives them (NULL on failure). */
static nx_status iterate(nx_ctx *ctx, prop_call *c, const nx_tensor *mask, nx_tensor **lab,
                         int *runs)
{
    nx_program *first = NULL, *rounds = NULL;
    c->kind = PROG_FIRST;
    nx_status st = program(ctx, c, &first);
    /* Each round moves a component's minimum at least one step along a path, so n / ROUNDS + 2
     * runs always reach the fixed point; hooking and jumping make the usual count logarithmic. */
    int64_t limit = nx_tensor_numel(mask) / ROUNDS + 2;
    int32_t open = 1;
    *lab = NULL;
    for (*runs = 0; st == NX_OK && open && *runs < limit; (*runs)++) {
        c->kind = PROG_ROUNDS;
        if (*runs == 1)
            st = program(ctx, c, &rounds);
        nx_tensor *next = NULL, *flag = NULL;
        const nx_tensor *in = *runs == 0 ? mask : *lab;
        if (st == NX_OK)
            st = run2(*runs == 0 ? first : rounds, &in, &next, &flag);
        if (st == NX_OK)
            st = scalar_of(flag, &open);
        nx_tensor_free(flag);
        if (st != NX_OK) {
            nx_tensor_free(next);
            break;
        }
        nx_tensor_free(*lab);
        *lab = next;
    }
    if (st == NX_OK && open)
        st = nx_rt_error(ctx, NX_ERR_INTERNAL,
                         "connected components: label propagation had not reached a fixed point "
                         "after %d runs; expected one by then",
                         *runs);
    return st;
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
    nx_program *p = NULL;
    nx_tensor *lab = NULL, *num = NULL, *count = NULL;
    int nruns = 0;
    nx_status st = iterate(ctx, &c, mask, &lab, &nruns);
    c.kind = PROG_FINAL;
    if (st == NX_OK)
        st = program(ctx, &c, &p);
    if (st == NX_OK)
        st = run2(p, (const nx_tensor *const[]){lab}, &num, &count);
    int32_t k = 0;
    if (st == NX_OK)
        st = scalar_of(count, &k);
    nx_tensor_free(lab);
    nx_tensor_free(count);
    if (st != NX_OK) {
        nx_tensor_free(num);
        return st;
    }
    if (n_labels)
        *n_labels = k;
    *out = num;
    return NX_OK;
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

nx_status nx_connected_components_opts(nx_ctx *ctx, const nx_tensor *mask,
                                       const nx_label_opts *opts, nx_tensor **out,
                                       int32_t *n_labels)
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
        return nx_connected_components(ctx, mask, opts->connectivity, out, n_labels);
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
