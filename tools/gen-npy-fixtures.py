#!/usr/bin/python3
"""Writes the .npy test fixtures, their manifest and the fuzz seed corpus.

    /usr/bin/python3 tools/gen-npy-fixtures.py      (from the repository root)

Outputs (all committed):
  tests/data/npy/*.npy         arrays written by NumPy's own np.lib.format.write_array, for every
                               nitrix dtype: C and Fortran order, versions 1.0/2.0/3.0, big-endian,
                               0-d, empty, 1-d, 8-d, and hand-made headers NumPy also accepts
  tests/data/npy/manifest.h    for each fixture: dtype, shape, the expected element bit patterns in
                               C order (little-endian), and the NumPy-written version 1.0 C-order
                               file holding the same array (what nitrix's writer must reproduce)
  tests/fuzz/npy/corpus/       the fixtures (seed-*) plus malformed inputs (bad-*), as libFuzzer
                               seeds; found-* files there came from fuzzing and are left alone

bf16 follows nitrix's convention (runtime/npy.c): a '|V2' void of little-endian bfloat16 bits.
Every hand-made header is checked with np.load here, so the fixtures are valid as NumPy sees them.
"""
import os
import struct
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "npy")
CORPUS = os.path.join(ROOT, "tests", "fuzz", "npy", "corpus")

# nitrix dtype -> (NumPy dtype, unsigned view used for the bit patterns)
DTYPES = {
    "f4": ("NX_DTYPE_F32", "<f4", "<u4"),
    "f8": ("NX_DTYPE_F64", "<f8", "<u8"),
    "f2": ("NX_DTYPE_F16", "<f2", "<u2"),
    "bf16": ("NX_DTYPE_BF16", "V2", "<u2"),
    "i1": ("NX_DTYPE_I8", "|i1", "|u1"),
    "i2": ("NX_DTYPE_I16", "<i2", "<u2"),
    "i4": ("NX_DTYPE_I32", "<i4", "<u4"),
    "i8": ("NX_DTYPE_I64", "<i8", "<u8"),
    "u1": ("NX_DTYPE_U8", "|u1", "|u1"),
    "b1": ("NX_DTYPE_BOOL", "|b1", "|u1"),
}


def base_values(tag, n, rng):
    """n values of the dtype with the edge cases first, then random fill."""
    if tag in ("f4", "f8", "f2"):
        dt = np.dtype(DTYPES[tag][1])
        fi = np.finfo(dt)
        special = [0.0, -0.0, 1.0, -1.5, np.pi, np.nan, np.inf, -np.inf,
                   float(fi.max), float(fi.min), float(fi.tiny), float(fi.smallest_subnormal),
                   -float(fi.smallest_subnormal), 1e-3]
        rest = rng.standard_normal(n - len(special)) * 100.0
        return np.array(special + list(rest), dtype=np.float64).astype(dt)
    if tag == "bf16":
        # bfloat16 bit patterns: +-0, 1, -2.5, pi rounded, inf, -inf, a quiet NaN, the largest
        # finite, the smallest normal and subnormal, then random patterns
        special = [0x0000, 0x8000, 0x3F80, 0xC020, 0x4049, 0x7F80, 0xFF80, 0x7FC0, 0x7F7F,
                   0x0080, 0x0001, 0x8001]
        rest = rng.integers(0, 1 << 16, n - len(special))
        return np.array(special + list(rest), dtype="<u2").view("V2")
    if tag == "b1":
        return (rng.integers(0, 2, n) == 1)
    info = np.iinfo(np.dtype(DTYPES[tag][1]))
    special = [0, 1, info.max, info.min] + ([-1] if info.min < 0 else [info.max - 1])
    rest = rng.integers(info.min, info.max, n - len(special), endpoint=True,
                        dtype=np.dtype(DTYPES[tag][1]))
    return np.array(special + list(rest), dtype=np.dtype(DTYPES[tag][1]))


