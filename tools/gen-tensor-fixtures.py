#!/usr/bin/python3
"""Writes tests/data/tensor/fixtures.h: expected values for the tensor tests.

  * casts: NumPy's astype for every pair of NumPy dtypes; bfloat16 (which NumPy lacks) by exact
    rational rounding (fractions.Fraction, nearest, ties to even), cross-checked against NumPy's
    float16 on the same values;
  * slices: Python's own range(n)[start:stop:step];
  * view chains: NumPy transposes, basic slices and reshapes of an arange, with whether NumPy can
    reshape without a copy (assigning .shape raises when it cannot) and the resulting elements.

Run from the repository root: /usr/bin/python3 tools/gen-tensor-fixtures.py
"""
import math
import os
import random
import struct
import sys
from fractions import Fraction

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'data', 'tensor',
                   'fixtures.h')

NX = ['f32', 'f64', 'f16', 'bf16', 'i8', 'i16', 'i32', 'i64', 'u8', 'bool']
NP = {'f32': np.float32, 'f64': np.float64, 'f16': np.float16, 'i8': np.int8, 'i16': np.int16,
      'i32': np.int32, 'i64': np.int64, 'u8': np.uint8, 'bool': np.bool_}
ENUM = {d: 'NX_DTYPE_' + d.upper() for d in NX}
SIZE = {'f32': 4, 'f64': 8, 'f16': 2, 'bf16': 2, 'i8': 1, 'i16': 2, 'i32': 4, 'i64': 8, 'u8': 1,
        'bool': 1}
FLOATS = ('f32', 'f64', 'f16', 'bf16')


def round_bits(q, frac_bits, emin, emax):
    """Bits of the binary format nearest to the rational q (ties to even), magnitude only."""
    if q == 0:
        return 0
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, emin)
    ulp = Fraction(2) ** (e - frac_bits)
    n = a / ulp
    k = n.numerator // n.denominator
    r = n - k
    if r > Fraction(1, 2) or (r == Fraction(1, 2) and k % 2 == 1):
        k += 1
    if k == 2 ** (frac_bits + 1):
        k //= 2
        e += 1
    bias = -emin + 1
    if e > emax:
        return (emax + bias + 1) << frac_bits
    if k < 2 ** frac_bits:
        return k
    return ((e + bias) << frac_bits) | (k - 2 ** frac_bits)


def exact_bf16(value, neg):
    """bf16 bits of an exact value (a Fraction, or 'nan'/'inf')."""
    sign = 0x8000 if neg else 0
    if value == 'nan':
        return sign | 0x7fc0
    if value == 'inf':
        return sign | 0x7f80
    return sign | round_bits(abs(value), 7, -126, 127)


def exact_f16(value, neg):
    sign = 0x8000 if neg else 0
    if value == 'nan':
        return sign | 0x7e00
    if value == 'inf':
        return sign | 0x7c00
    return sign | round_bits(abs(value), 10, -14, 15)


def bf16_to_f64(b):
    return struct.unpack('<f', struct.pack('<I', b << 16))[0]


def bits_of(arr):
    """Element bit patterns of a NumPy array as Python ints."""
    u = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[arr.dtype.itemsize]
    return [int(x) for x in arr.view(u)]


