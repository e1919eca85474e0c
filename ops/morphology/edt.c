/* Exact Euclidean distance transform (scipy.ndimage.distance_transform_edt), a divergent op with
 * two drivers (runtime/divergent.def, row "distance_transform_edt"):
 *
 *   separable     (canonical) one min-plus pass per axis against (s (q - p))^2, then a square root:
 *                 an IR graph (distance.c), differentiable, O(n^2) per line.
 *   felzenszwalb  (fast) the lower envelope of parabolas per line (Felzenszwalb & Huttenlocher
 *                 2012), O(n) per line, as one IR extern.
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

#include "cache.h"
#include "internal.h"
#include "morph.h"
#include "nitrix-graph.h"
#include "nitrix-ops.h"
#include "pool.h"

/* ---- the lower envelope -------------------------------------------------------------------*/

/* Lines of one axis, processed in blocks of up to BLOCK neighbouring lines so that strided axes
 * read whole cache lines: line (o, i) starts at o * n * inner + i, with stride inner. */
#define BLOCK 64

typedef struct envelope_job {
    void *data; /* f32 or f64, squared distances in place */
    bool f64;
    int64_t outer, n, inner, nblocks_inner;
    double s2; /* squared sampling of the axis */
    double *scratch; /* per chunk: BLOCK * n line values + n + (n + 1) + n ints */
    size_t scratch_per_chunk;
} envelope_job;

/* d[q] = min_p f[p] + s2 (q - p)^2 over the finite f[p]; +inf where every f[p] is +inf. */
static void envelope_line(const double *f, double *d, int64_t n, double s2, int64_t *v, double *z)
{
    int64_t k = -1;
    for (int64_t q = 0; q < n; q++) {
        if (isinf(f[q]))
            continue;
        double fq = f[q] + s2 * (double)q * (double)q;
        double s = 0;
        while (k >= 0) {
            int64_t p = v[k];
            double fp = f[p] + s2 * (double)p * (double)p;
            s = (fq - fp) / (2.0 * s2 * (double)(q - p));
            if (s > z[k])
                break;
            k--;
        }
        k++;
        v[k] = q;
        z[k] = k == 0 ? -INFINITY : s;
    }
    if (k < 0) {
        for (int64_t q = 0; q < n; q++)
            d[q] = INFINITY;
        return;
    }
    int64_t j = 0;
    for (int64_t q = 0; q < n; q++) {
        while (j < k && z[j + 1] < (double)q)
            j++;
        double dq = (double)(q - v[j]);
        d[q] = s2 * dq * dq + f[v[j]];
    }
}

static void envelope_chunk(void *user, int64_t begin, int64_t end, int chunk)
{
    const envelope_job *j = user;
    int64_t n = j->n;
    double *lines = j->scratch + (size_t)chunk * j->scratch_per_chunk;
    double *out = lines + BLOCK * n, *z = out + n;
    int64_t *v = (int64_t *)(z + n + 1);
    for (int64_t b = begin; b < end; b++) {
        int64_t o = b / j->nblocks_inner, i0 = (b % j->nblocks_inner) * BLOCK;
        int64_t m = j->inner - i0 < BLOCK ? j->inner - i0 : BLOCK;
        int64_t base = o * n * j->inner + i0;
        /* gather m lines, [line][q] */
        for (int64_t q = 0; q < n; q++) {
            int64_t at = base + q * j->inner;
            for (int64_t l = 0; l < m; l++)
                lines[l * n + q] = j->f64 ? ((const double *)j->data)[at + l]
                                          : (double)((const float *)j->data)[at + l];
        }
        for (int64_t l = 0; l < m; l++) {
            envelope_line(lines + l * n, out, n, j->s2, v, z);
            memcpy(lines + l * n, out, (size_t)n * sizeof(double));
        }
        for (int64_t q = 0; q < n; q++) {
            int64_t at = base + q * j->inner;
            for (int64_t l = 0; l < m; l++) {
                if (j->f64)
                    ((double *)j->data)[at + l] = lines[l * n + q];
                else
                    ((float *)j->data)[at + l] = (float)lines[l * n + q];
            }
        }
    }
}

