/* Vectorised elementwise kernels for the CUDA emitter (docs/cuda.md).
 *
 * Recognised: a LOOP kernel without reductions whose every load reads either the point's own
 * element (offset = the point's linear index) or one fixed element, and whose point-wise buffers
 * (the loads of the first kind and the stores) all have 4-byte (f32, i32) or all 8-byte (f64, i64)
 * elements. Each thread then moves 16-byte vectors (float4, int4, double2, longlong2): two of
 * them per buffer per step of a grid-stride loop, loaded before any is used, so that every thread
 * keeps 32 bytes per input in flight. The scalar body runs once per lane, unchanged, so results
 * equal the plain kernel's. The vectors need 16-byte aligned pointers; a kernel checks that once
 * and otherwise, and for the last P mod W points, takes the scalar loop. */
#include <string.h>

#include "codegen/ptx/emit-tile.h"

#define THREADS 256

typedef struct vec {
    int64_t points;
    int w;                             /* lanes per vector */
    bool ident[NX_KERNEL_MAX_BUFFERS]; /* buffers read at the point's own element */
    bool stored[NX_KERNEL_MAX_BUFFERS];
} vec;

static int elem_class(int dtype)
{
    if (dtype == NX_DTYPE_F32 || dtype == NX_DTYPE_I32)
        return 4;
    if (dtype == NX_DTYPE_F64 || dtype == NX_DTYPE_I64)
        return 8;
    return 0;
}

static const char *vtype(int dtype)
{
    switch (dtype) {
    case NX_DTYPE_F32:
        return "float4";
    case NX_DTYPE_I32:
        return "int4";
    case NX_DTYPE_F64:
        return "double2";
    default:
        return "longlong2";
    }
}

/* 1: the offset is the point's linear index; 0: one fixed element; -1: neither. */
static int offset_kind(const nx_kernel *k, const nx_ptx_affine *a)
{
    if (!a->ok)
        return -1;
    bool ident = a->c == 0, fixed = true;
    int64_t s = 1;
    for (int l = k->ndim - 1; l >= 0; l--) {
        if (k->extent[l] > 1) {
            ident = ident && a->coef[l] == s;
            fixed = fixed && a->coef[l] == 0;
        }
        s *= k->extent[l];
    }
    return ident ? 1 : fixed ? 0 : -1;
}

static bool match(const nx_kernel *k, const nx_ptx_affine *aff, vec *v)
{
    if (k->kind != NX_KERNEL_LOOP || k->nloops != k->ndim || k->nstores < 1)
        return false;
    v->points = nx_ir_numel(k->ndim, k->extent);
    int es = 0;
    for (int id = 0; id < k->ninst; id++) {
        const nx_kinst *in = &k->inst[id];
        if (in->op == NX_KOP_REDUCE)
            return false;
        if (in->op != NX_KOP_LOAD)
            continue;
        int kind = offset_kind(k, &aff[in->a[1]]);
        if (kind < 0)
            return false;
        if (kind == 1) {
            int c = elem_class(k->bufs[in->a[0]].dtype);
            if (!c || (es && c != es))
                return false;
            es = c;
            v->ident[in->a[0]] = true;
        }
    }
    for (int s = 0; s < k->nstores; s++) {
        int b = k->stores[s].buf, c = elem_class(k->bufs[b].dtype);
        if (!c || (es && c != es) || v->stored[b])
            return false;
        es = c;
        v->stored[b] = true;
    }
    v->w = 16 / es;
    return v->points >= v->w;
}

static void emit_params(nx_ptx_gen *g)
{
    const nx_kernel *k = g->k;
    for (int b = 0; b < k->nbufs; b++)
        nx_ptx_put(&g->t, "%s%s *__restrict__ b%d, ", k->bufs[b].role == NX_KBUF_IN ? "const " : "",
                   nx_ptx_ctype(k->bufs[b].dtype), b);
}

/* nx_point(buffers, p, l<b> for each point-wise input b, o<b> for each stored buffer b). */
static void emit_point_fn(nx_ptx_gen *g, const vec *v, const nx_ptx_affine *aff)
{
    const nx_kernel *k = g->k;
    nx_ptx_put(&g->t, "static __device__ __forceinline__ void nx_point(");
    emit_params(g);
    nx_ptx_put(&g->t, "i64 p");
    for (int b = 0; b < k->nbufs; b++)
        if (v->ident[b])
            nx_ptx_put(&g->t, ", const %s l%d", nx_ptx_ctype(k->bufs[b].dtype), b);
    for (int b = 0; b < k->nbufs; b++)
        if (v->stored[b])
            nx_ptx_put(&g->t, ", %s *o%d", nx_ptx_ctype(k->bufs[b].dtype), b);
    nx_ptx_put(&g->t, ")\n{\n");
    g->ind = 1;
    nx_ptx_emit_point_index(g, "p");
    for (int id = 0; id < k->ninst; id++) {
        const nx_kinst *in = &k->inst[id];
        if (in->op == NX_KOP_LOAD && v->ident[in->a[0]] && offset_kind(k, &aff[in->a[1]]) == 1)
            nx_ptx_line(g, "const %s v%d = l%d;", nx_ptx_ctype(in->dtype), id, in->a[0]);
        else
            nx_ptx_emit_inst(g, id);
    }
    for (int s = 0; s < k->nstores; s++)
        nx_ptx_line(g, "*o%d = v%d;", k->stores[s].buf, k->stores[s].value);
    for (int b = 0; b < k->nbufs; b++)
        nx_ptx_line(g, "(void)b%d;", b);
    nx_ptx_put(&g->t, "}\n\n");
}

