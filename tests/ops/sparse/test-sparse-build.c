/* Host-built sparsity against float64 NumPy/scipy (tools/gen-sparse-golden.py): ell_from_dense
 * (top-k by magnitude, ties, symmetrize), ell_to_dense, ell_pad, ell_mask (equal to dropping the
 * edges; EUCLIDEAN refused), self loops, grid stencils against scipy.ndimage.correlate and the grid
 * Laplacian against scipy.ndimage.laplace (nearest, wrap, reflect; 1-3 D), SectionedELL against
 * brute force and against the flat ELL of the same matrix; bad input; allocation sweeps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sparse-test.h"

static void expect_exact(const char *what, const nx_tensor *got, const nx_tensor *want)
{
    assert_int_equal(nx_tensor_ndim(got), nx_tensor_ndim(want));
    for (int i = 0; i < nx_tensor_ndim(got); i++)
        if (nx_tensor_shape(got)[i] != nx_tensor_shape(want)[i])
            fail_msg("%s: dim %d is %lld, expected %lld", what, i,
                     (long long)nx_tensor_shape(got)[i], (long long)nx_tensor_shape(want)[i]);
    for (int64_t i = 0; i < nx_tensor_numel(want); i++)
        if (st_at(got, i) != st_at(want, i))
            fail_msg("%s: element %lld is %.17g, expected %.17g", what, (long long)i, st_at(got, i),
                     st_at(want, i));
}

/* ---- from_dense / to_dense -------------------------------------------------------------------*/

static void from_dense_case(nx_ctx *ctx, nx_backend be, char *const *f, int nf)
{
    (void)be;
    assert_int_equal(nf, 5);
    nx_tensor *d = st_load(ctx, f[1], "dense"), *wv = st_load(ctx, f[1], "values");
    nx_tensor *wi = st_load(ctx, f[1], "indices"), *back = NULL;
    nx_ell_from_dense_opts o = {
        .k_max = atoll(f[2]), .threshold = strtod(f[3], NULL), .symmetrize = atoi(f[4])};
    nx_ell e;
    if (nx_ell_from_dense(ctx, d, &o, &e) != NX_OK)
        fail_msg("%s: %s", f[1], nx_ctx_last_error(ctx));
    assert_int_equal(nx_tensor_dtype(e.indices), NX_DTYPE_I32);
    expect_exact(f[1], e.values, wv);
    expect_exact(f[1], e.indices, wi);
    /* Back to dense: the kept entries, zero elsewhere. */
    assert_int_equal(nx_ell_to_dense(ctx, &e, &back), NX_OK);
    const int64_t *s = nx_tensor_shape(d);
    for (int64_t i = 0; i < s[0]; i++)
        for (int64_t j = 0; j < s[1]; j++) {
            double kept = 0; /* pads hold 0 and index 0: they add nothing */
            int64_t k = nx_tensor_shape(wv)[1];
            for (int64_t p = 0; p < k; p++)
                if (st_at(wi, i * k + p) == j)
                    kept += st_at(wv, i * k + p);
            assert_true(st_at(back, i * s[1] + j) == kept);
        }
    nx_ell_free(&e);
    nx_tensor_free(d), nx_tensor_free(wv), nx_tensor_free(wi), nx_tensor_free(back);
}

static void test_from_dense(void **state)
{
    (void)state;
    assert_int_equal(st_for_cases("from_dense", from_dense_case), 3);
}

