/* Compensated sums as extern primitives (numerics.h: nx_num_compensated): Kahan's and
 * Neumaier's summation and Ogita-Rump-Oishi's Dot2 along the last axis of lines [B, n].
 *
 * Why an extern and not IR: each is a sequential recurrence whose carry is a (sum, error) pair in
 * a fixed left-to-right order. The IR's built-in SUM fold may be reassociated by the CPU backend
 * (`fadd reassoc`, vectorised and split across threads) and the GPU's tree reductions, and its
 * custom monoids (nx_reduce_custom) run on the interpreter on the CPU, have no device code and no
 * adjoint. As an extern, the recurrence is this file's C, compiled with the library (no fast-math;
 * -std=c17 turns GCC's contraction off, and clang's default contracts only within an expression,
 * where no step here has a product feeding a sum; Dot2's products are split exactly with fma or
 * in double), and on the device
 * NVRTC code written with the _rn intrinsics (__dadd_rn, __fmul_rn, __fma_rn...), which the
 * compiler never contracts or reassociates whatever --fmad says. The adjoint is registered: the
 * sums' gradient is the cotangent broadcast along the line, Dot2's is cot * b and cot * a, built
 * in the graph, so the ops are differentiable through the IR. */
#include <math.h>
#include <stdio.h>

#include "ops/numerics/numerics.h"
#include "pool.h"

typedef struct comp_kind {
    nx_num_comp kind;
} comp_kind;

static nx_status comp_shape(void *user, int n_in, const nx_dtype *dtypes, const int *ndims,
                            const int64_t *const *shapes, nx_dtype *out_dtype, int *out_ndim,
                            int64_t out_shape[NX_MAX_DIMS])
{
    const comp_kind *k = user;
    int want = k->kind == NX_NUM_DOT2 ? 2 : 1;
    if (n_in != want || ndims[0] != 2 || (dtypes[0] != NX_DTYPE_F32 && dtypes[0] != NX_DTYPE_F64))
        return NX_ERR_SHAPE;
    if (want == 2 && (dtypes[1] != dtypes[0] || ndims[1] != 2 || shapes[1][0] != shapes[0][0] ||
                      shapes[1][1] != shapes[0][1]))
        return NX_ERR_SHAPE;
    *out_dtype = dtypes[0];
    *out_ndim = 1;
    out_shape[0] = shapes[0][0];
    return NX_OK;
}

#define KAHAN(T)                                                                                   \
    T s = 0, c = 0;                                                                                \
    for (int64_t i = 0; i < n; i++) {                                                              \
        T v = x[i] - c;                                                                            \
        T t = s + v;                                                                               \
        T z = t - s;                                                                               \
        c = z - v;                                                                                 \
        s = t;                                                                                     \
    }                                                                                              \
    return s

#define NEUMAIER(T, ABS)                                                                           \
    T s = 0, c = 0;                                                                                \
    for (int64_t i = 0; i < n; i++) {                                                              \
        T t = s + x[i];                                                                            \
        T e;                                                                                       \
        if (ABS(s) >= ABS(x[i])) {                                                                 \
            e = s - t;                                                                             \
            e = e + x[i];                                                                          \
        } else {                                                                                   \
            e = x[i] - t;                                                                          \
            e = e + s;                                                                             \
        }                                                                                          \
        c = c + e;                                                                                 \
        s = t;                                                                                     \
    }                                                                                              \
    return s + c

static double kahan_f64(const double *x, int64_t n)
{
    KAHAN(double);
}
static float kahan_f32(const float *x, int64_t n)
{
    KAHAN(float);
}
static double neumaier_f64(const double *x, int64_t n)
{
    NEUMAIER(double, fabs);
}
static float neumaier_f32(const float *x, int64_t n)
{
    NEUMAIER(float, fabsf);
}

/* TwoSum (Knuth): a + b = *s + *e exactly. */
#define TWO_SUM(T, a, b, s, e)                                                                     \
    do {                                                                                           \
        T s_ = (a) + (b);                                                                          \
        T z_ = s_ - (a);                                                                           \
        T u_ = s_ - z_;                                                                            \
        T e1_ = (a)-u_;                                                                            \
        T e2_ = (b)-z_;                                                                            \
        *(e) = e1_ + e2_;                                                                          \
        *(s) = s_;                                                                                 \
    } while (0)

