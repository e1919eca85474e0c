/* The op `sosfilt` (spec §4.7, api-b §3): scipy.signal.sosfilt(sos, x, axis) from zero initial
 * states, a cascade of second-order sections along any axis, batched over the others:
 *     y = H_n(...H_1(x)), H_i = (b0 + b1 z^-1 + b2 z^-2) / (1 + a1 z^-1 + a2 z^-2)
 * sos is a tensor option (the spec's second argument): a constant of the program (read on the
 * host, checked, keyed by its bytes), as butterworth_sos's host-built arrays are; the gradient is
 * with respect to x (autodiff of the cascade: the anti-causal filter over dy). The recursion's
 * driver is the divergent-op site signal.iir (iir.c). */
#include "ops/signal/signal.h"

typedef struct sosfilt_args {
    nx_backend backend;
    const nx_tensor *sos;
    int64_t axis;
    int driver; /* nx_sig_driver */
} sosfilt_args;

typedef struct sosfilt_stage {
    nx_sig_sos sos;
    int axis;
    bool assoc;
} sosfilt_stage;

static nx_status check(const nx_op_args *c)
{
    const sosfilt_args *o = c->opts;
    int ax;
    return nx_sig_check_x(c, c->in[0], o->axis, &ax);
}

static nx_status build(nx_graph *g, const nx_op_args *c, const void *user, int nout,
                       nx_node *outs)
{
    (void)nout;
    const sosfilt_stage *s = user;
    const nx_tensor *x = c->in[0];
    nx_node xn = (c->dy ? nx_parameter : nx_input)(g, "x", nx_tensor_dtype(x), nx_tensor_ndim(x),
                                                   nx_tensor_shape(x));
    outs[0] = nx_sig_cascade(g, xn, s->axis, &s->sos, false, NX_NONE, NULL, s->assoc);
    return nx_graph_status(g);
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    const sosfilt_args *o = c->opts;
    sosfilt_stage s;
    nx_status st = nx_sig_axis(c, o->axis, nx_tensor_ndim(c->in[0]), &s.axis);
    if (st == NX_OK)
        st = nx_sig_sos_read(c, "sos", o->sos, &s.sos);
    if (st == NX_OK)
        st = nx_sig_resolve(c, o->driver, &s.assoc);
    if (st != NX_OK)
        return st;
    return nx_sig_run(c, build, &s, s.axis, outs);
}

static const nx_op_opt opts[] = {
    {"sos", NX_OPT_TENSOR, NULL, NULL, 1,
     "second-order sections (n_sections, 6): b0 b1 b2 1 a1 a2 per row (.npy), stable"},
    {"axis", NX_OPT_INT, "-1", NULL, 1, "the time axis (negative: from the end)"},
    NX_SIG_DRIVER_OPT,
};

static const nx_op_field fields[] = {
    {offsetof(sosfilt_args, sos), NX_OP_NO_FIELD, sizeof(const nx_tensor *)},
    {offsetof(sosfilt_args, axis), NX_OP_NO_FIELD, sizeof(int64_t)},
    {offsetof(sosfilt_args, driver), NX_OP_NO_FIELD, sizeof(int)},
};

/* scipy.signal.sosfilt in float64 (api-b §3.2: 1e-9); f32 filters in f32 against the f64 oracle
 * on unit-scale data. */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-4, 1e-4},
    {NX_DTYPE_F64, NULL, NULL, 1e-9, 1e-9},
};

const nx_op_desc nx_op_sosfilt = {
    .info = {.nopts = 3, .opts = opts},
    .opts_size = sizeof(sosfilt_args),
    .fields = fields,
    .backend_offset = offsetof(sosfilt_args, backend),
    .check = check,
    .run = run,
    .golden = "signal",
    .tols = tols,
    .ntols = 2,
};
