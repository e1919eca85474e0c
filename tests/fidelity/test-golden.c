/* The golden runner: replays every case of golden/ (docs/fidelity.md) on every available backend
 * (ref and cpu; cuda when a device answers) and compares with the case's reference output within
 * golden/tolerance.tsv. A case whose op has no runner here, or no tolerance row, fails. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nitrix-ops.h"
#include "testutil.h"

#define GOLDEN NX_SOURCE_ROOT "/golden"
#define LINE 512
#define MAX_TOL 256

typedef struct manifest {
    char op[64], dtype[16], inputs[256], output[64], options[256], generator[256], numpy[32];
} manifest;

typedef struct tol_row {
    char op[64], dtype[16], backend[16], driver[32];
    double rtol, atol;
} tol_row;

static tol_row tols[MAX_TOL];
static int n_tols;

static void load_tolerances(void)
{
    FILE *f = fopen(GOLDEN "/tolerance.tsv", "r");
    assert_non_null(f);
    char line[LINE];
    n_tols = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        tol_row *t = &tols[n_tols];
        int got = sscanf(line, "%63s %15s %15s %31s %lf %lf", t->op, t->dtype, t->backend,
                         t->driver, &t->rtol, &t->atol);
        if (got != 6)
            fail_msg("golden/tolerance.tsv: malformed row: %s", line);
        assert_true(t->rtol >= 0 && t->atol >= 0 && t->rtol < 1);
        assert_true(++n_tols < MAX_TOL);
    }
    fclose(f);
}

/* The most specific row for (op, dtype, backend); driver is "*" until a golden op has drivers. */
static const tol_row *find_tol(const char *op, const char *dtype, const char *backend)
{
    const tol_row *best = NULL;
    int best_score = -1;
    for (int i = 0; i < n_tols; i++) {
        const tol_row *t = &tols[i];
        if (strcmp(t->op, op) || strcmp(t->dtype, dtype))
            continue;
        bool exact_b = strcmp(t->backend, backend) == 0;
        if (!exact_b && strcmp(t->backend, "*"))
            continue;
        if (strcmp(t->driver, "*"))
            continue;
        if ((int)exact_b > best_score) {
            best = t;
            best_score = exact_b;
        }
    }
    return best;
}

static bool read_manifest(const char *dir, manifest *m)
{
    char path[1024], line[LINE];
    snprintf(path, sizeof path, "%.900s/manifest.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    memset(m, 0, sizeof *m);
    while (fgets(line, sizeof line, f)) {
        char *eq = strstr(line, " = ");
        if (!eq)
            continue;
        *eq = 0;
        char *v = eq + 3;
        v[strcspn(v, "\n")] = 0;
        struct {
            const char *key;
            char *dst;
            size_t len;
        } keys[] = {{"op", m->op, sizeof m->op},
                    {"dtype", m->dtype, sizeof m->dtype},
                    {"inputs", m->inputs, sizeof m->inputs},
                    {"output", m->output, sizeof m->output},
                    {"options", m->options, sizeof m->options},
                    {"generator", m->generator, sizeof m->generator},
                    {"numpy", m->numpy, sizeof m->numpy}};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            if (strcmp(line, keys[i].key) == 0)
                snprintf(keys[i].dst, keys[i].len, "%s", v);
        }
    }
    fclose(f);
    return m->op[0] && m->dtype[0] && m->inputs[0] && m->output[0] && m->generator[0] &&
           m->numpy[0];
}

/* The value of option `name` in "a=b c=d", or NULL. */
static const char *option(const manifest *m, const char *name, char *buf, size_t len)
{
    size_t n = strlen(name);
    for (const char *p = m->options; *p;) {
        while (*p == ' ')
            p++;
        if (strncmp(p, name, n) == 0 && p[n] == '=') {
            size_t vl = strcspn(p + n + 1, " ");
            snprintf(buf, len, "%.*s", (int)vl, p + n + 1);
            return buf;
        }
        p += strcspn(p, " ");
    }
    return NULL;
}

static const nx_semiring *semiring_of(const manifest *m)
{
    static const char *names[] = {"real", "log", "tropical_max_plus", "tropical_min_plus",
                                  "boolean", "euclidean"};
    char buf[64];
    const char *v = option(m, "semiring", buf, sizeof buf);
    for (int i = 0; v && i < 6; i++) {
        if (strcmp(v, names[i]) == 0)
            return nx_semiring_builtin((nx_semiring_kind)i);
    }
    return NULL;
}

typedef nx_status (*golden_fn)(nx_ctx *ctx, const manifest *m, nx_backend be, nx_tensor **in,
                               nx_tensor **out);

static nx_status run_semiring_matmul(nx_ctx *ctx, const manifest *m, nx_backend be,
                                     nx_tensor **in, nx_tensor **out)
{
    nx_semiring_opts o = {.backend = be};
    return nx_semiring_matmul(ctx, semiring_of(m), in[0], in[1], &o, out);
}

static nx_status run_semiring_conv(nx_ctx *ctx, const manifest *m, nx_backend be, nx_tensor **in,
                                   nx_tensor **out)
{
    char buf[64];
    const char *pad = option(m, "padding", buf, sizeof buf);
    nx_semiring_conv_opts o = {.backend = be};
    o.padding = pad && strcmp(pad, "valid") == 0 ? NX_CONV_VALID : NX_CONV_SAME;
    return nx_semiring_conv(ctx, semiring_of(m), in[0], in[1], &o, out);
}

/* The op families' runners, one file each: functions plus a GOLDEN_<FAMILY>_ROWS list of
 * {"op", run_fn, n_inputs}, rows. They may use option() and semiring_of() above. */