/* TwoProduct: a b = *p + *e exactly (fma in f64; the f32 product is exact in double). */
static void two_prod_f64(double a, double b, double *p, double *e)
{
    double h = a * b;
    *p = h;
    *e = fma(a, b, -h);
}

static void two_prod_f32(float a, float b, float *p, float *e)
{
    double full = (double)a * (double)b;
    float h = (float)full;
    *p = h;
    *e = (float)(full - (double)h);
}

#define DOT2(T, PROD)                                                                              \
    T p, s;                                                                                        \
    PROD(x[0], y[0], &p, &s);                                                                      \
    for (int64_t i = 1; i < n; i++) {                                                              \
        T h, r, q;                                                                                 \
        PROD(x[i], y[i], &h, &r);                                                                  \
        TWO_SUM(T, p, h, &p, &q);                                                                  \
        T qr = q + r;                                                                              \
        s = s + qr;                                                                                \
    }                                                                                              \
    return p + s

static double dot2_f64(const double *x, const double *y, int64_t n)
{
    DOT2(double, two_prod_f64);
}
static float dot2_f32(const float *x, const float *y, int64_t n)
{
    DOT2(float, two_prod_f32);
}

typedef struct comp_job {
    nx_num_comp kind;
    bool f64;
    int64_t n;
    const void *a, *b;
    void *out;
} comp_job;

static void comp_rows(void *user, int64_t begin, int64_t end, int chunk)
{
    (void)chunk;
    const comp_job *j = user;
    for (int64_t r = begin; r < end; r++) {
        size_t off = (size_t)(r * j->n);
        if (j->f64) {
            const double *x = (const double *)j->a + off,
                         *y = j->b ? (const double *)j->b + off : NULL;
            double v = j->kind == NX_NUM_KAHAN      ? kahan_f64(x, j->n)
                       : j->kind == NX_NUM_NEUMAIER ? neumaier_f64(x, j->n)
                                                    : dot2_f64(x, y, j->n);
            ((double *)j->out)[r] = v;
        } else {
            const float *x = (const float *)j->a + off,
                        *y = j->b ? (const float *)j->b + off : NULL;
            float v = j->kind == NX_NUM_KAHAN      ? kahan_f32(x, j->n)
                      : j->kind == NX_NUM_NEUMAIER ? neumaier_f32(x, j->n)
                                                   : dot2_f32(x, y, j->n);
            ((float *)j->out)[r] = v;
        }
    }
}

static nx_status comp_reference(void *user, nx_ctx *ctx, int n_in, const nx_tensor *const *ins,
                                nx_tensor *out)
{
    const comp_kind *k = user;
    int64_t rows = nx_tensor_shape(ins[0])[0], n = nx_tensor_shape(ins[0])[1];
    comp_job j = {.kind = k->kind,
                  .f64 = nx_tensor_dtype(ins[0]) == NX_DTYPE_F64,
                  .n = n,
                  .a = nx_tensor_data(ins[0]),
                  .b = n_in > 1 ? nx_tensor_data(ins[1]) : NULL,
                  .out = nx_tensor_data(out)};
    if (rows <= 0 || n <= 0)
        return NX_OK;
    int64_t grain = n >= 65536 ? 1 : 65536 / n;
    return nx_rt_parallel_for(ctx, rows, grain, comp_rows, &j);
}

static nx_status comp_vjp(void *user, nx_graph *g, int n_in, const nx_node *ins, nx_node out,
                          nx_node cot, nx_node *in_cot)
{
    const comp_kind *k = user;
    (void)out;
    int64_t shape[NX_MAX_DIMS] = {0};
    nx_node_shape(g, ins[0], shape);
    int64_t col[2] = {shape[0], 1};
    nx_node c = nx_reshape(g, cot, 2, col);
    if (k->kind == NX_NUM_DOT2 && n_in == 2) {
        in_cot[0] = nx_mul(g, c, ins[1]);
        in_cot[1] = nx_mul(g, c, ins[0]);
    } else {
        in_cot[0] = nx_broadcast(g, c, 2, shape);
    }
    return nx_graph_status(g);
}

