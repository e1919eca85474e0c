/* `nitrix run` for the morphology entry points: morph (flat box; every axis of x is spatial),
 * morph_element (explicit structure or footprint) and distance_transform (chamfer metrics). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "nitrix-ops.h"

static int index_of(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i]))
            return i;
    return 0;
}

static nx_morph_op op_of(const char *s)
{
    static const char *const ops[] = {"dilate", "erode", "open", "close"};
    return (nx_morph_op)index_of(s, ops, 4);
}

static void common(nx_morph_opts *o, const cli_call *call, const char *padding, const char *mode,
                   double cval)
{
    static const char *const modes[] = {"reflect", "constant", "nearest", "mirror", "wrap"};
    o->backend = call->backend;
    o->padding = !strcmp(padding, "valid") ? NX_MORPH_VALID : NX_MORPH_SAME;
    o->border = (nx_morph_border)index_of(mode, modes, NX_MORPH_BORDER_COUNT);
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
    return nx_morph(ctx, op_of(v[CLI_OPT_morph_op].choice), call->inputs[0], &o, &outs[0]);
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
    return nx_morph(ctx, op_of(v[CLI_OPT_morph_element_op].choice), call->inputs[0], &o, &outs[0]);
}

nx_status cli_run_distance_transform(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    nx_distance_opts o = {.backend = call->backend};
    if (!strcmp(call->values[CLI_OPT_distance_transform_metric].choice, "taxicab"))
        o.metric = NX_DISTANCE_TAXICAB;
    return nx_distance_transform(ctx, call->inputs[0], &o, &outs[0]);
}
