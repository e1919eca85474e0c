/* Using nitrix from C: make a tensor, convert it, save it as .npy and read it back. */
#include <nitrix.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "hello.npy";
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(NULL, &ctx) != NX_OK) {
        fprintf(stderr, "hello: %s\n", nx_ctx_last_error(NULL));
        return 1;
    }
    int64_t shape[2] = {2, 3};
    nx_tensor *x = NULL, *y = NULL, *back = NULL;
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F64, 2, shape, &x);
    if (st == NX_OK) {
        double *v = nx_tensor_data(x);
        for (int64_t i = 0; i < nx_tensor_numel(x); i++)
            v[i] = 0.5 * (double)i - 1.0;
        st = nx_tensor_cast(x, NX_DTYPE_I32, &y); /* truncates toward zero, as numpy */
    }
    if (st == NX_OK)
        st = nx_npy_write(ctx, path, y);
    if (st == NX_OK)
        st = nx_npy_read(ctx, path, &back);
    if (st == NX_OK) {
        const int32_t *r = nx_tensor_data(back);
        printf("nitrix %s: %s [%lld,%lld] =", nx_version(), nx_dtype_name(nx_tensor_dtype(back)),
               (long long)nx_tensor_shape(back)[0], (long long)nx_tensor_shape(back)[1]);
        for (int64_t i = 0; i < nx_tensor_numel(back); i++)
            printf(" %d", r[i]);
        printf("\n");
    } else {
        fprintf(stderr, "hello: %s: %s\n", nx_status_str(st), nx_ctx_last_error(ctx));
    }
    nx_tensor_free(back);
    nx_tensor_free(y);
    nx_tensor_free(x);
    nx_ctx_free(ctx);
    return st == NX_OK ? 0 : 1;
}
