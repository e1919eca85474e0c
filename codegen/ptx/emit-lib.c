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

/* ---- scan ----------------------------------------------------------------------------------*/

/* The carry step of ir/prim-reduce.c (nx_ir_monoid_step) on element v, into a (and nan, s). */
static void scan_step(text *t, int m, int d)
{
    const char *T = ctype(d);
    switch (m) {
    case NX_MONOID_SUM:
    case NX_MONOID_PROD:
        if (is_f(d))
            put(t, "            a = a %c v;\n", m == NX_MONOID_SUM ? '+' : '*');
        else
            put(t, "            a = (%s)%s((i64)a, (i64)v);\n", T,
                m == NX_MONOID_SUM ? "nx_add" : "nx_mul");
        put(t, "            const %s r = a;\n", T);
        break;
    case NX_MONOID_MAX:
    case NX_MONOID_MIN:
        if (is_f(d))
            put(t, "            if (v != v) nan = 1; else if (v %s a) a = v;\n",
                m == NX_MONOID_MAX ? ">" : "<");
        else
            put(t, "            if (v %s a) a = v;\n", m == NX_MONOID_MAX ? ">" : "<");
        if (is_f(d))
            put(t, "            const %s r = nan ? (%s)NX_NAN : a;\n", T, T);
        else
            put(t, "            const %s r = a;\n", T);
        break;
    default: /* LOGSUMEXP: a double carry (m, s), s rounded to the dtype after each step */
        put(t, "            const double xv = (double)v;\n");
        put(t, "            if (xv != xv) nan = 1;\n");
        put(t, "            else if (xv != -NX_INF) {\n");
        put(t, "                if (xv > m) { s = s * exp(m - xv) + 1; m = xv; }\n");
        put(t, "                else if (xv == m) s += 1;\n");
        put(t, "                else s += exp(xv - m);\n");
        if (d == NX_DTYPE_F32)
            put(t, "                s = (double)(float)s;\n");
        put(t, "            }\n");
        put(t, "            const %s r = nan ? (%s)NX_NAN : (%s)(isinf(m) ? m : m + log(s));\n", T,
            T, T);
        break;
    }
}

static void emit_scan(text *t, const nx_kernel *k, const char *name, nx_ptx_launch *launch)
{
    const nx_kbuf *x = &k->bufs[0];
    int axis = (int)k->attrs[0], m = (int)k->attrs[1], d = x->dtype;
    bool rev = k->attrs[2] != 0;
    int64_t len = x->shape[axis], inner = prod(x->shape, axis + 1, x->ndim);
    int64_t lines = prod(x->shape, 0, axis) * inner;
    const char *T = ctype(d);
    signature(t, k, name);
    put(t, thread_loop, NX_PTX_THREADS, NX_PTX_THREADS);
    put(t, "        const i64 base = (p / %lldLL) * %lldLL + p %% %lldLL;\n",
        (long long)(inner ? inner : 1), (long long)(len * inner), (long long)(inner ? inner : 1));
    if (m == NX_MONOID_LOGSUMEXP)
        put(t, "        double m = -NX_INF, s = 0;\n");
    else
        put(t, "        %s a = %s;\n", T,
            m == NX_MONOID_SUM    ? "0"
            : m == NX_MONOID_PROD ? "1"
                                  : limit_text(d, m == NX_MONOID_MAX));
    put(t, "        int nan = 0;\n        (void)nan;\n");
    put(t, "        for (i64 q = 0; q < %lldLL; q++) {\n", (long long)len);
    put(t, "            const i64 off = base + (%s) * %lldLL;\n",
        rev ? "LENM1 - q" : "q", (long long)(inner ? inner : 1));
    put(t, "            const %s v = b0[off];\n", T);
    scan_step(t, m, d);
    put(t, "            b1[off] = r;\n        }\n    }\n}\n");
    launch->points = len > 0 ? lines : 0;
}