/* One call of nx_point per lane of vector step u (x<u>_<b> inputs, y<u>_<b> outputs). */
static void emit_lane_calls(nx_ptx_gen *g, const vec *v, int u)
{
    const nx_kernel *k = g->k;
    static const char lane[] = "xyzw";
    for (int w = 0; w < v->w; w++) {
        char buf[1024];
        size_t n = 0;
        buf[0] = 0;
        for (int b = 0; b < k->nbufs && n < sizeof buf; b++)
            n += (size_t)snprintf(buf + n, sizeof buf - n, "b%d, ", b);
        if (n < sizeof buf)
            n += (size_t)snprintf(buf + n, sizeof buf - n, "q%d * %d + %d", u, v->w, w);
        for (int b = 0; b < k->nbufs && n < sizeof buf; b++)
            if (v->ident[b])
                n += (size_t)snprintf(buf + n, sizeof buf - n, ", x%d_%d.%c", u, b, lane[w]);
        for (int b = 0; b < k->nbufs && n < sizeof buf; b++)
            if (v->stored[b])
                n += (size_t)snprintf(buf + n, sizeof buf - n, ", &y%d_%d.%c", u, b, lane[w]);
        if (n >= sizeof buf) {
            g->t.failed = true;
            return;
        }
        nx_ptx_line(g, "nx_point(%s);", buf);
    }
}

static void emit_vector_steps(nx_ptx_gen *g, const vec *v, int nu)
{
    const nx_kernel *k = g->k;
    for (int u = 0; u < nu; u++)
        for (int b = 0; b < k->nbufs; b++)
            if (v->ident[b])
                nx_ptx_line(g, "const %s x%d_%d = ((const %s *)b%d)[q%d];", vtype(k->bufs[b].dtype),
                            u, b, vtype(k->bufs[b].dtype), b, u);
    for (int u = 0; u < nu; u++) {
        for (int b = 0; b < k->nbufs; b++)
            if (v->stored[b])
                nx_ptx_line(g, "%s y%d_%d;", vtype(k->bufs[b].dtype), u, b);
        emit_lane_calls(g, v, u);
        for (int b = 0; b < k->nbufs; b++)
            if (v->stored[b])
                nx_ptx_line(g, "((%s *)b%d)[q%d] = y%d_%d;", vtype(k->bufs[b].dtype), b, u, u, b);
    }
}

static void emit_kernel(nx_ptx_gen *g, const vec *v, const char *name)
{
    const nx_kernel *k = g->k;
    nx_ptx_put(&g->t, "extern \"C\" __global__ void __launch_bounds__(%d)\n%s(", THREADS, name);
    emit_params(g);
    nx_ptx_put(&g->t, "i64 points)\n{\n");
    g->ind = 1;
    nx_ptx_line(g, "(void)points;");
    nx_ptx_line(g, "const i64 nth = (i64)gridDim.x * %d;", THREADS);
    nx_ptx_line(g, "const i64 tid = (i64)blockIdx.x * %d + threadIdx.x;", THREADS);
    nx_ptx_line(g, "unsigned long long bits = 0;");
    for (int b = 0; b < k->nbufs; b++)
        if (v->ident[b] || v->stored[b])
            nx_ptx_line(g, "bits |= (unsigned long long)b%d;", b);
    nx_ptx_line(g, "const i64 nq = bits %% 16 == 0 ? %lldLL : 0;", (long long)(v->points / v->w));
    nx_ptx_line(g, "i64 q0 = tid;");
    nx_ptx_line(g, "for (; q0 + nth < nq; q0 += 2 * nth) {");
    g->ind++;
    nx_ptx_line(g, "const i64 q1 = q0 + nth;");
    emit_vector_steps(g, v, 2);
    g->ind--;
    nx_ptx_line(g, "}");
    nx_ptx_line(g, "if (q0 < nq) {");
    g->ind++;
    emit_vector_steps(g, v, 1);
    g->ind--;
    nx_ptx_line(g, "}");
    nx_ptx_line(g, "for (i64 p = nq * %d + tid; p < %lldLL; p += nth) {", v->w,
                (long long)v->points);
    g->ind++;
    char buf[1024];
    size_t n = 0;
    buf[0] = 0;
    for (int b = 0; b < k->nbufs && n < sizeof buf; b++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "b%d, ", b);
    if (n < sizeof buf)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "p");
    for (int b = 0; b < k->nbufs && n < sizeof buf; b++)
        if (v->ident[b])
            n += (size_t)snprintf(buf + n, sizeof buf - n, ", b%d[p]", b);
    for (int b = 0; b < k->nbufs && n < sizeof buf; b++)
        if (v->stored[b])
            n += (size_t)snprintf(buf + n, sizeof buf - n, ", &b%d[p]", b);
    if (n >= sizeof buf)
        g->t.failed = true;
    else
        nx_ptx_line(g, "nx_point(%s);", buf);
    g->ind--;
    nx_ptx_line(g, "}");
    nx_ptx_put(&g->t, "}\n");
}

bool nx_ptx_emit_vec(nx_ptx_gen *g, const nx_ptx_affine *aff, const char *name,
                     nx_ptx_launch *launch)
{
    vec v;
    memset(&v, 0, sizeof v);
    if (!match(g->k, aff, &v))
        return false;
    emit_point_fn(g, &v, aff);
    emit_kernel(g, &v, name);
    int64_t threads = (v.points / v.w + 1) / 2;
    launch->shape = NX_PTX_POINTS;
    launch->points = threads > 0 ? threads : 1;
    launch->fold_len = 0;
    g->blocks = 1;
    g->block_r = -1;
    return true;
}
