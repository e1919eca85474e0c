/* Register-tiled semiring contractions for the CUDA emitter (docs/cuda.md).
 *
 * Recognised: a LOOP kernel with one REDUCE, over its single reduction loop k, monoid SUM, MAX,
 * MIN or LOGSUMEXP in f32, whose operand is an elementwise f(x, y) of exactly two f32 loads (and
 * constants), x = A at an affine offset in k and a space loop i that B does not use, y = B at an
 * affine offset in k and a space loop j that A does not use. Every other space loop is a batch
 * loop: fixed per block. Other kernels go to the plain emitter.
 *
 * Offsets are affine in the loops (div/mod that only re-linearise an index are resolved), every
 * buffer has fewer than 2^31 elements, and a batch of products is not tiled when each is under
 * 4096 outputs.
 *
 * The kernel: a block of 256 threads computes a BM x BN tile of (i, j) outputs, each thread TM x TN
 * of them in registers (8x8; 4x8 for LOGSUMEXP, whose carry is two registers), in two 4-wide
 * groups 64 apart so that the shared-memory reads are float4 and conflict-free. k advances in
 * slices of BK = 8: A's slice is stored transposed (k-major) and B's as is, in two shared buffers,
 * so the global loads of slice t + 1 (16-byte vectors when the layout and the pointers allow)
 * overlap the arithmetic on slice t, with one barrier per slice.
 *
 * Every output still folds its terms one at a time in ascending k, the canonical order:
 *   MAX/MIN  exact in any mode. When f is x + y the step is one NaN-propagating max/min
 *            instruction (max.NaN.f32, sm_80+). It orders -0 below +0 where the canonical fold
 *            keeps the first of equal values, so the two can differ only in the sign of a zero
 *            result, and only if some term was -0.0 + -0.0: a block with a +0 result (MAX; -0 for
 *            MIN) scans its rows of A and columns of B for -0.0 and, when both hold one, folds
 *            again with the compare-and-select step (NaN kept by `v != v`). That step is exact for
 *            any f and is the only step for other f. Results equal the interpreter bit for bit.
 *   SUM      the same order; products feeding the sum are contracted into FMA (as in the plain
 *            kernel), so within the float tolerance, not bitwise.
 *   BOOLEAN  (MAX of select((x != 0) & (y != 0), 1, 0)) stages [x != 0] and [y != 0] as 0/1 and
 *            folds max(acc, x' y'): bit for bit the interpreter's, at max-plus cost (is_boolean).
 *   LOGSUMEXP  the online (m, s) carry: s is rescaled only when the max grows, each term costs
 *            one exp2 on the special-function unit (ex2.approx: 2 ulp), m is NaN-sticky, and m
 *            starts at -FLT_MAX so that -inf terms never form inf - inf; the result is
 *            m + log(s) in double as the plain kernel does. Within the CPU tolerance. */
#include <math.h>
#include <string.h>

#include "codegen/ptx/emit-tile.h"

#define THREADS 256
#define BK 8
#define TN 8
#define BN 128

/* ---- affine offsets ------------------------------------------------------------------------*/

static bool add_ok(int64_t a, int64_t b, int64_t *r)
{
    return !__builtin_add_overflow(a, b, r);
}

static bool scale(nx_ptx_affine *r, const nx_ptx_affine *x, int64_t s, int nloops)
{
    bool ok = !__builtin_mul_overflow(x->c, s, &r->c);
    for (int l = 0; l < nloops; l++)
        ok = ok && !__builtin_mul_overflow(x->coef[l], s, &r->coef[l]);
    return ok;
}

static bool is_const(const nx_ptx_affine *x, int nloops)
{
    for (int l = 0; l < nloops; l++)
        if (x->coef[l])
            return false;
    return x->ok;
}

/* x div c and x mod c (floor semantics) when x = c * y + z with z in [0, c) for every loop point:
 * the terms of x whose coefficients c divides make y, the rest z. Lowering re-linearises
 * reshapes this way (an index unflattened and flattened again). */
static bool div_mod(const nx_kernel *k, const nx_ptx_affine *x, int64_t c, bool div,
                    nx_ptx_affine *r)
{
    int64_t q = x->c / c, rem = x->c % c;
    if (rem < 0)
        rem += c, q--;
    int64_t lo = rem, hi = rem;
    nx_ptx_affine y = {.ok = true, .c = q}, z = {.ok = true, .c = rem};
    for (int l = 0; l < k->nloops; l++) {
        int64_t a = x->coef[l];
        if (a % c == 0) {
            y.coef[l] = a / c;
            continue;
        }
        z.coef[l] = a;
        int64_t span;
        if (__builtin_mul_overflow(a, k->extent[l] > 0 ? k->extent[l] - 1 : 0, &span))
            return false;
        if (!add_ok(span > 0 ? hi : lo, span, span > 0 ? &hi : &lo))
            return false;
    }
    if (lo < 0 || hi >= c)
        return false;
    *r = div ? y : z;
    return true;
}

