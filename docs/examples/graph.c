/* The graph API: a 3-tap moving average with scipy's 'reflect' boundary, built from primitives
 * (pad + window + mean), compiled for the reference backend and run on a tensor. */
#include <nitrix.h>
#include <stdio.h>

static int fail(nx_ctx *ctx, nx_status st)
{
    fprintf(stderr, "graph: %s: %s\n", nx_status_str(st), nx_ctx_last_error(ctx));
    return 1;
}

int main(void)
{
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(NULL, &ctx) != NX_OK)
        return fail(NULL, NX_ERR_INVALID_ARG);

    /* y[i] = (x[i-1] + x[i] + x[i+1]) / 3, with x[-1] = x[0] and x[n] = x[n-1]. */
    nx_graph *g = NULL;
    nx_status st = nx_graph_new(ctx, &g);
    if (st != NX_OK)
        return fail(ctx, st);
    int64_t n = 5, one = 1, three = 3;
    int axis = 1;
    nx_node x = nx_input(g, "x", NX_DTYPE_F64, 1, &n);
    nx_node windows = nx_window(g, nx_pad(g, x, &one, &one, NX_PAD_REFLECT, 0.0), &three, NULL,
                                NULL);                /* shape [5, 3] */
    nx_node y = nx_mean(g, windows, 1, &axis, false); /* shape [5] */

    nx_compile_opts opts = {.backend = NX_BACKEND_REF, .n_outputs = 1, .outputs = &y};
    nx_program *prog = NULL;
    st = nx_graph_compile(g, &opts, &prog); /* reports any builder error recorded above */
    nx_graph_free(g);                       /* the program does not need the graph */
    if (st != NX_OK)
        return fail(ctx, st);

    double data[5] = {1, 2, 3, 4, 5};
    nx_tensor *xt = NULL, *yt = NULL;
    st = nx_tensor_wrap(ctx, data, NX_DTYPE_F64, 1, &n, NULL, &xt);
    if (st == NX_OK)
        st = nx_program_run(prog, (const nx_tensor *const[]){xt}, &yt);
    if (st == NX_OK) {
        const double *r = nx_tensor_data(yt);
        printf("moving average:");
        for (int64_t i = 0; i < nx_tensor_numel(yt); i++)
            printf(" %.4f", r[i]);
        printf("\n");
    }
    nx_tensor_free(yt);
    nx_tensor_free(xt);
    nx_program_free(prog);
    int rc = st == NX_OK ? 0 : fail(ctx, st);
    nx_ctx_free(ctx);
    return rc;
}
