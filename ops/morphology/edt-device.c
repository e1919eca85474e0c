/* The device half of distance_transform_edt's fast driver: one extern per axis whose CUDA C
 * (nx_extern_device) runs the pass on the GPU, with host references that reuse the envelope of
 * edt-host.c. The op and its drivers: distance_transform_edt.c. */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "morph.h"
#include "nitrix-graph.h"
#include "nitrix-ops.h"
#include "pool.h"

/* ---- the device driver: one extern per axis, each with CUDA C --------------------------------
 *
 * On the CUDA backend the fast driver is a chain of per-axis extern passes (nx_extern_device),
 * each a kernel of its own, and nothing else: the first pass reads the mask itself (0 is a
 * source, anything else, NaN included, is not: the field's rule), so the whole plan is those
 * kernels and runs on the device. The passes read the sampling from its constant (f64[nd]) at
 * run time. Arithmetic is f64 rounded to the output at each store, as the CPU's passes, except
 * where every value is an exact integer below 2^24 (unit sampling, nx_morph_edt_window_exact_f32,
 * decided when the graph is built): then f32 gives the same values with half the FP64 work, the
 * device's scarce pipe here.
 *
 *   first   along axis 0 (the outermost: lines are strided, so consecutive threads take adjacent
 *           lines and every step's loads and stores coalesce): one thread per line, the squared
 *           distance to the nearest source on either side by two sweeps. The forward sweep
 *           parks the distance to the left source in the output (an exact integer, or +inf; 0
 *           marks a source), so the backward sweep reads only the output.
 *   window  along axes 1 .. nd-1: one thread per place, the minimum of f[q] and f[q -+ k] +
 *           s2 k^2 for k = 1, 2, ... until s2 k^2 reaches the minimum (no farther place can win:
 *           values are >= 0) or both ends are passed. The sums are the CPU window's and
 *           envelope's, (s2 k) k + f, rounded apart (__dmul_rn/__dadd_rn, never an FMA).
 *           Neighbouring threads are neighbouring places of the contiguous axis, or adjacent
 *           lines of a strided one, so each step's loads coalesce (and hit L1 for the next k).
 *           Cost per place is the distance found along the axis, so a field with sources a
 *           few places apart (the bench's 1 %) takes a few steps, and the worst case (an axis
 *           with no source on any of its lines yet) is the line's length per place.
 *   The last pass stores the square root (sqrtf / sqrt, correctly rounded, as the CPU's).
 * Every pass's host reference is the CPU code above, so the chain also runs (and is checked)
 * wherever the device does not. */
typedef struct edt_pass {
    int axis;
    bool first, root, exact;
} edt_pass;

static void axis_split(const int64_t *shape, int nd, int axis, int64_t *outer, int64_t *n,
                       int64_t *inner)
{
    *outer = 1;
    *inner = 1;
    for (int i = 0; i < axis; i++)
        *outer *= shape[i];
    for (int i = axis + 1; i < nd; i++)
        *inner *= shape[i];
    *n = shape[axis];
}

/* first: any mask dtype but f16/bf16 -> f64 for an f64 mask, else f32; window: f32/f64 kept. */
static nx_status pass_shape(void *user, int n_in, const nx_dtype *dtypes, const int *ndims,
                            const int64_t *const *shapes, nx_dtype *out_dtype, int *out_ndim,
                            int64_t out_shape[NX_MAX_DIMS])
{
    const edt_pass *ps = user;
    if (n_in != 2 || ps->axis >= ndims[0])
        return NX_ERR_SHAPE;
    nx_dtype in[2] = {dtypes[0], dtypes[1]};
    if (ps->first && in[0] != NX_DTYPE_F16 && in[0] != NX_DTYPE_BF16)
        in[0] = in[0] == NX_DTYPE_F64 ? NX_DTYPE_F64 : NX_DTYPE_F32;
    return nx_morph_edt_shape(NULL, n_in, in, ndims, shapes, out_dtype, out_ndim, out_shape);
}

/* The first pass on the host along any axis: the two sweeps over each strided line. */
typedef struct strided_first {
    const nx_tensor *in;
    nx_tensor *out;
    int64_t n, inner;
    double s2;
    bool root;
} strided_first;

