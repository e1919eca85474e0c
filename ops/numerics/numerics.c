/* The numerics family's shared pieces (numerics.h): checks, lines and percentiles. */
#include <math.h>

#include "ops/numerics/numerics.h"

nx_status nx_num_check_float(const nx_op_args *c, int i, const char *name)
{
    const nx_tensor *x = c->in[i];
    nx_dtype dt = nx_tensor_dtype(x);
    if (dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64)
        return nx_rt_error(c->ctx, NX_ERR_DTYPE, "%s: %s is %s; expected f32 or f64", c->who, name,
                           nx_dtype_name(dt));
    if (nx_tensor_numel(x) < 1)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: %s has no elements; expected at least one",
                           c->who, name);
    return NX_OK;
}

nx_status nx_num_resolve_axes(const nx_op_args *c, const nx_num_axes *a, int nd, bool all,
                              const char *what, int *axes, int *naxes)
{
    bool seen[NX_MAX_DIMS] = {false};
    if (a->naxis < 0 || a->naxis > NX_MAX_DIMS)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: %d values of %s; expected 0..%d",
                           c->who, a->naxis, what, NX_MAX_DIMS);
    for (int i = 0; i < a->naxis; i++) {
        int64_t v = a->axis[i];
        if (v < -nd || v >= nd)
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: %s %lld is out of range for an input of rank %d; expected "
                               "-%d..%d",
                               c->who, what, (long long)v, nd, nd, nd - 1);
        int k = (int)(v < 0 ? v + nd : v);
        if (seen[k])
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: %s %d is given twice; expected distinct axes", c->who, what, k);
        seen[k] = true;
    }
    *naxes = 0;
    for (int k = 0; k < nd; k++)
        if (seen[k] || (a->naxis == 0 && all))
            axes[(*naxes)++] = k;
    return NX_OK;
}

nx_status nx_num_check_same_shape(const nx_op_args *c, int i, const char *name)
{
    const nx_tensor *m = c->in[i], *x = c->in[0];
    if (!m)
        return NX_OK;
    nx_dtype dt = nx_tensor_dtype(m);
    if (dt == NX_DTYPE_F16 || dt == NX_DTYPE_BF16)
        return nx_rt_error(c->ctx, NX_ERR_DTYPE,
                           "%s: %s is %s; expected bool, an integer dtype, f32 or f64", c->who,
                           name, nx_dtype_name(dt));
    int nd = nx_tensor_ndim(x);
    bool same = nx_tensor_ndim(m) == nd;
    for (int k = 0; same && k < nd; k++)
        same = nx_tensor_shape(m)[k] == nx_tensor_shape(x)[k];
    if (!same) {
        char ws[96], xs[96];
        nx_shape_str(ws, sizeof ws, nx_tensor_ndim(m), nx_tensor_shape(m));
        nx_shape_str(xs, sizeof xs, nd, nx_tensor_shape(x));
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: %s has shape %s; expected %s's shape %s",
                           c->who, name, ws, c->info->inputs[0], xs);
    }
    return NX_OK;
}

nx_status nx_num_check_broadcast(const nx_op_args *c, int i, const char *name)
{
    const nx_tensor *m = c->in[i], *x = c->in[0];
    if (!m)
        return NX_OK;
    nx_dtype dt = nx_tensor_dtype(m);
    if (dt == NX_DTYPE_F16 || dt == NX_DTYPE_BF16)
        return nx_rt_error(c->ctx, NX_ERR_DTYPE,
                           "%s: %s is %s; expected bool, an integer dtype, f32 or f64", c->who,
                           name, nx_dtype_name(dt));
    int nd = nx_tensor_ndim(x), md = nx_tensor_ndim(m);
    bool ok = md <= nd;
    for (int k = 0; ok && k < md; k++) {
        int64_t a = nx_tensor_shape(m)[md - 1 - k], b = nx_tensor_shape(x)[nd - 1 - k];
        ok = a == b || a == 1;
    }
    if (!ok) {
        char ws[96], xs[96];
        nx_shape_str(ws, sizeof ws, md, nx_tensor_shape(m));
        nx_shape_str(xs, sizeof xs, nd, nx_tensor_shape(x));
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: %s has shape %s; expected a shape that broadcasts to %s's %s",
                           c->who, name, ws, c->info->inputs[0], xs);
    }
    return NX_OK;
}

