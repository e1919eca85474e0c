/* Small batched matrices as IR fragments (matfun.h): element access, the pivoted solve, closed-form
 * determinants and the Padé scaling-and-squaring exponential. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "ir/ir.h"
#include "ops/geometry/matfun.h"

nx_node nx_mat_block(nx_graph *g, nx_node x, int r0, int r1, int c0, int c1)
{
    int nd = nx_node_ndim(g, x);
    int64_t shape[NX_MAX_DIMS] = {0}, lo[NX_MAX_DIMS] = {0};
    if (x == NX_NONE || nd < 2)
        return nx_ir_graph_failf(g, NX_ERR_SHAPE, "nx_mat_block: expected a matrix [..., n, m]");
    nx_node_shape(g, x, shape);
    lo[nd - 2] = r0;
    lo[nd - 1] = c0;
    shape[nd - 2] = r1;
    shape[nd - 1] = c1;
    return nx_slice(g, x, lo, shape, NULL);
}

nx_node nx_mat_el(nx_graph *g, nx_node x, int i, int j)
{
    nx_node e = nx_mat_block(g, x, i, i + 1, j, j + 1);
    int nd = nx_node_ndim(g, x);
    int64_t shape[NX_MAX_DIMS] = {0};
    if (e == NX_NONE)
        return NX_NONE;
    nx_node_shape(g, x, shape);
    return nx_reshape(g, e, nd - 2, shape);
}

nx_node nx_mat_from(nx_graph *g, int n, int m, const nx_node *els)
{
    nx_node like = NX_NONE;
    for (int k = 0; k < n * m && like == NX_NONE; k++)
        like = els[k];
    if (like == NX_NONE)
        return nx_ir_graph_failf(g, NX_ERR_INTERNAL, "nx_mat_from: every element is NX_NONE");
    nx_dtype dt = nx_node_dtype(g, like);
    int nd = nx_node_ndim(g, like);
    int64_t shape[NX_MAX_DIMS + 2] = {0};
    nx_node_shape(g, like, shape);
    nx_node zero = nx_broadcast(g, nx_scalar(g, dt, 0.0), nd, shape);
    nx_node cols[64];
    if (n * m > 64 || nd + 2 > NX_MAX_DIMS)
        return nx_ir_graph_failf(g, NX_ERR_SHAPE, "nx_mat_from: %dx%d is larger than 64 elements",
                                 n, m);
    shape[nd] = 1;
    for (int k = 0; k < n * m; k++)
        cols[k] = nx_reshape(g, els[k] != NX_NONE ? els[k] : zero, nd + 1, shape);
    nx_node flat = nx_concat(g, n * m, cols, nd);
    shape[nd] = n;
    shape[nd + 1] = m;
    return nx_reshape(g, flat, nd + 2, shape);
}

nx_node nx_mat_eye(nx_graph *g, nx_dtype dt, int n)
{
    int64_t shape[2] = {n, n};
    nx_node r = nx_iota(g, NX_DTYPE_I64, 2, shape, 0);
    nx_node c = nx_iota(g, NX_DTYPE_I64, 2, shape, 1);
    return nx_cast(g, nx_eq(g, r, c), dt);
}

nx_node nx_mat_transpose(nx_graph *g, nx_node x)
{
    int nd = nx_node_ndim(g, x);
    int perm[NX_MAX_DIMS];
    if (x == NX_NONE || nd < 2)
        return nx_ir_graph_failf(g, NX_ERR_SHAPE, "nx_mat_transpose: expected [..., n, m]");
    for (int i = 0; i < nd; i++)
        perm[i] = i;
    perm[nd - 2] = nd - 1;
    perm[nd - 1] = nd - 2;
    return nx_permute(g, x, perm);
}

nx_node nx_mat_barrier(nx_graph *g, nx_node x)
{
    int nd = nx_node_ndim(g, x);
    int64_t s[NX_MAX_DIMS] = {0};
    if (x == NX_NONE || nd + 1 > NX_MAX_DIMS)
        return x;
    nx_node_shape(g, x, s);
    s[nd] = 1;
    nx_node y = nx_scan(g, nx_reshape(g, x, nd + 1, s), nd, NX_MONOID_SUM, false);
    return nx_reshape(g, y, nd, s);
}

/* max |x| over the last two axes, keepdims [..., 1, 1]. */
static nx_node absmax2(nx_graph *g, nx_node x)
{
    int nd = nx_node_ndim(g, x);
    int axes[2] = {nd - 2, nd - 1};
    return nx_reduce(g, nx_abs(g, x), 2, axes, NX_MONOID_MAX, true);
}

