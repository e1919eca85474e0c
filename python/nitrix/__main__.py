"""python -m nitrix [demo|info|ops]: a short smoke run of the package (demo, the default),
what the library found (info), or the op functions (ops)."""
import json
import sys
import time

import numpy as np

import nitrix


def demo():
    """A 3-D phantom through a small pipeline: smooth, threshold, close, label."""
    z, y, x = np.mgrid[:32, :32, :32].astype(np.float32)
    vol = ((x - 10) ** 2 + (y - 12) ** 2 + (z - 16) ** 2 < 36).astype(np.float32)
    vol += ((x - 22) ** 2 + (y - 20) ** 2 + (z - 16) ** 2 < 25).astype(np.float32)
    vol += np.random.default_rng(0).normal(0, 0.2, vol.shape).astype(np.float32)
    t0 = time.perf_counter()
    smooth = nitrix.smoothing.gaussian(vol, sigma=1.0)
    mask = (smooth > 0.5).astype(np.uint8)
    closed = nitrix.morphology.close(mask, size=3)
    labels, count = nitrix.morphology.connected_components(closed)
    dt = time.perf_counter() - t0
    sizes = np.bincount(labels.ravel())[1:]
    print(f"nitrix {nitrix.__version__} from Python: 32^3 phantom -> gaussian(sigma=1) -> "
          f"threshold -> close(size=3) -> {int(count)} components of {sorted(sizes.tolist())} "
          f"voxels ({dt * 1e3:.1f} ms, backend {nitrix.default_context().backend})")
    return 0 if int(count) == 2 else 1


def main(argv):
    what = argv[1] if len(argv) > 1 else "demo"
    if what == "demo":
        return demo()
    if what == "info":
        print(json.dumps(nitrix.info(), indent=2))
        return 0
    if what == "ops":
        for op in nitrix.ops:
            print(f"nitrix.{op.family}.{op.name}")
        return 0
    print("usage: python -m nitrix [demo|info|ops]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
