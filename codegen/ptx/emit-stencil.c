/* Window MIN/MAX stencils through shared-memory tiles (docs/cuda.md "Window stencils").
 *
 * The kernel: a 3-D POINTS kernel with a box split whose one stored value is, inside the box, a
 * float MAX (or MIN) network of compare-selects over loads of one buffer B at the point plus a
 * constant offset (grey dilation and erosion by a flat box: the separable passes fused into one
 * tree of 27 taps for 3^3). The general form evaluates the tree per point: 27 loads, 26
 * compare-selects and 27 NaN tests, about 150 instructions, whose issue time is above the HBM time.
 *
 * Exactness. A node v = b > a ? b : a (MIN: <) keeps its left operand on ties, so without NaN a
 * tree of them yields the first leaf, in the tree's left-to-right leaf order, whose value is the
 * maximum (by induction: each subtree yields its first maximal leaf, the node the left one unless
 * the right one is strictly larger). With a NaN leaf the network is NaN (nx_fmaxf at every node).
 * "The first maximal leaf" of a sequence is the first maximal of the first maximal leaves of any
 * split of the sequence into consecutive runs. When the leaf order is a product D0 x D1 x D2 of
 * per-axis offset lists, taken lexicographically (axis 0 slowest), the runs of equal d0 are
 * consecutive: out(p) = first-max over d0 in D0 of P(p0 + d0), where the plane partial
 * P(z) = first-max over (d1, d2) in D1 x D2, in that order, of B[z, p1 + d1, p2 + d2]. Each
 * partial is shared by |D0| outputs along axis 0. NaN: a partial is NaN when one of its leaves
 * is (a max.NaN chain), and the output NaN when one of its partials is; the value chains are the
 * bare compare-selects. So the results are bit-identical to the tree, signed zeros included.
 *
 * The generated kernel: blocks 0 .. NT-1 each take a tile of TX x TY points (axes 2 and 1) of
 * the box and march along axis 0 over TZ outputs. Per plane of B the block stages the tile plus
 * its halo in shared memory (double-buffered, one barrier a plane; the next plane's global loads
 * are issued before the current plane's partials are computed) through the same linear index the
 * kernel's load computes (plane * S0 + row * S1 + column, B's C strides), so each staged value is
 * exactly the one the tree's leaf reads. Each thread keeps the last |D0| partials in registers
 * (the plane loop is unrolled in the text, so the window is renamed, not moved). The remaining
 * blocks run the shell outside the box point by point as the general form does. */
#include <stdlib.h>
#include <string.h>

#include "codegen/ptx/emit-tile.h"

#define line nx_ptx_line

enum {
    ST_TX = 32, /* tile width along axis 2: one warp */
    ST_WARPS = NX_PTX_THREADS / ST_TX,
    ST_RY = 1,       /* rows a thread computes along axis 1 (NITRIX_PTX_STENCIL_RY) */
    ST_TZ = 16,      /* outputs a thread computes along axis 0 (NITRIX_PTX_STENCIL_TZ) */
    ST_DEPTH = 3,    /* planes its loads run ahead (NITRIX_PTX_STENCIL_DEPTH) */
    ST_SPAN = 9,     /* largest offset range per axis (hi - lo + 1) */
    ST_LEAVES = 729, /* ST_SPAN^3 */
};

typedef struct stencil {
    int buf;                /* B */
    bool max;               /* MAX network, else MIN */
    int n[3];               /* offsets per axis, in fold order */
    int d[3][ST_SPAN];      /* the offsets (d[a][j] - lo[a] < ST_SPAN) */
    int lo[3], hi[3];       /* least and greatest offset per axis */
    int64_t stride[3];      /* B's C strides */
    int64_t numel;          /* B's elements */
} stencil;

/* The instruction an instruction stands for in the box: TO aliases followed (for floats they
 * carry no offset: a select with a constant condition), -1 for a constant. */
static int resolve(const nx_kalias *al, int id)
{
    while (al[id].kind == NX_KALIAS_TO && al[id].c == 0)
        id = al[id].to;
    return al[id].kind == NX_KALIAS_SELF ? id : -1;
}

