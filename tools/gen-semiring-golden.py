#!/usr/bin/python3
"""Golden data for tests/ops/semiring: semiring matmul, conv and pairwise reductions.

Oracles are independent of nitrix: scipy.ndimage.correlate for the REAL conv, and brute-force
broadcast-reduce in float64 NumPy for everything else. Writes tests/data/semiring/*.npy and
manifest.txt (one case per line: kind name args...). Run from the repository root:

    /usr/bin/python3 tools/gen-semiring-golden.py
"""
import os
import sys

import numpy as np
import scipy
import scipy.ndimage
import scipy.special

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "semiring")
ALGEBRAS = ["real", "log", "tropical_max_plus", "tropical_min_plus", "boolean", "euclidean"]
IDENTITY = {"real": 0.0, "log": -np.inf, "tropical_max_plus": -np.inf,
            "tropical_min_plus": np.inf, "boolean": 0.0, "euclidean": 0.0}


def times(sr, a, b):
    if sr == "real":
        return a * b
    if sr == "boolean":
        return ((a != 0) & (b != 0)).astype(np.float64)
    if sr == "euclidean":
        return (a - b) ** 2
    return a + b


def plus_reduce(sr, t, axis):
    if sr in ("real", "euclidean"):
        r = t.sum(axis=axis)
        return np.sqrt(np.maximum(r, 0)) if sr == "euclidean" else r
    if sr == "log":
        return scipy.special.logsumexp(t, axis=axis)
    if sr in ("tropical_max_plus", "boolean"):
        return t.max(axis=axis)
    return t.min(axis=axis)


def matmul(sr, a, b):
    t = times(sr, a[..., :, :, None], b[..., None, :, :])
    return plus_reduce(sr, t, -2)


def operand(rng, sr, shape):
    if sr == "boolean":
        return (rng.random(shape) < 0.4).astype(np.float64)
    return rng.standard_normal(shape)


