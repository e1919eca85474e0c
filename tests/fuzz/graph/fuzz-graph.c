/* Graph IR fuzzer as an ordinary test: thousands of random valid graphs (built, verified,
 * printed, compiled for the reference backend, run twice) and random invalid builder calls, each
 * in a fresh context with the counting allocator so that leaks fail the test.
 *
 * Usage: fuzz-graph [--seed N] [--iters N] [--invalid-iters N] [--sweep-iters N] [--from I]
 * [--template T]
 *                   [--skip-op OP]...   (OP: a name from the op statistics line)
 *                   [--cpu N]           (one graph in N also runs on the CPU backend, compared
 *                                        with the interpreter; 0: none; default 1: all)
 * Graph i uses its own seed derived from (seed, i), so a failure names the seed and index that
 * reproduce it alone: fuzz-graph --seed S --from I --iters 1 --invalid-iters 0.
 *
 * known-failures.txt (next to this file) lists ops and invalid-call templates that are switched
 * off because of a reported bug ("op NAME BUG-ID" or "template N BUG-ID"); each is printed as
 * KNOWN so it is not forgotten. --no-known ignores that list. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "testutil.h"

#ifndef NX_FUZZ_KNOWN /* meson passes the source path */
#define NX_FUZZ_KNOWN "tests/fuzz/graph/known-failures.txt"
#endif

static uint64_t seed = 1;
static int64_t iters = 3000, invalid_iters = 3000, sweep_iters = 40, from = 0;

static uint64_t graph_seed(uint64_t s, int64_t i)
{
    uint64_t z = s * 0x9e3779b97f4a7c15ull + (uint64_t)i * 0xbf58476d1ce4e5b9ull + 1;
    z = (z ^ (z >> 31)) * 0x94d049bb133111ebull;
    return z ^ (z >> 29);
}

typedef bool (*fz_fn)(nx_ctx *ctx, fz_rng *r, fz_stats *st, char *msg, size_t len);

static void run_many(fz_fn fn, int64_t n, const char *what, fz_stats *st)
{
    static char msg[1 << 16];
    for (int64_t i = from; i < from + n; i++) {
        fz_rng r;
        fz_rng_seed(&r, graph_seed(seed, i));
        nx_test_alloc ta = {0};
        nx_ctx *ctx = nx_test_ctx(&ta);
        bool ok = fn(ctx, &r, st, msg, sizeof msg);
        nx_ctx_free(ctx);
        if (!ok) {
            /* the message holds the printed graph: longer than cmocka's 1 KiB buffer */
            printf("%s, seed %llu, index %lld: %s\n", what, (unsigned long long)seed, (long long)i,
                   msg);
            fflush(stdout);
            fail_msg("%s, seed %llu, index %lld failed (details above)", what,
                     (unsigned long long)seed, (long long)i);
        }
        if (ta.live != 0 || ta.size_errors != 0)
            fail_msg("%s, seed %llu, index %lld: %lld allocations (%lld bytes) leaked, %lld "
                     "size mismatches",
                     what, (unsigned long long)seed, (long long)i, (long long)ta.live,
                     (long long)ta.live_bytes, (long long)ta.size_errors);
    }
}

static void test_valid_graphs(void **state)
{
    (void)state;
    fz_stats st = {0};
    run_many(fz_valid_graph, iters, "valid graph", &st);
    print_message("[   INFO   ] %lld graphs, %lld nodes, %lld runs; %lld on the cpu backend, "
                  "%lld of them compared with the interpreter; ops:",
                  (long long)st.graphs, (long long)st.nodes, (long long)st.runs,
                  (long long)st.cpu_runs, (long long)st.cpu_checked);
    for (int i = 0; fz_op_name(i); i++)
        print_message(" %s %lld", fz_op_name(i), (long long)st.op_count[i]);
    print_message("\n");
}

static void test_invalid_calls(void **state)
{
    (void)state;
    fz_stats st = {0};
    run_many(fz_invalid_call, invalid_iters, "invalid call", &st);
    print_message("[   INFO   ] %lld invalid builder calls refused\n", (long long)st.invalid_calls);
}