/* The device kernels: one thread per line, the recurrence in the _rn intrinsics. */
static const char dev_prelude[] =
    "typedef %s T;\n"
    "#define N %lldLL\n"
    "#define ADD %s\n"
    "#define SUB %s\n"
    "#define FMA %s\n"
    "#define ABS %s\n"
    "#define MUL %s\n"
    "extern \"C\" __global__ void %s(const T *a, %sT *y, long long points)\n"
    "{\n"
    "    for (long long p = blockIdx.x * 256LL + threadIdx.x; p < points;\n"
    "         p += (long long)gridDim.x * 256LL) {\n"
    "        const T *x = a + p * N;\n";

static const char dev_kahan[] = "        T s = 0, c = 0;\n"
                                "        for (long long i = 0; i < N; i++) {\n"
                                "            T v = SUB(x[i], c);\n"
                                "            T t = ADD(s, v);\n"
                                "            c = SUB(SUB(t, s), v);\n"
                                "            s = t;\n"
                                "        }\n"
                                "        y[p] = s;\n"
                                "    }\n"
                                "}\n";

static const char dev_neumaier[] = "        T s = 0, c = 0;\n"
                                   "        for (long long i = 0; i < N; i++) {\n"
                                   "            T t = ADD(s, x[i]);\n"
                                   "            T e = ABS(s) >= ABS(x[i]) ? ADD(SUB(s, t), x[i])\n"
                                   "                                      : ADD(SUB(x[i], t), s);\n"
                                   "            c = ADD(c, e);\n"
                                   "            s = t;\n"
                                   "        }\n"
                                   "        y[p] = ADD(s, c);\n"
                                   "    }\n"
                                   "}\n";

static const char dev_dot2[] = "        const T *w = b + p * N;\n"
                               "        T q = MUL(x[0], w[0]);\n"
                               "        T s = FMA(x[0], w[0], -q);\n"
                               "        for (long long i = 1; i < N; i++) {\n"
                               "            T h = MUL(x[i], w[i]);\n"
                               "            T r = FMA(x[i], w[i], -h);\n"
                               "            T t = ADD(q, h);\n"
                               "            T z = SUB(t, q);\n"
                               "            T e = ADD(SUB(q, SUB(t, z)), SUB(h, z));\n"
                               "            q = t;\n"
                               "            s = ADD(s, ADD(e, r));\n"
                               "        }\n"
                               "        y[p] = ADD(q, s);\n"
                               "    }\n"
                               "}\n";

static int comp_source(void *user, int n_in, const nx_dtype *dtypes, const int *ndims,
                       const int64_t *const *shapes, const char *kernel, char *buf, size_t cap,
                       int64_t *points)
{
    const comp_kind *k = user;
    nx_dtype od;
    int ond;
    int64_t osh[NX_MAX_DIMS];
    if (comp_shape(user, n_in, dtypes, ndims, shapes, &od, &ond, osh) != NX_OK)
        return -1;
    bool f64 = od == NX_DTYPE_F64;
    *points = shapes[0][0];
    int head = snprintf(buf, cap, dev_prelude, f64 ? "double" : "float", (long long)shapes[0][1],
                        f64 ? "__dadd_rn" : "__fadd_rn", f64 ? "__dsub_rn" : "__fsub_rn",
                        f64 ? "__fma_rn" : "__fmaf_rn", f64 ? "fabs" : "fabsf",
                        f64 ? "__dmul_rn" : "__fmul_rn", kernel,
                        k->kind == NX_NUM_DOT2 ? "const T *b, " : "");
    if (head < 0)
        return -1;
    size_t used = (size_t)head < cap ? (size_t)head : cap;
    const char *body = k->kind == NX_NUM_KAHAN      ? dev_kahan
                       : k->kind == NX_NUM_NEUMAIER ? dev_neumaier
                                                    : dev_dot2;
    int tail = snprintf(buf ? buf + used : NULL, cap - used, "%s", body);
    return tail < 0 ? -1 : head + tail;
}

static const comp_kind kinds[3] = {{NX_NUM_KAHAN}, {NX_NUM_NEUMAIER}, {NX_NUM_DOT2}};

