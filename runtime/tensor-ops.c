/* Tensor copies, casts and views over arbitrary strides (negative, zero, views of views).
 *
 * Copies and casts walk the source in C order one innermost row at a time, after merging axes that
 * are laid out as one (so a contiguous or merely offset tensor is a single row). Casts convert a
 * row in chunks through one intermediate: double for float sources (every f16, bf16 and f32 is
 * exact in double, so each narrowing afterwards is the only rounding) and int64 for integer and
 * bool sources (exact for every integer dtype). Views only compute new geometry and share storage.
 */
#include <math.h>
#include <string.h>

#include "tensor.h"

/* ------------------------------------------------------------------------------------------------
 * Argument checks
 * ----------------------------------------------------------------------------------------------*/

static nx_status check_args(const nx_tensor *t, nx_tensor **out, const char *fn)
{
    if (!t)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: the tensor is NULL", fn);
    if (!out)
        return nx_rt_error(t->storage->ctx, NX_ERR_INVALID_ARG, "%s: out is NULL", fn);
    *out = NULL;
    return NX_OK;
}

/* Host ops read and write the data; a device address must never be dereferenced here. */
static nx_status check_host(const nx_tensor *t, const char *fn)
{
    if (t->storage->device == NX_DEVICE_HOST)
        return NX_OK;
    return nx_rt_error(t->storage->ctx, NX_ERR_INVALID_ARG,
                       "%s: the tensor's data is in device memory; this operation needs a host "
                       "tensor",
                       fn);
}

static const char *base_of(const nx_tensor *t)
{
    return (const char *)t->storage->data + t->offset * (int64_t)nx_dtype_size(t->dtype);
}

/* ------------------------------------------------------------------------------------------------
 * Row walk
 * ----------------------------------------------------------------------------------------------*/

/* The innermost rows of a strided tensor in C order: `count` rows of n elements `stride` bytes
 * apart, the current one starting `off` bytes from the first element. */
typedef struct rows {
    int outer;
    int64_t shape[NX_MAX_DIMS];
    int64_t step[NX_MAX_DIMS]; /* bytes */
    int64_t idx[NX_MAX_DIMS];
    int64_t n, stride, count, off;
} rows;

static void rows_init(rows *r, const nx_tensor *t)
{
    int64_t es = (int64_t)nx_dtype_size(t->dtype);
    int64_t shape[NX_MAX_DIMS], step[NX_MAX_DIMS];
    int nd = 0;
    memset(r, 0, sizeof *r);
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] == 1)
            continue; /* any stride addresses the same element */
        int64_t st = t->strides[i] * es, block;
        if (nd > 0 && nx_mul_i64(st, t->shape[i], &block) && step[nd - 1] == block) {
            shape[nd - 1] *= t->shape[i];
            step[nd - 1] = st;
        } else {
            shape[nd] = t->shape[i];
            step[nd] = st;
            nd++;
        }
    }
    r->n = nd ? shape[nd - 1] : 1;
    r->stride = nd ? step[nd - 1] : es;
    r->outer = nd ? nd - 1 : 0;
    r->count = 1;
    for (int i = 0; i < r->outer; i++) {
        r->shape[i] = shape[i];
        r->step[i] = step[i];
        r->count *= shape[i];
    }
    if (nx_tensor_numel(t) == 0)
        r->count = 0;
}

static void rows_next(rows *r)
{
    for (int i = r->outer - 1; i >= 0; i--) {
        r->off += r->step[i];
        if (++r->idx[i] < r->shape[i])
            return;
        r->off -= r->step[i] * r->shape[i];
        r->idx[i] = 0;
    }
}

/* Constant es after inlining lets the compiler turn memcpy into one move. */
static inline void gather(char *dst, const char *src, int64_t n, int64_t stride, size_t es)
{
    for (int64_t i = 0; i < n; i++)
        memcpy(dst + i * (int64_t)es, src + i * stride, es);
}

static void gather_row(char *dst, const char *src, int64_t n, int64_t stride, size_t es)
{
    if (stride == (int64_t)es) {
        memcpy(dst, src, (size_t)n * es);
        return;
    }
    switch (es) {
    case 1:
        gather(dst, src, n, stride, 1);
        break;
    case 2:
        gather(dst, src, n, stride, 2);
        break;
    case 4:
        gather(dst, src, n, stride, 4);
        break;
    default:
        gather(dst, src, n, stride, 8);
        break;
    }
}

