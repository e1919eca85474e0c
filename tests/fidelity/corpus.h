/* The golden corpus as the op table sees it (docs/fidelity.md): every golden/.../<case>/ folder
 * with a manifest.txt, read into a gc_case, run through nx_op_call by the op's name, and compared
 * with its reference outputs by the descriptor's tolerance. The golden replay, the driver-contract
 * and FD-gradient tests, the table self-check and the op-matrix generator all use it, so a case
 * means the same thing to each. No cmocka here: the op-matrix generator links it too. */
#ifndef NX_TESTS_CORPUS_H
#define NX_TESTS_CORPUS_H

#include <stdbool.h>
#include <stddef.h>

#include "nitrix-op.h"
#include "ops/op.h"

#define GC_MAX_OPTS 32
#define GC_PATH 1024

typedef struct gc_case {
    char dir[GC_PATH];                  /* the case folder */
    char name[256];                     /* relative to golden/: "morphology/d2_box3" */
    char op[64];                        /* the manifest's op (a table name or an alias) */
    char dtype[16];                     /* numpy name; the dtype tolerances are looked up by */
    int nin, nout, nopt;
    char in[NX_OP_MAX_IO][64];          /* input files, in the row's order */
    char out[NX_OP_MAX_IO][64];         /* reference output files, in the row's order */
    char key[GC_MAX_OPTS][64];          /* options as the spec spells them */
    char val[GC_MAX_OPTS][256];
    bool has_generator, has_versions;   /* generator and numpy lines present */
    char no_contract[200];              /* `contract = <why>`: not a driver-contract case */
    char no_fd[200];                    /* `fd = <why>`: no FD gradient at this point (a
                                           forward-only semiring, infinite inputs) */
    char err[200];                      /* why the manifest is unusable; "" when it is fine */
} gc_case;

/* The corpus root (<source>/golden). */
const char *gc_root(void);

/* Reads dir/manifest.txt into c (name is the folder relative to the root). false with the reason
 * in c->err when the file is missing or lacks op, dtype, inputs, output or options. */
bool gc_read(const char *dir, const char *name, gc_case *c);

/* Every case under the root (any depth: golden/<family>/<case>/ and golden/<a>/<b>/<case>/: a
 * folder holding a manifest.txt), sorted by name, in a malloc'ed array (*out; free it). A case
 * whose manifest is unusable is listed with its reason in err, for the caller to report. Returns
 * the count, -1 when the root cannot be read. */
int gc_cases(gc_case **out);

/* The case's descriptor by nx_op_find (names and aliases); NULL when no row has the name. */
const nx_op_desc *gc_desc(const gc_case *c);

/* The manifest dtype as an nx_dtype; false for a name nitrix does not know. */
bool gc_dtype(const gc_case *c, nx_dtype *out);

/* The value of option key in the manifest (any case), or NULL. */
const char *gc_option(const gc_case *c, const char *key);

/* Reads the case's inputs (in[0..nin)) or reference outputs (out[0..nout)); NX_OK or the first
 * error (every tensor read so far freed, every slot NULL). */
nx_status gc_load(nx_ctx *ctx, const gc_case *c, bool outputs, nx_tensor **t);
void gc_free(int n, nx_tensor **t);

/* Runs the case's op with its inputs and options on backend ("ref", "cpu", "cuda"), with driver
 * (NULL: the manifest's or none) when the op has a "driver" option. A TENSOR option's value is a
 * file of the case folder. out gets info->noutputs tensors. */
nx_status gc_run(nx_ctx *ctx, const gc_case *c, const nx_op_info *info, const char *backend,
                 const char *driver, const nx_tensor *const *in, nx_tensor **out);
/* The same through nx_op_vjp: dy one cotangent per output, dx one gradient per input. */
nx_status gc_vjp(nx_ctx *ctx, const gc_case *c, const nx_op_info *info, const char *backend,
                 const nx_tensor *const *in, const nx_tensor *const *dy, nx_tensor **dx);

/* Element i of a host tensor of any real dtype, as a double (f16/bf16 unsupported: NaN). */
double gc_at(const nx_tensor *t, int64_t i);

/* The worst element of got against want: float values by |got - want| <= atol + rtol |want| (NaN
 * equals NaN, an infinity itself), integer or bool values (either side) exactly. Shapes must be
 * equal; a float result must have float_dtype. Returns true when every element passes; else false
 * with msg naming the element (its index, both values, the tolerance) or the shape or dtype. */
bool gc_compare(const nx_tensor *got, const nx_tensor *want, nx_dtype float_dtype, double rtol,
                double atol, char *msg, size_t len);

/* The driver-site registry row of an op (nx_divergent_ops()), or NULL. */
const nx_divergent_op *gc_divergent(const char *site);

/* Whether CUDA can run here (a usable GPU and NVRTC): the suite passes without one. */
bool gc_cuda_usable(nx_ctx *ctx);

#endif
