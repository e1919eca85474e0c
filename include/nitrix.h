/*
 * nitrix — differentiable neuroimaging numerics, as an array-IR compiler with a C runtime.
 *
 * This header is the runtime core: the context (allocator, log, settings), status codes, dtypes,
 * host tensors and `.npy` array I/O. The graph IR builder API lives in <nitrix-graph.h>, which this
 * header includes.
 *
 * Ownership: every function that returns an object through an out-pointer hands the caller one
 * reference, released with the matching nx_X_free. Pointers returned directly (names, messages,
 * shapes) are borrowed and stay valid as long as the object they came from.
 *
 * Errors: fallible calls return nx_status. NX_OK is 0. The message for the most recent failure
 * on a context is read with nx_ctx_last_error(ctx). Nothing in the library aborts or exits.
 *
 * Example — read an array, double it through a host view, write it back:
 *
 *     #include <nitrix.h>
 *     #include <stdio.h>
 *
 *     int main(void)
 *     {
 *         nx_ctx *ctx = NULL;
 *         if (nx_ctx_new(NULL, &ctx) != NX_OK) {
 *             fprintf(stderr, "nitrix: %s\n", nx_ctx_last_error(NULL));
 *             return 1;
 *         }
 *         int64_t shape[2] = {2, 3};
 *         nx_tensor *t = NULL;
 *         if (nx_tensor_new(ctx, NX_DTYPE_F64, 2, shape, &t) != NX_OK) {
 *             fprintf(stderr, "nitrix: %s\n", nx_ctx_last_error(ctx));
 *             nx_ctx_free(ctx);
 *             return 1;
 *         }
 *         double *x = nx_tensor_data(t);
 *         for (int64_t i = 0; i < nx_tensor_numel(t); i++)
 *             x[i] = 2.0 * (double)i;
 *         nx_status st = nx_npy_write(ctx, "doubled.npy", t);
 *         if (st != NX_OK)
 *             fprintf(stderr, "nitrix: %s\n", nx_ctx_last_error(ctx));
 *         nx_tensor_free(t);
 *         nx_ctx_free(ctx);
 *         return st == NX_OK ? 0 : 1;
 *     }
 */
#ifndef NITRIX_H
#define NITRIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(NX_BUILDING_LIBRARY) && defined(__GNUC__)
#define NX_API __attribute__((visibility("default")))
#else
#define NX_API
#endif

#define NITRIX_VERSION_MAJOR 0
#define NITRIX_VERSION_MINOR 1
#define NITRIX_VERSION_PATCH 0

/* "0.1.0": the version of the library that is loaded, which may differ from the header's. */
NX_API const char *nx_version(void);

/* ------------------------------------------------------------------------------------------------
 * Status codes
 * ----------------------------------------------------------------------------------------------*/

typedef enum nx_status {
    NX_OK = 0,
    NX_ERR_INVALID_ARG,  /* an argument is out of its domain (NULL, bad option, bad axis) */
    NX_ERR_NOMEM,        /* the allocator returned NULL */
    NX_ERR_SHAPE,        /* shapes disagree, or a shape is out of range or overflows */
    NX_ERR_DTYPE,        /* a dtype is not accepted here */
    NX_ERR_PARSE,        /* malformed input text or file (.npy, formula) */
    NX_ERR_IO,           /* a file could not be opened, read or written */
    NX_ERR_UNSUPPORTED,  /* valid request this build or backend does not provide */
    NX_ERR_BACKEND,      /* a backend failed to initialise or to run (driver, JIT) */
    NX_ERR_INTERNAL,     /* a broken invariant inside the library: a bug, please report it */
    NX_STATUS_COUNT
} nx_status;

/* Static name of a code: "NX_OK", "NX_ERR_NOMEM", ... ("NX_ERR_UNKNOWN" out of range). */
NX_API const char *nx_status_str(nx_status status);

/* ------------------------------------------------------------------------------------------------
 * dtypes
 * ----------------------------------------------------------------------------------------------*/

