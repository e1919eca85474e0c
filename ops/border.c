/* The one border-mode enum's names (include/nitrix-op.h): scipy.ndimage's five modes and the
 * synonyms other libraries and the spec use for them. */
#include <strings.h>

#include "internal.h"
#include "nitrix-op.h"

static const char *const border_names[NX_BORDER_COUNT] = {
    [NX_BORDER_REFLECT] = "reflect", [NX_BORDER_CONSTANT] = "constant",
    [NX_BORDER_NEAREST] = "nearest", [NX_BORDER_MIRROR] = "mirror",
    [NX_BORDER_WRAP] = "wrap",
};

const char *nx_border_name(nx_border b)
{
    return (unsigned)b < NX_BORDER_COUNT ? border_names[b] : NULL;
}

nx_status nx_border_parse(nx_ctx *ctx, const char *name, nx_border *out)
{
    static const struct {
        const char *name;
        nx_border b;
    } synonyms[] = {
        {"edge", NX_BORDER_NEAREST},          {"replicate", NX_BORDER_NEAREST},
        {"symmetric", NX_BORDER_REFLECT},     {"grid-mirror", NX_BORDER_REFLECT},
        {"periodic", NX_BORDER_WRAP},         {"grid-wrap", NX_BORDER_WRAP},
        {"grid-constant", NX_BORDER_CONSTANT},
    };
    if (!out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "nx_border_parse: out is NULL");
    for (int b = 0; name && b < NX_BORDER_COUNT; b++)
        if (strcasecmp(name, border_names[b]) == 0) {
            *out = (nx_border)b;
            return NX_OK;
        }
    for (size_t i = 0; name && i < sizeof synonyms / sizeof synonyms[0]; i++)
        if (strcasecmp(name, synonyms[i].name) == 0) {
            *out = synonyms[i].b;
            return NX_OK;
        }
    return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                       "border mode '%s' is not known; expected reflect, constant, nearest, "
                       "mirror or wrap (or edge, replicate, symmetric, periodic, grid-mirror, "
                       "grid-wrap, grid-constant)",
                       name ? name : "(null)");
}

