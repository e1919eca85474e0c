#!/bin/sh
# The README's C example (docs/examples/hello.c) cannot rot: it is built and run, the README's
# snippet must be the file, and it must build out of tree against an installed nitrix through
# pkg-config. POSIX sh, no Python.
#
#   example-test.sh run     HELLO_EXE VERSION
#   example-test.sh readme  README.md hello.c
#   example-test.sh install MESON BUILD_ROOT PKG_CONFIG hello.c VERSION CC [CFLAG ...]
#   example-test.sh graph   GRAPH_EXE
#   example-test.sh op-matrix docs/op-matrix.md ir/prims.def tools/cli/ops.def
set -u

mode=$1
shift
tmp=$(mktemp -d "${TMPDIR:-/tmp}/nitrix-example.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

# check_hello_output FILE VERSION: 0.5 i - 1 for i = 0..5 is -1 -0.5 0 0.5 1 1.5; as i32 (toward
# zero) -1 0 0 0 1 1.
check_hello_output() {
    want="nitrix $2: i32 [2,3] = -1 0 0 0 1 1"
    got=$(cat "$1")
    if [ "$got" = "$want" ]; then
        echo "ok: hello printed '$got'"
        return 0
    fi
    echo "FAIL: hello printed '$got', expected '$want'"
    return 1
}

case "$mode" in
run)
    if ! "$1" "$tmp/hello.npy" >"$tmp/out" 2>"$tmp/err"; then
        echo "FAIL: hello exited with an error: $(head -c 400 "$tmp/err")"
        exit 1
    fi
    check_hello_output "$tmp/out" "$2" || exit 1
    # The file it wrote is a version 1.0 .npy of little-endian int32, shape (2, 3).
    if head -c 80 "$tmp/hello.npy" | grep -q "'descr': '<i4', 'fortran_order': False, 'shape': (2, 3)"; then
        echo "ok: hello.npy has the expected header"
    else
        echo "FAIL: hello.npy header: $(head -c 80 "$tmp/hello.npy" | tr -cd '[:print:]')"
        exit 1
    fi
    ;;
readme)
    # The first ```c block after the "Using the library from C" heading.
    awk '/^## Using the library from C/ { s = 1 }
         s && /^```c$/ { p = 1; next }
         p && /^```$/ { exit }
         p' "$1" >"$tmp/snippet.c"
    if [ ! -s "$tmp/snippet.c" ]; then
        echo "FAIL: no \`\`\`c block under '## Using the library from C' in $1"
        exit 1
    fi
    if ! cmp -s "$tmp/snippet.c" "$2"; then
        echo "FAIL: the README's example differs from $2:"
        diff "$tmp/snippet.c" "$2" | head -20
        exit 1
    fi
    echo "ok: the README's example is docs/examples/hello.c ($(wc -l <"$2") lines)"
    ;;
install)
    meson=$1
    build=$2
    pkgconfig=$3
    src=$4
    version=$5
    cc=$6
    shift 6
    dest="$tmp/root"
    unset LD_LIBRARY_PATH # meson test points it at the build tree; we want the installed copy
    if ! "$meson" install -C "$build" --destdir "$dest" --no-rebuild >"$tmp/install.log" 2>&1; then
        echo "FAIL: meson install --destdir failed:"
        tail -20 "$tmp/install.log"
        exit 1
    fi
    pc=$(find "$dest" -name nitrix.pc | head -n 1)
    [ -n "$pc" ] || { echo "FAIL: no nitrix.pc under the install root"; exit 1; }
    pcdir=$(dirname "$pc")
    echo "ok: installed; pkg-config file $pc"
    # The .pc file names the real prefix; the sysroot maps its paths into the install root.
    export PKG_CONFIG_PATH="$pcdir" PKG_CONFIG_LIBDIR="$pcdir" PKG_CONFIG_SYSROOT_DIR="$dest"
    got=$("$pkgconfig" --modversion nitrix) || { echo "FAIL: pkg-config does not find nitrix"; exit 1; }
    [ "$got" = "$version" ] || { echo "FAIL: pkg-config says version $got, expected $version"; exit 1; }
    flags=$("$pkgconfig" --cflags --libs nitrix) || exit 1
    echo "ok: pkg-config nitrix $got: $flags"
    # shellcheck disable=SC2086 # flags are words
    if ! "$cc" "$@" -o "$tmp/hello" "$src" $flags >"$tmp/cc.log" 2>&1; then
        echo "FAIL: compiling hello.c against the installed library:"
        tail -20 "$tmp/cc.log"
        exit 1
    fi
    echo "ok: hello.c compiled against the installed headers and library"
    libdir=$(dirname "$(find "$dest" -name 'libnitrix.so' | head -n 1)")
    if ! LD_LIBRARY_PATH="$libdir" "$tmp/hello" "$tmp/hello.npy" >"$tmp/out"; then
        echo "FAIL: the out-of-tree hello exited $?"
        exit 1
    fi
    check_hello_output "$tmp/out" "$version" || exit 1
    if LD_LIBRARY_PATH="$libdir" ldd "$tmp/hello" | grep -q "$libdir/libnitrix.so"; then
        echo "ok: hello runs against the installed libnitrix.so"
    else
        echo "FAIL: hello did not load the installed libnitrix.so: $(ldd "$tmp/hello" | grep nitrix)"
        exit 1
    fi
    exe=$(find "$dest" -path '*/bin/nitrix' | head -n 1)
    if [ -n "$exe" ] && [ "$("$exe" --version)" = "nitrix $version" ]; then
        echo "ok: the installed nitrix runs"
    else
        echo "FAIL: the installed nitrix executable is missing or does not run"
        exit 1
    fi
    ;;
graph)
    # x = 1 2 3 4 5 with reflect padding is 1 1 2 3 4 5 5; the 3-tap means are 4/3 2 3 4 14/3.
    want="moving average: 1.3333 2.0000 3.0000 4.0000 4.6667"
    if ! got=$("$1" 2>"$tmp/err"); then
        echo "FAIL: graph example exited with an error: $(head -c 400 "$tmp/err")"
        exit 1
    fi
    [ "$got" = "$want" ] || { echo "FAIL: graph example printed '$got', expected '$want'"; exit 1; }
    echo "ok: graph example printed '$got'"
    ;;
op-matrix)
    # Every primitive and every `nitrix run` op has a row (the table is maintained by hand).
    missing=0
    # (rows under #ifdef NX_TEST_PRIM_ROW exist in a test build only)
    names=$(sed '/^#ifdef NX_TEST_PRIM_ROW/,/^#endif/d' "$2" |
        grep -o 'NX_PRIM([A-Z_0-9]*, *"[a-z_0-9]*"' | sed 's/.*"\(.*\)"/\1/')
    names="$names $(grep -o '^NX_CLI_OP([a-z_0-9]*' "$3" | sed 's/NX_CLI_OP(//')"
    count=0
    for n in $names; do
        count=$((count + 1))
        if ! grep -q "^| \`$n\` |" "$1"; then
            echo "FAIL: $1 has no row for '$n'"
            missing=$((missing + 1))
        fi
    done
    [ "$count" -gt 2 ] || { echo "FAIL: found only $count names in $2 and $3"; exit 1; }
    [ "$missing" -eq 0 ] || exit 1
    echo "ok: $1 has a row for each of the $count primitives and ops"
    ;;
*)
    echo "usage: example-test.sh run|readme|install|graph|op-matrix ..." >&2
    exit 2
    ;;
esac
