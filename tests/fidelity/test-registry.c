/* The divergent-op registry: every row well formed; the guard (a driver site in the library's
 * sources has a row, a row has a site: docs/fidelity.md names the convention); the contract
 * (every driver of every row against the canonical one within the row's tolerance). */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus.h"
#include "testutil.h"

#define MAX_SITES 256
#define OP_LEN 64

typedef struct site {
    char op[OP_LEN]; /* "" when the op is not a string literal */
    char where[256];
} site;

static site sites[MAX_SITES];
static int n_sites;

/* Records each `nx_driver_resolve(<arg>, "<op>"` of text; the definition in runtime/divergent.c
 * (whose second parameter is declared, not passed) is skipped by its `nx_ctx *`. */
static void scan_text(const char *text, const char *path)
{
    static const char key[] = "nx_driver_resolve(";
    for (const char *p = strstr(text, key); p; p = strstr(p + 1, key)) {
        const char *a = p + sizeof key - 1;
        if (strncmp(a, "nx_ctx *", 8) == 0)
            continue;
        const char *comma = strchr(a, ',');
        const char *close = strchr(a, ')');
        if (n_sites == MAX_SITES)
            return;
        site *s = &sites[n_sites++];
        int line = 1;
        for (const char *q = text; q < p; q++)
            line += *q == '\n';
        snprintf(s->where, sizeof s->where, "%s:%d", path, line);
        s->op[0] = 0;
        if (!comma || (close && close < comma))
            continue;
        const char *q = comma + 1;
        while (*q == ' ')
            q++;
        if (*q != '"')
            continue;
        const char *end = strchr(q + 1, '"');
        if (end && end - q - 1 < OP_LEN && !memchr(q, '\n', (size_t)(end - q))) {
            memcpy(s->op, q + 1, (size_t)(end - q - 1));
            s->op[end - q - 1] = 0;
        }
    }
}

static int scan_file(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    size_t n = strlen(path);
    if (type != FTW_F || n < 2 || (strcmp(path + n - 2, ".c") && strcmp(path + n - 2, ".h")))
        return 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    if (buf && fread(buf, 1, (size_t)len, f) == (size_t)len) {
        buf[len] = 0;
        scan_text(buf, path + strlen(NX_SOURCE_ROOT) + 1);
    }
    free(buf);
    fclose(f);
    return 0;
}

/* The library's source folders: where a driver site may live. */
static void scan_tree(void)
{
    static const char *dirs[] = {"runtime", "ir", "frontend", "passes", "codegen", "ops"};
    n_sites = 0;
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", NX_SOURCE_ROOT, dirs[i]);
        assert_int_equal(nftw(path, scan_file, 16, FTW_PHYS), 0);
    }
}

/* The scanner itself, on text with a known answer, so an empty tree cannot pass by a blind grep. */
static void test_scanner(void **state)
{
    (void)state;
    n_sites = 0;
    scan_text("nx_status nx_driver_resolve(nx_ctx *ctx, const char *op, ...)\n"
              "x = nx_driver_resolve(ctx, \"edt\", o->driver, &v);\n"
              "\n  st = nx_driver_resolve(c,\"cdt\", NULL, &v);\n"
              "st = nx_driver_resolve(ctx, name, NULL, &v);\n",
              "fixture.c");
    assert_int_equal(n_sites, 3);
    assert_string_equal(sites[0].op, "edt");
    assert_string_equal(sites[0].where, "fixture.c:2");
    assert_string_equal(sites[1].op, "cdt");
    assert_string_equal(sites[1].where, "fixture.c:4");
    assert_string_equal(sites[2].op, ""); /* not a literal: reported by the guard */
}

static bool has_word(const char *list, const char *w)
{
    size_t n = strlen(w);
    for (const char *p = list;;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, w, n) == 0)
            return true;
        if (!bar)
            return false;
        p = bar + 1;
    }
}

