/* The op `sosfiltfilt` (spec §4.7, api-b §3): scipy.signal.sosfiltfilt(sos, x, axis, padtype,
 * padlen), the zero-phase forward-backward cascade, exactly as scipy runs it: x extended by
 * `padlen` samples at each end (odd: 2 x_end - the mirror image; even: the mirror image;
 * constant: the end sample; none: no extension), the forward cascade from sosfilt_zi scaled by the
 * extension's first sample, the backward one from sosfilt_zi scaled by the forward result's last
 * sample, and the extension cropped. padlen defaults to scipy's 3 (2 n_sections + 1 - min(#(b2 =
 * 0), #(a2 = 0))); the axis must be longer than padlen. sos is a constant of the program (see
 * sosfilt.c); the gradient is with respect to x. */
#include "ops/signal/signal.h"

typedef struct filtfilt_args {
    nx_backend backend;
    const nx_tensor *sos;
    int64_t axis;
    int padtype; /* nx_sig_padtype */
    int64_t padlen[1];
    int npadlen; /* 0: scipy's default */
    int driver;
} filtfilt_args;

typedef struct filtfilt_stage {
    nx_sig_sos sos;
    int axis, padtype;
    int64_t edge;
    bool assoc;
} filtfilt_stage;

static const char *const padtype_names[] = {"odd", "even", "constant", "none"};

static nx_status check(const nx_op_args *c)
{
    const filtfilt_args *o = c->opts;
    int ax;
    nx_status st = nx_sig_check_x(c, c->in[0], o->axis, &ax);
    if (st != NX_OK)
        return st;
    if ((unsigned)o->padtype > NX_SIG_PAD_NONE)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: padtype %d is out of range; expected "
                           "odd, even, constant or none", c->who, o->padtype);
    if (o->npadlen > 0 && o->padlen[0] < 0)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: padlen is %lld; expected >= 0",
                           c->who, (long long)o->padlen[0]);
    return NX_OK;
}

/* The extension scipy uses, or the error scipy raises (in our words). */
nx_status nx_sig_filtfilt_edge(const nx_op_args *c, const nx_sig_sos *s, int axis, int padtype,
                               int npadlen, int64_t padlen, int64_t *edge)
{
    int64_t n = nx_tensor_shape(c->in[0])[axis];
    *edge = padtype == NX_SIG_PAD_NONE ? 0 : npadlen > 0 ? padlen : nx_sig_default_padlen(s);
    if (n <= *edge)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                           "%s: x has %lld samples along axis %d, but the %s extension takes "
                           "padlen = %lld at each end; expected more than padlen samples (give a "
                           "smaller padlen, or padtype none)",
                           c->who, (long long)n, axis, padtype_names[padtype], (long long)*edge);
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, const void *user, int nout,
                       nx_node *outs)
{
    (void)nout;
    const filtfilt_stage *s = user;
    const nx_tensor *x = c->in[0];
    nx_node xn = (c->dy ? nx_parameter : nx_input)(g, "x", nx_tensor_dtype(x), nx_tensor_ndim(x),
                                                   nx_tensor_shape(x));
    outs[0] = nx_sig_filtfilt(g, xn, s->axis, &s->sos, s->padtype, s->edge, s->assoc);
    return nx_graph_status(g);
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    const filtfilt_args *o = c->opts;
    filtfilt_stage s = {.padtype = o->padtype};
    nx_status st = nx_sig_axis(c, o->axis, nx_tensor_ndim(c->in[0]), &s.axis);
    if (st == NX_OK)
        st = nx_sig_sos_read(c, "sos", o->sos, &s.sos);
    if (st == NX_OK)
        st = nx_sig_filtfilt_edge(c, &s.sos, s.axis, o->padtype, o->npadlen, o->padlen[0],
                                  &s.edge);
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
    {"padtype", NX_OPT_ENUM, "odd", "odd|even|constant|none", 1,
     "the extension at each end: odd (2 x_end - mirror), even (mirror), constant (x_end), none"},
    {"padlen", NX_OPT_INTS, "(3 (2 n_sections + 1 - min(#(b2 = 0), #(a2 = 0))))", "0:", 1,
     "samples of extension at each end; the axis must be longer"},
    NX_SIG_DRIVER_OPT,
};

static const nx_op_field fields[] = {
    {offsetof(filtfilt_args, sos), NX_OP_NO_FIELD, sizeof(const nx_tensor *)},
    {offsetof(filtfilt_args, axis), NX_OP_NO_FIELD, sizeof(int64_t)},
    {offsetof(filtfilt_args, padtype), NX_OP_NO_FIELD, sizeof(int)},
    {offsetof(filtfilt_args, padlen), offsetof(filtfilt_args, npadlen), sizeof(int64_t)},
    {offsetof(filtfilt_args, driver), NX_OP_NO_FIELD, sizeof(int)},
};

/* scipy.signal.sosfiltfilt in float64 (api-b §3.2: 1e-9). */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-4, 1e-4},
    {NX_DTYPE_F64, NULL, NULL, 1e-9, 1e-9},
};

const nx_op_desc nx_op_sosfiltfilt = {
    .info = {.nopts = 5, .opts = opts},
    .opts_size = sizeof(filtfilt_args),
    .fields = fields,
    .backend_offset = offsetof(filtfilt_args, backend),
    .check = check,
    .run = run,
    .golden = "signal",
    .tols = tols,
    .ntols = 2,
};
