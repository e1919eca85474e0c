/* The host half of distance_transform_edt's fast driver (felzenszwalb): the lower envelope of
 * parabolas per line with its SSE tiles and the short-distance window, and the extern that runs it
 * (nx_morph_edt_fast_node). The op, its drivers and why an extern: distance_transform_edt.c.
 * The device twin (CUDA C of the same passes) is edt-device.c. */
#include <math.h>
#include <string.h>
#if defined(__SSE__)
#include <immintrin.h>
#endif

#include "internal.h"
#include "morph.h"
#include "nitrix-graph.h"
#include "nitrix-ops.h"
#include "pool.h"

/* ---- the lower envelope -------------------------------------------------------------------*/

/* Lines of one axis, processed in tiles of up to TILE neighbouring lines: line (o, i) starts at
 * o * n * inner + i, with stride inner. A tile copies its lines into contiguous rows (one cache
 * line of f32 per step along the axis for the strided axes), runs the envelope on each row in
 * cache and writes the rows back, so no pass walks memory with a stride inside its scan. */
#define TILE 16
#define PREFETCH 8

typedef struct envelope_job {
    void *data; /* f32 or f64, squared distances in place */
    bool f64;
    bool root;      /* the last pass: write square roots */
    bool lanes_f32; /* the window runs in f32 (exact: nx_morph_edt_window_exact_f32) */
    int64_t outer, n, inner, ntiles_inner;
    double s2;       /* squared sampling of the axis */
    double *scratch; /* per chunk: TILE rows of n twice, then h, fv, zn, zd and v (n + 1 each) */
    size_t scratch_per_chunk;
} envelope_job;

/* The envelope's breakpoints are kept as fractions zn / zd (zd > 0) and compared by cross
 * multiplication, so no division sits on the scan's dependency chain; with integer squared
 * distances (unit sampling) every product is an exact integer below 2^53 and the comparisons are
 * exact. The stack holds each kept parabola's place v, value fv and h in entries 1..k. */
typedef struct envelope_scratch {
    double *h, *fv, *zn, *zd; /* n + 1 each */
    int32_t *v;
} envelope_scratch;

/* f[q] <- min_p f[p] + s2 (q - p)^2 over the finite f[p] (in place); +inf where every f[p] is
 * +inf. Parabola p is s2 x^2 - 2 s2 p x + h[p] with h[p] = f[p] + s2 p^2; parabolas p < q meet
 * at x = (h[q] - h[p]) / (2 s2 (q - p)). Entry 1 of the stack, the first parabola, has
 * zn = -inf and is never popped. */
static void envelope_line(double *f, int64_t n, double s2, const envelope_scratch *w)
{
    double *h = w->h, *fv = w->fv, *zn = w->zn, *zd = w->zd, two_s2 = 2.0 * s2;
    int32_t *v = w->v;
    int64_t k = 0;
    for (int64_t q = 0; q < n; q++) {
        double fq = f[q];
        if (isinf(fq))
            continue;
        double hq = fq + s2 * (double)q * (double)q, num = -INFINITY, den = 1;
        for (; k > 0; k--) {
            num = hq - h[k];
            den = two_s2 * (double)(q - v[k]);
            if (num * zd[k] > zn[k] * den) /* q takes over after v[k] does: keep v[k] */
                break;
        }
        k++;
        v[k] = (int32_t)q;
        fv[k] = fq;
        h[k] = hq;
        zn[k] = num;
        zd[k] = den;
    }
    if (k == 0)
        return; /* no source on the line: it stays +inf */
    /* Parabola j holds the places q with z[j] < q <= z[j + 1]: fill each run of places up to
     * floor(z[j + 1]) (exact for integer fractions: a quotient m - 1/zd never rounds up to m),
     * with no data-dependent step per place. */
    int64_t q = 0;
    for (int64_t j = 1; j <= k && q < n; j++) {
        int64_t end = n;
        if (j < k) {
            double z = w->zn[j + 1] / w->zd[j + 1];
            end = z < 0 ? 0 : z >= (double)n ? n : (int64_t)z + 1;
        }
        double vj = w->v[j], fj = w->fv[j];
        for (; q < end; q++) {
            double dq = (double)q - vj;
            f[q] = s2 * dq * dq + fj;
        }
    }
}

