/* The option sweep (issue 27), generated from the op table's option schema: for every row of
 * nx_ops(), its smallest golden case (golden/, read through tests/fidelity/corpus.c) is a small
 * valid input, and each INT / INTS option in turn takes the values 0, -1, 1, 2^31 - 1, 2^31,
 * 2^62, INT64_MAX and INT64_MIN, each FLOAT / FLOATS option nan, inf, -inf, -0, 1e308 and -1e308,
 * the other options keeping the case's values. Each call goes through nx_op_call on the reference
 * backend and must return NX_OK, or an error status other than NX_ERR_INTERNAL with a message that
 * names the op; a successful call must give outputs. Under the sanitizer builds of .ci/run
 * (UBSAN_OPTIONS=halt_on_error=1) it must also be free of undefined behaviour: a signed overflow
 * or an out-of-range float-to-integer conversion in any size computed from an option ends the
 * run. The context's allocator refuses blocks over 64 MiB, so a size that is valid but huge ends
 * in a clean NX_ERR_NOMEM instead of filling memory. The suite prints how many calls it made and
 * how they ended. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "../fidelity/corpus.h"
#include "testutil.h"

#define BIG_BLOCK ((size_t)64 << 20)

/* malloc with the size in a header; blocks over BIG_BLOCK are refused (NX_ERR_NOMEM upstream). */
static void *capped_alloc(void *user, size_t size, size_t align)
{
    (void)user;
    if (size > BIG_BLOCK)
        return NULL;
    size_t head = align > 16 ? align : 16;
    char *p = NULL;
    if (posix_memalign((void **)&p, head, head + size) != 0)
        return NULL;
    memcpy(p + head - sizeof(size_t), &head, sizeof head);
    return p + head;
}

static void capped_free(void *user, void *ptr, size_t size)
{
    (void)user;
    (void)size;
    if (!ptr)
        return;
    size_t head;
    memcpy(&head, (char *)ptr - sizeof(size_t), sizeof head);
    free((char *)ptr - head);
}

static void quiet(void *user, nx_log_level level, const char *msg)
{
    (void)user;
    (void)level;
    (void)msg;
}

static nx_ctx *capped_ctx(void)
{
    static const nx_allocator a = {.alloc = capped_alloc, .free = capped_free};
    nx_ctx_opts o = {.allocator = &a, .log = quiet, .ignore_env = true, .num_threads = 1};
    const char *dir = getenv("NITRIX_CACHE_DIR");
    o.cache_dir = dir && *dir ? dir : NULL;
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(&o, &ctx) != NX_OK)
        fail_msg("nx_ctx_new: %s", nx_ctx_last_error(NULL));
    return ctx;
}

static const char *const int_values[] = {
    "0",          "-1",          "1", "2147483647", "2147483648", "4611686018427387904",
    "9223372036854775807", "-9223372036854775808",
};
static const char *const float_values[] = {"nan", "inf", "-inf", "-0", "1e308", "-1e308"};

/* The case of op with the fewest input bytes (a float64 one first when sizes tie), or -1. */
static int smallest_case(const gc_case *cases, int n, const nx_op_info *op)
{
    int best = -1;
    long best_bytes = 0;
    for (int i = 0; i < n; i++) {
        const gc_case *c = &cases[i];
        if (c->err[0] || !nx_op_find(c->op) || nx_op_find(c->op) != op)
            continue;
        long bytes = 0;
        for (int k = 0; k < c->nin; k++) {
            char path[GC_PATH + 80];
            snprintf(path, sizeof path, "%s/%s", c->dir, c->in[k]);
            FILE *f = fopen(path, "rb");
            if (f) {
                fseek(f, 0, SEEK_END);
                bytes += ftell(f);
                fclose(f);
            }
        }
        if (best < 0 || bytes < best_bytes) {
            best = i;
            best_bytes = bytes;
        }
    }
    return best;
}

typedef struct tally {
    int calls, ok, errors, nomem, slow;
    double worst_s;
    char worst[256];
} tally;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One call: the case's options with option `which` set to value (a TENSOR option's file made a
 * path into the case folder), on backend ref. */
