/* The op `largest_connected_component`: the bool mask of the component with the most voxels
 * (ties: the lowest label; none: all false), from connected_components' labels. Its descriptor
 * and the typed entry point nx_largest_connected_component. A host op (NX_OP_HOST), as the labels
 * are. */
#include "morph.h"
#include "nitrix-ops.h"

typedef struct lcc_args {
    nx_backend backend;
    int64_t connectivity;
} lcc_args;

static const nx_op_opt opts[] = {
    {"connectivity", NX_OPT_INT, "1", "1:4", 1,
     "neighbours at most this many axes apart (1..ndim)"},
};
static const nx_op_field fields[] = {
    {offsetof(lcc_args, connectivity), NX_OP_NO_FIELD, sizeof(int64_t)},
};

/* The labels' driver checks the mask and the connectivity (nx_connected_components' messages). */
static nx_status check(const nx_op_args *c)
{
    (void)c;
    return NX_OK;
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    nx_ctx *ctx = c->ctx;
    const lcc_args *a = c->opts;
    nx_tensor *lab = NULL, *res = NULL;
    int32_t k = 0;
    int connectivity = a->connectivity >= 0 && a->connectivity <= 64 ? (int)a->connectivity : -1;
    nx_status st = nx_connected_components(ctx, c->in[0], connectivity, &lab, &k);
    if (st != NX_OK)
        return st;
    int64_t n = nx_tensor_numel(lab);
    int64_t *size = nx_rt_calloc(ctx, (size_t)k + 1, sizeof(int64_t));
    st = size ? nx_tensor_new(ctx, NX_DTYPE_BOOL, nx_tensor_ndim(lab), nx_tensor_shape(lab), &res)
              : nx_rt_nomem(ctx, "largest_connected_component: sizes", ((size_t)k + 1) * 8);
    if (st == NX_OK) {
        const int32_t *l = nx_tensor_data(lab);
        for (int64_t i = 0; i < n; i++)
            size[l[i]]++;
        int32_t best = 0; /* ties go to the lowest label; no component: all false */
        for (int32_t j = 1; j <= k; j++)
            if (size[j] > (best ? size[best] : 0))
                best = j;
        uint8_t *r = nx_tensor_data(res);
        for (int64_t i = 0; i < n; i++)
            r[i] = best && l[i] == best;
        outs[0] = res;
    }
    nx_rt_free(ctx, size, ((size_t)k + 1) * sizeof(int64_t));
    nx_tensor_free(lab);
    return st;
}

static const nx_op_tol tols[] = {
    {NX_DTYPE_BOOL, NULL, NULL, 0, 0},
    {NX_DTYPE_I32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_largest_connected_component = {
    .info = {.nopts = 1, .opts = opts, .aliases = NULL},
    .opts_size = sizeof(lcc_args),
    .fields = fields,
    .backend_offset = offsetof(lcc_args, backend),
    .check = check,
    .run = run,
    .golden = "morphology",
    .tols = tols,
    .ntols = sizeof tols / sizeof tols[0],
    .flags = NX_OP_HOST,
};

nx_status nx_largest_connected_component(nx_ctx *ctx, const nx_tensor *mask, int connectivity,
                                         nx_tensor **out)
{
    lcc_args a = {.connectivity = connectivity};
    return nx_op_run_as(ctx, &nx_op_largest_connected_component, "nx_largest_connected_component",
                        (const nx_tensor *const[]){mask}, &a, out);
}
