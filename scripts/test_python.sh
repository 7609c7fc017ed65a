#!/usr/bin/env bash
# The Python package's tests against $BUILD/libloom.so (BUILD defaults to build):
# 1. a newcomer's install: a fresh virtualenv outside the tree, `pip install
#    ./python` (which bundles $BUILD/libloom.so, python/setup.py), then
#    scripts/python_smoke.py from a directory outside the tree with LOOM_LIBRARY
#    unset: imports the installed package, which must load its bundled library,
#    and trains, evaluates and predicts with a canned estimator; then the same
#    with a pure-Python install (no built library) and `make install` into the
#    venv's prefix, where the package must find the installed library;
# 2. python/tests (pytest) with the package installed into the "py" venv
#    (scripts/peer_venv.sh py: numpy + pandas + pytest).
# Skips with a message when there is no python3 or PyPI is unreachable (no venv
# with numpy can be made). Exit status: non-zero when a step failed.
set -u
cd "$(dirname "$0")/.." || exit 1
root=$PWD
BUILD=${BUILD:-build}
export LOOM_BUILD_DIR=$root/$BUILD
if ! command -v python3 >/dev/null; then echo "SKIPPED: python tests: no python3"; exit 0; fi
if ! py=$(bash scripts/peer_venv.sh py 2>/dev/null); then
  echo "SKIPPED: python tests: could not create the numpy+pytest venv (PyPI unreachable?)"; exit 0
fi

# pip's words when it cannot reach the package index (numpy, setuptools come from PyPI)
NO_INDEX='NewConnectionError|Temporary failure in name resolution|Network is unreachable|No matching distribution found'
tmp=$(mktemp -d /tmp/loom_python_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv" >"$tmp/venv.log" 2>&1 || { cat "$tmp/venv.log"; echo "python tests: python3 -m venv failed"; exit 1; }
if ! "$tmp/venv/bin/python" -m pip install -q ./python >"$tmp/pip.log" 2>&1; then
  cat "$tmp/pip.log"
  if grep -qiE "$NO_INDEX" "$tmp/pip.log"; then echo "SKIPPED: python tests: PyPI unreachable from a fresh venv"; exit 0; fi
  echo "python tests: pip install ./python into a fresh venv failed"; exit 1
fi
mkdir -p "$tmp/elsewhere"
if ! (cd "$tmp/elsewhere" && env -u LOOM_LIBRARY "$tmp/venv/bin/python" "$root/scripts/python_smoke.py" "" "$root"); then
  echo "python tests: the installed package does not work from outside the tree"; exit 1
fi
# Without a built library the package is pure Python and finds an installed
# libloom: here `make install` into the venv's prefix.
if ! LOOM_BUILD_DIR=$tmp/none "$tmp/venv/bin/python" -m pip install -q --no-deps --force-reinstall ./python \
     >"$tmp/pip.log" 2>&1; then
  cat "$tmp/pip.log"; echo "python tests: pip install ./python without a built library failed"; exit 1
fi
${MAKE:-make} --no-print-directory -s install PREFIX="$tmp/venv" BUILD="$BUILD" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; echo "python tests: make install PREFIX=$tmp/venv failed"; exit 1; }
if ! (cd "$tmp/elsewhere" && env -u LOOM_LIBRARY "$tmp/venv/bin/python" "$root/scripts/python_smoke.py" \
      "$tmp/venv/lib/libloom.so.${SOVERSION:?}" "$root"); then
  echo "python tests: the package without a bundled library does not find the installed one"; exit 1
fi

"$py" -m pip install -q --no-deps --no-build-isolation ./python >/dev/null 2>&1 ||
  { echo "python tests: pip install ./python failed"; exit 1; }
export LOOM_LIBRARY=${LOOM_LIBRARY:-$root/$BUILD/libloom.so}
cd python && "$py" -m pytest -q -p no:cacheprovider tests "$@"
