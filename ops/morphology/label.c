/* Connected components on the host: union-find in two raster passes (join each voxel to its
 * neighbours before it, smaller root winning; then number the roots in C order), so labels are
 * numbered by their first voxel exactly as scipy.ndimage.label numbers them. A host op, not an IR
 * graph: labels are integers with no gradient, and the traversal is data-dependent control flow
 * the IR does not express. */
#include <string.h>

#include "internal.h"
#include "nitrix-ops.h"

#define MAX_OFFSETS 40 /* (3^4 - 1) / 2: the neighbours before a voxel in C order */

/* The neighbours of a voxel that come before it in C order (the others see it as theirs), as
 * linear offsets and per-axis steps. */
static int backward_offsets(int nd, const int64_t *shape, int connectivity, int64_t *off,
                            int (*delta)[NX_MORPH_MAX_SPATIAL])
{
    int n = 0, total = 1;
    for (int i = 0; i < nd; i++)
        total *= 3;
    for (int c = 0; c < total; c++) {
        int t = c, nz = 0;
        int64_t o = 0, stride = 1;
        int d[NX_MORPH_MAX_SPATIAL] = {0};
        for (int i = nd - 1; i >= 0; i--) {
            d[i] = t % 3 - 1;
            t /= 3;
            nz += d[i] != 0;
            o += d[i] * stride;
            stride *= shape[i];
        }
        if (nz == 0 || nz > connectivity || o > 0)
            continue;
        off[n] = o;
        memcpy(delta[n], d, sizeof d);
        n++;
    }
    return n;
}

static int32_t find(int32_t *parent, int32_t i)
{
    while (parent[i] != i) {
        parent[i] = parent[parent[i]]; /* path halving */
        i = parent[i];
    }
    return i;
}

/* The smaller root wins, so every parent precedes its child in C order and a component's root
 * is its first voxel. */
static void unite(int32_t *parent, int32_t a, int32_t b)
{
    a = find(parent, a);
    b = find(parent, b);
    if (a < b)
        parent[b] = a;
    else if (b < a)
        parent[a] = b;
}

typedef struct scan {
    int nd, n_off;
    const int64_t *shape;
    int64_t off[MAX_OFFSETS];
    int delta[MAX_OFFSETS][NX_MORPH_MAX_SPATIAL];
    unsigned need_lo[MAX_OFFSETS], need_hi[MAX_OFFSETS]; /* axes stepped down / up (bits) */
} scan;

static void scan_masks(scan *sc)
{
    for (int k = 0; k < sc->n_off; k++) {
        sc->need_lo[k] = sc->need_hi[k] = 0;
        for (int a = 0; a < sc->nd; a++) {
            sc->need_lo[k] |= (unsigned)(sc->delta[k][a] < 0) << a;
            sc->need_hi[k] |= (unsigned)(sc->delta[k][a] > 0) << a;
        }
    }
}

/* Pass 1: each foreground voxel joins its foreground neighbours before it. The coordinate is
 * carried along as two bit sets (axes at their first / last place), so a neighbour is inside
 * when it steps down on no axis at its first place and up on none at its last. The first
 * neighbour found adopts the voxel (its root precedes it); later ones are united. */
static void join_all(const scan *sc, const uint8_t *fg, int32_t *parent, int64_t n)
{
    int64_t coord[NX_MORPH_MAX_SPATIAL] = {0};
    unsigned at_lo = (1u << sc->nd) - 1, at_hi = 0;
    for (int a = 0; a < sc->nd; a++)
        at_hi |= (unsigned)(sc->shape[a] == 1) << a;
    for (int64_t i = 0; i < n; i++) {
        if (fg[i]) {
            bool joined = false;
            parent[i] = (int32_t)i;
            for (int k = 0; k < sc->n_off; k++) {
                if ((sc->need_lo[k] & at_lo) || (sc->need_hi[k] & at_hi) || !fg[i + sc->off[k]])
                    continue;
                int32_t u = (int32_t)(i + sc->off[k]);
                if (!joined)
                    parent[i] = find(parent, u);
                else
                    unite(parent, (int32_t)i, u);
                joined = true;
            }
        }
        for (int a = sc->nd - 1; a >= 0; a--) {
            unsigned bit = 1u << a;
            if (++coord[a] < sc->shape[a]) {
                at_lo &= ~bit;
                at_hi = coord[a] == sc->shape[a] - 1 ? at_hi | bit : at_hi & ~bit;
                break;
            }
            coord[a] = 0;
            at_lo |= bit;
            at_hi = sc->shape[a] == 1 ? at_hi | bit : at_hi & ~bit;
        }
    }
}

/* Pass 2: roots in C order get labels 1, 2, ... (scipy's numbering by first voxel); a parent
 * precedes its child, so its root is already final when the child is reached. */
