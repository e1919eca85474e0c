/* ELL entry points on tensors: index validation before anything runs, then a graph fragment
 * compiled once per key (op, semiring, shapes, dtypes, n_cols, identity, backend) and kept in the
 * context's cache (nx_program_cached), as the dense semiring entry points do. Gradients are
 * autodiff of the same fragment (nx_graph_vjp), so every differentiable algebra has them with no
 * per-algebra code.
 *
 * Values may carry leading batch dims ([..., m, k_max] over one index matrix) that broadcast
 * against the dense operand's, as NumPy does; the fragment's elementwise ops broadcast them and
 * autodiff sums the cotangents back over broadcast dims. Operands may be CUDA device tensors when
 * the program runs on the cuda backend.
 *
 * Device indices are range-checked inside the op's own program: the range flag
 * (nx_sparse_range_flag_node) is one more output of the same plan, read back (4 bytes) after the
 * run, so a call is one program run instead of a check program, its read-back and then the op's
 * program. Running first is safe: the IR's GATHER clamps indices into range and SCATTER drops
 * out-of-range ones, so no kernel reads or writes out of bounds whatever the indices hold. When
 * the flag is set the results are freed before the caller sees them and the indices come to the
 * host once to name the first bad row and slot (NX_ERR_INVALID_ARG, as the host check says).
 * Host indices are still checked on the host before anything runs. */
#include <string.h>

#include "cache.h"
#include "ops/sparse/sparse.h"

typedef enum ell_op { ELL_MATMUL, ELL_RMATVEC, ELL_SOFTMAX } ell_op;

typedef struct ell_call {
    ell_op op;
    const nx_semiring *sr;
    const nx_ell *a;
    const nx_tensor *x;  /* the dense operand (B, X or the scores) */
    const nx_tensor *dy; /* the cotangent, or NULL for the forward pass */
    bool fold;           /* the index range flag is the program's last output (device indices) */
} ell_call;

/* Device indices are checked by the op's program itself (the range flag). */
static bool fold_check(const nx_ell *a)
{
    return a && a->indices && nx_tensor_device(a->indices) != NX_DEVICE_HOST &&
           nx_tensor_numel(a->indices) > 0;
}

static const char *op_name(const ell_call *c)
{
    static const char *fwd[] = {"ell_matmul", "ell_rmatvec", "ell_row_softmax"};
    static const char *bwd[] = {"ell_matmul_vjp", "ell_rmatvec_vjp", "ell_row_softmax_vjp"};
    return c->dy ? bwd[c->op] : fwd[c->op];
}

static nx_node input_of(nx_graph *g, const char *name, const nx_tensor *t)
{
    return nx_input(g, name, nx_tensor_dtype(t), nx_tensor_ndim(t), nx_tensor_shape(t));
}

/* values == identity marks a pad (NaN identity: none). */
static nx_node pad_mask(nx_graph *g, nx_node values, double identity)
{
    return nx_eq(g, values, nx_scalar(g, nx_node_dtype(g, values), identity));
}

static nx_node forward(nx_graph *g, const ell_call *c, nx_node v, nx_node idx, nx_node x)
{
    switch (c->op) {
    case ELL_MATMUL:
        return nx_ell_matmul_node(g, c->sr, v, idx, x);
    case ELL_RMATVEC: {
        /* Pads contribute nothing whatever value they hold. */
        nx_node z = nx_scalar(g, nx_node_dtype(g, v), 0.0);
        nx_node vm = nx_select(g, pad_mask(g, v, c->a->identity), z, v);
        return nx_ell_rmatvec_node(g, vm, idx, x, c->a->n_cols);
    }
    case ELL_SOFTMAX:
        return nx_ell_row_softmax_node(g, x, pad_mask(g, v, c->a->identity));
    }
    return NX_NONE;
}