static void test_pad_and_to_dense(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    nx_tensor *v = st_mat(ctx, 2, 2, (double[]){1, 2, 3, 4});
    nx_tensor *ix = st_index(ctx, 2, 2, (int64_t[]){0, 0, 2, 1}, NX_DTYPE_I32), *d = NULL;
    nx_ell e;
    assert_int_equal(nx_ell_pad(ctx, v, ix, 4, 3, -1.0, 2, &e), NX_OK);
    assert_int_equal(nx_tensor_shape(e.values)[1], 4);
    st_expect_values("padded values", e.values, (double[]){1, 2, -1, -1, 3, 4, -1, -1}, 8);
    st_expect_values("padded indices", e.indices, (double[]){0, 0, 2, 2, 2, 1, 2, 2}, 8);
    assert_int_equal(nx_tensor_dtype(e.indices), NX_DTYPE_I32);
    /* Repeated columns add; pads (-1) are dropped. */
    assert_int_equal(nx_ell_to_dense(ctx, &e, &d), NX_OK);
    st_expect_values("to_dense", d, (double[]){3, 0, 0, 0, 4, 3}, 6);
    nx_tensor_free(d);
    nx_ell_free(&e);
    /* Refusals: k_max too small, pad index and indices out of range. */
    assert_int_equal(nx_ell_pad(ctx, v, ix, 1, 3, 0, 0, &e), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_ell_pad(ctx, v, ix, 3, 3, 0, 3, &e), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_ell_pad(ctx, v, ix, 3, 2, 0, 0, &e), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "row 1, slot 0"));
    assert_null(e.values);
    nx_tensor_free(v), nx_tensor_free(ix);
    nx_ctx_free(ctx);
}

/* ---- mask ------------------------------------------------------------------------------------*/

/* Masking slots equals building the ELL without those edges, under REAL, LOG and max-plus. */
static void test_mask_drops_edges(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    nx_semiring_opts o = {.backend = st_backend()};
    const nx_semiring_kind kinds[3] = {NX_SEMIRING_REAL, NX_SEMIRING_LOG,
                                       NX_SEMIRING_TROPICAL_MAX_PLUS};
    nx_tensor *b = st_mat(ctx, 3, 2, (double[]){0.5, -1, 2, 0.25, -0.75, 1.5});
    bool valid[6] = {true, false, true, true, false, false};
    int64_t vs[2] = {3, 2};
    nx_tensor *vt = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_BOOL, 2, vs, &vt), NX_OK);
    memcpy(nx_tensor_data(vt), valid, sizeof valid);
    for (int k = 0; k < 3; k++) {
        const nx_semiring *sr = nx_semiring_builtin(kinds[k]);
        nx_semiring_info info;
        nx_semiring_get_info(sr, &info);
        double z = info.identity;
        nx_ell a = st_ell(ctx, 3, 2, 3, (double[]){1, 2, 3, 0.5, -1, 0.2},
                          (int64_t[]){0, 1, 2, 0, 1, 2}, z);
        nx_ell dropped =
            st_ell(ctx, 3, 2, 3, (double[]){1, z, 3, 0.5, z, z}, (int64_t[]){0, 0, 2, 0, 0, 0}, z);
        nx_ell m;
        assert_int_equal(nx_ell_mask(ctx, &a, vt, sr, &m), NX_OK);
        assert_true(m.identity == info.annihilator);
        nx_tensor *c1 = NULL, *c2 = NULL;
        assert_int_equal(nx_semiring_ell_matmul(ctx, sr, &m, b, &o, &c1), NX_OK);
        assert_int_equal(nx_semiring_ell_matmul(ctx, sr, &dropped, b, &o, &c2), NX_OK);
        for (int64_t i = 0; i < 6; i++)
            if (!nx_test_close(st_at(c1, i), st_at(c2, i), 1e-12, 1e-12))
                fail_msg("%s: masked %.17g, dropped %.17g at %lld", info.name, st_at(c1, i),
                         st_at(c2, i), (long long)i);
        nx_tensor_free(c1), nx_tensor_free(c2);
        nx_ell_free(&a), nx_ell_free(&dropped), nx_ell_free(&m);
    }
    nx_ell a = st_ell(ctx, 3, 2, 3, (double[]){1, 2, 3, 4, 5, 6}, (int64_t[]){0, 1, 2, 0, 1, 2}, 0);
    nx_ell m;
    assert_int_equal(nx_ell_mask(ctx, &a, vt, nx_semiring_builtin(NX_SEMIRING_EUCLIDEAN), &m),
                     NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "no annihilator"));
    assert_null(m.values);
    /* valid of the wrong shape or dtype. */
    nx_tensor *wrong = st_mat(ctx, 3, 2, (double[]){1, 1, 1, 1, 1, 1});
    assert_int_equal(nx_ell_mask(ctx, &a, wrong, nx_semiring_builtin(NX_SEMIRING_REAL), &m),
                     NX_ERR_SHAPE);
    nx_tensor_free(wrong), nx_tensor_free(vt), nx_tensor_free(b);
    nx_ell_free(&a);
    nx_ctx_free(ctx);
}