nx_node nx_num_weight_input(nx_graph *g, const nx_op_args *c, int i, const char *name, nx_dtype dt)
{
    const nx_tensor *m = c->in[i];
    if (!m)
        return NX_NONE;
    nx_dtype md = nx_tensor_dtype(m);
    nx_node w = md == dt ? nx_parameter(g, name, md, nx_tensor_ndim(m), nx_tensor_shape(m))
                         : nx_input(g, name, md, nx_tensor_ndim(m), nx_tensor_shape(m));
    return nx_cast(g, w, dt);
}

nx_node nx_num_declare(nx_graph *g, const nx_op_args *c, int i)
{
    const nx_tensor *t = c->in[i];
    nx_dtype dt = nx_tensor_dtype(t);
    const char *name = c->info->inputs[i];
    return nx_dtype_is_float(dt) ? nx_parameter(g, name, dt, nx_tensor_ndim(t), nx_tensor_shape(t))
                                 : nx_input(g, name, dt, nx_tensor_ndim(t), nx_tensor_shape(t));
}

nx_status nx_num_check_storable(const nx_op_args *c, int i)
{
    nx_dtype dt = nx_tensor_dtype(c->in[i]);
    if (dt == NX_DTYPE_F16 || dt == NX_DTYPE_BF16)
        return nx_rt_error(c->ctx, NX_ERR_DTYPE,
                           "%s: %s is %s; expected bool, an integer dtype, f32 or f64", c->who,
                           c->info->inputs[i], nx_dtype_name(dt));
    return NX_OK;
}

nx_status nx_num_axis(const nx_op_args *c, int64_t v, int nd, const char *what, int *k)
{
    if (v < -nd || v >= nd)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: %s %lld is out of range for rank %d; expected -%d..%d", c->who,
                           what, (long long)v, nd, nd, nd - 1);
    *k = (int)(v < 0 ? v + nd : v);
    return NX_OK;
}

nx_status nx_num_check_percentile(const nx_op_args *c, double q, const char *what)
{
    if (!(q >= 0 && q <= 100))
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: %s is %g; expected a percentile in [0, 100]", c->who, what, q);
    return NX_OK;
}

nx_node nx_num_to_lines(nx_graph *g, nx_node x, int naxes, const int *axes)
{
    int nd = nx_node_ndim(g, x);
    int64_t shape[NX_MAX_DIMS] = {0};
    if (nd < 0 || !nx_node_shape(g, x, shape))
        return NX_NONE;
    int perm[NX_MAX_DIMS], np = 0;
    bool red[NX_MAX_DIMS] = {false};
    for (int i = 0; i < naxes; i++)
        red[axes[i]] = true;
    int64_t b = 1, n = 1;
    for (int k = 0; k < nd; k++)
        if (!red[k]) {
            perm[np++] = k;
            b *= shape[k];
        }
    for (int i = 0; i < naxes; i++) {
        perm[np++] = axes[i];
        n *= shape[axes[i]];
    }
    bool ident = true;
    for (int k = 0; k < nd; k++)
        ident = ident && perm[k] == k;
    nx_node p = ident ? x : nx_permute(g, x, perm);
    int64_t ls[2] = {b, n};
    return nx_reshape(g, p, 2, ls);
}

nx_node nx_num_from_lines(nx_graph *g, nx_node lines, int nd, const int64_t *shape, int naxes,
                          const int *axes)
{
    int perm[NX_MAX_DIMS], np = 0, inv[NX_MAX_DIMS];
    int64_t ps[NX_MAX_DIMS];
    bool red[NX_MAX_DIMS] = {false};
    for (int i = 0; i < naxes; i++)
        red[axes[i]] = true;
    for (int k = 0; k < nd; k++)
        if (!red[k])
            perm[np++] = k;
    for (int i = 0; i < naxes; i++)
        perm[np++] = axes[i];
    for (int k = 0; k < nd; k++) {
        ps[k] = shape[perm[k]];
        inv[perm[k]] = k;
    }
    bool ident = true;
    for (int k = 0; k < nd; k++)
        ident = ident && perm[k] == k;
    nx_node y = nx_reshape(g, lines, nd, ps);
    return ident ? y : nx_permute(g, y, inv);
}

