/* The geometry family's sampling pieces (sample.c; docs/geometry.md "Sampling"): the method enum
 * (the spec's Interpolator ADT as a `method=` option), the options every sampling op shares, their
 * check, the B-spline prefilter (the driver site `geometry.bspline_prefilter`) and the sampler, as
 * IR fragments so that both backends compile them and autodiff differentiates them. */
#ifndef NX_OPS_GEOMETRY_SAMPLE_H
#define NX_OPS_GEOMETRY_SAMPLE_H

#include "ops/op.h"

typedef enum nx_geo_method {
    NX_GEO_LINEAR,        /* 2 taps per axis: (1 - f, f) */
    NX_GEO_NEAREST,       /* 1 tap: floor(x + 0.5), scipy's order 0 */
    NX_GEO_CUBIC_BSPLINE, /* 4 taps of the cubic B-spline over mirror-prefiltered coefficients */
    NX_GEO_LANCZOS,       /* 2a taps of sinc(d) sinc(d / a), renormalised to sum 1 */
    NX_GEO_CATMULL_ROM,   /* 4 taps of Keys' cubic convolution, a = -1/2 */
    NX_GEO_MULTILABEL,    /* linear resampling of each label's indicator, then argmax */
    NX_GEO_METHOD_COUNT
} nx_geo_method;

/* The method names; after the six, the spec's class names as synonyms (method_of folds them). */
#define NX_GEO_METHOD_NAMES                                                                        \
    "linear|nearest|cubic_bspline|lanczos|catmull_rom|multilabel|nearestneighbour|cubicbspline|"  \
    "catmullromcubic"

#define NX_GEO_MAX_LABELS 64
#define NX_GEO_SPATIAL_MAX 3

/* One option struct for every sampling op (fields an op does not use stay at their defaults). */
typedef struct nx_geo_args {
    nx_backend backend;
    int mode;      /* nx_border */
    double cval;
    int method;    /* an index of NX_GEO_METHOD_NAMES */
    int64_t order; /* lanczos' a */
    double labels[NX_GEO_MAX_LABELS];
    int nlabels;
    int driver;    /* 0 auto, 1 sequential, 2 fir */
    int64_t target_shape[NX_GEO_SPATIAL_MAX]; /* resample */
    int ntarget;
    const char *n_steps;   /* integrate_velocity_field: "auto" or 0..NX_GEO_MAX_STEPS */
    int64_t spatial_shape[NX_GEO_SPATIAL_MAX]; /* identity_grid */
    int nspatial;
    int dtype;             /* identity_grid: nx_dtype */
} nx_geo_args;

#define NX_GEO_MAX_STEPS 20

/* The sampling options, mode's default as given (the spec: constant for the samplers). */
#define NX_GEO_SAMPLE_OPTS(MODE_DEFAULT)                                                           \
    {"mode", NX_OPT_BORDER, MODE_DEFAULT, NULL, 1,                                                 \
     "outside the grid: constant (cval), nearest, wrap (period n), mirror, reflect "              \
     "(scipy's grid-constant, nearest, grid-wrap, mirror, reflect)"},                              \
        {"cval", NX_OPT_FLOAT, "0", NULL, 1, "value outside for mode=constant"},                   \
        {"method", NX_OPT_ENUM, "linear", NX_GEO_METHOD_NAMES, 1,                                  \
         "interpolator: linear, nearest, cubic_bspline, lanczos, catmull_rom, multilabel"},        \
        {"order", NX_OPT_INT, "3", "1:8", 1, "lanczos: the window's half-width a (2a taps)"},     \
        {"labels", NX_OPT_FLOATS, "(none)", NULL, NX_GEO_MAX_LABELS,                               \
         "multilabel: the label values (at least one)"},                                           \
        {"driver", NX_OPT_ENUM, "auto", "auto|sequential|fir", 1,                                  \
         "cubic_bspline's prefilter: sequential (the recursion, canonical) or fir (the truncated " \
         "symmetric response, parallel); auto: fir on cuda outside reproducible mode, else "       \
         "sequential"}

