/* Staged K-loops for pairwise reductions (KeOps's Genred layout) in the CUDA emitter.
 *
 * Recognised: a LOOP kernel with one top-level REDUCE over its single reduction loop j, monoid
 * SUM, MAX, MIN or LOGSUMEXP in f32, whose operand reads, inside the loop, only f32 loads at
 * offsets affine in j alone (y_j, b_j: the "staged" loads; space loops of extent 1 count as 0),
 * constants and values of the point (x_i, computed once per point). That is
 * out_i = fold_j F(x_i, y_j) with nothing M x N anywhere: the Gaussian kernel sum, a Sinkhorn
 * step, nearest-neighbour distances. Contractions (two operands that share j with the point) go
 * to emit-tile.c first.
 *
 * The kernel: a block of 256 threads owns 256 x ROWS points, each thread ROWS of them (256 apart,
 * so loads of the point values and the stores stay coalesced), their point values and carries in
 * registers. j advances in tiles of 256: each thread stages one j's loaded values into shared
 * memory, packed four to a float4, so the inner loop reads each y_j with one broadcast 16-byte
 * load per four values and reuses it for ROWS points. The plain kernel read y_j from global
 * memory once per point and carried one point per thread.
 *
 * Every output folds its terms one at a time in ascending j, the canonical order, as the plain
 * kernel does. In reproducible mode kernels are compiled without FMA contraction (emit-run.c), so
 * MAX/MIN folds of + - * / terms and SUMs equal the interpreter bit for bit; outside it products
 * are contracted into FMAs.
 *
 * exp outside reproducible mode: `ex2.approx.ftz.f32` of x * log2(e) on the special-function
 * unit (CUDA's __expf), two instructions instead of the ~8 of the accurate expf that the rest
 * of the backend uses. Its error is within 2 + 1.16 |x| ulp (CUDA Programming Guide, __expf)
 * and results below 2^-126 flush to zero: for exp(-d) with d <= 8 that is <= 12 ulp of the
 * term, well inside the f32 semiring tolerance (1e-5 + 1e-5 |ref|; the measured error of the
 * Gaussian sum is in docs/perf/semiring.md). Reproducible mode keeps expf.
 * The LOGSUMEXP carry uses the same exp; the Gaussian exponent's pre-scaled form is below. */
#include <stdlib.h>
#include <string.h>

#include "codegen/ptx/emit-tile.h"

#define THREADS NX_PTX_THREADS
#define TJ NX_PTX_THREADS /* j per staged tile: one per thread */
#define MAX_STAGED 8      /* staged loads: two float4 groups */
#define MAX_POINT_REGS 96 /* point values x ROWS kept in registers */

typedef struct pair {
    int r, monoid, lk;
    int64_t n, points;
    int rows;
    int nstaged;
    int staged[MAX_STAGED]; /* instruction ids of the staged loads */
    int npoint;             /* point values the loop reads */
    bool fast_exp;
    int sexp;     /* an exp of -c * sum_k (u_k - w_k)^2 evaluated on pre-scaled operands, or -1 */
    char *need;   /* per instruction: 1 = computed in the loop for the fold */
    char *point;  /* per instruction: 1 = a point value the loop reads */
    char *scaled; /* per instruction: bit 0: a point value or staged load carried times
                   * sqrt(log2 e); bit 1: a square, sum or negation the exp's chain replaces */
    int nsq, sq[MAX_STAGED]; /* the differences squared in that chain */
    int *uses;               /* per instruction: readers among the loop's instructions */
} pair;

#define L(...) nx_ptx_line(g, __VA_ARGS__)

/* ---- recognising the fold ------------------------------------------------------------------*/

/* A load whose offset depends on j (and constants) only. */
static bool stageable(const nx_kernel *k, const nx_ptx_affine *aff, int id, int lk)
{
    const nx_kinst *in = &k->inst[id];
    const nx_ptx_affine *o = &aff[in->a[1]];
    if (in->dtype != NX_DTYPE_F32 || !o->ok)
        return false;
    for (int l = 0; l < k->ndim; l++)
        if (o->coef[l] && k->extent[l] != 1)
            return false;
    (void)lk;
    return true;
}

