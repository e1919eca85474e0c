"""Every op of the table called from Python on one case of its golden corpus (golden/<family>/
<case>: inputs, options and the reference output of an independent library — scipy, NumPy,
scikit-learn, closed forms — named in the manifest), compared within the tolerance the op states
(nx_op_tolerance_get, the bound the C golden replay uses). The options go through the Python
conversion: numbers as numbers, lists as tuples, booleans as bool, tensor options as arrays."""
import ctypes
import os

import numpy as np
import pytest

import nitrix
from nitrix import _core, _lib

from conftest import SOURCE_ROOT

GOLDEN = os.path.join(SOURCE_ROOT, "golden")


def _manifest(path):
    m = {}
    for line in open(path):
        if "=" in line:
            k, v = line.split("=", 1)
            m[k.strip()] = v.strip()
    return m


def _cases():
    """{op name: (case dir, manifest)} with the case of smallest inputs for each op."""
    best = {}
    for root, dirs, files in os.walk(GOLDEN):
        if "manifest.txt" not in files:
            continue
        m = _manifest(os.path.join(root, "manifest.txt"))
        try:
            name = nitrix.op(m["op"]).op.name
        except nitrix.NitrixError:
            continue
        size = sum(os.path.getsize(os.path.join(root, f)) for f in m["inputs"].split())
        key = (size, os.path.relpath(root, GOLDEN))
        if name not in best or key < best[name][0]:
            best[name] = (key, root, m)
    return {k: v[1:] for k, v in best.items()}


CASES = _cases()


def _value(o, text, case_dir):
    t = o.type
    if t == "int":
        return int(text)
    if t == "float":
        return float(text)
    if t in ("ints", "floats"):
        conv = int if t == "ints" else float
        vals = [conv(p) for p in text.split(",") if p]
        return vals[0] if len(vals) == 1 else tuple(vals)
    if t == "bool":
        return text.lower() in ("1", "true", "yes", "on")
    if t == "tensor":
        return None if text.lower() in ("", "none") else np.load(os.path.join(case_dir, text))
    return text


def _tolerance(op, dtype, driver):
    rtol, atol = ctypes.c_double(), ctypes.c_double()
    code = _lib.DTYPES.index(np.dtype(dtype).name)
    ok = _core.lib.nx_op_tolerance_get(op.encode(), code, b"cpu",
                                       driver.encode() if driver else None, ctypes.byref(rtol),
                                       ctypes.byref(atol))
    assert ok, f"{op}: no tolerance for {dtype}"
    return rtol.value, atol.value


def test_every_op_has_a_case():
    missing = [op.name for op in nitrix.ops if op.name not in CASES]
    assert not missing, f"ops without a golden case: {missing}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_case(name):
    case_dir, m = CASES[name]
    fn = nitrix.op(name)
    op = fn.op
    by_name = {o.name.lower(): o for o in op.options}
    kwargs = {}
    for word in m["options"].split():
        k, v = word.split("=", 1)
        o = by_name[k.lower()]
        kwargs[o.pyname] = _value(o, v, case_dir)
    driver = kwargs.get("driver")
    if driver is None and op.driver_site:
        row = [d for d in nitrix.divergent_ops() if d["op"] == op.driver_site]
        if row:
            driver = row[0]["canonical"]
            if "driver" in {o.name for o in op.options}:
                kwargs["driver"] = driver
    inputs = [np.load(os.path.join(case_dir, f)) for f in m["inputs"].split()]
    before = [a.copy() for a in inputs]
    got = fn(*inputs, backend="cpu", **kwargs)
    if len(op.outputs) == 1:
        got = (got,)
    wants = [np.load(os.path.join(case_dir, f)) for f in m["output"].split()]
    rtol, atol = _tolerance(name, m["dtype"], driver)
    assert len(got) == len(wants)
    for g, w in zip(got, wants):
        g = np.asarray(g)
        assert g.shape == w.shape, (name, g.shape, w.shape)
        if w.dtype.kind == "f" and g.dtype.kind == "f":
            assert g.dtype == np.dtype(m["dtype"]) or g.dtype == w.dtype
            gw, ww = g.astype(np.float64), w.astype(np.float64)
            with np.errstate(invalid="ignore"):
                ok = (np.abs(gw - ww) <= atol + rtol * np.abs(ww)) | (np.isnan(gw) & np.isnan(ww))
            ok |= np.isinf(ww) & (gw == ww)
            assert ok.all(), (f"{name} ({os.path.relpath(case_dir, GOLDEN)}): worst |got - want| "
                              f"{np.nanmax(np.abs(gw - ww))} over rtol {rtol} atol {atol}")
        else:
            np.testing.assert_array_equal(g, w)
    for a, b in zip(inputs, before):
        np.testing.assert_array_equal(a, b)  # inputs are never written
