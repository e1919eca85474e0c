/* The logits and contrastive metrics (bce_with_logits, cross_entropy_with_logits, focal_loss,
 * info_nce, dino_cross_entropy, ibot_cross_entropy, koleo) beyond what the table's tests see
 * (the golden replay against NumPy/SciPy and the FD gradients): logits far past the golden
 * cases' +-1000 (1e4, 1e30) against the closed-form limits, with the gradients against the
 * closed forms sigmoid(x) - t and softmax - onehot (finite, no NaN); identities between the ops
 * (focal with gamma 0 and no alpha is bce; two-class cross-entropy is bce of the logit
 * difference; ibot with a full mask is dino's per-sample mean over the tokens; info_nce is
 * invariant to row scaling and symmetric in za, zb; koleo of two points in closed form); and the
 * bad inputs, each with its status and the words of its message. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nitrix-op.h"
#include "nitrix.h"
#include "testutil.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static double urand(void) /* [0, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static nx_tensor *tensor(nx_ctx *ctx, nx_dtype dt, int nd, const int64_t *shape,
                         const double *values)
{
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, dt, nd, shape, &t), NX_OK);
    for (int64_t i = 0; values && i < nx_tensor_numel(t); i++) {
        switch (dt) {
        case NX_DTYPE_F32: ((float *)nx_tensor_data(t))[i] = (float)values[i]; break;
        case NX_DTYPE_F64: ((double *)nx_tensor_data(t))[i] = values[i]; break;
        case NX_DTYPE_I32: ((int32_t *)nx_tensor_data(t))[i] = (int32_t)values[i]; break;
        case NX_DTYPE_I64: ((int64_t *)nx_tensor_data(t))[i] = (int64_t)values[i]; break;
        case NX_DTYPE_BOOL: ((bool *)nx_tensor_data(t))[i] = values[i] != 0; break;
        default: fail_msg("tensor: dtype %s", nx_dtype_name(dt));
        }
    }
    return t;
}

static nx_tensor *random_f64(nx_ctx *ctx, int nd, const int64_t *shape, double scale)
{
    nx_tensor *t = tensor(ctx, NX_DTYPE_F64, nd, shape, NULL);
    double *d = nx_tensor_data(t);
    for (int64_t i = 0; i < nx_tensor_numel(t); i++)
        d[i] = scale * (2 * urand() - 1);
    return t;
}

static double at(const nx_tensor *t, int64_t i)
{
    if (nx_tensor_dtype(t) == NX_DTYPE_F32)
        return ((const float *)nx_tensor_data(t))[i];
    return ((const double *)nx_tensor_data(t))[i];
}

/* nx_op_call with "key=value" options (NULL-terminated); one output. */
static nx_status call(nx_ctx *ctx, const char *op, int nin, const nx_tensor *const *in,
                      const char *const *opts, nx_tensor **y)
{
    const char *keys[8], *vals[8];
    char buf[8][64];
    int n = 0;
    for (; opts && opts[n]; n++) {
        snprintf(buf[n], sizeof buf[n], "%s", opts[n]);
        char *eq = strchr(buf[n], '=');
        assert_non_null(eq);
        *eq = 0;
        keys[n] = buf[n];
        vals[n] = eq + 1;
    }
    *y = NULL;
    return nx_op_call(ctx, op, nin, in, n, keys, vals, 1, y);
}

/* The call must fail with `want` and a message containing each of the words (NULL-ended). */
static void expect_error(nx_ctx *ctx, const char *op, int nin, const nx_tensor *const *in,
                         const char *const *opts, nx_status want, const char *const *words)
{
    nx_tensor *y = (nx_tensor *)1;
    nx_status st = call(ctx, op, nin, in, opts, &y);
    const char *msg = nx_ctx_last_error(ctx);
    if (st != want)
        fail_msg("%s: status %s, expected %s (%s)", op, nx_status_str(st), nx_status_str(want),
                 msg);
    assert_null(y);
    for (int i = 0; words && words[i]; i++)
        if (!strstr(msg, words[i]))
            fail_msg("%s: the message '%s' does not say '%s'", op, msg, words[i]);
}

static double sigmoid(double x)
{
    return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x));
}

/* ---- extreme logits ------------------------------------------------------------------------ */

