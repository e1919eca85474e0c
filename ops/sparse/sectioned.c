/* SectionedELL: a matrix with very uneven row degrees split into plain ELLs of rows with close
 * degrees, so no row carries more than twice its degree in pads (a flat ELL pads every row to the
 * largest degree). Row i goes to bucket b = ceil(log2(max(degree, 1))) with k_max = 2^b. The
 * contractions run the flat entry points per section and place (matmul) or add (rmatvec) the
 * results; each output row of the matmul is folded in the same slot order as the flat ELL.
 * Gradients run the flat VJPs per section: the dense operand's cotangents add up over sections
 * and the values' go back to their places in the ragged (CSR) arrays, which the copy of the
 * offsets kept by the SectionedELL locates. */
#include <string.h>

#include "ops/sparse/sparse.h"

static int bucket_of(int64_t deg)
{
    int b = 0;
    while (((int64_t)1 << b) < deg)
        b++;
    return b;
}

void nx_sectioned_ell_free(nx_sectioned_ell *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n_sections; i++) {
        nx_ell_free(&s->sections[i]);
        nx_tensor_free(s->rows[i]);
    }
    nx_tensor_free(s->offsets);
    memset(s, 0, sizeof *s);
}

static nx_status check_ragged(nx_ctx *ctx, const char *who, const nx_tensor *offsets,
                              const nx_tensor *indices, const nx_tensor *values, int64_t n_cols)
{
    if (!offsets || !indices || !values)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %s is NULL", who,
                           !offsets   ? "offsets"
                           : !indices ? "indices"
                                      : "values");
    nx_status st = nx_sparse_check_host(ctx, who, "offsets", offsets);
    if (st == NX_OK)
        st = nx_sparse_check_host(ctx, who, "indices", indices);
    if (st == NX_OK)
        st = nx_sparse_check_host(ctx, who, "values", values);
    if (st != NX_OK)
        return st;
    if (nx_tensor_dtype(offsets) != NX_DTYPE_I64 || nx_tensor_ndim(offsets) != 1 ||
        nx_tensor_shape(offsets)[0] < 1)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: offsets must be i64 [n_rows + 1]", who);
    st = nx_sr_check_float(ctx, who, "values", values);
    if (st != NX_OK)
        return st;
    nx_dtype id = nx_tensor_dtype(indices);
    if (id != NX_DTYPE_I32 && id != NX_DTYPE_I64)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: indices are %s; expected i32 or i64", who,
                           nx_dtype_name(id));
    if (nx_tensor_ndim(indices) != 1 || nx_tensor_ndim(values) != 1 ||
        nx_tensor_shape(indices)[0] != nx_tensor_shape(values)[0])
        return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: indices and values must be 1-D of one length",
                           who);
    if (n_cols < 0)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: n_cols %lld; expected >= 0", who,
                           (long long)n_cols);
    int64_t n = nx_tensor_shape(offsets)[0] - 1, nnz = nx_tensor_shape(values)[0];
    const int64_t *o = nx_tensor_data(offsets);
    int64_t so = nx_tensor_strides(offsets)[0];
    if (o[0] != 0 || o[n * so] != nnz)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: offsets run from %lld to %lld; expected "
                           "0 to nnz = %lld",
                           who, (long long)o[0], (long long)o[n * so], (long long)nnz);
    for (int64_t i = 0; i < n; i++)
        if (o[(i + 1) * so] < o[i * so])
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: offsets decrease at row %lld", who,
                               (long long)i);
    return NX_OK;
}

static double get1(const nx_tensor *t, int64_t i)
{
    int64_t o = i * nx_tensor_strides(t)[0];
    switch (nx_tensor_dtype(t)) {
    case NX_DTYPE_F32:
        return ((const float *)nx_tensor_data(t))[o];
    case NX_DTYPE_F64:
        return ((const double *)nx_tensor_data(t))[o];
    case NX_DTYPE_I32:
        return ((const int32_t *)nx_tensor_data(t))[o];
    default:
        return (double)((const int64_t *)nx_tensor_data(t))[o];
    }
}

static int64_t off_at(const nx_tensor *o, int64_t i)
{
    return ((const int64_t *)nx_tensor_data(o))[i * nx_tensor_strides(o)[0]];
}

