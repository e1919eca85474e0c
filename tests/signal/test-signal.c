/* The signal family (docs/signal.md) beyond the golden replay: every refusal (cut-offs, orders,
 * malformed and unstable sos arrays, a series shorter than the extension, axes, dtypes, degrees),
 * the two IIR drivers against each other in float64 on a long input, the adjoint identity of the
 * linear filters (<dy, f(x)> = <f^T(dy), x>, independent of finite differences), iir_filter as
 * butterworth_sos followed by sosfiltfilt, and detrending a pure polynomial to zero. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nitrix-op.h"
#include "testutil.h"

static uint64_t seed = 0x9e3779b97f4a7c15u;
static char dir[64];

static double gauss(void)
{
    double s = 0;
    for (int k = 0; k < 4; k++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        s += (double)(seed >> 11) / 9007199254740992.0;
    }
    return (s - 2.0) * 1.7;
}

static nx_tensor *noise(nx_ctx *ctx, nx_dtype dt, int nd, const int64_t *shape)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, dt, nd, shape, &t), NX_OK);
    for (int64_t i = 0; i < nx_tensor_numel(t); i++) {
        if (dt == NX_DTYPE_F64)
            ((double *)nx_tensor_data(t))[i] = gauss();
        else
            ((float *)nx_tensor_data(t))[i] = (float)gauss();
    }
    return t;
}

static double at(const nx_tensor *t, int64_t i)
{
    return nx_tensor_dtype(t) == NX_DTYPE_F64 ? ((const double *)nx_tensor_data(t))[i]
                                              : ((const float *)nx_tensor_data(t))[i];
}

/* sos rows written to dir/name.npy; returns the path (static buffer per slot). */
static const char *sos_file(nx_ctx *ctx, const char *name, int n, const double *rows)
{
    static char paths[8][128];
    static int slot;
    char *p = paths[slot++ % 8];
    snprintf(p, 128, "%s/%s.npy", dir, name);
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 2, (int64_t[]){n, 6}, &t), NX_OK);
    memcpy(nx_tensor_data(t), rows, (size_t)n * 6 * sizeof(double));
    assert_int_equal(nx_npy_write(ctx, p, t), NX_OK);
    nx_tensor_free(t);
    return p;
}

static nx_status call(nx_ctx *ctx, const char *op, const nx_tensor *x, int n, const char *const *k,
                      const char *const *v, nx_tensor **y)
{
    return nx_op_call(ctx, op, x ? 1 : 0, x ? (const nx_tensor *const[]){x} : NULL, n, k, v, 1,
                      y);
}

/* A design call expected to fail with st and a message containing want. */
static void design_fails(nx_ctx *ctx, int n, const char *const *k, const char *const *v,
                         nx_status st, const char *want)
{
    nx_tensor *y = NULL;
    nx_status got = call(ctx, "butterworth_sos", NULL, n, k, v, &y);
    if (got != st || !strstr(nx_ctx_last_error(ctx), want))
        printf("got %s: %s (wanted '%s')\n", nx_status_str(got), nx_ctx_last_error(ctx), want);
    assert_int_equal(got, st);
    assert_non_null(strstr(nx_ctx_last_error(ctx), want));
    assert_null(y);
}