/* bce at logits up to 1e30 in f32 and f64 on cpu and ref: the closed form max(x, 0) - x t +
 * log1p(exp(-|x|)) has exact limits there (x (1 - t) for large x > 0, -x t for x < 0), and the
 * gradient d/dx = sigmoid(x) - t, d/dt = -x: finite everywhere. */
static void test_bce_extreme(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    static const double xs[] = {1e4, -1e4, 1e30, -1e30, 700, -700, 100, -100, 0, 1};
    static const double ts[] = {1, 0, 0, 1, 0.25, 0.75, 1, 0, 0.5, 0.3};
    int64_t n = 10;
    const char *backends[] = {"backend=cpu", "backend=ref"};
    for (int d = 0; d < 2; d++) {
        nx_dtype dt = d ? NX_DTYPE_F64 : NX_DTYPE_F32;
        for (int b = 0; b < 2; b++) {
            nx_tensor *x = tensor(ctx, dt, 1, &n, xs), *t = tensor(ctx, dt, 1, &n, ts), *y;
            const char *opts[] = {backends[b], NULL};
            assert_int_equal(call(ctx, "bce_with_logits", 2, (const nx_tensor *const[]){x, t},
                                  opts, &y),
                             NX_OK);
            for (int64_t i = 0; i < n; i++) {
                double xv = at(x, i), want = fmax(xv, 0) - xv * ts[i] + log1p(exp(-fabs(xv)));
                /* f32: results below FLT_MIN (x = 100: 3.7e-44) keep only an absolute accuracy */
                double rtol = dt == NX_DTYPE_F32 ? 1e-6 : 1e-14;
                double atol = dt == NX_DTYPE_F32 ? 1e-44 : 1e-320;
                if (!nx_test_close(at(y, i), want, rtol, atol))
                    fail_msg("bce %s %s x=%g t=%g: %.17g, expected %.17g", nx_dtype_name(dt),
                             backends[b], xv, ts[i], at(y, i), want);
            }
            nx_tensor *dy = tensor(ctx, dt, 1, &n, (const double[]){1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
            nx_tensor *dx[4] = {0};
            assert_int_equal(nx_op_vjp(ctx, "bce_with_logits", 2,
                                       (const nx_tensor *const[]){x, t}, 1,
                                       (const char *const[]){"backend"},
                                       (const char *const[]){b ? "ref" : "cpu"}, 1,
                                       (const nx_tensor *const[]){dy}, dx),
                             NX_OK);
            for (int64_t i = 0; i < n; i++) {
                double xv = at(x, i), gx = sigmoid(xv) - ts[i];
                double tol = dt == NX_DTYPE_F32 ? 1e-6 : 1e-15;
                if (!nx_test_close(at(dx[0], i), gx, tol, tol) ||
                    !nx_test_close(at(dx[1], i), -xv, tol, 0))
                    fail_msg("bce grad %s x=%g t=%g: d/dx %.17g (want %.17g), d/dt %.17g (want "
                             "%.17g)",
                             nx_dtype_name(dt), xv, ts[i], at(dx[0], i), gx, at(dx[1], i), -xv);
            }
            nx_tensor_free(dx[0]);
            nx_tensor_free(dx[1]);
            nx_tensor_free(dy);
            nx_tensor_free(x);
            nx_tensor_free(t);
            nx_tensor_free(y);
        }
    }
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* Cross-entropy at logits of +-1e4 and +-1e30 (f64; 1e4 in f32): -log softmax has the exact value
 * max - x_target when the others are far below (0 for the top class), and the gradient
 * softmax - onehot is exactly 0 or +-1 there. */
static void test_ce_extreme(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    for (int d = 0; d < 2; d++) {
        nx_dtype dt = d ? NX_DTYPE_F64 : NX_DTYPE_F32;
        double big = d ? 1e30 : 1e4;
        /* (3 samples, 3 classes): class axis 1 */
        double xs[9] = {big, -big, 0, -big, big, 1, 2, 0, -big};
        double tg[3] = {0, 0, 1};
        int64_t shape[2] = {3, 3}, n = 3;
        nx_tensor *x = tensor(ctx, dt, 2, shape, xs), *t = tensor(ctx, NX_DTYPE_I64, 1, &n, tg);
        nx_tensor *y;
        assert_int_equal(call(ctx, "cross_entropy_with_logits", 2,
                              (const nx_tensor *const[]){x, t}, NULL, &y),
                         NX_OK);
        double want[3] = {0, 2 * big, 2 - 0 + log1p(exp(-2))};
        /* sample 2: lse(2, 0, -big) - 0 = 2 + log1p(exp(-2)) */
        for (int i = 0; i < 3; i++)
            if (!nx_test_close(at(y, i), want[i], d ? 1e-15 : 1e-6, 0))
                fail_msg("ce %s sample %d: %.17g, expected %.17g", nx_dtype_name(dt), i,
                         at(y, i), want[i]);
        nx_tensor *dy = tensor(ctx, dt, 1, &n, (const double[]){1, 1, 1}), *dx[2] = {0};
        if (nx_op_vjp(ctx, "cross_entropy_with_logits", 2, (const nx_tensor *const[]){x, t}, 0,
                      NULL, NULL, 1, (const nx_tensor *const[]){dy}, dx) != NX_OK)
            fail_msg("ce vjp %s: %s", nx_dtype_name(dt), nx_ctx_last_error(ctx));
        assert_null(dx[1]); /* integer targets carry no gradient */
        double p0 = 1 / (1 + exp(-2)); /* softmax of (2, 0, -big) */
        double gwant[9] = {0, 0, 0, -1, 1, 0, p0, 1 - p0 - 1, 0};
        for (int i = 0; i < 9; i++)
            if (!nx_test_close(at(dx[0], i), gwant[i], d ? 1e-15 : 1e-6, d ? 1e-15 : 1e-7))
                fail_msg("ce grad %s [%d]: %.17g, expected %.17g", nx_dtype_name(dt), i,
                         at(dx[0], i), gwant[i]);
        nx_tensor_free(dx[0]);
        nx_tensor_free(dy);
        nx_tensor_free(x);
        nx_tensor_free(t);
        nx_tensor_free(y);
    }
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* Focal loss at logits of +-1e4 and +-1000 with gamma 0.5, where 1 - p_t underflows to 0 and the
 * factor's slope is infinite: the values are the closed-form limits (0 for an easy example,
 * alpha_t x (1 - t)... for a hard one) and every gradient is finite. */
static void test_focal_extreme(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    static const double xs[] = {1e4, -1e4, 1000, -1000, 1e4, -1e4};
    static const double ts[] = {1, 0, 1, 0, 0, 1};
    int64_t n = 6;
    for (int d = 0; d < 2; d++) {
        nx_dtype dt = d ? NX_DTYPE_F64 : NX_DTYPE_F32;
        nx_tensor *x = tensor(ctx, dt, 1, &n, xs), *t = tensor(ctx, dt, 1, &n, ts), *y;
        const char *opts[] = {"gamma=0.5", "alpha=0.25", NULL};
        assert_int_equal(call(ctx, "focal_loss", 2, (const nx_tensor *const[]){x, t}, opts, &y),
                         NX_OK);
        /* easy examples: 0; hard ones: alpha_t * |x| * 1^gamma */
        double want[6] = {0, 0, 0, 0, 0.75 * 1e4, 0.25 * 1e4};
        for (int i = 0; i < 6; i++)
            if (!nx_test_close(at(y, i), want[i], 1e-12, 0))
                fail_msg("focal %s x=%g t=%g: %.17g, expected %.17g", nx_dtype_name(dt), xs[i],
                         ts[i], at(y, i), want[i]);
        nx_tensor *dy = tensor(ctx, dt, 1, &n, (const double[]){1, 1, 1, 1, 1, 1}), *dx[3] = {0};
        const char *keys[] = {"gamma", "alpha"}, *vals[] = {"0.5", "0.25"};
        assert_int_equal(nx_op_vjp(ctx, "focal_loss", 2, (const nx_tensor *const[]){x, t}, 2,
                                   keys, vals, 1, (const nx_tensor *const[]){dy}, dx),
                         NX_OK);
        for (int i = 0; i < 6; i++)
            if (!isfinite(at(dx[0], i)) || !isfinite(at(dx[1], i)))
                fail_msg("focal grad %s x=%g t=%g: d/dx %g, d/dt %g", nx_dtype_name(dt), xs[i],
                         ts[i], at(dx[0], i), at(dx[1], i));
        /* hard examples: d/dx = alpha_t * d|x|... = 0.75 (x > 0, t = 0), -0.25 (x < 0, t = 1) */
        assert_true(nx_test_close(at(dx[0], 4), 0.75, 1e-12, 0));
        assert_true(nx_test_close(at(dx[0], 5), -0.25, 1e-12, 0));
        for (int i = 0; i < 4; i++)
            assert_true(at(dx[0], i) == 0);
        nx_tensor_free(dx[0]);
        nx_tensor_free(dx[1]);
        nx_tensor_free(dy);
        nx_tensor_free(x);
        nx_tensor_free(t);
        nx_tensor_free(y);
    }
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* ---- identities between the ops ------------------------------------------------------------ */

static double max_diff(const nx_tensor *a, const nx_tensor *b)
{
    assert_int_equal(nx_tensor_numel(a), nx_tensor_numel(b));
    double m = 0;
    for (int64_t i = 0; i < nx_tensor_numel(a); i++)
        m = fmax(m, fabs(at(a, i) - at(b, i)));
    return m;
}

/* focal_loss(gamma=0, alpha<0) is bce_with_logits; cross_entropy_with_logits over two classes
 * (a, b) with target 1 is bce of b - a with target 1, and with target 0 bce of b - a with
 * target 0. */
static void test_logit_identities(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t shape[2] = {5, 7};
    nx_tensor *x = random_f64(ctx, 2, shape, 20), *t = random_f64(ctx, 2, shape, 0.5);
    for (int64_t i = 0; i < 35; i++)
        ((double *)nx_tensor_data(t))[i] += 0.5;
    nx_tensor *yb, *yf;
    assert_int_equal(call(ctx, "bce_with_logits", 2, (const nx_tensor *const[]){x, t}, NULL, &yb),
                     NX_OK);
    assert_int_equal(call(ctx, "focal_loss", 2, (const nx_tensor *const[]){x, t},
                          (const char *const[]){"gamma=0", "alpha=-1", NULL}, &yf),
                     NX_OK);
    assert_true(max_diff(yb, yf) <= 1e-14);
    nx_tensor_free(yb);
    nx_tensor_free(yf);
    nx_tensor_free(t);

    /* two classes on the last axis of (5, 7, 2): logits (a, b) */
    int64_t s3[3] = {5, 7, 2};
    nx_tensor *ab = random_f64(ctx, 3, s3, 30), *tg = tensor(ctx, NX_DTYPE_I32, 2, shape, NULL);
    nx_tensor *diff = tensor(ctx, NX_DTYPE_F64, 2, shape, NULL);
    nx_tensor *tf = tensor(ctx, NX_DTYPE_F64, 2, shape, NULL);
    for (int64_t i = 0; i < 35; i++) {
        int32_t c = urand() < 0.5;
        ((int32_t *)nx_tensor_data(tg))[i] = c;
        ((double *)nx_tensor_data(tf))[i] = c;
        ((double *)nx_tensor_data(diff))[i] = at(ab, 2 * i + 1) - at(ab, 2 * i);
    }
    nx_tensor *yc;
    assert_int_equal(call(ctx, "cross_entropy_with_logits", 2,
                          (const nx_tensor *const[]){ab, tg}, (const char *const[]){"axis=2", NULL},
                          &yc),
                     NX_OK);
    assert_int_equal(call(ctx, "bce_with_logits", 2, (const nx_tensor *const[]){diff, tf}, NULL,
                          &yb),
                     NX_OK);
    assert_true(max_diff(yc, yb) <= 1e-13);
    nx_tensor_free(yc);
    nx_tensor_free(yb);
    nx_tensor_free(ab);
    nx_tensor_free(tg);
    nx_tensor_free(diff);
    nx_tensor_free(tf);
    nx_tensor_free(x);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* info_nce: scaling rows of za and zb by positive factors changes nothing (they are normalised
 * inside), and swapping za and zb gives the same per-pair values (the score is symmetric). */
static void test_info_nce_invariants(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t shape[2] = {7, 4};
    nx_tensor *za = random_f64(ctx, 2, shape, 1), *zb = random_f64(ctx, 2, shape, 1);
    nx_tensor *sa = tensor(ctx, NX_DTYPE_F64, 2, shape, NULL);
    for (int64_t i = 0; i < 7; i++) {
        double f = pow(10.0, 6 * urand() - 3);
        for (int64_t j = 0; j < 4; j++)
            ((double *)nx_tensor_data(sa))[i * 4 + j] = f * at(za, i * 4 + j);
    }
    const char *opts[] = {"temperature=0.2", NULL};
    nx_tensor *y, *ys, *yw;
    assert_int_equal(call(ctx, "info_nce", 2, (const nx_tensor *const[]){za, zb}, opts, &y),
                     NX_OK);
    assert_int_equal(call(ctx, "info_nce", 2, (const nx_tensor *const[]){sa, zb}, opts, &ys),
                     NX_OK);
    assert_int_equal(call(ctx, "info_nce", 2, (const nx_tensor *const[]){zb, za}, opts, &yw),
                     NX_OK);
    assert_int_equal(nx_tensor_numel(y), 7);
    assert_true(max_diff(y, ys) <= 1e-13);
    assert_true(max_diff(y, yw) <= 1e-13);
    for (int64_t i = 0; i < 7; i++)
        assert_true(at(y, i) > 0);
    nx_tensor_free(y);
    nx_tensor_free(ys);
    nx_tensor_free(yw);
    nx_tensor_free(za);
    nx_tensor_free(zb);
    nx_tensor_free(sa);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* ibot with every token masked is the per-sample mean over the tokens of dino's values; with no
 * token masked a sample gives 0 and a zero gradient (not 0/0). */
static void test_ibot_vs_dino(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t s3[3] = {2, 4, 5}, k = 5, bt[2] = {2, 4};
    nx_tensor *s = random_f64(ctx, 3, s3, 2), *t = random_f64(ctx, 3, s3, 2);
    nx_tensor *c = random_f64(ctx, 1, &k, 0.3);
    double ones[8] = {1, 1, 1, 1, 0, 0, 0, 0};
    nx_tensor *m = tensor(ctx, NX_DTYPE_BOOL, 2, bt, ones);
    nx_tensor *yi, *yd;
    assert_int_equal(call(ctx, "ibot_cross_entropy", 4, (const nx_tensor *const[]){s, t, c, m},
                          NULL, &yi),
                     NX_OK);
    assert_int_equal(call(ctx, "dino_cross_entropy", 3, (const nx_tensor *const[]){s, t, c},
                          NULL, &yd),
                     NX_OK);
    double mean0 = 0;
    for (int i = 0; i < 4; i++)
        mean0 += at(yd, i) / 4;
    assert_true(nx_test_close(at(yi, 0), mean0, 1e-13, 0));
    assert_true(at(yi, 1) == 0);
    nx_tensor *dy = tensor(ctx, NX_DTYPE_F64, 1, &bt[0], (const double[]){1, 1}), *dx[4] = {0};
    assert_int_equal(nx_op_vjp(ctx, "ibot_cross_entropy", 4,
                               (const nx_tensor *const[]){s, t, c, m}, 0, NULL, NULL, 1,
                               (const nx_tensor *const[]){dy}, dx),
                     NX_OK);
    assert_null(dx[3]); /* a bool mask carries no gradient */
    for (int64_t i = 0; i < 40; i++) {
        assert_true(isfinite(at(dx[0], i)) && isfinite(at(dx[1], i)));
        if (i >= 20) /* sample 1: no masked token */
            assert_true(at(dx[0], i) == 0 && at(dx[1], i) == 0);
    }
    for (int i = 0; i < 3; i++)
        nx_tensor_free(dx[i]);
    nx_tensor_free(dy);
    nx_tensor_free(yi);
    nx_tensor_free(yd);
    nx_tensor_free(s);
    nx_tensor_free(t);
    nx_tensor_free(c);
    nx_tensor_free(m);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* koleo of two points: each is the other's neighbour, y = -log(||u0 - u1 + 1e-8|| + eps) for
 * both; the gradient is finite for two identical points (distance 1e-8 sqrt(d)). */
static void test_koleo_two_points(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t s2[2] = {2, 3};
    double z[6] = {3, 0, 4, -1, 2, 2};
    nx_tensor *zt = tensor(ctx, NX_DTYPE_F64, 2, s2, z), *y;
    assert_int_equal(call(ctx, "koleo", 1, (const nx_tensor *const[]){zt},
                          (const char *const[]){"eps=1e-3", NULL}, &y),
                     NX_OK);
    double u[6] = {0.6, 0, 0.8, -1.0 / 3, 2.0 / 3, 2.0 / 3}, d0 = 0, d1 = 0;
    for (int j = 0; j < 3; j++) {
        d0 += pow(u[j] - u[3 + j] + 1e-8, 2);
        d1 += pow(u[3 + j] - u[j] + 1e-8, 2);
    }
    assert_true(nx_test_close(at(y, 0), -log(sqrt(d0) + 1e-3), 1e-14, 0));
    assert_true(nx_test_close(at(y, 1), -log(sqrt(d1) + 1e-3), 1e-14, 0));
    nx_tensor_free(y);
    nx_tensor_free(zt);
    double dup[6] = {1, 2, 3, 1, 2, 3};
    zt = tensor(ctx, NX_DTYPE_F64, 2, s2, dup);
    nx_tensor *dy = tensor(ctx, NX_DTYPE_F64, 1, &s2[0], (const double[]){1, 1}), *dx[1] = {0};
    assert_int_equal(nx_op_vjp(ctx, "koleo", 1, (const nx_tensor *const[]){zt}, 0, NULL, NULL, 1,
                               (const nx_tensor *const[]){dy}, dx),
                     NX_OK);
    for (int i = 0; i < 6; i++)
        assert_true(isfinite(at(dx[0], i)));
    nx_tensor_free(dx[0]);
    nx_tensor_free(dy);
    nx_tensor_free(zt);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* ---- bad input ----------------------------------------------------------------------------- */

#define WORDS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define INS(...) ((const nx_tensor *const[]){__VA_ARGS__})
#define OPTS(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_bad_logits(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s2 = 2, s4 = 4, s3 = 3;
    nx_tensor *x = random_f64(ctx, 2, s23, 1), *t = random_f64(ctx, 2, s23, 1);
    nx_tensor *t32 = random_f64(ctx, 2, s32, 1);
    nx_tensor *x32 = tensor(ctx, NX_DTYPE_F32, 2, s23, NULL);
    nx_tensor *xi = tensor(ctx, NX_DTYPE_I32, 2, s23, NULL);
    nx_tensor *pw4 = random_f64(ctx, 1, &s4, 1), *pw3f = tensor(ctx, NX_DTYPE_F32, 1, &s3, NULL);
    const nx_status E = NX_ERR_INVALID_ARG;
    /* bce: shapes, dtypes, pos_weight */
    expect_error(ctx, "bce_with_logits", 2, INS(x, t32), NULL, E, WORDS("different shapes"));
    expect_error(ctx, "bce_with_logits", 2, INS(x, x32), NULL, E, WORDS("same float dtype"));
    expect_error(ctx, "bce_with_logits", 2, INS(xi, xi), NULL, E, WORDS("i32", "f32 or f64"));
    expect_error(ctx, "bce_with_logits", 4, INS(x, t, NULL, pw4), NULL, E,
                 WORDS("pos_weight", "broadcast"));
    expect_error(ctx, "bce_with_logits", 4, INS(x, t, NULL, pw3f), NULL, E,
                 WORDS("pos_weight", "f32"));
    expect_error(ctx, "bce_with_logits", 3, INS(x, t, pw4), NULL, E, WORDS("mask", "broadcast"));
    expect_error(ctx, "bce_with_logits", 2, INS(x, t), OPTS("reduction=max"), E,
                 WORDS("reduction"));
    /* focal: option ranges */
    expect_error(ctx, "focal_loss", 2, INS(x, t32), NULL, E, WORDS("different shapes"));
    nx_tensor *y = NULL;
    const char *k1[] = {"gamma"}, *v1[] = {"-1"};
    assert_int_equal(nx_op_call(ctx, "focal_loss", 2, INS(x, t), 1, k1, v1, 1, &y), E);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "gamma"));
    const char *k2[] = {"alpha"}, *v2[] = {"1.5"};
    assert_int_equal(nx_op_call(ctx, "focal_loss", 2, INS(x, t), 1, k2, v2, 1, &y), E);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "alpha"));

    /* cross-entropy: targets */
    double good[2] = {0, 2}, high[2] = {0, 3}, neg[2] = {-1, 0}, fl[2] = {0, 1};
    nx_tensor *tg = tensor(ctx, NX_DTYPE_I64, 1, &s2, good);
    nx_tensor *th = tensor(ctx, NX_DTYPE_I64, 1, &s2, high);
    nx_tensor *tn = tensor(ctx, NX_DTYPE_I32, 1, &s2, neg);
    nx_tensor *tf = tensor(ctx, NX_DTYPE_F64, 1, &s2, fl);
    nx_tensor *t3 = tensor(ctx, NX_DTYPE_I64, 1, &s3, NULL);
    nx_tensor *t22 = tensor(ctx, NX_DTYPE_I64, 2, (int64_t[]){2, 1}, NULL);
    nx_tensor *x0 = tensor(ctx, NX_DTYPE_F64, 0, NULL, (const double[]){1});
    nx_tensor *yc = NULL;
    assert_int_equal(call(ctx, "cross_entropy_with_logits", 2, INS(x, tg), NULL, &yc), NX_OK);
    nx_tensor_free(yc);
    expect_error(ctx, "cross_entropy_with_logits", 2, INS(x, th), NULL, E,
                 WORDS("target element 1", "is 3", "[0, 3)"));
    expect_error(ctx, "cross_entropy_with_logits", 2, INS(x, tn), NULL, E,
                 WORDS("target element 0", "is -1"));
    expect_error(ctx, "cross_entropy_with_logits", 2, INS(x, tf), NULL, E,
                 WORDS("target is f64", "i32 or i64"));
    expect_error(ctx, "cross_entropy_with_logits", 2, INS(x, t3), NULL, E,
                 WORDS("does not match", "axis 1 removed"));
    expect_error(ctx, "cross_entropy_with_logits", 2, INS(x, t22), NULL, E,
                 WORDS("rank 2", "does not match"));
    expect_error(ctx, "cross_entropy_with_logits", 2, INS(x, tg), OPTS("axis=2"), E,
                 WORDS("axis 2", "out of range"));
    expect_error(ctx, "cross_entropy_with_logits", 2, INS(x0, t3), OPTS("axis=0"), E,
                 WORDS("0-d"));
    /* the last axis of (2, 3) holds 3 classes; a target of 3 there is out of range too */
    expect_error(ctx, "cross_entropy_with_logits", 2, INS(x, th), OPTS("axis=-1"), E,
                 WORDS("is 3", "[0, 3)"));

    nx_tensor *free_list[] = {x, t, t32, x32, xi, pw4, pw3f, tg, th, tn, tf, t3, t22, x0};
    for (size_t i = 0; i < sizeof free_list / sizeof *free_list; i++)
        nx_tensor_free(free_list[i]);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void test_bad_contrastive(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    const nx_status E = NX_ERR_INVALID_ARG;
    int64_t s43[2] = {4, 3}, s53[2] = {5, 3}, s3d[3] = {2, 4, 3}, s1[2] = {1, 3}, k3 = 3,
            k4 = 4, bt[2] = {2, 4}, tb[2] = {4, 2};
    nx_tensor *za = random_f64(ctx, 2, s43, 1), *zb = random_f64(ctx, 2, s43, 1);
    nx_tensor *z5 = random_f64(ctx, 2, s53, 1), *z3d = random_f64(ctx, 3, s3d, 1);
    nx_tensor *z1 = random_f64(ctx, 2, s1, 1), *v3 = random_f64(ctx, 1, &k3, 1);
    nx_tensor *c4 = random_f64(ctx, 1, &k4, 1);
    nx_tensor *m = tensor(ctx, NX_DTYPE_BOOL, 2, bt, NULL);
    nx_tensor *mt = tensor(ctx, NX_DTYPE_BOOL, 2, tb, NULL);
    nx_tensor *mf = tensor(ctx, NX_DTYPE_F64, 2, bt, NULL);
    /* info_nce */
    expect_error(ctx, "info_nce", 2, INS(za, z5), NULL, E, WORDS("different shapes"));
    expect_error(ctx, "info_nce", 2, INS(z3d, z3d), NULL, E, WORDS("rank 3", "(n, d)"));
    expect_error(ctx, "info_nce", 2, INS(za, zb), OPTS("temperature=0"), E,
                 WORDS("temperature", "> 0"));
    nx_tensor *y = NULL;
    const char *kt[] = {"temperature"}, *vt[] = {"-0.5"};
    assert_int_equal(nx_op_call(ctx, "info_nce", 2, INS(za, zb), 1, kt, vt, 1, &y), E);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "temperature"));
    /* dino */
    expect_error(ctx, "dino_cross_entropy", 3, INS(za, z5, v3), NULL, E,
                 WORDS("different shapes"));
    expect_error(ctx, "dino_cross_entropy", 3, INS(za, zb, c4), NULL, E,
                 WORDS("center", "broadcast"));
    expect_error(ctx, "dino_cross_entropy", 3, INS(za, zb, v3), OPTS("student_temp=0"), E,
                 WORDS("student_temp", "> 0"));
    expect_error(ctx, "dino_cross_entropy", 3, INS(za, zb, v3), OPTS("teacher_temp=0"), E,
                 WORDS("teacher_temp", "> 0"));
    /* ibot */
    expect_error(ctx, "ibot_cross_entropy", 4, INS(za, zb, v3, m), NULL, E,
                 WORDS("rank 2", "(batch, tokens, k)"));
    expect_error(ctx, "ibot_cross_entropy", 4, INS(z3d, z3d, v3, mt), NULL, E,
                 WORDS("mask", "(batch, tokens)"));
    expect_error(ctx, "ibot_cross_entropy", 4, INS(z3d, z3d, v3, mf), NULL, E,
                 WORDS("mask is f64", "bool"));
    expect_error(ctx, "ibot_cross_entropy", 4, INS(z3d, z3d, c4, m), NULL, E,
                 WORDS("center"));
    /* koleo */
    expect_error(ctx, "koleo", 1, INS(z1), NULL, E, WORDS("n >= 2"));
    expect_error(ctx, "koleo", 1, INS(v3), NULL, E, WORDS("rank 1", "(n, d)"));
    expect_error(ctx, "koleo", 1, INS(za), OPTS("eps=0"), E, WORDS("eps", "> 0"));
    nx_tensor *free_list[] = {za, zb, z5, z3d, z1, v3, c4, m, mt, mf};
    for (size_t i = 0; i < sizeof free_list / sizeof *free_list; i++)
        nx_tensor_free(free_list[i]);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* Every allocation failure on the way through a pos-weighted bce and its vjp (on the reference
 * interpreter, which compiles nothing) is NX_ERR_NOMEM and leaks nothing. */
static nx_status sweep_body(nx_ctx *ctx, void *user)
{
    (void)user;
    int64_t s[2] = {3, 4}, k = 4;
    nx_tensor *x = NULL, *t = NULL, *pw = NULL, *y = NULL, *dx[4] = {0};
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F64, 2, s, &x);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F64, 2, s, &t);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F64, 1, &k, &pw);
    const char *keys[] = {"reduction", "backend"}, *vals[] = {"mean", "ref"};
    if (st == NX_OK)
        st = nx_op_call(ctx, "bce_with_logits", 4, INS(x, t, NULL, pw), 2, keys, vals, 1, &y);
    if (st == NX_OK)
        st = nx_op_vjp(ctx, "bce_with_logits", 4, INS(x, t, NULL, pw), 2, keys, vals, 1,
                       INS(y), dx);
    for (int i = 0; i < 4; i++)
        nx_tensor_free(dx[i]);
    nx_tensor_free(y);
    nx_tensor_free(pw);
    nx_tensor_free(t);
    nx_tensor_free(x);
    return st;
}

static void test_alloc_sweep(void **state)
{
    (void)state;
    assert_true(nx_test_alloc_sweep(sweep_body, NULL, 100000) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bce_extreme),        cmocka_unit_test(test_ce_extreme),
        cmocka_unit_test(test_focal_extreme),      cmocka_unit_test(test_logit_identities),
        cmocka_unit_test(test_info_nce_invariants), cmocka_unit_test(test_ibot_vs_dino),
        cmocka_unit_test(test_koleo_two_points),   cmocka_unit_test(test_bad_logits),
        cmocka_unit_test(test_bad_contrastive),    cmocka_unit_test(test_alloc_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
