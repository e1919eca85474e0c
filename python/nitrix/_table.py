"""The op table as the library exports it (nx_ops), and the Python source of every op function.

Standard library only: the build runs this module to write the .pyi stubs, and the package runs
it at import time to make nitrix.<family>.<op>, so both come from the same rows and a new row of
ops/ops.def is a new Python function with no Python written for it.
"""
import keyword
from dataclasses import dataclass

from . import _lib

_MISSING = "<required>"


@dataclass(frozen=True)
class Option:
    name: str       # the spec's keyword
    pyname: str     # the Python parameter (name, or name_ where it would clash)
    type: str       # one of _lib.OPT_TYPES
    default: str    # the default in the option's text syntax; None: required
    allowed: str    # enum names "a|b|c", or a numeric range "lo:hi", or None
    max_count: int
    help: str

    @property
    def required(self):
        return self.default is None

    @property
    def computed(self):
        """A default the op computes from its inputs ("(B's rows)")."""
        return self.default is not None and self.default.startswith("(")


@dataclass(frozen=True)
class Op:
    name: str
    family: str
    summary: str
    inputs: tuple
    nrequired: int
    outputs: tuple
    options: tuple
    differentiable: bool
    driver_site: str
    aliases: tuple


def _pyname(name, taken):
    py = name.replace("-", "_")
    if keyword.iskeyword(py) or py in taken or py in ("backend", "ctx"):
        py += "_"
    return py


def read_ops(lib):
    """Every row of the library's op table, in table order."""
    n = _lib.C.c_size_t()
    rows = lib.nx_ops(_lib.C.byref(n))
    ops = []
    for i in range(n.value):
        r = rows[i].contents
        inputs = _lib.strings(r.inputs, r.ninputs)
        taken = set(inputs)
        opts = []
        for k in range(r.nopts):
            o = r.opts[k]
            name = _lib.text(o.name)
            py = _pyname(name, taken)
            taken.add(py)
            opts.append(Option(name=name, pyname=py, type=_lib.OPT_TYPES[o.type],
                               default=o.default.decode() if o.default is not None else None,
                               allowed=_lib.text(o.allowed) or None, max_count=o.max_count,
                               help=_lib.text(o.help)))
        ops.append(Op(name=_lib.text(r.name), family=_lib.text(r.family),
                      summary=_lib.text(r.summary), inputs=inputs, nrequired=r.nrequired,
                      outputs=_lib.strings(r.outputs, r.noutputs), options=tuple(opts),
                      differentiable=bool(r.differentiable),
                      driver_site=_lib.text(r.driver_site) or None,
                      aliases=_lib.strings(r.aliases)))
    return ops


# ---- option values: text <-> Python ---------------------------------------------------------

def _split(text):
    return [p.strip() for p in text.split(",") if p.strip()]


def _num(text, kind):
    t = text.strip()
    if kind is int:
        return int(t, 0)
    return float(t)


def default_value(o):
    """The Python default of option o: the schema's text parsed into its type; None for a
    required option's absence, a computed default or no tensor."""
    if o.default is None or o.computed:
        return None
    d = o.default
    if o.type in ("int", "float"):
        return _num(d, int if o.type == "int" else float)
    if o.type in ("ints", "floats"):
        vals = [_num(p, int if o.type == "ints" else float) for p in _split(d)]
        return vals[0] if len(vals) == 1 else tuple(vals)
    if o.type == "bool":
        return d.strip().lower() in ("1", "true", "yes", "on")
    if o.type == "tensor":
        return None
    return d


def _annotation(o):
    t = o.type
    if t == "int":
        a = "int"
    elif t == "float":
        a = "float"
    elif t == "ints":
        a = "int | Sequence[int]"
    elif t == "floats":
        a = "float | Sequence[float]"
    elif t == "bool":
        a = "bool"
    elif t == "enum" and o.allowed:
        a = "Literal[" + ", ".join(repr(v) for v in o.allowed.split("|")) + "] | str"
    elif t == "border":
        a = "Literal['reflect', 'constant', 'nearest', 'mirror', 'wrap'] | str"
    elif t == "dtype":
        a = "DTypeLike"
    elif t == "semiring":
        a = "str"
    elif t == "tensor":
        a = "ArrayLike | None"
    else:
        a = "str"
    if (o.computed or t == "tensor") and not a.endswith("None"):
        a += " | None"
    return a


# ---- docstrings and source --------------------------------------------------------------------