static void tile_load(const envelope_job *j, int64_t base, int64_t m, double *rows)
{
    int64_t n = j->n, inner = j->inner;
    for (int64_t q = 0; q < n; q++) {
        int64_t at = base + q * inner;
        /* strided rows: ask for a row a few steps ahead (hardware prefetchers do not follow
         * strides of a page or more) */
        if (inner > TILE && q + PREFETCH < n)
            __builtin_prefetch((const char *)j->data + (at + PREFETCH * inner) * (j->f64 ? 8 : 4));
        if (j->f64) {
            const double *src = (const double *)j->data + at;
            for (int64_t l = 0; l < m; l++)
                rows[l * n + q] = src[l];
        } else {
            const float *src = (const float *)j->data + at;
            for (int64_t l = 0; l < m; l++)
                rows[l * n + q] = (double)src[l];
        }
    }
}

static void tile_store(const envelope_job *j, int64_t base, int64_t m, const double *rows)
{
    int64_t n = j->n, inner = j->inner;
    for (int64_t q = 0; q < n; q++) {
        int64_t at = base + q * inner;
        if (inner > TILE && q + PREFETCH < n)
            __builtin_prefetch((char *)j->data + (at + PREFETCH * inner) * (j->f64 ? 8 : 4), 1);
        if (j->f64) {
            double *dst = (double *)j->data + at;
            for (int64_t l = 0; l < m; l++)
                dst[l] = j->root ? sqrt(rows[l * n + q]) : rows[l * n + q];
        } else {
            float *dst = (float *)j->data + at;
            for (int64_t l = 0; l < m; l++)
                dst[l] = j->root ? sqrtf((float)rows[l * n + q]) : (float)rows[l * n + q];
        }
    }
}

/* ---- small values: a window that stops where no farther place can win --------------------*/

/* Each place q of a tile's TILE lines (stored [q][TILE], lanes past m are 0) takes the minimum of
 * t[q] and t[q -+ k] + s2 k^2 for k = 1, 2, ... and stops at the first k with s2 k^2 >= every
 * lane's minimum so far: values are >= 0, so no place k or more away can lower it. On the bench's
 * 1 % sources that is a few steps per place (the distances themselves), where the envelope pays
 * data-dependent branches on every parabola; the steps run over the TILE lines at once in
 * fixed-width loops the compiler vectorises. A place still open after WINDOW_MAX steps (far
 * sources, lines without any) fails the tile, which then takes the envelope. The sums are the
 * envelope's own (f[p] + s2 t t, same order of operations), so both give the same minimum. */
#define WINDOW_MAX 32
#define WINDOW_SKIP 8 /* tiles sent straight to the envelope after a failed window */

/* The library is built for baseline x86-64, where a step over the 16 lanes takes four SSE
 * operations (eight in f64); the window's kernels (and the first pass's) are also built for AVX2
 * and AVX-512, and the dynamic linker picks one for the running CPU once (an ifunc). The kernels
 * have no multiply-add to contract and no reassociation, so every clone computes the same values.
 */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__ELF__)
#define WINDOW_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define WINDOW_CLONES
#endif

/* f32 lanes, used where every sum is an exact integer (unit sampling, squared distances of the
 * whole array below 2^24, nx_morph_edt_window_exact_f32): then f32 gives the f64 results at twice
 * the lanes. */
