#!/usr/bin/python3
"""The layer rule (docs/architecture.md, "Layers"): every #include "..." points down the order

    include <- runtime <- ir <- frontend <- passes <- codegen <- codegen/{x86,ptx} <- program
            <- ops <- tools

and besides:
  - codegen/x86 and codegen/ptx never include each other (a backend never runs another);
  - the backends never include passes/ (they see kernel IR only);
  - ops/ never includes a backend header (codegen/x86, codegen/ptx): ops reach backends through
    program/.

Usage: check-layers.py ROOT      scans ROOT, prints each forbidden edge as FILE:LINE: ..., and
                                 exits 1 when there is one.
       check-layers.py --self-test ROOT
                                 checks the checker: a copy of ROOT passes exactly when ROOT does,
                                 and each kind of forbidden include, added to the copy, is found
                                 and named.

Python 3 standard library only.
"""
import os
import re
import shutil
import sys
import tempfile

# Scanned folders, in layer order; a file's layer is its longest matching folder.
ORDER = ["include", "runtime", "ir", "frontend", "passes", "codegen", "codegen/x86",
         "codegen/ptx", "program", "ops", "tools"]
RANK = {"include": 0, "runtime": 1, "ir": 2, "frontend": 3, "passes": 4, "codegen": 5,
        "codegen/x86": 6, "codegen/ptx": 6, "program": 7, "ops": 8, "tools": 9,
        "bench": 9}  # bench/ is not scanned; tools/cli links it, so it ranks with tools
BACKENDS = ("codegen/x86", "codegen/ptx")
# The project's include path (meson.build: include_directories('include', 'runtime', '.')),
# searched after the including file's own folder, as the compiler does for "...".
SEARCH = ["include", "runtime", "."]
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def layer_of(rel):
    best = None
    for name in RANK:
        if rel == name or rel.startswith(name + "/"):
            if best is None or len(name) > len(best):
                best = name
    return best


def resolve(root, src_rel, target):
    """The included file's path relative to root, or None when it is not in the tree."""
    for base in [os.path.dirname(src_rel)] + SEARCH:
        cand = os.path.normpath(os.path.join(base, target))
        if not cand.startswith("..") and os.path.isfile(os.path.join(root, cand)):
            return cand.replace(os.sep, "/")
    return None


def forbidden(src_layer, dst_layer):
    """Why an include from src_layer to dst_layer breaks the rule, or None."""
    if dst_layer is None or src_layer == dst_layer:
        return None
    if src_layer in BACKENDS and dst_layer in BACKENDS:
        return "one backend includes the other (%s -> %s)" % (src_layer, dst_layer)
    if src_layer in BACKENDS and dst_layer == "passes":
        return "a backend includes passes/ (backends see kernel IR only)"
    if src_layer == "ops" and dst_layer in BACKENDS:
        return "ops/ includes a backend header (use program/program.h)"
    if RANK[dst_layer] > RANK[src_layer]:
        return "%s/ includes the later layer %s/" % (src_layer, dst_layer)
    return None


def sources(root):
    for top in ORDER:
        if "/" in top:
            continue  # walked with its parent
        base = os.path.join(root, top)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            for f in sorted(filenames):
                if f.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/")


def check(root):
    """A list of (file, line, include, why) for every forbidden edge under root."""
    bad = []
    nfiles = 0
    for rel in sources(root):
        nfiles += 1
        src_layer = layer_of(rel)
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
            for no, text in enumerate(fh, 1):
                m = INCLUDE.match(text)
                if not m:
                    continue
                dst = resolve(root, rel, m.group(1))
                if dst is None:
                    continue  # a system or generated header: not a layer edge
                why = forbidden(src_layer, layer_of(dst))
                if why:
                    bad.append((rel, no, m.group(1), dst, why))
    return nfiles, bad


def report(bad):
    for rel, no, inc, dst, why in bad:
        print('%s:%d: #include "%s" (%s): %s' % (rel, no, inc, dst, why))


def main_check(root):
    nfiles, bad = check(root)
    report(bad)
    if nfiles == 0:
        print("check-layers: no .c/.h files under %s: wrong root?" % root)
        return 1
    print("check-layers: %d files, %d forbidden includes" % (nfiles, len(bad)))
    return 1 if bad else 0


# Each case: a file to add to the copy, an include it makes, and the words its report must have.
CASES = [
    ("ir/zz-bad.c", "codegen/kernel.h", "ir/ includes the later layer codegen/"),
    ("ir/zz-bad.c", "passes/fuse.h", "ir/ includes the later layer passes/"),
    ("ir/zz-bad.c", "program/program.h", "ir/ includes the later layer program/"),
    ("passes/zz-bad.c", "codegen/kernel.h", "passes/ includes the later layer codegen/"),
    ("runtime/zz-bad.c", "ir/ir.h", "runtime/ includes the later layer ir/"),
    ("frontend/zz-bad.c", "ops/semiring/semiring.h", "frontend/ includes the later layer ops/"),
    ("codegen/zz-bad.c", "codegen/x86/emit.h", "codegen/ includes the later layer codegen/x86/"),
    ("codegen/ptx/zz-bad.c", "codegen/x86/emit.h", "one backend includes the other"),
    ("codegen/x86/zz-bad.c", "codegen/ptx/emit.h", "one backend includes the other"),
    ("codegen/x86/zz-bad.c", "passes/fuse.h", "a backend includes passes/"),
    ("codegen/ptx/zz-bad.c", "program/program.h", "codegen/ptx/ includes the later layer program/"),
    ("ops/zz-bad.c", "codegen/ptx/emit.h", "ops/ includes a backend header"),
    ("ops/zz-bad.c", "codegen/x86/emit.h", "ops/ includes a backend header"),
    ("program/zz-bad.c", "ops/semiring/semiring.h", "program/ includes the later layer ops/"),
    ("include/zz-bad.h", "cache.h", "include/ includes the later layer runtime/"),
]


def self_test(root):
    failures = 0
    _, real = check(root)
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "tree")
        for top in [t for t in ORDER if "/" not in t]:
            if os.path.isdir(os.path.join(root, top)):
                shutil.copytree(os.path.join(root, top), os.path.join(copy, top))
        _, base = check(copy)
        if [b[:2] for b in base] != [b[:2] for b in real]:
            print("self-test: the copy's verdict differs from the tree's")
            failures += 1
        for rel, inc, words in CASES:
            path = os.path.join(copy, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as fh:
                fh.write('/* a forbidden include */\n#include <stdio.h>\n#include "%s"\n' % inc)
            _, got = check(copy)
            os.remove(path)
            new = [g for g in got if g[0] == rel]
            if len(new) != 1 or new[0][1] != 3 or words not in new[0][4]:
                print('self-test: %s including "%s" gave %r; expected one report at line 3 '
                      'saying "%s"' % (rel, inc, new, words))
                failures += 1
        # An allowed edge down the order stays quiet.
        path = os.path.join(copy, "ops", "zz-ok.c")
        with open(path, "w") as fh:
            fh.write('#include "program/program.h"\n#include "ir/ir.h"\n#include "cache.h"\n')
        _, got = check(copy)
        if [g for g in got if g[0] == "ops/zz-ok.c"]:
            print("self-test: includes down the order were reported")
            failures += 1
    print("check-layers self-test: %d cases, %d failures" % (len(CASES) + 2, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "--self-test":
        sys.exit(self_test(args[1]))
    if len(args) == 1:
        sys.exit(main_check(args[0]))
    print(__doc__)
    sys.exit(2)