/* ---- scan_linear ---------------------------------------------------------------------------*/

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

static void emit_scan_linear(text *t, const nx_kernel *k, const char *name,
                             nx_ptx_launch *launch)
{
    const nx_kbuf *y = &k->bufs[2];
    int axis = (int)k->attrs[0], nd = y->ndim;
    bool rev = k->attrs[1] != 0, f32 = y->dtype == NX_DTYPE_F32;
    int64_t sa[NX_MAX_DIMS], sb[NX_MAX_DIMS], sy[NX_MAX_DIMS];
    bcast_strides(&k->bufs[0], nd, sa);
    bcast_strides(&k->bufs[1], nd, sb);
    bcast_strides(y, nd, sy);
    int64_t len = y->shape[axis], lines = 1;
    for (int d = 0; d < nd; d++)
        lines *= d == axis ? 1 : y->shape[d];
    const char *T = ctype(y->dtype);
    signature(t, k, name);
    put(t, thread_loop, NX_PTX_THREADS, NX_PTX_THREADS);
    put(t, "        i64 rem = p, oa = 0, ob = 0, oy = 0, c;\n");
    for (int d = nd - 1; d >= 0; d--) {
        if (d == axis)
            continue;
        long long e = y->shape[d] ? (long long)y->shape[d] : 1;
        put(t, "        c = rem %% %lldLL; rem /= %lldLL;\n", e, e);
        put(t, "        oa += c * %lldLL; ob += c * %lldLL; oy += c * %lldLL;\n", (long long)sa[d],
            (long long)sb[d], (long long)sy[d]);
    }
    put(t, "        (void)rem; (void)c;\n");
    put(t, "        %s acc = 0;\n", T);
    put(t, "        for (i64 q = 0; q < %lldLL; q++) {\n", (long long)len);
    put(t, "            const i64 s = %s;\n", rev ? "LENM1 - q" : "q");
    put(t, "            acc = %s(%s(b0[oa + s * %lldLL], acc), b1[ob + s * %lldLL]);\n",
        f32 ? "__fadd_rn" : "__dadd_rn", f32 ? "__fmul_rn" : "__dmul_rn", (long long)sa[axis],
        (long long)sb[axis]);
    put(t, "            b2[oy + s * %lldLL] = acc;\n        }\n    }\n}\n", (long long)sy[axis]);
    launch->points = len > 0 ? lines : 0;
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

static bool bufs_are(const nx_kernel *k, int nin)
{
    if (k->nbufs != nin + 1 || k->bufs[nin].role != NX_KBUF_OUT)
        return false;
    for (int b = 0; b < k->nbufs; b++)
        if (nx_ir_is_half(k->bufs[b].dtype))
            return false;
    return true;
}

const char *nx_ptx_lib_unsupported(const nx_kernel *k)
{
    if (k->kind != NX_KERNEL_LIBRARY)
        return "not a library kernel";
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
    case NX_PRIM_SCATTER:
        return bufs_are(k, 3) && k->nattrs == 2
                   ? NULL
                   : "a scatter kernel without inputs x, idx, updates, one output and [axis, "
                     "monoid]";
    case NX_PRIM_EXTERN:
        return "extern runs a host routine (user C code) and has no device implementation";
    case NX_PRIM_REDUCE_CUSTOM:
        return "reduce_custom's monoid (graph expressions) has no device implementation yet";
    default:
        return "a library primitive with no device implementation";
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
        prelude);
    const nx_kbuf *o = &k->bufs[k->nbufs - 1];
    int axis = (int)k->attrs[0];
    if (k->lib_prim == NX_PRIM_SCAN || k->lib_prim == NX_PRIM_SCAN_LINEAR)
        put(&t, "#define LENM1 %lldLL\n", (long long)o->shape[axis] - 1);
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
    default:
        emit_scatter(&t, k, name, reassoc, launch);
        break;
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
