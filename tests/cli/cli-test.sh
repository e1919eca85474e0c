#!/bin/sh
# Drives the built `nitrix` executable and checks exit codes and outputs. POSIX sh, no Python.
#
#   cli-test.sh info   NITRIX VERSION
#   cli-test.sh run    NITRIX DATA_DIR
#   cli-test.sh errors NITRIX DATA_DIR
#   cli-test.sh demo   NITRIX
#   cli-test.sh targets|streams NITRIX DATA_DIR
#   cli-test.sh exit-codes NITRIX DATA_DIR [all|few]
#
# Expected .npy outputs in DATA_DIR were written by NumPy (tools/cli/gen-cli-fixtures.py); the
# CLI's output must equal them byte for byte, header included.
set -u

pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; }

mode=$1
exe=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/nitrix-cli-test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

# run CMD...: runs it, stdout in $tmp/out, stderr in $tmp/err, exit code in $rc.
run() {
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}

# expect_rc WANT DESC CMD...
expect_rc() {
    want=$1
    desc=$2
    shift 2
    run "$@"
    if [ "$rc" -eq "$want" ]; then
        ok "$desc (exit $rc)"
    else
        bad "$desc: exit $rc, expected $want; stderr: $(head -c 300 "$tmp/err")"
    fi
}

# expect_error WANT DESC CMD...: exit WANT, nothing on stdout, one line on stderr: "nitrix: ...".
expect_error() {
    want=$1
    desc=$2
    shift 2
    run "$@"
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" -ne "$want" ]; then
        bad "$desc: exit $rc, expected $want; stderr: $(head -c 300 "$tmp/err")"
    elif [ "$lines" -ne 1 ] || ! grep -q '^nitrix: ' "$tmp/err"; then
        bad "$desc: expected one line 'nitrix: ...' on stderr, got $lines: $(head -c 300 "$tmp/err")"
    elif [ -s "$tmp/out" ]; then
        bad "$desc: expected nothing on stdout, got: $(head -c 200 "$tmp/out")"
    else
        ok "$desc (exit $rc: $(cat "$tmp/err"))"
    fi
}

# expect_out DESC PATTERN: the last command's stdout has a line matching the basic regex.
expect_out() {
    if grep -q -- "$2" "$tmp/out"; then
        ok "$1"
    else
        bad "$1: no line matching '$2' in: $(head -c 600 "$tmp/out")"
    fi
}

# same DESC GOT WANT: byte-identical files.
same() {
    if [ -f "$2" ] && cmp -s "$2" "$3"; then
        ok "$1"
    else
        bad "$1: $2 differs from $3 ($(cmp "$2" "$3" 2>&1 | head -c 200))"
    fi
}

# ---------------------------------------------------------------------------------------------
test_info() {
    version=$1
    cache="$tmp/cache"
    mkdir -p "$cache/sub/deeper"
    # 1000 bytes in three files at three depths; a symlink that must not be followed or counted.
    head -c 100 /dev/zero >"$cache/a"
    head -c 200 /dev/zero >"$cache/sub/b"
    head -c 700 /dev/zero >"$cache/sub/deeper/c"
    ln -s /dev/zero "$cache/link" 2>/dev/null || true
    run env NITRIX_CACHE_DIR="$cache" NITRIX_BACKEND=auto "$exe" info
    [ "$rc" -eq 0 ] && ok "info exits 0" || bad "info: exit $rc: $(cat "$tmp/err")"
    expect_out "info prints the version" "^nitrix  *$version\$"
    expect_out "info prints the cache dir and its size" "^cache  *$cache (1000 B)\$"
    expect_out "info prints the CPU" "^cpu  *.*[1-9][0-9]* logical CPUs\$"
    expect_out "info prints the LLVM version" "^llvm  *[0-9][0-9]*\.[0-9]"
    expect_out "info finds the ref backend" "^backends  *ref  *compiled in (reference interpreter), available$"
    expect_out "info lists the cpu backend" "^  *cpu  *compiled in (LLVM"
    expect_out "info lists the cuda backend" "^  *cuda  *compiled in (NVRTC"
    expect_out "info prints the CUDA status" "^cuda  *."
    expect_out "info prints the settings" "^settings  *backend=auto "
    run env NITRIX_CACHE_DIR="$tmp/missing" NITRIX_BACKEND=ref "$exe" info
    expect_out "info: a cache dir that does not exist" "^cache  *$tmp/missing (not created yet)\$"
    expect_out "info shows NITRIX_BACKEND" "^settings  *backend=ref "
    expect_rc 0 "info --help" "$exe" info --help
    expect_out "info --help prints usage" "^usage: nitrix info"
    expect_rc 0 "info --divergent" "$exe" info --divergent
    expect_error 2 "info with an unknown option" "$exe" info --frobnicate
    expect_error 2 "info with an extra argument" "$exe" info extra
    expect_error 2 "a bad NITRIX_BACKEND" env NITRIX_BACKEND=gpu "$exe" info
    expect_error 2 "a bad NITRIX_NUM_THREADS" env NITRIX_NUM_THREADS=lots "$exe" info
    expect_rc 0 "--version" "$exe" --version
    expect_out "--version prints the version" "^nitrix $version\$"
    expect_rc 0 "--help" "$exe" --help
    expect_out "--help lists the commands" "^  run "
}

