/* Checks and graph fragments the affine and Lie ops share (affine.h). */
#include <math.h>
#include <string.h>

#include "ops/geometry/affine.h"

nx_status nx_geo_check_float(const nx_op_args *c, int i, int min_rank)
{
    const nx_tensor *t = c->in[i];
    nx_dtype dt = nx_tensor_dtype(t);
    if (dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64)
        return nx_rt_error(c->ctx, NX_ERR_DTYPE, "%s: %s is %s; expected float32 or float64",
                           c->who, c->info->inputs[i], nx_dtype_name(dt));
    if (nx_tensor_ndim(t) < min_rank)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: %s has rank %d; expected rank >= %d",
                           c->who, c->info->inputs[i], nx_tensor_ndim(t), min_rank);
    if (i > 0 && dt != nx_tensor_dtype(c->in[0]))
        return nx_rt_error(c->ctx, NX_ERR_DTYPE, "%s: %s is %s but %s is %s; expected one dtype",
                           c->who, c->info->inputs[i], nx_dtype_name(dt), c->info->inputs[0],
                           nx_dtype_name(nx_tensor_dtype(c->in[0])));
    return NX_OK;
}

nx_status nx_geo_check_affine(const nx_op_args *c, int i, int max_d, int *d, int *rows)
{
    nx_status st = nx_geo_check_float(c, i, 2);
    if (st != NX_OK)
        return st;
    const nx_tensor *t = c->in[i];
    int nd = nx_tensor_ndim(t);
    const int64_t *s = nx_tensor_shape(t);
    int64_t r = s[nd - 2], k = s[nd - 1];
    char buf[128];
    if (k < 2 || k - 1 > max_d || (r != k - 1 && r != k))
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: %s is %s; expected an affine [..., d, d+1] or [..., d+1, d+1] "
                           "with 1 <= d <= %d",
                           c->who, c->info->inputs[i], nx_shape_str(buf, sizeof buf, nd, s),
                           max_d);
    *d = (int)(k - 1);
    *rows = (int)r;
    return NX_OK;
}

nx_status nx_geo_check_batch(const nx_op_args *c, int i, int ni, int j, int nj)
{
    const int64_t *si = nx_tensor_shape(c->in[i]), *sj = nx_tensor_shape(c->in[j]);
    char bi[128], bj[128];
    if (ni != nj || memcmp(si, sj, sizeof(int64_t) * (size_t)ni) != 0)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: the batch axes of %s %s and of %s %s differ; expected equal",
                           c->who, c->info->inputs[i], nx_shape_str(bi, sizeof bi, ni, si),
                           c->info->inputs[j], nx_shape_str(bj, sizeof bj, nj, sj));
    return NX_OK;
}

nx_node nx_geo_last(nx_graph *g, nx_node x, int k)
{
    int nd = nx_node_ndim(g, x);
    int64_t lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0};
    if (x == NX_NONE)
        return NX_NONE;
    nx_node_shape(g, x, hi);
    lo[nd - 1] = k;
    hi[nd - 1] = k + 1;
    nx_node e = nx_slice(g, x, lo, hi, NULL);
    return nx_reshape(g, e, nd - 1, hi);
}

nx_node nx_geo_vec(nx_graph *g, int n, const nx_node *els)
{
    int nd = nx_node_ndim(g, els[0]);
    int64_t shape[NX_MAX_DIMS] = {0};
    nx_node cols[64];
    if (n > 64)
        return NX_NONE;
    nx_node_shape(g, els[0], shape);
    shape[nd] = 1;
    for (int k = 0; k < n; k++)
        cols[k] = nx_reshape(g, els[k], nd + 1, shape);
    return nx_concat(g, n, cols, nd);
}

nx_node nx_geo_square(nx_graph *g, nx_node m)
{
    int nd = nx_node_ndim(g, m);
    int64_t s[NX_MAX_DIMS] = {0};
    if (m == NX_NONE)
        return NX_NONE;
    nx_node_shape(g, m, s);
    if (s[nd - 2] == s[nd - 1])
        return m;
    int64_t d = s[nd - 2];
    /* The row 0 ... 0 1, broadcast over the batch. */
    int64_t rs[2] = {1, d + 1};
    nx_node col = nx_iota(g, NX_DTYPE_I64, 2, rs, 1);
    nx_node last = nx_cast(g, nx_eq(g, col, nx_scalar(g, NX_DTYPE_I64, (double)d)),
                           nx_node_dtype(g, m));
    s[nd - 2] = 1;
    last = nx_broadcast(g, last, nd, s);
    nx_node parts[2] = {m, last};
    return nx_concat(g, 2, parts, nd - 2);
}