/* One (na, nb) plane whose source is contiguous along a but strided along b (a transpose): walked
 * in square tiles so each cache line read along a is used up by the tile's b columns before it
 * is evicted (an untiled walk rereads it nb times from memory). */
static inline void transpose_plane(char *dst, const char *src, int64_t na, int64_t nb, int64_t sb,
                                   size_t es)
{
    enum { TILE = 16 };
    int64_t e = (int64_t)es;
    for (int64_t a0 = 0; a0 < na; a0 += TILE) {
        int64_t a1 = a0 + TILE < na ? a0 + TILE : na;
        for (int64_t b0 = 0; b0 < nb; b0 += TILE) {
            int64_t b1 = b0 + TILE < nb ? b0 + TILE : nb;
            for (int64_t a = a0; a < a1; a++) {
                for (int64_t b = b0; b < b1; b++)
                    memcpy(dst + (a * nb + b) * e, src + a * e + b * sb, es);
            }
        }
    }
}

static void transpose_plane_es(char *dst, const char *src, int64_t na, int64_t nb, int64_t sb,
                               size_t es)
{
    switch (es) {
    case 1:
        transpose_plane(dst, src, na, nb, sb, 1);
        break;
    case 2:
        transpose_plane(dst, src, na, nb, sb, 2);
        break;
    case 4:
        transpose_plane(dst, src, na, nb, sb, 4);
        break;
    default:
        transpose_plane(dst, src, na, nb, sb, 8);
        break;
    }
}

/* Writes t's elements in C order into dst (numel * element size bytes). */
static void copy_into(const nx_tensor *t, char *dst)
{
    size_t es = nx_dtype_size(t->dtype);
    const char *base = base_of(t);
    rows r;
    rows_init(&r, t);
    int o = r.outer - 1;
    if (o >= 0 && r.step[o] == (int64_t)es && r.shape[o] >= 8 && r.n >= 8) {
        /* the two innermost axes form transposed planes: iterate over the planes instead */
        int64_t na = r.shape[o], plane = na * r.n * (int64_t)es;
        r.outer = o;
        r.count /= na;
        for (int64_t k = 0; k < r.count; k++) {
            transpose_plane_es(dst, base + r.off, na, r.n, r.stride, es);
            dst += plane;
            rows_next(&r);
        }
        return;
    }
    for (int64_t k = 0; k < r.count; k++) {
        gather_row(dst, base + r.off, r.n, r.stride, es);
        dst += r.n * (int64_t)es;
        rows_next(&r);
    }
}

/* ------------------------------------------------------------------------------------------------
 * Copies
 * ----------------------------------------------------------------------------------------------*/

static nx_status copy_new(const nx_tensor *t, nx_tensor **out)
{
    nx_tensor *c = NULL;
    nx_status st = nx_rt_tensor_new_uninit(t->storage->ctx, t->dtype, t->ndim, t->shape, &c);
    if (st != NX_OK)
        return st;
    if (c->storage->bytes > 0)
        copy_into(t, c->storage->data);
    *out = c;
    return NX_OK;
}

nx_status nx_tensor_copy(const nx_tensor *t, nx_tensor **out)
{
    nx_status st = check_args(t, out, "nx_tensor_copy");
    if (st == NX_OK)
        st = check_host(t, "nx_tensor_copy");
    return st != NX_OK ? st : copy_new(t, out);
}

nx_status nx_tensor_contiguous(const nx_tensor *t, nx_tensor **out)
{
    nx_status st = check_args(t, out, "nx_tensor_contiguous");
    if (st == NX_OK)
        st = check_host(t, "nx_tensor_contiguous");
    if (st != NX_OK)
        return st;
    if (nx_tensor_is_contiguous(t))
        return nx_rt_tensor_view(t, t->ndim, t->shape, t->strides, t->offset, out);
    return copy_new(t, out);
}

/* ------------------------------------------------------------------------------------------------
 * Casts
 * ----------------------------------------------------------------------------------------------*/

#define CHUNK 256

static bool is_float(nx_dtype d)
{
    return nx_dtype_is_float(d);
}

