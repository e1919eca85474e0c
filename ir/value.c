/* Scalar values of any dtype for the reference interpreter: loads, stores, rounding to a dtype
 * and numpy-style conversion; plus host tensor helpers. Floats are carried as double and rounded
 * to the dtype at every store, so an f32 op computed here equals IEEE single arithmetic for
 * + - * / and sqrt (double rounding is harmless for those at 53 >= 2 * 24 + 2 bits). */
#include <math.h>
#include <string.h>

#include "ir.h"

nx_ir_val nx_ir_get(const void *base, nx_dtype dt, int64_t idx)
{
    nx_ir_val v = {0, 0};
    const char *p = (const char *)base + idx * (int64_t)nx_dtype_size(dt);
    switch (dt) {
    case NX_DTYPE_F32: {
        float x;
        memcpy(&x, p, sizeof x);
        v.f = x;
        break;
    }
    case NX_DTYPE_F64:
        memcpy(&v.f, p, sizeof v.f);
        break;
    case NX_DTYPE_F16:
    case NX_DTYPE_BF16: {
        uint16_t h;
        memcpy(&h, p, sizeof h);
        v.f = dt == NX_DTYPE_F16 ? nx_f16_to_f32(h) : nx_bf16_to_f32(h);
        break;
    }
    case NX_DTYPE_I8: {
        int8_t x;
        memcpy(&x, p, 1);
        v.i = x;
        break;
    }
    case NX_DTYPE_I16: {
        int16_t x;
        memcpy(&x, p, sizeof x);
        v.i = x;
        break;
    }
    case NX_DTYPE_I32: {
        int32_t x;
        memcpy(&x, p, sizeof x);
        v.i = x;
        break;
    }
    case NX_DTYPE_I64:
        memcpy(&v.i, p, sizeof v.i);
        break;
    case NX_DTYPE_U8:
        v.i = *(const uint8_t *)p;
        break;
    case NX_DTYPE_U32: {
        uint32_t x;
        memcpy(&x, p, sizeof x);
        v.i = x;
        break;
    }
    case NX_DTYPE_U64: /* the bits: unsigned readers convert */
        memcpy(&v.i, p, sizeof v.i);
        break;
    case NX_DTYPE_BOOL:
        v.i = *(const uint8_t *)p != 0;
        break;
    default:
        break;
    }
    return v;
}

void nx_ir_put(void *base, nx_dtype dt, int64_t idx, nx_ir_val v)
{
    char *p = (char *)base + idx * (int64_t)nx_dtype_size(dt);
    switch (dt) {
    case NX_DTYPE_F32: {
        float x = (float)v.f;
        memcpy(p, &x, sizeof x);
        break;
    }
    case NX_DTYPE_F64:
        memcpy(p, &v.f, sizeof v.f);
        break;
    case NX_DTYPE_F16:
    case NX_DTYPE_BF16: {
        uint16_t h = dt == NX_DTYPE_F16 ? nx_f64_to_f16(v.f) : nx_f64_to_bf16(v.f);
        memcpy(p, &h, sizeof h);
        break;
    }
    case NX_DTYPE_I8: {
        int8_t x = (int8_t)v.i;
        memcpy(p, &x, 1);
        break;
    }
    case NX_DTYPE_I16: {
        int16_t x = (int16_t)v.i;
        memcpy(p, &x, sizeof x);
        break;
    }
    case NX_DTYPE_I32: {
        int32_t x = (int32_t)v.i;
        memcpy(p, &x, sizeof x);
        break;
    }
    case NX_DTYPE_I64:
        memcpy(p, &v.i, sizeof v.i);
        break;
    case NX_DTYPE_U8:
        *(uint8_t *)p = (uint8_t)v.i;
        break;
    case NX_DTYPE_U32: {
        uint32_t x = (uint32_t)v.i;
        memcpy(p, &x, sizeof x);
        break;
    }
    case NX_DTYPE_U64:
        memcpy(p, &v.i, sizeof v.i);
        break;
    case NX_DTYPE_BOOL:
        *(uint8_t *)p = v.i != 0;
        break;
    default:
        break;
    }
}

nx_ir_val nx_ir_fix(nx_ir_val v, nx_dtype dt)
{
    switch (dt) {
    case NX_DTYPE_F32:
        v.f = (float)v.f;
        break;
    case NX_DTYPE_F16:
        v.f = nx_f16_to_f32(nx_f64_to_f16(v.f));
        break;
    case NX_DTYPE_BF16:
        v.f = nx_bf16_to_f32(nx_f64_to_bf16(v.f));
        break;
    case NX_DTYPE_I8:
        v.i = (int8_t)v.i;
        break;
    case NX_DTYPE_I16:
        v.i = (int16_t)v.i;
        break;
    case NX_DTYPE_I32:
        v.i = (int32_t)v.i;
        break;
    case NX_DTYPE_U8:
        v.i = (uint8_t)v.i;
        break;
    case NX_DTYPE_U32:
        v.i = (uint32_t)v.i;
        break;
    case NX_DTYPE_BOOL:
        v.i = v.i != 0;
        break;
    default:
        break;
    }
    return v;
}

