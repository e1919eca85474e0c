/* The op `compose_affine`: the product a b (c (d)) of two to four affines of one rank d, in
 * either form ([..., d, d+1] or square), so that the last one is applied to coordinates first;
 * the result has the form of `a`. Leading axes broadcast (numpy's rule). An IR graph. */
#include "ops/geometry/affine.h"

typedef struct compose_args {
    nx_backend backend;
} compose_args;

static int count_inputs(const nx_op_args *c)
{
    int n = 2;
    while (n < 4 && c->in[n])
        n++;
    return n;
}

static nx_status check(const nx_op_args *c)
{
    int n = count_inputs(c), d0 = 0, rows;
    for (int i = 0; i < n; i++) {
        int d;
        nx_status st = nx_geo_check_affine(c, i, NX_GEO_MAX_RANK, &d, &rows);
        if (st != NX_OK)
            return st;
        if (i == 0)
            d0 = d;
        else if (d != d0)
            return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                               "%s: %s is of rank %d but a is of rank %d; expected one rank",
                               c->who, c->info->inputs[i], d, d0);
    }
    /* Leading axes broadcast, right-aligned. */
    for (int i = 1; i < n; i++) {
        int na = nx_tensor_ndim(c->in[0]) - 2, nb = nx_tensor_ndim(c->in[i]) - 2;
        const int64_t *sa = nx_tensor_shape(c->in[0]), *sb = nx_tensor_shape(c->in[i]);
        for (int k = 1; k <= na && k <= nb; k++)
            if (sa[na - k] != sb[nb - k] && sa[na - k] != 1 && sb[nb - k] != 1)
                return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                                   "%s: the batch axes of a and %s do not broadcast", c->who,
                                   c->info->inputs[i]);
    }
    return NX_OK;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    int n = count_inputs(c);
    nx_node acc = NX_NONE;
    for (int i = 0; i < n; i++) {
        const nx_tensor *t = c->in[i];
        nx_node m = nx_parameter(g, c->info->inputs[i], nx_tensor_dtype(t), nx_tensor_ndim(t),
                                 nx_tensor_shape(t));
        m = nx_geo_square(g, m);
        acc = i == 0 ? m : nx_matmul(g, acc, m);
    }
    const nx_tensor *a = c->in[0];
    int na = nx_tensor_ndim(a);
    const int64_t *sa = nx_tensor_shape(a);
    if (sa[na - 2] != sa[na - 1])
        acc = nx_mat_block(g, acc, 0, (int)sa[na - 2], 0, (int)sa[na - 1]);
    outs[0] = acc;
    return nx_graph_status(g);
}

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 1e-5, 1e-6},
    {NX_DTYPE_F64, NULL, NULL, 1e-13, 1e-14},
};

const nx_op_desc nx_op_compose_affine = {
    .opts_size = sizeof(compose_args),
    .backend_offset = offsetof(compose_args, backend),
    .check = check,
    .build = build,
    .golden = "geometry",
    .tols = tols,
    .ntols = 2,
};
