/* Exact Euclidean distance transform (scipy.ndimage.distance_transform_edt), a divergent op with
 * two drivers (runtime/divergent.def, row "distance_transform_edt"):
 *
 *   separable     (canonical) one min-plus pass per axis against (s (q - p))^2, then a square root:
 *                 an IR graph (distance.c), differentiable, O(n^2) per line.
 *   felzenszwalb  (fast) the lower envelope of parabolas per line (Felzenszwalb & Huttenlocher
 *                 2012), O(n) per line, as one IR extern. Where a tile's
 *                 distances are short, a window minimum that stops as soon as no farther place
 *                 can win replaces the envelope (the same sums; see "small values").
 *                 On the cuda backend the same driver is a chain of per-axis extern passes
 *                 with CUDA C (nx_extern_device; "the device driver" below), so the whole
 *                 plan runs on the device: device masks are read in place and results stay there.
 *
 * Why an extern: the envelope is a sequential scan with a data-dependent stack (each parabola
 * pops the ones it hides, then a second sweep walks the envelope), which no IR primitive
 * expresses: scans take a fixed associative monoid, and the envelope's state is a variable-length
 * list. The extern has no adjoint: the fast driver is documented non-differentiable, and the
 * canonical driver stays the differentiable one (nx_distance_node-style graphs). Both compute the
 * same minimum over sources exactly in real arithmetic; they round differently (the envelope
 * works in f64 and compares intersections), hence the registry row's tolerance. */
#include <math.h>
#include <string.h>
#if defined(__SSE__)
#include <immintrin.h>
#endif

#include "cache.h"
#include "program/program.h"
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
    bool lanes_f32; /* the window runs in f32 (exact: window_exact_f32) */
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
 * whole array below 2^24, window_exact_f32): then f32 gives the f64 results at twice the lanes. */
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

static nx_status envelope_axis(nx_ctx *ctx, void *data, bool f64, int nd, const int64_t *shape,
                               int axis, double spacing, bool root, bool lanes_f32)
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
static bool window_exact_f32(int nd, const int64_t *shape, const double *s)
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

static nx_status fz_shape(void *user, int n_in, const nx_dtype *dtypes, const int *ndims,
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
    bool lanes_f32 = window_exact_f32(nd, nx_tensor_shape(f), s);
    for (int a = nd - 2; a >= 0 && st == NX_OK; a--)
        st = envelope_axis(ctx, nx_tensor_data(out), f64, nd, nx_tensor_shape(f), a, s[a], a == 0,
                           lanes_f32);
    return st;
}