def conv_pads(sp, w, stride, dil, padding):
    lo, hi = [], []
    for i in range(len(sp)):
        eff = (w[i] - 1) * dil[i] + 1
        if padding == "same":
            out = -(-sp[i] // stride[i])
            total = max((out - 1) * stride[i] + eff - sp[i], 0)
            lo.append(total // 2)
            hi.append(total - total // 2)
        elif padding == "valid":
            lo.append(0)
            hi.append(0)
        else:
            lo.append(padding[0][i])
            hi.append(padding[1][i])
    return lo, hi


def conv_bf(sr, x, k, stride, dil, lo, hi):
    """Brute force: every output position, every tap, every input channel, in float64."""
    d = k.ndim - 2
    nb = x.ndim - d - 1
    pad = [(0, 0)] * nb + list(zip(lo, hi)) + [(0, 0)]
    xp = np.pad(x, pad, constant_values=IDENTITY[sr])
    sp = xp.shape[nb:nb + d]
    out_sp = [(sp[i] - ((k.shape[i] - 1) * dil[i] + 1)) // stride[i] + 1 for i in range(d)]
    out = np.empty(x.shape[:nb] + tuple(out_sp) + (k.shape[-1],))
    for o in np.ndindex(*out_sp):
        taps = []
        for t in np.ndindex(*k.shape[:d]):
            idx = tuple(o[i] * stride[i] + t[i] * dil[i] for i in range(d))
            xv = xp[(Ellipsis,) + idx + (slice(None),)]          # [..., cin]
            taps.append(times(sr, xv[..., :, None], k[t]))       # [..., cin, cout]
        t = np.stack(taps, axis=-3)                              # [..., taps, cin, cout]
        t = t.reshape(t.shape[:-3] + (-1, t.shape[-1]))
        out[(Ellipsis,) + o + (slice(None),)] = plus_reduce(sr, t, -2)
    return out


def dot_xy(x, y):
    return (x[:, None, :] * y[None, :, :]).sum(-1)


def save(name, **arrays):
    for key, v in arrays.items():
        np.save(os.path.join(OUT, f"{name}_{key}.npy"), v)


def ints(v):
    return ",".join(str(int(i)) for i in v)


def main():
    rng = np.random.RandomState(20261129)
    lines = [f"# numpy {np.__version__} scipy {scipy.__version__}"]
    # matmul: every algebra, batch broadcasting [2,1,3,4] x [3,4,5] -> [2,3,3,5], f64 and f32.
    for sr in ALGEBRAS:
        for dt in ("f64", "f32"):
            a = operand(rng, sr, (2, 1, 3, 4))
            b = operand(rng, sr, (3, 4, 5))
            if dt == "f32":
                a, b = a.astype(np.float32), b.astype(np.float32)
            out = matmul(sr, a.astype(np.float64), b.astype(np.float64))
            name = f"mm_{sr}_{dt}"
            save(name, a=a, b=b, out=out)
            lines.append(f"matmul {name} {sr}")
    # 2-D operands with -inf entries (LOG and tropical safety) and a plain 2-D case.
    for sr in ("log", "tropical_max_plus"):
        a = rng.standard_normal((3, 4))
        b = rng.standard_normal((4, 2))
        a[0, :] = -np.inf
        a[1, 2] = -np.inf
        save(f"mm_{sr}_neginf", a=a, b=b, out=matmul(sr, a, b))
        lines.append(f"matmul mm_{sr}_neginf {sr}")
    # conv, REAL against scipy.ndimage.correlate (SAME, odd kernels), summed over channels.
    for d, sp in ((1, (9,)), (2, (6, 5)), (3, (5, 4, 4))):
        x = rng.standard_normal((2,) + sp + (2,))
        k = rng.standard_normal((3,) * d + (2, 3))
        out = np.zeros((2,) + sp + (3,))
        for n in range(2):
            for co in range(3):
                for ci in range(2):
                    out[n, ..., co] += scipy.ndimage.correlate(x[n, ..., ci], k[..., ci, co],
                                                               mode="constant", cval=0.0)
        name = f"conv_scipy_{d}d"
        save(name, x=x, k=k, out=out)
        lines.append(f"conv {name} real same {ints([1]*d)} {ints([1]*d)} - -")
    # conv brute force: every algebra in 2-D; paddings, strides, dilations in 1-3 D.
    geoms = [
        (2, (1, 1), (1, 1), "same"), (2, (2, 1), (1, 2), "valid"), (2, (2, 2), (2, 1), "same"),
        (1, (3,), (2,), ((1,), (2,))), (3, (1, 2, 1), (1, 1, 2), "same"),
        (3, (2, 1, 1), (1, 1, 1), "valid"), (2, (1, 3), (1, 1), ((0, 2), (1, 0))),
    ]
    for gi, (d, stride, dil, padding) in enumerate(geoms):
        for sr in ALGEBRAS if gi == 0 else ["real", "tropical_max_plus", "log"]:
            sp = {1: (11,), 2: (7, 6), 3: (6, 5, 5)}[d]
            x = operand(rng, sr, (2,) + sp + (2,))
            k = operand(rng, sr, (3,) * (d - 1) + (2,) + (2, 2))
            lo, hi = conv_pads(sp, k.shape[:d], stride, dil, padding)
            out = conv_bf(sr, x, k, stride, dil, lo, hi)
            name = f"conv_{gi}_{sr}"
            save(name, x=x, k=k, out=out)
            pname = padding if isinstance(padding, str) else "explicit"
            los = ints(lo) if pname == "explicit" else "-"
            his = ints(hi) if pname == "explicit" else "-"
            lines.append(f"conv {name} {sr} {pname} {ints(stride)} {ints(dil)} {los} {his}")
    # pairwise reductions
    x = rng.standard_normal((7, 3))
    y = rng.standard_normal((9, 3))
    bw = rng.random(9)
    d2 = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    save("pw_gauss", x=x, y=y, b=bw, out=(np.exp(-d2) * bw[None, :]).sum(1)[:, None])
    lines.append("pairwise pw_gauss sum 0 exp(-sqdist(x,y))*b")
    eps = 0.5
    save("pw_lse", x=x, y=y, p=np.array([eps]),
         out=scipy.special.logsumexp(-d2 / eps, axis=1)[:, None])
    lines.append("pairwise pw_lse logsumexp 0 -sqdist(x,y)/p0")
    save("pw_argmin", x=x, y=y, out=np.argmin(d2, axis=1).astype(np.int64))
    lines.append("pairwise pw_argmin argmin 0 sqdist(x,y)")
    order = np.argsort(d2, axis=1, kind="stable")[:, :3]
    save("pw_kmin", x=x, y=y, out=np.take_along_axis(d2, order, 1), idx=order.astype(np.int64))
    lines.append("pairwise pw_kmin kmin 3 sqdist(x,y)")
    save("pw_min", x=x, y=y, out=d2.min(1)[:, None])
    lines.append("pairwise pw_min min 0 sqdist(x,y)")
    # Appended cases (drawn after the ones above, so those stay as they were).
    # conv with two batch dims, and f32 operands against the float64 oracle
    for sr in ("real", "tropical_min_plus"):
        xc = rng.standard_normal((2, 3, 6, 5, 2))
        kc = rng.standard_normal((3, 2, 2, 3))
        lo, hi = conv_pads((6, 5), (3, 2), (1, 2), (2, 1), "same")
        save(f"conv_b2_{sr}", x=xc, k=kc, out=conv_bf(sr, xc, kc, (1, 2), (2, 1), lo, hi))
        lines.append(f"conv conv_b2_{sr} {sr} same 1,2 2,1 - -")
        x32 = rng.standard_normal((1, 7, 2)).astype(np.float32)
        k32 = rng.standard_normal((3, 2, 4)).astype(np.float32)
        lo, hi = conv_pads((7,), (3,), (1,), (1,), "same")
        out = conv_bf(sr, x32.astype(np.float64), k32.astype(np.float64), (1,), (1,), lo, hi)
        save(f"conv_f32_{sr}", x=x32, k=k32, out=out)
        lines.append(f"conv conv_f32_{sr} {sr} same 1 1 - -")
    # vector-valued weights b [N, 2] and argmax
    b2 = rng.random((9, 2))
    save("pw_gauss_vec", x=x, y=y, b=b2, out=(np.exp(-d2)[:, :, None] * b2[None]).sum(1))
    lines.append("pairwise pw_gauss_vec sum 0 exp(-sqdist(x,y))*b")
    save("pw_argmax", x=x, y=y, out=np.argmax(-d2 + dot_xy(x, y), axis=1).astype(np.int64))
    lines.append("pairwise pw_argmax argmax 0 dot(x,y)-sqdist(x,y)")
    with open(os.path.join(OUT, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