WINDOW_CLONES static bool window_f32(const float *restrict t, float *restrict d, int64_t n)
{
    for (int64_t q = 0; q < n; q++) {
        float acc[TILE];
        memcpy(acc, t + q * TILE, sizeof acc);
        for (int64_t k = 1;; k++) {
            float c = (float)(k * k);
            int open = 0;
            for (int l = 0; l < TILE; l++)
                open |= acc[l] > c;
            if (!open || (q < k && q + k >= n))
                break;
            if (k > WINDOW_MAX)
                return false;
            for (int side = 0; side < 2; side++) {
                int64_t p = side ? q + k : q - k;
                if (p < 0 || p >= n)
                    continue;
                const float *tp = t + p * TILE;
                for (int l = 0; l < TILE; l++) {
                    float x = tp[l] + c;
                    acc[l] = x < acc[l] ? x : acc[l];
                }
            }
        }
        memcpy(d + q * TILE, acc, sizeof acc);
    }
    return true;
}

/* The same in f64 for any sampling (s2 > 0). */
WINDOW_CLONES static bool window_f64(const double *restrict t, double *restrict d, int64_t n,
                                     double s2)
{
    for (int64_t q = 0; q < n; q++) {
        double acc[TILE];
        memcpy(acc, t + q * TILE, sizeof acc);
        for (int64_t k = 1;; k++) {
            double c = s2 * (double)k * (double)k;
            int open = 0;
            for (int l = 0; l < TILE; l++)
                open |= acc[l] > c;
            if (!open || (q < k && q + k >= n))
                break;
            if (k > WINDOW_MAX)
                return false;
            for (int side = 0; side < 2; side++) {
                int64_t p = side ? q + k : q - k;
                if (p < 0 || p >= n)
                    continue;
                const double *tp = t + p * TILE;
                for (int l = 0; l < TILE; l++) {
                    double x = tp[l] + c;
                    acc[l] = x < acc[l] ? x : acc[l];
                }
            }
        }
        memcpy(d + q * TILE, acc, sizeof acc);
    }
    return true;
}

/* The tile's m lines as [q][TILE] lanes of the window's type, zeros past m. A full tile of f32
 * into f32 lanes (the bench's case) is a copy of one cache line per place. */
static void window_load(const envelope_job *j, int64_t base, int64_t m, void *t)
{
    int64_t n = j->n, inner = j->inner;
    bool copy = j->lanes_f32 && !j->f64 && m == TILE;
    for (int64_t q = 0; q < n; q++) {
        int64_t at = base + q * inner;
        if (inner > TILE && q + PREFETCH < n)
            __builtin_prefetch((const char *)j->data + (at + PREFETCH * inner) * (j->f64 ? 8 : 4));
        if (copy) {
            memcpy((float *)t + q * TILE, (const float *)j->data + at, TILE * sizeof(float));
        } else if (j->lanes_f32) {
            float *row = (float *)t + q * TILE;
            for (int64_t l = 0; l < TILE; l++)
                row[l] = l >= m   ? 0
                         : j->f64 ? (float)((const double *)j->data)[at + l]
                                  : ((const float *)j->data)[at + l];
        } else {
            double *row = (double *)t + q * TILE;
            for (int64_t l = 0; l < TILE; l++)
                row[l] = l >= m   ? 0
                         : j->f64 ? ((const double *)j->data)[at + l]
                                  : (double)((const float *)j->data)[at + l];
        }
    }
}

/* dst[l] = sqrt(src[l]) for TILE lanes: sqrtps where there is SSE (sqrtf keeps errno semantics,
 * so the compiler leaves it scalar); both round correctly, so the values are sqrtf's. */
static void sqrt_row(float *restrict dst, const float *restrict src)
{
#if defined(__SSE__)
    for (int l = 0; l < TILE; l += 4)
        _mm_storeu_ps(dst + l, _mm_sqrt_ps(_mm_loadu_ps(src + l)));
#else
    for (int l = 0; l < TILE; l++)
        dst[l] = sqrtf(src[l]);
#endif
}

