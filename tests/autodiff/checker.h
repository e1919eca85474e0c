/* A finite-difference gradient checker in float64 for the autodiff suite.
 *
 * A case builds y = f(p_1, ..., p_n) from f64 parameters. The checker draws the parameters and a
 * cotangent c at random, takes the vjp of L = sum(y * c) with nx_graph_vjp, runs it, and compares
 * every component of the gradient with the central difference (L(p + h e) - L(p - h e)) / 2h of
 * the forward program. The error is scale-free: max |ad - fd| / max |fd| over all components of
 * all parameters (0 when both are exactly zero). */
#ifndef NX_TEST_AUTODIFF_CHECKER_H
#define NX_TEST_AUTODIFF_CHECKER_H

#include <math.h>
#include <string.h>

#include "passes/autodiff.h"
#include "testutil.h"

#define CK_MAXP 4

typedef nx_node (*ck_build)(nx_graph *g, const nx_node *p);

typedef struct ck_case {
    const char *name;
    int np;
    int ndim[CK_MAXP];
    int64_t shape[CK_MAXP][4];
    double lo, hi; /* parameters are drawn uniformly from [lo, hi] */
    ck_build build;
    bool grid; /* parameters on multiples of 1/64 and h = 1/256: exact in f32 */
} ck_case;

typedef struct ck_run {
    nx_ctx *ctx;
    nx_graph *g;
    nx_node p[CK_MAXP], y, cot, grads[CK_MAXP];
    nx_program *fwd, *bwd;
    nx_tensor *in[CK_MAXP];
    double *cval;
    int64_t ny;
} ck_run;

static uint64_t ck_state = 0x9e3779b97f4a7c15ull;
/* When set, a program the backend refuses makes ck_check return NAN instead of failing. */
static bool ck_lenient = false;

static inline double ck_uniform(double lo, double hi)
{
    ck_state ^= ck_state << 13;
    ck_state ^= ck_state >> 7;
    ck_state ^= ck_state << 17;
    return lo + (hi - lo) * (double)(ck_state >> 11) / 9007199254740992.0;
}

static inline nx_program *ck_compile(nx_graph *g, int n, const nx_node *outs, nx_backend be)
{
    nx_compile_opts o = {.backend = be, .n_outputs = n, .outputs = outs};
    nx_program *p = NULL;
    nx_status st = nx_graph_compile(g, &o, &p);
    if (st != NX_OK && ck_lenient)
        return NULL;
    if (st != NX_OK)
        fail_msg("compile: %s: %s", nx_status_str(st), nx_ctx_last_error(nx_graph_ctx(g)));
    return p;
}

static inline double ck_loss(ck_run *r)
{
    nx_tensor *out = NULL;
    nx_status st = nx_program_run(r->fwd, (const nx_tensor *const *)r->in, &out);
    if (st != NX_OK)
        fail_msg("run: %s: %s", nx_status_str(st), nx_ctx_last_error(r->ctx));
    const double *y = nx_tensor_data(out);
    double l = 0;
    for (int64_t i = 0; i < r->ny; i++)
        l += y[i] * r->cval[i];
    nx_tensor_free(out);
    return l;
}

/* Builds the graph, the cotangent and the vjp; compiles both programs; fills the inputs. When
 * values is non-NULL, values[i] holds parameter i's data (else random). */
