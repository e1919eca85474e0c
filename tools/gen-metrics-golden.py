#!/usr/bin/python3
"""Golden cases of the metrics family (golden/metrics/<case>/, the format of docs/fidelity.md),
computed with NumPy/SciPy (and scikit-learn where a module says so) in float64, never with nitrix.

The cases live in modules under tools/metrics-golden/ (one per group of ops: similarity.py,
overlap.py, ...). Each module has PREFIX (its cases' folder names start with it) and
cases(rng), yielding dicts: name, op, dtype, inputs [(file, array)], outputs [(file, array)],
options [(key, value)], generator (the method), and optionally fd / contract lines. This script
removes a module's old cases (by prefix) and writes its new ones.

The environment is pinned (numpy 1.24, scipy 1.10, scikit-learn 1.3; the tool refuses others)
and every manifest names the versions and the seed. Run with a Python that has them:
    V/bin/python tools/gen-metrics-golden.py [module ...]
"""
import glob
import importlib.util
import os
import shutil
import sys

import numpy as np
import scipy

PINNED = {"numpy": "1.24", "scipy": "1.10", "sklearn": "1.3"}
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "golden", "metrics")
SEED = 20261207


def pinned(name, version):
    want = PINNED[name]
    return version == want or version.startswith(want + ".")


def check_pins():
    versions = {"numpy": np.__version__, "scipy": scipy.__version__}
    try:
        import sklearn
        versions["sklearn"] = sklearn.__version__
    except ImportError:
        versions["sklearn"] = None
    for k in ("numpy", "scipy"):
        if not pinned(k, versions[k]):
            sys.exit(f"gen-metrics-golden.py: {k} {versions[k]} found, {PINNED[k]}.x pinned")
    return versions


def write_case(case, versions):
    d = os.path.join(ROOT, case["name"])
    os.makedirs(d, exist_ok=True)
    for fname, arr in case["inputs"] + case["outputs"]:
        # np.ascontiguousarray would make a 0-d array 1-d
        np.save(os.path.join(d, fname), np.array(arr, order="C", copy=True))
    lines = [f"op = {case['op']}", f"dtype = {np.dtype(case['dtype']).name}",
             f"inputs = {' '.join(f for f, _ in case['inputs'])}",
             f"output = {' '.join(f for f, _ in case['outputs'])}",
             f"options = {' '.join(f'{k}={v}' for k, v in case.get('options', []))}",
             f"generator = {case['generator']}", f"numpy = {versions['numpy']}",
             f"scipy = {versions['scipy']}"]
    if case.get("sklearn"):
        if not versions["sklearn"] or not pinned("sklearn", versions["sklearn"]):
            sys.exit(f"gen-metrics-golden.py: {case['name']} needs scikit-learn "
                     f"{PINNED['sklearn']}.x, found {versions['sklearn']}")
        lines.append(f"sklearn = {versions['sklearn']}")
    lines.append(f"seed = {SEED}")
    for key in ("fd", "contract"):
        if case.get(key):
            lines.append(f"{key} = {case[key]}")
    with open(os.path.join(d, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def load(path):
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location("metrics_golden_" + name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return name, mod


def main():
    versions = check_pins()
    wanted = set(sys.argv[1:])
    for path in sorted(glob.glob(os.path.join(HERE, "metrics-golden", "*.py"))):
        name, mod = load(path)
        if wanted and name not in wanted:
            continue
        for old in glob.glob(os.path.join(ROOT, mod.PREFIX + "*")):
            shutil.rmtree(old)
        rng = np.random.RandomState(SEED + sum(map(ord, name)))
        for case in mod.cases(rng):
            if not case["name"].startswith(mod.PREFIX):
                sys.exit(f"{name}: case {case['name']} does not start with {mod.PREFIX}")
            write_case(case, versions)


if __name__ == "__main__":
    main()
