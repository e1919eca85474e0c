#!/usr/bin/python3
"""Golden cases of an op family (golden/<family>/<case>/, the format of docs/fidelity.md),
computed with independent oracles (NumPy/SciPy in float64, scikit-learn, jax, closed forms),
never with nitrix.

The cases live in modules under tools/golden-cases/<family>/ (one per group of ops: for metrics
similarity.py, overlap.py, ...). Each module has PREFIX (its cases' folder names start with it)
and cases(rng), yielding dicts: name, op, dtype, inputs [(file, array)], outputs [(file, array)],
options [(key, value)], generator (the method), and optionally files [(file, array)] (written
into the case folder but not inputs: a tensor option's file, `sos=sos.npy`), fd / contract lines and
`needs`: the extra oracle packages the case used (among PINNED: "sklearn", "jax"), whose
pinned versions the manifest then names. This script removes a module's old cases (by prefix)
and writes its new ones. Files whose names start with "_" are helpers the modules share, not
case modules.

The environment is pinned (numpy 1.24, scipy 1.10, and where a case needs them scikit-learn
1.3, jax 0.4.30; the tool refuses others) and every manifest names the versions and the seed.
Run with a Python that has them:
    V/bin/python tools/gen-golden.py <family> [module ...]
"""
import glob
import importlib
import importlib.util
import os
import shutil
import sys

import numpy as np
import scipy

PINNED = {"numpy": "1.24", "scipy": "1.10", "sklearn": "1.3", "jax": "0.4.30"}
HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 20261207


def pinned(name, version):
    want = PINNED[name]
    return version == want or version.startswith(want + ".")


def check_pins():
    versions = {"numpy": np.__version__, "scipy": scipy.__version__}
    for k in ("sklearn", "jax"):
        try:
            versions[k] = importlib.import_module(k).__version__
        except ImportError:
            versions[k] = None
    for k in ("numpy", "scipy"):
        if not pinned(k, versions[k]):
            sys.exit(f"gen-golden.py: {k} {versions[k]} found, {PINNED[k]}.x pinned")
    return versions


def write_case(root, case, versions):
    d = os.path.join(root, case["name"])
    os.makedirs(d, exist_ok=True)
    for fname, arr in case["inputs"] + case["outputs"] + case.get("files", []):
        # np.ascontiguousarray would make a 0-d array 1-d
        np.save(os.path.join(d, fname), np.array(arr, order="C", copy=True))
    lines = [f"op = {case['op']}", f"dtype = {np.dtype(case['dtype']).name}",
             f"inputs = {' '.join(f for f, _ in case['inputs'])}",
             f"output = {' '.join(f for f, _ in case['outputs'])}",
             f"options = {' '.join(f'{k}={v}' for k, v in case.get('options', []))}",
             f"generator = {case['generator']}", f"numpy = {versions['numpy']}",
             f"scipy = {versions['scipy']}"]
    needs = list(case.get("needs", []))
    if case.get("sklearn"):
        needs.append("sklearn")
    for k in needs:
        if not versions.get(k) or not pinned(k, versions[k]):
            sys.exit(f"gen-golden.py: {case['name']} needs {k} {PINNED[k]}.x, "
                     f"found {versions.get(k)}")
        lines.append(f"{k} = {versions[k]}")
    lines.append(f"seed = {SEED}")
    for key in ("fd", "contract"):
        if case.get(key):
            lines.append(f"{key} = {case[key]}")
    with open(os.path.join(d, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def load(family, path):
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(f"golden_{family}_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return name, mod


def main():
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.exit("usage: gen-golden.py <family> [module ...]  (modules: "
                 "tools/golden-cases/<family>/<module>.py)")
    family = sys.argv[1]
    modules = sorted(m for m in glob.glob(os.path.join(HERE, "golden-cases", family, "*.py"))
                     if not os.path.basename(m).startswith("_"))
    if not modules:
        sys.exit(f"gen-golden.py: no case modules in tools/golden-cases/{family}/")
    root = os.path.join(HERE, "..", "golden", family)
    versions = check_pins()
    wanted = set(sys.argv[2:])
    for path in modules:
        name, mod = load(family, path)
        if wanted and name not in wanted:
            continue
        for old in glob.glob(os.path.join(root, mod.PREFIX + "*")):
            shutil.rmtree(old)
        rng = np.random.RandomState(SEED + sum(map(ord, name)))
        for case in mod.cases(rng):
            if not case["name"].startswith(mod.PREFIX):
                sys.exit(f"{name}: case {case['name']} does not start with {mod.PREFIX}")
            write_case(root, case, versions)


if __name__ == "__main__":
    main()
