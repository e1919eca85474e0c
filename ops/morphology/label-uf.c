/* Connected components on the host, numbered as scipy.ndimage.label numbers them (by first voxel
 * in C order). A host op, not an IR graph: labels are integers with no gradient, and the
 * traversal is data-dependent control flow the IR does not express.
 *
 * Runs, not voxels. Each line of the last axis becomes its runs of foreground (maximal [s, t)),
 * in C order, so run i's first voxel precedes run i + 1's. Union-find joins each run to the
 * overlapping runs of the neighbour lines before it (lines whose outer coordinates differ by a
 * step of -1, 0 or +1 per axis, earlier in C order, within the connectivity; a run reaches one
 * place further on each side when the line step leaves room for a diagonal one). The smaller run
 * index always becomes the root, so a component's root is its first run and numbering the roots
 * in run order gives scipy's labels.
 *
 * Parallel. Lines are counted, cut into slabs of whole planes of axis 0 (one per pool chunk),
 * turned into runs and joined within their slab in parallel (disjoint run ranges, no locks);
 * the planes where slabs meet are then joined serially, the roots numbered serially (one step
 * per run) and the labels written in parallel. */
#include <string.h>

#include "internal.h"
#include "morph.h"
#include "nitrix-ops.h"
#include "pool.h"

#define MAX_NEIGHBOURS 40 /* (3^4 - 1) / 2: the neighbours before a place in C order */

typedef struct label_job {
    const void *mask; /* contiguous */
    nx_dtype dtype;
    int nouter;                               /* outer axes (nd - 1) */
    int64_t outer[NX_MORPH_MAX_SPATIAL], len; /* outer shape, line length */
    int64_t nlines, nplanes, lines_per_plane;
    int nnb;
    int64_t nb_off[MAX_NEIGHBOURS];                     /* line-index offsets (negative) */
    int nb_delta[MAX_NEIGHBOURS][NX_MORPH_MAX_SPATIAL]; /* per outer axis */
    int nb_ext[MAX_NEIGHBOURS];                         /* 1: diagonal reach along the line */
    int64_t *first;                                     /* nlines + 1: the first run of each line */
    int32_t *se;                                        /* run r is [se[2r], se[2r + 1]) */
    int32_t *parent, *label;
    uint8_t *flags; /* per chunk: len bytes of foreground flags, then len + 1 int32 edges */
    size_t scratch; /* bytes per chunk */
    int64_t nslabs, planes_per_slab;
    int32_t *out;
} label_job;

/* The neighbour lines before a line under the connectivity: outer steps d (not all zero,
 * lexicographically negative), with a diagonal reach along the line when |d|_0 < connectivity. */
static void neighbours(label_job *j, int connectivity)
{
    int total = 1;
    for (int i = 0; i < j->nouter; i++)
        total *= 3;
    j->nnb = 0;
    for (int c = 0; c < total; c++) {
        int t = c, nz = 0, d[NX_MORPH_MAX_SPATIAL] = {0};
        int64_t off = 0, stride = 1;
        for (int i = j->nouter - 1; i >= 0; i--) {
            d[i] = t % 3 - 1;
            t /= 3;
            nz += d[i] != 0;
            off += d[i] * stride;
            stride *= j->outer[i];
        }
        int lead = 0; /* the first nonzero step decides "before" */
        for (int i = 0; i < j->nouter && !lead; i++)
            lead = d[i];
        if (nz == 0 || nz > connectivity || lead > 0)
            continue;
        j->nb_off[j->nnb] = off;
        memcpy(j->nb_delta[j->nnb], d, sizeof d);
        j->nb_ext[j->nnb] = nz < connectivity;
        j->nnb++;
    }
}