/* Marks what the fold's operand needs inside the loop; false on anything the layout cannot
 * carry (a nested fold, a load that depends on the point and on j). */
static bool mark(const nx_kernel *k, const nx_ptx_gen *g, const nx_ptx_affine *aff, pair *p, int id)
{
    if (k->inst[id].op == NX_KOP_CONST) { /* rebuilt where used, never carried per row */
        p->need[id] = 1;
        return true;
    }
    if (g->scope[id] < 0) {
        if (!p->point[id])
            p->npoint++;
        p->point[id] = 1;
        return true;
    }
    if (g->scope[id] != p->r)
        return false;
    if (p->need[id])
        return true;
    p->need[id] = 1;
    const nx_kinst *in = &k->inst[id];
    switch (in->op) {
    case NX_KOP_CONST:
        return true;
    case NX_KOP_IDX:
        return in->a[0] == p->lk;
    case NX_KOP_LOAD:
        if (!stageable(k, aff, id, p->lk) || p->nstaged >= MAX_STAGED)
            return false;
        p->staged[p->nstaged++] = id;
        return true;
    case NX_KOP_PRIM: {
        int arity = in->prim == NX_PRIM_SELECT ? 3 : nx_ir_prims[in->prim].arity;
        for (int a = 0; a < arity; a++)
            if (!mark(k, g, aff, p, in->a[a]))
                return false;
        return true;
    }
    default:
        return false;
    }
}

/* ---- the Gaussian exponent on pre-scaled operands --------------------------------------------
 *
 * exp(-c * sum_k (u_k - w_k)^2), u_k values of the point and w_k staged loads (the Gaussian
 * kernel), is ex2(-c * sum_k (u'_k - w'_k)^2) with u' = u sqrt(log2 e) and w' = w sqrt(log2 e):
 * the scale moves to the point values (once per point) and the staging (once per tile entry), and
 * the loop drops its one multiply per pair by log2 e, leaving 8 issue slots a pair of which one is
 * the ex2 (emit-pair.c's file comment). Only when every value of the pattern has no other reader,
 * so nothing else sees a scaled value. */

static bool single(const pair *p, int id, int n)
{
    return p->uses[id] == n;
}

/* A square (u - w)^2 with one operand a point value and the other a staged load. */
static bool scaled_square(const nx_kernel *k, pair *p, int id)
{
    const nx_kinst *sq = &k->inst[id];
    if (!p->need[id] || sq->op != NX_KOP_PRIM || sq->prim != NX_PRIM_MUL || sq->a[0] != sq->a[1] ||
        !single(p, id, 1))
        return false;
    int d = sq->a[0];
    const nx_kinst *sub = &k->inst[d];
    if (!p->need[d] || sub->op != NX_KOP_PRIM || sub->prim != NX_PRIM_SUB || !single(p, d, 2))
        return false;
    int u = sub->a[0], w = sub->a[1];
    if (p->point[w])
        u = sub->a[1], w = sub->a[0];
    if (!p->point[u] || !single(p, u, 1) || !p->need[w] || k->inst[w].op != NX_KOP_LOAD ||
        !single(p, w, 1) || p->nsq >= MAX_STAGED)
        return false;
    p->scaled[u] = p->scaled[w] = 1;
    p->scaled[id] = 2;
    p->sq[p->nsq++] = d;
    return true;
}

static bool scaled_sum(const nx_kernel *k, pair *p, int id)
{
    const nx_kinst *in = &k->inst[id];
    if (p->need[id] && in->op == NX_KOP_PRIM && in->prim == NX_PRIM_ADD && single(p, id, 1)) {
        p->scaled[id] = 2;
        return scaled_sum(k, p, in->a[0]) && scaled_sum(k, p, in->a[1]);
    }
    return scaled_square(k, p, id);
}