#include "golden-morphology.inc"
#include "golden-sparse.inc"
#include "golden-smoothing.inc"
#include "golden-bilateral.inc"

/* One row per op with golden cases. */
static const struct {
    const char *op;
    golden_fn run;
    int n_inputs;
} golden_ops[] = {
    {"semiring_matmul", run_semiring_matmul, 2},
    {"semiring_conv", run_semiring_conv, 2},
    GOLDEN_MORPHOLOGY_ROWS GOLDEN_SPARSE_ROWS GOLDEN_SMOOTHING_ROWS GOLDEN_BILATERAL_ROWS
};

static int compare(const char *where, const nx_tensor *got, const nx_tensor *want,
                   const tol_row *t)
{
    int nd = nx_tensor_ndim(want);
    if (nx_tensor_ndim(got) != nd || nx_tensor_dtype(got) != nx_tensor_dtype(want) ||
        memcmp(nx_tensor_shape(got), nx_tensor_shape(want), (size_t)nd * sizeof(int64_t))) {
        printf("%s: shape or dtype differs from the reference\n", where);
        return 1;
    }
    int64_t n = nx_tensor_numel(want);
    bool f32 = nx_tensor_dtype(want) == NX_DTYPE_F32;
    const void *g = nx_tensor_data(got), *w = nx_tensor_data(want);
    for (int64_t i = 0; i < n; i++) {
        double a = f32 ? ((const float *)g)[i] : ((const double *)g)[i];
        double b = f32 ? ((const float *)w)[i] : ((const double *)w)[i];
        if (!nx_test_close(a, b, t->rtol, t->atol)) {
            printf("%s: element %lld is %.17g, reference %.17g (rtol %g, atol %g)\n", where,
                   (long long)i, a, b, t->rtol, t->atol);
            return 1;
        }
    }
    return 0;
}

static int replay(nx_ctx *ctx, const char *dir, const char *name, nx_backend be, int *runs)
{
    manifest m;
    char where[512];
    snprintf(where, sizeof where, "%.400s [%s]", name, nx_backend_name(be));
    if (!read_manifest(dir, &m)) {
        printf("%s: manifest.txt missing or lacks op/dtype/inputs/output/generator/numpy\n", name);
        return 1;
    }
    const tol_row *t = find_tol(m.op, m.dtype, nx_backend_name(be));
    int k = -1;
    for (size_t i = 0; i < sizeof golden_ops / sizeof golden_ops[0]; i++)
        k = strcmp(golden_ops[i].op, m.op) == 0 ? (int)i : k;
    if (!t || k < 0) {
        printf("%s: op %s dtype %s has no %s\n", where, m.op, m.dtype,
               !t ? "row in golden/tolerance.tsv" : "runner in tests/fidelity/test-golden.c");
        return 1;
    }
    nx_tensor *in[8] = {0}, *want = NULL, *got = NULL;
    int n_in = 0, bad = 0;
    char files[256], path[1024];
    snprintf(files, sizeof files, "%s", m.inputs);
    char *save = NULL;
    for (char *f = strtok_r(files, " ", &save); f && n_in < 8; f = strtok_r(NULL, " ", &save)) {
        snprintf(path, sizeof path, "%.700s/%.200s", dir, f);
        bad += nx_npy_read(ctx, path, &in[n_in++]) != NX_OK;
    }
    snprintf(path, sizeof path, "%.700s/%.60s", dir, m.output);
    bad += nx_npy_read(ctx, path, &want) != NX_OK;
    if (bad || n_in != golden_ops[k].n_inputs) {
        printf("%s: inputs or output unreadable: %s\n", where, nx_ctx_last_error(ctx));
        bad = 1;
    } else if (golden_ops[k].run(ctx, &m, be, in, &got) != NX_OK) {
        printf("%s: %s\n", where, nx_ctx_last_error(ctx));
        bad = 1;
    } else {
        bad = compare(where, got, want, t);
        (*runs)++;
    }
    for (int i = 0; i < n_in; i++)
        nx_tensor_free(in[i]);
    nx_tensor_free(want);
    nx_tensor_free(got);
    return bad;
}

static void test_replay_all(void **state)
{
    (void)state;
    load_tolerances();
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_system_info info;
    assert_int_equal(nx_system_info_get(ctx, &info), NX_OK);
    nx_backend backends[3] = {NX_BACKEND_REF, NX_BACKEND_CPU, NX_BACKEND_CUDA};
    int n_be = info.gpu_count > 0 ? 3 : 2;
    int bad = 0, runs = 0, cases = 0;
    DIR *top = opendir(GOLDEN);
    assert_non_null(top);
    for (struct dirent *fam; (fam = readdir(top));) {
        if (fam->d_name[0] == '.' || fam->d_type != DT_DIR)
            continue;
        char fdir[1024];
        snprintf(fdir, sizeof fdir, "%s/%s", GOLDEN, fam->d_name);
        DIR *d = opendir(fdir);
        for (struct dirent *c; d && (c = readdir(d));) {
            if (c->d_name[0] == '.' || c->d_type != DT_DIR)
                continue;
            char cdir[2048], name[600];
            snprintf(cdir, sizeof cdir, "%s/%s", fdir, c->d_name);
            snprintf(name, sizeof name, "%s/%s", fam->d_name, c->d_name);
            cases++;
            for (int b = 0; b < n_be; b++)
                bad += replay(ctx, cdir, name, backends[b], &runs);
        }
        if (d)
            closedir(d);
    }
    closedir(top);
    printf("golden: %d cases, %d backends, %d runs matched, %d failures\n", cases, n_be,
           runs - bad, bad);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
    assert_true(cases > 0);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_replay_all)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