static bool is_source(const nx_tensor *t, int64_t i)
{
    const void *d = nx_tensor_data(t);
    switch (nx_tensor_dtype(t)) {
    case NX_DTYPE_F64:
        return ((const double *)d)[i] == 0;
    case NX_DTYPE_F32:
        return ((const float *)d)[i] == 0;
    case NX_DTYPE_I64:
        return ((const int64_t *)d)[i] == 0;
    case NX_DTYPE_I32:
        return ((const int32_t *)d)[i] == 0;
    case NX_DTYPE_I16:
        return ((const int16_t *)d)[i] == 0;
    case NX_DTYPE_I8:
        return ((const int8_t *)d)[i] == 0;
    default: /* u8, bool */
        return ((const uint8_t *)d)[i] == 0;
    }
}

static double out_at(const nx_tensor *t, int64_t i)
{
    return nx_tensor_dtype(t) == NX_DTYPE_F64 ? ((const double *)nx_tensor_data(t))[i]
                                              : (double)((const float *)nx_tensor_data(t))[i];
}

static void store_at(nx_tensor *t, int64_t i, double v, bool root)
{
    if (nx_tensor_dtype(t) == NX_DTYPE_F64)
        ((double *)nx_tensor_data(t))[i] = root ? sqrt(v) : v;
    else
        ((float *)nx_tensor_data(t))[i] = root ? sqrtf((float)v) : (float)v;
}

static void strided_first_chunk(void *user, int64_t begin, int64_t end, int chunk)
{
    (void)chunk;
    const strided_first *j = user;
    int64_t n = j->n, inner = j->inner;
    for (int64_t line = begin; line < end; line++) {
        int64_t base = line / inner * n * inner + line % inner, last = -1;
        for (int64_t q = 0; q < n; q++) {
            last = is_source(j->in, base + q * inner) ? q : last;
            store_at(j->out, base + q * inner, last < 0 ? INFINITY : (double)(q - last), false);
        }
        int64_t next = -1;
        for (int64_t q = n - 1; q >= 0; q--) {
            double d = out_at(j->out, base + q * inner);
            next = d == 0 ? q : next;
            if (next >= 0 && (double)(next - q) < d)
                d = (double)(next - q);
            store_at(j->out, base + q * inner, isinf(d) ? INFINITY : j->s2 * d * d, j->root);
        }
    }
}

static nx_status pass_reference(void *user, nx_ctx *ctx, int n_in, const nx_tensor *const *ins,
                                nx_tensor *out)
{
    (void)n_in;
    const edt_pass *ps = user;
    const nx_tensor *f = ins[0];
    int nd = nx_tensor_ndim(f);
    double s[NX_MAX_DIMS];
    memcpy(s, nx_tensor_data(ins[1]), (size_t)nd * sizeof(double));
    if (nx_tensor_numel(f) == 0)
        return NX_OK;
    int64_t outer, n, inner;
    axis_split(nx_tensor_shape(f), nd, ps->axis, &outer, &n, &inner);
    if (ps->first) {
        strided_first j = {f, out, n, inner, s[ps->axis] * s[ps->axis], ps->root};
        return nx_rt_parallel_for(ctx, outer * inner, 64, strided_first_chunk, &j);
    }
    memcpy(nx_tensor_data(out), nx_tensor_data(f),
           (size_t)nx_tensor_numel(f) * nx_dtype_size(nx_tensor_dtype(f)));
    return nx_morph_edt_envelope_axis(ctx, nx_tensor_data(out), nx_tensor_dtype(f) == NX_DTYPE_F64,
                                      nd, nx_tensor_shape(f), ps->axis, s[ps->axis], ps->root,
                                      nx_morph_edt_window_exact_f32(nd, nx_tensor_shape(f), s));
}

/* Shared by both kernels: the types (M the input's, T the output's, C the arithmetic's), the
 * line geometry as constants, the index type (32-bit below 2^30 elements, so p + stride fits),
 * the sampling's square and the store. */