static void sweep_call(nx_ctx *ctx, const gc_case *c, const nx_op_info *op,
                       const nx_tensor *const *in, const char *which, const char *value,
                       tally *t)
{
    const char *keys[GC_MAX_OPTS + 2], *vals[GC_MAX_OPTS + 2];
    static char paths[GC_MAX_OPTS][GC_PATH + 260];
    int n = 0;
    bool set = false;
    for (int i = 0; i < c->nopt; i++) {
        keys[n] = c->key[i];
        vals[n] = c->val[i];
        for (int k = 0; k < op->nopts; k++)
            if (strcasecmp(op->opts[k].name, c->key[i]) == 0 &&
                op->opts[k].type == NX_OPT_TENSOR && strcasecmp(c->val[i], "none") != 0) {
                snprintf(paths[i], sizeof paths[i], "%s/%s", c->dir, c->val[i]);
                vals[n] = paths[i];
            }
        if (strcasecmp(c->key[i], which) == 0) {
            vals[n] = value;
            set = true;
        }
        n++;
    }
    if (!set) {
        keys[n] = which;
        vals[n++] = value;
    }
    keys[n] = "backend";
    vals[n++] = "ref";
    nx_tensor *out[NX_OP_MAX_IO] = {NULL};
    double t0 = now_s();
    nx_status st = nx_op_call(ctx, op->name, c->nin, in, n, keys, vals, op->noutputs, out);
    double dt = now_s() - t0;
    t->calls++;
    if (dt > t->worst_s) {
        t->worst_s = dt;
        snprintf(t->worst, sizeof t->worst, "%s --%s=%s", op->name, which, value);
    }
    if (dt > 1.0)
        t->slow++;
    if (st == NX_OK) {
        t->ok++;
        for (int i = 0; i < op->noutputs; i++) {
            if (!out[i])
                fail_msg("%s (case %s) --%s=%s: NX_OK without output %d", op->name, c->name,
                         which, value, i);
            nx_tensor_free(out[i]);
        }
        return;
    }
    for (int i = 0; i < op->noutputs; i++)
        if (out[i])
            fail_msg("%s --%s=%s: failed (%s) but output %d is set", op->name, which, value,
                     nx_status_str(st), i);
    const char *msg = nx_ctx_last_error(ctx);
    if (st == NX_ERR_INTERNAL || !msg || !*msg)
        fail_msg("%s (case %s) --%s=%s: %s \"%s\"; expected NX_OK or a clean error", op->name,
                 c->name, which, value, nx_status_str(st), msg ? msg : "(null)");
    if (st == NX_ERR_NOMEM)
        t->nomem++;
    else
        t->errors++;
}

static void test_option_sweep(void **state)
{
    (void)state;
    gc_case *cases = NULL;
    int ncases = gc_cases(&cases);
    assert_true(ncases > 0);
    size_t nops = 0;
    const nx_op_info *const *ops = nx_ops(&nops);
    nx_ctx *ctx = capped_ctx();
    tally t = {0};
    int swept_ops = 0, swept_opts = 0;
    double t0 = now_s();
    for (size_t o = 0; o < nops; o++) {
        const nx_op_info *op = ops[o];
        int ci = smallest_case(cases, ncases, op);
        if (ci < 0)
            fail_msg("%s: no golden case to sweep its options on", op->name);
        const gc_case *c = &cases[ci];
        nx_tensor *in[NX_OP_MAX_IO] = {NULL};
        if (gc_load(ctx, c, false, in) != NX_OK)
            fail_msg("%s: %s", c->name, nx_ctx_last_error(ctx));
        bool any = false;
        for (int k = 0; k < op->nopts; k++) {
            const nx_op_opt *s = &op->opts[k];
            bool ints = s->type == NX_OPT_INT || s->type == NX_OPT_INTS;
            bool floats = s->type == NX_OPT_FLOAT || s->type == NX_OPT_FLOATS;
            if (!ints && !floats)
                continue;
            const char *const *values = ints ? int_values : float_values;
            size_t nv = ints ? sizeof int_values / sizeof int_values[0]
                             : sizeof float_values / sizeof float_values[0];
            for (size_t v = 0; v < nv; v++)
                sweep_call(ctx, c, op, (const nx_tensor *const *)in, s->name, values[v], &t);
            swept_opts++;
            any = true;
        }
        swept_ops += any;
        gc_free(c->nin, in);
    }
    double total = now_s() - t0;
    printf("option sweep: %d calls over %d options of %d ops (of %zu rows): %d NX_OK, %d clean "
           "errors, %d NX_ERR_NOMEM (blocks over 64 MiB refused); %.2f s, slowest %.3f s (%s)\n",
           t.calls, swept_opts, swept_ops, nops, t.ok, t.errors, t.nomem, total, t.worst_s,
           t.worst);
    assert_true(t.calls > 0);
    nx_ctx_free(ctx);
    free(cases);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_option_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
