/* Library kernels -> CUDA C (docs/cuda.md "Library kernels").
 *
 * Each kernel is one __global__ function with emit.c's calling convention (a pointer per buffer,
 * then the point count), launched as NX_PTX_POINTS: 256-thread blocks, grid-stride over the
 * points. The semantics are the interpreter's, element for element:
 *
 *   sort / argsort  one block per line (grid-stride over lines). The line and its positions sit
 *                   in shared memory, padded to a power of two P <= nx_ptx_sort_max, and a bitonic
 *                   network sorts the (value, position) pairs. The order is total (NaN greatest,
 *                   ties by position, padding after everything), so the network's result is the
 *                   one stable order the interpreter's merge sort gives: bit-exact.
 *   scan            one thread per line, the carry of ir/prim-reduce.c folded in line order and
 *                   stored after every step: bit-exact (logsumexp: the same double carry, the
 *                   device's exp/log within an ulp of the host's).
 *   scan_linear     one thread per line, y = a*y rounded, then + b rounded (__fmul_rn/__fadd_rn:
 *                   never contracted into an fma), in line order: bit-exact.
 *   scan_iir        one thread per line, states y[t-1..t-order] in registers, acc = b then
 *                   acc + c_j y_j rounded term by term (__fmul_rn/__fadd_rn), coefficients rounded
 *                   once to the dtype: bit-exact.
 *                   The three scans walk their lines one of two ways (emit_tiled, emit_strided). Lines
 *                   along the contiguous axis: a block takes 64 lines (32 for 8-byte dtypes) and
 *                   moves them through shared memory 32 columns at a time, loaded and stored
 *                   coalesced (a warp covers 32 adjacent columns of one line); the next chunk's
 *                   loads are issued before the lines recur over this one. Lines along a strided
 *                   axis: one thread per line, consecutive threads on adjacent lines (coalesced),
 *                   loads in register batches of 16 (8) steps issued one batch ahead of the
 *                   recurrence.
 *                   Offsets are 32-bit below 2^31 elements. Every line still recurs in order on
 *                   one thread, so reproducible and fast mode give the same bits. The exception:
 *                   integer sum/prod/max/min scans of few long lines (<= 16384 lines of >= 256)
 *                   run a block per line (a scan of 4 elements per thread, then of the thread
 *                   totals in shared memory): exact in any grouping, so the same bits. Few long
 *                   float lines (a 1-D cumsum or scan_linear) still run on few threads: correct,
 *                   slow.
 *   scatter         the runner first copies x into y on the device (stream-ordered). Integer
 *                   i32/i64 scatters and, when reassociation is allowed, f32/f64 ones run one
 *                   thread per update with atomics (integer add wraps and max/min are exact in
 *                   any order; float max/min by compare-and-swap). Otherwise one thread per
 *                   column (the positions that share every index but the axis) folds its
 *                   updates in ascending j: the interpreter's order, bit-exact, no float atomics.
 *                   A 1-D scatter then has one column and runs on one thread: correct, slow.
 *
 * Not on the device: extern (a host routine), reduce_custom (its monoid is graph nodes the
 * kernel does not carry), sort lines longer than nx_ptx_sort_max. The backend falls back loudly
 * for those. */
#include <stdarg.h>
#include <string.h>

#include "codegen/ptx/emit-lib.h"
#include "codegen/ptx/emit-tile.h"

typedef nx_rt_text text;

#define put nx_rt_text_put


static const char prelude[] =
    "typedef long long i64;\n"
    "typedef unsigned long long u64;\n"
    "#define NX_NANF __int_as_float(0x7fc00000)\n"
    "#define NX_NAN __longlong_as_double(0x7ff8000000000000LL)\n"
    "#define NX_INF __longlong_as_double(0x7ff0000000000000LL)\n"
    "static __device__ __forceinline__ i64 nx_add(i64 a, i64 b) { return (i64)((u64)a + (u64)b); }\n"
    "static __device__ __forceinline__ i64 nx_mul(i64 a, i64 b) { return (i64)((u64)a * (u64)b); }\n";

static const char *ctype(int d)
{
    switch (d) {
    case NX_DTYPE_F32:
        return "float";
    case NX_DTYPE_F64:
        return "double";
    case NX_DTYPE_I8:
        return "signed char";
    case NX_DTYPE_I16:
        return "short";
    case NX_DTYPE_I32:
        return "int";
    case NX_DTYPE_I64:
        return "i64";
    default: /* u8, bool */
        return "unsigned char";
    }
}

static bool is_f(int d)
{
    return d == NX_DTYPE_F32 || d == NX_DTYPE_F64;
}

/* The lowest / highest value of dtype d as a CUDA C expression (the monoid identities). */
static const char *limit_text(int d, bool lowest)
{
    switch (d) {
    case NX_DTYPE_F32:
        return lowest ? "(float)-NX_INF" : "(float)NX_INF";
    case NX_DTYPE_F64:
        return lowest ? "-NX_INF" : "NX_INF";
    case NX_DTYPE_I8:
        return lowest ? "(signed char)-128" : "(signed char)127";
    case NX_DTYPE_I16:
        return lowest ? "(short)-32768" : "(short)32767";
    case NX_DTYPE_I32:
        return lowest ? "(int)(-2147483647 - 1)" : "(int)2147483647";
    case NX_DTYPE_I64:
        return lowest ? "(i64)(-9223372036854775807LL - 1)" : "(i64)9223372036854775807LL";
    case NX_DTYPE_BOOL:
        return lowest ? "(unsigned char)0" : "(unsigned char)1";
    default: /* u8 */
        return lowest ? "(unsigned char)0" : "(unsigned char)255";
    }
}

static int64_t prod(const int64_t *s, int from, int to)
{
    int64_t n = 1;
    for (int d = from; d < to; d++)
        n *= s[d];
    return n;
}

static void signature(text *t, const nx_kernel *k, const char *name)
{
    put(t, "extern \"C\" __global__ void __launch_bounds__(%d)\n%s(", NX_PTX_THREADS, name);
    for (int b = 0; b < k->nbufs; b++)
        put(t, "%s%s *__restrict__ b%d, ", k->bufs[b].role == NX_KBUF_IN ? "const " : "",
            ctype(k->bufs[b].dtype), b);
    put(t, "i64 points)\n{\n");
}

static const char thread_loop[] =
    "    for (i64 p = (i64)blockIdx.x * %d + threadIdx.x; p < points;\n"
    "         p += (i64)gridDim.x * %d) {\n";

/* ---- sort / argsort ------------------------------------------------------------------------*/

static int64_t sort_pad(int64_t len)
{
    int64_t p = 1;
    while (p < len)
        p *= 2;
    return p;
}

int64_t nx_ptx_sort_max(nx_dtype d)
{
    int64_t per = (int64_t)nx_dtype_size(d) + 2, p = 1;
    while (2 * p * per <= NX_PTX_SORT_SMEM)
        p *= 2;
    return p;
}