static void affine_prim(const nx_kernel *k, const nx_kinst *in, nx_ptx_affine *aff,
                        nx_ptx_affine *r)
{
    int n = k->nloops;
    int arity = nx_ir_prims[in->prim].arity;
    if (arity != 1 && arity != 2)
        return;
    const nx_ptx_affine *a = &aff[in->a[0]], *b = arity == 1 ? NULL : &aff[in->a[1]];
    if (!a->ok || (b && !b->ok) || (!b && in->prim != NX_PRIM_NEG))
        return;
    bool ok = true;
    switch (in->prim) {
    case NX_PRIM_NEG:
        ok = scale(r, a, -1, n);
        break;
    case NX_PRIM_ADD:
    case NX_PRIM_SUB: {
        nx_ptx_affine nb;
        if (in->prim == NX_PRIM_SUB)
            ok = scale(&nb, b, -1, n);
        else
            nb = *b;
        ok = ok && add_ok(a->c, nb.c, &r->c);
        for (int l = 0; l < n; l++)
            ok = ok && add_ok(a->coef[l], nb.coef[l], &r->coef[l]);
        break;
    }
    case NX_PRIM_DIV:
    case NX_PRIM_MOD:
        ok = is_const(b, n) && b->c > 0 && div_mod(k, a, b->c, in->prim == NX_PRIM_DIV, r);
        break;
    case NX_PRIM_MUL:
        if (is_const(b, n))
            ok = scale(r, a, b->c, n);
        else if (is_const(a, n))
            ok = scale(r, b, a->c, n);
        else
            ok = false;
        break;
    default:
        ok = false;
        break;
    }
    r->ok = ok;
}

void nx_ptx_affine_all(const nx_kernel *k, nx_ptx_affine *aff)
{
    for (int id = 0; id < k->ninst; id++) {
        const nx_kinst *in = &k->inst[id];
        nx_ptx_affine *r = &aff[id];
        memset(r, 0, sizeof *r);
        if (in->dtype != NX_DTYPE_I64)
            continue;
        if (in->op == NX_KOP_CONST) {
            r->c = in->i;
            r->ok = true;
        } else if (in->op == NX_KOP_IDX) {
            r->coef[in->a[0]] = 1;
            r->ok = true;
        } else if (in->op == NX_KOP_PRIM && in->prim == NX_PRIM_CAST) {
            if (k->inst[in->a[0]].dtype == NX_DTYPE_I64)
                *r = aff[in->a[0]];
        } else if (in->op == NX_KOP_PRIM && in->prim != NX_PRIM_CAST &&
                   in->prim != NX_PRIM_SELECT && nx_ir_prims[in->prim].arity <= 2) {
            affine_prim(k, in, aff, r); /* the arithmetic it knows; not affine otherwise */
        }
    }
}

/* ---- recognising the contraction -----------------------------------------------------------*/

typedef struct tile {
    int r, monoid;
    int load[2]; /* instruction ids of the A and B loads */
    int buf[2];  /* their buffers */
    int li, lj, lk;
    int64_t m, n, kext;
    int nbatch;
    int batch[NX_KERNEL_MAX_LOOPS];
    int64_t nbat; /* product of the batch extents */
    const nx_ptx_affine *off[2];
    int64_t out_stride[NX_KERNEL_MAX_LOOPS];
    bool fast_add;         /* f is x + y: the max.NaN step with the -0 check */
    bool boolean;          /* f is select((x != 0) & (y != 0), 1, 0) under MAX: see is_boolean */
    int tm, bm;            /* rows per thread, rows per block */
    int la, lb;            /* elements of A's and B's slice each thread loads */
    bool va, vb;           /* vector loads possible for A, B (layout and offsets) */
    bool kfast_a, nfast_b; /* scalar-load mapping: the contiguous axis first */
    char *in_closure;
} tile;

/* Marks the operand closure of the REDUCE; false unless it is CONSTs, PRIMs and two f32 loads. */
static bool closure(const nx_kernel *k, tile *t, int id, int *nloads)
{
    if (t->in_closure[id])
        return true;
    t->in_closure[id] = 1;
    const nx_kinst *in = &k->inst[id];
    if (in->op == NX_KOP_CONST)
        return true;
    if (in->op == NX_KOP_LOAD) {
        if (*nloads >= 2 || in->dtype != NX_DTYPE_F32)
            return false;
        t->load[(*nloads)++] = id;
        return true;
    }
    if (in->op != NX_KOP_PRIM)
        return false;
    int arity = in->prim == NX_PRIM_SELECT ? 3 : nx_ir_prims[in->prim].arity;
    for (int a = 0; a < arity; a++)
        if (!closure(k, t, in->a[a], nloads))
            return false;
    return true;
}

static bool uses(const nx_ptx_affine *a, int l)
{
    return a->coef[l] != 0;
}

/* Picks i (A's own space loop) and j (B's), the largest when there are several; the rest are
 * batch loops. */
static bool pick_loops(const nx_kernel *k, tile *t)
{
    t->li = t->lj = -1;
    for (int l = 0; l < k->ndim; l++) {
        bool a = uses(t->off[0], l), b = uses(t->off[1], l);
        if (a && !b && (t->li < 0 || k->extent[l] > k->extent[t->li]))
            t->li = l;
        if (b && !a && (t->lj < 0 || k->extent[l] > k->extent[t->lj]))
            t->lj = l;
    }
    if (t->li < 0 || t->lj < 0)
        return false;
    t->nbatch = 0;
    t->nbat = 1;
    for (int l = 0; l < k->ndim; l++)
        if (l != t->li && l != t->lj) {
            t->batch[t->nbatch++] = l;
            t->nbat *= k->extent[l];
        }
    t->m = k->extent[t->li];
    t->n = k->extent[t->lj];
    return true;
}

static bool all_multiple(const nx_ptx_affine *a, const tile *t, int64_t w)
{
    bool ok = a->c % w == 0;
    for (int b = 0; b < t->nbatch; b++)
        ok = ok && a->coef[t->batch[b]] % w == 0;
    return ok;
}

