#!/usr/bin/python3
"""Fixtures for tests/ir-values: expected values of every graph IR primitive, from NumPy/scipy.

Regenerate with `tools/gen-ir-fixtures.py` from the repository root (numpy 1.24, scipy 1.10; the
versions used are written into the manifest header). The output is deterministic.

Why raw binaries and not .npy: the test must not depend on the runtime's .npy reader (it is tested
separately, and a reader bug must not look like an IR bug), so every array is a raw little-endian
C-order file whose dtype and shape are stated in the manifest.

Layout (tests/data/ir/):
  manifest.txt    one block per case, read by tests/ir-values/test-ir-values.c
  arrays.bin      every array back to back (8-byte aligned): inputs in their own dtype (bf16 as
                  its 16-bit patterns); expected outputs widened (float, f16 and bf16 -> f64,
                  integer -> i64, bool -> u8 0/1) so that an f32 result is compared with the
                  float64 oracle evaluated on the f32 inputs

Manifest grammar (whitespace-separated tokens, '#' starts a comment line):
  case NAME
  op OP                            builder family (see the C test's op table)
  attr KEY V1 V2 ...               zero or more values (ints, a word or a double)
  in DTYPE SHAPE OFFSET            SHAPE is "2,3,4", or "-" for 0-d; OFFSET: bytes into arrays.bin
  view slice AXIS START COUNT STEP applies to the last `in`: element i is base[START + i*STEP]
  view perm P0 P1 ...              applies to the last `in`: axis i of the view is axis Pi
  view expand AXIS COUNT           applies to the last `in`: an axis of extent 1 repeated COUNT
                                   times with stride 0 (a broadcast view as a program input)
  out DTYPE SHAPE OFFSET           DTYPE is the graph output's dtype; the data is widened
  tol RTOL ATOL                    |got - want| <= ATOL + RTOL*|want|; NaN == NaN; 0 0 is exact
  end

Tolerances follow one rule set, never tuned to an implementation's output:
  exact     movement, indexing, integer, bool, comparisons, max/min/arg*, sort, casts
  f64       rtol 1e-13 for elementwise math; f32 rtol 1e-6 (a few f32 ulps)
  sums      plus atol = 4 * n * eps * max(sum |terms|), the worst-case bound of any summation order
            over n terms (eps of the result dtype), since the interpreter may fold in f32 or f64
  exact     also where the header pins the arithmetic: the canonical fold order (fold_order_*),
            wrapping integers, saturating casts, and the random graphs (dag_*) built only from
            operations that NumPy and C compute bit-identically

Case families: one per primitive and dtype, edge cases (non-finite values, ties, signed zeros,
views with negative, non-unit and zero strides, 0-d and zero-size arrays), compositions with
scipy.ndimage oracles (compose_*), chains of movement ops (chain_*), hash-consing hazards
(hashcons_*), the header's stated conventions, mid-size inputs (scale_*), and random DAGs
(dag_*: attrs n0, n1, ... are nodes "OP OPERANDS PARAMS", operands iK / nK; attr outs).
"""
import os
import sys

import numpy as np
import scipy
import scipy.ndimage as ndi
import scipy.signal
import scipy.special as sps

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, 'tests', 'data', 'ir')

# bf16 has no numpy dtype: its arrays hold the raw 16-bit patterns (see bf16_bits)
NP_DTYPE = {'f32': np.float32, 'f64': np.float64, 'i8': np.int8, 'i16': np.int16,
            'i32': np.int32, 'i64': np.int64, 'u8': np.uint8, 'bool': np.bool_,
            'f16': np.float16, 'bf16': np.uint16}
FLOATS = ('f32', 'f64')
EPS = {'f32': float(np.finfo(np.float32).eps), 'f64': float(np.finfo(np.float64).eps)}
RTOL = {'f32': 1e-6, 'f64': 1e-13}
EXACT = (0.0, 0.0)

rng = np.random.default_rng(20261129)
cases = []
names = set()


def bf16_value(bits):
    """float64 values of bf16 bit patterns."""
    b = np.atleast_1d(np.asarray(bits, dtype=np.uint32) << np.uint32(16)).astype(np.uint32)
    shape = np.shape(bits)
    return b.view(np.float32).astype(np.float64).reshape(shape)


def bf16_bits(x):
    """x (float64) correctly rounded to bf16 (nearest, ties to even), as bit patterns: the
    nearest of all 65536 patterns, found by search, not by bit tricks."""
    x = np.asarray(x, dtype=np.float64)
    pos = np.arange(0, 0x7f81, dtype=np.uint32)          # +0 .. +inf
    vals = bf16_value(pos)
    vals_for_dist = vals.copy()
    vals_for_dist[-1] = 2.0 ** 128                       # inf sits one ulp above the largest
    out = np.zeros(x.shape, dtype=np.uint16)
    for idx in np.ndindex(x.shape):
        v = x[idx]
        if np.isnan(v):
            out[idx] = 0x7fc0
            continue
        a = abs(v)
        j = int(np.searchsorted(vals_for_dist, a))
        if j == 0:
            k = 0
        elif j >= len(vals_for_dist):
            k = len(vals_for_dist) - 1
        else:
            lo, hi = vals_for_dist[j - 1], vals_for_dist[j]
            if a - lo < hi - a:
                k = j - 1
            elif a - lo > hi - a:
                k = j
            else:
                k = j - 1 if (pos[j - 1] & 1) == 0 else j
        out[idx] = pos[k] | (0x8000 if np.signbit(v) else 0)
    return out


def shape_str(shape):
    return ','.join(str(int(s)) for s in shape) if len(shape) else '-'


def widen(dt, arr):
    arr = np.asarray(arr)
    if dt == 'bf16':
        return bf16_value(arr)
    if dt in FLOATS or dt == 'f16':
        return arr.astype(np.float64)
    if dt == 'bool':
        return arr.astype(np.uint8)
    return arr.astype(np.int64)


class Case:
    def __init__(self, name, op):
        assert name not in names, name
        names.add(name)
        self.name, self.op = name, op
        self.attrs, self.ins, self.outs = [], [], []
        self.tol = EXACT

    def attr(self, key, *vals):
        self.attrs.append((key, vals))
        return self

    def inp(self, dt, base, views=()):
        """base: the array stored in the file; views: ('slice', axis, start, count, step) or
        ('perm', p...). Returns the viewed value the op sees."""
        with np.errstate(over='ignore'):  # f32 specials such as 1e300 -> inf are deliberate
            base = np.asarray(base, dtype=NP_DTYPE[dt])
        val = base
        for v in views:
            if v[0] == 'slice':
                _, axis, start, count, step = v
                idx = start + np.arange(count) * step
                assert count == 0 or (0 <= idx.min() and idx.max() < val.shape[axis])
                val = np.take(val, idx, axis=axis)
            elif v[0] == 'expand':
                _, axis, count = v
                assert val.shape[axis] == 1
                shp = list(val.shape)
                shp[axis] = count
                val = np.broadcast_to(val, shp)
            else:
                val = np.transpose(val, v[1:])
        self.ins.append((dt, base, list(views)))
        return val

    def out(self, dt, val):
        val = np.asarray(val)
        self.outs.append((dt, val))
        return self

    def tolerance(self, rtol, atol=0.0):
        self.tol = (float(rtol), float(atol))
        return self


def add(c):
    cases.append(c)
    return c


def fmt_val(v):
    if isinstance(v, (float, np.floating)):
        return repr(float(v))
    return str(v)