static bool affine_add(nx_ptx_affine *r, const nx_ptx_affine *a, const nx_ptx_affine *b, int64_t s)
{
    r->ok = a->ok && b->ok && !__builtin_mul_overflow(b->c, s, &r->c) &&
            !__builtin_add_overflow(a->c, r->c, &r->c);
    for (int l = 0; r->ok && l < NX_KERNEL_MAX_LOOPS; l++) {
        int64_t t;
        r->ok = !__builtin_mul_overflow(b->coef[l], s, &t) &&
                !__builtin_add_overflow(a->coef[l], t, &r->coef[l]);
    }
    return r->ok;
}

static bool affine_scale(nx_ptx_affine *r, const nx_ptx_affine *a, int64_t s)
{
    nx_ptx_affine zero = {.ok = true};
    return affine_add(r, &zero, a, s);
}

/* aff[id]: the i64 instruction's value inside the box as an affine function of the space loops
 * (the aliases followed); operands and alias targets are earlier instructions. */
static void affine_box(const nx_kernel *k, const nx_kalias *al, nx_ptx_affine *aff)
{
    for (int id = 0; id < k->ninst; id++) {
        const nx_kinst *in = &k->inst[id];
        nx_ptx_affine *r = &aff[id];
        memset(r, 0, sizeof *r);
        if (in->dtype != NX_DTYPE_I64)
            continue;
        if (al[id].kind == NX_KALIAS_CONST) {
            *r = (nx_ptx_affine){.ok = true, .c = al[id].c};
        } else if (al[id].kind == NX_KALIAS_TO) {
            nx_ptx_affine c = {.ok = true, .c = al[id].c};
            affine_add(r, &aff[al[id].to], &c, 1);
        } else if (in->op == NX_KOP_CONST) {
            *r = (nx_ptx_affine){.ok = true, .c = in->i};
        } else if (in->op == NX_KOP_IDX && in->a[0] < k->ndim) {
            r->ok = true;
            r->coef[in->a[0]] = 1;
        } else if (in->op == NX_KOP_PRIM) {
            const nx_ptx_affine *a = &aff[in->a[0]], *b = &aff[in->a[1]];
            bool ca = a->ok, cb = b->ok; /* constants: every coefficient 0 */
            for (int l = 0; l < NX_KERNEL_MAX_LOOPS; l++)
                ca = ca && !a->coef[l], cb = cb && !b->coef[l];
            if (in->prim == NX_PRIM_ADD || in->prim == NX_PRIM_SUB)
                affine_add(r, a, b, in->prim == NX_PRIM_ADD ? 1 : -1);
            else if (in->prim == NX_PRIM_NEG)
                affine_scale(r, a, -1);
            else if (in->prim == NX_PRIM_MUL && cb)
                affine_scale(r, a, b->c);
            else if (in->prim == NX_PRIM_MUL && ca)
                affine_scale(r, b, a->c);
        }
    }
}

/* The leaves of the network rooted at root, left to right (operand 0's subtree first), as the
 * loads' index instructions; false when a leaf is not a load of one f32 IN buffer or there are
 * too many. */
static bool leaves(const nx_kernel *k, const nx_kalias *al, int root, int prim, int *leaf,
                   int *nleaf, int *buf, int *stack)
{
    int top = 0;
    *nleaf = 0;
    *buf = -1;
    stack[top++] = root;
    while (top > 0) {
        int id = resolve(al, stack[--top]);
        if (id < 0)
            return false;
        const nx_kinst *in = &k->inst[id];
        if (in->op == NX_KOP_PRIM && in->prim == prim && in->dtype == NX_DTYPE_F32) {
            if (top + 2 > 2 * ST_LEAVES)
                return false;
            stack[top++] = in->a[1];
            stack[top++] = in->a[0];
            continue;
        }
        if (in->op != NX_KOP_LOAD || in->dtype != NX_DTYPE_F32 || *nleaf == ST_LEAVES ||
            (*buf >= 0 && in->a[0] != *buf))
            return false;
        *buf = in->a[0];
        leaf[(*nleaf)++] = in->a[1];
    }
    return k->bufs[*buf].role == NX_KBUF_IN && k->bufs[*buf].ndim == 3;
}

static int64_t round_div(int64_t a, int64_t b)
{
    int64_t q = a / b, r = a % b;
    if (2 * r > b)
        q++;
    else if (2 * r < -b)
        q--;
    return q;
}

