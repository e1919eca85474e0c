/* .npy throughput: C-order and Fortran-order reads, contiguous and transposed writes, from memory
 * and through files. Not a test; run by hand: bench-npy [MiB] [dir]. Reports the best of 5. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nitrix.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void check(nx_ctx *ctx, nx_status st)
{
    if (st != NX_OK) {
        fprintf(stderr, "bench-npy: %s\n", nx_ctx_last_error(ctx));
        exit(1);
    }
}

static void report(const char *what, double mib, double best)
{
    printf("%-34s %8.0f MiB/s\n", what, mib / best);
}

/* A Fortran-order image of the same values: the C image of the reversed shape, with the header
 * saying fortran_order (same length: "True " for "False"). */
static void make_fortran(void *buf, size_t len)
{
    char *p = memchr(buf, '{', len);
    char *f = strstr(p, "False");
    memcpy(f, "True ", 5);
}

int main(int argc, char **argv)
{
    int64_t mib = argc > 1 ? atoll(argv[1]) : 64;
    const char *dir = argc > 2 ? argv[2] : "/tmp";
    char path[4096];
    snprintf(path, sizeof path, "%s/bench-npy.npy", dir);
    nx_ctx *ctx = NULL;
    check(NULL, nx_ctx_new(NULL, &ctx));
    int64_t side = 1;
    while ((side * 2) * (side * 2) * 4 <= mib << 20)
        side *= 2;
    int64_t shape[2] = {side, side};
    double size = (double)(side * side * 4) / (1 << 20);
    nx_tensor *t = NULL;
    check(ctx, nx_tensor_new(ctx, NX_DTYPE_F32, 2, shape, &t));
    float *x = nx_tensor_data(t);
    for (int64_t i = 0; i < side * side; i++)
        x[i] = (float)i;
    int64_t tstrides[2] = {1, side};
    nx_tensor *tv = NULL;
    check(ctx, nx_tensor_wrap(ctx, x, NX_DTYPE_F32, 2, shape, tstrides, &tv));

    double best[7] = {1e30, 1e30, 1e30, 1e30, 1e30, 1e30, 1e30};
    for (int rep = 0; rep < 5; rep++) {
        void *buf = NULL, *fbuf = NULL;
        size_t len = 0, flen = 0;
        nx_tensor *r = NULL;
        double t0 = now();
        check(ctx, nx_npy_write_mem(ctx, t, &buf, &len));
        double t1 = now();
        check(ctx, nx_npy_read_mem(ctx, buf, len, &r));
        double t2 = now();
        nx_tensor_free(r);
        check(ctx, nx_npy_write_mem(ctx, t, &fbuf, &flen));
        make_fortran(fbuf, flen);
        double t3 = now();
        check(ctx, nx_npy_read_mem(ctx, fbuf, flen, &r));
        double t4 = now();
        nx_tensor_free(r);
        nx_ctx_buffer_free(ctx, fbuf, flen);
        nx_ctx_buffer_free(ctx, buf, len);
        double t5 = now();
        check(ctx, nx_npy_write_mem(ctx, tv, &buf, &len));
        double t6 = now();
        nx_ctx_buffer_free(ctx, buf, len);
        double t7 = now();
        check(ctx, nx_npy_write(ctx, path, t));
        double t8 = now();
        check(ctx, nx_npy_read(ctx, path, &r));
        double t9 = now();
        nx_tensor_free(r);
        check(ctx, nx_npy_write(ctx, path, tv));
        double t10 = now();
        double d[7] = {t1 - t0, t2 - t1, t4 - t3, t6 - t5, t8 - t7, t9 - t8, t10 - t9};
        for (int k = 0; k < 7; k++)
            best[k] = d[k] < best[k] ? d[k] : best[k];
    }
    remove(path);

    /* a Fortran-order volume, as np.save writes a nibabel image's data */
    int64_t cube = 1;
    while ((cube + 1) * (cube + 1) * (cube + 1) * 4 <= mib << 20)
        cube++;
    int64_t vshape[3] = {cube, cube, cube};
    nx_tensor *vol = NULL;
    check(ctx, nx_tensor_new(ctx, NX_DTYPE_F32, 3, vshape, &vol));
    void *vbuf = NULL;
    size_t vlen = 0;
    check(ctx, nx_npy_write_mem(ctx, vol, &vbuf, &vlen));
    make_fortran(vbuf, vlen);
    double vbest = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        nx_tensor *r = NULL;
        double t0 = now();
        check(ctx, nx_npy_read_mem(ctx, vbuf, vlen, &r));
        double d = now() - t0;
        vbest = d < vbest ? d : vbest;
        nx_tensor_free(r);
    }
    nx_ctx_buffer_free(ctx, vbuf, vlen);
    nx_tensor_free(vol);
    printf("%lld x %lld f32 (%.0f MiB), best of 5\n", (long long)side, (long long)side, size);
    report("write_mem, C-contiguous", size, best[0]);
    report("read_mem, C order", size, best[1]);
    report("read_mem, Fortran order", size, best[2]);
    report("write_mem, transposed view", size, best[3]);
    report("write (file, fsync), C-contiguous", size, best[4]);
    report("read (file), C order", size, best[5]);
    report("write (file, fsync), transposed", size, best[6]);
    char what[64];
    snprintf(what, sizeof what, "read_mem, Fortran %lld^3 volume", (long long)cube);
    report(what, (double)(cube * cube * cube * 4) / (1 << 20), vbest);
    nx_tensor_free(tv);
    nx_tensor_free(t);
    nx_ctx_free(ctx);
    return 0;
}
