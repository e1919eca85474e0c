/* dtypes: sizes, names, and the f16/bf16 conversions. */
#include <string.h>
#include <strings.h>

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

/* NumPy's type names (np.sctypeDict, LP64 sizes from C's own types) for the supported dtypes. */
#define INT_OF(bytes) ((bytes) == 8 ? NX_DTYPE_I64 : (bytes) == 4 ? NX_DTYPE_I32 : NX_DTYPE_I16)
#define UINT_OF(bytes) ((bytes) == 8 ? NX_DTYPE_U64 : NX_DTYPE_U32)
static const struct {
    const char *name;
    nx_dtype dtype;
} numpy_names[] = {
    {"float32", NX_DTYPE_F32},  {"single", NX_DTYPE_F32},
    {"float64", NX_DTYPE_F64},  {"double", NX_DTYPE_F64},
    {"float", NX_DTYPE_F64},    {"float_", NX_DTYPE_F64},
    {"float16", NX_DTYPE_F16},  {"half", NX_DTYPE_F16},
    {"int8", NX_DTYPE_I8},      {"byte", NX_DTYPE_I8},
    {"int16", NX_DTYPE_I16},    {"short", NX_DTYPE_I16},
    {"int32", NX_DTYPE_I32},    {"intc", INT_OF(sizeof(int))},
    {"int64", NX_DTYPE_I64},    {"longlong", NX_DTYPE_I64},
    {"int", INT_OF(sizeof(long))}, {"int_", INT_OF(sizeof(long))},
    {"long", INT_OF(sizeof(long))}, {"intp", INT_OF(sizeof(void *))},
    {"int0", INT_OF(sizeof(void *))},
    {"uint8", NX_DTYPE_U8},     {"ubyte", NX_DTYPE_U8},
    {"uint32", NX_DTYPE_U32},   {"uintc", UINT_OF(sizeof(unsigned))},
    {"uint64", NX_DTYPE_U64},   {"ulonglong", NX_DTYPE_U64},
    {"uint", UINT_OF(sizeof(unsigned long))}, {"uintp", UINT_OF(sizeof(void *))},
    {"uint0", UINT_OF(sizeof(void *))}, {"ulong", UINT_OF(sizeof(unsigned long))},
    {"bool_", NX_DTYPE_BOOL},   {"bool8", NX_DTYPE_BOOL},
};

/* One-letter type codes (np.dtype('d')) and kind + size typestrings ('f8', 'b1'). */
static bool numpy_code(const char *s, nx_dtype *out)
{
    static const char codes[] = "?bBhilqpefdILQP";
    static const nx_dtype code_dtype[] = {
        NX_DTYPE_BOOL, NX_DTYPE_I8, NX_DTYPE_U8, NX_DTYPE_I16, INT_OF(sizeof(int)),
        INT_OF(sizeof(long)), NX_DTYPE_I64, INT_OF(sizeof(void *)), NX_DTYPE_F16,
        NX_DTYPE_F32, NX_DTYPE_F64, UINT_OF(sizeof(unsigned)), UINT_OF(sizeof(unsigned long)),
        NX_DTYPE_U64, UINT_OF(sizeof(void *)),
    };
    const char *c = s[0] ? strchr(codes, s[0]) : NULL;
    if (c && s[1] == '\0') {
        *out = code_dtype[c - codes];
        return true;
    }
    if (s[0] == '\0' || s[1] < '1' || s[1] > '8' || s[2] != '\0')
        return false;
    static const struct {
        char kind, size;
        nx_dtype dtype;
    } typestrs[] = {
        {'b', '1', NX_DTYPE_BOOL}, {'i', '1', NX_DTYPE_I8},  {'i', '2', NX_DTYPE_I16},
        {'i', '4', NX_DTYPE_I32},  {'i', '8', NX_DTYPE_I64}, {'u', '1', NX_DTYPE_U8},
        {'u', '4', NX_DTYPE_U32},  {'u', '8', NX_DTYPE_U64},
        {'f', '2', NX_DTYPE_F16},  {'f', '4', NX_DTYPE_F32}, {'f', '8', NX_DTYPE_F64},
    };
    for (size_t i = 0; i < sizeof typestrs / sizeof *typestrs; i++) {
        if (typestrs[i].kind == s[0] && typestrs[i].size == s[1]) {
            *out = typestrs[i].dtype;
            return true;
        }
    }
    return false;
}

bool nx_dtype_from_name(const char *name, nx_dtype *out)
{
    if (!name || !out)
        return false;
    /* nitrix's own names, in any case; they win where NumPy reads the same letters otherwise
     * (i8, u8, f16, U8) */
    for (int i = 0; i < NX_DTYPE_COUNT; i++) {
        if (strcasecmp(name, dtypes[i].name) == 0) {
            *out = (nx_dtype)i;
            return true;
        }
    }
    if (strcasecmp(name, "bfloat16") == 0) {
        *out = NX_DTYPE_BF16;
        return true;
    }
    /* NumPy's type names, also in any case (NumPy gives "FLOAT32" no other meaning) */
    for (size_t i = 0; i < sizeof numpy_names / sizeof *numpy_names; i++) {
        if (strcasecmp(name, numpy_names[i].name) == 0) {
            *out = numpy_names[i].dtype;
            return true;
        }
    }
    /* codes and typestrings, case-sensitive as np.dtype() is ('B' is uint8, 'b' int8) */
    char order = name[0];
    const char *rest = strchr("<>=|", order) && order ? name + 1 : name;
    nx_dtype d;
    if (!numpy_code(rest, &d))
        return false;
    /* nitrix computes in the host's little-endian order: '>' is refused where it matters */
    if (order == '>' && nx_dtype_size(d) > 1)
        return false;
    *out = d;
    return true;
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
