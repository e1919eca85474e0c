/* sort and argsort on the host.
 *
 *   sort     y = the first k of x's line in stable order; NaN is the greatest value (last
 *            ascending, first descending), -0 and +0 tie
 *   argsort  y = the positions (i64) of those values; ties keep ascending positions, both ways
 *
 * Attributes [axis, descending, k]. Each value becomes an unsigned key whose order is the wanted
 * one (descending: the complement), so a stable sort of keys is the answer; the value written is
 * x's own element (NaN payloads and the sign of zero kept). A stable order is unique, so this
 * agrees with any other stable sort under the same order. Lines are independent tasks. */
#include <string.h>

#include "codegen/x86/lib.h"
#include "runtime/pool.h"

#define RUN 16 /* insertion-sorted runs before merging */

static uint64_t key_f64(double v)
{
    if (v != v)
        return UINT64_MAX; /* every NaN ties, above everything */
    if (v == 0)
        v = 0; /* -0 ties with +0 */
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    return b >> 63 ? ~b : b | (1ull << 63);
}

static uint64_t key_f32(float v)
{
    if (v != v)
        return UINT64_MAX;
    if (v == 0)
        v = 0;
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    return b >> 31 ? (uint32_t)~b : b | (1u << 31);
}

static uint64_t key_int(int64_t v)
{
    return (uint64_t)v ^ (1ull << 63);
}

typedef struct sort_job {
    const char *x;
    char *y;
    nx_dtype dt;
    bool desc, arg;
    int64_t len, k, inner;
    size_t esize;
    uint64_t *scratch; /* per chunk: 4 * len words */
} sort_job;

static void line_keys(const sort_job *s, int64_t base, uint64_t *key)
{
    int64_t n = s->len, st = s->inner;
    const char *x = s->x;
    switch (s->dt) {
    case NX_DTYPE_F32:
        for (int64_t t = 0; t < n; t++)
            key[t] = key_f32(((const float *)x)[base + t * st]);
        break;
    case NX_DTYPE_F64:
        for (int64_t t = 0; t < n; t++)
            key[t] = key_f64(((const double *)x)[base + t * st]);
        break;
    case NX_DTYPE_I8:
        for (int64_t t = 0; t < n; t++)
            key[t] = key_int(((const int8_t *)x)[base + t * st]);
        break;
    case NX_DTYPE_I16:
        for (int64_t t = 0; t < n; t++)
            key[t] = key_int(((const int16_t *)x)[base + t * st]);
        break;
    case NX_DTYPE_I32:
        for (int64_t t = 0; t < n; t++)
            key[t] = key_int(((const int32_t *)x)[base + t * st]);
        break;
    case NX_DTYPE_I64:
        for (int64_t t = 0; t < n; t++)
            key[t] = key_int(((const int64_t *)x)[base + t * st]);
        break;
    default: /* u8, bool */
        for (int64_t t = 0; t < n; t++)
            key[t] = ((const uint8_t *)x)[base + t * st];
        break;
    }
    if (s->desc)
        for (int64_t t = 0; t < n; t++)
            key[t] = ~key[t];
}

/* Stable insertion sort of [lo, hi) by key, carrying pos. */
static void insertion(uint64_t *key, int64_t *pos, int64_t lo, int64_t hi)
{
    for (int64_t i = lo + 1; i < hi; i++) {
        uint64_t kv = key[i];
        int64_t pv = pos[i], j = i;
        while (j > lo && key[j - 1] > kv) { /* strictly greater moves: equal keys stay put */
            key[j] = key[j - 1];
            pos[j] = pos[j - 1];
            j--;
        }
        key[j] = kv;
        pos[j] = pv;
    }
}