# ---------------------------------------------------------------------------------------------
# cast_case IN DTYPE WANT
cast_case() {
    out="$tmp/cast-$1-$2.npy"
    expect_rc 0 "run cast $1 --dtype=$2" "$exe" run cast "--dtype=$2" "$data/x-$1.npy" -o "$out"
    same "cast $1 to $2 equals numpy's astype, byte for byte" "$out" "$data/$3"
}

test_run() {
    for f in f64 i32 u8 bool f32-fortran f64-v2 f64-0d i16-empty; do
        out="$tmp/copy-$f.npy"
        expect_rc 0 "run copy x-$f.npy" "$exe" run copy "$data/x-$f.npy" -o "$out"
        want="$data/want-$f-copy.npy"
        [ -f "$want" ] || want="$data/x-$f.npy"
        same "copy of x-$f.npy equals numpy's C-order file, byte for byte" "$out" "$want"
    done
    expect_rc 0 "run copy, options after the file" "$exe" run copy "$data/x-f64.npy" \
        -o "$tmp/copy2.npy" --backend=ref
    same "copy with --backend=ref" "$tmp/copy2.npy" "$data/x-f64.npy"
    expect_rc 0 "run copy of a copy" "$exe" run copy "$tmp/copy2.npy" -o "$tmp/copy3.npy"
    same "a copy of a copy is the same file" "$tmp/copy3.npy" "$data/x-f64.npy"
    expect_rc 0 "run copy -- FILE" "$exe" run copy -o "$tmp/copy4.npy" -- "$data/x-f64.npy"
    same "copy after --" "$tmp/copy4.npy" "$data/x-f64.npy"

    cast_case f64 f32 want-f64-to-f32.npy
    cast_case f64 f16 want-f64-to-f16.npy
    cast_case f64 i32 want-f64-to-i32.npy
    cast_case f64 int64 want-f64-to-i64.npy
    cast_case f64 bool want-f64-to-bool.npy
    cast_case i32 f64 want-i32-to-f64.npy
    cast_case i32 float32 want-i32-to-f32.npy
    cast_case i32 i64 want-i32-to-i64.npy
    cast_case i32 bool want-i32-to-bool.npy
    cast_case i32 i16 want-i32-to-i16.npy
    cast_case i32 u8 want-i32-to-u8.npy
    cast_case u8 f32 want-u8-to-f32.npy
    cast_case bool i32 want-bool-to-i32.npy
    cast_case f64 f64 x-f64.npy
    # NumPy's spellings (tests/unit/dtype-spellings.h has them all)
    cast_case f64 f8 x-f64.npy
    cast_case f64 double x-f64.npy
    cast_case f64 d x-f64.npy
    cast_case f64 float x-f64.npy
    cast_case f64 '<f4' want-f64-to-f32.npy
    cast_case f64 '=f4' want-f64-to-f32.npy
    cast_case f64 f want-f64-to-f32.npy
    cast_case f64 half want-f64-to-f16.npy
    cast_case f64 e want-f64-to-f16.npy
    cast_case f64 i4 want-f64-to-i32.npy
    cast_case f64 intc want-f64-to-i32.npy
    cast_case f64 '<i8' want-f64-to-i64.npy
    cast_case f64 int want-f64-to-i64.npy
    cast_case f64 b1 want-f64-to-bool.npy
    cast_case f64 '?' want-f64-to-bool.npy
    cast_case i32 B want-i32-to-u8.npy
    cast_case i32 h want-i32-to-i16.npy
    expect_error 2 "cast --dtype='>f4' (big-endian) is refused" \
        "$exe" run cast '--dtype=>f4' "$data/x-f64.npy" -o "$tmp/be.npy"
    grep -q "big-endian" "$tmp/err" && ok "the refusal says big-endian" || bad "'>f4': $(cat "$tmp/err")"
    expect_error 2 "cast --dtype=c8 (complex) is refused" \
        "$exe" run cast --dtype=c8 "$data/x-f64.npy" -o "$tmp/c8.npy"

    # Values the cast cannot represent are bad input: exit 2 with the library's message.
    expect_error 2 "cast NaN to i32 is refused as bad input" \
        "$exe" run cast --dtype=i32 "$data/x-f64-nan.npy" -o "$tmp/nan.npy"
    expect_error 2 "cast 65519.0 to i8 is refused as bad input" \
        "$exe" run cast --dtype=i8 "$data/x-f64.npy" -o "$tmp/i16.npy"
    if [ -e "$tmp/nan.npy" ] || [ -e "$tmp/i16.npy" ]; then
        bad "a failed run left an output file"
    else
        ok "a failed run leaves no output file"
    fi
    # No device cast yet: a cuda request falls back to the host loudly, as the library does.
    run "$exe" run cast --dtype=f32 --backend=cuda "$data/x-f64.npy" -o "$tmp/c.npy"
    if [ "$rc" -eq 0 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^nitrix: warning: cast:" "$tmp/err"; then
        ok "cast --backend=cuda falls back to the host with one warning"
    else
        bad "cast --backend=cuda: exit $rc, stderr: $(cat "$tmp/err")"
    fi
    same "cast --backend=cuda output" "$tmp/c.npy" "$data/want-f64-to-f32.npy"
    run env NITRIX_SILENCE_FALLBACK=1 "$exe" run cast --dtype=f32 --backend=cuda "$data/x-f64.npy" -o "$tmp/c2.npy"
    if [ "$rc" -eq 0 ] && [ ! -s "$tmp/err" ]; then
        ok "NITRIX_SILENCE_FALLBACK=1 silences the fallback warning"
    else
        bad "cast --backend=cuda, silenced: exit $rc, stderr: $(cat "$tmp/err")"
    fi
    expect_error 1 "cast --backend=cuda under NITRIX_STRICT_BACKEND=1 fails" env NITRIX_STRICT_BACKEND=1 \
        "$exe" run cast --dtype=f32 --backend=cuda "$data/x-f64.npy" -o "$tmp/c3.npy"
    # copy --backend=cuda goes through the device: it works on a GPU and fails cleanly elsewhere.
    run "$exe" run copy --backend=cuda "$data/x-f64.npy" -o "$tmp/cuda.npy"
    if [ "$rc" -eq 0 ] && cmp -s "$tmp/cuda.npy" "$data/x-f64.npy"; then
        ok "copy --backend=cuda round-trips through the GPU"
    elif [ "$rc" -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ]; then
        ok "copy --backend=cuda without a GPU: exit 1, $(cat "$tmp/err")"
    else
        bad "copy --backend=cuda: exit $rc: $(cat "$tmp/err")"
    fi

    expect_rc 0 "run --list" "$exe" run --list
    expect_out "run --list names copy" "^copy  *y = x"
    expect_out "run --list names cast" "^cast  *y = x.astype"
    expect_rc 0 "run --help" "$exe" run --help
    expect_out "run --help prints usage" "^usage: nitrix run OP"
    expect_rc 0 "run cast --help" "$exe" run cast --help
    expect_out "run cast --help shows the usage" "^usage: nitrix run cast \[options\] x.npy -o OUT.npy"
    expect_out "run cast --help shows --dtype as required" "^  --dtype=dtype .*(required)"
    expect_out "run cast --help shows --backend" "^  --backend=auto|cpu|cuda|ref"
    # The op table: --list shows each row's family, legacy commands are marked; --help comes
    # from the row and its schema; aliases, op names and option values in any case.
    expect_rc 0 "run --list" "$exe" run --list
    expect_out "run --list shows the family" "^cast  *y = x.astype.*\[core\]\$"
    expect_out "run --list marks the legacy table's commands" "^morph  *.*\[legacy\]\$"
    expect_rc 0 "run cast --help" "$exe" run cast --help
    expect_out "run cast --help names the family" "^family: core\$"
    expect_out "run cast --help names the outputs" "^outputs: y\$"
    expect_out "run cast --help lists the alias" "^aliases (deprecated): astype\$"
    expect_rc 0 "run astype (an alias of cast)" "$exe" run astype --dtype=f32 "$data/x-f64.npy" -o "$tmp/alias.npy"
    same "astype equals cast" "$tmp/alias.npy" "$data/want-f64-to-f32.npy"
    expect_rc 0 "run CAST --DType=F32 --backend=REF (any case)" "$exe" run CAST --DType=F32 --backend=REF \
        "$data/x-f64.npy" -o "$tmp/upper.npy"
    same "values in any case" "$tmp/upper.npy" "$data/want-f64-to-f32.npy"
    # connected_components returns scipy's count too: written as a 0-d i64 and printed
    cc="$data/../../../golden/morphology/cc3_c1"
    k_want=$(sed -n 's/^count = //p' "$cc/manifest.txt")
    expect_rc 0 "connected_components with two outputs" "$exe" run connected_components \
        --connectivity=1 "$cc/mask.npy" -o "$tmp/lab.npy" -o "$tmp/k.npy"
    expect_out "connected_components prints scipy's count ($k_want)" "^num_labels: $k_want\$"
    same "the labels equal scipy's" "$tmp/lab.npy" "$cc/out.npy"
    same "num_labels equals NumPy's file of scipy's count" "$tmp/k.npy" "$cc/num_labels.npy"
    head -c 128 "$tmp/k.npy" | grep -q "'descr': '<i8'.*'shape': ()" && ok "num_labels is a 0-d i64" ||
        bad "num_labels header: $(head -c 128 "$tmp/k.npy")"
    expect_rc 0 "connected_components with the labels only" "$exe" run connected_components \
        --connectivity=1 "$cc/mask.npy" -o "$tmp/lab2.npy"
    expect_out "the count is printed without its -o" "^num_labels: $k_want\$"
    same "the labels alone" "$tmp/lab2.npy" "$cc/out.npy"
    expect_rc 0 "run copy x.npy --help with other arguments" "$exe" run copy x.npy --help
    expect_out "run copy --help" "^usage: nitrix run copy"
}

# ---------------------------------------------------------------------------------------------
test_errors() {
    x="$data/x-f64.npy"
    o="$tmp/o.npy"
    expect_error 2 "no command" "$exe"
    expect_error 2 "unknown command" "$exe" frobnicate
    expect_error 2 "run without an op" "$exe" run
    expect_error 2 "unknown op" "$exe" run dilate_everything "$x" -o "$o"
    expect_error 2 "unknown option" "$exe" run copy --size=3 "$x" -o "$o"
    expect_error 2 "unknown short option" "$exe" run copy -x "$x" -o "$o"
    expect_error 2 "bad dtype" "$exe" run cast --dtype=f99 "$x" -o "$o"
    expect_error 2 "empty dtype" "$exe" run cast --dtype= "$x" -o "$o"
    expect_error 2 "dtype without a value" "$exe" run cast --dtype "$x" -o "$o"
    expect_error 2 "missing required option" "$exe" run cast "$x" -o "$o"
    expect_error 2 "option given twice" "$exe" run cast --dtype=f32 --dtype=f64 "$x" -o "$o"
    expect_error 2 "bad backend" "$exe" run copy --backend=gpu "$x" -o "$o"
    expect_error 2 "backend given twice" "$exe" run copy --backend=ref --backend=cpu "$x" -o "$o"
    expect_error 2 "missing input file" "$exe" run copy "$tmp/nope.npy" -o "$o"
    expect_error 2 "no input" "$exe" run copy -o "$o"
    expect_error 2 "too many inputs" "$exe" run copy "$x" "$x" -o "$o"
    expect_error 2 "no output" "$exe" run copy "$x"
    expect_error 2 "-o without a file" "$exe" run copy "$x" -o
    expect_error 2 "too many outputs" "$exe" run copy "$x" -o "$o" -o "$tmp/p.npy"
    expect_error 2 "output into a missing directory" "$exe" run copy "$x" -o "$tmp/no/dir/o.npy"
    expect_error 2 "an input that is not .npy" "$exe" run copy "$data/bad-magic.npy" -o "$o"
    expect_error 2 "an input that is a directory" "$exe" run copy "$data" -o "$o"
    # an unknown op suggests the nearest names
    expect_error 2 "a mistyped op" "$exe" run dilat "$x" -o "$o"
    grep -q "did you mean dilate" "$tmp/err" && ok "dilat: suggests dilate" || bad "dilat: $(cat "$tmp/err")"
    expect_error 2 "a mistyped op (transposed letters)" "$exe" run conencted_components "$x" -o "$o"
    grep -q "did you mean connected_components" "$tmp/err" && ok "suggests connected_components" ||
        bad "conencted_components: $(cat "$tmp/err")"
    expect_error 2 "an unrelated name" "$exe" run frobnicate "$x" -o "$o"
    grep -q "did you mean" "$tmp/err" && bad "frobnicate: suggested $(cat "$tmp/err")" || ok "nothing close to frobnicate"
    # a NIfTI or gzip input gets a hint to convert it with nibabel
    printf '\134\001\000\000nifti-1 header of 348 bytes, here cut short' >"$tmp/brain.nii"
    expect_error 2 "a NIfTI input" "$exe" run copy "$tmp/brain.nii" -o "$o"
    grep -q "NIfTI.*nibabel" "$tmp/err" && ok "NIfTI: a nibabel hint" || bad "NIfTI: $(cat "$tmp/err")"
    printf '\037\213\010\000\000\000\000\000' >"$tmp/brain.nii.gz"
    expect_error 2 "a gzip input" "$exe" run copy "$tmp/brain.nii.gz" -o "$o"
    grep -q "gzip.*nibabel" "$tmp/err" && ok "gzip: a nibabel hint" || bad "gzip: $(cat "$tmp/err")"
    # NITRIX_BACKEND is named as the source of a backend request, never "the caller"
    for op in dilate morph; do
        run env NITRIX_BACKEND=cuda "$exe" run $op "$data/x-u8.npy" -o "$tmp/b.npy"
        if [ "$rc" -eq 0 ]; then
            ok "NITRIX_BACKEND=cuda $op: ran (a GPU answered)"
        elif grep -q "caller" "$tmp/err" || ! grep -q "NITRIX_BACKEND" "$tmp/err"; then
            bad "NITRIX_BACKEND=cuda $op: $(cat "$tmp/err")"
        else
            ok "NITRIX_BACKEND=cuda $op: the message names NITRIX_BACKEND"
        fi
    done
    # log levels: no debug lines unless asked for; an unusable cache gives at most one warning
    : >"$tmp/not-a-dir"
    run env NITRIX_CACHE_DIR="$tmp/not-a-dir/cache" "$exe" run dilate "$data/x-u8.npy" -o "$tmp/l.npy"
    [ "$rc" -eq 0 ] && ok "an unusable cache directory: the run works" || bad "unusable cache: exit $rc"
    if grep -q "debug:" "$tmp/err"; then
        bad "debug lines without NITRIX_LOG=debug: $(cat "$tmp/err")"
    else
        ok "no debug lines by default"
    fi
    n=$(grep -c "warning:" "$tmp/err")
    [ "$n" -le 1 ] && ok "an unusable cache: $n warning(s)" || bad "an unusable cache: $n warnings: $(cat "$tmp/err")"
    run env NITRIX_LOG=debug NITRIX_CACHE_DIR="$tmp/not-a-dir/cache" "$exe" run dilate --size=5 "$data/x-u8.npy" -o "$tmp/l.npy"
    grep -q "debug:" "$tmp/err" && ok "NITRIX_LOG=debug shows debug lines" || bad "NITRIX_LOG=debug: $(cat "$tmp/err")"
    expect_error 2 "a bad NITRIX_LOG" env NITRIX_LOG=loud "$exe" run copy "$x" -o "$o"
    nl='
'
    expect_error 2 "a newline in a value stays one line" "$exe" run cast "--dtype=f3${nl}2" "$x" -o "$o"
    if [ -e "$o" ]; then
        bad "a rejected command line wrote an output"
    else
        ok "rejected command lines write nothing"
    fi
}

# ---------------------------------------------------------------------------------------------
test_demo() {
    run "$exe" demo --size=16
    [ "$rc" -eq 0 ] && ok "demo --size=16 exits 0" || bad "demo --size=16: exit $rc: $(cat "$tmp/err")"
    expect_out "demo makes a 16^3 phantom" "^phantom: f32\[16,16,16\]"
    expect_out "demo round-trips .npy bit-identically" "^\.npy round trip.*bit-identical"
    expect_out "demo finishes" "^demo: ok\$"
    expect_out "demo tries the device round trip" "^cuda device round trip: \(not available: .\|[0-9]* bytes up and down, bit-identical\)"
    expect_out "demo runs the pipeline on ref" "^  ref   compile .* max |error| vs C loop"
    expect_out "demo reports cpu" "^  cpu   "
    expect_out "demo reports cuda" "^  cuda  "
    expect_rc 0 "demo under NITRIX_STRICT_BACKEND=1" env NITRIX_STRICT_BACKEND=1 "$exe" demo --size=8
    expect_rc 0 "demo under NITRIX_BACKEND=cuda" env NITRIX_BACKEND=cuda "$exe" demo --size=8
    expect_out "demo under NITRIX_BACKEND=cuda still runs ref" "^  ref   compile"
    run "$exe" demo
    [ "$rc" -eq 0 ] && ok "demo (default 64^3) exits 0" || bad "demo: exit $rc: $(cat "$tmp/err")"
    expect_out "demo makes a 64^3 phantom by default" "^phantom: f32\[64,64,64\]"
    expect_rc 0 "demo --help" "$exe" demo --help
    expect_out "demo --help prints usage" "^usage: nitrix demo"
    expect_error 2 "demo --size out of range" "$exe" demo --size=3
    expect_error 2 "demo --size not a number" "$exe" demo --size=big
    expect_error 2 "demo unknown option" "$exe" demo --backend=cpu
}


# ---------------------------------------------------------------------------------------------
# Output targets: what is at -o decides how it is written (docs/user-guide.md, ".npy files").
test_targets() {
    x="$data/x-f64.npy"
    d="$tmp/targets"
    mkdir "$d"
    expect_rc 0 "-o /dev/null is a sink" "$exe" run copy "$x" -o /dev/null
    if [ -c /dev/null ]; then ok "/dev/null is still a character device"; else bad "/dev/null was replaced"; fi
    if [ -w /dev/full ]; then
        expect_error 1 "-o /dev/full fails (ENOSPC)" "$exe" run copy "$x" -o /dev/full
        grep -q "No space left" "$tmp/err" && ok "/dev/full: the message says why" ||
            bad "/dev/full: $(cat "$tmp/err")"
        [ -c /dev/full ] && ok "/dev/full is still a character device" || bad "/dev/full was replaced"
    fi
    # an 0600 file stays 0600; an 0640 file stays 0640
    for m in 600 640; do
        : >"$d/m$m.npy"
        chmod "$m" "$d/m$m.npy"
        expect_rc 0 "an existing $m file is replaced" "$exe" run copy "$x" -o "$d/m$m.npy"
        got=$(ls -l "$d/m$m.npy" | cut -c1-10)
        want=$( [ "$m" = 600 ] && echo "-rw-------" || echo "-rw-r-----")
        [ "$got" = "$want" ] && ok "mode $m kept ($got)" || bad "mode $m became $got"
        same "the $m file holds the array" "$d/m$m.npy" "$x"
    done
    # a symbolic link: the file it names is written, the link stays a link
    cp "$data/x-i32.npy" "$d/real.npy"
    ln -s real.npy "$d/link.npy"
    expect_rc 0 "-o a symbolic link" "$exe" run copy "$x" -o "$d/link.npy"
    [ -L "$d/link.npy" ] && ok "the link is still a link" || bad "the link was replaced"
    same "the file the link names is written" "$d/real.npy" "$x"
    # a chain of links into another directory
    mkdir "$d/sub"
    ln -s "$d/sub/deep.npy" "$d/sub/l2.npy"
    ln -s sub/l2.npy "$d/l1.npy"
    expect_rc 0 "-o a dangling chain of links" "$exe" run copy "$x" -o "$d/l1.npy"
    [ -L "$d/l1.npy" ] && [ -L "$d/sub/l2.npy" ] && ok "both links stay links" || bad "a link was replaced"
    same "a dangling link creates the file it names" "$d/sub/deep.npy" "$x"
    ln -s "$d/no/such/dir/f.npy" "$d/broken.npy"
    expect_error 1 "a link into a missing directory fails" "$exe" run copy "$x" -o "$d/broken.npy"
    [ -L "$d/broken.npy" ] && ok "the broken link is left as it was" || bad "the broken link was replaced"
    # a hard link: written in place, so both names see the new array
    cp "$data/x-i32.npy" "$d/h1.npy"
    ln "$d/h1.npy" "$d/h2.npy"
    expect_rc 0 "-o a file with two hard links" "$exe" run copy "$x" -o "$d/h1.npy"
    same "the first name holds the array" "$d/h1.npy" "$x"
    same "the other hard link sees it too" "$d/h2.npy" "$x"
    # a directory: refused before any work, exit 2
    mkdir "$d/dir"
    expect_error 2 "-o a directory" "$exe" run copy "$x" -o "$d/dir"
    [ -d "$d/dir" ] && [ -z "$(ls -A "$d/dir")" ] && ok "the directory is untouched" || bad "the directory changed"
    # a FIFO: refused at once without a reader, written with one
    if mkfifo "$d/fifo" 2>/dev/null; then
        expect_error 1 "-o a FIFO without a reader" "$exe" run copy "$x" -o "$d/fifo"
        [ -p "$d/fifo" ] && ok "the FIFO is still a FIFO" || bad "the FIFO was replaced"
        cat "$d/fifo" >"$d/from-fifo" &
        reader=$!
        expect_rc 0 "-o a FIFO with a reader" "$exe" run copy "$x" -o "$d/fifo"
        wait "$reader"
        same "the reader got the array" "$d/from-fifo" "$x"
    fi
    # nothing was left beside the targets: only the files the tests made
    left=$(ls -A "$d" | grep -c '\.tmp$')
    [ "$left" -eq 0 ] && ok "no temporary files left" || bad "temporary files left: $(ls -A "$d")"

    # Several outputs are committed together (max_pool_with_indices_nd writes two).
    mp="max_pool_with_indices_nd --nspatial=1 --kernel=2"
    good="$tmp/good.npy"
    cp "$data/x-i32.npy" "$good"
    expect_error 2 "two outputs, the second a directory" "$exe" run $mp "$x" -o "$d/o1.npy" -o "$d/dir"
    [ ! -e "$d/o1.npy" ] && ok "no o1.npy left behind" || bad "o1.npy left behind"
    cp "$good" "$d/keep.npy"
    run "$exe" run $mp "$x" -o "$d/keep.npy" -o "$d/dir"
    same "an existing good first output is not overwritten" "$d/keep.npy" "$good"
    if [ -w /dev/full ]; then
        run "$exe" run $mp "$x" -o "$d/keep.npy" -o /dev/full
        [ "$rc" -eq 1 ] && ok "second output /dev/full: exit 1" || bad "second output /dev/full: exit $rc"
        same "the first output is untouched when the second fails" "$d/keep.npy" "$good"
        run "$exe" run $mp "$x" -o "$d/new1.npy" -o /dev/full
        [ ! -e "$d/new1.npy" ] && ok "no first output created when the second fails" ||
            bad "new1.npy left behind"
    fi
    if mkfifo "$d/fifo2" 2>/dev/null; then
        run "$exe" run $mp "$x" -o "$d/keep.npy" -o "$d/fifo2"
        [ "$rc" -eq 1 ] && ok "second output a FIFO without reader: exit 1" || bad "FIFO second: exit $rc"
        same "the first output is untouched when the FIFO is refused" "$d/keep.npy" "$good"
    fi
    expect_rc 0 "two outputs, both written" "$exe" run $mp "$x" -o "$d/v.npy" -o "$d/i.npy"
    [ -s "$d/v.npy" ] && [ -s "$d/i.npy" ] && ok "both outputs exist" || bad "an output is missing"
}

# ---------------------------------------------------------------------------------------------
# Inputs are read with a bound: the header, then exactly the data it declares.
# hdr DICT: a version 1.0 preamble and header of 128 bytes.
hdr() {
    printf '\223NUMPY\001\000\166\000%-117s\n' "$1"
}

test_streams() {
    o="$tmp/o.npy"
    expect_error 2 "/dev/zero as input fails at the magic" "$exe" run copy /dev/zero -o "$o"
    grep -q "bad magic" "$tmp/err" && ok "/dev/zero: bad magic" || bad "/dev/zero: $(cat "$tmp/err")"
    # a valid header, then endless zeros through a pipe: ends right after the declared data
    run sh -c "{ printf '\223NUMPY\001\000\166\000%-117s\n' \"{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }\"; cat /dev/zero; } | \"$exe\" run copy /dev/stdin -o \"$o\""
    [ "$rc" -eq 2 ] && grep -q "trailing data" "$tmp/err" && ok "an endless pipe ends with 'trailing data' (exit 2)" ||
        bad "endless pipe: exit $rc: $(cat "$tmp/err")"
    # the same through a named FIFO
    if mkfifo "$tmp/in.fifo" 2>/dev/null; then
        { hdr "{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }"; cat /dev/zero; } \
            >"$tmp/in.fifo" 2>/dev/null &
        writer=$!
        expect_error 2 "an endless FIFO ends with an error" "$exe" run copy "$tmp/in.fifo" -o "$o"
        kill "$writer" 2>/dev/null
        wait "$writer" 2>/dev/null
    fi
    # a stream declaring 8 TB that sends 32 bytes: truncated, without allocating the 8 TB
    run sh -c "{ printf '\223NUMPY\001\000\166\000%-117s\n' \"{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }\"; head -c 32 /dev/zero; } | \"$exe\" run copy /dev/stdin -o \"$o\""
    [ "$rc" -eq 2 ] && grep -q "truncated" "$tmp/err" && ok "a stream declaring 8 TB and sending 32 bytes: truncated (exit 2)" ||
        bad "oversized stream: exit $rc: $(cat "$tmp/err")"
    # the same as a regular file
    { hdr "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }"; head -c 32 /dev/zero; } >"$tmp/huge.npy"
    expect_error 2 "a file declaring 8 TB: truncated" "$exe" run copy "$tmp/huge.npy" -o "$o"
    grep -q "truncated" "$tmp/err" && ok "oversized file: says truncated" || bad "oversized: $(cat "$tmp/err")"
    head -c 150 "$data/x-f64.npy" >"$tmp/trunc.npy"
    expect_error 2 "a truncated file" "$exe" run copy "$tmp/trunc.npy" -o "$o"
    head -c 100 "$data/x-f64.npy" | { run "$exe" run copy /dev/stdin -o "$o"; echo "$rc" >"$tmp/rc"; }
    [ "$(cat "$tmp/rc")" -eq 2 ] && ok "a truncated header through a pipe: exit 2" || bad "truncated pipe: exit $(cat "$tmp/rc")"
    cat "$data/x-f64.npy" | "$exe" run copy /dev/stdin -o "$o" 2>"$tmp/err"
    same "a valid array through a pipe" "$o" "$data/x-f64.npy"
    # a stream header longer than 1 MiB is refused before it is read
    run sh -c "{ printf '\223NUMPY\002\000\000\000\000\100'; cat /dev/zero; } | \"$exe\" run copy /dev/stdin -o \"$o\""
    [ "$rc" -eq 2 ] && grep -q "header length" "$tmp/err" && ok "a 1 GiB stream header is refused" ||
        bad "huge stream header: exit $rc: $(cat "$tmp/err")"
    # out of memory is exit 1: a stream that sends more than the address space allows
    run sh -c "ulimit -v 1500000 2>/dev/null && \"$exe\" --version >/dev/null 2>&1 || exit 77; { printf '\223NUMPY\001\000\166\000%-117s\n' \"{'descr': '<u1', 'fortran_order': False, 'shape': (4000000000,), }\"; head -c 3000000000 /dev/zero; } | \"$exe\" run copy --backend=ref /dev/stdin -o \"$o\""
    if [ "$rc" -eq 77 ]; then
        ok "out of memory: skipped (no ulimit -v, or the build cannot start under it: sanitizers)"
    elif [ "$rc" -eq 1 ] && grep -q "out of memory" "$tmp/err"; then
        ok "out of memory is exit 1: $(cat "$tmp/err")"
    else
        bad "out of memory: exit $rc: $(head -c 300 "$tmp/err")"
    fi
}

# ---------------------------------------------------------------------------------------------
# One exit-code rule for every op of `nitrix run --list`: 2 for a bad command line or bad input,
# 1 only for a failure at run time. Each op's usage and options come from its --help.

# valid_value HINT RANGE: a value the option accepts, for filling required options.
valid_value() {
    lo=${2%%:*}
    case "$1" in
    int | ints) [ -n "$lo" ] && [ "$lo" -ge 1 ] 2>/dev/null && echo "$lo" || echo 1 ;;
    float | floats) echo 1 ;;
    bool) echo false ;;
    dtype) echo f32 ;;
    FILE.npy) echo none ;;
    *'|'*) echo "${1%%|*}" ;;
    *) echo REAL ;;
    esac
}