static void emit_sort(text *t, const nx_kernel *k, const char *name, nx_ptx_launch *launch)
{
    const nx_kbuf *x = &k->bufs[0], *y = &k->bufs[1];
    int axis = (int)k->attrs[0];
    bool desc = k->attrs[1] != 0, arg = k->lib_prim == NX_PRIM_ARGSORT;
    int64_t len = x->shape[axis], kk = k->attrs[2], inner = prod(x->shape, axis + 1, x->ndim);
    int64_t lines = prod(x->shape, 0, axis) * inner, pad = sort_pad(len);
    const char *T = ctype(x->dtype);
    put(t, "#define LEN %lldLL\n#define P %lld\n#define K %lldLL\n#define INNER %lldLL\n",
        (long long)len, (long long)pad, (long long)kk, (long long)(inner ? inner : 1));
    /* a strictly before b; positions >= LEN are padding and go after everything */
    put(t, "static __device__ __forceinline__ bool nx_before(%s a, int ia, %s b, int ib)\n{\n", T,
        T);
    put(t, "    if (ia >= (int)LEN || ib >= (int)LEN) return ia < ib;\n");
    if (is_f(x->dtype)) {
        put(t, "    const bool na = a != a, nb = b != b;\n");
        put(t, "    if (na || nb) return na && nb ? ia < ib : %s;\n", desc ? "na" : "nb");
    }
    put(t, "    if (a %s b) return true;\n", desc ? ">" : "<");
    put(t, "    if (a == b) return ia < ib;\n    return false;\n}\n");
    signature(t, k, name);
    put(t, "    __shared__ %s key[P];\n    __shared__ unsigned short pos[P];\n", T);
    put(t, "    const i64 lines = points / %d;\n", NX_PTX_THREADS);
    put(t, "    for (i64 ln = blockIdx.x; ln < lines; ln += gridDim.x) {\n");
    put(t, "        const i64 o = ln / INNER, in = ln %% INNER;\n");
    put(t, "        const %s *x = b0 + o * LEN * INNER + in;\n", T);
    put(t, "        %s *y = b1 + o * K * INNER + in;\n", ctype(y->dtype));
    put(t, "        for (int s = threadIdx.x; s < P; s += %d) {\n", NX_PTX_THREADS);
    put(t, "            pos[s] = (unsigned short)s;\n");
    put(t, "            key[s] = s < (int)LEN ? x[(i64)s * INNER] : (%s)0;\n", T);
    put(t, "        }\n        __syncthreads();\n");
    put(t, "        for (int size = 2; size <= P; size <<= 1)\n");
    put(t, "            for (int half = size >> 1; half > 0; half >>= 1) {\n");
    put(t, "                for (int s = threadIdx.x; s < P / 2; s += %d) {\n", NX_PTX_THREADS);
    put(t, "                    const int lo = 2 * s - (s & (half - 1)), hi = lo + half;\n");
    put(t, "                    const bool up = (lo & size) == 0;\n");
    put(t, "                    const bool swap = up ? nx_before(key[hi], pos[hi], key[lo], "
           "pos[lo])\n");
    put(t, "                                         : nx_before(key[lo], pos[lo], key[hi], "
           "pos[hi]);\n");
    put(t, "                    if (swap) {\n");
    put(t, "                        const %s kt = key[lo]; key[lo] = key[hi]; key[hi] = kt;\n", T);
    put(t, "                        const unsigned short pt = pos[lo]; pos[lo] = pos[hi]; "
           "pos[hi] = pt;\n");
    put(t, "                    }\n                }\n                __syncthreads();\n");
    put(t, "            }\n");
    put(t, "        for (int s = threadIdx.x; s < (int)K; s += %d)\n", NX_PTX_THREADS);
    put(t, "            y[(i64)s * INNER] = %s;\n", arg ? "(i64)pos[s]" : "key[s]");
    put(t, "        __syncthreads();\n    }\n}\n");
    launch->points = len > 0 ? lines * NX_PTX_THREADS : 0;
}

/* ---- scan and scan_linear: the shared line walkers -----------------------------------------*/

/* Element strides of buffer b broadcast to the output's nd dims (0 along broadcast dims). */
static void bcast_strides(const nx_kbuf *b, int nd, int64_t *st)
{
    int64_t s = 1;
    for (int d = nd - 1; d >= 0; d--) {
        int bd = d - (nd - b->ndim);
        if (bd < 0) {
            st[d] = 0;
            continue;
        }
        st[d] = b->shape[bd] == 1 ? 0 : s;
        s *= b->shape[bd];
    }
}

/* A scan over the lines of the output along one axis: inputs b0..b(nin-1) broadcast to the
 * output b(nin); step emits one sequential step of the line's carry from the input values v0,
 * v1.. into r (carry declares the carry). Every path runs each line's steps in line order on one
 * thread, so the result is the one-thread loop's, bit for bit. */
typedef struct scan_form {
    const nx_kernel *k;
    int nin, nd, axis;
    bool rev, ix32;
    int64_t len, lines;
    int64_t st[3][NX_MAX_DIMS]; /* element strides per buffer, the output's last */
    int pro;                    /* the input the prologue computes (nx_pro), -1: none */
    bool epi;                   /* results go through the epilogue (nx_epi) to its output */
    int64_t epi_c, epi_m;       /* epilogue point e along the axis reads result e + epi_c */
    int64_t est[NX_MAX_DIMS];   /* the epilogue output's element strides */
    void (*carry)(text *t, const nx_kernel *k);
    void (*step)(text *t, const nx_kernel *k);
} scan_form;

/* Lines per block of the tiled path and the tile's columns: a block loads LPB x TC elements of
 * each input coalesced (a warp reads 32 adjacent columns of one line), then one thread per line
 * recurs along its row in shared memory (rows padded to TC + 1: no bank conflicts). */
#define SCAN_TC 32
/* Steps per register batch of the strided path (half for 8-byte dtypes): the batch's loads are
 * issued together, and the next batch's while this one recurs. 16, not 32: batches of 32 (128
 * registers a thread) were no faster on a single strided scan, and the recursive Gaussian's best
 * time was with 16 (docs/perf/cuda-scan.md, its H200 measurements). */
#define SCAN_UNROLL 16

static int form_lpb(const scan_form *f)
{
    return nx_dtype_size(f->k->bufs[f->nin].dtype) > 4 ? 32 : 64;
}

/* An epilogue's loads of the result (buffer epi_source, the scan's output) all read the point's
 * own line at its position along the axis plus one constant C, its other coordinates the point's
 * own, with 0 <= C and C + (the epilogue's extent there) <= the line's length (at least 2): 1,
 * *c = C. 0 when not; -1 when the analysis could not allocate its memory. */
static int epilogue_shift(const nx_kernel *k, int axis, int64_t *c)
{
    const nx_kbuf *y = &k->bufs[k->epi_source];
    if (k->ndim != y->ndim || axis < 0 || axis >= k->ndim || y->shape[axis] < 2)
        return 0;
    int64_t st[NX_MAX_DIMS], n = 1;
    for (int d = k->ndim - 1; d >= 0; d--) {
        if (d != axis && k->extent[d] != y->shape[d])
            return 0;
        st[d] = n;
        n *= y->shape[d];
    }
    size_t bytes = (size_t)(k->ninst ? k->ninst : 1) * sizeof(nx_ptx_affine);
    nx_ptx_affine *aff = nx_rt_alloc(k->ctx, bytes);
    if (!aff)
        return -1;
    nx_ptx_affine_all(k, aff);
    bool ok = true, any = false;
    int64_t shift = 0;
    for (int id = 0; id < k->ninst && ok; id++) {
        const nx_kinst *in = &k->inst[id];
        if (in->op != NX_KOP_LOAD || in->a[0] != k->epi_source)
            continue;
        const nx_ptx_affine *a = &aff[in->a[1]];
        ok = a->ok && st[axis] > 0 && a->c % st[axis] == 0;
        for (int d = 0; ok && d < k->ndim; d++)
            ok = k->extent[d] <= 1 || a->coef[d] == st[d];
        for (int l = k->ndim; ok && l < NX_KERNEL_MAX_LOOPS; l++)
            ok = a->coef[l] == 0;
        if (ok && any)
            ok = a->c / st[axis] == shift;
        shift = ok ? a->c / st[axis] : shift;
        any = true;
    }
    nx_rt_free(k->ctx, aff, bytes);
    if (!ok || !any || shift < 0 || shift + k->extent[axis] > y->shape[axis])
        return 0;
    *c = shift;
    return 1;
}

