/* The IIR engine of the signal family (signal.h): sos arrays and their checks, sosfilt_zi, the one
 * driver site `signal.iir` (runtime/divergent.def) and the cascade as a graph.
 *
 * Drivers of the recursion y[n] = u[n] + c1 y[n-1] + c2 y[n-2] (c = -a):
 *   scan         nx_scan_iir: the sequential recursion per line (canonical; bit-identical on
 *                every backend, docs/ir.md)
 *   associative  the state s[n] = (y[n], y[n-1]) obeys s[n] = A s[n-1] + (u[n], 0) with
 *                A = [[c1, c2], [1, 0]]; after level k each s[n] holds the inputs u[n - 2^k + 1
 *                .. n] and level k + 1 adds A^(2^k) s[n - 2^k] (Hillis-Steele doubling): ceil(log2
 *                N) elementwise levels, the powers of A computed on the host in double.
 * The FIR part and the initial states are the same elementwise graph for both. */
#include <math.h>
#include <string.h>

#include "ops/signal/signal.h"

static const char *const driver_names[] = {"auto", "scan", "associative"};

nx_status nx_sig_resolve(const nx_op_args *c, int driver, bool *assoc)
{
    if ((unsigned)driver > NX_SIG_ASSOCIATIVE)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: driver %d is out of range; expected auto, scan or associative",
                           c->who, driver);
    /* The registry's fast variant is the device's: on the host backends the sequential scan is
     * both the canonical and the faster one, so auto asks for it there. */
    const char *want = driver_names[driver];
    if (driver == NX_SIG_AUTO && c->backend != NX_BACKEND_CUDA)
        want = "scan";
    const char *variant = NULL;
    nx_status st = nx_driver_resolve(c->ctx, "signal.iir", want, &variant);
    if (st == NX_OK)
        *assoc = strcmp(variant, "associative") == 0;
    return st;
}

nx_status nx_sig_axis(const nx_op_args *c, int64_t axis, int ndim, int *out)
{
    if (axis < -ndim || axis >= ndim)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: axis %lld is out of range for x of rank %d; expected %d..%d",
                           c->who, (long long)axis, ndim, -ndim, ndim - 1);
    *out = (int)(axis < 0 ? axis + ndim : axis);
    return NX_OK;
}

/* The largest pole modulus of z^2 + a1 z + a2. */
static double pole_radius(double a1, double a2)
{
    double disc = a1 * a1 - 4 * a2;
    if (disc < 0)
        return sqrt(a2);
    double s = sqrt(disc);
    return fmax(fabs((-a1 + s) / 2), fabs((-a1 - s) / 2));
}

nx_status nx_sig_sos_read(const nx_op_args *c, const char *name, const nx_tensor *t,
                          nx_sig_sos *out)
{
    if (!t)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: %s is required: an (n_sections, 6) array of second-order "
                           "sections (butterworth_sos makes one)", c->who, name);
    nx_dtype dt = nx_tensor_dtype(t);
    const int64_t *sh = nx_tensor_shape(t);
    if (dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: %s is %s; expected float32 or "
                           "float64", c->who, name, nx_dtype_name(dt));
    if (nx_tensor_ndim(t) != 2 || sh[1] != 6 || sh[0] < 1 || sh[0] > NX_SIG_MAX_SECTIONS) {
        char shape[64] = "";
        for (int i = 0, o = 0; i < nx_tensor_ndim(t) && o < (int)sizeof shape - 24; i++)
            o += snprintf(shape + o, sizeof shape - (size_t)o, "%s%lld", i ? ", " : "",
                          (long long)sh[i]);
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: %s has shape (%s); expected (n_sections, 6) with 1 <= n_sections "
                           "<= %d (b0 b1 b2 a0 a1 a2 per row)", c->who, name, shape,
                           NX_SIG_MAX_SECTIONS);
    }
    nx_tensor *host = NULL, *cont = NULL;
    nx_status st = nx_tensor_device(t) != NX_DEVICE_HOST
                       ? nx_tensor_to_device(t, NX_DEVICE_HOST, &host)
                       : NX_OK;
    if (st == NX_OK)
        st = nx_tensor_contiguous(host ? host : t, &cont);
    nx_tensor_free(host);
    if (st != NX_OK)
        return st;
    memset(out, 0, sizeof *out);
    out->n = (int)sh[0];
    for (int i = 0; i < out->n; i++)
        for (int j = 0; j < 6; j++)
            out->s[i][j] = dt == NX_DTYPE_F64 ? ((const double *)nx_tensor_data(cont))[i * 6 + j]
                                              : ((const float *)nx_tensor_data(cont))[i * 6 + j];
    nx_tensor_free(cont);
    for (int i = 0; i < out->n; i++) {
        const double *s = out->s[i];
        for (int j = 0; j < 6; j++)
            if (!isfinite(s[j]))
                return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                                   "%s: %s[%d, %d] is %g; expected finite coefficients", c->who,
                                   name, i, j, s[j]);
        if (s[3] != 1)
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: %s[%d, 3] (a0) is %g; expected 1, as scipy's sosfilt "
                               "requires (divide the section's six coefficients by a0)",
                               c->who, name, i, s[3]);
        double r = pole_radius(s[4], s[5]);
        if (!(r < 1))
            return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                               "%s: section %d of %s (a1 = %g, a2 = %g) has a pole of modulus "
                               "%g; expected a stable filter (every pole inside the unit circle)",
                               c->who, i, name, s[4], s[5], r);
    }
    return NX_OK;
}