static nx_node squeeze2(nx_graph *g, nx_node x)
{
    int nd = nx_node_ndim(g, x);
    int64_t shape[NX_MAX_DIMS] = {0};
    nx_node_shape(g, x, shape);
    return nx_reshape(g, x, nd - 2, shape);
}

nx_node nx_mat_solve(nx_graph *g, nx_node a, nx_node b, nx_node *singular)
{
    if (a == NX_NONE || b == NX_NONE)
        return NX_NONE;
    int na = nx_node_ndim(g, a), nb = nx_node_ndim(g, b);
    int64_t sa[NX_MAX_DIMS] = {0}, sb[NX_MAX_DIMS] = {0}, sm[NX_MAX_DIMS] = {0};
    nx_node_shape(g, a, sa);
    nx_node_shape(g, b, sb);
    if (na < 2 || nb < 2 || sa[na - 1] != sa[na - 2] || sb[nb - 2] != sa[na - 2])
        return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                 "nx_mat_solve: expected A [..., n, n] and B [..., n, k]");
    int64_t n = sa[na - 1], k = sb[nb - 1];
    nx_dtype dt = nx_node_dtype(g, a);
    /* The leading axes of both, broadcast (numpy's rule, right-aligned). */
    int nd = na > nb ? na : nb;
    for (int i = 0; i < nd - 2; i++) {
        int ia = i - (nd - na), ib = i - (nd - nb);
        int64_t ea = ia >= 0 ? sa[ia] : 1, eb = ib >= 0 ? sb[ib] : 1;
        if (ea != eb && ea != 1 && eb != 1)
            return nx_ir_graph_failf(g, NX_ERR_SHAPE,
                                     "nx_mat_solve: the batch axes of A and B do not broadcast");
        sm[i] = ea == 1 ? eb : ea;
    }
    sm[nd - 2] = n;
    sm[nd - 1] = n;
    a = nx_broadcast(g, a, nd, sm);
    sm[nd - 1] = k;
    b = nx_broadcast(g, b, nd, sm);
    nx_node parts[2] = {a, b};
    nx_node m = nx_concat(g, 2, parts, nd - 1); /* [..., n, n + k] */
    int64_t rshape[2] = {n, 1};
    nx_node row = nx_iota(g, NX_DTYPE_I64, 2, rshape, 0); /* row index, [n, 1] */
    nx_node zero = nx_scalar(g, dt, 0.0);
    nx_node minpiv = NX_NONE;
    int64_t lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0};
    for (int64_t c = 0; c < n; c++) {
        nx_node_shape(g, m, hi);
        memset(lo, 0, sizeof lo);
        lo[nd - 1] = c;
        hi[nd - 1] = c + 1;
        nx_node col = nx_abs(g, nx_slice(g, m, lo, hi, NULL)); /* [..., n, 1] */
        nx_node above = nx_lt(g, row, nx_scalar(g, NX_DTYPE_I64, (double)c));
        col = nx_select(g, above, nx_scalar(g, dt, -1.0), col);
        int ax = nd - 2;
        nx_node p = nx_reduce(g, col, 1, &ax, NX_MONOID_ARGMAX, true); /* [..., 1, 1] */
        nx_node isp = nx_eq(g, row, p);
        nx_node isc = nx_eq(g, row, nx_scalar(g, NX_DTYPE_I64, (double)c));
        nx_node rowp = nx_reduce(g, nx_select(g, isp, m, zero), 1, &ax, NX_MONOID_SUM, true);
        nx_node_shape(g, m, hi);
        memset(lo, 0, sizeof lo);
        lo[nd - 2] = c;
        hi[nd - 2] = c + 1;
        nx_node rowc = nx_slice(g, m, lo, hi, NULL);
        m = nx_select(g, isc, rowp, nx_select(g, isp, rowc, m));
        nx_node_shape(g, rowp, hi);
        memset(lo, 0, sizeof lo);
        lo[nd - 1] = c;
        hi[nd - 1] = c + 1;
        nx_node piv = nx_slice(g, rowp, lo, hi, NULL); /* [..., 1, 1] */
        nx_node r = nx_div(g, rowp, piv);
        nx_node_shape(g, m, hi);
        memset(lo, 0, sizeof lo);
        lo[nd - 1] = c;
        hi[nd - 1] = c + 1;
        nx_node f = nx_slice(g, m, lo, hi, NULL); /* [..., n, 1] */
        m = nx_select(g, isc, r, nx_sub(g, m, nx_mul(g, f, r)));
        m = nx_mat_barrier(g, m);
        nx_node ap = nx_abs(g, piv);
        minpiv = minpiv == NX_NONE ? ap : nx_minimum(g, minpiv, ap);
    }
    if (singular) {
        double eps = dt == NX_DTYPE_F32 ? (double)FLT_EPSILON : DBL_EPSILON;
        nx_node tol = nx_mul(g, nx_scalar(g, dt, (double)n * eps), absmax2(g, a));
        *singular = squeeze2(g, nx_le(g, minpiv, tol));
    }
    nx_node_shape(g, m, hi);
    memset(lo, 0, sizeof lo);
    lo[nd - 1] = n;
    return nx_slice(g, m, lo, hi, NULL);
}