/* Each leaf's offset vector e (c = e . stride exactly) and the product structure of their order. */
static bool offsets(const nx_ptx_affine *aff, const int *leaf, int nleaf, stencil *st)
{
    int64_t e[ST_LEAVES][3];
    for (int j = 0; j < nleaf; j++) {
        const nx_ptx_affine *a = &aff[leaf[j]];
        if (!a->ok)
            return false;
        for (int l = 0; l < NX_KERNEL_MAX_LOOPS; l++)
            if (a->coef[l] != (l < 3 ? st->stride[l] : 0))
                return false;
        int64_t c = a->c;
        for (int l = 0; l < 3; l++) {
            e[j][l] = l < 2 ? round_div(c, st->stride[l]) : c;
            c -= e[j][l] * st->stride[l];
            if (e[j][l] < -ST_SPAN || e[j][l] > ST_SPAN)
                return false;
        }
    }
    int n2 = 1, n12 = 1;
    while (n2 < nleaf && e[n2][0] == e[0][0] && e[n2][1] == e[0][1])
        n2++;
    while (n12 < nleaf && e[n12][0] == e[0][0])
        n12++;
    if (n12 % n2 || nleaf % n12)
        return false;
    st->n[0] = nleaf / n12, st->n[1] = n12 / n2, st->n[2] = n2;
    for (int a = 0; a < 3; a++) {
        if (st->n[a] > ST_SPAN)
            return false;
        int step = a == 0 ? n12 : a == 1 ? n2 : 1;
        st->lo[a] = st->hi[a] = (int)e[0][a];
        for (int j = 0; j < st->n[a]; j++) {
            st->d[a][j] = (int)e[j * step][a];
            st->lo[a] = st->d[a][j] < st->lo[a] ? st->d[a][j] : st->lo[a];
            st->hi[a] = st->d[a][j] > st->hi[a] ? st->d[a][j] : st->hi[a];
        }
        if (st->hi[a] - st->lo[a] >= ST_SPAN)
            return false;
    }
    for (int j = 0; j < nleaf; j++)
        if (e[j][0] != st->d[0][j / n12] || e[j][1] != st->d[1][j % n12 / n2] ||
            e[j][2] != st->d[2][j % n2])
            return false;
    return true;
}

/* Whether the box value of k is a stencil; fills st. */
static bool analyse(nx_ptx_gen *g, const nx_ptx_box_plan *bp, stencil *st)
{
    const nx_kernel *k = g->k;
    const nx_kalias *al = bp->b->alias;
    if (k->ndim != 3 || k->nloops != 3 || k->nstores != 1)
        return false;
    int root = resolve(al, k->stores[0].value);
    if (root < 0 || k->inst[root].op != NX_KOP_PRIM || k->inst[root].dtype != NX_DTYPE_F32 ||
        (k->inst[root].prim != NX_PRIM_MAX && k->inst[root].prim != NX_PRIM_MIN))
        return false;
    nx_ctx *ctx = k->ctx;
    size_t n = (size_t)k->ninst;
    nx_ptx_affine *aff = nx_rt_alloc(ctx, n * sizeof *aff);
    int *leaf = nx_rt_alloc(ctx, ST_LEAVES * sizeof *leaf);
    int *stack = nx_rt_alloc(ctx, 2 * ST_LEAVES * sizeof *stack);
    bool ok = false;
    if (!aff || !leaf || !stack) {
        g->t.failed = true;
    } else {
        int nleaf = 0;
        st->max = k->inst[root].prim == NX_PRIM_MAX;
        if (leaves(k, al, root, k->inst[root].prim, leaf, &nleaf, &st->buf, stack)) {
            const nx_kbuf *b = &k->bufs[st->buf];
            st->stride[2] = 1;
            st->stride[1] = b->shape[2];
            st->stride[0] = b->shape[1] * b->shape[2];
            st->numel = b->shape[0] * st->stride[0];
            affine_box(k, al, aff);
            ok = st->numel > 0 && offsets(aff, leaf, nleaf, st);
        }
    }
    nx_rt_free(ctx, aff, n * sizeof *aff);
    nx_rt_free(ctx, leaf, ST_LEAVES * sizeof *leaf);
    nx_rt_free(ctx, stack, 2 * ST_LEAVES * sizeof *stack);
    return ok;
}

/* ---- emission ------------------------------------------------------------------------------*/

