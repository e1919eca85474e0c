/* Connected components on the host: a flood fill started at each unlabelled foreground voxel in
 * C (raster) order, so labels are numbered by their first voxel exactly as scipy.ndimage.label
 * numbers them. A host op, not an IR graph: labels are integers with no gradient, and the
 * traversal is data-dependent control flow the IR does not express. */
#include <string.h>

#include "internal.h"
#include "nitrix-ops.h"

#define MAX_OFFSETS 81 /* 3^4 */

static int neighbour_offsets(int nd, const int64_t *shape, int connectivity, int64_t *off,
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
        if (nz == 0 || nz > connectivity)
            continue;
        off[n] = o;
        memcpy(delta[n], d, sizeof d);
        n++;
    }
    return n;
}

static void fill(const uint8_t *fg, int32_t *lab, int64_t *queue, int nd, const int64_t *shape,
                 int n_off, const int64_t *off, int (*delta)[NX_MORPH_MAX_SPATIAL], int64_t seed,
                 int32_t label)
{
    int64_t head = 0, tail = 0;
    queue[tail++] = seed;
    lab[seed] = label;
    while (head < tail) {
        int64_t v = queue[head++], coord[NX_MORPH_MAX_SPATIAL], r = v;
        for (int i = nd - 1; i >= 0; i--) {
            coord[i] = r % shape[i];
            r /= shape[i];
        }
        for (int k = 0; k < n_off; k++) {
            bool inside = true;
            for (int i = 0; i < nd && inside; i++) {
                int64_t c = coord[i] + delta[k][i];
                inside = c >= 0 && c < shape[i];
            }
            int64_t u = v + off[k];
            if (inside && fg[u] && !lab[u]) {
                lab[u] = label;
                queue[tail++] = u;
            }
        }
    }
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
    int64_t *queue = st == NX_OK && n ? nx_rt_alloc(ctx, (size_t)n * sizeof(int64_t)) : NULL;
    if (st == NX_OK && n && !queue)
        st = nx_rt_nomem(ctx, "connected_components: queue", (size_t)n * sizeof(int64_t));
    int32_t count = 0;
    if (st == NX_OK) {
        int64_t off[MAX_OFFSETS];
        int delta[MAX_OFFSETS][NX_MORPH_MAX_SPATIAL];
        int n_off = neighbour_offsets(nd, nx_tensor_shape(mask), connectivity, off, delta);
        const uint8_t *f = nx_tensor_data(fg);
        int32_t *l = nx_tensor_data(lab);
        memset(l, 0, (size_t)n * sizeof(int32_t));
        for (int64_t i = 0; i < n; i++)
            if (f[i] && !l[i])
                fill(f, l, queue, nd, nx_tensor_shape(mask), n_off, off, delta, i, ++count);
    }
    nx_rt_free(ctx, queue, (size_t)n * sizeof(int64_t));
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