test_exit_codes() {
    x="$data/x-f64.npy"
    outdir="$tmp/outdir"
    mkdir "$outdir"
    export NITRIX_CACHE_DIR="$tmp/cache"
    nops=0
    for op in $("$exe" run --list | awk '{print $1}'); do
        nops=$((nops + 1))
        "$exe" run "$op" --help >"$tmp/help" 2>&1 || { bad "$op --help failed"; continue; }
        usage=$(head -n 1 "$tmp/help")
        nin=0
        nopt=0 # optional inputs, shown as [name.npy]
        nout=0
        prev=
        for w in $usage; do
            case "$w" in
            \[*.npy\]) nopt=$((nopt + 1)) ;;
            *.npy) [ "$prev" = "-o" ] && nout=$((nout + 1)) || nin=$((nin + 1)) ;;
            esac
            prev=$w
        done
        # the options: "  --name=hint  help (required)|(default d) [range lo:hi]"
        grep '^  --' "$tmp/help" | grep -v '^  --backend=' >"$tmp/opts"
        required=
        while IFS= read -r line; do
            spec=${line#  --}
            spec=${spec%% *}
            name=${spec%%=*}
            hint=${spec#*=}
            range=$(echo "$line" | sed -n 's/.*\[range \([^]]*\)\].*/\1/p')
            case "$line" in
            *"(required)"*) required="$required --$name=$(valid_value "$hint" "$range")" ;;
            esac
        done <"$tmp/opts"
        ins=
        i=0
        while [ $i -lt $nin ]; do ins="$ins $x"; i=$((i + 1)); done
        outs=
        i=1
        while [ $i -lt $nout ]; do outs="$outs -o $tmp/o$i.npy"; i=$((i + 1)); done
        # a directory as (the last) output
        expect_error 2 "$op: a directory as output" "$exe" run "$op" $required $ins $outs -o "$outdir"
        # a wrong number of inputs, an unknown option
        extra="$x"
        i=0
        while [ $i -lt $nopt ]; do extra="$extra $x"; i=$((i + 1)); done
        expect_error 2 "$op: one input too many" "$exe" run "$op" $required $ins $extra $outs \
            -o "$tmp/o.npy"
        expect_error 2 "$op: an unknown option" "$exe" run "$op" $required --no_such_option=1 $ins $outs -o "$tmp/o.npy"
        # every option: a value of the wrong type, out of range, a list too long
        while IFS= read -r line; do
            spec=${line#  --}
            spec=${spec%% *}
            name=${spec%%=*}
            hint=${spec#*=}
            range=$(echo "$line" | sed -n 's/.*\[range \([^]]*\)\].*/\1/p')
            others=$(echo "$required" | tr ' ' '\n' | grep -v "^--$name=" | tr '\n' ' ')
            case "$hint" in
            text) continue ;;
            esac
            expect_error 2 "$op --$name=nonsense" "$exe" run "$op" $others "--$name=nonsense" $ins $outs -o "$tmp/o.npy"
            case "$hint" in
            int | ints)
                lo=${range%%:*}
                hi=${range#*:}
                [ -n "$range" ] && [ -n "$lo" ] &&
                    expect_error 2 "$op --$name=$((lo - 1)) (below $range)" "$exe" run "$op" $others "--$name=$((lo - 1))" $ins $outs -o "$tmp/o.npy"
                [ -n "$range" ] && [ -n "$hi" ] &&
                    expect_error 2 "$op --$name=$((hi + 1)) (above $range)" "$exe" run "$op" $others "--$name=$((hi + 1))" $ins $outs -o "$tmp/o.npy"
                expect_error 2 "$op --$name=2^64 (overflows)" "$exe" run "$op" $others "--$name=18446744073709551617" $ins $outs -o "$tmp/o.npy"
                ;;
            esac
            case "$hint" in
            ints | floats)
                expect_error 2 "$op --$name: a list of 17 values" "$exe" run "$op" $others "--$name=1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1" $ins $outs -o "$tmp/o.npy"
                ;;
            esac
        done <"$tmp/opts"
        # inputs of every kind the fixtures have: exit 0 or 2, never 1 (bad input is not a
        # run-time failure)
        for f in $input_kinds; do
            ins=
            i=0
            while [ $i -lt $nin ]; do ins="$ins $data/$f.npy"; i=$((i + 1)); done
            run "$exe" run "$op" $required $ins $outs -o "$tmp/o.npy"
            if [ "$rc" -eq 0 ] || { [ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ]; }; then
                ok "$op on $f inputs: exit $rc"
            else
                bad "$op on $f inputs (options:$required): exit $rc: $(head -c 300 "$tmp/err")"
            fi
        done
    done
    [ "$nops" -ge 20 ] && ok "$nops ops swept" || bad "only $nops ops in nitrix run --list"
}

case "$mode" in
info) test_info "$3" ;;
run) data=$3 && test_run ;;
errors) data=$3 && test_errors ;;
demo) test_demo ;;
targets) data=$3 && test_targets ;;
streams) data=$3 && test_streams ;;
exit-codes)
    data=$3
    input_kinds="x-f64-0d x-bool x-i16-empty x-u8 x-i32 x-f32-fortran x-f64"
    [ "${4:-all}" = few ] && input_kinds="x-f64-0d x-bool"
    test_exit_codes
    ;;
*)
    echo "usage: cli-test.sh info|run|errors|demo NITRIX [ARG]" >&2
    exit 2
    ;;
esac

echo "cli $mode: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