static const nx_extern_def defs[3] = {
    {.name = "kahan_sum",
     .shape = comp_shape,
     .reference = comp_reference,
     .vjp = comp_vjp,
     .user = (void *)&kinds[0]},
    {.name = "neumaier_sum",
     .shape = comp_shape,
     .reference = comp_reference,
     .vjp = comp_vjp,
     .user = (void *)&kinds[1]},
    {.name = "compensated_dot",
     .shape = comp_shape,
     .reference = comp_reference,
     .vjp = comp_vjp,
     .user = (void *)&kinds[2]},
};

static const nx_extern_device_def devs[3] = {
    {.source = comp_source, .user = (void *)&kinds[0]},
    {.source = comp_source, .user = (void *)&kinds[1]},
    {.source = comp_source, .user = (void *)&kinds[2]},
};

nx_node nx_num_compensated(nx_graph *g, nx_num_comp kind, nx_node a, nx_node b)
{
    nx_node ins[2] = {a, b};
    return nx_extern_device(g, &defs[kind], &devs[kind], kind == NX_NUM_DOT2 ? 2 : 1, ins);
}

/* The sums' op: x (and y for Dot2) over the axes of `axis` (every axis when not given). */
nx_status nx_num_comp_check(const nx_op_args *c, nx_num_comp kind)
{
    const nx_num_axes *ax = &((const nx_num_sum_args *)c->opts)->axis;
    nx_status st = nx_num_check_float(c, 0, c->info->inputs[0]);
    if (st == NX_OK && kind == NX_NUM_DOT2) {
        st = nx_num_check_same_shape(c, 1, c->info->inputs[1]);
        if (st == NX_OK && nx_tensor_dtype(c->in[1]) != nx_tensor_dtype(c->in[0]))
            return nx_rt_error(c->ctx, NX_ERR_DTYPE,
                               "%s: %s is %s and %s %s; expected equal "
                               "dtypes",
                               c->who, c->info->inputs[1], nx_dtype_name(nx_tensor_dtype(c->in[1])),
                               c->info->inputs[0], nx_dtype_name(nx_tensor_dtype(c->in[0])));
    }
    int axes[NX_MAX_DIMS], n;
    if (st == NX_OK)
        st = nx_num_resolve_axes(c, ax, nx_tensor_ndim(c->in[0]), true, "axis", axes, &n);
    return st;
}

nx_status nx_num_comp_build(nx_graph *g, const nx_op_args *c, nx_num_comp kind, nx_node *outs)
{
    const nx_num_axes *ax = &((const nx_num_sum_args *)c->opts)->axis;
    const nx_tensor *xt = c->in[0];
    nx_dtype dt = nx_tensor_dtype(xt);
    int nd = nx_tensor_ndim(xt), axes[NX_MAX_DIMS], n = 0;
    nx_status st = nx_num_resolve_axes(c, ax, nd, true, "axis", axes, &n);
    if (st != NX_OK)
        return st;
    nx_node a = nx_parameter(g, c->info->inputs[0], dt, nd, nx_tensor_shape(xt));
    nx_node b = kind == NX_NUM_DOT2
                    ? nx_parameter(g, c->info->inputs[1], dt, nd, nx_tensor_shape(xt))
                    : NX_NONE;
    nx_node la = nx_num_to_lines(g, a, n, axes);
    nx_node lb = b != NX_NONE ? nx_num_to_lines(g, b, n, axes) : NX_NONE;
    nx_node s = nx_num_compensated(g, kind, la, lb);
    int64_t kept[NX_MAX_DIMS];
    int nk = 0;
    bool red[NX_MAX_DIMS] = {false};
    for (int i = 0; i < n; i++)
        red[axes[i]] = true;
    for (int k = 0; k < nd; k++)
        if (!red[k])
            kept[nk++] = nx_tensor_shape(xt)[k];
    outs[0] = nx_reshape(g, s, nk, kept);
    return nx_graph_status(g);
}

const nx_op_opt nx_num_comp_opts[1] = {
    {"axis", NX_OPT_INTS, "(all axes)", NULL, NX_MAX_DIMS,
     "the axes summed; negative counts from the end; not given: every axis (a 0-d result)"},
};