static void test_design_errors(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    const char *k[] = {"order", "btype", "lo", "hi", "fs"};
    design_fails(ctx, 4, k, (const char *[]){"0", "bandpass", "0.1", "0.2"}, NX_ERR_INVALID_ARG,
                 "order");
    design_fails(ctx, 4, k, (const char *[]){"33", "bandpass", "0.1", "0.2"}, NX_ERR_INVALID_ARG,
                 "order");
    /* cut-offs outside (0, fs/2) */
    design_fails(ctx, 4, k, (const char *[]){"2", "lowpass", "0", "0.5"}, NX_ERR_INVALID_ARG,
                 "fs/2");
    design_fails(ctx, 5, k, (const char *[]){"2", "lowpass", "0", "30", "50"},
                 NX_ERR_INVALID_ARG, "fs/2 = 25");
    design_fails(ctx, 4, k, (const char *[]){"2", "highpass", "-0.1", "0"}, NX_ERR_INVALID_ARG,
                 "0 < lo");
    design_fails(ctx, 2, k, (const char *[]){"2", "lowpass"}, NX_ERR_INVALID_ARG, "hi");
    design_fails(ctx, 4, k, (const char *[]){"2", "bandpass", "0.1", "0.6"}, NX_ERR_INVALID_ARG,
                 "hi");
    /* lo >= hi */
    design_fails(ctx, 4, k, (const char *[]){"2", "bandpass", "0.3", "0.2"}, NX_ERR_INVALID_ARG,
                 "lo < hi");
    design_fails(ctx, 4, k, (const char *[]){"2", "bandstop", "0.2", "0.2"}, NX_ERR_INVALID_ARG,
                 "lo < hi");
    /* the cut-off the type does not take */
    design_fails(ctx, 4, k, (const char *[]){"2", "lowpass", "0.1", "0.2"}, NX_ERR_INVALID_ARG,
                 "lowpass takes its cut-off as hi");
    design_fails(ctx, 4, k, (const char *[]){"2", "highpass", "0.1", "0.2"}, NX_ERR_INVALID_ARG,
                 "highpass takes its cut-off as lo");
    design_fails(ctx, 5, k, (const char *[]){"2", "lowpass", "0", "0.2", "nan"},
                 NX_ERR_INVALID_ARG, "fs");
    design_fails(ctx, 5, k, (const char *[]){"2", "lowpass", "0", "0.2", "0"},
                 NX_ERR_INVALID_ARG, "fs");
    nx_ctx_free(ctx);
}

static void filt_fails(nx_ctx *ctx, const char *op, const nx_tensor *x, int n,
                       const char *const *k, const char *const *v, nx_status st,
                       const char *want)
{
    nx_tensor *y = NULL;
    nx_status got = call(ctx, op, x, n, k, v, &y);
    if (got != st || !strstr(nx_ctx_last_error(ctx), want))
        printf("%s got %s: %s (wanted '%s')\n", op, nx_status_str(got), nx_ctx_last_error(ctx),
               want);
    assert_int_equal(got, st);
    assert_non_null(strstr(nx_ctx_last_error(ctx), want));
    assert_null(y);
}

static const double good[2][6] = {{0.2, 0.4, 0.2, 1, -0.5, 0.25}, {1, -2, 1, 1, -1.2, 0.5}};