static const char pass_prelude[] =
    "typedef %s M;\n"
    "typedef %s T;\n"
    "typedef %s C;\n"
    "typedef %s I;\n"
    "#define N ((I)%lld)\n"
    "#define INNER ((I)%lld)\n"
    "#define MUL %s\n"
    "#define ADD %s\n"
    "static __device__ __forceinline__ void put(T *y, I at, C v)\n"
    "{\n"
    "    y[at] = %s;\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256)\n"
    "%s(const M *__restrict__ f, const double *__restrict__ sampling, T *__restrict__ y,\n"
    "   long long points)\n"
    "{\n"
    "    const C s2 = (C)__dmul_rn(sampling[%d], sampling[%d]);\n"
    "    const C inf = (C)__longlong_as_double(0x7ff0000000000000LL);\n"
    "    for (I p = (I)blockIdx.x * 256 + (I)threadIdx.x; p < (I)points;\n"
    "         p += (I)gridDim.x * 256) {\n";

static const char first_body[] =
    "        const I base = p / INNER * N * INNER + p % INNER;\n"
    "        I last = -1;\n"
    "#pragma unroll 8\n"
    "        for (I q = 0; q < N; q++) {\n"
    "            last = f[base + q * INNER] == (M)0 ? q : last;\n"
    "            y[base + q * INNER] = last < 0 ? (T)inf : (T)(q - last);\n"
    "        }\n"
    "        I next = -1;\n"
    "#pragma unroll 8\n"
    "        for (I q = N - 1; q >= 0; q--) {\n"
    "            C d = (C)y[base + q * INNER];\n"
    "            next = d == (C)0 ? q : next;\n"
    "            if (next >= 0 && (C)(next - q) < d)\n"
    "                d = (C)(next - q);\n"
    "            put(y, base + q * INNER, d == inf ? inf : MUL(MUL(s2, d), d));\n"
    "        }\n"
    "    }\n"
    "}\n";

static const char window_body[] = "        const I q = p / INNER % N;\n"
                                  "        const M *line = f + (p - q * INNER);\n"
                                  "        C acc = (C)f[p];\n"
                                  "        for (I k = 1;; k++) {\n"
                                  "            const C c = MUL(MUL(s2, (C)k), (C)k);\n"
                                  "            if (!(acc > c) || (q < k && q + k >= N))\n"
                                  "                break;\n"
                                  "            if (q >= k) {\n"
                                  "                const C x = ADD((C)line[(q - k) * INNER], c);\n"
                                  "                acc = x < acc ? x : acc;\n"
                                  "            }\n"
                                  "            if (q + k < N) {\n"
                                  "                const C x = ADD((C)line[(q + k) * INNER], c);\n"
                                  "                acc = x < acc ? x : acc;\n"
                                  "            }\n"
                                  "        }\n"
                                  "        put(y, p, acc);\n"
                                  "    }\n"
                                  "}\n";

static const char *cuda_type(nx_dtype d)
{
    switch (d) {
    case NX_DTYPE_F64:
        return "double";
    case NX_DTYPE_F32:
        return "float";
    case NX_DTYPE_I64:
        return "long long";
    case NX_DTYPE_I32:
        return "int";
    case NX_DTYPE_I16:
        return "short";
    case NX_DTYPE_I8:
        return "signed char";
    default: /* u8, bool */
        return "unsigned char";
    }
}

static int pass_source(void *user, int n_in, const nx_dtype *dtypes, const int *ndims,
                       const int64_t *const *shapes, const char *kernel, char *buf, size_t cap,
                       int64_t *points)
{
    const edt_pass *ps = user;
    nx_dtype od;
    int ond;
    int64_t osh[NX_MAX_DIMS];
    if (pass_shape(user, n_in, dtypes, ndims, shapes, &od, &ond, osh) != NX_OK)
        return -1;
    int64_t outer, n, inner, numel = 1;
    axis_split(shapes[0], ndims[0], ps->axis, &outer, &n, &inner);
    for (int i = 0; i < ndims[0]; i++)
        numel *= shapes[0][i];
    /* the first sweep parks exact integer distances in the output's dtype */
    if (ps->first && od == NX_DTYPE_F32 && n >= (1 << 24))
        return -1;
    bool f64 = od == NX_DTYPE_F64, i32 = numel < (1 << 30);
    const char *store = ps->root ? (f64 ? "sqrt((double)v)" : "sqrtf((float)v)") : "(T)v";
    *points = ps->first ? outer * inner : numel;
    int head = snprintf(buf, cap, pass_prelude, cuda_type(dtypes[0]), cuda_type(od),
                        ps->exact ? "float" : "double", i32 ? "int" : "long long", (long long)n,
                        (long long)inner, ps->exact ? "__fmul_rn" : "__dmul_rn",
                        ps->exact ? "__fadd_rn" : "__dadd_rn", store, kernel, ps->axis, ps->axis);
    if (head < 0)
        return -1;
    size_t used = (size_t)head < cap ? (size_t)head : cap;
    int body =
        snprintf(buf ? buf + used : NULL, cap - used, "%s", ps->first ? first_body : window_body);
    return body < 0 ? -1 : head + body;
}