static void plan_layout(const nx_kernel *k, tile *t)
{
    t->tm = t->monoid == NX_MONOID_LOGSUMEXP ? 4 : 8;
    t->bm = 16 * t->tm;
    t->la = t->bm * BK / THREADS;
    t->lb = BN * BK / THREADS;
    const nx_ptx_affine *a = t->off[0], *b = t->off[1];
    t->va = a->coef[t->lk] == 1 && t->kext % t->la == 0 && a->coef[t->li] % t->la == 0 &&
            all_multiple(a, t, t->la);
    t->vb = b->coef[t->lj] == 1 && t->n % t->lb == 0 && b->coef[t->lk] % t->lb == 0 &&
            all_multiple(b, t, t->lb);
    t->kfast_a = a->coef[t->lk] == 1 || a->coef[t->li] != 1;
    t->nfast_b = b->coef[t->lj] == 1 || b->coef[t->lk] != 1;
    int64_t s = 1;
    for (int l = k->ndim - 1; l >= 0; l--) {
        t->out_stride[l] = s;
        s *= k->extent[l];
    }
}

static bool is_const_f(const nx_kernel *k, int id, double v)
{
    const nx_kinst *in = &k->inst[id];
    return in->op == NX_KOP_CONST && in->dtype == NX_DTYPE_F32 && in->f == v &&
           !(v == 0 && signbit(in->f));
}

/* x != 0 (either order, a zero of either sign) for the load ld. */
static bool nonzero_of(const nx_kernel *k, int id, int ld)
{
    const nx_kinst *in = &k->inst[id];
    if (in->op != NX_KOP_PRIM || in->prim != NX_PRIM_NE)
        return false;
    const nx_kinst *z0 = &k->inst[in->a[0]], *z1 = &k->inst[in->a[1]];
    return (in->a[0] == ld && z1->op == NX_KOP_CONST && z1->f == 0) ||
           (in->a[1] == ld && z0->op == NX_KOP_CONST && z0->f == 0);
}

/* The BOOLEAN semiring on floats: f = select((x != 0) & (y != 0), 1, 0) folded by MAX. Its
 * terms are 0 or 1, so the kernel stages [x != 0] and [y != 0] as 0/1 (NaN counts as nonzero, as
 * in the interpreter) and folds max(acc, x' * y') with the one-instruction max: no term is NaN or
 * -0, so that is the canonical fold's value bit for bit, at max-plus cost instead of the
 * compare-and-select step over two compares, an and and a select. */
static bool is_boolean(const nx_kernel *k, const tile *t, int f)
{
    const nx_kinst *sel = &k->inst[f];
    if (t->monoid != NX_MONOID_MAX || sel->op != NX_KOP_PRIM || sel->prim != NX_PRIM_SELECT ||
        !is_const_f(k, sel->a[1], 1.0) || !is_const_f(k, sel->a[2], 0.0))
        return false;
    const nx_kinst *c = &k->inst[sel->a[0]];
    if (c->op != NX_KOP_PRIM || c->prim != NX_PRIM_AND)
        return false;
    return (nonzero_of(k, c->a[0], t->load[0]) && nonzero_of(k, c->a[1], t->load[1])) ||
           (nonzero_of(k, c->a[0], t->load[1]) && nonzero_of(k, c->a[1], t->load[0]));
}

static bool match(const nx_kernel *k, const nx_ptx_affine *aff, tile *t)
{
    if (k->kind != NX_KERNEL_LOOP || k->nloops != k->ndim + 1 || k->extent[k->ndim] < 1)
        return false;
    t->r = -1;
    for (int id = 0; id < k->ninst; id++)
        if (k->inst[id].op == NX_KOP_REDUCE) {
            if (t->r >= 0)
                return false;
            t->r = id;
        }
    if (t->r < 0)
        return false;
    const nx_kinst *r = &k->inst[t->r];
    t->monoid = r->prim;
    t->lk = k->ndim;
    t->kext = k->extent[t->lk];
    if ((t->monoid != NX_MONOID_SUM && t->monoid != NX_MONOID_MAX && t->monoid != NX_MONOID_MIN &&
         t->monoid != NX_MONOID_LOGSUMEXP) ||
        r->dtype != NX_DTYPE_F32 || k->inst[r->a[0]].dtype != NX_DTYPE_F32)
        return false;
    int nloads = 0;
    if (!closure(k, t, r->a[0], &nloads) || nloads != 2)
        return false;
    for (int s = 0; s < 2; s++) {
        const nx_kinst *ld = &k->inst[t->load[s]];
        t->buf[s] = ld->a[0];
        t->off[s] = &aff[ld->a[1]];
        if (!t->off[s]->ok || !uses(t->off[s], t->lk))
            return false;
    }
    if (!pick_loops(k, t)) { /* perhaps the loads are the other way round */
        int l0 = t->load[0];
        t->load[0] = t->load[1], t->load[1] = l0;
        int b0 = t->buf[0];
        t->buf[0] = t->buf[1], t->buf[1] = b0;
        const nx_ptx_affine *o0 = t->off[0];
        t->off[0] = t->off[1], t->off[1] = o0;
        if (!pick_loops(k, t))
            return false;
    }
    if (!uses(t->off[0], t->li) || !uses(t->off[1], t->lj))
        return false;
    /* Offsets are 32-bit inside the tiled kernel. */
    for (int b = 0; b < k->nbufs; b++)
        if (nx_ir_numel(k->bufs[b].ndim, k->bufs[b].shape) >= INT32_MAX)
            return false;
    /* Many tiny batched products waste most of each 128x128 tile: the plain kernel serves them. */
    if (t->nbat > 1 && t->m * t->n < 4096)
        return false;
    const nx_kinst *f = &k->inst[r->a[0]];
    t->fast_add = f->op == NX_KOP_PRIM && f->prim == NX_PRIM_ADD &&
                  ((f->a[0] == t->load[0] && f->a[1] == t->load[1]) ||
                   (f->a[0] == t->load[1] && f->a[1] == t->load[0]));
    t->boolean = is_boolean(k, t, r->a[0]);
    plan_layout(k, t);
    return true;
}