/* flags[i] = (mask value i of the line) != 0, NaN included. */
static void line_flags(const label_job *j, int64_t line, uint8_t *flags)
{
    int64_t n = j->len, at = line * n;
    switch (j->dtype) {
    case NX_DTYPE_F32: {
        const float *p = (const float *)j->mask + at;
        for (int64_t i = 0; i < n; i++)
            flags[i] = p[i] != 0;
        break;
    }
    case NX_DTYPE_F64: {
        const double *p = (const double *)j->mask + at;
        for (int64_t i = 0; i < n; i++)
            flags[i] = p[i] != 0;
        break;
    }
    case NX_DTYPE_I16: {
        const int16_t *p = (const int16_t *)j->mask + at;
        for (int64_t i = 0; i < n; i++)
            flags[i] = p[i] != 0;
        break;
    }
    case NX_DTYPE_I32: {
        const int32_t *p = (const int32_t *)j->mask + at;
        for (int64_t i = 0; i < n; i++)
            flags[i] = p[i] != 0;
        break;
    }
    case NX_DTYPE_I64: {
        const int64_t *p = (const int64_t *)j->mask + at;
        for (int64_t i = 0; i < n; i++)
            flags[i] = p[i] != 0;
        break;
    }
    default: { /* one byte: bool, u8, i8 */
        const uint8_t *p = (const uint8_t *)j->mask + at;
        for (int64_t i = 0; i < n; i++)
            flags[i] = p[i] != 0;
        break;
    }
    }
}

static int64_t count_runs(const uint8_t *flags, int64_t n)
{
    int64_t r = flags[0];
    for (int64_t i = 1; i < n; i++)
        r += flags[i] & !flags[i - 1];
    return r;
}

static void count_chunk(void *user, int64_t begin, int64_t end, int chunk)
{
    label_job *j = user;
    uint8_t *flags = j->flags + (size_t)chunk * j->scratch;
    for (int64_t l = begin; l < end; l++) {
        line_flags(j, l, flags);
        j->first[l + 1] = count_runs(flags, j->len);
    }
}

static int32_t find(int32_t *parent, int32_t i)
{
    while (parent[i] != i) {
        parent[i] = parent[parent[i]]; /* path halving */
        i = parent[i];
    }
    return i;
}

/* The smaller root wins, so every parent precedes its child and a component's root is its first
 * run. */
static void unite(int32_t *parent, int32_t a, int32_t b)
{
    a = find(parent, a);
    b = find(parent, b);
    if (a < b)
        parent[b] = a;
    else if (b < a)
        parent[a] = b;
}

/* Joins the runs of line l with the overlapping runs of line m (a neighbour before it): runs
 * [s, t) and [s', t') touch when s' < t + ext and s < t' + ext. Both lists are sorted, so one
 * merge walk visits each pair that can touch. A run still its own root (its first touch) is
 * adopted by the other's root directly: that root precedes it. */
static void join_lines(const label_job *j, int64_t l, int64_t m, int ext)
{
    const int32_t *se = j->se;
    int32_t *parent = j->parent;
    int64_t a = j->first[l], ae = j->first[l + 1], b = j->first[m], be = j->first[m + 1];
    while (a < ae && b < be) {
        int32_t sa = se[2 * a], ta = se[2 * a + 1], sb = se[2 * b], tb = se[2 * b + 1];
        if (sb < ta + ext && sa < tb + ext) {
            if (parent[a] == a)
                parent[a] = find(parent, (int32_t)b);
            else
                unite(parent, (int32_t)a, (int32_t)b);
        }
        /* advance the run that ends first; the other may still touch the next one */
        a += ta < tb;
        b += ta >= tb;
    }
}

/* Joins line l with its neighbours before it whose axis-0 coordinate is at least lo (within the
 * slab: lo is the slab's first plane; 0 for every neighbour). */
static void join_line(const label_job *j, int64_t l, int64_t lo_plane)
{
    int64_t c[NX_MORPH_MAX_SPATIAL], r = l;
    for (int i = j->nouter - 1; i >= 0; i--) {
        c[i] = r % j->outer[i];
        r /= j->outer[i];
    }
    for (int k = 0; k < j->nnb; k++) {
        bool inside = true;
        for (int i = 0; i < j->nouter && inside; i++) {
            int64_t ci = c[i] + j->nb_delta[k][i];
            inside = ci >= (i == 0 ? lo_plane : 0) && ci < j->outer[i];
        }
        if (inside)
            join_lines(j, l, l + j->nb_off[k], j->nb_ext[k]);
    }
}

