/* dtypes: sizes, names, and the f16/bf16 conversions. */
#include <string.h>

#include "internal.h"

#define NX_DTYPES(X)                                                                               \
    X(F32, "f32", 4, "float32")                                                                    \
    X(F64, "f64", 8, "float64")                                                                    \
    X(F16, "f16", 2, "float16")                                                                    \
    X(BF16, "bf16", 2, "bfloat16")                                                                 \
    X(I8, "i8", 1, "int8")                                                                         \
    X(I16, "i16", 2, "int16")                                                                      \
    X(I32, "i32", 4, "int32")                                                                      \
    X(I64, "i64", 8, "int64")                                                                      \
    X(U8, "u8", 1, "uint8")                                                                        \
    X(BOOL, "bool", 1, "bool_")                                                                    \
    X(U32, "u32", 4, "uint32")                                                                     \
    X(U64, "u64", 8, "uint64")

static const struct {
    const char *name;
    size_t size;
    const char *numpy;
} dtypes[NX_DTYPE_COUNT] = {
#define ROW(id, name, size, numpy) [NX_DTYPE_##id] = {name, size, numpy},
    NX_DTYPES(ROW)
#undef ROW
};

size_t nx_dtype_size(nx_dtype dtype)
{
    return (unsigned)dtype < NX_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

const char *nx_dtype_name(nx_dtype dtype)
{
    return (unsigned)dtype < NX_DTYPE_COUNT ? dtypes[dtype].name : NULL;
}

bool nx_dtype_from_name(const char *name, nx_dtype *out)
{
    if (!name)
        return false;
    for (int i = 0; i < NX_DTYPE_COUNT; i++) {
        if (strcmp(name, dtypes[i].name) == 0 || strcmp(name, dtypes[i].numpy) == 0) {
            *out = (nx_dtype)i;
            return true;
        }
    }
    if (strcmp(name, "bool8") == 0) {
        *out = NX_DTYPE_BOOL;
        return true;
    }
    return false;
}

bool nx_dtype_is_float(nx_dtype dtype)
{
    return dtype == NX_DTYPE_F32 || dtype == NX_DTYPE_F64 || dtype == NX_DTYPE_F16 ||
           dtype == NX_DTYPE_BF16;
}

bool nx_dtype_is_int(nx_dtype dtype)
{
    return dtype == NX_DTYPE_I8 || dtype == NX_DTYPE_I16 || dtype == NX_DTYPE_I32 ||
           dtype == NX_DTYPE_I64 || dtype == NX_DTYPE_U8 || dtype == NX_DTYPE_U32 ||
           dtype == NX_DTYPE_U64;
}
