/* `nitrix run` for the morphology entry points: morph (flat box; every axis of x is spatial),
 * morph_element (explicit structure or footprint), distance_transform (chamfer metrics),
 * distance_transform_edt, median_filter, connected_components, largest_connected_component,
 * max_pool_with_indices_nd and max_unpool_nd (channels-last). */
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

/* One value for all n places, or exactly n values; else a message in call->err. */
static bool per_axis(const cli_call *call, const char *what, const cli_value *v, int n,
                     int64_t *ints, double *floats)
{
    if (v->n != 1 && v->n != n) {
        snprintf(call->err, call->errlen, "--%s has %d values; expected 1 or %d (one per axis)",
                 what, v->n, n);
        return false;
    }
    for (int i = 0; i < n; i++) {
        if (ints)
            ints[i] = v->ints[v->n == 1 ? 0 : i];
        if (floats)
            floats[i] = v->floats[v->n == 1 ? 0 : i];
    }
    return true;
}

nx_status cli_run_distance_transform_edt(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    const cli_value *v = call->values;
    int d = nx_tensor_ndim(call->inputs[0]);
    double sampling[NX_MAX_DIMS];
    if (d < 1 || d >= NX_MAX_DIMS) {
        snprintf(call->err, call->errlen, "mask has %d dims; expected 1..%d", d, NX_MAX_DIMS - 1);
        return NX_ERR_SHAPE;
    }
    if (!per_axis(call, "sampling", &v[CLI_OPT_distance_transform_edt_sampling], d, NULL,
                  sampling))
        return NX_ERR_INVALID_ARG;
    nx_edt_opts o = {.backend = call->backend, .sampling = sampling,
                     .driver = v[CLI_OPT_distance_transform_edt_driver].choice};
    return nx_distance_transform_edt(ctx, call->inputs[0], &o, &outs[0]);
}

nx_status cli_run_median_filter(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    const cli_value *v = call->values;
    int d = nx_tensor_ndim(call->inputs[0]);
    if (d < 1 || d > NX_MORPH_MAX_SPATIAL) {
        snprintf(call->err, call->errlen, "x has %d dims; expected 1..%d", d, NX_MORPH_MAX_SPATIAL);
        return NX_ERR_SHAPE;
    }
    nx_morph_opts o = {0};
    common(&o, call, "same", v[CLI_OPT_median_filter_mode].choice, v[CLI_OPT_median_filter_cval].f);
    if (!per_axis(call, "size", &v[CLI_OPT_median_filter_size], d, o.size, NULL))
        return NX_ERR_INVALID_ARG;
    return nx_median_filter(ctx, call->inputs[0], &o, &outs[0]);
}

nx_status cli_run_connected_components(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    int c = (int)call->values[CLI_OPT_connected_components_connectivity].i;
    return nx_connected_components(ctx, call->inputs[0], c, &outs[0], NULL);
}

nx_status cli_run_largest_connected_component(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    int c = (int)call->values[CLI_OPT_largest_connected_component_connectivity].i;
    return nx_largest_connected_component(ctx, call->inputs[0], c, &outs[0]);
}

/* The pooling options; the four value slots are the op's nspatial, kernel, stride, padding. */
static bool pool_opts(const cli_call *call, const cli_value *nsp, const cli_value *kernel,
                      const cli_value *stride, const cli_value *padding, nx_pool_opts *o)
{
    o->backend = call->backend;
    o->nspatial = (int)nsp->i;
    return per_axis(call, "kernel", kernel, o->nspatial, o->kernel, NULL) &&
           per_axis(call, "stride", stride, o->nspatial, o->stride, NULL) &&
           per_axis(call, "padding", padding, o->nspatial, o->padding, NULL);
}

nx_status cli_run_max_pool_with_indices_nd(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    const cli_value *v = call->values;
    nx_pool_opts o = {0};
    if (!pool_opts(call, &v[CLI_OPT_max_pool_with_indices_nd_nspatial],
                   &v[CLI_OPT_max_pool_with_indices_nd_kernel],
                   &v[CLI_OPT_max_pool_with_indices_nd_stride],
                   &v[CLI_OPT_max_pool_with_indices_nd_padding], &o))
        return NX_ERR_INVALID_ARG;
    return nx_max_pool_with_indices_nd(ctx, call->inputs[0], &o, &outs[0], &outs[1]);
}

nx_status cli_run_max_unpool_nd(nx_ctx *ctx, const cli_call *call, nx_tensor **outs)
{
    const cli_value *v = call->values;
    nx_pool_opts o = {0};
    if (!pool_opts(call, &v[CLI_OPT_max_unpool_nd_nspatial], &v[CLI_OPT_max_unpool_nd_kernel],
                   &v[CLI_OPT_max_unpool_nd_stride], &v[CLI_OPT_max_unpool_nd_padding], &o) ||
        !per_axis(call, "size", &v[CLI_OPT_max_unpool_nd_size], o.nspatial, o.output_size, NULL))
        return NX_ERR_INVALID_ARG;
    return nx_max_unpool_nd(ctx, call->inputs[0], call->inputs[1], &o, &outs[0]);
}
