/* The geometry family's sampling ops (docs/geometry.md "Sampling") beyond the golden replay and the
 * FD test: closed-form identities (the identity grid reproduces the image for every interpolating
 * method, a uniform velocity integrates to itself, composition with a zero field), the image
 * adjoint as the exact transpose of the sampling and its determinism (cpu equal to the reference
 * interpreter bit for bit, the same on every run), the prefilter's two drivers against each other,
 * the documented non-finite rule with its gradients, and every error path. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nitrix-op.h"
#include "testutil.h"

static uint64_t seed = 0x2545f4914f6cdd1du;

static double uniform(void) /* [0, 1) */
{
    seed = seed * 6364136223846793005u + 1442695040888963407u;
    return (double)(seed >> 11) / 9007199254740992.0;
}

static nx_tensor *tensor(nx_ctx *ctx, nx_dtype dt, int nd, const int64_t *shape)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, dt, nd, shape, &t), NX_OK);
    return t;
}

static double at(const nx_tensor *t, int64_t i)
{
    return nx_tensor_dtype(t) == NX_DTYPE_F64 ? ((const double *)nx_tensor_data(t))[i]
                                              : ((const float *)nx_tensor_data(t))[i];
}

static void set(nx_tensor *t, int64_t i, double v)
{
    if (nx_tensor_dtype(t) == NX_DTYPE_F64)
        ((double *)nx_tensor_data(t))[i] = v;
    else
        ((float *)nx_tensor_data(t))[i] = (float)v;
}

static nx_tensor *random_tensor(nx_ctx *ctx, nx_dtype dt, int nd, const int64_t *shape, double lo,
                                double hi)
{
    nx_tensor *t = tensor(ctx, dt, nd, shape);
    for (int64_t i = 0; i < nx_tensor_numel(t); i++)
        set(t, i, lo + (hi - lo) * uniform());
    return t;
}

static nx_status try_call(nx_ctx *ctx, const char *op, int nin, const nx_tensor *const *in,
                          int nopt, const char *const *keys, const char *const *vals,
                          nx_tensor **y)
{
    return nx_op_call(ctx, op, nin, in, nopt, keys, vals, 1, y);
}

static nx_tensor *call(nx_ctx *ctx, const char *op, int nin, const nx_tensor *const *in, int nopt,
                       const char *const *keys, const char *const *vals)
{
    nx_tensor *y = NULL;
    nx_status st = try_call(ctx, op, nin, in, nopt, keys, vals, &y);
    if (st != NX_OK)
        printf("%s: %s\n", op, nx_ctx_last_error(ctx));
    assert_int_equal(st, NX_OK);
    return y;
}

/* A deformation [*sp, nd] of points spread over [-2, n + 1] per axis (outside included). */
static nx_tensor *points(nx_ctx *ctx, nx_dtype dt, int nd, const int64_t *sp_out,
                         const int64_t *sp_in)
{
    int64_t s[4];
    memcpy(s, sp_out, (size_t)nd * sizeof *s);
    s[nd] = nd;
    nx_tensor *t = tensor(ctx, dt, nd + 1, s);
    for (int64_t i = 0; i < nx_tensor_numel(t); i++)
        set(t, i, -2.0 + (double)(sp_in[i % nd] + 3) * uniform());
    return t;
}

/* spatial_transform(image, identity_grid) is the image for every interpolating method (cubic
 * B-spline through its mirror prefilter, so with mode mirror: the coefficients' extension must be
 * the prefilter's; lanczos and catmull-rom: a unit impulse at integer offsets). */