/* lfilter_zi of one section, closed form: (I - companion(a)^T) zi = b[1:] - a[1:] b0. */
void nx_sig_sosfilt_zi(const nx_sig_sos *s, double (*zi)[2])
{
    double scale = 1.0;
    for (int i = 0; i < s->n; i++) {
        const double *q = s->s[i];
        double b0 = q[0], b1 = q[1], b2 = q[2], a1 = q[4], a2 = q[5];
        double B0 = b1 - a1 * b0, B1 = b2 - a2 * b0, det = 1 + a1 + a2;
        zi[i][0] = scale * ((B0 + B1) / det);
        zi[i][1] = scale * (((1 + a1) * B1 - a2 * B0) / det);
        scale *= (b0 + b1 + b2) / (q[3] + a1 + a2);
    }
}

int64_t nx_sig_default_padlen(const nx_sig_sos *s)
{
    int zb = 0, za = 0;
    for (int i = 0; i < s->n; i++) {
        zb += s->s[i][2] == 0;
        za += s->s[i][5] == 0;
    }
    return 3 * (int64_t)(2 * s->n + 1 - (zb < za ? zb : za));
}

/* ---- the graph -----------------------------------------------------------------------------*/

/* The n-long slice of x along axis from start. */
static nx_node axis_slice(nx_graph *g, nx_node x, int axis, int64_t start, int64_t n)
{
    int64_t lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS];
    int nd = nx_node_ndim(g, x);
    nx_node_shape(g, x, hi);
    (void)nd;
    lo[axis] = start;
    hi[axis] = start + n;
    return nx_slice(g, x, lo, hi, NULL);
}

static nx_node axis_pad(nx_graph *g, nx_node x, int axis, int64_t lo_n, int64_t hi_n,
                        nx_border mode)
{
    int64_t lo[NX_MAX_DIMS] = {0}, hi[NX_MAX_DIMS] = {0};
    lo[axis] = lo_n;
    hi[axis] = hi_n;
    return nx_pad(g, x, lo, hi, mode, 0);
}

static int64_t axis_len(nx_graph *g, nx_node x, int axis)
{
    int64_t sh[NX_MAX_DIMS] = {0};
    nx_node_shape(g, x, sh);
    return sh[axis];
}

/* x shifted by d along the direction of the recursion: x[n - d] (reverse: x[n + d]), 0 beyond. */
static nx_node shift(nx_graph *g, nx_node x, int axis, int64_t d, bool reverse)
{
    int64_t n = axis_len(g, x, axis);
    nx_node p = axis_pad(g, x, axis, reverse ? 0 : d, reverse ? d : 0, NX_BORDER_CONSTANT);
    return axis_slice(g, p, axis, reverse ? d : 0, n);
}

/* u = b0 v + b1 v[n-1] + b2 v[n-2] (reverse: v[n+1], v[n+2]); zero terms left out. */
static nx_node fir(nx_graph *g, nx_node v, int axis, const double *b, bool reverse)
{
    nx_dtype dt = nx_node_dtype(g, v);
    int taps = b[2] != 0 ? 3 : b[1] != 0 ? 2 : 1;
    int64_t n = axis_len(g, v, axis);
    nx_node vp = taps > 1 ? axis_pad(g, v, axis, reverse ? 0 : taps - 1, reverse ? taps - 1 : 0,
                                     NX_BORDER_CONSTANT)
                          : v;
    nx_node u = NX_NONE;
    for (int k = 0; k < taps; k++) {
        if (b[k] == 0 && !(k == 0 && taps == 1))
            continue;
        nx_node t = taps > 1 ? axis_slice(g, vp, axis, reverse ? k : taps - 1 - k, n) : v;
        t = nx_mul(g, t, nx_scalar(g, dt, b[k]));
        u = u == NX_NONE ? t : nx_add(g, u, t);
    }
    return u;
}