/* Unaligned loads and stores of one element (strided views need not be aligned). */
static inline double ld_f64(const char *p)
{
    double x;
    memcpy(&x, p, sizeof x);
    return x;
}
static inline float ld_f32(const char *p)
{
    float x;
    memcpy(&x, p, sizeof x);
    return x;
}
static inline uint16_t ld_u16(const char *p)
{
    uint16_t x;
    memcpy(&x, p, sizeof x);
    return x;
}
static inline int16_t ld_i16(const char *p)
{
    int16_t x;
    memcpy(&x, p, sizeof x);
    return x;
}
static inline int32_t ld_i32(const char *p)
{
    int32_t x;
    memcpy(&x, p, sizeof x);
    return x;
}
static inline int64_t ld_i64(const char *p)
{
    int64_t x;
    memcpy(&x, p, sizeof x);
    return x;
}

/* The dtype switches sit outside the loops so each loop is one tight conversion. */
static void read_float(nx_dtype d, const char *src, int64_t n, int64_t stride, double *v)
{
    int64_t i;
    switch (d) {
    case NX_DTYPE_F64:
        for (i = 0; i < n; i++)
            v[i] = ld_f64(src + i * stride);
        break;
    case NX_DTYPE_F32:
        for (i = 0; i < n; i++)
            v[i] = ld_f32(src + i * stride);
        break;
    case NX_DTYPE_F16:
        for (i = 0; i < n; i++)
            v[i] = nx_f16_to_f32(ld_u16(src + i * stride));
        break;
    default:
        for (i = 0; i < n; i++)
            v[i] = nx_bf16_to_f32(ld_u16(src + i * stride));
        break;
    }
}

static void read_int(nx_dtype d, const char *src, int64_t n, int64_t stride, int64_t *v)
{
    int64_t i;
    switch (d) {
    case NX_DTYPE_I8:
        for (i = 0; i < n; i++)
            v[i] = (int8_t)src[i * stride];
        break;
    case NX_DTYPE_I16:
        for (i = 0; i < n; i++)
            v[i] = ld_i16(src + i * stride);
        break;
    case NX_DTYPE_I32:
        for (i = 0; i < n; i++)
            v[i] = ld_i32(src + i * stride);
        break;
    case NX_DTYPE_I64:
        for (i = 0; i < n; i++)
            v[i] = ld_i64(src + i * stride);
        break;
    case NX_DTYPE_U8:
        for (i = 0; i < n; i++)
            v[i] = (uint8_t)src[i * stride];
        break;
    case NX_DTYPE_U32:
        for (i = 0; i < n; i++)
            v[i] = (uint32_t)ld_i32(src + i * stride);
        break;
    case NX_DTYPE_U64: /* the bits; write_from_int reads them as unsigned */
        for (i = 0; i < n; i++)
            v[i] = ld_i64(src + i * stride);
        break;
    default: /* bool: any nonzero byte is true */
        for (i = 0; i < n; i++)
            v[i] = src[i * stride] != 0;
        break;
    }
}

/* Stores the low bits of each value: integer narrowing wraps modulo 2^bits, as NumPy's astype
 * does. */
static void store_ints(nx_dtype d, const uint64_t *v, int64_t n, char *dst)
{
    int64_t i;
    switch (d) {
    case NX_DTYPE_I8:
    case NX_DTYPE_U8:
        for (i = 0; i < n; i++)
            dst[i] = (char)(uint8_t)v[i];
        break;
    case NX_DTYPE_I16:
        for (i = 0; i < n; i++) {
            uint16_t x = (uint16_t)v[i];
            memcpy(dst + 2 * i, &x, 2);
        }
        break;
    case NX_DTYPE_I32:
    case NX_DTYPE_U32:
        for (i = 0; i < n; i++) {
            uint32_t x = (uint32_t)v[i];
            memcpy(dst + 4 * i, &x, 4);
        }
        break;
    default:
        memcpy(dst, v, (size_t)n * 8);
        break;
    }
}