def bits_of(tag, a):
    """Element bit patterns, C order, as Python ints."""
    c = np.ascontiguousarray(a)
    if tag == "bf16":
        u = c.view("<u2")
    else:
        u = c.astype(np.dtype(DTYPES[tag][1])).view(DTYPES[tag][2])
    return [int(x) for x in u.ravel(order="C")]


def save(name, a, version=(1, 0)):
    path = os.path.join(DATA, name)
    with open(path, "wb") as f:
        np.lib.format.write_array(f, a, version=version)
    return path


def raw_npy(header, data, version=(1, 0), pad_to=64):
    """A file with a hand-written header (padded with spaces and a newline)."""
    pre = 10 if version == (1, 0) else 12
    body = header.encode("utf-8" if version == (3, 0) else "latin1")
    total = pre + len(body) + 1
    if pad_to:
        body += b" " * ((-total) % pad_to)
    body += b"\n"
    fmt = "<H" if version == (1, 0) else "<I"
    return b"\x93NUMPY" + bytes(version) + struct.pack(fmt, len(body)) + body + data


class Manifest:
    def __init__(self):
        self.rows = []
        self.arrays = []

    def add(self, name, tag, a, canon):
        """name holds array a (as read back into C order); canon is the v1.0 C-order file of a."""
        bits = bits_of(tag, a)
        ident = name.replace(".", "_").replace("-", "_")
        if bits:
            vals = ", ".join("0x%xu" % b for b in bits)
            self.arrays.append("static const uint64_t fx_%s[] = {%s};" % (ident, vals))
        shape = list(a.shape) + [0] * (8 - a.ndim)
        self.rows.append('    {"%s", %s, %d, {%s}, %d, %s, %s},' % (
            name, DTYPES[tag][0], a.ndim, ", ".join(str(s) for s in shape), a.size,
            "fx_" + ident if bits else "NULL", '"%s"' % canon if canon else "NULL"))

    def write(self, path):
        with open(path, "w") as f:
            f.write("/* Generated by tools/gen-npy-fixtures.py with NumPy %s; do not edit. */\n"
                    % np.__version__)
            f.write("#ifndef NX_NPY_MANIFEST_H\n#define NX_NPY_MANIFEST_H\n\n")
            f.write("#include <stdint.h>\n\n#include \"nitrix.h\"\n\n")
            f.write("#define NPY_FIXTURE_NUMPY_VERSION \"%s\"\n\n" % np.__version__)
            f.write("typedef struct npy_fixture {\n"
                    "    const char *file;\n"
                    "    nx_dtype dtype;\n"
                    "    int ndim;\n"
                    "    int64_t shape[8];\n"
                    "    int64_t numel;\n"
                    "    const uint64_t *bits; /* element bit patterns, C order */\n"
                    "    const char *canonical; /* NumPy's v1.0 C-order file of the array */\n"
                    "} npy_fixture;\n\n")
            for line in self.arrays:
                f.write(line + "\n")
            f.write("\nstatic const npy_fixture npy_fixtures[] = {\n")
            for line in self.rows:
                f.write(line + "\n")
            f.write("};\n\n#endif\n")


def check_load(path, expect):
    got = np.load(path, max_header_size=1 << 20)
    assert got.dtype == expect.dtype and got.shape == expect.shape, path
    assert got.tobytes() == np.ascontiguousarray(expect).tobytes(), path


def dtype_fixtures(m, rng):
    for tag in DTYPES:
        a = base_values(tag, 24, rng).reshape(2, 3, 4)
        canon = "%s_c.npy" % tag
        save(canon, a)
        m.add(canon, tag, a, canon)

        f = np.asfortranarray(a)
        save("%s_f.npy" % tag, f)
        m.add("%s_f.npy" % tag, tag, a, canon)

        for major in (2, 3):
            name = "%s_v%d.npy" % (tag, major)
            save(name, a, version=(major, 0))
            m.add(name, tag, a, canon)

        if a.dtype.itemsize > 1 and tag != "bf16":
            name = "%s_be.npy" % tag
            save(name, a.astype(a.dtype.newbyteorder(">")))
            m.add(name, tag, a, canon)

        z = a.reshape(-1)[2:3].reshape(())
        save("%s_0d.npy" % tag, z)
        m.add("%s_0d.npy" % tag, tag, z, "%s_0d.npy" % tag)

        e = a.reshape(-1)[:0].reshape(2, 0, 3)
        save("%s_empty.npy" % tag, e)
        m.add("%s_empty.npy" % tag, tag, e, "%s_empty.npy" % tag)

        v = a.reshape(-1)[3:8].copy()
        save("%s_1d.npy" % tag, v)
        m.add("%s_1d.npy" % tag, tag, v, "%s_1d.npy" % tag)


