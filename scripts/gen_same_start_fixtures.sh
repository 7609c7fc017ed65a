#!/usr/bin/env bash
# TF 2.15's metrics of python/examples/tf_programs/same_start.py (first line
# changed to `import tensorflow as tf`) for seeds 0 and 1, one
# "<seed> METRIC ..." line each, into tests/fixtures/tf_programs/same_start.txt
# (python/tests/test_tf_programs.py checks loom's against them).
#   scripts/gen_same_start_fixtures.sh        (TF_PY: default scripts/peer_venv.sh tf)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
TF_PY=${TF_PY:-$(bash "$root/scripts/peer_venv.sh" tf)}
# TF 2.15's pandas_input_fn predates pandas 3 (its string dtype)
"$TF_PY" -c "import sys, pandas; sys.exit(int(pandas.__version__.split('.')[0]) >= 3)" 2>/dev/null ||
  "$TF_PY" -m pip install -q "pandas<3" "numpy==$("$TF_PY" -c 'import numpy; print(numpy.__version__)')" >&2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
sed '1s/.*/import tensorflow as tf/' "$root/python/examples/tf_programs/same_start.py" > "$tmp/same_start.py"
out="$root/tests/fixtures/tf_programs/same_start.txt"
mkdir -p "$(dirname "$out")"
{
  echo "# scripts/gen_same_start_fixtures.sh: TF $("$TF_PY" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null)"
  for seed in 0 1; do
    echo "$seed $(cd "$tmp" && DIAMONDS_DIR="$root/tests/fixtures/data" TF_CPP_MIN_LOG_LEVEL=3 "$TF_PY" same_start.py "$seed" 2>/dev/null | grep '^METRIC')"
  done
} > "$out.tmp"
mv "$out.tmp" "$out"
cat "$out"
