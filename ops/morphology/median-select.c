/* The median of a window too large for a selection network: an IR extern that, at each output
 * place, copies the window's footprint places of the padded image into a scratch line and selects
 * the element of rank count / 2 there (quickselect: linear in the window, no sort, no buffer of
 * every window), then writes the flat index into the padded image of the first window place (in
 * C order) holding that value. The graph gathers the padded image at those indices, so the value
 * is exact and the gradient flows through the gather to the selected element; the extern's own
 * output is an integer and needs no adjoint.
 *
 * Inputs: the padded image xp (f32 or f64, nd dims) and the footprint as u8 of nd dims (leading
 * batch axes of extent 1): its shape is the window's, so the output shape follows from shapes
 * alone, and its bytes are a graph constant (part of the program's cache key). NaN sorts last, as
 * in numpy: the rank is found among the window's values with NaN counted apart. */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "ir/ir.h"
#include "morph.h"
#include "nitrix-graph.h"
#include "pool.h"

static nx_status select_shape(void *user, int n_in, const nx_dtype *dtypes, const int *ndims,
                              const int64_t *const *shapes, nx_dtype *out_dtype, int *out_ndim,
                              int64_t out_shape[NX_MAX_DIMS])
{
    (void)user;
    if (n_in != 2 || (dtypes[0] != NX_DTYPE_F32 && dtypes[0] != NX_DTYPE_F64) ||
        dtypes[1] != NX_DTYPE_U8 || ndims[0] != ndims[1] || ndims[0] < 1)
        return NX_ERR_SHAPE;
    for (int i = 0; i < ndims[0]; i++) {
        if (shapes[1][i] < 1 || shapes[1][i] > shapes[0][i])
            return NX_ERR_SHAPE;
        out_shape[i] = shapes[0][i] - shapes[1][i] + 1;
    }
    *out_dtype = NX_DTYPE_I64;
    *out_ndim = ndims[0];
    return NX_OK;
}

typedef struct select_job {
    const void *x;
    bool f64;
    int nd;
    int64_t xstride[NX_MAX_DIMS];
    int64_t oshape[NX_MAX_DIMS];
    const int64_t *off; /* the footprint's places as offsets into xp from the window's corner */
    int64_t count, rank;
    int64_t *out;
    double *scratch; /* count per chunk */
} select_job;

/* The element of rank r (0-based) of v[0..n), which holds no NaN: Hoare's quickselect with the
 * median of three as pivot; v is reordered. */
static double quickselect(double *v, int64_t n, int64_t r)
{
    int64_t lo = 0, hi = n - 1;
    while (hi > lo) {
        int64_t mid = lo + (hi - lo) / 2;
        double a = v[lo], b = v[mid], c = v[hi];
        double p = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < p)
                i++;
            while (v[j] > p)
                j--;
            if (i <= j) {
                double t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        if (r <= j)
            hi = j;
        else if (r >= i)
            lo = i;
        else
            return v[r];
    }
    return v[r];
}

static void select_chunk(void *user, int64_t begin, int64_t end, int chunk)
{
    select_job *j = user;
    double *v = j->scratch + (size_t)chunk * (size_t)j->count;
    int nd = j->nd;
    int64_t idx[NX_MAX_DIMS];
    int64_t p = begin;
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = p % j->oshape[d];
        p /= j->oshape[d];
    }
    for (int64_t o = begin; o < end; o++) {
        int64_t base = 0;
        for (int d = 0; d < nd; d++)
            base += idx[d] * j->xstride[d];
        int64_t n = 0, nans = 0;
        for (int64_t k = 0; k < j->count; k++) {
            int64_t at = base + j->off[k];
            double x = j->f64 ? ((const double *)j->x)[at] : ((const float *)j->x)[at];
            if (isnan(x))
                nans++;
            else
                v[n++] = x;
        }
        int64_t pick = -1;
        if (nans >= j->count - j->rank) { /* NaN fills the top places, the rank among them */
            for (int64_t k = 0; k < j->count && pick < 0; k++) {
                int64_t at = base + j->off[k];
                double x = j->f64 ? ((const double *)j->x)[at] : ((const float *)j->x)[at];
                if (isnan(x))
                    pick = at;
            }
        } else {
            double m = quickselect(v, n, j->rank);
            for (int64_t k = 0; k < j->count && pick < 0; k++) {
                int64_t at = base + j->off[k];
                double x = j->f64 ? ((const double *)j->x)[at] : ((const float *)j->x)[at];
                if (x == m)
                    pick = at;
            }
        }
        j->out[o] = pick;
        for (int d = nd - 1; d >= 0; d--) {
            if (++idx[d] < j->oshape[d])
                break;
            idx[d] = 0;
        }
    }
}