def extra_fixtures(m, rng):
    # 8 dimensions in Fortran order, big-endian Fortran order, a 2-d Fortran f8
    a8 = rng.standard_normal(96).astype("<f4").reshape(2, 3, 1, 2, 1, 2, 1, 4)
    save("f4_8d.npy", a8)
    m.add("f4_8d.npy", "f4", a8, "f4_8d.npy")
    save("f4_8d_f.npy", np.asfortranarray(a8))
    assert np.asfortranarray(a8).flags.f_contiguous and not np.asfortranarray(a8).flags.c_contiguous
    m.add("f4_8d_f.npy", "f4", a8, "f4_8d.npy")

    b = (np.arange(15, dtype="<f8").reshape(3, 5) - 7.25) / 3.0
    save("f8_3x5.npy", b)
    m.add("f8_3x5.npy", "f8", b, "f8_3x5.npy")
    save("f8_3x5_f.npy", np.asfortranarray(b))
    m.add("f8_3x5_f.npy", "f8", b, "f8_3x5.npy")
    save("f8_3x5_f_be.npy", np.asfortranarray(b.astype(">f8")))
    m.add("f8_3x5_f_be.npy", "f8", b, "f8_3x5.npy")

    # bool bytes other than 0/1 are True; nitrix stores them as 1
    raw = np.array([0, 1, 2, 255, 0, 128], dtype="|u1")
    nb = raw.view("|b1")
    save("b1_nonzero.npy", nb)
    m.add("b1_nonzero.npy", "b1", raw != 0, None)

    # a 1-d array larger than the writer's 64 KiB chunk; its values are k * 7 - 123456, checked
    # by formula in the test rather than listed in the manifest
    big = np.arange(20000, dtype="<i4") * 7 - 123456
    save("i4_big.npy", big)

    # hand-made headers that NumPy accepts: reordered keys, double quotes, no trailing comma,
    # tabs and newlines, 16-byte alignment (old NumPy), Python 2 longs, no padding at all
    data = b.tobytes()
    variants = {
        "hdr_reordered.npy": ("{'shape': (3, 5), 'fortran_order': False, 'descr': '<f8'}", 16),
        "hdr_dquotes.npy": ('{"descr":"<f8","fortran_order":False,"shape":(3,5),}', 64),
        "hdr_spaces.npy": ("  { 'descr' :\t'<f8' ,\n 'fortran_order' : False ,"
                           " 'shape' : ( 3 , 5 , ) , }", 64),
        "hdr_py2long.npy": ("{'descr': '<f8', 'fortran_order': False, 'shape': (3L, 5L), }", 16),
        "hdr_nopad.npy": ("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 5), }", 0),
    }
    for name, (header, pad) in variants.items():
        path = os.path.join(DATA, name)
        content = raw_npy(header, data, pad_to=pad)
        if pad == 0:
            content = content.replace(b"}\n", b"}")
            content = content[:8] + struct.pack("<H", len(header)) + content[10:]
        with open(path, "wb") as f:
            f.write(content)
        check_load(path, b)
        m.add(name, "f8", b, "f8_3x5.npy")

    # a version 2.0 file whose header needs more than 65535 bytes (padding NumPy accepts)
    path = os.path.join(DATA, "hdr_v2_long.npy")
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 5), }" + " " * 70000
    with open(path, "wb") as f:
        f.write(raw_npy(header, data, version=(2, 0)))
    check_load(path, b)
    m.add("hdr_v2_long.npy", "f8", b, "f8_3x5.npy")

    # bf16 as ml_dtypes would spell it
    bf = base_values("bf16", 16, rng)[[0, 2, 5, 7, 11, 14]]
    path = os.path.join(DATA, "bf16_lt.npy")
    with open(path, "wb") as f:
        f.write(raw_npy("{'descr': '<V2', 'fortran_order': False, 'shape': (6,), }",
                        bf.tobytes()))
    check_load(path, bf)
    m.add("bf16_lt.npy", "bf16", bf, None)