/* Builds section s (bucket b, rows listed in members[0..count)). */
static nx_status build_section(nx_ctx *ctx, const nx_tensor *offsets, const nx_tensor *indices,
                               const nx_tensor *values, int b, int64_t count, nx_sectioned_ell *out)
{
    int s = out->n_sections;
    int64_t k = (int64_t)1 << b, n = nx_tensor_shape(offsets)[0] - 1;
    nx_ell *e = &out->sections[s];
    nx_status st = nx_sparse_new2(ctx, nx_tensor_dtype(values), count, k, &e->values);
    if (st == NX_OK)
        st = nx_sparse_new2(ctx, nx_tensor_dtype(indices), count, k, &e->indices);
    int64_t rs = count;
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_I64, 1, &rs, &out->rows[s]);
    out->n_sections++; /* so a failure frees what was made */
    if (st != NX_OK)
        return st;
    e->n_cols = out->n_cols;
    e->identity = out->identity;
    int64_t *rows = nx_tensor_data(out->rows[s]), r = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t lo = off_at(offsets, i), deg = off_at(offsets, i + 1) - lo;
        if (bucket_of(deg) != b)
            continue;
        rows[r] = i;
        for (int64_t p = 0; p < k; p++) {
            nx_sparse_set(e->values, r, p, p < deg ? get1(values, lo + p) : out->identity);
            nx_sparse_set_index(e->indices, r, p, p < deg ? (int64_t)get1(indices, lo + p) : 0);
        }
        r++;
    }
    return nx_ell_check(ctx, "nx_sectioned_ell_from_ragged", e);
}

nx_status nx_sectioned_ell_from_ragged(nx_ctx *ctx, const nx_tensor *offsets,
                                       const nx_tensor *indices, const nx_tensor *values,
                                       int64_t n_cols, double identity, nx_sectioned_ell *out)
{
    static const char *who = "nx_sectioned_ell_from_ragged";
    if (!out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: out is NULL", who);
    memset(out, 0, sizeof *out);
    nx_status st = check_ragged(ctx, who, offsets, indices, values, n_cols);
    if (st != NX_OK)
        return st;
    int64_t n = nx_tensor_shape(offsets)[0] - 1, count[NX_SECTIONED_MAX] = {0};
    for (int64_t i = 0; i < n; i++)
        count[bucket_of(off_at(offsets, i + 1) - off_at(offsets, i))]++;
    out->n_rows = n;
    out->n_cols = n_cols;
    out->nnz = nx_tensor_shape(values)[0];
    out->identity = identity;
    st = nx_tensor_copy(offsets, &out->offsets);
    for (int b = 0; b < NX_SECTIONED_MAX && st == NX_OK; b++)
        if (count[b])
            st = build_section(ctx, offsets, indices, values, b, count[b], out);
    if (st != NX_OK)
        nx_sectioned_ell_free(out);
    return st;
}

static nx_status check_sectioned(nx_ctx *ctx, const char *who, const nx_semiring *sr,
                                 const nx_sectioned_ell *a, const nx_tensor *x, int64_t rows,
                                 nx_tensor **out)
{
    if (!out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: out is NULL", who);
    *out = NULL;
    if (!a || !sr)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %s is NULL", who,
                           a ? "semiring" : "the SectionedELL");
    nx_status st = nx_sr_check_float(ctx, who, "the dense operand", x);
    if (st == NX_OK)
        st = nx_sparse_check_host(ctx, who, "the dense operand", x);
    if (st != NX_OK)
        return st;
    int nd = nx_tensor_ndim(x);
    if (nd < 2 || nx_tensor_shape(x)[nd - 2] != rows)
        return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: the dense operand must be [..., %lld, c]", who,
                           (long long)rows);
    if (a->n_sections > 0 && nx_tensor_dtype(x) != nx_tensor_dtype(a->sections[0].values))
        return nx_rt_error(ctx, NX_ERR_DTYPE, "%s: the dense operand is %s but the values are %s",
                           who, nx_dtype_name(nx_tensor_dtype(x)),
                           nx_dtype_name(nx_tensor_dtype(a->sections[0].values)));
    return NX_OK;
}

/* A new tensor of x's dtype and shape with rows (axis -2) rows. */
static nx_status new_rows(nx_ctx *ctx, const nx_tensor *x, int64_t rows, nx_tensor **out)
{
    int nd = nx_tensor_ndim(x);
    int64_t shape[NX_MAX_DIMS];
    memcpy(shape, nx_tensor_shape(x), (size_t)nd * sizeof *shape);
    shape[nd - 2] = rows;
    return nx_tensor_new(ctx, nx_tensor_dtype(x), nd, shape, out);
}

