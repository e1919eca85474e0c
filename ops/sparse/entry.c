/* What the ELL ops share (semiring_ell_matmul, semiring_ell_rmatvec's scatter driver,
 * ell_row_softmax): index validation before anything runs, then a graph fragment compiled once per
 * key through the op table (nx_op_program: op, semiring, shapes, dtypes, n_cols, identity, backend)
 * and kept in the context's cache. Gradients are autodiff of the same fragment (nx_graph_vjp), so
 * every differentiable algebra has them with no per-algebra code.
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
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cache.h"
#include "ops/sparse/sparse.h"

typedef struct ell_call {
    nx_ell_op op;
    const nx_semiring *sr; /* NULL for the softmax */
    nx_ell a;
    const nx_tensor *x;  /* the dense operand (B, X or the scores) */
    const nx_tensor *dy; /* the cotangent, or NULL for the forward pass */
    bool fold;           /* the index range flag is the program's last output */
} ell_call;

static const nx_ell_args *args_of(const nx_op_args *c)
{
    return c->opts;
}

nx_ell nx_ell_of_call(const nx_op_args *c, nx_ell_op op)
{
    const nx_ell_args *o = args_of(c);
    const nx_tensor *x = c->in[2];
    int nd = x ? nx_tensor_ndim(x) : 0;
    int64_t n_cols = o->n_cols;
    if (op == NX_ELL_MATMUL && !o->typed_call && !o->n_cols_given) /* B's rows (spec: None) */
        n_cols = nd >= 2 ? nx_tensor_shape(x)[nd - 2] : 0;
    /* The softmax never reads the indices' targets: with no ELL given, any n_cols above them */
    if (op == NX_ELL_SOFTMAX && !o->typed_call)
        n_cols = INT64_MAX;
    return (nx_ell){.values = (nx_tensor *)(uintptr_t)c->in[0],
                    .indices = (nx_tensor *)(uintptr_t)c->in[1],
                    .n_cols = n_cols,
                    .identity = o->identity};
}

/* Device indices are checked by the op's program itself (the range flag). */
static bool fold_check(const nx_ell_args *o, const nx_ell *a)
{
    return o->fold || (a->indices && nx_tensor_device(a->indices) != NX_DEVICE_HOST &&
                       nx_tensor_numel(a->indices) > 0);
}

static ell_call call_of(const nx_op_args *c, nx_ell_op op)
{
    ell_call e = {
        .op = op, .a = nx_ell_of_call(c, op), .x = c->in[2], .dy = c->dy ? c->dy[0] : NULL};
    e.sr = op == NX_ELL_SOFTMAX ? NULL : nx_sr_or_real(args_of(c)->semiring);
    e.fold = fold_check(args_of(c), &e.a);
    return e;
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
    case NX_ELL_MATMUL:
        return nx_ell_matmul_node(g, c->sr, v, idx, x);
    case NX_ELL_RMATVEC: {
        /* Pads contribute nothing whatever value they hold. */
        nx_node z = nx_scalar(g, nx_node_dtype(g, v), 0.0);
        nx_node vm = nx_select(g, pad_mask(g, v, c->a.identity), z, v);
        return nx_ell_rmatvec_node(g, vm, idx, x, c->a.n_cols);
    }
    case NX_ELL_SOFTMAX:
        return nx_ell_row_softmax_node(g, x, pad_mask(g, v, c->a.identity));
    }
    return NX_NONE;
}

static nx_status build_op(nx_graph *g, const nx_op_args *oc, const ell_call *c, nx_node v,
                          nx_node idx, nx_node x, nx_node *outs, int *n)
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
                           "%s: the cotangent is %s; expected the result's shape %s", oc->who, a,
                           b);
    }
    nx_node wrt[2] = {v, x};
    *n = 2;
    return nx_graph_vjp(g, 1, &y, &dy, 2, wrt, outs);
}

typedef struct stage {
    const nx_op_args *oc;
    const ell_call *c;
} stage;