def write_all():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith('.bin') or f == 'manifest.txt':
            os.remove(os.path.join(OUT, f))
    lines = ['# Generated by tools/gen-ir-fixtures.py with numpy %s, scipy %s. Do not edit.'
             % (np.__version__, scipy.__version__),
             '# Grammar and tolerance rules: see the generator\'s docstring.']
    blob = bytearray()

    def put(arr):
        arr = np.ascontiguousarray(arr)
        off = len(blob)
        blob.extend(arr.astype(arr.dtype.newbyteorder('<')).tobytes())
        blob.extend(b'\0' * ((-len(blob)) % 8))
        return off

    for c in cases:
        lines.append('case ' + c.name)
        lines.append('op ' + c.op)
        for key, vals in c.attrs:
            lines.append(' '.join(['attr', key] + [fmt_val(v) for v in vals]))
        for dt, base, views in c.ins:
            lines.append('in %s %s %d' % (dt, shape_str(base.shape), put(base)))
            for v in views:
                lines.append('view ' + ' '.join(str(x) for x in v))
        for dt, val in c.outs:
            lines.append('out %s %s %d' % (dt, shape_str(val.shape), put(widen(dt, val))))
        lines.append('tol %r %r' % c.tol)
        lines.append('end')
    with open(os.path.join(OUT, 'arrays.bin'), 'wb') as f:
        f.write(bytes(blob))
    with open(os.path.join(OUT, 'manifest.txt'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print('%d cases, %d bytes of arrays' % (len(cases), len(blob)))


def ftol(dt):
    return (RTOL[dt], 0.0)


def sum_atol(dt, n, abs_sums):
    """Worst-case rounding bound of an n-term float summation whose |terms| add to abs_sums."""
    m = float(np.max(abs_sums)) if np.size(abs_sums) else 0.0
    return 4.0 * max(n, 1) * EPS[dt] * m


def uni(lo, hi, shape):
    return rng.uniform(lo, hi, size=shape)


# ------------------------------------------------------------------------------------------------
# Elementwise unary
# ------------------------------------------------------------------------------------------------

INF, NAN = np.inf, np.nan

# op -> (oracle in float64, interior sampler, special values)
UNARY = {
    'neg': (np.negative, (-5, 5), [0.0, -0.0, INF, -INF, NAN]),
    'abs': (np.abs, (-5, 5), [-0.0, -INF, NAN]),
    'exp': (np.exp, (-5, 5), [0.0, -INF, INF, NAN, -80.0]),
    'log': (np.log, (0.01, 10), [0.0, -1.0, INF, NAN, 1.0]),
    'log1p': (np.log1p, (-0.9, 5), [1e-10, -1e-12, -1.0, INF, NAN]),
    'expm1': (np.expm1, (-3, 3), [1e-10, -1e-12, -INF, NAN]),
    'sqrt': (np.sqrt, (0, 10), [0.0, -1.0, INF, NAN]),
    'rsqrt': (lambda x: 1.0 / np.sqrt(x), (0.01, 10), [0.0, INF, NAN, 4.0]),
    'sin': (np.sin, (-10, 10), [0.0, NAN, INF, np.pi]),
    'cos': (np.cos, (-10, 10), [0.0, NAN, np.pi / 2]),
    'tanh': (np.tanh, (-5, 5), [INF, -INF, NAN, 1e-9]),
    'erf': (sps.erf, (-3, 3), [INF, -INF, NAN, 1e-9]),
    'floor': (np.floor, (-5, 5), [-0.5, 2.0, -2.0, INF, NAN]),
    'ceil': (np.ceil, (-5, 5), [-0.5, 2.0, -2.0, -INF, NAN]),
    # 0.49999999999999994 and 2^52+1 defeat floor(x + 0.5)
    'round': (np.round, (-5, 5), [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999, 3.5000001, NAN,
                                  0.49999999999999994, -0.49999999999999994, 4503599627370497.0,
                                  -4503599627370497.0, 1e300, INF]),
    'sign': (np.sign, (-5, 5), [0.0, -3.0, INF, -INF, NAN]),
}


# results representable exactly in the input dtype: no rounding anywhere
EXACT_UNARY = ('neg', 'abs', 'floor', 'ceil', 'round', 'sign')


def gen_unary():
    for op, (fn, (lo, hi), special) in UNARY.items():
        for dt in FLOATS:
            c = Case('%s_%s' % (op, dt), op)
            base = np.concatenate([uni(lo, hi, 12), special])
            base = np.concatenate([base, uni(lo, hi, (-len(base)) % 4)]).reshape(-1, 4)
            x = c.inp(dt, base).astype(np.float64)
            with np.errstate(all='ignore'):
                y = fn(x)
            add(c.out(dt, y).tolerance(*(EXACT if op in EXACT_UNARY else ftol(dt))))
        # 0-d and a reversed, strided view (negative and non-unit strides in the input tensor)
        c = Case('%s_f64_0d' % op, op)
        x = c.inp('f64', np.array(uni(lo, hi, ()))).astype(np.float64)
        add(c.out('f64', fn(x)).tolerance(*(EXACT if op in EXACT_UNARY else ftol('f64'))))
        c = Case('%s_f64_view' % op, op)
        x = c.inp('f64', uni(lo, hi, (5, 6)), [('slice', 0, 4, 3, -2), ('slice', 1, 1, 3, 2),
                                               ('perm', 1, 0)])
        add(c.out('f64', fn(x)).tolerance(*(EXACT if op in EXACT_UNARY else ftol('f64'))))

    ints = np.array([[-7, -1, 0, 1], [2, 5, -100, 100]])
    for op, fn in (('neg', np.negative), ('abs', np.abs), ('sign', np.sign)):
        for dt in ('i8', 'i16', 'i32', 'i64'):
            c = Case('%s_%s' % (op, dt), op)
            x = c.inp(dt, ints)
            add(c.out(dt, fn(x)))

    c = Case('isnan_f64', 'isnan')
    x = c.inp('f64', [[1.0, NAN, INF], [-INF, 0.0, -NAN]])
    add(c.out('bool', np.isnan(x)))
    c = Case('isnan_f32', 'isnan')
    x = c.inp('f32', [NAN, 2.0, -INF, NAN])
    add(c.out('bool', np.isnan(x)))
    c = Case('not_bool', 'not')
    x = c.inp('bool', [[True, False, True], [False, False, True]])
    add(c.out('bool', np.logical_not(x)))
    c = Case('not_bool_view', 'not')
    x = c.inp('bool', [True, False, False, True, True], [('slice', 0, 4, 3, -2)])
    add(c.out('bool', np.logical_not(x)))


# ------------------------------------------------------------------------------------------------
# Elementwise binary
# ------------------------------------------------------------------------------------------------

BCAST = [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((2, 3, 4), (4,)), ((), (2, 3)), ((1,), (5,)),
         ((2, 1, 3), (4, 1))]


def gen_binary_float(op, fn, sa, sb, specials=None, tolk=None):
    """tolk: output dtype for comparisons (exact); minimum/maximum are exact too."""
    exact = tolk is not None or op in ('minimum', 'maximum')
    for dt in FLOATS:
        for k, (shp_a, shp_b) in enumerate(BCAST):
            if dt == 'f32' and k not in (0, 1):
                continue
            c = Case('%s_%s_b%d' % (op, dt, k), op)
            a = c.inp(dt, sa(shp_a)).astype(np.float64)
            b = c.inp(dt, sb(shp_b)).astype(np.float64)
            with np.errstate(all='ignore'):
                y = fn(a, b)
            add(c.out(tolk or dt, y).tolerance(*(EXACT if exact else ftol(dt))))
        if specials is not None:
            c = Case('%s_%s_special' % (op, dt), op)
            a = c.inp(dt, specials[0]).astype(np.float64)
            b = c.inp(dt, specials[1]).astype(np.float64)
            with np.errstate(all='ignore'):
                y = fn(a, b)
            add(c.out(tolk or dt, y).tolerance(*(EXACT if exact else ftol(dt))))
    # strided / reversed operand views
    c = Case('%s_f64_views' % op, op)
    a = c.inp('f64', sa((4, 6)), [('slice', 1, 5, 3, -2), ('perm', 1, 0)]).astype(np.float64)
    b = c.inp('f64', sb((3, 8)), [('slice', 0, 2, 3, -1), ('slice', 1, 0, 4, 2)])
    b = b.astype(np.float64)
    with np.errstate(all='ignore'):
        y = fn(a, b)
    add(c.out(tolk or 'f64', y).tolerance(*(EXACT if exact else ftol('f64'))))


def gen_binary():
    sym = lambda s: uni(-3, 3, s)
    pos = lambda s: uni(0.2, 3, s)
    nz = lambda s: np.where(rng.random(s) < 0.5, -1, 1) * uni(0.5, 3, s)
    sp_a = [0.0, -0.0, 1.0, NAN, INF, -INF, 2.0, -3.0]
    sp_b = [-0.0, 0.0, NAN, 1.0, INF, INF, -INF, 0.5]
    gen_binary_float('add', np.add, sym, sym, (sp_a, sp_b))
    gen_binary_float('sub', np.subtract, sym, sym, (sp_a, sp_b))
    gen_binary_float('mul', np.multiply, sym, sym, (sp_a, sp_b))
    gen_binary_float('div', np.divide, sym, nz, (sp_a, sp_b))
    gen_binary_float('pow', np.power, pos, sym,
                     ([0.0, 0.0, 2.0, -2.0, -2.0, 1.0, NAN, 4.0, -8.0, INF, 0.0, -0.0, -INF, -INF],
                      [0.0, 2.0, -1.0, 3.0, 2.0, NAN, 0.0, 0.5, 1.0 / 3.0, -1.0, -1.0, -1.0, 3.0,
                       2.0]))
    gen_binary_float('minimum', np.minimum, sym, sym,
                     ([NAN, 1.0, NAN, -INF, 2.0, 0.0], [1.0, NAN, NAN, 3.0, INF, -0.0]))
    gen_binary_float('maximum', np.maximum, sym, sym,
                     ([NAN, 1.0, NAN, -INF, 2.0, 0.0], [1.0, NAN, NAN, 3.0, INF, -0.0]))
    gen_binary_float('atan2', np.arctan2, sym, sym,
                     ([0.0, 0.0, -0.0, 1.0, -1.0, INF, NAN, 0.0],
                      [1.0, -1.0, -1.0, 0.0, 0.0, INF, 1.0, 0.0]))
    gen_binary_float('mod', np.mod, sym, nz,
                     ([7.5, -7.5, 7.5, -7.5, 1.0, 0.0, -0.0, NAN, 5.0, INF, -1e-20, 1e-20],
                      [2.0, 2.0, -2.0, -2.0, 0.0, 3.0, 3.0, 1.0, INF, 2.0, 1.0, -1.0]))
    cmp_a = [1.0, NAN, 2.0, -INF, 0.0, 3.0, NAN, INF]
    cmp_b = [1.0, 1.0, NAN, -INF, -0.0, 2.0, NAN, 5.0]
    for op, fn in (('eq', np.equal), ('ne', np.not_equal), ('lt', np.less),
                   ('le', np.less_equal), ('gt', np.greater), ('ge', np.greater_equal)):
        # integer-valued floats so that equality is hit often
        ival = lambda s: rng.integers(-2, 3, s).astype(np.float64)
        gen_binary_float(op, fn, ival, ival, (cmp_a, cmp_b), tolk='bool')
        for dt in ('i32', 'i64', 'u8'):
            c = Case('%s_%s' % (op, dt), op)
            lo = 0 if dt == 'u8' else -3
            a = c.inp(dt, rng.integers(lo, 4, (3, 4)))
            b = c.inp(dt, rng.integers(lo, 4, (1, 4)))
            add(c.out('bool', fn(a, b)))
    for op in ('eq', 'ne'):
        c = Case('%s_bool' % op, op)
        a = c.inp('bool', [[True, False], [True, False]])
        b = c.inp('bool', [True, True])
        add(c.out('bool', (np.equal if op == 'eq' else np.not_equal)(a, b)))
    for op, fn in (('and', np.logical_and), ('or', np.logical_or)):
        c = Case('%s_bool' % op, op)
        a = c.inp('bool', [[True], [False]])
        b = c.inp('bool', [True, False, True])
        add(c.out('bool', fn(a, b)))
        c = Case('%s_bool_same' % op, op)
        a = c.inp('bool', [True, True, False, False])
        b = c.inp('bool', [True, False, True, False])
        add(c.out('bool', fn(a, b)))

    # integers: exact, values chosen so nothing overflows
    int_ops = [('add', np.add), ('sub', np.subtract), ('mul', np.multiply),
               ('minimum', np.minimum), ('maximum', np.maximum)]
    for op, fn in int_ops:
        for dt in ('i8', 'i16', 'i32', 'i64', 'u8'):
            c = Case('%s_%s' % (op, dt), op)
            lo = 0 if dt == 'u8' else -9
            # u8 sub: a >= b so nothing wraps
            a = c.inp(dt, rng.integers(lo, 11, (3, 4)) + (10 if dt == 'u8' else 0))
            b = c.inp(dt, rng.integers(lo, 10, (1, 4)))
            add(c.out(dt, fn(a.astype(np.int64), b.astype(np.int64))))
    # integer division only where exact (the header leaves rounding of inexact quotients open)
    for dt in ('i32', 'i64'):
        c = Case('div_%s_exact' % dt, 'div')
        b = rng.integers(1, 6, (3, 4)) * np.where(rng.random((3, 4)) < 0.5, -1, 1)
        q = rng.integers(-7, 8, (3, 4))
        a = c.inp(dt, q * b)
        b = c.inp(dt, b)
        add(c.out(dt, q))
        # numpy.mod sign rule on integers (sign of the divisor)
        c = Case('mod_%s' % dt, 'mod')
        a = c.inp(dt, [[7, -7, 7, -7, 0, 6], [13, -13, 1, -1, 5, -6]])
        b = c.inp(dt, [[2, 2, -2, -2, 3, 3], [5, 5, -5, -5, 1, -3]])
        add(c.out(dt, np.mod(a, b)))
        c = Case('pow_%s' % dt, 'pow')
        a = c.inp(dt, [[2, -3, 0, 1], [5, -2, 7, -1]])
        b = c.inp(dt, [[10, 3, 0, 5], [0, 4, 2, 7]])
        add(c.out(dt, np.power(a.astype(np.int64), b.astype(np.int64))))


def gen_select_cast():
    for k, (sc, sa, sb) in enumerate([((3, 4), (3, 4), (3, 4)), ((3, 1), (1, 4), ()),
                                      ((), (2, 3), (2, 3)), ((2, 1, 4), (3, 1), (4,))]):
        for op in ('select', 'where'):
            if op == 'where' and k > 1:
                continue
            c = Case('%s_f64_b%d' % (op, k), op)
            cond = c.inp('bool', rng.random(sc) < 0.5)
            a = c.inp('f64', uni(-3, 3, sa))
            b = c.inp('f64', uni(-3, 3, sb))
            add(c.out('f64', np.where(cond, a, b)))
    c = Case('select_f64_nan', 'select')
    cond = c.inp('bool', [True, False, True, False])
    a = c.inp('f64', [NAN, NAN, 1.0, INF])
    b = c.inp('f64', [2.0, 3.0, NAN, -INF])
    add(c.out('f64', np.where(cond, a, b)))
    for dt in ('i32', 'f32', 'bool', 'u8'):
        c = Case('select_%s' % dt, 'select')
        cond = c.inp('bool', rng.random((2, 3)) < 0.5)
        if dt == 'bool':
            a = c.inp(dt, rng.random((2, 3)) < 0.5)
            b = c.inp(dt, rng.random((1, 3)) < 0.5)
        else:
            a = c.inp(dt, rng.integers(0, 50, (2, 3)))
            b = c.inp(dt, rng.integers(0, 50, (1, 3)))
        add(c.out(dt, np.where(cond, a, b)))

    f = np.array([[-2.7, -2.5, -0.9, -0.0, 0.0, 0.4], [0.5, 1.0, 1.9, 2.5, 100.7, -100.7]])
    casts = [('f64', 'i32', f), ('f64', 'i64', f), ('f64', 'i16', f), ('f64', 'i8', f),
             ('f64', 'f32', np.array([0.1, 1.0 / 3.0, 1e-40, 3.4e38, -2.0 ** -149, 1.0 + 2.0 ** -24,
                                      1.0 + 3 * 2.0 ** -24, INF, -INF, NAN])),
             ('f32', 'f64', np.array([0.1, 1.0 / 3.0, 1e-40, INF, NAN])),
             ('f32', 'i32', f), ('i32', 'f64', np.array([-2147483648, -1, 0, 2147483647])),
             ('i64', 'f64', np.array([-(2 ** 53), 12345678901, 0, 2 ** 53])),
             ('i64', 'f32', np.array([16777217, -16777219, 3, 0])),
             ('i32', 'f32', np.array([16777217, 16777219, -5, 0])),
             ('i64', 'i32', np.array([-2147483648, -1, 0, 2147483647])),
             ('i32', 'i64', np.array([-2147483648, -1, 0, 2147483647])),
             ('i32', 'u8', np.array([0, 1, 200, 255])), ('u8', 'i32', np.array([0, 1, 200, 255])),
             ('u8', 'f64', np.array([0, 128, 255])), ('i8', 'i32', np.array([-128, -1, 0, 127])),
             ('f64', 'u8', np.array([0.0, 0.9, 1.5, 254.99, 255.0])),
             ('f64', 'bool', np.array([0.0, -0.0, 0.5, -3.0, INF, 1e-300])),
             ('f32', 'bool', np.array([0.0, 2.0, -0.0, 1e-30])),
             ('i32', 'bool', np.array([0, 1, -1, 7])), ('u8', 'bool', np.array([0, 1, 255])),
             ('bool', 'f64', np.array([True, False, True])),
             ('bool', 'i32', np.array([True, False, True])),
             ('bool', 'f32', np.array([False, True])),
             ('f64', 'f64', np.array([1.5, NAN, -INF])),
             ('i32', 'i32', np.array([1, -5]))]
    for src, dst, vals in casts:
        c = Case('cast_%s_%s' % (src, dst), 'cast')
        c.attr('dtype', dst)
        x = c.inp(src, vals)
        with np.errstate(all='ignore'):
            y = x.astype(NP_DTYPE[dst])
        add(c.out(dst, y))
    c = Case('cast_f64_i32_view', 'cast')
    c.attr('dtype', 'i32')
    x = c.inp('f64', uni(-50, 50, (4, 5)), [('perm', 1, 0), ('slice', 0, 4, 2, -3)])
    add(c.out('i32', x.astype(np.int32)))


# ------------------------------------------------------------------------------------------------
# Leaves
# ------------------------------------------------------------------------------------------------

def gen_leaves():
    for dt, shape, axis in (('f64', (3, 4), 0), ('f64', (3, 4), 1), ('i32', (2, 5), 1),
                            ('i64', (4,), 0), ('f32', (2, 1, 3), 2), ('u8', (3, 2), 0),
                            ('i64', (2, 3, 4), 1), ('f64', (1,), 0)):
        c = Case('iota_%s_%s_a%d' % (dt, 'x'.join(map(str, shape)), axis), 'iota')
        c.attr('dtype', dt).attr('shape', *shape).attr('axis', axis)
        idx = np.indices(shape)[axis]
        add(c.out(dt, idx.astype(NP_DTYPE[dt])))
    # bool iota: i_axis converted to bool (0 -> false, else true)
    c = Case('iota_bool', 'iota')
    c.attr('dtype', 'bool').attr('shape', 2, 3).attr('axis', 1)
    add(c.out('bool', np.indices((2, 3))[1].astype(bool)))

    # constants: the data comes in as the case's only array file, not as a graph input
    for dt, val in (('f64', uni(-3, 3, (2, 3))), ('f32', uni(-3, 3, (4,))),
                    ('i32', rng.integers(-100, 100, (2, 2))), ('bool', rng.random((3,)) < 0.5),
                    ('f64', np.array(2.5)), ('i64', np.array([2 ** 40 + 1, -3])),
                    ('u8', np.array([[0, 255]])), ('f64', np.array([NAN, INF, -0.0]))):
        tag = 'x'.join(str(n) for n in np.shape(val)) or '0d'
        c = Case('constant_%s_%s' % (dt, tag), 'constant')
        v = c.inp(dt, val)
        add(c.out(dt, v))
    for dt, value in (('f64', 2.5), ('f32', 0.1), ('i32', 7.0), ('i64', -3.0), ('bool', 2.0),
                      ('bool', 0.0), ('u8', 200.0), ('f64', -INF), ('f64', NAN)):
        c = Case('scalar_%s_%s' % (dt, repr(value).replace('.', 'p').replace('-', 'm')),
                 'scalar')
        c.attr('dtype', dt).attr('value', float(value))
        add(c.out(dt, np.array(value).astype(NP_DTYPE[dt])))
    # parameters are inputs with another flag: same values
    c = Case('parameter_f64', 'parameter_add')
    a = c.inp('f64', uni(-1, 1, (2, 3)))
    b = c.inp('f64', uni(-1, 1, (2, 3)))
    add(c.out('f64', a + b).tolerance(*ftol('f64')))


# ------------------------------------------------------------------------------------------------
# Movement
# ------------------------------------------------------------------------------------------------

def gen_movement():
    for k, (src, shp, views, dt) in enumerate([
            ((2, 3, 4), (6, 4), [], 'f64'), ((2, 3, 4), (-1,), [], 'f64'),
            ((2, 3, 4), (4, -1, 2), [], 'i32'), ((1, 1), (), [], 'f64'),
            ((), (1, 1, 1), [], 'f64'), ((6,), (2, 3), [], 'bool'),
            ((3, 4), (2, 6), [('perm', 1, 0)], 'f64'),
            ((5, 6), (3, 2), [('slice', 0, 4, 3, -1), ('slice', 1, 0, 2, 3)], 'f32'),
            ((2, 3, 4), (24,), [('perm', 2, 0, 1)], 'i64'), ((4,), (4, 1), [], 'u8')]):
        c = Case('reshape_%d_%s' % (k, dt), 'reshape')
        c.attr('shape', *shp)
        base = rng.integers(-50, 50, src) if dt not in FLOATS + ('bool',) else \
            (rng.random(src) < 0.5 if dt == 'bool' else uni(-3, 3, src))
        x = c.inp(dt, base, views)
        add(c.out(dt, x.reshape(shp)))

    for k, (src, perm, views, dt) in enumerate([
            ((2, 3, 4), (2, 0, 1), [], 'f64'), ((2, 3, 4), (0, 1, 2), [], 'f64'),
            ((3, 4), (1, 0), [('slice', 1, 3, 4, -1)], 'f64'), ((1, 5, 1), (2, 1, 0), [], 'i32'),
            ((2, 3, 4, 5), (3, 1, 0, 2), [], 'f32'), ((), (), [], 'f64'),
            ((4,), (0,), [], 'bool')]):
        c = Case('permute_%d_%s' % (k, dt), 'permute')
        c.attr('perm', *perm)
        base = rng.random(src) < 0.5 if dt == 'bool' else uni(-3, 3, src)
        x = c.inp(dt, base, views)
        add(c.out(dt, np.transpose(x, perm)))

    for k, (src, shp, views, dt) in enumerate([
            ((3, 1), (2, 3, 4), [], 'f64'), ((), (2, 2), [], 'f64'), ((1,), (5,), [], 'i32'),
            ((4,), (3, 4), [], 'f32'), ((2, 3), (2, 3), [], 'f64'),
            ((1, 3, 1), (2, 1, 3, 5), [], 'i64'),
            ((5,), (2, 3), [('slice', 0, 4, 3, -2)], 'f64'), ((2, 1), (2, 3), [], 'bool')]):
        c = Case('broadcast_%d_%s' % (k, dt), 'broadcast')
        c.attr('shape', *shp)
        base = rng.random(src) < 0.5 if dt == 'bool' else np.round(uni(-3, 3, src), 3)
        x = c.inp(dt, base, views)
        add(c.out(dt, np.broadcast_to(x, shp)))

    for k, (src, start, stop, step, dt) in enumerate([
            ((5, 6), (1, 0), (5, 6), (2, 3), 'f64'), ((7,), (6,), (7,), (1,), 'f64'),
            ((7,), (0,), (7,), None, 'i32'), ((4, 5, 6), (1, 2, 0), (3, 5, 6), (1, 2, 4), 'f32'),
            ((8,), (1,), (8,), (3,), 'f64'), ((3, 3), (0, 0), (3, 3), (5, 5), 'i64'),
            ((5,), (2,), (2,), (1,), 'f64'), ((4, 3), (0, 1), (4, 3), (2, 1), 'bool')]):
        c = Case('slice_%d_%s' % (k, dt), 'slice')
        c.attr('start', *start).attr('stop', *stop)
        if step is not None:
            c.attr('step', *step)
        base = rng.random(src) < 0.5 if dt == 'bool' else np.round(uni(-3, 3, src), 3)
        x = c.inp(dt, base)
        st = step or (1,) * len(src)
        sl = tuple(slice(a, b, s) for a, b, s in zip(start, stop, st))
        add(c.out(dt, x[sl]))

    gen_pad()

    for k, (src, axes, views, dt) in enumerate([
            ((5,), (0,), [], 'f64'), ((2, 3, 4), (0, 2), [], 'f64'), ((2, 3), (), [], 'f64'),
            ((3, 4), (1,), [('slice', 1, 3, 2, -2)], 'i32'), ((2, 3, 4), (2, 1, 0), [], 'f32'),
            ((1, 4), (0, 1), [], 'bool')]):
        c = Case('reverse_%d_%s' % (k, dt), 'reverse')
        c.attr('axes', *axes)
        base = rng.random(src) < 0.5 if dt == 'bool' else uni(-3, 3, src)
        x = c.inp(dt, base, views)
        add(c.out(dt, np.flip(x, axis=axes) if axes else x))

    for k, (shapes, axis, dt) in enumerate([
            ([(2, 1), (2, 3), (2, 2)], 1, 'f64'), ([(1, 3), (4, 3)], 0, 'f64'),
            ([(5,)], 0, 'f64'), ([(2, 2, 1), (2, 2, 3)], 2, 'i32'), ([(3,), (1,), (2,)], 0, 'bool'),
            ([(2, 3), (2, 3), (2, 3), (2, 3)], 0, 'f32'), ([(1, 2, 3), (1, 1, 3)], 1, 'i64')]):
        c = Case('concat_%d_%s' % (k, dt), 'concat')
        c.attr('axis', axis)
        xs = [c.inp(dt, rng.random(s) < 0.5 if dt == 'bool' else np.round(uni(-3, 3, s), 4))
              for s in shapes]
        add(c.out(dt, np.concatenate(xs, axis=axis)))
    c = Case('concat_views_f64', 'concat')
    c.attr('axis', 0)
    a = c.inp('f64', uni(-3, 3, (3, 4)), [('perm', 1, 0)])
    b = c.inp('f64', uni(-3, 3, (2, 3)), [('slice', 0, 1, 2, -1)])
    add(c.out('f64', np.concatenate([a, b], axis=0)))

    for k, (src, w, s, d, dt) in enumerate([
            ((10,), (3,), None, None, 'f64'), ((10,), (3,), (2,), (2,), 'f64'),
            ((6, 7), (2, 3), (2, 1), (1, 2), 'f64'),
            ((3, 4, 5), (1, 2, 2), (1, 1, 2), (1, 2, 1), 'f32'),
            ((5,), (5,), None, None, 'i32'), ((4, 4), (1, 1), (3, 1), None, 'f64'),
            ((9,), (2,), (4,), (3,), 'i64'), ((4, 3), (2, 2), None, (3, 2), 'bool')]):
        c = Case('window_%d_%s' % (k, dt), 'window')
        c.attr('window', *w)
        if s is not None:
            c.attr('stride', *s)
        if d is not None:
            c.attr('dilation', *d)
        base = rng.random(src) < 0.5 if dt == 'bool' else np.round(uni(-3, 3, src), 4)
        x = c.inp(dt, base)
        add(c.out(dt, window_oracle(x, w, s, d)))
    c = Case('window_view_f64', 'window')
    c.attr('window', 2, 2).attr('stride', 1, 2)
    x = c.inp('f64', uni(-3, 3, (5, 6)), [('perm', 1, 0), ('slice', 1, 4, 4, -1)])
    add(c.out('f64', window_oracle(x, (2, 2), (1, 2), None)))


def window_oracle(x, w, s, d):
    n = x.ndim
    s = s or (1,) * n
    d = d or (1,) * n
    span = tuple(di * (wi - 1) + 1 for wi, di in zip(w, d))
    v = np.lib.stride_tricks.sliding_window_view(x, span)
    sl = tuple(slice(None, None, si) for si in s) + tuple(slice(None, None, di) for di in d)
    v = v[sl]
    for i, (xi, wi, si, di) in enumerate(zip(x.shape, w, s, d)):
        assert v.shape[i] == (xi - di * (wi - 1) - 1) // si + 1
        assert v.shape[n + i] == wi
    return np.ascontiguousarray(v)


SCIPY_MODE = {'constant': 'constant', 'reflect': 'reflect', 'mirror': 'mirror',
              'nearest': 'nearest', 'wrap': 'wrap'}
NUMPY_MODE = {'reflect': 'symmetric', 'mirror': 'reflect', 'nearest': 'edge', 'wrap': 'wrap'}


def scipy_extension(n, lo, hi, mode):
    """Source index of each padded position along one axis, read from scipy.ndimage: correlating
    the index ramp 0..n-1 with a delta shifted by t gives the extended value at position t.
    -1 marks the constant's cval."""
    ramp = np.arange(n, dtype=np.float64)
    big = lo + hi + n + 1
    out = []
    for t in range(-lo, n + hi):
        w = np.zeros(2 * big + 1)
        w[big + t] = 1.0
        v = ndi.correlate1d(ramp, w, mode=SCIPY_MODE[mode], cval=-1.0)[0]
        out.append(int(v))
    return np.array(out)


def pad_oracle(x, lo, hi, mode, cval):
    y = x
    for ax in range(x.ndim):
        idx = scipy_extension(x.shape[ax], lo[ax], hi[ax], mode)
        taken = np.take(y, np.clip(idx, 0, None), axis=ax)
        if mode == 'constant':
            mask_shape = [1] * x.ndim
            mask_shape[ax] = len(idx)
            taken = np.where((idx < 0).reshape(mask_shape), np.asarray(cval).astype(x.dtype), taken)
        y = taken
    # cross-check against numpy.pad where numpy's meaning is unambiguous (pads within one period)
    if mode == 'constant':
        ref = np.pad(x, list(zip(lo, hi)), mode='constant', constant_values=cval)
        assert np.array_equal(ref, y, equal_nan=True)
    elif all(l < n and h < n for l, h, n in zip(lo, hi, x.shape)) and min(x.shape) > 1:
        ref = np.pad(x, list(zip(lo, hi)), mode=NUMPY_MODE[mode])
        assert np.array_equal(ref, y, equal_nan=True), mode
    return y


def gen_pad():
    geoms = [((4,), (2,), (3,)), ((3,), (7,), (8,)), ((1,), (3,), (2,)), ((2,), (5,), (6,)),
             ((3, 4), (1, 2), (2, 0)), ((3, 4), (0, 0), (0, 0)), ((2, 3, 2), (3, 1, 0), (0, 4, 5))]
    for mode in ('constant', 'reflect', 'mirror', 'nearest', 'wrap'):
        for k, (shp, lo, hi) in enumerate(geoms):
            for dt in ('f64', 'f32', 'i32') if k in (0, 1) else ('f64',):
                cval = 0.0 if k == 0 else (-1.5 if dt in FLOATS else 7.0)
                c = Case('pad_%s_%d_%s' % (mode, k, dt), 'pad')
                c.attr('lo', *lo).attr('hi', *hi).attr('mode', mode).attr('cval', cval)
                base = rng.integers(-9, 10, shp) if dt == 'i32' else np.round(uni(-3, 3, shp), 4)
                x = c.inp(dt, base)
                add(c.out(dt, pad_oracle(x, lo, hi, mode, cval)))
        c = Case('pad_%s_view' % mode, 'pad')
        c.attr('lo', 2, 1).attr('hi', 1, 3).attr('mode', mode).attr('cval', 2.0)
        x = c.inp('f64', uni(-3, 3, (4, 5)), [('slice', 1, 4, 3, -2), ('perm', 1, 0)])
        add(c.out('f64', pad_oracle(x, (2, 1), (1, 3), mode, 2.0)))
    c = Case('pad_constant_nan_cval', 'pad')
    c.attr('lo', 1).attr('hi', 1).attr('mode', 'constant').attr('cval', NAN)
    x = c.inp('f64', [1.0, 2.0])
    add(c.out('f64', pad_oracle(x, (1,), (1,), 'constant', NAN)))


# ------------------------------------------------------------------------------------------------
# Indexing
# ------------------------------------------------------------------------------------------------

def gen_indexing():
    for k, (xs, axis, idx, idt, dt) in enumerate([
            ((4, 5), 0, [-1, 2, 7, 3], 'i64', 'f64'), ((4, 5), 1, [[0, 4], [5, -3]], 'i32', 'f64'),
            ((6,), 0, [5, 0, 0, 2], 'i64', 'i32'), ((2, 3, 4), 2, [[3], [1], [100]], 'i32', 'f32'),
            ((3, 4), 0, 1, 'i64', 'f64'), ((3, 4), 1, [2, 2, 2, 2, 2], 'i64', 'bool'),
            ((2, 3), 1, [[-100, 100]], 'i64', 'i64')]):
        c = Case('gather_%d_%s' % (k, dt), 'gather')
        c.attr('axis', axis)
        base = rng.random(xs) < 0.5 if dt == 'bool' else np.round(uni(-3, 3, xs), 4) \
            if dt in FLOATS else rng.integers(-50, 50, xs)
        x = c.inp(dt, base)
        i = c.inp(idt, np.array(idx))
        add(c.out(dt, np.take(x, i, axis=axis, mode='clip')))
    c = Case('gather_view_f64', 'gather')
    c.attr('axis', 0)
    x = c.inp('f64', uni(-3, 3, (4, 3)), [('perm', 1, 0)])
    i = c.inp('i64', [5, 4, 3, 2, 1, 0], [('slice', 0, 5, 3, -2)])
    add(c.out('f64', np.take(x, i, axis=0, mode='clip')))

    for monoid in ('sum', 'max', 'min'):
        for k, (xs, axis, idx, idt, dt) in enumerate([
                ((5, 3), 0, [1, 3, 1, 9, -1, 1], 'i64', 'f64'),
                ((2, 4), 1, [[0, 3, 3], [4, 0, -2]], 'i32', 'f64'),
                ((6,), 0, [2, 2, 5, 0, 2, 6], 'i64', 'i32'),
                ((3, 2, 2), 1, [1, 0, 1], 'i32', 'f32'),
                ((3, 4), 1, 2, 'i64', 'f64')]):
            c = Case('scatter_%s_%d_%s' % (monoid, k, dt), 'scatter')
            c.attr('axis', axis).attr('monoid', monoid)
            xb = np.round(uni(-3, 3, xs), 4) if dt in FLOATS else rng.integers(-50, 50, xs)
            x = c.inp(dt, xb)
            i = c.inp(idt, np.array(idx))
            ushape = xs[:axis] + np.shape(idx) + xs[axis + 1:]
            ub = np.round(uni(-3, 3, ushape), 4) if dt in FLOATS else \
                rng.integers(-50, 50, ushape)
            u = c.inp(dt, ub)
            y = scatter_oracle(x, i, u, axis, monoid)
            if monoid == 'sum' and dt in FLOATS:
                cnt = np.bincount(np.ravel(i)[(np.ravel(i) >= 0) & (np.ravel(i) < xs[axis])],
                                  minlength=xs[axis]).max() + 1
                c.tolerance(RTOL[dt], sum_atol(dt, cnt, np.abs(x).max() + np.abs(u).max() * cnt))
            add(c.out(dt, y))
    c = Case('scatter_max_nan_f64', 'scatter')
    c.attr('axis', 0).attr('monoid', 'max')
    x = c.inp('f64', [1.0, 2.0, NAN, 4.0])
    i = c.inp('i64', [0, 1, 1, 3])
    u = c.inp('f64', [NAN, 5.0, -1.0, -INF])
    add(c.out('f64', scatter_oracle(x, i, u, 0, 'max')))
    c = Case('scatter_min_nan_f64', 'scatter')
    c.attr('axis', 0).attr('monoid', 'min')
    x = c.inp('f64', [1.0, 2.0, NAN, 4.0])
    i = c.inp('i64', [0, 1, 1, 3])
    u = c.inp('f64', [NAN, 5.0, -1.0, INF])
    add(c.out('f64', scatter_oracle(x, i, u, 0, 'min')))


def scatter_oracle(x, idx, upd, axis, monoid):
    y = np.array(x, copy=True)
    idx = np.asarray(idx)
    ufunc = {'sum': np.add, 'max': np.maximum, 'min': np.minimum}[monoid]
    # move the scatter axis first: y[j] op= u[idx-block j]
    ym = np.moveaxis(y, axis, 0)
    um = np.asarray(upd).reshape(x.shape[:axis] + (idx.size,) + x.shape[axis + 1:])
    um = np.moveaxis(um, axis, 0)
    flat = idx.ravel()
    keep = (flat >= 0) & (flat < x.shape[axis])
    ufunc.at(ym, flat[keep], um[keep])
    return y


# ------------------------------------------------------------------------------------------------
# Reductions, scans, sorting
# ------------------------------------------------------------------------------------------------

def red_oracle(x, axes, monoid, keepdims):
    axes = tuple(axes)
    if monoid == 'sum':
        return np.sum(x, axis=axes, keepdims=keepdims)
    if monoid == 'prod':
        return np.prod(x, axis=axes, keepdims=keepdims)
    if monoid == 'max':
        return np.max(x, axis=axes, keepdims=keepdims, initial=-np.inf) if x.dtype.kind == 'f' \
            else np.max(x, axis=axes, keepdims=keepdims)
    if monoid == 'min':
        return np.min(x, axis=axes, keepdims=keepdims, initial=np.inf) if x.dtype.kind == 'f' \
            else np.min(x, axis=axes, keepdims=keepdims)
    if monoid == 'logsumexp':
        with np.errstate(all='ignore'):
            return sps.logsumexp(x, axis=axes, keepdims=keepdims)
    if monoid == 'argmax':
        return np.argmax(x, axis=axes[0], keepdims=keepdims)
    if monoid == 'argmin':
        return np.argmin(x, axis=axes[0], keepdims=keepdims)
    raise ValueError(monoid)


def red_tol(dt, monoid, x, axes):
    if dt not in FLOATS or monoid in ('max', 'min', 'argmax', 'argmin'):
        return EXACT
    n = int(np.prod([x.shape[a] for a in axes])) if axes else 1
    with np.errstate(all='ignore'):
        if monoid == 'sum':
            return (RTOL[dt], sum_atol(dt, n, np.sum(np.abs(x), axis=tuple(axes))))
        if monoid == 'prod':
            return (max(RTOL[dt], 4 * n * EPS[dt]), 0.0)
        # logsumexp: log of a sum; its absolute error is the sum's relative error
        return (RTOL[dt], 4 * (n + 2) * EPS[dt])


def gen_reduce():
    monoids = ('sum', 'prod', 'max', 'min', 'logsumexp')
    geoms = [((3, 4), (1,), False), ((3, 4), (0,), True), ((2, 3, 4), (0, 2), False),
             ((2, 3, 4), (2, 0), True), ((2, 3), (0, 1), False), ((4, 1, 3), (1,), False),
             ((5,), (0,), True), ((2, 3), (), False), ((2, 3, 2, 2), (1, 3), False)]
    for monoid in monoids:
        for k, (shp, axes, keep) in enumerate(geoms):
            for dt in FLOATS if k < 3 else ('f64',):
                c = Case('reduce_%s_%d_%s' % (monoid, k, dt), 'reduce')
                c.attr('axes', *axes).attr('monoid', monoid).attr('keepdims', int(keep))
                lo, hi = (0.5, 1.5) if monoid == 'prod' else (-3, 3)
                x = c.inp(dt, uni(lo, hi, shp)).astype(np.float64)
                c.tolerance(*red_tol(dt, monoid, x, axes))
                add(c.out(dt, red_oracle(x, axes, monoid, keep)))
        for dt in ('i32', 'i64'):
            if monoid == 'logsumexp':
                continue
            c = Case('reduce_%s_%s' % (monoid, dt), 'reduce')
            c.attr('axes', 1).attr('monoid', monoid).attr('keepdims', 0)
            x = c.inp(dt, rng.integers(-6, 7, (3, 5)))
            add(c.out(dt, red_oracle(x.astype(np.int64), (1,), monoid, False)))
        c = Case('reduce_%s_view_f64' % monoid, 'reduce')
        c.attr('axes', 0).attr('monoid', monoid).attr('keepdims', 0)
        x = c.inp('f64', uni(0.5, 1.5, (4, 6)), [('perm', 1, 0), ('slice', 0, 5, 3, -2)])
        c.tolerance(*red_tol('f64', monoid, x, (0,)))
        add(c.out('f64', red_oracle(x, (0,), monoid, False)))

    # non-finite propagation: NaN through max/min/logsumexp/sum, all -inf rows, +inf
    special = np.array([[1.0, NAN, 3.0, -INF],
                        [-INF, -INF, -INF, -INF],
                        [INF, 1.0, 2.0, -INF],
                        [2.0, -1.0, 0.5, 2.0],
                        [-INF, 5.0, -INF, -INF],
                        [INF, NAN, -INF, INF]])
    for monoid in monoids:
        for dt in FLOATS:
            c = Case('reduce_%s_special_%s' % (monoid, dt), 'reduce')
            c.attr('axes', 1).attr('monoid', monoid).attr('keepdims', 0)
            x = c.inp(dt, special).astype(np.float64)
            with np.errstate(all='ignore'):
                y = red_oracle(x, (1,), monoid, False)
            c.tolerance(*red_tol(dt, monoid, np.where(np.isfinite(x), x, 0), (1,)))
            add(c.out(dt, y))

    # arg reductions: ties (first wins), NaN (numpy: the first NaN is the winner), +-inf
    ties = np.array([[1.0, 3.0, 3.0, 0.0, 3.0],
                     [2.0, 2.0, 2.0, 2.0, 2.0],
                     [-1.0, NAN, 5.0, NAN, 6.0],
                     [-INF, -INF, -INF, -INF, -INF],
                     [0.0, INF, -INF, INF, -INF]])
    for monoid in ('argmax', 'argmin'):
        for dt in FLOATS:
            for axis in (0, 1):
                for keep in (False, True):
                    c = Case('reduce_%s_ties_a%d_k%d_%s' % (monoid, axis, int(keep), dt), 'reduce')
                    c.attr('axes', axis).attr('monoid', monoid).attr('keepdims', int(keep))
                    x = c.inp(dt, ties)
                    add(c.out('i64', red_oracle(x, (axis,), monoid, keep)))
        for dt in ('i32', 'i64', 'u8'):
            c = Case('reduce_%s_%s' % (monoid, dt), 'reduce')
            c.attr('axes', 1).attr('monoid', monoid).attr('keepdims', 0)
            x = c.inp(dt, rng.integers(0, 4, (4, 6)))
            add(c.out('i64', red_oracle(x, (1,), monoid, False)))
        c = Case('reduce_%s_3d_f64' % monoid, 'reduce')
        c.attr('axes', 1).attr('monoid', monoid).attr('keepdims', 0)
        x = c.inp('f64', np.round(uni(-2, 2, (2, 5, 3)), 0))
        add(c.out('i64', red_oracle(x, (1,), monoid, False)))
        c = Case('reduce_%s_view_f64' % monoid, 'reduce')
        c.attr('axes', 1).attr('monoid', monoid).attr('keepdims', 0)
        x = c.inp('f64', np.round(uni(-2, 2, (4, 7)), 0), [('slice', 1, 6, 4, -1)])
        add(c.out('i64', red_oracle(x, (1,), monoid, False)))

    # reductions over an empty axis give the identity
    for monoid, ident in (('sum', 0.0), ('prod', 1.0), ('max', -INF), ('min', INF),
                          ('logsumexp', -INF)):
        c = Case('reduce_%s_empty_f64' % monoid, 'reduce')
        c.attr('axes', 1).attr('monoid', monoid).attr('keepdims', 0)
        c.inp('f64', np.zeros((3, 0)))
        add(c.out('f64', np.full((3,), ident)))

    # user monoids (defined in the C test): sumsq = sum x^2; mean2 = carry (sum, count) -> sum/count
    for monoid, fn in (('sumsq', lambda x, ax, k: np.sum(x * x, axis=ax, keepdims=k)),
                       ('mean2', lambda x, ax, k: np.mean(x, axis=ax, keepdims=k)),
                       ('absmax', lambda x, ax, k: np.max(np.abs(x), axis=ax, keepdims=k))):
        for k, (shp, axes, keep) in enumerate([((3, 4), (1,), False), ((2, 3, 4), (0, 2), True),
                                               ((5,), (0,), False)]):
            for dt in FLOATS:
                c = Case('reduce_custom_%s_%d_%s' % (monoid, k, dt), 'reduce_custom')
                c.attr('axes', *axes).attr('monoid', monoid).attr('keepdims', int(keep))
                x = c.inp(dt, uni(-2, 2, shp)).astype(np.float64)
                n = int(np.prod([shp[a] for a in axes]))
                if monoid == 'absmax':
                    c.tolerance(*EXACT)
                elif monoid == 'sumsq':
                    c.tolerance(RTOL[dt], sum_atol(dt, n + 1, np.sum(x * x, axis=tuple(axes))))
                else:
                    c.tolerance(RTOL[dt], sum_atol(dt, n + 1, np.mean(np.abs(x), axis=tuple(axes))))
                add(c.out(dt, fn(x, tuple(axes), keep)))


def scan_oracle(x, axis, monoid, reverse):
    if reverse:
        x = np.flip(x, axis)
    with np.errstate(all='ignore'):
        y = {'sum': np.cumsum, 'prod': np.cumprod,
             'max': np.maximum.accumulate, 'min': np.minimum.accumulate,
             'logsumexp': np.logaddexp.accumulate}[monoid](x, axis=axis)
    return np.flip(y, axis) if reverse else y


def gen_scan():
    for monoid in ('sum', 'prod', 'max', 'min', 'logsumexp'):
        for k, (shp, axis) in enumerate([((3, 5), 1), ((4, 3), 0), ((2, 3, 4), 1), ((6,), 0)]):
            for rev in (False, True):
                for dt in FLOATS if k < 2 else ('f64',):
                    c = Case('scan_%s_%d_r%d_%s' % (monoid, k, int(rev), dt), 'scan')
                    c.attr('axis', axis).attr('monoid', monoid).attr('reverse', int(rev))
                    lo, hi = (0.5, 1.5) if monoid == 'prod' else (-3, 3)
                    x = c.inp(dt, uni(lo, hi, shp)).astype(np.float64)
                    n = shp[axis]
                    if monoid == 'sum':
                        c.tolerance(RTOL[dt], sum_atol(dt, n, np.sum(np.abs(x), axis=axis)))
                    elif monoid == 'prod':
                        c.tolerance(max(RTOL[dt], 4 * n * EPS[dt]), 0.0)
                    elif monoid == 'logsumexp':
                        c.tolerance(RTOL[dt], 4 * (n + 2) * EPS[dt])
                    add(c.out(dt, scan_oracle(x, axis, monoid, rev)))
        if monoid != 'logsumexp':
            for dt in ('i32', 'i64'):
                c = Case('scan_%s_%s' % (monoid, dt), 'scan')
                c.attr('axis', 1).attr('monoid', monoid).attr('reverse', 0)
                x = c.inp(dt, rng.integers(-4, 5, (2, 6)))
                add(c.out(dt, scan_oracle(x.astype(np.int64), 1, monoid, False)))
    sp = np.array([[1.0, NAN, 3.0, -1.0], [-INF, -INF, 2.0, -INF], [-INF, -INF, -INF, -INF],
                   [INF, 1.0, -INF, 0.0]])
    for monoid in ('sum', 'max', 'min', 'logsumexp'):
        for rev in (False, True):
            c = Case('scan_%s_special_r%d_f64' % (monoid, int(rev)), 'scan')
            c.attr('axis', 1).attr('monoid', monoid).attr('reverse', int(rev))
            x = c.inp('f64', sp)
            c.tolerance(*(EXACT if monoid in ('max', 'min') else (1e-13, 1e-14)))
            add(c.out('f64', scan_oracle(x, 1, monoid, rev)))
    c = Case('scan_sum_view_f64', 'scan')
    c.attr('axis', 0).attr('monoid', 'sum').attr('reverse', 0)
    x = c.inp('f64', uni(-3, 3, (5, 4)), [('perm', 1, 0), ('slice', 0, 3, 4, -1)])
    c.tolerance(1e-13, sum_atol('f64', 4, np.sum(np.abs(x), axis=0)))
    add(c.out('f64', scan_oracle(x, 0, 'sum', False)))

    for k, (sa, sb, axis) in enumerate([((3, 5), (3, 5), 1), ((1, 5), (3, 5), 1),
                                        ((4, 2), (4, 1), 0), ((), (6,), 0), ((2, 3, 4), (4,), 1)]):
        for rev in (False, True):
            for dt in FLOATS if k < 2 else ('f64',):
                c = Case('scan_linear_%d_r%d_%s' % (k, int(rev), dt), 'scan_linear')
                c.attr('axis', axis).attr('reverse', int(rev))
                a = c.inp(dt, uni(-0.9, 0.9, sa)).astype(np.float64)
                b = c.inp(dt, uni(-2, 2, sb)).astype(np.float64)
                y = linear_recurrence(a, b, axis, rev)
                n = y.shape[axis]
                # |a| < 1 so |y_t| <= sum_s |b_s|; two roundings per step
                bb = np.broadcast_to(np.abs(b), y.shape)
                c.tolerance(RTOL[dt], sum_atol(dt, 2 * n, np.sum(bb, axis=axis)))
                add(c.out(dt, y))


def iir_oracle(x, coef, axis, reverse):
    """scipy.signal.lfilter([1], [1, -c1, .., -ck]) along axis (zero initial state), reversed
    lines for reverse."""
    den = np.concatenate([[1.0], -np.asarray(coef, dtype=np.float64)])
    x = np.asarray(x, dtype=np.float64)
    if reverse:
        return np.flip(scipy.signal.lfilter([1.0], den, np.flip(x, axis), axis=axis), axis)
    return scipy.signal.lfilter([1.0], den, x, axis=axis)


def iir_atol(dt, x, y, coef, axis):
    """The worst-case rounding bound of the recursion: a step rounds k products and k sums, an
    error of at most 2k eps (|b_t| + sum_j |c_j y_{t-j}|) (doubled for the second-order terms), and
    each step's error reaches later outputs through the impulse response h of 1/D, so at most
    sum |h| times the largest step error. h is summed in float64 until it has decayed."""
    k = len(coef)
    den = np.concatenate([[1.0], -np.asarray(coef, dtype=np.float64)])
    imp = np.zeros(4096)
    imp[0] = 1.0
    h1 = float(np.sum(np.abs(scipy.signal.lfilter([1.0], den, imp))))
    ya = np.moveaxis(np.abs(y), axis, -1)
    xa = np.moveaxis(np.abs(np.asarray(x, dtype=np.float64)), axis, -1)
    step = xa.max() + sum(abs(c) for c in coef) * ya.max()
    return 2 * 2 * k * EPS[dt] * h1 * step


IIR_COEFS = {
    1: [0.7],
    2: [2 * 0.8 * np.cos(0.5), -0.64],
    3: None,  # Young-van Vliet's a1..a3 at sigma 3, from yvv_coefficients below
    4: list(-np.poly([0.6, -0.5, 0.7 * np.exp(0.9j), 0.7 * np.exp(-0.9j)]).real[1:]),
}


def yvv_coefficients(sigma):
    """a1..a3 of Young and van Vliet (1995, eqs. 8c, 9) for sigma >= 2.5."""
    q = 0.98711 * sigma - 0.96330
    b0 = 1.57825 + 2.44413 * q + 1.4281 * q ** 2 + 0.422205 * q ** 3
    b = [2.44413 * q + 2.85619 * q ** 2 + 1.26661 * q ** 3, -(1.4281 * q ** 2 + 1.26661 * q ** 3),
         0.422205 * q ** 3]
    return [v / b0 for v in b]


def gen_scan_iir():
    IIR_COEFS[3] = yvv_coefficients(3.0)
    shapes = [((3, 40), 1), ((40, 3), 0), ((2, 37, 5), 1), ((17,), 0), ((5, 4, 33), 2)]
    for order in (1, 2, 3, 4):
        for k, (shp, axis) in enumerate(shapes):
            for rev in (False, True):
                for dt in FLOATS if k in (0, 2, 4) else ('f64',):
                    c = Case('scan_iir_o%d_%d_r%d_%s' % (order, k, int(rev), dt), 'scan_iir')
                    coef = [float(v) for v in IIR_COEFS[order]]
                    c.attr('axis', axis).attr('reverse', int(rev)).attr('coef', *coef)
                    x = c.inp(dt, uni(-2, 2, shp)).astype(np.float64)
                    # the coefficients are rounded once to the dtype: the oracle uses those values
                    used = [float(NP_DTYPE[dt](v)) for v in coef]
                    y = iir_oracle(x, used, axis, rev)
                    c.tolerance(RTOL[dt], iir_atol(dt, x, y, used, axis))
                    add(c.out(dt, y))
    c = Case('scan_iir_view_f64', 'scan_iir')
    c.attr('axis', 0).attr('reverse', 1).attr('coef', 0.5, 0.25)
    x = c.inp('f64', uni(-3, 3, (5, 4)), [('perm', 1, 0), ('slice', 0, 3, 4, -1)])
    y = iir_oracle(x, [0.5, 0.25], 0, True)
    c.tolerance(1e-13, iir_atol('f64', x, y, [0.5, 0.25], 0))
    add(c.out('f64', y))


def linear_recurrence(a, b, axis, reverse):
    a, b = np.broadcast_arrays(a, b)
    a = np.moveaxis(a.astype(np.float64), axis, 0)
    b = np.moveaxis(b.astype(np.float64), axis, 0)
    y = np.zeros_like(b)
    order = range(b.shape[0] - 1, -1, -1) if reverse else range(b.shape[0])
    prev = np.zeros(b.shape[1:])
    for t in order:
        prev = a[t] * prev + b[t]
        y[t] = prev
    return np.moveaxis(y, 0, axis)


def sort_perm(x, axis, descending):
    """Stable permutation along axis: ascending puts NaN last; descending puts NaN first, then
    values from large to small; equal keys keep their original order."""
    x = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    out = np.zeros(x.shape, dtype=np.int64)
    for idx in np.ndindex(x.shape[:-1]):
        row = x[idx]
        n = len(row)
        if descending:
            key = sorted(range(n), key=lambda i: (not np.isnan(row[i]),
                                                  0.0 if np.isnan(row[i]) else -row[i], i))
        else:
            key = sorted(range(n), key=lambda i: (np.isnan(row[i]),
                                                  0.0 if np.isnan(row[i]) else row[i], i))
        out[idx] = key
    perm = np.moveaxis(out, -1, axis)
    if not descending:
        assert np.array_equal(perm, np.argsort(np.moveaxis(x, -1, axis), axis=axis, kind='stable'))
    return perm


def gen_sort():
    rows = np.array([[3.0, 1.0, 2.0, 1.0, NAN, 0.0, 2.0],
                     [NAN, 5.0, NAN, -INF, INF, 5.0, -1.0],
                     [4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0],
                     [-2.5, 7.0, 0.5, 3.0, -2.5, 9.0, 1.0]])
    for desc in (False, True):
        for dt in FLOATS:
            for axis in (0, 1):
                for op in ('sort', 'argsort'):
                    c = Case('%s_a%d_d%d_%s' % (op, axis, int(desc), dt), op)
                    c.attr('axis', axis).attr('descending', int(desc))
                    x = c.inp(dt, rows)
                    p = sort_perm(x, axis, desc)
                    if op == 'sort':
                        add(c.out(dt, np.take_along_axis(x, p, axis)))
                    else:
                        add(c.out('i64', p))
        for dt in ('i32', 'i64', 'u8'):
            for op in ('sort', 'argsort'):
                c = Case('%s_d%d_%s' % (op, int(desc), dt), op)
                c.attr('axis', 1).attr('descending', int(desc))
                x = c.inp(dt, rng.integers(0, 5, (3, 8)))
                p = sort_perm(x, 1, desc)
                add(c.out(dt, np.take_along_axis(x, p, 1)) if op == 'sort' else c.out('i64', p))
        for op in ('sort', 'argsort'):
            c = Case('%s_3d_d%d_f64' % (op, int(desc)), op)
            c.attr('axis', 1).attr('descending', int(desc))
            x = c.inp('f64', np.round(uni(-2, 2, (2, 5, 3)), 0))
            p = sort_perm(x, 1, desc)
            add(c.out('f64', np.take_along_axis(x, p, 1)) if op == 'sort' else c.out('i64', p))
            c = Case('%s_view_d%d_f64' % (op, int(desc)), op)
            c.attr('axis', 0).attr('descending', int(desc))
            x = c.inp('f64', np.round(uni(-2, 2, (3, 6)), 0), [('perm', 1, 0),
                                                                ('slice', 0, 5, 5, -1)])
            p = sort_perm(x, 0, desc)
            add(c.out('f64', np.take_along_axis(x, p, 0)) if op == 'sort' else c.out('i64', p))

    # top-k: the k largest (smallest) in order, first index on ties; no NaN (not specified)
    tk = np.array([[3.0, 1.0, 3.0, 7.0, 1.0, 7.0, 0.0],
                   [2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0],
                   [-INF, 5.0, INF, -1.0, 4.0, 5.0, -INF]])
    for largest in (True, False):
        for k, (x0, kk, axis, dt) in enumerate([(tk, 3, 1, 'f64'), (tk, 7, 1, 'f64'),
                                                (tk, 1, 1, 'f32'), (tk, 2, 0, 'f64'),
                                                (rng.integers(0, 4, (2, 9)), 4, 1, 'i32'),
                                                (np.round(uni(-2, 2, (2, 6, 2)), 0), 3, 1, 'f64')]):
            c = Case('topk_%d_l%d_%s' % (k, int(largest), dt), 'topk')
            c.attr('k', kk).attr('axis', axis).attr('largest', int(largest))
            x = c.inp(dt, x0)
            p = np.take(sort_perm(x, axis, largest), np.arange(kk), axis=axis)
            c.out(dt, np.take_along_axis(x, p, axis))
            add(c.out('i64', p))


# ------------------------------------------------------------------------------------------------
# Conveniences
# ------------------------------------------------------------------------------------------------

def gen_conveniences():
    for k, (sa, sb) in enumerate([((3, 4), (4, 2)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (3, 4, 2)),
                                  ((1, 1), (1, 1)), ((5, 1), (1, 3))]):
        for dt in FLOATS if k < 2 else ('f64',):
            c = Case('matmul_%d_%s' % (k, dt), 'matmul')
            a = c.inp(dt, uni(-2, 2, sa)).astype(np.float64)
            b = c.inp(dt, uni(-2, 2, sb)).astype(np.float64)
            y = np.matmul(a, b)
            c.tolerance(RTOL[dt], sum_atol(dt, sa[-1], np.matmul(np.abs(a), np.abs(b))))
            add(c.out(dt, y))
    c = Case('matmul_view_f64', 'matmul')
    a = c.inp('f64', uni(-2, 2, (4, 3)), [('perm', 1, 0)]).astype(np.float64)
    b = c.inp('f64', uni(-2, 2, (4, 5)), [('slice', 1, 4, 2, -3)]).astype(np.float64)
    c.tolerance(1e-13, sum_atol('f64', 4, np.matmul(np.abs(a), np.abs(b))))
    add(c.out('f64', a @ b))

    specs = [('ij,jk->ik', (3, 4), (4, 2)), ('bij,bjk->bik', (2, 3, 4), (2, 4, 2)),
             ('ij,ij->i', (3, 5), (3, 5)), ('i,j->ij', (3,), (4,)), ('ij,jk->ki', (2, 3), (3, 4)),
             ('ij,j->i', (3, 4), (4,)), ('ijk,k->', (2, 2, 3), (3,))]
    semirings = [('sum', 'mul'), ('max', 'add'), ('min', 'add'), ('logsumexp', 'add'),
                 ('max', 'minimum'), ('sum', 'add'), ('min', 'maximum')]
    for plus, times in semirings:
        for k, (spec, sa, sb) in enumerate(specs):
            for dt in FLOATS if k < 2 else ('f64',):
                c = Case('einsum_%s_%s_%d_%s' % (plus, times, k, dt), 'einsum')
                c.attr('spec', spec).attr('plus', plus).attr('times', times)
                a = c.inp(dt, uni(-2, 2, sa)).astype(np.float64)
                b = c.inp(dt, uni(-2, 2, sb)).astype(np.float64)
                y, n, absum = einsum_semiring(spec, a, b, plus, times)
                if plus == 'sum':
                    c.tolerance(RTOL[dt], sum_atol(dt, n, absum))
                elif plus == 'logsumexp':
                    c.tolerance(RTOL[dt], 4 * (n + 2) * EPS[dt])
                else:
                    c.tolerance(RTOL[dt] if times in ('add',) else 0.0, 0.0)
                add(c.out(dt, y))
    c = Case('einsum_maxplus_neginf_f64', 'einsum')
    c.attr('spec', 'ij,jk->ik').attr('plus', 'max').attr('times', 'add')
    a = c.inp('f64', [[0.0, -INF], [-INF, -INF]])
    b = c.inp('f64', [[1.0, -INF], [2.0, 3.0]])
    add(c.out('f64', einsum_semiring('ij,jk->ik', a, b, 'max', 'add')[0]))

    for k, (shp, axes, keep) in enumerate([((3, 4), (1,), False), ((2, 3, 4), (0, 2), True),
                                           ((5,), (0,), False), ((2, 3), (), False)]):
        for dt in FLOATS if k < 2 else ('f64',):
            c = Case('mean_%d_%s' % (k, dt), 'mean')
            c.attr('axes', *axes).attr('keepdims', int(keep))
            x = c.inp(dt, uni(-3, 3, shp)).astype(np.float64)
            n = int(np.prod([shp[a] for a in axes]))
            c.tolerance(RTOL[dt], sum_atol(dt, n + 1, np.mean(np.abs(x), axis=tuple(axes))))
            add(c.out(dt, np.mean(x, axis=tuple(axes), keepdims=keep)))
            for ddof in (0, 1):
                c = Case('var_%d_dd%d_%s' % (k, ddof, dt), 'var')
                c.attr('axes', *axes).attr('ddof', ddof).attr('keepdims', int(keep))
                if n - ddof <= 0:
                    names.discard(c.name)
                    continue
                x = c.inp(dt, uni(-3, 3, shp) + 2.0).astype(np.float64)
                y = np.var(x, axis=tuple(axes), ddof=ddof, keepdims=keep)
                # bounds both a two-pass and a one-pass (E[x^2] - E[x]^2) evaluation
                scale = np.max(np.mean((np.abs(x) + np.abs(np.mean(x))) ** 2, axis=tuple(axes))) \
                    if axes else np.max((np.abs(x) * 2) ** 2)
                c.tolerance(RTOL[dt], 8 * (n + 2) * EPS[dt] * scale * n / max(n - ddof, 1))
                add(c.out(dt, y))
    for k, (shp, axis) in enumerate([((3, 4), 1), ((3, 4), 0), ((2, 3, 4), 2), ((6,), 0)]):
        for dt in FLOATS if k < 2 else ('f64',):
            c = Case('softmax_%d_%s' % (k, dt), 'softmax')
            c.attr('axis', axis)
            x = c.inp(dt, uni(-4, 4, shp)).astype(np.float64)
            c.tolerance(max(RTOL[dt], 8 * (shp[axis] + 2) * EPS[dt]), 0.0)
            add(c.out(dt, sps.softmax(x, axis=axis)))
    c = Case('softmax_neginf_f64', 'softmax')
    c.attr('axis', 1)
    x = c.inp('f64', [[0.0, -INF, 1.0], [-INF, 2.0, -INF], [1000.0, 1000.0, -1000.0]])
    c.tolerance(1e-13, 0.0)
    add(c.out('f64', sps.softmax(x, axis=1)))


def einsum_semiring(spec, a, b, plus, times):
    """out = (+)_{summed letters} a (x) b, by explicit broadcasting over all letters."""
    ins, out = spec.split('->')
    la, lb = ins.split(',')
    letters = sorted(set(la + lb))
    size = {}
    for l, s in zip(la, a.shape):
        size[l] = s
    for l, s in zip(lb, b.shape):
        size[l] = s

    def expand(x, labels):
        perm = sorted(range(len(labels)), key=lambda i: letters.index(labels[i]))
        x = np.transpose(x, perm)
        shp = [size[l] if l in labels else 1 for l in letters]
        return x.reshape(shp)

    ta = expand(a, la)
    tb = expand(b, lb)
    prod = {'mul': np.multiply, 'add': np.add, 'minimum': np.minimum,
            'maximum': np.maximum}[times](ta, tb)
    summed = tuple(i for i, l in enumerate(letters) if l not in out)
    n = int(np.prod([prod.shape[i] for i in summed])) if summed else 1
    with np.errstate(all='ignore'):
        if plus == 'sum':
            r = np.sum(prod, axis=summed)
        elif plus == 'max':
            r = np.max(prod, axis=summed, initial=-np.inf)
        elif plus == 'min':
            r = np.min(prod, axis=summed, initial=np.inf)
        else:
            r = sps.logsumexp(prod, axis=summed)
    absum = np.sum(np.abs(prod), axis=summed)
    kept = [l for l in letters if l in out]
    r = np.transpose(np.asarray(r), [kept.index(l) for l in out])
    if plus == 'sum' and times == 'mul':
        assert np.allclose(r, np.einsum(spec, a, b), rtol=1e-12, atol=1e-12)
    return r, n, absum


# ------------------------------------------------------------------------------------------------
# Compositions with independent scipy oracles
# ------------------------------------------------------------------------------------------------

def gen_compositions():
    # grey dilation/erosion: reduce(max|min, window(pad(x, nearest|reflect|...))), odd size
    for mode in ('reflect', 'mirror', 'nearest', 'wrap', 'constant'):
        for monoid, fn in (('max', ndi.grey_dilation), ('min', ndi.grey_erosion)):
            c = Case('compose_%s_%s' % ('dilate' if monoid == 'max' else 'erode', mode),
                     'compose_morph')
            c.attr('size', 3, 5).attr('monoid', monoid).attr('mode', mode).attr('cval', 0.5)
            x = c.inp('f64', np.round(uni(-3, 3, (6, 7)), 3))
            y = fn(x, size=(3, 5), mode=SCIPY_MODE[mode], cval=0.5)
            add(c.out('f64', y))
    # correlate1d: reduce(sum, window(pad(x)) * w) along the last axis
    for mode in ('reflect', 'mirror', 'nearest', 'wrap', 'constant'):
        c = Case('compose_correlate1d_%s' % mode, 'compose_correlate1d')
        c.attr('mode', mode).attr('cval', -0.25)
        x = c.inp('f64', uni(-3, 3, (3, 8)))
        w = c.inp('f64', uni(-1, 1, (5,)))
        y = ndi.correlate1d(x, w, axis=-1, mode=SCIPY_MODE[mode], cval=-0.25)
        c.tolerance(1e-13, sum_atol('f64', 5, 5 * 3 * 1))
        add(c.out('f64', y))


# ------------------------------------------------------------------------------------------------
# Edge cases that defeat common shortcuts, chains of movement ops, extern
# ------------------------------------------------------------------------------------------------

def gen_edges():
    # signed zeros compare equal: a stable sort keeps them in input order
    for desc in (False, True):
        c = Case('argsort_signed_zeros_d%d' % int(desc), 'argsort')
        c.attr('axis', 0).attr('descending', int(desc))
        x = c.inp('f64', [0.0, -0.0, 1.0, 0.0, -0.0, -1.0])
        add(c.out('i64', sort_perm(x, 0, desc)))
    # argmax among equal signed zeros: the first wins
    c = Case('reduce_argmax_signed_zeros', 'reduce')
    c.attr('axes', 0).attr('monoid', 'argmax').attr('keepdims', 0)
    x = c.inp('f64', [-0.0, 0.0, -0.0])
    add(c.out('i64', np.argmax(x)))
    # indices at the ends of the index dtype are clamped, not wrapped
    for idt in ('i32', 'i64'):
        info = np.iinfo(NP_DTYPE[idt])
        c = Case('gather_extreme_%s' % idt, 'gather')
        c.attr('axis', 1)
        x = c.inp('f64', np.round(uni(-3, 3, (2, 5)), 3))
        i = c.inp(idt, [info.min, info.max, info.min + 1, info.max - 1, 2])
        add(c.out('f64', np.take(x, i.astype(np.int64), axis=1, mode='clip')))
        c = Case('scatter_extreme_%s' % idt, 'scatter')
        c.attr('axis', 0).attr('monoid', 'sum')
        x = c.inp('f64', [1.0, 2.0, 3.0])
        i = c.inp(idt, [info.min, info.max, 1, -1, 3])
        u = c.inp('f64', [10.0, 20.0, 30.0, 40.0, 50.0])
        add(c.out('f64', scatter_oracle(x, i.astype(np.int64), u, 0, 'sum')))
    # max/min reductions and scans of ints at the ends of their range (no identity overflow)
    for dt in ('i32', 'i64', 'i8', 'u8'):
        info = np.iinfo(NP_DTYPE[dt])
        for monoid in ('max', 'min', 'argmax', 'argmin'):
            c = Case('reduce_%s_extreme_%s' % (monoid, dt), 'reduce')
            c.attr('axes', 1).attr('monoid', monoid).attr('keepdims', 0)
            x = c.inp(dt, [[info.min, info.min, info.min], [info.max, info.max, info.max],
                           [info.min, info.max, 0]])
            y = red_oracle(x, (1,), monoid, False)
            add(c.out('i64' if monoid.startswith('arg') else dt, y))
    # softmax of a row that is all equal and huge; logsumexp of huge values (no overflow)
    c = Case('reduce_logsumexp_huge_f64', 'reduce')
    c.attr('axes', 1).attr('monoid', 'logsumexp').attr('keepdims', 0)
    x = c.inp('f64', [[1000.0, 1000.0, 999.0], [-1000.0, -1001.0, -1002.0], [1e308, 1e308, 0.0]])
    add(c.out('f64', sps.logsumexp(x, axis=1)).tolerance(1e-13, 0.0))
    c = Case('scan_logsumexp_huge_f64', 'scan')
    c.attr('axis', 1).attr('monoid', 'logsumexp').attr('reverse', 0)
    x = c.inp('f64', [[1000.0, 1000.0, 999.0], [-1000.0, -1001.0, -1002.0]])
    add(c.out('f64', np.logaddexp.accumulate(x, axis=1)).tolerance(1e-13, 0.0))
    c = Case('einsum_logsumexp_huge_f64', 'einsum')
    c.attr('spec', 'ij,jk->ik').attr('plus', 'logsumexp').attr('times', 'add')
    a = c.inp('f64', [[800.0, 700.0], [-800.0, -900.0]])
    b = c.inp('f64', [[100.0], [250.0]])
    add(c.out('f64', einsum_semiring('ij,jk->ik', a, b, 'logsumexp', 'add')[0])
        .tolerance(1e-13, 0.0))
    # var of a large offset: a one-pass formula loses everything here
    c = Case('var_offset_f64', 'var')
    c.attr('axes', 0).attr('ddof', 0).attr('keepdims', 0)
    x = c.inp('f64', 1e8 + np.array([1.0, 2.0, 3.0, 4.0]))
    add(c.out('f64', np.var(x)).tolerance(1e-6, 0.0))


def gen_zero_size():
    """Arrays with an extent of 0 (the header allows extents >= 0)."""
    def case(name, op):
        return Case('empty_' + name, op)
    c = case('exp', 'exp')
    x = c.inp('f64', np.zeros((0, 3)))
    add(c.out('f64', np.exp(x)))
    c = case('add_bcast', 'add')
    a = c.inp('f64', np.zeros((0, 3)))
    b = c.inp('f64', [1.0, 2.0, 3.0])
    add(c.out('f64', a + b))
    c = case('add_bcast1', 'add')
    a = c.inp('f64', np.zeros((0, 1)))
    b = c.inp('f64', np.ones((1, 4)))
    add(c.out('f64', a + b))
    c = case('reshape', 'reshape')
    c.attr('shape', 3, 0, 2)
    x = c.inp('i32', np.zeros((0, 6)))
    add(c.out('i32', x.reshape(3, 0, 2)))
    c = case('permute', 'permute')
    c.attr('perm', 1, 0)
    x = c.inp('f64', np.zeros((0, 3)))
    add(c.out('f64', x.T))
    c = case('broadcast', 'broadcast')
    c.attr('shape', 2, 0)
    x = c.inp('f64', np.zeros((1, 0)))
    add(c.out('f64', np.broadcast_to(x, (2, 0))))
    c = case('broadcast_to0', 'broadcast')
    c.attr('shape', 0, 3)
    x = c.inp('f64', [[1.0, 2.0, 3.0]])
    add(c.out('f64', np.broadcast_to(x, (0, 3))))
    c = case('concat', 'concat')
    c.attr('axis', 0)
    a = c.inp('f64', np.zeros((0, 2)))
    b = c.inp('f64', [[1.0, 2.0]])
    cc = c.inp('f64', np.zeros((0, 2)))
    add(c.out('f64', np.concatenate([a, b, cc])))
    c = case('pad_constant', 'pad')
    c.attr('lo', 1, 0).attr('hi', 2, 1).attr('mode', 'constant').attr('cval', 7.5)
    x = c.inp('f64', np.zeros((0, 2)))
    add(c.out('f64', np.pad(x, [(1, 2), (0, 1)], constant_values=7.5)))
    c = case('reverse', 'reverse')
    c.attr('axes', 0, 1)
    x = c.inp('f64', np.zeros((2, 0)))
    add(c.out('f64', x))
    c = case('gather_idx', 'gather')
    c.attr('axis', 0)
    x = c.inp('f64', [1.0, 2.0, 3.0])
    i = c.inp('i64', np.zeros((0,), dtype=np.int64))
    add(c.out('f64', np.take(x, i, axis=0)))
    c = case('gather_idx2d', 'gather')
    c.attr('axis', 1)
    x = c.inp('f64', [[1.0, 2.0], [3.0, 4.0]])
    i = c.inp('i32', np.zeros((2, 0), dtype=np.int32))
    add(c.out('f64', np.take(x, i, axis=1)))
    c = case('scatter_idx', 'scatter')
    c.attr('axis', 0).attr('monoid', 'sum')
    x = c.inp('f64', [1.0, 2.0, 3.0])
    i = c.inp('i64', np.zeros((0,), dtype=np.int64))
    c.inp('f64', np.zeros((0,)))
    add(c.out('f64', x))
    # every index is out of range of an empty axis: all updates are dropped, out = x
    for axis, xs in ((0, (0, 3)), (1, (2, 0))):
        c = case('scatter_axis%d' % axis, 'scatter')
        c.attr('axis', axis).attr('monoid', 'sum')
        x = c.inp('f64', np.zeros(xs))
        c.inp('i64', [0, -1, 2])
        c.inp('f64', np.zeros(xs[:axis] + (3,) + xs[axis + 1:]))
        add(c.out('f64', x))
    c = case('reduce_other_axis', 'reduce')
    c.attr('axes', 1).attr('monoid', 'sum').attr('keepdims', 0)
    x = c.inp('f64', np.zeros((0, 3)))
    add(c.out('f64', np.zeros((0,))))
    c = case('argmax_other_axis', 'reduce')
    c.attr('axes', 1).attr('monoid', 'argmax').attr('keepdims', 0)
    x = c.inp('f64', np.zeros((0, 3)))
    add(c.out('i64', np.zeros((0,), dtype=np.int64)))
    for op in ('sort', 'argsort'):
        c = case(op, op)
        c.attr('axis', 1).attr('descending', 0)
        x = c.inp('f64', np.zeros((2, 0)))
        add(c.out('f64' if op == 'sort' else 'i64', np.zeros((2, 0))))
    c = case('scan', 'scan')
    c.attr('axis', 1).attr('monoid', 'sum').attr('reverse', 0)
    x = c.inp('f64', np.zeros((2, 0)))
    add(c.out('f64', x))
    c = case('matmul_k0', 'matmul')
    a = c.inp('f64', np.zeros((2, 0)))
    b = c.inp('f64', np.zeros((0, 3)))
    add(c.out('f64', np.zeros((2, 3))))
    for plus, val in (('sum', 0.0), ('max', -INF), ('min', INF), ('logsumexp', -INF)):
        c = case('einsum_%s_k0' % plus, 'einsum')
        c.attr('spec', 'ij,jk->ik').attr('plus', plus).attr('times', 'add')
        a = c.inp('f64', np.zeros((2, 0)))
        b = c.inp('f64', np.zeros((0, 3)))
        add(c.out('f64', np.full((2, 3), val)))
    c = case('softmax', 'softmax')
    c.attr('axis', 1)
    x = c.inp('f64', np.zeros((0, 3)))
    add(c.out('f64', x))
    c = case('iota', 'iota')
    c.attr('dtype', 'i32').attr('shape', 3, 0).attr('axis', 0)
    add(c.out('i32', np.zeros((3, 0), dtype=np.int32)))
    c = case('constant', 'constant')
    x = c.inp('f64', np.zeros((0, 2)))
    add(c.out('f64', x))
    c = case('cast', 'cast')
    c.attr('dtype', 'i32')
    x = c.inp('f64', np.zeros((4, 0)))
    add(c.out('i32', np.zeros((4, 0), dtype=np.int32)))
    for monoid, fn in (('sumsq', lambda x: np.sum(x * x)), ('mean2', lambda x: np.nan)):
        c = Case('reduce_custom_%s_empty' % monoid, 'reduce_custom')
        c.attr('axes', 0).attr('monoid', monoid).attr('keepdims', 0)
        x = c.inp('f64', np.zeros((0,)))
        add(c.out('f64', np.array(fn(x))))


def gen_broadcast_views():
    """Program inputs that are broadcast views (stride 0), as nx_program_run accepts any strides."""
    c = Case('exp_stride0_f64', 'exp')
    x = c.inp('f64', uni(-2, 2, (3, 1)), [('expand', 1, 4)])
    add(c.out('f64', np.exp(x)).tolerance(1e-13, 0.0))
    c = Case('add_stride0_f64', 'add')
    a = c.inp('f64', uni(-2, 2, (1, 4)), [('expand', 0, 3)])
    b = c.inp('f64', uni(-2, 2, (3, 1)), [('expand', 1, 4), ('perm', 1, 0), ('perm', 1, 0)])
    add(c.out('f64', a + b).tolerance(1e-13, 0.0))
    c = Case('reduce_sum_stride0_f64', 'reduce')
    c.attr('axes', 1).attr('monoid', 'sum').attr('keepdims', 0)
    x = c.inp('f64', uni(-2, 2, (3, 1)), [('expand', 1, 5)])
    c.tolerance(1e-13, sum_atol('f64', 5, np.sum(np.abs(x), axis=1)))
    add(c.out('f64', np.sum(x, axis=1)))
    c = Case('sort_stride0_f64', 'argsort')
    c.attr('axis', 1).attr('descending', 1)
    x = c.inp('f64', [[1.0], [NAN]], [('expand', 1, 4)])
    add(c.out('i64', sort_perm(x, 1, True)))
    c = Case('scatter_stride0_f64', 'scatter')
    c.attr('axis', 0).attr('monoid', 'sum')
    x = c.inp('f64', [[0.0, 1.0]], [('expand', 0, 3)])
    i = c.inp('i64', [[2]], [('expand', 1, 4)])  # index 2 four times: updates accumulate
    u = c.inp('f64', [[[1.0, 2.0]]], [('expand', 1, 4)])
    add(c.out('f64', scatter_oracle(x, i, u, 0, 'sum')))
    c = Case('reshape_stride0_f64', 'reshape')
    c.attr('shape', 6)
    x = c.inp('f64', [[1.0, 2.0, 3.0]], [('expand', 0, 2)])
    add(c.out('f64', x.reshape(6)))


def gen_hashcons():
    """Two nodes in one graph that differ in one detail must stay two nodes (the graph hash-conses
    equal subexpressions). Each case builds both variants (see the C test's b_hashcons) and checks
    both outputs."""
    def case(kind, *ins):
        c = Case('hashcons_' + kind, 'hashcons')
        c.attr('kind', kind)
        return c, [c.inp(dt, v) for dt, v in ins]

    c, _ = case('scalar_signed_zero')            # 1 / scalar(0.0), 1 / scalar(-0.0)
    add(c.out('f64', np.array(INF)).out('f64', np.array(-INF)))
    c, _ = case('scalar_dtype')                  # cast(scalar(f32, 0.1), f64), scalar(f64, 0.1)
    add(c.out('f64', np.array(float(np.float32(0.1))).astype(np.float64))
        .out('f64', np.array(0.1)))
    c, (a, b) = case('inputs_same_name', ('f64', [1.0, 2.0, 3.0]), ('f64', [0.5, 0.25, 4.0]))
    add(c.out('f64', a - b).out('f64', b - a))   # two inputs both named "x"
    c, (a, b) = case('input_parameter', ('f64', [1.0, 2.0]), ('f64', [3.0, 5.0]))
    add(c.out('f64', a * 10 + b))                # input "x" and parameter "x"
    c, _ = case('constant_dtype')                # same bytes as i32 and as f32
    bits = np.array([1065353216, 3], dtype=np.int32)
    add(c.out('f64', bits.astype(np.float64)).out('f64', bits.view(np.float32).astype(np.float64)))
    c, _ = case('constant_data')                 # constants differing in one element
    add(c.out('f64', np.array([1.0, 2.0, 3.0])).out('f64', np.array([1.0, 2.0, 4.0])))
    c, (x,) = case('pad_cval_signed_zero', ('f64', [1.0, 2.0]))
    with np.errstate(divide='ignore'):
        add(c.out('f64', 1.0 / np.pad(x, 1, constant_values=0.0))
            .out('f64', 1.0 / np.pad(x, 1, constant_values=-0.0)))
    c, (x,) = case('pad_modes', ('f64', [1.0, 2.0, 3.0]))
    add(c.out('f64', pad_oracle(x, (2,), (2,), 'reflect', 0))
        .out('f64', pad_oracle(x, (2,), (2,), 'mirror', 0)))
    sq = np.arange(9.0).reshape(3, 3) ** 1.5
    c, (x,) = case('reduce_axes', ('f64', sq))
    add(c.out('f64', sq.sum(axis=0)).out('f64', sq.sum(axis=1)).tolerance(1e-13, 0.0))
    c, (x,) = case('reduce_monoids', ('f64', sq))
    add(c.out('f64', sq.max(axis=1)).out('f64', sq.min(axis=1)))
    c, (x,) = case('permute_square', ('f64', sq))
    add(c.out('f64', sq.T).out('f64', sq))
    c, (x,) = case('reverse_axes', ('f64', sq))
    add(c.out('f64', sq[::-1]).out('f64', sq[:, ::-1]))
    c, (x,) = case('sort_dirs', ('f64', [3.0, 1.0, 2.0]))
    add(c.out('f64', np.array([1.0, 2.0, 3.0])).out('f64', np.array([3.0, 2.0, 1.0])))
    c, (x,) = case('scan_dirs', ('f64', [1.0, 2.0, 4.0]))
    add(c.out('f64', np.array([1.0, 3.0, 7.0])).out('f64', np.array([7.0, 6.0, 4.0])))
    c, (x,) = case('arg_monoids', ('f64', sq - np.eye(3) * 100))
    add(c.out('i64', np.argmax(x, axis=1)).out('i64', np.argmin(x, axis=1)))
    c, _ = case('iota_axes')
    add(c.out('i32', np.indices((3, 3))[0].astype(np.int32))
        .out('i32', np.indices((3, 3))[1].astype(np.int32)))
    c, (x,) = case('gather_axes', ('f64', sq))
    add(c.out('f64', np.take(sq, [2, 0], axis=0).T).out('f64', np.take(sq, [2, 0], axis=1)))
    c, (x,) = case('slice_steps', ('f64', [0.0, 1.0, 2.0, 3.0]))
    add(c.out('f64', np.array([0.0, 1.0])).out('f64', np.array([0.0, 2.0])))
    c, (x,) = case('topk_largest', ('f64', [3.0, 1.0, 2.0]))
    add(c.out('f64', np.array([3.0, 2.0])).out('f64', np.array([1.0, 2.0])))
    m = np.array([[1.0, 2.0], [3.0, 5.0]])
    c, (a, b) = case('einsum_specs', ('f64', m), ('f64', m[::-1]))
    add(c.out('f64', np.einsum('ij,jk->ik', a, b)).out('f64', np.einsum('ij,kj->ik', a, b))
        .tolerance(1e-13, 0.0))
    c, (a, b) = case('einsum_times', ('f64', m), ('f64', m[::-1]))
    add(c.out('f64', einsum_semiring('ij,jk->ik', a, b, 'max', 'add')[0])
        .out('f64', einsum_semiring('ij,jk->ik', a, b, 'max', 'mul')[0]).tolerance(1e-13, 0.0))
    c, (x,) = case('cast_dtypes', ('f64', [2.7, -2.7]))
    add(c.out('f64', np.array([2.0, -2.0])).out('f64', np.array(2.7, dtype=np.float32).astype(
        np.float64) * np.array([1.0, -1.0], dtype=np.float64)))


def gen_conventions():
    """The builder conventions stated in include/nitrix-graph.h: wrapping integer arithmetic,
    floor division with x/0 = 0, saturating float-to-int casts, negative axes, empty integer
    folds, the canonical fold order (one element at a time, in the dtype), f16/bf16 casts."""
    with np.errstate(all='ignore'):
        for dt in ('i8', 'i16', 'i32', 'i64', 'u8'):
            info = np.iinfo(NP_DTYPE[dt])
            a0 = np.array([info.max, info.min, info.max, info.min, info.max // 2 + 1, 7],
                          dtype=NP_DTYPE[dt])
            b0 = np.array([1, -1 if dt != 'u8' else 1, info.max, info.min, 2, 3],
                          dtype=NP_DTYPE[dt])
            for op, fn in (('add', np.add), ('sub', np.subtract), ('mul', np.multiply)):
                c = Case('%s_wrap_%s' % (op, dt), op)
                a = c.inp(dt, a0)
                b = c.inp(dt, b0)
                add(c.out(dt, fn(a, b)))
            if dt != 'u8':
                for op, fn in (('neg', np.negative), ('abs', np.abs)):
                    c = Case('%s_wrap_%s' % (op, dt), op)
                    x = c.inp(dt, [info.min, info.max, -1, 0])
                    add(c.out(dt, fn(x)))
            av = np.array([7, -7, 7, -7, 0, 5, info.min, info.max, 6, 1], dtype=np.int64)
            bv = np.array([2, 2, -2, -2, 3, 0, -1, -1, 4, 0], dtype=np.int64)
            if dt == 'u8':
                av, bv = np.abs(av) % 256, np.abs(bv)
            for op, fn in (('div', np.floor_divide), ('mod', np.mod)):
                c = Case('%s_floor_%s' % (op, dt), op)
                a = c.inp(dt, av.astype(NP_DTYPE[dt]))
                b = c.inp(dt, bv.astype(NP_DTYPE[dt]))
                add(c.out(dt, fn(a, b)))
            c = Case('pow_wrap_%s' % dt, 'pow')
            a = c.inp(dt, [3, 2, 7, 0 if dt == 'u8' else -3])
            b = c.inp(dt, [40, 70, 0, 5])
            add(c.out(dt, np.power(a, b)))
        # float -> int saturates, NaN -> 0; narrowing integer casts wrap like numpy's astype
        f = np.array([1e10, -1e10, NAN, INF, -INF, 2147483647.9, -2147483648.9, 2.5, -2.5,
                      300.0, -5.0, 1e19, -1e19, 127.9, -128.9, 255.5])
        for src in FLOATS:
            for dst in ('i8', 'i16', 'i32', 'i64', 'u8'):
                c = Case('cast_saturate_%s_%s' % (src, dst), 'cast')
                c.attr('dtype', dst)
                x = c.inp(src, f).astype(np.float64)
                info = np.iinfo(NP_DTYPE[dst])
                t = np.trunc(np.where(np.isnan(x), 0.0, x))
                y = np.where(t >= float(info.max), info.max,
                             np.where(t <= float(info.min), info.min,
                                      np.clip(t, -1e300, 1e300))).astype(np.float64)
                yi = np.array([int(info.max) if t_ >= float(info.max) else
                               int(info.min) if t_ <= float(info.min) else int(t_)
                               for t_ in t], dtype=NP_DTYPE[dst])
                assert np.all(yi.astype(np.float64) == y) or dst == 'i64'
                add(c.out(dst, yi))
        c = Case('cast_nan_bool', 'cast')
        c.attr('dtype', 'bool')
        x = c.inp('f64', [NAN, -NAN, 0.0, -0.0])
        add(c.out('bool', np.array([True, True, False, False])))
        for src, dst, vals in (('i64', 'i32', [2 ** 31, -(2 ** 31) - 1, 2 ** 40 + 5, -1]),
                               ('i32', 'u8', [-1, 256, 511, -256]),
                               ('i32', 'i8', [128, -129, 255, 1000]),
                               ('u8', 'i8', [128, 255, 127, 0]),
                               ('f64', 'f32', [1e39, -1e39, 1.7e308, 3.4028235677973366e38])):
            c = Case('cast_wrap_%s_%s' % (src, dst), 'cast')
            c.attr('dtype', dst)
            x = c.inp(src, vals)
            add(c.out(dst, x.astype(NP_DTYPE[dst])))

    # negative axes count from the end
    x3 = np.round(uni(-2, 2, (2, 3, 4)), 3)
    for name, op, attrs, fn in (
            ('reduce_sum_neg', 'reduce', [('axes', -1), ('monoid', 'sum'), ('keepdims', 0)],
             lambda x: x.sum(axis=-1)),
            ('reduce_max_neg2', 'reduce', [('axes', -3, -1), ('monoid', 'max'), ('keepdims', 1)],
             lambda x: x.max(axis=(0, 2), keepdims=True)),
            ('reduce_argmax_neg', 'reduce', [('axes', -2), ('monoid', 'argmax'), ('keepdims', 0)],
             lambda x: np.argmax(x, axis=-2)),
            ('scan_neg', 'scan', [('axis', -1), ('monoid', 'max'), ('reverse', 1)],
             lambda x: scan_oracle(x, 2, 'max', True)),
            ('sort_neg', 'sort', [('axis', -2), ('descending', 0)], lambda x: np.sort(x, axis=1)),
            ('argsort_neg', 'argsort', [('axis', -1), ('descending', 1)],
             lambda x: sort_perm(x, 2, True)),
            ('softmax_neg', 'softmax', [('axis', -1)], lambda x: sps.softmax(x, axis=-1)),
            ('mean_neg', 'mean', [('axes', -1, -2), ('keepdims', 0)],
             lambda x: x.mean(axis=(1, 2))),
            ('reverse_neg', 'reverse', [('axes', -1, 0)], lambda x: x[::-1, :, ::-1]),
            ('concat_neg', 'concat_self', [('axis', -1)],
             lambda x: np.concatenate([x, x], axis=-1)),
            ('gather_neg', 'gather_const', [('axis', -1), ('index', 3, 0, 9)],
             lambda x: np.take(x, [3, 0, 9], axis=-1, mode='clip'))):
        c = Case('axes_' + name, op)
        for key_vals in attrs:
            c.attr(*key_vals)
        x = c.inp('f64', x3)
        y = fn(x)
        if op in ('mean', 'softmax'):
            c.tolerance(1e-13, 1e-15)
        add(c.out('i64' if name in ('reduce_argmax_neg', 'argsort_neg') else 'f64', y))
    c = Case('axes_iota_neg', 'iota')
    c.attr('dtype', 'i64').attr('shape', 2, 3).attr('axis', -1)
    add(c.out('i64', np.indices((2, 3))[1]))
    c = Case('axes_topk_neg', 'topk')
    c.attr('k', 2).attr('axis', -1).attr('largest', 1)
    x = c.inp('f64', x3)
    p = np.take(sort_perm(x, 2, True), [0, 1], axis=2)
    add(c.out('f64', np.take_along_axis(x, p, 2)).out('i64', p))
    c = Case('axes_scan_linear_neg', 'scan_linear')
    c.attr('axis', -1).attr('reverse', 0)
    a = c.inp('f64', [[0.5, -0.5, 0.25]])
    b = c.inp('f64', [[1.0, 2.0, 3.0], [-1.0, 0.0, 1.0]])
    add(c.out('f64', linear_recurrence(a, b, 1, False)).tolerance(1e-13, 1e-15))

    # empty integer folds: max gives the dtype's minimum, min its maximum
    for dt in ('i8', 'i32', 'i64', 'u8'):
        info = np.iinfo(NP_DTYPE[dt])
        for monoid, ident in (('sum', 0), ('prod', 1), ('max', info.min), ('min', info.max)):
            c = Case('reduce_%s_empty_%s' % (monoid, dt), 'reduce')
            c.attr('axes', 0).attr('monoid', monoid).attr('keepdims', 0)
            c.inp(dt, np.zeros((0, 2)))
            add(c.out(dt, np.full((2,), ident, dtype=NP_DTYPE[dt])))

    # the canonical fold: ascending index order over the reduced axes (the first reduced axis
    # outermost), one element at a time, accumulating in the dtype; exact
    def seq_fold(x, axes, monoid, dt):
        axes = sorted(a % x.ndim for a in axes)
        keep = [a for a in range(x.ndim) if a not in axes]
        xt = np.transpose(x, keep + axes)
        out = np.zeros(xt.shape[:len(keep)], dtype=NP_DTYPE[dt])
        for idx in np.ndindex(out.shape):
            acc = NP_DTYPE[dt](0.0 if monoid == 'sum' else 1.0)
            for v in xt[idx].ravel():
                acc = NP_DTYPE[dt](acc + v) if monoid == 'sum' else NP_DTYPE[dt](acc * v)
            out[idx] = acc
        return out
    for dt in FLOATS:
        big = 1e8 if dt == 'f32' else 1e17
        rows = np.array([[big, 1.0, -big, 1.0, 3.0, 0.5, -0.25, big / 3, 7.0],
                         [1.0, big, 1.0, -big, 0.1, 0.2, 0.3, 0.4, 0.5]])
        c = Case('fold_order_sum_%s' % dt, 'reduce')
        c.attr('axes', 1).attr('monoid', 'sum').attr('keepdims', 0)
        x = c.inp(dt, rows)
        add(c.out(dt, seq_fold(x, (1,), 'sum', dt)))
        c = Case('fold_order_sum_random_%s' % dt, 'reduce')
        c.attr('axes', 0).attr('monoid', 'sum').attr('keepdims', 0)
        x = c.inp(dt, uni(-1, 1, (50, 3)) * 10.0 ** rng.integers(-4, 5, (50, 3)))
        add(c.out(dt, seq_fold(x, (0,), 'sum', dt)))
        c = Case('fold_order_prod_%s' % dt, 'reduce')
        c.attr('axes', 1).attr('monoid', 'prod').attr('keepdims', 0)
        x = c.inp(dt, uni(0.5, 1.5, (3, 40)))
        add(c.out(dt, seq_fold(x, (1,), 'prod', dt)))
        for axes in ((0, 2), (2, 0)):
            c = Case('fold_order_axes_%d%d_%s' % (axes + (dt,)), 'reduce')
            c.attr('axes', *axes).attr('monoid', 'sum').attr('keepdims', 0)
            x = c.inp(dt, uni(-1, 1, (4, 2, 5)) * 10.0 ** rng.integers(-3, 4, (4, 2, 5)))
            add(c.out(dt, seq_fold(x, axes, 'sum', dt)))

    # f16 and bf16 are storage types: leaves and casts
    f16_in = np.array([0.1, 65504.0, -2.5, 6.1e-5, 5.96e-8, 0.0, -0.0, INF, NAN, 1000.0],
                      dtype=np.float16)
    to16 = np.array([0.1, 65504.0, 65519.99, 65520.0, 1e-8, 3e-8, 2.9802322387695312e-08,
                     -2.5, NAN, -INF, 1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11])
    for src in FLOATS:
        c = Case('cast_%s_f16' % src, 'cast')
        c.attr('dtype', 'f16')
        x = c.inp(src, to16)
        with np.errstate(over='ignore'):
            add(c.out('f16', x.astype(np.float64).astype(np.float16)))
        c = Case('cast_%s_bf16' % src, 'cast')
        c.attr('dtype', 'bf16')
        vals = np.array([0.1, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 3.3895313892515355e38,
                         3.39e38, -1e-40, 1e-45, NAN, -INF, 2.0 ** -133, 65536.5])
        x = c.inp(src, vals).astype(np.float64)
        add(c.out('bf16', bf16_bits(x)))
    for dst in FLOATS + ('i32', 'bool'):
        c = Case('cast_f16_%s' % dst, 'cast')
        c.attr('dtype', dst)
        x = c.inp('f16', f16_in if dst in FLOATS + ('bool',) else f16_in[np.isfinite(f16_in)])
        xv = x.astype(np.float64)
        if dst == 'i32':
            y = np.trunc(xv).astype(np.int32)
        elif dst == 'bool':
            y = (xv != 0) | np.isnan(xv)
        else:
            y = xv.astype(NP_DTYPE[dst])
        add(c.out(dst, y))
        c = Case('cast_bf16_%s' % dst, 'cast')
        c.attr('dtype', dst)
        bits = np.array([0x3dcd, 0x7f7f, 0xc020, 0x0001, 0x8000, 0x7f80, 0x7fc0, 0x4480],
                        dtype=np.uint16)
        if dst == 'i32':
            bits = bits[np.isfinite(bf16_value(bits))]
        c.inp('bf16', bits)
        xv = bf16_value(bits)
        if dst == 'i32':
            y = np.trunc(np.clip(xv, -2.0 ** 31, 2.0 ** 31 - 1)).astype(np.int64)
            y = np.where(xv >= 2.0 ** 31, 2 ** 31 - 1, y).astype(np.int32)
        elif dst == 'bool':
            y = (xv != 0) | np.isnan(xv)
        else:
            y = xv.astype(NP_DTYPE[dst])
        add(c.out(dst, y))
    c = Case('cast_f16_bf16', 'cast')
    c.attr('dtype', 'bf16')
    x = c.inp('f16', f16_in)
    add(c.out('bf16', bf16_bits(x.astype(np.float64))))
    c = Case('cast_bf16_f16', 'cast')
    c.attr('dtype', 'f16')
    c.inp('bf16', np.array([0x3dcd, 0x477f, 0x4780, 0xc020, 0x3380], dtype=np.uint16))
    with np.errstate(over='ignore'):
        add(c.out('f16', bf16_value([0x3dcd, 0x477f, 0x4780, 0xc020, 0x3380]).astype(np.float16)))
    for dt in ('f16', 'bf16'):
        c = Case('scalar_%s' % dt, 'scalar')
        c.attr('dtype', dt).attr('value', 0.1)
        add(c.out(dt, np.float16(0.1) if dt == 'f16' else bf16_bits(0.1)))
        c = Case('constant_%s' % dt, 'constant')
        v = c.inp(dt, f16_in if dt == 'f16' else bf16_bits(f16_in.astype(np.float64)))
        add(c.out(dt, v))
        c = Case('iota_%s' % dt, 'iota')
        c.attr('dtype', dt).attr('shape', 2, 300).attr('axis', 1)
        idx = np.indices((2, 300))[1].astype(np.float64)
        add(c.out(dt, idx.astype(np.float16) if dt == 'f16' else bf16_bits(idx)))


def gen_scale():
    """Mid-size arrays (hundreds to a few thousand elements), where sorting, scattering and
    folding take paths that tiny inputs do not."""
    vals = rng.integers(0, 20, 2000).astype(np.float64)
    vals[rng.random(2000) < 0.05] = NAN
    vals[rng.random(2000) < 0.02] = INF
    vals[rng.random(2000) < 0.02] = -INF
    for desc in (False, True):
        for op in ('sort', 'argsort'):
            c = Case('scale_%s_d%d_f64' % (op, int(desc)), op)
            c.attr('axis', 0).attr('descending', int(desc))
            x = c.inp('f64', vals)
            perm = sort_perm(x, 0, desc)
            add(c.out('f64', x[perm]) if op == 'sort' else c.out('i64', perm))
        c = Case('scale_argsort_d%d_i32' % int(desc), 'argsort')
        c.attr('axis', 1).attr('descending', int(desc))
        x = c.inp('i32', rng.integers(-3, 4, (4, 300)))
        add(c.out('i64', sort_perm(x, 1, desc)))
    c = Case('scale_topk_f32', 'topk')
    c.attr('k', 50).attr('axis', 0).attr('largest', 1)
    x = c.inp('f32', rng.integers(0, 100, 1000))
    p = sort_perm(x, 0, True)[:50]
    add(c.out('f32', x[p]).out('i64', p))
    idx = rng.integers(-3, 13, 600)
    for monoid in ('sum', 'max', 'min'):
        c = Case('scale_scatter_%s_i64' % monoid, 'scatter')
        c.attr('axis', 0).attr('monoid', monoid)
        x = c.inp('i64', rng.integers(-1000, 1000, 10))
        i = c.inp('i64', idx)
        u = c.inp('i64', rng.integers(-10 ** 6, 10 ** 6, 600))
        add(c.out('i64', scatter_oracle(x, i, u, 0, monoid)))
        c = Case('scale_scatter_%s_f64' % monoid, 'scatter')
        c.attr('axis', 1).attr('monoid', monoid)
        x = c.inp('f64', uni(-1, 1, (2, 10)))
        i = c.inp('i32', idx)
        ub = uni(-1, 1, (2, 600))
        ub[rng.random((2, 600)) < 0.01] = NAN
        u = c.inp('f64', ub)
        if monoid == 'sum':
            c.tolerance(1e-13, sum_atol('f64', 600, 600.0))
        add(c.out('f64', scatter_oracle(x, i, u, 1, monoid)))
    c = Case('scale_gather_f64', 'gather')
    c.attr('axis', 0)
    x = c.inp('f64', uni(-1, 1, (100, 2)))
    i = c.inp('i64', rng.integers(-5, 105, (40, 25)))
    add(c.out('f64', np.take(x, i, axis=0, mode='clip')))
    c = Case('scale_window_f64', 'window')
    c.attr('window', 3, 4).attr('stride', 2, 3).attr('dilation', 2, 1)
    x = c.inp('f64', np.round(uni(-1, 1, (30, 31)), 4))
    add(c.out('f64', window_oracle(x, (3, 4), (2, 3), (2, 1))))
    for mode in ('reflect', 'mirror', 'nearest', 'wrap', 'constant'):
        c = Case('scale_pad_%s' % mode, 'pad')
        c.attr('lo', 120).attr('hi', 131).attr('mode', mode).attr('cval', -2.0)
        x = c.inp('f64', np.round(uni(-1, 1, 50), 4))
        add(c.out('f64', pad_oracle(x, (120,), (131,), mode, -2.0)))
    c = Case('scale_logsumexp_f64', 'reduce')
    c.attr('axes', 1).attr('monoid', 'logsumexp').attr('keepdims', 0)
    x = c.inp('f64', uni(-50, 50, (3, 1000)))
    add(c.out('f64', sps.logsumexp(x, axis=1)).tolerance(1e-13, 4 * 1002 * EPS['f64']))
    c = Case('scale_argmax_f64', 'reduce')
    c.attr('axes', 0).attr('monoid', 'argmax').attr('keepdims', 0)
    x = c.inp('f64', rng.integers(0, 50, (1500, 2)).astype(np.float64))
    add(c.out('i64', np.argmax(x, axis=0)))
    c = Case('scale_scan_sum_i64', 'scan')
    c.attr('axis', 0).attr('monoid', 'sum').attr('reverse', 1)
    x = c.inp('i64', rng.integers(-2 ** 62, 2 ** 62, 1000))
    with np.errstate(over='ignore'):
        add(c.out('i64', scan_oracle(x, 0, 'sum', True)))


# ------------------------------------------------------------------------------------------------
# Random DAGs with exact oracles: integer arithmetic wraps in numpy as in nitrix, and single IEEE
# operations (+ - * /, comparisons, min/max, floor/ceil/round, movement, sorting, sequential
# folds) give bit-identical results, so whole random graphs can be checked exactly.
# ------------------------------------------------------------------------------------------------

def int_wrap(v, dt):
    return np.asarray(v).astype(NP_DTYPE[dt])


def sat_cast(x, dst):
    """float -> integer as the header states: truncate, saturate, NaN -> 0."""
    info = np.iinfo(NP_DTYPE[dst])
    out = np.zeros(np.shape(x), dtype=NP_DTYPE[dst])
    for idx in np.ndindex(np.shape(x)):
        v = float(np.asarray(x)[idx])
        out[idx] = 0 if np.isnan(v) else info.max if v >= info.max else \
            info.min if v <= info.min else int(np.trunc(v))
    return out


class Dag:
    def __init__(self, family):
        self.family = family      # 'int' or 'float'
        self.lines = []           # node descriptions
        self.pool = []            # (ref, value)
        self.nodes = 0

    def add_node(self, desc, value):
        ref = 'n%d' % self.nodes
        self.nodes += 1
        self.lines.append(desc)
        self.pool.append((ref, np.asarray(value)))
        return ref, np.asarray(value)

    def pick(self, pred=lambda v: True):
        cands = [p for p in self.pool if pred(p[1])]
        return cands[rng.integers(len(cands))] if cands else None


def np_dt(v):
    return {np.dtype(np.float32): 'f32', np.dtype(np.float64): 'f64', np.dtype(np.int8): 'i8',
            np.dtype(np.int32): 'i32', np.dtype(np.int64): 'i64', np.dtype(np.uint8): 'u8',
            np.dtype(np.bool_): 'bool'}[v.dtype]


def bshape_partner(v):
    """A shape that broadcasts with v: trailing dims, some set to 1."""
    keep = len(v.shape) if rng.random() < 0.6 else int(rng.integers(0, len(v.shape) + 1))
    return tuple(1 if rng.random() < 0.25 else e for e in v.shape[len(v.shape) - keep:])


def seq_reduce(x, axes, monoid):
    """Sequential fold in ascending index order (the canonical order), in x's dtype."""
    axes = sorted(a % x.ndim for a in axes)
    keep = [a for a in range(x.ndim) if a not in axes]
    xt = np.transpose(x, keep + axes)
    out = np.zeros(xt.shape[:len(keep)], dtype=x.dtype)
    with np.errstate(all='ignore'):
        for idx in np.ndindex(out.shape):
            flat = xt[idx].ravel()
            acc = np.array(0 if monoid == 'sum' else 1, dtype=x.dtype)
            for v in flat:
                acc = (acc + v if monoid == 'sum' else acc * v).astype(x.dtype)
            out[idx] = acc
    return out


def dag_step(d):
    """One random node; returns False when the drawn op does not apply."""
    fam = d.family
    num = (lambda v: v.dtype.kind in 'iu') if fam == 'int' else (lambda v: v.dtype.kind == 'f')
    kinds = ['unary', 'binary', 'binary', 'compare', 'select', 'reduce', 'scan', 'sort',
             'reverse', 'permute', 'slice', 'pad', 'broadcast', 'reshape', 'concat', 'gather',
             'scatter', 'window', 'cast', 'logic']
    k = kinds[rng.integers(len(kinds))]
    with np.errstate(all='ignore'):
        if k == 'unary':
            ops = ['neg', 'abs', 'sign'] + (['floor', 'ceil', 'round'] if fam == 'float' else [])
            op = ops[rng.integers(len(ops))]
            p = d.pick(num)
            if p is None:
                return False
            fn = {'neg': np.negative, 'abs': np.abs, 'sign': np.sign, 'floor': np.floor,
                  'ceil': np.ceil, 'round': np.round}[op]
            d.add_node('%s %s' % (op, p[0]), fn(p[1]))
            return True
        if k == 'binary':
            if fam == 'int':
                ops = ['add', 'sub', 'mul', 'div', 'mod', 'pow', 'minimum', 'maximum']
            else:
                ops = ['add', 'sub', 'mul', 'div', 'minimum', 'maximum']
            op = ops[rng.integers(len(ops))]
            a = d.pick(num)
            if a is None:
                return False
            shp = bshape_partner(a[1])
            b = d.pick(lambda v: num(v) and v.dtype == a[1].dtype and v.shape == shp)
            if b is None:
                return False
            if rng.random() < 0.5:
                a, b = b, a
            av, bv = a[1], b[1]
            if op == 'pow' and av.dtype.name not in d.seven:
                return False
            if op == 'pow':
                # exponents in 0..6: integers to negative powers are not defined here
                e = np.mod(bv, np.asarray(7, dtype=bv.dtype))
                ref, _ = d.add_node('mod %s %s' % (b[0], d.seven[av.dtype.name]), e)
                d.add_node('pow %s %s' % (a[0], ref), np.power(av, e))
                return True
            fn = {'add': np.add, 'sub': np.subtract, 'mul': np.multiply,
                  'div': np.floor_divide if fam == 'int' else np.divide, 'mod': np.mod,
                  'minimum': np.minimum, 'maximum': np.maximum}[op]
            y = fn(av, bv)
            if fam == 'int' and op in ('div', 'mod'):
                y = np.where(np.broadcast_to(bv, y.shape) == 0, 0, y).astype(av.dtype)
            d.add_node('%s %s %s' % (op, a[0], b[0]), y)
            return True
        if k == 'compare':
            op = ['eq', 'ne', 'lt', 'le', 'gt', 'ge'][rng.integers(6)]
            a = d.pick(num)
            b = a and d.pick(lambda v: v.dtype == a[1].dtype and v.shape == bshape_partner(a[1]))
            if not b:
                return False
            fn = {'eq': np.equal, 'ne': np.not_equal, 'lt': np.less, 'le': np.less_equal,
                  'gt': np.greater, 'ge': np.greater_equal}[op]
            d.add_node('%s %s %s' % (op, a[0], b[0]), fn(a[1], b[1]))
            return True
        if k == 'logic':
            a = d.pick(lambda v: v.dtype == np.bool_)
            if a is None:
                return False
            op = ['not', 'and', 'or'][rng.integers(3)]
            if op == 'not':
                d.add_node('not %s' % a[0], np.logical_not(a[1]))
                return True
            b = d.pick(lambda v: v.dtype == np.bool_ and v.shape == bshape_partner(a[1]))
            if b is None:
                return False
            fn = np.logical_and if op == 'and' else np.logical_or
            d.add_node('%s %s %s' % (op, a[0], b[0]), fn(a[1], b[1]))
            return True
        if k == 'select':
            a = d.pick(lambda v: v.dtype != np.bool_)
            if a is None:
                return False
            b = d.pick(lambda v: v.dtype == a[1].dtype and v.shape == bshape_partner(a[1]))
            c = d.pick(lambda v: v.dtype == np.bool_ and v.shape == bshape_partner(a[1]))
            if b is None or c is None:
                return False
            d.add_node('select %s %s %s' % (c[0], a[0], b[0]), np.where(c[1], a[1], b[1]))
            return True
        if k == 'reduce':
            x = d.pick(lambda v: v.dtype != np.bool_ and v.ndim >= 1)
            if x is None:
                return False
            xv = x[1]
            monoids = ['max', 'min', 'argmax', 'argmin', 'sum', 'prod']
            m = monoids[rng.integers(len(monoids))]
            keep = int(rng.random() < 0.4)
            if m.startswith('arg'):
                axes = [int(rng.integers(xv.ndim))]
                y = (np.argmax if m == 'argmax' else np.argmin)(xv, axis=axes[0],
                                                               keepdims=bool(keep))
            else:
                axes = [a for a in range(xv.ndim) if rng.random() < 0.5] or [0]
                if m in ('sum', 'prod'):
                    y = seq_reduce(xv, axes, m)
                    if keep:
                        y = np.expand_dims(y, tuple(sorted(axes)))
                else:
                    fn = np.max if m == 'max' else np.min
                    y = fn(xv, axis=tuple(axes), keepdims=bool(keep))
            axes = [a - xv.ndim if rng.random() < 0.3 else a for a in axes]
            d.add_node('reduce %s %d %s %s' % (m, keep, x[0], ' '.join(map(str, axes))),
                       np.asarray(y))
            return True
        if k == 'scan':
            x = d.pick(lambda v: v.dtype != np.bool_ and v.ndim >= 1)
            if x is None:
                return False
            ms = ['max', 'min'] + (['sum', 'prod'] if fam == 'int' else [])
            m = ms[rng.integers(len(ms))]
            axis = int(rng.integers(x[1].ndim))
            rev = int(rng.random() < 0.5)
            d.add_node('scan %s %d %d %s' % (m, rev, axis, x[0]),
                       scan_oracle(x[1], axis, m, bool(rev)).astype(x[1].dtype))
            return True
        if k == 'sort':
            x = d.pick(lambda v: v.dtype != np.bool_ and v.ndim >= 1)
            if x is None:
                return False
            axis = int(rng.integers(x[1].ndim))
            desc = int(rng.random() < 0.5)
            perm = sort_perm(x[1], axis, bool(desc))
            if rng.random() < 0.5:
                d.add_node('argsort %d %d %s' % (desc, axis, x[0]), perm)
            else:
                d.add_node('sort %d %d %s' % (desc, axis, x[0]),
                           np.take_along_axis(x[1], perm, axis))
            return True
        if k == 'cast':
            x = d.pick()
            xv = x[1]
            targets = ['i8', 'i32', 'i64', 'u8', 'bool'] + (['f32', 'f64'] if fam == 'float'
                                                            else [])
            dst = targets[rng.integers(len(targets))]
            if xv.dtype.kind == 'f' and dst not in ('f32', 'f64', 'bool'):
                y = sat_cast(xv, dst)
            elif dst == 'bool':
                y = (xv != 0) | (np.isnan(xv) if xv.dtype.kind == 'f' else False)
            else:
                y = xv.astype(NP_DTYPE[dst])
            d.add_node('cast %s %s' % (dst, x[0]), y)
            return True
        if k == 'gather':
            x = d.pick(lambda v: v.ndim >= 1 and v.ndim <= 3)
            i = d.pick(lambda v: v.dtype in (np.int32, np.int64) and v.ndim <= 2)
            if x is None or i is None or x[1].ndim - 1 + i[1].ndim > 4:
                return False
            axis = int(rng.integers(x[1].ndim))
            y = np.take(x[1], i[1].astype(np.int64), axis=axis, mode='clip')
            if y.size > 512:
                return False
            d.add_node('gather %d %s %s' % (axis, x[0], i[0]), y)
            return True
        if k == 'scatter':
            x = d.pick(lambda v: v.dtype != np.bool_ and 1 <= v.ndim <= 3)
            i = d.pick(lambda v: v.dtype in (np.int32, np.int64) and v.ndim <= 1)
            if x is None or i is None:
                return False
            axis = int(rng.integers(x[1].ndim))
            ushape = x[1].shape[:axis] + i[1].shape + x[1].shape[axis + 1:]
            u = d.pick(lambda v: v.dtype == x[1].dtype and v.shape == ushape)
            if u is None:
                return False
            m = ['sum', 'max', 'min'][rng.integers(3)]
            if fam == 'float' and m == 'sum':
                m = 'max'  # unordered float sums are not exact
            d.add_node('scatter %d %s %s %s %s' % (axis, m, x[0], i[0], u[0]),
                       scatter_oracle(x[1], i[1].astype(np.int64), u[1], axis, m))
            return True
        if k == 'concat':
            x = d.pick(lambda v: v.ndim >= 1)
            if x is None:
                return False
            axis = int(rng.integers(x[1].ndim))
            def same_but_axis(v):
                return v.dtype == x[1].dtype and v.ndim == x[1].ndim and all(
                    a == b for j, (a, b) in enumerate(zip(v.shape, x[1].shape)) if j != axis)
            y = d.pick(same_but_axis)
            val = np.concatenate([x[1], y[1]], axis=axis)
            if val.size > 512:
                return False
            d.add_node('concat %d %s %s' % (axis, x[0], y[0]), val)
            return True
        # movement steps reuse the chain generator
        x = d.pick(lambda v: v.size <= 256)
        if x is None:
            return False
        step = random_step(x[1])
        if step is None or step[0] not in ('reverse', 'permute', 'slice', 'pad', 'broadcast',
                                           'reshape', 'window'):
            return False
        y = chain_step(x[1], step)
        if y.size > 512 or y.ndim > 5 or y.size == 0:
            return False
        d.add_node('%s %s %s' % (step[0], x[0], ' '.join(str(v) for v in step[1:])), y)
        return True


def gen_dags():
    made = 0
    while made < 120:
        fam = 'int' if made % 2 == 0 else 'float'
        d = Dag(fam)
        c = Case('dag_%03d_%s' % (made, fam), 'dag')
        nin = int(rng.integers(2, 5))
        d.seven = {}
        dts = ['i32', 'i64', 'i8'] if fam == 'int' else ['f64', 'f32']
        for k in range(nin):
            dt = dts[rng.integers(len(dts))] if k else dts[0]
            shp = tuple(int(e) for e in rng.integers(1, 5, int(rng.integers(1, 4))))
            if fam == 'int':
                info = np.iinfo(NP_DTYPE[dt])
                base = rng.integers(-20, 21, shp)
                ext = rng.random(shp) < 0.1
                base = np.where(ext, rng.choice([info.min, info.max, info.min + 1]), base)
            else:
                base = rng.integers(-8, 9, shp) * 0.5 ** rng.integers(0, 4, shp)
                sp = rng.random(shp)
                base = np.where(sp < 0.05, NAN, np.where(sp < 0.08, INF, np.where(
                    sp < 0.1, -INF, base)))
            v = c.inp(dt, base)
            d.pool.append(('i%d' % k, np.asarray(v)))
        # 0-d sevens for pow exponents, one per integer dtype used
        if fam == 'int':
            for dt in dts:
                v = c.inp(dt, np.array(7))
                d.seven[NP_DTYPE[dt]().dtype.name] = 'i%d' % (len(c.ins) - 1)
        target = int(rng.integers(4, 24))
        tries = 0
        while d.nodes < target and tries < 400:
            tries += 1
            dag_step(d)
        if d.nodes < 3:
            names.discard(c.name)
            continue
        outs = sorted(set([d.nodes - 1] + [int(i) for i in rng.integers(0, d.nodes, 3)]))
        for j, line in enumerate(d.lines):
            c.attr('n%d' % j, *line.split())
        c.attr('outs', *['n%d' % j for j in outs])
        values = dict(d.pool)
        for j in outs:
            c.out(np_dt(values['n%d' % j]), values['n%d' % j])
        add(c)
        made += 1


def gen_custom_monoids():
    """User monoids using select, comparisons, casts and all four carry components."""
    for k, (shp, axes, keep) in enumerate([((3, 5), (1,), False), ((2, 3, 4), (2, 0), True)]):
        for dt in FLOATS:
            ax = tuple(axes)
            for monoid in ('selmax', 'count_pos', 'stats4'):
                c = Case('reduce_custom_%s_%d_%s' % (monoid, k, dt), 'reduce_custom')
                c.attr('axes', *axes).attr('monoid', monoid).attr('keepdims', int(keep))
                x = c.inp(dt, np.round(uni(-2, 2, shp), 2)).astype(np.float64)
                n = int(np.prod([shp[a] for a in axes]))
                if monoid == 'selmax':
                    y = np.max(x, axis=ax, keepdims=keep)
                elif monoid == 'count_pos':
                    y = np.sum(x > 0, axis=ax, keepdims=keep).astype(np.float64)
                else:
                    y = (np.sum(x, axis=ax, keepdims=keep) + np.sum(x * x, axis=ax, keepdims=keep)
                         + np.min(x, axis=ax, keepdims=keep) + np.max(x, axis=ax, keepdims=keep))
                    c.tolerance(RTOL[dt], sum_atol(dt, n + 4, np.sum(np.abs(x) + x * x, axis=ax)
                                                   + 4.0))
                add(c.out(dt, y))
    for dt in ('i32', 'i64'):
        info = np.iinfo(NP_DTYPE[dt])
        c = Case('reduce_custom_wrapsum_%s' % dt, 'reduce_custom')
        c.attr('axes', 1).attr('monoid', 'wrapsum').attr('keepdims', 0)
        x = c.inp(dt, [[info.max, 1, 2], [info.min, -1, 5], [3, 4, 5]])
        add(c.out(dt, seq_reduce(x, (1,), 'sum')))


MODE_IDS = ('constant', 'reflect', 'mirror', 'nearest', 'wrap')
CHAIN_CVAL = 0.5


def chain_step(x, step):
    name, v = step[0], list(step[1:])
    n = x.ndim
    if name == 'reverse':
        return np.flip(x, axis=tuple(v)) if v else x
    if name == 'permute':
        return np.transpose(x, v)
    if name == 'slice':
        return x[tuple(slice(v[3 * i], v[3 * i + 1], v[3 * i + 2]) for i in range(n))]
    if name == 'pad':
        return pad_oracle(x, v[1:1 + n], v[1 + n:1 + 2 * n], MODE_IDS[v[0]], CHAIN_CVAL)
    if name == 'broadcast':
        return np.broadcast_to(x, v)
    if name == 'reshape':
        return x.reshape(v)
    if name == 'window':
        return window_oracle(x, v[:n], v[n:2 * n], v[2 * n:3 * n])
    if name == 'reducemax':
        return np.max(x, axis=v[0])
    if name == 'concatself':
        return np.concatenate([x, x], axis=v[0])
    if name == 'gather':
        return np.take(x, np.array(v[1:]), axis=v[0], mode='clip')
    raise ValueError(name)


def random_step(x):
    """A random movement step valid for x (or None), keeping sizes small."""
    n = x.ndim
    kinds = ['reverse', 'permute', 'slice', 'pad', 'broadcast', 'reshape', 'window', 'reducemax',
             'concatself', 'gather']
    name = kinds[rng.integers(len(kinds))]
    if n == 0 and name not in ('broadcast', 'reshape'):
        return None
    if name == 'reverse':
        axes = [a for a in range(n) if rng.random() < 0.5]
        return ['reverse'] + axes
    if name == 'permute':
        return ['permute'] + list(rng.permutation(n))
    if name == 'slice':
        v = []
        for e in x.shape:
            a = int(rng.integers(0, e))
            b = int(rng.integers(a + 1, e + 1))
            v += [a, b, int(rng.integers(1, 3))]
        return ['slice'] + v
    if name == 'pad':
        lo = [int(rng.integers(0, e + 2)) for e in x.shape]
        hi = [int(rng.integers(0, e + 2)) for e in x.shape]
        return ['pad', int(rng.integers(5))] + lo + hi
    if name == 'broadcast':
        shp = [int(rng.integers(1, 3))] if n < 4 and rng.random() < 0.5 else []
        shp += [int(rng.integers(2, 4)) if e == 1 else e for e in x.shape]
        return ['broadcast'] + shp
    if name == 'reshape':
        total = x.size
        shp = []
        while total > 1 and len(shp) < 3:
            divs = [d for d in range(2, total + 1) if total % d == 0]
            d = divs[rng.integers(len(divs))]
            shp.append(d)
            total //= d
        if total > 1 or not shp:
            shp.append(total)
        return ['reshape'] + [int(e) for e in rng.permutation(shp)]
    if name == 'window':
        if n > 2:
            return None
        w = [int(rng.integers(1, min(e, 3) + 1)) for e in x.shape]
        s = [int(rng.integers(1, 3)) for e in x.shape]
        d = [1 if (2 * (wi - 1) + 1 > e) else int(rng.integers(1, 3)) for wi, e in zip(w, x.shape)]
        return ['window'] + w + s + d
    if name == 'reducemax':
        return ['reducemax', int(rng.integers(n))]
    if name == 'concatself':
        return ['concatself', int(rng.integers(n))]
    axis = int(rng.integers(n))
    return ['gather', axis] + [int(i) for i in rng.integers(-2, x.shape[axis] + 2, 3)]


def gen_chains():
    made = 0
    while made < 60:
        dt = ('f64', 'f32', 'i32')[made % 3]
        shp = tuple(int(e) for e in rng.integers(1, 5, int(rng.integers(1, 4))))
        base = np.round(uni(-3, 3, shp), 3) if dt != 'i32' else rng.integers(-9, 10, shp)
        x = np.asarray(base, dtype=NP_DTYPE[dt])
        steps = []
        for _ in range(int(rng.integers(2, 7))):
            st = random_step(x)
            if st is None:
                continue
            y = chain_step(x, st)
            if y.size > 512 or y.ndim > 6 or y.size == 0:
                continue
            steps.append(st)
            x = y
        if len(steps) < 2:
            continue
        c = Case('chain_%02d_%s' % (made, dt), 'chain')
        for k, st in enumerate(steps):
            c.attr('s%d' % k, *st)
        v = c.inp(dt, base)
        y = v
        for st in steps:
            y = chain_step(y, st)
        add(c.out(dt, np.array(y)))
        made += 1


def gen_extern():
    # an extern op defined by the C test: rowsum(x)[i] = sum_j x[i, j]; the interpreter must hand
    # its reference contiguous inputs even when the graph input is a strided view
    for k, views in enumerate([[], [('perm', 1, 0)], [('slice', 1, 4, 3, -2)]]):
        for dt in FLOATS:
            c = Case('extern_rowsum_%d_%s' % (k, dt), 'extern_rowsum')
            x = c.inp(dt, uni(-2, 2, (3, 5)), views).astype(np.float64)
            c.tolerance(RTOL[dt], sum_atol(dt, x.shape[1], np.sum(np.abs(x), axis=1)))
            add(c.out(dt, np.sum(x, axis=1)))
    # an extern's output feeding primitives, and a primitive feeding an extern
    c = Case('extern_rowsum_chain_f64', 'extern_rowsum_chain')
    x = c.inp('f64', uni(-2, 2, (4, 3)))
    c.tolerance(1e-13, sum_atol('f64', 4, 4 * 2 * np.e ** 2))
    add(c.out('f64', np.exp(np.sum(np.flip(x, 0) * 2.0, axis=1))))


def main():
    gen_unary()
    gen_binary()
    gen_select_cast()
    gen_leaves()
    gen_movement()
    gen_indexing()
    gen_reduce()
    gen_scan()
    gen_sort()
    gen_conveniences()
    gen_compositions()
    gen_edges()
    gen_chains()
    gen_extern()
    gen_zero_size()
    gen_broadcast_views()
    gen_hashcons()
    gen_conventions()
    gen_scale()
    gen_dags()
    gen_custom_monoids()
    gen_scan_iir()
    write_all()
    return 0


if __name__ == '__main__':
    sys.exit(main())