static int64_t saturate(double x, nx_dtype to)
{
    static const int64_t lo[NX_DTYPE_COUNT] = {[NX_DTYPE_I8] = INT8_MIN,
                                               [NX_DTYPE_I16] = INT16_MIN,
                                               [NX_DTYPE_I32] = INT32_MIN,
                                               [NX_DTYPE_I64] = INT64_MIN,
                                               [NX_DTYPE_U8] = 0,
                                               [NX_DTYPE_U32] = 0};
    static const int64_t hi[NX_DTYPE_COUNT] = {[NX_DTYPE_I8] = INT8_MAX,
                                               [NX_DTYPE_I16] = INT16_MAX,
                                               [NX_DTYPE_I32] = INT32_MAX,
                                               [NX_DTYPE_I64] = INT64_MAX,
                                               [NX_DTYPE_U8] = UINT8_MAX,
                                               [NX_DTYPE_U32] = UINT32_MAX};
    if (isnan(x))
        return 0;
    x = trunc(x);
    if (to == NX_DTYPE_U64) /* [0, 2^64 - 1], carried in the int64's bits */
        return x <= 0 ? 0 : x >= 0x1p64 ? -1 : (int64_t)(uint64_t)x;
    if (x <= (double)lo[to])
        return lo[to];
    if (x >= 9223372036854775808.0 || x >= (double)hi[to])
        return hi[to];
    return (int64_t)x;
}

nx_ir_val nx_ir_convert(nx_ir_val v, nx_dtype from, nx_dtype to)
{
    nx_ir_val r = {0, 0};
    bool ffrom = nx_ir_is_float(from), fto = nx_ir_is_float(to);
    if (ffrom && fto)
        r.f = v.f;
    else if (ffrom && to == NX_DTYPE_BOOL)
        r.i = v.f != 0; /* NaN is nonzero, as numpy */
    else if (ffrom)
        r.i = saturate(v.f, to);
    else if (fto)
        r.f = from == NX_DTYPE_U64 ? (double)(uint64_t)v.i : (double)v.i;
    else
        r.i = v.i;
    return nx_ir_fix(r, to);
}

nx_ir_val nx_ir_from_double(double x, nx_dtype dt)
{
    nx_ir_val v = {x, 0};
    return nx_ir_convert(v, NX_DTYPE_F64, dt);
}

double nx_ir_to_double(nx_ir_val v, nx_dtype dt)
{
    if (dt == NX_DTYPE_U64)
        return (double)(uint64_t)v.i;
    return nx_ir_is_float(dt) ? v.f : (double)v.i;
}

/* ---- tensors -------------------------------------------------------------------------------*/

int64_t nx_ir_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

void nx_ir_bcast_strides(const nx_tensor *x, int ndim, const int64_t *shape, int64_t *strides)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        int xd = d - (ndim - x->ndim);
        int64_t e = xd >= 0 ? x->shape[xd] : 1;
        strides[d] = (e == 1 && shape[d] != 1) || xd < 0 ? 0 : s;
        s *= e;
    }
}

nx_status nx_ir_tensor_new(nx_ctx *ctx, const nx_ir_sig *sig, nx_tensor **out)
{
    return nx_tensor_new(ctx, sig->dtype, sig->ndim, sig->shape, out);
}

nx_status nx_ir_tensor_contiguous_copy(nx_ctx *ctx, const nx_tensor *t, nx_tensor **out)
{
    nx_status st = nx_tensor_new(ctx, t->dtype, t->ndim, t->shape, out);
    if (st != NX_OK)
        return st;
    int64_t numel = nx_tensor_numel(t);
    if (numel == 0)
        return NX_OK;
    size_t es = nx_dtype_size(t->dtype);
    const char *src = nx_tensor_data(t);
    char *dst = nx_tensor_data(*out);
    int64_t idx[NX_MAX_DIMS] = {0};
    for (int64_t i = 0; i < numel; i++) {
        int64_t off = 0;
        for (int d = 0; d < t->ndim; d++)
            off += idx[d] * t->strides[d];
        memcpy(dst + i * (int64_t)es, src + off * (int64_t)es, es);
        nx_ir_next(t->ndim, t->shape, idx);
    }
    return NX_OK;
}