static nx_status build_op(nx_graph *g, ell_call *c, nx_node v, nx_node idx, nx_node x,
                          nx_node *outs, int *n)
{
    nx_node y = forward(g, c, v, idx, x);
    if (!c->dy) {
        outs[0] = y;
        *n = 1;
        return nx_graph_status(g);
    }
    nx_node dy = input_of(g, "dy", c->dy);
    if (!y || !dy)
        return nx_graph_status(g);
    int64_t ys[NX_MAX_DIMS];
    nx_node_shape(g, y, ys);
    int nd = nx_node_ndim(g, y);
    if (nd != nx_tensor_ndim(c->dy) || memcmp(ys, nx_tensor_shape(c->dy), (size_t)nd * 8)) {
        char a[96], b[96];
        nx_shape_str(a, sizeof a, nx_tensor_ndim(c->dy), nx_tensor_shape(c->dy));
        nx_shape_str(b, sizeof b, nd, ys);
        return nx_rt_error(nx_graph_ctx(g), NX_ERR_SHAPE,
                           "nx_semiring_%s: the cotangent is %s; expected the result's shape %s",
                           op_name(c), a, b);
    }
    nx_node wrt[2] = {v, x};
    *n = 2;
    return nx_graph_vjp(g, 1, &y, &dy, 2, wrt, outs);
}

static nx_status build(nx_graph *g, void *user, nx_node *outs, int *n)
{
    ell_call *c = user;
    nx_node v = input_of(g, "values", c->a->values);
    nx_node idx = input_of(g, "indices", c->a->indices);
    nx_node x = input_of(g, "x", c->x);
    nx_status st = build_op(g, c, v, idx, x, outs, n);
    if (st == NX_OK && c->fold)
        outs[(*n)++] = nx_sparse_range_flag_node(g, idx, c->a->n_cols);
    return st == NX_OK ? nx_graph_status(g) : st;
}

/* NumPy broadcasting of values' batch dims against the dense operand's. */
static nx_status check_batch(nx_ctx *ctx, const char *who, const char *what, const ell_call *c)
{
    int nv = nx_tensor_ndim(c->a->values) - 2, nx = nx_tensor_ndim(c->x) - 2;
    const int64_t *vs = nx_tensor_shape(c->a->values), *xs = nx_tensor_shape(c->x);
    for (int i = 1; i <= nv && i <= nx; i++) {
        int64_t p = vs[nv - i], q = xs[nx - i];
        if (p != q && p != 1 && q != 1) {
            char a[96], b[96];
            nx_shape_str(a, sizeof a, nv + 2, vs);
            nx_shape_str(b, sizeof b, nx + 2, xs);
            return nx_rt_error(ctx, NX_ERR_SHAPE,
                               "%s: the ELL's values are %s and %s is %s: their leading (batch) "
                               "dims do not broadcast; expected equal extents or 1",
                               who, a, what, b);
        }
    }
    return NX_OK;
}

static nx_status check_dense(nx_ctx *ctx, const char *who, const char *what, const ell_call *c)
{
    nx_status st = nx_sparse_check_float(ctx, who, what, c->x);
    if (st != NX_OK)
        return st;
    nx_dtype vd = nx_tensor_dtype(c->a->values), xd = nx_tensor_dtype(c->x);
    if (vd != xd)
        return nx_rt_error(ctx, NX_ERR_DTYPE,
                           "%s: the ELL's values are %s but %s is %s; expected "
                           "one dtype",
                           who, nx_dtype_name(vd), what, nx_dtype_name(xd));
    int nd = nx_tensor_ndim(c->x);
    const int64_t *xs = nx_tensor_shape(c->x), *is = nx_tensor_shape(c->a->indices);
    if (nd < 2)
        return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: %s has %d dims; expected at least 2", who, what,
                           nd);
    int64_t want = c->op == ELL_MATMUL ? c->a->n_cols : is[0];
    int64_t got = xs[nd - 2];
    if (c->op == ELL_SOFTMAX) {
        if (xs[nd - 2] != is[0] || xs[nd - 1] != is[1])
            return nx_rt_error(ctx, NX_ERR_SHAPE,
                               "%s: %s end in [%lld, %lld]; expected the ELL's "
                               "[m, k_max] = [%lld, %lld]",
                               who, what, (long long)xs[nd - 2], (long long)xs[nd - 1],
                               (long long)is[0], (long long)is[1]);
    } else if (got != want) {
        return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: %s has %lld rows; expected %lld (%s)", who, what,
                           (long long)got, (long long)want,
                           c->op == ELL_MATMUL ? "the ELL's n_cols" : "the ELL's m");
    }
    return check_batch(ctx, who, what, c);
}

