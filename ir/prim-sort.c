/* Sorting along one axis; top-k is a sort that keeps its first k.
 *
 *   sort     y = the first k of x's line, sorted stably; NaN counts as the greatest value, so it
 *            sorts last ascending and first descending (as numpy.sort / argmax agree)
 *   argsort  y = the positions (i64) of those values in x; ties keep their order (first index
 *            first), in both directions
 *
 * The reference is a stable merge sort per line. */
#include <math.h>
#include <string.h>

#include "ir.h"
#include "ir/adjoint.h"

nx_status nx_ir_shape_sort(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p,
                           nx_ir_sig *out)
{
    (void)s;
    const nx_ir_sig *x = &p->ins[0];
    if (p->nattrs != 3)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "%d attributes; expected [axis, descending, k]",
                          p->nattrs);
    int64_t axis = p->attrs[0], k = p->attrs[2];
    if (axis < 0 || axis >= x->ndim)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "axis %lld is out of range for %d dims",
                          (long long)axis, x->ndim);
    if (p->attrs[1] != 0 && p->attrs[1] != 1)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "descending is %lld; expected 0 or 1",
                          (long long)p->attrs[1]);
    if (k < 0 || k > x->shape[axis])
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG,
                          "k is %lld but axis %lld has %lld elements; expected 0 <= k <= %lld",
                          (long long)k, (long long)axis, (long long)x->shape[axis],
                          (long long)x->shape[axis]);
    if (!nx_ir_is_core_float(x->dtype) && !nx_ir_is_int(x->dtype) && x->dtype != NX_DTYPE_BOOL)
        return nx_ir_fail(ck, NX_ERR_DTYPE, "x is %s; expected f32, f64, an integer or bool",
                          nx_dtype_name(x->dtype));
    *out = *x;
    out->shape[axis] = k;
    if (p->op == NX_PRIM_ARGSORT)
        out->dtype = NX_DTYPE_I64;
    return NX_OK;
}

static nx_node make_sort(nx_graph *g, const char *fn, nx_prim op, nx_node x, int axis,
                         bool descending, int64_t k)
{
    if (!g || !nx_ir_check_handles(g, fn, 1, &x))
        return NX_NONE;
    int nd = g->s.nodes[x].ndim, a;
    if (!nx_ir_axis(axis, nd, &a))
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                 "%s: axis %d is out of range for %d dims; expected %d to %d", fn,
                                 axis, nd, -nd, nd - 1);
    int64_t attrs[3] = {a, descending, k < 0 ? g->s.nodes[x].shape[a] : k};
    return nx_ir_make(g, fn, op, 1, &x, 3, attrs, 0, NULL);
}

nx_node nx_sort(nx_graph *g, nx_node x, int axis, bool descending)
{
    return make_sort(g, "nx_sort", NX_PRIM_SORT, x, axis, descending, -1);
}

nx_node nx_argsort(nx_graph *g, nx_node x, int axis, bool descending)
{
    return make_sort(g, "nx_argsort", NX_PRIM_ARGSORT, x, axis, descending, -1);
}

void nx_topk(nx_graph *g, nx_node x, int64_t k, int axis, bool largest, nx_node *values,
             nx_node *indices)
{
    if (k < 0) { /* a negative k must not mean "all" here */
        if (g && nx_ir_check_handles(g, "nx_topk", 1, &x))
            nx_ir_graph_failf(g, NX_ERR_INVALID_ARG, "nx_topk: k is %lld; expected k >= 0",
                              (long long)k);
        if (values)
            *values = NX_NONE;
        if (indices)
            *indices = NX_NONE;
        return;
    }
    if (values)
        *values = make_sort(g, "nx_topk", NX_PRIM_SORT, x, axis, largest, k);
    if (indices)
        *indices = make_sort(g, "nx_topk", NX_PRIM_ARGSORT, x, axis, largest, k);
}

/* ---- reference -----------------------------------------------------------------------------*/

typedef struct line {
    const nx_ir_val *v;
    bool fl, desc;
} line;

/* Whether element i must come before element j (strictly); NaN is the greatest value. */
static bool before(const line *l, int64_t i, int64_t j)
{
    nx_ir_val a = l->v[i], b = l->v[j];
    if (l->fl) {
        bool na = isnan(a.f), nb = isnan(b.f);
        if (na || nb)
            return l->desc ? na && !nb : nb && !na;
        return l->desc ? a.f > b.f : a.f < b.f;
    }
    return l->desc ? a.i > b.i : a.i < b.i;
}

