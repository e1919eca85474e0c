/* The op `connected_components` (scipy.ndimage.label): its descriptor and the typed entry points
 * nx_connected_components / nx_connected_components_opts. Two outputs, as scipy's label returns
 * two: the i32 labels 1..K and num_labels, K as a 0-d i64 (on the labels' device), which the
 * drivers compute anyway (a typed caller gets K through n_labels instead, the 0-d tensor
 * dropped). `nitrix run` prints a 0-d output. The drivers: union-find over runs on the host
 * (label-uf.c) and label propagation as IR programs on any backend (label-prop.c). The op runs as
 * a host op (NX_OP_HOST): the driver decides where it runs, as the header says. */
#include <string.h>

#include "morph.h"
#include "nitrix-ops.h"

typedef struct label_args {
    nx_backend backend;
    int64_t connectivity;
    int driver;        /* auto | union_find | propagation */
    int32_t *n_labels; /* typed callers: receives K (not an option) */
} label_args;

static const char *const driver_names[] = {"auto", "union_find", "propagation"};

static const nx_op_opt opts[] = {
    {"connectivity", NX_OPT_INT, "1", "1:4", 1,
     "neighbours at most this many axes apart (1..ndim)"},
    {"driver", NX_OPT_ENUM, "auto", "auto|union_find|propagation", 1,
     "union_find: runs on the CPU (host masks); propagation: IR programs (the device driver)"},
};
static const nx_op_field fields[] = {
    {offsetof(label_args, connectivity), NX_OP_NO_FIELD, sizeof(int64_t)},
    {offsetof(label_args, driver), NX_OP_NO_FIELD, sizeof(int)},
};

/* The drivers check the mask and the connectivity with their entry points' messages; here only
 * what the schema's types cannot say. */
static nx_status check(const nx_op_args *c)
{
    const label_args *a = c->opts;
    if ((unsigned)a->driver >= 3)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG, "%s: driver %d is out of range", c->who,
                           a->driver);
    return NX_OK;
}

static int conn_of(const label_args *a)
{
    return a->connectivity >= 0 && a->connectivity <= 64 ? (int)a->connectivity : -1;
}

/* K as a 0-d i64 on device dev. */
static nx_status count_tensor(nx_ctx *ctx, int32_t k, nx_device dev, nx_tensor **out)
{
    nx_tensor *h = NULL;
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_I64, 0, NULL, &h);
    if (st != NX_OK)
        return st;
    *(int64_t *)nx_tensor_data(h) = k;
    if (dev == NX_DEVICE_HOST) {
        *out = h;
        return NX_OK;
    }
    st = nx_tensor_to_device(h, dev, out);
    nx_tensor_free(h);
    return st;
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    const label_args *a = c->opts;
    const nx_tensor *mask = c->in[0];
    int32_t k = 0;
    nx_status st;
    if (a->driver == 1 && nx_tensor_device(mask) == NX_DEVICE_HOST) {
        st = nx_morph_label_union_find(c->ctx, mask, conn_of(a), &outs[0], &k);
    } else {
        nx_label_opts o = {.connectivity = conn_of(a),
                           .driver = driver_names[a->driver],
                           .backend = a->backend};
        st = nx_morph_label_opts(c->ctx, mask, &o, &outs[0], &k);
    }
    if (st != NX_OK)
        return st;
    if (a->n_labels)
        *a->n_labels = k;
    st = count_tensor(c->ctx, k, nx_tensor_device(outs[0]), &outs[1]);
    if (st != NX_OK) {
        nx_tensor_free(outs[0]);
        outs[0] = NULL;
    }
    return st;
}

/* The typed entry points' single output: the labels; num_labels is dropped (n_labels has K). */
static nx_status run_labels(nx_ctx *ctx, const char *who, const nx_tensor *mask,
                            const label_args *a, nx_tensor **out)
{
    if (!out) /* the runner's message */
        return nx_op_run_as(ctx, &nx_op_connected_components, who,
                            (const nx_tensor *const[]){mask}, a, out);
    *out = NULL;
    nx_tensor *outs[2] = {NULL, NULL};
    nx_status st = nx_op_run_as(ctx, &nx_op_connected_components, who,
                                (const nx_tensor *const[]){mask}, a, outs);
    if (st == NX_OK)
        *out = outs[0];
    nx_tensor_free(outs[1]);
    return st;
}

static const nx_op_tol tols[] = {
    {NX_DTYPE_I32, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_connected_components = {
    .info = {.nopts = 2, .opts = opts, .aliases = NULL},
    .opts_size = sizeof(label_args),
    .fields = fields,
    .backend_offset = offsetof(label_args, backend),
    .check = check,
    .run = run,
    .golden = "morphology",
    .tols = tols,
    .ntols = 1,
    .flags = NX_OP_HOST,
};

nx_status nx_connected_components(nx_ctx *ctx, const nx_tensor *mask, int connectivity,
                                  nx_tensor **out, int32_t *n_labels)
{
    /* A host mask takes union-find whatever the context's backend; a device mask the auto
     * driver (propagation on the GPU). */
    label_args a = {.connectivity = connectivity,
                    .driver = mask && nx_tensor_device(mask) != NX_DEVICE_HOST ? 0 : 1,
                    .n_labels = n_labels};
    return run_labels(ctx, "nx_connected_components", mask, &a, out);
}

nx_status nx_connected_components_opts(nx_ctx *ctx, const nx_tensor *mask,
                                       const nx_label_opts *opts, nx_tensor **out,
                                       int32_t *n_labels)
{
    static const char *who = "nx_connected_components_opts";
    int d = 0;
    while (opts && d < 3 &&
           !(opts->driver ? strcmp(opts->driver, driver_names[d]) == 0 : d == 0))
        d++;
    /* No options, an unknown driver or an unknown backend: the driver's own checks say so. */
    if (!ctx || !opts || !mask || d == 3 || opts->backend < NX_BACKEND_AUTO ||
        opts->backend > NX_BACKEND_REF) {
        if (!ctx)
            return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: ctx is NULL", who);
        return nx_morph_label_opts(ctx, mask, opts, out, n_labels);
    }
    label_args a = {.backend = opts->backend,
                    .connectivity = opts->connectivity,
                    .driver = d,
                    .n_labels = n_labels};
    return run_labels(ctx, who, mask, &a, out);
}
