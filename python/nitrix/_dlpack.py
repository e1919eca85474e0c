"""DLPack in and out through ctypes (the legacy unversioned capsule every producer offers).

In: any object with __dlpack__ becomes an nx_tensor over the producer's memory, host or CUDA,
with no copy; the capsule is consumed as the protocol says (renamed "used_dltensor", its deleter
called when nitrix lets go). Out: nitrix.Tensor.__dlpack__ hands an nx_tensor to a consumer the
same way; host results are NumPy arrays, which export themselves.
"""
import ctypes as C
import threading

from ._errors import error_for

kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged = 1, 2, 3, 13


class DLDevice(C.Structure):
    _fields_ = [("device_type", C.c_int32), ("device_id", C.c_int32)]


class DLDataType(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class DLTensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("device", DLDevice), ("ndim", C.c_int32),
                ("dtype", DLDataType), ("shape", C.POINTER(C.c_int64)),
                ("strides", C.POINTER(C.c_int64)), ("byte_offset", C.c_uint64)]


class DLManagedTensor(C.Structure):
    pass


DELETER = C.CFUNCTYPE(None, C.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", C.c_void_p),
                            ("deleter", DELETER)]

# (DLPack type code, bits) -> nx_dtype, and back
_TO_NX = {(2, 32): 0, (2, 64): 1, (2, 16): 2, (4, 16): 3, (0, 8): 4, (0, 16): 5, (0, 32): 6,
          (0, 64): 7, (1, 8): 8, (6, 8): 9, (1, 32): 10, (1, 64): 11}
_FROM_NX = {v: k for k, v in _TO_NX.items()}

_api = C.pythonapi
_GetPointer = _api.PyCapsule_GetPointer
_GetPointer.restype = C.c_void_p
_GetPointer.argtypes = [C.py_object, C.c_char_p]
_SetName = _api.PyCapsule_SetName
_SetName.restype = C.c_int
_SetName.argtypes = [C.py_object, C.c_char_p]
_IsValid = _api.PyCapsule_IsValid
_IsValid.restype = C.c_int
_IsValid.argtypes = [C.py_object, C.c_char_p]
_New = _api.PyCapsule_New
_New.restype = C.py_object
CAPSULE_DESTRUCTOR = C.CFUNCTYPE(None, C.c_void_p)
_New.argtypes = [C.c_void_p, C.c_char_p, CAPSULE_DESTRUCTOR]
_IsValidRaw = C.PYFUNCTYPE(C.c_int, C.c_void_p, C.c_char_p)(("PyCapsule_IsValid", _api))
_GetPointerRaw = C.PYFUNCTYPE(C.c_void_p, C.c_void_p, C.c_char_p)(("PyCapsule_GetPointer", _api))

_DLTENSOR = b"dltensor"
_USED = b"used_dltensor"


class Imported:
    """An nx_tensor over a DLPack producer's memory; calls the producer's deleter when freed."""

    __slots__ = ("ptr", "managed", "lib")

    def __init__(self, lib, ptr, managed):
        self.lib, self.ptr, self.managed = lib, ptr, managed

    def release(self):
        m, self.managed = self.managed, None
        if m:
            mt = C.cast(m, C.POINTER(DLManagedTensor))
            if mt.contents.deleter:
                mt.contents.deleter(mt)

    def __del__(self):
        # the nx_tensor is freed by the call's input list; the producer's memory after it
        self.release()