typedef enum nx_dtype {
    NX_DTYPE_F32,
    NX_DTYPE_F64,
    NX_DTYPE_F16,
    NX_DTYPE_BF16,
    NX_DTYPE_I8,
    NX_DTYPE_I16,
    NX_DTYPE_I32,
    NX_DTYPE_I64,
    NX_DTYPE_U8,
    NX_DTYPE_BOOL, /* one byte, 0 or 1 */
    NX_DTYPE_U32,
    NX_DTYPE_U64,
    NX_DTYPE_COUNT
} nx_dtype;

/* Bytes per element; 0 for a value that is not a dtype. */
NX_API size_t nx_dtype_size(nx_dtype dtype);
/* "f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8", "bool"; NULL if not a dtype. */
NX_API const char *nx_dtype_name(nx_dtype dtype);
/* Parses a dtype name: nitrix's names above in any case ("bfloat16" too), or any spelling NumPy's
 * np.dtype() accepts for a supported dtype (type names in any case; one-letter codes and
 * typestrings case-sensitive, as NumPy's: 'B' is uint8, 'b' int8): "float32", "f4", "<f4", "=f4",
 * "|f4", "float", "double", "half", "int", "long", "intc", "b1", "?", "d", "B", ...
 * (tests/unit/dtype-spellings.h lists them, generated with NumPy). Where NumPy gives one of
 * nitrix's names another meaning nitrix's wins: "i8" is int8 (NumPy's int64; "<i8" is int64),
 * "u8" uint8, "f16" float16, "U8" uint8. Big-endian spellings of multi-byte types (">f4") are
 * refused. Returns false when the name is unknown or refused. */
NX_API bool nx_dtype_from_name(const char *name, nx_dtype *out);
NX_API bool nx_dtype_is_float(nx_dtype dtype);
NX_API bool nx_dtype_is_int(nx_dtype dtype); /* signed or unsigned integers; not bool */

/* ------------------------------------------------------------------------------------------------
 * Border modes: one enum for every family (scipy.ndimage's meanings). nx_pad, the smoothing,
 * morphology and sparse grid ops all take it; the op table's BORDER options parse into it.
 * ----------------------------------------------------------------------------------------------*/

typedef enum nx_border {
    NX_BORDER_REFLECT,  /* half-sample symmetric: d c b a | a b c d | d c b a  (scipy 'reflect') */
    NX_BORDER_CONSTANT, /* cval outside                                          ('constant') */
    NX_BORDER_NEAREST,  /* edge value repeated:    a a a | a b c d | d d d       ('nearest') */
    NX_BORDER_MIRROR,   /* whole-sample symmetric: d c b | a b c d | c b a       ('mirror') */
    NX_BORDER_WRAP,     /* periodic:               b c d | a b c d | a b c       ('wrap') */
    NX_BORDER_COUNT
} nx_border;

/* IEEE binary16 and bfloat16 conversions, correctly rounded (round to nearest, ties to even),
 * with overflow to infinity, gradual underflow and NaN preserved as a quiet NaN. */
NX_API uint16_t nx_f32_to_f16(float x);
NX_API uint16_t nx_f64_to_f16(double x);
NX_API float nx_f16_to_f32(uint16_t h);
NX_API uint16_t nx_f32_to_bf16(float x);
NX_API uint16_t nx_f64_to_bf16(double x);
NX_API float nx_bf16_to_f32(uint16_t b);

/* ------------------------------------------------------------------------------------------------
 * Context
 * ----------------------------------------------------------------------------------------------*/

typedef struct nx_ctx nx_ctx;

/* Host allocator hook. alloc returns memory aligned to at least `align` (a power of two, at most
 * 4096) or NULL; free receives the size that was asked for. Both may be called from any thread. */
typedef struct nx_allocator {
    void *(*alloc)(void *user, size_t size, size_t align);
    void (*free)(void *user, void *ptr, size_t size);
    void *user;
} nx_allocator;

typedef enum nx_log_level {
    NX_LOG_DEBUG,
    NX_LOG_INFO,
    NX_LOG_WARN,
    NX_LOG_ERROR,
} nx_log_level;

/* Log sink. msg is one line without a trailing newline, valid only during the call.
 *
 * Progress: an op call (nx_op_call, an op's entry point) that runs longer than 2 seconds sends
 * lines at NX_LOG_INFO starting with NX_PROGRESS_PREFIX, at most two a second ("progress:
 * susan_emulator: running, 12.0 s elapsed"; with done/total counts where the op knows them, a
 * percentage and the time left), and a last "progress: <op>: done in <t>" when it ends. A sink
 * that shows them on a terminal may rewrite one line. They may come from a library thread while
 * the call runs (one keeps time for every long call), so a sink must accept calls from any thread
 * and must not free the context. */
