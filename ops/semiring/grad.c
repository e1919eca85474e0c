/* Which semirings have gradients. The ops' vjps are reverse-mode autodiff of the graph fragment
 * the forward pass compiles, which the op table's runner takes (nx_op_run_vjp). */
#include "semiring.h"

nx_status nx_semiring_check_differentiable(nx_ctx *ctx, const nx_semiring *sr, const char *who)
{
    if (!sr)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: semiring is NULL", who);
    if (sr->props & NX_SEMIRING_DIFFERENTIABLE)
        return NX_OK;
    if (sr->kind == NX_SEMIRING_BOOLEAN)
        return nx_rt_error(ctx, NX_ERR_UNSUPPORTED,
                           "%s: semiring 'boolean' is forward-only (its values are truth values, "
                           "with no derivative)",
                           who);
    return nx_rt_error(ctx, NX_ERR_UNSUPPORTED,
                       "%s: semiring '%s' is forward-only: its (+) is a custom monoid, and only "
                       "semirings whose (+) is sum, max, min or logsumexp are differentiable",
                       who, sr->name);
}