def import_tensor(lib, ctx, obj, name):
    """An Imported over obj.__dlpack__()'s tensor (no copy)."""
    try:
        dev_type, _ = obj.__dlpack_device__()
    except AttributeError:
        dev_type = kDLCPU
    cap = obj.__dlpack__() if dev_type == kDLCPU else obj.__dlpack__(stream=None)
    if not _IsValid(cap, _DLTENSOR):
        raise error_for(1, f"input {name}: __dlpack__ did not return a 'dltensor' capsule")
    addr = _GetPointer(cap, _DLTENSOR)
    mt = C.cast(addr, C.POINTER(DLManagedTensor)).contents
    # From here the capsule is ours: its destructor no longer calls the deleter.
    _SetName(cap, _USED)
    imp = Imported(lib, None, addr)
    t = mt.dl_tensor
    dt = t.dtype
    code = _TO_NX.get((dt.code, dt.bits)) if dt.lanes == 1 else None
    if code is None:
        raise error_for(4, f"input {name}: DLPack dtype (code {dt.code}, {dt.bits} bits, "
                        f"{dt.lanes} lanes) is not one nitrix computes on")
    dev = t.device.device_type
    if dev in (kDLCPU, kDLCUDAHost):
        device = 0
    elif dev in (kDLCUDA, kDLCUDAManaged):
        device = 1
    else:
        raise error_for(7, f"input {name}: DLPack device type {dev} is not the host or CUDA")
    nd = t.ndim
    item = dt.bits // 8
    if t.byte_offset % item:
        raise error_for(1, f"input {name}: DLPack byte_offset {t.byte_offset} is not a "
                        f"multiple of the element size {item}")
    shape = (C.c_int64 * max(nd, 1))(*(t.shape[k] for k in range(nd)))
    strides = None
    if t.strides:
        strides = (C.c_int64 * max(nd, 1))(*(t.strides[k] for k in range(nd)))
    data = (t.data or 0) + t.byte_offset
    out = C.c_void_p()
    st = lib.nx_tensor_wrap_device(ctx._check(), data or None, device, code, nd, shape,
                                   strides, C.byref(out))
    if st != 0:
        imp.release()
        ctx._raise(st)
    imp.ptr = out
    return imp


def device_of(lib, ptr):
    return (kDLCUDA, 0) if lib.nx_tensor_device(ptr) == 1 else (kDLCPU, 0)


# Exported tensors: DLManagedTensor address -> (struct, shape, strides, nx_tensor, owner)
_live = {}
_live_lock = threading.Lock()


def _deleter(mt_ptr):
    addr = C.cast(mt_ptr, C.c_void_p).value
    with _live_lock:
        entry = _live.pop(addr, None)
    if entry is not None:
        entry[0].lib.nx_tensor_free(entry[1])


_DELETER = DELETER(_deleter)


def _capsule_destructor(cap):
    # An unconsumed capsule still named "dltensor" owns its tensor.
    if _IsValidRaw(cap, _DLTENSOR):
        addr = _GetPointerRaw(cap, _DLTENSOR)
        if addr:
            _deleter(C.cast(addr, C.POINTER(DLManagedTensor)))


_DESTRUCTOR = CAPSULE_DESTRUCTOR(_capsule_destructor)


class _Export:
    __slots__ = ("lib", "mt", "shape", "strides")


def export_tensor(lib, tensor, stream):
    """A 'dltensor' capsule over tensor's memory, holding a new reference to its storage."""
    ptr = tensor._new_ref()
    nd = lib.nx_tensor_ndim(ptr)
    sh = lib.nx_tensor_shape(ptr)
    sd = lib.nx_tensor_strides(ptr)
    e = _Export()
    e.lib = lib
    e.shape = (C.c_int64 * max(nd, 1))(*(sh[k] for k in range(nd)))
    e.strides = (C.c_int64 * max(nd, 1))(*(sd[k] for k in range(nd)))
    e.mt = DLManagedTensor()
    t = e.mt.dl_tensor
    t.data = lib.nx_tensor_data(ptr)
    t.device = DLDevice(*device_of(lib, ptr))
    t.ndim = nd
    code, bits = _FROM_NX[lib.nx_tensor_dtype(ptr)]
    t.dtype = DLDataType(code, bits, 1)
    t.shape = C.cast(e.shape, C.POINTER(C.c_int64))
    t.strides = C.cast(e.strides, C.POINTER(C.c_int64))
    t.byte_offset = 0
    e.mt.deleter = _DELETER
    addr = C.addressof(e.mt)
    with _live_lock:
        _live[addr] = (e, ptr, tensor)  # tensor: the memory stays while the consumer holds it
    return _New(addr, _DLTENSOR, _DESTRUCTOR)