static void form_init(scan_form *f, const nx_kernel *k, int nin, int axis, bool rev)
{
    const nx_kbuf *y = &k->bufs[nin];
    memset(f, 0, sizeof *f);
    f->k = k;
    f->nin = nin;
    f->nd = y->ndim;
    f->axis = axis;
    f->rev = rev;
    f->len = y->shape[axis];
    f->pro = k->has_prologue ? k->pro_operand : -1;
    f->epi = k->has_epilogue && epilogue_shift(k, axis, &f->epi_c) == 1;
    if (f->epi) {
        f->epi_m = k->extent[axis];
        for (int64_t d = k->ndim - 1, st = 1; d >= 0; d--) {
            f->est[d] = st;
            st *= k->extent[d];
        }
    }
    f->lines = 1;
    for (int d = 0; d < y->ndim; d++)
        f->lines *= d == axis ? 1 : y->shape[d];
    int64_t most = 0;
    for (int b = 0; b <= nin; b++) {
        bcast_strides(&k->bufs[b], f->nd, f->st[b]);
        int64_t n = prod(k->bufs[b].shape, 0, k->bufs[b].ndim);
        most = n > most ? n : most;
    }
    /* 32-bit offsets while every buffer and the tile overshoot stay below 2^31 */
    f->ix32 = most + (int64_t)SCAN_TC * 64 * 2 < INT32_MAX && f->lines < INT32_MAX / 2;
}

/* The shared memory path: the output and every input run along the axis with stride 1 (or 0). */
static bool form_tiled(const scan_form *f)
{
    if (f->len < 2 || f->st[f->nin][f->axis] != 1)
        return false;
    for (int b = 0; b < f->nin; b++)
        if (f->st[b][f->axis] > 1)
            return false;
    return true;
}

/* Line ln's offset into every buffer (o0.. and oy) from its index over the other dims. */
static void form_offsets(text *t, const scan_form *f, const char *ln, const char *ind)
{
    put(t, "%six rem = %s, c = 0, oe = 0;\n", ind, ln);
    for (int b = 0; b <= f->nin; b++)
        put(t, "%six o%d = 0;\n", ind, b);
    for (int d = f->nd - 1; d >= 0; d--) {
        if (d == f->axis)
            continue;
        long long e = f->k->bufs[f->nin].shape[d];
        e = e ? e : 1;
        put(t, "%sc = rem %% (ix)%lld; rem /= (ix)%lld;\n", ind, e, e);
        if (f->pro >= 0 || f->epi)
            put(t, "%sconst ix cd%d = c;\n", ind, d);
        if (f->epi)
            put(t, "%soe += c * (ix)%lld;\n", ind, (long long)f->est[d]);
        for (int b = 0; b <= f->nin; b++)
            if (f->st[b][d])
                put(t, "%so%d += c * (ix)%lld;\n", ind, b, (long long)f->st[b][d]);
    }
    put(t, "%s(void)rem; (void)c; (void)oe;\n", ind);
}

/* The prologue (codegen/kernel.h) as a device function of the operand's coordinates:
 * nx_pro(<the prologue's buffers>, i0, .., i<nd-1>) is the operand's element there, computed by
 * the loop emitter's instructions (emit.c), so it is the value the loop kernel would have
 * stored, bit for bit. */
static void emit_insts(text *t, const nx_kernel *k);

static void emit_prologue(text *t, const scan_form *f)
{
    const nx_kernel *k = f->k;
    put(t, "static __device__ __forceinline__ %s nx_pro(", ctype(k->bufs[f->pro].dtype));
    for (int b = f->nin + 1; b < k->nbufs; b++)
        put(t, "const %s *__restrict__ b%d, ", ctype(k->bufs[b].dtype), b);
    for (int d = 0; d < k->ndim; d++)
        put(t, "i64 i%d%s", d, d + 1 < k->ndim ? ", " : ")\n{\n");
    if (k->ndim == 0)
        put(t, ")\n{\n");
    emit_insts(t, k);
}

/* k's LOOP instructions as `const T v<id> = ...;` lines (the loop emitter's, with its 32-bit index
 * arithmetic where it fits), then `return v<stored value>;` and the closing brace. */
static void emit_insts(text *t, const nx_kernel *k)
{
    nx_ptx_gen g = {.k = k, .t = *t, .ind = 1};
    size_t n = (size_t)k->ninst + 1;
    int64_t *lo = NULL, *hi = NULL;
    uint8_t *nw = NULL;
    if ((nx_ptx_general_flags(k->ctx) & NX_PTX_NARROW) && nx_ptx_narrow_space(k)) {
        lo = nx_rt_alloc(k->ctx, n * sizeof *lo);
        hi = nx_rt_alloc(k->ctx, n * sizeof *hi);
        nw = nx_rt_calloc(k->ctx, n, 1);
        if (lo && hi && nw) { /* 32-bit index arithmetic where it fits, as in loop kernels */
            nx_kranges(k, lo, hi);
            nx_ptx_find_narrow(k, lo, hi, nw);
            g.narrow = nw;
        } else {
            g.t.failed = true;
        }
    }
    for (int id = 0; id < k->ninst; id++)
        nx_ptx_emit_inst(&g, id);
    nx_ptx_line(&g, "return v%d;", k->stores[0].value);
    *t = g.t;
    put(t, "}\n");
    nx_rt_free(k->ctx, lo, n * sizeof *lo);
    nx_rt_free(k->ctx, hi, n * sizeof *hi);
    nx_rt_free(k->ctx, nw, n);
}

/* The epilogue as a device function of a result and the epilogue point's coordinates:
 * nx_epi(r, <its inputs>, i0, .., i<nd-1>). Its loads of the result (each verified to read the
 * point's own line at the shifted position, epilogue_shift) read r: the buffer's name is an
 * object whose subscript is r whatever the offset. */
static void emit_epilogue(text *t, const scan_form *f)
{
    const nx_kernel *k = f->k;
    const char *T = ctype(k->bufs[f->nin].dtype);
    put(t, "struct nx_val { %s v; __device__ %s operator[](long long) const { return v; } };\n", T,
        T);
    put(t, "static __device__ __forceinline__ %s nx_epi(%s r, ", ctype(k->bufs[f->nin + 1].dtype),
        T);
    for (int b = f->nin + 2; b < k->nbufs; b++)
        put(t, "const %s *__restrict__ b%d, ", ctype(k->bufs[b].dtype), b);
    for (int d = 0; d < k->ndim; d++)
        put(t, "i64 i%d%s", d, d + 1 < k->ndim ? ", " : ")\n{\n");
    put(t, "    const nx_val b%d = {r};\n", f->nin);
    emit_insts(t, k);
}

/* The store of result r (an expression) at position `s` of the line: to the scan's output, or
 * through the epilogue to its output at point s - epi_c when that is inside its space. tiled:
 * the line is li of a tile (crd, offe in shared memory). */