static void window_store(const envelope_job *j, int64_t base, int64_t m, const void *d)
{
    int64_t n = j->n, inner = j->inner;
    if (j->lanes_f32 && !j->f64 && m == TILE) {
        for (int64_t q = 0; q < n; q++) {
            const float *src = (const float *)d + q * TILE;
            float *dst = (float *)j->data + base + q * inner;
            if (!j->root) {
                memcpy(dst, src, TILE * sizeof(float));
                continue;
            }
            sqrt_row(dst, src);
        }
        return;
    }
    for (int64_t q = 0; q < n; q++) {
        int64_t at = base + q * inner;
        for (int64_t l = 0; l < m; l++) {
            double v =
                j->lanes_f32 ? ((const float *)d)[q * TILE + l] : ((const double *)d)[q * TILE + l];
            if (j->f64)
                ((double *)j->data)[at + l] = j->root ? sqrt(v) : v;
            else
                ((float *)j->data)[at + l] = j->root ? sqrtf((float)v) : (float)v;
        }
    }
}

/* The window on one tile, stored when it succeeded; t and d hold TILE n lanes each. */
static bool window_tile(const envelope_job *j, int64_t base, int64_t m, void *t, void *d)
{
    window_load(j, base, m, t);
    bool ok = j->lanes_f32 ? window_f32(t, d, j->n) : window_f64(t, d, j->n, j->s2);
    if (ok)
        window_store(j, base, m, d);
    return ok;
}

static void envelope_chunk(void *user, int64_t begin, int64_t end, int chunk)
{
    const envelope_job *j = user;
    int64_t n = j->n;
    double *rows = j->scratch + (size_t)chunk * j->scratch_per_chunk, *win = rows + TILE * n;
    envelope_scratch w = {.h = win + TILE * n};
    w.fv = w.h + n + 1;
    w.zn = w.fv + n + 1;
    w.zd = w.zn + n + 1;
    w.v = (int32_t *)(w.zd + n + 1);
    int skip = 0;
    for (int64_t b = begin; b < end; b++) {
        int64_t o = b / j->ntiles_inner, i0 = (b % j->ntiles_inner) * TILE;
        int64_t m = j->inner - i0 < TILE ? j->inner - i0 : TILE;
        int64_t base = o * n * j->inner + i0;
        if (skip > 0)
            skip--;
        else if (window_tile(j, base, m, rows, win))
            continue;
        else
            skip = WINDOW_SKIP;
        tile_load(j, base, m, rows);
        for (int64_t l = 0; l < m; l++)
            envelope_line(rows + l * n, n, j->s2, &w);
        tile_store(j, base, m, rows);
    }
}

nx_status nx_morph_edt_envelope_axis(nx_ctx *ctx, void *data, bool f64, int nd,
                                     const int64_t *shape, int axis, double spacing, bool root,
                                     bool lanes_f32)
{
    envelope_job j = {.data = data,
                      .f64 = f64,
                      .root = root,
                      .lanes_f32 = lanes_f32,
                      .outer = 1,
                      .n = shape[axis],
                      .inner = 1,
                      .s2 = spacing * spacing};
    for (int i = 0; i < axis; i++)
        j.outer *= shape[i];
    for (int i = axis + 1; i < nd; i++)
        j.inner *= shape[i];
    j.ntiles_inner = (j.inner + TILE - 1) / TILE;
    int64_t items = j.outer * j.ntiles_inner;
    int threads = 1;
    nx_status st = nx_rt_pool_threads(ctx, &threads);
    if (st != NX_OK)
        return st;
    int nchunks = nx_rt_pool_chunks(items, 1, threads);
    /* TILE rows twice (the envelope's rows, or the window's t and d), then h, fv, zn, zd and v
     * (int32, counted as a double each), n + 1 each */
    j.scratch_per_chunk = (size_t)(2 * TILE * j.n + 5 * (j.n + 1));
    size_t bytes = (size_t)nchunks * j.scratch_per_chunk * sizeof(double);
    j.scratch = nx_rt_alloc(ctx, bytes);
    if (!j.scratch)
        return nx_rt_nomem(ctx, "distance_transform_edt: envelope scratch", bytes);
    st = nx_rt_parallel_for(ctx, items, 1, envelope_chunk, &j);
    nx_rt_free(ctx, j.scratch, bytes);
    return st;
}