static void store_floats(nx_dtype d, const double *v, int64_t n, char *dst)
{
    int64_t i;
    switch (d) {
    case NX_DTYPE_F64:
        memcpy(dst, v, (size_t)n * 8);
        break;
    case NX_DTYPE_F32:
        for (i = 0; i < n; i++) {
            float f = (float)v[i];
            memcpy(dst + 4 * i, &f, 4);
        }
        break;
    case NX_DTYPE_F16:
        for (i = 0; i < n; i++) {
            uint16_t h = nx_f64_to_f16(v[i]);
            memcpy(dst + 2 * i, &h, 2);
        }
        break;
    default:
        for (i = 0; i < n; i++) {
            uint16_t h = nx_f64_to_bf16(v[i]);
            memcpy(dst + 2 * i, &h, 2);
        }
        break;
    }
}

/* Integer range of an integer dtype as doubles: a truncated value t fits iff lo <= t < hi_excl
 * (both bounds exact in double, unlike INT64_MAX). */
static void int_range(nx_dtype d, double *lo, double *hi_excl)
{
    switch (d) {
    case NX_DTYPE_I8:
        *lo = -128.0, *hi_excl = 128.0;
        break;
    case NX_DTYPE_I16:
        *lo = -32768.0, *hi_excl = 32768.0;
        break;
    case NX_DTYPE_I32:
        *lo = -2147483648.0, *hi_excl = 2147483648.0;
        break;
    case NX_DTYPE_U8:
        *lo = 0.0, *hi_excl = 256.0;
        break;
    case NX_DTYPE_U32:
        *lo = 0.0, *hi_excl = 0x1p32;
        break;
    case NX_DTYPE_U64:
        *lo = 0.0, *hi_excl = 0x1p64;
        break;
    default:
        *lo = -0x1p63, *hi_excl = 0x1p63;
        break;
    }
}

/* Converts n values to dtype d at dst (scratch: n integers). Returns the index of the first value
 * a float-to-int cast cannot represent (NaN, or integer part out of range), or -1 when all were
 * stored. */
static int64_t write_from_float(nx_dtype d, const double *v, int64_t n, char *dst,
                                uint64_t *scratch)
{
    if (d == NX_DTYPE_BOOL) {
        for (int64_t i = 0; i < n; i++)
            dst[i] = v[i] != 0.0; /* NaN != 0 */
        return -1;
    }
    if (is_float(d)) {
        store_floats(d, v, n, dst);
        return -1;
    }
    double lo, hi;
    int_range(d, &lo, &hi);
    for (int64_t i = 0; i < n; i++) {
        double t = trunc(v[i]);
        if (!(t >= lo && t < hi)) /* also catches NaN */
            return i;
        scratch[i] = t >= 0x1p63 ? (uint64_t)t : (uint64_t)(int64_t)t;
    }
    store_ints(d, scratch, n, dst);
    return -1;
}

/* v as a double rounded to odd (sticky low bit) when it needs more than 53 bits: a later rounding
 * to 24 bits or fewer then gives the correctly rounded result of the exact integer. */
static double int_to_double_odd(int64_t v)
{
    uint64_t m = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    int shift = 0;
    if (m >> 53) {
        shift = 11 - __builtin_clzll(m);
        uint64_t lost = m & ((UINT64_C(1) << shift) - 1);
        m = (m >> shift) | (lost != 0);
    }
    double d = ldexp((double)m, shift);
    return v < 0 ? -d : d;
}

/* u64 sources (from_u64) to floats: the value of the unsigned bits, rounded once (f16/bf16: to
 * odd first when it needs more than 53 bits, as int_to_double_odd). */
static void write_from_u64(nx_dtype d, const int64_t *v, int64_t n, char *dst, double *scratch)
{
    for (int64_t i = 0; i < n; i++) {
        uint64_t m = (uint64_t)v[i];
        if (d == NX_DTYPE_F32) {
            float f = (float)m;
            memcpy(dst + 4 * i, &f, 4);
            continue;
        }
        int shift = 0;
        if (d != NX_DTYPE_F64 && (m >> 53)) {
            shift = 11 - __builtin_clzll(m);
            uint64_t lost = m & ((UINT64_C(1) << shift) - 1);
            m = (m >> shift) | (lost != 0);
        }
        scratch[i] = ldexp((double)m, shift);
    }
    if (d == NX_DTYPE_F64)
        memcpy(dst, scratch, (size_t)n * 8);
    else if (d != NX_DTYPE_F32)
        store_floats(d, scratch, n, dst);
}

