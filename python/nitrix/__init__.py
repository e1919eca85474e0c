"""nitrix: differentiable neuroimaging numerics, from Python.

Every op of the library's op table is a function nitrix.<family>.<op>(inputs..., **options),
made at import time from the table the loaded library exports (nx_ops), with the spec's option
names and defaults:

    >>> import numpy as np, nitrix
    >>> x = np.zeros((5, 5), np.float32); x[2, 2] = 1
    >>> int(nitrix.morphology.dilate(x, size=3).sum())
    9

Arrays: NumPy in and out with no copy of inputs of a supported dtype (strided views included);
any object with __dlpack__ is accepted; results are NumPy arrays over the library's memory (and
export through DLPack themselves), device results nitrix.Tensor objects that export through
DLPack. Failures raise nitrix.NitrixError subclasses with the library's message; backend
fallbacks warn with nitrix.NitrixBackendFallback.
"""
import sys as _sys
import types as _types

from . import _lib, _table
from ._core import (Context, Tensor, default_context, lib as _clib, reproducible,
                    set_default_context, _Row, call as _call)
from ._errors import (BackendError, DTypeError, InternalError, InvalidArgumentError,
                      NitrixBackendFallback, NitrixError, NitrixIOError, NitrixWarning,
                      OutOfMemoryError, ParseError, ShapeError, UnsupportedError)

__version__ = _lib.text(_clib.nx_version())

__all__ = [
    "Context", "Tensor", "default_context", "set_default_context", "reproducible",
    "divergent_ops", "info", "ops", "op", "vjp", "NitrixError", "InvalidArgumentError",
    "OutOfMemoryError", "ShapeError", "DTypeError", "ParseError", "NitrixIOError",
    "UnsupportedError", "BackendError", "InternalError", "NitrixWarning",
    "NitrixBackendFallback", "__version__",
]


def divergent_ops():
    """The divergent-op registry: ops with a canonical and a fast driver whose results differ.
    One dict per row: op, canonical, fast, drivers (tuple), rtol, atol, reason, auto_fast
    (whether driver='auto' may pick the fast one outside reproducible mode)."""
    import ctypes
    n = ctypes.c_size_t()
    rows = _clib.nx_divergent_ops(ctypes.byref(n))
    out = []
    for i in range(n.value):
        r = rows[i]
        out.append({"op": _lib.text(r.op), "canonical": _lib.text(r.canonical),
                    "fast": _lib.text(r.fast),
                    "drivers": tuple(_lib.text(r.drivers).split("|")),
                    "rtol": r.rtol, "atol": r.atol, "reason": _lib.text(r.reason),
                    "auto_fast": bool(_clib.nx_divergent_auto_fast(ctypes.byref(r)))})
    return out


def info(ctx=None):
    """What `nitrix info` prints, as a dict: version, CPU, LLVM, CUDA driver and NVRTC, GPUs,
    the kernel cache, and the library file loaded."""
    import ctypes
    ctx = ctx or default_context()
    si = _lib.SystemInfo()
    st = _clib.nx_system_info_get(ctx._check(), ctypes.byref(si))
    if st != _lib.OK:
        ctx._raise(st)
    t = _lib.text
    return {
        "version": t(si.version), "library": _clib.path,
        "cpu": {"name": t(si.cpu_name), "features": t(si.cpu_features).split(),
                "cores": si.cpu_cores},
        "llvm_version": t(si.llvm_version),
        "cuda": {"driver_found": bool(si.cuda_driver_found),
                 "driver_version": si.cuda_driver_version, "status": t(si.cuda_status),
                 "nvrtc_found": bool(si.nvrtc_found),
                 "nvrtc_version": f"{si.nvrtc_major}.{si.nvrtc_minor}" if si.nvrtc_found
                 else None},
        "gpus": [{"name": t(g.name), "compute_capability": (g.cc_major, g.cc_minor),
                  "sm_count": g.sm_count, "memory_bytes": g.memory_bytes,
                  "usable": bool(g.usable)} for g in si.gpus[:si.gpu_count]],
        "cache": {"dir": t(si.cache_dir), "bytes": si.cache_bytes,
                  "entries": si.cache_entries},
        "context": {"backend": ctx.backend, "threads": ctx.threads,
                    "reproducible": ctx.reproducible_mode},
    }


# ---- the op functions, from the table ------------------------------------------------------

_DRIVERS = {d["op"]: d for d in divergent_ops()}
ops = tuple(_table.read_ops(_clib))
_functions = {}
families = {}


def _make(op):
    defaults = tuple(_table.default_value(o) for o in op.options)
    ns = {"_call": _call}
    # the defaults in the signature are these objects, so `value is default` means not given
    src = _table.source(op)
    code = compile(src, f"<nitrix op {op.name}>", "exec")
    exec(code, ns)
    fn = ns[op.name]
    fn.__defaults__ = tuple(None for i in range(len(op.inputs)) if i >= op.nrequired) or None
    kw = {}
    for o, d in zip(op.options, defaults):
        if not o.required:
            kw[o.pyname] = d
    kw["backend"] = None
    kw["ctx"] = None
    fn.__kwdefaults__ = kw
    ns["_ROW"] = _Row(op, tuple(kw.get(o.pyname) if not o.required else object()
                                for o in op.options))
    fn.__doc__ = _table.docstring(op, _DRIVERS)
    fn.__module__ = f"nitrix.{op.family}"
    fn.__qualname__ = op.name
    fn.op = op
    return fn


for _op in ops:
    _fn = _make(_op)
    _functions[_op.name] = _fn
    _mod = families.get(_op.family)
    if _mod is None:
        _mod = _types.ModuleType(f"nitrix.{_op.family}",
                                 f"nitrix ops of the {_op.family} family (generated from the op "
                                 "table).")
        _mod.__all__ = []
        families[_op.family] = _mod
        _sys.modules[_mod.__name__] = _mod
        globals()[_op.family] = _mod
    setattr(_mod, _op.name, _fn)
    _mod.__all__.append(_op.name)
    for _alias in _op.aliases:
        setattr(_mod, _alias, _fn)
del _op, _fn, _mod


def op(name):
    """The function of op name (or an alias), whatever its family."""
    fn = _functions.get(name)
    if fn is None:
        for o in ops:
            if name in o.aliases:
                return _functions[o.name]
        raise InvalidArgumentError(f"no op named {name!r}; expected one of "
                                   f"{', '.join(sorted(_functions))}")
    return fn


def vjp(name, inputs, dy, backend=None, ctx=None, **options):
    """The vector-Jacobian product of a differentiable op: gradients of <dy, op(*inputs)>
    with respect to each input given (None for one that carries none: integer inputs, indices).
    dy: one cotangent per output (an array, or a sequence of them for several outputs)."""
    fn = op(name)
    row = fn.__globals__["_ROW"]
    if not isinstance(dy, (list, tuple)):
        dy = (dy,)
    values = []
    for o, d in zip(row.options, row.defaults):
        if o.pyname in options:
            values.append(options.pop(o.pyname))
        elif o.name in options:
            values.append(options.pop(o.name))
        else:
            values.append(d)
    if options:
        raise TypeError(f"vjp {row.name}: no option named {', '.join(options)}")
    return _call(row, tuple(inputs), tuple(values), backend, ctx, dy=tuple(dy))