static void slab_chunk(void *user, int64_t begin, int64_t end, int chunk)
{
    label_job *j = user;
    uint8_t *flags = j->flags + (size_t)chunk * j->scratch;
    int32_t *e = (int32_t *)(flags + (j->len + 3) / 4 * 4);
    for (int64_t sl = begin; sl < end; sl++) {
        int64_t p0 = sl * j->planes_per_slab, p1 = p0 + j->planes_per_slab;
        p1 = p1 < j->nplanes ? p1 : j->nplanes;
        for (int64_t l = p0 * j->lines_per_plane; l < p1 * j->lines_per_plane; l++) {
            line_flags(j, l, flags);
            /* every change of flag is a run's start or stop, in turn: written branch-free (each
             * step stores one edge past the last, hence the line's own buffer) */
            int64_t k = 0;
            uint8_t prev = 0;
            for (int64_t i = 0; i < j->len; i++) {
                e[k] = (int32_t)i;
                k += flags[i] ^ prev;
                prev = flags[i];
            }
            if (prev)
                e[k++] = (int32_t)j->len;
            memcpy(j->se + 2 * j->first[l], e, (size_t)k * sizeof(int32_t));
            for (int64_t r = j->first[l]; r < j->first[l + 1]; r++)
                j->parent[r] = (int32_t)r;
            if (j->nouter > 0)
                join_line(j, l, p0);
        }
    }
}

/* The planes where slabs meet: each slab's first plane against the plane before it. */
static void join_seams(const label_job *j)
{
    for (int64_t sl = 1; sl < j->nslabs; sl++) {
        int64_t p = sl * j->planes_per_slab;
        for (int64_t l = p * j->lines_per_plane; l < (p + 1) * j->lines_per_plane; l++)
            join_line(j, l, p - 1);
    }
}

/* Roots in run order get labels 1, 2, ...; a parent precedes its child, so its label is set by
 * the time the child is reached. */
static int32_t number(int32_t *parent, int32_t *label, int64_t nruns)
{
    int32_t count = 0;
    for (int64_t r = 0; r < nruns; r++) {
        int32_t p = parent[r];
        label[r] = p == r ? ++count : label[p];
    }
    return count;
}

static void write_chunk(void *user, int64_t begin, int64_t end, int chunk)
{
    (void)chunk;
    const label_job *j = user;
    for (int64_t l = begin; l < end; l++) {
        int32_t *o = j->out + l * j->len;
        memset(o, 0, (size_t)j->len * sizeof(int32_t));
        for (int64_t r = j->first[l]; r < j->first[l + 1]; r++)
            for (int32_t i = j->se[2 * r]; i < j->se[2 * r + 1]; i++)
                o[i] = j->label[r];
    }
}

/* Flattens every run's parent to its root, in run order (parents precede children). */
static void flatten(int32_t *parent, int64_t nruns)
{
    for (int64_t r = 0; r < nruns; r++)
        parent[r] = parent[parent[r]];
}

static nx_status label_runs(nx_ctx *ctx, label_job *j, int32_t *count)
{
    int threads = 1;
    nx_status st = nx_rt_pool_threads(ctx, &threads);
    if (st != NX_OK)
        return st;
    j->scratch = (size_t)(j->len + 3) / 4 * 4 + ((size_t)j->len + 1) * sizeof(int32_t);
    size_t fbytes = (size_t)threads * j->scratch, lbytes = ((size_t)j->nlines + 1) * 8;
    j->flags = nx_rt_alloc(ctx, fbytes);
    j->first = nx_rt_alloc(ctx, lbytes);
    if (!j->flags || !j->first) {
        st = nx_rt_nomem(ctx, "connected_components: line runs", fbytes + lbytes);
        goto done;
    }
    j->first[0] = 0;
    if ((st = nx_rt_parallel_for(ctx, j->nlines, 256, count_chunk, j)) != NX_OK)
        goto done;
    for (int64_t l = 0; l < j->nlines; l++)
        j->first[l + 1] += j->first[l];
    int64_t nruns = j->first[j->nlines];
    size_t rbytes = (size_t)(nruns ? nruns : 1) * sizeof(int32_t);
    j->se = nx_rt_alloc(ctx, 2 * rbytes);
    j->parent = nx_rt_alloc(ctx, rbytes);
    j->label = nx_rt_alloc(ctx, rbytes);
    if (!j->se || !j->parent || !j->label) {
        st = nx_rt_nomem(ctx, "connected_components: union-find over runs", 4 * rbytes);
        goto runs_done;
    }
    /* slabs of whole planes, at most one per thread, so seams are few */
    j->planes_per_slab = (j->nplanes + threads - 1) / threads;
    j->nslabs = (j->nplanes + j->planes_per_slab - 1) / j->planes_per_slab;
    if ((st = nx_rt_parallel_for(ctx, j->nslabs, 1, slab_chunk, j)) != NX_OK)
        goto runs_done;
    join_seams(j);
    flatten(j->parent, nruns);
    *count = number(j->parent, j->label, nruns);
    st = nx_rt_parallel_for(ctx, j->nlines, 64, write_chunk, j);
runs_done:
    nx_rt_free(ctx, j->se, 2 * rbytes);
    nx_rt_free(ctx, j->parent, rbytes);
    nx_rt_free(ctx, j->label, rbytes);
done:
    nx_rt_free(ctx, j->flags, fbytes);
    nx_rt_free(ctx, j->first, lbytes);
    return st;
}