typedef void (*nx_log_fn)(void *user, nx_log_level level, const char *msg);
#define NX_PROGRESS_PREFIX "progress: "

typedef enum nx_backend {
    NX_BACKEND_AUTO, /* CUDA when a GPU of compute capability >= 8.0 answers, else CPU */
    NX_BACKEND_CPU,
    NX_BACKEND_CUDA,
    NX_BACKEND_REF, /* the reference interpreter: slow, obviously right */
    NX_BACKEND_COUNT
} nx_backend;

/* "auto", "cpu", "cuda", "ref"; NULL out of range. */
NX_API const char *nx_backend_name(nx_backend backend);

/* The CUDA code generator's alternatives, for measurements (docs/cuda.md, "Code generator
 * options"). In nx_ctx_opts, 0 in a field (NX_CUDA_DEFAULT) leaves it to the NITRIX_PTX_* variable
 * named beside it (read at creation), else to the generator's own choice. The resolved set is part
 * of every CUDA kernel's cache key: contexts that differ in any field never share a kernel. */
typedef enum nx_cuda_switch {
    NX_CUDA_DEFAULT = 0, /* the generator's choice (see each field) */
    NX_CUDA_OFF,
    NX_CUDA_ON,
} nx_cuda_switch;

typedef struct nx_cuda_codegen_opts {
    nx_cuda_switch split;   /* NITRIX_PTX_SPLIT: the border/interior box split (default on) */
    nx_cuda_switch narrow;  /* NITRIX_PTX_NARROW: 32-bit index arithmetic (default on) */
    nx_cuda_switch minmax;  /* NITRIX_PTX_MINMAX: one NaN test per leaf of a float MIN/MAX network
                               (default on) */
    nx_cuda_switch rows;    /* NITRIX_PTX_ROWS: box threads take several points along an outer
                               axis; default: in kernels without a float MIN/MAX; on: in every box
                               kernel; off: never */
    nx_cuda_switch stencil; /* NITRIX_PTX_STENCIL: window MIN/MAX networks through shared-memory
                               tiles (default on) */
    nx_cuda_switch ilp;     /* NITRIX_PTX_ILP: several points a thread in large unsplit kernels
                               (default on) */
    nx_cuda_switch stencil_shell; /* NITRIX_PTX_STENCIL_SHELL: on: the stencil's shell in blocks
                                     of its own, tiles over the box only (default off) */
    int stencil_tz;    /* NITRIX_PTX_STENCIL_TZ: stencil outputs a thread along axis 0, 1..64 */
    int stencil_depth; /* NITRIX_PTX_STENCIL_DEPTH: planes the stencil's loads run ahead, 1..8 */
    int stencil_ry;    /* NITRIX_PTX_STENCIL_RY: stencil rows a thread along axis 1, 1..4 */
    int stencil_pb;    /* NITRIX_PTX_STENCIL_PB: stencil planes staged per barrier, 1..4 */
    int pair_rows;     /* NITRIX_PTX_PAIR_ROWS: points a thread of the pairwise folds: 1, 2, 4, 8
                          or 16 */
} nx_cuda_codegen_opts;

typedef struct nx_ctx_opts {
    const nx_allocator *allocator; /* NULL: malloc-based; copied, so it may be a temporary */
    nx_log_fn log;                 /* NULL: lines go to stderr as "nitrix: <level>: <msg>" */
    void *log_user;
    bool ignore_env; /* true: do not read NITRIX_* variables; the defaults below apply */
    int num_threads;       /* > 0: overrides NITRIX_NUM_THREADS (1..1024); 0: not set here */
    const char *cache_dir; /* non-NULL: overrides NITRIX_CACHE_DIR and the default */
    /* non-NULL: its fields that are not 0 override the NITRIX_PTX_* variables; copied */
    const nx_cuda_codegen_opts *cuda_codegen;
    /* non-NULL: overrides NITRIX_LOG: the lowest level passed to the log sink, "debug", "info",
     * "warning" ("warn"), "error" or "off", any case. When neither sets it, the default stderr
     * sink shows info and above, and a log function of the caller receives every level. */
    const char *log_level;
} nx_ctx_opts;