static inline void ck_setup(ck_run *r, const ck_case *c, nx_backend be, const double *const *values,
                            const double *cot)
{
    memset(r, 0, sizeof *r);
    assert_int_equal(nx_ctx_new(NULL, &r->ctx), NX_OK);
    assert_int_equal(nx_graph_new(r->ctx, &r->g), NX_OK);
    for (int i = 0; i < c->np; i++)
        r->p[i] = nx_parameter(r->g, "p", NX_DTYPE_F64, c->ndim[i], c->shape[i]);
    r->y = c->build(r->g, r->p);
    if (!r->y)
        fail_msg("%s: building failed: %s", c->name, nx_graph_error(r->g));
    int64_t ys[NX_MAX_DIMS];
    int nd = nx_node_ndim(r->g, r->y);
    nx_node_shape(r->g, r->y, ys);
    r->ny = 1;
    for (int i = 0; i < nd; i++)
        r->ny *= ys[i];
    r->cval = malloc((size_t)(r->ny + 1) * sizeof *r->cval);
    for (int64_t i = 0; i < r->ny; i++)
        r->cval[i] = cot ? cot[i] : ck_uniform(-1.0, 1.0);
    r->cot = nx_constant(r->g, NX_DTYPE_F64, nd, ys, r->cval);
    nx_status st = nx_graph_vjp(r->g, 1, &r->y, &r->cot, c->np, r->p, r->grads);
    if (st != NX_OK)
        fail_msg("%s: nx_graph_vjp: %s: %s", c->name, nx_status_str(st),
                 nx_ctx_last_error(r->ctx));
    if (nx_graph_verify(r->g) != NX_OK)
        fail_msg("%s: the graph with its adjoints does not verify: %s", c->name,
                 nx_ctx_last_error(r->ctx));
    r->fwd = ck_compile(r->g, 1, &r->y, be);
    r->bwd = r->fwd ? ck_compile(r->g, c->np, r->grads, be) : NULL;
    for (int i = 0; i < c->np; i++) {
        assert_int_equal(
            nx_tensor_new(r->ctx, NX_DTYPE_F64, c->ndim[i], c->shape[i], &r->in[i]), NX_OK);
        double *d = nx_tensor_data(r->in[i]);
        for (int64_t k = 0; k < nx_tensor_numel(r->in[i]); k++) {
            double v = values ? values[i][k] : ck_uniform(c->lo, c->hi);
            d[k] = c->grid ? round(v * 64.0) / 64.0 : v;
        }
    }
}

static inline void ck_teardown(ck_run *r)
{
    for (int i = 0; i < CK_MAXP; i++)
        nx_tensor_free(r->in[i]);
    free(r->cval);
    nx_program_free(r->fwd);
    nx_program_free(r->bwd);
    nx_graph_free(r->g);
    nx_ctx_free(r->ctx);
}

/* The vjp's values: one new tensor per parameter. */
static inline void ck_gradients(ck_run *r, int np, nx_tensor **out)
{
    nx_status st = nx_program_run(r->bwd, (const nx_tensor *const *)r->in, out);
    if (st != NX_OK)
        fail_msg("run vjp: %s: %s", nx_status_str(st), nx_ctx_last_error(r->ctx));
    (void)np;
}

/* Central difference of L along parameter i's component k. */
static inline double ck_fd(ck_run *r, int i, int64_t k, double h)
{
    double *d = nx_tensor_data(r->in[i]);
    double x = d[k];
    d[k] = x + h;
    double lp = ck_loss(r);
    d[k] = x - h;
    double lm = ck_loss(r);
    d[k] = x;
    return (lp - lm) / (2 * h);
}

/* Runs the whole comparison; returns the scale-free error and reports the worst component. */
static inline double ck_check(const ck_case *c, nx_backend be)
{
    ck_run r;
    ck_setup(&r, c, be, NULL, NULL);
    if (!r.fwd || !r.bwd) {
        ck_teardown(&r);
        return NAN;
    }
    nx_tensor *ad[CK_MAXP] = {0};
    ck_gradients(&r, c->np, ad);
    double num = 0, den = 0, worst_ad = 0, worst_fd = 0;
    int worst_i = -1;
    int64_t worst_k = -1;
    for (int i = 0; i < c->np; i++) {
        const double *gd = nx_tensor_data(ad[i]);
        for (int64_t k = 0; k < nx_tensor_numel(r.in[i]); k++) {
            double *d = nx_tensor_data(r.in[i]);
            double h = c->grid ? 1.0 / 256.0 : 1e-5 * fmax(1.0, fabs(d[k]));
            double fd = ck_fd(&r, i, k, h);
            double e = fabs(gd[k] - fd);
            if (!(e <= num)) {
                num = e, worst_i = i, worst_k = k, worst_ad = gd[k], worst_fd = fd;
            }
            den = fmax(den, fabs(fd));
        }
    }
    for (int i = 0; i < c->np; i++)
        nx_tensor_free(ad[i]);
    ck_teardown(&r);
    double err = num == 0 ? 0 : den == 0 ? INFINITY : num / den;
    if (!(err <= 1e-6))
        print_message("%s (%s): scale-free error %.3g at parameter %d element %lld: vjp %.12g, "
                      "central difference %.12g\n",
                      c->name, nx_backend_name(be), err, worst_i, (long long)worst_k, worst_ad,
                      worst_fd);
    return err;
}

#endif
