"""NumPy in and out: inputs wrapped with no copy (strided views included) and never written;
results are arrays over the library's own memory, with no hidden copy; dtypes, 0-d and empty
arrays behave as NumPy users expect."""
import ctypes

import numpy as np
import pytest

import nitrix
from nitrix import _core


def _wrapped_address(x):
    """The data address of the nx_tensor the package makes for input x."""
    ctx = nitrix.default_context()
    ins = _core._In(1)
    try:
        _core._to_tensor(ctx, x, "x", ins, 0)
        return _core.lib.nx_tensor_data(ins.ptrs[0]), ins
    finally:
        ins.free()


def _address(a):
    return a.__array_interface__["data"][0]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int16", "int32", "int64",
                                   "uint8", "uint32", "uint64", "bool", "float16"])
def test_contiguous_inputs_are_not_copied(dtype):
    x = np.ones((4, 5), dtype)
    addr, ins = _wrapped_address(x)
    assert addr == _address(x)
    assert ins.keep[0] is x


def test_strided_views_are_not_copied():
    base = np.arange(60, dtype=np.float64).reshape(6, 10)
    for view in (base[::2, 1::3], base.T, base[::-1], base[:, 4]):
        addr, ins = _wrapped_address(view)
        assert addr == _address(view)
        np.testing.assert_array_equal(nitrix.core.copy(view), view)


def test_read_only_and_broadcast_inputs():
    x = np.arange(6.0).reshape(2, 3)
    x.flags.writeable = False
    np.testing.assert_array_equal(nitrix.core.copy(x), x)
    b = np.broadcast_to(np.arange(3.0), (4, 3))  # zero strides
    assert _wrapped_address(b)[0] == _address(b)
    np.testing.assert_array_equal(nitrix.core.copy(b), b)


def test_misaligned_strides_are_copied_not_refused():
    rec = np.zeros(5, dtype=[("a", np.uint8), ("b", np.float64)])
    rec["b"] = np.arange(5)
    view = rec["b"]  # stride 9 bytes: not a whole number of elements
    np.testing.assert_array_equal(nitrix.core.copy(view), np.arange(5.0))


def test_big_endian_and_lists():
    x = np.arange(4, dtype=">f8")
    np.testing.assert_array_equal(nitrix.core.copy(x), np.arange(4.0))
    y = nitrix.core.copy([[1.0, 2.0], [3.0, 4.0]])
    assert y.dtype == np.float64 and y.shape == (2, 2)


def test_results_share_no_hidden_copy(rng):
    x = rng.random((6, 7)).astype(np.float32)
    before = x.copy()
    y = nitrix.smoothing.gaussian(x, sigma=1.0)
    owner = y.base
    assert isinstance(owner, _core._Owner)
    # the array is the library's tensor memory itself
    assert _address(y) == _core.lib.nx_tensor_data(owner.ptr)
    assert not np.shares_memory(x, y)
    np.testing.assert_array_equal(x, before)  # input untouched
    assert y.flags.c_contiguous and y.flags.writeable and y.dtype == np.float32
    y[0, 0] = 5.0  # the result belongs to the caller
    assert y[0, 0] == 5.0


def test_results_outlive_their_call_and_context(rng):
    ctx = nitrix.Context(threads=1)
    y = nitrix.morphology.dilate(rng.random((5, 5)), size=3, ctx=ctx)
    want = y.copy()
    del ctx
    import gc
    gc.collect()
    np.testing.assert_array_equal(y, want)


def test_zero_d_and_empty():
    z = nitrix.core.copy(np.float64(3.5))
    assert z.shape == () and z == 3.5
    e = nitrix.core.copy(np.zeros((0, 3), np.float32))
    assert e.shape == (0, 3) and e.dtype == np.float32
    c = nitrix.core.cast(np.arange(3), dtype=np.float32)
    assert c.dtype == np.float32
    np.testing.assert_array_equal(c, [0, 1, 2])


def test_unsupported_dtypes_are_refused_clearly():
    with pytest.raises(nitrix.DTypeError, match="complex128 is not one nitrix computes on"):
        nitrix.core.copy(np.zeros(3, np.complex128))
    with pytest.raises(nitrix.DTypeError, match="not an array of numbers"):
        nitrix.core.copy(["a", "b"])


def test_too_many_dims_is_a_shape_error():
    with pytest.raises(nitrix.ShapeError, match="ndim is 9"):
        nitrix.core.copy(np.zeros((1,) * 9))
