"""Failures raise NitrixError subclasses carrying the library's message; fallbacks warn once
with NitrixBackendFallback; strict backend mode makes them errors."""
import warnings

import numpy as np
import pytest

import nitrix
from nitrix import _core


def test_bad_option_values_name_the_option_and_what_was_expected():
    x = np.zeros((4, 4))
    with pytest.raises(nitrix.InvalidArgumentError) as e:
        nitrix.morphology.dilate(x, size=0)
    assert "dilate: option size='0'; expected" in str(e.value)
    assert e.value.status == "NX_ERR_INVALID_ARG" and isinstance(e.value, ValueError)
    with pytest.raises(nitrix.InvalidArgumentError,
                       match="mode='sideways'; expected one of reflect"):
        nitrix.smoothing.gaussian(x, sigma=1.0, mode="sideways")
    with pytest.raises(nitrix.InvalidArgumentError, match="semiring"):
        nitrix.semiring.semiring_matmul(x, x, semiring="NOT_AN_ALGEBRA")
    with pytest.raises(nitrix.InvalidArgumentError, match="backend='gpu'"):
        nitrix.morphology.dilate(x, backend="gpu")


def test_python_level_argument_errors():
    x = np.zeros((4, 4))
    with pytest.raises(TypeError):
        nitrix.morphology.dilate(x, sizes=3)  # no such keyword
    with pytest.raises(TypeError):
        nitrix.smoothing.gaussian(x)  # sigma is required
    op, opt = next((op, o) for op in nitrix.ops for o in op.options
                   if o.type == "bool" and not any(p.required for p in op.options))
    args = [np.zeros((3, 3))] * op.nrequired
    with pytest.raises(TypeError, match="expected a bool"):
        nitrix.op(op.name)(*args, **{opt.pyname: "yes"})
    with pytest.raises(TypeError, match="input A is required"):
        nitrix.semiring.semiring_matmul(None, x)


def test_shape_and_dtype_errors():
    with pytest.raises(nitrix.ShapeError) as e:
        nitrix.semiring.semiring_matmul(np.zeros((2, 3)), np.zeros((4, 5)))
    assert e.value.status == "NX_ERR_SHAPE" and "semiring_matmul" in str(e.value)
    with pytest.raises(nitrix.NitrixError) as e:
        nitrix.semiring.semiring_matmul(np.zeros((2, 3)), np.zeros((3, 2), np.float32))
    assert isinstance(e.value, (nitrix.DTypeError, nitrix.InvalidArgumentError))


def test_context_settings_errors():
    with pytest.raises(nitrix.InvalidArgumentError, match="threads=0"):
        nitrix.Context(threads=0)
    with pytest.raises(nitrix.InvalidArgumentError, match="backend='tpu'"):
        nitrix.Context(backend="tpu")
    c = nitrix.Context(threads=1)
    c.close()
    with pytest.raises(nitrix.InvalidArgumentError, match="closed"):
        nitrix.core.copy(np.zeros(2), ctx=c)


def test_fallback_warns_once(monkeypatch):
    # cast has no device kernel: asking for cuda casts on the host, loudly.
    _core._fallbacks_seen.clear()
    x = np.arange(4.0)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = nitrix.core.cast(x, dtype="float32", backend="cuda")
        nitrix.core.cast(x, dtype="float32", backend="cuda")
    np.testing.assert_array_equal(y, x.astype(np.float32))
    falls = [m for m in w if issubclass(m.category, nitrix.NitrixBackendFallback)]
    assert len(falls) == 1, [str(m.message) for m in w]
    assert "NITRIX_SILENCE_FALLBACK" in str(falls[0].message)
    assert falls[0].filename == __file__  # attributed to the caller's line


def test_strict_backend_makes_fallback_an_error(monkeypatch):
    monkeypatch.setenv("NITRIX_STRICT_BACKEND", "1")
    ctx = nitrix.Context()
    with pytest.raises(nitrix.NitrixError, match="strict backend mode"):
        nitrix.core.cast(np.arange(4.0), dtype="float32", backend="cuda", ctx=ctx)


def test_silenced_fallback_does_not_warn(monkeypatch):
    monkeypatch.setenv("NITRIX_SILENCE_FALLBACK", "1")
    ctx = nitrix.Context()
    _core._fallbacks_seen.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nitrix.core.cast(np.arange(4.0), dtype="float32", backend="cuda", ctx=ctx)


def test_bad_environment_fails_context_creation(monkeypatch):
    monkeypatch.setenv("NITRIX_NUM_THREADS", "many")
    with pytest.raises(nitrix.InvalidArgumentError, match="NITRIX_NUM_THREADS"):
        nitrix.Context()
    nitrix.Context(ignore_env=True).close()
