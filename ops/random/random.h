/* The random family's shared pieces (docs/random.md): keys, the threefry-2x32 hash built from the
 * u32 IR rows, jax.random's bit layouts (the original one and jax_threefry_partitionable), the
 * mantissa-bit uniform and the inverse error function, all as graph fragments, so every op of the
 * family is one program that both backends compile and any element is computable alone. */
#ifndef NX_OPS_RANDOM_RANDOM_H
#define NX_OPS_RANDOM_RANDOM_H

#include "ops/op.h"

/* The most 32-bit words one call draws per key: jax counts them with a u32 iota (beyond it jax
 * splits the key into blocks, which nitrix does not do). */
#define NX_RNG_MAX_WORDS 0xFFFFFFFFull

/* The option every op with a `shape` keyword has: INTS, up to NX_MAX_DIMS values; count 0 (not
 * given) is the 0-d shape (), jax's default. */
#define NX_RNG_SHAPE_OPT(def)                                                                     \
    {"shape", NX_OPT_INTS, def, "0:", NX_MAX_DIMS,                                                \
     "the sample shape per key (not given: the 0-d shape ())"}
#define NX_RNG_PARTITIONABLE_OPT                                                                  \
    {"partitionable", NX_OPT_BOOL, "false", NULL, 1,                                              \
     "jax_threefry_partitionable's layout of split and random_bits (jax 0.4.30 default: false)"}

/* A key input: key words k0, k1 of shape [B, 1] (B: the key batch, flattened), and the batch. */
typedef struct nx_rng_key {
    nx_node k0, k1;
    int nbatch;
    int64_t batch[NX_MAX_DIMS];
    int64_t b; /* prod(batch) */
} nx_rng_key;

/* key must be u32 of shape [..., 2] (a leading batch only where batch is true). */
NX_HIDDEN nx_status nx_rng_check_key(const nx_op_args *c, const nx_tensor *key, bool batch);
/* Sample shape: extents >= 0, rank with the key batch <= NX_MAX_DIMS, per-key element count
 * *numel with `words_per` 32-bit words per element (1/4 for 8 bits: pass 0) within
 * NX_RNG_MAX_WORDS. */
NX_HIDDEN nx_status nx_rng_check_shape(const nx_op_args *c, const int64_t *shape, int n,
                                       int nbatch, int bit_width, int64_t *numel);
/* A float dtype option (f32 or f64). */
NX_HIDDEN nx_status nx_rng_check_float_dtype(const nx_op_args *c, int dtype, const char *name);

/* Declares the key input and slices its words. */
NX_HIDDEN nx_rng_key nx_rng_key_input(nx_graph *g, const nx_tensor *key);

NX_HIDDEN nx_node nx_rng_u32(nx_graph *g, uint32_t v);
NX_HIDDEN nx_node nx_rng_u64(nx_graph *g, uint64_t v);

/* threefry-2x32, 20 rounds: (o0, o1) = T(k0, k1; x0, x1), u32 nodes broadcast together. */
NX_HIDDEN void nx_rng_threefry(nx_graph *g, nx_node k0, nx_node k1, nx_node x0, nx_node x1,
                               nx_node *o0, nx_node *o1);

/* jax.random's random_bits for each key: [B, n] of u8 (8), u32 (16: the low 16 bits; nitrix
 * has no u16), u32 (32) or u64 (64). */
NX_HIDDEN nx_node nx_rng_bits(nx_graph *g, const nx_rng_key *k, int64_t n, int bit_width,
                              bool partitionable);
/* jax.random.split: [B, num, 2] u32. */
NX_HIDDEN nx_node nx_rng_split(nx_graph *g, const nx_rng_key *k, int64_t num,
                               bool partitionable);
/* The two keys of split(key) (num = 2), as key nodes. */
NX_HIDDEN void nx_rng_split2(nx_graph *g, const nx_rng_key *k, bool partitionable,
                             nx_rng_key *first, nx_rng_key *second);
/* jax.random.uniform's values: [B, n] of dtype (f32/f64) in [minval, maxval), minval and maxval
 * already rounded to dtype by the caller (given as doubles holding dtype values). */
NX_HIDDEN nx_node nx_rng_uniform(nx_graph *g, const nx_rng_key *k, int64_t n, nx_dtype dt,
                                 double minval, double maxval, bool partitionable);
/* Giles' erfinv as XLA writes it (w = -log1p(-x^2); f32: two branches of 9 terms, f64: three
 * of 23/19/17); erfinv(+-1) = +-inf. */
NX_HIDDEN nx_node nx_rng_erfinv(nx_graph *g, nx_node x);
/* jax.random.randint's values [B, n] of dtype dt (an integer dtype; the caller checked
 * minval < maxval within dt's range) (randint.c). */
NX_HIDDEN nx_node nx_rng_randint(nx_graph *g, const nx_rng_key *k, int64_t n, int64_t minval,
                                 int64_t maxval, nx_dtype dt, bool partitionable);
/* jax's _shuffle of arange(n): an i64 node [n] (one key) (permutation.c). */
NX_HIDDEN nx_node nx_rng_permutation(nx_graph *g, const nx_rng_key *k, int64_t n,
                                     bool partitionable);
/* [B, n] (or [B, ...]) -> [batch..., shape...]. */
NX_HIDDEN nx_node nx_rng_out(nx_graph *g, nx_node x, const nx_rng_key *k, const int64_t *shape,
                             int nshape);
/* a value of dtype rounded from v (f32: (float)v). */
NX_HIDDEN double nx_rng_round(nx_dtype dt, double v);

#endif /* NX_OPS_RANDOM_RANDOM_H */
