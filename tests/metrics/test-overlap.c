/* The overlap and classification-evaluation metrics beyond the golden replay (which compares them
 * with NumPy, SciPy's MONAI reimplementation and scikit-learn): closed-form identities (jaccard =
 * dice / (2 - dice), dice's gradient against its quotient-rule closed form, a shifted segment's
 * surface distances, AUC of separated, reversed and tied scores, k = C top-k), the documented
 * results of degenerate input (empty regions and surfaces, a single-class label set, NaN scores,
 * empty label arrays), every bad input with its message, and the allocation-failure sweep of the
 * multi-program runs. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nitrix-op.h"
#include "testutil.h"

static nx_test_alloc g_ta;

static nx_ctx *ctx_new(void)
{
    memset(&g_ta, 0, sizeof g_ta);
    return nx_test_ctx(&g_ta);
}

static nx_tensor *make(nx_ctx *ctx, nx_dtype dt, int nd, const int64_t *shape, const double *v)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, dt, nd, shape, &t), NX_OK);
    int64_t n = nx_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double x = v ? v[i] : 0.0;
        void *d = nx_tensor_data(t);
        switch (dt) {
        case NX_DTYPE_F64:
            ((double *)d)[i] = x;
            break;
        case NX_DTYPE_F32:
            ((float *)d)[i] = (float)x;
            break;
        case NX_DTYPE_I64:
            ((int64_t *)d)[i] = (int64_t)x;
            break;
        case NX_DTYPE_I32:
            ((int32_t *)d)[i] = (int32_t)x;
            break;
        case NX_DTYPE_U8:
            ((uint8_t *)d)[i] = (uint8_t)x;
            break;
        case NX_DTYPE_BOOL:
            ((uint8_t *)d)[i] = x != 0;
            break;
        default:
            fail_msg("make: dtype %s", nx_dtype_name(dt));
        }
    }
    return t;
}

static double at(const nx_tensor *t, int64_t i)
{
    const void *d = nx_tensor_data(t);
    switch (nx_tensor_dtype(t)) {
    case NX_DTYPE_F64:
        return ((const double *)d)[i];
    case NX_DTYPE_F32:
        return ((const float *)d)[i];
    case NX_DTYPE_I64:
        return (double)((const int64_t *)d)[i];
    default:
        fail_msg("at: dtype %s", nx_dtype_name(nx_tensor_dtype(t)));
    }
    return NAN;
}

/* op on two inputs with options "k=v" (NULL-terminated); one output. */
static nx_status call2(nx_ctx *ctx, const char *op, const nx_tensor *a, const nx_tensor *b,
                       const char *const *kv, nx_tensor **out)
{
    const char *keys[8], *vals[8];
    char buf[8][64];
    int n = 0;
    for (; kv && kv[n]; n++) {
        snprintf(buf[n], sizeof buf[n], "%s", kv[n]);
        char *eq = strchr(buf[n], '=');
        assert_non_null(eq);
        *eq = '\0';
        keys[n] = buf[n];
        vals[n] = eq + 1;
    }
    *out = NULL;
    return nx_op_call(ctx, op, 2, (const nx_tensor *const[]){a, b}, n, keys, vals, 1, out);
}

static double scalar2(nx_ctx *ctx, const char *op, const nx_tensor *a, const nx_tensor *b,
                      const char *const *kv)
{
    nx_tensor *y = NULL;
    nx_status st = call2(ctx, op, a, b, kv, &y);
    if (st != NX_OK)
        fail_msg("%s: %s", op, nx_ctx_last_error(ctx));
    assert_int_equal(nx_tensor_numel(y), 1);
    double v = at(y, 0);
    nx_tensor_free(y);
    return v;
}