static nx_status build(nx_graph *g, const nx_op_args *oc, const void *user, int nout, nx_node *outs)
{
    const ell_call *c = ((const stage *)user)->c;
    nx_node v = input_of(g, "values", c->a.values);
    nx_node idx = input_of(g, "indices", c->a.indices);
    nx_node x = input_of(g, "x", c->x);
    int n = 0;
    nx_status st = build_op(g, oc, c, v, idx, x, outs, &n);
    if (st == NX_OK && c->fold)
        outs[n++] = nx_sparse_range_flag_node(g, idx, c->a.n_cols);
    if (st == NX_OK && n != nout)
        st = nx_rt_error(nx_graph_ctx(g), NX_ERR_INTERNAL, "%s: %d outputs built, %d expected",
                         oc->who, n, nout);
    return st == NX_OK ? nx_graph_status(g) : st;
}

/* What the runner's key does not hold: the effective n_cols and identity (a typed call's come from
 * its ELL), the cotangent's shape and whether the range flag is an output. */
static void stage_key(nx_rt_cache_blob *b, const void *user)
{
    const ell_call *c = ((const stage *)user)->c;
    if (c->sr)
        nx_sr_semiring_key(b, c->sr);
    nx_rt_cache_blob_tensor(b, "dy", c->dy);
    nx_rt_cache_blob_i64(b, "n_cols", c->a.n_cols);
    nx_rt_cache_blob_bytes(b, "identity", &c->a.identity, sizeof c->a.identity);
    nx_rt_cache_blob_i64(b, "range_flag", c->fold);
}

/* ---- checks ----------------------------------------------------------------------------------*/

/* NumPy broadcasting of values' batch dims against the dense operand's. */
static nx_status check_batch(nx_ctx *ctx, const char *who, const char *what, const ell_call *c)
{
    int nv = nx_tensor_ndim(c->a.values) - 2, nx = nx_tensor_ndim(c->x) - 2;
    const int64_t *vs = nx_tensor_shape(c->a.values), *xs = nx_tensor_shape(c->x);
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
    nx_dtype vd = nx_tensor_dtype(c->a.values), xd = nx_tensor_dtype(c->x);
    if (vd != xd)
        return nx_rt_error(ctx, NX_ERR_DTYPE,
                           "%s: the ELL's values are %s but %s is %s; expected one dtype", who,
                           nx_dtype_name(vd), what, nx_dtype_name(xd));
    int nd = nx_tensor_ndim(c->x);
    const int64_t *xs = nx_tensor_shape(c->x), *is = nx_tensor_shape(c->a.indices);
    if (nd < 2)
        return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: %s has %d dims; expected at least 2", who, what,
                           nd);
    int64_t want = c->op == NX_ELL_MATMUL ? c->a.n_cols : is[0];
    int64_t got = xs[nd - 2];
    if (c->op == NX_ELL_SOFTMAX) {
        if (xs[nd - 2] != is[0] || xs[nd - 1] != is[1])
            return nx_rt_error(ctx, NX_ERR_SHAPE,
                               "%s: %s end in [%lld, %lld]; expected the ELL's "
                               "[m, k_max] = [%lld, %lld]",
                               who, what, (long long)xs[nd - 2], (long long)xs[nd - 1],
                               (long long)is[0], (long long)is[1]);
    } else if (got != want) {
        return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: %s has %lld rows; expected %lld (%s)", who, what,
                           (long long)got, (long long)want,
                           c->op == NX_ELL_MATMUL ? "the ELL's n_cols" : "the ELL's m");
    }
    return check_batch(ctx, who, what, c);
}

/* A host backend asked for by name refuses device operands, naming them as the ELL's parts (the
 * runner's placement, which follows, names them by the row's input names). */
static nx_status check_placement(const nx_op_args *oc)
{
    static const char *const names[4] = {"the ELL's values", "the ELL's indices",
                                         "the dense operand", "the cotangent"};
    nx_backend be = args_of(oc)->backend;
    if (be != NX_BACKEND_CPU && be != NX_BACKEND_REF)
        return NX_OK;
    const nx_tensor *in[4] = {oc->in[0], oc->in[1], oc->in[2], oc->dy ? oc->dy[0] : NULL};
    for (int i = 0; i < 4; i++)
        if (in[i] && nx_tensor_device(in[i]) != NX_DEVICE_HOST)
            return nx_rt_error(oc->ctx, NX_ERR_UNSUPPORTED,
                               "%s: %s is a device tensor but the program runs on the '%s' "
                               "backend; expected host tensors, or the cuda backend",
                               oc->who, names[i], nx_backend_name(be));
    return NX_OK;
}