/* The passes by [first][root][exact][axis]. */
#define PASS(F, R, E, A)                                                                           \
    {                                                                                              \
        .axis = A, .first = F, .root = R, .exact = E                                               \
    }
#define PASS_AXES(F, R, E)                                                                         \
    {                                                                                              \
        PASS(F, R, E, 0), PASS(F, R, E, 1), PASS(F, R, E, 2), PASS(F, R, E, 3), PASS(F, R, E, 4),  \
            PASS(F, R, E, 5), PASS(F, R, E, 6), PASS(F, R, E, 7)                                   \
    }
#define BY_EXACT(X, F, R)                                                                          \
    {                                                                                              \
        X(F, R, 0), X(F, R, 1)                                                                     \
    }
#define BY_ROOT(X, F)                                                                              \
    {                                                                                              \
        BY_EXACT(X, F, 0), BY_EXACT(X, F, 1)                                                       \
    }
static const edt_pass pass_info[2][2][2][NX_MAX_DIMS] = {BY_ROOT(PASS_AXES, 0),
                                                         BY_ROOT(PASS_AXES, 1)};
#define DEF(F, R, E, A)                                                                            \
    {                                                                                              \
        .name = F ? "edt_first_pass" : "edt_window_pass", .shape = pass_shape,                     \
        .reference = pass_reference, .user = (void *)&pass_info[F][R][E][A]                        \
    }
#define DEF_AXES(F, R, E)                                                                          \
    {                                                                                              \
        DEF(F, R, E, 0), DEF(F, R, E, 1), DEF(F, R, E, 2), DEF(F, R, E, 3), DEF(F, R, E, 4),       \
            DEF(F, R, E, 5), DEF(F, R, E, 6), DEF(F, R, E, 7)                                      \
    }
static const nx_extern_def pass_defs[2][2][2][NX_MAX_DIMS] = {BY_ROOT(DEF_AXES, 0),
                                                              BY_ROOT(DEF_AXES, 1)};
#define DEV(F, R, E, A)                                                                            \
    {                                                                                              \
        .source = pass_source, .user = (void *)&pass_info[F][R][E][A]                              \
    }
#define DEV_AXES(F, R, E)                                                                          \
    {                                                                                              \
        DEV(F, R, E, 0), DEV(F, R, E, 1), DEV(F, R, E, 2), DEV(F, R, E, 3), DEV(F, R, E, 4),       \
            DEV(F, R, E, 5), DEV(F, R, E, 6), DEV(F, R, E, 7)                                      \
    }
static const nx_extern_device_def pass_devs[2][2][2][NX_MAX_DIMS] = {BY_ROOT(DEV_AXES, 0),
                                                                     BY_ROOT(DEV_AXES, 1)};

/* The device driver's chain from a mask (0 at sources: the field itself will do): the first pass
 * along axis 0, then a window pass per later axis; the last pass takes the square root. */
nx_node nx_morph_edt_device_node(nx_graph *g, nx_node mask, const double *sampling)
{
    int nd = nx_node_ndim(g, mask);
    int64_t shape[NX_MAX_DIMS];
    if (nd < 1 || nd > NX_MAX_DIMS || !nx_node_shape(g, mask, shape))
        return NX_NONE;
    double s[NX_MAX_DIMS];
    int64_t n = nd;
    for (int i = 0; i < nd; i++)
        s[i] = sampling ? sampling[i] : 1.0;
    int exact = nx_morph_edt_window_exact_f32(nd, shape, s);
    nx_node sv = nx_constant(g, NX_DTYPE_F64, 1, &n, s), y = mask;
    for (int a = 0; a < nd; a++) {
        int first = a == 0, root = a == nd - 1;
        y = nx_extern_device(g, &pass_defs[first][root][exact][a],
                             &pass_devs[first][root][exact][a], 2, (nx_node[]){y, sv});
    }
    return y;
}