/* Row r of every batch of src (contiguous [..., m, c]) to row rows[r] (rows NULL: r) of dst
 * (contiguous [..., R, c], the same batch), stored or added. */
static void place_rows(nx_tensor *dst, const nx_tensor *src, const nx_tensor *rows, bool add)
{
    int nd = nx_tensor_ndim(src);
    int64_t m = nx_tensor_shape(src)[nd - 2], c = nx_tensor_shape(src)[nd - 1];
    int64_t big = nx_tensor_shape(dst)[nd - 2],
            batch = m * c != 0 ? nx_tensor_numel(src) / (m * c) : 0;
    const int64_t *to = rows ? nx_tensor_data(rows) : NULL;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t r = 0; r < m; r++)
            for (int64_t j = 0; j < c; j++) {
                int64_t o = (b * big + (to ? to[r] : r)) * c + j;
                double v = nx_sparse_flat_get(src, (b * m + r) * c + j);
                nx_sparse_flat_set(dst, o, add ? nx_sparse_flat_get(dst, o) + v : v);
            }
}

/* Rows rows[0..m) (axis -2) of every batch of x (host, any strides) as a new [..., m, c]. */
static nx_status take_rows(nx_ctx *ctx, const nx_tensor *x, const nx_tensor *rows, nx_tensor **out)
{
    int nd = nx_tensor_ndim(x);
    int64_t m = nx_tensor_shape(rows)[0], big = nx_tensor_shape(x)[nd - 2];
    int64_t c = nx_tensor_shape(x)[nd - 1],
            batch = big * c != 0 ? nx_tensor_numel(x) / (big * c) : 0;
    const int64_t *r = nx_tensor_data(rows);
    nx_tensor *xc = NULL;
    nx_status st = nx_tensor_contiguous(x, &xc);
    if (st == NX_OK)
        st = new_rows(ctx, x, m, out);
    for (int64_t b = 0; st == NX_OK && b < batch; b++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < c; j++)
                nx_sparse_flat_set(*out, (b * m + i) * c + j,
                                   nx_sparse_flat_get(xc, (b * big + r[i]) * c + j));
    nx_tensor_free(xc);
    return st;
}

nx_status nx_sectioned_ell_matmul(nx_ctx *ctx, const nx_semiring *sr, const nx_sectioned_ell *a,
                                  const nx_tensor *b, const nx_semiring_opts *opts, nx_tensor **out)
{
    static const char *who = "nx_sectioned_ell_matmul";
    nx_status st = check_sectioned(ctx, who, sr, a, b, a ? a->n_cols : 0, out);
    if (st != NX_OK)
        return st;
    nx_tensor *y = NULL;
    if ((st = new_rows(ctx, b, a->n_rows, &y)) != NX_OK)
        return st;
    for (int s = 0; s < a->n_sections && st == NX_OK; s++) {
        nx_tensor *ys = NULL;
        st = nx_semiring_ell_matmul(ctx, sr, &a->sections[s], b, opts, &ys);
        if (st == NX_OK)
            place_rows(y, ys, a->rows[s], false);
        nx_tensor_free(ys);
    }
    if (st != NX_OK) {
        nx_tensor_free(y);
        return st;
    }
    *out = y;
    return NX_OK;
}

nx_status nx_sectioned_ell_rmatvec(nx_ctx *ctx, const nx_semiring *sr, const nx_sectioned_ell *a,
                                   const nx_tensor *x, const nx_semiring_opts *opts,
                                   nx_tensor **out)
{
    static const char *who = "nx_sectioned_ell_rmatvec";
    nx_status st = check_sectioned(ctx, who, sr, a, x, a ? a->n_rows : 0, out);
    if (st != NX_OK)
        return st;
    nx_tensor *y = NULL;
    if ((st = new_rows(ctx, x, a->n_cols, &y)) != NX_OK)
        return st;
    for (int s = 0; s < a->n_sections && st == NX_OK; s++) {
        nx_tensor *xs = NULL, *ys = NULL;
        st = take_rows(ctx, x, a->rows[s], &xs);
        if (st == NX_OK)
            st = nx_semiring_ell_rmatvec(ctx, sr, &a->sections[s], xs, opts, &ys);
        if (st == NX_OK)
            place_rows(y, ys, NULL, true);
        nx_tensor_free(xs), nx_tensor_free(ys);
    }
    if (st != NX_OK) {
        nx_tensor_free(y);
        return st;
    }
    *out = y;
    return NX_OK;
}