/* ---- self loops ------------------------------------------------------------------------------*/

static void test_self_loops(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    nx_ell a = st_ell(ctx, 3, 2, 3, (double[]){1, 2, 3, 0, 0, 0}, (int64_t[]){1, 2, 0, 0, 0, 0}, 0);
    int64_t as[3] = {3, 2, 2};
    nx_tensor *attr = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 3, as, &attr), NX_OK);
    double av[12] = {1, 10, 3, 30, 5, 50, 7, 70, 9, 90, 11, 110};
    memcpy(nx_tensor_data(attr), av, sizeof av);
    const double want[3][6] = {
        {2, 20, 5, 50, 0, 0}, /* mean: row 0 (1, 3), row 1 (5), row 2 none */
        {0, 0, 0, 0, 0, 0},   /* zero */
        {4, 40, 5, 50, 0, 0}, /* add: sums */
    };
    for (int fill = 0; fill < 3; fill++) {
        nx_ell s;
        nx_tensor *ao = NULL;
        assert_int_equal(nx_ell_add_self_loops(ctx, &a, attr, fill, 2.5, &s, &ao), NX_OK);
        st_expect_values("self loop values", s.values, (double[]){2.5, 1, 2, 2.5, 3, 0, 2.5, 0, 0},
                         9);
        st_expect_values("self loop indices", s.indices, (double[]){0, 1, 2, 1, 0, 0, 2, 0, 0}, 9);
        assert_int_equal(nx_tensor_shape(ao)[1], 3);
        for (int i = 0; i < 3; i++)
            for (int c = 0; c < 2; c++) {
                assert_true(st_at(ao, (i * 3 + 0) * 2 + c) == want[fill][i * 2 + c]);
                assert_true(st_at(ao, (i * 3 + 1) * 2 + c) == av[(i * 2 + 0) * 2 + c]);
            }
        nx_ell_free(&s);
        nx_tensor_free(ao);
    }
    /* Without attributes; a non-square ELL and a bad fill are refused. */
    nx_ell s;
    assert_int_equal(nx_ell_add_self_loops(ctx, &a, NULL, NX_SELF_LOOP_ZERO, 1, &s, NULL), NX_OK);
    nx_ell_free(&s);
    assert_int_equal(nx_ell_add_self_loops(ctx, &a, NULL, 7, 1, &s, NULL), NX_ERR_INVALID_ARG);
    a.n_cols = 4;
    assert_int_equal(nx_ell_add_self_loops(ctx, &a, NULL, NX_SELF_LOOP_ZERO, 1, &s, NULL),
                     NX_ERR_SHAPE);
    nx_tensor_free(attr);
    nx_ell_free(&a);
    nx_ctx_free(ctx);
}

/* ---- grids -----------------------------------------------------------------------------------*/

static nx_grid_boundary boundary_of(const char *mode)
{
    return !strcmp(mode, "nearest") ? NX_GRID_REPLICATE
           : !strcmp(mode, "wrap")  ? NX_GRID_PERIODIC
                                    : NX_GRID_REFLECT;
}

static int parse_shape(const char *s, int64_t *shape)
{
    int n = 0;
    while (*s && n < 4) {
        shape[n++] = strtoll(s, (char **)&s, 10);
        if (*s == ',')
            s++;
    }
    return n;
}

/* y = A x on the grid, x [n] as [n, 1], against want. */
static void apply_grid(nx_ctx *ctx, nx_backend be, const char *name, const nx_ell *a,
                       const nx_tensor *x, const nx_tensor *want)
{
    int64_t n = nx_tensor_numel(x), s2[2] = {n, 1};
    nx_tensor *xc = NULL, *y = NULL;
    assert_int_equal(nx_tensor_reshape(x, 2, s2, &xc), NX_OK);
    nx_semiring_opts o = {.backend = be};
    if (nx_semiring_ell_matmul(ctx, nx_semiring_builtin(NX_SEMIRING_REAL), a, xc, &o, &y) != NX_OK)
        fail_msg("%s: %s", name, nx_ctx_last_error(ctx));
    for (int64_t i = 0; i < n; i++)
        if (!nx_test_close(st_at(y, i), st_at(want, i), 1e-13, 1e-13))
            fail_msg("%s (%s): voxel %lld is %.17g, scipy gives %.17g", name, nx_backend_name(be),
                     (long long)i, st_at(y, i), st_at(want, i));
    nx_tensor_free(xc), nx_tensor_free(y);
}

