/* Semiring internals of the frontend (frontend/semiring.c, frontend/formula.c), used by
 * ops/semiring/ too: the small expression trees that describe a semiring's parts independently of
 * any graph, the semiring object, and the formula parser. Not installed.
 *
 * An expression is an array of nodes in topological order (operands before users); its root is
 * an index. Instantiating it in a graph maps variables to nodes and rebuilds the ops with the
 * graph's builders, so broadcasting, dtype checks and hash-consing come from the IR. Float
 * constants, float placeholders and casts to a float take the dtype the expression is
 * instantiated at, so one definition serves f32 and f64. */
#ifndef NX_FRONTEND_SEMIRING_H
#define NX_FRONTEND_SEMIRING_H

#include "internal.h"
#include "ir/ir.h"
#include "nitrix-ops.h"

/* Operations beyond the IR's primitives (which keep their nx_prim codes). */
enum {
    NX_SR_CONST = 1000, /* value (at the working dtype unless dtype says otherwise) */
    NX_SR_VAR,          /* variable var */
    NX_SR_LOGADDEXP,    /* log(exp(a) + exp(b)), exact at equal and infinite arguments */
    NX_SR_VSUM,         /* sum over the last axis, kept (pairwise formulas' vectors) */
};

/* Variables. A, B: the (x)'s operands and a formula plus's carries; CA/CB: a custom monoid's
 * carries; X: its element; PX..PP: a pairwise formula's x_i, y_j, b_j and p0..p7. */
enum {
    NX_SR_VA,
    NX_SR_VB,
    NX_SR_VX,
    NX_SR_VCA0,
    NX_SR_VCB0 = NX_SR_VCA0 + NX_MONOID_MAX_CARRY,
    NX_SR_VPX = NX_SR_VCB0 + NX_MONOID_MAX_CARRY,
    NX_SR_VPY,
    NX_SR_VPB,
    NX_SR_VP0,
    NX_SR_NVARS = NX_SR_VP0 + 8
};

typedef struct nx_sr_node {
    int32_t op; /* nx_prim or NX_SR_* */
    int32_t nops;
    int32_t ops[3]; /* node indices */
    int32_t var;    /* NX_SR_VAR */
    int32_t dtype;  /* CONST and CAST: NX_DTYPE_COUNT means the working float dtype */
    double value;   /* CONST */
} nx_sr_node;

typedef struct nx_sr_expr {
    nx_sr_node *nodes;
    int32_t n, cap;
} nx_sr_expr;

struct nx_semiring {
    nx_ctx *ctx; /* NULL: a static built-in */
    nx_semiring_kind kind;
    char name[64];
    unsigned props;
    nx_sr_expr e;     /* every part's nodes */
    int32_t times;    /* roots in e; -1: none */
    int32_t finalize; /* over VA; -1: none */
    bool builtin_plus;
    nx_monoid plus;
    int ncarry; /* custom monoid */
    int32_t lift[NX_MONOID_MAX_CARRY], combine[NX_MONOID_MAX_CARRY], ident[NX_MONOID_MAX_CARRY];
    int32_t mfinal; /* over VCA*; -1: carry 0 */
    double identity;
    bool has_ann;
    double ann;
};

/* Growing an expression (context allocator); -1 on allocation failure. */
NX_HIDDEN int32_t nx_sr_push(nx_ctx *ctx, nx_sr_expr *e, const nx_sr_node *n);
NX_HIDDEN void nx_sr_expr_free(nx_ctx *ctx, nx_sr_expr *e);

/* Builds expression root of e in g at working dtype dt with variables bound to vars (NX_NONE
 * where unbound: using one is an error recorded in g). */
NX_HIDDEN nx_node nx_sr_build(nx_graph *g, const nx_sr_expr *e, int32_t root, nx_dtype dt,
                              const nx_node *vars);
/* Whether root uses only variables whose bit is set in allowed (bit v for variable v). The first
 * offending variable goes to *bad. */
NX_HIDDEN bool nx_sr_vars_ok(const nx_sr_expr *e, int32_t root, uint64_t allowed, int *bad);
/* Appends a canonical byte form of root's tree (for cache keys) to b. */
struct nx_rt_cache_blob;
NX_HIDDEN void nx_sr_key(struct nx_rt_cache_blob *b, const char *field, const nx_sr_expr *e,
                         int32_t root);
NX_HIDDEN void nx_sr_semiring_key(struct nx_rt_cache_blob *b, const nx_semiring *sr);

/* ---- the formula parser (frontend/formula.c)
 * ---------------------------------------------------------*/

/* What a formula may name. */
typedef enum nx_sr_dialect {
    NX_SR_DIALECT_SEMIRING, /* a, b */
    NX_SR_DIALECT_PAIRWISE, /* x, y, b, p0..p7, vector functions */
} nx_sr_dialect;

typedef struct nx_sr_stmt {
    char key[32];
    int32_t root;
    int line, col; /* of the key */
} nx_sr_stmt;

#define NX_SR_MAX_STMTS 8
/* Parses `key = expr` statements (semiring dialect) into e and stmts. NX_ERR_PARSE with
 * "<who>:LINE:COL: expected X, found Y" in msg on error. */
NX_HIDDEN nx_status nx_sr_parse_stmts(nx_ctx *ctx, const char *who, const char *text,
                                      nx_sr_dialect dialect, nx_sr_expr *e, nx_sr_stmt *stmts,
                                      int *nstmts, char *msg, size_t msglen);
/* Parses one expression (pairwise dialect) into e; *root its root. */
NX_HIDDEN nx_status nx_sr_parse_expr(nx_ctx *ctx, const char *who, const char *text,
                                     nx_sr_dialect dialect, nx_sr_expr *e, int32_t *root, char *msg,
                                     size_t msglen);

/* The semiring matmul's shape rule, for the entry point's check and the graph builder alike:
 * A [..., m, k] and B [..., k, n] with batch dims that broadcast give [..., m, n] (*nout dims in
 * out, both may be NULL). NX_ERR_SHAPE with the reason in msg ("A is 3x4 but B is 5x2 (inner dims
 * differ)") otherwise. */
NX_HIDDEN nx_status nx_sr_matmul_shape(int na, const int64_t *sa, int nb, const int64_t *sb,
                                       int *nout, int64_t *out, char *msg, size_t msglen);

#endif /* NX_FRONTEND_SEMIRING_H */
