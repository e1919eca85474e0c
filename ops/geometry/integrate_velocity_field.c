/* The op `integrate_velocity_field` (spec §4.8): the displacement of exp(v) for a stationary
 * velocity field v [*spatial, ndim] (index units) by scaling and squaring:
 *   u_0 = v / 2^n,  u_{k+1} = u_k + u_k(id + u_k)  (compose_displacement(u_k, u_k)),  u = u_n,
 * each composition sampled linearly with the border `mode` (default nearest) and `cval`.
 * n_steps is a number 0..20 (0: u = v), or auto: n = clip(ceil(log2(2 max|v|)), 1, 12), which
 * reads max|v| first (a small program; the host orchestration below), so that n is part of the
 * compiled program's key. The vjp differentiates the squarings for that n. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/geometry/sample.h"

/* n_steps: *n the count, or -1 for auto. */
static nx_status parse_steps(const nx_op_args *c, int *n)
{
    const char *s = ((const nx_geo_args *)c->opts)->n_steps;
    if (!s || !*s) {
        *n = 7;
        return NX_OK;
    }
    if (strcmp(s, "auto") == 0) {
        *n = -1;
        return NX_OK;
    }
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < 0 || v > NX_GEO_MAX_STEPS)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: n_steps is '%.32s'; expected auto or an integer 0..%d", c->who, s,
                           NX_GEO_MAX_STEPS);
    *n = (int)v;
    return NX_OK;
}

static nx_status check(const nx_op_args *c)
{
    const nx_geo_args *o = c->opts;
    int n;
    nx_status st = nx_geo_check_opts(c, o);
    if (st == NX_OK)
        st = nx_geo_check_field(c, 0);
    if (st == NX_OK)
        st = parse_steps(c, &n);
    return st;
}

static nx_status stage_maxabs(nx_graph *g, const nx_op_args *c, const void *user, int nout,
                              nx_node *outs)
{
    (void)user;
    (void)nout;
    const nx_tensor *v = c->in[0];
    int r = nx_tensor_ndim(v);
    nx_node x = nx_input(g, "v", nx_tensor_dtype(v), r, nx_tensor_shape(v));
    int axes[NX_MAX_DIMS];
    for (int k = 0; k < r; k++)
        axes[k] = k;
    outs[0] = nx_cast(g, nx_reduce(g, nx_abs(g, x), r, axes, NX_MONOID_MAX, false),
                      NX_DTYPE_F64);
    return nx_graph_status(g);
}

static nx_status stage_integrate(nx_graph *g, const nx_op_args *c, const void *user, int nout,
                                 nx_node *outs)
{
    (void)nout;
    int n = *(const int *)user;
    const nx_geo_args *o = c->opts;
    const nx_tensor *v = c->in[0];
    nx_dtype dt = nx_tensor_dtype(v);
    nx_node u = nx_parameter(g, "v", dt, nx_tensor_ndim(v), nx_tensor_shape(v));
    nx_geo_args lin = *o;
    lin.method = NX_GEO_LINEAR;
    u = nx_mul(g, u, nx_scalar(g, dt, ldexp(1.0, -n)));
    for (int k = 0; k < n; k++)
        u = nx_geo_compose(g, u, u, &lin, false);
    outs[0] = u;
    return nx_graph_status(g);
}

static void key_steps(nx_rt_cache_blob *b, const void *user)
{
    nx_rt_cache_blob_i64(b, "n_steps", *(const int *)user);
}

static nx_status auto_steps(const nx_op_args *c, int *n)
{
    nx_op_args f = *c;
    f.dy = NULL;
    nx_program *p = NULL;
    nx_tensor *m = NULL, *h = NULL;
    nx_status st = nx_op_program(&f, "maxabs", NULL, stage_maxabs, NULL, 1, &p);
    if (st == NX_OK)
        st = nx_program_run(p, (const nx_tensor *const[]){c->in[0]}, &m);
    if (st == NX_OK)
        st = nx_tensor_to_device(m, NX_DEVICE_HOST, &h);
    if (st == NX_OK) {
        double mx = *(const double *)nx_tensor_data(h);
        if (!isfinite(mx)) {
            st = nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                             "%s: v has a non-finite value; n_steps=auto needs a finite max|v| "
                             "(give n_steps a number)",
                             c->who);
        } else {
            double k = mx > 0 ? ceil(log2(2.0 * mx)) : 1.0;
            *n = k < 1 ? 1 : k > 12 ? 12 : (int)k;
        }
    }
    nx_tensor_free(h);
    nx_tensor_free(m);
    return st;
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    int n = 7;
    nx_status st = parse_steps(c, &n);
    if (st == NX_OK && n < 0)
        st = auto_steps(c, &n);
    nx_program *p = NULL;
    if (st == NX_OK)
        st = nx_op_program(c, "integrate", key_steps, stage_integrate, &n, 1, &p);
    if (st != NX_OK)
        return st;
    if (c->dy)
        return nx_program_run(p, (const nx_tensor *const[]){c->in[0], c->dy[0]}, outs);
    return nx_program_run(p, (const nx_tensor *const[]){c->in[0]}, outs);
}

static const nx_op_opt opts[] = {
    {"n_steps", NX_OPT_STRING, "7", NULL, 1,
     "squarings: 0..20, or auto = clip(ceil(log2(2 max|v|)), 1, 12)"},
    {"mode", NX_OPT_BORDER, "nearest", NULL, 1,
     "outside the grid while composing: nearest, constant (cval), wrap, mirror, reflect"},
    {"cval", NX_OPT_FLOAT, "0", NULL, 1, "value outside for mode=constant"},
};
static const nx_op_field fields[] = {{NX_GEO_F(n_steps)}, {NX_GEO_F(mode)}, {NX_GEO_F(cval)}};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-4, 1e-4},
    {NX_DTYPE_F64, NULL, NULL, 1e-11, 1e-11},
};

const nx_op_desc nx_op_integrate_velocity_field = {
    .info = {.nopts = 3, .opts = opts},
    .opts_size = sizeof(nx_geo_args),
    .fields = fields,
    .backend_offset = offsetof(nx_geo_args, backend),
    .check = check,
    .build = NULL,
    .run = run,
    .golden = "geometry",
    .tols = tols,
    .ntols = 2,
};