static void test_sos_errors(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_tensor *x = noise(ctx, NX_DTYPE_F64, 2, (int64_t[]){3, 40});
    const char *ops[] = {"sosfilt", "sosfiltfilt"};
    const char *k[] = {"sos"};
    for (int i = 0; i < 2; i++) {
        /* missing */
        filt_fails(ctx, ops[i], x, 0, NULL, NULL, NX_ERR_INVALID_ARG, "sos");
        /* the wrong last dimension */
        nx_tensor *bad = NULL;
        assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 2, (int64_t[]){2, 5}, &bad), NX_OK);
        char p[128];
        snprintf(p, sizeof p, "%s/five.npy", dir);
        assert_int_equal(nx_npy_write(ctx, p, bad), NX_OK);
        nx_tensor_free(bad);
        filt_fails(ctx, ops[i], x, 1, k, (const char *[]){p}, NX_ERR_SHAPE, "(n_sections, 6)");
        /* a0 != 1: refused as scipy refuses it */
        double rows[2][6];
        memcpy(rows, good, sizeof rows);
        rows[1][3] = 2;
        filt_fails(ctx, ops[i], x, 1, k,
                   (const char *[]){sos_file(ctx, "a0", 2, &rows[0][0])}, NX_ERR_INVALID_ARG,
                   "a0) is 2; expected 1");
        /* unstable: complex poles of modulus sqrt(1.2); a real pole at 1 */
        memcpy(rows, good, sizeof rows);
        rows[0][5] = 1.2;
        filt_fails(ctx, ops[i], x, 1, k,
                   (const char *[]){sos_file(ctx, "unstable", 2, &rows[0][0])},
                   NX_ERR_INVALID_ARG, "expected a stable filter");
        memcpy(rows, good, sizeof rows);
        rows[1][4] = -1;
        rows[1][5] = 0;
        filt_fails(ctx, ops[i], x, 1, k,
                   (const char *[]){sos_file(ctx, "integrator", 2, &rows[0][0])},
                   NX_ERR_INVALID_ARG, "modulus 1");
        memcpy(rows, good, sizeof rows);
        rows[0][1] = NAN;
        filt_fails(ctx, ops[i], x, 1, k, (const char *[]){sos_file(ctx, "nan", 2, &rows[0][0])},
                   NX_ERR_INVALID_ARG, "finite");
        /* axis out of range, integer x, empty x */
        const char *s = sos_file(ctx, "good", 2, &good[0][0]);
        filt_fails(ctx, ops[i], x, 2, (const char *[]){"sos", "axis"}, (const char *[]){s, "2"},
                   NX_ERR_INVALID_ARG, "axis 2 is out of range");
        nx_tensor *xi = NULL;
        assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_I32, 1, (int64_t[]){40}, &xi), NX_OK);
        filt_fails(ctx, ops[i], xi, 1, k, (const char *[]){s}, NX_ERR_INVALID_ARG, "float32");
        nx_tensor_free(xi);
        nx_tensor *xe = NULL;
        assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 2, (int64_t[]){3, 0}, &xe), NX_OK);
        filt_fails(ctx, ops[i], xe, 1, k, (const char *[]){s}, NX_ERR_SHAPE, "empty");
        nx_tensor_free(xe);
    }
    nx_tensor_free(x);
    nx_ctx_free(ctx);
}

/* scipy: "The length of the input vector x must be greater than padlen". */
static void test_short_signal(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    const char *s = sos_file(ctx, "good2", 2, &good[0][0]);
    /* two sections, no zero b2/a2: padlen 3 * 5 = 15 */
    nx_tensor *x15 = noise(ctx, NX_DTYPE_F64, 2, (int64_t[]){2, 15});
    nx_tensor *x16 = noise(ctx, NX_DTYPE_F64, 2, (int64_t[]){2, 16});
    filt_fails(ctx, "sosfiltfilt", x15, 1, (const char *[]){"sos"}, (const char *[]){s},
               NX_ERR_SHAPE, "padlen = 15");
    nx_tensor *y = NULL;
    assert_int_equal(call(ctx, "sosfiltfilt", x16, 1, (const char *[]){"sos"},
                          (const char *[]){s}, &y),
                     NX_OK);
    nx_tensor_free(y);
    filt_fails(ctx, "sosfiltfilt", x15, 2, (const char *[]){"sos", "padlen"},
               (const char *[]){s, "20"}, NX_ERR_SHAPE, "padlen = 20");
    /* padtype none needs no extension */
    assert_int_equal(call(ctx, "sosfiltfilt", x15, 2, (const char *[]){"sos", "padtype"},
                          (const char *[]){s, "none"}, &y),
                     NX_OK);
    nx_tensor_free(y);
    /* iir_filter's default extension: order 2 band-pass, 2 sections, padlen 15 */
    filt_fails(ctx, "iir_filter", x15, 3, (const char *[]){"btype", "lo", "hi"},
               (const char *[]){"bandpass", "0.1", "0.2"}, NX_ERR_SHAPE, "padlen = 15");
    nx_tensor_free(x15);
    nx_tensor_free(x16);
    nx_ctx_free(ctx);
}

static double max_abs(const nx_tensor *t)
{
    double m = 0;
    for (int64_t i = 0; i < nx_tensor_numel(t); i++)
        m = fmax(m, fabs(at(t, i)));
    return m;
}