static void test_rows_well_formed(void **state)
{
    (void)state;
    size_t n = 99;
    const nx_divergent_op *rows = nx_divergent_ops(&n);
    assert_non_null(rows);
    assert_true(n < 99);
    assert_non_null(nx_divergent_ops(NULL));
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const nx_divergent_op *r = &rows[i];
        bool ok = r->op && *r->op && r->canonical && r->fast && r->drivers && r->reason &&
                  *r->reason && strcmp(r->canonical, r->fast) != 0 &&
                  has_word(r->drivers, r->canonical) && has_word(r->drivers, r->fast) &&
                  !has_word(r->drivers, "auto") && r->rtol >= 0 && r->atol >= 0 &&
                  r->rtol < 1 && !strchr(r->reason, '\n');
        for (size_t j = 0; j < i; j++)
            ok = ok && strcmp(rows[j].op, r->op) != 0;
        if (!ok) {
            printf("row %zu (%s) is malformed\n", i, r->op ? r->op : "(null)");
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

static void test_guard(void **state)
{
    (void)state;
    scan_tree();
    size_t n;
    const nx_divergent_op *rows = nx_divergent_ops(&n);
    int bad = 0;
    for (int i = 0; i < n_sites; i++) {
        bool found = false;
        for (size_t j = 0; j < n && sites[i].op[0]; j++)
            found = found || strcmp(rows[j].op, sites[i].op) == 0;
        if (!found) {
            printf("%s: driver site of '%s' has no row in runtime/divergent.def%s\n",
                   sites[i].where, sites[i].op,
                   sites[i].op[0] ? "" : " (name the op as a string literal)");
            bad++;
        }
    }
    for (size_t j = 0; j < n; j++) {
        int count = 0;
        for (int i = 0; i < n_sites; i++)
            count += strcmp(rows[j].op, sites[i].op) == 0;
        if (count != 1) {
            printf("registry row '%s' has %d driver sites (expected 1)\n", rows[j].op, count);
            bad++;
        }
    }
    printf("%d driver sites, %zu registry rows\n", n_sites, n);
    assert_int_equal(bad, 0);
}

/* ---- the contract ------------------------------------------------------------------------- */

/* Runs op with one driver on the op's own contract inputs; the output is a new f64 tensor. */
typedef nx_status (*contract_fn)(nx_ctx *ctx, const char *driver, nx_tensor **out);
typedef struct contract_runner {
    const char *op;
    contract_fn run;
} contract_runner;

/* Hand-written runners of the registry rows whose op is not a row of the op table yet (the
 * families converting to descriptors): functions plus a CONTRACT_<FAMILY>_ROWS list of
 * {"op", run_fn}, rows. A registry row whose site is an op table row runs on that op's golden
 * inputs instead (table_contract), and a hand runner for it fails: delete the runner. */
#include "contract-morphology.inc"

static const contract_runner runners[] = {
    CONTRACT_MORPHOLOGY_ROWS
    {NULL, NULL},
};

static contract_fn find_runner(const char *op)
{
    for (const contract_runner *r = runners; r->op; r++) {
        if (strcmp(r->op, op) == 0)
            return r->run;
    }
    return NULL;
}

static int compare(const nx_divergent_op *row, const char *driver, const nx_tensor *got,
                   const nx_tensor *want)
{
    int64_t n = nx_tensor_numel(want);
    if (nx_tensor_numel(got) != n || nx_tensor_dtype(got) != NX_DTYPE_F64) {
        printf("%s driver=%s: shape or dtype differs from the canonical output\n", row->op, driver);
        return 1;
    }
    const double *g = nx_tensor_data(got), *w = nx_tensor_data(want);
    for (int64_t i = 0; i < n; i++) {
        if (!nx_test_close(g[i], w[i], row->rtol, row->atol)) {
            printf("%s driver=%s: element %lld is %.17g, canonical %.17g (rtol %g, atol %g)\n",
                   row->op, driver, (long long)i, g[i], w[i], row->rtol, row->atol);
            return 1;
        }
    }
    return 0;
}

/* The op table's row whose driver site is the registry row, or NULL. */
static const nx_op_info *table_op(const nx_divergent_op *row)
{
    size_t n = 0;
    const nx_op_info *const *ops = nx_ops(&n);
    for (size_t i = 0; i < n; i++)
        if (ops[i]->driver_site && strcmp(ops[i]->driver_site, row->op) == 0)
            return ops[i];
    return NULL;
}

/* Every driver of the row on every golden case of the table op, on the cpu backend, against the
 * canonical driver's output on the same case. */
static int table_contract(nx_ctx *ctx, const nx_divergent_op *row, const nx_op_info *info,
                          const gc_case *cases, int nc)
{
    const nx_op_desc *d = nx_op_desc_find(info->name);
    int bad = 0, used = 0, skipped = 0;
    for (int c = 0; c < nc; c++) {
        const gc_case *k = &cases[c];
        if (k->err[0] || gc_desc(k) != d || gc_option(k, "driver"))
            continue;
        if (k->no_contract[0]) { /* the manifest says why the contract does not apply */
            skipped++;
            continue;
        }
        nx_tensor *in[NX_OP_MAX_IO] = {0}, *want[NX_OP_MAX_IO] = {0};
        if (gc_load(ctx, k, false, in) != NX_OK ||
            gc_run(ctx, k, info, "cpu", row->canonical, (const nx_tensor *const *)in, want) !=
                NX_OK) {
            printf("%s [%s driver=%s]: %s\n", k->name, info->name, row->canonical,
                   nx_ctx_last_error(ctx));
            gc_free(k->nin, in);
            bad++;
            continue;
        }
        used++;
        char drivers[256];
        snprintf(drivers, sizeof drivers, "%s", row->drivers);
        char *save = NULL;
        for (char *dv = strtok_r(drivers, "|", &save); dv; dv = strtok_r(NULL, "|", &save)) {
            nx_tensor *got[NX_OP_MAX_IO] = {0};
            char msg[512];
            if (gc_run(ctx, k, info, "cpu", dv, (const nx_tensor *const *)in, got) != NX_OK) {
                printf("%s [%s driver=%s]: %s\n", k->name, info->name, dv,
                       nx_ctx_last_error(ctx));
                bad++;
                continue;
            }
            for (int o = 0; o < info->noutputs; o++)
                if (!gc_compare(got[o], want[o], nx_tensor_dtype(want[o]), row->rtol, row->atol,
                                msg, sizeof msg)) {
                    printf("%s [%s driver=%s vs %s, registry rtol %g atol %g] output %s: %s\n",
                           k->name, info->name, dv, row->canonical, row->rtol, row->atol,
                           info->outputs[o], msg);
                    bad++;
                }
            gc_free(info->noutputs, got);
        }
        gc_free(k->nin, in);
        gc_free(info->noutputs, want);
    }
    if (!used) {
        printf("registry row '%s': op %s has no golden case to run its drivers on\n", row->op,
               info->name);
        bad++;
    }
    printf("contract %s: %d golden cases of %s, %d outside the contract (their manifests say "
           "why)\n", row->op, used, info->name, skipped);
    return bad;
}

static int run_contract(nx_ctx *ctx, const nx_divergent_op *row, const gc_case *cases, int nc)
{
    const nx_op_info *info = table_op(row);
    contract_fn run = find_runner(row->op);
    if (info && run) {
        printf("registry row '%s' is op %s's driver site: its contract runs on the op's golden "
               "cases; delete the hand runner in tests/fidelity/contract-*.inc\n", row->op,
               info->name);
        return 1;
    }
    if (info)
        return table_contract(ctx, row, info, cases, nc);
    if (!run) {
        printf("registry row '%s' has no op table row and no runner in "
               "tests/fidelity/contract-*.inc\n", row->op);
        return 1;
    }
    nx_tensor *want = NULL;
    if (run(ctx, row->canonical, &want) != NX_OK) {
        printf("%s driver=%s: %s\n", row->op, row->canonical, nx_ctx_last_error(ctx));
        return 1;
    }
    int bad = 0;
    char drivers[256];
    snprintf(drivers, sizeof drivers, "%s", row->drivers);
    char *save = NULL;
    for (char *d = strtok_r(drivers, "|", &save); d; d = strtok_r(NULL, "|", &save)) {
        nx_tensor *got = NULL;
        if (run(ctx, d, &got) != NX_OK) {
            printf("%s driver=%s: %s\n", row->op, d, nx_ctx_last_error(ctx));
            bad++;
            continue;
        }
        bad += compare(row, d, got, want);
        nx_tensor_free(got);
    }
    nx_tensor_free(want);
    return bad;
}

static void test_contract(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    size_t n;
    const nx_divergent_op *rows = nx_divergent_ops(&n);
    gc_case *cases = NULL;
    int nc = gc_cases(&cases), bad = 0;
    for (size_t j = 0; j < n; j++)
        bad += run_contract(ctx, &rows[j], cases, nc);
    free(cases);
    /* every runner belongs to a row, so a removed row cannot leave a dead runner */
    for (const contract_runner *r = runners; r->op; r++) {
        bool found = false;
        for (size_t j = 0; j < n; j++)
            found = found || strcmp(rows[j].op, r->op) == 0;
        if (!found) {
            printf("runner '%s' has no registry row\n", r->op);
            bad++;
        }
    }
    printf("contract: %zu registered ops checked\n", n);
    nx_ctx_free(ctx);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scanner),
        cmocka_unit_test(test_rows_well_formed),
        cmocka_unit_test(test_guard),
        cmocka_unit_test(test_contract),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