static const nx_extern_def felzenszwalb_def = {
    .name = "edt_felzenszwalb",
    .shape = fz_shape,
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

/* ---- the device driver: one extern per axis, each with CUDA C --------------------------------
 *
 * On the CUDA backend the fast driver is a chain of per-axis extern passes (nx_extern_device),
 * each a kernel of its own, and nothing else: the first pass reads the mask itself (0 is a
 * source, anything else, NaN included, is not: the field's rule), so the whole plan is those
 * kernels and runs on the device. The passes read the sampling from its constant (f64[nd]) at
 * run time. Arithmetic is f64 rounded to the output at each store, as the CPU's passes, except
 * where every value is an exact integer below 2^24 (unit sampling, window_exact_f32, decided when
 * the graph is built): then f32 gives the same values with half the FP64 work, the device's
 * scarce pipe here.
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
    return fz_shape(NULL, n_in, in, ndims, shapes, out_dtype, out_ndim, out_shape);
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
    return envelope_axis(ctx, nx_tensor_data(out), nx_tensor_dtype(f) == NX_DTYPE_F64, nd,
                         nx_tensor_shape(f), ps->axis, s[ps->axis], ps->root,
                         window_exact_f32(nd, nx_tensor_shape(f), s));
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

static const char window_body[] =
    "        const I q = p / INNER % N;\n"
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
                        ps->exact ? "__fadd_rn" : "__dadd_rn", store, kernel, ps->axis,
                        ps->axis);
    if (head < 0)
        return -1;
    size_t used = (size_t)head < cap ? (size_t)head : cap;
    int body = snprintf(buf ? buf + used : NULL, cap - used, "%s",
                        ps->first ? first_body : window_body);
    return body < 0 ? -1 : head + body;
}

/* The passes by [first][root][exact][axis]. */
#define PASS(F, R, E, A) {.axis = A, .first = F, .root = R, .exact = E}
#define PASS_AXES(F, R, E)                                                                         \
    {PASS(F, R, E, 0), PASS(F, R, E, 1), PASS(F, R, E, 2), PASS(F, R, E, 3),                      \
     PASS(F, R, E, 4), PASS(F, R, E, 5), PASS(F, R, E, 6), PASS(F, R, E, 7)}
#define BY_EXACT(X, F, R) {X(F, R, 0), X(F, R, 1)}
#define BY_ROOT(X, F) {BY_EXACT(X, F, 0), BY_EXACT(X, F, 1)}
static const edt_pass pass_info[2][2][2][NX_MAX_DIMS] = {BY_ROOT(PASS_AXES, 0),
                                                         BY_ROOT(PASS_AXES, 1)};
#define DEF(F, R, E, A)                                                                            \
    {.name = F ? "edt_first_pass" : "edt_window_pass", .shape = pass_shape,                        \
     .reference = pass_reference, .user = (void *)&pass_info[F][R][E][A]}
#define DEF_AXES(F, R, E)                                                                          \
    {DEF(F, R, E, 0), DEF(F, R, E, 1), DEF(F, R, E, 2), DEF(F, R, E, 3),                          \
     DEF(F, R, E, 4), DEF(F, R, E, 5), DEF(F, R, E, 6), DEF(F, R, E, 7)}
static const nx_extern_def pass_defs[2][2][2][NX_MAX_DIMS] = {BY_ROOT(DEF_AXES, 0),
                                                              BY_ROOT(DEF_AXES, 1)};
#define DEV(F, R, E, A) {.source = pass_source, .user = (void *)&pass_info[F][R][E][A]}
#define DEV_AXES(F, R, E)                                                                          \
    {DEV(F, R, E, 0), DEV(F, R, E, 1), DEV(F, R, E, 2), DEV(F, R, E, 3),                          \
     DEV(F, R, E, 4), DEV(F, R, E, 5), DEV(F, R, E, 6), DEV(F, R, E, 7)}
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
    int exact = window_exact_f32(nd, shape, s);
    nx_node sv = nx_constant(g, NX_DTYPE_F64, 1, &n, s), y = mask;
    for (int a = 0; a < nd; a++) {
        int first = a == 0, root = a == nd - 1;
        y = nx_extern_device(g, &pass_defs[first][root][exact][a],
                             &pass_devs[first][root][exact][a], 2, (nx_node[]){y, sv});
    }
    return y;
}

/* ---- the entry point ----------------------------------------------------------------------*/

typedef struct edt_call {
    const nx_tensor *mask;
    const double *sampling;
    nx_backend backend;
    bool fast;
    bool device; /* the fast driver's device chain (the backend is cuda) */
} edt_call;

static nx_status compile(nx_ctx *ctx, const void *user, nx_program **out)
{
    const edt_call *c = user;
    nx_graph *g = NULL;
    nx_status st = nx_graph_new(ctx, &g);
    if (st != NX_OK)
        return st;
    const nx_tensor *mask = c->mask;
    int nd = nx_tensor_ndim(mask);
    nx_dtype md = nx_tensor_dtype(mask), dt = md == NX_DTYPE_F64 ? NX_DTYPE_F64 : NX_DTYPE_F32;
    nx_node m = nx_input(g, "mask", md, nd, nx_tensor_shape(mask));
    nx_node fg = md == NX_DTYPE_BOOL ? m : nx_ne(g, m, nx_scalar(g, md, 0));
    nx_node field = nx_select(g, fg, nx_scalar(g, dt, INFINITY), nx_scalar(g, dt, 0));
    field = nx_broadcast(g, field, nd, nx_tensor_shape(mask));
    nx_node y = c->device ? nx_morph_edt_device_node(g, m, c->sampling)
                : c->fast   ? nx_morph_edt_fast_node(g, field, c->sampling)
                            : nx_morph_edt_separable_node(g, field, c->sampling);
    if ((st = nx_graph_status(g)) == NX_OK) {
        nx_compile_opts co = {.backend = c->backend, .n_outputs = 1, .outputs = &y};
        st = nx_graph_compile(g, &co, out);
    }
    nx_graph_free(g);
    return st;
}

