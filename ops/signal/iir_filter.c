/* The op `iir_filter` (spec §4.7, api-b §3): a Butterworth filter designed on the host
 * (butterworth_sos with fs, btype, lo, hi, order) and applied along axis: zero_phase (default)
 * by sosfiltfilt with scipy's odd extension and default padlen, else by sosfilt. The gradient is
 * with respect to x. */
#include "ops/signal/signal.h"

typedef struct iirf_args {
    nx_backend backend;
    double fs;
    int btype;
    double lo, hi;
    int64_t order;
    bool zero_phase;
    int64_t axis;
    int driver;
} iirf_args;

typedef struct iirf_stage {
    nx_sig_sos sos;
    int axis;
    int64_t edge;
    bool zero_phase, assoc;
} iirf_stage;

static nx_status check(const nx_op_args *c)
{
    const iirf_args *o = c->opts;
    int ax;
    nx_sig_sos s;
    nx_status st = nx_sig_check_x(c, c->in[0], o->axis, &ax);
    if (st == NX_OK)
        st = nx_sig_butter(c->ctx, c->who, o->order, o->fs, o->btype, o->lo, o->hi, &s);
    return st;
}

static nx_status build(nx_graph *g, const nx_op_args *c, const void *user, int nout,
                       nx_node *outs)
{
    (void)nout;
    const iirf_stage *s = user;
    const nx_tensor *x = c->in[0];
    nx_node xn = (c->dy ? nx_parameter : nx_input)(g, "x", nx_tensor_dtype(x), nx_tensor_ndim(x),
                                                   nx_tensor_shape(x));
    outs[0] = s->zero_phase
                  ? nx_sig_filtfilt(g, xn, s->axis, &s->sos, NX_SIG_PAD_ODD, s->edge, s->assoc)
                  : nx_sig_cascade(g, xn, s->axis, &s->sos, false, NX_NONE, NULL, s->assoc);
    return nx_graph_status(g);
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    const iirf_args *o = c->opts;
    iirf_stage s = {.zero_phase = o->zero_phase};
    nx_status st = nx_sig_axis(c, o->axis, nx_tensor_ndim(c->in[0]), &s.axis);
    if (st == NX_OK)
        st = nx_sig_butter(c->ctx, c->who, o->order, o->fs, o->btype, o->lo, o->hi, &s.sos);
    if (st == NX_OK && s.zero_phase)
        st = nx_sig_filtfilt_edge(c, &s.sos, s.axis, NX_SIG_PAD_ODD, 0, 0, &s.edge);
    if (st == NX_OK)
        st = nx_sig_resolve(c, o->driver, &s.assoc);
    if (st != NX_OK)
        return st;
    return nx_sig_run(c, build, &s, s.axis, outs);
}

static const nx_op_opt opts[] = {
    {"fs", NX_OPT_FLOAT, "1", NULL, 1, "sampling frequency (> 0); cut-offs are in its units"},
    {"btype", NX_OPT_ENUM, "lowpass", "lowpass|highpass|bandpass|bandstop", 1,
     "lowpass (cut-off hi), highpass (cut-off lo), bandpass or bandstop (lo < hi)"},
    {"lo", NX_OPT_FLOAT, "0", NULL, 1, "lower cut-off, 0 < lo < fs/2 (0: not given)"},
    {"hi", NX_OPT_FLOAT, "0", NULL, 1, "upper cut-off, 0 < hi < fs/2 (0: not given)"},
    {"order", NX_OPT_INT, "2", "1:32", 1, "the Butterworth order"},
    {"zero_phase", NX_OPT_BOOL, "true", NULL, 1,
     "true: sosfiltfilt (odd extension, scipy's padlen); false: sosfilt"},
    {"axis", NX_OPT_INT, "-1", NULL, 1, "the time axis (negative: from the end)"},
    NX_SIG_DRIVER_OPT,
};

#define F(m) offsetof(iirf_args, m), NX_OP_NO_FIELD, sizeof(((iirf_args *)0)->m)
static const nx_op_field fields[] = {{F(fs)},         {F(btype)}, {F(lo)},     {F(hi)},
                                     {F(order)},      {F(zero_phase)}, {F(axis)}, {F(driver)}};
#undef F

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-4, 1e-4},
    {NX_DTYPE_F64, NULL, NULL, 1e-9, 1e-9},
};

const nx_op_desc nx_op_iir_filter = {
    .info = {.nopts = 8, .opts = opts},
    .opts_size = sizeof(iirf_args),
    .fields = fields,
    .backend_offset = offsetof(iirf_args, backend),
    .check = check,
    .run = run,
    .golden = "signal",
    .tols = tols,
    .ntols = 2,
};
