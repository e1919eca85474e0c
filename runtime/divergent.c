/* The divergent-op registry (runtime/divergent.def) and driver= resolution. The table is a static
 * array, so it is complete from load time and needs no lock. */
#include <string.h>

#include "internal.h"

/* An extra empty row keeps the array non-empty while the .def has no rows. */
static const nx_divergent_op registry[] = {
#define NX_DIVERGENT(op, canonical, fast, drivers, rtol, atol, reason)                             \
    {op, canonical, fast, drivers, rtol, atol, reason},
#include "divergent.def"
#undef NX_DIVERGENT
    {NULL, NULL, NULL, NULL, 0.0, 0.0, NULL},
};

#define REGISTRY_COUNT (sizeof registry / sizeof registry[0] - 1u)

const nx_divergent_op *nx_divergent_ops(size_t *count)
{
    if (count)
        *count = REGISTRY_COUNT;
    return registry;
}

bool nx_divergent_auto_fast(const nx_divergent_op *row)
{
    return row && row->rtol <= NX_DIVERGENT_AUTO_TOL && row->atol <= NX_DIVERGENT_AUTO_TOL;
}

/* Whether word is one of the '|'-separated values of list. */
static bool list_has(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, word, n) == 0)
            return true;
        if (!bar)
            break;
        p = bar + 1;
    }
    return false;
}

static const nx_divergent_op *find_row(const char *op)
{
    for (const nx_divergent_op *row = registry; row->op; row++) {
        if (strcmp(row->op, op) == 0)
            return row;
    }
    return NULL;
}

/* Resolution against one row; tests/fidelity calls it with rows of its own (declared there). */
NX_HIDDEN nx_status nx_rt_driver_resolve_row(nx_ctx *ctx, const nx_divergent_op *row,
                                             const char *driver, const char **out);
nx_status nx_rt_driver_resolve_row(nx_ctx *ctx, const nx_divergent_op *row, const char *driver,
                                   const char **out)
{
    if (!driver || !*driver || strcmp(driver, "auto") == 0) {
        *out = nx_ctx_reproducible(ctx) || !nx_divergent_auto_fast(row) ? row->canonical
                                                                         : row->fast;
        return NX_OK;
    }
    if (!list_has(row->drivers, driver))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: driver '%.64s' is unknown (expected auto|%s)", row->op, driver,
                           row->drivers);
    *out = strcmp(row->canonical, driver) == 0 ? row->canonical
           : strcmp(row->fast, driver) == 0    ? row->fast
                                               : driver;
    return NX_OK;
}

nx_status nx_driver_resolve(nx_ctx *ctx, const char *op, const char *driver, const char **out)
{
    if (!ctx || !op || !out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_driver_resolve: ctx, op and out must not be NULL");
    const nx_divergent_op *row = find_row(op);
    if (!row)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_driver_resolve: op '%.64s' is not in the divergent-op registry "
                           "(runtime/divergent.def); a driver site needs a registry row",
                           op);
    return nx_rt_driver_resolve_row(ctx, row, driver, out);
}
