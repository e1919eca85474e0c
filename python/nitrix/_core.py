"""Contexts, arrays in and out, and the one call every generated op function makes."""
import collections
import contextlib
import ctypes as C
import logging
import os
import threading
import warnings

import numpy as np

from . import _dlpack, _lib
from ._errors import NitrixBackendFallback, NitrixWarning, error_for

lib = _lib.load()
_log = logging.getLogger("nitrix")

# ---- dtypes ------------------------------------------------------------------------------------

_NP_TO_NX = {}
for _i, _name in enumerate(_lib.DTYPES):
    if _name != "bfloat16":
        _NP_TO_NX[np.dtype(_name)] = _i
_NX_TO_NP = {v: k for k, v in _NP_TO_NX.items()}
_SUPPORTED = ", ".join(n for n in _lib.DTYPES if n != "bfloat16")


def _nx_dtype(dt):
    code = _NP_TO_NX.get(dt)
    if code is None:
        raise error_for(4, f"dtype {dt} is not one nitrix computes on; expected one of "
                        f"{_SUPPORTED}")
    return code


# ---- contexts ----------------------------------------------------------------------------------

_fallbacks_seen = set()
_fallbacks_lock = threading.Lock()


def _is_fallback(msg):
    return "fallback" in msg.lower() or "NITRIX_SILENCE_FALLBACK" in msg


class Context:
    """A nitrix context: settings, the compiled-program cache, the thread pool.

    backend: 'auto', 'cpu', 'cuda' or 'ref' for the calls made in it that do not name one
    (None: NITRIX_BACKEND, else auto); threads: worker threads (None: NITRIX_NUM_THREADS, else
    every core); cache_dir: the on-disk kernel cache (None: NITRIX_CACHE_DIR, else
    ~/.cache/nitrix). ignore_env=True reads no NITRIX_* variable. Log lines go to the logging
    module's "nitrix" logger, warnings to the warnings module (fallbacks as
    NitrixBackendFallback). A context made before os.fork() is not usable in the child; the
    default context is made anew there.
    """

    def __init__(self, backend=None, threads=None, cache_dir=None, *, ignore_env=False,
                 log_level=None):
        self._ptr = None
        self._closed = False
        self._pid = os.getpid()
        if backend is not None and str(backend).lower() not in _lib.BACKENDS:
            raise error_for(1, f"Context: backend={backend!r}; expected one of "
                            f"{', '.join(_lib.BACKENDS)}")
        self.backend_request = None if backend is None else str(backend).lower()
        self._lines = collections.deque()
        lines = self._lines

        def sink(user, level, msg):
            lines.append((level, _lib.text(msg)))

        self._sink = _lib.LOG_FN(sink)
        opts = _lib.CtxOpts()
        opts.log = self._sink
        opts.ignore_env = bool(ignore_env)
        if threads is not None:
            if isinstance(threads, bool) or int(threads) != threads or threads < 1:
                raise error_for(1, f"Context: threads={threads!r}; expected an integer 1..1024 "
                                "(None: NITRIX_NUM_THREADS, else every core)")
            opts.num_threads = int(threads)
        self._cache_dir = None if cache_dir is None else os.fsencode(cache_dir)
        opts.cache_dir = self._cache_dir
        if log_level is None and (ignore_env or "NITRIX_LOG" not in os.environ):
            log_level = "info"
        self._log_level = None if log_level is None else str(log_level).encode()
        opts.log_level = self._log_level
        ptr = C.c_void_p()
        st = lib.nx_ctx_new(C.byref(opts), C.byref(ptr))
        if st != _lib.OK:
            raise error_for(st, _lib.text(lib.nx_ctx_last_error(None)))
        self._ptr = ptr

    @property
    def handle(self):
        """The nx_ctx * as an int (for C extensions of the caller)."""
        return self._check().value

    def _check(self):
        if self._ptr is None or self._closed:
            raise error_for(1, "this nitrix.Context is closed")
        if self._pid != os.getpid():
            raise error_for(1, "this nitrix.Context was made in the parent before os.fork(); "
                            "a child process makes its own (the default context is remade "
                            "automatically)")
        return self._ptr

    def close(self):
        """Closes the context: calls in it afterwards raise. The C context is freed once the
        results made in it (which keep it alive) are gone too."""
        self._closed = True

    def __del__(self):
        # In a forked child the parent's pool threads are gone: leave the context alone.
        if getattr(self, "_ptr", None) is not None and self._pid == os.getpid():
            try:
                lib.nx_ctx_free(self._ptr)
            except Exception:
                pass
            self._ptr = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        if self._ptr is None or self._closed:
            return "<nitrix.Context closed>"
        return (f"<nitrix.Context backend={self.backend!r} threads={self.threads} "
                f"cache_dir={self.cache_dir!r}>")

    @property
    def backend(self):
        """The backend calls in this context ask for."""
        if self.backend_request is not None:
            return self.backend_request
        return _lib.BACKENDS[lib.nx_ctx_backend(self._check())]

    @property
    def threads(self):
        return lib.nx_ctx_num_threads(self._check())

    @property
    def cache_dir(self):
        return os.fsdecode(lib.nx_ctx_cache_dir(self._check()))

    @property
    def reproducible_mode(self):
        """Whether reproducible mode is in effect for this thread (nitrix.reproducible())."""
        return bool(lib.nx_ctx_reproducible(self._check()))

    def last_error(self):
        return _lib.text(lib.nx_ctx_last_error(self._check()))

    def _raise(self, st):
        msg = self.last_error()
        self._drain()
        raise error_for(st, msg)

    def _drain(self):
        """Hands the log lines the library sent during a call to warnings and logging."""
        lines = self._lines
        while lines:
            level, msg = lines.popleft()
            if level == _lib.LOG_WARN:
                if _is_fallback(msg):
                    with _fallbacks_lock:
                        if msg in _fallbacks_seen:
                            continue
                        _fallbacks_seen.add(msg)
                    warnings.warn(msg, NitrixBackendFallback, stacklevel=4)
                else:
                    warnings.warn(msg, NitrixWarning, stacklevel=4)
            elif level >= _lib.LOG_ERROR:
                _log.error("%s", msg)
            elif level == _lib.LOG_INFO:
                _log.info("%s", msg)
            else:
                _log.debug("%s", msg)