nx_node nx_mat_det(nx_graph *g, nx_node a)
{
    int nd = nx_node_ndim(g, a);
    int64_t s[NX_MAX_DIMS] = {0};
    if (a == NX_NONE)
        return NX_NONE;
    nx_node_shape(g, a, s);
    if (nd < 2 || s[nd - 1] != s[nd - 2] || s[nd - 1] < 1 || s[nd - 1] > 3)
        return nx_ir_graph_failf(g, NX_ERR_UNSUPPORTED,
                                 "nx_mat_det: closed forms for 1x1, 2x2 and 3x3 only");
    int n = (int)s[nd - 1];
    nx_node e[9];
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            e[i * n + j] = nx_mat_el(g, a, i, j);
    if (n == 1)
        return e[0];
    if (n == 2)
        return nx_sub(g, nx_mul(g, e[0], e[3]), nx_mul(g, e[1], e[2]));
    nx_node c0 = nx_sub(g, nx_mul(g, e[4], e[8]), nx_mul(g, e[5], e[7]));
    nx_node c1 = nx_sub(g, nx_mul(g, e[3], e[8]), nx_mul(g, e[5], e[6]));
    nx_node c2 = nx_sub(g, nx_mul(g, e[3], e[7]), nx_mul(g, e[4], e[6]));
    return nx_add(g, nx_sub(g, nx_mul(g, e[0], c0), nx_mul(g, e[1], c1)), nx_mul(g, e[2], c2));
}

/* sum_k c[k] X^k over the given powers (NX_NONE entries skipped), plus c0 I. */
static nx_node poly(nx_graph *g, nx_dtype dt, nx_node eye, int np, const nx_node *pw,
                    const double *coef)
{
    nx_node acc = nx_mul(g, nx_scalar(g, dt, coef[0]), eye);
    for (int i = 1; i < np; i++)
        if (pw[i] != NX_NONE && coef[i] != 0.0)
            acc = nx_add(g, acc, nx_mul(g, nx_scalar(g, dt, coef[i]), pw[i]));
    return acc;
}

