/*
 * nitrix ops: Gaussian smoothing (ops/smoothing, docs/smoothing.md).
 * Included by nitrix-ops.h: include that.
 */
#ifndef NITRIX_SMOOTHING_H
#define NITRIX_SMOOTHING_H

#include "nitrix-ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================================================
 * Gaussian smoothing (ops/smoothing/gaussian*.c, docs/smoothing.md)
 *
 * scipy.ndimage.gaussian_filter over the trailing nspatial axes of x (leading axes are batch),
 * one separable 1-D pass per spatial axis in axis order:
 *   y[i] = sum_{t=-r}^{r} w[t] x[i + t],   w[t] = exp(-t^2 / (2 sigma^2)) / sum_t exp(...)
 * with the radius r = int(truncate * sigma + 0.5) (scipy's rule) or an explicit kernel_size, and
 * x extended past its edges by the mode (scipy's meanings). Drivers (the divergent-op registry,
 * op "gaussian_filter"):
 *   "fir"        canonical: the correlation above as a window view of the padded line and a
 *                weighted sum; equals scipy within 1e-12 (f64), 1e-6 relative (f32); gradients
 *                with respect to x and sigma
 *   "recursive"  fast: Young and van Vliet's third-order recursive Gaussian (1995), cost O(N) per
 *                line whatever sigma is (sigma >= 0.5); differs from "fir" by the approximation
 *                error of the recursive filter (the registry row says how much: 0.07 of the
 *                data's range); gradient with respect to x only; never picked by "auto"
 * f32 input is filtered in f32 (scipy accumulates each pass in double, then rounds to f32).
 * ===============================================================================================*/

#define NX_GAUSSIAN_MAX_SPATIAL 4

/* Deprecated (kept for one release): the mode is an nx_border (nitrix.h; reflect is scipy's
 * default). The old names are aliases of its constants, with nx_border's values. */
typedef nx_border nx_gaussian_mode;
#define NX_GAUSSIAN_REFLECT NX_BORDER_REFLECT
#define NX_GAUSSIAN_MIRROR NX_BORDER_MIRROR
#define NX_GAUSSIAN_NEAREST NX_BORDER_NEAREST
#define NX_GAUSSIAN_CONSTANT NX_BORDER_CONSTANT
#define NX_GAUSSIAN_WRAP NX_BORDER_WRAP
#define NX_GAUSSIAN_MODE_COUNT NX_BORDER_COUNT

/* sigma: nsigma == 1 gives every spatial axis sigma[0]; else nsigma == the number of spatial axes.
 * Each sigma is finite and > 0 (scipy skips axes with sigma ~ 0: here give nspatial instead).
 * kernel_size[i] > 0 fixes axis i's window to that many taps instead of the truncate rule, and
 * must not exceed the axis's extent: odd sizes are centred (t = -(k-1)/2 .. (k-1)/2); an even size
 * k takes t = -k/2 .. k/2 - 1 with weights exp(-(t + 1/2)^2 / (2 sigma^2)), so the result is the
 * smoothed signal half a sample toward lower indices (y[i] is centred on i - 1/2), which is what
 * scipy.ndimage.correlate1d does with an even kernel. The recursive driver ignores truncate and
 * kernel_size for its weights (it has none) but pads each line by the truncate radius. */
typedef struct nx_gaussian_opts {
    nx_backend backend;  /* NX_BACKEND_AUTO: the context's */
    int nspatial;        /* 1..NX_GAUSSIAN_MAX_SPATIAL trailing axes; 0: all of x's (ndim <= 4) */
    int nsigma;          /* 1 or nspatial */
    double sigma[NX_GAUSSIAN_MAX_SPATIAL];
    double truncate;     /* > 0; 0 means scipy's default 4.0 */
    int64_t kernel_size[NX_GAUSSIAN_MAX_SPATIAL]; /* 0: from truncate */
    nx_gaussian_mode mode;
    double cval;         /* NX_GAUSSIAN_CONSTANT only; finite */
    /* NULL or "auto": "fir" for every sigma (the recursive driver's difference is beyond what
     * auto may trade, NX_DIVERGENT_AUTO_TOL); "fir"; "recursive" (only when named) */
    const char *driver;
} nx_gaussian_opts;

/* The fragment inside a caller's graph; x is f32 or f64 and is not empty (an empty image has no
 * line to filter: the entry point returns an empty result for it). sigma_node may be NX_NONE, or
 * a float node of x's dtype with shape [] or [1] (every axis) or [nspatial]: the weights are then
 * an IR expression of it, so nx_graph_vjp gives d/dsigma (the window's extent stays the one
 * opts->sigma gives, which is where sigma's value must be). In a graph the backend is not known:
 * auto keeps the registry's rule (fir in reproducible mode, else recursive), except that with a
 * sigma_node auto means fir and recursive is refused. NX_NONE with the graph's error on failure. */
NX_API nx_node nx_gaussian_node(nx_graph *g, nx_node x, nx_node sigma_node,
                                const nx_gaussian_opts *opts);

/* On tensors: x f32 or f64 (integers and bool are converted to f32 first); the result has x's
 * float dtype and shape. The program is cached per (driver, options, shape, dtype, backend). An
 * empty x gives an empty result of its shape. */
NX_API nx_status nx_gaussian_filter(nx_ctx *ctx, const nx_tensor *x, const nx_gaussian_opts *opts,
                                    nx_tensor **out);

/* Cotangents of <dy, gaussian_filter(x)>: dx (x's dtype and shape) and dsigma (x's dtype, shape
 * [nsigma]); either may be NULL. x f32 or f64. dsigma needs the fir driver (the recursive one has
 * no sigma gradient: NX_ERR_UNSUPPORTED). */
NX_API nx_status nx_gaussian_filter_vjp(nx_ctx *ctx, const nx_tensor *x, const nx_tensor *dy,
                                        const nx_gaussian_opts *opts, nx_tensor **dx,
                                        nx_tensor **dsigma);

/* ===================================== end of smoothing ====================================== */

#ifdef __cplusplus
}
#endif

#endif /* NITRIX_SMOOTHING_H */