/* The operand of exp e: -s, or s times a constant. *s gets the sum. */
static bool scaled_arg(const nx_kernel *k, const pair *p, int e, int *s)
{
    const nx_kinst *n = &k->inst[k->inst[e].a[0]];
    if (!single(p, k->inst[e].a[0], 1) || n->op != NX_KOP_PRIM || n->dtype != NX_DTYPE_F32)
        return false;
    if (n->prim == NX_PRIM_NEG) {
        *s = n->a[0];
        return true;
    }
    if (n->prim != NX_PRIM_MUL)
        return false;
    bool c0 = k->inst[n->a[0]].op == NX_KOP_CONST, c1 = k->inst[n->a[1]].op == NX_KOP_CONST;
    if (c0 == c1)
        return false;
    *s = c0 ? n->a[1] : n->a[0];
    return true;
}

static void find_scaled_exp(const nx_kernel *k, pair *p)
{
    p->sexp = -1;
    if (!p->fast_exp)
        return;
    for (int id = 0; id < p->r; id++)
        if (p->need[id] || id == k->inst[p->r].a[0])
            for (int a = 0; a < 3; a++) {
                const nx_kinst *in = &k->inst[id];
                int arity = in->op != NX_KOP_PRIM        ? 0
                            : in->prim == NX_PRIM_SELECT ? 3
                                                         : nx_ir_prims[in->prim].arity;
                if (a < arity)
                    p->uses[in->a[a]]++;
            }
    for (int id = 0; id < p->r && p->sexp < 0; id++) {
        const nx_kinst *in = &k->inst[id];
        int s = -1;
        if (!p->need[id] || in->op != NX_KOP_PRIM || in->prim != NX_PRIM_EXP ||
            in->dtype != NX_DTYPE_F32 || !scaled_arg(k, p, id, &s))
            continue;
        memset(p->scaled, 0, (size_t)k->ninst);
        p->nsq = 0;
        if (single(p, s, 1) && scaled_sum(k, p, s))
            p->sexp = id;
    }
    /* -(sum of squares) becomes one chain of multiply-adds with negated operands (free on the
     * FMA pipe): exp(-0) = exp(+0), so the sign of a zero sum does not matter */
    if (p->sexp >= 0 && k->inst[k->inst[p->sexp].a[0]].prim == NX_PRIM_NEG)
        p->scaled[k->inst[p->sexp].a[0]] = 2;
    if (p->sexp < 0)
        memset(p->scaled, 0, (size_t)k->ninst);
}

/* Rows per thread: as many as keep two blocks per SM of a 132-SM part busy, at most 8, and no
 * more than the registers for the point values allow. The context's pair_rows option
 * (NITRIX_PTX_PAIR_ROWS) overrides it for measurements (part of the cache key). */
static int choose_rows(const nx_kernel *k, const pair *p)
{
    int forced = nx_rt_cuda_codegen(k->ctx)->pair_rows;
    if (forced > 0)
        return forced;
    int rows = 8;
    while (rows > 1 &&
           ((p->points + (int64_t)THREADS * rows - 1) / ((int64_t)THREADS * rows) < 264 ||
            (p->npoint + 3) * rows > MAX_POINT_REGS))
        rows /= 2;
    return rows;
}

static bool match(const nx_ptx_gen *g, const nx_ptx_affine *aff, bool reassoc, pair *p)
{
    const nx_kernel *k = g->k;
    if (k->kind != NX_KERNEL_LOOP || k->nloops != k->ndim + 1 || k->extent[k->ndim] < 1)
        return false;
    p->lk = k->ndim;
    p->n = k->extent[p->lk];
    p->points = nx_ir_numel(k->ndim, k->extent);
    p->r = -1;
    for (int id = 0; id < k->ninst; id++) {
        if (k->inst[id].op != NX_KOP_REDUCE)
            continue;
        if (p->r >= 0)
            return false;
        p->r = id;
    }
    if (p->r < 0 || p->points < 1 || p->n >= INT32_MAX || g->scope[p->r] >= 0 ||
        p->points >= ((int64_t)1 << 24) * THREADS)
        return false;
    const nx_kinst *r = &k->inst[p->r];
    p->monoid = r->prim;
    if ((p->monoid != NX_MONOID_SUM && p->monoid != NX_MONOID_MAX && p->monoid != NX_MONOID_MIN &&
         p->monoid != NX_MONOID_LOGSUMEXP) ||
        r->dtype != NX_DTYPE_F32 || k->inst[r->a[0]].dtype != NX_DTYPE_F32 ||
        (uint64_t)r->i != (1ull << p->lk))
        return false;
    if (!mark(k, g, aff, p, r->a[0]) || p->nstaged == 0)
        return false;
    p->fast_exp = reassoc;
    find_scaled_exp(k, p);
    p->rows = choose_rows(k, p);
    return true;
}