/* ---- source ---------------------------------------------------------------------------------*/

#define L(...) nx_ptx_line(g, __VA_ARGS__)

static void emit_params(nx_ptx_gen *g)
{
    const nx_kernel *k = g->k;
    for (int b = 0; b < k->nbufs; b++)
        nx_ptx_put(&g->t, "%s%s *__restrict__ b%d, ", k->bufs[b].role == NX_KBUF_IN ? "const " : "",
                   nx_ptx_ctype(k->bufs[b].dtype), b);
}

/* nx_f(x, y): the REDUCE's operand with x, y for the A and B loads. */
static void emit_body_fn(nx_ptx_gen *g, const tile *t)
{
    const nx_kernel *k = g->k;
    nx_ptx_put(&g->t, "static __device__ __forceinline__ float nx_f(float x, float y)\n{\n");
    g->ind = 1;
    if (t->boolean) { /* x and y were staged as [x != 0], [y != 0] */
        L("return x * y;");
        nx_ptx_put(&g->t, "}\n\n");
        return;
    }
    for (int id = 0; id < k->ninst; id++) {
        if (!t->in_closure[id])
            continue;
        if (id == t->load[0] || id == t->load[1])
            L("const float v%d = %s;", id, id == t->load[0] ? "x" : "y");
        else
            nx_ptx_emit_inst(g, id);
    }
    L("return v%d;", k->inst[t->r].a[0]);
    nx_ptx_put(&g->t, "}\n\n");
}

/* nx_epi(buffers, p, r): the point's instructions outside the fold with the fold's value r, and
 * its stores. */
static void emit_epilogue_fn(nx_ptx_gen *g, const tile *t)
{
    const nx_kernel *k = g->k;
    nx_ptx_put(&g->t, "static __device__ __forceinline__ void nx_epi(");
    emit_params(g);
    nx_ptx_put(&g->t, "i64 p, float r)\n{\n");
    g->ind = 1;
    nx_ptx_emit_point_index(g, "p");
    for (int id = 0; id < k->ninst; id++) {
        if (g->scope[id] != -1)
            continue;
        if (id == t->r)
            L("const float v%d = r;", id);
        else
            nx_ptx_emit_inst(g, id);
    }
    for (int s = 0; s < k->nstores; s++)
        L("b%d[p] = v%d;", k->stores[s].buf, k->stores[s].value);
    for (int b = 0; b < k->nbufs; b++)
        L("(void)b%d;", b);
    nx_ptx_put(&g->t, "}\n\n");
}

static void emit_constants(nx_ptx_gen *g, const tile *t)
{
    const nx_ptx_affine *a = t->off[0], *b = t->off[1];
    int64_t nkt = (t->kext + BK - 1) / BK;
    int64_t tiles_m = (t->m + t->bm - 1) / t->bm, tiles_n = (t->n + BN - 1) / BN;
    nx_ptx_put(&g->t,
               "#define NX_M %lld\n#define NX_N %lld\n#define NX_K %lld\n"
               "#define NX_TM %d\n#define NX_TN %d\n#define NX_BM %d\n#define NX_BN %d\n"
               "#define NX_BK %d\n#define NX_LA %d\n#define NX_LB %d\n#define NX_NKT %lld\n"
               "#define NX_KLAST %lld\n#define NX_TILES_M %lld\n#define NX_TILES_N %lld\n"
               "#define NX_TILES %lld\n"
               "#define NX_CAI %lld\n#define NX_CAK %lld\n#define NX_CBK %lld\n"
               "#define NX_CBJ %lld\n#define NX_OSI %lld\n#define NX_OSJ %lld\n\n",
               (long long)t->m, (long long)t->n, (long long)t->kext, t->tm, TN, t->bm, BN, BK,
               t->la, t->lb, (long long)nkt, (long long)(t->kext - (nkt - 1) * BK),
               (long long)tiles_m, (long long)tiles_n, (long long)(tiles_m * tiles_n * t->nbat),
               (long long)a->coef[t->li], (long long)a->coef[t->lk], (long long)b->coef[t->lk],
               (long long)b->coef[t->lj], (long long)t->out_stride[t->li],
               (long long)t->out_stride[t->lj]);
}

static const char tile_helpers[] =
    "static __device__ __forceinline__ float nx_maxnan(float a, float b)\n"
    "{ float d; asm(\"max.NaN.f32 %0, %1, %2;\" : \"=f\"(d) : \"f\"(a), \"f\"(b)); return d; }\n"
    "static __device__ __forceinline__ float nx_minnan(float a, float b)\n"
    "{ float d; asm(\"min.NaN.f32 %0, %1, %2;\" : \"=f\"(d) : \"f\"(a), \"f\"(b)); return d; }\n"
    "static __device__ __forceinline__ float nx_ex2(float x)\n"
    "{ float d; asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(d) : \"f\"(x)); return d; }\n"
    "static __device__ __forceinline__ unsigned nx_negzero(float x)\n"
    "{ return __float_as_uint(x) == 0x80000000u; }\n"
    "/* one copy of the double log for all outputs of a thread: shorter compiles */\n"
    "static __device__ __noinline__ float nx_lse_finish(float m, float s)\n"
    "{ return m != m ? NX_NANF : (isinf(m) ? m : (float)((double)m + log((double)s))); }\n\n";

