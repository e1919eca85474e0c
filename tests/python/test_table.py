"""Every row of the op table is a function nitrix.<family>.<op> with the row's inputs, the
schema's option names and defaults, a docstring from the row, and a stub."""
import ast
import inspect
import os
import re

import pytest

import nitrix
from nitrix import _table

from conftest import SOURCE_ROOT


def _ops_def_rows():
    text = open(os.path.join(SOURCE_ROOT, "ops", "ops.def")).read()
    return re.findall(r"^NX_OP\((\w+),\s*(\w+),\s*\"([^\"]*)\",\s*\"([^\"]*)\",\s*(\w+)", text,
                      re.M)


def test_every_ops_def_row_has_its_function():
    rows = _ops_def_rows()
    assert len(rows) == len(nitrix.ops) >= 50
    for name, family, inputs, outputs, diff in rows:
        mod = getattr(nitrix, family)
        fn = getattr(mod, name)
        assert fn is nitrix.op(name)
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        ins = [p.rstrip("?") for p in inputs.split()]
        assert [p.name for p in params[:len(ins)]] == ins, name
        for p, spelled in zip(params, inputs.split()):
            assert p.kind is inspect.Parameter.POSITIONAL_ONLY
            assert (p.default is None) == spelled.endswith("?"), (name, p.name)
        assert fn.op.outputs == tuple(outputs.split())
        assert fn.op.differentiable == (diff == "true")
        assert params[-2].name == "backend" and params[-1].name == "ctx"


def test_options_carry_the_schema_defaults():
    g = inspect.signature(nitrix.smoothing.gaussian).parameters
    assert g["sigma"].default is inspect.Parameter.empty  # required
    assert g["mode"].default == "reflect" and g["driver"].default == "auto"
    assert g["truncate"].default == 4.0
    d = inspect.signature(nitrix.morphology.dilate).parameters
    assert d["size"].default == 3 and d["mode"].default == "reflect"
    s = inspect.signature(nitrix.semiring.semiring_matmul).parameters
    assert "semiring" in s
    for op in nitrix.ops:
        params = inspect.signature(nitrix.op(op.name)).parameters
        for o in op.options:
            p = params[o.pyname]
            assert p.kind is inspect.Parameter.KEYWORD_ONLY
            if o.required:
                assert p.default is inspect.Parameter.empty
            else:
                want = _table.default_value(o)
                same = p.default == want or (want != want and p.default != p.default)  # NaN
                assert same, (op.name, o.name)


def test_docstrings_come_from_the_row():
    for op in nitrix.ops:
        doc = nitrix.op(op.name).__doc__
        assert doc.startswith(op.summary)
        assert ("Differentiable: yes" if op.differentiable else "Differentiable: no") in doc
        for o in op.options:
            assert f"\n{o.pyname} : {o.type}" in doc
        if op.driver_site:
            assert "Drivers" in doc


def test_stubs_match_the_table():
    stub_dir = os.environ.get("NITRIX_STUB_DIR", os.path.dirname(nitrix.__file__))
    texts = _table.stubs(nitrix.ops)
    for family, text in texts.items():
        path = os.path.join(stub_dir, family + ".pyi")
        assert open(path).read() == text, path
        tree = ast.parse(text)
        names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert names == {op.name for op in nitrix.ops if op.family == family}


def test_aliases_reach_the_same_function():
    assert nitrix.smoothing.gaussian_filter is nitrix.smoothing.gaussian
    assert nitrix.op("GAUSSIAN_FILTER".lower()) is nitrix.smoothing.gaussian
    with pytest.raises(nitrix.InvalidArgumentError, match="no op named"):
        nitrix.op("no_such_op")