static nx_status envelope_axis(nx_ctx *ctx, void *data, bool f64, int nd, const int64_t *shape,
                               int axis, double spacing)
{
    envelope_job j = {.data = data, .f64 = f64, .outer = 1, .n = shape[axis], .inner = 1,
                      .s2 = spacing * spacing};
    for (int i = 0; i < axis; i++)
        j.outer *= shape[i];
    for (int i = axis + 1; i < nd; i++)
        j.inner *= shape[i];
    j.nblocks_inner = (j.inner + BLOCK - 1) / BLOCK;
    int64_t items = j.outer * j.nblocks_inner;
    int threads = 1;
    nx_status st = nx_rt_pool_threads(ctx, &threads);
    if (st != NX_OK)
        return st;
    int nchunks = nx_rt_pool_chunks(items, 1, threads);
    /* BLOCK lines, one output line, z (n + 1) and v (n, int64 = double-sized) */
    j.scratch_per_chunk = (size_t)(BLOCK * j.n + j.n + j.n + 1 + j.n);
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
 * writes the output, so no copy precedes the envelope passes. */
typedef struct first_job {
    const void *in;
    void *out;
    bool f64;
    int64_t n;
    double s2;
} first_job;

static void first_chunk(void *user, int64_t begin, int64_t end, int chunk)
{
    (void)chunk;
    const first_job *j = user;
    int64_t n = j->n;
    for (int64_t line = begin; line < end; line++) {
        int64_t base = line * n, last = -1;
        /* forward: distance to the source at or before q, kept as the output for now */
        for (int64_t q = 0; q < n; q++) {
            double f = j->f64 ? ((const double *)j->in)[base + q]
                              : (double)((const float *)j->in)[base + q];
            if (f == 0)
                last = q;
            double d = last < 0 ? INFINITY : (double)(q - last);
            if (j->f64)
                ((double *)j->out)[base + q] = d;
            else
                ((float *)j->out)[base + q] = (float)d;
        }
        int64_t next = -1;
        for (int64_t q = n - 1; q >= 0; q--) {
            double d = j->f64 ? ((double *)j->out)[base + q] : ((float *)j->out)[base + q];
            if (d == 0)
                next = q;
            if (next >= 0 && (double)(next - q) < d)
                d = (double)(next - q);
            d = j->s2 * d * d;
            if (j->f64)
                ((double *)j->out)[base + q] = d;
            else
                ((float *)j->out)[base + q] = (float)d;
        }
    }
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
    /* The last axis first: its lines are contiguous, and the first pass sees the binary field. */
    int64_t nl = nx_tensor_shape(f)[nd - 1];
    first_job fj = {.in = nx_tensor_data(f), .out = nx_tensor_data(out), .f64 = f64, .n = nl,
                    .s2 = s[nd - 1] * s[nd - 1]};
    nx_status st = nx_rt_parallel_for(ctx, n / nl, 64, first_chunk, &fj);
    if (st != NX_OK)
        return st;
    for (int a = nd - 2; a >= 0; a--) {
        st = envelope_axis(ctx, nx_tensor_data(out), f64, nd, nx_tensor_shape(f), a, s[a]);
        if (st != NX_OK)
            return st;
    }
    if (f64) {
        double *d = nx_tensor_data(out);
        for (int64_t i = 0; i < n; i++)
            d[i] = sqrt(d[i]);
    } else {
        float *d = nx_tensor_data(out);
        for (int64_t i = 0; i < n; i++)
            d[i] = sqrtf(d[i]);
    }
    return NX_OK;
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

/* ---- the entry point ----------------------------------------------------------------------*/

typedef struct edt_call {
    const nx_tensor *mask;
    const double *sampling;
    nx_backend backend;
    bool fast;
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
    nx_node y = c->fast ? nx_morph_edt_fast_node(g, field, c->sampling)
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
    int64_t sig[NX_MAX_DIMS + 4] = {c->fast, c->backend, nx_tensor_dtype(mask), nd};
    memcpy(sig + 4, nx_tensor_shape(mask), (size_t)nd * sizeof(int64_t));
    double s[NX_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        s[i] = c->sampling ? c->sampling[i] : 1.0;
    nx_rt_cache_blob_str(&b, "op", "distance_transform_edt");
    nx_rt_cache_blob_bytes(&b, "sig", sig, sizeof sig);
    nx_rt_cache_blob_bytes(&b, "sampling", s, (size_t)nd * sizeof(double));
    return nx_rt_program_cached(ctx, &b, "distance_transform_edt: cache key", compile, c, out);
}

static nx_status check_mask(nx_ctx *ctx, const char *who, const nx_tensor *mask,
                            const double *sampling)
{
    nx_dtype md = nx_tensor_dtype(mask);
    if (nx_tensor_device(mask) != NX_DEVICE_HOST || md == NX_DTYPE_F16 || md == NX_DTYPE_BF16)
        return nx_rt_error(ctx, NX_ERR_DTYPE,
                           "%s: mask is %s; expected a host f32, f64, integer or bool tensor", who,
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
    int nd = nx_tensor_ndim(mask);
    if (nx_tensor_numel(mask) == 0)
        return nx_tensor_new(ctx,
                             nx_tensor_dtype(mask) == NX_DTYPE_F64 ? NX_DTYPE_F64 : NX_DTYPE_F32,
                             nd, nx_tensor_shape(mask), out);
    edt_call c = {.mask = mask, .sampling = o->sampling, .backend = o->backend,
                  .fast = strcmp(variant, "felzenszwalb") == 0};
    nx_program *p = NULL;
    if ((st = program(ctx, &c, &p)) != NX_OK)
        return st;
    return nx_program_run(p, (const nx_tensor *const[]){mask}, out);
}