def source_values():
    """Per source dtype: a list of (bits, exact value or 'nan'/'inf', negative)."""
    f64 = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 0.9999999999, -0.9999999999, 1.5, 2.5, -2.5, 3.7, -3.7,
           127.5, 128.0, -128.5, -129.0, 255.9, 256.0, 300.7, -300.7, 32767.9, 32768.0, -32768.9,
           65504.0, 65519.999, 65520.0, 1e6 + 0.5, 2147483647.9, -2147483648.9, 2147483648.0,
           4e9, 2.0 ** 53 + 2, -1.5 * 2.0 ** 62, 2.0 ** 63 - 1024, -2.0 ** 63, 2.0 ** 63, 1e300,
           -1e300, 5e-324, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, 2.0 ** -25 + 2.0 ** -60,
           1.0 / 3, math.pi, 1 + 2.0 ** -11 + 2.0 ** -40, -(1 + 2.0 ** -11 + 2.0 ** -40),
           1 + 2.0 ** -8 + 2.0 ** -40, 2.0 ** -14 - 2.0 ** -26, 3.4028234663852886e38,
           3.4e38, 3.5e38, 3.4028235677973366e38, 1.2e-38, 1e-40, 1e-45, 2.0 ** -133,
           2.0 ** -134, math.inf, -math.inf, math.nan, -math.nan]
    out = {}
    arr = np.array(f64, np.float64)
    out['f64'] = arr
    with np.errstate(over='ignore'):
        f32 = np.unique(arr.astype(np.float32))  # NaNs are put back below
    f32 = np.concatenate([f32[~np.isnan(f32)], np.array([1 + 2.0 ** -11 + 2.0 ** -23,
                          16777216.0, 1 + 2.0 ** -8 + 2.0 ** -23, 2.0 ** -149, -2.0 ** -149,
                          -0.0], np.float32), np.array([math.nan, -math.nan], np.float32)])
    out['f32'] = f32
    f16 = np.array([0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3555, 0x3bff, 0x3c00,
                    0xbc00, 0x3c01, 0x3e00, 0x4100, 0xc100, 0x57f8, 0x5800, 0xd808, 0x5bff,
                    0x5c00, 0x5fff, 0x7800, 0x7bff, 0xfbff, 0xf800, 0x7c00, 0xfc00, 0x7e00,
                    0xfe00, 0x2e66, 0xb4cd], np.uint16).view(np.float16)
    out['f16'] = f16
    out['i8'] = np.array([0, 1, -1, 127, -128, 5, -77, 100], np.int8)
    out['i16'] = np.array([0, 1, -1, 32767, -32768, 255, 256, -129, 1000, -1000, 2049, 2051,
                           4097, -2051], np.int16)
    out['i32'] = np.array([0, 1, -1, 2 ** 31 - 1, -2 ** 31, 16777217, 16777219, -16777219,
                           65519, 65520, 65535, 70000, 255, 256, 128, -129, 123456789],
                          np.int32)
    out['i64'] = np.array([0, 1, -1, 2 ** 63 - 1, -2 ** 63, 2 ** 53 + 1, 2 ** 53 + 3,
                           2 ** 62 + 2 ** 38 + 1, -(2 ** 62 + 2 ** 38 + 1), 2 ** 62 + 2 ** 38,
                           2 ** 62 + 2 ** 54 + 1, 2 ** 40 + 2 ** 32 + 1, 2 ** 32 + 255,
                           -2 ** 31 - 1, 65520, 65519, 300, -300], np.int64)
    out['u8'] = np.array([0, 1, 127, 128, 200, 255], np.uint8)
    out['bool'] = np.array([False, True], np.bool_)
    table = {}
    for d, a in out.items():
        rows = []
        for bits, v in zip(bits_of(a), a):
            if d in FLOATS and math.isnan(float(v)):
                rows.append((bits, 'nan', bool(np.signbit(v))))
            elif d in FLOATS and math.isinf(float(v)):
                rows.append((bits, 'inf', bool(np.signbit(v))))
            elif d in FLOATS:
                rows.append((bits, Fraction(float(v)), bool(np.signbit(v))))
            else:
                rows.append((bits, Fraction(int(v)), int(v) < 0))
        table[d] = rows
    # bfloat16 sources: the f64 values rounded exactly, plus edge patterns
    bf = sorted({exact_bf16(v, neg) for _, v, neg in table['f64']} |
                {0x0001, 0x8001, 0x007f, 0x0080, 0x3f81, 0x4380, 0x4780, 0x7f7f, 0xff7f,
                 0x4f00, 0x5f00, 0xdf00, 0x5f80})
    table['bf16'] = []
    for b in bf:
        v = bf16_to_f64(b)
        if math.isnan(v):
            table['bf16'].append((b, 'nan', bool(b & 0x8000)))
        elif math.isinf(v):
            table['bf16'].append((b, 'inf', bool(b & 0x8000)))
        else:
            table['bf16'].append((b, Fraction(v), bool(b & 0x8000)))
    return table