/* api-b §3.2: scan and associative agree to 1e-9 in float64. */
static void test_drivers_f64(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_tensor *sos = NULL;
    assert_int_equal(call(ctx, "butterworth_sos", NULL, 5,
                          (const char *[]){"order", "btype", "lo", "hi", "fs"},
                          (const char *[]){"4", "bandpass", "0.01", "0.1", "0.5"}, &sos),
                     NX_OK);
    char p[128];
    snprintf(p, sizeof p, "%s/bp4.npy", dir);
    assert_int_equal(nx_npy_write(ctx, p, sos), NX_OK);
    nx_tensor_free(sos);
    nx_tensor *x = noise(ctx, NX_DTYPE_F64, 2, (int64_t[]){3, 3000});
    const char *ops[] = {"sosfilt", "sosfiltfilt"};
    for (int o = 0; o < 2; o++) {
        nx_tensor *a = NULL, *b = NULL;
        assert_int_equal(call(ctx, ops[o], x, 2, (const char *[]){"sos", "driver"},
                              (const char *[]){p, "scan"}, &a),
                         NX_OK);
        assert_int_equal(call(ctx, ops[o], x, 2, (const char *[]){"sos", "driver"},
                              (const char *[]){p, "associative"}, &b),
                         NX_OK);
        double scale = max_abs(a), worst = 0;
        for (int64_t i = 0; i < nx_tensor_numel(a); i++)
            worst = fmax(worst, fabs(at(a, i) - at(b, i)));
        printf("%s: max |associative - scan| = %.3g (max |y| %.3g)\n", ops[o], worst, scale);
        assert_true(worst <= 1e-9 * fmax(scale, 1));
        nx_tensor_free(a);
        nx_tensor_free(b);
    }
    nx_tensor_free(x);
    nx_ctx_free(ctx);
}

/* The filters are linear in x: <dy, f(x)> = <vjp(dy), x>, for both drivers and any axis. */
static void test_adjoint(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    const char *s = sos_file(ctx, "adj", 2, &good[0][0]);
    nx_tensor *x = noise(ctx, NX_DTYPE_F64, 3, (int64_t[]){3, 70, 2});
    nx_tensor *dy = noise(ctx, NX_DTYPE_F64, 3, (int64_t[]){3, 70, 2});
    const char *ops[] = {"sosfilt", "sosfiltfilt", "sosfiltfilt"};
    const char *pads[] = {"odd", "odd", "even"};
    const char *drivers[] = {"scan", "associative"};
    for (int o = 0; o < 3; o++)
        for (int d = 0; d < 2; d++) {
            const char *k[] = {"sos", "axis", "driver", "padtype"};
            const char *v[] = {s, "1", drivers[d], pads[o]};
            int nk = o == 0 ? 3 : 4;
            nx_tensor *y = NULL, *dx = NULL;
            assert_int_equal(call(ctx, ops[o], x, nk, k, v, &y), NX_OK);
            assert_int_equal(nx_op_vjp(ctx, ops[o], 1, (const nx_tensor *const[]){x}, nk, k, v, 1,
                                       (const nx_tensor *const[]){dy}, &dx),
                             NX_OK);
            double lhs = 0, rhs = 0, mag = 0;
            for (int64_t i = 0; i < nx_tensor_numel(x); i++) {
                lhs += at(dy, i) * at(y, i);
                rhs += at(dx, i) * at(x, i);
                mag += fabs(at(dy, i) * at(y, i));
            }
            assert_true(fabs(lhs - rhs) <= 1e-12 * mag);
            nx_tensor_free(y);
            nx_tensor_free(dx);
        }
    nx_tensor_free(x);
    nx_tensor_free(dy);
    nx_ctx_free(ctx);
}