/* The first pass sees the binary field (0 or +inf), where the squared distance along a line is
 * that to the nearest source on either side: two sweeps, no envelope. It reads the input and
 * writes the output, so no copy precedes the envelope passes. The sweeps keep integer offsets in
 * a scratch line (no float conversions on their dependency chains, and one dtype test per line);
 * an offset past n means no source on that side. */
typedef struct first_job {
    const void *in;
    void *out;
    bool f64;
    bool root; /* a 1-D field: this is the last pass */
    int64_t n;
    double s2;
    int64_t *scratch; /* n per chunk */
} first_job;

/* The field holds +0 or +inf (the entry point's select), so a source is an all-zero bit pattern:
 * an integer test the compiler turns into a conditional move, where a float compare branches. */
static void first_sweeps(const first_job *j, int64_t base, int64_t *dist)
{
    int64_t n = j->n, last = -2 * n - 2;
    if (j->f64) {
        const uint64_t *in = (const uint64_t *)j->in + base;
        for (int64_t q = 0; q < n; q++) {
            last = in[q] == 0 ? q : last;
            dist[q] = q - last;
        }
    } else {
        const uint32_t *in = (const uint32_t *)j->in + base;
        for (int64_t q = 0; q < n; q++) {
            last = in[q] == 0 ? q : last;
            dist[q] = q - last;
        }
    }
    int64_t next = 3 * n + 2;
    for (int64_t q = n - 1; q >= 0; q--) {
        int64_t d = dist[q];
        next = d == 0 ? q : next;
        dist[q] = next - q < d ? next - q : d;
    }
}

/* s2 d d in f64, then the output's dtype: the values the envelope's own sums give. */
WINDOW_CLONES static void first_chunk(void *user, int64_t begin, int64_t end, int chunk)
{
    const first_job *j = user;
    int64_t n = j->n, *dist = j->scratch + chunk * n;
    double s2 = j->s2;
    for (int64_t line = begin; line < end; line++) {
        first_sweeps(j, line * n, dist);
        if (j->f64) {
            double *out = (double *)j->out + line * n;
            for (int64_t q = 0; q < n; q++) {
                double d = (double)dist[q];
                out[q] = dist[q] > n ? INFINITY : s2 * d * d;
            }
            for (int64_t q = 0; j->root && q < n; q++)
                out[q] = sqrt(out[q]);
        } else {
            float *out = (float *)j->out + line * n;
            for (int64_t q = 0; q < n; q++) {
                double d = (double)dist[q];
                out[q] = dist[q] > n ? INFINITY : (float)(s2 * d * d);
            }
            for (int64_t q = 0; j->root && q < n; q++)
                out[q] = sqrtf(out[q]);
        }
    }
}

/* With unit sampling every value the passes make, and every sum the window forms, is a squared
 * distance between places of the array: an integer no greater than sum_i (n_i - 1)^2. Below 2^24
 * (up to ~2896^2 places in 2-D, ~2365^3 in 3-D) f32 holds them all exactly. */
bool nx_morph_edt_window_exact_f32(int nd, const int64_t *shape, const double *s)
{
    double top = 0;
    for (int i = 0; i < nd; i++) {
        if (s[i] != 1.0)
            return false;
        top += (double)(shape[i] - 1) * (double)(shape[i] - 1);
    }
    return top < 16777216.0;
}