def as_numpy(src, rows):
    """The source values as a NumPy array NumPy can cast (bf16 is exact in float64)."""
    if src == 'bf16':
        return np.array([bf16_to_f64(b) for b, _, _ in rows], np.float64)
    u = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[SIZE[src]]
    return np.array([b for b, _, _ in rows], u).view(NP[src])


def int_fits(value, dst):
    if value in ('nan', 'inf'):
        return False
    t = math.trunc(value)
    info = np.iinfo(NP[dst])
    return int(info.min) <= t <= int(info.max)


def cast_groups(table):
    groups = []
    for src in NX:
        rows = table[src]
        for dst in NX:
            valid = [src not in FLOATS or dst in FLOATS or dst == 'bool' or int_fits(v, dst)
                     for _, v, _ in rows]
            if dst == 'bf16':
                out = [exact_bf16(v, neg) for _, v, neg in rows]
            else:
                with np.errstate(all='ignore'):
                    arr = as_numpy(src, rows)
                    out = bits_of(arr.astype(NP[dst]))
                if dst == 'f16':
                    check = [exact_f16(v, neg) for _, v, neg in rows]
                    for o, c, (_, v, _) in zip(out, check, rows):
                        if v != 'nan' and o != c:
                            sys.exit('NumPy float16 %#06x differs from exact rounding %#06x'
                                     % (o, c))
            mask = 0
            for i, ok in enumerate(valid):
                mask |= int(ok) << i
            groups.append((src, dst, out, mask))
    return groups


def slice_cases():
    big = 2 ** 63 - 1
    ends = [-big - 1, -9, -5, -2, -1, 0, 1, 3, 5, 6, big]
    steps = [1, 2, 4, -1, -3, big, -big - 1]
    cases = []
    for n in (0, 1, 5):
        for start in ends:
            for stop in ends:
                for step in steps:
                    r = range(n)[slice(start, stop, step)]
                    cases.append((n, start, stop, step, len(r), r[0] if len(r) else 0))
    return cases


def factorizations(n, ndim, rng):
    if n == 0:
        shape = [rng.randint(1, 3) for _ in range(ndim)]
        shape[rng.randrange(ndim)] = 0
        return shape
    shape = []
    for _ in range(ndim - 1):
        divs = [d for d in range(1, n + 1) if n % d == 0]
        d = rng.choice(divs)
        shape.append(d)
        n //= d
    shape.append(n)
    rng.shuffle(shape)
    return shape


def apply_chain(shape, ops):
    """Applies ops to arange(prod(shape)); returns per-op copy flags and the final array."""
    a = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    copies = []
    for op in ops:
        if op[0] == 'permute':
            a = a.transpose(op[1])
            copies.append(0)
        elif op[0] == 'slice':
            _, axis, start, stop, step = op
            idx = [slice(None)] * a.ndim
            idx[axis] = slice(start, stop, step)
            a = a[tuple(idx)]
            copies.append(0)
        else:
            b = a.view()
            try:
                b.shape = op[1]
                copies.append(0)
            except AttributeError:
                b = a.reshape(op[1])
                copies.append(1)
            a = b
    return copies, a