/* ---- source ---------------------------------------------------------------------------------*/

static const char pair_helpers[] =
    "static __device__ __forceinline__ float nx_ex2f(float x)\n"
    "{ float y; asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(y) : \"f\"(x)); return y; }\n"
    "#define NX_LOG2E 1.4426950408889634f\n"
    "#define NX_SQRT_LOG2E 1.2011224087864498f\n";

/* exp of v<x> as the fold's step uses it. */
static void exp_text(const pair *p, const char *x, char *buf, size_t len)
{
    if (p->fast_exp)
        snprintf(buf, len, "nx_ex2f((%s) * NX_LOG2E)", x);
    else
        snprintf(buf, len, "expf(%s)", x);
}

static void emit_inst(nx_ptx_gen *g, const pair *p, int id)
{
    const nx_kinst *in = &g->k->inst[id];
    if (p->scaled[id] & 2)
        return;                                       /* in the chain below */
    if (id == p->sexp && (p->scaled[in->a[0]] & 2)) { /* exp(-sum of squares) */
        L("float t%d = (-v%d) * v%d;", id, p->sq[0], p->sq[0]);
        for (int q = 1; q < p->nsq; q++)
            L("t%d = fmaf(-v%d, v%d, t%d);", id, p->sq[q], p->sq[q], id);
        L("const float v%d = nx_ex2f(t%d);", id, id);
        return;
    }
    if (id == p->sexp) { /* its argument's multiply by log2 e went into the operands */
        L("const float v%d = nx_ex2f(v%d);", id, in->a[0]);
        return;
    }
    if (p->fast_exp && in->op == NX_KOP_PRIM && in->prim == NX_PRIM_EXP &&
        in->dtype == NX_DTYPE_F32) {
        char x[32], e[96];
        snprintf(x, sizeof x, "v%d", in->a[0]);
        exp_text(p, x, e, sizeof e);
        L("const float v%d = %s;", id, e);
        return;
    }
    nx_ptx_emit_inst(g, id);
}

static void emit_carries(nx_ptx_gen *g, const pair *p)
{
    const char *init = p->monoid == NX_MONOID_SUM   ? "0.0f"
                       : p->monoid == NX_MONOID_MIN ? "NX_INFF"
                                                    : "-NX_INFF";
    L("float acc[%d], sum[%d];", p->rows, p->rows);
    L("int nf[%d];", p->rows);
    L("#pragma unroll");
    L("for (int r = 0; r < %d; r++) { acc[r] = %s; sum[r] = 0.0f; nf[r] = 0; }", p->rows, init);
}

/* One fold step of row r with the term in v<x> (the plain kernel's steps, emit.c emit_step). */
static void emit_step(nx_ptx_gen *g, const pair *p, int x)
{
    char e1[96], e2[96], d1[48], d2[48];
    switch (p->monoid) {
    case NX_MONOID_SUM:
        L("acc[r] = acc[r] + v%d;", x);
        break;
    case NX_MONOID_MAX:
    case NX_MONOID_MIN:
        L("if (v%d != v%d) nf[r] = 1; else if (v%d %s acc[r]) acc[r] = v%d;", x, x, x,
          p->monoid == NX_MONOID_MAX ? ">" : "<", x);
        break;
    default: /* LOGSUMEXP: the online (m, s) carry */
        snprintf(d1, sizeof d1, "acc[r] - v%d", x);
        snprintf(d2, sizeof d2, "v%d - acc[r]", x);
        exp_text(p, d1, e1, sizeof e1);
        exp_text(p, d2, e2, sizeof e2);
        L("if (v%d != v%d) nf[r] = 1;", x, x);
        L("else if (v%d != -NX_INFF) {", x);
        g->ind++;
        L("if (v%d > acc[r]) { sum[r] = sum[r] * %s + 1; acc[r] = v%d; }", x, e1, x);
        L("else if (v%d == acc[r]) sum[r] += 1;", x);
        L("else sum[r] += %s;", e2);
        g->ind--;
        L("}");
        break;
    }
}