static void test_iir_filter_is_design_then_filtfilt(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    const char *dk[] = {"order", "btype", "lo", "fs"};
    const char *dv[] = {"3", "highpass", "0.7", "10"};
    nx_tensor *sos = NULL;
    assert_int_equal(call(ctx, "butterworth_sos", NULL, 4, dk, dv, &sos), NX_OK);
    char p[128];
    snprintf(p, sizeof p, "%s/hp3.npy", dir);
    assert_int_equal(nx_npy_write(ctx, p, sos), NX_OK);
    nx_tensor_free(sos);
    nx_tensor *x = noise(ctx, NX_DTYPE_F32, 2, (int64_t[]){50, 4});
    for (int zp = 0; zp < 2; zp++) {
        nx_tensor *a = NULL, *b = NULL;
        const char *k[] = {"order", "btype", "lo", "fs", "axis", "zero_phase"};
        const char *v[] = {"3", "highpass", "0.7", "10", "0", zp ? "true" : "false"};
        assert_int_equal(call(ctx, "iir_filter", x, 6, k, v, &a), NX_OK);
        assert_int_equal(call(ctx, zp ? "sosfiltfilt" : "sosfilt", x, 2,
                              (const char *[]){"sos", "axis"}, (const char *[]){p, "0"}, &b),
                         NX_OK);
        assert_int_equal(nx_tensor_numel(a), nx_tensor_numel(b));
        assert_memory_equal(nx_tensor_data(a), nx_tensor_data(b), 200 * sizeof(float));
        nx_tensor_free(a);
        nx_tensor_free(b);
    }
    nx_tensor_free(x);
    nx_ctx_free(ctx);
}

static void test_detrend(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    /* a cubic in t along axis 0 (rowvar false), removed exactly by degree 3, not by degree 2 */
    nx_tensor *x = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 2, (int64_t[]){30, 2}, &x), NX_OK);
    for (int t = 0; t < 30; t++)
        for (int c = 0; c < 2; c++)
            ((double *)nx_tensor_data(x))[t * 2 + c] =
                1.5 - 0.2 * t + (c + 1) * 0.03 * t * t - 0.001 * t * t * t;
    nx_tensor *y = NULL;
    const char *k[] = {"degree", "rowvar"};
    assert_int_equal(call(ctx, "polynomial_detrend", x, 2, k, (const char *[]){"3", "false"}, &y),
                     NX_OK);
    assert_true(max_abs(y) < 1e-11);
    nx_tensor_free(y);
    assert_int_equal(call(ctx, "polynomial_detrend", x, 2, k, (const char *[]){"2", "false"}, &y),
                     NX_OK);
    assert_true(max_abs(y) > 1e-3);
    nx_tensor_free(y);
    /* degree >= samples; rank too small for rowvar false; integer x */
    filt_fails(ctx, "polynomial_detrend", x, 1, k, (const char *[]){"2"}, NX_ERR_SHAPE,
               "expected degree < samples");
    nx_tensor *x1 = noise(ctx, NX_DTYPE_F64, 1, (int64_t[]){10});
    filt_fails(ctx, "polynomial_detrend", x1, 2, k, (const char *[]){"1", "false"}, NX_ERR_SHAPE,
               "rank 1");
    nx_tensor_free(x1);
    nx_tensor *xi = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_I64, 1, (int64_t[]){10}, &xi), NX_OK);
    filt_fails(ctx, "polynomial_detrend", xi, 0, NULL, NULL, NX_ERR_INVALID_ARG, "float32");
    nx_tensor_free(xi);
    nx_tensor_free(x);
    nx_ctx_free(ctx);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/nx-signal-XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_design_errors),
        cmocka_unit_test(test_sos_errors),
        cmocka_unit_test(test_short_signal),
        cmocka_unit_test(test_drivers_f64),
        cmocka_unit_test(test_adjoint),
        cmocka_unit_test(test_iir_filter_is_design_then_filtfilt),
        cmocka_unit_test(test_detrend),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        rc = rc ? rc : 1;
    return rc;
}