nx_node nx_num_percentile(nx_graph *g, nx_node sorted, nx_node count, double q)
{
    int64_t shape[NX_MAX_DIMS] = {0};
    if (nx_node_ndim(g, sorted) != 2 || !nx_node_shape(g, sorted, shape))
        return NX_NONE;
    nx_dtype dt = nx_node_dtype(g, sorted), f = NX_DTYPE_F64;
    int64_t n = shape[1], row[2] = {1, n};
    nx_node k = count != NX_NONE ? count : nx_scalar(g, f, (double)n);
    nx_node zero = nx_scalar(g, f, 0), one = nx_scalar(g, f, 1);
    nx_node last = nx_maximum(g, nx_sub(g, k, one), zero);
    nx_node h = nx_mul(g, nx_scalar(g, f, q / 100.0), last);
    nx_node i0 = nx_floor(g, h);
    nx_node frac = nx_sub(g, h, i0);
    nx_node i1 = nx_minimum(g, nx_add(g, i0, one), last);
    nx_node j = nx_iota(g, f, 2, row, 1);
    nx_node w = nx_add(g, nx_select(g, nx_eq(g, j, i0), nx_sub(g, one, frac), zero),
                       nx_select(g, nx_eq(g, j, i1), frac, zero));
    int ax = 1;
    return nx_reduce(g, nx_mul(g, nx_cast(g, w, dt), sorted), 1, &ax, NX_MONOID_SUM, true);
}

nx_node nx_num_sorted_lines(nx_graph *g, nx_node x, nx_node m, nx_node *count)
{
    *count = NX_NONE;
    if (m == NX_NONE)
        return nx_sort(g, x, 1, false);
    int64_t shape[NX_MAX_DIMS] = {0};
    if (!nx_node_shape(g, x, shape))
        return NX_NONE;
    nx_dtype dt = nx_node_dtype(g, x);
    nx_node key = nx_select(g, m, x, nx_scalar(g, dt, INFINITY));
    nx_node s = nx_sort(g, key, 1, false);
    int ax = 1;
    int64_t row[2] = {1, shape[1]};
    *count = nx_reduce(g, nx_cast(g, m, NX_DTYPE_F64), 1, &ax, NX_MONOID_SUM, true);
    nx_node valid = nx_lt(g, nx_iota(g, NX_DTYPE_F64, 2, row, 1), *count);
    return nx_select(g, valid, s, nx_scalar(g, dt, 0));
}

nx_node nx_num_safe_div(nx_graph *g, nx_node x, nx_node d)
{
    nx_dtype dt = nx_node_dtype(g, d);
    nx_node nz = nx_ne(g, d, nx_scalar(g, dt, 0));
    nx_node q = nx_div(g, x, nx_select(g, nz, d, nx_scalar(g, dt, 1)));
    return nx_select(g, nz, q, nx_scalar(g, dt, 0));
}

nx_status nx_num_check_axis_mask(const nx_op_args *c, int64_t axis)
{
    const nx_tensor *x = c->in[0], *m = c->in[1];
    int k;
    nx_status st = nx_num_check_storable(c, 0);
    if (st == NX_OK)
        st = nx_num_check_storable(c, 1);
    if (st == NX_OK && nx_tensor_ndim(x) < 1)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: x is 0-d; expected at least one axis",
                           c->who);
    if (st == NX_OK)
        st = nx_num_axis(c, axis, nx_tensor_ndim(x), "axis", &k);
    if (st != NX_OK)
        return st;
    if (nx_tensor_ndim(m) != 1 || nx_tensor_shape(m)[0] != nx_tensor_shape(x)[k]) {
        char ms[96];
        nx_shape_str(ms, sizeof ms, nx_tensor_ndim(m), nx_tensor_shape(m));
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: mask has shape %s; expected a 1-d mask of x's extent along axis "
                           "%d, [%lld]",
                           c->who, ms, k, (long long)nx_tensor_shape(x)[k]);
    }
    return NX_OK;
}