static void expect_error(nx_ctx *ctx, const char *op, const nx_tensor *a, const nx_tensor *b,
                         const char *const *kv, nx_status want, const char *needle)
{
    nx_tensor *y = (nx_tensor *)1;
    nx_status st = call2(ctx, op, a, b, kv, &y);
    if (st != want)
        fail_msg("%s: status %s, expected %s (%s)", op, nx_status_str(st), nx_status_str(want),
                 nx_ctx_last_error(ctx));
    assert_null(y);
    const char *msg = nx_ctx_last_error(ctx);
    if (!strstr(msg, needle))
        fail_msg("%s: message \"%s\" lacks \"%s\"", op, msg, needle);
}

/* A fixed pseudo-random sequence in [0, 1). */
static double lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / 9007199254740992.0;
}

/* ---- dice, jaccard ------------------------------------------------------------------------*/

static void test_dice_jaccard_identities(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    enum { R = 3, N = 20 };
    double p[R * N], t[R * N];
    uint64_t s = 7;
    for (int i = 0; i < R * N; i++) {
        p[i] = lcg(&s);
        t[i] = lcg(&s) < 0.5 ? 0.0 : lcg(&s);
    }
    int64_t shape[2] = {R, N};
    nx_tensor *a = make(ctx, NX_DTYPE_F64, 2, shape, p), *b = make(ctx, NX_DTYPE_F64, 2, shape, t);
    const char *kv[] = {"axis=-1", "smooth=0", NULL};
    nx_tensor *d = NULL, *j = NULL;
    assert_int_equal(call2(ctx, "dice", a, b, kv, &d), NX_OK);
    assert_int_equal(call2(ctx, "jaccard", a, b, kv, &j), NX_OK);
    assert_int_equal(nx_tensor_numel(d), R);
    for (int r = 0; r < R; r++) {
        double dv = at(d, r);
        assert_true(dv > 0 && dv < 1);
        assert_true(nx_test_close(at(j, r), dv / (2 - dv), 1e-14, 0));
    }
    /* the gradient of sum_r dice_r by autodiff against the quotient rule:
     * d dice / d p_i = (2 t_i M - (2 I)) / M^2 (smooth 0), M = sum p + sum t, I = sum p t */
    nx_tensor *ones = make(ctx, NX_DTYPE_F64, 1, (int64_t[]){R}, (double[]){1, 1, 1});
    nx_tensor *dx[2] = {NULL, NULL};
    const char *keys[] = {"axis", "smooth"}, *vals[] = {"-1", "0"};
    assert_int_equal(nx_op_vjp(ctx, "dice", 2, (const nx_tensor *const[]){a, b}, 2, keys, vals, 1,
                               (const nx_tensor *const[]){ones}, dx),
                     NX_OK);
    for (int r = 0; r < R; r++) {
        double I = 0, M = 0;
        for (int i = 0; i < N; i++) {
            I += p[r * N + i] * t[r * N + i];
            M += p[r * N + i] + t[r * N + i];
        }
        for (int i = 0; i < N; i++) {
            double gp = (2 * t[r * N + i] * M - 2 * I) / (M * M);
            double gt = (2 * p[r * N + i] * M - 2 * I) / (M * M);
            assert_true(nx_test_close(at(dx[0], r * N + i), gp, 1e-12, 1e-15));
            assert_true(nx_test_close(at(dx[1], r * N + i), gt, 1e-12, 1e-15));
        }
    }
    nx_tensor_free(dx[0]);
    nx_tensor_free(dx[1]);
    nx_tensor_free(ones);
    nx_tensor_free(d);
    nx_tensor_free(j);
    /* empty regions: 1 with the default smooth, NaN with smooth 0 (0/0, documented) */
    nx_tensor *z = make(ctx, NX_DTYPE_F64, 2, shape, NULL);
    assert_true(scalar2(ctx, "dice", z, z, NULL) == 1.0);
    assert_true(scalar2(ctx, "jaccard", z, z, NULL) == 1.0);
    assert_true(isnan(scalar2(ctx, "dice", z, z, (const char *[]){"smooth=0", NULL})));
    assert_true(isnan(scalar2(ctx, "jaccard", z, z, (const char *[]){"smooth=0", NULL})));
    /* identical hard masks score 1 (2 sum(t^2) = 2 sum(t) for t in {0, 1}) */
    double hv[R * N];
    for (int i = 0; i < R * N; i++)
        hv[i] = t[i] > 0.5;
    nx_tensor *hard = make(ctx, NX_DTYPE_F64, 2, shape, hv);
    const char *s0[] = {"smooth=0", NULL};
    assert_true(nx_test_close(scalar2(ctx, "dice", hard, hard, s0), 1.0, 1e-15, 0));
    assert_true(nx_test_close(scalar2(ctx, "jaccard", hard, hard, s0), 1.0, 1e-15, 0));
    nx_tensor_free(hard);
    nx_tensor_free(z);
    nx_tensor_free(a);
    nx_tensor_free(b);
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

static void test_dice_errors(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t s23[2] = {2, 3}, s32[2] = {3, 2};
    nx_tensor *a = make(ctx, NX_DTYPE_F64, 2, s23, NULL),
              *b = make(ctx, NX_DTYPE_F64, 2, s32, NULL);
    nx_tensor *f = make(ctx, NX_DTYPE_F32, 2, s23, NULL),
              *i = make(ctx, NX_DTYPE_I32, 2, s23, NULL);
    for (int k = 0; k < 2; k++) {
        const char *op = k ? "jaccard" : "dice";
        expect_error(ctx, op, a, b, NULL, NX_ERR_INVALID_ARG, "different shapes");
        expect_error(ctx, op, a, f, NULL, NX_ERR_INVALID_ARG, "expected the same float dtype");
        expect_error(ctx, op, i, i, NULL, NX_ERR_INVALID_ARG, "expected f32 or f64");
        expect_error(ctx, op, a, a, (const char *[]){"axis=2", NULL}, NX_ERR_INVALID_ARG,
                     "axis 2 is out of range");
        expect_error(ctx, op, a, a, (const char *[]){"axis=1,-1", NULL}, NX_ERR_INVALID_ARG,
                     "given twice");
        expect_error(ctx, op, a, a, (const char *[]){"smooth=-1", NULL}, NX_ERR_INVALID_ARG,
                     "smooth");
        expect_error(ctx, op, a, a, (const char *[]){"reduction=max", NULL}, NX_ERR_INVALID_ARG,
                     "none|sum|mean");
    }
    nx_tensor_free(a);
    nx_tensor_free(b);
    nx_tensor_free(f);
    nx_tensor_free(i);
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

/* ---- hausdorff95, surface_dice ------------------------------------------------------------*/

/* A 1-D mask of n with [lo, hi) foreground. */
static nx_tensor *segment(nx_ctx *ctx, nx_dtype dt, int64_t n, int64_t lo, int64_t hi)
{
    double v[64] = {0};
    for (int64_t i = lo; i < hi; i++)
        v[i] = 1;
    return make(ctx, dt, 1, &n, v);
}

static void test_surface_closed_forms(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    /* segments [4, 14) and [7, 17) with spacing 2: the surfaces are the end voxels {4, 13} and
     * {7, 16}; every directed distance is 3 voxels = 6 */
    nx_tensor *p = segment(ctx, NX_DTYPE_BOOL, 24, 4, 14),
              *t = segment(ctx, NX_DTYPE_BOOL, 24, 7, 17);
    const char *sp2[] = {"spacing=2", NULL};
    assert_true(nx_test_close(scalar2(ctx, "hausdorff95", p, t, sp2), 6.0, 1e-12, 0));
    assert_true(nx_test_close(scalar2(ctx, "hausdorff95", t, p, sp2), 6.0, 1e-12, 0));
    const char *tol5[] = {"spacing=2", "tolerance=5.9", NULL};
    const char *tol6[] = {"spacing=2", "tolerance=6", NULL};
    assert_true(scalar2(ctx, "surface_dice", p, t, tol5) == 0.0);
    assert_true(scalar2(ctx, "surface_dice", p, t, tol6) == 1.0); /* d <= tol */
    /* identical masks: 0 and 1 */
    assert_true(scalar2(ctx, "hausdorff95", p, p, sp2) == 0.0);
    assert_true(scalar2(ctx, "surface_dice", p, p, (const char *[]){"tolerance=0", NULL}) == 1.0);
    /* f32 masks give f32 results */
    nx_tensor *pf = segment(ctx, NX_DTYPE_F32, 24, 4, 14),
              *tf = segment(ctx, NX_DTYPE_F32, 24, 7, 17);
    nx_tensor *y = NULL;
    assert_int_equal(call2(ctx, "hausdorff95", pf, tf, sp2, &y), NX_OK);
    assert_int_equal(nx_tensor_dtype(y), NX_DTYPE_F32);
    assert_int_equal(nx_tensor_ndim(y), 0);
    assert_true(nx_test_close(at(y, 0), 6.0, 1e-6, 0));
    nx_tensor_free(y);
    /* empty surfaces: both NaN; one: hausdorff95 +inf, surface_dice 0 (documented) */
    nx_tensor *z = segment(ctx, NX_DTYPE_BOOL, 24, 0, 0);
    const char *tol1[] = {"tolerance=1", NULL};
    assert_true(isnan(scalar2(ctx, "hausdorff95", z, z, NULL)));
    assert_true(isnan(scalar2(ctx, "surface_dice", z, z, tol1)));
    assert_true(isinf(scalar2(ctx, "hausdorff95", z, t, NULL)));
    assert_true(isinf(scalar2(ctx, "hausdorff95", p, z, NULL)));
    assert_true(scalar2(ctx, "surface_dice", z, t, tol1) == 0.0);
    assert_true(scalar2(ctx, "surface_dice", p, z, tol1) == 0.0);
    nx_tensor_free(z);
    nx_tensor_free(pf);
    nx_tensor_free(tf);
    nx_tensor_free(p);
    nx_tensor_free(t);
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

static void test_surface_errors(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s0[2] = {0, 3};
    nx_tensor *a = make(ctx, NX_DTYPE_BOOL, 2, s23, NULL),
              *b = make(ctx, NX_DTYPE_BOOL, 2, s32, NULL);
    nx_tensor *f = make(ctx, NX_DTYPE_F64, 2, s23, NULL),
              *e = make(ctx, NX_DTYPE_BOOL, 2, s0, NULL);
    nx_tensor *h = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F16, 2, s23, &h), NX_OK);
    for (int k = 0; k < 2; k++) {
        const char *op = k ? "surface_dice" : "hausdorff95";
        const char *tol[] = {k ? "tolerance=1" : NULL, NULL};
        const char *spacing3[] = {"spacing=1,2,3", k ? "tolerance=1" : NULL, NULL};
        const char *spacing0[] = {"spacing=1,0", k ? "tolerance=1" : NULL, NULL};
        expect_error(ctx, op, a, b, tol, NX_ERR_SHAPE, "expected equal shapes");
        expect_error(ctx, op, a, f, tol, NX_ERR_DTYPE, "expected masks of one dtype");
        expect_error(ctx, op, h, h, tol, NX_ERR_DTYPE, "expected a bool, integer, f32 or f64");
        expect_error(ctx, op, e, e, tol, NX_ERR_SHAPE, "no voxels");
        expect_error(ctx, op, a, a, spacing3, NX_ERR_INVALID_ARG, "expected 1 or 2");
        expect_error(ctx, op, a, a, spacing0, NX_ERR_INVALID_ARG, "spacing[1] is 0");
    }
    expect_error(ctx, "surface_dice", a, a, NULL, NX_ERR_INVALID_ARG, "tolerance is required");
    expect_error(ctx, "surface_dice", a, a, (const char *[]){"tolerance=-1", NULL},
                 NX_ERR_INVALID_ARG, "tolerance");
    expect_error(ctx, "hausdorff95", a, a, (const char *[]){"tolerance=1", NULL},
                 NX_ERR_INVALID_ARG, "no option named 'tolerance'");
    nx_tensor_free(a);
    nx_tensor_free(b);
    nx_tensor_free(f);
    nx_tensor_free(e);
    nx_tensor_free(h);
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

/* ---- roc_auc, confusion_matrix, topk_accuracy ---------------------------------------------*/

static void test_roc_auc(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t n = 6;
    nx_tensor *y = make(ctx, NX_DTYPE_I64, 1, &n, (double[]){0, 0, 1, 0, 1, 1});
    nx_tensor *up = make(ctx, NX_DTYPE_F64, 1, &n, (double[]){0.1, 0.2, 0.9, 0.3, 0.8, 0.7});
    nx_tensor *down = make(ctx, NX_DTYPE_F64, 1, &n, (double[]){0.9, 0.8, 0.1, 0.7, 0.2, 0.3});
    nx_tensor *tied = make(ctx, NX_DTYPE_F64, 1, &n, (double[]){1, 1, 1, 1, 1, 1});
    nx_tensor *nan = make(ctx, NX_DTYPE_F64, 1, &n, (double[]){0.1, NAN, 0.9, 0.3, 0.8, 0.7});
    nx_tensor *one = make(ctx, NX_DTYPE_I64, 1, &n, (double[]){1, 1, 1, 1, 1, 1});
    /* separated, reversed, all tied (every pair half a win), and one mixed pair:
     * positives {0.9, 0.8, 0.7} against negatives {0.1, 0.2, 0.75}: 8 of 9 wins */
    assert_true(scalar2(ctx, "roc_auc", up, y, NULL) == 1.0);
    assert_true(scalar2(ctx, "roc_auc", down, y, NULL) == 0.0);
    assert_true(scalar2(ctx, "roc_auc", tied, y, NULL) == 0.5);
    nx_tensor *mixed = make(ctx, NX_DTYPE_F64, 1, &n, (double[]){0.1, 0.2, 0.9, 0.75, 0.8, 0.7});
    assert_true(nx_test_close(scalar2(ctx, "roc_auc", mixed, y, NULL), 8.0 / 9.0, 1e-15, 0));
    /* a single class, or a NaN score: NaN (documented; scikit-learn raises) */
    assert_true(isnan(scalar2(ctx, "roc_auc", up, one, NULL)));
    assert_true(isnan(scalar2(ctx, "roc_auc", nan, y, NULL)));
    /* bad input */
    int64_t s62[2] = {6, 2}, s5 = 5;
    nx_tensor *sc2 =
        make(ctx, NX_DTYPE_F64, 2, s62, (double[]){0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1});
    nx_tensor *lab_bad = make(ctx, NX_DTYPE_I64, 1, &n, (double[]){0, 1, 2, 0, 1, 0});
    nx_tensor *lab_neg = make(ctx, NX_DTYPE_I32, 1, &n, (double[]){0, 1, -1, 0, 1, 0});
    nx_tensor *lab_f = make(ctx, NX_DTYPE_F64, 1, &n, (double[]){0, 1, 1, 0, 1, 0});
    nx_tensor *y5 = make(ctx, NX_DTYPE_I64, 1, &s5, NULL);
    nx_tensor *iscores = make(ctx, NX_DTYPE_I64, 1, &n, NULL);
    expect_error(ctx, "roc_auc", up, y5, NULL, NX_ERR_SHAPE, "expected scores [n] with labels");
    expect_error(ctx, "roc_auc", iscores, y, NULL, NX_ERR_DTYPE, "scores is i64");
    expect_error(ctx, "roc_auc", sc2, lab_bad, NULL, NX_ERR_INVALID_ARG, "the label 2");
    expect_error(ctx, "roc_auc", sc2, lab_neg, NULL, NX_ERR_INVALID_ARG, "the label -1");
    expect_error(ctx, "roc_auc", sc2, lab_f, NULL, NX_ERR_DTYPE, "class indices");
    expect_error(ctx, "roc_auc", sc2, y, (const char *[]){"average=samples", NULL},
                 NX_ERR_INVALID_ARG, "macro|weighted|micro|none");
    /* multiclass in range: columns 0 and 1 against labels 0 and 1 */
    nx_tensor *lab01 = make(ctx, NX_DTYPE_I64, 1, &n, (double[]){1, 0, 0, 1, 1, 0});
    nx_tensor *out = NULL;
    assert_int_equal(
        call2(ctx, "roc_auc", sc2, lab01, (const char *[]){"average=none", NULL}, &out), NX_OK);
    assert_int_equal(nx_tensor_numel(out), 2);
    /* both columns are 1 exactly where the label is 0: class 0 separates perfectly (AUC 1),
     * class 1 is ranked exactly backwards (AUC 0) */
    assert_true(at(out, 0) == 1.0 && at(out, 1) == 0.0);
    nx_tensor_free(out);
    nx_tensor *list[] = {y,   up,      down,    tied,  nan, one,     mixed,
                         sc2, lab_bad, lab_neg, lab_f, y5,  iscores, lab01};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
        nx_tensor_free(list[i]);
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

static void test_confusion_topk(void **state)
{
    (void)state;
    nx_ctx *ctx = ctx_new();
    int64_t n = 5, zero = 0;
    nx_tensor *p = make(ctx, NX_DTYPE_I64, 1, &n, (double[]){0, 2, 1, 1, 2});
    nx_tensor *t = make(ctx, NX_DTYPE_I64, 1, &n, (double[]){0, 1, 1, 2, 2});
    nx_tensor *cm = NULL;
    assert_int_equal(
        call2(ctx, "confusion_matrix", p, t, (const char *[]){"num_classes=3", NULL}, &cm), NX_OK);
    assert_int_equal(nx_tensor_dtype(cm), NX_DTYPE_I64);
    /* rows: target, columns: pred */
    const double want[9] = {1, 0, 0, 0, 1, 1, 0, 1, 1};
    for (int i = 0; i < 9; i++)
        assert_true(at(cm, i) == want[i]);
    nx_tensor_free(cm);
    /* empty label arrays: all zeros */
    nx_tensor *e = make(ctx, NX_DTYPE_I32, 1, &zero, NULL);
    assert_int_equal(
        call2(ctx, "confusion_matrix", e, e, (const char *[]){"num_classes=2", NULL}, &cm), NX_OK);
    for (int i = 0; i < 4; i++)
        assert_true(at(cm, i) == 0);
    nx_tensor_free(cm);
    const char *c3[] = {"num_classes=3", NULL}, *c2[] = {"num_classes=2", NULL};
    expect_error(ctx, "confusion_matrix", p, t, c2, NX_ERR_INVALID_ARG,
                 "pred holds the label 2; expected class indices in 0..1");
    nx_tensor *tneg = make(ctx, NX_DTYPE_I64, 1, &n, (double[]){0, 1, -3, 2, 2});
    expect_error(ctx, "confusion_matrix", p, tneg, c3, NX_ERR_INVALID_ARG,
                 "target holds the label -3");
    int64_t s4 = 4;
    nx_tensor *p4 = make(ctx, NX_DTYPE_I64, 1, &s4, NULL),
              *pf = make(ctx, NX_DTYPE_F64, 1, &n, NULL);
    expect_error(ctx, "confusion_matrix", p4, t, c3, NX_ERR_SHAPE, "expected equal shapes");
    expect_error(ctx, "confusion_matrix", pf, t, c3, NX_ERR_DTYPE, "expected an integer dtype");
    expect_error(ctx, "confusion_matrix", p, t, NULL, NX_ERR_INVALID_ARG,
                 "num_classes is required");
    expect_error(ctx, "confusion_matrix", p, t, (const char *[]){"num_classes=0", NULL},
                 NX_ERR_INVALID_ARG, "num_classes");
    /* topk_accuracy: k = C is a hit everywhere; ties go to the lower index */
    int64_t s23[2] = {2, 3}, s2 = 2;
    nx_tensor *x = make(ctx, NX_DTYPE_F64, 2, s23, (double[]){0.5, 0.5, 0.1, 0.3, 0.2, 0.1});
    nx_tensor *lab = make(ctx, NX_DTYPE_I64, 1, &s2, (double[]){1, 2});
    nx_tensor *hits = NULL;
    assert_int_equal(call2(ctx, "topk_accuracy", x, lab, NULL, &hits), NX_OK);
    assert_true(at(hits, 0) == 0.0 && at(hits, 1) == 0.0);
    nx_tensor_free(hits);
    assert_true(scalar2(ctx, "topk_accuracy", x, lab,
                        (const char *[]){"k=2", "reduction=mean", NULL}) == 0.5);
    assert_true(scalar2(ctx, "topk_accuracy", x, lab,
                        (const char *[]){"k=3", "reduction=sum", NULL}) == 2.0);
    expect_error(ctx, "topk_accuracy", x, lab, (const char *[]){"k=4", NULL}, NX_ERR_INVALID_ARG,
                 "k is 4 but logits has 3 classes");
    expect_error(ctx, "topk_accuracy", x, lab, (const char *[]){"k=0", NULL}, NX_ERR_INVALID_ARG,
                 "k");
    nx_tensor *lab_bad = make(ctx, NX_DTYPE_I64, 1, &s2, (double[]){1, 3});
    expect_error(ctx, "topk_accuracy", x, lab_bad, NULL, NX_ERR_INVALID_ARG,
                 "labels holds the label 3");
    expect_error(ctx, "topk_accuracy", x, p, NULL, NX_ERR_SHAPE, "expected logits [*batch, C]");
    expect_error(ctx, "topk_accuracy", lab, lab, NULL, NX_ERR_DTYPE, "logits is i64");
    expect_error(ctx, "topk_accuracy", x, x, NULL, NX_ERR_DTYPE, "labels is f64");
    nx_tensor *list[] = {p, t, e, tneg, p4, pf, x, lab, lab_bad};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
        nx_tensor_free(list[i]);
    nx_ctx_free(ctx);
    assert_int_equal(g_ta.live, 0);
}

/* ---- allocation failures ------------------------------------------------------------------*/

static nx_status sweep_body(nx_ctx *ctx, void *user)
{
    (void)user;
    int64_t n = 12, s23[2] = {2, 3}, s2 = 2;
    nx_tensor *p = NULL, *t = NULL, *x = NULL, *lab = NULL, *y = NULL;
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_BOOL, 1, &n, &p);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_BOOL, 1, &n, &t);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F64, 2, s23, &x);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_I64, 1, &s2, &lab);
    if (st == NX_OK) {
        memset(nx_tensor_data(p), 0, 12);
        memset(nx_tensor_data(t), 0, 12);
        memset(nx_tensor_data(p), 1, 5);
        memset((char *)nx_tensor_data(t) + 3, 1, 6);
        memset(nx_tensor_data(x), 0, 6 * sizeof(double));
        memset(nx_tensor_data(lab), 0, 2 * sizeof(int64_t));
        const char *k[] = {"tolerance", "backend"}, *v[] = {"1", "ref"};
        st = nx_op_call(ctx, "surface_dice", 2, (const nx_tensor *const[]){p, t}, 2, k, v, 1, &y);
    }
    nx_tensor_free(y);
    y = NULL;
    if (st == NX_OK) {
        const char *k[] = {"backend"}, *v[] = {"ref"};
        st =
            nx_op_call(ctx, "topk_accuracy", 2, (const nx_tensor *const[]){x, lab}, 1, k, v, 1, &y);
    }
    nx_tensor_free(y);
    nx_tensor_free(p);
    nx_tensor_free(t);
    nx_tensor_free(x);
    nx_tensor_free(lab);
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
        cmocka_unit_test(test_dice_jaccard_identities),
        cmocka_unit_test(test_dice_errors),
        cmocka_unit_test(test_surface_closed_forms),
        cmocka_unit_test(test_surface_errors),
        cmocka_unit_test(test_roc_auc),
        cmocka_unit_test(test_confusion_topk),
        cmocka_unit_test(test_alloc_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