/* Settings, read from the environment at creation (unless opts.ignore_env):
 *   NITRIX_BACKEND           auto | cpu | cuda | ref                   (default auto)
 *   NITRIX_NUM_THREADS       integer 1..1024, or 0 for all cores        (default 0)
 *   NITRIX_CACHE_DIR         a non-empty path     (default $XDG_CACHE_HOME/nitrix or ~/.cache/nitrix)
 *   NITRIX_REPRODUCIBLE      0|1|false|true|no|yes|off|on               (default 0)
 *   NITRIX_STRICT_BACKEND    same boolean spellings                     (default 0)
 *   NITRIX_SILENCE_FALLBACK  same boolean spellings                     (default 0)
 *   NITRIX_LOG               debug | info | warning | error | off: the lowest level logged
 *                            (default: info on stderr; every level to a caller's log function)
 *   NITRIX_DUMP              comma-separated graph, fuse, kernel, llvm: what compilation prints
 *                            to stderr (default none)
 *   NITRIX_PTX_SPLIT, _NARROW, _MINMAX, _ROWS, _STENCIL, _ILP, _STENCIL_SHELL
 *                            the boolean spellings (unset: the generator's choice)
 *   NITRIX_PTX_STENCIL_TZ 1..64, _STENCIL_DEPTH 1..8, _STENCIL_RY 1..4, _STENCIL_PB 1..4,
 *   NITRIX_PTX_PAIR_ROWS 1|2|4|8|16   (unset: the generator's choice; nx_cuda_codegen_opts)
 * A bad value fails creation with NX_ERR_INVALID_ARG and a message naming the variable and the values
 * it accepts. When creation fails, *out is NULL and nx_ctx_last_error(NULL) holds the message. */
NX_API nx_status nx_ctx_new(const nx_ctx_opts *opts, nx_ctx **out);
NX_API void nx_ctx_free(nx_ctx *ctx);
/* With the default allocator, a context keeps up to 32 freed host blocks of 2 MiB or more (an
 * eighth of physical memory in all, between 256 MiB and 2 GiB) and gives each to the next
 * allocation of the same size, so repeated calls on same-shaped tensors reuse warm pages. nx_ctx_trim returns them to the system now (nx_ctx_free does too). A
 * context with a user allocator keeps nothing. */
NX_API void nx_ctx_trim(nx_ctx *ctx);

/* The message of the most recent failure on ctx ("" if none). With ctx == NULL: the message of the
 * most recent context-less failure on this thread (a failed nx_ctx_new). The string is a
 * thread-local copy, valid until the next call of this function on the same thread, so contexts
 * shared between threads are safe. */
NX_API const char *nx_ctx_last_error(const nx_ctx *ctx);

NX_API nx_backend nx_ctx_backend(const nx_ctx *ctx);
NX_API int nx_ctx_num_threads(const nx_ctx *ctx); /* resolved: >= 1 */
NX_API const char *nx_ctx_cache_dir(const nx_ctx *ctx);
/* Reproducible mode in effect for the calling thread: the innermost scope this thread opened on ctx
 * with nx_ctx_reproducible_push, else NITRIX_REPRODUCIBLE as read at creation. */
NX_API bool nx_ctx_reproducible(const nx_ctx *ctx);
NX_API bool nx_ctx_strict_backend(const nx_ctx *ctx);
NX_API bool nx_ctx_silence_fallback(const nx_ctx *ctx);

/* Scoped, nestable reproducible mode. Scopes are per thread and per context: a push on one thread
 * changes what nx_ctx_reproducible(ctx) answers on that thread only, so two threads sharing a
 * context may run one reproducible and one fast region at the same time. on = false opens a fast
 * region inside a reproducible one (and the reverse). Each push is matched by a pop on the same
 * thread; a thread holds at most NX_REPRODUCIBLE_MAX_DEPTH open scopes over all contexts (deeper
 * pushes fail with NX_ERR_INVALID_ARG, as does a pop without a push). Close a context's scopes
 * before freeing it. */