typedef struct tile {
    int64_t nb[3];  /* tiles per axis */
    int64_t nt;     /* tile blocks (after the shell's) */
    int sw, sh;     /* the staged plane: sh rows of sw values */
    int rounds;     /* staging loads per thread and plane */
    int64_t ns;     /* shell blocks (the first ones) */
    int tz;         /* outputs per thread along axis 0 */
    int ry, ty;     /* rows per thread along axis 1, rows per tile (ry * 8) */
    int depth;      /* planes the global loads run ahead */
    int np;         /* planes per tile: tz + the axis-0 span - 1 */
    bool wide;      /* staging indices in 64 bits */
} tile;

/* Loads of plane j (B plane z0 + lo0 + j) into registers s<j>_<r>. The index is clamped to B:
 * a staged value off B (past the box's reach, or a surplus slot) is never read by an output. */
static void emit_stage_load(nx_ptx_gen *g, const stencil *st, const tile *tl, int j)
{
    const char *it = tl->wide ? "i64" : "int";
    for (int r = 0; r < tl->rounds; r++)
        line(g, "const float s%d_%d = b%d[min(max((%s)(z0 + %d) * %lld + o%d, (%s)0), (%s)%lld)];",
             j, r, st->buf, it, st->lo[0] + j, (long long)st->stride[0], r, it, it,
             (long long)(st->numel - 1));
}

static void emit_stage_store(nx_ptx_gen *g, const tile *tl, int j)
{
    for (int r = 0; r < tl->rounds; r++)
        line(g, "sm[%d][threadIdx.x + %d] = s%d_%d;", j & 1, r * NX_PTX_THREADS, j, r);
}

/* Plane j's partials p<j>_<r> (the thread's rows y + r, r < ry) over D1 x D2 from the staged
 * plane. Fast path: max.NaN (min.NaN) chains, sharing the row maxima of D2 between the rows: the
 * value of the first winner and NaN when a leaf is, except that a zero result does not tell which
 * zero came first. Then the compare-select chain over D1 x D2 in order (keeping the first of
 * equal values) decides. */
static void emit_partial(nx_ptx_gen *g, const stencil *st, const tile *tl, int j)
{
    const char *sel = st->max ? "nx_gtselectf" : "nx_ltselectf";
    const char *fn = st->max ? "nx_maxnanf" : "nx_minnanf";
    int span1 = st->hi[1] - st->lo[1] + 1, nrow = span1 + tl->ry - 1;
    line(g, "const float *sp%d = &sm[%d][ty * %d + tx];", j, j & 1, tl->ry * tl->sw);
    for (int row = 0; row < nrow; row++) { /* row maxima over D2 (unused ones are dropped) */
        line(g, "float q%d_%d = sp%d[%d];", j, row, j, row * tl->sw + st->d[2][0] - st->lo[2]);
        for (int b = 1; b < st->n[2]; b++)
            line(g, "q%d_%d = %s(q%d_%d, sp%d[%d]);", j, row, fn, j, row, j,
                 row * tl->sw + st->d[2][b] - st->lo[2]);
    }
    for (int r = 0; r < tl->ry; r++) {
        line(g, "float p%d_%d = q%d_%d;", j, r, j, r + st->d[1][0] - st->lo[1]);
        for (int a = 1; a < st->n[1]; a++)
            line(g, "p%d_%d = %s(p%d_%d, q%d_%d);", j, r, fn, j, r, j,
                 r + st->d[1][a] - st->lo[1]);
        line(g, "if (p%d_%d == 0.0f) {", j, r);
        g->ind++;
        bool first = true;
        for (int a = 0; a < st->n[1]; a++)
            for (int b = 0; b < st->n[2]; b++) {
                int off = (r + st->d[1][a] - st->lo[1]) * tl->sw + st->d[2][b] - st->lo[2];
                if (first)
                    line(g, "p%d_%d = sp%d[%d];", j, r, j, off);
                else
                    line(g, "p%d_%d = %s(sp%d[%d], p%d_%d);", j, r, sel, j, off, j, r);
                first = false;
            }
        g->ind--;
        line(g, "}");
    }
}

/* The tile block's coordinates and staging offsets (staged element e = threadIdx.x + 256 r: row
 * e / sw, column e % sw of the plane tile). */
