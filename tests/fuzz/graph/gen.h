/* Random graph generator for the graph IR fuzzer. Valid mode builds random graphs from every
 * builder, predicting each node's dtype and shape from the header's rules, then verifies,
 * prints, compiles for the reference backend and runs them twice on random (sometimes strided)
 * inputs. Invalid mode makes one random invalid builder call on a small valid graph and checks
 * that it is refused with NX_NONE and a recorded error.
 *
 * Randomness comes from a seeded PRNG or, for libFuzzer, from the fuzzer's bytes. */
#ifndef NX_FUZZ_GRAPH_GEN_H
#define NX_FUZZ_GRAPH_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nitrix.h"

typedef struct fz_rng {
    uint64_t state;
    const uint8_t *data; /* non-NULL: draw from these bytes (zeros once they run out) */
    size_t len, pos;
} fz_rng;

void fz_rng_seed(fz_rng *r, uint64_t seed);
void fz_rng_bytes(fz_rng *r, const uint8_t *data, size_t len);

typedef struct fz_stats {
    int64_t graphs, nodes, runs, invalid_calls;
    int64_t cpu_runs, cpu_checked; /* graphs run on the CPU backend; of them, compared */
    int64_t op_count[64]; /* per valid-mode op, indexed as fz_op_name */
} fz_stats;

/* Name of valid-mode op i, NULL past the last. */
const char *fz_op_name(int i);
/* Stops generating op `name` (to look past a known bug); false if there is no such op. */
bool fz_disable_op(const char *name);

/* One random valid graph, end to end. False with a message (including the printed graph) when
 * the library violates its contract. */
bool fz_valid_graph(nx_ctx *ctx, fz_rng *r, fz_stats *st, char *msg, size_t len);
/* The same, small, for an allocation-failure sweep: NX_OK, NX_ERR_NOMEM when an allocation
 * failed and that was reported, NX_ERR_INTERNAL (with a message) on a contract violation. */
nx_status fz_valid_graph_sweep(nx_ctx *ctx, fz_rng *r, fz_stats *st, char *msg, size_t len);
/* > 0: one valid graph in fz_compare_cpu (at random) is also compiled for the CPU backend in
 * reproducible mode and its outputs compared with the interpreter's (gen.c says how closely);
 * 0: never. */
extern int fz_compare_cpu;
/* One random invalid builder call. False with a message when it is accepted or mishandled. */
bool fz_invalid_call(nx_ctx *ctx, fz_rng *r, fz_stats *st, char *msg, size_t len);
/* >= 0: every invalid call uses this template (for reproducing one report). */
extern int fz_force_template;
/* Stops using invalid-call template t; false if out of range. */
bool fz_disable_template(int t);

#endif