static nx_status check_call(nx_ctx *ctx, const char *who, const char *what, const ell_call *c,
                            nx_tensor **out)
{
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: ctx is NULL", who);
    if (out)
        *out = NULL;
    if (c->op != ELL_SOFTMAX && !c->sr)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: semiring is NULL", who);
    nx_status st =
        c->fold ? nx_sparse_check_ell_shapes(ctx, who, c->a) : nx_ell_check(ctx, who, c->a);
    if (st == NX_OK)
        st = check_dense(ctx, who, what, c);
    if (st == NX_OK && c->op == ELL_RMATVEC && c->sr->kind != NX_SEMIRING_REAL)
        st = nx_rt_error(ctx, NX_ERR_UNSUPPORTED,
                         "%s: semiring '%s'; A^T X is defined under "
                         "'real' only",
                         who, c->sr->name);
    if (st == NX_OK && c->dy)
        st = nx_sparse_check_float(ctx, who, "the cotangent", c->dy);
    if (st == NX_OK && c->dy && nx_tensor_dtype(c->dy) != nx_tensor_dtype(c->x))
        st = nx_rt_error(ctx, NX_ERR_DTYPE, "%s: the cotangent is %s but the operands are %s", who,
                         nx_dtype_name(nx_tensor_dtype(c->dy)),
                         nx_dtype_name(nx_tensor_dtype(c->x)));
    if (st == NX_OK && c->dy && c->sr)
        st = nx_semiring_check_differentiable(ctx, c->sr, who);
    return st;
}

static nx_status program_for(nx_ctx *ctx, ell_call *c, nx_backend backend, nx_program **p)
{
    nx_rt_cache_blob key;
    nx_rt_cache_blob_init(&key, ctx);
    nx_rt_cache_blob_str(&key, "op", op_name(c));
    if (c->sr)
        nx_sr_semiring_key(&key, c->sr);
    nx_rt_cache_blob_tensor(&key, "values", c->a->values);
    nx_rt_cache_blob_tensor(&key, "indices", c->a->indices);
    nx_rt_cache_blob_tensor(&key, "x", c->x);
    nx_rt_cache_blob_tensor(&key, "dy", c->dy);
    nx_rt_cache_blob_i64(&key, "n_cols", c->a->n_cols);
    nx_rt_cache_blob_bytes(&key, "identity", &c->a->identity, sizeof c->a->identity);
    nx_rt_cache_blob_i64(&key, "range_flag", c->fold);
    return nx_sparse_program(ctx, &key, "ELL: cache key", backend, build, c, p);
}

/* The results of a folded run once its range flag (res[n]) is read: kept in outs when every
 * index was in range, else freed (the caller never sees them) for the error naming the bad one. */
static nx_status settle_folded(nx_ctx *ctx, const char *who, const ell_call *c, nx_tensor **res,
                               int n, nx_tensor **outs)
{
    bool bad = false;
    nx_status st = nx_sparse_flag_bad(res[n], &bad);
    nx_tensor_free(res[n]);
    if (st == NX_OK && bad)
        st = nx_sparse_index_error(ctx, who, c->a->indices, c->a->n_cols);
    for (int i = 0; i < n; i++) {
        if (st != NX_OK)
            nx_tensor_free(res[i]);
        outs[i] = st == NX_OK ? res[i] : NULL;
    }
    return st;
}

