/* `nitrix bench` rows of the geometry family's grid differences (bench.h): the Jacobian
 * determinant of a displacement field, 128^3 x 3 f32, boundary nearest, on the inputs
 * bench/peers-geometry.py gives NumPy (a smooth field: sums of sines of the coordinates, the
 * same formula):
 *   jacobian_det_displacement_128       det(I + grad u) per voxel (one fused program);
 *   jacobian_det_displacement_grad_128  the value, then nx_op_vjp of it (the gradient of u).
 * Peers are run by hand in the same session:
 *     /work/venv/bin/python bench/peers-geometry.py
 * The floor is memory traffic at this machine's memcpy rate measured in the same run: u read once
 * and det written once (3 + 1 volumes; with the gradient, u and dy read and du written: 7 more). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "nitrix-op.h"

#define GEO_N 128

static nx_status make_field(nx_ctx *ctx, nx_tensor **u)
{
    int64_t shape[4] = {GEO_N, GEO_N, GEO_N, 3};
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F32, 4, shape, u);
    if (st != NX_OK)
        return st;
    float *a = nx_tensor_data(*u);
    for (int i = 0; i < GEO_N; i++)
        for (int j = 0; j < GEO_N; j++)
            for (int k = 0; k < GEO_N; k++) {
                float *v = a + (((int64_t)i * GEO_N + j) * GEO_N + k) * 3;
                v[0] = (float)(2.0 * sin(0.05 * j) + sin(0.07 * k));
                v[1] = (float)(1.5 * sin(0.03 * i + 0.02 * k));
                v[2] = (float)(sin(0.04 * i) * cos(0.06 * j));
            }
    return NX_OK;
}

static nx_status call(nx_ctx *ctx, bool grad, nx_tensor *u, nx_tensor *dy)
{
    const nx_tensor *ins[1] = {u};
    const char *keys[] = {"boundary_mode"}, *vals[] = {"nearest"};
    nx_tensor *y = NULL, *dx[1] = {0};
    nx_status st = nx_op_call(ctx, "jacobian_det_displacement", 1, ins, 1, keys, vals, 1, &y);
    nx_tensor_free(y);
    if (st == NX_OK && grad)
        st = nx_op_vjp(ctx, "jacobian_det_displacement", 1, ins, 1, keys, vals, 1,
                       (const nx_tensor *[]){dy}, dx);
    nx_tensor_free(dx[0]);
    return st;
}

nx_status nx_bench_geometry(nx_ctx *ctx, const char *filter, int runs, bool json, FILE *f)
{
    static const struct {
        const char *name;
        bool grad;
        double volumes;
    } rows[] = {
        {"jacobian_det_displacement_128", false, 4.0},
        {"jacobian_det_displacement_grad_128", true, 11.0},
    };
    bool any = false;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        any = any || nx_bench_wanted(filter, rows[i].name);
    if (!any)
        return NX_OK;
    nx_tensor *u = NULL, *dy = NULL;
    nx_status st = make_field(ctx, &u);
    int64_t s3[3] = {GEO_N, GEO_N, GEO_N};
    if (st == NX_OK && (st = nx_tensor_new(ctx, NX_DTYPE_F32, 3, s3, &dy)) == NX_OK) {
        float *d = nx_tensor_data(dy);
        for (int64_t i = 0; i < nx_tensor_numel(dy); i++)
            d[i] = 1.0f;
    }
    double *t = st == NX_OK ? calloc((size_t)(runs > 0 ? runs : 1), sizeof(double)) : NULL;
    for (size_t r = 0; st == NX_OK && t && r < sizeof rows / sizeof rows[0]; r++) {
        if (!nx_bench_wanted(filter, rows[r].name))
            continue;
        nx_bench_row row;
        nx_bench_set_row(&row, rows[r].name, "[128,128,128,3]");
        st = call(ctx, rows[r].grad, u, dy); /* warm-up: compiles and caches */
        for (int i = 0; st == NX_OK && i < runs; i++) {
            double t0 = nx_bench_now();
            st = call(ctx, rows[r].grad, u, dy);
            t[i] = nx_bench_now() - t0;
        }
        if (st != NX_OK || runs < 1)
            break;
        row.runs = runs;
        row.min_s = row.max_s = t[0];
        for (int i = 1; i < runs; i++) {
            row.min_s = t[i] < row.min_s ? t[i] : row.min_s;
            row.max_s = t[i] > row.max_s ? t[i] : row.max_s;
        }
        row.median_s = nx_bench_median(t, runs);
        size_t bytes = (size_t)GEO_N * GEO_N * GEO_N * 4;
        double bw = nx_bench_memcpy_rate(bytes);
        row.floor_s = bw > 0 ? rows[r].volumes * (double)bytes / (2.0 * bw) : 0;
        snprintf(row.peer, sizeof row.peer, "numpy gradient + det (peers)");
        snprintf(row.note, sizeof row.note,
                 "floor %.0f volumes at memcpy %.1f GB/s; peer: bench/peers-geometry.py",
                 rows[r].volumes, bw / 1e9);
        nx_bench_print_row(&row, json, f);
    }
    free(t);
    nx_tensor_free(u);
    nx_tensor_free(dy);
    return st;
}
