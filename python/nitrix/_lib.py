"""The C ABI of libnitrix through ctypes: structures, prototypes and the library handle.

Only the standard library is imported here, so the stub generator can read the op table at build
time without NumPy. ctypes releases the GIL for the length of every foreign call.
"""
import ctypes as C
import os

# nx_status
OK = 0
STATUS_NAMES = (
    "NX_OK", "NX_ERR_INVALID_ARG", "NX_ERR_NOMEM", "NX_ERR_SHAPE", "NX_ERR_DTYPE",
    "NX_ERR_PARSE", "NX_ERR_IO", "NX_ERR_UNSUPPORTED", "NX_ERR_BACKEND", "NX_ERR_INTERNAL",
)

# nx_dtype, in the enum's order, with the NumPy name of each
DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64",
          "uint8", "bool", "uint32", "uint64")

# nx_opt_type
OPT_TYPES = ("int", "ints", "float", "floats", "bool", "enum", "border", "dtype", "string",
             "semiring", "tensor")

# nx_log_level
LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR = 0, 1, 2, 3

# nx_device
DEVICE_HOST, DEVICE_CUDA = 0, 1

BACKENDS = ("auto", "cpu", "cuda", "ref")

MAX_DIMS = 8


class OpOpt(C.Structure):
    _fields_ = [("name", C.c_char_p), ("type", C.c_int), ("default", C.c_char_p),
                ("allowed", C.c_char_p), ("max_count", C.c_int), ("help", C.c_char_p)]


class OpInfo(C.Structure):
    _fields_ = [("name", C.c_char_p), ("family", C.c_char_p), ("summary", C.c_char_p),
                ("ninputs", C.c_int), ("inputs", C.POINTER(C.c_char_p)),
                ("nrequired", C.c_int), ("noutputs", C.c_int),
                ("outputs", C.POINTER(C.c_char_p)), ("nopts", C.c_int),
                ("opts", C.POINTER(OpOpt)), ("differentiable", C.c_bool),
                ("driver_site", C.c_char_p), ("aliases", C.POINTER(C.c_char_p))]


class DivergentOp(C.Structure):
    _fields_ = [("op", C.c_char_p), ("canonical", C.c_char_p), ("fast", C.c_char_p),
                ("drivers", C.c_char_p), ("rtol", C.c_double), ("atol", C.c_double),
                ("reason", C.c_char_p)]


LOG_FN = C.CFUNCTYPE(None, C.c_void_p, C.c_int, C.c_char_p)


class CtxOpts(C.Structure):
    _fields_ = [("allocator", C.c_void_p), ("log", LOG_FN), ("log_user", C.c_void_p),
                ("ignore_env", C.c_bool), ("num_threads", C.c_int), ("cache_dir", C.c_char_p),
                ("cuda_codegen", C.c_void_p), ("log_level", C.c_char_p)]


class GpuInfo(C.Structure):
    _fields_ = [("name", C.c_char * 128), ("cc_major", C.c_int), ("cc_minor", C.c_int),
                ("sm_count", C.c_int), ("memory_bytes", C.c_int64), ("usable", C.c_bool)]


class SystemInfo(C.Structure):
    _fields_ = [("version", C.c_char * 16), ("cpu_name", C.c_char * 64),
                ("cpu_features", C.c_char * 256), ("cpu_cores", C.c_int),
                ("llvm_version", C.c_char * 16), ("cuda_driver_found", C.c_bool),
                ("cuda_driver_version", C.c_int), ("cuda_status", C.c_char * 160),
                ("nvrtc_found", C.c_bool), ("nvrtc_major", C.c_int), ("nvrtc_minor", C.c_int),
                ("gpu_count", C.c_int), ("gpus", GpuInfo * 8), ("cache_dir", C.c_char * 4096),
                ("cache_bytes", C.c_int64), ("cache_entries", C.c_int64)]