nx_node nx_mat_expm(nx_graph *g, nx_node a)
{
    if (a == NX_NONE)
        return NX_NONE;
    int nd = nx_node_ndim(g, a);
    int64_t s[NX_MAX_DIMS] = {0};
    nx_node_shape(g, a, s);
    nx_dtype dt = nx_node_dtype(g, a);
    if (nd < 2 || s[nd - 1] != s[nd - 2])
        return nx_ir_graph_failf(g, NX_ERR_SHAPE, "nx_mat_expm: expected A [..., n, n]");
    if (dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64)
        return nx_ir_graph_failf(g, NX_ERR_DTYPE, "nx_mat_expm: expected f32 or f64");
    int n = (int)s[nd - 1];
    /* Padé coefficients b_k = (2m - k)! m! / ((2m)! k! (m - k)!), Higham 2005 table. */
    static const double b13[14] = {64764752532480000.0, 32382376266240000.0, 7771770303897600.0,
                                   1187353796428800.0,  129060195264000.0,   10559470521600.0,
                                   670442572800.0,      33522128640.0,       1323241920.0,
                                   40840800.0,          960960.0,            16380.0,
                                   182.0,               1.0};
    static const double b7[8] = {17297280.0, 8648640.0, 1995840.0, 277200.0,
                                 25200.0,    1512.0,    56.0,      1.0};
    bool f64 = dt == NX_DTYPE_F64;
    double theta = f64 ? 5.371920351148152 : 3.925724783138660;
    /* s = max(0, ceil(log2(|A|_1 / theta))), per matrix, [..., 1, 1]. */
    int ax_r = nd - 2, ax_c = nd - 1;
    nx_node colsum = nx_reduce(g, nx_abs(g, a), 1, &ax_r, NX_MONOID_SUM, true);
    nx_node norm = nx_reduce(g, colsum, 1, &ax_c, NX_MONOID_MAX, true);
    nx_node lg = nx_div(g, nx_log(g, nx_div(g, norm, nx_scalar(g, dt, theta))),
                        nx_scalar(g, dt, log(2.0)));
    nx_node sq = nx_maximum(g, nx_ceil(g, lg), nx_scalar(g, dt, 0.0));
    nx_node scale = nx_pow(g, nx_scalar(g, dt, 2.0), nx_neg(g, sq));
    nx_node x = nx_mul(g, a, scale);
    nx_node eye = nx_mat_eye(g, dt, n);
    nx_node x2 = nx_mat_barrier(g, nx_matmul(g, x, x));
    nx_node x4 = nx_mat_barrier(g, nx_matmul(g, x2, x2));
    nx_node x6 = nx_mat_barrier(g, nx_matmul(g, x4, x2));
    nx_node u, v;
    if (f64) {
        nx_node pw[7] = {NX_NONE, NX_NONE, x2, NX_NONE, x4, NX_NONE, x6};
        double cu_hi[7] = {0, 0, b13[9], 0, b13[11], 0, b13[13]};
        double cv_hi[7] = {0, 0, b13[8], 0, b13[10], 0, b13[12]};
        double cu_lo[7] = {b13[1], 0, b13[3], 0, b13[5], 0, b13[7]};
        double cv_lo[7] = {b13[0], 0, b13[2], 0, b13[4], 0, b13[6]};
        /* U = A [A6 (b13 A6 + b11 A4 + b9 A2) + b7 A6 + b5 A4 + b3 A2 + b1 I],
         * V = A6 (b12 A6 + b10 A4 + b8 A2) + b6 A6 + b4 A4 + b2 A2 + b0 I. */
        nx_node hu = poly(g, dt, eye, 7, pw, cu_hi), hv = poly(g, dt, eye, 7, pw, cv_hi);
        u = nx_matmul(g, x, nx_add(g, nx_matmul(g, x6, hu), poly(g, dt, eye, 7, pw, cu_lo)));
        v = nx_add(g, nx_matmul(g, x6, hv), poly(g, dt, eye, 7, pw, cv_lo));
    } else {
        nx_node pw[7] = {NX_NONE, NX_NONE, x2, NX_NONE, x4, NX_NONE, x6};
        double cu[7] = {b7[1], 0, b7[3], 0, b7[5], 0, b7[7]};
        double cv[7] = {b7[0], 0, b7[2], 0, b7[4], 0, b7[6]};
        u = nx_matmul(g, x, poly(g, dt, eye, 7, pw, cu));
        v = poly(g, dt, eye, 7, pw, cv);
    }
    nx_node r = nx_mat_solve(g, nx_mat_barrier(g, nx_sub(g, v, u)),
                             nx_mat_barrier(g, nx_add(g, v, u)), NULL);
    for (int k = 0; k < NX_MAT_EXPM_MAX_SQUARINGS; k++)
        r = nx_mat_barrier(g, nx_select(g, nx_gt(g, sq, nx_scalar(g, dt, (double)k)),
                                        nx_matmul(g, r, r), r));
    nx_node over = nx_gt(g, sq, nx_scalar(g, dt, (double)NX_MAT_EXPM_MAX_SQUARINGS));
    return nx_select(g, over, nx_scalar(g, dt, NAN), r);
}