static void emit_tile_setup(nx_ptx_gen *g, const nx_ptx_box_plan *bp, const stencil *st,
                            const tile *tl)
{
    const int64_t *lo = bp->b->lo, *w = bp->w;
    const char *it = tl->wide ? "i64" : "int";
    line(g, "__shared__ float sm[2][%d];", tl->rounds * NX_PTX_THREADS);
    line(g, "const int tx = (int)threadIdx.x %% %d, ty = (int)threadIdx.x / %d;", ST_TX, ST_TX);
    line(g, "unsigned bt = blockIdx.x - %lldU;", (long long)tl->ns);
    line(g, "const int x0 = %lld + (int)(bt %% %lldU) * %d;", (long long)lo[2],
         (long long)tl->nb[2], ST_TX);
    line(g, "bt /= %lldU;", (long long)tl->nb[2]);
    line(g, "const int y0 = %lld + (int)(bt %% %lldU) * %d;", (long long)lo[1],
         (long long)tl->nb[1], tl->ty);
    line(g, "const int z0 = %lld + (int)(bt / %lldU) * %d;", (long long)lo[0],
         (long long)tl->nb[1], tl->tz);
    line(g, "const int x = x0 + tx, y = y0 + ty * %d;", tl->ry);
    for (int r = 0; r < tl->ry; r++)
        line(g, "const bool act%d = x < %lld && y + %d < %lld;", r, (long long)(lo[2] + w[2]), r,
             (long long)(lo[1] + w[1]));
    for (int r = 0; r < tl->rounds; r++) {
        line(g, "const int e%d = (int)threadIdx.x + %d;", r, r * NX_PTX_THREADS);
        line(g, "const %s o%d = (%s)(y0 + %d + e%d / %d) * %lld + (x0 + %d + e%d %% %d);", it, r,
             it, st->lo[1], r, tl->sw, (long long)st->stride[1], st->lo[2], r, tl->sw);
    }
}

/* Output plane z0 + base, row y + r, from the partials of its window: the same two paths over
 * D0 (the fast chain, the compare-select chain in D0's order for a zero). */
static void emit_output(nx_ptx_gen *g, const nx_ptx_box_plan *bp, const stencil *st, int base,
                        int r)
{
    const char *sel = st->max ? "nx_gtselectf" : "nx_ltselectf";
    const char *fn = st->max ? "nx_maxnanf" : "nx_minnanf";
    const int64_t *ext = g->k->extent;
    line(g, "if (act%d && z0 + %d < %lld) {", r, base, (long long)(bp->b->lo[0] + bp->w[0]));
    g->ind++;
    int pj[ST_SPAN] = {0};
    for (int a = 0; a < st->n[0]; a++)
        pj[a] = base + st->d[0][a] - st->lo[0];
    line(g, "float a = p%d_%d;", pj[0], r);
    for (int a = 1; a < st->n[0]; a++)
        line(g, "a = %s(a, p%d_%d);", fn, pj[a], r);
    line(g, "if (a == 0.0f) {");
    g->ind++;
    line(g, "a = p%d_%d;", pj[0], r);
    for (int a = 1; a < st->n[0]; a++)
        line(g, "a = %s(p%d_%d, a);", sel, pj[a], r);
    g->ind--;
    line(g, "}");
    line(g, "b%d[((i64)(z0 + %d) * %lldLL + y + %d) * %lldLL + x] = a != a ? NX_NANF : a;",
         g->k->stores[0].buf, base, (long long)ext[1], r, (long long)ext[2]);
    g->ind--;
    line(g, "}");
}

/* The tile blocks: plane j's global loads are issued `depth` planes ahead (registers), stored to
 * the shared buffer j & 1 one plane ahead, one barrier a plane. */
static void emit_tiles(nx_ptx_gen *g, const nx_ptx_box_plan *bp, const stencil *st,
                       const tile *tl)
{
    int span0 = st->hi[0] - st->lo[0] + 1;
    emit_tile_setup(g, bp, st, tl);
    for (int j = 0; j < tl->depth && j < tl->np; j++)
        emit_stage_load(g, st, tl, j);
    emit_stage_store(g, tl, 0);
    line(g, "__syncthreads();");
    for (int j = 0; j < tl->np; j++) {
        if (j + tl->depth < tl->np)
            emit_stage_load(g, st, tl, j + tl->depth);
        emit_partial(g, st, tl, j);
        if (j + 1 < tl->np) {
            emit_stage_store(g, tl, j + 1);
            line(g, "__syncthreads();");
        }
        for (int r = 0; r < tl->ry && j - span0 + 1 >= 0; r++)
            emit_output(g, bp, st, j - span0 + 1, r);
    }
}

