/* The op `butterworth_sos` (spec §4.7, api-b §3): scipy.signal.butter(order, Wn, btype, fs=fs,
 * output='sos') built on the host (design.c), float64 (n_sections, 6). A host constructor: no
 * program and no tensor input; the array lands in host memory whatever the backend (it is small,
 * and sosfilt reads it on the host). lowpass takes its cut-off as hi, highpass as lo. */
#include "ops/signal/signal.h"

typedef struct butter_args {
    nx_backend backend;
    int64_t order;
    double fs;
    int btype; /* nx_sig_btype */
    double lo, hi;
} butter_args;

static nx_status check(const nx_op_args *c)
{
    const butter_args *o = c->opts;
    nx_sig_sos s;
    return nx_sig_butter(c->ctx, c->who, o->order, o->fs, o->btype, o->lo, o->hi, &s);
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    const butter_args *o = c->opts;
    nx_sig_sos s;
    nx_status st = nx_sig_butter(c->ctx, c->who, o->order, o->fs, o->btype, o->lo, o->hi, &s);
    if (st != NX_OK)
        return st;
    nx_tensor *t = NULL;
    if ((st = nx_tensor_new(c->ctx, NX_DTYPE_F64, 2, (int64_t[]){s.n, 6}, &t)) != NX_OK)
        return st;
    double *d = nx_tensor_data(t);
    for (int i = 0; i < s.n; i++)
        for (int j = 0; j < 6; j++)
            d[i * 6 + j] = s.s[i][j];
    outs[0] = t;
    return NX_OK;
}

static const nx_op_opt opts[] = {
    {"order", NX_OPT_INT, NULL, "1:32", 1, "the Butterworth order (band types: 2 order poles)"},
    {"fs", NX_OPT_FLOAT, "1", NULL, 1, "sampling frequency (> 0); cut-offs are in its units"},
    {"btype", NX_OPT_ENUM, "lowpass", "lowpass|highpass|bandpass|bandstop", 1,
     "lowpass (cut-off hi), highpass (cut-off lo), bandpass or bandstop (lo < hi)"},
    {"lo", NX_OPT_FLOAT, "0", NULL, 1, "lower cut-off, 0 < lo < fs/2 (0: not given)"},
    {"hi", NX_OPT_FLOAT, "0", NULL, 1, "upper cut-off, 0 < hi < fs/2 (0: not given)"},
};

#define F(m) offsetof(butter_args, m), NX_OP_NO_FIELD, sizeof(((butter_args *)0)->m)
static const nx_op_field fields[] = {{F(order)}, {F(fs)}, {F(btype)}, {F(lo)}, {F(hi)}};
#undef F

/* scipy.signal.butter(output='sos'): the same steps in double, rounding apart. */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F64, NULL, NULL, 1e-12, 1e-12},
};

const nx_op_desc nx_op_butterworth_sos = {
    .info = {.nopts = 5, .opts = opts},
    .opts_size = sizeof(butter_args),
    .fields = fields,
    .backend_offset = offsetof(butter_args, backend),
    .check = check,
    .run = run,
    .golden = "signal",
    .tols = tols,
    .ntols = 1,
    .flags = NX_OP_HOST,
};