/* Runs c's program; outs gets 1 (forward) or 2 (values' and x's cotangents) tensors. */
static nx_status run_call(nx_ctx *ctx, const char *who, ell_call *c, const nx_semiring_opts *opts,
                          nx_tensor **outs)
{
    static const char *const names[4] = {"the ELL's values", "the ELL's indices",
                                         "the dense operand", "the cotangent"};
    /* With n_cols = 0 every index is out of range (and the IR refuses a gather from an empty
     * axis): the error, before anything is built. */
    if (c->fold && c->a->n_cols == 0 && nx_tensor_numel(c->a->indices) > 0)
        return nx_sparse_index_error(ctx, who, c->a->indices, c->a->n_cols);
    nx_program *p = NULL;
    nx_status st = program_for(ctx, c, opts ? opts->backend : NX_BACKEND_AUTO, &p);
    if (st != NX_OK)
        return st;
    const nx_tensor *in[4] = {c->a->values, c->a->indices, c->x, c->dy};
    int n = c->dy ? 2 : 1;
    if (!c->fold)
        return nx_sparse_run(ctx, who, p, c->dy ? 4 : 3, in, names, outs);
    nx_tensor *res[3] = {NULL, NULL, NULL};
    st = nx_sparse_run(ctx, who, p, c->dy ? 4 : 3, in, names, res);
    return st == NX_OK ? settle_folded(ctx, who, c, res, n, outs) : st;
}

