/* The op `median_filter`: scipy.ndimage.median_filter (the element of rank count / 2 of each
 * window). Its descriptor; the schema, check and run are
 * morph-run.c's (shared by the grey ops), the fragment nx_morph_node / nx_median_node
 * (morph-node.c). */
#include "morph.h"

static nx_status check(const nx_op_args *c)
{
    return nx_morph_desc_check(c, NX_MORPH_OP_COUNT);
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    return nx_morph_desc_run(c, NX_MORPH_OP_COUNT, outs);
}

static const char *const aliases[] = {"median", NULL};

const nx_op_desc nx_op_median_filter = {
    .info = {.nopts = NX_MORPH_MEDIAN_NOPTS, .opts = nx_morph_median_schema, .aliases = aliases},
    .opts_size = sizeof(nx_morph_args),
    .fields = nx_morph_median_fields,
    .backend_offset = offsetof(nx_morph_args, backend),
    .check = check,
    .run = run,
    .golden = "morphology",
    .tols = nx_morph_exact_tols,
    .ntols = NX_MORPH_NTOLS,
    .fd_note = "max/min/median are not differentiable at ties (two window places holding the "
               "winning value): the FD test jitters the golden inputs apart first",
};