static void merge_sort(const line *l, int64_t *idx, int64_t *tmp, int64_t n)
{
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) /* the right one goes first only if strictly before */
                tmp[o++] = before(l, idx[j], idx[i]) ? idx[j++] : idx[i++];
            while (i < mid)
                tmp[o++] = idx[i++];
            while (j < hi)
                tmp[o++] = idx[j++];
        }
        memcpy(idx, tmp, (size_t)n * sizeof *idx);
    }
}

nx_status nx_ir_ref_sort(const nx_ir_eval *ev, const nx_ir_node *n, const nx_tensor *const *ins,
                         nx_tensor *out)
{
    const int64_t *a = nx_ir_node_attrs(ev->s, n);
    int axis = (int)a[0];
    const nx_tensor *x = ins[0];
    int64_t len = x->shape[axis], k = a[2];
    size_t bytes = (size_t)(len + 1) * (2 * sizeof(int64_t) + sizeof(nx_ir_val));
    char *scratch = nx_rt_alloc(ev->ctx, bytes);
    if (!scratch)
        return nx_rt_nomem(ev->ctx, "interpreter: sort", bytes);
    nx_ir_val *vals = (nx_ir_val *)scratch;
    int64_t *idx = (int64_t *)(vals + len + 1), *tmp = idx + len + 1;
    line l = {vals, nx_ir_is_float(x->dtype), a[1] != 0};
    int64_t lshape[NX_MAX_DIMS], li[NX_MAX_DIMS] = {0};
    memcpy(lshape, x->shape, sizeof lshape);
    lshape[axis] = 1;
    int64_t lines = nx_ir_numel(x->ndim, lshape);
    const void *xd = nx_tensor_data(x);
    void *yd = nx_tensor_data(out);
    for (int64_t ln = 0; ln < lines; ln++) {
        int64_t xb = 0, yb = 0;
        for (int d = 0; d < x->ndim; d++) {
            xb += li[d] * x->strides[d];
            yb += li[d] * out->strides[d];
        }
        for (int64_t t = 0; t < len; t++) {
            vals[t] = nx_ir_get(xd, x->dtype, xb + t * x->strides[axis]);
            idx[t] = t;
        }
        merge_sort(&l, idx, tmp, len);
        for (int64_t t = 0; t < k; t++) {
            nx_ir_val v = vals[idx[t]];
            if (n->op == NX_PRIM_ARGSORT)
                v.i = idx[t];
            nx_ir_put(yd, out->dtype, yb + t * out->strides[axis], v);
        }
        nx_ir_next(x->ndim, lshape, li);
    }
    nx_rt_free(ev->ctx, scratch, bytes);
    return NX_OK;
}

void nx_ir_attrs_sort(FILE *f, const nx_ir_store *s, const nx_ir_node *n)
{
    const int64_t *a = nx_ir_node_attrs(s, n);
    fprintf(f, "[axis=%lld, descending=%lld, k=%lld]", (long long)a[0], (long long)a[1],
            (long long)a[2]);
}

/* ---- adjoints ---------------------------------------------------------------------------*/

/* sort: dx = scatter-add of dy by the permutation (argsort with the same axis, order and k):
 * element j of a sorted line came from position perm[j], so the flat offset of x it was read from
 * is built from the other axes' coordinates and perm; top-k's dropped elements get 0. argsort is
 * flagged non-differentiable. */

nx_status nx_ir_vjp_sort(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    nx_node x = v.ops[0];
    int axis = (int)v.a[0], nd = v.n.ndim;
    nx_node perm = nx_ir_make(g, "nx_graph_vjp", NX_PRIM_ARGSORT, 1, &x, 3, v.a, 0, NULL);
    int64_t xs[NX_MAX_DIMS];
    nx_node_shape(g, x, xs);
    nx_node coords[NX_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        coords[d] = d == axis ? perm : nx_ir_ad_iota(g, nd, v.n.shape, d);
    dx[0] = nx_ir_ad_scatter_flat(g, x, nx_ir_ad_flat_index(g, nd, xs, coords), dy);
    return NX_OK;
}
