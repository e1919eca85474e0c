/* The signal family's shared pieces (docs/signal.md): the Butterworth design on the host
 * (design.c), the second-order-section arrays and their checks, the IIR engine (iir.c: the one
 * driver site `signal.iir`, runtime/divergent.def) and the filtfilt padding.
 *
 * A section s = (b0, b1, b2, 1, a1, a2) is scipy's direct form II transposed; with zero initial
 * state it is the zero-state response of B(z) / A(z), which the engine runs as
 *     u[n] = b0 v[n] + b1 v[n-1] + b2 v[n-2] (+ zi0 at n = 0, zi1 at n = 1)
 *     y[n] = u[n] - a1 y[n-1] - a2 y[n-2]
 * the FIR part a loop kernel and the recursion nx_scan_iir (driver scan) or a log-depth doubling
 * of the state (driver associative). The initial state zi enters u as the two additive terms:
 * DF2T's y[0] = b0 v[0] + zi0 and y[1] = b0 v[1] + b1 v[0] - a1 y[0] + zi1. */
#ifndef NX_OPS_SIGNAL_SIGNAL_H
#define NX_OPS_SIGNAL_SIGNAL_H

#include "ops/op.h"

/* Most sections an sos array may have (a Butterworth of order 32 band-pass has 32). */
#define NX_SIG_MAX_SECTIONS 64
/* Highest Butterworth order butterworth_sos designs. */
#define NX_SIG_MAX_ORDER 32

typedef struct nx_sig_sos {
    int n;                                /* sections */
    double s[NX_SIG_MAX_SECTIONS][6];     /* b0 b1 b2 a0 a1 a2, a0 = 1 */
} nx_sig_sos;

typedef enum nx_sig_btype {
    NX_SIG_LOWPASS,
    NX_SIG_HIGHPASS,
    NX_SIG_BANDPASS,
    NX_SIG_BANDSTOP,
} nx_sig_btype;

typedef enum nx_sig_driver {
    NX_SIG_AUTO,
    NX_SIG_SCAN,
    NX_SIG_ASSOCIATIVE,
} nx_sig_driver;

typedef enum nx_sig_padtype {
    NX_SIG_PAD_ODD,
    NX_SIG_PAD_EVEN,
    NX_SIG_PAD_CONSTANT,
    NX_SIG_PAD_NONE,
} nx_sig_padtype;

/* scipy.signal.butter(order, (lo, hi), btype, fs=fs, output='sos'), reimplemented: buttap,
 * lp2lp/lp2hp/lp2bp/lp2bs in zpk form, bilinear_zpk, zpk2sos with pairing 'nearest'. lowpass
 * takes hi as its cut-off and highpass lo (the other one 0: not given); band types take both.
 * Errors name `who` and say what was expected. */
NX_HIDDEN nx_status nx_sig_butter(nx_ctx *ctx, const char *who, int64_t order, double fs,
                                  int btype, double lo, double hi, nx_sig_sos *out);

/* Reads an sos array (f32 or f64, (n, 6), host or device) into out and checks it: finite,
 * a0 = 1 (scipy's sosfilt refuses others), every section's poles inside the unit circle. */
NX_HIDDEN nx_status nx_sig_sos_read(const nx_op_args *c, const char *name, const nx_tensor *t,
                                    nx_sig_sos *out);

/* scipy.signal.sosfilt_zi: the steady state of each section for a unit step input. */
NX_HIDDEN void nx_sig_sosfilt_zi(const nx_sig_sos *s, double (*zi)[2]);

/* The driver option's schema row and the one driver site: *assoc true for associative. auto is
 * scan on the host backends and the registry's fast pick on cuda (associative, or scan under
 * reproducible mode). */
#define NX_SIG_DRIVER_OPT                                                                          \
    {"driver", NX_OPT_ENUM, "auto", "auto|scan|associative", 1,                                    \
     "scan: the sequential recursion (canonical); associative: log-depth doubling of the "         \
     "state; auto: scan on the cpu, the registry's fast pick on cuda"}
NX_HIDDEN nx_status nx_sig_resolve(const nx_op_args *c, int driver, bool *assoc);

/* An axis option against x's rank: the axis in [0, ndim). */
NX_HIDDEN nx_status nx_sig_axis(const nx_op_args *c, int64_t axis, int ndim, int *out);
/* x: float32 or float64, at least 1-d, not empty; axis resolved into *ax. */
NX_HIDDEN nx_status nx_sig_check_x(const nx_op_args *c, const nx_tensor *x, int64_t axis,
                                   int *ax);

/* The cascade of s along axis of v (reverse: anti-causal, from the end). zscale: NX_NONE for zero
 * initial states, else a node of v's shape with extent 1 on axis scaling zi (s->n rows) into each
 * section's start. */
NX_HIDDEN nx_node nx_sig_cascade(nx_graph *g, nx_node v, int axis, const nx_sig_sos *s,
                                 bool reverse, nx_node zscale, const double (*zi)[2], bool assoc);

/* scipy's default padlen of sosfiltfilt: 3 (2 n + 1 - min(#(b2 = 0), #(a2 = 0))). */
NX_HIDDEN int64_t nx_sig_default_padlen(const nx_sig_sos *s);

/* The extension sosfiltfilt uses along axis of c->in[0] (none: 0; npadlen 0: the default), or
 * NX_ERR_SHAPE when the axis is not longer than it (scipy's ValueError). */
NX_HIDDEN nx_status nx_sig_filtfilt_edge(const nx_op_args *c, const nx_sig_sos *s, int axis,
                                         int padtype, int npadlen, int64_t padlen, int64_t *edge);

/* sosfiltfilt on x along axis: extension by `edge` samples (padtype), forward cascade from zi x0,
 * backward cascade from zi y_end, crop. The length must exceed edge (checked by the caller). */
NX_HIDDEN nx_node nx_sig_filtfilt(nx_graph *g, nx_node x, int axis, const nx_sig_sos *s,
                                  int padtype, int64_t edge, bool assoc);

/* Runs a one-output stage of x = c->in[0] (filtered along axis): as one program, or on the cpu
 * backend, for a forward call on a host x whose rows (axis 0, not the time axis) are large, block
 * by block of rows, each block's program the same graph on fewer rows, so that the cascade's
 * intermediates stay in the cache. */
NX_HIDDEN nx_status nx_sig_run(const nx_op_args *c, nx_op_stage_fn build, const void *user,
                               int axis, nx_tensor **outs);

#endif /* NX_OPS_SIGNAL_SIGNAL_H */