static void laplace_case(nx_ctx *ctx, nx_backend be, char *const *f, int nf)
{
    assert_int_equal(nf, 5);
    int64_t shape[4];
    int nd = parse_shape(f[4], shape);
    assert_int_equal(nd, atoi(f[3]));
    nx_ell a;
    assert_int_equal(nx_grid_laplacian(ctx, nd, shape, boundary_of(f[2]), 1.0, true, &a), NX_OK);
    nx_tensor *x = st_load(ctx, f[1], "x"), *want = st_load(ctx, f[1], "out");
    apply_grid(ctx, be, f[1], &a, x, want);
    nx_ell_free(&a);
    nx_tensor_free(x), nx_tensor_free(want);
}

static void test_laplace(void **state)
{
    (void)state;
    assert_int_equal(st_for_cases("laplace", laplace_case), 9);
}

static void stencil_case(nx_ctx *ctx, nx_backend be, char *const *f, int nf)
{
    assert_int_equal(nf, 5);
    int64_t shape[4];
    int nd = parse_shape(f[4], shape);
    nx_tensor *x = st_load(ctx, f[1], "x"), *w = st_load(ctx, f[1], "w");
    nx_tensor *want = st_load(ctx, f[1], "out");
    const int64_t *ws = nx_tensor_shape(w);
    int64_t off[64];
    double wt[32];
    int n = 0;
    for (int64_t i = 0; i < ws[0]; i++)
        for (int64_t j = 0; j < ws[1]; j++, n++) {
            off[2 * n] = i - ws[0] / 2;
            off[2 * n + 1] = j - ws[1] / 2;
            wt[n] = st_at(w, i * ws[1] + j);
        }
    nx_ell a;
    assert_int_equal(nx_grid_stencil(ctx, nd, shape, n, off, wt, boundary_of(f[2]), &a), NX_OK);
    apply_grid(ctx, be, f[1], &a, x, want);
    nx_ell_free(&a);
    nx_tensor_free(x), nx_tensor_free(w), nx_tensor_free(want);
}

static void test_stencil(void **state)
{
    (void)state;
    assert_int_equal(st_for_cases("stencil", stencil_case), 3);
}

static void test_grid_identity_and_errors(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    nx_ell a;
    int64_t shape[2] = {2, 3};
    assert_int_equal(nx_grid_identity(ctx, 2, shape, &a), NX_OK);
    nx_tensor *d = NULL;
    assert_int_equal(nx_ell_to_dense(ctx, &a, &d), NX_OK);
    for (int64_t i = 0; i < 6; i++)
        for (int64_t j = 0; j < 6; j++)
            assert_true(st_at(d, i * 6 + j) == (i == j));
    nx_tensor_free(d);
    nx_ell_free(&a);
    int64_t bad[2] = {2, 0};
    assert_int_equal(nx_grid_identity(ctx, 2, bad, &a), NX_ERR_SHAPE);
    assert_int_equal(nx_grid_identity(ctx, 5, shape, &a), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_grid_laplacian(ctx, 2, shape, NX_GRID_BOUNDARY_COUNT, 1, true, &a),
                     NX_ERR_INVALID_ARG);
    assert_int_equal(nx_grid_laplacian(ctx, 2, shape, NX_GRID_REFLECT, 0, true, &a),
                     NX_ERR_INVALID_ARG);
    assert_null(a.values);
    nx_ctx_free(ctx);
}

/* ---- sectioned -------------------------------------------------------------------------------*/