/* Switches off what the known-failures file lists; false on a malformed line. */
static bool load_known(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return true;
    char line[256], kind[32], name[64], bug[64];
    bool ok = true;
    while (ok && fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[strspn(line, " \t\r\n")] == '\0')
            continue;
        ok = sscanf(line, "%31s %63s %63s", kind, name, bug) == 3 &&
             ((strcmp(kind, "op") == 0 && fz_disable_op(name)) ||
              (strcmp(kind, "template") == 0 && fz_disable_template(atoi(name))));
        if (ok)
            printf("[  KNOWN   ] %s %s switched off (%s)\n", kind, name, bug);
        else
            fprintf(stderr, "%s: malformed line: %s", path, line);
    }
    fclose(f);
    return ok;
}

typedef struct sweep_arg {
    int64_t index;
    fz_stats st;
    char msg[1 << 16];
} sweep_arg;

static nx_status sweep_body(nx_ctx *ctx, void *user)
{
    sweep_arg *a = user;
    fz_rng r;
    fz_rng_seed(&r, graph_seed(seed ^ 0x5eed, a->index));
    nx_status st = fz_valid_graph_sweep(ctx, &r, &a->st, a->msg, sizeof a->msg);
    if (st != NX_OK && st != NX_ERR_NOMEM) {
        printf("allocation sweep, seed %llu, index %lld: %s\n", (unsigned long long)seed,
               (long long)a->index, a->msg);
        fflush(stdout);
        fail_msg("allocation sweep, seed %llu, index %lld failed (details above)",
                 (unsigned long long)seed, (long long)a->index);
    }
    return st;
}

/* Small random graphs built, compiled and run with allocation n failing, for every n: each
 * failure must surface as NX_ERR_NOMEM and leak nothing. */
static void test_alloc_sweeps(void **state)
{
    (void)state;
    static sweep_arg a;
    int64_t total = 0;
    for (int64_t i = from; i < from + sweep_iters; i++) {
        memset(&a, 0, sizeof a);
        a.index = i;
        total += nx_test_alloc_sweep(sweep_body, &a, 20000);
    }
    print_message("[   INFO   ] %lld graphs swept over %lld allocations\n", (long long)sweep_iters,
                  (long long)total);
}

static bool arg_int(int argc, char **argv, int *i, const char *name, int64_t *out)
{
    if (strcmp(argv[*i], name) != 0 || *i + 1 >= argc)
        return false;
    *out = strtoll(argv[++*i], NULL, 0);
    return true;
}

int main(int argc, char **argv)
{
    bool known = true;
    fz_compare_cpu = 1;
    setenv("NITRIX_SILENCE_FALLBACK", "1", 1); /* kernels the JIT leaves to the interpreter */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-known") == 0) {
            known = false;
            continue;
        }
        int64_t s;
        if (arg_int(argc, argv, &i, "--seed", &s))
            seed = (uint64_t)s;
        else if (arg_int(argc, argv, &i, "--template", &s))
            fz_force_template = (int)s;
        else if (strcmp(argv[i], "--skip-op") == 0 && i + 1 < argc && fz_disable_op(argv[i + 1]))
            i++;
        else if (arg_int(argc, argv, &i, "--cpu", &s))
            fz_compare_cpu = (int)s;
        else if (!arg_int(argc, argv, &i, "--iters", &iters) &&
                 !arg_int(argc, argv, &i, "--invalid-iters", &invalid_iters) &&
                 !arg_int(argc, argv, &i, "--sweep-iters", &sweep_iters) &&
                 !arg_int(argc, argv, &i, "--from", &from)) {
            fprintf(stderr,
                    "usage: %s [--seed N] [--iters N] [--invalid-iters N] [--sweep-iters N] "
                    "[--from I] [--template T] [--skip-op OP]... [--cpu N] [--no-known]\n",
                    argv[0]);
            return 2;
        }
    }
    if (known && !load_known(NX_FUZZ_KNOWN))
        return 2;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_graphs),
        cmocka_unit_test(test_invalid_calls),
        cmocka_unit_test(test_alloc_sweeps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
