#!/usr/bin/env bash
# The Python package's tests (python/tests, pytest) against build/libloom.so:
# installs the package with `pip install ./python` into the "py" venv
# (scripts/peer_venv.sh py: numpy + pytest), then runs pytest. Skips with a
# message when there is no python3 or the venv cannot be made (PyPI
# unreachable). Exit status: pytest's.
set -u
cd "$(dirname "$0")/.."
if ! command -v python3 >/dev/null; then echo "SKIPPED: python tests: no python3"; exit 0; fi
if ! py=$(bash scripts/peer_venv.sh py 2>/dev/null); then
  echo "SKIPPED: python tests: could not create the numpy+pytest venv (PyPI unreachable?)"; exit 0
fi
"$py" -m pip install -q --no-deps --no-build-isolation ./python >/dev/null 2>&1 ||
  { echo "python tests: pip install ./python failed"; exit 1; }
export LOOM_LIBRARY=${LOOM_LIBRARY:-$PWD/build/libloom.so}
cd python && "$py" -m pytest -q -p no:cacheprovider tests "$@"
