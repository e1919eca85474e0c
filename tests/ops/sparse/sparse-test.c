#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sparse-test.h"

nx_ctx *st_ctx(void)
{
    static nx_test_alloc ta;
    memset(&ta, 0, sizeof ta);
    return nx_test_ctx(&ta);
}

static bool gpu_present(void)
{
    nx_ctx *ctx = st_ctx();
    nx_system_info info;
    bool ok =
        nx_system_info_get(ctx, &info) == NX_OK && info.cuda_driver_found && info.gpu_count > 0;
    nx_ctx_free(ctx);
    return ok;
}

nx_backend st_backend(void)
{
    const char *s = getenv("NX_TEST_BACKEND");
    if (!s || !*s || !strcmp(s, "cpu"))
        return NX_BACKEND_CPU;
    if (!strcmp(s, "ref"))
        return NX_BACKEND_REF;
    if (!strcmp(s, "cuda")) {
        if (!gpu_present()) {
            print_message("NX_TEST_BACKEND=cuda but no GPU answers: skipped\n");
            skip();
        }
        return NX_BACKEND_CUDA;
    }
    fail_msg("NX_TEST_BACKEND=%s; expected cpu, ref or cuda", s);
    return NX_BACKEND_REF;
}

nx_tensor *st_load(nx_ctx *ctx, const char *name, const char *key)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s_%s.npy", NX_SPARSE_DATA_DIR, name, key);
    nx_tensor *t = NULL;
    if (nx_npy_read(ctx, path, &t) != NX_OK)
        fail_msg("cannot read %s: %s", path, nx_ctx_last_error(ctx));
    return t;
}

const nx_semiring *st_semiring(nx_ctx *ctx, const char *name, nx_semiring **user)
{
    *user = NULL;
    for (int k = 0; k < NX_SEMIRING_USER; k++) {
        nx_semiring_info info;
        nx_semiring_get_info(nx_semiring_builtin(k), &info);
        if (!strcmp(info.name, name))
            return nx_semiring_builtin(k);
    }
    const char *formula = !strcmp(name, "maxtimes") ? "plus = max(a, b); times = a * b; zero = -inf"
                          : !strcmp(name, "probor")
                              ? "plus = a + b - a * b; times = a * b; zero = 0"
                              : NULL;
    if (!formula)
        fail_msg("no semiring %s", name);
    if (nx_semiring_parse(ctx, name, formula, user) != NX_OK)
        fail_msg("%s: %s", name, nx_ctx_last_error(ctx));
    return *user;
}

nx_tensor *st_mat(nx_ctx *ctx, int64_t r, int64_t c, const double *v)
{
    nx_tensor *t = NULL;
    int64_t s[2] = {r, c};
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 2, s, &t), NX_OK);
    if (r > 0 && c > 0)
        memcpy(nx_tensor_data(t), v, (size_t)(r * c) * sizeof(double));
    return t;
}

nx_tensor *st_index(nx_ctx *ctx, int64_t r, int64_t c, const int64_t *v, nx_dtype dt)
{
    nx_tensor *t = NULL;
    int64_t s[2] = {r, c};
    assert_int_equal(nx_tensor_new(ctx, dt, 2, s, &t), NX_OK);
    for (int64_t i = 0; i < r * c; i++) {
        if (dt == NX_DTYPE_I32)
            ((int32_t *)nx_tensor_data(t))[i] = (int32_t)v[i];
        else
            ((int64_t *)nx_tensor_data(t))[i] = v[i];
    }
    return t;
}

nx_ell st_ell(nx_ctx *ctx, int64_t m, int64_t k, int64_t n_cols, const double *values,
              const int64_t *indices, double identity)
{
    nx_ell e = {.values = st_mat(ctx, m, k, values),
                .indices = st_index(ctx, m, k, indices, NX_DTYPE_I64),
                .n_cols = n_cols,
                .identity = identity};
    return e;
}

double st_at(const nx_tensor *t, int64_t i)
{
    const void *d = nx_tensor_data(t);
    switch (nx_tensor_dtype(t)) {
    case NX_DTYPE_F32:
        return ((const float *)d)[i];
    case NX_DTYPE_F64:
        return ((const double *)d)[i];
    case NX_DTYPE_I32:
        return ((const int32_t *)d)[i];
    case NX_DTYPE_I64:
        return (double)((const int64_t *)d)[i];
    case NX_DTYPE_BOOL:
        return ((const bool *)d)[i];
    default:
        fail_msg("unexpected dtype");
        return 0;
    }
}

void st_expect_close(const char *what, nx_backend be, const nx_tensor *got, const nx_tensor *want,
                     const char *sr)
{
    assert_int_equal(nx_tensor_ndim(got), nx_tensor_ndim(want));
    for (int i = 0; i < nx_tensor_ndim(got); i++)
        assert_int_equal(nx_tensor_shape(got)[i], nx_tensor_shape(want)[i]);
    assert_int_equal(nx_tensor_dtype(got), nx_tensor_dtype(want));
    bool f32 = nx_tensor_dtype(got) == NX_DTYPE_F32;
    bool exact = sr && (!strcmp(sr, "boolean") || (!f32 && strstr(sr, "tropical")));
    double tol = exact ? 0.0 : f32 ? 2e-5 : 1e-12;
    for (int64_t i = 0; i < nx_tensor_numel(want); i++)
        if (!nx_test_close(st_at(got, i), st_at(want, i), tol, tol))
            fail_msg("%s (%s, %s, %s): element %lld is %.17g, expected %.17g", what, sr ? sr : "-",
                     nx_dtype_name(nx_tensor_dtype(got)), nx_backend_name(be), (long long)i,
                     st_at(got, i), st_at(want, i));
}

void st_expect_values(const char *what, const nx_tensor *got, const double *want, int64_t n)
{
    assert_int_equal(nx_tensor_numel(got), n);
    for (int64_t i = 0; i < n; i++)
        if (!nx_test_close(st_at(got, i), want[i], 1e-12, 1e-12))
            fail_msg("%s: element %lld is %.17g, expected %.17g", what, (long long)i, st_at(got, i),
                     want[i]);
}

int st_for_cases(const char *kind, st_case_fn fn)
{
    nx_backend bes[2] = {NX_BACKEND_REF, st_backend()};
    char path[1024], line[512];
    snprintf(path, sizeof path, "%s/manifest.txt", NX_SPARSE_DATA_DIR);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    int n = 0;
    nx_ctx *ctx = st_ctx();
    while (fgets(line, sizeof line, fp)) {
        char *f[12];
        int nf = 0;
        for (char *tok = strtok(line, " \n"); tok && nf < 12; tok = strtok(NULL, " \n"))
            f[nf++] = tok;
        if (nf == 0 || f[0][0] == '#' || strcmp(f[0], kind))
            continue;
        for (int b = 0; b < (bes[1] == NX_BACKEND_REF ? 1 : 2); b++)
            fn(ctx, bes[b], f, nf);
        n++;
    }
    fclose(fp);
    nx_ctx_free(ctx);
    return n;
}
