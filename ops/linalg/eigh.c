/* The op `eigh` (api-b §1.1 `sym_eig_jacobi(A, n, n_sweeps=8)`): eigenvalues w (ascending, as
 * numpy.linalg.eigh) and orthonormal eigenvectors v (columns) of a batch of symmetric matrices,
 * read from the lower triangle as numpy's UPLO='L'.
 *
 * Forward: cyclic Jacobi, a fixed number of sweeps (n_sweeps, default 8: the error falls
 * quadratically once off-diagonal mass is small, and 8 sweeps reach float64 rounding for the p of
 * this tier on well-separated or clustered spectra alike), each sweep rotating every pair (p, q)
 * in row order with the stable tangent t = sgn(theta) / (|theta| + sqrt(theta^2 + 1)),
 * theta = (a_qq - a_pp) / (2 a_pq), no rotation where a_pq = 0. Then an odd-even transposition
 * network sorts the eigenvalues ascending and carries the columns; each column's entry of largest
 * magnitude (the first on ties) is made positive (numpy's signs are arbitrary: the oracle
 * normalises its vectors the same way). All unrolled over p at graph-build time (linalg.h).
 *
 * Adjoint: not autodiff of the sweeps (wasteful, and wrong at degenerate eigenvalues, where the
 * rotation angles are not differentiable) but the closed form, a second program of this op's run:
 *   G = V (diag(dw) + F o (V^T dv)) V^T,  F_ij = 1 / (w_j - w_i) for |w_j - w_i| > tol, else 0,
 * tol = 1e3 eps max_k |w_k| (the degenerate-eigenvalue guard: within a degenerate eigenspace the
 * vectors are not unique and that part of dv carries no gradient), and since only the lower
 * triangle is read, da_ij = G_ij + G_ji below the diagonal, G_ii on it, 0 above. */
#include <math.h>
#include <string.h>

#include "ops/linalg/linalg.h"

#define EIGH_MAX_P 16

typedef struct eigh_args {
    nx_backend backend;
    int64_t n_sweeps; /* 0: the default, 8 */
} eigh_args;

static int sweeps_of(const nx_op_args *c)
{
    const eigh_args *o = c->opts;
    return o->n_sweeps > 0 ? (int)o->n_sweeps : 8;
}

static nx_status check(const nx_op_args *c)
{
    const eigh_args *o = c->opts;
    if (o->n_sweeps < 0 || o->n_sweeps > 64)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: n_sweeps is %lld; expected 1..64 (0: the default, 8)", c->who,
                           (long long)o->n_sweeps);
    return nx_la_check_square(c, 0, "a", EIGH_MAX_P);
}

static void rotate(nx_graph *g, nx_node *s, nx_node *v, int n, int p, int q)
{
    nx_dtype dt = nx_node_dtype(g, s[0]);
    nx_node zero = nx_scalar(g, dt, 0), one = nx_scalar(g, dt, 1);
    nx_node apq = s[p * n + q], app = s[p * n + p], aqq = s[q * n + q];
    nx_node none = nx_eq(g, apq, zero);
    nx_node theta = nx_div(g, nx_sub(g, aqq, app),
                           nx_mul(g, nx_scalar(g, dt, 2), nx_select(g, none, one, apq)));
    nx_node sgn = nx_select(g, nx_ge(g, theta, zero), one, nx_scalar(g, dt, -1));
    nx_node den = nx_add(g, nx_abs(g, theta), nx_sqrt(g, nx_add(g, nx_mul(g, theta, theta), one)));
    nx_node t = nx_select(g, none, zero, nx_div(g, sgn, den));
    nx_node cs = nx_rsqrt(g, nx_add(g, nx_mul(g, t, t), one));
    nx_node sn = nx_mul(g, t, cs);
    nx_node tapq = nx_mul(g, t, apq);
    for (int r = 0; r < n; r++) {
        if (r == p || r == q)
            continue;
        nx_node gr = s[r * n + p], hr = s[r * n + q];
        nx_node np_ = nx_sub(g, nx_mul(g, cs, gr), nx_mul(g, sn, hr));
        nx_node nq = nx_add(g, nx_mul(g, sn, gr), nx_mul(g, cs, hr));
        s[r * n + p] = s[p * n + r] = np_;
        s[r * n + q] = s[q * n + r] = nq;
    }
    s[p * n + p] = nx_sub(g, app, tapq);
    s[q * n + q] = nx_add(g, aqq, tapq);
    s[p * n + q] = s[q * n + p] = zero;
    for (int r = 0; r < n; r++) {
        nx_node gr = v[r * n + p], hr = v[r * n + q];
        v[r * n + p] = nx_sub(g, nx_mul(g, cs, gr), nx_mul(g, sn, hr));
        v[r * n + q] = nx_add(g, nx_mul(g, sn, gr), nx_mul(g, cs, hr));
    }
}

