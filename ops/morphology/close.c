/* The op `close`: grey closing, erode(dilate(x)) as scipy.ndimage.grey_closing. Its descriptor;
 * the schema, check and run are
 * morph-run.c's (shared by the grey ops), the fragment nx_morph_node / nx_median_node
 * (morph-node.c). */
#include "morph.h"

static nx_status check(const nx_op_args *c)
{
    return nx_morph_desc_check(c, NX_MORPH_CLOSE);
}

static nx_status run(const nx_op_args *c, nx_tensor **outs)
{
    return nx_morph_desc_run(c, NX_MORPH_CLOSE, outs);
}

static const char *const aliases[] = {"grey_closing", NULL};

const nx_op_desc nx_op_close = {
    .info = {.nopts = NX_MORPH_NOPTS, .opts = nx_morph_opts_schema, .aliases = aliases},
    .opts_size = sizeof(nx_morph_args),
    .fields = nx_morph_fields,
    .backend_offset = offsetof(nx_morph_args, backend),
    .check = check,
    .run = run,
    .golden = "morphology",
    .tols = nx_morph_exact_tols,
    .ntols = NX_MORPH_NTOLS,
    .fd_note = "max/min/median are not differentiable at ties (two window places holding the "
               "winning value): the FD test jitters the golden inputs apart first",
};