static void write_from_int(nx_dtype d, const int64_t *v, int64_t n, char *dst, double *scratch,
                           bool from_u64)
{
    int64_t i;
    if (from_u64 && is_float(d)) {
        write_from_u64(d, v, n, dst, scratch);
        return;
    }
    switch (d) {
    case NX_DTYPE_BOOL:
        for (i = 0; i < n; i++)
            dst[i] = v[i] != 0;
        break;
    case NX_DTYPE_F64:
        for (i = 0; i < n; i++)
            scratch[i] = (double)v[i];
        memcpy(dst, scratch, (size_t)n * 8);
        break;
    case NX_DTYPE_F32: /* one rounding straight from the integer */
        for (i = 0; i < n; i++) {
            float f = (float)v[i];
            memcpy(dst + 4 * i, &f, 4);
        }
        break;
    case NX_DTYPE_F16:
    case NX_DTYPE_BF16:
        for (i = 0; i < n; i++)
            scratch[i] = int_to_double_odd(v[i]);
        store_floats(d, scratch, n, dst);
        break;
    default:
        store_ints(d, (const uint64_t *)v, n, dst);
        break;
    }
}

static nx_status cast_error(const nx_tensor *t, nx_dtype dtype, int64_t flat, double value)
{
    int64_t idx[NX_MAX_DIMS];
    for (int i = t->ndim - 1; i >= 0; i--) {
        idx[i] = flat % t->shape[i];
        flat /= t->shape[i];
    }
    double lo, hi;
    int_range(dtype, &lo, &hi);
    unsigned long long max = hi >= 0x1p64   ? UINT64_MAX
                             : hi >= 0x1p63 ? (unsigned long long)INT64_MAX
                                            : (unsigned long long)hi - 1;
    char where[160];
    return nx_rt_error(t->storage->ctx, NX_ERR_INVALID_ARG,
                       "nx_tensor_cast: element %s is %.17g, which %s to %s cannot represent; "
                       "expected a finite value whose integer part is in [%lld, %llu]",
                       nx_shape_str(where, sizeof where, t->ndim, idx), value,
                       nx_dtype_name(t->dtype), nx_dtype_name(dtype), (long long)lo, max);
}

/* Converts t's elements in C order into dst of dtype d. */
static nx_status cast_into(const nx_tensor *t, nx_dtype d, char *dst)
{
    int64_t des = (int64_t)nx_dtype_size(d);
    const char *base = base_of(t);
    bool from_float = is_float(t->dtype);
    double fv[CHUNK];
    int64_t iv[CHUNK];
    int64_t done = 0;
    rows r;
    rows_init(&r, t);
    for (int64_t k = 0; k < r.count; k++) {
        for (int64_t j = 0; j < r.n; j += CHUNK) {
            int64_t m = r.n - j < CHUNK ? r.n - j : CHUNK;
            const char *src = base + r.off + j * r.stride;
            if (from_float) {
                read_float(t->dtype, src, m, r.stride, fv);
                int64_t bad = write_from_float(d, fv, m, dst, (uint64_t *)iv);
                if (bad >= 0)
                    return cast_error(t, d, done + bad, fv[bad]);
            } else {
                read_int(t->dtype, src, m, r.stride, iv);
                write_from_int(d, iv, m, dst, fv, t->dtype == NX_DTYPE_U64);
            }
            dst += m * des;
            done += m;
        }
        rows_next(&r);
    }
    return NX_OK;
}