static void emit_finish(nx_ptx_gen *g, const pair *p)
{
    int r = p->r;
    switch (p->monoid) {
    case NX_MONOID_SUM:
        L("const float v%d = acc[r];", r);
        break;
    case NX_MONOID_LOGSUMEXP:
        L("const float v%d = nf[r] ? NX_NANF : (isinf(acc[r]) ? acc[r] : "
          "(float)((double)acc[r] + log((double)sum[r])));",
          r);
        break;
    default:
        L("const float v%d = nf[r] ? NX_NANF : acc[r];", r);
        break;
    }
}

/* The point p of row r: rows are THREADS apart; past the end, the last point (computed, never
 * stored), so every load stays in range. */
static void emit_row_point(nx_ptx_gen *g, const pair *p, bool clamp)
{
    L("i64 p = pbase + (i64)r * %d;", THREADS);
    if (clamp)
        L("if (p >= %lldLL) p = %lldLL;", (long long)p->points, (long long)p->points - 1);
    nx_ptx_emit_point_index(g, "p");
}

static void emit_points(nx_ptx_gen *g, const pair *p)
{
    const nx_kernel *k = g->k;
    for (int id = 0; id < k->ninst; id++)
        if (p->point[id])
            L("%s X%d[%d];", nx_ptx_ctype(k->inst[id].dtype), id, p->rows);
    L("#pragma unroll");
    L("for (int r = 0; r < %d; r++) {", p->rows);
    g->ind++;
    emit_row_point(g, p, true);
    for (int id = 0; id < p->r; id++)
        if (g->scope[id] < 0)
            emit_inst(g, p, id);
    for (int id = 0; id < k->ninst; id++)
        if (p->point[id])
            L("X%d[r] = v%d%s;", id, id, p->scaled[id] ? " * NX_SQRT_LOG2E" : "");
    g->ind--;
    L("}");
}

static void emit_stage(nx_ptx_gen *g, const pair *p, const nx_ptx_affine *aff)
{
    const nx_kernel *k = g->k;
    static const char lane[] = "xyzw";
    int groups = (p->nstaged + 3) / 4;
    L("__shared__ float4 sy[%d][%d];", groups, TJ);
    L("for (int j0 = 0; j0 < %lldLL; j0 += %d) {", (long long)p->n, TJ);
    g->ind++;
    L("__syncthreads();");
    L("if (j0 + (int)threadIdx.x < %lldLL) {", (long long)p->n);
    g->ind++;
    L("const i64 j = j0 + (int)threadIdx.x;");
    for (int q = 0; q < groups; q++) {
        L("float4 w%d = make_float4(0.0f, 0.0f, 0.0f, 0.0f);", q);
        for (int s = 4 * q; s < p->nstaged && s < 4 * q + 4; s++) {
            const nx_kinst *ld = &k->inst[p->staged[s]];
            const nx_ptx_affine *o = &aff[ld->a[1]];
            L("w%d.%c = b%d[%lldLL + %lldLL * j]%s;", q, lane[s - 4 * q], ld->a[0], (long long)o->c,
              (long long)o->coef[p->lk], p->scaled[p->staged[s]] ? " * NX_SQRT_LOG2E" : "");
        }
        L("sy[%d][threadIdx.x] = w%d;", q, q);
    }
    g->ind--;
    L("}");
    L("__syncthreads();");
    L("const int cnt = min(%d, (int)(%lldLL - j0));", TJ, (long long)p->n);
    L("#pragma unroll 4");
    L("for (int jj = 0; jj < cnt; jj++) {");
    g->ind++;
    for (int q = 0; q < groups; q++)
        L("const float4 q%d = sy[%d][jj];", q, q);
    for (int s = 0; s < p->nstaged; s++)
        L("const float v%d = q%d.%c;", p->staged[s], s / 4, lane[s % 4]);
    for (int id = 0; id < p->r; id++)
        if (p->need[id] && k->inst[id].op == NX_KOP_IDX)
            L("const i64 v%d = (i64)(j0 + jj);", id);
    L("#pragma unroll");
    L("for (int r = 0; r < %d; r++) {", p->rows);
    g->ind++;
    for (int id = 0; id < k->ninst; id++)
        if (p->point[id])
            L("const %s v%d = X%d[r];", nx_ptx_ctype(k->inst[id].dtype), id, id);
    for (int id = 0; id < p->r; id++)
        if (p->need[id] && k->inst[id].op != NX_KOP_LOAD && k->inst[id].op != NX_KOP_IDX)
            emit_inst(g, p, id);
    emit_step(g, p, k->inst[p->r].a[0]);
    g->ind--;
    L("}");
    g->ind--;
    L("}");
    g->ind--;
    L("}");
}