nx_status nx_ell_op_check(const nx_op_args *oc, nx_ell_op op, const char *what)
{
    nx_ctx *ctx = oc->ctx;
    const char *who = oc->who;
    ell_call e = call_of(oc, op);
    const ell_call *c = &e;
    nx_status pst = check_placement(oc);
    if (pst != NX_OK)
        return pst;
    if (oc->dy && c->sr) { /* a forward-only algebra says so first */
        nx_status st = nx_semiring_check_differentiable(ctx, c->sr, who);
        if (st != NX_OK)
            return st;
    }
    nx_status st =
        c->fold ? nx_sparse_check_ell_shapes(ctx, who, &c->a) : nx_ell_check(ctx, who, &c->a);
    if (st == NX_OK)
        st = check_dense(ctx, who, what, c);
    if (st == NX_OK && op == NX_ELL_RMATVEC && c->sr->kind != NX_SEMIRING_REAL)
        st = nx_rt_error(ctx, NX_ERR_UNSUPPORTED,
                         "%s: semiring '%s'; A^T X is defined under 'real' only", who, c->sr->name);
    if (st == NX_OK && oc->dy)
        st = nx_sparse_check_float(ctx, who, "the cotangent", c->dy);
    if (st == NX_OK && oc->dy && nx_tensor_dtype(c->dy) != nx_tensor_dtype(c->x))
        st = nx_rt_error(ctx, NX_ERR_DTYPE, "%s: the cotangent is %s but the operands are %s", who,
                         nx_dtype_name(nx_tensor_dtype(c->dy)),
                         nx_dtype_name(nx_tensor_dtype(c->x)));
    return st;
}

/* ---- the run ---------------------------------------------------------------------------------*/

/* The results of a folded run once its range flag (res[n]) is read: kept in outs when every
 * index was in range, else freed (the caller never sees them) for the error naming the bad one. */
static nx_status settle_folded(nx_ctx *ctx, const char *who, const ell_call *c, nx_tensor **res,
                               int n, nx_tensor **outs)
{
    bool bad = false;
    nx_status st = nx_sparse_flag_bad(res[n], &bad);
    nx_tensor_free(res[n]);
    if (st == NX_OK && bad)
        st = nx_sparse_index_error(ctx, who, c->a.indices, c->a.n_cols);
    for (int i = 0; i < n; i++) {
        if (st != NX_OK)
            nx_tensor_free(res[i]);
        outs[i] = st == NX_OK ? res[i] : NULL;
    }
    return st;
}

nx_status nx_ell_op_run(const nx_op_args *oc, nx_ell_op op, nx_tensor **outs)
{
    static const char *const names[4] = {"the ELL's values", "the ELL's indices",
                                         "the dense operand", "the cotangent"};
    ell_call e = call_of(oc, op);
    const ell_call *c = &e;
    /* With n_cols = 0 every index is out of range (and the IR refuses a gather from an empty
     * axis): the error, before anything is built. */
    if (c->fold && c->a.n_cols == 0 && nx_tensor_numel(c->a.indices) > 0)
        return nx_sparse_index_error(oc->ctx, oc->who, c->a.indices, c->a.n_cols);
    int n = c->dy ? 2 : 1;
    /* The vjp graph is built here (with the range flag beside the gradients), so the stage is
     * asked for as a forward one; its key says vjp through the cotangent's field. */
    nx_op_args fc = *oc;
    fc.dy = NULL;
    static const char *const stages[2][2] = {{"plain", "folded"}, {"plain-vjp", "folded-vjp"}};
    stage s = {.oc = oc, .c = c};
    nx_program *p = NULL;
    nx_status st =
        nx_op_program(&fc, stages[c->dy != NULL][c->fold], stage_key, build, &s, n + c->fold, &p);
    if (st != NX_OK)
        return st;
    const nx_tensor *in[4] = {c->a.values, c->a.indices, c->x, c->dy};
    nx_tensor *res[3] = {NULL, NULL, NULL}, *got[2] = {NULL, NULL};
    st = nx_sparse_run(oc->ctx, oc->who, p, c->dy ? 4 : 3, in, names, res);
    if (st != NX_OK)
        return st;
    if (c->fold)
        st = settle_folded(oc->ctx, oc->who, c, res, n, got);
    else
        got[0] = res[0], got[1] = res[1];
    if (st != NX_OK)
        return st;
    outs[0] = got[0];
    if (c->dy) { /* one gradient per input: values, indices (none), the dense operand */
        outs[1] = NULL;
        outs[2] = got[1];
    }
    return NX_OK;
}