static void store_at(text *t, const scan_form *f, const char *r, const char *s, bool tiled,
                     const char *ind)
{
    int y = f->nin;
    if (!f->epi) {
        if (tiled)
            put(t, "%sb%d[off[%d][li] + %s] = %s;\n", ind, y, y, s, r);
        else
            put(t, "%sb%d[o%d + (%s) * (ix)%lld] = %s;\n", ind, y, y, s,
                (long long)f->st[y][f->axis], r);
        return;
    }
    put(t, "%s{\n%s    const ix e_ = (%s) - (ix)%lld;\n", ind, ind, s, (long long)f->epi_c);
    put(t, "%s    if (e_ >= 0 && e_ < (ix)%lld)\n", ind, (long long)f->epi_m);
    put(t, "%s        b%d[%s + e_ * (ix)%lld] = nx_epi(%s, ", ind, y + 1,
        tiled ? "offe[li]" : "oe", (long long)f->est[f->axis], r);
    for (int b = y + 2; b < f->k->nbufs; b++)
        put(t, "b%d, ", b);
    for (int d = 0; d < f->nd; d++) {
        const char *sep = d + 1 < f->nd ? ", " : ");\n";
        if (d == f->axis)
            put(t, "(i64)e_%s", sep);
        else if (tiled)
            put(t, "(i64)crd[%d][li]%s", d, sep);
        else
            put(t, "(i64)cd%d%s", d, sep);
    }
    put(t, "%s}\n", ind);
}

/* The prologue's value at the line's coordinates (cd<d>, or crd[d][li] in the tiled form) and
 * position `s` along the axis, as an expression. */
static void pro_call(text *t, const scan_form *f, const char *s, bool tiled)
{
    put(t, "nx_pro(");
    for (int b = f->nin + 1; b < f->k->nbufs; b++)
        put(t, "b%d, ", b);
    for (int d = 0; d < f->nd; d++) {
        const char *sep = d + 1 < f->nd ? ", " : ")";
        if (d == f->axis)
            put(t, "(i64)(%s)%s", s, sep);
        else if (tiled)
            put(t, "(i64)crd[%d][li]%s", d, sep);
        else
            put(t, "(i64)cd%d%s", d, sep);
    }
}

/* Input b's element at position `s` of the line (s an expression): a load, or the prologue. */
static void input_at(text *t, const scan_form *f, int b, const char *s, bool tiled)
{
    if (b == f->pro) {
        pro_call(t, f, s, tiled);
        return;
    }
    if (tiled)
        put(t, "b%d[off[%d][li] + %s]", b, b, s);
    else
        put(t, "b%d[o%d + (%s) * (ix)%lld]", b, b, s, (long long)f->st[b][f->axis]);
}

static void form_head(text *t, const scan_form *f, const char *name)
{
    put(t, "typedef %s ix;\n", f->ix32 ? "int" : "i64");
    put(t, "#define LEN (ix)%lld\n#define LINES (ix)%lld\n", (long long)f->len,
        (long long)f->lines);
    if (f->pro >= 0)
        emit_prologue(t, f);
    if (f->epi)
        emit_epilogue(t, f);
    signature(t, f->k, name);
    put(t, "    (void)points;\n");
}

static void emit_tiled(text *t, const scan_form *f, const char *name, nx_ptx_launch *launch)
{
    const char *T = ctype(f->k->bufs[f->nin].dtype);
    int lpb = form_lpb(f), ept = lpb * SCAN_TC / NX_PTX_THREADS;
    int64_t tiles = (f->lines + lpb - 1) / lpb, chunks = (f->len + SCAN_TC - 1) / SCAN_TC;
    put(t, "#define LPB %d\n#define TC %d\n#define EPT %d\n#define NCH (ix)%lld\n", lpb, SCAN_TC,
        ept, (long long)chunks);
    form_head(t, f, name);
    put(t, "    __shared__ %s ty[LPB][TC + 1];\n    __shared__ ix off[%d][LPB];\n", T, f->nin + 1);
    if (f->pro >= 0 || f->epi)
        put(t, "    __shared__ ix crd[%d][LPB];\n", f->nd);
    if (f->epi)
        put(t, "    __shared__ ix offe[LPB];\n");
    for (int b = 0; b < f->nin; b++)
        if (f->st[b][f->axis])
            put(t, "    __shared__ %s t%d[LPB][TC + 1];\n", T, b);
    put(t, "    const int tid = threadIdx.x;\n");
    put(t, "    for (ix tile = blockIdx.x; tile < (ix)%lld; tile += gridDim.x) {\n",
        (long long)tiles);
    put(t, "        const ix first = tile * LPB;\n");
    put(t, "        const bool mine = tid < LPB && first + tid < LINES;\n");
    put(t, "        if (mine) {\n");
    form_offsets(t, f, "first + tid", "            ");
    for (int b = 0; b <= f->nin; b++)
        put(t, "            off[%d][tid] = o%d;\n", b, b);
    for (int d = 0; (f->pro >= 0 || f->epi) && d < f->nd; d++)
        if (d != f->axis)
            put(t, "            crd[%d][tid] = cd%d;\n", d, d);
    if (f->epi)
        put(t, "            offe[tid] = oe;\n");
    put(t, "        }\n        __syncthreads();\n");
    f->carry(t, f->k);
    for (int b = 0; b < f->nin; b++) {
        if (f->st[b][f->axis])
            put(t, "        %s r%d[EPT];\n", T, b);
        else
            put(t, "        const %s v%d = mine ? b%d[off[%d][tid]] : (%s)0;\n", T, b, b, b, T);
    }
    /* element e of this thread in a tile: line idx / TC, column idx % TC */
    put(t, "#define NX_LOAD(k) \\\n");
    put(t, "        for (int e = 0; e < EPT; e++) { \\\n");
    put(t, "            const int idx = tid + e * %d, li = idx / TC; \\\n", NX_PTX_THREADS);
    put(t, "            const ix s = (k) * TC + idx %% TC; \\\n");
    put(t, "            if (first + li < LINES && s < LEN) { \\\n");
    for (int b = 0; b < f->nin; b++)
        if (f->st[b][f->axis]) {
            put(t, "                r%d[e] = ", b);
            input_at(t, f, b, "s", true);
            put(t, "; \\\n");
        }
    put(t, "            } \\\n        }\n");
    put(t, "        NX_LOAD(%s);\n", f->rev ? "NCH - 1" : "0");
    put(t, "        for (ix kk = 0; kk < NCH; kk++) {\n");
    put(t, "            const ix k = %s;\n", f->rev ? "NCH - 1 - kk" : "kk");
    put(t, "#pragma unroll\n            for (int e = 0; e < EPT; e++) {\n");
    put(t, "                const int idx = tid + e * %d;\n", NX_PTX_THREADS);
    for (int b = 0; b < f->nin; b++)
        if (f->st[b][f->axis])
            put(t, "                t%d[idx / TC][idx %% TC] = r%d[e];\n", b, b);
    put(t, "            }\n            __syncthreads();\n");
    /* the next chunk's loads (its prologue's too) fly while the lines recur */
    put(t, "            if (kk + 1 < NCH) NX_LOAD(%s);\n", f->rev ? "k - 1" : "k + 1");
    put(t, "            if (mine) {\n");
    put(t, "                for (int cc = 0; cc < TC; cc++) {\n");
    put(t, "                    const int col = %s;\n", f->rev ? "TC - 1 - cc" : "cc");
    put(t, "                    if (k * TC + col >= LEN) continue;\n");
    for (int b = 0; b < f->nin; b++)
        if (f->st[b][f->axis])
            put(t, "                    const %s v%d = t%d[tid][col];\n", T, b, b);
    f->step(t, f->k);
    put(t, "                    ty[tid][col] = r;\n                }\n            }\n");
    put(t, "            __syncthreads();\n");
    put(t, "#pragma unroll\n            for (int e = 0; e < EPT; e++) {\n");
    put(t, "                const int idx = tid + e * %d, li = idx / TC;\n", NX_PTX_THREADS);
    put(t, "                const ix s = k * TC + idx %% TC;\n");
    put(t, "                if (first + li < LINES && s < LEN)\n");
    store_at(t, f, "ty[li][idx % TC]", "s", true, "                    ");
    put(t, "            }\n            __syncthreads();\n        }\n#undef NX_LOAD\n    }\n}\n");
    launch->points = tiles * NX_PTX_THREADS;
}