/* zscale * (zi0 at the start, zi1 next), 0 elsewhere: v's shape. */
static nx_node start_terms(nx_graph *g, nx_node zscale, int axis, int nd, int64_t n,
                           const double *zi, bool reverse)
{
    nx_dtype dt = nx_node_dtype(g, zscale);
    int64_t sh[NX_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        sh[i] = 1;
    sh[axis] = n;
    nx_node idx = nx_iota(g, NX_DTYPE_I64, nd, sh, axis);
    nx_node first = nx_scalar(g, NX_DTYPE_I64, reverse ? (double)(n - 1) : 0);
    nx_node second = nx_scalar(g, NX_DTYPE_I64, reverse ? (double)(n - 2) : 1);
    nx_node e = nx_select(g, nx_eq(g, idx, first), nx_scalar(g, dt, zi[0]),
                          nx_select(g, nx_eq(g, idx, second), nx_scalar(g, dt, zi[1]),
                                    nx_scalar(g, dt, 0)));
    return nx_mul(g, zscale, e);
}

static void mat2_mul(const double *a, const double *b, double *out)
{
    double r[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
                   a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
    memcpy(out, r, sizeof r);
}

/* x computed once into a buffer of its own. Fusion would otherwise inline each level into the
 * next, and a level reads its operand at two offsets, so the expression would double per level;
 * an inclusive sum scan over an added axis of extent 1 (the identity, a library kernel) makes the
 * level's state a buffer. */
static nx_node materialise(nx_graph *g, nx_node x)
{
    int64_t sh[NX_MAX_DIMS + 1] = {0};
    int nd = nx_node_ndim(g, x);
    nx_node_shape(g, x, sh);
    sh[nd] = 1;
    nx_node y = nx_scan(g, nx_reshape(g, x, nd + 1, sh), nd, NX_MONOID_SUM, false);
    return nx_reshape(g, y, nd, sh);
}

/* y[n] = u[n] + c1 y[n-1] + c2 y[n-2] by log-depth doubling of the state (the file's comment). */
static nx_node assoc_iir(nx_graph *g, nx_node u, int axis, double c1, double c2, bool reverse)
{
    nx_dtype dt = nx_node_dtype(g, u);
    int64_t n = axis_len(g, u, axis);
    double p[4] = {c1, c2, 1, 0};
    nx_node s0 = u, s1 = NX_NONE;
    for (int64_t d = 1; d < n; d *= 2) {
        nx_node h0 = shift(g, s0, axis, d, reverse);
        nx_node n0 = nx_add(g, s0, nx_mul(g, h0, nx_scalar(g, dt, p[0])));
        nx_node n1 = NX_NONE;
        if (c2 != 0) {
            n1 = nx_mul(g, h0, nx_scalar(g, dt, p[2]));
            if (s1 != NX_NONE) {
                nx_node h1 = shift(g, s1, axis, d, reverse);
                n0 = nx_add(g, n0, nx_mul(g, h1, nx_scalar(g, dt, p[1])));
                n1 = nx_add(g, nx_add(g, s1, n1), nx_mul(g, h1, nx_scalar(g, dt, p[3])));
            }
        }
        if (d > n / 2)
            return n0;
        s0 = materialise(g, n0);
        s1 = n1 == NX_NONE ? NX_NONE : materialise(g, n1);
        mat2_mul(p, p, p);
    }
    return s0;
}

nx_node nx_sig_cascade(nx_graph *g, nx_node v, int axis, const nx_sig_sos *s, bool reverse,
                       nx_node zscale, const double (*zi)[2], bool assoc)
{
    int nd = nx_node_ndim(g, v);
    int64_t n = axis_len(g, v, axis);
    for (int i = 0; i < s->n; i++) {
        const double *q = s->s[i];
        nx_node u = fir(g, v, axis, q, reverse);
        if (zscale != NX_NONE)
            u = nx_add(g, u, start_terms(g, zscale, axis, nd, n, zi[i], reverse));
        double c[2] = {-q[4], -q[5]};
        int order = c[1] != 0 ? 2 : c[0] != 0 ? 1 : 0;
        if (order == 0)
            v = u;
        else if (assoc)
            v = assoc_iir(g, u, axis, c[0], c[1], reverse);
        else
            v = nx_scan_iir(g, u, axis, reverse, order, c);
    }
    return v;
}

nx_node nx_sig_filtfilt(nx_graph *g, nx_node x, int axis, const nx_sig_sos *s, int padtype,
                        int64_t edge, bool assoc)
{
    nx_dtype dt = nx_node_dtype(g, x);
    int64_t n = axis_len(g, x, axis);
    nx_node ext = x;
    if (padtype != NX_SIG_PAD_NONE && edge > 0) {
        if (padtype == NX_SIG_PAD_EVEN)
            ext = axis_pad(g, x, axis, edge, edge, NX_BORDER_MIRROR);
        else if (padtype == NX_SIG_PAD_CONSTANT)
            ext = axis_pad(g, x, axis, edge, edge, NX_BORDER_NEAREST);
        else /* odd: 2 x_end - the mirror image (scipy's odd_ext) */
            ext = nx_sub(g,
                         nx_mul(g, axis_pad(g, x, axis, edge, edge, NX_BORDER_NEAREST),
                                nx_scalar(g, dt, 2)),
                         axis_pad(g, x, axis, edge, edge, NX_BORDER_MIRROR));
    } else {
        edge = 0;
    }
    int64_t m = n + 2 * edge;
    double zi[NX_SIG_MAX_SECTIONS][2];
    nx_sig_sosfilt_zi(s, zi);
    nx_node x0 = axis_slice(g, ext, axis, 0, 1);
    nx_node y = nx_sig_cascade(g, ext, axis, s, false, x0, (const double(*)[2])zi, assoc);
    nx_node y0 = axis_slice(g, y, axis, m - 1, 1);
    y = nx_sig_cascade(g, y, axis, s, true, y0, (const double(*)[2])zi, assoc);
    return edge > 0 ? axis_slice(g, y, axis, edge, n) : y;
}

nx_status nx_sig_check_x(const nx_op_args *c, const nx_tensor *x, int64_t axis, int *ax)
{
    nx_dtype dt = nx_tensor_dtype(x);
    if (dt != NX_DTYPE_F32 && dt != NX_DTYPE_F64)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: x is %s; expected float32 or float64",
                           c->who, nx_dtype_name(dt));
    int nd = nx_tensor_ndim(x);
    if (nd < 1)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: x is 0-d; expected at least one axis",
                           c->who);
    nx_status st = nx_sig_axis(c, axis, nd, ax);
    if (st != NX_OK)
        return st;
    for (int i = 0; i < nd; i++)
        if (nx_tensor_shape(x)[i] == 0)
            return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                               "%s: x is empty (axis %d has extent 0); expected samples to "
                               "filter", c->who, i);
    return NX_OK;
}

