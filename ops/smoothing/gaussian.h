/* Shared between the Gaussian smoothing files: the options resolved per spatial axis, the two
 * drivers' 1-D passes and the driver resolution. Not installed. */
#ifndef NX_OPS_GAUSSIAN_H
#define NX_OPS_GAUSSIAN_H

#include "internal.h"
#include "nitrix-ops.h"

/* The option struct of the op table's `gaussian` (gaussian.c; zeroed: every default). The typed
 * entry points fill it from nx_gaussian_opts. */
typedef struct nx_gauss_args {
    nx_backend backend;
    double sigma[NX_GAUSSIAN_MAX_SPATIAL];
    int nsigma;
    double truncate;
    int64_t kernel_size[NX_GAUSSIAN_MAX_SPATIAL];
    int nkernel;          /* kernel_size values given: 0 (from the C struct) or 1 (all) or nsp */
    int mode;             /* nx_border, or NX_BORDER_COUNT for "edge" (= nearest) */
    double cval;
    int driver;           /* 0 auto, 1 fir, 2 recursive */
    int64_t spatial_rank; /* 0: nspatial */
    int64_t nspatial;     /* the older name; 0: all of x's axes */
    /* Not options: what nx_gaussian_filter_vjp asks beyond one gradient per input. */
    bool skip_dx;         /* no dx (only dsigma) */
    nx_tensor **dsigma;   /* non-NULL: the vjp also writes d sigma here (x's dtype, [nsigma]) */
} nx_gauss_args;

/* Options checked against x's rank and shape, one entry per spatial axis. */
typedef struct nx_gauss_plan {
    int nd, nsp, lead;
    double sigma[NX_GAUSSIAN_MAX_SPATIAL];
    /* taps t = -lo .. hi; weight of tap t is exp(-(t + shift)^2 / (2 sigma^2)), normalised */
    int64_t lo[NX_GAUSSIAN_MAX_SPATIAL], hi[NX_GAUSSIAN_MAX_SPATIAL];
    double shift[NX_GAUSSIAN_MAX_SPATIAL];
    int64_t radius[NX_GAUSSIAN_MAX_SPATIAL]; /* int(truncate * sigma + 0.5): the recursive pad */
    nx_pad_mode pad;
    double cval;
    bool recursive;
} nx_gauss_plan;

/* Checks opts for an x of rank nd and the given shape (may be NULL: extents unknown) and fills
 * plan (not the driver). who names the caller in messages. */
NX_HIDDEN nx_status nx_gauss_plan_make(nx_ctx *ctx, const char *who, const nx_gaussian_opts *o,
                                       int nd, const int64_t *shape, nx_gauss_plan *plan);

/* The op's one driver site: whether opts->driver resolves to the recursive driver. A sigma
 * gradient exists only through the FIR weights: auto then picks fir, recursive is refused. */
NX_HIDDEN nx_status nx_gauss_resolve(nx_ctx *ctx, const nx_gaussian_opts *o, bool sigma_grad,
                                     bool *recursive);

/* x (float) padded on every spatial axis by the FIR windows' reach with the plan's mode. */
NX_HIDDEN nx_node nx_gauss_pad_all(nx_graph *g, nx_node x, const nx_gauss_plan *p);

/* The FIR passes (constant weights) over VALID windows of xp = nx_gauss_pad_all(x): the same
 * values as the passes over x, since padding along one axis commutes with filtering along
 * another. mids NULL: the passes before the last are window folds. Else every pass is a sum of
 * shifted slices and mids[0 .. nsp - 2] receive the passes before the last, which the caller
 * must make program outputs: materialised, they keep the elementwise passes from fusing. */
NX_HIDDEN nx_node nx_gauss_fir_valid(nx_graph *g, nx_node xp, const nx_gauss_plan *p,
                                     nx_node *mids);

/* w[0 .. k) as a constant of dtype dt in the given shape (k elements), each value rounded once to
 * dt on the host: a cast or a reshape of a constant would be a kernel of its own on every run. */
NX_HIDDEN nx_node nx_gauss_constant(nx_graph *g, nx_dtype dt, int64_t k, const double *w, int nd,
                                    const int64_t *shape);

/* The FIR passes' form for a backend whose hints ask for fir_slices_every_axis (codegen/kernel.h;
 * the CUDA backend's): every pass a sum of shifted slices with the weights as immediates, each
 * pass before the last its own kernel. fits: the FIR driver with room for the fold axis; the form
 * itself takes x float and nonempty. */
NX_HIDDEN bool nx_gauss_fir_device_fits(const nx_gauss_plan *p);
NX_HIDDEN nx_node nx_gauss_fir_device(nx_graph *g, nx_node x, const nx_gauss_plan *p);

/* Young-van Vliet along absolute axis `axis` of x (float, nonempty). */
NX_HIDDEN nx_node nx_gauss_recursive_pass(nx_graph *g, nx_node x, int axis, double sigma,
                                          int64_t pad, nx_pad_mode mode, double cval);

/* The recursive filter's poles and residues for sigma (>= 0.5): h[n] = sum_k A_k p_k^|n|, with
 * p[0] real and p[1], p[2] = conj(p[1]). false if sigma is out of range. Exposed for tests of the
 * decomposition through the driver. */
NX_HIDDEN bool nx_gauss_yvv_poles(double sigma, double p_re[3], double p_im[3], double a_re[3],
                                  double a_im[3]);

/* Up to this many taps, constant weights along an axis fold as a sum of shifted slices
 * (gaussian.c); wider windows keep the window fold, whose kernel does not grow with the taps.
 * The same on every backend: a form of the graph, not a backend's cost. */
#define NX_GAUSS_FIR_SLICE_TAPS 65

#endif /* NX_OPS_GAUSSIAN_H */