nx_status nx_tensor_cast(const nx_tensor *t, nx_dtype dtype, nx_tensor **out)
{
    nx_status st = check_args(t, out, "nx_tensor_cast");
    if (st == NX_OK)
        st = check_host(t, "nx_tensor_cast");
    if (st != NX_OK)
        return st;
    nx_ctx *ctx = t->storage->ctx;
    if (nx_dtype_size(dtype) == 0)
        return nx_rt_error(ctx, NX_ERR_DTYPE, "nx_tensor_cast: target dtype %d is not a dtype",
                           (int)dtype);
    if (dtype == t->dtype) /* bit-exact, NaN payloads included */
        return copy_new(t, out);
    nx_tensor *c = NULL;
    st = nx_rt_tensor_new_uninit(ctx, dtype, t->ndim, t->shape, &c);
    if (st != NX_OK)
        return st;
    if (c->storage->bytes > 0)
        st = cast_into(t, dtype, c->storage->data);
    if (st != NX_OK) {
        nx_tensor_free(c);
        return st;
    }
    *out = c;
    return NX_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Views
 * ----------------------------------------------------------------------------------------------*/

/* Resolves a requested shape (one extent may be -1) against numel into want. */
static nx_status resolve_shape(const nx_tensor *t, int ndim, const int64_t *shape, int64_t *want)
{
    nx_ctx *ctx = t->storage->ctx;
    char have[160], asked[160];
    nx_shape_str(have, sizeof have, t->ndim, t->shape);
    nx_shape_str(asked, sizeof asked, ndim, shape);
    int64_t numel = nx_tensor_numel(t), known = 1;
    int infer = -1;
    for (int i = 0; i < ndim; i++) {
        want[i] = shape[i];
        if (shape[i] == -1 && infer < 0) {
            infer = i;
            want[i] = 1;
        } else if (shape[i] < 0) {
            return nx_rt_error(ctx, NX_ERR_SHAPE,
                               "nx_tensor_reshape: cannot reshape %s into %s: extent %d is %lld; "
                               "expected >= 0, or -1 once",
                               have, asked, i, (long long)shape[i]);
        }
        if (!nx_mul_i64(known, want[i], &known))
            return nx_rt_error(ctx, NX_ERR_SHAPE,
                               "nx_tensor_reshape: cannot reshape %s into %s: the element count "
                               "overflows",
                               have, asked);
    }
    if (infer >= 0) {
        if (known == 0)
            return nx_rt_error(ctx, NX_ERR_SHAPE,
                               "nx_tensor_reshape: cannot reshape %s into %s: -1 is ambiguous "
                               "when the other extents multiply to 0",
                               have, asked);
        want[infer] = numel / known;
        known *= want[infer];
    }
    if (known != numel)
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "nx_tensor_reshape: cannot reshape %s (%lld elements) into %s; the "
                           "element counts must match",
                           have, (long long)numel, asked);
    return NX_OK;
}

/* Strides that express t with shape want without moving data (NumPy's no-copy reshape): each
 * group of old axes that merges into, or splits from, a group of new axes must be laid out as one
 * C-ordered block. Axes of extent 1 take any stride. false when a copy would be needed. */
static bool view_strides(const nx_tensor *t, int ndim, const int64_t *want, int64_t *strides)
{
    int64_t od[NX_MAX_DIMS], os[NX_MAX_DIMS];
    int on = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] != 1) {
            od[on] = t->shape[i];
            os[on] = t->strides[i];
            on++;
        }
    }
    int oi = 0, oj = 1, ni = 0, nj = 1;
    while (ni < ndim && oi < on) {
        int64_t np = want[ni], op = od[oi];
        while (np != op) {
            if (np < op)
                np *= want[nj++];
            else
                op *= od[oj++];
        }
        for (int k = oi; k < oj - 1; k++) {
            int64_t block;
            if (!nx_mul_i64(od[k + 1], os[k + 1], &block) || os[k] != block)
                return false;
        }
        strides[nj - 1] = os[oj - 1];
        for (int k = nj - 1; k > ni; k--) {
            if (!nx_mul_i64(strides[k], want[k], &strides[k - 1]))
                return false;
        }
        ni = nj++;
        oi = oj++;
    }
    int64_t last = ni > 0 ? strides[ni - 1] : 1;
    for (int k = ni; k < ndim; k++)
        strides[k] = last;
    return true;
}

nx_status nx_tensor_reshape(const nx_tensor *t, int ndim, const int64_t *shape, nx_tensor **out)
{
    nx_status st = check_args(t, out, "nx_tensor_reshape");
    if (st != NX_OK)
        return st;
    nx_ctx *ctx = t->storage->ctx;
    if (ndim < 0 || ndim > NX_MAX_DIMS)
        return nx_rt_error(ctx, NX_ERR_SHAPE, "nx_tensor_reshape: ndim is %d; expected 0 to %d",
                           ndim, NX_MAX_DIMS);
    if (ndim > 0 && !shape)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "nx_tensor_reshape: shape is NULL with ndim %d",
                           ndim);
    int64_t want[NX_MAX_DIMS], strides[NX_MAX_DIMS];
    st = resolve_shape(t, ndim, shape, want);
    if (st != NX_OK)
        return st;
    if (nx_tensor_numel(t) == 0) {
        nx_rt_contiguous_strides(ndim, want, strides); /* no element is ever addressed */
    } else if (!view_strides(t, ndim, want, strides)) {
        char have[160], asked[160], strd[160];
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "nx_tensor_reshape: a view of shape %s with strides %s cannot be "
                           "reshaped to %s without a copy; call nx_tensor_contiguous first",
                           nx_shape_str(have, sizeof have, t->ndim, t->shape),
                           nx_shape_str(strd, sizeof strd, t->ndim, t->strides),
                           nx_shape_str(asked, sizeof asked, ndim, want));
    }
    return nx_rt_tensor_view(t, ndim, want, strides, t->offset, out);
}