def docstring(op, drivers=None):
    """The docstring of op: its math, arguments, defaults, differentiability and drivers."""
    lines = [op.summary, ""]
    lines.append("Parameters")
    lines.append("----------")
    for i, name in enumerate(op.inputs):
        opt = "" if i < op.nrequired else ", optional (None: absent)"
        lines.append(f"{name} : array_like{opt}")
        lines.append("    Positional tensor input (NumPy array, or any object with __dlpack__).")
    for o in op.options:
        if o.required:
            d = "required"
        elif o.computed:
            d = f"default None: {o.default[1:-1]}"
        elif o.type == "tensor":
            d = "default None (no tensor)"
        else:
            d = f"default {default_value(o)!r}"
        rng = ""
        if o.allowed and o.type in ("int", "ints", "float", "floats"):
            rng = f", range {o.allowed}"
        elif o.allowed and o.type == "enum":
            rng = f", one of {o.allowed.replace('|', ', ')}"
        count = f", up to {o.max_count} values" if o.type in ("ints", "floats") else ""
        lines.append(f"{o.pyname} : {o.type} ({d}{rng}{count})")
        lines.append(f"    {o.help}" if o.help else "    (no description)")
    lines.append("backend : str, optional")
    lines.append("    'auto', 'cpu', 'cuda' or 'ref' (default: the context's).")
    lines.append("ctx : nitrix.Context, optional")
    lines.append("    The context to run in (default: nitrix.default_context()).")
    lines.append("")
    lines.append("Returns")
    lines.append("-------")
    if len(op.outputs) == 1:
        lines.append(f"{op.outputs[0]} : numpy.ndarray (a nitrix.Tensor for a device result)")
    else:
        lines.append("tuple of numpy.ndarray: " + ", ".join(op.outputs))
    lines.append("")
    lines.append("Notes")
    lines.append("-----")
    lines.append(f"Family {op.family}; op table row {op.name!r} (`nitrix run {op.name}`).")
    lines.append("Differentiable: " + ("yes (nitrix.vjp)" if op.differentiable else "no") + ".")
    if op.driver_site:
        d = drivers.get(op.driver_site) if drivers else None
        if d:
            lines.append(f"Drivers (registry row {op.driver_site!r}): {d['drivers']}; canonical "
                         f"{d['canonical']}, fast {d['fast']}. {d['reason']}")
        else:
            lines.append(f"Drivers: resolved through the registry row {op.driver_site!r}.")
    if op.aliases:
        lines.append("Deprecated aliases: " + ", ".join(op.aliases) + ".")
    return "\n".join(lines)


def _source_repr(v):
    """repr(v) that is valid source for non-finite floats too (nan, inf) and tuples of them."""
    if isinstance(v, float) and v != v or v in (float("inf"), float("-inf")):
        return f"float({str(v)!r})"
    if isinstance(v, tuple):
        return "(" + "".join(_source_repr(x) + ", " for x in v) + ")"
    return repr(v)


def signature(op, annotated=False):
    """The parameter list of op's function, as source."""
    params = []
    for i, name in enumerate(op.inputs):
        ann = ": ArrayLike" if annotated else ""
        if i < op.nrequired:
            params.append(f"{name}{ann}")
        else:
            params.append(f"{name}{ann + ' | None' if annotated else ''} = None")
    if op.inputs:  # positional-only inputs; a constructor (key, identity_grid) has none
        params.append("/")
    params.append("*")
    for o in op.options:
        ann = f": {_annotation(o)}" if annotated else ""
        if o.required:
            params.append(f"{o.pyname}{ann}")
        else:
            params.append(f"{o.pyname}{ann} = {_source_repr(default_value(o))}")
    params.append("backend: str | None = None" if annotated else "backend=None")
    params.append("ctx: Context | None = None" if annotated else "ctx=None")
    return ", ".join(params)


def source(op):
    """Python source of op's function; it calls _call(row, inputs, option values, backend, ctx)."""
    ins = ", ".join(op.inputs) + ("," if len(op.inputs) == 1 else "")
    opts = ", ".join(o.pyname for o in op.options) + ("," if len(op.options) == 1 else "")
    return (f"def {op.name}({signature(op)}):\n"
            f"    return _call(_ROW, ({ins}), ({opts}), backend, ctx)\n")


def stub(op):
    """The .pyi line of op's function."""
    if len(op.outputs) == 1:
        ret = "Any"
    else:
        ret = "tuple[" + ", ".join("Any" for _ in op.outputs) + "]"
    doc = op.summary.replace("\\", "\\\\").replace('"""', "'''")
    return f"def {op.name}({signature(op, annotated=True)}) -> {ret}:\n    \"\"\"{doc}\"\"\"\n"


STUB_HEADER = (
    "# Generated from the op table (ops/ops.def through nx_ops) by nitrix/_stubgen.py: do not "
    "edit.\n"
    "from typing import Any, Literal, Sequence\n\n"
    "from numpy.typing import ArrayLike, DTypeLike\n\n"
    "from nitrix import Context\n\n")


def stubs(ops):
    """{family: .pyi text} for every family of ops."""
    out = {}
    for op in ops:
        out.setdefault(op.family, STUB_HEADER)
        out[op.family] += "\n" + stub(op)
    return out