static void swap_if(nx_graph *g, nx_node cond, nx_node *u, nx_node *w)
{
    nx_node nu = nx_select(g, cond, *w, *u), nw = nx_select(g, cond, *u, *w);
    *u = nu;
    *w = nw;
}

static nx_status build_forward(nx_graph *g, const nx_op_args *c, const void *user, int nout,
                               nx_node *outs)
{
    (void)user, (void)nout;
    const nx_tensor *a = c->in[0];
    nx_dtype dt = nx_tensor_dtype(a);
    nx_node an = nx_input(g, "a", dt, nx_tensor_ndim(a), nx_tensor_shape(a));
    nx_la_mat am, v;
    nx_la_entries(g, an, &am);
    int n = am.rows;
    nx_node s[EIGH_MAX_P * EIGH_MAX_P];
    int64_t shape[NX_MAX_DIMS];
    int nd = nx_node_ndim(g, am.e[0]);
    nx_node_shape(g, am.e[0], shape);
    nx_node zero = nx_broadcast(g, nx_scalar(g, dt, 0), nd, shape);
    nx_node one = nx_broadcast(g, nx_scalar(g, dt, 1), nd, shape);
    v.rows = v.cols = n;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            s[i * n + j] = am.e[i >= j ? i * n + j : j * n + i];
            v.e[i * n + j] = i == j ? one : zero;
        }
    int sweeps = sweeps_of(c);
    for (int k = 0; k < sweeps; k++)
        for (int p = 0; p < n; p++)
            for (int q = p + 1; q < n; q++)
                rotate(g, s, v.e, n, p, q);
    nx_node w[EIGH_MAX_P];
    for (int i = 0; i < n; i++)
        w[i] = s[i * n + i];
    for (int round = 0; round < n; round++)
        for (int i = round % 2; i + 1 < n; i += 2) {
            nx_node sw = nx_gt(g, w[i], w[i + 1]);
            swap_if(g, sw, &w[i], &w[i + 1]);
            for (int r = 0; r < n; r++)
                swap_if(g, sw, &v.e[r * n + i], &v.e[r * n + i + 1]);
        }
    for (int k = 0; k < n; k++) {
        nx_node best = v.e[k];
        for (int r = 1; r < n; r++)
            best = nx_select(g, nx_gt(g, nx_abs(g, v.e[r * n + k]), nx_abs(g, best)),
                             v.e[r * n + k], best);
        nx_node neg = nx_lt(g, best, nx_scalar(g, dt, 0));
        for (int r = 0; r < n; r++)
            v.e[r * n + k] = nx_select(g, neg, nx_neg(g, v.e[r * n + k]), v.e[r * n + k]);
    }
    nx_node row = NX_NONE;
    nx_la_split_extra(g, nx_la_assemble_extra(g, &v, w, n), &outs[1], &row);
    outs[0] = nx_reshape(g, row, nx_tensor_ndim(a) - 1, nx_tensor_shape(a));
    return nx_graph_status(g);
}