static void flat_of_sectioned(nx_ctx *ctx, nx_tensor *off, nx_tensor *idx, nx_tensor *val,
                              int64_t n_cols, double ident, nx_ell *flat)
{
    int64_t n = nx_tensor_numel(off) - 1, k = 0;
    const int64_t *o = nx_tensor_data(off);
    for (int64_t i = 0; i < n; i++)
        k = o[i + 1] - o[i] > k ? o[i + 1] - o[i] : k;
    nx_tensor *v = NULL, *ix = NULL;
    int64_t s[2] = {n, k};
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 2, s, &v), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_I32, 2, s, &ix), NX_OK);
    for (int64_t i = 0; i < n; i++)
        for (int64_t p = 0; p < k; p++) {
            bool real = p < o[i + 1] - o[i];
            ((double *)nx_tensor_data(v))[i * k + p] = real ? st_at(val, o[i] + p) : ident;
            ((int32_t *)nx_tensor_data(ix))[i * k + p] = real ? (int32_t)st_at(idx, o[i] + p) : 0;
        }
    *flat = (nx_ell){.values = v, .indices = ix, .n_cols = n_cols, .identity = ident};
}

static void sectioned_case(nx_ctx *ctx, nx_backend be, char *const *f, int nf)
{
    assert_int_equal(nf, 5);
    nx_semiring *user = NULL;
    const nx_semiring *sr = st_semiring(ctx, f[2], &user);
    bool rmv = !strcmp(f[0], "sectioned_rmatvec");
    nx_tensor *off = st_load(ctx, f[1], "offsets"), *idx = st_load(ctx, f[1], "indices");
    nx_tensor *val = st_load(ctx, f[1], "values"), *want = st_load(ctx, f[1], "out");
    nx_tensor *x = st_load(ctx, f[1], rmv ? "x" : "b"), *got = NULL, *flat_out = NULL;
    int64_t n_cols = atoll(f[3]);
    double ident = strtod(f[4], NULL);
    nx_sectioned_ell s;
    assert_int_equal(nx_sectioned_ell_from_ragged(ctx, off, idx, val, n_cols, ident, &s), NX_OK);
    assert_true(s.n_sections >= 3);
    for (int k = 0; k < s.n_sections; k++) /* k_max is a power of two, at most twice a degree */
        assert_int_equal(
            __builtin_popcountll((unsigned long long)nx_tensor_shape(s.sections[k].values)[1]), 1);
    nx_semiring_opts o = {.backend = be};
    nx_ell flat;
    flat_of_sectioned(ctx, off, idx, val, n_cols, ident, &flat);
    nx_status st = rmv ? nx_sectioned_ell_rmatvec(ctx, sr, &s, x, &o, &got)
                       : nx_sectioned_ell_matmul(ctx, sr, &s, x, &o, &got);
    if (st != NX_OK)
        fail_msg("%s: %s", f[1], nx_ctx_last_error(ctx));
    st = rmv ? nx_semiring_ell_rmatvec(ctx, sr, &flat, x, &o, &flat_out)
             : nx_semiring_ell_matmul(ctx, sr, &flat, x, &o, &flat_out);
    assert_int_equal(st, NX_OK);
    st_expect_close(f[1], be, got, want, f[2]);
    st_expect_close(f[1], be, got, flat_out, f[2]);
    nx_sectioned_ell_free(&s);
    nx_ell_free(&flat);
    nx_tensor_free(off), nx_tensor_free(idx), nx_tensor_free(val), nx_tensor_free(want);
    nx_tensor_free(x), nx_tensor_free(got), nx_tensor_free(flat_out);
    nx_semiring_free(user);
}

static void test_sectioned(void **state)
{
    (void)state;
    assert_int_equal(st_for_cases("sectioned", sectioned_case), 3);
    assert_int_equal(st_for_cases("sectioned_rmatvec", sectioned_case), 1);
}

static void test_sectioned_errors(void **state)
{
    (void)state;
    nx_ctx *ctx = st_ctx();
    int64_t o3 = 3, n2 = 2;
    nx_tensor *off = NULL, *idx = NULL, *val = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_I64, 1, &o3, &off), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_I64, 1, &n2, &idx), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 1, &n2, &val), NX_OK);
    int64_t *ov = nx_tensor_data(off), *iv = nx_tensor_data(idx);
    ov[0] = 0, ov[1] = 2, ov[2] = 2;
    iv[0] = 0, iv[1] = 5;
    nx_sectioned_ell s;
    assert_int_equal(nx_sectioned_ell_from_ragged(ctx, off, idx, val, 3, 0, &s),
                     NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "index 5 at row 0, slot 1"));
    assert_int_equal(s.n_sections, 0);
    iv[1] = 1;
    ov[1] = 3;
    assert_int_equal(nx_sectioned_ell_from_ragged(ctx, off, idx, val, 3, 0, &s),
                     NX_ERR_INVALID_ARG);
    ov[2] = 1;
    assert_int_equal(nx_sectioned_ell_from_ragged(ctx, off, idx, val, 3, 0, &s),
                     NX_ERR_INVALID_ARG);
    nx_tensor_free(off), nx_tensor_free(idx), nx_tensor_free(val);
    nx_ctx_free(ctx);
}