def malformed_seeds():
    """Inputs the reader must reject: written to the fuzz corpus."""
    good = raw_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                   np.arange(6, dtype="<f4").tobytes())

    def hdr(h, data=b"\0" * 24, version=(1, 0)):
        return raw_npy(h, data, version)

    seeds = {
        "bad-magic": b"\x93NUMPX" + good[6:],
        "bad-version": good[:6] + b"\x04\x00" + good[8:],
        "bad-truncated-preamble": good[:9],
        "bad-empty": b"",
        "bad-header-beyond": good[:8] + struct.pack("<H", 60000) + good[10:],
        "bad-no-colon": hdr("{'descr' '<f4', 'fortran_order': False, 'shape': (2, 3), }"),
        "bad-unclosed": hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), "),
        "bad-descr": hdr("{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }"),
        "bad-structured": hdr("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }"),
        "bad-negative": hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }"),
        "bad-overflow": hdr("{'descr': '<f4', 'fortran_order': False, "
                            "'shape': (99999999999999999999, 3), }"),
        "bad-product-overflow": hdr("{'descr': '<f8', 'fortran_order': False, "
                                    "'shape': (4294967296, 4294967296), }"),
        "bad-huge": hdr("{'descr': '<f8', 'fortran_order': False, "
                        "'shape': (1000000000, 1000000000), }"),
        "bad-9d": hdr("{'descr': '<f4', 'fortran_order': False, "
                      "'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }", b"\0" * 4),
        "bad-short-data": good[:-3],
        "bad-trailing": good + b"extra",
        "bad-dup-key": hdr("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
                           "'shape': (2, 3), }"),
        "bad-missing-key": hdr("{'descr': '<f4', 'shape': (2, 3), }"),
        "bad-extra-key": hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), "
                             "'x': 1, }"),
        "bad-not-tuple": hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (6), }"),
        "bad-fortran-value": hdr("{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3), }"),
        "bad-native-order": hdr("{'descr': '=f4', 'fortran_order': False, 'shape': (2, 3), }"),
        "bad-v3-utf8": hdr("{'descr': '<f\u00e9', 'fortran_order': False, 'shape': (2, 3), }",
                           version=(3, 0)),
        "bad-garbage-after-dict": hdr("{'descr': '<f4', 'fortran_order': False, "
                                      "'shape': (2, 3), } x"),
    }
    return seeds


def main():
    os.makedirs(DATA, exist_ok=True)
    os.makedirs(CORPUS, exist_ok=True)
    for d in (DATA,):
        for f in os.listdir(d):
            if f.endswith(".npy"):
                os.remove(os.path.join(d, f))
    rng = np.random.default_rng(20261129)
    m = Manifest()
    dtype_fixtures(m, rng)
    extra_fixtures(m, rng)
    m.write(os.path.join(DATA, "manifest.h"))

    for name in sorted(os.listdir(DATA)):
        if name.endswith(".npy") and os.path.getsize(os.path.join(DATA, name)) < 4096:
            with open(os.path.join(DATA, name), "rb") as f:
                content = f.read()
            with open(os.path.join(CORPUS, "seed-" + name[:-4]), "wb") as f:
                f.write(content)
    for name, content in malformed_seeds().items():
        with open(os.path.join(CORPUS, name), "wb") as f:
            f.write(content)
    print("wrote %d fixtures and %d malformed seeds with NumPy %s"
          % (len(m.rows), len(malformed_seeds()), np.__version__), file=sys.stderr)


if __name__ == "__main__":
    main()
