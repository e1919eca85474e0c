/* Vectorisable math for JIT-ed kernels: exp, log, log1p, expm1, sin, cos, tanh, erf, pow, sqrt,
 * atan2 as LLVM IR, in f32 and f64 (scalar or vector types).
 *
 * Each function is emitted into the kernel's module as an internal, always-inline function of
 * straight-line code (range reduction, polynomials, integer bit tricks, selects for special values
 * and ranges), with no call into libm: after inlining, the loop vectoriser widens it like any
 * other arithmetic. LLVM 14 would keep a libm call scalar.
 *
 * Methods (f64): exp, expm1, log, log1p, erf and the sin/cos kernels are fdlibm's algorithms and
 * coefficients, made branch-free (every path is computed, selects pick); tanh is Cephes's rational
 * below 0.625 and fdlibm's 1 - 2/(expm1(2|x|) + 2) above; pow is exp(y log x) with log x in
 * double-double (a 9-entry select table narrows the reduced argument) and an exp that takes a
 * double-double argument; atan2 is fdlibm's atan on |y| / |x| (its four intervals computed and
 * selected) with e_atan2's quadrants and special cases. Exact products use Dekker's splitting,
 * not an FMA the host may lack.
 * f32 exp and log use f32 polynomials; the other f32 functions evaluate the f64 code and round
 * once (as glibc's do), which vectorises at the f64 width.
 *
 * Accuracy, measured in JIT-ed vectorised loops against long double libm (tests/jit/test-math.c
 * checks these as bounds): f64 below 1 ulp except tanh (1.26 ulp) and atan2 (1.37 ulp: the
 * quotient |y| / |x| is rounded before the atan); f32 exp 0.96, log 0.77, the
 * others 0.5 ulp. sin and cos reduce inline with a 3-part pi/2 (fdlibm's medium range) for
 * |x| <= NX_X86_TRIG_FAST_MAX = 2^20 pi/2 ~ 1.6e6; beyond, every finite x is reduced exactly
 * (Payne-Hanek: the mantissa times a 192-bit window of 2/pi in 64-bit integer products), on a
 * slow path that the vectorised loop enters once per vector only when one of its lanes needs it
 * (math.c's sin/cos section says how). sin and cos stay below 0.8 ulp (f64) and 0.5 ulp (f32)
 * over the whole range, the hardest reductions of every exponent included.
 *
 * Special values follow C99 Annex F: NaN in, NaN out (except pow(x, 0) = pow(1, y) = 1); inf, -inf
 * and signed zeros as libm; overflow to inf and gradual underflow to subnormals and 0. */
#ifndef NX_CODEGEN_X86_MATH_H
#define NX_CODEGEN_X86_MATH_H

#include <llvm-c/Core.h>

#include "runtime/internal.h"

/* Largest |x| that sin and cos reduce inline (Cody-Waite, 2^20 pi/2); larger finite |x| take the
 * Payne-Hanek path (math.c says how it stays off the fast path). */
#define NX_X86_TRIG_FAST_MAX 0x1.921fb54442d18p+20

typedef enum nx_x86_math_fn {
    NX_X86_MATH_EXP,
    NX_X86_MATH_LOG,
    NX_X86_MATH_LOG1P,
    NX_X86_MATH_EXPM1,
    NX_X86_MATH_SIN,
    NX_X86_MATH_COS,
    NX_X86_MATH_TANH,
    NX_X86_MATH_ERF,
    NX_X86_MATH_POW, /* two arguments */
    NX_X86_MATH_SQRT,
    NX_X86_MATH_ATAN2, /* two arguments: atan2(y, x), y first as libm */
    NX_X86_MATH_COUNT
} nx_x86_math_fn;

/* Names this library's code: a kernel cache key that includes it drops objects compiled with
 * another version of these functions (their bodies are not in the kernel's IR text). */
NX_HIDDEN const char *nx_x86_math_version(void);

/* "exp", "log", ...; NULL out of range. */
NX_HIDDEN const char *nx_x86_math_name(nx_x86_math_fn fn);
/* 1, or 2 for pow and atan2. */
NX_HIDDEN int nx_x86_math_arity(nx_x86_math_fn fn);

/* The function `ty fn(ty[, ty])` in mod, named "nx.math.<name>.<f32|f64|vNf32|vNf64>", defined
 * on first request (internal, alwaysinline). ty is float, double or a vector of them; NULL for
 * other types. */
NX_HIDDEN LLVMValueRef nx_x86_math_function(LLVMModuleRef mod, nx_x86_math_fn fn, LLVMTypeRef ty);
/* A call of it at the builder's position (y is ignored unless fn is pow). NULL as above. */
NX_HIDDEN LLVMValueRef nx_x86_math_call(LLVMBuilderRef b, LLVMModuleRef mod, nx_x86_math_fn fn,
                                        LLVMValueRef x, LLVMValueRef y);
/* Gives a body to every function of this library that mod declares but does not define, so
 * textual IR can say `declare float @nx.math.exp.f32(float)` and call it. A declaration with
 * the right name but the wrong type is NX_ERR_INTERNAL, naming it. */
NX_HIDDEN nx_status nx_x86_math_define_declared(nx_ctx *ctx, LLVMModuleRef mod);

#endif /* NX_CODEGEN_X86_MATH_H */