nx_status nx_tensor_permute(const nx_tensor *t, const int *perm, nx_tensor **out)
{
    nx_status st = check_args(t, out, "nx_tensor_permute");
    if (st != NX_OK)
        return st;
    nx_ctx *ctx = t->storage->ctx;
    if (t->ndim > 0 && !perm)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_tensor_permute: perm is NULL for a %d-d "
                           "tensor",
                           t->ndim);
    bool seen[NX_MAX_DIMS] = {false};
    int64_t shape[NX_MAX_DIMS], strides[NX_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) {
        int a = perm[i];
        if (a < 0 || a >= t->ndim || seen[a])
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                               "nx_tensor_permute: perm[%d] is %d; expected each of 0 to %d "
                               "exactly once",
                               i, a, t->ndim - 1);
        seen[a] = true;
        shape[i] = t->shape[a];
        strides[i] = t->strides[a];
    }
    return nx_rt_tensor_view(t, t->ndim, shape, strides, t->offset, out);
}

/* Python's slice.indices(len) plus the element count: the first index and how many. */
static int64_t slice_count(int64_t len, int64_t *start, int64_t stop, int64_t step)
{
    int64_t lo = step > 0 ? 0 : -1, hi = step > 0 ? len : len - 1;
    int64_t s = *start, e = stop;
    if (s < 0) /* adding len >= 0 to a negative value cannot overflow */
        s = s + len < lo ? lo : s + len;
    else if (s > hi)
        s = hi;
    if (e < 0)
        e = e + len < lo ? lo : e + len;
    else if (e > hi)
        e = hi;
    *start = s;
    uint64_t span, ustep;
    if (step > 0) {
        if (s >= e)
            return 0;
        span = (uint64_t)(e - s - 1);
        ustep = (uint64_t)step;
    } else {
        if (e >= s)
            return 0;
        span = (uint64_t)(s - e - 1);
        ustep = (uint64_t)0 - (uint64_t)step; /* fine for INT64_MIN too */
    }
    return (int64_t)(span / ustep + 1);
}

nx_status nx_tensor_slice(const nx_tensor *t, int axis, int64_t start, int64_t stop, int64_t step,
                          nx_tensor **out)
{
    nx_status st = check_args(t, out, "nx_tensor_slice");
    if (st != NX_OK)
        return st;
    nx_ctx *ctx = t->storage->ctx;
    if (axis < 0 || axis >= t->ndim)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_tensor_slice: axis %d is out of range for a %d-d tensor (expected "
                           "0 to %d)",
                           axis, t->ndim, t->ndim - 1);
    if (step == 0)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_tensor_slice: step is 0; expected a "
                           "nonzero step");
    int64_t n = slice_count(t->shape[axis], &start, stop, step);
    int64_t shape[NX_MAX_DIMS], strides[NX_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    memcpy(strides, t->strides, sizeof strides);
    shape[axis] = n;
    int64_t offset = t->offset, shift;
    if (n > 0 &&
        (!nx_mul_i64(start, t->strides[axis], &shift) || !nx_add_i64(offset, shift, &offset)))
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "nx_tensor_slice: the offset of element %lld on "
                           "axis %d overflows",
                           (long long)start, axis);
    if (n > 1 && !nx_mul_i64(t->strides[axis], step, &strides[axis]))
        return nx_rt_error(ctx, NX_ERR_SHAPE,
                           "nx_tensor_slice: stride %lld times step %lld "
                           "overflows",
                           (long long)t->strides[axis], (long long)step);
    return nx_rt_tensor_view(t, t->ndim, shape, strides, offset, out);
}