/* ---- typed entry points ----------------------------------------------------------------------*/

nx_ell_args nx_ell_typed_args(const nx_semiring *sr, const nx_ell *a, const nx_semiring_opts *opts)
{
    return (nx_ell_args){.backend = opts ? opts->backend : NX_BACKEND_AUTO,
                         .semiring = sr,
                         .n_cols = a ? a->n_cols : 0,
                         .identity = a ? a->identity : 0.0,
                         .driver_text = opts ? opts->driver : NULL,
                         .typed_call = true};
}

nx_status nx_ell_typed_run(nx_ctx *ctx, const nx_op_desc *d, const char *as, const nx_ell *a,
                           const nx_tensor *x, const nx_tensor *dy, const nx_ell_args *args,
                           nx_tensor **outs)
{
    const nx_op_info *info = nx_op_desc_info(d);
    char who[64];
    snprintf(who, sizeof who, "nx_%s%s", info->name, dy ? "_vjp" : "");
    if (as)
        snprintf(who, sizeof who, "%s", as);
    if (!a)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: the ELL is NULL", who);
    if (!a->values || !a->indices)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: the ELL's %s tensor is NULL", who,
                           a->values ? "indices" : "values");
    if (!x)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %s is NULL", who, info->inputs[2]);
    const nx_tensor *in[3] = {a->values, a->indices, x};
    if (!dy)
        return nx_op_run_as(ctx, d, as, in, args, outs);
    if (!info->differentiable)
        return nx_rt_error(ctx, NX_ERR_UNSUPPORTED, "%s: not differentiable", who);
    nx_tensor *res[3] = {NULL, NULL, NULL};
    nx_status st = nx_op_run_vjp_as(ctx, d, as, in, args, (const nx_tensor *const[]){dy}, res);
    nx_tensor_free(res[1]); /* the indices' (none expected) */
    outs[0] = st == NX_OK ? res[0] : NULL;
    outs[1] = st == NX_OK ? res[2] : NULL;
    if (st != NX_OK)
        nx_tensor_free(res[0]), nx_tensor_free(res[2]);
    return st;
}

nx_status nx_ell_typed_vjp(nx_ctx *ctx, const nx_op_desc *d, const nx_semiring *sr, const nx_ell *a,
                           const nx_tensor *x, const nx_tensor *dy, const nx_semiring_opts *opts,
                           nx_tensor **dvalues, nx_tensor **dx)
{
    if (dvalues)
        *dvalues = NULL;
    if (dx)
        *dx = NULL;
    char who[64];
    snprintf(who, sizeof who, "nx_%s_vjp", nx_op_desc_info(d)->name);
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: ctx is NULL", who);
    if (!sr)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: semiring is NULL", who);
    if (!dy)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: the cotangent is NULL", who);
    nx_ell_args args = nx_ell_typed_args(sr, a, opts);
    nx_tensor *res[2] = {NULL, NULL};
    nx_status st = nx_ell_typed_run(ctx, d, NULL, a, x, dy, &args, res);
    if (st != NX_OK)
        return st;
    if (dvalues)
        *dvalues = res[0];
    else
        nx_tensor_free(res[0]);
    if (dx)
        *dx = res[1];
    else
        nx_tensor_free(res[1]);
    return NX_OK;
}

nx_status nx_sparse_ell_folded(nx_ctx *ctx, const char *op, const nx_semiring *sr, const nx_ell *a,
                               const nx_tensor *x, const nx_tensor *dy,
                               const nx_semiring_opts *opts, nx_tensor **outs)
{
    static const char *who = "nx_sparse_ell_folded";
    if (!outs)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: outs is NULL", who);
    outs[0] = outs[1] = NULL;
    const nx_op_desc *d = strcmp(op, "matmul") == 0    ? &nx_op_semiring_ell_matmul
                          : strcmp(op, "rmatvec") == 0 ? &nx_op_semiring_ell_rmatvec
                                                       : &nx_op_ell_row_softmax;
    if (d != &nx_op_ell_row_softmax && !sr)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: semiring is NULL", who);
    nx_ell_args args = nx_ell_typed_args(sr, a, opts);
    args.fold = true;
    args.driver_text = "scatter"; /* rmatvec: the program, not the host-built transpose */
    return nx_ell_typed_run(ctx, d, who, a, x, dy, &args, outs);
}
