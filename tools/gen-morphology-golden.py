#!/usr/bin/python3
"""Golden fixtures for the morphology tests: scipy.ndimage's grey and binary dilation/erosion
(and openings/closings) on seeded random inputs, written as .npy files plus a manifest
(tests/data/morphology/cases.txt) the C test reads. Run from the repository root:
    /usr/bin/python3 tools/gen-morphology-golden.py
"""
import os

import numpy as np
import scipy
import scipy.ndimage as ndi

OUT = os.path.join(os.path.dirname(__file__), '..', 'tests', 'data', 'morphology')
rng = np.random.RandomState(20261129)
lines = []

GREY = {'median': ndi.median_filter, 'dilate': ndi.grey_dilation, 'erode': ndi.grey_erosion,
        'open': ndi.grey_opening, 'close': ndi.grey_closing}
BINARY = {'dilate': ndi.binary_dilation, 'erode': ndi.binary_erosion}


def save(name, **arrays):
    for k, v in arrays.items():
        np.save(os.path.join(OUT, f'{name}_{k}.npy'), np.ascontiguousarray(v))


def grey(name, op, shape, dtype, *, size=None, footprint=None, structure=None, mode='reflect',
         cval=0.0):
    # Integers in a small range make ties common, so the first-winner rule is exercised.
    x = rng.randint(-4, 5, size=shape).astype(dtype) + (rng.rand(*shape) > 0.7).astype(dtype) / 4
    kw = {'mode': mode, 'cval': cval}
    arrays = {'x': x}
    elem = 'size'
    if footprint is not None:
        kw['footprint'] = footprint
        arrays['fp'] = footprint.astype(np.uint8)
        elem = 'fp'
    if structure is not None:
        kw['structure'] = structure
        arrays['se'] = structure
        elem = 'se' if footprint is None else 'fpse'
    if size is not None:
        kw['size'] = size
    out = GREY[op](x, **kw)
    assert out.dtype == x.dtype
    arrays['out'] = out
    save(name, **arrays)
    sz = ','.join(str(s) for s in (size if size is not None else [0] * x.ndim))
    lines.append(f'{name} {op} {elem} {mode} {cval} {sz}')


def binary(name, op, shape, footprint):
    x = (rng.rand(*shape) > 0.6).astype(np.float64)
    out = BINARY[op](x, structure=footprint, border_value=0).astype(np.float64)
    save(name, x=x, fp=footprint.astype(np.uint8), out=out)
    lines.append(f'{name} {op} fp constant 0 {",".join("0" * 1 for _ in shape)}')


def cdt(name, metric, shape, p_zero):
    mask = (rng.rand(*shape) > p_zero).astype(np.float64)
    d = ndi.distance_transform_cdt(mask, metric=metric).astype(np.float64)
    d[d < 0] = np.inf  # scipy marks "no background anywhere" with -1; nitrix gives +inf
    save(name, mask=mask, out=d)
    cdt_lines.append(f'{name} {metric}')


cdt_lines = []
edt_lines = []


def edt(name, shape, p_zero, sampling, gen=None):
    mask = ((gen or rng).rand(*shape) > p_zero).astype(np.uint8 if gen else np.float64)
    d = ndi.distance_transform_edt(mask, sampling=sampling)
    save(name, mask=mask, out=d)
    edt_lines.append(f'{name} {",".join(repr(float(s)) for s in sampling)}')