static nx_status select_reference(void *user, nx_ctx *ctx, int n_in, const nx_tensor *const *ins,
                                  nx_tensor *out)
{
    (void)user, (void)n_in;
    const nx_tensor *x = ins[0], *fp = ins[1];
    int nd = nx_tensor_ndim(x);
    const int64_t *xs = nx_tensor_shape(x), *ws = nx_tensor_shape(fp);
    int64_t total = nx_tensor_numel(out), wn = nx_tensor_numel(fp);
    if (total == 0)
        return NX_OK;
    select_job j = {.x = nx_tensor_data(x),
                    .f64 = nx_tensor_dtype(x) == NX_DTYPE_F64,
                    .nd = nd,
                    .out = nx_tensor_data(out)};
    int64_t stride = 1;
    for (int d = nd - 1; d >= 0; d--) {
        j.xstride[d] = stride;
        stride *= xs[d];
        j.oshape[d] = nx_tensor_shape(out)[d];
    }
    size_t obytes = (size_t)wn * sizeof(int64_t);
    int64_t *off = nx_rt_alloc(ctx, obytes);
    if (!off)
        return nx_rt_nomem(ctx, "median_filter: window offsets", obytes);
    const uint8_t *in = nx_tensor_data(fp);
    for (int64_t k = 0; k < wn; k++) {
        uint8_t b;
        memcpy(&b, in + k, 1);
        if (!b)
            continue;
        int64_t r = k, o = 0;
        for (int d = nd - 1; d >= 0; d--) {
            o += (r % ws[d]) * j.xstride[d];
            r /= ws[d];
        }
        off[j.count++] = o;
    }
    j.off = off;
    j.rank = j.count / 2;
    nx_status st = NX_OK;
    int threads = 1;
    if (j.count == 0) {
        st = nx_rt_error(ctx, NX_ERR_INVALID_ARG, "median_filter: the footprint is all zero");
    } else if ((st = nx_rt_pool_threads(ctx, &threads)) == NX_OK) {
        int nchunks = nx_rt_pool_chunks(total, 64, threads);
        size_t sbytes = (size_t)nchunks * (size_t)j.count * sizeof(double);
        j.scratch = nx_rt_alloc(ctx, sbytes);
        if (!j.scratch)
            st = nx_rt_nomem(ctx, "median_filter: selection scratch", sbytes);
        else
            st = nx_rt_parallel_for(ctx, total, 64, select_chunk, &j);
        nx_rt_free(ctx, j.scratch, sbytes);
    }
    nx_rt_free(ctx, off, obytes);
    return st;
}

static const nx_extern_def select_def = {
    .name = "median_select",
    .shape = select_shape,
    .reference = select_reference,
    .vjp = NULL, /* an integer index: the gather that reads it carries the gradient */
};

nx_node nx_morph_median_select(nx_graph *g, nx_node xp, int lead, int nsp, const int64_t *w,
                               const uint8_t *in)
{
    int nd = lead + nsp;
    int64_t wshape[NX_MAX_DIMS], count = 1, xshape[NX_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        wshape[i] = i < lead ? 1 : w[i - lead];
        count *= wshape[i];
    }
    if (!xp || !nx_node_shape(g, xp, xshape))
        return NX_NONE;
    for (int i = lead; i < nd; i++)
        if (xshape[i] < wshape[i])
            return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                     "nx_median_node: VALID with an element of extent %lld on an "
                                     "axis of %lld; expected an element no larger than the image",
                                     (long long)wshape[i], (long long)xshape[i]);
    nx_ctx *ctx = nx_graph_ctx(g);
    uint8_t *ones = NULL;
    if (!in) {
        ones = nx_rt_alloc(ctx, (size_t)count);
        if (!ones)
            return nx_ir_graph_failf(g, NX_ERR_NOMEM, "nx_median_node: out of memory (%lld bytes)",
                                     (long long)count);
        memset(ones, 1, (size_t)count);
    }
    nx_node fp = nx_constant(g, NX_DTYPE_U8, nd, wshape, in ? in : ones);
    nx_rt_free(ctx, ones, (size_t)count);
    nx_node idx = nx_extern(g, &select_def, 2, (nx_node[]){xp, fp});
    int64_t n = 1, oshape[NX_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        n *= xshape[i];
    nx_node flat = nx_reshape(g, xp, 1, &n);
    if (!idx || !nx_node_shape(g, idx, oshape))
        return NX_NONE;
    return nx_gather(g, flat, idx, 0);
}