#define NX_REPRODUCIBLE_MAX_DEPTH 64
NX_API nx_status nx_ctx_reproducible_push(nx_ctx *ctx, bool on);
NX_API nx_status nx_ctx_reproducible_pop(nx_ctx *ctx);

/* The divergent-op registry (docs/fidelity.md): ops with more than one variant whose results
 * differ (a canonical one, bit-stable across backends and runs, and a fast one). Each registered op
 * takes a driver= value; nx_driver_resolve picks the variant: an explicit driver wins, else the
 * canonical one under reproducible mode, else the fast one where its contract keeps it within
 * NX_DIVERGENT_AUTO_TOL of the canonical one (rtol and atol, the atol stated for data in [0, 1],
 * that is relative to the data's range), else the canonical one. So "auto" never trades more than
 * a thousandth of the data's range (or relative difference) for speed, about what float32
 * accumulation order gives over millions of terms: a fast variant further off (the recursive
 * Gaussian, 0.07 of the range) runs only when asked for by name. The table is static: complete as
 * soon as the library is loaded. */
#define NX_DIVERGENT_AUTO_TOL 1e-3
typedef struct nx_divergent_op {
    const char *op;        /* the public entry point without nx_ (the `nitrix run` spelling) */
    const char *canonical; /* driver value of the canonical variant */
    const char *fast;      /* driver value of the fast variant */
    const char *drivers;   /* every accepted driver value, '|'-separated */
    double rtol, atol;     /* |fast - canonical| <= atol + rtol * |canonical|, elementwise */
    const char *reason;    /* one line: why the variants differ */
} nx_divergent_op;

/* The registry's rows; *count gets their number (count may be NULL). Never NULL. */
NX_API const nx_divergent_op *nx_divergent_ops(size_t *count);
/* Whether "auto" may pick row's fast variant (outside reproducible mode): its rtol and atol are
 * both within NX_DIVERGENT_AUTO_TOL. */
NX_API bool nx_divergent_auto_fast(const nx_divergent_op *row);

/* Resolves a driver= value for a registered op. driver NULL, "" or "auto": the canonical driver
 * under nx_ctx_reproducible(ctx) or where nx_divergent_auto_fast(row) is false, else the fast one;
 * any other value must be one of the op's
 * drivers. *out is the registry's string for the canonical and fast drivers, else driver itself.
 * An unregistered op or an unknown driver is NX_ERR_INVALID_ARG with a message listing what is
 * accepted. */
NX_API nx_status nx_driver_resolve(nx_ctx *ctx, const char *op, const char *driver,
                                   const char **out);