/* ---- gradients -------------------------------------------------------------------------------*/

typedef struct sec_vjp {
    const char *who;
    const nx_semiring *sr;
    const nx_sectioned_ell *a;
    const nx_tensor *x, *dy; /* the dense operand and the result's cotangent */
    bool rmatvec;
    const nx_semiring_opts *opts;
    nx_tensor *dv, *dx; /* [nnz] and x's shape, made here */
} sec_vjp;

/* Section s's value cotangents [m_s, k_s] to their ragged places: row r's slot p < degree is
 * entry offsets[rows[r]] + p. */
static void place_values(sec_vjp *v, int s, const nx_tensor *dvs)
{
    const int64_t *rows = nx_tensor_data(v->a->rows[s]), *off = nx_tensor_data(v->a->offsets);
    int64_t m = nx_tensor_shape(dvs)[0];
    for (int64_t r = 0; r < m; r++) {
        int64_t lo = off[rows[r]], deg = off[rows[r] + 1] - lo;
        for (int64_t p = 0; p < deg; p++) {
            double g = nx_sparse_get(dvs, r, p);
            if (nx_tensor_dtype(v->dv) == NX_DTYPE_F32)
                ((float *)nx_tensor_data(v->dv))[lo + p] = (float)g;
            else
                ((double *)nx_tensor_data(v->dv))[lo + p] = g;
        }
    }
}

/* One section: matmul's cotangent rows of the section (dC[rows]) against all of B, adding into
 * dB; rmatvec's operand rows (X[rows]) against all of dY, placing dX[rows]. */
static nx_status section_vjp(nx_ctx *ctx, sec_vjp *v, int s)
{
    const nx_ell *e = &v->a->sections[s];
    const nx_tensor *by_rows = v->rmatvec ? v->x : v->dy;
    nx_tensor *part = NULL, *dvs = NULL, *dxs = NULL;
    nx_status st = take_rows(ctx, by_rows, v->a->rows[s], &part);
    if (st == NX_OK && v->rmatvec)
        st = nx_semiring_ell_rmatvec_vjp(ctx, v->sr, e, part, v->dy, v->opts, &dvs, &dxs);
    else if (st == NX_OK)
        st = nx_semiring_ell_matmul_vjp(ctx, v->sr, e, v->x, part, v->opts, &dvs, &dxs);
    if (st == NX_OK) {
        place_values(v, s, dvs);
        place_rows(v->dx, dxs, v->rmatvec ? v->a->rows[s] : NULL, !v->rmatvec);
    }
    nx_tensor_free(part), nx_tensor_free(dvs), nx_tensor_free(dxs);
    return st;
}

static nx_status check_vjp(nx_ctx *ctx, sec_vjp *v)
{
    int64_t rows_in = v->rmatvec ? (v->a ? v->a->n_rows : 0) : (v->a ? v->a->n_cols : 0);
    int64_t rows_out = v->rmatvec ? (v->a ? v->a->n_cols : 0) : (v->a ? v->a->n_rows : 0);
    nx_tensor *unused = NULL;
    nx_status st = check_sectioned(ctx, v->who, v->sr, v->a, v->x, rows_in, &unused);
    if (st != NX_OK)
        return st;
    if (!v->dy)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: the cotangent is NULL", v->who);
    if ((st = nx_sparse_check_host(ctx, v->who, "the cotangent", v->dy)) != NX_OK)
        return st;
    int nd = nx_tensor_ndim(v->x);
    int64_t want[NX_MAX_DIMS];
    memcpy(want, nx_tensor_shape(v->x), (size_t)nd * sizeof *want);
    want[nd - 2] = rows_out;
    if (nx_tensor_dtype(v->dy) != nx_tensor_dtype(v->x) || nx_tensor_ndim(v->dy) != nd ||
        memcmp(nx_tensor_shape(v->dy), want, (size_t)nd * sizeof *want)) {
        char w[96];
        nx_shape_str(w, sizeof w, nd, want);
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "%s: the cotangent must be %s %s (the result's dtype and shape)", v->who,
                           nx_dtype_name(nx_tensor_dtype(v->x)), w);
    }
    if (v->rmatvec && v->sr->kind != NX_SEMIRING_REAL)
        return nx_rt_error(ctx, NX_ERR_UNSUPPORTED,
                           "%s: semiring '%s'; A^T X is defined under 'real' only", v->who,
                           v->sr->name);
    return nx_semiring_check_differentiable(ctx, v->sr, v->who);
}