HAND_CHAINS = [
    ([2, 3, 4], [('reshape', [6, 4])]),
    ([2, 3, 4], [('reshape', [4, -1])]),
    ([2, 3, 4], [('permute', [2, 0, 1])]),
    ([2, 3, 4], [('permute', [2, 0, 1]), ('reshape', [24])]),
    ([2, 3, 4], [('permute', [1, 0, 2]), ('reshape', [6, 4])]),
    ([2, 3, 4], [('permute', [0, 2, 1]), ('reshape', [2, 12])]),
    ([2, 3, 4], [('permute', [0, 2, 1]), ('reshape', [2, 4, 3, 1])]),
    ([6], [('slice', 0, None, None, -1), ('reshape', [2, 3])]),
    ([6], [('slice', 0, None, None, -2), ('reshape', [3, 1])]),
    ([4, 5], [('slice', 1, 1, 4, 1), ('reshape', [12])]),
    ([4, 5], [('slice', 1, 1, 4, 1), ('reshape', [2, 2, 3])]),
    ([4, 5], [('slice', 0, 1, 3, 1), ('reshape', [10])]),
    ([4, 5], [('slice', 0, None, None, 2), ('reshape', [10])]),
    ([4, 5], [('slice', 0, None, None, -1), ('slice', 1, None, None, -2),
              ('permute', [1, 0])]),
    ([3, 1, 4], [('permute', [1, 2, 0]), ('reshape', [4, 3])]),
    ([3, 1, 4], [('reshape', [3, 4, 1, 1]), ('permute', [3, 1, 0, 2])]),
    ([1, 1], [('reshape', [])]),
    ([], [('reshape', [1, 1, 1])]),
    ([2, 0, 3], [('reshape', [0, 5])]),
    ([2, 0, 3], [('permute', [2, 1, 0]), ('reshape', [-1])]),
    ([5, 4], [('slice', 0, 3, 3, 1), ('reshape', [4, 0])]),
    ([5, 4], [('slice', 0, 9, -9, 1)]),
    ([5, 4], [('slice', 1, -1, -5, -1), ('slice', 0, 4, 0, -2)]),
    ([2, 2, 2, 2, 2, 2, 2, 2], [('permute', [7, 6, 5, 4, 3, 2, 1, 0]),
                                ('reshape', [16, 16])]),
    ([2, 2, 2, 2, 2, 2, 2], [('slice', 3, None, None, -1), ('reshape', [8, 16])]),
]


def random_chains(rng, count):
    chains = []
    while len(chains) < count:
        ndim = rng.randint(1, 4)
        shape = [rng.randint(1, 5) for _ in range(ndim)]
        if np.prod(shape) > 256:  # keeps element indices distinct in one byte
            continue
        ops = []
        cur = np.empty(shape)
        for _ in range(rng.randint(1, 4)):
            kind = rng.choice(['permute', 'slice', 'slice', 'reshape', 'reshape'])
            if cur.ndim == 0:
                kind = 'reshape'
            if kind == 'permute':
                perm = list(range(cur.ndim))
                rng.shuffle(perm)
                op = ('permute', perm)
            elif kind == 'slice':
                axis = rng.randrange(cur.ndim)
                n = cur.shape[axis]
                ends = list(range(-n - 1, n + 2))
                start = None if rng.random() < 0.4 else rng.choice(ends)
                stop = None if rng.random() < 0.4 else rng.choice(ends)
                op = ('slice', axis, start, stop,
                      rng.choice([None, 1, 2, 3, -1, -2]))
            else:
                nd = rng.randint(0, 4) if cur.size == 1 else rng.randint(1, 4)
                new = factorizations(cur.size, nd, rng) if nd else []
                if new and rng.random() < 0.3 and cur.size > 0:  # -1 is ambiguous at size 0
                    new[rng.randrange(len(new))] = -1
                op = ('reshape', new)
            ops.append(op)
            _, cur = apply_chain(shape, ops)
        chains.append((shape, ops))
    return chains


def c_int(v):
    if v == -2 ** 63:
        return 'INT64_MIN'
    if v == 2 ** 63 - 1:
        return 'INT64_MAX'
    return '%d' % v