static const char *vec_type(int w)
{
    return w == 4 ? "float4" : w == 2 ? "float2" : "float";
}

static void emit_lanes(nx_ptx_gen *g, const char *dst, int w, const char *q)
{
    static const char lane[] = "xyzw";
    if (w == 1)
        L("%s[0] = %s;", dst, q);
    for (int i = 0; w > 1 && i < w; i++)
        L("%s[%d] = %s.%c;", dst, i, q, lane[i]);
}

/* The scalar mapping of element e of a slice: (outer, kk) as the layout prefers. */
static void scalar_map(nx_ptx_gen *g, bool kfast, int outer, const char *o)
{
    if (kfast)
        L("const int kk = e %% NX_BK, %s = e / NX_BK;", o);
    else
        L("const int %s = e %% %d, kk = e / %d;", o, outer, outer);
}

/* A's slice as vectors along k from the thread's row (pa), or the same elements one by one when
 * the pointers are not aligned. */
static void gload_a_vec(nx_ptx_gen *g, const tile *t)
{
    L("const int kka = (tid * NX_LA) %% NX_BK;");
    L("const int ka = k0 < NX_K - NX_LA - kka ? k0 : NX_K - NX_LA - kka;");
    L("if (vec) {");
    g->ind++;
    L("const %s q = *(const %s *)(pa + ka);", vec_type(t->la), vec_type(t->la));
    emit_lanes(g, "ra", t->la, "q");
    g->ind--;
    L("} else {");
    L("    for (int w = 0; w < NX_LA; w++) ra[w] = pa[ka + w];");
    L("}");
}

static void gload_b_vec(nx_ptx_gen *g, const tile *t)
{
    L("const int kkb = (tid * NX_LB) / NX_BN;");
    L("const int kb = k0 < NX_K - 1 - kkb ? k0 : NX_K - 1 - kkb;");
    L("if (vec) {");
    g->ind++;
    L("const %s q = *(const %s *)(pb + kb * NX_CBK);", vec_type(t->lb), vec_type(t->lb));
    emit_lanes(g, "rb", t->lb, "q");
    g->ind--;
    L("} else {");
    L("    for (int w = 0; w < NX_LB; w++) rb[w] = pb[kb * NX_CBK + w];");
    L("}");
}

/* Element e of a slice through any strides, the operand's contiguous axis first. */
static void gload_any(nx_ptx_gen *g, const tile *t, bool a)
{
    L("#pragma unroll");
    L("for (int l = 0; l < NX_L%c; l++) {", a ? 'A' : 'B');
    g->ind++;
    L("const int e = tid + %d * l;", THREADS);
    if (a) {
        scalar_map(g, t->kfast_a, t->bm, "m");
        L("const int row = m0 + m < NX_M ? m0 + m : NX_M - 1;");
        L("const int k = k0 + kk < NX_K ? k0 + kk : NX_K - 1;");
        L("ra[l] = A[offA + row * NX_CAI + k * NX_CAK];");
    } else {
        if (t->nfast_b)
            L("const int n = e %% NX_BN, kk = e / NX_BN;");
        else
            L("const int kk = e %% NX_BK, n = e / NX_BK;");
        L("const int col = n0 + n < NX_N ? n0 + n : NX_N - 1;");
        L("const int k = k0 + kk < NX_K ? k0 + kk : NX_K - 1;");
        L("rb[l] = B[offB + k * NX_CBK + col * NX_CBJ];");
    }
    g->ind--;
    L("}");
}

/* nx_gload: this thread's part of slice k0 of A and B into registers. Rows and columns past the
 * edge are clamped into range (their results are never stored), and so is k past K (the fold
 * stops at K). */
static void emit_gload(nx_ptx_gen *g, const tile *t)
{
    nx_ptx_put(&g->t, "static __device__ __forceinline__ void nx_gload(bool vec, "
                      "const float *__restrict__ A, const float *__restrict__ B, "
                      "const float *pa, const float *pb, int offA, int offB, int m0, int n0, "
                      "int k0, float (&ra)[NX_LA], float (&rb)[NX_LB])\n{\n");
    g->ind = 1;
    L("const int tid = threadIdx.x;");
    L("(void)vec, (void)A, (void)B, (void)pa, (void)pb, (void)offA, (void)offB, (void)m0, "
      "(void)n0;");
    if (t->va)
        gload_a_vec(g, t);
    else
        gload_any(g, t, true);
    if (t->vb)
        gload_b_vec(g, t);
    else
        gload_any(g, t, false);
    nx_ptx_put(&g->t, "}\n\n");
}

