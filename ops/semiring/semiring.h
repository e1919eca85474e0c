/* Semiring entry-point plumbing shared by ops/semiring/ and the families built on it (sparse,
 * smoothing). The expressions, the semiring object and the formula parser are the frontend's
 * (frontend/semiring.h). Not installed. */
#ifndef NX_OPS_SEMIRING_H
#define NX_OPS_SEMIRING_H

#include "frontend/semiring.h"

/* ---- entry-point plumbing (entry.c) ---------------------------------------------------------*/

/* Builds an op's graph: its inputs in the order the run passes them, its outputs in outputs. */
typedef nx_status (*nx_sr_build_fn)(nx_graph *g, void *user, nx_node *outputs, int *n_outputs);

typedef struct nx_sr_run_args {
    const char *who;          /* the entry point, for messages */
    nx_backend backend;       /* as asked (AUTO: not given) */
    nx_sr_build_fn build;     /* called on a cache miss */
    void *user;               /* build's */
    int ninputs, noutputs;
    const nx_tensor *const *inputs;
    const char *const *names; /* of the inputs, for messages */
    nx_tensor **outputs;
} nx_sr_run_args;

/* Runs the op whose program key (finished by the caller's fields; freed here, whatever the
 * result) identifies: the compiled program from the context's cache, built on a miss. Inputs may
 * be CUDA device tensors when the op runs on the CUDA backend; outputs are device tensors when
 * every input is (entry.c says how). */
NX_HIDDEN nx_status nx_sr_run(nx_ctx *ctx, struct nx_rt_cache_blob *key, const nx_sr_run_args *a);
/* The compiled program for key (the caller's fields; "backend" is added), from the context's
 * cache or built now (nx_program_cached). key is freed here, so the caller's own
 * nx_rt_cache_blob_free afterwards does nothing. For entry points of other families that run
 * host tensors through nx_program_run; the semiring entry points use nx_sr_run. */
NX_HIDDEN nx_status nx_sr_program(nx_ctx *ctx, struct nx_rt_cache_blob *key, nx_backend backend,
                                  nx_sr_build_fn build, void *user, nx_program **out);
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
                                         const nx_pairwise_opts *opts, nx_graph **g,
                                         nx_node *outs, int *nouts);
/* The graph nx_pairwise_reduce_vjp compiles (for tests of its plan): outputs dx, dy, then db and
 * dp where given (at most 4). *g is freed by the caller with nx_graph_free. */
NX_HIDDEN nx_status nx_sr_pairwise_vjp_graph(nx_ctx *ctx, const nx_tensor *x, const nx_tensor *y,
                                             const nx_tensor *b, const nx_tensor *p,
                                             const nx_pairwise_opts *opts, const nx_tensor *dout,
                                             nx_graph **g, nx_node *outs, int *nouts);

#endif /* NX_OPS_SEMIRING_H */
