#!/usr/bin/env bash
# meson test --suite python: the pytest suite of the Python package against this build's library
# (NITRIX_LIBRARY) and the package sources (PYTHONPATH), run by the Python of the virtual
# environment that the README's set-up command makes (.venv at the source root, with
# tests/python/requirements.txt), or by $NITRIX_TEST_PYTHON. Without one the test is skipped
# (exit 77), unless NITRIX_REQUIRE_PYTHON_TESTS=1 (CI) makes that a failure.
# Arguments: SOURCE_ROOT BUILD_PYTHON_DIR [pytest arguments...]
set -u
src=$1
pydir=$2
shift 2
py=${NITRIX_TEST_PYTHON:-$src/.venv/bin/python}
if ! "$py" -c "import pytest, numpy, scipy" >/dev/null 2>&1; then
    msg="no Python with pytest, numpy and scipy at $py (make it: python3 -m venv .venv &&"
    msg="$msg .venv/bin/pip install -r tests/python/requirements.txt .)"
    if [ "${NITRIX_REQUIRE_PYTHON_TESTS:-0}" = 1 ]; then
        echo "python tests: $msg" >&2
        exit 1
    fi
    echo "python tests skipped: $msg"
    exit 77
fi
export NITRIX_LIBRARY="$pydir/libnitrix.so"
export NITRIX_STUB_DIR="$pydir"
export PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
cd "$src"
exec "$py" -m pytest -p no:cacheprovider -q -rs "$src/tests/python" "$@"