/* nx_sstore: the registers of nx_gload into one shared buffer, A transposed (k-major). */
static void emit_sstore(nx_ptx_gen *g, const tile *t)
{
    nx_ptx_put(&g->t, "#define NX_STAGE(x) %s\n",
               t->boolean ? "((x) != 0.0f ? 1.0f : 0.0f)" : "(x)");
    nx_ptx_put(&g->t, "static __device__ __forceinline__ void nx_sstore("
                      "float (*As)[NX_BM + 4], float (*Bs)[NX_BN], const float (&ra)[NX_LA], "
                      "const float (&rb)[NX_LB])\n{\n");
    g->ind = 1;
    L("const int tid = threadIdx.x;");
    L("#pragma unroll");
    L("for (int l = 0; l < NX_LA; l++) {");
    g->ind++;
    if (t->va) {
        L("const int e = tid * NX_LA + l, kk = e %% NX_BK, m = e / NX_BK;");
    } else {
        L("const int e = tid + %d * l;", THREADS);
        scalar_map(g, t->kfast_a, t->bm, "m");
    }
    L("As[kk][m] = NX_STAGE(ra[l]);");
    g->ind--;
    L("}");
    if (t->vb) {
        L("const int e = tid * NX_LB, n = e %% NX_BN, kk = e / NX_BN;");
        L("*(float4 *)&Bs[kk][n] = make_float4(NX_STAGE(rb[0]), NX_STAGE(rb[1]), NX_STAGE(rb[2]), "
          "NX_STAGE(rb[3]));");
    } else {
        L("#pragma unroll");
        L("for (int l = 0; l < NX_LB; l++) {");
        g->ind++;
        L("const int e = tid + %d * l;", THREADS);
        if (t->nfast_b)
            L("const int n = e %% NX_BN, kk = e / NX_BN;");
        else
            L("const int kk = e %% NX_BK, n = e / NX_BK;");
        L("Bs[kk][n] = NX_STAGE(rb[l]);");
        g->ind--;
        L("}");
    }
    nx_ptx_put(&g->t, "}\n\n");
}

/* One fold step of output (r, c) with term v; exact: the compare-and-select step for MAX/MIN. */
static void emit_step(nx_ptx_gen *g, const tile *t, bool exact)
{
    switch (t->monoid) {
    case NX_MONOID_SUM:
        L("acc[r][c] += v;");
        break;
    case NX_MONOID_MAX:
    case NX_MONOID_MIN: {
        const char *op = t->monoid == NX_MONOID_MAX ? ">" : "<";
        if (exact)
            L("acc[r][c] = (v %s acc[r][c] || v != v) ? v : acc[r][c];", op);
        else
            L("acc[r][c] = %s(acc[r][c], v);",
              t->monoid == NX_MONOID_MAX ? "nx_maxnan" : "nx_minnan");
        break;
    }
    default: /* LOGSUMEXP: acc = m, sum = s */
        L("const float d = v - acc[r][c];");
        L("const float e = nx_ex2(-fabsf(d) * 1.44269504088896341f);");
        L("sum[r][c] = d > 0.0f ? fmaf(sum[r][c], e, 1.0f) : sum[r][c] + e;");
        L("acc[r][c] = nx_maxnan(acc[r][c], v);");
        break;
    }
}

static void emit_slice(nx_ptx_gen *g, const tile *t, bool exact, bool rerun)
{
    /* The rerun is rare (-0.0 in both operands): not unrolling its k steps keeps compiles short. */
    L("#pragma unroll %s", rerun ? "1" : "");
    L("for (int kk = 0; kk < NX_BK; kk++) {");
    g->ind++;
    if (t->kext % BK)
        L("if (kt == NX_NKT - 1 && kk >= NX_KLAST) break;");
    L("float a[NX_TM], b[NX_TN];");
    L("#pragma unroll");
    L("for (int h = 0; h < NX_TM / 4; h++) {");
    L("    const float4 q = *(const float4 *)&As[cur][kk][h * 64 + ty * 4];");
    L("    a[4 * h] = q.x, a[4 * h + 1] = q.y, a[4 * h + 2] = q.z, a[4 * h + 3] = q.w;");
    L("}");
    L("#pragma unroll");
    L("for (int h = 0; h < NX_TN / 4; h++) {");
    L("    const float4 q = *(const float4 *)&Bs[cur][kk][h * 64 + tx * 4];");
    L("    b[4 * h] = q.x, b[4 * h + 1] = q.y, b[4 * h + 2] = q.z, b[4 * h + 3] = q.w;");
    L("}");
    L("#pragma unroll");
    L("for (int r = 0; r < NX_TM; r++) {");
    g->ind++;
    L("#pragma unroll");
    L("for (int c = 0; c < NX_TN; c++) {");
    g->ind++;
    L("const float v = nx_f(a[r], b[c]);");
    emit_step(g, t, exact);
    g->ind--;
    L("}");
    g->ind--;
    L("}");
    g->ind--;
    L("}");
}

/* nx_main_<fn>: the whole K loop for one tile. */
static void emit_main(nx_ptx_gen *g, const tile *t, const char *fn, bool exact, bool rerun)
{
    nx_ptx_put(&g->t,
               "static __device__ __forceinline__ void nx_main_%s(bool vec, "
               "const float *__restrict__ A, const float *__restrict__ B, int offA, "
               "int offB, int m0, int n0, float (&acc)[NX_TM][NX_TN], "
               "float (&sum)[NX_TM][NX_TN], float (*As)[NX_BK][NX_BM + 4], "
               "float (*Bs)[NX_BK][NX_BN])\n{\n",
               fn);
    g->ind = 1;
    L("const int tx = threadIdx.x %% 16, ty = threadIdx.x / 16;");
    L("float ra[NX_LA], rb[NX_LB];");
    L("(void)sum;");
    L("const int ea = threadIdx.x * NX_LA, eb = threadIdx.x * NX_LB;");
    L("const int rowa = m0 + ea / NX_BK < NX_M ? m0 + ea / NX_BK : NX_M - 1;");
    L("const int colb = n0 + eb %% NX_BN < NX_N ? n0 + eb %% NX_BN : NX_N - NX_LB;");
    L("const float *pa = A + offA + rowa * NX_CAI + ea %% NX_BK;");
    L("const float *pb = B + offB + (eb / NX_BN) * NX_CBK + colb;");
    L("nx_gload(vec, A, B, pa, pb, offA, offB, m0, n0, 0, ra, rb);");
    L("nx_sstore(As[0], Bs[0], ra, rb);");
    L("__syncthreads();");
    /* Two slices per trip make the shared buffers' addresses constants: measured faster for SUM
     * and MAX/MIN but slower for LOGSUMEXP, which keeps one (docs/perf/cuda.md, "Choices
     * measured"). */
    if (t->monoid != NX_MONOID_LOGSUMEXP && !rerun)
        L("#pragma unroll 2");
    L("for (int kt = 0; kt < NX_NKT; kt++) {");
    g->ind++;
    L("const int cur = kt & 1;");
    L("if (kt + 1 < NX_NKT) nx_gload(vec, A, B, pa, pb, offA, offB, m0, n0, (kt + 1) * NX_BK, "
      "ra, rb);");
    emit_slice(g, t, exact, rerun);
    L("if (kt + 1 < NX_NKT) nx_sstore(As[cur ^ 1], Bs[cur ^ 1], ra, rb);");
    L("__syncthreads();");
    g->ind--;
    L("}");
    nx_ptx_put(&g->t, "}\n\n");
}

