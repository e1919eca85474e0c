/* scatter on the host.
 *
 *   y = x; y[p, idx[j], q] (+)= u[p, j, q] for j ascending (idx flattened in C order); an index
 *   outside [0, n) drops its update. (+) is SUM (integers wrap), MAX or MIN (a NaN operand makes
 *   the result NaN, as numpy.maximum / minimum).
 *
 * Attributes [axis, monoid]; buffers x, idx (i32 or i64), u, y. Targets (p, ., q) with different
 * p or q never meet, so tasks are (p, block of q) pairs; within a task j ascends, which keeps the
 * order of the updates each target sees and so the float sums' rounding. */
#include <math.h>
#include <string.h>

#include "codegen/x86/lib.h"

#define QBLOCK 4096 /* elements of q per task: the rows a task updates stay in L1/L2 */

typedef struct scatter_job {
    const void *x, *idx, *u;
    void *y;
    bool idx64;
    int64_t p, n, j, q, qtasks;
} scatter_job;

static int64_t index_at(const scatter_job *s, int64_t j)
{
    return s->idx64 ? ((const int64_t *)s->idx)[j] : ((const int32_t *)s->idx)[j];
}

#define FSUM(a, b) ((a) + (b))
#define FMAX(a, b) (isnan(a) || isnan(b) ? NAN : (b) > (a) ? (b) : (a))
#define FMIN(a, b) (isnan(a) || isnan(b) ? NAN : (b) < (a) ? (b) : (a))
#define IMAX(a, b) ((b) > (a) ? (b) : (a))
#define IMIN(a, b) ((b) < (a) ? (b) : (a))

#define SCATTER_ROWS(NAME, T, OP)                                                                  \
    static void NAME(const scatter_job *s, int64_t task)                                          \
    {                                                                                              \
        int64_t p = task / s->qtasks, q0 = (task % s->qtasks) * QBLOCK;                            \
        int64_t nq = s->q - q0 < QBLOCK ? s->q - q0 : QBLOCK;                                      \
        T *y = (T *)s->y + p * s->n * s->q + q0;                                                   \
        const T *u = (const T *)s->u + p * s->j * s->q + q0;                                       \
        for (int64_t j = 0; j < s->j; j++) {                                                       \
            int64_t t = index_at(s, j);                                                            \
            if (t < 0 || t >= s->n)                                                                \
                continue;                                                                          \
            T *yr = y + t * s->q;                                                                  \
            const T *ur = u + j * s->q;                                                            \
            for (int64_t i = 0; i < nq; i++)                                                       \
                yr[i] = OP(yr[i], ur[i]);                                                          \
        }                                                                                          \
    }

/* Integer sums wrap, as an int64 sum truncated to the dtype does. */
#define ISUM_T(T, U)                                                                               \
    static inline T isum_##T(T a, T b)                                                             \
    {                                                                                              \
        return (T)((U)a + (U)b);                                                                   \
    }
ISUM_T(int8_t, uint8_t)
ISUM_T(int16_t, uint16_t)
ISUM_T(int32_t, uint32_t)
ISUM_T(int64_t, uint64_t)
ISUM_T(uint8_t, uint8_t)

#define SCATTER_INT(T)                                                                             \
    SCATTER_ROWS(sum_##T, T, isum_##T)                                                             \
    SCATTER_ROWS(max_##T, T, IMAX)                                                                 \
    SCATTER_ROWS(min_##T, T, IMIN)

SCATTER_ROWS(sum_float, float, FSUM)
SCATTER_ROWS(max_float, float, FMAX)
SCATTER_ROWS(min_float, float, FMIN)
SCATTER_ROWS(sum_double, double, FSUM)
SCATTER_ROWS(max_double, double, FMAX)
SCATTER_ROWS(min_double, double, FMIN)
SCATTER_INT(int8_t)
SCATTER_INT(int16_t)
SCATTER_INT(int32_t)
SCATTER_INT(int64_t)
SCATTER_INT(uint8_t)

typedef void (*rows_fn)(const scatter_job *, int64_t);

/* The row routine by dtype and monoid (0 sum, 1 max, 2 min); NULL for a dtype scatter refuses. */
static rows_fn rows_for(nx_dtype d, int which)
{
#define ROW3(T)                                                                                    \
    {                                                                                              \
        sum_##T, max_##T, min_##T                                                                  \
    }
    static const rows_fn table[NX_DTYPE_COUNT][3] = {
        [NX_DTYPE_F32] = ROW3(float),  [NX_DTYPE_F64] = ROW3(double),
        [NX_DTYPE_I8] = ROW3(int8_t),  [NX_DTYPE_I16] = ROW3(int16_t),
        [NX_DTYPE_I32] = ROW3(int32_t), [NX_DTYPE_I64] = ROW3(int64_t),
        [NX_DTYPE_U8] = ROW3(uint8_t),
    };
#undef ROW3
    return d < NX_DTYPE_COUNT ? table[d][which] : NULL;
}

typedef struct scatter_run {
    scatter_job job;
    rows_fn fn;
} scatter_run;

static void scatter_chunk(void *user, int64_t begin, int64_t end, int chunk)
{
    (void)chunk;
    const scatter_run *r = user;
    for (int64_t t = begin; t < end; t++)
        r->fn(&r->job, t);
}

nx_status nx_x86_lib_scatter(const nx_x86_lib_call *c)
{
    const nx_kernel *k = c->k;
    const nx_kbuf *x = &k->bufs[0], *ib = &k->bufs[1];
    int axis = (int)k->attrs[0];
    int64_t m = k->attrs[1];
    int which = m == NX_MONOID_SUM ? 0 : m == NX_MONOID_MAX ? 1 : 2;
    rows_fn fn = rows_for((nx_dtype)x->dtype, which);
    if (!fn)
        return nx_rt_error(c->ctx, NX_ERR_INTERNAL,
                           "CPU backend: scatter kernel %s over %s; expected f32, f64 or an "
                           "integer dtype",
                           k->name, nx_dtype_name(x->dtype));
    nx_x86_axis g = nx_x86_axis_of(x->ndim, x->shape, axis);
    size_t bytes = (size_t)(g.outer * g.len * g.inner) * nx_dtype_size(x->dtype);
    if (bytes)
        memcpy(c->bufs[k->nbufs - 1], c->bufs[0], bytes);
    scatter_run r = {{.x = c->bufs[0], .idx = c->bufs[1], .u = c->bufs[2],
                      .y = c->bufs[k->nbufs - 1], .idx64 = ib->dtype == NX_DTYPE_I64,
                      .p = g.outer, .n = g.len, .j = nx_ir_numel(ib->ndim, ib->shape),
                      .q = g.inner},
                     fn};
    /* Nothing to combine: an empty output (no pointer arithmetic on its NULL data), or no updates.
     * With n == 0 every index is out of range and dropped anyway. */
    if (r.job.p == 0 || r.job.q == 0 || r.job.j == 0 || r.job.n == 0)
        return NX_OK;
    r.job.qtasks = (r.job.q + QBLOCK - 1) / QBLOCK;
    int64_t per = r.job.j * (r.job.q < QBLOCK ? r.job.q : QBLOCK);
    return nx_x86_lib_parallel(c->ctx, r.job.p * r.job.qtasks, per, scatter_chunk, &r);
}