/* ---- allocation sweeps -----------------------------------------------------------------------*/

static nx_status sweep_body(nx_ctx *ctx, void *user)
{
    (void)user;
    nx_ell a = {0}, b = {0}, c = {0}, g = {0};
    nx_tensor *d = NULL, *valid = NULL, *back = NULL, *attr = NULL, *ao = NULL;
    nx_sectioned_ell s = {0};
    nx_tensor *off = NULL, *idx = NULL, *val = NULL, *x = NULL, *y = NULL;
    int64_t sh[2] = {3, 3}, n4 = 4, n3 = 3, as[3] = {3, 3, 1};
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F64, 2, sh, &d);
    if (st == NX_OK) {
        double *dv = nx_tensor_data(d);
        for (int i = 0; i < 9; i++)
            dv[i] = (i % 4) ? i : 0;
        nx_ell_from_dense_opts o = {.k_max = 2, .symmetrize = true};
        st = nx_ell_from_dense(ctx, d, &o, &a);
    }
    if (st == NX_OK)
        st = nx_ell_to_dense(ctx, &a, &back);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_BOOL, 2, nx_tensor_shape(a.values), &valid);
    if (st == NX_OK)
        st = nx_ell_mask(ctx, &a, valid, nx_semiring_builtin(NX_SEMIRING_LOG), &b);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F64, 3, as, &attr);
    if (st == NX_OK && nx_tensor_shape(a.values)[1] == 3)
        st = nx_ell_add_self_loops(ctx, &a, attr, NX_SELF_LOOP_MEAN, 1, &c, &ao);
    if (st == NX_OK)
        st = nx_grid_laplacian(ctx, 2, sh, NX_GRID_REFLECT, 1, true, &g);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_I64, 1, &n4, &off);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_I32, 1, &n3, &idx);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F64, 1, &n3, &val);
    if (st == NX_OK) {
        int64_t *ov = nx_tensor_data(off);
        ov[0] = 0, ov[1] = 0, ov[2] = 1, ov[3] = 3;
        st = nx_sectioned_ell_from_ragged(ctx, off, idx, val, 3, 0, &s);
    }
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F64, 2, sh, &x);
    nx_semiring_opts o = {.backend = NX_BACKEND_REF};
    if (st == NX_OK)
        st = nx_sectioned_ell_matmul(ctx, nx_semiring_builtin(NX_SEMIRING_REAL), &s, x, &o, &y);
    nx_ell_free(&a), nx_ell_free(&b), nx_ell_free(&c), nx_ell_free(&g);
    nx_sectioned_ell_free(&s);
    nx_tensor_free(d), nx_tensor_free(valid), nx_tensor_free(back), nx_tensor_free(attr);
    nx_tensor_free(ao), nx_tensor_free(off), nx_tensor_free(idx), nx_tensor_free(val);
    nx_tensor_free(x), nx_tensor_free(y);
    return st;
}

static void test_alloc_sweep(void **state)
{
    (void)state;
    assert_true(nx_test_alloc_sweep(sweep_body, NULL, 20000) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_from_dense),
        cmocka_unit_test(test_pad_and_to_dense),
        cmocka_unit_test(test_mask_drops_edges),
        cmocka_unit_test(test_self_loops),
        cmocka_unit_test(test_laplace),
        cmocka_unit_test(test_stencil),
        cmocka_unit_test(test_grid_identity_and_errors),
        cmocka_unit_test(test_sectioned),
        cmocka_unit_test(test_sectioned_errors),
        cmocka_unit_test(test_alloc_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