/* Sends one formatted line to the context's log sink. */
NX_API void nx_ctx_log(nx_ctx *ctx, nx_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ------------------------------------------------------------------------------------------------
 * Tensors
 * ----------------------------------------------------------------------------------------------*/

#define NX_MAX_DIMS 8

typedef enum nx_device {
    NX_DEVICE_HOST,
    NX_DEVICE_CUDA,
} nx_device;

typedef struct nx_tensor nx_tensor;

/* A new host tensor, C-contiguous, zero-filled, data aligned to 64 bytes. ndim is 0..NX_MAX_DIMS;
 * every extent is >= 0 and the byte size must fit in int64 (NX_ERR_SHAPE otherwise). */
NX_API nx_status nx_tensor_new(nx_ctx *ctx, nx_dtype dtype, int ndim, const int64_t *shape,
                               nx_tensor **out);
/* A tensor over caller memory, which is borrowed: the caller keeps it alive and frees it. strides
 * are in elements (may be negative or zero); NULL means C-contiguous. */
NX_API nx_status nx_tensor_wrap(nx_ctx *ctx, void *data, nx_dtype dtype, int ndim,
                                const int64_t *shape, const int64_t *strides, nx_tensor **out);
/* nx_tensor_wrap for memory on a device: data is a host address (NX_DEVICE_HOST, the same as
 * nx_tensor_wrap) or a CUDA device address (NX_DEVICE_CUDA: memory of the current CUDA context's
 * device, as a DLPack producer on that device hands out). Borrowed as with nx_tensor_wrap; nothing
 * is copied and nothing is checked about the address beyond its being non-NULL when the tensor has
 * elements. Another device value is NX_ERR_INVALID_ARG. */
NX_API nx_status nx_tensor_wrap_device(nx_ctx *ctx, void *data, nx_device device, nx_dtype dtype,
                                       int ndim, const int64_t *shape, const int64_t *strides,
                                       nx_tensor **out);
/* Releases this tensor handle; the storage goes when its last view goes. NULL is ignored. */
NX_API void nx_tensor_free(nx_tensor *t);

NX_API nx_ctx *nx_tensor_ctx(const nx_tensor *t);
NX_API nx_dtype nx_tensor_dtype(const nx_tensor *t);
NX_API int nx_tensor_ndim(const nx_tensor *t);
NX_API const int64_t *nx_tensor_shape(const nx_tensor *t);   /* ndim extents (borrowed) */
NX_API const int64_t *nx_tensor_strides(const nx_tensor *t); /* ndim strides, in elements */
NX_API int64_t nx_tensor_numel(const nx_tensor *t);
NX_API nx_device nx_tensor_device(const nx_tensor *t);
NX_API bool nx_tensor_is_contiguous(const nx_tensor *t); /* C order, no gaps; empty: true */
/* Address of element (0, ..., 0); NULL for a tensor with no elements. */
NX_API void *nx_tensor_data(const nx_tensor *t);

/* A new C-contiguous tensor with the same dtype and values. */
NX_API nx_status nx_tensor_copy(const nx_tensor *t, nx_tensor **out);
/* t itself (one more reference) if it is contiguous, else a contiguous copy. */
NX_API nx_status nx_tensor_contiguous(const nx_tensor *t, nx_tensor **out);
/* Values converted to dtype, as NumPy's astype: floats to ints truncate toward zero (NaN and out of
 * range give NX_ERR_INVALID_ARG naming the element, rather than undefined behaviour); integers to
 * narrower integers wrap modulo 2^bits; nonzero (and NaN) to bool is 1; f16/bf16 round to nearest
 * even; a same-dtype cast is a bit-exact copy. Device tensors: NX_ERR_INVALID_ARG. */
NX_API nx_status nx_tensor_cast(const nx_tensor *t, nx_dtype dtype, nx_tensor **out);

/* Views share storage with t and copy nothing; they only compute geometry, so they work on device
 * tensors too (the view stays on the device). Axes are 0..ndim-1. */
/* New shape with the same element count; one extent may be -1 (inferred). Fails with NX_ERR_SHAPE
 * when the strides of t cannot express it without a copy (use nx_tensor_contiguous first). */
NX_API nx_status nx_tensor_reshape(const nx_tensor *t, int ndim, const int64_t *shape,
                                   nx_tensor **out);
/* Axis i of the view is axis perm[i] of t; perm is a permutation of 0..ndim-1. */
NX_API nx_status nx_tensor_permute(const nx_tensor *t, const int *perm, nx_tensor **out);
/* Python-style start:stop:step on one axis. Negative start/stop count from the end and are clamped
 * as Python does; step is nonzero and may be negative. */
NX_API nx_status nx_tensor_slice(const nx_tensor *t, int axis, int64_t start, int64_t stop,
                                 int64_t step, nx_tensor **out);

/* Device tensors (CUDA backend). A device tensor's data pointer is a device address; host-only
 * calls on it (cast, .npy write) fail with NX_ERR_INVALID_ARG. Without a usable GPU these return
 * NX_ERR_BACKEND with the reason (no driver, no device, compute capability below 8.0). Asking for
 * the device a tensor is already on returns a new handle on the same storage, not a copy.
 * The driver and NVRTC are opened at run time, once per process (so nx_ctx_opts.ignore_env does not
 * apply): NITRIX_CUDA_DRIVER_PATH overrides libcuda.so.1; NITRIX_NVRTC_PATH overrides the search
 * libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so. */
NX_API nx_status nx_tensor_to_device(const nx_tensor *t, nx_device device, nx_tensor **out);

/* ------------------------------------------------------------------------------------------------
 * System information (what `nitrix info` prints)
 * ----------------------------------------------------------------------------------------------*/

#define NX_MAX_GPUS 8
typedef struct nx_gpu_info {
    char name[128];
    int cc_major, cc_minor;
    int sm_count;
    int64_t memory_bytes;
    bool usable; /* compute capability >= 8.0: the CUDA backend runs on it */
} nx_gpu_info;

typedef struct nx_system_info {
    char version[16];
    char cpu_name[64];      /* e.g. "AMD EPYC 9R14" */
    char cpu_features[256]; /* space-separated: "sse4.2 avx2 fma avx512f ..." */
    int cpu_cores;
    char llvm_version[16];  /* the LLVM the CPU backend was built against */
    bool cuda_driver_found; /* libcuda.so.1 opened and cuInit succeeded */
    int cuda_driver_version; /* e.g. 13000 */
    char cuda_status[160];  /* why CUDA is unavailable, or "ok" */
    bool nvrtc_found;
    int nvrtc_major, nvrtc_minor;
    int gpu_count;
    nx_gpu_info gpus[NX_MAX_GPUS];
    char cache_dir[4096];
    int64_t cache_bytes;   /* size of the on-disk kernel cache, -1 if unknown */
    int64_t cache_entries; /* kernel files in it, -1 if unknown */
} nx_system_info;

NX_API nx_status nx_system_info_get(nx_ctx *ctx, nx_system_info *out);

/* ------------------------------------------------------------------------------------------------
 * .npy array I/O (NumPy format versions 1.0, 2.0, 3.0; little-endian; C or Fortran order)
 * ----------------------------------------------------------------------------------------------*/

/* Reads a file or buffer into a new C-contiguous host tensor. Malformed, truncated or absurd input
 * is NX_ERR_PARSE with a message saying what is wrong; the reader never reads out of bounds. */
NX_API nx_status nx_npy_read(nx_ctx *ctx, const char *path, nx_tensor **out);
NX_API nx_status nx_npy_read_mem(nx_ctx *ctx, const void *buf, size_t len, nx_tensor **out);
/* Writes version 1.0 (2.0 when the header needs it), C order, little-endian. What is at path
 * decides how (docs/user-guide.md, ".npy files"): a new or regular file is written to a temporary
 * file beside it, synced and renamed onto it, so readers never see a partial array, and an
 * existing file keeps its permission bits; a symbolic link is followed and the file it names is
 * written so; a character device (/dev/null, /dev/stdout), a FIFO with a reader, and a regular
 * file with several hard links are written in place; a directory, a socket, a block device and
 * a FIFO without a reader are refused (NX_ERR_INVALID_ARG, NX_ERR_IO for the FIFO) before any
 * byte is written. A failed write (/dev/full, a full disk) is NX_ERR_IO and leaves no file. */
NX_API nx_status nx_npy_write(nx_ctx *ctx, const char *path, const nx_tensor *t);
/* Writes ts[i] to paths[i] for i < n (1..NX_NPY_WRITE_MAX), all or nothing: every target is
 * checked and every temporary file written before any target changes; then the in-place targets
 * are written and the temporary files renamed. A failure before that commit leaves every path as
 * it was; only a failing in-place target (or a rename, which needs the directory to vanish) can
 * stop a commit part way, after the targets before it. */
#define NX_NPY_WRITE_MAX 64
NX_API nx_status nx_npy_write_many(nx_ctx *ctx, int n, const char *const *paths,
                                   const nx_tensor *const *ts);
/* Writes into a buffer from the context allocator; free it with nx_ctx_buffer_free(ctx, buf, len). */
NX_API nx_status nx_npy_write_mem(nx_ctx *ctx, const nx_tensor *t, void **buf, size_t *len);
NX_API void nx_ctx_buffer_free(nx_ctx *ctx, void *buf, size_t len);

/* Border-mode names: "reflect", "constant", "nearest", "mirror", "wrap"; NULL out of range. */
NX_API const char *nx_border_name(nx_border b);
/* Any case; also scipy's and the spec's synonyms: "edge"/"replicate" = nearest,
 * "symmetric"/"grid-mirror" = reflect, "periodic"/"grid-wrap" = wrap, "grid-constant" = constant.
 * Unknown: NX_ERR_INVALID_ARG with a message listing the names (ctx may be NULL). */
NX_API nx_status nx_border_parse(nx_ctx *ctx, const char *name, nx_border *out);

#ifdef __cplusplus
}
#endif

#include "nitrix-graph.h"

#endif /* NITRIX_H */
