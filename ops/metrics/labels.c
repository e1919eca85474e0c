/* The class-label range check of roc_auc (class-index labels), confusion_matrix and
 * topk_accuracy (overlap.h). Labels are data, so the check cannot be a shape rule: the op's one
 * program also reduces each label array to its minimum and maximum, and after the run those two
 * numbers (copied from the device when the program ran there) decide between the result and an
 * error. No second pass over the labels and no second program. */
#include "ops/metrics/overlap.h"

void nx_metric_label_bounds(nx_graph *g, nx_node labels, nx_node *outs)
{
    int nd = nx_node_ndim(g, labels);
    nx_node x = nx_cast(g, labels, NX_DTYPE_I64);
    if (nd == 0) {
        outs[0] = outs[1] = x;
        return;
    }
    int axes[NX_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        axes[i] = i;
    outs[0] = nx_reduce(g, x, nd, axes, NX_MONOID_MIN, false);
    outs[1] = nx_reduce(g, x, nd, axes, NX_MONOID_MAX, false);
}

nx_status nx_metric_check_int_labels(const nx_op_args *c, int input)
{
    nx_dtype dt = nx_tensor_dtype(c->in[input]);
    if (!nx_dtype_is_int(dt))
        return nx_rt_error(c->ctx, NX_ERR_DTYPE,
                           "%s: %s is %s; expected an integer dtype (class indices)", c->who,
                           c->info->inputs[input], nx_dtype_name(dt));
    return NX_OK;
}

/* The value of an i64 0-d tensor, copied to the host first when it is on the device. */
static nx_status read_i64(const nx_tensor *t, int64_t *v)
{
    nx_tensor *h = NULL;
    const nx_tensor *src = t;
    if (nx_tensor_device(t) != NX_DEVICE_HOST) {
        nx_status st = nx_tensor_to_device(t, NX_DEVICE_HOST, &h);
        if (st != NX_OK)
            return st;
        src = h;
    }
    *v = *(const int64_t *)nx_tensor_data(src);
    nx_tensor_free(h);
    return NX_OK;
}

nx_status nx_metric_run_labels(const nx_op_args *c, nx_op_stage_fn build, const void *user,
                               int nout, const nx_metric_labels *l, nx_tensor **outs)
{
    nx_program *p = NULL;
    int total = nout + 2 * l->n;
    nx_tensor *res[NX_OP_MAX_IO + 4] = {0};
    nx_status st = nx_op_program(c, NULL, NULL, build, user, total, &p);
    if (st != NX_OK)
        return st;
    if ((st = nx_program_run(p, c->in, res)) != NX_OK)
        return st;
    for (int j = 0; j < l->n && st == NX_OK; j++) {
        int64_t lo = 0, hi = 0;
        if ((st = read_i64(res[nout + 2 * j], &lo)) != NX_OK ||
            (st = read_i64(res[nout + 2 * j + 1], &hi)) != NX_OK)
            break;
        /* An empty array's bounds are the folds' identities (lo > hi): nothing to check. */
        if (lo > hi)
            continue;
        if (lo < 0 || hi >= l->nclasses)
            st = nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                             "%s: %s holds the label %lld; expected class indices in 0..%lld "
                             "(%s is %lld)",
                             c->who, l->names[j], (long long)(lo < 0 ? lo : hi),
                             (long long)l->nclasses - 1, l->what, (long long)l->nclasses);
    }
    for (int i = 0; i < total; i++) {
        if (i < nout && st == NX_OK)
            outs[i] = res[i];
        else
            nx_tensor_free(res[i]);
    }
    return st;
}