static nx_node transpose(nx_graph *g, nx_node x)
{
    int nd = nx_node_ndim(g, x), perm[NX_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        perm[d] = d;
    perm[nd - 2] = nd - 1;
    perm[nd - 1] = nd - 2;
    return nx_permute(g, x, perm);
}

/* w[..., :] as [..., 1, p] (axis -2 new) or [..., p, 1] (axis -1 new). */
static nx_node unsqueeze(nx_graph *g, nx_node w, int at)
{
    int64_t shape[NX_MAX_DIMS], out[NX_MAX_DIMS];
    int nd = nx_node_ndim(g, w);
    nx_node_shape(g, w, shape);
    memcpy(out, shape, sizeof out);
    if (at == -2) {
        out[nd - 1] = 1;
        out[nd] = shape[nd - 1];
    } else {
        out[nd] = 1;
    }
    return nx_reshape(g, w, nd + 1, out);
}

static nx_status build_adjoint(nx_graph *g, const nx_op_args *c, const void *user, int nout,
                               nx_node *outs)
{
    (void)user, (void)nout;
    const nx_tensor *a = c->in[0];
    nx_dtype dt = nx_tensor_dtype(a);
    int nd = nx_tensor_ndim(a);
    const int64_t *sa = nx_tensor_shape(a);
    nx_node w = nx_input(g, "w", dt, nd - 1, sa);
    nx_node v = nx_input(g, "v", dt, nd, sa);
    nx_node dw = nx_input(g, "dw", dt, nd - 1, sa);
    nx_node dv = nx_input(g, "dv", dt, nd, sa);
    int last = nd - 2; /* w's last axis */
    double eps = dt == NX_DTYPE_F32 ? 1.1920929e-7 : 2.220446049250313e-16;
    nx_node wmax = nx_reduce(g, nx_abs(g, w), 1, &last, NX_MONOID_MAX, true);
    nx_node tol = unsqueeze(g, nx_mul(g, wmax, nx_scalar(g, dt, 1e3 * eps)), -1);
    nx_node diff = nx_sub(g, unsqueeze(g, w, -2), unsqueeze(g, w, -1)); /* w_j - w_i */
    nx_node zero = nx_scalar(g, dt, 0);
    nx_node safe = nx_gt(g, nx_abs(g, diff), tol);
    nx_node f = nx_select(g, safe, nx_div(g, nx_scalar(g, dt, 1),
                                          nx_select(g, safe, diff, nx_scalar(g, dt, 1))),
                          zero);
    nx_node cm = nx_matmul(g, transpose(g, v), dv);
    int64_t sq[NX_MAX_DIMS];
    memcpy(sq, sa, (size_t)nd * sizeof *sq);
    nx_node ii = nx_iota(g, NX_DTYPE_I32, nd, sq, nd - 2);
    nx_node jj = nx_iota(g, NX_DTYPE_I32, nd, sq, nd - 1);
    nx_node diag = nx_eq(g, ii, jj);
    nx_node m = nx_add(g, nx_mul(g, f, cm), nx_select(g, diag, unsqueeze(g, dw, -2), zero));
    nx_node gm = nx_matmul(g, nx_matmul(g, v, m), transpose(g, v));
    nx_node below = nx_add(g, gm, transpose(g, gm));
    outs[0] = nx_select(g, nx_gt(g, ii, jj), below, nx_select(g, diag, gm, zero));
    return nx_graph_status(g);
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    nx_op_args fc = *c;
    fc.dy = NULL;
    nx_program *pf = NULL;
    nx_status st = nx_op_program(&fc, "forward", NULL, build_forward, NULL, 2, &pf);
    if (st != NX_OK)
        return st;
    if (!c->dy)
        return nx_program_run(pf, (const nx_tensor *const[]){c->in[0]}, outs);
    nx_tensor *wv[2] = {NULL, NULL};
    st = nx_program_run(pf, (const nx_tensor *const[]){c->in[0]}, wv);
    nx_program *pa = NULL;
    if (st == NX_OK)
        st = nx_op_program(&fc, "adjoint", NULL, build_adjoint, NULL, 1, &pa);
    if (st == NX_OK)
        st = nx_program_run(pa, (const nx_tensor *const[]){wv[0], wv[1], c->dy[0], c->dy[1]},
                            outs);
    nx_tensor_free(wv[0]);
    nx_tensor_free(wv[1]);
    return st;
}

static const nx_op_opt opts[] = {
    {"n_sweeps", NX_OPT_INT, "(8)", "0:64", 1,
     "cyclic Jacobi sweeps over every pair (p, q) (0: the default, 8)"},
};

static const nx_op_field fields[] = {
    {offsetof(eigh_args, n_sweeps), NX_OP_NO_FIELD, sizeof(int64_t)},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 2e-4, 2e-5},
    {NX_DTYPE_F64, NULL, NULL, 1e-10, 1e-11},
};

const nx_op_desc nx_op_eigh = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(eigh_args),
    .fields = fields,
    .backend_offset = offsetof(eigh_args, backend),
    .check = check,
    .run = run,
    .golden = "linalg",
    .tols = tols,
    .ntols = 2,
};
