/* DEPRECATED (kept one release): `nitrix run morph` and `morph_element`, translated to the op
 * table's dilate, erode, open and close (nx_dilate ... nx_close) with the options they meant:
 * --op picks the op, --size/--padding/--mode/--cval keep their meaning, and morph_element's second
 * input becomes the structuring_element or the footprint (--element). New scripts call the ops
 * by name: `nitrix run dilate --size=3 x.npy -o y.npy`. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "nitrix-ops.h"

typedef nx_status (*morph_fn)(nx_ctx *, const nx_tensor *, const nx_morph_opts *, nx_tensor **);

static morph_fn op_of(const char *s)
{
    if (!strcmp(s, "erode"))
        return nx_erode;
    if (!strcmp(s, "open"))
        return nx_open;
    if (!strcmp(s, "close"))
        return nx_close;
    return nx_dilate;
}

static void common(nx_morph_opts *o, const cli_call *call, const char *padding, const char *mode,
                   double cval)
{
    static const char *const modes[] = {"reflect", "constant", "nearest", "mirror", "wrap"};
    o->backend = call->backend;
    o->padding = !strcmp(padding, "valid") ? NX_MORPH_VALID : NX_MORPH_SAME;
    o->border = NX_BORDER_REFLECT;
    for (int i = 0; i < NX_BORDER_COUNT; i++)
        if (!strcmp(mode, modes[i]))
            o->border = (nx_border)i;
    o->cval = cval;
}

nx_status cli_run_morph(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    const cli_value *v = call->values;
    const cli_value *size = &v[CLI_OPT_morph_size];
    int d = nx_tensor_ndim(call->inputs[0]);
    if (d < 1 || d > NX_MORPH_MAX_SPATIAL) {
        snprintf(call->err, call->errlen, "x has %d dims; expected 1..%d", d, NX_MORPH_MAX_SPATIAL);
        return NX_ERR_SHAPE;
    }
    if (size->n != 1 && size->n != d) {
        snprintf(call->err, call->errlen, "--size has %d values; expected 1 or %d (one per axis)",
                 size->n, d);
        return NX_ERR_INVALID_ARG;
    }
    nx_morph_opts o = {0};
    common(&o, call, v[CLI_OPT_morph_padding].choice, v[CLI_OPT_morph_mode].choice,
           v[CLI_OPT_morph_cval].f);
    for (int i = 0; i < d; i++)
        o.size[i] = size->ints[size->n == 1 ? 0 : i];
    return op_of(v[CLI_OPT_morph_op].choice)(ctx, call->inputs[0], &o, &outs[0]);
}

nx_status cli_run_morph_element(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    const cli_value *v = call->values;
    nx_morph_opts o = {0};
    common(&o, call, v[CLI_OPT_morph_element_padding].choice, v[CLI_OPT_morph_element_mode].choice,
           v[CLI_OPT_morph_element_cval].f);
    if (!strcmp(v[CLI_OPT_morph_element_element].choice, "footprint"))
        o.footprint = call->inputs[1];
    else
        o.structure = call->inputs[1];
    return op_of(v[CLI_OPT_morph_element_op].choice)(ctx, call->inputs[0], &o, &outs[0]);
}