static void emit_strided(text *t, const scan_form *f, const char *name, nx_ptx_launch *launch)
{
    const char *T = ctype(f->k->bufs[f->nin].dtype);
    int y = f->nin;
    int u = nx_dtype_size(f->k->bufs[y].dtype) > 4 ? SCAN_UNROLL / 2 : SCAN_UNROLL;
    put(t, "#define U %d\n#define NB (ix)%lld\n", u, (long long)(f->len / u));
    form_head(t, f, name);
    put(t, "    for (ix p = (ix)blockIdx.x * %d + (ix)threadIdx.x; p < LINES;\n", NX_PTX_THREADS);
    put(t, "         p += (ix)gridDim.x * %d) {\n", NX_PTX_THREADS);
    form_offsets(t, f, "p", "        ");
    f->carry(t, f->k);
    for (int b = 0; b < f->nin; b++) {
        if (f->st[b][f->axis])
            put(t, "        %s r%d[U], c%d[U];\n", T, b, b);
        else
            put(t, "        const %s v%d = b%d[o%d];\n", T, b, b, b);
    }
    /* step q of the line in scan order is element s */
    put(t, "#define NX_AT(q) ((%s) * (ix)%lld)\n", f->rev ? "LEN - 1 - (q)" : "(q)",
        (long long)f->st[y][f->axis]);
    put(t, "#define NX_LOAD(bi) \\\n        for (int j = 0; j < U; j++) { \\\n");
    put(t, "            const ix q = (bi) * U + j; \\\n");
    for (int b = 0; b < f->nin; b++)
        if (f->st[b][f->axis]) {
            put(t, "            r%d[j] = ", b);
            input_at(t, f, b, f->rev ? "LEN - 1 - q" : "q", false);
            put(t, "; \\\n");
        }
    put(t, "        }\n");
    put(t, "        if (NB > 0) NX_LOAD(0);\n");
    put(t, "        for (ix bi = 0; bi < NB; bi++) {\n");
    for (int b = 0; b < f->nin; b++)
        if (f->st[b][f->axis])
            put(t, "#pragma unroll\n            for (int j = 0; j < U; j++) c%d[j] = r%d[j];\n",
                b, b);
    put(t, "            if (bi + 1 < NB) NX_LOAD(bi + 1);\n");
    put(t, "#pragma unroll\n            for (int j = 0; j < U; j++) {\n");
    for (int b = 0; b < f->nin; b++)
        if (f->st[b][f->axis])
            put(t, "                const %s v%d = c%d[j];\n", T, b, b);
    f->step(t, f->k);
    store_at(t, f, "r", f->rev ? "LEN - 1 - (bi * U + j)" : "bi * U + j", false,
             "                ");
    put(t, "            }\n        }\n");
    put(t, "        for (ix q = NB * U; q < LEN; q++) {\n");
    for (int b = 0; b < f->nin; b++)
        if (f->st[b][f->axis]) {
            put(t, "            const %s v%d = ", T, b);
            input_at(t, f, b, f->rev ? "LEN - 1 - q" : "q", false);
            put(t, ";\n");
        }
    f->step(t, f->k);
    store_at(t, f, "r", f->rev ? "LEN - 1 - q" : "q", false, "            ");
    put(t, "        }\n");
    put(t, "#undef NX_LOAD\n#undef NX_AT\n    }\n}\n");
    launch->points = f->lines;
}

static void emit_form(text *t, const scan_form *f, const char *name, nx_ptx_launch *launch)
{
    if (form_tiled(f))
        emit_tiled(t, f, name, launch);
    else
        emit_strided(t, f, name, launch);
    if (f->len == 0 || f->lines == 0)
        launch->points = 0;
}

/* ---- scan ----------------------------------------------------------------------------------*/

/* Elements per thread and chunk of the block-per-line scan. */
#define SCAN_BLOCK_E 4

/* A scan whose monoid is exact in any grouping: integer (and bool) sum and prod wrap in the
 * dtype's ring, max and min pick a value. Such a scan may run a line across a block and give the
 * in-order loop's bits. It does so when there are few long lines (label propagation's two-level
 * cumulative sum: 1449 rows of 1449, then one column of 1449): a line per thread would leave the
 * device idle and walk each line serially. */
static bool scan_blocked(const scan_form *f)
{
    int m = (int)f->k->attrs[1];
    return !is_f(f->k->bufs[0].dtype) && m != NX_MONOID_LOGSUMEXP && f->lines <= 16384 &&
           f->len >= 256;
}

/* The monoid on two values (l before r), exactly as the in-order carry would combine them. */
static void block_op(text *t, int m, const char *T)
{
    put(t, "static __device__ __forceinline__ %s nx_op(%s l, %s r)\n{\n", T, T, T);
    switch (m) {
    case NX_MONOID_SUM:
        put(t, "    return (%s)nx_add((i64)l, (i64)r);\n}\n", T);
        break;
    case NX_MONOID_PROD:
        put(t, "    return (%s)nx_mul((i64)l, (i64)r);\n}\n", T);
        break;
    default:
        put(t, "    return r %s l ? r : l;\n}\n", m == NX_MONOID_MAX ? ">" : "<");
        break;
    }
}

/* One block per line (grid-stride over lines), the line in chunks of 256 x E elements: each thread
 * scans its E adjacent elements, a Hillis-Steele scan over the 256 thread totals in shared memory
 * gives each thread the total before it, and the carry of the chunks before goes in front. */