static nx_status program(nx_ctx *ctx, const edt_call *c, nx_program **out)
{
    const nx_tensor *mask = c->mask;
    int nd = nx_tensor_ndim(mask);
    nx_rt_cache_blob b;
    nx_rt_cache_blob_init(&b, ctx);
    int64_t sig[NX_MAX_DIMS + 5] = {c->fast, c->backend, nx_tensor_dtype(mask), nd, c->device};
    memcpy(sig + 5, nx_tensor_shape(mask), (size_t)nd * sizeof(int64_t));
    double s[NX_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        s[i] = c->sampling ? c->sampling[i] : 1.0;
    nx_rt_cache_blob_str(&b, "op", "distance_transform_edt");
    nx_rt_cache_blob_bytes(&b, "sig", sig, sizeof sig);
    nx_rt_cache_blob_bytes(&b, "sampling", s, (size_t)nd * sizeof(double));
    return nx_program_cached(ctx, &b, "distance_transform_edt: cache key", compile, c, out);
}

static nx_status check_mask(nx_ctx *ctx, const char *who, const nx_tensor *mask,
                            const double *sampling)
{
    nx_dtype md = nx_tensor_dtype(mask);
    if (md == NX_DTYPE_F16 || md == NX_DTYPE_BF16)
        return nx_rt_error(ctx, NX_ERR_DTYPE,
                           "%s: mask is %s; expected an f32, f64, integer or bool tensor", who,
                           nx_dtype_name(md));
    int nd = nx_tensor_ndim(mask);
    if (nd < 1 || nd + 1 > NX_MAX_DIMS)
        return nx_rt_error(ctx, NX_ERR_SHAPE, "%s: mask has %d dims; expected 1..%d", who, nd,
                           NX_MAX_DIMS - 1);
    for (int i = 0; sampling && i < nd; i++)
        if (!(sampling[i] > 0) || !isfinite(sampling[i]))
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                               "%s: sampling[%d] is %g; expected a finite value > 0", who, i,
                               sampling[i]);
    return NX_OK;
}

/* The backend the op runs on (NITRIX_BACKEND and auto resolved here: the cuda backend takes the
 * device chain). A device mask needs the cuda backend: its plan reads the mask in place and the
 * result stays on the device. */
static nx_status device_backend(nx_ctx *ctx, const char *who, const nx_tensor *mask,
                                nx_backend requested, nx_backend *out)
{
    nx_status st = nx_program_resolve_backend(ctx, requested, out);
    if (st == NX_OK && nx_tensor_device(mask) != NX_DEVICE_HOST && *out != NX_BACKEND_CUDA)
        return nx_rt_error(ctx, NX_ERR_UNSUPPORTED,
                           "%s: mask is a CUDA device tensor but the op runs on the %s backend; "
                           "expected a host mask, or the cuda backend",
                           who, nx_backend_name(*out));
    return st;
}

/* An empty result, placed where the mask is. */
static nx_status empty_result(nx_ctx *ctx, const nx_tensor *mask, nx_tensor **out)
{
    nx_tensor *h = NULL;
    nx_status st = nx_tensor_new(ctx, nx_tensor_dtype(mask) == NX_DTYPE_F64 ? NX_DTYPE_F64
                                                                            : NX_DTYPE_F32,
                                 nx_tensor_ndim(mask), nx_tensor_shape(mask), &h);
    if (st != NX_OK || nx_tensor_device(mask) == NX_DEVICE_HOST) {
        *out = h;
        return st;
    }
    st = nx_tensor_to_device(h, nx_tensor_device(mask), out);
    nx_tensor_free(h);
    return st;
}

nx_status nx_distance_transform_edt(nx_ctx *ctx, const nx_tensor *mask, const nx_edt_opts *opts,
                                    nx_tensor **out)
{
    static const char *who = "nx_distance_transform_edt";
    static const nx_edt_opts defaults = {0};
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: ctx is NULL", who);
    if (!out || !mask)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %s is NULL", who, out ? "mask" : "out");
    *out = NULL;
    const nx_edt_opts *o = opts ? opts : &defaults;
    nx_status st = check_mask(ctx, who, mask, o->sampling);
    if (st != NX_OK)
        return st;
    const char *variant = NULL;
    st = nx_driver_resolve(ctx, "distance_transform_edt", o->driver, &variant);
    if (st != NX_OK)
        return st;
    nx_backend be;
    if ((st = device_backend(ctx, who, mask, o->backend, &be)) != NX_OK)
        return st;
    if (nx_tensor_numel(mask) == 0)
        return empty_result(ctx, mask, out);
    bool fast = strcmp(variant, "felzenszwalb") == 0;
    edt_call c = {.mask = mask,
                  .sampling = o->sampling,
                  .backend = be,
                  .fast = fast,
                  .device = fast && be == NX_BACKEND_CUDA};
    nx_program *p = NULL;
    if ((st = program(ctx, &c, &p)) != NX_OK)
        return st;
    return nx_program_run(p, (const nx_tensor *const[]){mask}, out);
}