def emit(f, table, groups, slices, chains):
    w = f.write
    w('/* Generated by tools/gen-tensor-fixtures.py with NumPy %s; do not edit. */\n'
      % np.__version__)
    w('#include <stdint.h>\n\n#include "nitrix.h"\n\n')
    w('#define FX_NUMPY_VERSION "%s"\n\n' % np.__version__)
    for d in NX:
        w('static const uint64_t fx_src_%s[] = {\n' % d)
        vals = ['UINT64_C(0x%x)' % b for b, _, _ in table[d]]
        for i in range(0, len(vals), 4):
            w('    ' + ', '.join(vals[i:i + 4]) + ',\n')
        w('};\n')
    w('\ntypedef struct fx_cast {\n    nx_dtype src, dst;\n    int n;\n'
      '    const uint64_t *in;\n    uint64_t valid; /* bit i: NumPy defines element i */\n'
      '    uint64_t out[64];\n} fx_cast;\n\n')
    w('static const fx_cast fx_casts[] = {\n')
    for src, dst, out, mask in groups:
        assert len(out) <= 64
        w('    {%s, %s, %d, fx_src_%s, UINT64_C(0x%x),\n     {' %
          (ENUM[src], ENUM[dst], len(out), src, mask))
        w(', '.join('0x%x' % o for o in out))
        w('}},\n')
    w('};\n\n')
    w('/* Python range(n)[start:stop:step]: count and first index. */\n')
    w('typedef struct fx_slice {\n    int64_t n, start, stop, step, count, first;\n} fx_slice;\n\n')
    w('static const fx_slice fx_slices[] = {\n')
    for c in slices:
        w('    {%s},\n' % ', '.join(c_int(v) for v in c))
    w('};\n\n')
    w('enum { FX_PERMUTE, FX_SLICE, FX_RESHAPE };\n')
    w('/* slice: a = {axis, start, stop, step} (None as INT64_MIN/INT64_MAX by step sign);\n'
      ' * permute/reshape: a[0..n-1]. copy: NumPy needs a copy for this reshape. */\n')
    w('typedef struct fx_op {\n    int kind, n;\n    int64_t a[8];\n    int copy;\n} fx_op;\n\n')
    w('typedef struct fx_chain {\n    int ndim;\n    int64_t shape[8];\n    int nops;\n'
      '    fx_op ops[4];\n    int out_ndim;\n    int64_t out_shape[8];\n    int64_t numel;\n'
      '    const int16_t *values; /* final elements in C order, as indices into the base */\n'
      '} fx_chain;\n\n')
    for i, (shape, ops) in enumerate(chains):
        _, a = apply_chain(shape, ops)
        vals = [int(v) for v in a.ravel()]
        w('static const int16_t fx_chain_%d[] = {%s};\n' % (i, ', '.join(map(str, vals + [0]))))
    w('\nstatic const fx_chain fx_chains[] = {\n')
    for i, (shape, ops) in enumerate(chains):
        copies, a = apply_chain(shape, ops)
        opstr = []
        for op, cp in zip(ops, copies):
            if op[0] == 'slice':
                _, axis, start, stop, step = op
                step = 1 if step is None else step
                if start is None:
                    start = 0 if step > 0 else 2 ** 63 - 1
                if stop is None:
                    stop = 2 ** 63 - 1 if step > 0 else -2 ** 63
                args = [axis, start, stop, step]
                opstr.append('{FX_SLICE, 4, {%s}, 0}' % ', '.join(c_int(v) for v in args))
            else:
                kind = 'FX_PERMUTE' if op[0] == 'permute' else 'FX_RESHAPE'
                args = list(op[1])
                opstr.append('{%s, %d, {%s}, %d}' % (kind, len(args),
                             ', '.join(map(str, args)) or '0', cp))
        w('    {%d, {%s}, %d, {%s}, %d, {%s}, %d, fx_chain_%d},\n' % (
            len(shape), ', '.join(map(str, shape)) or '0', len(ops), ', '.join(opstr),
            a.ndim, ', '.join(map(str, a.shape)) or '0', a.size, i))
    w('};\n')


def main():
    rng = random.Random(20261129)
    table = source_values()
    groups = cast_groups(table)
    chains = HAND_CHAINS + random_chains(rng, 120)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, 'w') as f:
        emit(f, table, groups, slice_cases(), chains)
    print('wrote %s: %d cast groups, %d slices, %d view chains'
          % (os.path.relpath(OUT), len(groups), len(slice_cases()), len(chains)))


if __name__ == '__main__':
    main()