static void test_identity_grid_reproduces(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    static const char *const methods[] = {"linear", "nearest", "cubic_bspline", "lanczos",
                                          "catmull_rom"};
    int64_t s[4] = {7, 6, 5, 2};
    nx_tensor *img = random_tensor(ctx, NX_DTYPE_F64, 4, s, -1, 1);
    const char *gk[2] = {"spatial_shape", "dtype"}, *gv[2] = {"7,6,5", "float64"};
    nx_tensor *grid = call(ctx, "identity_grid", 0, NULL, 2, gk, gv);
    for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++) {
        const char *k[2] = {"method", "mode"}, *v[2] = {methods[m], "mirror"};
        nx_tensor *y = call(ctx, "spatial_transform", 2, (const nx_tensor *const[]){img, grid}, 2,
                            k, v);
        for (int64_t i = 0; i < nx_tensor_numel(img); i++)
            if (!nx_test_close(at(y, i), at(img, i), 0, 1e-12)) {
                printf("%s: element %lld is %.17g, image %.17g\n", methods[m], (long long)i,
                       at(y, i), at(img, i));
                fail();
            }
        nx_tensor_free(y);
    }
    nx_tensor_free(grid);
    nx_tensor_free(img);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* <dy, S(x)> = <S^T dy, x>: the image's vjp is the exact transpose of the sampling (linear in the
 * image for every differentiable method and mode); in reproducible mode the cpu backend's is the
 * reference interpreter's result bit for bit (the scatter-add folds each target's updates in
 * ascending order there) and the same on a second run. */
static void test_image_adjoint(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    static const char *const methods[] = {"linear", "nearest", "cubic_bspline", "lanczos",
                                          "catmull_rom"};
    static const char *const modes[] = {"constant", "nearest", "wrap", "mirror", "reflect"};
    int64_t s[4] = {6, 5, 4, 2}, so[3] = {5, 4, 6}, si[3] = {6, 5, 4}, ys[4] = {5, 4, 6, 2};
    nx_tensor *img = random_tensor(ctx, NX_DTYPE_F64, 4, s, -1, 1);
    nx_tensor *def = points(ctx, NX_DTYPE_F64, 3, so, si);
    nx_tensor *dy = random_tensor(ctx, NX_DTYPE_F64, 4, ys, -1, 1);
    const nx_tensor *in[2] = {img, def};
    assert_int_equal(nx_ctx_reproducible_push(ctx, true), NX_OK);
    for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++) {
        for (size_t b = 0; b < sizeof modes / sizeof modes[0]; b++) {
            const char *k[4] = {"method", "mode", "cval", "backend"};
            const char *v[4] = {methods[m], modes[b], "0", "cpu"};
            nx_tensor *y = call(ctx, "spatial_transform", 2, in, 4, k, v);
            nx_tensor *dx[2] = {0}, *dx2[2] = {0}, *dref[2] = {0};
            assert_int_equal(nx_op_vjp(ctx, "spatial_transform", 2, in, 4, k, v, 1,
                                       (const nx_tensor *const[]){dy}, dx),
                             NX_OK);
            assert_int_equal(nx_op_vjp(ctx, "spatial_transform", 2, in, 4, k, v, 1,
                                       (const nx_tensor *const[]){dy}, dx2),
                             NX_OK);
            v[3] = "ref";
            assert_int_equal(nx_op_vjp(ctx, "spatial_transform", 2, in, 4, k, v, 1,
                                       (const nx_tensor *const[]){dy}, dref),
                             NX_OK);
            double lhs = 0, rhs = 0, mag = 0;
            for (int64_t i = 0; i < nx_tensor_numel(y); i++)
                lhs += at(dy, i) * at(y, i), mag += fabs(at(dy, i) * at(y, i));
            for (int64_t i = 0; i < nx_tensor_numel(img); i++)
                rhs += at(dx[0], i) * at(img, i);
            if (fabs(lhs - rhs) > 1e-12 * mag) {
                printf("%s/%s: <dy, Sx> = %.17g, <S^T dy, x> = %.17g\n", methods[m], modes[b],
                       lhs, rhs);
                fail();
            }
            size_t bytes = (size_t)nx_tensor_numel(img) * sizeof(double);
            assert_memory_equal(nx_tensor_data(dx[0]), nx_tensor_data(dx2[0]), bytes);
            /* lanczos' weights go through sin: the cpu's vector sin and the interpreter's libm
             * may differ in the last bit, so there the sums agree to rounding only */
            bool exact = strcmp(methods[m], "lanczos") != 0;
            for (int64_t i = 0; i < nx_tensor_numel(img); i++) {
                double a = at(dx[0], i), r = at(dref[0], i);
                if (exact ? a != r : !nx_test_close(a, r, 1e-13, 1e-13)) {
                    printf("%s/%s: image gradient %lld is %.17g on cpu, %.17g on ref\n",
                           methods[m], modes[b], (long long)i, a, r);
                    fail();
                }
            }
            for (int k2 = 0; k2 < 2; k2++) {
                nx_tensor_free(dx[k2]);
                nx_tensor_free(dx2[k2]);
                nx_tensor_free(dref[k2]);
            }
            nx_tensor_free(y);
        }
    }
    assert_int_equal(nx_ctx_reproducible_pop(ctx), NX_OK);
    nx_tensor_free(dy);
    nx_tensor_free(def);
    nx_tensor_free(img);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* The prefilter's drivers on a 24^3 volume: fir within the registry's tolerance of sequential
 * (f64 and f32), and reproducible mode resolving auto to the canonical sequential. */
