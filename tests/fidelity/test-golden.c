/* The golden replay, generated from the op table: every case of golden/ (docs/fidelity.md) runs
 * through nx_op_call under its op's name on every available backend (ref and cpu; cuda when a
 * usable GPU answers) and each output is compared with the case's reference by the descriptor's
 * tolerance for (the case's dtype, backend, driver). There is no per-op code here: a new op's
 * cases replay as soon as its row and descriptor exist.
 *
 * A case fails when its manifest is unusable, its op has no row, its descriptor has no tolerance
 * for it, it lives outside the descriptor's golden folder, the call fails, or an element is out of
 * tolerance (the message names case, op, dtype, backend and the worst element).
 *
 * While the op families move onto the table, a family of `pending` may hold cases whose op has no
 * row yet; they are counted, not run. An entry whose cases all resolve fails ("remove it"), so
 * the list only shrinks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus.h"
#include "testutil.h"

/* Folders of golden/ still converting to descriptors (ops not yet rows of ops/ops.def). */
static const char *const pending[] = {NULL};

static int pending_index(const gc_case *c)
{
    for (int i = 0; pending[i]; i++) {
        size_t n = strlen(pending[i]);
        if (strncmp(c->name, pending[i], n) == 0 && c->name[n] == '/')
            return i;
    }
    return -1;
}

/* The driver a case runs with: the manifest's, else the canonical one of the op's registry row
 * (golden references are the canonical variant's), else none. */
static const char *case_driver(const gc_case *c, const nx_op_info *info)
{
    const char *d = gc_option(c, "driver");
    if (d)
        return d;
    const nx_divergent_op *row = gc_divergent(info->driver_site);
    return row ? row->canonical : NULL;
}

static int replay(nx_ctx *ctx, const gc_case *c, const nx_op_desc *desc, const char *backend,
                  int *runs)
{
    const nx_op_info *info = nx_op_desc_info(desc);
    const char *driver = case_driver(c, info);
    nx_dtype dt;
    double rtol = 0, atol = 0;
    if (!gc_dtype(c, &dt)) {
        printf("%s [%s %s]: dtype '%s' is not an nx_dtype name\n", c->name, info->name, backend,
               c->dtype);
        return 1;
    }
    if (!nx_op_tolerance(desc, dt, backend, driver, &rtol, &atol)) {
        printf("%s [%s %s %s%s%s]: the descriptor has no tolerance for this dtype, backend and "
               "driver (add a row to nx_op_%s's tols)\n",
               c->name, info->name, c->dtype, backend, driver ? " driver=" : "",
               driver ? driver : "", info->name);
        return 1;
    }
    double rtol_pub = -1, atol_pub = -1; /* the public lookup gives the same bound */
    if (!nx_op_tolerance_get(info->name, dt, backend, driver, &rtol_pub, &atol_pub) ||
        rtol_pub != rtol || atol_pub != atol) {
        printf("%s [%s]: nx_op_tolerance_get gives rtol %g atol %g; the descriptor %g %g\n",
               c->name, info->name, rtol_pub, atol_pub, rtol, atol);
        return 1;
    }
    if (c->nout != info->noutputs) {
        printf("%s [%s]: %d reference outputs; the row has %d (%s)\n", c->name, info->name,
               c->nout, info->noutputs, "outputs in the row's order");
        return 1;
    }
    nx_tensor *in[NX_OP_MAX_IO] = {0}, *want[NX_OP_MAX_IO] = {0}, *got[NX_OP_MAX_IO] = {0};
    int bad = 0;
    if (gc_load(ctx, c, false, in) != NX_OK || gc_load(ctx, c, true, want) != NX_OK) {
        printf("%s [%s]: cannot read its .npy files: %s\n", c->name, info->name,
               nx_ctx_last_error(ctx));
        gc_free(c->nin, in);
        return 1;
    }
    if (gc_run(ctx, c, info, backend, driver, (const nx_tensor *const *)in, got) != NX_OK) {
        printf("%s [%s %s %s]: %s\n", c->name, info->name, c->dtype, backend,
               nx_ctx_last_error(ctx));
        bad = 1;
    }
    for (int k = 0; !bad && k < c->nout; k++) {
        char msg[512];
        nx_tensor *host = NULL;
        if (nx_tensor_device(got[k]) != NX_DEVICE_HOST &&
            nx_tensor_to_device(got[k], NX_DEVICE_HOST, &host) != NX_OK) {
            printf("%s [%s %s]: output %d cannot come back to the host\n", c->name, info->name,
                   backend, k);
            bad = 1;
            break;
        }
        if (!gc_compare(host ? host : got[k], want[k], dt, rtol, atol, msg, sizeof msg)) {
            printf("%s [%s %s %s%s%s] output %s: %s\n", c->name, info->name, c->dtype, backend,
                   driver ? " driver=" : "", driver ? driver : "", info->outputs[k], msg);
            bad = 1;
        }
        nx_tensor_free(host);
    }
    *runs += !bad;
    gc_free(c->nin, in);
    gc_free(c->nout, want);
    gc_free(info->noutputs, got);
    return bad;
}