static void emit_blocked(text *t, const scan_form *f, const char *name, nx_ptx_launch *launch)
{
    int m = (int)f->k->attrs[1], d = f->k->bufs[0].dtype;
    const char *T = ctype(d);
    const char *id = m == NX_MONOID_SUM    ? "0"
                     : m == NX_MONOID_PROD ? "1"
                                           : limit_text(d, m == NX_MONOID_MAX);
    block_op(t, m, T);
    put(t, "#define E %d\n#define ID ((%s)%s)\n", SCAN_BLOCK_E, T, id);
    form_head(t, f, name);
    put(t, "    __shared__ %s part[%d];\n    const int tid = threadIdx.x;\n", T, NX_PTX_THREADS);
    put(t, "    for (ix ln = blockIdx.x; ln < LINES; ln += gridDim.x) {\n");
    form_offsets(t, f, "ln", "        ");
    put(t, "        %s carry = ID;\n", T);
    put(t, "        for (ix c0 = 0; c0 < LEN; c0 += %d * E) {\n", NX_PTX_THREADS);
    put(t, "            %s v[E];\n", T);
    put(t, "#pragma unroll\n            for (int e = 0; e < E; e++) {\n");
    put(t, "                const ix q = c0 + (ix)tid * E + e;\n");
    put(t, "                v[e] = q < LEN ? b0[o0 + (%s) * (ix)%lld] : ID;\n",
        f->rev ? "LEN - 1 - q" : "q", (long long)f->st[0][f->axis]);
    put(t, "                if (e > 0) v[e] = nx_op(v[e - 1], v[e]);\n            }\n");
    put(t, "            part[tid] = v[E - 1];\n            __syncthreads();\n");
    put(t, "            for (int off = 1; off < %d; off <<= 1) {\n", NX_PTX_THREADS);
    put(t, "                const %s l = tid >= off ? part[tid - off] : ID;\n", T);
    put(t, "                __syncthreads();\n");
    put(t, "                part[tid] = nx_op(l, part[tid]);\n                __syncthreads();\n");
    put(t, "            }\n");
    put(t, "            const %s pre = nx_op(carry, tid > 0 ? part[tid - 1] : ID);\n", T);
    put(t, "#pragma unroll\n            for (int e = 0; e < E; e++) {\n");
    put(t, "                const ix q = c0 + (ix)tid * E + e;\n");
    put(t, "                if (q < LEN) b1[o1 + (%s) * (ix)%lld] = nx_op(pre, v[e]);\n",
        f->rev ? "LEN - 1 - q" : "q", (long long)f->st[1][f->axis]);
    put(t, "            }\n");
    put(t, "            carry = nx_op(carry, part[%d]);\n", NX_PTX_THREADS - 1);
    put(t, "            __syncthreads();\n        }\n    }\n}\n");
    launch->points = f->lines * NX_PTX_THREADS;
}

static void scan_carry(text *t, const nx_kernel *k)
{
    int m = (int)k->attrs[1], d = k->bufs[0].dtype;
    if (m == NX_MONOID_LOGSUMEXP)
        put(t, "        double m = -NX_INF, s = 0;\n");
    else
        put(t, "        %s a = %s;\n", ctype(d),
            m == NX_MONOID_SUM    ? "0"
            : m == NX_MONOID_PROD ? "1"
                                  : limit_text(d, m == NX_MONOID_MAX));
    put(t, "        int nan = 0;\n        (void)nan;\n");
}

/* The carry step of ir/prim-reduce.c (nx_ir_monoid_step) on element v0, into a (and nan, s). */
static void scan_step(text *t, const nx_kernel *k)
{
    int m = (int)k->attrs[1], d = k->bufs[0].dtype;
    const char *T = ctype(d);
    put(t, "                    const %s v = v0;\n", T);
    switch (m) {
    case NX_MONOID_SUM:
    case NX_MONOID_PROD:
        if (is_f(d))
            put(t, "                    a = a %c v;\n", m == NX_MONOID_SUM ? '+' : '*');
        else
            put(t, "                    a = (%s)%s((i64)a, (i64)v);\n", T,
                m == NX_MONOID_SUM ? "nx_add" : "nx_mul");
        put(t, "                    const %s r = a;\n", T);
        break;
    case NX_MONOID_MAX:
    case NX_MONOID_MIN:
        if (is_f(d))
            put(t, "                    if (v != v) nan = 1; else if (v %s a) a = v;\n",
                m == NX_MONOID_MAX ? ">" : "<");
        else
            put(t, "                    if (v %s a) a = v;\n", m == NX_MONOID_MAX ? ">" : "<");
        if (is_f(d))
            put(t, "                    const %s r = nan ? (%s)NX_NAN : a;\n", T, T);
        else
            put(t, "                    const %s r = a;\n", T);
        break;
    default: /* LOGSUMEXP: a double carry (m, s), s rounded to the dtype after each step */
        put(t, "                    const double xv = (double)v;\n");
        put(t, "                    if (xv != xv) nan = 1;\n");
        put(t, "                    else if (xv != -NX_INF) {\n");
        put(t, "                        if (xv > m) { s = s * exp(m - xv) + 1; m = xv; }\n");
        put(t, "                        else if (xv == m) s += 1;\n");
        put(t, "                        else s += exp(xv - m);\n");
        if (d == NX_DTYPE_F32)
            put(t, "                        s = (double)(float)s;\n");
        put(t, "                    }\n");
        put(t,
            "                    const %s r = nan ? (%s)NX_NAN : (%s)(isinf(m) ? m : m + "
            "log(s));\n",
            T, T, T);
        break;
    }
}

static void emit_scan(text *t, const nx_kernel *k, const char *name, nx_ptx_launch *launch)
{
    scan_form f;
    form_init(&f, k, 1, (int)k->attrs[0], k->attrs[2] != 0);
    f.carry = scan_carry;
    f.step = scan_step;
    if (scan_blocked(&f))
        emit_blocked(t, &f, name, launch);
    else
        emit_form(t, &f, name, launch);
}

/* ---- scan_linear ---------------------------------------------------------------------------*/

static void linear_carry(text *t, const nx_kernel *k)
{
    put(t, "        %s acc = 0;\n", ctype(k->bufs[2].dtype));
}

/* y = a*y rounded, then + b rounded: never contracted into an fma (the interpreter's order) */
static void linear_step(text *t, const nx_kernel *k)
{
    bool f32 = k->bufs[2].dtype == NX_DTYPE_F32;
    put(t, "                    acc = %s(%s(v0, acc), v1);\n", f32 ? "__fadd_rn" : "__dadd_rn",
        f32 ? "__fmul_rn" : "__dmul_rn");
    put(t, "                    const %s r = acc;\n", ctype(k->bufs[2].dtype));
}

static void emit_scan_linear(text *t, const nx_kernel *k, const char *name,
                             nx_ptx_launch *launch)
{
    scan_form f;
    form_init(&f, k, 2, (int)k->attrs[0], k->attrs[1] != 0);
    f.carry = linear_carry;
    f.step = linear_step;
    emit_form(t, &f, name, launch);
}

/* ---- scan_iir ------------------------------------------------------------------------------*/

/* The coefficients rounded once to the dtype (as the host's (T)c), written as bit patterns so the
 * source text carries them exactly, and the states y[t-1..t-order], 0 before the line's start. */
static void iir_carry(text *t, const nx_kernel *k)
{
    bool f32 = k->bufs[1].dtype == NX_DTYPE_F32;
    const char *T = ctype(k->bufs[1].dtype);
    for (int j = 0; j < k->attrs[2]; j++) {
        double c;
        memcpy(&c, &k->attrs[3 + j], sizeof c);
        if (f32) {
            float cf = (float)c;
            uint32_t u;
            memcpy(&u, &cf, sizeof u);
            put(t, "        const float c%d = __int_as_float((int)0x%08xu);\n", j + 1, u);
        } else {
            uint64_t u;
            memcpy(&u, &c, sizeof u);
            put(t, "        const double c%d = __longlong_as_double((i64)0x%016llxULL);\n", j + 1,
                (unsigned long long)u);
        }
        put(t, "        %s y%d = 0;\n", T, j + 1);
    }
}

/* acc = b, then acc + c_j y_j for j = 1 .. order, each product and sum rounded (__fmul_rn /
 * __fadd_rn: never an fma), then the states shift: the interpreter's step, bit for bit. */
