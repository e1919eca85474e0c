"""Writes <family>.pyi for every family of the op table: python -m nitrix._stubgen LIB OUTDIR
[FAMILY...]. Run by the build (python/meson.build) against the library it just linked; the listed
families must be exactly the table's (a new family is a new stub file, named in meson.build)."""
import importlib.util
import os
import sys


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def main(argv):
    if len(argv) < 3:
        print("usage: _stubgen.py LIB OUTDIR [FAMILY...]", file=sys.stderr)
        return 2
    lib_path, outdir, want = argv[1], argv[2], argv[3:]
    here = os.path.dirname(os.path.abspath(__file__))
    # Only the standard-library modules, without the package's __init__ (which needs NumPy).
    import types
    pkg = types.ModuleType("nitrix")
    pkg.__path__ = [here]
    sys.modules["nitrix"] = pkg
    lib_mod = _load("nitrix._lib", os.path.join(here, "_lib.py"))
    table = _load("nitrix._table", os.path.join(here, "_table.py"))
    ops = table.read_ops(lib_mod.load(os.path.abspath(lib_path)))
    texts = table.stubs(ops)
    if want and sorted(want) != sorted(texts):
        print(f"_stubgen: the build names the families {sorted(want)} but the op table has "
              f"{sorted(texts)}; list them in python/meson.build", file=sys.stderr)
        return 1
    for family, text in texts.items():
        with open(os.path.join(outdir, family + ".pyi"), "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