static nx_status check_mask(nx_ctx *ctx, const char *who, const nx_tensor *mask, int connectivity)
{
    int nd = nx_tensor_ndim(mask);
    if (nd < 1 || nd > NX_MORPH_MAX_SPATIAL)
        return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: mask has %d dims; expected 1..%d", who, nd,
                           NX_MORPH_MAX_SPATIAL);
    if (connectivity < 1 || connectivity > nd)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: connectivity %d; expected 1..%d", who,
                           connectivity, nd);
    nx_dtype md = nx_tensor_dtype(mask);
    if (md == NX_DTYPE_F16 || md == NX_DTYPE_BF16)
        return nx_rt_error(ctx, NX_ERR_DTYPE,
                           "%s: mask is %s; expected a bool, integer, f32 or f64 tensor", who,
                           nx_dtype_name(md));
    if (nx_tensor_numel(mask) > INT32_MAX)
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "%s: mask has %lld voxels; expected at most %d (i32 labels)", who,
                           (long long)nx_tensor_numel(mask), INT32_MAX);
    return NX_OK;
}

nx_status nx_morph_label_union_find(nx_ctx *ctx, const nx_tensor *mask, int connectivity,
                                    nx_tensor **out, int32_t *n_labels)
{
    static const char *who = "nx_connected_components";
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: ctx is NULL", who);
    if (!mask || !out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %s is NULL", who, mask ? "out" : "mask");
    *out = NULL;
    if (nx_tensor_device(mask) != NX_DEVICE_HOST) /* union-find reads host memory */
        return nx_morph_label_opts(ctx, mask,
                                            &(nx_label_opts){.connectivity = connectivity}, out,
                                            n_labels);
    nx_status st = check_mask(ctx, who, mask, connectivity);
    if (st != NX_OK)
        return st;
    int nd = nx_tensor_ndim(mask);
    const int64_t *shape = nx_tensor_shape(mask);
    nx_tensor *dense = NULL, *lab = NULL;
    if (!nx_tensor_is_contiguous(mask) && (st = nx_tensor_contiguous(mask, &dense)) != NX_OK)
        return st;
    if ((st = nx_tensor_new(ctx, NX_DTYPE_I32, nd, shape, &lab)) != NX_OK) {
        nx_tensor_free(dense);
        return st;
    }
    int32_t count = 0;
    if (nx_tensor_numel(mask) > 0) {
        label_job j = {.mask = nx_tensor_data(dense ? dense : mask),
                       .dtype = nx_tensor_dtype(mask),
                       .nouter = nd - 1,
                       .len = shape[nd - 1],
                       .nlines = 1,
                       .nplanes = 1,
                       .out = nx_tensor_data(lab)};
        for (int i = 0; i < nd - 1; i++) {
            j.outer[i] = shape[i];
            j.nlines *= shape[i];
        }
        j.nplanes = nd > 1 ? shape[0] : 1;
        j.lines_per_plane = j.nlines / j.nplanes;
        neighbours(&j, connectivity);
        st = label_runs(ctx, &j, &count);
    }
    nx_tensor_free(dense);
    if (st != NX_OK) {
        nx_tensor_free(lab);
        return st;
    }
    if (n_labels)
        *n_labels = count;
    *out = lab;
    return NX_OK;
}