static void test_replay_all(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    const char *backends[] = {"ref", "cpu", "cuda"};
    int nbe = gc_cuda_usable(ctx) ? 3 : 2;
    gc_case *cases = NULL;
    int n = gc_cases(&cases);
    assert_true(n > 0);
    int bad = 0, runs = 0, replayed = 0, waiting[16] = {0}, aliased = 0;
    for (int i = 0; i < n; i++) {
        const gc_case *c = &cases[i];
        if (c->err[0]) {
            printf("%s: %s\n", c->name, c->err);
            bad++;
            continue;
        }
        const nx_op_desc *desc = gc_desc(c);
        if (!desc) {
            int p = pending_index(c);
            if (p >= 0) {
                waiting[p]++;
                continue;
            }
            printf("%s: op '%s' has no row in ops/ops.def (nx_op_find finds no name or alias)\n",
                   c->name, c->op);
            bad++;
            continue;
        }
        const nx_op_info *info = nx_op_desc_info(desc);
        size_t gl = desc->golden ? strlen(desc->golden) : 0;
        if (!gl || strncmp(c->name, desc->golden, gl) != 0 || c->name[gl] != '/') {
            printf("%s: op %s's descriptor keeps its cases under golden/%s, not here\n", c->name,
                   info->name, desc->golden ? desc->golden : "(none)");
            bad++;
            continue;
        }
        aliased += strcmp(c->op, info->name) != 0;
        replayed++;
        for (int b = 0; b < nbe; b++)
            bad += replay(ctx, c, desc, backends[b], &runs);
    }
    for (int p = 0; pending[p]; p++) {
        if (waiting[p])
            printf("golden/%s: %d cases wait for their ops' rows\n", pending[p], waiting[p]);
        else {
            printf("golden/%s: every case's op has a row now: remove it from `pending` in "
                   "tests/fidelity/test-golden.c\n", pending[p]);
            bad++;
        }
    }
    printf("golden: %d cases, %d replayed on %d backends (%d by an alias of the op's name), %d "
           "runs matched, %d failures\n",
           n, replayed, nbe, aliased, runs, bad);
    free(cases);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
    assert_int_equal(bad, 0);
}

/* The comparison itself, on tensors with known answers, so a blind compare cannot pass. */
static void test_compare(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t n = 4;
    nx_tensor *a = NULL, *b = NULL, *i = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 1, &n, &a), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 1, &n, &b), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_I64, 1, &n, &i), NX_OK);
    double *av = nx_tensor_data(a), *bv = nx_tensor_data(b);
    int64_t *iv = nx_tensor_data(i);
    for (int k = 0; k < 4; k++)
        av[k] = bv[k] = iv[k] = k;
    char msg[512];
    assert_true(gc_compare(a, b, NX_DTYPE_F64, 0, 0, msg, sizeof msg));
    assert_true(gc_compare(i, b, NX_DTYPE_F64, 0, 0, msg, sizeof msg));
    av[1] = 1 + 1e-9, av[3] = 3 + 1e-6;
    assert_true(gc_compare(a, b, NX_DTYPE_F64, 1e-6, 0, msg, sizeof msg));
    assert_false(gc_compare(a, b, NX_DTYPE_F64, 1e-10, 0, msg, sizeof msg));
    assert_non_null(strstr(msg, "worst element 3 of 4")); /* 3's miss is larger than 1's */
    assert_false(gc_compare(a, b, NX_DTYPE_F32, 1, 1, msg, sizeof msg)); /* dtype differs */
    assert_false(gc_compare(i, a, NX_DTYPE_F64, 1, 1, msg, sizeof msg)); /* integers: exact */
    nx_tensor_free(a);
    nx_tensor_free(b);
    nx_tensor_free(i);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_compare),
                                       cmocka_unit_test(test_replay_all)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