static void iir_step(text *t, const nx_kernel *k)
{
    bool f32 = k->bufs[1].dtype == NX_DTYPE_F32;
    const char *T = ctype(k->bufs[1].dtype);
    int order = (int)k->attrs[2];
    put(t, "                    %s acc = v0;\n", T);
    for (int j = 1; j <= order; j++)
        put(t, "                    acc = %s(acc, %s(c%d, y%d));\n", f32 ? "__fadd_rn" : "__dadd_rn",
            f32 ? "__fmul_rn" : "__dmul_rn", j, j);
    for (int j = order; j > 1; j--)
        put(t, "                    y%d = y%d;\n", j, j - 1);
    put(t, "                    y1 = acc;\n                    const %s r = acc;\n", T);
}

static void emit_scan_iir(text *t, const nx_kernel *k, const char *name, nx_ptx_launch *launch)
{
    scan_form f;
    form_init(&f, k, 1, (int)k->attrs[0], k->attrs[1] != 0);
    if (k->has_epilogue && !f.epi) { /* its check ran out of memory: no kernel, NX_ERR_NOMEM */
        t->failed = true;
        return;
    }
    f.carry = iir_carry;
    f.step = iir_step;
    emit_form(t, &f, name, launch);
}

/* ---- scatter -------------------------------------------------------------------------------*/

static bool scatter_atomic(const nx_kernel *k, bool reassoc)
{
    int d = k->bufs[0].dtype;
    return d == NX_DTYPE_I32 || d == NX_DTYPE_I64 || (is_f(d) && reassoc);
}

/* y[t] = combine(y[t], u) with atomics: exact in any order for integers, any order allowed for
 * floats by the caller. */
static void scatter_atomic_op(text *t, int m, int d)
{
    const char *T = ctype(d);
    if (m == NX_MONOID_SUM) {
        if (d == NX_DTYPE_I64)
            put(t, "            atomicAdd((u64 *)&b3[tgt], (u64)u);\n");
        else
            put(t, "            atomicAdd(&b3[tgt], u);\n");
        return;
    }
    const char *op = m == NX_MONOID_MAX ? ">" : "<";
    if (!is_f(d)) {
        put(t, "            atomic%s(%s&b3[tgt], u);\n", m == NX_MONOID_MAX ? "Max" : "Min",
            d == NX_DTYPE_I64 ? "(long long *)" : "");
        return;
    }
    /* float max/min: the interpreter's NaN-propagating max(y, u) by compare-and-swap */
    bool f32 = d == NX_DTYPE_F32;
    const char *W = f32 ? "unsigned int" : "u64";
    const char *tobits = f32 ? "__float_as_uint" : "(u64)__double_as_longlong";
    const char *frombits = f32 ? "__uint_as_float" : "__longlong_as_double";
    put(t, "            %s *w = (%s *)&b3[tgt];\n", W, W);
    put(t, "            %s old = *w, seen;\n", W);
    put(t, "            do {\n");
    put(t, "                seen = old;\n");
    put(t, "                const %s cur = %s(%sseen);\n", T, frombits, f32 ? "" : "(i64)");
    put(t, "                const %s r = (cur != cur || u != u) ? (%s)NX_NAN : (u %s cur ? u : "
           "cur);\n",
        T, T, op);
    put(t, "                old = atomicCAS(w, seen, %s(r));\n", tobits);
    put(t, "            } while (old != seen);\n");
}

/* y[t] = combine(y[t], u) in one thread, as nx_ir_scalar_binary computes it. */
static void scatter_serial_op(text *t, int m, int d)
{
    const char *T = ctype(d);
    if (m == NX_MONOID_SUM) {
        if (is_f(d))
            put(t, "                b3[tgt] = b3[tgt] + u;\n");
        else
            put(t, "                b3[tgt] = (%s)nx_add((i64)b3[tgt], (i64)u);\n", T);
        return;
    }
    const char *op = m == NX_MONOID_MAX ? ">" : "<";
    put(t, "                const %s cur = b3[tgt];\n", T);
    if (is_f(d))
        put(t, "                b3[tgt] = (cur != cur || u != u) ? (%s)NX_NAN : (u %s cur ? u : "
               "cur);\n",
            T, op);
    else
        put(t, "                b3[tgt] = u %s cur ? u : cur;\n", op);
}

static void emit_scatter(text *t, const nx_kernel *k, const char *name, bool reassoc,
                         nx_ptx_launch *launch)
{
    const nx_kbuf *x = &k->bufs[0], *idx = &k->bufs[1];
    int axis = (int)k->attrs[0], m = (int)k->attrs[1], d = x->dtype;
    int64_t ext = x->shape[axis], inner = prod(x->shape, axis + 1, x->ndim);
    int64_t outer = prod(x->shape, 0, axis), nj = prod(idx->shape, 0, idx->ndim);
    long long in1 = inner ? (long long)inner : 1, j1 = nj ? (long long)nj : 1;
    const char *T = ctype(d);
    signature(t, k, name);
    put(t, thread_loop, NX_PTX_THREADS, NX_PTX_THREADS);
    if (scatter_atomic(k, reassoc)) {
        put(t, "        const i64 q = p %% %lldLL, j = (p / %lldLL) %% %lldLL, o = p / %lldLL;\n",
            in1, in1, j1, in1 * j1);
        put(t, "        const i64 kk = (i64)b1[j];\n");
        put(t, "        if (kk >= 0 && kk < %lldLL) {\n", (long long)ext);
        put(t, "            const i64 tgt = (o * %lldLL + kk) * %lldLL + q;\n", (long long)ext,
            in1);
        put(t, "            const %s u = b2[p];\n", T);
        scatter_atomic_op(t, m, d);
        put(t, "        }\n    }\n}\n");
        launch->points = outer * nj * inner;
        return;
    }
    put(t, "        const i64 q = p %% %lldLL, o = p / %lldLL;\n", in1, in1);
    put(t, "        for (i64 j = 0; j < %lldLL; j++) {\n", (long long)nj);
    put(t, "            const i64 kk = (i64)b1[j];\n");
    put(t, "            if (kk >= 0 && kk < %lldLL) {\n", (long long)ext);
    put(t, "                const i64 tgt = (o * %lldLL + kk) * %lldLL + q;\n", (long long)ext,
        in1);
    put(t, "                const %s u = b2[(o * %lldLL + j) * %lldLL + q];\n", T, j1, in1);
    scatter_serial_op(t, m, d);
    put(t, "            }\n        }\n    }\n}\n");
    launch->points = nj > 0 ? outer * inner : 0;
}

/* ---- support and dispatch ------------------------------------------------------------------*/

/* nin operands and one output, then (with a prologue) the prologue's inputs or (with an
 * epilogue, the output then a value) the epilogue's output and inputs; no f16/bf16. */
static bool bufs_are(const nx_kernel *k, int nin)
{
    bool extra = k->has_prologue || k->has_epilogue;
    int res = k->has_epilogue ? NX_KBUF_VALUE : NX_KBUF_OUT;
    if (k->nbufs < nin + 1 + k->has_epilogue || (!extra && k->nbufs != nin + 1) ||
        k->bufs[nin].role != res)
        return false;
    for (int b = 0; b < k->nbufs; b++) {
        int want = k->has_epilogue && b == nin + 1 ? NX_KBUF_OUT : NX_KBUF_IN;
        if (nx_ir_is_half(k->bufs[b].dtype) || (b > nin && k->bufs[b].role != want))
            return false;
    }
    return true;
}