_P = C.c_void_p
_PP = C.POINTER(C.c_void_p)
_STRS = C.POINTER(C.c_char_p)
_I64S = C.POINTER(C.c_int64)

_PROTOTYPES = {
    "nx_version": (C.c_char_p, []),
    "nx_status_str": (C.c_char_p, [C.c_int]),
    "nx_ctx_new": (C.c_int, [C.POINTER(CtxOpts), _PP]),
    "nx_ctx_free": (None, [_P]),
    "nx_ctx_last_error": (C.c_char_p, [_P]),
    "nx_ctx_backend": (C.c_int, [_P]),
    "nx_ctx_num_threads": (C.c_int, [_P]),
    "nx_ctx_cache_dir": (C.c_char_p, [_P]),
    "nx_ctx_reproducible": (C.c_bool, [_P]),
    "nx_ctx_reproducible_push": (C.c_int, [_P, C.c_bool]),
    "nx_ctx_reproducible_pop": (C.c_int, [_P]),
    "nx_divergent_ops": (C.POINTER(DivergentOp), [C.POINTER(C.c_size_t)]),
    "nx_divergent_auto_fast": (C.c_bool, [C.POINTER(DivergentOp)]),
    "nx_ops": (C.POINTER(C.POINTER(OpInfo)), [C.POINTER(C.c_size_t)]),
    "nx_op_find": (C.POINTER(OpInfo), [C.c_char_p]),
    "nx_op_call": (C.c_int, [_P, C.c_char_p, C.c_int, _PP, C.c_int, _STRS, _STRS, C.c_int,
                             _PP]),
    "nx_op_vjp": (C.c_int, [_P, C.c_char_p, C.c_int, _PP, C.c_int, _STRS, _STRS, C.c_int, _PP,
                            _PP]),
    "nx_op_check_options": (C.c_int, [_P, C.c_char_p, C.c_int, _STRS, _STRS]),
    "nx_op_tolerance_get": (C.c_bool, [C.c_char_p, C.c_int, C.c_char_p, C.c_char_p,
                                       C.POINTER(C.c_double), C.POINTER(C.c_double)]),
    "nx_tensor_wrap": (C.c_int, [_P, _P, C.c_int, C.c_int, _I64S, _I64S, _PP]),
    "nx_tensor_wrap_device": (C.c_int, [_P, _P, C.c_int, C.c_int, C.c_int, _I64S, _I64S, _PP]),
    "nx_tensor_free": (None, [_P]),
    "nx_tensor_ctx": (_P, [_P]),
    "nx_tensor_to_device": (C.c_int, [_P, C.c_int, _PP]),
    "nx_tensor_dtype": (C.c_int, [_P]),
    "nx_tensor_ndim": (C.c_int, [_P]),
    "nx_tensor_shape": (_I64S, [_P]),
    "nx_tensor_strides": (_I64S, [_P]),
    "nx_tensor_numel": (C.c_int64, [_P]),
    "nx_tensor_device": (C.c_int, [_P]),
    "nx_tensor_data": (_P, [_P]),
    "nx_system_info_get": (C.c_int, [_P, C.POINTER(SystemInfo)]),
}


def _find_library():
    override = os.environ.get("NITRIX_LIBRARY")
    if override:
        return override
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, "libnitrix.so")


def load(path=None):
    """The library at path (default: NITRIX_LIBRARY, else libnitrix.so beside this file)."""
    path = path or _find_library()
    lib = C.CDLL(path)
    for name, (res, args) in _PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    lib.path = path
    return lib


def text(b):
    """A C string as str ('' for NULL)."""
    return b.decode("utf-8", "replace") if b else ""


def strings(ptr, n=None):
    """A C array of n strings (or NULL-terminated when n is None) as a tuple of str."""
    if not ptr:
        return ()
    out = []
    i = 0
    while n is None or i < n:
        s = ptr[i]
        if n is None and s is None:
            break
        out.append(text(s))
        i += 1
    return tuple(out)
