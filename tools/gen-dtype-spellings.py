#!/usr/bin/env python3
"""Writes tests/unit/dtype-spellings.h: what NumPy's np.dtype() makes of each candidate spelling,
and so what nitrix's dtype parser (nx_dtype_from_name, --dtype=) must do with it.

Run with a venv V that has numpy 1.24: V/bin/python tools/gen-dtype-spellings.py
The candidates are every string key of np.sctypeDict, Python's builtin type names, every
typestring kind letter with sizes 1..16, and every one-letter type code, each bare and with each
byte-order prefix (< > = |), plus case variants and junk. For each, the header records NumPy's
answer (or its error) and the dtype nitrix must give, or -1 where nitrix must refuse it:
  - NumPy accepts it (with or without a DeprecationWarning) as a supported dtype in native or no
    byte order: that dtype;
  - NumPy accepts it as big-endian (">f4"): refused (nitrix computes little-endian);
  - NumPy refuses it but accepts it in lower case, a type name ("FLOAT32", "Double"): that
    dtype, as nitrix reads type names in any case;
  - NumPy accepts it as another dtype (complex, uint16, str, ...) or refuses it: refused;
  - except nitrix's own names (f32 f64 f16 bf16 i8 i16 i32 i64 u8 bool, bfloat16), which nitrix
    reads in any case and which win where NumPy gives the same spelling another meaning: i8
    (NumPy int64), u8 (NumPy uint64), f16 (NumPy float128) and U8 (NumPy str). These rows say
    "nitrix" in their note.
The host is Linux x86-64 (LP64: 'l', 'long', 'int', 'intp' are 64-bit), as the header records.
"""
import platform
import sys
import warnings

import numpy as np

SUPPORTED = {  # NumPy dtype name -> nitrix dtype enum name
    "float32": "NX_DTYPE_F32", "float64": "NX_DTYPE_F64", "float16": "NX_DTYPE_F16",
    "int8": "NX_DTYPE_I8", "int16": "NX_DTYPE_I16", "int32": "NX_DTYPE_I32",
    "int64": "NX_DTYPE_I64", "uint8": "NX_DTYPE_U8", "bool": "NX_DTYPE_BOOL",
    "uint32": "NX_DTYPE_U32", "uint64": "NX_DTYPE_U64",
}
NITRIX = {"f32": "NX_DTYPE_F32", "f64": "NX_DTYPE_F64", "f16": "NX_DTYPE_F16",
          "bf16": "NX_DTYPE_BF16", "bfloat16": "NX_DTYPE_BF16", "i8": "NX_DTYPE_I8",
          "i16": "NX_DTYPE_I16", "i32": "NX_DTYPE_I32", "i64": "NX_DTYPE_I64",
          "u8": "NX_DTYPE_U8", "bool": "NX_DTYPE_BOOL", "u32": "NX_DTYPE_U32",
          "u64": "NX_DTYPE_U64"}


def candidates():
    base = {k for k in np.sctypeDict if isinstance(k, str)}
    base |= {"float", "int", "bool", "complex", "object", "str", "bytes"}
    for kind in "biufcmMOSUVa?":
        for size in range(0, 17):
            base.add(f"{kind}{size}")
    base |= set("?bBhHiIlLqQpPefdgFDGOSUVaMm")
    out = set(base)
    for b in base:
        for pre in "<>=|":
            out.add(pre + b)
    for n in list(NITRIX):
        out |= {n.upper(), n.capitalize()}
    for n in ["float32", "int32", "bool_", "half", "double", "float"]:
        out |= {n.upper(), n.capitalize()}
    out |= {"", " f4", "f4 ", "f4x", "f99", "float33", "<<f4", "<", "|", "(f4)",
            "float32\n", "i4i4", "int8 ", "Float32", "b", "B1", "bool8", "int0", "uint0"}
    return sorted(out)


def numpy_says(s):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            d = np.dtype(s)
        except Exception as e:  # noqa: BLE001 - any refusal
            return None, type(e).__name__
        note = " (deprecated)" if any(issubclass(x.category, DeprecationWarning) for x in w) else ""
    return d, note


def long_name_in_other_case(s):
    """A NumPy type name of a supported dtype (not a one-letter code or a typestring), written in
    another case: nitrix accepts those too, as NumPy gives them no other meaning."""
    low = s.lower()
    if len(s) < 3 or low == s or not low[0].isalpha() or low not in np.sctypeDict:
        return False
    d, _ = numpy_says(low)
    return d is not None and d.name in SUPPORTED and numpy_says(s)[0] is None


def c_string(s):
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= ord(ch) < 0x7F:
            out.append(ch)
        else:
            out.append("\\x%02x\"\"" % ord(ch))
    return '"' + "".join(out) + '"'


def main():
    rows = []
    for s in candidates():
        d, note = numpy_says(s)
        np_text = d.str if d is not None else "error: " + note
        if s.lower() in NITRIX:
            want = NITRIX[s.lower()]
            why = "nitrix name" + ("" if d is None or SUPPORTED.get(d.name) == want
                                   else "; NumPy: " + np_text)
        elif d is None and long_name_in_other_case(s):
            d2 = np.dtype(s.lower())
            want, why = SUPPORTED[d2.name], "NumPy's " + s.lower() + " in another case"
        elif d is None:
            want, why = "-1", "NumPy refuses it"
        elif d.name in SUPPORTED and d.byteorder in "=|<":
            want, why = SUPPORTED[d.name], "NumPy " + d.str + note
        elif d.name in SUPPORTED:
            want, why = "-1", "big-endian " + d.str
        else:
            want, why = "-1", "unsupported " + d.str
        rows.append((s, want, why))
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/unit/dtype-spellings.h"
    with open(out, "w") as f:
        f.write("/* Generated by tools/gen-dtype-spellings.py with NumPy %s (Python %s, %s %s): do "
                "not edit.\n * Each row: a spelling, the dtype nitrix must parse it as (-1: "
                "refused), and why. */\n" % (np.__version__, platform.python_version(),
                                             platform.system(), platform.machine()))
        f.write('#define DTYPE_SPELLINGS_NUMPY "%s"\n' % np.__version__)
        f.write("static const struct {\n    const char *text;\n    int dtype;\n"
                "    const char *why;\n} dtype_spellings[] = {\n")
        for s, want, why in rows:
            f.write("    {%s, %s, %s},\n" % (c_string(s), want, c_string(why)))
        f.write("};\n")
    print("%d spellings, %d accepted" % (len(rows), sum(r[1] != "-1" for r in rows)))


if __name__ == "__main__":
    main()