/* A prologue the scans evaluate: scan_iir's b, of the output's shape, in instructions the loop
 * emitter implements. */
static const char *prologue_unsupported(const nx_kernel *k)
{
    if (k->lib_prim != NX_PRIM_SCAN_IIR || k->pro_operand != 0 || k->nbufs < 2 ||
        k->ndim != k->bufs[1].ndim || k->nattrs < 1 || k->attrs[0] < 0 ||
        k->attrs[0] >= k->ndim || k->extent[k->attrs[0]] < 2)
        return "a prologue only on scan_iir's input b, along lines of at least 2";
    for (int d = 0; d < k->ndim; d++)
        if (k->extent[d] != k->bufs[1].shape[d])
            return "a prologue only on scan_iir's input b";
    nx_kernel body = *k; /* the instructions as a loop kernel's, for the loop emitter's test */
    body.kind = NX_KERNEL_LOOP;
    body.has_prologue = false;
    const char *why = nx_ptx_unsupported(&body);
    return why ? why : NULL;
}

/* An epilogue the scans run: on scan_iir's result, reading it at the point shifted along the
 * axis only, in instructions the loop emitter implements. */
static const char *epilogue_unsupported(const nx_kernel *k)
{
    int64_t c;
    if (k->lib_prim != NX_PRIM_SCAN_IIR || k->epi_source != 1 || k->nattrs < 1)
        return "an epilogue only on scan_iir's result";
    int how = epilogue_shift(k, (int)k->attrs[0], &c);
    if (how < 0)
        return "out of memory while checking an epilogue";
    if (how == 0)
        return "an epilogue only on scan_iir's result (lines of at least 2), read along the line "
               "at one shift";
    nx_kernel body = *k;
    body.kind = NX_KERNEL_LOOP;
    body.has_epilogue = false;
    return nx_ptx_unsupported(&body);
}

const char *nx_ptx_lib_unsupported(const nx_kernel *k)
{
    if (k->kind != NX_KERNEL_LIBRARY)
        return "not a library kernel";
    if (k->has_prologue || k->has_epilogue) {
        const char *why = k->has_prologue ? prologue_unsupported(k) : epilogue_unsupported(k);
        if (why)
            return why;
    }
    switch (k->lib_prim) {
    case NX_PRIM_SORT:
    case NX_PRIM_ARGSORT:
        if (!bufs_are(k, 1) || k->nattrs != 3 || k->attrs[0] < 0 ||
            k->attrs[0] >= k->bufs[0].ndim)
            return "a sort kernel without one input, one output and [axis, descending, k]";
        if (k->bufs[0].shape[k->attrs[0]] > nx_ptx_sort_max(k->bufs[0].dtype))
            return "sort lines longer than the shared-memory bitonic sort holds (16384 1-byte, "
                   "8192 2- or 4-byte, 4096 8-byte values) have no device implementation yet";
        return NULL;
    case NX_PRIM_SCAN:
        return bufs_are(k, 1) && k->nattrs == 3 && k->attrs[1] <= NX_MONOID_LOGSUMEXP
                   ? NULL
                   : "a scan kernel without one input, one output and [axis, monoid, reverse]";
    case NX_PRIM_SCAN_LINEAR:
        return bufs_are(k, 2) && k->nattrs == 2 && is_f(k->bufs[2].dtype)
                   ? NULL
                   : "a scan_linear kernel without inputs a, b, a float output and [axis, "
                     "reverse]";
    case NX_PRIM_SCAN_IIR:
        return bufs_are(k, 1) && k->nattrs >= 4 && k->nattrs == 3 + k->attrs[2] &&
                       k->attrs[2] <= NX_SCAN_IIR_MAX_ORDER && is_f(k->bufs[1].dtype)
                   ? NULL
                   : "a scan_iir kernel without input b, a float output and [axis, reverse, "
                     "order, coefficients]";
    case NX_PRIM_SCATTER:
        return bufs_are(k, 3) && k->nattrs == 2
                   ? NULL
                   : "a scatter kernel without inputs x, idx, updates, one output and [axis, "
                     "monoid]";
    case NX_PRIM_EXTERN:
        return nx_ptx_extern_unsupported(k);
    case NX_PRIM_REDUCE_CUSTOM:
        return "reduce_custom's monoid (graph expressions) has no device implementation yet";
    default:
        return nx_ptx_no_emitter(k->lib_prim);
    }
}

int nx_ptx_lib_precopy(const nx_kernel *k)
{
    return k->kind == NX_KERNEL_LIBRARY && k->lib_prim == NX_PRIM_SCATTER ? 0 : -1;
}

nx_status nx_ptx_lib_emit(const nx_kernel *k, const char *name, bool reassoc, char **src,
                          size_t *len, nx_ptx_launch *launch)
{
    *src = NULL;
    *len = 0;
    nx_ctx *ctx = k->ctx;
    const char *why = nx_ptx_lib_unsupported(k);
    if (why)
        return nx_rt_error(ctx, NX_ERR_UNSUPPORTED, "CUDA library kernels: kernel %s: %s",
                           k->name, why);
    *launch = (nx_ptx_launch){.shape = NX_PTX_POINTS, .blocks_per_point = 1};
    text t = {.ctx = ctx};
    put(&t, "// nitrix library kernel %s (%s)\n%s", k->name, nx_ir_prim_name(k->lib_prim),
        k->has_prologue || k->has_epilogue ? nx_ptx_prelude : prelude);
    switch (k->lib_prim) {
    case NX_PRIM_SORT:
    case NX_PRIM_ARGSORT:
        emit_sort(&t, k, name, launch);
        break;
    case NX_PRIM_SCAN:
        emit_scan(&t, k, name, launch);
        break;
    case NX_PRIM_SCAN_LINEAR:
        emit_scan_linear(&t, k, name, launch);
        break;
    case NX_PRIM_SCAN_IIR:
        emit_scan_iir(&t, k, name, launch);
        break;
    case NX_PRIM_EXTERN:
        nx_ptx_extern_emit(&t, k, name, launch);
        break;
    case NX_PRIM_SCATTER:
        emit_scatter(&t, k, name, reassoc, launch);
        break;
    default: /* nx_ptx_lib_unsupported refused it above */
        nx_rt_free(ctx, t.p, t.cap);
        return nx_rt_error(ctx, NX_ERR_INTERNAL, "CUDA library kernels: kernel %s: %s", k->name,
                           nx_ptx_no_emitter(k->lib_prim));
    }
    if (t.failed) {
        nx_rt_free(ctx, t.p, t.cap);
        return nx_rt_nomem(ctx, "CUDA library kernel (source text)", t.cap * 2);
    }
    *src = t.p;
    *len = t.cap;
    return NX_OK;
}

const char *nx_ptx_kernel_unsupported(const nx_kernel *k)
{
    return k->kind == NX_KERNEL_LIBRARY ? nx_ptx_lib_unsupported(k) : nx_ptx_unsupported(k);
}

nx_status nx_ptx_kernel_emit(const nx_kernel *k, const char *name, bool reassoc, char **src,
                             size_t *len, nx_ptx_launch *launch)
{
    if (k->kind == NX_KERNEL_LIBRARY)
        return nx_ptx_lib_emit(k, name, reassoc, src, len, launch);
    return nx_ptx_emit(k, name, reassoc, src, len, launch);
}
