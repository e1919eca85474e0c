/* Semiring entry-point plumbing shared by ops/semiring/ and the families built on it (sparse,
 * smoothing). The expressions, the semiring object and the formula parser are the frontend's
 * (frontend/semiring.h). Not installed. */
#ifndef NX_OPS_SEMIRING_H
#define NX_OPS_SEMIRING_H

#include "frontend/semiring.h"

/* ---- the op table's option structs (ops/op.h) ------------------------------------------------
 * What nx_op_call parses text options into and what the typed entry points fill. A zeroed struct
 * is every default; a NULL semiring is REAL. Fields after the schema's are set only by the typed
 * entry points (a C builder, optional data tensors); the op's key function keys them. */

typedef struct nx_sr_matmul_args {
    nx_backend backend;
    const nx_semiring *semiring;
} nx_sr_matmul_args;

typedef struct nx_sr_conv_args {
    nx_semiring_conv_opts conv; /* backend, nspatial, stride, dilation, padding, pad_lo, pad_hi */
    const nx_semiring *semiring;
    int n_stride, n_dilation, n_pad_lo, n_pad_hi; /* values given as text (0: typed call) */
} nx_sr_conv_args;


/* The semiring an op runs: REAL for NULL. */
NX_HIDDEN const nx_semiring *nx_sr_or_real(const nx_semiring *sr);

/* ---- what the ops share (entry.c) -----------------------------------------------------------*/

struct nx_op_desc;

/* Builds an op's graph: its inputs in the order the run passes them, its outputs in outputs. */
typedef nx_status (*nx_sr_build_fn)(nx_graph *g, void *user, nx_node *outputs, int *n_outputs);

/* The compiled program for key (the caller's fields; "backend" is added), from the context's
 * cache or built now (nx_program_cached); key is freed here. Kept for the smoothing family's
 * entry points until they are rows of the op table; the semiring ops use nx_op_program. */
NX_HIDDEN nx_status nx_sr_program(nx_ctx *ctx, struct nx_rt_cache_blob *key, nx_backend backend,
                                  nx_sr_build_fn build, void *user, nx_program **out);
/* A typed entry point's own arguments: ctx, out (zeroed) and the semiring non-NULL. */
NX_HIDDEN nx_status nx_sr_check_call(nx_ctx *ctx, const char *who, const nx_semiring *sr,
                                     nx_tensor **out);
/* A graph leaf for t: a parameter when float (what a vjp differentiates), else an input. */
NX_HIDDEN nx_node nx_sr_operand(nx_graph *g, const char *name, const nx_tensor *t);
/* dy is a float tensor of dtype and the result's shape; the message says which it is not. */
NX_HIDDEN nx_status nx_sr_check_cotangent(nx_ctx *ctx, const char *who, const nx_tensor *dy,
                                          nx_dtype dtype, int ndim, const int64_t *shape);
/* nx_sr_check_cotangent against node y of g. */
NX_HIDDEN nx_status nx_sr_check_result(nx_graph *g, const char *who, nx_node y,
                                       const nx_tensor *dy);
/* The vjp entry point of a two-operand op d: nx_op_run_vjp, then the gradients to da and db (either
 * may be NULL: that gradient is freed). */
NX_HIDDEN nx_status nx_sr_run_vjp2(nx_ctx *ctx, const char *who, const struct nx_op_desc *d,
                                   const nx_semiring *sr, const nx_tensor *a, const nx_tensor *b,
                                   const nx_tensor *dy, const void *opts, nx_tensor **da,
                                   nx_tensor **db);
/* Checks that t is a host f32/f64 tensor; who/what name it in the message. */
NX_HIDDEN nx_status nx_sr_check_float(nx_ctx *ctx, const char *who, const char *what,
                                      const nx_tensor *t);
/* The same for the semiring entry points, which take device tensors too (nx_sr_run). */
NX_HIDDEN nx_status nx_sr_check_float_any(nx_ctx *ctx, const char *who, const char *what,
                                          const nx_tensor *t);
/* nx_sr_check_float_any, or bool under the BOOLEAN semiring (bool in, bool out). */
NX_HIDDEN nx_status nx_sr_check_operand(nx_ctx *ctx, const char *who, const char *what,
                                        const nx_tensor *t, const nx_semiring *sr);
NX_HIDDEN void nx_sr_key_conv(struct nx_rt_cache_blob *b, const nx_semiring_conv_opts *o);

/* The graph nx_pairwise_reduce compiles (for tests of its kernels): outputs as the op's. *g is
 * freed by the caller with nx_graph_free. */
NX_HIDDEN nx_status nx_sr_pairwise_graph(nx_ctx *ctx, const nx_tensor *x, const nx_tensor *y,
                                         const nx_tensor *b, const nx_tensor *p,
                                         const nx_pairwise_opts *opts, nx_graph **g, nx_node *outs,
                                         int *nouts);
/* The graph nx_pairwise_reduce_vjp compiles (for tests of its plan): outputs dx, dy, then db and
 * dp where given (at most 4). *g is freed by the caller with nx_graph_free. */
NX_HIDDEN nx_status nx_sr_pairwise_vjp_graph(nx_ctx *ctx, const nx_tensor *x, const nx_tensor *y,
                                             const nx_tensor *b, const nx_tensor *p,
                                             const nx_pairwise_opts *opts, const nx_tensor *dout,
                                             nx_graph **g, nx_node *outs, int *nouts);

#endif /* NX_OPS_SEMIRING_H */