/* Stable bottom-up merge sort; the result ends in (key, pos) or (tk, tp), whichever it returns. */
static void merge_sort(uint64_t **key, int64_t **pos, uint64_t **tk, int64_t **tp, int64_t n)
{
    for (int64_t lo = 0; lo < n; lo += RUN)
        insertion(*key, *pos, lo, lo + RUN < n ? lo + RUN : n);
    for (int64_t w = RUN; w < n; w *= 2) {
        const uint64_t *ka = *key;
        const int64_t *pa = *pos;
        uint64_t *kb = *tk;
        int64_t *pb = *tp;
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) { /* the right run's element first only if smaller */
                bool right = ka[j] < ka[i];
                kb[o] = right ? ka[j] : ka[i];
                pb[o++] = right ? pa[j++] : pa[i++];
            }
            for (; i < mid; i++, o++) {
                kb[o] = ka[i];
                pb[o] = pa[i];
            }
            for (; j < hi; j++, o++) {
                kb[o] = ka[j];
                pb[o] = pa[j];
            }
        }
        uint64_t *sk = *key;
        int64_t *sp = *pos;
        *key = *tk;
        *pos = *tp;
        *tk = sk;
        *tp = sp;
    }
}

static void sort_line(const sort_job *s, int64_t line, uint64_t *scratch)
{
    int64_t o = line / s->inner, i = line % s->inner, n = s->len;
    int64_t xbase = o * n * s->inner + i, ybase = o * s->k * s->inner + i;
    uint64_t *key = scratch, *tk = scratch + 2 * n;
    int64_t *pos = (int64_t *)(scratch + n), *tp = (int64_t *)(scratch + 3 * n);
    line_keys(s, xbase, key);
    for (int64_t t = 0; t < n; t++)
        pos[t] = t;
    if (n <= 2 * RUN)
        insertion(key, pos, 0, n);
    else
        merge_sort(&key, &pos, &tk, &tp, n);
    if (s->arg) {
        int64_t *y = (int64_t *)s->y;
        for (int64_t t = 0; t < s->k; t++)
            y[ybase + t * s->inner] = pos[t];
        return;
    }
    size_t es = s->esize;
    for (int64_t t = 0; t < s->k; t++)
        memcpy(s->y + (size_t)(ybase + t * s->inner) * es,
               s->x + (size_t)(xbase + pos[t] * s->inner) * es, es);
}

static void sort_chunk(void *user, int64_t begin, int64_t end, int chunk)
{
    const sort_job *s = user;
    uint64_t *scratch = s->scratch + (size_t)chunk * 4 * (size_t)s->len;
    for (int64_t l = begin; l < end; l++)
        sort_line(s, l, scratch);
}

nx_status nx_x86_lib_sort(const nx_x86_lib_call *c)
{
    const nx_kernel *k = c->k;
    const nx_kbuf *x = &k->bufs[0];
    int axis = (int)k->attrs[0];
    nx_x86_axis g = nx_x86_axis_of(x->ndim, x->shape, axis);
    sort_job s = {.x = c->bufs[0], .y = c->bufs[k->nbufs - 1], .dt = (nx_dtype)x->dtype,
                  .desc = k->attrs[1] != 0, .arg = k->lib_prim == NX_PRIM_ARGSORT,
                  .len = g.len, .k = k->attrs[2], .inner = g.inner,
                  .esize = nx_dtype_size(x->dtype)};
    int64_t lines = g.outer * g.inner;
    if (lines == 0 || s.k == 0)
        return NX_OK;
    int64_t grain = s.len >= 65536 ? 1 : 65536 / s.len;
    int nch = nx_rt_pool_chunks(lines, grain, nx_ctx_num_threads(c->ctx));
    size_t bytes = (size_t)nch * 4 * (size_t)s.len * sizeof(uint64_t);
    s.scratch = nx_rt_alloc(c->ctx, bytes);
    if (!s.scratch)
        return nx_rt_nomem(c->ctx, "CPU backend: sort", bytes);
    nx_status st = nx_rt_parallel_for(c->ctx, lines, grain, sort_chunk, &s);
    nx_rt_free(c->ctx, s.scratch, bytes);
    return st;
}