static void test_prefilter_drivers(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    size_t nrow = 0;
    const nx_divergent_op *rows = nx_divergent_ops(&nrow), *row = NULL;
    for (size_t r = 0; r < nrow; r++)
        if (strcmp(rows[r].op, "geometry.bspline_prefilter") == 0)
            row = &rows[r];
    assert_non_null(row);
    assert_string_equal(row->canonical, "sequential");
    for (int d = 0; d < 2; d++) {
        nx_dtype dt = d ? NX_DTYPE_F32 : NX_DTYPE_F64;
        int64_t s[4] = {24, 24, 24, 1}, so[3] = {20, 20, 20}, si[3] = {24, 24, 24};
        nx_tensor *img = random_tensor(ctx, dt, 4, s, -1, 1);
        nx_tensor *def = points(ctx, dt, 3, so, si);
        const nx_tensor *in[2] = {img, def};
        const char *k[3] = {"method", "mode", "driver"};
        const char *v[3] = {"cubic_bspline", "mirror", "sequential"};
        nx_tensor *yf = NULL, *ys = NULL, *ya = NULL;
        assert_int_equal(nx_ctx_reproducible_push(ctx, true), NX_OK);
        ys = call(ctx, "spatial_transform", 2, in, 3, k, v);
        v[2] = "fir";
        yf = call(ctx, "spatial_transform", 2, in, 3, k, v);
        v[2] = "auto";
        ya = call(ctx, "spatial_transform", 2, in, 3, k, v);
        assert_int_equal(nx_ctx_reproducible_pop(ctx), NX_OK);
        double worst = 0;
        for (int64_t i = 0; i < nx_tensor_numel(ys); i++) {
            double a = at(ys, i), b = at(yf, i);
            worst = fmax(worst, fabs(a - b) / (row->atol + row->rtol * fabs(a)));
        }
        printf("prefilter fir vs sequential (%s): worst |diff| / tol = %.3g\n",
               nx_dtype_name(dt), worst);
        assert_true(worst <= 1.0);
        size_t bytes = (size_t)nx_tensor_numel(ys) * nx_dtype_size(dt);
        assert_memory_equal(nx_tensor_data(ya), nx_tensor_data(ys), bytes);
        nx_tensor_free(ys);
        nx_tensor_free(yf);
        nx_tensor_free(ya);
        nx_tensor_free(def);
        nx_tensor_free(img);
    }
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* A point with a NaN or infinite coordinate samples NaN (every method and mode); the image's
 * gradient stays finite (the point contributes nothing) and the deformation's is 0 there. */
static void test_nonfinite(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    static const char *const methods[] = {"linear", "nearest", "cubic_bspline", "lanczos",
                                          "catmull_rom", "multilabel"};
    int64_t s[3] = {6, 5, 1}, so[2] = {4, 3}, si[2] = {6, 5}, ys[3] = {4, 3, 1};
    nx_tensor *img = random_tensor(ctx, NX_DTYPE_F64, 3, s, -1, 1);
    for (int64_t i = 0; i < 30; i++)
        set(img, i, floor(at(img, i) * 2)); /* labels -2..1 for multilabel */
    nx_tensor *def = points(ctx, NX_DTYPE_F64, 2, so, si);
    set(def, 0, NAN);
    set(def, 5, INFINITY);
    set(def, 8, -INFINITY);
    nx_tensor *dy = random_tensor(ctx, NX_DTYPE_F64, 3, ys, -1, 1);
    const nx_tensor *in[2] = {img, def};
    for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++) {
        const char *k[2] = {"method", "labels"}, *v[2] = {methods[m], "-2,-1,0,1"};
        int nopt = strcmp(methods[m], "multilabel") == 0 ? 2 : 1;
        nx_tensor *y = call(ctx, "spatial_transform", 2, in, nopt, k, v);
        for (int64_t p = 0; p < 12; p++) {
            bool bad = p == 0 || p == 2 || p == 4; /* elements 0, 5, 8 of [4, 3, 2] */
            assert_true(bad ? isnan(at(y, p)) : isfinite(at(y, p)));
        }
        nx_tensor_free(y);
        if (strcmp(methods[m], "multilabel") == 0)
            continue;
        nx_tensor *dx[2] = {0};
        assert_int_equal(nx_op_vjp(ctx, "spatial_transform", 2, in, 1, k, v, 1,
                                   (const nx_tensor *const[]){dy}, dx),
                         NX_OK);
        for (int64_t i = 0; i < nx_tensor_numel(img); i++)
            assert_true(isfinite(at(dx[0], i)));
        for (int64_t i = 0; i < nx_tensor_numel(def); i++) {
            int64_t p = i / 2;
            if (p == 0 || p == 2 || p == 4)
                assert_true(at(dx[1], i) == 0.0);
            else
                assert_true(isfinite(at(dx[1], i)));
        }
        nx_tensor_free(dx[0]);
        nx_tensor_free(dx[1]);
    }
    nx_tensor_free(dy);
    nx_tensor_free(def);
    nx_tensor_free(img);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* A uniform velocity c integrates to the translation c (each squaring doubles a uniform field:
 * exact in binary), n_steps=0 returns v, and composing with a zero field returns the other. */
static void test_field_identities(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t s[4] = {5, 6, 4, 3};
    nx_tensor *v = tensor(ctx, NX_DTYPE_F64, 4, s);
    for (int64_t i = 0; i < nx_tensor_numel(v); i++)
        set(v, i, (double)(i % 3) - 0.75);
    const char *k[1] = {"n_steps"};
    static const char *const steps[] = {"7", "auto", "12"};
    for (int j = 0; j < 3; j++) {
        const char *val[1] = {steps[j]};
        nx_tensor *u = call(ctx, "integrate_velocity_field", 1, (const nx_tensor *const[]){v}, 1,
                            k, val);
        for (int64_t i = 0; i < nx_tensor_numel(v); i++)
            assert_true(at(u, i) == at(v, i));
        nx_tensor_free(u);
    }
    nx_tensor *w = random_tensor(ctx, NX_DTYPE_F64, 4, s, -2, 2);
    const char *zero[1] = {"0"};
    nx_tensor *u0 = call(ctx, "integrate_velocity_field", 1, (const nx_tensor *const[]){w}, 1, k,
                         zero);
    nx_tensor *z = tensor(ctx, NX_DTYPE_F64, 4, s);
    nx_tensor *a = call(ctx, "compose_displacement", 2, (const nx_tensor *const[]){w, z}, 0, NULL,
                        NULL);
    nx_tensor *b = call(ctx, "compose_displacement", 2, (const nx_tensor *const[]){z, w}, 0, NULL,
                        NULL);
    for (int64_t i = 0; i < nx_tensor_numel(w); i++) {
        assert_true(at(u0, i) == at(w, i));
        assert_true(at(a, i) == at(w, i));
        assert_true(at(b, i) == at(w, i));
    }
    nx_tensor_free(a);
    nx_tensor_free(b);
    nx_tensor_free(z);
    nx_tensor_free(u0);
    nx_tensor_free(w);
    nx_tensor_free(v);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void expect_error(nx_ctx *ctx, nx_status want, const char *needle, const char *op, int nin,
                         const nx_tensor *const *in, int nopt, const char *const *k,
                         const char *const *v)
{
    nx_tensor *y = (nx_tensor *)&y;
    nx_status st = try_call(ctx, op, nin, in, nopt, k, v, &y);
    const char *msg = nx_ctx_last_error(ctx);
    if (st != want || !strstr(msg, needle))
        printf("%s: status %d, message '%s'; expected %d with '%s'\n", op, st, msg, want, needle);
    assert_int_equal(st, want);
    assert_non_null(strstr(msg, needle));
    assert_null(y);
}

static void test_errors(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t s3[4] = {6, 5, 4, 1}, d2[3] = {6, 5, 2}, d4[5] = {2, 2, 2, 2, 4}, i4[5] = {2, 2, 2,
                                                                                       2, 1};
    nx_tensor *img = random_tensor(ctx, NX_DTYPE_F64, 4, s3, 0, 1);
    nx_tensor *def2 = random_tensor(ctx, NX_DTYPE_F64, 3, d2, 0, 1);
    int64_t dl[4] = {3, 6, 7, 2}, dd[4] = {6, 5, 4, 3};
    nx_tensor *def_lead = random_tensor(ctx, NX_DTYPE_F64, 4, dl, 0, 1);
    nx_tensor *def = random_tensor(ctx, NX_DTYPE_F64, 4, dd, 0, 1);
    nx_tensor *img4 = random_tensor(ctx, NX_DTYPE_F64, 5, i4, 0, 1);
    nx_tensor *def4 = random_tensor(ctx, NX_DTYPE_F64, 5, d4, 0, 1);
    nx_tensor *def32 = random_tensor(ctx, NX_DTYPE_F32, 4, dd, 0, 1);
    nx_tensor *imgi = tensor(ctx, NX_DTYPE_I32, 4, s3);
    int64_t e[4] = {6, 0, 4, 1};
    nx_tensor *empty = tensor(ctx, NX_DTYPE_F64, 4, e);
    /* the deformation's last axis against the image's spatial rank */
    expect_error(ctx, NX_ERR_SHAPE, "expected image [*lead, *spatial, channels]",
                 "spatial_transform", 2, (const nx_tensor *const[]){img, def2}, 0, NULL, NULL);
    int64_t il[4] = {2, 5, 4, 1};
    nx_tensor *img_lead = random_tensor(ctx, NX_DTYPE_F64, 4, il, 0, 1);
    expect_error(ctx, NX_ERR_SHAPE, "leading axis 0", "spatial_transform", 2,
                 (const nx_tensor *const[]){img_lead, def_lead}, 0, NULL, NULL);
    expect_error(ctx, NX_ERR_SHAPE, "ndim 1..3", "spatial_transform", 2,
                 (const nx_tensor *const[]){img4, def4}, 0, NULL, NULL);
    expect_error(ctx, NX_ERR_DTYPE, "expected one dtype", "spatial_transform", 2,
                 (const nx_tensor *const[]){img, def32}, 0, NULL, NULL);
    expect_error(ctx, NX_ERR_DTYPE, "expected float32 or float64", "spatial_transform", 2,
                 (const nx_tensor *const[]){imgi, def}, 0, NULL, NULL);
    expect_error(ctx, NX_ERR_SHAPE, "empty", "spatial_transform", 2,
                 (const nx_tensor *const[]){empty, def}, 0, NULL, NULL);
    /* unknown method and mode, lanczos order, multilabel's labels and its vjp */
    const char *km[1] = {"method"}, *vm[1] = {"bicubic"};
    expect_error(ctx, NX_ERR_INVALID_ARG, "method", "spatial_transform", 2,
                 (const nx_tensor *const[]){img, def}, 1, km, vm);
    const char *kb[1] = {"mode"}, *vb[1] = {"clamp"};
    expect_error(ctx, NX_ERR_INVALID_ARG, "mode", "spatial_transform", 2,
                 (const nx_tensor *const[]){img, def}, 1, kb, vb);
    const char *ko[2] = {"method", "order"}, *vo[2] = {"lanczos", "9"};
    expect_error(ctx, NX_ERR_INVALID_ARG, "order", "spatial_transform", 2,
                 (const nx_tensor *const[]){img, def}, 2, ko, vo);
    const char *vl[1] = {"multilabel"};
    expect_error(ctx, NX_ERR_INVALID_ARG, "needs labels", "spatial_transform", 2,
                 (const nx_tensor *const[]){img, def}, 1, km, vl);
    const char *kl[2] = {"method", "labels"}, *vll[2] = {"linear", "0,1"};
    expect_error(ctx, NX_ERR_INVALID_ARG, "labels only with method multilabel",
                 "spatial_transform", 2, (const nx_tensor *const[]){img, def}, 2, kl, vll);
    vll[0] = "multilabel";
    nx_tensor *dy = tensor(ctx, NX_DTYPE_F64, 4, dd), *dx[2] = {0};
    nx_tensor *dy1 = tensor(ctx, NX_DTYPE_F64, 4, s3);
    (void)dy;
    assert_int_equal(nx_op_vjp(ctx, "spatial_transform", 2, (const nx_tensor *const[]){img, def},
                               2, kl, vll, 1, (const nx_tensor *const[]){dy1}, dx),
                     NX_ERR_UNSUPPORTED);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "not differentiable"));
    assert_null(dx[0]);
    /* integrate_velocity_field: n_steps out of range, not a number, auto with a non-finite v */
    int64_t vs[3] = {5, 4, 2};
    nx_tensor *v = random_tensor(ctx, NX_DTYPE_F64, 3, vs, -1, 1);
    const char *kn[1] = {"n_steps"};
    static const char *const bad_steps[] = {"21", "-1", "seven", "3.5"};
    for (int j = 0; j < 4; j++) {
        const char *vn[1] = {bad_steps[j]};
        expect_error(ctx, NX_ERR_INVALID_ARG, "expected auto or an integer 0..20",
                     "integrate_velocity_field", 1, (const nx_tensor *const[]){v}, 1, kn, vn);
    }
    set(v, 3, NAN);
    const char *va[1] = {"auto"};
    expect_error(ctx, NX_ERR_INVALID_ARG, "non-finite", "integrate_velocity_field", 1,
                 (const nx_tensor *const[]){v}, 1, kn, va);
    expect_error(ctx, NX_ERR_SHAPE, "displacement field", "integrate_velocity_field", 1,
                 (const nx_tensor *const[]){img}, 0, NULL, NULL);
    expect_error(ctx, NX_ERR_SHAPE, "differ in shape", "compose_displacement", 2,
                 (const nx_tensor *const[]){v, def2}, 0, NULL, NULL);
    /* the other ops' shapes and options */
    int64_t ps[2] = {7, 2};
    nx_tensor *pts = random_tensor(ctx, NX_DTYPE_F64, 2, ps, 0, 3);
    expect_error(ctx, NX_ERR_SHAPE, "expected volume [*spatial]", "sample_at_points", 2,
                 (const nx_tensor *const[]){img, pts}, 0, NULL, NULL);
    const char *kt[1] = {"target_shape"}, *vt[1] = {"4,4"};
    expect_error(ctx, NX_ERR_SHAPE, "target_shape", "resample", 1,
                 (const nx_tensor *const[]){img}, 1, kt, vt);
    int64_t b1[4] = {2, 5, 4, 1}, b2[4] = {3, 5, 4, 2};
    nx_tensor *bi = random_tensor(ctx, NX_DTYPE_F64, 4, b1, 0, 1);
    nx_tensor *bd = random_tensor(ctx, NX_DTYPE_F64, 4, b2, 0, 1);
    expect_error(ctx, NX_ERR_SHAPE, "batch is 2 in image and 3", "spatial_transform_batched", 2,
                 (const nx_tensor *const[]){bi, bd}, 0, NULL, NULL);
    const char *kg[2] = {"spatial_shape", "dtype"}, *vg[2] = {"4,4,4,4", "float64"};
    expect_error(ctx, NX_ERR_INVALID_ARG, "spatial_shape", "identity_grid", 0, NULL, 2, kg, vg);
    vg[0] = "4,4";
    vg[1] = "int32";
    expect_error(ctx, NX_ERR_DTYPE, "float32 or float64", "identity_grid", 0, NULL, 2, kg, vg);
    nx_tensor *list[] = {img_lead, img, def2, def_lead, def, img4, def4, def32, imgi, empty, dy, dy1, v,
                         pts, bi, bd};
    for (size_t j = 0; j < sizeof list / sizeof list[0]; j++)
        nx_tensor_free(list[j]);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identity_grid_reproduces), cmocka_unit_test(test_image_adjoint),
        cmocka_unit_test(test_prefilter_drivers),        cmocka_unit_test(test_nonfinite),
        cmocka_unit_test(test_field_identities),         cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