/* The shell blocks (the first ns): one point per thread, as the general form computes it. */
static void emit_shell_blocks(nx_ptx_gen *g, const nx_ptx_box_plan *bp, const tile *tl)
{
    const nx_kernel *k = g->k;
    const char *ut = g->narrow ? "unsigned" : "u64";
    long long shell = (long long)(nx_ir_numel(k->ndim, k->extent) - bp->inner);
    line(g, "if (blockIdx.x < %lldU) {", (long long)tl->ns);
    g->ind++;
    line(g, "const i64 p = (i64)blockIdx.x * %d + threadIdx.x;", NX_PTX_THREADS);
    line(g, "if (p < %lldLL) {", shell);
    g->ind++;
    line(g, "%s t = (%s)p;", ut, ut);
    for (int l = 0; l < k->ndim; l++)
        line(g, "%s i%d;", g->narrow ? "int" : "i64", l);
    nx_ptx_emit_shell(g, bp);
    g->ind--;
    line(g, "}");
    line(g, "return;");
    g->ind--;
    line(g, "}");
    line(g, "(void)points;");
}

int nx_ptx_stencil_knobs(void)
{
    static const struct {
        const char *var;
        int lo, hi, shift;
    } knobs[] = {{"NITRIX_PTX_STENCIL_TZ", 1, 64, 0},
                 {"NITRIX_PTX_STENCIL_DEPTH", 1, 8, 8},
                 {"NITRIX_PTX_STENCIL_RY", 1, 2, 16}};
    int v = 0;
    for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++) {
        const char *e = getenv(knobs[i].var);
        int x = e ? atoi(e) : 0;
        if (x >= knobs[i].lo && x <= knobs[i].hi)
            v |= x << knobs[i].shift;
    }
    return v;
}

bool nx_ptx_emit_stencil(nx_ptx_gen *g, const nx_ptx_box_plan *bp, nx_ptx_launch *launch)
{
    stencil st;
    memset(&st, 0, sizeof st);
    if (g->block_r >= 0 || bp->rows != 1 || !analyse(g, bp, &st))
        return g->t.failed;
    const nx_kernel *k = g->k;
    int knobs = nx_ptx_stencil_knobs();
    tile tl = {.sw = ST_TX + st.hi[2] - st.lo[2]};
    tl.tz = knobs & 0xff ? knobs & 0xff : ST_TZ;
    tl.depth = knobs >> 8 & 0xff ? knobs >> 8 & 0xff : ST_DEPTH;
    tl.ry = knobs >> 16 ? knobs >> 16 : ST_RY;
    tl.ty = ST_WARPS * tl.ry;
    tl.sh = tl.ty + st.hi[1] - st.lo[1];
    tl.rounds = (tl.sw * tl.sh + NX_PTX_THREADS - 1) / NX_PTX_THREADS;
    tl.np = tl.tz + st.hi[0] - st.lo[0];
    tl.nb[2] = (bp->w[2] + ST_TX - 1) / ST_TX;
    tl.nb[1] = (bp->w[1] + tl.ty - 1) / tl.ty;
    tl.nb[0] = (bp->w[0] + tl.tz - 1) / tl.tz;
    tl.nt = tl.nb[0] * tl.nb[1] * tl.nb[2];
    int64_t shell = nx_ir_numel(k->ndim, k->extent) - bp->inner;
    tl.ns = (shell + NX_PTX_THREADS - 1) / NX_PTX_THREADS;
    /* the largest staging index before the clamp: planes up to tz + 2 ST_SPAN past B's */
    tl.wide = (k->bufs[st.buf].shape[0] + tl.tz + 2 * ST_SPAN + 1) * st.stride[0] > INT32_MAX;
    /* int tile coordinates; one block per shell chunk and tile within the runner's 2^24 */
    if (tl.nt + tl.ns >= (1 << 24) || k->extent[0] > INT32_MAX / 2 ||
        k->extent[1] > INT32_MAX / 2 || k->extent[2] > INT32_MAX / 2)
        return false;
    g->ind = 1;
    emit_shell_blocks(g, bp, &tl);
    emit_tiles(g, bp, &st, &tl);
    nx_rt_text_put(&g->t, "}\n");
    launch->points = (tl.ns + tl.nt) * NX_PTX_THREADS;
    return true;
}