#define NX_GEO_SAMPLE_NOPTS 6

#define NX_GEO_F(m) offsetof(nx_geo_args, m), NX_OP_NO_FIELD, sizeof(((nx_geo_args *)0)->m)
#define NX_GEO_FN(m, n)                                                                            \
    offsetof(nx_geo_args, m), offsetof(nx_geo_args, n), sizeof(((nx_geo_args *)0)->m)
#define NX_GEO_SAMPLE_FIELDS                                                                       \
    {NX_GEO_F(mode)}, {NX_GEO_F(cval)}, {NX_GEO_F(method)}, {NX_GEO_F(order)},                     \
        {NX_GEO_FN(labels, nlabels)}, {                                                            \
        NX_GEO_F(driver)                                                                           \
    }

/* Input i is f32 or f64, of rank >= min_rank, and of input 0's dtype (affine-frag.c; affine.h
 * declares it too). */
NX_HIDDEN nx_status nx_geo_check_float(const nx_op_args *c, int i, int min_rank);
/* The method without its synonyms; -1 when out of range. */
NX_HIDDEN int nx_geo_method_of(int method);
/* The shared option checks (method, mode, order, labels, driver; a vjp of multilabel is
 * NX_ERR_UNSUPPORTED) and a float dtype check of each input named. */
NX_HIDDEN nx_status nx_geo_check_opts(const nx_op_args *c, const nx_geo_args *o);
/* The prefilter variant for these options: true for fir (driver site geometry.bspline_prefilter). */
NX_HIDDEN nx_status nx_geo_prefilter_fir(const nx_op_args *c, const nx_geo_args *o, bool *fir);
/* Key fields: the resolved prefilter variant. */
NX_HIDDEN void nx_geo_key(nx_rt_cache_blob *b, const nx_op_args *c);

/* The B-spline coefficients of x along axes [first, first + nd) (mirror boundary, pole
 * sqrt(3) - 2, scipy's spline_filter(order=3, mode='mirror')). */
NX_HIDDEN nx_node nx_geo_prefilter(nx_graph *g, nx_node x, int first, int nd, bool fir);

/* Samples img [B, *sp, C] (sp of rank nd = coords' last extent) at coords [B, P, nd] (absolute
 * index coordinates, img's dtype): [B, P, C]. For cubic_bspline img holds the coefficients
 * (nx_geo_prefilter). A point with a non-finite coordinate is NaN; coordinates are clamped to
 * +-2^40 first. */
NX_HIDDEN nx_node nx_geo_sample(nx_graph *g, nx_node img, nx_node coords, const nx_geo_args *o);

/* The whole sampling of one op: prefilter when cubic_bspline, then nx_geo_sample (multilabel:
 * indicators, linear sampling, argmax). img [B, *sp, C], coords [B, P, nd]. */
NX_HIDDEN nx_node nx_geo_resample_points(nx_graph *g, nx_node img, nx_node coords,
                                         const nx_geo_args *o, bool fir);

/* The identity grid [*sp, nd] (grid[..., a] = the index along axis a) in dtype dt. */
NX_HIDDEN nx_node nx_geo_identity(nx_graph *g, nx_dtype dt, int nd, const int64_t *sp);
/* u + outer(id + u) for displacement fields outer, u [*sp, nd] (outer sampled with o). */
NX_HIDDEN nx_node nx_geo_compose(nx_graph *g, nx_node outer, nx_node u, const nx_geo_args *o,
                                 bool fir);
/* A field's check: [*sp, nd] with nd = the rank of sp, 1..3, float, nonempty. */
NX_HIDDEN nx_status nx_geo_check_field(const nx_op_args *c, int input);

#endif /* NX_OPS_GEOMETRY_SAMPLE_H */
