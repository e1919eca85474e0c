"""DLPack: any object with __dlpack__ is an input with no copy (the package consumes the capsule
and calls the producer's deleter when done); results export through DLPack (NumPy arrays
themselves; nitrix.Tensor for results NumPy cannot hold). PyTorch is used when installed."""
import gc
import sys

import numpy as np
import pytest

import nitrix
from nitrix import _core


class Producer:
    """Only the DLPack protocol of an array: the package cannot use the buffer protocol or
    __array_interface__, so this goes through the capsule path."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, stream=None):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_dlpack_input_is_consumed_without_copy(rng):
    x = rng.random((5, 6))
    p = Producer(x)
    assert not hasattr(p, "__array_interface__")
    refs = sys.getrefcount(x)
    ins = _core._In(1)
    _core._to_tensor(nitrix.default_context(), p, "x", ins, 0)
    assert _core.lib.nx_tensor_data(ins.ptrs[0]) == x.__array_interface__["data"][0]
    assert sys.getrefcount(x) == refs + 1  # the capsule's manager holds the array
    ins.free()
    del ins
    gc.collect()
    assert sys.getrefcount(x) == refs  # the producer's deleter ran
    np.testing.assert_array_equal(nitrix.morphology.dilate(p, size=3),
                                  nitrix.morphology.dilate(x, size=3))


def test_dlpack_strided_input(rng):
    x = rng.random((6, 8))[::2, 1::2]
    np.testing.assert_array_equal(nitrix.core.copy(Producer(x)), x)


def test_results_export_through_dlpack(rng):
    y = nitrix.smoothing.gaussian(rng.random((4, 4)), sigma=1.0)
    z = np.from_dlpack(y)
    assert np.shares_memory(y, z)


def test_tensor_exports_and_reimports(rng):
    # a nitrix.Tensor (what device and bfloat16 results are) over a host result
    y = nitrix.core.copy(rng.random((3, 4)))
    owner = y.base
    t = _core.Tensor(_wrap_view(owner.ptr))
    assert t.device == "cpu" and t.shape == (3, 4) and t.dtype == "float64"
    assert t.__dlpack_device__() == (1, 0)
    z = np.from_dlpack(t)
    assert z.__array_interface__["data"][0] == y.__array_interface__["data"][0]
    np.testing.assert_array_equal(z, y)
    np.testing.assert_array_equal(t.numpy(), y)
    del t
    gc.collect()
    np.testing.assert_array_equal(z, y)  # the export holds the memory
    np.testing.assert_array_equal(nitrix.core.copy(_core.Tensor(_wrap_view(owner.ptr))), y)


def _wrap_view(ptr):
    import ctypes
    lib = _core.lib
    nd, shape, strides = _core._geometry(ptr)
    out = ctypes.c_void_p()
    st = lib.nx_tensor_wrap_device(lib.nx_tensor_ctx(ptr), lib.nx_tensor_data(ptr), 0,
                                   lib.nx_tensor_dtype(ptr), nd,
                                   (ctypes.c_int64 * nd)(*shape), None, ctypes.byref(out))
    assert st == 0
    return out


def test_torch_round_trip(rng):
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(rng.random((5, 5)))
    y = nitrix.morphology.dilate(x, size=3)
    np.testing.assert_array_equal(y, nitrix.morphology.dilate(x.numpy(), size=3))
    t = torch.from_dlpack(y)
    assert t.data_ptr() == y.__array_interface__["data"][0]