def max_pool(x, k, st, pad):
    """PyTorch's max_pool{d}d(return_indices=True), channels-last x [..., s_1..s_d, c]: windows
    of x padded with -inf, the first maximum in the window's C order (np.argmax; NaN first), and
    its flat index into s_1..s_d (the first in-image place when every value is -inf)."""
    d = len(k)
    lead, sp, c = x.shape[:-1 - d], x.shape[-1 - d:-1], x.shape[-1]
    out = tuple((s + 2 * p - kk) // t + 1 for s, p, kk, t in zip(sp, pad, k, st))
    xb = x.reshape((-1,) + sp + (c,)).astype(np.float64)
    vals = np.empty((xb.shape[0],) + out + (c,))
    idx = np.empty((xb.shape[0],) + out + (c,), dtype=np.int64)
    for b in range(xb.shape[0]):
        for o in np.ndindex(*out):
            lo = [oi * t - p for oi, t, p in zip(o, st, pad)]
            places = [tuple(l + w for l, w in zip(lo, kk)) for kk in np.ndindex(*k)]
            inside = [pl for pl in places if all(0 <= q < s for q, s in zip(pl, sp))]
            for ch in range(c):
                v = np.array([xb[(b,) + pl + (ch,)] if pl in inside else -np.inf
                              for pl in places])
                j = int(np.argmax(v))
                best = places[j] if v[j] > -np.inf or np.isnan(v[j]) else inside[0]
                vals[(b,) + o + (ch,)] = v[j]
                idx[(b,) + o + (ch,)] = np.ravel_multi_index(best, sp)
    shape = lead + out + (c,)
    return vals.reshape(shape).astype(x.dtype), idx.reshape(shape)


def max_unpool(vals, idx, size):
    """PyTorch's max_unpool: zeros, then y[.., idx, ch] = vals[.., o, ch] in C order."""
    d = len(size)
    c = vals.shape[-1]
    vb = vals.reshape((-1, int(np.prod(vals.shape[-1 - d:-1])), c))
    ib = idx.reshape(vb.shape)
    y = np.zeros((vb.shape[0], int(np.prod(size)), c), dtype=vals.dtype)
    for b in range(vb.shape[0]):
        for o in range(vb.shape[1]):
            for ch in range(c):
                y[b, ib[b, o, ch], ch] = vb[b, o, ch]
    return y.reshape(vals.shape[:-1 - d] + tuple(size) + (c,))


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith('.npy'):
            os.remove(os.path.join(OUT, f))
    # Flat boxes, odd and even, 1-4 D, both dtypes, every op.
    grey('d1_box5', 'dilate', (17,), np.float64, size=(5,))
    grey('e1_box4', 'erode', (17,), np.float64, size=(4,))
    grey('d1_box4', 'dilate', (17,), np.float32, size=(4,))
    grey('d2_box3', 'dilate', (9, 11), np.float32, size=(3, 3))
    grey('e2_box3', 'erode', (9, 11), np.float32, size=(3, 3))
    grey('d2_box24', 'dilate', (9, 11), np.float64, size=(2, 4))
    grey('e2_box24', 'erode', (9, 11), np.float64, size=(2, 4))
    grey('o2_box3', 'open', (9, 11), np.float64, size=(3, 3))
    grey('c2_box3', 'close', (9, 11), np.float64, size=(3, 3))
    grey('o2_box2', 'open', (8, 7), np.float32, size=(2, 2))
    grey('c2_box2', 'close', (8, 7), np.float32, size=(2, 2))
    grey('d3_box3', 'dilate', (6, 7, 5), np.float32, size=(3, 3, 3))
    grey('e3_box324', 'erode', (6, 7, 5), np.float64, size=(3, 2, 4))
    grey('d4_box3', 'dilate', (4, 5, 3, 6), np.float64, size=(3, 3, 2, 3))
    grey('e4_box3', 'erode', (4, 5, 3, 6), np.float32, size=(3, 3, 3, 3))
    # Boundary modes other than reflect.
    grey('d2_nearest', 'dilate', (7, 8), np.float64, size=(3, 4), mode='nearest')
    grey('e2_constant', 'erode', (7, 8), np.float64, size=(3, 3), mode='constant', cval=1.5)
    grey('d2_mirror', 'dilate', (7, 8), np.float64, size=(5, 3), mode='mirror')
    grey('e2_wrap', 'erode', (7, 8), np.float64, size=(3, 4), mode='wrap')
    # Element wider than the image: the border rule repeats, as scipy extends.
    grey('d1_wide', 'dilate', (4,), np.float64, size=(9,))
    grey('e2_wide', 'erode', (3, 2), np.float64, size=(7, 5))
    # Flat footprints (non-box), odd and even.
    cross = ndi.generate_binary_structure(2, 1)
    grey('d2_cross', 'dilate', (9, 8), np.float64, footprint=cross)
    grey('e2_cross', 'erode', (9, 8), np.float64, footprint=cross)
    asym = np.array([[1, 0, 0, 1], [0, 1, 1, 1], [1, 1, 0, 0]], bool)
    grey('d2_asym', 'dilate', (9, 8), np.float32, footprint=asym)
    grey('e2_asym', 'erode', (9, 8), np.float32, footprint=asym)
    grey('c2_asym', 'close', (9, 8), np.float64, footprint=asym)
    # Non-flat structures (added in f64 by scipy, also for f32 input).
    se = rng.uniform(-1, 1, size=(3, 4))
    grey('d2_se', 'dilate', (8, 9), np.float64, structure=se)
    grey('e2_se', 'erode', (8, 9), np.float64, structure=se)
    grey('d2_se32', 'dilate', (8, 9), np.float32, structure=se)
    grey('o2_se', 'open', (8, 9), np.float64, structure=se)
    grey('d2_fpse', 'dilate', (8, 9), np.float64, footprint=asym, structure=se)
    se3 = rng.uniform(-1, 1, size=(2, 3, 3))
    grey('e3_se', 'erode', (5, 6, 7), np.float64, structure=se3)
    # Binary: 0/1 input, border_value=0.
    binary('bd2_cross', 'dilate', (10, 9), cross)
    binary('be2_cross', 'erode', (10, 9), cross)
    binary('bd2_asym', 'dilate', (10, 9), asym)
    binary('be2_asym', 'erode', (10, 9), asym)
    binary('bd3_box', 'dilate', (6, 5, 7), np.ones((3, 3, 3), bool))
    binary('be3_ball', 'erode', (6, 5, 7), ndi.generate_binary_structure(3, 2))
    # Chamfer distance transforms (distance_transform_cdt), 1-4 D.
    cdt('cdt1_cb', 'chessboard', (23,), 0.85)
    cdt('cdt2_cb', 'chessboard', (13, 17), 0.95)
    cdt('cdt2_tc', 'taxicab', (13, 17), 0.95)
    cdt('cdt3_cb', 'chessboard', (7, 9, 8), 0.97)
    cdt('cdt3_tc', 'taxicab', (7, 9, 8), 0.97)
    cdt('cdt4_tc', 'taxicab', (4, 5, 6, 3), 0.97)
    cdt('cdt2_none', 'taxicab', (4, 5), 2.0)  # no zero anywhere: all +inf
    edt('edt1', (31,), 0.9, (1.0,))
    edt('edt2', (14, 17), 0.95, (1.0, 1.0))
    edt('edt2_aniso', (14, 17), 0.95, (0.7, 1.9))
    edt('edt3_aniso', (8, 9, 7), 0.97, (1.5, 0.5, 1.0))
    edt('edt4', (4, 5, 6, 3), 0.95, (1.0, 2.0, 1.0, 0.5))
    lab = []
    for name, shape, conn in [('cc2_c1', (15, 17), 1), ('cc2_c2', (15, 17), 2),
                              ('cc3_c1', (7, 8, 9), 1), ('cc3_c3', (7, 8, 9), 3),
                              ('cc1_c1', (40,), 1), ('cc4_c2', (4, 5, 4, 6), 2)]:
        mask = (rng.rand(*shape) > 0.6).astype(np.uint8)
        out, k = ndi.label(mask, ndi.generate_binary_structure(len(shape), conn))
        save(name, mask=mask, out=out.astype(np.int32))
        lab.append(f'{name} {conn} {k}')
    with open(os.path.join(OUT, 'label.txt'), 'w') as f:
        f.write(f'# numpy {np.__version__}, scipy {scipy.__version__}; name connectivity count\n')
        f.write('\n'.join(lab) + '\n')
    with open(os.path.join(OUT, 'edt.txt'), 'w') as f:
        f.write(f'# numpy {np.__version__}, scipy {scipy.__version__}; name sampling\n')
        f.write('\n'.join(edt_lines) + '\n')
    with open(os.path.join(OUT, 'cdt.txt'), 'w') as f:
        f.write(f'# numpy {np.__version__}, scipy {scipy.__version__}; name metric\n')
        f.write('\n'.join(cdt_lines) + '\n')
    # Median filters (scipy's rank size // 2), appended last so earlier fixtures keep their data.
    grey('m2_box3', 'median', (9, 11), np.float64, size=(3, 3))
    grey('m2_box24', 'median', (9, 11), np.float32, size=(2, 4))
    grey('m3_box3', 'median', (6, 7, 5), np.float64, size=(3, 3, 3))
    grey('m2_cross', 'median', (9, 8), np.float64, footprint=cross)
    grey('m2_asym', 'median', (9, 8), np.float64, footprint=asym, mode='nearest')
    grey('m1_wrap', 'median', (13,), np.float32, size=(4,), mode='wrap')
    # Max pooling with indices and unpooling (NumPy float64 brute force), appended last.
    pool_lines = []
    for name, shape, dtype, k, st, pad in [
            ('pool1', (2, 11, 3), np.float64, (3,), (2,), (1,)),
            ('pool2', (9, 10, 2), np.float32, (3, 2), (2, 2), (1, 0)),
            ('pool2_overlap', (1, 7, 8, 1), np.float64, (2, 3), (1, 1), (1, 1)),
            ('pool3', (6, 7, 5, 2), np.float64, (2, 2, 2), (2, 2, 2), (0, 0, 0)),
            ('pool3_pad', (5, 6, 4, 3), np.float32, (3, 3, 2), (2, 1, 2), (1, 1, 1))]:
        x = rng.randint(-3, 4, size=shape).astype(dtype)  # small integers: ties are common
        vals, idx = max_pool(x, k, st, pad)
        size = shape[-1 - len(k):-1]  # unpooled back to x's spatial shape (output_size)
        save(name, x=x, values=vals, indices=idx, unpool=max_unpool(vals, idx, size))
        csv = lambda t: ','.join(str(int(v)) for v in t)  # noqa: E731
        pool_lines.append(f'{name} {len(k)} {csv(k)} {csv(st)} {csv(pad)}')
    with open(os.path.join(OUT, 'pool.txt'), 'w') as f:
        f.write(f'# numpy {np.__version__}; name nspatial kernel stride padding; unpool '
                'output_size = x spatial shape\n')
        f.write('\n'.join(pool_lines) + '\n')
    with open(os.path.join(OUT, 'cases.txt'), 'w') as f:
        f.write(f'# numpy {np.__version__}, scipy {scipy.__version__}; '
                'name op element mode cval size\n')
        f.write('\n'.join(lines) + '\n')
    # Larger volumes for the tiled EDT passes and the slab-parallel label (own seed, appended
    # last so earlier fixtures keep their data): partial tiles, lines without a zero, components
    # crossing slab borders at densities near percolation.
    big = np.random.RandomState(20261130)
    edt('edt3_tiles', (37, 45, 40), 0.97, (1.0, 1.0, 1.0), big)
    edt('edt3_tiles_aniso', (21, 38, 33), 0.995, (0.7, 1.3, 1.1), big)
    # The windowed passes and their fallback (own seed, appended last): dense zeros in the first
    # rows (short windows), five zeros in the rest (gaps longer than the window: the envelope),
    # 150 columns (a partial tile of 6).
    gaps = np.random.RandomState(20261201)
    for name, sampling in [('edt2_gaps', (1.0, 1.0)), ('edt2_gaps_aniso', (0.8, 1.7))]:
        mask = (gaps.rand(200, 150) > 0.98).astype(np.uint8)
        mask[60:] = 1
        mask[gaps.randint(60, 200, 5), gaps.randint(0, 150, 5)] = 0
        d = ndi.distance_transform_edt(mask, sampling=sampling)
        save(name, mask=mask, out=d)
        edt_lines.append(f'{name} {",".join(repr(float(s)) for s in sampling)}')
    with open(os.path.join(OUT, 'edt.txt'), 'w') as f:
        f.write(f'# numpy {np.__version__}, scipy {scipy.__version__}; name sampling\n')
        f.write('\n'.join(edt_lines) + '\n')
    for name, shape, conn, p_one in [('cc3_slabs_c1', (70, 33, 29), 1, 0.65),
                                     ('cc3_slabs_c3', (64, 31, 27), 3, 0.25),
                                     ('cc3_slabs_c2', (41, 40, 21), 2, 0.4),
                                     ('cc2_slabs_c1', (300, 77), 1, 0.6),
                                     ('cc4_slabs_c4', (12, 9, 10, 11), 4, 0.2)]:
        mask = (big.rand(*shape) < p_one).astype(np.uint8)
        out, k = ndi.label(mask, ndi.generate_binary_structure(len(shape), conn))
        save(name, mask=mask, out=out.astype(np.int32))
        lab.append(f'{name} {conn} {k}')
    with open(os.path.join(OUT, 'label.txt'), 'w') as f:
        f.write(f'# numpy {np.__version__}, scipy {scipy.__version__}; name connectivity count\n')
        f.write('\n'.join(lab) + '\n')


if __name__ == '__main__':
    main()