/* nx_zero_panels: whether the tile's rows of A and columns of B, all of k, hold -0.0 (both must,
 * for a term x + y to be -0.0). Run only when the max.NaN fold gave a zero that the canonical
 * order might sign differently. */
static void emit_zero_scan(nx_ptx_gen *g, const tile *t)
{
    nx_ptx_put(&g->t, "static __device__ __noinline__ int nx_zero_panels("
                      "const float *__restrict__ A, const float *__restrict__ B, int offA, "
                      "int offB, int m0, int n0)\n{\n");
    g->ind = 1;
    L("unsigned za = 0, zb = 0;");
    L("for (int e = threadIdx.x; e < NX_BM * NX_K; e += %d) {", THREADS);
    g->ind++;
    if (t->kfast_a)
        L("const int m = e / NX_K, k = e %% NX_K;");
    else
        L("const int m = e %% NX_BM, k = e / NX_BM;");
    L("const int row = m0 + m < NX_M ? m0 + m : NX_M - 1;");
    L("za |= nx_negzero(A[offA + row * NX_CAI + k * NX_CAK]);");
    g->ind--;
    L("}");
    L("for (int e = threadIdx.x; e < NX_BN * NX_K; e += %d) {", THREADS);
    g->ind++;
    if (t->nfast_b)
        L("const int n = e %% NX_BN, k = e / NX_BN;");
    else
        L("const int n = e / NX_K, k = e %% NX_K;");
    L("const int col = n0 + n < NX_N ? n0 + n : NX_N - 1;");
    L("zb |= nx_negzero(B[offB + k * NX_CBK + col * NX_CBJ]);");
    g->ind--;
    L("}");
    L("const int a = __syncthreads_or(za), b = __syncthreads_or(zb);");
    L("return a && b;");
    nx_ptx_put(&g->t, "}\n\n");
}

static const char *identity(int monoid)
{
    switch (monoid) {
    case NX_MONOID_SUM:
        return "0.0f";
    case NX_MONOID_MAX:
        return "-NX_INFF";
    case NX_MONOID_MIN:
        return "NX_INFF";
    default:
        return "-3.40282346638528859812e+38f"; /* LOGSUMEXP's m: -FLT_MAX, see the file comment */
    }
}

static void emit_init(nx_ptx_gen *g, const tile *t)
{
    L("#pragma unroll");
    L("for (int r = 0; r < NX_TM; r++) {");
    L("    #pragma unroll");
    L("    for (int c = 0; c < NX_TN; c++) acc[r][c] = %s, sum[r][c] = 0.0f;", identity(t->monoid));
    L("}");
}

static void emit_run(nx_ptx_gen *g, const char *fn)
{
    L("nx_main_%s(vec, A, B, offA, offB, m0, n0, acc, sum, As, Bs);", fn);
}

static void emit_finish(nx_ptx_gen *g, const tile *t)
{
    if (t->monoid == NX_MONOID_SUM)
        L("const float res = acc[r][c];");
    else if (t->monoid == NX_MONOID_LOGSUMEXP)
        L("const float res = nx_lse_finish(acc[r][c], sum[r][c]);");
    else
        L("const float res = acc[r][c] != acc[r][c] ? NX_NANF : acc[r][c];");
}

/* Tile t of the grid: batch, then groups of 8 row tiles walked column by column (rows of A
 * stay in L2 while the group sweeps B). */
static void emit_tile_index(nx_ptx_gen *g, const tile *t)
{
    L("const int tpb = NX_TILES_M * NX_TILES_N, bt = (int)t / tpb, w = (int)t %% tpb;");
    L("const int grp = w / (8 * NX_TILES_N), first = grp * 8;");
    L("const int gsz = NX_TILES_M - first < 8 ? NX_TILES_M - first : 8;");
    L("const int m0 = (first + (w %% (8 * NX_TILES_N)) %% gsz) * NX_BM;");
    L("const int n0 = ((w %% (8 * NX_TILES_N)) / gsz) * NX_BN;");
    L("int offA = %lld, offB = %lld, pb = 0, rem = bt;", (long long)t->off[0]->c,
      (long long)t->off[1]->c);
    for (int b = t->nbatch - 1; b >= 0; b--) {
        int l = t->batch[b];
        L("{ const int il = rem %% %lld; rem /= %lld; offA += il * %lld; "
          "offB += il * %lld; pb += il * %lld; }",
          (long long)g->k->extent[l], (long long)g->k->extent[l], (long long)t->off[0]->coef[l],
          (long long)t->off[1]->coef[l], (long long)t->out_stride[l]);
    }
    L("(void)rem;");
}