static int32_t number(const uint8_t *fg, int32_t *parent, int32_t *lab, int64_t n)
{
    int32_t count = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!fg[i]) {
            lab[i] = 0;
            continue;
        }
        int32_t p = parent[i];
        if (p == i) {
            lab[i] = ++count;
        } else {
            parent[i] = parent[p];
            lab[i] = lab[parent[i]];
        }
    }
    return count;
}

nx_status nx_connected_components(nx_ctx *ctx, const nx_tensor *mask, int connectivity,
                                  nx_tensor **out, int32_t *n_labels)
{
    static const char *who = "nx_connected_components";
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: ctx is NULL", who);
    if (!mask || !out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %s is NULL", who, mask ? "out" : "mask");
    *out = NULL;
    int nd = nx_tensor_ndim(mask);
    if (nd < 1 || nd > NX_MORPH_MAX_SPATIAL)
        return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: mask has %d dims; expected 1..%d", who, nd,
                           NX_MORPH_MAX_SPATIAL);
    if (connectivity < 1 || connectivity > nd)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: connectivity %d; expected 1..%d", who,
                           connectivity, nd);
    nx_dtype md = nx_tensor_dtype(mask);
    if (nx_tensor_device(mask) != NX_DEVICE_HOST || md == NX_DTYPE_F16 || md == NX_DTYPE_BF16)
        return nx_rt_error(ctx, NX_ERR_DTYPE,
                           "%s: mask is %s; expected a host bool, integer, f32 or f64 tensor", who,
                           nx_dtype_name(md));
    nx_tensor *fg = NULL, *lab = NULL;
    nx_status st = nx_tensor_cast(mask, NX_DTYPE_BOOL, &fg);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_I32, nd, nx_tensor_shape(mask), &lab);
    int64_t n = nx_tensor_numel(mask);
    if (st == NX_OK && n > INT32_MAX)
        st = nx_rt_error(ctx, NX_ERR_SHAPE, "%s: mask has %lld voxels; expected at most %d (i32 "
                         "labels)", who, (long long)n, INT32_MAX);
    size_t bytes = (size_t)n * sizeof(int32_t);
    int32_t *parent = st == NX_OK && n ? nx_rt_alloc(ctx, bytes) : NULL;
    if (st == NX_OK && n && !parent)
        st = nx_rt_nomem(ctx, "connected_components: union-find", bytes);
    int32_t count = 0;
    if (st == NX_OK && n) {
        scan sc = {.nd = nd, .shape = nx_tensor_shape(mask)};
        sc.n_off = backward_offsets(nd, sc.shape, connectivity, sc.off, sc.delta);
        scan_masks(&sc);
        join_all(&sc, nx_tensor_data(fg), parent, n);
        count = number(nx_tensor_data(fg), parent, nx_tensor_data(lab), n);
    }
    nx_rt_free(ctx, parent, bytes);
    nx_tensor_free(fg);
    if (st != NX_OK) {
        nx_tensor_free(lab);
        return st;
    }
    if (n_labels)
        *n_labels = count;
    *out = lab;
    return NX_OK;
}

nx_status nx_largest_connected_component(nx_ctx *ctx, const nx_tensor *mask, int connectivity,
                                         nx_tensor **out)
{
    if (out)
        *out = NULL;
    if (ctx && !out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "nx_largest_connected_component: out is NULL");
    nx_tensor *lab = NULL, *res = NULL;
    int32_t k = 0;
    nx_status st = nx_connected_components(ctx, mask, connectivity, &lab, &k);
    if (st != NX_OK)
        return st;
    int64_t n = nx_tensor_numel(lab);
    int64_t *size = nx_rt_calloc(ctx, (size_t)k + 1, sizeof(int64_t));
    st = size ? nx_tensor_new(ctx, NX_DTYPE_BOOL, nx_tensor_ndim(lab), nx_tensor_shape(lab), &res)
              : nx_rt_nomem(ctx, "largest_connected_component: sizes", ((size_t)k + 1) * 8);
    if (st == NX_OK) {
        const int32_t *l = nx_tensor_data(lab);
        for (int64_t i = 0; i < n; i++)
            size[l[i]]++;
        int32_t best = 0; /* ties go to the lowest label; no component: all false */
        for (int32_t j = 1; j <= k; j++)
            if (size[j] > (best ? size[best] : 0))
                best = j;
        uint8_t *r = nx_tensor_data(res);
        for (int64_t i = 0; i < n; i++)
            r[i] = best && l[i] == best;
        *out = res;
    }
    nx_rt_free(ctx, size, ((size_t)k + 1) * sizeof(int64_t));
    nx_tensor_free(lab);
    return st;
}