_default = None
_default_lock = threading.Lock()


def default_context():
    """The context calls use when they name none, made on first use (settings from the
    environment). A forked child gets its own on first use."""
    global _default
    ctx = _default
    if ctx is not None and ctx._pid == os.getpid():
        return ctx
    with _default_lock:
        if _default is None or _default._pid != os.getpid():
            _default = Context()
        return _default


def _after_fork_in_child():
    global _default, _default_lock
    _default_lock = threading.Lock()
    # The parent's context stays allocated (its pool threads did not follow the fork); the
    # child makes its own on first use.
    _default = None


os.register_at_fork(after_in_child=_after_fork_in_child)


def set_default_context(ctx):
    """Makes ctx (a Context, or None for a fresh lazily made one) the default."""
    global _default
    if ctx is not None and not isinstance(ctx, Context):
        raise TypeError(f"set_default_context: expected a nitrix.Context or None, got "
                        f"{type(ctx).__name__}")
    _default = ctx


@contextlib.contextmanager
def reproducible(on=True, ctx=None):
    """Reproducible mode for the calls this thread makes inside the block (nestable;
    reproducible(False) opens a fast region inside a reproducible one): every divergent op runs
    its canonical driver, bit-stable across backends and runs."""
    ctx = ctx or default_context()
    st = lib.nx_ctx_reproducible_push(ctx._check(), bool(on))
    if st != _lib.OK:
        ctx._raise(st)
    try:
        yield ctx
    finally:
        lib.nx_ctx_reproducible_pop(ctx._check())