nx_node nx_geo_affine_from(nx_graph *g, nx_node lin, nx_node t)
{
    int nd = nx_node_ndim(g, lin);
    int64_t s[NX_MAX_DIMS] = {0};
    if (lin == NX_NONE || t == NX_NONE)
        return NX_NONE;
    nx_node_shape(g, lin, s);
    s[nd - 1] = 1;
    nx_node parts[2] = {lin, nx_reshape(g, t, nd, s)};
    return nx_concat(g, 2, parts, nd - 1);
}

nx_node nx_geo_rotation(nx_graph *g, int na, const nx_node *ang)
{
    if (na == 1) {
        nx_node c = nx_cos(g, ang[0]), s = nx_sin(g, ang[0]);
        nx_node e[4] = {c, nx_neg(g, s), s, c};
        return nx_mat_from(g, 2, 2, e);
    }
    nx_node c1 = nx_cos(g, ang[0]), s1 = nx_sin(g, ang[0]);
    nx_node c2 = nx_cos(g, ang[1]), s2 = nx_sin(g, ang[1]);
    nx_node c3 = nx_cos(g, ang[2]), s3 = nx_sin(g, ang[2]);
    /* X(a1) Y(a2) Z(a3) multiplied out. */
    nx_node s1s2 = nx_mul(g, s1, s2), c1s2 = nx_mul(g, c1, s2);
    nx_node e[9] = {
        nx_mul(g, c2, c3),
        nx_neg(g, nx_mul(g, c2, s3)),
        s2,
        nx_add(g, nx_mul(g, s1s2, c3), nx_mul(g, c1, s3)),
        nx_sub(g, nx_mul(g, c1, c3), nx_mul(g, s1s2, s3)),
        nx_neg(g, nx_mul(g, s1, c2)),
        nx_sub(g, nx_mul(g, s1, s3), nx_mul(g, c1s2, c3)),
        nx_add(g, nx_mul(g, c1s2, s3), nx_mul(g, s1, c3)),
        nx_mul(g, c1, c2),
    };
    return nx_mat_from(g, 3, 3, e);
}

void nx_geo_angles(nx_graph *g, nx_node r, int d, nx_node *ang)
{
    if (d == 2) {
        ang[0] = nx_atan2(g, nx_mat_el(g, r, 1, 0), nx_mat_el(g, r, 0, 0));
        return;
    }
    nx_dtype dt = nx_node_dtype(g, r);
    nx_node r00 = nx_mat_el(g, r, 0, 0), r01 = nx_mat_el(g, r, 0, 1);
    nx_node q = nx_add(g, nx_mul(g, r00, r00), nx_mul(g, r01, r01));
    /* sqrt only of a safe value, so that the gradient at lock is finite. */
    nx_node lock = nx_lt(g, q, nx_scalar(g, dt, 1e-12));
    nx_node one = nx_scalar(g, dt, 1.0), zero = nx_scalar(g, dt, 0.0);
    nx_node c2 = nx_select(g, lock, zero, nx_sqrt(g, nx_select(g, lock, one, q)));
    ang[1] = nx_atan2(g, nx_mat_el(g, r, 0, 2), c2);
    nx_node a1 = nx_atan2(g, nx_neg(g, nx_mat_el(g, r, 1, 2)), nx_mat_el(g, r, 2, 2));
    nx_node a3 = nx_atan2(g, nx_neg(g, r01), r00);
    nx_node a3l = nx_atan2(g, nx_mat_el(g, r, 1, 0), nx_mat_el(g, r, 1, 1));
    ang[0] = nx_select(g, lock, zero, a1);
    ang[2] = nx_select(g, lock, a3l, a3);
}

/* y = L (x - c) + t + c for x [*B, P, d] and L, t of m [*B, r, d+1]. */
nx_node nx_geo_apply(nx_graph *g, nx_node x, nx_node m, nx_node ctr)
{
    int nm = nx_node_ndim(g, m);
    int64_t s[NX_MAX_DIMS] = {0};
    nx_node_shape(g, m, s);
    int d = (int)s[nm - 1] - 1;
    nx_node lt = nx_mat_transpose(g, nx_mat_block(g, m, 0, d, 0, d));
    nx_node t = nx_mat_transpose(g, nx_mat_block(g, m, 0, d, d, d + 1)); /* [*B, 1, d] */
    if (ctr != NX_NONE)
        x = nx_sub(g, x, ctr);
    nx_node y = nx_add(g, nx_matmul(g, x, lt), t);
    return ctr != NX_NONE ? nx_add(g, y, ctr) : y;
}