static nx_status run_sectioned_vjp(nx_ctx *ctx, sec_vjp *v, nx_tensor **dvalues, nx_tensor **dx)
{
    if (dvalues)
        *dvalues = NULL;
    if (dx)
        *dx = NULL;
    nx_status st = check_vjp(ctx, v);
    if (st != NX_OK)
        return st;
    int64_t nnz = v->a->nnz;
    st = nx_tensor_new(ctx, nx_tensor_dtype(v->x), 1, &nnz, &v->dv);
    if (st == NX_OK)
        st = new_rows(ctx, v->x, nx_tensor_shape(v->x)[nx_tensor_ndim(v->x) - 2], &v->dx);
    for (int s = 0; st == NX_OK && s < v->a->n_sections; s++)
        st = section_vjp(ctx, v, s);
    if (st != NX_OK || !dvalues)
        nx_tensor_free(v->dv);
    if (st != NX_OK || !dx)
        nx_tensor_free(v->dx);
    if (st == NX_OK && dvalues)
        *dvalues = v->dv;
    if (st == NX_OK && dx)
        *dx = v->dx;
    return st;
}

nx_status nx_sectioned_ell_matmul_vjp(nx_ctx *ctx, const nx_semiring *sr, const nx_sectioned_ell *a,
                                      const nx_tensor *b, const nx_tensor *dc,
                                      const nx_semiring_opts *opts, nx_tensor **dvalues,
                                      nx_tensor **db)
{
    sec_vjp v = {
        .who = "nx_sectioned_ell_matmul_vjp", .sr = sr, .a = a, .x = b, .dy = dc, .opts = opts};
    return run_sectioned_vjp(ctx, &v, dvalues, db);
}

nx_status nx_sectioned_ell_rmatvec_vjp(nx_ctx *ctx, const nx_semiring *sr,
                                       const nx_sectioned_ell *a, const nx_tensor *x,
                                       const nx_tensor *dy, const nx_semiring_opts *opts,
                                       nx_tensor **dvalues, nx_tensor **dx)
{
    sec_vjp v = {.who = "nx_sectioned_ell_rmatvec_vjp",
                 .sr = sr,
                 .a = a,
                 .x = x,
                 .dy = dy,
                 .rmatvec = true,
                 .opts = opts};
    return run_sectioned_vjp(ctx, &v, dvalues, dx);
}

/* ---- the ops' run (sectioned-semiring-ell-matmul.c, sectioned-semiring-ell-rmatvec.c) ---------*/

nx_status nx_sectioned_op_run(const nx_op_args *c, bool rmatvec, nx_tensor **outs)
{
    const nx_sectioned_args *o = c->opts;
    const nx_semiring *sr = nx_sr_or_real(o->semiring);
    const nx_tensor *x = c->in[3];
    int nd = nx_tensor_ndim(x);
    int64_t n_cols = o->n_cols;
    if (!rmatvec && !o->n_cols_given)
        n_cols = nd >= 2 ? nx_tensor_shape(x)[nd - 2] : 0;
    nx_semiring_info info;
    nx_semiring_get_info(sr, &info);
    nx_sectioned_ell s;
    nx_status st = nx_sectioned_ell_from_ragged(c->ctx, c->in[0], c->in[1], c->in[2], n_cols,
                                                info.identity, &s);
    if (st != NX_OK)
        return st;
    nx_semiring_opts so = {.backend = c->backend};
    if (!c->dy && rmatvec)
        st = nx_sectioned_ell_rmatvec(c->ctx, sr, &s, x, &so, &outs[0]);
    else if (!c->dy)
        st = nx_sectioned_ell_matmul(c->ctx, sr, &s, x, &so, &outs[0]);
    else if (rmatvec)
        st = nx_sectioned_ell_rmatvec_vjp(c->ctx, sr, &s, x, c->dy[0], &so, &outs[2], &outs[3]);
    else
        st = nx_sectioned_ell_matmul_vjp(c->ctx, sr, &s, x, c->dy[0], &so, &outs[2], &outs[3]);
    if (c->dy)
        outs[0] = outs[1] = NULL; /* offsets and indices carry none */
    nx_sectioned_ell_free(&s);
    return st;
}