/* ---- running ---------------------------------------------------------------------------------*/

/* Bytes of x per block on the cpu backend: the cascade's intermediates of a block (a few buffers
 * of this size) stay in the cache between its kernels. */
#define BLOCK_BYTES ((int64_t)1 << 21)

static nx_status run_whole(const nx_op_args *c, nx_op_stage_fn build, const void *user,
                           nx_tensor **outs)
{
    nx_program *p = NULL;
    nx_status st = nx_op_program(c, NULL, NULL, build, user, 1, &p);
    if (st != NX_OK)
        return st;
    if (c->dy)
        return nx_program_run(p, (const nx_tensor *const[]){c->in[0], c->dy[0]}, outs);
    return nx_program_run(p, (const nx_tensor *const[]){c->in[0]}, outs);
}

nx_status nx_sig_run(const nx_op_args *c, nx_op_stage_fn build, const void *user, int axis,
                     nx_tensor **outs)
{
    const nx_tensor *x = c->in[0];
    int64_t rows = nx_tensor_shape(x)[0], numel = nx_tensor_numel(x);
    size_t es = nx_dtype_size(nx_tensor_dtype(x));
    int64_t row_bytes = numel / rows * (int64_t)es;
    int64_t block = row_bytes < BLOCK_BYTES ? BLOCK_BYTES / row_bytes : 1;
    if (c->dy || c->backend != NX_BACKEND_CPU || axis == 0 || block >= rows ||
        nx_tensor_device(x) != NX_DEVICE_HOST || !nx_tensor_is_contiguous(x))
        return run_whole(c, build, user, outs);
    nx_tensor *y = NULL;
    nx_status st = nx_tensor_new(c->ctx, nx_tensor_dtype(x), nx_tensor_ndim(x),
                                 nx_tensor_shape(x), &y);
    for (int64_t r0 = 0; st == NX_OK && r0 < rows; r0 += block) {
        int64_t r1 = r0 + block < rows ? r0 + block : rows;
        nx_tensor *view = NULL, *yb = NULL;
        st = nx_tensor_slice(x, 0, r0, r1, 1, &view);
        if (st == NX_OK) {
            nx_op_args b = *c;
            b.in = (const nx_tensor *const[]){view};
            st = run_whole(&b, build, user, &yb);
        }
        if (st == NX_OK)
            memcpy((char *)nx_tensor_data(y) + r0 * row_bytes, nx_tensor_data(yb),
                   (size_t)((r1 - r0) * row_bytes));
        nx_tensor_free(view);
        nx_tensor_free(yb);
        nx_op_progress(c, r1, rows);
    }
    if (st != NX_OK) {
        nx_tensor_free(y);
        return st;
    }
    outs[0] = y;
    return NX_OK;
}