static void emit_results(nx_ptx_gen *g, const pair *p)
{
    const nx_kernel *k = g->k;
    L("#pragma unroll");
    L("for (int r = 0; r < %d; r++) {", p->rows);
    g->ind++;
    emit_row_point(g, p, false);
    L("if (p < %lldLL) {", (long long)p->points);
    g->ind++;
    for (int id = 0; id < k->ninst; id++) {
        if (id == p->r)
            emit_finish(g, p);
        else if (g->scope[id] < 0)
            emit_inst(g, p, id);
    }
    for (int s = 0; s < k->nstores; s++)
        L("b%d[p] = v%d;", k->stores[s].buf, k->stores[s].value);
    g->ind--;
    L("}");
    g->ind--;
    L("}");
}

static void emit_kernel(nx_ptx_gen *g, const pair *p, const nx_ptx_affine *aff, const char *name)
{
    const nx_kernel *k = g->k;
    nx_ptx_put(&g->t, "%s", pair_helpers);
    nx_ptx_put(&g->t, "extern \"C\" __global__ void __launch_bounds__(%d)\n%s(", THREADS, name);
    for (int b = 0; b < k->nbufs; b++)
        nx_ptx_put(&g->t, "%s%s *__restrict__ b%d, ", k->bufs[b].role == NX_KBUF_IN ? "const " : "",
                   nx_ptx_ctype(k->bufs[b].dtype), b);
    nx_ptx_put(&g->t, "i64 points)\n{\n");
    g->ind = 1;
    L("(void)points;");
    L("const i64 pbase = (i64)blockIdx.x * %d + threadIdx.x;", THREADS * p->rows);
    emit_carries(g, p);
    emit_points(g, p);
    emit_stage(g, p, aff);
    emit_results(g, p);
    nx_ptx_put(&g->t, "}\n");
}

bool nx_ptx_emit_pair(nx_ptx_gen *g, const nx_ptx_affine *aff, const char *name, bool reassoc,
                      nx_ptx_launch *launch)
{
    const nx_kernel *k = g->k;
    pair p = {0};
    p.need = nx_rt_calloc(k->ctx, (size_t)k->ninst, 1);
    p.point = nx_rt_calloc(k->ctx, (size_t)k->ninst, 1);
    p.scaled = nx_rt_calloc(k->ctx, (size_t)k->ninst, 1);
    p.uses = nx_rt_calloc(k->ctx, (size_t)k->ninst, sizeof *p.uses);
    bool ok = p.need && p.point && p.scaled && p.uses;
    if (!ok)
        g->t.failed = true; /* reported as out of memory by the caller */
    else
        ok = match(g, aff, reassoc, &p);
    if (ok) {
        emit_kernel(g, &p, aff, name);
        int64_t blocks = (p.points + (int64_t)THREADS * p.rows - 1) / ((int64_t)THREADS * p.rows);
        launch->shape = NX_PTX_POINTS;
        launch->points = blocks * THREADS;
        launch->fold_len = 0;
        g->blocks = 1;
        g->block_r = -1;
    }
    nx_rt_free(k->ctx, p.need, (size_t)k->ninst);
    nx_rt_free(k->ctx, p.point, (size_t)k->ninst);
    nx_rt_free(k->ctx, p.scaled, (size_t)k->ninst);
    nx_rt_free(k->ctx, p.uses, (size_t)k->ninst * sizeof *p.uses);
    return ok || g->t.failed;
}