/* ---- the extern: field (0 at sources, +inf elsewhere), sampling f64[nd] -> distance -------*/

nx_status nx_morph_edt_shape(void *user, int n_in, const nx_dtype *dtypes, const int *ndims,
                             const int64_t *const *shapes, nx_dtype *out_dtype, int *out_ndim,
                             int64_t out_shape[NX_MAX_DIMS])
{
    (void)user;
    if (n_in != 2 || (dtypes[0] != NX_DTYPE_F32 && dtypes[0] != NX_DTYPE_F64) ||
        dtypes[1] != NX_DTYPE_F64 || ndims[1] != 1 || shapes[1][0] != ndims[0] || ndims[0] < 1)
        return NX_ERR_SHAPE;
    *out_dtype = dtypes[0];
    *out_ndim = ndims[0];
    memcpy(out_shape, shapes[0], (size_t)ndims[0] * sizeof(int64_t));
    return NX_OK;
}

static nx_status fz_reference(void *user, nx_ctx *ctx, int n_in, const nx_tensor *const *ins,
                              nx_tensor *out)
{
    (void)user, (void)n_in;
    const nx_tensor *f = ins[0];
    int nd = nx_tensor_ndim(f);
    /* copied out: a constant's bytes may reach an extern unaligned (ir-requests.md) */
    double s[NX_MAX_DIMS];
    memcpy(s, nx_tensor_data(ins[1]), (size_t)nd * sizeof(double));
    bool f64 = nx_tensor_dtype(f) == NX_DTYPE_F64;
    int64_t n = nx_tensor_numel(f);
    if (n == 0)
        return NX_OK;
    /* The last axis first: its lines are contiguous, and the first pass sees the binary field.
     * The square root rides on the last pass's store. */
    int64_t nl = nx_tensor_shape(f)[nd - 1];
    first_job fj = {.in = nx_tensor_data(f),
                    .out = nx_tensor_data(out),
                    .f64 = f64,
                    .n = nl,
                    .s2 = s[nd - 1] * s[nd - 1],
                    .root = nd == 1};
    int threads = 1;
    nx_status st = nx_rt_pool_threads(ctx, &threads);
    if (st != NX_OK)
        return st;
    size_t bytes = (size_t)nx_rt_pool_chunks(n / nl, 64, threads) * (size_t)nl * sizeof(int64_t);
    fj.scratch = nx_rt_alloc(ctx, bytes);
    if (!fj.scratch)
        return nx_rt_nomem(ctx, "distance_transform_edt: first pass scratch", bytes);
    st = nx_rt_parallel_for(ctx, n / nl, 64, first_chunk, &fj);
    nx_rt_free(ctx, fj.scratch, bytes);
    bool lanes_f32 = nx_morph_edt_window_exact_f32(nd, nx_tensor_shape(f), s);
    for (int a = nd - 2; a >= 0 && st == NX_OK; a--)
        st = nx_morph_edt_envelope_axis(ctx, nx_tensor_data(out), f64, nd, nx_tensor_shape(f), a,
                                        s[a], a == 0, lanes_f32);
    return st;
}

static const nx_extern_def felzenszwalb_def = {
    .name = "edt_felzenszwalb",
    .shape = nx_morph_edt_shape,
    .reference = fz_reference,
    .vjp = NULL, /* the fast driver is not differentiable; the separable driver is */
};

nx_node nx_morph_edt_fast_node(nx_graph *g, nx_node field, const double *sampling)
{
    int nd = nx_node_ndim(g, field);
    if (nd < 1)
        return NX_NONE;
    double s[NX_MAX_DIMS];
    int64_t n = nd;
    for (int i = 0; i < nd; i++)
        s[i] = sampling ? sampling[i] : 1.0;
    nx_node sv = nx_constant(g, NX_DTYPE_F64, 1, &n, s);
    return nx_extern(g, &felzenszwalb_def, 2, (nx_node[]){field, sv});
}