# ---- arrays in -------------------------------------------------------------------------------


class _In:
    """Input tensors of one call: the nx_tensor handles and what must live as long as they do."""

    __slots__ = ("ptrs", "keep")

    def __init__(self, n):
        self.ptrs = (C.c_void_p * max(n, 1))()
        self.keep = []

    def free(self):
        for p in self.ptrs:
            if p:
                lib.nx_tensor_free(p)


def _wrap_ndarray(ctx_ptr, a, name):
    if a.dtype.byteorder == ">" or (a.dtype.byteorder == "=" and not np.little_endian):
        a = a.astype(a.dtype.newbyteorder("<"))
    code = _NP_TO_NX.get(a.dtype)
    if code is None:
        raise error_for(4, f"input {name}: dtype {a.dtype} is not one nitrix computes on; "
                        f"expected one of {_SUPPORTED} (convert with .astype)")
    nd = a.ndim
    item = a.itemsize
    shape = (C.c_int64 * max(nd, 1))(*a.shape)
    strides = None
    if nd and not a.flags.c_contiguous:
        st = a.strides
        if any(s % item for s in st):
            a = np.ascontiguousarray(a)
        else:
            strides = (C.c_int64 * nd)(*(s // item for s in st))
    data = a.__array_interface__["data"][0] if a.size else None
    out = C.c_void_p()
    status = lib.nx_tensor_wrap(ctx_ptr, data, code, nd, shape, strides, C.byref(out))
    return status, out, a


def _to_tensor(ctx, x, name, ins, i):
    """ins.ptrs[i] = an nx_tensor over x's memory (no copy for a host array of a supported dtype
    and element-aligned strides)."""
    if isinstance(x, Tensor):
        ins.ptrs[i] = x._new_ref(ctx._check())
        ins.keep.append(x)
        return
    if not isinstance(x, np.ndarray):
        if hasattr(x, "__dlpack__") and not isinstance(x, np.generic):
            t = _dlpack.import_tensor(lib, ctx, x, name)
            ins.ptrs[i] = t.ptr
            ins.keep.append(t)
            return
        x = np.asarray(x)
        if x.dtype == object or x.dtype.kind in "USV":
            raise error_for(4, f"input {name}: {type(x).__name__} of dtype {x.dtype} is not an "
                            "array of numbers")
    status, ptr, held = _wrap_ndarray(ctx._check(), x, name)
    if status != _lib.OK:
        ctx._raise(status)
    ins.ptrs[i] = ptr
    ins.keep.append(held)


# ---- arrays out ------------------------------------------------------------------------------


class _Owner:
    """Owns one nx_tensor and shows it to NumPy through __array_interface__ (no copy); the array
    keeps this object as its base, so the tensor lives as long as the array."""

    __slots__ = ("ptr", "ctx", "__array_interface__", "__weakref__")

    def __init__(self, ptr, ctx, dtype, shape, strides, data):
        self.ptr = ptr
        self.ctx = ctx  # a tensor must not outlive its context
        self.__array_interface__ = {"version": 3, "shape": shape, "typestr": dtype.str,
                                    "data": (data or 0, False), "strides": strides}

    def __del__(self):
        if self.ptr:
            lib.nx_tensor_free(self.ptr)
            self.ptr = None


def _geometry(ptr):
    nd = lib.nx_tensor_ndim(ptr)
    if not nd:
        return 0, (), ()
    return nd, tuple(lib.nx_tensor_shape(ptr)[:nd]), tuple(lib.nx_tensor_strides(ptr)[:nd])


def _from_tensor(ptr, ctx):
    """A result nx_tensor of ctx as a NumPy array over its memory (host), or a nitrix.Tensor
    (device). Takes ownership of ptr."""
    if lib.nx_tensor_device(ptr) != _lib.DEVICE_HOST:
        return Tensor(ptr, ctx)
    dt = _NX_TO_NP.get(lib.nx_tensor_dtype(ptr))
    if dt is None:  # bfloat16: no NumPy dtype; the caller gets a Tensor
        return Tensor(ptr, ctx)
    nd, shape, strides = _geometry(ptr)
    data = lib.nx_tensor_data(ptr)
    if not data:  # no elements: no memory to share
        lib.nx_tensor_free(ptr)
        return np.empty(shape, dt)
    item = dt.itemsize
    owner = _Owner(ptr, ctx, dt, shape, tuple(s * item for s in strides), data)
    return np.asarray(owner)


class Tensor:
    """A nitrix tensor that NumPy cannot hold: a device (CUDA) result, or a bfloat16 one. It
    exports itself through DLPack (torch.from_dlpack(t), cupy.from_dlpack(t)) with no copy, and
    .numpy() copies a host one into NumPy."""

    def __init__(self, ptr, ctx=None):
        self.ptr = ptr
        self.ctx = ctx  # the Context the tensor belongs to: kept alive with it

    def _new_ref(self, ctx_ptr=None):
        """A new handle on this tensor's memory (in ctx_ptr, else the tensor's own context);
        self must outlive it."""
        nd, shape, strides = _geometry(self.ptr)
        out = C.c_void_p()
        st = lib.nx_tensor_wrap_device(
            ctx_ptr or lib.nx_tensor_ctx(self.ptr), lib.nx_tensor_data(self.ptr),
            lib.nx_tensor_device(self.ptr), lib.nx_tensor_dtype(self.ptr), nd,
            (C.c_int64 * max(nd, 1))(*shape), (C.c_int64 * max(nd, 1))(*strides),
            C.byref(out))
        if st != _lib.OK:
            raise error_for(st, "Tensor: could not make a view for a call")
        return out

    @property
    def shape(self):
        return _geometry(self.ptr)[1]

    @property
    def dtype(self):
        return _lib.DTYPES[lib.nx_tensor_dtype(self.ptr)]

    @property
    def device(self):
        return "cuda" if lib.nx_tensor_device(self.ptr) == _lib.DEVICE_CUDA else "cpu"

    def __dlpack_device__(self):
        return _dlpack.device_of(lib, self.ptr)

    def __dlpack__(self, stream=None, **kwargs):
        return _dlpack.export_tensor(lib, self, stream)

    def numpy(self):
        if self.device != "cpu":
            raise error_for(1, "Tensor.numpy(): a device tensor; hand it to CuPy or PyTorch "
                            "through DLPack (cupy.from_dlpack(t))")
        return np.array(np.from_dlpack(self), copy=True)

    def __repr__(self):
        return f"<nitrix.Tensor {self.dtype}{list(self.shape)} on {self.device}>"

    def __del__(self):
        if getattr(self, "ptr", None):
            lib.nx_tensor_free(self.ptr)
            self.ptr = None


# ---- options ---------------------------------------------------------------------------------

def _opt_text(o, v, ctx, keep):
    t = o.type
    if t == "bool":
        if not isinstance(v, (bool, np.bool_)):
            raise TypeError(f"option {o.pyname}: expected a bool, got {v!r}")
        return "true" if v else "false"
    if t in ("ints", "floats"):
        if isinstance(v, (str, bytes)):
            return v if isinstance(v, str) else v.decode()
        seq = np.ravel(np.asarray(v)).tolist()
        return ",".join(_num_text(x, t == "ints", o) for x in seq)
    if t in ("int", "float"):
        if isinstance(v, str):
            return v
        return _num_text(v, t == "int", o)
    if t == "dtype":
        if isinstance(v, str):
            return v
        return np.dtype(v).name
    if t == "tensor":
        if v is None:
            return "none"
        if isinstance(v, (str, os.PathLike)):
            return os.fspath(v)
        # The C call takes a tensor option as a .npy path: write the array to a private file
        # that lives for the call.
        import tempfile
        f = tempfile.NamedTemporaryFile(suffix=".npy", delete=False)
        keep.append(f.name)
        with f:
            np.save(f, np.ascontiguousarray(np.asarray(v)))
        return f.name
    if isinstance(v, str):
        return v
    if v is None:
        raise TypeError(f"option {o.pyname}: None is not a value for a {t} option")
    return str(v)


def _num_text(x, integer, o):
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"option {o.pyname}: expected a number, got {x!r}")
    if integer:
        if isinstance(x, float) and not x.is_integer():
            raise TypeError(f"option {o.pyname}: expected an integer, got {x!r}")
        return str(int(x))
    return repr(float(x))


# ---- the call -------------------------------------------------------------------------------

class _Row:
    """What a generated function needs of its op-table row, precomputed once."""

    __slots__ = ("op", "name", "cname", "nin", "nreq", "nout", "options", "defaults")

    def __init__(self, op, defaults):
        self.op = op
        self.name = op.name
        self.cname = op.name.encode()
        self.nin = len(op.inputs)
        self.nreq = op.nrequired
        self.nout = len(op.outputs)
        self.options = op.options
        self.defaults = defaults


def call(row, inputs, values, backend, ctx, dy=None):
    """Runs row's op on inputs with the options of values that differ from their defaults.
    dy: cotangents (one per output) for the op's vector-Jacobian product instead."""
    ctx = ctx if ctx is not None else default_context()
    cptr = ctx._check()
    n = len(inputs)
    while n > row.nreq and inputs[n - 1] is None:
        n -= 1
    ins = _In(n)
    keys, vals, files = [], [], []
    douts = None
    try:
        for i in range(n):
            x = inputs[i]
            if x is None:
                if i < row.nreq:
                    raise TypeError(f"{row.name}: input {row.op.inputs[i]} is required")
                continue
            _to_tensor(ctx, x, row.op.inputs[i], ins, i)
        defaults = row.defaults
        for k, v in enumerate(values):
            if v is defaults[k]:
                continue
            o = row.options[k]
            keys.append(o.name.encode())
            vals.append(_opt_text(o, v, ctx, files).encode())
        if backend is None:
            backend = ctx.backend_request
        if backend is not None:
            keys.append(b"backend")
            vals.append(str(backend).encode())
        nk = len(keys)
        if nk:
            ck = (C.c_char_p * nk)(*keys)
            cv = (C.c_char_p * nk)(*vals)
        else:
            ck = cv = None
        if dy is None:
            outs = (C.c_void_p * row.nout)()
            st = lib.nx_op_call(cptr, row.cname, n, ins.ptrs, nk, ck, cv, row.nout, outs)
            nres = row.nout
        else:
            if len(dy) != row.nout:
                raise TypeError(f"vjp {row.name}: {len(dy)} cotangents given; expected "
                                f"{row.nout} (one per output: {', '.join(row.op.outputs)})")
            douts = _In(row.nout)
            for i, d in enumerate(dy):
                _to_tensor(ctx, d, "d" + row.op.outputs[i], douts, i)
            outs = (C.c_void_p * max(n, 1))()
            st = lib.nx_op_vjp(cptr, row.cname, n, ins.ptrs, nk, ck, cv, row.nout,
                               douts.ptrs, outs)
            nres = n
        if st != _lib.OK:
            ctx._raise(st)
        res = [(_from_tensor(outs[i], ctx) if outs[i] else None) for i in range(nres)]
    finally:
        ins.free()
        if douts is not None:
            douts.free()
        for f in files:
            try:
                os.unlink(f)
            except OSError:
                pass
    if ctx._lines:
        ctx._drain()
    if dy is None and nres == 1:
        return res[0]
    return tuple(res)