/* MAX/MIN of x + y: the max.NaN fold, and the exact fold again when -0.0 met -0.0. */
static bool two_pass(const tile *t)
{
    return t->fast_add && (t->monoid == NX_MONOID_MAX || t->monoid == NX_MONOID_MIN);
}

static void emit_kernel(nx_ptx_gen *g, const tile *t, const char *name)
{
    /* Two blocks per SM (at most 128 registers a thread): one block with all the registers it
     * wants measured slower for max-plus and sum (docs/perf/cuda.md, "Choices measured"). */
    nx_ptx_put(&g->t, "extern \"C\" __global__ void __launch_bounds__(%d, 2)\n%s(", THREADS, name);
    emit_params(g);
    nx_ptx_put(&g->t, "i64 points)\n{\n");
    g->ind = 1;
    L("__shared__ __align__(16) float As[2][NX_BK][NX_BM + 4];");
    L("__shared__ __align__(16) float Bs[2][NX_BK][NX_BN];");
    L("(void)points;");
    L("const float *__restrict__ A = b%d;", t->buf[0]);
    L("const float *__restrict__ B = b%d;", t->buf[1]);
    L("const bool vec = ((unsigned long long)A %% %d == 0 || !%d) && "
      "((unsigned long long)B %% %d == 0 || !%d);",
      4 * t->la, t->va, 4 * t->lb, t->vb);
    L("(void)vec;");
    L("const int tx = threadIdx.x %% 16, ty = threadIdx.x / 16;");
    L("for (i64 t = blockIdx.x; t < NX_TILES; t += gridDim.x) {");
    g->ind++;
    emit_tile_index(g, t);
    L("float acc[NX_TM][NX_TN], sum[NX_TM][NX_TN];");
    emit_init(g, t);
    emit_run(g, "fold");
    if (two_pass(t)) {
        /* max.NaN orders -0 < +0: only a zero result of that sign can differ from the canonical
         * first-of-equals, and only when -0.0 + -0.0 occurred. */
        L("unsigned zr = 0;");
        L("#pragma unroll");
        L("for (int r = 0; r < NX_TM; r++) {");
        L("    #pragma unroll");
        L("    for (int c = 0; c < NX_TN; c++) zr |= __float_as_uint(acc[r][c]) == %s;",
          t->monoid == NX_MONOID_MAX ? "0u" : "0x80000000u");
        L("}");
        L("if (__syncthreads_or(zr) && nx_zero_panels(A, B, offA, offB, m0, n0)) {");
        g->ind++;
        emit_init(g, t);
        emit_run(g, "exact");
        g->ind--;
        L("}");
    }
    L("#pragma unroll");
    L("for (int r = 0; r < NX_TM; r++) {");
    g->ind++;
    L("#pragma unroll");
    L("for (int c = 0; c < NX_TN; c++) {");
    g->ind++;
    L("const int row = m0 + (r / 4) * 64 + ty * 4 + r %% 4;");
    L("const int col = n0 + (c / 4) * 64 + tx * 4 + c %% 4;");
    L("if (row >= NX_M || col >= NX_N) continue;");
    emit_finish(g, t);
    char args[NX_KERNEL_MAX_BUFFERS * 6 + 1] = "";
    for (int b = 0; b < g->k->nbufs; b++)
        snprintf(args + strlen(args), sizeof args - strlen(args), "b%d, ", b);
    L("nx_epi(%s(i64)pb + (i64)row * NX_OSI + (i64)col * NX_OSJ, res);", args);
    g->ind--;
    L("}");
    g->ind--;
    L("}");
    g->ind--;
    L("}");
    nx_ptx_put(&g->t, "}\n");
}

bool nx_ptx_emit_tile(nx_ptx_gen *g, const nx_ptx_affine *aff, const char *name,
                      nx_ptx_launch *launch)
{
    const nx_kernel *k = g->k;
    tile t = {0};
    t.in_closure = nx_rt_calloc(k->ctx, (size_t)k->ninst, 1);
    if (!t.in_closure) {
        g->t.failed = true; /* reported as out of memory by the caller */
        return true;
    }
    bool ok = match(k, aff, &t);
    if (ok) {
        emit_constants(g, &t);
        nx_ptx_put(&g->t, "%s", tile_helpers);
        emit_body_fn(g, &t);
        emit_epilogue_fn(g, &t);
        emit_gload(g, &t);
        emit_sstore(g, &t);
        bool minmax = t.monoid == NX_MONOID_MAX || t.monoid == NX_MONOID_MIN;
        emit_main(g, &t, "fold", minmax && !t.fast_add && !t.boolean, false);
        if (two_pass(&t)) {
            emit_zero_scan(g, &t);
            emit_main(g, &t, "exact", true, true);
        }
        emit_kernel(g, &t, name);
        int64_t tiles = ((t.m + t.bm - 1) / t.bm) * ((t.n + BN - 1) / BN) * t.nbat;
        int64_t blocks = tiles < (1 << 24) ? tiles : (1 << 24);
        launch->shape = NX_PTX_POINTS;
        launch->points = blocks * THREADS;
        launch->fold_len = 0;
        g->blocks = 1;
        g->block_r = -1;
    }
    nx_rt_free(k->ctx, t.in_closure, (size_t)k->ninst);
    return ok;
}