nx_status nx_semiring_ell_matmul(nx_ctx *ctx, const nx_semiring *sr, const nx_ell *a,
                                 const nx_tensor *b, const nx_semiring_opts *opts, nx_tensor **out)
{
    static const char *who = "nx_semiring_ell_matmul";
    ell_call c = {.op = ELL_MATMUL, .sr = sr, .a = a, .x = b, .fold = fold_check(a)};
    if (!out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: out is NULL", who);
    nx_status st = check_call(ctx, who, "B", &c, out);
    return st == NX_OK ? run_call(ctx, who, &c, opts, out) : st;
}

/* The canonical formulation: A^T as an ELL built on the host, then a gather-fold in slot order,
 * so each output element is summed in ascending (i, p) order whatever the backend. */
static nx_status rmatvec_canonical(nx_ctx *ctx, const nx_ell *a, const nx_tensor *x,
                                   const nx_semiring_opts *opts, nx_tensor **out)
{
    static const char *who = "nx_semiring_ell_rmatvec (gather driver: A^T is built on the host)";
    nx_status st = nx_sparse_check_host(ctx, who, "the ELL's values", a->values);
    if (st == NX_OK)
        st = nx_sparse_check_host(ctx, who, "the ELL's indices", a->indices);
    if (st != NX_OK)
        return st;
    nx_ell t;
    st = nx_sparse_transpose(ctx, a, &t);
    if (st != NX_OK)
        return st;
    ell_call c = {.op = ELL_MATMUL, .sr = nx_semiring_builtin(NX_SEMIRING_REAL), .a = &t, .x = x};
    st = run_call(ctx, "nx_semiring_ell_rmatvec", &c, opts, out);
    nx_ell_free(&t);
    return st;
}

nx_status nx_semiring_ell_rmatvec(nx_ctx *ctx, const nx_semiring *sr, const nx_ell *a,
                                  const nx_tensor *x, const nx_semiring_opts *opts, nx_tensor **out)
{
    static const char *who = "nx_semiring_ell_rmatvec";
    ell_call c = {.op = ELL_RMATVEC, .sr = sr, .a = a, .x = x, .fold = fold_check(a)};
    if (!out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: out is NULL", who);
    nx_status st = check_call(ctx, who, "X", &c, out);
    if (st != NX_OK)
        return st;
    const char *variant = NULL;
    st = nx_driver_resolve(ctx, "ell_rmatvec", opts ? opts->driver : NULL, &variant);
    if (st != NX_OK)
        return st;
    if (strcmp(variant, "gather") == 0)
        return rmatvec_canonical(ctx, a, x, opts, out);
    return run_call(ctx, who, &c, opts, out);
}

nx_status nx_ell_row_softmax(nx_ctx *ctx, const nx_ell *a, const nx_tensor *scores,
                             const nx_semiring_opts *opts, nx_tensor **out)
{
    static const char *who = "nx_ell_row_softmax";
    ell_call c = {.op = ELL_SOFTMAX, .a = a, .x = scores, .fold = fold_check(a)};
    if (!out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: out is NULL", who);
    nx_status st = check_call(ctx, who, "the scores", &c, out);
    return st == NX_OK ? run_call(ctx, who, &c, opts, out) : st;
}

static nx_status run_vjp(nx_ctx *ctx, const char *who, ell_call *c, const nx_semiring_opts *opts,
                         nx_tensor **dv, nx_tensor **dx)
{
    if (dv)
        *dv = NULL;
    if (dx)
        *dx = NULL;
    nx_status st = check_call(ctx, who, c->op == ELL_MATMUL ? "B" : "X", c, NULL);
    if (st == NX_OK && !c->dy)
        st = nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: the cotangent is NULL", who);
    nx_tensor *res[2] = {NULL, NULL};
    if (st == NX_OK)
        st = run_call(ctx, who, c, opts, res);
    if (st != NX_OK)
        return st;
    if (dv)
        *dv = res[0];
    else
        nx_tensor_free(res[0]);
    if (dx)
        *dx = res[1];
    else
        nx_tensor_free(res[1]);
    return NX_OK;
}

nx_status nx_semiring_ell_matmul_vjp(nx_ctx *ctx, const nx_semiring *sr, const nx_ell *a,
                                     const nx_tensor *b, const nx_tensor *dc,
                                     const nx_semiring_opts *opts, nx_tensor **dvalues,
                                     nx_tensor **db)
{
    ell_call c = {.op = ELL_MATMUL, .sr = sr, .a = a, .x = b, .dy = dc, .fold = fold_check(a)};
    return run_vjp(ctx, "nx_semiring_ell_matmul_vjp", &c, opts, dvalues, db);
}

nx_status nx_semiring_ell_rmatvec_vjp(nx_ctx *ctx, const nx_semiring *sr, const nx_ell *a,
                                      const nx_tensor *x, const nx_tensor *dy,
                                      const nx_semiring_opts *opts, nx_tensor **dvalues,
                                      nx_tensor **dx)
{
    ell_call c = {.op = ELL_RMATVEC, .sr = sr, .a = a, .x = x, .dy = dy, .fold = fold_check(a)};
    return run_vjp(ctx, "nx_semiring_ell_rmatvec_vjp", &c, opts, dvalues, dx);
}

nx_status nx_sparse_ell_folded(nx_ctx *ctx, const char *op, const nx_semiring *sr, const nx_ell *a,
                               const nx_tensor *x, const nx_tensor *dy,
                               const nx_semiring_opts *opts, nx_tensor **outs)
{
    static const char *who = "nx_sparse_ell_folded";
    ell_op o = strcmp(op, "matmul") == 0    ? ELL_MATMUL
               : strcmp(op, "rmatvec") == 0 ? ELL_RMATVEC
                                            : ELL_SOFTMAX;
    ell_call c = {.op = o, .sr = sr, .a = a, .x = x, .dy = dy, .fold = true};
    if (!outs)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: outs is NULL", who);
    outs[0] = outs[1] = NULL;
    nx_status st = check_call(ctx, who, "the dense operand", &c, NULL);
    return st == NX_OK ? run_call(ctx, who, &c, opts, outs) : st;
}
